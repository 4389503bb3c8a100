//! `--format`: how a command shows what it does.

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Progress bar on a terminal, plain lines otherwise.
    Human,
    /// One plain line per finished item; no colours, no carriage returns.
    Plain,
    /// JSON lines of typed events on stdout.
    Json,
}
