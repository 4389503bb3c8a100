//! `workers-input.csv`: the rows of a CSV batch (seed `taskmaster-protocol.md`, DESIGN §3).
//!
//! The file is opened once and read streaming: [`scan`] validates every record before
//! anything is written (header row, equal lengths, UTF-8, non-empty unique ids), keeps only
//! the ids, and leaves a snapshot of the bytes ([`Spool`]); [`CsvRows`] then yields rows one
//! at a time from that snapshot for the run, so memory does not grow with the row count
//! beyond the rows in flight and the id set.
//!
//! Format: RFC 4180 CSV with a header row; a UTF-8 BOM is stripped; CRLF or LF records;
//! quoted fields may hold commas, quotes (`""`) and newlines, which are carried byte-for-byte.
//! The field delimiter is `,` unless chosen ([`delimiter_for`]: `--delimiter`, BATCH.md's
//! `delimiter`, tab for a `.tsv` file). Rows may come from stdin (`--input -`): a pipe is
//! read once, so its bytes are spooled to an unnamed temporary file ([`Spool`]).

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::source::input::{
    InputFormat, InputRow, InputTable, MAX_COLUMNS, MAX_ROW_BYTES, Rows, Snapshotting, Spool,
    check_prompt, row_too_large, too_many_columns,
};

/// The field delimiter of an input: `flag` (`--delimiter`, else BATCH.md's `delimiter`) when
/// given, else tab for a `.tsv` or `.tab` file, else a comma. `\t` and `tab` name a tab.
/// `what` names the flag or key in messages.
///
/// Errors (exit 2, naming `what`): more than one character, a character that is not ASCII,
/// or one that cannot separate fields (a quote, a newline).
pub(crate) fn delimiter_for(what: &str, flag: Option<&str>, input: Option<&Path>) -> Result<u8> {
    let Some(text) = flag else {
        let tsv = input
            .and_then(Path::extension)
            .is_some_and(|e| e.eq_ignore_ascii_case("tsv") || e.eq_ignore_ascii_case("tab"));
        return Ok(if tsv { b'\t' } else { b',' });
    };
    let c = match text {
        "\\t" | "tab" => '\t',
        _ => {
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => c,
                _ => {
                    return Err(Error::Usage(format!(
                        "{what} `{text}` must be one character, e.g. ';' or '\\t' for a tab"
                    )));
                }
            }
        }
    };
    if !c.is_ascii() || matches!(c, '"' | '\n' | '\r') {
        return Err(Error::Usage(format!(
            "{what} `{}` cannot separate fields; give one ASCII character such as ';', '|' or '\\t'",
            c.escape_default()
        )));
    }
    Ok(c as u8)
}

/// The hint for a header read with `delimiter` into one column that holds another common
/// delimiter (`;`, tab, `|`): the columns are likely separated by that one. `None` when the
/// header looks right.
fn delimiter_hint(path: &Path, headers: &[String], delimiter: u8) -> Option<String> {
    let [only] = headers else { return None };
    let (c, shown) = [(';', "';'"), ('\t', "'\\t'"), ('|', "'|'")]
        .into_iter()
        .find(|(c, _)| *c as u8 != delimiter && only.contains(*c))?;
    Some(format!(
        "the header of {} is one column `{}` that holds `{}` and no `{}`: if `{}` separates \
         the columns, pass --delimiter {shown} (or `delimiter: \"{}\"` in BATCH.md)",
        path.display(),
        only.escape_default(),
        c.escape_default(),
        (delimiter as char).escape_default(),
        c.escape_default(),
        c.escape_default(),
    ))
}

/// `e` with `hint` (from [`InputTable::hint`]) added to its message, when it is an input
/// error: a missing column is most often a header split at the wrong delimiter.
pub(crate) fn with_hint(e: Error, hint: Option<&str>) -> Error {
    match (e, hint) {
        (
            Error::Input {
                path,
                line,
                message,
            },
            Some(h),
        ) => Error::Input {
            path,
            line,
            message: format!("{message}. Note: {h}"),
        },
        (e, _) => e,
    }
}

