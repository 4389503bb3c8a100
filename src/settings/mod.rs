//! Flags + files + defaults → one validated [`Settings`], before any file is touched
//! (DESIGN §2; uv's `settings.rs` combine pattern, ripgrep's low args → high args).
//!
//! Every runner option lives in three places and is combined exactly once:
//! 1. its flag in [`crate::cli::RunArgs`];
//! 2. its key in [`FileSettings`] (`file.rs`), which BATCH.md's frontmatter and
//!    `<store>/runner.toml` both deserialize into, each value parsed into its type
//!    ([`crate::options`]) as the file is read; unknown keys come from the struct itself
//!    (`keys.rs`, the `serde_ignored` crate);
//! 3. its resolved field in [`Settings`], set by its group in `groups.rs` (the runner, the
//!    attempts, isolation, outputs, selection, the team's limits, the sandbox): flag, else
//!    file, else built-in default. [`Settings::resolve`] puts the groups together and runs
//!    the checks of `programs.rs` (the definition expands, its program is installed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::{RunnerDef, definition};
use crate::cli::RunArgs;
use crate::error::{Error, Result};
use crate::options::Format;
use crate::options::limits::Limits;
use crate::options::selection::{Only, Shard};
use crate::report::ItemStatus;

mod file;
mod groups;
pub(crate) mod keys;
mod programs;
mod schema;

pub(crate) use crate::options::duration::parse_duration;
pub(crate) use file::{FileSettings, KeyProblem, set_at};
pub(crate) use groups::shard;
pub(crate) use schema::load_schema;

use groups::command_line;
use programs::{anchor_command, anchor_program, uses_placeholder};

/// Default time limit of one attempt.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long the runner waits for a finished child's pipes to close before ending its group.
pub(crate) const PIPE_WAIT: Duration = Duration::from_secs(2);
/// The time limit of an attempt with `--batch-api` when none is given: the Batch API's
/// 24-hour completion window and an hour for the upload and the download.
pub(crate) const BATCH_API_TIMEOUT: Duration = Duration::from_secs(25 * 3600);

