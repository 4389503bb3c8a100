//! A teammate's folder in the team workspace (DESIGN §6b), in one place:
//!
//! ```text
//! teammates/<name>/                 the runner's records of the teammate
//!   prompt.md                       the last attempt's prompt (handed to the agent on stdin
//!                                   from memory; written once the attempt has run a second,
//!                                   or ends without completing, or first when the argv
//!                                   names it with `{prompt_file}`)
//!   attempt-N.stdout.log, …         each attempt's logs (the runner drains the agent's pipes;
//!                                   a quick agent's stdout is held in memory until then too)
//!   attempt-N.report.json           an earlier attempt's report, moved aside
//!   <name>.env-file                 `[env] files` the runner writes for the CLI
//!   work/                           the only part the teammate may write (under the
//!                                   sandbox), and its private TMPDIR
//!     report.json                   its report ($RUNNER_REPORT)
//!     working-context.md            its checkpoint
//!     progress.jsonl                what it says while it works ($RUNNER_PROGRESS)
//!     state/<name>/                 per-teammate CLI state folders (`[env] state`)
//! ```
//!
//! Under `--sandbox landlock` a teammate can therefore not rewrite its own prompt or logs:
//! what `runner show` and `runner logs` print is what the runner sent and read. Whatever the
//! runner reads from `work/` is opened without following links, as a plain file
//! ([`crate::fsutil::open_plain_file`]).

use std::path::{Path, PathBuf};

/// The folder, under the workspace, that holds one folder per teammate.
pub(crate) const TEAMMATES: &str = "teammates";

/// The teammate-writable part of a teammate folder.
pub(crate) const WORK: &str = "work";

/// The report's file name in `work/`.
pub(crate) const REPORT: &str = "report.json";

/// The prompt's file name in the teammate folder.
pub(crate) const PROMPT: &str = "prompt.md";

/// The paths of one teammate's folder (nothing is created or read here).
#[derive(Debug, Clone)]
pub(crate) struct TeammateFolder {
    dir: PathBuf,
}

impl TeammateFolder {
    /// The folder of teammate `name` in team workspace `workspace`.
    pub(crate) fn new(workspace: &Path, name: &str) -> TeammateFolder {
        TeammateFolder {
            dir: workspace.join(TEAMMATES).join(name),
        }
    }

    /// `teammates/<name>/`: the runner's records (prompt, logs).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// `teammates/<name>/work/`: what the teammate may write (`RUNNER_TEAMMATE_DIR`).
    pub(crate) fn work(&self) -> PathBuf {
        self.dir.join(WORK)
    }

    /// `work/report.json` (`RUNNER_REPORT`).
    pub(crate) fn report(&self) -> PathBuf {
        self.work().join(REPORT)
    }

    /// `work/working-context.md`.
    pub(crate) fn working_context(&self) -> PathBuf {
        self.work().join(crate::working_context::FILE_NAME)
    }

    /// `work/progress.jsonl` (`RUNNER_PROGRESS`, [`crate::progress`]).
    pub(crate) fn progress(&self) -> PathBuf {
        self.work().join(crate::progress::FILE_NAME)
    }

    /// `prompt.md`, in the runner's part.
    pub(crate) fn prompt(&self) -> PathBuf {
        self.dir.join(PROMPT)
    }

    /// `attempt-<attempt>.started` in the runner's part: the marker written as attempt
    /// `attempt` starts ([`STARTED`]).
    pub(crate) fn started(&self, attempt: u32) -> PathBuf {
        self.dir.join(format!("attempt-{attempt}.{STARTED}"))
    }

    /// `attempt-<attempt>.<name>` in the runner's part, e.g. `attempt-2.stdout.log` (flat,
    /// so an attempt costs no folder of its own).
    #[cfg(test)]
    pub(crate) fn attempt_file(&self, attempt: u32, name: &str) -> PathBuf {
        self.dir.join(format!("attempt-{attempt}.{name}"))
    }
}

/// The name ending of the file the runner writes in a teammate folder's runner part as an
/// attempt starts, before any process (`attempt-N.started`, holding the item's id): a
/// number a run killed before its journal heard of the attempt still took.
pub(crate) const STARTED: &str = "started";

/// Every attempt a `attempt-N.started` file in `workspace`'s teammate folders says was
/// started, as `(item id, N)`, ordered by id then N (read without following links; a file
/// that is not plain, or over 4 KiB, is passed over). The team counts each the journal
/// missed ([`crate::run::record::team::Team::open`]), so a number is never used twice (issue
/// 50: a process-tree kill left no process to find).
pub(crate) fn started_attempts(workspace: &Path) -> Vec<(String, u32)> {
    use std::io::Read;
    let suffix = format!(".{STARTED}");
    let mut out = Vec::new();
    let teammates = std::fs::read_dir(workspace.join("teammates"));
    for folder in teammates.into_iter().flatten().flatten() {
        for file in std::fs::read_dir(folder.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = file.file_name();
            let Some(n) = name
                .to_str()
                .and_then(|n| n.strip_prefix("attempt-")?.strip_suffix(suffix.as_str()))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(Some(f)) = crate::fsutil::open_plain_file(&file.path()) else {
                continue;
            };
            let mut id = String::new();
            if f.take(4096).read_to_string(&mut id).is_ok() && !id.is_empty() {
                out.push((id, n));
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_sit_beside_the_teammates_writable_part_never_inside_it() {
        let f = TeammateFolder::new(Path::new("/w/out.runner"), "1-a");
        assert_eq!(f.dir(), Path::new("/w/out.runner/teammates/1-a"));
        assert_eq!(f.work(), Path::new("/w/out.runner/teammates/1-a/work"));
        assert!(f.report().starts_with(f.work()));
        assert!(f.working_context().starts_with(f.work()));
        for record in [f.prompt(), f.attempt_file(2, "stdout.log")] {
            assert!(!record.starts_with(f.work()), "{}", record.display());
            assert_eq!(record.parent(), Some(f.dir()));
        }
    }
}
