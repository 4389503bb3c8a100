//! Sources of work items: a CSV batch (`workers-input.csv` + `BATCH.md`) or a todo batch
//! (`todo-N.md`). Sources read and validate text; they never spawn processes. Each source
//! adapter (`csv_batch`, `todo_batch`) turns its input into one [`crate::run::schedule::plan::Plan`]:
//! the items, the output layout and the sinks that finish the run.
//!
//! How to add a source:
//! 1. Parse its files in a pure module (`src/source/<format>.rs`: text in, values out).
//! 2. Write the adapter `src/source/<name>_batch.rs`: an [`crate::run::schedule::plan::ItemSource`]
//!    that yields its items as `WorkItem`s, and a `plan(…) -> Result<Plan>` that validates
//!    everything, registers its sinks and sets only what differs from `RunSpec::new` and
//!    `Plan::new`.
//! 3. Register it: `pub mod …;` below, and a command in `src/commands/` that calls
//!    `commands::batch::carry_out(plan, backend)`.

pub(crate) mod batch_spec;
pub(crate) mod csv_batch;
pub(crate) mod csv_input;
pub(crate) mod inline;
pub(crate) mod input;
pub(crate) mod jsonl_input;
pub(crate) mod stages;
pub(crate) mod todo;
pub(crate) mod todo_batch;
