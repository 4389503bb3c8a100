//! One item's unit: its attempts, each in three steps — *prepare* (`prepare`: teammate
//! folder, prompt file, argv and environment, state folders, worktree), *execute* on a
//! [`Backend`] (`attempt`), *judge* (`judge`: report, schema, verify, worktree commit →
//! [`report::judge`]) — and after each the `retry` policy's word; `finish` sends the
//! item's outcome. A unit owns no shared state: it reports to the dispatcher through
//! [`Event`]s, and every attempt first passes the team's [`Gate`].
//!
//! - What the teammate is told (task text, prompt, retry context): `prompt`.
//! - The verify and worktree set-up commands: `helpers`.
//! - Tests of the retry and rate-limit policy, on the scripted backend: `tests.rs`.
//!
//! # How to
//!
//! - *Give the agent something new* (a variable, a file): `prepare` (its environment is
//!   built in one place, and so is the teammate folder); a `RUNNER_*` variable also goes in
//!   `finish::verify_again`'s environment when a verify command needs it.
//! - *Judge on new evidence*: gather it in `judge` and decide in [`report::judge`] (the
//!   success rule stays one pure function).
//! - *Change when an item is attempted again*: `retry::Retries::after` (one function:
//!   the gate's word, `--retries`, `--retry-on`, `--rate-limit-wait`), and add a case to
//!   `tests.rs`.

mod attempt;
pub(crate) mod best_of;
mod finish;
mod helpers;
mod home;
mod judge;
mod judge_stage;
mod prepare;
mod prompt;
pub(crate) mod resolve;
mod retry;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::failure::FailureKind;
use crate::inline::Expanded;
use crate::item::WorkItem;
use crate::prompt::RetryContext;
use crate::report::{self, ItemStatus};
use crate::run::backend::Backend;
use crate::run::events::Event;
use crate::run::record::outcome::{Outcome, Spend};
use crate::run::supervise::process::{Cancel, interrupted};
use crate::run::{RunSpec, now_rfc3339};
use crate::schedule::gate::{Gate, Permit};

use attempt::{AttemptLogs, AttemptResult, Held, attempt_once};
use finish::{Counts, final_outcome, finished, verify_again};
pub(crate) use prepare::agent_in_git_work_tree;
use prompt::retry_context;
pub(crate) use prompt::{item_text, render_prompt};
use retry::Retries;

/// What earlier runs left of an item: the attempt numbering continues after theirs, and
/// what their attempts cost counts in the item's outcome.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Earlier {
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
    /// Retries by `--retries` already used elsewhere: attempts a shared queue's other
    /// workers started before this one took the item over (0 otherwise).
    pub retries_used: u32,
}

/// Run every attempt of `item`; `earlier` continues the numbering and the spending of
/// earlier runs.
/// Every attempt first passes the team's `gate` (rate-limit pauses, adaptive concurrency,
/// stops): a rate-limited attempt is made again after the pause without using one of
/// `--retries`; when the team stops, an item that has not started ends `skipped`. With
/// `--best-of N` the item goes to N candidates at once and the winner's outcome is sent
/// ([`best_of::run`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_item(
    spec: Arc<RunSpec>,
    backend: Arc<dyn Backend>,
    gate: Arc<Gate>,
    item: WorkItem,
    earlier: Earlier,
    tx: mpsc::UnboundedSender<Event>,
    cancel: watch::Receiver<Cancel>,
) {
    if spec.settings_for(&item).best_of > 1 && item.candidate.is_none() {
        return best_of::run(spec, backend, gate, item, earlier, tx, cancel).await;
    }
    let mut ended = attempt_item(&spec, backend.as_ref(), &gate, &item, earlier, &tx, cancel).await;
    ended.outcome = land_now(&spec, ended.outcome, &tx).await;
    match ended.attempt {
        Some(attempt) => finished(
            &spec,
            ended.outcome,
            attempt,
            ended.held,
            ended.earlier_logs,
            &tx,
        ),
        None => {
            let _ = tx.send(Event::ItemFinished(Box::new(ended.outcome)));
        }
    }
}

/// `--serialize-overlaps`: a completed item of a chain lands through the merge queue before
/// its outcome is sent ([`crate::run::isolation::land_now`], on a blocking thread), its
/// step sent first; any other outcome is returned as it is.
async fn land_now(
    spec: &Arc<RunSpec>,
    outcome: Outcome,
    tx: &mpsc::UnboundedSender<Event>,
) -> Outcome {
    if outcome.status != ItemStatus::Completed || !spec.chained(&outcome.id) {
        return outcome;
    }
    let kept = outcome.clone();
    let spec = spec.clone();
    let landed = tokio::task::spawn_blocking(move || {
        let mut o = outcome;
        let step = crate::run::isolation::land_now(&spec, &mut o);
        (o, step)
    })
    .await;
    match landed {
        Ok((o, step)) => {
            if let Some(step) = step {
                let _ = tx.send(step);
            }
            o
        }
        // The landing thread panicked: the item stays as it was, for the queue at the end.
        Err(_) => kept,
    }
}

