//! `--batch-api`: the rows of a run as OpenAI Batch API jobs instead of one request each
//! (half the price; results within the 24-hour window).
//!
//! The wire format is the OpenAI API reference's "Batch" and "Files" pages: the requests go as
//! one JSONL file — a line `{"custom_id", "method": "POST", "url": "/v1/chat/completions",
//! "body"}` per row, at most 50,000 lines and 200 MB per file — uploaded to `POST /files`
//! (multipart, `purpose=batch`); `POST /batches` `{"input_file_id", "endpoint":
//! "/v1/chat/completions", "completion_window": "24h"}` starts a job; `GET /batches/{id}` says
//! its `status` (`validating`, `in_progress`, `finalizing`, `completed`, `failed`, `expired`,
//! `cancelling`, `cancelled`), `request_counts` and, when it ends, `output_file_id` and
//! `error_file_id`, whose `GET /files/{id}/content` is JSONL: `{"custom_id", "response":
//! {"status_code", "body"}, "error"}` per row.
//!
//! Each item's attempt hands its request (the same body a direct request has) to one
//! collector, which waits until no more arrive for a moment, sends them as one or more jobs,
//! polls with back-off, and hands each row its answer, judged as a direct answer would be
//! (a row's `status_code` and body go through the same reading). `custom_id` is the
//! teammate's name (`3-docs_a.md`: the row number and id).
//!
//! Durable: each uploaded file and each job is written to `<workspace>/batch-api.json`
//! before the runner waits on it. A run that was killed, or interrupted (Ctrl-C leaves the
//! jobs running), finds there the job that holds a row's request and waits for that one: no
//! second upload, no second bill. A job whose results were handed out is marked so; a row run
//! again (`--only failed`) goes into a new job.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

use super::Http;
use super::answer::{Answer, api_message, failed};
use super::batch_record::{Job, STATE_FILE, State};
use super::exchange::{error_chain, write_capped};
use crate::agent::AgentResult;
use crate::failure::FailureKind;
use crate::report::{ProcessEnd, one_line};
use crate::run::backend::{Attempt, Backend, BoxFuture, Execution};
use crate::run::supervise::process::{ActivitySink, Cancel, interrupted};

/// Most requests in one job (the Batch API's limit).
pub(crate) const MAX_REQUESTS: usize = 50_000;

/// Most bytes of one job's input file (the Batch API's limit: 200 MB).
pub(crate) const MAX_FILE_BYTES: usize = 200 * 1000 * 1000;

/// How long the collector waits for more requests after the last one arrived.
const QUIET: Duration = Duration::from_millis(300);

/// The endpoint every job calls.
const ENDPOINT: &str = "/v1/chat/completions";

/// What a row gets back.
enum Delivery {
    /// Its line in the output or error file: the status code and the body.
    Answer {
        status: u16,
        body: Vec<u8>,
        job: String,
    },
    /// It got no answer: how the attempt ends.
    Failed(ProcessEnd),
}

struct Request {
    custom_id: String,
    /// Its JSONL line (kept as bytes: 10,000 rows waiting at once).
    line: Vec<u8>,
    tx: oneshot::Sender<Delivery>,
    activity: ActivitySink,
}

struct Queue {
    pending: Vec<Request>,
    collecting: bool,
    /// When the last request arrived.
    last: Instant,
    workspace: PathBuf,
}

/// The `--batch-api` backend: the OpenAI backend's requests, sent as Batch API jobs.
pub(crate) struct BatchApi {
    http: Arc<Http>,
    queue: Arc<Mutex<Queue>>,
    /// Longest wait between two status reads (`--var poll_max_s`, default 60 s).
    poll_max: Duration,
    /// Said once: where the jobs are when the run is interrupted.
    told: Arc<std::sync::atomic::AtomicBool>,
}

