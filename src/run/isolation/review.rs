//! Review before it lands (`--merge=review`, issue 57): a run leaves its completed items
//! `awaiting review`, their work committed on their branches; `runner review` reads them
//! (with their diffs) from the team's journal, `runner accept` sends the chosen ones through
//! the merge queue ([`super::queue::MergeQueue`], the same step `--merge` takes) and
//! `runner reject` deletes their branches. Each decision is journaled as the item's outcome,
//! then handed to the command, which writes it into the run's output.

use std::path::Path;

use super::queue::MergeQueue;
use super::worktree::{Isolation, IsolationRecord, first_line, git_sync};
use crate::error::{Error, Result};
use crate::failure::FailureKind;
use crate::git::GitError;
use crate::report::{self, ItemStatus, Verdict};
use crate::run::events::Event;
use crate::run::record::journal::{self, Entry};
use crate::run::record::outcome::Outcome;
use crate::run::record::team::Team;

/// What a team's record says of its isolation and name, read from its `team.json`.
///
/// Errors: the file cannot be read, or the team ran without `--isolate worktree` (exit 2).
fn recorded(workspace: &Path) -> Result<(String, IsolationRecord)> {
    let path = workspace.join("team.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::read_input("the team's state", &path, e))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::input_at(&path, None, format!("not a team state ({e})")))?;
    let iso = serde_json::from_value::<IsolationRecord>(v["isolation"].clone()).map_err(|_| {
        Error::input_at(
            &path,
            None,
            "this team ran without --isolate worktree: it has no branches to review",
        )
    })?;
    Ok((v["team"].as_str().unwrap_or_default().to_owned(), iso))
}

/// The items of the team in `workspace` waiting for review: each item's last outcome, in item
/// order, those with [`Outcome::awaiting_review`].
///
/// Errors: the journal cannot be read.
pub(crate) fn awaiting(workspace: &Path) -> Result<Vec<Outcome>> {
    let mut last = last_outcomes(workspace)?;
    last.retain(|o| o.awaiting_review);
    // In item order (`2-b` after `1-a`, as the queue would merge them), not the order
    // they finished in.
    last.sort_by_key(|o| {
        o.teammate
            .split('-')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    });
    Ok(last)
}

/// Each item's last outcome in the journal of the team in `workspace`, in the order the
/// journal first met the items.
///
/// Errors: the journal cannot be read.
fn last_outcomes(workspace: &Path) -> Result<Vec<Outcome>> {
    let mut last: Vec<Outcome> = Vec::new();
    for event in journal::events(&workspace.join("journal.jsonl"))? {
        if let Event::ItemFinished(o) = event {
            match last.iter_mut().find(|l| l.id == o.id) {
                Some(l) => *l = *o,
                None => last.push(*o),
            }
        }
    }
    Ok(last)
}

/// One item waiting for review, as `runner review` shows it.
#[derive(Debug)]
pub(crate) struct Waiting {
    /// Its outcome (summary, report, branch).
    pub outcome: Outcome,
    /// `git diff --stat` of its branch against where it left the target.
    pub diffstat: String,
    /// The whole diff, when asked for.
    pub diff: Option<String>,
}

/// What `runner review` shows of the team in `workspace`: the branch merged into, the
/// `--verify` every completed item passed (if the run had one), and each item waiting
/// (`full`: with its whole diff).
///
/// Errors: the team's record or journal cannot be read; it ran without worktrees.
pub(crate) fn waiting(
    workspace: &Path,
    full: bool,
) -> Result<(String, Option<Vec<String>>, Vec<Waiting>)> {
    let (_, rec) = recorded(workspace)?;
    let target = rec.base_branch.clone().unwrap_or_else(|| rec.base.clone());
    let items = awaiting(workspace)?
        .into_iter()
        .map(|outcome| {
            let branch = outcome.branch.clone().unwrap_or_default();
            let range = format!("{target}...{branch}");
            let diffstat = git_sync(&rec.repo, &["diff", "--stat", &range], &[]).stdout;
            let diff = full.then(|| git_sync(&rec.repo, &["diff", &range], &[]).stdout);
            Waiting {
                outcome,
                diffstat,
                diff,
            }
        })
        .collect();
    Ok((target, rec.verify, items))
}

/// Which waiting items `names` (ids or teammate names) mean, in the order given.
///
/// Errors: a name no waiting item has (exit 2), saying what became of that item when the
/// team has it (`already decided: …`), and naming those that wait.
fn chosen(all: &[Outcome], names: &[String]) -> Result<Vec<Outcome>> {
    let waiting: Vec<&Outcome> = all.iter().filter(|o| o.awaiting_review).collect();
    let is = |o: &Outcome, n: &String| &o.id == n || &o.teammate == n;
    names
        .iter()
        .map(|n| {
            if let Some(o) = waiting.iter().find(|o| is(o, n)) {
                return Ok((*o).clone());
            }
            let those = match waiting.is_empty() {
                true => "no item of this team awaits review".to_owned(),
                false => format!(
                    "these do: {}",
                    waiting
                        .iter()
                        .map(|o| o.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let hint = match all.iter().find(|o| is(o, n)) {
                Some(o) => format!("it no longer does, {}; {those}", decided(o)),
                None => those,
            };
            Err(Error::Unknown {
                what: "item awaiting review".into(),
                name: n.clone(),
                suggestion: String::new(),
                hint,
            })
        })
        .collect()
}

/// What became of an item that no longer awaits review: `merged as <commit>`, or its status
/// with its kind and reason.
fn decided(o: &Outcome) -> String {
    match (&o.merged, o.failure_kind) {
        (Some(commit), _) => format!("merged as {}", commit.get(..10).unwrap_or(commit)),
        (None, Some(kind)) => format!("{} [{kind}]: {}", o.status, o.error),
        (None, None) => format!("{}", o.status),
    }
}

/// The team in `workspace`, opened (its lock taken: no run of it goes on), with the items
/// `names` choose and the isolation its record names.
///
/// Errors: a run holds the team; a name no waiting item has; the repository is gone.
fn open(workspace: &Path, names: &[String]) -> Result<(Team, Vec<Outcome>, Isolation)> {
    let (name, rec) = recorded(workspace)?;
    let items = chosen(&last_outcomes(workspace)?, names)?;
    let team = Team::open(&name, workspace)?;
    let mut iso = Isolation::new(&rec.repo, &name, Vec::new(), None)
        .map_err(|e| Error::Environment(e.to_string()))?;
    iso.base_branch = rec.base_branch;
    iso.verify_merged = rec.verify_merged;
    Ok((team, items, iso))
}

/// `runner accept`: send the items `names` of the team in `workspace` through the merge
/// queue, in the order given, each checked by the run's `--verify-merged`; record what
/// became of each (merged, or failed `merge_conflict`/`merge_failed` with its branch kept).
/// Returns each item's new outcome. `tell` gets them once they are journaled, while the
/// team's lock is still held (the command writes them into the run's output).
///
/// Errors: as [`open`]; the queue's worktree cannot be made; the journal cannot be written;
/// what `tell` returns.
pub(crate) fn accept(
    workspace: &Path,
    names: &[String],
    tell: &dyn Fn(&[Outcome]) -> Result<()>,
) -> Result<Vec<Outcome>> {
    let (mut team, items, iso) = open(workspace, names)?;
    let queue = MergeQueue::open(
        &iso,
        workspace,
        iso.verify_merged.clone(),
        std::time::Duration::from_secs(30 * 60),
    )
    .map_err(|e| Error::Environment(e.to_string()))?;
    let mut decided = Vec::new();
    for mut o in items {
        let branch = o.branch.clone().unwrap_or_default();
        let merged = queue.merge(&branch, &o.title);
        let verdict = report::judge_merge(&Verdict::completed(), &merged);
        o.status = verdict.status;
        o.error = verdict.reason;
        o.failure_kind = verdict.kind;
        o.log = queue.log_for(o.failure_kind, std::mem::take(&mut o.log));
        o.awaiting_review = false;
        o.merged = merged.ok();
        team.record(&Entry::ItemFinished {
            outcome: Box::new(o.clone()),
        })?;
        team.record(&Event::ItemMerged {
            id: o.id.clone(),
            teammate: o.teammate.clone(),
            branch: branch.clone(),
            into: queue.target().to_owned(),
            commit: o.merged.clone(),
            error: o.error.clone(),
            failure_kind: o.failure_kind,
            unchanged: false,
            resolved_by: None,
            at: crate::run::now_rfc3339(),
        })?;
        if o.merged.is_some() {
            iso.delete_branch(&branch);
        }
        decided.push(o);
    }
    queue.close();
    team.refinish_snapshot(&decided)?;
    tell(&decided)?;
    Ok(decided)
}

/// `runner reject`: delete the branches of the items `names` of the team in `workspace` and
/// record each `failed` with kind `rejected`. Returns their new outcomes, which `tell` gets
/// first, as in [`accept`].
///
/// Errors: as [`open`]; a branch git cannot delete; the journal cannot be written; what
/// `tell` returns.
pub(crate) fn reject(
    workspace: &Path,
    names: &[String],
    tell: &dyn Fn(&[Outcome]) -> Result<()>,
) -> Result<Vec<Outcome>> {
    let (mut team, items, iso) = open(workspace, names)?;
    let mut decided = Vec::new();
    for mut o in items {
        let branch = o.branch.clone().unwrap_or_default();
        let out = git_sync(&iso.repo, &["branch", "-D", &branch], &[]);
        if !out.ok {
            return Err(Error::Environment(
                GitError::Failed(format!(
                    "cannot delete branch {branch}: {}",
                    first_line(&out.stderr)
                ))
                .to_string(),
            ));
        }
        o.status = ItemStatus::Failed;
        o.failure_kind = Some(FailureKind::Rejected);
        o.error = format!("rejected in review; its branch {branch} was deleted");
        o.awaiting_review = false;
        team.record(&Entry::ItemFinished {
            outcome: Box::new(o.clone()),
        })?;
        decided.push(o);
    }
    team.refinish_snapshot(&decided)?;
    tell(&decided)?;
    Ok(decided)
}
