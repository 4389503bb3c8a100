//! Building an attempt's argv and environment from a definition: the placeholders
//! (`{prompt_file}`, `{report}`, `{workspace}`, `{model}`, `{prompt}`, `{var.NAME}`, and the
//! whole-element `{command_args}`, `{model_args}`, `{no_git_args}`, `{agent_args}`) expanded
//! for one attempt.

use std::collections::BTreeMap;
use std::path::Path;

use super::{PromptMode, RunnerDef};
use crate::error::{Error, Result};

/// Largest prompt passed as one command-line argument (`prompt = "argument"`), in bytes.
/// Longer prompts fail the attempt with a reason instead of hitting the OS limit.
pub(crate) const MAX_PROMPT_ARG_BYTES: usize = 100 * 1024;

/// The placeholders that stand for a whole `args` element (a list, spliced in).
pub(super) const WHOLE_ELEMENT: &[&str] = &[
    "{command_args}",
    "{model_args}",
    "{no_git_args}",
    "{agent_args}",
];

/// The per-attempt values placeholders expand to.
#[derive(Debug, Clone)]
pub(crate) struct AttemptArgs<'a> {
    /// `{prompt_file}`: the prompt file.
    pub prompt_file: &'a Path,
    /// `{report}`: the report path.
    pub report: &'a Path,
    /// `{workspace}`: the teammate's writable folder (`teammates/<name>/work/`).
    pub workspace: &'a Path,
    /// `{prompt}`: the prompt text (only with `prompt = "argument"`).
    pub prompt: &'a str,
    /// `{model}` and `{model_args}`.
    pub model: Option<&'a str>,
    /// `{agent_args}`: the user's `--agent-arg` values.
    pub agent_args: &'a [String],
    /// `{command_args}` (exec): the user's command after `--`, program first.
    pub command: &'a [String],
    /// `--var NAME=VALUE` overrides of [`RunnerDef::vars`].
    pub vars: &'a BTreeMap<String, String>,
    /// Whether the agent's working directory is inside a git work tree (else
    /// `{no_git_args}` expands to [`RunnerDef::no_git_args`]).
    pub in_git_work_tree: bool,
}

/// A fully expanded command line for one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invocation {
    /// The program (name looked up on PATH, or a path).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Whether the prompt is written to stdin (else stdin is /dev/null).
    pub prompt_on_stdin: bool,
    /// With `prompt_on_stdin`: whether stdin is a pipe (`prompt = "pipe"`) rather than a
    /// read-only file.
    pub stdin_pipe: bool,
    /// Variables to remove from the environment.
    pub env_unset: Vec<String>,
    /// Variables to set; state folders are relative names resolved by the run layer.
    pub env_set: Vec<(String, String)>,
    /// Variables to point at per-teammate state folders.
    pub state_dirs: Vec<String>,
    /// Variables to point at a file the runner writes with this text (`[env] files`).
    pub env_files: Vec<(String, String)>,
    /// The CLI's own home to make for the attempt (`[env.home]`), its defaults expanded.
    pub env_home: Option<super::format::HomeSpec>,
}

impl Invocation {
    /// Whether the argv or the environment names `path` (the prompt file: the agent then
    /// reads it by its name, so it must be written before the agent starts).
    pub(crate) fn names(&self, path: &Path) -> bool {
        let path = path.to_string_lossy();
        self.args.iter().any(|a| a.contains(path.as_ref()))
            || self.env_set.iter().any(|(_, v)| v.contains(path.as_ref()))
            || self
                .env_files
                .iter()
                .any(|(_, t)| t.contains(path.as_ref()))
    }
}
impl RunnerDef {
    /// Expand the argv for one attempt. Whole-element expansions: `{command_args}` (exec: the
    /// program and its arguments), `{model_args}` (nothing without a model), `{agent_args}`.
    /// In-string placeholders: `{prompt_file}`, `{report}`, `{workspace}`, `{model}`,
    /// `{prompt}`, `{var.NAME}`.
    ///
    /// Errors: an unknown placeholder or var, `{command_args}` without a command, a prompt
    /// argument over [`MAX_PROMPT_ARG_BYTES`].
    pub(crate) fn invocation(&self, a: &AttemptArgs<'_>) -> Result<Invocation> {
        self.expand_argv(a).map_err(|e| {
            Error::Usage(if self.name.is_empty() {
                e
            } else {
                format!("runner `{}`: {e}", self.name)
            })
        })
    }

