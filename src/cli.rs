//! Command-line definitions (clap). No logic: `config` turns these into validated values.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::options::Format;

/// A free-text value whose usual words are offered by shell completion and listed in
/// `--help` (`--runner`: the built-in definitions; a store's own names are accepted too).
/// Parsing accepts any text; the settings check the value and say what is wrong.
#[derive(Clone)]
struct Offered(fn() -> Vec<&'static str>);

impl clap::builder::TypedValueParser for Offered {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            (self.0)()
                .into_iter()
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

fn runner_names() -> Vec<&'static str> {
    crate::agent::definition::BUILTIN
        .iter()
        .map(|(name, _)| *name)
        .collect()
}

/// Resolve a batch of work items in parallel: one agent CLI teammate per item, verified
/// reports, atomic outputs.
#[derive(Debug, Parser)]
#[command(
    name = "runner",
    version,
    about,
    max_term_width = 100,
    args_override_self = true
)]
pub(crate) struct Cli {
    /// More diagnostics on stderr (-v info, -vv debug); also `RUNNER_LOG=debug`.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a CSV batch: one teammate per row of workers-input.csv, results to workers-output.csv.
    ///
    /// Give a BATCH.md (frontmatter + instruction), or the files as flags. Running the same
    /// command again resumes: completed rows are not run again.
    Batch(BatchArgs),
    /// List the open items of the todo inbox, then the batches with items left to run and
    /// the command that runs each (writes nothing but a missing inbox template).
    List(ListArgs),
    /// Add an item to the todo inbox; a Todo item also gets a checkpoint file.
    Add(AddArgs),
    /// Hand inbox items to teammates: move the chosen items into the next todo-N.md and run it.
    Resolve(ResolveArgs),
    /// Run (or resume) an existing batch file todo-N.md: every unticked Todo item.
    Run(RunTodoArgs),
    /// List the store's task fragments (fragments/NAME.toml: named chains of steps with
    /// {variables}), or show one in full.
    Fragments(FragmentsArgs),
    /// Append a fragment's steps to the inbox as items linked by @after, its {variables}
    /// given as NAME=VALUE; each item records the fragment, the round and its step.
    Apply(ApplyArgs),
    /// Reopen the latest round of a fragment: one step (or every step) and every item of
    /// the round that follows it, where they are now (inbox or todo-N.md).
    Reset(ResetArgs),
    /// The known runner definitions, whether each program is installed, and its version.
    Runners(RunnersArgs),
    /// Join the outputs of `batch --shard K/N` runs of one batch, in input order.
    Merge(MergeArgs),
    /// Write the whole output of a run shared through `--queue` from the queue's verdicts
    /// (same columns and row order as a run on one machine): `runner collect --queue URL
    /// BATCH.md -o OUT [--junit F]`. No shared disk is needed.
    Collect(BatchArgs),
    /// The live or last state of a team, from its team.json (works while a run is going).
    Status(StatusArgs),
    /// Remove what a team left behind: its git worktrees, branches and workspace.
    Clean(CleanArgs),
    /// The items of a `--merge=review` run awaiting review: each one's diffstat, summary and
    /// checks (`--diff`: the whole diff).
    Review(ReviewArgs),
    /// Send items awaiting review through the merge queue (each merged tree checked by the
    /// run's --verify-merged); exit 1 when one did not land.
    Accept(DecideArgs),
    /// Discard items awaiting review: delete their branches; they end failed, `rejected`.
    Reject(DecideArgs),
    /// One item of a team: its status, every attempt with its verdict, the report, the
    /// prompt, and the last lines of the log that explains it.
    Show(ShowArgs),
    /// Print a log of one item's attempt (the last attempt's stdout by default).
    Logs(LogsArgs),
    /// Name the winner of a `--best-of` item a `--judge person` left blocked: its outcome
    /// becomes the candidate's (run the batch again to write its outputs and merge it).
    Pick(PickArgs),
    /// Write a report of a team: one self-contained HTML file with a timeline of every
    /// attempt and a sortable table of the items (works while the run goes on).
    Report(ReportArgs),
    /// Serve a live web page of one or more teams (counts, items, each item's attempts,
    /// report and log) that follows their journals as runs go on: on 127.0.0.1 only, with a
    /// random token in the URL it prints; read-only.
    Serve(ServeArgs),
    /// Print a shell completion script (e.g. `runner completions bash >
    /// /etc/bash_completion.d/runner`).
    Completions(CompletionsArgs),
    /// Print the man page (roff; e.g. `runner man > runner.1`).
    Man,
    /// Serve the runner's tools to a lead agent over the Model Context Protocol on stdio
    /// (todo_list, todo_add, todo_resolve, batch_run, status, show); e.g. `claude mcp add
    /// runner -- runner mcp`.
    Mcp,
    /// Install the todo skill where an agent finds it (Claude Code's skills folder, or a
    /// section of Codex's AGENTS.md).
    #[command(subcommand)]
    Skill(SkillCommand),
}