/// Wraps the input to map a record's byte offset to its 1-based line: the `csv` crate's own
/// line numbers drift on CRLF files. Only newlines in the reader's look-ahead are held. It
/// also bounds a record: reading more than [`MAX_ROW_BYTES`] past the start of the record
/// being read (`record_start`, moved on after each record) fails, and `over` says why.
struct LineCounter<R> {
    inner: R,
    read: u64,
    quotes: u64,
    state: std::cell::RefCell<(u64, std::collections::VecDeque<u64>)>,
    record_start: std::cell::Cell<u64>,
    over: std::cell::Cell<bool>,
}

impl<R: Read> Read for LineCounter<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.read.saturating_sub(self.record_start.get()) > MAX_ROW_BYTES {
            self.over.set(true);
            return Err(std::io::Error::other("a row over the size bound"));
        }
        let n = self.inner.read(buf)?;
        let mut state = self.state.borrow_mut();
        for (i, b) in buf[..n].iter().enumerate() {
            if *b == b'\n' {
                state.1.push_back(self.read + i as u64);
            } else if *b == b'"' {
                self.quotes += 1;
            }
        }
        self.read += n as u64;
        Ok(n)
    }
}

impl<R> LineCounter<R> {
    /// The line of the record starting at `byte` (as reported by csv, which points at the
    /// `\n` of a CRLF terminator): 1 + newlines at offsets ≤ `byte`. Offsets must not
    /// decrease between calls.
    fn line_at(&self, byte: u64) -> u64 {
        let mut state = self.state.borrow_mut();
        while state.1.front().is_some_and(|nl| *nl <= byte) {
            state.1.pop_front();
            state.0 += 1;
        }
        state.0 + 1
    }
}

fn reader<R: Read>(input: R, delimiter: u8) -> csv::Reader<LineCounter<R>> {
    let counter = LineCounter {
        inner: input,
        read: 0,
        quotes: 0,
        state: Default::default(),
        record_start: Default::default(),
        over: Default::default(),
    };
    csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(true)
        .flexible(false)
        .from_reader(counter)
}

fn record_line<R: Read>(
    rdr: &csv::Reader<LineCounter<R>>,
    record: &csv::ByteRecord,
) -> Option<u64> {
    record.position().map(|p| rdr.get_ref().line_at(p.byte()))
}

fn csv_error<R: Read>(path: &Path, rdr: &csv::Reader<LineCounter<R>>, err: csv::Error) -> Error {
    let counter = rdr.get_ref();
    if counter.over.get() {
        return row_too_large(path, Some(counter.line_at(counter.record_start.get())));
    }
    let line = err.position().map(|p| counter.line_at(p.byte()));
    match err.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => Error::input_at(
            path,
            line,
            format!(
                "this record has {len} fields but the header has {expected_len}; \
                 quote fields that contain the delimiter or newlines (\"a, b\") and make every row \
                 as long as the header"
            ),
        ),
        csv::ErrorKind::Utf8 { .. } => Error::input_at(
            path,
            line,
            "this record is not valid UTF-8; save the file as \"CSV UTF-8\"",
        ),
        csv::ErrorKind::Io(e) => Error::read_input(
            "the input CSV",
            path,
            std::io::Error::new(e.kind(), e.to_string()),
        ),
        _ => Error::input_at(path, line, format!("not valid CSV: {err}")),
    }
}

/// Refuse a field holding a NUL byte (a binary file saved as CSV, a broken export): no
/// agent, prompt or output file can carry it. Errors name the line and the column.
fn no_nul(path: &Path, line: u64, headers: &[String], record: &csv::ByteRecord) -> Result<()> {
    match record.iter().position(|f| f.contains(&0)) {
        None => Ok(()),
        Some(i) => Err(Error::input_at(
            path,
            Some(line),
            format!(
                "column {} (`{}`) holds a NUL byte, which no prompt or output can carry; remove it from the file",
                i + 1,
                headers.get(i).map_or("", String::as_str)
            ),
        )),
    }
}

