//! Fixtures the scheduling tests share (the dispatcher's and the unit's): a run spec on the
//! `exec` runner definition in a temporary folder, and work items.

use std::path::Path;
use std::time::Duration;

use crate::agent::definition;
use crate::item::{WorkItem, content_hash};
use crate::prompt::{DEFAULT_TEAMMATE_TEMPLATE, TeammateTemplate};
use crate::run::RunSpec;
use crate::settings::Settings;

/// A run of team `t` in `<dir>/ws` with `jobs` teammates at once and `retries` retries, on
/// the `exec` definition ([`Settings::for_test`] for the rest).
pub(crate) fn spec(dir: &Path, jobs: usize, retries: u32) -> RunSpec {
    RunSpec {
        team: "t".into(),
        workspace: dir.join("ws"),
        origin: dir.join("ws"),
        cwd: dir.to_owned(),
        pipe_wait: Duration::from_millis(100),
        settings: Settings {
            command: vec!["agent".into()],
            jobs,
            retries,
            ..Settings::for_test(definition::load("exec", None, None).expect("exec definition"))
        },
        template: TeammateTemplate::new(Path::new("teammate.md"), DEFAULT_TEAMMATE_TEMPLATE)
            .expect("template"),
        schema: None,
        isolation: None,
        rerun: Default::default(),
        files: None,
        cwd_in_git: Default::default(),
        profiles: Vec::new(),
        candidates: Vec::new(),
        stages: Vec::new(),
        judge_stage: None,
        shared_prompts: Default::default(),
        warnings: Vec::new(),
        command_line: None,
        chains: Vec::new(),
    }
}

/// Item `id` (teammate `task-<id>`, title `item <id>`) with task text `body`, after the
/// items `after`.
pub(crate) fn item(id: &str, body: &str, after: &[&str]) -> WorkItem {
    WorkItem {
        id: id.into(),
        title: format!("item {id}"),
        line: 1,
        teammate: format!("task-{id}"),
        vars: Vec::new(),
        body: body.into(),
        inline: Vec::new(),
        checkpoint: None,
        after: after.iter().map(|a| (*a).to_owned()).collect(),
        content: content_hash([id, body]),
        stage: None,
        profile: None,
        candidate: None,
    }
}
