//! The runner definition file format: the TOML structs serde reads `runners/<name>.toml`
//! into, the keys each table may hold (an unknown one warns at its line), and the
//! [`Pointer`] shapes of `[result]`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::BackendDef;
use super::HttpSpec;
use crate::agent::key_lines::KeyLines;
use crate::failure::FailureRules;

/// Keys a definition may hold, per table (`""` is the top level).
const KNOWN_KEYS: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "name",
            "description",
            "kind",
            "program",
            "install_hint",
            "version_args",
            "checked",
            "args",
            "model_args",
            "no_git_args",
            "leaves_processes",
            "warm_up",
            "prompt",
            "output",
            "vars",
            "result",
            "failure",
            "env",
            "proven",
            "sandbox",
            "http",
        ],
    ),
    ("sandbox", &["writes", "vars"]),
    (
        "http",
        &[
            "api",
            "base_url",
            "base_url_env",
            "key_env",
            "model",
            "input_usd_per_mtok",
            "output_usd_per_mtok",
            "headers",
            "body",
        ],
    ),
    (
        "result",
        &[
            "final_text",
            "is_error",
            "error_text",
            "session_id",
            "cost_usd",
            "input_tokens",
            "output_tokens",
            "turns",
            "model",
            "ended",
        ],
    ),
    (
        "failure",
        &["exit_codes", "patterns", "ignore", "live", "warn"],
    ),
    ("env", &["unset", "state_dirs", "set", "files", "home"]),
];

/// A warning for each key of `keys` that [`KNOWN_KEYS`] does not list, with its line and the
/// closest known key.
pub(super) fn unknown_keys(path: &Path, keys: &KeyLines<'_>) -> Vec<String> {
    let mut warnings = Vec::new();
    for (section, known) in KNOWN_KEYS {
        let table = if section.is_empty() {
            Some(keys.root())
        } else {
            keys.root()
                .iter()
                .find(|(k, _)| &**k.get_ref() == *section)
                .and_then(|(_, v)| match v.get_ref() {
                    toml::de::DeValue::Table(t) => Some(t),
                    _ => None,
                })
        };
        for (k, _) in table.into_iter().flatten() {
            let k: &str = k.get_ref();
            if known.contains(&k) {
                continue;
            }
            let full = match section.is_empty() {
                true => k.to_owned(),
                false => format!("{section}.{k}"),
            };
            let line = keys
                .line(&full)
                .map(|l| format!(":{l}"))
                .unwrap_or_default();
            warnings.push(format!(
                "{}{line}: unknown key `{full}` ignored{}",
                path.display(),
                crate::suggest::did_you_mean(k, known.iter().copied())
            ));
        }
    }
    warnings
}

/// How the prompt reaches the agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PromptMode {
    /// `prompt.md` is the child's stdin, opened read-only (as with `< prompt.md`).
    #[default]
    Stdin,
    /// The prompt is the child's stdin through a pipe the runner writes and then closes
    /// (as with `cat prompt.md |`): for a CLI that reads stdin only when it is a pipe
    /// (`test -p /dev/stdin`).
    Pipe,
    /// Left in `prompt.md`; the args name it with `{prompt_file}`. stdin is /dev/null.
    File,
    /// The prompt text itself is an argument (`{prompt}`), at most [`MAX_PROMPT_ARG_BYTES`].
    Argument,
}

/// How the agent's stdout is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OutputFormat {
    /// Plain text: the whole stdout is the final text.
    #[default]
    Text,
    /// One JSON object: the whole stdout, or its last line that parses.
    Json,
    /// One JSON event per line.
    Jsonl,
}

