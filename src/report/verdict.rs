//! The verdict on an attempt: the success rule ([`judge`]), the only place an attempt's
//! status is decided, and the verdicts around it (a failed merge, an attempt never prepared,
//! a retry interrupted).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::{Report, ReportError, ReportSource};
use super::{ItemStatus, one_line};
use crate::agent::AgentResult;
use crate::failure::{ErrorEvidence, FailureKind, FailureRules};
use crate::git::GitError;

/// How the agent process ended, as the run layer saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProcessEnd {
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
        /// The agent printed nothing on stdout or stderr (lines its definition ignores
        /// aside) before it was stopped: it never got going (a request it waited on without
        /// a word, a prompt of its own nobody answered). Only the process backend knows.
        silent: bool,
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
pub(crate) enum VerifyResult {
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
pub(crate) struct Evidence<'a> {
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
pub(crate) struct Verdict {
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
    pub(crate) fn completed() -> Verdict {
        Verdict {
            status: ItemStatus::Completed,
            reason: String::new(),
            kind: None,
            retry_after_s: None,
        }
    }

    /// A verdict that is not `completed`; `kind` is `None` only for `blocked`.
    pub(crate) fn not_completed(
        status: ItemStatus,
        kind: Option<FailureKind>,
        reason: String,
    ) -> Verdict {
        Verdict {
            status,
            reason,
            kind,
            retry_after_s: None,
        }
    }
}

/// The failure kind an item that never ran gets: `skipped` or `cancelled` by its status.
pub(crate) fn kind_of_not_run(status: ItemStatus) -> Option<FailureKind> {
    match status {
        ItemStatus::Completed | ItemStatus::Blocked => None,
        ItemStatus::Cancelled => Some(FailureKind::Cancelled),
        ItemStatus::TimedOut => Some(FailureKind::TimedOut),
        ItemStatus::Skipped => Some(FailureKind::Skipped),
        ItemStatus::Failed => Some(FailureKind::AgentError),
    }
}

/// The success rule, the only place an attempt's status is decided. `completed` only if: the
/// process exited 0 on its own; the definition's error flag is not true; a valid report was
/// found; its status is `completed` and it does not contradict itself (`tests: "failed"`, a
/// blank `summary`); its output validates against the schema (if set); the
/// verify command (if set) passed; the worktree commit (with isolation) succeeded. Otherwise
/// `timed_out` (the time limit), `cancelled` (interrupted, also during verify), `blocked`
/// (the report says so) or `failed`, each with a one-line reason.
pub(crate) fn judge(e: &Evidence<'_>) -> Verdict {
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

/// The rule's steps in order; the first that finds the attempt wanting gives the verdict.
fn judge_status(e: &Evidence<'_>) -> Verdict {
    if let Some(v) = process_end(e) {
        return v;
    }
    if let Some(v) = error_flag(e) {
        return v;
    }
    let report = match report_found(e) {
        Ok(report) => report,
        Err(v) => return v,
    };
    report_status(report)
        .or_else(|| checks(e))
        .unwrap_or_else(Verdict::completed)
}

/// A `failed` (or other not-completed) verdict of kind `kind`.
fn not_completed(status: ItemStatus, kind: FailureKind, reason: String) -> Verdict {
    Verdict::not_completed(status, Some(kind), reason)
}

/// Step 1: the process exited 0 on its own. Else how it ended is the verdict: the time limit
/// (with the last error a CLI that kept retrying printed), an interrupt, a start that failed,
/// a signal, a failure the backend named, or an exit code with the CLI's own words.
fn process_end(e: &Evidence<'_>) -> Option<Verdict> {
    use FailureKind as K;
    Some(match e.end {
        ProcessEnd::TimedOut {
            limit,
            last_error,
            silent,
        } => {
            // A CLI that retried an error on its own until the limit printed why all along
            // (issue 29): quote the last error a live line or a pattern recognised.
            let d = e.rules.diagnose(&error_evidence(e, None));
            let seen = match (last_error, d.kind, d.message) {
                (Some(line), _, _) => format!("; the last error it printed: {line}"),
                (None, Some(kind), Some(m)) => format!(
                    "; the last error it printed ({kind}): {}",
                    one_line(&m, 200)
                ),
                _ if *silent => "; it printed nothing after it started (no output on stdout or \
                                 stderr: it may have waited for the API or for input)"
                    .to_owned(),
                _ => String::new(),
            };
            not_completed(
                ItemStatus::TimedOut,
                K::TimedOut,
                format!(
                    "timed out after {}; the attempt was stopped{seen}",
                    humantime::format_duration(*limit)
                ),
            )
        }
        ProcessEnd::Cancelled => not_completed(
            ItemStatus::Cancelled,
            K::Cancelled,
            "interrupted; the attempt was stopped".into(),
        ),
        ProcessEnd::NotStarted(why) => not_completed(
            ItemStatus::Failed,
            K::AgentError,
            format!("not started: {why}"),
        ),
        ProcessEnd::Signalled(sig) => not_completed(
            ItemStatus::Failed,
            K::AgentError,
            format!("killed by signal {sig}"),
        ),
        ProcessEnd::Failed { kind, reason, .. } => {
            not_completed(ItemStatus::Failed, *kind, reason.clone())
        }
        ProcessEnd::Exited(0) => return None,
        ProcessEnd::Exited(code) => exited(e, *code),
    })
}

/// The verdict on a process that exited with `code` ≠ 0: the CLI's own words (its
/// error_text, its flagged final text, the JSON error object ending stderr) before the last
/// stderr line; then what a failed report says (an exec agent that exits 1 after writing
/// `failure_kind`).
fn exited(e: &Evidence<'_>, code: i32) -> Verdict {
    let d = e.rules.diagnose(&error_evidence(e, Some(code)));
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
    let flagged = e.agent.is_error == Some(true);
    let message = message.map(|m| match flagged && e.agent.error_text.is_none() {
        true => format!("the agent reported an error: {}", one_line(&m, 160)),
        false => one_line(&m, 160),
    });
    let reason = match with_ended(e, message) {
        Some(m) => format!("exited with code {code}: {m}"),
        None => format!("exited with code {code}"),
    };
    let kind = kind.unwrap_or(FailureKind::AgentError);
    not_completed(ItemStatus::Failed, kind, d.hinted(reason))
}

/// `message` led by the CLI's own account of how its run ended (`[result] ended`: "stopped at
/// its turn limit after 3 turns"), when it gave one.
fn with_ended(e: &Evidence<'_>, message: Option<String>) -> Option<String> {
    let Some(said) = e.agent.ended.as_deref() else {
        return message;
    };
    let said = match e.agent.turns {
        Some(1) => format!("{said} after 1 turn"),
        Some(n) => format!("{said} after {n} turns"),
        None => said.to_owned(),
    };
    Some(match message {
        Some(m) => format!("{said}: {m}"),
        None => said,
    })
}

/// Step 2: the definition's error flag is not true (an agent that exited 0 and said it
/// failed).
fn error_flag(e: &Evidence<'_>) -> Option<Verdict> {
    if e.agent.is_error != Some(true) {
        return None;
    }
    let d = e.rules.diagnose(&error_evidence(e, Some(0)));
    let what = with_ended(e, d.message.as_deref().map(|m| one_line(m, 160))).unwrap_or_default();
    let reason = format!("the agent reported an error: {what}")
        .trim_end_matches([':', ' '])
        .to_owned();
    Some(not_completed(
        ItemStatus::Failed,
        d.kind.unwrap_or(FailureKind::AgentError),
        d.hinted(reason),
    ))
}

/// Step 3: a valid report was found. Else `no_report` (or the error a CLI that swallows API
/// errors printed) or `invalid_report`, with what the definition could not parse.
fn report_found<'a>(e: &'a Evidence<'a>) -> Result<&'a Report, Verdict> {
    let why = match e.report {
        Ok((r, _)) => return Ok(r),
        Err(why) => why,
    };
    if *why == ReportError::Missing {
        // Exit 0 and no report: a CLI that swallows API errors (aider) printed why.
        let d = e.rules.diagnose(&error_evidence(e, Some(0)));
        if let (Some(m), Some(kind)) = (&d.message, d.kind)
            && e.rules.recognises(m)
        {
            let reason = format!("{} (and no report)", one_line(m, 160));
            return Err(not_completed(ItemStatus::Failed, kind, d.hinted(reason)));
        }
    }
    let kind = match why {
        ReportError::Missing => FailureKind::NoReport,
        _ => FailureKind::InvalidReport,
    };
    let why = match &e.agent.parse_problem {
        Some(p) => format!("{why} ({p})"),
        None => why.to_string(),
    };
    Err(not_completed(ItemStatus::Failed, kind, why))
}

/// Step 4: the report says `completed` and does not contradict itself (`tests: "failed"`, a
/// blank summary). Else `blocked` with its blocker, or `failed` with the kind it states.
fn report_status(report: &Report) -> Option<Verdict> {
    use FailureKind as K;
    match report.status.as_str() {
        // A completed report must not contradict itself.
        "completed" if report.tests.as_deref() == Some("failed") => Some(not_completed(
            ItemStatus::Failed,
            K::InvalidReport,
            format!(
                "the report says completed, but its tests failed: {}",
                one_line(&report.summary, 200)
            )
            .trim_end_matches([':', ' '])
            .to_owned(),
        )),
        "completed" if report.summary.trim().is_empty() => Some(not_completed(
            ItemStatus::Failed,
            K::InvalidReport,
            "the report says completed, but its summary is blank (say what was done)".into(),
        )),
        "completed" => None,
        "blocked" => {
            let why = report
                .blocker
                .as_deref()
                .filter(|b| !b.trim().is_empty())
                .unwrap_or(&report.summary);
            Some(Verdict::not_completed(
                ItemStatus::Blocked,
                None,
                format!("blocked: {}", one_line(why, 200)),
            ))
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
            Some(not_completed(
                ItemStatus::Failed,
                kind,
                format!(
                    "the report says failed: {}{bad_kind}",
                    one_line(&report.summary, 200)
                ),
            ))
        }
    }
}

/// Steps 5–7, the runner's own checks of a completed report: its output matches the schema
/// (if set), the verify command (if set) passed (an interrupt during it cancels), and the
/// worktree commit (with isolation) succeeded.
fn checks(e: &Evidence<'_>) -> Option<Verdict> {
    use FailureKind as K;
    if let Some(errs) = e.schema_errors {
        return Some(not_completed(
            ItemStatus::Failed,
            K::InvalidReport,
            format!(
                "output does not match output_schema: {}",
                one_line(errs, 200)
            ),
        ));
    }
    match e.verify {
        VerifyResult::NotRun | VerifyResult::Passed => {}
        VerifyResult::Cancelled => {
            return Some(not_completed(
                ItemStatus::Cancelled,
                K::Cancelled,
                "interrupted during verify".into(),
            ));
        }
        VerifyResult::Failed(why) => {
            return Some(not_completed(
                ItemStatus::Failed,
                K::VerifyFailed,
                format!("verify failed: {}", one_line(why, 200)),
            ));
        }
    }
    match e.commit {
        Some(Err(why)) => Some(not_completed(
            ItemStatus::Failed,
            K::AgentError,
            format!("cannot commit the worktree: {why}"),
        )),
        _ => None,
    }
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

/// The verdict on an attempt that could not be prepared (teammate folder, prompt, argv,
/// worktree or its set-up command): `failed` with `reason` as it is.
pub(crate) fn judge_unprepared(reason: String) -> Verdict {
    Verdict::not_completed(ItemStatus::Failed, Some(FailureKind::AgentError), reason)
}

/// The final verdict on an item whose retry was due when the run was interrupted (during the
/// back-off before it): `cancelled`, whatever the last attempt's verdict was.
pub(crate) fn judge_interrupted_retry() -> Verdict {
    Verdict::not_completed(
        ItemStatus::Cancelled,
        Some(FailureKind::Cancelled),
        "interrupted before a retry".into(),
    )
}

/// The verdict on an item after `--merge` tried to merge its branch back: a `completed` item
/// whose merge failed (`Err(reason)`; its branch is kept) becomes `failed` with that reason —
/// kind `merge_failed` when the merged tree failed `--verify-merged`
/// ([`GitError::Unverified`]), else `merge_conflict` (a conflict, or git refused); any other
/// verdict stands as it was. `T` is what a merge that went through returns (its commit).
pub(crate) fn judge_merge<T>(before: &Verdict, merge: &Result<T, GitError>) -> Verdict {
    let kind = match merge {
        Err(GitError::Unverified(_)) => FailureKind::MergeFailed,
        _ => FailureKind::MergeConflict,
    };
    match merge {
        Err(reason) if before.status == ItemStatus::Completed => {
            Verdict::not_completed(ItemStatus::Failed, Some(kind), reason.to_string())
        }
        _ => before.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{find, schema_errors};
    use serde_json::json;

    const OK: &str = r#"{"id":"7","status":"completed","summary":"did it","output":{"n":1}}"#;

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
                silent: false,
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
        // A CLI that printed nothing at all says so.
        let silent = verdict(
            ProcessEnd::TimedOut {
                limit: std::time::Duration::from_secs(8),
                last_error: None,
                silent: true,
            },
            AgentResult::default(),
            good(),
        );
        assert_eq!(
            silent.reason,
            "timed out after 8s; the attempt was stopped; it printed nothing after it started \
             (no output on stdout or stderr: it may have waited for the API or for input)"
        );
        // A CLI that retried a 429 on its own until the limit: the reason quotes its words.
        let end = ProcessEnd::TimedOut {
            limit: std::time::Duration::from_secs(120),
            last_error: None,
            silent: false,
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
                    silent: false,
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
        let conflict: Result<(), _> = Err(GitError::Conflict(vec!["src/a.rs".into()]));
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
        let broken: Result<(), _> = Err(GitError::Unverified(
            "`cargo test` exited with code 101".into(),
        ));
        assert_eq!(
            judge_merge(&completed, &broken).kind,
            Some(FailureKind::MergeFailed),
            "a merged tree that fails its check has a kind of its own"
        );
        let blocked =
            Verdict::not_completed(ItemStatus::Blocked, None, "blocked: need a key".into());
        assert_eq!(judge_merge(&blocked, &conflict), blocked);
    }
}