/// The validated options of a run, from flags, then a file, then defaults. Built once by
/// [`Settings::resolve`] before anything is written.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
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
    /// `--best-of N`: candidates per item (1: no fan-out, DESIGN §13).
    pub best_of: u32,
    /// `--best-of RUNNER[:MODEL],…`: each candidate's runner definition and model, in order
    /// (each candidate runs with a profile of its own,
    /// [`crate::schedule::plan::Plan::add_candidates`]); empty for `--best-of N`.
    pub best_of_runners: Vec<(String, Option<String>)>,
    /// `--judge`: how the winner among passing candidates is chosen.
    pub judge: crate::options::best_of::Judge,
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
    /// `--merge=review`: completed items wait `awaiting review` instead of merging.
    pub review: bool,
    /// `--verify-merged`: the command each merged tree must pass before the target branch
    /// moves to it (argv, run in the merge queue's own worktree).
    pub verify_merged: Option<Vec<String>>,
    /// `--serialize-overlaps`: rows that will touch the same files run one after another,
    /// each from the previous one's merge ([`crate::plans::overlap`]).
    pub serialize_overlaps: bool,
    /// `--on-conflict`: who resolves an item whose merge conflicts (DESIGN §9).
    pub on_conflict: crate::options::on_conflict::OnConflict,
    /// `--conflict-attempts`: resolution attempts per conflicting item (1 ..= 5).
    pub conflict_attempts: u32,
    /// Ignored files copied into each worktree (relative to the repository root).
    pub worktree_copy: Vec<PathBuf>,
    /// Set-up command of each new worktree (argv).
    pub worktree_setup: Option<Vec<String>>,
    /// `--only`: which items run.
    pub only: Only,
    /// `--shard K/N` (or `auto` from `JOB_COMPLETION_INDEX`).
    pub shard: Option<Shard>,
    /// `--order` (or `order:`): the order items start in.
    pub order: crate::options::order::Order,
    /// `--weight-column` (or `weight_column:`): each row's expected duration.
    pub weight_column: Option<String>,
    /// `--best-of-column` (or `best_of_column:`): the column giving each row's own fan-out
    /// (a number or a list of runners, as `--best-of`; empty: the batch's).
    pub best_of_column: Option<String>,
    /// `--queue URL` (or `queue:`): the shared work queue this run is a worker of.
    pub queue: Option<crate::options::queue::QueueUrl>,
    /// `--junit FILE`.
    pub junit: Option<PathBuf>,
    /// `--trace FILE`: Chrome trace events of the run.
    pub trace: Option<PathBuf>,
    /// `--dry-run`: show the plan, write nothing.
    pub dry_run: bool,
    /// `--serve`: a live page of the run ([`crate::serve`]).
    pub serve: bool,
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
    /// BATCH.md's `raw_columns`: the output fields written as agents gave them although
    /// formulas are guarded (set by `runner batch`, checked against the output's fields
    /// by the plan: `sink::output_csv::Layout::with_raw`); empty elsewhere.
    pub raw_columns: Vec<String>,
    /// `--keep-logs`: completed items keep their teammate folders (prompt, every attempt's
    /// logs) instead of being compacted into `completed.jsonl`.
    pub keep_logs: bool,
    /// `--sandbox`: how each teammate is confined. `auto` (the default) until the plan
    /// settles it (`Plan::settle_sandbox`), which every run does before anything starts.
    pub sandbox: crate::sandbox::Mode,
    /// Why teammates run unconfined when the plan settled on none for them (`auto: this
    /// kernel has no Landlock`, `auto: the workspace lies inside …`, `no process to confine:
    /// …`), shown on the run's first line with what it means
    /// ([`Settings::unconfined`]).
    pub sandbox_why_none: Option<String>,
    /// `--workspace` / `workspace`: where the team workspace goes instead of its default
    /// place (`schedule::layout::place_workspace`); absolute.
    pub workspace: Option<PathBuf>,
    /// Rate-limit wait, budget and `--max-fail` of the team's gate.
    pub limits: Limits,
    /// `--notify` / `notify`: where the run's end, its blocked items and the team's stop
    /// are told (`sink::notify`); empty for nowhere.
    pub notify: Vec<crate::options::notify::NotifyTarget>,
    /// What resolving said that is not an error (the definition file's unknown keys, a
    /// file's `model` the runner has no place for), one sentence each: [`crate::schedule::plan::Plan::new`]
    /// takes them onto the plan, whose run journals and shows them as warnings.
    pub warnings: Vec<String>,
}

/// What a stage, or a row's `runner_column` / `model_column`, changes of a batch's settings
/// (BATCH.md `stages:`, issue 33); everything else comes from the batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Overrides {
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
    /// Another fan-out (`best_of:` on a stage, a row's `best_of_column` cell): candidates
    /// of its items, or their runners.
    pub best_of: Option<crate::options::best_of::BestOf>,
}

impl Overrides {
    /// Whether it changes nothing.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Overrides::default()
    }
}

/// What an unconfined teammate can do, in the words of the run's first line.
pub(crate) const UNCONFINED: &str = "a teammate can forge another's verdict or edit the journal";

impl Settings {
    /// These settings for one teammate that fans out to no candidates: a `--best-of`
    /// candidate itself, a judge stage, a conflict's resolver (`best_of` 1, no runner list).
    pub(crate) fn without_fan_out(mut self) -> Settings {
        self.best_of = 1;
        self.best_of_runners.clear();
        self
    }

    /// What running unconfined means, for the run's first line and `--dry-run`; `None` unless
    /// the settled sandbox is none. For a runner that starts a process: why `auto` settled on
    /// none (the plan's reason, which names what to change when the layout is the cause) then
    /// what a teammate can do ([`UNCONFINED`]); when the user chose none, what a teammate can
    /// do then the one flag that confines teammates — or, on a kernel without a usable
    /// Landlock, that nothing can here (rather than a flag that would exit 3). The HTTP
    /// backend keeps the plan's own words: it starts no process to confine.
    pub(crate) fn unconfined(&self) -> Option<String> {
        if self.sandbox != crate::sandbox::Mode::None {
            return None;
        }
        let why = self.sandbox_why_none.as_deref();
        if self.runner.answers_only() {
            return why.map(str::to_owned);
        }
        Some(match why {
            Some(why) => format!("{why}; {UNCONFINED}"),
            None => match crate::sandbox::auto_refusal(crate::sandbox::kernel_abi()) {
                None => format!("{UNCONFINED}; --sandbox landlock confines them"),
                Some(cannot) => format!("{UNCONFINED}; {cannot}, so nothing confines them here"),
            },
        })
    }
}

