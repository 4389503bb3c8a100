//! `runner clean [TEAM]`: remove what a team left behind — git worktrees, branches
//! `runner/<team>/*`, its workspace (archived first: `run::archive::before_removal`) — after
//! asking, or with `--yes` (DESIGN §2, §9). A running team (its lock held) is refused, exit 3.
//! Without a team: every team of the store and every CSV-batch team (`*.runner/`) here.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use super::todo::open_store;
use crate::cli::CleanArgs;
use crate::error::{Error, Result};
use crate::run::worktree::git_sync;
use crate::store::Need;

struct Target {
    team: String,
    workspace: PathBuf,
}

fn team_of(workspace: &Path) -> String {
    std::fs::read_to_string(workspace.join("team.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["team"].as_str().map(str::to_owned))
        .unwrap_or_else(|| {
            let name = workspace
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            name.strip_suffix(".runner").unwrap_or(&name).to_owned()
        })
}

fn targets(args: &CleanArgs) -> Result<Vec<Target>> {
    if let Some(team) = &args.team {
        let p = PathBuf::from(team);
        if p.join("team.json").is_file() || p.join("lock").is_file() {
            let ws = p.canonicalize().unwrap_or(p);
            return Ok(vec![Target {
                team: team_of(&ws),
                workspace: ws,
            }]);
        }
        let store = open_store(&args.store, Need::DefaultProject)?;
        let ws = store.team_dir(team);
        if !ws.is_dir() {
            return Err(Error::Usage(format!(
                "no team `{team}` in {} (and no workspace at that path)",
                store.dir.join("teams").display()
            )));
        }
        return Ok(vec![Target {
            team: team.clone(),
            workspace: ws,
        }]);
    }
    let store = open_store(&args.store, Need::DefaultProject)?;
    let mut out: Vec<Target> = std::fs::read_dir(store.dir.join("teams"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| Target {
            team: e.file_name().to_string_lossy().into_owned(),
            workspace: e.path(),
        })
        .collect();
    // CSV-batch teams here: `<output stem>.runner/` folders beside their outputs.
    for e in std::fs::read_dir(".").into_iter().flatten().flatten() {
        let p = e.path();
        let is_team = p.extension().is_some_and(|x| x == "runner")
            && (p.join("team.json").is_file() || p.join("journal.jsonl").is_file());
        if is_team {
            let ws = p.canonicalize().unwrap_or(p);
            out.push(Target {
                team: team_of(&ws),
                workspace: ws,
            });
        }
    }
    out.sort_by(|a, b| a.team.cmp(&b.team));
    Ok(out)
}

/// The git work tree the workspace lives in (or was made from).
fn repo_of(workspace: &Path) -> Option<PathBuf> {
    let start = workspace.ancestors().find(|p| p.is_dir())?;
    let out = git_sync(start, &["rev-parse", "--show-toplevel"], &[]);
    out.ok.then(|| PathBuf::from(out.stdout.trim()))
}

fn worktrees_under(repo: &Path, workspace: &Path) -> Vec<PathBuf> {
    let out = git_sync(repo, &["worktree", "list", "--porcelain"], &[]);
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(PathBuf::from)
        .filter(|p| p.starts_with(workspace))
        .collect()
}

fn branches_of(repo: &Path, team: &str) -> Vec<String> {
    let out = git_sync(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            &format!("refs/heads/{}", crate::run::worktree::branch_prefix(team)),
        ],
        &[],
    );
    out.stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `runner clean`.
pub fn clean(args: CleanArgs) -> Result<i32> {
    let targets = targets(&args)?;
    if targets.is_empty() {
        crate::ui::outln(format_args!("Nothing to clean."));
        return Ok(0);
    }
    let mut plan = Vec::new();
    for t in &targets {
        let repo = repo_of(&t.workspace);
        let trees = repo
            .as_ref()
            .map(|r| worktrees_under(r, &t.workspace))
            .unwrap_or_default();
        let branches = repo
            .as_ref()
            .map(|r| branches_of(r, &t.team))
            .unwrap_or_default();
        crate::ui::outln(format_args!(
            "Team {}: workspace {}",
            t.team,
            t.workspace.display()
        ));
        for w in &trees {
            crate::ui::outln(format_args!("  worktree {}", w.display()));
        }
        for b in &branches {
            crate::ui::outln(format_args!("  branch   {b}"));
        }
        plan.push((t, repo, trees, branches));
    }
    if !args.yes {
        if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
            return Err(Error::Usage("clean removes worktrees, branches and workspaces: run it in a terminal or pass --yes".into()));
        }
        let go = dialoguer::Confirm::new()
            .with_prompt("Remove all of this?")
            .default(false)
            .interact()
            .map_err(|e| Error::Usage(format!("not confirmed: {e}")))?;
        if !go {
            return Ok(0);
        }
    }
    for (t, repo, trees, branches) in plan {
        // A running team holds its lock; never pull its worktrees from under it.
        let lock = (t.workspace.join("lock").exists())
            .then(|| crate::run::lock::acquire(&t.workspace))
            .transpose()?;
        if let Some(repo) = &repo {
            for w in &trees {
                let out = git_sync(
                    repo,
                    &["worktree", "remove", "--force", &w.to_string_lossy()],
                    &[],
                );
                if !out.ok {
                    eprintln!(
                        "warning: cannot remove worktree {}: {}",
                        w.display(),
                        out.stderr.trim()
                    );
                }
            }
            for b in &branches {
                let out = git_sync(repo, &["branch", "-D", b], &[]);
                if !out.ok {
                    eprintln!("warning: cannot delete branch {b}: {}", out.stderr.trim());
                }
            }
            let _ = git_sync(repo, &["worktree", "prune"], &[]);
        }
        let kept = crate::run::archive::before_removal(&t.workspace, &t.team)?;
        drop(lock);
        std::fs::remove_dir_all(&t.workspace).map_err(|e| Error::io("remove", &t.workspace, e))?;
        let kept = crate::ui::kept_line(kept.as_ref());
        crate::ui::outln(format_args!("Removed team {}.{kept}", t.team));
    }
    Ok(0)
}
