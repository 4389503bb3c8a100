//! After a todo run (DESIGN §4, seed `checkpoint-skill.md`): one line per completed item in
//! the workspace's `completed.md` ([`completed_line`]: the report's hand-off), and the checkpoints of completed items deleted — only
//! inside the store, and only when no item that is not done (in the inbox or any batch file)
//! still references the same file.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::todo_marks::{self, locate};
use super::{PlanFile, RunEnd, Sink};
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::events::Reporter;
use crate::run::record::outcome::Outcome;
use crate::source::todo::TodoDocument;
use crate::store::Store;

/// The checkpoint clean-up sink of a todo batch.
pub(crate) struct Checkpoints {
    /// The store the batch belongs to.
    pub store: Store,
    /// The batch file (read after the marks sink has written it).
    pub batch: PathBuf,
    /// The team workspace, where `completed.md` is kept.
    pub workspace: PathBuf,
    /// The run's items, by number, in order.
    pub numbers: Vec<u32>,
}

impl Reporter for Checkpoints {}

impl Sink for Checkpoints {
    /// The store, whose checkpoints it removes.
    fn writes(&self) -> Vec<PlanFile> {
        vec![PlanFile::new("store", &self.store.dir, "").in_place()]
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
        // Which checkpoints are still referenced is read, and they are deleted, under the
        // store lock: no item can move between the files meanwhile.
        let _lock = self.store.lock()?;
        match crate::store::read_todo(&self.batch) {
            Ok((_, doc)) => clean(&self.store, &doc, &completed),
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

/// Delete the checkpoints of `completed` items of `doc` that nothing open references.
///
/// Errors: a checkpoint cannot be removed (exit 3).
fn clean(store: &Store, doc: &TodoDocument, completed: &[Outcome]) -> Result<()> {
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
        // The title the item had when the run started finds it in an edited file.
        let Some(item) =
            o.id.parse()
                .ok()
                .and_then(|n: u32| locate(doc, n, &o.title))
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

#[cfg(test)]
mod tests {
    use super::*;

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
