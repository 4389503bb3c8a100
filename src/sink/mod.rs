//! Sinks: what a run leaves for the user (DESIGN §1). Each sink is a peer behind one fan-out:
//! it declares the files it writes when it is built, sees every event while the run goes on,
//! and after the run it writes its files from the read-only [`OutcomeIndex`] — never through
//! the lock-holding team, never reaching back into the scheduler.
//!
//! How to add a sink:
//! 1. Write `src/sink/<name>.rs` with a struct holding what it needs (paths, layout, values
//!    the plan hands it) and `impl Reporter` (live events; the default ignores them) and
//!    `impl Sink`: `writes` (required) declares each file it writes as a [`PlanFile`] (with
//!    [`PlanFile::replacing`] when a flag chooses it), `finish` writes them from
//!    `run.outcomes`; `follow` hands a sink that keeps its file current while the run goes
//!    on a read-only view of what the run records.
//! 2. Register it: `pub mod <name>;` below, and one `sinks.push(Box::new(…))` where the
//!    source adapter builds its plan (`plans/csv_batch.rs` or `plans/todo_batch.rs`), or in
//!    `Plan::new` (`schedule/plan.rs`) for a sink every run may have (`--junit`,
//!    `--trace`, `--notify`, the terminal's progress).
//!
//! Nothing else: the plan's written files are the sinks' declarations, so `Plan::check`
//! refuses a declared file over an input, over another written file, inside a guarded
//! folder, or over an existing file of another kind; the `run_ended` event names them.
//!
//! The output of a CSV batch ([`output`]) writes any row format: an
//! [`output::OutputFormat`] per file ([`output_csv`], [`output_jsonl`]), registered in one line
//! (ARCHITECTURE.md, "How to add a row format").
//!
//! Beside the sinks: [`selection`] (which rows a run covers, against the [`previous`]
//! output) and [`before_removal`] (a workspace's outputs pointed at its archive before
//! `runner clean` removes it). Sinks sit above the run's events and record and below the
//! [`crate::schedule`] that holds them.

pub(crate) mod before_removal;
pub(crate) mod checkpoints;
pub(crate) mod decided;
pub(crate) mod junit;
pub(crate) mod live;
pub(crate) mod notify;
pub(crate) mod notify_send;
pub(crate) mod output;
pub(crate) mod output_csv;
pub(crate) mod output_history;
pub(crate) mod output_jsonl;
pub(crate) mod output_stages;
pub(crate) mod plan_file;
pub(crate) mod previous;
pub(crate) mod proposals;
pub(crate) mod selection;
pub(crate) mod shard_meta;
pub(crate) mod terminal_progress;
pub(crate) mod todo_marks;
pub(crate) mod todo_table;
pub(crate) mod trace;

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::run::events::{Event, Reporter, RunSummary};
use crate::run::record::ledger_file::OutputStamp;
use crate::run::record::team::{OutcomeIndex, OutcomesView};

pub(crate) use plan_file::PlanFile;

/// What a finished run hands its sinks.
pub(crate) struct RunEnd<'a> {
    /// Totals of the run, as the summary shows them.
    pub summary: &'a RunSummary,
    /// The recorded outcomes by item id.
    pub outcomes: &'a mut OutcomeIndex,
    /// What a sink could not leave where the user looks for it (one sentence each, already
    /// warned about; e.g. the batch file vanished, so no item is ticked). The journal keeps
    /// the outcomes: the run ends with exit 1 and its workspace is kept.
    pub unrecorded: Vec<String>,
    /// What a sink warns of while finishing that loses nothing (an item no longer in the
    /// batch file, an output changed under the run), one sentence each. The pipeline shows
    /// these and `unrecorded` as [`Event::Warning`]s once every sink finished.
    pub warnings: Vec<String>,
    /// The archive the workspace's record was written to, when every item completed and the
    /// workspace goes: outputs name it instead of the logs that go with the workspace.
    pub archive: Option<&'a Path>,
    /// The outputs as the last run left them, when this run recorded no new outcome
    /// ([`crate::run::record::team::Closing::unchanged`]): a sink whose file is still
    /// exactly so need not write it again.
    pub unchanged: Option<&'a [OutputStamp]>,
    /// The outputs as this run leaves them, for the next run's `unchanged` (sinks that
    /// keep none leave this alone).
    pub stamps: Vec<OutputStamp>,
}

/// A consumer of a run: the files it writes (declared before the plan is checked), live
/// events (from [`Reporter`]), then one `finish` after the run and its isolation step, in
/// registration order.
pub(crate) trait Sink: Reporter {
    /// Every file (or folder) this sink writes, as it was built: the plan's start-up checks
    /// refuse each one over a file the run reads, over another file it writes, inside a
    /// guarded folder, and — with [`PlanFile::replacing`] — over an existing file of another
    /// kind; the `run_ended` event names those not edited in place. Required, so that no
    /// sink writes a file the checks never saw: one that writes none (the terminal display)
    /// says so with an empty list.
    fn writes(&self) -> Vec<PlanFile>;

    /// The run has started recording: `outcomes` is what it records, for a sink that keeps
    /// its file current while the run goes on (read-only; the team itself stays out of
    /// reach).
    fn follow(&mut self, _outcomes: &OutcomesView) {}

    /// Write what this sink leaves, from the recorded outcomes.
    ///
    /// Errors: its file cannot be written, or the journal cannot be read; the run's exit
    /// code then comes from the error.
    fn finish(&mut self, _run: &mut RunEnd<'_>) -> Result<()> {
        Ok(())
    }
}

/// The fan-out: every event to every sink in order, then every `finish` in order.
#[derive(Default)]
pub(crate) struct Sinks(Vec<Box<dyn Sink>>);

impl Sinks {
    /// Hand every sink what the run records ([`Sink::follow`]).
    pub(crate) fn follow(&mut self, outcomes: &OutcomesView) {
        for s in &mut self.0 {
            s.follow(outcomes);
        }
    }

    /// Add a sink after the ones already registered.
    pub(crate) fn push(&mut self, sink: Box<dyn Sink>) {
        self.0.push(sink);
    }

    /// Every file the sinks declare ([`Sink::writes`]), in registration order; a folder two
    /// sinks both edit in place (the todo store) is named once.
    pub(crate) fn writes(&self) -> Vec<PlanFile> {
        let mut all: Vec<PlanFile> = Vec::new();
        for f in self.0.iter().flat_map(|s| s.writes()) {
            let again =
                |a: &PlanFile| a.in_place && f.in_place && a.what == f.what && a.path == f.path;
            if !all.iter().any(again) {
                all.push(f);
            }
        }
        all
    }

    /// The output files the sinks write (those not edited in place), in registration order,
    /// as absolute paths (a path as typed, `--junit j.xml`, is taken from the current
    /// folder, which a reader of the `run_ended` event may not know).
    pub(crate) fn files(&self) -> Vec<PathBuf> {
        self.writes()
            .into_iter()
            .filter(|f| !f.in_place)
            .map(|f| crate::fsutil::absolute(&f.path))
            .collect()
    }

    /// Finish every sink in order; the first error stops the rest.
    ///
    /// Errors: the first sink that failed.
    pub(crate) fn finish(&mut self, run: &mut RunEnd<'_>) -> Result<()> {
        for sink in &mut self.0 {
            sink.finish(run)?;
        }
        Ok(())
    }
}

impl Reporter for Sinks {
    fn event(&mut self, event: &Event) {
        for sink in &mut self.0 {
            sink.event(event);
        }
    }
}
