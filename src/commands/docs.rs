//! `runner completions SHELL` and `runner man`: the command line's own documentation, made
//! from the clap definitions (`clap_complete`, `clap_mangen`), so it never drifts from them.

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};
use crate::error::{Error, Result};

/// `runner completions SHELL`.
pub(crate) fn completions(args: CompletionsArgs) -> Result<i32> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "runner", &mut out);
    crate::ui::out_raw(String::from_utf8_lossy(&out));
    Ok(0)
}

/// `runner man`.
///
/// Errors: the page cannot be rendered (exit 3).
pub(crate) fn man() -> Result<i32> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(|e| Error::Environment(format!("cannot render the man page: {e}")))?;
    crate::ui::out_raw(String::from_utf8_lossy(&out));
    Ok(0)
}
