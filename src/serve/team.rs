//! One served team's state, kept current from its journal: a summary row per item (as the
//! ledger keeps 24 bytes per item, this keeps its status, counts and short texts — never the
//! journal's lines), the banner's facts (the run's total, stages, rate-limit pauses, a stop),
//! and how far the journal was read. Read by the routes under a lock, advanced by one tailer.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::line::{Line, OutcomeLine, progress_text, short};

/// Most rate-limit pauses the banner keeps (the latest ones).
const PAUSES_KEPT: usize = 20;

/// Most rows one page of the table holds.
pub(crate) const PAGE_MAX: usize = 500;

/// Most journal bytes one read takes before handing what it has over (the rest next time).
pub(crate) const READ_CHUNK: u64 = 4 << 20;

/// Call `each(line, end)` for every whole line of `path` from byte `from` (a line not ended
/// by a newline yet is left for a later read), reading at most about `max` bytes; `end` is
/// the offset just past the line. Returns the offset read up to.
///
/// Errors: the journal cannot be opened or read (a missing journal is no error: nothing is
/// read, as before a run starts).
pub(crate) fn read_lines(
    path: &Path,
    from: u64,
    max: u64,
    mut each: impl FnMut(&[u8], u64),
) -> std::io::Result<u64> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(from),
        Err(e) => return Err(e),
    };
    file.seek(SeekFrom::Start(from))?;
    let mut r = BufReader::with_capacity(1 << 16, file);
    let mut at = from;
    let mut line = Vec::new();
    while at - from < max {
        line.clear();
        let n = r.read_until(b'\n', &mut line)?;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        at += n as u64;
        each(&line[..n - 1], at);
    }
    Ok(at)
}

/// Whether the journal at `path` is shorter than `offset`: it was replaced (the workspace
/// cleaned and a new run begun), so what was read of it no longer holds.
pub(crate) fn shrank(path: &Path, offset: u64) -> bool {
    std::fs::metadata(path).map_or(offset > 0, |m| m.len() < offset)
}

/// One item's row, as the table shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ItemRow {
    /// The item's id.
    pub id: String,
    /// Its teammate's name.
    pub teammate: String,
    /// `running`, `retrying`, or its final status.
    pub status: String,
    /// Attempts so far.
    pub attempts: u32,
    /// Its failure kind, when it did not complete.
    pub kind: String,
    /// The reason, cut short.
    pub reason: String,
    /// Its summary, cut short.
    pub summary: String,
    /// Its latest progress line, cut short.
    pub said: String,
    /// The last attempt's wall time, seconds (0 until it finishes).
    pub duration_s: f64,
    /// Its cost, USD, when known.
    pub cost_usd: Option<f64>,
    /// Offset of its first journal line (an item's detail is read from there on).
    #[serde(skip)]
    pub first_offset: u64,
    /// Offset of its last journal line (an item's detail is read up to it).
    #[serde(skip)]
    pub last_offset: u64,
    /// With stages: each stage's status for the item's row (`ROW/STAGE`), in stage order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<String>,
}

/// Which rows of the table, in which order (the page's query string).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RowQuery {
    /// The team's number (0 first).
    #[serde(default)]
    pub team: usize,
    /// Only this status (`running` includes `retrying`).
    #[serde(default)]
    pub status: String,
    /// Only this failure kind.
    #[serde(default)]
    pub kind: String,
    /// Only ids holding this text.
    #[serde(default)]
    pub q: String,
    /// Sort column: `id` (numbers by value, else as text), `status`, `attempts`,
    /// `duration`, `cost`, `kind`; anything else: the order the journal first names the
    /// items in (the order they started).
    #[serde(default)]
    pub sort: String,
    /// Descending.
    #[serde(default)]
    pub desc: bool,
    /// First row (0-based) of the page.
    #[serde(default)]
    pub start: usize,
    /// Rows in the page (at most [`PAGE_MAX`]; 0 means 100).
    #[serde(default)]
    pub size: usize,
}

/// One page of the table.
#[derive(Debug, Serialize)]
pub(crate) struct Rows {
    /// Rows matching the query, over every page.
    pub matching: usize,
    /// The page's first row.
    pub start: usize,
    /// The page.
    pub rows: Vec<ItemRow>,
    /// The journal offset the rows describe (events after it come by the stream).
    pub offset: u64,
}

