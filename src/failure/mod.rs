//! Failure kinds: why an attempt did not complete, as one word a person or a program can act
//! on (retry later, fix the key, fix the prompt), and the `[failure]` rules of a runner
//! definition that classify an agent CLI's error text into one.
//!
//! The kinds are the output column `failure_kind` (DESIGN §4 "failure kinds"); the patterns
//! of each built-in definition are written from what the real CLI prints (the stand-ins in
//! `tests/e2e/` reproduce those texts).

pub(crate) mod live;

use std::collections::BTreeMap;
use std::fmt;

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why an attempt (or an item) did not complete. Empty (`None`) when it completed, and for
/// `blocked` (the agent stopped on purpose and said why).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FailureKind {
    /// The provider refused for now: too many requests (HTTP 429, "rate limit").
    RateLimited,
    /// A quota or usage limit is used up (often daily, with a reset time).
    Quota,
    /// The key or login was missing, wrong or not allowed (HTTP 401/403).
    Auth,
    /// The model API failed (5xx, overloaded, a broken stream).
    ApiError,
    /// The agent CLI failed for another reason (its own error, a crash, a signal, could not
    /// start), or its report says `failed`.
    AgentError,
    /// The agent could not begin any work: its command is broken (a script that is not there,
    /// a program that crashes as it starts: exit 126/127, `can't open file`, `command not
    /// found`, `Cannot find module`) or its API cannot be reached (connection refused, DNS,
    /// TLS). When a run's first attempts all fail so, the same way, the team stops starting
    /// new ones (`Gate`).
    Setup,
    /// The item's own input cannot be used: a file its instruction inlines
    /// ([`crate::inline`]) is missing, outside the batch's folder, over its cap,
    /// binary, or not an image. The item never starts and is not retried; fixing the row or
    /// the file and `--only failed` runs it.
    Input,
    /// The agent ended without writing a report.
    NoReport,
    /// A report was found but breaks the format, contradicts itself or fails `output_schema`.
    InvalidReport,
    /// The `--verify` command did not pass.
    VerifyFailed,
    /// Stopped at its time limit.
    TimedOut,
    /// Interrupted (Ctrl-C, SIGTERM) or not started because of it.
    Cancelled,
    /// Never started (a prerequisite did not complete, or the team stopped starting items).
    Skipped,
    /// The teammate's branch could not be merged (`--merge` with `--isolate worktree`).
    MergeConflict,
}

impl FailureKind {
    /// Every kind, in the order of the documentation.
    pub(crate) const ALL: [FailureKind; 14] = [
        FailureKind::RateLimited,
        FailureKind::Quota,
        FailureKind::Auth,
        FailureKind::ApiError,
        FailureKind::AgentError,
        FailureKind::Setup,
        FailureKind::Input,
        FailureKind::NoReport,
        FailureKind::InvalidReport,
        FailureKind::VerifyFailed,
        FailureKind::TimedOut,
        FailureKind::Cancelled,
        FailureKind::Skipped,
        FailureKind::MergeConflict,
    ];

    /// The word used in files and events (`rate_limited`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FailureKind::RateLimited => "rate_limited",
            FailureKind::Quota => "quota",
            FailureKind::Auth => "auth",
            FailureKind::ApiError => "api_error",
            FailureKind::AgentError => "agent_error",
            FailureKind::Setup => "setup",
            FailureKind::Input => "input",
            FailureKind::NoReport => "no_report",
            FailureKind::InvalidReport => "invalid_report",
            FailureKind::VerifyFailed => "verify_failed",
            FailureKind::TimedOut => "timed_out",
            FailureKind::Cancelled => "cancelled",
            FailureKind::Skipped => "skipped",
            FailureKind::MergeConflict => "merge_conflict",
        }
    }

    /// The kind named `word`, if any.
    pub(crate) fn parse(word: &str) -> Option<FailureKind> {
        FailureKind::ALL.into_iter().find(|k| k.as_str() == word)
    }

    /// Whether an agent may state this kind in its report (`"failure_kind"`): the kinds
    /// about the agent's own work and its provider, not the runner's bookkeeping.
    pub(crate) fn reportable(self) -> bool {
        matches!(
            self,
            FailureKind::RateLimited
                | FailureKind::Quota
                | FailureKind::Auth
                | FailureKind::ApiError
                | FailureKind::AgentError
        )
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `[[failure.patterns]]` entry as written: `{ kind = "rate_limited", regex = "...",
/// hint = "..." }`; `hint`, when given, is what to do, added to the reason of a failure the
/// pattern recognised (gemini's "Invalid auth method selected." names the setting).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternSpec {
    kind: FailureKind,
    regex: String,
    #[serde(default)]
    hint: Option<String>,
}

