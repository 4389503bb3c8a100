//! Isolation (DESIGN §9): each teammate works in its own `git worktree` on branch
//! `runner/<team>/<teammate>`, under the team workspace. The `git` program does all the work
//! (the runner never edits `.git`); worktree creation is serialised so parallel `git worktree
//! add` calls do not race on the repository's lock.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::sync::Mutex;

use crate::git::GitError;

/// The result of one git command: its exit status success and combined output.
#[derive(Debug)]
pub(crate) struct GitOut {
    /// Exit status 0.
    pub ok: bool,
    /// stdout.
    pub stdout: String,
    /// stderr.
    pub stderr: String,
}

fn to_git_out(out: std::io::Result<std::process::Output>) -> GitOut {
    match out {
        Ok(o) => GitOut {
            ok: o.status.success(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        },
        Err(e) => GitOut {
            ok: false,
            stdout: String::new(),
            stderr: format!("cannot run git: {e}"),
        },
    }
}

/// Put before every git command the runner runs: no repository-configured program runs
/// (issue 25: a teammate that replaced its worktree's `.git` with a repository of its own
/// named a `core.fsmonitor` command, which the runner's `git status` ran unsandboxed).
const SAFE: &[&str] = &[
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
];

/// Run `git ARGS` in `dir` (blocking; for set-up and after-run steps).
pub(crate) fn git_sync(dir: &Path, args: &[&str], env: &[(String, String)]) -> GitOut {
    to_git_out(
        std::process::Command::new("git")
            .args(SAFE)
            .args(args)
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .output(),
    )
}

async fn git(dir: &Path, args: &[&str], env: &[(String, String)]) -> GitOut {
    to_git_out(
        tokio::process::Command::new("git")
            .args(SAFE)
            .args(args)
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await,
    )
}

/// Run `git ARGS` in `dir` with the file `input` as its stdin.
async fn git_fed(dir: &Path, args: &[&str], input: &Path) -> GitOut {
    let stdin = match std::fs::File::open(input) {
        Ok(f) => f,
        Err(e) => return to_git_out(Err(e)),
    };
    to_git_out(
        tokio::process::Command::new("git")
            .args(SAFE)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::from(stdin))
            .kill_on_drop(true)
            .output()
            .await,
    )
}

/// The line of git's output that says what went wrong: its first `fatal:` or `error:` line
/// (git prints progress such as "Preparing worktree" before it), else the first line.
pub(crate) fn first_line(s: &str) -> String {
    let mut lines = s.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next().unwrap_or("");
    lines
        .find(|l| l.starts_with("fatal:") || l.starts_with("error:"))
        .unwrap_or(first)
        .to_owned()
}

/// How teammates are isolated in worktrees for one run.
#[derive(Debug)]
pub(crate) struct Isolation {
    /// The main working tree (repository root).
    pub repo: PathBuf,
    /// The team name (branch prefix `runner/<team>/`).
    pub team: String,
    /// The commit new branches start from (HEAD when the run started).
    pub base: String,
    /// The branch checked out when the run started (merge target), if any.
    pub base_branch: Option<String>,
    /// Ignored files to copy into each worktree, relative to the repository root.
    pub copy: Vec<PathBuf>,
    /// A command run once per worktree before the agent (argv).
    pub setup: Option<Vec<String>>,
    /// Committer identity for runner commits when the repository has none configured.
    pub identity: Vec<(String, String)>,
    /// `--verify-merged`: the check of each merged tree (argv), recorded for `runner accept`.
    pub verify_merged: Option<Vec<String>>,
    /// `--verify`: what every completed item passed (argv), recorded for `runner review`.
    pub verify: Option<Vec<String>>,
    /// Serialises `git worktree add`; holds the branches this run has prepared.
    prepared: Mutex<std::collections::HashSet<String>>,
    /// Held while an item of a `--serialize-overlaps` chain lands during the run
    /// ([`super::land_now`]): one merge through the queue's worktree at a time.
    pub(crate) landing: std::sync::Mutex<()>,
    /// The branches landed during the run that way, in the order they landed (for the
    /// end's `Merged into` line).
    pub(crate) landed: std::sync::Mutex<Vec<String>>,
}

