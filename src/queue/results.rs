//! The sink that sends each outcome of a worker to its queue: a verdict (completed,
//! failed, blocked, timed out; a stage skipped after an earlier one of its row did not
//! complete) is recorded in the queue's results; an item this worker never got to run
//! (interrupted, or skipped once the worker stopped starting items) is handed back to the
//! queue for another worker instead, with the rest of its row. It writes no file; the queue's
//! thread ([`crate::queue::worker`]) talks to the server.

use std::sync::mpsc::Sender;

use crate::report::ItemStatus;
use crate::run::events::{Event, Reporter};
use crate::sink::{PlanFile, Sink};

use super::worker::Cmd;

/// Sends each `item_finished` of the run to the queue's thread.
pub(crate) struct Results {
    pub(super) to_queue: Sender<Cmd>,
}

impl Reporter for Results {
    fn event(&mut self, event: &Event) {
        if let Event::TeamPaused { until, .. } = event
            && let Ok(t) = until.parse::<jiff::Timestamp>()
        {
            let _ = self.to_queue.send(Cmd::Paused {
                until_ms: u64::try_from(t.as_millisecond()).unwrap_or(0),
            });
        }
        if let Event::AttemptStarted { id, attempt, .. } = event {
            let _ = self.to_queue.send(Cmd::Started {
                id: id.clone(),
                attempt: *attempt,
            });
        }
        let Event::ItemFinished(outcome) = event else {
            return;
        };
        // Skipped because an earlier stage of its row did not complete is the row's verdict;
        // skipped because this worker stopped starting items (or interrupted) is not.
        let not_run = outcome.status == ItemStatus::Cancelled
            || (outcome.status == ItemStatus::Skipped
                && outcome.attempts == 0
                && !outcome.error.starts_with("prerequisite "));
        let cmd = match not_run {
            true => Cmd::GiveBack {
                id: outcome.id.clone(),
                stop: outcome.status == ItemStatus::Skipped,
            },
            false => Cmd::Finished(outcome.clone()),
        };
        // The thread is gone only once the run is over.
        let _ = self.to_queue.send(cmd);
    }
}

impl Sink for Results {
    fn writes(&self) -> Vec<PlanFile> {
        Vec::new()
    }
}
