//! `journal.jsonl`: the append-only record of a run, the durable truth used to resume.
//!
//! One [`Event`] per line, `{"v":1,"event":...}` ([`Event::to_line`]): `run_started`,
//! `attempt_started` (with the process group, to end orphans after a crash),
//! `attempt_finished`, `item_finished` (the [`Outcome`]), `interrupted`, `run_finished`; the
//! same lines `--format json` prints (`docs/events.md`). Lines of older journals (fewer
//! fields) read back as the same events.
//!
//! Each event is written with one `write` call before the state it describes is acted on,
//! so a crash (even `kill -9`) loses at most the event being written; a torn last line is
//! ignored on replay. The file is fsynced when the run ends.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::events::Event;
use crate::run::record::ledger::{self, KeyMap, Ledger};
use crate::run::record::ledger_file;
use crate::run::record::outcome::{Outcome, Spend};

/// What a command outside the run layer appends to a team's journal after the run: an
/// item's changed final outcome (e.g. `--merge` could not merge its branch). It is recorded
/// as the [`Event::ItemFinished`] it stands for; the run layer itself records [`Event`]s.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    /// An item's final outcome, replacing the one recorded before.
    ItemFinished {
        /// The outcome.
        outcome: Box<Outcome>,
    },
}

/// What can be appended to the journal: an [`Event`], or an [`Entry`] standing for one.
pub(crate) trait Recordable {
    /// The event this stands for.
    fn as_event(&self) -> Cow<'_, Event>;
}

impl Recordable for Event {
    fn as_event(&self) -> Cow<'_, Event> {
        Cow::Borrowed(self)
    }
}

impl Recordable for Entry {
    fn as_event(&self) -> Cow<'_, Event> {
        match self {
            Entry::ItemFinished { outcome } => Cow::Owned(Event::ItemFinished(outcome.clone())),
        }
    }
}

/// The open journal of a run.
pub(crate) struct Journal {
    file: File,
    path: PathBuf,
    /// Where the runner's last line ended (the file's size, unless someone else wrote).
    len: u64,
    /// Whether bytes the runner did not write were warned about.
    foreign_warned: bool,
}

/// The suffix of the sidecar that keeps a cut last line ([`Journal::open`]).
pub(crate) const TORN_SUFFIX: &str = ".torn";

/// A content hash as a journal recorded it ([`crate::item::content_hash`]: 16 lowercase hex
/// digits), packed into 8 bytes: every item keeps one in the [`Ledger`] for the whole run.
/// Any other text (an older runner's) is kept as the FNV-1a hash of that text, so that it
/// still compares as the text it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordedHash {
    /// The 16 hex digits as their number.
    Packed(u64),
    /// Anything else: FNV-1a of the text as written.
    Text(u64),
}

impl RecordedHash {
    /// The hash recorded as `text`.
    pub(crate) fn of(text: &str) -> RecordedHash {
        let canonical = text.len() == 16
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        match canonical
            .then(|| u64::from_str_radix(text, 16).ok())
            .flatten()
        {
            Some(n) => RecordedHash::Packed(n),
            None => RecordedHash::Text(crate::run::record::ledger::key(text)),
        }
    }

    /// Whether it is the hash written `text`.
    pub(crate) fn is(&self, text: &str) -> bool {
        *self == RecordedHash::of(text)
    }
}

/// Where an `item_finished` event sits in the journal, and its key facts ([`Ledger::get`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FinishedRef {
    /// Byte offset of the line.
    pub offset: u64,
    /// The item's status.
    pub status: ItemStatus,
    /// The item's content hash recorded with it.
    pub content_hash: RecordedHash,
    /// Its agent finished with a valid report, and the run was interrupted while the
    /// verify command checked it: a resume runs only the verify ([`Outcome::awaiting_verify`]).
    pub awaiting_verify: bool,
}

impl FinishedRef {
    /// Whether a resume of `item` runs only its verify command: its agent finished with a
    /// valid report that an interrupt kept from being verified, and the item is unchanged.
    pub(crate) fn verify_only(&self, item: &crate::item::WorkItem) -> bool {
        self.awaiting_verify && self.content_hash.is(&item.content)
    }