    pub(super) fn expand_argv(
        &self,
        a: &AttemptArgs<'_>,
    ) -> std::result::Result<Invocation, String> {
        if !self.backend.runs_a_program() {
            // An HTTP attempt starts no program: nothing to expand.
            return Ok(Invocation {
                program: String::new(),
                args: Vec::new(),
                prompt_on_stdin: false,
                stdin_pipe: false,
                env_unset: Vec::new(),
                env_set: Vec::new(),
                state_dirs: Vec::new(),
                env_files: Vec::new(),
                env_home: None,
            });
        }
        let mut program = self.program.clone();
        let mut args = Vec::new();
        for arg in &self.args {
            match arg.as_str() {
                "{command_args}" => {
                    let Some((first, rest)) = a.command.split_first() else {
                        return Err("this runner needs a command: give it after `--` \
                                    (e.g. `-- python3 agent.py`) or as BATCH.md `command`"
                            .into());
                    };
                    if program.is_empty() {
                        program = first.clone();
                        args.extend(rest.iter().cloned());
                    } else {
                        args.extend(a.command.iter().cloned());
                    }
                }
                "{model_args}" => {
                    if a.model.is_some() {
                        for m in &self.model_args {
                            args.push(self.expand(m, a)?);
                        }
                    }
                }
                "{no_git_args}" => {
                    if !a.in_git_work_tree {
                        for m in &self.no_git_args {
                            args.push(self.expand(m, a)?);
                        }
                    }
                }
                "{agent_args}" => args.extend(a.agent_args.iter().cloned()),
                _ => args.push(self.expand(arg, a)?),
            }
        }
        if self.prompt == PromptMode::Argument && !self.args.iter().any(|a| a.contains("{prompt}"))
        {
            // `prompt = "argument"` without a `{prompt}` placeholder: the prompt goes last.
            args.push(self.expand("{prompt}", a)?);
        }
        if program.is_empty() {
            return Err("no program to run".into());
        }
        let mut env_set: Vec<(String, String)> = self
            .env
            .set
            .iter()
            .map(|(k, v)| Ok((k.clone(), self.expand(v, a)?)))
            .collect::<std::result::Result<_, String>>()?;
        env_set.sort();
        let env_files = self
            .env
            .files
            .iter()
            .map(|(k, v)| Ok((k.clone(), self.expand(v, a)?)))
            .collect::<std::result::Result<_, String>>()?;
        let env_home = match &self.env.home {
            Some(h) => Some(super::format::HomeSpec {
                defaults: self.expand(&h.defaults, a)?,
                ..h.clone()
            }),
            None => None,
        };
        Ok(Invocation {
            program,
            args,
            prompt_on_stdin: matches!(self.prompt, PromptMode::Stdin | PromptMode::Pipe),
            stdin_pipe: self.prompt == PromptMode::Pipe,
            env_unset: self.env.unset.clone(),
            env_set,
            state_dirs: self.env.state_dirs.clone(),
            env_files,
            env_home,
        })
    }

    pub(super) fn expand(
        &self,
        template: &str,
        a: &AttemptArgs<'_>,
    ) -> std::result::Result<String, String> {
        let mut out = String::new();
        let mut rest = template;
        while let Some(start) = rest.find(['{', '}']) {
            out.push_str(&rest[..start]);
            // `{{` and `}}` are a literal brace (a JSON value in `[env] set`); a lone `}` too.
            if rest[start..].starts_with("{{") || rest[start..].starts_with("}}") {
                out.push_str(&rest[start..start + 1]);
                rest = &rest[start + 2..];
                continue;
            }
            if rest[start..].starts_with('}') {
                out.push('}');
                rest = &rest[start + 1..];
                continue;
            }
            let Some(len) = rest[start..].find('}') else {
                return Err(format!("unclosed `{{` in argument `{template}`"));
            };
            let name = &rest[start + 1..start + len];
            match name {
                "prompt_file" => out.push_str(&a.prompt_file.to_string_lossy()),
                "report" => out.push_str(&a.report.to_string_lossy()),
                "workspace" => out.push_str(&a.workspace.to_string_lossy()),
                "model" => out.push_str(a.model.unwrap_or("")),
                "prompt" => {
                    if a.prompt.len() > MAX_PROMPT_ARG_BYTES {
                        return Err(format!(
                            "the prompt is {} bytes, over the {} byte limit for an argument; \
                             use a runner definition that passes it on stdin or in a file",
                            a.prompt.len(),
                            MAX_PROMPT_ARG_BYTES
                        ));
                    }
                    out.push_str(a.prompt)
                }
                _ => match name.strip_prefix("var.") {
                    Some(var) => match a.vars.get(var).or_else(|| self.vars.get(var)) {
                        Some(v) => out.push_str(v),
                        None => {
                            return Err(format!(
                                "unknown variable `{{{name}}}`; define it in [vars]"
                            ));
                        }
                    },
                    None => {
                        return Err(format!(
                            "unknown placeholder `{{{name}}}` in argument `{template}`"
                        ));
                    }
                },
            }
            rest = &rest[start + len + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}
