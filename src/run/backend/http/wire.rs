//! The seam between the HTTP backend and one model API: a [`WireFormat`] says what a request
//! of that API looks like (URL, key header, body) and how its answers read (the report text,
//! usage and cost, error words, the wait a refusal asks for). Everything else — the one
//! client, the exchange and its logs, time limits, the success rule, retries, the journal —
//! is the backend's and the same for every API.
//!
//! One implementation per file: [`super::openai_chat`], [`super::anthropic_messages`],
//! [`super::gemini`]. [`for_api`] is the one place that picks it from `[http] api`.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

use super::{anthropic_messages, gemini, openai_chat};
use crate::agent::AgentResult;
use crate::agent::definition::HttpApi;
use crate::error::{Error, Result};
use crate::failure::FailureKind;
use crate::inline::Image;

/// USD per million input and output tokens; `(0, 0)`: unknown (no cost is computed).
pub(crate) type Prices = (f64, f64);

/// How a check of a `--var` refuses (exit 2, naming the runner).
pub(crate) type Usage<'a> = dyn Fn(String) -> Error + 'a;

/// What one attempt asks: the rendered prompt, the user's `output_schema` (when set), the
/// images of `{image:…}` in the order written.
pub(crate) struct Ask<'a> {
    /// The model id.
    pub model: &'a str,
    /// The rendered teammate prompt.
    pub prompt: &'a str,
    /// The user's output schema, which the report's `output` is held to.
    pub schema: Option<&'a Value>,
    /// The images to send after the prompt.
    pub images: &'a [Image],
}

/// What an error body says, in the API's own words.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ApiError {
    /// The message (OpenAI's `/error/message`, Gemini's `error.message`, …).
    pub message: Option<String>,
    /// The machine-readable code or type (`insufficient_quota`, `billing_error`,
    /// `RESOURCE_EXHAUSTED`, …).
    pub code: Option<String>,
}

/// One model API's wire format. Implementations hold only the per-run options of that API
/// (`--var strict`, `--var max_tokens`, …), read when the backend is built.
pub(crate) trait WireFormat: Send + Sync {
    /// The `[http] api` word (`openai-chat`), for messages.
    fn name(&self) -> &'static str;

    /// The `--var` names this API takes besides `header.NAME` and `body.NAME`.
    fn vars(&self) -> &'static [&'static str];

    /// Body fields the runner sets itself, each with why `body.NAME` may not change it.
    fn owned_fields(&self) -> &'static [(&'static str, &'static str)];

    /// The URL every request goes to, from the base URL (as resolved: `--var base_url`, the
    /// definition's variable, `[http] base_url`) and the model.
    fn url(&self, base: &reqwest::Url, model: &str) -> String;

    /// The header that carries the key, and its value for `key`.
    fn key_header(&self, key: &str) -> (&'static str, String);

    /// Headers every request carries unless `[http] headers` or `--var header.NAME` give
    /// them (Anthropic's `anthropic-version`).
    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// The request body of one attempt, before `[http] body` and `--var body.NAME` are
    /// merged over it.
    fn request_body(&self, ask: &Ask<'_>) -> Map<String, Value>;

    /// Merge the extra body fields (`[http] body`, `--var body.NAME`) over `body`: each
    /// replaces the runner's field of its name unless the API nests options (Gemini's
    /// `generationConfig`).
    fn merge_extra(&self, body: &mut Map<String, Value>, extra: &Map<String, Value>) {
        for (k, v) in extra {
            body.insert(k.clone(), v.clone());
        }
    }

    /// Read a 2xx answer: the agent's result (its text, ids, usage, the cost at `prices`) and
    /// why the answer cannot hold a report (a refusal, a cut-off), if it cannot.
    fn read_answer(&self, v: &Value, prices: Prices) -> (AgentResult, Option<String>);

    /// The API's words in an error body.
    fn error(&self, v: &Value) -> ApiError;

    /// The failure kind of a refused request when this API says more than its status does
    /// (Gemini's `API_KEY_INVALID` on a 400); `None` leaves it to the shared mapping.
    fn refusal_kind(
        &self,
        status: u16,
        error: &ApiError,
        body: Option<&Value>,
    ) -> Option<FailureKind> {
        let _ = (status, error, body);
        None
    }

    /// The wait a refused request's answer asks for: its headers'
    /// ([`super::wait::retry_after`]), else what its body names.
    fn wait(&self, headers: &HeaderMap, body: &[u8]) -> Option<Duration> {
        super::wait::answer_wait(headers, body)
    }

    /// Advice added to the reason of a refused request (`url`: where requests go, redacted).
    fn advice(&self, status: u16, message: &str, url: &str) -> Option<String>;

    /// How the request asks for the report, for `--dry-run` (`schema`: an `output_schema` is
    /// set).
    fn describe(&self, schema: bool) -> String;

    /// The batch API `--batch-api` sends this API's requests to; `None`: this API has no
    /// batch mode here.
    fn batch_jobs(&self) -> Option<Box<dyn super::batch_jobs::JobApi>> {
        None
    }
}

/// The wire format of `[http] api`, with its `--var` options read from `vars`: the one place
/// that names every implementation.
///
/// Errors: a `--var` value this API cannot use (exit 2, through `usage`).
pub(crate) fn for_api(
    api: HttpApi,
    vars: &BTreeMap<String, String>,
    usage: &Usage<'_>,
) -> Result<Box<dyn WireFormat>> {
    Ok(match api {
        HttpApi::OpenaiChat => Box::new(openai_chat::OpenaiChat::new(vars, usage)?),
        HttpApi::AnthropicMessages => {
            Box::new(anthropic_messages::AnthropicMessages::new(vars, usage)?)
        }
        HttpApi::GeminiGenerateContent => Box::new(gemini::Gemini::new(vars, usage)?),
    })
}

/// The cost in USD of `input` and `output` tokens at `prices`, rounded to a millionth of a
/// dollar; `None` when the prices are unknown.
pub(crate) fn cost(input: Option<u64>, output: Option<u64>, (i, o): Prices) -> Option<f64> {
    if (i, o) == (0.0, 0.0) {
        return None;
    }
    let usd = (input.unwrap_or(0) as f64 * i + output.unwrap_or(0) as f64 * o) / 1e6;
    Some((usd * 1e6).round() / 1e6)
}

/// `<base path>/<path>` under `base`, keeping its query (`…/v1?key=k` →
/// `…/v1/chat/completions?key=k`).
pub(crate) fn under(base: &reqwest::Url, path: &str) -> String {
    let mut url = base.clone();
    let joined = format!("{}/{path}", base.path().trim_end_matches('/'));
    url.set_path(&joined);
    url.to_string()
}

/// A positive whole number of `--var name`, else `default`.
///
/// Errors: anything but a whole number > 0 (exit 2, through `usage`).
pub(crate) fn positive_var(
    vars: &BTreeMap<String, String>,
    name: &str,
    default: u64,
    usage: &Usage<'_>,
) -> Result<u64> {
    match vars.get(name).map(|s| s.trim()) {
        None => Ok(default),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(usage(format!(
                "--var {name}={v}: give the most tokens of the answer, a whole number > 0 \
                 (e.g. 8192)"
            ))),
        },
    }
}