/// What a team's `team.json` records of its run's isolation ([`Isolation::record`]), so that
/// `runner clean` finds the repository holding the team's worktrees and branches wherever
/// the workspace lies (an `--output` outside the repository puts it outside), and the
/// branch they merge into.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct IsolationRecord {
    /// The repository's main working tree (absolute).
    pub repo: PathBuf,
    /// The commit the run's new branches started from (HEAD when it started).
    pub base: String,
    /// The branch checked out when the run started (what a teammate's branch merges into);
    /// none when HEAD was detached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    /// `--verify-merged` (argv): what `runner accept` checks each merged tree with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_merged: Option<Vec<String>>,
    /// `--verify` (argv): what every completed item passed, as `runner review` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Vec<String>>,
}

/// A teammate's worktree.
#[derive(Debug, Clone)]
pub(crate) struct Worktree {
    /// Its folder.
    pub path: PathBuf,
    /// Its branch.
    pub branch: String,
}

impl Isolation {
    /// Prepare isolation for the repository containing `cwd`.
    ///
    /// Errors (one line): not inside a git work tree, no commit to branch from.
    pub(crate) fn new(
        cwd: &Path,
        team: &str,
        copy: Vec<PathBuf>,
        setup: Option<Vec<String>>,
    ) -> Result<Isolation, GitError> {
        let top = git_sync(cwd, &["rev-parse", "--show-toplevel"], &[]);
        if !top.ok {
            return Err(GitError::Failed(format!(
                "{} is not inside a git repository, so --isolate worktree cannot be used",
                cwd.display()
            )));
        }
        let repo = PathBuf::from(top.stdout.trim());
        let head = git_sync(&repo, &["rev-parse", "--verify", "HEAD"], &[]);
        if !head.ok {
            return Err(GitError::Failed(
                "the repository has no commit yet; commit once before using --isolate worktree"
                    .into(),
            ));
        }
        let branch = git_sync(&repo, &["symbolic-ref", "--quiet", "--short", "HEAD"], &[]);
        let has_identity = git_sync(&repo, &["config", "user.email"], &[]).ok;
        let identity = if has_identity {
            Vec::new()
        } else {
            ["GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"]
                .iter()
                .map(|k| (k.to_string(), "teammate-runner".to_string()))
                .chain(
                    ["GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"]
                        .iter()
                        .map(|k| (k.to_string(), "runner@localhost".to_string())),
                )
                .collect()
        };
        Ok(Isolation {
            repo,
            team: team.to_owned(),
            base: head.stdout.trim().to_owned(),
            base_branch: branch.ok.then(|| branch.stdout.trim().to_owned()),
            copy,
            setup,
            identity,
            verify_merged: None,
            verify: None,
            prepared: Mutex::new(std::collections::HashSet::new()),
            landing: std::sync::Mutex::new(()),
            landed: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// What `team.json` records of this isolation.
    pub(crate) fn record(&self) -> IsolationRecord {
        IsolationRecord {
            repo: self.repo.clone(),
            base: self.base.clone(),
            base_branch: self.base_branch.clone(),
            verify_merged: self.verify_merged.clone(),
            verify: self.verify.clone(),
        }
    }

    /// The branch of `teammate`: `runner/<team>/<teammate>`, each part made a valid ref
    /// component by [`ref_component`] (unique per teammate, since teammate names are).
    pub(crate) fn branch(&self, teammate: &str) -> String {
        format!("{}{}", branch_prefix(&self.team), ref_component(teammate))
    }

    /// The commit the target branch (the one checked out when the run started) is at now:
    /// where an item of a `--serialize-overlaps` chain starts, after the one before it
    /// merged. `None` when HEAD was detached or git cannot tell.
    pub(crate) fn target_head(&self) -> Option<String> {
        let target = self.base_branch.as_ref()?;
        let out = git_sync(
            &self.repo,
            &["rev-parse", "--verify", &format!("refs/heads/{target}")],
            &[],
        );
        out.ok.then(|| out.stdout.trim().to_owned())
    }

    /// Create (or reuse, on a retry or a resumed run) the worktree of `teammate` at `path`,
    /// its new branch made from `from` (a commit; the run's base when `None`).
    /// When this team never ran the item before (`new_item`: no attempt in its journal) and
    /// this run has not prepared the branch yet, an existing branch of that name is left from
    /// an earlier team: it restarts from the start point when it holds no commits of its own.
    ///
    /// Errors: what git said; such a branch that holds commits (they are never dropped).
    pub(crate) async fn prepare(
        &self,
        teammate: &str,
        path: &Path,
        new_item: bool,
        from: Option<&str>,
    ) -> Result<Worktree, GitError> {
        let start = from.unwrap_or(&self.base);
        let mut prepared = self.prepared.lock().await;
        let branch = self.branch(teammate);
        if path.join(".git").exists() {
            return Ok(Worktree {
                path: path.to_owned(),
                branch,
            });
        }
        // A worktree folder removed by hand leaves a registration behind.
        let _ = git(&self.repo, &["worktree", "prune"], &[]).await;
        let path_s = path.to_string_lossy().into_owned();
        let exists = git(
            &self.repo,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{branch}"),
            ],
            &[],
        )
        .await
        .ok;
        if exists && new_item && !prepared.contains(&branch) {
            // The branch is older than this team's journal (its workspace was removed): start
            // again from the base if it holds no work, never drop commits.
            let ancestor = git(
                &self.repo,
                &["merge-base", "--is-ancestor", &branch, start],
                &[],
            )
            .await;
            if !ancestor.ok {
                // Batches whose outputs share a name share the team, so its branches: deleting
                // them would drop the other batch's work.
                return Err(GitError::Failed(format!(
                    "branch {branch} holds commits from an earlier run; merge or delete it (`git branch -D {branch}`, or `runner clean --force`) and run again. If another batch in this repository made it (batches whose outputs have the same name share the team `{}` and its branches), keep its work: give this batch an output of its own instead (`-o NAME.csv`, or BATCH.md `output:`), whose name its branches then carry",
                    self.team
                )));
            }
            let reset = git(&self.repo, &["branch", "-f", &branch, start], &[]).await;
            if !reset.ok {
                return Err(GitError::Failed(format!(
                    "cannot reset branch {branch} to {start}: {}",
                    first_line(&reset.stderr)
                )));
            }
        }
        let out = if exists {
            git(&self.repo, &["worktree", "add", &path_s, &branch], &[]).await
        } else {
            git(
                &self.repo,
                &["worktree", "add", "-b", &branch, &path_s, start],
                &[],
            )
            .await
        };
        if !out.ok {
            return Err(GitError::Failed(format!(
                "git worktree add failed: {}",
                first_line(&out.stderr)
            )));
        }
        prepared.insert(branch.clone());
        // A set-up record of an earlier worktree at this path says nothing about this one.
        let _ = std::fs::remove_file(side_file(path, "setup-tree"));
        for rel in &self.copy {
            copy_into(&self.repo.join(rel), &path.join(rel)).map_err(|e| {
                GitError::Failed(format!(
                    "cannot copy {} into the worktree: {e}",
                    rel.display()
                ))
            })?;
        }
        Ok(Worktree {
            path: path.to_owned(),
            branch,
        })
    }

    /// The state of `wt`'s files as a git tree (tracked and untracked, ignored files left
    /// out), built in a scratch index beside the worktree: the real index is not touched.
    ///
    /// Errors: what git said.
    async fn tree_of(&self, wt: &Worktree) -> Result<String, GitError> {
        let index = side_file(&wt.path, "index");
        let env = vec![(
            "GIT_INDEX_FILE".to_string(),
            index.to_string_lossy().into_owned(),
        )];
        let steps: [&[&str]; 3] = [&["read-tree", "HEAD"], &["add", "-A"], &["write-tree"]];
        let mut tree = String::new();
        for args in steps {
            let out = git(&wt.path, args, &env).await;
            if !out.ok {
                let _ = std::fs::remove_file(&index);
                return Err(GitError::Failed(format!(
                    "git {} failed: {}",
                    args.join(" "),
                    first_line(&out.stderr)
                )));
            }
            tree = out.stdout.trim().to_owned();
        }
        let _ = std::fs::remove_file(&index);
        Ok(tree)
    }

    /// Record the state of `wt` after its set-up command ran (beside the worktree, in the
    /// workspace): what the set-up made is not the agent's work, and [`Isolation::commit_all`]
    /// leaves it off the branch.
    ///
    /// Errors: what git said; the record cannot be written.
    pub(crate) async fn record_setup(&self, wt: &Worktree) -> Result<(), GitError> {
        let tree = self.tree_of(wt).await?;
        let path = side_file(&wt.path, "setup-tree");
        std::fs::write(&path, tree.as_bytes())
            .map_err(|e| GitError::Failed(format!("cannot write {}: {e}", path.display())))
    }

    /// The paths the agent changed since set-up, as a pathspec file (C-quoted lines) beside
    /// the worktree; `None` without a set-up record (then everything is the agent's).
    async fn changed_since_setup(&self, wt: &Worktree) -> Result<Option<PathBuf>, GitError> {
        let Ok(setup) = std::fs::read_to_string(side_file(&wt.path, "setup-tree")) else {
            return Ok(None);
        };
        let now = self.tree_of(wt).await?;
        let diff = git(
            &wt.path,
            &["diff", "--name-only", "--no-renames", setup.trim(), &now],
            &[],
        )
        .await;
        if !diff.ok {
            return Err(GitError::Failed(format!(
                "git diff failed: {}",
                first_line(&diff.stderr)
            )));
        }
        let list = side_file(&wt.path, "agent-paths");
        std::fs::write(&list, diff.stdout.as_bytes())
            .map_err(|e| GitError::Failed(format!("cannot write {}: {e}", list.display())))?;
        Ok(Some(list))
    }

    /// Commit whatever the agent left uncommitted in `wt` (`runner: <title>`: the report's
    /// summary, else the item's title) — only what
    /// changed after the set-up command, when one ran. Returns the branch's head commit and
    /// the diffstat of the branch against the base.
    ///
    /// Errors: what git said.
    pub(crate) async fn commit_all(
        &self,
        wt: &Worktree,
        title: &str,
    ) -> Result<(String, String), GitError> {
        self.check_worktree(wt)?;
        let status = git(&wt.path, &["status", "--porcelain"], &[]).await;
        if !status.ok {
            return Err(GitError::Failed(format!(
                "git status failed: {}",
                first_line(&status.stderr)
            )));
        }
        let since_setup = match status.stdout.trim().is_empty() {
            true => None,
            false => self.changed_since_setup(wt).await?,
        };
        let agent_changed = match &since_setup {
            None => !status.stdout.trim().is_empty(),
            Some(list) => std::fs::metadata(list).is_ok_and(|m| m.len() > 0),
        };
        if agent_changed {
            let add = match &since_setup {
                None => git(&wt.path, &["add", "-A"], &self.identity).await,
                Some(list) => {
                    // Only the agent's paths, whatever it staged itself.
                    let _ = git(&wt.path, &["reset", "-q"], &[]).await;
                    git_fed(
                        &wt.path,
                        &["update-index", "--add", "--remove", "--stdin"],
                        list,
                    )
                    .await
                }
            };
            if let Some(list) = &since_setup {
                let _ = std::fs::remove_file(list);
            }
            if !add.ok {
                return Err(GitError::Failed(format!(
                    "git add failed: {}",
                    first_line(&add.stderr)
                )));
            }
            // Staged nothing new (the agent only undid set-up output): no commit.
            let unchanged = git(&wt.path, &["diff", "--cached", "--quiet"], &[])
                .await
                .ok;
            let msg = format!("runner: {title}");
            let commit = match unchanged {
                true => GitOut {
                    ok: true,
                    stdout: String::new(),
                    stderr: String::new(),
                },
                false => {
                    git(
                        &wt.path,
                        &["commit", "--no-verify", "-q", "-m", &msg],
                        &self.identity,
                    )
                    .await
                }
            };
            if !commit.ok {
                return Err(GitError::Failed(format!(
                    "git commit failed: {}",
                    first_line(&commit.stderr)
                )));
            }
        }
        let head = git(&wt.path, &["rev-parse", "HEAD"], &[]).await;
        // Against where the branch left the target (`target...HEAD`): an item of a
        // `--serialize-overlaps` chain started from a later commit than the run's base.
        let from_base = format!("{}..HEAD", self.base);
        let since = match &self.base_branch {
            Some(b) => format!("refs/heads/{b}...HEAD"),
            None => from_base.clone(),
        };
        let mut stat = git(&wt.path, &["diff", "--shortstat", &since], &[]).await;
        if !stat.ok {
            // The target branch is gone (renamed, deleted): against the run's base.
            stat = git(&wt.path, &["diff", "--shortstat", &from_base], &[]).await;
        }
        Ok((head.stdout.trim().to_owned(), stat.stdout.trim().to_owned()))
    }

    /// That the worktree is still the one the runner made: its `.git` is a plain file naming
    /// exactly its own gitdir — the folder `<common>/worktrees/<name>` git registered for it
    /// when the runner created it ([`registered_gitdir`]). A teammate may have replaced it
    /// with a repository of its own, whose configuration git would obey, or pointed it at a
    /// sibling's gitdir, so that the runner's commit would land on the sibling's branch.
    ///
    /// Errors: it was replaced, re-pointed or cannot be read; git is not run in it.
    fn check_worktree(&self, wt: &Worktree) -> Result<(), GitError> {
        let dotgit = wt.path.join(".git");
        let common = git_sync(&self.repo, &["rev-parse", "--git-common-dir"], &[]);
        let worktrees =
            crate::fsutil::real_path(&self.repo.join(common.stdout.trim())).join("worktrees");
        let own = registered_gitdir(&worktrees, &wt.path);
        let named = crate::fsutil::open_plain_file(&dotgit)
            .ok()
            .flatten()
            .and_then(|mut f| {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::Read::take(&mut f, 4096), &mut text)
                    .ok()?;
                let g = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
                Some(crate::fsutil::real_path(&wt.path.join(g)))
            });
        if common.ok && own.is_some() && named == own {
            return Ok(());
        }
        Err(GitError::Failed(format!(
            "the worktree's .git ({}) no longer points into the repository {} at the worktree's own git folder: the teammate replaced or re-pointed it, so the runner runs no git in it (its branch keeps what was committed before)",
            dotgit.display(),
            self.repo.display()
        )))
    }

    /// Remove the worktree at `path` (`git worktree remove --force`), then prune.
    pub(crate) fn remove(&self, path: &Path) -> Result<(), GitError> {
        let out = git_sync(
            &self.repo,
            &["worktree", "remove", "--force", &path.to_string_lossy()],
            &[],
        );
        let _ = git_sync(&self.repo, &["worktree", "prune"], &[]);
        if out.ok || !path.exists() {
            Ok(())
        } else {
            Err(GitError::Failed(first_line(&out.stderr)))
        }
    }

    /// Delete a branch (after a successful merge).
    pub(crate) fn delete_branch(&self, branch: &str) {
        let _ = git_sync(&self.repo, &["branch", "-D", branch], &[]);
    }
}

/// The gitdir git registered for the worktree at `path` in the repository's `worktrees`
/// folder: the `worktrees/<name>` whose `gitdir` file names `<path>/.git` (relative to that
/// folder when git wrote it relative), as a real path. `None` when none does. Those files
/// lie in the main repository, which no teammate may write under the sandbox.
fn registered_gitdir(worktrees: &Path, path: &Path) -> Option<PathBuf> {
    let path = crate::fsutil::real_path(path);
    std::fs::read_dir(worktrees)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|admin| {
            std::fs::read_to_string(admin.join("gitdir")).is_ok_and(|t| {
                let named = admin.join(t.trim());
                named.file_name().is_some_and(|n| n == ".git")
                    && named
                        .parent()
                        .is_some_and(|p| crate::fsutil::real_path(p) == path)
            })
        })
        .map(|admin| crate::fsutil::real_path(&admin))
}

