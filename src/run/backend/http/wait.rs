//! The wait a refused request asks for: the headers every API family sends
//! (`retry-after-ms`, `Retry-After`, OpenAI's and Anthropic's rate-limit resets), else the
//! wait its body names.

use std::time::Duration;

use reqwest::header::HeaderMap;

/// The wait a refused request's answer asks for: its headers' ([`retry_after`]), else the
/// wait its body names — OpenAI's "Please try again in 6m0s." in the message, Gemini's
/// `RetryInfo` `"retryDelay": "37s"` ([`crate::failure::retry_after`]).
pub(super) fn answer_wait(headers: &HeaderMap, body: &[u8]) -> Option<Duration> {
    retry_after(headers).or_else(|| crate::failure::retry_after(&String::from_utf8_lossy(body)))
}

/// The wait an answer asks for, from the first of these that says one: `retry-after-ms`
/// (milliseconds, as OpenAI sends it); `Retry-After` as seconds or an HTTP date in any of the
/// three forms RFC 9110 requires (IMF-fixdate, RFC 850, asctime); OpenAI's
/// `x-ratelimit-reset-requests` / `-tokens` (`1s`, `6m0s`) and Anthropic's
/// `anthropic-ratelimit-*-reset` (an RFC 3339 time) — of those, the reset of a limit whose
/// `remaining` is 0, else the latest. A value that cannot be read is logged (then the
/// runner's own back-off applies).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|t| t.parse::<f64>().ok())
        && let Some(wait) = crate::failure::hinted_wait(ms / 1000.0)
    {
        return Some(wait);
    }
    if let Some(t) = text("retry-after") {
        if let Ok(s) = t.parse::<f64>() {
            return crate::failure::hinted_wait(s);
        }
        if let Ok(at) = httpdate::parse_http_date(t) {
            return Some(
                at.duration_since(std::time::SystemTime::now())
                    .unwrap_or(Duration::ZERO),
            );
        }
        // Not an HTTP date but an RFC 2822 one (`+0000` for `GMT`): some servers send it.
        if let Ok(at) = jiff::fmt::rfc2822::parse(t) {
            let wait = at.timestamp().duration_since(jiff::Timestamp::now());
            return Some(wait.try_into().unwrap_or(Duration::ZERO));
        }
        tracing::warn!(
            "Retry-After `{t}` is neither seconds nor an HTTP date; waiting by the runner's back-off"
        );
    }
    // (the reset, whether that limit is used up) of each limit the headers describe
    let mut resets: Vec<(Duration, bool)> = Vec::new();
    for (name, value) in headers {
        let name = name.as_str();
        let Ok(value) = value.to_str() else { continue };
        let (limit, wait) = if let Some(limit) = name
            .strip_prefix("x-ratelimit-reset-")
            .filter(|l| !l.is_empty())
        {
            let wait = crate::failure::duration_secs(value).and_then(crate::failure::hinted_wait);
            (format!("x-ratelimit-remaining-{limit}"), wait)
        } else if let Some(limit) = name
            .strip_prefix("anthropic-ratelimit-")
            .and_then(|l| l.strip_suffix("-reset"))
        {
            let wait = value.trim().parse::<jiff::Timestamp>().ok().map(|at| {
                at.duration_since(jiff::Timestamp::now())
                    .try_into()
                    .unwrap_or(Duration::ZERO)
            });
            (format!("anthropic-ratelimit-{limit}-remaining"), wait)
        } else {
            continue;
        };
        match wait {
            Some(w) => resets.push((w, text(&limit) == Some("0"))),
            None => tracing::warn!("{name} `{value}` is not a time; ignored"),
        }
    }
    let used_up = resets.iter().filter(|(_, out)| *out).map(|(w, _)| *w).max();
    used_up.or_else(|| resets.iter().map(|(w, _)| *w).max())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_after_reads_milliseconds_seconds_and_dates() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
        let mut h = HeaderMap::new();
        let soon = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(120);
        let date =
            jiff::fmt::rfc2822::to_string(&soon.to_zoned(jiff::tz::TimeZone::UTC)).expect("date");
        h.insert("retry-after", HeaderValue::from_str(&date).expect("header"));
        let wait = retry_after(&h).expect("a date");
        assert!(
            wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
            "{wait:?}"
        );
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
        // RFC 9110's two older date forms: RFC 850 and asctime (recorded shapes, a fixed
        // past date: no wait left).
        for date in [
            "Tuesday, 01-Dec-26 19:12:25 GMT",
            "Tue Dec  1 19:12:27 2026",
        ] {
            h.insert("retry-after", HeaderValue::from_static(date));
            assert_eq!(retry_after(&h), Some(Duration::ZERO), "{date}");
        }
        let soon = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(90));
        h.insert("retry-after", HeaderValue::from_str(&soon).expect("header"));
        let wait = retry_after(&h).expect("an IMF-fixdate");
        assert!(wait > Duration::from_secs(80), "{wait:?}");
        // A hostile server's numbers are held to 10^12 s, never a crash.
        let cap = Some(Duration::from_secs(1_000_000_000_000));
        h.insert(
            "retry-after",
            HeaderValue::from_static("99999999999999999999999"),
        );
        assert_eq!(retry_after(&h), cap);
        let mut h = HeaderMap::new();
        h.insert("retry-after-ms", HeaderValue::from_static("1e300"));
        assert_eq!(retry_after(&h), cap);
        h.insert("retry-after-ms", HeaderValue::from_static("NaN"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn the_rate_limit_reset_headers_of_openai_and_anthropic_give_the_wait() {
        // OpenAI (recorded shape of a 429 without Retry-After): the tokens limit is used up.
        let mut h = HeaderMap::new();
        for (n, v) in [
            ("x-ratelimit-limit-requests", "500"),
            ("x-ratelimit-remaining-requests", "499"),
            ("x-ratelimit-reset-requests", "120ms"),
            ("x-ratelimit-limit-tokens", "30000"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ] {
            h.insert(n, HeaderValue::from_static(v));
        }
        assert_eq!(retry_after(&h), Some(Duration::from_secs(360)));
        h.insert(
            "x-ratelimit-remaining-tokens",
            HeaderValue::from_static("12"),
        );
        h.insert(
            "x-ratelimit-remaining-requests",
            HeaderValue::from_static("0"),
        );
        assert_eq!(retry_after(&h), Some(Duration::from_millis(120)));
        // Anthropic: RFC 3339 resets; the used-up limit's counts.
        let at = |secs: i64| {
            (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs))
                .round(jiff::Unit::Second)
                .expect("round")
                .to_string()
        };
        let mut h = HeaderMap::new();
        h.insert(
            "anthropic-ratelimit-requests-remaining",
            HeaderValue::from_static("10"),
        );
        h.insert(
            "anthropic-ratelimit-requests-reset",
            HeaderValue::from_str(&at(5)).expect("header"),
        );
        h.insert(
            "anthropic-ratelimit-input-tokens-remaining",
            HeaderValue::from_static("0"),
        );
        h.insert(
            "anthropic-ratelimit-input-tokens-reset",
            HeaderValue::from_str(&at(42)).expect("header"),
        );
        let wait = retry_after(&h).expect("a reset");
        assert!(
            wait > Duration::from_secs(38) && wait <= Duration::from_secs(43),
            "{wait:?}"
        );
        // Retry-After, when there, comes first.
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
    }

    #[test]
    fn the_wait_a_body_names_is_read_when_no_header_says_one() {
        let none = HeaderMap::new();
        // OpenAI, a 429 without Retry-After (recorded body).
        let openai = br#"{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on tokens per min (TPM): Limit 200000, Used 199748, Requested 1036. Please try again in 1m5s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;
        assert_eq!(answer_wait(&none, openai), Some(Duration::from_secs(65)));
        // Gemini's OpenAI-compatible endpoint, RESOURCE_EXHAUSTED with RetryInfo.
        let gemini = br#"[{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}]"#;
        assert_eq!(answer_wait(&none, gemini), Some(Duration::from_secs(37)));
        // Anthropic 529 overloaded_error: no wait named.
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(answer_wait(&none, anthropic), None);
        // A header wins over the body.
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(answer_wait(&h, openai), Some(Duration::from_secs(2)));
    }
}
