//! Finding and ending the agents a dead runner left behind (DESIGN §6).
//!
//! The journal records each attempt's process group. When a run resumes, attempts that
//! started and never finished may still be running (the runner was `kill -9`ed). A process
//! is ours only if it is in that group *and* its environment carries this workspace's
//! `RUNNER_WORKSPACE`, so a recycled process-group id never kills a stranger.

use std::path::Path;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Process ids in group `pgid` whose environment has `RUNNER_WORKSPACE=<workspace>`.
pub fn find(pgid: u32, workspace: &Path) -> Vec<u32> {
    let marker = format!("RUNNER_WORKSPACE={}", workspace.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the `(comm)`, which may itself contain spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let pgrp = after
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse::<u32>().ok());
        if pgrp != Some(pgid) {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// End the orphaned group `pgid` if it still holds processes of this workspace. Returns how
/// many processes were found.
pub fn reap(pgid: u32, workspace: &Path) -> usize {
    let pids = find(pgid, workspace);
    if !pids.is_empty() {
        tracing::warn!(
            "ending {} leftover process(es) of group {pgid} from an earlier run",
            pids.len()
        );
        let _ = killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
    }
    pids.len()
}
