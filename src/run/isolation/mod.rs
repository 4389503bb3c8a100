//! A run's worktree isolation from start to end (DESIGN §9): checked and set up from the
//! settings before anything is written, and finished after the run — completed branches
//! merged in item order (with `--merge`), finished worktrees removed, and what is left
//! described for the UI. The git mechanics are in [`crate::run::isolation::worktree`].

pub(crate) mod conflict;
pub(crate) mod diff;
pub(crate) mod leftovers;
pub(crate) mod queue;
pub(crate) mod review;
pub(crate) mod worktree;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::git::GitError;
use crate::report::{self, ItemStatus, Verdict};
use crate::run::RunSpec;
use crate::run::events::{Event, Reporter, RunSummary};
use crate::run::record::journal::Entry;
use crate::run::record::outcome::Outcome;
use crate::run::record::team::Team;
use crate::settings::Settings;
use conflict::{Handoff, Landed, Resolver};
use queue::MergeQueue;
use worktree::Isolation;

/// Set up isolation when `--isolate worktree`: the repository of `cwd`; for `--merge` a
/// checked-out branch to merge into. The main working tree's state is checked with the
/// plan's files by [`check_clean`].
///
/// Errors: not a git repository, no commit, a copied file that does not exist, a detached
/// HEAD with `--merge` (exit 2).
pub(crate) fn prepare(
    settings: &Settings,
    cwd: &Path,
    team: &str,
) -> Result<Option<Arc<Isolation>>> {
    if !settings.isolate {
        return Ok(None);
    }
    let mut iso = Isolation::new(
        cwd,
        team,
        settings.worktree_copy.clone(),
        settings.worktree_setup.clone(),
    )
    .map_err(|e| Error::Usage(e.to_string()))?;
    iso.verify_merged.clone_from(&settings.verify_merged);
    iso.verify.clone_from(&settings.verify);
    for rel in &iso.copy {
        if !iso.repo.join(rel).exists() {
            return Err(Error::missing_file(
                &iso.repo.join(rel),
                "file to copy (--worktree-copy)",
                format!("name a file inside the repository {}", iso.repo.display()),
            ));
        }
    }
    if settings.merge && iso.base_branch.is_none() {
        return Err(Error::needs(
            "--merge",
            "a checked-out branch to merge into",
            "HEAD is detached; check out a branch first",
        ));
    }
    Ok(Some(Arc::new(iso)))
}

/// For `--merge`: check that the main working tree has no changes but the files and folders
/// the runner itself writes (`ours`: its workspace, outputs, sidecars, JUnit report, store).
///
/// Errors: other changes, listed (exit 2); git cannot tell.
pub(crate) fn check_clean(iso: &Isolation, ours: &[PathBuf]) -> Result<()> {
    let repo = crate::fsutil::real_path(&iso.repo);
    let rel: Vec<PathBuf> = ours
        .iter()
        .filter_map(|p| {
            crate::fsutil::real_path(p)
                .strip_prefix(&repo)
                .ok()
                .map(Path::to_owned)
        })
        .collect();
    let dirty = worktree::dirty(&iso.repo, &rel).map_err(|e| Error::Usage(e.to_string()))?;
    if dirty.is_empty() {
        return Ok(());
    }
    Err(Error::needs(
        "--merge",
        format!("a clean working tree in {}", iso.repo.display()),
        format!(
            "it has changes: {}; commit or stash them first",
            dirty.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
        ),
    ))
}

/// What the isolation step did and left, for the UI to describe.
#[derive(Debug, Default)]
pub(crate) struct IsolationEnd {
    /// The branch merged into (`HEAD` when detached).
    pub target: String,
    /// Branches merged with `--merge` (and deleted).
    pub merged: Vec<String>,
    /// Completed branches left to merge by hand (without `--merge`).
    pub to_merge: Vec<String>,
    /// Worktrees kept for inspection: (teammate, worktree path, branch).
    pub kept: Vec<(String, PathBuf, String)>,
    /// Items the live display showed completed whose merge then failed: (teammate, why).
    pub merge_failed: Vec<(String, String)>,
    /// Completed items left for review (`--merge=review`): their teammates.
    pub awaiting_review: Vec<String>,
}

