//! The run layer: the only code that starts processes. A [`team::Team`] owns the workspace,
//! its lock and journal; the [`dispatcher`] schedules units (one per item) under bounded
//! parallelism and owns the state the user sees; a [`unit`](mod@unit) prepares each attempt, has a
//! [`backend`] execute it ([`process`] supervises a child process) and judges it; every fact
//! is one [`events::Event`], journaled and fanned out to reporters.

pub mod backend;
pub mod dispatcher;
pub mod events;
pub mod journal;
pub mod lock;
pub mod orphans;
pub mod outcome;
pub mod plan;
pub mod process;
pub mod selection;
pub mod team;
pub mod unit;
pub mod worktree;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::agent::RunnerDef;
use crate::prompt::TeammateTemplate;
use crate::report::ItemStatus;

/// Everything a run needs, validated before any file is touched.
pub struct RunSpec {
    /// Team name (`todo-resolve-3`, or the CSV output's stem).
    pub team: String,
    /// Team workspace folder (absolute).
    pub workspace: PathBuf,
    /// Working directory of every teammate (absolute).
    pub cwd: PathBuf,
    /// Teammates at once.
    pub jobs: usize,
    /// Time limit of one attempt.
    pub timeout: Option<Duration>,
    /// SIGTERM → SIGKILL grace period.
    pub grace: Duration,
    /// How long to wait for pipes after a child exits.
    pub pipe_wait: Duration,
    /// Extra attempts after a failed one.
    pub retries: u32,
    /// Statuses that are retried.
    pub retry_on: Vec<ItemStatus>,
    /// Base delay before a retry (doubled each time, with jitter).
    pub retry_delay: Duration,
    /// Cap of each log file, bytes.
    pub log_cap: u64,
    /// The runner definition.
    pub runner: RunnerDef,
    /// The command after `--` (exec runner).
    pub command: Vec<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--agent-arg` values.
    pub agent_args: Vec<String>,
    /// `--var NAME=VALUE` overrides.
    pub vars: BTreeMap<String, String>,
    /// The teammate prompt template.
    pub template: TeammateTemplate,
    /// The output schema and its compiled validator.
    pub schema: Option<(Value, jsonschema::Validator)>,
    /// The verify command (argv with `{column}` placeholders).
    pub verify: Option<Vec<String>>,
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

/// The current time as RFC 3339 in UTC, second precision.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
