//! The run's one event vocabulary (DESIGN §1). Units and the dispatcher describe what
//! happened as [`Event`]s; the same values are appended to `journal.jsonl` (the durable truth
//! a resumed run reads back), printed as `--format json` lines, and handed to every
//! [`Reporter`] (progress UI, sinks). None of them reaches back into the scheduler.
//!
//! On the wire an event is one JSON object, `{"v":1,"event":"<name>",…}`: the variant's
//! snake_case name under `event` and its fields beside it ([`Event::ItemFinished`] as
//! `"outcome"`, [`Event::RunFinished`] as the summary's fields). `docs/events.md` and
//! `docs/events.schema.json` describe it; a test checks them against serialized events.
//! [`Event::Activity`] is progress detail and never written.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::record::outcome::{Outcome, Spend};
use crate::report::{ItemStatus, Verdict};

/// Version of the event lines (the `v` of each journal and `--format json` line).
pub(crate) const VERSION: u32 = 1;

fn sandbox_none() -> String {
    "none".into()
}

/// A built-in runner replaced by a store's definition of the same name, as `run_started`
/// records it (and the run's first line announces it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ReplacedRunner {
    /// The built-in name (`claude`).
    pub name: String,
    /// The file that replaced it (written lossily when it is not UTF-8).
    #[serde(serialize_with = "lossy_path")]
    pub file: PathBuf,
}

