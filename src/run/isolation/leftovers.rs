//! What a team left in its git repository (DESIGN §9) — the worktrees under its workspace
//! and its branches `runner/<team>/*` — found in the repository the workspace records, and
//! removed for `runner clean` the way `git branch -d` deletes: a branch whose commits are
//! all in the branch the run started from goes, one holding commits of its own that were
//! never merged is kept unless forced (the agents' work is on it). Worktree folders go
//! either way: the runner commits what an attempt left in its worktree when it ends
//! ([`crate::run::isolation::worktree::Isolation::commit_all`]), so the branch holds the work.

use std::path::{Path, PathBuf};

use crate::fsutil::real_path;
use crate::run::isolation::worktree::{IsolationRecord, branch_prefix, git_sync};

/// A team's worktrees and branches in one repository.
#[derive(Debug)]
pub(crate) struct Leftovers {
    /// The repository's main working tree.
    pub repo: PathBuf,
    /// Worktrees registered in `repo` that lie under the workspace (as git lists them).
    pub worktrees: Vec<PathBuf>,
    /// Those of `worktrees` holding edits no commit has (someone inspected a failed item
    /// there and changed it): each with its `git status --porcelain` lines (`M a.txt`, `??
    /// new.txt`). Removed only when forced (issue 50).
    pub dirty: Vec<(PathBuf, Vec<String>)>,
    /// Items awaiting review (`--merge=review`), by teammate name, in item order: their
    /// branches hold work no one has decided on, and only the team's journal says what
    /// waits — so the team is kept unless forced.
    pub awaiting: Vec<String>,
    /// Branches to delete: merged into `target`, or with no commits of their own.
    pub merged: Vec<String>,
    /// Branches with commits not merged into `target`: kept unless forced.
    pub unmerged: Vec<String>,
    /// What `merged` is measured against: the branch the run started from, else its base
    /// commit, else `HEAD`.
    pub target: String,
}

/// The repository of the team in `workspace`: the one its `team.json` records (a run with
/// `--isolate worktree` records it), else the one holding the folder the run was started
/// in, else the one holding the workspace.
fn repo_of(
    workspace: &Path,
    recorded: Option<&IsolationRecord>,
    cwd: Option<&str>,
) -> Option<PathBuf> {
    recorded
        .and_then(|r| repo_at(&r.repo))
        .or_else(|| {
            cwd.filter(|c| !c.is_empty())
                .and_then(|c| repo_at(Path::new(c)))
        })
        .or_else(|| repo_at(workspace))
}

