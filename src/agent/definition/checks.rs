//! The rules of a definition serde cannot express, each refused at the line it is written
//! on: a name, a known kind, placeholders that expand, variable names, sandbox paths, a
//! program, a prompt the agent is told about.

use std::collections::BTreeMap;
use std::path::Path;

use super::placeholders::WHOLE_ELEMENT;
use super::{AttemptArgs, BackendDef, PromptMode, RunnerDef};
use crate::agent::key_lines::KeyLines;
use crate::error::{Error, Result};

/// portable environment variable name (letters, digits, `_`, not starting with a digit), or
/// one the runner sets itself for every attempt (`RUNNER_*`, `TMPDIR`).
fn bad_variable_name(name: &str) -> Option<String> {
    let portable = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !portable {
        return Some(format!(
            "{name:?} is not a variable name (letters, digits and `_`, not starting with a digit)"
        ));
    }
    if name.starts_with("RUNNER_") || name == "TMPDIR" {
        return Some(format!(
            "`{name}` is set by the runner for every attempt (RUNNER_REPORT, RUNNER_ITEM_ID, …, TMPDIR); a definition cannot change it"
        ));
    }
    None
}

impl RunnerDef {
    /// The rules serde cannot express — a name, a known kind, placeholders that expand (each
    /// checked where it is written), a program, a prompt the agent is told about — and the
    /// `kind` and `[http]` as written read into [`RunnerDef::backend`].
    pub(super) fn check(&mut self, path: &Path, keys: &KeyLines<'_>) -> Result<()> {
        let at = |key: &str, message: String| Error::input_at(path, keys.line(key), message);
        if self.name.trim().is_empty() {
            return Err(at(
                "name",
                "`name` is required and must not be empty: add `name = \"mine\"` (the name \
                 `runner runners` and messages show)"
                    .into(),
            ));
        }
        self.backend = BackendDef::from_written(&self.kind_name, self.http_table.take())
            .map_err(|message| at("kind", message))?;
        if !self.backend.runs_a_program() {
            // No program, argv or environment to check.
            return Ok(());
        }
        let sample = AttemptArgs {
            prompt_file: Path::new("/p"),
            report: Path::new("/r"),
            workspace: Path::new("/w"),
            prompt: "p",
            model: Some("m"),
            agent_args: &[],
            command: &["prog".to_string()],
            vars: &BTreeMap::new(),
            in_git_work_tree: false,
        };
        self.check_templates(&sample, &at)?;
        self.check_env_names(&at)?;
        self.check_sandbox(&at)?;
        if self.program.is_empty() && !self.args.iter().any(|a| a == "{command_args}") {
            return Err(at(
                "program",
                "`program` is empty and `args` has no `{command_args}`: name the program to \
                 run (`program = \"my-agent\"`)"
                    .into(),
            ));
        }
        self.expand_argv(&sample)
            .map(|_| ())
            .map_err(|e| Error::input_at(path, None, e))?;
        let names_prompt_file = self
            .args
            .iter()
            .chain(self.env.set.values())
            .any(|a| a.contains("{prompt_file}"));
        if self.prompt == PromptMode::File && !names_prompt_file {
            return Err(at(
                "prompt",
                "`prompt = \"file\"` leaves the prompt in a file, but no `args` (or `[env] set` \
                 value) names it, so the agent never gets it: add `{prompt_file}` where the CLI \
                 takes its prompt file (e.g. `args = [\"--message-file\", \"{prompt_file}\"]`), or \
                 use `prompt = \"stdin\"`"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Each template (`args`, `model_args`, `no_git_args`, `[env] set` and `files` values)
    /// expands with `sample`; an unknown placeholder is refused at its own line.
    fn check_templates(&self, sample: &AttemptArgs<'_>, at: &At<'_>) -> Result<()> {
        // Each template where it is written, so an unknown placeholder names its line.
        let lists = [
            ("args", &self.args),
            ("model_args", &self.model_args),
            ("no_git_args", &self.no_git_args),
        ];
        let templates = lists
            .iter()
            .flat_map(|(key, list)| {
                list.iter()
                    .enumerate()
                    .map(move |(i, t)| (format!("{key}[{i}]"), t))
            })
            .filter(|(key, t)| !(key.starts_with("args[") && WHOLE_ELEMENT.contains(&t.as_str())))
            .chain(
                self.env
                    .set
                    .iter()
                    .map(|(k, v)| (format!("env.set.{k}"), v)),
            )
            .chain(
                self.env
                    .files
                    .iter()
                    .map(|(k, v)| (format!("env.files.{k}"), v)),
            )
            .chain(
                self.env
                    .home
                    .iter()
                    .map(|h| ("env.home.defaults".to_owned(), &h.defaults)),
            );
        for (key, template) in templates {
            let text = self.expand(template, sample).map_err(|e| {
                at(
                    &key,
                    format!("invalid runner definition (key `{key}`): {e}"),
                )
            })?;
            if key == "env.home.defaults"
                && !serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| v.is_object())
            {
                return Err(at(
                    &key,
                    format!(
                        "invalid runner definition (key `{key}`): {text:?} is not a JSON object; write the settings as one (`{{{{\"general\":{{{{\"maxAttempts\":1}}}}}}}}`)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `[env] set` and `[env] files` name variables the runner does not set, and no two
    /// files share one path.
    fn check_env_names(&self, at: &At<'_>) -> Result<()> {
        for (table, names) in [("set", &self.env.set), ("files", &self.env.files)] {
            for name in names.keys() {
                if let Some(why) = bad_variable_name(name) {
                    return Err(at(
                        &format!("env.{table}.{name}"),
                        format!("invalid runner definition (key `env.{table}.{name}`): {why}"),
                    ));
                }
            }
        }
        if let Some(h) = &self.env.home {
            if let Some(why) = bad_variable_name(&h.var) {
                return Err(at(
                    "env.home.var",
                    format!("invalid runner definition (key `env.home.var`): {why}"),
                ));
            }
            let names = [("folder", &h.folder), ("settings", &h.settings)]
                .into_iter()
                .chain(h.also.iter().map(|a| ("also", a)));
            for (key, name) in names {
                if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                    return Err(at(
                        &format!("env.home.{key}"),
                        format!(
                            "invalid runner definition (key `env.home.{key}`): {name:?} is not a file name (one name, no `/`)"
                        ),
                    ));
                }
            }
        }
        let mut file_names = std::collections::HashSet::new();
        if let Some(name) = self
            .env
            .files
            .keys()
            .find(|n| !file_names.insert(n.to_lowercase()))
        {
            return Err(at(
                &format!("env.files.{name}"),
                format!(
                    "invalid runner definition (key `env.files.{name}`): another `[env] files` variable differs from `{name}` only in case, and both would be written to one file; rename one"
                ),
            ));
        }
        Ok(())
    }

    /// `[sandbox] writes` entries are absolute (or from `~/`, `{env.NAME}`) and `[sandbox]
    /// vars` only set names `[vars]` defines.
    fn check_sandbox(&self, at: &At<'_>) -> Result<()> {
        if let Some((i, w)) =
            self.sandbox.writes.iter().enumerate().find(|(_, w)| {
                !(w.starts_with('/') || w.starts_with('~') || w.starts_with("{env."))
            })
        {
            return Err(at(
                &format!("sandbox.writes[{i}]"),
                format!(
                    "`[sandbox] writes` entry `{w}` is relative; write it from `~/` (HOME), `/` or `{{env.NAME}}`"
                ),
            ));
        }
        if let Some(name) = self
            .sandbox
            .vars
            .keys()
            .find(|n| !self.vars.contains_key(*n))
        {
            return Err(at(
                &format!("sandbox.vars.{name}"),
                format!(
                    "`[sandbox] vars` sets `{name}`, which `[vars]` does not define: add \
                     `{name} = \"...\"` (its value without the runner's sandbox) to `[vars]`"
                ),
            ));
        }
        Ok(())
    }
}

/// How a check refuses: at the line of `key`, with the message.
type At<'a> = dyn Fn(&str, String) -> Error + 'a;
