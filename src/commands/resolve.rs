//! `runner resolve`: show the inbox, take a confirmed selection, move it into the next
//! `todo-N.md`, and run it as team `todo-resolve-N` (seed `todo-skill.md`, "resolve").
//!
//! The batch file is written before the inbox is rewritten, so a crash between the two
//! writes leaves an item in both places, never in neither.

use std::collections::HashMap;
use std::io::IsTerminal;

use super::todo::{open_store, parse_checked, render_items};
use super::todo_run;
use crate::cli::ResolveArgs;
use crate::error::{Error, Result};
use crate::settings::Settings;
use crate::source::todo::{Mark, Section, TodoDocument, batch_document};
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
    let candidates: Vec<u32> = doc
        .items()
        .iter()
        .filter(|i| {
            i.parent.is_none()
                && i.mark != Mark::Done
                && matches!(i.section, Section::Todo | Section::Ideas)
        })
        .map(|i| i.number)
        .collect();
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
    let settings = Settings::resolve(
        &args.run,
        &args.command,
        &store.settings()?,
        Some(&store.dir),
    )?;
    say(
        format,
        format!(
            "Isolation: {}",
            if settings.isolate {
                if settings.merge {
                    "worktree — each teammate in its own git worktree; completed branches are merged back"
                } else {
                    "worktree — each teammate in its own git worktree and branch"
                }
            } else {
                "none — teammates share the working tree"
            }
        ),
    );

    let selected: Vec<u32> = if !args.select.is_empty() {
        let mut s = args.select.clone();
        s.sort();
        s.dedup();
        s
    } else if args.yes {
        candidates
            .iter()
            .copied()
            .filter(|n| {
                doc.item(*n)
                    .is_some_and(|i| i.section == Section::Todo && i.mark == Mark::Open)
            })
            .collect()
    } else {
        ask_selection(&doc, &candidates)?
    };
    if selected.is_empty() {
        say(format, "Nothing selected.");
        return Ok(0);
    }
    let n = store.next_batch_number();
    let batch_path = store.dir.join(format!("todo-{n}.md"));
    let batch_text = build_batch(&doc, &selected, &today())
        .map_err(|e| Error::input_at(&inbox_path, None, e))?;
    let batch_doc = TodoDocument::parse(&batch_text);
    // The batch's own checks (checkpoints inside the store, prerequisites) before writing.
    todo_batch::plan_items(&batch_doc, &store, true)
        .map_err(|p| Error::Usage(format!("{}: {}", inbox_path.display(), p.join("; "))))?;
    let (rest, _) = doc
        .remove_items(&selected)
        .map_err(|e| Error::input_at(&inbox_path, None, e))?;
    // The items left in the inbox are numbered anew: keep their @after pointing at the same
    // items (a prerequisite that moved to the batch is dropped, with a warning).
    let moved: std::collections::HashSet<u32> = doc
        .items()
        .iter()
        .filter(|i| {
            selected
                .iter()
                .any(|s| i.number == *s || is_descendant(&doc, i.number, *s))
        })
        .map(|i| i.number)
        .collect();
    let remaining: HashMap<u32, u32> = doc
        .items()
        .iter()
        .filter(|i| !moved.contains(&i.number))
        .enumerate()
        .map(|(k, i)| (i.number, k as u32 + 1))
        .collect();
    for i in doc.items().iter().filter(|i| !moved.contains(&i.number)) {
        for dep in i.after.iter().filter(|d| moved.contains(d)) {
            eprintln!(
                "warning: inbox item {} waited for item {dep}, which moves to the batch; its @after:{dep} is dropped",
                i.number
            );
        }
    }
    let mut rest_doc = TodoDocument::parse(&renumber_after(&rest, &remaining));
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

