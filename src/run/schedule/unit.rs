//! One item's attempts, each in three steps: *prepare* (teammate folder, prompt file, argv
//! and environment, state folders, worktree), *execute* on a [`Backend`], *judge* (report,
//! schema, verify, worktree commit → [`report::judge`]); and retries when allowed. A unit
//! owns no shared state: it reports to the dispatcher through [`Event`]s.

use crate::run::record::folder::TeammateFolder;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use tokio::sync::{mpsc, watch};

use crate::agent::AgentResult;
use crate::agent::definition::{AttemptArgs, Invocation};
use crate::failure::FailureKind;
use crate::item::WorkItem;
use crate::prompt::{ItemContext, PromptContext, RetryContext, Var};
use crate::report::{self, Evidence, ItemStatus, ProcessEnd, Verdict, VerifyResult};
use crate::run::backend::{Attempt, Backend, Execution, last_line_of, read_capped};
use crate::run::events::Event;
use crate::run::isolation::worktree::Worktree;
use crate::run::record::outcome::{Outcome, Spend};
use crate::run::schedule::gate::{After, Gate};
use crate::run::supervise::process::{self, Cancel, Spawn, interrupted};
use crate::run::{RunSpec, now_rfc3339};
use crate::source::inline::{Expanded, Image};

/// Most bytes of an unstructured `working-context.md` carried into a retry prompt (a
/// structured one carries Part A and the last journal entry, each capped on its own), and
/// of a checkpoint inlined for an agent that cannot read files.
const WORKING_CONTEXT_MAX: u64 = 64 * 1024;

/// Longest value listed under "Values of this item", characters (the instruction carries the
/// values it uses in full; the listing must not double a huge field's size).
const VAR_SHOWN_MAX: usize = 300;

/// `v` as the prompt lists it: whole, or its first [`VAR_SHOWN_MAX`] characters with a note
/// saying where the rest is (an agent that only answers cannot read the input file).
fn shown_value(v: &str, line: u64, answer_only: bool) -> String {
    if v.chars().count() <= VAR_SHOWN_MAX {
        return v.to_owned();
    }
    let head: String = v.chars().take(VAR_SHOWN_MAX).collect();
    let total = v.chars().count();
    match answer_only {
        true => format!(
            "{head}… (cut: {total} characters in all; the instruction carries what it uses)"
        ),
        false => format!(
            "{head}… (cut: {total} characters in all; the full value is in the input row starting on line {line})"
        ),
    }
}

/// The task text of `item` with the files its instruction inlines read into it
/// ([`crate::source::inline::expand`]), and its images (for an agent that only answers).
///
/// Errors: why the item's files cannot be used — the item fails with kind `input`.
pub fn item_text(spec: &RunSpec, item: &WorkItem) -> Result<Expanded, String> {
    match &spec.files {
        Some(root) if !item.inline.is_empty() => crate::source::inline::expand(
            &item.body,
            &item.inline,
            root,
            spec.settings_for(item).runner.answers_only(),
        ),
        _ => Ok(Expanded {
            body: item.body.clone(),
            images: Vec::new(),
        }),
    }
}

/// Render the teammate prompt for `item` whose task text is `body` ([`item_text`]) (pure);
/// `retry` is set on attempts after the first.
pub fn render_prompt(
    spec: &RunSpec,
    item: &WorkItem,
    body: &str,
    retry: Option<RetryContext>,
) -> crate::error::Result<String> {
    let folder = spec.teammate(&item.teammate);
    let answer_only = spec.settings_for(item).runner.answers_only();
    // Checked at start-up (`Plan::check`): every path here can be named.
    let named = |p: &Path| {
        crate::run::schedule::plan::name_in_prompt(spec, &item.teammate, p)
            .unwrap_or_else(|| p.display().to_string())
    };
    let ctx = PromptContext {
        team: spec.team.clone(),
        teammate: item.teammate.clone(),
        item: ItemContext {
            id: item.id.clone(),
            // A title that only repeats the body's first line is left out of the heading.
            title: if body
                .trim_start()
                .starts_with(item.title.trim_end_matches('…'))
            {
                String::new()
            } else {
                item.title.clone()
            },
            body: body.to_owned(),
            checkpoint: item.checkpoint.as_ref().map(|p| named(p)),
            // An agent without tools cannot read the checkpoint: it gets the text.
            checkpoint_text: item
                .checkpoint
                .as_ref()
                .filter(|_| answer_only)
                .and_then(|p| read_capped(p, WORKING_CONTEXT_MAX)),
            vars: item
                .vars
                .iter()
                .map(|(n, v)| Var {
                    name: n.clone(),
                    value: shown_value(v, item.line, answer_only),
                })
                .collect(),
        },
        report_path: named(&folder.report()),
        working_context: named(&folder.working_context()),
        progress_path: named(&folder.progress()),
        output_schema: spec
            .schema
            .as_ref()
            .map(|s| serde_json::to_string_pretty(&s.0).unwrap_or_default()),
        retry,
        answer_only,
    };
    spec.template.render(&ctx)
}

/// The report file's text: `Ok(None)` when there is none, `Err` when it is too large or not
/// UTF-8 (then it is invalid, whatever the final text says).
fn read_report_file(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    // Never through a link, and only a plain file (issue 25).
    let mut file = match crate::fsutil::open_plain_file(path) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("the report file cannot be read: {e}")),
    };
    let Ok(meta) = file.metadata() else {
        return Ok(None);
    };
    if meta.len() > report::MAX_REPORT_BYTES {
        return Err(format!(
            "the report file is {} bytes, over the {} byte limit; keep large results in files and name them in the report",
            meta.len(),
            report::MAX_REPORT_BYTES
        ));
    }
    // Room for all of it up front: one read (`Take` gives `read_to_end` no size hint).
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    match file
        .by_ref()
        .take(report::MAX_REPORT_BYTES + 1)
        .read_to_end(&mut bytes)
    {
        Ok(_) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| "the report file is not UTF-8".to_string()),
        Err(_) => Ok(None),
    }
}

fn backoff(retry: u32, base: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << retry.saturating_sub(1).min(10));
    let capped = exp.min(Duration::from_secs(300));
    let jitter = rand::rng().random_range(0.5..1.5);
    capped.mul_f64(jitter)
}

struct AttemptResult {
    verdict: Verdict,
    /// (branch, commit, diffstat) with worktree isolation.
    git: Option<(String, String, String)>,
    exit_code: Option<i32>,
    elapsed: Duration,
    agent: AgentResult,
    report: Option<report::Report>,
    log: PathBuf,
    /// The report passed every check but the verify command, which an interrupt stopped.
    verify_cancelled: bool,
    /// What the attempt has not written to its teammate folder yet.
    held: Held,
}

