//! JSON Lines input (`--input rows.jsonl` or `.ndjson`; <https://jsonlines.org>, the format of
//! the OpenAI Batch API's input files): one JSON object per line, each a row.
//!
//! The columns are the objects' keys in the order they first appear in the file; a row
//! without a key has it empty. In `{col}` a string is its text, a number or a boolean its
//! JSON text, `null` empty, and an array or object its compact JSON (`{"a":[1,2]}`). Blank
//! lines are skipped (they are not rows); a line that is not a JSON object is an input error
//! naming its line, as a bad CSV record is. The rows keep their objects
//! ([`InputRow::json`]), so a JSON Lines output carries their values with their types.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::source::input::{
    InputFormat, InputRow, InputTable, MAX_COLUMNS, MAX_ROW_BYTES, Rows, Snapshotting, Spool,
    check_prompt, row_too_large, too_many_columns,
};

/// How messages name the input.
const WHAT: &str = "the input JSON Lines file";

/// Read and check every line of `path` (or of `spool`, the rows read from stdin) once, before
/// anything is written, keeping a snapshot of the bytes ([`Snapshotting`]); `id_column` names
/// the key that identifies a row (`None`: the row number).
///
/// Errors ([`Error::Input`], naming `path` and the line): a line that is not JSON or not an
/// object, bytes that are not UTF-8, no rows, an id key that no row has, a row whose id is
/// missing, empty or not a string or number, a duplicate id; a line over [`MAX_ROW_BYTES`],
/// more than [`MAX_COLUMNS`] keys in all, a task text (`instruction` with the row's values)
/// over [`crate::source::input::MAX_PROMPT_BYTES`].
pub(crate) fn scan(
    path: &Path,
    spool: Option<Spool>,
    id_column: Option<&str>,
    instruction: Option<&crate::prompt::Instruction>,
) -> Result<InputTable> {
    let mut input = BufReader::new(Snapshotting::open(WHAT, path, spool)?);
    let mut headers: Vec<String> = Vec::new();
    let mut known: HashSet<String> = HashSet::new();
    let mut ids = crate::source::input::IdCheck::default();
    // Rows without the id key, by line: an error once the key is known to be a column.
    let mut without_id: Option<u64> = None;
    let mut rows = 0u64;
    let mut line_no = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut input)
            .take(MAX_ROW_BYTES + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::read_input(WHAT, path, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if n as u64 > MAX_ROW_BYTES {
            return Err(row_too_large(path, Some(line_no)));
        }
        let Some(object) = parse_line(path, line_no, &line)? else {
            continue;
        };
        rows += 1;
        for key in object.keys() {
            if known.insert(key.clone()) {
                headers.push(key.clone());
            }
        }
        if headers.len() > MAX_COLUMNS {
            return Err(too_many_columns(path, Some(line_no), headers.len()));
        }
        check_prompt(path, line_no, instruction, |name| {
            cell_len(object.get(name))
        })?;
        let Some(col) = id_column else { continue };
        match object.get(col).map(id_text) {
            None => {
                without_id.get_or_insert(line_no);
            }
            Some(None) => {
                return Err(Error::input_at(
                    path,
                    Some(line_no),
                    format!("the id `{col}` must be a string or a number"),
                ));
            }
            Some(Some(id)) if id.trim().is_empty() => {
                return Err(Error::input_at(
                    path,
                    Some(line_no),
                    format!("the id `{col}` is empty; every row needs an id"),
                ));
            }
            Some(Some(id)) => ids.add(&id),
        }
    }
    if rows == 0 {
        return Err(Error::input_at(
            path,
            None,
            "there are no rows; give one JSON object per line",
        ));
    }
    let id_index = match id_column {
        None => None,
        Some(col) => match headers.iter().position(|h| h == col) {
            Some(i) => {
                if let Some(line) = without_id {
                    return Err(Error::input_at(
                        path,
                        Some(line),
                        format!("this row has no `{col}`; every row needs an id"),
                    ));
                }
                Some(i)
            }
            None => {
                return Err(Error::input_at(
                    path,
                    None,
                    format!(
                        "no row has the id key `{col}`{}; the keys are: {}",
                        crate::suggest::did_you_mean(col, headers.iter().map(String::as_str)),
                        headers.join(", ")
                    ),
                ));
            }
        },
    };
    let (spool, digest, stamp) = input.into_inner().finish(path)?;
    let table = InputTable {
        path: path.to_owned(),
        spool,
        digest,
        format: &Jsonl,
        delimiter: b',',
        headers,
        id_column: id_index,
        rows,
        skipped_empty: 0,
        hint: None,
        stamp,
    };
    ids.finish(&table)?;
    Ok(table)
}

