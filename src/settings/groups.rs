//! Flag > file > default, one group of options at a time: each function here combines one
//! group ([`RunnerChoice`], [`Attempts`], [`Isolation`], [`Outputs`], [`Selection`], the
//! team's [`Limits`], the sandbox) and checks it, and [`super::Settings::resolve`] puts the
//! groups together. To add an option, add it to its group: one field, one combining line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file::FileSettings;
use super::programs::{detect_runner, refuse_dropped_flags, uses_placeholder};
use super::{BATCH_API_TIMEOUT, DEFAULT_TIMEOUT};
use crate::agent::{RunnerDef, definition};
use crate::cli::RunArgs;
use crate::error::{Error, Result};
use crate::options::Format;
use crate::options::best_of::{BestOf, Judge};
use crate::options::duration::{check_duration, parse_duration};
use crate::options::limits::{self, DEFAULT_RATE_LIMIT_WAIT, Limits, parse_max_fail};
use crate::options::notify::NotifyTarget;
use crate::options::selection::{Only, Shard};
use crate::report::ItemStatus;

/// The runner definition and what it is given: `--runner`/`runner` (else the exec runner for
/// a program, else the first agent CLI on PATH), the program, the model, extra arguments and
/// variables.
pub(super) struct RunnerChoice {
    /// The runner definition.
    pub runner: RunnerDef,
    /// The file it was read from; `None` for a built-in one.
    pub runner_from: Option<PathBuf>,
    /// The exec runner's program (argv, as written); empty for other runners.
    pub command: Vec<String>,
    /// `--model`, else `model`.
    pub model: Option<String>,
    /// `--agent-arg` values.
    pub agent_args: Vec<String>,
    /// `--var NAME=VALUE` values.
    pub vars: BTreeMap<String, String>,
    /// What choosing it said that is not an error: the definition file's unknown keys, a
    /// file's `model` this runner has no place for ([`super::Settings::warnings`]).
    pub warnings: Vec<String>,
}

/// [`RunnerChoice`] from the flags, the program after `--` (`command`), the file, and the
/// store's definitions.
///
/// Errors: an unknown runner or a bad definition, a program for a runner that starts its
/// own, a `--model`/`--agent-arg` it would drop, a bad `--var` (exit 2); no agent CLI found
/// (exit 3).
pub(super) fn runner(
    flags: &RunArgs,
    command: &[String],
    file: &FileSettings,
    store: Option<&Path>,
) -> Result<RunnerChoice> {
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
    let mut runner = definition::load(&runner_name, store, flags.runner_file.as_deref())?;
    let mut warnings = std::mem::take(&mut runner.warnings);
    let takes_program = runner.args.iter().any(|a| a == "{command_args}");
    // The quick-start form `runner batch BATCH.md --runner claude` over a file written for
    // the exec runner: the command line's runner wins over the file's runner and command.
    let chosen_here = flags.runner.is_some() || flags.runner_file.is_some();
    if from_file && chosen_here && !command.is_empty() && !takes_program {
        // The file's words are a repository's: shown, never obeyed.
        let note = format!(
            "note: runner `{}` from the command line replaces the file's {}and its `command` ({})",
            runner.name,
            file.runner
                .as_ref()
                .map(|r| format!("`runner: {r}` "))
                .unwrap_or_default(),
            command.join(" ")
        );
        eprintln!("{}", crate::shown::terminal_safe(&note));
        command.clear();
    }
    if !command.is_empty() && !takes_program {
        return Err(Error::Conflict {
            flag: "a program after `--` (or BATCH.md `command`)".into(),
            other: format!("the runner `{}`", runner.name),
            why: "that runner starts its own program, and a program is only for the exec \
                  runner; drop it, or use --runner exec"
                .into(),
        });
    }
    refuse_dropped_flags(flags, &runner)?;
    if flags.model.is_none() {
        warnings.extend(unused_model(file, &runner));
    }
    Ok(RunnerChoice {
        runner_from: flags.runner_file.clone().or_else(|| {
            store
                .map(|s| definition::store_file(s, &runner_name))
                .filter(|p| p.is_file())
        }),
        command,
        model: flags.model.clone().or_else(|| file.model.clone()),
        agent_args: flags.agent_args.clone(),
        vars: parse_vars(&flags.vars)?,
        runner,
        warnings,
    })
}

