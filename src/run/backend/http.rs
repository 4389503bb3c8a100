//! The HTTP backend (runner definition kind `http`; built-ins `openai`, `anthropic`,
//! `gemini-api`): each attempt is one request to a model API, no agent process. The rendered
//! teammate prompt is the request's user message, the runner's system message asks for the
//! report, and with `output_schema` the request asks for the report as structured output;
//! the answer's text is the agent's final text, judged by the same success rule as any other.
//!
//! By concept:
//! - `wire`: the [`wire::WireFormat`] trait — what differs between APIs — and `for_api`, which
//!   picks the implementation of `[http] api`: `openai_chat` (OpenAI's chat completions,
//!   which most servers speak), `anthropic_messages` (the report as a forced tool call),
//!   `gemini` (Google's `generateContent`, the report as structured output);
//! - `settings`: building the backend from the run's settings (every check before anything
//!   is written);
//! - `exchange`: one attempt's request, its time limit and its logs (`attempt-N.stdout.log`:
//!   the response body as received; `attempt-N.stderr.log`: the exchange as `curl -v` would
//!   show it, keys and secret-named fields redacted);
//! - `answer`: how an answered request ended;
//! - `wait`: the wait a refused request asks for (`retry-after-ms`, `Retry-After`, the
//!   rate-limit reset headers, a wait its body names);
//! - `batch`: `--batch-api`, the rows as batch jobs: the flow; `batch_jobs`: what differs
//!   between providers ([`batch_jobs::JobApi`]), `batch_openai` (OpenAI's Batch API) and
//!   `batch_anthropic` (Anthropic's Message Batches) implementing it; `batch_record`: the
//!   journal of the jobs.
//!
//! How an attempt ends: HTTP 429, 529, and 503 with a wait, → `rate_limited` (the wait from
//! the headers or the body); a used-up quota (429 `insufficient_quota`, 402, `billing_error`)
//! → `quota`; 401/403 and a key the API calls invalid → `auth`; other statuses →
//! `api_error`; no connection → `setup`; a refusal, a cut-off or filtered answer →
//! `invalid_report`. Time limits and interrupts drop the request at once (its connection is
//! closed).
//!
//! `--var` names every API takes: `base_url`, `input_usd_per_mtok`, `output_usd_per_mtok`,
//! `header.NAME` (an extra request header), `body.NAME` (an extra body field: JSON, else a
//! string); each wire format adds its own (`strict`, `response_format`, `poll_max_s`,
//! `max_tokens`).

mod answer;
mod anthropic_messages;
pub(crate) mod batch;
mod batch_anthropic;
mod batch_jobs;
mod batch_openai;
pub(crate) mod batch_record;
mod exchange;
mod gemini;
mod openai_chat;
pub(crate) mod settings;
mod wait;
pub(crate) mod wire;

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::{Attempt, Backend, BoxFuture, Execution};
use crate::agent::definition::HttpSpec;
use crate::error::{Error, Result};
use crate::inline::Image;
use crate::run::supervise::process::Cancel;
use crate::settings::Settings;
use wire::{Ask, Prices, WireFormat};

/// The system message of every request: what the answer must be.
pub(crate) const SYSTEM_MESSAGE: &str = "You are a teammate in a batch run. You have no tools and \
cannot read or write files: work with what the user message gives you. Answer with exactly \
one JSON object, your report, and nothing else: {\"status\": \"completed\" | \"blocked\" | \
\"failed\", \"summary\": \"one line: what you found or did\", \"blocker\": null or why a \
person must decide, \"output\": {the structured result}}. \"completed\" only if the item is \
fully done; \"blocked\" if you cannot go on without a person; \"failed\" otherwise.";

/// Sends one request per attempt over one client (one connection pool: HTTP/1.1
/// keep-alive, HTTP/2 where the server offers it) for the whole run.
pub(crate) struct Http {
    client: reqwest::Client,
    /// The wire format of `[http] api`, with its per-run options.
    wire: Box<dyn WireFormat>,
    /// Where every request goes (`<base_url>/chat/completions`, `<base>/v1/messages`, …).
    url: String,
    /// The base URL (the Batch API's `/files` and `/batches` are under it).
    base: reqwest::Url,
    /// The API key, when the definition's key variable is set.
    key: Option<String>,
    model: String,
    headers: HeaderMap,
    body: Map<String, Value>,
    /// USD per million input and output tokens (0: unknown).
    prices: Prices,
    /// In a dry run, the key variable a real run against the hosted API needs and that is
    /// not set (the dry run says so; a real run is refused).
    missing_key: Option<String>,
}

