//! Durations as flags and keys write them (`--timeout 10m`, `rate_limit_wait: 90s`): `90s`,
//! `10m`, `1h`, `1h30m`, or bare seconds, at most a year.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest duration a flag or key takes: a year (longer ones overflow clock arithmetic
/// and are never meant).
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The rule a duration breaks, as [`crate::error::Error::BadValue`]'s predicate.
const NOT_A_DURATION: &str = "is not a duration; write e.g. 90s, 10m or 1h";
const TOO_LONG: &str = "is longer than a year; give at most 365d";

/// `text` as a duration (`90s`, `10m`, `1h`, `1h30m`, or bare seconds), at most
/// [`MAX_DURATION`].
///
/// Errors: the rule it breaks (`is not a duration; …`, `is longer than a year; …`).
pub(crate) fn parse(text: &str) -> std::result::Result<Duration, &'static str> {
    let t = text.trim();
    let d = match t.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(t).map_err(|_| NOT_A_DURATION)?,
    };
    within_a_year(d)
}

/// `d`, unless it passes [`MAX_DURATION`].
///
/// Errors: the rule it breaks.
pub(crate) fn within_a_year(d: Duration) -> std::result::Result<Duration, &'static str> {
    match d > MAX_DURATION {
        true => Err(TOO_LONG),
        false => Ok(d),
    }
}

/// Parse a duration flag ([`parse`]).
///
/// Errors: names the flag and shows the accepted forms (exit 2).
pub(crate) fn parse_duration(flag: &str, text: &str) -> Result<Duration> {
    parse(text).map_err(|rule| Error::bad_value(flag, text, rule))
}

/// `d`, unless it passes [`MAX_DURATION`]; `shown` is the value as the user wrote it.
///
/// Errors: names `what` (a flag or key) and the limit (exit 2).
pub(crate) fn check_duration(what: &str, shown: &str, d: Duration) -> Result<Duration> {
    within_a_year(d).map_err(|rule| Error::bad_value(what, shown, rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_longer_than_a_year_are_refused_before_they_overflow_a_clock() {
        assert!(parse_duration("--timeout", "365d").is_ok());
        let e = parse_duration("--timeout", "18446744073709551615s").expect_err("huge");
        assert!(e.to_string().contains("longer than a year"), "{e}");
        assert!(parse_duration("--grace", "99999999h").is_err());
        assert_eq!(parse("90").expect("seconds"), Duration::from_secs(90));
        assert_eq!(parse(" 1h30m ").expect("h+m"), Duration::from_secs(5400));
        assert_eq!(parse("soon"), Err(NOT_A_DURATION));
    }
}
