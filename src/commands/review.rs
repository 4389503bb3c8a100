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
    let decided = review::accept(&ws, &args.items)?;
    crate::ui::review::print_decided(&decided);
    Ok(i32::from(
        decided.iter().any(|o| o.status != ItemStatus::Completed),
    ))
}

/// `runner reject`.
pub(crate) fn reject(args: DecideArgs) -> Result<i32> {
    let ws = workspace(args.team.as_deref())?;
    let decided = review::reject(&ws, &args.items)?;
    crate::ui::review::print_decided(&decided);
    Ok(0)
}
