//! The recorded result of one item: what the journal stores and every sink reads.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::failure::FailureKind;
use crate::report::{self, ItemStatus};

/// The final result of one item in one run, written to `journal.jsonl` as an
/// `item_finished` event and read by the sinks (workers-output.csv, todo ticks, JUnit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Outcome {
    /// Item id.
    pub id: String,
    /// Teammate name.
    pub teammate: String,
    /// One-line title.
    pub title: String,
    /// Final status.
    pub status: ItemStatus,
    /// Attempts made for this item, across runs that resumed it: executions — a request the
    /// provider refused unprocessed (the HTTP backend's 429) is a wait, not an attempt.
    pub attempts: u32,
    /// Times the item waited for a rate limit (or a quota's reset) and went again, across
    /// runs that resumed it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rate_limit_waits: u32,
    /// Exit code of the last attempt, when it exited.
    pub exit_code: Option<i32>,
    /// Wall time of the last attempt, seconds.
    pub duration_s: f64,
    /// When the first attempt of this run started (RFC 3339), empty if it never started.
    pub started_at: String,
    /// When the item finished (RFC 3339).
    pub finished_at: String,
    /// One-line reason when not completed.
    pub error: String,
    /// Why, as one word (`rate_limited`, `auth`, ...); `None` when completed or blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_kind: Option<FailureKind>,
    /// The report's summary.
    pub summary: String,
    /// Path of the last attempt's stdout log (empty if none).
    pub log: String,
    /// The report's `output` (null when none).
    #[serde(default)]
    pub output: Value,
    /// The whole report, when one was found.
    #[serde(default)]
    pub report: Option<Value>,
    /// Cost in USD, when the runner definition yields it.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// Input tokens, when known.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// Of the input tokens, those read from the provider's prompt cache, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Output tokens, when known.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Agent turns, when known.
    #[serde(default)]
    pub turns: Option<u64>,
    /// Agent session id, when known.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The model that answered its last attempt, as the CLI's or the API's own output says
    /// (a model pin the CLI ignored shows here); `None` when the output does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The item's content hash ([`crate::item::WorkItem::content`]): a resumed run reruns a
    /// completed item whose content changed.
    #[serde(default, alias = "prompt_hash")]
    pub content_hash: String,
    /// The teammate's branch, with `--isolate worktree`.
    #[serde(default)]
    pub branch: Option<String>,
    /// The branch's head commit after the last attempt, with `--isolate worktree`.
    #[serde(default)]
    pub commit: Option<String>,
    /// `git diff --shortstat` of the branch against the run's base commit.
    #[serde(default)]
    pub diffstat: Option<String>,
    /// With `--merge`: the commit on the target branch that merged this item's branch in
    /// (recorded by the merge queue once the target moved to it); absent while it waits in
    /// the queue or when its merge failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<String>,
    /// With `--merge=review`: the item completed and its branch waits for `runner accept`
    /// (then the merge queue) or `runner reject`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub awaiting_review: bool,
    /// The agent finished with a valid report, and the run was interrupted while the verify
    /// command checked it (status `cancelled`): a resume runs only the verify, on this
    /// report, instead of the agent again (the agent's work is not done twice).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub awaiting_verify: bool,
    /// With `--best-of`: the item's candidates, the winner and the rule that chose it (the
    /// rest of the outcome is the winner's, its cost the sum of every candidate's); absent
    /// otherwise (DESIGN §13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_of: Option<Box<crate::report::best_of::BestOf>>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Outcome {
    /// An outcome for an item that never ran (skipped, or cancelled before it started); its
    /// failure kind follows from `status` (`skipped`, `cancelled`).
    pub(crate) fn not_run(
        id: &str,
        teammate: &str,
        title: &str,
        status: ItemStatus,
        reason: String,
    ) -> Outcome {
        Outcome {
            id: id.to_owned(),
            teammate: teammate.to_owned(),
            title: title.to_owned(),
            status,
            attempts: 0,
            rate_limit_waits: 0,
            exit_code: None,
            duration_s: 0.0,
            started_at: String::new(),
            finished_at: crate::run::now_rfc3339(),
            error: reason,
            failure_kind: report::kind_of_not_run(status),
            summary: String::new(),
            log: String::new(),
            output: Value::Null,
            report: None,
            cost_usd: None,
            input_tokens: None,
            cached_input_tokens: None,
            output_tokens: None,
            turns: None,
            session_id: None,
            model: None,
            content_hash: String::new(),
            branch: None,
            commit: None,
            diffstat: None,
            merged: None,
            awaiting_review: false,
            awaiting_verify: false,
            best_of: None,
        }
    }
}

/// The report's hand-off fields (`report/format.rs`; the seed's task-management protocol) as a
/// lead reads them: the `item_finished` event carries them beside the outcome's own fields.
/// Taken from [`Outcome::report`]; without a report, or where the report's value is not of
/// the type, a list is empty and a text `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Handoff {
    /// Files the teammate changed, as it named them.
    pub files_modified: Vec<String>,
    /// Files the teammate created.
    pub files_created: Vec<String>,
    /// What it did about tests (`passed`, `failed`, `added`, `none`, or its own words).
    pub tests: Option<String>,
    /// What blocks the item, when it is blocked.
    pub blocker: Option<String>,
    /// What is left to do.
    pub next_steps: Vec<String>,
}

impl Outcome {
    /// The hand-off fields of the item's report.
    pub(crate) fn handoff(&self) -> Handoff {
        let field = |key: &str| self.report.as_ref().and_then(|r| r.get(key));
        let list = |key: &str| -> Vec<String> {
            field(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let text = |key: &str| field(key).and_then(Value::as_str).map(str::to_owned);
        Handoff {
            files_modified: list("files_modified"),
            files_created: list("files_created"),
            tests: text("tests"),
            blocker: text("blocker"),
            next_steps: list("next_steps"),
        }
    }
}

/// What attempts cost, as the agents said: USD and tokens, each `None` until one said it.
/// Summed over every attempt of every run of an item for its outcome, and over every item
/// for the team's budget (issue 24: retries cost money too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Spend {
    /// Cost, USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Input (prompt) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Of the input tokens, those the provider read from its prompt cache (the HTTP
    /// backends; billed at a fraction of the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Output (completion) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
}

impl Spend {
    /// Add `other` (a field stays `None` only if both are).
    pub(crate) fn add(&mut self, other: Spend) {
        fn sum<T: std::ops::Add<Output = T>>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, None) => a,
                (None, b) => b,
            }
        }
        self.cost_usd = sum(self.cost_usd, other.cost_usd);
        self.input_tokens = sum(self.input_tokens, other.input_tokens);
        self.cached_input_tokens = sum(self.cached_input_tokens, other.cached_input_tokens);
        self.output_tokens = sum(self.output_tokens, other.output_tokens);
    }

    /// Whether no attempt said what it cost.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Spend::default()
    }
}

/// A cost in USD as written in outputs: rounded to micro-dollars, without trailing zeros
/// (`0.1 + 0.2` is `0.3`, not `0.30000000000000004`).
pub(crate) fn usd_text(cost: f64) -> String {
    let text = format!("{cost:.6}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_are_written_in_micro_dollars_without_float_noise() {
        assert_eq!(usd_text(0.1 + 0.2), "0.3");
        assert_eq!(usd_text(1.0), "1");
        assert_eq!(usd_text(0.000_000_4), "0");
        assert_eq!(usd_text(0.123_456_78), "0.123457");
    }
}