/// The new batch file for `selected` inbox items: their blocks (with continuation lines,
/// nested items and `@context`), Todo then Ideas, with `@after:` renumbered to the batch's
/// numbering.
///
/// Errors: an `@after:` naming an open inbox item that is not selected.
fn build_batch(
    doc: &TodoDocument,
    selected: &[u32],
    created: &str,
) -> std::result::Result<String, String> {
    let mut todo_blocks = Vec::new();
    let mut idea_blocks = Vec::new();
    // Inbox numbers of every item that moves, in the batch's order (Todo blocks first).
    let mut moved_todo = Vec::new();
    let mut moved_ideas = Vec::new();
    for n in selected {
        let Some(item) = doc.item(*n) else { continue };
        let block = doc.block(*n).unwrap_or_default();
        let subtree: Vec<u32> = doc
            .items()
            .iter()
            .filter(|i| i.number == *n || is_descendant(doc, i.number, *n))
            .map(|i| i.number)
            .collect();
        if item.section == Section::Ideas {
            idea_blocks.push(block);
            moved_ideas.extend(subtree);
        } else {
            todo_blocks.push(block);
            moved_todo.extend(subtree);
        }
    }
    let order: Vec<u32> = moved_todo.into_iter().chain(moved_ideas).collect();
    let new_number: HashMap<u32, u32> = order
        .iter()
        .enumerate()
        .map(|(i, old)| (*old, i as u32 + 1))
        .collect();
    for old in &order {
        let Some(item) = doc.item(*old) else { continue };
        for dep in &item.after {
            let done = doc.item(*dep).is_some_and(|d| d.mark == Mark::Done);
            if !new_number.contains_key(dep) && !done {
                return Err(format!(
                    "item {old} waits for item {dep} (@after), which is not selected; select both or neither"
                ));
            }
        }
    }
    let text = batch_document(
        "todo.md",
        created,
        &todo_blocks,
        &idea_blocks,
        doc.newline(),
    );
    Ok(renumber_after(&text, &new_number))
}

fn is_descendant(doc: &TodoDocument, item: u32, ancestor: u32) -> bool {
    let mut cur = doc.item(item).and_then(|i| i.parent);
    while let Some(p) = cur {
        if p == ancestor {
            return true;
        }
        cur = doc.item(p).and_then(|i| i.parent);
    }
    false
}

/// Rewrite every `@after:a,b` token of item lines with `map` (old → new numbers); numbers
/// not in the map (ticked prerequisites) are dropped, and a token left empty is removed.
fn renumber_after(text: &str, map: &HashMap<u32, u32>) -> String {
    let doc = TodoDocument::parse(text);
    let item_lines: std::collections::HashSet<usize> = doc.items().iter().map(|i| i.line).collect();
    let mut out = String::with_capacity(text.len());
    for (idx, line) in text.split_inclusive('\n').enumerate() {
        if !item_lines.contains(&(idx + 1)) || !line.contains("@after:") {
            out.push_str(line);
            continue;
        }
        let mut rewritten = String::new();
        let mut rest = line;
        while let Some(pos) = rest.find("@after:") {
            rewritten.push_str(&rest[..pos]);
            let after = &rest[pos + "@after:".len()..];
            let end = after
                .find(|c: char| c.is_whitespace())
                .unwrap_or(after.len());
            let nums: Vec<String> = after[..end]
                .split(',')
                .filter_map(|s| s.trim().parse::<u32>().ok())
                .filter_map(|n| map.get(&n))
                .map(u32::to_string)
                .collect();
            if nums.is_empty() {
                rewritten = rewritten.trim_end_matches(' ').to_owned();
            } else {
                rewritten.push_str("@after:");
                rewritten.push_str(&nums.join(","));
            }
            rest = &after[end..];
        }
        rewritten.push_str(rest);
        out.push_str(&rewritten);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const INBOX: &str = "# TODO\n\nLast updated: 2026-01-01\n\n## 📋 Todo\n- [ ] first @context:cp-1.md\n  more text\n- [ ] second\n- [ ] third @after:1,2\n- [x] done\n- [ ] fourth @after:4\n\n## 💡 Ideas\n- [ ] idea\n";

    #[test]
    fn selected_blocks_move_with_renumbered_prerequisites() {
        let doc = TodoDocument::parse(INBOX);
        let text = build_batch(&doc, &[2, 5, 6], "2026-11-30").expect("builds");
        let batch = TodoDocument::parse(&text);
        let titles: Vec<&str> = batch.items().iter().map(|i| i.title.as_str()).collect();
        assert_eq!(titles, vec!["second", "fourth", "idea"]);
        assert!(
            text.contains("- [ ] fourth\n"),
            "a ticked prerequisite is dropped: {text}"
        );
        let e = build_batch(&doc, &[3], "2026-11-30").expect_err("unselected prerequisite");
        assert!(e.contains("waits for item 1"), "{e}");
        let text = build_batch(&doc, &[1, 2, 3], "d").expect("builds");
        assert!(
            text.contains("- [ ] third @after:1,2\n") && text.contains("  more text\n"),
            "{text}"
        );
    }

    #[test]
    fn renumbering_maps_old_numbers_to_new() {
        let map = HashMap::from([(7, 1), (9, 2)]);
        assert_eq!(
            renumber_after("## Todo\n- [ ] a @after:9,7 x\n", &map),
            "## Todo\n- [ ] a @after:2,1 x\n"
        );
    }
}
