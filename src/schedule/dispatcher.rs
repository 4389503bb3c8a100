//! The dispatcher: one loop that owns the run's state. It pulls items from the source in
//! order, starts a unit per ready item under the parallelism bound, and takes unit messages,
//! signals and timer ticks one at a time (DESIGN §1, nextest's dispatcher).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::error::{Error, Result};
use crate::item::WorkItem;
use crate::report::ItemStatus;
use crate::run::backend::{self, Backend};
use crate::run::events::{Event, Problem, Reporter, RunSummary};
use crate::run::record::ledger::Ledger;
use crate::run::record::outcome::Outcome;
use crate::run::record::team::{
    PendingEntry, RunningEntry, SNAPSHOT_COMPLETED_MAX, Snapshot, Team, WaitingEntry,
};
use crate::run::supervise::job_control::{self, Suspends};
use crate::run::supervise::process::Cancel;
use crate::run::supervise::{descendants, descriptors};
use crate::run::{RunSpec, now_rfc3339};
use crate::schedule::feed::Items;
use crate::schedule::gate::{Gate, Spent};
use crate::schedule::unit;

mod interrupts;
mod units;
pub(crate) use interrupts::Interrupts;
use units::Units;
use units::gate_snapshot;

/// Most items listed in the closing summary's problem list.
pub(crate) const PROBLEMS_LISTED: usize = 50;
/// How often `team.json` is rewritten at most while items change.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(500);

/// The items of a run, in input order; an `Err` ends the run (the source became unreadable).
pub(crate) type ItemStream = Box<dyn Iterator<Item = Result<WorkItem>> + Send>;

struct State {
    counts: HashMap<ItemStatus, u64>,
    resumed: u64,
    cost: Option<f64>,
    /// The place in the source of each item admitted and not yet finished (for the summary's
    /// order of problems); an item's entry goes when it finishes, so this holds the items in
    /// flight and waiting, not every row of the batch.
    order: HashMap<String, usize>,
    /// How many items were admitted: the next one's place.
    admitted: usize,
    /// Items that did not complete, with their places: the first [`PROBLEMS_LISTED`] in
    /// source order (not in the order they ended).
    problems: Vec<(usize, Problem)>,
    problems_hidden: u64,
    /// Items an interrupted run ended before any attempt of theirs started.
    never_started: u64,
    snapshot: Snapshot,
    dirty: bool,
    /// Whether `team_stopped` is recorded ([`announce_stop`]).
    stop_announced: bool,
}

impl State {
    fn new(snapshot: Snapshot) -> State {
        State {
            counts: HashMap::new(),
            resumed: 0,
            cost: None,
            order: HashMap::new(),
            admitted: 0,
            problems: Vec::new(),
            problems_hidden: 0,
            never_started: 0,
            snapshot,
            dirty: true,
            stop_announced: false,
        }
    }

    /// Count an item that ends the run as `status` without an outcome of this run (earlier,
    /// or never reached).
    fn count(&mut self, status: ItemStatus) {
        *self.counts.entry(status).or_default() += 1;
        *self.snapshot.counts.entry(status.to_string()).or_default() += 1;
    }

    fn finish(&mut self, o: &Outcome) {
        *self.counts.entry(o.status).or_default() += 1;
        if let Some(c) = o.cost_usd {
            *self.cost.get_or_insert(0.0) += c;
        }
        let place = self.order.remove(&o.id).unwrap_or(usize::MAX);
        if o.status == ItemStatus::Cancelled && o.attempts == 0 {
            self.never_started += 1;
        }
        if o.status != ItemStatus::Completed {
            self.problems.push((place, Problem::of(o)));
            if self.problems.len() > PROBLEMS_LISTED {
                // Drop the one furthest down the source.
                if let Some(last) = (0..self.problems.len()).max_by_key(|i| self.problems[*i].0) {
                    self.problems.swap_remove(last);
                }
                self.problems_hidden += 1;
            }
        }
        self.snapshot.finish(o);
        self.dirty = true;
    }

