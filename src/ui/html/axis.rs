//! The time axis of the HTML report's timeline: the team's wall time ([`History::wall`],
//! from the first attempt's start to the last attempt's end or item's finish), with each idle gap between runs (no attempt going on across a later run's start
//! for longer than a minute, [`History::idle_gaps`]: a resume the next morning) drawn short, at
//! [`GAP_SHOWN_SHARE`] of the rest, so that the work stays readable instead of becoming
//! slivers at both ends.

use crate::run::record::history::History;

/// How wide a collapsed gap is drawn: this share of the axis's time outside the gaps.
const GAP_SHOWN_SHARE: f64 = 0.03;

/// The time axis (milliseconds since the epoch, at least 1 ms long) and its collapsed gaps.
#[derive(Clone, Debug)]
pub(super) struct Axis {
    /// The first attempt's (or item's) start.
    pub start: i64,
    /// The last attempt's end (now for one still running) or item's finish.
    pub end: i64,
    /// The idle gaps between runs drawn short: (from, to), in time order.
    pub gaps: Vec<(i64, i64)>,
    /// How many milliseconds of the axis each collapsed gap is drawn as.
    gap_shown: f64,
}

impl Axis {
    /// The axis of `h`'s attempts; `now_ms` ends those still running.
    pub(super) fn of(h: &History, now_ms: i64) -> Axis {
        // The team's wall time, as the Markdown summary gives it.
        let (start, end) = h.wall(now_ms).unwrap_or((now_ms, now_ms));
        let end = end.max(start + 1);
        // Where nothing ran, across a later run's start: the team waited for a person.
        let gaps = h.idle_gaps(now_ms);
        let idle: i64 = gaps.iter().map(|(a, b)| b - a).sum();
        let rest = ((end - start - idle).max(1)) as f64;
        Axis {
            start,
            end,
            gaps,
            gap_shown: rest * GAP_SHOWN_SHARE,
        }
    }

    /// The real time the axis spans, in milliseconds.
    pub(super) fn ms(&self) -> f64 {
        (self.end - self.start) as f64
    }

    /// Where `at` is drawn, in milliseconds of the drawn axis from its start.
    fn drawn(&self, at: i64) -> f64 {
        let mut p = (at - self.start) as f64;
        for &(a, b) in &self.gaps {
            if at >= b {
                p -= (b - a) as f64 - self.gap_shown;
            } else if at > a {
                let inside = (at - a) as f64;
                p -= inside - self.gap_shown * inside / (b - a) as f64;
            }
        }
        p
    }

    fn drawn_ms(&self) -> f64 {
        self.drawn(self.end).max(1.0)
    }

    /// Where `at` is, in % of the axis (`12.345`).
    pub(super) fn left(&self, at: i64) -> String {
        format!("{:.3}", self.drawn(at) / self.drawn_ms() * 100.0)
    }

    /// How much of the axis `from`..`to` covers, in %, at least 0.2 so that it shows.
    pub(super) fn width(&self, from: i64, to: i64) -> String {
        let w = (self.drawn(to) - self.drawn(from)) / self.drawn_ms() * 100.0;
        format!("{:.3}", w.max(0.2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::record::history::Span;

    fn span(start_ms: i64, end_ms: i64) -> Span {
        Span {
            id: "a".into(),
            teammate: "1-a".into(),
            attempt: 1,
            start_ms,
            end_ms: Some(end_ms),
            verdict: None,
            refused: false,
            said: Vec::new(),
        }
    }

    #[test]
    fn an_idle_night_between_runs_is_drawn_short_and_work_keeps_its_width() {
        const HOUR: i64 = 3_600_000;
        let h = History {
            spans: vec![span(0, 10_000), span(10 * HOUR, 10 * HOUR + 10_000)],
            runs: 2,
            run_starts: vec![0, 10 * HOUR - 1_000],
            ..History::default()
        };
        let axis = Axis::of(&h, 11 * HOUR);
        assert_eq!(axis.gaps, vec![(10_000, 10 * HOUR)]);
        // 20 s of work and the night drawn as 3 % of it: each run nearly half the axis.
        assert_eq!(axis.width(0, 10_000), "48.544");
        assert_eq!(axis.left(10 * HOUR), "51.456");
        assert_eq!(axis.left(10 * HOUR + 10_000), "100.000");
        // A pause within a run (no later run began in it) is drawn as it is.
        let h = History {
            spans: vec![span(0, 10_000), span(10 * HOUR, 10 * HOUR + 10_000)],
            runs: 1,
            run_starts: vec![0],
            ..History::default()
        };
        let axis = Axis::of(&h, 11 * HOUR);
        assert!(axis.gaps.is_empty());
        assert_eq!(axis.width(0, 10_000), "0.200");
    }
}