#[cfg(test)]
impl Settings {
    /// Settings for in-process tests: `runner`, one job, a 30 s time limit, every status but
    /// `completed` retried (no retries), nothing else set.
    pub(crate) fn for_test(runner: RunnerDef) -> Settings {
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
            best_of: 1,
            best_of_runners: Vec::new(),
            judge: Default::default(),
            model: None,
            agent_args: Vec::new(),
            vars: BTreeMap::new(),
            log_cap: 1024 * 1024,
            format: Format::Plain,
            isolate: false,
            merge: false,
            review: false,
            verify_merged: None,
            serialize_overlaps: false,
            on_conflict: Default::default(),
            conflict_attempts: 1,
            worktree_copy: Vec::new(),
            worktree_setup: None,
            only: Only::All,
            shard: None,
            order: Default::default(),
            weight_column: None,
            best_of_column: None,
            queue: None,
            junit: None,
            trace: None,
            dry_run: false,
            serve: false,
            batch_api: false,
            accept_changes: false,
            runner_from: None,
            keep_formulas: false,
            raw_columns: Vec::new(),
            keep_logs: false,
            sandbox: crate::sandbox::Mode::None,
            sandbox_why_none: None,
            workspace: None,
            limits: Default::default(),
            notify: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

impl Settings {
    /// Combine the flags over the file's settings over the defaults, one group at a time
    /// (`groups.rs`), and validate the result. `command` is what followed `--`; `store` is
    /// where user runner definitions live.
    ///
    /// Errors: bad flag or key values and definitions (exit 2), a missing program (exit 3).
    pub(crate) fn resolve(
        flags: &RunArgs,
        command: &[String],
        file: &FileSettings,
        store: Option<&Path>,
    ) -> Result<Settings> {
        let chosen = groups::runner(flags, command, file, store)?;
        let attempts = groups::attempts(flags, file)?;
        let isolation = groups::isolation(flags, file)?;
        let selection = groups::selection(flags)?;
        let outputs = groups::outputs(flags, file, selection.shard)?;
        let mut settings = Settings {
            runner: chosen.runner,
            runner_from: chosen.runner_from,
            // Checked as the user wrote it (messages name their words), run from anywhere:
            // anchored below, once the checks passed.
            command: chosen.command,
            model: chosen.model,
            agent_args: chosen.agent_args,
            vars: chosen.vars,
            jobs: attempts.jobs,
            timeout: Some(attempts.timeout),
            grace: attempts.grace,
            retries: attempts.retries,
            retry_on: attempts.retry_on,
            retry_delay: attempts.retry_delay,
            verify: attempts.verify,
            best_of: attempts.best_of.count,
            best_of_runners: attempts.best_of.runners,
            judge: attempts.judge,
            isolate: isolation.isolate,
            merge: isolation.merge,
            review: isolation.review,
            verify_merged: isolation.verify_merged,
            serialize_overlaps: isolation.serialize_overlaps,
            on_conflict: isolation.on_conflict,
            conflict_attempts: isolation.conflict_attempts,
            worktree_copy: isolation.worktree_copy,
            worktree_setup: isolation.worktree_setup,
            only: selection.only,
            shard: selection.shard,
            order: flags.order.or(file.order).unwrap_or_default(),
            weight_column: flags
                .weight_column
                .clone()
                .or_else(|| file.weight_column.clone()),
            best_of_column: flags
                .best_of_column
                .clone()
                .or_else(|| file.best_of_column.clone()),
            queue: flags.queue.clone().or_else(|| file.queue.clone()),
            format: outputs.format,
            log_cap: outputs.log_cap,
            junit: outputs.junit,
            trace: outputs.trace,
            keep_formulas: outputs.keep_formulas,
            raw_columns: Vec::new(),
            keep_logs: outputs.keep_logs,
            dry_run: flags.dry_run,
            serve: flags.serve,
            batch_api: flags.batch_api,
            accept_changes: flags.accept_changes,
            sandbox: groups::sandbox(flags, file)?,
            sandbox_why_none: None,
            workspace: match &flags.workspace {
                Some(w) => Some(crate::fsutil::absolute(w)),
                None => file.workspace.clone(),
            },
            limits: groups::limits(flags, file)?,
            notify: groups::notify(flags, file)?,
            warnings: chosen.warnings,
        };
        // `--queue-ca` goes with the queue, wherever its URL came from.
        settings.queue = settings
            .queue
            .take()
            .map(|q| q.with_ca(flags.queue_ca.clone()));
        settings.check_programs()?;
        crate::fsutil::check_parents(&[
            (settings.junit.as_deref(), "--junit"),
            (settings.trace.as_deref(), "--trace"),
        ])?;
        Ok(settings.anchored())
    }

    /// What becomes of completed branches, as `run_started` says it: `queue` (`--merge`),
    /// `review` (`--merge=review`), or `""` (no merge).
    pub(crate) fn merge_word(&self) -> &'static str {
        match (self.merge, self.review) {
            (false, _) => "",
            (true, false) => "queue",
            (true, true) => "review",
        }
    }

    /// These settings with the program (and the verify command's program) made absolute
    /// from the folder runner was started in ([`programs::anchor_command`]).
    fn anchored(mut self) -> Settings {
        self.command = anchor_command(std::mem::take(&mut self.command));
        if let Some(v) = self.verify.as_mut().and_then(|v| v.first_mut()) {
            *v = anchor_program(std::mem::take(v));
        }
        self
    }

    /// These settings with `o` applied, checked as [`Settings::resolve`] checks its own (the
    /// runner definition loads, its program is installed, a verify program exists). Another
    /// runner drops the batch's `--agent-arg`s and `--var`s (they were written for its
    /// runner) and its program (only `exec` takes one; give it `command`).
    ///
    /// Errors: as [`Settings::resolve`]'s (exit 2 or 3); `exec` with no program (exit 2).
    pub(crate) fn with_overrides(&self, o: &Overrides) -> Result<Settings> {
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
        if let Some(b) = &o.best_of {
            s.best_of = b.count;
            s.best_of_runners.clone_from(&b.runners);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_keys_are_the_structs_own() {
        let keys = keys::keys_of::<FileSettings>();
        assert_eq!(keys.first(), Some(&"runner"));
        assert!(keys.contains(&"max_fail") && keys.contains(&"worktree"));
        assert_eq!(keys::keys_of::<file::WorktreeSettings>(), ["copy", "setup"]);
    }
}

#[cfg(test)]
mod unconfined_tests {
    use super::{Settings, UNCONFINED};
    use crate::agent::definition::load;
    use crate::sandbox::Mode;

    fn settings(runner: &str, mode: Mode, why: Option<&str>) -> Settings {
        Settings {
            sandbox: mode,
            sandbox_why_none: why.map(str::to_owned),
            ..Settings::for_test(load(runner, None, None).expect("built-in"))
        }
    }

    #[test]
    fn unconfined_says_what_a_teammate_can_do_after_auto_s_reason_and_http_keeps_its_words() {
        assert_eq!(settings("exec", Mode::Landlock, None).unconfined(), None);
        assert_eq!(
            settings(
                "exec",
                Mode::None,
                Some("auto: this kernel has no Landlock")
            )
            .unconfined()
            .as_deref(),
            Some(
                "auto: this kernel has no Landlock; a teammate can forge another's verdict or edit the journal"
            )
        );
        let chosen = settings("exec", Mode::None, None)
            .unconfined()
            .unwrap_or_default();
        assert!(chosen.starts_with(UNCONFINED), "{chosen}");
        assert!(
            chosen.ends_with("; --sandbox landlock confines them")
                || chosen.ends_with(", so nothing confines them here"),
            "{chosen}"
        );
        let http = "no process to confine: the HTTP backend sends the requests itself";
        assert_eq!(
            settings("openai", Mode::None, Some(http))
                .unconfined()
                .as_deref(),
            Some(http)
        );
        assert_eq!(settings("openai", Mode::None, None).unconfined(), None);
    }
}