    /// Whether `event` from a unit or the gate is still to be recorded: not a
    /// `team_stopped` that [`announce_stop`] recorded already.
    fn fresh(&mut self, event: &Event) -> bool {
        if let Event::TeamStopped { .. } = event {
            return !std::mem::replace(&mut self.stop_announced, true);
        }
        true
    }

    /// Take in an event from a unit; `false` when it is not passed on (a line printed by an
    /// item that is not running any more).
    fn apply(&mut self, event: &Event, running: &mut HashSet<String>) -> bool {
        match event {
            Event::AttemptStarted {
                id,
                teammate,
                title,
                attempt,
                pgid,
                at,
                ..
            } => {
                // A `--best-of` item runs as several teammates at once: each is an entry.
                self.snapshot
                    .running
                    .retain(|r| &r.id != id || &r.teammate != teammate);
                self.snapshot.running.push(RunningEntry {
                    id: id.clone(),
                    teammate: teammate.clone(),
                    title: title.clone(),
                    attempt: *attempt,
                    pgid: *pgid,
                    started_at: at.clone(),
                    last_line: String::new(),
                    progress: None,
                });
                self.dirty = true;
            }
            Event::AttemptFinished {
                id,
                teammate,
                attempt,
                verdict,
                ..
            } => {
                // Between attempts (a retry's back-off, a rate-limit pause) it is not running.
                self.snapshot
                    .running
                    .retain(|r| &r.id != id || &r.teammate != teammate);
                self.dirty = true;
                tracing::info!(
                    "{teammate} attempt {attempt}: {} {}",
                    verdict.status,
                    verdict.reason
                );
            }
            Event::Activity { id, line, .. } => {
                let Some(r) = self.snapshot.running.iter_mut().find(|r| &r.id == id) else {
                    return false;
                };
                r.last_line.clone_from(line);
                self.dirty = true;
            }
            Event::Progress {
                id,
                attempt,
                progress,
                ..
            } => {
                // A line read after its attempt ended is journaled all the same.
                if let Some(r) = self
                    .snapshot
                    .running
                    .iter_mut()
                    .find(|r| &r.id == id && r.attempt == *attempt)
                {
                    r.progress = Some(progress.clone());
                    self.dirty = true;
                }
            }
            Event::ItemFinished(outcome) => {
                running.remove(&outcome.id);
                self.finish(outcome);
            }
            Event::RunStarted { .. }
            | Event::TeamPaused { .. }
            | Event::TeamStopped { .. }
            | Event::Warning { .. }
            | Event::ItemMerged { .. }
            | Event::ConflictHanded { .. }
            | Event::ConflictResolved { .. }
            | Event::Interrupted { .. }
            | Event::RunFinished(_)
            | Event::RunEnded { .. } => {}
        }
        true
    }
}

/// Whether an item may start: `Ok(true)` ready, `Ok(false)` waiting, `Err(reason)` skipped.
/// A prerequisite's status is the one it has in this run ([`Ledger::now`]). The item of its
/// `--serialize-overlaps` chain it runs after (`spec`'s [`RunSpec::runs_after`]) only has to
/// have finished, whatever its status: it shares files with the item, not a result.
fn readiness(
    item: &WorkItem,
    ledger: &Ledger,
    spec: &RunSpec,
) -> std::result::Result<bool, String> {
    if let Some(before) = spec.runs_after(&item.id)
        && ledger.now(before).is_none()
    {
        return Ok(false);
    }
    for dep in &item.after {
        match ledger.now(dep) {
            Some(ItemStatus::Completed) => {}
            Some(s) => return Err(format!("prerequisite {dep} did not complete ({s})")),
            None => return Ok(false),
        }
    }
    Ok(true)
}

/// How a run is wired to the world: the backend its attempts execute on and where its
/// interrupts and suspend requests (Ctrl-Z) come from.
pub(crate) struct Wiring {
    /// Executes every attempt of the run.
    pub backend: Arc<dyn Backend>,
    /// Interrupts of the run.
    pub interrupts: Interrupts,
    /// Suspend requests: each stops every teammate and then the runner until it is
    /// continued ([`job_control::suspend`]).
    pub suspends: Suspends,
}

