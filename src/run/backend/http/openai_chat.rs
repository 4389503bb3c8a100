//! The OpenAI chat-completions wire format (`[http] api = "openai-chat"`, the default;
//! built-in `openai`).
//!
//! From the OpenAI API reference's "Create chat completion": `POST <base_url>/chat/completions`
//! with `Authorization: Bearer <key>`, `{"model", "messages", "response_format"}` → `{"id",
//! "choices": [{"message": {"content", "refusal"}, "finish_reason"}], "usage":
//! {"prompt_tokens", "completion_tokens", "prompt_tokens_details": {"cached_tokens"}}}`;
//! errors `{"error": {"message", "type", "code"}}`. llama.cpp's server, vLLM, Ollama, LM
//! Studio, OpenRouter, Together and Groq speak it too. The rendered teammate prompt is the
//! user message; a system message asks for the report JSON; with `output_schema` the request
//! asks for structured output (`response_format: {"type": "json_schema", "json_schema":
//! {"name", "schema", "strict"}}`, the report schema with `output` held to the user's schema).

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::wire::{ApiError, Ask, Prices, Usage, WireFormat, cost, under};
use super::{SYSTEM_MESSAGE, report_schema};
use crate::agent::AgentResult;
use crate::error::Result;
use crate::report::one_line;

/// The `--var` names other than `header.*` and `body.*`.
const VARS: &[&str] = &[
    "base_url",
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "strict",
    "response_format",
    "poll_max_s",
];

/// How the request asks for a JSON answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `json_schema` with the report schema (the default when `output_schema` is set).
    Schema,
    /// `json_object` (JSON mode; the default without a schema).
    Object,
    /// No `response_format` (servers that know neither).
    None,
}

/// OpenAI's chat completions, with the run's `--var strict` and `--var response_format`.
pub(super) struct OpenaiChat {
    /// `--var response_format`, when given.
    format: Option<Format>,
    /// Structured output in strict mode (`--var strict`, default true).
    strict: bool,
}

impl OpenaiChat {
    /// The wire format with `--var strict` and `--var response_format` read.
    ///
    /// Errors: a value neither option takes (exit 2, through `usage`).
    pub(super) fn new(vars: &BTreeMap<String, String>, usage: &Usage<'_>) -> Result<OpenaiChat> {
        let strict = match vars.get("strict").map(|s| s.trim()) {
            None | Some("true") => true,
            Some("false") => false,
            Some(v) => return Err(usage(format!("--var strict={v}: give true or false"))),
        };
        let format = match vars.get("response_format").map(|s| s.trim()) {
            None => None,
            Some("json_schema") => Some(Format::Schema),
            Some("json_object") => Some(Format::Object),
            Some("none") => Some(Format::None),
            Some(v) => {
                return Err(usage(format!(
                    "--var response_format={v}: give json_schema, json_object or none"
                )));
            }
        };
        Ok(OpenaiChat { format, strict })
    }

    /// The `response_format` of a request: the one `--var response_format` chose, else
    /// json_schema with a schema and JSON mode without.
    fn effective_format(&self, schema: bool) -> Format {
        match (self.format, schema) {
            // Without a schema there is nothing for json_schema to hold the answer to.
            (Some(Format::Schema), false) | (None, false) => Format::Object,
            (None, true) => Format::Schema,
            (Some(f), _) => f,
        }
    }
}

/// The user message: the prompt, and each image (`{image:…}`) after it as an `image_url`
/// content part with a base64 `data:` URL, named by a text part.
fn user_content(ask: &Ask<'_>) -> Value {
    if ask.images.is_empty() {
        return json!(ask.prompt);
    }
    let mut parts = vec![json!({"type": "text", "text": ask.prompt})];
    for image in ask.images {
        parts.push(json!({"type": "text", "text": format!("Image `{}`:", image.name)}));
        parts.push(json!({
            "type": "image_url",
            "image_url": {"url": format!(
                "data:{};base64,{}",
                image.media_type,
                base64::engine::general_purpose::STANDARD.encode(&image.bytes)
            )},
        }));
    }
    Value::Array(parts)
}

/// The body fields the runner sets itself, with what to do instead, shared by the
/// chat-completions and Messages formats (a runner's `body.NAME` means the same on either).
pub(super) const OWNED_FIELDS: &[(&str, &str)] = &[
    ("model", "the model is --model"),
    (
        "messages",
        "the messages are the prompt and the runner's system message",
    ),
    ("stream", "the backend reads one JSON answer, not a stream"),
    (
        "response_format",
        "use --var response_format=json_schema|json_object|none",
    ),
];

