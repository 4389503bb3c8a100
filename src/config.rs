//! Flags + files → one validated configuration, before any file is touched (DESIGN §2).
//!
//! Precedence: flags, then BATCH.md (or `<store>/runner.toml`), then built-in defaults.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::agent::{RunnerDef, definition};
use crate::cli::RunArgs;
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::ui::Format;

/// Default time limit of one attempt.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long the runner waits for a finished child's pipes to close before ending its group.
pub const PIPE_WAIT: Duration = Duration::from_secs(2);

/// Defaults that come from a file (BATCH.md or runner.toml), below the flags.
#[derive(Debug, Clone, Default)]
pub struct FileDefaults {
    /// `runner`.
    pub runner: Option<String>,
    /// `command` (exec).
    pub command: Option<Vec<String>>,
    /// `max_workers`.
    pub jobs: Option<usize>,
    /// `max_runtime_seconds`.
    pub timeout_s: Option<u64>,
    /// `retries`.
    pub retries: Option<u32>,
    /// `verify`.
    pub verify: Option<String>,
    /// `model`.
    pub model: Option<String>,
    /// `isolate`: `none` or `worktree`.
    pub isolate: Option<String>,
    /// `worktree.copy`.
    pub worktree_copy: Option<Vec<String>>,
    /// `worktree.setup`.
    pub worktree_setup: Option<String>,
}

impl From<crate::store::StoreConfig> for FileDefaults {
    fn from(c: crate::store::StoreConfig) -> FileDefaults {
        FileDefaults {
            runner: c.runner,
            command: c.command,
            jobs: c.max_workers,
            timeout_s: c.max_runtime_seconds,
            retries: c.retries,
            verify: c.verify,
            model: c.model,
            isolate: c.isolate,
            worktree_copy: c.worktree.as_ref().and_then(|w| w.copy.clone()),
            worktree_setup: c.worktree.and_then(|w| w.setup),
        }
    }
}

/// The validated runner options shared by every command that runs teammates.
pub struct RunOptions {
    /// The runner definition.
    pub runner: RunnerDef,
    /// The exec command (program first), possibly empty for other runners.
    pub command: Vec<String>,
    /// Teammates at once (≥ 1).
    pub jobs: usize,
    /// Time limit of one attempt.
    pub timeout: Option<Duration>,
    /// SIGTERM → SIGKILL grace.
    pub grace: Duration,
    /// Extra attempts.
    pub retries: u32,
    /// Statuses retried.
    pub retry_on: Vec<ItemStatus>,
    /// First retry delay.
    pub retry_delay: Duration,
    /// Verify argv.
    pub verify: Option<Vec<String>>,
    /// Model.
    pub model: Option<String>,
    /// Extra agent args.
    pub agent_args: Vec<String>,
    /// Definition variable overrides.
    pub vars: BTreeMap<String, String>,
    /// Log cap, bytes.
    pub log_cap: u64,
    /// Output format.
    pub format: Format,
    /// `--isolate worktree`.
    pub isolate: bool,
    /// `--merge`.
    pub merge: bool,
    /// Files copied into each worktree.
    pub worktree_copy: Vec<PathBuf>,
    /// Set-up command of each worktree (argv).
    pub worktree_setup: Option<Vec<String>>,
}

/// Parse a duration flag: `90s`, `10m`, `1h`, `1h30m`, or bare seconds.
///
/// Errors: names the flag and shows the accepted forms.
pub fn parse_duration(flag: &str, text: &str) -> Result<Duration> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(t).map_err(|_| {
        Error::Input(format!(
            "{flag} `{text}` is not a duration; write e.g. 90s, 10m or 1h"
        ))
    })
}

fn retry_on(text: &str) -> Result<Vec<ItemStatus>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s {
            "failed" => Ok(ItemStatus::Failed),
            "timed_out" => Ok(ItemStatus::TimedOut),
            "blocked" => Ok(ItemStatus::Blocked),
            other => Err(Error::Input(format!(
                "--retry-on `{other}` is not one of failed, timed_out, blocked"
            ))),
        })
        .collect()
}

fn parse_vars(vars: &[String]) -> Result<BTreeMap<String, String>> {
    vars.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
            _ => Err(Error::Input(format!("--var `{kv}` must be NAME=VALUE"))),
        })
        .collect()
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

/// Check that `program` can be started: a path that exists, or a name found on PATH.
///
/// Errors: [`Error::Environment`] (exit 3) with the install hint.
pub fn check_program(program: &str, hint: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let hint = if hint.is_empty() {
        String::new()
    } else {
        format!("; {hint}")
    };
    if !program.contains('/') {
        return which::which(program)
            .map_err(|_| Error::Environment(format!("`{program}` was not found on PATH{hint}")));
    }
    match std::fs::metadata(program) {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => {
            Ok(PathBuf::from(program))
        }
        Ok(meta) if meta.is_file() => Err(Error::Environment(format!(
            "`{program}` is not executable; make it so with `chmod +x {program}`"
        ))),
        _ => Err(Error::Environment(format!(
            "`{program}` does not exist or is not a file{hint}"
        ))),
    }
}

