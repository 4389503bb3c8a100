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
    /// The batch API it was sent to ([`super::batch_jobs::JobApi::title`]; empty in a record
    /// written before there were two: the record's own `api`).
    #[serde(default)]
    pub api: String,
    /// The base URL it was sent to (empty in an older record: the record's `base_url`).
    #[serde(default)]
    pub base_url: String,
    /// Uploaded by this process (not recorded): only a job read back from an earlier run's
    /// record may have been created by a run killed before it could record the job's id.
    #[serde(skip)]
    pub uploaded_now: bool,
}

impl Job {
    /// Whether `other` is this job (a later state of it).
    fn same_as(&self, other: &Job) -> bool {
        (&self.api, &self.base_url, &self.file_id, &self.asked_at)
            == (&other.api, &other.base_url, &other.file_id, &other.asked_at)
            && self.custom_ids.first() == other.custom_ids.first()
    }
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
    /// The state in `workspace`; empty when there is none (or it cannot be read). A job of
    /// an older record gets the record's `api` and `base_url`.
    pub(crate) fn read(workspace: &Path) -> State {
        let mut state: State = std::fs::read(workspace.join(STATE_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let api = match state.api.as_str() {
            "" => "OpenAI Batch API".to_owned(),
            a => a.to_owned(),
        };
        for job in &mut state.jobs {
            if job.api.is_empty() {
                job.api.clone_from(&api);
            }
            if job.base_url.is_empty() {
                job.base_url.clone_from(&state.base_url);
            }
        }
        state
    }

    /// Record `job` in `workspace`'s state: in place of the recorded one it is (the same API,
    /// base URL, input file, send time and first row), else added. One at a time in this
    /// process, read afresh each time: a team's stages each have their own collector, and
    /// none may overwrite another's jobs.
    ///
    /// Errors: the state file cannot be written.
    pub(super) fn save_job(workspace: &Path, job: &Job) -> std::io::Result<()> {
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _held = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let mut state = State::read(workspace);
        match state.jobs.iter_mut().find(|j| j.same_as(job)) {
            Some(j) => *j = job.clone(),
            None => state.jobs.push(job.clone()),
        }
        state.api.clone_from(&job.api);
        state.base_url.clone_from(&job.base_url);
        let bytes = serde_json::to_vec_pretty(&state).map_err(std::io::Error::other)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn job(first: &str, asked_at: &str) -> Job {
        Job {
            file_id: String::new(),
            batch_id: None,
            custom_ids: vec![first.into()],
            status: String::new(),
            counts: BTreeMap::new(),
            checked_at: String::new(),
            asked_at: asked_at.into(),
            api: "Anthropic Message Batches".into(),
            base_url: "http://127.0.0.1:1/".into(),
            delivered: false,
            uploaded_now: true,
        }
    }

    #[test]
    fn two_stages_jobs_are_each_recorded_and_updated_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let audit = job("1-a.audit", "2026-12-07T10:00:00.000Z");
        let verdict = job("1-a.verdict", "2026-12-07T10:05:00.000Z");
        State::save_job(dir.path(), &audit).expect("saved");
        State::save_job(dir.path(), &verdict).expect("saved");
        // The first stage's collector records its job's id from its own (older) copy.
        let mut created = audit.clone();
        created.batch_id = Some("msgbatch_1".into());
        State::save_job(dir.path(), &created).expect("saved");
        let state = State::read(dir.path());
        assert_eq!(state.jobs.len(), 2, "{state:?}");
        assert_eq!(state.jobs[0].batch_id.as_deref(), Some("msgbatch_1"));
        assert_eq!(state.jobs[1].custom_ids, ["1-a.verdict"]);
    }

    #[test]
    fn an_older_records_jobs_are_openais_at_its_base_url() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = r#"{"base_url": "https://api.openai.com/v1", "jobs": [{"file_id": "file-1",
            "batch_id": "batch_1", "custom_ids": ["1-a"]}]}"#;
        std::fs::write(dir.path().join(STATE_FILE), old).expect("write");
        let state = State::read(dir.path());
        assert_eq!(state.jobs[0].api, "OpenAI Batch API");
        assert_eq!(state.jobs[0].base_url, "https://api.openai.com/v1");
    }
}