/// A `model` in a file may serve other runners of the store: said, not refused, when this
/// runner has no place for it (the warning's text).
fn unused_model(file: &FileSettings, runner: &RunnerDef) -> Option<String> {
    let m = file.model.as_ref()?;
    let used = !runner.backend.runs_a_program()
        || uses_placeholder(runner, "{model_args}")
        || uses_placeholder(runner, "{model}");
    (!used).then(|| {
        format!(
            "`model: {m}` is not used: runner `{}` has no place for a model{}",
            runner.name,
            match runner.name == "exec" {
                true => " (put it in the command)",
                false => "",
            }
        )
    })
}

/// How items are attempted: teammates at once, each attempt's time limit and grace, the
/// retries, the verify command. With `--batch-api` one job holds every row and may take the
/// provider up to its 24-hour window.
pub(super) struct Attempts {
    /// Teammates at once (`usize::MAX` for as many as allowed).
    pub jobs: usize,
    /// Time limit of one attempt (> 0).
    pub timeout: Duration,
    /// SIGTERM → SIGKILL grace period.
    pub grace: Duration,
    /// Extra attempts after a retried outcome.
    pub retries: u32,
    /// Statuses that are retried.
    pub retry_on: Vec<ItemStatus>,
    /// Delay before the first retry.
    pub retry_delay: Duration,
    /// The verify command (argv, as written).
    pub verify: Option<Vec<String>>,
    /// Candidates per item (1: no fan-out), and with a list each one's runner and model.
    pub best_of: BestOf,
    /// How the winner among passing candidates is chosen.
    pub judge: Judge,
}

/// [`Attempts`] from the flags over the file.
///
/// Errors: a bad `--jobs`, duration, `--retry-on` or verify command line, a zero time limit
/// (exit 2).
pub(super) fn attempts(flags: &RunArgs, file: &FileSettings) -> Result<Attempts> {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let jobs = match &flags.jobs {
        Some(text) => parse_jobs(text, cpus)?,
        None => file.max_workers.unwrap_or(cpus),
    };
    let timeout = match (&flags.timeout, file.max_runtime_seconds) {
        (Some(t), _) => parse_duration("--timeout", t)?,
        (None, Some(d)) => check_duration("max_runtime_seconds", &d.as_secs().to_string(), d)?,
        (None, None) if flags.batch_api => BATCH_API_TIMEOUT,
        (None, None) => DEFAULT_TIMEOUT,
    };
    if timeout.is_zero() {
        return Err(Error::bad_value(
            "--timeout",
            humantime::format_duration(timeout),
            "must be more than 0 (e.g. 90s, 10m, 1h)",
        ));
    }
    Ok(Attempts {
        jobs: if flags.batch_api { usize::MAX } else { jobs },
        timeout,
        verify: flags
            .verify
            .as_ref()
            .or(file.verify.as_ref())
            .map(|v| command_line("--verify", v))
            .transpose()?,
        grace: parse_duration("--grace", &flags.grace)?,
        retries: flags.retries.or(file.retries).unwrap_or(0),
        best_of: match &flags.best_of {
            Some(t) => t
                .parse::<BestOf>()
                .map_err(|rule| Error::bad_value("--best-of", t, rule))?,
            None => file.best_of.clone().unwrap_or(BestOf::ONE),
        },
        judge: judge(flags, file)?,
        retry_on: retry_on(&flags.retry_on)?,
        retry_delay: parse_duration("--retry-delay", &flags.retry_delay)?,
    })
}

