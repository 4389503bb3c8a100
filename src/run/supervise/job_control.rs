//! Ctrl-Z and `fg` (DESIGN §6, as nextest does it): on SIGTSTP every teammate is stopped
//! (its group and the processes that left it), then the runner stops itself; when it is
//! continued it continues them. The time spent stopped is kept, so time limits do not count
//! it ([`stopped_total`]).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, raise};
use tokio::signal::unix::{SignalKind, signal};

use crate::error::{Error, Result};
use crate::run::supervise::descendants;

struct Clock {
    /// Time of the suspensions that ended.
    total: Duration,
    /// When the suspension under way began.
    since: Option<Instant>,
}

static CLOCK: Mutex<Clock> = Mutex::new(Clock {
    total: Duration::ZERO,
    since: None,
});

fn with_clock<T>(f: impl FnOnce(&mut Clock) -> T) -> T {
    f(&mut CLOCK.lock().unwrap_or_else(PoisonError::into_inner))
}

/// How long this process has been suspended by job control so far, the suspension under way
/// included. A time limit is due at its start + limit + the growth of this value.
pub fn stopped_total() -> Duration {
    with_clock(|c| c.total + c.since.map_or(Duration::ZERO, |s| s.elapsed()))
}

/// Stop every teammate, then this process; when it is continued (`fg`, `bg`, SIGCONT),
/// continue every teammate. Returns once they run again.
pub fn suspend() {
    with_clock(|c| c.since = Some(Instant::now()));
    descendants::signal_run(Signal::SIGSTOP);
    // SIGSTOP cannot be caught: this returns when the process is continued.
    if let Err(e) = raise(Signal::SIGSTOP) {
        tracing::warn!("cannot stop the runner: {e}");
    }
    descendants::signal_run(Signal::SIGCONT);
    with_clock(|c| {
        if let Some(s) = c.since.take() {
            c.total += s.elapsed();
        }
    });
}

/// Where suspend requests come from: SIGTSTP (Ctrl-Z), or nowhere.
pub struct Suspends {
    tstp: Option<tokio::signal::unix::Signal>,
}

impl Suspends {
    /// Listen for SIGTSTP.
    ///
    /// Errors: [`Error::Environment`] when the handler cannot be installed.
    pub fn signals() -> Result<Suspends> {
        let tstp = signal(SignalKind::from_raw(Signal::SIGTSTP as i32))
            .map_err(|e| Error::Environment(format!("cannot listen for Ctrl-Z: {e}")))?;
        Ok(Suspends { tstp: Some(tstp) })
    }

    /// No suspend requests (in-process tests).
    pub fn none() -> Suspends {
        Suspends { tstp: None }
    }

    /// The next suspend request; pending forever without a source.
    pub async fn next(&mut self) {
        match &mut self.tstp {
            Some(s) => {
                if s.recv().await.is_none() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }
}
