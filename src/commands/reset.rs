//! `runner reset NAME [STEP]`: reopen the latest round of a fragment where its items are now
//! (DESIGN §3 "Fragments").
//!
//! The round is the highest `@fragment:NAME#ROUND/…` among the items of the inbox and every
//! `todo-N.md` (`store::links::Round`). The chosen step (or every step) and every item of that
//! round that follows it — by its mark's step links or its `@after:` links — is reopened in
//! place: in the inbox a `[x]`/`[~]` item becomes `[ ]`; in a batch file it is unticked and
//! noted ([`crate::sink::todo_marks::REOPENED`]) so that `runner run todo-N.md` runs it again.
//! No item is copied; no other file is touched. It all happens under the store lock.

use std::collections::BTreeSet;

use super::todo::open_store;
use crate::cli::ResetArgs;
use crate::error::{Error, Result};
use crate::plans::todo_batch::team_name;
use crate::run::record::workspace::Found;
use crate::sink::todo_marks::reopened_note;
use crate::source::todo::{Mark, is_fragment_name};
use crate::store::links::{At, Links, Round};
use crate::store::{Need, Store, TodoFile, today};
use crate::ui::outln;

/// `runner reset NAME [STEP]`.
pub(crate) fn reset(args: ResetArgs) -> Result<i32> {
    if let Some(dir) = &args.store.store {
        crate::store::check_given(dir)?;
    }
    let store = open_store(&args.store, Need::DefaultProject)?;
    let name = args.name.as_str();
    if !is_fragment_name(name) {
        // Its message says what a name is.
        store.fragment(name)?;
    }
    // A store that is not there has no round to reset, and is not made for saying so.
    let _lock = store.dir.is_dir().then(|| store.lock()).transpose()?;
    let (mut files, unreadable) = store.todo_files();
    if let Some(e) = unreadable.into_iter().next() {
        return Err(e);
    }
    let Some(round) = Round::latest(&files, name) else {
        return Err(never_applied(&store, name));
    };
    let links = Links::of(&files);
    let Some(chosen) = round.step_and_followers(&links, args.step.as_deref()) else {
        let key = args.step.clone().unwrap_or_default();
        return Err(Error::Unknown {
            what: "step".into(),
            suggestion: crate::suggest::did_you_mean(&key, round.steps()),
            name: key,
            hint: format!(
                "round {} of fragment {name} has the steps {}",
                round.number,
                round.steps().join(", ")
            ),
        });
    };
    refuse_running(&store, &files, &chosen)?;
    let mut lines = Vec::new();
    let mut changed_files = BTreeSet::new();
    for at in &chosen {
        let Some(f) = files.get_mut(at.file) else {
            continue;
        };
        let Some(item) = f.doc.item(at.item).cloned() else {
            continue;
        };
        let step = item
            .fragment
            .as_ref()
            .map(|m| m.short())
            .unwrap_or_default();
        let place = format!("{} item {} ({step})", f.name(), at.item);
        match reopen(f, at.item, &step) {
            Some(was) => {
                changed_files.insert(at.file);
                lines.push(format!("  {place}: {was} → [ ] {}", item.title));
            }
            None => lines.push(format!("  {place}: already open — {}", item.title)),
        }
    }
    for k in &changed_files {
        if let Some(f) = files.get(*k) {
            crate::fsutil::write_atomic(&f.path, f.doc.render().as_bytes())?;
        }
    }
    let what = match &args.step {
        Some(k) => format!("step {k} and what follows it"),
        None => "every step".to_owned(),
    };
    outln(format_args!(
        "Round {} of fragment {name}: {what}.",
        round.number
    ));
    for l in &lines {
        outln(l);
    }
    // Batch files by number, then the inbox: a step's dependents are never in an earlier
    // batch (resolve hands an item out only with or after its prerequisites).
    let here = std::env::current_dir().unwrap_or_default();
    let mut again: Vec<(u32, String)> = changed_files
        .iter()
        .filter_map(|k| files.get(*k))
        .map(|f| match f.batch {
            Some(n) => (
                n,
                run_again(&store, &f.path).unwrap_or_else(|| {
                    format!(
                        "runner run {}",
                        f.path.strip_prefix(&here).unwrap_or(&f.path).display()
                    )
                }),
            ),
            None => (
                u32::MAX,
                "runner resolve (for the items reopened in the inbox)".to_owned(),
            ),
        })
        .collect();
    again.sort();
    let again: Vec<String> = again.into_iter().map(|(_, c)| c).collect();
    match lines.iter().filter(|l| l.contains(" → ")).count() {
        0 => outln("Nothing to reopen: they are all open."),
        n => outln(format_args!(
            "Reopened {n} item(s); run them again, in this order: {}.",
            again.join("; then ")
        )),
    }
    Ok(0)
}

