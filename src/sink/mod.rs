//! Sinks: what a run leaves for the user. They read outcomes; they never schedule.

pub mod output_csv;
pub mod todo_marks;
