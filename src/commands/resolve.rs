//! `runner resolve`: show the inbox, take a confirmed selection, move it into the next
//! `todo-N.md`, and run it as team `todo-resolve-N` (seed `todo-skill.md`, "resolve").
//!
//! The batch file is written before the inbox is rewritten, so a crash between the two
//! writes leaves an item in both places, never in neither.

use std::io::IsTerminal;

use super::todo::{open_store, parse_checked, render_items, store_settings};
use super::todo_run;
use crate::cli::ResolveArgs;
use crate::error::{Error, Result};
use crate::source::todo::{Section, TodoDocument};
use crate::source::todo_batch::{self, TodoBatch};
use crate::store::{Need, today};
use crate::ui::say;

/// `runner resolve`.
pub fn resolve(args: ResolveArgs) -> Result<i32> {
    let format = args.run.format;
    let store = open_store(&args.store, Need::Choice)?;
    let (text, existed) = store.read_inbox(&today())?;
    let inbox_path = store.inbox();
    let doc = parse_checked(&inbox_path, &text)?;
    let candidates = doc.resolvable();
    if candidates.is_empty() {
        if !existed {
            store.ensure()?;
            crate::fsutil::write_atomic(&inbox_path, text.as_bytes())?;
        }
        say(
            format,
            format!(
                "Nothing to resolve: {} has no open items.",
                inbox_path.display()
            ),
        );
        return Ok(0);
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if !args.yes && !interactive {
        return Err(Error::Usage(
            "resolving hands items to agents and needs confirmation: run it in a terminal, or pass --yes \
             (with --select 1,3 to choose items)"
                .into(),
        ));
    }
    say(format, inbox_path.display());
    say(format, render_items(&doc).trim_end());
    for n in &args.select {
        if !candidates.contains(n) {
            let open: Vec<String> = candidates.iter().map(u32::to_string).collect();
            return Err(Error::input_at(
                &inbox_path,
                None,
                format!(
                    "--select {n}: there is no open item {n}; the open items are {}",
                    open.join(", ")
                ),
            ));
        }
    }
    // Validate the runner options before asking anything or writing.
    let settings = store_settings(&store, &args.run, &args.command)?;
    say(format, crate::ui::isolation_line(&settings));

    let selected: Vec<u32> = if !args.select.is_empty() {
        let mut s = args.select.clone();
        s.sort();
        s.dedup();
        s
    } else if args.yes {
        doc.open_todo_items()
    } else {
        ask_selection(&doc, &candidates)?
    };
    if selected.is_empty() {
        say(format, "Nothing selected.");
        return Ok(0);
    }
    let n = store.next_batch_number();
    let batch_path = store.dir.join(format!("todo-{n}.md"));
    let batch_text = doc
        .extract_batch(&selected, &today())
        .map_err(|e| Error::input_at(&inbox_path, None, e))?;
    let batch_doc = TodoDocument::parse(&batch_text);
    // The batch's own checks (checkpoints inside the store, prerequisites) before writing.
    todo_batch::plan_items(&batch_doc, &store, true)
        .map_err(|p| Error::input_at(&inbox_path, None, p.join("; ")))?;
    // The items left in the inbox are numbered anew: keep their @after pointing at the same
    // items (a prerequisite that moved to the batch is dropped, with a warning).
    let rest = doc
        .remove_extracted(&selected)
        .map_err(|e| Error::input_at(&inbox_path, None, e))?;
    for d in &rest.dropped {
        let (item, dep) = (d.item, d.prerequisite);
        eprintln!(
            "warning: inbox item {item} waited for item {dep}, which moves to the batch; its @after:{dep} is dropped"
        );
    }
    let mut rest_doc = TodoDocument::parse(&rest.text);
    rest_doc.set_last_updated(&today());

    let run = TodoBatch {
        store: &store,
        batch: &batch_path,
        include_ideas: true,
        keep_team: args.keep_team,
    };
    if args.run.dry_run {
        say(
            format,
            format!(
                "Dry run: these items would move to {} (nothing is written).",
                batch_path.display()
            ),
        );
        return todo_run::run_batch(run, &batch_doc, settings);
    }
    store.ensure()?;
    crate::fault::pause("resolve-edit");
    write_new(&batch_path, &batch_text)?;
    crate::fault::point("after-batch-write");
    crate::fsutil::write_atomic(&inbox_path, rest_doc.render().as_bytes())?;
    say(
        format,
        format!(
            "Moved {} item(s) to {}; team todo-resolve-{n}.",
            selected.len(),
            batch_path.display()
        ),
    );
    todo_run::run_batch(run, &batch_doc, settings)
}

fn write_new(path: &std::path::Path, text: &str) -> Result<()> {
    use std::io::Write;
    // create_new: two resolves racing for the same N must not overwrite each other.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::io("create", path, e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| Error::io("write", path, e))?;
    f.sync_all().map_err(|e| Error::io("sync", path, e))
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
