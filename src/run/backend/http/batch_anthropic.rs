//! Anthropic's Message Batches for `--runner anthropic --batch-api` ([`super::batch`]), from
//! the API reference's "Create a Message Batch", "Retrieve a Message Batch", "List Message
//! Batches" and "Retrieve Message Batch results" pages (half the price of the Messages API;
//! results within 24 hours): `POST <base>/v1/messages/batches` `{"requests": [{"custom_id",
//! "params"}]}` — `params` is the Messages request a direct attempt sends, `custom_id` at
//! most 64 of `[A-Za-z0-9_-]`, at most 100,000 requests and 256 MB a batch — answers the
//! batch: `{"id": "msgbatch_…", "processing_status": "in_progress" | "canceling" | "ended",
//! "request_counts": {"processing", "succeeded", "errored", "canceled", "expired"},
//! "created_at", "results_url"}`; `GET /v1/messages/batches/{id}` reads it until
//! `processing_status` is `ended`; its `results_url` is JSONL, a line `{"custom_id",
//! "result": {"type": "succeeded", "message"} | {"type": "errored", "error": {"type":
//! "error", "error": {"type", "message"}}} | {"type": "canceled"} | {"type": "expired"}}`
//! per request. Every call carries `x-api-key` and `anthropic-version`.
//!
//! A batch holds its requests (nothing is uploaded first), so a run killed between sending
//! it and recording its id has only the list to find it by: `GET /v1/messages/batches`
//! (newest first, `after_id` the page's `last_id` while `has_more`). The batch found is the
//! first one not recorded yet, created at most [`CLOCK_SLACK`] before the record says the
//! requests were sent, holding as many requests as the record has rows. Its results are
//! matched to rows by `custom_id`: a row the batch does not hold is told so, never given
//! another row's answer.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::batch_jobs::{CallError, Calls, Delivery, JobApi, Phase, Polled, id_of};
use super::batch_record::Job;
use crate::failure::FailureKind;
use crate::run::backend::BoxFuture;

/// Most requests in one batch.
const MAX_REQUESTS: usize = 100_000;

/// Most bytes of one batch's request (256 MB).
const MAX_BYTES: usize = 256 * 1000 * 1000;

/// The longest `custom_id` the API takes.
const MAX_ID: usize = 64;

/// How much earlier than the recorded send time a killed run's batch may say it was
/// created (the two clocks differ).
const CLOCK_SLACK: jiff::SignedDuration = jiff::SignedDuration::from_secs(300);

/// Pages of the list looked at (100 batches each).
const LIST_PAGES: usize = 5;

/// Anthropic's Message Batches (under the base URL, the API's origin).
pub(crate) struct MessageBatches;

