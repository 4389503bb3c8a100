//! The runner definition file format (`runners/<name>.toml`) and building an attempt's argv.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use toml::de::DeTable;

use super::key_lines::KeyLines;
use crate::error::{Error, Result};
use crate::failure::FailureRules;

/// Largest prompt passed as one command-line argument (`prompt = "argument"`), in bytes.
/// Longer prompts fail the attempt with a reason instead of hitting the OS limit.
pub const MAX_PROMPT_ARG_BYTES: usize = 100 * 1024;

/// The built-in definitions, compiled in from `runners/*.toml`: `(name, toml text)`.
pub const BUILTIN: &[(&str, &str)] = &[
    ("claude", include_str!("../../runners/claude.toml")),
    ("codex", include_str!("../../runners/codex.toml")),
    ("gemini", include_str!("../../runners/gemini.toml")),
    ("qwen", include_str!("../../runners/qwen.toml")),
    ("opencode", include_str!("../../runners/opencode.toml")),
    (
        "cursor-agent",
        include_str!("../../runners/cursor-agent.toml"),
    ),
    ("amp", include_str!("../../runners/amp.toml")),
    ("copilot", include_str!("../../runners/copilot.toml")),
    ("aider", include_str!("../../runners/aider.toml")),
    ("pi", include_str!("../../runners/pi.toml")),
    ("exec", include_str!("../../runners/exec.toml")),
    ("openai", include_str!("../../runners/openai.toml")),
    ("anthropic", include_str!("../../runners/anthropic.toml")),
];

/// The order in which installed agent CLIs are picked when no runner is chosen.
pub const DETECT_ORDER: &[&str] = &[
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
];

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
        ],
    ),
    ("failure", &["exit_codes", "patterns", "ignore", "live"]),
    ("env", &["unset", "state_dirs", "set", "files"]),
];

/// The kinds of definition a backend runs (`crate::run::backend::for_settings`).
pub const KINDS: &[&str] = &["process", "http"];

/// The placeholders that stand for a whole `args` element (a list, spliced in).
const WHOLE_ELEMENT: &[&str] = &[
    "{command_args}",
    "{model_args}",
    "{no_git_args}",
    "{agent_args}",
];

/// Why `name` cannot be a variable a definition sets (`[env] set`, `[env] files`): not a
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

/// A warning for each key of `keys` that [`KNOWN_KEYS`] does not list, with its line and the
/// closest known key.
fn unknown_keys(path: &Path, keys: &KeyLines<'_>) -> Vec<String> {
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
pub enum PromptMode {
    /// `prompt.md` is the child's stdin, opened read-only (as with `< prompt.md`).
    #[default]
    Stdin,
    /// Left in `prompt.md`; the args name it with `{prompt_file}`. stdin is /dev/null.
    File,
    /// The prompt text itself is an argument (`{prompt}`), at most [`MAX_PROMPT_ARG_BYTES`].
    Argument,
}

/// How the agent's stdout is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
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
/// pointer equals its value; the last matching line wins.
///
/// Written as a string (`"/result"`) or a table (`{ pointer = "/item/text", when = { "/type"
/// = "item.completed" } }`); anything else, an unknown key in the table or a pointer without
/// its leading `/` is refused with the shapes allowed.
#[derive(Debug, Clone, PartialEq)]
pub enum Pointer {
    /// A bare pointer, e.g. `"/result"`.
    Plain(String),
    /// A pointer with conditions on the line.
    When {
        /// The pointer to read.
        pointer: String,
        /// Pointer → required value on the same line.
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

/// Pointers to the values the runner reads from the agent's output.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ResultPointers {
    /// The agent's final answer text (searched for a report when no report file exists).
    pub final_text: Option<Pointer>,
    /// A flag that, when `true`, fails the item even on exit 0.
    pub is_error: Option<Pointer>,
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
}

/// Environment handling for the agent process.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct EnvSpec {
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
}

/// One runner definition (`runners/<name>.toml`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunnerDef {
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
    kind_name: String,
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
    http_table: Option<HttpSpec>,
}

