//! `runner status [WORKSPACE]`: the live or last state of a team, read from its `team.json`
//! (written atomically by the running dispatcher, so this works from another terminal).
//! `--brief` prints a short deterministic summary meant for a lead agent; `--watch`
//! refreshes until the run ends.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use crate::cli::StatusArgs;
use crate::error::{Error, Result};
use crate::run::team::Snapshot;
use crate::ui::status::{alive, brief, full};

fn read(dir: &Path) -> Result<Snapshot> {
    let p = dir.join("team.json");
    let text = std::fs::read_to_string(&p).map_err(|e| Error::read_input("it", &p, e))?;
    serde_json::from_str(&text).map_err(|e| {
        Error::input_at(
            &p,
            Some(e.line() as u64),
            format!("not a team snapshot: {e}"),
        )
    })
}

/// `runner status`.
pub fn status(args: StatusArgs) -> Result<i32> {
    let dir = crate::run::workspace::locate(args.workspace.as_deref())?;
    if !args.watch {
        let s = read(&dir)?;
        crate::ui::out(if args.brief {
            brief(&s)
        } else {
            full(&dir, &s)
        });
        return Ok(0);
    }
    let tty = std::io::stdout().is_terminal();
    loop {
        let s = read(&dir)?;
        let text = if args.brief {
            brief(&s)
        } else {
            full(&dir, &s)
        };
        let clear = if tty { "\x1b[2J\x1b[H" } else { "---\n" };
        crate::ui::out(format_args!("{clear}{text}"));
        if s.state != "running" || !alive(s.pid) {
            return Ok(0);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}
