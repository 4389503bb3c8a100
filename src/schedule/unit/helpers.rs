//! The helper commands of an attempt (the verify command, the worktree set-up command):
//! argv, no shell, supervised as an agent is ([`process::run`]), each with its own logs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tokio::sync::watch;

use crate::item::WorkItem;
use crate::report::{ProcessEnd, VerifyResult};
use crate::run::RunSpec;
use crate::run::backend::last_line_of;
use crate::run::supervise::process::{self, Cancel, Spawn};
use crate::run::supervise::stdin::Stdin;

use super::attempt::AttemptLogs;

/// Why a helper command (verify, worktree set-up) did not succeed, and the log that says
/// more (empty when it never started).
pub(super) struct HelperFailure {
    /// One line: what failed, naming the command.
    pub(super) reason: String,
    /// The log that says more; empty when none was written.
    pub(super) log: PathBuf,
    /// The run was interrupted while it ran.
    pub(super) cancelled: bool,
}

impl HelperFailure {
    /// A failure before any command ran (no log).
    pub(super) fn before(reason: String) -> HelperFailure {
        HelperFailure {
            reason,
            log: PathBuf::new(),
            cancelled: false,
        }
    }
}

/// The reason of a helper command stopped because the run was interrupted.
const HELPER_CANCELLED: &str = "interrupted";

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
        stdin: Stdin::Null,
        stdout_log: log.clone(),
        hold_stdout: false,
        stderr_log: err_log.clone(),
        log_cap: spec.settings_for(item).log_cap,
        timeout: spec.settings_for(item).timeout,
        grace: spec.settings_for(item).grace,
        pipe_wait: spec.pipe_wait,
        activity: None,
        sandbox: None,
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
pub(super) async fn run_verify(
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
pub(super) async fn run_setup(
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
