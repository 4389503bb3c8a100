//! Starting and supervising one attempt's process (DESIGN §6).
//!
//! Each child runs as the leader of its own process group, marked with an attempt id in its
//! environment ([`descendants`]). A time limit or an interrupt sends SIGTERM to the whole
//! group (and to marked processes that left it), waits a grace period, then SIGKILL; an
//! immediate cancel (second Ctrl-C) sends SIGKILL at once. stdout and stderr are drained
//! concurrently into capped log files. After the leader exits, the runner waits a bounded
//! time for the pipes to close (a grandchild may hold them), then kills what is left of the
//! group and every marked process. No process the child started outlives [`run`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, watch};

use crate::failure::FailureRules;
use crate::failure::live::{self, LiveHit, Stream};
use crate::report::ProcessEnd;
use crate::run::supervise::{descendants, descriptors, job_control};

/// What the dispatcher asks running attempts to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cancel {
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
pub async fn interrupted(cancel: &mut tokio::sync::watch::Receiver<Cancel>) {
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
/// [`ACTIVITY_MAX_CHARS`] characters), for progress displays.
#[derive(Clone)]
pub struct ActivitySink(pub std::sync::Arc<dyn Fn(String) + Send + Sync>);

impl std::fmt::Debug for ActivitySink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ActivitySink")
    }
}

/// Longest activity line passed on, characters.
pub const ACTIVITY_MAX_CHARS: usize = 160;
/// Least time between two activity lines of one stream.
const ACTIVITY_EVERY: Duration = Duration::from_millis(250);

/// Everything needed to start one attempt.
#[derive(Debug, Clone)]
pub struct Spawn {
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
    /// it stays within [`HOLD_MAX`] bytes and the child has run less than [`HOLD_FOR`], it
    /// is handed back in [`Exit::stdout_held`] and no file is made (the caller writes it, or
    /// keeps it in a compacted record); past either bound it goes to the log as usual. A
    /// quick agent then costs no file; a slow one's log is there to follow within a second.
    pub hold_stdout: bool,
    /// Where stderr goes (capped); created when the first byte arrives.
    pub stderr_log: PathBuf,
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
    /// The program is the sandbox's keeper ([`crate::sandbox::shim`]): it must outlive the
    /// agent to end what the agent left, so it is sent [`crate::sandbox::shim::KILL_TREE`]
    /// where others get SIGKILL (SIGKILL follows only if it has not exited
    /// [`KEEPER_KILL_WAIT`] later).
    pub keeper: bool,
    /// The runner definition's rules, when its `[failure] live` lines may end the attempt
    /// while it runs ([`crate::failure::live`]); `None` for commands that are not agents.
    pub live: Option<std::sync::Arc<FailureRules>>,
}

/// What a child reads on its stdin.
#[derive(Debug, Clone, Default)]
pub enum Stdin {
    /// `/dev/null`.
    #[default]
    Null,
    /// A file, opened read-only (like `cmd < file`): the child reads it at its own pace and
    /// never waits on the runner to feed a pipe.
    File(PathBuf),
    /// This text, in a sealed in-memory file (`memfd_create`, then `F_SEAL_WRITE`): to the
    /// child it is a read-only file like the one above, at its own pace; nothing is written
    /// to disk and nothing in a teammate's reach can change it (DESIGN §6b: the runner's
    /// records are handed to the teammate as open descriptors).
    Text(std::sync::Arc<str>),
}

/// Most bytes of stdout [`Spawn::hold_stdout`] holds in memory.
pub const HOLD_MAX: usize = 64 * 1024;
/// Longest time [`Spawn::hold_stdout`] holds stdout in memory, from the start.
pub const HOLD_FOR: Duration = Duration::from_secs(1);

/// A sealed in-memory file holding `text`, positioned at its start ([`Stdin::Text`]).
fn sealed_text(text: &str) -> std::io::Result<std::fs::File> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    use std::io::{Seek, Write};
    let fd = memfd_create(
        c"runner-prompt",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(text.as_bytes())?;
    file.rewind()?;
    fcntl(
        &file,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_WRITE
                | SealFlag::F_SEAL_GROW
                | SealFlag::F_SEAL_SHRINK
                | SealFlag::F_SEAL_SEAL,
        ),
    )?;
    Ok(file)
}

