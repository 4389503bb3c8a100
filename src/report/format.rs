//! The report format (seed `task-management-protocol.md`, completion metadata):
//! `{"id", "status": "completed"|"blocked"|"failed", "summary", "files_modified": [],
//! "files_created": [], "tests": "passed"|"failed"|"added"|"none", "blocker",
//! "next_steps": [], "output": {…}}`. It is read from the `RUNNER_REPORT` file; failing that,
//! from the agent's final text: the whole text, else a single fenced json block, else the last
//! complete JSON object. Parsing only: what a report means for the item is
//! [`super::verdict`]'s.

use serde::Serialize;
use serde_json::Value;

/// Largest report file read, bytes. A report is a summary; large results belong in files
/// the report names.
pub(crate) const MAX_REPORT_BYTES: u64 = 1024 * 1024;

/// A valid report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Report {
    /// `completed`, `blocked` or `failed`.
    pub status: String,
    /// One line: what was done.
    pub summary: String,
    /// Files changed.
    pub files_modified: Vec<String>,
    /// Files created.
    pub files_created: Vec<String>,
    /// `blocker` text, when blocked.
    pub blocker: Option<String>,
    /// `tests`: `passed`, `failed`, `added` or `none`, when given.
    pub tests: Option<String>,
    /// `output`: the structured result (`Value::Null` when absent).
    pub output: Value,
    /// The whole report as written.
    pub raw: Value,
}

/// Why no valid report was found for an attempt; its text is the verdict's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReportError {
    /// Nothing in `RUNNER_REPORT` and no JSON object in the agent's final text.
    #[error("no report: nothing was written to RUNNER_REPORT and the output holds no JSON report")]
    Missing,
    /// The report file could not be used: too large, not UTF-8, not JSON.
    #[error("{0}")]
    Unreadable(String),
    /// A report was found but breaks the format: which field, and the rule.
    #[error("{0}")]
    Invalid(String),
}

/// Where a report was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReportSource {
    /// The `RUNNER_REPORT` file.
    File,
    /// The agent's final text.
    FinalText,
}

fn fenced_json_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let Some(nl) = after.find('\n') else { break };
        let lang = after[..nl].trim();
        let body = &after[nl + 1..];
        let Some(end) = body.find("```") else { break };
        if lang.eq_ignore_ascii_case("json") {
            blocks.push(&body[..end]);
        }
        rest = &body[end + 3..];
    }
    blocks
}

/// Longest tail of the final text searched for the last JSON object, bytes.
const LAST_OBJECT_WINDOW: usize = 256 * 1024;
/// Most parse attempts spent looking for the last JSON object (bounds the work on
/// brace-heavy output).
const LAST_OBJECT_ATTEMPTS: usize = 4096;

/// The last complete `{...}` in `text` that parses as a JSON object, searched in the last
/// [`LAST_OBJECT_WINDOW`] bytes with at most [`LAST_OBJECT_ATTEMPTS`] parses.
fn last_json_object(text: &str) -> Option<Value> {
    let mut from = text.len().saturating_sub(LAST_OBJECT_WINDOW);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let text = &text[from..];
    let mut attempts = 0;
    let mut end = text.len();
    while let Some(close) = text[..end].rfind('}') {
        let mut start = close;
        while let Some(open) = text[..start].rfind('{') {
            attempts += 1;
            if attempts > LAST_OBJECT_ATTEMPTS {
                return None;
            }
            if let Ok(v) = serde_json::from_str::<Value>(&text[open..=close])
                && v.is_object()
            {
                return Some(v);
            }
            start = open;
        }
        end = close;
    }
    None
}

/// Find a JSON object in an agent's final text: the whole text, else the single fenced
/// ```` ```json ```` block, else the last complete JSON object.
pub(crate) fn extract_json(text: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(text.trim())
        && v.is_object()
    {
        return Some(v);
    }
    let blocks = fenced_json_blocks(text);
    if blocks.len() == 1
        && let Ok(v) = serde_json::from_str::<Value>(blocks[0].trim())
        && v.is_object()
    {
        return Some(v);
    }
    last_json_object(text)
}

fn strings(v: &Value, key: &str) -> Result<Vec<String>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("`{key}` must be a list of strings"))
            })
            .collect(),
        Some(_) => Err(format!("`{key}` must be a list of strings")),
    }
}