/// After a run with worktree isolation: send completed branches through the merge queue in
/// item order (with `--merge`, [`queue::MergeQueue`]: each merge checked by `--verify-merged`
/// before the target moves; a conflict or a failed check makes that item `failed` by
/// [`report::judge_merge`], its branch and worktree kept), remove the worktrees of completed
/// items, delete merged branches. Each step is journaled (the item's outcome recorded again,
/// with its merge commit or its failure) and shown (`reporter` gets an
/// [`Event::ItemMerged`]); a resumed run passes over items merged before, also one whose
/// merge landed but was not recorded (its commit is in the target). The summary is
/// corrected for items a merge failed. `ids` are the run's items in input order. With
/// `--on-conflict`, a conflicting item goes to `resolver` ([`conflict::resolve`]).
///
/// Errors: the journal cannot be read or written.
pub(crate) fn finish(
    spec: &RunSpec,
    team: &mut Team,
    ids: &[String],
    summary: &mut RunSummary,
    reporter: &mut dyn Reporter,
    mut resolver: Option<&mut dyn Resolver>,
) -> Result<Option<IsolationEnd>> {
    let Some(iso) = &spec.isolation else {
        return Ok(None);
    };
    let mut end = IsolationEnd {
        target: iso.base_branch.clone().unwrap_or_else(|| "HEAD".into()),
        // Landed as they completed (`--serialize-overlaps`), before the queue below.
        merged: iso.landed.lock().map(|l| l.clone()).unwrap_or_default(),
        ..IsolationEnd::default()
    };
    let mut queue: Option<MergeQueue> = None;
    let mut changed = Vec::new();
    let mut landed: Vec<Landed> = Vec::new();
    for id in ids {
        let Some(mut o) = team.outcome(id)? else {
            continue;
        };
        keep_losers(spec, &o, &mut end);
        let Some(branch) = o.branch.clone() else {
            continue;
        };
        let path = spec.workspace.join("worktrees").join(&o.teammate);
        if o.status != ItemStatus::Completed {
            if path.exists() {
                end.kept.push((o.teammate.clone(), path, branch));
            }
            continue;
        }
        if !spec.settings.merge {
            let _ = iso.remove(&path);
            end.to_merge.push(branch);
            continue;
        }
        // Merged and recorded by an earlier run (its branch deleted then), or waiting for
        // its review.
        if let Some(merge) = &o.merged {
            landed.push(landed_of(&o, merge));
        }
        if o.merged.is_some() || o.awaiting_review {
            continue;
        }
        if spec.settings.review {
            let _ = iso.remove(&path);
            o.awaiting_review = true;
            team.record(&Entry::ItemFinished {
                outcome: Box::new(o.clone()),
            })?;
            end.awaiting_review.push(o.teammate.clone());
            continue;
        }
        let mut resolved_by = None;
        let q = match &queue {
            Some(q) => q,
            None => queue.insert(open_queue(spec, iso)?),
        };
        // Landed by an earlier run killed before it recorded so: recorded now with the merge
        // that brought it in, not merged again. A branch the target holds without such a
        // merge has no commit of its own: nothing lands and nothing failed.
        let merged = match o.commit.as_deref().filter(|c| q.holds(c)) {
            Some(c) => match q.landing_merge(c) {
                Some(merge) => Ok(merge),
                None => {
                    pass_unchanged(team, reporter, iso, &mut o, &path, &end.target)?;
                    continue;
                }
            },
            None => {
                let h = Handoff {
                    queue: q,
                    workspace: &spec.workspace,
                    branch: &branch,
                    files: Vec::new(),
                    landed: &landed,
                    attempts: spec.settings.conflict_attempts,
                };
                let (merged, by) =
                    merge_or_resolve(h, &mut o, resolver.as_deref_mut(), team, reporter)?;
                resolved_by = by;
                merged
            }
        };
        judged(&mut o, q, merged);
        team.record(&Entry::ItemFinished {
            outcome: Box::new(o.clone()),
        })?;
        let step = merge_step(&o, &branch, &end.target, false, resolved_by);
        team.record(&step)?;
        reporter.event(&step);
        if let Some(merge) = &o.merged {
            landed.push(landed_of(&o, merge));
            let _ = iso.remove(&path);
            iso.delete_branch(&branch);
            end.merged.push(branch);
            continue;
        }
        summary.demote(&o);
        changed.push(o.clone());
        end.merge_failed.push((o.teammate.clone(), o.error.clone()));
        end.kept.push((o.teammate.clone(), path, branch));
    }
    if let Some(q) = queue {
        q.close();
    }
    team.refinish_snapshot(&changed)?;
    let _ = worktree::git_sync(&iso.repo, &["worktree", "prune"], &[]);
    Ok(Some(end))
}

