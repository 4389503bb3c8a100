//! `runner clean [TEAM]`: remove what a team left behind — its git worktrees, its merged
//! branches `runner/<team>/*` (unmerged ones only with `--force`: `run::leftovers`), its
//! workspace (archived first: `sink::before_removal`) — after asking, or with `--yes`
//! (DESIGN §2, §9). A running team (its lock held) is refused, exit 3. A worktree with edits
//! no commit has, or an item awaiting review, keeps the team's worktrees, branches and
//! workspace unless `--force` (exit 1), each named with what to do. Without a team: every
//! team of the store, every CSV-batch team (`*.runner/`) here or up to three folders down, and every team holding a
//! worktree of the repository here (its workspace may lie outside it); branches
//! `runner/<team>/*` of teams with no workspace found are named with how to drop them
//! (`runner clean TEAM --force`, which cleans a team whose workspace is gone).
//! Which teams: `run::workspace::clean_named` and `clean_every`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use super::todo::open_store;
use crate::cli::CleanArgs;
use crate::error::{Error, Result};
use crate::run::isolation::leftovers::{self, Leftovers};
use crate::run::record::workspace::{CleanTarget, clean_every, clean_named};
use crate::store::Need;

/// `runner clean`.
pub(crate) fn clean(args: CleanArgs) -> Result<i32> {
    if let (true, Some(dir)) = (args.completed, &args.store.store) {
        // A mistyped store is refused, not reported as having nothing to clean.
        crate::store::check_given(dir)?;
    }
    let store = open_store(&args.store, Need::DefaultProject)?;
    if args.completed {
        return clean_completed(&store, args.yes);
    }
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let repo = leftovers::repo_at(&here);
    let (targets, orphans) = match &args.team {
        Some(team) => (vec![clean_named(team, &store)?], Vec::new()),
        None => clean_every(&store),
    };
    if targets.is_empty() && orphans.is_empty() {
        let repo = repo.map_or(String::new(), |r| {
            format!(
                ", nor a worktree or branch of a team in the repository {}",
                r.display()
            )
        });
        crate::ui::outln(format_args!(
            "Nothing to clean: no team in {}, no team workspace (*.runner) in {}{repo}.",
            store.dir.join("teams").display(),
            here.display()
        ));
        return Ok(0);
    }
    let plan: Vec<(&CleanTarget, Option<Leftovers>)> = targets
        .iter()
        .map(|t| (t, show_target(t, repo.as_deref(), args.force)))
        .collect();
    if !args.yes
        && !plan.is_empty()
        && !confirmed(
            "runner clean",
            "worktrees, branches and workspaces",
            "Remove all of this?",
        )?
    {
        return Ok(0);
    }
    // 1 when a team was kept for what only --force may drop.
    let mut code = 0;
    for (t, left) in plan {
        if !remove_target(&store, t, left, args.force)? {
            code = 1;
        }
    }
    for team in &orphans {
        if let Some(l) = repo.as_deref().and_then(|r| leftovers::orphaned(r, team)) {
            crate::ui::outln(format_args!("{}", orphan_branches(&l, team)));
        }
    }
    Ok(code)
}

/// Say what cleaning team `t` removes: its workspace (or that it is gone, and the
/// repository `repo` its branches are in), its worktrees and merged branches, its unmerged
/// ones (deleted only with `force`). Returns what it left in git.
fn show_target(t: &CleanTarget, repo: Option<&Path>, force: bool) -> Option<Leftovers> {
    let left = match &t.workspace {
        Some(ws) => {
            crate::ui::outln(format_args!("Team {}: workspace {}", t.team, ws.display()));
            leftovers::find(ws, &t.team)
        }
        None => {
            let left = repo.and_then(|r| leftovers::orphaned(r, &t.team));
            let r = left
                .as_ref()
                .map_or(String::new(), |l| l.repo.display().to_string());
            crate::ui::outln(format_args!(
                "Team {}: workspace gone; its branches in {r}",
                t.team
            ));
            left
        }
    };
    for w in left.iter().flat_map(|l| &l.worktrees) {
        let changes = left
            .iter()
            .flat_map(|l| &l.dirty)
            .find(|(d, _)| d == w)
            .map(|(_, c)| c);
        match changes {
            None => crate::ui::outln(format_args!("  worktree {}", w.display())),
            Some(changes) => {
                let fate = if force {
                    "removed: --force"
                } else {
                    "kept, with its team's workspace"
                };
                crate::ui::outln(format_args!(
                    "  worktree {} holds changes no commit has ({fate}):",
                    w.display()
                ));
                for c in changes {
                    crate::ui::outln(format_args!("    {}", crate::ui::terminal_safe(c)));
                }
            }
        }
    }
    for a in left.iter().flat_map(|l| &l.awaiting) {
        let fate = if force {
            "its branch deleted: --force"
        } else {
            "kept, with its team's workspace"
        };
        crate::ui::outln(format_args!("  item     {a} awaits review ({fate})"));
    }
    for b in left.iter().flat_map(|l| &l.merged) {
        crate::ui::outln(format_args!("  branch   {b}"));
    }
    let fate = if force { "deleted: --force" } else { "kept" };
    if let Some(l) = &left {
        for b in &l.unmerged {
            let target = &l.target;
            crate::ui::outln(format_args!(
                "  branch   {b} (commits not merged into {target}: {fate})"
            ));
        }
    }
    left
}

