//! The merge queue (DESIGN §9, issue 57): completed branches land on the branch the run
//! started from one at a time, each through the queue's own worktree — the merge is made
//! there, checked there (`--verify-merged`), and only then is the target branch moved to it
//! (`git merge --ff-only` in the main working tree). A merge that conflicts or fails its
//! check never reaches the target: the target only moves forward by merges that passed, and
//! a kill at any step leaves it at the last merge that did.
//!
//! The step is plain — "merge this branch" — so whoever chooses the branch (an item's only
//! one, or the winner of several candidates) hands it to [`MergeQueue::merge`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use super::worktree::{Isolation, first_line, git_sync};
use crate::git::GitError;

/// The queue's worktree, under the team workspace's `worktrees/` beside the teammates' (no
/// teammate name starts with a dot).
pub(crate) const QUEUE_DIR: &str = ".merge-queue";

/// An open merge queue: its worktree exists, detached at the target branch.
pub(crate) struct MergeQueue<'a> {
    iso: &'a Isolation,
    /// The branch merged into (checked out in the main working tree).
    target: String,
    /// The queue's worktree.
    dir: PathBuf,
    /// The check of each merged tree (argv), if any.
    verify: Option<Vec<String>>,
    /// Its time limit.
    timeout: Duration,
    /// Where its output goes (appended, one header per run of it).
    log: PathBuf,
}

