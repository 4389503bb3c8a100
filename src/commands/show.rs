//! `runner show ID` and `runner logs ID`: one item of a team, from its journal (read only,
//! so both work while the run goes on and after it) or, once the workspace was removed, from
//! the team's archive (`show` only: logs are not archived). A completed item whose folder was
//! compacted is read from its record ([`crate::run::record::compact`]).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{LogsArgs, ShowArgs};
use crate::error::{Error, Result};
use crate::run::events::Event;
use crate::run::record::compact::{self, Record};
use crate::run::record::workspace::{Found, locate};
use crate::ui::show::Place;

/// The item `name` names (its id or its teammate's name): its id, its recorded events and
/// its teammate's name (a best-of item's: its winner's, else its first candidate's).
///
/// Errors: no such item in the team (exit 2); its journal or archive cannot be read.
fn item_events(found: &Found, name: &str) -> Result<(String, Vec<Event>, String)> {
    let named = found.item_named(name)?;
    let teammate = named.as_ref().and_then(|(_, events)| {
        let started: Vec<&String> = events
            .iter()
            .filter_map(|e| match e {
                Event::AttemptStarted { teammate, .. } => Some(teammate),
                _ => None,
            })
            .collect();
        let finished = events.iter().rev().find_map(|e| match e {
            Event::ItemFinished(o) => Some(&o.teammate),
            _ => None,
        });
        // A best-of item's outcome names its winner, which need not have started first; a
        // blocked one names the item's own teammate, which never ran: its first candidate.
        finished
            .filter(|t| started.contains(t))
            .or(started.first().copied())
            .or(finished)
            .cloned()
    });
    let dir = found.path().display();
    match (named, teammate) {
        (Some((id, events)), Some(t)) => Ok((id, events, t)),
        _ => Err(Error::Unknown {
            what: "item".into(),
            name: name.to_owned(),
            suggestion: String::new(),
            hint: format!(
                "no item by that id or teammate name has started or finished in team {dir}; `runner status {dir}` lists the items"
            ),
        }),
    }
}

/// Where a compacted item's prompt and logs are: `Some((file, record))` when its last
/// outcome names the workspace's `completed.jsonl` as its log (the item was compacted), the
/// record `None` when that file no longer holds a readable line for it; `None` when its
/// folder keeps them (not compacted, `--keep-logs`, or the team was archived).
///
/// Errors: the record file cannot be read (exit 2).
#[allow(clippy::type_complexity)]
fn compacted(
    found: &Found,
    id: &str,
    events: &[Event],
) -> Result<Option<(PathBuf, Option<Record>)>> {
    let Found::Workspace(dir) = found else {
        return Ok(None);
    };
    // The last outcome's, unless an attempt started since (a rerun going on: its folder).
    let named = events
        .iter()
        .rev()
        .take_while(|e| !matches!(e, Event::AttemptStarted { .. }))
        .find_map(|e| match e {
            Event::ItemFinished(o) => Some(o.log.as_str()),
            _ => None,
        });
    let is_record = named
        .and_then(|log| Path::new(log).file_name())
        .is_some_and(|n| n == compact::FILE_NAME);
    if !is_record {
        return Ok(None);
    }
    Ok(Some((compact::path(dir), compact::find(dir, id)?)))
}

/// The error for a compacted item whose record `file` lost its line.
fn record_lost(id: &str, file: &Path) -> Error {
    let why = match file.exists() {
        true => "holds no readable record of it (a damaged or cut line)",
        false => "is gone",
    };
    Error::Usage(format!(
        "item `{id}` completed and was compacted, but {} {why}; its report is still in `runner show {id}` and the output",
        file.display()
    ))
}

