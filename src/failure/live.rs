//! `[failure] live`: lines an agent CLI prints while it runs that tell the runner the attempt
//! cannot succeed, so that it ends the attempt at once instead of at its time limit (issue 29).
//!
//! Claude Code, Gemini CLI and Qwen Code retry a rejected key, a used-up quota or a rate limit
//! on their own (ten times, minutes), printing the cause as they go — Claude Code as
//! `{"type":"system","subtype":"api_retry",…,"error":"authentication_failed"}` events on
//! stdout, Qwen Code as `Retrying in 60s (attempt 1/10): [API Error: 429 You exceeded your
//! current quota…]` on stderr. A definition lists the lines that mean "give up":
//!
//! ```toml
//! [failure]
//! live = [
//!   { kind = "auth", stream = "stdout", regex = '"subtype":"api_retry".*"error":"authentication_failed"',
//!     quote = "API error {/error_status} ({/error}), retry {/attempt} of {/max_retries}" },
//!   { kind = "quota", stream = "stderr", regex = '^Retrying in \d+s .*quota' },
//! ]
//! ```
//!
//! - `kind`: `auth` or `quota` end the attempt as soon as a line matches; `rate_limited` ends
//!   it only when the wait the line names ("Retrying in 60s", "try again in 2m") is longer
//!   than the attempt has left (a shorter one is the CLI's to wait out).
//! - `regex`: matched case-insensitively against each whole line (at most [`LINE_MAX`]
//!   bytes; longer lines are not matched).
//! - `stream`: `stdout`, `stderr`, or both when left out. Only the CLI's own lines should
//!   match: a pattern loose enough to match what the agent writes about its work would end
//!   good attempts.
//! - `quote`: what the reason quotes; `{/pointer}` pieces are read from the line as JSON
//!   (an event; `?` when the line is not JSON or has no such value). Without it, the line
//!   itself (trimmed, cut to 200 characters).

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::{FailureKind, Pattern, compile};

/// Longest line matched, bytes (a longer line — a big tool result in a JSONL stream — is
/// never a CLI's error report).
pub(crate) const LINE_MAX: usize = 64 * 1024;

/// Which output of the agent a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// One `live` entry as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LiveSpec {
    kind: FailureKind,
    regex: String,
    #[serde(default)]
    stream: Option<Stream>,
    #[serde(default)]
    quote: Option<String>,
}

/// One compiled `live` entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LiveRule {
    kind: FailureKind,
    regex: Pattern,
    stream: Option<Stream>,
    quote: Option<String>,
}

impl LiveRule {
    /// The kind a matching line ends the attempt with.
    pub(crate) fn kind(&self) -> FailureKind {
        self.kind
    }
}

impl LiveSpec {
    /// Compiled; errors name the entry's key (`` `failure.live[0].kind` ``).
    pub(super) fn compile(self, i: usize) -> Result<LiveRule, String> {
        if !matches!(
            self.kind,
            FailureKind::Auth | FailureKind::Quota | FailureKind::RateLimited
        ) {
            return Err(format!(
                "`failure.live[{i}].kind`: {:?} cannot end an attempt while it runs; use \"auth\", \"quota\" or \"rate_limited\"",
                self.kind.as_str()
            ));
        }
        let regex = compile(&self.regex).map_err(|e| format!("`failure.live[{i}].regex`: {e}"))?;
        if regex.0.is_match("") {
            return Err(format!(
                "`failure.live[{i}].regex`: {:?} matches an empty line, so it would end every attempt at its first line; match the CLI's own words",
                self.regex
            ));
        }
        Ok(LiveRule {
            kind: self.kind,
            regex,
            stream: self.stream,
            quote: self.quote,
        })
    }
}

/// A line that matched a `live` entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LiveHit {
    /// The entry's kind.
    pub kind: FailureKind,
    /// What the reason quotes (the entry's `quote` filled in, or the line).
    pub text: String,
    /// The line itself (trimmed, cut to 200 characters), for a pattern's hint.
    pub line: String,
    /// The wait the line names, if any ("Retrying in 60s").
    pub wait: Option<Duration>,
}

