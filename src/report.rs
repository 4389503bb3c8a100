//! The teammate's report and the success rule (DESIGN §4).
//!
//! Report format (seed `task-management-protocol.md`, completion metadata):
//! `{"id", "status": "completed"|"blocked"|"failed", "summary", "files_modified": [],
//! "files_created": [], "tests": "passed"|"failed"|"added"|"none", "blocker",
//! "next_steps": [], "output": {…}}`. It is read from the `RUNNER_REPORT` file; failing that,
//! from the agent's final text: the whole text, else a single fenced json block, else the last
//! complete JSON object.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::AgentResult;
use crate::failure::{ErrorEvidence, FailureKind, FailureRules};
use crate::git::GitError;

/// Largest report file read, bytes. A report is a summary; large results belong in files
/// the report names.
pub const MAX_REPORT_BYTES: u64 = 1024 * 1024;

/// How an item ended. Only `Completed` items are ticked and have their checkpoints deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    /// Every condition of the success rule held.
    Completed,
    /// Something went wrong (exit code, missing/invalid report, schema, verify, ...).
    Failed,
    /// The report said it is blocked and needs a person.
    Blocked,
    /// The attempt hit its time limit and was stopped.
    TimedOut,
    /// The run was interrupted while the item was running (or before it started).
    Cancelled,
    /// A prerequisite did not complete, so the item never started.
    Skipped,
}

impl ItemStatus {
    /// The lowercase name used in files and output (`timed_out`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ItemStatus::Completed => "completed",
            ItemStatus::Failed => "failed",
            ItemStatus::Blocked => "blocked",
            ItemStatus::TimedOut => "timed_out",
            ItemStatus::Cancelled => "cancelled",
            ItemStatus::Skipped => "skipped",
        }
    }

    /// All statuses, in summary order.
    pub const ALL: [ItemStatus; 6] = [
        ItemStatus::Completed,
        ItemStatus::Failed,
        ItemStatus::Blocked,
        ItemStatus::TimedOut,
        ItemStatus::Cancelled,
        ItemStatus::Skipped,
    ];
}

impl std::fmt::Display for ItemStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A valid report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// `completed`, `blocked` or `failed`.
    pub status: String,
    /// One line: what was done.
    pub summary: String,
    /// Files changed.
    pub files_modified: Vec<String>,
    /// Files created.
    pub files_created: Vec<String>,
    /// `blocker` text, when blocked.
    pub blocker: Option<String>,
    /// `tests`: `passed`, `failed`, `added` or `none`, when given.
    pub tests: Option<String>,
    /// `output`: the structured result (`Value::Null` when absent).
    pub output: Value,
    /// The whole report as written.
    pub raw: Value,
}

/// Why no valid report was found for an attempt; its text is the verdict's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// Nothing in `RUNNER_REPORT` and no JSON object in the agent's final text.
    #[error("no report: nothing was written to RUNNER_REPORT and the output holds no JSON report")]
    Missing,
    /// The report file could not be used: too large, not UTF-8, not JSON.
    #[error("{0}")]
    Unreadable(String),
    /// A report was found but breaks the format: which field, and the rule.
    #[error("{0}")]
    Invalid(String),
}

/// Where a report was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportSource {
    /// The `RUNNER_REPORT` file.
    File,
    /// The agent's final text.
    FinalText,
}

fn fenced_json_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let Some(nl) = after.find('\n') else { break };
        let lang = after[..nl].trim();
        let body = &after[nl + 1..];
        let Some(end) = body.find("```") else { break };
        if lang.eq_ignore_ascii_case("json") {
            blocks.push(&body[..end]);
        }
        rest = &body[end + 3..];
    }
    blocks
}

/// Longest tail of the final text searched for the last JSON object, bytes.
const LAST_OBJECT_WINDOW: usize = 256 * 1024;
/// Most parse attempts spent looking for the last JSON object (bounds the work on
/// brace-heavy output).
const LAST_OBJECT_ATTEMPTS: usize = 4096;

/// The last complete `{...}` in `text` that parses as a JSON object, searched in the last
/// [`LAST_OBJECT_WINDOW`] bytes with at most [`LAST_OBJECT_ATTEMPTS`] parses.
fn last_json_object(text: &str) -> Option<Value> {
    let mut from = text.len().saturating_sub(LAST_OBJECT_WINDOW);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let text = &text[from..];
    let mut attempts = 0;
    let mut end = text.len();
    while let Some(close) = text[..end].rfind('}') {
        let mut start = close;
        while let Some(open) = text[..start].rfind('{') {
            attempts += 1;
            if attempts > LAST_OBJECT_ATTEMPTS {
                return None;
            }
            if let Ok(v) = serde_json::from_str::<Value>(&text[open..=close])
                && v.is_object()
            {
                return Some(v);
            }
            start = open;
        }
        end = close;
    }
    None
}

/// Find a JSON object in an agent's final text: the whole text, else the single fenced
/// ```` ```json ```` block, else the last complete JSON object.
pub fn extract_json(text: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(text.trim())
        && v.is_object()
    {
        return Some(v);
    }
    let blocks = fenced_json_blocks(text);
    if blocks.len() == 1
        && let Ok(v) = serde_json::from_str::<Value>(blocks[0].trim())
        && v.is_object()
    {
        return Some(v);
    }
    last_json_object(text)
}

fn strings(v: &Value, key: &str) -> Result<Vec<String>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("`{key}` must be a list of strings"))
            })
            .collect(),
        Some(_) => Err(format!("`{key}` must be a list of strings")),
    }
}

