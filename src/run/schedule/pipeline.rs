//! The one pipeline every run goes through (DESIGN §1): a [`Plan`] in, an exit code out.
//! Dry run, or open the team → execute → finish isolation → sinks → summary → exit code.
//! The commands only build plans; nothing else sequences these steps.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK, Error, Result};
use crate::report::ItemStatus;
use crate::run::backend::Backend;
use crate::run::events::{Event, Reporter, RunSummary};
use crate::run::record::team::Team;
use crate::run::schedule::dispatcher::{self, ItemStream};
use crate::run::schedule::plan::Plan;
use crate::run::supervise::descendants;
use crate::run::{RunSpec, isolation};
use crate::sink::RunEnd;
use crate::sink::junit::Junit;
use crate::sink::trace::Trace;

/// Check `plan` ([`Plan::check`]), carry it out on `backend` (built once, by the command,
/// [`crate::run::backend::for_settings`]) and return the process exit code (DESIGN §7).
///
/// Errors: the plan's start-up checks (exit 2, nothing written); the workspace cannot be opened or locked (exit 3), the journal or an output cannot
/// be written, the source became unreadable mid-run.
pub fn run(mut plan: Plan, backend: Arc<dyn Backend>) -> Result<i32> {
    // `--jobs 0` (as many as allowed) runs every item of the batch at once.
    let items = usize::try_from(plan.selected).unwrap_or(usize::MAX).max(1);
    plan.spec.settings.jobs = plan.spec.settings.jobs.min(items);
    let format = plan.spec.settings.format;
    plan.settle_sandbox();
    plan.check()?;
    if plan.spec.settings.dry_run {
        // What an earlier run completed, read without taking the team's lock.
        let journal = plan.spec.workspace.join("journal.jsonl");
        let earlier = if journal.is_file() {
            Some(crate::run::record::journal::replay(&journal)?)
        } else {
            None
        };
        crate::ui::print_plan(&plan, earlier.as_ref(), backend.as_ref())?;
        return Ok(EXIT_OK);
    }
    // Temporaries an earlier run left half-way beside what this run writes.
    let mut swept: Vec<PathBuf> = vec![plan.spec.workspace.clone()];
    swept.extend(
        plan.written()
            .iter()
            .filter_map(|f| f.path.parent().map(Path::to_owned)),
    );
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
        ..
    } = plan;
    let spec = Arc::new(spec);
    // Everything is valid: from here on files are written.
    let mut team = Team::open(&spec.team, &spec.workspace)?;
    team.claim(&batch)?;
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
    guard.start()?;
    swept.sort();
    swept.dedup();
    for dir in &swept {
        crate::fsutil::sweep_temporaries(dir);
    }
    if let Some((spool, path)) = &stdin_copy {
        spool.copy_to(path)?;
    }
    // Sinks every run may have, after the source's own; the UI finishes last, so the
    // closing summary follows every output written.
    if let Some(path) = spec.settings.junit.clone() {
        sinks.push(Box::new(Junit {
            path,
            team: format!("{} ({})", spec.team, batch_label(&batch.input)),
            items: source.clone(),
            retried: Default::default(),
        }));
    }
    if let Some(path) = spec.settings.trace.clone() {
        sinks.push(Box::new(Trace::new(path, spec.team.clone())));
    }
    sinks.push(crate::ui::reporter(format));
    sinks.follow(&team.view());
    let resumed = crate::run::record::journal::count_done_before(
        team.ledger(),
        &spec.rerun,
        source.items()?,
    )?;
    let mut summary = execute(
        spec.clone(),
        &mut team,
        source.items()?,
        Some(selected),
        resumed,
        &mut sinks,
        backend,
    )?;
    if spec.isolation.is_some() {
        let ids = source
            .items()?
            .map(|i| i.map(|i| i.id))
            .collect::<Result<Vec<_>>>()?;
        if let Some(end) = isolation::finish(&spec, &mut team, &ids, &mut summary)? {
            crate::ui::print_isolation(&end, format);
        }
    }
    for file in guard.finish()? {
        eprintln!(
            "warning: {} changed while this run was going on, where its sandboxed teammates could write it; the next run refuses to start from it until you have checked it (--accept-changes)",
            file.display()
        );
    }
    // A sandbox governs writes, not modes: what a teammate made of them is undone.
    crate::fsutil::restore_private(&spec.workspace);
    let (mut outcomes, lock, closing) = team.into_index()?;
    // Every item completed: the workspace's record is archived before the outputs are
    // written, so they can name the archive instead of logs that go with the workspace.
    // An archive that cannot be written keeps the workspace (and the logs the outputs name).
    let journal = spec.workspace.join("journal.jsonl");
    let archive = archive
        .filter(|_| exit_code(&summary) == EXIT_OK)
        .filter(|to| {
            match crate::run::record::archive::write(&journal, to, &spec.team, &batch.input) {
                Ok(()) => true,
                Err(e) => {
                    eprintln!("warning: {e}; the team workspace is kept");
                    false
                }
            }
        });
    let mut end = RunEnd {
        summary: &summary,
        outcomes: &mut outcomes,
        unrecorded: Vec::new(),
        archive: archive.as_deref(),
        unchanged: closing.unchanged(),
        stamps: Vec::new(),
    };
    sinks.finish(&mut end)?;
    let stamps = std::mem::take(&mut end.stamps);
    let code = match end.unrecorded.is_empty() {
        true => exit_code(&summary),
        // The journal in the kept workspace has what the outputs could not show.
        false => exit_code(&summary).max(EXIT_INCOMPLETE),
    };
    drop(outcomes);
    // Under the lock still: the next run opens from this.
    closing.finish(&stamps);
    drop(lock);
    let removed = archive.as_ref().filter(|_| code == EXIT_OK).filter(|_| {
        match crate::fsutil::remove_tree(&spec.workspace) {
            Ok(()) => {
                // The store's `teams/` folder goes with its last team.
                if let Some(teams) = spec
                    .workspace
                    .parent()
                    .filter(|p| p.file_name().is_some_and(|n| n == "teams"))
                {
                    let _ = std::fs::remove_dir(teams);
                }
                true
            }
            Err(e) => {
                tracing::warn!("cannot remove {}: {e}", spec.workspace.display());
                false
            }
        }
    });
    // A removed workspace is not named as if it were there.
    let workspace = removed.is_none().then_some(spec.workspace.as_path());
    crate::ui::print_summary(&summary, Some(&output), workspace, format);
    if let Some(to) = removed {
        crate::ui::say(
            format,
            format!(
                "Every item completed; the team workspace was removed (keep it with --keep-team); its record is in {}.",
                to.display()
            ),
        );
    }
    sinks.event(&Event::RunEnded {
        outputs: sinks
            .files()
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        exit_code: code,
    });
    Ok(code)
}

