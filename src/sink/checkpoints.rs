//! After a todo run (DESIGN §4, seed `checkpoint-skill.md`): one line per completed item in
//! the workspace's `completed.md` ([`completed_line`]: the report's hand-off), and the
//! checkpoints of completed items deleted — only the checkpoint each item named when its
//! batch started ([`StartRecord`], never one re-read from a file a teammate could edit
//! since), only one of the store's own checkpoint files ([`Store::own_checkpoint`]), and only
//! when no item that is not done (in the inbox or any batch file) still references it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::todo_marks;
use super::{PlanFile, RunEnd, Sink};
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::events::Reporter;
use crate::run::record::outcome::Outcome;
use crate::run::record::team::OutcomesView;
use crate::source::todo::TodoDocument;
use crate::store::Store;

/// The file in the team workspace that records each item's checkpoint as the batch file
/// named it when the batch started ([`StartRecord`]).
const RECORD: &str = "checkpoints.json";

/// The items' checkpoint references (`@context:`, relative to the store; `None` when an
/// item named none) as the batch file named them when the batch's first run that ran them
/// started, by item number. Later runs add the items it did not have and never change an
/// entry; edits of the batch file since (a person's between runs, or a teammate's) do not
/// change what is deleted.
pub(crate) type StartRecord = BTreeMap<u32, Option<String>>;

/// Merge `starting` (this run's items as its batch file names them now) into the record
/// kept in `workspace`: an item recorded before keeps its entry; a new one is added, and
/// the file rewritten, only then. Returns the record.
///
/// Errors (one line): the record cannot be read, is not a record, or cannot be written.
fn record_start(
    workspace: &Path,
    starting: &StartRecord,
) -> std::result::Result<StartRecord, String> {
    let mut recorded = read_record(workspace)?;
    let before = recorded.clone();
    for (n, entry) in starting {
        recorded.entry(*n).or_insert_with(|| entry.clone());
    }
    if recorded != before {
        let path = workspace.join(RECORD);
        let mut bytes = serde_json::to_vec_pretty(&recorded).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        crate::fsutil::write_atomic(&path, &bytes).map_err(|e| e.to_string())?;
    }
    Ok(recorded)
}