/// Run every item of `items` in `team` and return the summary; `total` is how many items
/// `items` holds, when known, and `resumed` how many of them the journal has completed
/// ([`crate::run::record::journal::count_done_before`]), both as `run_started` states them. Events go to `reporter`
/// and the journal; `team.json` is kept current. Attempts run on `backend` (built once per
/// run, [`backend::for_settings`]); SIGINT, SIGTERM and SIGHUP interrupt the run, and so
/// does each message of `interrupt` (the caller's own interrupts, [`crate::schedule::plan::Plan::interrupt`]);
/// SIGTSTP (Ctrl-Z) stops every teammate and then the runner until it is continued.
///
/// Errors: a signal handler cannot be installed, the journal cannot be written (every
/// started teammate is stopped first), or the source failed mid-way (the run stops starting
/// items, lets running ones finish, and reports the error).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    spec: Arc<RunSpec>,
    team: &mut Team,
    items: Items,
    total: Option<u64>,
    resumed: u64,
    reporter: &mut dyn Reporter,
    backend: Arc<dyn backend::Backend>,
    interrupt: Option<mpsc::UnboundedReceiver<()>>,
) -> Result<RunSummary> {
    let wiring = Wiring {
        backend,
        interrupts: Interrupts::signals(interrupt)?,
        suspends: Suspends::signals()?,
    };
    run_wired(spec, team, items, total, resumed, reporter, wiring).await
}

/// One thing the dispatcher loop waited for, as [`Dispatcher::handle`] takes it.
enum Input {
    /// A unit or the gate sent an event.
    Unit(Event),
    /// A unit's task panicked before reporting its item (`None`: the item is not known).
    Crashed(Option<WorkItem>),
    /// Ctrl-C, SIGTERM or SIGHUP, or a sender of [`Interrupts::channel`].
    Interrupt,
    /// The snapshot timer ([`SNAPSHOT_EVERY`]).
    Tick,
}

/// What [`Dispatcher`] decided that the async loop carries out.
#[derive(Debug, PartialEq)]
enum Action {
    /// Start a unit for the item, continuing what earlier runs left of it.
    Start(Box<WorkItem>, unit::Earlier),
    /// Tell every running unit to stop.
    Cancel(Cancel),
}

/// The run's state and the decisions taken on it; synchronous, so that each input is one
/// plain call ([`Dispatcher::handle`]) and the async loop in [`run_wired`] only turns
/// channels, tasks, signals and timers into [`Input`]s (nextest's `handle_event`).
struct Dispatcher<'a> {
    spec: Arc<RunSpec>,
    team: &'a mut Team,
    reporter: &'a mut dyn Reporter,
    gate: Arc<Gate>,
    jobs: usize,
    st: State,
    /// Started units whose `item_finished` has not arrived yet, by item id.
    running: HashSet<String>,
    /// Items read from the source whose prerequisites have not finished, in input order.
    waiting: VecDeque<WorkItem>,
    source_done: bool,
    source_error: Option<Error>,
    interrupted: bool,
    /// Why --max-fail N:immediate stopped the running teammates, once it has.
    stopped_running: Option<String>,
    snapshot_failing: bool,
}

