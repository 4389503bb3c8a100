//! The wait a provider names for a rate limit or a quota: in its words ("try again in 20s",
//! "Please try again in 6m0s.", "try again at 12:08 PM") or as a number of seconds from a
//! header or a report.

use regex::{Regex, RegexBuilder};

/// The wait a rate-limit or quota message names: "try again in 20s", "retry after 30
/// seconds", "Please retry in 14.5s" (Gemini), "try again in 2 minutes", "retry-after: 7",
/// or a clock time — "try again at 12:08 PM" (codex's usage limit, local time), "resets at
/// 14:03 UTC" — counted to its next occurrence. `None` when it names none (then the team
/// backs off exponentially).
pub(crate) fn retry_after(text: &str) -> Option<std::time::Duration> {
    retry_after_span(text).or_else(|| retry_at_clock(text, jiff::Zoned::now()))
}

/// "try again at 12:08 PM" / "resets at 14:03 UTC": the time from `now` to the next such
/// clock time (in `now`'s zone, or UTC when the text says so).
fn retry_at_clock(text: &str, now: jiff::Zoned) -> Option<std::time::Duration> {
    static RE: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    let re = RE
        .get_or_init(|| {
            RegexBuilder::new(
                r"(?:try again|retry|resets?)\s+at\s+(\d{1,2}):(\d{2})(?::\d{2})?\s*(am|pm)?\s*(utc|gmt)?\b",
            )
            .case_insensitive(true)
            .build()
            .ok()
        })
        .as_ref()?;
    let c = re.captures(text)?;
    let mut hour: i8 = c.get(1)?.as_str().parse().ok()?;
    let minute: i8 = c.get(2)?.as_str().parse().ok()?;
    match c.get(3).map(|m| m.as_str().to_ascii_lowercase()).as_deref() {
        Some("pm") if (1..12).contains(&hour) => hour += 12,
        Some("am") if hour == 12 => hour = 0,
        Some(_) if !(1..=12).contains(&hour) => return None,
        _ => {}
    }
    let now = if c.get(4).is_some() {
        now.with_time_zone(jiff::tz::TimeZone::UTC)
    } else {
        now
    };
    // `at` panics on an hour past 23; the checked constructor does not.
    let clock = jiff::civil::Time::new(hour, minute, 0, 0).ok()?;
    let today = now
        .date()
        .to_datetime(clock)
        .to_zoned(now.time_zone().clone())
        .ok()?;
    let next = if today > now {
        today
    } else {
        today.checked_add(jiff::Span::new().days(1)).ok()?
    };
    let secs = (next.timestamp().as_second() - now.timestamp().as_second()).max(0);
    Some(std::time::Duration::from_secs(secs.unsigned_abs()))
}

fn retry_after_span(text: &str) -> Option<std::time::Duration> {
    static RE: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    let re = RE
        .get_or_init(|| {
            // The lead words, then a Go-style duration (`6m0s`, `1m5s`, `2h14m`, `20ms`,
            // `6.5s`, `37s`, a bare `7`) or a number and a unit word (`2 minutes`).
            RegexBuilder::new(
                r#"(?:try again|retry-after|retry_after|retrydelay|retrying|retry|resets?)["']?[\s:="']*(?:in|after)?\s*(\d[0-9a-z.]*)(?:\s*(milliseconds?|secs?|seconds?|mins?|minutes?|hrs?|hours?|days?)\b)?"#,
            )
            .case_insensitive(true)
            .build()
            .ok()
        })
        .as_ref()?;
    let c = re.captures(text)?;
    let token = c
        .get(1)?
        .as_str()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let secs = match c.get(2) {
        Some(word) if token.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
            let n: f64 = token.parse().ok()?;
            let word = word.as_str().to_ascii_lowercase();
            n * match word.chars().next() {
                Some('m') if word.starts_with("milli") => 0.001,
                Some('m') => 60.0,
                Some('h') => 3600.0,
                Some('d') => 86_400.0,
                _ => 1.0,
            }
        }
        _ => duration_secs(&token)?,
    };
    (0.0..366.0 * 86_400.0)
        .contains(&secs)
        .then(|| std::time::Duration::from_secs_f64(secs))
}

