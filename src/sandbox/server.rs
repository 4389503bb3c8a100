//! The keeper server: one small process per run (`runner-keeper`, started once by the
//! runner, [`super::client`]) that forks the keeper of each confined attempt on request, so
//! an attempt costs two forks of this small process and the agent's exec — never an exec of
//! a keeper, never a copy of the runner's address space (issue 49).
//!
//! Its stdin is its end of the runner's control socket (`SOCK_SEQPACKET`). Each request is
//! one message of one byte carrying four descriptors (`SCM_RIGHTS`): the agent's stdin,
//! stdout and stderr, and the keeper's end of the attempt's own socket. The server forks
//! the keeper ([`super::shim::fork_keeper`]) and goes back to reading; the keeper does the
//! rest ([`attempt`]). When the runner's end closes (the run is over, or the runner was
//! killed), the server exits, and every keeper it forked gets [`super::shim::SERVER_GONE`]
//! (`PR_SET_PDEATHSIG`), kills its attempt's tree and says so.

use std::io::{IoSliceMut, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::wire::{MAX_REQUEST, Report, Request};

/// How many descriptors a request carries: stdin, stdout, stderr, the attempt's socket.
pub(crate) const REQUEST_FDS: usize = 4;

/// Serve the runner on stdin until it closes; never returns. Takes no arguments.
///
/// The server waits for its keepers (those that ended, after each request; all of them at
/// the end), so their CPU time and their agents' is counted as the run's, as it was when the
/// runner spawned each keeper itself. When the runner's end closes, the keepers still
/// running are sent [`super::shim::SERVER_GONE`] (each kills its attempt's tree) and waited
/// for.
pub(crate) fn serve() -> ! {
    let server = nix::unistd::getpid();
    // Asked once here, inherited by every keeper's ruleset.
    let _ = super::kernel_abi();
    let control = std::io::stdin();
    let mut keepers: Vec<Pid> = Vec::new();
    loop {
        reap(&mut keepers, WaitPidFlag::WNOHANG);
        let fds = match receive(control.as_fd().as_raw_fd()) {
            Ok(Some(fds)) => fds,
            Ok(None) | Err(nix::errno::Errno::EINTR) => continue,
            // The runner's end is closed (Ok(0) is mapped to ECONNRESET): nothing more to
            // serve.
            Err(_) => {
                for keeper in &keepers {
                    let _ = nix::sys::signal::kill(*keeper, super::shim::SERVER_GONE);
                }
                reap(&mut keepers, WaitPidFlag::empty());
                std::process::exit(0)
            }
        };
        // A fork that fails drops the descriptors: the runner reads end of file on the
        // attempt's socket before any report, and says the keeper could not start.
        match super::shim::fork_keeper() {
            Ok(None) => attempt(fds, server),
            Ok(Some(keeper)) => keepers.push(keeper),
            Err(_) => {}
        }
    }
}

/// Collect the keepers that ended (`flags`: `WNOHANG`), or all of them (no flags).
fn reap(keepers: &mut Vec<Pid>, flags: WaitPidFlag) {
    while !keepers.is_empty() {
        match waitpid(None, Some(flags)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(status) => {
                if let Some(pid) = status.pid() {
                    keepers.retain(|k| *k != pid);
                }
            }
        }
    }
}

/// Read one request from the control socket `fd`: its descriptors (close-on-exec), `None`
/// for a message without all of them (they are closed).
///
/// Errors: the runner's end is closed (`ECONNRESET`), or the read failed.
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

/// The keeper of one attempt, in the server's fork: follow the server's death, lead the
/// attempt's process group, take the agent's stdio, report its pid, read the request, and
/// keep the confined agent ([`super::shim::keep_program`]). A request it cannot serve ends
/// the attempt as an agent that could not start would: exit code 127 (a directory that is
/// not there) or 3 (no ruleset, a broken request), with a line on the agent's stderr.
fn attempt(fds: [OwnedFd; REQUEST_FDS], server: Pid) -> ! {
    let [stdin, stdout, stderr, report] = fds;
    if nix::sys::prctl::set_pdeathsig(super::shim::SERVER_GONE).is_err()
        || nix::unistd::getppid() != server
    {
        std::process::exit(0);
    }
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
        report,
    )
}

/// Read the runner's request from the attempt's socket.
///
/// Errors: the socket closed early, the request is over [`MAX_REQUEST`] or broken.
fn read_request(report: &OwnedFd) -> Result<Request, String> {
    let dup = report
        .try_clone()
        .map_err(|e| format!("runner sandbox: cannot read the request: {e}"))?;
    let mut socket = std::os::unix::net::UnixStream::from(dup);
    let mut count = [0u8; 4];
    socket
        .read_exact(&mut count)
        .map_err(|e| format!("runner sandbox: cannot read the request: {e}"))?;
    let len = u32::from_le_bytes(count) as usize;
    if len > MAX_REQUEST {
        return Err(format!(
            "runner sandbox: a request of {len} bytes (at most {MAX_REQUEST})"
        ));
    }
    let mut body = vec![0u8; len];
    socket
        .read_exact(&mut body)
        .map_err(|e| format!("runner sandbox: cannot read the request: {e}"))?;
    Request::decode(&body).map_err(|e| format!("runner sandbox: {e}"))
}

/// End an attempt whose agent was not started: `line` on its stderr, `code` reported as its
/// exit code.
fn end(report: &OwnedFd, code: i32, line: &str) -> ! {
    let _ = nix::unistd::write(std::io::stderr(), format!("{line}\n").as_bytes());
    super::shim::send(report, Report::Exited(code));
    std::process::exit(0)
}
