//! Outputs kept current while the run goes on (issue 24; GNU parallel's `--joblog` and
//! `--results` are current as jobs end): a sink that has a [`Live`] rewrites its file on a
//! thread of its own after an item finished, at most once every [`EVERY`] — or, for a file
//! so big that writing it takes longer than a tenth of that, every [`SHARE`] times as long
//! as the last write took (a rewrite reads every row), so the rewrites never take more than
//! a tenth of the run. A `kill -9` leaves a file that holds everything finished up to then.
//! The file is replaced atomically each time; the sink's final write, after the run, is the
//! last word.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::run::record::team::{OutcomeIndex, OutcomesView};

/// The least time between two rewrites of a live output.
pub(crate) const EVERY: Duration = Duration::from_secs(1);
/// Between two rewrites at least this many times as long as the last one took.
pub(crate) const SHARE: u32 = 10;

#[derive(Default)]
struct Flags {
    /// An item finished since the last rewrite.
    dirty: bool,
    /// The run is over: the thread ends.
    stop: bool,
}

/// The rewriting thread of one output, started by [`Live::start`], ended by [`Live::stop`]
/// (or when dropped).
pub(crate) struct Live {
    shared: Arc<(Mutex<Flags>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Live {
    /// Start the thread named `name` that calls `write` after [`Live::changed`], at most once
    /// every [`EVERY`] (or [`SHARE`] times the last write's time, when longer). A failed write is warned about once and tried again on the next
    /// change: the final write reports for real.
    pub(crate) fn start(
        name: &str,
        mut write: impl FnMut() -> Result<()> + Send + 'static,
    ) -> Live {
        let shared = Arc::new((Mutex::new(Flags::default()), Condvar::new()));
        let theirs = shared.clone();
        let what = name.to_owned();
        let thread = std::thread::Builder::new()
            .name(format!("live-{name}"))
            .spawn(move || {
                let (lock, wake) = &*theirs;
                let mut last: Option<Instant> = None;
                let mut gap = EVERY;
                let mut warned = false;
                let mut flags = lock.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    if flags.stop {
                        return;
                    }
                    let due = last.map_or(Duration::ZERO, |l| gap.saturating_sub(l.elapsed()));
                    if flags.dirty && due.is_zero() {
                        flags.dirty = false;
                        drop(flags);
                        let began = Instant::now();
                        let wrote = write();
                        gap = EVERY.max(began.elapsed() * SHARE);
                        if let Err(e) = wrote
                            && !std::mem::replace(&mut warned, true)
                        {
                            tracing::warn!(
                                "cannot keep {what} current: {e}; it is written when the run ends"
                            );
                        }
                        last = Some(Instant::now());
                        flags = lock.lock().unwrap_or_else(PoisonError::into_inner);
                        continue;
                    }
                    let wait = if flags.dirty { due } else { gap };
                    flags = wake
                        .wait_timeout(flags, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            });
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("cannot keep {name} current: {e}; it is written when the run ends");
                None
            }
        };
        Live { shared, thread }
    }

    /// [`Live::start`] for an output made from the outcomes the run records: `write` gets an
    /// index over `outcomes` (opened at the first write; as current as the run each time).
    pub(crate) fn following(
        name: &str,
        outcomes: OutcomesView,
        mut write: impl FnMut(&mut OutcomeIndex) -> Result<()> + Send + 'static,
    ) -> Live {
        let mut index: Option<OutcomeIndex> = None;
        Live::start(name, move || {
            let index = match &mut index {
                Some(i) => i,
                None => index.insert(OutcomeIndex::over(&outcomes)?),
            };
            write(index)
        })
    }

    /// An item finished: rewrite the file soon.
    pub(crate) fn changed(&self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(PoisonError::into_inner).dirty = true;
        wake.notify_one();
    }

    /// End the thread (a rewrite under way finishes first); nothing is written after this.
    pub(crate) fn stop(&mut self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(PoisonError::into_inner).stop = true;
        wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn changes_are_written_at_most_once_a_second_and_none_after_stop() {
        let writes = Arc::new(AtomicU32::new(0));
        let counted = writes.clone();
        let mut live = Live::start("test", move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        // A change every 20 ms for about 2.5 s: rate-limited, whatever the machine's load.
        let began = Instant::now();
        while began.elapsed() < Duration::from_millis(2500) {
            live.changed();
            std::thread::sleep(Duration::from_millis(20));
        }
        let most = 2 + began.elapsed().as_secs() as u32;
        live.stop();
        let written = writes.load(Ordering::SeqCst);
        assert!(
            (1..=most).contains(&written),
            "{written} writes, at most {most}"
        );
        live.changed();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(writes.load(Ordering::SeqCst), written, "nothing after stop");
    }
}