/// How a definition's attempts execute: its `kind`, carrying the configuration only that
/// kind has.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum BackendDef {
    /// `kind = "process"` (the default): the definition's program as a subprocess, from its
    /// `program`, `args`, `env`, `[result]` and `[failure]` keys.
    #[default]
    Process,
    /// `kind = "http"`: one OpenAI-compatible request per attempt, no program; where and how
    /// it sends them (`[http]`).
    Http(HttpSpec),
}

impl BackendDef {
    /// The `kind` word of the definition (`process`, `http`).
    pub fn kind(&self) -> &'static str {
        match self {
            BackendDef::Process => "process",
            BackendDef::Http(_) => "http",
        }
    }
}

/// `[http]` of a definition of kind `http` (built-in `openai`): an OpenAI-compatible
/// chat-completions API (`POST <base_url>/chat/completions`, the OpenAI API reference's
/// "Create chat completion"). Every value can be changed per run with `--var` (see
/// `crate::run::backend::http`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    /// The wire format: `openai-chat` (the default) or `anthropic-messages`.
    #[serde(default)]
    pub api: HttpApi,
    /// The API's base URL, used when the variable [`HttpSpec::base_url_env`] names is unset
    /// or empty: for `openai-chat` up to and including its version
    /// (`https://api.openai.com/v1`), for `anthropic-messages` the origin
    /// (`https://api.anthropic.com`, as `ANTHROPIC_BASE_URL` is given to the SDKs).
    pub base_url: String,
    /// The variable that overrides the base URL (`OPENAI_BASE_URL`, as the OpenAI SDKs read
    /// it); empty for none.
    #[serde(default)]
    pub base_url_env: String,
    /// The variable holding the API key, sent as `Authorization: Bearer <key>`
    /// (`OPENAI_API_KEY`); empty for none.
    #[serde(default)]
    pub key_env: String,
    /// The model when `--model` is not given; empty: `--model` is required.
    #[serde(default)]
    pub model: String,
    /// Price of input (prompt) tokens, USD per million; 0: unknown (no cost is computed).
    #[serde(default)]
    pub input_usd_per_mtok: f64,
    /// Price of output (completion) tokens, USD per million; 0: unknown.
    #[serde(default)]
    pub output_usd_per_mtok: f64,
    /// Extra request headers (name → value).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Extra fields of the request body (e.g. `temperature = 0`), merged over the runner's.
    #[serde(default)]
    pub body: BTreeMap<String, toml::Value>,
}

/// The wire format of a `kind = "http"` runner definition (`[http] api`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HttpApi {
    /// OpenAI's "Create chat completion" (`POST <base>/chat/completions`, bearer key),
    /// which most servers speak.
    #[default]
    OpenaiChat,
    /// Anthropic's Messages API (`POST <base>/v1/messages`, `x-api-key`), the report as a
    /// forced tool call ([`crate::run::backend::http`]'s `anthropic` module).
    AnthropicMessages,
}

/// `[sandbox]` of a runner definition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct SandboxSpec {
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
}

/// `proven = { version = "0.169.0", test = "tests/e2e/codex.rs" }`: the pinned CLI version
/// (the one `.ci/run` installs) and the test module that runs it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proof {
    /// The CLI version, as the package registry names it (`2.1.332`).
    pub version: String,
    /// The test file, relative to the repository (`tests/e2e/claude.rs`).
    pub test: String,
}

fn default_kind() -> String {
    "process".into()
}

/// The per-attempt values placeholders expand to.
#[derive(Debug, Clone)]
pub struct AttemptArgs<'a> {
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
pub struct Invocation {
    /// The program (name looked up on PATH, or a path).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Whether the prompt is written to stdin (else stdin is /dev/null).
    pub prompt_on_stdin: bool,
    /// Variables to remove from the environment.
    pub env_unset: Vec<String>,
    /// Variables to set; state folders are relative names resolved by the run layer.
    pub env_set: Vec<(String, String)>,
    /// Variables to point at per-teammate state folders.
    pub state_dirs: Vec<String>,
    /// Variables to point at a file the runner writes with this text (`[env] files`).
    pub env_files: Vec<(String, String)>,
}

