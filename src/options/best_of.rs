//! `--best-of N` / `best_of:` and `--judge` / `judge:`: how many candidates each item goes
//! to, and how the winner among them is chosen (DESIGN §13).

use std::str::FromStr;

/// Most candidates one item may have: each is a whole teammate (and worktree).
pub(crate) const MAX_CANDIDATES: u32 = 8;

/// `--best-of N`: the number of candidates of each item, 2 ..= [`MAX_CANDIDATES`] (1 is no
/// fan-out, the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BestOf(pub u32);

impl BestOf {
    /// What `--best-of` / `best_of` must be.
    pub(crate) const RULE: &'static str =
        "must be a whole number of candidates per item, 1 to 8 (1: no fan-out)";
}

/// A whole number 1 ..= [`MAX_CANDIDATES`].
impl FromStr for BestOf {
    /// [`BestOf::RULE`].
    type Err = &'static str;

    fn from_str(text: &str) -> Result<BestOf, &'static str> {
        match text.trim().parse::<u32>() {
            Ok(n) if (1..=MAX_CANDIDATES).contains(&n) => Ok(BestOf(n)),
            _ => Err(BestOf::RULE),
        }
    }
}

/// `--judge`: which of the candidates that passed the success rule (and `--verify`) wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Judge {
    /// `passing` (the default): every candidate runs to its end; among those that passed,
    /// the tie rules choose (smaller diff, then lower cost, then earlier finish).
    #[default]
    Passing,
    /// `first`: the first candidate to pass wins and the others are stopped at once.
    First,
    /// `score CMD`: CMD runs in each passing candidate's worktree (else its folder) and
    /// prints a number; the highest wins, ties by the tie rules. Argv, split as a shell
    /// would, never run by one.
    Score(Vec<String>),
}

impl Judge {
    /// What `--judge` / `judge` must be.
    pub(crate) const RULE: &'static str =
        "must be passing, first, or score CMD (a command that prints a number)";

    /// The judge's word as the plan and the outcome name it (`score`, not its command).
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Judge::Passing => "passing",
            Judge::First => "first",
            Judge::Score(_) => "score",
        }
    }
}

/// `passing`, `first` or `score CMD` (CMD split as a shell would: `score "make count"`).
impl FromStr for Judge {
    /// [`Judge::RULE`], or what is wrong with the score command.
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Judge, &'static str> {
        let text = text.trim();
        let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        match (word, rest.trim()) {
            ("passing", "") => Ok(Judge::Passing),
            ("first", "") => Ok(Judge::First),
            ("score", "") => Err("score needs a command that prints a number: score CMD"),
            ("score", cmd) => match shlex::split(cmd) {
                Some(argv) if !argv.is_empty() => Ok(Judge::Score(argv)),
                _ => Err("score's command is not a command line (check its quotes)"),
            },
            _ => Err(Judge::RULE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_of_is_one_to_eight_candidates() {
        assert_eq!("3".parse(), Ok(BestOf(3)));
        assert_eq!(" 1 ".parse(), Ok(BestOf(1)));
        for bad in ["0", "9", "x", "-2", "claude,codex"] {
            assert_eq!(bad.parse::<BestOf>(), Err(BestOf::RULE), "{bad}");
        }
    }

    #[test]
    fn judge_is_a_word_or_score_with_its_command() {
        assert_eq!("first".parse(), Ok(Judge::First));
        assert_eq!("passing".parse(), Ok(Judge::Passing));
        assert_eq!(
            "score sh -c 'wc -l < out'".parse(),
            Ok(Judge::Score(vec![
                "sh".into(),
                "-c".into(),
                "wc -l < out".into()
            ]))
        );
        assert!("score".parse::<Judge>().is_err());
        assert!("score 'open".parse::<Judge>().is_err());
        assert_eq!("fastest".parse::<Judge>(), Err(Judge::RULE));
    }
}