    /// Whether this recorded outcome means `item` is not run again: it completed, and the
    /// item's content is what it was then (a changed row or todo item runs again).
    pub(crate) fn resumes(&self, item: &crate::item::WorkItem) -> bool {
        self.status == ItemStatus::Completed && self.content_hash.is(&item.content)
    }
}

/// Whether `item` is not run again: `ledger` has it completed with its content as it is
/// now, and `rerun` (`--only ID`: run it even so) does not name it.
pub(crate) fn done_before(
    ledger: &Ledger,
    rerun: &HashSet<String>,
    item: &crate::item::WorkItem,
) -> bool {
    !rerun.contains(&item.id) && ledger.get(&item.id).is_some_and(|f| f.resumes(item))
}

/// How many of `items` are [`done_before`] (`run_started`'s `resumed`, the dry run's
/// "completed earlier"). The items are not read when nothing completed before.
///
/// Errors: the source's, should it fail while being read.
pub(crate) fn count_done_before(
    ledger: &Ledger,
    rerun: &HashSet<String>,
    items: impl Iterator<Item = Result<crate::item::WorkItem>>,
) -> Result<u64> {
    if !ledger.any_completed() {
        return Ok(0);
    }
    let mut n = 0;
    for item in items {
        n += u64::from(done_before(ledger, rerun, &item?));
    }
    Ok(n)
}

/// What a previous run left in the journal.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// Per item: its last `item_finished`, the highest attempt started.
    pub ledger: Ledger,
    /// What the items' attempts cost and waited.
    pub tallies: Tallies,
    /// Attempts that started and never finished (the runner died): `(id, attempt)` → pgid;
    /// a `--best-of` candidate's attempts are `(id#K, attempt)` (each numbers its own).
    pub open: BTreeMap<(String, u32), u32>,
    /// How many bytes of the journal this replay read (where a later one goes on).
    pub read_to: u64,
    /// The outputs the last run left, as `ledger.bin` has them (none when the journal was
    /// replayed from its first line: it changed since they were written).
    pub outputs: Vec<ledger_file::OutputStamp>,
}

impl Replay {
    /// Attempts that started and never finished: `(id, pgid)` (`id#K` for a candidate's),
    /// in id order.
    pub(crate) fn unfinished_attempts(&self) -> Vec<(String, u32)> {
        self.open
            .iter()
            .map(|((id, _), pgid)| (id.clone(), *pgid))
            .collect()
    }

    /// Take in one journal event.
    ///
    /// Errors: an outcome's offset is past what the ledger holds (1 TiB).
    pub(crate) fn apply(&mut self, event: &Event, offset: u64) -> Result<()> {
        match event {
            Event::AttemptStarted {
                id,
                attempt,
                pgid,
                candidate,
                ..
            } => {
                self.ledger.started(ledger::key(id), *attempt);
                self.open
                    .insert((open_key(id, *candidate), *attempt), *pgid);
            }
            Event::AttemptFinished {
                id,
                attempt,
                spend,
                verdict,
                retrying,
                refused,
                candidate,
                ..
            } => {
                self.open.remove(&(open_key(id, *candidate), *attempt));
                self.tallies
                    .attempt(ledger::key(id), verdict, *retrying, *refused, *spend);
            }
            Event::ItemFinished(outcome) => {
                self.ledger.finished(outcome, offset)?;
                self.tallies
                    .outcome(ledger::key(&outcome.id), outcome.cost_usd);
            }
            _ => {}
        }
        Ok(())
    }
}

/// The id an open attempt is kept under in [`Replay::open`]: the item's, `ID#K` for
/// candidate K of a `--best-of` item (its candidates' attempts run at once, numbered alike).
fn open_key(id: &str, candidate: Option<u32>) -> String {
    match candidate {
        Some(k) => format!("{id}#{k}"),
        None => id.to_owned(),
    }
}

/// What some items' attempts cost and how often they waited, over every run, by
/// [`ledger::key`]: only items that have something to count take an entry.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Tallies {
    /// What every finished attempt of each item cost (from `attempt_finished`; journals
    /// written before it carried costs have none).
    pub spent: KeyMap<Spend>,
    /// Attempts whose request was refused unprocessed, and rate-limit waits.
    pub waits: KeyMap<Waits>,
    /// An outcome's cost where no attempt of its item said what it cost (journals written
    /// before attempts carried costs).
    pub outcome_costs: KeyMap<f64>,
}

