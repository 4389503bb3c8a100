//! The attempt's keeper under the sandbox, and the confined start of its agent: the only
//! module of the crate with `unsafe` code (the forks and the system calls around them). The
//! other hook, [`new_session`], starts an unconfined child in a session of its own.
//!
//! The keeper outlives the agent and ends every process the agent's tree started (issue 25,
//! escape 6: a daemon started with `env -i` lost the attempt's mark and outlived its attempt
//! and the run). The runner starts one keeper server per run (`runner-keeper`,
//! [`super::server`]); each confined attempt goes to a keeper the server forked
//! ([`fork_keeper`]) — one that waits for work (a keeper serves one attempt after another),
//! else a new one — which leads the attempt's process group, and [`keep_program`] is its
//! work: it forks the agent's process, which confines itself and execs the agent.
//!
//! The process tree of a run with confined attempts:
//!
//! ```text
//! runner ── runner-keeper (the server,        its own group; serves the control socket;
//!             │  posix_spawn'd once)          exits when the runner's end closes
//!             ├─ runner-keeper (a keeper,     not confined, a child subreaper, leader of
//!             │   forked by the server)       the group the runner signals; stdio /dev/null
//!             │   └─ agent…  (forked by the keeper: setsid,    a session of its own (no
//!             │               no_new_privs, Landlock, exec)    controlling terminal)
//!             └─ …one keeper per running attempt, and those waiting for the next
//! ```
//!
//! The runner resolves the program before it asks for the keeper, so a program that is not
//! there fails the start as it would unconfined (`cannot start ...: No such file or
//! directory`); one that then cannot be exec'd ends the attempt with exit code 127, and a
//! sandbox that cannot be enforced with exit code 3, each with a line on its stderr: the
//! agent never runs unconfined. The keeper reports its pid and then how the agent ended on
//! the attempt's socket ([`super::wire::Report`]).
//!
//! Because the keeper is a child subreaper, every process the agent's tree leaves behind —
//! whatever its environment, session or group — is re-parented to the keeper, never to the
//! runner or to pid 1; when the agent ends, the keeper kills its remaining children round
//! after round (the children of a killed process come to it next) and reports; only a
//! keeper whose tree is empty serves another attempt. It stays
//! outside the teammate's Landlock domain, so nothing in the domain can signal it (signals
//! are scoped).
//!
//! Signals the keeper takes (all blocked and read with `sigwait`, so none ends it):
//! `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT` are passed on to the agent's session;
//! [`KILL_TREE`] (`SIGUSR1`, the runner's "kill now" in place of `SIGKILL`) kills the whole
//! tree; [`SERVER_GONE`] (`SIGUSR2`, its parent-death signal: the server ended, because the
//! runner did or it was killed) kills the whole tree and reports [`Report::Lost`];
//! `SIGCHLD` reaps. `SIGSTOP`/`SIGCONT` from job control stop and continue the keeper like
//! any process; the runner sends them to the agent's processes through their mark. Those
//! still pending when an attempt is over are discarded before the next ([`forget_pending`]).

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::libc;
use nix::sys::signal::{SigHandler, SigSet, Signal, kill, killpg};
use nix::unistd::{ForkResult, Pid};

use super::wire::Report;

/// The signal the runner sends the keeper instead of `SIGKILL`: kill the agent's whole tree
/// now, then report how the agent ended (killed).
pub(crate) const KILL_TREE: Signal = Signal::SIGUSR1;

/// The signal a keeper gets when its server ends (`PR_SET_PDEATHSIG`): the runner is gone
/// or the server was killed; the keeper kills the attempt's tree and says so ([`Report::Lost`]).
pub(crate) const SERVER_GONE: Signal = Signal::SIGUSR2;

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

/// How the agent ended, for the keeper's report to the runner.
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

/// The keeper server's fork of one attempt's keeper: `None` in the child (the keeper, which
/// must never return to the server's loop), the keeper's pid in the server.
///
/// Errors: the fork failed (out of processes or memory).
pub(crate) fn fork_keeper() -> nix::Result<Option<Pid>> {
    // SAFETY: the server has one thread (its program's main), so the child may run any code.
    #[allow(unsafe_code)]
    match unsafe { nix::unistd::fork() }? {
        ForkResult::Child => Ok(None),
        ForkResult::Parent { child } => Ok(Some(child)),
    }
}

/// Own a descriptor the kernel just gave this process with `SCM_RIGHTS` (a `recvmsg` of
/// the server's or the runner's): nothing else in the process refers to it.
pub(crate) fn own_received(raw: RawFd) -> OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: `raw` was just received; no other owner exists, so it is closed exactly once.
    #[allow(unsafe_code)]
    unsafe {
        OwnedFd::from_raw_fd(raw)
    }
}

