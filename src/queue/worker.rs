//! One worker's side of the queue: joining (seeding or checking the batch), then a thread
//! of its own that owns the connection — claiming an item whenever the dispatcher asks for
//! one, renewing the leases of the items it holds, recording verdicts and handing back
//! items it did not run. A server that goes away (restarted, say) is reconnected to on the
//! next turn; verdicts not yet recorded wait for it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Connection;
use tokio::sync::mpsc::UnboundedSender;

use crate::error::{Error, Result};
use crate::item::WorkItem;
use crate::options::queue::QueueUrl;
use crate::run::record::outcome::Outcome;
use crate::schedule::dispatcher::ItemStream;
use crate::schedule::feed::{Claimed, Feed, SharedQueue};
use crate::schedule::gate::Gate;
use crate::schedule::gate::shared::{Ending, Slot, Word};

use super::results::Results;
use super::server::{self, Keys, Seeded};
use super::slots::{FleetLimit, Slots};

/// What the run tells the queue's thread.
pub(crate) enum Cmd {
    /// A slot is free: claim one more item.
    Want,
    /// An item ended with a verdict: record it and acknowledge the item.
    Finished(Box<Outcome>),
    /// An item this worker did not run: hand it back (`stop`: and claim no more).
    GiveBack {
        /// The item.
        id: String,
        /// The worker stopped starting items (`--max-fail`, `--max-cost-usd`).
        stop: bool,
    },
    /// This worker's team paused for a rate limit until `until_ms` (ms since the epoch):
    /// the fleet pauses too.
    Paused {
        /// The pause's end.
        until_ms: u64,
    },
    /// The run's gate, for the fleet's pauses to reach it.
    Gate(Arc<Gate>),
    /// An attempt of an item started: its number, for a worker that takes it over.
    Started {
        /// The item.
        id: String,
        /// The attempt's number.
        attempt: u32,
    },
    /// An attempt asks for a slot of the fleet's limit: granted on `0` once one is free.
    Acquire(tokio::sync::oneshot::Sender<Slot>),
    /// An attempt ended: its slot goes back to the fleet, which counts it by its rules and
    /// says what it makes of it on `answer`.
    Release {
        /// The slot.
        slot: Slot,
        /// How the attempt ended.
        ending: Ending,
        /// Where the fleet's word goes.
        answer: tokio::sync::oneshot::Sender<Word>,
    },
    /// The run is over: record what is left and end.
    Stop,
}

/// A worker of the shared run on `url` (the [`SharedQueue`] a plan holds).
pub(crate) struct Worker {
    url: QueueUrl,
    keys: Keys,
    input: String,
    fingerprint: String,
    /// `--only failed`: reseed the failed items of a run that is over.
    reseed: bool,
    name: String,
    to_thread: Sender<Cmd>,
    from_run: Option<Receiver<Cmd>>,
    joined: Option<(Connection, Units)>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// A worker of the queue at `url` for the batch read from the input named `input` with
    /// content `fingerprint`, and the sink that sends it the run's outcomes; `reseed`:
    /// `--only failed` ([`Worker::reseed_failed`]).
    pub(crate) fn new(
        url: QueueUrl,
        input: &str,
        fingerprint: String,
        reseed: bool,
    ) -> (Worker, Results) {
        let (to_thread, from_run) = std::sync::mpsc::channel();
        let worker = Worker {
            url,
            keys: Keys::for_input(input),
            input: input.to_owned(),
            fingerprint,
            reseed,
            name: worker_name(),
            to_thread: to_thread.clone(),
            from_run: Some(from_run),
            joined: None,
            thread: None,
        };
        (
            worker,
            Results {
                to_queue: to_thread,
            },
        )
    }
}

/// This process's name among the workers: `host:pid:nonce` (pods share pid 1).
fn worker_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    format!(
        "{host}:{}:{:06x}",
        std::process::id(),
        rand::random::<u32>() & 0xff_ffff
    )
}

