//! The output of a CSV batch, one sink for both formats: `workers-output.csv`
//! ([`output_csv`]) or, for an output named `*.jsonl`, JSON Lines ([`output_jsonl`]). The
//! rows of the shard in input order — rows run now from their outcomes, rows `--only` did
//! not select copied byte-for-byte from the previous output — kept current while the run
//! goes on ([`Live`]) and written a last time when it ends.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::live::Live;
use super::output_csv::{self, Layout, Missing};
use super::output_jsonl;
use super::output_stages;
use super::{PlanFile, RunEnd, Sink};
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::events::{Event, Reporter};
use crate::run::record::ledger_file::OutputStamp;
use crate::run::record::outcome::Outcome;
use crate::run::record::team::{OutcomeIndex, OutcomesView};
use crate::sink::selection::Selection;
use crate::source::input::{InputRow, InputTable};

/// How the output is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputFormat {
    /// `workers-output.csv`: comma-separated, agent values guarded against spreadsheets.
    Csv,
    /// One JSON object per row, values with their types.
    Jsonl,
}

impl OutputFormat {
    /// The format of the output file `path`: JSON Lines for `*.jsonl` and `*.ndjson`.
    pub(crate) fn of(path: &std::path::Path) -> OutputFormat {
        match output_jsonl::is_jsonl_path(path) {
            true => OutputFormat::Jsonl,
            false => OutputFormat::Csv,
        }
    }

    /// The only kind of existing file an output of this format replaces, and how to tell
    /// one ([`PlanFile::replacing`]).
    pub(crate) fn replaces(self) -> (&'static str, fn(&[u8]) -> bool) {
        match self {
            OutputFormat::Csv => (
                "an output CSV of the runner (no status, attempts and error columns)",
                output_csv::is_output,
            ),
            OutputFormat::Jsonl => (
                "a JSON Lines output of the runner (no status, attempts and error fields)",
                output_jsonl::is_output,
            ),
        }
    }
}

/// The output sink of a CSV batch.
pub(crate) struct Output {
    file: Arc<OutputFile>,
    /// What the run records, once it started ([`Sink::follow`]): what live rewrites read.
    outcomes: Option<OutcomesView>,
    live: Option<Live>,
}

/// What [`Output`] writes, shared with its live thread.
struct OutputFile {
    format: OutputFormat,
    path: PathBuf,
    table: InputTable,
    selection: Selection,
    layout: Layout,
}

