//! The output a previous run left (`--only failed|ID,...`, DESIGN §2): which items it shows
//! completed, and the exact bytes of each row, so that rows not run again are copied
//! byte-for-byte into the new output. The index is format-neutral: each output format fills
//! it ([`Previous::new`], [`Previous::add`]) from a file of its own
//! ([`crate::sink::output::OutputFormat::previous`]); the CSV reader, shared with the todo
//! table, is [`Previous::read`].

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::{Error, Result};
use crate::sink::output_csv;

/// Index of a previous output file: id → (completed?, byte range of its record).
#[derive(Debug, Clone)]
pub(crate) struct Previous {
    /// The file as it was read, kept open: an output kept current while the run goes on
    /// replaces the path, and the byte ranges are of these bytes.
    file: std::sync::Arc<std::fs::File>,
    /// Per id: its status, its `attempts` (0 when empty) and its row's byte range.
    rows: HashMap<String, (Was, u32, u64, u64)>,
    /// Per id: the [`fingerprint`] of the input values its row shows.
    inputs: HashMap<String, u64>,
}

/// FNV-1a of a row's input values, each followed by a unit separator: what tells a row of
/// the previous output that stood for other input from one that shows this input (with
/// row-number ids, a row inserted at the top moves every id onto another row).
pub(crate) fn fingerprint<'a>(values: impl IntoIterator<Item = &'a str>) -> u64 {
    let mut h = crate::hash::Fnv::default();
    for v in values {
        h.update(v.as_bytes());
        h.update(b"\x1f");
    }
    h.value()
}

/// The `attempts` column beside `status_column` (`runner_attempts` beside `runner_status`).
pub(crate) fn attempts_column_of(status_column: &str) -> String {
    match status_column.strip_suffix("status") {
        Some(prefix) => format!("{prefix}attempts"),
        None => "attempts".to_owned(),
    }
}

/// What a row's status said, as far as `--only` cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Was {
    Completed,
    Blocked,
    Other,
}

impl Was {
    fn of(status: Option<&str>) -> Was {
        match status {
            Some("completed") => Was::Completed,
            Some("blocked") => Was::Blocked,
            _ => Was::Other,
        }
    }
}

/// Open `path`, read it whole, and keep it open.
pub(crate) fn read_kept(path: &Path) -> Result<(std::sync::Arc<std::fs::File>, Vec<u8>)> {
    let err = |e| Error::read_input("the previous output for --only", path, e);
    let mut file = std::fs::File::open(path).map_err(err)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(err)?;
    Ok((std::sync::Arc::new(file), bytes))
}

impl Previous {
    /// Index `path`, whose header must equal `headers` (the layout of this run, whose first
    /// `n_inputs` are the input's columns). Ids are read from column `id_column` (or the row
    /// number when `None`), statuses from `status_column`.
    ///
    /// Errors: the file is missing or unreadable, its columns differ from this run's (exit 2).
    pub(crate) fn read(
        path: &Path,
        headers: &[String],
        n_inputs: usize,
        id_column: Option<&str>,
        status_column: &str,
    ) -> Result<Previous> {
        let (file, bytes) = read_kept(path)?;
        let raw = output_csv::raw_records(&bytes)
            .map_err(|(line, e)| Error::input_at(path, line, format!("not a CSV output: {e}")))?;
        if raw.header != headers {
            return Err(Error::input_at(
                path,
                Some(1),
                "its columns differ from this batch's output (input, schema or runner columns changed); \
                 run without --only to write a new output",
            ));
        }
        let id_idx = id_column.and_then(|c| headers.iter().position(|h| h == c));
        let status_idx = headers.iter().position(|h| h == status_column);
        let attempts_column = attempts_column_of(status_column);
        let attempts_idx = headers.iter().position(|h| *h == attempts_column);
        let mut rows = HashMap::with_capacity(raw.records.len());
        let mut inputs = HashMap::with_capacity(raw.records.len());
        for (number, (record, start, end)) in raw.records.iter().enumerate() {
            let id = match id_idx {
                Some(i) => record.get(i).unwrap_or_default().to_owned(),
                None => (number + 1).to_string(),
            };
            let was = Was::of(status_idx.and_then(|i| record.get(i)));
            let attempts = attempts_idx
                .and_then(|i| record.get(i))
                .and_then(|a| a.parse().ok())
                .unwrap_or(0);
            inputs.insert(id.clone(), fingerprint(record.iter().take(n_inputs)));
            rows.insert(id, (was, attempts, *start as u64, *end as u64));
        }
        Ok(Previous { file, rows, inputs })
    }

