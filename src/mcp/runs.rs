//! A run started by `todo_resolve` or `batch_run`, in this process: the command's plan
//! ([`crate::commands::batch::plan`], [`crate::commands::resolve::prepare`]) with one more
//! sink, [`Progress`], which hands the tool the run's events as values (no JSON lines are
//! printed or parsed), then the pipeline on a thread of its own (it builds its own runtime).
//!
//! One run at a time per server: the pipeline ends, when a run ends, every process the runner
//! started ([`crate::run::supervise::descendants::end_run`]), so a second run in the same
//! process would lose its teammates. A second call while a run goes on is refused, naming it
//! (after waiting for a run already interrupted to end: a lead that retries the call it
//! cancelled gets its run). The run's interrupts come through the plan's own channel
//! ([`crate::schedule::plan::Plan::interrupt`]), never a signal the server would hear too: a
//! cancelled waited call, [`Runs::stop`] (the `stop` tool), and [`Runs::shutdown`] when the
//! server ends.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam};
use rmcp::service::RequestContext;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::cli::{BatchArgs, ResolveArgs};
use crate::commands::resolve::{self, Resolved, ResolvedRun};
use crate::error::{EXIT_INCOMPLETE, Error, Result};
use crate::report::best_of::Decided;
use crate::run::backend::Backend;
use crate::run::events::{Event, Reporter};
use crate::run::supervise::descendants;
use crate::schedule::plan::Plan;
use crate::sink::Sink;

/// How long an interrupted run may take to stop its teammates and write its outputs when the
/// server ends, before it is interrupted again (then everything it started is killed).
const STOP_WAIT: Duration = Duration::from_secs(120);

/// What a run tool asks for: a command whose plan the tool runs.
pub(crate) enum Start {
    /// `runner batch …`.
    Batch(Box<BatchArgs>),
    /// `runner resolve --yes --select … …`.
    Resolve(Box<ResolveArgs>),
}

/// A run tool's command and the CLI command line it stands for (after `runner`, as parsed
/// by [`super::argv::parse`]): the team records that line as its run's, so its resume
/// command is the CLI's, agent command included.
pub(crate) struct Launch {
    /// The command.
    pub start: Start,
    /// Its arguments after `runner`.
    pub argv: Vec<std::ffi::OsString>,
}

/// A run made ready by its command: nothing to run (the exit code), or a plan.
enum Ready {
    Done(i32),
    Batch(Box<Plan>, Arc<dyn Backend>),
    Todo(Box<ResolvedRun>),
}

impl Ready {
    /// The command's checks and preparation (`resolve` moves the chosen items here).
    ///
    /// Errors: the command's (bad input names its file and line, as the CLI prints it).
    fn of(start: Start) -> Result<Ready> {
        match start {
            Start::Batch(args) => {
                let (plan, backend) = crate::commands::batch::plan(*args)?;
                Ok(Ready::Batch(Box::new(plan), backend))
            }
            Start::Resolve(args) => Ok(match resolve::prepare(*args)? {
                Resolved::Done(code) => Ready::Done(code),
                Resolved::Run(run) => Ready::Todo(run),
            }),
        }
    }

    /// Add `sink` to the plan's sinks and `interrupt` as its interrupts besides the signals,
    /// and record `command_line` (program first) as the run's (nothing when nothing runs).
    fn wire(
        &mut self,
        sink: Box<dyn Sink>,
        interrupt: mpsc::UnboundedReceiver<()>,
        command_line: Vec<String>,
    ) {
        let plan = match self {
            Ready::Done(_) => None,
            Ready::Batch(plan, _) => Some(plan.as_mut()),
            Ready::Todo(run) => run.plan.as_mut(),
        };
        if let Some(plan) = plan {
            plan.sinks.push(sink);
            plan.interrupt = Some(interrupt);
            plan.spec.command_line = Some(command_line);
        }
    }

