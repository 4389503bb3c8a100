//! The value types of runner options, each with its parsing and its rules: the bottom layer
//! that `cli`, `settings` and the run layer all import (never the reverse; nextest keeps its
//! `config/elements` the same way).

pub mod format;
pub mod limits;
pub mod selection;

pub use format::Format;
