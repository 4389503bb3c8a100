//! The value types of runner options, each with its parsing and its rules: the bottom layer
//! that `cli`, `settings` and the run layer all import (never the reverse; nextest keeps its
//! `config/elements` the same way). A flag's text and a file's key go through the same
//! parsing (`FromStr`, or [`duration::parse`]); a file's value is parsed once, when the file
//! is loaded ([`crate::settings::FileSettings`]).

pub(crate) mod best_of;
pub(crate) mod duration;
pub(crate) mod format;
pub(crate) mod isolation;
pub(crate) mod limits;
pub(crate) mod notify;
pub(crate) mod on_conflict;
pub(crate) mod order;
pub(crate) mod queue;
pub(crate) mod selection;

pub(crate) use format::Format;
