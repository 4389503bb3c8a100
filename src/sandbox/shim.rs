//! The attempt's keeper under the sandbox, and the confined start of its agent: the only
//! module of the crate with `unsafe` code (the fork and the system calls around it). The
//! other hook, [`new_session`], starts an unconfined child in a session of its own.
//!
//! The keeper outlives the agent and ends every process the agent's tree started (issue 25,
//! escape 6: a daemon started with `env -i` lost the attempt's mark and outlived its attempt
//! and the run). It is a small program of its own, `runner-keeper` ([`super::keeper`]),
//! which the runner starts with `posix_spawn` as the leader of the attempt's process group;
//! [`keep_program`] is its work: it forks the agent's process, which confines itself and
//! execs the agent.
//!
//! The process tree of one sandboxed attempt:
//!
//! ```text
//! runner ── runner-keeper (posix_spawn'd)     not confined, a child subreaper, leader
//!             │                               of the group the runner signals, every
//!             │                               descriptor but /dev/null closed
//!             └─ agent…  (forked by the keeper: setsid,    a session of its own (no
//!                         no_new_privs, Landlock, exec)    controlling terminal)
//! ```
//!
//! The runner resolves the program before it spawns the keeper, so a program that is not
//! there fails the spawn as it would unconfined (`cannot start ...: No such file or
//! directory`); one that then cannot be exec'd ends the attempt with exit code 127, and a
//! sandbox that cannot be enforced with exit code 3, each with a line on its stderr: the
//! agent never runs unconfined.
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
//! tree; `SIGCHLD` reaps. Every other signal has its default action (the keeper is exec'd:
//! none of the runner's handlers). `SIGSTOP`/`SIGCONT` from job control stop and continue the
//! keeper like any process; the runner sends them to the agent's processes through their
//! mark.

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::libc;
use nix::sys::signal::{SigHandler, SigSet, Signal, kill, killpg};
use nix::unistd::{ForkResult, Pid};

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

/// The keeper's name in `ps` and `/proc/<pid>/comm` (at most 15 bytes).
pub(crate) const KEEPER_NAME: &std::ffi::CStr = c"runner-keeper";

/// How the agent ended, to be repeated by the keeper's own exit.
#[derive(Debug, Clone, Copy)]
enum Ended {
    Code(i32),
    Signal(i32),
}

/// The kernel's Landlock ABI version (`landlock_create_ruleset(2)` with
/// `LANDLOCK_CREATE_RULESET_VERSION`); `None` when Landlock is not built in or not enabled.
pub(crate) fn landlock_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1 << 0;
    // SAFETY: with this flag the call reads no memory (a null attribute of size 0) and only
    // returns the version or an error.
    #[allow(unsafe_code)]
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(abi).ok().filter(|v| *v > 0)
}

/// Make `cmd`'s child start a session of its own (`setsid(2)` between `fork` and `exec`):
/// it has no controlling terminal, so a program that opens `/dev/tty` (a git or ssh password
/// prompt) fails at once instead of being stopped by `SIGTTIN` until its time limit, and it
/// cannot push input into the runner's terminal (issue 50). The new session's process group
/// is the child's pid, as with `process_group(0)`, which must not be set as well (a group
/// leader cannot start a session). A hook makes the standard library `fork` instead of
/// `posix_spawn`, which costs the runner's address space once per spawn.
pub(crate) fn new_session(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the runner's.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
}

