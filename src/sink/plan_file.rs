//! A file a run reads or writes, named for the plan's start-up checks
//! ([`crate::schedule::plan::Plan::check`]). A source names what it reads (input,
//! instruction, BATCH.md, checkpoints); each sink declares what it writes
//! ([`super::Sink::writes`]), so the plan's list of written files is made of the sinks
//! themselves and no sink's file escapes the checks. It lives with the sinks, below the plan:
//! a sink declares its files without knowing the plan.

use std::path::PathBuf;

/// A file a plan reads or writes, named for messages.
#[derive(Debug, Clone)]
pub(crate) struct PlanFile {
    /// What it is (`input`, `output`, `JUnit report`).
    pub what: &'static str,
    /// Its path.
    pub path: PathBuf,
    /// For a file the run writes, the option that chooses it (`--output`).
    pub flag: &'static str,
    /// For a file chosen by a flag: the only kind of existing file it may replace, so that
    /// a slip of `-o` onto someone's notes does not destroy them.
    pub replaces: Option<Replaces>,
    /// The run edits this file or folder in place rather than producing it (a todo batch
    /// file's marks, the store's checkpoints and inbox): checked as every written file is,
    /// but not named among the outputs of the `run_ended` event.
    pub in_place: bool,
}

/// The kind of file an output may replace: `kind` names it for the message, `ours` tells it
/// by its bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Replaces {
    /// What the file must be (`a JUnit report`).
    pub kind: &'static str,
    /// Whether the existing bytes are that kind of file.
    pub ours: fn(&[u8]) -> bool,
}

impl PlanFile {
    /// A file named `what` at `path`, chosen by `flag` (empty for inputs and for files no
    /// flag names).
    pub(crate) fn new(
        what: &'static str,
        path: impl Into<PathBuf>,
        flag: &'static str,
    ) -> PlanFile {
        PlanFile {
            what,
            path: path.into(),
            flag,
            replaces: None,
            in_place: false,
        }
    }

    /// This file, which replaces only an existing file `ours` recognises as `kind`
    /// ([`PlanFile::replaces`]).
    pub(crate) fn replacing(mut self, kind: &'static str, ours: fn(&[u8]) -> bool) -> PlanFile {
        self.replaces = Some(Replaces { kind, ours });
        self
    }

    /// This file, edited in place ([`PlanFile::in_place`]).
    pub(crate) fn in_place(mut self) -> PlanFile {
        self.in_place = true;
        self
    }
}
