//! The value types of runner options, each with its parsing and its rules: the bottom layer
//! that `cli`, `settings` and the run layer all import (never the reverse; nextest keeps its
//! `config/elements` the same way). A flag's text and a file's key go through the same
//! parsing (`FromStr`, or [`duration::parse`]); a file's value is parsed once, when the file
//! is loaded ([`crate::settings::FileSettings`]).

pub mod duration;
pub mod format;
pub mod isolation;
pub mod limits;
pub mod selection;

pub use format::Format;
