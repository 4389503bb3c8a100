//! `runner mcp`: serve the runner's tools over the Model Context Protocol on stdio
//! ([`crate::mcp`]).

use crate::error::{Error, Result};

/// Serve until the client closes stdin; 0 then.
///
/// Errors: this binary's path or the current folder cannot be read, or the transport failed
/// (exit 3).
pub fn mcp() -> Result<i32> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Environment(format!("cannot find the runner's own binary: {e}")))?;
    let cwd = std::env::current_dir()
        .map_err(|e| Error::Environment(format!("cannot read the current directory: {e}")))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Environment(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(crate::mcp::serve(exe, cwd))?;
    Ok(0)
}
