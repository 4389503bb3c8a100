//! Runner definitions (DESIGN §5): how to start one agent CLI for one attempt, and how to
//! read what it printed.
//!
//! A definition is a TOML file, `runners/<name>.toml`, compiled into the binary and
//! overridable from `<store>/runners/` or `--runner-file`. This module builds the argv, env
//! and stdin of an attempt and parses the CLI's stdout; it never decides success (that is
//! the `report` module's success rule).

pub(crate) mod definition;
pub(crate) mod key_lines;
pub(crate) mod output;

pub(crate) use definition::{OutputFormat, PromptMode, RunnerDef};
pub(crate) use output::AgentResult;
