//! The todo batch source adapter (DESIGN §3, §4, seed `todo-skill.md`): the unticked items of
//! a batch file `todo-N.md` become a [`Plan`] for team `todo-resolve-N` — one teammate
//! `todo-task-k` per item — with the sinks that tick what completed, write
//! `todo-N.workers-output.csv`, and clean up checkpoints.

use crate::sink::proposals::Proposals;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::item::WorkItem;
use crate::options::selection::Only;
use crate::prompt::{DEFAULT_TEAMMATE_TEMPLATE, TeammateTemplate};
use crate::run::RunSpec;
use crate::run::record::team::BatchId;
use crate::schedule::plan::{self, ItemList, Plan, PlanFile, WorkspaceFrom};
use crate::settings::Settings;
use crate::sink::Sinks;
use crate::sink::checkpoints::Checkpoints;
use crate::sink::todo_marks::TodoMarks;
use crate::sink::todo_table::{TableFile, TodoTable};
pub(crate) use crate::source::todo::team_name;
use crate::source::todo::{BatchRef, Mark, MovedPrerequisite, Section, TodoDocument};
use crate::store::Store;

/// Which todo batch to run, and how.
pub(crate) struct TodoBatch<'a> {
    /// The store the batch belongs to.
    pub store: &'a Store,
    /// The batch file (absolute).
    pub batch: &'a Path,
    /// Also run unticked Ideas.
    pub include_ideas: bool,
    /// Keep the workspace when everything completed.
    pub keep_team: bool,
}

/// N of a batch file `todo-N.md`.
fn batch_number(batch: &Path) -> Option<u32> {
    batch
        .file_name()?
        .to_str()?
        .strip_prefix("todo-")?
        .strip_suffix(".md")?
        .parse()
        .ok()
}

/// `todo-N.workers-output.csv` beside the batch ([`crate::sink::todo_table::path_for`]).
pub(crate) fn table_path(batch: &Path) -> PathBuf {
    crate::sink::todo_table::path_for(batch)
}

/// `todo-N.archive.jsonl` beside the batch: the team's record once its workspace is removed
/// ([`crate::run::record::archive::beside_batch`]).
pub(crate) fn archive_path(batch: &Path) -> PathBuf {
    crate::run::record::archive::beside_batch(batch)
}

/// The values a todo item offers `--verify` placeholders: `{item}` (its number), `{title}`,
/// `{checkpoint}` (the checkpoint file named by `@context:`, or empty).
pub(crate) const ITEM_VARS: [&str; 3] = ["item", "title", "checkpoint"];

/// The items of `doc` this run covers: unticked items of the Todo section (and Ideas when
/// asked), as work items. Prerequisites on ticked items are already met and dropped.
///
/// Errors: one line per problem (a checkpoint that is missing or outside the store, a
/// prerequisite outside the run, a cycle).
pub(crate) fn plan_items(
    doc: &TodoDocument,
    store: &Store,
    include_ideas: bool,
) -> std::result::Result<Vec<WorkItem>, Vec<String>> {
    let wanted = |s: Section| s == Section::Todo || (include_ideas && s == Section::Ideas);
    let mut problems = Vec::new();
    let mut items = Vec::new();
    for i in doc
        .items()
        .iter()
        .filter(|i| wanted(i.section) && i.mark != Mark::Done)
    {
        let Some(checkpoint) = item_checks(i, store, &mut problems) else {
            continue;
        };
        if let Some(b) = i.after_batches.first() {
            problems.push(format!(
                "line {}: item {} waits for {b}, an item of another file; in a batch file \
                 @after names items of the same file",
                i.line, i.number
            ));
        }
        let after = open_prerequisites(doc, i);
        let body = if i.continuation.trim().is_empty() {
            i.title.clone()
        } else {
            format!("{}\n{}", i.title, i.continuation)
        };
        items.push(WorkItem {
            id: i.number.to_string(),
            title: i.title.clone(),
            line: i.line as u64,
            teammate: format!("todo-task-{}", i.number),
            vars: ITEM_VARS
                .iter()
                .map(|v| v.to_string())
                .zip([
                    i.number.to_string(),
                    i.title.clone(),
                    i.context.clone().unwrap_or_default(),
                ])
                .collect(),
            body,
            inline: Vec::new(),
            checkpoint,
            after,
            content: crate::item::content_hash([
                i.title.as_str(),
                i.continuation.as_str(),
                i.context.as_deref().unwrap_or_default(),
            ]),
            stage: None,
            profile: None,
            candidate: None,
        });
    }
    if let Err(mut p) = plan::check_dependencies(items.iter().map(plan::Waits::from)) {
        problems.append(&mut p);
    }
    if problems.is_empty() {
        Ok(items)
    } else {
        Err(problems)
    }
}

