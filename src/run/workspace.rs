//! Finding a team workspace from what a user names (`runner status`, `show`, `logs`): the
//! folder itself, its `team.json`, the batch's output CSV, or a `todo-N.md`. Reads only.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, Result};

/// Find the workspace: a folder with team.json, team.json itself, an output CSV (its
/// `.runner` folder), a `todo-N.md` (its store's `teams/todo-resolve-N`), or, without an
/// argument, the most recently updated team here (`*.runner/`, `.agent-tasks/teams/*/`).
///
/// Errors: nothing there is a team workspace (exit 2).
pub fn locate(arg: Option<&Path>) -> Result<PathBuf> {
    locate_in(arg, None)
}

/// [`locate`], also looking in `store`'s teams when no workspace is named.
///
/// Errors: as [`locate`].
pub fn locate_in(arg: Option<&Path>, store: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = arg {
        let candidates = [
            p.to_owned(),
            p.parent().map(Path::to_owned).unwrap_or_default(),
            p.with_extension("runner"),
            p.parent()
                .unwrap_or(Path::new("."))
                .join("teams")
                .join(crate::source::todo_batch::team_name(p)),
        ];
        return candidates
            .into_iter()
            .find(|c| c.join("team.json").is_file())
            .map(|c| c.canonicalize().unwrap_or(c))
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{}: no team workspace (team.json) there",
                    p.display()
                ))
            });
    }
    known(store).pop().ok_or_else(|| {
        Error::Usage(
            "no team workspace here (no *.runner/ or .agent-tasks/teams/); give its path".into(),
        )
    })
}

/// Every team workspace here, oldest update first: `*.runner/` folders in the current folder,
/// the project store's teams (`<git root>/.agent-tasks/teams/*/`, `./.agent-tasks/teams/*/`)
/// and, when given, those of `store`. Paths are canonical; each appears once.
pub fn known(store: Option<&Path>) -> Vec<PathBuf> {
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    let mut scan = |dir: &Path, runner_only: bool| {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if runner_only && p.extension().is_none_or(|x| x != "runner") {
                continue;
            }
            if let Ok(m) = std::fs::metadata(p.join("team.json")).and_then(|m| m.modified()) {
                found.push((m, p.canonicalize().unwrap_or(p)));
            }
        }
    };
    scan(Path::new("."), true);
    let cwd = std::env::current_dir().unwrap_or_default();
    if let Some(root) = crate::store::git_root(&cwd) {
        scan(&root.join(crate::store::STORE_DIR).join("teams"), false);
    }
    scan(
        Path::new(crate::store::STORE_DIR).join("teams").as_path(),
        false,
    );
    if let Some(store) = store {
        scan(&store.join("teams"), false);
    }
    found.sort();
    let mut seen = std::collections::HashSet::new();
    found
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| seen.insert(p.clone()))
        .collect()
}
