//! The tools' JSON Schemas, as plain JSON Schema clients take them (issue 51): generated from
//! the argument types by `schemars` (draft 2020-12, every subschema inlined, so no `$ref` a
//! client must resolve), then made plain — an optional field is its type alone (no
//! `["T","null"]`, no `null` in an `enum`: leaving it out is how it is omitted), no
//! non-standard `format` (`uint32`, `uint64`: the bound becomes a `maximum`), no `$schema`
//! (the MCP default dialect is 2020-12, and draft-07 clients read the rest as well), and no
//! field but those listed (`additionalProperties: false`). The same schema checks each
//! call's arguments ([`crate::mcp::params::Strict`]). Output schemas are written here by
//! hand: each tool's `structuredContent`, an object whose fields are listed.

use std::sync::Arc;

use rmcp::model::JsonObject;
use rmcp::schemars;
use serde_json::{Value, json};

/// The plain input schema of the arguments `T` (see the module's guide).
pub(crate) fn input<T: schemars::JsonSchema>() -> Arc<JsonObject> {
    Arc::new(input_object::<T>())
}

/// [`input`], as the object itself.
pub(crate) fn input_object<T: schemars::JsonSchema>() -> JsonObject {
    let settings =
        schemars::generate::SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).unwrap_or_else(|_| json!({}));
    plain(&mut value);
    let mut object = match value {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    for key in ["$schema", "title", "description"] {
        object.remove(key);
    }
    object.insert("type".into(), json!("object"));
    object.entry("properties").or_insert_with(|| json!({}));
    object.insert("additionalProperties".into(), json!(false));
    object
}

/// The names of the fields of `schema` (its `properties`).
pub(crate) fn fields(schema: &JsonObject) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// Make `v` and every schema inside it plain (see the module's guide).
fn plain(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::Array(types)) = o.get("type") {
                let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                let one = match kept.as_slice() {
                    [t] => t.clone(),
                    _ => Value::Array(kept),
                };
                o.insert("type".into(), one);
            }
            if let Some(Value::Array(values)) = o.get("enum") {
                let kept: Vec<Value> = values.iter().filter(|x| !x.is_null()).cloned().collect();
                o.insert("enum".into(), Value::Array(kept));
            }
            if let Some(Value::Array(any)) = o.get("anyOf") {
                let kept: Vec<Value> = any
                    .iter()
                    .filter(|s| s.get("type") != Some(&json!("null")))
                    .cloned()
                    .collect();
                o.remove("anyOf");
                match kept.as_slice() {
                    [Value::Object(only)] => {
                        for (key, value) in only {
                            o.entry(key.clone()).or_insert_with(|| value.clone());
                        }
                    }
                    _ => {
                        o.insert("anyOf".into(), Value::Array(kept));
                    }
                }
            }
            // A unit enum (each variant a documented `const`): a plain `enum`.
            if let Some(Value::Array(one_of)) = o.get("oneOf") {
                let consts: Option<Vec<Value>> =
                    one_of.iter().map(|v| v.get("const").cloned()).collect();
                if let Some(consts) = consts.filter(|c| c.iter().all(Value::is_string)) {
                    o.remove("oneOf");
                    o.insert("type".into(), json!("string"));
                    o.insert("enum".into(), Value::Array(consts));
                }
            }
            match o.get("format").and_then(Value::as_str) {
                Some("uint32") => {
                    o.remove("format");
                    o.entry("maximum").or_insert(json!(u32::MAX));
                }
                Some("uint64" | "uint" | "int64" | "int32" | "uint8" | "uint16") => {
                    o.remove("format");
                }
                _ => {}
            }
            if o.get("default") == Some(&Value::Null) {
                o.remove("default");
            }
            for (_, child) in o.iter_mut() {
                plain(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(plain),
        _ => {}
    }
}

/// An output schema: an object with `properties` (each optional unless in `required`), other
/// fields allowed (fields may be added).
fn object(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut o = JsonObject::new();
    o.insert("type".into(), json!("object"));
    o.insert("properties".into(), properties);
    if !required.is_empty() {
        o.insert("required".into(), json!(required));
    }
    Arc::new(o)
}