/// How long a keeper told to kill its tree may take before its group is sent SIGKILL.
pub const KEEPER_KILL_WAIT: Duration = Duration::from_secs(2);

/// How an attempt's process ended.
#[derive(Debug, Clone)]
pub struct Exit {
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
    /// The processes that kept the child's stdout or stderr open after it exited, until the
    /// runner ended them [`Spawn::pipe_wait`] later (`sleep (pid 4242)`); that wait is part of
    /// [`Exit::elapsed`]. Empty when the pipes closed with the child.
    pub held_pipes: Vec<String>,
}

impl Exit {
    /// Of `spec`'s two logs, the one that explains this run: the stdout log, unless the child
    /// wrote nothing there and something to stderr.
    pub fn telling_log(&self, spec: &Spawn) -> PathBuf {
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
struct GroupGuard {
    pgid: Pid,
    marker: Option<String>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = killpg(self.pgid, Signal::SIGKILL);
        if let Some(marker) = &self.marker {
            descendants::kill_attempt_now(marker);
        }
    }
}

fn signal_group(pgid: Pid, sig: Signal) {
    match killpg(pgid, sig) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(e) => tracing::warn!("cannot send {sig} to process group {pgid}: {e}"),
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

/// Why an attempt did not start.
enum StartError {
    /// Out of descriptors or processes for now: wait and try again.
    Exhausted(String),
    /// It cannot start (the reason).
    Failed(String),
}

/// A started child with what the supervisor holds for it.
struct Started {
    child: tokio::process::Child,
    registered: Option<descendants::Registered>,
    stdout_file: LogFile,
}

/// Create the stdout log (unless it is held), open stdin and spawn the child as the leader
/// of a new process group, marked with `marker`.
fn start(spec: &Spawn, marker: &str) -> Result<Started, StartError> {
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
    let stdin = match &spec.stdin {
        Stdin::Null => Stdio::null(),
        Stdin::File(path) => Stdio::from(
            std::fs::File::open(path)
                .map_err(|e| failed(format!("cannot open {}", path.display()), e))?,
        ),
        Stdin::Text(text) => Stdio::from(
            sealed_text(text)
                .map_err(|e| failed("cannot hand the prompt over in memory".to_owned(), e))?,
        ),
    };
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
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
        child,
        registered,
        stdout_file,
    })
}

/// First wait after a start failed for want of descriptors or processes; doubled up to
/// [`START_RETRY_MAX`].
const START_RETRY_FIRST: Duration = Duration::from_millis(20);
const START_RETRY_MAX: Duration = Duration::from_secs(1);

