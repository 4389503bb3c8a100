//! Which backend executes a definition's attempts: its `kind` as a [`BackendDef`], carrying
//! what only that backend reads — for kind `http` the `[http]` table ([`HttpSpec`]) and its
//! wire format ([`HttpApi`]).

use std::collections::BTreeMap;

use serde::Deserialize;

/// The kinds of definition a backend runs (`crate::run::backend::for_settings`).
pub(crate) const KINDS: &[&str] = &["process", "http"];

/// How a definition's attempts execute: its `kind`, carrying the configuration only that
/// kind has.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum BackendDef {
    /// `kind = "process"` (the default): the definition's program as a subprocess, from its
    /// `program`, `args`, `env`, `[result]` and `[failure]` keys.
    #[default]
    Process,
    /// `kind = "http"`: one model API request per attempt, no program; where and how it
    /// sends them (`[http]`, its wire format `[http] api`).
    Http(HttpSpec),
}

impl BackendDef {
    /// The backend of a definition from its `kind` and `[http]` table as written.
    ///
    /// Errors (the message; the caller names the file and line of `kind`): an unknown kind
    /// (with the closest known one), kind `http` without `[http]`.
    pub(crate) fn from_written(kind: &str, http: Option<HttpSpec>) -> Result<BackendDef, String> {
        match (kind, http) {
            ("process", _) => Ok(BackendDef::Process),
            ("http", Some(http)) => Ok(BackendDef::Http(http)),
            ("http", None) => {
                Err("kind `http` needs an `[http]` table with at least `base_url`".into())
            }
            (other, _) => Err(format!(
                "unknown kind `{other}`{} (known: {})",
                crate::suggest::did_you_mean(other, KINDS.iter().copied()),
                KINDS.join(", ")
            )),
        }
    }

    /// Whether an attempt starts the definition's program (its argv, environment, program
    /// check and `--model` placement apply); else it sends a request and starts nothing.
    pub(crate) fn runs_a_program(&self) -> bool {
        match self {
            BackendDef::Process => true,
            BackendDef::Http(_) => false,
        }
    }

    /// Whether the agent has no tools of its own: its answer is its report, it reads no
    /// files and keeps no working context (kind `http`).
    pub(crate) fn answers_only(&self) -> bool {
        match self {
            BackendDef::Process => false,
            BackendDef::Http(_) => true,
        }
    }

    /// `[http]` of a kind `http` definition; `None` for any other kind.
    pub(crate) fn http(&self) -> Option<&HttpSpec> {
        match self {
            BackendDef::Process => None,
            BackendDef::Http(spec) => Some(spec),
        }
    }
}

/// `[http]` of a definition of kind `http` (built-ins `openai`, `anthropic`, `gemini-api`):
/// where requests go, the key, the model, prices, extra headers and body fields. What a
/// request looks like is its wire format ([`HttpApi`]). Every value can be changed per run
/// with `--var` (see `crate::run::backend::http`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HttpSpec {
    /// The wire format: `openai-chat` (the default), `anthropic-messages` or
    /// `gemini-generate-content`.
    #[serde(default)]
    pub api: HttpApi,
    /// The API's base URL, used when the variable [`HttpSpec::base_url_env`] names is unset
    /// or empty: for `openai-chat` up to and including its version
    /// (`https://api.openai.com/v1`), for `anthropic-messages` the origin
    /// (`https://api.anthropic.com`, as `ANTHROPIC_BASE_URL` is given to the SDKs), for
    /// `gemini-generate-content` the origin (`https://generativelanguage.googleapis.com`).
    pub base_url: String,
    /// The variable that overrides the base URL (`OPENAI_BASE_URL`, as the OpenAI SDKs read
    /// it); empty for none.
    #[serde(default)]
    pub base_url_env: String,
    /// The variable holding the API key (`OPENAI_API_KEY`), sent in the header its wire
    /// format names (`Authorization: Bearer <key>`, `x-api-key`, `x-goog-api-key`); empty
    /// for none.
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

/// The wire format of a `kind = "http"` runner definition (`[http] api`); each is one file
/// of `crate::run::backend::http`, chosen in its `wire::for_api`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum HttpApi {
    /// OpenAI's "Create chat completion" (`POST <base>/chat/completions`, bearer key),
    /// which most servers speak.
    #[default]
    OpenaiChat,
    /// Anthropic's Messages API (`POST <base>/v1/messages`, `x-api-key`), the report as a
    /// forced tool call.
    AnthropicMessages,
    /// Google's Gemini API `generateContent` (`POST <base>/v1beta/models/<model>:generateContent`,
    /// `x-goog-api-key`), the report as structured output (`generationConfig`).
    GeminiGenerateContent,
}
