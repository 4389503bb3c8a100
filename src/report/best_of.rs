//! Choosing the winner among an item's `--best-of` candidates (DESIGN §13): a pure function
//! of what each candidate left — its status under the success rule (and `--verify`), its
//! score, its diff, its cost, when it finished. The unit gathers the evidence
//! (`schedule::unit::best_of`); the choice and the words that explain it are made here.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::ItemStatus;

/// One candidate of an item as its outcome records it (`best_of.candidates`) and `runner
/// show` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Candidate {
    /// Its number, 1 ..= N.
    pub candidate: u32,
    /// Its teammate (folder, worktree and branch name): `<item's teammate>.cK`.
    pub teammate: String,
    /// The runner definition it ran with.
    pub runner: String,
    /// The model that answered, when its output said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its status under the success rule (a candidate a `first` judge stopped: `cancelled`).
    pub status: ItemStatus,
    /// Why it did not pass (one line); empty when it passed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// `passed`, `failed`, or empty when there is no `--verify` or it never ran.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub verify: String,
    /// What `--judge score CMD` printed for it; `None` without one, or when it printed no
    /// number (then `error` says so and it is out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// What its attempts cost, USD, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Wall time of its last attempt, seconds.
    pub duration_s: f64,
    /// Its own attempts, numbered on their own (0 in outcomes written before they were
    /// kept).
    #[serde(default)]
    pub attempts: u32,
    /// When it finished (RFC 3339).
    pub finished_at: String,
    /// `git diff --shortstat` of its branch, with `--isolate worktree`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diffstat: Option<String>,
    /// Its branch, with `--isolate worktree` (a loser's is kept until `runner clean`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

impl Candidate {
    /// Whether it is still in the running: it passed the success rule (and `--verify`), and
    /// with a score judge, printed a number.
    pub(crate) fn passed(&self, scored: bool) -> bool {
        self.status == ItemStatus::Completed && (!scored || self.score.is_some())
    }

    /// Lines its diff changes (insertions + deletions of its diffstat); 0 without one.
    pub(crate) fn diff_lines(&self) -> u64 {
        let Some(stat) = &self.diffstat else {
            return 0;
        };
        stat.split(',')
            .filter(|part| part.contains("insertion") || part.contains("deletion"))
            .filter_map(|part| part.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }
}

/// The item's fan-out as its outcome records it: who won and by which rule, how many passed,
/// and every candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BestOf {
    /// The winning candidate's number; `None` when none passed (or a run was interrupted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<u32>,
    /// The rule that chose it (`score 12, the highest`, `smaller diff: 3 lines against 10`,
    /// `first to pass`, …), or why there is none.
    pub rule: String,
    /// Candidates that passed.
    pub passed: u32,
    /// Candidates in all.
    pub total: u32,
    /// Every candidate, by number.
    pub candidates: Vec<Candidate>,
}

impl BestOf {
    /// The winner, when there is one.
    pub(crate) fn winning(&self) -> Option<&Candidate> {
        let k = self.winner?;
        self.candidates.iter().find(|c| c.candidate == k)
    }

    /// The output's `winner` value: `TEAMMATE (RUNNER[ MODEL])`; empty without a winner.
    pub(crate) fn winner_text(&self) -> String {
        match self.winning() {
            Some(c) => match &c.model {
                Some(m) => format!("{} ({} {m})", c.teammate, c.runner),
                None => format!("{} ({})", c.teammate, c.runner),
            },
            None => String::new(),
        }
    }

    /// The output's `candidates` value: `P/N passed`.
    pub(crate) fn candidates_text(&self) -> String {
        format!("{}/{} passed", self.passed, self.total)
    }

    /// The fan-out in brief ([`Decided`]).
    pub(crate) fn decided(&self) -> Decided {
        Decided {
            winner: self.winner_text(),
            rule: self.rule.clone(),
            candidates: self.candidates_text(),
        }
    }
}

/// A best-of item's fan-out in brief, as `team.json`'s finished items keep it and MCP
/// `status` and `batch_run`'s waited answer give it (`winners`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Decided {
    /// `1-a.c2 (claude)` ([`BestOf::winner_text`]); empty when none won.
    pub winner: String,
    /// The rule that chose it, or why none did.
    pub rule: String,
    /// How many candidates passed: `2/3 passed`.
    pub candidates: String,
}

/// The tie rules, in order, after the score: the smaller diff, the lower cost (unknown
/// costs last), the earlier finish. `Less` when `a` wins.
fn tie_order(a: &Candidate, b: &Candidate) -> Ordering {
    let cost = |c: &Candidate| c.cost_usd.unwrap_or(f64::INFINITY);
    a.diff_lines()
        .cmp(&b.diff_lines())
        .then(cost(a).total_cmp(&cost(b)))
        .then(a.finished_at.cmp(&b.finished_at))
        .then(a.candidate.cmp(&b.candidate))
}

