//! The Anthropic Messages API wire format (`[http] api = "anthropic-messages"`, built-in
//! `anthropic`).
//!
//! From the API reference's "Messages" and "Errors" pages (and the TypeScript and Python
//! SDKs, which send the same): `POST <base>/v1/messages` with headers `x-api-key` and
//! `anthropic-version: 2023-06-01`; body `{"model", "max_tokens", "system", "messages":
//! [{"role": "user", "content": [blocks]}], "tools": [{"name", "description",
//! "input_schema"}], "tool_choice": {"type": "tool", "name"}}`; images are `{"type":
//! "image", "source": {"type": "base64", "media_type", "data"}}` blocks; `cache_control:
//! {"type": "ephemeral"}` marks the end of a prefix to cache. The answer: `{"id", "type":
//! "message", "content": [{"type": "text", "text"} | {"type": "tool_use", "name", "input"}],
//! "stop_reason": "end_turn" | "tool_use" | "max_tokens" | "refusal" | …, "usage":
//! {"input_tokens", "output_tokens", "cache_creation_input_tokens",
//! "cache_read_input_tokens"}}`; errors `{"type": "error", "error": {"type", "message"}}`
//! with `invalid_request_error` (400), `authentication_error` (401), `billing_error` (402),
//! `permission_error` (403), `not_found_error` (404), `request_too_large` (413),
//! `rate_limit_error` (429), `api_error` (500), `overloaded_error` (529).
//!
//! The report comes back as the input of a forced tool call: the tool `report` whose
//! `input_schema` is the report schema (the user's `output_schema` inside `output`), so the
//! answer is JSON by construction; a text answer (a server that ignores `tool_choice`) is
//! read like any other.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::report_schema;
use super::wire::{ApiError, Ask, Prices, Usage, WireFormat, positive_var, under};
use crate::agent::AgentResult;
use crate::error::Result;
use crate::inline::Image;
use base64::Engine as _;

/// The `--var` names other than `header.*` and `body.*`.
const VARS: &[&str] = &[
    "base_url",
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "max_tokens",
    "poll_max_s",
];

/// The Messages API, with the run's `--var max_tokens`.
pub(super) struct AnthropicMessages {
    /// `max_tokens` of every request.
    max_tokens: u64,
}

impl AnthropicMessages {
    /// The wire format with `--var max_tokens` read (default [`DEFAULT_MAX_TOKENS`]).
    ///
    /// Errors: a `max_tokens` that is not a whole number > 0 (exit 2, through `usage`).
    pub(super) fn new(
        vars: &BTreeMap<String, String>,
        usage: &Usage<'_>,
    ) -> Result<AnthropicMessages> {
        Ok(AnthropicMessages {
            max_tokens: positive_var(vars, "max_tokens", DEFAULT_MAX_TOKENS, usage)?,
        })
    }
}

impl WireFormat for AnthropicMessages {
    fn name(&self) -> &'static str {
        "anthropic-messages"
    }

    fn vars(&self) -> &'static [&'static str] {
        VARS
    }

    fn owned_fields(&self) -> &'static [(&'static str, &'static str)] {
        // The same fields the OpenAI format refuses: a runner's body.NAME means the same on
        // either API.
        super::openai_chat::OWNED_FIELDS
    }

    fn url(&self, base: &reqwest::Url, _model: &str) -> String {
        messages_url(base)
    }

    fn key_header(&self, key: &str) -> (&'static str, String) {
        ("x-api-key", key.to_owned())
    }

    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("anthropic-version", VERSION)]
    }

    fn request_body(&self, ask: &Ask<'_>) -> Map<String, Value> {
        request_body(
            ask.model,
            self.max_tokens,
            ask.prompt,
            ask.schema,
            ask.images,
        )
    }

    fn read_answer(&self, v: &Value, prices: Prices) -> (AgentResult, Option<String>) {
        let a = read(v);
        let cost = (prices != (0.0, 0.0)).then(|| (cost(&a, prices) * 1e6).round() / 1e6);
        let agent = AgentResult {
            final_text: a.text.clone(),
            session_id: a.id.clone(),
            input_tokens: a.input_tokens,
            cached_input_tokens: a.cached_input_tokens,
            output_tokens: a.output_tokens,
            cost_usd: cost,
            turns: Some(1),
            model: v.get("model").and_then(Value::as_str).map(str::to_owned),
            ..AgentResult::default()
        };
        (agent, a.problem)
    }

    fn error(&self, v: &Value) -> ApiError {
        ApiError {
            message: super::answer::api_message(v),
            code: ["/error/code", "/error/type"]
                .iter()
                .find_map(|p| v.pointer(p).and_then(Value::as_str).map(str::to_owned)),
        }
    }

    fn advice(&self, status: u16, _message: &str, url: &str) -> Option<String> {
        (status == 404).then(|| {
            format!(
                " (requests go to {url}: the base URL is the API's origin, without /v1, e.g. \
                 http://127.0.0.1:8080)"
            )
        })
    }

    fn describe(&self, _schema: bool) -> String {
        format!(
            "the report as a forced call of the tool `report`, max_tokens {}",
            self.max_tokens
        )
    }

    fn batch_jobs(&self) -> Option<Box<dyn super::batch_jobs::JobApi>> {
        Some(Box::new(super::batch_anthropic::MessageBatches))
    }
}