/// Run one attempt to its end. `on_start` is called with the process group id right after
/// the spawn (the dispatcher journals it so orphans can be found after a crash).
///
/// A start that fails for want of descriptors or processes (EMFILE, ENFILE, EAGAIN) is
/// retried until it succeeds or the run is interrupted: back-pressure, not a failure. The
/// time limit does not count time the runner spent stopped by job control. When the leader
/// has exited and the group is killed, every process carrying the attempt's marker is ended
/// too ([`descendants::end_attempt`]).
pub async fn run(
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
        held_pipes: Vec::new(),
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
    let mut guard = GroupGuard {
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
            LogFile::lazy(spec.stderr_log.clone()),
            spec.log_cap,
            spec.activity.clone(),
            watcher(Stream::Stderr),
        ))
    });
    drop(hits_tx);

    let start_at = tokio::time::Instant::now();
    let mut deadline = spec.timeout.map(|t| start_at + t);
    let mut stopping: Option<(ProcessEnd, tokio::time::Instant)> = None;
    let mut killed = false;
    // When a keeper asked to kill its tree gets SIGKILL itself if it is still there.
    let mut keeper_due: Option<tokio::time::Instant> = None;
    // The last live line that did not end the attempt, quoted if it times out.
    let mut last_hit: Option<LiveHit> = None;
    let status = {
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
                    if exited_already(pgid) {
                        // It ended before its limit while nobody looked: judge it by the
                        // success rule once the wait sees it, not as timed out.
                        deadline = Some(tokio::time::Instant::now() + REAP_GRACE);
                        continue;
                    }
                    let limit = spec.timeout.unwrap_or_default();
                    signal_attempt(pgid, spec.keeper, &marker, Signal::SIGTERM);
                    let last_error = last_hit.as_ref().map(|h: &LiveHit| format!("{} ({})", h.text, h.kind));
                    stopping = Some((ProcessEnd::TimedOut { limit, last_error }, tokio::time::Instant::now() + spec.grace));
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
                    signal_attempt(pgid, spec.keeper, &marker, Signal::SIGTERM);
                    let end = ProcessEnd::Failed {
                        kind: hit.kind,
                        reason: hit.reason(hint.as_deref()),
                        retry_after: hit.wait,
                    };
                    stopping = Some((end, tokio::time::Instant::now() + spec.grace));
                }
                _ = sleep_until_opt(term_deadline), if !killed => {
                    signal_attempt(pgid, spec.keeper, &marker, Signal::SIGKILL);
                    killed = true;
                    keeper_due = spec.keeper.then(|| tokio::time::Instant::now() + KEEPER_KILL_WAIT);
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
                            signal_attempt(pgid, spec.keeper, &marker, Signal::SIGTERM);
                            stopping = Some((ProcessEnd::Cancelled, tokio::time::Instant::now() + spec.grace));
                        }
                        Cancel::Graceful => {}
                        Cancel::Immediate => {
                            signal_attempt(pgid, spec.keeper, &marker, Signal::SIGKILL);
                            killed = true;
                            keeper_due = spec.keeper.then(|| tokio::time::Instant::now() + KEEPER_KILL_WAIT);
                            if stopping.is_none() {
                                stopping = Some((ProcessEnd::Cancelled, tokio::time::Instant::now()));
                            }
                        }
                    }
                }
            }
        }
    };
    // Waited for: the reaper may collect what is left of the group from now on.
    drop(registered);
    let elapsed = started.elapsed().saturating_sub(stopped_since_start());

    // The leader is gone; give the pipes a bounded time to close, then end the group and
    // every process that left it.
    let closing = std::time::Instant::now();
    let (drained, held_pipes) =
        close_pipes(spec, [out_task.take(), err_task.take()], pgid, &marker).await;
    guard.marker = None;
    drop(guard);
    // The slot was taken until the pipes closed: a holder's time counts.
    let elapsed = match held_pipes.is_empty() {
        true => elapsed,
        false => elapsed + closing.elapsed(),
    };

    let (end, exit_code) = ending(status, stopping);
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

