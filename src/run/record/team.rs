//! The team workspace (DESIGN §1): `team.json` (live snapshot, rewritten atomically and
//! debounced), `journal.jsonl` (append-only truth), `lock`, and `teammates/<name>/`.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::run::events::Event;
use crate::run::record::journal::{self, Journal, LineReader, Recordable, Replay};
use crate::run::record::ledger::Ledger;
use crate::run::record::ledger_file::{self, OutputStamp};
use crate::run::record::lock::{self, RunLock};

use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::now_rfc3339;
use crate::run::record::outcome::Outcome;
use crate::run::supervise::orphans;

/// An open team workspace, locked for this run.
pub(crate) struct Team {
    /// Team name.
    pub name: String,
    /// Workspace folder.
    pub dir: PathBuf,
    journal: Journal,
    /// Opened at the first [`Team::outcome`].
    reader: Option<OutcomeIndex>,
    /// What the journal records (earlier runs' and this one's): per item its last outcome
    /// and attempts ([`Replay::ledger`]), costs and waits, attempts still open.
    pub recorded: Replay,
    /// How many outcomes this run recorded.
    outcomes_recorded: u64,
    _lock: RunLock,
}

impl Team {
    /// Create or reopen the workspace `dir` (mode 0700), take its lock, replay its journal,
    /// and end processes an earlier, dead run left behind.
    ///
    /// Errors: [`Error::Io`] when the folder cannot be created, [`Error::LockHeld`] when another
    /// run holds the batch.
    pub(crate) fn open(name: &str, dir: &Path) -> Result<Team> {
        crate::fsutil::create_private_dir(dir)?;
        crate::fsutil::create_private_dir(&dir.join("teammates"))?;
        let lock = lock::acquire(dir)?;
        let journal_path = dir.join("journal.jsonl");
        let mut recorded = journal::replay(&journal_path)?;
        for (_, pgid) in recorded.unfinished_attempts() {
            orphans::reap(pgid, dir);
        }
        // An attempt killed before the journal knew it still started: the next is numbered
        // after it (its logs, if it wrote any, keep their names). Only the one attempt the
        // journal can have missed counts — the one after the last it knows — whatever
        // number a process claims in its environment.
        let mut missed = orphans::reap_workspace(dir);
        // Attempts whose processes are gone too (a process-tree kill): their folders say so.
        missed.extend(crate::run::record::folder::started_attempts(dir));
        missed.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        for (id, attempt) in missed {
            if attempt == recorded.ledger.attempts_started(&id) + 1 {
                recorded
                    .ledger
                    .started(crate::run::record::ledger::key(&id), attempt);
            }
        }
        let journal = Journal::open(&journal_path)?;
        Ok(Team {
            name: name.to_owned(),
            dir: dir.to_owned(),
            journal,
            reader: None,
            recorded,
            outcomes_recorded: 0,
            _lock: lock,
        })
    }

    /// Per item: its last outcome, attempts, and status in this run.
    pub(crate) fn ledger(&self) -> &Ledger {
        &self.recorded.ledger
    }

    /// What this run records, for outputs kept current while it goes on.
    pub(crate) fn view(&self) -> OutcomesView {
        OutcomesView {
            ledger: self.recorded.ledger.clone(),
            journal: self.journal.path().to_owned(),
        }
    }

    /// Append an event (or a [`journal::Entry`] standing for one) to the journal; an event that is
    /// not recorded ([`Event::Activity`]) is left out.
    ///
    /// Errors: the journal cannot be written.
    pub(crate) fn record(&mut self, what: &impl Recordable) -> Result<()> {
        let event = what.as_event();
        let Some((offset, _)) = self.journal.append(&event)? else {
            return Ok(());
        };
        self.recorded.apply(&event, offset)?;
        if let Event::ItemFinished(outcome) = event.as_ref() {
            self.recorded.ledger.set_now(&outcome.id, outcome.status);
            self.outcomes_recorded += 1;
        }
        Ok(())
    }

