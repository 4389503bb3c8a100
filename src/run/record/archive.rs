//! A team's archive (`todo-N.archive.jsonl` beside its batch file, `<stem>.archive.jsonl`
//! beside a CSV team's output): what is kept of a team once its workspace is removed — by the
//! run when every todo item completed, or by `runner clean` — so `runner status`, `show` and
//! `report` still answer and the output table's `log` column names a file that exists.
//!
//! One self-describing JSON-lines file, private to its owner like the workspace it stands for
//! (mode 0600), replaced atomically (`fsutil::write_atomic_private`):
//!
//! - line 1, the header: `{"v":1,"archive":{"team":"todo-resolve-3","batch":"/abs/todo-3.md",
//!   "archived_at":"2026-12-01T13:42:05Z","command":["runner","resolve",…],"cwd":"/work/app"}}`
//!   (`batch`: the todo-N.md or input CSV; `command` and `cwd`: the last run's, from its
//!   `team.json`, absent in archives written before they were kept);
//! - every further line one recorded journal event, exactly as `journal.jsonl` and
//!   `--format json` write it (`{"v":1,"event":…}`, `docs/events.md`), in the order they
//!   happened: runs, attempts with their verdicts, and each `item_finished` outcome with the
//!   item's whole report (summary, `files_modified`, `files_created`, `tests`, `next_steps`).
//!
//! Logs are not kept: an archived outcome's `log` is empty (its file went with the
//! workspace). A team archived again (its batch file got new items that ran and completed)
//! keeps the earlier archive's events before the new ones.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::run::events::Event;
use crate::run::record::team::Snapshot;

/// The [`Snapshot::state`] of a team read from its archive.
pub(crate) const ARCHIVED: &str = "archived";

/// What the header line says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Header {
    /// Team name.
    pub team: String,
    /// The batch the team ran: its `todo-N.md` or input CSV, as its `batch.json` records it
    /// (real path, lossy when not UTF-8; empty when it records none).
    pub batch: String,
    /// When the archive was (last) written, RFC 3339 (UTC).
    pub archived_at: String,
    /// The command line of the team's last run, as its `team.json` recorded it
    /// ([`Snapshot::command`]): what `runner reset` and `status --brief` derive the command
    /// that runs the batch again from. Empty in archives written before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The folder that run was started in ([`Snapshot::cwd`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cwd: String,
}

#[derive(Serialize, Deserialize)]
struct HeaderLine {
    v: u32,
    archive: Header,
}

/// An archive read back.
#[derive(Debug)]
pub(crate) struct Archive {
    /// Its file.
    pub path: PathBuf,
    /// Its header.
    pub header: Header,
    /// The recorded events, in order.
    pub events: Vec<Event>,
}

impl Archive {
    /// Each item's last outcome (its `log` empty), in the order they finished (by
    /// `finished_at`; an item that finished again in a later run is placed by its last finish).
    pub(crate) fn outcomes(&self) -> Vec<crate::run::record::outcome::Outcome> {
        let mut outcomes =
            crate::run::record::history::from_events(self.events.iter().cloned()).outcomes;
        outcomes.sort_by_key(|o| o.finished_at.parse::<jiff::Timestamp>().ok());
        outcomes
    }