impl BatchApi {
    /// The backend over `http` (an `openai-chat` runner).
    pub(crate) fn new(http: Http, poll_max: Duration) -> BatchApi {
        BatchApi {
            http: Arc::new(http),
            queue: Arc::new(Mutex::new(Queue {
                pending: Vec::new(),
                collecting: false,
                last: Instant::now(),
                workspace: PathBuf::new(),
            })),
            poll_max,
            told: Arc::default(),
        }
    }

    /// For `--dry-run`: where the rows go.
    pub(crate) fn describe(&self, schema: bool) -> String {
        format!(
            "{}\n  sent as OpenAI Batch API jobs: POST {}/files (purpose=batch), POST {}/batches \
             (completion_window 24h), results within 24 hours",
            self.http.describe(schema),
            crate::redact::urls(self.http.base.as_str().trim_end_matches('/')),
            crate::redact::urls(self.http.base.as_str().trim_end_matches('/')),
        )
    }

    async fn run(&self, attempt: &Attempt<'_>, mut cancel: watch::Receiver<Cancel>) -> Execution {
        let started = Instant::now();
        let body = self
            .http
            .request_body(attempt.prompt, attempt.output_schema, attempt.images);
        let (tx, rx) = oneshot::channel();
        let start_collector = {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.pending.push(Request {
                custom_id: attempt.item.teammate.clone(),
                line: jsonl_line(&attempt.item.teammate, &body),
                tx,
                activity: attempt.activity_sink(),
            });
            q.last = Instant::now();
            q.workspace = attempt.workspace.to_owned();
            !std::mem::replace(&mut q.collecting, true)
        };
        if start_collector {
            let collector = Collector {
                http: self.http.clone(),
                queue: self.queue.clone(),
                poll_max: self.poll_max,
            };
            tokio::spawn(collector.run());
        }
        attempt.started(0);
        let limit = attempt.timeout;
        let delivered = tokio::select! {
            d = rx => d.ok(),
            _ = async {
                match limit {
                    Some(t) => tokio::time::sleep(t).await,
                    None => std::future::pending().await,
                }
            } => {
                self.tell_where_the_jobs_are(attempt.workspace);
                return self.ended(attempt, started, ProcessEnd::TimedOut {
                    limit: limit.unwrap_or_default(),
                    last_error: Some("the Batch API job is still running; run the same command \
                                      again to collect its results".into()),
                    silent: false,
                }, AgentResult::default(), "");
            }
            _ = interrupted(&mut cancel) => {
                self.tell_where_the_jobs_are(attempt.workspace);
                return self.ended(attempt, started, ProcessEnd::Cancelled, AgentResult::default(), "");
            }
        };
        match delivered {
            None => self.ended(
                attempt,
                started,
                failed(
                    FailureKind::ApiError,
                    "the Batch API collector stopped without an answer".into(),
                    None,
                ),
                AgentResult::default(),
                "",
            ),
            Some(Delivery::Failed(end)) => {
                self.ended(attempt, started, end, AgentResult::default(), "")
            }
            Some(Delivery::Answer { status, body, job }) => {
                let body = self.http.scrub(body);
                write_capped(&attempt.stdout_log, &body, attempt.log_cap);
                let status = reqwest::StatusCode::from_u16(status)
                    .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR);
                let answer = Answer {
                    status,
                    headers: reqwest::header::HeaderMap::new(),
                    body,
                };
                let (end, agent) = self.http.read_answer(&answer);
                attempt.activity(format!("HTTP {} from job {job}", status.as_u16()));
                let exchange = format!(
                    "Batch API job {job}, custom_id {}: HTTP {}\n",
                    attempt.item.teammate,
                    status.as_u16()
                );
                let mut e = self.ended(attempt, started, end, agent, &exchange);
                e.log = attempt.stdout_log.clone();
                e
            }
        }
    }

    fn ended(
        &self,
        attempt: &Attempt<'_>,
        started: Instant,
        end: ProcessEnd,
        agent: AgentResult,
        exchange: &str,
    ) -> Execution {
        let text = match exchange {
            "" => format!("Batch API: {end:?}\n"),
            e => e.to_owned(),
        };
        write_capped(&attempt.stderr_log, text.as_bytes(), attempt.log_cap);
        Execution {
            end,
            exit_code: None,
            elapsed: started.elapsed(),
            agent,
            stderr_end: None,
            log: attempt.stderr_log.clone(),
            stdout_held: None,
        }
    }

    /// Once per run, when it stops waiting: the jobs keep running at the provider; how to
    /// collect or cancel them.
    fn tell_where_the_jobs_are(&self, workspace: &Path) {
        if self.told.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let state = State::read(workspace);
        let open: Vec<&str> = state
            .jobs
            .iter()
            .filter(|j| !j.delivered)
            .filter_map(|j| j.batch_id.as_deref())
            .collect();
        if open.is_empty() {
            return;
        }
        let base = crate::redact::urls(self.http.base.as_str().trim_end_matches('/'));
        eprintln!(
            "runner: the Batch API job(s) {} keep running at the provider (their ids are in \
             {}). Run the same command again to collect the results — nothing is uploaded \
             twice; or cancel a job: curl -X POST {base}/batches/{}/cancel -H \"Authorization: \
             Bearer $OPENAI_API_KEY\"",
            open.join(", "),
            workspace.join(STATE_FILE).display(),
            open[0]
        );
    }
}

