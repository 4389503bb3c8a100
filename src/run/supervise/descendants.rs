//! Every process a supervised child started, wherever it went (DESIGN §6).
//!
//! A teammate's descendants may leave its process group (`setsid`, daemons), so signals to
//! the group miss them. Three things catch them:
//!
//! - each supervised child gets an attempt marker in its environment,
//!   [`ATTEMPT_VAR`]`=<run>.<n>` ([`new_attempt`]), which its descendants inherit;
//!   [`end_attempt`] ends every live process that carries it (read from
//!   `/proc/<pid>/environ`, readable for the user's own processes);
//! - the runner is a child subreaper ([`become_subreaper`]), so a descendant whose parent
//!   died is re-parented to the runner instead of pid 1, and [`reap_zombies`] collects it
//!   when it ends;
//! - the children the runner spawns as group leaders are registered ([`spawn_registered`]),
//!   so the reaper never takes an exit status tokio waits for, and job control can stop
//!   every group ([`signal_run`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// The environment variable that marks every process of one supervised attempt.
pub(crate) const ATTEMPT_VAR: &str = "RUNNER_ATTEMPT_ID";

/// Rounds of [`end_attempt`]: a process may fork while its relatives are being killed.
const END_ROUNDS: usize = 50;
/// Pause between two looks at a group or at processes being killed in [`end_attempt`].
const GROUP_PAUSE: Duration = Duration::from_millis(2);

/// This runner process's part of every marker: its pid and start time, so that markers of
/// two runs never match even when a pid is reused.
static RUN_ID: LazyLock<String> = LazyLock::new(|| {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}", std::process::id())
});
static NEXT_ATTEMPT: AtomicU64 = AtomicU64::new(1);

/// Pids of the group leaders this process spawned and has not waited for yet.
static CHILDREN: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

fn children() -> MutexGuard<'static, BTreeSet<i32>> {
    CHILDREN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A fresh marker value for one supervised attempt, unique across runs.