    /// With `serve` (`--serve`, not a dry run): the run's live page, started here rather than
    /// by [`crate::commands::batch::carry_out`] so the answer can name its URL; the plan's
    /// `serve` is then cleared, so the page is not started twice. It lives as long as the
    /// returned value.
    ///
    /// Errors: the page cannot listen (exit 3).
    fn page(&mut self) -> Result<Option<crate::serve::Live>> {
        let plan = match self {
            Ready::Done(_) => None,
            Ready::Batch(plan, _) => Some(plan.as_mut()),
            Ready::Todo(run) => run.plan.as_mut(),
        };
        let Some(plan) = plan else { return Ok(None) };
        let live = crate::commands::serve::for_run(plan)?;
        if live.is_some() {
            plan.spec.settings.serve = false;
        }
        Ok(live)
    }

    /// What the answer says of the run: the todo items it moved (their ids and titles, read
    /// back from the batch file) and the file `status` follows it by (the output table, the
    /// batch file: both outlive an archived workspace).
    fn about(&self) -> (Option<Value>, Option<PathBuf>) {
        match self {
            Ready::Done(_) => (None, None),
            Ready::Batch(plan, _) => (None, Some(plan.output.clone())),
            Ready::Todo(run) => {
                let text = std::fs::read_to_string(&run.batch).unwrap_or_default();
                let doc = crate::source::todo::TodoDocument::parse(&text);
                let items: Vec<Value> = crate::source::todo::open_items(&doc)
                    .into_iter()
                    .map(|i| json!({"id": i.key(), "title": i.title}))
                    .collect();
                (Some(Value::Array(items)), Some(run.batch.clone()))
            }
        }
    }

    /// Carry it out ([`crate::commands::batch::carry_out`]: the pipeline, its summary on the
    /// server's log) and return the exit code.
    ///
    /// Errors: the pipeline's.
    fn run(self) -> Result<i32> {
        match self {
            Ready::Done(code) => Ok(code),
            Ready::Batch(plan, backend) => crate::commands::batch::carry_out(*plan, backend),
            Ready::Todo(r) => {
                crate::commands::todo_run::run_plan(r.plan, r.format, &r.batch, r.backend)
            }
        }
    }
}

/// What a run tells the tool that started it.
enum Note {
    /// `run_started`: the team, its workspace, how many items, how many of them an earlier
    /// run completed (progress counts on from there).
    Started {
        team: String,
        workspace: String,
        total: Option<u64>,
        resumed: u64,
    },
    /// `item_finished`: the item's id and status; for a `best_of` item, its winner
    /// ([`winner_of`]).
    Finished(String, Option<Value>),
    /// `warning`: its message.
    Warning(String),
    /// `run_finished` or `run_ended`, as its journal line.
    Summary(Value),
    /// The pipeline returned: the exit code, or the error as the CLI prints it.
    Ended(std::result::Result<i32, String>),
}

/// The sink that hands a run's events to its tool (sends never block; once the tool has
/// answered, nobody listens and the events go only to the journal and the other sinks).
struct Progress(mpsc::UnboundedSender<Note>);

impl Reporter for Progress {
    fn event(&mut self, event: &Event) {
        let note = match event {
            Event::RunStarted {
                team,
                workspace,
                total,
                resumed,
                ..
            } => Note::Started {
                team: team.clone(),
                workspace: workspace.to_string_lossy().into_owned(),
                total: *total,
                resumed: *resumed,
            },
            Event::ItemFinished(o) => {
                Note::Finished(format!("{} {}", o.id, o.status), winner_of(o))
            }
            Event::Warning { message, .. } => Note::Warning(message.clone()),
            Event::RunFinished(_) | Event::RunEnded { .. } => {
                match event.to_line().and_then(|l| l.ok()) {
                    Some(line) => match serde_json::from_str(&line) {
                        Ok(v) => Note::Summary(v),
                        Err(_) => return,
                    },
                    None => return,
                }
            }
            _ => return,
        };
        let _ = self.0.send(note);
    }
}

/// What a `best_of` item's answer says of it: its id, status, `winner` (`1-a.c2 (claude)`,
/// empty without one), the rule that chose it (or why none), and how many of its
/// `candidates` passed. `None` for an item not given to candidates.
fn winner_of(o: &crate::run::record::outcome::Outcome) -> Option<Value> {
    let b = o.best_of.as_deref()?;
    Some(winner_json(&o.id, o.status, &b.decided()))
}