/// One line: `None` when it is blank, else its object.
///
/// Errors: not UTF-8, not JSON, or JSON that is not an object (exit 2, naming the line).
fn parse_line(path: &Path, line_no: u64, bytes: &[u8]) -> Result<Option<Map<String, Value>>> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        Error::input_at(
            path,
            Some(line_no),
            "this line is not UTF-8; save the file as UTF-8",
        )
    })?;
    // A UTF-8 BOM at the start of the file is not part of the first object.
    let text = if line_no == 1 {
        text.trim_start_matches('\u{feff}')
    } else {
        text
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => Ok(Some(object)),
        Ok(other) => Err(Error::input_at(
            path,
            Some(line_no),
            format!(
                "this line is a JSON {}, not an object; give one object per line ({{\"key\": \"value\", …}})",
                kind(&other)
            ),
        )),
        Err(e) => Err(Error::input_at(
            path,
            Some(line_no),
            format!("this line is not JSON ({e}); give one object per line, each on one line"),
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A row's id from its value: a string as it is, a number as its JSON text; `None` for
/// anything else.
fn id_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A value as `{col}` shows it: a string as its text, `null` empty, anything else as its
/// compact JSON.
pub(crate) fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The length in bytes of [`cell`] of `v`, without copying a string.
fn cell_len(v: Option<&Value>) -> usize {
    match v {
        Some(Value::String(s)) => s.len(),
        other => cell(other).len(),
    }
}

/// JSON Lines (`.jsonl`, `.ndjson`): the [`InputFormat`] of one JSON object per line.
#[derive(Debug)]
pub(crate) struct Jsonl;

impl InputFormat for Jsonl {
    fn extensions(&self) -> &'static [&'static str] {
        &["jsonl", "ndjson"]
    }

    fn name(&self) -> &'static str {
        "JSON Lines"
    }

    fn has_delimiter(&self) -> bool {
        false
    }

    fn scan(
        &self,
        path: &Path,
        spool: Option<Spool>,
        _delimiter: u8,
        id_column: Option<&str>,
        instruction: Option<&crate::prompt::Instruction>,
    ) -> Result<InputTable> {
        scan(path, spool, id_column, instruction)
    }

    fn rows(&self, table: &InputTable) -> Result<Rows> {
        Ok(Box::new(JsonlRows::new(table.open()?, table)))
    }
}

/// The rows of a scanned JSON Lines input, one at a time.
pub(crate) struct JsonlRows {
    input: BufReader<Box<dyn Read + Send>>,
    path: PathBuf,
    headers: Vec<String>,
    id_col: Option<usize>,
    line_no: u64,
    number: u64,
    line: Vec<u8>,
}

impl JsonlRows {
    /// Start reading `input` (the bytes [`scan`] checked into `table`).
    pub(crate) fn new(input: Box<dyn Read + Send>, table: &InputTable) -> JsonlRows {
        JsonlRows {
            input: BufReader::new(input),
            path: table.path.clone(),
            headers: table.headers.clone(),
            id_col: table.id_column,
            line_no: 0,
            number: 0,
            line: Vec::new(),
        }
    }
}

impl Iterator for JsonlRows {
    type Item = Result<InputRow>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.line.clear();
            match self.input.read_until(b'\n', &mut self.line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(Error::read_input(WHAT, &self.path, e))),
            }
            self.line_no += 1;
            let object = match parse_line(&self.path, self.line_no, &self.line) {
                Ok(Some(o)) => o,
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            };
            self.number += 1;
            let values: Vec<String> = self.headers.iter().map(|h| cell(object.get(h))).collect();
            let id = match self.id_col {
                Some(c) => values[c].clone(),
                None => self.number.to_string(),
            };
            return Some(Ok(InputRow {
                number: self.number,
                line: self.line_no,
                id,
                values,
                json: Some(object),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_str(s: &str, id: Option<&str>) -> Result<InputTable> {
        let spool = Spool::read(s.as_bytes()).expect("spooled");
        scan(Path::new("rows.jsonl"), Some(spool), id, None)
    }

    fn rows(s: &str, id: Option<&str>) -> Vec<InputRow> {
        let t = scan_str(s, id).expect("valid");
        t.rows().expect("rows").map(|r| r.expect("row")).collect()
    }

    #[test]
    fn keys_become_columns_in_first_seen_order_and_nested_values_compact_json() {
        let t = scan_str(
            "{\"id\":\"a\",\"n\":1}\n\n{\"id\":\"b\",\"tags\":[\"x\",\"y\"],\"meta\":{\"k\":null}}\n",
            Some("id"),
        )
        .expect("valid");
        assert_eq!(t.headers, ["id", "n", "tags", "meta"]);
        assert_eq!(t.rows, 2);
        let r = rows(
            "{\"id\":\"a\",\"n\":1}\n\n{\"id\":\"b\",\"tags\":[\"x\",\"y\"],\"meta\":{\"k\":null}}\n",
            Some("id"),
        );
        assert_eq!(r[0].values, ["a", "1", "", ""]);
        assert_eq!(r[1].values, ["b", "", "[\"x\",\"y\"]", "{\"k\":null}"]);
        assert_eq!((r[1].id.as_str(), r[1].line, r[1].number), ("b", 3, 2));
        assert_eq!(
            r[1].json.as_ref().map(|o| o["tags"].clone()),
            Some(serde_json::json!(["x", "y"]))
        );
    }

    #[test]
    fn numbers_are_ids_and_the_row_number_is_the_id_without_an_id_key() {
        let r = rows("{\"n\":7}\n{\"n\":8}", Some("n"));
        assert_eq!([r[0].id.as_str(), r[1].id.as_str()], ["7", "8"]);
        let r = rows("{\"n\":7}\n{\"n\":7}", None);
        assert_eq!([r[0].id.as_str(), r[1].id.as_str()], ["1", "2"]);
    }

    #[test]
    fn bad_lines_name_their_line_and_what_to_do() {
        let cases = [
            ("{\"a\":1}\n{\"a\":2\n", "rows.jsonl:2", "not JSON"),
            (
                "{\"a\":1}\n[1,2]\n",
                "rows.jsonl:2",
                "a JSON array, not an object",
            ),
            ("\n\n", "rows.jsonl", "no rows"),
            (
                "{\"id\":\"x\"}\n{\"id\":\"x\"}\n",
                "rows.jsonl:2",
                "duplicate id `x` (first on line 1)",
            ),
            (
                "{\"id\":\"x\"}\n{\"other\":1}\n",
                "rows.jsonl:2",
                "has no `id`",
            ),
            (
                "{\"id\":\"x\"}\n{\"id\":\"  \"}\n",
                "rows.jsonl:2",
                "is empty",
            ),
            (
                "{\"id\":{\"a\":1}}\n",
                "rows.jsonl:1",
                "must be a string or a number",
            ),
            (
                "{\"ID\":\"x\"}\n",
                "rows.jsonl",
                "no row has the id key `id`",
            ),
        ];
        for (input, at, says) in cases {
            let e = scan_str(input, Some("id")).expect_err(input).to_string();
            assert!(e.contains(at) && e.contains(says), "{input:?}: {e}");
        }
    }
}
