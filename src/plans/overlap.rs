//! Overlap warned before it costs (issue 57): rows that will touch the same files — named in
//! BATCH.md's `files_column`, or modified by an earlier run of the same rows (their reports'
//! `files_modified` and `files_created`, read from the team's journal) — run in parallel
//! would meet in the merge queue as conflicts. Planning names them: `--dry-run` prints the
//! warnings and a run journals them right after `run_started`; with `--serialize-overlaps`
//! it joins them into chains that run one after another ([`chains`]).

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

/// Each row's id and the files it will touch, in input order: those its `files_column`
/// cell (at index `column`, if any) names and those an earlier run of it in the team's
/// `workspace` modified, sorted. Only rows `runs` keeps.
///
/// Errors: the input or the journal cannot be read again.
fn files_of_rows(
    table: &InputTable,
    column: Option<usize>,
    workspace: &Path,
    runs: &dyn Fn(&str) -> bool,
) -> Result<Vec<(String, Vec<String>)>> {
    let before = touched_before(workspace)?;
    let mut rows = Vec::new();
    for row in table.rows()? {
        let row = row?;
        if !runs(&row.id) {
            continue;
        }
        let named = column.and_then(|i| row.values.get(i));
        let mut files: Vec<String> = named
            .map(|c| cell_files(c).map(str::to_owned).collect())
            .unwrap_or_default();
        files.extend(before.get(&row.id).into_iter().flatten().cloned());
        files.sort();
        files.dedup();
        rows.push((row.id, files));
    }
    Ok(rows)
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
    // file → the ids of the rows that name it, in input order.
    let mut rows_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, files) in files_of_rows(table, column, workspace, &|_| true)? {
        for f in files {
            rows_of.entry(f).or_default().push(id.clone());
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

/// `--serialize-overlaps`: the chains of rows that run one after another — rows joined
/// when they share a file, directly or through other rows (so no two rows that share a file
/// ever run at once) — each chain in input order, in the order of its first row; rows that
/// share nothing are in no chain. Only the rows `runs` keeps (those this run covers); the
/// files are those of [`warnings`].
///
/// Errors: the input or the journal cannot be read again.
pub(crate) fn chains(
    table: &InputTable,
    column: Option<usize>,
    workspace: &Path,
    runs: &dyn Fn(&str) -> bool,
) -> Result<Vec<Vec<String>>> {
    Ok(join_sharing(files_of_rows(table, column, workspace, runs)?))
}

/// With `settings`' `--serialize-overlaps`: the chains of the rows this run covers (`runs`)
/// that will touch the same files ([`chains`]); none without it.
///
/// Errors: with BATCH.md's `stages:` (`staged`; exit 2: a row's stages already run one
/// after another) or `--best-of` (exit 2: its winner lands only at the run's end); the
/// input or the journal cannot be read again.
pub(crate) fn serial_chains(
    settings: &crate::settings::Settings,
    staged: bool,
    table: &InputTable,
    column: Option<usize>,
    workspace: &Path,
    runs: &dyn Fn(&str) -> bool,
) -> Result<Vec<Vec<String>>> {
    if !settings.serialize_overlaps {
        return Ok(Vec::new());
    }
    let clash = match (staged, settings.best_of > 1) {
        (true, _) => Some((
            "BATCH.md's `stages:`",
            "a row's stages already run one after another in one worktree; drop one",
        )),
        (false, true) => Some((
            "--best-of",
            "a chain's next row starts from the merge of the one before it, and a --best-of item lands only with the queue at the end; drop one",
        )),
        (false, false) => None,
    };
    if let Some((other, why)) = clash {
        return Err(crate::error::Error::Conflict {
            flag: "--serialize-overlaps".into(),
            other: other.into(),
            why: why.into(),
        });
    }
    chains(table, column, workspace, runs)
}

/// The groups of `rows` (id, files; in input order) joined by a shared file, directly or
/// through other rows, each in input order; groups of one row are left out.
fn join_sharing(rows: Vec<(String, Vec<String>)>) -> Vec<Vec<String>> {
    // Union-find over row indexes, each file joining every row that names it to the first.
    let mut parent: Vec<usize> = (0..rows.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut first_with: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (_, files)) in rows.iter().enumerate() {
        for f in files {
            let j = *first_with.entry(f.as_str()).or_insert(i);
            let (a, b) = (root(&mut parent, i), root(&mut parent, j));
            // The earlier row is the root, so a chain is keyed by its first row.
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut chains: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (i, (id, _)) in rows.iter().enumerate() {
        let r = root(&mut parent, i);
        chains.entry(r).or_default().push(id.clone());
    }
    chains.into_values().filter(|c| c.len() > 1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_names_files_apart_by_spaces_commas_and_semicolons() {
        let files: Vec<&str> = cell_files(" src/a.rs, ./src/b.rs;docs/c.md  d").collect();
        assert_eq!(files, ["src/a.rs", "src/b.rs", "docs/c.md", "d"]);
    }

    #[test]
    fn rows_sharing_a_file_directly_or_through_another_row_form_one_chain_in_input_order() {
        let row = |id: &str, files: &[&str]| {
            (
                id.to_owned(),
                files.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>(),
            )
        };
        let chains = join_sharing(vec![
            row("a", &["x"]),
            row("b", &["y"]),
            row("c", &["z"]),
            row("d", &["y", "x"]),
            row("e", &[]),
            row("f", &["z"]),
        ]);
        assert_eq!(chains, [vec!["a", "b", "d"], vec!["c", "f"]]);
    }
}