/// The prerequisites of `item` (of `doc`) still to complete, as ids: a ticked one is met.
fn open_prerequisites(doc: &TodoDocument, item: &crate::source::todo::TodoItem) -> Vec<String> {
    item.after
        .iter()
        .filter(|n| doc.item(**n).is_none_or(|d| d.mark != Mark::Done))
        .map(u32::to_string)
        .collect()
}

/// Items moving from the inbox into a new batch file (`runner resolve`), checked and ready
/// to be written.
pub(crate) struct Move {
    /// The new batch file `todo-N.md`.
    pub batch_path: PathBuf,
    /// Its text and what it parses to.
    pub batch_text: String,
    /// The parsed batch.
    pub batch_doc: TodoDocument,
    /// The inbox left behind, its "last updated" date set to `today`.
    pub inbox_text: String,
    /// Inbox items whose prerequisite moved: their `@after:` names it in the batch now.
    pub moved: Vec<MovedPrerequisite>,
}

/// Plan moving the top-level items `selected` of `inbox` into batch file
/// `todo-<number>.md` of `store`, checking the batch (checkpoints inside the store,
/// prerequisites) before anything is written. `finished` are the batch items (`@after:todo-N#K`)
/// already ticked.
///
/// Errors (exit 2, naming the inbox): a selected item waits for one that is neither
/// selected nor done, or for a batch item that has not completed; a checkpoint missing or
/// outside the store.
pub(crate) fn prepare_move(
    store: &Store,
    inbox: &TodoDocument,
    selected: &[u32],
    number: u32,
    finished: &HashSet<BatchRef>,
    today: &str,
) -> Result<Move> {
    let inbox_path = store.inbox();
    let bad = |e: &dyn std::fmt::Display| Error::input_at(&inbox_path, None, e);
    // Checked on the inbox, so that a problem names the inbox's line and number (not the
    // batch file's, which does not exist yet).
    let mut problems = Vec::new();
    for n in selected {
        if let Some(i) = inbox.item(*n) {
            item_checks(i, store, &mut problems);
        }
    }
    if !problems.is_empty() {
        return Err(bad(&problems.join("; ")));
    }
    let batch_text = inbox
        .extract_batch(selected, today, finished)
        .map_err(|e| bad(&e))?;
    // Checked by the inbox's numbers and lines (the ones the user chose by), not the batch's.
    let moving: Vec<(String, u64, Vec<String>)> = inbox
        .moving(selected)
        .into_iter()
        .filter_map(|n| inbox.item(n))
        .filter(|i| i.mark != Mark::Done)
        .map(|i| {
            (
                i.number.to_string(),
                i.line as u64,
                open_prerequisites(inbox, i),
            )
        })
        .collect();
    plan::check_dependencies(moving.iter().map(|(id, line, after)| plan::Waits {
        id,
        line: *line,
        after,
    }))
    .map_err(|p| bad(&p.join("; ")))?;
    let batch_doc = TodoDocument::parse(&batch_text);
    plan_items(&batch_doc, store, true).map_err(|p| bad(&p.join("; ")))?;
    let rest = inbox
        .remove_extracted(selected, number)
        .map_err(|e| bad(&e))?;
    let mut rest_doc = TodoDocument::parse(&rest.text);
    rest_doc.set_last_updated(today);
    Ok(Move {
        batch_path: store.dir.join(format!("todo-{number}.md")),
        batch_text,
        batch_doc,
        inbox_text: rest_doc.render(),
        moved: rest.moved,
    })
}

