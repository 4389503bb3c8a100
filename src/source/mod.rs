//! Sources of work items: the formats a batch is written in and the value types they yield. A
//! CSV batch (`workers-input.csv` + `BATCH.md`, [`input`], [`csv_input`], [`jsonl_input`],
//! [`batch_spec`], [`stages`]) or a todo batch (`todo-N.md`, [`todo`]); the files and images an
//! item's text may carry are [`crate::inline`]. Sources read and validate text;
//! they never spawn processes. A CSV batch's row formats are [`input::InputFormat`]s, one per
//! file, registered in one line each (ARCHITECTURE.md, "How to add a row format"). The
//! adapters that turn a batch into a run plan live in [`crate::plans`].

pub(crate) mod batch_spec;
pub(crate) mod csv_input;
pub(crate) mod input;
pub(crate) mod jsonl_input;
pub(crate) mod stages;
pub(crate) mod todo;
