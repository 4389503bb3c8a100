//! The team's gate: every attempt passes it before it starts. It is where the team adapts to
//! its provider instead of failing items:
//!
//! - a `rate_limited` attempt pauses the whole team until the retry-after time (the CLI's own
//!   "try again in …" when it gives one, else exponential back-off from 2 s with jitter) and
//!   halves how many attempts run at once (once per burst: attempts that started before the
//!   last halving do not halve it again); once the burst's last attempt ended, the limit is
//!   how many of the burst the server served (it stays halved when the server served none):
//!   eight started against a server that serves two fall straight to two, and seven served
//!   of eight do not fall to four. Each run of successes two rounds of the limit long (2 ×
//!   the limit) adds one, never above `--jobs` (additive increase, multiplicative decrease);
//! - once the limit has changed, successes earn credit (one each, up to the limit): a rate
//!   limit the credit covers is an overflow — the server full for a moment, as it is when the
//!   attempts spend part of their time elsewhere (an agent's own start-up) and the limit runs
//!   one above the server's to keep it busy — so only that attempt waits its retry-after; the
//!   limit stands and the team is not paused, but the run of successes starts again;
//! - a rate limit with no credit left just after a step up is the probe failing: the limit
//!   steps back once (however many of the probe's attempts meet it), only those attempts
//!   wait, and the next probe waits twice as many rounds (up to 16) — the team learns the
//!   provider's cap;
//! - an `auth` failure, a `quota` that does not reset within `--rate-limit-wait`, a spent
//!   budget (`--max-cost-usd`) or `--max-fail` stops the team starting attempts: what runs
//!   finishes, the rest end `skipped` with the reason;
//! - so do [`SETUP_STOP`] attempts of at least two items failing `setup` with the same words
//!   (a broken agent command, an endpoint that refuses connections) before any attempt of the
//!   run ended otherwise: the first attempts show the set-up is broken, and every other item
//!   would fail the same way. Counting attempts, not only items, keeps the cost the same
//!   however the retries of the first items and the start of the next ones interleave.
//!
//! Each change is an event ([`Event::TeamPaused`], [`Event::TeamStopped`]) in the journal.
//!
//! A worker of a shared queue (`--queue`) shares its limit with the fleet ([`shared`]): an
//! attempt starts only with a slot of the fleet's limit, and the fleet's rules (the same,
//! applied to every worker's attempts) move it.

mod aimd;
pub(crate) mod shared;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rand::Rng;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::failure::FailureKind;
use crate::options::limits::Limits;
use crate::report::{ItemStatus, Verdict};
use crate::run::events::Event;
use crate::run::now_rfc3339;

pub(crate) use aimd::Limited;
use shared::{Rules, SharedLimit, Slot};

/// First back-off after a rate limit that names no time; doubled per rate limit in a row.
const FIRST_BACKOFF: Duration = Duration::from_secs(2);
/// Longest back-off when no time is named.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Attempts failing `setup` with the same reason (of at least two items), before any attempt
/// of the run ended otherwise, that stop the team.
pub(crate) const SETUP_STOP: u32 = 3;

