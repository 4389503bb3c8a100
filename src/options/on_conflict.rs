//! `--on-conflict` (BATCH.md `on_conflict`, issue 57): who gets an item whose branch
//! conflicts while the merge queue merges it — nobody (the item fails `merge_conflict`, as
//! without the option), the run's own runner and model (`agent`), or a named runner
//! definition with an optional model (`RUNNER[:MODEL]`, as `--best-of` names candidates).

use std::str::FromStr;

/// Who resolves a conflicting merge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum OnConflict {
    /// Nobody: the item fails `merge_conflict`, its branch kept (the default; `fail`).
    #[default]
    Fail,
    /// A teammate with the run's own runner definition and model (`agent`).
    Agent,
    /// A teammate with this runner definition (a name as `--runner` takes it) and model.
    Runner {
        /// The runner definition's name.
        name: String,
        /// Its model, if given (`RUNNER:MODEL`; a model may hold `:`).
        model: Option<String>,
    },
}

impl OnConflict {
    /// What a value must be.
    pub(crate) const RULE: &'static str = "must be `fail`, `agent` (the run's own runner and model) or a runner definition as RUNNER[:MODEL] (claude, codex:gpt-5)";

    /// Whether a teammate gets conflicts.
    pub(crate) fn hands_off(&self) -> bool {
        *self != OnConflict::Fail
    }
}

impl FromStr for OnConflict {
    /// [`OnConflict::RULE`].
    type Err = &'static str;

    fn from_str(text: &str) -> Result<OnConflict, &'static str> {
        let text = text.trim();
        match text {
            "fail" => return Ok(OnConflict::Fail),
            "agent" => return Ok(OnConflict::Agent),
            _ => {}
        }
        let (name, model) = match text.split_once(':') {
            Some((n, m)) => (n.trim(), Some(m.trim().to_owned())),
            None => (text, None),
        };
        let named = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !named || model.as_deref() == Some("") {
            return Err(OnConflict::RULE);
        }
        Ok(OnConflict::Runner {
            name: name.to_owned(),
            model,
        })
    }
}

/// The most resolution attempts `--conflict-attempts` allows per item.
pub(crate) const MAX_CONFLICT_ATTEMPTS: u32 = 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_conflict_is_fail_agent_or_a_runner_with_a_model() {
        assert_eq!("fail".parse(), Ok(OnConflict::Fail));
        assert_eq!(" agent ".parse(), Ok(OnConflict::Agent));
        assert_eq!(
            "codex:gpt-5:mini".parse(),
            Ok(OnConflict::Runner {
                name: "codex".into(),
                model: Some("gpt-5:mini".into())
            })
        );
        assert_eq!(
            "claude".parse(),
            Ok(OnConflict::Runner {
                name: "claude".into(),
                model: None
            })
        );
        for bad in ["", "a b", "claude:", ":m"] {
            assert_eq!(bad.parse::<OnConflict>(), Err(OnConflict::RULE), "{bad:?}");
        }
    }
}