impl Backend for BatchApi {
    fn execute<'a>(
        &'a self,
        attempt: &'a Attempt<'a>,
        cancel: watch::Receiver<Cancel>,
    ) -> BoxFuture<'a, Execution> {
        Box::pin(self.run(attempt, cancel))
    }

    fn describe(&self, schema: bool) -> Option<String> {
        Some(BatchApi::describe(self, schema))
    }
}

/// The one task that sends the queued requests as jobs and hands out their answers.
struct Collector {
    http: Arc<Http>,
    queue: Arc<Mutex<Queue>>,
    poll_max: Duration,
}

/// Why a management call failed: the kind and the words, for every row it concerned.
struct CallError(FailureKind, String, Option<Duration>);

impl Collector {
    async fn run(self) {
        loop {
            // Wait until no request arrived for a moment: the dispatcher starts every row
            // at once.
            loop {
                let since = {
                    let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                    q.last.elapsed()
                };
                if since >= QUIET {
                    break;
                }
                tokio::time::sleep(QUIET - since).await;
            }
            let (round, workspace) = {
                let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                if q.pending.is_empty() {
                    q.collecting = false;
                    return;
                }
                (std::mem::take(&mut q.pending), q.workspace.clone())
            };
            self.round(round, &workspace).await;
        }
    }

    /// Send one round of requests (or find the jobs that already hold them), wait for the
    /// jobs, hand out the answers.
    async fn round(&self, round: Vec<Request>, workspace: &Path) {
        let mut state = State::read(workspace);
        let base = self.http.base.as_str().to_owned();
        if state.base_url != base {
            // Jobs made at another API are not there to be found.
            state = State {
                base_url: base,
                jobs: Vec::new(),
            };
        }
        let mut waiting: HashMap<String, Request> = HashMap::new();
        let mut fresh: Vec<(String, Vec<u8>)> = Vec::new();
        for mut r in round {
            let known = state.jobs.iter().any(|j| {
                !j.delivered && !ended_badly(&j.status) && j.custom_ids.contains(&r.custom_id)
            });
            if !known {
                fresh.push((r.custom_id.clone(), std::mem::take(&mut r.line)));
            }
            waiting.insert(r.custom_id.clone(), r);
        }
        self.upload_fresh(fresh, &mut state, &mut waiting, workspace)
            .await;
        self.create_jobs(&mut state, &mut waiting, workspace).await;
        if self
            .wait_for_jobs(&mut state, &mut waiting, workspace)
            .await
        {
            return;
        }
        for (id, r) in waiting.drain() {
            let _ = r.tx.send(Delivery::Failed(failed(
                FailureKind::ApiError,
                format!("no Batch API job holds the request of {id}"),
                None,
            )));
        }
    }