/// `[failure]` of a runner definition as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
struct FailureSpec {
    #[serde(default)]
    exit_codes: BTreeMap<String, FailureKind>,
    #[serde(default)]
    patterns: Vec<PatternSpec>,
    #[serde(default)]
    ignore: Vec<String>,
    #[serde(default)]
    live: Vec<live::LiveSpec>,
}

/// A compiled regular expression that compares by its source text.
#[derive(Debug, Clone)]
struct Pattern(Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

fn compile(source: &str) -> Result<Pattern, String> {
    RegexBuilder::new(source)
        .case_insensitive(true)
        .size_limit(1 << 20)
        .build()
        .map(Pattern)
        .map_err(|e| format!("invalid regex {source:?}: {e}"))
}

/// A runner definition's `[failure]` table, compiled:
///
/// ```toml
/// [failure]
/// exit_codes = { 41 = "auth", 53 = "agent_error" }        # exit code = kind
/// patterns = [                                           # first match wins
///   { kind = "quota", regex = "exhausted your daily quota" },
///   { kind = "rate_limited", regex = "\\b429\\b|rate limit" },
/// ]
/// ignore = ["^Ripgrep not available"]                    # lines never quoted (stderr, text stdout)
/// live = [{ kind = "quota", stream = "stderr", regex = "^Retrying in .*quota" }]  # see [`live`]
/// ```
///
/// Regexes are the `regex` crate's syntax, matched case-insensitively. Errors (a bad regex,
/// an exit code that is not an integer, an unknown kind) start with the entry's key path in
/// backticks (`` `failure.patterns[1].regex`: … ``); the definition loader adds the file and
/// the line of that entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(try_from = "FailureSpec")]
pub(crate) struct FailureRules {
    exit_codes: BTreeMap<i32, FailureKind>,
    patterns: Vec<(FailureKind, Pattern)>,
    /// Each own pattern's `hint`, by its index in `patterns`.
    hints: Vec<Option<String>>,
    ignore: Vec<Pattern>,
    /// Lines that end an attempt while it runs (`live`, [`live`]).
    live: Vec<live::LiveRule>,
}

impl FailureRules {
    /// No rules of its own (the built-in patterns still apply).
    #[cfg(test)]
    pub(crate) const NONE: FailureRules = FailureRules {
        exit_codes: BTreeMap::new(),
        patterns: Vec::new(),
        hints: Vec::new(),
        ignore: Vec::new(),
        live: Vec::new(),
    };
}

impl TryFrom<FailureSpec> for FailureRules {
    type Error = String;

    fn try_from(spec: FailureSpec) -> Result<FailureRules, String> {
        let mut exit_codes = BTreeMap::new();
        for (code, kind) in spec.exit_codes {
            let n: i32 = code
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=255).contains(n))
                .ok_or_else(|| {
                    format!(
                        "`failure.exit_codes.{code}`: {code:?} is not an exit code of a failure (an integer from 1 to 255)"
                    )
                })?;
            exit_codes.insert(n, kind);
        }
        let patterns = spec
            .patterns
            .iter()
            .enumerate()
            .map(|(i, p)| {
                compile(&p.regex)
                    .map(|r| (p.kind, r))
                    .map_err(|e| format!("`failure.patterns[{i}].regex`: {e}"))
            })
            .collect::<Result<_, _>>()?;
        let ignore = spec
            .ignore
            .iter()
            .enumerate()
            .map(|(i, s)| compile(s).map_err(|e| format!("`failure.ignore[{i}]`: {e}")))
            .collect::<Result<_, _>>()?;
        let hints = spec.patterns.iter().map(|p| p.hint.clone()).collect();
        let live = spec
            .live
            .into_iter()
            .enumerate()
            .map(|(i, l)| l.compile(i))
            .collect::<Result<_, _>>()?;
        Ok(FailureRules {
            exit_codes,
            patterns,
            hints,
            ignore,
            live,
        })
    }
}

/// What a provider says of a request that can never succeed as sent, however long one
/// waits: larger than the model or the account's per-minute limit takes. OpenAI's 429
/// "Request too large for gpt-4o … on tokens per min (TPM): Limit 30000, Requested 45000"
/// and its 400 "maximum context length is …" (`context_length_exceeded`), Gemini's 400 "The
/// input token count (…) exceeds the maximum number of tokens allowed", Anthropic's "prompt is
/// too long: … tokens > … maximum".
const NEVER_SUCCEEDS: &str = r"request too large for|input token count.{0,40}exceeds the maximum|maximum context length is|context_length_exceeded|prompt is too long";