#[derive(Debug)]
struct State {
    /// Attempts allowed at once now (1 ..= jobs).
    limit: usize,
    /// Attempts running now.
    active: usize,
    /// No attempt starts before this.
    paused_until: Option<Instant>,
    /// Why it is paused (`rate limited`), for status.
    pause_reason: String,
    /// Why the team stopped starting attempts.
    stopped: Option<String>,
    /// Attempts in a row that were not rate limited.
    streak: usize,
    /// Rate limits in a row (for the back-off).
    limited_in_a_row: u32,
    /// Cost spent (earlier runs included), USD.
    spent: f64,
    /// Attempts whose cost is known.
    costed: u32,
    /// Items that did not complete (this run).
    failures: u32,
    /// The items of this run that failed `setup` and their attempts so failed, by reason,
    /// while no attempt has ended otherwise (emptied once one has).
    setup_failures: std::collections::HashMap<String, (std::collections::HashSet<String>, u32)>,
    /// Whether an attempt of this run ended other than `setup` (then the set-up works).
    set_up_works: bool,
    /// The limit the team last stepped up from, while the step up is unproven (a probe);
    /// `None` once a run of successes at the new limit proved it, or the probe failed.
    probing_from: Option<usize>,
    /// The epoch a step up began: rate limits of attempts admitted in it (or just before,
    /// running beside the probe) are the probe's, and pause nobody.
    probe_epoch: Option<u64>,
    /// Rounds of the current limit (successes in a row, in units of the limit) before the
    /// next step up: 2, doubled by each failed probe (up to 16).
    rounds_needed: usize,
    /// Rate limits the current limit may absorb as overflows: each success adds one (up to
    /// the limit) once the limit has changed, each absorbed rate limit takes one; emptied
    /// when the limit falls.
    credit: usize,
    /// The burst of attempts running when the limit last fell, until its last one ended.
    burst: Option<Burst>,
    /// Attempts waiting at the gate.
    waiting: usize,
    /// How many times the limit was halved; an attempt admitted before the last halving
    /// belongs to the burst that caused it.
    epoch: u64,
}

/// The attempts that were running when a rate limit made the limit fall: how many of them
/// the server served tells what it serves at once.
#[derive(Debug)]
struct Burst {
    /// The gate's epoch before the fall: attempts admitted at it or earlier are the burst's.
    epoch: u64,
    /// The burst's attempts still running.
    running: usize,
    /// The burst's attempts that ended other than rate limited.
    served: usize,
}

/// What the team's gate shows `runner status`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GateView {
    /// Attempts allowed at once now.
    pub limit: usize,
    /// Attempts waiting at the gate.
    pub waiting: usize,
    /// `rate limited until 14:03:10`, while paused.
    pub paused: Option<String>,
    /// Why no new attempts start, once stopped.
    pub stopped: Option<String>,
    /// Cost spent so far (earlier runs included), when any is known.
    pub spent_usd: Option<f64>,
}

/// The gate of one run. Shared by the dispatcher and every teammate's supervisor.
#[derive(Debug)]
pub(crate) struct Gate {
    jobs: usize,
    limits: Limits,
    state: Mutex<State>,
    changed: Notify,
    events: mpsc::UnboundedSender<Event>,
    /// The fleet's limit, when this run is a worker of a shared queue: every attempt then
    /// needs a slot of it, and the fleet's rules move the limit instead of this gate's.
    shared: OnceLock<Arc<dyn SharedLimit>>,
}

/// A running attempt's place at the gate; [`Permit::ended`] (or dropping it) lets the next
/// one in.
#[derive(Debug)]
pub(crate) struct Permit {
    gate: Arc<Gate>,
    /// The gate's epoch when it was admitted (the fleet's version, with a slot of it).
    epoch: u64,
    /// Its slot of the fleet's limit, when the limit is shared and the fleet granted one.
    slot: Option<Slot>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        // An attempt that never reached `ended` (interrupted, or admitted and given up)
        // gives its slot back without counting for the limit.
        if let Some(slot) = self.slot.take()
            && let Some(fleet) = self.gate.shared.get()
        {
            drop(fleet.end(slot, shared::Ending::Dropped));
        }
        self.gate.with(|s| s.active = s.active.saturating_sub(1));
        self.gate.changed.notify_waiters();
    }
}

impl Permit {
    /// The attempt ended with `verdict` (costing `cost` USD, when known): account for it and
    /// say what its item does next ([`Gate::ended`]).
    pub(crate) fn ended(
        self,
        item: &str,
        verdict: &Verdict,
        cost: Option<f64>,
        waited: Duration,
    ) -> After {
        let gate = self.gate.clone();
        let epoch = self.epoch;
        // Its cost counts before its slot is free: an attempt admitted to that slot must see
        // it against the budget (else one more starts over `--max-cost-usd`).
        gate.count_cost(cost);
        drop(self);
        gate.ended_in(epoch, (item, verdict), waited, Rules::Own)
    }

