//! Flags + files + defaults → one validated [`Settings`], before any file is touched
//! (DESIGN §2; uv's `settings.rs` combine pattern, ripgrep's low args → high args).
//!
//! Every runner option lives in three places and is combined exactly once:
//! 1. its flag in [`crate::cli::RunArgs`];
//! 2. its key in [`FileSettings`], which BATCH.md's frontmatter and `<store>/runner.toml` both
//!    deserialize into (one serde struct, one set of value rules and messages);
//! 3. its resolved field in [`Settings`], set by one line of [`Settings::resolve`]:
//!    flag, else file, else built-in default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::agent::{RunnerDef, definition};
use crate::cli::RunArgs;
use crate::error::{Error, Result};
use crate::options::Format;
use crate::options::limits::{DEFAULT_RATE_LIMIT_WAIT, Limits, MaxFail};
use crate::options::selection::{Only, Shard};
use crate::report::ItemStatus;

/// Default time limit of one attempt.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long the runner waits for a finished child's pipes to close before ending its group.
pub const PIPE_WAIT: Duration = Duration::from_secs(2);

/// The runner options a file may set, below the flags: BATCH.md's frontmatter (seed
/// `taskmaster-protocol.md`) and `<store>/runner.toml` share these keys and their rules.
/// Unknown keys are refused by `runner.toml` and warned about (and ignored) by BATCH.md.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    /// `runner`: a runner definition name.
    #[serde(default, deserialize_with = "text")]
    pub runner: Option<String>,
    /// `command`: the program of the `exec` runner and its arguments (a list, or one
    /// command line split as a shell would).
    #[serde(default, deserialize_with = "argv")]
    pub command: Option<Vec<String>>,
    /// `max_workers`: teammates at once (≥ 1).
    #[serde(default, deserialize_with = "at_least_one")]
    pub max_workers: Option<u64>,
    /// `max_runtime_seconds`: time limit of one attempt, seconds (≥ 1).
    #[serde(default, deserialize_with = "at_least_one")]
    pub max_runtime_seconds: Option<u64>,
    /// `retries`: extra attempts after a failed or timed-out one.
    #[serde(default, deserialize_with = "at_least_zero")]
    pub retries: Option<u64>,
    /// `verify`: a command line that must exit 0 for an item to complete.
    #[serde(default, deserialize_with = "text")]
    pub verify: Option<String>,
    /// `model`: passed to the agent CLI.
    #[serde(default, deserialize_with = "text")]
    pub model: Option<String>,
    /// `isolate`: `none` or `worktree`.
    #[serde(default, deserialize_with = "isolate_text")]
    pub isolate: Option<String>,
    /// `worktree`: `copy` (ignored files copied into each worktree) and `setup` (a command
    /// line run once in each new worktree).
    #[serde(default)]
    pub worktree: Option<WorktreeSettings>,
    /// `keep_formulas`: write agents' values into output CSVs as they are, even those a
    /// spreadsheet would run as formulas.
    #[serde(default)]
    pub keep_formulas: Option<bool>,
    /// `keep_logs`: completed items keep their teammate folders (see `--keep-logs`).
    #[serde(default)]
    pub keep_logs: Option<bool>,
    /// `sandbox`: `auto`, `none` or `landlock` (see `--sandbox`).
    #[serde(default, deserialize_with = "sandbox_text")]
    pub sandbox: Option<String>,
    /// `rate_limit_wait`: longest an item waits in total for rate limits (`90s`, `1h`, or
    /// seconds).
    #[serde(default, deserialize_with = "duration_text")]
    pub rate_limit_wait: Option<String>,
    /// `max_cost_usd`: the batch's budget in US dollars (> 0).
    #[serde(default, deserialize_with = "usd")]
    pub max_cost_usd: Option<f64>,
    /// `max_fail`: `N` or `N:immediate` (see `--max-fail`).
    #[serde(default, deserialize_with = "max_fail_text")]
    pub max_fail: Option<String>,
}

/// A text value that `valid` accepts; else the error says `rule` (the file and line are
/// added by the caller, as for every key).
fn checked_text<'de, D: Deserializer<'de>>(
    d: D,
    valid: impl Fn(&str) -> bool,
    rule: &str,
) -> std::result::Result<Option<String>, D::Error> {
    // A value of the wrong type (`isolate: yes` is a YAML boolean) gets the same rule.
    let v = text(d).map_err(|_: D::Error| serde::de::Error::custom(rule))?;
    match v {
        Some(t) if !valid(&t) => Err(serde::de::Error::custom(rule)),
        other => Ok(other),
    }
}

fn sandbox_text<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    checked_text(
        d,
        |t| crate::sandbox::Mode::parse(t).is_ok(),
        "must be auto, none or landlock",
    )
}

fn isolate_text<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    checked_text(
        d,
        |t| matches!(t, "none" | "worktree"),
        "must be none or worktree",
    )
}

fn duration_text<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    checked_text(
        d,
        |t| parse_duration("", t).is_ok(),
        "must be a duration such as 90s, 10m or 1h (at most 365d)",
    )
}

fn max_fail_text<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    checked_text(
        d,
        |t| parse_max_fail(t).is_ok(),
        "must be a whole number ≥ 1, optionally followed by :immediate (e.g. 3 or 3:immediate)",
    )
}

