//! Google's Gemini API wire format (`[http] api = "gemini-generate-content"`, built-in
//! `gemini-api`).
//!
//! From the Gemini API reference ("Generating content", "GenerationConfig", "UsageMetadata")
//! and Google's API error model (`google.rpc.Status`, `ErrorInfo`, `RetryInfo`):
//! `POST <base>/v1beta/models/<model>:generateContent` with header `x-goog-api-key`; body
//! `{"systemInstruction": {"parts": [{"text"}]}, "contents": [{"role": "user", "parts":
//! [{"text"} | {"inlineData": {"mimeType", "data"}}]}], "generationConfig":
//! {"responseMimeType": "application/json", "responseJsonSchema", "maxOutputTokens"}}`. The
//! answer: `{"candidates": [{"content": {"parts": [{"text", "thought"}]}, "finishReason":
//! "STOP" | "MAX_TOKENS" | "SAFETY" | "RECITATION" | …}], "promptFeedback": {"blockReason"},
//! "usageMetadata": {"promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount",
//! "cachedContentTokenCount"}, "modelVersion", "responseId"}`; errors `{"error": {"code",
//! "message", "status", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
//! "reason": "API_KEY_INVALID"} | {"@type": "type.googleapis.com/google.rpc.RetryInfo",
//! "retryDelay": "37s"} | …]}}` — a bad key is a 400 `INVALID_ARGUMENT` whose `ErrorInfo`
//! says `API_KEY_INVALID`, a rate limit a 429 `RESOURCE_EXHAUSTED` whose `RetryInfo` names
//! the wait.
//!
//! The report comes back as structured output: with an `output_schema` the request carries
//! the report schema as `responseJsonSchema` (JSON Schema, which takes `["string", "null"]`
//! where the older `responseSchema` does not); without one it asks for JSON only. Thinking
//! tokens are billed as output, so they count as output tokens; cached prompt tokens are part
//! of `promptTokenCount` and are priced at the full input price here (an upper bound).
//! `--batch-api` is not offered: Gemini's batch mode is not implemented.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use super::wire::{ApiError, Ask, Prices, Usage, WireFormat, cost, positive_var, under};
use super::{SYSTEM_MESSAGE, report_schema};
use crate::agent::AgentResult;
use crate::error::Result;
use crate::failure::FailureKind;
use crate::report::one_line;

/// The `--var` names other than `header.*` and `body.*`.
const VARS: &[&str] = &[
    "base_url",
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "max_tokens",
];

/// The `@type` of the detail that names the wait.
const RETRY_INFO: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// The `@type` of the detail that names the reason (`API_KEY_INVALID`).
const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// Gemini's `generateContent`, with the run's `--var max_tokens`.
pub(super) struct Gemini {
    /// `generationConfig.maxOutputTokens`, when `--var max_tokens` gives one (else the
    /// model's own limit).
    max_tokens: Option<u64>,
}

impl Gemini {
    /// The wire format with `--var max_tokens` read.
    ///
    /// Errors: a `max_tokens` that is not a whole number > 0 (exit 2, through `usage`).
    pub(super) fn new(vars: &BTreeMap<String, String>, usage: &Usage<'_>) -> Result<Gemini> {
        let max_tokens = match vars.contains_key("max_tokens") {
            true => Some(positive_var(vars, "max_tokens", 1, usage)?),
            false => None,
        };
        Ok(Gemini { max_tokens })
    }
}

/// The error object of an error body: `{"error": {…}}`, or the first of an array of them
/// (the shape Google's streaming endpoints answer with).
fn error_object(v: &Value) -> Option<&Map<String, Value>> {
    let v = match v {
        Value::Array(a) => a.first()?,
        v => v,
    };
    v.get("error")?.as_object()
}

/// The details of an error body of `@type` `kind`.
fn details<'a>(v: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    error_object(v)
        .and_then(|e| e.get("details"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |d| d.get("@type").and_then(Value::as_str) == Some(kind))
}

/// `RetryInfo`'s `retryDelay`: a protobuf Duration in JSON, decimal seconds with an `s`
/// (`"37s"`, `"58.934310785s"`).
pub(super) fn retry_delay(v: &Value) -> Option<Duration> {
    let text = details(v, RETRY_INFO).find_map(|d| d.get("retryDelay").and_then(Value::as_str))?;
    let secs = text.trim().strip_suffix('s')?.parse::<f64>().ok()?;
    crate::failure::hinted_wait(secs)
}

