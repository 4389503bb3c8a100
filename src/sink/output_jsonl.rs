//! A JSON Lines output (`-o out.jsonl` or `.ndjson`): one object per input row of the
//! shard, in input order, with the same names as the columns of `workers-output.csv`
//! ([`output_csv::layout`]) but the values' own types: the input's fields (a JSON Lines
//! input's with their JSON types, a CSV input's as strings), the report's output fields (or
//! `result`) as the JSON the teammate gave, then the runner's fields — numbers as numbers,
//! the hand-off lists as lists, and `null` where a CSV cell is empty. Nothing is guarded
//! against spreadsheets: no spreadsheet reads it. The file is replaced atomically.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::live::Live;
use super::output_csv::{Layout, Missing, RUNNER_COLUMNS, UNFINISHED, WORKTREE_COLUMNS};
use super::{RunEnd, Sink};
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::events::{Event, Reporter};
use crate::run::record::outcome::Outcome;
use crate::run::record::team::OutcomeIndex;
use crate::run::schedule::selection::Selection;
use crate::source::input::{InputRow, InputTable};

/// Whether `path` names a JSON Lines output (`.jsonl`, `.ndjson`).
pub fn is_jsonl_path(path: &Path) -> bool {
    crate::source::input::InputFormat::of(path) == crate::source::input::InputFormat::Jsonl
}

/// Whether `bytes` are a JSON Lines output of the runner: its first line is an object with
/// the runner's `status`, `attempts` and `error` fields (or their `runner_` names). The only
/// kind of file a JSON Lines output replaces.
pub fn is_output(bytes: &[u8]) -> bool {
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(first) else {
        return false;
    };
    ["status", "attempts", "error"]
        .iter()
        .all(|k| o.contains_key(*k) || o.contains_key(&format!("runner_{k}")))
}

/// The JSON Lines output sink of a CSV or JSON Lines batch: as [`super::output_csv::CsvOutput`],
/// rows run now from their outcomes, rows `--only` did not select copied byte-for-byte from
/// the previous output, kept current while the run goes on ([`Live`]).
pub struct JsonlOutput {
    file: Arc<JsonlFile>,
    /// The team's journal, which the live rewrites follow.
    journal: PathBuf,
    live: Option<Live>,
}

/// What [`JsonlOutput`] writes, shared with its live thread.
struct JsonlFile {
    path: PathBuf,
    table: InputTable,
    selection: Selection,
    layout: Layout,
}

impl JsonlOutput {
    /// The output `path` of the rows of `table` this run's `selection` covers, under the
    /// names of `layout`; `journal` is the team's, read for live rewrites.
    pub fn new(
        path: PathBuf,
        table: InputTable,
        selection: Selection,
        layout: Layout,
        journal: PathBuf,
    ) -> JsonlOutput {
        JsonlOutput {
            file: Arc::new(JsonlFile {
                path,
                table,
                selection,
                layout,
            }),
            journal,
            live: None,
        }
    }
}

impl Reporter for JsonlOutput {
    fn event(&mut self, event: &Event) {
        if !matches!(event, Event::ItemFinished(_)) {
            return;
        }
        let live = self.live.get_or_insert_with(|| {
            let file = self.file.clone();
            let journal = self.journal.clone();
            let mut index: Option<OutcomeIndex> = None;
            Live::start("the JSON Lines output", move || {
                let outcomes = match &mut index {
                    Some(i) => {
                        i.catch_up()?;
                        i
                    }
                    None => index.insert(OutcomeIndex::follow(&journal)?),
                };
                file.write(outcomes, Missing::Unfinished)
            })
        });
        live.changed();
    }
}

impl Sink for JsonlOutput {
    fn files(&self) -> Vec<PathBuf> {
        vec![self.file.path.clone()]
    }

    fn finish(&mut self, run: &mut RunEnd<'_>) -> Result<()> {
        if let Some(mut live) = self.live.take() {
            live.stop();
        }
        if let Some(w) = self.file.table.changed() {
            eprintln!("warning: {w}");
        }
        self.file
            .write(run.outcomes, Missing::after(run.summary.interrupted))
    }
}

