//! `runner resolve`: show the inbox, take a confirmed selection, move it into the next
//! `todo-N.md`, and run it as team `todo-resolve-N` (seed `todo-skill.md`, "resolve").
//!
//! The inbox is read and shown without the store lock; the person is asked without it.
//! Then, under the lock, the inbox is read again, the chosen items must still be the same
//! items, and the batch file and the inbox are written — the batch first, so a crash
//! between the two writes leaves an item in both places, never in neither.

use std::collections::HashSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::todo::{open_store, store_settings};
use super::todo_run;
use crate::cli::ResolveArgs;
use crate::error::{Error, Result};
use crate::options::Format;
use crate::plans::todo_batch::{self, TodoBatch};
use crate::run::backend::Backend;
use crate::schedule::plan::Plan;
use crate::settings::Settings;
use crate::source::todo::{BatchRef, Section, TodoDocument};
use crate::store::{Need, Store, parse_inbox, today};
use crate::ui::inbox::render_items;
use crate::ui::say;

/// What [`prepare`] left to do: nothing (the exit code: nothing to resolve, nothing
/// selected, a dry run shown), or the run of the batch it wrote.
pub(crate) enum Resolved {
    /// Done, with this exit code.
    Done(i32),
    /// The items moved to a batch file; its run is next.
    Run(Box<ResolvedRun>),
}

/// A batch `resolve` wrote, ready to run ([`todo_run::run_plan`]).
pub(crate) struct ResolvedRun {
    /// The run's plan (`None`: every item of the batch is ticked); a caller may add sinks.
    pub plan: Option<Plan>,
    /// The run's `--format`.
    pub format: Format,
    /// The batch file (`todo-N.md`).
    pub batch: PathBuf,
    /// The backend every attempt runs on.
    pub backend: Arc<dyn Backend>,
}

/// `runner resolve`.
pub(crate) fn resolve(args: ResolveArgs) -> Result<i32> {
    match prepare(args)? {
        Resolved::Done(code) => Ok(code),
        Resolved::Run(r) => todo_run::run_plan(r.plan, r.format, &r.batch, r.backend),
    }
}