/// An attempt's records the runner holds in memory instead of its teammate folder: its
/// prompt (handed to the agent as a sealed in-memory file, DESIGN §6b) and its stdout (held
/// while small and quick, [`process::HOLD_MAX`], [`process::HOLD_FOR`]). A completed item's
/// compacted record takes them from here, so a quick completed item writes neither; an
/// attempt that does not complete writes them ([`Held::write`]), since its folder is where a
/// person looks, and so does one that runs longer than [`process::HOLD_FOR`] (its prompt;
/// its stdout goes to its log by itself), for `runner show` and `logs` while it runs.
#[derive(Debug, Default)]
struct Held {
    /// The attempt's prompt (empty when it never got one).
    prompt: Arc<str>,
    /// `prompt.md`, while it is not written.
    prompt_file: Option<PathBuf>,
    /// The stdout log's path and the bytes it did not get, while it is not written.
    stdout: Option<(PathBuf, Vec<u8>)>,
}

impl Held {
    /// Write the prompt file and the stdout log that are still held. A file that cannot be
    /// written is logged and left out.
    fn write(&mut self) {
        if let Some(path) = self.prompt_file.take() {
            write_record(&path, self.prompt.as_bytes());
        }
        if let Some((path, bytes)) = self.stdout.take() {
            write_record(&path, &bytes);
        }
    }
}

/// Write one of the runner's records of a teammate (a new private file, never through a
/// link); a failure is logged, not fatal: the attempt's verdict does not depend on it.
fn write_record(path: &Path, bytes: &[u8]) {
    if let Err(e) = crate::fsutil::write_private_file(path, bytes) {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
}

/// What earlier runs left of an item: the attempt numbering continues after theirs, and
/// what their attempts cost counts in the item's outcome.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Earlier {
    /// The number of this run's first attempt (1 + the highest one started before).
    pub first_attempt: u32,
    /// What every earlier attempt of the item cost.
    pub spent: Spend,
    /// The outcome of an earlier run whose verify an interrupt stopped
    /// ([`Outcome::awaiting_verify`]): only the verify command runs, on its report.
    pub verify_only: Option<Box<Outcome>>,
    /// Requests of earlier runs the provider refused unprocessed (`refused` attempts): not
    /// counted in the item's `attempts`.
    pub refused: u32,
    /// Rate-limit waits of earlier runs.
    pub rate_limit_waits: u32,
}