impl Tallies {
    /// Count an attempt of item `key` that ended with `verdict`.
    pub(crate) fn attempt(
        &mut self,
        key: u64,
        verdict: &crate::report::Verdict,
        retrying: bool,
        refused: bool,
        spend: Spend,
    ) {
        if refused || Waits::is_wait(verdict, retrying) {
            self.waits
                .entry(key)
                .or_default()
                .count(verdict, retrying, refused);
        }
        if !spend.is_empty() {
            self.spent.entry(key).or_default().add(spend);
        }
    }

    /// Note an outcome of item `key` that cost `cost_usd`.
    pub(crate) fn outcome(&mut self, key: u64, cost_usd: Option<f64>) {
        if self.spent.contains_key(&key) {
            return;
        }
        match cost_usd {
            Some(c) => self.outcome_costs.insert(key, c),
            None => self.outcome_costs.remove(&key),
        };
    }

    /// What item `id`'s attempts cost so far.
    pub(crate) fn spent_of(&self, id: &str) -> Spend {
        self.spent
            .get(&ledger::key(id))
            .copied()
            .unwrap_or_default()
    }

    /// Item `id`'s waits so far.
    pub(crate) fn waits_of(&self, id: &str) -> Waits {
        self.waits
            .get(&ledger::key(id))
            .copied()
            .unwrap_or_default()
    }

    /// What every item cost, in USD, and how many items said: per item what its attempts
    /// cost, else what its outcome says (a resumed run's budget counts it).
    pub(crate) fn cost(&self) -> (f64, u32) {
        let mut usd = 0.0;
        let mut items = 0u32;
        for (k, c) in &self.outcome_costs {
            if self.spent.get(k).is_none_or(|s| s.cost_usd.is_none()) {
                usd += c;
                items += 1;
            }
        }
        for c in self.spent.values().filter_map(|s| s.cost_usd) {
            usd += c;
            items += 1;
        }
        (usd, items)
    }
}

/// An item's rate-limit waits over every run ([`Tallies::waits`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Waits {
    /// Requests refused unprocessed: not counted as attempts.
    pub refused: u32,
    /// Waits for a rate limit or a quota's reset.
    pub rate_limit: u32,
}

impl Waits {
    /// Count the attempt that ended with `verdict` (`retrying`, `refused` as in
    /// `attempt_finished`).
    pub(crate) fn count(
        &mut self,
        verdict: &crate::report::Verdict,
        retrying: bool,
        refused: bool,
    ) {
        self.refused += u32::from(refused);
        self.rate_limit += u32::from(Waits::is_wait(verdict, retrying));
    }

    /// Whether an attempt that ended with `verdict` (`retrying`) was a rate-limit wait: only
    /// those (and refusals) are counted, so items that never waited take no entry.
    pub(crate) fn is_wait(verdict: &crate::report::Verdict, retrying: bool) -> bool {
        use crate::failure::FailureKind;
        retrying
            && matches!(
                verdict.kind,
                Some(FailureKind::RateLimited | FailureKind::Quota)
            )
    }
}

