//! `todo-N.workers-output.csv` (DESIGN §3): the output table of a todo batch, beside it, with
//! the item number, title and checkpoint as its input columns and every Todo item of the batch
//! (and Ideas when they ran) as a row. When the batch file is gone by the end of the run, the
//! rows are the run's items as they were when it started, with their outcomes from the
//! journal. When every item completed and the workspace is removed, the `log` column names the
//! team's archive (`todo-N.archive.jsonl`, which holds each item's attempts and report;
//! `runner show ITEM todo-N.md` reads it) instead of a log that is gone.
//!
//! A row of an item this run did not run (ticked in an earlier run, or left out by `--only`
//! or `--shard`) comes from the first of: its outcome in the team's journal; its row in the
//! table as it was, byte for byte (as a CSV batch keeps rows with `--only`, [`Previous`]); its
//! outcome in the archive (an earlier workspace was removed; `log` names the archive); else it
//! is `completed` with no record when ticked, `cancelled` "not started" when not. A ticked
//! item's row comes only from a record that shows it completed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::live::Live;
use super::output_csv::{self, Layout};
use super::previous::Previous;
use super::{PlanFile, RunEnd, Sink};
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::events::{Event, Reporter};
use crate::run::record::outcome::Outcome;
use crate::run::record::team::{OutcomeIndex, OutcomesView};
use crate::source::todo::{Mark, Section};
use crate::store::Store;

/// One row's input columns: item number, title, checkpoint reference (may be empty).
pub(crate) type TableItem = (u32, String, String);

/// The todo table sink. It reads the batch file after the marks sink has written it, and
/// keeps the table current while the run goes on ([`Live`]).
pub(crate) struct TodoTable {
    file: Arc<TableFile>,
    /// The table as it was before this run (read once, at the first write: later writes,
    /// live ones included, copy its rows, not their own).
    old: Arc<Mutex<OldCache>>,
    /// What the run records, once it started ([`Sink::follow`]): what live rewrites read.
    outcomes: Option<OutcomesView>,
    live: Option<Live>,
}

/// `None` until read; then the old table, if it could be used.
type OldCache = Option<Option<OldTable>>;

impl TodoTable {
    /// The sink of `file`.
    pub(crate) fn new(file: TableFile) -> TodoTable {
        TodoTable {
            file: Arc::new(file),
            old: Arc::new(Mutex::new(None)),
            outcomes: None,
            live: None,
        }
    }
}

/// The todo table of batch file `batch`: `todo-3.md` → `todo-3.workers-output.csv` beside
/// it (`crate::plans::todo_batch::table_path` names it for the todo source).
pub(crate) fn path_for(batch: &Path) -> PathBuf {
    let stem = batch
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    batch.with_file_name(format!("{stem}.workers-output.csv"))
}

/// What the todo table is made of.
pub(crate) struct TableFile {
    /// The store the batch belongs to (its lock is held while the table is made).
    pub store: Store,
    /// The batch file.
    pub batch: PathBuf,
    /// The table file.
    pub path: PathBuf,
    /// The team's archive beside the batch (`todo-N.archive.jsonl`), which may hold the
    /// outcomes of items that ran in a workspace since removed.
    pub archive: PathBuf,
    /// Whether the Ideas ran too (and so are rows).
    pub include_ideas: bool,
    /// Whether teammates worked in worktrees (adds the branch columns).
    pub isolated: bool,
    /// [`output_csv::Layout::guard_formulas`].
    pub guard_formulas: bool,
    /// The run's items as the batch held them when it started: the rows when it is gone.
    pub items: Vec<TableItem>,
}

/// One row of the new table: fields to write, or a row of the old table's exact bytes.
enum Row {
    Fields(Vec<String>),
    Kept(Vec<u8>),
}

/// The table as it was before this run, to copy rows from.
struct OldTable {
    path: PathBuf,
    index: Previous,
    file: std::fs::File,
}

impl OldTable {
    /// Item `id`'s row, byte for byte; `None` when it has none (or, for a `ticked` item, none
    /// that shows it completed).
    ///
    /// Errors: the table cannot be read back.
    fn row(&mut self, id: &str, ticked: bool) -> Result<Option<Vec<u8>>> {
        if ticked && !self.index.completed(id) {
            return Ok(None);
        }
        self.index
            .raw(&mut self.file, id)
            .map_err(|e| Error::read_input("the todo table", &self.path, e))
    }
}

