//! The checks that a run can start, in the words the user wrote: the runner definition
//! expands and its program is installed, `--model`/`--agent-arg` have a place in it, the
//! verify command exists; and the program's relative paths anchored to the folder runner
//! was started in.

use std::path::{Path, PathBuf};

use super::Settings;
use crate::agent::{RunnerDef, definition};
use crate::cli::RunArgs;
use crate::error::{Error, Result};

/// The first agent CLI of [`definition::DETECT_ORDER`] whose program is on PATH.
///
/// Errors: [`Error::Environment`] (exit 3) listing what was looked for.
pub(crate) fn detect_runner(store: Option<&Path>) -> Result<String> {
    for name in definition::DETECT_ORDER {
        let def = definition::load(name, store, None)?;
        if which::which(&def.program).is_ok() {
            tracing::info!("no runner chosen; using `{name}`, the first agent CLI found on PATH");
            return Ok((*name).to_string());
        }
    }
    Err(Error::Environment(format!(
        "no runner chosen and no agent CLI found on PATH (looked for: {}); install one, give \
         --runner NAME, or give a program after `--`",
        definition::DETECT_ORDER.join(", ")
    )))
}

/// The `--` command (or BATCH.md `command`) with its relative paths made absolute from the
/// folder runner was started in, before any teammate starts: a teammate may work elsewhere
/// (its git worktree with `--isolate worktree`, the project root of a todo run), and the
/// user's own, current copy must run there, as it would from that folder — not a copy
/// committed in the worktree, nor nothing when the file is untracked.
///
/// The program is anchored when it names a path (holds a `/`, as `./agent.sh`); an argument
/// when it names a file that exists there (`agent.py`), or a folder above it (`../tools`).
/// A folder inside it (`.`, `src`) stays relative: in a worktree it names the teammate's own
/// copy, which is what isolation is for. Anything else (flags, text, a path that names
/// nothing there) stays as given, as does every argument of a runner definition (`claude`,
/// `codex`, …: their argv is the CLI's flags, not this).
pub(super) fn anchor_command(command: Vec<String>) -> Vec<String> {
    let mut rest = command.into_iter();
    let Some(program) = rest.next() else {
        return Vec::new();
    };
    std::iter::once(anchor_program(program))
        .chain(rest.map(anchored))
        .collect()
}

/// A program named by a relative path (`./check.sh`) made absolute from the folder runner
/// was started in; a bare name (found on PATH) stays. The `--verify` command gets only this:
/// its arguments name what it checks, the teammate's own files in its worktree.
pub(super) fn anchor_program(program: String) -> String {
    match program.contains('/') {
        true => anchored(program),
        false => program,
    }
}

/// `arg` made absolute from the current folder when it names a file there or a folder
/// above it (see [`anchor_command`]); else as given.
fn anchored(arg: String) -> String {
    let p = Path::new(&arg);
    let above = p.components().find(|c| *c != std::path::Component::CurDir)
        == Some(std::path::Component::ParentDir);
    if arg.is_empty() || p.is_absolute() || !(p.is_file() || (above && p.is_dir())) {
        return arg;
    }
    // A folder whose path is not UTF-8 cannot be written into the argv: keep the text.
    match crate::fsutil::absolute(p).into_os_string().into_string() {
        Ok(abs) => abs,
        _ => arg,
    }
}

/// Whether a process definition's argv (or environment) uses `placeholder`.
pub(super) fn uses_placeholder(def: &RunnerDef, placeholder: &str) -> bool {
    def.args
        .iter()
        .chain(&def.model_args)
        .chain(def.env.set.values())
        .any(|a| a.contains(placeholder))
}

