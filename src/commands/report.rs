//! `runner report [WORKSPACE] --html FILE`: a team's journal as one self-contained HTML page
//! (`ui::html`), for a finished team, a snapshot of a running one, or an archived one.

use crate::cli::ReportArgs;
use crate::error::{Error, Result};
use crate::run::record::workspace;

/// `runner report`.
pub fn report(args: ReportArgs) -> Result<i32> {
    let found = workspace::locate(args.workspace.as_deref())?;
    let dir = found.path();
    crate::fsutil::check_parent(Some(&args.html), "--html")?;
    let html = crate::fsutil::absolute(&args.html);
    let html = html
        .parent()
        .and_then(|p| p.canonicalize().ok())
        .zip(html.file_name())
        .map_or(html.clone(), |(p, n)| p.join(n));
    if html.starts_with(dir) {
        return Err(Error::output_refused(
            Some("--html"),
            &args.html,
            format!(
                "write the report outside the team workspace {}",
                dir.display()
            ),
        ));
    }
    // Replace only an earlier report: a slip of `--html` must not land on an input or output.
    crate::fsutil::check_replaceable(&args.html, "--html", "an HTML report", |b| {
        b.starts_with(b"<!DOCTYPE html>")
    })?;
    let h = found.history()?;
    let page = crate::ui::html::report(&h, jiff::Timestamp::now().as_millisecond());
    crate::fsutil::make_parent(&args.html)?;
    crate::fsutil::write_atomic(&args.html, page.as_bytes())?;
    crate::ui::outln(format_args!(
        "Wrote {} ({} item(s), {} attempt(s))",
        args.html.display(),
        h.outcomes.len(),
        h.spans.len()
    ));
    Ok(0)
}