/// One of `winners` (`batch_run`'s waited answer, `status`): a best-of item's id, status,
/// winner, rule and how many candidates passed.
pub(crate) fn winner_json(id: &str, status: crate::report::ItemStatus, d: &Decided) -> Value {
    json!({
        "id": id,
        "status": status.to_string(),
        "winner": d.winner,
        "rule": d.rule,
        "candidates": d.candidates,
    })
}

impl Sink for Progress {
    /// The tool's progress notifications, not a file.
    fn writes(&self) -> Vec<crate::sink::PlanFile> {
        Vec::new()
    }
}

/// The error text of a tool whose command failed: what the CLI prints, and its exit code.
pub(crate) fn error_text(e: &Error) -> String {
    format!("error: {e} (exit {})", e.exit_code())
}

/// A tool error saying `text` (what was wrong and what to give instead).
pub(crate) fn refused(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

/// The run under way.
struct Active {
    /// What started it (`batch_run of rows.csv`), for a second caller.
    what: String,
    /// Its team and workspace, once it has started.
    team: Option<(String, PathBuf)>,
    /// Its interrupts (as Ctrl-C), once its plan is made.
    interrupt: Option<mpsc::UnboundedSender<()>>,
    /// How many interrupts it was sent: the first stops it gracefully, the next at once.
    interrupted: u32,
    /// Whether a call waits for it (`wait: true`): such a run ends with its client, a
    /// background one goes on ([`Runs::client_gone`]).
    waited: bool,
    /// Whether the waited call that runs it was cancelled (the SDK marks it before it reads
    /// the client's next message, so a retry sees it even before the run hears it).
    cancelled: Option<Box<dyn Fn() -> bool + Send>>,
}

#[derive(Default)]
struct State {
    /// The run under way.
    active: Option<Active>,
}

/// The runs of this server (one at a time).
#[derive(Clone, Default)]
pub(crate) struct Runs(Arc<Mutex<State>>);

/// The run slot, held from the command's checks to the pipeline's return.
pub(crate) struct Slot(Runs);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.with(|s| s.active = None);
    }
}