/// With stages, a row's id names its chain: its chain line, then each stage that started
/// or finished, as `runner show ROW/STAGE` shows it. `None` when the team has no stages or
/// `name` is no row of it.
///
/// Errors: the journal or archive cannot be read.
fn show_row(found: &Found, name: &str) -> Result<Option<String>> {
    use crate::source::stages::{Place as StagePlace, chain_line};
    let stages = found.snapshot().map(|s| s.stages).unwrap_or_default();
    let mut parts = Vec::new();
    let mut line = Vec::new();
    for stage in &stages {
        let id = crate::item::stage_id(name, stage);
        let Ok((id, events, teammate)) = item_events(found, &id) else {
            line.push((stage.clone(), StagePlace::Pending));
            continue;
        };
        let status = events.iter().rev().find_map(|e| match e {
            Event::ItemFinished(o) => Some(o.status),
            _ => None,
        });
        line.push((
            stage.clone(),
            status.map_or(StagePlace::Running, StagePlace::Finished),
        ));
        let record = compacted(found, &id, &events)?;
        parts.push(shown(found, &id, &events, &teammate, &record));
    }
    if parts.is_empty() {
        return Ok(None);
    }
    let mut out = format!("Row {}\n\n", chain_line(name, &line));
    out.push_str(&parts.join("\n"));
    Ok(Some(out))
}

/// What `runner show` prints of item `id`: from its teammate folder, the record it was
/// compacted into (`record`, [`compacted`]), or the archive.
fn shown(
    found: &Found,
    id: &str,
    events: &[Event],
    teammate: &str,
    record: &Option<(PathBuf, Option<Record>)>,
) -> String {
    let folder = found.path().join("teammates").join(teammate);
    let place = match (found, record) {
        (Found::Workspace(_), Some((file, record))) => Place::Compacted {
            file,
            record: record.as_ref(),
        },
        (Found::Workspace(_), None) => Place::Teammate(&folder),
        (Found::Archive(path), _) => Place::Archive { path, teammate },
    };
    crate::ui::show::item(id, place, events)
}

/// `runner show ID [WORKSPACE] [--prompt]`.
pub(crate) fn show(args: ShowArgs) -> Result<i32> {
    if let Some([a, b]) = args.diff.as_deref() {
        let found = locate(args.workspace.as_deref())?;
        let (id, events, _) = item_events(&found, &args.id)?;
        crate::ui::out(super::show_diff::diff(&found, &id, &events, a, b)?);
        return Ok(0);
    }
    if !args.prompt {
        crate::ui::out(item_view(&args.id, args.workspace.as_deref())?);
        return Ok(0);
    }
    let found = locate(args.workspace.as_deref())?;
    let (id, events, teammate) = item_events(&found, &args.id)?;
    let record = compacted(&found, &id, &events)?;
    if let Some((file, None)) = &record {
        return Err(record_lost(&id, file));
    }
    let kept = record.as_ref().and_then(|(_, r)| r.as_ref());
    print_prompt(&found, &id, &teammate, kept)
}

/// What `runner show NAME [WORKSPACE]` prints: item `name` (its id or its teammate's name)
/// of the team `workspace` names (default: the most recent team here) — its status, every
/// attempt with its verdict, the report, what the teammate last said, the end of its log —
/// or, for a staged batch's row, its chain of stages. What agents wrote is shown, never
/// obeyed ([`crate::ui::terminal_safe`]).
///
/// Errors: no such team, no such item in it (exit 2); its journal, archive or compacted
/// record cannot be read.
pub(crate) fn item_view(name: &str, workspace: Option<&Path>) -> Result<String> {
    let found = locate(workspace)?;
    let (id, events, teammate) = match item_events(&found, name) {
        Ok(found_item) => found_item,
        // A staged batch's row: its whole chain; else an item no run started yet.
        Err(e) => {
            return match show_row(&found, name)? {
                Some(text) => Ok(crate::ui::terminal_safe(&text)),
                None => match crate::run::record::pending::find(&found, name) {
                    Some(p) => Ok(crate::ui::terminal_safe(&crate::ui::show::pending(
                        found.path(),
                        &p,
                    ))),
                    None => Err(e),
                },
            };
        }
    };
    let record = compacted(&found, &id, &events)?;
    Ok(crate::ui::terminal_safe(&shown(
        &found, &id, &events, &teammate, &record,
    )))
}

