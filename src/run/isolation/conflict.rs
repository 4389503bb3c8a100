//! Conflicts handed back (`--on-conflict`, DESIGN §9, issue 57): an item whose branch
//! conflicts while the merge queue merges it goes to a resolver — a teammate working in a
//! fresh worktree (`worktrees/<teammate>.resolve`) that holds the merge in progress, markers
//! in its files — with a prompt naming the conflicting files, the other items whose changes
//! it meets and its own summary. Its result is taken only when it leaves no marker, is the
//! merge of the branch onto the target's tip (the runner commits it when the resolver only
//! edited files) and passes the item's `--verify` there and `--verify-merged` in the queue's
//! worktree; then the target moves to it. Otherwise the next attempt, up to
//! `--conflict-attempts`; after the last the item fails as without the option, its branch
//! kept, the target untouched.
//!
//! Each attempt is journaled twice ([`Event::ConflictHanded`], [`Event::ConflictResolved`]),
//! so a resumed run goes on where a killed one stopped: attempts that finished count, one
//! killed mid-way is made again, and a result that passed its checks lands without being
//! made again. Running the resolver (an agent, the verify command) is the schedule layer's
//! ([`Resolver`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::queue::{MergeQueue, remove_worktree};
use super::worktree::git_sync;
use crate::error::Result;
use crate::git::GitError;
use crate::run::events::{Event, Reporter};
use crate::run::record::journal;
use crate::run::record::outcome::Outcome;
use crate::run::record::team::Team;

/// The name a resolver of `teammate` works under (its folder and worktree):
/// `<teammate>.resolve`.
pub(crate) fn resolver_name(teammate: &str) -> String {
    format!("{teammate}.resolve")
}

/// Whether `w` is a resolver's worktree a killed run left: named `<teammate>.resolve` and
/// detached (a teammate's own worktree is on its branch).
pub(crate) fn is_resolver_worktree(w: &Path) -> bool {
    w.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".resolve"))
        && !git_sync(w, &["symbolic-ref", "-q", "HEAD"], &[]).ok
}

/// One run of a resolver's agent: why it did not finish (`None` when it exited 0), what it
/// cost and how long it took.
#[derive(Debug, Default)]
pub(crate) struct AgentRun {
    /// Why it did not finish well, one line; `None` when it did.
    pub error: Option<String>,
    /// What it cost (USD), when known.
    pub cost_usd: Option<f64>,
    /// Its wall time.
    pub elapsed: Duration,
}

/// What runs a resolver: the schedule layer's, which starts agents and verify commands.
pub(crate) trait Resolver {
    /// Who resolves, as shown and journaled: `agent`, or `RUNNER[:MODEL]`.
    fn who(&self) -> String;
    /// Run the resolver's agent once, as attempt `attempt` of item `o`'s resolution, in the
    /// worktree `dir` with `prompt`, under the run's sandbox (the worktree is what it may
    /// change).
    fn run_agent(&mut self, o: &Outcome, dir: &Path, prompt: &str, attempt: u32) -> AgentRun;
    /// Run item `o`'s `--verify` (if the run has one) in `dir`, which holds the resolved
    /// merge committed.
    ///
    /// Errors: why it did not pass.
    fn verify(&mut self, o: &Outcome, dir: &Path, attempt: u32) -> std::result::Result<(), String>;
}

/// An item the queue merged, as a resolver's prompt names it.
#[derive(Debug, Clone)]
pub(crate) struct Landed {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// What its report says it did.
    pub summary: String,
    /// Its merge commit on the target.
    pub merge: String,
}

/// The items of `landed` whose changes the branch `branch` meets in `files`: merged after
/// the branch started (their merge is not in it) and touching one of `files`.
fn met<'a>(repo: &Path, branch: &str, files: &[String], landed: &'a [Landed]) -> Vec<&'a Landed> {
    landed
        .iter()
        .filter(|l| {
            let in_branch = git_sync(
                repo,
                &["merge-base", "--is-ancestor", &l.merge, branch],
                &[],
            )
            .ok;
            let range = format!("{}^1", l.merge);
            let mut args = vec!["diff", "--name-only", &range, &l.merge, "--"];
            args.extend(files.iter().map(String::as_str));
            let touched = !git_sync(repo, &args, &[]).stdout.trim().is_empty();
            !in_branch && touched
        })
        .collect()
}

/// The resolver's prompt: the item, the conflicting files, the items it meets there with
/// their summaries, and what its result must be.
fn prompt(
    o: &Outcome,
    (branch, target, dir): (&str, &str, &Path),
    files: &[String],
    met: &[&Landed],
) -> String {
    let mut p = format!(
        "You are resolving a git merge conflict. This worktree ({dir}) holds the merge of branch `{branch}` \
         (item {id}: {title}) onto `{target}`, in progress: git stopped on conflicts, the \
         conflict markers (<<<<<<<, =======, >>>>>>>) are in the files, MERGE_HEAD is set.\n\n\
         What item {id} did: {summary}\n\nFiles in conflict:\n",
        dir = dir.display(),
        id = o.id,
        title = o.title,
        summary = if o.summary.is_empty() {
            "(no summary)"
        } else {
            &o.summary
        },
    );
    for f in files {
        p.push_str(&format!("- {f}\n"));
    }
    if met.is_empty() {
        p.push_str(
            "\nNo other item of this run merged into those files since the branch started.\n",
        );
    } else {
        p.push_str(&format!(
            "\nThese items were merged into `{target}` since the branch started and changed those files; keep their changes as well as item {}'s:\n",
            o.id
        ));
        for l in met {
            let summary = if l.summary.is_empty() {
                "(no summary)"
            } else {
                &l.summary
            };
            p.push_str(&format!("- item {} ({}): {summary}\n", l.id, l.title));
        }
    }
    p.push_str(
        "\nEdit the conflicting files so that both sides' intent is kept and no conflict marker \
         is left; the project's checks must still pass. Do not abort the merge, reset, or move \
         HEAD. You may leave the files edited (the runner commits the merge) or commit the \
         merge yourself.\n",
    );
    p
}