/// Merge `o`'s branch through the queue of `h`; when it conflicts and a `resolver` is
/// given, hand it over ([`conflict::resolve`]). Returns the merge commit or why it did not
/// land, and who resolved it when a resolver's result landed.
///
/// Errors: the journal cannot be read or written.
fn merge_or_resolve(
    mut h: Handoff<'_>,
    o: &mut Outcome,
    resolver: Option<&mut (dyn Resolver + '_)>,
    team: &mut Team,
    reporter: &mut dyn Reporter,
) -> Result<(std::result::Result<String, GitError>, Option<String>)> {
    match (h.queue.merge(h.branch, &o.title), resolver) {
        (Err(GitError::Conflict(files)), Some(r)) => {
            h.files = files;
            let merged = conflict::resolve(&h, o, r, team, reporter)?;
            let by = merged.is_ok().then(|| r.who());
            Ok((merged, by))
        }
        (merged, _) => Ok((merged, None)),
    }
}

/// `--best-of`: the outcome `o` is the winner's, so only its branch is merged; the other
/// candidates' worktrees and branches are kept until `runner clean` (DESIGN §13).
fn keep_losers(spec: &RunSpec, o: &Outcome, end: &mut IsolationEnd) {
    let losers = o.best_of.iter().flat_map(|b| &b.candidates);
    for c in losers.filter(|c| c.teammate != o.teammate) {
        let path = spec.workspace.join("worktrees").join(&c.teammate);
        if let (Some(branch), true) = (&c.branch, path.exists()) {
            end.kept.push((c.teammate.clone(), path, branch.clone()));
        }
    }
}

/// `o` judged again by what its merge came to ([`report::judge_merge`]): its status, reason
/// and kind, the log that explains a failure, and its merge commit.
fn judged(o: &mut Outcome, q: &MergeQueue, merged: std::result::Result<String, GitError>) {
    let verdict = report::judge_merge(
        &Verdict {
            status: o.status,
            reason: o.error.clone(),
            kind: o.failure_kind,
            retry_after_s: None,
        },
        &merged,
    );
    o.status = verdict.status;
    o.error = verdict.reason;
    o.failure_kind = verdict.kind;
    o.log = q.log_for(o.failure_kind, std::mem::take(&mut o.log));
    o.merged = merged.ok();
}

/// `--serialize-overlaps`: land `o`, a completed item of a chain ([`RunSpec::chained`]),
/// through the merge queue as soon as it completes — before its outcome is sent, so the
/// next item of its chain, which waits for that outcome, starts from its merge. One item
/// lands at a time (the isolation's `landing` lock). Merged: its worktree and branch go; a
/// conflict or a failed `--verify-merged` fails it as [`finish`] would, its branch and
/// worktree kept; a branch that adds nothing is passed over as `unchanged` (its branch
/// dropped from the outcome). Returns the queue's step to journal and show before the
/// outcome; `None` when `o` is not to land now. Blocking (git, the check): run it off the
/// async threads.
pub(crate) fn land_now(spec: &RunSpec, o: &mut Outcome) -> Option<Event> {
    let iso = spec.isolation.as_ref()?;
    let settings = &spec.settings;
    if !settings.merge || settings.review || o.status != ItemStatus::Completed {
        return None;
    }
    if !spec.chained(&o.id) || o.merged.is_some() {
        return None;
    }
    let branch = o.branch.clone()?;
    let _one_at_a_time = iso
        .landing
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let into = iso.base_branch.clone().unwrap_or_else(|| "HEAD".into());
    let path = spec.workspace.join("worktrees").join(&o.teammate);
    let q = match open_queue(spec, iso) {
        Ok(q) => q,
        Err(e) => {
            o.status = ItemStatus::Failed;
            o.failure_kind = Some(crate::failure::FailureKind::MergeFailed);
            o.error = format!("cannot land it for --serialize-overlaps: {e}");
            return Some(merge_step(o, &branch, &into, false, None));
        }
    };
    let merged = match o.commit.as_deref().filter(|c| q.holds(c)) {
        Some(c) => match q.landing_merge(c) {
            Some(merge) => Ok(merge),
            None => {
                q.close();
                o.branch = None;
                let _ = iso.remove(&path);
                iso.delete_branch(&branch);
                return Some(merge_step(o, &branch, &into, true, None));
            }
        },
        None => q.merge(&branch, &o.title),
    };
    judged(o, &q, merged);
    q.close();
    if o.merged.is_some() {
        let _ = iso.remove(&path);
        iso.delete_branch(&branch);
        if let Ok(mut landed) = iso.landed.lock() {
            landed.push(branch.clone());
        }
    }
    Some(merge_step(o, &branch, &into, false, None))
}

/// The merge queue's step for `o` (its branch `branch` into `into`), as journaled and shown:
/// its merge commit, or why it did not land; `unchanged` for a branch that adds nothing;
/// `resolved_by` who resolved its conflict, when a resolver's result landed.
fn merge_step(
    o: &Outcome,
    branch: &str,
    into: &str,
    unchanged: bool,
    resolved_by: Option<String>,
) -> Event {
    Event::ItemMerged {
        id: o.id.clone(),
        teammate: o.teammate.clone(),
        branch: branch.to_owned(),
        into: into.to_owned(),
        commit: o.merged.clone(),
        error: if unchanged {
            String::new()
        } else {
            o.error.clone()
        },
        failure_kind: o.failure_kind,
        unchanged,
        resolved_by,
        at: crate::run::now_rfc3339(),
    }
}

/// Item `o`, merged as `merge`, as a resolver's prompt names it.
fn landed_of(o: &Outcome, merge: &str) -> Landed {
    Landed {
        id: o.id.clone(),
        title: o.title.clone(),
        summary: o.summary.clone(),
        merge: merge.to_owned(),
    }
}

/// A completed item whose branch the target holds with no merge of the queue's: it made no
/// commit of its own, so nothing lands and nothing failed. Its step is shown `unchanged`, its
/// worktree (`path`) and empty branch go, and its outcome is recorded without a branch, so a
/// resumed run passes it over and no `merged` commit is ever claimed for it.
///
/// Errors: the journal cannot be written.
fn pass_unchanged(
    team: &mut Team,
    reporter: &mut dyn Reporter,
    iso: &Isolation,
    o: &mut Outcome,
    path: &Path,
    into: &str,
) -> Result<()> {
    let Some(branch) = o.branch.take() else {
        return Ok(());
    };
    let step = merge_step(o, &branch, into, true, None);
    team.record(&step)?;
    reporter.event(&step);
    let _ = iso.remove(path);
    iso.delete_branch(&branch);
    team.record(&Entry::ItemFinished {
        outcome: Box::new(o.clone()),
    })
}

/// The merge queue of this run: its checks are `--verify-merged` with an attempt's time
/// limit.
///
/// Errors: git cannot make its worktree (exit 3).
fn open_queue<'a>(spec: &RunSpec, iso: &'a worktree::Isolation) -> Result<MergeQueue<'a>> {
    MergeQueue::open(
        iso,
        &spec.workspace,
        spec.settings.verify_merged.clone(),
        spec.settings.timeout.unwrap_or(DEFAULT_CHECK_LIMIT),
    )
    .map_err(|e| Error::Environment(e.to_string()))
}

/// The time limit of a `--verify-merged` check when attempts have none.
const DEFAULT_CHECK_LIMIT: std::time::Duration = std::time::Duration::from_secs(30 * 60);