/// After the leader exited: wait up to `spec.pipe_wait` for the pipes to close, then kill the
/// group and every process carrying `marker`, and collect what is left of the drains. Returns
/// what was drained from stdout and stderr, and the processes that still held the pipes
/// when the wait ended (empty when they closed in time).
async fn close_pipes(
    spec: &Spawn,
    mut drains: [Option<tokio::task::JoinHandle<Drained>>; 2],
    pgid: Pid,
    marker: &str,
) -> ([Drained; 2], Vec<String>) {
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
    let holders = match pipes_closed {
        true => Vec::new(),
        false => descendants::describe_attempt(marker),
    };
    signal_group(pgid, Signal::SIGKILL);
    descendants::end_attempt(marker, pgid.as_raw()).await;
    if !pipes_closed {
        tracing::debug!(
            "pipes of group {pgid} still open {:?} after exit ({}); killed the group",
            spec.pipe_wait,
            holders.join(", ")
        );
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
    // The wait ran out with nobody left to name (a holder that ended just then).
    let holders = match (pipes_closed, holders.is_empty()) {
        (false, true) => vec!["a process the runner could not name".to_owned()],
        _ => holders,
    };
    (drained, holders)
}

/// [`start`], tried again with back-off while descriptors or processes are short; the
/// `ProcessEnd` when it cannot start (`NotStarted`) or the run is interrupted meanwhile
/// (`Cancelled`).
async fn start_patiently(
    spec: &Spawn,
    marker: &str,
    cancel: &mut watch::Receiver<Cancel>,
) -> std::result::Result<Started, ProcessEnd> {
    let mut pause = START_RETRY_FIRST;
    loop {
        match start(spec, marker) {
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

/// How the attempt ended, from its wait status and why the runner was stopping it, if it
/// was: `(end, exit code)`.
fn ending(
    status: std::io::Result<std::process::ExitStatus>,
    stopping: Option<(ProcessEnd, tokio::time::Instant)>,
) -> (ProcessEnd, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match status {
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

/// What [`drain`] read from one stream.
#[derive(Debug, Default)]
struct Drained {
    /// Bytes read (before capping).
    bytes: u64,
    /// All of them, when a held log kept them in memory to the end ([`Spawn::hold_stdout`]).
    held: Option<Vec<u8>>,
}

/// Copy `pipe` into `file`, keeping at most `cap` bytes: the first half, then the last half
/// (held in a ring file beside the log while running), with a marker line where bytes were
/// cut. Returns the total bytes read, and a held log's bytes when it never needed its file
/// (at most [`HOLD_MAX`], within [`HOLD_FOR`]). Memory use is one 16 KiB buffer (and a held
/// log's bytes). Log writes go to the page cache with plain (blocking) writes: they take
/// microseconds, and a disk error never stops the draining, so a child can never block on a
/// full pipe.
async fn drain(
    mut pipe: impl AsyncRead + Unpin,
    mut log: LogFile,
    cap: u64,
    activity: Option<ActivitySink>,
    mut watch: Option<LineWatch>,
) -> Drained {
    use std::io::{Seek, Write};
    let mut last_sent: Option<tokio::time::Instant> = None;
    let head_cap = cap / 2;
    let tail_cap = cap - head_cap;
    let ring_path = ring_path(&log.path);
    let mut ring: Option<std::fs::File> = None;
    let mut total: u64 = 0;
    let mut ring_written: u64 = 0;
    let mut buf = vec![0u8; 16 * 1024];
    // A held log goes to its file once it outgrows this or the child has run HOLD_FOR.
    let hold_max = HOLD_MAX.min(head_cap as usize);
    let spill_at = tokio::time::Instant::now() + HOLD_FOR;
    // The newest line not yet passed on (held back by the throttle).
    let mut pending: Option<String> = None;
    loop {
        let holding = log.held.is_some();
        let activity_due = pending
            .is_some()
            .then(|| tokio::time::Instant::now() + ACTIVITY_EVERY);
        let wake = match (activity_due, holding) {
            (Some(a), true) => Some(a.min(spill_at)),
            (Some(a), false) => Some(a),
            (None, true) => Some(spill_at),
            (None, false) => None,
        };
        let read = match wake {
            // Wake up in time to pass the held-back line on even if nothing else comes, and
            // to give a held log its file.
            Some(at) => match tokio::time::timeout_at(at, pipe.read(&mut buf)).await {
                Ok(r) => r,
                Err(_) => {
                    let now = tokio::time::Instant::now();
                    if holding && now >= spill_at {
                        log.spill();
                    }
                    if activity_due.is_some_and(|due| now >= due)
                        && let (Some(sink), Some(line)) = (&activity, pending.take())
                    {
                        last_sent = Some(now);
                        (sink.0)(line);
                    }
                    continue;
                }
            },
            None => pipe.read(&mut buf).await,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut chunk = &buf[..n];
        if let Some(w) = watch.as_mut() {
            w.feed(chunk);
        }
        if let Some(sink) = &activity
            && let Some(line) = last_line(chunk)
        {
            if last_sent.is_none_or(|t| t.elapsed() >= ACTIVITY_EVERY) {
                last_sent = Some(tokio::time::Instant::now());
                pending = None;
                (sink.0)(line);
            } else {
                pending = Some(line);
            }
        }
        if let Some(held) = log.held.as_mut() {
            if held.len() + n <= hold_max {
                held.extend_from_slice(chunk);
                total += n as u64;
                continue;
            }
            log.spill();
        }
        if total < head_cap {
            let take = chunk.len().min((head_cap - total) as usize);
            if let Some(file) = log.file() {
                let _ = file.write_all(&chunk[..take]);
            }
            chunk = &chunk[take..];
        }
        total += n as u64;
        if chunk.is_empty() || tail_cap == 0 {
            continue;
        }
        if ring.is_none() {
            ring = open_ring(&ring_path).ok();
        }
        if let Some(r) = ring.as_mut() {
            while !chunk.is_empty() {
                let pos = ring_written % tail_cap;
                let take = chunk.len().min((tail_cap - pos) as usize);
                if r.seek(std::io::SeekFrom::Start(pos)).is_err()
                    || r.write_all(&chunk[..take]).is_err()
                {
                    break;
                }
                ring_written += take as u64;
                chunk = &chunk[take..];
            }
        }
    }
    if let Some(mut r) = ring {
        if let Some(file) = log.file() {
            let _ = finish_ring(file, &mut r, ring_written, tail_cap);
        }
        drop(r);
        let _ = std::fs::remove_file(&ring_path);
    }
    if let Some(file) = log.file.as_mut() {
        let _ = file.flush();
    }
    Drained {
        bytes: total,
        held: log.held.take(),
    }
}

/// Assembles one stream's lines and passes each that a `[failure] live` entry matches on
/// to the supervising loop. Holds at most [`live::LINE_MAX`] bytes of a line; a longer line
/// is skipped. After an `auth` or `quota` hit (which always ends the attempt) it stops.
struct LineWatch {
    rules: std::sync::Arc<FailureRules>,
    stream: Stream,
    line: Vec<u8>,
    /// The current line has outgrown [`live::LINE_MAX`]: skipped up to its newline.
    overlong: bool,
    done: bool,
    hits: mpsc::UnboundedSender<LiveHit>,
}

impl LineWatch {
    fn new(
        rules: std::sync::Arc<FailureRules>,
        stream: Stream,
        hits: mpsc::UnboundedSender<LiveHit>,
    ) -> LineWatch {
        LineWatch {
            rules,
            stream,
            line: Vec::new(),
            overlong: false,
            done: false,
            hits,
        }
    }

    fn feed(&mut self, chunk: &[u8]) {
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            if self.done {
                return;
            }
            if !self.overlong {
                if self.line.len() + piece.len() > live::LINE_MAX + 1 {
                    self.overlong = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(piece);
                }
            }
            if !piece.ends_with(b"\n") {
                continue;
            }
            if !self.overlong
                && let Some(hit) = live::first_hit(self.rules.live(), self.stream, &self.line)
            {
                self.done = hit.kind != crate::failure::FailureKind::RateLimited;
                let _ = self.hits.send(hit);
            }
            self.line.clear();
            self.overlong = false;
        }
    }
}

/// A log file: opened up front, or created when its first byte arrives so that a silent
/// stream leaves no empty file behind.
struct LogFile {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Creating the file failed once: the stream is still drained, its bytes dropped.
    failed: bool,
    /// A held log's bytes, kept in memory until it [`LogFile::spill`]s
    /// ([`Spawn::hold_stdout`]).
    held: Option<Vec<u8>>,
}

impl LogFile {
    fn open(path: PathBuf, file: std::fs::File) -> LogFile {
        LogFile {
            path,
            file: Some(file),
            failed: false,
            held: None,
        }
    }

    /// A log held in memory; its file is created when it [`LogFile::spill`]s.
    fn held(path: PathBuf) -> LogFile {
        LogFile {
            path,
            file: None,
            failed: false,
            held: Some(Vec::new()),
        }
    }

    /// Give a held log its file, with what it held so far (an empty file when nothing).
    fn spill(&mut self) {
        use std::io::Write;
        if let Some(bytes) = self.held.take()
            && let Some(file) = self.file()
        {
            let _ = file.write_all(&bytes);
        }
    }

    /// A log created on first use. A file already at `path` (left by an earlier run that
    /// used the same attempt number) is removed now: it must not pass for this attempt's.
    fn lazy(path: PathBuf) -> LogFile {
        let _ = std::fs::remove_file(&path);
        LogFile {
            path,
            file: None,
            failed: false,
            held: None,
        }
    }

    /// The open file, created (mode 0600) on first use; `None` when it cannot be created.
    fn file(&mut self) -> Option<&mut std::fs::File> {
        if self.file.is_none() && !self.failed {
            match crate::fsutil::create_private_file(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(e) => {
                    tracing::warn!(
                        "cannot create {}: {e}; its output is dropped",
                        self.path.display()
                    );
                    self.failed = true;
                }
            }
        }
        self.file.as_mut()
    }
}

/// The last complete, non-blank line of `chunk`, cleaned for a terminal: control characters
/// (escape sequences included) become spaces, at most [`ACTIVITY_MAX_CHARS`] characters.
fn last_line(chunk: &[u8]) -> Option<String> {
    let end = chunk.iter().rposition(|b| *b == b'\n')?;
    let text = String::from_utf8_lossy(&chunk[..end]);
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    let clean: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(ACTIVITY_MAX_CHARS)
        .collect();
    Some(clean)
}

fn finish_ring(
    file: &mut std::fs::File,
    ring: &mut std::fs::File,
    ring_written: u64,
    tail_cap: u64,
) -> std::io::Result<()> {
    use std::io::Write;
    if ring_written <= tail_cap {
        return copy_range(ring, file, 0, ring_written);
    }
    let marker = format!(
        "\n[runner: {} bytes cut here; the log keeps its first and last bytes]\n",
        ring_written - tail_cap
    );
    file.write_all(marker.as_bytes())?;
    let pos = ring_written % tail_cap;
    copy_range(ring, file, pos, tail_cap - pos)?;
    copy_range(ring, file, 0, pos)
}

fn copy_range(
    from: &mut std::fs::File,
    to: &mut std::fs::File,
    start: u64,
    len: u64,
) -> std::io::Result<()> {
    use std::io::{Read, Seek, Write};
    let mut buf = vec![0u8; 64 * 1024];
    from.seek(std::io::SeekFrom::Start(start))?;
    let mut left = len;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        from.read_exact(&mut buf[..want])?;
        to.write_all(&buf[..want])?;
        left -= want as u64;
    }
    Ok(())
}

/// The ring file of a capped log: a new private file, never one opened through a link
/// ([`crate::fsutil::create_private_file`]), read back when the log is closed.
fn open_ring(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .mode(0o600)
        .open(path)
}

fn ring_path(log: &Path) -> PathBuf {
    let mut name = log
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tail");
    log.with_file_name(name)
}

/// Most bytes of each stream [`capture`] keeps (the rest is read and dropped).
pub const CAPTURE_MAX: usize = 64 * 1024;
/// How long [`capture`] waits for the pipes to close after the program exits (a grandchild
/// may hold them) before it ends the group.
const CAPTURE_PIPE_WAIT: Duration = Duration::from_millis(500);

/// What a short command printed, from [`capture`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Its stdout, lossily decoded, at most [`CAPTURE_MAX`] bytes.
    pub stdout: String,
    /// Its stderr, lossily decoded, at most [`CAPTURE_MAX`] bytes.
    pub stderr: String,
}

/// Why [`capture`] has no output.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The program could not be started.
    #[error("cannot run: {0}")]
    Spawn(std::io::Error),
    /// Waiting for it failed.
    #[error("cannot wait: {0}")]
    Wait(std::io::Error),
    /// It did not exit within the time limit (its group was killed).
    #[error("no answer in {}s", .0.as_secs())]
    TimedOut(Duration),
}

/// Run a short command to its end and keep what it printed, for questions such as
/// `--version`: argv (no shell), stdin /dev/null, in its own process group; stdout and stderr
/// are drained concurrently (so a chatty program never blocks on a full pipe), each kept up
/// to [`CAPTURE_MAX`] bytes. It gets `timeout` to exit; after it exits its pipes get a short
/// bounded wait. The whole group is killed before this returns, so nothing it started
/// outlives it. Blocking: call it from a plain thread, not from async code.
///
/// Errors: [`CaptureError::Spawn`] when it cannot start, [`CaptureError::TimedOut`] when it
/// did not exit in time, [`CaptureError::Wait`] when waiting for it failed.
pub fn capture(program: &Path, args: &[String], timeout: Duration) -> Result<Output, CaptureError> {
    use std::os::unix::process::CommandExt;
    use std::sync::mpsc;
    let mut cmd = std::process::Command::new(program);
    cmd.process_group(0)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut child, registered) = descendants::spawn_registered(|| cmd.spawn(), |c| Some(c.id()))
        .map_err(CaptureError::Spawn)?;
    let started = Instant::now();
    let group = GroupGuard {
        pgid: Pid::from_raw(child.id() as i32),
        marker: None,
    };
    let (tx, streams) = mpsc::channel::<(usize, Vec<u8>)>();
    let mut readers = 0;
    let pipes: [Option<Box<dyn std::io::Read + Send>>; 2] = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    ];
    for (i, pipe) in pipes.into_iter().enumerate() {
        let Some(pipe) = pipe else { continue };
        readers += 1;
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((i, read_bounded(pipe, CAPTURE_MAX)));
        });
    }
    drop(tx);
    let (exited_tx, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let status = child.wait();
        drop(registered);
        let _ = exited_tx.send(status);
    });
    let status = match exited.recv_timeout(timeout) {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => return Err(CaptureError::Wait(e)),
        Err(_) => {
            // Dropping the guard kills the group; the waiter thread then reaps the child.
            drop(group);
            return Err(CaptureError::TimedOut(timeout));
        }
    };
    let mut out = [Vec::new(), Vec::new()];
    let mut collect = |until: Instant, readers: &mut usize| {
        while *readers > 0 {
            let left = until.saturating_duration_since(Instant::now());
            match streams.recv_timeout(left) {
                Ok((i, bytes)) => {
                    out[i] = bytes;
                    *readers -= 1;
                }
                Err(_) => break,
            }
        }
    };
    let left = timeout.saturating_sub(started.elapsed());
    collect(Instant::now() + CAPTURE_PIPE_WAIT.min(left), &mut readers);
    // Killing the group closes the pipes its members still hold; a process that left the
    // group cannot keep us waiting longer than a moment.
    drop(group);
    collect(Instant::now() + CAPTURE_PIPE_WAIT, &mut readers);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok(Output {
        code: status.code(),
        stdout: text(&out[0]),
        stderr: text(&out[1]),
    })
}

