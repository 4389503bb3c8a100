//! The keeper server: one small process per run (`runner-keeper`, started once by the
//! runner, [`super::client`]) that hands each confined attempt to a keeper it forked, so an
//! attempt costs one fork of a small keeper (the agent's process) and the agent's exec —
//! never an exec of a keeper, never a copy of the runner's address space (issue 49).
//!
//! Its stdin is its end of the runner's control socket (`SOCK_SEQPACKET`). Each request is
//! one message of one byte carrying four descriptors (`SCM_RIGHTS`): the agent's stdin,
//! stdout and stderr, and the keeper's end of the attempt's own socket. The server passes
//! them on to a keeper that waits for work, else forks a new keeper ([`super::shim::fork_keeper`])
//! with them, and goes back to waiting; the keeper does the rest ([`attempt`]). Each keeper
//! has a channel to the server (a `SOCK_SEQPACKET` pair): it says there that it waits for
//! work, and takes the next attempt's descriptors on it ([`keeper`]). When the runner's end
//! of the control socket closes (the run is over, or the runner was killed), the server
//! closes every channel (a waiting keeper exits), sends every keeper
//! [`super::shim::SERVER_GONE`] (one that keeps an attempt kills its tree and says so) and
//! exits once they have; a server that dies any other way sends the same signal through
//! each keeper's `PR_SET_PDEATHSIG`.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::wire::{MAX_REQUEST, Report, Request};

/// How many descriptors a request carries: stdin, stdout, stderr, the attempt's socket.
pub(crate) const REQUEST_FDS: usize = 4;

/// How many keepers may wait for work at once; one more that says it waits is let go (a
/// run's keepers are about as many as its attempts at once).
const MAX_WAITING: usize = 64;

/// What a keeper writes on its channel when it waits for work.
const WAITING: &[u8] = b"W";

/// A keeper the server forked: its pid, the server's end of its channel, and whether it
/// waits for work.
struct Keeper {
    pid: Pid,
    channel: OwnedFd,
    waiting: bool,
}

/// Serve the runner on stdin until it closes; never returns. Takes no arguments.
///
/// The server waits for its keepers (those that ended, as they end; all of them at the
/// end), so their CPU time and their agents' is counted as the run's, as it was when the
/// runner spawned each keeper itself.
pub(crate) fn serve() -> ! {
    let server = nix::unistd::getpid();
    // Asked and opened once here, inherited by every keeper's ruleset.
    let _ = super::kernel_abi();
    let _ = super::devices();
    let control = std::io::stdin();
    let mut keepers: Vec<Keeper> = Vec::new();
    loop {
        let (request, heard) = match ready(control.as_fd(), &keepers) {
            Ok(ready) => ready,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => shut_down(keepers),
        };
        for i in heard.into_iter().rev() {
            heard_from(&mut keepers, i);
        }
        reap(&mut keepers, WaitPidFlag::WNOHANG);
        if !request {
            continue;
        }
        match receive(control.as_fd().as_raw_fd()) {
            Ok(Some(fds)) => hand_over(fds, &mut keepers, server),
            Ok(None) | Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
            // The runner's end is closed (Ok(0) is mapped to ECONNRESET): nothing more to
            // serve.
            Err(_) => shut_down(keepers),
        }
    }
}

/// Wait until the control socket or a keeper's channel has something: whether a request
/// (or the end) waits on `control`, and the indexes of the keepers whose channel spoke or
/// closed.
///
/// Errors: the wait was interrupted (`EINTR`) or failed.
fn ready(
    control: std::os::fd::BorrowedFd<'_>,
    keepers: &[Keeper],
) -> nix::Result<(bool, Vec<usize>)> {
    let mut fds: Vec<PollFd<'_>> = std::iter::once(control)
        .chain(keepers.iter().map(|k| k.channel.as_fd()))
        .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
        .collect();
    poll(&mut fds, PollTimeout::NONE)?;
    let mut woken = fds.iter().map(|fd| fd.any().unwrap_or(false));
    let request = woken.next().unwrap_or(false);
    Ok((
        request,
        woken
            .enumerate()
            .filter(|(_, w)| *w)
            .map(|(i, _)| i)
            .collect(),
    ))
}

/// Read what keeper `i` said on its channel: that it waits for work, or (end of file) that
/// it is gone, which drops it. A keeper beyond [`MAX_WAITING`] is let go: its channel
/// closes and it exits.
fn heard_from(keepers: &mut Vec<Keeper>, i: usize) {
    let mut byte = [0u8; 1];
    match nix::unistd::read(&keepers[i].channel, &mut byte) {
        Ok(1) if keepers.iter().filter(|k| k.waiting).count() < MAX_WAITING => {
            keepers[i].waiting = true;
        }
        Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
        Ok(_) | Err(_) => {
            keepers.remove(i);
        }
    }
}

