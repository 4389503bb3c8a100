//! teammate-runner: resolve a batch of work items in parallel, one agent CLI teammate per
//! item, and record only verified success. See docs/DESIGN.md §1 for the architecture:
//! source → items → plan → dispatcher → units → events → sinks.

mod agent;
mod cli;
mod commands;
mod entry;
mod error;
mod failure;
mod fault;
mod fragment;
mod fsutil;
mod git;
/// FNV-1a, public for the integration tests, which compute ids as the runner does.
pub mod hash;
mod holder;
mod inline;
mod item;
mod json_text;
mod mcp;
mod options;
mod plans;
mod progress;
mod prompt;
mod queue;
mod redact;
mod report;
mod run;
mod sandbox;
mod schedule;
mod serve;
mod settings;
mod shown;
mod sink;
mod source;
mod state_dir;
mod store;
mod suggest;
mod ui;
mod working_context;

/// Run `runner` with this process's arguments and return its exit code (0 every item
/// completed, 1 some did not, 2 bad input, 3 environment, 130 interrupted: DESIGN §7). The
/// binary's `main` is this and `std::process::exit`.
pub fn run_from_args() -> i32 {
    entry::run()
}

/// Run `runner-keeper`, the sandbox's keeper server (started by the runner with its control
/// socket on stdin, DESIGN §10); never returns. The binary's `main` is this.
pub fn keeper_main() -> ! {
    sandbox::keeper::main(std::env::args_os().skip(1))
}