fn utf8_fields(
    path: &Path,
    line: Option<u64>,
    record: &csv::ByteRecord,
    what: &str,
) -> Result<Vec<String>> {
    record
        .iter()
        .enumerate()
        .map(|(i, field)| {
            std::str::from_utf8(field).map(str::to_owned).map_err(|_| {
                Error::input_at(
                    path,
                    line,
                    format!(
                        "{what} {} is not valid UTF-8; save the file as \"CSV UTF-8\"",
                        i + 1
                    ),
                )
            })
        })
        .collect()
}

fn read_headers<R: Read>(
    path: &Path,
    rdr: &mut csv::Reader<LineCounter<R>>,
) -> Result<Vec<String>> {
    let headers = match rdr.byte_headers() {
        Ok(h) => h.clone(),
        Err(e) => return Err(csv_error(path, rdr, e)),
    };
    if headers.len() > MAX_COLUMNS {
        return Err(too_many_columns(path, Some(1), headers.len()));
    }
    if headers.is_empty() || (headers.len() == 1 && headers[0].is_empty()) {
        return Err(Error::input_at(
            path,
            Some(1),
            "no header row; the first line must name the columns (e.g. `id,path`)",
        ));
    }
    let names = utf8_fields(path, Some(1), &headers, "header field")?;
    let mut seen = HashSet::new();
    for (i, name) in names.iter().enumerate() {
        if name.trim().is_empty() {
            return Err(Error::input_at(
                path,
                Some(1),
                format!("column {} has no name; give every column a header", i + 1),
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(Error::input_at(
                path,
                Some(1),
                format!("duplicate column name `{name}`; column names must be unique"),
            ));
        }
    }
    Ok(names)
}

fn id_index(path: &Path, headers: &[String], id_column: Option<&str>) -> Result<Option<usize>> {
    let Some(name) = id_column else {
        return Ok(None);
    };
    match headers.iter().position(|h| h == name) {
        Some(i) => Ok(Some(i)),
        None => Err(Error::input_at(
            path,
            Some(1),
            format!(
                "no id column `{name}`; the columns are: {}. Set `id_column` to one of them, \
                 or leave it out to use row numbers",
                headers.join(", ")
            ),
        )),
    }
}

/// Validate a whole input, streaming, keeping only the ids: the file at `path`, or `spool`
/// (rows from stdin; `path` then names it in messages), its fields separated by `delimiter`;
/// each row's task text, `instruction` with its values, is sized as it goes.
///
/// All-empty records (`,,,`) after the last row are skipped ([`InputTable::skipped_empty`]).
///
/// Errors ([`Error::Input`], naming `path` and the line where the bad record starts): no
/// header row, an unnamed or duplicate column, a missing id column, a record whose field count
/// differs from the header, bytes that are not UTF-8, a NUL byte (with its column), an empty
/// id, a duplicate id, no rows at all; more than
/// [`MAX_COLUMNS`] columns, a record over [`MAX_ROW_BYTES`], a task text over
/// [`crate::source::input::MAX_PROMPT_BYTES`].
pub(crate) fn scan(
    path: &Path,
    spool: Option<Spool>,
    delimiter: u8,
    id_column: Option<&str>,
    instruction: Option<&crate::prompt::Instruction>,
) -> Result<InputTable> {
    let mut rdr = reader(Snapshotting::open("the input CSV", path, spool)?, delimiter);
    let headers = read_headers(path, &mut rdr)?;
    let column: std::collections::HashMap<&str, usize> = headers
        .iter()
        .enumerate()
        .map(|(i, h)| (h.as_str(), i))
        .collect();
    rdr.get_ref().record_start.set(rdr.position().byte());
    let hint = delimiter_hint(path, &headers, delimiter);
    let id_col = id_index(path, &headers, id_column).map_err(|e| with_hint(e, hint.as_deref()))?;
    let mut ids = crate::source::input::IdCheck::default();
    let mut record = csv::ByteRecord::new();
    let mut rows = 0u64;
    // All-empty records (`,,,`) not yet followed by a row: (the line of the first, how many).
    // Trailing ones are Excel's (cells once touched below the data) and are skipped.
    let mut empty: Option<(u64, u64)> = None;
    let mut last_multiline: Option<u64> = None;
    loop {
        match rdr.read_byte_record(&mut record) {
            Ok(false) => {
                // csv accepts a quote that is never closed by swallowing the rest of the
                // file into one field; an odd quote count plus a multi-line last record is
                // that case, and running it would hand a teammate half the file.
                if let Some(line) = last_multiline
                    && rdr.get_ref().quotes % 2 == 1
                {
                    return Err(Error::input_at(
                        path,
                        Some(line),
                        "a quoted field in this record is never closed; add the closing `\"`",
                    ));
                }
                break;
            }
            Ok(true) => {}
            Err(e) => return Err(csv_error(path, &rdr, e)),
        }
        let read = rows + empty.map_or(0, |(_, n)| n) + 1;
        let line = record_line(&rdr, &record).unwrap_or(read + 1);
        rdr.get_ref().record_start.set(rdr.position().byte());
        utf8_fields(path, Some(line), &record, "field")?;
        no_nul(path, line, &headers, &record)?;
        if record.iter().all(<[u8]>::is_empty) {
            let (first, n) = empty.unwrap_or((line, 0));
            empty = Some((first, n + 1));
            continue;
        }
        // Empty records between rows are rows (an id column refuses them, as any empty id).
        if let Some((first, n)) = empty.take() {
            if let Some(col) = id_col {
                return Err(empty_id(path, first, &headers[col]));
            }
            rows += n;
        }
        rows += 1;
        check_prompt(path, line, instruction, |name| {
            column
                .get(name)
                .and_then(|i| record.get(*i))
                .map_or(0, <[u8]>::len)
        })?;
        last_multiline = record.iter().any(|f| f.contains(&b'\n')).then_some(line);
        let Some(col) = id_col else { continue };
        let id = String::from_utf8_lossy(&record[col]).into_owned();
        if id.trim().is_empty() {
            return Err(empty_id(path, line, &headers[col]));
        }
        ids.add(&id);
    }
    // As a JSON Lines input with no object: a batch of nothing is a wrong file or an export
    // that kept only the header, and refusing it leaves nothing on disk.
    if rows == 0 {
        return Err(no_rows(path, empty.map_or(0, |(_, n)| n)));
    }
    let (spool, digest, stamp) = rdr.into_inner().inner.finish(path)?;
    let table = InputTable {
        path: path.to_owned(),
        spool,
        digest,
        format: &Csv,
        delimiter,
        headers,
        id_column: id_col,
        rows,
        skipped_empty: empty.map_or(0, |(_, n)| n),
        hint,
        stamp,
    };
    ids.finish(&table)?;
    Ok(table)
}

/// The error of a row at `line` whose id column `header` is empty.
fn empty_id(path: &Path, line: u64, header: &str) -> Error {
    Error::input_at(
        path,
        Some(line),
        format!("the id column `{header}` is empty; every row needs an id"),
    )
}

/// The error of an input with a header and no row (`skipped`: the all-empty records after
/// it).
fn no_rows(path: &Path, skipped: u64) -> Error {
    let skipped = match skipped {
        0 => String::new(),
        n => format!(
            " ({n} empty record{} skipped)",
            if n == 1 { "" } else { "s" }
        ),
    };
    Error::input_at(
        path,
        None,
        format!("there are no rows, only the header{skipped}; add one row per item"),
    )
}

/// CSV (TSV, any delimiter) with a header row: the [`InputFormat`] of any input whose
/// extension no other format claims.
#[derive(Debug)]
pub(crate) struct Csv;

impl InputFormat for Csv {
    fn extensions(&self) -> &'static [&'static str] {
        &[]
    }

    fn name(&self) -> &'static str {
        "CSV"
    }

    fn has_delimiter(&self) -> bool {
        true
    }

    fn scan(
        &self,
        path: &Path,
        spool: Option<Spool>,
        delimiter: u8,
        id_column: Option<&str>,
        instruction: Option<&crate::prompt::Instruction>,
    ) -> Result<InputTable> {
        scan(path, spool, delimiter, id_column, instruction)
    }

    fn rows(&self, table: &InputTable) -> Result<Rows> {
        Ok(Box::new(CsvRows::new(table.open()?, table)?))
    }
}

