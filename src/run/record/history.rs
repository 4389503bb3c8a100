//! A team's run history read back from its journal (for `runner report`): every attempt as a
//! span of time with its verdict, and each item's last outcome. Read only; works on the
//! journal of a running team (attempts not finished yet have no end).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::error::{Error, Result};
use crate::report::Verdict;
use crate::run::events::Event;
use crate::run::record::outcome::Outcome;

/// One attempt of an item.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Span {
    /// Item id.
    pub id: String,
    /// Teammate name.
    pub teammate: String,
    /// Attempt number, 1-based.
    pub attempt: u32,
    /// Start, milliseconds since the Unix epoch.
    pub start_ms: i64,
    /// End, milliseconds since the Unix epoch; `None` while it runs.
    pub end_ms: Option<i64>,
    /// Its verdict, once it ended.
    pub verdict: Option<Verdict>,
    /// Its request was refused unprocessed (a rate-limit wait, not an attempt).
    pub refused: bool,
    /// What the teammate said while it worked (its progress lines, [`crate::progress`]),
    /// oldest first; at most [`SAID_KEPT`], the latest ones.
    pub said: Vec<Said>,
}

/// Most progress lines kept per attempt for the page (the latest ones).
pub(crate) const SAID_KEPT: usize = 20;

/// One progress line of a teammate, as the timeline marks it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Said {
    /// When it was read, milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The line in one line ([`crate::progress::Progress::brief`]).
    pub text: String,
    /// It said it is blocked.
    pub blocked: bool,
}

/// What a team's journal holds.
#[derive(Debug, Default)]
pub(crate) struct History {
    /// Team name (from the last `run_started`).
    pub team: String,
    /// Attempts in the order they started.
    pub spans: Vec<Span>,
    /// Each item's last outcome, in the order items first finished.
    pub outcomes: Vec<Outcome>,
    /// How many runs (starts and resumes) the journal records.
    pub runs: u32,
    /// Rate-limit pauses of the team: (start, end) in milliseconds since the epoch.
    pub pauses: Vec<(i64, i64)>,
    /// When each run (start or resume, a replay) began, milliseconds since the epoch, in
    /// order.
    pub run_starts: Vec<i64>,
    /// With BATCH.md's `stages:`, their names in order (from the last `run_started`).
    pub stages: Vec<String>,
    /// Why the last run stopped starting items (its budget reached, a key refused), if it
    /// did: what `runner status` says as `stopped starting items: …`.
    pub stopped: Option<String>,
}

/// Milliseconds since the epoch of an RFC 3339 time.
fn ms(at: &str) -> Option<i64> {
    at.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

impl History {
    /// The team's wall time, milliseconds since the epoch: from the first attempt's (or
    /// item's) start to the last attempt's end or item's finish, whichever is later (an
    /// attempt still running ends at `now_ms`); `None` when nothing says when. The HTML
    /// page's axis and the Markdown summary's time both come from it, so they agree.
    pub(crate) fn wall(&self, now_ms: i64) -> Option<(i64, i64)> {
        let starts = self.spans.iter().map(|s| s.start_ms);
        let started = self.outcomes.iter().filter_map(|o| ms(&o.started_at));
        let start = starts.chain(started).min()?;
        let ends = self.spans.iter().map(|s| s.end_ms.unwrap_or(now_ms));
        let finished = self.outcomes.iter().filter_map(|o| ms(&o.finished_at));
        let end = ends.chain(finished).max()?.max(start);
        Some((start, end))
    }

    /// The idle gaps between runs inside [`History::wall`]: stretches longer than
    /// [`IDLE_GAP_OVER_MS`] where no attempt was going on and a later run started (the team
    /// waited for a person: a resume the next morning), `(from, to)` in time order. The HTML
    /// page draws them short; neither it nor the Markdown summary counts them as the team's
    /// time.
    pub(crate) fn idle_gaps(&self, now_ms: i64) -> Vec<(i64, i64)> {
        let Some((start, _)) = self.wall(now_ms) else {
            return Vec::new();
        };
        let mut busy: Vec<(i64, i64)> = self
            .spans
            .iter()
            .map(|s| (s.start_ms, s.end_ms.unwrap_or(now_ms).max(s.start_ms)))
            .collect();
        busy.sort_unstable();
        let mut gaps = Vec::new();
        let mut reach = start;
        for (from, to) in busy {
            let between_runs = self
                .run_starts
                .iter()
                .skip(1)
                .any(|r| (reach..=from).contains(r));
            if from - reach > IDLE_GAP_OVER_MS && between_runs {
                gaps.push((reach, from));
            }
            reach = reach.max(to);
        }
        gaps
    }

    /// The time the team ran, in milliseconds: its [`History::wall`] time less its
    /// [`History::idle_gaps`]; `None` when nothing says when.
    pub(crate) fn running_ms(&self, now_ms: i64) -> Option<i64> {
        let (start, end) = self.wall(now_ms)?;
        let idle: i64 = self.idle_gaps(now_ms).iter().map(|(a, b)| b - a).sum();
        Some((end - start - idle).max(0))
    }
}

/// An idle stretch between runs longer than this (milliseconds) is not the team's time
/// ([`History::idle_gaps`]).
pub(crate) const IDLE_GAP_OVER_MS: i64 = 60_000;

/// Read the journal at `path`.
///
/// Errors: it cannot be read (exit 2, naming it).
pub(crate) fn read(path: &Path) -> Result<History> {
    let file = File::open(path).map_err(|e| Error::read_input("the journal", path, e))?;
    let mut b = Builder::default();
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| Error::read_input("the journal", path, e))?;
        if let Ok(event) = Event::from_line(&line) {
            b.add(event);
        }
    }
    Ok(b.h)
}

