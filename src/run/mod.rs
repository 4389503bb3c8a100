//! The run layer: the only code that starts processes or sends requests. Four rooms, each
//! with a guide of its own, and the seam between them:
//!
//! - [`schedule`]: deciding what runs when. The [`schedule::plan::Plan`] a source builds,
//!   the [`schedule::pipeline`] every run goes through, the [`schedule::dispatcher`] that
//!   owns the state the user sees, a [`schedule::unit`] per item (prepare → execute →
//!   judge), the team's [`schedule::gate`] (rate limits, stops), [`schedule::selection`].
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

pub mod backend;
pub mod events;
pub mod isolation;
pub mod record;
pub mod schedule;
pub mod supervise;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::prompt::TeammateTemplate;
use crate::settings::Settings;

/// Everything a run needs, validated before any file is touched.
pub struct RunSpec {
    /// Team name (`todo-resolve-3`, or the CSV output's stem).
    pub team: String,
    /// Team workspace folder (absolute).
    pub workspace: PathBuf,
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
    /// Where the files an instruction inlines are read ([`crate::source::inline`]); `None`
    /// for a todo batch (its items inline none).
    pub files: Option<crate::source::inline::FileRoot>,
    /// Whether the run's working directory is in a git work tree, looked up once
    /// ([`schedule::unit::agent_in_git_work_tree`]); empty until then.
    pub cwd_in_git: std::sync::OnceLock<bool>,
}

impl RunSpec {
    /// The folder of teammate `name` (its runner's part; [`record::folder`]).
    pub fn teammate_dir(&self, name: &str) -> PathBuf {
        self.teammate(name).dir().to_owned()
    }

    /// The paths of teammate `name`'s folder.
    pub fn teammate(&self, name: &str) -> record::folder::TeammateFolder {
        record::folder::TeammateFolder::new(&self.workspace, name)
    }
}

/// The current time as [`rfc3339`] writes it.
pub fn now_rfc3339() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// `t` as every time of the event lines and outputs is written: RFC 3339 in UTC, always
/// three fraction digits (`2026-12-01T09:00:00.120Z`, `…:00.000Z`), so that the columns sort
/// as text.
pub fn rfc3339(t: jiff::Timestamp) -> String {
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