fn id_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Validate a report object for the item `ids` names: its id, and for a stage item its
/// row's id too (a report may name either; [`crate::item::StageOf`]).
///
/// Errors (one line): not an object; `id` present and different; `status` not one of
/// `completed`/`blocked`/`failed`; `summary` missing or not a string; list fields that are
/// not lists of strings; `tests` not one of its values.
pub(crate) fn validate(value: Value, ids: &[&str]) -> Result<Report, ReportError> {
    let expected_id = ids.first().copied().unwrap_or_default();
    let Value::Object(ref map) = value else {
        return Err(ReportError::Invalid(
            "the report is not a JSON object".into(),
        ));
    };
    if let Some(id) = map.get("id").filter(|v| !v.is_null()) {
        match id_text(id) {
            Some(id) if ids.contains(&id.as_str()) => {}
            _ => {
                return Err(ReportError::Invalid(format!(
                    "the report is for id {id}, not `{expected_id}`"
                )));
            }
        }
    }
    let status = match map.get("status").and_then(Value::as_str) {
        Some(s @ ("completed" | "blocked" | "failed")) => s.to_owned(),
        Some(s) => {
            return Err(ReportError::Invalid(format!(
                "report status `{s}` is not completed, blocked or failed"
            )));
        }
        None => return Err(ReportError::Invalid("the report has no `status`".into())),
    };
    let summary = match map.get("summary") {
        Some(Value::String(s)) => s.trim().to_owned(),
        _ => {
            return Err(ReportError::Invalid(
                "the report has no `summary` string".into(),
            ));
        }
    };
    if let Some(t) = map.get("tests").filter(|v| !v.is_null()) {
        match t.as_str() {
            Some("passed" | "failed" | "added" | "none") => {}
            _ => {
                return Err(ReportError::Invalid(format!(
                    "report `tests` is {t}, not passed, failed, added or none"
                )));
            }
        }
    }
    // Numbers the runner acts on (the budget, the rate-limit pause) are never ignored
    // silently when they are not numbers.
    for key in ["cost_usd", "retry_after_s"] {
        if let Some(v) = map.get(key).filter(|v| !v.is_null())
            && !v.as_f64().is_some_and(|n| n.is_finite() && n >= 0.0)
        {
            return Err(ReportError::Invalid(format!(
                "report `{key}` is {v}, not a number ≥ 0{}",
                match key {
                    "cost_usd" => " (USD)",
                    _ => " (seconds)",
                }
            )));
        }
    }
    let files_modified = strings(&value, "files_modified").map_err(ReportError::Invalid)?;
    let files_created = strings(&value, "files_created").map_err(ReportError::Invalid)?;
    strings(&value, "next_steps").map_err(ReportError::Invalid)?;
    let blocker = map
        .get("blocker")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let output = map.get("output").cloned().unwrap_or(Value::Null);
    let tests = map.get("tests").and_then(Value::as_str).map(str::to_owned);
    Ok(Report {
        status,
        summary,
        files_modified,
        files_created,
        blocker,
        tests,
        output,
        raw: value,
    })
}

/// Find and validate the report: the report file's text first, then the final text (each
/// repaired first: [`crate::json_text`]).
///
/// Errors: the file is not JSON (and the final text holds none), no report anywhere, or the
/// report found breaks the format.
pub(crate) fn find(
    file_text: Option<&str>,
    final_text: Option<&str>,
    ids: &[&str],
) -> Result<(Report, ReportSource), ReportError> {
    let mut problem = ReportError::Missing;
    // A byte order mark and escaped lone surrogates are no reason to fail done work.
    let file_text = file_text.map(crate::json_text::repaired);
    let final_text = final_text.map(crate::json_text::repaired);
    let final_text = final_text.as_deref();
    if let Some(text) = file_text.as_deref() {
        match serde_json::from_str::<Value>(text.trim()) {
            Ok(v) => return validate(v, ids).map(|r| (r, ReportSource::File)),
            Err(e) => {
                problem = ReportError::Unreadable(format!("the report file is not JSON ({e})"))
            }
        }
    }
    if let Some(text) = final_text
        && let Some(v) = extract_json(text)
    {
        return validate(v, ids).map(|r| (r, ReportSource::FinalText));
    }
    Err(problem)
}

