//! Starting an attempt's process (DESIGN §6): its stdout log (unless held), its stdin, and
//! the child as the leader of a group of its own, marked with the attempt's marker —
//! spawned by the runner, or under `--sandbox landlock` kept by a keeper of the sandbox's
//! server ([`leader::start_confined`]). Running out of descriptors or processes is
//! back-pressure: the start is tried again ([`start_patiently`]). [`super::process`]
//! supervises what started.

use std::process::Stdio;
use std::time::Duration;

use tokio::sync::watch;

use super::capped_log::LogFile;
use super::leader::{self, Leader};
use super::process::{Cancel, Spawn};
use super::{descendants, descriptors};
use crate::report::ProcessEnd;

/// Why an attempt did not start.
pub(super) enum StartError {
    /// Out of descriptors or processes for now: wait and try again.
    Exhausted(String),
    /// It cannot start (the reason).
    Failed(String),
}

/// A started child with what the supervisor holds for it.
pub(super) struct Started {
    pub(super) child: Leader,
    pub(super) registered: Option<descendants::Registered>,
    pub(super) stdout_file: LogFile,
}

/// Create the stdout log (unless it is held), open stdin and start the child as the leader
/// of a new process group, marked with `marker`: spawned by the runner, or under
/// `--sandbox landlock` kept by a keeper of the sandbox's server ([`leader::start_confined`]).
async fn start(spec: &Spawn, marker: &str) -> Result<Started, StartError> {
    let failed = |what: String, e: std::io::Error| {
        if descriptors::exhausted(&e) {
            StartError::Exhausted(format!("{what}: {e}"))
        } else {
            StartError::Failed(format!("{what}: {e}"))
        }
    };
    // The stdout log is the one the output names: it exists even when the agent printed
    // nothing (a held one is written by the caller). The stderr log is created when its
    // first byte arrives.
    let stdout_file = match spec.hold_stdout {
        true => LogFile::held(spec.stdout_log.clone()),
        false => LogFile::open(
            spec.stdout_log.clone(),
            crate::fsutil::create_private_file(&spec.stdout_log)
                .map_err(|e| failed(format!("cannot create {}", spec.stdout_log.display()), e))?,
        ),
    };
    if let Some(writes) = &spec.sandbox {
        // The keeper leads the group and starts the agent in a session of its own; it is
        // the server's child, registered so that job control stops its group too.
        let child = leader::start_confined(spec, writes, marker)
            .await
            .map_err(|(what, e)| failed(what, e))?;
        let (child, registered) = descendants::spawn_registered(|| Ok(child), Leader::id)
            .map_err(|e| failed(String::new(), e))?;
        return Ok(Started {
            child,
            registered,
            stdout_file,
        });
    }
    let stdin = spec.stdin.open().map_err(|(what, e)| failed(what, e))?;
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    super::session::lead_own_group(cmd.as_std_mut());
    for k in &spec.env_unset {
        cmd.env_remove(k);
    }
    for (k, v) in &spec.env_set {
        cmd.env(k, v);
    }
    cmd.env(descendants::ATTEMPT_VAR, marker);
    let (child, registered) = descendants::spawn_registered(|| cmd.spawn(), |c| c.id())
        .map_err(|e| failed(format!("cannot start `{}`", spec.program), e))?;
    Ok(Started {
        child: Leader::own(child),
        registered,
        stdout_file,
    })
}

/// First wait after a start failed for want of descriptors or processes; doubled up to
/// [`START_RETRY_MAX`].
const START_RETRY_FIRST: Duration = Duration::from_millis(20);
const START_RETRY_MAX: Duration = Duration::from_secs(1);

/// [`start`], tried again with back-off while descriptors or processes are short; the
/// `ProcessEnd` when it cannot start (`NotStarted`) or the run is interrupted meanwhile
/// (`Cancelled`).
pub(super) async fn start_patiently(
    spec: &Spawn,
    marker: &str,
    cancel: &mut watch::Receiver<Cancel>,
) -> std::result::Result<Started, ProcessEnd> {
    let mut pause = START_RETRY_FIRST;
    loop {
        match start(spec, marker).await {
            Ok(started) => return Ok(started),
            Err(StartError::Failed(why)) => return Err(ProcessEnd::NotStarted(why)),
            Err(StartError::Exhausted(why)) => {
                tracing::debug!("{why}; starting again in {pause:?}");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    changed = cancel.changed() => {
                        if changed.is_err() || *cancel.borrow() != Cancel::None {
                            return Err(ProcessEnd::Cancelled);
                        }
                    }
                }
                pause = (pause * 2).min(START_RETRY_MAX);
            }
        }
    }
}