fn id_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Validate a report object for the item `ids` names: its id, and for a stage item its
/// row's id too (a report may name either; [`crate::item::StageOf`]).
///
/// Errors (one line): not an object; `id` present and different; `status` not one of
/// `completed`/`blocked`/`failed`; `summary` missing or not a string; list fields that are
/// not lists of strings; `tests` not one of its values.
pub fn validate(value: Value, ids: &[&str]) -> Result<Report, ReportError> {
    let expected_id = ids.first().copied().unwrap_or_default();
    let Value::Object(ref map) = value else {
        return Err(ReportError::Invalid(
            "the report is not a JSON object".into(),
        ));
    };
    if let Some(id) = map.get("id").filter(|v| !v.is_null()) {
        match id_text(id) {
            Some(id) if ids.contains(&id.as_str()) => {}
            _ => {
                return Err(ReportError::Invalid(format!(
                    "the report is for id {id}, not `{expected_id}`"
                )));
            }
        }
    }
    let status = match map.get("status").and_then(Value::as_str) {
        Some(s @ ("completed" | "blocked" | "failed")) => s.to_owned(),
        Some(s) => {
            return Err(ReportError::Invalid(format!(
                "report status `{s}` is not completed, blocked or failed"
            )));
        }
        None => return Err(ReportError::Invalid("the report has no `status`".into())),
    };
    let summary = match map.get("summary") {
        Some(Value::String(s)) => s.trim().to_owned(),
        _ => {
            return Err(ReportError::Invalid(
                "the report has no `summary` string".into(),
            ));
        }
    };
    if let Some(t) = map.get("tests").filter(|v| !v.is_null()) {
        match t.as_str() {
            Some("passed" | "failed" | "added" | "none") => {}
            _ => {
                return Err(ReportError::Invalid(format!(
                    "report `tests` is {t}, not passed, failed, added or none"
                )));
            }
        }
    }
    // Numbers the runner acts on (the budget, the rate-limit pause) are never ignored
    // silently when they are not numbers.
    for key in ["cost_usd", "retry_after_s"] {
        if let Some(v) = map.get(key).filter(|v| !v.is_null())
            && !v.as_f64().is_some_and(|n| n.is_finite() && n >= 0.0)
        {
            return Err(ReportError::Invalid(format!(
                "report `{key}` is {v}, not a number ≥ 0{}",
                match key {
                    "cost_usd" => " (USD)",
                    _ => " (seconds)",
                }
            )));
        }
    }
    let files_modified = strings(&value, "files_modified").map_err(ReportError::Invalid)?;
    let files_created = strings(&value, "files_created").map_err(ReportError::Invalid)?;
    strings(&value, "next_steps").map_err(ReportError::Invalid)?;
    let blocker = map
        .get("blocker")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let output = map.get("output").cloned().unwrap_or(Value::Null);
    let tests = map.get("tests").and_then(Value::as_str).map(str::to_owned);
    Ok(Report {
        status,
        summary,
        files_modified,
        files_created,
        blocker,
        tests,
        output,
        raw: value,
    })
}

/// Find and validate the report: the report file's text first, then the final text.
///
/// Errors: the file is not JSON (and the final text holds none), no report anywhere, or the
/// report found breaks the format.
pub fn find(
    file_text: Option<&str>,
    final_text: Option<&str>,
    ids: &[&str],
) -> Result<(Report, ReportSource), ReportError> {
    let mut problem = ReportError::Missing;
    if let Some(text) = file_text {
        match serde_json::from_str::<Value>(text.trim()) {
            Ok(v) => return validate(v, ids).map(|r| (r, ReportSource::File)),
            Err(e) => {
                problem = ReportError::Unreadable(format!("the report file is not JSON ({e})"))
            }
        }
    }
    if let Some(text) = final_text
        && let Some(v) = extract_json(text)
    {
        return validate(v, ids).map(|r| (r, ReportSource::FinalText));
    }
    Err(problem)
}

/// `reason` without a leading `<status>: ` (a blocked item's reason starts `blocked: `), for
/// a line that shows the status already (`BLOCKED … needs a key`, `> runner: blocked: …`).
pub fn without_status(reason: &str, status: ItemStatus) -> &str {
    reason
        .strip_prefix(status.as_str())
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(reason)
}

/// How the agent process ended, as the run layer saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEnd {
    /// Exited on its own with this code.
    Exited(i32),
    /// Killed by this signal, not by the runner.
    Signalled(i32),
    /// Stopped by the runner at its time limit (whatever it exited with afterwards).
    TimedOut {
        /// The time limit (shown as written: `300ms`, `10m`).
        limit: std::time::Duration,
        /// The last line of the agent's output a `[failure] live` entry recognised, quoted
        /// with its kind (`API error 429 (rate_limit) … (rate_limited)`): what a CLI that
        /// kept retrying on its own was retrying. `None` when none did.
        last_error: Option<String>,
    },
    /// Stopped by the runner because the run was interrupted.
    Cancelled,
    /// Could not be started (or prepared) at all.
    NotStarted(String),
    /// Ended by a failure the backend can name for certain (the HTTP backend: the status of
    /// the API's answer, an unreachable server, a refused or cut-off answer).
    Failed {
        /// Its kind (`rate_limited` for HTTP 429, `auth` for 401, ...).
        kind: FailureKind,
        /// One line quoting the cause (`HTTP 429: Rate limit reached for ...`).
        reason: String,
        /// The wait the API asked for (`Retry-After`), if it named one.
        retry_after: Option<std::time::Duration>,
    },
}