/// The text of the first candidate: its parts' texts, thoughts left out.
fn answer_text(v: &Value) -> Option<String> {
    let parts = v.pointer("/candidates/0/content/parts")?.as_array()?;
    let texts: Vec<&str> = parts
        .iter()
        .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    (!texts.is_empty()).then(|| texts.concat())
}

/// Why an answer cannot hold a report: a blocked prompt, no candidate, a cut-off or withheld
/// answer, or one with no text.
fn problem(v: &Value, text: Option<&str>) -> Option<String> {
    if v.pointer("/candidates/0").is_none() {
        return Some(
            match v
                .pointer("/promptFeedback/blockReason")
                .and_then(Value::as_str)
            {
                Some(why) => format!("the prompt was blocked (promptFeedback.blockReason: {why})"),
                None => format!(
                    "HTTP 200 but the answer has no candidates: {}",
                    one_line(&v.to_string(), 120)
                ),
            },
        );
    }
    let finish = v
        .pointer("/candidates/0/finishReason")
        .and_then(Value::as_str)
        .unwrap_or("");
    match finish {
        "MAX_TOKENS" => Some(
            "the answer was cut off at the token limit (finishReason: MAX_TOKENS); raise it \
             with --var max_tokens=N"
                .to_owned(),
        ),
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            Some(format!(
                "the answer was withheld by the provider's filter (finishReason: {finish})"
            ))
        }
        _ if text.is_none() => Some(format!(
            "the answer has no text (finishReason: {})",
            if finish.is_empty() { "none" } else { finish }
        )),
        _ => None,
    }
}

