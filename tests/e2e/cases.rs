//! The cases every agent CLI is put through, written once: each is a function generic over
//! [`Agent`], the wiring of one CLI (where its binary is, how its stand-in API plays a
//! [`Script`], what config and environment it runs with, what else its runs must show).
//! `table.rs` names, per CLI, the cases it runs and with what numbers; a CLI's own module
//! holds its wiring and the tests only it has.
//!
//! Adding a CLI: its wiring (a stand-in API that plays [`Script`], an [`Agent`] impl) in a
//! module of its own, and one row in `table.rs`.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{self, Cli, Log, Run, Sandbox};

/// What a scripted model API does, in every CLI's stand-in (each plays it in its API's
/// terms).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Script<F> {
    /// The work with the CLI's own tools (write the report file at the path the prompt
    /// names; aider: edit `notes.txt` and report in its reply), then a short final text.
    WriteReport,
    /// The report as a ```json block of the first answer's text, no tool call.
    ReportInText,
    /// Accept every request and never answer (logged as `(stalling)`).
    Stall,
    /// The first call fails with the API's 429; then as the stand-in goes on (see each
    /// CLI's stand-in: the work with its tools, or the report in the text).
    RateLimitOnce,
    /// Every call fails with this error of the CLI's API.
    Fail(F),
}

/// The key a run gives the CLI (every stand-in accepts [`Key::Right`] only).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Key {
    /// The stand-in's key (`sk-test`).
    Right,
    /// Another key, which the API rejects.
    Wrong(&'static str),
    /// No key at all.
    Missing,
}

impl Key {
    /// The value to put in the CLI's key variable; `None` leaves it unset.
    pub(crate) fn value(self) -> Option<&'static str> {
        match self {
            Key::Right => Some(crate::chat_api::API_KEY),
            Key::Wrong(key) => Some(key),
            Key::Missing => None,
        }
    }
}

/// A running stand-in for a CLI's model API.
pub(crate) trait StandIn {
    /// Its request log.
    fn log(&self) -> &Log;
    /// How many model turns it was asked for so far (the CLI's main conversation; side
    /// calls such as a title or a model router are not counted).
    fn turns(&self) -> usize;
}

/// The runner flags (besides `--runner` and `--timeout`) and the environment of one run.
pub(crate) struct Setup {
    /// E.g. `["--model", "e2e/e2e-model"]`.
    pub args: Vec<String>,
    /// Added to the sandbox's clean environment.
    pub env: Vec<(&'static str, String)>,
}

/// One agent CLI's wiring: a row of `table.rs` runs the cases on it.
pub(crate) trait Agent {
    /// The built-in runner definition's name (and the command's name).
    const NAME: &'static str;
    /// The binary under `target/e2e-<NAME>/`, as `.ci/run` installs it.
    const BIN: &'static str;
    /// What its `--version` prints.
    const VERSION_HAS: &'static str;
    /// `--timeout` of a run that should end by itself.
    const TIMEOUT: &'static str = "90s";
    /// The summary of the report its [`Script::WriteReport`] gives.
    const SUMMARY: &'static str = "wrote the report";
    /// More runner flags for a [`Script::WriteReport`] run (codex: a model slug it offers
    /// `apply_patch` for).
    const WRITE_ARGS: &'static [&'static str] = &[];
    /// An error its API answers with ([`Script::Fail`]).
    type Fault: Clone;
    /// Its running stand-in.
    type Api: StandIn;

    /// Start its stand-in, playing `script`.
    fn start(script: Script<Self::Fault>) -> impl Future<Output = Self::Api>;

    /// A fresh sandbox for a run.
    fn sandbox(cli: &Cli) -> Sandbox {
        Sandbox::new(cli)
    }

    /// Write its config files in `sb` for `api`; the runner flags and environment that point
    /// it at `api` with `key`.
    fn setup(cli: &Cli, sb: &Sandbox, api: &Self::Api, key: Key) -> Setup;

    /// Ready `cwd`, the working directory of a [`Script::WriteReport`] run (aider: the file
    /// it edits).
    fn prepare(_cwd: &Path) {}

    /// The working directory of the whole-loop run (the sandbox folder; opencode: `work/`,
    /// so that the team workspace lies outside it).
    fn loop_cwd(sb: &Sandbox) -> PathBuf {
        sb.path().to_path_buf()
    }

    /// What else the whole loop must show once the item completed (`row`).
    fn check_completed(sb: &Sandbox, r: &Run, api: &Self::Api, row: &BTreeMap<String, String>);

    /// What else a run under the Landlock sandbox must show once it completed: by default,
    /// the report file in the teammate folder.
    fn check_sandboxed(sb: &Sandbox, _r: &Run, _api: &Self::Api) {
        assert_report_file(sb);
    }

