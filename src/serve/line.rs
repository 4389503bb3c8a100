//! One journal line as the live page needs it: the few fields of the events of
//! `docs/events.md` that change an item's row or the team's banner, read without building
//! the whole [`crate::run::events::Event`] (an `item_finished` line carries the whole report;
//! this skips it), and the *patch* the page applies for it.

use serde::{Deserialize, Serialize};

/// Longest text (a reason, a summary, a progress line) kept per item or sent in a patch,
/// in characters: the server's state stays bounded whatever an agent writes.
pub(crate) const TEXT_KEPT: usize = 160;

/// `text` cut to [`TEXT_KEPT`] characters (an ellipsis marks a cut).
pub(crate) fn short(text: &str) -> String {
    match text.char_indices().nth(TEXT_KEPT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The fields of an `item_finished` event's `outcome` the page shows.
#[derive(Debug, Deserialize)]
pub(crate) struct OutcomeLine {
    /// The item's id.
    pub id: String,
    /// Its teammate's name.
    #[serde(default)]
    pub teammate: String,
    /// Its final status (`completed`, `failed`, …).
    pub status: String,
    /// Attempts made.
    #[serde(default)]
    pub attempts: u32,
    /// The last attempt's wall time, seconds.
    #[serde(default)]
    pub duration_s: f64,
    /// The one-line reason when not completed.
    #[serde(default)]
    pub error: String,
    /// Why it did not complete.
    #[serde(default)]
    pub failure_kind: Option<String>,
    /// The report's summary.
    #[serde(default)]
    pub summary: String,
    /// Its cost in USD, when known.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// A `--best-of` item's fan-out, its counts only (the candidates are read again, from
    /// the journal, when the item's panel asks).
    #[serde(default)]
    pub best_of: Option<FanOut>,
}

/// The counts of an outcome's `best_of` (docs/events.md) a row shows; its `candidates`
/// are skipped.
#[derive(Debug, Deserialize)]
pub(crate) struct FanOut {
    /// The winning candidate's number, when one passed.
    #[serde(default)]
    pub winner: Option<u32>,
    /// Candidates that passed.
    #[serde(default)]
    pub passed: u32,
    /// Candidates in all.
    #[serde(default)]
    pub total: u32,
}

impl FanOut {
    /// `2/3 passed, winner c2`, or `0/3 passed, no winner`.
    pub(crate) fn text(&self) -> String {
        let who = match self.winner {
            Some(k) => format!("winner c{k}"),
            None => "no winner".into(),
        };
        format!("{}/{} passed, {who}", self.passed, self.total)
    }

    /// The row's summary: this, then the item's own summary.
    pub(crate) fn with(&self, summary: &str) -> String {
        match summary.is_empty() {
            true => self.text(),
            false => format!("{} — {summary}", self.text()),
        }
    }
}

/// One journal line, the fields the page reads (each absent from events that lack it).
#[derive(Debug, Deserialize)]
pub(crate) struct Line {
    /// The event's name (`run_started`, `attempt_started`, …).
    pub event: String,
    /// The item (attempt and progress events).
    pub id: Option<String>,
    /// Its teammate's name.
    pub teammate: Option<String>,
    /// The attempt number, 1-based.
    pub attempt: Option<u32>,
    /// An attempt's verdict status, or a progress line's work state.
    pub status: Option<String>,
    /// An attempt's failure kind.
    pub failure_kind: Option<String>,
    /// An attempt's reason, or why the team stopped.
    pub reason: Option<String>,
    /// The attempt goes round again.
    #[serde(default)]
    pub retrying: bool,
    /// A progress line's words (`60%`).
    pub progress: Option<String>,
    /// A progress line's blocker.
    pub blocker: Option<String>,
    /// `item_finished`'s outcome.
    pub outcome: Option<OutcomeLine>,
    /// When it happened (RFC 3339).
    pub at: Option<String>,
    /// A pause's end (RFC 3339).
    pub until: Option<String>,
    /// `run_started`: the items the run covers.
    pub total: Option<u64>,
    /// `run_started`: the team's name.
    pub team: Option<String>,
    /// `run_started`: BATCH.md's stages, in order.
    #[serde(default)]
    pub stages: Vec<String>,
}

impl Line {
    /// The line read, `None` for a line that is no event (someone else's junk, a torn end).
    pub(crate) fn parse(bytes: &[u8]) -> Option<Line> {
        serde_json::from_slice(bytes).ok()
    }

    /// What the page changes for this line: an item's row, or the team's banner.
    pub(crate) fn patch(&self) -> Patch {
        let item = |status: Option<String>| Patch {
            id: self.id.clone(),
            teammate: self.teammate.clone(),
            attempt: self.attempt,
            status,
            ..Patch::team(&self.event)
        };
        match self.event.as_str() {
            "attempt_started" => item(Some("running".into())),
            "attempt_finished" => Patch {
                kind: self.failure_kind.clone(),
                reason: self.reason.as_deref().map(short),
                ..item(Some(match self.retrying {
                    true => "retrying".into(),
                    false => self.status.clone().unwrap_or_default(),
                }))
            },
            "progress" => Patch {
                said: Some(short(&progress_text(self))),
                ..item(None)
            },
            "item_finished" => match &self.outcome {
                Some(o) => Patch {
                    id: Some(o.id.clone()),
                    teammate: Some(o.teammate.clone()),
                    attempt: Some(o.attempts),
                    status: Some(o.status.clone()),
                    kind: o.failure_kind.clone(),
                    reason: Some(short(&o.error)),
                    ..Patch::team(&self.event)
                },
                None => Patch::team(&self.event),
            },
            _ => Patch::team(&self.event),
        }
    }
}

/// A progress line in one line: its words, then what blocks it.
pub(crate) fn progress_text(l: &Line) -> String {
    let mut text = l.progress.clone().unwrap_or_default();
    if let Some(b) = &l.blocker {
        if !text.is_empty() {
            text.push_str(" — ");
        }
        text.push_str("blocked: ");
        text.push_str(b);
    }
    text
}

/// What one journal line changes on the page, sent as a server-sent event's data (JSON):
/// `event` always; an item's fields when the line is about one item.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Patch {
    /// The journal event's name.
    pub event: String,
    /// The item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its teammate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teammate: Option<String>,
    /// Its attempts so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Its status now (`running`, `retrying`, or a final status).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Its failure kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its reason, cut to [`TEXT_KEPT`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its latest progress line, cut to [`TEXT_KEPT`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub said: Option<String>,
}

impl Patch {
    /// A patch that changes no item (the banner is read again).
    fn team(event: &str) -> Patch {
        Patch {
            event: event.to_owned(),
            id: None,
            teammate: None,
            attempt: None,
            status: None,
            kind: None,
            reason: None,
            said: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_finished_line_patches_its_row_and_a_long_reason_is_cut() {
        let long = "x".repeat(500);
        let line = format!(
            r#"{{"v":1,"event":"item_finished","outcome":{{"id":"a","teammate":"1-a","status":"failed","attempts":2,"error":"{long}","failure_kind":"agent_error","report":{{"big":[1,2,3]}}}}}}"#
        );
        let p = Line::parse(line.as_bytes()).expect("parses").patch();
        assert_eq!(p.id.as_deref(), Some("a"));
        assert_eq!(p.status.as_deref(), Some("failed"));
        assert_eq!(p.kind.as_deref(), Some("agent_error"));
        assert_eq!(p.attempt, Some(2));
        assert_eq!(p.reason.map(|r| r.chars().count()), Some(TEXT_KEPT + 1));
    }

    #[test]
    fn a_best_of_outcome_keeps_its_counts_and_winner_for_the_row_not_its_candidates() {
        let line = br#"{"v":1,"event":"item_finished","outcome":{"id":"a","status":"completed","summary":"done","best_of":{"winner":2,"rule":"first to pass","passed":2,"total":3,"candidates":[{"candidate":1}]}}}"#;
        let l = Line::parse(line).expect("parses");
        let b = l.outcome.and_then(|o| o.best_of).expect("best_of");
        assert_eq!(b.with("done"), "2/3 passed, winner c2 — done");
        let none = FanOut {
            winner: None,
            passed: 0,
            total: 3,
        };
        assert_eq!(none.with(""), "0/3 passed, no winner");
    }

    #[test]
    fn a_retried_attempt_shows_retrying_and_junk_is_no_line() {
        let line = br#"{"v":1,"event":"attempt_finished","id":"b","teammate":"2-b","attempt":1,"status":"failed","reason":"boom","retrying":true,"at":"2026-12-01T09:00:01Z"}"#;
        let p = Line::parse(line).expect("parses").patch();
        assert_eq!(p.status.as_deref(), Some("retrying"));
        assert!(Line::parse(b"not json").is_none());
    }
}