/// `--judge`, else the file's `judge`, else `passing`. A `score CMD`'s program must be
/// installed, or name an executable file; a relative path to it is made absolute from the
/// folder runner was started in, as `--verify`'s is (it runs in each candidate's worktree,
/// and the user's own copy must run there, not one a candidate could have edited).
///
/// Errors: a `--judge` that is no judge (exit 2); a score program that is not found or not
/// executable (exit 3, as a missing agent or verify program: naming the program as written
/// and `--judge`, or the file and line of `judge`), before anything is written.
fn judge(flags: &RunArgs, file: &FileSettings) -> Result<Judge> {
    let (judge, set_by) = match &flags.judge {
        Some(t) => (
            t.parse::<Judge>()
                .map_err(|rule| Error::bad_value("--judge", t, rule))?,
            "--judge",
        ),
        None => (
            file.judge.clone().unwrap_or_default(),
            file.judge_at.as_deref().unwrap_or("judge"),
        ),
    };
    let Judge::Score(mut argv) = judge else {
        return Ok(judge);
    };
    if let Some(first) = argv.first_mut() {
        let program = super::programs::anchor_program(first.clone());
        if let Err(Error::ProgramMissing { problem, .. }) =
            super::programs::check_program(&program, "")
        {
            return Err(Error::ProgramMissing {
                program: std::mem::take(first),
                problem: format!(
                    "{problem} (the program of the score judge that {set_by} sets; give one that exists, or a name on PATH)"
                ),
            });
        }
        *first = program;
    }
    Ok(Judge::Score(argv))
}

/// `--isolate worktree` and what it takes: merging back, files copied into each worktree,
/// its set-up command.
pub(super) struct Isolation {
    /// `--isolate worktree`.
    pub isolate: bool,
    /// `--merge`.
    pub merge: bool,
    /// `--merge=review`: completed items wait for review instead of merging.
    pub review: bool,
    /// `--verify-merged`: the check of each merged tree (argv, as written).
    pub verify_merged: Option<Vec<String>>,
    /// `--serialize-overlaps`: overlapping rows run one after another.
    pub serialize_overlaps: bool,
    /// `--on-conflict`: who resolves a conflicting merge.
    pub on_conflict: crate::options::on_conflict::OnConflict,
    /// `--conflict-attempts`: resolution attempts per conflicting item.
    pub conflict_attempts: u32,
    /// Ignored files copied into each worktree.
    pub worktree_copy: Vec<PathBuf>,
    /// Each new worktree's set-up command (argv).
    pub worktree_setup: Option<Vec<String>>,
}

/// [`Isolation`] from the flags over the file.
///
/// Errors: an unknown `--isolate`; `--merge`, `--worktree-copy` or `--worktree-setup`
/// without `--isolate worktree`; a set-up command that is no command line (exit 2).
pub(super) fn isolation(flags: &RunArgs, file: &FileSettings) -> Result<Isolation> {
    use crate::options::isolation::Isolation as Mode;
    let mode = match flags.isolate.as_deref().map(str::trim) {
        Some(text) => text
            .parse::<Mode>()
            .map_err(|rule| Error::bad_value("--isolate", text, rule))?,
        None => file.isolate.unwrap_or_default(),
    };
    let isolate = mode == Mode::Worktree;
    let merge = flags.merge.is_some();
    if merge && !isolate {
        return Err(Error::needs(
            "--merge",
            "--isolate worktree",
            "it merges teammates' worktree branches",
        ));
    }
    let verify_merged = flags
        .verify_merged
        .as_ref()
        .or(file.verify_merged.as_ref())
        .map(|v| command_line("--verify-merged", v))
        .transpose()?;
    // BATCH.md's `verify_merged` waits for a run with `--merge`; the flag alone is a mistake.
    if flags.verify_merged.is_some() && !merge {
        return Err(Error::needs(
            "--verify-merged",
            "--merge",
            "it checks each tree the merge queue makes",
        ));
    }
    let serialize_overlaps = flags.serialize_overlaps || file.serialize_overlaps == Some(true);
    // Each row of a chain starts from the one before it merged: without the merge queue
    // landing them as they finish there is nothing to start from.
    if serialize_overlaps && (!merge || flags.merge.as_deref() == Some("review")) {
        return Err(Error::needs(
            "--serialize-overlaps (BATCH.md `serialize_overlaps`)",
            "--merge",
            "each row of a chain starts from the merged result of the one before it; \
             add --merge (not --merge=review, which lands nothing before review), or drop it",
        ));
    }
    let (on_conflict, conflict_attempts) = on_conflict(flags, file, merge)?;
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
    Ok(Isolation {
        isolate,
        merge,
        review: flags.merge.as_deref() == Some("review"),
        verify_merged,
        serialize_overlaps,
        on_conflict,
        conflict_attempts,
        worktree_copy: match flags.worktree_copy.is_empty() {
            true => file_worktree
                .copy
                .iter()
                .flatten()
                .map(PathBuf::from)
                .collect(),
            false => flags.worktree_copy.clone(),
        },
        worktree_setup: flags
            .worktree_setup
            .as_ref()
            .or(file_worktree.setup.as_ref())
            .map(|v| command_line("worktree setup", v))
            .transpose()?,
    })
}

