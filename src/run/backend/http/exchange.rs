//! One attempt's exchange with the API: the request sent over the run's client, its log
//! (`attempt-N.stderr.log`: request line, headers with keys redacted, the body with secret
//! fields redacted and image data cut, the response status and headers, as `curl -v` would
//! show it; `attempt-N.stdout.log`: the response body), the time limit and interrupts.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::sync::watch;

use super::Http;
use super::answer::{Answer, failed};
use crate::agent::AgentResult;
use crate::failure::FailureKind;
use crate::report::ProcessEnd;
use crate::run::backend::{Attempt, Execution};
use crate::run::supervise::process::{Cancel, interrupted};

/// Send `request` and read the whole answer, unless the time `limit` passes or the run is
/// interrupted first (then the request is dropped: its connection closed).
async fn send(
    request: reqwest::RequestBuilder,
    limit: Option<Duration>,
    cancel: &mut watch::Receiver<Cancel>,
) -> Result<Result<Answer, reqwest::Error>, ProcessEnd> {
    let exchange = async {
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
    tokio::select! {
        a = exchange => Ok(a),
        _ = async {
            match limit {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        } => Err(ProcessEnd::TimedOut { limit: limit.unwrap_or_default(), last_error: None, silent: false }),
        _ = interrupted(cancel) => Err(ProcessEnd::Cancelled),
    }
}

/// The answer's headers, one a line, into the log of the exchange.
fn log_headers(exchange: &mut String, headers: &HeaderMap) {
    for (name, value) in headers {
        let _ = writeln!(
            exchange,
            "{name}: {}",
            value.to_str().unwrap_or("(not text)")
        );
    }
}

impl Http {
    /// One attempt: the request, sent once; the answer read by the wire format and logged.
    pub(super) async fn run(
        &self,
        attempt: &Attempt<'_>,
        mut cancel: watch::Receiver<Cancel>,
    ) -> Execution {
        let started = Instant::now();
        let body = self.request_body(attempt.prompt, attempt.output_schema, attempt.images);
        let (request, mut exchange) = self.request(&body, !attempt.images.is_empty());
        attempt.started(0);
        let answered = send(request, attempt.timeout, &mut cancel).await;
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
                    stderr_logged: true,
                    log,
                    stdout_held: None,
                }
            };
        let answer = match answered {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                let end = self.unanswered(&e, &mut exchange);
                return ended(
                    end,
                    AgentResult::default(),
                    &exchange,
                    attempt.stderr_log.clone(),
                );
            }
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
        };
        let _ = writeln!(
            exchange,
            "HTTP {} ({} ms)",
            answer.status,
            elapsed.as_millis()
        );
        log_headers(&mut exchange, &answer.headers);
        // An API that echoes the key ("Incorrect API key provided: sk-…") never gets it into
        // a log, a reason or an output.
        let answer = Answer {
            body: self.scrub(answer.body),
            ..answer
        };
        write_capped(&attempt.stdout_log, &answer.body, attempt.log_cap);
        let (end, agent) = self.read_answer(&answer);
        attempt.activity(format!(
            "HTTP {} in {} ms",
            answer.status.as_u16(),
            elapsed.as_millis()
        ));
        ended(end, agent, &exchange, attempt.stdout_log.clone())
    }

    /// The request of one attempt over the run's client, and the start of its log: the
    /// request line, the headers (keys redacted), the body (secret fields redacted; image
    /// data cut when `images`).
    fn request(&self, body: &Value, images: bool) -> (reqwest::RequestBuilder, String) {
        let body_text = serde_json::to_string_pretty(body).unwrap_or_default();
        let mut request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body_text.clone());
        let mut exchange = format!("POST {}\n", crate::redact::urls(&self.url));
        if let Some(key) = self.key_to_send() {
            let (name, value) = self.wire.key_header(key);
            let shown = value.replace(key.as_str(), &crate::redact::redacted(key));
            request = request.header(name, value);
            let _ = writeln!(exchange, "{name}: {shown}");
        }
        let _ = writeln!(exchange, "content-type: application/json");
        for (name, value) in &self.headers {
            let shown = match crate::redact::secret_name(name.as_str()) {
                true => crate::redact::redacted(value.to_str().unwrap_or("")),
                false => value.to_str().unwrap_or("(not text)").to_owned(),
            };
            let _ = writeln!(exchange, "{name}: {shown}");
        }
        let logged = match images {
            false => body_text,
            true => {
                serde_json::to_string_pretty(&elide_data_urls(body.clone())).unwrap_or_default()
            }
        };
        let _ = writeln!(exchange, "\n{}\n", crate::redact::json_body(&logged));
        (request, exchange)
    }

    /// The key, unless a header of the user's (`--var header.Authorization=…`, or the wire
    /// format's own key header) replaces it.
    pub(super) fn key_to_send(&self) -> Option<&String> {
        let (name, _) = self.wire.key_header("");
        self.key.as_ref().filter(|_| {
            !self.headers.contains_key(reqwest::header::AUTHORIZATION)
                && !self.headers.contains_key("x-api-key")
                && !self.headers.contains_key(name)
        })
    }

    /// How a request that got no answer ended: no connection at all (refused, an unknown
    /// host, a failed TLS handshake) is `setup` — the endpoint is wrong or down, not the
    /// request —, anything else `api_error`.
    fn unanswered(&self, e: &reqwest::Error, exchange: &mut String) -> ProcessEnd {
        let why = error_chain(e);
        let _ = writeln!(exchange, "(no answer: {why})");
        let kind = if e.is_connect() {
            FailureKind::Setup
        } else {
            FailureKind::ApiError
        };
        failed(
            kind,
            format!("no answer from {}: {why}", crate::redact::urls(&self.url)),
            None,
        )
    }

    /// `body` with every secret the run sends (the key, secret headers' values) replaced by
    /// its redacted form.
    pub(super) fn scrub(&self, mut body: Vec<u8>) -> Vec<u8> {
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

/// Why a request got no answer, in the words of the deepest cause ("tcp connect error:
/// Connection refused (os error 111)"), else reqwest's own.
pub(super) fn error_chain(e: &reqwest::Error) -> String {
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
pub(super) fn write_capped(path: &std::path::Path, bytes: &[u8], cap: u64) {
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