impl Journal {
    /// Open (create) the journal for appending. A cut last line (a crash half-way through a
    /// write, or a tail someone cut) is moved to `journal.jsonl.torn` with a warning, so new
    /// events start on a fresh line and nothing is glued to them.
    ///
    /// Errors: the journal cannot be opened, read or repaired.
    pub(crate) fn open(path: &Path) -> Result<Journal> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("read", path, e))?
            .len();
        let mut journal = Journal {
            file,
            path: path.to_owned(),
            len,
            foreign_warned: false,
        };
        journal.repair_tail()?;
        Ok(journal)
    }

    /// Move a last line without its newline to the `.torn` sidecar and cut it off.
    fn repair_tail(&mut self) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let path = self.path.clone();
        let read = |e| Error::io("read", &path, e);
        if self.len == 0 || self.last_byte().map_err(read)? == Some(b'\n') {
            return Ok(());
        }
        // Find the last newline, reading backwards.
        let mut end = self.len;
        let mut keep = 0u64;
        let mut chunk = vec![0u8; 64 * 1024];
        while end > 0 {
            let start = end.saturating_sub(chunk.len() as u64);
            let buf = &mut chunk[..(end - start) as usize];
            self.file.read_exact_at(buf, start).map_err(read)?;
            if let Some(i) = buf.iter().rposition(|b| *b == b'\n') {
                keep = start + i as u64 + 1;
                break;
            }
            end = start;
        }
        let mut torn = vec![0u8; (self.len - keep) as usize];
        self.file.read_exact_at(&mut torn, keep).map_err(read)?;
        let sidecar = PathBuf::from(format!("{}{TORN_SUFFIX}", self.path.display()));
        {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(&sidecar)
                .map_err(|e| Error::io("open", &sidecar, e))?;
            f.write_all(&torn)
                .and_then(|()| f.write_all(b"\n"))
                .map_err(|e| Error::io("write", &sidecar, e))?;
        }
        self.file
            .set_len(keep)
            .map_err(|e| Error::io("repair", &self.path, e))?;
        tracing::warn!(
            "{}: its last line was cut ({} bytes at byte {keep}, not an event the runner can read); it is kept in {} and left out",
            self.path.display(),
            torn.len(),
            sidecar.display()
        );
        self.len = keep;
        Ok(())
    }

    /// The file's last byte, `None` when it is empty.
    fn last_byte(&self) -> std::io::Result<Option<u8>> {
        use std::os::unix::fs::FileExt;
        let size = self.file.metadata()?.len();
        if size == 0 {
            return Ok(None);
        }
        let mut b = [0u8; 1];
        self.file.read_exact_at(&mut b, size - 1)?;
        Ok(Some(b[0]))
    }

    /// Append one event (one `write` call). Returns the byte offset of its line and the
    /// line's length without the newline; `None` for an event that is not recorded
    /// ([`Event::Activity`]).
    ///
    /// Errors: the event cannot be encoded, or the write failed.
    pub(crate) fn append(&mut self, event: &Event) -> Result<Option<(u64, u64)>> {
        let Some(line) = event.to_line() else {
            return Ok(None);
        };
        let mut line = line
            .map_err(|e| Error::Environment(format!("cannot encode a journal event: {e}")))?
            .into_bytes();
        line.push(b'\n');
        let body = line.len() as u64 - 1;
        let size = self
            .file
            .metadata()
            .map_err(|e| Error::io("read", &self.path, e))?
            .len();
        if size != self.len {
            // Someone else wrote to (or cut) the journal: the line goes after whatever is
            // there, on a line of its own, and its offset is where it really landed.
            if !self.foreign_warned {
                self.foreign_warned = true;
                tracing::warn!(
                    "{}: it changed under the runner ({size} bytes where it wrote {}; from byte {}); lines the runner did not write are skipped when it is read",
                    self.path.display(),
                    self.len,
                    self.len.min(size)
                );
            }
            if self
                .last_byte()
                .map_err(|e| Error::io("read", &self.path, e))?
                .is_some_and(|b| b != b'\n')
            {
                line.insert(0, b'\n');
            }
        }
        self.file
            .write_all(&line)
            .map_err(|e| Error::io("append to", &self.path, e))?;
        // With O_APPEND the position after the write is where the line ends.
        let end = self
            .file
            .stream_position()
            .map_err(|e| Error::io("append to", &self.path, e))?;
        self.len = end;
        Ok(Some((end - body - 1, body)))
    }

    /// Where the runner's last line ends (bytes).
    pub(crate) fn written_to(&self) -> u64 {
        self.len
    }

    /// Whether the journal holds bytes the runner did not write (it was appended to or cut
    /// by someone else while it was open).
    pub(crate) fn touched(&self) -> bool {
        self.foreign_warned || self.file.metadata().map_or(true, |m| m.len() != self.len)
    }

    /// Whether the journal is shorter than the lines the runner wrote (someone cut it): the
    /// offsets it handed out may point past what is left.
    pub(crate) fn was_cut(&self) -> bool {
        self.file.metadata().is_ok_and(|m| m.len() < self.len)
    }

    /// fsync the journal.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file
            .sync_all()
            .map_err(|e| Error::io("sync", &self.path, e))
    }

    /// The journal's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Read a journal (missing → empty replay): from its `ledger.bin` on where that still