    /// What else the report-in-the-text case must show.
    fn check_text(_sb: &Sandbox, _api: &Self::Api) {}

    /// What every failed run of this CLI must show besides the [`Failure`]'s own checks.
    fn check_failed(_sb: &Sandbox, _api: &Self::Api, _row: &BTreeMap<String, String>) {}
}

/// The report file the CLI's tool wrote in the teammate folder (a run under Landlock).
#[track_caller]
pub(crate) fn assert_report_file(sb: &Sandbox) {
    assert!(sb.teammate().join("work/report.json").is_file());
}

/// The CLI to test, or `None` having skipped ([`support::cli_or_skip`]).
pub(crate) fn find<A: Agent>(test: &str) -> Option<Cli> {
    support::cli_or_skip(A::NAME, A::BIN, A::VERSION_HAS, test)
}

/// `--runner NAME --timeout TIMEOUT <setup's flags> EXTRA`, and the environment.
fn argv<A: Agent>(setup: Setup, timeout: &str, extra: &[&str]) -> (Vec<String>, Setup) {
    let mut args: Vec<String> = ["--runner", A::NAME, "--timeout", timeout]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(setup.args.iter().cloned());
    args.extend(extra.iter().map(|s| s.to_string()));
    (args, setup)
}

/// `runner batch` with the CLI pointed at `api` (see [`argv`]), from `cwd`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_in<A: Agent>(
    cli: &Cli,
    sb: &Sandbox,
    cwd: &Path,
    api: &A::Api,
    key: Key,
    timeout: &str,
    extra: &[&str],
) -> Run {
    let (args, setup) = argv::<A>(A::setup(cli, sb, api, key), timeout, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    sb.run_in(cwd, &args, &setup.env).await
}

/// [`run_in`] from the sandbox folder.
pub(crate) async fn run<A: Agent>(
    cli: &Cli,
    sb: &Sandbox,
    api: &A::Api,
    key: Key,
    timeout: &str,
    extra: &[&str],
) -> Run {
    run_in::<A>(cli, sb, sb.path(), api, key, timeout, extra).await
}

// ---------------------------------------------------------------------------------------
// The cases

/// The whole loop with the real CLI: the prompt on stdin, the CLI's own tool doing the work
/// (writing `$RUNNER_REPORT`), its output parsed, the report judged; then what the CLI's
/// [`Agent::check_completed`] adds (session, usage, what the API saw), nothing unexpected
/// requested, nothing left running.
pub(crate) async fn writes_the_report_and_the_item_completes<A: Agent>(test: &str) {
    let Some(cli) = find::<A>(test) else {
        return;
    };
    eprintln!("using {} ({})", cli.bin.display(), cli.version);
    let api = A::start(Script::WriteReport).await;
    let sb = A::sandbox(&cli);
    let cwd = A::loop_cwd(&sb);
    A::prepare(&cwd);
    let r = run_in::<A>(&cli, &sb, &cwd, &api, Key::Right, A::TIMEOUT, A::WRITE_ARGS).await;
    let row = sb.assert_completed_with(&r, api.log(), A::SUMMARY);
    A::check_completed(&sb, &r, &api, &row);
    api.log().assert_nothing_unexpected();
    sb.assert_no_survivors();
    eprintln!("completed in {:.1?}", r.took);
}

/// The report only in the CLI's final text (no tool call): still `completed`, in one turn.
pub(crate) async fn report_in_the_final_text_completes<A: Agent>(test: &str) {
    let Some(cli) = find::<A>(test) else {
        return;
    };
    let api = A::start(Script::ReportInText).await;
    let sb = A::sandbox(&cli);
    let r = run::<A>(&cli, &sb, &api, Key::Right, A::TIMEOUT, &[]).await;
    sb.assert_completed(&r, api.log());
    assert_eq!(
        api.turns(),
        1,
        "one turn, no tool call: {}",
        sb.context(&r, api.log())
    );
    A::check_text(&sb, &api);
    api.log().assert_nothing_unexpected();
    sb.assert_no_survivors();
}

/// A stalled API and a short `--timeout`: `timed_out` within `within` (the limit, the
/// runner's 5 s grace, the CLI's start), the request reached the API, and no process of
/// the CLI is left.
pub(crate) async fn stalled_api_times_out_and_leaves_no_process<A: Agent>(
    test: &str,
    timeout: &str,
    within: Duration,
) {
    let Some(cli) = find::<A>(test) else {
        return;
    };
    let api = A::start(Script::Stall).await;
    let sb = A::sandbox(&cli);
    let r = run::<A>(&cli, &sb, &api, Key::Right, timeout, &[]).await;
    let log = api.log();
    sb.assert_outcome(&r, log, 1, "timed_out", "timed_out");
    assert!(
        log.lines().iter().any(|l| l.contains("(stalling)")),
        "the request reached the API: {}",
        log.dump()
    );
    assert!(r.took < within, "{timeout} limit + 5s grace: {r:?}");
    sb.assert_no_survivors();
    eprintln!("timed out as expected in {:.1?}", r.took);
}

/// The whole loop under the default `--sandbox auto`, Landlock here (the output and the
/// workspace outside the working directory `work/`): the CLI does its work and keeps its
/// state where its definition's `[sandbox] writes` say, and nothing else
/// ([`Agent::check_sandboxed`]).
pub(crate) async fn completes_under_the_landlock_sandbox<A: Agent>(test: &str) {
    let Some(cli) = find::<A>(test) else {
        return;
    };
    let api = A::start(Script::WriteReport).await;
    let sb = A::sandbox(&cli);
    A::prepare(&sb.path().join("work"));
    let (args, setup) = argv::<A>(
        A::setup(&cli, &sb, &api, Key::Right),
        A::TIMEOUT,
        A::WRITE_ARGS,
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some(r) = sb.run_sandboxed(&args, &setup.env).await else {
        return;
    };
    sb.assert_completed_with(&r, api.log(), A::SUMMARY);
    A::check_sandboxed(&sb, &r, &api);
    sb.assert_no_survivors();
}

/// A 429 with rate limits allowed to wait (`--rate-limit-wait 1m`, and `extra`): the team
/// pauses (the CLI names no time, so the back-off is 2 s ± 25%), the attempt is made again
/// without using a retry, and the second CLI process completes; `turns` model calls in all.
pub(crate) async fn rate_limit_pauses_the_team_and_the_next_attempt_completes<A: Agent>(
    test: &str,
    extra: &[&str],
    turns: usize,
) {
    let Some(cli) = find::<A>(test) else {
        return;
    };
    let api = A::start(Script::RateLimitOnce).await;
    let sb = A::sandbox(&cli);
    let mut args = vec!["--rate-limit-wait", "1m"];
    args.extend_from_slice(extra);
    let r = run::<A>(&cli, &sb, &api, Key::Right, A::TIMEOUT, &args).await;
    let row = sb.row();
    let context = || sb.context(&r, api.log());
    assert_eq!(
        (r.code, row["status"].as_str(), row["attempts"].as_str()),
        (0, "completed", "2"),
        "{row:?}\n{}",
        context()
    );
    assert!(r.stdout.contains("PAUSED  rate limited"), "{}", context());
    assert_eq!(api.turns(), turns, "{}", context());
    assert!(
        r.took >= Duration::from_millis(1500),
        "waited: {:?}",
        r.took
    );
    sb.assert_no_survivors();
}

/// One 429, then answers, with the CLI's own retries on: the CLI waits it out itself, so the
/// runner never sees the rate limit and the item completes in its first attempt (a short
/// rate limit never costs the work done so far); `turns` model calls in all.
pub(crate) async fn one_429_is_retried_by_the_cli_within_the_attempt<A: Agent>(
    test: &str,
    turns: usize,
) {
    let Some(cli) = find::<A>(test) else {
        return;
    };
    let api = A::start(Script::RateLimitOnce).await;
    let sb = A::sandbox(&cli);
    let r = run::<A>(&cli, &sb, &api, Key::Right, A::TIMEOUT, A::WRITE_ARGS).await;
    let row = sb.assert_completed(&r, api.log());
    assert_eq!(row["attempts"], "1", "{row:?}");
    assert_eq!(
        api.turns(),
        turns,
        "the 429, its retry, the final turn: {}",
        sb.context(&r, api.log())
    );
    assert!(!r.stdout.contains("PAUSED"), "{r:?}");
    sb.assert_no_survivors();
}

/// The words a failure's reason must hold.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Words {
    /// Each, in any case.
    AnyCase(&'static [&'static str]),
    /// Each, exactly.
    Exact(&'static [&'static str]),
}