/// Where a value is found in the agent's JSON output: an RFC 6901 JSON Pointer (empty, or
/// starting with `/`), optionally restricted (for JSON lines) to lines where every `when`
/// pointer equals its value (or one of them, for a list: `{ "/type" = ["turn.completed",
/// "turn.failed"] }`); the last matching line wins.
///
/// Written as a string (`"/result"`) or a table (`{ pointer = "/item/text", when = { "/type"
/// = "item.completed" } }`); anything else, an unknown key in the table or a pointer without
/// its leading `/` is refused with the shapes allowed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pointer {
    /// A bare pointer, e.g. `"/result"`.
    Plain(String),
    /// A pointer with conditions on the line.
    When {
        /// The pointer to read.
        pointer: String,
        /// Pointer → required value on the same line (a list: any one of its values).
        when: BTreeMap<String, toml::Value>,
    },
}

/// The shapes a [`Pointer`] may take, for messages.
const POINTER_SHAPES: &str = "a JSON pointer such as \"/result\", or a table such as \
     { pointer = \"/item/text\", when = { \"/type\" = \"item.completed\" } }";

/// `text` if it is a JSON pointer (RFC 6901: empty, or starting with `/`); else what to write.
fn json_pointer(text: &str) -> std::result::Result<String, String> {
    if text.is_empty() || text.starts_with('/') {
        return Ok(text.to_owned());
    }
    let fixed = text
        .trim_start_matches('$')
        .trim_start_matches('.')
        .replace('.', "/");
    Err(format!(
        "`{text}` is not a JSON pointer: a pointer starts with `/` (write \"/{fixed}\"), \
         or is empty for the whole object"
    ))
}

impl Pointer {
    fn from_value(value: toml::Value) -> std::result::Result<Pointer, String> {
        let mut table = match value {
            toml::Value::String(s) => return json_pointer(&s).map(Pointer::Plain),
            toml::Value::Table(t) => t,
            other => {
                return Err(format!(
                    "a {} is not a pointer; write {POINTER_SHAPES}",
                    other.type_str()
                ));
            }
        };
        if let Some(k) = table
            .keys()
            .find(|k| !matches!(k.as_str(), "pointer" | "when"))
        {
            return Err(format!(
                "unknown key `{k}` in a pointer table{}; write {POINTER_SHAPES}",
                crate::suggest::did_you_mean(k, ["pointer", "when"])
            ));
        }
        let pointer = match table.remove("pointer") {
            Some(toml::Value::String(s)) => json_pointer(&s)?,
            Some(_) => {
                return Err(format!(
                    "`pointer` must be a string; write {POINTER_SHAPES}"
                ));
            }
            None => {
                return Err(format!(
                    "a pointer table needs `pointer`; write {POINTER_SHAPES}"
                ));
            }
        };
        let when = match table.remove("when") {
            None => BTreeMap::new(),
            Some(toml::Value::Table(t)) => {
                let mut when = BTreeMap::new();
                for (k, v) in t {
                    when.insert(json_pointer(&k).map_err(|e| format!("`when`: {e}"))?, v);
                }
                when
            }
            Some(_) => {
                return Err(format!(
                    "`when` must be a table of pointer = value; write {POINTER_SHAPES}"
                ));
            }
        };
        Ok(Pointer::When { pointer, when })
    }
}

impl<'de> Deserialize<'de> for Pointer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Pointer, D::Error> {
        Pointer::from_value(toml::Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// `[result] is_error`: where the CLI says its run failed, read from the last line the
/// pointer matches (a terminal event). Without `equals` the value is a flag: `true` (or
/// `"true"`) or a non-zero number (an exit status, copilot's `exitCode`) is an error. With
/// `equals` (a value or a list), the value being one of them is the error: codex's last turn
/// event, `{ pointer = "/type", when = { "/type" = ["turn.completed", "turn.failed"] },
/// equals = "turn.failed" }`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ErrorFlag {
    /// Where the value is.
    pub pointer: Pointer,
    /// The values that mean an error (JSON); empty: the value is a flag.
    pub equals: Vec<serde_json::Value>,
}

impl<'de> Deserialize<'de> for ErrorFlag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<ErrorFlag, D::Error> {
        let mut value = toml::Value::deserialize(d)?;
        let equals = match &mut value {
            toml::Value::Table(t) => match t.remove("equals") {
                None => Vec::new(),
                Some(toml::Value::Array(a)) => a,
                Some(one) => vec![one],
            },
            _ => Vec::new(),
        };
        let equals = equals
            .into_iter()
            .map(serde_json::to_value)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| serde::de::Error::custom(format!("`equals`: {e}")))?;
        let pointer = Pointer::from_value(value).map_err(serde::de::Error::custom)?;
        Ok(ErrorFlag { pointer, equals })
    }
}