/// The banner: counts and the team's state.
#[derive(Debug, Serialize)]
pub(crate) struct Summary {
    /// The team's name.
    pub team: String,
    /// The workspace folder.
    pub workspace: String,
    /// Items the last run covers (`run_started`'s `total`).
    pub total: u64,
    /// Items the journal names.
    pub seen: usize,
    /// Items per status (`running` and `retrying` included).
    pub counts: BTreeMap<String, usize>,
    /// Failure kinds the items have, with how many.
    pub kinds: BTreeMap<String, usize>,
    /// Attempts started.
    pub attempts: u64,
    /// A run is going on (a `run_started` without its `run_finished`).
    pub live: bool,
    /// Runs recorded.
    pub runs: u32,
    /// BATCH.md's stages, in order.
    pub stages: Vec<String>,
    /// The latest rate-limit pauses: `[at, until]`, RFC 3339.
    pub pauses: Vec<(String, String)>,
    /// Why the last run stopped starting items, if it did.
    pub stopped: Option<String>,
    /// The journal offset this describes.
    pub offset: u64,
}

/// One team's live state.
#[derive(Debug)]
pub(crate) struct TeamState {
    dir: PathBuf,
    journal: PathBuf,
    team: String,
    /// How far the journal was read.
    offset: u64,
    items: Vec<ItemRow>,
    index: HashMap<String, usize>,
    total: u64,
    attempts: u64,
    live: bool,
    runs: u32,
    stages: Vec<String>,
    pauses: VecDeque<(String, String)>,
    stopped: Option<String>,
}

impl TeamState {
    /// The state of the team in workspace `dir`, nothing read yet.
    pub(crate) fn new(dir: &Path) -> TeamState {
        TeamState {
            dir: dir.to_owned(),
            journal: dir.join("journal.jsonl"),
            team: crate::run::record::workspace::team_of(dir),
            offset: 0,
            items: Vec::new(),
            index: HashMap::new(),
            total: 0,
            attempts: 0,
            live: false,
            runs: 0,
            stages: Vec::new(),
            pauses: VecDeque::new(),
            stopped: None,
        }
    }

    /// The workspace folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The journal's path.
    pub(crate) fn journal(&self) -> &Path {
        &self.journal
    }

    /// How far the journal was read.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The row of item `id`.
    pub(crate) fn item(&self, id: &str) -> Option<&ItemRow> {
        self.index.get(id).map(|i| &self.items[*i])
    }

    /// Read what the journal gained, at most [`READ_CHUNK`] bytes. Returns whether it had
    /// anything new.
    ///
    /// Errors: the journal cannot be read.
    pub(crate) fn catch_up(&mut self) -> std::io::Result<bool> {
        if shrank(&self.journal, self.offset) {
            *self = TeamState::new(&self.dir);
        }
        let from = self.offset;
        let journal = self.journal.clone();
        let mut lines = Vec::new();
        let to = read_lines(&journal, from, READ_CHUNK, |bytes, end| {
            if let Some(l) = Line::parse(bytes) {
                lines.push((l, end - bytes.len() as u64 - 1));
            }
        })?;
        for (l, at) in lines {
            self.apply(&l, at);
        }
        self.offset = to;
        Ok(to > from)
    }

    /// The row of item `id`, made when the journal first names it at `at`.
    fn row(&mut self, id: &str, teammate: Option<&str>, at: u64) -> &mut ItemRow {
        let i = match self.index.get(id) {
            Some(i) => *i,
            None => {
                self.index.insert(id.to_owned(), self.items.len());
                self.items.push(ItemRow {
                    id: id.to_owned(),
                    teammate: String::new(),
                    status: "running".into(),
                    attempts: 0,
                    kind: String::new(),
                    reason: String::new(),
                    summary: String::new(),
                    said: String::new(),
                    duration_s: 0.0,
                    cost_usd: None,
                    first_offset: at,
                    last_offset: at,
                    chain: Vec::new(),
                });
                self.items.len() - 1
            }
        };
        let row = &mut self.items[i];
        row.last_offset = at;
        if let Some(t) = teammate.filter(|t| !t.is_empty()) {
            t.clone_into(&mut row.teammate);
        }
        row
    }