/// Run every attempt of `item`; `earlier` continues the numbering and the spending of
/// earlier runs.
/// Every attempt first passes the team's `gate` (rate-limit pauses, adaptive concurrency,
/// stops): a rate-limited attempt is made again after the pause without using one of
/// `--retries`; when the team stops, an item that has not started ends `skipped`.
#[allow(clippy::too_many_arguments)]
pub async fn run_item(
    spec: Arc<RunSpec>,
    backend: Arc<dyn Backend>,
    gate: Arc<Gate>,
    item: WorkItem,
    earlier: Earlier,
    tx: mpsc::UnboundedSender<Event>,
    mut cancel: watch::Receiver<Cancel>,
) {
    let dir = spec.teammate_dir(&item.teammate);
    let Earlier {
        first_attempt,
        spent: mut spend,
        verify_only,
        mut refused,
        mut rate_limit_waits,
    } = earlier;
    if let Some(earlier) = verify_only {
        let last_attempt = first_attempt.saturating_sub(1).max(1);
        let outcome = verify_again(&spec, &item, *earlier, last_attempt, cancel).await;
        finished(&spec, outcome, last_attempt, Held::default(), true, &tx);
        return;
    }
    // An attempt whose start was never journaled (the runner was killed as it started)
    // still left its stdout log: its number is not used again.
    let highest = crate::run::record::compact::logged_attempts(&dir)
        .last()
        .copied();
    let first_attempt = first_attempt.max(highest.unwrap_or(0) + 1);
    let started_at = now_rfc3339();
    // The files the item's instruction inlines, read once for all its attempts: a file that
    // cannot be used fails the item before any attempt (kind `input`, not retried).
    let text = match item_text(&spec, &item) {
        Ok(text) => text,
        Err(reason) => {
            let mut outcome = Outcome::not_run(
                &item.id,
                &item.teammate,
                &item.title,
                ItemStatus::Failed,
                reason,
            );
            outcome.failure_kind = Some(FailureKind::Input);
            outcome.content_hash = item.content.clone();
            let _ = tx.send(Event::ItemFinished(Box::new(outcome)));
            return;
        }
    };
    // The first attempt's prompt, rendered once: hashed (to notice a changed item on resume)
    // and used.
    let first_prompt = render_prompt(&spec, &item, &text.body, None);
    let content_hash = item.content.clone();
    let mut first_prompt = Some(first_prompt);
    let mut retry_ctx: Option<RetryContext> = None;
    let mut attempt = first_attempt;
    let mut retries_used = 0u32;
    let mut previous: Option<AttemptResult> = None;
    // Time spent on rate limits — waiting at the gate, waiting alone, and the rate-limited
    // attempts themselves — against --rate-limit-wait.
    let mut rate_limit_waited = Duration::ZERO;
    // This item's rate limits in a row: from the third, its own back-off grows on top of
    // the provider's hint (a provider that keeps saying "try again in 1s").
    let mut limited_in_a_row = 0u32;
    let mut requeued = false;
    let mut last_made = attempt;
    // The prompt of a request the provider refused unprocessed, sent again as it was.
    let mut refused_prompt: Option<crate::error::Result<String>> = None;
    let mut last = loop {
        let waiting_since = Instant::now();
        let admitted = tokio::select! {
            p = gate.admit() => Some(p),
            _ = interrupted(&mut cancel) => None,
        };
        if requeued {
            rate_limit_waited += waiting_since.elapsed();
        }
        let permit = match (admitted, previous.take()) {
            (Some(Ok(permit)), _) => permit,
            (None, Some(prev)) => {
                break AttemptResult {
                    verdict: report::judge_interrupted_retry(),
                    ..prev
                };
            }
            (Some(Err(_)), Some(prev)) => break prev,
            (admitted, None) => {
                let (status, reason) = match admitted {
                    Some(Err(why)) => (ItemStatus::Skipped, format!("not started: {why}")),
                    _ => (
                        ItemStatus::Cancelled,
                        "not started: the run was interrupted".to_owned(),
                    ),
                };
                let outcome =
                    Outcome::not_run(&item.id, &item.teammate, &item.title, status, reason);
                let _ = tx.send(Event::ItemFinished(Box::new(outcome)));
                return;
            }
        };
        let prompt = match (refused_prompt.take(), retry_ctx.take()) {
            (Some(same), _) => same,
            (None, Some(retry)) => render_prompt(&spec, &item, &text.body, Some(retry)),
            (None, None) => first_prompt
                .take()
                .unwrap_or_else(|| render_prompt(&spec, &item, &text.body, None)),
        };
        // Kept where a refused request is sent again as it was.
        let sent = match (spec.settings_for(&item).runner.answers_only(), &prompt) {
            (true, Ok(p)) => Some(Ok(p.clone())),
            _ => None,
        };
        let mut result = attempt_once(
            &spec,
            backend.as_ref(),
            &item,
            AttemptLogs { dir: &dir, attempt },
            first_attempt == 1,
            prompt,
            &text.images,
            &tx,
            cancel.clone(),
        )
        .await;
        last_made = attempt;
        let this_attempt = Spend {
            cost_usd: result.agent.cost_usd,
            input_tokens: result.agent.input_tokens,
            cached_input_tokens: result.agent.cached_input_tokens,
            output_tokens: result.agent.output_tokens,
        };
        spend.add(this_attempt);
        let limited = matches!(
            result.verdict.kind,
            Some(FailureKind::RateLimited | FailureKind::Quota)
        );
        if limited {
            limited_in_a_row += 1;
            rate_limit_waited += result.elapsed;
        } else {
            limited_in_a_row = 0;
        }
        let mut after = permit.ended(
            &item.id,
            &result.verdict,
            result.agent.cost_usd,
            rate_limit_waited,
        );
        let interrupted = *cancel.borrow() != Cancel::None;
        requeued = matches!(after, After::Requeue | After::Wait(_)) && !interrupted;
        // The wait the item adds on its own (a failed probe's, its repeated rate limits'
        // back-off) counts against --rate-limit-wait as the gate's does.
        let grown = repeated_limit_backoff(limited_in_a_row);
        let own_wait = match after {
            After::Wait(wait) => wait + grown,
            _ => grown,
        };
        if requeued && rate_limit_waited + own_wait > gate.limits().rate_limit_wait {
            requeued = false;
            after = After::Final;
        }
        // The HTTP backend's 429 (or 503, 529): the model never saw the request, so it is
        // sent again as it was — no "previous attempt" in the prompt (which would also miss
        // the provider's prompt cache) — and it is a wait, not an attempt.
        let refused_now = requeued && spec.settings_for(&item).runner.answers_only();
        if requeued {
            rate_limit_waits += 1;
        }
        if refused_now {
            refused += 1;
        }
        if after == After::Final && result.verdict.kind == Some(FailureKind::RateLimited) {
            explain_last_rate_limit(
                &mut result.verdict,
                rate_limit_waited,
                gate.limits().rate_limit_wait,
                grown,
            );
        }
        let retrying = requeued
            || (after == After::Judged
                && retries_used < spec.settings_for(&item).retries
                && !interrupted
                && spec
                    .settings_for(&item)
                    .retry_on
                    .contains(&result.verdict.status));
        // What the attempt held in memory goes to its folder unless the item completes
        // with it and is compacted.
        if retrying || result.verdict.status != ItemStatus::Completed || spec.settings.keep_logs {
            result.held.write();
        }
        let _ = tx.send(Event::AttemptFinished {
            id: item.id.clone(),
            teammate: item.teammate.clone(),
            attempt,
            verdict: result.verdict.clone(),
            retrying,
            refused: refused_now,
            spend: this_attempt,
            at: now_rfc3339(),
        });
        if !retrying {
            break result;
        }
        if refused_now && let Some(same) = sent {
            refused_prompt = Some(same);
        } else {
            retry_ctx = Some(retry_context(
                &spec.teammate(&item.teammate),
                &item,
                attempt + 1,
                &result,
            ));
        }
        attempt += 1;
        // A retry by --retries waits its own back-off; a failed probe its own rate-limit
        // wait; a re-queued one waits at the gate.
        let wait = match after {
            After::Wait(_) if requeued => Some(own_wait),
            _ if requeued => (!grown.is_zero()).then_some(grown),
            _ => {
                retries_used += 1;
                Some(backoff(retries_used, spec.settings_for(&item).retry_delay))
            }
        };
        if let Some(wait) = wait {
            let since = Instant::now();
            // A team that stops meanwhile starts no more attempts: the wait ends with it.
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = cancel.changed() => {}
                _ = gate.until_stopped() => {}
            }
            if requeued {
                rate_limit_waited += since.elapsed();
            }
            if *cancel.borrow() != Cancel::None {
                break AttemptResult {
                    verdict: report::judge_interrupted_retry(),
                    ..result
                };
            }
        }
        previous = Some(result);
    };
    let counts = Counts {
        attempts: last_made.saturating_sub(refused),
        rate_limit_waits,
    };
    let held = std::mem::take(&mut last.held);
    let outcome = final_outcome(&item, last, counts, started_at, content_hash, spend);
    // The folder holds logs of attempts before the last: an earlier run's, or this run's.
    let earlier_logs = highest.is_some() || last_made > first_attempt;
    finished(&spec, outcome, last_made, held, earlier_logs, &tx);
}

/// Send the item's outcome. A completed item's folder is compacted first
/// ([`crate::run::record::compact`], unless `--keep-logs`), with what its last attempt
/// (`attempt`) still `held` in memory: its outcome's log then names the record file, so no
/// output names a removed log. `earlier_logs`: the folder may hold logs of attempts before
/// the last. Whatever is still held when the folder stays is written to it.
fn finished(
    spec: &RunSpec,
    mut outcome: Outcome,
    attempt: u32,
    mut held: Held,
    earlier_logs: bool,
    tx: &mpsc::UnboundedSender<Event>,
) {
    let mut compacted = false;
    if outcome.status == ItemStatus::Completed && !spec.settings.keep_logs {
        let folder = spec.teammate(&outcome.teammate);
        let log = PathBuf::from(&outcome.log);
        let fresh = crate::run::record::compact::Fresh {
            prompt: (!held.prompt.is_empty()).then_some(&*held.prompt),
            stdout: held.stdout.as_ref().map(|(_, bytes)| bytes.as_slice()),
            earlier: earlier_logs,
        };
        match crate::run::record::compact::compact(
            &spec.workspace,
            &folder,
            &outcome.id,
            attempt,
            &log,
            fresh,
            &spec.shared_prompts,
        ) {
            Ok(record) => {
                outcome.log = record.display().to_string();
                compacted = true;
            }
            Err(e) => tracing::warn!("item {}: its folder is kept: {e}", outcome.id),
        }
    }
    if !compacted {
        held.write();
    }
    let _ = tx.send(Event::ItemFinished(Box::new(outcome)));
}

