//! The runner's side of the keeper server ([`super::server`]): [`start`] is the one way to
//! start a command confined.
//!
//! The server is started once per runner process, on the first confined attempt, with
//! `posix_spawn` (the `runner-keeper` program, [`super::keeper::program`]) as the leader of
//! a process group of its own (the terminal's Ctrl-C is the runner's to pass on), its stdin
//! the runner's control socket. An attempt sends it the agent's stdio and one end of a fresh
//! socket pair; on the other end it writes the [`Request`] and reads the keeper's
//! [`Report`]s ([`Kept`]).
//!
//! A server that is gone when an attempt is sent (killed, crashed) is started again; the
//! attempts it kept when it ended are killed by their keepers and end with
//! [`Kept::wait`]'s [`LOST`] error.

use std::ffi::{CString, OsString};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, sendmsg, socketpair,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::wire::{Report, Request};

/// The words of [`Kept::wait`]'s error when the keeper server ended while the attempt ran.
pub(crate) const LOST: &str = "the sandbox's keeper server ended while the attempt ran; its keeper killed the attempt's processes";

/// The running keeper server: the runner's end of its control socket, and the process.
struct Server {
    control: OwnedFd,
    process: std::process::Child,
}

/// The server of this runner process, once started.
static SERVER: Mutex<Option<Server>> = Mutex::new(None);

/// What to start confined: the program as the runner was given it, its arguments, its
/// working directory and whole environment, and the paths it may write.
pub(crate) struct Confined<'a> {
    /// The program (looked up in `path`, or a path).
    pub program: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// The paths it may write beneath.
    pub writes: &'a [PathBuf],
    /// Its working directory.
    pub cwd: &'a Path,
    /// The `PATH` it is looked up in (the child's).
    pub path: Option<&'a std::ffi::OsStr>,
    /// Its whole environment.
    pub env: Vec<(OsString, OsString)>,
}

/// A confined attempt's keeper, started by the server: the leader of the attempt's process
/// group (the runner signals it as it signals an unconfined leader), and the socket its
/// reports come on. Dropping it closes the socket, which tells the keeper the runner is done
/// with the attempt: the keeper then serves another, leading a group of the same id, so it
/// is dropped only after the runner's last signal to the attempt's group and pid.
#[derive(Debug)]
pub(crate) struct Kept {
    pid: u32,
    socket: tokio::net::UnixStream,
}

