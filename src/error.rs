//! The one error type of the runner and its exit codes (DESIGN §7).
//!
//! Every failure that stops a command is one [`Error`] variant carrying its data, and
//! [`Error::exit_code`] is the only place that maps a variant to an exit code:
//! `2` bad input or usage (nothing was changed), `3` the environment (a program is missing,
//! a lock is held, a store or workspace is not writable). Outcomes of a run that did execute
//! (`0`, `1`, `130`) are decided by the run summary, not by this type.

use std::path::{Path, PathBuf};

/// Exit code: every item completed.
pub(crate) const EXIT_OK: i32 = 0;
/// Exit code: at least one item did not complete.
pub(crate) const EXIT_INCOMPLETE: i32 = 1;
/// Exit code: bad input or usage; nothing on disk was changed.
pub(crate) const EXIT_INPUT: i32 = 2;
/// Exit code: environment problem (runner program missing, lock held, store not writable).
pub(crate) const EXIT_ENVIRONMENT: i32 = 3;
/// Exit code: the run was interrupted (Ctrl-C / SIGTERM).
pub(crate) const EXIT_INTERRUPTED: i32 = 130;

/// A failure that ends a command before or outside a run's per-item outcomes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// Bad usage that fits none of the classes below. The message says what to do. Exit 2.
    #[error("{0}")]
    Usage(String),
    /// A flag, setting or environment variable got a value of the wrong form. Exit 2.
    /// Shown as `{flag} `{value}` {expected}`, e.g. ``--sandbox `jail` must be none or landlock``.
    #[error("{flag} `{value}` {expected}")]
    BadValue {
        /// The flag, BATCH.md key or variable (`--jobs`, `RUNNER_SHARD_COUNT`).
        flag: String,
        /// The value as given.
        value: String,
        /// What it must be, as a predicate with an example (`must be K/N, e.g. 2/4`).
        expected: String,
    },
    /// A flag (or a command) that needs another flag, a confirmation or a state of the
    /// repository it does not have. Exit 2. Shown as `{flag} needs {needs}: {why}`.
    #[error("{flag} needs {needs}: {why}")]
    Needs {
        /// The flag or command (`--merge`, `runner resolve`).
        flag: String,
        /// What it needs (`--isolate worktree`, `confirmation`).
        needs: String,
        /// Why, and what to do.
        why: String,
    },
    /// Two flags or settings that do not go together. Exit 2.
    /// Shown as `{flag} does not go with {other}: {why}`.
    #[error("{flag} does not go with {other}: {why}")]
    Conflict {
        /// The first flag (`--global`).
        flag: String,
        /// The flag or setting it clashes with (`--project`).
        other: String,
        /// Why, and which to drop.
        why: String,
    },
    /// A name that names nothing: a runner, a runner variable, an item, a team. Exit 2.
    /// Shown as ``unknown {what} `{name}`{suggestion}; {hint}``.
    #[error("unknown {what} `{name}`{suggestion}; {hint}")]
    Unknown {
        /// What kind of name (`runner`, `item`, `team`).
        what: String,
        /// The name as given.
        name: String,
        /// `; did you mean `x`?` for a close match ([`crate::suggest::did_you_mean`]), or empty.
        suggestion: String,
        /// Which names there are, or where to look.
        hint: String,
    },
    /// A file or folder the user named is not there (or is not a file). Exit 2.
    /// Shown as `{path}: no such {what}; {hint}`.
    #[error("{}: no such {what}; {hint}", path.display())]
    MissingFile {
        /// The path as the runner resolved it.
        path: PathBuf,
        /// What it should have been (`batch file`, `checkpoint`, `folder`).
        what: String,
        /// What to do.
        hint: String,
    },
    /// An output the run would write is refused before anything is written: it would
    /// overwrite an input or another kind of file, land among the runner's own files, or
    /// replace another batch's results. Exit 2. Shown as `{path}: {problem}`.
    /// `{flag} {path}: {problem}` when a flag named it.
    #[error("{}{}: {problem}", flag.as_ref().map(|f| format!("{f} ")).unwrap_or_default(), path.display())]
    OutputRefused {
        /// The flag that named the output (`--junit`, `-o`), when one did.
        flag: Option<String>,
        /// The output file or folder.
        path: PathBuf,
        /// What it would break and what to choose instead.
        problem: String,
    },
    /// A file the user gave is wrong: it does not parse, breaks a rule, or names something
    /// that is not there. Exit 2.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Input {
        /// The file.
        path: PathBuf,
        /// 1-based line, when known.
        line: Option<u64>,
        /// What is wrong and what to do.
        message: String,
    },
    /// A file the user gave cannot be read (missing, a folder, no permission). Exit 2.
    #[error("{}: cannot read {what}: {source}", path.display())]
    ReadInput {
        /// The file.
        path: PathBuf,
        /// What it is (`the input CSV`, `the instruction`).
        what: &'static str,
        /// The IO error.
        source: std::io::Error,
    },
    /// An operation on the runner's own files failed (store, workspace, outputs). Exit 3.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was done (`write`, `create the store`).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The agent CLI or another program cannot be started. Exit 3.
    #[error("`{program}` {problem}")]
    ProgramMissing {
        /// The program as given (a name looked up on PATH, or a path).
        program: String,
        /// Why, and how to fix it (`was not found on PATH; install it with …`).
        problem: String,
    },
    /// Another run holds the batch's lock. Exit 3.
    #[error(
        "another run of this batch is in progress ({holder}); wait for it to finish or stop it (lock: {})",
        lock.display()
    )]
    LockHeld {
        /// Who holds it: its pid, and its host when that is another one.
        holder: crate::holder::Holder,
        /// The lock file.
        lock: PathBuf,
    },
    /// Another runner holds the store lock for longer than a writer waits. Exit 3.
    #[error(
        "another runner ({holder}) has been editing the store for more than {}; wait for it to finish or stop it, then try again (lock: {})",
        humantime::format_duration(*waited),
        lock.display()
    )]
    StoreBusy {
        /// Who holds it: its pid, and its host when that is another one.
        holder: crate::holder::Holder,
        /// How long the writer waited.
        waited: std::time::Duration,
        /// The lock file.
        lock: PathBuf,
    },
    /// The environment is not fit to run for another reason (no HOME, no runtime, no
    /// signal handlers, no agent CLI found). Exit 3.
    #[error("{0}")]
    Environment(String),
}