/// `runner skill`.
#[derive(Debug, Subcommand)]
pub(crate) enum SkillCommand {
    /// Write `skills/todo/SKILL.md` for Claude Code (`.claude/skills/todo/SKILL.md`) or
    /// Codex (a section of `AGENTS.md`), in the project (the default inside a git
    /// repository) or globally (in HOME); never over a file the runner did not write.
    Install(SkillInstallArgs),
}

/// The agent a skill is installed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SkillAgent {
    /// Claude Code.
    Claude,
    /// Codex.
    Codex,
}

/// `runner skill install`.
#[derive(Debug, Args)]
pub(crate) struct SkillInstallArgs {
    /// For Claude Code (the default).
    #[arg(long, conflicts_with = "codex")]
    pub claude: bool,
    /// For Codex: a section of AGENTS.md.
    #[arg(long)]
    pub codex: bool,
    /// In the project (its git repository); the default inside one.
    #[arg(long, conflicts_with = "global")]
    pub project: bool,
    /// In HOME (`~/.claude/skills/`, `~/.codex/AGENTS.md`); the default outside a repository.
    #[arg(long)]
    pub global: bool,
}

impl SkillInstallArgs {
    /// The agent chosen.
    pub(crate) fn agent(&self) -> SkillAgent {
        match self.codex {
            true => SkillAgent::Codex,
            false => SkillAgent::Claude,
        }
    }
}

/// `runner completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `runner report`.
#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// The team workspace (or its team.json, the batch's output CSV or the folder given to -o, its BATCH.md, or a todo-N.md);
    /// default: the most recently updated team here.
    #[arg(value_name = "WORKSPACE")]
    pub workspace: Option<PathBuf>,
    /// Where to write the HTML report.
    #[arg(long, value_name = "FILE", required_unless_present = "markdown")]
    pub html: Option<PathBuf>,
    /// Where to write a Markdown summary (counts, cost, a table of what did not complete):
    /// a file, or `-` for stdout; e.g. `--markdown "$GITHUB_STEP_SUMMARY"`, which it appends
    /// to, as GitHub Actions expects.
    #[arg(long, value_name = "FILE|-")]
    pub markdown: Option<PathBuf>,
}

/// `runner serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The team workspaces (each as for `runner status`: a workspace, its output CSV, its
    /// BATCH.md, a todo-N.md); default: the most recently updated team here.
    #[arg(value_name = "WORKSPACE")]
    pub workspaces: Vec<PathBuf>,
    /// The port on 127.0.0.1 (default: a free one).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
}

/// `runner show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The item's id (the CSV id column or row number; the item number of a todo batch) or
    /// its teammate's name, as the summary and `status` print it (`1-a`, `todo-task-1`).
    #[arg(value_name = "ID")]
    pub id: String,
    /// The team workspace (or its team.json, the batch's output CSV or the folder given to -o, its BATCH.md, or a todo-N.md);
    /// default: the most recently updated team here.
    #[arg(value_name = "WORKSPACE")]
    pub workspace: Option<PathBuf>,
    /// Print the prompt of the item's last attempt instead (from its folder, or from the
    /// record a completed item was compacted into).
    #[arg(long)]
    pub prompt: bool,
    /// With `--best-of`: the diff from candidate A's branch to candidate B's (`c1 c3`, or
    /// their teammates' names), run in the repository here.
    #[arg(long, num_args = 2, value_names = ["A", "B"], conflicts_with = "prompt")]
    pub diff: Option<Vec<String>>,
}