/// The verify command's part in an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyResult {
    /// No verify command is set, or the attempt failed before it was due.
    NotRun,
    /// It exited 0.
    Passed,
    /// It did not pass: a one-line reason naming the command (exit code, last output line,
    /// time-out, signal, or why it could not start).
    Failed(String),
    /// The run was interrupted while it ran.
    Cancelled,
}

/// All that is known about one attempt, judged by [`judge`].
#[derive(Debug, Clone)]
pub struct Evidence<'a> {
    /// How the process ended.
    pub end: &'a ProcessEnd,
    /// The end of the agent's stderr (its last few KiB), for the reason of a failure.
    pub stderr_end: Option<&'a str>,
    /// What the definition read from stdout.
    pub agent: &'a AgentResult,
    /// The runner definition's `[failure]` rules, which name the kind of a failure.
    pub rules: &'a FailureRules,
    /// Whether stdout is plain text (`output = "text"`): then its lines are searched for a
    /// recognisable error too.
    pub text_output: bool,
    /// The report lookup.
    pub report: &'a Result<(Report, ReportSource), ReportError>,
    /// Errors of `output` against `output_schema` (from [`schema_errors`]), when a schema is
    /// set and the output does not match it.
    pub schema_errors: Option<&'a str>,
    /// The verify command's result.
    pub verify: &'a VerifyResult,
    /// Committing what the teammate left in its worktree, with `--isolate worktree`:
    /// `Err(git's reason)` when it failed; `None` without isolation (or before the commit).
    pub commit: Option<&'a Result<(), GitError>>,
}

/// The verdict on one attempt: a status, a failure kind and a one-line reason (both empty
/// when completed). On the wire (journal, events): `status`, `reason`, `failure_kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The status.
    pub status: ItemStatus,
    /// One line: why, when not completed.
    pub reason: String,
    /// Why, as one word; `None` when completed or blocked (and in journals written before
    /// failure kinds existed).
    #[serde(
        rename = "failure_kind",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kind: Option<FailureKind>,
    /// For a rate limit or quota: seconds until the provider takes requests again, when the
    /// CLI or the report names it (`retry_after_s` on the wire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<f64>,
}

impl Verdict {
    /// A `completed` verdict.
    pub fn completed() -> Verdict {
        Verdict {
            status: ItemStatus::Completed,
            reason: String::new(),
            kind: None,
            retry_after_s: None,
        }
    }

    /// A verdict that is not `completed`; `kind` is `None` only for `blocked`.
    pub fn not_completed(status: ItemStatus, kind: Option<FailureKind>, reason: String) -> Verdict {
        Verdict {
            status,
            reason,
            kind,
            retry_after_s: None,
        }
    }
}

/// The failure kind an item that never ran gets: `skipped` or `cancelled` by its status.
pub fn kind_of_not_run(status: ItemStatus) -> Option<FailureKind> {
    match status {
        ItemStatus::Completed | ItemStatus::Blocked => None,
        ItemStatus::Cancelled => Some(FailureKind::Cancelled),
        ItemStatus::TimedOut => Some(FailureKind::TimedOut),
        ItemStatus::Skipped => Some(FailureKind::Skipped),
        ItemStatus::Failed => Some(FailureKind::AgentError),
    }
}

/// The first non-blank line of `s`, control characters (escape sequences included) turned
/// into spaces, at most `max` characters (`…` marks a cut). Agent text goes through this before
/// it reaches a terminal, a CSV cell or a lead agent.
pub fn one_line(s: &str, max: usize) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let line = line.as_str();
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max {
        out.push('…');
    }
    out
}

/// The success rule, the only place an attempt's status is decided. `completed` only if: the
/// process exited 0 on its own; the definition's error flag is not true; a valid report was
/// found; its status is `completed` and it does not contradict itself (`tests: "failed"`, a
/// blank `summary`); its output validates against the schema (if set); the
/// verify command (if set) passed; the worktree commit (with isolation) succeeded. Otherwise
/// `timed_out` (the time limit), `cancelled` (interrupted, also during verify), `blocked`
/// (the report says so) or `failed`, each with a one-line reason.
pub fn judge(e: &Evidence<'_>) -> Verdict {
    let mut v = judge_status(e);
    if matches!(v.kind, Some(FailureKind::RateLimited | FailureKind::Quota)) {
        // The backend's (an HTTP Retry-After), else the report's own number, else the "try
        // again in 20s" of the reason.
        let told = match e.end {
            ProcessEnd::Failed {
                retry_after: Some(d),
                ..
            } => Some(d.as_secs_f64()),
            _ => None,
        };
        v.retry_after_s = told
            .or(match e.report {
                Ok((r, _)) => r.raw.get("retry_after_s").and_then(Value::as_f64),
                Err(_) => None,
            })
            .filter(|s| s.is_finite() && *s >= 0.0)
            .or_else(|| {
                // The CLI's whole message: the reason is cut, and "retry after 45s" may be the
                // end of a long one.
                let exit_code = match e.end {
                    ProcessEnd::Exited(c) => Some(*c),
                    _ => None,
                };
                let full = e.rules.diagnose(&error_evidence(e, exit_code)).message;
                full.as_deref()
                    .and_then(crate::failure::retry_after)
                    .or_else(|| crate::failure::retry_after(&v.reason))
                    .map(|d| d.as_secs_f64())
            });
    }
    v
}

/// What `e` holds that can say why an attempt failed, for [`FailureRules::diagnose`].
fn error_evidence<'a>(e: &'a Evidence<'a>, exit_code: Option<i32>) -> ErrorEvidence<'a> {
    let flagged = e.agent.is_error == Some(true);
    ErrorEvidence {
        error_text: e.agent.error_text.as_deref(),
        flagged_text: flagged.then_some(e.agent.final_text.as_deref()).flatten(),
        stderr: e.stderr_end,
        stdout_text: e
            .text_output
            .then_some(e.agent.final_text.as_deref())
            .flatten(),
        exit_code,
    }
}

