//! The team's limits as the user sets them (`--rate-limit-wait`, `--max-cost-usd`,
//! `--max-fail`, or their BATCH.md / runner.toml keys); [`crate::run::schedule::gate`] enforces them.

use std::time::Duration;

/// `--max-fail N[:immediate]`: stop starting items once N did not complete; with
/// `immediate`, also stop the running ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxFail {
    /// How many items may not complete (≥ 1).
    pub count: u32,
    /// Also cancel the running teammates when it is reached.
    pub immediate: bool,
}

/// The team's limits, from flags, BATCH.md or runner.toml.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Longest an item waits in total for rate limits (`--rate-limit-wait`, default 1 h);
    /// past it the item ends `rate_limited`.
    pub rate_limit_wait: Duration,
    /// `--max-cost-usd`: an attempt starts only while the cost spent plus the expected cost
    /// (the mean per attempt so far) of the running attempts and this one stays within it.
    pub max_cost_usd: Option<f64>,
    /// `--max-fail`.
    pub max_fail: Option<MaxFail>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            rate_limit_wait: DEFAULT_RATE_LIMIT_WAIT,
            max_cost_usd: None,
            max_fail: None,
        }
    }
}

/// Default of `--rate-limit-wait`.
pub const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(3600);
