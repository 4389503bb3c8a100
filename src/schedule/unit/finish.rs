//! How an item ends: its outcome from its last attempt ([`final_outcome`]), a completed
//! item's folder compacted before the outcome is sent ([`finished`]), and the resume of an
//! item whose verify command an interrupt stopped ([`verify_again`]).

use std::ffi::OsStr;
use std::path::PathBuf;

use tokio::sync::{mpsc, watch};

use crate::failure::FailureKind;
use crate::item::WorkItem;
use crate::report::{self, ItemStatus, VerifyResult};
use crate::run::events::Event;
use crate::run::record::outcome::{Outcome, Spend};
use crate::run::supervise::process::Cancel;
use crate::run::{RunSpec, now_rfc3339};

use super::attempt::{AttemptLogs, AttemptResult, Held};
use super::helpers::run_verify;

/// Send the item's outcome. A completed item's folder is compacted first
/// ([`crate::run::record::compact`], unless `--keep-logs`), with what its last attempt
/// (`attempt`) still `held` in memory: its outcome's log then names the record file, so no
/// output names a removed log. `earlier_logs`: the folder may hold logs of attempts before
/// the last. Whatever is still held when the folder stays is written to it.
pub(super) fn finished(
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
            no_stderr: held.no_stderr_log,
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

/// How many times an item was attempted and waited, across runs.
pub(super) struct Counts {
    /// Executions: attempts made, but requests refused unprocessed.
    pub(super) attempts: u32,
    /// Rate-limit waits.
    pub(super) rate_limit_waits: u32,
}

/// The item's outcome from its last attempt; `counts` its attempts and waits across runs,
/// `started_at` when the item's first attempt began (RFC 3339), `spend` what every attempt
/// of every run cost.
pub(super) fn final_outcome(
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
        merged: None,
        awaiting_review: false,
        awaiting_verify: last.verify_cancelled && last.verdict.status == ItemStatus::Cancelled,
        best_of: None,
    }
}

/// Resume an item whose verify command an interrupt stopped: run only the verify, on the
/// report its agent left (`earlier`, [`Outcome::awaiting_verify`]), in the item's working
/// directory (its worktree when isolated, else the run's) with the attempt's `RUNNER_*`
/// variables, confined as [`run_verify`] says. Passed: completed; failed:
/// `verify_failed`; interrupted again: still awaiting its verify.
pub(super) async fn verify_again(
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
    // The item's working directory: its worktree when isolated (kept since its attempt).
    let worktree = spec.workspace.join("worktrees").join(&item.teammate);
    let cwd = match spec.isolation.is_some() && worktree.join(".git").is_file() {
        true => worktree,
        false => spec.cwd.clone(),
    };
    let (result, verify_log) = run_verify(spec, item, argv, &cwd, &logs, &env, cancel).await;
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
