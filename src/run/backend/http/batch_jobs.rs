//! What differs between the providers' batch APIs for `--batch-api` ([`super::batch`]): the
//! [`JobApi`] trait — how a row's request is written, how a job is created, found again
//! after a kill, read and its results downloaded — and [`Calls`], the management requests
//! over the run's client (its key header, its error reading), which every provider shares.
//!
//! One implementation per file: [`super::batch_openai`] (OpenAI's Files + Batches),
//! [`super::batch_anthropic`] (Anthropic's Message Batches). The wire format of the runner
//! picks it ([`super::wire::WireFormat::batch_jobs`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Http;
use super::answer::api_message;
use super::batch_record::Job;
use super::exchange::error_chain;
use crate::failure::FailureKind;
use crate::report::{ProcessEnd, one_line};
use crate::run::backend::BoxFuture;

/// What a row gets back.
pub(crate) enum Delivery {
    /// Its answer as a direct request would have had it: the status code and the body,
    /// judged by the same reading; `job` names the job it came from.
    Answer {
        status: u16,
        body: Vec<u8>,
        job: String,
    },
    /// It got no answer: how the attempt ends.
    Failed(ProcessEnd),
}

/// Why a management call failed: the kind and the words (for every row it concerned), and
/// the wait the refusal asked for.
pub(crate) struct CallError(pub FailureKind, pub String, pub Option<Duration>);

/// Where a job is, as one read of it says.
pub(crate) enum Phase {
    /// Still running.
    Open,
    /// Ended: its results can be downloaded (some rows may have none).
    Ended,
    /// Failed as a whole, with the API's reason; no row has a result.
    Failed(String),
}

/// One read of a job's state.
pub(crate) struct Polled {
    /// The API's own word for it (`in_progress`, `completed`, `ended`, …), as recorded.
    pub status: String,
    /// Its request counts in the record's words: `total`, `completed` (rows the job is done
    /// with, answered or not), `failed`.
    pub counts: BTreeMap<String, u64>,
    pub phase: Phase,
    /// The whole answer (where an ended job's results are).
    pub raw: Value,
}

/// One provider's batch API. Calls return [`BoxFuture`]s: the collector holds the
/// implementation as `Box<dyn JobApi>`.
pub(crate) trait JobApi: Send + Sync {
    /// The API's name in messages (`OpenAI Batch API`).
    fn title(&self) -> &'static str;

    /// For `--dry-run`: the calls a run makes, under the redacted base URL `base`.
    fn describe(&self, base: &str) -> String;

    /// The most requests and bytes of one job.
    fn limits(&self) -> (usize, usize);

    /// A row's request as one line of a job's input (newline-terminated): `custom_id` is the
    /// runner's name for the row (the teammate's name), `body` the direct request's body.
    fn line(&self, custom_id: &str, body: &Value) -> Vec<u8>;

    /// What a job's lines become before the job is created, recorded as the job's
    /// `file_id`: OpenAI uploads them (the file's id); Anthropic sends them with the job
    /// (nothing: an empty string).
    fn stage<'a>(
        &'a self,
        calls: &'a Calls,
        lines: Vec<u8>,
    ) -> BoxFuture<'a, Result<String, CallError>>;

    /// Create a job from what [`JobApi::stage`] gave (`staged`) and its `lines`: its id.
    fn create<'a>(
        &'a self,
        calls: &'a Calls,
        staged: &'a str,
        lines: &'a [u8],
    ) -> BoxFuture<'a, Result<String, CallError>>;

    /// Whether a recorded job that was never created can be created from the record alone
    /// (OpenAI: its uploaded file); else its rows are sent again as a new job.
    fn creates_from_record(&self) -> bool;

    /// The job a killed run created from recorded `job` but could not record, if the API
    /// shows one, as `(id, status)`; `taken`: ids already recorded (not that one).
    fn find_created<'a>(
        &'a self,
        calls: &'a Calls,
        job: &'a Job,
        taken: &'a [String],
    ) -> BoxFuture<'a, Result<Option<(String, String)>, CallError>>;

    /// Read job `id`'s state once.
    fn poll<'a>(
        &'a self,
        calls: &'a Calls,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Polled, CallError>>;

    /// An ended job's results: each row's delivery, by the runner's `custom_id`.
    fn results<'a>(
        &'a self,
        calls: &'a Calls,
        polled: &'a Polled,
        job: &'a Job,
    ) -> BoxFuture<'a, Result<Vec<(String, Delivery)>, CallError>>;

    /// How to cancel job `id` by hand (a curl command line), the key as an environment
    /// variable.
    fn cancel_hint(&self, base: &str, id: &str) -> String;
}

