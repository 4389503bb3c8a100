//! The resolver of `--on-conflict` (DESIGN §9): a conflicting item's merge is worked on by a
//! teammate of its own, `<teammate>.resolve`, prepared like any attempt — its folder, its
//! runner definition's argv and environment, the run's sandbox with its worktree as what it
//! may change — but handed the resolution prompt, in the worktree the merge queue made for
//! it ([`crate::run::isolation::conflict`], which decides what is taken). The item's
//! `--verify` runs there on the result, as it ran on the item's own work.

use std::path::Path;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::error::{Error, Result};
use crate::item::WorkItem;
use crate::options::on_conflict::OnConflict;
use crate::report::{ProcessEnd, VerifyResult};
use crate::run::RunSpec;
use crate::run::backend::{Attempt, Backend};
use crate::run::isolation::conflict::{AgentRun, Resolver, resolver_name};
use crate::run::record::outcome::Outcome;
use crate::run::supervise::process::Cancel;
use crate::schedule::plan::{ItemSource, Plan};

use super::attempt::AttemptLogs;
use super::helpers::run_verify;
use super::prepare::prepare;

/// The label of the profile `--on-conflict RUNNER[:MODEL]` adds ([`Plan::add_resolver`]).
const PROFILE: &str = "conflict resolver";

impl Plan {
    /// The run's profiles of `--best-of RUNNER[:MODEL],…` ([`Plan::add_candidates`]), then
    /// the resolver's ([`Plan::add_resolver`]).
    ///
    /// Errors: as theirs.
    pub(crate) fn add_profiles(&mut self) -> Result<()> {
        self.add_candidates()?;
        self.add_resolver()
    }

    /// With `--on-conflict RUNNER[:MODEL]`: add the resolver's profile (the batch's settings
    /// with that runner and model, and its backend), found again by its label. Nothing for
    /// `agent` (the run's own runner) or `fail`.
    ///
    /// Errors: a runner that does not load, or a model it has no place for (exit 2, naming
    /// `--on-conflict`).
    pub(crate) fn add_resolver(&mut self) -> Result<()> {
        let OnConflict::Runner { name, model } = self.spec.settings.on_conflict.clone() else {
            return Ok(());
        };
        let o = crate::settings::Overrides {
            runner: Some(name.clone()),
            model: model.clone(),
            ..Default::default()
        };
        let settings = self
            .spec
            .settings
            .with_overrides(&o)
            .map_err(|e| e.within("--on-conflict"))?
            .without_fan_out();
        let backend =
            crate::run::backend::for_settings(&settings).map_err(|e| e.within("--on-conflict"))?;
        self.spec.profiles.push(crate::run::Profile {
            label: format!("{PROFILE}, runner {}", who(&self.spec.settings.on_conflict)),
            settings,
            schema: None,
            backend,
            candidates: Vec::new(),
        });
        Ok(())
    }
}

/// Who `on` names, as shown: `agent`, `RUNNER` or `RUNNER:MODEL`.
fn who(on: &OnConflict) -> String {
    match on {
        OnConflict::Fail => "fail".into(),
        OnConflict::Agent => "agent".into(),
        OnConflict::Runner { name, model: None } => name.clone(),
        OnConflict::Runner {
            name,
            model: Some(m),
        } => format!("{name}:{m}"),
    }
}

/// The resolver of a run with `--on-conflict`: its agents run on their own runtime (the
/// run's is shut down when the merge queue works).
pub(crate) struct AgentResolver<'a> {
    spec: &'a RunSpec,
    source: &'a dyn ItemSource,
    backend: Arc<dyn Backend>,
    runtime: tokio::runtime::Runtime,
}

impl<'a> AgentResolver<'a> {
    /// The resolver of `spec`'s conflicts, its items read from `source`, its agents run on
    /// `backend` (the run's) unless `--on-conflict` named a runner; `None` without
    /// `--on-conflict` or `--merge`.
    ///
    /// Errors: the runtime cannot start.
    pub(crate) fn new(
        spec: &'a RunSpec,
        source: &'a dyn ItemSource,
        backend: Arc<dyn Backend>,
    ) -> Result<Option<AgentResolver<'a>>> {
        if !spec.settings.on_conflict.hands_off() || !spec.settings.merge || spec.settings.review {
            return Ok(None);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::Environment(format!("cannot start the async runtime: {e}")))?;
        Ok(Some(AgentResolver {
            spec,
            source,
            backend,
            runtime,
        }))
    }

    /// The resolver's work item for `o`: the item as the source has it (its columns fill
    /// `--verify`), under the teammate `<teammate>.resolve`, with the resolver's profile.
    fn item(&self, o: &Outcome) -> WorkItem {
        let found = self
            .source
            .items()
            .ok()
            .and_then(|mut items| items.find_map(|i| i.ok().filter(|i| i.id == o.id)));
        let mut item = found.unwrap_or_else(|| WorkItem {
            id: o.id.clone(),
            title: o.title.clone(),
            line: 0,
            teammate: o.teammate.clone(),
            vars: Vec::new(),
            body: String::new(),
            inline: Vec::new(),
            checkpoint: None,
            after: Vec::new(),
            content: String::new(),
            stage: None,
            profile: None,
            candidate: None,
        });
        item.teammate = resolver_name(&o.teammate);
        item.candidate = None;
        item.checkpoint = None;
        if let Some(k) = self
            .spec
            .profiles
            .iter()
            .position(|p| p.label.starts_with(PROFILE))
        {
            item.profile = u32::try_from(k).ok();
        }
        item
    }
}

