//! One item as the page's side panel shows it: its attempts (read from the journal, from the
//! item's first line on), its report, its progress lines, its diff (an item with a branch:
//! [`crate::run::isolation::diff`], bounded), and pieces of its log — the
//! attempt's `teammates/<name>/attempt-N.stdout.log`, opened beneath the workspace only,
//! following no link ([`crate::fsutil::open_beneath_no_links`]), and only as a plain file.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::Shared;
use super::line::{Line, progress_text, short};
use super::routes::not_found;
use super::team::{ItemRow, read_lines};
use crate::run::isolation::diff::{Diffs, ItemDiff};
use crate::run::record::outcome::Outcome;
use crate::ui::html::candidates::{self, Candidates};

/// Most bytes of the journal one item's detail reads (from its first line to its last).
const DETAIL_SCAN: u64 = 256 << 20;

/// Most bytes of a report shown.
const REPORT_MAX: usize = 64 << 10;

/// The tail of a log shown first, and the most one request returns, in bytes.
const LOG_PIECE: u64 = 16 << 10;

/// Most progress lines shown per attempt (the latest).
const SAID_MAX: usize = 20;

/// The query naming an item.
#[derive(Debug, Deserialize)]
pub(crate) struct ItemQuery {
    #[serde(default)]
    team: usize,
    id: String,
    /// (log) Which attempt's log (default: its last).
    attempt: Option<u32>,
    /// (log) From which byte (default: the last [`LOG_PIECE`] bytes).
    from: Option<u64>,
}

/// One attempt.
#[derive(Debug, Default, Serialize)]
struct Attempt {
    attempt: u32,
    started_at: String,
    finished_at: String,
    status: String,
    kind: String,
    reason: String,
    said: Vec<String>,
}

/// The side panel's item.
#[derive(Debug, Serialize)]
struct Detail {
    id: String,
    teammate: String,
    status: String,
    summary: String,
    attempts: Vec<Attempt>,
    /// The report, pretty JSON (cut to [`REPORT_MAX`]).
    report: Option<String>,
    /// A `--best-of` item's candidates, the winner and its rule (as the HTML report's
    /// cell shows them); `None` for an item without, or not finished yet.
    candidates: Option<Candidates>,
    /// What its branch changes, bounded, as the HTML report shows it
    /// ([`crate::run::isolation::diff`]); `None` for an item without a branch.
    diff: Option<ItemDiff>,
}

/// `/api/item`.
pub(crate) async fn item(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<ItemQuery>,
) -> Response {
    let Some((dir, journal, row)) = shared.team(q.team).and_then(|t| {
        let row = t.item(&q.id)?.clone();
        Some((t.dir().to_owned(), t.journal().to_owned(), row))
    }) else {
        return not_found("no such item");
    };
    // Off the runtime's threads: a long-lived item's lines may lie far apart, and git runs.
    let id = q.id.clone();
    let read = tokio::task::spawn_blocking(move || {
        let (mut detail, last) = read_detail(&journal, &id, &row);
        detail.diff = last.and_then(|o| Diffs::of_team(&dir)?.of(&o));
        detail
    })
    .await;
    match read {
        Ok(detail) => Json(detail).into_response(),
        Err(_) => not_found("the item could not be read"),
    }
}

/// Item `row`'s detail, from its lines of `journal` (without its diff), and its last
/// outcome, if it finished.
fn read_detail(journal: &Path, id: &str, row: &ItemRow) -> (Detail, Option<Outcome>) {
    let (from, to) = (row.first_offset, row.last_offset);
    let mut attempts: Vec<Attempt> = Vec::new();
    let mut report = None;
    let mut fanned = None;
    let mut last = None;
    // Up to and with the line that starts at `to`.
    let max = (to - from.min(to) + 1).min(DETAIL_SCAN);
    let _ = read_lines(journal, from, max, |bytes, _| {
        let Some(l) = Line::parse(bytes) else { return };
        let mine = match &l.outcome {
            Some(o) => o.id == id,
            None => l.id.as_deref() == Some(id),
        };
        if !mine {
            return;
        }
        let n = l.attempt.unwrap_or(0);
        let at = l.at.clone().unwrap_or_default();
        match l.event.as_str() {
            "attempt_started" => attempts.push(Attempt {
                attempt: n,
                started_at: at,
                status: "running".into(),
                ..Attempt::default()
            }),
            "attempt_finished" => {
                if let Some(a) = attempts.iter_mut().rev().find(|a| a.attempt == n) {
                    a.finished_at = at;
                    a.status = l.status.clone().unwrap_or_default();
                    a.kind = l.failure_kind.clone().unwrap_or_default();
                    a.reason = short(l.reason.as_deref().unwrap_or_default());
                }
            }
            "progress" => {
                if let Some(a) = attempts.iter_mut().rev().find(|a| a.attempt == n) {
                    if a.said.len() == SAID_MAX {
                        a.said.remove(0);
                    }
                    a.said.push(short(&progress_text(&l)));
                }
            }
            "item_finished" => {
                let outcome = crate::run::events::Event::outcome_from_line(bytes);
                fanned = outcome
                    .as_ref()
                    .and_then(|o| o.best_of.as_deref())
                    .map(candidates::of);
                report = outcome.as_ref().and_then(|o| o.report.as_ref()).map(|r| {
                    let text = serde_json::to_string_pretty(r).unwrap_or_default();
                    match text.char_indices().nth(REPORT_MAX) {
                        Some((at, _)) => format!("{}…", &text[..at]),
                        None => text,
                    }
                });
                last = outcome;
            }
            _ => {}
        }
    });
    let detail = Detail {
        id: row.id.clone(),
        teammate: row.teammate.clone(),
        status: row.status.clone(),
        summary: row.summary.clone(),
        attempts,
        report,
        candidates: fanned,
        diff: None,
    };
    (detail, last)
}