    /// fsync the journal.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.journal.sync()
    }

    /// The recorded outcome of item `id`, if it finished in this or an earlier run.
    ///
    /// Errors: the journal cannot be read, or its line is not an outcome.
    pub(crate) fn outcome(&mut self, id: &str) -> Result<Option<Outcome>> {
        let reader = match &mut self.reader {
            Some(r) => r,
            None => self.reader.insert(OutcomeIndex::over(&self.view())?),
        };
        reader.outcome(id)
    }

    /// The last outcomes, from earlier runs, of the team's items this run did not cover and
    /// that did not complete (at most `max`; in no particular order).
    ///
    /// Errors: the journal cannot be read, or a line the ledger points at is not an outcome.
    pub(crate) fn earlier_unfinished(&mut self, max: usize) -> Result<Vec<Outcome>> {
        let offsets = self.recorded.ledger.earlier_unfinished(max);
        if offsets.is_empty() {
            return Ok(Vec::new());
        }
        let reader = match &mut self.reader {
            Some(r) => r,
            None => self.reader.insert(OutcomeIndex::over(&self.view())?),
        };
        offsets
            .into_iter()
            .map(|at| reader.outcome_at(at))
            .collect()
    }

    /// End the run's writing: the journal is synced and closed, and what it recorded is
    /// handed over as a read-only [`OutcomeIndex`] for the sinks. The returned lock keeps
    /// the batch to this run until it is dropped (after the outputs are written); the
    /// returned [`Closing`] writes `ledger.bin` once the outputs are written.
    ///
    /// Errors: the journal cannot be synced or opened for reading.
    pub(crate) fn into_index(mut self) -> Result<(OutcomeIndex, RunLock, Closing)> {
        self.journal.sync()?;
        let path = self.journal.path().to_owned();
        let file = File::open(&path).map_err(|e| Error::io("read", &path, e))?;
        let cut = self.journal.was_cut();
        if cut {
            // The outputs come from what is left: read where each outcome is now.
            tracing::warn!(
                "{}: it was cut while the run went on; the outputs hold the outcomes it still records",
                path.display()
            );
            self.recorded = journal::replay(&path)?;
        }
        let closing = Closing {
            ledger: self.recorded.ledger.clone(),
            tallies: std::mem::take(&mut self.recorded.tallies),
            open: std::mem::take(&mut self.recorded.open),
            before: std::mem::take(&mut self.recorded.outputs),
            covered: self.journal.written_to(),
            // A journal someone else wrote to is replayed next time.
            cacheable: !cut && !self.journal.touched(),
            outcomes_recorded: self.outcomes_recorded,
            journal: path.clone(),
        };
        Ok((
            OutcomeIndex {
                ledger: self.recorded.ledger,
                file,
                lines: LineReader::default(),
                path,
            },
            self._lock,
            closing,
        ))
    }

    /// Record that this workspace belongs to `batch` (`batch.json`, replaced atomically),
    /// after checking again, under the lock, that it belongs to no other batch.
    ///
    /// Errors: it belongs to another batch (exit 2); the record cannot be written.
    pub(crate) fn claim(&self, batch: &BatchId) -> Result<()> {
        check_owner(&self.dir, batch)?;
        if recorded_batch(&self.dir)?.as_ref() == Some(batch) {
            return Ok(());
        }
        let mut bytes = serde_json::to_vec_pretty(batch)
            .map_err(|e| Error::Environment(format!("cannot encode {BATCH_FILE}: {e}")))?;
        bytes.push(b'\n');
        crate::fsutil::write_atomic(&self.dir.join(BATCH_FILE), &bytes)
    }

    /// Correct `team.json` for outcomes that changed after the run wrote it last
    /// ([`Snapshot::refinish`]; the merge queue's failures). Best effort: a snapshot that
    /// cannot be read is left as it is, since `runner status` catches up from the journal.
    ///
    /// Errors: it cannot be written.
    pub(crate) fn refinish_snapshot(&self, changed: &[Outcome]) -> Result<()> {
        let read = std::fs::read(self.dir.join("team.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Snapshot>(&b).ok());
        match read {
            Some(mut snapshot) if !changed.is_empty() => {
                changed.iter().for_each(|o| snapshot.refinish(o));
                self.write_snapshot(&snapshot)
            }
            _ => Ok(()),
        }
    }

    /// Replace `team.json` atomically with `snapshot`.
    pub(crate) fn write_snapshot(&self, snapshot: &Snapshot) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(snapshot)
            .map_err(|e| Error::Environment(format!("cannot encode team.json: {e}")))?;
        bytes.push(b'\n');
        crate::fsutil::write_atomic_fast(&self.dir.join("team.json"), &bytes)
    }
}

