//! A JSON Lines output (`-o out.jsonl` or `.ndjson`): one object per input row of the
//! shard, in input order, with the same names as the columns of `workers-output.csv`
//! ([`super::output_csv::layout`]) but the values' own types: the input's fields (a JSON Lines
//! input's with their JSON types, a CSV input's as strings), the report's output fields (or
//! `result`) as the JSON the teammate gave, then the runner's fields — numbers as numbers,
//! the hand-off lists as lists, and `null` where a CSV cell is empty. Nothing is guarded
//! against spreadsheets: no spreadsheet reads it. The file is replaced atomically.

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::output::{Fate, OutputFormat, Walk};
use super::output_csv::{Layout, RUNNER_COLUMNS, UNDECIDED, UNFINISHED, WORKTREE_COLUMNS};
use super::previous::{self, Previous};
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::record::outcome::Outcome;
use crate::source::input::InputRow;

/// JSON Lines (`.jsonl`, `.ndjson`): the [`OutputFormat`] of one object per row (its
/// `Debug` name, `Jsonl`, is part of the output's shape hash).
#[derive(Debug)]
pub(crate) struct Jsonl;

impl OutputFormat for Jsonl {
    fn extensions(&self) -> &'static [&'static str] {
        &["jsonl", "ndjson"]
    }

    fn replaces(&self) -> (&'static str, fn(&[u8]) -> bool) {
        (
            "a JSON Lines output of the runner (no status, attempts and error fields)",
            is_output,
        )
    }

    fn write(&self, path: &Path, layout: &Layout, walk: &mut Walk<'_>) -> Result<()> {
        crate::fsutil::make_parent(path)?;
        crate::fsutil::replace_with(path, |w: &mut dyn Write| {
            walk(&mut |fate, stages| {
                let mut object = match fate {
                    Fate::Kept(bytes) => return w.write_all(&bytes),
                    Fate::Ran(row, o) => line(layout, row, Some(&o), (ItemStatus::Cancelled, "")),
                    Fate::NotRun(row, status, why) => line(layout, row, None, (status, why)),
                    Fate::Unfinished(row) => unfinished_line(layout, row),
                };
                object.extend(super::output_stages::fields(layout, stages));
                serde_json::to_writer(&mut *w, &Value::Object(object))?;
                w.write_all(b"\n")
            })
        })
    }

    /// Objects name their fields, so unlike a CSV output the fields need not match this
    /// run's (`headers` names the input's fields only); ids from the field `id_column` are a
    /// string, or a number as its JSON text, and a line without one is skipped.
    fn previous(
        &self,
        path: &Path,
        headers: &[String],
        n_inputs: usize,
        id_column: Option<&str>,
        status_column: &str,
    ) -> Result<Previous> {
        let inputs = &headers[..n_inputs.min(headers.len())];
        read_previous(path, inputs, id_column, status_column)
    }
}

/// Index the JSON Lines output `path` (one object per line) for `--only`: ids from the field
/// `id_column` (a string, or a number as its JSON text; the line's row number when `None`),
/// statuses from `status_column`.
///
/// Errors: the file is missing or unreadable, or a line is not a JSON object (exit 2,
/// naming the line).
fn read_previous(
    path: &Path,
    inputs: &[String],
    id_column: Option<&str>,
    status_column: &str,
) -> Result<Previous> {
    let (file, bytes) = previous::read_kept(path)?;
    let mut index = Previous::new(file, 0);
    let attempts_column = previous::attempts_column_of(status_column);
    let mut start = 0usize;
    let mut number = 0u64;
    for (n, text) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
        let end = start + text.len();
        let range = (start as u64, end as u64);
        start = end;
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(Value::Object(o)) = serde_json::from_slice(text) else {
            return Err(Error::input_at(
                path,
                Some(n as u64 + 1),
                "not a JSON Lines output (this line is not a JSON object); run without --only to write a new output",
            ));
        };
        number += 1;
        let id = match id_column.map(|c| o.get(c)) {
            None => number.to_string(),
            Some(Some(Value::String(s))) => s.clone(),
            Some(Some(Value::Number(x))) => x.to_string(),
            Some(_) => continue,
        };
        let status = o.get(status_column).and_then(|v| v.as_str());
        let attempts = o
            .get(&attempts_column)
            .and_then(Value::as_u64)
            .and_then(|a| u32::try_from(a).ok())
            .unwrap_or(0);
        let text_of = |v: Option<&Value>| match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let values: Vec<String> = inputs.iter().map(|h| text_of(o.get(h))).collect();
        let fingerprint = previous::fingerprint(values.iter().map(String::as_str));
        index.add(id, status, attempts, fingerprint, range);
    }
    Ok(index)
}

/// Whether `bytes` are a JSON Lines output of the runner: its first line is an object with
/// the runner's `status`, `attempts` and `error` fields (or their `runner_` names). The only
/// kind of file a JSON Lines output replaces.
pub(crate) fn is_output(bytes: &[u8]) -> bool {
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(first) else {
        return false;
    };
    ["status", "attempts", "error"]
        .iter()
        .all(|k| o.contains_key(*k) || o.contains_key(&format!("runner_{k}")))
}

/// The line of an item not finished yet: as [`super::output_csv::unfinished_row`], its
/// status, attempts and failure kind `null`.
pub(crate) fn unfinished_line(layout: &Layout, row: &InputRow) -> Map<String, Value> {
    let mut out = line(layout, row, None, (ItemStatus::Cancelled, UNFINISHED));
    for column in UNDECIDED {
        if let Some(i) = layout.runner_column(column) {
            out.insert(layout.headers[i].clone(), Value::Null);
        }
    }
    out
}

/// The object of one row: its input fields, then its outcome's fields under the layout's
/// names. `missing` is the `(status, reason)` of a row without an outcome, as in
/// [`super::output_csv::row`].
pub(crate) fn line(
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
    for ((column, name), value) in RUNNER_COLUMNS
        .iter()
        .chain(worktree)
        .zip(rest.by_ref())
        .zip(values)
    {
        debug_assert!(name.ends_with(column));
        out.insert(name.clone(), value);
    }
    if layout.models
        && let Some(name) = rest.next()
    {
        out.insert(name.clone(), json!(outcome.and_then(|o| o.model.clone())));
    }
    if layout.best_of {
        let b = outcome.and_then(|o| o.best_of.as_deref());
        if let Some(name) = rest.next() {
            out.insert(name.clone(), json!(b.and_then(|b| b.winning())));
        }
        if let Some(name) = rest.next() {
            out.insert(name.clone(), json!(b.map(|b| b.candidates_text())));
        }
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
        json!(o.merged),
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
