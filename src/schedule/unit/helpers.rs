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
/// `attempt-N.<name>.stderr.log`, under the attempt's time limit. With `confine` (the paths
/// it may write), it runs under the sandbox the way an agent does
/// ([`crate::sandbox::client`]: a keeper, a Landlock domain of its own, no controlling
/// terminal, without the variables that lead to unsandboxed servers).
///
/// Errors: a one-line reason naming the command (its exit code and last output line, a
/// timeout, a signal); [`HELPER_CANCELLED`] (and `cancelled`) when the run was interrupted.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_helper(
    spec: &RunSpec,
    item: &WorkItem,
    name: &str,
    argv: &[String],
    cwd: &Path,
    logs: &AttemptLogs<'_>,
    env: &[(String, OsString)],
    confine: Option<&[PathBuf]>,
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
        env_unset: match confine {
            None => Vec::new(),
            Some(_) => crate::sandbox::unset_under_sandbox(&[], env),
        },
        env_set: env.to_vec(),
        stdin: Stdin::Null,
        stdout_log: log.clone(),
        hold_stdout: false,
        stderr_log: err_log.clone(),
        stderr_log_new: false,
        log_cap: spec.settings_for(item).log_cap,
        timeout: spec.settings_for(item).timeout,
        grace: spec.settings_for(item).grace,
        pipe_wait: spec.pipe_wait,
        activity: None,
        sandbox: confine.map(<[PathBuf]>::to_vec),
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
/// the teammate's working directory `cwd` (its worktree, when isolated). Under `--sandbox
/// landlock` it is confined as the teammate was — it may be code the teammate rewrote (a
/// `check.sh` in the working directory, `npm test` in a worktree) — in a domain of its own
/// that may write `cwd`, a private temp folder ([`VerifyTemp`], its `TMPDIR`) and the usual
/// devices: nothing of the runner's, not the teammate's own folder, no sibling's. With a
/// failure, the log that explains it (`attempt-N.verify.log`, or its stderr log; empty when
/// none was written).
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
    let temp = match spec.settings.sandbox == crate::sandbox::Mode::Landlock {
        false => None,
        true => match VerifyTemp::new(logs) {
            Ok(t) => Some(t),
            Err(e) => return (VerifyResult::Failed(e.to_string()), PathBuf::new()),
        },
    };
    let (env, writes) = match &temp {
        None => (env.to_vec(), None),
        Some(t) => {
            let mut env: Vec<(String, OsString)> =
                env.iter().filter(|(k, _)| k != "TMPDIR").cloned().collect();
            env.push(("TMPDIR".into(), t.0.clone().into_os_string()));
            (env, Some(vec![cwd.to_owned(), t.0.clone()]))
        }
    };
    let ran = run_helper(
        spec,
        item,
        "verify",
        &rendered,
        cwd,
        logs,
        &env,
        writes.as_deref(),
        cancel,
    )
    .await;
    match ran {
        Ok(()) => (VerifyResult::Passed, PathBuf::new()),
        Err(f) if f.cancelled => (VerifyResult::Cancelled, PathBuf::new()),
        Err(f) => {
            let reason = match temp
                .as_ref()
                .and_then(|t| denied_outside(&f.reason, cwd, t))
            {
                Some(path) => format!(
                    "the sandbox denied writing {} (a verify may write only its working directory and $TMPDIR; point what it writes there, or run with --sandbox none); {}",
                    path.display(),
                    f.reason
                ),
                None => f.reason,
            };
            (VerifyResult::Failed(reason), f.log)
        }
    }
}

/// The path a confined verify was denied writing, when its failure `reason` (which ends with
/// its last output line) names one outside what it may write (`cwd` and `temp`).
fn denied_outside(reason: &str, cwd: &Path, temp: &VerifyTemp) -> Option<PathBuf> {
    let path = crate::sandbox::denied_write(reason)?;
    (!path.starts_with(cwd) && !path.starts_with(&temp.0)).then_some(path)
}

/// The private temp folder of one confined verify run: `attempt-N.verify-tmp/` in the
/// runner's part of the teammate folder (which the teammate cannot write), made new (0700)
/// for each run and removed with everything in it when dropped.
struct VerifyTemp(PathBuf);

impl VerifyTemp {
    /// Make the folder, after removing one an interrupted run left (a link is removed, never
    /// followed).
    ///
    /// Errors: it cannot be made.
    fn new(logs: &AttemptLogs<'_>) -> crate::error::Result<VerifyTemp> {
        let path = logs.path("verify-tmp");
        let _ = crate::fsutil::remove_tree(&path);
        let _ = std::fs::remove_file(&path);
        crate::fsutil::create_private_dir(&path)?;
        Ok(VerifyTemp(path))
    }
}

impl Drop for VerifyTemp {
    fn drop(&mut self) {
        // Also a folder in it the verify made unreadable (`chmod`, which Landlock does not
        // govern).
        if let Err(e) = crate::fsutil::remove_tree(&self.0) {
            tracing::debug!("cannot remove {}: {e}", self.0.display());
        }
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
    run_helper(spec, item, "setup", argv, worktree, logs, env, None, cancel)
        .await
        .map_err(|f| HelperFailure {
            reason: format!("worktree setup {}", f.reason),
            ..f
        })
}
