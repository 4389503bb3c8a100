//! The `candidates` cell of a `--best-of` item's row (DESIGN §13): how many passed, the
//! winner and the rule that chose it, and every candidate side by side — the values
//! `runner show ID` lists, from the outcome's `best_of` (docs/events.md). The live page's
//! item panel (`serve::item`) sends the same values as JSON.

use serde::Serialize;

use crate::report::best_of::BestOf;
use crate::run::record::outcome::usd_text;

/// An item's candidates as the page shows them, folded under a one-line summary.
#[derive(Debug, Serialize)]
pub(crate) struct Candidates {
    /// `2/3 passed`: what the cell sorts by and starts with.
    pub passed: String,
    /// `winner c3 (1-a.c3)`, or `no winner` when none passed.
    pub winner: String,
    /// The rule that chose the winner, or why there is none.
    pub rule: String,
    /// Every candidate, by number.
    pub rows: Vec<CandidateRow>,
}

/// One candidate's line: text, with numbers already formatted (seconds to 1 decimal,
/// dollars as [`usd_text`]); `-` where there is no value.
#[derive(Debug, Serialize)]
pub(crate) struct CandidateRow {
    /// `c1`, `c2`, ….
    pub name: String,
    pub teammate: String,
    /// The runner definition, then the model when its output said it (`claude sonnet`).
    pub runner: String,
    pub status: String,
    /// The status's CSS class (`s-failed`, …).
    pub class: String,
    pub verify: String,
    pub score: String,
    pub cost: String,
    pub duration: String,
    pub diffstat: String,
    /// Why it is out (one line); empty when it passed.
    pub error: String,
    /// It is the winner.
    pub winner: bool,
}

/// The cell of an item with candidates `b`.
pub(crate) fn of(b: &BestOf) -> Candidates {
    let dash = || "-".to_owned();
    Candidates {
        passed: b.candidates_text(),
        winner: match b.winning() {
            Some(c) => format!("winner c{} ({})", c.candidate, c.teammate),
            None => "no winner".into(),
        },
        rule: b.rule.clone(),
        rows: b
            .candidates
            .iter()
            .map(|c| CandidateRow {
                name: format!("c{}", c.candidate),
                teammate: c.teammate.clone(),
                runner: match &c.model {
                    Some(m) => format!("{} {m}", c.runner),
                    None => c.runner.clone(),
                },
                status: c.status.to_string(),
                class: super::class(Some(c.status)),
                verify: match c.verify.is_empty() {
                    true => dash(),
                    false => c.verify.clone(),
                },
                score: c.score.map_or_else(dash, |s| s.to_string()),
                cost: c
                    .cost_usd
                    .map_or_else(dash, |v| format!("${}", usd_text(v))),
                duration: format!("{:.1}", c.duration_s),
                diffstat: c.diffstat.clone().unwrap_or_else(dash),
                error: c.error.clone(),
                winner: b.winner == Some(c.candidate),
            })
            .collect(),
    }
}
