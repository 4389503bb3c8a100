//! The output a previous run left (`--only failed|ID,...`, DESIGN §2): which items it shows
//! completed, and the exact bytes of each row, so that rows not run again are copied
//! byte-for-byte into the new output.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Index of a previous output file: id → (completed?, byte range of its record).
#[derive(Debug, Clone)]
pub struct Previous {
    path: PathBuf,
    rows: HashMap<String, (bool, u64, u64)>,
}

impl Previous {
    /// Index `path`, whose header must equal `headers` (the layout of this run). Ids are read
    /// from column `id_column` (or the row number when `None`), statuses from
    /// `status_column`.
    ///
    /// Errors: the file is missing or unreadable, its columns differ from this run's (exit 2).
    pub fn read(
        path: &Path,
        headers: &[String],
        id_column: Option<&str>,
        status_column: &str,
    ) -> Result<Previous> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::Input(format!(
                "{}: cannot read the previous output for --only: {e}",
                path.display()
            ))
        })?;
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .from_reader(bytes.as_slice());
        let found: Vec<String> = rdr
            .headers()
            .map_err(|e| Error::input_at(path, Some(1), format!("not a CSV output: {e}")))?
            .iter()
            .map(str::to_owned)
            .collect();
        if found != headers {
            return Err(Error::input_at(
                path,
                Some(1),
                "its columns differ from this batch's output (input, schema or runner columns changed); \
                 run without --only to write a new output",
            ));
        }
        let id_idx = id_column.and_then(|c| headers.iter().position(|h| h == c));
        let status_idx = headers.iter().position(|h| h == status_column);
        let mut starts: Vec<(String, bool, u64)> = Vec::new();
        let mut record = csv::StringRecord::new();
        let mut number = 0u64;
        loop {
            match rdr.read_record(&mut record) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    return Err(Error::input_at(
                        path,
                        e.position().map(|p| p.line()),
                        format!("not a CSV output: {e}"),
                    ));
                }
            }
            number += 1;
            let id = match id_idx {
                Some(i) => record.get(i).unwrap_or_default().to_owned(),
                None => number.to_string(),
            };
            let completed = status_idx.and_then(|i| record.get(i)) == Some("completed");
            let mut start = record.position().map_or(0, |p| p.byte());
            // csv points a CRLF record at the `\n` of the previous terminator.
            if bytes.get(start as usize) == Some(&b'\n') {
                start += 1;
            }
            starts.push((id, completed, start));
        }
        let mut rows = HashMap::with_capacity(starts.len());
        for i in 0..starts.len() {
            let end = starts.get(i + 1).map_or(bytes.len() as u64, |s| s.2);
            let (id, completed, start) = &starts[i];
            rows.insert(id.clone(), (*completed, *start, end));
        }
        Ok(Previous {
            path: path.to_owned(),
            rows,
        })
    }

    /// Whether the previous output shows `id` completed.
    pub fn completed(&self, id: &str) -> bool {
        self.rows.get(id).is_some_and(|r| r.0)
    }

    /// The exact bytes of `id`'s row (with its line ending), if it has one.
    ///
    /// Errors: the file cannot be read back.
    pub fn raw(&self, file: &mut std::fs::File, id: &str) -> std::io::Result<Option<Vec<u8>>> {
        let Some((_, start, end)) = self.rows.get(id) else {
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

    /// Open the file for [`Previous::raw`].
    pub fn open(&self) -> std::io::Result<std::fs::File> {
        std::fs::File::open(&self.path)
    }

    /// Ids in the previous output.
    pub fn contains(&self, id: &str) -> bool {
        self.rows.contains_key(id)
    }
}
