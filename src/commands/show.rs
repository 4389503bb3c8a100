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
/// its teammate's name.
///
/// Errors: no such item in the team (exit 2); its journal or archive cannot be read.
fn item_events(found: &Found, name: &str) -> Result<(String, Vec<Event>, String)> {
    let named = found.item_named(name)?;
    let teammate = named.as_ref().and_then(|(_, events)| {
        events.iter().find_map(|e| match e {
            Event::AttemptStarted { teammate, .. } => Some(teammate.clone()),
            Event::ItemFinished(o) => Some(o.teammate.clone()),
            _ => None,
        })
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

/// The record a completed item of workspace `found` was compacted into, and the record
/// file: `None` while its teammate folder is there (or the team was archived).
///
/// Errors: the record file cannot be read (exit 2).
fn compacted(found: &Found, id: &str, teammate: &str) -> Result<Option<(PathBuf, Record)>> {
    let Found::Workspace(dir) = found else {
        return Ok(None);
    };
    if dir.join("teammates").join(teammate).exists() {
        return Ok(None);
    }
    Ok(compact::find(dir, id)?.map(|r| (compact::path(dir), r)))
}

/// `runner show ID [WORKSPACE] [--prompt]`.
pub fn show(args: ShowArgs) -> Result<i32> {
    let found = locate(args.workspace.as_deref())?;
    let (id, events, teammate) = item_events(&found, &args.id)?;
    let record = compacted(&found, &id, &teammate)?;
    if args.prompt {
        return print_prompt(&found, &id, &teammate, record.as_ref().map(|(_, r)| r));
    }
    let folder = found.path().join("teammates").join(&teammate);
    let place = match (&found, &record) {
        (Found::Workspace(_), Some((file, record))) => Place::Compacted { file, record },
        (Found::Workspace(_), None) => Place::Teammate(&folder),
        (Found::Archive(path), _) => Place::Archive {
            path,
            teammate: &teammate,
        },
    };
    // What agents wrote reaches the terminal shown, never obeyed.
    crate::ui::out(crate::ui::terminal_safe(&crate::ui::show::item(
        &id, place, &events,
    )));
    Ok(0)
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
                        "item `{id}` has no prompt kept: {} is not there",
                        path.display()
                    ))
                })?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|e| Error::read_input("the prompt", &path, e))?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
    };
    print_text(&text);
    if let Some(r) = record.filter(|r| (r.prompt.len() as u64) < r.prompt_bytes) {
        eprintln!(
            "(the first {} of its {} bytes: a completed item keeps that much; keep whole prompts with --keep-logs)",
            r.prompt.len(),
            r.prompt_bytes
        );
    }
    Ok(0)
}

/// Print what an agent or a prompt wrote: shown, not obeyed, on a terminal; byte for byte
/// to a pipe.
fn print_text(text: &str) {
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        crate::ui::out(crate::ui::terminal_safe(text));
    } else {
        crate::ui::out(text.to_owned());
    }
}

/// `runner logs` of a completed item that was compacted: the kept end of one of attempt
/// `attempt`'s logs (`stderr`, else stdout — or stderr when stdout had nothing and stderr
/// did, as for a live folder).
fn print_compacted(id: &str, file: &Path, r: &Record, attempt: u32, stderr: bool) -> Result<i32> {
    let logs = r.logs_of(attempt);
    let (out, err) = (
        logs.and_then(|l| l.tail("stdout")).filter(|t| t.bytes > 0),
        logs.and_then(|l| l.tail("stderr")).filter(|t| t.bytes > 0),
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
    print_text(&tail.text);
    if !tail.whole() {
        eprintln!(
            "(the last {} of its {} bytes, kept in {} when the item completed; keep whole logs with --keep-logs)",
            tail.text.len(),
            tail.bytes,
            file.display()
        );
    }
    Ok(0)
}

/// `runner logs ID [WORKSPACE] [--attempt N] [--stderr] [--follow]`.
pub fn logs(args: LogsArgs) -> Result<i32> {
    let found = locate(args.workspace.as_deref())?;
    let (id, events, teammate) = item_events(&found, &args.id)?;
    let dir = found.workspace("its logs")?;
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
    if let Some((file, record)) = compacted(&found, &id, &teammate)? {
        return print_compacted(&id, &file, &record, attempt, args.stderr);
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
        // The runner creates a log when the attempt first writes to it.
        eprintln!(
            "item `{id}`, attempt {attempt}: wrote nothing to {stream} (no {})",
            path.display()
        );
        return Ok(0);
    }
    let mut offset = 0;
    if path.exists() {
        offset = print_from(&path, 0)?;
    }
    if !args.follow {
        return Ok(0);
    }
    // Follow until the journal says the attempt ended, then print what is left.
    loop {
        let ended = found
            .events_of(&id)?
            .iter()
            .any(|e| matches!(e, Event::AttemptFinished { attempt: a, .. } if *a == attempt));
        if path.exists() {
            offset = print_from(&path, offset)?;
        }
        if ended {
            return Ok(0);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Print `path` from byte `offset` on; returns the new end.
///
/// Errors: the log cannot be read (exit 2, naming it).
fn print_from(path: &Path, offset: u64) -> Result<u64> {
    // The teammate's folder: never through a link planted there.
    let mut f = crate::fsutil::open_plain_file(path)
        .map_err(|e| Error::read_input("the log", path, e))?
        .ok_or_else(|| Error::read_input("the log", path, std::io::ErrorKind::NotFound.into()))?;
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::read_input("the log", path, e))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)
        .map_err(|e| Error::read_input("the log", path, e))?;
    print_text(&String::from_utf8_lossy(&buf));
    Ok(offset + buf.len() as u64)
}
