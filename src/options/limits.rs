//! The team's limits as the user sets them (`--rate-limit-wait`, `--max-cost-usd`,
//! `--max-fail`, or their BATCH.md / runner.toml keys); [`crate::schedule::gate`] enforces them.

use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};

/// `--max-fail N[:immediate]`: stop starting items once N did not complete; with
/// `immediate`, also stop the running ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MaxFail {
    /// How many items may not complete (≥ 1).
    pub count: u32,
    /// Also cancel the running teammates when it is reached.
    pub immediate: bool,
}

impl MaxFail {
    /// What `--max-fail` / `max_fail` must be.
    pub(crate) const RULE: &'static str =
        "must be a whole number ≥ 1, optionally followed by :immediate (e.g. 3 or 3:immediate)";
}

/// `N` or `N:immediate`, N ≥ 1 (`--max-fail`, `max_fail`).
impl FromStr for MaxFail {
    /// [`MaxFail::RULE`].
    type Err = &'static str;

    fn from_str(text: &str) -> std::result::Result<MaxFail, &'static str> {
        let t = text.trim();
        let (n, immediate) = match t.split_once(':') {
            Some((n, "immediate")) => (n, true),
            Some(_) => ("", false),
            None => (t, false),
        };
        match n.trim().parse::<u32>() {
            Ok(count) if count >= 1 => Ok(MaxFail { count, immediate }),
            _ => Err(MaxFail::RULE),
        }
    }
}

/// Parse `--max-fail` / `max_fail`: `N` or `N:immediate`, N ≥ 1.
///
/// Errors: names the flag and shows the accepted forms (exit 2).
pub(crate) fn parse_max_fail(text: &str) -> Result<MaxFail> {
    text.parse()
        .map_err(|rule| Error::bad_value("--max-fail", text, rule))
}

/// The rule of a budget (`--max-cost-usd`, `max_cost_usd`).
pub(crate) const USD_RULE: &str = "must be a number of US dollars above 0, e.g. 5 or 2.50";

/// Whether `usd` is a budget: a finite amount above 0.
pub(crate) fn is_budget(usd: f64) -> bool {
    usd.is_finite() && usd > 0.0
}

/// The team's limits, from flags, BATCH.md or runner.toml.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Limits {
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
pub(crate) const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_fail_is_a_count_optionally_immediate() {
        let at = |n, immediate| MaxFail {
            count: n,
            immediate,
        };
        assert_eq!("3".parse(), Ok(at(3, false)));
        assert_eq!(" 2:immediate ".parse(), Ok(at(2, true)));
        for bad in ["0", "x", "3:later", ":immediate", "-1"] {
            assert_eq!(bad.parse::<MaxFail>(), Err(MaxFail::RULE), "{bad}");
        }
        let e = parse_max_fail("0").expect_err("zero").to_string();
        assert!(
            e.starts_with("--max-fail `0` must be a whole number ≥ 1"),
            "{e}"
        );
    }
}
