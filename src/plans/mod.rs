//! Source adapters: each turns one kind of batch into one [`crate::schedule::plan::Plan`]
//! (the items, the output layout and the sinks that finish the run). A CSV batch
//! (`workers-input.csv` + `BATCH.md`) is [`csv_batch`]; a todo batch (`todo-N.md`) is
//! [`todo_batch`]. They sit above the run and the sinks, which they wire together, and below
//! the commands that call them; the formats they read are parsed in [`crate::source`].
//!
//! How to add a source:
//! 1. Parse its files in a pure module (`src/source/<format>.rs`: text in, values out).
//! 2. Write the adapter `src/plans/<name>_batch.rs`: an [`crate::schedule::plan::ItemSource`]
//!    that yields its items as `WorkItem`s, and a `plan(…) -> Result<Plan>` that validates
//!    everything, registers its sinks and sets only what differs from `RunSpec::new` and
//!    `Plan::new`.
//! 3. Register it: `pub(crate) mod …;` below, and a command in `src/commands/` that calls
//!    `commands::batch::carry_out(plan, backend)`.

pub(crate) mod choices;
pub(crate) mod csv_batch;
pub(crate) mod judge_stage;
pub(crate) mod order;
pub(crate) mod overlap;
pub(crate) mod todo_batch;

/// Why `--batch-api` is refused with BATCH.md's `runner_column` or `model_column`, and what
/// to do instead (exit 2).
pub(crate) fn batch_api_refused() -> crate::error::Error {
    crate::error::Error::Conflict {
        flag: "--batch-api".into(),
        other: "`runner_column` or `model_column`".into(),
        why: "one batch job sends its rows with one runner and model; run the rows' own choices \
              without --batch-api"
            .into(),
    }
}
