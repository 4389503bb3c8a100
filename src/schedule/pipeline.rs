//! The one pipeline every run goes through (DESIGN §1): a [`Plan`] in, what the run did out
//! ([`Ran`]). Check, then dry run, or open the team → execute → finish isolation → archive →
//! sinks → close. The commands only build plans and show what came back (the pipeline prints
//! nothing; the display sink shows events as they happen); nothing else sequences these
//! steps.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK, Error, Result};
use crate::options::Format;
use crate::report::ItemStatus;
use crate::run::backend::Backend;
use crate::run::events::{Event, Reporter, RunSummary};
use crate::run::isolation::IsolationEnd;
use crate::run::record::journal::Replay;
use crate::run::record::team::{BatchId, Team};
use crate::run::supervise::descendants;
use crate::run::{RunSpec, isolation};
use crate::schedule::dispatcher;
use crate::schedule::feed::Items;
use crate::schedule::plan::{ItemSource, Plan};
use crate::sink::{RunEnd, Sink, Sinks};

/// What a run did, for the command to show ([`crate::ui`]).
pub(crate) enum Ran {
    /// `--dry-run`: the checked plan, and what an earlier run of its team recorded (read
    /// without the team's lock; `None` when there was none), for
    /// [`crate::ui::print_plan`]. Nothing was written.
    Planned {
        /// The plan, settled and checked.
        plan: Box<Plan>,
        /// The earlier run's journal, replayed.
        earlier: Option<Replay>,
    },
    /// The run, carried out to its end.
    Finished(Finished),
}

/// The end of a run, as its closing lines show it ([`crate::ui::print_summary`]).
pub(crate) struct Finished {
    /// The process exit code (DESIGN §7): [`exit_code`] of the summary, at least 1 when a
    /// sink could not leave what the user looks for.
    pub code: i32,
    /// Totals of the run.
    pub summary: RunSummary,
    /// What worktree isolation left (merged branches, branches to merge, kept worktrees);
    /// `None` without isolation.
    pub isolation: Option<IsolationEnd>,
    /// The main output table.
    pub output: PathBuf,
    /// The team workspace; `None` once it was removed.
    pub workspace: Option<PathBuf>,
    /// Where the workspace's record went when every item completed and the workspace was
    /// removed ([`crate::run::record::archive`]).
    pub archived_to: Option<PathBuf>,
    /// How the run shows its output.
    pub format: Format,
}