/// Whether `text` says its request can never succeed as sent ([`NEVER_SUCCEEDS`]): kind
/// [`FailureKind::Input`] whatever status or pattern would say otherwise (a 429 that is no
/// rate limit), so the item fails at once and the team neither pauses nor shrinks. The one
/// test used by the HTTP backends, the `[failure]` classification and the live lines.
pub(crate) fn never_succeeds(text: &str) -> bool {
    static RE: std::sync::OnceLock<Option<Pattern>> = std::sync::OnceLock::new();
    RE.get_or_init(|| compile(NEVER_SUCCEEDS).ok())
        .as_ref()
        .is_some_and(|p| p.0.is_match(text))
}

/// Patterns every definition falls back to, after its own: the words providers and their
/// SDKs use for each kind (HTTP status codes, OpenAI/Anthropic/Gemini error types).
const BUILT_IN: &[(FailureKind, &str)] = &[
    (
        FailureKind::Quota,
        r"insufficient_quota|exceeded your current quota|quota exceeded|exhausted your .{0,20}quota|usage limit|daily limit|credit balance is too low|billing_error|insufficient (credits|balance)",
    ),
    (
        FailureKind::RateLimited,
        r"\b429\b|rate[ _-]?limit|too many requests|resource_exhausted|throttl",
    ),
    (
        FailureKind::Auth,
        r"\b40[13]\b|unauthori[sz]ed|authentication|invalid.{0,20}(api[ _-]?key|x-api-key|token)|incorrect api key|api[ _-]?key.{0,40}(missing|not (set|found|provided|valid))|no api key|permission_denied",
    ),
    (
        FailureKind::ApiError,
        r"\b5\d\d\b|overloaded|internal server error|service unavailable|bad gateway|gateway timeout|api error|stream (disconnected|error)",
    ),
    (
        // The command or the endpoint is broken: python's, dash's and node's words for a
        // script or module that is not there or does not parse, a shell's, the loader's; a refused
        // connection or an unknown host as Node (ECONNREFUSED, ENOTFOUND) and others say it.
        FailureKind::Setup,
        r"can't open file|cannot open [^:]*: no such file|cannot find module|command not found|exec format error|error while loading shared libraries|modulenotfounderror|no module named|^syntaxerror|\beconnrefused\b|connection refused|\benotfound\b|getaddrinfo|name or service not known|failed to lookup address|certificate verify failed|invalid peer certificate",
    ),
];

fn built_in() -> &'static [(FailureKind, Pattern)] {
    static RULES: std::sync::OnceLock<Vec<(FailureKind, Pattern)>> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        BUILT_IN
            .iter()
            .filter_map(|(k, s)| compile(s).ok().map(|p| (*k, p)))
            .collect()
    })
}

/// The kind of the first of `rules` whose pattern matches `text`.
fn first_kind<'a>(
    rules: impl IntoIterator<Item = &'a (FailureKind, Pattern)>,
    text: &str,
) -> Option<FailureKind> {
    rules
        .into_iter()
        .find(|(_, p)| p.0.is_match(text))
        .map(|(k, _)| *k)
}

/// What an attempt left that can say why it failed, most telling first.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ErrorEvidence<'a> {
    /// The definition's `[result] error_text` value (the CLI's own error message).
    pub error_text: Option<&'a str>,
    /// The agent's final text when the CLI's error flag (`is_error`) is true.
    pub flagged_text: Option<&'a str>,
    /// The end of the agent's stderr (the last few KiB).
    pub stderr: Option<&'a str>,
    /// Plain-text stdout (definitions with `output = "text"`), searched for a matching line.
    pub stdout_text: Option<&'a str>,
    /// The exit code, when the process exited.
    pub exit_code: Option<i32>,
}

/// What [`FailureRules::diagnose`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Diagnosis {
    /// The error message to quote in the reason (the CLI's own words), when there is one.
    pub message: Option<String>,
    /// The kind a rule gave it (a pattern or an exit code); `None` when no rule matched.
    pub kind: Option<FailureKind>,
    /// What to do, from the `hint` of the definition's first pattern that matches the
    /// message or a searched line.
    pub hint: Option<String>,
}

impl Diagnosis {
    /// `reason` with the hint, when a pattern gave one, after it in parentheses.
    pub(crate) fn hinted(&self, reason: String) -> String {
        match &self.hint {
            Some(hint) => format!("{reason} ({hint})"),
            None => reason,
        }
    }
}

/// Most lines of stderr or stdout searched for a matching line.
const LINES_SEARCHED: usize = 40;