impl Error {
    /// The process exit code for this error (DESIGN §7).
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_)
            | Error::BadValue { .. }
            | Error::Needs { .. }
            | Error::Conflict { .. }
            | Error::Unknown { .. }
            | Error::MissingFile { .. }
            | Error::OutputRefused { .. }
            | Error::Input { .. }
            | Error::ReadInput { .. } => EXIT_INPUT,
            Error::Io { .. }
            | Error::ProgramMissing { .. }
            | Error::LockHeld { .. }
            | Error::StoreBusy { .. }
            | Error::Environment(_) => EXIT_ENVIRONMENT,
        }
    }

    /// This error said of `what` (`BATCH.md:7: stage `fix``): the same message after it, the
    /// same exit code.
    pub(crate) fn within(self, what: &str) -> Error {
        let message = format!("{what}: {self}");
        match self.exit_code() {
            EXIT_INPUT => Error::Usage(message),
            _ => Error::Environment(message),
        }
    }

    /// The 1-based line of `text` where a parser's error `span` starts (TOML's), when it
    /// names one inside the text.
    pub(crate) fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> Option<u64> {
        let before = text.get(..span?.start)?;
        Some(before.matches('\n').count() as u64 + 1)
    }

    /// An input error about `path` (and `line`, 1-based, when known).
    pub(crate) fn input_at(
        path: &Path,
        line: Option<u64>,
        message: impl std::fmt::Display,
    ) -> Error {
        Error::Input {
            path: path.to_owned(),
            line,
            message: message.to_string(),
        }
    }

    /// A [`Error::BadValue`]: `flag` got `value`, which `expected` (a predicate such as
    /// `must be none or landlock`).
    pub(crate) fn bad_value(
        flag: impl Into<String>,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> Error {
        Error::BadValue {
            flag: flag.into(),
            value: value.to_string(),
            expected: expected.into(),
        }
    }

    /// A [`Error::Needs`]: `flag` needs `needs`, because `why`.
    pub(crate) fn needs(
        flag: impl Into<String>,
        needs: impl Into<String>,
        why: impl Into<String>,
    ) -> Error {
        Error::Needs {
            flag: flag.into(),
            needs: needs.into(),
            why: why.into(),
        }
    }

    /// A [`Error::MissingFile`]: `path` is not there as the `what` it should be.
    pub(crate) fn missing_file(
        path: &Path,
        what: impl Into<String>,
        hint: impl Into<String>,
    ) -> Error {
        Error::MissingFile {
            path: path.to_owned(),
            what: what.into(),
            hint: hint.into(),
        }
    }

    /// An [`Error::OutputRefused`] for the output `path`, named by `flag` when one did.
    pub(crate) fn output_refused(
        flag: Option<&str>,
        path: &Path,
        problem: impl Into<String>,
    ) -> Error {
        Error::OutputRefused {
            flag: flag.map(str::to_owned),
            path: path.to_owned(),
            problem: problem.into(),
        }
    }

    /// An error for a failed IO operation on the runner's own file `path` (exit 3).
    pub(crate) fn io(action: &'static str, path: &Path, err: std::io::Error) -> Error {
        Error::Io {
            action,
            path: path.to_owned(),
            source: err,
        }
    }

    /// An input file `path` that cannot be read (exit 2).
    pub(crate) fn read_input(what: &'static str, path: &Path, err: std::io::Error) -> Error {
        Error::ReadInput {
            path: path.to_owned(),
            what,
            source: err,
        }
    }
}

