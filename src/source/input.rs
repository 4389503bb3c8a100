//! The input of a batch, whatever its format: the rows as the run first read them
//! ([`Spool`]: stdin's rows, or the snapshot taken while the file is scanned, so the file is
//! opened once per run and an edit while the run goes on changes nothing of it), what the
//! scan learned ([`InputTable`]) and the rows streamed from it ([`InputRow`]). The formats
//! are [`InputFormat`]s, one per file, chosen in [`FORMATS`] by the input's extension:
//! [`crate::source::csv_input`] (CSV, TSV, any delimiter) and
//! [`crate::source::jsonl_input`] (one JSON object per line).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

/// How messages name rows read from stdin (`--input -`).
pub(crate) const STDIN_NAME: &str = "<stdin>";

/// Most columns an input may have (a CSV header's fields, a JSON Lines file's distinct keys).
/// Far above any real batch; a hostile header of 1,000,000 columns cost 776 MB before it.
pub(crate) const MAX_COLUMNS: usize = 10_000;

/// Most bytes of one row (a CSV record, its quoted newlines included; a JSON Lines line),
/// and so of one cell: 16 MiB. Enforced while reading, so a 100 MB cell (338 MB of memory
/// before) stops at the bound.
pub(crate) const MAX_ROW_BYTES: u64 = 16 << 20;

pub(crate) use crate::inline::{MAX_PROMPT_BYTES, mib};

/// The error for a row over [`MAX_ROW_BYTES`], at `line` of `path`.
pub(crate) fn row_too_large(path: &Path, line: Option<u64>) -> Error {
    Error::input_at(
        path,
        line,
        format!(
            "this row is over {}, the most a row may hold; keep large content in files and give their paths in the row",
            mib(MAX_ROW_BYTES)
        ),
    )
}

/// The error for a header of `columns` columns, over [`MAX_COLUMNS`], at `line` of `path`.
pub(crate) fn too_many_columns(path: &Path, line: Option<u64>, columns: usize) -> Error {
    Error::input_at(
        path,
        line,
        format!(
            "the input has {columns} columns, more than the {MAX_COLUMNS} a batch may have; keep only the columns the instruction uses"
        ),
    )
}

/// Check the task text of the row at `line` of `path`: `instruction` with the row's values,
/// whose value in column `name` is `len(name)` bytes long.
///
/// Errors: over [`MAX_PROMPT_BYTES`] (exit 2, naming the line).
pub(crate) fn check_prompt(
    path: &Path,
    line: u64,
    instruction: Option<&crate::prompt::Instruction>,
    len: impl Fn(&str) -> usize,
) -> Result<()> {
    let Some(instruction) = instruction else {
        return Ok(());
    };
    let size = instruction.rendered_len(len);
    if size > MAX_PROMPT_BYTES {
        return Err(Error::input_at(
            path,
            Some(line),
            format!(
                "this row makes a task of {} bytes with the instruction, over the {} an item may have; keep large content in files and give their paths in the row",
                size,
                mib(MAX_PROMPT_BYTES as u64)
            ),
        ));
    }
    Ok(())
}

/// The input formats, each in its own file, chosen by the input's extension
/// ([`input_format`]); the last is the format of any other name. A new format is one file
/// with an [`InputFormat`] and one line here.
static FORMATS: &[&dyn InputFormat] = &[
    &crate::source::jsonl_input::Jsonl,
    &crate::source::csv_input::Csv,
];

/// The format of the input `path` by its extension (case-insensitive): the first of
/// [`FORMATS`] that claims it (`.jsonl` and `.ndjson` are JSON Lines), else the last (CSV).
pub(crate) fn input_format(path: &Path) -> &'static dyn InputFormat {
    let ext = extension(path);
    FORMATS
        .iter()
        .find(|f| ext.as_deref().is_some_and(|e| f.extensions().contains(&e)))
        .or(FORMATS.last())
        .copied()
        .unwrap_or(&crate::source::csv_input::Csv)
}