impl LiveHit {
    /// Whether this hit ends an attempt that has `left` of its time limit (`None`: no limit):
    /// always for `auth` and `quota`; for `rate_limited` when the named wait is longer than
    /// what is left.
    pub(crate) fn ends_attempt(&self, left: Option<Duration>) -> bool {
        match self.kind {
            FailureKind::RateLimited => matches!((self.wait, left), (Some(w), Some(l)) if w > l),
            _ => true,
        }
    }

    /// The failure's reason: the quoted text, what the runner did, and `hint` when the
    /// definition's patterns give one.
    pub(crate) fn reason(&self, hint: Option<&str>) -> String {
        let mut reason = format!(
            "stopped at once: the agent CLI reported {} while it ran: {}",
            self.kind, self.text
        );
        if let (FailureKind::RateLimited, Some(w)) = (self.kind, self.wait) {
            reason.push_str(&format!(
                " (a wait of {} is longer than the attempt had left)",
                humantime::format_duration(Duration::from_secs(w.as_secs()))
            ));
        }
        if let Some(hint) = hint {
            reason.push_str(&format!(" ({hint})"));
        }
        reason
    }
}

/// The first of `rules` that matches `line` of `stream`, as a hit; `None` when none does
/// (or the line is longer than [`LINE_MAX`]).
pub(crate) fn first_hit(rules: &[LiveRule], stream: Stream, line: &[u8]) -> Option<LiveHit> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    if line.len() > LINE_MAX {
        return None;
    }
    let line = String::from_utf8_lossy(line);
    let line = line.trim();
    let rule = rules
        .iter()
        .filter(|r| r.stream.is_none_or(|s| s == stream))
        .find(|r| r.regex.0.is_match(line))?;
    let text = match &rule.quote {
        Some(quote) => fill_quote(quote, line),
        None => cut(line, 200),
    };
    Some(LiveHit {
        // A request too large is no rate limit to wait out: the attempt ends at once.
        kind: match super::never_succeeds(line) {
            true => FailureKind::Input,
            false => rule.kind,
        },
        wait: super::retry_after(line),
        text,
        line: cut(line, 200),
    })
}

/// Whether any of `rules` reads `stream`.
pub(crate) fn reads(rules: &[LiveRule], stream: Stream) -> bool {
    rules.iter().any(|r| r.stream.is_none_or(|s| s == stream))
}