/// Streaming iterator over the rows of an input file already validated by [`scan`].
pub(crate) struct CsvRows<R: Read> {
    rdr: csv::Reader<LineCounter<R>>,
    path: PathBuf,
    id_col: Option<usize>,
    width: usize,
    number: u64,
    /// Rows to yield: the scan's count (trailing all-empty records are not rows).
    limit: u64,
    record: csv::ByteRecord,
}

impl<R: Read> CsvRows<R> {
    /// Start reading `input` (the same bytes [`scan`] validated into `table`).
    pub(crate) fn new(input: R, table: &InputTable) -> Result<Self> {
        let mut rdr = reader(input, table.delimiter);
        let headers = read_headers(&table.path, &mut rdr)?;
        if headers != table.headers {
            return Err(Error::Usage(format!(
                "{}: the header changed while the batch was starting; run again",
                table.path.display()
            )));
        }
        Ok(CsvRows {
            rdr,
            path: table.path.clone(),
            id_col: table.id_column,
            width: headers.len(),
            number: 0,
            limit: table.rows,
            record: csv::ByteRecord::new(),
        })
    }
}

impl<R: Read> Iterator for CsvRows<R> {
    type Item = Result<InputRow>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.number >= self.limit {
            return None;
        }
        match self.rdr.read_byte_record(&mut self.record) {
            Ok(false) => None,
            Err(e) => Some(Err(csv_error(&self.path, &self.rdr, e))),
            Ok(true) => {
                self.number += 1;
                let line = record_line(&self.rdr, &self.record).unwrap_or(self.number + 1);
                let values = match utf8_fields(&self.path, Some(line), &self.record, "field") {
                    Ok(v) => v,
                    Err(e) => return Some(Err(e)),
                };
                debug_assert_eq!(values.len(), self.width);
                let id = match self.id_col {
                    Some(c) => values.get(c).cloned().unwrap_or_default(),
                    None => self.number.to_string(),
                };
                Some(Ok(InputRow {
                    number: self.number,
                    line,
                    id,
                    values,
                    json: None,
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_with(s: &[u8], delimiter: u8, id: Option<&str>) -> Result<InputTable> {
        let spool = Spool::read(s).expect("spooled");
        scan(Path::new("in.csv"), Some(spool), delimiter, id, None)
    }

    fn scan_str(s: &[u8], id: Option<&str>) -> Result<InputTable> {
        scan_with(s, b',', id)
    }

    fn rows(s: &[u8], id: Option<&str>) -> Vec<InputRow> {
        let t = scan_str(s, id).expect("valid");
        t.rows().expect("rows").map(|r| r.expect("row")).collect()
    }

    #[test]
    fn semicolon_and_tab_delimiters_split_fields_and_keep_commas() {
        for (d, text) in [
            (b';', "id;text\n1;a, b\n2;\"x;y\"\n"),
            (b'\t', "id\ttext\n1\ta, b\n2\tx;y\n"),
        ] {
            let t = scan_with(text.as_bytes(), d, Some("id")).expect("valid");
            assert_eq!(t.headers, vec!["id", "text"]);
            assert_eq!(t.hint, None);
            let r: Vec<InputRow> = t.rows().expect("rows").map(|r| r.expect("row")).collect();
            assert_eq!(r[0].values, vec!["1", "a, b"]);
            assert_eq!(r[1].values, vec!["2", "x;y"]);
        }
    }

    #[test]
    fn a_header_split_at_the_wrong_delimiter_gets_a_hint() {
        let t = scan_str(b"id;path\n1;a.md\n", None).expect("one column is valid");
        let hint = t.hint.expect("hint");
        assert!(hint.contains("--delimiter ';'"), "{hint}");
        let t = scan_str(b"id\tpath\n1\ta.md\n", None).expect("valid");
        assert!(t.hint.is_some_and(|h| h.contains("--delimiter '\\t'")));
        // A comma header, or one column without another delimiter, gets none.
        assert_eq!(scan_str(b"id,a;b\n1,x\n", None).expect("valid").hint, None);
        assert_eq!(scan_str(b"path\na.md\n", None).expect("valid").hint, None);
    }

    #[test]
    fn delimiters_from_flags_and_file_names() {
        let d = |f: Option<&str>, p: &str| delimiter_for("--delimiter", f, Some(Path::new(p)));
        assert_eq!(d(None, "in.csv").expect("ok"), b',');
        assert_eq!(d(None, "in.TSV").expect("ok"), b'\t');
        assert_eq!(d(Some(";"), "in.tsv").expect("ok"), b';');
        assert_eq!(d(Some("\\t"), "in.csv").expect("ok"), b'\t');
        assert_eq!(d(Some("tab"), "in.csv").expect("ok"), b'\t');
        for bad in [";;", "", "\"", "é"] {
            let e = d(Some(bad), "in.csv").expect_err(bad).to_string();
            assert!(e.contains("--delimiter"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_spool_is_read_again_from_the_start_and_copied() {
        let spool = Spool::read(&b"id\n1\n"[..]).expect("spooled");
        let mut a = String::new();
        let mut b = String::new();
        spool.reader().read_to_string(&mut a).expect("read");
        spool.reader().read_to_string(&mut b).expect("read again");
        assert_eq!((a.as_str(), b.as_str()), ("id\n1\n", "id\n1\n"));
        let dir = tempfile::tempdir().expect("tempdir");
        let copy = dir.path().join("stdin.csv");
        spool.copy_to(&copy).expect("copied");
        assert_eq!(std::fs::read(&copy).expect("read"), b"id\n1\n");
    }

    #[test]
    fn bom_crlf_and_quoted_fields_are_carried_exactly() {
        let text = "\u{feff}id,text\r\n1,\"a, b\"\r\n2,\"line1\r\nline2 \"\"q\"\"\"\r\n";
        let r = rows(text.as_bytes(), Some("id"));
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].values, vec!["1", "a, b"]);
        assert_eq!(r[1].values[1], "line1\r\nline2 \"q\"");
        assert_eq!(r[1].line, 3);
        let t = scan_str(text.as_bytes(), Some("id")).expect("valid");
        assert_eq!(t.headers, vec!["id", "text"]);
    }

    #[test]
    fn lines_are_right_for_lf_crlf_and_multiline_fields() {
        for nl in ["\n", "\r\n"] {
            let text = format!("id,t{nl}1,x{nl}2,\"a{nl}b{nl}c\"{nl}3,y{nl}");
            let r = rows(text.as_bytes(), Some("id"));
            let lines: Vec<u64> = r.iter().map(|r| r.line).collect();
            assert_eq!(lines, vec![2, 3, 6], "newline {nl:?}");
            let bad = format!("id,t{nl}1,x{nl}2,\"a{nl}b\"{nl}3{nl}");
            assert!(
                err(bad.as_bytes(), None).starts_with("in.csv:5:"),
                "newline {nl:?}"
            );
        }
    }

    #[test]
    fn row_number_is_the_id_without_an_id_column() {
        let r = rows(b"path\na.md\nb.md\n", None);
        assert_eq!(r[0].id, "1");
        assert_eq!(r[1].id, "2");
    }

    fn err(s: &[u8], id: Option<&str>) -> String {
        scan_str(s, id).expect_err("must be rejected").to_string()
    }

    #[test]
    fn ragged_row_names_its_line() {
        let e = err(b"a,b\n1,2\n3\n", None);
        assert!(e.starts_with("in.csv:3:"), "{e}");
        assert!(e.contains("1 fields but the header has 2"), "{e}");
    }

    #[test]
    fn duplicate_headers_are_rejected() {
        assert!(err(b"a,a\n1,2\n", None).contains("duplicate column name `a`"));
    }

    #[test]
    fn missing_id_column_lists_columns() {
        let e = err(b"a,b\n1,2\n", Some("id"));
        assert!(e.contains("no id column `id`") && e.contains("a, b"), "{e}");
    }

    #[test]
    fn empty_and_duplicate_ids_are_rejected_with_lines() {
        // Between rows (after the last one it is a spreadsheet's leftover, skipped).
        let e = err(b"id\nx\n\"\"\ny\n", Some("id"));
        assert!(e.starts_with("in.csv:3:") && e.contains("empty"), "{e}");
        let e = err(b"id\nx\ny\nx\n", Some("id"));
        assert!(
            e.starts_with("in.csv:4:") && e.contains("first on line 2"),
            "{e}"
        );
    }

    #[test]
    fn trailing_all_empty_records_are_skipped_and_counted_not_rows() {
        let t = scan_str(b"id,a,b\n1,x,y\n,,\n,,\r\n,,\n", Some("id")).expect("valid");
        assert_eq!((t.rows, t.skipped_empty), (1, 3));
        let r: Vec<InputRow> = t.rows().expect("rows").map(|r| r.expect("row")).collect();
        assert_eq!(r.len(), 1);
        // Without an id column, empty records between rows stay rows (numbers unchanged).
        let r = rows(b"a,b\nx,y\n,\nz,w\n,\n", None);
        assert_eq!(
            r.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["1", "2", "3"]
        );
        // Only the header (and leftovers): refused, as an empty JSON Lines input is.
        let e = err(b"id,a\n,\n", Some("id"));
        assert!(
            e.contains("no rows, only the header (1 empty record skipped)"),
            "{e}"
        );
        assert!(err(b"id,a\n", None).contains("no rows"));
    }

    #[test]
    fn a_nul_byte_is_refused_with_its_line_and_column() {
        let e = err(b"id,note\n1,ok\n2,bad\x00byte\n", Some("id"));
        assert!(
            e.starts_with("in.csv:3:") && e.contains("column 2 (`note`) holds a NUL byte"),
            "{e}"
        );
    }

    #[test]
    fn non_utf8_bytes_say_how_to_fix() {
        let e = err(b"id,t\n1,caf\xe9\n", Some("id"));
        assert!(e.starts_with("in.csv:2:") && e.contains("CSV UTF-8"), "{e}");
    }

    #[test]
    fn an_unclosed_quote_is_reported_where_its_record_starts() {
        let e = err(b"id,t\n1,ok\n2,\"open\n3,x\n", None);
        assert!(
            e.starts_with("in.csv:3:") && e.contains("never closed"),
            "{e}"
        );
        // An inch mark in an unquoted field is accepted, as csv readers do.
        assert!(scan_str(b"id,size\n1,5\" screen\n", None).is_ok());
    }

    #[test]
    fn empty_file_has_no_header() {
        assert!(err(b"", None).contains("no header row"));
    }
}
