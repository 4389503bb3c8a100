//! The OpenAI Batch API for `--batch-api` ([`super::batch`]), from the API reference's
//! "Batch" and "Files" pages: the requests go as one JSONL file — a line `{"custom_id",
//! "method": "POST", "url": "/v1/chat/completions", "body"}` per row, at most 50,000 lines
//! and 200 MB per file — uploaded to `POST /files` (multipart, `purpose=batch`); `POST
//! /batches` `{"input_file_id", "endpoint": "/v1/chat/completions", "completion_window":
//! "24h"}` starts a job; `GET /batches/{id}` says its `status` (`validating`,
//! `in_progress`, `finalizing`, `completed`, `failed`, `expired`, `cancelling`,
//! `cancelled`), `request_counts` and, when it ends, `output_file_id` and `error_file_id`,
//! whose `GET /files/{id}/content` is JSONL: `{"custom_id", "response": {"status_code",
//! "body"}, "error"}` per row. `GET /batches` lists jobs newest first (100 a page, `after`
//! the last id while `has_more`); a job made from an input file names it (`input_file_id`):
//! that is how a killed run's job is found again.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::batch_jobs::{CallError, Calls, Delivery, JobApi, Phase, Polled, id_of};
use super::batch_record::Job;
use crate::failure::FailureKind;
use crate::report::one_line;
use crate::run::backend::BoxFuture;

/// Most requests in one job (the Batch API's limit).
pub(crate) const MAX_REQUESTS: usize = 50_000;

/// Most bytes of one job's input file (the Batch API's limit: 200 MB).
pub(crate) const MAX_FILE_BYTES: usize = 200 * 1000 * 1000;

/// The endpoint every job calls.
const ENDPOINT: &str = "/v1/chat/completions";

/// Pages of `GET /batches` looked at for a job a killed run created (100 jobs each: a job
/// made minutes before is on the first).
const LIST_PAGES: usize = 5;

/// OpenAI's Files + Batches (under the base URL, which ends in `/v1`).
pub(crate) struct OpenaiBatches;

