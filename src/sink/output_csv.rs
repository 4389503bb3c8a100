//! `workers-output.csv` (DESIGN §3): every input column in input order, then one column per
//! top-level property of `output_schema` (objects and arrays as JSON text; without a schema
//! one `result` column holding the report's `output` as JSON), then the runner's columns.
//! If a runner column's name collides with another column, all runner columns are written
//! as `runner_<name>` and a warning says so. The file is replaced atomically.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::output::{Fate, OutputFormat, Walk};
use super::previous::Previous;
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::record::outcome::Outcome;

/// The runner's columns, in order.
pub(crate) const RUNNER_COLUMNS: &[&str] = &[
    "status",
    "attempts",
    "exit_code",
    "duration_s",
    "started_at",
    "finished_at",
    "error",
    "failure_kind",
    "summary",
    "log",
    "cost_usd",
    "input_tokens",
    "output_tokens",
    "turns",
    "session_id",
    "files_modified",
    "files_created",
    "tests",
    "blocker",
    "next_steps",
];

/// Whether `bytes` are an output CSV of the runner: its header row holds the runner's
/// `status`, `attempts` and `error` columns (or their `runner_` names). The only kind of
/// file a batch's output replaces, whatever its input columns were.
pub(crate) fn is_output(bytes: &[u8]) -> bool {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let Some(Ok(header)) = reader.records().next() else {
        return false;
    };
    let has = |name: &str| {
        header
            .iter()
            .any(|h| h.trim_start_matches('\u{feff}') == name || h == format!("runner_{name}"))
    };
    ["status", "attempts", "error"].into_iter().all(has)
}

/// Columns added with `--best-of`: the winning candidate (`TEAMMATE (RUNNER[ MODEL])`) and
/// how many candidates passed (`P/N passed`).
pub(crate) const BEST_OF_COLUMNS: &[&str] = &["winner", "candidates"];

/// Columns added with `--isolate worktree`: the teammate's branch, its head commit, and the
/// merge commit that landed it on the target (`--merge`; empty until it did).
pub(crate) const WORKTREE_COLUMNS: &[&str] = &["branch", "commit", "merged"];

/// BATCH.md's `raw_columns` and where it is written, for [`Layout::with_raw`].
#[derive(Debug, Clone, Default)]
pub(crate) struct RawColumns {
    /// The output fields it names (empty: none).
    pub names: Vec<String>,
    /// The BATCH.md it is in.
    pub file: std::path::PathBuf,
    /// The line of `raw_columns:`.
    pub line: Option<u64>,
}

/// The column layout of an output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Every header, in file order.
    pub headers: Vec<String>,
    /// Number of input columns.
    pub inputs: usize,
    /// Report output fields (schema property names), or `None` for the single `result` column.
    pub fields: Option<Vec<String>>,
    /// Warnings about renamed columns.
    pub warnings: Vec<String>,
    /// Whether the worktree columns follow the runner columns.
    pub worktree: bool,
    /// Whether values that come from agents are written so that spreadsheets do not evaluate
    /// them as formulas ([`formula_safe`]); `false` with `--keep-formulas`.
    pub guard_formulas: bool,
    /// Output fields written as the agent gave them even when [`Layout::guard_formulas`]
    /// (BATCH.md `raw_columns`, [`Layout::with_raw`]): names of [`Layout::output_fields`].
    pub raw: Vec<String>,
    /// With `stages:`, each stage's columns, after the runner's
    /// ([`super::output_stages`]); empty otherwise.
    pub stages: Vec<super::output_stages::StageColumns>,
    /// A `model` column after the runner's (the model that answered): for a batch whose
    /// rows choose their runner or model.
    pub models: bool,
    /// `winner` and `candidates` columns after those (`--best-of`, DESIGN §13).
    pub best_of: bool,
}

/// The runner columns an unfinished row leaves empty: nothing is decided yet.
pub(crate) const UNDECIDED: [&str; 3] = ["status", "attempts", "failure_kind"];

impl Layout {
    /// Add the `winner` and `candidates` columns ([`Layout::best_of`]), each as `runner_…`
    /// when an input column has that name.
    pub(crate) fn with_best_of(mut self) -> Layout {
        for column in BEST_OF_COLUMNS {
            let name = match self.headers.iter().any(|h| h == column) {
                true => format!("runner_{column}"),
                false => (*column).to_owned(),
            };
            self.headers.push(name);
        }
        self.best_of = true;
        self
    }