/// The back-off an item adds to the provider's wait after its `n`th rate limit in a row:
/// none for the first two, then 2 s, 4 s, 8 s … up to 5 minutes — so a hint that repeats
/// ("try again in 1s", forever) grows instead of being obeyed to the letter.
fn repeated_limit_backoff(n: u32) -> Duration {
    match n {
        0..=2 => Duration::ZERO,
        n => Duration::from_secs(2)
            .saturating_mul(1 << (n - 3).min(8))
            .min(Duration::from_secs(300)),
    }
}

/// How many times an item was attempted and waited, across runs.
struct Counts {
    /// Executions: attempts made, but requests refused unprocessed.
    attempts: u32,
    /// Rate-limit waits.
    rate_limit_waits: u32,
}

/// The item's outcome from its last attempt; `counts` its attempts and waits across runs,
/// `started_at` when the item's first attempt began (RFC 3339), `spend` what every attempt
/// of every run cost.
fn final_outcome(
    item: &WorkItem,
    last: AttemptResult,
    counts: Counts,
    started_at: String,
    content_hash: String,
    spend: Spend,
) -> Outcome {
    let report = last.report.as_ref();
    Outcome {
        id: item.id.clone(),
        teammate: item.teammate.clone(),
        title: item.title.clone(),
        status: last.verdict.status,
        attempts: counts.attempts,
        rate_limit_waits: counts.rate_limit_waits,
        exit_code: last.exit_code,
        duration_s: (last.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
        started_at,
        finished_at: now_rfc3339(),
        error: report::one_line(&last.verdict.reason, 1000),
        failure_kind: last.verdict.kind,
        summary: report
            .map(|r| report::one_line(&r.summary, 500))
            .unwrap_or_default(),
        log: last.log.display().to_string(),
        output: report
            .map(|r| r.output.clone())
            .unwrap_or(serde_json::Value::Null),
        report: report.map(|r| r.raw.clone()),
        cost_usd: spend.cost_usd,
        input_tokens: spend.input_tokens,
        cached_input_tokens: spend.cached_input_tokens,
        output_tokens: spend.output_tokens,
        turns: last.agent.turns,
        session_id: last.agent.session_id,
        model: last.agent.model,
        content_hash,
        branch: last.git.as_ref().map(|g| g.0.clone()),
        commit: last.git.as_ref().map(|g| g.1.clone()),
        diffstat: last.git.as_ref().map(|g| g.2.clone()),
        awaiting_verify: last.verify_cancelled && last.verdict.status == ItemStatus::Cancelled,
    }
}

/// What attempt `next` of `item` is told about the one before (`result`): its verdict, its
/// report and the working context the teammate left in `dir`.
fn retry_context(
    folder: &TeammateFolder,
    item: &WorkItem,
    next: u32,
    result: &AttemptResult,
) -> RetryContext {
    RetryContext {
        attempt: next,
        status: result.verdict.status.to_string(),
        reason: result.verdict.reason.clone(),
        report: result
            .report
            .as_ref()
            .map(|r| serde_json::to_string_pretty(&r.raw).unwrap_or_default()),
        working_context: crate::working_context::carry(
            &folder.working_context(),
            &item.teammate,
            WORKING_CONTEXT_MAX,
            read_capped,
        ),
    }
}

/// The reason of a rate-limited attempt after which the gate gave up: how long the item
/// waited, and that the next wait would pass `--rate-limit-wait` (the gate gives up when
/// the next wait would pass the bound, not after it).
fn explain_last_rate_limit(
    verdict: &mut Verdict,
    waited: Duration,
    bound: Duration,
    own: Duration,
) {
    let wait = verdict.retry_after_s.and_then(crate::failure::hinted_wait);
    let next = match (wait, own.is_zero()) {
        (Some(w), true) => format!("waiting the {} it asks for", rough_duration(w)),
        (Some(w), false) => format!(
            "waiting the {} it asks for and the item's own back-off of {} (its rate limits repeat)",
            rough_duration(w),
            rough_duration(own)
        ),
        (None, _) => "another back-off".to_owned(),
    };
    verdict.reason = format!(
        "still rate limited after waiting {}; {next} would pass --rate-limit-wait {}: {}",
        rough_duration(waited),
        rough_duration(bound),
        verdict.reason
    );
}

/// Resume an item whose verify command an interrupt stopped: run only the verify, on the
/// report its agent left (`earlier`, [`Outcome::awaiting_verify`]), in the run's working
/// directory with the attempt's `RUNNER_*` variables. Passed: completed; failed:
/// `verify_failed`; interrupted again: still awaiting its verify.
async fn verify_again(
    spec: &RunSpec,
    item: &WorkItem,
    earlier: Outcome,
    attempt: u32,
    cancel: watch::Receiver<Cancel>,
) -> Outcome {
    let Some(argv) = &spec.settings_for(item).verify else {
        // No verify any more: the report stands as the agent left it.
        return Outcome {
            status: ItemStatus::Completed,
            error: String::new(),
            failure_kind: None,
            awaiting_verify: false,
            finished_at: now_rfc3339(),
            ..earlier
        };
    };
    let folder = spec.teammate(&item.teammate);
    let dir = folder.dir();
    let logs = AttemptLogs { dir, attempt };
    let var = |k: &str, v: &dyn AsRef<OsStr>| (k.to_string(), v.as_ref().to_owned());
    let mut env = vec![
        var("RUNNER_REPORT", &folder.report()),
        var("RUNNER_ITEM_ID", &item.id),
        var("RUNNER_TEAM", &spec.team),
        var("RUNNER_TEAMMATE", &item.teammate),
        var("RUNNER_WORKSPACE", &spec.workspace),
        var("RUNNER_TEAMMATE_DIR", &folder.work()),
        var("RUNNER_ATTEMPT", &logs.attempt.to_string()),
    ];
    if let Some(stage) = &item.stage {
        env.push(var("RUNNER_STAGE", &stage.name));
        env.push(var("RUNNER_ROW_ID", &stage.row));
    }
    let (result, verify_log) = run_verify(spec, item, argv, &spec.cwd, &logs, &env, cancel).await;
    let verdict = match result {
        VerifyResult::Passed | VerifyResult::NotRun => (ItemStatus::Completed, None, String::new()),
        VerifyResult::Failed(why) => (
            ItemStatus::Failed,
            Some(FailureKind::VerifyFailed),
            format!("verify failed: {}", report::one_line(&why, 200)),
        ),
        VerifyResult::Cancelled => return earlier,
    };
    let log = match verdict.1 {
        Some(_) if !verify_log.as_os_str().is_empty() => verify_log.display().to_string(),
        _ => earlier.log.clone(),
    };
    Outcome {
        status: verdict.0,
        failure_kind: verdict.1,
        error: verdict.2,
        log,
        awaiting_verify: false,
        finished_at: now_rfc3339(),
        ..earlier
    }
}

/// `d` in its two largest units, whole seconds (`1h 5m`, `3170years 3months`, `0s`).
fn rough_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        // Under a second: milliseconds (0.2 s read "0s").
        return format!("{}ms", d.as_millis());
    }
    let full = humantime::format_duration(Duration::from_secs(d.as_secs())).to_string();
    full.split(' ').take(2).collect::<Vec<_>>().join(" ")
}

