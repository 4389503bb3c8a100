//! `runner run todo-N.md` (and the second half of `runner resolve`): run the unticked items
//! of a todo batch as team `todo-resolve-N` (DESIGN §3, §4).

use std::path::Path;
use std::sync::Arc;

use super::batch::carry_out;
use super::todo::{read_doc, store_settings};
use crate::cli::RunTodoArgs;
use crate::error::{Error, Result};
use crate::plans::todo_batch::{self, TodoBatch};
use crate::run::backend::Backend;
use crate::settings::Settings;
use crate::source::todo::TodoDocument;
use crate::store::Store;

/// `runner run todo-N.md`: the store is the batch file's folder.
pub(crate) fn run(args: RunTodoArgs) -> Result<i32> {
    let batch = crate::fsutil::absolute(&args.batch);
    if batch.file_name().is_some_and(|n| n == "todo.md") {
        return Err(Error::input_at(
            &batch,
            None,
            "this is the inbox, not a batch; hand its items to teammates with `runner resolve`",
        ));
    }
    if !batch.is_file() {
        return Err(Error::missing_file(
            &batch,
            "batch file",
            "give the path of a todo-N.md that `runner resolve` wrote",
        ));
    }
    let dir = batch.parent().unwrap_or(Path::new("/")).to_owned();
    let project_root = (dir
        .file_name()
        .is_some_and(|n| n == crate::store::STORE_DIR))
    .then(|| dir.parent().map(Path::to_owned))
    .flatten();
    let store = Store { dir, project_root };
    // A move cut short may have written this very batch file: finished (or undone) first.
    store.settle_move()?;
    if !batch.is_file() {
        return Err(Error::missing_file(
            &batch,
            "batch file",
            "a `runner resolve` was stopped while it wrote it, and it was removed; its items are still in the inbox",
        ));
    }
    let (text, doc) = read_doc(&batch)?;
    if doc.items().is_empty() {
        // "Nothing to run" would pass a file that is no batch at all (exit 0).
        let hint = match text.trim_start_matches('\u{feff}').starts_with("---") {
            true => format!(
                "; a BATCH.md with a CSV is run with `runner batch {}`",
                batch.display()
            ),
            false => String::new(),
        };
        return Err(Error::input_at(
            &batch,
            None,
            format!(
                "holds no items (`- [ ] text` lines), so it is not a todo batch; `runner \
                 resolve` writes batch files from the inbox{hint}"
            ),
        ));
    }
    let (settings, backend) = store_settings(&store, &args.run, &args.command)?;
    let batch = TodoBatch {
        store: &store,
        batch: &batch,
        include_ideas: args.include_ideas,
        keep_team: args.keep_team,
    };
    run_batch(batch, &doc, settings, backend)
}

/// Run the todo batch `doc` with validated `settings` on `backend` and return the exit code.
///
/// Errors: the plan's (bad items, template, isolation) and the pipeline's.
pub(crate) fn run_batch(
    batch: TodoBatch<'_>,
    doc: &TodoDocument,
    settings: Settings,
    backend: Arc<dyn Backend>,
) -> Result<i32> {
    let format = settings.format;
    let path = batch.batch.to_owned();
    let only = settings.only.clone();
    let include_ideas = batch.include_ideas;
    let plan = todo_batch::plan(batch, doc, settings)?;
    if plan.is_none()
        && let Some(why) = todo_batch::left_alone(doc, &only, include_ideas)
    {
        crate::ui::say(
            format,
            format!("Nothing to run in {}: {why}.", path.display()),
        );
        return Ok(crate::error::EXIT_OK);
    }
    run_plan(plan, format, &path, backend)
}

/// Run a todo batch's `plan` (`None`: every item of the batch file `path` is ticked) and
/// show what it did ([`carry_out`]).
///
/// Errors: the pipeline's.
pub(crate) fn run_plan(
    plan: Option<crate::schedule::plan::Plan>,
    format: crate::options::Format,
    path: &Path,
    backend: Arc<dyn Backend>,
) -> Result<i32> {
    match plan {
        Some(plan) if plan.selected == 0 => {
            crate::ui::say(
                format,
                format!(
                    "Every item of {} is ticked; finishing the ending an earlier run left undone (the table, checkpoints, archive, workspace).",
                    path.display()
                ),
            );
            carry_out(plan, backend)
        }
        Some(plan) => carry_out(plan, backend),
        None => {
            crate::ui::say(
                format,
                format!(
                    "Nothing to run: every item of {} is ticked.",
                    path.display()
                ),
            );
            Ok(0)
        }
    }
}
