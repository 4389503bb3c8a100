//! One run per batch: an exclusive lock on `<workspace>/lock` ([`crate::fsutil::PidLock`]),
//! held for the run's length. The holder's pid is written inside so a second run can name
//! it; a lock left by a dead runner is taken over without ceremony.

use std::path::Path;

use crate::error::{Error, Result};
use crate::fsutil::{PidLock, try_pid_lock};

/// A held run lock; released when dropped.
#[derive(Debug)]
pub(crate) struct RunLock {
    _lock: PidLock,
}

/// Take the lock of the workspace `dir`.
///
/// Errors: [`Error::LockHeld`] naming the pid of the run that holds it, or the IO error.
pub(crate) fn acquire(dir: &Path) -> Result<RunLock> {
    let path = dir.join("lock");
    match try_pid_lock(&path)? {
        Ok(lock) => Ok(RunLock { _lock: lock }),
        Err(holder) => Err(Error::LockHeld { holder, lock: path }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_names_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let held = acquire(dir.path()).expect("first");
        let e = acquire(dir.path()).expect_err("second");
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        drop(held);
        // Another test's child forked in this instant holds the descriptor until its exec
        // (close-on-exec): the lock is free once it has.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while acquire(dir.path()).is_err() {
            assert!(
                std::time::Instant::now() < until,
                "the lock was never free again"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