/// Something that happened in a run, in the order the dispatcher saw it. Fields added after
/// the first journals were written are `serde(default)`, so old workspaces still read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event {
    /// The run (or a resumed run) is starting.
    RunStarted {
        /// When, RFC 3339 (UTC).
        #[serde(default)]
        at: String,
        /// The runner's pid.
        #[serde(default)]
        pid: u32,
        /// Team name.
        team: String,
        /// Team workspace folder (written lossily when it is not UTF-8).
        #[serde(default, serialize_with = "lossy_path")]
        workspace: PathBuf,
        /// Items in the batch, when known up front.
        #[serde(default)]
        total: Option<u64>,
        /// Items of this run that the journal shows completed by an earlier run with the
        /// same content, so they are not run again (an interrupted run's
        /// [`RunSummary::resumed`] counts only those it reached).
        #[serde(default)]
        resumed: u64,
        /// Parallel teammates.
        #[serde(default)]
        jobs: usize,
        /// How teammates are confined: `none` or `landlock` (`--sandbox`).
        #[serde(default = "sandbox_none")]
        sandbox: String,
        /// When teammates that run a process are unconfined: why (`auto: this kernel has no
        /// Landlock`, `auto: the workspace lies inside …`) or the flag that confines them,
        /// and what that lets them do ([`crate::settings::Settings::unconfined`]); for the HTTP
        /// backend, that it has no process to confine. Absent under Landlock.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox_why_none: Option<String>,
        /// A repository's definition (`<store>/runners/NAME.toml`) that replaced the
        /// built-in runner of the same name for this run; absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replaced_runner: Option<ReplacedRunner>,
        /// With BATCH.md's `stages:`, their names in order: an item `ROW/STAGE` is that
        /// stage of that row (issue 33); absent otherwise.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stages: Vec<String>,
        /// With `--merge`, `queue`: completed items wait for the merge queue after the run, so
        /// a display shows them `to merge` until an [`Event::ItemMerged`] says what they
        /// became; `review` (`--merge=review`): they wait for review (`to review`). Absent
        /// without `--merge`.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        merge: String,
    },
    /// An attempt of an item started.
    AttemptStarted {
        /// Item id.
        id: String,
        /// Teammate name.
        teammate: String,
        /// Title.
        #[serde(default)]
        title: String,
        /// Attempt number, 1-based, continuing the numbering of earlier runs.
        attempt: u32,
        /// Its process group (also the leader's pid); 0 when the backend starts no process.
        #[serde(default)]
        pgid: u32,
        /// With `--best-of`: the candidate (1 ..= N) this attempt is of; its attempts are
        /// numbered on their own. Absent otherwise (and in journals written before).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        candidate: Option<u32>,
        /// When, RFC 3339 (UTC).
        #[serde(default)]
        at: String,
    },
    /// An attempt ended; `retrying` says whether another follows.
    AttemptFinished {
        /// Item id.
        id: String,
        /// Teammate name.
        #[serde(default)]
        teammate: String,
        /// Attempt number.
        attempt: u32,
        /// The attempt's verdict (`status` and `reason` on the wire).
        #[serde(flatten)]
        verdict: Verdict,
        /// Whether the item will be attempted again.
        #[serde(default)]
        retrying: bool,
        /// With `--best-of`: the candidate this attempt is of (as in `attempt_started`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        candidate: Option<u32>,
        /// The request was refused before any work was done (the HTTP backend's 429, 503,
        /// 529): the item waits and sends the identical request again, and its `attempts`
        /// does not count this one (its `rate_limit_waits` does).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        refused: bool,
        /// What this attempt cost (`cost_usd`, `input_tokens`, `output_tokens` on the wire,
        /// each left out when the agent did not say).
        #[serde(flatten, default)]
        spend: Spend,
        /// When, RFC 3339 (UTC).
        #[serde(default)]
        at: String,
    },
    /// A running teammate wrote a line to its progress file (`RUNNER_PROGRESS`,
    /// [`crate::progress`]): where it is, what it found, what blocks it.
    Progress {
        /// Item id.
        id: String,
        /// Teammate name.
        teammate: String,
        /// Attempt number.
        attempt: u32,
        /// What it said (the line's fields, beside these on the wire).
        #[serde(flatten)]
        progress: crate::progress::Progress,
        /// When the runner read it, RFC 3339 (UTC).
        #[serde(default)]
        at: String,
    },
    /// A running item's agent printed a line (throttled; for progress displays only: never
    /// journaled or printed as an event line).
    #[serde(skip)]
    Activity {
        /// Item id.
        id: String,
        /// Teammate name.
        teammate: String,
        /// The line, cleaned of control characters.
        line: String,
    },
    /// An item reached its final status (`"outcome"` on the wire).
    ItemFinished(#[serde(with = "outcome_field")] Box<Outcome>),
    /// The merge queue's step for one completed item (`--merge`, after the run): its branch
    /// landed on `into` as the merge `commit`, or it did not (`error` and `failure_kind`:
    /// `merge_conflict` or `merge_failed`; the branch is kept and the target did not move).
    /// The item's outcome is recorded again, as `item_finished`, with what became of it.
    ItemMerged {
        /// Item id.
        id: String,
        /// Teammate name.
        teammate: String,
        /// The branch merged (or not).
        branch: String,
        /// The branch merged into.
        into: String,
        /// The merge commit on `into`, when it landed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        /// Why it did not land, one line; empty when it did.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        error: String,
        /// The kind of that failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure_kind: Option<crate::failure::FailureKind>,
        /// The branch adds nothing to `into` (the item completed without changing a file):
        /// nothing was merged, and nothing failed. Absent when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unchanged: bool,
        /// Who resolved its conflicting merge (`--on-conflict`: `agent`, or the runner and
        /// model named), when a resolver's result is what landed. Absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resolved_by: Option<String>,
        /// When, RFC 3339 (UTC).
        #[serde(default)]
        at: String,
    },
    /// With `--on-conflict`: a completed item whose branch conflicts with the target is
    /// handed to a resolver (attempt `attempt` of its resolution), in a fresh worktree
    /// holding the merge in progress.
    ConflictHanded {
        /// Item id.
        id: String,
        /// Teammate name.
        teammate: String,
        /// The resolution attempt (1 ..= `--conflict-attempts`).
        attempt: u32,
        /// Who resolves: `agent`, or `RUNNER[:MODEL]`.
        resolver: String,
        /// The files that conflict.
        files: Vec<String>,
        /// The items merged since the item's branch started that touched those files.
        met: Vec<String>,
        /// When, RFC 3339 (UTC).
        #[serde(default)]
        at: String,
    },
    /// What became of one resolution attempt ([`Event::ConflictHanded`]): the merge commit
    /// the resolver's result was taken as, having passed `--verify` and `--verify-merged`
    /// (the target moves to it next), or why it was rejected.
    ConflictResolved {
        /// Item id.
        id: String,
        /// Teammate name.
        teammate: String,
        /// The resolution attempt.
        attempt: u32,
        /// The merge commit taken, when the result passed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        /// Why the result was rejected, one line; empty when it passed.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        error: String,
        /// What the resolver cost (USD), when known; it counts in the item's `cost_usd`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// How long the attempt took (seconds); it counts in the item's `duration_s`.
        #[serde(default)]
        elapsed_s: f64,
        /// When, RFC 3339 (UTC).
        #[serde(default)]
        at: String,
    },
    /// A rate limit paused the team: no attempt starts before `until`, and at most `limit`
    /// run at once from then on.
    TeamPaused {
        /// When attempts start again, RFC 3339 (UTC).
        until: String,
        /// The pause, seconds.
        wait_s: f64,
        /// Attempts allowed at once after the pause.
        limit: usize,
        /// When, RFC 3339 (UTC).
        #[serde(default)]
        at: String,
    },
    /// The team stopped starting attempts (auth, quota, budget, `--max-fail`); what runs
    /// finishes, the rest end `skipped` with `reason`.
    TeamStopped {
        /// Why, one line.
        reason: String,
        /// When, RFC 3339 (UTC).
        #[serde(default)]
        at: String,
    },
    /// Something the user should know that is not an item's result: a batch-file key not
    /// used, rows of the last output gone from the input, a mark the batch file could not
    /// take. Start-up warnings (collected on the plan) follow `run_started`; the rest come
    /// as they happen. Every reporter shows it (`warning: MESSAGE` on stderr); the journal
    /// keeps those said while it is open.
    Warning {
        /// One line, as `warning: ` is followed by it on stderr.
        message: String,
        /// When, RFC 3339 (UTC).
        #[serde(default)]
        at: String,
    },
    /// The run was interrupted; `immediate` when the second interrupt kills at once.
    Interrupted {
        /// Second interrupt.
        immediate: bool,
    },
    /// The run ended.
    RunFinished(RunSummary),
    /// Everything is written: the files the run left and its exit code. The last line of
    /// `--format json`; never in the journal (it is closed by then).
    RunEnded {
        /// The files the sinks wrote (output CSV, shard sidecar, JUnit, todo table, trace).
        #[serde(default)]
        outputs: Vec<String>,
        /// The exit code the runner ends with (DESIGN §7).
        exit_code: i32,
    },
}

