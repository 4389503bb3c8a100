//! Starting and supervising one attempt's process (DESIGN §6).
//!
//! Each child runs as the leader of its own process group, marked with an attempt id in its
//! environment ([`descendants`]). A time limit or an interrupt sends SIGTERM to the whole
//! group (and to marked processes that left it), waits a grace period, then SIGKILL; an
//! immediate cancel (second Ctrl-C) sends SIGKILL at once. stdout and stderr are drained
//! concurrently into capped log files (`drain`, [`super::capped_log`]). After the
//! leader exits, the runner waits a bounded time for the pipes to close (a grandchild may
//! hold them), then kills what is left of the group and every marked process. No process
//! the child started outlives [`run`]. What the child reads on stdin: [`super::stdin`].

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::{mpsc, watch};

use super::capped_log::{Drained, LogFile};
use super::drain::drain;
use super::leader::Leader;
use super::live_watch::LineWatch;
use super::start::{Started, start_patiently};
use super::stdin::Stdin;
use super::{descendants, job_control};
use crate::failure::FailureRules;
use crate::failure::live::{self, LiveHit, Stream};
use crate::report::ProcessEnd;

/// What the dispatcher asks running attempts to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Cancel {
    /// Keep running.
    None,
    /// Interrupted: SIGTERM, grace period, SIGKILL.
    Graceful,
    /// Interrupted twice: SIGKILL at once.
    Immediate,
}

