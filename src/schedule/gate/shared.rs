//! A limit shared by a fleet of processes (the workers of one `--queue` run, DESIGN §8a):
//! the gate admits an attempt only with a slot of the fleet's limit, and gives the slot back
//! when the attempt ends, saying how it ended; the fleet applies §6a's rules to every
//! worker's attempts at once and says what a rate limit was — an overflow or a failed probe
//! (only that attempt waits) or the server's limit met (the team pauses). Where the fleet
//! keeps its limit is the queue's business ([`SharedLimit`], implemented by
//! `crate::queue::slots`); this side only asks and follows.
//!
//! A fleet that does not answer (its server down) neither blocks nor limits the run: the
//! attempt goes by this gate alone (`--jobs`), and a rate limit pauses as one of a burst.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{Gate, Limited, Permit};
use crate::failure::FailureKind;
use crate::report::Verdict;

/// How long an ended attempt waits for the fleet's word on it before going on without.
pub(crate) const ANSWER_WAIT: Duration = Duration::from_secs(15);

/// One slot of the fleet's limit, held by one running attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The fleet's name for it (its token).
    pub token: String,
    /// The fleet limit's version when it was granted: a rate limit of an attempt granted at
    /// the current version is the first of its burst.
    pub version: u64,
    /// The fleet's limit then (0: none learned yet).
    pub limit: usize,
}

/// How an attempt ended, as the limit counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Served: anything but a rate limit or a set-up failure (a success, for the limit).
    Served,
    /// A set-up failure: it never reached the server.
    NotServed,
    /// A rate limit (or a quota that resets within `--rate-limit-wait`).
    Limited,
    /// Not counted (interrupted, never started, an auth or quota stop): the slot only.
    Dropped,
}

impl Ending {
    /// Its name in the fleet's script.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Ending::Served => "served",
            Ending::NotServed => "not_served",
            Ending::Limited => "limited",
            Ending::Dropped => "dropped",
        }
    }
}

/// The fleet's word on an ended attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word {
    /// What a rate limit was (`None` for other endings).
    pub limited: Option<Limited>,
    /// The fleet's limit after it (0: none learned yet).
    pub limit: usize,
}

impl Word {
    /// The limit `runner status` shows: the fleet's, or `jobs` while it has none.
    pub(super) fn shown(&self, jobs: usize) -> usize {
        if self.limit == 0 { jobs } else { self.limit }
    }
}

/// A fleet's limit, asked for a slot per attempt.
pub(crate) trait SharedLimit: Send + Sync + std::fmt::Debug {
    /// Ask for a slot; it comes on the receiver once the fleet has one free. A receiver whose
    /// sender is dropped unanswered means the fleet cannot be asked now (the attempt goes by
    /// this process's gate alone); a slot sent to a receiver dropped meanwhile is the
    /// fleet's to take back.
    fn acquire(&self) -> oneshot::Receiver<Slot>;

    /// Give `slot` back: its attempt ended as `ending`. The fleet's word comes on the
    /// receiver (dropped unanswered when the fleet cannot be asked).
    fn end(&self, slot: Slot, ending: Ending) -> oneshot::Receiver<Word>;
}

/// Whose rules an ended attempt is counted by.
#[derive(Debug, Clone, Copy)]
pub(super) enum Rules {
    /// The gate's own limit (one process).
    Own,
    /// The fleet's, which counted it already and says this.
    Fleet(Word),
    /// The fleet's, which did not answer: nothing moves.
    Unanswered,
}

impl Gate {
    /// Share this run's limit with a fleet: from now on every attempt needs a slot of
    /// `fleet`'s limit, and the fleet's rules move it (set once, before the first attempt).
    pub(crate) fn share_limit(&self, fleet: Arc<dyn SharedLimit>) {
        let _ = self.shared.set(fleet);
    }

    /// How an attempt that ended with `verdict`, after its item waited `waited` for rate
    /// limits, counts for the limit (as [`Gate::ended_in`] treats it).
    pub(super) fn ending(&self, verdict: &Verdict, waited: Duration) -> Ending {
        let retry_after = verdict.retry_after_s.and_then(crate::failure::hinted_wait);
        match verdict.kind {
            Some(FailureKind::RateLimited) => Ending::Limited,
            Some(FailureKind::Quota) => match retry_after {
                Some(reset) if waited + reset <= self.limits.rate_limit_wait => Ending::Limited,
                _ => Ending::Dropped,
            },
            Some(FailureKind::Auth) => Ending::Dropped,
            Some(FailureKind::Setup) => Ending::NotServed,
            _ => Ending::Served,
        }
    }

    /// Wait for a slot of `fleet`'s limit for `permit` (this process's place taken):
    /// `Some` with it, or without one when the fleet does not answer; `None` when the team
    /// paused meanwhile (the slot and the place given back: the caller waits the pause
    /// out); `Err` once the team stopped.
    pub(super) async fn take_slot(
        &self,
        fleet: &dyn SharedLimit,
        mut permit: Permit,
    ) -> Result<Option<Permit>, String> {
        let mut asked = fleet.acquire();
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(reason) = self.stopped() {
                return Err(reason);
            }
            tokio::select! {
                got = &mut asked => {
                    let Ok(slot) = got else {
                        return Ok(Some(permit));
                    };
                    permit.epoch = slot.version;
                    let shown = Word { limited: None, limit: slot.limit }.shown(self.jobs);
                    permit.slot = Some(slot);
                    let paused = self.with(|s| {
                        s.limit = shown;
                        s.paused_until.is_some_and(|t| t > Instant::now())
                    });
                    return Ok((!paused).then_some(permit));
                }
                _ = notified => {}
            }
        }
    }
}
