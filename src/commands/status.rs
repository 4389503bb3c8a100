//! `runner status [WORKSPACE]`: the live or last state of a team, read from its `team.json`
//! (written atomically by the running dispatcher, so this works from another terminal).
//! `--brief` prints a short deterministic summary meant for a lead agent; `--watch`
//! refreshes until the run ends.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::cli::StatusArgs;
use crate::error::{Error, Result};
use crate::run::team::Snapshot;
use crate::ui::status::{alive, brief, full};

/// Find the workspace: a folder with team.json, team.json itself, an output CSV (its
/// `.runner` folder), a `todo-N.md` (its store's `teams/todo-resolve-N`), or, without an
/// argument, the most recently updated team here (`*.runner/`, `.agent-tasks/teams/*/`).
fn locate(arg: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = arg {
        let candidates = [
            p.to_owned(),
            p.parent().map(Path::to_owned).unwrap_or_default(),
            p.with_extension("runner"),
            p.parent()
                .unwrap_or(Path::new("."))
                .join("teams")
                .join(crate::source::todo_batch::team_name(p)),
        ];
        return candidates
            .into_iter()
            .find(|c| c.join("team.json").is_file())
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{}: no team workspace (team.json) there",
                    p.display()
                ))
            });
    }
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    let mut scan = |dir: &Path, runner_only: bool| {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if runner_only && p.extension().is_none_or(|x| x != "runner") {
                continue;
            }
            if let Ok(m) = std::fs::metadata(p.join("team.json")).and_then(|m| m.modified()) {
                found.push((m, p));
            }
        }
    };
    scan(Path::new("."), true);
    let cwd = std::env::current_dir().unwrap_or_default();
    if let Some(root) = crate::store::git_root(&cwd) {
        scan(&root.join(crate::store::STORE_DIR).join("teams"), false);
    }
    scan(
        Path::new(crate::store::STORE_DIR).join("teams").as_path(),
        false,
    );
    found.sort();
    found.pop().map(|(_, p)| p).ok_or_else(|| {
        Error::Usage(
            "no team workspace here (no *.runner/ or .agent-tasks/teams/); give its path".into(),
        )
    })
}

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
    let dir = locate(args.workspace.as_deref())?;
    let dir = dir.canonicalize().unwrap_or(dir);
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
