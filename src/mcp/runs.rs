//! A run started by `todo_resolve` or `batch_run`, in this process: the command's plan
//! ([`crate::commands::batch::plan`], [`crate::commands::resolve::prepare`]) with one more
//! sink, [`Progress`], which hands the tool the run's events as values (no JSON lines are
//! printed or parsed), then the pipeline on a thread of its own (it builds its own runtime).
//!
//! One run at a time per server: the pipeline ends, when a run ends, every process the runner
//! started ([`crate::run::supervise::descendants::end_run`]), so a second run in the same
//! process would lose its teammates. A second call while a run goes on is refused, naming it.
//! [`Runs::shutdown`] ends the run under way when the server ends.

use std::path::Path;
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

    /// Add `sink` to the plan's (nothing when nothing runs).
    fn add_sink(&mut self, sink: Box<dyn Sink>) {
        match self {
            Ready::Done(_) => {}
            Ready::Batch(plan, _) => plan.sinks.push(sink),
            Ready::Todo(run) => {
                if let Some(plan) = &mut run.plan {
                    plan.sinks.push(sink);
                }
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
    /// `run_started`: the team, its workspace, how many items.
    Started {
        team: String,
        workspace: String,
        total: Option<u64>,
    },
    /// `item_finished`: the item's id and status.
    Finished(String),
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
                ..
            } => Note::Started {
                team: team.clone(),
                workspace: workspace.to_string_lossy().into_owned(),
                total: *total,
            },
            Event::ItemFinished(o) => Note::Finished(format!("{} {}", o.id, o.status)),
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

#[derive(Default)]
struct State {
    /// The run under way: what started it.
    active: Option<String>,
    /// Runs whose pipeline returned: each left a thread that ends the process on the next
    /// SIGINT, SIGTERM or SIGHUP (the pipeline's, for an interrupt while outputs are written).
    ended: u64,
}

/// The runs of this server (one at a time).
#[derive(Clone, Default)]
pub(crate) struct Runs(Arc<Mutex<State>>);

/// The run slot, held from the command's checks to the pipeline's return.
struct Slot(Runs);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.with(|s| s.active = None);
    }
}

impl Runs {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Why a run cannot start now (another one is under way), if it cannot: a run tool asks
    /// before it writes anything (an inline instruction beside the output).
    pub(crate) fn busy(&self) -> Option<String> {
        self.with(|s| s.active.as_deref().map(busy_text))
    }

    /// Take the slot for `what`, or say which run holds it.
    fn take(&self, what: &str) -> std::result::Result<Slot, String> {
        self.with(|s| match &s.active {
            Some(other) => Err(busy_text(other)),
            None => {
                s.active = Some(what.to_owned());
                Ok(Slot(self.clone()))
            }
        })
    }

    /// Start `start` (`what` names it to a second caller): to its end with progress
    /// notifications when `wait` (answering with its `run_finished` and `run_ended` events
    /// and its exit code), else until it has started (answering with its team, workspace and
    /// item count while it goes on).
    pub(crate) async fn start(
        &self,
        start: Start,
        what: String,
        wait: bool,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let slot = match self.take(&what) {
            Ok(s) => s,
            Err(text) => return refused(text),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        // The checks and the plan read files (and `resolve` writes the batch): off the
        // protocol's workers.
        let ready = tokio::task::spawn_blocking(move || Ready::of(start)).await;
        let mut ready = match ready {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return refused(error_text(&e)),
            Err(e) => return refused(format!("the run could not be prepared: {e}")),
        };
        ready.add_sink(Box::new(Progress(tx.clone())));
        let runs = self.clone();
        let thread = std::thread::Builder::new()
            .name("mcp-run".into())
            .spawn(move || {
                let result = ready.run();
                if let Err(e) = &result {
                    // The server's log keeps what a background run's caller cannot see.
                    eprintln!("error: {e}");
                }
                runs.with(|s| s.ended += 1);
                drop(slot);
                let _ = tx.send(Note::Ended(result.map_err(|e| error_text(&e))));
            });
        if let Err(e) = thread {
            return refused(format!("cannot start the run's thread: {e}"));
        }
        follow(rx, wait, ctx).await
    }

    /// End the run under way, if any, before the server ends: interrupt it as Ctrl-C does
    /// (unless `signalled`: the signal reached its dispatcher already) and wait for it to stop
    /// its teammates and write its outputs; past [`STOP_WAIT`], or when an interrupt would end
    /// the process at once (an earlier run's interrupt handler, [`State::ended`]), every
    /// process it started is killed. Nothing the runs started outlives the server.
    pub(crate) async fn shutdown(&self, signalled: bool) {
        let (active, ended) = self.with(|s| (s.active.is_some(), s.ended));
        if active && ended == 0 {
            if !signalled {
                interrupt();
            }
            if !self.wait_idle(STOP_WAIT).await {
                interrupt();
                self.wait_idle(Duration::from_secs(10)).await;
            }
        }
        descendants::end_run();
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

/// Interrupt the run under way as a closed terminal does: SIGHUP to this process, which its
/// dispatcher listens for (the server's own handler keeps it from ending the process).
fn interrupt() {
    if let Err(e) = nix::sys::signal::raise(nix::sys::signal::Signal::SIGHUP) {
        tracing::warn!("cannot interrupt the run: {e}");
    }
}

/// Wait (a few seconds at most) until the team `workspace` has its `team.json`, which the
/// dispatcher writes right after `run_started`: `status` answers from then on.
async fn polled(workspace: &Path) {
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while !workspace.join("team.json").is_file() && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Follow a run's notes to the tool's answer: at `run_started` (not `wait`), or at its end.
async fn follow(
    mut rx: mpsc::UnboundedReceiver<Note>,
    wait: bool,
    ctx: RequestContext<RoleServer>,
) -> CallToolResult {
    let token = ctx.meta.get_progress_token();
    let (mut total, mut done) = (None::<u64>, 0u64);
    let mut events = Vec::new();
    while let Some(note) = rx.recv().await {
        match note {
            Note::Started {
                team,
                workspace,
                total: t,
            } => {
                total = t;
                if !wait {
                    polled(Path::new(&workspace)).await;
                    let answer = json!({
                        "team": team,
                        "workspace": workspace,
                        "total": t,
                        "pid": std::process::id(),
                        "next": "poll the `status` tool with this workspace as `team`; the journal in the workspace holds every event",
                    });
                    return CallToolResult::success(vec![ContentBlock::text(answer.to_string())]);
                }
            }
            Note::Finished(message) => {
                done += 1;
                if let Some(t) = &token {
                    let mut p = ProgressNotificationParam::new(t.clone(), done as f64);
                    if let Some(n) = total {
                        p = p.with_total(n as f64);
                    }
                    let _ = ctx.peer.notify_progress(p.with_message(message)).await;
                }
            }
            Note::Summary(v) => events.push(v),
            // 0: every item completed; 1: some did not (a result, not a tool error).
            Note::Ended(Ok(code)) if code <= EXIT_INCOMPLETE => {
                let summary = json!({ "exit_code": code, "events": events });
                return CallToolResult::success(vec![ContentBlock::text(summary.to_string())]);
            }
            Note::Ended(Ok(code)) => {
                return refused(format!(
                    "the run was interrupted (exit {code}); its workspace keeps what was done: the same call resumes it"
                ));
            }
            Note::Ended(Err(text)) => return refused(text),
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
