//! Marks in a todo batch file (DESIGN §3, seeds `todo-skill.md` and
//! `task-management-protocol.md`): `[~]` while a teammate works on an item, then, as soon as
//! the item finishes (its outcome journaled), `[x]` with the report's summary on a `> runner:`
//! note line for a completed item, or back to `[ ]` with a note giving the status, the reason
//! and the log for any other outcome; the run's end writes every final mark again. Only the edited
//! characters and note lines change; each edit re-reads the file under the store lock, so
//! what a person or another runner wrote meanwhile is kept; the file is replaced atomically.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

use super::{PlanFile, RunEnd, Sink};
use crate::error::Result;
use crate::report::ItemStatus;
use crate::run::events::{Event, Reporter};
use crate::run::record::outcome::Outcome;
use crate::source::todo::{Mark, Section, TodoDocument};
use crate::store::Store;

/// Set the final mark and note of item `number` from its outcome (`None`: it never started).
pub(crate) fn apply_outcome(doc: &mut TodoDocument, number: u32, outcome: Option<&Outcome>) {
    let (mark, note) = match outcome {
        Some(o) if o.status == ItemStatus::Completed => {
            let summary = if o.summary.is_empty() {
                "completed".to_string()
            } else {
                o.summary.clone()
            };
            (Mark::Done, summary)
        }
        Some(o) => {
            // A reason that names its log already (a verify or exit failure) keeps just it.
            let log = if o.log.is_empty() || o.error.contains("(log: ") {
                String::new()
            } else {
                format!(" (log: {})", o.log)
            };
            (
                Mark::Open,
                format!(
                    "{}: {}{log}",
                    o.status,
                    crate::report::without_status(&o.error, o.status)
                ),
            )
        }
        None => (
            Mark::Open,
            "cancelled: not started, the run was interrupted".to_string(),
        ),
    };
    let _ = doc.set_mark(number, mark);
    let _ = doc.set_note(number, Some(&note));
}

/// How the note `runner reset` leaves on an item it reopened in a batch file starts. The
/// batch's next run runs such an item again even when its team's journal has it completed
/// (`plans::todo_batch::plan`); the run's own note replaces it.
pub(crate) const REOPENED: &str = "reopened by runner reset";

/// The note on an item `runner reset` reopened in `batch` (its file name) for `mark`
/// (`NAME#ROUND/STEP`).
pub(crate) fn reopened_note(mark: &str, batch: &str) -> String {
    format!("{REOPENED} ({mark}); `runner run {batch}` runs it again")
}

/// Whether `item` is open again by `runner reset` and not run since.
pub(crate) fn is_reopened(item: &crate::source::todo::TodoItem) -> bool {
    item.mark != Mark::Done
        && item
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with(REOPENED))
}

/// Whether `item` is unticked with the note a blocked outcome leaves ([`apply_outcome`]:
/// `blocked: <blocker>`): it waits for a person, so `--only failed` leaves it alone.
pub(crate) fn is_blocked(item: &crate::source::todo::TodoItem) -> bool {
    let prefix = format!("{}: ", ItemStatus::Blocked);
    item.mark != Mark::Done && item.note.as_deref().is_some_and(|n| n.starts_with(&prefix))
}

/// `done` when every item in `numbers` is ticked, else `partial`.
pub(crate) fn batch_status(doc: &TodoDocument, numbers: &[u32]) -> &'static str {
    let all = numbers
        .iter()
        .all(|n| doc.item(*n).is_some_and(|i| i.mark == Mark::Done));
    if all { "done" } else { "partial" }
}

/// The checkpoint references of every item that is not done in `texts` (the inbox and every
/// batch file): those checkpoints must be kept.
pub(crate) fn referenced_checkpoints<'a>(
    texts: impl IntoIterator<Item = &'a str>,
) -> HashSet<String> {
    texts
        .into_iter()
        .flat_map(|t| {
            TodoDocument::parse(t)
                .items()
                .iter()
                .filter(|i| i.mark != Mark::Done)
                .filter_map(|i| i.context.clone())
                .collect::<Vec<_>>()
        })
        .map(|c| normalize(&c))
        .collect()
}

/// A checkpoint reference in comparable form (`./cp-1.md` and `cp-1.md` are the same).
pub(crate) fn normalize(reference: &str) -> String {
    reference.trim().trim_start_matches("./").to_owned()
}

