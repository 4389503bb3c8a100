//! `ledger.bin`: a team's [`Replay`] as it stood at the end of its last run, beside
//! `journal.jsonl`, so that opening a team of a million items reads 24 bytes an item instead
//! of replaying every line (issue 26: a resume of a completed million-row run in ≤ 5 s).
//!
//! It is a cache, never the truth: it names the journal it describes — device, inode, size,
//! modification time, and a hash of its last 4 KiB — and is used only while the journal is
//! exactly that file. Any write since (a run killed before it wrote a new one, a `--merge`'s
//! outcome, a person's edit in place, a cut) changes its size or time, and a replaced
//! journal (`sed -i`, a copy back) has another inode: the journal is then replayed from its
//! first line, as it is when `ledger.bin` is missing, from another version or unreadable.
//! The runner writes it at the end of a run, and only when nobody else wrote to the journal
//! during the run.
//!
//! Layout, little-endian: the magic `RUNLEDG1` (it names the layout and [`key`]'s
//! function: a change of either is a new magic); eight `u64` — the journal's size, device,
//! inode, modification time (seconds, nanoseconds), FNV-1a of its last 4 KiB, the number of
//! entries, the length of the JSON trailer; the entries sorted by key, each `key, word,
//! content` ([`Account`]); the trailer, one JSON object with the [`Tallies`] and the
//! attempts still open.
//!
//! [`key`]: crate::run::record::ledger::key

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::run::record::journal::{Replay, Tallies, Waits};
use crate::run::record::ledger::{Account, Ledger};
use crate::run::record::outcome::Spend;

/// The file's name, beside the journal.
pub(crate) const FILE: &str = "ledger.bin";
const MAGIC: &[u8; 8] = b"RUNLEDG1";
/// How many of the covered bytes' last bytes are hashed.
const TAIL: u64 = 4096;

/// The path of the `ledger.bin` of the journal at `journal`.
pub(crate) fn path_of(journal: &Path) -> PathBuf {
    journal.with_file_name(FILE)
}

#[derive(Serialize, Deserialize, Default)]
struct Trailer {
    spent: Vec<(u64, Spend)>,
    waits: Vec<(u64, Waits)>,
    outcome_costs: Vec<(u64, f64)>,
    open: Vec<(String, u32, u32)>,
    #[serde(default)]
    outputs: Vec<OutputStamp>,
}

/// An output file as the run that wrote it left it (its path, file identity, size and
/// modification time, and a hash of its layout): a later run that records no new outcome
/// and finds the file so need not write it again (a resume with nothing left to do does
/// not rewrite a million rows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OutputStamp {
    /// The file.
    pub path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    /// A hash of what shapes its content besides the outcomes (its columns).
    pub layout: u64,
}

impl OutputStamp {
    /// The stamp of the file at `path` as it is now, of layout `layout`; `None` when it
    /// cannot be read.
    pub(crate) fn of(path: &Path, layout: u64) -> Option<OutputStamp> {
        let m = std::fs::metadata(path).ok()?;
        Some(OutputStamp {
            path: path.to_owned(),
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            layout,
        })
    }
}

/// FNV-1a of the last [`TAIL`] bytes of `file`'s first `len` bytes.
fn tail_hash(file: &File, len: u64) -> std::io::Result<u64> {
    let start = len.saturating_sub(TAIL);
    let mut buf = vec![0u8; (len - start) as usize];
    file.read_exact_at(&mut buf, start)?;
    let mut h = crate::hash::Fnv::default();
    h.update(&buf);
    Ok(h.value())
}

/// What the `ledger.bin` beside `journal` (open as `file`) says, if it still describes
/// that journal; [`Replay::read_to`] is where a replay goes on.
pub(crate) fn load(journal: &Path, file: &File) -> Option<Replay> {
    let path = path_of(journal);
    let found = File::open(&path).ok()?;
    match read(found, file) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(
                "{}: not read ({e}); the journal is replayed",
                path.display()
            );
            None
        }
    }
}

