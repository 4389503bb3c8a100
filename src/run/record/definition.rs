//! The batch's own files as a sandboxed run started from them (issue 25, escape 5: without
//! `--isolate worktree` a teammate rewrote `BATCH.md` to `sandbox: none` with a new
//! `verify:`, and the next run started unsandboxed from it).
//!
//! Under `--sandbox landlock`, the files that decide what a run does — BATCH.md, the input,
//! the instruction, the schema, a runner definition read from a file — may lie where
//! teammates write (the run's working directory). A run records their SHA-256 digests in its
//! workspace (`definition.json`, which no teammate can write) as it starts, and again as it
//! ends with the files that changed meanwhile. The next run refuses to start (exit 2, before
//! anything is written) from a file that changed while a run was going on — or, after a run
//! that never ended (`kill -9`), from one that differs from what that run started with —
//! until a person has looked and says so with `--accept-changes`. Changes made between runs
//! are the user's and pass.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The record's file name in the workspace.
pub(crate) const RECORD: &str = "definition.json";

/// `definition.json`: each guarded file's digest as the run started, whether the run ended,
/// and which files changed while it went on.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    /// Path → lowercase hex SHA-256 of its bytes (`"missing"` for a file that was not there).
    started: BTreeMap<String, String>,
    /// The run reached its end and compared the files again.
    ended: bool,
    /// The paths whose bytes at the end differed from the start.
    changed: Vec<String>,
}

/// The files a sandboxed run guards, and where its record goes.
#[derive(Debug)]
pub(crate) struct Guard {
    files: Vec<PathBuf>,
    record: PathBuf,
}

fn digest(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(bytes) => ring::digest::digest(&ring::digest::SHA256, &bytes)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        Err(_) => "missing".into(),
    }
}

fn key(path: &Path) -> String {
    path.display().to_string()
}

impl Guard {
    /// Guard `files` (those of the batch that lie where teammates write) with the record in
    /// `workspace`. An empty list guards nothing, but [`Guard::check`] still reads what the
    /// last run recorded.
    pub(crate) fn new(workspace: &Path, files: Vec<PathBuf>) -> Guard {
        Guard {
            files,
            record: workspace.join(RECORD),
        }
    }