fn usd<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    let amount = match Value::deserialize(d)? {
        Value::Null => return Ok(None),
        Value::Number(n) => n.as_f64(),
        // `max_cost_usd: "5"` or `"$5"`: the amount a person wrote, quoted.
        Value::String(t) => t.trim().trim_start_matches('$').trim().parse::<f64>().ok(),
        _ => None,
    };
    match amount {
        Some(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
        _ => Err(serde::de::Error::custom(
            "must be a number of US dollars above 0, e.g. 5 or 2.50",
        )),
    }
}

/// `worktree:` in BATCH.md, `[worktree]` in runner.toml.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorktreeSettings {
    /// Ignored files or folders copied into each worktree, relative to the repository root.
    #[serde(default, deserialize_with = "paths")]
    pub copy: Option<Vec<String>>,
    /// A command line run once in each new worktree, before the agent.
    #[serde(default, deserialize_with = "text")]
    pub setup: Option<String>,
}

fn text<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) if !s.trim().is_empty() => Ok(Some(s)),
        Value::Number(n) => Ok(Some(n.to_string())),
        _ => Err(serde::de::Error::custom("must be a non-empty string")),
    }
}

fn count<'de, D: Deserializer<'de>>(d: D, min: u64) -> std::result::Result<Option<u64>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Number(n) if n.as_u64().is_some_and(|v| v >= min) => Ok(n.as_u64()),
        _ => Err(serde::de::Error::custom(format!(
            "must be a whole number ≥ {min}"
        ))),
    }
}

fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    count(d, 1)
}

fn at_least_zero<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    count(d, 0)
}

fn argv<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Vec<String>>, D::Error> {
    let bad = || serde::de::Error::custom("must be a list of strings (program, then arguments)");
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Array(items) if !items.is_empty() => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                Value::Number(n) => Ok(n.to_string()),
                _ => Err(bad()),
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(Some),
        Value::String(s) => match shlex::split(&s) {
            Some(v) if !v.is_empty() => Ok(Some(v)),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

fn paths<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Vec<String>>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(serde::de::Error::custom("must be a list of paths")),
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(Some),
        _ => Err(serde::de::Error::custom("must be a list of paths")),
    }
}

/// Why a settings map did not deserialize. Keys are dotted for nested ones
/// (`worktree.copy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyProblem {
    /// The key is not a setting; `known` lists the keys allowed where it stands.
    Unknown {
        /// The key as written.
        key: String,
        /// The settings keys allowed beside it, in declaration order.
        known: Vec<String>,
    },
    /// The key's value breaks its rule.
    Invalid {
        /// The key (empty when the problem is the whole map).
        key: String,
        /// What it must be: `must be a whole number ≥ 1`.
        rule: String,
    },
}

/// The problem of a deserialization error at `path` whose own message (without any source
/// snippet) is `message`.
fn key_problem(path: &serde_path_to_error::Path, message: &str) -> KeyProblem {
    let message = message.to_owned();
    let path = path.to_string();
    let path = if path == "." { String::new() } else { path };
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let name = rest.split('`').next().unwrap_or_default();
        let known = message
            .split_once(", expected ")
            .map(|(_, e)| {
                // serde says "`a` or `b`" for two fields, "one of `a`, `b`, `c`" for more.
                e.trim_start_matches("one of ")
                    .split(", ")
                    .flat_map(|k| k.split(" or "))
                    .map(|k| k.trim_matches('`').to_owned())
                    .collect()
            })
            .unwrap_or_default();
        // The path already ends with the unknown key.
        let key = if path.is_empty() {
            name.to_owned()
        } else {
            path
        };
        return KeyProblem::Unknown { key, known };
    }
    KeyProblem::Invalid {
        key: path,
        rule: message,
    }
}

impl FileSettings {
    /// Deserialize the settings keys of a frontmatter mapping (BATCH.md). Unknown keys are
    /// dropped and returned, so the caller can warn about them.
    ///
    /// Errors: the first key whose value breaks its rule.
    pub fn from_map(
        mut map: serde_json::Map<String, Value>,
    ) -> std::result::Result<(FileSettings, Vec<KeyProblem>), KeyProblem> {
        let mut unknown = Vec::new();
        loop {
            let value = Value::Object(map.clone());
            let e = match serde_path_to_error::deserialize::<_, FileSettings>(value) {
                Ok(s) => return Ok((s, unknown)),
                Err(e) => key_problem(e.path(), &e.inner().to_string()),
            };
            let KeyProblem::Unknown { key, .. } = &e else {
                return Err(e);
            };
            let removed = match key.split_once('.') {
                None => map.remove(key).is_some(),
                // An unknown key inside a known table: drop just that key.
                Some((table, leaf)) => match map.get_mut(table) {
                    Some(Value::Object(inner)) => inner.remove(leaf).is_some(),
                    _ => false,
                },
            };
            if !removed {
                return Err(e);
            }
            unknown.push(e);
        }
    }