/// The backend of a `kind = "http"` runner with `[http]` `spec`: one request per attempt,
/// or with `--batch-api` ([`batch`]) the rows as the provider's batch jobs.
///
/// Errors: those of [`Http::for_settings`]; `--batch-api` with a runner whose wire format
/// has no batch mode here, or a bad `--var poll_max_s` (exit 2).
pub(crate) fn backend(settings: &Settings, spec: &HttpSpec) -> Result<std::sync::Arc<dyn Backend>> {
    let http = Http::for_settings(settings, spec)?;
    if !settings.batch_api {
        if settings.vars.contains_key("poll_max_s") {
            return Err(Error::Usage(
                "--var poll_max_s is for --batch-api (the longest wait between two reads of a \
                 job's state)"
                    .into(),
            ));
        }
        return Ok(std::sync::Arc::new(http));
    }
    let Some(jobs) = http.wire.batch_jobs() else {
        return Err(Error::Usage(format!(
            "--batch-api sends OpenAI Batch API jobs or Anthropic Message Batches; runner `{}` \
             speaks {}, which has no batch mode here (use --runner openai or --runner \
             anthropic, or run without --batch-api)",
            settings.runner.name,
            http.wire.name()
        )));
    };
    let poll_max = match settings.vars.get("poll_max_s").map(|s| s.trim()) {
        None => Duration::from_secs(60),
        Some(v) => match v.parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
            _ => {
                return Err(Error::Usage(format!(
                    "--var poll_max_s={v}: give seconds, a number > 0 (e.g. 30)"
                )));
            }
        },
    };
    Ok(std::sync::Arc::new(batch::BatchApi::new(
        http, jobs, poll_max,
    )))
}

impl Http {
    /// `POST <url>`, for `--dry-run`: where each item's request goes and how it asks.
    pub(crate) fn describe(&self, schema: bool) -> String {
        let mut line = format!(
            "POST {}   (model {}, {})",
            crate::redact::urls(&self.url),
            self.model,
            self.wire.describe(schema)
        );
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(n, v)| match crate::redact::secret_name(n.as_str()) {
                true => format!("{n}: {}", crate::redact::redacted(v.to_str().unwrap_or(""))),
                false => format!("{n}: {}", v.to_str().unwrap_or("(not text)")),
            })
            .collect();
        if !headers.is_empty() {
            line.push_str(&format!("\n  headers: {}", headers.join(", ")));
        }
        if !self.body.is_empty() {
            line.push_str(&format!(
                "\n  body fields: {}",
                crate::redact::json_body(&Value::Object(self.body.clone()).to_string())
            ));
        }
        if let Some(var) = &self.missing_key {
            line.push_str(&format!(
                "\n  key: {var} is not set; a real run needs it (this dry run sends nothing)"
            ));
        }
        if self.prices != (0.0, 0.0) {
            line.push_str(&format!(
                "\n  prices: ${} / ${} per million input / output tokens",
                crate::run::record::outcome::usd_text(self.prices.0),
                crate::run::record::outcome::usd_text(self.prices.1)
            ));
        }
        line
    }

    /// The request body for one attempt: the wire format's, with the extra fields
    /// (`[http] body`, `--var body.NAME`) merged over it.
    fn request_body(&self, prompt: &str, schema: Option<&Value>, images: &[Image]) -> Value {
        let ask = Ask {
            model: &self.model,
            prompt,
            schema,
            images,
        };
        let mut body = self.wire.request_body(&ask);
        self.wire.merge_extra(&mut body, &self.body);
        Value::Object(body)
    }
}

/// The report as a JSON Schema for structured output, its `output` held to `output`: every
/// property required and no others (what strict mode asks of a schema).
pub(crate) fn report_schema(output: &Value) -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["status", "summary", "blocker", "output"],
        "properties": {
            "status": {"type": "string", "enum": ["completed", "blocked", "failed"]},
            "summary": {"type": "string"},
            "blocker": {"type": ["string", "null"]},
            "output": output,
        }
    })
}

impl Backend for Http {
    fn execute<'a>(
        &'a self,
        attempt: &'a Attempt<'a>,
        cancel: watch::Receiver<Cancel>,
    ) -> BoxFuture<'a, Execution> {
        Box::pin(self.run(attempt, cancel))
    }

    fn describe(&self, schema: bool) -> Option<String> {
        Some(Http::describe(self, schema))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_schema_holds_output_to_the_users_schema_strictly() {
        let s = report_schema(&json!({"type": "object"}));
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(
            s["required"],
            json!(["status", "summary", "blocker", "output"])
        );
        assert_eq!(s["properties"]["output"], json!({"type": "object"}));
    }
}
