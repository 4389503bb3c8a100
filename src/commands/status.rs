//! `runner status [WORKSPACE]`: the live or last state of a team, read from its `team.json`
//! (written atomically by the running dispatcher, so this works from another terminal).
//! `--brief` prints a short deterministic summary meant for a lead agent; `--watch`
//! refreshes until the run ends; `--list` lists the teams it knows. Each running teammate
//! shows its last checkpoint (its `working-context.md` write) and is flagged stale past
//! `--stale-after` (default [`crate::working_context::STALE_AFTER`]). The exit code is 0 while
//! nothing has gone wrong (every item completed, or the run goes on without a failure yet),
//! else 1.

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

/// The exit code for snapshot `s`: 1 when an item did not complete or the run ended with
/// items never started, else 0.
fn exit_code(s: &Snapshot) -> i32 {
    if crate::ui::status::incomplete(s) {
        crate::error::EXIT_INCOMPLETE
    } else {
        crate::error::EXIT_OK
    }
}

/// `runner status`.
pub fn status(args: StatusArgs) -> Result<i32> {
    let store = args.store.as_deref();
    if args.list {
        let teams = crate::run::workspace::known(store);
        if teams.is_empty() {
            return Err(Error::Usage(
                "no team workspace here (no *.runner/ or .agent-tasks/teams/)".into(),
            ));
        }
        let mut code = crate::error::EXIT_OK;
        for dir in &teams {
            let s = read(dir)?;
            code = code.max(exit_code(&s));
            crate::ui::outln(crate::ui::status::one_line(dir, &s));
        }
        return Ok(code);
    }
    let stale_after = match &args.stale_after {
        Some(t) => crate::settings::parse_duration("--stale-after", t)?,
        None => crate::working_context::STALE_AFTER,
    };
    let dir = crate::run::workspace::locate_in(args.workspace.as_deref(), store)?;
    if !args.watch {
        let s = read(&dir)?;
        crate::ui::out(if args.brief {
            brief(&dir, &s, stale_after)
        } else {
            full(&dir, &s, stale_after)
        });
        return Ok(exit_code(&s));
    }
    let tty = std::io::stdout().is_terminal();
    loop {
        let s = read(&dir)?;
        let text = if args.brief {
            brief(&dir, &s, stale_after)
        } else {
            full(&dir, &s, stale_after)
        };
        let clear = if tty { "\x1b[2J\x1b[H" } else { "---\n" };
        crate::ui::out(format_args!("{clear}{text}"));
        if s.state != "running" || !alive(s.pid) {
            return Ok(exit_code(&s));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}