/// The record kept in `workspace` (empty when there is none).
///
/// Errors (one line): it cannot be read or is not a record.
fn read_record(workspace: &Path) -> std::result::Result<StartRecord, String> {
    let path = workspace.join(RECORD);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| format!("{}: not a checkpoint record ({e})", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StartRecord::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The checkpoint clean-up sink of a todo batch.
pub(crate) struct Checkpoints {
    /// The store the batch belongs to.
    store: Store,
    /// The batch file (read after the marks sink has written it).
    batch: PathBuf,
    /// The team workspace, where `completed.md` and `checkpoints.json` are kept.
    workspace: PathBuf,
    /// The run's items, by number, in order.
    numbers: Vec<u32>,
    /// Each item's checkpoint as recorded when the batch started: this run's items as the
    /// plan read them until the run starts recording ([`Sink::follow`]), then the record.
    recorded: std::result::Result<StartRecord, String>,
}

impl Checkpoints {
    /// The sink of a run of `batch` over items `numbers`, whose batch file names the
    /// checkpoints `starting` as the run starts.
    pub(crate) fn new(
        store: Store,
        batch: PathBuf,
        workspace: PathBuf,
        numbers: Vec<u32>,
        starting: StartRecord,
    ) -> Checkpoints {
        Checkpoints {
            store,
            batch,
            workspace,
            numbers,
            recorded: Ok(starting),
        }
    }

    /// The sink that finishes the ending of a run killed as it ended: the checkpoints are
    /// the ones `workspace` recorded ([`StartRecord`]).
    pub(crate) fn recorded_in(
        store: Store,
        batch: PathBuf,
        workspace: PathBuf,
        numbers: Vec<u32>,
    ) -> Checkpoints {
        Checkpoints {
            recorded: read_record(&workspace),
            store,
            batch,
            workspace,
            numbers,
        }
    }
}

impl Reporter for Checkpoints {}

impl Sink for Checkpoints {
    /// The store, whose checkpoints it removes.
    fn writes(&self) -> Vec<PlanFile> {
        vec![PlanFile::new("store", &self.store.dir, "").in_place()]
    }

    /// The run starts: the checkpoints its batch file names now are recorded for the items
    /// the workspace has no record of yet, and the record is what counts from here on.
    fn follow(&mut self, _outcomes: &OutcomesView) {
        if let Ok(starting) = &self.recorded {
            self.recorded = record_start(&self.workspace, starting);
        }
    }

    fn finish(&mut self, run: &mut RunEnd<'_>) -> Result<()> {
        let mut completed = Vec::new();
        for n in &self.numbers {
            if let Some(o) = run.outcomes.outcome(&n.to_string())?
                && o.status == ItemStatus::Completed
            {
                completed.push(o);
            }
        }
        log_completed(&self.workspace, &completed);
        let recorded = match &self.recorded {
            Ok(r) => r,
            Err(why) if !completed.is_empty() => {
                run.warnings.push(format!(
                    "the checkpoints of the items that completed are kept: {why}"
                ));
                return Ok(());
            }
            Err(_) => return Ok(()),
        };
        // Every item of the batch that completed, in this run or an earlier one a kill cut
        // short before its ending (issue 50: the resume plans only the unticked items, so
        // the ticked ones kept their checkpoints for good).
        let mut done: Vec<u32> = completed.iter().filter_map(|o| o.id.parse().ok()).collect();
        for n in recorded.keys().filter(|n| !self.numbers.contains(n)) {
            if run
                .outcomes
                .outcome(&n.to_string())?
                .is_some_and(|o| o.status == ItemStatus::Completed)
            {
                done.push(*n);
            }
        }
        // Which checkpoints are still referenced is read, and they are deleted, under the
        // store lock: no item can move between the files meanwhile.
        let _lock = self.store.lock()?;
        match crate::store::read_todo(&self.batch) {
            Ok((_, doc)) => clean(&self.store, &doc, recorded, &done),
            Err(_) if !completed.is_empty() => {
                let kept = format!(
                    "the checkpoints of the items that completed are kept: the batch file {} \
                     is gone, so which of them are still needed cannot be told",
                    self.batch.display()
                );
                run.unrecorded.push(kept);
                Ok(())
            }
            Err(_) => Ok(()),
        }
    }
}

/// Append one line per completed item to `completed.md`. A write error is warned about.
fn log_completed(workspace: &Path, completed: &[Outcome]) {
    if completed.is_empty() {
        return;
    }
    let path = workspace.join("completed.md");
    let today = crate::store::today();
    let text: String = completed
        .iter()
        .map(|o| completed_line(&today, o))
        .collect();
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        tracing::warn!("cannot append to {}: {e}", path.display());
    }
}

/// The `completed.md` line of completed item `o` on `date`, in the checkpoint seed's format
/// (`checkpoint-skill.md` step 4: `- <ISO date> | T<task-id> | <summary> | files: <paths>`)
/// with the rest of the report's hand-off (seed `task-management-protocol.md`) as further
/// fields: `| created: <paths>` (which of the files are new), `| tests: <tests>` and
/// `| next: <step>; <step>`, each left out when the report has none. `files` lists the
/// modified files, then the created ones. A `|` or line break inside a value is written as
/// `/` or a space, so a line stays one record.
pub(crate) fn completed_line(date: &str, o: &Outcome) -> String {
    let handoff = o.handoff();
    let list = |values: &[String]| -> Vec<String> {
        values
            .iter()
            .map(|v| one_line(v))
            .filter(|s| !s.is_empty())
            .collect()
    };
    let created = list(&handoff.files_created);
    let mut files = list(&handoff.files_modified);
    files.extend(created.iter().cloned());
    let mut line = format!(
        "- {date} | T{} | {} | files:{}{}",
        one_line(&o.id),
        one_line(&o.summary),
        if files.is_empty() { "" } else { " " },
        files.join(", ")
    );
    if !created.is_empty() {
        line.push_str(&format!(" | created: {}", created.join(", ")));
    }
    if let Some(tests) = &handoff.tests {
        line.push_str(&format!(" | tests: {}", one_line(tests)));
    }
    let next = list(&handoff.next_steps);
    if !next.is_empty() {
        line.push_str(&format!(" | next: {}", next.join("; ")));
    }
    line.push('\n');
    line
}

/// `text` on one line without the field separator.
fn one_line(text: &str) -> String {
    text.replace('|', "/")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Delete the checkpoint `recorded` for each of the `completed` items (by number; when the
/// batch started) that is one of the store's own checkpoint files, is still there, and that
/// no open item references (in `doc`, the inbox or any batch file).
///
/// Errors: a checkpoint cannot be removed (exit 3).
fn clean(
    store: &Store,
    doc: &TodoDocument,
    recorded: &StartRecord,
    completed: &[u32],
) -> Result<()> {
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
    for n in completed {
        let Some(reference) = recorded.get(n).and_then(Option::as_deref) else {
            continue;
        };
        if keep.contains(&todo_marks::normalize(reference)) {
            continue;
        }
        if let Some(path) = store.own_checkpoint(reference) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                // An earlier ending removed it already.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove the checkpoint", &path, e)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoints_recorded_when_a_batch_started_are_never_replaced() {
        let ws = tempfile::tempdir().expect("tempdir");
        let start: StartRecord = [(1, Some("cp-a.md".into())), (2, None)].into();
        assert_eq!(record_start(ws.path(), &start).expect("recorded"), start);
        // A later run of the batch, after its file was edited: items 1 and 2 keep what they
        // named when the batch started; item 3 is new.
        let later: StartRecord = [
            (1, Some("todo.md".into())),
            (2, Some("cp-b.md".into())),
            (3, Some("cp-c.md".into())),
        ]
        .into();
        let want: StartRecord = [
            (1, Some("cp-a.md".into())),
            (2, None),
            (3, Some("cp-c.md".into())),
        ]
        .into();
        assert_eq!(record_start(ws.path(), &later).expect("recorded"), want);
        assert_eq!(read_record(ws.path()).expect("read"), want);
        std::fs::write(ws.path().join(RECORD), "junk").expect("write");
        let bad = record_start(ws.path(), &later).expect_err("not a record");
        assert!(bad.contains("not a checkpoint record"), "{bad}");
    }

    #[test]
    fn a_completed_line_carries_the_reports_hand_off_in_the_seeds_format() {
        let mut o = Outcome::not_run("3", "todo-task-3", "t", ItemStatus::Completed, "".into());
        o.summary = "added | the parser".into();
        o.report = Some(serde_json::json!({
            "files_modified": ["src/a.rs"],
            "files_created": ["src/b.rs", "tests/b.rs"],
            "tests": "added",
            "next_steps": ["wire it in", "document\nit"],
        }));
        assert_eq!(
            completed_line("2026-12-01", &o),
            "- 2026-12-01 | T3 | added / the parser | files: src/a.rs, src/b.rs, tests/b.rs \
             | created: src/b.rs, tests/b.rs | tests: added | next: wire it in; document it\n"
        );
        o.report = None;
        assert_eq!(
            completed_line("2026-12-01", &o),
            "- 2026-12-01 | T3 | added / the parser | files:\n"
        );
    }
}
