//! `runner review [TEAM]`, `runner accept ITEM…`, `runner reject ITEM…`: the items a
//! `--merge=review` run left awaiting review, shown with their diffs, then merged through
//! the merge queue or discarded (`run::isolation::review`; DESIGN §9).

use std::path::PathBuf;

use crate::cli::{DecideArgs, ReviewArgs};
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::isolation::review;
use crate::run::record::workspace::{Found, locate};

/// The workspace `arg` names (or the most recently updated team here).
///
/// Errors: none is found, or the team was archived (it has no branches left; exit 2).
fn workspace(arg: Option<&std::path::Path>) -> Result<PathBuf> {
    match locate(arg)? {
        Found::Workspace(dir) => Ok(dir),
        Found::Archive(file) => Err(Error::input_at(
            &file,
            None,
            "this team was archived: every item completed and nothing awaits review",
        )),
    }
}

/// `runner review`.
pub(crate) fn review(args: ReviewArgs) -> Result<i32> {
    let ws = workspace(args.team.as_deref())?;
    let (target, verify, items) = review::waiting(&ws, args.diff)?;
    crate::ui::review::print_waiting(&ws, &target, verify.as_deref(), &items);
    Ok(0)
}

/// `runner accept`: exit 0 when every item landed, else 1.
pub(crate) fn accept(args: DecideArgs) -> Result<i32> {
    let ws = workspace(args.team.as_deref())?;
    end_the_check_when_interrupted();
    let decided = review::accept(&ws, &args.items, &|d| in_the_output(&ws, d))?;
    crate::ui::review::print_decided(&decided);
    Ok(i32::from(
        decided.iter().any(|o| o.status != ItemStatus::Completed),
    ))
}

/// From now on, SIGINT, SIGTERM or SIGHUP ends the merged tree's check that `runner accept`
/// runs (in a process group of its own, which a Ctrl-C at the terminal does not reach), then
/// the process, exit 130: the item being merged stays awaiting review, the target unmoved.
fn end_the_check_when_interrupted() {
    std::thread::spawn(|| {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                return;
            };
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
            crate::run::isolation::queue::end_running_check();
            eprintln!("runner: interrupted; the item being merged still awaits review");
            std::process::exit(crate::error::EXIT_INTERRUPTED);
        });
    });
}

/// Write the items `decided` into the output table of the team in `ws` at once
/// ([`crate::sink::decided::record_decisions`]).
///
/// Errors: the table cannot be read or written.
fn in_the_output(
    ws: &std::path::Path,
    decided: &[crate::run::record::outcome::Outcome],
) -> Result<()> {
    crate::sink::decided::record_decisions(ws, decided).map(|_| ())
}

/// `runner reject`.
pub(crate) fn reject(args: DecideArgs) -> Result<i32> {
    let ws = workspace(args.team.as_deref())?;
    let decided = review::reject(&ws, &args.items, &|d| in_the_output(&ws, d))?;
    crate::ui::review::print_decided(&decided);
    Ok(0)
}