    fn read(&self) -> Option<Record> {
        let text = std::fs::read_to_string(&self.record).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Before anything is written: refuse a file that changed while the last run went on
    /// (or, when it never ended, one that differs from what it started with), unless
    /// `accepted` (`--accept-changes`).
    ///
    /// Errors: exit 2, naming each such file and what to do.
    pub(crate) fn check(&self, accepted: bool) -> Result<()> {
        if accepted {
            return Ok(());
        }
        // The files the last sandboxed run guarded, whatever this run's settings say (a
        // rewritten BATCH.md may well say `sandbox: none`).
        let Some(last) = self.read() else {
            return Ok(());
        };
        let suspect: Vec<&String> = last
            .started
            .iter()
            .filter(|(k, d)| {
                if last.ended {
                    last.changed.contains(k)
                } else {
                    digest(Path::new(k)) != **d
                }
            })
            .map(|(k, _)| k)
            .collect();
        if suspect.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = suspect.iter().map(|k| k.as_str()).collect();
        let (them, are, differ) = match names.len() {
            1 => ("it", "is", "differs"),
            _ => ("them", "are", "differ"),
        };
        let when = if last.ended {
            "changed while the last run of this batch was going on".to_owned()
        } else {
            format!(
                "{differ} from what the last run of this batch started with, and that run never ended"
            )
        };
        Err(Error::Usage(format!(
            "{} {when}, where its sandboxed teammates could write {them}; read {them}, and if the changes {are} yours run again with --accept-changes (a batch definition outside the working directory, or --isolate worktree, keeps teammates away from it)",
            names.join(", ")
        )))
    }

    /// As the run starts (its workspace open): record the files' digests (with none to
    /// guard, remove an earlier run's record: this run was accepted, or found nothing).
    ///
    /// Errors: the record cannot be written or removed (exit 3).
    pub(crate) fn start(&self) -> Result<()> {
        if self.files.is_empty() {
            return match std::fs::remove_file(&self.record) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(Error::io("remove", &self.record, e))
                }
                _ => Ok(()),
            };
        }
        let record = Record {
            started: self.files.iter().map(|f| (key(f), digest(f))).collect(),
            ended: false,
            changed: Vec::new(),
        };
        self.write(&record)
    }

    /// As the run ends: record which files changed since it started, and return them.
    ///
    /// Errors: the record cannot be written (exit 3).
    pub(crate) fn finish(&self) -> Result<Vec<PathBuf>> {
        if self.files.is_empty() {
            return Ok(Vec::new());
        }
        let mut record = self.read().unwrap_or_default();
        let changed: Vec<PathBuf> = self
            .files
            .iter()
            .filter(|f| record.started.get(&key(f)).is_some_and(|d| *d != digest(f)))
            .cloned()
            .collect();
        record.ended = true;
        record.changed = changed.iter().map(|p| key(p)).collect();
        self.write(&record)?;
        Ok(changed)
    }

    fn write(&self, record: &Record) -> Result<()> {
        let text = serde_json::to_string_pretty(record)
            .map_err(|e| Error::Environment(format!("cannot encode {RECORD}: {e}")))?;
        crate::fsutil::write_atomic(&self.record, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, Guard) {
        let dir = tempfile::tempdir().expect("tempdir");
        let batch = dir.path().join("BATCH.md");
        std::fs::write(&batch, "---\nsandbox: landlock\n---\nAudit {path}\n").expect("write");
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).expect("mkdir");
        let guard = Guard::new(&ws, vec![batch.clone()]);
        (dir, batch, guard)
    }

    #[test]
    fn a_file_changed_during_a_run_stops_the_next_until_accepted() {
        let (_dir, batch, guard) = setup();
        guard.check(false).expect("first run");
        guard.start().expect("start");
        std::fs::write(&batch, "---\nsandbox: none\n---\nAudit {path}\n").expect("tamper");
        assert_eq!(guard.finish().expect("finish"), vec![batch.clone()]);
        let err = guard.check(false).expect_err("refused");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("BATCH.md changed while"), "{err}");
        assert!(err.to_string().contains("--accept-changes"), "{err}");
        guard.check(true).expect("accepted");
        // The accepted run starts from the file as it is, and ends with nothing changed.
        guard.start().expect("start");
        assert!(guard.finish().expect("finish").is_empty());
        guard.check(false).expect("clean again");
    }

    #[test]
    fn a_run_that_guards_nothing_still_heeds_and_then_clears_the_last_record() {
        let (dir, batch, guard) = setup();
        guard.start().expect("start");
        std::fs::write(&batch, "---\nsandbox: none\n---\n").expect("tamper");
        guard.finish().expect("finish");
        // The rewritten file turned the sandbox off: this run guards nothing...
        let unguarded = Guard::new(&dir.path().join("ws"), Vec::new());
        assert!(
            unguarded.check(false).is_err(),
            "...but is refused all the same"
        );
        unguarded.check(true).expect("accepted");
        unguarded.start().expect("start");
        unguarded
            .check(false)
            .expect("the record is gone once accepted");
    }

    #[test]
    fn a_change_between_runs_is_the_users_and_passes() {
        let (_dir, batch, guard) = setup();
        guard.start().expect("start");
        assert!(guard.finish().expect("finish").is_empty());
        std::fs::write(&batch, "---\nretries: 2\n---\nAudit {path}\n").expect("edit");
        guard.check(false).expect("an edit between runs passes");
    }

    #[test]
    fn after_a_run_that_never_ended_a_differing_file_is_refused() {
        let (_dir, batch, guard) = setup();
        guard.start().expect("start");
        // killed here: no finish
        guard.check(false).expect("unchanged passes");
        std::fs::write(&batch, "---\nverify: \"true\"\n---\nAudit {path}\n").expect("tamper");
        let err = guard.check(false).expect_err("refused");
        assert!(err.to_string().contains("never ended"), "{err}");
    }
}