impl FailureRules {
    fn kind_of(&self, text: &str) -> Option<FailureKind> {
        if never_succeeds(text) {
            return Some(FailureKind::Input);
        }
        first_kind(self.patterns.iter().chain(built_in()), text)
    }

    fn ignored(&self, line: &str) -> bool {
        self.ignore.iter().any(|p| p.0.is_match(line))
    }

    /// The message and kind of a failed attempt. The message is, in this order: the
    /// definition's `error_text`; the final text the CLI flagged as an error; the message of a
    /// JSON object that ends stderr (`/error/message`, `/message` or a string `/error`); the
    /// last stderr line (then stdout line, for text output) that a pattern matches; the last
    /// stderr line that says something (not a lone `}` and not an `ignore`d line). The kind is
    /// the first of: `input` for a message that can never succeed ([`never_succeeds`]), the
    /// definition's patterns over the message, its `exit_codes`, the
    /// built-in patterns over the message, any pattern over the lines searched.
    pub(crate) fn diagnose(&self, e: &ErrorEvidence<'_>) -> Diagnosis {
        fn nonblank(s: Option<&str>) -> Option<&str> {
            s.map(str::trim).filter(|s| !s.is_empty())
        }
        let stderr_lines: Vec<&str> = e
            .stderr
            .map(|s| {
                s.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !self.ignored(l))
                    .collect()
            })
            .unwrap_or_default();
        let tail = |lines: &[&'_ str]| lines.len().saturating_sub(LINES_SEARCHED);
        let stdout_lines: Vec<&str> = e
            .stdout_text
            .map(|s| {
                s.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !self.ignored(l))
                    .collect()
            })
            .unwrap_or_default();
        let matching_line = |lines: &[&str]| -> Option<(String, FailureKind)> {
            lines[tail(lines)..]
                .iter()
                .rev()
                .find_map(|l| self.kind_of(l).map(|k| ((*l).to_owned(), k)))
        };
        let message = nonblank(e.error_text)
            .or(nonblank(e.flagged_text))
            .map(str::to_owned)
            .or_else(|| e.stderr.and_then(trailing_json_message))
            .or_else(|| matching_line(&stderr_lines).map(|(l, _)| l))
            .or_else(|| matching_line(&stdout_lines).map(|(l, _)| l))
            .or_else(|| {
                stderr_lines
                    .iter()
                    .rev()
                    .find(|l| l.chars().any(char::is_alphanumeric))
                    .map(|l| (*l).to_owned())
            });
        let own = |text: &str| first_kind(&self.patterns, text);
        let builtin = |text: &str| first_kind(built_in(), text);
        let kind = message
            .as_deref()
            .filter(|m| never_succeeds(m))
            .map(|_| FailureKind::Input)
            .or_else(|| message.as_deref().and_then(own))
            .or_else(|| e.exit_code.and_then(|c| self.exit_codes.get(&c).copied()))
            .or_else(|| message.as_deref().and_then(builtin))
            // A shell's "cannot execute" (126) and "not found" (127).
            .or_else(|| matches!(e.exit_code, Some(126 | 127)).then_some(FailureKind::Setup))
            .or_else(|| matching_line(&stderr_lines).map(|(_, k)| k))
            .or_else(|| matching_line(&stdout_lines).map(|(_, k)| k));
        let hint = message
            .iter()
            .map(String::as_str)
            .chain(stderr_lines[tail(&stderr_lines)..].iter().copied())
            .chain(stdout_lines[tail(&stdout_lines)..].iter().copied())
            .find_map(|text| self.hint_for(text));
        // A message that is itself an API error body (Gemini's bad key) says more unwrapped.
        let message = message.map(|m| unwrap_json_message(&m).unwrap_or(m));
        Diagnosis {
            message,
            kind,
            hint,
        }
    }

    /// The hint of the definition's first pattern with one that matches `text`.
    pub(crate) fn hint_for(&self, text: &str) -> Option<String> {
        self.patterns
            .iter()
            .zip(&self.hints)
            .find_map(|((_, p), hint)| hint.as_ref().filter(|_| p.0.is_match(text)).cloned())
    }

    /// Whether any rule would classify `text` (used for a report-less exit 0, where only a
    /// recognisable error may replace "no report").
    pub(crate) fn recognises(&self, text: &str) -> bool {
        self.kind_of(text).is_some()
    }

    /// The `live` entries: lines that end an attempt while it runs.
    pub(crate) fn live(&self) -> &[live::LiveRule] {
        &self.live
    }
}