/// Where item `number` (titled `title` when the run started) is in `doc` now: the same
/// number if its title still matches, else the first item with that title. A person may have
/// edited the batch file while the run went on; marks must land on the right line or nowhere.
pub(crate) fn locate(doc: &TodoDocument, number: u32, title: &str) -> Option<u32> {
    if doc.item(number).is_some_and(|i| i.title == title) {
        return Some(number);
    }
    doc.items()
        .iter()
        .find(|i| i.title == title)
        .map(|i| i.number)
}

/// The marks sink of a todo batch: `[~]` in the batch file when an item's attempt starts, its
/// final mark and note when it finishes (both written by a thread of its own, never in the
/// dispatcher's loop), then after the run the final mark and note of every item of the run
/// and the batch's `status`. The file is read
/// afresh under the store lock for each edit, so edits a person makes during the run are
/// kept. Live write errors are warned about, never fatal, and a batch file gone by the end
/// is warned about and left to the table and the journal, which is the truth.
pub(crate) struct TodoMarks {
    store: Store,
    path: PathBuf,
    titles: Arc<HashMap<String, String>>,
    numbers: Vec<u32>,
    include_ideas: bool,
    live: Option<(mpsc::Sender<Live>, std::thread::JoinHandle<()>)>,
}

/// An edit for the live thread.
enum Live {
    /// An attempt of this item id started: `[~]`.
    Started(String),
    /// This item finished: its final mark and note.
    Finished(Box<Outcome>),
}

impl TodoMarks {
    /// Mark the items of `path` (a batch file of `store`) whose ids and titles are in
    /// `titles`; `numbers` are the run's items in order; `include_ideas` counts the Ideas in
    /// the batch's status.
    pub(crate) fn new(
        store: Store,
        path: PathBuf,
        titles: HashMap<String, String>,
        numbers: Vec<u32>,
        include_ideas: bool,
    ) -> TodoMarks {
        TodoMarks {
            store,
            path,
            titles: Arc::new(titles),
            numbers,
            include_ideas,
            live: None,
        }
    }

    fn start_live(&mut self) -> &mpsc::Sender<Live> {
        let (store, path) = (self.store.clone(), self.path.clone());
        let titles = self.titles.clone();
        &self
            .live
            .get_or_insert_with(|| {
                let (tx, rx) = mpsc::channel::<Live>();
                let handle = std::thread::spawn(move || {
                    for edit in rx {
                        let (id, what) = match &edit {
                            Live::Started(id) => (id.clone(), "in progress"),
                            Live::Finished(o) => (o.id.clone(), "finished"),
                        };
                        if let Err(e) = mark_live(&store, &path, &titles, &edit) {
                            tracing::warn!("cannot mark item {id} {what}: {e}");
                        }
                    }
                });
                (tx, handle)
            })
            .0
    }
}

fn mark_live(
    store: &Store,
    path: &Path,
    titles: &HashMap<String, String>,
    edit: &Live,
) -> std::result::Result<(), String> {
    let id = match edit {
        Live::Started(id) => id,
        Live::Finished(o) => &o.id,
    };
    let (Ok(number), Some(title)) = (id.parse::<u32>(), titles.get(id)) else {
        return Ok(());
    };
    let _lock = store.lock().map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut doc = TodoDocument::parse(&text);
    let Some(n) = locate(&doc, number, title) else {
        return Ok(());
    };
    match edit {
        Live::Started(_) => {
            if doc.item(n).is_some_and(|i| i.mark == Mark::InProgress)
                || doc.set_mark(n, Mark::InProgress).is_err()
            {
                return Ok(());
            }
        }
        Live::Finished(o) => apply_outcome(&mut doc, n, Some(o)),
    }
    crate::fsutil::write_atomic(path, doc.render().as_bytes()).map_err(|e| e.to_string())
}

impl Reporter for TodoMarks {
    fn event(&mut self, event: &Event) {
        match event {
            Event::AttemptStarted { id, .. } => {
                let _ = self.start_live().send(Live::Started(id.clone()));
            }
            Event::ItemFinished(o) => {
                let _ = self.start_live().send(Live::Finished(o.clone()));
            }
            _ => {}
        }
    }
}

