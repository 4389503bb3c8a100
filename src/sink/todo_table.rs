//! `todo-N.workers-output.csv` (DESIGN §3): the output table of a todo batch, beside it, with
//! the item number, title and checkpoint as its input columns and every Todo item of the batch
//! (and Ideas when they ran) as a row — items ticked in earlier runs as `completed`.

use std::path::PathBuf;

use super::output_csv;
use super::{RunEnd, Sink};
use crate::error::Result;
use crate::run::events::Reporter;
use crate::source::todo::{Mark, Section};

/// The todo table sink. It reads the batch file after the marks sink has written it.
pub struct TodoTable {
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
}

impl Reporter for TodoTable {}

impl Sink for TodoTable {
    fn finish(&mut self, run: &mut RunEnd<'_>) -> Result<()> {
        let (_, doc) = crate::store::read_todo(&self.batch)?;
        let inputs = ["item", "title", "checkpoint"].map(String::from);
        let layout = output_csv::layout(&inputs, None, self.isolated, self.guard_formulas);
        let mut rows = Vec::new();
        for item in doc.items().iter().filter(|i| {
            i.section == Section::Todo || (self.include_ideas && i.section == Section::Ideas)
        }) {
            let values = vec![
                item.number.to_string(),
                item.title.clone(),
                item.context.clone().unwrap_or_default(),
            ];
            let outcome = run.outcomes.outcome(&item.number.to_string())?;
            let missing = if item.mark == Mark::Done {
                ("completed", "")
            } else {
                ("cancelled", "not started")
            };
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