/// describes it ([`ledger_file`]), else from its first line. Lines that are no event
/// (written by someone else, or a torn last line) are skipped, with a warning naming the
/// first one's offset.
///
/// Errors: the journal cannot be read.
pub(crate) fn replay(path: &Path) -> Result<Replay> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Replay::default()),
        Err(e) => return Err(Error::io("read", path, e)),
    };
    let mut r = ledger_file::load(path, &file).unwrap_or_default();
    // Lines that are no event of the runner's (someone else wrote them): how many, and the
    // first one's offset.
    let mut foreign: (u64, Option<u64>) = (0, None);
    let mut reader = BufReader::new(file);
    reader
        .seek(SeekFrom::Start(r.read_to))
        .map_err(|e| Error::io("read", path, e))?;
    let mut offset = r.read_to;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::io("read", path, e))?;
        if n == 0 {
            break;
        }
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        match Event::from_line(body) {
            Ok(event) => r.apply(&event, offset)?,
            Err(_) if !body.iter().all(u8::is_ascii_whitespace) => {
                foreign.0 += 1;
                foreign.1.get_or_insert(offset);
            }
            Err(_) => {}
        }
        offset += n as u64;
        if line.ends_with(b"\n") {
            r.read_to = offset;
        }
    }
    if let (n, Some(first)) = foreign {
        tracing::warn!(
            "{}: {n} line(s) are no event of the runner's (the first at byte {first}); they are skipped",
            path.display()
        );
    }
    Ok(r)
}

/// The status of every item's last outcome in the journal at `path`, by id (for views
/// that list items by name; a run keeps the [`Ledger`], which has no names).
///
/// Errors: the journal cannot be read.
pub(crate) fn last_statuses(path: &Path) -> Result<HashMap<String, ItemStatus>> {
    let mut out = HashMap::new();
    each_event(path, |event| {
        if let Event::ItemFinished(o) = event {
            out.insert(o.id, o.status);
        }
    })?;
    Ok(out)
}

/// Every recorded event of item `id` in the journal at `path`, in order: its attempts'
/// starts and ends and its outcomes (one per run that finished it). Streams the file; a torn
/// last line is skipped.
///
/// Errors: the journal cannot be read.
pub(crate) fn events_of(path: &Path, id: &str) -> Result<Vec<Event>> {
    let mut out = events_naming(path, id)?;
    out.retain(|event| is_of_item(event, id));
    Ok(out)
}

/// The recorded events of the journal at `path` whose line holds `text` as a JSON string
/// (`"text"`, escaped as the journal writes it), in order: every event whose item id or
/// teammate is `text`, and maybe others. Only those lines are parsed, so that `show` and
/// `logs` find one item of a team of 100,000 without decoding every event (issue 56). A
/// torn last line is skipped.
///
/// Errors: the journal cannot be read.
pub(crate) fn events_naming(path: &Path, text: &str) -> Result<Vec<Event>> {
    let needle = serde_json::Value::from(text).to_string();
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let file = File::open(path).map_err(|e| Error::read_input("the journal", path, e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut out = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::read_input("the journal", path, e))?;
        if n == 0 {
            return Ok(out);
        }
        if finder.find(&line).is_none() {
            continue;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if let Ok(event) = Event::from_line(&line) {
            out.push(event);
        }
    }
}

/// Every recorded event of the journal at `path`, in order (a torn last line is skipped).
///
/// Errors: the journal cannot be read.
pub(crate) fn events(path: &Path) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    each_event(path, |event| out.push(event))?;
    Ok(out)
}

/// Whether `event` is about item `id`: an attempt's start or end, what its teammate said
/// while it worked, or an outcome.
pub(crate) fn is_of_item(event: &Event, id: &str) -> bool {
    match event {
        Event::AttemptStarted { id: i, .. }
        | Event::AttemptFinished { id: i, .. }
        | Event::Progress { id: i, .. } => i == id,
        Event::ItemFinished(o) => o.id == id,
        _ => false,
    }
}

