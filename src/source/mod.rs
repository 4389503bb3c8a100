//! Sources of work items: a CSV batch (`workers-input.csv` + `BATCH.md`) or a todo batch
//! (`todo-N.md`). Sources read and validate text; they never spawn processes.

pub mod batch_spec;
pub mod csv_input;
pub mod todo;