impl Event {
    /// A [`Event::Warning`] saying `message`, now.
    pub(crate) fn warning(message: impl Into<String>) -> Event {
        Event::Warning {
            message: message.into(),
            at: crate::run::now_rfc3339(),
        }
    }

    /// Whether the event is part of the record (journal, event lines): all but
    /// [`Event::Activity`].
    pub(crate) fn is_recorded(&self) -> bool {
        !matches!(self, Event::Activity { .. })
    }

    /// The event as one JSON line without its newline, `{"v":1,"event":…}`; `None` for an
    /// event that is not recorded.
    ///
    /// Errors: serde_json's, should a value not be representable (a non-finite number).
    pub(crate) fn to_line(&self) -> Option<serde_json::Result<String>> {
        self.is_recorded().then(|| {
            serde_json::to_string(&Line {
                v: VERSION,
                event: self,
            })
        })
    }

    /// Read one event line (`v` is ignored; unknown fields are skipped).
    ///
    /// Errors: not JSON, an unknown `event`, a missing required field.
    pub(crate) fn from_line(line: &[u8]) -> serde_json::Result<Event> {
        serde_json::from_slice::<OwnedLine>(line).map(|l| l.event)
    }
}

impl Event {
    /// Read an `item_finished` line's outcome without buffering the line the way a tagged
    /// [`Event::from_line`] does (several times faster; the outputs read one per row).
    /// `None` when the line is not an `item_finished` event.
    pub(crate) fn outcome_from_line(line: &[u8]) -> Option<Outcome> {
        #[derive(Deserialize)]
        struct OutcomeLine<'a> {
            #[serde(borrow)]
            event: std::borrow::Cow<'a, str>,
            outcome: Box<Outcome>,
        }
        match serde_json::from_slice::<OutcomeLine>(line) {
            Ok(l) if l.event == "item_finished" => Some(*l.outcome),
            _ => None,
        }
    }
}