/// The management requests of a run's jobs over its one client, with its key and headers.
pub(crate) struct Calls {
    pub(super) http: Arc<Http>,
}

impl Calls {
    /// The API's `path` (`batches`, `v1/messages/batches/ID`) beneath the base URL.
    pub(super) fn endpoint(&self, path: &str) -> reqwest::Url {
        let base = &self.http.base;
        let mut url = base.clone();
        url.set_path(&format!("{}/{path}", base.path().trim_end_matches('/')));
        url
    }

    /// The redacted base URL, for messages.
    pub(super) fn base_shown(&self) -> String {
        // Trimmed after: redaction writes an origin's URL with its `/`.
        crate::redact::urls(self.http.base.as_str())
            .trim_end_matches('/')
            .to_owned()
    }

    /// `request` with the run's headers and its key in the wire format's key header (unless
    /// a header of the user's replaces it).
    pub(super) fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let request = request.headers(self.http.headers.clone());
        match self.http.key_to_send() {
            Some(key) => {
                let (name, value) = self.http.wire.key_header(key);
                request.header(name, value)
            }
            None => request,
        }
    }

    /// `GET <endpoint(path)>` as JSON.
    pub(super) async fn get(&self, url: reqwest::Url, what: &str) -> Result<Value, CallError> {
        let request = self.http.client.get(url);
        self.send(request, what).await
    }

    /// `POST` a JSON `body` to `url`, the answer as JSON.
    pub(super) async fn post_json(
        &self,
        url: reqwest::Url,
        body: Vec<u8>,
        what: &str,
    ) -> Result<Value, CallError> {
        let request = self
            .http
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        self.send(request, what).await
    }

    /// Send `request` (authorized) and read a 2xx JSON answer.
    ///
    /// Errors: no answer (`setup` when there was no connection), a refusal (its kind by
    /// status), a body that is not JSON.
    pub(super) async fn send(
        &self,
        request: reqwest::RequestBuilder,
        what: &str,
    ) -> Result<Value, CallError> {
        let bytes = self.bytes(request, what).await?;
        serde_json::from_slice(&bytes).map_err(|_| {
            CallError(
                FailureKind::ApiError,
                format!("could not {what}: the answer's body is not JSON"),
                None,
            )
        })
    }

    /// Send `request` (authorized) and read a 2xx answer's body.
    ///
    /// Errors: as [`Calls::send`], but any body.
    pub(super) async fn bytes(
        &self,
        request: reqwest::RequestBuilder,
        what: &str,
    ) -> Result<Vec<u8>, CallError> {
        let response = self
            .authorized(request)
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.unreachable(&e))?
            .to_vec();
        if !status.is_success() {
            let mut e = self.refused(status, &bytes, what);
            e.2 = super::wait::answer_wait(&headers, &bytes);
            return Err(e);
        }
        Ok(bytes)
    }

    fn unreachable(&self, e: &reqwest::Error) -> CallError {
        let kind = match e.is_connect() {
            true => FailureKind::Setup,
            false => FailureKind::ApiError,
        };
        CallError(
            kind,
            format!(
                "no answer from {}: {}",
                crate::redact::urls(self.http.base.as_str()),
                error_chain(e)
            ),
            None,
        )
    }

    fn refused(&self, status: reqwest::StatusCode, body: &[u8], what: &str) -> CallError {
        let body = self.http.scrub(body.to_vec());
        let parsed = serde_json::from_slice::<Value>(&body).ok();
        let message = parsed
            .as_ref()
            .and_then(api_message)
            .unwrap_or_else(|| one_line(&String::from_utf8_lossy(&body), 200));
        let code = parsed
            .as_ref()
            .map(|v| self.http.wire.error(v).code.unwrap_or_default())
            .unwrap_or_default();
        let kind = match status.as_u16() {
            401 | 403 => FailureKind::Auth,
            402 => FailureKind::Quota,
            _ if code == "billing_error" => FailureKind::Quota,
            429 if message.to_lowercase().contains("quota") => FailureKind::Quota,
            429 | 529 => FailureKind::RateLimited,
            _ => FailureKind::ApiError,
        };
        CallError(
            kind,
            format!(
                "could not {what}: HTTP {}: {}",
                status.as_u16(),
                one_line(&message, 300)
            ),
            None,
        )
    }
}

/// The `id` of an answer.
///
/// Errors: it names none (`api_error`).
pub(crate) fn id_of(v: &Value, what: &str) -> Result<String, CallError> {
    v["id"].as_str().map(str::to_owned).ok_or_else(|| {
        CallError(
            FailureKind::ApiError,
            format!(
                "the answer names no id for {what}: {}",
                one_line(&v.to_string(), 160)
            ),
            None,
        )
    })
}
