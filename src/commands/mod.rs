//! One module per subcommand: each turns validated configuration into a run and an exit
//! code. The steps are in `config`, `source`, `run` and `sink`; these only sequence them.

pub mod batch;
pub mod clean;
pub mod common;
pub mod merge;
pub mod resolve;
pub mod runners;
pub mod status;
pub mod todo;
pub mod todo_run;