/// The wait a rate-limit or quota message names: "try again in 20s", "retry after 30
/// seconds", "Please retry in 14.5s" (Gemini), "try again in 2 minutes", "retry-after: 7",
/// or a clock time — "try again at 12:08 PM" (codex's usage limit, local time), "resets at
/// 14:03 UTC" — counted to its next occurrence. `None` when it names none (then the team
/// backs off exponentially).
pub(crate) fn retry_after(text: &str) -> Option<std::time::Duration> {
    retry_after_span(text).or_else(|| retry_at_clock(text, jiff::Zoned::now()))
}

/// "try again at 12:08 PM" / "resets at 14:03 UTC": the time from `now` to the next such
/// clock time (in `now`'s zone, or UTC when the text says so).
fn retry_at_clock(text: &str, now: jiff::Zoned) -> Option<std::time::Duration> {
    static RE: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    let re = RE
        .get_or_init(|| {
            RegexBuilder::new(
                r"(?:try again|retry|resets?)\s+at\s+(\d{1,2}):(\d{2})(?::\d{2})?\s*(am|pm)?\s*(utc|gmt)?\b",
            )
            .case_insensitive(true)
            .build()
            .ok()
        })
        .as_ref()?;
    let c = re.captures(text)?;
    let mut hour: i8 = c.get(1)?.as_str().parse().ok()?;
    let minute: i8 = c.get(2)?.as_str().parse().ok()?;
    match c.get(3).map(|m| m.as_str().to_ascii_lowercase()).as_deref() {
        Some("pm") if (1..12).contains(&hour) => hour += 12,
        Some("am") if hour == 12 => hour = 0,
        Some(_) if !(1..=12).contains(&hour) => return None,
        _ => {}
    }
    let now = if c.get(4).is_some() {
        now.with_time_zone(jiff::tz::TimeZone::UTC)
    } else {
        now
    };
    // `at` panics on an hour past 23; the checked constructor does not.
    let clock = jiff::civil::Time::new(hour, minute, 0, 0).ok()?;
    let today = now
        .date()
        .to_datetime(clock)
        .to_zoned(now.time_zone().clone())
        .ok()?;
    let next = if today > now {
        today
    } else {
        today.checked_add(jiff::Span::new().days(1)).ok()?
    };
    let secs = (next.timestamp().as_second() - now.timestamp().as_second()).max(0);
    Some(std::time::Duration::from_secs(secs.unsigned_abs()))
}

fn retry_after_span(text: &str) -> Option<std::time::Duration> {
    static RE: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    let re = RE
        .get_or_init(|| {
            // The lead words, then a Go-style duration (`6m0s`, `1m5s`, `2h14m`, `20ms`,
            // `6.5s`, `37s`, a bare `7`) or a number and a unit word (`2 minutes`).
            RegexBuilder::new(
                r#"(?:try again|retry-after|retry_after|retrydelay|retrying|retry|resets?)["']?[\s:="']*(?:in|after)?\s*(\d[0-9a-z.]*)(?:\s*(milliseconds?|secs?|seconds?|mins?|minutes?|hrs?|hours?|days?)\b)?"#,
            )
            .case_insensitive(true)
            .build()
            .ok()
        })
        .as_ref()?;
    let c = re.captures(text)?;
    let token = c
        .get(1)?
        .as_str()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let secs = match c.get(2) {
        Some(word) if token.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
            let n: f64 = token.parse().ok()?;
            let word = word.as_str().to_ascii_lowercase();
            n * match word.chars().next() {
                Some('m') if word.starts_with("milli") => 0.001,
                Some('m') => 60.0,
                Some('h') => 3600.0,
                Some('d') => 86_400.0,
                _ => 1.0,
            }
        }
        _ => duration_secs(&token)?,
    };
    (0.0..366.0 * 86_400.0)
        .contains(&secs)
        .then(|| std::time::Duration::from_secs_f64(secs))
}

/// Seconds in a Go-style duration as providers write it (OpenAI's `6m0s`, `1m5s`, `2h14m`,
/// `20ms`, `6.5s`; Gemini's `37s`; `x-ratelimit-reset-tokens: 6m0s`): numbers each followed
/// by `d`, `h`, `m`, `s`, `ms`, `us`/`µs` or `ns`; a lone number is seconds. `None` for
/// anything else.
pub(crate) fn duration_secs(text: &str) -> Option<f64> {
    let text = text.trim();
    if let Ok(n) = text.parse::<f64>() {
        return n.is_finite().then_some(n);
    }
    let mut rest = text;
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "d" => 86_400.0,
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit..];
    }
    Some(total)
}

