//! The HTTP backend (runner definition kind `http`, built-in `openai`): each attempt is one
//! OpenAI-compatible chat-completions request, no agent process.
//!
//! The wire format is the OpenAI API reference's "Create chat completion"
//! (`POST <base_url>/chat/completions`, `{"model", "messages", "response_format"}` →
//! `{"id", "choices": [{"message": {"content", "refusal"}, "finish_reason"}], "usage":
//! {"prompt_tokens", "completion_tokens"}}`; errors `{"error": {"message", "type",
//! "code"}}`), which llama.cpp's server, vLLM, Ollama, LM Studio, OpenRouter, Together and
//! Groq also speak. The rendered teammate prompt is the user message; a system message asks
//! for the report JSON; with `output_schema` the request asks for structured output
//! (`response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`,
//! the schema being the report with `output` held to the user's schema). The answer's
//! content is the agent's final text, judged by the same success rule as any other.
//!
//! How an attempt ends: HTTP 429, and 503 with a `Retry-After`, → `rate_limited` (the wait
//! from `retry-after-ms` or `Retry-After`); 429 `insufficient_quota` → `quota`; 401/403 →
//! `auth`; other statuses and an unreachable server → `api_error`; a refusal, a cut-off
//! (`finish_reason: length`) or filtered answer → `invalid_report`. Time limits and
//! interrupts drop the request at once (its connection is closed).
//!
//! Logs: `attempt-N.stdout.log` is the response body as received; `attempt-N.stderr.log`
//! the exchange (request line, headers with keys redacted, request body with secret-named
//! fields redacted, response status and headers), as `curl -v` would show it.
//!
//! `--var` names it takes: `base_url`, `input_usd_per_mtok`, `output_usd_per_mtok`, `strict`
//! (`true`/`false`), `response_format` (`json_schema`/`json_object`/`none`), `header.NAME`
//! (an extra request header), `body.NAME` (an extra body field: JSON, else a string).

mod anthropic;
pub mod batch;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::{Attempt, Backend, BoxFuture, Execution};
use crate::agent::AgentResult;
use crate::agent::definition::{BackendDef, HttpApi, HttpSpec};
use crate::error::{Error, Result};
use crate::failure::FailureKind;
use crate::report::{ProcessEnd, one_line};
use crate::run::supervise::process::{Cancel, interrupted};
use crate::settings::Settings;
use crate::source::inline::Image;
use base64::Engine as _;

/// The system message of every request: what the answer must be.
pub const SYSTEM_MESSAGE: &str = "You are a teammate in a batch run. You have no tools and \
cannot read or write files: work with what the user message gives you. Answer with exactly \
one JSON object, your report, and nothing else: {\"status\": \"completed\" | \"blocked\" | \
\"failed\", \"summary\": \"one line: what you found or did\", \"blocker\": null or why a \
person must decide, \"output\": {the structured result}}. \"completed\" only if the item is \
fully done; \"blocked\" if you cannot go on without a person; \"failed\" otherwise.";

/// The `--var` names other than `header.*` and `body.*`, of an OpenAI-compatible API.
const VARS: &[&str] = &[
    "base_url",
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "strict",
    "response_format",
    "poll_max_s",
];