    /// The attempt ended with `verdict` (costing `cost` USD, when known): as
    /// [`Permit::ended`] when the gate's limit is its own; with a slot of a fleet's limit, the
    /// slot goes back to the fleet, which counts the attempt by its rules and says what a
    /// rate limit was (waiting at most [`shared::ANSWER_WAIT`] for its word; without it no
    /// limit moves, and the item waits the hint).
    pub(crate) async fn end(
        mut self,
        item: &str,
        verdict: &Verdict,
        cost: Option<f64>,
        waited: Duration,
    ) -> After {
        let gate = self.gate.clone();
        let Some(fleet) = gate.shared.get().cloned() else {
            return self.ended(item, verdict, cost, waited);
        };
        let epoch = self.epoch;
        gate.count_cost(cost);
        // Given back before this process's place is free: the next attempt's request for a
        // slot comes after it.
        let word = self
            .slot
            .take()
            .map(|slot| fleet.end(slot, gate.ending(verdict, waited)));
        drop(self);
        let rules = match word {
            None => Rules::Unanswered,
            Some(word) => match tokio::time::timeout(shared::ANSWER_WAIT, word).await {
                Ok(Ok(word)) => Rules::Fleet(word),
                _ => Rules::Unanswered,
            },
        };
        gate.ended_in(epoch, (item, verdict), waited, rules)
    }
}

/// What a teammate's supervisor does after an attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum After {
    /// Go on as the verdict says (retry by `--retries`, or finish).
    Judged,
    /// Rate limited: attempt again after the team's pause, without using a retry.
    Requeue,
    /// Rate limited alone (a probe above the limit the team ran well at): attempt again after
    /// this wait of its own, without using a retry; the team is not paused.
    Wait(Duration),
    /// Finish with this verdict, no retry: the team stopped (auth, quota), or the item has
    /// waited out `--rate-limit-wait`.
    Final,
}

/// What earlier runs of a team spent: a resumed run keeps the same budget, and expects its
/// first attempts to cost what theirs did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Spent {
    /// Total, USD.
    pub usd: f64,
    /// How many items it was spent on (the mean cost is `usd / costed`).
    pub costed: u32,
}

impl Gate {
    /// A gate for `jobs` attempts at once; `before` is what earlier runs of the team spent.
    /// Events go to `events`.
    pub(crate) fn new(
        jobs: usize,
        limits: Limits,
        before: Spent,
        events: mpsc::UnboundedSender<Event>,
    ) -> Gate {
        Gate {
            jobs: jobs.max(1),
            limits,
            state: Mutex::new(State {
                limit: jobs.max(1),
                active: 0,
                paused_until: None,
                pause_reason: String::new(),
                stopped: None,
                streak: 0,
                limited_in_a_row: 0,
                spent: before.usd,
                costed: before.costed,
                failures: 0,
                setup_failures: Default::default(),
                set_up_works: false,
                probing_from: None,
                probe_epoch: None,
                rounds_needed: 2,
                credit: 0,
                burst: None,
                waiting: 0,
                epoch: 0,
            }),
            changed: Notify::new(),
            events,
            shared: OnceLock::new(),
        }
    }

    /// The limits in effect.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Attempts this process runs at once at most (`--jobs`).
    pub(crate) fn jobs(&self) -> usize {
        self.jobs
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Why the team no longer starts attempts, once it stopped.
    pub(crate) fn stopped(&self) -> Option<String> {
        self.with(|s| s.stopped.clone())
    }

    /// Return once the team stopped starting attempts (at once if it has): an item waiting
    /// out a retry's back-off ends then instead of sleeping on (a broken set-up's stop).
    pub(crate) async fn until_stopped(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.stopped().is_some() {
                return;
            }
            notified.await;
        }
    }

