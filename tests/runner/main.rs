//! Integration tests: the real `runner` binary in temp folders against fake agents
//! (`tests/agents/`). One test binary, a small harness (ripgrep/just style).

mod harness;
#[path = "../common/skip.rs"]
mod skip;

mod anthropic;
mod anthropic_batch;
mod bad_input;
mod bad_input_cases;
mod bad_input_flags;
mod bad_input_notify;
mod batch;
mod batch_api;
mod best_of;
mod best_of_fanout;
mod best_of_judge_stage;
mod best_of_messages;
mod ci;
mod clis;
mod context;
mod default_layout;
mod everyday;
mod faults;
mod files;
mod fragments;
mod gemini_api;
mod http;
mod inputs;
mod jsonl;
mod keep;
mod keep_compaction;
mod mcp;
mod mcp_lead;
mod merge_queue;
mod notify;
mod order;
mod process_faults;
mod progress;
mod queue;
mod raw_columns;
mod regressions;
mod sandbox;
mod sandbox_escapes;
mod sandbox_verify;
mod serve;
mod setup;
mod skill;
mod stages;
mod store;
mod terminal;
mod todo;
mod trial_r7;
mod verdicts;
mod watch;
mod worktree;