    /// The columns after the runner's and the worktree's: `model`, `winner`, `candidates`.
    fn tail(&self) -> usize {
        usize::from(self.models)
            + if self.best_of {
                BEST_OF_COLUMNS.len()
            } else {
                0
            }
    }

    /// Add the `model` column ([`Layout::models`]), as `runner_model` when an input column
    /// has that name.
    pub(crate) fn with_models(mut self) -> Layout {
        let name = match self.headers.iter().any(|h| h == "model") {
            true => "runner_model",
            false => "model",
        };
        self.headers.push(name.into());
        self.models = true;
        self
    }

    /// The names of the output fields, as `raw_columns` writes them: each schema property
    /// (or `result`); with stages, each stage's as `STAGE.FIELD` (or `STAGE.result`).
    pub(crate) fn output_fields(&self) -> Vec<String> {
        let one = |prefix: &str, fields: &Option<Vec<String>>| match fields {
            Some(f) => f.iter().map(|f| format!("{prefix}{f}")).collect(),
            None => vec![format!("{prefix}result")],
        };
        match self.stages.is_empty() {
            true => one("", &self.fields),
            false => self
                .stages
                .iter()
                .flat_map(|s| one(&format!("{}.", s.name), &s.fields))
                .collect(),
        }
    }

    /// Write the output fields `raw.names` as the agents gave them ([`Layout::raw`]).
    ///
    /// Errors: exit 2 naming `raw.file` and its line: a name that is not one of
    /// [`Layout::output_fields`], with the one meant.
    pub(crate) fn with_raw(mut self, raw: &RawColumns) -> Result<Layout> {
        let known = self.output_fields();
        if let Some(name) = raw.names.iter().find(|n| !known.contains(n)) {
            // A stage's field by its bare name: the one stage field it can be.
            let staged: Vec<&String> = known
                .iter()
                .filter(|k| k.ends_with(&format!(".{name}")))
                .collect();
            let meant = match staged[..] {
                [one] => format!("; did you mean `{one}`? (a stage's field is `STAGE.FIELD`)"),
                _ => crate::suggest::did_you_mean(name, known.iter().map(String::as_str)),
            };
            return Err(Error::input_at(
                &raw.file,
                raw.line,
                format!(
                    "`raw_columns`: `{name}` is not an output field of this batch{meant}; its output fields are: {}",
                    known.join(", ")
                ),
            ));
        }
        self.raw = raw.names.clone();
        Ok(self)
    }

    /// The agent's value `v` of output field `name` as written: guarded
    /// ([`formula_safe`]) unless formulas are kept or the field is raw.
    pub(crate) fn agent_value(&self, name: &str, v: String) -> String {
        match self.guard_formulas && !self.raw.iter().any(|r| r == name) {
            true => formula_safe(v),
            false => v,
        }
    }

    /// How many columns the stages add at the end.
    pub(crate) fn stage_cells(&self) -> usize {
        self.stages.iter().map(|s| s.headers().len()).sum()
    }

    /// Where the runner column `column` (a name of [`RUNNER_COLUMNS`]) is in
    /// [`Layout::headers`], whatever name it is written under (`runner_<name>` on a clash).
    pub(crate) fn runner_column(&self, column: &str) -> Option<usize> {
        let extra = if self.worktree {
            WORKTREE_COLUMNS.len()
        } else {
            0
        };
        let first =
            self.headers.len() - self.stage_cells() - self.tail() - RUNNER_COLUMNS.len() - extra;
        RUNNER_COLUMNS
            .iter()
            .position(|c| *c == column)
            .map(|i| first + i)
    }
}

/// A value from an agent as a spreadsheet cannot run it (OWASP "CSV injection"): a value
/// that starts with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'`, which
/// Excel, LibreOffice and Google Sheets show as text and do not evaluate. Plain numbers
/// (`-3`, `+1.5`) and other values are unchanged.
pub(crate) fn formula_safe(value: String) -> String {
    match value.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') if value.trim().parse::<f64>().is_err() => {
            format!("'{value}")
        }
        _ => value,
    }
}