    /// Parse `<store>/runner.toml` text. `path` is used in messages only.
    ///
    /// Errors: exit 2 naming the file, the line and the key (unknown keys included).
    pub fn from_toml(path: &Path, text: &str) -> Result<FileSettings> {
        let line_of = |span| Error::line_of(text, span);
        let de = toml::Deserializer::parse(text)
            .map_err(|e| Error::input_at(path, line_of(e.span()), e.message()))?;
        serde_path_to_error::deserialize(de).map_err(|e| {
            let line = line_of(e.inner().span());
            let message = match key_problem(e.path(), e.inner().message()) {
                KeyProblem::Unknown { key, known } => {
                    let leaf = key.rsplit('.').next().unwrap_or_default();
                    format!(
                        "unknown key `{key}`{} (known: {})",
                        crate::suggest::did_you_mean(leaf, known.iter().map(String::as_str)),
                        known.join(", ")
                    )
                }
                KeyProblem::Invalid { key, .. } if key.is_empty() => e.inner().message().to_owned(),
                KeyProblem::Invalid { key, .. } => format!("`{key}` {}", e.inner().message()),
            };
            Error::input_at(path, line, message)
        })
    }
}

/// The validated options of a run, from flags, then a file, then defaults. Built once by
/// [`Settings::resolve`] before anything is written.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The runner definition.
    pub runner: RunnerDef,
    /// The exec command (program first); empty for runners that start their own program.
    pub command: Vec<String>,
    /// Teammates at once (≥ 1; `usize::MAX` for as many as allowed).
    pub jobs: usize,
    /// Time limit of one attempt.
    pub timeout: Option<Duration>,
    /// SIGTERM → SIGKILL grace period.
    pub grace: Duration,
    /// Extra attempts after a retried outcome.
    pub retries: u32,
    /// Statuses that are retried.
    pub retry_on: Vec<ItemStatus>,
    /// Delay before the first retry (doubled each time, with jitter).
    pub retry_delay: Duration,
    /// The verify command (argv with `{column}` placeholders).
    pub verify: Option<Vec<String>>,
    /// `--model`.
    pub model: Option<String>,
    /// `--agent-arg` values.
    pub agent_args: Vec<String>,
    /// `--var NAME=VALUE` overrides of the runner definition's variables.
    pub vars: BTreeMap<String, String>,
    /// Cap of each log file, bytes.
    pub log_cap: u64,
    /// How the run is shown.
    pub format: Format,
    /// `--isolate worktree`.
    pub isolate: bool,
    /// `--merge`: merge completed branches back.
    pub merge: bool,
    /// Ignored files copied into each worktree (relative to the repository root).
    pub worktree_copy: Vec<PathBuf>,
    /// Set-up command of each new worktree (argv).
    pub worktree_setup: Option<Vec<String>>,
    /// `--only`: which items run.
    pub only: Only,
    /// `--shard K/N` (or `auto` from `JOB_COMPLETION_INDEX`).
    pub shard: Option<Shard>,
    /// `--junit FILE`.
    pub junit: Option<PathBuf>,
    /// `--trace FILE`: Chrome trace events of the run.
    pub trace: Option<PathBuf>,
    /// `--dry-run`: show the plan, write nothing.
    pub dry_run: bool,
    /// `--batch-api`: the rows go as one OpenAI Batch API job (the HTTP backend's `batch`).
    pub batch_api: bool,
    /// `--accept-changes`: start from batch files that changed during an earlier sandboxed
    /// run ([`crate::run::record::definition`]).
    pub accept_changes: bool,
    /// The file the runner definition was read from (`--runner-file`, or
    /// `<store>/runners/NAME.toml`); `None` for a built-in one.
    pub runner_from: Option<PathBuf>,
    /// `--keep-formulas`: agents' values go into output CSVs as they are (by default a value
    /// a spreadsheet would evaluate gets a leading `'`).
    pub keep_formulas: bool,
    /// `--keep-logs`: completed items keep their teammate folders (prompt, every attempt's
    /// logs) instead of being compacted into `completed.jsonl`.
    pub keep_logs: bool,
    /// `--sandbox`: how each teammate is confined. `auto` (the default) until the plan
    /// settles it (`Plan::settle_sandbox`), which every run does before anything starts.
    pub sandbox: crate::sandbox::Mode,
    /// Why teammates run unconfined when the plan settled on none for them (`auto: this
    /// kernel has no Landlock`, `auto: the workspace lies inside …`, `no process to confine:
    /// …`), shown on the run's first line as `sandbox none (WHY)`.
    pub sandbox_why_none: Option<String>,
    /// Rate-limit wait, budget and `--max-fail` of the team's gate.
    pub limits: Limits,
}

/// What a stage, or a row's `runner_column` / `model_column`, changes of a batch's settings
/// (BATCH.md `stages:`, issue 33); everything else comes from the batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Overrides {
    /// Another runner definition, by name (as `--runner`).
    pub runner: Option<String>,
    /// Another model.
    pub model: Option<String>,
    /// The program of the `exec` runner (argv).
    pub command: Option<Vec<String>>,
    /// Another verify command (split like a shell would, never run by one).
    pub verify: Option<String>,
    /// Another time limit per attempt.
    pub timeout: Option<Duration>,
    /// Another number of retries.
    pub retries: Option<u32>,
}

impl Overrides {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Overrides::default()
    }
}