/// The `--var` names other than `header.*` and `body.*`, of the Anthropic Messages API.
const ANTHROPIC_VARS: &[&str] = &[
    "base_url",
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "max_tokens",
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

/// Sends one chat-completions request per attempt over one client (one connection pool:
/// HTTP/1.1 keep-alive, HTTP/2 where the server offers it) for the whole run.
pub struct Http {
    client: reqwest::Client,
    /// The wire format.
    api: HttpApi,
    /// `<base_url>/chat/completions`, or `<base_url>/v1/messages`.
    url: String,
    /// The base URL (the Batch API's `/files` and `/batches` are under it).
    base: reqwest::Url,
    /// `max_tokens` of an Anthropic request.
    max_tokens: u64,
    /// The API key, when the definition's key variable is set.
    key: Option<String>,
    model: String,
    headers: HeaderMap,
    body: Map<String, Value>,
    /// `--var response_format`, when given.
    format: Option<Format>,
    strict: bool,
    /// USD per million input and output tokens (0: unknown).
    prices: (f64, f64),
}

/// The backend of a `kind = "http"` runner: one request per attempt, or with `--batch-api`
/// ([`batch`]) the rows as OpenAI Batch API jobs.
///
/// Errors: those of [`Http::for_settings`]; `--batch-api` with a runner that does not speak
/// the OpenAI API, or a bad `--var poll_max_s` (exit 2).
pub fn backend(settings: &Settings) -> Result<std::sync::Arc<dyn Backend>> {
    let http = Http::for_settings(settings)?;
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
    if http.api != HttpApi::OpenaiChat {
        return Err(Error::Usage(format!(
            "--batch-api sends OpenAI Batch API jobs; runner `{}` does not speak the OpenAI API \
             (use --runner openai)",
            settings.runner.name
        )));
    }
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
    Ok(std::sync::Arc::new(batch::BatchApi::new(http, poll_max)))
}

impl Http {
    /// The backend for `settings` (runner definition kind `http`): base URL, key, model,
    /// headers, body fields and prices from the definition's `[http]`, the environment and
    /// `--var`, and the one client of the run.
    ///
    /// Errors (nothing is written before them): no model (`--model` missing) or a `--var`
    /// this backend does not take or cannot use (exit 2); the default, hosted base URL with
    /// no key in the environment, or a client that cannot be built (exit 3).
    pub fn for_settings(settings: &Settings) -> Result<Http> {
        let def = &settings.runner;
        let BackendDef::Http(spec) = &def.backend else {
            return Err(Error::Usage(format!(
                "runner `{}` has kind `{}`, not `http`",
                def.name,
                def.backend.kind()
            )));
        };
        let usage = |m: String| Error::Usage(format!("runner `{}`: {m}", def.name));
        let vars = &settings.vars;
        let known = match spec.api {
            HttpApi::OpenaiChat => VARS,
            HttpApi::AnthropicMessages => ANTHROPIC_VARS,
        };
        for name in vars.keys() {
            if !(known.contains(&name.as_str())
                || name.starts_with("header.")
                || name.starts_with("body."))
            {
                // A request field written bare (`temperature=0`) is meant for the body.
                let suggestion = match crate::suggest::did_you_mean(name, known.iter().copied()) {
                    s if s.is_empty() => format!(
                        "; to send `{name}` in the request body, write `--var body.{name}=…`"
                    ),
                    s => s,
                };
                return Err(usage(format!(
                    "--var `{name}` is not one this runner takes{suggestion} (it takes {}, \
                     header.NAME and body.NAME)",
                    known.join(", ")
                )));
            }
        }
        let env_base = (!spec.base_url_env.is_empty())
            .then(|| std::env::var(&spec.base_url_env).ok())
            .flatten()
            .filter(|v| !v.trim().is_empty());
        let base = vars
            .get("base_url")
            .cloned()
            .or(env_base)
            .unwrap_or_else(|| spec.base_url.clone());
        let base = base.trim().trim_end_matches('/').to_owned();
        let parsed = reqwest::Url::parse(&base).map_err(|e| {
            usage(format!(
                "the base URL `{base}` is not a URL ({e}); give it like http://127.0.0.1:8080/v1"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(usage(format!(
                "the base URL `{base}` must start with http:// or https://"
            )));
        }
        let key = (!spec.key_env.is_empty())
            .then(|| std::env::var(&spec.key_env).ok())
            .flatten()
            .filter(|k| !k.trim().is_empty());
        if key.is_none() && !spec.key_env.is_empty() && base == spec.base_url.trim_end_matches('/')
        {
            return Err(Error::Environment(format!(
                "runner `{}`: {} is not set; export your API key as {}, or point {} (or --var \
                 base_url=URL) at a server that needs none",
                def.name,
                spec.key_env,
                spec.key_env,
                if spec.base_url_env.is_empty() {
                    "the base URL"
                } else {
                    &spec.base_url_env
                }
            )));
        }
        let model = settings
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .or_else(|| (!spec.model.is_empty()).then(|| spec.model.clone()))
            .ok_or_else(|| {
                usage(
                    "needs a model: give --model NAME (the model id your API serves, e.g. \
                     gpt-4.1-mini)"
                        .into(),
                )
            })?;
        let price = |name: &str, default: f64| -> Result<f64> {
            match vars.get(name) {
                None => Ok(default),
                Some(v) => match v.trim().parse::<f64>() {
                    Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
                    _ => Err(usage(format!(
                        "--var {name}={v}: give USD per million tokens, a number ≥ 0 (e.g. 0.15)"
                    ))),
                },
            }
        };
        let prices = (
            price("input_usd_per_mtok", spec.input_usd_per_mtok)?,
            price("output_usd_per_mtok", spec.output_usd_per_mtok)?,
        );
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
        let max_tokens = match vars.get("max_tokens").map(|s| s.trim()) {
            None => anthropic::DEFAULT_MAX_TOKENS,
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(usage(format!(
                        "--var max_tokens={v}: give the most tokens of the answer, a whole \
                         number > 0 (e.g. 8192)"
                    )));
                }
            },
        };
        let mut headers = headers(spec, vars, &usage)?;
        if spec.api == HttpApi::AnthropicMessages && !headers.contains_key("anthropic-version") {
            headers.insert(
                "anthropic-version",
                HeaderValue::from_static(anthropic::VERSION),
            );
        }
        let body = body(spec, vars, &usage)?;
        let client = client(&parsed)?;
        Ok(Http {
            client,
            api: spec.api,
            base: parsed.clone(),
            max_tokens,
            url: match spec.api {
                HttpApi::OpenaiChat => chat_completions(&parsed),
                HttpApi::AnthropicMessages => anthropic::messages_url(&parsed),
            },
            key,
            model,
            headers,
            body,
            format,
            strict,
            prices,
        })
    }

    /// `POST <url>`, for `--dry-run`: where each item's request goes and how it asks.
    pub fn describe(&self, schema: bool) -> String {
        let how = match (self.api, self.effective_format(schema)) {
            (HttpApi::AnthropicMessages, _) => {
                "the report as a forced call of the tool `report`, max_tokens "
            }
            (_, Format::Schema) if self.strict => "structured output (json_schema, strict)",
            (_, Format::Schema) => "structured output (json_schema)",
            (_, Format::Object) => "JSON mode (json_object)",
            (_, Format::None) => "no response_format",
        };
        let how = match self.api {
            HttpApi::AnthropicMessages => format!("{how}{}", self.max_tokens),
            HttpApi::OpenaiChat => how.to_owned(),
        };
        let mut line = format!(
            "POST {}   (model {}, {how})",
            crate::redact::urls(&self.url),
            self.model
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
        if self.prices != (0.0, 0.0) {
            line.push_str(&format!(
                "\n  prices: ${} / ${} per million input / output tokens",
                crate::run::record::outcome::usd_text(self.prices.0),
                crate::run::record::outcome::usd_text(self.prices.1)
            ));
        }
        line
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

    /// The request body for one attempt: the prompt as the user message, and each image
    /// (`{image:…}`) after it as an `image_url` content part with a base64 `data:` URL, named
    /// by a text part (the API reference's "Create chat completion", user message content
    /// parts).
    fn request_body(&self, prompt: &str, schema: Option<&Value>, images: &[Image]) -> Value {
        if self.api == HttpApi::AnthropicMessages {
            return anthropic::request_body(
                &self.model,
                self.max_tokens,
                prompt,
                schema,
                images,
                &self.body,
            );
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        let user = match images {
            [] => json!(prompt),
            images => {
                let mut parts = vec![json!({"type": "text", "text": prompt})];
                for image in images {
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
        };
        body.insert(
            "messages".into(),
            json!([
                {"role": "system", "content": SYSTEM_MESSAGE},
                {"role": "user", "content": user},
            ]),
        );
        match (self.effective_format(schema.is_some()), schema) {
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
        for (k, v) in &self.body {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }
}

/// The report as a JSON Schema for structured output, its `output` held to `output`: every
/// property required and no others (what strict mode asks of a schema).
pub fn report_schema(output: &Value) -> Value {
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

/// What came back: the status, the headers worth logging and the body.
struct Answer {
    status: reqwest::StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Http {
    async fn run(&self, attempt: &Attempt<'_>, mut cancel: watch::Receiver<Cancel>) -> Execution {
        let started = Instant::now();
        let body = self.request_body(attempt.prompt, attempt.output_schema, attempt.images);
        let body_text = serde_json::to_string_pretty(&body).unwrap_or_default();
        let mut request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body_text.clone());
        // An `Authorization` (or Anthropic's `x-api-key`) header of the user's (`--var
        // header.Authorization=…`) replaces the key's.
        let key = self.key.as_ref().filter(|_| {
            !self.headers.contains_key(reqwest::header::AUTHORIZATION)
                && !self.headers.contains_key("x-api-key")
        });
        let mut exchange = format!("POST {}\n", crate::redact::urls(&self.url));
        if let Some(key) = key {
            let (name, prefix) = match self.api {
                HttpApi::OpenaiChat => ("authorization", "Bearer "),
                HttpApi::AnthropicMessages => ("x-api-key", ""),
            };
            request = request.header(name, format!("{prefix}{key}"));
            let _ = writeln!(exchange, "{name}: {prefix}{}", crate::redact::redacted(key));
        }
        let _ = writeln!(exchange, "content-type: application/json");
        for (name, value) in &self.headers {
            let shown = match crate::redact::secret_name(name.as_str()) {
                true => crate::redact::redacted(value.to_str().unwrap_or("")),
                false => value.to_str().unwrap_or("(not text)").to_owned(),
            };
            let _ = writeln!(exchange, "{name}: {shown}");
        }
        let logged = match attempt.images.is_empty() {
            true => body_text.clone(),
            false => {
                serde_json::to_string_pretty(&elide_data_urls(body.clone())).unwrap_or_default()
            }
        };
        let _ = writeln!(exchange, "\n{}\n", crate::redact::json_body(&logged));
        attempt.started(0);
        let exchange_future = async {
            let response = request.send().await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>(Answer {
                status,
                headers,
                body: body.to_vec(),
            })
        };
        let limit = attempt.timeout;
        let answered = tokio::select! {
            a = exchange_future => Ok(a),
            _ = async {
                match limit {
                    Some(t) => tokio::time::sleep(t).await,
                    None => std::future::pending().await,
                }
            } => Err(ProcessEnd::TimedOut { limit: limit.unwrap_or_default(), last_error: None }),
            _ = interrupted(&mut cancel) => Err(ProcessEnd::Cancelled),
        };
        let elapsed = started.elapsed();
        let ended =
            |end: ProcessEnd, agent: AgentResult, exchange: &str, log: std::path::PathBuf| {
                write_capped(&attempt.stderr_log, exchange.as_bytes(), attempt.log_cap);
                Execution {
                    end,
                    exit_code: None,
                    elapsed,
                    agent,
                    stderr_end: None,
                    log,
                    stdout_held: None,
                }
            };
        let answer = match answered {
            Err(end) => {
                let _ = writeln!(
                    exchange,
                    "(no answer: {} after {} ms)",
                    match end {
                        ProcessEnd::TimedOut { .. } => "time limit reached",
                        _ => "interrupted",
                    },
                    elapsed.as_millis()
                );
                return ended(
                    end,
                    AgentResult::default(),
                    &exchange,
                    attempt.stderr_log.clone(),
                );
            }
            Ok(Err(e)) => {
                let why = error_chain(&e);
                let _ = writeln!(exchange, "(no answer: {why})");
                // No connection at all (refused, an unknown host, a failed TLS handshake):
                // the endpoint is wrong or down, not the request.
                let kind = if e.is_connect() {
                    FailureKind::Setup
                } else {
                    FailureKind::ApiError
                };
                let end = failed(
                    kind,
                    format!("no answer from {}: {why}", crate::redact::urls(&self.url)),
                    None,
                );
                return ended(
                    end,
                    AgentResult::default(),
                    &exchange,
                    attempt.stderr_log.clone(),
                );
            }
            Ok(Ok(a)) => a,
        };
        let _ = writeln!(
            exchange,
            "HTTP {} ({} ms)",
            answer.status,
            elapsed.as_millis()
        );
        for (name, value) in &answer.headers {
            let _ = writeln!(
                exchange,
                "{name}: {}",
                value.to_str().unwrap_or("(not text)")
            );
        }
        // An API that echoes the key ("Incorrect API key provided: sk-…") never gets it into
        // a log, a reason or an output.
        let answer = Answer {
            body: self.scrub(answer.body),
            ..answer
        };
        write_capped(&attempt.stdout_log, &answer.body, attempt.log_cap);
        let stdout_log = attempt.stdout_log.clone();
        let (end, agent) = self.read_answer(&answer);
        attempt.activity(format!(
            "HTTP {} in {} ms",
            answer.status.as_u16(),
            elapsed.as_millis()
        ));
        ended(end, agent, &exchange, stdout_log)
    }

    /// `body` with every secret the run sends (the key, secret headers' values) replaced by
    /// its redacted form.
    fn scrub(&self, mut body: Vec<u8>) -> Vec<u8> {
        let secrets = self.key.iter().cloned().chain(
            self.headers
                .iter()
                .filter(|(n, _)| crate::redact::secret_name(n.as_str()))
                .filter_map(|(_, v)| v.to_str().ok().map(str::to_owned)),
        );
        for secret in secrets {
            // The bare token of `Bearer <token>` too.
            let token = secret.strip_prefix("Bearer ").unwrap_or(&secret).to_owned();
            for s in [secret, token] {
                if s.len() < 8 {
                    continue;
                }
                let shown = crate::redact::redacted(&s);
                body = replace_bytes(&body, s.as_bytes(), shown.as_bytes());
            }
        }
        body
    }

    /// How an answered request ended and what the model said.
    fn read_answer(&self, a: &Answer) -> (ProcessEnd, AgentResult) {
        let status = a.status;
        let parsed: Option<Value> = serde_json::from_slice(&a.body).ok();
        if !status.is_success() {
            let message = parsed
                .as_ref()
                .and_then(api_message)
                .unwrap_or_else(|| one_line(&String::from_utf8_lossy(&a.body), 200));
            let code = parsed.as_ref().and_then(|v| {
                ["/error/code", "/error/type"]
                    .iter()
                    .find_map(|p| v.pointer(p).and_then(Value::as_str).map(str::to_owned))
            });
            let wait = answer_wait(&a.headers, &a.body);
            let what = format!(
                "HTTP {}{}",
                status.as_u16(),
                match message.trim() {
                    "" => String::new(),
                    m => format!(": {}", one_line(m, 300)),
                }
            );
            let lower = message.to_lowercase();
            // OpenAI's used-up quota; Anthropic's `billing_error` and its 400 "Your credit
            // balance is too low".
            let quota = matches!(
                code.as_deref(),
                Some("insufficient_quota" | "billing_error")
            ) || lower.contains("exceeded your current quota")
                || lower.contains("credit balance is too low");
            let kind = match status.as_u16() {
                402 => FailureKind::Quota,
                400 | 429 if quota => FailureKind::Quota,
                // 529: Anthropic's `overloaded_error`, a wait like a rate limit's.
                429 | 529 => FailureKind::RateLimited,
                503 if wait.is_some() => FailureKind::RateLimited,
                // Anthropic's `permission_error` (403) too: the key may not use this.
                401 | 403 => FailureKind::Auth,
                _ => FailureKind::ApiError,
            };
            let mut reason = what;
            if status.as_u16() == 404 {
                reason.push_str(&match self.api {
                    HttpApi::OpenaiChat => format!(
                        " (requests go to {}: the base URL must end with the API's version, \
                         e.g. http://127.0.0.1:8080/v1)",
                        crate::redact::urls(&self.url)
                    ),
                    HttpApi::AnthropicMessages => format!(
                        " (requests go to {}: the base URL is the API's origin, without \
                         /v1, e.g. http://127.0.0.1:8080)",
                        crate::redact::urls(&self.url)
                    ),
                });
            }
            if kind == FailureKind::Auth && self.key.is_none() {
                reason.push_str(" (no API key was sent: its variable is not set)");
            }
            if status.as_u16() == 400
                && self.api == HttpApi::OpenaiChat
                && self.format != Some(Format::None)
                && message.to_lowercase().contains("schema")
                && self.strict
            {
                reason.push_str(
                    " (strict structured output needs every property required and \
                     additionalProperties false; or give --var strict=false)",
                );
            }
            return (failed(kind, reason, wait), AgentResult::default());
        }
        let Some(v) = parsed else {
            return (
                failed(
                    FailureKind::ApiError,
                    format!(
                        "HTTP {} but the body is not JSON: {}",
                        status.as_u16(),
                        one_line(&String::from_utf8_lossy(&a.body), 120)
                    ),
                    None,
                ),
                AgentResult::default(),
            );
        };
        if self.api == HttpApi::AnthropicMessages {
            let a = anthropic::read(&v);
            let cost = (self.prices != (0.0, 0.0))
                .then(|| (anthropic::cost(&a, self.prices) * 1e6).round() / 1e6);
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
            return judge_text(agent, a.problem);
        }
        let tokens = |p: &str| v.pointer(p).and_then(Value::as_u64);
        let (input, output) = (
            tokens("/usage/prompt_tokens"),
            tokens("/usage/completion_tokens"),
        );
        let cost = match self.prices {
            (0.0, 0.0) => None,
            (i, o) => Some(
                ((input.unwrap_or(0) as f64 * i + output.unwrap_or(0) as f64 * o) / 1e6 * 1e6)
                    .round()
                    / 1e6,
            ),
        };
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
            cost_usd: cost,
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
                "HTTP {} but the answer has no choices: {}",
                status.as_u16(),
                one_line(&String::from_utf8_lossy(&a.body), 120)
            ))
        } else {
            None
        };
        judge_text(agent, problem)
    }
}

/// How an answered request ended: a `problem` with the answer (a refusal, a cut-off) is an
/// invalid report; an answer without a JSON object no report; else the answer is read by
/// the success rule.
fn judge_text(agent: AgentResult, problem: Option<String>) -> (ProcessEnd, AgentResult) {
    if let (None, Some(text)) = (&problem, &agent.final_text)
        && crate::report::extract_json(text).is_none()
    {
        // The answer is the only place a report can be: say what it was instead.
        let why = format!(
            "no report: the answer holds no JSON object: {}",
            one_line(text, 160)
        );
        return (failed(FailureKind::NoReport, why, None), agent);
    }
    match problem {
        Some(p) => (failed(FailureKind::InvalidReport, p, None), agent),
        None => (ProcessEnd::Exited(0), agent),
    }
}

/// `v` with each image's base64 data cut to its media type and size, for the log of the
/// exchange (a 5 MiB image would fill it).
fn elide_data_urls(v: Value) -> Value {
    match v {
        Value::String(s) if s.len() > 256 && s.starts_with("data:") => {
            let head = s.split(',').next().unwrap_or_default().to_owned();
            Value::String(format!(
                "{head},… ({} bytes of base64)",
                s.len() - head.len() - 1
            ))
        }
        // Anthropic's `source.data`.
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("data", Value::String(s)) if s.len() > 256 => {
                        let n = s.len();
                        (k, Value::String(format!("… ({n} bytes of base64)")))
                    }
                    (_, v) => (k, elide_data_urls(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(elide_data_urls).collect()),
        v => v,
    }
}

fn failed(kind: FailureKind, reason: String, retry_after: Option<Duration>) -> ProcessEnd {
    ProcessEnd::Failed {
        kind,
        reason,
        retry_after,
    }
}

/// The API's own words in an error body: OpenAI's `/error/message`, else a top-level
/// `message` or `detail` (vLLM, FastAPI servers), else `error` as a string (Ollama).
fn api_message(v: &Value) -> Option<String> {
    ["/error/message", "/message", "/detail", "/error"]
        .iter()
        .find_map(|p| v.pointer(p).and_then(Value::as_str))
        .map(str::to_owned)
}

/// The wait a refused request's answer asks for: its headers' ([`retry_after`]), else the
/// wait its body names — OpenAI's "Please try again in 6m0s." in the message, Gemini's
/// `RetryInfo` `"retryDelay": "37s"` ([`crate::failure::retry_after`]).
fn answer_wait(headers: &HeaderMap, body: &[u8]) -> Option<Duration> {
    retry_after(headers).or_else(|| crate::failure::retry_after(&String::from_utf8_lossy(body)))
}

/// The wait an answer asks for, from the first of these that says one: `retry-after-ms`
/// (milliseconds, as OpenAI sends it); `Retry-After` as seconds or an HTTP date in any of the
/// three forms RFC 9110 requires (IMF-fixdate, RFC 850, asctime); OpenAI's
/// `x-ratelimit-reset-requests` / `-tokens` (`1s`, `6m0s`) and Anthropic's
/// `anthropic-ratelimit-*-reset` (an RFC 3339 time) — of those, the reset of a limit whose
/// `remaining` is 0, else the latest. A value that cannot be read is logged (then the
/// runner's own back-off applies).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|t| t.parse::<f64>().ok())
        && let Some(wait) = crate::failure::hinted_wait(ms / 1000.0)
    {
        return Some(wait);
    }
    if let Some(t) = text("retry-after") {
        if let Ok(s) = t.parse::<f64>() {
            return crate::failure::hinted_wait(s);
        }
        if let Ok(at) = httpdate::parse_http_date(t) {
            return Some(
                at.duration_since(std::time::SystemTime::now())
                    .unwrap_or(Duration::ZERO),
            );
        }
        // Not an HTTP date but an RFC 2822 one (`+0000` for `GMT`): some servers send it.
        if let Ok(at) = jiff::fmt::rfc2822::parse(t) {
            let wait = at.timestamp().duration_since(jiff::Timestamp::now());
            return Some(wait.try_into().unwrap_or(Duration::ZERO));
        }
        tracing::warn!(
            "Retry-After `{t}` is neither seconds nor an HTTP date; waiting by the runner's back-off"
        );
    }
    // (the reset, whether that limit is used up) of each limit the headers describe
    let mut resets: Vec<(Duration, bool)> = Vec::new();
    for (name, value) in headers {
        let name = name.as_str();
        let Ok(value) = value.to_str() else { continue };
        let (limit, wait) = if let Some(limit) = name
            .strip_prefix("x-ratelimit-reset-")
            .filter(|l| !l.is_empty())
        {
            let wait = crate::failure::duration_secs(value).and_then(crate::failure::hinted_wait);
            (format!("x-ratelimit-remaining-{limit}"), wait)
        } else if let Some(limit) = name
            .strip_prefix("anthropic-ratelimit-")
            .and_then(|l| l.strip_suffix("-reset"))
        {
            let wait = value.trim().parse::<jiff::Timestamp>().ok().map(|at| {
                at.duration_since(jiff::Timestamp::now())
                    .try_into()
                    .unwrap_or(Duration::ZERO)
            });
            (format!("anthropic-ratelimit-{limit}-remaining"), wait)
        } else {
            continue;
        };
        match wait {
            Some(w) => resets.push((w, text(&limit) == Some("0"))),
            None => tracing::warn!("{name} `{value}` is not a time; ignored"),
        }
    }
    let used_up = resets.iter().filter(|(_, out)| *out).map(|(w, _)| *w).max();
    used_up.or_else(|| resets.iter().map(|(w, _)| *w).max())
}

/// Why a request got no answer, in the words of the deepest cause ("tcp connect error:
/// Connection refused (os error 111)"), else reqwest's own.
fn error_chain(e: &reqwest::Error) -> String {
    let mut deepest: Option<&dyn std::error::Error> = None;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        deepest = Some(s);
        source = s.source();
    }
    let why = deepest.map_or_else(|| e.to_string(), |d| d.to_string());
    match (e.is_connect(), why.contains("connect")) {
        (true, false) => format!("cannot connect: {why}"),
        _ => why,
    }
}

/// Write `bytes` to a new private log file, at most `cap` bytes (then the head, marked cut).
fn write_capped(path: &std::path::Path, bytes: &[u8], cap: u64) {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let _ = crate::fsutil::create_private_file(path).and_then(|mut f| {
        use std::io::Write;
        if bytes.len() <= cap {
            f.write_all(bytes)
        } else {
            f.write_all(&bytes[..cap])?;
            write!(f, "\n[runner: cut at {cap} of {} bytes]\n", bytes.len())
        }
    });
}

/// `haystack` with every `needle` replaced by `with`.
fn replace_bytes(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

/// `<base>/chat/completions`, keeping the base URL's query (`…/v1?key=k` →
/// `…/v1/chat/completions?key=k`).
fn chat_completions(base: &reqwest::Url) -> String {
    let mut url = base.clone();
    let path = format!("{}/chat/completions", base.path().trim_end_matches('/'));
    url.set_path(&path);
    url.to_string()
}

/// The request headers: the definition's `[http] headers`, then `--var header.NAME=VALUE`.
///
/// Errors: a name or value HTTP does not allow (exit 2, through `usage`).
fn headers(
    spec: &HttpSpec,
    vars: &BTreeMap<String, String>,
    usage: &dyn Fn(String) -> Error,
) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    let extra_headers = spec.headers.iter().map(|(k, v)| (k.as_str(), v)).chain(
        vars.iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("header.")?, v))),
    );
    for (name, value) in extra_headers {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| usage(format!("`{name}` is not an HTTP header name")))?;
        let v = HeaderValue::from_str(value).map_err(|_| {
            usage(format!(
                "the value of header `{name}` is not a header value"
            ))
        })?;
        headers.insert(n, v);
    }
    Ok(headers)
}

/// The extra body fields: the definition's `[http] body`, then `--var body.NAME=VALUE` (a
/// value that parses as JSON is sent as that JSON, else as a string).
///
/// Errors: a field the backend sets itself (`model`, `messages`, `stream`,
/// `response_format`) or one without a name (exit 2, through `usage`).
fn body(
    spec: &HttpSpec,
    vars: &BTreeMap<String, String>,
    usage: &dyn Fn(String) -> Error,
) -> Result<Map<String, Value>> {
    let mut body = Map::new();
    for (k, v) in &spec.body {
        let v = serde_json::to_value(v)
            .map_err(|e| usage(format!("[http] body `{k}` is not JSON: {e}")))?;
        body.insert(k.clone(), v);
    }
    for field in spec
        .body
        .keys()
        .map(String::as_str)
        .chain(vars.keys().filter_map(|k| k.strip_prefix("body.")))
    {
        let owned = match field {
            "" => Some("a body field needs a name (body.NAME=VALUE)"),
            "model" => Some("the model is --model"),
            "messages" => Some("the messages are the prompt and the runner's system message"),
            "stream" => Some("the backend reads one JSON answer, not a stream"),
            "response_format" => Some("use --var response_format=json_schema|json_object|none"),
            _ => None,
        };
        if let Some(why) = owned {
            return Err(usage(format!("body field `{field}` cannot be set: {why}")));
        }
    }
    for (k, v) in vars {
        if let Some(field) = k.strip_prefix("body.") {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.clone()));
            body.insert(field.to_owned(), value);
        }
    }
    Ok(body)
}

