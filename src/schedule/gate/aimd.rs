//! The AIMD limit's rules (DESIGN §6a) on one process's own counts: what a success and a
//! rate limit do to the limit, its credit, its probes and its bursts. A queue's fleet applies
//! the same rules to the whole fleet's counts on the server instead
//! (`crate::queue::slots`); the gate then takes the fleet's word ([`super::shared`]).

use super::{Burst, State};

/// What the limit makes of a rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limited {
    /// An overflow (the credit covered it) or a failed probe: only this attempt waits its
    /// retry-after; the team goes on.
    Alone,
    /// The server's limit met: the team pauses. `first`: the first rate limit of its burst
    /// (the limit fell with it); else one of a burst whose pause already stands.
    Pause {
        /// The first of its burst.
        first: bool,
    },
}

impl State {
    /// Account for an attempt admitted at `epoch` that ended (`served`: not rate limited):
    /// once the last attempt of the burst ended, the limit is what the server served of it
    /// at once (never above `jobs`), or stays halved when it served none.
    /// Returns whether the attempt was one of the burst's.
    pub(super) fn burst_member_ended(&mut self, epoch: u64, served: bool, jobs: usize) -> bool {
        let Some(b) = self.burst.as_mut().filter(|b| epoch <= b.epoch) else {
            return false;
        };
        b.running = b.running.saturating_sub(1);
        b.served += usize::from(served);
        if b.running == 0 {
            if b.served > 0 {
                self.limit = b.served.min(jobs);
            }
            self.burst = None;
        }
        true
    }

    /// An attempt admitted at `epoch` ended served (anything but a rate limit or a set-up
    /// failure): credit for an overflow, and a step up after a run of successes.
    pub(super) fn served(&mut self, epoch: u64, jobs: usize) {
        // A success at a limit the team learned (the limit has changed, so it has met the
        // server's) is credit for an overflow; one of the burst's ran at the limit before,
        // and gives none.
        if !self.burst_member_ended(epoch, true, jobs) && self.epoch > 0 {
            self.credit = (self.credit + 1).min(self.limit);
        }
        self.streak += 1;
        if self.streak >= self.rounds_needed * self.limit {
            // A run of successes: the current limit is proven.
            self.probing_from = None;
            if self.limit < jobs {
                self.probing_from = Some(self.limit);
                self.limit += 1;
                self.epoch += 1;
                self.probe_epoch = Some(self.epoch);
            }
            self.streak = 0;
        }
    }

    /// An attempt admitted at `epoch` met a rate limit: an overflow or a failed probe waits
    /// alone; else the team pauses, and the first rate limit of a burst halves the limit.
    pub(super) fn limited(&mut self, epoch: u64, jobs: usize) -> Limited {
        if self.burst_member_ended(epoch, false, jobs) {
            self.streak = 0;
            return Limited::Pause { first: false };
        }
        // An overflow: the limit ran well (its successes left credit), so this rate limit
        // is the server full for a moment, not a lower capacity; only this attempt waits,
        // the limit stands and the team goes on.
        if self.credit > 0 {
            self.credit -= 1;
            // Not a run of successes: the next step up waits for one.
            self.streak = 0;
            return Limited::Alone;
        }
        // A probe that failed: step back to the proven limit, once however many of its
        // attempts meet the rate limit; only they wait.
        if let Some(probe) = self.probe_epoch
            && (epoch == probe || epoch + 1 == probe)
        {
            if let Some(from) = self.probing_from.take() {
                self.limit = from;
                self.streak = 0;
                self.rounds_needed = (self.rounds_needed * 2).min(16);
                // Attempts admitted from now on run at the proven limit again.
                self.epoch += 1;
            }
            return Limited::Alone;
        }
        self.streak = 0;
        // A burst (attempts admitted before its first rate limit) counts once: its first
        // rate limit halves the limit; the others of the same burst (admitted before it) do
        // not halve it again, and once the burst's last attempt ended the limit is what the
        // server served of it.
        let first = epoch == self.epoch;
        if first {
            self.burst = Some(Burst {
                epoch: self.epoch,
                running: self.active,
                served: 0,
            });
            self.limit = self.limit.div_ceil(2);
            self.credit = 0;
            self.epoch += 1;
            self.probing_from = None;
            self.probe_epoch = None;
        }
        Limited::Pause { first }
    }
}