    /// Stop starting attempts, for `reason` (the first reason stays). Recorded as an event.
    pub(crate) fn stop(&self, reason: String) {
        let first = self.with(|s| {
            if s.stopped.is_some() {
                return false;
            }
            s.stopped = Some(reason.clone());
            // Sent under the lock: whoever sees the stop finds its event sent before.
            let _ = self.events.send(Event::TeamStopped {
                reason,
                at: now_rfc3339(),
            });
            true
        });
        if first {
            self.changed.notify_waiters();
        }
    }

    /// Wait until an attempt may start and take a place (with a shared limit, a slot of the
    /// fleet's too); `Err(reason)` when the team stopped starting attempts. Cancel-safe:
    /// dropping the future gives nothing up (a slot granted to it goes back).
    pub(crate) async fn admit(self: &Arc<Self>) -> Result<Permit, String> {
        self.with(|s| s.waiting += 1);
        struct Waiting<'a>(&'a Gate);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.with(|s| s.waiting = s.waiting.saturating_sub(1));
            }
        }
        let _waiting = Waiting(self);
        enum Next {
            Go(u64),
            Sleep(Instant),
            Wait,
            Over(String),
        }
        // With a fleet's limit this process's own is `--jobs`: the fleet's slots limit it.
        let own_limit = self.shared.get().is_none();
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next = self.with(|s| {
                if let Some(r) = &s.stopped {
                    return Err(r.clone());
                }
                if let Some(max) = self.limits.max_cost_usd {
                    let mean = if s.costed > 0 {
                        s.spent / f64::from(s.costed)
                    } else {
                        0.0
                    };
                    // This attempt counts too: with it, the expected spend must stay within
                    // the budget (before any cost is known, the first wave starts).
                    let expected = s.spent + mean * (s.active + 1) as f64;
                    if s.spent >= max || (s.spent > 0.0 && expected > max + 1e-9) {
                        return Ok(Next::Over(format!(
                            "budget of ${} reached: spent ${}",
                            crate::run::record::outcome::usd_text(max),
                            crate::run::record::outcome::usd_text(s.spent)
                        )));
                    }
                }
                match s.paused_until {
                    Some(t) if t > Instant::now() => return Ok(Next::Sleep(t)),
                    Some(_) => s.paused_until = None,
                    None => {}
                }
                if s.active < if own_limit { s.limit } else { self.jobs } {
                    s.active += 1;
                    return Ok(Next::Go(s.epoch));
                }
                Ok(Next::Wait)
            })?;
            match next {
                Next::Go(epoch) => {
                    let permit = Permit {
                        gate: self.clone(),
                        epoch,
                        slot: None,
                    };
                    let Some(fleet) = self.shared.get() else {
                        return Ok(permit);
                    };
                    if let Some(permit) = self.take_slot(fleet.as_ref(), permit).await? {
                        return Ok(permit);
                    }
                }
                Next::Over(reason) => {
                    self.stop(reason.clone());
                    return Err(reason);
                }
                Next::Sleep(t) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(t) => {}
                        _ = notified => {}
                    }
                }
                Next::Wait => notified.await,
            }
        }
    }

    /// Account for an attempt that ended with `verdict` (costing `cost` USD, when known), and
    /// say what its item does next. `waited` is how long the item has waited for rate limits
    /// so far; a rate limit that would take it past `--rate-limit-wait` is final. For an
    /// attempt admitted now (use [`Permit::ended`] for one that ran).
    #[cfg(test)]
    pub(crate) fn ended(
        &self,
        item: &str,
        verdict: &Verdict,
        cost: Option<f64>,
        waited: Duration,
    ) -> After {
        let epoch = self.with(|s| s.epoch);
        self.count_cost(cost);
        self.ended_in(epoch, (item, verdict), waited, Rules::Own)
    }

    /// Add what an attempt cost (USD, when known) to what the team spent.
    fn count_cost(&self, cost: Option<f64>) {
        self.with(|s| {
            if let Some(c) = cost {
                s.spent += c;
                s.costed += 1;
            }
        });
    }

    /// Account for an attempt admitted at `epoch` that ended with `verdict`, by the limit's
    /// rules `rules` (the gate's own, or the fleet's word on it), and say what its item does
    /// next.
    fn ended_in(
        &self,
        epoch: u64,
        (item, verdict): (&str, &Verdict),
        waited: Duration,
        rules: Rules,
    ) -> After {
        let retry_after = verdict.retry_after_s.and_then(crate::failure::hinted_wait);
        let own = matches!(rules, Rules::Own);
        if let Rules::Fleet(word) = &rules {
            self.with(|s| s.limit = word.shown(self.jobs));
        }
        match verdict.kind {
            Some(FailureKind::RateLimited) => self.rate_limited(epoch, retry_after, waited, rules),
            Some(FailureKind::Quota) => match retry_after {
                Some(reset) if waited + reset <= self.limits.rate_limit_wait => {
                    self.rate_limited(epoch, Some(reset), waited, rules)
                }
                _ => {
                    self.stop(format!("quota exhausted: {}", verdict.reason));
                    After::Final
                }
            },
            Some(FailureKind::Auth) => {
                self.stop(format!("authentication failed ({})", verdict.reason));
                After::Final
            }
            Some(FailureKind::Setup) => {
                // The same words from different items (a row's own missing file differs by
                // row; a missing agent script or a refused connection does not).
                let broken = self.with(|s| {
                    if own {
                        s.burst_member_ended(epoch, false, self.jobs);
                    }
                    if s.set_up_works {
                        return None;
                    }
                    let (items, attempts) =
                        s.setup_failures.entry(verdict.reason.clone()).or_default();
                    items.insert(item.to_owned());
                    *attempts += 1;
                    (*attempts >= SETUP_STOP && items.len() >= 2)
                        .then_some((*attempts, items.len()))
                });
                if let Some((attempts, items)) = broken {
                    self.stop(format!(
                        "set-up failure: the first {attempts} attempts ({items} items) failed the same way before any attempt got further ({}); fix the agent command or the endpoint and run again",
                        verdict.reason
                    ));
                    return After::Final;
                }
                After::Judged
            }
            _ => {
                self.with(|s| {
                    s.set_up_works = true;
                    s.setup_failures.clear();
                    s.limited_in_a_row = 0;
                    if own {
                        s.served(epoch, self.jobs);
                    }
                });
                self.changed.notify_waiters();
                After::Judged
            }
        }
    }

    fn rate_limited(
        &self,
        epoch: u64,
        retry_after: Option<Duration>,
        waited: Duration,
        rules: Rules,
    ) -> After {
        let limited = match rules {
            Rules::Own => self.with(|s| s.limited(epoch, self.jobs)),
            Rules::Fleet(word) => word.limited.unwrap_or(Limited::Pause { first: false }),
            // The fleet did not answer: no limit moves; the team waits the hint.
            Rules::Unanswered => Limited::Pause { first: false },
        };
        let first_of_burst = match limited {
            Limited::Alone => {
                let wait = retry_after.unwrap_or(FIRST_BACKOFF);
                self.changed.notify_waiters();
                if waited + wait > self.limits.rate_limit_wait {
                    return After::Final;
                }
                return After::Wait(wait);
            }
            Limited::Pause { first } => first,
        };
        let (wait, limit) = self.with(|s| {
            // A burst (attempts admitted before its first rate limit) counts once: eight 429s
            // of one wave are one rate limit, not eight doublings of the back-off.
            if first_of_burst {
                s.limited_in_a_row += 1;
            }
            let left = s
                .paused_until
                .map(|t| t.saturating_duration_since(Instant::now()));
            let wait = match (retry_after, first_of_burst, left) {
                (Some(named), _, _) => named,
                // The burst's pause already stands: no new back-off of its own.
                (None, false, Some(left)) => left,
                (None, _, _) => {
                    let exp = FIRST_BACKOFF
                        .saturating_mul(1 << (s.limited_in_a_row.max(1) - 1).min(10))
                        .min(MAX_BACKOFF);
                    exp.mul_f64(rand::rng().random_range(0.75..1.25))
                }
            };
            (wait, s.limit)
        });
        if waited + wait > self.limits.rate_limit_wait {
            return After::Final;
        }
        let until = Instant::now() + wait;
        let extended = self.with(|s| {
            if s.paused_until.is_some_and(|t| t >= until) {
                return false;
            }
            s.paused_until = Some(until);
            s.pause_reason = "rate limited".into();
            true
        });
        if extended {
            self.announce_pause(wait, limit);
        }
        After::Requeue
    }

    /// Record that the team pauses for `wait` at `limit` attempts at once (`team_paused`).
    fn announce_pause(&self, wait: Duration, limit: usize) {
        let at = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::try_from(wait).unwrap_or_default())
            .map(crate::run::rfc3339)
            .unwrap_or_default();
        let _ = self.events.send(Event::TeamPaused {
            until: at,
            wait_s: (wait.as_secs_f64() * 10.0).round() / 10.0,
            limit,
            at: now_rfc3339(),
        });
    }

    /// Pause the team for `wait` from now because another worker of its shared run met a
    /// rate limit (`--queue`: one pause for the fleet); a pause that lasts longer already
    /// stands. Recorded as `team_paused`, as the team's own pauses are.
    pub(crate) fn pause_for(&self, wait: Duration) {
        let until = Instant::now() + wait;
        let limit = self.with(|s| {
            if s.paused_until.is_some_and(|t| t >= until) {
                return None;
            }
            s.paused_until = Some(until);
            s.pause_reason = "rate limited (another worker)".into();
            Some(s.limit)
        });
        if let Some(limit) = limit {
            self.announce_pause(wait, limit);
            self.changed.notify_waiters();
        }
    }

    /// How long the team is paused from now (zero when it is not).
    #[cfg(test)]
    pub(crate) fn pause_left(&self) -> Duration {
        self.with(|s| {
            s.paused_until.map_or(Duration::ZERO, |t| {
                t.saturating_duration_since(Instant::now())
            })
        })
    }

    /// Account for an item that reached its final `status`; returns `true` when this makes
    /// `--max-fail N:immediate` stop the running teammates too.
    pub(crate) fn item_finished(&self, status: ItemStatus) -> bool {
        if matches!(status, ItemStatus::Completed | ItemStatus::Skipped) {
            return false;
        }
        let Some(max) = self.limits.max_fail else {
            return false;
        };
        let failures = self.with(|s| {
            s.failures += 1;
            s.failures
        });
        if failures < max.count {
            return false;
        }
        self.stop(format!(
            "--max-fail {} reached: {failures} item(s) did not complete",
            max.count
        ));
        max.immediate
    }

    /// What `runner status` shows of the gate.
    pub(crate) fn view(&self) -> GateView {
        self.with(|s| {
            let left = s
                .paused_until
                .map(|t| t.saturating_duration_since(Instant::now()))
                .filter(|d| !d.is_zero());
            GateView {
                limit: s.limit,
                waiting: s.waiting,
                paused: left.map(|d| {
                    let until = jiff::Timestamp::now()
                        .checked_add(jiff::SignedDuration::try_from(d).unwrap_or_default())
                        .map(|t| t.strftime("%H:%M:%S UTC").to_string())
                        .unwrap_or_default();
                    format!("{} until {until}", s.pause_reason)
                }),
                stopped: s.stopped.clone(),
                spent_usd: (s.costed > 0 || s.spent > 0.0).then_some(s.spent),
            }
        })
    }
}

#[cfg(test)]
mod tests;