/// How often requests for a fleet's slot are asked again while they wait.
const SLOT_POLL: Duration = Duration::from_millis(20);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Worker {
    /// `--only failed`: when every item of the queue's run has its verdict, start its next
    /// generation with the units one of whose verdicts is neither completed nor blocked
    /// (their verdicts forgotten, the completed ones kept); of workers arriving together one
    /// does it, the others join it. A run still going on is joined as it is.
    ///
    /// Errors: the server failed (exit 3); a stored verdict is not valid (exit 2, naming it).
    fn reseed_failed(&self, con: &mut Connection, units: &Units) -> Result<()> {
        let (generation, total, results) =
            server::generation(con, &self.keys).map_err(|e| failed(&self.url, &e))?;
        if (results.len() as u64) < total {
            tracing::info!(
                "joined the queue {}: its run is still going on (--only failed hands out what failed once every item has its verdict)",
                self.url
            );
            return Ok(());
        }
        let known: HashSet<&str> = units.group_of.keys().map(String::as_str).collect();
        let mut verdicts = HashMap::new();
        for (id, json) in &results {
            verdicts.insert(
                id.as_str(),
                super::view::checked(&self.url, id, json, &known)?.status,
            );
        }
        use crate::report::ItemStatus::{Blocked, Completed, Skipped};
        let (mut again, mut forget, mut counted) = (Vec::new(), Vec::new(), 0u64);
        for unit in &units.order {
            let ids: Vec<&str> = units.items[unit].iter().map(|i| i.id.as_str()).collect();
            let statuses: Vec<_> = ids.iter().filter_map(|id| verdicts.get(id)).collect();
            if statuses.iter().all(|s| matches!(s, Completed | Blocked)) {
                continue;
            }
            counted += statuses
                .iter()
                .filter(|s| !matches!(s, Completed | Skipped))
                .count() as u64;
            forget.extend(
                ids.iter()
                    .filter(|id| verdicts.contains_key(*id))
                    .map(|id| (*id).to_owned()),
            );
            again.push(units.seed_of(unit));
        }
        if again.is_empty() {
            tracing::info!("joined the queue {}: no item of its run failed", self.url);
            return Ok(());
        }
        let reseeded = server::reseed(con, &self.keys, (&generation, counted), &forget, &again)
            .map_err(|e| failed(&self.url, &e))?;
        match reseeded {
            true => tracing::info!(
                "--only failed: {} item(s) handed out again on the queue {}",
                again.len(),
                self.url
            ),
            false => tracing::info!("joined the queue {}: another worker reseeded it", self.url),
        }
        Ok(())
    }
}

impl SharedQueue for Worker {
    fn join(&mut self, items: ItemStream) -> Result<()> {
        let mut units = Units::default();
        for item in items {
            units.add(item?);
        }
        let total = units.group_of.len();
        let seeds = units.seeds();
        let mut con = server::connect(&self.url)?;
        let seeded = server::seed(
            &mut con,
            &self.keys,
            (&self.fingerprint, &self.input),
            &seeds,
            total,
        )
        .map_err(|e| failed(&self.url, &e))?;
        match seeded {
            Seeded::Now => tracing::info!("seeded the queue {} with {total} items", self.url),
            Seeded::Before if self.reseed => self.reseed_failed(&mut con, &units)?,
            Seeded::Before => tracing::info!("joined the queue {}", self.url),
            Seeded::Other(have) => {
                return Err(Error::Usage(format!(
                    "the queue at {} holds another batch under `{}` (fingerprint {have}, this batch's is {}): a batch whose input, instruction or schema changed is a new run; clear the key (`{cli} --scan --pattern '{}:*' | xargs {cli} del`) or use another database (`/DB` in the URL)",
                    self.url,
                    self.keys.base,
                    self.fingerprint,
                    self.keys.base,
                    cli = self.url.cli()
                )));
            }
        }
        self.joined = Some((con, units));
        Ok(())
    }