/// `todo_list`: `runner list --format json` ([`crate::ui::inbox::json`]).
pub(crate) fn listing_output() -> Arc<JsonObject> {
    let item = json!({
        "type": "object",
        "properties": {
            "number": {"type": "integer", "description": "Its number in the inbox now (numbers shift after every resolve)."},
            "id": {"type": "string", "description": "Its stable id, which `todo_resolve` takes."},
            "section": {"type": "string"},
            "mark": {"type": "string"},
            "title": {"type": "string"},
            "checkpoint": {"description": "Its checkpoint file in the store (a string), or null."},
            "after": {"type": "array", "items": {"type": "string"}},
            "continuation": {"type": "string"},
            "note": {"description": "The runner's note (a string), or null."}
        },
        "required": ["number", "id", "title"]
    });
    object(
        json!({
            "v": {"type": "integer"},
            "inbox": {"type": "string", "description": "The inbox file."},
            "items": {"type": "array", "items": item, "description": "The open items of the inbox."},
            "batches": {"type": "array", "items": {"type": "object"}, "description": "The batch files with unticked items."}
        }),
        &["v", "inbox", "items", "batches"],
    )
}

/// `todo_add`.
pub(crate) fn added_output() -> Arc<JsonObject> {
    object(
        json!({
            "number": {"type": "integer", "description": "Its number in the inbox now."},
            "id": {"type": "string", "description": "Its stable id, which `todo_resolve` takes."},
            "inbox": {"type": "string"},
            "checkpoint": {"description": "Its checkpoint file in the store (a string); null for an idea."},
            "text": {"type": "string", "description": "What `runner add` prints."}
        }),
        &["number", "id", "inbox", "text"],
    )
}

/// `todo_resolve` and `batch_run`: the team started (in the background), or the run's end
/// (`wait`).
pub(crate) fn run_output() -> Arc<JsonObject> {
    object(
        json!({
            "team": {"type": "string", "description": "The team (background start)."},
            "workspace": {"type": "string", "description": "Its workspace (background start)."},
            "total": {"description": "How many items it runs (an integer; null when not known)."},
            "pid": {"type": "integer", "description": "The server's process, which runs the team."},
            "exit_code": {"type": "integer", "description": "At the run's end: 0 every item completed, 1 some did not, 130 interrupted."},
            "interrupted": {"type": "boolean"},
            "events": {"type": "array", "items": {"type": "object"}, "description": "At the run's end: its run_finished and run_ended events, as the journal's lines."},
            "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}, "title": {"type": "string"}}}, "description": "todo_resolve: the items it moved to the batch file."},
            "follow": {"type": "object", "properties": {"tool": {"type": "string"}, "team": {"type": "string"}, "command": {"type": "string"}}, "description": "How to follow the team: the `status` tool with this `team`, or this command."},
            "page_url": {"type": "string", "description": "With `serve`: the run's live page, `http://127.0.0.1:PORT/?token=…` (the token is required; read-only; the page stops when the run ends)."},
            "warnings": {"type": "array", "items": {"type": "string"}, "description": "What the run warned of (as `warning: …` on a terminal): at its end all of them, at a background start those said by then. The workspace's journal keeps every one."},
            "winners": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}, "status": {"type": "string"}, "winner": {"type": "string"}, "rule": {"type": "string"}, "candidates": {"type": "string"}}}, "description": "batch_run with best_of, at the run's end: each item this run decided — its status, its winner (`1-a.c2 (claude)`: the candidate's teammate, runner and model; empty when none), the rule that chose it or why none did, and how many candidates passed (`2/3 passed`). the `show` tool lists any item's candidates later."},
            "next": {"type": "string"}
        }),
        &[],
    )
}

/// `status`.
pub(crate) fn status_output() -> Arc<JsonObject> {
    object(
        json!({
            "text": {"type": "string", "description": "What `runner status --brief` prints."},
            "exit_code": {"type": "integer", "description": "0 while nothing has gone wrong, 1 when an item did not complete."},
            "state": {"type": "string", "description": "running, finished, interrupted, …"},
            "counts": {"type": "object", "description": "The team's items by status, those a replay left out included (as the text's first line counts them)."},
            "winners": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}, "status": {"type": "string"}, "winner": {"type": "string"}, "rule": {"type": "string"}, "candidates": {"type": "string"}}}, "description": "A team run with best_of: each finished item the status lists that fanned out — its status, its winner (`1-a.c2 (claude)`; empty when none), the rule that chose it or why none did, and how many candidates passed (`2/3 passed`), as batch_run's waited answer gives them. The `show` tool lists an item's candidates."}
        }),
        &["text", "exit_code"],
    )
}

