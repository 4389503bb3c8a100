//! Ctrl-Z and `fg` (DESIGN §6, as nextest does it): on SIGTSTP every teammate is stopped
//! (its group and the processes that left it), then the runner stops itself; when it is
//! continued it continues them. The time spent stopped is kept, so time limits do not count
//! it ([`stopped_total`]). A stop the runner did not ask for (`kill -STOP`, a debugger,
//! SIGTTOU on a background job, a paused VM) cannot be caught, so it is seen afterwards: a
//! watcher thread wakes every [`WATCH_EVERY`], and a wake-up much later than that is time the
//! process spent stopped ([`watch_stops`], [`account_stops`]).

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
    /// When the stop watcher last looked (`None` until [`watch_stops`]).
    looked: Option<Instant>,
}

static CLOCK: Mutex<Clock> = Mutex::new(Clock {
    total: Duration::ZERO,
    since: None,
    looked: None,
});

/// How often the stop watcher wakes.
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(100);
/// A wake-up later than [`WATCH_EVERY`] by more than this is a stop, not a busy machine.
const STOP_GAP: Duration = Duration::from_millis(500);

/// Start the thread that notices stops nobody asked for (once per process; later calls do
/// nothing).
pub(crate) fn watch_stops() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        account_stops();
        let spawned = std::thread::Builder::new()
            .name("stop-watcher".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(WATCH_EVERY);
                    account_stops();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot watch for stops: {e}");
        }
    });
}

/// Count, now, a stop that happened since the watcher last looked (the watcher may not
/// have woken yet after a SIGCONT: a deadline calls this before it fires).
pub(crate) fn account_stops() {
    let now = Instant::now();
    with_clock(|c| {
        if let Some(looked) = c.looked {
            let gap = now.saturating_duration_since(looked);
            // A suspension of our own counts itself.
            if c.since.is_none() && gap > WATCH_EVERY + STOP_GAP {
                c.total += gap - WATCH_EVERY;
                tracing::info!(
                    "the runner was stopped for about {gap:?}; time limits do not count it"
                );
            }
        }
        c.looked = Some(now);
    });
}

fn with_clock<T>(f: impl FnOnce(&mut Clock) -> T) -> T {
    f(&mut CLOCK.lock().unwrap_or_else(PoisonError::into_inner))
}

/// How long this process has been stopped so far — by job control (the suspension under way
/// included) or by anyone else ([`watch_stops`]). A time limit is due at its start + limit +
/// the growth of this value.
pub(crate) fn stopped_total() -> Duration {
    with_clock(|c| c.total + c.since.map_or(Duration::ZERO, |s| s.elapsed()))
}

/// Stop every teammate, then this process; when it is continued (`fg`, `bg`, SIGCONT),
/// continue every teammate. Returns once they run again.
pub(crate) fn suspend() {
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
        // The watcher's next look starts from here: the suspension is counted already.
        c.looked = c.looked.map(|_| Instant::now());
    });
}

/// Where suspend requests come from: SIGTSTP (Ctrl-Z), or nowhere.
pub(crate) struct Suspends {
    tstp: Option<tokio::signal::unix::Signal>,
}

impl Suspends {
    /// Listen for SIGTSTP.
    ///
    /// Errors: [`Error::Environment`] when the handler cannot be installed.
    pub(crate) fn signals() -> Result<Suspends> {
        let tstp = signal(SignalKind::from_raw(Signal::SIGTSTP as i32))
            .map_err(|e| Error::Environment(format!("cannot listen for Ctrl-Z: {e}")))?;
        Ok(Suspends { tstp: Some(tstp) })
    }

    /// No suspend requests (in-process tests).
    #[cfg(test)]
    pub(crate) fn none() -> Suspends {
        Suspends { tstp: None }
    }

    /// The next suspend request; pending forever without a source.
    pub(crate) async fn next(&mut self) {
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
