//! The team's gate: every attempt passes it before it starts. It is where the team adapts to
//! its provider instead of failing items:
//!
//! - a `rate_limited` attempt pauses the whole team until the retry-after time (the CLI's own
//!   "try again in …" when it gives one, else exponential back-off from 2 s with jitter) and
//!   halves how many attempts run at once (once per burst: attempts that started before the
//!   last halving do not halve it again); each run of 2 × `--jobs` successes adds one back,
//!   never above `--jobs` (additive increase, multiplicative decrease). A rate limit met just
//!   after such a step up is the probe failing: the limit steps back, only that attempt
//!   waits (the others ran fine at the old limit, so the team is not paused), and the next
//!   probe waits twice as many successes — the team learns the provider's cap;
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

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::failure::FailureKind;
use crate::options::limits::Limits;
use crate::report::{ItemStatus, Verdict};
use crate::run::events::Event;
use crate::run::now_rfc3339;

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
    /// Successes in a row before the next step up: 2 × `--jobs`, doubled by each failed
    /// probe (up to 16 × `--jobs`).
    streak_needed: usize,
    /// Attempts waiting at the gate.
    waiting: usize,
    /// How many times the limit was halved; an attempt admitted before the last halving
    /// belongs to the burst that caused it.
    epoch: u64,
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
}

/// A running attempt's place at the gate; [`Permit::ended`] (or dropping it) lets the next
/// one in.
#[derive(Debug)]
pub(crate) struct Permit {
    gate: Arc<Gate>,
    /// The gate's epoch when it was admitted.
    epoch: u64,
}