/// `[result] ended`: the CLI's word for how its run ended, and what each word that explains a
/// failure says: `{ pointer = "/subtype", when = { "/type" = "result" }, says = {
/// error_max_turns = "stopped at its turn limit" } }` (Claude's `result` subtypes). A
/// failed attempt's reason leads with the text of the word found (with the turn count when
/// `turns` gives one); a word `says` does not list says nothing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EndedSpec {
    /// Where the word is.
    pub pointer: Pointer,
    /// Word → the words of a reason.
    pub says: BTreeMap<String, String>,
}

impl<'de> Deserialize<'de> for EndedSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<EndedSpec, D::Error> {
        let mut value = toml::Value::deserialize(d)?;
        let says = match &mut value {
            toml::Value::Table(t) => t.remove("says"),
            _ => None,
        };
        let says = match says {
            Some(toml::Value::Table(t)) => t
                .into_iter()
                .map(|(k, v)| match v {
                    toml::Value::String(s) => Ok((k, s)),
                    _ => Err(format!(
                        "`says.{k}` must be a string (the words of a reason)"
                    )),
                })
                .collect::<std::result::Result<_, _>>()
                .map_err(serde::de::Error::custom)?,
            _ => {
                return Err(serde::de::Error::custom(
                    "`ended` needs `says`, a table of word = reason text, e.g. { pointer = \"/subtype\", says = { error_max_turns = \"stopped at its turn limit\" } }",
                ));
            }
        };
        let pointer = Pointer::from_value(value).map_err(serde::de::Error::custom)?;
        Ok(EndedSpec { pointer, says })
    }
}

/// Pointers to the values the runner reads from the agent's output.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct ResultPointers {
    /// The agent's final answer text (searched for a report when no report file exists).
    pub final_text: Option<Pointer>,
    /// The CLI's error flag or terminal error event ([`ErrorFlag`]): an error fails the
    /// attempt whatever the exit code.
    pub is_error: Option<ErrorFlag>,
    /// The CLI's own error message for a failed attempt (e.g. codex `/error/message` on a
    /// `turn.failed` line), quoted in the reason and classified by `[failure]`.
    pub error_text: Option<Pointer>,
    /// Session id, for resuming by hand.
    pub session_id: Option<Pointer>,
    /// Cost of the attempt, USD.
    pub cost_usd: Option<Pointer>,
    /// Input tokens used.
    pub input_tokens: Option<Pointer>,
    /// Output tokens used.
    pub output_tokens: Option<Pointer>,
    /// Agent turns taken.
    pub turns: Option<Pointer>,
    /// The model that answered, as the CLI reports it (the API's own word: a model pin the
    /// CLI ignored shows here).
    pub model: Option<Pointer>,
    /// How the run ended, in words for a reason ([`EndedSpec`]).
    pub ended: Option<EndedSpec>,
}