/// Work out the columns for `inputs`, an optional `output_schema`, and whether teammates
/// work in worktrees (which adds [`WORKTREE_COLUMNS`]); `guard_formulas` is
/// [`Layout::guard_formulas`].
pub(crate) fn layout(
    inputs: &[String],
    schema: Option<&Value>,
    worktree: bool,
    guard_formulas: bool,
) -> Layout {
    let fields: Option<Vec<String>> = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .map(|props| props.keys().cloned().collect());
    let mut warnings = Vec::new();
    let mut headers: Vec<String> = inputs.to_vec();
    let output_names: Vec<String> = match &fields {
        Some(f) => f
            .iter()
            .map(|name| {
                if inputs.contains(name) {
                    warnings.push(format!(
                        "output field `{name}` has the name of an input column; it is written as `output_{name}`"
                    ));
                    format!("output_{name}")
                } else {
                    name.clone()
                }
            })
            .collect(),
        None => vec![if inputs.iter().any(|i| i == "result") { "output_result".into() } else { "result".into() }],
    };
    headers.extend(output_names.iter().cloned());
    let runner_cols: Vec<&str> = RUNNER_COLUMNS
        .iter()
        .chain(if worktree { WORKTREE_COLUMNS } else { &[] })
        .copied()
        .collect();
    let collides = runner_cols.iter().any(|c| headers.iter().any(|h| h == c));
    if collides {
        warnings.push(format!(
            "a column is named like a runner column ({}); the runner's columns are written as runner_<name>",
            runner_cols.join(", ")
        ));
    }
    headers.extend(runner_cols.iter().map(|c| {
        if collides {
            format!("runner_{c}")
        } else {
            (*c).to_string()
        }
    }));
    Layout {
        headers,
        inputs: inputs.len(),
        fields,
        warnings,
        worktree,
        guard_formulas,
        raw: Vec::new(),
        stages: Vec::new(),
        models: false,
        best_of: false,
    }
}

fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The output row for one item: its input values, then its outcome's fields. `missing` is
/// the `(status, reason)` written when the item has no outcome (it never started, or a todo
/// item was ticked with no record of its run); its failure kind is then the one an item not
/// run gets ([`crate::report::kind_of_not_run`]: `cancelled`, `skipped`, none for
/// `completed`).
pub(crate) fn row(
    layout: &Layout,
    values: &[String],
    outcome: Option<&Outcome>,
    missing: (ItemStatus, &str),
) -> Vec<String> {
    let mut out: Vec<String> = values.to_vec();
    out.resize(layout.inputs, String::new());
    let Some(o) = outcome else {
        let extra = if layout.worktree {
            WORKTREE_COLUMNS.len()
        } else {
            0
        };
        let blanks = layout.headers.len()
            - layout.inputs
            - layout.stage_cells()
            - layout.tail()
            - RUNNER_COLUMNS.len()
            - extra;
        out.extend(std::iter::repeat_n(String::new(), blanks));
        out.push(missing.0.to_string());
        out.push("0".into());
        out.extend(std::iter::repeat_n(String::new(), 4));
        out.push(missing.1.to_owned());
        out.push(opt(crate::report::kind_of_not_run(missing.0)));
        out.extend(std::iter::repeat_n(
            String::new(),
            RUNNER_COLUMNS.len() - 8 + extra + layout.tail(),
        ));
        return out;
    };
    // Values an agent chose: its output, its summary, its error text, its session id.
    let agent = |v: String| {
        if layout.guard_formulas {
            formula_safe(v)
        } else {
            v
        }
    };
    match &layout.fields {
        Some(fields) => out.extend(
            fields
                .iter()
                .map(|f| layout.agent_value(f, cell(o.output.get(f)))),
        ),
        None => out.push(if o.output.is_null() {
            String::new()
        } else {
            layout.agent_value("result", o.output.to_string())
        }),
    }
    out.extend([
        o.status.to_string(),
        o.attempts.to_string(),
        opt(o.exit_code),
        if o.attempts == 0 {
            String::new()
        } else {
            format!("{:.3}", o.duration_s)
        },
        o.started_at.clone(),
        o.finished_at.clone(),
        agent(o.error.clone()),
        o.failure_kind.map(|k| k.to_string()).unwrap_or_default(),
        agent(o.summary.clone()),
        o.log.clone(),
        o.cost_usd
            .map(crate::run::record::outcome::usd_text)
            .unwrap_or_default(),
        opt(o.input_tokens),
        opt(o.output_tokens),
        opt(o.turns),
        agent(o.session_id.clone().unwrap_or_default()),
    ]);
    // The report's hand-off fields (seed `task-management-protocol.md`): lists as JSON text.
    let handoff = |key: &str| {
        let v = o.report.as_ref().and_then(|r| r.get(key));
        match v {
            Some(Value::Array(a)) if a.is_empty() => String::new(),
            other => agent(cell(other)),
        }
    };
    out.extend(
        [
            "files_modified",
            "files_created",
            "tests",
            "blocker",
            "next_steps",
        ]
        .map(handoff),
    );
    if layout.worktree {
        out.push(o.branch.clone().unwrap_or_default());
        out.push(o.commit.clone().unwrap_or_default());
        out.push(o.merged.clone().unwrap_or_default());
    }
    if layout.models {
        out.push(agent(o.model.clone().unwrap_or_default()));
    }
    if layout.best_of {
        let b = o.best_of.as_deref();
        out.push(b.map(|b| b.winner_text()).unwrap_or_default());
        out.push(b.map(|b| b.candidates_text()).unwrap_or_default());
    }
    out
}