/// Parse `--max-fail` / `max_fail`: `N` or `N:immediate`, N ≥ 1.
///
/// Errors: names the flag and shows the accepted forms.
pub fn parse_max_fail(text: &str) -> Result<MaxFail> {
    let t = text.trim();
    let (n, immediate) = match t.split_once(':') {
        Some((n, "immediate")) => (n, true),
        Some(_) => ("", false),
        None => (t, false),
    };
    match n.trim().parse::<u32>() {
        Ok(count) if count >= 1 => Ok(MaxFail { count, immediate }),
        _ => Err(Error::bad_value(
            "--max-fail",
            text,
            "must be a whole number ≥ 1, optionally followed by :immediate (e.g. 3 or 3:immediate)",
        )),
    }
}

/// The longest duration a flag or key takes: a year (longer ones overflow clock arithmetic
/// and are never meant).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parse a duration flag: `90s`, `10m`, `1h`, `1h30m`, or bare seconds, at most
/// [`MAX_DURATION`].
///
/// Errors: names the flag and shows the accepted forms.
pub fn parse_duration(flag: &str, text: &str) -> Result<Duration> {
    let t = text.trim();
    let d = match t.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(t).map_err(|_| {
            Error::bad_value(flag, text, "is not a duration; write e.g. 90s, 10m or 1h")
        })?,
    };
    check_duration(flag, t, d)
}

/// `d`, unless it passes [`MAX_DURATION`]; `shown` is the value as the user wrote it.
fn check_duration(what: &str, shown: &str, d: Duration) -> Result<Duration> {
    if d > MAX_DURATION {
        return Err(Error::bad_value(
            what,
            shown,
            "is longer than a year; give at most 365d",
        ));
    }
    Ok(d)
}

fn retry_on(text: &str) -> Result<Vec<ItemStatus>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s {
            "failed" => Ok(ItemStatus::Failed),
            "timed_out" => Ok(ItemStatus::TimedOut),
            "blocked" => Ok(ItemStatus::Blocked),
            other => Err(Error::bad_value(
                "--retry-on",
                other,
                "is not one of failed, timed_out, blocked",
            )),
        })
        .collect()
}

fn parse_vars(vars: &[String]) -> Result<BTreeMap<String, String>> {
    vars.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
            _ => Err(Error::bad_value("--var", kv, "must be NAME=VALUE")),
        })
        .collect()
}

/// The shard the flags ask for: `--shard K/N`, or `--shard auto` with K from
/// `JOB_COMPLETION_INDEX` (Kubernetes Indexed Jobs) and N from `--shard-count`, else
/// `RUNNER_SHARD_COUNT` (an environment a CI job may set for all its steps, so it alone
/// asks for nothing).
///
/// Errors: a malformed or out-of-range shard; `--shard-count` without `--shard auto`, which
/// would be ignored (exit 2).
pub fn shard(flags: &RunArgs) -> Result<Option<Shard>> {
    let auto = flags.shard.as_deref().map(str::trim) == Some("auto");
    if let (Some(n), false) = (flags.shard_count, auto) {
        return Err(Error::needs(
            format!("--shard-count {n}"),
            "--shard auto",
            format!(
                "it is the number of shards of --shard auto; add --shard auto, or give the slice as --shard K/{n}"
            ),
        ));
    }
    let count = match flags.shard_count {
        Some(n) => Some(n),
        None if auto => match std::env::var("RUNNER_SHARD_COUNT") {
            Ok(v) => Some(v.trim().parse::<u32>().map_err(|_| {
                Error::bad_value("RUNNER_SHARD_COUNT", &v, "is not a whole number")
            })?),
            Err(_) => None,
        },
        None => None,
    };
    Shard::parse(
        flags.shard.as_deref(),
        count,
        std::env::var("JOB_COMPLETION_INDEX").ok().as_deref(),
    )
}

/// The time limit of an attempt with `--batch-api` when none is given: the Batch API's
/// 24-hour completion window and an hour for the upload and the download.
pub const BATCH_API_TIMEOUT: Duration = Duration::from_secs(25 * 3600);

/// `--jobs`: `N` teammates, `0` for as many as allowed (`usize::MAX`: one per item, as
/// the descriptor budget and the batch's size allow), or `P%` of the `cpus` (at least one).
///
/// Errors: anything else (exit 2, with the forms).
fn parse_jobs(text: &str, cpus: usize) -> Result<usize> {
    let t = text.trim();
    let bad = || {
        Error::bad_value(
            "--jobs",
            text,
            "must be a number, 0 for as many as allowed, or a share of the CPUs like 50%",
        )
    };
    if let Some(p) = t.strip_suffix('%') {
        let p: f64 = p.trim().parse().map_err(|_| bad())?;
        if !(p > 0.0 && p.is_finite()) {
            return Err(bad());
        }
        return Ok(((cpus as f64 * p / 100.0).floor() as usize).max(1));
    }
    match t.parse::<usize>().map_err(|_| bad())? {
        0 => Ok(usize::MAX),
        n => Ok(n),
    }
}

fn command_line(what: &str, v: &str) -> Result<Vec<String>> {
    match shlex::split(v) {
        Some(argv) if !argv.is_empty() => Ok(argv),
        _ => Err(Error::bad_value(
            what,
            v,
            "is not a command line (check its quotes)",
        )),
    }
}

