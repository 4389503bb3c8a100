//! teammate-runner: resolve a batch of work items in parallel, one agent CLI teammate per
//! item, and record only verified success. See docs/DESIGN.md §1 for the architecture:
//! source → items → plan → dispatcher → units → events → sinks.

pub mod agent;
pub mod cli;
pub mod commands;
pub mod error;
pub mod failure;
pub mod fault;
pub mod fragment;
pub mod fsutil;
pub mod git;
pub mod hash;
pub mod item;
pub mod mcp;
pub mod options;
pub mod progress;
pub mod prompt;
pub mod redact;
pub mod report;
pub mod run;
pub mod sandbox;
pub mod settings;
pub mod sink;
pub mod source;
pub mod store;
pub mod suggest;
pub mod ui;
pub mod working_context;