/// Give one attempt's descriptors to a keeper that waits for work, else to a new keeper; the server's copies are closed either way. A fork that
/// fails drops them: the runner reads end of file on the attempt's socket before any
/// report, and says the keeper could not start.
fn hand_over(fds: [OwnedFd; REQUEST_FDS], keepers: &mut Vec<Keeper>, server: Pid) {
    let raw = fds.each_ref().map(|fd| fd.as_raw_fd());
    while let Some(i) = keepers.iter().rposition(|k| k.waiting) {
        keepers[i].waiting = false;
        let sent = sendmsg::<()>(
            keepers[i].channel.as_raw_fd(),
            &[IoSlice::new(b"A")],
            &[ControlMessage::ScmRights(&raw)],
            MsgFlags::MSG_NOSIGNAL,
            None,
        );
        match sent {
            Ok(_) => return,
            // Gone meanwhile: its end of file comes later; the next one.
            Err(_) => {
                keepers.remove(i);
            }
        }
    }
    let Ok((ours, theirs)) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    ) else {
        return;
    };
    match super::shim::fork_keeper() {
        Ok(None) => {
            // The other keepers' channels must close when the server does, not stay open
            // in this one.
            drop(ours);
            keepers.clear();
            keeper(theirs, fds, server)
        }
        Ok(Some(pid)) => keepers.push(Keeper {
            pid,
            channel: ours,
            waiting: false,
        }),
        Err(_) => {}
    }
}

/// Collect the keepers that ended (`flags`: `WNOHANG`), or all of them (no flags),
/// forgetting each one collected.
fn reap(keepers: &mut Vec<Keeper>, flags: WaitPidFlag) {
    loop {
        match waitpid(None, Some(flags)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(status) => {
                if let Some(pid) = status.pid() {
                    keepers.retain(|k| k.pid != pid);
                }
            }
        }
    }
}

/// The runner's end is closed: close every channel (a keeper waiting for work exits), tell
/// every keeper the server is going ([`super::shim::SERVER_GONE`]: one that keeps an
/// attempt kills its tree), wait for all of them and exit.
fn shut_down(keepers: Vec<Keeper>) -> ! {
    let pids: Vec<Pid> = keepers.iter().map(|k| k.pid).collect();
    drop(keepers);
    for pid in pids {
        let _ = nix::sys::signal::kill(pid, super::shim::SERVER_GONE);
    }
    reap(&mut Vec::new(), WaitPidFlag::empty());
    std::process::exit(0)
}

/// Read one request from the control socket (or a keeper's channel) `fd`: its descriptors
/// (close-on-exec), `None` for a message without all of them (they are closed).
///
/// Errors: the other end is closed (`ECONNRESET`), or the read failed.
fn receive(fd: std::os::fd::RawFd) -> nix::Result<Option<[OwnedFd; REQUEST_FDS]>> {
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; REQUEST_FDS]);
    let msg = recvmsg::<()>(fd, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)?;
    if msg.bytes == 0 {
        return Err(nix::errno::Errno::ECONNRESET);
    }
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            fds.extend(raw.into_iter().map(super::shim::own_received));
        }
    }
    Ok(<[OwnedFd; REQUEST_FDS]>::try_from(fds).ok())
}

/// A keeper, in the server's fork: follow the server's death, then serve attempts — the
/// `first`, then each the server hands over on `channel` — one after another ([`attempt`]).
/// Between two, it waits until the runner has closed the last attempt's socket (the runner
/// signals that attempt's group and pid no more), discards the signals sent for it, leaves
/// the attempt's working directory and says on `channel` that it waits for work. It exits
/// when the server closes the channel or goes, or when an attempt left it unfit to serve
/// another (its tree could not be emptied, its request could not be served).
fn keeper(channel: OwnedFd, first: [OwnedFd; REQUEST_FDS], server: Pid) -> ! {
    if nix::sys::prctl::set_pdeathsig(super::shim::SERVER_GONE).is_err()
        || nix::unistd::getppid() != server
    {
        std::process::exit(0);
    }
    let mut fds = first;
    loop {
        let Some(report) = attempt(fds) else {
            std::process::exit(0)
        };
        let _ = nix::unistd::chdir(c"/");
        if !runner_done(&report, &channel) || super::shim::forget_pending() {
            std::process::exit(0);
        }
        drop(report);
        if nix::unistd::write(&channel, WAITING) != Ok(1) {
            std::process::exit(0);
        }
        fds = match receive(channel.as_raw_fd()) {
            Ok(Some(fds)) => fds,
            Ok(None) | Err(_) => std::process::exit(0),
        };
    }
}