fn judge_status(e: &Evidence<'_>) -> Verdict {
    use FailureKind as K;
    let v = |status, kind: K, reason: String| Verdict::not_completed(status, Some(kind), reason);
    let flagged = e.agent.is_error == Some(true);
    let evidence = |exit_code| error_evidence(e, exit_code);
    match e.end {
        ProcessEnd::TimedOut { limit, last_error } => {
            // A CLI that retried an error on its own until the limit printed why all along
            // (issue 29): quote the last error a live line or a pattern recognised.
            let d = e.rules.diagnose(&evidence(None));
            let seen = match (last_error, d.kind, d.message) {
                (Some(line), _, _) => format!("; the last error it printed: {line}"),
                (None, Some(kind), Some(m)) => format!(
                    "; the last error it printed ({kind}): {}",
                    one_line(&m, 200)
                ),
                _ => String::new(),
            };
            return v(
                ItemStatus::TimedOut,
                K::TimedOut,
                format!(
                    "timed out after {}; the attempt was stopped{seen}",
                    humantime::format_duration(*limit)
                ),
            );
        }
        ProcessEnd::Cancelled => {
            return v(
                ItemStatus::Cancelled,
                K::Cancelled,
                "interrupted; the attempt was stopped".into(),
            );
        }
        ProcessEnd::NotStarted(why) => {
            return v(
                ItemStatus::Failed,
                K::AgentError,
                format!("not started: {why}"),
            );
        }
        ProcessEnd::Signalled(sig) => {
            return v(
                ItemStatus::Failed,
                K::AgentError,
                format!("killed by signal {sig}"),
            );
        }
        ProcessEnd::Failed { kind, reason, .. } => {
            return v(ItemStatus::Failed, *kind, reason.clone());
        }
        ProcessEnd::Exited(0) => {}
        ProcessEnd::Exited(code) => {
            // The CLI's own words (its error_text, its flagged final text, the JSON error
            // object ending stderr) before the last stderr line; then what a failed report
            // says (an exec agent that exits 1 after writing `failure_kind`).
            let d = e.rules.diagnose(&evidence(Some(*code)));
            let failed_report = match e.report {
                Ok((r, _)) if r.status == "failed" => Some(r),
                _ => None,
            };
            let message = d.message.clone().or_else(|| {
                failed_report
                    .map(|r| r.summary.clone())
                    .filter(|s| !s.trim().is_empty())
            });
            let kind = d.kind.or_else(|| failed_report.and_then(stated_kind));
            let reason = match message.map(|m| one_line(&m, 160)) {
                Some(m) if flagged && e.agent.error_text.is_none() => {
                    format!("exited with code {code}: the agent reported an error: {m}")
                }
                Some(m) => format!("exited with code {code}: {m}"),
                None => format!("exited with code {code}"),
            };
            let kind = kind.unwrap_or(K::AgentError);
            return v(ItemStatus::Failed, kind, d.hinted(reason));
        }
    }
    if flagged {
        let d = e.rules.diagnose(&evidence(Some(0)));
        let what = d
            .message
            .as_deref()
            .map(|m| one_line(m, 160))
            .unwrap_or_default();
        let reason = format!("the agent reported an error: {what}")
            .trim_end_matches([':', ' '])
            .to_owned();
        return v(
            ItemStatus::Failed,
            d.kind.unwrap_or(K::AgentError),
            d.hinted(reason),
        );
    }
    let report = match e.report {
        Ok((r, _)) => r,
        Err(ReportError::Missing) => {
            // Exit 0 and no report: a CLI that swallows API errors (aider) printed why.
            let d = e.rules.diagnose(&evidence(Some(0)));
            if let (Some(m), Some(kind)) = (&d.message, d.kind)
                && e.rules.recognises(m)
            {
                let reason = format!("{} (and no report)", one_line(m, 160));
                return v(ItemStatus::Failed, kind, d.hinted(reason));
            }
            let why = match &e.agent.parse_problem {
                Some(p) => format!("{} ({p})", ReportError::Missing),
                None => ReportError::Missing.to_string(),
            };
            return v(ItemStatus::Failed, K::NoReport, why);
        }
        Err(why) => {
            let why = match &e.agent.parse_problem {
                Some(p) => format!("{why} ({p})"),
                None => why.to_string(),
            };
            return v(ItemStatus::Failed, K::InvalidReport, why);
        }
    };
    match report.status.as_str() {
        // A completed report must not contradict itself.
        "completed" if report.tests.as_deref() == Some("failed") => {
            return v(
                ItemStatus::Failed,
                K::InvalidReport,
                format!(
                    "the report says completed, but its tests failed: {}",
                    one_line(&report.summary, 200)
                )
                .trim_end_matches([':', ' '])
                .to_owned(),
            );
        }
        "completed" if report.summary.trim().is_empty() => {
            return v(
                ItemStatus::Failed,
                K::InvalidReport,
                "the report says completed, but its summary is blank (say what was done)".into(),
            );
        }
        "completed" => {}
        "blocked" => {
            let why = report
                .blocker
                .as_deref()
                .filter(|b| !b.trim().is_empty())
                .unwrap_or(&report.summary);
            return Verdict::not_completed(
                ItemStatus::Blocked,
                None,
                format!("blocked: {}", one_line(why, 200)),
            );
        }
        _ => {
            // An agent may say why it failed (`"failure_kind": "rate_limited"`).
            let kind = stated_kind(report).unwrap_or(K::AgentError);
            // A kind the agent may not state is not dropped silently.
            let bad_kind = report
                .raw
                .get("failure_kind")
                .filter(|_| stated_kind(report).is_none())
                .map(|k| {
                    format!(
                        " (its failure_kind {k} is not one an agent may state: rate_limited, quota, auth, api_error or agent_error)"
                    )
                })
                .unwrap_or_default();
            return v(
                ItemStatus::Failed,
                kind,
                format!(
                    "the report says failed: {}{bad_kind}",
                    one_line(&report.summary, 200)
                ),
            );
        }
    }
    if let Some(errs) = e.schema_errors {
        return v(
            ItemStatus::Failed,
            K::InvalidReport,
            format!(
                "output does not match output_schema: {}",
                one_line(errs, 200)
            ),
        );
    }
    match e.verify {
        VerifyResult::NotRun | VerifyResult::Passed => {}
        VerifyResult::Cancelled => {
            return v(
                ItemStatus::Cancelled,
                K::Cancelled,
                "interrupted during verify".into(),
            );
        }
        VerifyResult::Failed(why) => {
            return v(
                ItemStatus::Failed,
                K::VerifyFailed,
                format!("verify failed: {}", one_line(why, 200)),
            );
        }
    }
    if let Some(Err(why)) = e.commit {
        return v(
            ItemStatus::Failed,
            K::AgentError,
            format!("cannot commit the worktree: {why}"),
        );
    }
    Verdict::completed()
}

