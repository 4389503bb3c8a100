//! The one error type of the runner and its exit codes (DESIGN §7).
//!
//! Every failure that stops a command maps to exactly one exit code:
//! `2` bad input or usage (nothing was changed), `3` the environment (a program is missing,
//! a lock is held, a store is not writable). Outcomes of a run that did execute
//! (`0`, `1`, `130`) are decided by the run summary, not by this type.

use std::path::Path;

/// Exit code: every item completed.
pub const EXIT_OK: i32 = 0;
/// Exit code: at least one item did not complete.
pub const EXIT_INCOMPLETE: i32 = 1;
/// Exit code: bad input or usage; nothing on disk was changed.
pub const EXIT_INPUT: i32 = 2;
/// Exit code: environment problem (runner program missing, lock held, store not writable).
pub const EXIT_ENVIRONMENT: i32 = 3;
/// Exit code: the run was interrupted (Ctrl-C / SIGTERM).
pub const EXIT_INTERRUPTED: i32 = 130;

/// A failure that ends a command before or outside a run's per-item outcomes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input or usage: a file that does not parse, a flag that makes no sense.
    /// The message names the file, the line when known, and what to do. Exit code 2.
    #[error("{0}")]
    Input(String),
    /// The environment is not fit to run: missing program, held lock, unwritable store.
    /// Exit code 3.
    #[error("{0}")]
    Environment(String),
}

impl Error {
    /// The process exit code for this error (DESIGN §7).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input(_) => EXIT_INPUT,
            Error::Environment(_) => EXIT_ENVIRONMENT,
        }
    }

    /// An input error about `path` (and `line`, 1-based, when known).
    pub fn input_at(path: &Path, line: Option<u64>, message: impl std::fmt::Display) -> Error {
        match line {
            Some(line) => Error::Input(format!("{}:{line}: {message}", path.display())),
            None => Error::Input(format!("{}: {message}", path.display())),
        }
    }

    /// An environment error for a failed IO operation on `path`.
    pub fn io(action: &str, path: &Path, err: std::io::Error) -> Error {
        Error::Environment(format!("cannot {action} {}: {err}", path.display()))
    }
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