/// A piece of a log.
#[derive(Debug, Serialize)]
struct LogPiece {
    /// The log's name in the workspace.
    file: String,
    /// Whether the file is there (a quick attempt's stdout is held in memory at first; a
    /// completed item's logs are compacted into `completed.jsonl`).
    found: bool,
    /// The bytes from `start`, as text (invalid UTF-8 replaced).
    text: String,
    /// Where the piece starts.
    start: u64,
    /// Where the next piece starts (ask again from here to follow the log).
    next: u64,
}

/// `/api/log`.
pub(crate) async fn log(State(shared): State<Arc<Shared>>, Query(q): Query<ItemQuery>) -> Response {
    let Some((dir, teammate, last)) = shared.team(q.team).and_then(|t| {
        let row = t.item(&q.id)?;
        Some((t.dir().to_owned(), row.teammate.clone(), row.attempts))
    }) else {
        return not_found("no such item");
    };
    // A teammate's name is one plain path component (the runner makes it), never `..`.
    if teammate.is_empty() || teammate.contains('/') || teammate.starts_with('.') {
        return not_found("no log for this item");
    }
    let attempt = q.attempt.unwrap_or(last.max(1));
    let rel = format!("teammates/{teammate}/attempt-{attempt}.stdout.log");
    // Off the runtime's threads: `completed.jsonl` may be long.
    let read = tokio::task::spawn_blocking(move || {
        let mut got = piece(&dir, &rel, q.from);
        if !got.found && q.from.is_none() {
            compacted(&dir, &q.id, attempt, &mut got);
        }
        got
    })
    .await;
    match read {
        Ok(got) => Json(got).into_response(),
        Err(_) => not_found("the log could not be read"),
    }
}

/// A completed item's folder was compacted (`record::compact`): the kept end of the
/// attempt's stdout log from its line of `completed.jsonl`, if there is one.
fn compacted(dir: &Path, id: &str, attempt: u32, got: &mut LogPiece) {
    let Ok(Some(record)) = crate::run::record::compact::find(dir, id) else {
        return;
    };
    let Some(tail) = record.logs_of(attempt).and_then(|l| l.tail("stdout")) else {
        return;
    };
    got.file = format!(
        "{} (the kept end)",
        crate::run::record::compact::path(dir).display()
    );
    got.found = true;
    got.text.clone_from(&tail.text);
    got.start = tail.bytes.saturating_sub(tail.kept);
    got.next = tail.bytes;
}

/// The piece of `rel` (beneath `dir`) from `from` (default: its last [`LOG_PIECE`] bytes).
fn piece(dir: &Path, rel: &str, from: Option<u64>) -> LogPiece {
    let mut out = LogPiece {
        file: rel.to_owned(),
        found: false,
        text: String::new(),
        start: from.unwrap_or(0),
        next: from.unwrap_or(0),
    };
    let Ok(mut f) = crate::fsutil::open_beneath_no_links(dir, Path::new(rel)) else {
        return out;
    };
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    // A log that shrank (replaced) is read from its start again.
    let start = match from {
        Some(b) if b <= size => b,
        Some(_) => 0,
        None => size.saturating_sub(LOG_PIECE),
    };
    let mut bytes = Vec::new();
    if f.seek(SeekFrom::Start(start)).is_ok() {
        let _ = f.take(LOG_PIECE).read_to_end(&mut bytes);
    }
    out.found = true;
    out.start = start;
    out.next = start + bytes.len() as u64;
    out.text = String::from_utf8_lossy(&bytes).into_owned();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_read_in_pieces_and_no_link_is_followed_in_or_out_of_the_workspace() {
        let ws = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::write(outside.path().join("secret"), "key").expect("write");
        let folder = ws.path().join("teammates/1-a");
        std::fs::create_dir_all(&folder).expect("mkdir");
        std::fs::write(folder.join("attempt-1.stdout.log"), "one\ntwo\n").expect("write");
        std::os::unix::fs::symlink(
            outside.path().join("secret"),
            folder.join("attempt-2.stdout.log"),
        )
        .expect("link");
        // A link that stays inside the workspace is not followed either.
        std::os::unix::fs::symlink("attempt-1.stdout.log", folder.join("attempt-3.stdout.log"))
            .expect("link");
        let p = piece(ws.path(), "teammates/1-a/attempt-1.stdout.log", None);
        assert_eq!((p.found, p.text.as_str(), p.next), (true, "one\ntwo\n", 8));
        let p = piece(ws.path(), "teammates/1-a/attempt-1.stdout.log", Some(4));
        assert_eq!(p.text, "two\n");
        for link in ["attempt-2.stdout.log", "attempt-3.stdout.log"] {
            let p = piece(ws.path(), &format!("teammates/1-a/{link}"), None);
            assert!(!p.found && p.text.is_empty(), "{p:?}");
        }
    }
}