/// The bytes before the entries: the magic and eight words.
const HEADER: u64 = 8 + 8 * 8;

fn read(found: File, journal: &File) -> std::io::Result<Option<Replay>> {
    let size = found.metadata()?.len();
    let mut r = BufReader::with_capacity(1 << 16, found);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Ok(None);
    }
    let mut word = || -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        r.read_exact(&mut b)?;
        Ok(u64::from_le_bytes(b))
    };
    let (covered, dev, ino, secs, nanos, hash, entries, trailer_len) = (
        word()?,
        word()?,
        word()?,
        word()?,
        word()?,
        word()?,
        word()?,
        word()?,
    );
    // Its size is what its counts say (a damaged count is not believed, nor allocated for).
    let expected = entries
        .checked_mul(24)
        .and_then(|n| n.checked_add(HEADER))
        .and_then(|n| n.checked_add(trailer_len));
    if expected != Some(size) {
        return Ok(None);
    }
    let meta = journal.metadata()?;
    if (meta.dev(), meta.ino(), meta.len()) != (dev, ino, covered)
        || (meta.mtime() as u64, meta.mtime_nsec() as u64) != (secs, nanos)
        || tail_hash(journal, covered)? != hash
    {
        return Ok(None);
    }
    let mut ledger = Ledger::default();
    ledger.reserve(usize::try_from(entries).unwrap_or(0));
    let mut last = None;
    for _ in 0..entries {
        let mut e = [0u8; 24];
        r.read_exact(&mut e)?;
        let [k, w, c] = [0, 8, 16].map(|i| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&e[i..i + 8]);
            u64::from_le_bytes(b)
        });
        if last.is_some_and(|l| l >= k) {
            return Ok(None);
        }
        last = Some(k);
        ledger.restore_sorted(k, Account::from_words([w, c]));
    }
    ledger.compact();
    let mut json = vec![
        0u8;
        usize::try_from(trailer_len)
            .unwrap_or(usize::MAX)
            .min(1 << 30)
    ];
    r.read_exact(&mut json)?;
    let t: Trailer = serde_json::from_slice(&json).map_err(std::io::Error::other)?;
    Ok(Some(Replay {
        ledger,
        tallies: Tallies {
            spent: t.spent.into_iter().collect(),
            waits: t.waits.into_iter().collect(),
            outcome_costs: t.outcome_costs.into_iter().collect(),
        },
        open: t
            .open
            .into_iter()
            .map(|(id, attempt, pgid)| ((id, attempt), pgid))
            .collect::<BTreeMap<_, _>>(),
        read_to: covered,
        outputs: t.outputs,
    }))
}