/// The command that runs batch file `batch` of `store` again as its team's last run did
/// (its options and agent command, `-- python3 agent.py`), from the team's `team.json` or,
/// once it completed, its archive. `None` when neither records a run.
fn run_again(store: &Store, batch: &std::path::Path) -> Option<String> {
    let workspace = store.team_dir(&team_name(batch));
    let archive = crate::run::record::archive::beside_batch(batch);
    let found = match workspace.join("team.json").is_file() {
        true => Found::Workspace(workspace),
        false if archive.is_file() => Found::Archive(archive),
        false => return None,
    };
    let s = found.snapshot().ok()?;
    crate::run::record::resume::run_again(&found, &s)
}

/// Reopen item `n` of `f` (of fragment step `step`, `NAME#ROUND/STEP`): `[ ]`, and in a
/// batch file the note that has the next run run it again (the batch's `status: done`
/// becomes `partial`). Returns the mark it had, or `None` when it was open already.
fn reopen(f: &mut TodoFile, n: u32, step: &str) -> Option<&'static str> {
    let was = match f.doc.item(n)?.mark {
        Mark::Open => return None,
        Mark::Done => "[x]",
        Mark::InProgress => "[~]",
    };
    f.doc.set_mark(n, Mark::Open).ok()?;
    if f.batch.is_some() {
        let _ = f.doc.set_note(n, Some(&reopened_note(step, &f.name())));
        if f.doc.frontmatter_value("status").as_deref() == Some("done") {
            f.doc.set_frontmatter_value("status", "partial");
        }
    } else {
        f.doc.set_last_updated(&today());
    }
    Some(was)
}

/// The refusal of a reset of fragment `name`, which no item of the store carries: no such
/// fragment (with the nearest names), or one never applied (exit 2).
fn never_applied(store: &Store, name: &str) -> Error {
    let f = match store.fragment(name) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let values: String = f.variables().iter().map(|v| format!(" {v}=…")).collect();
    Error::Usage(format!(
        "fragment {name} has no applied round in {}: no item there carries \
         `@fragment:{name}#…`; apply it first with `runner apply {name}{values}`",
        store.dir.display()
    ))
}

/// Refuse (exit 3) when a batch file holding an item to reopen is being run now: the run's
/// marks would overwrite the reopened ones.
fn refuse_running(store: &Store, files: &[TodoFile], chosen: &[At]) -> Result<()> {
    for at in chosen {
        let Some(f) = files.get(at.file).filter(|f| f.batch.is_some()) else {
            continue;
        };
        if f.doc.item(at.item).is_none_or(|i| i.mark == Mark::Open) {
            continue;
        }
        let team = team_name(&f.path);
        let found = Found::Workspace(store.team_dir(&team));
        if found.snapshot().is_ok_and(|s| s.is_live()) {
            return Err(Error::Environment(format!(
                "{} is being run now (team {team}); wait for the run to end (`runner status \
                 {}`), then reset",
                f.path.display(),
                f.path.display()
            )));
        }
    }
    Ok(())
}
