//! A workspace kept before `runner clean` removes it: its journal written to the team's
//! archive ([`crate::run::record::archive`]) and the `log` column of its output tables pointed
//! at that archive, so no output names a file that is gone.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::run::record::archive;

/// What [`before_removal`] kept of a workspace.
#[derive(Debug)]
pub(crate) struct Kept {
    /// The archive written.
    pub archive: PathBuf,
    /// The output tables whose `log` column now names it.
    pub tables: Vec<PathBuf>,
}

/// Archive the workspace `ws` of team `team` before it is removed (`runner clean`), and point
/// the `log` column of its output table at the archive, so no output names a file that is
/// gone. A todo team's archive and table sit beside its batch file (`todo-N.archive.jsonl`,
/// `todo-N.workers-output.csv`); a CSV team's beside the `<stem>.runner/` folder its workspace
/// is or stands for (`<stem>.archive.jsonl`, and the `<stem>.*` output file). `None` when the workspace has
/// no journal (nothing ran).
///
/// Errors: the journal or an earlier archive cannot be read, the archive or a table cannot
/// be written.
pub(crate) fn before_removal(ws: &Path, team: &str) -> Result<Option<Kept>> {
    let journal = ws.join("journal.jsonl");
    if !journal.is_file() {
        return Ok(None);
    }
    let input = crate::run::record::team::recorded_batch(ws)?.map(|b| b.input);
    let todo = input
        .as_deref()
        .filter(|i| i.ends_with(".md") && team.starts_with("todo-resolve-"))
        .map(Path::new);
    let (archive, candidates) = match todo {
        Some(batch) => (
            archive::beside_batch(batch),
            vec![super::todo_table::path_for(batch)],
        ),
        None => {
            // Beside the folder the workspace stands for (itself, unless it was kept in the
            // user's state folder).
            let origin = crate::state_dir::origin_of(ws);
            let stem = origin.file_stem().unwrap_or_default().to_owned();
            let dir = origin.parent().unwrap_or(Path::new("."));
            let outputs = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.file_stem() == Some(stem.as_os_str()))
                .filter(|p| p.extension().is_some_and(|x| x != "jsonl"))
                .collect();
            (origin.with_extension("archive.jsonl"), outputs)
        }
    };
    archive::write(
        &journal,
        &archive,
        team,
        input.as_deref().unwrap_or_default(),
    )?;
    let mut tables = Vec::new();
    for t in candidates.into_iter().filter(|t| t.is_file()) {
        match super::output_csv::repoint_logs(&t, ws, &archive) {
            Ok(true) => tables.push(t),
            Ok(false) => {}
            // A file beside the workspace that merely shares its name is not ours to judge.
            Err(e) => tracing::warn!("{e}"),
        }
    }
    Ok(Some(Kept { archive, tables }))
}
