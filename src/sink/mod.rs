//! Sinks: what a run leaves for the user. They read outcomes; they never schedule.

pub mod junit;
pub mod output_csv;
pub mod previous;
pub mod shard_meta;
pub mod todo_marks;