/// Validate the shared runner options. `store` is where user runner definitions live.
///
/// Errors: bad flag values and definitions (exit 2), a missing program (exit 3).
pub fn run_options(
    args: &RunArgs,
    command: &[String],
    file: &FileDefaults,
    store: Option<&Path>,
) -> Result<RunOptions> {
    let command: Vec<String> = if command.is_empty() {
        file.command.clone().unwrap_or_default()
    } else {
        command.to_vec()
    };
    let runner_name = match (&args.runner, &file.runner) {
        (Some(r), _) | (None, Some(r)) => r.clone(),
        (None, None) if !command.is_empty() => "exec".to_string(),
        (None, None) if args.runner_file.is_some() => String::new(),
        (None, None) => detect_runner(store)?,
    };
    let runner = definition::load(&runner_name, store, args.runner_file.as_deref())?;
    if !command.is_empty() && !runner.args.iter().any(|a| a == "{command_args}") {
        return Err(Error::Input(format!(
            "the runner `{}` starts its own program; a program after `--` (or BATCH.md `command`) is \
             only for the exec runner — drop it, or use --runner exec",
            runner.name
        )));
    }
    let jobs = args
        .jobs
        .or(file.jobs)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    if jobs == 0 {
        return Err(Error::Input("--jobs must be at least 1".into()));
    }
    let timeout = match &args.timeout {
        Some(t) => Some(parse_duration("--timeout", t)?),
        None => Some(file.timeout_s.map_or(DEFAULT_TIMEOUT, Duration::from_secs)),
    };
    if timeout.is_some_and(|d| d.is_zero()) {
        return Err(Error::Input(
            "--timeout must be more than 0 (e.g. 90s, 10m, 1h)".into(),
        ));
    }
    if args.log_cap < 1024 {
        return Err(Error::Input(format!(
            "--log-cap {} is too small; give at least 1024 bytes",
            args.log_cap
        )));
    }
    let isolate = match args
        .isolate
        .as_deref()
        .or(file.isolate.as_deref())
        .map(str::trim)
    {
        None | Some("none") => false,
        Some("worktree") => true,
        Some(other) => {
            return Err(Error::Input(format!(
                "--isolate `{other}` must be none or worktree"
            )));
        }
    };
    if args.merge && !isolate {
        return Err(Error::Input(
            "--merge merges teammates' worktree branches: it needs --isolate worktree".into(),
        ));
    }
    let worktree_setup = match args
        .worktree_setup
        .as_ref()
        .or(file.worktree_setup.as_ref())
    {
        None => None,
        Some(v) => match shlex::split(v) {
            Some(argv) if !argv.is_empty() => Some(argv),
            _ => {
                return Err(Error::Input(format!(
                    "worktree setup `{v}` is not a command line (check its quotes)"
                )));
            }
        },
    };
    let verify = match args.verify.as_ref().or(file.verify.as_ref()) {
        None => None,
        Some(v) => match shlex::split(v) {
            Some(argv) if !argv.is_empty() => Some(argv),
            _ => {
                return Err(Error::Input(format!(
                    "--verify `{v}` is not a command line (check its quotes)"
                )));
            }
        },
    };
    let opts = RunOptions {
        command,
        jobs,
        timeout,
        grace: parse_duration("--grace", &args.grace)?,
        retries: args.retries.or(file.retries).unwrap_or(0),
        retry_on: retry_on(&args.retry_on)?,
        retry_delay: parse_duration("--retry-delay", &args.retry_delay)?,
        verify,
        model: args.model.clone().or_else(|| file.model.clone()),
        agent_args: args.agent_args.clone(),
        vars: parse_vars(&args.vars)?,
        log_cap: args.log_cap,
        format: args.format,
        isolate,
        merge: args.merge,
        worktree_copy: if args.worktree_copy.is_empty() {
            file.worktree_copy
                .iter()
                .flatten()
                .map(PathBuf::from)
                .collect()
        } else {
            args.worktree_copy.clone()
        },
        worktree_setup,
        runner,
    };
    // Expand once with sample values so a bad definition or missing command fails now.
    let sample = definition::AttemptArgs {
        prompt_file: Path::new("prompt.md"),
        report: Path::new("report.json"),
        workspace: Path::new("."),
        prompt: "",
        model: opts.model.as_deref(),
        agent_args: &opts.agent_args,
        command: &opts.command,
        vars: &opts.vars,
    };
    let inv = opts.runner.invocation(&sample).map_err(Error::Input)?;
    check_program(&inv.program, &opts.runner.install_hint)?;
    if let Some(v) = &opts.verify {
        check_program(&v[0], "check the --verify command")?;
    }
    Ok(opts)
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
            let text = std::fs::read_to_string(p).map_err(|e| {
                Error::Input(format!(
                    "{}: cannot read the output schema: {e}",
                    p.display()
                ))
            })?;
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
        .map_err(|e| Error::Input(format!("{origin}: not a valid JSON Schema: {e}")))?;
    Ok(Some((schema, validator)))
}

/// Resolve `p` against `base` unless it is absolute.
pub fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_owned()
    } else {
        base.join(p)
    }
}

/// The absolute form of `p` (relative to the current directory), without touching the disk.
pub fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_owned())
}

/// Whether `a` and `b` name the same file (after resolving `.`/`..` and symlinks where the
/// files exist).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let norm = |p: &Path| p.canonicalize().unwrap_or_else(|_| absolute(p));
    norm(a) == norm(b)
}

/// Check that the folder a flag's file goes into exists, before anything runs.
///
/// Errors: exit 2 naming the flag and the folder.
pub fn check_parent(path: Option<&Path>, flag: &str) -> Result<()> {
    let Some(p) = path else { return Ok(()) };
    let parent = absolute(p).parent().map(Path::to_owned).unwrap_or_default();
    if parent.is_dir() {
        Ok(())
    } else {
        Err(Error::Input(format!(
            "{flag} {}: the folder {} does not exist",
            p.display(),
            parent.display()
        )))
    }
}