/// Which items run: `--only` and `--shard`.
pub(super) struct Selection {
    /// `--only`.
    pub only: Only,
    /// `--shard`.
    pub shard: Option<Shard>,
}

/// [`Selection`] from the flags (no file sets it).
///
/// Errors: as [`Only::parse`] and [`shard`] (exit 2).
pub(super) fn selection(flags: &RunArgs) -> Result<Selection> {
    Ok(Selection {
        only: Only::parse(flags.only.as_deref())?,
        shard: shard(flags)?,
    })
}

/// What the run writes besides its output, and how: the style on the terminal, the log
/// cap, `--junit` and `--trace`, formulas kept, logs kept.
pub(super) struct Outputs {
    /// How the run is shown.
    pub format: Format,
    /// Cap of each log file, bytes (≥ 1024).
    pub log_cap: u64,
    /// `--junit FILE`, a shard's number in its name.
    pub junit: Option<PathBuf>,
    /// `--trace FILE`.
    pub trace: Option<PathBuf>,
    /// `--keep-formulas` or `keep_formulas`.
    pub keep_formulas: bool,
    /// `--keep-logs` or `keep_logs`.
    pub keep_logs: bool,
}

/// [`Outputs`] from the flags over the file; a shard's JUnit report carries its number, as
/// its output does.
///
/// Errors: a log cap under 1 KiB (exit 2).
pub(super) fn outputs(
    flags: &RunArgs,
    file: &FileSettings,
    shard: Option<Shard>,
) -> Result<Outputs> {
    if flags.log_cap < 1024 {
        return Err(Error::bad_value(
            "--log-cap",
            flags.log_cap,
            "is too small; give at least 1024 bytes",
        ));
    }
    Ok(Outputs {
        format: flags.format,
        log_cap: flags.log_cap,
        junit: match (flags.junit.as_ref(), shard) {
            (Some(j), Some(s)) => Some(crate::options::selection::shard_file(j, s.k, s.n)),
            (j, _) => j.cloned(),
        },
        trace: flags.trace.clone(),
        keep_formulas: flags.keep_formulas || file.keep_formulas.unwrap_or(false),
        keep_logs: flags.keep_logs || file.keep_logs.unwrap_or(false),
    })
}

/// `--sandbox`, else `sandbox`, else auto; landlock only on a kernel that has it.
///
/// Errors: an unknown mode (exit 2); landlock on a kernel without it or with too old an ABI
/// (exit 3).
pub(super) fn sandbox(flags: &RunArgs, file: &FileSettings) -> Result<crate::sandbox::Mode> {
    use crate::sandbox::{Mode, check_abi, kernel_abi};
    let mode = match (flags.sandbox.as_deref(), file.sandbox) {
        (Some(text), _) => Mode::parse(text)?,
        (None, Some(mode)) => mode,
        (None, None) => Mode::Auto,
    };
    if mode == Mode::Landlock {
        check_abi(kernel_abi())?;
    }
    Ok(mode)
}

/// The team's [`Limits`] from the flags over the file.
///
/// Errors: a bad `--rate-limit-wait`, `--max-cost-usd` or `--max-fail` (exit 2).
pub(super) fn limits(flags: &RunArgs, file: &FileSettings) -> Result<Limits> {
    let rate_limit_wait = match (&flags.rate_limit_wait, file.rate_limit_wait) {
        (Some(t), _) => parse_duration("--rate-limit-wait", t)?,
        (None, Some(d)) => d,
        (None, None) => DEFAULT_RATE_LIMIT_WAIT,
    };
    let max_cost_usd = match flags.max_cost_usd {
        Some(v) if !limits::is_budget(v) => {
            return Err(Error::bad_value("--max-cost-usd", v, limits::USD_RULE));
        }
        Some(v) => Some(v),
        None => file.max_cost_usd,
    };
    let max_fail = match &flags.max_fail {
        Some(text) => Some(parse_max_fail(text)?),
        None => file.max_fail,
    };
    Ok(Limits {
        rate_limit_wait,
        max_cost_usd,
        max_fail,
    })
}