/// What one row of the shard becomes.
enum Fate<'a> {
    /// Its line of the previous output, byte for byte.
    Kept(Vec<u8>),
    /// Its outcome.
    Ran(&'a InputRow, Box<Outcome>),
    /// No outcome: this status and reason.
    NotRun(&'a InputRow, ItemStatus, &'static str),
    /// No outcome yet: the run goes on.
    Unfinished(&'a InputRow),
}

impl Output {
    /// The output `path` (its format by [`OutputFormat::of`]) of the rows of `table` this
    /// run's `selection` covers, under `layout`.
    pub(crate) fn new(
        path: PathBuf,
        table: InputTable,
        selection: Selection,
        layout: Layout,
    ) -> Output {
        Output {
            file: Arc::new(OutputFile {
                format: OutputFormat::of(&path),
                path,
                table,
                selection,
                layout,
            }),
            outcomes: None,
            live: None,
        }
    }
}

impl Reporter for Output {
    fn event(&mut self, event: &Event) {
        let (Event::ItemFinished(_), Some(view)) = (event, &self.outcomes) else {
            return;
        };
        let live = self.live.get_or_insert_with(|| {
            let file = self.file.clone();
            Live::following("the output", view.clone(), move |outcomes| {
                file.write(outcomes, Missing::Unfinished)
            })
        });
        live.changed();
    }
}

impl Sink for Output {
    fn follow(&mut self, outcomes: &OutcomesView) {
        self.outcomes = Some(outcomes.clone());
    }

    fn writes(&self) -> Vec<PlanFile> {
        let (kind, is_mine) = self.file.format.replaces();
        vec![PlanFile::new("output", &self.file.path, "--output").replacing(kind, is_mine)]
    }

    fn finish(&mut self, run: &mut RunEnd<'_>) -> Result<()> {
        if let Some(mut live) = self.live.take() {
            live.stop();
        }
        if let Some(w) = self.file.table.changed() {
            run.warnings.push(w);
        }
        // Nothing new was recorded and the file is exactly as the last run left it: it is
        // current (a resume with nothing left to do does not rewrite every row).
        let shape = self.file.shape();
        let path = &self.file.path;
        if run.archive.is_none()
            && let Some(was) = run
                .unchanged
                .and_then(|u| u.iter().find(|s| &s.path == path))
            && was.layout == shape
            && OutputStamp::of(path, shape).as_ref() == Some(was)
        {
            run.stamps.push(was.clone());
            return Ok(());
        }
        self.file
            .write(run.outcomes, Missing::after(run.summary.interrupted))?;
        run.stamps.extend(OutputStamp::of(path, shape));
        Ok(())
    }
}

impl OutputFile {
    /// A hash of what shapes the file besides the outcomes: its format, columns and the
    /// rows this run covers.
    fn shape(&self) -> u64 {
        let mut h = crate::hash::Fnv::default();
        let (shard, only) = (&self.selection.shard, &self.selection.only);
        h.update(format!("{:?}\n{:?}\n{shard:?}\n{only:?}", self.format, self.layout).as_bytes());
        h.value()
    }

    /// Replace the output with every row of the shard: its outcome from `outcomes`, else what
    /// `missing` says.
    ///
    /// Errors: the input's snapshot, the previous output or the journal cannot be read, or
    /// the file cannot be written.
    fn write(&self, outcomes: &mut OutcomeIndex, missing: Missing) -> Result<()> {
        let mut failure: Option<Error> = None;
        let layout = &self.layout;
        let written = match self.format {
            OutputFormat::Csv => output_csv::write(&self.path, layout, |emit, raw| {
                self.walk(outcomes, missing, &mut failure, |fate, stages| {
                    let mut cells = match fate {
                        Fate::Kept(bytes) => return raw(&bytes),
                        Fate::Ran(row, o) => output_csv::row(
                            layout,
                            &row.values,
                            Some(&o),
                            (ItemStatus::Cancelled, ""),
                        ),
                        Fate::NotRun(row, status, why) => {
                            output_csv::row(layout, &row.values, None, (status, why))
                        }
                        Fate::Unfinished(row) => output_csv::unfinished_row(layout, &row.values),
                    };
                    cells.extend(output_stages::cells(layout, stages));
                    emit(cells)
                })
            }),
            OutputFormat::Jsonl => crate::fsutil::replace_with(&self.path, |w: &mut dyn Write| {
                self.walk(outcomes, missing, &mut failure, |fate, stages| {
                    let mut object = match fate {
                        Fate::Kept(bytes) => return w.write_all(&bytes),
                        Fate::Ran(row, o) => {
                            output_jsonl::line(layout, row, Some(&o), (ItemStatus::Cancelled, ""))
                        }
                        Fate::NotRun(row, status, why) => {
                            output_jsonl::line(layout, row, None, (status, why))
                        }
                        Fate::Unfinished(row) => output_jsonl::unfinished_line(layout, row),
                    };
                    object.extend(output_stages::fields(layout, stages));
                    serde_json::to_writer(&mut *w, &Value::Object(object))?;
                    w.write_all(b"\n")
                })
            }),
        };
        written.map_err(|e| failure.take().unwrap_or(e))
    }

    /// Hand `each` what every row of the shard becomes, in input order, with its stages'
    /// outcomes (one per stage of the layout; none without stages). An error reading the
    /// input or the journal is kept in `failure` (the writer's IO error stands for it).
    fn walk(
        &self,
        outcomes: &mut OutcomeIndex,
        missing: Missing,
        failure: &mut Option<Error>,
        mut each: impl FnMut(Fate<'_>, &[Option<Outcome>]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let stop = |failure: &mut Option<Error>, e: Error| {
            *failure = Some(e);
            std::io::Error::other("cannot read the input's rows or the journal")
        };
        let selection = &self.selection;
        let names: Vec<String> = self.layout.stages.iter().map(|s| s.name.clone()).collect();
        let rows = self.table.rows().map_err(|e| stop(failure, e))?;
        let mut previous = match &selection.previous {
            Some(p) => Some(p.open()?),
            None => None,
        };
        for row in rows {
            let row = row.map_err(|e| stop(failure, e))?;
            if !selection.in_shard(&row.id) {
                continue;
            }
            if !selection.runs(&row.id) {
                if let (Some(prev), Some(file)) = (&selection.previous, previous.as_mut())
                    && let Some(bytes) = prev.raw(file, &row.id)?
                {
                    each(Fate::Kept(bytes), &[])?;
                } else {
                    each(
                        Fate::NotRun(&row, ItemStatus::Skipped, "not selected by --only"),
                        &vec![None; names.len()],
                    )?;
                }
                continue;
            }
            let (outcome, stages) = match names.is_empty() {
                true => (
                    outcomes.outcome(&row.id).map_err(|e| stop(failure, e))?,
                    Vec::new(),
                ),
                // A staged row: its stages' outcomes, and what its chain stands for.
                false => {
                    let mut stages = Vec::with_capacity(names.len());
                    for name in &names {
                        let id = crate::item::stage_id(&row.id, name);
                        stages.push(outcomes.outcome(&id).map_err(|e| stop(failure, e))?);
                    }
                    let o = output_stages::overall(&row.id, &names, &stages);
                    (o, stages)
                }
            };
            let fate = match (outcome, missing) {
                (Some(o), _) => Fate::Ran(&row, Box::new(o)),
                (None, Missing::NotRun(status, why)) => Fate::NotRun(&row, status, why),
                (None, Missing::Unfinished) => Fate::Unfinished(&row),
            };
            each(fate, &stages)?;
        }
        Ok(())
    }
}