impl<'a> Dispatcher<'a> {
    /// Items to start now (waiting ones first, in input order, then the source), under the
    /// parallelism bound; items completed earlier, skipped or waiting are taken care of here.
    ///
    /// Errors: the journal cannot be written.
    fn fill(&mut self, items: &mut Items) -> Result<Vec<Action>> {
        let mut start = Vec::new();
        if self.interrupted {
            return Ok(start);
        }
        while self.running.len() < self.jobs {
            let item = match take_ready(
                &mut self.waiting,
                &self.spec,
                &mut self.st,
                self.team,
                self.reporter,
            )? {
                Some(item) => item,
                None if self.source_done => break,
                None => match items.poll_next() {
                    // A queue has nothing for now: asked again when it answers.
                    std::task::Poll::Pending => break,
                    std::task::Poll::Ready(None) => {
                        self.source_done = true;
                        continue;
                    }
                    std::task::Poll::Ready(Some(Err(e))) => {
                        self.source_error = Some(e);
                        self.source_done = true;
                        continue;
                    }
                    std::task::Poll::Ready(Some(Ok(item))) => match self.admit(item)? {
                        Some(item) => item,
                        None => continue,
                    },
                },
            };
            if let Some(why) = announce_stop(&self.gate, self.team, &mut self.st, self.reporter)? {
                let reason = format!("not started: {why}");
                skip(
                    &item,
                    ItemStatus::Skipped,
                    reason,
                    self.team,
                    &mut self.st,
                    self.reporter,
                )?;
                continue;
            }
            // A stage's instruction gets its earlier stages' values now that they are done.
            let mut item = item;
            let team = &mut *self.team;
            crate::schedule::stage_values::fill_from(&mut item, |id| team.outcome(id))?;
            let waits = self.team.recorded.tallies.waits_of(&item.id);
            // A shared queue's other workers may have started attempts of it (then died).
            let here = self.team.ledger().attempts_started(&item.id);
            let elsewhere = items.attempts_elsewhere(&item.id);
            let earlier = unit::Earlier {
                first_attempt: here.max(elsewhere) + 1,
                retries_used: elsewhere.saturating_sub(here),
                spent: self.team.recorded.tallies.spent_of(&item.id),
                verify_only: self.verify_only(&item)?,
                refused: waits.refused,
                rate_limit_waits: waits.rate_limit,
            };
            self.running.insert(item.id.clone());
            start.push(Action::Start(Box::new(item), earlier));
        }
        Ok(start)
    }

    /// The earlier outcome of `item` when a resume runs only its verify command: its agent
    /// finished with a valid report, an interrupt stopped the verify, the item is unchanged,
    /// `--only` does not name it, and its teammates work in the run's own folder (a
    /// worktree's state is not kept for it).
    ///
    /// Errors: the journal cannot be read.
    fn verify_only(&mut self, item: &WorkItem) -> Result<Option<Box<Outcome>>> {
        let pending = self
            .team
            .ledger()
            .get(&item.id)
            .is_some_and(|f| f.verify_only(item));
        if !pending || self.spec.isolation.is_some() || self.spec.rerun.contains(&item.id) {
            return Ok(None);
        }
        Ok(self.team.outcome(&item.id)?.map(Box::new))
    }

    /// An item fresh from the source: `Some` when it can start now; otherwise it completed in
    /// an earlier run, waits for its prerequisites, or is skipped because one failed.
    fn admit(&mut self, item: WorkItem) -> Result<Option<WorkItem>> {
        let place = self.st.admitted;
        self.st.admitted += 1;
        if resume_completed(&item, &self.spec.rerun, self.team, &mut self.st) {
            return Ok(None);
        }
        self.st.order.entry(item.id.clone()).or_insert(place);
        match readiness(&item, self.team.ledger(), &self.spec) {
            Ok(true) => Ok(Some(item)),
            Ok(false) => {
                self.waiting.push_back(item);
                Ok(None)
            }
            Err(reason) => {
                skip(
                    &item,
                    ItemStatus::Skipped,
                    reason,
                    self.team,
                    &mut self.st,
                    self.reporter,
                )?;
                Ok(None)
            }
        }
    }