/// Refuse `--model` and `--agent-arg` when the definition's argv has no place for them, so
/// they would be dropped without a word: the exec runner (`{command_args}`) passes nothing
/// extra to its program, and a definition without `{model_args}`/`{model}` (or
/// `{agent_args}`) has nowhere to put them. Kind `http` sends the model itself.
///
/// Errors: exit 2, naming the flag and where to put it instead.
pub(super) fn refuse_dropped_flags(flags: &RunArgs, def: &RunnerDef) -> Result<()> {
    if !def.backend.runs_a_program() {
        return Ok(());
    }
    let uses = |placeholder: &str| uses_placeholder(def, placeholder);
    let model = flags
        .model
        .as_ref()
        .filter(|_| !uses("{model_args}") && !uses("{model}"))
        .map(|m| ("--model", vec![format!("--model {m}")]));
    let agent_args = Some(&flags.agent_args)
        .filter(|a| !a.is_empty() && !uses("{agent_args}"))
        .map(|a| ("--agent-arg", a.clone()));
    let Some((flag, words)) = model.or(agent_args) else {
        return Ok(());
    };
    let words = words.join(" ");
    Err(Error::Usage(
        if def.args.iter().any(|a| a == "{command_args}") {
            format!(
                "the exec runner passes nothing extra to its program, so {flag} would be \
                 dropped: put it in the command after `--` (e.g. `-- ./agent.sh {words}`)"
            )
        } else {
            format!(
                "runner `{}` has no place for {flag} (its definition's `args` never use {}), \
                 so `{words}` would be dropped: leave it out, or add the placeholder to a \
                 definition of your own (--runner-file)",
                def.name,
                match flag {
                    "--model" => "`{model_args}` or `{model}`",
                    _ => "`{agent_args}`",
                }
            )
        },
    ))
}

/// Check that `program` can be started: a path that exists and is executable, or a name
/// found on PATH.
///
/// Errors: [`Error::ProgramMissing`] (exit 3) with the install hint.
pub(crate) fn check_program(program: &str, hint: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let hint = if hint.is_empty() {
        String::new()
    } else {
        format!("; {hint}")
    };
    let missing = |problem: String| Error::ProgramMissing {
        program: program.to_owned(),
        problem,
    };
    if !program.contains('/') {
        return which::which(program).map_err(|_| missing(format!("was not found on PATH{hint}")));
    }
    match std::fs::metadata(program) {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => {
            Ok(PathBuf::from(program))
        }
        Ok(meta) if meta.is_file() => Err(missing(format!(
            "is not executable; make it so with `chmod +x {program}`"
        ))),
        _ => Err(missing(format!("does not exist or is not a file{hint}"))),
    }
}

impl Settings {
    /// Check a process definition (expand its argv once with sample values, find its
    /// program, refuse a `--var` it never uses) and the verify command, so a bad definition
    /// or a missing program fails before anything is written, in the words the user wrote.
    /// (An `http` definition's values are checked where its one client is built,
    /// `crate::run::backend::for_settings`.)
    pub(super) fn check_programs(&self) -> Result<()> {
        if self.runner.backend.runs_a_program() {
            self.check_process()?;
        }
        if let Some(v) = &self.verify {
            check_program(&v[0], "check the --verify command")?;
        }
        Ok(())
    }

    /// The process backend's checks ([`Settings::check_programs`]).
    ///
    /// Errors: a `--var` the definition never uses, a placeholder it cannot expand (exit 2),
    /// a program that is not installed (exit 3, with the definition's install hint).
    fn check_process(&self) -> Result<()> {
        let sample = definition::AttemptArgs {
            prompt_file: Path::new("prompt.md"),
            report: Path::new("report.json"),
            workspace: Path::new("."),
            prompt: "",
            model: self.model.as_deref(),
            agent_args: &self.agent_args,
            command: &self.command,
            vars: &self.vars,
            in_git_work_tree: true,
        };
        // A `--var` the definition never uses is a typo, not a setting.
        let def = &self.runner;
        let used = |name: &str| {
            let placeholder = format!("{{var.{name}}}");
            def.vars.contains_key(name)
                || def
                    .args
                    .iter()
                    .chain(def.model_args.iter())
                    .chain(def.env.set.values())
                    .any(|a| a.contains(&placeholder))
        };
        if let Some(name) = self.vars.keys().find(|k| !used(k)) {
            let known: Vec<&str> = def.vars.keys().map(String::as_str).collect();
            return Err(Error::Unknown {
                what: "--var".into(),
                name: name.clone(),
                suggestion: crate::suggest::did_you_mean(name, known.iter().copied()),
                hint: match known.is_empty() {
                    true => format!("runner `{}` has no variables", def.name),
                    false => format!(
                        "runner `{}` has the variables {}",
                        def.name,
                        known.join(", ")
                    ),
                },
            });
        }
        let inv = self.runner.invocation(&sample)?;
        check_program(&inv.program, &self.runner.install_hint)?;
        Ok(())
    }
}