/// Write the `ledger.bin` of `journal` (open as `file`), whose `covered` bytes are all it
/// holds: `ledger` (sorted first), `tallies`, the attempts still `open` and the `outputs`
/// the run left. Replaced atomically, mode 0600; not synced (a lost one is replayed
/// around).
///
/// Errors: the journal's metadata or bytes cannot be read, or the file cannot be written.
pub(crate) fn save(
    journal: &Path,
    file: &File,
    covered: u64,
    (ledger, tallies, open): (&Ledger, &Tallies, &BTreeMap<(String, u32), u32>),
    outputs: &[OutputStamp],
) -> Result<()> {
    let io = |e| crate::error::Error::io("read", journal, e);
    let meta = file.metadata().map_err(io)?;
    let hash = tail_hash(file, covered).map_err(io)?;
    let trailer = Trailer {
        spent: tallies.spent.iter().map(|(k, v)| (*k, *v)).collect(),
        waits: tallies.waits.iter().map(|(k, v)| (*k, *v)).collect(),
        outcome_costs: tallies
            .outcome_costs
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect(),
        open: open
            .iter()
            .map(|((id, attempt), pgid)| (id.clone(), *attempt, *pgid))
            .collect(),
        outputs: outputs.to_vec(),
    };
    let json = serde_json::to_vec(&trailer)
        .map_err(std::io::Error::other)
        .map_err(io)?;
    let entries = ledger.len() as u64;
    crate::fsutil::replace_cache(&path_of(journal), |w| {
        let mut w = BufWriter::with_capacity(1 << 16, w);
        w.write_all(MAGIC)?;
        for n in [
            covered,
            meta.dev(),
            meta.ino(),
            meta.mtime() as u64,
            meta.mtime_nsec() as u64,
            hash,
            entries,
            json.len() as u64,
        ] {
            w.write_all(&n.to_le_bytes())?;
        }
        ledger.with_entries(|all| {
            for (k, a) in all {
                let [word, content] = a.to_words();
                w.write_all(&k.to_le_bytes())?;
                w.write_all(&word.to_le_bytes())?;
                w.write_all(&content.to_le_bytes())?;
            }
            Ok::<(), std::io::Error>(())
        })?;
        w.write_all(&json)?;
        w.flush()
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::ItemStatus;
    use crate::run::events::Event;
    use crate::run::record::journal::{Journal, replay};
    use crate::run::record::outcome::Outcome;

    fn finished(id: &str, status: ItemStatus) -> Event {
        let mut o = Outcome::not_run(id, "t", "title", status, String::new());
        o.content_hash = crate::item::content_hash([id]);
        Event::ItemFinished(Box::new(o))
    }

    /// An `attempt_started` event of item `id` (teammate `t`), for journal tests.
    pub(crate) fn started(id: &str, attempt: u32, pgid: u32) -> Event {
        Event::AttemptStarted {
            candidate: None,
            id: id.into(),
            teammate: "t".into(),
            title: String::new(),
            attempt,
            pgid,
            at: String::new(),
        }
    }

    /// A journal of `n` finished items and one open attempt, and its `ledger.bin`.
    fn journal_with_ledger(dir: &Path, n: usize) -> PathBuf {
        let p = dir.join("journal.jsonl");
        let mut j = Journal::open(&p).expect("open");
        for i in 0..n {
            let id = format!("row-{i}");
            j.append(&started(&id, 1, 100)).expect("append");
            j.append(&Event::AttemptFinished {
                candidate: None,
                id: id.clone(),
                teammate: "t".into(),
                attempt: 1,
                verdict: crate::report::Verdict {
                    status: ItemStatus::Completed,
                    reason: String::new(),
                    kind: None,
                    retry_after_s: None,
                },
                retrying: false,
                refused: false,
                spend: Spend {
                    cost_usd: (i % 3 == 0).then_some(0.25),
                    ..Spend::default()
                },
                at: String::new(),
            })
            .expect("append");
            let status = if i % 7 == 0 {
                ItemStatus::Failed
            } else {
                ItemStatus::Completed
            };
            j.append(&finished(&id, status)).expect("append");
        }
        j.append(&started("open", 2, 4242)).expect("append");
        let r = replay(&p).expect("replay");
        assert!(!path_of(&p).exists());
        let file = File::open(&p).expect("open");
        save(&p, &file, r.read_to, (&r.ledger, &r.tallies, &r.open), &[]).expect("save");
        p
    }

    fn same(a: &Replay, b: &Replay) {
        let mut x: Vec<_> = a.ledger.with_entries(|e| e.collect());
        let mut y: Vec<_> = b.ledger.with_entries(|e| e.collect());
        x.sort_by_key(|e| e.0);
        y.sort_by_key(|e| e.0);
        assert_eq!(x, y);
        assert_eq!(a.tallies, b.tallies);
        assert_eq!(a.open, b.open);
        assert_eq!(a.read_to, b.read_to);
        assert_eq!(a.outputs, b.outputs);
    }

    #[test]
    fn a_replay_from_the_ledger_is_the_full_replay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = journal_with_ledger(dir.path(), 9000);
        let file = File::open(&p).expect("open");
        let loaded = load(&p, &file).expect("the ledger describes the journal");
        let full = {
            let moved = dir.path().join("ledger.moved");
            std::fs::rename(path_of(&p), &moved).expect("move");
            let r = replay(&p).expect("replay");
            std::fs::rename(&moved, path_of(&p)).expect("back");
            r
        };
        let mut full = full;
        full.outputs = loaded.outputs.clone();
        same(&loaded, &full);
        assert_eq!(loaded.tallies.cost(), (0.25 * 3000.0, 3000));
        assert_eq!(full.unfinished_attempts(), vec![("open".to_string(), 4242)]);
        // Lines appended after it: the journal is replayed (from its first line).
        let mut j = Journal::open(&p).expect("open");
        j.append(&finished("row-0", ItemStatus::Completed))
            .expect("append");
        j.append(&finished("late", ItemStatus::Blocked))
            .expect("append");
        let r = replay(&p).expect("replay");
        assert_eq!(
            r.ledger.get("row-0").map(|f| f.status),
            Some(ItemStatus::Completed)
        );
        assert_eq!(
            r.ledger.get("late").map(|f| f.status),
            Some(ItemStatus::Blocked)
        );
        assert_eq!(
            r.ledger.get("row-7").map(|f| f.status),
            Some(ItemStatus::Failed)
        );
        assert_eq!(r.read_to, std::fs::metadata(&p).expect("meta").len());
        assert!(load(&p, &File::open(&p).expect("open")).is_none());
    }

    #[test]
    fn a_journal_changed_under_its_ledger_is_replayed_from_its_first_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = journal_with_ledger(dir.path(), 50);
        let text = std::fs::read(&p).expect("read");
        let load_now = || load(&p, &File::open(&p).expect("open"));
        assert!(load_now().is_some());
        // A byte changed in place, far from the end (its size and tail unchanged): told by
        // the modification time, which moves on at the clock's tick (a few ms).
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut edited = text.clone();
        let at = 100;
        edited[at] = if edited[at] == b'x' { b'y' } else { b'x' };
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .and_then(|mut f| f.write_all(&edited))
            .expect("edit in place");
        assert!(load_now().is_none(), "a journal edited in place");
        // Replaced by a file of the same bytes (another inode): `sed -i`, a copy back.
        let copy = dir.path().join("copy");
        std::fs::write(&copy, &text).expect("copy");
        std::fs::rename(&copy, &p).expect("replace");
        assert!(load_now().is_none(), "a replaced journal");
        let other = tempfile::tempdir().expect("tempdir");
        let p = journal_with_ledger(other.path(), 50);
        let size = std::fs::metadata(&p).expect("meta").len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .and_then(|f| f.set_len(size - 10))
            .expect("cut");
        assert!(
            load(&p, &File::open(&p).expect("open")).is_none(),
            "a cut journal"
        );
    }

    #[test]
    fn a_damaged_ledger_is_not_used() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = journal_with_ledger(dir.path(), 50);
        let bin = std::fs::read(path_of(&p)).expect("read");
        let mut huge = bin.clone();
        // The entries' count (the seventh word) made enormous.
        huge[8 + 6 * 8..8 + 7 * 8].copy_from_slice(&u64::MAX.to_le_bytes());
        for broken in [
            huge,
            [bin.as_slice(), b"x"].concat(),
            bin[..bin.len() - 1].to_vec(),
            bin[..20].to_vec(),
            [b"RUNLEDG0".as_slice(), &bin[8..]].concat(),
            Vec::new(),
        ] {
            std::fs::write(path_of(&p), &broken).expect("write");
            assert!(load(&p, &File::open(&p).expect("open")).is_none());
            let r = replay(&p).expect("replay");
            assert_eq!(r.ledger.outcomes(), 50, "the journal is replayed");
        }
        // Entries out of order.
        let mut swapped = bin.clone();
        let first = HEADER as usize;
        let (a, b) = swapped[first..first + 48].split_at_mut(24);
        a.swap_with_slice(b);
        std::fs::write(path_of(&p), &swapped).expect("write");
        assert!(load(&p, &File::open(&p).expect("open")).is_none());
    }
}
