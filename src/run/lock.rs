//! One run per batch: an exclusive `flock` on `<workspace>/lock`, held for the run's length.
//! The holder's pid is written inside so a second run can name it. The OS releases the lock
//! when its holder dies, so a lock left by a dead runner is taken over without ceremony.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// A held run lock; released when dropped.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

/// Take the lock of the workspace `dir`.
///
/// Errors: [`Error::LockHeld`] naming the pid of the run that holds it, or the IO error.
pub fn acquire(dir: &Path) -> Result<RunLock> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("lock");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| Error::io("open", &path, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let pid = pid.trim();
            return Err(Error::LockHeld {
                pid: pid.parse().ok(),
                lock: path,
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
    }
    let _ = file.set_len(0);
    let _ = file.seek(SeekFrom::Start(0));
    let _ = write!(file, "{}", std::process::id());
    let _ = file.flush();
    Ok(RunLock { _file: file })
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
        acquire(dir.path()).expect("free again");
    }
}
