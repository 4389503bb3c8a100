//! `runner run todo-N.md` (and the second half of `runner resolve`): run the unticked items
//! of a todo batch, one teammate `todo-task-k` per item in team `todo-resolve-N`, then tick
//! what completed, record the rest, and clean up checkpoints (DESIGN §3, §4).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::common::{self, today};
use super::todo::read_doc;
use crate::cli::{RunArgs, RunTodoArgs};
use crate::config::{self, FileDefaults};
use crate::error::{Error, Result};
use crate::item::WorkItem;
use crate::prompt::{DEFAULT_TEAMMATE_TEMPLATE, TeammateTemplate};
use crate::report::ItemStatus;
use crate::run::RunSpec;
use crate::run::outcome::Outcome;
use crate::run::plan;
use crate::run::selection::{Only, Shard};
use crate::run::team::Team;
use crate::sink::output_csv;
use crate::sink::todo_marks::{self, LiveMarks};
use crate::source::todo::{Mark, Section, TodoDocument};
use crate::store::Store;

/// What to run from a batch file.
pub struct TodoRun<'a> {
    /// The store the batch belongs to.
    pub store: &'a Store,
    /// The batch file.
    pub batch: &'a Path,
    /// Also run unticked Ideas.
    pub include_ideas: bool,
    /// Keep the workspace when everything completed.
    pub keep_team: bool,
    /// Runner options.
    pub run: &'a RunArgs,
    /// The exec command.
    pub command: &'a [String],
}

/// `runner run todo-N.md`: the store is the batch file's folder.
pub fn run(args: RunTodoArgs) -> Result<i32> {
    let batch = config::absolute(&args.batch);
    if batch.file_name().is_some_and(|n| n == "todo.md") {
        return Err(Error::Input(format!(
            "{} is the inbox, not a batch; hand its items to teammates with `runner resolve`",
            batch.display()
        )));
    }
    if !batch.is_file() {
        return Err(Error::Input(format!(
            "{}: no such batch file",
            batch.display()
        )));
    }
    let dir = batch.parent().unwrap_or(Path::new("/")).to_owned();
    let project_root = (dir
        .file_name()
        .is_some_and(|n| n == crate::store::STORE_DIR))
    .then(|| dir.parent().map(Path::to_owned))
    .flatten();
    let store = Store { dir, project_root };
    let (_, doc) = read_doc(&batch)?;
    run_batch(
        TodoRun {
            store: &store,
            batch: &batch,
            include_ideas: args.include_ideas,
            keep_team: args.keep_team,
            run: &args.run,
            command: &args.command,
        },
        doc,
    )
}

/// The team name of a batch file: `todo-3.md` → `todo-resolve-3`.
pub fn team_name(batch: &Path) -> String {
    let stem = batch
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        "todo-resolve-{}",
        stem.strip_prefix("todo-").unwrap_or(&stem)
    )
}

/// The items of `doc` this run covers: unticked items of the Todo section (and Ideas when
/// asked), as work items. Prerequisites on ticked items are already met and dropped.
///
/// Errors: one line per problem (a checkpoint that is missing or outside the store, a
/// prerequisite outside the run, a cycle).
pub fn plan_items(
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
        if i.title.trim().is_empty() {
            problems.push(format!(
                "line {}: item {} has no text; write the task or remove the line",
                i.line, i.number
            ));
            continue;
        }
        let checkpoint = match &i.context {
            None => None,
            Some(c) => match store.resolve_checkpoint(c) {
                Ok(p) => Some(p),
                Err(e) => {
                    problems.push(format!("line {}: item {}: {e}", i.line, i.number));
                    None
                }
            },
        };
        let after = i
            .after
            .iter()
            .filter(|n| doc.item(**n).is_none_or(|d| d.mark != Mark::Done))
            .map(u32::to_string)
            .collect();
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
            vars: vec![
                ("item".into(), i.number.to_string()),
                ("title".into(), i.title.clone()),
                ("checkpoint".into(), i.context.clone().unwrap_or_default()),
            ],
            body,
            checkpoint,
            after,
            content: crate::item::content_hash([
                i.title.as_str(),
                i.continuation.as_str(),
                i.context.as_deref().unwrap_or_default(),
            ]),
        });
    }
    if let Err(mut p) = plan::check_dependencies(&items) {
        problems.append(&mut p);
    }
    if problems.is_empty() {
        Ok(items)
    } else {
        Err(problems)
    }
}