/// Stream the events of the journal at `path` to `f`; lines that do not read are skipped.
fn each_event(path: &Path, mut f: impl FnMut(Event)) -> Result<()> {
    let file = File::open(path).map_err(|e| Error::read_input("the journal", path, e))?;
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| Error::read_input("the journal", path, e))?;
        if let Ok(event) = Event::from_line(&line) {
            f(event);
        }
    }
    Ok(())
}

/// Reads journal lines at given offsets through a window of the file: outputs ask for the
/// rows' outcomes in input order, which is mostly the order they were journaled in, so most
/// lines come from the window rather than a read of their own.
#[derive(Debug, Default)]
pub(crate) struct LineReader {
    window: Vec<u8>,
    /// The file offset of `window[0]`.
    start: u64,
}

/// How much of the journal a [`LineReader`] reads at once while the lines asked for follow
/// each other; a line elsewhere is read with [`JUMP`] bytes (as many more as it needs), so
/// that outcomes asked for out of order (a rerun's, journaled at the end) cost one small
/// read each, not a window each.
const WINDOW: usize = 256 * 1024;
const JUMP: usize = 8 * 1024;

impl LineReader {
    /// The line (without its newline) that starts at byte `offset` of `file`; the rest of
    /// the file when no newline follows.
    ///
    /// Errors: the file cannot be read.
    pub(crate) fn line_at(&mut self, file: &File, offset: u64) -> std::io::Result<&[u8]> {
        use std::os::unix::fs::FileExt;
        let end = self.start + self.window.len() as u64;
        let in_window = offset >= self.start && offset < end;
        if let Some(i) = in_window
            .then(|| (offset - self.start) as usize)
            .filter(|at| self.window[*at..].contains(&b'\n'))
        {
            let line = &self.window[i..];
            let n = line.iter().position(|b| *b == b'\n').unwrap_or(line.len());
            return Ok(&line[..n]);
        }
        // Read from the line on, as much as it needs.
        let following = offset >= self.start && offset <= end + JUMP as u64;
        let first = if following { WINDOW } else { JUMP };
        self.start = offset;
        self.window.clear();
        let mut len = 0usize;
        loop {
            self.window.resize(len + first.max(len), 0);
            let n = file.read_at(&mut self.window[len..], offset + len as u64)?;
            let newline = self.window[len..len + n].iter().position(|b| *b == b'\n');
            len += n;
            if n == 0 || newline.is_some() {
                self.window.truncate(len);
                let line_end = self.window.iter().position(|b| *b == b'\n').unwrap_or(len);
                return Ok(&self.window[..line_end]);
            }
        }
    }
}

/// Read back the outcome of item `id` recorded in the line at byte `offset` (from the
/// [`Ledger`]), through `lines`. `None` when that line is
/// another item's: two ids with the same [`ledger::key`], whose outcomes must not be
/// mistaken for each other.
///
/// Errors: the journal cannot be read, or the line is not an outcome.
pub(crate) fn read_outcome(
    lines: &mut LineReader,
    file: &File,
    path: &Path,
    offset: u64,
    id: &str,
) -> Result<Option<Outcome>> {
    let outcome = outcome_at(lines, file, path, offset)?;
    Ok((outcome.id == id).then_some(outcome))
}