/// Wait until the runner has closed the attempt's socket `report` (it is done with the
/// attempt: it has stopped signalling its group); `false` when the server's end of
/// `channel` closed first (the server is gone or let this keeper go).
fn runner_done(report: &OwnedFd, channel: &OwnedFd) -> bool {
    loop {
        let mut fds = [
            PollFd::new(report.as_fd(), PollFlags::POLLIN),
            PollFd::new(channel.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
        if fds[1].any().unwrap_or(true) {
            return false;
        }
        let mut byte = [0u8; 1];
        match nix::unistd::read(report, &mut byte) {
            // More from the runner after its request is not expected: read past it.
            Ok(1..) | Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
            Ok(0) | Err(_) => return true,
        }
    }
}

/// One attempt in a keeper: lead the attempt's process group, take the agent's stdio,
/// report its pid, read the request, and keep the confined agent
/// ([`super::shim::keep_program`]). Returns the attempt's socket once the last report is
/// sent, when the keeper may serve another attempt. A request it cannot serve ends the
/// attempt as an agent that could not start would: exit code 127 (a directory that is not
/// there) or 3 (no ruleset, a broken request), with a line on the agent's stderr; the keeper
/// then exits.
fn attempt(fds: [OwnedFd; REQUEST_FDS]) -> Option<OwnedFd> {
    let [stdin, stdout, stderr, report] = fds;
    let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
    let _ = nix::unistd::dup2_stdin(&stdin);
    let _ = nix::unistd::dup2_stdout(&stdout);
    let _ = nix::unistd::dup2_stderr(&stderr);
    drop((stdin, stdout, stderr));
    super::shim::send(&report, Report::Started(nix::unistd::getpid().as_raw()));
    let request = match read_request(&report) {
        Ok(r) => r,
        Err(why) => end(&report, crate::error::EXIT_ENVIRONMENT, &why),
    };
    if let Err(e) = nix::unistd::chdir(request.cwd.as_c_str()) {
        let program = String::from_utf8_lossy(request.argv[0].to_bytes()).into_owned();
        let why = super::keeper::cannot_start(&program, &std::io::Error::from(e));
        end(&report, super::keeper::CANNOT_EXEC, &why);
    }
    let ruleset = match super::ruleset(&request.writes) {
        Ok(fd) => fd,
        Err(e) => end(
            &report,
            crate::error::EXIT_ENVIRONMENT,
            &format!("runner sandbox: {e}; the agent was not started"),
        ),
    };
    super::shim::keep_program(
        ruleset,
        &request.executable,
        &request.argv,
        &request.env,
        &report,
    )
    .then_some(report)
}

/// Read the runner's request from the attempt's socket.
///
/// Errors: the socket closed early, the request is over [`MAX_REQUEST`] or broken.
fn read_request(report: &OwnedFd) -> Result<Request, String> {
    let mut count = [0u8; 4];
    read_exact(report, &mut count)?;
    let len = u32::from_le_bytes(count) as usize;
    if len > MAX_REQUEST {
        return Err(format!(
            "runner sandbox: a request of {len} bytes (at most {MAX_REQUEST})"
        ));
    }
    let mut body = vec![0u8; len];
    read_exact(report, &mut body)?;
    Request::decode(&body).map_err(|e| format!("runner sandbox: {e}"))
}

/// Fill `buf` from the attempt's socket `report`.
///
/// Errors: the runner's end closed first, or the read failed.
fn read_exact(report: &OwnedFd, mut buf: &mut [u8]) -> Result<(), String> {
    while !buf.is_empty() {
        match nix::unistd::read(report, buf) {
            Ok(0) => return Err("runner sandbox: the runner closed the attempt's socket".into()),
            Ok(n) => buf = &mut buf[n..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(format!("runner sandbox: cannot read the request: {e}")),
        }
    }
    Ok(())
}

/// End an attempt whose agent was not started: `line` on its stderr, `code` reported as its
/// exit code.
fn end(report: &OwnedFd, code: i32, line: &str) -> ! {
    let _ = nix::unistd::write(std::io::stderr(), format!("{line}\n").as_bytes());
    super::shim::send(report, Report::Exited(code));
    std::process::exit(0)
}
