//! `--batch-api`: the rows of a run as a provider's batch jobs instead of one request each
//! (half the price; results within the 24-hour window): OpenAI's Batch API
//! ([`super::batch_openai`]) for `--runner openai`, Anthropic's Message Batches
//! ([`super::batch_anthropic`]) for `--runner anthropic`. What differs between them is the
//! [`JobApi`] trait ([`super::batch_jobs`]); this file is the flow they share.
//!
//! Each item's attempt hands its request (the same body a direct request has) to one
//! collector, which waits until no more arrive for a moment, sends them as one or more jobs,
//! polls with back-off, and hands each row its answer, judged as a direct answer would be
//! (a row's status code and body go through the same reading). `custom_id` is the
//! teammate's name (`3-docs_a.md`: the row number and id).
//!
//! Durable: each job is written to `<workspace>/batch-api.json` before the runner sends or
//! waits on it (OpenAI's uploaded file; Anthropic's rows and the time they were sent), its
//! id as soon as the API answers. A run that was killed, or interrupted (Ctrl-C leaves the
//! jobs running), finds there the job that holds a row's request and waits for that one: no
//! second upload, no second bill. A recorded job without an id (the run was killed while it
//! was created) is looked for in the API's list of jobs before anything is sent again. A job
//! whose results were handed out is marked so; a row run again (`--only failed`) goes into a
//! new job.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use super::Http;
use super::answer::{Answer, failed};
use super::batch_jobs::{CallError, Calls, Delivery, JobApi, Phase};
use super::batch_record::{Job, STATE_FILE, State};
use super::exchange::write_capped;
use crate::agent::AgentResult;
use crate::failure::FailureKind;
use crate::report::{ProcessEnd, one_line};
use crate::run::backend::{Attempt, Backend, BoxFuture, Execution};
use crate::run::supervise::process::{ActivitySink, Cancel, interrupted};

/// How long the collector waits for more requests after the last one arrived.
const QUIET: Duration = Duration::from_millis(300);

struct Request {
    custom_id: String,
    /// Its line of a job's input (kept as bytes: 10,000 rows waiting at once).
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

/// The `--batch-api` backend: the HTTP backend's requests, sent as the provider's batch
/// jobs.
pub(crate) struct BatchApi {
    calls: Arc<Calls>,
    jobs: Arc<dyn JobApi>,
    queue: Arc<Mutex<Queue>>,
    /// Longest wait between two status reads (`--var poll_max_s`, default 60 s).
    poll_max: Duration,
    /// Said once: where the jobs are when the run is interrupted.
    told: Arc<std::sync::atomic::AtomicBool>,
}

impl BatchApi {
    /// The backend over `http`, its jobs sent through `jobs` (the wire format's
    /// [`super::wire::WireFormat::batch_jobs`]).
    pub(crate) fn new(http: Http, jobs: Box<dyn JobApi>, poll_max: Duration) -> BatchApi {
        BatchApi {
            calls: Arc::new(Calls {
                http: Arc::new(http),
            }),
            jobs: Arc::from(jobs),
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
            "{}\n  {}",
            self.calls.http.describe(schema),
            self.jobs.describe(&self.calls.base_shown())
        )
    }