/// Which batch a workspace belongs to (DESIGN §1), recorded in its `batch.json`: the input
/// (a CSV file or a todo batch file, its real path) and the fingerprint of its content. A
/// workspace serves one batch: the same input, even edited (changed rows rerun), or the same
/// content moved to another path; any other batch is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BatchId {
    /// The input, for messages (lossy when its path is not UTF-8).
    pub input: String,
    /// A hash of the input's real path bytes: what identifies it.
    pub input_key: String,
    /// A hash of the batch's content (input, instruction, schema, id column); empty when the
    /// source has none.
    #[serde(default)]
    pub fingerprint: String,
    /// How the batch names its items: `column NAME` (`--id-column NAME`), `row number`, or
    /// `None` (a todo batch, or a workspace recorded before this was kept). A run that names
    /// them otherwise would see none of the recorded outcomes and redo every item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<String>,
}

impl BatchId {
    /// The batch read from `input` (resolved through `..` and symlinks) with `fingerprint`.
    pub(crate) fn new(input: &Path, fingerprint: String) -> BatchId {
        use std::os::unix::ffi::OsStrExt;
        let real = crate::fsutil::real_path(input);
        let mut key = crate::hash::Fnv::default();
        key.update(real.as_os_str().as_bytes());
        BatchId {
            input: real.display().to_string(),
            input_key: key.hex(),
            fingerprint,
            ids: None,
        }
    }

    /// The same batch, its items named by `id_column` (`None`: by row number).
    pub(crate) fn with_ids(self, id_column: Option<&str>) -> BatchId {
        BatchId {
            ids: Some(id_column.map_or("row number".into(), |c| format!("column {c}"))),
            ..self
        }
    }

    /// Whether a workspace recorded for `self` also serves `other`: the same input, or the
    /// same content under another name.
    fn serves(&self, other: &BatchId) -> bool {
        self.input_key == other.input_key
            || (!self.fingerprint.is_empty() && self.fingerprint == other.fingerprint)
    }
}

const BATCH_FILE: &str = "batch.json";

/// The batch recorded in workspace `dir`, if it records one.
///
/// Errors: `batch.json` is there but cannot be read or is not a batch record (exit 2).
pub(crate) fn recorded_batch(dir: &Path) -> Result<Option<BatchId>> {
    let path = dir.join(BATCH_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::read_input("the workspace's batch record", &path, e)),
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        Error::input_at(
            &path,
            None,
            format!("not a batch record ({e}); remove the workspace with `runner clean`, or choose another --output"),
        )
    })
}