impl Sink for TodoMarks {
    /// The batch file, whose marks and notes it edits.
    fn writes(&self) -> Vec<PlanFile> {
        vec![PlanFile::new("batch file", &self.path, "").in_place()]
    }

    fn finish(&mut self, run: &mut RunEnd<'_>) -> Result<()> {
        // Every live mark lands before the final ones.
        if let Some((tx, handle)) = self.live.take() {
            drop(tx);
            let _ = handle.join();
        }
        let _lock = self.store.lock()?;
        let mut doc = match crate::store::read_todo(&self.path) {
            Ok((_, doc)) => doc,
            Err(e) => {
                let lost = format!(
                    "the batch file {} could not be read at the end of the run ({e}): no item is \
                     ticked; every result is in the output table and the team's journal — put the \
                     file back and run it again to tick what completed",
                    self.path.display()
                );
                run.unrecorded.push(lost);
                return Ok(());
            }
        };
        for n in &self.numbers {
            let title = self.titles.get(&n.to_string()).cloned().unwrap_or_default();
            let outcome = run.outcomes.outcome(&n.to_string())?;
            let Some(at) = locate(&doc, *n, &title) else {
                run.warnings.push(format!(
                    "item {n} ({title}) is no longer in {}; its result is only in the output table",
                    self.path.display()
                ));
                continue;
            };
            apply_outcome(&mut doc, at, outcome.as_ref());
        }
        let all: Vec<u32> = doc
            .items()
            .iter()
            .filter(|i| {
                i.section == Section::Todo || (self.include_ideas && i.section == Section::Ideas)
            })
            .map(|i| i.number)
            .collect();
        doc.set_frontmatter_value("status", batch_status(&doc, &all));
        crate::fsutil::write_atomic(&self.path, doc.render().as_bytes())?;
        // A crash test's kill as a run ends: ticked, the rest of the ending not done.
        crate::fault::point("after_ticks");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BATCH: &str = "---\nstatus: pending\n---\n\n## 📋 Todo\n- [~] one @context:cp-1.md\n  more\n- [ ] two @context:cp-2.md\n";

    fn outcome(status: ItemStatus) -> Outcome {
        let mut o = Outcome::not_run("1", "todo-task-1", "one", status, "no report".into());
        o.summary = "did one".into();
        o.log = "/w/log".into();
        o
    }

    #[test]
    fn completed_items_are_ticked_with_their_summary() {
        let mut doc = TodoDocument::parse(BATCH);
        apply_outcome(&mut doc, 1, Some(&outcome(ItemStatus::Completed)));
        assert_eq!(
            doc.render(),
            "---\nstatus: pending\n---\n\n## 📋 Todo\n- [x] one @context:cp-1.md\n  more\n  > runner: did one\n- [ ] two @context:cp-2.md\n"
        );
        assert_eq!(batch_status(&doc, &[1]), "done");
        assert_eq!(batch_status(&doc, &[1, 2]), "partial");
    }

    #[test]
    fn other_outcomes_go_back_to_open_with_reason_and_log() {
        let mut doc = TodoDocument::parse(BATCH);
        apply_outcome(&mut doc, 1, Some(&outcome(ItemStatus::Failed)));
        let text = doc.render();
        assert!(
            text.contains(
                "- [ ] one @context:cp-1.md\n  more\n  > runner: failed: no report (log: /w/log)\n"
            ),
            "{text}"
        );
        // Running again replaces the note instead of stacking notes.
        apply_outcome(&mut doc, 1, Some(&outcome(ItemStatus::Completed)));
        assert_eq!(doc.render().matches("> runner:").count(), 1);
        // A reason that names its own log is not given a second one.
        let mut verify = outcome(ItemStatus::Failed);
        verify.error = "verify `test -s x` exited with code 1 (log: /w/verify.log)".into();
        apply_outcome(&mut doc, 1, Some(&verify));
        let text = doc.render();
        assert!(
            text.contains(
                "> runner: failed: verify `test -s x` exited with code 1 (log: /w/verify.log)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn checkpoints_of_open_items_anywhere_are_kept() {
        let inbox = "## Todo\n- [ ] shares @context:./cp-1.md\n- [x] done @context:cp-3.md\n";
        let refs = referenced_checkpoints([inbox, BATCH]);
        assert!(refs.contains("cp-1.md") && refs.contains("cp-2.md"));
        assert!(!refs.contains("cp-3.md"));
    }
}