/// An output file split into exact byte ranges, so rows can be copied byte-for-byte
/// (`--only` replays, `runner merge`).
#[derive(Debug)]
pub(crate) struct RawRecords {
    /// The header's fields.
    pub header: Vec<String>,
    /// Where the header line ends (the first record's start).
    pub header_end: usize,
    /// Each record's fields and its `(start, end)` byte range, line ending included.
    pub records: Vec<(csv::StringRecord, usize, usize)>,
}

/// Split `bytes` (a whole output CSV) into its header and records with their byte ranges.
/// (The `csv` crate places a CRLF record at the `\n` of the previous terminator; that is
/// corrected.)
///
/// Errors: the text is not CSV, with the 1-based line where it breaks.
pub(crate) fn raw_records(bytes: &[u8]) -> std::result::Result<RawRecords, (Option<u64>, String)> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(bytes);
    let header: Vec<String> = rdr
        .headers()
        .map_err(|e| (Some(1), e.to_string()))?
        .iter()
        .map(str::to_owned)
        .collect();
    let mut found: Vec<(csv::StringRecord, usize)> = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err((e.position().map(|p| p.line()), e.to_string())),
        }
        let mut start = record.position().map_or(0, |p| p.byte() as usize);
        if bytes.get(start) == Some(&b'\n') {
            start += 1;
        }
        found.push((record.clone(), start));
    }
    let header_end = found.first().map_or(bytes.len(), |f| f.1);
    let starts: Vec<usize> = found.iter().map(|f| f.1).collect();
    let records = found
        .into_iter()
        .enumerate()
        .map(|(i, (rec, start))| {
            (
                rec,
                start,
                starts.get(i + 1).copied().unwrap_or(bytes.len()),
            )
        })
        .collect();
    Ok(RawRecords {
        header,
        header_end,
        records,
    })
}

/// Point the `log` column of the output table `path` (written by the runner) at `archive`
/// where it names a file under `workspace`, which is about to be removed; every other byte
/// stays. Returns whether a cell changed (the file is rewritten only then).
///
/// Errors: the file cannot be read or is not CSV (exit 2, naming it and the line); it
/// cannot be replaced (exit 3).
pub(crate) fn repoint_logs(path: &Path, workspace: &Path, archive: &Path) -> Result<bool> {
    let bytes = std::fs::read(path).map_err(|e| Error::read_input("the output table", path, e))?;
    let raw = raw_records(&bytes)
        .map_err(|(line, e)| Error::input_at(path, line, format!("not a CSV output: {e}")))?;
    // The runner's columns are all `runner_<name>` when one collided (see `layout`).
    let prefixed = raw.header.iter().any(|h| h == "runner_status");
    let name = if prefixed { "runner_log" } else { "log" };
    let Some(at) = raw.header.iter().position(|h| h == name) else {
        return Ok(false);
    };
    let real = crate::fsutil::real_path(workspace);
    let gone = |cell: &str| {
        let p = Path::new(cell);
        !cell.is_empty()
            && (p.starts_with(workspace) || crate::fsutil::real_path(p).starts_with(&real))
    };
    if !raw
        .records
        .iter()
        .any(|(r, ..)| r.get(at).is_some_and(gone))
    {
        return Ok(false);
    }
    let archive = archive.display().to_string();
    crate::fsutil::replace_with(path, |w: &mut dyn Write| {
        w.write_all(&bytes[..raw.header_end])?;
        for (record, start, end) in &raw.records {
            if !record.get(at).is_some_and(gone) {
                w.write_all(&bytes[*start..*end])?;
                continue;
            }
            let fields: Vec<&str> = record
                .iter()
                .enumerate()
                .map(|(i, f)| if i == at { archive.as_str() } else { f })
                .collect();
            let mut csv = csv::WriterBuilder::new().from_writer(Vec::new());
            csv.write_record(&fields)?;
            w.write_all(&csv.into_inner().map_err(|e| e.into_error())?)?;
        }
        Ok(())
    })?;
    Ok(true)
}

