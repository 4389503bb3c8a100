//! `runner clean [TEAM]`: remove what a team left behind — its git worktrees, its merged
//! branches `runner/<team>/*` (unmerged ones only with `--force`: `run::leftovers`), its
//! workspace (archived first: `run::archive::before_removal`) — after asking, or with `--yes`
//! (DESIGN §2, §9). A running team (its lock held) is refused, exit 3. Without a team: every
//! team of the store, every CSV-batch team (`*.runner/`) here, and every team holding a
//! worktree of the repository here (its workspace may lie outside it).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use super::todo::open_store;
use crate::cli::CleanArgs;
use crate::error::{Error, Result};
use crate::run::leftovers::{self, Leftovers};
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
    let teams = store.dir.join("teams");
    let mut out: Vec<Target> = std::fs::read_dir(&teams)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| Target {
            team: e.file_name().to_string_lossy().into_owned(),
            workspace: e.path(),
        })
        .collect();
    // CSV-batch teams here (`<output stem>.runner/` beside their outputs), and those whose
    // worktrees the repository here holds, wherever their output went.
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let repo = leftovers::repo_at(&here);
    let beside = std::fs::read_dir(&here).into_iter().flatten().flatten();
    let csv_teams = beside.map(|e| e.path()).filter(|p| {
        p.extension().is_some_and(|x| x == "runner")
            && (p.join("team.json").is_file() || p.join("journal.jsonl").is_file())
    });
    let in_repo = repo.iter().flat_map(|r| leftovers::workspaces_in(r));
    for p in csv_teams.chain(in_repo) {
        let ws = crate::fsutil::real_path(&p);
        if !out
            .iter()
            .any(|t| crate::fsutil::real_path(&t.workspace) == ws)
        {
            out.push(Target {
                team: team_of(&ws),
                workspace: ws,
            });
        }
    }
    if out.is_empty() {
        let repo = repo.map_or(String::new(), |r| {
            format!(
                ", nor a worktree of a team in the repository {}",
                r.display()
            )
        });
        crate::ui::outln(format_args!(
            "Nothing to clean: no team in {}, no team workspace (*.runner) in {}{repo}.",
            teams.display(),
            here.display()
        ));
    }
    out.sort_by(|a, b| a.team.cmp(&b.team));
    Ok(out)
}

/// `runner clean`.
pub fn clean(args: CleanArgs) -> Result<i32> {
    let targets = targets(&args)?;
    if targets.is_empty() {
        return Ok(0);
    }
    let mut plan = Vec::new();
    for t in &targets {
        let left = leftovers::find(&t.workspace, &t.team);
        crate::ui::outln(format_args!(
            "Team {}: workspace {}",
            t.team,
            t.workspace.display()
        ));
        for w in left.iter().flat_map(|l| &l.worktrees) {
            crate::ui::outln(format_args!("  worktree {}", w.display()));
        }
        for b in left.iter().flat_map(|l| &l.merged) {
            crate::ui::outln(format_args!("  branch   {b}"));
        }
        let fate = if args.force {
            "deleted: --force"
        } else {
            "kept"
        };
        if let Some(l) = &left {
            for b in &l.unmerged {
                let target = &l.target;
                crate::ui::outln(format_args!(
                    "  branch   {b} (commits not merged into {target}: {fate})"
                ));
            }
        }
        plan.push((t, left));
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
    for (t, left) in plan {
        // A running team holds its lock; never pull its worktrees from under it.
        let lock = (t.workspace.join("lock").exists())
            .then(|| crate::run::lock::acquire(&t.workspace))
            .transpose()?;
        for w in left.iter().flat_map(|l| l.remove(args.force)) {
            eprintln!("warning: {w}");
        }
        let kept = crate::run::archive::before_removal(&t.workspace, &t.team)?;
        drop(lock);
        std::fs::remove_dir_all(&t.workspace).map_err(|e| Error::io("remove", &t.workspace, e))?;
        let kept = crate::ui::kept_line(kept.as_ref());
        crate::ui::outln(format_args!("Removed team {}.{kept}", t.team));
        if let Some(l) = left.filter(|l| !args.force && !l.unmerged.is_empty()) {
            crate::ui::outln(format_args!("{}", kept_branches(&l)));
        }
    }
    Ok(0)
}

/// What clean says of the unmerged branches it kept, and how to drop them.
fn kept_branches(l: &Leftovers) -> String {
    let names = l.unmerged.join(" ");
    format!(
        "  Kept branches with commits not merged into {}: {names}. Merge them (git merge --no-ff BRANCH), or drop them: git branch -D {names} (runner clean --force deletes them with their team).",
        l.target
    )
}