/// The `anthropic-version` header every request carries (the API's only stable version).
pub(super) const VERSION: &str = "2023-06-01";

/// The default `max_tokens` (`--var max_tokens=N`): enough for a report with a large
/// `output`.
pub(super) const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The name of the tool the report is given through.
pub(super) const REPORT_TOOL: &str = "report";

/// The system prompt: what the answer must be (the tool call).
pub(super) const SYSTEM: &str = "You are a teammate in a batch run. You have no tools but `report` \
and cannot read or write files: work with what the user message gives you. Give your report \
by calling the tool `report` exactly once: status \"completed\" only if the item is fully \
done; \"blocked\" if you cannot go on without a person (say why in `blocker`); \"failed\" \
otherwise; `summary` one line on what you found or did; `output` the structured result.";

/// Anthropic's price of writing a prompt prefix into its cache (5-minute cache) and of
/// reading one from it, as multiples of the input price (the prompt-caching pricing table).
pub(super) const CACHE_WRITE_FACTOR: f64 = 1.25;
/// See [`CACHE_WRITE_FACTOR`].
pub(super) const CACHE_READ_FACTOR: f64 = 0.1;

/// `<base>/v1/messages`, keeping the base URL's query. The base is the API's origin, as
/// `ANTHROPIC_BASE_URL` is for the SDKs and Claude Code (`https://api.anthropic.com`).
pub(super) fn messages_url(base: &reqwest::Url) -> String {
    under(base, "v1/messages")
}

/// The request body of one attempt: the prompt as the user message's text — in two blocks
/// when it has the default template's `## Your item` heading: the part every item shares
/// (the contract, the schema), marked with `cache_control` so that the next item's request
/// reads it from the cache, then the item's own part —, each image after it as an `image`
/// block named by a text block, and the forced `report` tool.
pub(super) fn request_body(
    model: &str,
    max_tokens: u64,
    prompt: &str,
    schema: Option<&Value>,
    images: &[Image],
) -> Map<String, Value> {
    // The tools and the system prompt come before the messages: a breakpoint after the
    // shared part caches them too.
    let mut content = match crate::prompt::split_at_item(prompt) {
        Some((shared, own)) => vec![
            json!({"type": "text", "text": shared, "cache_control": {"type": "ephemeral"}}),
            json!({"type": "text", "text": own}),
        ],
        None => vec![json!({"type": "text", "text": prompt})],
    };
    for image in images {
        content.push(json!({"type": "text", "text": format!("Image `{}`:", image.name)}));
        content.push(json!({
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": image.media_type,
                "data": base64::engine::general_purpose::STANDARD.encode(&image.bytes),
            },
        }));
    }
    let output = schema.cloned().unwrap_or_else(|| json!({"type": "object"}));
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("system".into(), json!([{"type": "text", "text": SYSTEM}]));
    body.insert(
        "messages".into(),
        json!([{"role": "user", "content": content}]),
    );
    body.insert(
        "tools".into(),
        json!([{
            "name": REPORT_TOOL,
            "description": "Your report on the item: the only way to answer.",
            "input_schema": report_schema(&output),
        }]),
    );
    body.insert(
        "tool_choice".into(),
        json!({"type": "tool", "name": REPORT_TOOL}),
    );
    body
}

/// What a successful answer holds, read from its JSON.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Answer {
    /// The report: the `report` tool call's input as JSON text, else the text blocks.
    pub text: Option<String>,
    /// The message id.
    pub id: Option<String>,
    /// Every input token: uncached, written to the cache, read from it.
    pub input_tokens: Option<u64>,
    /// Input tokens read from the cache (`cache_read_input_tokens`).
    pub cached_input_tokens: Option<u64>,
    /// Input tokens written to the cache (`cache_creation_input_tokens`).
    pub cache_write_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Why the answer cannot hold a report (`max_tokens`, a refusal), in words.
    pub problem: Option<String>,
}

