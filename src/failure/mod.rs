//! Failure kinds: why an attempt did not complete, as one word a person or a program can act
//! on (retry later, fix the key, fix the prompt), and the `[failure]` rules of a runner
//! definition that classify an agent CLI's error text into one.
//!
//! The kinds are the output column `failure_kind` (DESIGN §4 "failure kinds"); the patterns
//! of each built-in definition are written from what the real CLI prints (the stand-ins in
//! `tests/e2e/` reproduce those texts).

mod body;
pub(crate) mod live;
mod wait;

pub(crate) use body::html_page_text;
pub(crate) use wait::{duration_secs, hinted_wait, retry_after};

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
    /// The branch merged, but the merged tree failed `--verify-merged`: the merge was undone
    /// (the target branch never holds it) and the branch kept.
    MergeFailed,
    /// A reviewer rejected the item's work (`runner reject`, after `--merge=review`); its
    /// branch was deleted.
    Rejected,
}

impl FailureKind {
    /// Every kind, in the order of the documentation.
    pub(crate) const ALL: [FailureKind; 16] = [
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
        FailureKind::MergeFailed,
        FailureKind::Rejected,
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
            FailureKind::MergeFailed => "merge_failed",
            FailureKind::Rejected => "rejected",
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
    #[serde(default)]
    warn: Vec<String>,
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
/// warn = ["^Security Warning: Skipping system"]          # stderr lines repeated as a set-up warning
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
    /// Stderr lines that say the CLI's set-up is wrong (`warn`), repeated to the user.
    warn: Vec<Pattern>,
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
        warn: Vec::new(),
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
        let warn = spec
            .warn
            .iter()
            .enumerate()
            .map(|(i, s)| compile(s).map_err(|e| format!("`failure.warn[{i}]`: {e}")))
            .collect::<Result<_, _>>()?;
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
            warn,
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

    /// Whether `line` is one the definition's `ignore` says is never the reason (start-up
    /// noise).
    pub(crate) fn ignored(&self, line: &str) -> bool {
        self.ignore.iter().any(|p| p.0.is_match(line))
    }

    /// The message and kind of a failed attempt. The message is, in this order: the
    /// definition's `error_text`; the final text the CLI flagged as an error; the message of a
    /// JSON object that ends stderr (`/error/message`, `/message` or a string `/error`, with
    /// its `code` and `status`); an HTML page in stderr (its title); the last stderr line
    /// (then stdout line, for text output) that a pattern matches; the last stderr line that
    /// states an error (`Error: …`, [`error_line`]); the last stderr line that says something
    /// (not a lone `}` and not an `ignore`d line). A message that is a JSON error body is
    /// unwrapped, an HTML page gives its title or text ([`readable`]). The kind is
    /// the first of: `input` for a message that can never succeed ([`never_succeeds`]), the
    /// definition's patterns over the message, its `exit_codes`, the
    /// built-in patterns over the message, any pattern over the lines searched.
    pub(crate) fn diagnose(&self, e: &ErrorEvidence<'_>) -> Diagnosis {
        fn nonblank(s: Option<&str>) -> Option<&str> {
            s.map(str::trim).filter(|s| !s.is_empty())
        }
        // Terminal colours (OpenCode's red `Error:`) are no part of the words.
        let stderr_text = e.stderr.map(without_escapes);
        let stderr_lines: Vec<&str> = stderr_text
            .as_deref()
            .map(|s| {
                s.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !self.ignored(l))
                    .collect()
            })
            .unwrap_or_default();
        let tail = |lines: &[&'_ str]| lines.len().saturating_sub(LINES_SEARCHED);
        let stdout_text = e.stdout_text.map(without_escapes);
        let stdout_lines: Vec<&str> = stdout_text
            .as_deref()
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
            .or_else(|| e.stderr.and_then(html_in))
            .or_else(|| matching_line(&stderr_lines).map(|(l, _)| l))
            .or_else(|| matching_line(&stdout_lines).map(|(l, _)| l))
            .or_else(|| error_line(&stderr_lines[tail(&stderr_lines)..]))
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
        // A message that is itself an API error body (Gemini's bad key) says more unwrapped;
        // an HTML error page says its title.
        let message = message.map(readable);
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

    /// The lines of `stderr` a `warn` entry matches (trimmed, each once): the CLI saying its
    /// set-up is wrong (Gemini CLI skipping a settings file it finds insecure).
    pub(crate) fn warnings_in<'a>(&self, stderr: &'a str) -> Vec<&'a str> {
        let mut found: Vec<&str> = Vec::new();
        for line in stderr.lines().map(str::trim) {
            if self.warn.iter().any(|p| p.0.is_match(line)) && !found.contains(&line) {
                found.push(line);
            }
        }
        found
    }

    /// The `live` entries: lines that end an attempt while it runs.
    pub(crate) fn live(&self) -> &[live::LiveRule] {
        &self.live
    }
}

/// The message inside `text` when `text` is a JSON error body (`{"error":{"message":…}}`,
/// `{"message":…}`), possibly inside brackets or after a prefix such as `API Error: 400 `,
/// with its code and status ([`body::json_error_message`]).
fn unwrap_json_message(text: &str) -> Option<String> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    let v: Value = serde_json::from_str(text.get(start..=end)?).ok()?;
    let inner = body::json_error_message(&v)?;
    let prefix = text[..start].trim().trim_end_matches([':', '[']).trim();
    Some(if prefix.is_empty() {
        inner
    } else {
        format!("{prefix}: {inner}")
    })
}

