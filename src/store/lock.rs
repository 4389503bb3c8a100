//! The store lock (DESIGN §6): one exclusive `flock` on `<store>/.runner.lock`, taken for
//! each read-modify-write of a store file — the inbox, batch files and their tables,
//! checkpoints — and released as soon as the edit is written: never held for a run, nor
//! while a person is asked something. It is a [`PidLock`]: the holder's pid is inside, so
//! a writer that waits too long can name it, and the OS releases it when its holder dies.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::fsutil::{PidLock, try_pid_lock};

/// The lock file's name inside the store.
pub(crate) const LOCK_FILE: &str = ".runner.lock";

/// How long a writer waits for the store lock unless `RUNNER_STORE_LOCK_WAIT` says otherwise.
/// An edit holds it for milliseconds; a holder this slow is stuck (stopped, or a dead disk).
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// What a waiting writer says once on stderr (tests wait for it).
pub(crate) const WAITING: &str = "waiting for the store lock";

/// A held store lock; released when dropped.
#[derive(Debug)]
pub(crate) struct StoreLock {
    _lock: PidLock,
}

/// How long to wait for the lock: `RUNNER_STORE_LOCK_WAIT` (`500ms`, `30s`, bare seconds)
/// or [`DEFAULT_WAIT`].
///
/// Errors: a value that is not a duration (exit 2).
pub(crate) fn wait_limit() -> Result<Duration> {
    match std::env::var("RUNNER_STORE_LOCK_WAIT") {
        Ok(v) => crate::settings::parse_duration("RUNNER_STORE_LOCK_WAIT", &v),
        Err(_) => Ok(DEFAULT_WAIT),
    }
}

/// Take the lock of the store folder `dir` (which must exist), waiting up to `wait` for
/// another writer to finish its edit; while waiting it says so once on stderr.
///
/// Errors: still held after `wait` — [`Error::StoreBusy`] (exit 3) naming the holder's
/// pid and the lock file; the lock file cannot be opened or locked ([`Error::Io`], exit 3).
pub(crate) fn acquire(dir: &Path, wait: Duration) -> Result<StoreLock> {
    let path = dir.join(LOCK_FILE);
    let started = Instant::now();
    let deadline = started + wait;
    let mut said = false;
    loop {
        let holder = match try_pid_lock(&path)? {
            Ok(lock) => return Ok(StoreLock { _lock: lock }),
            Err(holder) => holder,
        };
        if Instant::now() >= deadline {
            return Err(Error::StoreBusy {
                holder,
                waited: wait,
                lock: path,
            });
        }
        // The holder writes its pid just after it takes the lock: name it once it is there
        // (or after a moment without it).
        let quiet = started.elapsed() >= Duration::from_millis(200);
        // Another thread of this run (ticking an item as the batch file is edited) is no one
        // to name.
        let this_run = holder.pid == Some(std::process::id()) && holder.host.is_none();
        if !said && !this_run && (holder.pid.is_some() || quiet) {
            // The holder's host is read from the lock file: shown, never obeyed.
            eprintln!(
                "runner: {WAITING}, held by {} ({})",
                crate::shown::terminal_safe(&holder.to_string()),
                path.display()
            );
            said = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_waits_then_names_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let held = acquire(dir.path(), Duration::ZERO).expect("first");
        let e = acquire(dir.path(), Duration::from_millis(50)).expect_err("second");
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        assert_eq!(e.exit_code(), crate::error::EXIT_ENVIRONMENT);
        drop(held);
        acquire(dir.path(), Duration::ZERO).expect("free again");
    }
}