/// The first agent CLI of [`definition::DETECT_ORDER`] whose program is on PATH.
///
/// Errors: [`Error::Environment`] (exit 3) listing what was looked for.
pub fn detect_runner(store: Option<&Path>) -> Result<String> {
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
fn anchor_command(command: Vec<String>) -> Vec<String> {
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
fn anchor_program(program: String) -> String {
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
    match std::path::absolute(p).map(|abs| abs.into_os_string().into_string()) {
        Ok(Ok(abs)) => abs,
        _ => arg,
    }
}

/// Whether a process definition's argv (or environment) uses `placeholder`.
fn uses_placeholder(def: &RunnerDef, placeholder: &str) -> bool {
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
fn refuse_dropped_flags(flags: &RunArgs, def: &RunnerDef) -> Result<()> {
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
pub fn check_program(program: &str, hint: &str) -> Result<PathBuf> {
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

#[cfg(test)]
impl Settings {
    /// Settings for in-process tests: `runner`, one job, a 30 s time limit, every status but
    /// `completed` retried (no retries), nothing else set.
    pub fn for_test(runner: RunnerDef) -> Settings {
        Settings {
            runner,
            command: Vec::new(),
            jobs: 1,
            timeout: Some(Duration::from_secs(30)),
            grace: Duration::from_millis(100),
            retries: 0,
            retry_on: ItemStatus::ALL
                .into_iter()
                .filter(|s| *s != ItemStatus::Completed)
                .collect(),
            retry_delay: Duration::from_millis(1),
            verify: None,
            model: None,
            agent_args: Vec::new(),
            vars: BTreeMap::new(),
            log_cap: 1024 * 1024,
            format: Format::Plain,
            isolate: false,
            merge: false,
            worktree_copy: Vec::new(),
            worktree_setup: None,
            only: Only::All,
            shard: None,
            junit: None,
            trace: None,
            dry_run: false,
            batch_api: false,
            accept_changes: false,
            runner_from: None,
            keep_formulas: false,
            keep_logs: false,
            sandbox: crate::sandbox::Mode::None,
            sandbox_why_none: None,
            limits: Default::default(),
        }
    }
}

impl Settings {
    /// Combine the flags over the file's settings over the defaults, and validate the result.
    /// `command` is what followed `--`; `store` is where user runner definitions live.
    ///
    /// Errors: bad flag or key values and definitions (exit 2), a missing program (exit 3).
    pub fn resolve(
        flags: &RunArgs,
        command: &[String],
        file: &FileSettings,
        store: Option<&Path>,
    ) -> Result<Settings> {
        let from_file = command.is_empty();
        let mut command: Vec<String> = if from_file {
            file.command.clone().unwrap_or_default()
        } else {
            command.to_vec()
        };
        let runner_name = match flags.runner.as_ref().or(file.runner.as_ref()) {
            Some(r) => r.clone(),
            None if !command.is_empty() => "exec".to_string(),
            None if flags.runner_file.is_some() => String::new(),
            None => detect_runner(store)?,
        };
        let runner = definition::load(&runner_name, store, flags.runner_file.as_deref())?;
        // The quick-start form `runner batch BATCH.md --runner claude` over a file written for
        // the exec runner: the command line's runner wins over the file's runner and command.
        let chosen_here = flags.runner.is_some() || flags.runner_file.is_some();
        if from_file
            && chosen_here
            && !command.is_empty()
            && !runner.args.iter().any(|a| a == "{command_args}")
        {
            eprintln!(
                "note: runner `{}` from the command line replaces the file's {}and its `command` ({})",
                runner.name,
                file.runner
                    .as_ref()
                    .map(|r| format!("`runner: {r}` "))
                    .unwrap_or_default(),
                command.join(" ")
            );
            command.clear();
        }
        if !command.is_empty() && !runner.args.iter().any(|a| a == "{command_args}") {
            return Err(Error::Conflict {
                flag: "a program after `--` (or BATCH.md `command`)".into(),
                other: format!("the runner `{}`", runner.name),
                why: "that runner starts its own program, and a program is only for the exec \
                      runner; drop it, or use --runner exec"
                    .into(),
            });
        }
        refuse_dropped_flags(flags, &runner)?;
        // A `model` in a file may serve other runners of the store: said, not refused.
        if let (None, Some(m)) = (&flags.model, &file.model)
            && runner.backend.runs_a_program()
            && !uses_placeholder(&runner, "{model_args}")
            && !uses_placeholder(&runner, "{model}")
        {
            eprintln!(
                "warning: `model: {m}` is not used: runner `{}` has no place for a model{}",
                runner.name,
                match runner.name == "exec" {
                    true => " (put it in the command)",
                    false => "",
                }
            );
        }
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let jobs = match &flags.jobs {
            Some(text) => parse_jobs(text, cpus)?,
            None => file.max_workers.map_or(cpus, |n| n as usize),
        };
        let timeout = match &flags.timeout {
            Some(t) => parse_duration("--timeout", t)?,
            None => {
                let secs = file
                    .max_runtime_seconds
                    .unwrap_or(DEFAULT_TIMEOUT.as_secs());
                check_duration(
                    "max_runtime_seconds",
                    &secs.to_string(),
                    Duration::from_secs(secs),
                )?
            }
        };
        if timeout.is_zero() {
            return Err(Error::bad_value(
                "--timeout",
                humantime::format_duration(timeout),
                "must be more than 0 (e.g. 90s, 10m, 1h)",
            ));
        }
        if flags.log_cap < 1024 {
            return Err(Error::bad_value(
                "--log-cap",
                flags.log_cap,
                "is too small; give at least 1024 bytes",
            ));
        }
        let isolate = match flags
            .isolate
            .as_deref()
            .or(file.isolate.as_deref())
            .map(str::trim)
        {
            None | Some("none") => false,
            Some("worktree") => true,
            Some(other) => {
                return Err(Error::bad_value(
                    "--isolate",
                    other,
                    "must be none or worktree",
                ));
            }
        };
        if flags.merge && !isolate {
            return Err(Error::needs(
                "--merge",
                "--isolate worktree",
                "it merges teammates' worktree branches",
            ));
        }
        let worktree_flag = match (flags.worktree_copy.is_empty(), &flags.worktree_setup) {
            (false, _) => Some("--worktree-copy"),
            (true, Some(_)) => Some("--worktree-setup"),
            (true, None) => None,
        };
        if let Some(flag) = worktree_flag.filter(|_| !isolate) {
            return Err(Error::needs(
                flag,
                "--isolate worktree",
                "it prepares each teammate's git worktree (without it, teammates share this \
                 working tree)",
            ));
        }
        let file_worktree = file.worktree.clone().unwrap_or_default();
        let worktree_setup = flags
            .worktree_setup
            .as_ref()
            .or(file_worktree.setup.as_ref())
            .map(|v| command_line("worktree setup", v))
            .transpose()?;
        let verify = flags
            .verify
            .as_ref()
            .or(file.verify.as_ref())
            .map(|v| command_line("--verify", v))
            .transpose()?;
        let mut settings = Settings {
            command,
            jobs,
            timeout: Some(timeout),
            grace: parse_duration("--grace", &flags.grace)?,
            retries: flags
                .retries
                .or(file.retries.map(|n| n.min(u32::MAX as u64) as u32))
                .unwrap_or(0),
            retry_on: retry_on(&flags.retry_on)?,
            retry_delay: parse_duration("--retry-delay", &flags.retry_delay)?,
            verify,
            model: flags.model.clone().or_else(|| file.model.clone()),
            agent_args: flags.agent_args.clone(),
            vars: parse_vars(&flags.vars)?,
            log_cap: flags.log_cap,
            format: flags.format,
            isolate,
            merge: flags.merge,
            worktree_copy: if flags.worktree_copy.is_empty() {
                file_worktree
                    .copy
                    .iter()
                    .flatten()
                    .map(PathBuf::from)
                    .collect()
            } else {
                flags.worktree_copy.clone()
            },
            worktree_setup,
            only: Only::parse(flags.only.as_deref())?,
            shard: shard(flags)?,
            // A shard's report carries its number, as its output does.
            junit: match (flags.junit.as_ref(), shard(flags)?) {
                (Some(j), Some(s)) => Some(crate::options::selection::shard_file(j, s.k, s.n)),
                (j, _) => j.cloned(),
            },
            trace: flags.trace.clone(),
            dry_run: flags.dry_run,
            batch_api: flags.batch_api,
            accept_changes: flags.accept_changes,
            runner_from: flags.runner_file.clone().or_else(|| {
                store
                    .map(|s| definition::store_file(s, &runner_name))
                    .filter(|p| p.is_file())
            }),
            keep_formulas: flags.keep_formulas || file.keep_formulas.unwrap_or(false),
            keep_logs: flags.keep_logs || file.keep_logs.unwrap_or(false),
            sandbox: sandbox(flags, file)?,
            sandbox_why_none: None,
            limits: limits(flags, file)?,
            runner,
        };
        if settings.batch_api {
            // One job holds every row; it may take the provider up to its 24-hour window.
            settings.jobs = usize::MAX;
            if flags.timeout.is_none() && file.max_runtime_seconds.is_none() {
                settings.timeout = Some(BATCH_API_TIMEOUT);
            }
        }
        settings.check_programs()?;
        // Checked as the user wrote it (messages name their words), run from anywhere.
        settings.command = anchor_command(std::mem::take(&mut settings.command));
        if let Some(v) = settings.verify.as_mut().and_then(|v| v.first_mut()) {
            *v = anchor_program(std::mem::take(v));
        }
        crate::fsutil::check_parents(&[
            (settings.junit.as_deref(), "--junit"),
            (settings.trace.as_deref(), "--trace"),
        ])?;
        Ok(settings)
    }

    /// These settings with `o` applied, checked as [`Settings::resolve`] checks its own (the
    /// runner definition loads, its program is installed, a verify program exists). Another
    /// runner drops the batch's `--agent-arg`s and `--var`s (they were written for its
    /// runner) and its program (only `exec` takes one; give it `command`).
    ///
    /// Errors: as [`Settings::resolve`]'s (exit 2 or 3); `exec` with no program (exit 2).
    pub fn with_overrides(&self, o: &Overrides) -> Result<Settings> {
        let mut s = self.clone();
        if let Some(name) = o.runner.as_deref().filter(|n| *n != s.runner.name) {
            s.runner = definition::load(name, None, None)?;
            s.runner_from = None;
            s.agent_args.clear();
            s.vars.clear();
            s.command.clear();
        }
        let takes_program = s.runner.args.iter().any(|a| a == "{command_args}");
        if let Some(c) = &o.command {
            if !takes_program {
                return Err(Error::Usage(format!(
                    "`command` is only for the exec runner, and this runs `{}`",
                    s.runner.name
                )));
            }
            s.command = anchor_command(c.clone());
        }
        if takes_program && s.command.is_empty() {
            return Err(Error::Usage(format!(
                "runner `{}` needs a program: give `command: [program, args…]`",
                s.runner.name
            )));
        }
        if let Some(m) = &o.model {
            // As `--model`: a runner with no place for a model is told, not ignored.
            if s.runner.backend.runs_a_program()
                && !uses_placeholder(&s.runner, "{model_args}")
                && !uses_placeholder(&s.runner, "{model}")
            {
                return Err(Error::Usage(format!(
                    "model `{m}`: runner `{}` has no place for a model (its definition uses neither {{model_args}} nor {{model}}){}",
                    s.runner.name,
                    match s.runner.name == "exec" {
                        true => "; put it in the command",
                        false => "",
                    }
                )));
            }
            s.model = Some(m.clone());
        }
        if o.timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::Usage(
                "`timeout` must be more than 0 (e.g. 90s, 10m, 1h)".into(),
            ));
        }
        if let Some(v) = &o.verify {
            let mut argv = command_line("verify", v)?;
            if let Some(p) = argv.first_mut() {
                *p = anchor_program(std::mem::take(p));
            }
            s.verify = Some(argv);
        }
        if let Some(t) = o.timeout {
            s.timeout = Some(t);
        }
        if let Some(r) = o.retries {
            s.retries = r;
        }
        if s.batch_api && s.runner.backend.runs_a_program() {
            return Err(Error::Usage(format!(
                "--batch-api sends requests, and runner `{}` is an agent CLI",
                s.runner.name
            )));
        }
        s.check_programs()?;
        Ok(s)
    }

    /// Check a process definition (expand its argv once with sample values, find its
    /// program, refuse a `--var` it never uses) and the verify command, so a bad definition
    /// or a missing program fails before anything is written, in the words the user wrote.
    /// (An `http` definition's values are checked where its one client is built,
    /// `crate::run::backend::for_settings`.)
    fn check_programs(&self) -> Result<()> {
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

/// `--sandbox`, else `sandbox`, else auto; landlock only on a kernel that has it.
///
/// Errors: an unknown mode (exit 2); landlock on a kernel without it or with too old an ABI
/// (exit 3).
fn sandbox(flags: &RunArgs, file: &FileSettings) -> Result<crate::sandbox::Mode> {
    use crate::sandbox::{Mode, check_abi, kernel_abi};
    let mode = match flags.sandbox.as_deref().or(file.sandbox.as_deref()) {
        Some(text) => Mode::parse(text)?,
        None => Mode::Auto,
    };
    if mode == Mode::Landlock {
        check_abi(kernel_abi())?;
    }
    Ok(mode)
}

fn limits(flags: &RunArgs, file: &FileSettings) -> Result<Limits> {
    let rate_limit_wait = match (&flags.rate_limit_wait, &file.rate_limit_wait) {
        (Some(t), _) => parse_duration("--rate-limit-wait", t)?,
        (None, Some(t)) => parse_duration("rate_limit_wait", t)?,
        (None, None) => DEFAULT_RATE_LIMIT_WAIT,
    };
    let max_cost_usd = match flags.max_cost_usd {
        Some(v) if !(v.is_finite() && v > 0.0) => {
            return Err(Error::bad_value(
                "--max-cost-usd",
                v,
                "must be a number of US dollars above 0, e.g. 5 or 2.50",
            ));
        }
        Some(v) => Some(v),
        None => file.max_cost_usd,
    };
    let max_fail = flags
        .max_fail
        .as_deref()
        .or(file.max_fail.as_deref())
        .map(parse_max_fail)
        .transpose()?;
    Ok(Limits {
        rate_limit_wait,
        max_cost_usd,
        max_fail,
    })
}

/// Load and compile a JSON Schema given inline or as a file.
///
/// Errors: an unreadable file, invalid JSON, or an invalid schema (exit 2, naming the file).
pub fn load_schema(
    value: Option<Value>,
    path: Option<&Path>,
) -> Result<Option<(Value, jsonschema::Validator)>> {
    let (schema, origin) = match (value, path) {
        (Some(v), _) => (v, "output_schema".to_string()),
        (None, Some(p)) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Error::read_input("the output schema", p, e))?;
            let v: Value = serde_json::from_str(&text).map_err(|e| {
                Error::input_at(
                    p,
                    Some(e.line() as u64),
                    format!("the output schema is not valid JSON: {e}"),
                )
            })?;
            (v, p.display().to_string())
        }
        (None, None) => return Ok(None),
    };
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| Error::Usage(format!("{origin}: not a valid JSON Schema: {e}")))?;
    Ok(Some((schema, validator)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(yaml: &str) -> serde_json::Map<String, Value> {
        serde_saphyr::from_str(yaml).expect("yaml")
    }

    #[test]
    fn jobs_take_a_number_zero_for_all_or_a_share_of_the_cpus() {
        assert_eq!(parse_jobs("8", 4).expect("n"), 8);
        assert_eq!(parse_jobs("0", 4).expect("all"), usize::MAX);
        assert_eq!(parse_jobs("50%", 4).expect("half"), 2);
        assert_eq!(parse_jobs("10%", 4).expect("at least one"), 1);
        assert_eq!(parse_jobs("200%", 2).expect("double"), 4);
        for bad in ["-1", "x", "0%", "%", "nan%"] {
            assert!(parse_jobs(bad, 4).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_longer_than_a_year_are_refused_before_they_overflow_a_clock() {
        assert!(parse_duration("--timeout", "365d").is_ok());
        let e = parse_duration("--timeout", "18446744073709551615s").expect_err("huge");
        assert!(e.to_string().contains("longer than a year"), "{e}");
        assert!(parse_duration("--grace", "99999999h").is_err());
    }

    #[test]
    fn batch_frontmatter_and_runner_toml_give_the_same_settings() {
        let from_yaml = FileSettings::from_map(map(
            "runner: exec\ncommand: python3 a.py\nmax_workers: 3\nmax_runtime_seconds: 60\n\
             retries: 2\nverify: test -s x\nmodel: 4\nisolate: worktree\n\
             worktree: {copy: [.env], setup: npm ci}\n",
        ))
        .expect("valid")
        .0;
        let from_toml = FileSettings::from_toml(
            Path::new("runner.toml"),
            "runner = 'exec'\ncommand = ['python3', 'a.py']\nmax_workers = 3\n\
             max_runtime_seconds = 60\nretries = 2\nverify = 'test -s x'\nmodel = 4\n\
             isolate = 'worktree'\n[worktree]\ncopy = ['.env']\nsetup = 'npm ci'\n",
        )
        .expect("valid");
        assert_eq!(from_yaml, from_toml);
        assert_eq!(
            from_toml.command,
            Some(vec!["python3".to_string(), "a.py".to_string()])
        );
        assert_eq!(from_toml.model.as_deref(), Some("4"));
    }

    #[test]
    fn a_budget_may_be_written_quoted_or_with_a_dollar_sign() {
        for text in [
            "max_cost_usd: 5\n",
            "max_cost_usd: \"5\"\n",
            "max_cost_usd: \"$5\"\n",
        ] {
            let got = FileSettings::from_map(map(text)).expect(text).0;
            assert_eq!(got.max_cost_usd, Some(5.0), "{text}");
        }
        assert!(FileSettings::from_map(map("max_cost_usd: \"five\"\n")).is_err());
        assert!(FileSettings::from_map(map("max_cost_usd: \"-1\"\n")).is_err());
    }

    #[test]
    fn a_bad_value_names_its_key_and_rule_in_both_files() {
        let e = FileSettings::from_map(map("max_workers: many\n")).expect_err("bad");
        assert_eq!(
            e,
            KeyProblem::Invalid {
                key: "max_workers".into(),
                rule: "must be a whole number ≥ 1".into()
            }
        );
        let e = FileSettings::from_map(map("worktree: {copy: 3}\n")).expect_err("bad");
        assert!(matches!(e, KeyProblem::Invalid { key, .. } if key == "worktree.copy"));
        let e = FileSettings::from_toml(Path::new("r.toml"), "runner = 'x'\nmax_workers = 0\n")
            .expect_err("bad");
        assert_eq!(
            e.to_string(),
            "r.toml:2: `max_workers` must be a whole number ≥ 1"
        );
    }

    #[test]
    fn unknown_keys_are_dropped_for_a_warning_from_frontmatter_and_refused_from_toml() {
        let (s, unknown) = FileSettings::from_map(map(
            "max_wrokers: 2\nretries: 1\nworktree: {copy: [a], setpu: x}\n",
        ))
        .expect("valid");
        assert_eq!(s.retries, Some(1));
        let keys: Vec<&str> = unknown
            .iter()
            .filter_map(|p| match p {
                KeyProblem::Unknown { key, .. } => Some(key.as_str()),
                KeyProblem::Invalid { .. } => None,
            })
            .collect();
        assert_eq!(keys, ["max_wrokers", "worktree.setpu"]);
        assert!(
            matches!(&unknown[0], KeyProblem::Unknown { known, .. } if known.contains(&"max_workers".to_string())),
            "{unknown:?}"
        );
        // A table of two keys: serde says "`copy` or `setup`".
        assert!(
            matches!(&unknown[1], KeyProblem::Unknown { known, .. } if *known == ["copy", "setup"]),
            "{unknown:?}"
        );
        let e = FileSettings::from_toml(Path::new("r.toml"), "runner = 'x'\nmax_wrokers = 3\n")
            .expect_err("unknown");
        let text = e.to_string();
        assert!(
            text.starts_with(
                "r.toml:2: unknown key `max_wrokers`; did you mean `max_workers`? (known: runner, command"
            ),
            "{text}"
        );
    }
}