/// Check `plan` ([`Plan::check`]), carry it out on `backend` (built once, by the command,
/// [`crate::run::backend::for_settings`]) and return what the run did: the plan itself for a
/// dry run, else the summary and exit code (DESIGN §7) for the command to show. `reporter`
/// builds the display for the run's format ([`crate::ui::reporter`]): the last sink, so it
/// finishes after every output is written.
///
/// Errors: the plan's start-up checks (exit 2, nothing written); the workspace cannot be
/// opened or locked (exit 3), the journal or an output cannot be written, the source became
/// unreadable mid-run.
pub(crate) fn run(
    mut plan: Plan,
    backend: Arc<dyn Backend>,
    reporter: fn(Format) -> Box<dyn Sink>,
) -> Result<Ran> {
    // `--jobs 0` (as many as allowed) runs every item of the batch at once (with
    // `--best-of N`, every candidate of every item: each is a teammate).
    let items = usize::try_from(plan.selected).unwrap_or(usize::MAX).max(1);
    let items = items.saturating_mul(plan.spec.most_candidates() as usize);
    plan.spec.settings.jobs = plan.spec.settings.jobs.min(items);
    let format = plan.spec.settings.format;
    plan.add_profiles()?;
    plan.settle_sandbox();
    plan.check()?;
    if plan.spec.settings.dry_run {
        let earlier = earlier_run(&plan.spec.workspace)?;
        return Ok(Ran::Planned {
            plan: Box::new(plan),
            earlier,
        });
    }
    let swept = swept(&plan);
    let guard = plan.definition_guard();
    let Plan {
        spec,
        source,
        selected,
        mut sinks,
        output,
        archive,
        batch,
        stdin_copy,
        interrupt,
        mut queue,
        weights,
        ..
    } = plan;
    let spec = Arc::new(spec);
    // A worker of a shared run joins it before writing anything: a queue that holds
    // another batch is refused with nothing on disk changed.
    if let Some(q) = &mut queue {
        q.join(ordered(source.as_ref(), weights.as_deref())?)?;
    }
    // Everything is valid: from here on files are written.
    let mut team = open_team(&spec, &batch, source.as_ref(), selected)?;
    guard.start()?;
    for dir in &swept {
        crate::fsutil::sweep_temporaries(dir);
    }
    if let Some((spool, path)) = &stdin_copy {
        spool.copy_to(path)?;
    }
    // The display finishes last, after every output is written.
    sinks.push(reporter(format));
    sinks.follow(&team.view());
    warm_up(&spec);
    let resumed = crate::run::record::journal::count_done_before(
        team.ledger(),
        &spec.rerun,
        source.items()?,
    )?;
    // `_interrupt_ends_process` keeps an interrupt fatal until the outputs are written;
    // dropped when this returns, so a process that goes on (`runner mcp`) is not ended by a
    // later signal meant for its next run.
    let items = match queue.as_deref_mut() {
        Some(q) => Items::Feed(q.feed()),
        None => Items::Stream(ordered(source.as_ref(), weights.as_deref())?),
    };
    let (mut summary, _interrupt_ends_process) = execute(
        spec.clone(),
        &mut team,
        items,
        Some(selected),
        resumed,
        &mut sinks,
        backend.clone(),
        interrupt,
    )?;
    let isolation = finish_isolation(
        &spec,
        &mut team,
        source.as_ref(),
        &mut summary,
        &mut sinks,
        backend,
    )?;
    warn_changed(&guard.finish()?);
    // A sandbox governs writes, not modes: what a teammate made of them is undone.
    crate::fsutil::restore_private(&spec.workspace);
    // Every item completed: the workspace's record is archived before the outputs are
    // written, so they can name the archive instead of logs that go with the workspace.
    let archive = archive
        .filter(|_| exit_code(&summary) == EXIT_OK)
        .filter(|to| write_archive(&spec, &batch, to));
    let code = write_outputs(team, &mut sinks, &summary, archive.as_deref())?;
    let removed = archive
        .filter(|_| code == EXIT_OK)
        .filter(|_| remove_workspace(&spec.workspace));
    sinks.event(&Event::RunEnded {
        outputs: sinks
            .files()
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        exit_code: code,
    });
    Ok(Ran::Finished(Finished {
        code,
        summary,
        isolation,
        output,
        // A removed workspace is not named as if it were there.
        workspace: removed.is_none().then(|| spec.workspace.clone()),
        archived_to: removed,
        format,
    }))
}

