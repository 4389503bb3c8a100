//! The built-in definitions (`runners/*.toml`, compiled in), the order installed CLIs are
//! detected in, and loading a definition by name: `--runner-file`, the store's
//! `runners/<name>.toml`, else the built-in one.

use std::path::{Path, PathBuf};

use super::RunnerDef;
use crate::error::{Error, Result};

/// The built-in definitions, compiled in from `runners/*.toml`: `(name, toml text)`.
pub(crate) const BUILTIN: &[(&str, &str)] = &[
    ("claude", include_str!("../../../runners/claude.toml")),
    ("codex", include_str!("../../../runners/codex.toml")),
    ("gemini", include_str!("../../../runners/gemini.toml")),
    ("qwen", include_str!("../../../runners/qwen.toml")),
    ("opencode", include_str!("../../../runners/opencode.toml")),
    (
        "cursor-agent",
        include_str!("../../../runners/cursor-agent.toml"),
    ),
    ("amp", include_str!("../../../runners/amp.toml")),
    ("copilot", include_str!("../../../runners/copilot.toml")),
    ("aider", include_str!("../../../runners/aider.toml")),
    ("pi", include_str!("../../../runners/pi.toml")),
    ("cline", include_str!("../../../runners/cline.toml")),
    ("exec", include_str!("../../../runners/exec.toml")),
    ("openai", include_str!("../../../runners/openai.toml")),
    ("anthropic", include_str!("../../../runners/anthropic.toml")),
    (
        "gemini-api",
        include_str!("../../../runners/gemini-api.toml"),
    ),
];

/// The order in which installed agent CLIs are picked when no runner is chosen.
pub(crate) const DETECT_ORDER: &[&str] = &[
    "claude",
    "codex",
    "gemini",
    "qwen",
    "opencode",
    "cursor-agent",
    "amp",
    "copilot",
    "aider",
    "pi",
    "cline",
];

/// Where the store's definition `name` is (it need not exist): `<store>/runners/<name>.toml`.
pub(crate) fn store_file(store: &Path, name: &str) -> PathBuf {
    store.join("runners").join(format!("{name}.toml"))
}

/// The names of the definitions in `<store>/runners/` that are not built in (file stems of
/// its `*.toml` files), sorted; none when the folder does not exist.
///
/// Errors: a folder that exists but cannot be read (exit 2).
pub(crate) fn store_only(store: &Path) -> Result<Vec<String>> {
    let dir = store.join("runners");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::read_input("the store's runners folder", &dir, e)),
    };
    let mut names: Vec<String> = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| Error::read_input("the store's runners folder", &dir, e))?
            .path();
        let stem = path.file_stem().and_then(|s| s.to_str());
        let is_toml = path.extension().is_some_and(|e| e == "toml");
        if let Some(stem) = stem.filter(|s| is_toml && !BUILTIN.iter().any(|(n, _)| n == s)) {
            names.push(stem.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Load the definition `name`: `--runner-file` if given, else `<store>/runners/<name>.toml`
/// if it exists, else the built-in one. What the file's reading said that is not an error is
/// in [`RunnerDef::warnings`], for the caller to show.
///
/// Errors: an unknown name (lists the known ones), an unreadable or invalid file.
pub(crate) fn load(
    name: &str,
    store: Option<&Path>,
    runner_file: Option<&Path>,
) -> Result<RunnerDef> {
    let from_file = |path: &Path| -> Result<RunnerDef> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::read_input("the runner definition", path, e))?;
        let (mut def, warnings) = RunnerDef::parse_with_warnings(path, &text)?;
        def.warnings = warnings;
        Ok(def)
    };
    if let Some(file) = runner_file {
        return from_file(file);
    }
    if let Some(p) = store.map(|s| store_file(s, name)).filter(|p| p.is_file()) {
        let mut def = from_file(&p)?;
        if BUILTIN.iter().any(|(n, _)| *n == name) {
            def.replaces_builtin = Some(p);
        }
        return Ok(def);
    }
    match BUILTIN.iter().find(|(n, _)| *n == name) {
        Some((n, text)) => RunnerDef::parse(Path::new(&format!("runners/{n}.toml")), text),
        None => {
            let known: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
            Err(Error::Unknown {
                what: "runner".into(),
                name: name.to_owned(),
                suggestion: crate::suggest::did_you_mean(name, known.iter().copied()),
                hint: format!("the built-in runners are: {}", known.join(", ")),
            })
        }
    }
}
