//! `runner report [WORKSPACE] --html FILE --markdown FILE|-`: a team's journal as one
//! self-contained HTML page (`ui::html`) and/or a Markdown summary (`ui::markdown`, for
//! `$GITHUB_STEP_SUMMARY`), for a finished team, a snapshot of a running one, or an archived
//! one.

use std::path::Path;

use crate::cli::ReportArgs;
use crate::error::{Error, Result};
use crate::run::record::workspace;

/// `runner report`.
pub(crate) fn report(args: ReportArgs) -> Result<i32> {
    let found = match workspace::locate(args.workspace.as_deref()) {
        Ok(found) => found,
        // An output with no workspace (a merged sharded output, a CI artifact): its rows.
        Err(e) => match args.workspace.as_deref() {
            Some(output) if crate::sink::output_history::is_output(output) => {
                return from_output(&args, output);
            }
            _ => return Err(e),
        },
    };
    let dir = found.path();
    if let Some(html) = &args.html {
        check_html(html, dir)?;
    }
    let markdown = args.markdown.as_ref().filter(|m| m.as_os_str() != "-");
    if let Some(md) = markdown {
        check_markdown(md, Some(dir))?;
    }
    let h = found.history()?;
    if let Some(path) = &args.html {
        let diffs = crate::run::isolation::diff::Diffs::of_team(dir);
        let now = jiff::Timestamp::now().as_millisecond();
        let page = crate::ui::html::report(&h, now, diffs.as_ref())?;
        crate::fsutil::make_parent(path)?;
        crate::fsutil::write_atomic(path, page.as_bytes())?;
        crate::ui::outln(format_args!(
            "Wrote {} ({} item(s), {} attempt(s))",
            path.display(),
            h.outcomes.len(),
            h.spans.len()
        ));
    }
    if args.markdown.is_some() {
        let text = crate::ui::markdown::summary(&h);
        match markdown {
            None => crate::ui::out_document(&text),
            Some(path) => append(path, &text)?,
        }
    }
    Ok(0)
}

/// `runner report OUTPUT --markdown FILE|-` for an output no team workspace stands for:
/// the summary from its rows' runner columns ([`crate::sink::output_history`]).
///
/// Errors: `--html` (its timeline needs the journal's attempts), the output cannot be read,
/// the summary cannot be written (exit 2).
fn from_output(args: &ReportArgs, output: &Path) -> Result<i32> {
    if args.html.is_some() {
        return Err(Error::Usage(format!(
            "{}: no team workspace stands for this output, and the HTML page's timeline needs one (its journal's attempts); `--markdown` summarises the output alone",
            output.display()
        )));
    }
    let markdown = args.markdown.as_ref().filter(|m| m.as_os_str() != "-");
    if let Some(md) = markdown {
        check_markdown(md, None)?;
    }
    let h = crate::sink::output_history::read(output)?;
    let text = crate::ui::markdown::summary(&h);
    match markdown {
        None => crate::ui::out_document(&text),
        Some(path) => append(path, &text)?,
    }
    Ok(0)
}

/// The HTML page goes outside the workspace and replaces only an earlier report.
fn check_html(path: &Path, dir: &Path) -> Result<()> {
    crate::fsutil::check_parent(Some(path), "--html")?;
    if inside(path, dir) {
        return Err(Error::output_refused(
            Some("--html"),
            path,
            format!(
                "write the report outside the team workspace {}",
                dir.display()
            ),
        ));
    }
    // Replace only an earlier report: a slip of `--html` must not land on an input or output.
    crate::fsutil::check_replaceable(path, "--html", "an HTML report", |b| {
        b.starts_with(b"<!DOCTYPE html>")
    })
}

/// The Markdown summary is appended (a step summary file gathers several), outside the
/// team's `workspace` (when there is one), never to a file that holds anything but Markdown text.
fn check_markdown(path: &Path, workspace: Option<&Path>) -> Result<()> {
    crate::fsutil::check_parent(Some(path), "--markdown")?;
    if let Some(dir) = workspace.filter(|dir| inside(path, dir)) {
        return Err(Error::output_refused(
            Some("--markdown"),
            path,
            format!(
                "write the summary outside the team workspace {}",
                dir.display()
            ),
        ));
    }
    // Appended to, so an existing file must be text of that kind: never an output, a
    // page, data or code that a slip of the flag would corrupt.
    let kind = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    const NOT_MARKDOWN: &[&str] = &[
        "csv", "jsonl", "json", "xml", "html", "htm", "toml", "yaml", "yml", "py", "rs", "sh",
    ];
    // Appended only to a file that holds a summary of ours already, or to GitHub's step
    // summary (which other steps write too): never to an input, a template or notes.
    let step_summary = std::env::var_os("GITHUB_STEP_SUMMARY")
        .is_some_and(|s| crate::fsutil::same_file(Path::new(&s), path));
    crate::fsutil::check_replaceable(
        path,
        "--markdown",
        "a Markdown summary of the runner (or $GITHUB_STEP_SUMMARY)",
        |b| {
            !NOT_MARKDOWN.contains(&kind.as_str())
                && std::str::from_utf8(b).is_ok_and(|t| step_summary || t.contains(SUMMARY_MARK))
        },
    )?;
    if NOT_MARKDOWN.contains(&kind.as_str()) {
        return Err(Error::output_refused(
            Some("--markdown"),
            path,
            format!("a `.{kind}` file is not for a Markdown summary; name a `.md` file or `-`"),
        ));
    }
    Ok(())
}

/// What every summary of ours holds (its heading), by which an earlier one is recognised.
const SUMMARY_MARK: &str = "### runner: team `";

/// Whether `path` (resolved through its folder) lies inside `dir`.
fn inside(path: &Path, dir: &Path) -> bool {
    let abs = crate::fsutil::absolute(path);
    let abs = abs
        .parent()
        .and_then(|p| p.canonicalize().ok())
        .zip(abs.file_name())
        .map_or(abs.clone(), |(p, n)| p.join(n));
    abs.starts_with(dir)
}

/// Append `text` to `path` (made when missing), as `$GITHUB_STEP_SUMMARY` is written.
fn append(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    crate::fsutil::make_parent(path)?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io("open", path, e))?;
    // A blank line between summaries appended one after another.
    let gap = match f.metadata().map(|m| m.len()) {
        Ok(0) | Err(_) => "",
        Ok(_) => "\n",
    };
    f.write_all(format!("{gap}{text}").as_bytes())
        .map_err(|e| Error::io("write", path, e))?;
    crate::ui::outln(format_args!("Wrote the summary to {}", path.display()));
    Ok(())
}