/// The failure kind a report states (`"failure_kind": "rate_limited"`), when it is one an
/// agent may state ([`FailureKind::reportable`]).
fn stated_kind(report: &Report) -> Option<FailureKind> {
    report
        .raw
        .get("failure_kind")
        .and_then(Value::as_str)
        .and_then(FailureKind::parse)
        .filter(|k| k.reportable())
}

/// Most schema errors named in a reason.
const SCHEMA_ERRORS_NAMED: usize = 3;

/// The ways `report`'s `output` breaks `validator` (the compiled `output_schema`), as one
/// line: at most three errors, each prefixed by its JSON Pointer path (`/n: ...`) when not at
/// the root, joined by `; `. `None` when it matches, and for a report that is not
/// `completed` (its output is not held to the schema).
pub fn schema_errors(report: &Report, validator: &jsonschema::Validator) -> Option<String> {
    if report.status != "completed" {
        return None;
    }
    let errs: Vec<String> = validator
        .iter_errors(&report.output)
        .take(SCHEMA_ERRORS_NAMED)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    (!errs.is_empty()).then(|| errs.join("; "))
}

/// The verdict on an attempt that could not be prepared (teammate folder, prompt, argv,
/// worktree or its set-up command): `failed` with `reason` as it is.
pub fn judge_unprepared(reason: String) -> Verdict {
    Verdict::not_completed(ItemStatus::Failed, Some(FailureKind::AgentError), reason)
}

/// The final verdict on an item whose retry was due when the run was interrupted (during the
/// back-off before it): `cancelled`, whatever the last attempt's verdict was.
pub fn judge_interrupted_retry() -> Verdict {
    Verdict::not_completed(
        ItemStatus::Cancelled,
        Some(FailureKind::Cancelled),
        "interrupted before a retry".into(),
    )
}