/// The checks of one item that hold wherever it is (inbox or batch): it has text, and its
/// checkpoint, if any, exists inside the store. Problems are pushed onto `problems` naming
/// the item's line and number in its own file; `None` when it has no text, else its
/// checkpoint path (`Some(None)`: it names none or a bad one).
fn item_checks(
    i: &crate::source::todo::TodoItem,
    store: &Store,
    problems: &mut Vec<String>,
) -> Option<Option<std::path::PathBuf>> {
    if i.title.trim().is_empty() {
        problems.push(format!(
            "line {}: item {} has no text; write the task or remove the line",
            i.line, i.number
        ));
        return None;
    }
    Some(match &i.context {
        None => None,
        Some(c) => match store.resolve_checkpoint(c) {
            Ok(p) => Some(p),
            Err(e) => {
                problems.push(format!("line {}: item {}: {e}", i.line, i.number));
                None
            }
        },
    })
}

/// The items of `doc` that the team workspace's journal has outcomes of, when every item is
/// ticked but the workspace is still there (a run killed as it ended): what the finishing
/// run writes its table and removes checkpoints for. Empty when there is no such workspace.
///
/// Errors: the journal cannot be read.
fn ended_items(doc: &TodoDocument, workspace: &Path) -> Result<Vec<WorkItem>> {
    let journal = workspace.join("journal.jsonl");
    if !journal.is_file() {
        return Ok(Vec::new());
    }
    let ledger = crate::run::record::journal::replay(&journal)?.ledger;
    Ok(doc
        .items()
        .iter()
        .filter(|i| ledger.get(&i.number.to_string()).is_some())
        .map(|i| WorkItem {
            id: i.number.to_string(),
            title: i.title.clone(),
            line: i.line as u64,
            teammate: format!("todo-task-{}", i.number),
            vars: Vec::new(),
            body: i.title.clone(),
            inline: Vec::new(),
            checkpoint: None,
            after: Vec::new(),
            content: String::new(),
            stage: None,
            profile: None,
            candidate: None,
        })
        .collect())
}

/// For `runner clean`: finish the ending a todo run killed as it ended left undone, before
/// its workspace `ws` is removed — when every Todo item of the batch file it belongs to is
/// ticked, write the table and remove the checkpoints of its completed items, from the
/// workspace's journal (the archive `archive` is what the table's `log` names). Returns
/// whether it did (not a todo team, its batch file gone, or an item unticked: nothing).
///
/// Errors: the batch file, the journal or the store cannot be read, or the table written.
pub(crate) fn finish_ending(store: &Store, ws: &Path, archive: Option<&Path>) -> Result<bool> {
    let Some(recorded) = crate::run::record::team::recorded_batch(ws)? else {
        return Ok(false);
    };
    let batch = PathBuf::from(recorded.input);
    if !batch.is_file() || batch.extension().is_none_or(|e| e != "md") {
        return Ok(false);
    }
    let (_, doc) = crate::store::read_todo(&batch)?;
    let all_ticked = doc
        .items()
        .iter()
        .filter(|i| i.section == Section::Todo)
        .all(|i| i.mark == Mark::Done);
    let items = ended_items(&doc, ws)?;
    if !all_ticked || items.is_empty() {
        return Ok(false);
    }
    let numbers: Vec<u32> = items.iter().filter_map(|i| i.id.parse().ok()).collect();
    let journal = ws.join("journal.jsonl");
    let mut outcomes = crate::run::record::team::OutcomeIndex::of_journal(&journal)?;
    let summary = crate::run::events::RunSummary::default();
    let mut end = crate::sink::RunEnd {
        summary: &summary,
        outcomes: &mut outcomes,
        unrecorded: Vec::new(),
        warnings: Vec::new(),
        archive,
        unchanged: None,
        stamps: Vec::new(),
    };
    let mut table = TodoTable::new(TableFile {
        store: store.clone(),
        batch: batch.clone(),
        path: table_path(&batch),
        archive: archive_path(&batch),
        include_ideas: false,
        isolated: ws.join("worktrees").is_dir(),
        guard_formulas: true,
        items: doc
            .items()
            .iter()
            .filter(|i| numbers.contains(&i.number))
            .map(|i| {
                (
                    i.number,
                    i.title.clone(),
                    i.context.clone().unwrap_or_default(),
                )
            })
            .collect(),
    });
    let mut checkpoints = Checkpoints::recorded_in(store.clone(), batch, ws.to_owned(), numbers);
    use crate::sink::Sink;
    table.finish(&mut end)?;
    checkpoints.finish(&mut end)?;
    // No run is going on to show them as events.
    for w in end.unrecorded.iter().chain(&end.warnings) {
        crate::ui::warn(w);
    }
    Ok(true)
}