    /// Whether the run is over: nothing runs and nothing more can start. Items still waiting
    /// then can never start, and end as skipped (or cancelled, when interrupted).
    fn over(&mut self) -> Result<bool> {
        if !(self.running.is_empty() && (self.source_done || self.interrupted)) {
            return Ok(false);
        }
        while let Some(item) = self.waiting.pop_front() {
            let (status, reason) = if self.interrupted {
                (
                    ItemStatus::Cancelled,
                    "not started: the run was interrupted".to_string(),
                )
            } else if let Some(why) =
                announce_stop(&self.gate, self.team, &mut self.st, self.reporter)?
            {
                (ItemStatus::Skipped, format!("not started: {why}"))
            } else {
                (
                    ItemStatus::Skipped,
                    "its prerequisites never finished".to_string(),
                )
            };
            skip(
                &item,
                status,
                reason,
                self.team,
                &mut self.st,
                self.reporter,
            )?;
        }
        Ok(true)
    }

    /// Take one input and say what is to be done about it.
    ///
    /// Errors: the journal cannot be written.
    fn handle(&mut self, input: Input) -> Result<Vec<Action>> {
        match input {
            Input::Unit(event) => self.on_event(event),
            Input::Crashed(item) => {
                if let Some(item) = item
                    && self.running.remove(&item.id)
                {
                    // The unit panicked before reporting: record it rather than lose it.
                    let reason = "internal error: the teammate's supervisor crashed".to_string();
                    skip(
                        &item,
                        ItemStatus::Failed,
                        reason,
                        self.team,
                        &mut self.st,
                        self.reporter,
                    )?;
                }
                Ok(Vec::new())
            }
            Input::Interrupt => {
                let immediate = std::mem::replace(&mut self.interrupted, true);
                let event = Event::Interrupted { immediate };
                self.team.record(&event)?;
                self.reporter.event(&event);
                Ok(vec![Action::Cancel(if immediate {
                    Cancel::Immediate
                } else {
                    Cancel::Graceful
                })])
            }
            Input::Tick => {
                self.on_tick();
                Ok(Vec::new())
            }
        }
    }

    fn on_event(&mut self, mut event: Event) -> Result<Vec<Action>> {
        if let (Event::ItemFinished(o), Some(why), false) =
            (&mut event, &self.stopped_running, self.interrupted)
            && o.status == ItemStatus::Cancelled
        {
            // Stopped by --max-fail N:immediate, not by the user.
            o.error = format!("stopped while running: {why}");
        }
        if !self.st.fresh(&event) {
            return Ok(Vec::new());
        }
        // Journaled before the state it describes is acted on.
        self.team.record(&event)?;
        if let Event::ItemFinished(_) = &event {
            // A crash test's kill after an outcome is journaled, before team.json shows it.
            crate::fault::point("after_item_finished");
        }
        if self.st.apply(&event, &mut self.running) {
            self.reporter.event(&event);
        }
        if let Event::ItemFinished(o) = &event
            && self.gate.item_finished(o.status)
            && !self.interrupted
        {
            // --max-fail N:immediate: the running teammates are stopped too.
            self.stopped_running = self.gate.stopped();
            return Ok(vec![Action::Cancel(Cancel::Graceful)]);
        }
        Ok(Vec::new())
    }

    /// Reap stray zombies and rewrite `team.json` when something changed.
    fn on_tick(&mut self) {
        descendants::reap_zombies();
        let st = &mut self.st;
        let waiting_now: Vec<WaitingEntry> = self
            .waiting
            .iter()
            .take(SNAPSHOT_COMPLETED_MAX)
            .map(|w| WaitingEntry {
                id: w.id.clone(),
                teammate: w.teammate.clone(),
                title: w.title.clone(),
                after: w.after.clone(),
            })
            .collect();
        let gate_now = gate_snapshot(&self.gate, self.jobs);
        if st.snapshot.gate != gate_now {
            st.snapshot.gate = gate_now;
            st.dirty = true;
        }
        if waiting_now.len() != st.snapshot.waiting.len() {
            st.snapshot.waiting = waiting_now;
            st.dirty = true;
        }
        if !st.dirty {
            return;
        }
        st.snapshot.updated_at = now_rfc3339();
        // team.json is a view (the journal is the truth): a failed rewrite is tried again on
        // the next tick, never the end of the run.
        match self.team.write_snapshot(&st.snapshot) {
            Ok(()) => {
                st.dirty = false;
                self.snapshot_failing = false;
            }
            Err(e) if !self.snapshot_failing => {
                tracing::warn!("{e}; trying again");
                self.snapshot_failing = true;
            }
            Err(_) => {}
        }
    }

