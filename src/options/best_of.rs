//! `--best-of N` / `best_of:` and `--judge` / `judge:`: how many candidates each item goes
//! to, and how the winner among them is chosen (DESIGN §13).

use std::str::FromStr;

/// Most candidates one item may have: each is a whole teammate (and worktree).
pub(crate) const MAX_CANDIDATES: u32 = 8;

/// `--best-of N` or `--best-of RUNNER[:MODEL],…`: the candidates of each item — N of the
/// run's own runner, or one per runner definition named (with its model after `:`), 2 ..=
/// [`MAX_CANDIDATES`] of them (1 is no fan-out, the default).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct BestOf {
    /// How many candidates.
    pub count: u32,
    /// With a list: each candidate's runner definition and model, in order; empty for `N`.
    pub runners: Vec<(String, Option<String>)>,
}

impl BestOf {
    /// What `--best-of` / `best_of` must be.
    pub(crate) const RULE: &'static str = "must be a number of candidates per item, 1 to 8 (1: no fan-out), or 2 to 8 runners as RUNNER[:MODEL],… (claude,codex,gemini:gemini-2.5-pro)";

    /// No fan-out.
    pub(crate) const ONE: BestOf = BestOf {
        count: 1,
        runners: Vec::new(),
    };

    /// `best_of:` as a file gives it (BATCH.md's frontmatter, a stage, `runner.toml`): a
    /// number or a text as `--best-of` takes it, or a list of `RUNNER[:MODEL]` texts —
    /// `[claude, codex]` means `claude,codex`. `None` for an empty value (`best_of:`).
    ///
    /// Errors: [`BestOf::RULE`] — anything else, a list item that is not a text or holds a
    /// comma, or a value whose text is no fan-out.
    pub(crate) fn from_value(v: &serde_json::Value) -> Result<Option<BestOf>, &'static str> {
        use serde_json::Value;
        let text = match v {
            Value::Null => return Ok(None),
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().filter(|s| !s.contains(',')))
                .collect::<Option<Vec<&str>>>()
                .ok_or(BestOf::RULE)?
                .join(","),
            _ => return Err(BestOf::RULE),
        };
        text.parse().map(Some)
    }
}

/// A whole number 1 ..= [`MAX_CANDIDATES`], or a comma list of 2 ..= [`MAX_CANDIDATES`]
/// `RUNNER[:MODEL]` (names as `--runner` takes them; a model may hold `:`).
impl FromStr for BestOf {
    /// [`BestOf::RULE`].
    type Err = &'static str;

    fn from_str(text: &str) -> Result<BestOf, &'static str> {
        let text = text.trim();
        if let Ok(n) = text.parse::<u32>() {
            return match (1..=MAX_CANDIDATES).contains(&n) {
                true => Ok(BestOf {
                    count: n,
                    runners: Vec::new(),
                }),
                false => Err(BestOf::RULE),
            };
        }
        let mut runners = Vec::new();
        for part in text.split(',').map(str::trim) {
            let (name, model) = match part.split_once(':') {
                Some((n, m)) => (n.trim(), Some(m.trim().to_owned())),
                None => (part, None),
            };
            let named = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !named || model.as_deref() == Some("") {
                return Err(BestOf::RULE);
            }
            runners.push((name.to_owned(), model));
        }
        match (2..=MAX_CANDIDATES as usize).contains(&runners.len()) {
            true => Ok(BestOf {
                count: runners.len() as u32,
                runners,
            }),
            false => Err(BestOf::RULE),
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
    /// `person`: every candidate runs to its end; the item ends `blocked`, listing those that
    /// passed, until `runner pick ID CANDIDATE` names the winner.
    Person,
    /// `stage NAME`: the stage NAME of BATCH.md's `stages:` (run for no row as a stage of
    /// its own) runs once per item whose candidates two or more passed, with every one of
    /// them in its prompt, and its report's `winner` names the winner.
    Stage(String),
}

impl Judge {
    /// What `--judge` / `judge` must be.
    pub(crate) const RULE: &'static str = "must be passing, first, person, score CMD (a command that prints a number), or stage NAME (a stage of BATCH.md's stages: that names the winner)";