/// Write `plan`'s outputs from `outcomes` recorded elsewhere (`runner collect`: the
/// verdicts of a shared queue's workers), as a run of its own that ran nothing: each is
/// recorded as this team's `item_finished`, then every sink finishes as after a run. Items
/// with no outcome count as never started (the run is incomplete).
///
/// Errors: the plan's start-up checks (exit 2), the workspace cannot be opened or locked,
/// an output cannot be written.
pub(crate) fn replay(
    plan: Plan,
    outcomes: Vec<crate::run::record::outcome::Outcome>,
    reporter: fn(Format) -> Box<dyn Sink>,
) -> Result<Ran> {
    let format = plan.spec.settings.format;
    plan.check()?;
    let Plan {
        spec,
        source,
        selected,
        mut sinks,
        output,
        batch,
        ..
    } = plan;
    let mut team = open_team(&spec, &batch, source.as_ref(), selected)?;
    sinks.push(reporter(format));
    sinks.follow(&team.view());
    let mut counts: std::collections::HashMap<ItemStatus, u64> = Default::default();
    let mut cost = None;
    let mut problems = Vec::new();
    for o in outcomes {
        *counts.entry(o.status).or_default() += 1;
        if let Some(c) = o.cost_usd {
            *cost.get_or_insert(0.0) += c;
        }
        if o.status != ItemStatus::Completed {
            problems.push(crate::run::events::Problem::of(&o));
        }
        team.record(&Event::ItemFinished(Box::new(o)))?;
    }
    let recorded: u64 = counts.values().sum();
    let never_started = selected.saturating_sub(recorded);
    *counts.entry(ItemStatus::Cancelled).or_default() += never_started;
    let summary = RunSummary {
        at: crate::run::now_rfc3339(),
        counts: ItemStatus::ALL
            .iter()
            .map(|s| (*s, counts.get(s).copied().unwrap_or(0)))
            .collect(),
        resumed: 0,
        interrupted: false,
        elapsed_s: 0.0,
        cost_usd: cost,
        problems_hidden: problems.len().saturating_sub(dispatcher::PROBLEMS_LISTED) as u64,
        problems: problems
            .into_iter()
            .take(dispatcher::PROBLEMS_LISTED)
            .collect(),
        never_started,
    };
    team.record(&Event::RunFinished(summary.clone()))?;
    team.sync()?;
    let code = write_outputs(team, &mut sinks, &summary, None)?;
    Ok(Ran::Finished(Finished {
        code,
        summary,
        isolation: None,
        output,
        workspace: Some(spec.workspace.clone()),
        archived_to: None,
        format,
    }))
}

/// A CLI whose first start makes state that teammates starting together race on starts
/// once on its own first (OpenCode's first-run database migration, issue 56): each runner
/// of the run, once.
fn warm_up(spec: &RunSpec) {
    let mut warmed: Vec<&str> = Vec::new();
    for def in std::iter::once(&spec.settings.runner)
        .chain(spec.profiles.iter().map(|p| &p.settings.runner))
    {
        if !warmed.contains(&def.name.as_str()) {
            warmed.push(&def.name);
            crate::run::warm_up::warm_up(def, spec.settings.jobs, &spec.cwd);
        }
    }
}

/// The source's items in the order they start: longest first by `weights`
/// (`--order longest-first`), else the input's.
///
/// Errors: the source cannot be read.
fn ordered(
    source: &dyn ItemSource,
    weights: Option<&std::collections::HashMap<String, f64>>,
) -> Result<dispatcher::ItemStream> {
    match weights {
        Some(w) => crate::schedule::feed::longest_first(source.items()?, w),
        None => source.items(),
    }
}

/// What an earlier run of the team completed, read without taking the team's lock (for the
/// dry run); `None` when the workspace has no journal.
///
/// Errors: the journal cannot be read.
fn earlier_run(workspace: &Path) -> Result<Option<Replay>> {
    let journal = workspace.join("journal.jsonl");
    match journal.is_file() {
        true => Ok(Some(crate::run::record::journal::replay(&journal)?)),
        false => Ok(None),
    }
}

/// The folders where an earlier run may have left temporaries half-way: the workspace and
/// the folder of every file the plan writes (sorted, once each).
fn swept(plan: &Plan) -> Vec<PathBuf> {
    let mut swept: Vec<PathBuf> = vec![plan.spec.workspace.clone()];
    swept.extend(
        plan.written()
            .iter()
            .filter_map(|f| f.path.parent().map(Path::to_owned)),
    );
    swept.sort();
    swept.dedup();
    swept
}