    /// Close the run: count the items an interrupted run never reached, record
    /// `run_finished`, write the last `team.json` and return the summary.
    ///
    /// Errors: the journal cannot be written, or the source failed mid-way.
    fn finish(mut self, items: &mut Items, started: Instant) -> Result<RunSummary> {
        let st = &mut self.st;
        if self.interrupted && !self.source_done {
            // Items the run never reached are in the output too (with their last journaled
            // outcome, else as cancelled): count them, so the summary, the events and
            // team.json describe the same batch as the output.
            for item in items.rest() {
                let Ok(item) = item else { break };
                let earlier = self.team.ledger().get(&item.id).map(|f| f.status);
                if earlier.is_none() && st.snapshot.not_started.len() < SNAPSHOT_COMPLETED_MAX {
                    st.snapshot.not_started.push(PendingEntry {
                        id: item.id.clone(),
                        title: item.title.clone(),
                    });
                }
                match earlier {
                    // Counted as this run's now, so not among the team's earlier ones.
                    Some(status) => self.team.recorded.ledger.set_now(&item.id, status),
                    None => st.never_started += 1,
                }
                st.count(earlier.unwrap_or(ItemStatus::Cancelled));
            }
        }
        // The team's items this run did not cover, for team.json to show the team's state.
        st.snapshot.note_earlier(self.team);
        let mut problems = std::mem::take(&mut st.problems);
        problems.sort_by_key(|(place, _)| *place);
        let summary = RunSummary {
            at: now_rfc3339(),
            counts: ItemStatus::ALL
                .iter()
                .map(|s| (*s, st.counts.get(s).copied().unwrap_or(0)))
                .collect(),
            resumed: st.resumed,
            interrupted: self.interrupted,
            elapsed_s: started.elapsed().as_secs_f64(),
            cost_usd: st.cost,
            problems: problems.into_iter().map(|(_, p)| p).collect(),
            problems_hidden: st.problems_hidden,
            never_started: st.never_started,
        };
        let run_finished = Event::RunFinished(summary.clone());
        self.team.record(&run_finished)?;
        self.team.sync()?;
        st.snapshot.state = if self.interrupted {
            "interrupted"
        } else {
            "finished"
        }
        .into();
        st.snapshot.running.clear();
        st.snapshot.waiting.clear();
        // The last word on the budget and stops, however short the run was against the tick.
        st.snapshot.gate = gate_snapshot(&self.gate, self.jobs);
        if let Some(g) = &mut st.snapshot.gate {
            // Over: nothing waits at the gate any more.
            g.paused = None;
            g.waiting = 0;
        }
        st.snapshot.updated_at = now_rfc3339();
        if let Err(e) = self.team.write_snapshot(&st.snapshot) {
            tracing::warn!("{e}");
        }
        if let Some(e) = self.source_error {
            return Err(e);
        }
        self.reporter.event(&run_finished);
        Ok(summary)
    }

    /// After an error ended the run part-way: stop every started teammate at once, wait for
    /// their units to finish, and record what they report where that still works.
    async fn stop_after_error(
        &mut self,
        cancel: &watch::Sender<Cancel>,
        tasks: &mut JoinSet<()>,
        rx: &mut mpsc::UnboundedReceiver<Event>,
    ) {
        let _ = cancel.send(Cancel::Immediate);
        loop {
            tokio::select! {
                Some(event) = rx.recv() => self.take_late(event),
                joined = tasks.join_next() => if joined.is_none() { break },
            }
        }
        while let Ok(event) = rx.try_recv() {
            self.take_late(event);
        }
    }

