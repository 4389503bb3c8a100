//! A team's results read from an output file alone (`workers-output.csv`, a JSON Lines
//! output, or the output `runner merge` joined from shards), for `runner report --markdown`
//! where no team workspace stands for the file: each row's runner columns (`status`,
//! `attempts`, `error`, `failure_kind`, `log`, `cost_usd`, `started_at`, `finished_at`, or
//! their `runner_` names) become its item's last outcome. The item is named by the `id`
//! column when the output has one, else by its row number. Reads only.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::record::history::History;
use crate::run::record::outcome::Outcome;

/// Whether `path` is an output of the runner (a CSV or JSON Lines file whose first row holds
/// the runner's `status`, `attempts` and `error`).
pub(crate) fn is_output(path: &Path) -> bool {
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut head = vec![0; 64 * 1024];
    let n = std::io::Read::read(&mut file, &mut head).unwrap_or(0);
    head.truncate(n);
    super::output_csv::is_output(&head) || super::output_jsonl::is_output(&head)
}

/// The history of the output at `path`: its team is the file's name; each row an outcome;
/// no attempts' spans and no runs (an output keeps neither).
///
/// Errors: the file cannot be read, or it is not an output of the runner (exit 2, naming it
/// and the line).
pub(crate) fn read(path: &Path) -> Result<History> {
    let bytes = std::fs::read(path).map_err(|e| Error::read_input("the output", path, e))?;
    let rows = match super::output_jsonl::is_output(&bytes) {
        true => jsonl_rows(path, &bytes)?,
        false => csv_rows(path, &bytes)?,
    };
    let outcomes = rows
        .iter()
        .enumerate()
        .filter_map(|(i, row)| outcome(i + 1, row))
        .collect();
    Ok(History {
        team: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        outcomes,
        ..History::default()
    })
}

/// One row: its fields by name (a JSON value's text when it is no string; `null` empty).
type Row = HashMap<String, String>;

fn csv_rows(path: &Path, bytes: &[u8]) -> Result<Vec<Row>> {
    if !super::output_csv::is_output(bytes) {
        return Err(Error::input_at(
            path,
            None,
            "not an output of the runner (no status, attempts and error columns); give its team workspace, or an output CSV or JSON Lines file",
        ));
    }
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(bytes);
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| Error::input_at(path, Some(1), format!("not a CSV output: {e}")))?
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').to_owned())
        .collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map(|p| p.line());
            Error::input_at(path, line, format!("not a CSV output: {e}"))
        })?;
        rows.push(
            headers
                .iter()
                .cloned()
                .zip(record.iter().map(str::to_owned))
                .collect(),
        );
    }
    Ok(rows)
}

fn jsonl_rows(path: &Path, bytes: &[u8]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let object: serde_json::Map<String, Value> = serde_json::from_slice(line).map_err(|e| {
            Error::input_at(
                path,
                Some(i as u64 + 1),
                format!("not a JSON Lines output: {e}"),
            )
        })?;
        rows.push(
            object
                .into_iter()
                .map(|(k, v)| {
                    let text = match v {
                        Value::String(s) => s,
                        Value::Null => String::new(),
                        other => other.to_string(),
                    };
                    (k, text)
                })
                .collect(),
        );
    }
    Ok(rows)
}

/// The outcome row `number` (1-based) shows; `None` for a row no item finished in (a live
/// output's unfinished row, with an empty status).
fn outcome(number: usize, row: &Row) -> Option<Outcome> {
    // The runner's columns are all `runner_…` when one collided with an input column.
    let prefixed = row.contains_key("runner_status") && row.contains_key("runner_attempts");
    let get = |name: &str| -> &str {
        let key = match prefixed {
            true => format!("runner_{name}"),
            false => name.to_owned(),
        };
        row.get(&key).map_or("", String::as_str)
    };
    let status = ItemStatus::ALL
        .into_iter()
        .find(|s| s.as_str() == get("status"))?;
    let id = row
        .get("id")
        .filter(|id| !id.is_empty())
        .cloned()
        .unwrap_or_else(|| number.to_string());
    let mut o = Outcome::not_run(&id, "", "", status, get("error").to_owned());
    o.attempts = get("attempts").parse().unwrap_or(0);
    o.failure_kind = crate::failure::FailureKind::parse(get("failure_kind"));
    o.log = get("log").to_owned();
    o.cost_usd = get("cost_usd").parse().ok();
    o.started_at = get("started_at").to_owned();
    o.finished_at = get("finished_at").to_owned();
    o.duration_s = get("duration_s").parse().unwrap_or(0.0);
    Some(o)
}