/// Become the attempt's keeper and start `executable` with `argv` confined by `ruleset` (a
/// created Landlock ruleset with its rules, [`super::ruleset`]); never returns. Runs in the
/// keeper program ([`super::keeper`]), a process of its own with one thread. The agent's
/// process is forked (cheap: the keeper is small), confines itself and execs; one that
/// cannot be confined or exec'd ends with exit code 3 or 127 and a line on its stderr,
/// which the keeper repeats as its own exit.
pub(crate) fn keep_program(ruleset: OwnedFd, executable: &CStr, argv: &[CString]) -> ! {
    let taken = taken();
    if taken.thread_block().is_err() || nix::sys::prctl::set_child_subreaper(true).is_err() {
        refuse(b"cannot become the attempt's keeper");
    }
    // SAFETY: the keeper has one thread (its program's main), so the child may run any
    // code; it only makes system calls and execs or exits.
    #[allow(unsafe_code)]
    match unsafe { nix::unistd::fork() } {
        Ok(ForkResult::Child) => {
            // The keeper's Rust runtime ignores SIGPIPE; the agent gets the default, as
            // from any spawn of the standard library's.
            // SAFETY: SIG_DFL installs no handler.
            #[allow(unsafe_code)]
            let _ = unsafe { nix::sys::signal::signal(Signal::SIGPIPE, SigHandler::SigDfl) };
            confine_self(ruleset.as_raw_fd());
            let Err(err) = nix::unistd::execv(executable, argv);
            cannot_start(&argv[0], err)
        }
        Ok(ForkResult::Parent { child }) => {
            drop(ruleset);
            keep(child, &taken)
        }
        Err(_) => refuse(b"cannot fork the agent's process"),
    }
}

/// Say on stderr that the program (`argv0`, as the runner was given it) could not be
/// exec'd, in the words of a spawn that failed ([`super::keeper::cannot_start`]), and exit
/// [`super::keeper::CANNOT_EXEC`].
fn cannot_start(argv0: &CStr, err: nix::errno::Errno) -> ! {
    let why = std::io::Error::from_raw_os_error(err as i32);
    let line = super::keeper::cannot_start(&String::from_utf8_lossy(argv0.to_bytes()), &why);
    let _ = nix::unistd::write(std::io::stderr().as_fd(), format!("{line}\n").as_bytes());
    exit_now(super::keeper::CANNOT_EXEC)
}

/// The agent's process before its exec: its own session, no new privileges, the ruleset. A
/// step that fails ends this process with exit code 3 (which the keeper repeats) and a line
/// on stderr: never run unconfined.
fn confine_self(ruleset: RawFd) {
    if SigSet::empty().thread_set_mask().is_err() {
        refuse(b"cannot unblock signals");
    }
    // A session of its own: no controlling terminal to read keystrokes from or push input
    // into (issue 25, escape 3: TIOCSTI). The keeper passes signals on to this session.
    if nix::unistd::setsid().is_err() {
        refuse(b"cannot leave the terminal's session");
    }
    if nix::sys::prctl::set_no_new_privs().is_err() {
        refuse(b"cannot set no_new_privs");
    }
    // SAFETY: landlock_restrict_self(2) reads no memory: a descriptor and no flags.
    #[allow(unsafe_code)]
    let restricted = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0) };
    if restricted != 0 {
        refuse(b"cannot enforce the Landlock ruleset");
    }
}

/// Say on stderr why the agent was not started, and end this process with exit code 3.
fn refuse(what: &[u8]) -> ! {
    let err = std::io::stderr();
    for part in [
        &b"runner sandbox: "[..],
        what,
        b"; the agent was not started\n",
    ] {
        let _ = nix::unistd::write(err.as_fd(), part);
    }
    exit_now(crate::error::EXIT_ENVIRONMENT)
}

/// End this process now, running nothing of the runner's (no exit handlers, no flush).
fn exit_now(code: i32) -> ! {
    // SAFETY: _exit(2) ends the process; it is async-signal-safe.
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(code)
    }
}

/// The signals the keeper takes with `sigwait`.
fn taken() -> SigSet {
    let mut taken = SigSet::empty();
    for sig in PASSED_ON.into_iter().chain([KILL_TREE, Signal::SIGCHLD]) {
        taken.add(sig);
    }
    taken
}