/// `runner show ID --prompt`: the last attempt's prompt, from the teammate folder (never
/// through a link planted there) or the item's compacted `record`.
///
/// Errors: the team was archived, or the item has no prompt kept (exit 2).
fn print_prompt(found: &Found, id: &str, teammate: &str, record: Option<&Record>) -> Result<i32> {
    let dir = found.workspace("the prompts")?;
    let text = match record {
        Some(r) => r.prompt.clone(),
        None => {
            let path = dir.join("teammates").join(teammate).join("prompt.md");
            let mut file = crate::fsutil::open_plain_file(&path)
                .map_err(|e| Error::read_input("the prompt", &path, e))?
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "item `{id}` has no prompt kept: {} is {}",
                        path.display(),
                        crate::ui::show::PROMPT_NOT_WRITTEN
                    ))
                })?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|e| Error::read_input("the prompt", &path, e))?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
    };
    crate::ui::out_document(&text);
    if let Some(r) = record.filter(|r| (r.prompt.len() as u64) < r.prompt_bytes) {
        eprintln!(
            "(the first {} of its {} bytes: a completed item keeps that much; keep whole prompts with --keep-logs)",
            r.prompt.len(),
            r.prompt_bytes
        );
    }
    Ok(0)
}

/// `runner logs` of a completed item that was compacted: the kept end of one of attempt
/// `attempt`'s logs (`stderr`, else stdout — or stderr when stdout had nothing and stderr
/// did, as for a live folder).
fn print_compacted(id: &str, file: &Path, r: &Record, attempt: u32, stderr: bool) -> Result<i32> {
    let Some(logs) = r.logs_of(attempt) else {
        eprintln!(
            "item `{id}`, attempt {attempt}: its logs were not kept (only the attempts its folder held when it completed are in {}; keep every log with --keep-logs)",
            file.display()
        );
        return Ok(0);
    };
    let (out, err) = (
        logs.tail("stdout").filter(|t| t.bytes > 0),
        logs.tail("stderr").filter(|t| t.bytes > 0),
    );
    let (stream, tail) = match (stderr, out, err) {
        (true, _, err) => ("stderr", err),
        (false, None, Some(err)) => ("stderr", Some(err)),
        (false, out, _) => ("stdout", out),
    };
    let Some(tail) = tail else {
        eprintln!("item `{id}`, attempt {attempt}: wrote nothing to {stream}");
        return Ok(0);
    };
    crate::ui::out_document(&tail.text);
    if !tail.whole() {
        eprintln!(
            "(the last {} of its {} bytes, kept in {} when the item completed; keep whole logs with --keep-logs)",
            tail.kept,
            tail.bytes,
            file.display()
        );
    }
    Ok(0)
}