/// How many model turns a failure may take ([`StandIn::turns`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Calls {
    /// Not checked.
    Any,
    /// Exactly this many.
    Exactly(usize),
    /// At most this many.
    AtMost(usize),
    /// At least this many.
    AtLeast(usize),
}

/// A run the CLI gives up on: what its stand-in does and what the item must show. Built with
/// [`Failure::fault`] or [`Failure::new`] and the methods below; run by [`fails`].
pub(crate) struct Failure<A: Agent> {
    script: Script<A::Fault>,
    kind: &'static str,
    key: Key,
    reason: Words,
    exit_code: Option<&'static str>,
    calls: Calls,
    within: Duration,
    timeout: &'static str,
    args: &'static [&'static str],
    then: Option<fn(&Sandbox, &A::Api)>,
}

impl<A: Agent> Failure<A> {
    /// The stand-in plays `script` and the item fails as `kind` (the key right, any reason,
    /// any exit code and call count, within 45 s, at the CLI's `--timeout`).
    pub(crate) fn new(script: Script<A::Fault>, kind: &'static str) -> Self {
        Failure {
            script,
            kind,
            key: Key::Right,
            reason: Words::AnyCase(&[]),
            exit_code: None,
            calls: Calls::Any,
            within: Duration::from_secs(45),
            timeout: A::TIMEOUT,
            args: &[],
            then: None,
        }
    }