/// Build the plan of a todo batch whose text is `doc`; `None` when every item is ticked
/// (and no run's ending is left to finish).
///
/// Errors: bad items (exit 2, one line each, naming the batch file), `--only` naming an item
/// that is not unticked, a teammate template that does not parse, isolation that cannot be
/// set up, a bad archive beside the batch.
pub(crate) fn plan(
    b: TodoBatch<'_>,
    doc: &TodoDocument,
    settings: Settings,
) -> Result<Option<Plan>> {
    if let crate::options::best_of::Judge::Stage(name) = &settings.judge {
        return Err(Error::Usage(format!(
            "--judge stage {name}: a todo batch has no stages to judge with; give a CSV batch whose BATCH.md declares stage `{name}`, or another --judge"
        )));
    }
    let mut items = plan_items(doc, b.store, b.include_ideas).map_err(|p| {
        Error::Usage(format!(
            "{}: {}",
            b.batch.display(),
            p.join(&format!("\n{}: ", b.batch.display()))
        ))
    })?;
    let unticked = !items.is_empty();
    let rerun = rerun(&b, doc, &mut items, &settings.only)?;
    keep_shard(&b, doc, &mut items, settings.shard)?;
    let template_text = b.store.template("teammate.md", DEFAULT_TEAMMATE_TEMPLATE)?;
    let template =
        TeammateTemplate::new(&b.store.dir.join("templates/teammate.md"), &template_text)?;
    let team = team_name(b.batch);
    let cwd = match &b.store.project_root {
        Some(root) => root.clone(),
        None => std::env::current_dir()
            .map_err(|e| Error::Environment(format!("cannot read the current directory: {e}")))?,
    };
    let origin = b.store.team_origin(&team);
    let workspace = crate::schedule::layout::place_workspace(&origin, &settings, &cwd);
    // Every item is ticked, yet the team's workspace is still there: a run was killed as it
    // ended (its table, checkpoints, archive or workspace removal not done). This run runs
    // nothing and finishes that ending.
    let ending = items.is_empty()
        && match settings.only {
            Only::All => true,
            // Left with none because every unticked item is blocked: no ending to finish.
            Only::Failed => !unticked,
            _ => false,
        };
    let run_now = if ending {
        items = ended_items(doc, &workspace)?;
        Vec::new()
    } else {
        items.clone()
    };
    if items.is_empty() {
        return Ok(None);
    }
    let spec = RunSpec {
        rerun,
        origin,
        ..RunSpec::new(team, workspace, cwd, settings, template)?
    };
    // A bad archive (which this run may extend, and whose outcomes the table's rows of items
    // not run come from) is found now, while nothing is written, not when the run is over.
    let archive_file = archive_path(b.batch);
    if archive_file.exists() {
        crate::run::record::archive::read(&archive_file)?;
    }
    let checkpoints: Vec<PathBuf> = items.iter().filter_map(|i| i.checkpoint.clone()).collect();
    let sinks = sinks(&b, doc, &items, &run_now, &spec);
    let (selected, total) = (run_now.len() as u64, items.len() as u64);
    let batch = BatchId::new(b.batch, String::new());
    let source = Arc::new(ItemList(run_now));
    Ok(Some(Plan {
        selected,
        total,
        archive: (!b.keep_team).then_some(archive_file),
        inputs: checkpoints
            .iter()
            .map(|c| PlanFile::new("checkpoint", c, ""))
            .collect(),
        named_in_prompt: checkpoints,
        guarded: vec![b.store.dir.clone()],
        ..Plan::new(
            spec,
            source,
            sinks,
            batch,
            WorkspaceFrom::Store,
            table_path(b.batch),
        )
    }))
}