/// An attempt that ended before its agent ran; `log` is the log that explains it, if one was
/// written (an empty path otherwise: no log column then points at a file that is not there).
fn failed_before_start(reason: String, log: PathBuf) -> AttemptResult {
    AttemptResult {
        verdict: report::judge_unprepared(reason),
        git: None,
        exit_code: None,
        elapsed: Duration::ZERO,
        agent: AgentResult::default(),
        report: None,
        log,
        verify_cancelled: false,
        held: Held::default(),
    }
}

/// One attempt: prepare it, execute it on `backend`, judge it. `new_item` when this team's
/// journal had no attempt of the item before this run (then a worktree branch of its name is
/// left from an earlier team).
#[allow(clippy::too_many_arguments)]
async fn attempt_once(
    spec: &RunSpec,
    backend: &dyn Backend,
    item: &WorkItem,
    logs: AttemptLogs<'_>,
    new_item: bool,
    prompt: crate::error::Result<String>,
    images: &[Image],
    tx: &mpsc::UnboundedSender<Event>,
    cancel: watch::Receiver<Cancel>,
) -> AttemptResult {
    let prepared = match prepare(spec, item, &logs, new_item, prompt, cancel.clone()).await {
        Ok(p) => p,
        Err(f) => return failed_before_start(f.reason, f.log),
    };
    let attempt = Attempt {
        item,
        number: logs.attempt,
        runner: &spec.settings_for(item).runner,
        invocation: &prepared.invocation,
        prompt: &prepared.prompt,
        prompt_file: &prepared.prompt_file,
        report_path: &prepared.report_path,
        cwd: &prepared.cwd,
        workspace: &spec.workspace,
        env: &prepared.env,
        stdout_log: logs.path("stdout.log"),
        stderr_log: logs.path("stderr.log"),
        log_cap: spec.settings_for(item).log_cap,
        timeout: spec.settings_for(item).timeout,
        grace: spec.settings_for(item).grace,
        pipe_wait: match spec.settings_for(item).runner.leaves_processes {
            true => Duration::ZERO,
            false => spec.pipe_wait,
        },
        sandbox: prepared.sandbox.as_deref(),
        output_schema: spec.schema_for(item).map(|(s, _)| s),
        images,
        events: tx,
    };
    // What the teammate says while it works; an agent that only answers has no file to say
    // it in.
    let progress = (!spec.settings_for(item).runner.answers_only()).then(|| {
        let who = crate::run::supervise::progress::Teammate {
            id: item.id.clone(),
            teammate: item.teammate.clone(),
            attempt: logs.attempt,
            log: logs.path("stderr.log"),
        };
        let path = spec.teammate(&item.teammate).progress();
        crate::run::supervise::progress::watch(path, who, tx.clone())
    });
    // The prompt file of an attempt that runs long enough to be looked at while it runs.
    let mut prompt_file = (!prepared.prompt_file_written).then(|| prepared.prompt_file.clone());
    let mut execution = {
        let run = backend.execute(&attempt, cancel.clone());
        tokio::pin!(run);
        tokio::select! {
            biased;
            done = &mut run => done,
            _ = tokio::time::sleep(process::HOLD_FOR), if prompt_file.is_some() => {
                if let Some(path) = prompt_file.take() {
                    write_record(&path, prepared.prompt.as_bytes());
                }
                run.await
            }
        }
    };
    if let Some(watch) = progress {
        watch.finish().await;
    }
    let stdout = execution
        .stdout_held
        .take()
        .map(|bytes| (attempt.stdout_log.clone(), bytes));
    let mut result = judge_attempt(spec, item, &prepared, execution, &logs, cancel).await;
    result.held = Held {
        prompt: prepared.prompt.clone(),
        prompt_file,
        stdout,
    };
    result
}

/// An attempt made ready for a backend by [`prepare`].
struct Prepared {
    prompt: Arc<str>,
    prompt_file: PathBuf,
    /// `prompt_file` is written: the invocation names it.
    prompt_file_written: bool,
    report_path: PathBuf,
    invocation: Invocation,
    worktree: Option<Worktree>,
    cwd: PathBuf,
    env: Vec<(String, OsString)>,
    sandbox: Option<Vec<PathBuf>>,
}

/// Whether the agents of `spec` start inside a git work tree: always with `--isolate
/// worktree`, else when the run's working directory is in one (a `.git` above it).
pub fn agent_in_git_work_tree(spec: &RunSpec) -> bool {
    spec.isolation.is_some()
        || *spec
            .cwd_in_git
            .get_or_init(|| crate::store::git_root(&spec.cwd).is_some())
}