/// Read back the outcome recorded in the line at byte `offset` (from the [`Ledger`]),
/// through `lines`, whichever item's it is.
///
/// Errors: the journal cannot be read, or the line is not an outcome.
pub(crate) fn outcome_at(
    lines: &mut LineReader,
    file: &File,
    path: &Path,
    offset: u64,
) -> Result<Outcome> {
    let line = lines
        .line_at(file, offset)
        .map_err(|e| Error::io("read", path, e))?;
    Event::outcome_from_line(line).ok_or_else(|| {
        Error::Environment(format!(
            "{}: the journal line at byte {offset} is not an item_finished event",
            path.display(),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(id: &str, status: ItemStatus) -> Outcome {
        let mut o = Outcome::not_run(id, "t", "title", status, String::new());
        o.attempts = 1;
        o
    }

    #[test]
    fn an_items_events_are_found_by_its_name_whatever_its_characters() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("journal.jsonl");
        let mut j = Journal::open(&p).expect("open");
        let ids = [
            "a",
            "ab",
            "r1/audit",
            "q\"uote",
            "tab\there",
            "é ü",
            "back\\slash",
        ];
        for id in ids {
            j.append(&Event::ItemFinished(Box::new(outcome(
                id,
                ItemStatus::Completed,
            ))))
            .expect("append");
        }
        for id in ids {
            let found = events_of(&p, id).expect("read");
            assert_eq!(found.len(), 1, "{id}: {found:?}");
            assert!(is_of_item(&found[0], id), "{id}");
        }
        assert!(events_of(&p, "zz").expect("read").is_empty());
    }

    #[test]
    fn candidates_attempts_of_one_item_are_open_apart_and_old_lines_replay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("journal.jsonl");
        // Two candidates' first attempts, as `--best-of` writes them; one finished.
        let lines = [
            r#"{"v":1,"event":"attempt_started","id":"a","teammate":"1-a.c1","attempt":1,"pgid":11,"candidate":1}"#,
            r#"{"v":1,"event":"attempt_started","id":"a","teammate":"1-a.c2","attempt":1,"pgid":22,"candidate":2}"#,
            r#"{"v":1,"event":"attempt_finished","id":"a","teammate":"1-a.c1","attempt":1,"status":"completed","reason":"","retrying":false,"candidate":1}"#,
            // A line written before candidates existed.
            r#"{"v":1,"event":"attempt_started","id":"b","teammate":"2-b","attempt":1,"pgid":33}"#,
        ];
        std::fs::write(&p, lines.join("\n") + "\n").expect("write");
        let r = replay(&p).expect("replay");
        assert_eq!(
            r.unfinished_attempts(),
            vec![("a#2".to_string(), 22), ("b".to_string(), 33)],
            "candidate 2's attempt is still open: its process group is reaped"
        );
    }

    #[test]
    fn replay_finds_last_outcome_and_open_attempts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("journal.jsonl");
        let mut j = Journal::open(&p).expect("open");
        let started = crate::run::record::ledger_file::tests::started;
        j.append(&started("a", 1, 100)).expect("append");
        j.append(&Event::AttemptFinished {
            candidate: None,
            id: "a".into(),
            teammate: "t".into(),
            attempt: 1,
            verdict: crate::report::Verdict {
                status: ItemStatus::Failed,
                reason: "x".into(),
                kind: Some(crate::failure::FailureKind::AgentError),
                retry_after_s: None,
            },
            retrying: false,
            refused: false,
            spend: Spend {
                cost_usd: Some(0.5),
                ..Spend::default()
            },
            at: String::new(),
        })
        .expect("append");
        j.append(&Event::ItemFinished(Box::new(outcome(
            "a",
            ItemStatus::Failed,
        ))))
        .expect("append");
        j.append(&started("b", 1, 200)).expect("append");
        j.append(&Event::ItemFinished(Box::new(outcome(
            "a",
            ItemStatus::Completed,
        ))))
        .expect("append");
        drop(j);
        // A torn line from a crash is ignored, and the next append starts a fresh line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .and_then(|mut f| f.write_all(b"{\"v\":1,\"ev"))
            .expect("tear");
        let r = replay(&p).expect("replay");
        let a = r.ledger.get("a").expect("a finished");
        assert_eq!(a.status, ItemStatus::Completed);
        assert_eq!(r.unfinished_attempts(), vec![("b".to_string(), 200)]);
        assert_eq!(r.tallies.spent_of("a").cost_usd, Some(0.5));
        let f = File::open(&p).expect("open");
        assert_eq!(
            read_outcome(&mut LineReader::default(), &f, &p, a.offset, "a")
                .expect("read")
                .map(|o| o.status),
            Some(ItemStatus::Completed)
        );
        assert_eq!(
            read_outcome(&mut LineReader::default(), &f, &p, a.offset, "b").expect("read"),
            None,
            "another id's line is not its outcome"
        );
        let mut j = Journal::open(&p).expect("reopen");
        j.append(
            &Entry::ItemFinished {
                outcome: Box::new(outcome("b", ItemStatus::Completed)),
            }
            .as_event(),
        )
        .expect("append");
        let r = replay(&p).expect("replay");
        assert_eq!(r.ledger.outcomes(), 2);
    }

    /// A journal as runners before the one event vocabulary wrote it (fewer fields per line).
    const OLD_JOURNAL: &str = concat!(
        r#"{"v":1,"event":"run_started","at":"2026-11-30T10:00:00Z","pid":41,"team":"t"}"#,
        "\n",
        r#"{"v":1,"event":"attempt_started","id":"a","teammate":"1-a","attempt":1,"pgid":4242,"at":"2026-11-30T10:00:01Z"}"#,
        "\n",
        r#"{"v":1,"event":"attempt_finished","id":"a","attempt":1,"status":"completed","reason":"","at":"2026-11-30T10:00:02Z"}"#,
        "\n",
        r#"{"v":1,"event":"item_finished","outcome":{"id":"a","teammate":"1-a","title":"a","status":"completed","attempts":1,"exit_code":0,"duration_s":0.5,"started_at":"2026-11-30T10:00:01Z","finished_at":"2026-11-30T10:00:02Z","error":"","summary":"did a","log":"/w/a.log","prompt_hash":"00ff"}}"#,
        "\n",
        r#"{"v":1,"event":"attempt_started","id":"b","teammate":"2-b","attempt":2,"pgid":4343,"at":"2026-11-30T10:00:03Z"}"#,
        "\n",
        r#"{"v":1,"event":"run_finished","at":"2026-11-30T10:00:04Z","interrupted":true}"#,
        "\n",
    );

    #[test]
    fn a_line_reader_reads_each_line_whatever_the_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("lines");
        // Short lines, one longer than a window, and a last line without its newline.
        let mut lines: Vec<String> = (0..5000).map(|i| format!("line {i}")).collect();
        lines.insert(2500, "x".repeat(WINDOW * 2 + 17));
        let text = lines.join("\n");
        std::fs::write(&p, &text).expect("write");
        let mut offsets = Vec::new();
        let mut at = 0u64;
        for l in &lines {
            offsets.push(at);
            at += l.len() as u64 + 1;
        }
        let f = File::open(&p).expect("open");
        let mut r = LineReader::default();
        let order: Vec<usize> = (0..lines.len())
            .chain((0..lines.len()).rev())
            .chain((0..lines.len()).map(|i| (i * 7919) % lines.len()))
            .collect();
        for i in order {
            let got = r.line_at(&f, offsets[i]).expect("read");
            assert_eq!(got, lines[i].as_bytes(), "line {i}");
        }
    }

    #[test]
    fn a_recorded_hash_compares_as_the_text_it_was() {
        let h = RecordedHash::of("07f8a907b4ba2fb9");
        assert_eq!(h, RecordedHash::Packed(0x07f8_a907_b4ba_2fb9));
        assert!(h.is("07f8a907b4ba2fb9"));
        assert!(!h.is("07F8A907B4BA2FB9") && !h.is("7f8a907b4ba2fb9") && !h.is(""));
        let short = RecordedHash::of("00ff");
        assert!(short.is("00ff") && !short.is("00000000000000ff") && !short.is("00fe"));
        assert!(RecordedHash::of("").is("") && !RecordedHash::of("").is("0000000000000000"));
    }

    #[test]
    fn a_journal_written_by_an_older_runner_still_resumes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("journal.jsonl");
        std::fs::write(&p, OLD_JOURNAL).expect("write");
        let r = replay(&p).expect("replay");
        let a = r.ledger.get("a").expect("a finished");
        assert_eq!(
            (a.status, r.ledger.attempts_started("a"), a.content_hash),
            (ItemStatus::Completed, 1, RecordedHash::of("00ff"))
        );
        assert!(matches!(a.content_hash, RecordedHash::Text(_)));
        assert_eq!(r.unfinished_attempts(), vec![("b".to_string(), 4343)]);
        assert_eq!(r.ledger.attempts_started("b"), 2);
        let f = File::open(&p).expect("open");
        assert_eq!(
            read_outcome(&mut LineReader::default(), &f, &p, a.offset, "a")
                .expect("read")
                .map(|o| o.summary),
            Some("did a".to_string())
        );
        for line in OLD_JOURNAL.lines() {
            assert!(
                Event::from_line(line.as_bytes()).is_ok(),
                "an old line no longer reads: {line}"
            );
        }
    }
}