impl JsonlFile {
    /// Replace the output with one line per row of the shard: its outcome from `outcomes`,
    /// else what `missing` says.
    ///
    /// Errors: the input's snapshot, the previous output or the journal cannot be read, or
    /// the file cannot be written.
    fn write(&self, outcomes: &mut OutcomeIndex, missing: Missing) -> Result<()> {
        let rows = self.table.rows()?;
        let selection = &self.selection;
        let mut prev_file = match &selection.previous {
            Some(p) => Some(
                p.open()
                    .map_err(|e| Error::read_input("the previous output", &self.path, e))?,
            ),
            None => None,
        };
        let mut failure: Option<Error> = None;
        crate::fsutil::replace_with(&self.path, |w: &mut dyn Write| {
            for row in rows {
                let row = match row {
                    Ok(r) => r,
                    Err(e) => {
                        failure = Some(e);
                        return Err(std::io::Error::other("cannot read the input's rows"));
                    }
                };
                if !selection.in_shard(&row.id) {
                    continue;
                }
                let object = if selection.runs(&row.id) {
                    let outcome = match outcomes.outcome(&row.id) {
                        Ok(o) => o,
                        Err(e) => {
                            failure = Some(e);
                            return Err(std::io::Error::other("cannot read the journal"));
                        }
                    };
                    match (outcome, missing) {
                        (Some(o), _) => {
                            line(&self.layout, &row, Some(&o), (ItemStatus::Cancelled, ""))
                        }
                        (None, Missing::NotRun(status, why)) => {
                            line(&self.layout, &row, None, (status, why))
                        }
                        (None, Missing::Unfinished) => unfinished_line(&self.layout, &row),
                    }
                } else {
                    if let (Some(prev), Some(file)) = (&selection.previous, prev_file.as_mut())
                        && let Some(bytes) = prev.raw(file, &row.id)?
                    {
                        w.write_all(&bytes)?;
                        continue;
                    }
                    line(
                        &self.layout,
                        &row,
                        None,
                        (ItemStatus::Skipped, "not selected by --only"),
                    )
                };
                serde_json::to_writer(&mut *w, &Value::Object(object))?;
                w.write_all(b"\n")?;
            }
            Ok(())
        })
        .map_err(|e| failure.take().unwrap_or(e))
    }
}

/// The line of an item not finished yet: as [`super::output_csv::unfinished_row`], its
/// status, attempts and failure kind `null`.
fn unfinished_line(layout: &Layout, row: &InputRow) -> Map<String, Value> {
    let mut out = line(layout, row, None, (ItemStatus::Cancelled, UNFINISHED));
    let extra = if layout.worktree {
        WORKTREE_COLUMNS.len()
    } else {
        0
    };
    let first = layout.headers.len() - RUNNER_COLUMNS.len() - extra;
    for column in ["status", "attempts", "failure_kind"] {
        if let Some(i) = RUNNER_COLUMNS.iter().position(|c| *c == column) {
            out.insert(layout.headers[first + i].clone(), Value::Null);
        }
    }
    out
}

/// The object of one row: its input fields, then its outcome's fields under the layout's
/// names. `missing` is the `(status, reason)` of a row without an outcome, as in
/// [`super::output_csv::row`].
pub fn line(
    layout: &Layout,
    row: &InputRow,
    outcome: Option<&Outcome>,
    missing: (ItemStatus, &str),
) -> Map<String, Value> {
    let mut out = Map::new();
    let names = &layout.headers;
    for (i, name) in names[..layout.inputs].iter().enumerate() {
        let value = match &row.json {
            // A key the row does not have stays out, as in its input line.
            Some(object) => match object.get(name) {
                Some(v) => v.clone(),
                None => continue,
            },
            None => Value::String(row.values.get(i).cloned().unwrap_or_default()),
        };
        out.insert(name.clone(), value);
    }
    let mut rest = names[layout.inputs..].iter();
    let output = outcome.map_or(&Value::Null, |o| &o.output);
    match &layout.fields {
        Some(fields) => {
            for (field, name) in fields.iter().zip(rest.by_ref()) {
                out.insert(
                    name.clone(),
                    output.get(field).cloned().unwrap_or(Value::Null),
                );
            }
        }
        None => {
            if let Some(name) = rest.next() {
                out.insert(name.clone(), output.clone());
            }
        }
    }
    let worktree: &[&str] = if layout.worktree {
        WORKTREE_COLUMNS
    } else {
        &[]
    };
    let values = runner_values(outcome, missing);
    for ((column, name), value) in RUNNER_COLUMNS.iter().chain(worktree).zip(rest).zip(values) {
        debug_assert!(name.ends_with(column));
        out.insert(name.clone(), value);
    }
    out
}

