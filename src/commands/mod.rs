//! One module per subcommand: each parses its arguments and sequences the steps, which live
//! in `settings`, `source`, `run` and `sink` (a run is always `source → Plan →
//! run::pipeline::run`).

pub mod batch;
pub mod clean;
pub mod docs;
pub mod fragments;
pub mod mcp;
pub mod merge;
pub mod report;
pub mod reset;
pub mod resolve;
pub mod runner_check;
pub mod runners;
pub mod show;
pub mod skill;
pub mod status;
pub mod todo;
pub mod todo_run;
