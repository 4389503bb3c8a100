//! `runner resolve`: show the inbox, take a confirmed selection, move it into the next
//! `todo-N.md`, and run it as team `todo-resolve-N` (seed `todo-skill.md`, "resolve").
//!
//! The inbox is read and shown without the store lock; the person is asked without it.
//! Then, under the lock, the inbox is read again, the chosen items must still be the same
//! items, and the batch file and the inbox are written — the batch first, so a crash
//! between the two writes leaves an item in both places, never in neither.

use std::io::IsTerminal;
use std::path::Path;

use super::todo::{open_store, store_settings};
use super::todo_run;
use crate::cli::ResolveArgs;
use crate::error::{Error, Result};
use crate::source::todo::{Section, TodoDocument};
use crate::source::todo_batch::{self, TodoBatch};
use crate::store::{Need, Store, parse_inbox, today};
use crate::ui::inbox::render_items;
use crate::ui::say;

/// `runner resolve`.
pub fn resolve(args: ResolveArgs) -> Result<i32> {
    let format = args.run.format;
    let select = match &args.select {
        Some(text) => crate::options::selection::parse_numbers("--select", text)?,
        None => Vec::new(),
    };
    let store = open_store(&args.store, Need::Choice)?;
    let (text, existed) = store.read_inbox(&today())?;
    let inbox_path = store.inbox();
    let doc = parse_inbox(&inbox_path, &text)?;
    let finished = store.finished_batch_items(&doc);
    let waiting = |n: &u32| {
        doc.item(*n)
            .and_then(|i| i.after_batches.iter().find(|b| !finished.contains(b)))
            .copied()
    };
    let candidates: Vec<u32> = doc
        .resolvable()
        .into_iter()
        .filter(|n| waiting(n).is_none())
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
        return Ok(0);
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
    for n in &select {
        if candidates.contains(n) {
            continue;
        }
        let why = match (doc.block_problems(*n).first(), waiting(n)) {
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
        return Err(Error::input_at(
            &inbox_path,
            None,
            format!("--select {n}: {why}"),
        ));
    }
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
        return Ok(0);
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
        return todo_run::run_batch(run, &m.batch_doc, settings, backend);
    }
    crate::fault::pause("resolve-chosen");
    let lock = store.lock()?;
    let (now, _) = store.read_inbox(&today())?;
    let fresh = TodoDocument::parse(&now);
    let selected = doc.same_items_in(&fresh, &selected).ok_or_else(|| {
        Error::input_at(
            &inbox_path,
            None,
            "the inbox changed while the items were being chosen, and a chosen item is no longer \
             the same; nothing was moved: run `runner resolve` again",
        )
    })?;
    let n = store.next_batch_number();
    let finished = store.finished_batch_items(&fresh);
    let m = todo_batch::prepare_move(&store, &fresh, &selected, n, &finished, &today())?;
    // The whole plan is built and checked before anything is written: a bad flag (an output
    // over the inbox, say) leaves the inbox as it was.
    let format = settings.format;
    let mut plan = todo_batch::plan(
        batch_run(&store, &m.batch_path, args.keep_team),
        &m.batch_doc,
        settings,
    )?;
    if let Some(p) = &mut plan {
        p.settle_sandbox();
        p.check()?;
    }
    crate::fault::pause("resolve-edit");
    store.create_batch(&m.batch_path, &m.batch_text)?;
    crate::fault::point("after-batch-write");
    crate::fsutil::write_atomic(&inbox_path, m.inbox_text.as_bytes())?;
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
    todo_run::run_plan(plan, format, &m.batch_path, backend)
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