/// A wait hint in seconds from outside (a report's `retry_after_s`, a `Retry-After` or
/// `retry-after-ms` header) as a duration: `None` when negative or not a number; past
/// 10^12 s (31,700 years: longer than any `--rate-limit-wait`) it is held there, so a
/// hostile `1e300` is a wait the gate refuses, not a crash.
pub(crate) fn hinted_wait(secs: f64) -> Option<std::time::Duration> {
    (secs >= 0.0).then(|| std::time::Duration::from_secs_f64(secs.min(1e12)))
}

/// The message inside `text` when `text` is a JSON error body (`{"error":{"message":…}}`,
/// `{"message":…}`), possibly inside brackets or after a prefix such as `API Error: 400 `.
fn unwrap_json_message(text: &str) -> Option<String> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    let v: Value = serde_json::from_str(text.get(start..=end)?).ok()?;
    let inner = [v.pointer("/error/message"), v.pointer("/message")]
        .into_iter()
        .flatten()
        .find_map(|m| m.as_str().map(str::trim).filter(|m| !m.is_empty()))?;
    let prefix = text[..start].trim().trim_end_matches([':', '[']).trim();
    Some(if prefix.is_empty() {
        inner.to_owned()
    } else {
        format!("{prefix}: {inner}")
    })
}