/// The prefix of every branch of team `team`: `runner/<team>/`.
pub(crate) fn branch_prefix(team: &str) -> String {
    format!("runner/{}/", ref_component(team))
}

/// `name` made one valid component of a git ref name (`git check-ref-format`): control
/// characters, space, `~^:?*[\`, DEL and `/` become `_`, as do a leading `.`, the second `.`
/// of `..`, the `{` of `@{`, a trailing `.` and the `.` of a trailing `.lock`; an empty name
/// becomes `_`. Every other change keeps the length and leaves digits and `-` alone, so
/// names that differ in a leading row number (`3-…`) stay different.
pub(crate) fn ref_component(name: &str) -> String {
    let mut out: Vec<char> = Vec::with_capacity(name.len());
    for c in name.chars() {
        let prev = out.last().copied();
        let bad = c.is_control()
            || matches!(
                c,
                ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\' | '/' | '\u{7f}'
            )
            || (c == '.' && (prev.is_none() || prev == Some('.')))
            || (c == '{' && prev == Some('@'));
        out.push(if bad { '_' } else { c });
    }
    if out.last() == Some(&'.') {
        out.pop();
        out.push('_');
    }
    let s: String = out.into_iter().collect();
    match s.strip_suffix(".lock") {
        Some(stem) => format!("{stem}_lock"),
        None if s.is_empty() => "_".into(),
        None => s,
    }
}

