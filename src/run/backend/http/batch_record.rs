//! The record of a team's batch jobs (`--batch-api`), `<workspace>/batch-api.json` (see
//! [`super::batch`]): each job (OpenAI's uploaded input file, or Anthropic's rows and when
//! they were sent) and its id, written before the runner sends or waits on them, so a
//! killed or interrupted run's resume finds them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The state file in the workspace.
pub(crate) const STATE_FILE: &str = "batch-api.json";

/// One job as `batch-api.json` keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Job {
    /// The uploaded input file (OpenAI); empty where the requests go with the job
    /// (Anthropic).
    pub file_id: String,
    /// The job, once created (`None`: uploaded, the job not yet created).
    #[serde(default)]
    pub batch_id: Option<String>,
    /// The rows it holds (`custom_id`s).
    pub custom_ids: Vec<String>,
    /// Its last known status (`in_progress`, `completed`, …).
    #[serde(default)]
    pub status: String,
    /// Its last known request counts (`total`, `completed`, `failed`; Anthropic's are
    /// summed into these words).
    #[serde(default)]
    pub counts: BTreeMap<String, u64>,
    /// When the status was last read (RFC 3339).
    #[serde(default)]
    pub checked_at: String,
    /// When its requests were sent to be created (RFC 3339): a job a killed run created
    /// and could not record is looked for among those made since.
    #[serde(default)]
    pub asked_at: String,
    /// Its results were handed to the rows: a row run again goes into a new job.
    #[serde(default)]
    pub delivered: bool,
    /// Uploaded by this process (not recorded): only a job read back from an earlier run's
    /// record may have been created by a run killed before it could record the job's id.
    #[serde(skip)]
    pub uploaded_now: bool,
}

/// `<workspace>/batch-api.json`: every job of the team.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct State {
    /// The base URL the jobs were made at (another one's jobs are not looked up there).
    #[serde(default)]
    pub base_url: String,
    /// The batch API the jobs were sent to (`OpenAI Batch API`, `Anthropic Message
    /// Batches`; empty in a record written before there were two: OpenAI's).
    #[serde(default)]
    pub api: String,
    /// The jobs, oldest first.
    #[serde(default)]
    pub jobs: Vec<Job>,
}

impl State {
    /// The state in `workspace`; empty when there is none (or it cannot be read).
    pub(crate) fn read(workspace: &Path) -> State {
        std::fs::read(workspace.join(STATE_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub(super) fn write(&self, workspace: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        crate::fsutil::write_atomic_private(&workspace.join(STATE_FILE), &bytes)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// One line per job for `runner status`: `batch_abc  in_progress  120/1000 done, 2
    /// failed (checked 2026-12-05T15:00:00Z)`.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.jobs
            .iter()
            .map(|j| {
                let n = |k: &str| j.counts.get(k).copied().unwrap_or(0);
                format!(
                    "{}  {}  {}/{} done, {} failed{}{}",
                    j.batch_id.as_deref().unwrap_or("(not created)"),
                    if j.status.is_empty() {
                        "uploaded"
                    } else {
                        &j.status
                    },
                    n("completed"),
                    match n("total") {
                        0 => j.custom_ids.len() as u64,
                        t => t,
                    },
                    n("failed"),
                    match j.checked_at.as_str() {
                        "" => String::new(),
                        at => format!(" (checked {at})"),
                    },
                    if j.delivered { "; results taken" } else { "" }
                )
            })
            .collect()
    }
}
