//! The output of a CSV batch, one sink for every row format: `workers-output.csv`
//! ([`output_csv`]) or, for an output named `*.jsonl`, JSON Lines ([`output_jsonl`]), each an
//! [`OutputFormat`] chosen in [`FORMATS`] by the output's extension. The rows of the shard in
//! input order — rows run now from their outcomes, rows `--only` did not select copied
//! byte-for-byte from the previous output — kept current while the run goes on ([`Live`])
//! and written a last time when it ends; the walk is here, the format writes each row.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::live::Live;
use super::output_csv::{self, Layout, Missing};
use super::output_jsonl;
use super::output_stages;
use super::previous::Previous;
use super::{PlanFile, RunEnd, Sink};
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::events::{Event, Reporter};
use crate::run::record::ledger_file::OutputStamp;
use crate::run::record::outcome::Outcome;
use crate::run::record::team::{OutcomeIndex, OutcomesView};
use crate::sink::selection::Selection;
use crate::source::input::{InputRow, InputTable};

/// The output formats, each in its own file, chosen by the output's extension
/// ([`output_format`]); the last is the format of any other name. A new format is one file
/// with an [`OutputFormat`] and one line here.
static FORMATS: &[&dyn OutputFormat] = &[&output_jsonl::Jsonl, &output_csv::Csv];

/// The format of the output file `path` by its extension (case-insensitive): the first of
/// [`FORMATS`] that claims it (JSON Lines for `*.jsonl` and `*.ndjson`), else the last
/// (`workers-output.csv`'s CSV).
pub(crate) fn output_format(path: &Path) -> &'static dyn OutputFormat {
    let ext = crate::source::input::extension(path);
    FORMATS
        .iter()
        .find(|f| ext.as_deref().is_some_and(|e| f.extensions().contains(&e)))
        .or(FORMATS.last())
        .copied()
        .unwrap_or(&output_csv::Csv)
}

/// What a format's writer calls once per row, in input order: what the row becomes and its
/// stages' outcomes (one per stage of the layout; none without stages).
pub(crate) type Each<'a> = dyn FnMut(Fate<'_>, &[Option<Outcome>]) -> std::io::Result<()> + 'a;

/// The walk over the rows of the shard a format's writer drives: it calls [`Each`] for every
/// row ([`OutputFile::walk`]).
pub(crate) type Walk<'a> = dyn FnMut(&mut Each<'_>) -> std::io::Result<()> + 'a;

/// A format of the output rows: how a file in it is written, what existing file it may
/// replace, and how `--only` reads it back. Chosen once per output ([`output_format`]), so
/// its calls are per file (the row callback once per row), never per field. Its `Debug` name
/// (`Csv`, `Jsonl`) is part of the output's shape hash, so it never changes.
pub(crate) trait OutputFormat: std::fmt::Debug + Sync {
    /// The lowercase extensions (no dot) that choose this format (`["jsonl", "ndjson"]`).
    fn extensions(&self) -> &'static [&'static str];

    /// The only kind of existing file an output of this format replaces, and how to tell
    /// one ([`PlanFile::replacing`]).
    fn replaces(&self) -> (&'static str, fn(&[u8]) -> bool);

    /// Replace `path` atomically with the rows `walk` hands over, under `layout`'s names
    /// (a [`Fate::Kept`] row copied byte for byte).
    ///
    /// Errors: an IO error naming the file (nothing is left half-written).
    fn write(&self, path: &Path, layout: &Layout, walk: &mut Walk<'_>) -> Result<()>;

    /// Index the previous output `path` for `--only`: ids from `id_column` (the row number
    /// when `None`), statuses from `status_column`, each row's input values
    /// ([`super::previous::fingerprint`]) from the first `n_inputs` of `headers`, this run's
    /// columns.
    ///
    /// Errors: the file is missing or unreadable, or not an output of this format that
    /// `--only` can replay (exit 2, naming the line).
    fn previous(
        &self,
        path: &Path,
        headers: &[String],
        n_inputs: usize,
        id_column: Option<&str>,
        status_column: &str,
    ) -> Result<Previous>;
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
    format: &'static dyn OutputFormat,
    path: PathBuf,
    table: InputTable,
    selection: Selection,
    layout: Layout,
}

/// What one row of the shard becomes, for an [`OutputFormat`] to write.
pub(crate) enum Fate<'a> {
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
    /// The output `path` (its format by [`output_format`]) of the rows of `table` this
    /// run's `selection` covers, under `layout`.
    pub(crate) fn new(
        path: PathBuf,
        table: InputTable,
        selection: Selection,
        layout: Layout,
    ) -> Output {
        Output {
            file: Arc::new(OutputFile {
                format: output_format(&path),
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
        let written = self.format.write(&self.path, &self.layout, &mut |each| {
            self.walk(outcomes, missing, &mut failure, each)
        });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_picks_the_format_whose_debug_name_the_shape_hash_keeps() {
        for (path, name) in [
            ("out.jsonl", "Jsonl"),
            ("OUT.NdJson", "Jsonl"),
            ("workers-output.csv", "Csv"),
            ("out.txt", "Csv"),
            ("out", "Csv"),
        ] {
            assert_eq!(
                format!("{:?}", output_format(Path::new(path))),
                name,
                "{path}"
            );
        }
    }
}