    /// The judge's word as the plan and the outcome name it (`score`, not its command).
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Judge::Passing => "passing",
            Judge::First => "first",
            Judge::Score(_) => "score",
            Judge::Person => "person",
            Judge::Stage(_) => "stage",
        }
    }
}

/// `passing`, `first`, `person`, `score CMD` (CMD split as a shell would: `score "make
/// count"`) or `stage NAME` (a stage name: `[A-Za-z0-9_-]`, at most 40 characters).
impl FromStr for Judge {
    /// [`Judge::RULE`], or what is wrong with the score command.
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Judge, &'static str> {
        let text = text.trim();
        let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        match (word, rest.trim()) {
            ("passing", "") => Ok(Judge::Passing),
            ("first", "") => Ok(Judge::First),
            ("person", "") => Ok(Judge::Person),
            ("score", "") => Err("score needs a command that prints a number: score CMD"),
            ("score", cmd) => match shlex::split(cmd) {
                Some(argv) if !argv.is_empty() => Ok(Judge::Score(argv)),
                _ => Err("score's command is not a command line (check its quotes)"),
            },
            ("stage", "") => {
                Err("stage needs the name of a stage of BATCH.md's stages: stage NAME")
            }
            ("stage", name) => match name.len() <= 40
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            {
                true => Ok(Judge::Stage(name.to_owned())),
                false => {
                    Err("stage NAME takes one stage name ([A-Za-z0-9_-], at most 40 characters)")
                }
            },
            _ => Err(Judge::RULE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_of_is_one_to_eight_candidates_or_a_list_of_runners() {
        assert_eq!("3".parse::<BestOf>().map(|b| b.count), Ok(3));
        assert_eq!(" 1 ".parse(), Ok(BestOf::ONE));
        assert_eq!(
            "claude,codex,gemini:gemini-2.5-pro".parse(),
            Ok(BestOf {
                count: 3,
                runners: vec![
                    ("claude".into(), None),
                    ("codex".into(), None),
                    ("gemini".into(), Some("gemini-2.5-pro".into())),
                ],
            })
        );
        for bad in [
            "0",
            "9",
            "x y",
            "-2",
            "claude",
            "claude,",
            "claude,codex:",
            "a,b,c,d,e,f,g,h,i",
        ] {
            assert_eq!(bad.parse::<BestOf>(), Err(BestOf::RULE), "{bad}");
        }
    }

    #[test]
    fn a_file_gives_best_of_as_a_number_a_text_or_a_list_of_runners() {
        use serde_json::json;
        let two = "claude,codex:gpt-5".parse::<BestOf>().map(Some);
        assert_eq!(BestOf::from_value(&json!(["claude", "codex:gpt-5"])), two);
        assert_eq!(BestOf::from_value(&json!("claude, codex:gpt-5")), two);
        assert_eq!(
            BestOf::from_value(&json!(3)).map(|b| b.map(|b| b.count)),
            Ok(Some(3))
        );
        assert_eq!(BestOf::from_value(&json!(null)), Ok(None));
        for bad in [
            json!(["claude"]),
            json!([]),
            json!([2, 3]),
            json!(["claude,codex", "gemini"]),
            json!({"claude": 1}),
            json!(true),
        ] {
            assert_eq!(BestOf::from_value(&bad), Err(BestOf::RULE), "{bad}");
        }
    }

    #[test]
    fn judge_is_a_word_or_score_with_its_command() {
        assert_eq!("first".parse(), Ok(Judge::First));
        assert_eq!("person".parse(), Ok(Judge::Person));
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
        assert_eq!("stage pick".parse(), Ok(Judge::Stage("pick".into())));
        assert!("stage".parse::<Judge>().is_err());
        assert!("stage two words".parse::<Judge>().is_err());
    }
}