/// Choose among `candidates` those that passed (with `scored`, also printed a score): the
/// highest score, then [`tie_order`]. The winner's index in `candidates` and the rule that
/// put it ahead of the runner-up, in words; `None` when none passed.
pub(crate) fn choose(candidates: &[Candidate], scored: bool) -> Option<(usize, String)> {
    let mut alive: Vec<usize> = (0..candidates.len())
        .filter(|&i| candidates[i].passed(scored))
        .collect();
    let score = |i: usize| candidates[i].score.unwrap_or(f64::NEG_INFINITY);
    alive.sort_by(|&a, &b| {
        score(b)
            .total_cmp(&score(a))
            .then_with(|| tie_order(&candidates[a], &candidates[b]))
    });
    let (&first, rest) = alive.split_first()?;
    let w = &candidates[first];
    let Some(&second) = rest.first() else {
        let only = match scored {
            true => format!("score {}, the only candidate that passed", score(first)),
            false => "the only candidate that passed".to_owned(),
        };
        return Some((first, only));
    };
    let r = &candidates[second];
    let rule = if scored && score(first) != score(second) {
        format!(
            "score {} against {}, the highest",
            score(first),
            score(second)
        )
    } else if w.diff_lines() != r.diff_lines() {
        format!(
            "smaller diff: {} lines against {}",
            w.diff_lines(),
            r.diff_lines()
        )
    } else if w.cost_usd != r.cost_usd {
        let usd = |c: Option<f64>| c.map_or("unknown".to_owned(), |c| format!("${c:.4}"));
        format!(
            "lower cost: {} against {}",
            usd(w.cost_usd),
            usd(r.cost_usd)
        )
    } else if w.finished_at != r.finished_at {
        "earlier finish".to_owned()
    } else {
        "lower candidate number (all else equal)".to_owned()
    };
    let rule = match scored && score(first) == score(second) {
        true => format!("score {} tied; {rule}", score(first)),
        false => rule,
    };
    Some((first, rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(k: u32, status: ItemStatus, diff: Option<&str>, cost: Option<f64>) -> Candidate {
        Candidate {
            candidate: k,
            teammate: format!("1-a.c{k}"),
            runner: "exec".into(),
            model: None,
            status,
            error: String::new(),
            verify: String::new(),
            score: None,
            cost_usd: cost,
            duration_s: 1.0,
            attempts: 1,
            finished_at: format!("2026-01-01T00:00:0{k}Z"),
            diffstat: diff.map(str::to_owned),
            branch: None,
        }
    }

    #[test]
    fn only_passing_candidates_compete_and_the_smaller_diff_wins() {
        let c = [
            cand(
                1,
                ItemStatus::Failed,
                Some("1 file changed, 1 insertion(+)"),
                None,
            ),
            cand(
                2,
                ItemStatus::Completed,
                Some("2 files changed, 8 insertions(+), 2 deletions(-)"),
                Some(0.1),
            ),
            cand(
                3,
                ItemStatus::Completed,
                Some("1 file changed, 3 insertions(+)"),
                Some(0.9),
            ),
        ];
        let (i, rule) = choose(&c, false).expect("a winner");
        assert_eq!(c[i].candidate, 3);
        assert_eq!(rule, "smaller diff: 3 lines against 10");
        assert_eq!(c[1].diff_lines(), 10);
    }

    #[test]
    fn equal_diffs_go_to_the_lower_cost_then_the_earlier_finish() {
        let c = [
            cand(1, ItemStatus::Completed, None, Some(0.5)),
            cand(2, ItemStatus::Completed, None, Some(0.2)),
        ];
        let (i, rule) = choose(&c, false).expect("a winner");
        assert_eq!(
            (c[i].candidate, rule.as_str()),
            (2, "lower cost: $0.2000 against $0.5000")
        );
        let c = [
            cand(1, ItemStatus::Completed, None, None),
            cand(2, ItemStatus::Completed, None, None),
        ];
        let (i, rule) = choose(&c, false).expect("a winner");
        assert_eq!((c[i].candidate, rule.as_str()), (1, "earlier finish"));
    }

    #[test]
    fn the_highest_score_wins_and_a_candidate_without_one_is_out() {
        let mut c = [
            cand(1, ItemStatus::Completed, None, None),
            cand(2, ItemStatus::Completed, None, None),
            cand(3, ItemStatus::Completed, None, None),
        ];
        c[0].score = Some(4.0);
        c[1].score = Some(12.5);
        let (i, rule) = choose(&c, true).expect("a winner");
        assert_eq!(c[i].candidate, 2);
        assert_eq!(rule, "score 12.5 against 4, the highest");
        assert!(choose(&[cand(1, ItemStatus::Failed, None, None)], false).is_none());
    }
}