/// How an item's attempts ended ([`attempt_item`]): its outcome, not yet sent.
struct Ended {
    /// The item's outcome.
    outcome: Outcome,
    /// The number of its last attempt; `None` when none ran (no folder to compact).
    attempt: Option<u32>,
    /// What the last attempt still holds in memory (its prompt, a small stdout).
    held: Held,
    /// The folder holds logs of attempts before the last.
    earlier_logs: bool,
}

impl Ended {
    /// An item that never ran an attempt.
    fn not_run(outcome: Outcome) -> Ended {
        Ended {
            outcome,
            attempt: None,
            held: Held::default(),
            earlier_logs: false,
        }
    }
}

/// Make the attempts of `item` (one item, or one candidate of a `--best-of` item) to the
/// last, and say how it ended; nothing is sent but the attempts' events.
async fn attempt_item(
    spec: &Arc<RunSpec>,
    backend: &dyn Backend,
    gate: &Arc<Gate>,
    item: &WorkItem,
    earlier: Earlier,
    tx: &mpsc::UnboundedSender<Event>,
    mut cancel: watch::Receiver<Cancel>,
) -> Ended {
    let dir = spec.teammate_dir(&item.teammate);
    let Earlier {
        first_attempt,
        spent: mut spend,
        verify_only,
        refused,
        rate_limit_waits,
        retries_used,
    } = earlier;
    if let Some(earlier) = verify_only {
        let last_attempt = first_attempt.saturating_sub(1).max(1);
        let outcome = verify_again(spec, item, *earlier, last_attempt, cancel).await;
        return Ended {
            outcome,
            attempt: Some(last_attempt),
            held: Held::default(),
            earlier_logs: true,
        };
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
    let text = match item_text(spec, item) {
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
            return Ended::not_run(outcome);
        }
    };
    // The first attempt's prompt, rendered once: hashed (to notice a changed item on resume)
    // and used.
    let first_prompt = render_prompt(spec, item, &text.body, None);
    let content_hash = item.content.clone();
    let unit = Unit {
        spec,
        backend,
        gate,
        item,
        dir: &dir,
        text: &text,
        tx,
        first_attempt,
    };
    let mut retries = Retries::new(refused, rate_limit_waits).used(retries_used);
    let (mut last, last_made) = match unit
        .attempts(first_prompt, &mut spend, &mut retries, &mut cancel)
        .await
    {
        Ok(made) => made,
        Err(outcome) => return Ended::not_run(*outcome),
    };
    let counts = Counts {
        attempts: last_made.saturating_sub(retries.refused),
        rate_limit_waits: retries.rate_limit_waits,
    };
    let held = std::mem::take(&mut last.held);
    let outcome = final_outcome(item, last, counts, started_at, content_hash, spend);
    Ended {
        outcome,
        attempt: Some(last_made),
        held,
        // The folder holds logs of attempts before the last: an earlier run's, or this run's.
        earlier_logs: highest.is_some() || last_made > first_attempt,
    }
}

/// What every attempt of one item shares while its unit runs.
struct Unit<'a> {
    spec: &'a RunSpec,
    backend: &'a dyn Backend,
    gate: &'a Arc<Gate>,
    item: &'a WorkItem,
    /// The runner's part of the teammate folder.
    dir: &'a Path,
    /// The item's task text and images, read once for all its attempts.
    text: &'a Expanded,
    tx: &'a mpsc::UnboundedSender<Event>,
    /// The number of this run's first attempt.
    first_attempt: u32,
}

/// How an attempt's turn at the gate ended ([`Unit::turn`]).
enum Turn {
    /// Admitted: the attempt runs under this permit.
    Admitted(Permit),
    /// No attempt follows: the item ends with this one, the last it made.
    Last(Box<AttemptResult>),
    /// The item never started: its outcome.
    NotStarted(Box<Outcome>),
}