/// The ids run even when the team's journal has them completed, and (with `--only ID`)
/// `items` narrowed to those named.
///
/// `--only failed` drops the items whose note says they are blocked, `--only blocked` keeps
/// only those.
///
/// Errors: `--only` naming an item that is not unticked (exit 2, naming the batch file and
/// what is left to run).
fn rerun(
    b: &TodoBatch<'_>,
    doc: &TodoDocument,
    items: &mut Vec<WorkItem>,
    only: &Only,
) -> Result<HashSet<String>> {
    // Unticked items are the ones that did not complete, and those `runner reset` reopened:
    // they run again even if the team's journal has them completed.
    let reopened = || {
        doc.items()
            .iter()
            .filter(|i| crate::sink::todo_marks::is_reopened(i))
            .map(|i| i.number.to_string())
            .collect()
    };
    // As in a CSV batch, a blocked item (its note says so) waits for a person: `--only
    // failed` leaves it alone, `--only blocked` runs only those.
    let blocked = |i: &WorkItem| {
        doc.item(i.id.parse().unwrap_or(0))
            .is_some_and(crate::sink::todo_marks::is_blocked)
    };
    match only {
        Only::All => Ok(reopened()),
        Only::Failed => {
            items.retain(|i| !blocked(i));
            Ok(reopened())
        }
        Only::Blocked => {
            items.retain(blocked);
            Ok(reopened())
        }
        Only::Ids(ids) => {
            let known: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
            if let Some(bad) = ids.iter().find(|id| !known.contains(id)) {
                let idea = doc
                    .item(bad.parse().unwrap_or(0))
                    .is_some_and(|i| i.section == Section::Ideas && i.mark != Mark::Done);
                let left = match known.as_slice() {
                    _ if idea => format!("item {bad} is an idea: add --include-ideas to run it"),
                    [] if b.include_ideas => "there are none: every item is ticked".to_owned(),
                    [] => "there are none: every Todo item is ticked".to_owned(),
                    _ => format!("the unticked items are {}", known.join(", ")),
                };
                return Err(Error::Usage(format!(
                    "{}: --only {bad}: no unticked item {bad}; {left}",
                    b.batch.display(),
                )));
            }
            items.retain(|i| ids.contains(&i.id));
            Ok(ids.clone())
        }
    }
}