impl Runs {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Take the slot for a run of `what` before the run tool writes anything (an inline
    /// instruction beside the output), or say which run holds it: two calls sent together
    /// never both write, and a refused call never removes what the other one runs on. A
    /// run already interrupted (a cancelled call, `stop`) is waited for first, up to
    /// [`STOP_WAIT`]: a client that retries a cancelled call gets its run, not a refusal.
    pub(crate) async fn reserve(&self, what: &str) -> std::result::Result<Slot, String> {
        let stopping = |a: &Active| a.interrupted > 0 || a.cancelled.as_ref().is_some_and(|c| c());
        if self.with(|s| s.active.as_ref().is_some_and(stopping)) {
            self.wait_idle(STOP_WAIT).await;
        }
        self.take(what)
    }

    /// Take the slot for `what`, or say which run holds it.
    fn take(&self, what: &str) -> std::result::Result<Slot, String> {
        self.with(|s| match &s.active {
            Some(other) => Err(busy_text(&other.what)),
            None => {
                s.active = Some(Active {
                    what: what.to_owned(),
                    team: None,
                    interrupt: None,
                    interrupted: 0,
                    waited: false,
                    cancelled: None,
                });
                Ok(Slot(self.clone()))
            }
        })
    }

    /// Interrupt the run under way as Ctrl-C does (`again`: even when it was interrupted
    /// already, which stops it at once); whether a run was there to interrupt.
    fn interrupt(&self, again: bool) -> bool {
        self.with(|s| {
            let Some(a) = &mut s.active else {
                return false;
            };
            if a.interrupted == 0 || again {
                a.interrupted += 1;
                if let Some(tx) = &a.interrupt {
                    let _ = tx.send(());
                }
            }
            true
        })
    }

    /// The run under way: what started it and its team and workspace (once started).
    pub(crate) fn under_way(&self) -> Option<(String, Option<(String, PathBuf)>)> {
        self.with(|s| s.active.as_ref().map(|a| (a.what.clone(), a.team.clone())))
    }

    /// Stop the run under way as Ctrl-C does and wait (up to [`STOP_WAIT`], then it is
    /// interrupted again) until it has ended its teammates and written its outputs; whether
    /// one was under way.
    pub(crate) async fn stop(&self) -> bool {
        if !self.interrupt(false) {
            return false;
        }
        if !self.wait_idle(STOP_WAIT).await {
            self.interrupt(true);
            self.wait_idle(Duration::from_secs(10)).await;
        }
        true
    }

    /// Start `launch` in `slot` (from [`Runs::reserve`]): to its end with progress
    /// notifications when `wait` (answering with its `run_finished` and `run_ended` events
    /// and its exit code), else until it has started (answering with its team, workspace and
    /// item count while it goes on). `written`: the files the call wrote for the run, removed
    /// when the run is refused (a refused call leaves nothing behind).
    pub(crate) async fn start(
        &self,
        slot: Slot,
        launch: Launch,
        wait: bool,
        ctx: RequestContext<RoleServer>,
        written: Vec<PathBuf>,
    ) -> CallToolResult {
        let (tx, rx) = mpsc::unbounded_channel();
        // The checks and the plan read files (and `resolve` writes the batch): off the
        // protocol's workers.
        let Launch { start, argv } = launch;
        let command_line: Vec<String> = std::iter::once("runner".to_owned())
            .chain(argv.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect();
        let ready = tokio::task::spawn_blocking(move || {
            let mut ready = Ready::of(start)?;
            let live = ready.page()?;
            Ok::<_, Error>((ready, live))
        })
        .await;
        let (mut ready, live) = match ready {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                super::argv::remove_written(&written);
                return refused(error_text(&e));
            }
            Err(e) => {
                super::argv::remove_written(&written);
                return refused(format!("the run could not be prepared: {e}"));
            }
        };
        let about = ready.about();
        let page_url = live.as_ref().map(|l| l.url.clone());
        let (interrupt, interrupts) = mpsc::unbounded_channel();
        let ct = ctx.ct.clone();
        ready.wire(Box::new(Progress(tx.clone())), interrupts, command_line);
        self.with(|s| {
            if let Some(a) = &mut s.active {
                // Interrupted while its plan was made: it stops as soon as it starts.
                for _ in 0..a.interrupted {
                    let _ = interrupt.send(());
                }
                a.interrupt = Some(interrupt);
                a.waited = wait;
                if wait {
                    a.cancelled = Some(Box::new(move || ct.is_cancelled()));
                }
            }
        });
        let thread = std::thread::Builder::new()
            .name("mcp-run".into())
            .spawn(move || {
                let result = ready.run();
                // The page goes with its run: before the answer, before the next run.
                drop(live);
                if let Err(e) = &result {
                    // The server's log keeps what a background run's caller cannot see.
                    eprintln!("error: {e}");
                }
                drop(slot);
                let _ = tx.send(Note::Ended(result.map_err(|e| error_text(&e))));
            });
        if let Err(e) = thread {
            return refused(format!("cannot start the run's thread: {e}"));
        }
        follow(
            rx,
            wait,
            ctx,
            self,
            About {
                moved: about.0,
                followed: about.1,
                page_url,
                written,
            },
        )
        .await
    }

    /// End the run under way, if any, before the server ends: interrupt it as Ctrl-C does
    /// (unless `signalled`: the signal reached its dispatcher already) and wait for it to stop
    /// its teammates and write its outputs; past [`STOP_WAIT`] it is interrupted again, and
    /// then every process it started is killed. Nothing the runs started outlives the server.
    /// Whether a signal interrupted a run (the server then exits 130, as the CLI does).
    pub(crate) async fn shutdown(&self, signalled: bool) -> bool {
        let interrupted_by_signal = signalled
            && self.with(|s| match &mut s.active {
                // The dispatcher heard the signal: it counts as the first interrupt.
                Some(a) => {
                    a.interrupted += 1;
                    true
                }
                None => false,
            });
        if self.interrupt(false) && !self.wait_idle(STOP_WAIT).await {
            self.interrupt(true);
            self.wait_idle(Duration::from_secs(10)).await;
        }
        descendants::end_run();
        interrupted_by_signal
    }

    /// The client has gone (stdin closed): no call comes any more. A waited run was
    /// interrupted with its call (the SDK cancels the calls under way); a background run
    /// goes on: wait for its end, however long it takes. Whether a background run was
    /// under way (the server's log is then set aside: nobody reads it).
    pub(crate) async fn client_gone(&self) -> bool {
        let background = self.with(|s| s.active.as_ref().is_some_and(|a| !a.waited));
        if background {
            super::stdio::quiet_log();
            tracing::info!("the client has gone: the background team runs to its end");
            while !self.wait_idle(Duration::from_secs(3600)).await {}
        }
        background
    }

    /// Wait until no run is under way, at most `limit`; whether none is.
    async fn wait_idle(&self, limit: Duration) -> bool {
        let until = tokio::time::Instant::now() + limit;
        while self.with(|s| s.active.is_some()) {
            if tokio::time::Instant::now() > until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }
}

/// The refusal of a run while `other` goes on.
fn busy_text(other: &str) -> String {
    format!(
        "this server is running a team already ({other}); one run at a time: poll `status`, and call again once it has ended"
    )
}

/// Wait (a few seconds at most) until the team `workspace` has its `team.json`, which the
/// dispatcher writes right after `run_started`: `status` answers from then on.
async fn polled(workspace: &Path) {
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while !workspace.join("team.json").is_file() && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a run's answer says besides its notes, and what it undoes when the run is refused.
struct About {
    /// `todo_resolve`: the items moved (`[{"id","title"}]`).
    moved: Option<Value>,
    /// The file `status` follows the team by.
    followed: Option<PathBuf>,
    /// The run's live page (`serve`), with its token.
    page_url: Option<String>,
    /// The files the call wrote for the run, removed when the run's checks refuse it.
    written: Vec<PathBuf>,
}

/// Follow a run's notes to the tool's answer: at `run_started` (not `wait`), or at its end.
/// A waited call the client cancels (`notifications/cancelled`, or the client gone)
/// interrupts the run as Ctrl-C does, and is followed to the run's end all the same (the
/// answer to a cancelled request is dropped by the SDK): its items end `cancelled`, its
/// outputs are written and nothing it started is left running.
async fn follow(
    mut rx: mpsc::UnboundedReceiver<Note>,
    wait: bool,
    ctx: RequestContext<RoleServer>,
    runs: &Runs,
    About {
        moved,
        followed,
        page_url,
        written,
    }: About,
) -> CallToolResult {
    // What every answer says besides: the items moved, how to follow the team.
    let mut about = serde_json::Map::new();
    if let Some(items) = moved {
        about.insert("items".into(), items);
    }
    if let Some(url) = page_url {
        about.insert("page_url".into(), Value::String(url));
    }
    if let Some(path) = &followed {
        about.insert(
            "follow".into(),
            json!({
                "tool": "status",
                "team": path,
                "command": format!("runner status --brief {}", path.display()),
            }),
        );
    }
    let with_about = |mut v: Value| {
        if let Some(o) = v.as_object_mut() {
            o.extend(about.clone());
        }
        v
    };
    let token = ctx.meta.get_progress_token();
    let (mut total, mut done) = (None::<u64>, 0u64);
    let mut events = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut winners: Vec<Value> = Vec::new();
    let (mut cancelled, mut started) = (false, false);
    loop {
        let note = tokio::select! {
            note = rx.recv() => note,
            _ = ctx.ct.cancelled(), if wait && !cancelled => {
                cancelled = true;
                tracing::info!("the call was cancelled: the run is interrupted");
                runs.interrupt(false);
                continue;
            }
        };
        let Some(note) = note else { break };
        match note {
            Note::Started {
                team,
                workspace,
                total: t,
                resumed,
            } => {
                total = t;
                // Items an earlier run completed are done: progress ends at the total.
                done = resumed;
                started = true;
                runs.with(|s| {
                    if let Some(a) = &mut s.active {
                        a.team = Some((team.clone(), PathBuf::from(&workspace)));
                    }
                });
                if !wait {
                    polled(Path::new(&workspace)).await;
                    // The start-up warnings said by now (they follow `run_started`).
                    while let Ok(note) = rx.try_recv() {
                        if let Note::Warning(w) = note {
                            warnings.push(w);
                        }
                    }
                    let answer = with_about(json!({
                        "team": team,
                        "workspace": workspace,
                        "total": t,
                        "warnings": warnings,
                        "pid": std::process::id(),
                        "next": "poll the `status` tool with this workspace as `team`; `stop` interrupts it; the journal in the workspace holds every event",
                    }));
                    return CallToolResult::structured(answer);
                }
            }
            Note::Finished(message, winner) => {
                winners.extend(winner);
                done += 1;
                if let Some(t) = token.as_ref().filter(|_| !cancelled) {
                    let mut p = ProgressNotificationParam::new(t.clone(), done as f64);
                    if let Some(n) = total {
                        p = p.with_total(n as f64);
                    }
                    let _ = ctx.peer.notify_progress(p.with_message(message)).await;
                }
            }
            Note::Warning(w) => warnings.push(w),
            Note::Summary(v) => events.push(v),
            // 0: every item completed; 1: some did not (a result, not a tool error).
            Note::Ended(Ok(code)) if code <= EXIT_INCOMPLETE => {
                let mut summary = with_about(json!({
                    "exit_code": code,
                    "events": events,
                    "warnings": warnings,
                }));
                if !winners.is_empty() {
                    summary["winners"] = Value::Array(winners);
                }
                return CallToolResult::structured(summary);
            }
            Note::Ended(Ok(code)) => {
                let summary = with_about(json!({
                    "exit_code": code,
                    "interrupted": true,
                    "events": events,
                    "warnings": warnings,
                    "next": "the run was interrupted: its items that were running are `cancelled`, its outputs written; the same call resumes it",
                }));
                return CallToolResult::structured_error(summary);
            }
            Note::Ended(Err(text)) => {
                if !started {
                    // Refused by the run's start-up checks: nothing of it is left.
                    super::argv::remove_written(&written);
                }
                return refused(text);
            }
        }
    }
    refused("the run ended without saying how")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_sink_hands_over_the_start_each_item_and_the_summary() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut sink = Progress(tx);
        sink.event(&Event::RunStarted {
            at: String::new(),
            pid: 1,
            team: "t".into(),
            workspace: "/w".into(),
            total: Some(2),
            resumed: 0,
            jobs: 1,
            sandbox: "none".into(),
            sandbox_why_none: None,
            replaced_runner: None,
            stages: Vec::new(),
            merge: String::new(),
        });
        sink.event(&Event::RunEnded {
            outputs: vec!["/w/out.csv".into()],
            exit_code: 0,
        });
        match rx.try_recv() {
            Ok(Note::Started {
                team,
                workspace,
                total,
                ..
            }) => assert_eq!(
                (team.as_str(), workspace.as_str(), total),
                ("t", "/w", Some(2))
            ),
            _ => panic!("run_started first"),
        }
        match rx.try_recv() {
            Ok(Note::Summary(v)) => {
                assert_eq!(v["event"], "run_ended", "{v}");
                assert_eq!(v["v"], 1, "the journal's line: {v}");
            }
            _ => panic!("run_ended as its line"),
        }
    }

    #[test]
    fn one_run_at_a_time_and_the_slot_frees_when_dropped() {
        let runs = Runs::default();
        let slot = runs.take("batch_run of a.csv").expect("free");
        let refused = runs.take("batch_run of b.csv").err().unwrap_or_default();
        assert!(refused.contains("batch_run of a.csv"), "{refused}");
        drop(slot);
        assert!(runs.take("batch_run of b.csv").is_ok());
    }
}
