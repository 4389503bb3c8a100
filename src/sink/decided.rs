//! A review's decisions in the run's output at once (issue 57): after `runner accept` or
//! `runner reject`, the rows of the decided items in the team's output table
//! (`workers-output.csv` or `.jsonl`) get their new `status`, `error`, `failure_kind`, `log`
//! and `merged`, so the output says what the journal says without waiting for the batch's
//! next run. Every other row is copied byte for byte.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::run::record::outcome::Outcome;

/// The cells a decision changes, by the runner's column name.
const DECIDED: [&str; 5] = ["status", "error", "failure_kind", "log", "merged"];

/// Rewrite the rows of `decided` in the output table of the CSV team in workspace `ws` (the
/// `<stem>.csv` or `<stem>.jsonl` beside the folder the workspace stands for). Returns the
/// tables rewritten; none for a todo team, a table that is gone, or one that is not the
/// runner's output.
///
/// Errors: the workspace's batch record or a table cannot be read or written.
pub(crate) fn record_decisions(ws: &Path, decided: &[Outcome]) -> Result<Vec<PathBuf>> {
    let Some(batch) = crate::run::record::team::recorded_batch(ws)? else {
        return Ok(Vec::new());
    };
    // `column NAME` or `row number` (a todo batch has none).
    let ids = match batch.ids.as_deref() {
        Some("row number") => Ids::RowNumber,
        Some(named) => match named.strip_prefix("column ") {
            Some(c) => Ids::Column(c.to_owned()),
            None => return Ok(Vec::new()),
        },
        None => return Ok(Vec::new()),
    };
    let origin = crate::state_dir::origin_of(ws);
    let mut rewritten = Vec::new();
    for ext in ["csv", "jsonl"] {
        let table = origin.with_extension(ext);
        let Ok(bytes) = std::fs::read(&table) else {
            continue;
        };
        let done = match ext {
            "csv" if super::output_csv::is_output(&bytes) => {
                csv_rows(&table, &bytes, &ids, decided)?
            }
            "jsonl" if super::output_jsonl::is_output(&bytes) => {
                jsonl_rows(&table, &bytes, &ids, decided)?
            }
            _ => false,
        };
        if done {
            rewritten.push(table);
        }
    }
    Ok(rewritten)
}

/// How the batch names its rows.
enum Ids {
    /// The value of this input column.
    Column(String),
    /// The row's number, 1-based.
    RowNumber,
}

/// The new value of the runner's column `name` for `o`, as text (`None`: empty).
fn value_of(o: &Outcome, name: &str) -> Option<String> {
    match name {
        "status" => Some(o.status.to_string()),
        "error" => Some(o.error.clone()).filter(|e| !e.is_empty()),
        "failure_kind" => o.failure_kind.map(|k| k.to_string()),
        "log" => Some(o.log.clone()).filter(|l| !l.is_empty()),
        "merged" => o.merged.clone(),
        _ => None,
    }
}

/// Rewrite the CSV table `path` (its `bytes`): `true` when a row changed.
///
/// Errors: it is no CSV output; it cannot be written.
fn csv_rows(path: &Path, bytes: &[u8], ids: &Ids, decided: &[Outcome]) -> Result<bool> {
    let raw = super::output_csv::raw_records(bytes)
        .map_err(|(line, e)| Error::input_at(path, line, format!("not a CSV output: {e}")))?;
    // The runner's columns are all `runner_<name>` when one collided (see `layout`).
    let prefix = match raw.header.iter().any(|h| h == "runner_status") {
        true => "runner_",
        false => "",
    };
    let at = |name: &str| {
        raw.header
            .iter()
            .position(|h| *h == format!("{prefix}{name}"))
    };
    let columns: Vec<(usize, &str)> = DECIDED
        .iter()
        .filter_map(|n| at(n).map(|i| (i, *n)))
        .collect();
    let id_at = match ids {
        Ids::Column(c) => raw.header.iter().position(|h| h == c),
        Ids::RowNumber => None,
    };
    let outcome_of = |n: usize, record: &csv::StringRecord| {
        let id = match (ids, id_at) {
            (Ids::RowNumber, _) => (n + 1).to_string(),
            (Ids::Column(_), Some(i)) => record.get(i).unwrap_or_default().to_owned(),
            (Ids::Column(_), None) => return None,
        };
        decided.iter().find(|o| o.id == id)
    };
    if !raw
        .records
        .iter()
        .enumerate()
        .any(|(n, (r, ..))| outcome_of(n, r).is_some())
    {
        return Ok(false);
    }
    crate::fsutil::replace_with(path, |w: &mut dyn Write| {
        w.write_all(&bytes[..raw.header_end])?;
        for (n, (record, start, end)) in raw.records.iter().enumerate() {
            let Some(o) = outcome_of(n, record) else {
                w.write_all(&bytes[*start..*end])?;
                continue;
            };
            let mut fields: Vec<String> = record.iter().map(str::to_owned).collect();
            for (i, name) in &columns {
                if let Some(cell) = fields.get_mut(*i) {
                    *cell = value_of(o, name).unwrap_or_default();
                }
            }
            let mut csv = csv::WriterBuilder::new().from_writer(Vec::new());
            csv.write_record(&fields)?;
            w.write_all(&csv.into_inner().map_err(|e| e.into_error())?)?;
        }
        Ok(())
    })?;
    Ok(true)
}

/// Rewrite the JSON Lines table `path` (its `bytes`): `true` when a line changed.
///
/// Errors: it cannot be written.
fn jsonl_rows(path: &Path, bytes: &[u8], ids: &Ids, decided: &[Outcome]) -> Result<bool> {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let parsed: Vec<Option<Map<String, Value>>> = lines
        .iter()
        .map(|l| serde_json::from_str::<Map<String, Value>>(l.trim_end()).ok())
        .collect();
    let prefix = match parsed.first().and_then(Option::as_ref) {
        Some(o) if o.contains_key("runner_status") => "runner_",
        _ => "",
    };
    let outcome_of = |n: usize, line: &Map<String, Value>| {
        let id = match ids {
            Ids::RowNumber => (n + 1).to_string(),
            Ids::Column(c) => match line.get(c) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => return None,
                Some(v) => v.to_string(),
            },
        };
        decided.iter().find(|o| o.id == id)
    };
    let mut changed = false;
    let mut out = String::with_capacity(text.len());
    for (n, (line, object)) in lines.iter().zip(&parsed).enumerate() {
        match object
            .as_ref()
            .and_then(|m| outcome_of(n, m).map(|o| (m, o)))
        {
            Some((m, o)) => {
                let mut m = m.clone();
                for name in DECIDED {
                    let key = format!("{prefix}{name}");
                    if m.contains_key(&key) {
                        m.insert(key, value_of(o, name).map_or(Value::Null, Value::String));
                    }
                }
                out.push_str(&Value::Object(m).to_string());
                out.push('\n');
                changed = true;
            }
            None => out.push_str(line),
        }
    }
    if changed {
        crate::fsutil::write_atomic(path, out.as_bytes())?;
    }
    Ok(changed)
}