/// `runner pick`.
#[derive(Debug, Args)]
pub(crate) struct PickArgs {
    /// The item's id, as `runner show` takes it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// The winning candidate: its number (`2`, `c2`) or its teammate's name (`1-a.c2`).
    #[arg(value_name = "CANDIDATE")]
    pub candidate: String,
    /// The team workspace (as `runner show` takes it); default: the most recently updated
    /// team here.
    #[arg(value_name = "WORKSPACE")]
    pub workspace: Option<PathBuf>,
}

/// `runner logs`.
#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// The item's id or its teammate's name, as for `runner show`.
    #[arg(value_name = "ID")]
    pub id: String,
    /// The team workspace, as for `runner show`.
    #[arg(value_name = "WORKSPACE")]
    pub workspace: Option<PathBuf>,
    /// Which attempt (default: the last one started).
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
    /// The stderr log instead of stdout.
    #[arg(long)]
    pub stderr: bool,
    /// Keep printing what the attempt writes until it ends.
    #[arg(long, short)]
    pub follow: bool,
}

/// `runner review`.
#[derive(Debug, Args)]
pub(crate) struct ReviewArgs {
    /// The team workspace, as for `runner show`; default: the most recently updated team
    /// here.
    #[arg(value_name = "TEAM")]
    pub team: Option<PathBuf>,
    /// Also print each item's whole diff.
    #[arg(long)]
    pub diff: bool,
}

/// `runner accept` and `runner reject`.
#[derive(Debug, Args)]
pub(crate) struct DecideArgs {
    /// The items (ids or teammate names, as `runner review` lists them), in the order to
    /// take them.
    #[arg(value_name = "ITEM", required = true)]
    pub items: Vec<String>,
    /// The team workspace, as for `runner show`; default: the most recently updated team
    /// here.
    #[arg(long, value_name = "TEAM")]
    pub team: Option<PathBuf>,
}

/// `runner clean`.
#[derive(Debug, Args)]
pub(crate) struct CleanArgs {
    /// The team (e.g. todo-resolve-3, or a CSV team's name `out` or its output `out.csv`,
    /// both meaning `out.runner` here) or a workspace folder; default: every team of the
    /// store and here.
    #[arg(value_name = "TEAM")]
    pub team: Option<String>,
    /// Do not ask.
    #[arg(long, short)]
    pub yes: bool,
    /// Also delete the team's branches holding commits never merged into the branch its run
    /// started from (their work is lost); without it they are kept, as `git branch -d` would.
    #[arg(long)]
    pub force: bool,
    /// Instead of teams: remove the store's finished todo batches — every item ticked — with
    /// their tables and archives, keeping each one an open item still waits on, directly or
    /// through others (`@after:todo-N#K`, a fragment step's earlier steps), and saying why.
    #[arg(long, conflicts_with_all = ["team", "force"])]
    pub completed: bool,
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runner status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The team workspace (or its team.json, the batch's output CSV or the folder given to -o, its BATCH.md, or a todo-N.md);
    /// default: the most recently updated team here.
    #[arg(value_name = "WORKSPACE")]
    pub workspace: Option<PathBuf>,
    /// Show a run shared through this work queue instead (WORKSPACE: the batch's BATCH.md
    /// or input file): done, running per worker, pending, dead workers.
    #[arg(
        long,
        value_name = "redis://HOST[:PORT][/DB]",
        conflicts_with_all = ["watch", "list"],
        value_parser = crate::options::queue::QueueUrlParser
    )]
    pub queue: Option<crate::options::queue::QueueUrl>,
    /// With `--queue rediss://…`: the PEM file of the CA certificates its server's
    /// certificate must chain to.
    #[arg(long, value_name = "FILE", requires = "queue")]
    pub queue_ca: Option<PathBuf>,
    /// Refresh every second until the run ends.
    #[arg(long)]
    pub watch: bool,
    /// A short, deterministic summary for an agent to read.
    #[arg(long)]
    pub brief: bool,
    /// List every team known here (with --store, that store's too): state and counts.
    #[arg(long, conflicts_with_all = ["watch", "brief"])]
    pub list: bool,
    /// Also look for teams in this store (`DIR/teams/`).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// Flag a running teammate as stale when it has not checkpointed (written its
    /// working-context.md) for longer than this, e.g. 30m (default: 15m; the prompt asks
    /// for a checkpoint at least every 10 minutes).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub stale_after: Option<String>,
}

