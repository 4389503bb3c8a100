//! `runner mcp`: serve the runner's tools over the Model Context Protocol on stdio
//! ([`crate::mcp`]).

use crate::error::{Error, Result};

/// Serve until the client closes stdin and its background run has ended, or SIGINT,
/// SIGTERM, SIGHUP: 0, or 130 when a signal interrupted a run (once it has ended its
/// teammates).
///
/// Errors: the current folder cannot be read, stdout cannot be set aside for the protocol, a
/// signal handler cannot be installed, or the transport failed (exit 3).
pub(crate) fn mcp() -> Result<i32> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::Environment(format!("cannot read the current directory: {e}")))?;
    // First: nothing printed from here on reaches the protocol.
    let out = super::stdio::ProtocolOut::take()?;
    // Nor is anything asked on a terminal: stdin is the protocol's.
    crate::commands::todo::stdin_is_protocol();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Environment(format!("cannot start the async runtime: {e}")))?;
    let served = rt.block_on(super::serve(cwd, out));
    // A blocking read of stdin may still be pending: do not wait for it.
    rt.shutdown_background();
    served
}