/// Prepare an attempt: the teammate folder (an earlier attempt's report moved aside, the
/// working-context skeleton written when there is no such file yet), the prompt file, the
/// argv and environment from the runner definition, the state folders, and with isolation
/// the worktree and its one-time set-up command.
///
/// Errors: why the attempt cannot start, with the set-up command's log when that failed.
async fn prepare(
    spec: &RunSpec,
    item: &WorkItem,
    logs: &AttemptLogs<'_>,
    new_item: bool,
    prompt: crate::error::Result<String>,
    cancel: watch::Receiver<Cancel>,
) -> Result<Prepared, HelperFailure> {
    let (dir, attempt) = (logs.dir, logs.attempt);
    let folder = spec.teammate(&item.teammate);
    let work = folder.work();
    let report_path = folder.report();
    // The runner's part, then the teammate's: both private (0700).
    for d in [dir, work.as_path()] {
        crate::fsutil::create_private_dir(d).map_err(|e| HelperFailure::before(e.to_string()))?;
    }
    // A report left by an earlier attempt must never count for this one: it is kept, out of
    // the teammate's reach, beside that attempt's logs.
    if report_path.exists() {
        let earlier = AttemptLogs {
            dir,
            attempt: attempt.saturating_sub(1).max(1),
        };
        let _ = std::fs::rename(&report_path, earlier.path("report.json"));
        let _ = std::fs::remove_file(&report_path);
    }
    // The working context's structure is in the file, not the prompt (which only points
    // at it); an earlier attempt's or the teammate's own file is kept. An agent that only
    // answers keeps none.
    if !spec.settings_for(item).runner.answers_only() {
        crate::working_context::seed(&work, &item.teammate).map_err(|e| {
            HelperFailure::before(format!(
                "cannot write {}: {e}",
                folder.working_context().display()
            ))
        })?;
    }
    let prompt: Arc<str> = prompt
        .map_err(|e| HelperFailure::before(format!("cannot render the prompt: {e}")))?
        .into();
    let prompt_file = folder.prompt();
    let args = AttemptArgs {
        prompt_file: &prompt_file,
        report: &report_path,
        workspace: &work,
        prompt: &prompt,
        model: spec.settings_for(item).model.as_deref(),
        agent_args: &spec.settings_for(item).agent_args,
        command: &spec.settings_for(item).command,
        vars: &spec.settings_for(item).vars,
        in_git_work_tree: agent_in_git_work_tree(spec),
    };
    let invocation = spec
        .settings
        .runner
        .invocation(&args)
        .map_err(|e| HelperFailure::before(e.to_string()))?;
    // The file is written before the attempt only for an agent that reads it by its name; a
    // prompt on stdin or in an argument is handed over from memory.
    let prompt_file_written = invocation.names(&prompt_file);
    if !prompt_file_written && attempt > 1 {
        // An earlier attempt's prompt must not pass for this one's while it is held.
        let _ = std::fs::remove_file(&prompt_file);
    }
    if prompt_file_written {
        crate::fsutil::write_private_file(&prompt_file, prompt.as_bytes()).map_err(|e| {
            HelperFailure::before(format!("cannot write {}: {e}", prompt_file.display()))
        })?;
    }
    let worktree = match &spec.isolation {
        None => None,
        Some(iso) => {
            let path = spec.workspace.join("worktrees").join(&item.teammate);
            Some(
                iso.prepare(&item.teammate, &path, new_item)
                    .await
                    .map_err(|e| HelperFailure::before(e.to_string()))?,
            )
        }
    };
    let cwd = worktree
        .as_ref()
        .map_or_else(|| spec.cwd.clone(), |w| w.path.clone());
    // Paths go to the child as their raw bytes (a folder name need not be UTF-8).
    let var = |k: &str, v: &dyn AsRef<OsStr>| (k.to_string(), v.as_ref().to_owned());
    let mut env = vec![
        var("RUNNER_REPORT", &report_path),
        var("RUNNER_ITEM_ID", &item.id),
        var("RUNNER_TEAM", &spec.team),
        var("RUNNER_TEAMMATE", &item.teammate),
        var(
            "RUNNER_CHECKPOINT",
            &item.checkpoint.clone().unwrap_or_default(),
        ),
        var("RUNNER_WORKSPACE", &spec.workspace),
        var("RUNNER_TEAMMATE_DIR", &work),
        var("RUNNER_PROGRESS", &folder.progress()),
        var("RUNNER_ATTEMPT", &attempt.to_string()),
    ];
    // A stage of a row's chain (BATCH.md `stages:`) is told which.
    if let Some(stage) = &item.stage {
        env.push(var("RUNNER_STAGE", &stage.name));
        env.push(var("RUNNER_ROW_ID", &stage.row));
    }
    if let Some(wt) = &worktree {
        env.push(var("RUNNER_WORKTREE", &wt.path));
    }
    // A private TMPDIR (0700): CLIs leave whole conversations in temporary files (Gemini's
    // error dumps), which no other user may read, and teammates never share one. It is the
    // teammate's `work/` folder itself: no folder of its own per attempt.
    env.push(var("TMPDIR", &work));
    env.extend(invocation.env_set.iter().map(|(k, v)| var(k, v)));
    for name in &invocation.state_dirs {
        let state = work.join("state").join(name.to_lowercase());
        crate::fsutil::create_private_dir(&state)
            .map_err(|e| HelperFailure::before(e.to_string()))?;
        env.push(var(name, &state));
    }
    for (name, text) in &invocation.env_files {
        // A new private file every attempt, never through a link an earlier attempt left.
        let path = dir.join(format!("{}.env-file", name.to_lowercase()));
        crate::fsutil::write_private_file(&path, text.as_bytes()).map_err(|e| {
            HelperFailure::before(format!(
                "cannot write {} (`[env] files`): {e}",
                path.display()
            ))
        })?;
        env.push(var(name, &path));
    }
    if let (Some(wt), Some(iso)) = (&worktree, &spec.isolation)
        && let Some(setup) = &iso.setup
        && !dir.join(".worktree-setup-done").exists()
    {
        run_setup(spec, item, setup, &wt.path, logs, &env, cancel).await?;
        iso.record_setup(wt)
            .await
            .map_err(|e| HelperFailure::before(format!("after worktree setup: {e}")))?;
        let _ = std::fs::write(dir.join(".worktree-setup-done"), b"");
    }
    let sandbox = (spec.settings.sandbox == crate::sandbox::Mode::Landlock)
        .then(|| writable(spec, item, &cwd, &work, &env));
    Ok(Prepared {
        prompt,
        prompt_file,
        prompt_file_written,
        report_path,
        invocation,
        worktree,
        cwd,
        env,
        sandbox,
    })
}

/// The reason of a sandboxed attempt that failed as `agent_error`, led by the write the
/// sandbox denied when its stderr names one ([`crate::sandbox::denied_write`]) that the
/// sandbox explains: outside what the attempt may write (`granted`) and the team workspace,
/// and writable to the user without the sandbox (else it was the file's permissions, or a
/// read, which Landlock never denies). That path and the key that would allow it.
fn sandbox_hint(
    spec: &RunSpec,
    granted: &[PathBuf],
    stderr: Option<&str>,
    reason: String,
) -> String {
    let Some(path) = stderr.and_then(crate::sandbox::denied_write) else {
        return reason;
    };
    let real = crate::fsutil::real_path(&path);
    let inside = |root: &Path| real.starts_with(crate::fsutil::real_path(root));
    if inside(&spec.workspace) || granted.iter().any(|g| inside(g)) {
        return reason;
    }
    // The path, or the folder it would be made in.
    let Some(existing) = path.ancestors().find(|a| a.exists()) else {
        return reason;
    };
    if nix::unistd::access(existing, nix::unistd::AccessFlags::W_OK).is_err() {
        return reason;
    }
    format!(
        "the sandbox denied writing {} (if the agent needs it, add it to `[sandbox] writes` of a runner definition — docs/runners.md; for an exec agent, a --runner-file with args = [\"{{command_args}}\"] — or run with --sandbox none); {reason}",
        path.display()
    )
}

