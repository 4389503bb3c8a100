//! What the runner's own `git` steps (worktree isolation, DESIGN §9) can fail with, as a value
//! that the success rule ([`crate::report::judge_merge`]) and the run layer share.

/// Why a git step of isolation did not succeed: git's own first error line (or the rule
/// that refused, naming what to do), or the files a merge stopped on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GitError {
    /// A git command failed, or a precondition does not hold (not a repository, no commit,
    /// a stale branch with commits of its own).
    #[error("{0}")]
    Failed(String),
    /// `git merge` stopped on conflicts in these files (the merge was aborted).
    #[error("merge conflict in {}", .0.join(", "))]
    Conflict(Vec<String>),
    /// `git merge` stopped on conflicts in these files and no resolver's result was taken
    /// (`--on-conflict`): why the last one was rejected. The target is unchanged.
    #[error("merge conflict in {}; not resolved: {}", .0.join(", "), .1)]
    Unresolved(Vec<String>, String),
    /// The merge went through but the merged tree failed `--verify-merged` (the reason, as
    /// the check's failure says it); the merge was undone.
    #[error("the merged tree failed --verify-merged: {0}")]
    Unverified(String),
}