/// The one client of the run: rustls, a 30 s connect timeout, and the proxy variables
/// honoured except for a server on this machine.
///
/// Errors: the client cannot be built (exit 3).
fn client(base: &reqwest::Url) -> Result<reqwest::Client> {
    // reqwest is built without a crypto provider of its own; ring is ours (installing
    // it twice is harmless).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder();
    // HTTP(S)_PROXY and NO_PROXY are honoured, except for a server on this machine (as
    // Go's net/http does): a proxy cannot reach our loopback.
    let host = base.host_str().unwrap_or_default();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        builder = builder.no_proxy();
    }
    builder
        .connect_timeout(Duration::from_secs(30))
        .pool_idle_timeout(Duration::from_secs(90))
        .user_agent(concat!("teammate-runner/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Error::Environment(format!("cannot set up the HTTP client: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_milliseconds_seconds_and_dates() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
        let mut h = HeaderMap::new();
        let soon = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(120);
        let date =
            jiff::fmt::rfc2822::to_string(&soon.to_zoned(jiff::tz::TimeZone::UTC)).expect("date");
        h.insert("retry-after", HeaderValue::from_str(&date).expect("header"));
        let wait = retry_after(&h).expect("a date");
        assert!(
            wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
            "{wait:?}"
        );
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
        // RFC 9110's two older date forms: RFC 850 and asctime (recorded shapes, a fixed
        // past date: no wait left).
        for date in [
            "Tuesday, 01-Dec-26 19:12:25 GMT",
            "Tue Dec  1 19:12:27 2026",
        ] {
            h.insert("retry-after", HeaderValue::from_static(date));
            assert_eq!(retry_after(&h), Some(Duration::ZERO), "{date}");
        }
        let soon = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(90));
        h.insert("retry-after", HeaderValue::from_str(&soon).expect("header"));
        let wait = retry_after(&h).expect("an IMF-fixdate");
        assert!(wait > Duration::from_secs(80), "{wait:?}");
        // A hostile server's numbers are held to 10^12 s, never a crash.
        let cap = Some(Duration::from_secs(1_000_000_000_000));
        h.insert(
            "retry-after",
            HeaderValue::from_static("99999999999999999999999"),
        );
        assert_eq!(retry_after(&h), cap);
        let mut h = HeaderMap::new();
        h.insert("retry-after-ms", HeaderValue::from_static("1e300"));
        assert_eq!(retry_after(&h), cap);
        h.insert("retry-after-ms", HeaderValue::from_static("NaN"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn the_rate_limit_reset_headers_of_openai_and_anthropic_give_the_wait() {
        // OpenAI (recorded shape of a 429 without Retry-After): the tokens limit is used up.
        let mut h = HeaderMap::new();
        for (n, v) in [
            ("x-ratelimit-limit-requests", "500"),
            ("x-ratelimit-remaining-requests", "499"),
            ("x-ratelimit-reset-requests", "120ms"),
            ("x-ratelimit-limit-tokens", "30000"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ] {
            h.insert(n, HeaderValue::from_static(v));
        }
        assert_eq!(retry_after(&h), Some(Duration::from_secs(360)));
        h.insert(
            "x-ratelimit-remaining-tokens",
            HeaderValue::from_static("12"),
        );
        h.insert(
            "x-ratelimit-remaining-requests",
            HeaderValue::from_static("0"),
        );
        assert_eq!(retry_after(&h), Some(Duration::from_millis(120)));
        // Anthropic: RFC 3339 resets; the used-up limit's counts.
        let at = |secs: i64| {
            (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs))
                .round(jiff::Unit::Second)
                .expect("round")
                .to_string()
        };
        let mut h = HeaderMap::new();
        h.insert(
            "anthropic-ratelimit-requests-remaining",
            HeaderValue::from_static("10"),
        );
        h.insert(
            "anthropic-ratelimit-requests-reset",
            HeaderValue::from_str(&at(5)).expect("header"),
        );
        h.insert(
            "anthropic-ratelimit-input-tokens-remaining",
            HeaderValue::from_static("0"),
        );
        h.insert(
            "anthropic-ratelimit-input-tokens-reset",
            HeaderValue::from_str(&at(42)).expect("header"),
        );
        let wait = retry_after(&h).expect("a reset");
        assert!(
            wait > Duration::from_secs(38) && wait <= Duration::from_secs(43),
            "{wait:?}"
        );
        // Retry-After, when there, comes first.
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
    }

    #[test]
    fn the_wait_a_body_names_is_read_when_no_header_says_one() {
        let none = HeaderMap::new();
        // OpenAI, a 429 without Retry-After (recorded body).
        let openai = br#"{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on tokens per min (TPM): Limit 200000, Used 199748, Requested 1036. Please try again in 1m5s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;
        assert_eq!(answer_wait(&none, openai), Some(Duration::from_secs(65)));
        // Gemini's OpenAI-compatible endpoint, RESOURCE_EXHAUSTED with RetryInfo.
        let gemini = br#"[{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}]"#;
        assert_eq!(answer_wait(&none, gemini), Some(Duration::from_secs(37)));
        // Anthropic 529 overloaded_error: no wait named.
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(answer_wait(&none, anthropic), None);
        // A header wins over the body.
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(answer_wait(&h, openai), Some(Duration::from_secs(2)));
    }

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