/// Run a todo batch file and return the exit code.
pub fn run_batch(r: TodoRun<'_>, doc: TodoDocument) -> Result<i32> {
    let mut items = plan_items(&doc, r.store, r.include_ideas).map_err(|p| {
        Error::Input(format!(
            "{}: {}",
            r.batch.display(),
            p.join(&format!("\n{}: ", r.batch.display()))
        ))
    })?;
    let shard = Shard::parse(
        r.run.shard.as_deref(),
        r.run.shard_count,
        std::env::var("JOB_COMPLETION_INDEX").ok().as_deref(),
    )?;
    let mut rerun = std::collections::HashSet::new();
    match Only::parse(r.run.only.as_deref())? {
        // Unticked items are exactly the ones that did not complete.
        Only::All | Only::Failed => {}
        Only::Ids(ids) => {
            let known: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
            if let Some(bad) = ids.iter().find(|id| !known.contains(id)) {
                return Err(Error::Input(format!(
                    "{}: --only {bad}: no unticked item {bad}; the unticked items are {}",
                    r.batch.display(),
                    known.join(", ")
                )));
            }
            items.retain(|i| ids.contains(&i.id));
            rerun = ids;
        }
    }
    if let Some(s) = shard {
        items.retain(|i| s.contains(&i.id));
    }
    let selected: std::collections::HashSet<String> = items.iter().map(|i| i.id.clone()).collect();
    for i in &mut items {
        // Prerequisites outside this selection cannot finish in this run.
        i.after.retain(|d| {
            selected.contains(d)
                || doc
                    .item(d.parse().unwrap_or(0))
                    .is_some_and(|x| x.mark != Mark::Done)
        });
    }
    let defaults: FileDefaults = r.store.config()?.into();
    let opts = config::run_options(r.run, r.command, &defaults, Some(&r.store.dir))?;
    let template_text = r.store.template("teammate.md", DEFAULT_TEAMMATE_TEMPLATE)?;
    let template =
        TeammateTemplate::new(&r.store.dir.join("templates/teammate.md"), &template_text)?;
    let team_name = team_name(r.batch);
    let workspace = r.store.team_dir(&team_name);
    let cwd = match &r.store.project_root {
        Some(root) => root.clone(),
        None => std::env::current_dir()
            .map_err(|e| Error::Environment(format!("cannot read the current directory: {e}")))?,
    };
    let format = opts.format;
    let dry_run = r.run.dry_run;
    let junit = r.run.junit.clone();
    if items.is_empty() {
        crate::ui::say(
            format,
            format!(
                "Nothing to run: every item of {} is ticked.",
                r.batch.display()
            ),
        );
        return Ok(0);
    }
    let merge = opts.merge;
    let isolation = common::isolation(&opts, &cwd, &team_name, std::slice::from_ref(&r.store.dir))?;
    let isolated = isolation.is_some();
    let spec = Arc::new(RunSpec {
        rerun,
        ..common::run_spec(
            opts,
            isolation,
            team_name.clone(),
            workspace.clone(),
            cwd,
            template,
            None,
        )
    });

    if dry_run {
        let total = items.len() as u64;
        common::print_plan(
            &spec,
            Box::new(items.into_iter().map(Ok)),
            total,
            total,
            shard,
            format,
        )?;
        return Ok(0);
    }

    // Everything is valid: from here on files are written.
    let mut team = Team::open(&team_name, &workspace)?;
    let numbers: Vec<u32> = items.iter().filter_map(|i| i.id.parse().ok()).collect();
    let total = items.len() as u64;
    let titles: std::collections::HashMap<String, String> = items
        .iter()
        .map(|i| (i.id.clone(), i.title.clone()))
        .collect();
    drop(doc);
    let reporter = LiveMarks::new(
        crate::ui::reporter(format),
        r.batch.to_owned(),
        titles.clone(),
    );
    let mut reporter: Box<dyn crate::run::events::Reporter> = Box::new(reporter);
    let mut summary = common::execute(
        spec.clone(),
        &mut team,
        Box::new(items.into_iter().map(Ok)),
        Some(total),
        reporter.as_mut(),
    )?;
    drop(reporter);

    let ids: Vec<String> = numbers.iter().map(u32::to_string).collect();
    common::finish_isolation(
        &spec,
        &mut team,
        &ids,
        merge,
        format == crate::ui::Format::Json,
        &mut summary,
    )?;

    // Final marks, from the recorded outcomes. Re-read the file: only our marks change.
    let (_, mut doc) = read_doc(r.batch)?;
    let mut outcomes: Vec<(u32, Option<Outcome>)> = Vec::new();
    for n in &numbers {
        outcomes.push((*n, team.outcome(&n.to_string())?));
    }
    for (n, o) in &outcomes {
        let title = titles.get(&n.to_string()).cloned().unwrap_or_default();
        let Some(n) = todo_marks::locate(&doc, *n, &title) else {
            eprintln!(
                "warning: item {n} ({title}) is no longer in {}; its result is only in the output table",
                r.batch.display()
            );
            continue;
        };
        todo_marks::apply_outcome(&mut doc, n, o.as_ref());
    }
    let all_todo: Vec<u32> = doc
        .items()
        .iter()
        .filter(|i| i.section == Section::Todo || (r.include_ideas && i.section == Section::Ideas))
        .map(|i| i.number)
        .collect();
    doc.set_frontmatter_value("status", todo_marks::batch_status(&doc, &all_todo));
    crate::fsutil::write_atomic(r.batch, doc.render().as_bytes())?;

    write_table(r.batch, &doc, &all_todo, &mut team, isolated)?;
    if let Some(path) = &junit {
        let ran: Vec<Outcome> = outcomes.iter().filter_map(|(_, o)| o.clone()).collect();
        crate::sink::junit::write(path, &team_name, &ran, summary.elapsed_s)?;
    }
    let completed: Vec<&Outcome> = outcomes
        .iter()
        .filter_map(|(_, o)| o.as_ref())
        .filter(|o| o.status == ItemStatus::Completed)
        .collect();
    log_completed(&workspace, &completed);
    clean_checkpoints(r.store, &doc, &completed)?;

    let everything =
        summary.count(ItemStatus::Completed) == summary.total() && !summary.interrupted;
    drop(team);
    crate::ui::print_summary(&summary, Some(&table_path(r.batch)), &workspace, format);
    if everything && !r.keep_team {
        match std::fs::remove_dir_all(&workspace) {
            Ok(()) => crate::ui::say(
                format,
                "Every item completed; removed the team workspace (keep it with --keep-team).",
            ),
            Err(e) => tracing::warn!("cannot remove {}: {e}", workspace.display()),
        }
    }
    Ok(common::exit_code(&summary))
}