/// Resolves once the run is interrupted (at once when it already is); pending forever when
/// the dispatcher is gone without interrupting. For units and backends waiting on something
/// else (the gate, a request).
pub(crate) async fn interrupted(cancel: &mut tokio::sync::watch::Receiver<Cancel>) {
    loop {
        if *cancel.borrow_and_update() != Cancel::None {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Receives the last line a child printed (throttled, control characters removed, at most
/// `ACTIVITY_MAX_CHARS` (`drain`) characters), for progress displays.
#[derive(Clone)]
pub(crate) struct ActivitySink(pub std::sync::Arc<dyn Fn(String) + Send + Sync>);

impl std::fmt::Debug for ActivitySink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ActivitySink")
    }
}

/// Everything needed to start one attempt.
#[derive(Debug, Clone)]
pub(crate) struct Spawn {
    /// Program (PATH lookup or path).
    pub program: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Variables to remove from the inherited environment.
    pub env_unset: Vec<String>,
    /// Variables to set (values as raw bytes: paths need not be UTF-8).
    pub env_set: Vec<(String, std::ffi::OsString)>,
    /// What the child reads on its stdin.
    pub stdin: Stdin,
    /// Where stdout goes (capped).
    pub stdout_log: PathBuf,
    /// Hold stdout in memory instead of creating [`Spawn::stdout_log`] at the start: while
    /// it stays within [`HOLD_MAX`](super::capped_log::HOLD_MAX) bytes and the child has run less than [`HOLD_FOR`](super::capped_log::HOLD_FOR), it
    /// is handed back in [`Exit::stdout_held`] and no file is made (the caller writes it, or
    /// keeps it in a compacted record); past either bound it goes to the log as usual. A
    /// quick agent then costs no file; a slow one's log is there to follow within a second.
    pub hold_stdout: bool,
    /// Where stderr goes (capped); created when the first byte arrives.
    pub stderr_log: PathBuf,
    /// Nothing is at [`Spawn::stderr_log`] yet (its folder was made for this attempt);
    /// otherwise a file there is removed as the attempt starts.
    pub stderr_log_new: bool,
    /// Cap of each log file, bytes (head and tail kept, the cut marked).
    pub log_cap: u64,
    /// Time limit; `None` for no limit.
    pub timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// How long to wait for the pipes to close after the leader exits.
    pub pipe_wait: Duration,
    /// Where the last printed line goes, if anywhere.
    pub activity: Option<ActivitySink>,
    /// With `--sandbox landlock`: the paths the program may write. It is then started
    /// confined under a keeper ([`crate::sandbox::client`]); the keeper must outlive the
    /// program to end what it left, so it is sent [`crate::sandbox::shim::KILL_TREE`] where
    /// others get SIGKILL (SIGKILL follows only if it has not exited [`KEEPER_KILL_WAIT`]
    /// later).
    pub sandbox: Option<Vec<PathBuf>>,
    /// The runner definition's rules, when its `[failure] live` lines may end the attempt
    /// while it runs ([`crate::failure::live`]); `None` for commands that are not agents.
    pub live: Option<std::sync::Arc<FailureRules>>,
}

/// How long a keeper told to kill its tree may take before its group is sent SIGKILL.
pub(crate) const KEEPER_KILL_WAIT: Duration = Duration::from_secs(2);

/// How an attempt's process ended.
#[derive(Debug, Clone)]
pub(crate) struct Exit {
    /// The verdict input: exited, signalled, timed out, cancelled, not started.
    pub end: ProcessEnd,
    /// The exit code, when it exited (also after a SIGTERM it handled).
    pub exit_code: Option<i32>,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
    /// Bytes the child wrote to stdout (before capping).
    pub stdout_bytes: u64,
    /// Bytes the child wrote to stderr (before capping).
    pub stderr_bytes: u64,
    /// With [`Spawn::hold_stdout`]: all the child wrote to stdout, when it stayed in memory
    /// (then [`Spawn::stdout_log`] was not created); `None` when it went to the log.
    pub stdout_held: Option<Vec<u8>>,
    /// The processes that kept the child's stdout or stderr open after it exited, which the
    /// runner tried to end [`Spawn::pipe_wait`] later (`sleep (pid 4242)`); that wait is
    /// part of [`Exit::elapsed`]. Empty when the pipes closed with the child.
    pub held_pipes: Holders,
}

impl Exit {
    /// Of `spec`'s two logs, the one that explains this run: the stdout log, unless the child
    /// wrote nothing there and something to stderr.
    pub(crate) fn telling_log(&self, spec: &Spawn) -> PathBuf {
        if self.stdout_bytes == 0 && self.stderr_bytes > 0 {
            spec.stderr_log.clone()
        } else {
            spec.stdout_log.clone()
        }
    }
}

/// Ends the whole attempt when dropped, so that a cancelled or panicking supervisor cannot
/// leave it running: SIGKILL to the group and, while armed, to every process that carries
/// the attempt's marker (those that left the group).
pub(super) struct GroupGuard {
    /// The attempt's process group.
    pub(super) pgid: Pid,
    /// The attempt's marker, while the processes that carry it are to be killed too.
    pub(super) marker: Option<String>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = killpg(self.pgid, Signal::SIGKILL);
        if let Some(marker) = &self.marker {
            descendants::kill_attempt_now(marker);
        }
    }
}

/// Send `sig` to process group `pgid`. Returns whether the group is gone (`ESRCH`: no
/// process is in it). A gone group stays gone: a process can only join a group that
/// exists, so no later signal to it is needed — and one could reach a new group that took
/// the id over.
fn signal_group(pgid: Pid, sig: Signal) -> bool {
    match killpg(pgid, sig) {
        Ok(()) => false,
        Err(nix::errno::Errno::ESRCH) => true,
        Err(e) => {
            tracing::warn!("cannot send {sig} to process group {pgid}: {e}");
            false
        }
    }
}

/// Signal the attempt: its group and the processes that left it. A keeper is asked to kill
/// its tree instead of being killed (and spared the SIGKILL its marked processes get).
fn signal_attempt(pgid: Pid, keeper: bool, marker: &str, sig: Signal) {
    if keeper && sig == Signal::SIGKILL {
        if let Err(e) = nix::sys::signal::kill(pgid, crate::sandbox::shim::KILL_TREE) {
            tracing::debug!("cannot ask keeper {pgid} to kill its tree: {e}");
        }
        descendants::signal_attempt(marker, sig, Some(pgid.as_raw()));
    } else {
        signal_group(pgid, sig);
        descendants::signal_attempt(marker, sig, None);
    }
}

/// A confined attempt whose keeper could not exec the program: not started, with the
/// reason an unconfined spawn gives ([`crate::sandbox::keeper::not_started`], read from
/// the stderr log without following a link).
fn keeper_not_started(spec: &Spawn, exit_code: Option<i32>) -> Option<ProcessEnd> {
    use std::io::Read;
    if exit_code != Some(crate::sandbox::keeper::CANNOT_EXEC) {
        return None;
    }
    let mut head = Vec::new();
    crate::fsutil::open_plain_file(&spec.stderr_log)
        .ok()??
        .take(4096)
        .read_to_end(&mut head)
        .ok()?;
    crate::sandbox::keeper::not_started(exit_code, &head).map(ProcessEnd::NotStarted)
}

/// Run one attempt to its end. `on_start` is called with the process group id right after
/// the spawn (the dispatcher journals it so orphans can be found after a crash).
///
/// A start that fails for want of descriptors or processes (EMFILE, ENFILE, EAGAIN) is
/// retried until it succeeds or the run is interrupted: back-pressure, not a failure. The
/// time limit does not count time the runner spent stopped by job control. When the leader
/// has exited and the group is killed, every process carrying the attempt's marker is ended
/// too ([`descendants::end_attempt`]).
pub(crate) async fn run(
    spec: &Spawn,
    mut cancel: watch::Receiver<Cancel>,
    on_start: impl FnOnce(u32),
) -> Exit {
    let ended_early = |end: ProcessEnd| Exit {
        end,
        exit_code: None,
        elapsed: Duration::ZERO,
        stdout_bytes: 0,
        stderr_bytes: 0,
        stdout_held: None,
        held_pipes: Holders::default(),
    };
    let marker = descendants::new_attempt();
    let Started {
        mut child,
        registered,
        stdout_file,
    } = match start_patiently(spec, &marker, &mut cancel).await {
        Ok(started) => started,
        Err(end) => return ended_early(end),
    };
    let started = Instant::now();
    let stopped_before = job_control::stopped_total();
    let stopped_since_start = || job_control::stopped_total().saturating_sub(stopped_before);
    let Some(pid) = child.id() else {
        return ended_early(ProcessEnd::NotStarted(
            "the process exited before its id could be read".into(),
        ));
    };
    // A crash test's kill between starting the agent and journaling its attempt.
    crate::fault::point("after_spawn");
    let pgid = Pid::from_raw(pid as i32);
    let guard = GroupGuard {
        pgid,
        marker: Some(marker.clone()),
    };
    on_start(pid);

    let (hits_tx, mut hits) = mpsc::unbounded_channel::<LiveHit>();
    let watcher = |stream| {
        let rules = spec.live.as_ref()?;
        live::reads(rules.live(), stream)
            .then(|| LineWatch::new(rules.clone(), stream, hits_tx.clone()))
    };
    // The pipes' inodes, to find who holds them after the leader exits.
    let pipes = std::mem::take(&mut child.pipes);
    let mut out_task = child.stdout.take().map(|p| {
        tokio::spawn(drain(
            p,
            stdout_file,
            spec.log_cap,
            spec.activity.clone(),
            watcher(Stream::Stdout),
        ))
    });
    let mut err_task = child.stderr.take().map(|p| {
        tokio::spawn(drain(
            p,
            match spec.stderr_log_new {
                true => LogFile::new_lazy(spec.stderr_log.clone()),
                false => LogFile::lazy(spec.stderr_log.clone()),
            },
            spec.log_cap,
            spec.activity.clone(),
            watcher(Stream::Stderr),
        ))
    });
    drop(hits_tx);

    let (status, stopping) = until_exit(
        spec,
        &mut child,
        pgid,
        &marker,
        &mut hits,
        &mut cancel,
        &stopped_since_start,
    )
    .await;
    // Waited for: the reaper may collect what is left of the group from now on.
    drop(registered);
    let elapsed = started.elapsed().saturating_sub(stopped_since_start());

    // The leader is gone; give the pipes a bounded time to close, then end the group and
    // every process that left it.
    let closing = std::time::Instant::now();
    let (drained, held_pipes) =
        close_pipes(spec, [out_task.take(), err_task.take()], guard, &pipes).await;
    // Only now: a keeper serves another attempt (leading a group of the same id) once its
    // leader is dropped, so not before the group's last signal in `close_pipes`.
    drop(child);
    // The slot was taken until the pipes closed: a holder's time counts.
    let elapsed = match held_pipes.any() {
        false => elapsed,
        true => elapsed + closing.elapsed(),
    };

    let (end, exit_code) = judged_ending(spec, status, stopping, &mut cancel).await;
    let [stdout, stderr] = drained;
    Exit {
        end,
        exit_code,
        elapsed,
        stdout_bytes: stdout.bytes,
        stderr_bytes: stderr.bytes,
        stdout_held: stdout.held,
        held_pipes,
    }
}

/// Supervise the started child until its leader exits: at its time limit (time the runner
/// spent stopped by job control does not count), on a `[failure] live` line that ends it
/// (from `hits`), or when the run is interrupted (`cancel`), SIGTERM to the attempt, then
/// SIGKILL after the grace period (at once on an immediate cancel). Returns its wait
/// status, and why the runner was stopping it and since when, if it was.
async fn until_exit(
    spec: &Spawn,
    child: &mut Leader,
    pgid: Pid,
    marker: &str,
    hits: &mut mpsc::UnboundedReceiver<LiveHit>,
    cancel: &mut watch::Receiver<Cancel>,
    stopped_since_start: impl Fn() -> Duration,
) -> (
    std::io::Result<std::process::ExitStatus>,
    Option<(ProcessEnd, tokio::time::Instant)>,
) {
    let start_at = tokio::time::Instant::now();
    let mut deadline = spec.timeout.map(|t| start_at + t);
    let mut stopping: Option<(ProcessEnd, tokio::time::Instant)> = None;
    let mut killed = false;
    // When a keeper asked to kill its tree gets SIGKILL itself if it is still there.
    let mut keeper_due: Option<tokio::time::Instant> = None;
    // The last live line that did not end the attempt, quoted if it times out.
    let mut last_hit: Option<LiveHit> = None;
    let status = {
        let reports = child.report_fd();
        let wait = child.wait();
        tokio::pin!(wait);
        loop {
            let term_deadline = stopping.as_ref().map(|(_, at)| *at);
            tokio::select! {
                biased;
                status = &mut wait => break status,
                _ = sleep_until_opt(deadline), if stopping.is_none() => {
                    // Time the runner spent stopped (Ctrl-Z, kill -STOP) does not count.
                    job_control::account_stops();
                    let due = spec.timeout.map(|t| start_at + t + stopped_since_start());
                    if due.is_some_and(|due| due > tokio::time::Instant::now()) {
                        deadline = due;
                        continue;
                    }
                    if exited_already(pgid) || reports.is_some_and(crate::sandbox::client::reported) {
                        // It ended before its limit while nobody looked: judge it by the
                        // success rule once the wait sees it, not as timed out.
                        deadline = Some(tokio::time::Instant::now() + REAP_GRACE);
                        continue;
                    }
                    let limit = spec.timeout.unwrap_or_default();
                    signal_attempt(pgid, spec.sandbox.is_some(), marker, Signal::SIGTERM);
                    let last_error = last_hit.as_ref().map(|h: &LiveHit| format!("{} ({})", h.text, h.kind));
                    stopping = Some((ProcessEnd::TimedOut { limit, last_error, silent: false }, tokio::time::Instant::now() + spec.grace));
                }
                Some(hit) = hits.recv(), if stopping.is_none() => {
                    // A line the definition says means "give up" (issue 29): end the attempt
                    // now rather than at its time limit.
                    let left = deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
                    if !hit.ends_attempt(left) {
                        last_hit = Some(hit);
                        continue;
                    }
                    let hint = spec
                        .live
                        .as_ref()
                        .and_then(|r| r.hint_for(&hit.line).or_else(|| r.hint_for(&hit.text)));
                    tracing::info!("{pgid}: ended by its output: {} ({})", hit.text, hit.kind);
                    signal_attempt(pgid, spec.sandbox.is_some(), marker, Signal::SIGTERM);
                    let end = ProcessEnd::Failed {
                        kind: hit.kind,
                        reason: hit.reason(hint.as_deref()),
                        retry_after: hit.wait,
                    };
                    stopping = Some((end, tokio::time::Instant::now() + spec.grace));
                }
                _ = sleep_until_opt(term_deadline), if !killed => {
                    signal_attempt(pgid, spec.sandbox.is_some(), marker, Signal::SIGKILL);
                    killed = true;
                    keeper_due = spec.sandbox.is_some().then(|| tokio::time::Instant::now() + KEEPER_KILL_WAIT);
                }
                _ = sleep_until_opt(keeper_due), if keeper_due.is_some() => {
                    tracing::warn!("the sandbox keeper {pgid} did not end its tree in {KEEPER_KILL_WAIT:?}; killing its group");
                    signal_group(pgid, Signal::SIGKILL);
                    keeper_due = None;
                }
                changed = cancel.changed(), if !killed => {
                    let level = if changed.is_ok() { *cancel.borrow() } else { Cancel::Immediate };
                    match level {
                        Cancel::None => {}
                        Cancel::Graceful if stopping.is_none() => {
                            signal_attempt(pgid, spec.sandbox.is_some(), marker, Signal::SIGTERM);
                            stopping = Some((ProcessEnd::Cancelled, tokio::time::Instant::now() + spec.grace));
                        }
                        Cancel::Graceful => {}
                        Cancel::Immediate => {
                            signal_attempt(pgid, spec.sandbox.is_some(), marker, Signal::SIGKILL);
                            killed = true;
                            keeper_due = spec.sandbox.is_some().then(|| tokio::time::Instant::now() + KEEPER_KILL_WAIT);
                            if stopping.is_none() {
                                stopping = Some((ProcessEnd::Cancelled, tokio::time::Instant::now()));
                            }
                        }
                    }
                }
            }
        }
    };
    (status, stopping)
}

/// After the leader exited: wait up to `spec.pipe_wait` for the pipes to close, then kill the
/// group and every process carrying the attempt's marker (`guard`'s), and collect what is
/// left of the drains; the guard is done then. Returns what was drained from stdout and
/// stderr, and the processes that still held the pipes when the wait ended (empty when they
/// closed in time).
async fn close_pipes(
    spec: &Spawn,
    mut drains: [Option<tokio::task::JoinHandle<Drained>>; 2],
    mut guard: GroupGuard,
    pipes: &[u64],
) -> ([Drained; 2], Holders) {
    let pgid = guard.pgid;
    let marker = guard.marker.clone().unwrap_or_default();
    let mut drained = [Drained::default(), Drained::default()];
    let pipes_closed = tokio::time::timeout(spec.pipe_wait, async {
        for (i, slot) in drains.iter_mut().enumerate() {
            if let Some(handle) = slot.as_mut() {
                drained[i] = handle.await.unwrap_or_default();
                *slot = None;
            }
        }
    })
    .await
    .is_ok();
    // Who holds the pipes: found by the pipes themselves, since a holder may have dropped
    // the attempt's mark and left its group and session (issue 50).
    let holding = match pipes_closed {
        true => Vec::new(),
        false => descendants::pipe_holders(pipes),
    };
    let named: Vec<(i32, String)> = holding
        .iter()
        .map(|pid| (*pid, descendants::describe(*pid)))
        .collect();
    let group_gone = signal_group(pgid, Signal::SIGKILL);
    for pid in &holding {
        let _ = nix::sys::signal::kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    let left_group = descendants::end_attempt(&marker, pgid.as_raw(), group_gone).await;
    guard.marker = None;
    match group_gone {
        // Nothing is left for the guard to kill (`signal_group`).
        true => std::mem::forget(guard),
        false => drop(guard),
    }
    for (i, slot) in drains.iter_mut().enumerate() {
        if let Some(mut handle) = slot.take() {
            // Killed holders close the pipes at once; a process that escaped every signal
            // cannot keep us waiting.
            match tokio::time::timeout(Duration::from_secs(2), &mut handle).await {
                Ok(d) => drained[i] = d.unwrap_or_default(),
                Err(_) => handle.abort(),
            }
        }
    }
    // Killed holders and processes that left the group may be the runner's to reap; when
    // there were none, `end_attempt` found nothing adopted and reaped what it saw.
    if !holding.is_empty() || left_group > 0 {
        descendants::reap_zombies();
    }
    let (left, ended): (Vec<_>, Vec<_>) = named
        .into_iter()
        .partition(|(pid, _)| descendants::alive(*pid));
    let mut holders = Holders {
        ended: ended.into_iter().map(|(_, name)| name).collect(),
        left: left.into_iter().map(|(_, name)| name).collect(),
    };
    if !pipes_closed {
        tracing::debug!(
            "pipes of group {pgid} still open {:?} after exit; ended {:?}, left {:?}",
            spec.pipe_wait,
            holders.ended,
            holders.left
        );
        // The wait ran out with nobody left to name (a holder that ended just then).
        if holders.ended.is_empty() && holders.left.is_empty() {
            holders
                .ended
                .push("a process the runner could not name".to_owned());
        }
    }
    (drained, holders)
}

/// The processes that kept an attempt's stdout or stderr open after it exited, each as
/// `name (pid N)`: those the runner ended, and those still alive after it tried (another
/// user's process, one stuck in the kernel), which the item's stderr log records.
#[derive(Debug, Clone, Default)]
pub(crate) struct Holders {
    /// Ended by the runner (killed, and gone).
    pub ended: Vec<String>,
    /// Still alive after SIGKILL.
    pub left: Vec<String>,
}

impl Holders {
    /// Whether anything held the pipes past the wait.
    pub(crate) fn any(&self) -> bool {
        !self.ended.is_empty() || !self.left.is_empty()
    }
}

/// How the attempt ended ([`ending`]), and its exit code, as the verdict takes it: a stop
/// signal the runner did not send, met by the runner's own interrupt (a process-tree kill,
/// an IDE closing its terminal), is that interrupt's (issue 50), not the agent's failure;
/// a confined attempt whose keeper could not exec the program did not start.
async fn judged_ending(
    spec: &Spawn,
    status: std::io::Result<std::process::ExitStatus>,
    stopping: Option<(ProcessEnd, tokio::time::Instant)>,
    cancel: &mut watch::Receiver<Cancel>,
) -> (ProcessEnd, Option<i32>) {
    let unasked = stopping.is_none();
    let (end, exit_code) = ending(status, stopping);
    let end = match unasked && by_stop_signal(&end) && interrupted_soon(cancel).await {
        true => ProcessEnd::Cancelled,
        false => end,
    };
    let end = match &spec.sandbox {
        Some(_) => keeper_not_started(spec, exit_code).unwrap_or(end),
        None => end,
    };
    (end, exit_code)
}

/// How the attempt ended, from its wait status and why the runner was stopping it, if it
/// was: `(end, exit code)`.
fn ending(
    status: std::io::Result<std::process::ExitStatus>,
    stopping: Option<(ProcessEnd, tokio::time::Instant)>,
) -> (ProcessEnd, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match status {
        // The sandbox's keeper server ended under a confined attempt (killed, crashed): its
        // keeper killed the attempt's tree. The runner's own stop, if any, says why first.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => match stopping {
            Some((end, _)) => (end, None),
            None => (
                ProcessEnd::Failed {
                    kind: crate::failure::FailureKind::Setup,
                    reason: e.to_string(),
                    retry_after: None,
                },
                None,
            ),
        },
        Err(e) => (
            ProcessEnd::NotStarted(format!("cannot wait for the process: {e}")),
            None,
        ),
        Ok(st) => match stopping {
            Some((end, _)) => (end, st.code()),
            None => match (st.code(), st.signal()) {
                (Some(code), _) => (ProcessEnd::Exited(code), Some(code)),
                (None, Some(sig)) => (ProcessEnd::Signalled(sig), None),
                (None, None) => (ProcessEnd::Signalled(0), None),
            },
        },
    }
}

/// How long an attempt ended by a stop signal the runner did not send waits for the
/// runner's own interrupt to show (they arrived together; the runner's may be handled a
/// little later on a loaded machine).
const TOGETHER: Duration = Duration::from_secs(1);

/// Whether `end` is what a stop signal does to a process: killed by SIGTERM, SIGINT, SIGHUP
/// or SIGQUIT, or exited with 128 plus one of them (a shell, or a CLI that handles it).
fn by_stop_signal(end: &ProcessEnd) -> bool {
    const STOPS: [i32; 4] = [
        Signal::SIGHUP as i32,
        Signal::SIGINT as i32,
        Signal::SIGQUIT as i32,
        Signal::SIGTERM as i32,
    ];
    match end {
        ProcessEnd::Signalled(sig) => STOPS.contains(sig),
        ProcessEnd::Exited(code) => STOPS.iter().any(|s| 128 + s == *code),
        _ => false,
    }
}

/// Whether the run is interrupted now or within [`TOGETHER`].
async fn interrupted_soon(cancel: &mut watch::Receiver<Cancel>) -> bool {
    let wait = async {
        loop {
            if *cancel.borrow_and_update() != Cancel::None {
                return true;
            }
            if cancel.changed().await.is_err() {
                return false;
            }
        }
    };
    tokio::time::timeout(TOGETHER, wait).await.unwrap_or(false)
}

/// How long a deadline waits for the wait to see a leader that has exited already.
const REAP_GRACE: Duration = Duration::from_millis(20);

/// Whether the group leader `pid` has exited and waits to be reaped (looked at without
/// reaping it: `waitid` with `WNOWAIT`, the wait future still collects it).
fn exited_already(pid: Pid) -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    matches!(
        waitid(
            Id::Pid(pid),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        ),
        Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..))
    )
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::run::supervise::capped_log::{HOLD_FOR, HOLD_MAX};

    fn spawn(dir: &Path, script: &str, stdin: Option<PathBuf>) -> Spawn {
        Spawn {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: dir.to_owned(),
            env_unset: Vec::new(),
            env_set: Vec::new(),
            stdin: stdin.map_or(Stdin::Null, Stdin::File),
            stdout_log: dir.join("attempt-1.stdout.log"),
            hold_stdout: false,
            stderr_log: dir.join("attempt-1.stderr.log"),
            stderr_log_new: false,
            log_cap: 1024 * 1024,
            timeout: Some(Duration::from_secs(20)),
            grace: Duration::from_secs(1),
            pipe_wait: Duration::from_secs(1),
            activity: None,
            sandbox: None,
            live: None,
        }
    }

    fn run_to_end(spec: &Spawn) -> Exit {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let (_tx, rx) = watch::channel(Cancel::None);
        rt.block_on(run(spec, rx, |_| {}))
    }

    /// Rules with the `live` entries of `toml` (`[failure]` keys).
    fn live_rules(toml: &str) -> Option<std::sync::Arc<FailureRules>> {
        let rules: FailureRules = toml::from_str(toml).expect("rules");
        Some(std::sync::Arc::new(rules))
    }

    /// A CLI that retries a rejected key on its own (printing so, in a line split across
    /// writes) is ended at once, as `auth`, with its words — not at its time limit — and
    /// leaves nothing running; a rate limit whose wait fits the time left is left to it.
    #[test]
    fn a_live_line_ends_the_attempt_at_once_with_its_kind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spec = spawn(
            dir.path(),
            "printf 'working\\nRetrying in 5s (attempt 1/10): 429\\n' >&2; \
             printf 'Retrying in 2s (attempt 2/10): [API Error: 401 inv'; sleep 0.2; \
             printf 'alid key]\\n'; sleep 30 & wait",
            None,
        );
        spec.timeout = Some(Duration::from_secs(60));
        spec.live = live_rules(
            r#"live = [
                { kind = "rate_limited", stream = "stderr", regex = "^Retrying in" },
                { kind = "auth", stream = "stdout", regex = "^Retrying in .*401" },
            ]"#,
        );
        let exit = run_to_end(&spec);
        assert!(exit.elapsed < Duration::from_secs(10), "{exit:?}");
        match &exit.end {
            ProcessEnd::Failed { kind, reason, .. } => {
                assert_eq!(*kind, crate::failure::FailureKind::Auth);
                assert!(reason.contains("[API Error: 401 invalid key]"), "{reason}");
            }
            other => panic!("ended by its output: {other:?}"),
        }
        // The same output without `live` rules runs to the limit.
        spec.live = None;
        spec.timeout = Some(Duration::from_secs(2));
        let exit = run_to_end(&spec);
        assert!(matches!(exit.end, ProcessEnd::TimedOut { .. }), "{exit:?}");
    }

    /// A rate limit the CLI waits out on its own does not end the attempt; when the attempt
    /// then times out, its reason has the last such line to quote.
    #[test]
    fn a_timed_out_attempt_keeps_the_last_live_line_it_saw() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spec = spawn(
            dir.path(),
            "echo 'Retrying (attempt 1/10): 429 Too Many Requests' >&2; \
             echo 'Retrying (attempt 2/10): 429 Too Many Requests' >&2; sleep 30",
            None,
        );
        spec.timeout = Some(Duration::from_secs(2));
        spec.live = live_rules(r#"live = [{ kind = "rate_limited", regex = "^Retrying" }]"#);
        let exit = run_to_end(&spec);
        match &exit.end {
            ProcessEnd::TimedOut { last_error, .. } => assert_eq!(
                last_error.as_deref(),
                Some("Retrying (attempt 2/10): 429 Too Many Requests (rate_limited)")
            ),
            other => panic!("timed out: {other:?}"),
        }
    }

    /// A rate-limit wait longer than the attempt has left ends it, with that wait.
    #[test]
    fn a_live_rate_limit_longer_than_the_time_left_ends_the_attempt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spec = spawn(
            dir.path(),
            "echo 'Retrying in 60s (attempt 1/10): 429 Too Many Requests' >&2; sleep 30",
            None,
        );
        spec.timeout = Some(Duration::from_secs(20));
        spec.live = live_rules(r#"live = [{ kind = "rate_limited", regex = "^Retrying in" }]"#);
        let exit = run_to_end(&spec);
        match &exit.end {
            ProcessEnd::Failed {
                kind, retry_after, ..
            } => {
                assert_eq!(*kind, crate::failure::FailureKind::RateLimited);
                assert_eq!(*retry_after, Some(Duration::from_secs(60)));
            }
            other => panic!("ended by its output: {other:?}"),
        }
        assert!(exit.elapsed < Duration::from_secs(10), "{exit:?}");
    }

    #[test]
    fn the_stderr_log_exists_only_when_the_child_wrote_to_stderr_and_never_a_stale_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = spawn(dir.path(), "echo out", None);
        std::fs::write(&spec.stderr_log, "stale line from an earlier run\n").expect("stale");
        let exit = run_to_end(&spec);
        assert_eq!(exit.end, ProcessEnd::Exited(0));
        assert_eq!(
            std::fs::read_to_string(&spec.stdout_log).expect("stdout log"),
            "out\n"
        );
        assert!(!spec.stderr_log.exists(), "a stale stderr log survived");

        let spec = spawn(dir.path(), "echo err >&2; exit 3", None);
        let exit = run_to_end(&spec);
        assert_eq!(exit.end, ProcessEnd::Exited(3));
        assert_eq!(
            std::fs::read_to_string(&spec.stderr_log).expect("stderr log"),
            "err\n"
        );
        assert_eq!(
            std::fs::read_to_string(&spec.stdout_log).expect("stdout log"),
            "",
            "the stdout log exists even when empty"
        );
    }

    #[test]
    fn a_prompt_in_memory_is_a_read_only_stdin_read_to_its_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Larger than a pipe buffer (64 KiB): a pipe would need the runner to feed it.
        let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        let mut spec = spawn(
            dir.path(),
            // Read it, try to write through it, then read it again from its start: a file.
            "cat; ! (echo x >&0) 2>/dev/null && cat /dev/stdin >/dev/null",
            None,
        );
        spec.stdin = Stdin::Text(text.as_str().into());
        let exit = run_to_end(&spec);
        assert_eq!(exit.end, ProcessEnd::Exited(0), "stdin must be read-only");
        assert_eq!(
            std::fs::read_to_string(&spec.stdout_log).expect("stdout log"),
            text
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, ["attempt-1.stdout.log"], "no prompt file on disk");
    }

    #[test]
    fn a_held_stdout_of_a_quick_child_makes_no_file_and_a_long_one_gets_its_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spec = spawn(dir.path(), "echo quick", None);
        spec.hold_stdout = true;
        let exit = run_to_end(&spec);
        assert_eq!(exit.stdout_held.as_deref(), Some(&b"quick\n"[..]));
        assert_eq!(exit.stdout_bytes, 6);
        assert!(!spec.stdout_log.exists(), "held: no file");

        // More than it holds: everything goes to the log, nothing is handed back.
        let big = HOLD_MAX + 10;
        let mut spec = spawn(
            dir.path(),
            &format!("head -c {big} /dev/zero | tr '\\0' x"),
            None,
        );
        spec.hold_stdout = true;
        let exit = run_to_end(&spec);
        assert_eq!(exit.stdout_held, None);
        let log = std::fs::read(&spec.stdout_log).expect("log");
        assert_eq!(log.len(), big);
        assert!(log.iter().all(|b| *b == b'x'));

        // A child that runs past HOLD_FOR has its log while it runs, with what it printed.
        std::fs::remove_file(&spec.stdout_log).expect("rm");
        let seen = dir.path().join("seen");
        let script = format!(
            "echo early; sleep {}; cat attempt-1.stdout.log > seen; echo late",
            HOLD_FOR.as_secs_f64() + 0.5
        );
        let mut spec = spawn(dir.path(), &script, None);
        spec.hold_stdout = true;
        let exit = run_to_end(&spec);
        assert_eq!(exit.stdout_held, None);
        assert_eq!(std::fs::read_to_string(&seen).expect("seen"), "early\n");
        assert_eq!(
            std::fs::read_to_string(&spec.stdout_log).expect("log"),
            "early\nlate\n"
        );
    }

    #[test]
    fn stdin_is_the_given_file_read_to_its_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let prompt = dir.path().join("prompt.md");
        // Larger than a pipe buffer (64 KiB): a pipe would need the runner to feed it.
        let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&prompt, &text).expect("prompt");
        let spec = spawn(dir.path(), "cat; ! (echo x >&0) 2>/dev/null", Some(prompt));
        let exit = run_to_end(&spec);
        assert_eq!(exit.end, ProcessEnd::Exited(0), "stdin must be read-only");
        assert_eq!(
            std::fs::read_to_string(&spec.stdout_log).expect("stdout log"),
            text
        );
    }
}
