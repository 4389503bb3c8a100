//! What `runner mcp` does with the process it shares with its runs: stdout is the protocol's
//! alone, and the signals that end a runner end the server only after its run.
//!
//! - [`ProtocolOut::take`] moves the protocol to a descriptor of its own (a close-on-exec
//!   copy of stdout, so no teammate inherits it) and points descriptor 1 at stderr: whatever
//!   the library prints on stdout (a run's progress lines, its summary) lands in the server's
//!   log, never in the protocol.
//! - [`Signals`] takes SIGINT, SIGTERM and SIGHUP from the start, so none of them ends the
//!   process before the run under way has stopped its teammates (a run's dispatcher hears the
//!   same signal and interrupts its team).
//! - [`quiet_log`]: once the client has gone and a background team runs on, the server's log
//!   (stderr, and stdout pointed at it) goes to `/dev/null` when it was a pipe or a socket,
//!   whose reader went with the client: a write there would fail (the team's journal keeps
//!   every event all the same).

use std::os::fd::OwnedFd;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::error::{Error, Result};

/// The protocol's end of stdout (see the module's guide).
pub(crate) struct ProtocolOut(OwnedFd);

impl ProtocolOut {
    /// Copy stdout for the protocol (close-on-exec) and point descriptor 1 at stderr. Call it
    /// before anything is printed.
    ///
    /// Errors: a descriptor cannot be copied (exit 3).
    pub(crate) fn take() -> Result<ProtocolOut> {
        let environment = |what: &str, e: nix::Error| {
            Error::Environment(format!("cannot set up the protocol's stdout ({what}): {e}"))
        };
        let out = nix::unistd::dup(std::io::stdout()).map_err(|e| environment("dup", e))?;
        fcntl(&out, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
            .map_err(|e| environment("close-on-exec", e))?;
        nix::unistd::dup2_stdout(std::io::stderr()).map_err(|e| environment("dup2", e))?;
        Ok(ProtocolOut(out))
    }

    /// The descriptor as the transport writes it.
    pub(crate) fn into_async(self) -> tokio::fs::File {
        tokio::fs::File::from_std(std::fs::File::from(self.0))
    }
}

/// SIGINT, SIGTERM and SIGHUP, listened for by the server.
pub(crate) struct Signals([Signal; 3]);

impl Signals {
    /// Listen for the three (from now on none of them ends the process by itself).
    ///
    /// Errors: a handler cannot be installed (exit 3).
    pub(crate) fn listen() -> Result<Signals> {
        let listen = |kind: SignalKind, what: &str| {
            signal(kind).map_err(|e| Error::Environment(format!("cannot listen for {what}: {e}")))
        };
        Ok(Signals([
            listen(SignalKind::interrupt(), "SIGINT")?,
            listen(SignalKind::terminate(), "SIGTERM")?,
            listen(SignalKind::hangup(), "SIGHUP")?,
        ]))
    }

    /// The next of them.
    pub(crate) async fn next(&mut self) {
        let [int, term, hup] = &mut self.0;
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    }
}

/// Point descriptors 1 and 2 at `/dev/null` when stderr is a pipe or a socket (see the
/// module's guide); a file or a terminal keeps the log. Nothing is done when `/dev/null`
/// cannot be opened (the log's writes then fail as they would have).
pub(crate) fn quiet_log() {
    use nix::sys::stat::{SFlag, fstat};
    let Ok(stat) = fstat(std::io::stderr()) else {
        return;
    };
    let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
    if kind != SFlag::S_IFIFO && kind != SFlag::S_IFSOCK {
        return;
    }
    let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
        return;
    };
    let _ = nix::unistd::dup2_stdout(&null);
    let _ = nix::unistd::dup2_stderr(&null);
}