/// Remove team `t`: its worktrees and branches (`left`; unmerged ones only with `force`),
/// then its workspace, archived first (a todo run killed as it ended is finished first).
/// A running team holds its lock: taking it fails rather than pull worktrees from under it.
/// A worktree with uncommitted edits keeps itself and the workspace unless `force`. Returns
/// whether the team was removed (false: kept for its edits).
fn remove_target(
    store: &crate::store::Store,
    t: &CleanTarget,
    left: Option<Leftovers>,
    force: bool,
) -> Result<bool> {
    let lock = (t.workspace.as_ref())
        .filter(|ws| ws.join("lock").exists())
        .map(|ws| crate::run::record::lock::acquire(ws))
        .transpose()?;
    for w in left.iter().flat_map(|l| l.remove(force)) {
        crate::ui::warn(w);
    }
    // A worktree someone edited lies in the workspace: both stay (issue 50); so does the
    // journal that says which items await review (issue 57).
    if let Some(l) = left.as_ref().filter(|l| !l.removable(force)) {
        crate::ui::outln(format_args!("{}", kept_team(l, &t.team)));
        return Ok(false);
    }
    if let Some(ws) = &t.workspace {
        let kept = crate::sink::before_removal::before_removal(ws, &t.team)?;
        // A todo run killed as it ended: its table and checkpoints are finished first.
        let archive = crate::run::record::team::recorded_batch(ws)?
            .map(|b| crate::plans::todo_batch::archive_path(Path::new(&b.input)))
            .filter(|a| a.is_file());
        if crate::plans::todo_batch::finish_ending(store, ws, archive.as_deref())? {
            crate::ui::outln(format_args!(
                "Team {}: every item was ticked; wrote its table and removed the checkpoints of its completed items.",
                t.team
            ));
        }
        drop(lock);
        crate::fsutil::remove_tree(ws).map_err(|e| Error::io("remove", ws, e))?;
        let kept = crate::ui::kept_line(kept.as_ref());
        crate::ui::outln(format_args!("Removed team {}.{kept}", t.team));
    } else if let Some(l) = &left {
        let gone = l.unmerged.iter().filter(|_| force);
        let gone: Vec<&str> = l.merged.iter().chain(gone).map(String::as_str).collect();
        if !gone.is_empty() {
            crate::ui::outln(format_args!(
                "Deleted the branches of team {}: {}.",
                t.team,
                gone.join(" ")
            ));
        }
    }
    if let Some(l) = left.filter(|l| !force && !l.unmerged.is_empty()) {
        crate::ui::outln(format_args!("{}", kept_branches(&l, &t.team)));
    }
    Ok(true)
}

/// What clean says of team `team` it kept whole: the worktrees holding changes no commit
/// has, the items awaiting review, and what to do about each.
fn kept_team(l: &Leftovers, team: &str) -> String {
    let mut why = Vec::new();
    if !l.dirty.is_empty() {
        let trees: Vec<String> = l
            .dirty
            .iter()
            .map(|(w, _)| w.display().to_string())
            .collect();
        why.push(format!(
            "its worktree(s) {} hold changes no commit has: commit them (git -C WORKTREE commit -am ...) or copy them out",
            trees.join(", ")
        ));
    }
    if !l.awaiting.is_empty() {
        why.push(format!(
            "its item(s) {} await review, their work on branches not merged into {}: decide with `runner review {team}`, then `runner accept ID…` or `runner reject ID…`",
            l.awaiting.join(", "),
            l.target
        ));
    }
    format!(
        "Kept team {team}: {}; then run `runner clean {team}` again. `--force` drops them.",
        why.join("; ")
    )
}

/// What clean says of the unmerged branches of `team` it kept, and how to drop them.
fn kept_branches(l: &Leftovers, team: &str) -> String {
    let names = l.unmerged.join(" ");
    format!(
        "  Kept branches with commits not merged into {}: {names}. Merge them (git merge --no-ff BRANCH), or drop them: git branch -D {names} (runner clean {team} --force deletes them).",
        l.target
    )
}

/// What clean without a team says of the branches `team` left in the repository with no
/// workspace found, and how to drop them.
fn orphan_branches(l: &Leftovers, team: &str) -> String {
    let names = [&l.merged[..], &l.unmerged[..]].concat().join(" ");
    format!(
        "Left in {} by team {team}, whose workspace is gone (or not here): {names}. Drop them with runner clean {team} --force (without --force only those merged into {} go), or git branch -D {names}.",
        l.repo.display(),
        l.target
    )
}