/// A row writer handed to [`write`](fn@write)'s `fill`: takes a record's fields.
pub(crate) type Emit<'a> = dyn FnMut(Vec<String>) -> std::io::Result<()> + 'a;
/// A raw writer handed to [`write`](fn@write)'s `fill`: takes a whole record's exact bytes (with its
/// line ending), copied from a previous output.
pub(crate) type Raw<'a> = dyn FnMut(&[u8]) -> std::io::Result<()> + 'a;

/// Replace `path` atomically with the header and the rows `fill` writes, either as fields
/// (`emit`) or as exact bytes (`raw`).
///
/// Errors: an IO error naming the file (nothing is left half-written).
pub(crate) fn write(
    path: &Path,
    layout: &Layout,
    fill: impl FnOnce(&mut Emit<'_>, &mut Raw<'_>) -> std::io::Result<()>,
) -> Result<()> {
    // A folder not there yet (`-o new/`) was checked makeable before the run; the workspace
    // may lie elsewhere (the state folder), so nothing else made it.
    crate::fsutil::make_parent(path)?;
    crate::fsutil::replace_with(path, |w: &mut dyn Write| {
        let sink = Shared(std::rc::Rc::new(std::cell::RefCell::new(w)));
        let csv = std::cell::RefCell::new(csv::WriterBuilder::new().from_writer(sink.clone()));
        csv.borrow_mut().write_record(&layout.headers)?;
        let mut emit = |record: Vec<String>| {
            csv.borrow_mut()
                .write_record(&record)
                .map_err(std::io::Error::other)
        };
        let mut raw = |bytes: &[u8]| {
            // Flush the CSV writer's buffer first so the bytes land in order.
            csv.borrow_mut().flush()?;
            sink.0.borrow_mut().write_all(bytes)
        };
        fill(&mut emit, &mut raw)?;
        csv.borrow_mut().flush()
    })
}

/// `workers-output.csv`: the [`OutputFormat`] of any output whose extension no other format
/// claims (its `Debug` name, `Csv`, is part of the output's shape hash).
#[derive(Debug)]
pub(crate) struct Csv;

impl OutputFormat for Csv {
    fn extensions(&self) -> &'static [&'static str] {
        &[]
    }

    fn replaces(&self) -> (&'static str, fn(&[u8]) -> bool) {
        (
            "an output CSV of the runner (no status, attempts and error columns)",
            is_output,
        )
    }

    fn write(&self, path: &Path, layout: &Layout, walk: &mut Walk<'_>) -> Result<()> {
        write(path, layout, |emit, raw| {
            walk(&mut |fate, stages| {
                let mut cells = match fate {
                    Fate::Kept(bytes) => return raw(&bytes),
                    Fate::Ran(item, o) => {
                        row(layout, &item.values, Some(&o), (ItemStatus::Cancelled, ""))
                    }
                    Fate::NotRun(item, status, why) => {
                        row(layout, &item.values, None, (status, why))
                    }
                    Fate::Unfinished(item) => unfinished_row(layout, &item.values),
                };
                cells.extend(super::output_stages::cells(layout, stages));
                emit(cells)
            })
        })
    }

    fn previous(
        &self,
        path: &Path,
        headers: &[String],
        n_inputs: usize,
        id_column: Option<&str>,
        status_column: &str,
    ) -> Result<Previous> {
        Previous::read(path, headers, n_inputs, id_column, status_column)
    }
}

