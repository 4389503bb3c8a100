//! How an answered request ended: a refusal's failure kind, reason and wait (the status,
//! read with the wire format's error words), or a 2xx answer read into the agent's result
//! and judged as text by the success rule.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::Http;
use super::wire::ApiError;
use crate::agent::AgentResult;
use crate::failure::FailureKind;
use crate::report::{ProcessEnd, one_line};

/// What came back: the status, the headers worth logging and the body.
pub(super) struct Answer {
    /// The HTTP status.
    pub status: reqwest::StatusCode,
    /// The response headers (the rate-limit ones give the wait).
    pub headers: HeaderMap,
    /// The body as received (scrubbed of the run's secrets before it is read).
    pub body: Vec<u8>,
}

impl Http {
    /// How an answered request ended and what the model said.
    pub(super) fn read_answer(&self, a: &Answer) -> (ProcessEnd, AgentResult) {
        let parsed: Option<Value> = serde_json::from_slice(&a.body).ok();
        if !a.status.is_success() {
            let status = a.status.as_u16();
            return (
                self.refusal(a, parsed.as_ref(), status),
                AgentResult::default(),
            );
        }
        // An error inside a 200 (OpenRouter passes a provider's 429 on so): the refusal it
        // carries, by its code.
        if let Some(carried) = parsed.as_ref().and_then(carried_status) {
            return (
                self.refusal(a, parsed.as_ref(), carried),
                AgentResult::default(),
            );
        }
        let Some(v) = parsed else {
            return (
                failed(
                    FailureKind::ApiError,
                    format!(
                        "HTTP {} but the body is not JSON: {}",
                        a.status.as_u16(),
                        body_text(&a.body, 120)
                    ),
                    None,
                ),
                AgentResult::default(),
            );
        };
        let (agent, problem) = self.wire.read_answer(&v, self.prices);
        judge_text(agent, problem)
    }

    /// How a refused request ended: its kind (`input` for a request that can never succeed,
    /// [`crate::failure::never_succeeds`], whatever its status; else the wire format's word, else by status:
    /// 402 and a used-up quota `quota`; 429, 529 and a 503 that names a wait `rate_limited`;
    /// 401/403 `auth`; else `api_error`), the reason in the API's words with advice, and
    /// the wait it asks for. `status` is the answer's, or the code of the error a 2xx
    /// answer carried ([`carried_status`]).
    fn refusal(&self, a: &Answer, parsed: Option<&Value>, status: u16) -> ProcessEnd {
        let error = parsed.map(|v| self.wire.error(v)).unwrap_or_default();
        let message = error
            .message
            .clone()
            .unwrap_or_else(|| body_text(&a.body, 200));
        let wait = self.wire.wait(&a.headers, &a.body);
        // A request too large (OpenAI sends it as a 429) is no rate limit: never waited on.
        let never = crate::failure::never_succeeds(&message);
        let wait = wait.filter(|_| !never);
        let kind = match never {
            true => FailureKind::Input,
            false => self
                .wire
                .refusal_kind(status, &error, parsed)
                .unwrap_or_else(|| kind_by_status(status, &error, &message, wait.is_some())),
        };
        let said = match a.status.as_u16() {
            answered if answered != status => format!("HTTP {answered} carrying error {status}"),
            _ => format!("HTTP {status}"),
        };
        let mut reason = format!(
            "{said}{}",
            match message.trim() {
                "" => String::new(),
                m => format!(": {}", one_line(m, 300)),
            }
        );
        if let Some(advice) = self
            .wire
            .advice(status, &message, &crate::redact::urls(&self.url))
        {
            reason.push_str(&advice);
        }
        if never {
            reason.push_str(
                " (this request can never fit the model's limit: shorten the item's input or choose a model that takes more)",
            );
        }
        if kind == FailureKind::Auth && self.key.is_none() {
            reason.push_str(" (no API key was sent: its variable is not set)");
        }
        failed(kind, reason, wait)
    }
}

/// The error status a 2xx answer carries instead of an answer: `{"error": {"code": 429,
/// "message": …}}` with no `choices`, `candidates` or `content` (OpenRouter answers a
/// provider's rate limit or outage so, with HTTP 200). The code when it is an HTTP error
/// status (a number or a numeric string, 400–599), else 502 (an error from upstream that
/// names no status). `None` for an answer without an `error` object.
fn carried_status(v: &Value) -> Option<u16> {
    let error = v.get("error").filter(|e| e.is_object())?;
    if ["choices", "candidates", "content"]
        .iter()
        .any(|k| v.get(k).is_some_and(|c| !c.is_null()))
    {
        return None;
    }
    let code = match error.get("code") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    Some(
        code.and_then(|c| u16::try_from(c).ok())
            .filter(|c| (400..600).contains(c))
            .unwrap_or(502),
    )
}

/// The failure kind of a refused request by its status and words, the same for every API.
fn kind_by_status(status: u16, error: &ApiError, message: &str, waits: bool) -> FailureKind {
    let lower = message.to_lowercase();
    // OpenAI's used-up quota; Anthropic's `billing_error` and its 400 "Your credit balance
    // is too low".
    let quota = matches!(
        error.code.as_deref(),
        Some("insufficient_quota" | "billing_error")
    ) || lower.contains("exceeded your current quota")
        || lower.contains("credit balance is too low");
    match status {
        402 => FailureKind::Quota,
        400 | 429 if quota => FailureKind::Quota,
        // 529: Anthropic's `overloaded_error`, a wait like a rate limit's.
        429 | 529 => FailureKind::RateLimited,
        503 if waits => FailureKind::RateLimited,
        // Anthropic's `permission_error` (403) too: the key may not use this.
        401 | 403 => FailureKind::Auth,
        _ => FailureKind::ApiError,
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

/// A body that is not a JSON error, as one line of at most `max` characters: an HTML page
/// (a proxy's error page) as its title or text, else its first line.
fn body_text(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(body);
    let text = crate::failure::html_page_text(&text).unwrap_or_else(|| text.into_owned());
    one_line(&text, max)
}

/// An attempt that ended with `kind`, `reason` and, for a refusal that names one, the wait.
pub(super) fn failed(
    kind: FailureKind,
    reason: String,
    retry_after: Option<Duration>,
) -> ProcessEnd {
    ProcessEnd::Failed {
        kind,
        reason,
        retry_after,
    }
}

/// The API's own words in an error body: OpenAI's `/error/message`, else a top-level
/// `message` or `detail` (vLLM, FastAPI servers), else `error` as a string (Ollama).
pub(super) fn api_message(v: &Value) -> Option<String> {
    ["/error/message", "/message", "/detail", "/error"]
        .iter()
        .find_map(|p| v.pointer(p).and_then(Value::as_str))
        .map(str::to_owned)
}