/// What an attempt may write under `--sandbox landlock`: its working directory, its own
/// teammate folder (with its TMPDIR and state folders), and the paths its runner definition
/// declares, expanded with the attempt's environment (its own variables first). A declared
/// folder (an entry ending in `/`) is created when missing; other missing paths are skipped.
/// A declared path that holds the team workspace or lies in it — but in the attempt's own
/// folder or worktree — is dropped with a warning, whatever it was written as
/// (`{env.RUNNER_WORKSPACE}`, `{env.TMPDIR}/../..`): it would let the teammate rewrite the
/// journal or a sibling's report.
pub fn writable(
    spec: &RunSpec,
    item: &WorkItem,
    cwd: &Path,
    dir: &Path,
    env: &[(String, OsString)],
) -> Vec<PathBuf> {
    let lookup = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os(name))
    };
    let workspace = crate::fsutil::real_path(&spec.workspace);
    let own: Vec<PathBuf> = [dir, cwd]
        .iter()
        .map(|p| crate::fsutil::real_path(p))
        .filter(|p| p.starts_with(&workspace))
        .collect();
    let apart = |path: &Path| {
        let real = crate::fsutil::real_path(path);
        let overlaps = real.starts_with(&workspace) || workspace.starts_with(&real);
        let ok = !overlaps || own.iter().any(|o| real.starts_with(o));
        if !ok {
            tracing::warn!(
                "{}: a `[sandbox] writes` entry of the runner definition reaches into the team workspace {}; not granted",
                path.display(),
                spec.workspace.display()
            );
        }
        ok
    };
    let mut paths = vec![cwd.to_owned(), dir.to_owned()];
    paths.extend(
        spec.settings_for(item)
            .runner
            .sandbox
            .writes
            .iter()
            .filter_map(|w| {
                let path = crate::sandbox::expand_write(w, &lookup)?;
                if !apart(&path) {
                    return None;
                }
                if crate::sandbox::is_folder(w) && !path.exists() {
                    // The CLI would have made it on its first start; made here because the
                    // teammate may not write its parent. A failure leaves it skipped.
                    if let Err(e) = std::fs::create_dir_all(&path) {
                        tracing::debug!("{}: {e}", path.display());
                    }
                }
                path.exists().then_some(path)
            }),
    );
    paths
}

/// A commit title from a report's `summary`: its first line, at most 72 characters (cut at a
/// word, with `…`); `None` when it is blank.
fn commit_title(summary: &str) -> Option<String> {
    let line = summary.lines().map(str::trim).find(|l| !l.is_empty())?;
    if line.chars().count() <= 72 {
        return Some(line.to_owned());
    }
    let cut: String = line.chars().take(71).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > 40 => &cut[..i],
        _ => cut.as_str(),
    };
    Some(format!("{}…", cut.trim_end()))
}

/// Judge an executed attempt: commit the worktree, find and validate the report, check its
/// output against the schema, run the verify command when everything else says completed,
/// and ask [`report::judge`] for the verdict.
async fn judge_attempt(
    spec: &RunSpec,
    item: &WorkItem,
    prepared: &Prepared,
    ran: Execution,
    logs: &AttemptLogs<'_>,
    cancel: watch::Receiver<Cancel>,
) -> AttemptResult {
    let report_path = &prepared.report_path;
    let found = match read_report_file(report_path) {
        Err(problem) => Err(report::ReportError::Unreadable(problem)),
        // A stage's report may name its row (`RUNNER_ROW_ID`) or itself.
        Ok(text) => {
            let row = item.stage.as_ref().map(|s| s.row.as_str());
            let ids: Vec<&str> = std::iter::once(item.id.as_str()).chain(row).collect();
            report::find(text.as_deref(), ran.agent.final_text.as_deref(), &ids)
        }
    };
    // Nothing the agent did is lost: whatever it left uncommitted goes on its branch, titled
    // with what its report says it did (else the item's title).
    let git = match (&prepared.worktree, &spec.isolation) {
        (Some(wt), Some(iso)) => {
            let title = match &found {
                Ok((r, _)) => commit_title(&r.summary).unwrap_or_else(|| item.title.clone()),
                Err(_) => item.title.clone(),
            };
            Some(
                iso.commit_all(wt, &title)
                    .await
                    .map(|(c, d)| (wt.branch.clone(), c, d)),
            )
        }
        _ => None,
    };
    let commit = git
        .as_ref()
        .map(|g| g.as_ref().map(|_| ()).map_err(Clone::clone));
    let schema_errors = match (&found, spec.schema_for(item)) {
        (Ok((r, _)), Some((_, validator))) => report::schema_errors(r, validator),
        _ => None,
    };
    if let Ok((r, report::ReportSource::FinalText)) = &found {
        // Keep what the verdict was based on next to the logs.
        let pretty = serde_json::to_string_pretty(&r.raw).unwrap_or_default();
        let _ = crate::fsutil::write_private_file(report_path, pretty.as_bytes());
    }
    let mut evidence = Evidence {
        end: &ran.end,
        stderr_end: ran.stderr_end.as_deref(),
        agent: &ran.agent,
        rules: &spec.settings_for(item).runner.failure,
        text_output: spec.settings_for(item).runner.output == crate::agent::OutputFormat::Text,
        report: &found,
        schema_errors: schema_errors.as_deref(),
        verify: &VerifyResult::NotRun,
        commit: None,
    };
    // The verify command runs when the attempt's own evidence says completed.
    let (verify, verify_log) = match &spec.settings_for(item).verify {
        Some(verify) if report::judge(&evidence).status == ItemStatus::Completed => {
            run_verify(
                spec,
                item,
                verify,
                &prepared.cwd,
                logs,
                &prepared.env,
                cancel,
            )
            .await
        }
        _ => (VerifyResult::NotRun, PathBuf::new()),
    };
    evidence.verify = &verify;
    evidence.commit = commit.as_ref();
    let mut verdict = report::judge(&evidence);
    if prepared.sandbox.is_some() && verdict.kind == Some(crate::failure::FailureKind::AgentError) {
        let granted = prepared.sandbox.as_deref().unwrap_or_default();
        verdict.reason = sandbox_hint(spec, granted, ran.stderr_end.as_deref(), verdict.reason);
    }
    let verdict_kind = verdict.kind;
    let report = found.ok().map(|(r, _)| r);
    let mut agent = ran.agent;
    // An agent that is no CLI (exec) may say what it spent in its report.
    let said = |key: &str| report.as_ref().and_then(|r| r.raw.get(key));
    if agent.cost_usd.is_none() {
        agent.cost_usd = said("cost_usd")
            .and_then(serde_json::Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0);
    }
    if agent.input_tokens.is_none() {
        agent.input_tokens = said("input_tokens").and_then(serde_json::Value::as_u64);
    }
    if agent.output_tokens.is_none() {
        agent.output_tokens = said("output_tokens").and_then(serde_json::Value::as_u64);
    }
    AttemptResult {
        git: git.and_then(Result::ok),
        verify_cancelled: matches!(verify, VerifyResult::Cancelled),
        verdict,
        exit_code: ran.exit_code,
        elapsed: ran.elapsed,
        agent,
        report,
        // A failed verify is explained by its own log, not the agent's.
        log: match verdict_kind {
            Some(crate::failure::FailureKind::VerifyFailed)
                if !verify_log.as_os_str().is_empty() =>
            {
                verify_log
            }
            _ => ran.log,
        },
        held: Held::default(),
    }
}