/// Environment handling for the agent process.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct EnvSpec {
    /// Variables removed from the child's environment (e.g. `CLAUDECODE`).
    #[serde(default)]
    pub unset: Vec<String>,
    /// Variables set to a per-teammate state folder (created inside the teammate folder),
    /// for CLIs whose shared state breaks under parallel runs.
    #[serde(default)]
    pub state_dirs: Vec<String>,
    /// Variables set to these values, with the argv placeholders expanded (`{workspace}`,
    /// `{report}`, `{var.NAME}`, ...; `{{` and `}}` for literal braces).
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Variables set to the path of a file holding this text (placeholders expanded as in
    /// `set`), written by the runner into the teammate folder before each attempt: for a
    /// CLI's settings that only a file can carry (Gemini CLI's and Qwen Code's
    /// `*_SYSTEM_DEFAULTS_PATH`, whose values the user's own settings still override).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// A home folder of the CLI's own for each attempt (`[env.home]`): for a CLI whose only
    /// settings file a normal user can hand it is the one in its home (Gemini CLI skips a
    /// system defaults file unless root owns it and every folder above it).
    #[serde(default)]
    pub home: Option<HomeSpec>,
}

/// `[env.home]`: the variable `var` points at a folder the runner makes in the teammate
/// folder before each attempt, whose `folder` (`.gemini`) links every entry of the user's own
/// (`<the variable's value, else HOME>/<folder>`) — logins, history, extensions — but
/// `settings`, written as the user's own settings (a JSON object) merged over `defaults`, so
/// the user's values still win; `also` names entries of the user's home linked beside it
/// (`.env`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HomeSpec {
    /// The variable the CLI reads its home from (`GEMINI_CLI_HOME`).
    pub var: String,
    /// The CLI's folder in a home (`.gemini`).
    pub folder: String,
    /// Its settings file's name in that folder (`settings.json`).
    pub settings: String,
    /// The settings under the user's own: a JSON object, placeholders expanded as in
    /// `[env] set` (`{{`/`}}` literal braces).
    pub defaults: String,
    /// Entries of the user's home itself linked into the new one (`.env`).
    #[serde(default)]
    pub also: Vec<String>,
}

/// `warm_up = { args = [...], unless = "PATH" }`: the CLI's `program` with `args`, run once
/// before a team of more than one teammate starts, in the runner's own environment and
/// folder, when `unless` (a path written as a `[sandbox] writes` entry: `~/`,
/// `{env.NAME:-DEFAULT}`) does not exist: for a CLI whose first start makes state that
/// parallel first starts race on (OpenCode's first-run database migration).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WarmUp {
    /// The program's arguments (`["session", "list"]`).
    pub args: Vec<String>,
    /// The state the warm-up makes: when it exists, there is nothing to warm up.
    #[serde(default)]
    pub unless: Option<String>,
}

