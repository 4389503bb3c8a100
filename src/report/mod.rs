//! The teammate's report and the success rule (DESIGN §4), in two concepts:
//!
//! - [`format`]: the report a teammate writes — where it is found (the `RUNNER_REPORT` file,
//!   else the agent's final text), its fields and their rules, its `output` against
//!   `output_schema`;
//! - [`verdict`]: the success rule — [`judge`] turns the [`Evidence`] of one attempt into a
//!   [`Verdict`] (status, failure kind, reason, retry-after), step by step in the rule's order;
//!   [`judge_merge`] and the verdicts on attempts that never ran.
//!
//! [`ItemStatus`] and [`one_line`] are shared by both (and by every output).

use serde::{Deserialize, Serialize};

pub(crate) mod best_of;
pub(crate) mod format;
pub(crate) mod verdict;

pub(crate) use format::{
    MAX_REPORT_BYTES, Report, ReportError, ReportSource, extract_json, find, schema_errors,
};
pub(crate) use verdict::{
    Evidence, ProcessEnd, Verdict, VerifyResult, judge, judge_interrupted_retry, judge_merge,
    judge_unprepared, kind_of_not_run,
};

/// How an item ended. Only `Completed` items are ticked and have their checkpoints deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ItemStatus {
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
    pub(crate) fn as_str(self) -> &'static str {
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
    pub(crate) const ALL: [ItemStatus; 6] = [
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

/// `reason` without a leading `<status>: ` (a blocked item's reason starts `blocked: `), for
/// a line that shows the status already (`BLOCKED … needs a key`, `> runner: blocked: …`).
pub(crate) fn without_status(reason: &str, status: ItemStatus) -> &str {
    reason
        .strip_prefix(status.as_str())
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(reason)
}

/// The first non-blank line of `s`, control characters (escape sequences included) turned
/// into spaces, at most `max` characters (`…` marks a cut). Agent text goes through this before
/// it reaches a terminal, a CSV cell or a lead agent.
pub(crate) fn one_line(s: &str, max: usize) -> String {
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