impl Resolver for AgentResolver<'_> {
    fn who(&self) -> String {
        who(&self.spec.settings.on_conflict)
    }

    fn run_agent(&mut self, o: &Outcome, dir: &Path, prompt: &str, attempt: u32) -> AgentRun {
        let item = self.item(o);
        let spec = self.spec;
        let backend = spec
            .profile_of(&item)
            .map_or_else(|| self.backend.clone(), |p| p.backend.clone());
        self.runtime.block_on(async {
            let folder = spec.teammate_dir(&item.teammate);
            let logs = AttemptLogs {
                dir: &folder,
                attempt,
            };
            let (_stop, cancel) = watch::channel(Cancel::None);
            // A fresh worktree each attempt: its set-up command runs again.
            let _ = std::fs::remove_file(folder.join(".worktree-setup-done"));
            let prepared = match prepare(
                spec,
                &item,
                &logs,
                false,
                Ok(prompt.to_owned()),
                cancel.clone(),
            )
            .await
            {
                Ok(p) => p,
                Err(f) => {
                    return AgentRun {
                        error: Some(format!("could not start: {}", f.reason)),
                        ..AgentRun::default()
                    };
                }
            };
            debug_assert_eq!(prepared.cwd, dir);
            // The item's attempts are numbered by their markers; the resolver's by the
            // journal (`conflict_resolved`): its marker must not count as one of the item's.
            let _ = std::fs::remove_file(logs.path(crate::run::record::folder::STARTED));
            let (tx, _rx) = mpsc::unbounded_channel();
            let settings = spec.settings_for(&item);
            let attempt = Attempt {
                item: &item,
                number: attempt,
                runner: &settings.runner,
                invocation: &prepared.invocation,
                prompt: &prepared.prompt,
                report_path: &prepared.report_path,
                cwd: &prepared.cwd,
                workspace: &spec.workspace,
                env: &prepared.env,
                stdout_log: logs.path("stdout.log"),
                stderr_log: logs.path("stderr.log"),
                new_folder: prepared.new_folder,
                log_cap: settings.log_cap,
                timeout: settings.timeout,
                grace: settings.grace,
                pipe_wait: spec.pipe_wait,
                sandbox: prepared.sandbox.as_deref(),
                output_schema: None,
                images: &[],
                events: &tx,
            };
            let ran = backend.execute(&attempt, cancel).await;
            if let Some(bytes) = &ran.stdout_held {
                let _ = crate::fsutil::write_private_file(&attempt.stdout_log, bytes);
            }
            let _ = crate::fsutil::write_private_file(&prepared.prompt_file, prompt.as_bytes());
            AgentRun {
                error: failure(&ran.end),
                cost_usd: ran.agent.cost_usd,
                elapsed: ran.elapsed,
            }
        })
    }

    fn verify(&mut self, o: &Outcome, dir: &Path, attempt: u32) -> std::result::Result<(), String> {
        let item = self.item(o);
        let spec = self.spec;
        let Some(argv) = spec.settings_for(&item).verify.clone() else {
            return Ok(());
        };
        self.runtime.block_on(async {
            let folder = spec.teammate_dir(&item.teammate);
            let logs = AttemptLogs {
                dir: &folder,
                attempt,
            };
            let (_stop, cancel) = watch::channel(Cancel::None);
            let env = vec![
                ("RUNNER_ITEM_ID".to_owned(), item.id.clone().into()),
                ("RUNNER_WORKTREE".to_owned(), dir.as_os_str().to_owned()),
                (
                    "RUNNER_WORKSPACE".to_owned(),
                    spec.workspace.as_os_str().to_owned(),
                ),
            ];
            match run_verify(spec, &item, &argv, dir, &logs, &env, cancel)
                .await
                .0
            {
                VerifyResult::Passed | VerifyResult::NotRun => Ok(()),
                VerifyResult::Failed(why) => Err(why),
                VerifyResult::Cancelled => Err("it was cancelled".into()),
            }
        })
    }
}

/// Why a resolver's agent did not finish well (`None`: it exited 0), as "the resolver …"
/// goes on.
fn failure(end: &ProcessEnd) -> Option<String> {
    match end {
        ProcessEnd::Exited(0) => None,
        ProcessEnd::Exited(code) => Some(format!("exited with code {code}")),
        ProcessEnd::Signalled(sig) => Some(format!("was killed by signal {sig}")),
        ProcessEnd::TimedOut { limit, .. } => Some(format!(
            "timed out after {}",
            humantime::format_duration(*limit)
        )),
        ProcessEnd::Cancelled => Some("was cancelled".into()),
        ProcessEnd::NotStarted(why) => Some(format!("could not start: {why}")),
        other => Some(format!("failed: {other:?}")),
    }
}
