//! Finding and ending the agents a dead runner left behind (DESIGN §6).
//!
//! The journal records each attempt's process group. When a run resumes, attempts that
//! started and never finished may still be running (the runner was `kill -9`ed), and so may
//! processes they started that left their group (`setsid`, daemons). A process is ours only
//! if its environment carries this workspace's `RUNNER_WORKSPACE`, so a recycled
//! process-group id never kills a stranger. The resuming run holds the batch's lock and has
//! started nothing yet, so every such process is the dead run's.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::run::supervise::descendants;

/// Live processes whose environment has `RUNNER_WORKSPACE=<workspace>`: those of group
/// `pgid` first, then the others (those that left their group).
pub(crate) fn find(pgid: u32, workspace: &Path) -> (Vec<u32>, Vec<u32>) {
    let mut marker = b"RUNNER_WORKSPACE=".to_vec();
    marker.extend_from_slice(workspace.as_os_str().as_bytes());
    descendants::marked(|kv| kv == marker.as_slice())
        .into_iter()
        .map(|pid| pid as u32)
        .partition(|pid| descendants::process_group(*pid as i32) == Some(pgid as i32))
}

/// End every live process of this workspace, whatever the journal says: a runner killed
/// between starting an agent and journaling its attempt leaves one no journal names. The
/// resuming run holds the batch's lock and has started nothing, so each is a dead run's.
/// Returns the attempts they belonged to, as `(item id, attempt number)` from their
/// `RUNNER_ITEM_ID` and `RUNNER_ATTEMPT`: those attempts did start, so their numbers are
/// not used again (the journal may not know them).
pub(crate) fn reap_workspace(workspace: &Path) -> Vec<(String, u32)> {
    let mut marker = b"RUNNER_WORKSPACE=".to_vec();
    marker.extend_from_slice(workspace.as_os_str().as_bytes());
    let found = descendants::marked_with_env(|kv| kv == marker.as_slice());
    if !found.is_empty() {
        tracing::warn!(
            "ending {} leftover process(es) of an earlier run the journal does not name (it was killed as they started)",
            found.len()
        );
    }
    let mut attempts = Vec::new();
    for (pid, environ) in &found {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        let var = |name: &[u8]| {
            environ
                .split(|b| *b == 0)
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix(b"="))
        };
        // A conflict's resolver (`<teammate>.resolve`) is numbered by the journal, not as
        // one of the item's attempts.
        let resolver = var(b"RUNNER_TEAMMATE").is_some_and(|t| t.ends_with(b".resolve"));
        if let (Some(id), Some(n), false) =
            (var(b"RUNNER_ITEM_ID"), var(b"RUNNER_ATTEMPT"), resolver)
            && let Some(n) = std::str::from_utf8(n).ok().and_then(|n| n.parse().ok())
        {
            attempts.push((String::from_utf8_lossy(id).into_owned(), n));
        }
    }
    attempts
}

/// End the orphaned group `pgid` if it still holds processes of this workspace, and every
/// other process of this workspace (those that left a group). Returns how many processes
/// were found.
pub(crate) fn reap(pgid: u32, workspace: &Path) -> usize {
    let (in_group, escaped) = find(pgid, workspace);
    // Group 0 is an attempt that started no process (the HTTP backend); `killpg(0)` would
    // be the runner's own group.
    if !in_group.is_empty() && pgid > 0 {
        tracing::warn!(
            "ending {} leftover process(es) of group {pgid} from an earlier run",
            in_group.len()
        );
        let _ = killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
    }
    if !escaped.is_empty() {
        tracing::warn!(
            "ending {} leftover process(es) of an earlier run that left their process group",
            escaped.len()
        );
        for pid in &escaped {
            let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
        }
    }
    in_group.len() + escaped.len()
}