impl WireFormat for Gemini {
    fn name(&self) -> &'static str {
        "gemini-generate-content"
    }

    fn vars(&self) -> &'static [&'static str] {
        VARS
    }

    fn owned_fields(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("model", "the model is --model (it is part of the URL)"),
            ("contents", "the contents are the prompt and its images"),
            (
                "systemInstruction",
                "the system instruction is the runner's: what the answer must be",
            ),
            ("stream", "the backend reads one JSON answer, not a stream"),
        ]
    }

    fn url(&self, base: &reqwest::Url, model: &str) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        under(base, &format!("v1beta/models/{model}:generateContent"))
    }

    fn key_header(&self, key: &str) -> (&'static str, String) {
        ("x-goog-api-key", key.to_owned())
    }

    fn request_body(&self, ask: &Ask<'_>) -> Map<String, Value> {
        let mut parts = vec![json!({"text": ask.prompt})];
        for image in ask.images {
            parts.push(json!({"text": format!("Image `{}`:", image.name)}));
            parts.push(json!({"inlineData": {
                "mimeType": image.media_type,
                "data": base64::engine::general_purpose::STANDARD.encode(&image.bytes),
            }}));
        }
        let mut config = Map::new();
        config.insert("responseMimeType".into(), json!("application/json"));
        if let Some(schema) = ask.schema {
            config.insert("responseJsonSchema".into(), report_schema(schema));
        }
        if let Some(n) = self.max_tokens {
            config.insert("maxOutputTokens".into(), json!(n));
        }
        let mut body = Map::new();
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": SYSTEM_MESSAGE}]}),
        );
        body.insert("contents".into(), json!([{"role": "user", "parts": parts}]));
        body.insert("generationConfig".into(), Value::Object(config));
        body
    }

    /// `body.generationConfig` (a temperature, a seed) is merged into the runner's, key by
    /// key; other fields replace.
    fn merge_extra(&self, body: &mut Map<String, Value>, extra: &Map<String, Value>) {
        for (k, v) in extra {
            match (body.get_mut(k), v) {
                (Some(Value::Object(ours)), Value::Object(theirs)) if k == "generationConfig" => {
                    for (ck, cv) in theirs {
                        ours.insert(ck.clone(), cv.clone());
                    }
                }
                _ => {
                    body.insert(k.clone(), v.clone());
                }
            }
        }
    }

    fn read_answer(&self, v: &Value, prices: Prices) -> (AgentResult, Option<String>) {
        let text = answer_text(v);
        let tokens = |p: &str| v.pointer(p).and_then(Value::as_u64);
        let input = tokens("/usageMetadata/promptTokenCount");
        let output = match (
            tokens("/usageMetadata/candidatesTokenCount"),
            tokens("/usageMetadata/thoughtsTokenCount"),
        ) {
            (None, None) => None,
            (c, t) => Some(c.unwrap_or(0) + t.unwrap_or(0)),
        };
        let problem = problem(v, text.as_deref());
        let agent = AgentResult {
            final_text: text,
            session_id: v
                .get("responseId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            model: v
                .get("modelVersion")
                .and_then(Value::as_str)
                .map(str::to_owned),
            input_tokens: input,
            cached_input_tokens: tokens("/usageMetadata/cachedContentTokenCount"),
            output_tokens: output,
            cost_usd: cost(input, output, prices),
            turns: Some(1),
            ..AgentResult::default()
        };
        (agent, problem)
    }

    fn error(&self, v: &Value) -> ApiError {
        let e = error_object(v);
        let text = |k: &str| e.and_then(|e| e.get(k)).and_then(Value::as_str);
        ApiError {
            message: text("message")
                .map(str::to_owned)
                .or_else(|| super::answer::api_message(v)),
            code: text("status").map(str::to_owned),
        }
    }

    fn refusal_kind(
        &self,
        status: u16,
        _error: &ApiError,
        body: Option<&Value>,
    ) -> Option<FailureKind> {
        let body = body?;
        let bad_key = details(body, ERROR_INFO).any(|d| {
            matches!(
                d.get("reason").and_then(Value::as_str),
                Some("API_KEY_INVALID" | "API_KEY_SERVICE_BLOCKED")
            )
        });
        if bad_key {
            return Some(FailureKind::Auth);
        }
        // A per-minute limit names its wait; a used-up daily quota does not.
        (status == 429 && retry_delay(body).is_some()).then_some(FailureKind::RateLimited)
    }

    /// The headers' wait (a proxy's `Retry-After`), else `RetryInfo`'s `retryDelay`, else a
    /// wait the message names.
    fn wait(&self, headers: &HeaderMap, body: &[u8]) -> Option<Duration> {
        let parsed: Option<Value> = serde_json::from_slice(body).ok();
        super::wait::retry_after(headers)
            .or_else(|| parsed.as_ref().and_then(retry_delay))
            .or_else(|| super::wait::answer_wait(headers, body))
    }

    fn advice(&self, status: u16, _message: &str, url: &str) -> Option<String> {
        (status == 404).then(|| {
            format!(
                " (requests go to {url}: the base URL is the API's origin, without /v1beta, \
                 e.g. http://127.0.0.1:8080, and the model must be one the API serves)"
            )
        })
    }

    fn describe(&self, schema: bool) -> String {
        let how = match schema {
            true => "structured output (responseJsonSchema, application/json)",
            false => "JSON output (responseMimeType application/json)",
        };
        match self.max_tokens {
            Some(n) => format!("{how}, maxOutputTokens {n}"),
            None => how.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemini() -> Gemini {
        Gemini { max_tokens: None }
    }

    #[test]
    fn the_url_names_the_model_under_v1beta() {
        let base = reqwest::Url::parse("https://generativelanguage.googleapis.com").expect("url");
        assert_eq!(
            gemini().url(&base, "gemini-2.5-flash"),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert_eq!(
            gemini().url(&base, "models/gemini-2.5-pro"),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent"
        );
        assert_eq!(gemini().key_header("k").0, "x-goog-api-key");
    }

    #[test]
    fn the_report_is_the_candidates_text_with_usage_and_cost() {
        let v = json!({
            "candidates": [{
                "content": {"role": "model", "parts": [
                    {"text": "thinking it over", "thought": true},
                    {"text": "{\"status\":\"completed\",\"summary\":\"ok\","},
                    {"text": "\"blocker\":null,\"output\":{}}"}
                ]},
                "finishReason": "STOP"
            }],
            "usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 40,
                              "thoughtsTokenCount": 60, "cachedContentTokenCount": 200,
                              "totalTokenCount": 1100},
            "modelVersion": "gemini-2.5-flash",
            "responseId": "resp-1"
        });
        let (a, problem) = gemini().read_answer(&v, (0.3, 2.5));
        assert_eq!(problem, None);
        assert_eq!(
            a.final_text.as_deref(),
            Some(r#"{"status":"completed","summary":"ok","blocker":null,"output":{}}"#)
        );
        assert_eq!((a.input_tokens, a.output_tokens), (Some(1000), Some(100)));
        assert_eq!(a.cached_input_tokens, Some(200));
        assert_eq!(a.session_id.as_deref(), Some("resp-1"));
        assert_eq!(a.model.as_deref(), Some("gemini-2.5-flash"));
        // 1000 × $0.30 + 100 × $2.50, per million.
        assert_eq!(a.cost_usd, Some(0.00055));
    }

    #[test]
    fn cut_off_blocked_and_filtered_answers_are_problems() {
        let cut = json!({"candidates": [{"content": {"parts": [{"text": "{\"sta"}]},
                                          "finishReason": "MAX_TOKENS"}]});
        let (_, p) = gemini().read_answer(&cut, (0.0, 0.0));
        assert!(p.is_some_and(|p| p.contains("--var max_tokens")));
        let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}});
        let (a, p) = gemini().read_answer(&blocked, (0.0, 0.0));
        assert_eq!(a.cost_usd, None);
        assert!(p.is_some_and(|p| p.contains("blockReason: SAFETY")));
        let filtered = json!({"candidates": [{"finishReason": "RECITATION"}]});
        let (_, p) = gemini().read_answer(&filtered, (0.0, 0.0));
        assert!(p.is_some_and(|p| p.contains("RECITATION")));
    }

    #[test]
    fn errors_give_their_words_status_wait_and_kind() {
        let limited = json!({"error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "58.934310785s"}
            ]
        }});
        let e = gemini().error(&limited);
        assert_eq!(e.code.as_deref(), Some("RESOURCE_EXHAUSTED"));
        assert!(e.message.is_some_and(|m| m.starts_with("You exceeded")));
        assert_eq!(
            retry_delay(&limited),
            Some(Duration::from_secs_f64(58.934310785))
        );
        let e = gemini().error(&limited);
        assert_eq!(
            gemini().refusal_kind(429, &e, Some(&limited)),
            Some(FailureKind::RateLimited)
        );
        let bytes = limited.to_string().into_bytes();
        let wait = gemini().wait(&HeaderMap::new(), &bytes);
        assert_eq!(wait, Some(Duration::from_secs_f64(58.934310785)));
        // An array of errors (the streaming shape) reads the same.
        let wrapped = json!([limited]);
        assert_eq!(
            retry_delay(&wrapped),
            Some(Duration::from_secs_f64(58.934310785))
        );

        let bad_key = json!({"error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                         "reason": "API_KEY_INVALID", "domain": "googleapis.com",
                         "metadata": {"service": "generativelanguage.googleapis.com"}}]
        }});
        let e = gemini().error(&bad_key);
        assert_eq!(
            gemini().refusal_kind(400, &e, Some(&bad_key)),
            Some(FailureKind::Auth)
        );
        // A plain bad request is left to the shared mapping.
        let bad = json!({"error": {"code": 400, "message": "x", "status": "INVALID_ARGUMENT"}});
        assert_eq!(
            gemini().refusal_kind(400, &gemini().error(&bad), Some(&bad)),
            None
        );
    }

    #[test]
    fn the_request_holds_the_schema_the_images_and_merges_generation_config() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let images = [crate::inline::Image {
            name: "shot".into(),
            media_type: "image/png",
            bytes: b"png".to_vec(),
        }];
        let ask = Ask {
            model: "m",
            prompt: "do it",
            schema: Some(&schema),
            images: &images,
        };
        let g = Gemini {
            max_tokens: Some(500),
        };
        let mut body = g.request_body(&ask);
        let extra = json!({"generationConfig": {"temperature": 0}, "safetySettings": []});
        g.merge_extra(&mut body, extra.as_object().expect("object"));
        let config = &body["generationConfig"];
        assert_eq!(config["responseMimeType"], "application/json");
        assert_eq!(config["responseJsonSchema"]["properties"]["output"], schema);
        assert_eq!(config["maxOutputTokens"], 500);
        assert_eq!(config["temperature"], 0);
        assert_eq!(body["safetySettings"], json!([]));
        let parts = &body["contents"][0]["parts"];
        assert_eq!(parts[0]["text"], "do it");
        assert_eq!(parts[2]["inlineData"]["mimeType"], "image/png");
        assert_eq!(parts[2]["inlineData"]["data"], "cG5n");
        assert_eq!(
            body["systemInstruction"]["parts"][0]["text"],
            SYSTEM_MESSAGE
        );
    }
}
