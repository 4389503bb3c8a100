//! End to end against the REAL agent CLIs, offline: each built-in runner definition runs its
//! pinned CLI (installed by `.ci/run` under `target/e2e-<name>/`) against a scripted stand-in
//! for that CLI's model API on 127.0.0.1. No real model is ever called. A CLI that is not
//! installed makes its tests print a `skipped: ...` notice and pass (fail, with
//! `RUNNER_TEST_REQUIRE_ALL` set: see `tests/common/skip.rs`).

#[path = "../common/skip.rs"]
mod skip;
mod support;

mod aider;
mod best_of;
mod cases;
mod chat_api;
mod claude;
mod cline;
mod codex;
mod codex_lead;
mod conflict;
mod copilot;
mod gemini;
mod gemini_lead;
mod mcp;
mod mcp_python;
mod opencode;
mod pi;
mod qwen;
mod table;