/// One writer shared by the CSV writer and the raw row copier.
#[derive(Clone)]
struct Shared<'a>(std::rc::Rc<std::cell::RefCell<&'a mut dyn Write>>);

impl Write for Shared<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

/// The error text of a row a live output shows before its item finished (its status and
/// attempts are empty).
pub(crate) const UNFINISHED: &str =
    "not finished when this output was written; the run was going on";

/// What a row without an outcome says: not run (with its status and reason), or, in an
/// output written while the run goes on, not finished yet ([`UNFINISHED`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Missing {
    /// The item has no outcome and will have none from this run.
    NotRun(ItemStatus, &'static str),
    /// The run is still going on.
    Unfinished,
}

impl Missing {
    /// The missing rows of a finished run: never started (interrupted or not).
    pub(crate) fn after(interrupted: bool) -> Missing {
        match interrupted {
            true => Missing::NotRun(
                ItemStatus::Cancelled,
                "not started: the run was interrupted",
            ),
            false => Missing::NotRun(ItemStatus::Cancelled, "not started"),
        }
    }
}

/// The row of an item not finished yet: its input values, its error [`UNFINISHED`], and no
/// status, attempts or failure kind.
pub(crate) fn unfinished_row(layout: &Layout, values: &[String]) -> Vec<String> {
    let mut out = row(layout, values, None, (ItemStatus::Cancelled, UNFINISHED));
    for column in UNDECIDED {
        if let Some(i) = layout.runner_column(column) {
            out[i].clear();
        }
    }
    out
}