    /// Stop trusting the rows whose input values differ from those `current` (the input's
    /// rows as `(id, fingerprint)`) has under the same id, so they are run again and never
    /// copied (issue 50: with row-number ids and a row inserted at the top, `--only failed`
    /// paired old results with new rows). With ids of their own (`same_item`) such a row is
    /// the same item edited: a completed one is run again, its attempts still counting (a
    /// failed one runs anyway; a blocked one still waits for a person, whose edit `--only
    /// blocked` then runs). With row numbers it stood for another row: it is forgotten
    /// whole. Returns how many rows are run again for it.
    pub(crate) fn forget_changed<'a>(
        &mut self,
        current: impl IntoIterator<Item = (&'a str, u64)>,
        same_item: bool,
    ) -> usize {
        let mut changed = 0;
        for (id, now) in current {
            if self.inputs.get(id).is_none_or(|was| *was == now) {
                continue;
            }
            match same_item {
                true => {
                    if let Some(row) = self.rows.get_mut(id).filter(|r| r.0 == Was::Completed) {
                        row.0 = Was::Other;
                        changed += 1;
                    }
                }
                false => {
                    self.rows.remove(id);
                    self.inputs.remove(id);
                    changed += 1;
                }
            }
        }
        changed
    }

    /// An empty index of `file` (its bytes as read), for a format's reader to fill
    /// ([`Previous::add`]) with room for `rows` rows.
    pub(crate) fn new(file: std::sync::Arc<std::fs::File>, rows: usize) -> Previous {
        Previous {
            file,
            rows: HashMap::with_capacity(rows),
            inputs: HashMap::with_capacity(rows),
        }
    }

    /// Note the row `id`: its `status` (`completed`, `blocked`, anything else), its
    /// `attempts` (0 when empty), the [`fingerprint`] of its input values and the byte range
    /// `start..end` of its row in the file.
    pub(crate) fn add(
        &mut self,
        id: String,
        status: Option<&str>,
        attempts: u32,
        inputs: u64,
        (start, end): (u64, u64),
    ) {
        self.inputs.insert(id.clone(), inputs);
        self.rows
            .insert(id, (Was::of(status), attempts, start, end));
    }

    /// Whether the previous output shows `id` completed.
    pub(crate) fn completed(&self, id: &str) -> bool {
        self.rows.get(id).is_some_and(|r| r.0 == Was::Completed)
    }

    /// The attempts the previous output shows for each of its rows that `keep` selects, for
    /// a replay's attempt numbers to go on from (the README: attempts count across runs).
    pub(crate) fn attempts<'a>(
        &'a self,
        keep: impl Fn(&str) -> bool + 'a,
    ) -> impl Iterator<Item = (&'a str, u32)> + 'a {
        self.rows
            .iter()
            .filter(move |(id, r)| r.1 > 0 && keep(id))
            .map(|(id, r)| (id.as_str(), r.1))
    }

    /// Whether the previous output shows `id` blocked (waiting for a person).
    pub(crate) fn blocked(&self, id: &str) -> bool {
        self.rows.get(id).is_some_and(|r| r.0 == Was::Blocked)
    }

    /// The exact bytes of `id`'s row (with its line ending), if it has one.
    ///
    /// Errors: the file cannot be read back.
    pub(crate) fn raw(
        &self,
        file: &mut std::fs::File,
        id: &str,
    ) -> std::io::Result<Option<Vec<u8>>> {
        let Some((_, _, start, end)) = self.rows.get(id) else {
            return Ok(None);
        };
        let mut buf = vec![0u8; (end - start) as usize];
        file.seek(SeekFrom::Start(*start))?;
        file.read_exact(&mut buf)?;
        if !buf.ends_with(b"\n") {
            buf.push(b'\n');
        }
        Ok(Some(buf))
    }

    /// The file as it was read, for [`Previous::raw`] (a handle of its own; the bytes are
    /// those indexed even after the path was replaced).
    pub(crate) fn open(&self) -> std::io::Result<std::fs::File> {
        self.file.try_clone()
    }
}