impl TableFile {
    /// The table as the last run left it, when it has this run's columns; `None` when there
    /// is none or it cannot be used (then every row is made anew; a broken one is warned of).
    fn old_table(&self, layout: &Layout) -> Option<OldTable> {
        if !self.path.is_file() {
            return None;
        }
        let read = Previous::read(
            &self.path,
            &layout.headers,
            layout.inputs,
            Some("item"),
            "status",
        )
        .and_then(|index| {
            let file = index
                .open()
                .map_err(|e| Error::read_input("the todo table", &self.path, e))?;
            Ok(OldTable {
                path: self.path.clone(),
                index,
                file,
            })
        });
        match read {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("{e}; its rows are made anew");
                None
            }
        }
    }

    /// The outcomes the archive holds by item id, each `log` naming the archive (empty when
    /// there is no archive). The plan read it before the run, so a bad one stopped the run
    /// then.
    ///
    /// Errors: it cannot be read now (exit 2, naming it and the line).
    fn archived(&self) -> Result<HashMap<String, Outcome>> {
        if !self.archive.is_file() {
            return Ok(HashMap::new());
        }
        let archive = crate::run::record::archive::read(&self.archive)?;
        let log = self.archive.display().to_string();
        Ok(archive
            .outcomes()
            .into_iter()
            .map(|mut o| {
                o.log.clone_from(&log);
                (o.id.clone(), o)
            })
            .collect())
    }
}

impl Reporter for TodoTable {
    fn event(&mut self, event: &Event) {
        let (Event::ItemFinished(_), Some(view)) = (event, &self.outcomes) else {
            return;
        };
        let live = self.live.get_or_insert_with(|| {
            let file = self.file.clone();
            let old = self.old.clone();
            Live::following("the todo table", view.clone(), move |outcomes| {
                let mut old = old.lock().unwrap_or_else(PoisonError::into_inner);
                file.write(outcomes, None, true, &mut old)
            })
        });
        live.changed();
    }
}

impl Sink for TodoTable {
    fn follow(&mut self, outcomes: &OutcomesView) {
        self.outcomes = Some(outcomes.clone());
    }

    fn writes(&self) -> Vec<PlanFile> {
        vec![PlanFile::new("todo table", &self.file.path, "")]
    }

    fn finish(&mut self, run: &mut RunEnd<'_>) -> Result<()> {
        if let Some(mut live) = self.live.take() {
            live.stop();
        }
        let mut old = self.old.lock().unwrap_or_else(PoisonError::into_inner);
        self.file.write(run.outcomes, run.archive, false, &mut old)
    }
}

impl TableFile {
    /// Replace the table: a row per item of the batch, from its outcome, the old table or
    /// the archive (see the module). `live` while the run goes on: an item of this run
    /// with no outcome yet is shown unfinished ([`output_csv::unfinished_row`]); `archive`
    /// is where the record went when the workspace goes.
    ///
    /// Errors: the store lock, the journal, the archive or the table cannot be read or
    /// written.
    fn write(
        &self,
        outcomes: &mut OutcomeIndex,
        archive: Option<&Path>,
        live: bool,
        old: &mut OldCache,
    ) -> Result<()> {
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
        let old = old.get_or_insert_with(|| self.old_table(&layout));
        let archived = self.archived()?;
        let mut rows = Vec::new();
        for ((number, title, checkpoint), ticked) in items {
            let id = number.to_string();
            let ran = self.items.iter().any(|i| i.0 == number);
            // A ticked item's row is kept only from a record that shows it completed.
            let usable = |o: &Outcome| ran || !ticked || o.status == ItemStatus::Completed;
            let mut outcome = outcomes.outcome(&id)?.filter(usable);
            // The logs go with the workspace; the archive keeps the item's record.
            if let (Some(o), Some(archive)) = (outcome.as_mut(), archive)
                && !o.log.is_empty()
            {
                o.log = archive.display().to_string();
            }
            if outcome.is_none() && !ran {
                if let Some(t) = old.as_mut()
                    && let Some(bytes) = t.row(&id, ticked)?
                {
                    rows.push(Row::Kept(bytes));
                    continue;
                }
                outcome = archived.get(&id).filter(|o| usable(o)).cloned();
            }
            let missing = if ticked {
                (ItemStatus::Completed, "")
            } else {
                (ItemStatus::Cancelled, "not started")
            };
            let values = vec![id, title, checkpoint];
            if live && ran && outcome.is_none() {
                rows.push(Row::Fields(output_csv::unfinished_row(&layout, &values)));
                continue;
            }
            rows.push(Row::Fields(output_csv::row(
                &layout,
                &values,
                outcome.as_ref(),
                missing,
            )));
        }
        output_csv::write(&self.path, &layout, |emit, raw| {
            for row in rows {
                match row {
                    Row::Fields(fields) => emit(fields)?,
                    Row::Kept(bytes) => raw(&bytes)?,
                }
            }
            Ok(())
        })
    }
}
