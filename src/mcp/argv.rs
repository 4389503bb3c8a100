//! The command line each tool is, parsed by the CLI's own definitions ([`crate::cli`]), and
//! the arguments of the commands a tool builds directly (`status`, whose team is a path and
//! never a flag).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::Parser;

use super::params::{BatchParams, TeamChoice, best_of_flag, judge_flag, team_args, write_beside};
use crate::cli::{Cli, Command};

/// `runner ARGV` parsed as the CLI parses it.
///
/// Errors: clap's message (exit 2), the tool error's text.
pub(crate) fn parse(argv: Vec<OsString>) -> Result<Command, String> {
    let full = std::iter::once(OsString::from("runner")).chain(argv);
    Cli::try_parse_from(full)
        .map(|cli| cli.command)
        .map_err(|e| format!("{} (exit 2)", e.render().to_string().trim()))
}

/// A `runner batch …` command line and the files written for it (an inline instruction or
/// schema beside the output that was not there before): removed again when the run is
/// refused, so a refused call leaves nothing behind.
pub(crate) struct BatchArgv {
    /// The command line.
    pub args: Vec<OsString>,
    /// The files this call wrote.
    pub written: Vec<PathBuf>,
}

impl BatchArgv {
    /// Remove the files this call wrote (the run was refused).
    pub(crate) fn undo(&self) {
        remove_written(&self.written);
    }
}

/// Remove `written` (files a refused call wrote).
pub(crate) fn remove_written(written: &[PathBuf]) {
    for path in written {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!("cannot remove {}: {e}", path.display());
        }
    }
}

/// `runner batch …` for `p`: the files relative to the server's folder `cwd`, an inline
/// instruction or schema written beside the output (so the same call again resumes).
///
/// Errors: neither or both of `instruction` and `instruction_path`, a `best_of` or `judge`
/// `--best-of` / `--judge` would refuse (naming the argument), or a file beside the output
/// holds another text (nothing is left written then).
pub(crate) fn batch_argv(p: &BatchParams, cwd: &Path) -> Result<BatchArgv, String> {
    // Checked before anything is written.
    let best_of = p.best_of.as_deref().map(best_of_flag).transpose()?;
    let judge = p.judge.as_deref().map(judge_flag).transpose()?;
    let input = cwd.join(&p.csv_path);
    let output = match &p.output_csv_path {
        Some(o) => cwd.join(o),
        None => input
            .parent()
            .unwrap_or(Path::new("."))
            .join("workers-output.csv"),
    };
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "workers-output".into());
    let beside = |ext: &str| output.with_file_name(format!("{stem}.{ext}"));
    let mut written = Vec::new();
    let instruction = match (&p.instruction, &p.instruction_path) {
        (Some(_), Some(_)) => {
            return Err("give `instruction` or `instruction_path`, not both".into());
        }
        (None, None) => {
            return Err(
                "`instruction` (the template) or `instruction_path` (a file holding it) is required"
                    .into(),
            );
        }
        (None, Some(path)) => cwd.join(path),
        (Some(text), None) => {
            // The run's files are recorded so the same call resumes: the text lives
            // beside the output, where a later call finds it again.
            let path = beside("instruction.md");
            if write_beside(&path, text, "instruction")? {
                written.push(path.clone());
            }
            path
        }
    };
    let mut args: Vec<OsString> = vec![
        "batch".into(),
        "--input".into(),
        input.into(),
        "--instruction".into(),
        instruction.into(),
        "--output".into(),
        output.clone().into(),
    ];
    if let Some(schema) = &p.output_schema {
        let path = beside("schema.json");
        let text = serde_json::to_string_pretty(schema).unwrap_or_default();
        match write_beside(&path, &text, "output_schema") {
            Ok(true) => written.push(path.clone()),
            Ok(false) => {}
            Err(e) => {
                remove_written(&written);
                return Err(e);
            }
        }
        args.extend(["--output-schema".into(), path.into()]);
    }
    if let Some(c) = &p.id_column {
        args.extend(["--id-column".into(), c.into()]);
    }
    if let Some(j) = p.max_concurrency {
        args.extend(["--jobs".into(), j.to_string().into()]);
    }
    if let Some(s) = p.max_runtime_seconds {
        args.extend(["--timeout".into(), format!("{s}s").into()]);
    }
    // `=`: a value, never a flag.
    if let Some(b) = best_of {
        args.push(format!("--best-of={b}").into());
    }
    if let Some(j) = judge {
        args.push(format!("--judge={j}").into());
    }
    Ok(BatchArgv { args, written })
}

/// The run's own flags after a run command's: plain lines (they go to the server's stderr,
/// its log), then the team's runner options.
pub(crate) fn run_argv(mut args: Vec<OsString>, team: &TeamChoice) -> Vec<OsString> {
    args.extend(["--format".into(), "plain".into()]);
    args.extend(team_args(team));
    args
}

/// `runner status --brief [WORKSPACE]`'s arguments: `workspace` taken as a path, never as a
/// flag.
pub(crate) fn status_args(workspace: Option<PathBuf>) -> crate::cli::StatusArgs {
    crate::cli::StatusArgs {
        workspace,
        queue: None,
        queue_ca: None,
        watch: false,
        brief: true,
        list: false,
        store: None,
        stale_after: None,
    }
}

/// Whether `asked` (a `team` argument: a team's name, or a path `status` takes) names the
/// team `name` whose workspace is `workspace`.
pub(crate) fn same_team(asked: &str, name: &str, workspace: &Path) -> bool {
    if asked == name {
        return true;
    }
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
    crate::run::record::workspace::locate(Some(Path::new(asked)))
        .is_ok_and(|found| canonical(found.path()) == canonical(workspace))
}
