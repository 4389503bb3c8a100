//! The attempt's keeper under the sandbox: the process the runner starts for a sandboxed
//! attempt, which outlives the agent and ends every process the agent's tree started
//! (issue 25, escape 6: a daemon started with `env -i` lost the attempt's mark and outlived
//! its attempt and the run).
//!
//! The process tree of one sandboxed attempt:
//!
//! ```text
//! runner ── runner __sandbox --write W… -- agent…        (the keeper: not confined, a child
//!             │                                          subreaper, leader of the group the
//!             │                                          runner signals)
//!             └─ runner __sandbox --confine --write W… -- agent…
//!                  = setsid, Landlock, exec → agent…     (a session of its own: no
//!                                                        controlling terminal)
//! ```
//!
//! Because the keeper is a child subreaper, every process the agent's tree leaves behind —
//! whatever its environment, session or group — is re-parented to the keeper, never to the
//! runner or to pid 1; when the agent ends, the keeper kills its remaining children round
//! after round (the children of a killed process come to it next) and exits as the agent
//! did. It stays outside the teammate's Landlock domain, so nothing in the domain can signal
//! it (signals are scoped).
//!
//! Signals the keeper takes (all blocked and read with `sigwait`, so none ends it):
//! `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT` are passed on to the agent's session;
//! [`KILL_TREE`] (`SIGUSR1`, the runner's "kill now" in place of `SIGKILL`) kills the whole
//! tree; `SIGCHLD` reaps. `SIGSTOP`/`SIGCONT` from job control stop and continue the keeper
//! like any process; the runner sends them to the agent's processes through their mark.

use std::ffi::OsString;
use std::path::Path;

use nix::sys::signal::{SigSet, Signal, kill, killpg, raise};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// The signal the runner sends the keeper instead of `SIGKILL`: kill the agent's whole tree
/// now, then exit as the agent did (killed).
pub(crate) const KILL_TREE: Signal = Signal::SIGUSR1;

/// Signals passed on to the agent's session as they arrive.
const PASSED_ON: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Rounds of killing the keeper's children: each round kills one generation (a killed
/// process's children are re-parented to the keeper). Bounds a tree that forks without end.
const KILL_ROUNDS: usize = 10_000;

/// How the agent ended, to be repeated by the keeper's own exit.
#[derive(Debug, Clone, Copy)]
enum Ended {
    Code(i32),
    Signal(Signal),
}

/// Run the keeper: start `inner` (the confining launcher and its arguments) as a child,
/// pass signals on, and when it ends kill whatever the tree left; then exit as it did.
/// Returns the exit code to use when the agent's end cannot be repeated by a signal.
pub(crate) fn keep(exe: &Path, inner: &[OsString]) -> i32 {
    let mut taken = SigSet::empty();
    for sig in PASSED_ON.into_iter().chain([KILL_TREE, Signal::SIGCHLD]) {
        taken.add(sig);
    }
    // Blocked before the child exists, so none of them can end the keeper; the child starts
    // with an empty mask (the standard library resets it between fork and exec).
    if let Err(e) = taken.thread_block() {
        eprintln!("runner sandbox: cannot block signals: {e}; the agent was not started");
        return crate::error::EXIT_ENVIRONMENT;
    }
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!(
            "runner sandbox: cannot become the reaper of the agent's processes: {e}; the agent was not started"
        );
        return crate::error::EXIT_ENVIRONMENT;
    }
    let child = match std::process::Command::new(exe).args(inner).spawn() {
        Ok(child) => Pid::from_raw(child.id() as i32),
        Err(e) => {
            eprintln!("runner sandbox: cannot start the confined agent: {e}");
            return 127;
        }
    };
    let mut ended = None;
    while ended.is_none() {
        match taken.wait() {
            Ok(Signal::SIGCHLD) => reap(child, &mut ended),
            Ok(sig) if sig == KILL_TREE => kill_tree(child, &mut ended),
            Ok(sig) => pass_on(child, sig),
            Err(e) => {
                eprintln!("runner sandbox: waiting for signals failed: {e}");
                kill_tree(child, &mut ended);
            }
        }
    }
    // The agent is gone: nothing it started may outlive it.
    kill_tree(child, &mut ended);
    match ended {
        Some(Ended::Code(code)) => code,
        Some(Ended::Signal(sig)) => die_by(sig, &taken),
        None => 1,
    }
}

/// Pass `sig` on to the agent's session (its group, made by `setsid`), or to the agent
/// alone while it has not made it yet.
fn pass_on(child: Pid, sig: Signal) {
    if killpg(child, sig).is_err() {
        let _ = kill(child, sig);
    }
}

/// Collect every child that ended, noting how `child` (the agent) did.
fn reap(child: Pid, ended: &mut Option<Ended>) {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                *ended = Some(Ended::Code(code));
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                *ended = Some(Ended::Signal(sig));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The children of this process's main thread (`/proc/<pid>/task/<pid>/children`): where
/// the kernel re-parents the orphans of a child subreaper (`find_new_reaper` picks the
/// reaper's first live thread). For the keeper, which has one thread, all its children.
pub(crate) fn main_thread_children() -> Vec<i32> {
    let me = std::process::id();
    std::fs::read_to_string(format!("/proc/{me}/task/{me}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn children() -> Vec<Pid> {
    main_thread_children()
        .into_iter()
        .map(Pid::from_raw)
        .collect()
}

/// Kill every process of the tree: the keeper's children, then the children they leave it,
/// round after round, reaping each (and noting the agent's end when it is among them).
fn kill_tree(child: Pid, ended: &mut Option<Ended>) {
    for _ in 0..KILL_ROUNDS {
        let kids = children();
        if kids.is_empty() {
            break;
        }
        for pid in &kids {
            let _ = kill(*pid, Signal::SIGKILL);
        }
        for pid in &kids {
            match waitpid(*pid, None) {
                Ok(WaitStatus::Exited(p, code)) if p == child => {
                    *ended = Some(Ended::Code(code));
                }
                Ok(WaitStatus::Signaled(p, sig, _)) if p == child => {
                    *ended = Some(Ended::Signal(sig));
                }
                _ => {}
            }
        }
    }
    reap(child, ended);
}

/// End the keeper by `sig`, as the agent ended, so the runner sees a signalled attempt.
/// Returns 128 + the signal's number when `sig` does not end a process by default.
fn die_by(sig: Signal, taken: &SigSet) -> i32 {
    if taken.contains(sig) {
        let mut one = SigSet::empty();
        one.add(sig);
        let _ = one.thread_unblock();
    }
    let _ = raise(sig);
    128 + sig as i32
}