/// Seconds in a Go-style duration as providers write it (OpenAI's `6m0s`, `1m5s`, `2h14m`,
/// `20ms`, `6.5s`; Gemini's `37s`; `x-ratelimit-reset-tokens: 6m0s`): numbers each followed
/// by `d`, `h`, `m`, `s`, `ms`, `us`/`µs` or `ns`; a lone number is seconds. `None` for
/// anything else.
pub(crate) fn duration_secs(text: &str) -> Option<f64> {
    let text = text.trim();
    if let Ok(n) = text.parse::<f64>() {
        return n.is_finite().then_some(n);
    }
    let mut rest = text;
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "d" => 86_400.0,
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit..];
    }
    Some(total)
}

/// A wait hint in seconds from outside (a report's `retry_after_s`, a `Retry-After` or
/// `retry-after-ms` header) as a duration: `None` when negative or not a number; past
/// 10^12 s (31,700 years: longer than any `--rate-limit-wait`) it is held there, so a
/// hostile `1e300` is a wait the gate refuses, not a crash.
pub(crate) fn hinted_wait(secs: f64) -> Option<std::time::Duration> {
    (secs >= 0.0).then(|| std::time::Duration::from_secs_f64(secs.min(1e12)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_the_wait_a_message_names() {
        let secs = |t: &str| retry_after(t).map(|d| d.as_secs_f64());
        assert_eq!(
            secs("Rate limit reached. Please try again in 20s."),
            Some(20.0)
        );
        assert_eq!(secs("Please retry in 14.5s."), Some(14.5));
        assert_eq!(secs("retry after 2 minutes"), Some(120.0));
        assert_eq!(secs("try again in 250ms"), Some(0.25));
        assert_eq!(secs("Retry-After: 7"), Some(7.0));
        assert_eq!(
            secs("usage limit reached, try again in 2 days"),
            Some(172_800.0)
        );
        // OpenAI's own wording (compound Go-style durations), Gemini's RetryInfo.
        assert_eq!(
            secs(
                "Rate limit reached for gpt-4o on tokens per min (TPM). Please try again in 6m0s."
            ),
            Some(360.0)
        );
        assert_eq!(secs("Please try again in 1m5s."), Some(65.0));
        assert_eq!(secs("Please try again in 2h14m."), Some(8040.0));
        assert_eq!(secs("Please try again in 20ms."), Some(0.02));
        assert_eq!(secs("Please try again in 6.5s."), Some(6.5));
        assert_eq!(
            secs(r#"{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}"#),
            Some(37.0)
        );
        assert_eq!(secs("429 resets at noon"), None);
        assert_eq!(secs("429 Too Many Requests"), None);
    }

    #[test]
    fn a_clock_time_counts_to_its_next_occurrence() {
        let now: jiff::Zoned = "2026-12-01T11:30:00+00:00[UTC]".parse().expect("time");
        let at = |t: &str| retry_at_clock(t, now.clone()).map(|d| d.as_secs());
        assert_eq!(
            at("You've hit your usage limit. ... or try again at 12:08 PM."),
            Some(38 * 60)
        );
        assert_eq!(
            at("Your quota resets at 14:03 UTC"),
            Some(2 * 3600 + 33 * 60)
        );
        assert_eq!(
            at("try again at 11:00 AM"),
            Some(23 * 3600 + 30 * 60),
            "tomorrow"
        );
        assert_eq!(at("try again at 12:15 AM"), Some(12 * 3600 + 45 * 60));
        assert_eq!(at("try again at 25:00"), None);
        assert_eq!(at("try again at Dec 2nd, 2026 12:38 PM"), None);
        assert_eq!(at("429 Too Many Requests"), None);
    }
}