    /// Apply one journal line, which starts at byte `at`.
    fn apply(&mut self, l: &Line, at: u64) {
        let id = l.id.as_deref().unwrap_or_default();
        match l.event.as_str() {
            "run_started" => {
                self.total = l.total.unwrap_or(0);
                self.live = true;
                self.runs += 1;
                self.stopped = None;
                self.stages = l.stages.clone();
                if let Some(team) = &l.team {
                    team.clone_into(&mut self.team);
                }
            }
            "run_finished" => self.live = false,
            "team_paused" => {
                if self.pauses.len() == PAUSES_KEPT {
                    self.pauses.pop_front();
                }
                let at = l.at.clone().unwrap_or_default();
                self.pauses
                    .push_back((at, l.until.clone().unwrap_or_default()));
            }
            "team_stopped" => self.stopped = l.reason.as_deref().map(short),
            "attempt_started" => {
                self.attempts += 1;
                let row = self.row(id, l.teammate.as_deref(), at);
                row.status = "running".into();
                row.attempts = row.attempts.max(l.attempt.unwrap_or(1));
                row.kind.clear();
                row.reason.clear();
            }
            "attempt_finished" => {
                let row = self.row(id, l.teammate.as_deref(), at);
                row.status = match l.retrying {
                    true => "retrying".into(),
                    false => l.status.clone().unwrap_or_default(),
                };
                row.kind = l.failure_kind.clone().unwrap_or_default();
                row.reason = short(l.reason.as_deref().unwrap_or_default());
            }
            "progress" => {
                let said = short(&progress_text(l));
                self.row(id, l.teammate.as_deref(), at).said = said;
            }
            "item_finished" => {
                if let Some(o) = &l.outcome {
                    self.finished(o, at);
                }
            }
            _ => {}
        }
    }

    /// An item reached its final status.
    fn finished(&mut self, o: &OutcomeLine, at: u64) {
        let row = self.row(&o.id, Some(&o.teammate), at);
        row.status.clone_from(&o.status);
        row.attempts = o.attempts;
        row.kind = o.failure_kind.clone().unwrap_or_default();
        row.reason = short(&o.error);
        row.summary = match &o.best_of {
            Some(b) => short(&b.with(&o.summary)),
            None => short(&o.summary),
        };
        row.duration_s = o.duration_s;
        row.cost_usd = o.cost_usd;
    }

    /// The banner.
    pub(crate) fn summary(&self) -> Summary {
        // Counted by reference: no allocation per item (asked after each burst of events).
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &self.items {
            *counts.entry(&r.status).or_insert(0) += 1;
            if !r.kind.is_empty() {
                *kinds.entry(&r.kind).or_insert(0) += 1;
            }
        }
        let owned = |m: BTreeMap<&str, usize>| -> BTreeMap<String, usize> {
            m.into_iter().map(|(k, n)| (k.to_owned(), n)).collect()
        };
        let (counts, kinds) = (owned(counts), owned(kinds));
        Summary {
            team: self.team.clone(),
            workspace: self.dir.display().to_string(),
            total: self.total,
            seen: self.items.len(),
            counts,
            kinds,
            attempts: self.attempts,
            live: self.live,
            runs: self.runs,
            stages: self.stages.clone(),
            pauses: self.pauses.iter().cloned().collect(),
            stopped: self.stopped.clone(),
            offset: self.offset,
        }
    }