/// `runner clean --completed`: the store's todo batches whose every item is ticked, with
/// their tables and archives (their results are in the tables being removed and in git, if
/// the user keeps the store there), except those holding an item that something still open —
/// in the inbox or in a batch — waits on, directly or through other items
/// (`store::links`: `@after:todo-N#K`, a fragment step's earlier steps): the prerequisite
/// closure of what is left, each kept file with the links that keep it. A batch whose team
/// still has a workspace is left to `runner clean`. The files are found again under the
/// store lock (not held while asking) and only those still found are removed.
fn clean_completed(store: &crate::store::Store, yes: bool) -> Result<i32> {
    let (remove, said) = completed_batches(store);
    for line in said {
        crate::ui::outln(line);
    }
    if remove.is_empty() {
        crate::ui::outln(format_args!(
            "Nothing to clean: no finished todo batch in {} that nothing waits on.",
            store.dir.display()
        ));
        return Ok(0);
    }
    if !yes
        && !confirmed(
            "runner clean --completed",
            "finished batch files, their tables and archives",
            "Remove these files?",
        )?
    {
        return Ok(0);
    }
    let _lock = store.lock()?;
    let (still, _) = completed_batches(store);
    let remove: Vec<&PathBuf> = remove.iter().filter(|f| still.contains(f)).collect();
    for f in &remove {
        std::fs::remove_file(f).map_err(|e| Error::io("remove", f, e))?;
    }
    crate::ui::outln(format_args!("Removed {} file(s).", remove.len()));
    Ok(0)
}

/// The files `clean --completed` removes (finished batch files nothing open needs, their
/// tables and archives), and what it says of each finished batch: removed, or kept and why.
fn completed_batches(store: &crate::store::Store) -> (Vec<PathBuf>, Vec<String>) {
    use crate::plans::todo_batch::{archive_path, table_path, team_name};
    use crate::source::todo::Mark;
    use crate::store::links::{At, Links, Via};
    let (files, unreadable) = store.todo_files();
    let mut said: Vec<String> = unreadable
        .iter()
        .map(|e| format!("Kept a file it cannot read: {e}"))
        .collect();
    let links = Links::of(&files);
    let open = files.iter().enumerate().flat_map(|(file, f)| {
        f.doc
            .items()
            .iter()
            .filter(|i| i.mark != Mark::Done)
            .map(move |i| At {
                file,
                item: i.number,
            })
    });
    let needed: std::collections::HashSet<At> = links
        .prerequisites(open)
        .into_iter()
        .map(|(at, _)| at)
        .collect();
    let mut kept_by: std::collections::HashMap<usize, Vec<String>> = Default::default();
    for l in links.all() {
        if l.item.file == l.on.file || !needed.contains(&l.item) {
            continue;
        }
        let from = files.get(l.item.file).map(|f| f.name()).unwrap_or_default();
        let why = match &l.via {
            Via::Batch(b) => format!("{from}: item {} waits on {b}", l.item.item),
            via => format!(
                "{from}: item {} comes after {via} (item {} here)",
                l.item.item, l.on.item
            ),
        };
        let list = kept_by.entry(l.on.file).or_default();
        if !list.contains(&why) {
            list.push(why);
        }
    }
    let mut remove = Vec::new();
    for (k, f) in files.iter().enumerate() {
        let items = f.doc.items();
        if f.batch.is_none() || items.is_empty() || items.iter().any(|i| i.mark != Mark::Done) {
            continue;
        }
        let (name, path) = (f.name(), &f.path);
        if let Some(why) = kept_by.get(&k) {
            said.push(format!("Kept {name}: {}", why.join("; ")));
            continue;
        }
        if store.team_dir(&team_name(path)).exists() {
            said.push(format!(
                "Kept {name}: its team workspace is still there (runner clean {})",
                team_name(path)
            ));
            continue;
        }
        let gone: Vec<PathBuf> = [path.clone(), table_path(path), archive_path(path)]
            .into_iter()
            .filter(|p| p.is_file())
            .collect();
        let names: Vec<String> = gone
            .iter()
            .filter_map(|f| f.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        said.push(format!("Finished batch {name}: {}", names.join(", ")));
        remove.extend(gone);
    }
    (remove, said)
}

/// Whether the person at the terminal says yes to `prompt` (`command` removes `what`).
///
/// Errors: no terminal to ask on (exit 2: run it in one or pass --yes).
fn confirmed(command: &str, what: &str, prompt: &str) -> Result<bool> {
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return Err(Error::needs(
            command,
            "confirmation",
            format!("it removes {what}; run it in a terminal or pass --yes"),
        ));
    }
    dialoguer::Confirm::new()
        .with_prompt(prompt)
        .default(false)
        .interact()
        .map_err(|e| Error::Usage(format!("not confirmed: {e}")))
}
