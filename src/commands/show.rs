//! `runner show ID` and `runner logs ID`: one item of a team, from its journal (read only,
//! so both work while the run goes on and after it) or, once the workspace was removed, from
//! the team's archive (`show` only: logs are not archived).

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{LogsArgs, ShowArgs};
use crate::error::{Error, Result};
use crate::run::events::Event;
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

/// `runner show ID [WORKSPACE]`.
pub fn show(args: ShowArgs) -> Result<i32> {
    let found = locate(args.workspace.as_deref())?;
    let (id, events, teammate) = item_events(&found, &args.id)?;
    let place = match &found {
        Found::Workspace(dir) => Place::Teammate(&dir.join("teammates").join(&teammate)),
        Found::Archive(path) => Place::Archive {
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
fn print_from(path: &PathBuf, offset: u64) -> Result<u64> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::read_input("the log", path, e))?;
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::read_input("the log", path, e))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)
        .map_err(|e| Error::read_input("the log", path, e))?;
    let text = String::from_utf8_lossy(&buf);
    // On a terminal the log is shown, not obeyed; to a pipe it stays byte for byte.
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        crate::ui::out(crate::ui::terminal_safe(&text));
    } else {
        crate::ui::out(text);
    }
    Ok(offset + buf.len() as u64)
}