/// One runner definition (`runners/<name>.toml`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct RunnerDef {
    /// What reading its file said that is not an error (keys it does not know, with their
    /// lines): shown by the command that loaded it; a run's plan carries them as warnings
    /// (`Plan::warnings`). Empty for a built-in definition.
    #[serde(skip)]
    pub warnings: Vec<String>,
    /// The store's file (`<store>/runners/NAME.toml`) this definition was read from when
    /// it replaces the built-in definition of the same name: announced on the run's first
    /// line, by `--dry-run` and by `runner runners`. `None` for a built-in, a store-only
    /// name or a `--runner-file`.
    #[serde(skip)]
    pub replaces_builtin: Option<std::path::PathBuf>,
    /// Definition name (the built-ins': the file stem), shown by `runner runners` and in
    /// messages; required and non-empty.
    #[serde(default)]
    pub name: String,
    /// One line for `runner runners`.
    #[serde(default)]
    pub description: String,
    /// `kind` as written: `process` (the default) or `http`; read into
    /// [`RunnerDef::backend`] when the definition is checked.
    #[serde(default = "default_kind", rename = "kind")]
    pub(super) kind_name: String,
    /// Which backend executes its attempts, with what only that backend reads
    /// (`crate::run::backend::for_settings` builds it once per run).
    #[serde(skip)]
    pub backend: BackendDef,
    /// Program looked up on PATH; empty for `exec` (taken from the command after `--`) and
    /// for kind `http`.
    #[serde(default)]
    pub program: String,
    /// How to install the program, shown when it is missing.
    #[serde(default)]
    pub install_hint: String,
    /// Arguments that print the version.
    #[serde(default)]
    pub version_args: Vec<String>,
    /// Which documentation/version the flags were checked against.
    #[serde(default)]
    pub checked: String,
    /// argv after the program, with placeholders (see [`RunnerDef::invocation`]).
    #[serde(default)]
    pub args: Vec<String>,
    /// Expansion of `{model_args}` when a model is given.
    #[serde(default)]
    pub model_args: Vec<String>,
    /// Expansion of `{no_git_args}` when the agent's working directory is not inside a git
    /// work tree (aider: `--no-git`, else it runs `git init` there).
    #[serde(default)]
    pub no_git_args: Vec<String>,
    /// The CLI leaves processes that keep its stdout or stderr open after it exits (a
    /// language server, a watcher): end them as soon as it exits instead of waiting the pipe
    /// wait (2 s) for its output to close.
    #[serde(default)]
    pub leaves_processes: bool,
    /// A command of the CLI run once before a team of more than one starts (`warm_up`,
    /// [`WarmUp`]).
    #[serde(default)]
    pub warm_up: Option<WarmUp>,
    /// How the prompt is passed (default `stdin`).
    #[serde(default)]
    pub prompt: PromptMode,
    /// How stdout is read (default `text`).
    #[serde(default)]
    pub output: OutputFormat,
    /// Defaults for `{var.NAME}`.
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    /// Where values are found in the output.
    #[serde(default)]
    pub result: ResultPointers,
    /// How error texts and exit codes map to failure kinds (`[failure]`).
    #[serde(default)]
    pub failure: FailureRules,
    /// Environment handling.
    #[serde(default)]
    pub env: EnvSpec,
    /// The real CLI version an end-to-end test proves this definition against; `None`: not
    /// proven against the real CLI (only against fakes of it).
    #[serde(default)]
    pub proven: Option<Proof>,
    /// What the CLI needs beyond its working directory and teammate folder under
    /// `--sandbox landlock` (`[sandbox]`).
    #[serde(default)]
    pub sandbox: SandboxSpec,
    /// `[http]` as written; moved into [`BackendDef::Http`] when the definition is checked.
    #[serde(default, rename = "http")]
    pub(super) http_table: Option<HttpSpec>,
}

/// `[sandbox]` of a runner definition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct SandboxSpec {
    /// Files and folders the CLI writes (its config, login and session state), written with a
    /// leading `~/` for HOME and `{env.NAME}` for a variable; an entry whose variable is unset
    /// or whose path does not exist is skipped.
    #[serde(default)]
    pub writes: Vec<String>,
    /// Values of `[vars]` that hand the CLI's own sandbox over to ours when the runner
    /// confines teammates (codex: `sandbox = "danger-full-access"`, since its bubblewrap
    /// cannot start inside a Landlock domain). A `--var` of the same name still wins. Each
    /// name must be one of `[vars]`.
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    /// The CLI needs a pseudo-terminal of its own (`pty = true`): only then may it open
    /// `/dev/ptmx` and write `/dev/pts` — every terminal of the user is there, and a
    /// teammate that may write them can type into them (issue 49: OSC 52 and title
    /// sequences written into the user's open terminals). No built-in definition does.
    #[serde(default)]
    pub pty: bool,
}

/// `proven = { version = "0.169.0", test = "tests/e2e/codex.rs" }`: the pinned CLI version
/// (the one `.ci/run` installs) and the test module that runs it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Proof {
    /// The CLI version, as the package registry names it (`2.1.332`).
    pub version: String,
    /// The test file, relative to the repository (`tests/e2e/claude.rs`).
    pub test: String,
}

fn default_kind() -> String {
    "process".into()
}