/// Read `pipe` to its end, keeping its first `max` bytes.
fn read_bounded(mut pipe: impl std::io::Read, max: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

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
            log_cap: 1024 * 1024,
            timeout: Some(Duration::from_secs(20)),
            grace: Duration::from_secs(1),
            pipe_wait: Duration::from_secs(1),
            activity: None,
            keeper: false,
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

    #[test]
    fn capture_keeps_both_streams_and_the_exit_code() {
        let out = capture(
            Path::new("sh"),
            &["-c".into(), "echo v1.2.3; echo warn >&2; exit 3".into()],
            Duration::from_secs(20),
        )
        .expect("runs");
        assert_eq!(
            out,
            Output {
                code: Some(3),
                stdout: "v1.2.3\n".into(),
                stderr: "warn\n".into()
            }
        );
        assert!(matches!(
            capture(Path::new("/nonexistent/prog"), &[], Duration::from_secs(1)),
            Err(CaptureError::Spawn(_))
        ));
    }

    #[test]
    fn capture_never_blocks_on_a_chatty_program_and_caps_what_it_keeps() {
        // 1 MB on each stream: far more than a pipe holds, so both must be drained at once.
        let script =
            "head -c 1000000 /dev/zero | tr '\\0' e >&2; head -c 1000000 /dev/zero | tr '\\0' o";
        let out = capture(
            Path::new("sh"),
            &["-c".into(), script.into()],
            Duration::from_secs(20),
        )
        .expect("runs to its end");
        assert_eq!(out.code, Some(0));
        assert_eq!(
            (out.stdout.len(), out.stderr.len()),
            (CAPTURE_MAX, CAPTURE_MAX)
        );
        assert!(out.stdout.bytes().all(|b| b == b'o'));
    }

    #[test]
    fn capture_stops_at_its_time_limit_and_leaves_no_process_behind() {
        let started = Instant::now();
        let dir = tempfile::tempdir().expect("tempdir");
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
        let e = capture(
            Path::new("sh"),
            &["-c".into(), script],
            Duration::from_millis(300),
        )
        .expect_err("it never exits");
        assert!(matches!(e, CaptureError::TimedOut(_)), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let pid = std::fs::read_to_string(&pid_file).expect("pid written");
        assert!(gone(pid.trim()), "the group's sleep {pid} survived");

        // A grandchild that keeps the pipes open does not hold the answer back either.
        let started = Instant::now();
        let script = format!("sleep 30 & echo $! > {}; echo v9", pid_file.display());
        let out = capture(
            Path::new("sh"),
            &["-c".into(), script],
            Duration::from_secs(20),
        )
        .expect("runs");
        assert_eq!(out.stdout, "v9\n");
        assert!(started.elapsed() < Duration::from_secs(10));
        let pid = std::fs::read_to_string(&pid_file).expect("pid written");
        assert!(gone(pid.trim()), "the grandchild {pid} survived");
    }

    /// Whether process `pid` has ended (gone, or a zombie awaiting its reaper), waiting up to
    /// two seconds for it.
    fn gone(pid: &str) -> bool {
        let stat = format!("/proc/{pid}/stat");
        for _ in 0..200 {
            match std::fs::read_to_string(&stat) {
                Err(_) => return true,
                Ok(s)
                    if s.rsplit(')')
                        .next()
                        .is_some_and(|r| r.trim_start().starts_with('Z')) =>
                {
                    return true;
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        false
    }
}