#[derive(Serialize)]
struct Line<'a> {
    v: u32,
    #[serde(flatten)]
    event: &'a Event,
}

#[derive(Deserialize)]
struct OwnedLine {
    #[serde(flatten)]
    event: Event,
}

/// A path as text, bytes that are not UTF-8 replaced (an event line must always be written).
fn lossy_path<S: serde::Serializer>(path: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// `ItemFinished`'s outcome under the key `outcome`, with [`Outcome::handoff`] beside its
/// fields.
mod outcome_field {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Outcome;
    use crate::run::record::outcome::Handoff;

    #[derive(Serialize)]
    struct Ref<'a> {
        outcome: WithHandoff<'a>,
    }

    /// The outcome's fields and, beside them, its report's hand-off fields (not read back:
    /// the report holds them).
    #[derive(Serialize)]
    struct WithHandoff<'a> {
        #[serde(flatten)]
        outcome: &'a Outcome,
        #[serde(flatten)]
        handoff: Handoff,
    }

    #[derive(Deserialize)]
    struct Owned {
        outcome: Box<Outcome>,
    }

    #[allow(clippy::borrowed_box)] // the signature serde's `with` asks for
    pub(super) fn serialize<S: Serializer>(o: &Box<Outcome>, s: S) -> Result<S::Ok, S::Error> {
        Ref {
            outcome: WithHandoff {
                outcome: o,
                handoff: o.handoff(),
            },
        }
        .serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Box<Outcome>, D::Error> {
        Owned::deserialize(d).map(|o| o.outcome)
    }
}

/// `RunSummary::counts` as an object `{"completed": n, …}` in [`ItemStatus::ALL`] order.
mod counts_map {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::ItemStatus;

    #[allow(clippy::ptr_arg)] // the signature serde's `with` asks for
    pub(super) fn serialize<S: Serializer>(
        counts: &Vec<(ItemStatus, u64)>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(counts.iter().map(|(st, n)| (st, n)))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(ItemStatus, u64)>, D::Error> {
        let map = std::collections::BTreeMap::<ItemStatus, u64>::deserialize(d)?;
        Ok(ItemStatus::ALL
            .iter()
            .map(|s| (*s, map.get(s).copied().unwrap_or(0)))
            .collect())
    }
}

/// Totals of a finished run. On the wire (`run_finished`): `at`, `counts` as an object per
/// status, `resumed`, `interrupted`, `elapsed_s`, `cost_usd`; the problem list is not written
/// (each problem is an `item_finished` event already).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct RunSummary {
    /// When the run ended, RFC 3339 (UTC).
    pub at: String,
    /// Items per final status, in [`ItemStatus::ALL`] order.
    #[serde(with = "counts_map")]
    pub counts: Vec<(ItemStatus, u64)>,
    /// Items completed by an earlier run and not run again (included in the completed count).
    pub resumed: u64,
    /// Whether the run was interrupted.
    pub interrupted: bool,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Sum of known costs, USD.
    pub cost_usd: Option<f64>,
    /// Items that did not complete, in the batch's order: the first
    /// [`crate::schedule::dispatcher::PROBLEMS_LISTED`] of them.
    #[serde(skip)]
    pub problems: Vec<Problem>,
    /// Problems not listed because there were too many.
    #[serde(skip)]
    pub problems_hidden: u64,
    /// Of the cancelled items, those no attempt of this run ever started (an interrupt came
    /// first).
    #[serde(skip)]
    pub never_started: u64,
}