/// Where notifications go: every `--notify`, else the file's `notify`, else nowhere; a
/// command's program must be installed (or name a file), its relative path made absolute
/// from the folder runner was started in.
///
/// Errors: a `--notify` that is neither URL, `bell` nor a command line (exit 2, the URL
/// redacted); a command whose program is not found (exit 3, naming `--notify` or the file
/// and line of `notify`).
pub(super) fn notify(flags: &RunArgs, file: &FileSettings) -> Result<Vec<NotifyTarget>> {
    let set_by = match flags.notify.is_empty() {
        true => file.notify_at.as_deref().unwrap_or("notify"),
        false => "--notify",
    };
    let targets = match flags.notify.is_empty() {
        true => file.notify.clone().unwrap_or_default(),
        false => flags
            .notify
            .iter()
            .map(|t| {
                t.parse::<NotifyTarget>().map_err(|why| {
                    // A URL's path may be its secret, also in a comma list or another scheme.
                    let shown = match t.contains("://") {
                        true => crate::redact::webhook(t),
                        false => t.clone(),
                    };
                    Error::bad_value("--notify", shown, why)
                })
            })
            .collect::<Result<Vec<_>>>()?,
    };
    targets
        .into_iter()
        .map(|t| match t {
            NotifyTarget::Command(argv) => {
                let Some((written, args)) = argv.split_first() else {
                    return Err(Error::bad_value("--notify", "", NotifyTarget::RULE));
                };
                let program = super::programs::anchor_program(written.clone());
                if which::which(&program).is_err() {
                    return Err(Error::Environment(format!(
                        "{set_by}: the notify command's program `{written}` is not installed \
                         (not on PATH, or no such file); install it or give another target"
                    )));
                }
                Ok(NotifyTarget::Command(
                    std::iter::once(program)
                        .chain(args.iter().cloned())
                        .collect(),
                ))
            }
            other => Ok(other),
        })
        .collect()
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
pub(crate) fn shard(flags: &RunArgs) -> Result<Option<Shard>> {
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

/// `v` split into an argv as a shell would (never run by one).
///
/// Errors: unbalanced quotes or nothing at all, naming `what` (exit 2).
pub(super) fn command_line(what: &str, v: &str) -> Result<Vec<String>> {
    match shlex::split(v) {
        Some(argv) if !argv.is_empty() => Ok(argv),
        _ => Err(Error::bad_value(
            what,
            v,
            "is not a command line (check its quotes)",
        )),
    }
}

/// `--on-conflict` and `--conflict-attempts` from the flags over the file (default: `fail`,
/// 1 attempt).
///
/// Errors: a value that breaks [`OnConflict::RULE`](crate::options::on_conflict::OnConflict)
/// or is out of 1 ..= 5 attempts; either flag without `--merge` (exit 2).
fn on_conflict(
    flags: &RunArgs,
    file: &FileSettings,
    merge: bool,
) -> Result<(crate::options::on_conflict::OnConflict, u32)> {
    use crate::options::on_conflict::{MAX_CONFLICT_ATTEMPTS, OnConflict};
    let who = match flags.on_conflict.as_deref() {
        Some(text) => text
            .parse::<OnConflict>()
            .map_err(|rule| Error::bad_value("--on-conflict", text, rule))?,
        None => file.on_conflict.clone().unwrap_or_default(),
    };
    let attempts = match flags.conflict_attempts {
        Some(n) if !(1..=MAX_CONFLICT_ATTEMPTS).contains(&n) => {
            return Err(Error::bad_value(
                "--conflict-attempts",
                n.to_string(),
                "must be a whole number from 1 to 5",
            ));
        }
        Some(n) => n,
        None => file.conflict_attempts.unwrap_or(1),
    };
    let flag = match (&flags.on_conflict, flags.conflict_attempts) {
        (Some(_), _) => Some("--on-conflict"),
        (None, Some(_)) => Some("--conflict-attempts"),
        (None, None) => None,
    };
    if let Some(flag) = flag.filter(|_| !merge) {
        return Err(Error::needs(
            flag,
            "--merge",
            "it hands the merge queue's conflicts to a teammate",
        ));
    }
    Ok((who, attempts))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