/// The keeper: let go of every descriptor of the runner's (the standard library's exec
/// report among them, so the runner's spawn returns once the agent has exec'd), then take
/// signals until the agent ends, kill what its tree left, and exit as it did.
fn keep(child: Pid, taken: &SigSet) -> ! {
    let _ = nix::sys::prctl::set_name(KEEPER_NAME);
    // SAFETY: close_range(2) closes descriptors; nothing in this process uses those above 2.
    #[allow(unsafe_code)]
    unsafe {
        libc::syscall(libc::SYS_close_range, 3, libc::c_uint::MAX, 0);
    }
    // stdin, stdout and stderr are the agent's: the keeper holds none of them open.
    if let Ok(null) = nix::fcntl::open(
        c"/dev/null",
        nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    ) {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }
    let mut ended = None;
    while ended.is_none() {
        match taken.wait() {
            Ok(Signal::SIGCHLD) => reap(child, &mut ended),
            Ok(sig) if sig == KILL_TREE => kill_tree(child, &mut ended),
            Ok(sig) => pass_on(child, sig),
            Err(_) => kill_tree(child, &mut ended),
        }
    }
    // The agent is gone: nothing it started may outlive it.
    kill_tree(child, &mut ended);
    match ended {
        Some(Ended::Code(code)) => exit_now(code),
        Some(Ended::Signal(sig)) => die_by(sig),
        None => exit_now(1),
    }
}

/// Pass `sig` on to the agent's session (its group, made by `setsid`), or to the agent
/// alone while it has not made it yet.
fn pass_on(child: Pid, sig: Signal) {
    if killpg(child, sig).is_err() {
        let _ = kill(child, sig);
    }
}

/// Wait for a child (`flags`: `WNOHANG` or 0); its pid and raw wait status, `None` when
/// there is none (or none has ended, with `WNOHANG`).
fn wait_any(flags: libc::c_int) -> Option<(i32, libc::c_int)> {
    let mut status: libc::c_int = 0;
    // SAFETY: waitpid(2) writes the status to a stack variable.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::waitpid(-1, &mut status, flags) };
    (pid > 0).then_some((pid, status))
}

/// Note how the agent ended when `pid` is the agent (`child`).
fn note(child: Pid, pid: i32, status: libc::c_int, ended: &mut Option<Ended>) {
    if pid != child.as_raw() {
        return;
    }
    if libc::WIFEXITED(status) {
        *ended = Some(Ended::Code(libc::WEXITSTATUS(status)));
    } else if libc::WIFSIGNALED(status) {
        *ended = Some(Ended::Signal(libc::WTERMSIG(status)));
    }
}

/// Collect every child that ended, noting how `child` (the agent) did.
fn reap(child: Pid, ended: &mut Option<Ended>) {
    while let Some((pid, status)) = wait_any(libc::WNOHANG) {
        note(child, pid, status, ended);
    }
}

/// SIGKILL every child of the keeper (`/proc/thread-self/children`: the keeper has one
/// thread, where the kernel re-parents its orphans), read into a stack buffer. Returns how
/// many were signalled.
fn kill_children() -> usize {
    let Ok(file) = nix::fcntl::open(
        c"/proc/thread-self/children",
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    ) else {
        return 0;
    };
    let mut buf = [0u8; 4096];
    let mut killed = 0;
    let mut pid: i32 = 0;
    let mut digits = false;
    loop {
        let n = match nix::unistd::read(&file, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b.is_ascii_digit() {
                pid = pid.saturating_mul(10).saturating_add(i32::from(b - b'0'));
                digits = true;
            } else if digits {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                killed += 1;
                (pid, digits) = (0, false);
            }
        }
    }
    if digits {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        killed += 1;
    }
    killed
}

/// Kill every process of the tree: the keeper's children, then the children they leave it,
/// round after round, reaping each (and noting the agent's end when it is among them).
fn kill_tree(child: Pid, ended: &mut Option<Ended>) {
    for _ in 0..KILL_ROUNDS {
        let killed = kill_children();
        if killed == 0 {
            break;
        }
        for _ in 0..killed {
            let Some((pid, status)) = wait_any(0) else {
                break;
            };
            note(child, pid, status, ended);
        }
    }
    reap(child, ended);
}

/// End the keeper by signal `sig`, as the agent ended, so the runner sees a signalled
/// attempt; exit 128 + `sig` when `sig` does not end a process by default.
fn die_by(sig: i32) -> ! {
    if let Ok(signal) = Signal::try_from(sig) {
        let mut one = SigSet::empty();
        one.add(signal);
        let _ = one.thread_unblock();
        let _ = kill(nix::unistd::getpid(), signal);
    }
    exit_now(128 + sig)
}
