//! `--best-of RUNNER[:MODEL],…` (DESIGN §13): each candidate of an item runs with a runner
//! and model of its own, as a profile of the run ([`crate::run::Profile`]) — candidate K with
//! profile K-1, since these are the run's only profiles.

use crate::error::{Error, Result};
use crate::schedule::plan::Plan;
use crate::settings::Overrides;

impl Plan {
    /// Add one profile per candidate of `--best-of RUNNER[:MODEL],…`, in order: the batch's
    /// settings with that runner (and model), and its backend. Nothing for `--best-of N`.
    ///
    /// Errors: stages (but a judge stage) or a row's own runner or model (their profiles and
    /// the candidates' are not combined yet); a runner that does not load, or a model it has no place for
    /// (exit 2, naming the candidate).
    pub(crate) fn add_candidates(&mut self) -> Result<()> {
        let runners = self.spec.settings.best_of_runners.clone();
        if runners.is_empty() {
            return Ok(());
        }
        // A judge stage's profile (the only one) goes after the candidates': candidate K
        // runs with profile K-1.
        let judge = match &self.spec.judge_stage {
            Some(j) if j.profile == 0 && self.spec.profiles.len() == 1 => self.spec.profiles.pop(),
            _ => None,
        };
        if !self.spec.profiles.is_empty() {
            return Err(Error::Usage(
                "--best-of with a list of runners cannot be combined with stages or a row's own runner or model yet; give --best-of N (the run's runner N times)".into(),
            ));
        }
        let schema = self.spec.schema.as_ref().map(|(v, _)| v.clone());
        for (k, (runner, model)) in (1..).zip(runners) {
            let whose = match &model {
                Some(m) => format!("--best-of candidate {runner}:{m}"),
                None => format!("--best-of candidate {runner}"),
            };
            let o = Overrides {
                runner: Some(runner.clone()),
                model: model.clone(),
                ..Overrides::default()
            };
            let settings = self
                .spec
                .settings
                .with_overrides(&o)
                .map_err(|e| e.within(&whose))?;
            let backend =
                crate::run::backend::for_settings(&settings).map_err(|e| e.within(&whose))?;
            self.spec.profiles.push(crate::run::Profile {
                label: match &model {
                    Some(m) => format!("c{k} runner {runner}, model {m}"),
                    None => format!("c{k} runner {runner}"),
                },
                settings,
                schema: crate::settings::load_schema(schema.clone(), None)?,
                backend,
            });
        }
        if let (Some(p), Some(j)) = (judge, self.spec.judge_stage.as_mut()) {
            j.profile = self.spec.profiles.len() as u32;
            self.spec.profiles.push(p);
        }
        Ok(())
    }
}