/// Everything `runner resolve` does before its team runs: show the inbox, take the selection
/// (`--select`, every open todo item with `--yes`, else asked on the terminal), check it, and
/// move the chosen items into the next `todo-N.md` with its run's plan built and checked.
///
/// Errors: a bad `--select` or runner option, no confirmation off a terminal, the inbox
/// changed under the choice, the plan's checks (exit 2; nothing is written); the store cannot
/// be locked or written.
pub(crate) fn prepare(args: ResolveArgs) -> Result<Resolved> {
    let format = args.run.format;
    let mut select = match &args.select {
        Some(text) => crate::options::selection::parse_numbers("--select", text)?,
        None => Vec::new(),
    };
    let store = open_store(&args.store, Need::Choice)?;
    store.settle_move()?;
    let (text, existed) = store.read_inbox(&today())?;
    let inbox_path = store.inbox();
    let doc = parse_inbox(&inbox_path, &text)?;
    if !args.ids.is_empty() {
        select = crate::source::todo::numbers_of_keys(&doc, &args.ids)
            .map_err(|why| Error::input_at(&inbox_path, None, format!("--id: {why}")))?;
    }
    let finished = store.finished_batch_items(&doc);
    let candidates: Vec<u32> = doc
        .resolvable()
        .into_iter()
        .filter(|n| waits_for(&doc, &finished, *n).is_none())
        .collect();
    if candidates.is_empty() && select.is_empty() {
        if !existed {
            let _lock = store.lock()?;
            if !inbox_path.exists() {
                crate::fsutil::write_atomic(&inbox_path, text.as_bytes())?;
            }
        }
        say(
            format,
            format!(
                "Nothing to resolve: {} has no open items ready to hand out.",
                inbox_path.display()
            ),
        );
        return Ok(Resolved::Done(0));
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if !args.yes && !interactive {
        return Err(Error::needs(
            "runner resolve",
            "confirmation",
            "it hands items to agents; run it in a terminal, or pass --yes (with --select 1,3 to choose items)",
        ));
    }
    say(format, inbox_path.display());
    say(format, render_items(&doc).trim_end());
    check_selection(&doc, &finished, &select, &candidates, &inbox_path)?;
    // Validate the runner options before asking anything or writing.
    let (settings, backend) = store_settings(&store, &args.run, &args.command)?;
    // (A dry run's plan says it with the rest.)
    if !args.run.dry_run {
        say(format, crate::ui::isolation_line(&settings));
    }

    let selected: Vec<u32> = if !select.is_empty() {
        select
    } else if args.yes {
        doc.open_todo_items(&finished)
    } else {
        ask_selection(&doc, &candidates)?
    };
    if selected.is_empty() {
        say(format, "Nothing selected.");
        return Ok(Resolved::Done(0));
    }
    // The move is checked on the inbox as shown (bad input changes nothing), then made
    // under the store lock on the inbox as it is then.
    let n = store.next_batch_number();
    let m = todo_batch::prepare_move(&store, &doc, &selected, n, &finished, &today())?;
    if args.run.dry_run {
        say(
            format,
            format!(
                "Dry run: these items would move to {} (nothing is written).",
                m.batch_path.display()
            ),
        );
        let run = batch_run(&store, &m.batch_path, args.keep_team);
        return todo_run::run_batch(run, &m.batch_doc, settings, backend).map(Resolved::Done);
    }
    crate::fault::pause("resolve-chosen");
    let format = settings.format;
    let (plan, batch) = move_items(&store, &doc, &selected, settings, args.keep_team)?;
    Ok(Resolved::Run(Box::new(ResolvedRun {
        plan,
        format,
        batch,
        backend,
    })))
}

/// The batch an inbox item `n` still waits for (its `@after:todo-N#K` that has not
/// completed), if any.
fn waits_for(doc: &TodoDocument, finished: &HashSet<BatchRef>, n: u32) -> Option<BatchRef> {
    doc.item(n)
        .and_then(|i| i.after_batches.iter().find(|b| !finished.contains(b)))
        .copied()
}

/// Every number of `select` is one of the `candidates` the inbox `doc` offers.
///
/// Errors: the first that is not, with why (its problem, the batch it waits for, or the open
/// items there are), naming the inbox (exit 2).
fn check_selection(
    doc: &TodoDocument,
    finished: &HashSet<BatchRef>,
    select: &[u32],
    candidates: &[u32],
    inbox: &Path,
) -> Result<()> {
    let Some(n) = select.iter().find(|n| !candidates.contains(n)) else {
        return Ok(());
    };
    let why = match (doc.block_problems(*n).first(), waits_for(doc, finished, *n)) {
        (Some(p), _) => format!("item {n} cannot be handed out: {p}; fix it first"),
        (None, Some(b)) => format!("item {n} waits for {b}, which has not completed"),
        (None, None) => {
            let open: Vec<String> = candidates.iter().map(u32::to_string).collect();
            format!(
                "there is no open item {n}; the open items are {}",
                open.join(", ")
            )
        }
    };
    Err(Error::input_at(inbox, None, format!("--select {n}: {why}")))
}

/// Under the store lock: read the inbox again, check the `selected` items of `doc` (as
/// shown) are still the same items, build and check the run's plan, then write the batch
/// file and the inbox — the batch first, so a crash between the two leaves an item in both
/// places, never in neither. Returns the plan (`None`: nothing left to run) and the batch
/// file.
///
/// Errors: the inbox changed under the choice, the plan's checks (exit 2; nothing written);
/// the store cannot be locked or written.
fn move_items(
    store: &Store,
    doc: &TodoDocument,
    selected: &[u32],
    settings: Settings,
    keep_team: bool,
) -> Result<(Option<Plan>, PathBuf)> {
    let inbox_path = store.inbox();
    let lock = store.lock()?;
    let (now, _) = store.read_inbox(&today())?;
    let fresh = TodoDocument::parse(&now);
    let selected = doc.same_items_in(&fresh, selected).ok_or_else(|| {
        Error::input_at(
            &inbox_path,
            None,
            "the inbox changed while the items were being chosen, and a chosen item is no longer \
             the same; nothing was moved: run `runner resolve` again",
        )
    })?;
    let n = store.next_batch_number();
    let finished = store.finished_batch_items(&fresh);
    let m = todo_batch::prepare_move(store, &fresh, &selected, n, &finished, &today())?;
    // The whole plan is built and checked before anything is written: a bad flag (an output
    // over the inbox, say) leaves the inbox as it was.
    let format = settings.format;
    let mut plan = todo_batch::plan(
        batch_run(store, &m.batch_path, keep_team),
        &m.batch_doc,
        settings,
    )?;
    if let Some(p) = &mut plan {
        p.settle_sandbox();
        p.check()?;
    }
    crate::fault::pause("resolve-edit");
    // Recorded first: a kill between the two writes is finished by the next store edit.
    store.begin_move(&m.batch_path, &m.batch_text, &now, &m.inbox_text)?;
    store.create_batch(&m.batch_path, &m.batch_text)?;
    crate::fault::point("after-batch-write");
    crate::fsutil::write_atomic(&inbox_path, m.inbox_text.as_bytes())?;
    store.end_move()?;
    drop(lock);
    for d in &m.moved {
        let (item, dep, to) = (d.item, d.prerequisite, d.to);
        say(
            format,
            format!(
                "Inbox item {item} waits for item {dep}, which moves to the batch: it now waits for @after:{to}."
            ),
        );
    }
    say(
        format,
        format!(
            "Moved {} item(s) to {}; team todo-resolve-{n}.",
            selected.len(),
            m.batch_path.display()
        ),
    );
    Ok((plan, m.batch_path))
}

/// The run of a batch `resolve` made: every item, Ideas included.
fn batch_run<'a>(store: &'a Store, batch: &'a Path, keep_team: bool) -> TodoBatch<'a> {
    TodoBatch {
        store,
        batch,
        include_ideas: true,
        keep_team,
    }
}

fn ask_selection(doc: &TodoDocument, candidates: &[u32]) -> Result<Vec<u32>> {
    let labels: Vec<String> = candidates
        .iter()
        .filter_map(|n| doc.item(*n))
        .map(|i| {
            format!(
                "{:>3}. {}{}",
                i.number,
                if i.section == Section::Ideas {
                    "(idea) "
                } else {
                    ""
                },
                i.title
            )
        })
        .collect();
    let defaults: Vec<bool> = candidates
        .iter()
        .map(|n| doc.item(*n).is_some_and(|i| i.section == Section::Todo))
        .collect();
    let chosen = dialoguer::MultiSelect::new()
        .with_prompt("Hand which items to teammates? (space to toggle, enter to confirm)")
        .items(&labels)
        .defaults(&defaults)
        .interact()
        .map_err(|e| Error::Usage(format!("no selection: {e}")))?;
    let picked: Vec<u32> = chosen
        .into_iter()
        .filter_map(|i| candidates.get(i).copied())
        .collect();
    if picked.is_empty() {
        return Ok(picked);
    }
    let go = dialoguer::Confirm::new()
        .with_prompt(format!("Start {} teammate(s)?", picked.len()))
        .default(true)
        .interact()
        .map_err(|e| Error::Usage(format!("not confirmed: {e}")))?;
    Ok(if go { picked } else { Vec::new() })
}
