//! Runner definitions (`runners/<name>.toml`): what one is and how an attempt's argv is
//! built from it, by concept —
//!
//! - `format`: the TOML structs ([`RunnerDef`] and its tables) and the keys each may hold;
//! - `backend`: the `kind` as a [`BackendDef`] ([`HttpSpec`], [`HttpApi`] for kind `http`);
//! - `checks`: the rules serde cannot express, refused at their line;
//! - `placeholders`: an attempt's [`Invocation`] from [`AttemptArgs`];
//! - `builtins`: the compiled-in definitions and [`load`].

mod backend;
mod builtins;
mod checks;
mod format;
mod placeholders;
#[cfg(test)]
mod tests;

use std::path::Path;

use toml::de::DeTable;

pub(crate) use backend::{BackendDef, HttpApi, HttpSpec};
pub(crate) use builtins::{BUILTIN, DETECT_ORDER, load, store_file, store_only};
pub(crate) use format::{
    EndedSpec, ErrorFlag, HomeSpec, OutputFormat, Pointer, PromptMode, RunnerDef,
};
pub(crate) use placeholders::{AttemptArgs, Invocation};

use super::key_lines::KeyLines;
use crate::error::{Error, Result};
use format::unknown_keys;

impl RunnerDef {
    /// Parse a definition from TOML text; `path` is for messages.
    ///
    /// Errors: invalid TOML, a missing or mistyped key, a placeholder that does not exist —
    /// each naming the file, line and key.
    pub(crate) fn parse(path: &Path, text: &str) -> Result<RunnerDef> {
        Self::parse_with_warnings(path, text).map(|(def, _)| def)
    }

    /// Like [`RunnerDef::parse`], also returning a warning per unknown key or table (ignored,
    /// as a newer definition file may carry keys this runner does not know), each naming its
    /// line and the closest known key.
    pub(crate) fn parse_with_warnings(path: &Path, text: &str) -> Result<(RunnerDef, Vec<String>)> {
        let doc = DeTable::parse(text).map_err(|e| {
            Error::input_at(
                path,
                Error::line_of(text, e.span()),
                format!("invalid runner definition: {}", e.message()),
            )
        })?;
        let keys = KeyLines::new(text, doc.get_ref().clone());
        let mut warnings = unknown_keys(path, &keys);
        let mut def: RunnerDef = serde_path_to_error::deserialize(toml::Deserializer::from(doc))
            .map_err(|e| {
                let mut key = e.path().to_string();
                let mut message = e.inner().message().to_owned();
                // `[failure]` names the entry it refuses: "`failure.patterns[1].regex`: …".
                if let Some((inner, rest)) = message
                    .strip_prefix('`')
                    .and_then(|m| m.split_once("`: "))
                    .filter(|(k, _)| k.starts_with(&format!("{key}.")))
                {
                    (key, message) = (inner.to_owned(), rest.to_owned());
                }
                let line = match key.as_str() {
                    "" | "." => e.inner().span().map(|s| keys.line_at(s.start)),
                    _ => keys
                        .line(&key)
                        .or_else(|| e.inner().span().map(|s| keys.line_at(s.start))),
                };
                let key = match key.as_str() {
                    "" | "." => String::new(),
                    k => format!(" (key `{k}`)"),
                };
                Error::input_at(
                    path,
                    line,
                    format!("invalid runner definition{key}: {message}"),
                )
            })?;
        def.check(path, &keys)?;
        for (i, w) in def.sandbox.writes.iter().enumerate() {
            let trimmed = w.trim_end_matches('/');
            if ["", "~"].contains(&trimmed) {
                let line = keys.line(&format!("sandbox.writes[{i}]"));
                warnings.push(format!(
                    "{}{}: `[sandbox] writes` entry `{w}` lets every teammate write {}; name the folders the CLI needs",
                    path.display(),
                    line.map(|l| format!(":{l}")).unwrap_or_default(),
                    if trimmed.is_empty() { "everything the user may" } else { "the whole home folder" }
                ));
            }
        }
        Ok((def, warnings))
    }

    /// Whether the agent has no tools of its own (kind `http`): its answer is its report,
    /// it reads no files and keeps no working context, so the prompt says so.
    pub(crate) fn answers_only(&self) -> bool {
        self.backend.answers_only()
    }
}