impl<'a> MergeQueue<'a> {
    /// Open the queue of `iso` in the team workspace `workspace`: its worktree made anew
    /// (one a killed run left is removed first), detached at the target branch. `verify`
    /// runs on each merged tree with the time limit `timeout`; its output goes to
    /// `<workspace>/merge-queue.log`.
    ///
    /// Errors: HEAD was detached when the run started (no target), or git cannot make the
    /// worktree.
    pub(crate) fn open(
        iso: &'a Isolation,
        workspace: &Path,
        verify: Option<Vec<String>>,
        timeout: Duration,
    ) -> Result<MergeQueue<'a>, GitError> {
        let Some(target) = iso.base_branch.clone() else {
            return Err(GitError::Failed(
                "HEAD was detached when the run started: there is no branch to merge into".into(),
            ));
        };
        let dir = workspace.join("worktrees").join(QUEUE_DIR);
        remove_worktree(&iso.repo, &dir);
        let add = git_sync(
            &iso.repo,
            &[
                "worktree",
                "add",
                "--detach",
                &dir.to_string_lossy(),
                &format!("refs/heads/{target}"),
            ],
            &[],
        );
        if !add.ok {
            return Err(GitError::Failed(format!(
                "cannot make the merge queue's worktree {}: {}",
                dir.display(),
                first_line(&add.stderr)
            )));
        }
        Ok(MergeQueue {
            iso,
            target,
            dir,
            verify,
            timeout,
            log: workspace.join("merge-queue.log"),
        })
    }

    /// The repository's main working tree.
    pub(crate) fn repo(&self) -> &Path {
        &self.iso.repo
    }

    /// The branch merged into.
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    /// The log to name for an item the queue judged `kind`: its own log, else, for a merged
    /// tree that failed its check ([`FailureKind::MergeFailed`]), the queue's log that holds
    /// the check's output.
    pub(crate) fn log_for(&self, kind: Option<crate::failure::FailureKind>, own: String) -> String {
        match kind {
            Some(crate::failure::FailureKind::MergeFailed) => self.log.display().to_string(),
            _ => own,
        }
    }

    /// Whether `commit` (an item's branch head) is already in the target branch: merged by
    /// an earlier run that was killed before it recorded so, or a branch with no commits of
    /// its own. Merging it again would add nothing.
    pub(crate) fn holds(&self, commit: &str) -> bool {
        git_sync(
            &self.iso.repo,
            &[
                "merge-base",
                "--is-ancestor",
                commit,
                &format!("refs/heads/{}", self.target),
            ],
            &[],
        )
        .ok
    }

    /// The merge commit on the target that brought `commit` in as its second parent (the
    /// queue merges `--no-ff`): how an item merged by a run killed before it recorded so is
    /// told from a branch with no commit of its own, whose head the target held already.
    /// `None` when no merge on the target has `commit` as its merged parent.
    pub(crate) fn landing_merge(&self, commit: &str) -> Option<String> {
        let out = git_sync(
            &self.iso.repo,
            &[
                "rev-list",
                "--merges",
                "--parents",
                "--ancestry-path",
                &format!("{commit}..refs/heads/{}", self.target),
            ],
            &[],
        );
        if !out.ok {
            return None;
        }
        // Newest first: the oldest match is the merge that first brought it in.
        out.stdout.lines().rev().find_map(|line| {
            let mut hashes = line.split_whitespace();
            let merge = hashes.next()?;
            let _first = hashes.next()?;
            hashes.any(|p| p == commit).then(|| merge.to_owned())
        })
    }

    /// Merge `branch` (`--no-ff`, message `runner: merge <title>`) onto the target in the
    /// queue's worktree, run the check on the merged tree, then move the target branch (and
    /// the main working tree) forward to the merge. Returns the merge commit.
    ///
    /// Errors: [`GitError::Conflict`] (the merge is aborted), [`GitError::Unverified`] (the
    /// check failed; the merge is dropped), [`GitError::Failed`] (git refused, or the main
    /// working tree no longer has the target checked out). The target is unchanged by any.
    pub(crate) fn merge(&self, branch: &str, title: &str) -> Result<String, GitError> {
        let target_ref = format!("refs/heads/{}", self.target);
        // Start from the target as it is now, with nothing of the last merge or check left
        // but ignored files (a build's cache).
        for args in [
            &["merge", "--abort"][..],
            &["reset", "-q", "--hard", &target_ref],
            &["clean", "-q", "-fd"],
        ] {
            let _ = git_sync(&self.dir, args, &[]);
        }
        let msg = format!("runner: merge {title}");
        let out = git_sync(
            &self.dir,
            &["merge", "--no-ff", "--no-edit", "-m", &msg, branch],
            &self.iso.identity,
        );
        if !out.ok {
            let files = conflicted(&self.dir);
            let _ = git_sync(&self.dir, &["merge", "--abort"], &[]);
            return Err(match files.is_empty() {
                true => GitError::Failed(format!(
                    "merge failed: {}",
                    first_line(&format!("{}{}", out.stdout, out.stderr))
                )),
                false => GitError::Conflict(files),
            });
        }
        let commit = git_sync(&self.dir, &["rev-parse", "HEAD"], &[])
            .stdout
            .trim()
            .to_owned();
        if let Some(argv) = &self.verify
            && let Err(why) = self.check(argv, branch)
        {
            let _ = git_sync(&self.dir, &["reset", "-q", "--hard", &target_ref], &[]);
            return Err(GitError::Unverified(why));
        }
        crate::fault::point("merge_checked");
        self.advance(&commit)?;
        crate::fault::point("merge_landed");
        Ok(commit)
    }

    /// The commit the target branch points at now.
    pub(crate) fn tip(&self) -> String {
        git_sync(
            &self.iso.repo,
            &["rev-parse", &format!("refs/heads/{}", self.target)],
            &[],
        )
        .stdout
        .trim()
        .to_owned()
    }

    /// Make a fresh worktree at `dir` (one a killed run left is removed first), detached at
    /// the target, holding the merge of `branch` in progress (`--no-ff`, the message the
    /// queue gives its merges): conflict markers in the files, `MERGE_HEAD` set. Returns the
    /// files that conflict.
    ///
    /// Errors: git cannot make the worktree, or the merge went through or failed without a
    /// conflict (nothing for a resolver to do; the worktree is removed).
    pub(crate) fn begin_conflicted(
        &self,
        branch: &str,
        title: &str,
        dir: &Path,
    ) -> Result<Vec<String>, GitError> {
        remove_worktree(&self.iso.repo, dir);
        let add = git_sync(
            &self.iso.repo,
            &[
                "worktree",
                "add",
                "--detach",
                &dir.to_string_lossy(),
                &format!("refs/heads/{}", self.target),
            ],
            &[],
        );
        if !add.ok {
            return Err(GitError::Failed(format!(
                "cannot make the resolver's worktree {}: {}",
                dir.display(),
                first_line(&add.stderr)
            )));
        }
        let msg = format!("runner: merge {title}");
        let _ = git_sync(
            dir,
            &["merge", "--no-ff", "--no-edit", "-m", &msg, branch],
            &self.iso.identity,
        );
        let files = conflicted(dir);
        if files.is_empty() {
            remove_worktree(&self.iso.repo, dir);
            return Err(GitError::Failed(format!(
                "merging {branch} onto {} no longer conflicts",
                self.target
            )));
        }
        Ok(files)
    }

    /// The resolver's result in `dir` (made by [`MergeQueue::begin_conflicted`] for
    /// `branch`, whose merge conflicted in `files`) as the merge commit: no conflict marker
    /// left in any file it changed or that conflicted, no unmerged path; the merge committed
    /// by the runner when the resolver only edited files (everything in the worktree is
    /// added, the queue's message kept); and the commit a merge whose parents are the
    /// target's tip and `branch`'s head, in that order. Returns the commit.
    ///
    /// Errors: why the result cannot be taken, one line.
    pub(crate) fn conclude(
        &self,
        dir: &Path,
        branch: &str,
        files: &[String],
    ) -> Result<String, String> {
        let mut looked: Vec<String> = files.to_vec();
        for args in [
            &["diff", "--name-only", "HEAD"][..],
            &["ls-files", "--others", "--exclude-standard"],
        ] {
            looked.extend(git_sync(dir, args, &[]).stdout.lines().map(str::to_owned));
        }
        looked.sort();
        looked.dedup();
        let marked: Vec<&String> = looked
            .iter()
            .filter(|f| has_markers(&dir.join(f)))
            .collect();
        if !marked.is_empty() {
            return Err(format!(
                "conflict markers left in {}",
                marked
                    .iter()
                    .map(|f| f.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let merging = git_sync(dir, &["rev-parse", "-q", "--verify", "MERGE_HEAD"], &[]).ok;
        if merging {
            let add = git_sync(dir, &["add", "-A"], &[]);
            let commit = git_sync(
                dir,
                &["commit", "--no-verify", "--no-edit", "-q"],
                &self.iso.identity,
            );
            if !add.ok || !commit.ok {
                return Err(format!(
                    "cannot commit the resolved merge: {}",
                    first_line(&format!("{}{}", add.stderr, commit.stderr))
                ));
            }
        } else if !git_sync(dir, &["status", "--porcelain"], &[])
            .stdout
            .trim()
            .is_empty()
        {
            return Err("the resolver committed, then left changes it did not commit".into());
        }
        let head = git_sync(dir, &["rev-list", "--parents", "-n", "1", "HEAD"], &[]);
        let parents: Vec<&str> = head.stdout.split_whitespace().collect();
        let want_first = self.tip();
        let want_second = git_sync(&self.iso.repo, &["rev-parse", branch], &[]);
        match parents.as_slice() {
            [commit, first, second]
                if *first == want_first && *second == want_second.stdout.trim() =>
            {
                Ok((*commit).to_owned())
            }
            _ => Err(format!(
                "the result is not the merge of {branch} onto {} (the resolver moved HEAD or aborted the merge)",
                self.target
            )),
        }
    }

    /// Check the merge `commit` a resolver made (its first parent the target's tip) with
    /// `--verify-merged` in the queue's worktree, as [`MergeQueue::merge`] checks its own.
    ///
    /// Errors: [`GitError::Unverified`] (the check failed); the target is unchanged.
    pub(crate) fn check_merge(&self, commit: &str, branch: &str) -> Result<(), GitError> {
        let target_ref = format!("refs/heads/{}", self.target);
        for args in [
            &["merge", "--abort"][..],
            &["reset", "-q", "--hard", commit],
            &["clean", "-q", "-fd"],
        ] {
            let _ = git_sync(&self.dir, args, &[]);
        }
        if let Some(argv) = &self.verify
            && let Err(why) = self.check(argv, branch)
        {
            let _ = git_sync(&self.dir, &["reset", "-q", "--hard", &target_ref], &[]);
            return Err(GitError::Unverified(why));
        }
        Ok(())
    }

    /// Move the target branch forward to `commit` through the main working tree, which must
    /// still have it checked out (its files follow).
    ///
    /// Errors: [`GitError::Failed`]: it no longer has the target checked out, or git refused.
    pub(crate) fn advance(&self, commit: &str) -> Result<(), GitError> {
        let head = git_sync(
            &self.iso.repo,
            &["symbolic-ref", "--quiet", "--short", "HEAD"],
            &[],
        );
        if !head.ok || head.stdout.trim() != self.target {
            return Err(GitError::Failed(format!(
                "the main working tree {} no longer has {} checked out; check it out again and run again",
                self.iso.repo.display(),
                self.target
            )));
        }
        let ff = git_sync(
            &self.iso.repo,
            &["merge", "--ff-only", "-q", commit],
            &self.iso.identity,
        );
        match ff.ok {
            true => Ok(()),
            false => Err(GitError::Failed(format!(
                "cannot move {} forward to the merge in {}: {}",
                self.target,
                self.iso.repo.display(),
                ff_refusal(&ff.stderr)
            ))),
        }
    }

    /// Run the check `argv` (no shell) in the queue's worktree, its output appended to the
    /// queue's log. A program named by a relative path is the merged tree's.
    ///
    /// Errors: why it did not pass — its exit code and last output line, a signal, the time
    /// limit, or that it could not start.
    fn check(&self, argv: &[String], branch: &str) -> Result<(), String> {
        let shown = argv.join(" ");
        let Some(program) = argv.first() else {
            return Err("the --verify-merged command is empty".into());
        };
        let program = match program.contains('/') && Path::new(program).is_relative() {
            true => self.dir.join(program),
            false => PathBuf::from(program),
        };
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("cannot write {}: {e}", self.log.display()))?;
        let start = std::fs::metadata(&self.log).map_or(0, |m| m.len());
        let _ = writeln!(log, "== `{shown}` on {} merged with {branch}", self.target);
        let err = log
            .try_clone()
            .map_err(|e| format!("cannot write {}: {e}", self.log.display()))?;
        let mut child = std::os::unix::process::CommandExt::process_group(
            Command::new(&program)
                .args(&argv[1..])
                .current_dir(&self.dir)
                .stdin(Stdio::null())
                .stdout(Stdio::from(log))
                .stderr(Stdio::from(err)),
            0,
        )
        .spawn()
        .map_err(|e| format!("`{shown}` cannot start: {e}"))?;
        CHECK_GROUP.store(i32::try_from(child.id()).unwrap_or(0), Ordering::SeqCst);
        let status = self.wait_check(&mut child, &shown);
        CHECK_GROUP.store(0, Ordering::SeqCst);
        let status = status?;
        if status.success() {
            return Ok(());
        }
        let tail = last_line_after(&self.log, start)
            .map(|l| format!(": {l}"))
            .unwrap_or_default();
        Err(match status.code() {
            Some(code) => format!("`{shown}` exited with code {code}{tail}"),
            None => format!("`{shown}` was killed by a signal{tail}"),
        })
    }

    /// Wait for the check `child` (shown as `shown`) within the time limit; past it, end its
    /// whole group.
    ///
    /// Errors: it timed out.
    fn wait_check(
        &self,
        child: &mut std::process::Child,
        shown: &str,
    ) -> Result<std::process::ExitStatus, String> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
                Ok(None) | Err(_) => {
                    let pgid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
                    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
                    let _ = child.wait();
                    return Err(format!(
                        "`{shown}` timed out after {}",
                        humantime::format_duration(self.timeout)
                    ));
                }
            }
        }
    }

    /// Remove the queue's worktree.
    pub(crate) fn close(self) {
        remove_worktree(&self.iso.repo, &self.dir);
    }
}

