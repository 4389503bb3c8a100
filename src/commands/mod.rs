//! One module per subcommand: each parses its arguments and sequences the steps, which live
//! in `settings`, `source`, `run` and `sink` (a run is always `source → Plan →
//! run::pipeline::run`).

pub(crate) mod batch;
pub(crate) mod clean;
pub(crate) mod collect;
pub(crate) mod docs;
pub(crate) mod fragments;
pub(crate) mod merge;
pub(crate) mod pick;
pub(crate) mod report;
pub(crate) mod reset;
pub(crate) mod resolve;
pub(crate) mod review;
pub(crate) mod runner_check;
pub(crate) mod runners;
pub(crate) mod serve;
pub(crate) mod show;
mod show_diff;
pub(crate) mod skill;
pub(crate) mod status;
pub(crate) mod todo;
pub(crate) mod todo_run;