/// The lowercase extension of `path` (without its dot), what chooses a row format.
pub(crate) fn extension(path: &Path) -> Option<String> {
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
}

/// A format of input rows: how a file in it is scanned once and its rows streamed again.
/// Chosen once per input ([`input_format`]), so its calls are per file, never per field.
pub(crate) trait InputFormat: std::fmt::Debug + Sync {
    /// The lowercase extensions (no dot) that choose this format (`["jsonl", "ndjson"]`).
    fn extensions(&self) -> &'static [&'static str];

    /// How messages name the format (`CSV`, `JSON Lines`).
    fn name(&self) -> &'static str;

    /// Whether its fields are split at a delimiter (`--delimiter` is refused otherwise).
    fn has_delimiter(&self) -> bool;

    /// Read and check every row of `path` (or of `spool`, the rows read from stdin) once,
    /// before anything is written, through [`Snapshotting`] so the file is opened once;
    /// `delimiter` splits a record's fields (where [`InputFormat::has_delimiter`]),
    /// `id_column` names the row's id (`None`: its row number), and each row's task text,
    /// `instruction` with its values, is sized as it goes.
    ///
    /// Errors ([`Error::Input`], naming `path` and the line): whatever the format finds bad,
    /// a missing or duplicate id, a row over [`MAX_ROW_BYTES`], more than [`MAX_COLUMNS`]
    /// columns, a task text over [`MAX_PROMPT_BYTES`].
    fn scan(
        &self,
        path: &Path,
        spool: Option<Spool>,
        delimiter: u8,
        id_column: Option<&str>,
        instruction: Option<&crate::prompt::Instruction>,
    ) -> Result<InputTable>;

    /// Stream the rows of `table` (which [`InputFormat::scan`] made) from its spool's start.
    ///
    /// Errors: the spool cannot be read, or the header changed since the scan.
    fn rows(&self, table: &InputTable) -> Result<Rows>;
}

/// The input's bytes as the run first read them, in an unnamed temporary file (gone when the
/// last clone is dropped) so that they can be read as often as a file: rows from stdin, and
/// the snapshot [`scan`] takes of an input file, so that a file edited or replaced while the
/// run goes on changes nothing of it. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Spool(Arc<std::fs::File>);

impl Spool {
    /// Read `input` to its end into a new spool.
    ///
    /// Errors: no temporary file can be made (exit 3), or `input` cannot be read (exit 2).
    pub(crate) fn read(mut input: impl Read) -> Result<Spool> {
        let mut file = tempfile::tempfile().map_err(|e| {
            Error::io(
                "create a temporary file for stdin in",
                &std::env::temp_dir(),
                e,
            )
        })?;
        std::io::copy(&mut input, &mut file)
            .map_err(|e| Error::read_input("the input CSV", Path::new(STDIN_NAME), e))?;
        Ok(Spool(Arc::new(file)))
    }

    /// A reader from the spool's first byte (each reader keeps its own position).
    pub(crate) fn reader(&self) -> SpoolReader {
        SpoolReader {
            file: self.0.clone(),
            pos: 0,
        }
    }

    /// Copy the spooled bytes to `path`, replacing it atomically.
    ///
    /// Errors: the copy cannot be written (exit 3, naming the path).
    pub(crate) fn copy_to(&self, path: &Path) -> Result<()> {
        crate::fsutil::replace_with(path, |w| std::io::copy(&mut self.reader(), w).map(|_| ()))
    }
}

/// A reader of a [`Spool`] with its own position (positioned reads, so readers never move
/// each other).
pub(crate) struct SpoolReader {
    file: Arc<std::fs::File>,
    pos: u64,
}