impl Unit<'_> {
    /// Make the item's attempts until one is final (by the [`retry`] policy); `spend` adds
    /// what each cost. The last attempt and its number; when no attempt started, the item's
    /// outcome (`skipped`, `cancelled`).
    async fn attempts(
        &self,
        first_prompt: crate::error::Result<String>,
        spend: &mut Spend,
        retries: &mut Retries,
        cancel: &mut watch::Receiver<Cancel>,
    ) -> Result<(AttemptResult, u32), Box<Outcome>> {
        let (spec, item) = (self.spec, self.item);
        let mut first_prompt = Some(first_prompt);
        let mut retry_ctx: Option<RetryContext> = None;
        let mut attempt = self.first_attempt;
        let mut previous: Option<AttemptResult> = None;
        let mut last_made = attempt;
        // The prompt of a request the provider refused unprocessed, sent again as it was.
        let mut refused_prompt: Option<crate::error::Result<String>> = None;
        let last = loop {
            let permit = match self.turn(retries, previous.take(), cancel).await {
                Turn::Admitted(permit) => permit,
                Turn::Last(result) => break *result,
                Turn::NotStarted(outcome) => return Err(outcome),
            };
            let prompt = match (refused_prompt.take(), retry_ctx.take()) {
                (Some(same), _) => same,
                (None, Some(retry)) => render_prompt(spec, item, &self.text.body, Some(retry)),
                (None, None) => first_prompt
                    .take()
                    .unwrap_or_else(|| render_prompt(spec, item, &self.text.body, None)),
            };
            // Kept where a refused request is sent again as it was.
            let sent = match (spec.settings_for(item).runner.answers_only(), &prompt) {
                (true, Ok(p)) => Some(Ok(p.clone())),
                _ => None,
            };
            let mut result = attempt_once(
                spec,
                self.backend,
                item,
                AttemptLogs {
                    dir: self.dir,
                    attempt,
                },
                self.first_attempt == 1,
                prompt,
                &self.text.images,
                self.tx,
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
            let next = retries
                .after(spec, item, self.gate, permit, &mut result, cancel)
                .await;
            // What the attempt held in memory goes to its folder unless the item completes
            // with it and is compacted.
            if next.retrying
                || result.verdict.status != ItemStatus::Completed
                || spec.settings.keep_logs
            {
                result.held.write();
            }
            let _ = self.tx.send(Event::AttemptFinished {
                id: item.id.clone(),
                teammate: item.teammate.clone(),
                attempt,
                verdict: result.verdict.clone(),
                retrying: next.retrying,
                candidate: item.candidate,
                refused: next.refused,
                spend: this_attempt,
                at: now_rfc3339(),
            });
            if !next.retrying {
                break result;
            }
            if next.refused
                && let Some(same) = sent
            {
                refused_prompt = Some(same);
            } else {
                let folder = spec.teammate(&item.teammate);
                retry_ctx = Some(retry_context(&folder, item, attempt + 1, &result));
            }
            attempt += 1;
            if let Some(wait) = next.wait
                && retries.wait(wait, cancel, self.gate).await
            {
                break AttemptResult {
                    verdict: report::judge_interrupted_retry(),
                    ..result
                };
            }
            previous = Some(result);
        };
        Ok((last, last_made))
    }

    /// Wait at the gate for the next attempt's turn. `previous` is the attempt before, when
    /// this is a retry: the item ends with it when the team stops meanwhile (with it, but
    /// `cancelled`, when the run is interrupted). An item that never started ends `skipped`
    /// (the team stopped) or `cancelled` (interrupted).
    async fn turn(
        &self,
        retries: &mut Retries,
        previous: Option<AttemptResult>,
        cancel: &mut watch::Receiver<Cancel>,
    ) -> Turn {
        let waiting_since = Instant::now();
        let admitted = tokio::select! {
            p = self.gate.admit() => Some(p),
            _ = interrupted(cancel) => None,
        };
        retries.waited_at_gate(waiting_since.elapsed());
        match (admitted, previous) {
            (Some(Ok(permit)), _) => Turn::Admitted(permit),
            (None, Some(prev)) => Turn::Last(Box::new(AttemptResult {
                verdict: report::judge_interrupted_retry(),
                ..prev
            })),
            (Some(Err(_)), Some(prev)) => Turn::Last(Box::new(prev)),
            (admitted, None) => {
                let (status, reason) = match admitted {
                    Some(Err(why)) => (ItemStatus::Skipped, format!("not started: {why}")),
                    _ => (
                        ItemStatus::Cancelled,
                        "not started: the run was interrupted".to_owned(),
                    ),
                };
                let item = self.item;
                let outcome =
                    Outcome::not_run(&item.id, &item.teammate, &item.title, status, reason);
                Turn::NotStarted(Box::new(outcome))
            }
        }
    }
}
