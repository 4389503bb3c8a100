//! An attempt's capped log: at most `cap` bytes of a stream — its first half, then its last
//! half (held in a ring file beside the log while the child runs), with a marker line where
//! bytes were cut — created when its first byte arrives or held in memory while small and
//! quick ([`HOLD_MAX`], [`HOLD_FOR`]). Log writes go to the page cache with plain
//! (blocking) writes: they take microseconds, and a disk error never stops the draining,
//! so a child can never block on a full pipe.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

/// Most bytes of stdout [`Spawn::hold_stdout`](super::process::Spawn::hold_stdout) holds in memory.
pub(crate) const HOLD_MAX: usize = 64 * 1024;
/// Longest time [`Spawn::hold_stdout`](super::process::Spawn::hold_stdout) holds stdout in memory, from the start.
pub(crate) const HOLD_FOR: Duration = Duration::from_secs(1);

/// What was drained from one stream ([`CappedLog::finish`]).
#[derive(Debug, Default)]
pub(super) struct Drained {
    /// Bytes read (before capping).
    pub(super) bytes: u64,
    /// All of them, when a held log kept them in memory to the end ([`Spawn::hold_stdout`](super::process::Spawn::hold_stdout)).
    pub(super) held: Option<Vec<u8>>,
}

/// A log that keeps at most `cap` bytes of what is written to it ([`CappedLog::write`]):
/// the first half in its file, the last half in a ring file until [`CappedLog::finish`].
/// A held log ([`LogFile::held`]) keeps its bytes in memory until it outgrows [`HOLD_MAX`]
/// (or half the cap) or [`CappedLog::spill_at`] passes.
pub(super) struct CappedLog {
    log: LogFile,
    head_cap: u64,
    tail_cap: u64,
    ring_path: PathBuf,
    ring: Option<std::fs::File>,
    /// Bytes written, before capping.
    total: u64,
    ring_written: u64,
    hold_max: usize,
    spill_at: Instant,
}

impl CappedLog {
    /// `log` capped at `cap` bytes; a held one spills [`HOLD_FOR`] from now.
    pub(super) fn new(log: LogFile, cap: u64) -> CappedLog {
        let head_cap = cap / 2;
        CappedLog {
            ring_path: ring_path(&log.path),
            log,
            head_cap,
            tail_cap: cap - head_cap,
            ring: None,
            total: 0,
            ring_written: 0,
            // A held log goes to its file once it outgrows this or the child has run HOLD_FOR.
            hold_max: HOLD_MAX.min(head_cap as usize),
            spill_at: Instant::now() + HOLD_FOR,
        }
    }

    /// Whether its bytes are still held in memory.
    pub(super) fn holding(&self) -> bool {
        self.log.held.is_some()
    }

    /// When a held log gets its file however little it holds.
    pub(super) fn spill_at(&self) -> Instant {
        self.spill_at
    }

    /// Give a held log its file, with what it held so far.
    pub(super) fn spill(&mut self) {
        self.log.spill();
    }

    /// Keep `chunk`: in memory while held and within bounds, else its part within the first
    /// half in the file and the rest in the ring.
    pub(super) fn write(&mut self, mut chunk: &[u8]) {
        use std::io::{Seek, Write};
        let n = chunk.len();
        if let Some(held) = self.log.held.as_mut() {
            if held.len() + n <= self.hold_max {
                held.extend_from_slice(chunk);
                self.total += n as u64;
                return;
            }
            self.log.spill();
        }
        if self.total < self.head_cap {
            let take = chunk.len().min((self.head_cap - self.total) as usize);
            if let Some(file) = self.log.file() {
                let _ = file.write_all(&chunk[..take]);
            }
            chunk = &chunk[take..];
        }
        self.total += n as u64;
        if chunk.is_empty() || self.tail_cap == 0 {
            return;
        }
        if self.ring.is_none() {
            self.ring = open_ring(&self.ring_path).ok();
        }
        if let Some(r) = self.ring.as_mut() {
            while !chunk.is_empty() {
                let pos = self.ring_written % self.tail_cap;
                let take = chunk.len().min((self.tail_cap - pos) as usize);
                if r.seek(std::io::SeekFrom::Start(pos)).is_err()
                    || r.write_all(&chunk[..take]).is_err()
                {
                    break;
                }
                self.ring_written += take as u64;
                chunk = &chunk[take..];
            }
        }
    }