impl JobApi for MessageBatches {
    fn title(&self) -> &'static str {
        "Anthropic Message Batches"
    }

    fn describe(&self, base: &str) -> String {
        format!(
            "sent as Anthropic Message Batches: POST {base}/v1/messages/batches, polled until \
             processing_status is ended, results from its results_url within 24 hours"
        )
    }

    fn limits(&self) -> (usize, usize) {
        (MAX_REQUESTS, MAX_BYTES)
    }

    fn line(&self, custom_id: &str, body: &Value) -> Vec<u8> {
        let mut line = serde_json::to_vec(&json!({
            "custom_id": wire_id(custom_id),
            "params": body,
        }))
        .unwrap_or_default();
        line.push(b'\n');
        line
    }

    fn stage<'a>(
        &'a self,
        _calls: &'a Calls,
        _lines: Vec<u8>,
    ) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async { Ok(String::new()) })
    }

    fn create<'a>(
        &'a self,
        calls: &'a Calls,
        _staged: &'a str,
        lines: &'a [u8],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move {
            let v = calls
                .post_json(
                    calls.endpoint("v1/messages/batches"),
                    request_body(lines),
                    "create the batch (POST /v1/messages/batches)",
                )
                .await?;
            id_of(&v, "the batch")
        })
    }

    fn creates_from_record(&self) -> bool {
        false
    }

    fn find_created<'a>(
        &'a self,
        calls: &'a Calls,
        job: &'a Job,
        taken: &'a [String],
    ) -> BoxFuture<'a, Result<Option<(String, String)>, CallError>> {
        Box::pin(async move {
            let Ok(asked) = job.asked_at.parse::<jiff::Timestamp>() else {
                return Ok(None);
            };
            let since = asked - CLOCK_SLACK;
            let mut found: Option<(String, String)> = None;
            let mut after: Option<String> = None;
            for _ in 0..LIST_PAGES {
                let mut url = calls.endpoint("v1/messages/batches");
                url.query_pairs_mut().append_pair("limit", "100");
                if let Some(a) = after.take() {
                    url.query_pairs_mut().append_pair("after_id", &a);
                }
                let page = calls
                    .get(url, "list the batches (GET /v1/messages/batches)")
                    .await?;
                let data = page["data"].as_array().cloned().unwrap_or_default();
                let mut older = false;
                // Newest first: the last match is the first batch made after the send.
                for b in &data {
                    let created: Option<jiff::Timestamp> =
                        b["created_at"].as_str().and_then(|c| c.parse().ok());
                    match created {
                        Some(c) if c < since => {
                            older = true;
                            break;
                        }
                        None => continue,
                        Some(_) => {}
                    }
                    let id = id_of(b, "the batch")?;
                    let total: u64 = b["request_counts"]
                        .as_object()
                        .map(|c| c.values().filter_map(Value::as_u64).sum())
                        .unwrap_or(0);
                    if total == job.custom_ids.len() as u64 && !taken.contains(&id) {
                        let status = b["processing_status"].as_str().unwrap_or("").to_owned();
                        found = Some((id, status));
                    }
                }
                after = match (older, page["has_more"].as_bool()) {
                    (false, Some(true)) => page["last_id"].as_str().map(str::to_owned),
                    _ => None,
                };
                if after.is_none() {
                    break;
                }
            }
            Ok(found)
        })
    }

    fn poll<'a>(
        &'a self,
        calls: &'a Calls,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Polled, CallError>> {
        Box::pin(async move {
            let raw = calls
                .get(
                    calls.endpoint(&format!("v1/messages/batches/{id}")),
                    &format!("read GET /v1/messages/batches/{id}"),
                )
                .await?;
            let status = raw["processing_status"].as_str().unwrap_or("").to_owned();
            let n = |k: &str| {
                raw.pointer(&format!("/request_counts/{k}"))
                    .and_then(Value::as_u64)
            };
            let n0 = |k: &str| n(k).unwrap_or(0);
            let failed = n0("errored") + n0("canceled") + n0("expired");
            let mut counts = BTreeMap::new();
            counts.insert("total".into(), n0("processing") + n0("succeeded") + failed);
            counts.insert("completed".into(), n0("succeeded") + failed);
            counts.insert("failed".into(), failed);
            let phase = match status.as_str() {
                "ended" => Phase::Ended,
                _ => Phase::Open,
            };
            Ok(Polled {
                status,
                counts,
                phase,
                raw,
            })
        })
    }

    fn results<'a>(
        &'a self,
        calls: &'a Calls,
        polled: &'a Polled,
        job: &'a Job,
    ) -> BoxFuture<'a, Result<Vec<(String, Delivery)>, CallError>> {
        Box::pin(async move {
            let batch_id = job.batch_id.clone().unwrap_or_default();
            let url = results_url(calls, &polled.raw, &batch_id);
            let request = calls.http.client.get(url);
            let bytes = calls.bytes(request, "download the results").await?;
            let names: BTreeMap<String, &String> =
                job.custom_ids.iter().map(|c| (wire_id(c), c)).collect();
            let mut out = Vec::new();
            for line in bytes.split(|b| *b == b'\n') {
                let Ok(v) = serde_json::from_slice::<Value>(line) else {
                    continue;
                };
                let Some(name) = v["custom_id"].as_str().and_then(|c| names.get(c)) else {
                    continue;
                };
                if let Some(d) = delivery(&v["result"], &batch_id) {
                    out.push(((*name).clone(), d));
                }
            }
            Ok(out)
        })
    }

    fn cancel_hint(&self, base: &str, id: &str) -> String {
        format!(
            "curl -X POST {base}/v1/messages/batches/{id}/cancel -H \"x-api-key: \
             $ANTHROPIC_API_KEY\" -H \"anthropic-version: {}\"",
            super::anthropic_messages::VERSION
        )
    }
}