    /// Every call fails with `fault`, and the item as `kind`.
    pub(crate) fn fault(fault: A::Fault, kind: &'static str) -> Self {
        Self::new(Script::Fail(fault), kind)
    }

    /// The CLI is given `key`.
    pub(crate) fn key(mut self, key: Key) -> Self {
        self.key = key;
        self
    }

    /// The reason holds each of `words`, in any case.
    pub(crate) fn reason(mut self, words: &'static [&'static str]) -> Self {
        self.reason = Words::AnyCase(words);
        self
    }

    /// The reason holds each of `words` exactly.
    pub(crate) fn reason_exact(mut self, words: &'static [&'static str]) -> Self {
        self.reason = Words::Exact(words);
        self
    }

    /// The `exit_code` column (the CLI's own exit code).
    pub(crate) fn exit_code(mut self, code: &'static str) -> Self {
        self.exit_code = Some(code);
        self
    }

    /// The model turns the API saw.
    pub(crate) fn calls(mut self, calls: Calls) -> Self {
        self.calls = calls;
        self
    }

    /// The run ends within `secs` seconds.
    pub(crate) fn within(mut self, secs: u64) -> Self {
        self.within = Duration::from_secs(secs);
        self
    }

    /// `--timeout` of the run.
    pub(crate) fn timeout(mut self, timeout: &'static str) -> Self {
        self.timeout = timeout;
        self
    }

    /// More runner flags.
    pub(crate) fn args(mut self, args: &'static [&'static str]) -> Self {
        self.args = args;
        self
    }

    /// A last check of what the run left and what the stand-in saw.
    pub(crate) fn then(mut self, check: fn(&Sandbox, &A::Api)) -> Self {
        self.then = Some(check);
        self
    }
}

/// An API error (or a missing key) the CLI gives up on: the run exits 1, the item is
/// `failed` with a reason that quotes the CLI and the failure kind, the closing summary
/// names the reason, the API saw the calls the CLI's retries make, it gave up in time, and
/// nothing is left running.
pub(crate) async fn fails<A: Agent>(test: &str, f: Failure<A>) {
    let Some(cli) = find::<A>(test) else {
        return;
    };
    eprintln!("using {} ({})", cli.bin.display(), cli.version);
    let api = A::start(f.script).await;
    let sb = A::sandbox(&cli);
    let r = run::<A>(&cli, &sb, &api, f.key, f.timeout, f.args).await;
    let context = || sb.context(&r, api.log());

    assert_eq!(r.code, 1, "an item did not complete: {}", context());
    let row = sb.row();
    assert_eq!(row["status"], "failed", "{row:?}\n{}", context());
    let reason = row["error"].as_str();
    assert!(!reason.is_empty(), "a reason is given: {row:?}");
    let (words, any_case) = match f.reason {
        Words::AnyCase(w) => (w, true),
        Words::Exact(w) => (w, false),
    };
    for word in words {
        let found = if any_case {
            reason.to_lowercase().contains(&word.to_lowercase())
        } else {
            reason.contains(word)
        };
        assert!(
            found,
            "the reason quotes {} ({word:?}): {row:?}\n{}",
            A::NAME,
            context()
        );
    }
    assert_eq!(row["failure_kind"], f.kind, "{row:?}\n{}", context());
    if let Some(code) = f.exit_code {
        assert_eq!(row["exit_code"], code, "{} exits {code}: {row:?}", A::NAME);
    }
    let start: String = reason.chars().take(40).collect();
    assert!(
        r.stdout.contains(&start),
        "the closing summary names the reason: {r:?}"
    );
    let turns = api.turns();
    let ok = match f.calls {
        Calls::Any => true,
        Calls::Exactly(n) => turns == n,
        Calls::AtMost(n) => turns <= n,
        Calls::AtLeast(n) => turns >= n,
    };
    assert!(
        ok,
        "{turns} model call(s), expected {:?} (the CLI's retries as set): {}",
        f.calls,
        context()
    );
    assert!(
        r.took < f.within,
        "gave up within {:?}: {:.1?}",
        f.within,
        r.took
    );
    A::check_failed(&sb, &api, &row);
    if let Some(check) = f.then {
        check(&sb, &api);
    }
    sb.assert_no_survivors();
    eprintln!("failed as expected in {:.1?}: {}", r.took, row["error"]);
}
