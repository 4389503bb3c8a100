//! `runner show ID --diff A B`: what two `--best-of` candidates of an item did differently,
//! as one `git diff` from A's branch to B's (DESIGN §13).

use crate::error::{Error, Result};
use crate::report::best_of::BestOf;
use crate::run::events::Event;
use crate::run::isolation::{leftovers, worktree::git_sync};
use crate::run::record::workspace::Found;

/// The diff from candidate `a`'s branch to candidate `b`'s (each its number, `c2`, or its
/// teammate's name) of item `id`, whose recorded `events` are given; run in the repository
/// here, else in one of their worktrees. What agents wrote is shown, never obeyed.
///
/// Errors: the item has no candidates, `a` or `b` is none of them or has no branch (no
/// `--isolate worktree`), no repository is found, git cannot diff them (a merged winner's
/// branch is deleted) — exit 2.
pub(super) fn diff(found: &Found, id: &str, events: &[Event], a: &str, b: &str) -> Result<String> {
    let best_of: BestOf = events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::ItemFinished(o) => o.best_of.as_deref().cloned(),
            _ => None,
        })
        .ok_or_else(|| {
            Error::Usage(format!(
                "item {id} was not given to candidates (--best-of); --diff compares two of them"
            ))
        })?;
    let names: Vec<String> = best_of
        .candidates
        .iter()
        .map(|c| format!("c{}", c.candidate))
        .collect();
    let branch = |name: &str| -> Result<(String, String)> {
        let k = name.trim().trim_start_matches('c');
        let c = best_of
            .candidates
            .iter()
            .find(|c| c.candidate.to_string() == k || c.teammate == name)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{name}: not a candidate of item {id}; its candidates are {}",
                    names.join(", ")
                ))
            })?;
        let branch = c.branch.clone().ok_or_else(|| {
            Error::Usage(format!(
                "candidate {} has no branch: --diff compares the candidates' branches of a run with --isolate worktree",
                c.teammate
            ))
        })?;
        Ok((c.teammate.clone(), branch))
    };
    let ((ta, ba), (tb, bb)) = (branch(a)?, branch(b)?);
    let here = std::env::current_dir().unwrap_or_default();
    let worktrees = found.path().join("worktrees");
    let repo = leftovers::repo_at(&here)
        .or_else(|| {
            [&ta, &tb]
                .into_iter()
                .map(|t| worktrees.join(t))
                .find(|p| p.is_dir())
        })
        .ok_or_else(|| {
            Error::Usage(
                "no git repository here: run `runner show --diff` inside the repository the candidates' branches are in".into(),
            )
        })?;
    let out = git_sync(&repo, &["diff", "--stat", "--patch", &ba, &bb, "--"], &[]);
    if !out.ok {
        return Err(Error::Usage(format!(
            "git diff {ba} {bb}: {} (a merged winner's branch is deleted)",
            out.stderr.trim()
        )));
    }
    Ok(crate::ui::terminal_safe(&format!(
        "Candidate {ta} ({ba}) to candidate {tb} ({bb}):\n{}",
        out.stdout
    )))
}
