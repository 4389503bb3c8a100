//! The run layer: the only code that starts processes. A [`team::Team`] owns the workspace,
//! its lock and journal; the [`dispatcher`] schedules units (one per item) under bounded
//! parallelism and owns the state the user sees; a [`unit`](mod@unit) prepares each attempt, has a
//! [`backend`] execute it ([`process`] supervises a child process) and judges it; every fact
//! is one [`events::Event`], journaled and fanned out to reporters.

pub mod archive;
pub mod backend;
pub mod descendants;
pub mod descriptors;
pub mod dispatcher;
pub mod events;
pub mod gate;
pub mod history;
pub mod isolation;
pub mod job_control;
pub mod journal;
pub mod leftovers;
pub mod lock;
pub mod orphans;
pub mod outcome;
pub mod pipeline;
pub mod plan;
pub mod process;
pub mod resume;
pub mod selection;
pub mod team;
pub mod unit;
pub mod workspace;
pub mod worktree;

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
    pub isolation: Option<std::sync::Arc<worktree::Isolation>>,
    /// Ids run even when an earlier run of this team completed them: those named by
    /// `--only ID,...` (a resumed run skips completed items; a named one is redone).
    pub rerun: std::collections::HashSet<String>,
}

impl RunSpec {
    /// The folder of teammate `name`.
    pub fn teammate_dir(&self, name: &str) -> PathBuf {
        self.workspace.join("teammates").join(name)
    }
}

/// The current time as [`rfc3339`] writes it.
pub fn now_rfc3339() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// `t` as every time of the event lines is written: RFC 3339 in UTC, millisecond precision
/// (`2026-12-01T09:00:00.123Z`; a whole second prints without a fraction).
pub fn rfc3339(t: jiff::Timestamp) -> String {
    t.round(jiff::Unit::Millisecond)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