/// Open (and lock) the team's workspace, record that it runs `batch`, and ready its ledger
/// for the `selected` items `source` covers.
///
/// Errors: the workspace cannot be opened or locked, or belongs to another batch.
fn open_team(
    spec: &RunSpec,
    batch: &BatchId,
    source: &dyn ItemSource,
    selected: u64,
) -> Result<Team> {
    let mut team = Team::open(&spec.team, &spec.workspace)?;
    team.claim(batch)?;
    // A workspace kept away from its output names the folder it stands for, for the
    // listings that find teams by where their outputs are (DESIGN §6b).
    if spec.workspace != spec.origin {
        crate::state_dir::record_origin(&spec.workspace, &spec.origin)?;
    }
    // A replay from an output alone (a CI artifact, no journal) numbers its attempts on from
    // the attempts that output records.
    for (id, n) in source.attempts_before() {
        team.recorded
            .ledger
            .started(crate::run::record::ledger::key(&id), n);
    }
    // Every item of the batch may take an entry: room for those the ledger does not hold
    // yet, up front, so the table never moves while it grows (pages not written to cost
    // nothing).
    let known = team.ledger().len();
    team.recorded
        .ledger
        .reserve(usize::try_from(selected).unwrap_or(0).saturating_sub(known));
    Ok(team)
}

/// Warn of each batch file in `changed`: it changed while the run went on, where its
/// sandboxed teammates could write it (the next run refuses to start from it).
fn warn_changed(changed: &[PathBuf]) {
    for file in changed {
        tracing::warn!(
            "{} changed while this run was going on, where its sandboxed teammates could write it; the next run refuses to start from it until you have checked it (--accept-changes)",
            file.display()
        );
    }
}

/// With worktree isolation, merge or keep each teammate's worktree ([`isolation::finish`]);
/// with `--on-conflict`, conflicting items go to a resolver running on `backend` (the run's).
///
/// Errors: the source cannot be read again, or git fails.
fn finish_isolation(
    spec: &RunSpec,
    team: &mut Team,
    source: &dyn ItemSource,
    summary: &mut RunSummary,
    reporter: &mut dyn Reporter,
    backend: Arc<dyn Backend>,
) -> Result<Option<IsolationEnd>> {
    if spec.isolation.is_none() {
        return Ok(None);
    }
    let ids = source
        .items()?
        .map(|i| i.map(|i| i.id))
        .collect::<Result<Vec<_>>>()?;
    let mut resolver = crate::schedule::unit::resolve::AgentResolver::new(spec, source, backend)?;
    let resolver = resolver
        .as_mut()
        .map(|r| r as &mut dyn crate::run::isolation::conflict::Resolver);
    isolation::finish(spec, team, &ids, summary, reporter, resolver)
}

/// Write the workspace's record to the archive `to`; whether it was written (an archive that
/// cannot be written keeps the workspace, and the logs the outputs name, with a warning).
fn write_archive(spec: &RunSpec, batch: &BatchId, to: &Path) -> bool {
    let journal = spec.workspace.join("journal.jsonl");
    match crate::run::record::archive::write(&journal, to, &spec.team, &batch.input) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("{e}; the team workspace is kept");
            false
        }
    }
}

/// Close the team: finish every sink from its read-only outcomes, then record the outputs as
/// they were left (`ledger.bin`) under the lock still, and return the run's exit code.
///
/// Errors: the team's outcomes cannot be read, or a sink failed.
fn write_outputs(
    team: Team,
    sinks: &mut Sinks,
    summary: &RunSummary,
    archive: Option<&Path>,
) -> Result<i32> {
    let (mut outcomes, lock, closing) = team.into_index()?;
    let mut end = RunEnd {
        summary,
        outcomes: &mut outcomes,
        unrecorded: Vec::new(),
        warnings: Vec::new(),
        archive,
        unchanged: closing.unchanged(),
        stamps: Vec::new(),
    };
    sinks.finish(&mut end)?;
    // The journal is closed by now: these are shown, not recorded.
    for w in end.unrecorded.iter().chain(&end.warnings) {
        sinks.event(&Event::warning(w.clone()));
    }
    let stamps = std::mem::take(&mut end.stamps);
    let code = match end.unrecorded.is_empty() {
        true => exit_code(summary),
        // The journal in the kept workspace has what the outputs could not show.
        false => exit_code(summary).max(EXIT_INCOMPLETE),
    };
    drop(outcomes);
    // Under the lock still: the next run opens from this.
    closing.finish(&stamps);
    drop(lock);
    Ok(code)
}

