//! "Did you mean …?" for a mistyped name (a runner, a BATCH.md or runner.toml key), as cargo
//! and clap suggest: the closest known name by Jaro–Winkler similarity (`strsim`), when it is
//! close enough to be the one meant.

/// Similarity (0–1) a known name needs to be suggested.
const THRESHOLD: f64 = 0.8;

/// The known name closest to `word`, if one is close enough.
pub(crate) fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(word, k), k))
        .filter(|(score, _)| *score >= THRESHOLD)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// `"; did you mean `x`?"` for [`closest`], or nothing.
pub(crate) fn did_you_mean<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, known)
        .map(|k| format!("; did you mean `{k}`?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_typos_are_suggested_and_unrelated_words_are_not() {
        let runners = ["claude", "codex", "gemini", "exec"];
        assert_eq!(closest("claud", runners), Some("claude"));
        assert_eq!(closest("gemni", runners), Some("gemini"));
        assert_eq!(closest("hal9000", runners), None);
        let keys = ["max_workers", "max_runtime_seconds", "retries"];
        assert_eq!(closest("max_worker", keys), Some("max_workers"));
        assert_eq!(did_you_mean("retrys", keys), "; did you mean `retries`?");
        assert_eq!(did_you_mean("zzz", keys), "");
    }
}