/// Whether workspace `dir` recorded any item's outcome. One that never did (a batch of no
/// rows, a run stopped before any item ended) holds nothing to lose: another batch may take
/// it over.
fn holds_results(dir: &Path) -> bool {
    use std::io::BufRead;
    match File::open(dir.join("journal.jsonl")) {
        Ok(f) => std::io::BufReader::new(f)
            .lines()
            .map_while(std::result::Result::ok)
            .any(|l| l.contains("\"event\":\"item_finished\"")),
        // Unreadable: assume it does.
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// Check that workspace `dir` is free for `batch`: it does not exist, records no batch (an
/// older runner's), records this one, or holds no outcome yet. Reads only.
///
/// Errors: the workspace belongs to another batch, or this batch names its items otherwise
/// (exit 2, naming both and what to do).
pub(crate) fn check_owner(dir: &Path, batch: &BatchId) -> Result<()> {
    match recorded_batch(dir)? {
        Some(owner) if !owner.serves(batch) && holds_results(dir) => Err(Error::output_refused(
            None,
            dir,
            format!(
                "this workspace (and its output) belongs to {}, not to {}; choose another --output for this batch",
                owner.input, batch.input
            ),
        )),
        Some(BatchId { ids: Some(was), .. })
            if batch.ids.as_ref().is_some_and(|now| *now != was) && holds_results(dir) =>
        {
            let flag = was
                .strip_prefix("column ")
                .map_or("no --id-column".to_string(), |c| format!("--id-column {c}"));
            Err(Error::output_refused(
                None,
                dir,
                format!(
                    "this batch's items were named by {was}, and this run names them by {}: it would redo every item and replace their rows; give {flag} to go on, or choose another --output (or `runner clean`) to start over",
                    batch.ids.as_deref().unwrap_or_default()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// What a run has recorded so far, for outputs kept current while it goes on: the run's
/// own [`Ledger`] (a handle to it, only read through this) and its journal. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct OutcomesView {
    ledger: Ledger,
    journal: PathBuf,
}

/// What is left to do once a run's outputs are written: its `ledger.bin`
/// ([`crate::run::record::ledger_file`]), which names the outputs as they were left.
pub(crate) struct Closing {
    ledger: Ledger,
    tallies: journal::Tallies,
    open: BTreeMap<(String, u32), u32>,
    before: Vec<OutputStamp>,
    covered: u64,
    cacheable: bool,
    outcomes_recorded: u64,
    journal: PathBuf,
}

impl Closing {
    /// The outputs as the last run left them, when this run recorded no outcome: an output
    /// that is still exactly so is current (nothing it shows changed). `None` when this run
    /// recorded outcomes, or the journal was replayed from its first line.
    pub(crate) fn unchanged(&self) -> Option<&[OutputStamp]> {
        (self.outcomes_recorded == 0 && !self.before.is_empty()).then_some(&self.before[..])
    }

    /// Write `ledger.bin`, naming `outputs` as this run left them (unless someone else
    /// wrote to the journal during the run: it is replayed next time). A failure is only
    /// logged: the cache is not needed.
    pub(crate) fn finish(self, outputs: &[OutputStamp]) {
        if !self.cacheable {
            return;
        }
        let saved = File::open(&self.journal)
            .map_err(|e| Error::io("read", &self.journal, e))
            .and_then(|file| {
                ledger_file::save(
                    &self.journal,
                    &file,
                    self.covered,
                    (&self.ledger, &self.tallies, &self.open),
                    outputs,
                )
            });
        if let Err(e) = saved {
            tracing::debug!("{} not written: {e}", ledger_file::FILE);
        }
    }
}

/// The recorded outcomes by item id, read-only: each item's last outcome read back from its
/// journal line on request ([`OutcomeIndex::outcome`]). What sinks write their files from.
pub(crate) struct OutcomeIndex {
    ledger: Ledger,
    file: File,
    lines: LineReader,
    path: PathBuf,
}

impl OutcomeIndex {
    /// An index over what `view`'s run recorded: always as current as the run.
    ///
    /// Errors: the journal cannot be opened.
    pub(crate) fn over(view: &OutcomesView) -> Result<OutcomeIndex> {
        let path = view.journal.clone();
        let file = File::open(&path).map_err(|e| Error::io("read", &path, e))?;
        Ok(OutcomeIndex {
            ledger: view.ledger.clone(),
            file,
            lines: LineReader::default(),
            path,
        })
    }

    /// An index of the outcomes the journal at `path` records (a team no run holds now).
    ///
    /// Errors: the journal cannot be opened or read.
    pub(crate) fn of_journal(path: &Path) -> Result<OutcomeIndex> {
        let ledger = journal::replay(path)?.ledger;
        let file = File::open(path).map_err(|e| Error::io("read", path, e))?;
        Ok(OutcomeIndex {
            ledger,
            file,
            lines: LineReader::default(),
            path: path.to_owned(),
        })
    }

    /// An index of no outcomes (for sinks' tests).
    #[cfg(test)]
    pub(crate) fn empty() -> OutcomeIndex {
        OutcomeIndex {
            ledger: Ledger::default(),
            file: File::open("/dev/null").expect("/dev/null"),
            lines: LineReader::default(),
            path: PathBuf::from("/dev/null"),
        }
    }

    /// The outcome recorded in the journal line at byte `offset`, whichever item's it is.
    ///
    /// Errors: the journal cannot be read, or that line is not an outcome.
    pub(crate) fn outcome_at(&mut self, offset: u64) -> Result<Outcome> {
        journal::outcome_at(&mut self.lines, &self.file, &self.path, offset)
    }

    /// The last recorded outcome of item `id` (this run or an earlier one), if any.
    ///
    /// Errors: the journal cannot be read, or its line is not an outcome.
    pub(crate) fn outcome(&mut self, id: &str) -> Result<Option<Outcome>> {
        match self.ledger.get(id) {
            Some(at) => {
                journal::read_outcome(&mut self.lines, &self.file, &self.path, at.offset, id)
            }
            None => Ok(None),
        }
    }
}

/// One running teammate in `team.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunningEntry {
    /// Item id.
    pub id: String,
    /// Teammate.
    pub teammate: String,
    /// Title.
    pub title: String,
    /// Attempt number.
    pub attempt: u32,
    /// Process group id.
    pub pgid: u32,
    /// When the attempt started.
    pub started_at: String,
    /// The last line the agent printed (cleaned, trimmed).
    #[serde(default)]
    pub last_line: String,
    /// The last line the teammate wrote to its progress file ([`crate::progress`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<crate::progress::Progress>,
}

/// One finished item in `team.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FinishedEntry {
    /// Item id.
    pub id: String,
    /// Teammate.
    pub teammate: String,
    /// Title.
    pub title: String,
    /// Final status.
    pub status: ItemStatus,
    /// Attempts.
    pub attempts: u32,
    /// Seconds of the last attempt.
    pub duration_s: f64,
    /// Summary or reason.
    pub detail: String,
    /// Why it did not complete, as one word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_kind: Option<crate::failure::FailureKind>,
    /// Cost in USD, when the runner definition yields it.
    pub cost_usd: Option<f64>,
    /// Log path.
    pub log: String,
    /// A `--best-of` item's winner, the rule that chose it and how many candidates passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_of: Option<crate::report::best_of::Decided>,
}

impl FinishedEntry {
    /// The entry of outcome `o` (its summary as the detail when it completed, else its error).
    pub(crate) fn of(o: &Outcome) -> FinishedEntry {
        FinishedEntry {
            id: o.id.clone(),
            teammate: o.teammate.clone(),
            title: o.title.clone(),
            status: o.status,
            attempts: o.attempts,
            duration_s: o.duration_s,
            detail: if o.status == ItemStatus::Completed {
                o.summary.clone()
            } else {
                o.error.clone()
            },
            failure_kind: o.failure_kind,
            log: o.log.clone(),
            cost_usd: o.cost_usd,
            best_of: o.best_of.as_deref().map(|b| b.decided()),
        }
    }
}

/// An item waiting for its prerequisites in `team.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WaitingEntry {
    /// Item id.
    pub id: String,
    /// Teammate.
    pub teammate: String,
    /// Title.
    pub title: String,
    /// Ids it waits for.
    pub after: Vec<String>,
}

/// `team.json`: the live state of a team, for `runner status` and lead agents.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    /// Format version.
    pub v: u32,
    /// Team name.
    pub team: String,
    /// Workspace folder.
    pub workspace: String,
    /// `running`, `finished` or `interrupted` (`archived` when read from an archive).
    pub state: String,
    /// Runner pid.
    pub pid: u32,
    /// When this run started.
    pub started_at: String,
    /// When this snapshot was written.
    pub updated_at: String,
    /// Items in the batch when known.
    pub total: Option<u64>,
    /// Finished items per status.
    pub counts: BTreeMap<String, u64>,
    /// Sum of the known costs of finished items in this run, USD.
    pub cost_usd: Option<f64>,
    /// Teammates working now.
    pub running: Vec<RunningEntry>,
    /// Finished items, most recent last. Completed items beyond the most recent
    /// [`SNAPSHOT_COMPLETED_MAX`] are left out (they are in the journal and the output).
    pub finished: Vec<FinishedEntry>,
    /// Items waiting for prerequisites (at most [`SNAPSHOT_COMPLETED_MAX`]).
    #[serde(default)]
    pub waiting: Vec<WaitingEntry>,
    /// The team's gate: pauses, the adaptive limit, a stop, the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateSnapshot>,
    /// The command line of this run as the runner got it (its arguments, lossy UTF-8), from
    /// which `status --brief` derives the command that resumes ([`crate::run::record::resume`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The folder the run was started in (relative paths of `command` are from there).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cwd: String,
    /// Items an interrupted run never reached and no run ever finished (at most
    /// [`SNAPSHOT_COMPLETED_MAX`]), in input order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_started: Vec<PendingEntry>,
    /// With `--isolate worktree`: the repository of the team's worktrees and branches, and
    /// what they started from (read by `runner clean`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<crate::run::isolation::worktree::IsolationRecord>,
    /// With BATCH.md's `stages:`, their names in order (each row's chain, issue 33).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<String>,
    /// The team's items this run did not cover — left out by `--only` (a replay of what
    /// failed), ticked in a todo batch, gone from the input — counted by the status of their
    /// last outcome, from earlier runs; written as the run ends. With [`Snapshot::counts`]
    /// they are the team's state, which `runner status` shows (issue 56).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub earlier: BTreeMap<String, u64>,
    /// Those of [`Snapshot::earlier`] that did not complete, with their last outcome (at most
    /// [`SNAPSHOT_COMPLETED_MAX`]): `status --brief` lists them beside this run's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_unfinished: Vec<FinishedEntry>,
}

/// An item no run started, in `team.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PendingEntry {
    /// Item id.
    pub id: String,
    /// Title.
    pub title: String,
}

/// The gate's part of `team.json` ([`crate::schedule::gate`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GateSnapshot {
    /// Attempts allowed at once now (halved by rate limits, back up to `jobs`).
    pub limit: usize,
    /// `--jobs`.
    pub jobs: usize,
    /// Teammates waiting at the gate for their next attempt.
    pub waiting: usize,
    /// `rate limited until 14:03:10 UTC`, while paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<String>,
    /// Why the team starts no more items, once stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Cost spent so far, earlier runs included, USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_usd: Option<f64>,
    /// `--max-cost-usd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

/// How many completed items `team.json` lists at most.
pub(crate) const SNAPSHOT_COMPLETED_MAX: usize = 200;

/// Whether process `pid` is alive (its `/proc` entry exists).
pub(crate) fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether process `pid` is stopped (state `T` or `t` in `/proc/PID/stat`: SIGSTOP,
/// Ctrl-Z, a debugger).
pub(crate) fn stopped(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold anything.
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    matches!(state.and_then(|r| r.chars().next()), Some('T' | 't'))
}

impl Snapshot {
    /// Whether the team has items that did not complete: one finished otherwise (in this run
    /// or, not covered by it, in an earlier one), or the run is over (finished, interrupted, archived, its runner gone) with items never started.
    pub(crate) fn incomplete(&self) -> bool {
        let failed = self
            .counts
            .iter()
            .chain(&self.earlier)
            .any(|(st, n)| st != ItemStatus::Completed.as_str() && *n > 0);
        let finished: u64 = self.counts.values().sum();
        let over = self.state != "running" || !alive(self.pid);
        failed || (over && self.total.is_some_and(|t| finished < t))
    }

    /// Whether a runner is working on the team now.
    pub(crate) fn is_live(&self) -> bool {
        self.state == "running" && alive(self.pid)
    }

    /// A fresh snapshot for a run starting now, of `total` items when known, whose command
    /// line is `command_line` (program first; `runner mcp` gives the CLI command its tool call
    /// stands for), else the runner's own arguments.
    pub(crate) fn new(
        team: &Team,
        total: Option<u64>,
        command_line: Option<&[String]>,
    ) -> Snapshot {
        Snapshot {
            v: 1,
            team: team.name.clone(),
            workspace: team.dir.display().to_string(),
            state: "running".into(),
            pid: std::process::id(),
            started_at: now_rfc3339(),
            updated_at: now_rfc3339(),
            total,
            counts: BTreeMap::new(),
            cost_usd: None,
            running: Vec::new(),
            finished: Vec::new(),
            waiting: Vec::new(),
            gate: None,
            // Secrets given as `--var` (an API key header) stay out of team.json.
            command: match command_line {
                Some(argv) => crate::redact::command_line(argv.iter().cloned()),
                None => crate::redact::command_line(
                    std::env::args_os().map(|a| a.to_string_lossy().into_owned()),
                ),
            },
            cwd: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            not_started: Vec::new(),
            isolation: None,
            stages: Vec::new(),
            earlier: BTreeMap::new(),
            earlier_unfinished: Vec::new(),
        }
    }

    /// Record the team's items this run did not cover ([`Snapshot::earlier`],
    /// [`Snapshot::earlier_unfinished`]) from `team`'s journal, as the run ends. Best effort:
    /// a journal line that cannot be read back leaves the list empty (the counts stay).
    pub(crate) fn note_earlier(&mut self, team: &mut Team) {
        self.earlier = team.ledger().earlier_only();
        self.earlier_unfinished = match team.earlier_unfinished(SNAPSHOT_COMPLETED_MAX) {
            Ok(outcomes) => outcomes.iter().map(FinishedEntry::of).collect(),
            Err(e) => {
                tracing::warn!("cannot read back the earlier runs' outcomes: {e}");
                Vec::new()
            }
        };
    }

    /// The team's items by status: this run's ([`Snapshot::counts`]) and those it did not
    /// cover ([`Snapshot::earlier`]).
    pub(crate) fn team_counts(&self) -> BTreeMap<String, u64> {
        let mut team = self.counts.clone();
        for (st, n) in &self.earlier {
            *team.entry(st.clone()).or_default() += n;
        }
        team
    }

    /// Bring the snapshot of a runner that died (`kill -9`) up to what its journal recorded
    /// after the snapshot was written (team.json is rewritten at most every half second):
    /// the items that finished since count, and are not shown running. Best effort: a
    /// journal that cannot be read leaves the snapshot as it is.
    pub(crate) fn catch_up(&mut self, journal: &Path) {
        use std::io::BufRead;
        let Ok(file) = File::open(journal) else {
            return;
        };
        let Ok(written) = self.updated_at.parse::<jiff::Timestamp>() else {
            return;
        };
        // Recorded at most this long after it finished: an outcome older than the
        // snapshot by more is in it already.
        let slack = jiff::SignedDuration::from_secs(2);
        let mut this_run = false;
        let mut late = Vec::new();
        for line in std::io::BufReader::new(file)
            .split(b'\n')
            .map_while(std::io::Result::ok)
        {
            match Event::from_line(&line) {
                Ok(Event::RunStarted { pid, .. }) => {
                    this_run = pid == self.pid;
                    late.clear();
                }
                Ok(Event::ItemFinished(o)) if this_run => {
                    let recent = o
                        .finished_at
                        .parse::<jiff::Timestamp>()
                        .is_ok_and(|t| t >= written - slack);
                    if recent && !self.finished.iter().any(|f| f.id == o.id) {
                        late.push(o);
                    }
                }
                _ => {}
            }
        }
        for o in late {
            self.finish(&o);
        }
    }

    /// Replace what the snapshot says of item `o.id`, which finished before, by `o` (the
    /// merge queue or a review changed its outcome after the run): its count moves to its
    /// new status, its entry is `o`'s. An item the snapshot lists no longer (one of many
    /// completed) is counted anew.
    pub(crate) fn refinish(&mut self, o: &Outcome) {
        let Some(i) = self.finished.iter().position(|f| f.id == o.id) else {
            return self.finish(o);
        };
        let was = self.finished[i].status.to_string();
        if let Some(n) = self.counts.get_mut(&was) {
            *n = n.saturating_sub(1);
        }
        self.counts.retain(|_, n| *n > 0);
        *self.counts.entry(o.status.to_string()).or_default() += 1;
        self.finished[i] = FinishedEntry::of(o);
    }

    /// Record a finished item.
    pub(crate) fn finish(&mut self, o: &Outcome) {
        self.running.retain(|r| r.id != o.id);
        *self.counts.entry(o.status.to_string()).or_default() += 1;
        if let Some(c) = o.cost_usd {
            *self.cost_usd.get_or_insert(0.0) += c;
        }
        self.finished.push(FinishedEntry::of(o));
        let completed = self
            .finished
            .iter()
            .filter(|f| f.status == ItemStatus::Completed)
            .count();
        if completed > SNAPSHOT_COMPLETED_MAX
            && let Some(i) = self
                .finished
                .iter()
                .position(|f| f.status == ItemStatus::Completed)
        {
            self.finished.remove(i);
        }
    }
}
