//! `runner serve [WORKSPACE…] [--port N]`: the live page of teams ([`crate::serve`]), until
//! interrupted; and `--serve` of `batch`/`resolve`/`run`: the page of the run a command
//! starts, for as long as it runs.

use crate::cli::ServeArgs;
use crate::error::{Error, Result};
use crate::run::record::workspace::{Found, locate};
use crate::schedule::plan::Plan;

/// `runner serve`.
///
/// Errors: a workspace not found, or only an archive left of it (exit 2); the port cannot
/// be listened on (exit 3).
pub(crate) fn serve(args: ServeArgs) -> Result<i32> {
    let named: Vec<Option<&std::path::Path>> = match args.workspaces.is_empty() {
        true => vec![None],
        false => args.workspaces.iter().map(|p| Some(p.as_path())).collect(),
    };
    let mut dirs = Vec::new();
    for arg in named {
        match locate(arg)? {
            Found::Workspace(dir) => dirs.push(dir),
            Found::Archive(p) => {
                return Err(Error::Usage(format!(
                    "{}: this team's workspace was removed when every item completed, and its archive is no live journal; see it with `runner report {} --html FILE`",
                    p.display(),
                    p.display()
                )));
            }
        }
    }
    let live = crate::serve::start(&dirs, args.port, false)?;
    for dir in &dirs {
        crate::ui::outln(format_args!("Serving {}", dir.display()));
    }
    crate::ui::outln(format_args!(
        "Live page: {} (read-only, 127.0.0.1 only; Ctrl-C stops it)",
        live.url
    ));
    live.wait();
    Ok(crate::error::EXIT_OK)
}

/// With `--serve` (and not `--dry-run`), the live page of `plan`'s run, its URL said first.
///
/// Errors: it cannot listen (exit 3).
pub(crate) fn for_run(plan: &Plan) -> Result<Option<crate::serve::Live>> {
    let s = &plan.spec.settings;
    if !s.serve || s.dry_run {
        return Ok(None);
    }
    let live = crate::serve::start(std::slice::from_ref(&plan.spec.workspace), None, true)?;
    crate::ui::say(
        s.format,
        format!("Live page: {} (while the run goes on)", live.url),
    );
    Ok(Some(live))
}