impl RunSummary {
    /// Count of items with `status`.
    pub(crate) fn count(&self, status: ItemStatus) -> u64 {
        self.counts
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n)
    }

    /// Total items accounted for.
    pub(crate) fn total(&self) -> u64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }

    /// Account for an item that completed but was failed afterwards (e.g. its branch did not
    /// merge): move it from `completed` to its new status and list it as a problem.
    pub(crate) fn demote(&mut self, o: &Outcome) {
        for (status, n) in &mut self.counts {
            if *status == ItemStatus::Completed {
                *n = n.saturating_sub(1);
            }
            if *status == o.status {
                *n += 1;
            }
        }
        self.problems.push(Problem::of(o));
    }
}

/// An item that did not complete, as the closing summary lists it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Problem {
    /// Item id.
    pub id: String,
    /// Teammate name.
    pub teammate: String,
    /// Final status.
    pub status: ItemStatus,
    /// Why, as one word.
    pub kind: Option<crate::failure::FailureKind>,
    /// The one-line reason.
    pub reason: String,
    /// The log that explains it (empty when none).
    pub log: String,
}

impl Problem {
    /// The problem `o` is.
    pub(crate) fn of(o: &Outcome) -> Problem {
        Problem {
            id: o.id.clone(),
            teammate: o.teammate.clone(),
            status: o.status,
            kind: o.failure_kind,
            reason: o.error.clone(),
            log: o.log.clone(),
        }
    }
}

/// A consumer of run events (progress UI, JSON lines, the live side of every sink).
pub(crate) trait Reporter: Send {
    /// Called for every event, in order, from the dispatcher; it must not block (file IO
    /// belongs on a thread of the consumer's own). Ignores events unless overridden.
    fn event(&mut self, _event: &Event) {}
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::Value;

    use super::*;

    /// One event of every recorded kind, with every optional field set.
    /// An `item_merged` whose merged tree failed its check.
    fn merge_failed() -> Event {
        Event::ItemMerged {
            id: "a".into(),
            teammate: "1-a".into(),
            branch: "runner/t/1-a".into(),
            into: "main".into(),
            commit: None,
            error: "the merged tree failed --verify-merged: `make test` exited with code 2".into(),
            failure_kind: Some(crate::failure::FailureKind::MergeFailed),
            unchanged: false,
            resolved_by: Some("claude:opus".into()),
            at: "2026-12-01T09:00:02Z".into(),
        }
    }

    /// A conflict handed to a resolver, and its attempt's result.
    fn conflict() -> [Event; 2] {
        [
            Event::ConflictHanded {
                id: "b".into(),
                teammate: "2-b".into(),
                attempt: 1,
                resolver: "agent".into(),
                files: vec!["src/lib.rs".into()],
                met: vec!["a".into()],
                at: "2026-12-01T09:00:02Z".into(),
            },
            Event::ConflictResolved {
                id: "b".into(),
                teammate: "2-b".into(),
                attempt: 1,
                commit: Some("def456".into()),
                error: "conflict markers left in src/lib.rs".into(),
                cost_usd: Some(0.1),
                elapsed_s: 3.5,
                at: "2026-12-01T09:00:03Z".into(),
            },
        ]
    }