    /// One page of the table for `q`.
    pub(crate) fn rows(&self, q: &RowQuery) -> Rows {
        let mut picked: Vec<&ItemRow> = self
            .items
            .iter()
            .filter(|r| {
                let status = q.status.is_empty()
                    || r.status == q.status
                    || (q.status == "running" && r.status == "retrying");
                status
                    && (q.kind.is_empty() || r.kind == q.kind)
                    && (q.q.is_empty() || r.id.contains(&q.q))
            })
            .collect();
        let by = |a: &&ItemRow, b: &&ItemRow| match q.sort.as_str() {
            "status" => a.status.cmp(&b.status),
            "attempts" => a.attempts.cmp(&b.attempts),
            "duration" => a.duration_s.total_cmp(&b.duration_s),
            "cost" => a
                .cost_usd
                .unwrap_or(0.0)
                .total_cmp(&b.cost_usd.unwrap_or(0.0)),
            "kind" => a.kind.cmp(&b.kind),
            "id" => match (a.id.parse::<u64>(), b.id.parse::<u64>()) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                _ => a.id.cmp(&b.id),
            },
            _ => std::cmp::Ordering::Equal,
        };
        // Stable: equal keys stay in item order.
        picked.sort_by(by);
        if q.desc {
            picked.reverse();
        }
        let size = match q.size {
            0 => 100,
            n => n.min(PAGE_MAX),
        };
        let matching = picked.len();
        let rows = picked
            .into_iter()
            .skip(q.start)
            .take(size)
            .map(|r| {
                let mut r = r.clone();
                r.chain = self.chain(&r.id);
                r
            })
            .collect();
        Rows {
            matching,
            start: q.start,
            rows,
            offset: self.offset,
        }
    }

    /// With stages, the statuses of every stage of `id`'s row (`pending` for a stage the
    /// journal does not name yet); else nothing.
    fn chain(&self, id: &str) -> Vec<String> {
        let Some((row, _)) = id.rsplit_once('/').filter(|_| !self.stages.is_empty()) else {
            return Vec::new();
        };
        self.stages
            .iter()
            .map(|s| match self.item(&format!("{row}/{s}")) {
                Some(r) => format!("{s}: {}", r.status),
                None => format!("{s}: pending"),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(lines: &[&str]) -> (tempfile::TempDir, TeamState) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(dir.path().join("journal.jsonl"), text).expect("write");
        let state = TeamState::new(dir.path());
        (dir, state)
    }

    #[test]
    fn rows_follow_the_journal_filter_by_status_and_kind_and_page() {
        let (dir, mut t) = journal(&[
            r#"{"v":1,"event":"run_started","team":"t","total":3,"at":"2026-12-01T09:00:00Z"}"#,
            r#"{"v":1,"event":"attempt_started","id":"a","teammate":"1-a","attempt":1,"at":"2026-12-01T09:00:00Z"}"#,
            r#"{"v":1,"event":"attempt_started","id":"b","teammate":"2-b","attempt":1,"at":"2026-12-01T09:00:00Z"}"#,
            r#"{"v":1,"event":"item_finished","outcome":{"id":"b","teammate":"2-b","status":"failed","attempts":1,"error":"no","failure_kind":"agent_error"}}"#,
        ]);
        assert!(t.catch_up().expect("reads"));
        let s = t.summary();
        assert_eq!((s.total, s.seen, s.live), (3, 2, true));
        assert_eq!(s.counts.get("running"), Some(&1));
        let failed = t.rows(&RowQuery {
            kind: "agent_error".into(),
            ..RowQuery::default()
        });
        assert_eq!(failed.matching, 1);
        assert_eq!(failed.rows[0].id, "b");
        let page = t.rows(&RowQuery {
            start: 1,
            size: 1,
            ..RowQuery::default()
        });
        assert_eq!((page.matching, page.rows[0].id.as_str()), (2, "b"));
        let by_id = t.rows(&RowQuery {
            sort: "id".into(),
            desc: true,
            ..RowQuery::default()
        });
        assert_eq!(by_id.rows[0].id, "b");
        // A torn last line waits for its newline.
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("journal.jsonl"))
            .expect("open");
        f.write_all(br#"{"v":1,"event":"item_finished","outcome":{"id":"a","#)
            .expect("write");
        assert!(!t.catch_up().expect("reads"));
        f.write_all(br#""teammate":"1-a","status":"completed","attempts":1}}"#)
            .expect("write");
        f.write_all(b"\n").expect("write");
        assert!(t.catch_up().expect("reads"));
        assert_eq!(t.item("a").map(|r| r.status.as_str()), Some("completed"));
        // A new journal (the workspace cleaned, a new run) is read from its start.
        std::fs::write(
            dir.path().join("journal.jsonl"),
            "{\"v\":1,\"event\":\"run_started\",\"team\":\"t\",\"total\":1}\n",
        )
        .expect("write");
        t.catch_up().expect("reads");
        let s = t.summary();
        assert_eq!((s.total, s.seen, s.runs), (1, 0, 1));
    }

    #[test]
    fn a_staged_row_shows_its_chain_and_pauses_and_a_stop_reach_the_banner() {
        let (_dir, mut t) = journal(&[
            r#"{"v":1,"event":"run_started","team":"t","total":2,"stages":["plan","build"],"at":"2026-12-01T09:00:00Z"}"#,
            r#"{"v":1,"event":"item_finished","outcome":{"id":"r1/plan","teammate":"1-r1-plan","status":"completed","attempts":1}}"#,
            r#"{"v":1,"event":"attempt_started","id":"r1/build","teammate":"1-r1-build","attempt":1,"at":"2026-12-01T09:00:01Z"}"#,
            r#"{"v":1,"event":"team_paused","until":"2026-12-01T09:01:00Z","wait_s":59,"limit":1,"at":"2026-12-01T09:00:01Z"}"#,
            r#"{"v":1,"event":"team_stopped","reason":"the key was refused","at":"2026-12-01T09:00:02Z"}"#,
        ]);
        t.catch_up().expect("reads");
        let rows = t.rows(&RowQuery::default());
        assert_eq!(rows.rows[0].chain, ["plan: completed", "build: running"]);
        let s = t.summary();
        assert_eq!(s.stages, ["plan", "build"]);
        assert_eq!(s.pauses.len(), 1);
        assert_eq!(s.stopped.as_deref(), Some("the key was refused"));
    }
}