/// Remove the workspace of a team whose every item completed and whose record is archived
/// (and the store's `teams/` folder with its last team); whether it is gone.
fn remove_workspace(workspace: &Path) -> bool {
    match crate::fsutil::remove_tree(workspace) {
        Ok(()) => {
            if let Some(teams) = workspace
                .parent()
                .filter(|p| p.file_name().is_some_and(|n| n == "teams"))
            {
                let _ = std::fs::remove_dir(teams);
            }
            true
        }
        Err(e) => {
            tracing::warn!("cannot remove {}: {e}", workspace.display());
            false
        }
    }
}

/// Run the dispatcher to the end on a multi-threaded runtime ([`dispatcher::run`]). With the
/// summary comes the guard of the interrupt watch that then runs until it is dropped: an
/// interrupt while the outputs are written ends the process (exit 130). `interrupt`: the
/// caller's interrupts besides the signals ([`Plan::interrupt`]).
///
/// Errors: the runtime cannot start, or the dispatcher failed (journal unwritable, source
/// unreadable).
#[allow(clippy::too_many_arguments)]
fn execute(
    spec: Arc<RunSpec>,
    team: &mut Team,
    items: Items,
    total: Option<u64>,
    resumed: u64,
    reporter: &mut dyn Reporter,
    backend: Arc<dyn Backend>,
    interrupt: Option<tokio::sync::mpsc::UnboundedReceiver<()>>,
) -> Result<(RunSummary, tokio::sync::oneshot::Sender<()>)> {
    // At least four workers, even on two cores: a worker is held while a child is spawned
    // (until it execs) and while its teammate folder is created, so with fewer workers cores
    // sit idle between agents (measured in BENCHMARKS.md).
    let workers = std::thread::available_parallelism().map_or(4, |n| n.get().max(4));
    // Processes that leave a teammate's group and lose their parent come to the runner, so
    // they can be found and ended (DESIGN §6).
    descendants::become_subreaper();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| Error::Environment(format!("cannot start the async runtime: {e}")))?;
    let summary = runtime.block_on(dispatcher::run(
        spec, team, items, total, resumed, reporter, backend, interrupt,
    ));
    // Never wait on a blocking task at shutdown: every group is ended by now. Should a unit
    // have been lost on the way, nothing it started outlives the run either.
    runtime.shutdown_background();
    descendants::end_run();
    let summary = summary?;
    // The dispatcher's signal handlers stay installed; while the outputs are written, an
    // interrupt must still end the process (every file is replaced atomically, so stopping
    // here leaves old or new files, never half-written ones). The watch ends when the
    // returned sender is dropped.
    let (guard, mut done) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut int), Ok(mut term), Ok(mut hup), Ok(mut tstp)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
                signal(SignalKind::from_raw(
                    nix::sys::signal::Signal::SIGTSTP as i32,
                )),
            ) else {
                return;
            };
            loop {
                tokio::select! {
                    _ = &mut done => return,
                    _ = int.recv() => break,
                    _ = term.recv() => break,
                    _ = hup.recv() => break,
                    // Ctrl-Z still stops the runner (no teammate runs any more).
                    _ = tstp.recv() => {
                        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
                    }
                }
            }
            // A merged tree's check the queue runs now is in a process group of its own.
            crate::run::isolation::queue::end_running_check();
            // And a conflict's resolver (`--on-conflict`) working now, with all it started.
            descendants::signal_run(nix::sys::signal::Signal::SIGKILL);
            eprintln!(
                "runner: interrupted while merging or writing the outputs (the same command \
                 resumes)"
            );
            std::process::exit(EXIT_INTERRUPTED);
        });
    });
    Ok((summary, guard))
}

/// The exit code of a finished run (DESIGN §7): 130 interrupted, 0 every item completed,
/// else 1.
pub(crate) fn exit_code(s: &RunSummary) -> i32 {
    if s.interrupted {
        EXIT_INTERRUPTED
    } else if s.count(ItemStatus::Completed) == s.total() {
        EXIT_OK
    } else {
        EXIT_INCOMPLETE
    }
}
