//! The inbox as `runner list` and `runner resolve` show it, and the batches waiting to be
//! run or resumed (`runner list`, as text or as one JSON document for lead agents).

use serde::Serialize;

pub(crate) use crate::source::todo::open_items;
use crate::source::todo::{Mark, Section, TodoDocument, TodoItem};

/// The open items of `doc` as text, Todo then Ideas: numbered, with the checkpoint, the
/// prerequisites (`@after:`), the continuation lines and the runner's note.
pub(crate) fn render_items(doc: &TodoDocument) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (section, heading) in [(Section::Todo, "Todo"), (Section::Ideas, "Ideas")] {
        let open: Vec<_> = doc
            .items()
            .iter()
            .filter(|i| i.section == section && i.mark != Mark::Done)
            .collect();
        let _ = writeln!(out, "{heading} ({})", open.len());
        for i in open {
            render_item(&mut out, "  ", i);
        }
    }
    out
}

/// Item `i` as lines, indented by `base` and its nesting: number, mark, title, checkpoint,
/// prerequisites, the fragment step it came from, its stable id when it has no checkpoint
/// (`(id k-…)` last; the checkpoint is its id otherwise), then its continuation lines and
/// the runner's note.
fn render_item(out: &mut String, base: &str, i: &TodoItem) {
    use std::fmt::Write;
    let indent = format!("{base}{}", "  ".repeat(i.indent / 2));
    let mark = if i.mark == Mark::InProgress {
        "[~]"
    } else {
        "[ ]"
    };
    let cp = i
        .context
        .as_ref()
        .map(|c| format!("  @context:{c}"))
        .unwrap_or_default();
    let after = after_of(i);
    let after = match after.is_empty() {
        true => String::new(),
        false => format!("  @after:{}", after.join(",")),
    };
    let fragment = i
        .fragment
        .as_ref()
        .map(|f| format!("  @fragment:{}", f.short()))
        .unwrap_or_default();
    // The stable id `resolve --id` takes: the checkpoint shown above, else the text's key.
    let id = match i.context {
        Some(_) => String::new(),
        None => format!("  (id {})", i.key()),
    };
    let _ = writeln!(
        out,
        "{indent}{:>3}. {mark} {}{cp}{after}{fragment}{id}",
        i.number, i.title
    );
    for line in i.continuation.lines() {
        let _ = writeln!(out, "{indent}       {line}");
    }
    if let Some(note) = &i.note {
        let _ = writeln!(out, "{indent}       > runner: {note}");
    }
}

/// The prerequisites of `i` as written: item numbers, then `todo-N#K` batch items.
fn after_of(i: &TodoItem) -> Vec<String> {
    i.after
        .iter()
        .map(u32::to_string)
        .chain(i.after_batches.iter().map(ToString::to_string))
        .collect()
}

/// A batch file with unticked items, as `runner list` shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WaitingBatch {
    /// The batch file `todo-N.md` (absolute).
    pub file: String,
    /// Its team, `todo-resolve-N`.
    pub team: String,
    /// Its frontmatter `status` (`pending`, `partial`), empty when it has none.
    pub status: String,
    /// The command that runs what is left (see `run::resume`).
    pub resume: String,
    /// Whether a runner works on it now (the resume command would wait for its lock).
    pub running: bool,
    /// Its unticked items, in file order.
    pub items: Vec<ListedItem>,
}

/// One open item in `runner list --format json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ListedItem {
    /// Its number in its file (what `--select`, `--only` and `@after:` use).
    pub number: u32,
    /// Its stable id ([`crate::source::todo::TodoItem::key`]: its checkpoint file, else a key
    /// of its text), which `runner resolve --id` takes and which stays when numbers shift.
    pub id: String,
    /// `todo`, `ideas` or `other` (before any known heading).
    pub section: &'static str,
    /// `open` (`[ ]`) or `in_progress` (`[~]`).
    pub mark: &'static str,
    /// The item text without its tokens.
    pub title: String,
    /// Its checkpoint file (`@context:`), relative to the store.
    pub checkpoint: Option<String>,
    /// Its prerequisites: item numbers of the same file, or `todo-N#K`.
    pub after: Vec<String>,
    /// Its continuation lines, joined by `\n` (empty when none).
    pub continuation: String,
    /// The runner's note (`> runner: …`), e.g. why the last attempt failed.
    pub note: Option<String>,
    /// The fragment step it was made from (`runner apply`), or null.
    pub fragment: Option<ListedFragment>,
}

/// The `@fragment:` mark of a listed item.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ListedFragment {
    /// The fragment's name.
    pub name: String,
    /// The round (application) it belongs to.
    pub round: u32,
    /// The step's key.
    pub step: String,
    /// The keys of the steps it comes after.
    pub after: Vec<String>,
}

impl ListedItem {
    /// The listing of item `i`.
    pub(crate) fn of(i: &TodoItem) -> ListedItem {
        ListedItem {
            number: i.number,
            id: i.key(),
            section: match i.section {
                Section::Todo => "todo",
                Section::Ideas => "ideas",
                Section::Other => "other",
            },
            mark: match i.mark {
                Mark::InProgress => "in_progress",
                _ => "open",
            },
            title: i.title.clone(),
            checkpoint: i.context.clone(),
            after: after_of(i),
            continuation: i.continuation.clone(),
            note: i.note.clone(),
            fragment: i.fragment.as_ref().map(|f| ListedFragment {
                name: f.name.clone(),
                round: f.round,
                step: f.step.clone(),
                after: f.after.clone(),
            }),
        }
    }
}

/// The batches waiting, as text after the inbox: each batch with its status and resume
/// command, then its unticked items (`batches` holds the parsed files beside them).
pub(crate) fn render_batches(batches: &[(WaitingBatch, &TodoDocument)]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if batches.is_empty() {
        return out;
    }
    let _ = writeln!(out, "Waiting in batches ({})", batches.len());
    for (b, doc) in batches {
        let status = match b.status.is_empty() {
            true => String::new(),
            false => format!(", {}", b.status),
        };
        let next = match b.running {
            true => format!("running now; `runner status {}`", b.file),
            false => format!("resume: {}", b.resume),
        };
        let _ = writeln!(
            out,
            "  {} ({} unticked{status}) — {next}",
            b.file,
            b.items.len()
        );
        for i in open_items(doc) {
            render_item(&mut out, "    ", i);
        }
    }
    out
}

/// `runner list --format json`: one document,
/// `{"v":1,"inbox":PATH,"items":[ITEM…],"batches":[{"file","team","status","resume","running","items":[ITEM…]}…]}`
/// where ITEM is `{"number","id","section","mark","title","checkpoint","after","continuation","note",
/// "fragment"}` (`fragment`: `{"name","round","step","after"}` or null)
/// ([`ListedItem`]); `items` are the inbox's open Todo and Ideas items, `batches` the batch
/// files with unticked items ([`WaitingBatch`]), by number. Field names are stable; fields
/// may be added.
pub(crate) fn json(inbox: &str, doc: &TodoDocument, batches: &[WaitingBatch]) -> String {
    #[derive(Serialize)]
    struct Listing<'a> {
        v: u32,
        inbox: &'a str,
        items: Vec<ListedItem>,
        batches: &'a [WaitingBatch],
    }
    let listing = Listing {
        v: 1,
        inbox,
        items: open_items(doc).into_iter().map(ListedItem::of).collect(),
        batches,
    };
    let mut text = serde_json::to_string_pretty(&listing).unwrap_or_default();
    text.push('\n');
    text
}