/// `todo-N.workers-output.csv` beside the batch.
pub fn table_path(batch: &Path) -> PathBuf {
    let stem = batch
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    batch.with_file_name(format!("{stem}.workers-output.csv"))
}

fn write_table(
    batch: &Path,
    doc: &TodoDocument,
    numbers: &[u32],
    team: &mut Team,
    isolated: bool,
) -> Result<()> {
    let inputs = vec![
        "item".to_string(),
        "title".to_string(),
        "checkpoint".to_string(),
    ];
    let layout = output_csv::layout(&inputs, None, isolated);
    let mut rows = Vec::new();
    for n in numbers {
        let Some(item) = doc.item(*n) else { continue };
        let values = vec![
            n.to_string(),
            item.title.clone(),
            item.context.clone().unwrap_or_default(),
        ];
        let outcome = team.outcome(&n.to_string())?;
        let missing = if item.mark == Mark::Done {
            ("completed", "")
        } else {
            ("cancelled", "not started")
        };
        rows.push(output_csv::row(&layout, &values, outcome.as_ref(), missing));
    }
    output_csv::write(&table_path(batch), &layout, |emit, _| {
        for row in rows {
            emit(row)?;
        }
        Ok(())
    })
}

/// Append one line per completed item to the workspace's `completed.md` (seed
/// `checkpoint-skill.md`): `- <date> | item <n> | <summary> | files: <paths>`.
fn log_completed(workspace: &Path, completed: &[&Outcome]) {
    if completed.is_empty() {
        return;
    }
    let path = workspace.join("completed.md");
    let mut text = String::new();
    for o in completed {
        let files: Vec<String> = o
            .report
            .as_ref()
            .map(|r| {
                ["files_modified", "files_created"]
                    .iter()
                    .flat_map(|k| {
                        r.get(*k)
                            .and_then(|v| v.as_array())
                            .cloned()
                            .unwrap_or_default()
                    })
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        text.push_str(&format!(
            "- {} | item {} | {} | files: {}\n",
            today(),
            o.id,
            o.summary,
            files.join(", ")
        ));
    }
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        tracing::warn!("cannot append to {}: {e}", path.display());
    }
}

/// Delete the checkpoints of completed items, only inside the store, and only when no item
/// that is not done (in the inbox or any batch file) still references the same file.
fn clean_checkpoints(store: &Store, doc: &TodoDocument, completed: &[&Outcome]) -> Result<()> {
    let mut texts = vec![doc.render()];
    if let Ok(t) = std::fs::read_to_string(store.inbox()) {
        texts.push(t);
    }
    for (_, p) in store.batches() {
        if let Ok(t) = std::fs::read_to_string(&p) {
            texts.push(t);
        }
    }
    let keep = todo_marks::referenced_checkpoints(texts.iter().map(String::as_str));
    for o in completed {
        let Some(item) =
            o.id.parse()
                .ok()
                .and_then(|n: u32| todo_marks::locate(doc, n, &o.title))
                .and_then(|n| doc.item(n))
        else {
            continue;
        };
        let Some(reference) = &item.context else {
            continue;
        };
        if keep.contains(&todo_marks::normalize(reference)) {
            continue;
        }
        if let Ok(path) = store.resolve_checkpoint(reference) {
            std::fs::remove_file(&path)
                .map_err(|e| Error::io("remove the checkpoint", &path, e))?;
        }
    }
    Ok(())
}