/// `runner merge`.
#[derive(Debug, Args)]
pub(crate) struct MergeArgs {
    /// The shard outputs (each with its `.shard.json` sidecar).
    #[arg(value_name = "SHARD.csv", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Where to write the merged output.
    #[arg(long, short, value_name = "FILE")]
    pub output: PathBuf,
    /// Also write one JUnit report for the whole batch: one suite (named after the output and
    /// the batch), one test case per row, from the merged rows.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// `runner runners`.
#[derive(Debug, Args)]
pub(crate) struct RunnersArgs {
    /// Also list the definitions in DIR/runners/ (new ones and overrides of built-ins).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// Also check and list this runner definition file (TOML; repeatable).
    #[arg(long, value_name = "FILE")]
    pub runner_file: Vec<PathBuf>,
    /// Also run the version command of definitions read from a file (--store, --runner-file):
    /// by default only the built-in definitions' programs are asked their version, since a
    /// repository's file names any program.
    #[arg(long)]
    pub versions: bool,
    /// Instead of listing, judge runner definition RUNNER (a name, or a .toml file) against
    /// recorded CLI transcripts, offline: the status, failure kind and reason each would get
    /// (see examples/transcripts/).
    #[arg(long, value_name = "RUNNER", requires = "transcripts")]
    pub check: Option<String>,
    /// The transcripts for --check (TOML files: stdout, stderr, exit_code, report, expect).
    #[arg(value_name = "TRANSCRIPT", requires = "check")]
    pub transcripts: Vec<PathBuf>,
}

/// Which task store to use.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct StoreArgs {
    /// Use this folder as the store (instead of .agent-tasks/ or ~/.agent-tasks/).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// Use the global store ~/.agent-tasks/.
    #[arg(long, conflicts_with = "project")]
    pub global: bool,
    /// Use the project store <git root>/.agent-tasks/.
    #[arg(long)]
    pub project: bool,
}

/// `runner list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// `human` (or `plain`): text; `json`: one JSON document with the open inbox items and
    /// the batches waiting, for lead agents (its shape: `ui::inbox::json`, README).
    // The values' own help is the batch commands' (a progress bar, event lines): not shown here.
    #[arg(
        long,
        value_name = "FORMAT",
        default_value = "human",
        hide_possible_values = true
    )]
    pub format: Format,
}

