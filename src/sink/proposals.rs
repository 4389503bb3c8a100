//! Follow-ups teammates of a todo batch proposed while they worked (a `subtask` line in
//! their progress file, [`crate::progress::Subtask`]): each becomes an inbox item after the
//! teammate's own item (`@after:todo-N#K`), written when the run ends, under the store lock.
//! A proposal is never run by this run: a person confirms it with `runner resolve` like any
//! other item, and it waits until its prerequisite is ticked.

use crate::error::Result;
use crate::run::events::{Event, Reporter};
use crate::sink::{PlanFile, RunEnd, Sink};
use crate::source::todo::BatchRef;
use crate::store::Store;

/// The sink: the proposals seen, in order.
pub(crate) struct Proposals {
    store: Store,
    /// N of the batch's `todo-N.md`.
    batch: u32,
    /// Title, details, the item it follows.
    seen: Vec<(String, String, BatchRef)>,
}

impl Proposals {
    /// Proposals of the teammates of batch `todo-<batch>.md` of `store`.
    pub(crate) fn new(store: Store, batch: u32) -> Proposals {
        Proposals {
            store,
            batch,
            seen: Vec::new(),
        }
    }
}

impl Reporter for Proposals {
    fn event(&mut self, event: &Event) {
        let Event::Progress { id, progress, .. } = event else {
            return;
        };
        let (Some(subtask), Ok(item)) = (&progress.subtask, id.parse::<u32>()) else {
            return;
        };
        let after = BatchRef {
            batch: self.batch,
            item,
        };
        self.seen.push((
            subtask.title.clone(),
            subtask.details.clone().unwrap_or_default(),
            after,
        ));
    }
}

impl Sink for Proposals {
    /// The store, whose inbox it adds the proposals to.
    fn writes(&self) -> Vec<PlanFile> {
        vec![PlanFile::new("store", &self.store.dir, "").in_place()]
    }

    fn finish(&mut self, run: &mut RunEnd<'_>) -> Result<()> {
        if self.seen.is_empty() {
            return Ok(());
        }
        // A proposal that cannot be written costs only itself: the run's results stand.
        match self.store.propose(&self.seen) {
            Ok(numbers) => {
                let list: Vec<String> = numbers.iter().map(u32::to_string).collect();
                // On stderr: stdout may be the `--format json` stream.
                eprintln!(
                    "Proposed by teammates: inbox item(s) {} in {} (confirm them with `runner resolve`)",
                    list.join(", "),
                    self.store.inbox().display()
                );
            }
            Err(e) => run.warnings.push(format!(
                "the {} follow-up(s) teammates proposed were not added to the inbox: {e}",
                self.seen.len()
            )),
        }
        Ok(())
    }
}