/// Start `what` under a keeper of the server's, reading `stdin`; the keeper and the read
/// ends of the agent's stdout and stderr.
///
/// Errors: the program is not found or not executable (`NotFound`, as a spawn of it would
/// fail), out of descriptors (`EMFILE`, `ENFILE`: the caller tries again), the server cannot
/// be started, or the keeper did not start.
pub(crate) async fn start(
    what: Confined<'_>,
    stdin: OwnedFd,
) -> std::io::Result<(Kept, OwnedFd, OwnedFd)> {
    let executable = super::keeper::resolve(what.program, what.path, what.cwd)?;
    let c = |b: &[u8]| {
        CString::new(b).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let mut env = Vec::with_capacity(what.env.len());
    for (k, v) in &what.env {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        env.push(c(&kv)?);
    }
    let request = Request {
        cwd: c(what.cwd.as_os_str().as_bytes())?,
        writes: what.writes.to_vec(),
        executable: c(executable.as_os_str().as_bytes())?,
        argv: std::iter::once(what.program)
            .chain(what.args.iter().map(String::as_str))
            .map(|a| c(a.as_bytes()))
            .collect::<std::io::Result<_>>()?,
        env,
    };
    let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
    let (out_r, out_w) = nix::unistd::pipe2(cloexec)?;
    let (err_r, err_w) = nix::unistd::pipe2(cloexec)?;
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    send([
        stdin.as_raw_fd(),
        out_w.as_raw_fd(),
        err_w.as_raw_fd(),
        theirs.as_raw_fd(),
    ])?;
    drop((stdin, out_w, err_w, theirs));
    let ours = std::os::unix::net::UnixStream::from(ours);
    ours.set_nonblocking(true)?;
    let mut socket = tokio::net::UnixStream::from_std(ours)?;
    let started = match socket.write_all(&request.encode()).await {
        Ok(()) => read_report(&mut socket).await,
        Err(e) => Err(e),
    };
    match started {
        Ok(Some(Report::Started(pid))) if pid > 0 => Ok((
            Kept {
                pid: pid as u32,
                socket,
            },
            out_r,
            err_r,
        )),
        Ok(_) | Err(_) => Err(std::io::Error::other(
            "the sandbox's keeper did not start (the keeper server ended or is out of processes)",
        )),
    }
}

/// Read the next report; `None` at end of file (the keeper is gone without a word).
async fn read_report(socket: &mut tokio::net::UnixStream) -> std::io::Result<Option<Report>> {
    let mut bytes = [0u8; 8];
    match socket.read_exact(&mut bytes).await {
        Ok(_) => Ok(Report::decode(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

impl Kept {
    /// The keeper's pid: the id of the attempt's process group.
    pub(crate) fn id(&self) -> u32 {
        self.pid
    }

    /// The descriptor the reports come on, to look whether one is waiting ([`reported`]).
    pub(crate) fn report_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// How the agent ended, as the wait status of a process that ended so. A keeper that
    /// is gone without a word was killed (`SIGKILL`, the runner's last resort).
    ///
    /// Errors: [`LOST`] (`ConnectionAborted`) when the server ended while the attempt ran;
    /// a read that failed.
    pub(crate) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        loop {
            let raw = match read_report(&mut self.socket).await? {
                Some(Report::Exited(code)) => (code & 0xff) << 8,
                Some(Report::Signalled(sig)) => sig & 0x7f,
                Some(Report::Lost) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        LOST,
                    ));
                }
                Some(Report::Started(_)) => continue,
                None => nix::sys::signal::Signal::SIGKILL as i32,
            };
            return Ok(ExitStatusExt::from_raw(raw));
        }
    }
}

/// Whether a report (or end of file) waits on `fd` ([`Kept::report_fd`]): the agent ended
/// and the wait has not seen it yet. Looked at without reading it.
pub(crate) fn reported(fd: RawFd) -> bool {
    let mut byte = [0u8; 1];
    nix::sys::socket::recv(fd, &mut byte, MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT).is_ok()
}

/// Hand the server one attempt's descriptors, starting it first when there is none or it
/// is gone (once).
///
/// Errors: the server cannot be started or will not take them.
fn send(fds: [RawFd; super::server::REQUEST_FDS]) -> std::io::Result<()> {
    let mut server = SERVER.lock().unwrap_or_else(PoisonError::into_inner);
    let mut tries = 0;
    loop {
        let mut running = match server.take() {
            Some(s) => s,
            None => spawn_server()?,
        };
        let sent = sendmsg::<()>(
            running.control.as_raw_fd(),
            &[IoSlice::new(b"A")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::MSG_NOSIGNAL,
            None,
        );
        match sent {
            Ok(_) => {
                *server = Some(running);
                return Ok(());
            }
            Err(Errno::EPIPE | Errno::ECONNRESET | Errno::ENOTCONN) if tries == 0 => {
                tracing::warn!(
                    "the sandbox's keeper server (pid {}) has ended; starting another",
                    running.process.id()
                );
                let _ = running.process.try_wait();
                tries += 1;
            }
            Err(e) => {
                *server = Some(running);
                return Err(e.into());
            }
        }
    }
}

/// Start the keeper server: the keeper program with the server's end of a new control
/// socket as its stdin, in a process group of its own.
///
/// Errors: the socket cannot be made, or the program cannot be spawned.
fn spawn_server() -> std::io::Result<Server> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let (program, first) = super::keeper::program()?;
    let process = std::process::Command::new(program)
        .args(first)
        .stdin(std::process::Stdio::from(theirs))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()?;
    tracing::debug!("the sandbox's keeper server runs as pid {}", process.id());
    Ok(Server {
        control: ours,
        process,
    })
}

/// How long [`shutdown`] waits for the server to exit before it kills it.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// End the keeper server at the end of the run: close the control socket (the server ends
/// the keepers still running, waits for them and exits) and wait for it, so that nothing of
/// the run outlives it and its CPU time is the run's. Nothing to do when none was started.
pub(crate) fn shutdown() {
    let Some(mut server) = SERVER.lock().unwrap_or_else(PoisonError::into_inner).take() else {
        return;
    };
    drop(server.control);
    let until = std::time::Instant::now() + SHUTDOWN_WAIT;
    while std::time::Instant::now() < until {
        if !matches!(server.process.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    tracing::warn!(
        "the sandbox's keeper server (pid {}) did not exit in {SHUTDOWN_WAIT:?}; killing it",
        server.process.id()
    );
    let _ = server.process.kill();
    let _ = server.process.wait();
}