    /// The team as `runner status` shows it: state `archived`, every item's last outcome
    /// as finished (most recent last), the counts and cost over them, the first run's start.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let outcomes = self.outcomes();
        let started_at = self
            .events
            .iter()
            .find_map(|e| match e {
                Event::RunStarted { at, .. } => Some(at.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let mut s = Snapshot {
            v: 1,
            team: self.header.team.clone(),
            workspace: self.path.display().to_string(),
            state: ARCHIVED.into(),
            pid: 0,
            started_at,
            updated_at: self.header.archived_at.clone(),
            total: Some(outcomes.len() as u64),
            counts: Default::default(),
            cost_usd: None,
            running: Vec::new(),
            finished: Vec::new(),
            waiting: Vec::new(),
            gate: None,
            command: self.header.command.clone(),
            cwd: self.header.cwd.clone(),
            not_started: Vec::new(),
            isolation: None,
            stages: self
                .events
                .iter()
                .rev()
                .find_map(|e| match e {
                    Event::RunStarted { stages, .. } => Some(stages.clone()),
                    _ => None,
                })
                .unwrap_or_default(),
            earlier: Default::default(),
            earlier_unfinished: Vec::new(),
        };
        for o in &outcomes {
            s.finish(o);
        }
        s
    }

    /// The events of item `id`: its attempts' starts and ends and its outcomes.
    pub(crate) fn events_of(&self, id: &str) -> Vec<Event> {
        self.events
            .iter()
            .filter(|e| crate::run::record::journal::is_of_item(e, id))
            .cloned()
            .collect()
    }
}

/// How the fix reads in every error about a bad archive.
const FIX: &str = "the runner writes this file; restore it from a backup or remove it \
     (the batch file and its workers-output.csv keep each item's status and summary)";

/// Read the archive at `path`. Every line must read: an archive is never half-written.
///
/// Errors (exit 2, naming the file and line): unreadable, an empty file, a first line that
/// is not the header, a line that is not an event.
pub(crate) fn read(path: &Path) -> Result<Archive> {
    let bytes = std::fs::read(path).map_err(|e| Error::read_input("the archive", path, e))?;
    let mut lines = bytes.split(|b| *b == b'\n').enumerate();
    let header = match lines.next() {
        Some((_, first)) if !first.is_empty() => {
            serde_json::from_slice::<HeaderLine>(first)
                .map_err(|e| {
                    Error::input_at(
                        path,
                        Some(1),
                        format!("not a runner archive header ({e}); {FIX}"),
                    )
                })?
                .archive
        }
        _ => {
            return Err(Error::input_at(
                path,
                Some(1),
                format!("an empty archive; {FIX}"),
            ));
        }
    };
    let mut events = Vec::new();
    for (i, line) in lines {
        if line.is_empty() {
            continue;
        }
        let event = Event::from_line(line).map_err(|e| {
            Error::input_at(
                path,
                Some(i as u64 + 1),
                format!("not an archived event ({e}); {FIX}"),
            )
        })?;
        events.push(event);
    }
    Ok(Archive {
        path: path.to_owned(),
        header,
        events,
    })
}

/// Write (or extend) the archive `to` of team `team` (batch file `batch`) from the workspace
/// journal `journal`: the earlier archive's events, then the journal's (a torn last line
/// left by a crash is skipped, as on replay), outcomes without their log.
///
/// Errors: the journal cannot be read, the earlier archive is bad (exit 2; [`read`]), the
/// archive cannot be written (exit 3; the old one is untouched).
pub(crate) fn write(journal: &Path, to: &Path, team: &str, batch: &str) -> Result<()> {
    let mut events = match to.exists() {
        true => read(to)?.events,
        false => Vec::new(),
    };
    events.extend(crate::run::record::journal::events(journal)?);
    // The last run's command line, from the workspace's team.json (best effort: a view).
    let last_run = journal
        .parent()
        .and_then(|dir| std::fs::read(dir.join("team.json")).ok())
        .and_then(|b| serde_json::from_slice::<Snapshot>(&b).ok());
    let header = HeaderLine {
        v: crate::run::events::VERSION,
        archive: Header {
            team: team.to_owned(),
            batch: batch.to_owned(),
            archived_at: crate::run::now_rfc3339(),
            command: last_run
                .as_ref()
                .map(|s| s.command.clone())
                .unwrap_or_default(),
            cwd: last_run.map(|s| s.cwd).unwrap_or_default(),
        },
    };
    let encode =
        |e: serde_json::Error| Error::Environment(format!("cannot encode the archive: {e}"));
    let mut text = serde_json::to_string(&header).map_err(encode)?;
    text.push('\n');
    for mut event in events {
        if let Event::ItemFinished(o) = &mut event {
            o.log.clear();
        }
        if let Some(line) = event.to_line() {
            text.push_str(&line.map_err(encode)?);
            text.push('\n');
        }
    }
    crate::fsutil::write_atomic_private(to, text.as_bytes())
}

/// The archive of a todo team beside its batch file: `todo-3.md` → `todo-3.archive.jsonl`
/// (`crate::plans::todo_batch::archive_path` names it for the todo source).
pub(crate) fn beside_batch(batch: &Path) -> PathBuf {
    let stem = batch
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    batch.with_file_name(format!("{stem}.archive.jsonl"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ItemStatus;
    use crate::run::record::outcome::Outcome;

    #[test]
    fn an_archive_keeps_earlier_events_drops_logs_and_names_a_bad_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = dir.path().join("journal.jsonl");
        let mut o = Outcome::not_run("1", "todo-task-1", "one", ItemStatus::Completed, "".into());
        o.log = "/gone/attempt-1.stdout.log".into();
        o.report = Some(serde_json::json!({"summary": "did one", "next_steps": ["two"]}));
        let line = Event::ItemFinished(Box::new(o.clone()))
            .to_line()
            .expect("recorded")
            .expect("encode");
        std::fs::write(&journal, format!("{line}\n{{\"v\":1,\"ev")).expect("journal");
        let to = dir.path().join("todo-1.archive.jsonl");
        write(&journal, &to, "todo-resolve-1", "/s/todo-1.md").expect("write");
        write(&journal, &to, "todo-resolve-1", "/s/todo-1.md").expect("again");
        let a = read(&to).expect("read");
        assert_eq!(a.header.team, "todo-resolve-1");
        assert_eq!(
            a.events.len(),
            2,
            "the earlier archive's event and the journal's"
        );
        let Event::ItemFinished(kept) = &a.events[1] else {
            panic!("{:?}", a.events)
        };
        assert_eq!(kept.log, "");
        assert_eq!(kept.report, o.report);
        let text = std::fs::read_to_string(&to).expect("text");
        std::fs::write(&to, text.replacen("item_finished", "item_finishd", 1)).expect("spoil");
        let e = read(&to).expect_err("a bad line");
        assert!(
            matches!(&e, Error::Input { line: Some(2), .. }) && e.exit_code() == 2,
            "{e}"
        );
    }
}