impl Invocation {
    /// Whether the argv or the environment names `path` (the prompt file: the agent then
    /// reads it by its name, so it must be written before the agent starts).
    pub fn names(&self, path: &Path) -> bool {
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
    /// Parse a definition from TOML text; `path` is for messages.
    ///
    /// Errors: invalid TOML, a missing or mistyped key, a placeholder that does not exist —
    /// each naming the file, line and key.
    pub fn parse(path: &Path, text: &str) -> Result<RunnerDef> {
        Self::parse_with_warnings(path, text).map(|(def, _)| def)
    }

    /// Like [`RunnerDef::parse`], also returning a warning per unknown key or table (ignored,
    /// as a newer definition file may carry keys this runner does not know), each naming its
    /// line and the closest known key.
    pub fn parse_with_warnings(path: &Path, text: &str) -> Result<(RunnerDef, Vec<String>)> {
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

    /// The rules serde cannot express — a name, a known kind, placeholders that expand (each
    /// checked where it is written), a program, a prompt the agent is told about — and the
    /// `kind` and `[http]` as written read into [`RunnerDef::backend`].
    fn check(&mut self, path: &Path, keys: &KeyLines<'_>) -> Result<()> {
        let at = |key: &str, message: String| Error::input_at(path, keys.line(key), message);
        if self.name.trim().is_empty() {
            return Err(at(
                "name",
                "`name` is required and must not be empty: add `name = \"mine\"` (the name \
                 `runner runners` and messages show)"
                    .into(),
            ));
        }
        match (self.kind_name.as_str(), self.http_table.take()) {
            ("process", _) => self.backend = BackendDef::Process,
            ("http", Some(http)) => {
                self.backend = BackendDef::Http(http);
                return Ok(());
            }
            ("http", None) => {
                return Err(at(
                    "kind",
                    "kind `http` needs an `[http]` table with at least `base_url`".into(),
                ));
            }
            (other, _) => {
                return Err(at(
                    "kind",
                    format!(
                        "unknown kind `{other}`{} (known: {})",
                        crate::suggest::did_you_mean(other, KINDS.iter().copied()),
                        KINDS.join(", ")
                    ),
                ));
            }
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
            );
        for (key, template) in templates {
            self.expand(template, &sample).map_err(|e| {
                at(
                    &key,
                    format!("invalid runner definition (key `{key}`): {e}"),
                )
            })?;
        }
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

    /// Expand the argv for one attempt. Whole-element expansions: `{command_args}` (exec: the
    /// program and its arguments), `{model_args}` (nothing without a model), `{agent_args}`.
    /// In-string placeholders: `{prompt_file}`, `{report}`, `{workspace}`, `{model}`,
    /// `{prompt}`, `{var.NAME}`.
    ///
    /// Errors: an unknown placeholder or var, `{command_args}` without a command, a prompt
    /// argument over [`MAX_PROMPT_ARG_BYTES`].
    pub fn invocation(&self, a: &AttemptArgs<'_>) -> Result<Invocation> {
        self.expand_argv(a).map_err(|e| {
            Error::Usage(if self.name.is_empty() {
                e
            } else {
                format!("runner `{}`: {e}", self.name)
            })
        })
    }

    /// Whether the agent has no tools of its own (kind `http`): its answer is its report,
    /// it reads no files and keeps no working context, so the prompt says so.
    pub fn answers_only(&self) -> bool {
        matches!(self.backend, BackendDef::Http(_))
    }

    fn expand_argv(&self, a: &AttemptArgs<'_>) -> std::result::Result<Invocation, String> {
        if let BackendDef::Http(_) = self.backend {
            // An HTTP attempt starts no program: nothing to expand.
            return Ok(Invocation {
                program: String::new(),
                args: Vec::new(),
                prompt_on_stdin: false,
                env_unset: Vec::new(),
                env_set: Vec::new(),
                state_dirs: Vec::new(),
                env_files: Vec::new(),
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
        Ok(Invocation {
            program,
            args,
            prompt_on_stdin: self.prompt == PromptMode::Stdin,
            env_unset: self.env.unset.clone(),
            env_set,
            state_dirs: self.env.state_dirs.clone(),
            env_files,
        })
    }

    fn expand(&self, template: &str, a: &AttemptArgs<'_>) -> std::result::Result<String, String> {
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

/// Where the store's definition `name` is (it need not exist): `<store>/runners/<name>.toml`.
pub fn store_file(store: &Path, name: &str) -> PathBuf {
    store.join("runners").join(format!("{name}.toml"))
}

/// The names of the definitions in `<store>/runners/` that are not built in (file stems of
/// its `*.toml` files), sorted; none when the folder does not exist.
///
/// Errors: a folder that exists but cannot be read (exit 2).
pub fn store_only(store: &Path) -> Result<Vec<String>> {
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
/// if it exists, else the built-in one.
///
/// Errors: an unknown name (lists the known ones), an unreadable or invalid file.
pub fn load(name: &str, store: Option<&Path>, runner_file: Option<&Path>) -> Result<RunnerDef> {
    let from_file = |path: &Path| -> Result<RunnerDef> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::read_input("the runner definition", path, e))?;
        let (def, warnings) = RunnerDef::parse_with_warnings(path, &text)?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        Ok(def)
    };
    if let Some(file) = runner_file {
        return from_file(file);
    }
    if let Some(p) = store.map(|s| store_file(s, name)).filter(|p| p.is_file()) {
        return from_file(&p);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `proven` must name the version `.ci/run` installs for the end-to-end tests, and a test
    /// file that exists; every CLI `.ci/run` installs has a definition that says so.
    #[test]
    fn proven_versions_are_the_ones_ci_installs() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let ci = std::fs::read_to_string(root.join(".ci/run")).expect(".ci/run");
        let pinned: BTreeMap<&str, &str> = ci
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                matches!(w.next(), Some("e2e_npm" | "e2e_pip"))
                    .then(|| Some((w.next()?, w.nth(1)?)))
                    .flatten()
            })
            .collect();
        assert!(pinned.contains_key("claude"), "{pinned:?}");
        for (name, text) in BUILTIN {
            let (def, warnings) =
                RunnerDef::parse_with_warnings(Path::new(name), text).expect("built-in parses");
            assert!(warnings.is_empty(), "{name}: {warnings:?}");
            match (&def.proven, pinned.get(name)) {
                (Some(p), Some(v)) => {
                    assert_eq!(&p.version, v, "{name}: proven vs .ci/run");
                    assert!(root.join(&p.test).is_file(), "{name}: {} exists", p.test);
                }
                (None, None) => {}
                (p, v) => panic!("{name}: proven {p:?} but .ci/run pins {v:?}"),
            }
        }
    }

    #[test]
    fn an_unknown_runner_names_the_built_in_ones_and_the_closest() {
        let e = load("claud", None, None).expect_err("unknown").to_string();
        assert!(
            e.contains("unknown runner `claud`; did you mean `claude`?"),
            "{e}"
        );
        assert!(e.contains("codex"), "{e}");
    }

    fn args<'a>(command: &'a [String], vars: &'a BTreeMap<String, String>) -> AttemptArgs<'a> {
        AttemptArgs {
            prompt_file: Path::new("/t/prompt.md"),
            report: Path::new("/t/report.json"),
            workspace: Path::new("/t"),
            prompt: "do it",
            model: None,
            agent_args: &[],
            command,
            vars,
            in_git_work_tree: true,
        }
    }

    #[test]
    fn every_builtin_parses() {
        for (name, _) in BUILTIN {
            let def = load(name, None, None).expect("builtin parses");
            assert_eq!(&def.name, name);
        }
    }

    /// The prompt file is written before the agent starts only when it reads it by name.
    #[test]
    fn an_invocation_says_whether_it_names_the_prompt_file() {
        let vars = BTreeMap::new();
        let cmd = vec!["agent".to_string()];
        let names = |def: &RunnerDef| {
            def.invocation(&args(&cmd, &vars))
                .expect("inv")
                .names(Path::new("/t/prompt.md"))
        };
        let parsed = |toml: &str| RunnerDef::parse(Path::new("x.toml"), toml).expect("parses");
        assert!(!names(&load("exec", None, None).expect("exec")));
        assert!(names(&parsed(
            "name='x'\nprogram='x'\nargs=['--message-file={prompt_file}']\nprompt='file'\n"
        )));
        assert!(names(&parsed(
            "name='x'\nprogram='x'\nargs=[]\n[env]\nset={P='{prompt_file}'}\n"
        )));
    }

    #[test]
    fn exec_runs_the_command_with_prompt_on_stdin() {
        let def = load("exec", None, None).expect("exec");
        let cmd = vec!["python3".to_string(), "a.py".to_string(), "{x}".to_string()];
        let vars = BTreeMap::new();
        let inv = def.invocation(&args(&cmd, &vars)).expect("expands");
        assert_eq!(inv.program, "python3");
        assert_eq!(inv.args, vec!["a.py", "{x}"]);
        assert!(inv.prompt_on_stdin);
        assert!(def.invocation(&args(&[], &vars)).is_err());
    }

    #[test]
    fn placeholders_vars_and_model() {
        let def = RunnerDef::parse(
            Path::new("x.toml"),
            "name='x'\nprogram='x'\nargs=['-p','--mode','{var.mode}','{model_args}','--out={report}']\n\
             model_args=['--model','{model}']\nprompt='stdin'\noutput='json'\n[vars]\nmode='safe'\n",
        )
        .expect("valid");
        let vars = BTreeMap::new();
        let mut a = args(&[], &vars);
        assert_eq!(
            def.invocation(&a).expect("ok").args,
            vec!["-p", "--mode", "safe", "--out=/t/report.json"]
        );
        a.model = Some("m1");
        let over = BTreeMap::from([("mode".to_string(), "wide".to_string())]);
        a.vars = &over;
        assert_eq!(
            def.invocation(&a).expect("ok").args,
            vec![
                "-p",
                "--mode",
                "wide",
                "--model",
                "m1",
                "--out=/t/report.json"
            ]
        );
    }

    #[test]
    fn env_values_expand_placeholders_and_double_braces_are_literal() {
        let def = RunnerDef::parse(
            Path::new("x.toml"),
            "name='x'\nprogram='x'\nargs=['a}b', '{{x}}']\nprompt='stdin'\noutput='jsonl'\n\
             [env]\nset = { P = '{{\"dir\":{{\"{workspace}/*\":\"allow\"}}}}', Q = 'fixed' }\n",
        )
        .expect("valid");
        let vars = BTreeMap::new();
        let inv = def.invocation(&args(&[], &vars)).expect("ok");
        assert_eq!(inv.args, vec!["a}b", "{x}"]);
        assert_eq!(
            inv.env_set,
            vec![
                ("P".to_string(), r#"{"dir":{"/t/*":"allow"}}"#.to_string()),
                ("Q".to_string(), "fixed".to_string())
            ]
        );
        let bad = RunnerDef::parse(
            Path::new("x.toml"),
            "name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\noutput='text'\n[env]\nset={P='{nope}'}\n",
        );
        assert!(
            bad.is_err(),
            "an unknown placeholder in [env] set is refused"
        );
    }

    #[test]
    fn no_git_args_only_outside_a_git_work_tree() {
        let def = RunnerDef::parse(
            Path::new("x.toml"),
            "name='x'\nprogram='x'\nargs=['-y','{no_git_args}','{agent_args}']\n\
             no_git_args=['--no-git']\nprompt='stdin'\noutput='text'\n",
        )
        .expect("valid");
        let vars = BTreeMap::new();
        let mut a = args(&[], &vars);
        assert_eq!(def.invocation(&a).expect("ok").args, vec!["-y"]);
        a.in_git_work_tree = false;
        assert_eq!(def.invocation(&a).expect("ok").args, vec!["-y", "--no-git"]);
    }

    /// The message `text` (as `r.toml`) is refused with.
    fn refused(text: &str) -> String {
        RunnerDef::parse(Path::new("r.toml"), text)
            .expect_err("refused")
            .to_string()
    }

    const HEAD: &str = "name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\noutput='json'\n";

    #[test]
    fn invalid_definitions_name_file_and_key() {
        let (_, warnings) = RunnerDef::parse_with_warnings(
            Path::new("r.toml"),
            "name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\noutput='text'\nbogus=1\n[result]\nfinal='/x'\n",
        )
        .expect("unknown keys only warn");
        assert_eq!(
            warnings,
            vec![
                "r.toml:6: unknown key `bogus` ignored",
                "r.toml:8: unknown key `result.final` ignored; did you mean `final_text`?"
            ]
        );
        let e = refused("name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\noutput=3\n");
        assert!(e.starts_with("r.toml:5:") && e.contains("`output`"), "{e}");
        let e = refused("name='x'\nprogram='x'\nargs=['-p',\n '{nope}']\nprompt='stdin'\n");
        assert!(
            e.starts_with("r.toml:4:") && e.contains("`args[1]`") && e.contains("{nope}"),
            "{e}"
        );
        let e = refused("name='x'\nprogram='x'\nargs=[]\n[env]\nset = { A = '{var.v}' }\n");
        assert!(e.starts_with("r.toml:5:") && e.contains("{var.v}"), "{e}");
    }

    /// Unknown keys and tables warn at their line with the closest known key, as BATCH.md's.
    #[test]
    fn unknown_keys_and_tables_name_their_line_and_the_closest_key() {
        let (_, warnings) = RunnerDef::parse_with_warnings(
            Path::new("r.toml"),
            &format!("{HEAD}outptu='text'\n[envv]\nunset=[]\n[result]\nturnz='/t'\n"),
        )
        .expect("unknown keys only warn");
        assert_eq!(
            warnings,
            vec![
                "r.toml:7: unknown key `envv` ignored; did you mean `env`?",
                "r.toml:6: unknown key `outptu` ignored; did you mean `output`?",
                "r.toml:10: unknown key `result.turnz` ignored; did you mean `turns`?",
            ]
        );
    }

    /// `text` (as `r.toml`) is refused with a message starting with `at` (file and line) and
    /// holding each of `parts`.
    fn assert_refused(text: &str, at: &str, parts: &[&str]) {
        let e = refused(text);
        assert!(e.starts_with(at), "{e}\nshould start with {at:?}");
        for part in parts {
            assert!(e.contains(part), "{e}\nlacks {part:?}");
        }
    }

    /// A pointer without its leading `/` never matches anything (the cost column stayed
    /// empty and `--max-cost-usd` never fired): refused at its line with the fix.
    #[test]
    fn a_pointer_must_start_with_a_slash() {
        assert_refused(
            &format!(
                "{HEAD}[result]\nturns = '/t'\n\
                 cost_usd = {{ pointer = 'cost', when = {{ '/type' = 'result' }} }}\n"
            ),
            "r.toml:8:",
            &[
                "`result.cost_usd`",
                "`cost` is not a JSON pointer",
                "\"/cost\"",
            ],
        );
        assert_refused(
            &format!("{HEAD}[result]\ncost_usd = 'usage.cost'\n"),
            "r.toml:7:",
            &["\"/usage/cost\""],
        );
        assert_refused(
            &format!("{HEAD}[result]\nturns = {{ pointer = '/t', when = {{ type = 'x' }} }}\n"),
            "r.toml:7:",
            &["`type` is not a JSON pointer"],
        );
        // The empty pointer is the whole object; `/a/b` is a pointer.
        RunnerDef::parse(
            Path::new("r.toml"),
            &format!("{HEAD}[result]\nfinal_text = ''\nturns = '/a/b'\n"),
        )
        .expect("valid pointers");
    }

    /// A mistyped pointer table says which key and what shapes are allowed (it said "data
    /// did not match any variant of untagged enum Pointer").
    #[test]
    fn a_bad_pointer_names_its_key_and_the_shapes_allowed() {
        assert_refused(
            &format!("{HEAD}[result]\nfinal_text = {{ pointr = '/r' }}\n"),
            "r.toml:7:",
            &[
                "`result.final_text`",
                "unknown key `pointr` in a pointer table; did you mean `pointer`?",
                "{ pointer = \"/item/text\", when =",
            ],
        );
        let turns = |v: &str| format!("{HEAD}[result]\nturns = {v}\n");
        assert_refused(&turns("3"), "r.toml:7:", &["a JSON pointer such as"]);
        assert_refused(&turns("{ when = {} }"), "r.toml:7:", &["needs `pointer`"]);
    }

    /// `prompt = "file"` without `{prompt_file}` would start the agent without its prompt.
    #[test]
    fn a_prompt_file_the_args_never_name_is_refused() {
        assert_refused(
            "name='x'\nprogram='x'\nargs=['--yes']\nprompt='file'\n",
            "r.toml:4:",
            &["add `{prompt_file}`"],
        );
        for ok in [
            "name='x'\nprogram='x'\nargs=['--file={prompt_file}']\nprompt='file'\n",
            "name='x'\nprogram='x'\nargs=[]\nprompt='file'\n[env]\nset={P='{prompt_file}'}\n",
            // The other modes always deliver it: stdin, or the last argument.
            "name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\n",
            "name='x'\nprogram='x'\nargs=[]\nprompt='argument'\n",
        ] {
            RunnerDef::parse(Path::new("r.toml"), ok).expect(ok);
        }
    }

    #[test]
    fn an_unknown_kind_names_its_line_and_the_closest() {
        assert_refused(
            "name='x'\nkind = 'htp'\n",
            "r.toml:2:",
            &["unknown kind `htp`; did you mean `http`? (known: process, http)"],
        );
    }

    /// `[env] set` and `[env] files` take variable names, never the runner's own, and two
    /// files never share one path; a file's text expands like `set`.
    #[test]
    fn env_variables_must_be_names_the_runner_does_not_set() {
        for (body, says) in [
            ("files = { 'A/B' = 'x' }", "`env.files.A/B`"),
            ("set = { '1X' = 'x' }", "is not a variable name"),
            ("set = { RUNNER_REPORT = 'x' }", "set by the runner"),
            ("files = { TMPDIR = 'x' }", "set by the runner"),
            ("files = { CFG = 'a', cfg = 'b' }", "only in case"),
            ("files = { CFG = '{var.nope}' }", "`env.files.CFG`"),
        ] {
            let e = refused(&format!("{HEAD}[env]\n{body}\n"));
            assert!(e.contains(says) && e.contains("r.toml:7"), "{body}: {e}");
        }
        let def = RunnerDef::parse(
            Path::new("r.toml"),
            &format!(
                "{HEAD}[vars]\nn = '2'\n[env]\nfiles = {{ CFG = '{{{{\"n\":{{var.n}}}}}}' }}\n"
            ),
        )
        .expect("valid");
        assert_eq!(def.env.files["CFG"], "{{\"n\":{var.n}}}");
    }

    /// `[failure]` entries are refused at their own line, under their own key.
    #[test]
    fn failure_entries_are_refused_at_their_own_line() {
        let pattern = |p: &str| {
            format!(
                "{HEAD}[failure]\nignore = ['ok']\npatterns = [\n  \
                 {{ kind = 'quota', regex = 'q' }},\n  {p},\n]\n"
            )
        };
        assert_refused(
            &pattern("{ kind = 'auth', regex = '(' }"),
            "r.toml:10:",
            &["`failure.patterns[1].regex`", "invalid regex"],
        );
        assert_refused(
            &pattern("{ kind = 'nope', regex = 'x' }"),
            "r.toml:10:",
            &["`failure.patterns[1].kind`"],
        );
        let failure = |t: &str| format!("{HEAD}[failure]\n{t}\n");
        assert_refused(
            &failure("ignore = ['a',\n '[']"),
            "r.toml:8:",
            &["`failure.ignore[1]`"],
        );
        assert_refused(
            &failure("\nexit_codes = { x = 'auth' }"),
            "r.toml:8:",
            &["`failure.exit_codes.x`"],
        );
    }

    #[test]
    fn a_name_is_required_and_not_empty() {
        let e = refused("description = 'mine'\nprogram='x'\n");
        assert!(e.starts_with("r.toml: `name` is required"), "{e}");
        let e = refused("description = 'mine'\nname = ''\nprogram='x'\n");
        assert!(
            e.starts_with("r.toml:2: `name` is required and must not be empty"),
            "{e}"
        );
    }

    #[test]
    fn huge_prompt_argument_is_refused() {
        let def = RunnerDef::parse(
            Path::new("x.toml"),
            "name='x'\nprogram='x'\nargs=['{prompt}']\nprompt='argument'\noutput='text'\n",
        )
        .expect("valid");
        let vars = BTreeMap::new();
        let big = "x".repeat(MAX_PROMPT_ARG_BYTES + 1);
        let mut a = args(&[], &vars);
        a.prompt = &big;
        assert!(
            def.invocation(&a)
                .expect_err("too big")
                .to_string()
                .contains("limit")
        );
    }
}
