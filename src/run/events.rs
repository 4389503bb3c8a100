//! Typed events of a run. The dispatcher emits them; the journal, the progress UI and the
//! sinks consume them and never reach back into the scheduler.

use std::path::PathBuf;

use super::outcome::Outcome;
use crate::report::{ItemStatus, Verdict};

/// Something that happened in a run, in the order the dispatcher saw it.
#[derive(Debug, Clone)]
pub enum Event {
    /// The run is starting.
    RunStarted {
        /// Team name.
        team: String,
        /// Team workspace folder.
        workspace: PathBuf,
        /// Items in the batch, when known up front.
        total: Option<u64>,
        /// Items already completed by an earlier run (not run again).
        resumed: u64,
        /// Parallel teammates.
        jobs: usize,
    },
    /// An attempt of an item started.
    AttemptStarted {
        /// Item id.
        id: String,
        /// Teammate name.
        teammate: String,
        /// Title.
        title: String,
        /// Attempt number.
        attempt: u32,
    },
    /// An attempt ended; `retrying` says whether another follows.
    AttemptFinished {
        /// Item id.
        id: String,
        /// Teammate name.
        teammate: String,
        /// Attempt number.
        attempt: u32,
        /// The attempt's verdict.
        verdict: Verdict,
        /// Whether the item will be attempted again.
        retrying: bool,
    },
    /// A running item's agent printed a line (throttled; for progress displays).
    Activity {
        /// Item id.
        id: String,
        /// Teammate name.
        teammate: String,
        /// The line, cleaned of control characters.
        line: String,
    },
    /// An item reached its final status.
    ItemFinished(Box<Outcome>),
    /// The run was interrupted; `immediate` when the second interrupt kills at once.
    Interrupted {
        /// Second interrupt.
        immediate: bool,
    },
    /// The run ended.
    RunFinished(RunSummary),
}

/// Totals of a finished run.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    /// Items per final status, in [`ItemStatus::ALL`] order.
    pub counts: Vec<(ItemStatus, u64)>,
    /// Items completed by an earlier run and not run again (included in the completed count).
    pub resumed: u64,
    /// Whether the run was interrupted.
    pub interrupted: bool,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Sum of known costs, USD.
    pub cost_usd: Option<f64>,
    /// Items that did not complete: (id, teammate, status, reason, log path).
    pub problems: Vec<(String, String, ItemStatus, String, String)>,
    /// Problems not listed because there were too many.
    pub problems_hidden: u64,
}

impl RunSummary {
    /// Count of items with `status`.
    pub fn count(&self, status: ItemStatus) -> u64 {
        self.counts
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n)
    }

    /// Total items accounted for.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }

    /// Account for an item that completed but was failed afterwards (e.g. its branch did not
    /// merge): move it from `completed` to its new status and list it as a problem.
    pub fn demote(&mut self, o: &Outcome) {
        for (status, n) in &mut self.counts {
            if *status == ItemStatus::Completed {
                *n = n.saturating_sub(1);
            }
            if *status == o.status {
                *n += 1;
            }
        }
        self.problems.push((
            o.id.clone(),
            o.teammate.clone(),
            o.status,
            o.error.clone(),
            o.log.clone(),
        ));
    }
}

/// A consumer of run events (progress UI, JSON lines, the live side of every sink).
pub trait Reporter: Send {
    /// Called for every event, in order, from the dispatcher; it must not block (file IO
    /// belongs on a thread of the consumer's own). Ignores events unless overridden.
    fn event(&mut self, _event: &Event) {}
}
