//! The run layer: the only code that starts processes or sends requests. Three rooms, each
//! with a guide of its own, and the seam between them (deciding what runs when sits above,
//! in [`crate::schedule`], with the sinks between the two):
//!
//! - [`supervise`]: the processes an attempt starts. Process groups, capped logs, time
//!   limits ([`supervise::process`]), a teammate's progress file ([`supervise::progress`]), the attempt mark and subreaping
//!   ([`supervise::descendants`]), leftovers of a crashed run ([`supervise::orphans`]),
//!   Ctrl-Z ([`supervise::job_control`]), the descriptor budget ([`supervise::descriptors`]).
//! - [`record`]: what outlives the run. The workspace and its lock ([`record::team`],
//!   [`record::lock`]), `journal.jsonl` ([`record::journal`]), outcomes, history, the
//!   archive of a removed workspace, the resume command, finding a team again.
//! - [`isolation`]: git worktrees per teammate, merging them back, and what `clean` removes.
//!
//! [`backend`] is how one attempt executes (process, HTTP); every fact of a run is one
//! [`events::Event`], journaled by the dispatcher and fanned out to the sinks.

pub(crate) mod backend;
pub(crate) mod events;
pub(crate) mod isolation;
pub(crate) mod record;
pub(crate) mod supervise;
pub(crate) mod warm_up;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::prompt::TeammateTemplate;
use crate::settings::Settings;

/// Everything a run needs, validated before any file is touched.
pub(crate) struct RunSpec {
    /// Team name (`todo-resolve-3`, or the CSV output's stem).
    pub team: String,
    /// Team workspace folder (absolute): [`RunSpec::origin`], or its place in the user's
    /// state folder when teammates could write there ([`crate::state_dir`], DESIGN §6b), or
    /// the folder `--workspace` names.
    pub workspace: PathBuf,
    /// The folder the workspace stands for: `<output stem>.runner` beside a CSV batch's
    /// output, `<store>/teams/<team>` for a todo batch — what every command finds the team
    /// from. The same as [`RunSpec::workspace`] unless the workspace was put elsewhere.
    pub origin: PathBuf,
    /// Working directory of every teammate (absolute).
    pub cwd: PathBuf,
    /// How long to wait for pipes after a child exits.
    pub pipe_wait: Duration,
    /// The validated runner options (flags over file over defaults).
    pub settings: Settings,
    /// The teammate prompt template.
    pub template: TeammateTemplate,
    /// The output schema and its compiled validator.
    pub schema: Option<(Value, jsonschema::Validator)>,
    /// Git worktree isolation, when `--isolate worktree`.
    pub isolation: Option<std::sync::Arc<isolation::worktree::Isolation>>,
    /// Ids run even when an earlier run of this team completed them: those named by
    /// `--only ID,...` (a resumed run skips completed items; a named one is redone).
    pub rerun: std::collections::HashSet<String>,
    /// Where the files an instruction inlines are read ([`crate::inline`]); `None`
    /// for a todo batch (its items inline none).
    pub files: Option<crate::inline::FileRoot>,
    /// Whether the run's working directory is in a git work tree, looked up once
    /// ([`crate::schedule::unit::agent_in_git_work_tree`]); empty until then.
    pub cwd_in_git: std::sync::OnceLock<bool>,
    /// The other ways items of this run run ([`crate::item::WorkItem::profile`]): a stage's
    /// or a row's own runner, model, schema, verify and limits; empty for most runs.
    pub profiles: Vec<Profile>,
    /// With `--best-of RUNNER[:MODEL],…` (the batch's own list): the profile of each
    /// candidate, in order ([`crate::schedule::plan::Plan::add_candidates`]); else empty.
    pub candidates: Vec<u32>,
    /// With BATCH.md's `stages:`, their names in order (each row's chain); empty otherwise.
    pub stages: Vec<String>,
    /// With `--judge stage NAME`: that stage, taken out of the rows' chain (DESIGN §13).
    pub judge_stage: Option<JudgeStage>,
    /// The prompt parts completed items' records share ([`record::compact`]); empty at the
    /// start of a run.
    pub shared_prompts: record::compact::SharedPrompts,
    /// What planning the run found worth saying that is not an error (a batch file's unused
    /// keys, a runner definition's unknown ones, rows of the last output gone from the
    /// input), one sentence each, in the order found: the dry run prints them; a run
    /// journals and shows each as an [`events::Event::Warning`] right after `run_started`.
    pub warnings: Vec<String>,
    /// The command line `team.json` records as this run's (program first; what its resume
    /// command is derived from, [`record::resume`]): `None` for the runner's own arguments;
    /// `runner mcp` sets the CLI command line its tool call stands for, since the process's
    /// own is `runner mcp`.
    pub command_line: Option<Vec<String>>,
    /// `--serialize-overlaps`: the chains of items that run one after another, each in
    /// input order ([`crate::plans::overlap::chains`]); empty otherwise. An item of a chain
    /// starts once the one before it finished, in a worktree made from the target branch as
    /// that one's merge left it, and lands as soon as it completes
    /// ([`isolation::land_now`]).
    pub chains: Vec<Vec<String>>,
}