/// `runner add`.
#[derive(Debug, Args)]
pub(crate) struct AddArgs {
    /// The item: its first line is the title, further lines its continuation.
    #[arg(value_name = "TEXT")]
    pub text: String,
    /// Add it to the Ideas section (no checkpoint).
    #[arg(long)]
    pub idea: bool,
    /// The checkpoint's body (current task, progress, decisions, next steps, files) from a
    /// file, or `-` for stdin.
    #[arg(long, value_name = "FILE|-")]
    pub checkpoint: Option<String>,
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runner fragments`.
#[derive(Debug, Args)]
pub(crate) struct FragmentsArgs {
    /// Show this fragment in full (its steps' subjects and descriptions, its variables, its
    /// latest round); default: list them all.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runner apply`.
#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// The fragment (`<store>/fragments/NAME.toml`).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The value of each variable the fragment uses, e.g. version=1.2 (all of them, and no
    /// other).
    #[arg(value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runner reset`.
#[derive(Debug, Args)]
pub(crate) struct ResetArgs {
    /// The fragment.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The step (its key) to reopen with the steps after it; default: every step.
    #[arg(value_name = "STEP")]
    pub step: Option<String>,
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runner resolve`.
#[derive(Debug, Args)]
pub(crate) struct ResolveArgs {
    /// Do not ask: hand out the items given with --select, or every open Todo item.
    #[arg(long, short)]
    pub yes: bool,
    /// The inbox items to hand out, by number: a comma list of numbers and ranges (e.g.
    /// 1,3 or 2-4,6).
    #[arg(long, value_name = "N,N-M")]
    pub select: Option<String>,
    /// The inbox items to hand out, by stable id (repeatable): the `id` that `runner list
    /// --format json` shows (the item's checkpoint file, else a key of its text), which stays
    /// when numbers shift; an id no open item has any more is refused.
    #[arg(long = "id", value_name = "ID", conflicts_with = "select")]
    pub ids: Vec<String>,
    /// Keep the team workspace even when every item completed.
    #[arg(long)]
    pub keep_team: bool,
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Runner options.
    #[command(flatten)]
    pub run: RunArgs,
    /// The program for the `exec` runner and its arguments (after `--`).
    #[arg(last = true, value_name = "PROGRAM ARGS")]
    pub command: Vec<String>,
}

/// `runner run`.
#[derive(Debug, Args)]
pub(crate) struct RunTodoArgs {
    /// The batch file (todo-N.md) to run.
    #[arg(value_name = "todo-N.md")]
    pub batch: PathBuf,
    /// Also run the batch's unticked Ideas.
    #[arg(long)]
    pub include_ideas: bool,
    /// Keep the team workspace even when every item completed.
    #[arg(long)]
    pub keep_team: bool,
    /// Runner options.
    #[command(flatten)]
    pub run: RunArgs,
    /// The program for the `exec` runner and its arguments (after `--`).
    #[arg(last = true, value_name = "PROGRAM ARGS")]
    pub command: Vec<String>,
}

/// `runner batch`.
#[derive(Debug, Args)]
pub(crate) struct BatchArgs {
    /// The batch definition: YAML frontmatter (input, id_column, output, output_schema, ...)
    /// and the instruction template as its body.
    #[arg(value_name = "BATCH.md")]
    pub batch: Option<PathBuf>,
    /// The input CSV, or `-` for rows from stdin (kept in the workspace as stdin.csv;
    /// default: BATCH.md's `input`, or workers-input.csv beside it).
    #[arg(long, value_name = "FILE|-")]
    pub input: Option<PathBuf>,
    /// The input's field delimiter: one character, e.g. ';', or '\t' for a tab (default:
    /// BATCH.md's `delimiter`, else a tab for a .tsv input, else a comma). The output is
    /// always comma CSV.
    #[arg(long, value_name = "C")]
    pub delimiter: Option<String>,
    /// A file holding the instruction template (default: BATCH.md's body).
    #[arg(long, value_name = "FILE")]
    pub instruction: Option<PathBuf>,
    /// The column that identifies a row (default: the row number).
    #[arg(long, value_name = "COLUMN")]
    pub id_column: Option<String>,
    /// Where to write the output CSV (default: workers-output.csv beside BATCH.md or the
    /// input). A folder (existing, or ending in `/`) gets the default file name.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A JSON Schema file the report's `output` must satisfy.
    #[arg(long, value_name = "FILE")]
    pub output_schema: Option<PathBuf>,
    /// The folder the paths of `{file:COLUMN}` and `{image:COLUMN}` are relative to, and
    /// the only one they are read from (default: BATCH.md's `file_root`, else BATCH.md's
    /// folder, else the input's).
    #[arg(long, value_name = "DIR")]
    pub file_root: Option<PathBuf>,
    /// The most bytes of a file the instruction inlines with `{file:COLUMN}`, e.g. 1MiB
    /// (default: BATCH.md's `file_cap`, else 256KiB). A larger file fails its item.
    #[arg(long, value_name = "SIZE", value_parser = crate::inline::parse_cap)]
    pub file_cap: Option<u64>,
    /// The most bytes of an image the instruction sends with `{image:COLUMN}` (default:
    /// BATCH.md's `image_cap`, else 5MiB, the Anthropic API's limit).
    #[arg(long, value_name = "SIZE", value_parser = crate::inline::parse_cap)]
    pub image_cap: Option<u64>,
    /// Options shared by every command that runs teammates.
    #[command(flatten)]
    pub run: RunArgs,
    /// The program for the `exec` runner and its arguments (after `--`).
    #[arg(last = true, value_name = "PROGRAM ARGS")]
    pub command: Vec<String>,
}

/// Runner options shared by `resolve`, `run` and `batch`.
#[derive(Debug, Args, Clone)]
pub(crate) struct RunArgs {
    /// Runner definition to use (e.g. exec, claude, codex).
    #[arg(long, value_name = "NAME", conflicts_with = "runner_file", value_parser = Offered(runner_names), hide_possible_values = true)]
    pub runner: Option<String>,
    /// A runner definition file (TOML) to use instead of a named one.
    #[arg(long, value_name = "FILE")]
    pub runner_file: Option<PathBuf>,
    /// Teammates at once: N, 0 for as many as allowed (one per item, within the open-file
    /// budget), or a share of the CPUs like 50% (default: BATCH.md max_workers, else the
    /// number of CPUs).
    #[arg(long, short, value_name = "N|0|P%", allow_negative_numbers = true)]
    pub jobs: Option<String>,
    /// Time limit of one attempt, e.g. 90s, 10m, 1h (default: max_runtime_seconds, else 30m).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub timeout: Option<String>,
    /// Time between SIGTERM and SIGKILL when stopping a teammate.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        allow_hyphen_values = true
    )]
    pub grace: String,
    /// Extra attempts for an item that failed or timed out.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub retries: Option<u32>,
    /// Which outcomes are retried: a comma list of failed, timed_out, blocked.
    #[arg(long, value_name = "LIST", default_value = "failed,timed_out", value_parser = Offered(|| vec!["failed", "timed_out", "blocked", "failed,timed_out", "failed,timed_out,blocked"]), hide_possible_values = true)]
    pub retry_on: String,
    /// Delay before the first retry; doubled for each further one, with jitter.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "2s",
        allow_hyphen_values = true
    )]
    pub retry_delay: String,
    /// Longest an item waits in total for rate limits (the team pauses and re-queues a
    /// rate-limited attempt without using a retry); past it the item ends rate_limited
    /// (default: BATCH.md/runner.toml rate_limit_wait, else 1h).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub rate_limit_wait: Option<String>,
    /// Start an attempt only while the cost spent plus the expected cost of the running ones
    /// and this one stays within this many US dollars; the rest end skipped.
    #[arg(long, value_name = "USD", allow_negative_numbers = true)]
    pub max_cost_usd: Option<f64>,
    /// Stop starting items after N did not complete (the rest end skipped); `N:immediate`
    /// also stops the running ones.
    #[arg(long, value_name = "N[:immediate]", allow_negative_numbers = true)]
    pub max_fail: Option<String>,
    /// A command that must exit 0 for an item to complete (argv, split like a shell would,
    /// never run by one; `{column}` placeholders allowed).
    #[arg(long, value_name = "CMD")]
    pub verify: Option<String>,
    /// Give each item to N candidates (2..8), each its own teammate with its own folder
    /// (and worktree); the winner is chosen by --judge among those that passed.
    #[arg(long, value_name = "N")]
    pub best_of: Option<String>,
    /// The column giving each row its own fan-out: a number of candidates, or a list of
    /// runners as --best-of takes it; an empty cell: the batch's --best-of.
    #[arg(long, value_name = "COLUMN")]
    pub best_of_column: Option<String>,
    /// How the winner among passing candidates is chosen: passing (all run, then smaller
    /// diff, lower cost, earlier finish), first (first to pass; the others are stopped),
    /// score CMD (CMD prints a number in each candidate's worktree; highest wins), person
    /// (the item waits for `runner pick`), or stage NAME (BATCH.md's stage NAME reads every
    /// candidate that passed, with its diff, and names the winner in its report's `winner`).
    #[arg(long, value_name = "RULE")]
    pub judge: Option<String>,
    /// Model passed to the agent CLI.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// An extra argument passed to the agent CLI (repeatable).
    #[arg(long = "agent-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub agent_args: Vec<String>,
    /// Set a runner definition variable, NAME=VALUE (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// Cap of each stdout/stderr log, bytes (head and tail kept).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 16 * 1024 * 1024,
        allow_negative_numbers = true
    )]
    pub log_cap: u64,
    /// Output style.
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// Run only some items: `failed` (those the existing output or batch file shows neither
    /// completed nor blocked), `blocked` (those it shows blocked: they wait for a person) or a
    /// comma list of ids. Other rows of the existing output are kept as they are.
    #[arg(long, value_name = "failed|blocked|ID,...")]
    pub only: Option<String>,
    /// Run the K-th of N stable slices of the batch (by hash of the item id), e.g. 2/4;
    /// `auto` takes K from JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs, 0-based).
    #[arg(long, value_name = "K/N|auto")]
    pub shard: Option<String>,
    /// The order items start in: `input`, or `longest-first` by expected duration (the
    /// `--weight-column`'s number, else the item's duration in the previous output). The
    /// output keeps the input's order.
    #[arg(long, value_enum)]
    pub order: Option<crate::options::order::Order>,
    /// The column holding each row's expected duration (any unit) for `--order
    /// longest-first`.
    #[arg(long, value_name = "COLUMN")]
    pub weight_column: Option<String>,
    /// Be one worker of a run shared through a Redis (or Valkey) work queue: every process
    /// started with the same batch and queue takes items from it until none is left; the
    /// first seeds it. `runner collect` writes the whole output; `runner status --queue`
    /// shows the run.
    #[arg(
        long,
        value_name = "redis://HOST[:PORT][/DB]",
        value_parser = crate::options::queue::QueueUrlParser
    )]
    pub queue: Option<crate::options::queue::QueueUrl>,
    /// The PEM file of the CA certificates a `rediss://` queue's server certificate must
    /// chain to (a private CA), instead of the system's.
    #[arg(long, value_name = "FILE")]
    pub queue_ca: Option<PathBuf>,
    /// N for `--shard auto` (also RUNNER_SHARD_COUNT).
    #[arg(long, value_name = "N")]
    pub shard_count: Option<u32>,
    /// Also write a JUnit XML report: one test case per item.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write the run as Chrome trace events (open it in Perfetto or chrome://tracing):
    /// one lane per concurrent slot, one bar per attempt.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Tell TARGET when the run ends, when items are blocked waiting for a person, and when
    /// the team stops itself — each once per run, a wave of blocked items in one message:
    /// an http(s) webhook URL (a JSON POST with a `text` field, as Slack, Discord and
    /// Mattermost accept), `bell` (the terminal's bell), or a command line (the
    /// notification as JSON on its stdin). Repeatable; replaces `notify` of the file.
    #[arg(long, value_name = "TARGET")]
    pub notify: Vec<String>,
    /// Serve a live page of the run while it goes on (`runner serve`'s page): on 127.0.0.1,
    /// a free port, with a random token in the URL the run prints first (and `runner status`
    /// names while it runs). The page goes when the run ends; `runner serve` shows it after.
    #[arg(long)]
    pub serve: bool,
    /// Show the plan (items, argv, prompts, dependencies, shard) without running or writing.
    #[arg(long)]
    pub dry_run: bool,
    /// With `--runner openai` or `anthropic`: send every row in one OpenAI Batch API job
    /// (`/v1/batches`) or Anthropic Message Batch (`/v1/messages/batches`) — half the price,
    /// results within 24 hours — instead of one request each. The job's ids are kept in the
    /// workspace: after a crash or Ctrl-C the same command picks it up without sending
    /// twice. With `stages:`, one job per stage; not with `runner_column` or `model_column`.
    #[arg(long)]
    pub batch_api: bool,
    /// Start from batch files (BATCH.md, input, instruction, schema, runner definition) that
    /// changed while an earlier sandboxed run was going on, after you checked them: teammates
    /// could write them, and without this the run refuses to start (exit 2).
    #[arg(long)]
    pub accept_changes: bool,
    /// Isolation: `worktree` runs each teammate in its own git worktree and branch
    /// `runner/<team>/<teammate>` (default: none).
    #[arg(long, value_name = "none|worktree", value_parser = Offered(|| vec!["none", "worktree"]), hide_possible_values = true)]
    pub isolate: Option<String>,
    /// With --isolate worktree: merge completed branches back one by one (`git merge
    /// --no-ff`, in item order) through the merge queue; a conflict, or a merged tree that
    /// fails --verify-merged, fails that item and keeps its branch. `--merge=review` leaves
    /// them awaiting review instead (`runner review`, `runner accept`, `runner reject`).
    #[arg(long, value_name = "review", num_args = 0..=1, require_equals = true, default_missing_value = "queue", value_parser = ["queue", "review"])]
    pub merge: Option<String>,
    /// With --merge: a command run on each merged tree before the target branch moves (argv,
    /// split like a shell would, never run by one; e.g. the project's tests). A merge it
    /// fails is undone and its item fails `merge_failed`, its branch kept.
    #[arg(long, value_name = "CMD")]
    pub verify_merged: Option<String>,
    /// With --merge: rows that will touch the same files (named in `files_column`, or
    /// modified by an earlier run of the same rows) run one after another instead of in
    /// parallel, each in a worktree made from the target after the one before it merged;
    /// other rows still run in parallel. `--dry-run` shows the chains.
    #[arg(long)]
    pub serialize_overlaps: bool,
    /// With --merge: who gets an item whose branch conflicts with the target. `agent` (the
    /// run's own runner and model) or `RUNNER[:MODEL]` (a runner definition and model) works
    /// in a fresh worktree holding the merge in progress, markers in its files; its result
    /// must leave no markers and pass --verify and --verify-merged, then it lands. `fail`
    /// (the default): the item fails `merge_conflict`, its branch kept.
    #[arg(long, value_name = "agent|RUNNER[:MODEL]|fail")]
    pub on_conflict: Option<String>,
    /// With --on-conflict: how many times a conflicting item is handed to a resolver before
    /// it fails (1 to 5; default 1). Each attempt counts in the item's cost and time.
    #[arg(long, value_name = "N")]
    pub conflict_attempts: Option<u32>,
    /// With --isolate worktree: an ignored file or folder to copy into each worktree
    /// (relative to the repository root; repeatable).
    #[arg(long = "worktree-copy", value_name = "PATH")]
    pub worktree_copy: Vec<PathBuf>,
    /// With --isolate worktree: a command run once in each new worktree before the agent
    /// (argv, no shell); its failure fails the attempt.
    #[arg(long, value_name = "CMD")]
    pub worktree_setup: Option<String>,
    /// Write agents' values into output CSVs as they are. By default a value that starts with
    /// = + - @, a tab or a carriage return gets a leading ' so spreadsheets show it as text
    /// instead of running it as a formula.
    #[arg(long)]
    pub keep_formulas: bool,
    /// Keep each completed item's teammate folder (its prompt and every attempt's full
    /// logs). By default a completed item is compacted into the workspace's
    /// `completed.jsonl` (prompt, the last 4 KB of its log, its working context) and its
    /// folder removed; items that did not complete always keep theirs.
    #[arg(long)]
    pub keep_logs: bool,
    /// Confine each teammate: `landlock` runs it in its own Linux Landlock domain, writing
    /// only its working directory, its teammate folder and what its runner definition
    /// declares; it cannot signal the runner or its siblings. `auto` (the default, unless
    /// BATCH.md/runner.toml say `sandbox`) is landlock where the kernel has it (Linux 6.12+)
    /// and the team workspace lies outside what teammates write, else none, saying why on
    /// the first line. `none` opts out.
    #[arg(long, value_name = "auto|none|landlock", value_parser = Offered(|| vec!["auto", "none", "landlock"]), hide_possible_values = true)]
    pub sandbox: Option<String>,
    /// Keep the team workspace (journal, records, teammate folders, lock) in DIR. By default
    /// it lies beside the output (`<output stem>.runner/`, a store's `teams/<team>/`), or in
    /// the user's state folder (`$XDG_STATE_HOME/teammate-runner/`, else
    /// `~/.local/state/teammate-runner/`) when teammates could write beside the output.
    /// Under the sandbox it is refused inside the folders teammates write. Give the same
    /// DIR to `status`, `show` and `logs`.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}