/// `quote` with each `{/pointer}` replaced by that value of `line` read as JSON (a string
/// as is, anything else as JSON; a missing one as `?`).
fn fill_quote(quote: &str, line: &str) -> String {
    let event: Option<Value> = serde_json::from_str(line).ok();
    let mut out = String::new();
    let mut rest = quote;
    while let Some(start) = rest.find("{/") {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let pointer = &rest[start + 1..start + len];
        match event.as_ref().and_then(|e| e.pointer(pointer)) {
            Some(Value::String(s)) => out.push_str(s),
            Some(Value::Null) | None => out.push('?'),
            Some(v) => out.push_str(&v.to_string()),
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    cut(&out, 200)
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(kind: &str, stream: Option<&str>, regex: &str, quote: Option<&str>) -> LiveRule {
        let stream = stream
            .map(|s| format!("\nstream = {s:?}"))
            .unwrap_or_default();
        let quote = quote
            .map(|q| format!("\nquote = {q:?}"))
            .unwrap_or_default();
        let spec: LiveSpec = toml::from_str(&format!(
            "kind = {kind:?}\nregex = {regex:?}{stream}{quote}"
        ))
        .expect("spec");
        spec.compile(0).expect("compiles")
    }

    /// Claude Code 2.1.332's retry event (its bundle: `subtype:"api_retry"`, `error` from
    /// the status: 401/403 → `authentication_failed`).
    const CLAUDE_RETRY: &str = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":583,"error_status":401,"error":"authentication_failed","session_id":"s1"}"#;

    #[test]
    fn a_retried_request_too_large_ends_the_attempt_at_once_as_input() {
        let rules = [rule("rate_limited", None, r"^Retrying in \d+s", None)];
        let line = b"Retrying in 20s: 429 Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 45000.\n";
        let hit = first_hit(&rules, Stream::Stderr, line).expect("hit");
        assert_eq!(hit.kind, FailureKind::Input);
        assert!(hit.ends_attempt(Some(Duration::from_secs(3600))));
        let hit =
            first_hit(&rules, Stream::Stderr, b"Retrying in 20s: 429 slow down\n").expect("hit");
        assert!(!hit.ends_attempt(Some(Duration::from_secs(3600))), "a wait");
    }

    #[test]
    fn a_json_event_is_quoted_through_its_pointers_and_auth_ends_at_once() {
        let rules = [rule(
            "auth",
            Some("stdout"),
            r#""subtype":"api_retry".*"error":"authentication_failed""#,
            Some("API error {/error_status} ({/error}), retry {/attempt} of {/max_retries}{/nope}"),
        )];
        let hit = first_hit(&rules, Stream::Stdout, CLAUDE_RETRY.as_bytes()).expect("hit");
        assert_eq!(hit.kind, FailureKind::Auth);
        assert_eq!(
            hit.text,
            "API error 401 (authentication_failed), retry 1 of 10?"
        );
        assert!(hit.ends_attempt(Some(Duration::from_secs(600))));
        assert!(hit.ends_attempt(None));
        // The same line on the other stream, or a rate-limit event, is not this rule's.
        assert_eq!(
            first_hit(&rules, Stream::Stderr, CLAUDE_RETRY.as_bytes()),
            None
        );
        let other = CLAUDE_RETRY.replace("authentication_failed", "rate_limit");
        assert_eq!(first_hit(&rules, Stream::Stdout, other.as_bytes()), None);
    }

    #[test]
    fn a_rate_limit_ends_the_attempt_only_when_its_wait_outlasts_the_time_left() {
        let rules = [rule("rate_limited", None, r"^Retrying in \d+s", None)];
        let line = b"Retrying in 60s (attempt 1/10): [API Error: 429 Too many requests]\n";
        let hit = first_hit(&rules, Stream::Stderr, line).expect("hit");
        assert_eq!(hit.wait, Some(Duration::from_secs(60)));
        assert!(hit.ends_attempt(Some(Duration::from_secs(59))));
        assert!(!hit.ends_attempt(Some(Duration::from_secs(61))));
        assert!(!hit.ends_attempt(None), "no limit: the CLI waits it out");
        assert!(
            hit.reason(Some("slow down")).contains("a wait of 1m"),
            "{}",
            hit.reason(None)
        );
    }

    #[test]
    fn a_line_longer_than_the_cap_is_never_matched() {
        let rules = [rule("quota", None, "quota", None)];
        let mut long = vec![b'x'; LINE_MAX];
        long.extend_from_slice(b" quota");
        assert_eq!(first_hit(&rules, Stream::Stdout, &long), None);
        assert!(first_hit(&rules, Stream::Stdout, b"quota exceeded").is_some());
    }

    #[test]
    fn kinds_that_cannot_be_told_while_running_and_empty_matches_are_refused() {
        for regex in ["", "x*", "^"] {
            let spec: LiveSpec =
                toml::from_str(&format!("kind = \"auth\"\nregex = {regex:?}")).expect("spec");
            let e = spec.compile(1).expect_err("matches every line");
            assert!(e.contains("matches an empty line"), "{e}");
        }
        let spec: LiveSpec = toml::from_str("kind = \"agent_error\"\nregex = \"x\"").expect("spec");
        let e = spec.compile(2).expect_err("refused");
        assert!(e.starts_with("`failure.live[2].kind`"), "{e}");
        let spec: LiveSpec = toml::from_str("kind = \"auth\"\nregex = \"(\"").expect("spec");
        assert!(
            spec.compile(0)
                .expect_err("bad regex")
                .contains("live[0].regex")
        );
    }
}