/// The history of recorded `events` (an archive's, [`crate::run::record::archive`]).
pub(crate) fn from_events(events: impl IntoIterator<Item = Event>) -> History {
    let mut b = Builder::default();
    for e in events {
        b.add(e);
    }
    b.h
}

/// A [`History`] being built, event by event.
#[derive(Default)]
struct Builder {
    h: History,
    /// Attempts started and not finished: their span's index.
    open: HashMap<(String, u32), usize>,
    /// Each item's outcome's index.
    outcome_at: HashMap<String, usize>,
}

impl Builder {
    fn add(&mut self, event: Event) {
        let h = &mut self.h;
        match event {
            Event::RunStarted {
                team, at, stages, ..
            } => {
                h.team = team;
                h.stages = stages;
                h.runs += 1;
                h.stopped = None;
                if let Some(t) = ms(&at) {
                    h.run_starts.push(t);
                }
            }
            Event::AttemptStarted {
                id,
                teammate,
                attempt,
                at,
                ..
            } => {
                let Some(start_ms) = ms(&at) else { return };
                self.open.insert((id.clone(), attempt), h.spans.len());
                h.spans.push(Span {
                    id,
                    teammate,
                    attempt,
                    start_ms,
                    end_ms: None,
                    verdict: None,
                    refused: false,
                    said: Vec::new(),
                });
            }
            Event::Progress {
                id,
                attempt,
                progress,
                at,
                ..
            } => {
                let Some(at_ms) = ms(&at) else { return };
                if let Some(i) = self.open.get(&(id, attempt))
                    && let Some(span) = h.spans.get_mut(*i)
                {
                    if span.said.len() == SAID_KEPT {
                        span.said.remove(0);
                    }
                    span.said.push(Said {
                        at_ms,
                        text: progress.brief(),
                        blocked: progress.status == Some(crate::progress::WorkState::Blocked),
                    });
                }
            }
            Event::AttemptFinished {
                id,
                attempt,
                verdict,
                at,
                refused,
                ..
            } => {
                if let Some(i) = self.open.remove(&(id, attempt))
                    && let Some(span) = h.spans.get_mut(i)
                {
                    span.end_ms = ms(&at).map(|e| e.max(span.start_ms));
                    span.verdict = Some(verdict);
                    span.refused = refused;
                }
            }
            Event::ItemFinished(outcome) => match self.outcome_at.get(&outcome.id) {
                Some(i) => h.outcomes[*i] = *outcome,
                None => {
                    self.outcome_at.insert(outcome.id.clone(), h.outcomes.len());
                    h.outcomes.push(*outcome);
                }
            },
            Event::RunFinished(_) => {
                // Attempts a dead or interrupted run left open end with it.
                self.open.clear();
            }
            Event::TeamPaused { until, at, .. } => {
                if let (Some(start), Some(end)) = (ms(&at), ms(&until)) {
                    h.pauses.push((start, end.max(start)));
                }
            }
            Event::TeamStopped { reason, .. } => h.stopped = Some(reason),
            Event::Activity { .. }
            | Event::Warning { .. }
            | Event::ItemMerged { .. }
            | Event::ConflictHanded { .. }
            | Event::ConflictResolved { .. }
            | Event::Interrupted { .. }
            | Event::RunEnded { .. } => {}
        }
    }
}

/// Lanes for `spans`: each span goes to the lowest lane that is free when it starts (a lane
/// is one concurrent slot), so no two spans of a lane overlap. `now_ms` ends running spans.
pub(crate) fn lanes(spans: &[Span], now_ms: i64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|i| spans[*i].start_ms);
    let mut free_at: Vec<i64> = Vec::new();
    let mut lane = vec![0; spans.len()];
    for i in order {
        let s = &spans[i];
        let end = s.end_ms.unwrap_or(now_ms).max(s.start_ms);
        let l = match free_at.iter().position(|f| *f <= s.start_ms) {
            Some(l) => l,
            None => {
                free_at.push(0);
                free_at.len() - 1
            }
        };
        free_at[l] = end;
        lane[i] = l;
    }
    lane
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: i64, end: Option<i64>) -> Span {
        Span {
            id: String::new(),
            teammate: String::new(),
            attempt: 1,
            start_ms: start,
            end_ms: end,
            verdict: None,
            refused: false,
            said: Vec::new(),
        }
    }

    #[test]
    fn overlapping_attempts_take_separate_lanes_and_a_freed_lane_is_reused() {
        let spans = [
            span(0, Some(10)),
            span(2, Some(5)),
            span(5, Some(8)),
            span(11, None),
            span(3, Some(4)),
        ];
        assert_eq!(lanes(&spans, 20), [0, 1, 1, 0, 2]);
    }
}