/// Result alias used across the crate.
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_failure_has_its_exit_code_and_names_what_failed() {
        let missing = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let cases = [
            (
                Error::bad_value("--jobs", "x", "must be a number"),
                2,
                "--jobs `x` must be a number",
            ),
            (
                Error::needs(
                    "--merge",
                    "--isolate worktree",
                    "it merges worktree branches",
                ),
                2,
                "--merge needs --isolate worktree: it merges",
            ),
            (
                Error::Conflict {
                    flag: "--global".into(),
                    other: "--project".into(),
                    why: "give one".into(),
                },
                2,
                "--global does not go with --project",
            ),
            (
                Error::Unknown {
                    what: "runner".into(),
                    name: "claud".into(),
                    suggestion: "; did you mean `claude`?".into(),
                    hint: "the built-in runners are: claude".into(),
                },
                2,
                "unknown runner `claud`; did you mean `claude`?; the built-in",
            ),
            (
                Error::missing_file(Path::new("todo-9.md"), "batch file", "check the path"),
                2,
                "todo-9.md: no such batch file; check the path",
            ),
            (
                Error::output_refused(Some("-o"), Path::new("in.csv"), "it is the input"),
                2,
                "-o in.csv: it is the input",
            ),
            (
                Error::input_at(Path::new("B.md"), Some(3), "bad"),
                2,
                "B.md:3: bad",
            ),
            (
                Error::read_input("the input CSV", Path::new("in.csv"), missing()),
                2,
                "in.csv: cannot read the input CSV",
            ),
            (
                Error::io("write", Path::new("/w/out.csv"), missing()),
                3,
                "cannot write /w/out.csv",
            ),
            (
                Error::ProgramMissing {
                    program: "claude".into(),
                    problem: "was not found on PATH".into(),
                },
                3,
                "`claude` was not found on PATH",
            ),
            (
                Error::LockHeld {
                    holder: crate::holder::Holder {
                        pid: Some(42),
                        host: None,
                    },
                    lock: PathBuf::from("/w/lock"),
                },
                3,
                "(pid 42)",
            ),
            (
                Error::StoreBusy {
                    holder: crate::holder::Holder {
                        pid: Some(7),
                        host: None,
                    },
                    waited: std::time::Duration::from_secs(10),
                    lock: PathBuf::from("/s/.runner.lock"),
                },
                3,
                "(pid 7) has been editing the store for more than 10s",
            ),
        ];
        for (e, code, text) in cases {
            assert_eq!(e.exit_code(), code, "{e}");
            assert!(e.to_string().contains(text), "{e} lacks {text}");
        }
    }
}
