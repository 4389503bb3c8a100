//! The JSON Schema a report's `output` must match (`output_schema`), loaded and compiled
//! once before the run.

use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};

/// Load and compile a JSON Schema given inline or as a file.
///
/// Errors: an unreadable file, invalid JSON, or an invalid schema (exit 2, naming the file).
pub(crate) fn load_schema(
    value: Option<Value>,
    path: Option<&Path>,
) -> Result<Option<(Value, jsonschema::Validator)>> {
    let (schema, origin) = match (value, path) {
        (Some(v), _) => (v, "output_schema".to_string()),
        (None, Some(p)) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Error::read_input("the output schema", p, e))?;
            let v: Value = serde_json::from_str(&text).map_err(|e| {
                Error::input_at(
                    p,
                    Some(e.line() as u64),
                    format!("the output schema is not valid JSON: {e}"),
                )
            })?;
            (v, p.display().to_string())
        }
        (None, None) => return Ok(None),
    };
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| Error::Usage(format!("{origin}: not a valid JSON Schema: {e}")))?;
    Ok(Some((schema, validator)))
}
