//! `--best-of RUNNER[:MODEL],…` (DESIGN §13): each candidate of an item runs with a runner
//! and model of its own, as a profile of the run ([`crate::run::Profile`]). The list may be
//! the batch's (`--best-of`, `best_of:`), a stage's own `best_of:` or a row's
//! `best_of_column` cell; each way of running that fans out to a list gets one profile per
//! candidate — the run's in [`crate::run::RunSpec::candidates`], a profile's in its
//! [`crate::run::Profile::candidates`] — and candidate K runs with the K-th
//! ([`crate::run::RunSpec::candidate_profile`]).

use crate::error::{Error, Result};
use crate::run::Profile;
use crate::schedule::plan::Plan;
use crate::settings::{Overrides, Settings};

/// The settings, schema and label of one way of running whose candidates get profiles.
struct Fanned<'a> {
    /// Its label (`stage fix`), empty for the batch's own.
    label: &'a str,
    settings: &'a Settings,
    schema: Option<serde_json::Value>,
}

impl Plan {
    /// Add one profile per candidate of every list of runners the run fans out to, in
    /// order: the batch's (`--best-of RUNNER[:MODEL],…`), then each profile's (a stage's
    /// `best_of:`, a row's cell) — its settings with that runner (and model), and its
    /// backend. Nothing for `--best-of N`.
    ///
    /// Errors: a runner that does not load, or a model it has no place for (exit 2, naming
    /// the candidate).
    pub(crate) fn add_candidates(&mut self) -> Result<()> {
        if !self.spec.settings.best_of_runners.is_empty() && self.spec.candidates.is_empty() {
            let schema = self.spec.schema.as_ref().map(|(v, _)| v.clone());
            let settings = self.spec.settings.clone();
            let of = Fanned {
                label: "",
                settings: &settings,
                schema,
            };
            self.spec.candidates = self.push_candidates(&of)?;
        }
        for i in 0..self.spec.profiles.len() {
            let p = &self.spec.profiles[i];
            if p.settings.best_of_runners.is_empty() || !p.candidates.is_empty() {
                continue;
            }
            let (label, settings) = (p.label.clone(), p.settings.clone());
            let of = Fanned {
                label: &label,
                settings: &settings,
                schema: p.schema.as_ref().map(|(v, _)| v.clone()),
            };
            let made = self.push_candidates(&of)?;
            self.spec.profiles[i].candidates = made;
        }
        Ok(())
    }

    /// Push a profile for each candidate of `of`'s list; their indices, in order.
    fn push_candidates(&mut self, of: &Fanned<'_>) -> Result<Vec<u32>> {
        let mut made = Vec::new();
        for (k, (runner, model)) in (1..).zip(of.settings.best_of_runners.clone()) {
            let named = match &model {
                Some(m) => format!("runner {runner}, model {m}"),
                None => format!("runner {runner}"),
            };
            let whose = match (of.label.is_empty(), &model) {
                (true, Some(m)) => format!("--best-of candidate {runner}:{m}"),
                (true, None) => format!("--best-of candidate {runner}"),
                (false, _) => format!("{}: best_of candidate {named}", of.label),
            };
            let o = Overrides {
                runner: Some(runner.clone()),
                model: model.clone(),
                ..Overrides::default()
            };
            // A candidate is one teammate: it fans out no further.
            let settings = of
                .settings
                .with_overrides(&o)
                .map_err(|e| e.within(&whose))?
                .without_fan_out();
            let backend =
                crate::run::backend::for_settings(&settings).map_err(|e| e.within(&whose))?;
            made.push(u32::try_from(self.spec.profiles.len()).map_err(|_| {
                Error::Usage("too many ways of running in one batch; split it".into())
            })?);
            self.spec.profiles.push(Profile {
                label: match of.label.is_empty() {
                    true => format!("c{k} {named}"),
                    false => format!("{}, c{k} {named}", of.label),
                },
                settings,
                schema: crate::settings::load_schema(of.schema.clone(), None)?,
                backend,
                candidates: Vec::new(),
            });
        }
        Ok(made)
    }
}