/// The verdict on an item after `--merge` tried to merge its branch back: a `completed` item
/// whose merge failed (`Err(reason)`, e.g. a conflict; its branch is kept) becomes `failed`
/// with that reason; any other verdict stands as it was.
pub fn judge_merge(before: &Verdict, merge: &Result<(), GitError>) -> Verdict {
    match merge {
        Err(reason) if before.status == ItemStatus::Completed => Verdict::not_completed(
            ItemStatus::Failed,
            Some(FailureKind::MergeConflict),
            reason.to_string(),
        ),
        _ => before.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OK: &str = r#"{"id":"7","status":"completed","summary":"did it","output":{"n":1}}"#;

    #[test]
    fn extract_whole_fenced_or_last_object() {
        assert_eq!(
            extract_json(OK).and_then(|v| v.get("id").cloned()),
            Some(json!("7"))
        );
        let fenced = format!("Done.\n```json\n{OK}\n```\nbye");
        assert!(extract_json(&fenced).is_some());
        let trailing = format!("I did {{some}} things {{\"a\":1}} then\n{OK}\n");
        assert_eq!(
            extract_json(&trailing).and_then(|v| v.get("summary").cloned()),
            Some(json!("did it"))
        );
        assert!(extract_json("no json here { nope").is_none());
    }

    #[test]
    fn two_fenced_blocks_fall_back_to_last_object() {
        let text = "```json\n{\"status\":\"failed\",\"summary\":\"a\"}\n```\n```json\n{\"status\":\"completed\",\"summary\":\"b\"}\n```\n";
        let v = extract_json(text).expect("object");
        assert_eq!(v["summary"], "b");
    }

    #[test]
    fn validation_rules() {
        assert!(validate(json!({"status":"completed","summary":"x"}), &["1"]).is_ok());
        assert!(validate(json!({"id":1,"status":"completed","summary":"x"}), &["1"]).is_ok());
        // A stage's report may name its row.
        let stage = ["a.rs/audit", "a.rs"];
        assert!(
            validate(
                json!({"id":"a.rs","status":"completed","summary":"x"}),
                &stage
            )
            .is_ok()
        );
        assert!(
            validate(
                json!({"id":"b.rs","status":"completed","summary":"x"}),
                &stage
            )
            .is_err()
        );
        let e = validate(json!({"id":"2","status":"completed","summary":"x"}), &["1"])
            .expect_err("wrong id");
        assert!(e.to_string().contains("not `1`"), "{e}");
        assert!(validate(json!({"status":"done","summary":"x"}), &["1"]).is_err());
        let e = validate(
            json!({"status":"completed","summary":"x","cost_usd":"0.5"}),
            &["1"],
        )
        .expect_err("a cost that is not a number");
        assert!(e.to_string().contains("`cost_usd` is \"0.5\""), "{e}");
        assert!(
            validate(
                json!({"status":"failed","summary":"x","retry_after_s":-1}),
                &["1"]
            )
            .is_err()
        );
        assert!(
            validate(
                json!({"status":"completed","summary":"x","cost_usd":0.5,"retry_after_s":null}),
                &["1"]
            )
            .is_ok()
        );
        assert!(validate(json!({"status":"completed"}), &["1"]).is_err());
        assert!(
            validate(
                json!({"status":"completed","summary":"x","tests":"maybe"}),
                &["1"]
            )
            .is_err()
        );
        assert!(
            validate(
                json!({"status":"completed","summary":"x","files_modified":"a"}),
                &["1"]
            )
            .is_err()
        );
    }

    #[test]
    fn report_file_wins_over_final_text() {
        let (r, src) = find(
            Some(OK),
            Some("{\"status\":\"failed\",\"summary\":\"no\"}"),
            &["7"],
        )
        .expect("found");
        assert_eq!(src, ReportSource::File);
        assert_eq!(r.summary, "did it");
        let (_, src) = find(None, Some(OK), &["7"]).expect("found");
        assert_eq!(src, ReportSource::FinalText);
        assert!(
            find(None, Some("all done!"), &["7"])
                .expect_err("none")
                .to_string()
                .starts_with("no report")
        );
    }

    fn verdict(
        end: ProcessEnd,
        agent: AgentResult,
        report: Result<(Report, ReportSource), ReportError>,
    ) -> Verdict {
        judge(&Evidence {
            end: &end,
            stderr_end: None,
            agent: &agent,
            rules: &NO_RULES,
            text_output: false,
            report: &report,
            schema_errors: None,
            verify: &VerifyResult::NotRun,
            commit: None,
        })
    }

    fn good() -> Result<(Report, ReportSource), ReportError> {
        find(Some(OK), None, &["7"])
    }

    #[test]
    fn a_completed_report_that_contradicts_itself_fails_with_the_reason() {
        let ok = |text: &str| {
            verdict(
                ProcessEnd::Exited(0),
                AgentResult::default(),
                find(Some(text), None, &["7"]),
            )
        };
        let v = ok(r#"{"status":"completed","summary":"did it","tests":"failed"}"#);
        assert_eq!(v.status, ItemStatus::Failed);
        assert!(
            v.reason.contains("tests failed") && v.reason.contains("did it"),
            "{}",
            v.reason
        );
        for blank in ["", "   "] {
            let v = ok(&format!(r#"{{"status":"completed","summary":"{blank}"}}"#));
            assert_eq!(v.status, ItemStatus::Failed);
            assert!(v.reason.contains("summary is blank"), "{}", v.reason);
        }
        for fine in ["passed", "added", "none"] {
            let v = ok(&format!(
                r#"{{"status":"completed","summary":"s","tests":"{fine}"}}"#
            ));
            assert_eq!(v.status, ItemStatus::Completed, "tests {fine}");
        }
    }

    #[test]
    fn success_rule() {
        assert_eq!(
            verdict(ProcessEnd::Exited(0), AgentResult::default(), good()).status,
            ItemStatus::Completed
        );
        assert_eq!(
            verdict(ProcessEnd::Exited(1), AgentResult::default(), good()).status,
            ItemStatus::Failed
        );
        assert_eq!(
            verdict(ProcessEnd::Signalled(9), AgentResult::default(), good()).status,
            ItemStatus::Failed
        );
        let timed_out = verdict(
            ProcessEnd::TimedOut {
                limit: std::time::Duration::from_millis(300),
                last_error: None,
            },
            AgentResult::default(),
            good(),
        );
        assert_eq!(timed_out.status, ItemStatus::TimedOut);
        // A limit under a second is shown as given (it read "after 0s").
        assert!(
            timed_out.reason.starts_with("timed out after 300ms;"),
            "{}",
            timed_out.reason
        );
        // A CLI that retried a 429 on its own until the limit: the reason quotes its words.
        let end = ProcessEnd::TimedOut {
            limit: std::time::Duration::from_secs(120),
            last_error: None,
        };
        let agent = AgentResult::default();
        let report = good();
        let retried = judge(&Evidence {
            end: &end,
            stderr_end: Some(
                "Attempt 3 failed with status 429. Retrying with backoff...\nstill going\n",
            ),
            agent: &agent,
            rules: &NO_RULES,
            text_output: false,
            report: &report,
            schema_errors: None,
            verify: &VerifyResult::NotRun,
            commit: None,
        });
        assert_eq!(retried.kind, Some(FailureKind::TimedOut));
        assert_eq!(
            retried.reason,
            "timed out after 2m; the attempt was stopped; the last error it printed (rate_limited): Attempt 3 failed with status 429. Retrying with backoff..."
        );
        assert_eq!(
            verdict(ProcessEnd::Cancelled, AgentResult::default(), good()).status,
            ItemStatus::Cancelled
        );
        let err = AgentResult {
            is_error: Some(true),
            final_text: Some("rate limited".into()),
            ..Default::default()
        };
        let v = verdict(ProcessEnd::Exited(0), err.clone(), good());
        assert_eq!(v.status, ItemStatus::Failed);
        assert!(v.reason.contains("rate limited"));
        let v = verdict(ProcessEnd::Exited(1), err, good());
        assert_eq!(
            v.reason,
            "exited with code 1: the agent reported an error: rate limited"
        );
        let blocked = find(
            Some(r#"{"status":"blocked","summary":"s","blocker":"need a key"}"#),
            None,
            &["7"],
        );
        let v = verdict(ProcessEnd::Exited(0), AgentResult::default(), blocked);
        assert_eq!(
            (v.status, v.reason.as_str()),
            (ItemStatus::Blocked, "blocked: need a key")
        );
        let end = ProcessEnd::Exited(0);
        let agent = AgentResult::default();
        let report = good();
        let verify = VerifyResult::Failed("exit 1".to_string());
        let e = Evidence {
            end: &end,
            stderr_end: None,
            agent: &agent,
            rules: &NO_RULES,
            text_output: false,
            report: &report,
            schema_errors: Some("/n: 1 is not a string"),
            verify: &VerifyResult::NotRun,
            commit: None,
        };
        assert_eq!(judge(&e).status, ItemStatus::Failed);
        let e = Evidence {
            schema_errors: None,
            verify: &verify,
            ..e
        };
        assert_eq!(judge(&e).status, ItemStatus::Failed);
    }

    /// Evidence of an attempt whose agent did everything right.
    static NO_RULES: FailureRules = FailureRules::NONE;

    fn clean<'a>(
        end: &'a ProcessEnd,
        agent: &'a AgentResult,
        report: &'a Result<(Report, ReportSource), ReportError>,
    ) -> Evidence<'a> {
        Evidence {
            end,
            stderr_end: None,
            rules: &NO_RULES,
            text_output: false,
            agent,
            report,
            schema_errors: None,
            verify: &VerifyResult::NotRun,
            commit: None,
        }
    }

    #[test]
    fn an_interrupt_during_verify_cancels_a_completed_attempt() {
        let (end, agent, report) = (ProcessEnd::Exited(0), AgentResult::default(), good());
        let e = Evidence {
            verify: &VerifyResult::Cancelled,
            ..clean(&end, &agent, &report)
        };
        assert_eq!(
            judge(&e),
            Verdict {
                status: ItemStatus::Cancelled,
                reason: "interrupted during verify".into(),
                kind: Some(FailureKind::Cancelled),
                retry_after_s: None,
            }
        );
        let e = Evidence {
            verify: &VerifyResult::Passed,
            ..clean(&end, &agent, &report)
        };
        assert_eq!(judge(&e).status, ItemStatus::Completed);
    }

    #[test]
    fn a_failed_worktree_commit_fails_a_completed_attempt_with_the_git_reason() {
        let (end, agent, report) = (ProcessEnd::Exited(0), AgentResult::default(), good());
        let failed = Err(GitError::Failed(
            "fatal: unable to write new index file".to_string(),
        ));
        let e = Evidence {
            commit: Some(&failed),
            ..clean(&end, &agent, &report)
        };
        assert_eq!(
            judge(&e),
            Verdict {
                status: ItemStatus::Failed,
                reason: "cannot commit the worktree: fatal: unable to write new index file".into(),
                kind: Some(FailureKind::AgentError),
                retry_after_s: None,
            }
        );
        let ok = Ok(());
        let e = Evidence {
            commit: Some(&ok),
            ..clean(&end, &agent, &report)
        };
        assert_eq!(judge(&e).status, ItemStatus::Completed);
        // A verdict that was not completed keeps its own reason.
        let verify = VerifyResult::Failed("`test -s out` exited with code 1".into());
        let e = Evidence {
            commit: Some(&failed),
            verify: &verify,
            ..clean(&end, &agent, &report)
        };
        assert!(judge(&e).reason.starts_with("verify failed: "));
    }

    #[test]
    fn schema_errors_name_the_path_and_fail_the_attempt() {
        let schema = json!({"type":"object","properties":{"n":{"type":"string"}}});
        let validator = jsonschema::validator_for(&schema).expect("schema compiles");
        let (r, _) = good().expect("report");
        let errs = schema_errors(&r, &validator).expect("1 is not a string");
        assert!(errs.starts_with("/n: "), "{errs}");
        let (end, agent, report) = (ProcessEnd::Exited(0), AgentResult::default(), good());
        let e = Evidence {
            schema_errors: Some(&errs),
            ..clean(&end, &agent, &report)
        };
        let v = judge(&e);
        assert_eq!(v.status, ItemStatus::Failed);
        assert!(
            v.reason
                .starts_with("output does not match output_schema: /n: "),
            "{}",
            v.reason
        );
        let fits = find(
            Some(r#"{"status":"completed","summary":"s","output":{"n":"one"}}"#),
            None,
            &["7"],
        )
        .expect("report");
        assert_eq!(schema_errors(&fits.0, &validator), None);
        let failed = find(
            Some(r#"{"status":"failed","summary":"s","output":{"n":1}}"#),
            None,
            &["7"],
        )
        .expect("report");
        assert_eq!(
            schema_errors(&failed.0, &validator),
            None,
            "only a completed report's output is held to the schema"
        );
    }

    #[test]
    fn each_failure_has_a_kind_and_the_cli_s_own_words() {
        use FailureKind as K;
        let rules = FailureRules::NONE;
        let judge_with = |end: ProcessEnd, agent: AgentResult, stderr: Option<&str>, text: bool| {
            let report = find(None, agent.final_text.as_deref(), &["7"]);
            judge(&Evidence {
                stderr_end: stderr,
                rules: &rules,
                text_output: text,
                ..clean(&end, &agent, &report)
            })
        };
        // codex: the cause is only in its JSON events (error_text), stderr is empty.
        let codex = AgentResult {
            error_text: Some("exceeded retry limit, last status: 429 Too Many Requests".into()),
            ..Default::default()
        };
        let v = judge_with(ProcessEnd::Exited(1), codex, None, false);
        assert_eq!(v.kind, Some(K::RateLimited));
        assert_eq!(
            v.reason,
            "exited with code 1: exceeded retry limit, last status: 429 Too Many Requests"
        );
        // Claude Code: is_error with the API error as its result text.
        let claude = AgentResult {
            is_error: Some(true),
            final_text: Some("Invalid API key · Please run /login".into()),
            ..Default::default()
        };
        let v = judge_with(ProcessEnd::Exited(1), claude.clone(), None, false);
        assert_eq!(v.kind, Some(K::Auth));
        assert_eq!(
            v.reason,
            "exited with code 1: the agent reported an error: Invalid API key · Please run /login"
        );
        let v = judge_with(ProcessEnd::Exited(0), claude, None, false);
        assert_eq!(v.kind, Some(K::Auth), "exit 0 with is_error");
        // aider: exit 0, no report, the provider's error printed in its text output.
        let aider = AgentResult {
            final_text: Some(
                "Aider v0.86.2\nlitellm.AuthenticationError: OpenAIException - Incorrect API key provided\n"
                    .into(),
            ),
            ..Default::default()
        };
        let v = judge_with(ProcessEnd::Exited(0), aider.clone(), None, true);
        assert_eq!(v.kind, Some(K::Auth));
        assert!(
            v.reason.starts_with("litellm.AuthenticationError"),
            "{}",
            v.reason
        );
        // The same words in a JSON-output CLI's stdout are not searched: plain no report.
        let v = judge_with(ProcessEnd::Exited(0), aider, None, false);
        assert_eq!(v.kind, Some(K::NoReport));
        // A crash with an unrecognised message is the agent's error; the message is quoted.
        let v = judge_with(
            ProcessEnd::Exited(3),
            AgentResult::default(),
            Some("TypeError: x is undefined\n"),
            false,
        );
        assert_eq!(
            (v.kind, v.reason.as_str()),
            (
                Some(K::AgentError),
                "exited with code 3: TypeError: x is undefined"
            )
        );
        // Kinds that follow from how it ended.
        let none = AgentResult::default();
        for (end, kind) in [
            (
                ProcessEnd::TimedOut {
                    limit: std::time::Duration::from_secs(5),
                    last_error: None,
                },
                K::TimedOut,
            ),
            (ProcessEnd::Cancelled, K::Cancelled),
            (ProcessEnd::Signalled(9), K::AgentError),
            (
                ProcessEnd::NotStarted("no such program".into()),
                K::AgentError,
            ),
        ] {
            assert_eq!(judge_with(end, none.clone(), None, false).kind, Some(kind));
        }
    }

    #[test]
    fn an_agent_may_state_its_failure_kind_but_not_a_bookkeeping_one() {
        let judge_report = |text: &str| {
            let (end, agent) = (ProcessEnd::Exited(0), AgentResult::default());
            let report = find(Some(text), None, &["7"]);
            judge(&clean(&end, &agent, &report))
        };
        let v = judge_report(
            r#"{"status":"failed","summary":"429 from the API","failure_kind":"rate_limited","retry_after_s":30}"#,
        );
        assert_eq!(v.kind, Some(FailureKind::RateLimited));
        let v = judge_report(r#"{"status":"failed","summary":"s","failure_kind":"completed"}"#);
        assert_eq!(v.kind, Some(FailureKind::AgentError), "not a kind");
        let v = judge_report(r#"{"status":"failed","summary":"s","failure_kind":"timed_out"}"#);
        assert_eq!(v.kind, Some(FailureKind::AgentError), "the runner's word");
        assert_eq!(
            v.reason,
            "the report says failed: s (its failure_kind \"timed_out\" is not one an agent may state: rate_limited, quota, auth, api_error or agent_error)"
        );
        let v = judge_report(r#"{"status":"blocked","summary":"s","blocker":"a key"}"#);
        assert_eq!((v.status, v.kind), (ItemStatus::Blocked, None));
        let v = judge_report(r#"{"status":"completed","summary":"s","tests":"failed"}"#);
        assert_eq!(v.kind, Some(FailureKind::InvalidReport));
        let v = judge_report("{not json");
        assert_eq!(v.kind, Some(FailureKind::InvalidReport));
        assert_eq!(judge_report(OK).kind, None);
    }

    #[test]
    fn a_failed_merge_fails_a_completed_item_and_leaves_others_alone() {
        let completed = Verdict::completed();
        let conflict = Err(GitError::Conflict(vec!["src/a.rs".into()]));
        assert_eq!(
            judge_merge(&completed, &conflict),
            Verdict {
                status: ItemStatus::Failed,
                reason: "merge conflict in src/a.rs".into(),
                kind: Some(FailureKind::MergeConflict),
                retry_after_s: None,
            }
        );
        assert_eq!(judge_merge(&completed, &Ok(())), completed);
        let blocked =
            Verdict::not_completed(ItemStatus::Blocked, None, "blocked: need a key".into());
        assert_eq!(judge_merge(&blocked, &conflict), blocked);
    }
}
