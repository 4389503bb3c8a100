//! Overlap warned before it costs (issue 57): rows that will touch the same files — named in
//! BATCH.md's `files_column`, or modified by an earlier run of the same rows (their reports'
//! `files_modified` and `files_created`, read from the team's journal) — run in parallel
//! would meet in the merge queue as conflicts. Planning names them: `--dry-run` prints the
//! warnings and a run journals them right after `run_started`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::Result;
use crate::run::events::Event;
use crate::source::input::InputTable;

/// The files in a `files_column` cell: split at whitespace, `,` and `;`.
fn cell_files(cell: &str) -> impl Iterator<Item = &str> {
    cell.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .map(|f| f.trim_start_matches("./"))
        .filter(|f| !f.is_empty())
}

/// The files each item modified or created in the team's last outcomes of it (an item's id →
/// its files), from the journal in `workspace`; empty without one.
///
/// Errors: the journal cannot be read.
fn touched_before(workspace: &Path) -> Result<BTreeMap<String, Vec<String>>> {
    let journal = workspace.join("journal.jsonl");
    let mut touched = BTreeMap::new();
    if !journal.is_file() {
        return Ok(touched);
    }
    for event in crate::run::record::journal::events(&journal)? {
        if let Event::ItemFinished(o) = event {
            let h = o.handoff();
            let files: Vec<String> = h
                .files_modified
                .into_iter()
                .chain(h.files_created)
                .collect();
            if !files.is_empty() {
                touched.insert(o.id.clone(), files);
            }
        }
    }
    Ok(touched)
}

/// One warning per group of rows that will touch the same files: the rows' ids and the
/// files they share, from the `files_column` at index `column` (if any) and what an earlier
/// run of the rows in the team's `workspace` modified. Rows are named by id, in input
/// order; groups in the order of their first file.
///
/// Errors: the input or the journal cannot be read again.
pub(crate) fn warnings(
    table: &InputTable,
    column: Option<usize>,
    workspace: &Path,
) -> Result<Vec<String>> {
    let before = touched_before(workspace)?;
    // file → the ids of the rows that name it, in input order.
    let mut rows_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in table.rows()? {
        let row = row?;
        let named = column.and_then(|i| row.values.get(i));
        let mut files: Vec<String> = named
            .map(|c| cell_files(c).map(str::to_owned).collect())
            .unwrap_or_default();
        files.extend(before.get(&row.id).into_iter().flatten().cloned());
        files.sort();
        files.dedup();
        for f in files {
            rows_of.entry(f).or_default().push(row.id.clone());
        }
    }
    // The files each group of rows shares.
    let mut groups: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for (file, ids) in rows_of.into_iter().filter(|(_, ids)| ids.len() > 1) {
        match groups.iter_mut().find(|(g, _)| *g == ids) {
            Some((_, files)) => files.push(file),
            None => groups.push((ids, vec![file])),
        }
    }
    Ok(groups
        .into_iter()
        .map(|(ids, files)| {
            format!(
                "rows {} will touch the same files ({}): run in parallel, their changes may conflict when merged",
                ids.join(", "),
                files.join(", ")
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_names_files_apart_by_spaces_commas_and_semicolons() {
        let files: Vec<&str> = cell_files(" src/a.rs, ./src/b.rs;docs/c.md  d").collect();
        assert_eq!(files, ["src/a.rs", "src/b.rs", "docs/c.md", "d"]);
    }
}
