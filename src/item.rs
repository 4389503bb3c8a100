//! The work item: one unit of a batch, handed to one teammate.

use std::path::PathBuf;

/// One work item of a batch, whatever its source (a CSV row or a todo item).
///
/// Items are created by a source, planned, and rendered into a prompt; they never do IO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkItem {
    /// Stable identity within the batch: the id column's value, the CSV row number
    /// (1-based, header excluded) when there is no id column, or the todo item number.
    pub id: String,
    /// One-line title, shown in progress output.
    pub title: String,
    /// 1-based line of the source file where the item starts.
    pub line: u64,
    /// Name of the teammate folder and process: `todo-task-3`, or `<row>-<id>` for CSV.
    pub teammate: String,
    /// The item's values by column name, in column order (CSV row; todo number/title/checkpoint).
    pub vars: Vec<(String, String)>,
    /// The task text handed to the teammate: the rendered instruction or the todo item text
    /// with its continuation lines.
    pub body: String,
    /// Where the files the instruction inlines (`{file:…}`, `{image:…}`) go into `body`,
    /// read when the item starts ([`crate::inline::expand`]); empty for most items.
    pub inline: Vec<crate::inline::InlinePart>,
    /// Absolute path of the item's checkpoint file, when it has one.
    pub checkpoint: Option<PathBuf>,
    /// Ids of the items that must complete before this one starts.
    pub after: Vec<String>,
    /// A hash of the item's own content (a CSV row's values; a todo item's text and
    /// checkpoint). A resumed run reruns a completed item only when this changed — not when
    /// its row moved, the folder moved, or the shared instruction was edited.
    pub content: String,
    /// The stage this item is of its row's chain (`stages:` in BATCH.md); `None` for an item
    /// that is the whole row (or a todo item).
    pub stage: Option<Box<StageOf>>,
    /// Which of the run's profiles ([`crate::run::RunSpec::profiles`]) it runs with: a
    /// stage's or a row's own runner, model, schema, verify and limits; `None` runs with the
    /// batch's settings.
    pub profile: Option<u32>,
    /// With `--best-of N`: which candidate (1 ..= N) this copy of the item is, run by its own
    /// teammate `<teammate>.cK` (DESIGN §13); `None` for an item that is not fanned out.
    pub candidate: Option<u32>,
}

/// Where a stage item belongs: its row and its place in the row's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StageOf {
    /// The row's id (the item's own id is `ROW/STAGE`, [`stage_id`]).
    pub row: String,
    /// The stage's name (`audit`).
    pub name: String,
    /// The stage's index in BATCH.md's `stages:` list, 0-based.
    pub index: usize,
    /// Where the earlier stages' values go into [`WorkItem::body`] (`{audit.summary}`): byte
    /// offset and placeholder, in order; filled in when the item starts
    /// ([`crate::source::stages::fill`]).
    pub slots: Vec<(usize, String)>,
}

/// The id of stage `stage` of row `row`: `ROW/STAGE`. Stage names hold no `/`, so the part
/// after the last `/` is always the stage.
pub(crate) fn stage_id(row: &str, stage: &str) -> String {
    format!("{row}/{stage}")
}

/// The [`WorkItem::content`] hash of some parts (FNV-1a over each part and a separator).
pub(crate) fn content_hash<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut h = crate::hash::Fnv::default();
    for p in parts {
        h.update(p.as_bytes());
        h.update(&[0x1f]);
    }
    h.hex()
}

/// A one-line title: the first non-blank line of a rendered instruction (markdown heading
/// marks dropped), at most 80 characters; the id when there is none.
pub(crate) fn title_of(body: &str, id: &str) -> String {
    let line = body
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or(id);
    let mut t: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        t.push('…');
    }
    t
}

/// Make a file-name-safe teammate name from a row number and an id: `<row>-<id>` with every
/// byte outside `[A-Za-z0-9._-]` replaced by `_`, the id part cut to 40 characters.
pub(crate) fn teammate_name(row: u64, id: &str) -> String {
    let safe: String = id
        .chars()
        .take(40)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim_start_matches('.');
    format!("{row}-{safe}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn teammate_names_are_file_safe_and_unique_by_row() {
        assert_eq!(teammate_name(3, "docs/README.md"), "3-docs_README.md");
        assert_eq!(teammate_name(4, "../etc"), "4-_etc");
        assert_eq!(teammate_name(1, "héllo wörld"), "1-h_llo_w_rld");
        assert_ne!(teammate_name(1, "a"), teammate_name(2, "a"));
    }
}