/// The runner's fields of a row, in [`RUNNER_COLUMNS`] order (then [`WORKTREE_COLUMNS`]).
fn runner_values(outcome: Option<&Outcome>, missing: (ItemStatus, &str)) -> Vec<Value> {
    let Some(o) = outcome else {
        let mut v = vec![
            json!(missing.0.to_string()),
            json!(0),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            json!(missing.1),
            json!(crate::report::kind_of_not_run(missing.0).map(|k| k.to_string())),
        ];
        v.resize(RUNNER_COLUMNS.len() + WORKTREE_COLUMNS.len(), Value::Null);
        return v;
    };
    let text = |s: &str| if s.is_empty() { Value::Null } else { json!(s) };
    let handoff = |key: &str| {
        o.report
            .as_ref()
            .and_then(|r| r.get(key))
            .cloned()
            .unwrap_or(Value::Null)
    };
    vec![
        json!(o.status.to_string()),
        json!(o.attempts),
        json!(o.exit_code),
        if o.attempts == 0 {
            Value::Null
        } else {
            json!((o.duration_s * 1000.0).round() / 1000.0)
        },
        text(&o.started_at),
        text(&o.finished_at),
        text(&o.error),
        json!(o.failure_kind.map(|k| k.to_string())),
        text(&o.summary),
        text(&o.log),
        json!(o.cost_usd),
        json!(o.input_tokens),
        json!(o.output_tokens),
        json!(o.turns),
        json!(o.session_id),
        handoff("files_modified"),
        handoff("files_created"),
        handoff("tests"),
        handoff("blocker"),
        handoff("next_steps"),
        json!(o.branch),
        json!(o.commit),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::output_csv::layout;

    fn row(json: Option<Value>, values: &[&str]) -> InputRow {
        InputRow {
            number: 1,
            line: 1,
            id: "a".into(),
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            json: json.and_then(|j| j.as_object().cloned()),
        }
    }

    #[test]
    fn fields_keep_their_types_and_names_follow_the_csv_columns() {
        let schema = json!({"properties": {"score": {}, "n": {}}});
        let l = layout(&["id".into(), "n".into()], Some(&schema), false, true);
        let mut o = Outcome::not_run("a", "1-a", "a", ItemStatus::Completed, String::new());
        o.attempts = 2;
        o.exit_code = Some(0);
        o.duration_s = 1.25;
        o.cost_usd = Some(0.5);
        o.output = json!({"score": 7, "n": "fine"});
        o.report = Some(json!({"files_modified": ["a.rs"], "blocker": null}));
        let r = row(Some(json!({"id": "a", "n": 1})), &["a", "1"]);
        let line = Value::Object(line(&l, &r, Some(&o), (ItemStatus::Cancelled, "")));
        assert_eq!(line["n"], json!(1), "a JSON input keeps its number");
        assert_eq!(line["score"], json!(7));
        assert_eq!(line["output_n"], json!("fine"), "renamed as in the CSV");
        assert_eq!(line["status"], json!("completed"));
        assert_eq!(line["attempts"], json!(2));
        assert_eq!(line["duration_s"], json!(1.25));
        assert_eq!(line["cost_usd"], json!(0.5));
        assert_eq!(line["files_modified"], json!(["a.rs"]));
        assert_eq!(line["input_tokens"], Value::Null);
        assert!(
            line.get("branch").is_none(),
            "no worktree fields without --isolate"
        );
        assert!(is_output(
            serde_json::to_string(&line).unwrap_or_default().as_bytes()
        ));
    }

    #[test]
    fn a_row_without_an_outcome_says_why_and_a_csv_input_stays_text() {
        let l = layout(&["id".into(), "n".into()], None, true, true);
        let r = row(None, &["a", "1"]);
        let line = Value::Object(line(
            &l,
            &r,
            None,
            (ItemStatus::Skipped, "not selected by --only"),
        ));
        assert_eq!(line["n"], json!("1"));
        assert_eq!(line["result"], Value::Null);
        assert_eq!(line["status"], json!("skipped"));
        assert_eq!(line["attempts"], json!(0));
        assert_eq!(line["error"], json!("not selected by --only"));
        assert_eq!(line["failure_kind"], json!("skipped"));
        assert_eq!(line["branch"], Value::Null);
        assert!(!is_output(b"{\"id\":1}\n"));
        assert!(!is_output(b"id,status\n"));
    }
}
