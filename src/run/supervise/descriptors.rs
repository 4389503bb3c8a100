//! Open-file descriptors (DESIGN §6): the soft limit is raised to the hard one at start,
//! `--jobs` is capped to what the limit allows, and running out of descriptors or
//! processes when an attempt starts is back-pressure, never the item's failure.

use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, setrlimit};

/// Descriptors the runner holds for one running teammate. Measured: the read ends of its
/// stdout and stderr pipes, its stdout log and the pidfd its exit is awaited on (4: a run
/// holds 18 with one teammate, 38 with six); its stderr log and the two tail files of logs
/// over half their cap (7); one more for the short-lived stdin file and exec-status pipe of
/// a spawn.
pub(crate) const PER_TEAMMATE: u64 = 8;

/// Descriptors kept free for everything else of a run: journal, lock, `team.json`
/// rewrites, the todo marks, verify and worktree commands, the async runtime, signals.
const RESERVE: u64 = 32;

/// Raise the soft open-file limit to the hard one (where the hard one is unlimited, to the
/// kernel's `fs.nr_open`). Returns the soft limit in force afterwards, `None` when it
/// cannot be read.
pub(crate) fn raise_soft_limit() -> Option<u64> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    let target = if hard == RLIM_INFINITY {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(soft)
    } else {
        hard
    };
    if target > soft {
        match setrlimit(Resource::RLIMIT_NOFILE, target, hard) {
            Ok(()) => return Some(target),
            Err(e) => tracing::debug!("cannot raise the open-file limit to {target}: {e}"),
        }
    }
    Some(soft)
}

/// Descriptors this process has open now.
fn in_use() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// How many teammates may run at once with `jobs` asked for: at most what the soft
/// open-file limit leaves room for (never below one). When that is fewer, one warning says
/// so (as GNU parallel does).
pub(crate) fn cap_jobs(jobs: usize) -> usize {
    let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return jobs;
    };
    if soft == RLIM_INFINITY {
        return jobs;
    }
    let room = soft.saturating_sub(in_use() + RESERVE) / PER_TEAMMATE;
    let allowed = usize::try_from(room).unwrap_or(usize::MAX).max(1);
    if allowed < jobs {
        tracing::warn!(
            "only enough open files to run {allowed} teammates at once (--jobs {jobs} needs about {} \
             descriptors, the limit is {soft}); running {allowed} at a time — raise the limit \
             with `ulimit -n` to run more",
            jobs as u64 * PER_TEAMMATE + RESERVE
        );
        allowed
    } else {
        jobs
    }
}

/// Whether `e` means the system is out of descriptors or processes for now (EMFILE,
/// ENFILE, EAGAIN): a start that fails so is retried once something ends.
pub(crate) fn exhausted(e: &std::io::Error) -> bool {
    use nix::errno::Errno;
    matches!(
        e.raw_os_error().map(Errno::from_raw),
        Some(Errno::EMFILE | Errno::ENFILE | Errno::EAGAIN)
    )
}