/// Become the attempt's keeper and start `executable` with `argv` and `env` confined by
/// `ruleset` (a created Landlock ruleset with its rules, [`super::ruleset`]); returns once
/// the agent has ended, its tree is killed and the last report is sent on `report`: `true`
/// when nothing of the tree is left, so the keeper may serve another attempt. Runs in a
/// keeper of the server's ([`super::server`]), a process of one thread whose stdin, stdout
/// and stderr are the agent's (they are `/dev/null` again when it returns). The agent's
/// process is forked (cheap: the keeper is small), confines itself and execs; one that
/// cannot be confined or exec'd ends with exit code 3 or 127 and a line on its stderr. When
/// the server ends meanwhile ([`SERVER_GONE`]) the keeper kills the tree, reports
/// [`Report::Lost`] and exits.
pub(crate) fn keep_program(
    ruleset: OwnedFd,
    executable: &CStr,
    argv: &[CString],
    env: &[CString],
    report: &OwnedFd,
) -> bool {
    let taken = taken();
    if taken.thread_block().is_err() || nix::sys::prctl::set_child_subreaper(true).is_err() {
        refuse(b"cannot become the attempt's keeper");
    }
    // SAFETY: the keeper has one thread (forked from the server's one), so the child may run
    // any code; it only makes system calls and execs or exits.
    #[allow(unsafe_code)]
    match unsafe { nix::unistd::fork() } {
        Ok(ForkResult::Child) => {
            // The Rust runtime ignores SIGPIPE; the agent gets the default, as from any
            // spawn of the standard library's.
            // SAFETY: SIG_DFL installs no handler.
            #[allow(unsafe_code)]
            let _ = unsafe { nix::sys::signal::signal(Signal::SIGPIPE, SigHandler::SigDfl) };
            // The attempt's socket is close-on-exec: the agent never holds it.
            confine_self(ruleset.as_raw_fd());
            let Err(err) = nix::unistd::execve(executable, argv, env);
            cannot_start(&argv[0], err)
        }
        Ok(ForkResult::Parent { child }) => {
            drop(ruleset);
            keep(child, &taken, report)
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
    for sig in PASSED_ON
        .into_iter()
        .chain([KILL_TREE, SERVER_GONE, Signal::SIGCHLD])
    {
        taken.add(sig);
    }
    taken
}

/// The keeper: hand the agent's stdio back (it holds none of them open), then take signals
/// until the agent ends, kill what its tree left and tell the runner how the agent ended on
/// `report`; `true` when the tree is empty. When the server ends ([`SERVER_GONE`]), kill
/// the tree, say so and exit.
fn keep(child: Pid, taken: &SigSet, report: &OwnedFd) -> bool {
    let _ = nix::sys::prctl::set_name(KEEPER_NAME);
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
            Ok(sig) if sig == KILL_TREE => {
                kill_tree(child, &mut ended);
            }
            Ok(sig) if sig == SERVER_GONE => {
                kill_tree(child, &mut ended);
                send(report, Report::Lost);
                exit_now(0)
            }
            Ok(sig) => pass_on(child, sig),
            Err(_) => {
                kill_tree(child, &mut ended);
            }
        }
    }
    // The agent is gone: nothing it started may outlive it.
    let emptied = kill_tree(child, &mut ended);
    // Leave the attempt's group for the server's before reporting: the runner's end of the
    // attempt waits for the group to empty (a keeper still in it, waiting for its next
    // attempt or a zombie its server has not reaped, would keep it waiting up to its bound),
    // and kills the group once more after the attempt.
    if let Ok(servers) = nix::unistd::getpgid(Some(nix::unistd::getppid())) {
        let _ = nix::unistd::setpgid(Pid::from_raw(0), servers);
    }
    send(
        report,
        match ended {
            Some(Ended::Code(code)) => Report::Exited(code),
            Some(Ended::Signal(sig)) => Report::Signalled(sig),
            None => Report::Exited(1),
        },
    );
    emptied
}

/// Discard the keeper's signals that are pending (blocked, never taken): those sent for an
/// attempt that has ended — a late [`KILL_TREE`] or `SIGTERM` of the runner's, a
/// `SIGCHLD` — must not reach the next one. `true` when [`SERVER_GONE`] was among them.
pub(crate) fn forget_pending() -> bool {
    let taken = taken();
    let now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut gone = false;
    loop {
        // SAFETY: sigtimedwait(2) reads the set and the zero timeout from this frame and is
        // given no info to write.
        #[allow(unsafe_code)]
        let sig = unsafe { libc::sigtimedwait(taken.as_ref(), std::ptr::null_mut(), &now) };
        if sig <= 0 {
            return gone;
        }
        gone |= sig == SERVER_GONE as i32;
    }
}

/// Write `what` to the runner (a lost runner is no error: nobody is left to tell).
pub(crate) fn send(report: &OwnedFd, what: Report) {
    let _ = nix::unistd::write(report, &what.encode());
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
/// `true` when a round found no child left (`false`: the rounds ran out).
fn kill_tree(child: Pid, ended: &mut Option<Ended>) -> bool {
    let mut emptied = false;
    for _ in 0..KILL_ROUNDS {
        let killed = kill_children();
        if killed == 0 {
            emptied = true;
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
    emptied
}