/// A file of the runner's beside worktree `path` (in the workspace, never in the worktree):
/// `<path>.<what>`.
fn side_file(path: &Path, what: &str) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".{what}"));
    path.with_file_name(name)
}

/// Whether the main working tree has changes outside `exclude` (paths relative to `repo`)
/// and the runner's own temporaries.
pub(crate) fn dirty(repo: &Path, exclude: &[PathBuf]) -> Result<Vec<String>, GitError> {
    let mut args: Vec<String> = vec![
        "status".into(),
        "--porcelain".into(),
        "--".into(),
        ".".into(),
    ];
    for e in exclude {
        args.push(format!(":(exclude,literal){}", e.display()));
    }
    // A temporary of the runner's atomic replace that a kill left beside an output: the
    // run sweeps it once it starts.
    args.push(format!(":(exclude,glob)**/{}*", crate::fsutil::TEMP_PREFIX));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = git_sync(repo, &refs, &[]);
    if !out.ok {
        return Err(GitError::Failed(first_line(&out.stderr)));
    }
    Ok(out
        .stdout
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect())
}

fn copy_into(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.is_dir() {
        std::fs::create_dir_all(to)?;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            copy_into(&e.path(), &to.join(e.file_name()))?;
        }
        Ok(())
    } else {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(from, to).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_become_valid_and_distinct_ref_components() {
        let names = [
            "1-Cargo.lock",
            "2-notes..md",
            "3-x.",
            "4-a@{b",
            "5-a b~c^d:e?f*g[h\\i",
            "6-tab\there",
            "7-...",
            ".hidden",
            "x.lock.lock",
            "@",
            "",
        ];
        let mut seen = std::collections::HashSet::new();
        for n in names {
            let c = ref_component(n);
            let full = format!("refs/heads/{}{c}", branch_prefix("team.lock"));
            let ok = std::process::Command::new("git")
                .args(["check-ref-format", &full])
                .status()
                .expect("git")
                .success();
            assert!(ok, "{n:?} → {full:?} is not a valid ref");
            assert!(seen.insert(c), "{n:?} collides");
        }
        assert_eq!(ref_component("12-plain_name-1.txt"), "12-plain_name-1.txt");
    }
}