impl JobApi for OpenaiBatches {
    fn title(&self) -> &'static str {
        "OpenAI Batch API"
    }

    fn describe(&self, base: &str) -> String {
        format!(
            "sent as OpenAI Batch API jobs: POST {base}/files (purpose=batch), POST \
             {base}/batches (completion_window 24h), results within 24 hours"
        )
    }

    fn limits(&self) -> (usize, usize) {
        (MAX_REQUESTS, MAX_FILE_BYTES)
    }

    fn line(&self, custom_id: &str, body: &Value) -> Vec<u8> {
        jsonl_line(custom_id, body)
    }

    fn stage<'a>(
        &'a self,
        calls: &'a Calls,
        lines: Vec<u8>,
    ) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move {
            let part = reqwest::multipart::Part::bytes(lines)
                .file_name("batch.jsonl")
                .mime_str("application/jsonl")
                .map_err(|e| CallError(FailureKind::ApiError, e.to_string(), None))?;
            let form = reqwest::multipart::Form::new()
                .text("purpose", "batch")
                .part("file", part);
            let request = calls
                .http
                .client
                .post(calls.endpoint("files"))
                .multipart(form);
            let v = calls
                .send(request, "upload the requests (POST /files)")
                .await?;
            id_of(&v, "the uploaded file")
        })
    }

    fn create<'a>(
        &'a self,
        calls: &'a Calls,
        staged: &'a str,
        _lines: &'a [u8],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move {
            let body = json!({
                "input_file_id": staged,
                "endpoint": ENDPOINT,
                "completion_window": "24h",
            });
            let v = calls
                .post_json(
                    calls.endpoint("batches"),
                    body.to_string().into_bytes(),
                    "create the job (POST /batches)",
                )
                .await?;
            id_of(&v, "the job")
        })
    }

    fn creates_from_record(&self) -> bool {
        true
    }

    fn find_created<'a>(
        &'a self,
        calls: &'a Calls,
        job: &'a Job,
        _taken: &'a [String],
    ) -> BoxFuture<'a, Result<Option<(String, String)>, CallError>> {
        Box::pin(async move {
            let mut after: Option<String> = None;
            for _ in 0..LIST_PAGES {
                let mut url = calls.endpoint("batches");
                url.query_pairs_mut().append_pair("limit", "100");
                if let Some(a) = after.take() {
                    url.query_pairs_mut().append_pair("after", &a);
                }
                let page = calls.get(url, "list the jobs (GET /batches)").await?;
                let data = page["data"].as_array().cloned().unwrap_or_default();
                if let Some(made) = data
                    .iter()
                    .find(|b| b["input_file_id"].as_str() == Some(job.file_id.as_str()))
                {
                    let id = id_of(made, "the job")?;
                    let status = made["status"].as_str().unwrap_or("validating").to_owned();
                    return Ok(Some((id, status)));
                }
                after = match (page["has_more"].as_bool(), data.last()) {
                    (Some(true), Some(last)) => last["id"].as_str().map(str::to_owned),
                    _ => None,
                };
                if after.is_none() {
                    break;
                }
            }
            Ok(None)
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
                    calls.endpoint(&format!("batches/{id}")),
                    &format!("read GET /batches/{id}"),
                )
                .await?;
            let status = raw["status"].as_str().unwrap_or("").to_owned();
            let counts: BTreeMap<String, u64> = raw["request_counts"]
                .as_object()
                .map(|c| {
                    c.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                        .collect()
                })
                .unwrap_or_default();
            let phase = match status.as_str() {
                "completed" | "expired" | "cancelled" => Phase::Ended,
                "failed" => Phase::Failed(
                    raw.pointer("/errors/data/0/message")
                        .and_then(Value::as_str)
                        .unwrap_or("no reason given")
                        .to_owned(),
                ),
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
            let mut out = Vec::new();
            for key in ["output_file_id", "error_file_id"] {
                let Some(file) = polled.raw[key].as_str().filter(|f| !f.is_empty()) else {
                    continue;
                };
                let request = calls
                    .http
                    .client
                    .get(calls.endpoint(&format!("files/{file}/content")));
                let bytes = calls.bytes(request, "download results").await?;
                for line in bytes.split(|b| *b == b'\n') {
                    if let Some(row) = row_result(line, &batch_id) {
                        out.push(row);
                    }
                }
            }
            Ok(out)
        })
    }

    fn cancel_hint(&self, base: &str, id: &str) -> String {
        format!(
            "curl -X POST {base}/batches/{id}/cancel -H \"Authorization: Bearer $OPENAI_API_KEY\""
        )
    }
}

/// One line of an output or error file as a row's delivery: a `response` is judged as a
/// direct answer; an `error` fails the row with its code and message.
fn row_result(line: &[u8], batch_id: &str) -> Option<(String, Delivery)> {
    let v = serde_json::from_slice::<Value>(line).ok()?;
    let id = v["custom_id"].as_str()?.to_owned();
    let delivery = match (
        v.get("response").filter(|r| !r.is_null()),
        v.get("error").filter(|e| !e.is_null()),
    ) {
        (Some(r), _) => Delivery::Answer {
            status: r["status_code"].as_u64().unwrap_or(500) as u16,
            body: serde_json::to_vec(&r["body"]).unwrap_or_default(),
            job: batch_id.to_owned(),
        },
        (None, Some(e)) => Delivery::Failed(super::answer::failed(
            FailureKind::ApiError,
            format!(
                "Batch API job {batch_id}: {}: {}",
                e["code"].as_str().unwrap_or("error"),
                one_line(e["message"].as_str().unwrap_or(""), 200)
            ),
            None,
        )),
        (None, None) => return None,
    };
    Some((id, delivery))
}

/// The JSONL line of a row's request: `{"custom_id", "method", "url", "body"}` and a newline.
fn jsonl_line(custom_id: &str, body: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({
        "custom_id": custom_id,
        "method": "POST",
        "url": ENDPOINT,
        "body": body,
    }))
    .unwrap_or_default();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_line_is_a_post_to_chat_completions_under_its_custom_id() {
        let line = jsonl_line("3-c", &json!({"model": "m"}));
        assert_eq!(line.last(), Some(&b'\n'));
        let v: Value = serde_json::from_slice(&line).expect("JSON line");
        assert_eq!(v["custom_id"], "3-c");
        assert_eq!(v["url"], "/v1/chat/completions");
        assert_eq!(v["method"], "POST");
        assert_eq!(v["body"]["model"], "m");
    }
}