    fn feed(&mut self) -> Feed {
        let (to_feed, claimed) = tokio::sync::mpsc::unbounded_channel();
        let want = self.to_thread.clone();
        let gate_to = self.to_thread.clone();
        let feed = Feed::new(
            claimed,
            Box::new(move || {
                let _ = want.send(Cmd::Want);
            }),
        )
        .with_gate(Box::new(move |gate| {
            // Before its first attempt: every attempt of this worker takes a fleet's slot.
            gate.share_limit(FleetLimit::new(gate_to.clone()));
            let _ = gate_to.send(Cmd::Gate(gate));
        }));
        let (Some((con, units)), Some(from_run)) = (self.joined.take(), self.from_run.take())
        else {
            let _ = to_feed.send(Claimed::End);
            return feed;
        };
        let mut thread = Thread {
            url: self.url.clone(),
            keys: self.keys.clone(),
            name: self.name.clone(),
            lease: super::lease(),
            con: Some(con),
            units,
            held: HashMap::new(),
            partial: HashMap::new(),
            given_back: HashSet::new(),
            want: 0,
            ended: false,
            to_feed,
            unrecorded: VecDeque::new(),
            down_since: None,
            gate: None,
            pause_seen: 0,
            blocked: Vec::new(),
            slots: Slots::default(),
            warned_limit: false,
            run_gone: false,
        };
        self.thread = Some(std::thread::spawn(move || thread.run(from_run)));
        feed
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.to_thread.send(Cmd::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn failed(url: &QueueUrl, e: &redis::RedisError) -> Error {
    Error::Environment(format!(
        "the queue at {url} failed: {}",
        crate::redact::urls(&e.to_string())
    ))
}

/// The thread that owns the connection while the run goes on.
struct Thread {
    url: QueueUrl,
    keys: Keys,
    name: String,
    lease: Duration,
    con: Option<Connection>,
    units: Units,
    /// Units this worker holds: unit id → stream entry.
    held: HashMap<String, String>,
    /// Outcomes of units some of whose items have not finished yet (a staged row's earlier
    /// stages): recorded together once all have.
    partial: HashMap<String, Vec<Outcome>>,
    /// Units handed back: an outcome of theirs that comes later is not recorded.
    given_back: HashSet<String>,
    want: usize,
    ended: bool,
    to_feed: UnboundedSender<Claimed>,
    /// Units' verdicts waiting for the server: unit id, its items' outcomes.
    unrecorded: VecDeque<(String, Vec<Outcome>)>,
    /// Since when the server has not answered (warned once per outage).
    down_since: Option<Instant>,
    /// The run's gate, once the dispatcher made it.
    gate: Option<Arc<Gate>>,
    /// The end of the latest fleet pause this worker knows (ms since the epoch).
    pause_seen: u64,
    /// Units claimed whose prerequisites (`depends_on`) have no verdict yet: held (their
    /// leases renewed) and looked at again each turn, taking no slot.
    blocked: Vec<String>,
    /// This worker's slots of the fleet's limit.
    slots: Slots,
    /// Warned that the fleet's limit held a broken value.
    warned_limit: bool,
    /// The server answered that the run's stream or its group is gone (`NOGROUP`): it was
    /// restarted without its data, or the run's keys were cleared.
    run_gone: bool,
}

/// Where a claimed item's prerequisites stand, by their verdicts in the queue.
enum Prerequisites {
    /// Every one completed (or it has none): it may run.
    Done,
    /// One has no verdict yet.
    Pending,
    /// One did not complete: the item is skipped, for this reason.
    Failed(String),
}

impl Thread {
    fn run(&mut self, from_run: Receiver<Cmd>) {
        let poll = (self.lease / 10).clamp(Duration::from_millis(20), Duration::from_millis(200));
        // Seen among the workers from the start (`runner status --queue`).
        self.touch(&[], Duration::ZERO);
        let mut renewed = Instant::now();
        let mut stopping = false;
        while !stopping {
            // Requests for a slot wait for another worker's to end: asked again soon.
            let wait = match self.slots.waiting() {
                true => poll.min(SLOT_POLL),
                false => poll,
            };
            match from_run.recv_timeout(wait) {
                Ok(cmd) => stopping |= self.take(cmd),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => stopping = true,
            }
            while let Ok(cmd) = from_run.try_recv() {
                stopping |= self.take(cmd);
            }
            self.record_waiting();
            if renewed.elapsed() >= self.lease / 3 {
                renewed = Instant::now();
                let entries: Vec<String> = self.held.values().cloned().collect();
                self.touch(&entries, Duration::ZERO);
                let lease = self.lease;
                let slots = std::mem::take(&mut self.slots);
                self.with(|con, keys, _| slots.renew(con, keys, lease));
                self.slots = slots;
            }
            if !stopping {
                self.grant();
                self.follow_pause();
                self.follow_limits();
                self.claim();
            }
        }
        // Verdicts still unrecorded get one lease's time for the server to come back.
        let until = Instant::now() + self.lease;
        while !self.unrecorded.is_empty() && Instant::now() < until {
            std::thread::sleep(poll);
            self.record_waiting();
        }
        if !self.unrecorded.is_empty() {
            tracing::warn!(
                "{} verdicts could not be recorded in the queue at {}; other workers run those items again",
                self.unrecorded.len(),
                self.url
            );
        }
    }

    /// Take one command; `true` for [`Cmd::Stop`].
    fn take(&mut self, cmd: Cmd) -> bool {
        match cmd {
            Cmd::Want => self.want += 1,
            Cmd::Finished(outcome) => self.finished(*outcome),
            Cmd::GiveBack { id, stop } => {
                let unit = self.units.unit_of(&id).to_owned();
                self.partial.remove(&unit);
                if let Some(entry) = self.held.remove(&unit) {
                    self.given_back.insert(unit);
                    self.touch(&[entry], self.lease);
                }
                if stop && !std::mem::replace(&mut self.ended, true) {
                    let _ = self.to_feed.send(Claimed::End);
                }
            }
            Cmd::Paused { until_ms } => {
                if until_ms > self.pause_seen {
                    self.pause_seen = until_ms;
                    self.with(|con, keys, _| server::pause(con, keys, until_ms, now_ms()));
                }
            }
            Cmd::Gate(gate) => {
                self.slots.jobs = gate.jobs();
                self.gate = Some(gate);
            }
            Cmd::Acquire(answer) => self.slots.ask(answer),
            Cmd::Release {
                slot,
                ending,
                answer,
            } => {
                let at = (now_ms(), self.lease);
                let mut slots = std::mem::take(&mut self.slots);
                let ended = self.with(|con, keys, _| slots.end(con, keys, &slot, ending, at));
                self.slots = slots;
                if let Some(ended) = ended {
                    self.broken_limit(ended.broken);
                    let _ = answer.send(ended.word);
                }
            }
            Cmd::Started { id, attempt } => {
                self.with(|con, keys, _| server::started(con, keys, &id, attempt));
            }
            Cmd::Stop => return true,
        }
        false
    }

    /// Grant the requests for a slot what the fleet's limit has free; when the server does
    /// not answer, they go unanswered (each attempt by its own gate).
    fn grant(&mut self) {
        if !self.slots.waiting() {
            return;
        }
        let at = (now_ms(), self.lease);
        let mut slots = std::mem::take(&mut self.slots);
        match self.with(|con, keys, name| slots.grant(con, keys, name, at)) {
            Some(broken) => self.broken_limit(broken),
            None => slots.unanswered(),
        }
        self.slots = slots;
    }

    /// Warn, once, that the fleet's limit held a value no runner writes (it was dropped).
    fn broken_limit(&mut self, broken: bool) {
        if broken && !std::mem::replace(&mut self.warned_limit, true) {
            tracing::warn!(
                "the queue at {} held a value under `{}:limit` or `{}:slots` that is no part of a fleet's rate limit (written by something else than a runner): ignored",
                self.url,
                self.keys.base,
                self.keys.base
            );
        }
    }

    /// Pause this worker's gate while the fleet's pause stands (another worker met a rate
    /// limit). The value is read as input: a pause over an hour away is not believed.
    fn follow_pause(&mut self) {
        if self.gate.is_none() {
            return;
        }
        let Some(until) = self.with(|con, keys, _| server::paused_until(con, keys)) else {
            return;
        };
        let now = now_ms();
        if until <= self.pause_seen || until <= now || until - now > 3_600_000 {
            return;
        }
        // The gate's own `team_paused` for it comes back as a pause a few ms later: that echo
        // is not the fleet's news (a second's margin), so it is not shared again.
        self.pause_seen = until + 1000;
        if let Some(gate) = &self.gate {
            gate.pause_for(Duration::from_millis(until - now));
        }
    }

    /// Stop this worker starting attempts once the whole fleet spent `--max-cost-usd` or
    /// `--max-fail` items did not complete (each worker's gate counts only its own).
    fn follow_limits(&mut self) {
        let Some(gate) = self.gate.clone() else {
            return;
        };
        let limits = gate.limits().clone();
        if (limits.max_cost_usd.is_none() && limits.max_fail.is_none()) || gate.stopped().is_some()
        {
            return;
        }
        let Some((spent, failed)) = self.with(|con, keys, _| server::fleet_totals(con, keys))
        else {
            return;
        };
        if let Some(max) = limits.max_cost_usd.filter(|max| spent >= *max) {
            gate.stop(format!(
                "the fleet's budget of ${max} reached: its workers spent ${spent:.4}"
            ));
        } else if let Some(max) = limits.max_fail.filter(|m| failed >= u64::from(m.count)) {
            gate.stop(format!(
                "--max-fail {} reached across the fleet: {failed} item(s) did not complete",
                max.count
            ));
        }
    }

    /// Run `op` on the connection, connecting first when there is none; `None` when the
    /// server did not answer (warned once per outage, the connection dropped).
    fn with<T>(
        &mut self,
        op: impl FnOnce(&mut Connection, &Keys, &str) -> redis::RedisResult<T>,
    ) -> Option<T> {
        if self.con.is_none() {
            self.con = server::connect(&self.url).ok();
        }
        let con = self.con.as_mut()?;
        match op(con, &self.keys, &self.name) {
            Ok(v) => {
                if self.down_since.take().is_some() {
                    tracing::warn!("the queue at {} answers again", self.url);
                }
                Some(v)
            }
            Err(e) => {
                self.con = None;
                self.run_gone |= e.code() == Some("NOGROUP");
                if self.down_since.is_none() {
                    self.down_since = Some(Instant::now());
                    tracing::warn!("{}; trying again", failed(&self.url, &e));
                }
                None
            }
        }
    }

    fn touch(&mut self, entries: &[String], idle: Duration) {
        let entries: Vec<&str> = entries.iter().map(String::as_str).collect();
        self.with(|con, keys, name| server::touch(con, keys, name, idle, now_ms(), &entries));
    }

    /// Keep `outcome` with its unit's others; the unit's verdicts wait for the server once
    /// every item of it has one.
    fn finished(&mut self, outcome: Outcome) {
        let unit = self.units.unit_of(&outcome.id).to_owned();
        if self.given_back.contains(&unit) {
            return;
        }
        let size = self.units.items.get(&unit).map_or(1, Vec::len);
        let got = self.partial.entry(unit.clone()).or_default();
        got.retain(|o| o.id != outcome.id);
        got.push(outcome);
        if got.len() >= size {
            let all = self.partial.remove(&unit).unwrap_or_default();
            self.unrecorded.push_back((unit, all));
        }
    }

    fn record_waiting(&mut self) {
        while let Some((unit, outcomes)) = self.unrecorded.pop_front() {
            let entry = self.held.get(&unit).cloned().unwrap_or_default();
            let mut results = Vec::new();
            let (mut cost, mut failed) = (0.0, 0u64);
            for outcome in &outcomes {
                let verdict = super::Verdict {
                    worker: self.name.clone(),
                    outcome: outcome.clone(),
                };
                let Ok(json) = serde_json::to_string(&verdict) else {
                    continue;
                };
                results.push((outcome.id.clone(), json));
                cost += outcome
                    .cost_usd
                    .filter(|c| c.is_finite() && *c > 0.0)
                    .unwrap_or(0.0);
                // As the gate counts for --max-fail: a skipped item is not a failure of its own.
                failed += u64::from(!matches!(
                    outcome.status,
                    crate::report::ItemStatus::Completed | crate::report::ItemStatus::Skipped
                ));
            }
            match self
                .with(|con, keys, _| server::record(con, keys, &entry, &results, (cost, failed)))
            {
                Some(won) => {
                    self.held.remove(&unit);
                    if !won {
                        tracing::info!(
                            "item {unit} had its verdict already: kept as a duplicate attempt"
                        );
                    }
                }
                None => {
                    self.unrecorded.push_front((unit, outcomes));
                    return;
                }
            }
        }
    }

    /// Claim items while the run has room for them; say so when the shared run is over.
    fn claim(&mut self) {
        if !self.ended && self.gate.as_ref().is_some_and(|g| g.stopped().is_some()) {
            // The team stopped starting attempts: take nothing more from the others.
            self.ended = true;
            let _ = self.to_feed.send(Claimed::End);
        }
        self.unblock();
        while self.want > 0 && !self.ended {
            let lease = self.lease;
            let Some(claim) = self.with(|con, keys, name| server::claim(con, keys, name, lease))
            else {
                if self.run_gone {
                    self.ended = true;
                    let _ = self.to_feed.send(Claimed::Failed(Error::Environment(format!(
                        "the queue at {} no longer holds this run (`{}:items` is gone): the Redis server was restarted without its data (run it with `appendonly yes`) or the run's keys were cleared; this worker takes no more items (what it ran stays in its workspace's journal); start the workers again to seed the queue anew",
                        self.url, self.keys.base
                    ))));
                }
                return;
            };
            let Some((entry, id)) = claim.item else {
                let Some(total) = claim.total else {
                    self.ended = true;
                    let _ = self.to_feed.send(Claimed::Failed(Error::Usage(format!(
                        "the queue at {} holds a `total` in `{}:meta` that is not a number; the key was changed by something else than a runner: clear it",
                        self.url, self.keys.base
                    ))));
                    return;
                };
                if claim.done >= total {
                    self.ended = true;
                    let _ = self.to_feed.send(Claimed::End);
                }
                return;
            };
            // An id is looked up among this worker's own items, never taken on trust.
            if !self.units.items.contains_key(&id) {
                self.ended = true;
                let _ = self.to_feed.send(Claimed::Failed(Error::Usage(format!(
                    "the queue at {} handed out item `{}`, which this batch does not have; the queue's key `{}` was changed by something else than a runner of this batch",
                    self.url,
                    crate::shown::terminal_safe(&id),
                    self.keys.base
                ))));
                return;
            };
            self.held.insert(id.clone(), entry);
            self.given_back.remove(&id);
            self.settle(id);
        }
    }

    /// Hand out, skip or keep waiting each blocked item, by its prerequisites' verdicts.
    fn unblock(&mut self) {
        for id in std::mem::take(&mut self.blocked) {
            if self.want == 0 {
                self.blocked.push(id);
            } else {
                self.settle(id);
            }
        }
    }

    /// A held unit: its items to the run when its prerequisites completed (they are the
    /// fleet's to know, so the run sees none; a staged row's stages keep waiting for each
    /// other), skipped when one did not (their verdicts recorded here), else kept blocked.
    fn settle(&mut self, unit: String) {
        let Some(items) = self.units.items.get(&unit).cloned() else {
            return;
        };
        let own: HashSet<String> = items.iter().map(|i| i.id.clone()).collect();
        let mut after: Vec<String> = Vec::new();
        for dep in items.iter().flat_map(|i| &i.after) {
            if !own.contains(dep) && !after.contains(dep) {
                after.push(dep.clone());
            }
        }
        match self.prerequisites(&after) {
            Prerequisites::Done => {
                self.want = self.want.saturating_sub(1);
                let before = self.attempts_before(&items);
                for (mut item, before) in items.into_iter().zip(before) {
                    item.after.retain(|d| own.contains(d));
                    let _ = self.to_feed.send(Claimed::Item(Box::new(item), before));
                }
            }
            Prerequisites::Pending => self.blocked.push(unit),
            Prerequisites::Failed(reason) => {
                let outcomes = items
                    .iter()
                    .map(|item| {
                        Outcome::not_run(
                            &item.id,
                            &item.teammate,
                            &item.title,
                            crate::report::ItemStatus::Skipped,
                            reason.clone(),
                        )
                    })
                    .collect();
                self.unrecorded.push_back((unit, outcomes));
            }
        }
    }

    /// The highest attempt number the fleet started of each of `items` (0: none, or the
    /// server did not answer). A value that is no number is not believed: warned of, and 0.
    fn attempts_before(&mut self, items: &[WorkItem]) -> Vec<u32> {
        let ids: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
        let found = self
            .with(|con, keys, _| server::attempts_of(con, keys, &ids))
            .unwrap_or_default();
        ids.iter()
            .enumerate()
            .map(|(i, id)| match found.get(i).cloned().flatten() {
                None => 0,
                // More attempts than any run makes is not believed either.
                Some(text) => text.trim().parse::<u32>().ok().filter(|n| *n <= 10_000).unwrap_or_else(|| {
                    tracing::warn!(
                        "the queue at {} holds `{}` as the attempts of item {}, which is no attempt count: ignored",
                        self.url,
                        crate::shown::terminal_safe(&text),
                        crate::shown::terminal_safe(id)
                    );
                    0
                }),
            })
            .collect()
    }

    /// Where `after` stands in the queue's verdicts; a verdict that does not parse counts
    /// as one that did not complete.
    fn prerequisites(&mut self, after: &[String]) -> Prerequisites {
        if after.is_empty() {
            return Prerequisites::Done;
        }
        let Some(found) = self.with(|con, keys, _| server::verdicts_of(con, keys, after)) else {
            return Prerequisites::Pending;
        };
        let known: HashSet<&str> = self.units.group_of.keys().map(String::as_str).collect();
        for (dep, verdict) in after.iter().zip(found) {
            let Some(json) = verdict else {
                return Prerequisites::Pending;
            };
            // Checked like a journal line: one that is not valid is reported, and counts as
            // a prerequisite that did not complete.
            let status = match super::view::checked(&self.url, dep, &json, &known) {
                Ok(outcome) => outcome.status.to_string(),
                Err(e) => {
                    tracing::warn!("{e}");
                    "no valid verdict".into()
                }
            };
            if status != "completed" {
                return Prerequisites::Failed(format!(
                    "prerequisite {dep} did not complete ({status})"
                ));
            }
        }
        Prerequisites::Done
    }
}

/// A worker's batch as the queue hands it out: in units, each an item or a staged row with
/// all its stages (a row's stages run on the worker that claims it, one after another).
#[derive(Default)]
struct Units {
    /// Unit ids in the batch's order.
    order: Vec<String>,
    /// Unit id → its items, in the order they run.
    items: HashMap<String, Vec<WorkItem>>,
    /// Item id → its unit's id.
    group_of: HashMap<String, String>,
}

impl Units {
    fn add(&mut self, item: WorkItem) {
        let unit = item.stage.as_ref().map_or(&item.id, |s| &s.row).clone();
        self.group_of.insert(item.id.clone(), unit.clone());
        let items = self.items.entry(unit.clone()).or_default();
        if items.is_empty() {
            self.order.push(unit);
        }
        items.push(item);
    }

    /// The unit `item` belongs to (an id of no unit is its own).
    fn unit_of<'a>(&'a self, item: &'a str) -> &'a str {
        self.group_of.get(item).map_or(item, String::as_str)
    }

    /// What seeding puts in the stream, in order.
    fn seeds(&self) -> Vec<server::Unit> {
        self.order.iter().map(|id| self.seed_of(id)).collect()
    }

    /// The stream entry of unit `id`.
    fn seed_of(&self, id: &str) -> server::Unit {
        let first = self.items.get(id).and_then(|i| i.first()).map(|i| &i.id);
        server::Unit {
            id: id.to_owned(),
            check: first.filter(|f| *f != id).cloned(),
        }
    }
}
