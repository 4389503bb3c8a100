//! One attempt: [`prepare`](super::prepare) it, have the [`Backend`] execute it, and
//! [`judge`](super::judge) it; what it holds in memory instead of its teammate folder
//! ([`Held`]), and where its files go ([`AttemptLogs`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::agent::AgentResult;
use crate::inline::Image;
use crate::item::WorkItem;
use crate::report::{self, Verdict};
use crate::run::RunSpec;
use crate::run::backend::{Attempt, Backend};
use crate::run::events::Event;
use crate::run::supervise::capped_log::HOLD_FOR;
use crate::run::supervise::process::Cancel;

use super::judge::judge_attempt;
use super::prepare::prepare;

/// What one attempt came to: its verdict and what the item's outcome takes from it.
pub(super) struct AttemptResult {
    /// The verdict of the success rule.
    pub(super) verdict: Verdict,
    /// (branch, commit, diffstat) with worktree isolation.
    pub(super) git: Option<(String, String, String)>,
    /// The agent's exit code, when its process exited.
    pub(super) exit_code: Option<i32>,
    /// Wall time of the attempt.
    pub(super) elapsed: Duration,
    /// What the runner definition read from the agent's answer (with what its report says
    /// it spent, for an agent that is no CLI).
    pub(super) agent: AgentResult,
    /// The report it was judged on, if one was found.
    pub(super) report: Option<report::Report>,
    /// The log that explains the attempt.
    pub(super) log: PathBuf,
    /// The report passed every check but the verify command, which an interrupt stopped.
    pub(super) verify_cancelled: bool,
    /// What the attempt has not written to its teammate folder yet.
    pub(super) held: Held,
}

/// An attempt's records the runner holds in memory instead of its teammate folder: its
/// prompt (handed to the agent as a sealed in-memory file, DESIGN §6b) and its stdout (held
/// while small and quick, [`HOLD_MAX`](crate::run::supervise::capped_log::HOLD_MAX), [`HOLD_FOR`]). A completed item's
/// compacted record takes them from here, so a quick completed item writes neither; an
/// attempt that does not complete writes them ([`Held::write`]), since its folder is where a
/// person looks, and so does one that runs longer than [`HOLD_FOR`] (its prompt;
/// its stdout goes to its log by itself), for `runner show` and `logs` while it runs.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// The attempt's prompt (empty when it never got one).
    pub(super) prompt: Arc<str>,
    /// `prompt.md`, while it is not written.
    pub(super) prompt_file: Option<PathBuf>,
    /// The stdout log's path and the bytes it did not get, while it is not written.
    pub(super) stdout: Option<(PathBuf, Vec<u8>)>,
    /// The attempt left no stderr log ([`crate::run::backend::Execution::stderr_logged`]).
    pub(super) no_stderr_log: bool,
}

impl Held {
    /// Write the prompt file and the stdout log that are still held. A file that cannot be
    /// written is logged and left out.
    pub(super) fn write(&mut self) {
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
pub(super) async fn attempt_once(
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
        report_path: &prepared.report_path,
        cwd: &prepared.cwd,
        workspace: &spec.workspace,
        env: &prepared.env,
        stdout_log: logs.path("stdout.log"),
        stderr_log: logs.path("stderr.log"),
        new_folder: prepared.new_folder,
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
            new_file: prepared.new_folder,
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
            _ = tokio::time::sleep(HOLD_FOR), if prompt_file.is_some() => {
                if let Some(path) = prompt_file.take() {
                    write_record(&path, prepared.prompt.as_bytes());
                }
                run.await
            }
        }
    };
    // Warnings about its progress lines go into the stderr log.
    let noted = match progress {
        Some(watch) => watch.finish().await,
        None => false,
    };
    let stdout = execution
        .stdout_held
        .take()
        .map(|bytes| (attempt.stdout_log.clone(), bytes));
    let no_stderr_log = !execution.stderr_logged && !noted;
    let mut result = judge_attempt(spec, item, &prepared, execution, &logs, cancel).await;
    result.held = Held {
        prompt: prepared.prompt.clone(),
        prompt_file,
        stdout,
        no_stderr_log,
    };
    result
}

/// Where an attempt's files go: `<teammate dir>/attempt-N.<name>`, e.g. `attempt-2.stdout.log`
/// (flat, so that an attempt costs no folder of its own).
pub(super) struct AttemptLogs<'a> {
    /// The teammate folder's runner part.
    pub(super) dir: &'a Path,
    /// The attempt number.
    pub(super) attempt: u32,
}

impl AttemptLogs<'_> {
    /// `<dir>/attempt-N.<name>`.
    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("attempt-{}.{name}", self.attempt))
    }
}