impl Read for SpoolReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// What [`scan`] learned about a valid input file.
#[derive(Debug, Clone)]
pub(crate) struct InputTable {
    /// The file, for messages ([`STDIN_NAME`] for stdin).
    pub path: PathBuf,
    /// The input's bytes as [`scan`] read them (stdin's rows, or the snapshot of the file):
    /// every later pass reads them, never the file again.
    pub spool: Spool,
    /// The FNV-1a state after the input's bytes (the batch fingerprint starts from it).
    pub digest: crate::hash::Fnv,
    /// The format the rows are read in.
    pub format: &'static dyn InputFormat,
    /// The field delimiter of a CSV input (a byte such as `,`, `;` or a tab).
    pub delimiter: u8,
    /// Column names in input order.
    pub headers: Vec<String>,
    /// Index of the id column; `None` means the 1-based row number is the id.
    pub id_column: Option<usize>,
    /// Number of data rows (header excluded).
    pub rows: u64,
    /// All-empty records after the last row (Excel's `,,,`), skipped: not rows, for a
    /// start-up warning.
    pub skipped_empty: u64,
    /// A hint when the header looks split at the wrong delimiter (one column holding `;`,
    /// say), for a warning.
    pub hint: Option<String>,
    /// The file as it was when the scan read it (`None` for stdin), to tell whether it
    /// changed while the run went on ([`InputTable::changed`]).
    pub stamp: Option<FileStamp>,
}

/// What tells a file's content changed without reading it: device, inode, size and
/// modification time (nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

impl FileStamp {
    /// The stamp of `meta`.
    pub(crate) fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// One data row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InputRow {
    /// 1-based data row number (header excluded).
    pub number: u64,
    /// 1-based line of the file where the record starts.
    pub line: u64,
    /// The row's id: its id column value, or its row number.
    pub id: String,
    /// Field values in column order (a JSON Lines value that is not a string as its
    /// compact JSON text; a missing or `null` one empty).
    pub values: Vec<String>,
    /// The row's object, for a JSON Lines input (its values with their JSON types).
    pub json: Option<serde_json::Map<String, serde_json::Value>>,
}

impl InputTable {
    /// A warning when the input file was edited, replaced or removed since the scan read it:
    /// the run went on, and its outputs hold, the rows as they were read then.
    pub(crate) fn changed(&self) -> Option<String> {
        let then = self.stamp?;
        let now = std::fs::metadata(&self.path)
            .ok()
            .map(|m| FileStamp::of(&m));
        (now != Some(then)).then(|| {
            format!(
                "{} changed while the run went on; the run and its outputs use the rows as they were when it started",
                self.path.display()
            )
        })
    }

    /// The input's bytes from the start: the spool, or the file.
    ///
    /// Errors: the file cannot be opened (exit 2, naming it).
    pub(crate) fn open(&self) -> Result<Box<dyn Read + Send>> {
        Ok(Box::new(self.spool.reader()))
    }

    /// Stream the rows of the scanned input again, from its start.
    ///
    /// Errors: the file cannot be opened, or its header changed since the scan.
    pub(crate) fn rows(&self) -> Result<Rows> {
        self.format.rows(self)
    }
}

/// The check that every id of an input is unique, in 8 bytes a row rather than a set of
/// the ids (a million-row input must not hold its ids twice over): the scan adds each
/// id's hash ([`IdCheck::add`]); [`IdCheck::finish`] sorts them, and only when two are equal
/// reads the rows once more to name the first duplicate exactly.
#[derive(Debug, Default)]
pub(crate) struct IdCheck {
    hashes: Vec<u64>,
}

impl IdCheck {
    /// Note an id the scan read.
    pub(crate) fn add(&mut self, id: &str) {
        self.hashes.push(crate::hash::fnv(id.as_bytes()));
    }