    async fn run(&self, attempt: &Attempt<'_>, mut cancel: watch::Receiver<Cancel>) -> Execution {
        let started = Instant::now();
        let body =
            self.calls
                .http
                .request_body(attempt.prompt, attempt.output_schema, attempt.images);
        let (tx, rx) = oneshot::channel();
        let start_collector = {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.pending.push(Request {
                custom_id: attempt.item.teammate.clone(),
                line: self.jobs.line(&attempt.item.teammate, &body),
                tx,
                activity: attempt.activity_sink(),
            });
            q.last = Instant::now();
            q.workspace = attempt.workspace.to_owned();
            !std::mem::replace(&mut q.collecting, true)
        };
        if start_collector {
            let collector = Collector {
                calls: self.calls.clone(),
                jobs: self.jobs.clone(),
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
                    last_error: Some(format!("the {} job is still running; run the same \
                                              command again to collect its results",
                                             self.jobs.title())),
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
                    format!(
                        "the {} collector stopped without an answer",
                        self.jobs.title()
                    ),
                    None,
                ),
                AgentResult::default(),
                "",
            ),
            Some(Delivery::Failed(end)) => {
                self.ended(attempt, started, end, AgentResult::default(), "")
            }
            Some(Delivery::Answer { status, body, job }) => {
                let http = &self.calls.http;
                let body = http.scrub(body);
                write_capped(&attempt.stdout_log, &body, attempt.log_cap);
                let status = reqwest::StatusCode::from_u16(status)
                    .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR);
                let answer = Answer {
                    status,
                    headers: reqwest::header::HeaderMap::new(),
                    body,
                };
                let (end, agent) = http.read_answer(&answer);
                attempt.activity(format!("HTTP {} from job {job}", status.as_u16()));
                let exchange = format!(
                    "{} job {job}, custom_id {}: HTTP {}\n",
                    self.jobs.title(),
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
            "" => format!("{}: {end:?}\n", self.jobs.title()),
            e => e.to_owned(),
        };
        write_capped(&attempt.stderr_log, text.as_bytes(), attempt.log_cap);
        Execution {
            end,
            exit_code: None,
            elapsed: started.elapsed(),
            agent,
            stderr_end: None,
            stderr_logged: true,
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
        eprintln!(
            "runner: the {} job(s) {} keep running at the provider (their ids are in {}). Run \
             the same command again to collect the results — nothing is sent twice; or cancel \
             a job: {}",
            self.jobs.title(),
            open.join(", "),
            workspace.join(STATE_FILE).display(),
            self.jobs.cancel_hint(&self.calls.base_shown(), open[0])
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
    calls: Arc<Calls>,
    jobs: Arc<dyn JobApi>,
    queue: Arc<Mutex<Queue>>,
    poll_max: Duration,
}

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
        // Jobs made at another API are not there to be found.
        let base = self.calls.http.base.as_str().to_owned();
        state
            .jobs
            .retain(|j| j.api == self.jobs.title() && j.base_url == base);
        let order: Vec<String> = round.iter().map(|r| r.custom_id.clone()).collect();
        let mut waiting: HashMap<String, Request> = round
            .into_iter()
            .map(|r| (r.custom_id.clone(), r))
            .collect();
        self.recover(&mut state, &mut waiting, workspace).await;
        let held = |id: &String| {
            state
                .jobs
                .iter()
                .any(|j| !j.delivered && !ended_badly(&j.status) && j.custom_ids.contains(id))
        };
        // In the order the rows came (the input's), each once.
        let fresh: Vec<(String, Vec<u8>)> = order
            .into_iter()
            .filter(|id| !held(id))
            .filter_map(|id| {
                let line = std::mem::take(&mut waiting.get_mut(&id)?.line);
                Some((id, line)).filter(|(_, l)| !l.is_empty())
            })
            .collect();
        self.start_fresh(fresh, &mut state, &mut waiting, workspace)
            .await;
        if self
            .wait_for_jobs(&mut state, &mut waiting, workspace)
            .await
        {
            return;
        }
        for (id, r) in waiting.drain() {
            let _ = r.tx.send(Delivery::Failed(failed(
                FailureKind::ApiError,
                format!("no {} job holds the request of {id}", self.jobs.title()),
                None,
            )));
        }
    }

    /// The recorded jobs that hold a waiting row but have no id (a run was killed while it
    /// created them): the one the API shows is recorded; else OpenAI's is created from its
    /// uploaded file, and a job that cannot be (Anthropic's: the requests went with it) is
    /// dropped, its rows sent again as a new job.
    async fn recover(
        &self,
        state: &mut State,
        waiting: &mut HashMap<String, Request>,
        workspace: &Path,
    ) {
        for i in 0..state.jobs.len() {
            let job = &state.jobs[i];
            if job.delivered
                || job.uploaded_now
                || job.batch_id.is_some()
                || !job.custom_ids.iter().any(|c| waiting.contains_key(c))
            {
                continue;
            }
            let taken: Vec<String> = state
                .jobs
                .iter()
                .filter_map(|j| j.batch_id.clone())
                .collect();
            let made = match self.jobs.find_created(&self.calls, job, &taken).await {
                Ok(Some((id, status))) => Ok(Some((id, status))),
                Ok(None) if self.jobs.creates_from_record() => {
                    self.create(&state.jobs[i], &[]).await.map(Some)
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            match made {
                Ok(Some((id, status))) => {
                    state.jobs[i].batch_id = Some(id);
                    state.jobs[i].status = status;
                }
                // Never created: its rows go into a new job.
                Ok(None) => state.jobs[i].delivered = true,
                Err(CallError(kind, why, wait)) => {
                    if self.jobs.creates_from_record() {
                        // The file is not kept for a later run.
                        state.jobs[i].delivered = true;
                    }
                    for id in state.jobs[i].custom_ids.clone() {
                        give(
                            waiting,
                            &id,
                            Delivery::Failed(failed(kind, why.clone(), wait)),
                        );
                    }
                }
            }
            write(state, i, workspace);
        }
    }

    /// Send the requests no job holds yet as new jobs of at most the API's limits, each
    /// journaled in `batch-api.json` before it is created and again with its id; a row
    /// whose job could not be sent is told why.
    async fn start_fresh(
        &self,
        fresh: Vec<(String, Vec<u8>)>,
        state: &mut State,
        waiting: &mut HashMap<String, Request>,
        workspace: &Path,
    ) {
        for (ids, lines) in chunks(fresh, self.jobs.limits()) {
            let fail = |waiting: &mut HashMap<String, Request>, e: CallError| {
                for id in &ids {
                    give(waiting, id, Delivery::Failed(failed(e.0, e.1.clone(), e.2)));
                }
            };
            let staged = match self.jobs.stage(&self.calls, lines.clone()).await {
                Ok(s) => s,
                Err(e) => {
                    fail(waiting, e);
                    continue;
                }
            };
            state.jobs.push(Job {
                file_id: staged,
                batch_id: None,
                custom_ids: ids.clone(),
                status: String::new(),
                counts: Default::default(),
                checked_at: String::new(),
                asked_at: crate::run::now_rfc3339(),
                api: self.jobs.title().to_owned(),
                base_url: self.calls.http.base.as_str().to_owned(),
                delivered: false,
                uploaded_now: true,
            });
            let i = state.jobs.len() - 1;
            write(state, i, workspace);
            match self.create(&state.jobs[i], &lines).await {
                Ok((id, status)) => {
                    state.jobs[i].batch_id = Some(id);
                    state.jobs[i].status = status;
                }
                Err(e) => {
                    // Never created: nothing is kept for a later run.
                    state.jobs[i].delivered = true;
                    fail(waiting, e);
                }
            }
            write(state, i, workspace);
        }
    }

    /// Create `job` (its `lines` for an API that takes them with the job): its id and a
    /// first status.
    async fn create(&self, job: &Job, lines: &[u8]) -> Result<(String, String), CallError> {
        let id = self.jobs.create(&self.calls, &job.file_id, lines).await?;
        // A crash test's kill between creating the job and recording it.
        crate::fault::point("batch_created");
        Ok((id, "created".to_owned()))
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
        let title = self.jobs.title();
        let batch_id = state.jobs[i].batch_id.clone().unwrap_or_default();
        let polled = match self.jobs.poll(&self.calls, &batch_id).await {
            Ok(p) => {
                *errors_in_a_row = 0;
                p
            }
            Err(CallError(kind, why, _)) => {
                *errors_in_a_row += 1;
                if *errors_in_a_row < 5 && kind != FailureKind::Auth {
                    return true;
                }
                for id in state.jobs[i].custom_ids.clone() {
                    let why = format!(
                        "cannot read the state of {title} job {batch_id}: {why} (the job is \
                         kept: run again to collect it)"
                    );
                    give(waiting, &id, Delivery::Failed(failed(kind, why, None)));
                }
                return false;
            }
        };
        let job = &mut state.jobs[i];
        job.status = polled.status.clone();
        job.checked_at = crate::run::now_rfc3339();
        if !polled.counts.is_empty() {
            job.counts = polled.counts.clone();
        }
        let n = |k: &str| job.counts.get(k).copied();
        let line = format!(
            "{title} job {batch_id}: {} ({}/{} done)",
            job.status,
            n("completed").unwrap_or(0),
            n("total").unwrap_or(job.custom_ids.len() as u64)
        );
        for id in &job.custom_ids {
            if let Some(r) = waiting.get(id) {
                (r.activity.0)(line.clone());
            }
        }
        write(state, i, workspace);
        match &polled.phase {
            Phase::Open => return true,
            Phase::Ended => self.collect(&polled, &state.jobs[i], waiting).await,
            Phase::Failed(why) => {
                let why = format!("{title} job {batch_id} failed: {}", one_line(why, 200));
                for id in state.jobs[i].custom_ids.clone() {
                    give(
                        waiting,
                        &id,
                        Delivery::Failed(failed(FailureKind::ApiError, why.clone(), None)),
                    );
                }
            }
        }
        state.jobs[i].delivered = true;
        write(state, i, workspace);
        false
    }

    /// Download an ended job's results and hand each of its rows its own; a row with none
    /// (the job expired or was cancelled first) ends `api_error`, saying so.
    async fn collect(
        &self,
        polled: &super::batch_jobs::Polled,
        job: &Job,
        waiting: &mut HashMap<String, Request>,
    ) {
        let title = self.jobs.title();
        let batch_id = job.batch_id.clone().unwrap_or_default();
        match self.jobs.results(&self.calls, polled, job).await {
            Ok(rows) => {
                for (id, delivery) in rows {
                    if job.custom_ids.contains(&id) {
                        give(waiting, &id, delivery);
                    }
                }
            }
            Err(CallError(kind, why, _)) => {
                let why = format!("cannot download the results of {title} job {batch_id}: {why}");
                for id in &job.custom_ids {
                    give(
                        waiting,
                        id,
                        Delivery::Failed(failed(kind, why.clone(), None)),
                    );
                }
                return;
            }
        }
        for id in &job.custom_ids {
            give(
                waiting,
                id,
                Delivery::Failed(failed(
                    FailureKind::ApiError,
                    format!(
                        "{title} job {batch_id} ended `{}` before this row was answered; run it \
                         again (--only failed)",
                        polled.status
                    ),
                    None,
                )),
            );
        }
    }
}

/// Record job `i` of `state` in the workspace (a failure is logged: the run goes on).
fn write(state: &State, i: usize, workspace: &Path) {
    if let Err(e) = State::save_job(workspace, &state.jobs[i]) {
        tracing::warn!("cannot write {}: {e}", STATE_FILE);
    }
}

/// A job that ended without results to wait for.
fn ended_badly(status: &str) -> bool {
    matches!(status, "failed")
}

fn give(waiting: &mut HashMap<String, Request>, id: &str, d: Delivery) {
    if let Some(r) = waiting.remove(id) {
        let _ = r.tx.send(d);
    }
}

/// The rows' lines as jobs of at most `(requests, bytes)` each: each job's `custom_id`s and
/// bytes.
fn chunks(
    rows: Vec<(String, Vec<u8>)>,
    (max_requests, max_bytes): (usize, usize),
) -> Vec<(Vec<String>, Vec<u8>)> {
    let mut out: Vec<(Vec<String>, Vec<u8>)> = Vec::new();
    for (id, line) in rows {
        let full = out.last().is_none_or(|(ids, bytes)| {
            ids.len() >= max_requests || bytes.len() + line.len() > max_bytes
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
        let rows: Vec<(String, Vec<u8>)> = (0..7)
            .map(|i| (format!("{i}-r"), format!("line {i}\n").into_bytes()))
            .collect();
        let jobs = chunks(rows.clone(), (3, 1000));
        assert_eq!(
            jobs.iter().map(|j| j.0.len()).collect::<Vec<_>>(),
            [3, 3, 1]
        );
        assert_eq!(jobs[2].0, ["6-r"]);
        assert_eq!(jobs[1].1, b"line 3\nline 4\nline 5\n");
        // Bytes: 7 bytes a line, at most 15 a job.
        let jobs = chunks(rows, (100, 15));
        assert_eq!(jobs.len(), 4);
    }
}
