//! A `resolve`'s move of items from the inbox to a new batch file, made recoverable (issue
//! 50): the move is two writes (the batch file `todo-N.md`, then the inbox without the
//! items), and a kill between them left every item in both, so the next `resolve` handed
//! them out again. Before the first write the move is recorded in the store
//! ([`RECORD`]: the batch file's name and the FNV-1a of its text, the inbox's text before
//! and after); after the second it is removed. Whoever takes the store lock next
//! ([`super::Store::lock`]: every `resolve`, `add`, `run`, `list` and run ending) finishes a
//! move it finds: the inbox is rewritten as the move meant when the batch file holds what was
//! meant and the inbox is still as it was before; a batch file cut short is removed (the
//! items stay in the inbox only); otherwise the record is dropped with a warning naming the
//! batch, for a person to check.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::{Error, Result};

/// The record of a move in progress, in the store folder.
pub(crate) const RECORD: &str = ".resolve-move.json";

/// What a move meant to write.
#[derive(Debug, Serialize, Deserialize)]
struct Move {
    /// The new batch file's name (`todo-3.md`).
    batch: String,
    /// FNV-1a of the batch file's whole text, 16 hex digits.
    batch_hash: String,
    /// FNV-1a of the inbox's text before the move.
    inbox_before: String,
    /// The inbox's text after the move.
    inbox_after: String,
}

fn fnv(text: &[u8]) -> String {
    format!("{:016x}", crate::hash::fnv(text))
}

impl Store {
    /// Record that a move is about to write `batch_text` to the batch file `batch` and then
    /// turn the inbox `inbox_before` into `inbox_after`. Durable before it returns.
    ///
    /// Errors: the record cannot be written.
    pub(crate) fn begin_move(
        &self,
        batch: &Path,
        batch_text: &str,
        inbox_before: &str,
        inbox_after: &str,
    ) -> Result<()> {
        let record = Move {
            batch: batch
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            batch_hash: fnv(batch_text.as_bytes()),
            inbox_before: fnv(inbox_before.as_bytes()),
            inbox_after: inbox_after.to_owned(),
        };
        let bytes = serde_json::to_vec(&record).map_err(|e| Error::Environment(e.to_string()))?;
        crate::fsutil::write_atomic(&self.dir.join(RECORD), &bytes)
    }

    /// The move is done: its record goes.
    ///
    /// Errors: the record cannot be removed.
    pub(crate) fn end_move(&self) -> Result<()> {
        let path = self.dir.join(RECORD);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", &path, e)),
        }
    }

    /// Finish a move a killed `resolve` left half done before reading the store without its
    /// lock (`list`, `resolve`'s choice, `run`): takes the lock, which finishes it, only when
    /// a move is recorded.
    ///
    /// Errors: as [`Store::lock`].
    pub(crate) fn settle_move(&self) -> Result<()> {
        if self.dir.join(RECORD).is_file() {
            drop(self.lock()?);
        }
        Ok(())
    }

    /// Finish a move a killed `resolve` left half done (see the module), under the store
    /// lock the caller holds. Returns what it did, for a warning; `None` when there was no
    /// move to finish.
    ///
    /// Errors: the inbox or the batch file cannot be written or removed.
    pub(crate) fn finish_move(&self) -> Result<Option<String>> {
        let path = self.dir.join(RECORD);
        let Ok(bytes) = std::fs::read(&path) else {
            return Ok(None);
        };
        let said = match serde_json::from_slice::<Move>(&bytes) {
            Err(e) => format!(
                "{}: not a move record ({e}); removed it: check the inbox and the newest batch file for items in both",
                path.display()
            ),
            Ok(m) => self.finish(&m)?,
        };
        self.end_move()?;
        Ok(Some(said))
    }

    fn finish(&self, m: &Move) -> Result<String> {
        let batch = self.dir.join(&m.batch);
        let inbox = self.inbox();
        let batch_text = std::fs::read(&batch).ok();
        let inbox_text = std::fs::read(&inbox).unwrap_or_default();
        let inbox_as_before = fnv(&inbox_text) == m.inbox_before;
        Ok(match batch_text {
            None => format!(
                "a `runner resolve` was stopped before it wrote {}; its items are still in the inbox",
                batch.display()
            ),
            Some(text) if fnv(&text) != m.batch_hash => {
                std::fs::remove_file(&batch).map_err(|e| Error::io("remove", &batch, e))?;
                format!(
                    "a `runner resolve` was stopped while it wrote {}; removed that cut-short file, its items are still in the inbox",
                    batch.display()
                )
            }
            Some(_) if inbox_as_before => {
                crate::fsutil::write_atomic(&inbox, m.inbox_after.as_bytes())?;
                format!(
                    "a `runner resolve` was stopped between writing {} and the inbox; finished the move (its items left the inbox)",
                    batch.display()
                )
            }
            Some(_) => format!(
                "a `runner resolve` was stopped between writing {} and the inbox, and the inbox was edited since; check that none of its items is also still in the inbox",
                batch.display()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store {
            dir: dir.path().to_owned(),
            project_root: None,
        };
        (dir, store)
    }

    #[test]
    fn a_move_cut_short_is_finished_when_its_batch_was_written_and_undone_when_not() {
        let (_d, s) = store();
        let batch = s.dir.join("todo-1.md");
        let (before, after, text) = ("- [ ] A\n- [ ] B\n", "- [ ] B\n", "- [ ] A\n");
        std::fs::write(s.inbox(), before).expect("inbox");
        // Written in full: the inbox is rewritten as meant.
        s.begin_move(&batch, text, before, after).expect("begin");
        std::fs::write(&batch, text).expect("batch");
        let said = s.finish_move().expect("finish").expect("a move");
        assert!(said.contains("finished the move"), "{said}");
        assert_eq!(std::fs::read_to_string(s.inbox()).expect("inbox"), after);
        assert_eq!(s.finish_move().expect("nothing left"), None);
        // Cut short: the partial batch goes, the inbox stays.
        std::fs::write(s.inbox(), before).expect("inbox");
        s.begin_move(&batch, text, before, after).expect("begin");
        std::fs::write(&batch, "- [ ").expect("partial");
        let said = s.finish_move().expect("finish").expect("a move");
        assert!(said.contains("cut-short"), "{said}");
        assert!(!batch.exists());
        assert_eq!(std::fs::read_to_string(s.inbox()).expect("inbox"), before);
        // Never written: nothing to do but say so.
        s.begin_move(&batch, text, before, after).expect("begin");
        let said = s.finish_move().expect("finish").expect("a move");
        assert!(said.contains("before it wrote"), "{said}");
        assert_eq!(std::fs::read_to_string(s.inbox()).expect("inbox"), before);
    }
}