/// Run the dispatcher to the end on a multi-threaded runtime ([`dispatcher::run`]).
///
/// Errors: the runtime cannot start, or the dispatcher failed (journal unwritable, source
/// unreadable).
fn execute(
    spec: Arc<RunSpec>,
    team: &mut Team,
    items: ItemStream,
    total: Option<u64>,
    resumed: u64,
    reporter: &mut dyn Reporter,
    backend: Arc<dyn Backend>,
) -> Result<RunSummary> {
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
        spec, team, items, total, resumed, reporter, backend,
    ));
    // Never wait on a blocking task at shutdown: every group is ended by now. Should a unit
    // have been lost on the way, nothing it started outlives the run either.
    runtime.shutdown_background();
    descendants::end_run();
    let summary = summary?;
    // The dispatcher's signal handlers stay installed; while the outputs are written, an
    // interrupt must still end the process (every file is replaced atomically, so stopping
    // here leaves old or new files, never half-written ones).
    std::thread::spawn(|| {
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
                    _ = int.recv() => break,
                    _ = term.recv() => break,
                    _ = hup.recv() => break,
                    // Ctrl-Z still stops the runner (no teammate runs any more).
                    _ = tstp.recv() => {
                        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
                    }
                }
            }
            eprintln!("runner: interrupted while writing the outputs");
            std::process::exit(EXIT_INTERRUPTED);
        });
    });
    Ok(summary)
}

/// The exit code of a finished run (DESIGN §7): 130 interrupted, 0 every item completed,
/// else 1.
pub fn exit_code(s: &RunSummary) -> i32 {
    if s.interrupted {
        EXIT_INTERRUPTED
    } else if s.count(ItemStatus::Completed) == s.total() {
        EXIT_OK
    } else {
        EXIT_INCOMPLETE
    }
}

/// The batch's input as a JUnit suite shows it: relative to the current folder when inside
/// it.
fn batch_label(input: &str) -> String {
    let here = std::env::current_dir().unwrap_or_default();
    Path::new(input)
        .strip_prefix(&here)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| input.to_owned())
}