/// Where the results are: the batch's `results_url` when it is on the base URL's origin
/// (the key is never sent elsewhere), else the documented path under the base URL.
fn results_url(calls: &Calls, batch: &Value, id: &str) -> reqwest::Url {
    let documented = calls.endpoint(&format!("v1/messages/batches/{id}/results"));
    batch["results_url"]
        .as_str()
        .and_then(|u| reqwest::Url::parse(u).ok())
        .filter(|u| u.origin() == calls.http.base.origin())
        .unwrap_or(documented)
}

/// A request's `result` as the row's delivery: a `succeeded` message is judged as a direct
/// answer (HTTP 200); an `errored` one as the direct refusal it stands for (its error type's
/// status, its body); `canceled` and `expired` rows fail `api_error`, saying so.
fn delivery(result: &Value, batch_id: &str) -> Option<Delivery> {
    let answer = |status: u16, body: &Value| Delivery::Answer {
        status,
        body: serde_json::to_vec(body).unwrap_or_default(),
        job: batch_id.to_owned(),
    };
    Some(match result["type"].as_str()? {
        "succeeded" => answer(200, &result["message"]),
        "errored" => {
            let error = &result["error"];
            answer(error_status(error["error"]["type"].as_str()), error)
        }
        how @ ("canceled" | "expired") => Delivery::Failed(super::answer::failed(
            FailureKind::ApiError,
            format!(
                "Message Batch {batch_id}: the request was {how} before it was processed{}; run \
                 it again (--only failed)",
                match how {
                    "expired" => " (not done within 24 hours)",
                    _ => "",
                }
            ),
            None,
        )),
        _ => return None,
    })
}

/// The HTTP status a direct request would have had for an error `type` (the "Errors" page).
fn error_status(kind: Option<&str>) -> u16 {
    match kind {
        Some("invalid_request_error") => 400,
        Some("authentication_error") => 401,
        Some("billing_error") => 402,
        Some("permission_error") => 403,
        Some("not_found_error") => 404,
        Some("request_too_large") => 413,
        Some("rate_limit_error") => 429,
        Some("overloaded_error") => 529,
        _ => 500,
    }
}

/// The create request's body: `{"requests": [the lines]}`.
fn request_body(lines: &[u8]) -> Vec<u8> {
    let mut body = b"{\"requests\":[".to_vec();
    let rows = lines
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>();
    body.extend_from_slice(&rows.join(&b","[..]));
    body.extend_from_slice(b"]}");
    body
}

/// The `custom_id` of a row: its name when the API takes it (at most 64 of
/// `[A-Za-z0-9_-]`), else that name with every other character as `_`, cut, and a hash of
/// the whole name (so two names never share one).
fn wire_id(name: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !name.is_empty() && name.len() <= MAX_ID && name.chars().all(allowed) {
        return name.to_owned();
    }
    let clean: String = name
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(MAX_ID - 17)
        .collect();
    // Stable across runs and builds: a resume must compute the same ids.
    format!("{clean}-{}", crate::hash::stable_hash(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_ids_hold_to_the_apis_pattern_and_stay_apart() {
        assert_eq!(wire_id("3-docs_a"), "3-docs_a");
        let dotted = wire_id("3-docs_a.md");
        let other = wire_id("3-docs_a_md");
        assert_ne!(dotted, other);
        let long = wire_id(&format!("7-{}", "x".repeat(100)));
        for id in [&dotted, &long] {
            assert!(id.len() <= MAX_ID, "{id}");
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{id}"
            );
        }
        assert_eq!(wire_id("3-docs_a.md"), dotted, "the same every run");
    }

    #[test]
    fn the_create_body_lists_the_rows_requests() {
        let api = MessageBatches;
        let mut lines = api.line("1-a", &json!({"model": "m"}));
        lines.extend(api.line("2-b", &json!({"model": "m"})));
        let v: Value = serde_json::from_slice(&request_body(&lines)).expect("JSON");
        assert_eq!(v["requests"][1]["custom_id"], "2-b");
        assert_eq!(v["requests"][0]["params"]["model"], "m");
    }

    #[test]
    fn an_errored_request_reads_as_the_refusal_it_stands_for() {
        let r = json!({"type": "errored", "error": {"type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"}}});
        match delivery(&r, "msgbatch_1") {
            Some(Delivery::Answer { status, .. }) => assert_eq!(status, 529),
            _ => panic!("an answer"),
        }
    }
}
