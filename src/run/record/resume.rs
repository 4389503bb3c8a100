//! The command that resumes a team, derived from the command line its last run recorded in
//! `team.json` ([`crate::run::record::team::Snapshot::command`]): the same options, read with the
//! runner's own argument definitions (so a flag's value is never taken for a positional).
//!
//! - `runner batch …` and `runner run todo-N.md …` resume as the same command without
//!   `--only`: completed items are not run again, so what runs is what did not complete,
//!   never-started items included (`--only failed` would also refuse when a run was killed
//!   before it wrote any output).
//! - `runner resolve …` resumes as `runner run <its todo-N.md> …` with the run options it was
//!   given (`--yes`, `--select`, `--id` and the store choice belong to resolve: the batch file
//!   holds exactly the items they chose), and
//!   `--include-ideas` when an item left to run is an idea.
//!
//! `--dry-run` is dropped everywhere. Pure: text in, text out.

use std::path::Path;

use clap::CommandFactory;

use crate::run::record::team::Snapshot;
use crate::run::record::workspace::Found;

/// A token group of a recorded command line: an option with its value, or a positional.
struct Token {
    /// The clap id of the option (`only`, `select`); `None` for a positional.
    id: Option<String>,
    /// Its words as given (`--only`, `failed`; or `--only=failed`).
    words: Vec<String>,
}

/// Split `args` (after the subcommand, before `--`) by `sub`'s argument definitions.
fn tokens(sub: &clap::Command, args: &[String]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let arg = if let Some(long) = a.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or_default();
            sub.get_arguments().find(|x| x.get_long() == Some(name))
        } else if a.len() == 2 && a.starts_with('-') {
            let c = a.chars().nth(1).unwrap_or_default();
            sub.get_arguments().find(|x| x.get_short() == Some(c))
        } else {
            None
        };
        let Some(arg) = arg else {
            out.push(Token {
                id: None,
                words: vec![a.clone()],
            });
            continue;
        };
        let mut words = vec![a.clone()];
        if arg.get_action().takes_values()
            && !a.contains('=')
            && let Some(v) = it.next()
        {
            words.push(v.clone());
        }
        out.push(Token {
            id: Some(arg.get_id().to_string()),
            words,
        });
    }
    out
}

/// The command line (arguments, shell-quoted, starting with `runner`) that resumes the team
/// whose last run was started with `argv` (as recorded, program first). `batch` is the todo
/// batch file of a todo team (needed when `resolve` made it), with whether an item left in it
/// is an idea. `None` when `argv` is not a run the runner knows how to resume.
pub(crate) fn command(argv: &[String], batch: Option<(&str, bool)>) -> Option<String> {
    let args = argv.get(1..)?;
    let (head, agent) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i..]),
        None => (args, &[][..]),
    };
    let at = head.iter().position(|a| !a.starts_with('-'))?;
    let name = head[at].as_str();
    let cli = crate::cli::Cli::command();
    let sub = cli.find_subcommand(name)?;
    let mut toks = tokens(sub, &head[at + 1..]);
    let drop = |toks: &mut Vec<Token>, ids: &[&str]| {
        toks.retain(|t| t.id.as_deref().is_none_or(|id| !ids.contains(&id)));
    };
    let mut words = vec!["runner".to_string()];
    // Global options given before the subcommand (`-v`) stay where they were.
    words.extend(head[..at].iter().cloned());
    match name {
        // The same command resumes (completed items are not run again); `--only failed`
        // would refuse when the run died before writing any output.
        "batch" | "run" => {
            drop(&mut toks, &["only", "dry_run"]);
            words.push(name.into());
        }
        "resolve" => {
            drop(
                &mut toks,
                &[
                    "only", "dry_run", "yes", "select", "ids", "store", "global", "project",
                ],
            );
            let (file, ideas) = batch?;
            words.extend(["run".into(), file.to_owned()]);
            if ideas {
                words.push("--include-ideas".into());
            }
        }
        _ => return None,
    }
    words.extend(toks.into_iter().flat_map(|t| t.words));
    words.extend(agent.iter().cloned());
    Some(shell_words(&words))
}