/// Read a 2xx answer.
pub(super) fn read(v: &Value) -> Answer {
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tool = blocks.iter().find(|b| {
        b.get("type").and_then(Value::as_str) == Some("tool_use")
            && b.get("name").and_then(Value::as_str) == Some(REPORT_TOOL)
    });
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    let text = match tool.and_then(|t| t.get("input")) {
        Some(input) => Some(input.to_string()),
        None if !texts.is_empty() => Some(texts.join("\n")),
        None => None,
    };
    let tokens = |p: &str| v.pointer(p).and_then(Value::as_u64);
    let (plain, write, read) = (
        tokens("/usage/input_tokens"),
        tokens("/usage/cache_creation_input_tokens"),
        tokens("/usage/cache_read_input_tokens"),
    );
    let input = match (plain, write, read) {
        (None, None, None) => None,
        (p, w, r) => Some(p.unwrap_or(0) + w.unwrap_or(0) + r.unwrap_or(0)),
    };
    let stop = v.get("stop_reason").and_then(Value::as_str).unwrap_or("");
    let problem = match stop {
        "max_tokens" => Some(
            "the answer was cut off at the token limit (stop_reason: max_tokens); raise it \
             with --var max_tokens=N"
                .to_owned(),
        ),
        "refusal" => Some(format!(
            "the model refused{}",
            match texts.first() {
                Some(t) => format!(": {}", crate::report::one_line(t, 200)),
                None => String::new(),
            }
        )),
        _ if text.is_none() => Some(format!(
            "the answer has no report and no text (stop_reason: {})",
            if stop.is_empty() { "none" } else { stop }
        )),
        _ => None,
    };
    Answer {
        text,
        id: v.get("id").and_then(Value::as_str).map(str::to_owned),
        input_tokens: input,
        cached_input_tokens: read,
        cache_write_tokens: write,
        output_tokens: tokens("/usage/output_tokens"),
        problem,
    }
}

/// The cost in USD of an answer at `input` / `output` USD per million tokens: cache writes
/// at [`CACHE_WRITE_FACTOR`] and reads at [`CACHE_READ_FACTOR`] times the input price.
pub(super) fn cost(a: &Answer, (input, output): (f64, f64)) -> f64 {
    let n = |t: Option<u64>| t.unwrap_or(0) as f64;
    let (read, write) = (n(a.cached_input_tokens), n(a.cache_write_tokens));
    let plain = (n(a.input_tokens) - read - write).max(0.0);
    (plain * input
        + write * input * CACHE_WRITE_FACTOR
        + read * input * CACHE_READ_FACTOR
        + n(a.output_tokens) * output)
        / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_is_the_tool_calls_input_and_cache_tokens_count_as_input() {
        let v = json!({
            "id": "msg_01", "type": "message", "role": "assistant",
            "content": [
                {"type": "text", "text": "Here is my report."},
                {"type": "tool_use", "id": "toolu_01", "name": "report",
                 "input": {"status": "completed", "summary": "ok", "blocker": null, "output": {}}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 100, "cache_creation_input_tokens": 2000,
                      "cache_read_input_tokens": 0, "output_tokens": 50}
        });
        let a = read(&v);
        assert_eq!(
            a.text.as_deref(),
            Some(r#"{"status":"completed","summary":"ok","blocker":null,"output":{}}"#)
        );
        assert_eq!((a.input_tokens, a.output_tokens), (Some(2100), Some(50)));
        assert_eq!(a.problem, None);
        // $3 / $15 per million: 100 × 3 + 2000 × 3.75 + 50 × 15.
        assert!((cost(&a, (3.0, 15.0)) - 0.00855).abs() < 1e-12);
        // A text answer is read as text; a cut-off one is a problem.
        let a = read(
            &json!({"content": [{"type": "text", "text": "{\"status\": \"failed\"}"}],
                             "stop_reason": "max_tokens"}),
        );
        assert_eq!(a.text.as_deref(), Some("{\"status\": \"failed\"}"));
        assert!(a.problem.is_some_and(|p| p.contains("--var max_tokens")));
    }

    #[test]
    fn the_url_is_the_origin_with_v1_messages() {
        let u = |s: &str| messages_url(&reqwest::Url::parse(s).expect("url"));
        assert_eq!(
            u("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            u("http://127.0.0.1:9/proxy/"),
            "http://127.0.0.1:9/proxy/v1/messages"
        );
    }
}