/// `show`.
pub(crate) fn show_output() -> Arc<JsonObject> {
    object(
        json!({"text": {"type": "string", "description": "What `runner show` prints."}}),
        &["text"],
    )
}

/// `stop`.
pub(crate) fn stop_output() -> Arc<JsonObject> {
    object(
        json!({
            "stopped": {"type": "string", "description": "The run that was stopped."},
            "team": {"type": "string"},
            "workspace": {"type": "string"},
            "status": {"description": "The team's status once stopped, as `runner status --brief` prints it (a string; null when it cannot be read)."}
        }),
        &["stopped"],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::params::{AddParams, BatchParams, ListParams, ResolveParams};

    #[test]
    fn optional_fields_are_their_type_alone_and_bounds_are_plain_numbers() {
        let batch = input_object::<BatchParams>();
        let text = Value::Object(batch.clone()).to_string();
        assert!(!text.contains("null"), "{text}");
        assert!(!text.contains("uint"), "{text}");
        assert!(
            !text.contains("$ref") && !text.contains("$schema"),
            "{text}"
        );
        assert_eq!(batch["additionalProperties"], json!(false));
        let props = &batch["properties"];
        assert_eq!(props["max_concurrency"]["type"], "integer", "{props}");
        assert_eq!(props["max_concurrency"]["maximum"], json!(u32::MAX));
        assert_eq!(props["max_runtime_seconds"]["minimum"], json!(1));
        let resolve = Value::Object(input_object::<ResolveParams>());
        assert_eq!(
            resolve["properties"]["scope"]["enum"],
            json!(["project", "global"])
        );
        assert_eq!(resolve["properties"]["scope"]["type"], "string");
        for schema in [input_object::<ListParams>(), input_object::<AddParams>()] {
            assert!(!Value::Object(schema).to_string().contains("null"));
        }
    }
}

#[cfg(test)]
mod every_tool {
    use serde_json::Value;

    use crate::mcp::RunnerTools;

    /// `schema` is a valid schema of draft 2020-12 and of draft-07 (checked against each
    /// meta-schema, and compiled by each).
    fn valid_in_both_drafts(tool: &str, what: &str, schema: &Value) {
        if let Err(e) = jsonschema::draft202012::meta::validate(schema) {
            panic!("{tool} {what}: not draft 2020-12: {e}: {schema}");
        }
        if let Err(e) = jsonschema::draft7::meta::validate(schema) {
            panic!("{tool} {what}: not draft-07: {e}: {schema}");
        }
        assert!(
            jsonschema::draft202012::new(schema).is_ok(),
            "{tool} {what}"
        );
        assert!(jsonschema::draft7::new(schema).is_ok(), "{tool} {what}");
        let text = schema.to_string();
        for word in ["\"null\"", "uint", "$ref", "nullable"] {
            assert!(!text.contains(word), "{tool} {what} has {word}: {text}");
        }
    }

    #[test]
    fn every_input_and_output_schema_is_valid_json_schema_2020_12_and_draft_07() {
        let tools = RunnerTools::tool_router().list_all();
        assert_eq!(tools.len(), 7);
        for tool in tools {
            let input = Value::Object(tool.input_schema.as_ref().clone());
            valid_in_both_drafts(&tool.name, "input", &input);
            let output = tool
                .output_schema
                .as_ref()
                .map(|o| Value::Object(o.as_ref().clone()))
                .unwrap_or_else(|| panic!("{} has no output schema", tool.name));
            valid_in_both_drafts(&tool.name, "output", &output);
            assert!(tool.title.is_some(), "{} has no title", tool.name);
            let annotations = tool.annotations.as_ref().expect("annotations");
            let read_only = ["todo_list", "status", "show"].contains(&tool.name.as_ref());
            assert_eq!(annotations.read_only_hint, Some(read_only), "{}", tool.name);
        }
    }
}