/// Why a run of `doc` with `only` has nothing to run although items are unticked: each is
/// blocked (`--only failed`) or none is (`--only blocked`). `None` when every item is ticked.
pub(crate) fn left_alone(doc: &TodoDocument, only: &Only, include_ideas: bool) -> Option<String> {
    let wanted = |s: Section| s == Section::Todo || (include_ideas && s == Section::Ideas);
    let unticked: Vec<&crate::source::todo::TodoItem> = doc
        .items()
        .iter()
        .filter(|i| wanted(i.section) && i.mark != Mark::Done)
        .collect();
    let numbers = |v: &[&crate::source::todo::TodoItem]| {
        v.iter()
            .map(|i| i.number.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    match only {
        _ if unticked.is_empty() => None,
        Only::Failed => Some(format!(
            "every unticked item is blocked, waiting for a person (items {0}); `--only blocked` or `--only {0}` runs them again",
            numbers(&unticked)
        )),
        Only::Blocked => Some(format!(
            "no unticked item is blocked; the unticked items are {}",
            numbers(&unticked)
        )),
        _ => None,
    }
}

/// Drop the prerequisites a ticked item already met, then keep the items of `shard`.
///
/// Errors: an item waits for one of another shard (exit 2, naming the batch file).
fn keep_shard(
    b: &TodoBatch<'_>,
    doc: &TodoDocument,
    items: &mut Vec<WorkItem>,
    shard: Option<crate::options::selection::Shard>,
) -> Result<()> {
    for i in items.iter_mut() {
        // A ticked prerequisite completed in an earlier run: it is met.
        i.after.retain(|d| {
            doc.item(d.parse().unwrap_or(0))
                .is_some_and(|x| x.mark != Mark::Done)
        });
    }
    plan::check_shards(
        shard,
        items.iter().map(|i| (i.id.as_str(), i.after.as_slice())),
    )
    .map_err(|why| Error::input_at(b.batch, None, why))?;
    if let Some(s) = shard {
        items.retain(|i| s.contains(&i.id));
    }
    Ok(())
}

/// The sinks of a todo batch run of `items` (of `doc`; `run_now`, those it starts) under
/// `spec`: the marks in the batch file, the todo table, the checkpoint clean-up (with the
/// checkpoints `run_now` name as the run starts), and the teammates' proposals for the inbox
/// (a batch file named `todo-N.md`).
fn sinks(
    b: &TodoBatch<'_>,
    doc: &TodoDocument,
    items: &[WorkItem],
    run_now: &[WorkItem],
    spec: &RunSpec,
) -> Sinks {
    let titles: HashMap<String, String> = items
        .iter()
        .map(|i| (i.id.clone(), i.title.clone()))
        .collect();
    let numbers: Vec<u32> = items.iter().filter_map(|i| i.id.parse().ok()).collect();
    let table_items = numbers
        .iter()
        .filter_map(|n| doc.item(*n))
        .map(|i| {
            (
                i.number,
                i.title.clone(),
                i.context.clone().unwrap_or_default(),
            )
        })
        .collect();
    let mut sinks = Sinks::default();
    sinks.push(Box::new(TodoMarks::new(
        b.store.clone(),
        b.batch.to_owned(),
        titles,
        numbers.clone(),
        b.include_ideas,
    )));
    sinks.push(Box::new(TodoTable::new(TableFile {
        store: b.store.clone(),
        batch: b.batch.to_owned(),
        path: table_path(b.batch),
        archive: archive_path(b.batch),
        include_ideas: b.include_ideas,
        isolated: spec.isolation.is_some(),
        guard_formulas: !spec.settings.keep_formulas,
        items: table_items,
    })));
    // What the batch file names now is recorded as the run starts, for the items it runs
    // that its workspace has no record of (none when it only finishes an ending); what is
    // deleted at the end comes from that record.
    let starting = run_now
        .iter()
        .filter_map(|i| i.id.parse().ok().and_then(|n| doc.item(n)))
        .map(|i| (i.number, i.context.clone()))
        .collect();
    sinks.push(Box::new(Checkpoints::new(
        b.store.clone(),
        b.batch.to_owned(),
        spec.workspace.clone(),
        numbers,
        starting,
    )));
    if let Some(n) = batch_number(b.batch) {
        sinks.push(Box::new(Proposals::new(b.store.clone(), n)));
    }
    sinks
}