/// The message of the JSON object that ends `stderr`, when it ends with one (Gemini CLI
/// pretty-prints its error object there): `/error/message`, else `/message`, else a string
/// `/error`.
fn trailing_json_message(stderr: &str) -> Option<String> {
    let end = stderr.trim_end();
    if !end.ends_with('}') {
        return None;
    }
    // Try each `{` that starts a line, from the last one back, until one parses to the end.
    let starts = end
        .match_indices('{')
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || end[..i].ends_with('\n') || end[..i].trim_end().ends_with(':'))
        .collect::<Vec<_>>();
    for &i in starts.iter().rev() {
        let Ok(v) = serde_json::from_str::<Value>(&end[i..]) else {
            continue;
        };
        let text = [
            v.pointer("/error/message"),
            v.pointer("/message"),
            v.pointer("/error").filter(|e| e.is_string()),
        ]
        .into_iter()
        .flatten()
        .find_map(|m| m.as_str().map(str::trim).filter(|m| !m.is_empty()));
        if let Some(t) = text {
            return Some(t.to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(toml_text: &str) -> FailureRules {
        #[derive(Deserialize)]
        struct T {
            failure: FailureRules,
        }
        toml::from_str::<T>(toml_text).expect("valid").failure
    }

    #[test]
    fn every_kind_round_trips_through_its_word() {
        for k in FailureKind::ALL {
            assert_eq!(FailureKind::parse(k.as_str()), Some(k));
            assert_eq!(
                serde_json::to_value(k).expect("serialize"),
                Value::String(k.as_str().into())
            );
        }
        assert_eq!(FailureKind::parse("rate-limited"), None);
    }

    #[test]
    fn the_error_text_pointer_wins_and_its_own_patterns_come_first() {
        let r =
            rules("[failure]\npatterns = [{ kind = 'quota', regex = 'usage limit reached' }]\n");
        let d = r.diagnose(&ErrorEvidence {
            error_text: Some("You've hit your usage limit reached (429)"),
            stderr: Some("some warning\n"),
            exit_code: Some(1),
            ..Default::default()
        });
        assert_eq!(
            d.message.as_deref(),
            Some("You've hit your usage limit reached (429)")
        );
        assert_eq!(d.kind, Some(FailureKind::Quota), "before the built-in 429");
    }

    #[test]
    fn a_pretty_printed_json_error_ending_stderr_gives_the_message_not_a_brace() {
        let stderr = "Error when talking to Gemini API Full report available at: /tmp/x.json\n\
                      {\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"You exceeded your current quota\",\n    \"status\": \"RESOURCE_EXHAUSTED\"\n  }\n}\n";
        let d = FailureRules::default().diagnose(&ErrorEvidence {
            stderr: Some(stderr),
            exit_code: Some(173),
            ..Default::default()
        });
        assert_eq!(
            d.message.as_deref(),
            Some("You exceeded your current quota")
        );
        assert_eq!(d.kind, Some(FailureKind::Quota));
    }

    #[test]
    fn a_message_that_is_an_api_error_body_is_unwrapped() {
        let d = FailureRules::default().diagnose(&ErrorEvidence {
            stderr: Some(
                "{\n  \"error\": {\n    \"message\": \"{\\\"error\\\":{\\\"code\\\":400,\\\"message\\\":\\\"API key not valid. Please pass a valid API key.\\\"}}\"\n  }\n}\n",
            ),
            exit_code: Some(144),
            ..Default::default()
        });
        assert_eq!(
            d.message.as_deref(),
            Some("API key not valid. Please pass a valid API key.")
        );
        assert_eq!(
            unwrap_json_message("API Error: 429 {\"error\":{\"message\":\"slow down\"}}")
                .as_deref(),
            Some("API Error: 429: slow down")
        );
        assert_eq!(unwrap_json_message("plain words"), None);
    }

    #[test]
    fn a_request_that_can_never_succeed_is_input_before_any_rate_limit_pattern() {
        let r = rules("[failure]\npatterns = [{ kind = 'rate_limited', regex = '\\b429\\b' }]\n");
        for (stderr, code) in [
            (
                "Error: 429 Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 45000. The input or output tokens must be reduced in order to run successfully.\n",
                1,
            ),
            (
                "{\n  \"error\": {\n    \"code\": 400,\n    \"message\": \"The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).\",\n    \"status\": \"INVALID_ARGUMENT\"\n  }\n}\n",
                144,
            ),
        ] {
            let d = r.diagnose(&ErrorEvidence {
                stderr: Some(stderr),
                exit_code: Some(code),
                ..ErrorEvidence::default()
            });
            assert_eq!(d.kind, Some(FailureKind::Input), "{stderr}");
        }
        // A rate limit is still one.
        let d = r.diagnose(&ErrorEvidence {
            stderr: Some("Error: 429 Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.\n"),
            exit_code: Some(1),
            ..ErrorEvidence::default()
        });
        assert_eq!(d.kind, Some(FailureKind::RateLimited));
    }

    #[test]
    fn exit_codes_classify_when_no_own_pattern_matches() {
        let r = rules("[failure]\nexit_codes = { 41 = 'auth' }\n");
        let d = r.diagnose(&ErrorEvidence {
            stderr: Some("Please set an Auth method in your settings\n"),
            exit_code: Some(41),
            ..Default::default()
        });
        assert_eq!(d.kind, Some(FailureKind::Auth));
        assert_eq!(
            d.message.as_deref(),
            Some("Please set an Auth method in your settings")
        );
    }

    #[test]
    fn ignored_and_punctuation_lines_are_never_the_message() {
        let r = rules("[failure]\nignore = ['^Ripgrep not available']\n");
        let d = r.diagnose(&ErrorEvidence {
            stderr: Some("boom: the real cause\nRipgrep not available, falling back\n}\n"),
            exit_code: Some(1),
            ..Default::default()
        });
        assert_eq!(d.message.as_deref(), Some("boom: the real cause"));
        assert_eq!(
            d.kind, None,
            "nothing recognised: the caller says agent_error"
        );
        let d = r.diagnose(&ErrorEvidence {
            stderr: Some("Ripgrep not available\n"),
            ..Default::default()
        });
        assert_eq!(d.message, None);
    }

    #[test]
    fn a_matching_line_is_preferred_over_the_last_line() {
        let d = FailureRules::default().diagnose(&ErrorEvidence {
            stdout_text: Some(
                "Aider v0.86.2\nlitellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached\nTokens: 0 sent\n",
            ),
            exit_code: Some(0),
            ..Default::default()
        });
        assert_eq!(
            d.message.as_deref(),
            Some("litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached")
        );
        assert_eq!(d.kind, Some(FailureKind::RateLimited));
    }

    #[test]
    fn a_patterns_hint_says_what_to_do_when_it_matches() {
        let r = rules(
            "[failure]\npatterns = [{ kind = 'auth', regex = 'invalid auth method', hint = 'set selectedType' }, { kind = 'auth', regex = '401' }]\n",
        );
        let d = r.diagnose(&ErrorEvidence {
            stderr: Some("Loaded cached credentials.\nInvalid auth method selected.\n"),
            exit_code: Some(41),
            ..ErrorEvidence::default()
        });
        assert_eq!(d.kind, Some(FailureKind::Auth));
        assert_eq!(d.hint.as_deref(), Some("set selectedType"));
        let d = r.diagnose(&ErrorEvidence {
            stderr: Some("HTTP 401\n"),
            exit_code: Some(1),
            ..ErrorEvidence::default()
        });
        assert_eq!((d.kind, d.hint), (Some(FailureKind::Auth), None));
    }

    #[test]
    fn a_broken_command_or_endpoint_is_a_setup_failure() {
        let kind = |stderr: &str, code: i32| {
            FailureRules::default()
                .diagnose(&ErrorEvidence {
                    stderr: Some(stderr),
                    exit_code: Some(code),
                    ..ErrorEvidence::default()
                })
                .kind
        };
        for (stderr, code) in [
            ("sh: 0: cannot open ./agnt.sh: No such file", 2),
            (
                "/usr/bin/python3: can't open file '/w/agnt.py': [Errno 2] No such file or directory",
                2,
            ),
            ("Error: Cannot find module '/w/agent.js'", 1),
            ("bash: ./agent.sh: No such file or directory", 127),
            ("sh: 1: claude: not found", 127),
            ("ModuleNotFoundError: No module named 'openai'", 1),
            ("Error: connect ECONNREFUSED 127.0.0.1:8080", 1),
            ("./agent: cannot execute binary file", 126),
        ] {
            assert_eq!(kind(stderr, code), Some(FailureKind::Setup), "{stderr}");
        }
        assert_eq!(kind("error: tests failed", 1), None);
        // A Python FileNotFoundError is a task's, not the set-up's (ENOTFOUND is Node's DNS).
        assert_eq!(
            kind(
                "FileNotFoundError: [Errno 2] No such file or directory: 'data/row1.txt'",
                1
            ),
            None
        );
        assert_eq!(
            kind("Error: getaddrinfo ENOTFOUND api.example", 1),
            Some(FailureKind::Setup)
        );
        assert_eq!(kind("cannot open the pod bay doors", 1), None);
    }

    #[test]
    fn retry_after_reads_the_wait_a_message_names() {
        let secs = |t: &str| retry_after(t).map(|d| d.as_secs_f64());
        assert_eq!(
            secs("Rate limit reached. Please try again in 20s."),
            Some(20.0)
        );
        assert_eq!(secs("Please retry in 14.5s."), Some(14.5));
        assert_eq!(secs("retry after 2 minutes"), Some(120.0));
        assert_eq!(secs("try again in 250ms"), Some(0.25));
        assert_eq!(secs("Retry-After: 7"), Some(7.0));
        assert_eq!(
            secs("usage limit reached, try again in 2 days"),
            Some(172_800.0)
        );
        // OpenAI's own wording (compound Go-style durations), Gemini's RetryInfo.
        assert_eq!(
            secs(
                "Rate limit reached for gpt-4o on tokens per min (TPM). Please try again in 6m0s."
            ),
            Some(360.0)
        );
        assert_eq!(secs("Please try again in 1m5s."), Some(65.0));
        assert_eq!(secs("Please try again in 2h14m."), Some(8040.0));
        assert_eq!(secs("Please try again in 20ms."), Some(0.02));
        assert_eq!(secs("Please try again in 6.5s."), Some(6.5));
        assert_eq!(
            secs(r#"{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}"#),
            Some(37.0)
        );
        assert_eq!(secs("429 resets at noon"), None);
        assert_eq!(secs("429 Too Many Requests"), None);
    }

    #[test]
    fn a_clock_time_counts_to_its_next_occurrence() {
        let now: jiff::Zoned = "2026-12-01T11:30:00+00:00[UTC]".parse().expect("time");
        let at = |t: &str| retry_at_clock(t, now.clone()).map(|d| d.as_secs());
        assert_eq!(
            at("You've hit your usage limit. ... or try again at 12:08 PM."),
            Some(38 * 60)
        );
        assert_eq!(
            at("Your quota resets at 14:03 UTC"),
            Some(2 * 3600 + 33 * 60)
        );
        assert_eq!(
            at("try again at 11:00 AM"),
            Some(23 * 3600 + 30 * 60),
            "tomorrow"
        );
        assert_eq!(at("try again at 12:15 AM"), Some(12 * 3600 + 45 * 60));
        assert_eq!(at("try again at 25:00"), None);
        assert_eq!(at("try again at Dec 2nd, 2026 12:38 PM"), None);
        assert_eq!(at("429 Too Many Requests"), None);
    }

    #[test]
    fn bad_rules_are_refused_with_the_key() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct T {
            failure: FailureRules,
        }
        let e = toml::from_str::<T>("[failure]\npatterns = [{ kind = 'auth', regex = '(' }]\n")
            .expect_err("bad regex");
        assert!(e.to_string().contains("failure.patterns"), "{e}");
        let e =
            toml::from_str::<T>("[failure]\nexit_codes = { x = 'auth' }\n").expect_err("bad code");
        assert!(e.to_string().contains("not an exit code"), "{e}");
        let e = toml::from_str::<T>("[failure]\nexit_codes = { 999 = 'auth' }\n")
            .expect_err("out of range");
        assert!(e.to_string().contains("from 1 to 255"), "{e}");
        let e =
            toml::from_str::<T>("[failure]\nexit_codes = { 1 = 'flaky' }\n").expect_err("bad kind");
        assert!(e.to_string().contains("rate_limited"), "{e}");
    }
}