/// Most schema errors named in a reason.
const SCHEMA_ERRORS_NAMED: usize = 3;

/// The ways `report`'s `output` breaks `validator` (the compiled `output_schema`), as one
/// line: at most three errors, each prefixed by its JSON Pointer path (`/n: ...`) when not at
/// the root, joined by `; `. `None` when it matches, and for a report that is not
/// `completed` (its output is not held to the schema).
pub(crate) fn schema_errors(report: &Report, validator: &jsonschema::Validator) -> Option<String> {
    if report.status != "completed" {
        return None;
    }
    let errs: Vec<String> = validator
        .iter_errors(&report.output)
        .take(SCHEMA_ERRORS_NAMED)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    (!errs.is_empty()).then(|| errs.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OK: &str = r#"{"id":"7","status":"completed","summary":"did it","output":{"n":1}}"#;

    #[test]
    fn extract_whole_fenced_or_last_object() {
        assert_eq!(
            extract_json(OK).and_then(|v| v.get("id").cloned()),
            Some(json!("7"))
        );
        let fenced = format!("Done.\n```json\n{OK}\n```\nbye");
        assert!(extract_json(&fenced).is_some());
        let trailing = format!("I did {{some}} things {{\"a\":1}} then\n{OK}\n");
        assert_eq!(
            extract_json(&trailing).and_then(|v| v.get("summary").cloned()),
            Some(json!("did it"))
        );
        assert!(extract_json("no json here { nope").is_none());
    }

    #[test]
    fn two_fenced_blocks_fall_back_to_last_object() {
        let text = "```json\n{\"status\":\"failed\",\"summary\":\"a\"}\n```\n```json\n{\"status\":\"completed\",\"summary\":\"b\"}\n```\n";
        let v = extract_json(text).expect("object");
        assert_eq!(v["summary"], "b");
    }

    #[test]
    fn validation_rules() {
        assert!(validate(json!({"status":"completed","summary":"x"}), &["1"]).is_ok());
        assert!(validate(json!({"id":1,"status":"completed","summary":"x"}), &["1"]).is_ok());
        // A stage's report may name its row.
        let stage = ["a.rs/audit", "a.rs"];
        assert!(
            validate(
                json!({"id":"a.rs","status":"completed","summary":"x"}),
                &stage
            )
            .is_ok()
        );
        assert!(
            validate(
                json!({"id":"b.rs","status":"completed","summary":"x"}),
                &stage
            )
            .is_err()
        );
        let e = validate(json!({"id":"2","status":"completed","summary":"x"}), &["1"])
            .expect_err("wrong id");
        assert!(e.to_string().contains("not `1`"), "{e}");
        assert!(validate(json!({"status":"done","summary":"x"}), &["1"]).is_err());
        let e = validate(
            json!({"status":"completed","summary":"x","cost_usd":"0.5"}),
            &["1"],
        )
        .expect_err("a cost that is not a number");
        assert!(e.to_string().contains("`cost_usd` is \"0.5\""), "{e}");
        assert!(
            validate(
                json!({"status":"failed","summary":"x","retry_after_s":-1}),
                &["1"]
            )
            .is_err()
        );
        assert!(
            validate(
                json!({"status":"completed","summary":"x","cost_usd":0.5,"retry_after_s":null}),
                &["1"]
            )
            .is_ok()
        );
        assert!(validate(json!({"status":"completed"}), &["1"]).is_err());
        assert!(
            validate(
                json!({"status":"completed","summary":"x","tests":"maybe"}),
                &["1"]
            )
            .is_err()
        );
        assert!(
            validate(
                json!({"status":"completed","summary":"x","files_modified":"a"}),
                &["1"]
            )
            .is_err()
        );
    }

    #[test]
    fn report_file_wins_over_final_text() {
        let (r, src) = find(
            Some(OK),
            Some("{\"status\":\"failed\",\"summary\":\"no\"}"),
            &["7"],
        )
        .expect("found");
        assert_eq!(src, ReportSource::File);
        assert_eq!(r.summary, "did it");
        let (_, src) = find(None, Some(OK), &["7"]).expect("found");
        assert_eq!(src, ReportSource::FinalText);
        assert!(
            find(None, Some("all done!"), &["7"])
                .expect_err("none")
                .to_string()
                .starts_with("no report")
        );
    }
}