    /// Upload the requests no job holds yet as new input files, each journaled in
    /// `batch-api.json` before the runner waits on it; a row whose upload failed is told so.
    async fn upload_fresh(
        &self,
        fresh: Vec<(String, Vec<u8>)>,
        state: &mut State,
        waiting: &mut HashMap<String, Request>,
        workspace: &Path,
    ) {
        // New jobs for the rows no job holds yet: each file and job journaled before waiting.
        for (ids, lines) in chunks(fresh) {
            match self.upload(lines).await {
                Ok(file_id) => {
                    state.jobs.push(Job {
                        file_id,
                        batch_id: None,
                        custom_ids: ids,
                        status: String::new(),
                        counts: BTreeMap::new(),
                        checked_at: String::new(),
                        delivered: false,
                        uploaded_now: true,
                    });
                    if let Err(e) = state.write(workspace) {
                        tracing::warn!("cannot write {}: {e}", STATE_FILE);
                    }
                }
                Err(CallError(kind, why, wait)) => {
                    for id in &ids {
                        give(
                            waiting,
                            id,
                            Delivery::Failed(failed(kind, why.clone(), wait)),
                        );
                    }
                }
            }
        }
    }

    /// Create the jobs of uploaded files not created yet (also those a killed run uploaded
    /// and never created) that hold a waiting row; a row whose job could not be created is
    /// told so.
    async fn create_jobs(
        &self,
        state: &mut State,
        waiting: &mut HashMap<String, Request>,
        workspace: &Path,
    ) {
        // Jobs not created yet (also those a killed run uploaded and never created).
        for i in 0..state.jobs.len() {
            let job = &state.jobs[i];
            if job.delivered
                || job.batch_id.is_some()
                || !job.custom_ids.iter().any(|c| waiting.contains_key(c))
            {
                continue;
            }
            // A run killed while `POST /batches` was in flight may have created the job
            // without recording it: find it by its input file before creating one (issue 50:
            // else a second job, a second bill, and the first never found).
            let made = match job.uploaded_now {
                true => Ok(None),
                false => self.created_from(&job.file_id).await,
            };
            let made = match made {
                Ok(Some(found)) => Ok(found),
                Ok(None) => self.create(&job.file_id).await.map(|id| {
                    // A crash test's kill between creating the job and recording it.
                    crate::fault::point("batch_created");
                    (id, "validating".to_owned())
                }),
                Err(e) => Err(e),
            };
            match made {
                Ok((id, status)) => {
                    state.jobs[i].batch_id = Some(id);
                    state.jobs[i].status = status;
                    if let Err(e) = state.write(workspace) {
                        tracing::warn!("cannot write {}: {e}", STATE_FILE);
                    }
                }
                Err(CallError(kind, why, wait)) => {
                    let ids = state.jobs[i].custom_ids.clone();
                    // Never created: the file is not kept for a later run.
                    state.jobs[i].delivered = true;
                    let _ = state.write(workspace);
                    for id in &ids {
                        give(
                            waiting,
                            id,
                            Delivery::Failed(failed(kind, why.clone(), wait)),
                        );
                    }
                }
            }
        }
    }