    /// A failed item's outcome with every optional field set.
    fn failed_outcome() -> Outcome {
        let mut outcome = Outcome::not_run("a", "1-a", "a", ItemStatus::Failed, "no".into());
        outcome.attempts = 2;
        outcome.finished_at = "2026-12-01T09:00:01Z".into();
        outcome.exit_code = Some(1);
        outcome.started_at = "2026-12-01T09:00:00.250Z".into();
        outcome.content_hash = "cbf29ce484222325".into();
        outcome.report = Some(serde_json::json!({
            "status": "failed", "summary": "s", "files_modified": ["src/a.rs"],
            "files_created": [], "tests": "failed", "blocker": null, "next_steps": ["retry"]
        }));
        outcome.cost_usd = Some(0.5);
        outcome.session_id = Some("s1".into());
        outcome.branch = Some("runner/t/1-a".into());
        outcome.commit = Some("abc123".into());
        outcome.diffstat = Some("1 file changed".into());
        outcome
    }

    pub(crate) fn one_of_each() -> Vec<Event> {
        let [handed, resolved] = conflict();
        vec![
            Event::RunStarted {
                at: "2026-12-01T09:00:00Z".into(),
                pid: 7,
                team: "t".into(),
                workspace: "/w/t".into(),
                total: Some(2),
                resumed: 0,
                jobs: 2,
                sandbox: "none".into(),
                sandbox_why_none: Some(
                    "a teammate can forge another's verdict or edit the journal; --sandbox landlock confines them".into(),
                ),
                replaced_runner: Some(ReplacedRunner {
                    name: "claude".into(),
                    file: "/r/.agent-tasks/runners/claude.toml".into(),
                }),
                stages: Vec::new(),
                merge: String::new(),
            },
            Event::AttemptStarted {
                candidate: None,
                id: "a".into(),
                teammate: "1-a".into(),
                title: "a".into(),
                attempt: 1,
                pgid: 4101,
                at: "2026-12-01T09:00:00Z".into(),
            },
            Event::AttemptFinished {
                candidate: None,
                id: "a".into(),
                teammate: "1-a".into(),
                attempt: 1,
                verdict: Verdict {
                    status: ItemStatus::Failed,
                    reason: "exited with code 1".into(),
                    kind: Some(crate::failure::FailureKind::AgentError),
                    retry_after_s: None,
                },
                retrying: true,
                refused: false,
                spend: crate::run::record::outcome::Spend {
                    cost_usd: Some(0.25),
                    input_tokens: Some(1200),
                    cached_input_tokens: None,
                    output_tokens: Some(300),
                },
                at: "2026-12-01T09:00:01Z".into(),
            },
            Event::Progress {
                id: "a".into(),
                teammate: "1-a".into(),
                attempt: 1,
                progress: crate::progress::Progress {
                    status: Some(crate::progress::WorkState::Blocked),
                    progress: Some("60%".into()),
                    discoveries: vec!["tabs are dropped".into()],
                    files: vec!["src/a.rs".into()],
                    blocker: Some("needs the staging key".into()),
                    needs: Some(crate::progress::Needs::User),
                    subtask: Some(crate::progress::Subtask {
                        title: "Handle tabs".into(),
                        details: Some("seen in a.rs".into()),
                    }),
                },
                at: "2026-12-01T09:00:01Z".into(),
            },
            Event::ItemFinished(Box::new(failed_outcome())),
            merge_failed(),
            handed,
            resolved,
            Event::TeamPaused {
                until: "2026-12-01T09:00:31Z".into(),
                wait_s: 30.0,
                limit: 4,
                at: "2026-12-01T09:00:01Z".into(),
            },
            Event::TeamStopped {
                reason: "authentication failed (exited with code 1: invalid api key)".into(),
                at: "2026-12-01T09:00:01Z".into(),
            },
            Event::Warning {
                message: "BATCH.md:3: `max_worker` is not a key; did you mean `max_workers`?"
                    .into(),
                at: "2026-12-01T09:00:01Z".into(),
            },
            Event::Interrupted { immediate: false },
            Event::RunFinished(RunSummary {
                at: "2026-12-01T09:00:02Z".into(),
                counts: ItemStatus::ALL.iter().map(|s| (*s, 1)).collect(),
                resumed: 1,
                interrupted: true,
                elapsed_s: 2.5,
                cost_usd: Some(0.5),
                problems: Vec::new(),
                problems_hidden: 0,
                never_started: 0,
            }),
            Event::RunEnded {
                outputs: vec!["/w/workers-output.csv".into(), "/w/junit.xml".into()],
                exit_code: 130,
            },
        ]
    }