/// What one item's earlier resolution attempts left in the journal: how many finished, and
/// the merge commit of the last, when it passed its checks.
fn earlier(workspace: &Path, id: &str) -> Result<(u32, Option<String>)> {
    let mut finished = 0;
    let mut passed = None;
    for event in journal::events(&workspace.join("journal.jsonl"))? {
        if let Event::ConflictResolved { id: of, commit, .. } = event
            && of == id
        {
            finished += 1;
            passed = commit;
        }
    }
    Ok((finished, passed))
}

/// Where an item's conflict is handed to its resolver.
pub(crate) struct Handoff<'a> {
    /// The queue merging it.
    pub queue: &'a MergeQueue<'a>,
    /// The team workspace.
    pub workspace: &'a Path,
    /// The branch that conflicted and the files it conflicted in.
    pub branch: &'a str,
    /// The files it conflicted in.
    pub files: Vec<String>,
    /// The items merged so far, in item order.
    pub landed: &'a [Landed],
    /// `--conflict-attempts`.
    pub attempts: u32,
}

/// Hand item `o`'s conflicting merge to `resolver`, attempt after attempt (those an earlier
/// run finished count), and land the first result that passes. Each attempt's cost and time
/// are added to `o`. Returns the merge commit the target moved to, or why none did
/// ([`GitError::Unresolved`], [`GitError::Unverified`] when the last result failed
/// `--verify-merged`, or [`GitError::Failed`]).
///
/// Errors: the journal cannot be read or written.
pub(crate) fn resolve(
    h: &Handoff<'_>,
    o: &mut Outcome,
    resolver: &mut dyn Resolver,
    team: &mut Team,
    reporter: &mut dyn Reporter,
) -> Result<std::result::Result<String, GitError>> {
    let q = h.queue;
    let (done, passed) = earlier(h.workspace, &o.id)?;
    // A result that passed its checks before a kill, the target not moved since: it lands.
    if let Some(commit) = passed.filter(|c| first_parent(q.repo(), c) == q.tip()) {
        return Ok(q.advance(&commit).map(|()| commit));
    }
    let dir: PathBuf = h
        .workspace
        .join("worktrees")
        .join(resolver_name(&o.teammate));
    let mut last = GitError::Unresolved(h.files.clone(), "no resolution attempt is left".into());
    for attempt in done + 1..=h.attempts {
        let met = met(q.repo(), h.branch, &h.files, h.landed);
        let handed = Event::ConflictHanded {
            id: o.id.clone(),
            teammate: o.teammate.clone(),
            attempt,
            resolver: resolver.who(),
            files: h.files.clone(),
            met: met.iter().map(|l| l.id.clone()).collect(),
            at: crate::run::now_rfc3339(),
        };
        team.record(&handed)?;
        reporter.event(&handed);
        let (taken, run) = match q.begin_conflicted(h.branch, &o.title, &dir) {
            Err(e) => (Err(e), AgentRun::default()),
            Ok(files) => {
                let text = prompt(o, (h.branch, q.target(), &dir), &files, &met);
                let run = resolver.run_agent(o, &dir, &text, attempt);
                (take(h, o, resolver, &dir, &files, &run, attempt), run)
            }
        };
        o.duration_s += run.elapsed.as_secs_f64();
        if let Some(c) = run.cost_usd {
            o.cost_usd = Some(o.cost_usd.unwrap_or(0.0) + c);
        }
        let resolved = Event::ConflictResolved {
            id: o.id.clone(),
            teammate: o.teammate.clone(),
            attempt,
            commit: taken.as_ref().ok().cloned(),
            error: taken
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default(),
            cost_usd: run.cost_usd,
            elapsed_s: run.elapsed.as_secs_f64(),
            at: crate::run::now_rfc3339(),
        };
        team.record(&resolved)?;
        reporter.event(&resolved);
        remove_worktree(q.repo(), &dir);
        crate::fault::point("conflict_resolved");
        match taken {
            Ok(commit) => return Ok(q.advance(&commit).map(|()| commit)),
            Err(e) => last = e,
        }
    }
    Ok(Err(last))
}

/// Whether the resolver's result in `dir` can be taken: the agent finished, the merge is
/// concluded ([`MergeQueue::conclude`]), and it passes the item's `--verify` there and
/// `--verify-merged` in the queue. Returns its merge commit.
fn take(
    h: &Handoff<'_>,
    o: &Outcome,
    resolver: &mut dyn Resolver,
    dir: &Path,
    files: &[String],
    run: &AgentRun,
    attempt: u32,
) -> std::result::Result<String, GitError> {
    let rejected = |why: String| GitError::Unresolved(files.to_vec(), why);
    if let Some(why) = &run.error {
        return Err(rejected(format!("the resolver {why}")));
    }
    let commit = h.queue.conclude(dir, h.branch, files).map_err(rejected)?;
    resolver
        .verify(o, dir, attempt)
        .map_err(|why| rejected(format!("the resolved merge failed --verify: {why}")))?;
    h.queue.check_merge(&commit, h.branch)?;
    Ok(commit)
}

/// The first parent of `commit`, empty when git cannot tell.
fn first_parent(repo: &Path, commit: &str) -> String {
    git_sync(repo, &["rev-parse", &format!("{commit}^1")], &[])
        .stdout
        .trim()
        .to_owned()
}
