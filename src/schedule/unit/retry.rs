//! The retry policy: after each attempt, whether the item is attempted again, and after what
//! wait. A rate-limited attempt (or one out of quota until a reset that fits) is made again
//! after the team's pause without using one of `--retries`, until the item has waited
//! `--rate-limit-wait` in all; any other verdict is retried by `--retries` when its status
//! is one of `--retry-on`, after a doubling back-off from `--retry-delay`. What the gate
//! says first ([`After`]): a stopped team (auth, quota, a set-up failure that repeats, a
//! limit) retries nothing.

use std::time::Duration;

use rand::Rng;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::failure::FailureKind;
use crate::item::WorkItem;
use crate::report::Verdict;
use crate::run::RunSpec;
use crate::run::supervise::process::Cancel;
use crate::schedule::gate::{After, Gate, Permit};

use super::attempt::AttemptResult;

/// What the policy keeps of one item across its attempts.
#[derive(Debug, Default)]
pub(super) struct Retries {
    /// Retries by `--retries` used so far.
    used: u32,
    /// Time spent on rate limits — waiting at the gate, waiting alone, and the rate-limited
    /// attempts themselves — against `--rate-limit-wait`.
    rate_limit_waited: Duration,
    /// The item's rate limits in a row: from the third, its own back-off grows on top of
    /// the provider's hint (a provider that keeps saying "try again in 1s").
    limited_in_a_row: u32,
    /// The last attempt was re-queued for a rate limit (its wait counts as one).
    requeued: bool,
    /// Requests the provider refused unprocessed (earlier runs' too): not counted in the
    /// item's `attempts`.
    pub(super) refused: u32,
    /// Rate-limit waits (earlier runs' too).
    pub(super) rate_limit_waits: u32,
}

/// What the item does after an attempt ([`Retries::after`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Next {
    /// It is attempted again.
    pub(super) retrying: bool,
    /// The attempt was a request the provider refused unprocessed: the next one sends the
    /// same prompt again, and it does not count as an attempt.
    pub(super) refused: bool,
    /// How long to wait before the next attempt (besides the gate's pause), when retrying.
    pub(super) wait: Option<Duration>,
}

impl Retries {
    /// The account of an item whose earlier runs had `refused` requests refused and waited
    /// `rate_limit_waits` times.
    pub(super) fn new(refused: u32, rate_limit_waits: u32) -> Retries {
        Retries {
            refused,
            rate_limit_waits,
            ..Retries::default()
        }
    }

    /// The account with `used` retries by `--retries` spent already (elsewhere).
    pub(super) fn used(mut self, used: u32) -> Retries {
        self.used = used;
        self
    }

    /// The item waited `waited` at the gate to be admitted: rate-limit time when its last
    /// attempt was re-queued.
    pub(super) fn waited_at_gate(&mut self, waited: Duration) {
        if self.requeued {
            self.rate_limit_waited += waited;
        }
    }

    /// Account for an attempt of `item` that ran under `permit` and ended as `result`, and
    /// say what comes next. A rate limit the gate gives up on has its reason explained
    /// ([`explain_last_rate_limit`]). `cancel` is read after the gate's word: an interrupted
    /// run retries nothing.
    pub(super) async fn after(
        &mut self,
        spec: &RunSpec,
        item: &WorkItem,
        gate: &Gate,
        permit: Permit,
        result: &mut AttemptResult,
        cancel: &watch::Receiver<Cancel>,
    ) -> Next {
        let limited = matches!(
            result.verdict.kind,
            Some(FailureKind::RateLimited | FailureKind::Quota)
        );
        if limited {
            self.limited_in_a_row += 1;
            self.rate_limit_waited += result.elapsed;
        } else {
            self.limited_in_a_row = 0;
        }
        let mut after = permit
            .end(
                &item.id,
                &result.verdict,
                result.agent.cost_usd,
                self.rate_limit_waited,
            )
            .await;
        let interrupted = *cancel.borrow() != Cancel::None;
        self.requeued = matches!(after, After::Requeue | After::Wait(_)) && !interrupted;
        // The wait the item adds on its own (a failed probe's or an overflow's, its repeated
        // rate limits' back-off) counts against --rate-limit-wait as the gate's does. An
        // overflow or a failed probe is the gate running above the server's limit, not the
        // item's hint repeating: its wait does not grow.
        let grown = match after {
            After::Wait(_) => Duration::ZERO,
            _ => repeated_limit_backoff(self.limited_in_a_row),
        };
        let own_wait = match after {
            After::Wait(wait) => wait,
            _ => grown,
        };
        let bound = gate.limits().rate_limit_wait;
        if self.requeued && self.rate_limit_waited + own_wait > bound {
            self.requeued = false;
            after = After::Final;
        }
        let settings = spec.settings_for(item);
        // The HTTP backend's 429 (or 503, 529): the model never saw the request, so it is
        // sent again as it was — no "previous attempt" in the prompt (which would also miss
        // the provider's prompt cache) — and it is a wait, not an attempt.
        let refused = self.requeued && settings.runner.answers_only();
        if self.requeued {
            self.rate_limit_waits += 1;
        }
        if refused {
            self.refused += 1;
        }
        if after == After::Final && result.verdict.kind == Some(FailureKind::RateLimited) {
            explain_last_rate_limit(&mut result.verdict, self.rate_limit_waited, bound, grown);
        }
        // An item whose input can never succeed (a request too large) is not tried again.
        let retrying = self.requeued
            || (after == After::Judged
                && result.verdict.kind != Some(FailureKind::Input)
                && self.used < settings.retries
                && !interrupted
                && settings.retry_on.contains(&result.verdict.status));
        // A retry by --retries waits its own back-off; a failed probe its own rate-limit
        // wait; a re-queued one waits at the gate.
        let wait = match after {
            _ if !retrying => None,
            After::Wait(_) if self.requeued => Some(own_wait),
            _ if self.requeued => (!grown.is_zero()).then_some(grown),
            _ => {
                self.used += 1;
                Some(backoff(self.used, settings.retry_delay))
            }
        };
        Next {
            retrying,
            refused,
            wait,
        }
    }