pub(crate) fn new_attempt() -> String {
    format!(
        "{}.{}",
        *RUN_ID,
        NEXT_ATTEMPT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Make the runner the reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`): a
/// process that escaped its group and lost its parent stays the runner's descendant, so it
/// can be found and ended. A kernel that refuses is logged, not fatal: markers still work.
pub(crate) fn become_subreaper() {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!("cannot become the reaper of orphaned teammate processes: {e}");
    }
}

/// A spawned group leader, registered until this is dropped (after it was waited for).
#[derive(Debug)]
pub(crate) struct Registered(i32);

impl Drop for Registered {
    fn drop(&mut self) {
        children().remove(&self.0);
    }
}

/// Spawn a group leader with `spawn` and register it. `pid_of` reads its pid. The spawn runs
/// outside the registry's lock (spawns on several workers must not wait for one another): a
/// leader is spawned from a worker thread, so it is never among the processes the main thread
/// adopted, which are all [`reap_zombies`] looks at.
///
/// Errors: whatever `spawn` returned.
pub(crate) fn spawn_registered<T>(
    spawn: impl FnOnce() -> std::io::Result<T>,
    pid_of: impl FnOnce(&T) -> Option<u32>,
) -> std::io::Result<(T, Option<Registered>)> {
    let child = spawn()?;
    let entry = pid_of(&child).map(|pid| {
        children().insert(pid as i32);
        Registered(pid as i32)
    });
    Ok((child, entry))
}

/// What `/proc/<pid>/stat` says about a process.
struct Stat {
    state: char,
    ppid: i32,
    pgrp: i32,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the `(comm)`, which may itself contain spaces and parentheses.
    let mut fields = text.get(text.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(Stat { state, ppid, pgrp })
}

/// The process group of process `pid`, when it is alive and readable.
pub(crate) fn process_group(pid: i32) -> Option<i32> {
    stat(pid).map(|s| s.pgrp)
}

fn all_pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .collect()
}

/// Live (not zombie) processes other than this one whose environment has an entry for which
/// `matches` holds.
pub(crate) fn marked(matches: impl Fn(&[u8]) -> bool) -> Vec<i32> {
    marked_with_env(matches)
        .into_iter()
        .map(|(pid, _)| pid)
        .collect()
}

/// [`marked`], each with its environment (`KEY=value` entries separated by NUL bytes, as
/// `/proc/<pid>/environ` holds them).
pub(crate) fn marked_with_env(matches: impl Fn(&[u8]) -> bool) -> Vec<(i32, Vec<u8>)> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for pid in all_pids() {
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ.split(|b| *b == 0).any(&matches) {
            continue;
        }
        if stat(pid).is_some_and(|s| s.state != 'Z' && s.state != 'X') {
            found.push((pid, environ));
        }
    }
    found
}

/// The inode of the pipe behind `fd` (the end the runner reads), so that whoever holds its
/// other end can be found ([`pipe_holders`]); `None` when it cannot be read.
pub(crate) fn pipe_inode(fd: impl std::os::fd::AsFd) -> Option<u64> {
    nix::sys::stat::fstat(fd).ok().map(|s| s.st_ino)
}

/// Live processes other than this one holding a descriptor of one of the pipes `inodes`
/// (their `/proc/<pid>/fd/*` links read `pipe:[<inode>]`): those keeping an attempt's output
/// open, whatever their environment, group or session (issue 50: `setsid env -i …` drops the
/// attempt's mark). Only the user's own processes can be read, which are the only ones a
/// teammate can start. Reads every process's descriptor table: for the rare wait that ran out.
pub(crate) fn pipe_holders(inodes: &[u64]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let wanted: Vec<String> = inodes.iter().map(|i| format!("pipe:[{i}]")).collect();
    let holds = |pid: i32| {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| wanted.iter().any(|w| target.as_os_str() == w.as_str()))
        })
    };
    all_pids()
        .into_iter()
        .filter(|pid| *pid != me && alive(*pid) && holds(*pid))
        .collect()
}

/// Whether process `pid` exists and has not ended (a zombie has).
pub(crate) fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|s| s.state != 'Z' && s.state != 'X')
}

/// Process `pid` as `name (pid N)`, for messages.
pub(crate) fn describe(pid: i32) -> String {
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    format!("{} (pid {pid})", name.trim())
}

fn attempt_entry(id: &str) -> Vec<u8> {
    format!("{ATTEMPT_VAR}={id}").into_bytes()
}

/// Send `sig` to every live process carrying attempt marker `id` but `except`, once.
pub(crate) fn signal_attempt(id: &str, sig: Signal, except: Option<i32>) {
    let entry = attempt_entry(id);
    for pid in marked(|kv| kv == entry.as_slice()) {
        if Some(pid) != except {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }
}

/// The runner's children that its main thread adopted: where the kernel re-parents the
/// orphans of a subreaper (`find_new_reaper` picks the reaper's first live thread, its main
/// thread). Teammate group leaders, spawned from worker threads, are not listed here, so in
/// the common case (nothing escaped) this is one read of one short file.
fn adopted() -> Vec<i32> {
    let me = std::process::id();
    std::fs::read_to_string(format!("/proc/{me}/task/{me}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether process `pid`'s environment has the entry `entry`.
fn carries(pid: i32, entry: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == entry))
}

/// End every process carrying attempt marker `id` whose group `pgid` was just killed: first
/// wait (bounded) for the group to empty, so that whatever its members started outside it is
/// re-parented to the runner; then kill the adopted processes that carry the marker, round
/// after round (what they started comes to the runner once they die), and reap them.
/// Returns how many processes the first round found. Costs a few system calls when nothing
/// left the group, so it runs after every attempt; `group_gone` says the caller's kill of
/// the group found it empty already (an empty group never fills again), so it is not
/// looked at.
pub(crate) async fn end_attempt(id: &str, pgid: i32, group_gone: bool) -> usize {
    let entry = attempt_entry(id);
    let group = Pid::from_raw(pgid);
    for _ in 0..END_ROUNDS {
        if group_gone || killpg(group, None).is_err() {
            break;
        }
        // Members are dying (or are zombies the runner adopted from the dead leader).
        reap_zombies();
        tokio::time::sleep(GROUP_PAUSE).await;
    }
    let mut first = None;
    for _ in 0..END_ROUNDS {
        let adopted = adopted();
        if adopted.is_empty() {
            // The common case: nothing left the group, nothing to reap.
            first.get_or_insert(0);
            break;
        }
        let pids: Vec<i32> = adopted
            .into_iter()
            .filter(|pid| stat(*pid).is_some_and(|s| s.state != 'Z' && s.state != 'X'))
            .filter(|pid| carries(*pid, &entry))
            .collect();
        first.get_or_insert(pids.len());
        if pids.is_empty() {
            reap_zombies();
            break;
        }
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        // Let them die, so that their own children are adopted for the next round.
        for _ in 0..END_ROUNDS {
            tokio::time::sleep(GROUP_PAUSE).await;
            if pids
                .iter()
                .all(|p| stat(*p).is_none_or(|s| s.state == 'Z' || s.state == 'X'))
            {
                break;
            }
        }
        reap_zombies();
    }
    let found = first.unwrap_or(0);
    if found > 0 {
        tracing::info!("ended {found} process(es) of attempt {id} that left its process group");
    }
    found
}

/// [`end_attempt`] without waiting: one round of SIGKILL, for drop guards.
pub(crate) fn kill_attempt_now(id: &str) {
    signal_attempt(id, Signal::SIGKILL, None);
}

/// Send `sig` to every registered group and to every process carrying a marker of this run
/// (also those that left their group): how job control stops and continues the teammates.
pub(crate) fn signal_run(sig: Signal) {
    let groups: Vec<i32> = children().iter().copied().collect();
    for pgid in groups {
        let _ = killpg(Pid::from_raw(pgid), sig);
    }
    let prefix = format!("{ATTEMPT_VAR}={}.", *RUN_ID).into_bytes();
    for pid in marked(|kv| kv.starts_with(&prefix)) {
        let _ = kill(Pid::from_raw(pid), sig);
    }
}

/// End everything this run started that is still alive: every registered group and every
/// process carrying one of its markers. The last line of defence when a run ends early.
pub(crate) fn end_run() {
    signal_run(Signal::SIGKILL);
    end_adopted();
}

/// Kill every live process re-parented to the runner outside its own process group, round
/// after round (what a killed one started comes to the runner next), and reap them. The
/// runner is a subreaper only of its own descendants, so each is something a teammate left:
/// one that dropped its environment (`setsid env -i …`, issue 50) carries no attempt's
/// mark, and it ends with the run at the latest. Helpers the runner starts in its own group
/// are left alone.
fn end_adopted() {
    let my_group = nix::unistd::getpgrp().as_raw();
    for _ in 0..END_ROUNDS {
        let pids: Vec<i32> = adopted()
            .into_iter()
            .filter(|pid| {
                stat(*pid).is_some_and(|s| s.state != 'Z' && s.state != 'X' && s.pgrp != my_group)
            })
            .collect();
        if pids.is_empty() {
            break;
        }
        tracing::debug!("ending {} process(es) teammates left behind", pids.len());
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        for _ in 0..END_ROUNDS {
            std::thread::sleep(GROUP_PAUSE);
            if !pids.iter().any(|p| alive(*p)) {
                break;
            }
        }
        reap_zombies();
    }
}

/// Collect the exit status of every ended process re-parented to the runner (it is their
/// subreaper), so none stays a zombie. Children the runner spawned itself are left to their
/// waiters: registered group leaders, and helpers in the runner's own process group.
pub(crate) fn reap_zombies() {
    let me = std::process::id() as i32;
    let my_group = nix::unistd::getpgrp().as_raw();
    let registered = children();
    for pid in adopted() {
        let Some(s) = stat(pid) else { continue };
        if s.state == 'Z' && s.ppid == me && s.pgrp != my_group && !registered.contains(&pid) {
            let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}