    /// Wait for every job that holds a waiting row, polling with back-off up to
    /// `poll_max`, and hand out the answers of each that ends. `true` when every row waiting
    /// has gone (time limit, Ctrl-C): the jobs stay recorded.
    async fn wait_for_jobs(
        &self,
        state: &mut State,
        waiting: &mut HashMap<String, Request>,
        workspace: &Path,
    ) -> bool {
        // Wait for every job that holds a waiting row.
        let mut pause = Duration::from_millis(500).min(self.poll_max);
        let mut errors_in_a_row = 0u32;
        loop {
            let open: Vec<usize> = (0..state.jobs.len())
                .filter(|&i| {
                    let j = &state.jobs[i];
                    !j.delivered
                        && j.batch_id.is_some()
                        && j.custom_ids.iter().any(|c| waiting.contains_key(c))
                })
                .collect();
            if open.is_empty() {
                break;
            }
            let mut any_open = false;
            for i in open {
                any_open |= self
                    .poll(i, state, waiting, workspace, &mut errors_in_a_row)
                    .await;
            }
            if !any_open {
                continue;
            }
            // Every row waiting has gone (time limit, Ctrl-C): the jobs stay recorded.
            if waiting.values().all(|r| r.tx.is_closed()) {
                return true;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(self.poll_max);
        }
        false
    }

    /// Read the state of job `i` once and act on it: an ended job's answers handed out, a
    /// failed job's rows told why, five failed reads in a row (or an `auth` one) given up
    /// on. `true` while the job is still open.
    async fn poll(
        &self,
        i: usize,
        state: &mut State,
        waiting: &mut HashMap<String, Request>,
        workspace: &Path,
        errors_in_a_row: &mut u32,
    ) -> bool {
        let mut any_open = false;
        let batch_id = state.jobs[i].batch_id.clone().unwrap_or_default();
        let status = match self.get(&format!("batches/{batch_id}")).await {
            Ok(v) => {
                *errors_in_a_row = 0;
                v
            }
            Err(CallError(kind, why, _)) => {
                *errors_in_a_row += 1;
                if *errors_in_a_row >= 5 || kind == FailureKind::Auth {
                    let ids = state.jobs[i].custom_ids.clone();
                    for id in &ids {
                        give(
                            waiting,
                            id,
                            Delivery::Failed(failed(
                                kind,
                                format!(
                                    "cannot read the state of Batch API job {batch_id}: {why} (the job is kept: run again to collect it)"
                                ),
                                None,
                            )),
                        );
                    }
                }
                return true;
            }
        };
        let job = &mut state.jobs[i];
        job.status = status["status"].as_str().unwrap_or("").to_owned();
        job.checked_at = crate::run::now_rfc3339();
        if let Some(counts) = status["request_counts"].as_object() {
            job.counts = counts
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                .collect();
        }
        let line = format!(
            "Batch API job {batch_id}: {} ({}/{} done)",
            job.status,
            job.counts.get("completed").copied().unwrap_or(0),
            job.counts
                .get("total")
                .copied()
                .unwrap_or(job.custom_ids.len() as u64)
        );
        for id in &job.custom_ids {
            if let Some(r) = waiting.get(id) {
                (r.activity.0)(line.clone());
            }
        }
        let _ = state.write(workspace);
        match state.jobs[i].status.as_str() {
            "completed" | "expired" | "cancelled" => {
                self.collect(&status, &state.jobs[i], waiting).await;
                state.jobs[i].delivered = true;
                let _ = state.write(workspace);
            }
            "failed" => {
                let why = status
                    .pointer("/errors/data/0/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given");
                for id in state.jobs[i].custom_ids.clone() {
                    give(
                        waiting,
                        &id,
                        Delivery::Failed(failed(
                            FailureKind::ApiError,
                            format!("Batch API job {batch_id} failed: {}", one_line(why, 200)),
                            None,
                        )),
                    );
                }
                state.jobs[i].delivered = true;
                let _ = state.write(workspace);
            }
            _ => any_open = true,
        }
        any_open
    }

    /// Download an ended job's output and error files and hand each row its line; a row
    /// in neither (the job expired or was cancelled first) ends `api_error`, saying so.
    async fn collect(&self, status: &Value, job: &Job, waiting: &mut HashMap<String, Request>) {
        let batch_id = job.batch_id.clone().unwrap_or_default();
        for key in ["output_file_id", "error_file_id"] {
            let Some(file) = status[key].as_str().filter(|f| !f.is_empty()) else {
                continue;
            };
            let bytes = match self.download(file).await {
                Ok(b) => b,
                Err(CallError(kind, why, _)) => {
                    for id in &job.custom_ids {
                        give(
                            waiting,
                            id,
                            Delivery::Failed(failed(
                                kind,
                                format!(
                                    "cannot download the results of Batch API job {batch_id}: {why}"
                                ),
                                None,
                            )),
                        );
                    }
                    return;
                }
            };
            for line in bytes.split(|b| *b == b'\n') {
                let Ok(v) = serde_json::from_slice::<Value>(line) else {
                    continue;
                };
                let Some(id) = v["custom_id"].as_str() else {
                    continue;
                };
                let delivery = match (
                    v.get("response").filter(|r| !r.is_null()),
                    v.get("error").filter(|e| !e.is_null()),
                ) {
                    (Some(r), _) => Delivery::Answer {
                        status: r["status_code"].as_u64().unwrap_or(500) as u16,
                        body: serde_json::to_vec(&r["body"]).unwrap_or_default(),
                        job: batch_id.clone(),
                    },
                    (None, Some(e)) => Delivery::Failed(failed(
                        FailureKind::ApiError,
                        format!(
                            "Batch API job {batch_id}: {}: {}",
                            e["code"].as_str().unwrap_or("error"),
                            one_line(e["message"].as_str().unwrap_or(""), 200)
                        ),
                        None,
                    )),
                    (None, None) => continue,
                };
                give(waiting, id, delivery);
            }
        }
        let how = status["status"].as_str().unwrap_or("ended");
        for id in &job.custom_ids {
            give(
                waiting,
                id,
                Delivery::Failed(failed(
                    FailureKind::ApiError,
                    format!(
                        "Batch API job {batch_id} ended `{how}` before this row was answered; run it again (--only failed)"
                    ),
                    None,
                )),
            );
        }
    }

    /// `POST /files` (multipart, `purpose=batch`): the file's id.
    async fn upload(&self, jsonl: Vec<u8>) -> Result<String, CallError> {
        let part = reqwest::multipart::Part::bytes(jsonl)
            .file_name("batch.jsonl")
            .mime_str("application/jsonl")
            .map_err(|e| CallError(FailureKind::ApiError, e.to_string(), None))?;
        let form = reqwest::multipart::Form::new()
            .text("purpose", "batch")
            .part("file", part);
        let request = self.http.client.post(self.url("files")).multipart(form);
        let v = self
            .send(request, "upload the requests (POST /files)")
            .await?;
        id_of(&v, "the uploaded file")
    }

    /// `POST /batches`: the job's id.
    async fn create(&self, file_id: &str) -> Result<String, CallError> {
        let body = json!({
            "input_file_id": file_id,
            "endpoint": ENDPOINT,
            "completion_window": "24h",
        });
        let request = self
            .http
            .client
            .post(self.url("batches"))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        let v = self.send(request, "create the job (POST /batches)").await?;
        id_of(&v, "the job")
    }

    /// The job made from input file `file_id`, if one exists, as `(id, status)`: `GET
    /// /batches` (newest first, 100 a page, `after` the last id while `has_more`; OpenAI API
    /// reference, "List batch"), looking at [`LIST_PAGES`] pages at most.
    ///
    /// Errors: the listing is refused or cannot be read.
    async fn created_from(&self, file_id: &str) -> Result<Option<(String, String)>, CallError> {
        let mut after: Option<String> = None;
        for _ in 0..LIST_PAGES {
            let mut url = self.endpoint("batches");
            url.query_pairs_mut().append_pair("limit", "100");
            if let Some(a) = after.take() {
                url.query_pairs_mut().append_pair("after", &a);
            }
            let request = self.http.client.get(url);
            let page = self.send(request, "list the jobs (GET /batches)").await?;
            let data = page["data"].as_array().cloned().unwrap_or_default();
            if let Some(job) = data
                .iter()
                .find(|b| b["input_file_id"].as_str() == Some(file_id))
            {
                let id = id_of(job, "the job")?;
                let status = job["status"].as_str().unwrap_or("validating").to_owned();
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
    }

    async fn get(&self, path: &str) -> Result<Value, CallError> {
        let request = self.http.client.get(self.url(path));
        self.send(request, &format!("read GET /{path}")).await
    }

    async fn download(&self, file_id: &str) -> Result<Vec<u8>, CallError> {
        let request = self
            .http
            .client
            .get(self.url(&format!("files/{file_id}/content")));
        let request = self.authorized(request);
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.unreachable(&e))?
            .to_vec();
        if !status.is_success() {
            return Err(self.refused(status, &bytes, "download results"));
        }
        Ok(bytes)
    }

    fn url(&self, path: &str) -> String {
        self.endpoint(path).to_string()
    }

    /// The API's `path` (`batches`, `files/ID/content`) beneath the base URL.
    fn endpoint(&self, path: &str) -> reqwest::Url {
        let mut url = self.http.base.clone();
        url.set_path(&format!(
            "{}/{path}",
            self.http.base.path().trim_end_matches('/')
        ));
        url
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let request = request.headers(self.http.headers.clone());
        match &self.http.key {
            Some(key)
                if !self
                    .http
                    .headers
                    .contains_key(reqwest::header::AUTHORIZATION) =>
            {
                request.bearer_auth(key)
            }
            _ => request,
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder, what: &str) -> Result<Value, CallError> {
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
        serde_json::from_slice(&bytes).map_err(|_| {
            CallError(
                FailureKind::ApiError,
                format!(
                    "could not {what}: HTTP {} but the body is not JSON",
                    status.as_u16()
                ),
                None,
            )
        })
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
        let message = serde_json::from_slice::<Value>(&body)
            .ok()
            .as_ref()
            .and_then(api_message)
            .unwrap_or_else(|| one_line(&String::from_utf8_lossy(&body), 200));
        let kind = match status.as_u16() {
            401 | 403 => FailureKind::Auth,
            429 if message.to_lowercase().contains("quota") => FailureKind::Quota,
            429 => FailureKind::RateLimited,
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

/// A job that ended without results to wait for.
/// Pages of `GET /batches` looked at for a job a killed run created (100 jobs each: a job
/// made minutes before is on the first).
const LIST_PAGES: usize = 5;

fn ended_badly(status: &str) -> bool {
    matches!(status, "failed")
}

fn give(waiting: &mut HashMap<String, Request>, id: &str, d: Delivery) {
    if let Some(r) = waiting.remove(id) {
        let _ = r.tx.send(d);
    }
}

fn id_of(v: &Value, what: &str) -> Result<String, CallError> {
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

/// The rows' JSONL lines as jobs' input files of at most [`MAX_REQUESTS`] lines and
/// [`MAX_FILE_BYTES`] bytes: each file's `custom_id`s and bytes.
fn chunks(rows: Vec<(String, Vec<u8>)>) -> Vec<(Vec<String>, Vec<u8>)> {
    let mut out: Vec<(Vec<String>, Vec<u8>)> = Vec::new();
    for (id, line) in rows {
        let full = out.last().is_none_or(|(ids, bytes)| {
            ids.len() >= MAX_REQUESTS || bytes.len() + line.len() > MAX_FILE_BYTES
        });
        if full {
            out.push((Vec::new(), Vec::new()));
        }
        if let Some((ids, bytes)) = out.last_mut() {
            ids.push(id);
            bytes.extend_from_slice(&line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_go_into_jobs_within_the_apis_limits() {
        let rows: Vec<(String, Vec<u8>)> = (0..MAX_REQUESTS + 3)
            .map(|i| {
                let id = format!("{i}-r");
                let line = jsonl_line(&id, &json!({"model": "m"}));
                (id, line)
            })
            .collect();
        let jobs = chunks(rows);
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].0.len(), MAX_REQUESTS);
        assert_eq!(jobs[1].0.len(), 3);
        let first = jobs[1].1.split(|b| *b == b'\n').next().unwrap_or_default();
        let line: Value = serde_json::from_slice(first).expect("JSON line");
        assert_eq!(line["custom_id"], "50000-r");
        assert_eq!(line["url"], "/v1/chat/completions");
        assert_eq!(line["method"], "POST");
    }
}
