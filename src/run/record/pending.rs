//! An item of a team that no run has started yet (`runner show` / `runner logs` of it): where
//! it is — waiting for its prerequisites, not reached by an interrupted run, or still to come
//! in the batch — and the run that will start it. Read from the team's `team.json` and its
//! batch (the `todo-N.md`, or the input file its `batch.json` names); reads only.

use std::path::Path;

use crate::run::record::team::Snapshot;
use crate::run::record::workspace::Found;

/// Why a pending item has not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wait {
    /// It waits for these items (its prerequisites) to complete.
    Prerequisites(Vec<String>),
    /// The run was interrupted before it reached it.
    NotReached,
    /// It is in the batch and no run has started it yet.
    Queued,
}

/// An item of a team with no attempt started and no outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    /// Its id.
    pub id: String,
    /// What it is: its title, or which row of which input.
    pub title: String,
    /// Why it has not started.
    pub wait: Wait,
    /// The pid of the run going on now, which starts it when its turn comes.
    pub live: Option<u32>,
    /// The command that starts it: the one going on, or the one that runs the batch again.
    pub command: Option<String>,
}

/// Item `name` (an id, or a todo item's teammate `todo-task-N`) of the team `found` when it
/// is one that no run has started: `None` when the team's batch has no such item (or it
/// cannot be read), or it has an outcome.
pub(crate) fn find(found: &Found, name: &str) -> Option<Pending> {
    let s = found.snapshot().ok()?;
    let (live, command) = match s.is_live() {
        true => (Some(s.pid), live_command(&s)),
        false => (None, crate::run::record::resume::run_again(found, &s)),
    };
    let pending = |id: &str, title: &str, wait: Wait| Pending {
        id: id.to_owned(),
        title: title.to_owned(),
        wait,
        live,
        command: command.clone(),
    };
    if let Some(w) = s
        .waiting
        .iter()
        .find(|w| w.id == name || w.teammate == name)
    {
        return Some(pending(
            &w.id,
            &w.title,
            Wait::Prerequisites(w.after.clone()),
        ));
    }
    if let Some(n) = s.not_started.iter().find(|n| n.id == name) {
        return Some(pending(&n.id, &n.title, Wait::NotReached));
    }
    let Found::Workspace(dir) = found else {
        return None;
    };
    let batch = crate::run::record::team::recorded_batch(dir).ok()??;
    let input = Path::new(&batch.input);
    let (id, title) = match input.extension().is_some_and(|e| e == "md") {
        true => todo_item(input, name)?,
        false => {
            let column = batch.ids.as_deref().and_then(|i| i.strip_prefix("column "));
            input_row(input, column, &s, name)?
        }
    };
    let wait = match s.state.as_str() {
        "interrupted" => Wait::NotReached,
        _ => Wait::Queued,
    };
    Some(pending(&id, &title, wait))
}

/// The command line of the run going on, as it was given (`runner …`).
fn live_command(s: &Snapshot) -> Option<String> {
    let args = s.command.get(1..)?;
    let words: Vec<&str> = std::iter::once("runner")
        .chain(args.iter().map(String::as_str))
        .collect();
    Some(crate::run::record::resume::shell_words(&words))
}

/// The unticked item of todo batch file `batch` that `name` names (its number, or its
/// teammate `todo-task-N`): its id and title.
fn todo_item(batch: &Path, name: &str) -> Option<(String, String)> {
    let number: u32 = name
        .strip_prefix("todo-task-")
        .unwrap_or(name)
        .parse()
        .ok()?;
    let (_, doc) = crate::store::read_todo(batch).ok()?;
    let item = doc.item(number)?;
    (item.mark != crate::source::todo::Mark::Done).then(|| (number.to_string(), item.title.clone()))
}

/// The row of input `input` (ids from `column`, else row numbers) that `name` names — with
/// stages, `ROW/STAGE` of one of `s.stages` —: the id and which row it is.
fn input_row(
    input: &Path,
    column: Option<&str>,
    s: &Snapshot,
    name: &str,
) -> Option<(String, String)> {
    let (row_id, stage) = match name.rsplit_once('/') {
        Some((row, stage)) if s.stages.iter().any(|st| st == stage) => (row, Some(stage)),
        _ => (name, None),
    };
    let delimiter = crate::source::csv_input::delimiter_for("", None, Some(input)).ok()?;
    let table = crate::source::input::input_format(input)
        .scan(input, None, delimiter, column, None)
        .ok()?;
    let row = table.rows().ok()?.flatten().find(|r| r.id == row_id)?;
    let title = match stage {
        Some(st) => format!(
            "stage {st} of row {} (line {}) of {}",
            row.number,
            row.line,
            input.display()
        ),
        None => format!(
            "row {} (line {}) of {}",
            row.number,
            row.line,
            input.display()
        ),
    };
    Some((name.to_owned(), title))
}