/// The paths of the merge in progress in `dir` that git could not merge.
fn conflicted(dir: &Path) -> Vec<String> {
    git_sync(dir, &["diff", "--name-only", "--diff-filter=U"], &[])
        .stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether the file at `path` holds a line git writes around a conflict (`<<<<<<< `,
/// `=======`, `>>>>>>> `, `||||||| `). A file that is gone or not text has none.
fn has_markers(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    text.lines().any(|l| {
        l.starts_with("<<<<<<< ")
            || l.starts_with(">>>>>>> ")
            || l.starts_with("||||||| ")
            || l == "======="
            || l == "<<<<<<<"
            || l == ">>>>>>>"
    })
}

/// How often the check is looked at while it runs.
const POLL: Duration = Duration::from_millis(20);

/// Remove the worktree at `dir` (registered or not) and prune the registration.
pub(crate) fn remove_worktree(repo: &Path, dir: &Path) {
    let _ = git_sync(
        repo,
        &["worktree", "remove", "--force", &dir.to_string_lossy()],
        &[],
    );
    if dir.exists() {
        let _ = crate::fsutil::remove_tree(dir);
    }
    let _ = git_sync(repo, &["worktree", "prune"], &[]);
}

/// The last non-empty line of `log` written after byte `start`, cut to 200 characters.
fn last_line_after(log: &Path, start: u64) -> Option<String> {
    let bytes = std::fs::read(log).ok()?;
    let from = usize::try_from(start).unwrap_or(0).min(bytes.len());
    let text = String::from_utf8_lossy(&bytes[from..]);
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("== `"))
        .map(|l| l.chars().take(200).collect())
}

/// The process group of the `--verify-merged` check running now (0: none). The check runs in
/// a group of its own (so its time limit ends all of it), which a Ctrl-C at the terminal does
/// not reach: an interrupt that ends the runner mid-queue ends it through this.
static CHECK_GROUP: AtomicI32 = AtomicI32::new(0);

/// End the `--verify-merged` check running now, if any, with all its processes (SIGKILL to
/// its group): called by an interrupt that ends the runner while the queue works, so no
/// check is left running in the queue's worktree after the runner exited.
pub(crate) fn end_running_check() {
    let group = CHECK_GROUP.swap(0, Ordering::SeqCst);
    if group > 0 {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(group),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Why `git merge --ff-only` refused, on one line: git names the files in the way on lines of
/// their own, so they are joined in (`error: Your local changes to the following files would
/// be overwritten by merge: a.txt`), then what to do about the person's own changes.
fn ff_refusal(stderr: &str) -> String {
    let said: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("hint:"))
        .take_while(|l| !l.starts_with("Please ") && *l != "Aborting")
        .collect();
    let said = match said.is_empty() {
        true => first_line(stderr),
        false => said.join(" "),
    };
    match said.contains("would be overwritten") {
        true => format!(
            "{said}; commit or stash your changes there (move untracked files away), then run again"
        ),
        false => said,
    }
}
