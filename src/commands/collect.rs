//! `runner collect --queue URL BATCH.md -o OUT [--junit F]`: the whole output of a run
//! shared through a work queue (DESIGN §9b), written from the verdicts its workers recorded
//! there — the same columns and row order as a run on one machine, and no shared disk.
//! The batch is planned as `runner batch` plans it (the same files, so the same
//! fingerprint), nothing runs, and the outputs are written as after a run.

use crate::cli::BatchArgs;
use crate::error::{Error, Result};
use crate::schedule::pipeline::{self, Ran};

/// `runner collect`: returns 0 when every item has a completed verdict, else 1.
///
/// Errors: no `--queue` (exit 2); the batch's plan (exit 2); the queue holds no run of this
/// batch, or a verdict that is not one of its items' (exit 2); the server cannot be reached
/// (exit 3).
pub(crate) fn collect(mut args: BatchArgs) -> Result<i32> {
    let ca = args.run.queue_ca.clone();
    let flag = args.run.queue.take().map(|q| q.with_ca(ca));
    // Nothing runs: no agent program needs to be installed where the output is collected.
    if args.command.is_empty() && args.run.runner.is_none() {
        args.command = vec!["true".into()];
    }
    let (mut plan, _) = super::batch::plan(args)?;
    // `--queue`, else BATCH.md's `queue:` (which made the plan a worker: it is not one here).
    let Some(url) = flag.or_else(|| plan.spec.settings.queue.clone()) else {
        return Err(Error::needs(
            "runner collect",
            "--queue URL (or `queue:` in BATCH.md)",
            "name the work queue the workers ran on",
        ));
    };
    plan.queue = None;
    let ids = plan
        .source
        .items()?
        .map(|i| i.map(|i| i.id))
        .collect::<Result<Vec<_>>>()?;
    let input = std::path::Path::new(&plan.batch.input)
        .file_name()
        .map_or_else(
            || plan.batch.input.clone(),
            |n| n.to_string_lossy().into_owned(),
        );
    let outcomes = crate::queue::view::verdicts(&url, &input, &plan.batch.fingerprint, &ids)?;
    let Ran::Finished(finished) = pipeline::replay(plan, outcomes, crate::ui::reporter)? else {
        return Ok(crate::error::EXIT_OK);
    };
    crate::ui::print_summary(
        &finished.summary,
        Some(&finished.output),
        finished.workspace.as_deref(),
        finished.format,
    );
    Ok(finished.code)
}