impl WireFormat for OpenaiChat {
    fn name(&self) -> &'static str {
        "openai-chat"
    }

    fn vars(&self) -> &'static [&'static str] {
        VARS
    }

    fn owned_fields(&self) -> &'static [(&'static str, &'static str)] {
        OWNED_FIELDS
    }

    fn url(&self, base: &reqwest::Url, _model: &str) -> String {
        under(base, "chat/completions")
    }

    fn key_header(&self, key: &str) -> (&'static str, String) {
        ("authorization", format!("Bearer {key}"))
    }

    fn request_body(&self, ask: &Ask<'_>) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), json!(ask.model));
        body.insert(
            "messages".into(),
            json!([
                {"role": "system", "content": SYSTEM_MESSAGE},
                {"role": "user", "content": user_content(ask)},
            ]),
        );
        match (self.effective_format(ask.schema.is_some()), ask.schema) {
            (Format::Schema, Some(s)) => {
                body.insert(
                    "response_format".into(),
                    json!({
                        "type": "json_schema",
                        "json_schema": {
                            "name": "report",
                            "schema": report_schema(s),
                            "strict": self.strict,
                        }
                    }),
                );
            }
            (Format::None, _) => {}
            _ => {
                body.insert("response_format".into(), json!({"type": "json_object"}));
            }
        }
        body
    }

    fn read_answer(&self, v: &Value, prices: Prices) -> (AgentResult, Option<String>) {
        let tokens = |p: &str| v.pointer(p).and_then(Value::as_u64);
        let (input, output) = (
            tokens("/usage/prompt_tokens"),
            tokens("/usage/completion_tokens"),
        );
        let agent = AgentResult {
            final_text: v
                .pointer("/choices/0/message/content")
                .and_then(Value::as_str)
                .map(str::to_owned),
            session_id: v.get("id").and_then(Value::as_str).map(str::to_owned),
            model: v.get("model").and_then(Value::as_str).map(str::to_owned),
            input_tokens: input,
            cached_input_tokens: tokens("/usage/prompt_tokens_details/cached_tokens"),
            output_tokens: output,
            cost_usd: cost(input, output, prices),
            turns: Some(1),
            ..AgentResult::default()
        };
        let refusal = v
            .pointer("/choices/0/message/refusal")
            .and_then(Value::as_str)
            .filter(|r| !r.trim().is_empty());
        let finish = v
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
            .unwrap_or("");
        let problem = if let Some(r) = refusal {
            Some(format!("the model refused: {}", one_line(r, 200)))
        } else if finish == "length" {
            Some(
                "the answer was cut off at the token limit (finish_reason: length); raise it \
                 with --var body.max_completion_tokens=N"
                    .to_owned(),
            )
        } else if finish == "content_filter" {
            Some("the answer was withheld by the provider's content filter".to_owned())
        } else if v.pointer("/choices/0").is_none() {
            Some(format!(
                "HTTP 200 but the answer has no choices: {}",
                one_line(&v.to_string(), 120)
            ))
        } else {
            None
        };
        (agent, problem)
    }

    fn error(&self, v: &Value) -> ApiError {
        ApiError {
            message: super::answer::api_message(v),
            code: ["/error/code", "/error/type"]
                .iter()
                .find_map(|p| v.pointer(p).and_then(Value::as_str).map(str::to_owned)),
        }
    }

    fn advice(&self, status: u16, message: &str, url: &str) -> Option<String> {
        match status {
            404 => Some(format!(
                " (requests go to {url}: the base URL must end with the API's version, e.g. \
                 http://127.0.0.1:8080/v1)"
            )),
            400 if self.format != Some(Format::None)
                && message.to_lowercase().contains("schema")
                && self.strict =>
            {
                Some(
                    " (strict structured output needs every property required and \
                     additionalProperties false; or give --var strict=false)"
                        .to_owned(),
                )
            }
            _ => None,
        }
    }

    fn describe(&self, schema: bool) -> String {
        match self.effective_format(schema) {
            Format::Schema if self.strict => "structured output (json_schema, strict)",
            Format::Schema => "structured output (json_schema)",
            Format::Object => "JSON mode (json_object)",
            Format::None => "no response_format",
        }
        .to_owned()
    }

    fn batch_jobs(&self) -> Option<Box<dyn super::batch_jobs::JobApi>> {
        Some(Box::new(super::batch_openai::OpenaiBatches))
    }
}