/// `runner logs ID [WORKSPACE] [--attempt N] [--stderr] [--follow]`.
pub(crate) fn logs(args: LogsArgs) -> Result<i32> {
    let found = locate(args.workspace.as_deref())?;
    let (id, events, teammate) = match item_events(&found, &args.id) {
        Ok(item) => item,
        // An item no run started yet has no log: say where it stands (exit 0).
        Err(e) => match crate::run::record::pending::find(&found, &args.id) {
            Some(p) => {
                let text = crate::ui::show::pending(found.path(), &p);
                eprint!(
                    "{}",
                    crate::ui::terminal_safe(&format!("{text}  (no log yet)\n"))
                );
                return Ok(0);
            }
            None => return Err(e),
        },
    };
    let dir = found.workspace("its logs")?;
    if args.workspace.is_none() {
        // No team named: the most recent one here was read. Say which (on stderr).
        eprintln!(
            "(team {}: {}; name another as `runner logs {id} WORKSPACE`)",
            crate::run::record::workspace::team_of(dir),
            dir.display()
        );
    }
    let last = events
        .iter()
        .filter_map(|e| match e {
            Event::AttemptStarted { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .max();
    let Some(attempt) = args.attempt.or(last) else {
        return Err(Error::Usage(format!(
            "item `{id}` never started an attempt, so it has no log"
        )));
    };
    if let Some(last) = last.filter(|l| attempt > *l || attempt == 0) {
        let (has, give) = match last {
            1 => ("1 attempt".to_owned(), "--attempt 1".to_owned()),
            n => (format!("{n} attempts"), format!("--attempt 1 to {n}")),
        };
        return Err(Error::Usage(format!("item `{id}` has {has}; give {give}")));
    }
    match compacted(&found, &id, &events)? {
        Some((file, Some(record))) => {
            return print_compacted(&id, &file, &record, attempt, args.stderr);
        }
        Some((file, None)) => return Err(record_lost(&id, &file)),
        None => {}
    }
    let log = |stream: &str| {
        dir.join("teammates")
            .join(&teammate)
            .join(format!("attempt-{attempt}.{stream}.log"))
    };
    let (stream, path) = match args.stderr {
        true => ("stderr", log("stderr")),
        // An attempt that wrote no stdout (an HTTP request that got no answer, an agent
        // that only printed errors) is told by its stderr log.
        false if !log("stdout").exists() && log("stderr").exists() && !args.follow => {
            ("stderr", log("stderr"))
        }
        false => ("stdout", log("stdout")),
    };
    if !path.exists() && !args.follow {
        // A rerun's folder holds only its own attempts: an earlier one's may be in the
        // record of an earlier completion.
        if let Ok(Some(record)) = compact::find(dir, &id)
            && record.logs_of(attempt).is_some()
        {
            return print_compacted(&id, &compact::path(dir), &record, attempt, args.stderr);
        }
        let running = !events
            .iter()
            .any(|e| matches!(e, Event::AttemptFinished { attempt: a, .. } if *a == attempt));
        match (running, stream) {
            // A quick agent's stdout is held in memory: on disk once it has run a second.
            (true, "stdout") => eprintln!(
                "item `{id}`, attempt {attempt}: its stdout log is not written yet (the runner writes it once the attempt has run a second, or when it ends); follow it with --follow"
            ),
            // The runner creates a log when the attempt first writes to it.
            _ => eprintln!(
                "item `{id}`, attempt {attempt}: wrote nothing to {stream} (no {})",
                path.display()
            ),
        }
        return Ok(0);
    }
    // One handle for the whole follow: what the attempt wrote last is read from it even
    // once a completed item's folder is removed.
    let mut log = Follow::default();
    log.print_new(&path)?;
    if !args.follow {
        return Ok(0);
    }
    // Follow until the journal says the attempt ended, then print what is left — from the
    // record when the log was never opened before the item was compacted.
    loop {
        let events = found.events_of(&id)?;
        let ended = events
            .iter()
            .any(|e| matches!(e, Event::AttemptFinished { attempt: a, .. } if *a == attempt));
        log.print_new(&path)?;
        if ended {
            if !log.opened()
                && let Some((file, Some(record))) = compacted(&found, &id, &events)?
            {
                return print_compacted(&id, &file, &record, attempt, args.stderr);
            }
            return Ok(0);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A log being printed as it grows: its handle, once it exists, and how far it was printed.
#[derive(Default)]
struct Follow {
    file: Option<std::fs::File>,
    printed: u64,
}

impl Follow {
    /// Whether the log was ever opened.
    fn opened(&self) -> bool {
        self.file.is_some()
    }

    /// Print what `path` gained since the last look (opening it, without following a link,
    /// when it first exists).
    ///
    /// Errors: the log cannot be read (exit 2, naming it).
    fn print_new(&mut self, path: &Path) -> Result<()> {
        if self.file.is_none() {
            self.file = crate::fsutil::open_plain_file(path)
                .map_err(|e| Error::read_input("the log", path, e))?;
        }
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        f.seek(SeekFrom::Start(self.printed))
            .map_err(|e| Error::read_input("the log", path, e))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)
            .map_err(|e| Error::read_input("the log", path, e))?;
        self.printed += buf.len() as u64;
        if !buf.is_empty() {
            crate::ui::out_document(&String::from_utf8_lossy(&buf));
        }
        Ok(())
    }
}