    /// Wait `wait` before the next attempt; a team that stops meanwhile starts no more
    /// attempts, so the wait ends with it, and so it does when the run is interrupted.
    /// Returns whether the run was interrupted (then no attempt follows).
    pub(super) async fn wait(
        &mut self,
        wait: Duration,
        cancel: &mut watch::Receiver<Cancel>,
        gate: &Gate,
    ) -> bool {
        let since = Instant::now();
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.changed() => {}
            _ = gate.until_stopped() => {}
        }
        if self.requeued {
            self.rate_limit_waited += since.elapsed();
        }
        *cancel.borrow() != Cancel::None
    }
}

/// The back-off before retry number `retry` by `--retries`: `base` doubled for each retry
/// after the first, at most 5 minutes, times a jitter of 0.5 to 1.5.
fn backoff(retry: u32, base: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << retry.saturating_sub(1).min(10));
    let capped = exp.min(Duration::from_secs(300));
    let jitter = rand::rng().random_range(0.5..1.5);
    capped.mul_f64(jitter)
}

/// The back-off an item adds to the provider's wait after its `n`th rate limit in a row:
/// none for the first two, then 2 s, 4 s, 8 s … up to 5 minutes — so a hint that repeats
/// ("try again in 1s", forever) grows instead of being obeyed to the letter.
pub(super) fn repeated_limit_backoff(n: u32) -> Duration {
    match n {
        0..=2 => Duration::ZERO,
        n => Duration::from_secs(2)
            .saturating_mul(1 << (n - 3).min(8))
            .min(Duration::from_secs(300)),
    }
}

/// The reason of a rate-limited attempt after which the gate gave up: how long the item
/// waited, and that the next wait would pass `--rate-limit-wait` (the gate gives up when
/// the next wait would pass the bound, not after it).
fn explain_last_rate_limit(
    verdict: &mut Verdict,
    waited: Duration,
    bound: Duration,
    own: Duration,
) {
    let wait = verdict.retry_after_s.and_then(crate::failure::hinted_wait);
    let next = match (wait, own.is_zero()) {
        (Some(w), true) => format!("waiting the {} it asks for", rough_duration(w)),
        (Some(w), false) => format!(
            "waiting the {} it asks for and the item's own back-off of {} (its rate limits repeat)",
            rough_duration(w),
            rough_duration(own)
        ),
        (None, _) => "another back-off".to_owned(),
    };
    verdict.reason = format!(
        "still rate limited after waiting {}; {next} would pass --rate-limit-wait {}: {}",
        rough_duration(waited),
        rough_duration(bound),
        verdict.reason
    );
}

/// `d` in its two largest units, whole seconds (`1h 5m`, `3170years 3months`, `0s`).
fn rough_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        // Under a second: milliseconds (0.2 s read "0s").
        return format!("{}ms", d.as_millis());
    }
    let full = humantime::format_duration(Duration::from_secs(d.as_secs())).to_string();
    full.split(' ').take(2).collect::<Vec<_>>().join(" ")
}