impl Drop for Permit {
    fn drop(&mut self) {
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
        gate.ended_in(epoch, item, verdict, waited)
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
                streak_needed: 2 * jobs.max(1),
                waiting: 0,
                epoch: 0,
            }),
            changed: Notify::new(),
            events,
        }
    }

    /// The limits in effect.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
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

    /// Wait until an attempt may start and take a place; `Err(reason)` when the team
    /// stopped starting attempts. Cancel-safe: dropping the future gives nothing up.
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
                if s.active < s.limit {
                    s.active += 1;
                    return Ok(Next::Go(s.epoch));
                }
                Ok(Next::Wait)
            })?;
            match next {
                Next::Go(epoch) => {
                    return Ok(Permit {
                        gate: self.clone(),
                        epoch,
                    });
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
        self.ended_in(epoch, item, verdict, waited)
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

    fn ended_in(&self, epoch: u64, item: &str, verdict: &Verdict, waited: Duration) -> After {
        let retry_after = verdict.retry_after_s.and_then(crate::failure::hinted_wait);
        match verdict.kind {
            Some(FailureKind::RateLimited) => self.rate_limited(epoch, retry_after, waited),
            Some(FailureKind::Quota) => match retry_after {
                Some(reset) if waited + reset <= self.limits.rate_limit_wait => {
                    self.rate_limited(epoch, Some(reset), waited)
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
                    s.streak += 1;
                    if s.streak >= s.streak_needed {
                        // A run of successes: the current limit is proven.
                        s.probing_from = None;
                        if s.limit < self.jobs {
                            s.probing_from = Some(s.limit);
                            s.limit += 1;
                            s.epoch += 1;
                            s.probe_epoch = Some(s.epoch);
                        }
                        s.streak = 0;
                    }
                });
                self.changed.notify_waiters();
                After::Judged
            }
        }
    }

    fn rate_limited(&self, epoch: u64, retry_after: Option<Duration>, waited: Duration) -> After {
        // A probe that failed: step back to the proven limit; only this attempt waits (and
        // so does any other attempt that met the probe's rate limit).
        let probe = self.with(|s| {
            let probe = s.probe_epoch?;
            if epoch != probe && epoch + 1 != probe {
                return None;
            }
            if let Some(from) = s.probing_from.take() {
                s.limit = from;
                s.streak = 0;
                s.streak_needed = (s.streak_needed * 2).min(16 * self.jobs);
                // Attempts admitted from now on run at the proven limit again.
                s.epoch += 1;
            }
            Some(())
        });
        if probe.is_some() {
            let wait = retry_after.unwrap_or(FIRST_BACKOFF);
            self.changed.notify_waiters();
            if waited + wait > self.limits.rate_limit_wait {
                return After::Final;
            }
            return After::Wait(wait);
        }
        let (wait, limit) = self.with(|s| {
            s.streak = 0;
            // A burst (attempts admitted before its first rate limit) counts once: eight 429s
            // of one wave are one rate limit, not eight doublings of the back-off.
            let first_of_burst = epoch == s.epoch;
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
            if first_of_burst {
                // The first rate limit of a burst halves the limit; the others of the same
                // burst (admitted before it) do not halve it again.
                s.limit = s.limit.div_ceil(2);
                s.epoch += 1;
                s.probing_from = None;
                s.probe_epoch = None;
            }
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
mod tests {
    use super::*;
    use crate::options::limits::MaxFail;

    fn verdict(kind: FailureKind, retry_after_s: Option<f64>) -> Verdict {
        let mut v = Verdict::not_completed(ItemStatus::Failed, Some(kind), format!("{kind} text"));
        v.retry_after_s = retry_after_s;
        v
    }

    fn gate(jobs: usize, limits: Limits) -> (Arc<Gate>, mpsc::UnboundedReceiver<Event>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Arc::new(Gate::new(jobs, limits, Spent::default(), tx)), rx)
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limit_pauses_everyone_halves_the_limit_and_successes_win_it_back() {
        let (g, mut rx) = gate(8, Limits::default());
        let p = g.admit().await.expect("open");
        let q = g.admit().await.expect("open");
        let limited = verdict(FailureKind::RateLimited, Some(30.0));
        assert_eq!(p.ended("i", &limited, None, Duration::ZERO), After::Requeue);
        assert_eq!(g.view().limit, 4);
        assert_eq!(
            q.ended("i", &limited, None, Duration::ZERO),
            After::Requeue,
            "the same burst"
        );
        assert_eq!(g.view().limit, 4, "halved once per burst");
        let Ok(Event::TeamPaused {
            limit: 4, until, ..
        }) = rx.try_recv()
        else {
            panic!("a team_paused event with limit 4");
        };
        // Milliseconds, like every `at` (not jiff's nanoseconds).
        let fraction = until
            .trim_end_matches('Z')
            .split_once('.')
            .map_or(0, |(_, f)| f.len());
        assert!(
            until.parse::<jiff::Timestamp>().is_ok() && fraction <= 3,
            "{until}"
        );
        let started = tokio::time::Instant::now();
        let p = g.admit().await.expect("after the pause");
        assert!(
            started.elapsed() >= Duration::from_secs(30),
            "waited out the pause"
        );
        drop(p);
        for _ in 0..15 {
            g.ended("i", &Verdict::completed(), None, Duration::ZERO);
        }
        assert_eq!(g.view().limit, 4);
        g.ended("i", &Verdict::completed(), None, Duration::ZERO);
        assert_eq!(g.view().limit, 5, "+1 after a run of 2 × 8 successes");

        // The step up to 5 is a probe: a rate limit now steps back to 4 without pausing the
        // team (only that attempt waits), and the next probe waits twice the successes.
        let limited = verdict(FailureKind::RateLimited, Some(1.0));
        assert_eq!(
            g.ended("i", &limited, None, Duration::ZERO),
            After::Wait(Duration::from_secs(1))
        );
        assert_eq!(g.view().limit, 4);
        assert_eq!(g.pause_left(), Duration::ZERO, "the team goes on");
        for _ in 0..31 {
            g.ended("i", &Verdict::completed(), None, Duration::ZERO);
        }
        assert_eq!(g.view().limit, 4);
        g.ended("i", &Verdict::completed(), None, Duration::ZERO);
        assert_eq!(g.view().limit, 5, "probed again after 2 × 16 successes");
        // A probe that holds (a run of successes at 5) is proven, and the next one steps to 6;
        // failing, it steps back to 5, not below.
        for _ in 0..32 {
            g.ended("i", &Verdict::completed(), None, Duration::ZERO);
        }
        assert_eq!(g.view().limit, 6);
        assert_eq!(
            g.ended("i", &limited, None, Duration::ZERO),
            After::Wait(Duration::from_secs(1))
        );
        assert_eq!(g.view().limit, 5);
        // Not probing: a rate limit is the provider's, and pauses the team again.
        assert_eq!(g.ended("i", &limited, None, Duration::ZERO), After::Requeue);
        assert!(g.pause_left() > Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_the_limit_run_at_once() {
        let (g, _rx) = gate(2, Limits::default());
        let a = g.admit().await.expect("1");
        let _b = g.admit().await.expect("2");
        let g2 = g.clone();
        let third = tokio::spawn(async move { g2.admit().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!third.is_finished(), "a third waits");
        assert_eq!(g.view().waiting, 1);
        drop(a);
        third.await.expect("join").expect("admitted once one ended");
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limit_past_the_wait_budget_is_final() {
        let limits = Limits {
            rate_limit_wait: Duration::from_secs(60),
            ..Limits::default()
        };
        let (g, _rx) = gate(4, limits);
        let v = verdict(FailureKind::RateLimited, Some(50.0));
        assert_eq!(
            g.ended("i", &v, None, Duration::from_secs(20)),
            After::Final
        );
        assert_eq!(g.ended("i", &v, None, Duration::ZERO), After::Requeue);
    }

    #[tokio::test(start_paused = true)]
    async fn auth_and_a_long_quota_stop_the_team_a_short_quota_waits() {
        let (g, mut rx) = gate(4, Limits::default());
        let short = verdict(FailureKind::Quota, Some(120.0));
        assert_eq!(g.ended("i", &short, None, Duration::ZERO), After::Requeue);
        assert!(g.stopped().is_none());
        let long = verdict(FailureKind::Quota, Some(86_400.0));
        assert_eq!(g.ended("i", &long, None, Duration::ZERO), After::Final);
        assert_eq!(g.stopped().as_deref(), Some("quota exhausted: quota text"));
        assert_eq!(
            g.admit().await.map(|_| ()),
            Err("quota exhausted: quota text".into())
        );
        let (g, _) = gate(4, Limits::default());
        assert_eq!(
            g.ended("i", &verdict(FailureKind::Auth, None), None, Duration::ZERO),
            After::Final
        );
        assert_eq!(
            g.stopped().as_deref(),
            Some("authentication failed (auth text)")
        );
        let stops = std::iter::from_fn(|| rx.try_recv().ok())
            .filter(|e| matches!(e, Event::TeamStopped { .. }))
            .count();
        assert_eq!(stops, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_rate_limits_without_a_named_wait_pauses_once_not_ever_longer() {
        let (g, mut rx) = gate(8, Limits::default());
        let permits: Vec<Permit> = futures_admit(&g, 8).await;
        let unnamed = verdict(FailureKind::RateLimited, None);
        for p in permits {
            assert_eq!(p.ended("i", &unnamed, None, Duration::ZERO), After::Requeue);
        }
        let left = g.pause_left();
        assert!(
            left <= Duration::from_millis(2500),
            "one back-off of about 2 s for the wave, not 2^8: {left:?}"
        );
        let pauses = std::iter::from_fn(|| rx.try_recv().ok())
            .filter(|e| matches!(e, Event::TeamPaused { .. }))
            .count();
        assert_eq!(pauses, 1, "one pause for the wave");
    }

    /// Admit `n` attempts at once.
    async fn futures_admit(g: &Arc<Gate>, n: usize) -> Vec<Permit> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(g.admit().await.expect("open"));
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_set_up_failures_stop_the_team_but_not_after_the_set_up_worked() {
        let (g, _rx) = gate(8, Limits::default());
        let setup = verdict(FailureKind::Setup, None);
        // One item's retries are one item: they do not stop the team.
        for _ in 0..SETUP_STOP + 1 {
            assert_eq!(g.ended("a", &setup, None, Duration::ZERO), After::Judged);
        }
        // Nor do items failing each in its own words (a row's own missing file).
        let mut own = verdict(FailureKind::Setup, None);
        own.reason = "no such file: row b".into();
        assert_eq!(g.ended("b", &own, None, Duration::ZERO), After::Judged);
        assert!(g.stopped().is_none());
        // A second item failing the same way, after 4 such attempts of the first: stopped.
        assert_eq!(g.ended("c", &setup, None, Duration::ZERO), After::Final);
        let why = g.stopped().expect("stopped");
        assert!(
            why.starts_with("set-up failure: the first 5 attempts (2 items) failed the same way before any attempt got further (setup text)"),
            "{why}"
        );
        // Two items' first attempts are not yet enough; a third attempt is.
        let (g, _rx) = gate(8, Limits::default());
        assert_eq!(g.ended("a", &setup, None, Duration::ZERO), After::Judged);
        assert_eq!(g.ended("b", &setup, None, Duration::ZERO), After::Judged);
        assert_eq!(g.ended("a", &setup, None, Duration::ZERO), After::Final);
        // Once an attempt ended otherwise the set-up works: later set-up failures (an
        // endpoint going down mid-run) are judged one by one.
        let (g, _rx) = gate(8, Limits::default());
        g.ended("x", &Verdict::completed(), None, Duration::ZERO);
        for item in ["a", "b", "c", "d", "e"] {
            assert_eq!(g.ended(item, &setup, None, Duration::ZERO), After::Judged);
        }
        assert!(g.stopped().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_counts_the_expected_cost_of_running_attempts() {
        let limits = Limits {
            max_cost_usd: Some(1.0),
            ..Limits::default()
        };
        let (g, _rx) = gate(4, limits);
        let a = g.admit().await.expect("nothing spent yet");
        g.ended("i", &Verdict::completed(), Some(0.4), Duration::ZERO);
        drop(a);
        // 0.4 spent + 0.4 expected for this one = 0.8 ≤ 1.0
        let _b = g.admit().await.expect("0.4 spent, 0 running");
        // 0.4 + 0.4 for the running one + 0.4 for this one = 1.2 > 1.0
        let e = g.admit().await.map(|_| ()).expect_err("over budget");
        assert_eq!(e, "budget of $1 reached: spent $0.4");
    }

    #[tokio::test(start_paused = true)]
    async fn max_fail_stops_after_n_items_and_says_when_to_cancel() {
        let limits = Limits {
            max_fail: Some(MaxFail {
                count: 2,
                immediate: true,
            }),
            ..Limits::default()
        };
        let (g, _rx) = gate(4, limits);
        assert!(!g.item_finished(ItemStatus::Failed));
        assert!(!g.item_finished(ItemStatus::Skipped), "skips do not count");
        assert!(g.stopped().is_none());
        assert!(g.item_finished(ItemStatus::TimedOut));
        assert_eq!(
            g.stopped().as_deref(),
            Some("--max-fail 2 reached: 2 item(s) did not complete")
        );
    }
}