/// `words` as one POSIX shell command line: a word of only `A-Za-z0-9_@%+=:,./-` as it is,
/// any other in single quotes (a `'` inside as `'\''`).
pub(crate) fn shell_words<S: AsRef<str>>(words: &[S]) -> String {
    let quote = |w: &str| {
        let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
        if !w.is_empty() && w.chars().all(safe) {
            w.to_owned()
        } else {
            format!("'{}'", w.replace('\'', "'\\''"))
        }
    };
    words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command that resumes the team `found` (state `s`), when something is left to do and
/// no run goes on: [`command`] over what its last run recorded, with a `cd` to the folder it
/// was started in when that is not the current one.
pub(crate) fn for_team(found: &Found, s: &Snapshot) -> Option<String> {
    if !s.incomplete() || s.is_live() {
        return None;
    }
    run_again(found, s)
}

/// The command that runs the team `found` (state `s`) again, whether or not anything is left
/// to do now (`runner reset` reopened items of a team that completed): [`command`] over what
/// its last run recorded — in its `team.json`, or its archive's header — with a `cd` to the
/// folder it was started in when that is not the current one. `None` when no run of it is
/// recorded (an archive written before the command was kept) or the runner cannot resume it.
pub(crate) fn run_again(found: &Found, s: &Snapshot) -> Option<String> {
    let input = match found {
        Found::Workspace(dir) => crate::run::record::team::recorded_batch(dir)
            .ok()
            .flatten()
            .map(|b| b.input),
        Found::Archive(path) => crate::run::record::archive::read(path)
            .ok()
            .map(|a| a.header.batch)
            .filter(|b| !b.is_empty()),
    };
    let cwd = Path::new(&s.cwd);
    let batch = input.map(|input| {
        // An idea left to run needs `--include-ideas` (an unreadable file: said anyway).
        let ideas = crate::store::read_todo(Path::new(&input)).map_or(true, |(_, doc)| {
            crate::source::todo::open_items(&doc)
                .iter()
                .any(|i| i.section == crate::source::todo::Section::Ideas)
        });
        let shown = Path::new(&input)
            .strip_prefix(cwd.canonicalize().unwrap_or(cwd.to_owned()))
            .map(|p| p.display().to_string())
            .unwrap_or(input.clone());
        (shown, ideas)
    });
    let cmd = command(&s.command, batch.as_ref().map(|(f, i)| (f.as_str(), *i)))?;
    Some(in_folder(cwd, cmd))
}

/// `cmd`, preceded by `cd FOLDER && ` when `folder` (where its relative paths start) is not
/// the current folder.
pub(crate) fn in_folder(folder: &Path, cmd: String) -> String {
    let here = std::env::current_dir().ok();
    if folder.as_os_str().is_empty() || here.is_some_and(|h| h == folder) {
        return cmd;
    }
    format!("cd {} && {cmd}", shell_words(&[folder.to_string_lossy()]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn a_csv_batch_resumes_with_the_same_options_without_only() {
        let a = argv(
            "/bin/runner batch --input in.csv --only a,b --jobs 2 --dry-run -- python3 my agent.py",
        );
        assert_eq!(
            command(&a, None).as_deref(),
            Some("runner batch --input in.csv --jobs 2 -- python3 my agent.py")
        );
    }

    #[test]
    fn a_resolved_batch_resumes_with_run_and_its_run_options_only() {
        let a = argv(
            "runner -v resolve --store S --yes --select 1,2 --format=plain --retries 1 -- python3 f.py",
        );
        let by_id =
            argv("runner resolve --project --yes --id k-1 --id=k-2 --format=plain -- python3 f.py");
        assert_eq!(
            command(&by_id, Some((".agent-tasks/todo-1.md", false))).as_deref(),
            Some("runner run .agent-tasks/todo-1.md --format=plain -- python3 f.py"),
            "--id is resolve's"
        );
        assert_eq!(
            command(&a, Some(("S/todo-1.md", true))).as_deref(),
            Some(
                "runner -v run S/todo-1.md --include-ideas --format=plain --retries 1 -- python3 f.py"
            )
        );
        // No idea left: no --include-ideas.
        assert_eq!(
            command(&a, Some(("S/todo-1.md", false))).as_deref(),
            Some("runner -v run S/todo-1.md --format=plain --retries 1 -- python3 f.py")
        );
        assert_eq!(command(&a, None), None, "resolve needs its batch file");
        let run: Vec<String> = ["runner", "run", "S/todo 1.md", "--only", "2"]
            .map(String::from)
            .into();
        assert_eq!(
            command(&run, None).as_deref(),
            Some("runner run 'S/todo 1.md'"),
            "a word with a space is quoted"
        );
        assert_eq!(command(&argv("runner status --brief"), None), None);
    }
}