    /// An event that arrives after the run failed: recorded where the journal still works.
    fn take_late(&mut self, event: Event) {
        if !self.st.fresh(&event) {
            return;
        }
        let _ = self.team.record(&event);
        if self.st.apply(&event, &mut self.running) {
            self.reporter.event(&event);
        }
    }
}

/// [`run`] on the given backend and interrupt source.
///
/// Errors: as [`run`], except for signal handlers (none are installed here).
pub(crate) async fn run_wired(
    spec: Arc<RunSpec>,
    team: &mut Team,
    mut items: Items,
    total: Option<u64>,
    resumed: u64,
    reporter: &mut dyn Reporter,
    wiring: Wiring,
) -> Result<RunSummary> {
    let Wiring {
        backend,
        mut interrupts,
        mut suspends,
    } = wiring;
    let started = Instant::now();
    job_control::watch_stops();
    let jobs = descriptors::cap_jobs(spec.settings.jobs);
    let snapshot = announce(&spec, team, total, resumed, jobs, reporter)?;

    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let (cancel_tx, cancel_rx) = watch::channel(Cancel::None);
    let mut tick = tokio::time::interval(SNAPSHOT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    // Earlier runs' spending counts against the budget of a resumed run, and their costs
    // are what the next attempt is expected to cost until this run's own are known.
    // Every attempt counts (a retry costs money too): per item what its attempts cost,
    // else, for a journal written before attempts carried costs, what its outcome says.
    let (usd, costed) = team.recorded.tallies.cost();
    let gate = Arc::new(Gate::new(
        jobs,
        spec.settings.limits.clone(),
        Spent { usd, costed },
        tx.clone(),
    ));
    items.hand_gate(&gate);
    let mut d = Dispatcher {
        spec: spec.clone(),
        team,
        reporter,
        gate: gate.clone(),
        jobs,
        st: State::new(snapshot),
        running: HashSet::new(),
        waiting: VecDeque::new(),
        source_done: false,
        source_error: None,
        interrupted: false,
        stopped_running: None,
        snapshot_failing: false,
    };
    let mut units = Units {
        spec: &spec,
        backend: &backend,
        gate: &gate,
        events: &tx,
        cancel: &cancel_tx,
        cancelled: &cancel_rx,
        tasks: JoinSet::new(),
        items: HashMap::new(),
    };

    let looped: Result<()> = async {
        let mut actions = d.fill(&mut items)?;
        loop {
            for action in actions.drain(..) {
                units.act(action);
            }
            if d.over()? {
                // What the gate said last (a stop another worker's queue caused) is recorded.
                while let Ok(event) = rx.try_recv() {
                    d.handle(Input::Unit(event))?;
                }
                return Ok(());
            }
            let input = tokio::select! {
                biased;
                Some(event) = rx.recv() => Input::Unit(event),
                Some(joined) = units.tasks.join_next_with_id() => match joined {
                    // A unit that ended normally has sent (or is still sending) its
                    // Finished message; only a panic can lose an item.
                    Ok((id, ())) => {
                        units.items.remove(&id);
                        continue;
                    }
                    Err(e) => Input::Crashed(units.items.remove(&e.id())),
                },
                _ = interrupts.next() => Input::Interrupt,
                _ = suspends.next() => {
                    job_control::suspend();
                    continue;
                }
                _ = tick.tick() => Input::Tick,
                // A queue answered: `fill` below takes what came.
                _ = items.arrived() => Input::Tick,
            };
            actions = d.handle(input)?;
            actions.extend(d.fill(&mut items)?);
        }
    }
    .await;
    if let Err(e) = looped {
        d.stop_after_error(&cancel_tx, &mut units.tasks, &mut rx)
            .await;
        return Err(e);
    }
    d.finish(&mut items, started)
}

/// Record and report that the run started (`run_started`: the team, items and teammates at
/// once, the sandbox, stages, merge) and planning's `warning`s, and the team's first snapshot.
///
/// Errors: the journal cannot be written.
fn announce(
    spec: &RunSpec,
    team: &mut Team,
    total: Option<u64>,
    resumed: u64,
    jobs: usize,
    reporter: &mut dyn Reporter,
) -> Result<Snapshot> {
    let run_started = Event::RunStarted {
        at: now_rfc3339(),
        pid: std::process::id(),
        team: team.name.clone(),
        workspace: team.dir.clone(),
        total,
        resumed,
        jobs,
        sandbox: spec.settings.sandbox.name().into(),
        sandbox_why_none: spec.settings.unconfined(),
        replaced_runner: spec.settings.runner.replaces_builtin.as_ref().map(|file| {
            crate::run::events::ReplacedRunner {
                name: spec.settings.runner.name.clone(),
                file: file.clone(),
            }
        }),
        stages: spec.stages.clone(),
        merge: spec.settings.merge_word().into(),
    };
    team.record(&run_started)?;
    reporter.event(&run_started);
    // What planning warned of, recorded and shown now that the journal is open.
    for w in &spec.warnings {
        let warning = Event::warning(w.clone());
        team.record(&warning)?;
        reporter.event(&warning);
    }
    Ok(Snapshot {
        isolation: spec
            .isolation
            .as_deref()
            .map(crate::run::isolation::worktree::Isolation::record),
        stages: spec.stages.clone(),
        ..Snapshot::new(team, total, spec.command_line.as_deref())
    })
}

/// Why the team stopped starting items, once it has ([`Gate::stopped`]). The first time,
/// `team_stopped` is recorded and reported here, so that it comes before the `item_finished`
/// of every item it skips; the gate's own event, still on its way, is not recorded again.
///
/// Errors: the journal cannot be written.
fn announce_stop(
    gate: &Gate,
    team: &mut Team,
    st: &mut State,
    reporter: &mut dyn Reporter,
) -> Result<Option<String>> {
    let Some(reason) = gate.stopped() else {
        return Ok(None);
    };
    if !st.stop_announced {
        st.stop_announced = true;
        let event = Event::TeamStopped {
            reason: reason.clone(),
            at: now_rfc3339(),
        };
        team.record(&event)?;
        reporter.event(&event);
    }
    Ok(Some(reason))
}

/// Pop the first waiting item that is ready; skip those whose prerequisites failed.
fn take_ready(
    waiting: &mut VecDeque<WorkItem>,
    spec: &RunSpec,
    st: &mut State,
    team: &mut Team,
    reporter: &mut dyn Reporter,
) -> Result<Option<WorkItem>> {
    let mut i = 0;
    while i < waiting.len() {
        match readiness(&waiting[i], team.ledger(), spec) {
            Ok(true) => return Ok(waiting.remove(i)),
            Ok(false) => i += 1,
            Err(reason) => {
                if let Some(item) = waiting.remove(i) {
                    skip(&item, ItemStatus::Skipped, reason, team, st, reporter)?;
                }
            }
        }
    }
    Ok(None)
}

/// An item completed by an earlier run with the same prompt is not run again: `true` when
/// `item` is one (it is counted as completed here).
fn resume_completed(
    item: &WorkItem,
    rerun: &HashSet<String>,
    team: &mut Team,
    st: &mut State,
) -> bool {
    // One look-up: completed before with this content, and now counted as completed.
    if rerun.contains(&item.id) || !team.recorded.ledger.resume(item) {
        return false;
    }
    tracing::debug!(
        "item {} completed in an earlier run; not run again",
        item.id
    );
    st.count(ItemStatus::Completed);
    st.resumed += 1;
    true
}

fn skip(
    item: &WorkItem,
    status: ItemStatus,
    reason: String,
    team: &mut Team,
    st: &mut State,
    reporter: &mut dyn Reporter,
) -> Result<()> {
    let event = Event::ItemFinished(Box::new(Outcome::not_run(
        &item.id,
        &item.teammate,
        &item.title,
        status,
        reason,
    )));
    team.record(&event)?;
    if let Event::ItemFinished(outcome) = &event {
        st.finish(outcome);
    }
    reporter.event(&event);
    Ok(())
}

#[cfg(test)]
mod tests;