/// `text` without terminal escape sequences (`ESC [ … letter`, `ESC ] … BEL`).
fn without_escapes(text: &str) -> String {
    static RE: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    match RE
        .get_or_init(|| {
            Regex::new(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?)").ok()
        })
        .as_ref()
    {
        Some(re) => re.replace_all(text, "").into_owned(),
        None => text.to_owned(),
    }
}

/// The last of `lines` that states an error (`Error: …`, `DrizzleQueryError: …`,
/// `Uncaught TypeError: …`): said before a stack trace or a fragment of the error's own
/// text (OpenCode's failed query ends with a line `params:`), it says more than the last line.
fn error_line(lines: &[&str]) -> Option<String> {
    static RE: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    let re = RE
        .get_or_init(|| {
            RegexBuilder::new(r"^(?:uncaught\s+)?[\w.]*(?:error|exception):\s*\S")
                .case_insensitive(true)
                .build()
                .ok()
        })
        .as_ref()?;
    lines
        .iter()
        .rev()
        .find(|l| re.is_match(l))
        .map(|l| (*l).to_owned())
}

/// `message` made readable: a JSON error body unwrapped (repeatedly: Gemini CLI wraps the
/// API's body in its own), an HTML page as its title or text ([`body::html_page_text`]).
fn readable(message: String) -> String {
    let mut m = message;
    for _ in 0..3 {
        match unwrap_json_message(&m) {
            Some(inner) if inner != m => m = inner,
            _ => break,
        }
    }
    body::html_page_text(&m).unwrap_or(m)
}

/// The text of an HTML page in `stderr` (a CLI that printed a proxy's error page as it
/// came), from the line where the page starts ([`body::html_page_text`]).
fn html_in(stderr: &str) -> Option<String> {
    let lower = stderr.to_ascii_lowercase();
    let start = ["<!doctype", "<html"]
        .iter()
        .filter_map(|m| lower.find(m))
        .min()?;
    let line_start = stderr[..start].rfind('\n').map_or(0, |i| i + 1);
    body::html_page_text(&stderr[line_start..]).filter(|t| !t.is_empty())
}

/// The message of the JSON object that ends `stderr`, when it ends with one (Gemini CLI
/// pretty-prints its error object there): [`body::json_error_message`].
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
        if let Some(t) = body::json_error_message(&v) {
            return Some(t);
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
            Some("You exceeded your current quota (429 RESOURCE_EXHAUSTED)")
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
            Some("API key not valid. Please pass a valid API key. (400)")
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
    fn an_html_error_page_gives_its_title_not_its_first_tag() {
        let page = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";
        // In the CLI's error text (Gemini CLI wraps the body in two JSON objects).
        let wrapped =
            serde_json::json!({"error": {"message": page, "code": 502, "status": "Bad Gateway"}})
                .to_string();
        let stderr = format!(
            "{{\n  \"error\": {{\n    \"message\": {}\n  }}\n}}\n",
            Value::String(wrapped)
        );
        let d = FailureRules::default().diagnose(&ErrorEvidence {
            stderr: Some(&stderr),
            exit_code: Some(246),
            ..Default::default()
        });
        assert_eq!(d.message.as_deref(), Some("502 Bad Gateway"));
        assert_eq!(d.kind, Some(FailureKind::ApiError));
        // As it came, on stderr after a first line.
        let d = FailureRules::default().diagnose(&ErrorEvidence {
            stderr: Some(&format!("Error: unexpected status 502: {page}")),
            exit_code: Some(1),
            ..Default::default()
        });
        assert_eq!(
            d.message.as_deref(),
            Some("Error: unexpected status 502: 502 Bad Gateway")
        );
        // In the CLI's own error text.
        let text = format!("API Error: 502 {page}");
        let d = FailureRules::default().diagnose(&ErrorEvidence {
            error_text: Some(&text),
            exit_code: Some(1),
            ..Default::default()
        });
        assert_eq!(d.message.as_deref(), Some("API Error: 502 502 Bad Gateway"));
    }

    #[test]
    fn an_error_line_is_preferred_over_a_trailing_fragment_or_stack() {
        let stderr =
            "Error: Failed query: CREATE TABLE `project` (`id` text PRIMARY KEY)\nparams: \n";
        let d = FailureRules::default().diagnose(&ErrorEvidence {
            stderr: Some(stderr),
            exit_code: Some(1),
            ..Default::default()
        });
        assert_eq!(
            d.message.as_deref(),
            Some("Error: Failed query: CREATE TABLE `project` (`id` text PRIMARY KEY)")
        );
        // OpenCode 1.18.33's failed first-run migration, in its colours.
        let stderr = "\x1b[91m\x1b[1mError: \x1b[0mUnexpected error\n\nFailed query: \n        CREATE TABLE `workspace` (\n          `id` text PRIMARY KEY\n        );\n      \nparams: \n";
        let d = FailureRules::default().diagnose(&ErrorEvidence {
            stderr: Some(stderr),
            exit_code: Some(1),
            ..Default::default()
        });
        assert_eq!(d.message.as_deref(), Some("Error: Unexpected error"));
        let stderr = "TypeError: x is not a function\n    at main (file:///a.js:1:2)\n    at async run (file:///a.js:9:1)\n";
        let d = FailureRules::default().diagnose(&ErrorEvidence {
            stderr: Some(stderr),
            exit_code: Some(1),
            ..Default::default()
        });
        assert_eq!(d.message.as_deref(), Some("TypeError: x is not a function"));
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
