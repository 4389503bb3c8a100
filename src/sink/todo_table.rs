//! `todo-N.workers-output.csv` (DESIGN §3): the output table of a todo batch, beside it, with
//! the item number, title and checkpoint as its input columns and every Todo item of the batch
//! (and Ideas when they ran) as a row — items ticked in earlier runs as `completed`. When the
//! batch file is gone by the end of the run, the rows are the run's items as they were when
//! it started, with their outcomes from the journal. When every item completed and the
//! workspace is removed, the `log` column names the team's archive (`todo-N.archive.jsonl`,
//! which holds each item's attempts and report; `runner show ITEM todo-N.md` reads it)
//! instead of a log that is gone.

use std::path::PathBuf;

use super::output_csv;
use super::{RunEnd, Sink};
use crate::error::Result;
use crate::run::events::Reporter;
use crate::source::todo::{Mark, Section};
use crate::store::Store;

/// One row's input columns: item number, title, checkpoint reference (may be empty).
pub type TableItem = (u32, String, String);

/// The todo table sink. It reads the batch file after the marks sink has written it.
pub struct TodoTable {
    /// The store the batch belongs to (its lock is held while the table is made).
    pub store: Store,
    /// The batch file.
    pub batch: PathBuf,
    /// The table file.
    pub path: PathBuf,
    /// Whether the Ideas ran too (and so are rows).
    pub include_ideas: bool,
    /// Whether teammates worked in worktrees (adds the branch columns).
    pub isolated: bool,
    /// [`output_csv::Layout::guard_formulas`].
    pub guard_formulas: bool,
    /// The run's items as the batch held them when it started: the rows when it is gone.
    pub items: Vec<TableItem>,
}

impl Reporter for TodoTable {}

impl Sink for TodoTable {
    fn files(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }

    fn finish(&mut self, run: &mut RunEnd<'_>) -> Result<()> {
        let _lock = self.store.lock()?;
        // (input columns, ticked in the file).
        let items: Vec<(TableItem, bool)> = match crate::store::read_todo(&self.batch) {
            Ok((_, doc)) => doc
                .items()
                .iter()
                .filter(|i| {
                    i.section == Section::Todo
                        || (self.include_ideas && i.section == Section::Ideas)
                })
                .map(|i| {
                    let cp = i.context.clone().unwrap_or_default();
                    ((i.number, i.title.clone(), cp), i.mark == Mark::Done)
                })
                .collect(),
            Err(_) => self.items.iter().map(|i| (i.clone(), false)).collect(),
        };
        let inputs = ["item", "title", "checkpoint"].map(String::from);
        let layout = output_csv::layout(&inputs, None, self.isolated, self.guard_formulas);
        let mut rows = Vec::new();
        for ((number, title, checkpoint), ticked) in items {
            let mut outcome = run.outcomes.outcome(&number.to_string())?;
            // The logs go with the workspace; the archive keeps the item's record.
            if let (Some(o), Some(archive)) = (outcome.as_mut(), run.archive)
                && !o.log.is_empty()
            {
                o.log = archive.display().to_string();
            }
            let missing = if ticked {
                ("completed", "")
            } else {
                ("cancelled", "not started")
            };
            let values = vec![number.to_string(), title, checkpoint];
            rows.push(output_csv::row(&layout, &values, outcome.as_ref(), missing));
        }
        output_csv::write(&self.path, &layout, |emit, _| {
            for row in rows {
                emit(row)?;
            }
            Ok(())
        })
    }
}