/// How some items of a run run, when not as the batch says (BATCH.md `stages:`,
/// `runner_column`, `model_column`; issue 33). The run's own [`RunSpec::settings`] still
/// govern what is the team's: jobs, limits, the sandbox, formats, logs.
pub(crate) struct Profile {
    /// What it is, for the plan: `stage fix`, `stage fix, runner claude, model haiku`.
    pub label: String,
    /// The batch's settings with the profile's changes ([`Settings::with_overrides`]).
    pub settings: Settings,
    /// The output schema its reports' `output` must satisfy, and its validator.
    pub schema: Option<(Value, jsonschema::Validator)>,
    /// The backend its attempts execute on.
    pub backend: std::sync::Arc<dyn backend::Backend>,
    /// When it fans out to a list of runners (a stage's `best_of:`, a row's
    /// `best_of_column` cell): the profile of each candidate, in order; else empty.
    pub candidates: Vec<u32>,
}

/// The stage of BATCH.md that `--judge stage NAME` names (DESIGN §13): run once per
/// `--best-of` item whose candidates two or more passed, never as a stage of a row.
pub(crate) struct JudgeStage {
    /// Its name (`pick`).
    pub name: String,
    /// Its instruction (the batch's preamble first): row columns and `{candidates}`, the
    /// surviving candidates as text, filled in when it runs.
    pub instruction: crate::prompt::Instruction,
    /// The profile ([`RunSpec::profiles`]) it runs with: its own runner, model, schema and
    /// limits; `--verify` only when it sets its own.
    pub profile: u32,
}

impl RunSpec {
    /// The profile `item` runs with, if not the batch's own.
    pub(crate) fn profile_of(&self, item: &crate::item::WorkItem) -> Option<&Profile> {
        item.profile.and_then(|p| self.profiles.get(p as usize))
    }

    /// The profile candidate `k` (1-based) of `item` runs with: with a list of runners (the
    /// item's profile's, else the batch's), that candidate's; else the item's own.
    pub(crate) fn candidate_profile(&self, item: &crate::item::WorkItem, k: u32) -> Option<u32> {
        let list = match self.profile_of(item) {
            Some(p) => &p.candidates,
            None => &self.candidates,
        };
        match list.get(k.saturating_sub(1) as usize) {
            Some(p) => Some(*p),
            None => item.profile,
        }
    }

    /// The most candidates any item of the run fans out to (1: none fans out): the batch's
    /// `--best-of`, a stage's `best_of:`, a row's `best_of_column` cell.
    pub(crate) fn most_candidates(&self) -> u32 {
        self.profiles
            .iter()
            .map(|p| p.settings.best_of)
            .fold(self.settings.best_of, u32::max)
            .max(1)
    }

    /// The settings `item`'s attempts run with: its profile's, else the run's.
    pub(crate) fn settings_for(&self, item: &crate::item::WorkItem) -> &Settings {
        self.profile_of(item)
            .map_or(&self.settings, |p| &p.settings)
    }

    /// The output schema `item`'s report must satisfy: its profile's, else the run's.
    pub(crate) fn schema_for(
        &self,
        item: &crate::item::WorkItem,
    ) -> Option<&(Value, jsonschema::Validator)> {
        match self.profile_of(item) {
            Some(p) => p.schema.as_ref(),
            None => self.schema.as_ref(),
        }
    }

    /// The item of its chain that `id` runs after (`--serialize-overlaps`), if any.
    pub(crate) fn runs_after(&self, id: &str) -> Option<&str> {
        self.chains.iter().find_map(|c| {
            let at = c.iter().position(|x| x == id)?;
            at.checked_sub(1).map(|p| c[p].as_str())
        })
    }

    /// Whether `id` is in a chain of `--serialize-overlaps`: it lands as soon as it
    /// completes, so the next of its chain starts from its merge.
    pub(crate) fn chained(&self, id: &str) -> bool {
        self.chains.iter().any(|c| c.iter().any(|x| x == id))
    }

    /// The folder of teammate `name` (its runner's part; [`record::folder`]).
    pub(crate) fn teammate_dir(&self, name: &str) -> PathBuf {
        self.teammate(name).dir().to_owned()
    }

    /// The paths of teammate `name`'s folder.
    pub(crate) fn teammate(&self, name: &str) -> record::folder::TeammateFolder {
        record::folder::TeammateFolder::new(&self.workspace, name)
    }
}

/// The current time as [`rfc3339`] writes it.
pub(crate) fn now_rfc3339() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// `t` as every time of the event lines and outputs is written: RFC 3339 in UTC, always
/// three fraction digits (`2026-12-01T09:00:00.120Z`, `…:00.000Z`), so that the columns sort
/// as text.
pub(crate) fn rfc3339(t: jiff::Timestamp) -> String {
    t.round(jiff::Unit::Millisecond)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    /// Times sort as text: every one has three fraction digits, a whole second too.
    #[test]
    fn every_time_has_three_fraction_digits() {
        let at = |s: &str| super::rfc3339(s.parse().expect("timestamp"));
        assert_eq!(at("2026-12-01T09:00:00Z"), "2026-12-01T09:00:00.000Z");
        assert_eq!(at("2026-12-01T09:00:00.97Z"), "2026-12-01T09:00:00.970Z");
        assert_eq!(at("2026-12-01T09:00:00.3004Z"), "2026-12-01T09:00:00.300Z");
        assert_eq!(at("2026-12-01T09:00:59.9996Z"), "2026-12-01T09:01:00.000Z");
    }
}