/// Why a helper command (verify, worktree set-up) did not succeed, and the log that says
/// more (empty when it never started).
struct HelperFailure {
    reason: String,
    log: PathBuf,
    /// The run was interrupted while it ran.
    cancelled: bool,
}

impl HelperFailure {
    /// A failure before any command ran (no log).
    fn before(reason: String) -> HelperFailure {
        HelperFailure {
            reason,
            log: PathBuf::new(),
            cancelled: false,
        }
    }
}

/// The reason of a helper command stopped because the run was interrupted.
const HELPER_CANCELLED: &str = "interrupted";

/// Where an attempt's files go: `<teammate dir>/attempt-N.<name>`, e.g. `attempt-2.stdout.log`
/// (flat, so that an attempt costs no folder of its own).
struct AttemptLogs<'a> {
    dir: &'a Path,
    attempt: u32,
}

impl AttemptLogs<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("attempt-{}.{name}", self.attempt))
    }
}

/// Run a helper command of an attempt (verify, worktree set-up) to its end: argv, no
/// shell, in `cwd`, with the attempt's environment, its output in `attempt-N.<name>.log` and
/// `attempt-N.<name>.stderr.log`, under the attempt's time limit.
///
/// Errors: a one-line reason naming the command (its exit code and last output line, a
/// timeout, a signal); [`HELPER_CANCELLED`] (and `cancelled`) when the run was interrupted.
#[allow(clippy::too_many_arguments)]
async fn run_helper(
    spec: &RunSpec,
    item: &WorkItem,
    name: &str,
    argv: &[String],
    cwd: &Path,
    logs: &AttemptLogs<'_>,
    env: &[(String, OsString)],
    cancel: watch::Receiver<Cancel>,
) -> Result<(), HelperFailure> {
    let Some((program, args)) = argv.split_first() else {
        return Ok(());
    };
    let log = logs.path(&format!("{name}.log"));
    let err_log = logs.path(&format!("{name}.stderr.log"));
    let spawn = Spawn {
        program: program.clone(),
        args: args.to_vec(),
        cwd: cwd.to_owned(),
        env_unset: Vec::new(),
        env_set: env.to_vec(),
        stdin: process::Stdin::Null,
        stdout_log: log.clone(),
        hold_stdout: false,
        stderr_log: err_log.clone(),
        log_cap: spec.settings_for(item).log_cap,
        timeout: spec.settings_for(item).timeout,
        grace: spec.settings_for(item).grace,
        pipe_wait: spec.pipe_wait,
        activity: None,
        keeper: false,
        live: None,
    };
    let shown = argv.join(" ");
    let exit = process::run(&spawn, cancel, |_| {}).await;
    let told = exit.telling_log(&spawn);
    let reason = match exit.end {
        ProcessEnd::Exited(0) => return Ok(()),
        ProcessEnd::Cancelled => {
            return Err(HelperFailure {
                reason: HELPER_CANCELLED.into(),
                log: told,
                cancelled: true,
            });
        }
        ProcessEnd::Exited(code) => {
            let tail = last_line_of(&err_log)
                .or_else(|| last_line_of(&log))
                .map(|l| format!(": {l}"))
                .unwrap_or_default();
            // The log is the outcome's (its `log` column), not cut into the reason.
            format!("`{shown}` exited with code {code}{tail}")
        }
        ProcessEnd::TimedOut { limit, .. } => format!(
            "`{shown}` timed out after {}",
            humantime::format_duration(limit)
        ),
        ProcessEnd::Signalled(s) => format!("`{shown}` was killed by signal {s}"),
        ProcessEnd::NotStarted(why) => return Err(HelperFailure::before(why)),
        // Only backends end that way; a helper command is always a process.
        ProcessEnd::Failed { reason, .. } => reason,
    };
    Err(HelperFailure {
        reason,
        log: told,
        cancelled: false,
    })
}

/// Run the verify command (argv, `{column}` placeholders filled from the item's values) in
/// the teammate's working directory (its worktree, when isolated). With a failure, the log
/// that explains it (`attempt-N.verify.log`, or its stderr log; empty when none was written).
async fn run_verify(
    spec: &RunSpec,
    item: &WorkItem,
    argv: &[String],
    cwd: &Path,
    logs: &AttemptLogs<'_>,
    env: &[(String, OsString)],
    cancel: watch::Receiver<Cancel>,
) -> (VerifyResult, PathBuf) {
    let headers: Vec<String> = item.vars.iter().map(|(k, _)| k.clone()).collect();
    let values: Vec<String> = item.vars.iter().map(|(_, v)| v.clone()).collect();
    let mut rendered = Vec::with_capacity(argv.len());
    for a in argv {
        match crate::prompt::Instruction::parse(Path::new("--verify"), 1, a) {
            Ok(t) => rendered.push(t.render(&headers, &values).0),
            Err(e) => return (VerifyResult::Failed(e.to_string()), PathBuf::new()),
        }
    }
    match run_helper(spec, item, "verify", &rendered, cwd, logs, env, cancel).await {
        Ok(()) => (VerifyResult::Passed, PathBuf::new()),
        Err(f) if f.cancelled => (VerifyResult::Cancelled, PathBuf::new()),
        Err(f) => (VerifyResult::Failed(f.reason), f.log),
    }
}

/// Run the worktree set-up command once, in the worktree, before the agent.
async fn run_setup(
    spec: &RunSpec,
    item: &WorkItem,
    argv: &[String],
    worktree: &Path,
    logs: &AttemptLogs<'_>,
    env: &[(String, OsString)],
    cancel: watch::Receiver<Cancel>,
) -> Result<(), HelperFailure> {
    run_helper(spec, item, "setup", argv, worktree, logs, env, cancel)
        .await
        .map_err(|f| HelperFailure {
            reason: format!("worktree setup {}", f.reason),
            ..f
        })
}