    fn doc(name: &str) -> String {
        let path = format!("{}/docs/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn event_lines_read_back_as_the_same_events() {
        for event in one_of_each() {
            let line = event.to_line().expect("recorded").expect("encodes");
            let back = Event::from_line(line.as_bytes()).expect("decodes");
            assert_eq!(back, event, "{line}");
        }
        use std::os::unix::ffi::OsStrExt;
        let odd = Event::RunStarted {
            at: String::new(),
            pid: 1,
            team: "t".into(),
            workspace: std::ffi::OsStr::from_bytes(b"/w/caf\xe9").into(),
            total: None,
            resumed: 0,
            jobs: 1,
            sandbox: "none".into(),
            sandbox_why_none: None,
            replaced_runner: None,
            stages: Vec::new(),
            merge: String::new(),
        };
        let line = odd.to_line().expect("recorded");
        assert!(
            line.is_ok_and(|l| l.contains("/w/caf\u{fffd}")),
            "a workspace path that is not UTF-8 must not stop the journal"
        );
        let activity = Event::Activity {
            id: "a".into(),
            teammate: "1-a".into(),
            line: "working".into(),
        };
        assert!(
            activity.to_line().is_none(),
            "progress lines are not recorded"
        );
    }

    #[test]
    fn the_documented_schema_describes_every_event_and_every_field() {
        let schema: Value = serde_json::from_str(&doc("events.schema.json")).expect("JSON");
        let validator = jsonschema::validator_for(&schema).expect("schema compiles");
        let md = doc("events.md");
        let branches = schema["oneOf"].as_array().expect("oneOf");
        let declared = |props: &Value, key: &str| props.get(key).is_some();
        let mut names = Vec::new();
        for event in one_of_each() {
            let line = event.to_line().expect("recorded").expect("encodes");
            let v: Value = serde_json::from_str(&line).expect("JSON");
            let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{line}: {errors:?}");
            let name = v["event"].as_str().expect("event name").to_owned();
            let branch = branches
                .iter()
                .find(|b| b["properties"]["event"]["const"] == name.as_str())
                .unwrap_or_else(|| panic!("no schema branch for `{name}`"));
            for key in v.as_object().expect("object").keys() {
                assert!(
                    key == "v" || declared(&branch["properties"], key),
                    "`{name}` has `{key}`, which events.schema.json does not declare"
                );
                assert!(
                    key == "v" || key == "event" || md.contains(&format!("`{key}`")),
                    "`{name}` has `{key}`, which events.md does not name"
                );
            }
            if let Some(outcome) = v.get("outcome").and_then(Value::as_object) {
                for key in outcome.keys() {
                    assert!(
                        declared(&schema["$defs"]["outcome"]["properties"], key),
                        "outcome field `{key}` is not in events.schema.json"
                    );
                    assert!(
                        md.contains(&format!("| `{key}` |")),
                        "outcome field `{key}` has no row in events.md"
                    );
                }
            }
            assert!(
                md.contains(&format!("| `{name}` |")),
                "events.md has no row for `{name}`"
            );
            names.push(name);
        }
        let listed: Vec<&str> = schema["properties"]["event"]["enum"]
            .as_array()
            .expect("event enum")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(listed, names, "the schema lists exactly the events written");
        assert_eq!(branches.len(), names.len());
    }
}