/// The outcome of a covered item that has none recorded: it never started.
pub(crate) fn not_started(id: &str, teammate: &str, title: &str, interrupted: bool) -> Outcome {
    let reason = if interrupted {
        "not started: the run was interrupted"
    } else {
        "not started"
    };
    Outcome::not_run(id, teammate, title, ItemStatus::Cancelled, reason.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ItemStatus;
    use serde_json::json;

    #[test]
    fn schema_properties_become_columns() {
        let l = layout(
            &["path".into()],
            Some(&json!({"properties": {"ok": {}, "links": {}}})),
            false,
            true,
        );
        assert_eq!(&l.headers[..3], &["path", "ok", "links"]);
        assert_eq!(l.headers[3], "status");
        assert!(l.warnings.is_empty());
        let mut o = Outcome::not_run("1", "t", "t", ItemStatus::Completed, String::new());
        o.attempts = 1;
        o.output = json!({"ok": true, "links": ["a", "b"]});
        let r = row(&l, &["a.md".into()], Some(&o), (ItemStatus::Cancelled, ""));
        assert_eq!(&r[..4], &["a.md", "true", "[\"a\",\"b\"]", "completed"]);
        assert_eq!(r.len(), l.headers.len());
    }

    #[test]
    fn a_raw_field_is_written_as_given_and_only_output_fields_can_be_raw() {
        let schema = json!({"properties": {"patch": {}, "note": {}}});
        let raw = |names: &[&str]| RawColumns {
            names: names.iter().map(|n| n.to_string()).collect(),
            file: "BATCH.md".into(),
            line: Some(4),
        };
        let l = layout(&["id".into()], Some(&schema), false, true);
        assert_eq!(l.output_fields(), ["patch", "note"]);
        let l = l.with_raw(&raw(&["patch"])).expect("an output field");
        let mut o = Outcome::not_run("1", "t", "t", ItemStatus::Completed, String::new());
        o.attempts = 1;
        o.summary = "-done".into();
        o.output = json!({"patch": "@@ -1 +1 @@\n-a\n+b\n", "note": "+x"});
        let r = row(&l, &["1".into()], Some(&o), (ItemStatus::Cancelled, ""));
        let col = |name: &str| &r[l.headers.iter().position(|h| h == name).expect(name)];
        assert_eq!(col("patch"), "@@ -1 +1 @@\n-a\n+b\n");
        assert_eq!(col("note"), "'+x");
        assert_eq!(col("summary"), "'-done", "a runner column stays guarded");
        for wrong in ["summary", "id", "pach"] {
            let l = layout(&["id".into()], Some(&schema), false, true);
            let e = l.with_raw(&raw(&[wrong])).expect_err(wrong).to_string();
            assert!(e.contains("BATCH.md:4") && e.contains("patch, note"), "{e}");
        }
    }

    #[test]
    fn runner_columns_are_prefixed_on_collision() {
        let l = layout(&["id".into(), "status".into()], None, false, true);
        assert_eq!(l.headers[2], "result");
        assert_eq!(l.headers[3], "runner_status");
        assert_eq!(l.warnings.len(), 1);
    }

    #[test]
    fn agent_values_never_reach_a_spreadsheet_as_formulas_and_inputs_stay_as_they_are() {
        let schema = json!({"properties": {"cmd": {}, "n": {}}});
        let mut o = Outcome::not_run(
            "1",
            "t",
            "t",
            ItemStatus::Failed,
            "=HYPERLINK(\"x\")".into(),
        );
        o.attempts = 1;
        o.summary = "@SUM(1,1)".into();
        o.output = json!({"cmd": "=cmd|' /C calc'!A0", "n": -3});
        let input = ["+1+1".to_string()];
        for (guard, cmd, n, error, summary) in [
            (
                true,
                "'=cmd|' /C calc'!A0",
                "-3",
                "'=HYPERLINK(\"x\")",
                "'@SUM(1,1)",
            ),
            (
                false,
                "=cmd|' /C calc'!A0",
                "-3",
                "=HYPERLINK(\"x\")",
                "@SUM(1,1)",
            ),
        ] {
            let l = layout(&["in".into()], Some(&schema), false, guard);
            let r = row(&l, &input, Some(&o), (ItemStatus::Cancelled, ""));
            let col = |name: &str| &r[l.headers.iter().position(|h| h == name).expect(name)];
            assert_eq!(col("in"), "+1+1", "input columns stay byte for byte");
            assert_eq!(col("cmd"), cmd);
            assert_eq!(col("n"), n, "plain numbers are not formulas");
            assert_eq!(col("error"), error);
            assert_eq!(col("summary"), summary);
        }
        for (raw, safe) in [
            ("-2+3", "'-2+3"),
            ("\tx", "'\tx"),
            ("\rx", "'\rx"),
            ("ok", "ok"),
        ] {
            assert_eq!(formula_safe(raw.into()), safe);
        }
    }

    #[test]
    fn the_reports_hand_off_fields_are_columns() {
        let l = layout(&["id".into()], None, false, true);
        let mut o = Outcome::not_run("1", "t", "t", ItemStatus::Completed, String::new());
        o.attempts = 1;
        o.report = Some(json!({
            "status": "completed", "summary": "s", "files_modified": ["src/a.rs", "b.md"],
            "files_created": [], "tests": "passed", "next_steps": ["wire it", "=1"],
        }));
        let r = row(&l, &["1".into()], Some(&o), (ItemStatus::Cancelled, ""));
        assert_eq!(r.len(), l.headers.len());
        let col = |name: &str| &r[l.headers.iter().position(|h| h == name).expect(name)];
        assert_eq!(col("files_modified"), r#"["src/a.rs","b.md"]"#);
        assert_eq!(col("files_created"), "");
        assert_eq!(col("tests"), "passed");
        assert_eq!(col("blocker"), "");
        assert_eq!(col("next_steps"), r#"["wire it","=1"]"#);
        let none = row(
            &l,
            &["2".into()],
            None,
            (ItemStatus::Cancelled, "not started"),
        );
        assert_eq!(none.len(), l.headers.len());
    }

    #[test]
    fn missing_outcome_keeps_the_row() {
        let l = layout(&["id".into()], None, true, true);
        let r = row(
            &l,
            &["7".into()],
            None,
            (ItemStatus::Cancelled, "not started"),
        );
        assert_eq!(r.len(), l.headers.len());
        let col = |name: &str| &r[l.headers.iter().position(|h| h == name).expect(name)];
        assert_eq!(col("status"), "cancelled");
        assert_eq!(col("error"), "not started");
        assert_eq!(col("failure_kind"), "cancelled");
        // A ticked todo item with no record of its run: completed, with no failure kind.
        let r = row(&l, &["8".into()], None, (ItemStatus::Completed, ""));
        let col = |name: &str| &r[l.headers.iter().position(|h| h == name).expect(name)];
        assert_eq!(
            (col("status").as_str(), col("failure_kind").as_str()),
            ("completed", "")
        );
    }
}