/// The team `team`'s worktrees and branches, for its workspace `workspace`; none
/// when no repository is found.
pub(crate) fn find(workspace: &Path, team: &str) -> Option<Leftovers> {
    let workspace = &real_path(workspace);
    let snapshot = std::fs::read_to_string(workspace.join("team.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let recorded = snapshot
        .as_ref()
        .and_then(|v| serde_json::from_value::<IsolationRecord>(v["isolation"].clone()).ok());
    let cwd = snapshot.as_ref().and_then(|v| v["cwd"].as_str());
    let repo = repo_of(workspace, recorded.as_ref(), cwd)?;
    let exists = |r: &str| git_sync(&repo, &["rev-parse", "--verify", "--quiet", r], &[]).ok;
    let target = recorded
        .as_ref()
        .and_then(|r| r.base_branch.clone())
        .filter(|b| exists(&format!("refs/heads/{b}")))
        .or_else(|| recorded.as_ref().map(|r| r.base.clone()))
        .unwrap_or_else(|| "HEAD".into());
    let base = recorded.map(|r| r.base);
    let (merged, unmerged) = split(&repo, branches_of(&repo, team), &target, base.as_deref());
    let worktrees = worktrees_under(&repo, workspace);
    let dirty = worktrees
        .iter()
        // The merge queue's worktree holds no one's work: a merge a kill cut short, at most.
        .filter(|w| !w.ends_with(super::queue::QUEUE_DIR))
        // Nor a resolver's (`--on-conflict`): the item's work is on its branch, which is
        // kept; a resumed run makes the merge again.
        .filter(|w| !super::conflict::is_resolver_worktree(w))
        .filter_map(|w| {
            let changes = uncommitted(w);
            (!changes.is_empty()).then(|| (w.clone(), changes))
        })
        .collect();
    let awaiting = super::review::awaiting(workspace)
        .unwrap_or_default()
        .into_iter()
        .map(|o| o.teammate)
        .collect();
    Some(Leftovers {
        worktrees,
        dirty,
        awaiting,
        repo,
        merged,
        unmerged,
        target,
    })
}

/// The branches `runner/<team>/*` that team `team` left in `repo` after its workspace was
/// removed (`runner clean` keeps unmerged ones), measured against the branch checked out in
/// `repo` (else `HEAD`): no workspace records what the run started from any more. `None`
/// when `repo` holds no such branch.
pub(crate) fn orphaned(repo: &Path, team: &str) -> Option<Leftovers> {
    let branches = branches_of(repo, team);
    if branches.is_empty() {
        return None;
    }
    let head = git_sync(repo, &["symbolic-ref", "--quiet", "--short", "HEAD"], &[]);
    let target = match head.ok {
        true => head.stdout.trim().to_owned(),
        false => "HEAD".to_owned(),
    };
    let (merged, unmerged) = split(repo, branches, &target, None);
    Some(Leftovers {
        repo: repo.to_owned(),
        worktrees: Vec::new(),
        dirty: Vec::new(),
        awaiting: Vec::new(),
        merged,
        unmerged,
        target,
    })
}

/// The teams with branches `runner/<team>/*` in `repo` other than those of `known` (the
/// teams whose workspaces were found), each named by its branches' team component, sorted.
pub(crate) fn orphan_teams(repo: &Path, known: &[String]) -> Vec<String> {
    let prefixes: Vec<String> = known.iter().map(|k| branch_prefix(k)).collect();
    let mut out: Vec<String> = for_each_ref(repo, "refs/heads/runner/")
        .into_iter()
        .filter(|b| !prefixes.iter().any(|p| b.starts_with(p)))
        .filter_map(|b| Some(b.strip_prefix("runner/")?.split_once('/')?.0.to_owned()))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `branches` split into those whose commits are all in `target` (or in `base`, the run's
/// base commit) and those holding commits of their own.
fn split(
    repo: &Path,
    branches: Vec<String>,
    target: &str,
    base: Option<&str>,
) -> (Vec<String>, Vec<String>) {
    branches.into_iter().partition(|b| {
        let tip = format!("refs/heads/{b}");
        let in_ = |to: &str| git_sync(repo, &["merge-base", "--is-ancestor", &tip, to], &[]).ok;
        in_(target) || base.is_some_and(in_)
    })
}

impl Leftovers {
    /// Whether removing these (and the team's workspace) leaves nothing of a person's: no
    /// worktree holds uncommitted edits and no item awaits review, or `force` says to drop
    /// them.
    pub(crate) fn removable(&self, force: bool) -> bool {
        force || (self.dirty.is_empty() && self.awaiting.is_empty())
    }

    /// Remove the worktrees (`git worktree remove --force`, then `prune` for folders already
    /// gone) and delete the merged branches — the unmerged ones too with `force`. A worktree
    /// with uncommitted edits ([`Leftovers::dirty`]) goes only with `force`. Returns a
    /// warning line for each step git refused.
    pub(crate) fn remove(&self, force: bool) -> Vec<String> {
        let mut warnings = Vec::new();
        let kept = |w: &PathBuf| !force && self.dirty.iter().any(|(d, _)| d == w);
        for w in self.worktrees.iter().filter(|w| !kept(w)) {
            let out = git_sync(
                &self.repo,
                &["worktree", "remove", "--force", &w.to_string_lossy()],
                &[],
            );
            if !out.ok && w.exists() {
                warnings.push(format!(
                    "cannot remove worktree {}: {}",
                    w.display(),
                    out.stderr.trim()
                ));
            }
        }
        let _ = git_sync(&self.repo, &["worktree", "prune"], &[]);
        let doomed = self
            .merged
            .iter()
            .chain(self.unmerged.iter().filter(|_| force));
        for b in doomed {
            let out = git_sync(&self.repo, &["branch", "-D", b], &[]);
            if !out.ok {
                warnings.push(format!("cannot delete branch {b}: {}", out.stderr.trim()));
            }
        }
        warnings
    }
}

/// The `git status --porcelain` lines of worktree `w` (edits and untracked files no commit
/// has; ignored files left out); none when git cannot tell (a folder already gone).
fn uncommitted(w: &Path) -> Vec<String> {
    let out = git_sync(w, &["status", "--porcelain", "--untracked-files=all"], &[]);
    match out.ok {
        true => out
            .stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect(),
        false => Vec::new(),
    }
}

/// Worktrees registered in `repo` under `workspace` (compared by real path).
fn worktrees_under(repo: &Path, workspace: &Path) -> Vec<PathBuf> {
    registered(repo)
        .into_iter()
        .filter(|p| real_path(p).starts_with(workspace))
        .collect()
}

/// The worktrees `git worktree list` names in `repo` (the main working tree first).
fn registered(repo: &Path) -> Vec<PathBuf> {
    let out = git_sync(repo, &["worktree", "list", "--porcelain"], &[]);
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(PathBuf::from)
        .collect()
}

/// The branches of team `team` in `repo` (`runner/<team>/*`).
fn branches_of(repo: &Path, team: &str) -> Vec<String> {
    for_each_ref(repo, &format!("refs/heads/{}", branch_prefix(team)))
}

/// The branches under the ref prefix `prefix` in `repo`, by short name.
fn for_each_ref(repo: &Path, prefix: &str) -> Vec<String> {
    let out = git_sync(
        repo,
        &["for-each-ref", "--format=%(refname:short)", prefix],
        &[],
    );
    out.stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The top of the git working tree holding `dir` (or its nearest existing folder), if any.
pub(crate) fn repo_at(dir: &Path) -> Option<PathBuf> {
    let start = dir.ancestors().find(|p| p.is_dir())?;
    let out = git_sync(start, &["rev-parse", "--show-toplevel"], &[]);
    out.ok.then(|| PathBuf::from(out.stdout.trim()))
}

/// Team workspaces that hold a worktree registered in `repo` (`<workspace>/worktrees/<name>`
/// beside the workspace's `team.json` or `journal.jsonl`), wherever they lie: the repository
/// records a team whose output, and so workspace, is outside it. Real paths, sorted.
pub(crate) fn workspaces_in(repo: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = registered(repo)
        .iter()
        .filter_map(|w| {
            let parent = w.parent()?;
            let ws = parent.parent()?;
            let is_team = parent.file_name().is_some_and(|n| n == "worktrees")
                && (ws.join("team.json").is_file() || ws.join("journal.jsonl").is_file());
            is_team.then(|| real_path(ws))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}