    /// Check the ids of `table` (the input the scan read).
    ///
    /// Errors: a duplicate id, naming its line and the line of its first use (exit 2); the
    /// input cannot be read again.
    pub(crate) fn finish(mut self, table: &InputTable) -> Result<()> {
        self.hashes.sort_unstable();
        let twice: std::collections::HashSet<u64> = self
            .hashes
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        drop(self.hashes);
        if twice.is_empty() {
            return Ok(());
        }
        let mut first: std::collections::HashMap<String, u64> = Default::default();
        for row in table.rows()? {
            let row = row?;
            if !twice.contains(&crate::hash::fnv(row.id.as_bytes())) {
                continue;
            }
            if let Some(prev) = first.get(&row.id) {
                return Err(Error::input_at(
                    &table.path,
                    Some(row.line),
                    format!(
                        "duplicate id `{}` (first on line {prev}); ids must be unique",
                        row.id
                    ),
                ));
            }
            first.insert(row.id, row.line);
        }
        Ok(())
    }
}

/// The rows of an input, streamed in file order.
pub(crate) type Rows = Box<dyn Iterator<Item = Result<InputRow>> + Send>;

/// The reader [`scan`] reads through: the input's bytes are hashed as they pass, and those
/// of a file are copied into a new [`Spool`] (stdin's rows are one already).
pub(crate) struct Snapshotting {
    inner: Box<dyn Read + Send>,
    copy: Option<std::fs::File>,
    spool: Option<Spool>,
    digest: crate::hash::Fnv,
    stamp: Option<FileStamp>,
}

impl Snapshotting {
    /// Read `path` (opened once, here), or the rows already spooled from stdin; `what`
    /// names the input in messages (`the input CSV`).
    ///
    /// Errors: the file cannot be opened (exit 2), or no temporary file can be made for its
    /// copy (exit 3).
    pub(crate) fn open(
        what: &'static str,
        path: &Path,
        spool: Option<Spool>,
    ) -> Result<Snapshotting> {
        if let Some(spool) = spool {
            return Ok(Snapshotting {
                inner: Box::new(spool.reader()),
                copy: None,
                spool: Some(spool),
                digest: Default::default(),
                stamp: None,
            });
        }
        let file = std::fs::File::open(path).map_err(|e| Error::read_input(what, path, e))?;
        let copy = tempfile::tempfile().map_err(|e| {
            Error::io(
                "create a temporary copy of the input in",
                &std::env::temp_dir(),
                e,
            )
        })?;
        let stamp = file.metadata().ok().map(|m| FileStamp::of(&m));
        Ok(Snapshotting {
            inner: Box::new(file),
            copy: Some(copy),
            spool: None,
            digest: Default::default(),
            stamp,
        })
    }

    /// The spool of every byte read, their digest and the file's stamp when it was opened;
    /// call it once the input was read to its end.
    ///
    /// Errors: the input was read without a copy (an internal error, exit 3).
    pub(crate) fn finish(
        self,
        path: &Path,
    ) -> Result<(Spool, crate::hash::Fnv, Option<FileStamp>)> {
        let spool = match (self.spool, self.copy) {
            (Some(spool), _) => spool,
            (None, Some(copy)) => Spool(Arc::new(copy)),
            (None, None) => {
                return Err(Error::Environment(format!(
                    "{}: the input was read without a copy",
                    path.display()
                )));
            }
        };
        Ok((spool, self.digest, self.stamp))
    }
}

impl Read for Snapshotting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.digest.update(&buf[..n]);
        if let Some(copy) = &mut self.copy {
            std::io::Write::write_all(copy, &buf[..n])?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_picks_the_format_and_any_other_name_is_csv() {
        for (path, name) in [
            ("rows.jsonl", "JSON Lines"),
            ("ROWS.NDJSON", "JSON Lines"),
            ("rows.csv", "CSV"),
            ("rows.tsv", "CSV"),
            ("rows", "CSV"),
            (STDIN_NAME, "CSV"),
        ] {
            assert_eq!(input_format(Path::new(path)).name(), name, "{path}");
        }
        assert!(input_format(Path::new("a.tsv")).has_delimiter());
        assert!(!input_format(Path::new("a.jsonl")).has_delimiter());
    }
}