    /// Close the log: the ring's bytes appended after the first half (with the marker line
    /// when bytes were cut) and the ring file removed. What was written, and a held log's
    /// bytes when it never needed its file.
    pub(super) fn finish(mut self) -> Drained {
        use std::io::Write;
        if let Some(mut r) = self.ring.take() {
            if let Some(file) = self.log.file() {
                let _ = finish_ring(file, &mut r, self.ring_written, self.tail_cap);
            }
            drop(r);
            let _ = std::fs::remove_file(&self.ring_path);
        }
        if let Some(file) = self.log.file.as_mut() {
            let _ = file.flush();
        }
        Drained {
            bytes: self.total,
            held: self.log.held.take(),
        }
    }
}

/// A log file: opened up front, or created when its first byte arrives so that a silent
/// stream leaves no empty file behind.
pub(super) struct LogFile {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Creating the file failed once: the stream is still drained, its bytes dropped.
    failed: bool,
    /// A held log's bytes, kept in memory until it [`LogFile::spill`]s
    /// ([`Spawn::hold_stdout`](super::process::Spawn::hold_stdout)).
    held: Option<Vec<u8>>,
}

impl LogFile {
    /// A log written to `file`, opened up front.
    pub(super) fn open(path: PathBuf, file: std::fs::File) -> LogFile {
        LogFile {
            path,
            file: Some(file),
            failed: false,
            held: None,
        }
    }

    /// A log held in memory; its file is created when it [`LogFile::spill`]s.
    pub(super) fn held(path: PathBuf) -> LogFile {
        LogFile {
            path,
            file: None,
            failed: false,
            held: Some(Vec::new()),
        }
    }

    /// Give a held log its file, with what it held so far (an empty file when nothing).
    fn spill(&mut self) {
        use std::io::Write;
        if let Some(bytes) = self.held.take()
            && let Some(file) = self.file()
        {
            let _ = file.write_all(&bytes);
        }
    }

    /// A log created on first use. A file already at `path` (left by an earlier run that
    /// used the same attempt number) is removed now: it must not pass for this attempt's.
    pub(super) fn lazy(path: PathBuf) -> LogFile {
        let _ = std::fs::remove_file(&path);
        LogFile {
            path,
            file: None,
            failed: false,
            held: None,
        }
    }

    /// [`LogFile::lazy`] where no file can be at `path` yet (its folder is new): nothing to
    /// remove.
    pub(super) fn new_lazy(path: PathBuf) -> LogFile {
        LogFile {
            path,
            file: None,
            failed: false,
            held: None,
        }
    }

    /// The open file, created (mode 0600) on first use; `None` when it cannot be created.
    fn file(&mut self) -> Option<&mut std::fs::File> {
        if self.file.is_none() && !self.failed {
            match crate::fsutil::create_private_file(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(e) => {
                    tracing::warn!(
                        "cannot create {}: {e}; its output is dropped",
                        self.path.display()
                    );
                    self.failed = true;
                }
            }
        }
        self.file.as_mut()
    }
}

fn finish_ring(
    file: &mut std::fs::File,
    ring: &mut std::fs::File,
    ring_written: u64,
    tail_cap: u64,
) -> std::io::Result<()> {
    use std::io::Write;
    if ring_written <= tail_cap {
        return copy_range(ring, file, 0, ring_written);
    }
    let marker = format!(
        "\n[runner: {} bytes cut here; the log keeps its first and last bytes]\n",
        ring_written - tail_cap
    );
    file.write_all(marker.as_bytes())?;
    let pos = ring_written % tail_cap;
    copy_range(ring, file, pos, tail_cap - pos)?;
    copy_range(ring, file, 0, pos)
}

fn copy_range(
    from: &mut std::fs::File,
    to: &mut std::fs::File,
    start: u64,
    len: u64,
) -> std::io::Result<()> {
    use std::io::{Read, Seek, Write};
    let mut buf = vec![0u8; 64 * 1024];
    from.seek(std::io::SeekFrom::Start(start))?;
    let mut left = len;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        from.read_exact(&mut buf[..want])?;
        to.write_all(&buf[..want])?;
        left -= want as u64;
    }
    Ok(())
}

/// The ring file of a capped log: a new private file, never one opened through a link
/// ([`crate::fsutil::create_private_file`]), read back when the log is closed.
fn open_ring(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .mode(0o600)
        .open(path)
}

fn ring_path(log: &Path) -> PathBuf {
    let mut name = log
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tail");
    log.with_file_name(name)
}
