//! The ledger: what a team's journal says about each item, held in memory for a whole run
//! in 24 bytes an item, so that a batch of a million rows fits in a few tens of MiB
//! (issue 26; `journal.jsonl` stays the truth, the ledger is what a replay of it leaves).
//!
//! Per item, keyed by [`key`] (FNV-1a of the id): where its last `item_finished` line is,
//! that outcome's status, content hash and whether it awaits its verify, the highest attempt
//! number started, and its status in the current run. Everything else about an outcome is
//! read back from its journal line when someone asks ([`crate::run::record::journal::read_outcome`],
//! which checks the line's id, so two ids with the same key never trade outcomes).

use std::collections::HashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::record::journal::{FinishedRef, RecordedHash};
use crate::run::record::outcome::Outcome;

/// An item's key in the ledger: FNV-1a (64 bits) of its id, its bits mixed (MurmurHash3's
/// 64-bit finaliser) so that ids that differ only in their last characters spread over the
/// whole range — the same on every machine and build, since `ledger.bin` keeps it.
pub(crate) fn key(id: &str) -> u64 {
    let mut k = crate::hash::fnv(id.as_bytes());
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// Hashes a [`key`] as itself: it is mixed already.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A hash map from [`key`]s.
pub(crate) type KeyMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// A map from [`key`]s to small `Copy` values that costs little more than the values: a
/// run sorted by key, plus a hash map of the keys added since its last merge, merged into
/// the run when it holds more than a sixteenth of it. Look-ups are a hash probe and a
/// search of the run, narrowed by a directory of where each key prefix starts (keys are
/// uniform, so a million keys leave about 15 to search: one or two cache misses rather
/// than twenty); each merge moves the run once (amortised, a few passes over the table).
#[derive(Debug, Clone)]
pub(crate) struct IdTable<V> {
    sorted: Vec<(u64, V)>,
    recent: KeyMap<V>,
    /// Where the keys whose top [`DIR_BITS`] bits are `p` start in `sorted`: `dir[p]`
    /// (`dir[p + 1]` where they end); empty while `sorted` is small or has grown since.
    dir: Vec<u32>,
}

impl<V> Default for IdTable<V> {
    fn default() -> IdTable<V> {
        IdTable {
            sorted: Vec::new(),
            recent: KeyMap::default(),
            dir: Vec::new(),
        }
    }
}

/// The key prefix the directory of an [`IdTable`] is by (256 KiB of directory).
const DIR_BITS: u32 = 16;
/// The fewest sorted keys a directory is built for.
const DIR_FROM: usize = 1 << 15;

/// Fewest recent keys before a merge: small tables stay a plain hash map.
const MERGE_AT_LEAST: usize = 4096;

impl<V: Copy> IdTable<V> {
    /// Where `key` is in the sorted run: within its prefix's stretch, from where a uniform
    /// key would be, walking to it (a step or two, in the same cache line or the next).
    fn find(&self, key: u64) -> Option<usize> {
        if self.dir.is_empty() {
            return self.sorted.binary_search_by_key(&key, |e| e.0).ok();
        }
        let p = (key >> (64 - DIR_BITS)) as usize;
        let (lo, hi) = (self.dir[p] as usize, self.dir[p + 1] as usize);
        if lo == hi {
            return None;
        }
        let rest = u128::from(key & ((1 << (64 - DIR_BITS)) - 1));
        let mut i = lo + ((rest * (hi - lo) as u128) >> (64 - DIR_BITS)) as usize;
        if self.sorted[i].0 < key {
            while i < hi && self.sorted[i].0 < key {
                i += 1;
            }
        } else {
            while i > lo && self.sorted[i - 1].0 >= key {
                i -= 1;
            }
        }
        (i < hi && self.sorted[i].0 == key).then_some(i)
    }

    /// Build the directory for the run as it is (none for a small one).
    fn index(&mut self) {
        self.dir.clear();
        if self.sorted.len() < DIR_FROM || u32::try_from(self.sorted.len()).is_err() {
            return;
        }
        self.dir.reserve_exact((1 << DIR_BITS) + 1);
        let mut at = 0usize;
        for p in 0..=(1u64 << DIR_BITS) {
            while at < self.sorted.len() && (self.sorted[at].0 >> (64 - DIR_BITS)) < p {
                at += 1;
            }
            self.dir.push(at as u32);
        }
    }

    /// The value under `key`.
    pub(crate) fn get(&self, key: u64) -> Option<V> {
        if let Some(v) = self.recent.get(&key) {
            return Some(*v);
        }
        self.find(key).map(|i| self.sorted[i].1)
    }

    /// Set the value under `key` to `f` of the value there now.
    pub(crate) fn update(&mut self, key: u64, f: impl FnOnce(Option<V>) -> V) {
        if let Some(i) = self.find(key) {
            self.sorted[i].1 = f(Some(self.sorted[i].1));
            return;
        }
        match self.recent.entry(key) {
            MapEntry::Occupied(mut o) => {
                let v = f(Some(*o.get()));
                *o.get_mut() = v;
            }
            MapEntry::Vacant(v) => {
                v.insert(f(None));
                if self.recent.len() > MERGE_AT_LEAST.max(self.sorted.len() / 16) {
                    self.merge();
                }
            }
        }
    }

    /// Change the value under `key` in place, if there is one.
    pub(crate) fn update_existing(&mut self, key: u64, f: impl FnOnce(&mut V)) {
        if let Some(v) = self.recent.get_mut(&key) {
            f(v);
        } else if let Some(i) = self.find(key) {
            f(&mut self.sorted[i].1);
        }
    }

    /// How many keys it holds.
    pub(crate) fn len(&self) -> usize {
        self.sorted.len() + self.recent.len()
    }

    /// Every key and value, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, V)> + '_ {
        self.sorted
            .iter()
            .copied()
            .chain(self.recent.iter().map(|(k, v)| (*k, *v)))
    }

    /// Room for `more` keys in the sorted run (pages not yet written cost no memory).
    pub(crate) fn reserve(&mut self, more: usize) {
        self.sorted.reserve(more);
    }

    /// Add `key`, greater than every key in the table, to the sorted run (for a table read
    /// back in key order).
    /// [`IdTable::compact`] when done.
    pub(crate) fn push_sorted(&mut self, key: u64, value: V) {
        debug_assert!(self.recent.is_empty() && self.sorted.last().is_none_or(|l| l.0 < key));
        self.dir.clear();
        self.sorted.push((key, value));
    }

    /// Merge every key into the sorted run: [`IdTable::iter`] then gives them in key order.
    pub(crate) fn compact(&mut self) {
        if !self.recent.is_empty() {
            self.merge();
        } else if self.dir.is_empty() {
            self.index();
        }
    }

    /// Move the recent keys into the sorted run, merging from the back in place.
    fn merge(&mut self) {
        let mut tail: Vec<(u64, V)> = self.recent.drain().collect();
        self.recent.shrink_to(MERGE_AT_LEAST);
        tail.sort_unstable_by_key(|e| e.0);
        let old = self.sorted.len();
        let Some(&filler) = tail.first() else { return };
        self.dir.clear();
        self.sorted.resize(old + tail.len(), filler);
        let (mut i, mut j, mut k) = (old, tail.len(), old + tail.len());
        while j > 0 {
            k -= 1;
            if i > 0 && self.sorted[i - 1].0 > tail[j - 1].0 {
                self.sorted[k] = self.sorted[i - 1];
                i -= 1;
            } else {
                self.sorted[k] = tail[j - 1];
                j -= 1;
            }
        }
        self.index();
    }
}

/// One item's entry in the [`Ledger`], packed into two words. `word`: bits 0–39 the byte
/// offset of its last `item_finished` line; 40–53 the highest attempt number started
/// (saturating at 16383); 54–56 that outcome's status (0: none); 57–59 its status in this
/// run (0: none); 60 the outcome awaits its verify; 61 `content` is a hash of a content hash
/// an older runner wrote in another form ([`RecordedHash::Text`]). `content`: the
/// outcome's content hash.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Account {
    word: u64,
    content: u64,
}

const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
const ATTEMPTS_SHIFT: u32 = 40;
const ATTEMPTS_MAX: u32 = (1 << 14) - 1;
const STATUS_SHIFT: u32 = 54;
const NOW_SHIFT: u32 = 57;
const AWAITING_VERIFY: u64 = 1 << 60;
const TEXT_HASH: u64 = 1 << 61;

fn status_code(s: ItemStatus) -> u64 {
    ItemStatus::ALL
        .iter()
        .position(|x| *x == s)
        .map_or(0, |i| i as u64 + 1)
}

fn status_of(code: u64) -> Option<ItemStatus> {
    let i = usize::try_from(code & 0b111).ok()?.checked_sub(1)?;
    ItemStatus::ALL.get(i).copied()
}

impl Account {
    fn field(&self, shift: u32, bits: u32) -> u64 {
        (self.word >> shift) & ((1 << bits) - 1)
    }

    fn set_field(&mut self, shift: u32, bits: u32, value: u64) {
        let mask = ((1u64 << bits) - 1) << shift;
        self.word = (self.word & !mask) | ((value << shift) & mask);
    }

    /// Its last outcome, if it has one.
    pub(crate) fn finished(&self) -> Option<FinishedRef> {
        let status = status_of(self.field(STATUS_SHIFT, 3))?;
        Some(FinishedRef {
            offset: self.word & OFFSET_MASK,
            status,
            content_hash: if self.word & TEXT_HASH != 0 {
                RecordedHash::Text(self.content)
            } else {
                RecordedHash::Packed(self.content)
            },
            awaiting_verify: self.word & AWAITING_VERIFY != 0,
        })
    }

    /// The highest attempt number started (0: none).
    pub(crate) fn attempts_started(&self) -> u32 {
        self.field(ATTEMPTS_SHIFT, 14) as u32
    }

    /// Its status in this run, if it finished (or was found completed) in it.
    pub(crate) fn now(&self) -> Option<ItemStatus> {
        status_of(self.field(NOW_SHIFT, 3))
    }

    /// The two words as `ledger.bin` stores them (without this run's status).
    pub(crate) fn to_words(self) -> [u64; 2] {
        let mut a = self;
        a.set_field(NOW_SHIFT, 3, 0);
        [a.word, a.content]
    }

    /// An entry from [`Account::to_words`]' words.
    pub(crate) fn from_words(words: [u64; 2]) -> Account {
        Account {
            word: words[0],
            content: words[1],
        }
    }
}

/// What the journal says about every item, by [`key`] (see the module documentation).
///
/// A handle: its clones share one table, so that an output kept current while the run goes
/// on reads the run's own ledger (through [`crate::run::record::team::OutcomesView`])
/// instead of keeping a second index of the journal. Each call takes the table's lock for
/// that call only.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ledger {
    table: Arc<RwLock<IdTable<Account>>>,
}

impl Ledger {
    fn read(&self) -> RwLockReadGuard<'_, IdTable<Account>> {
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, IdTable<Account>> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entry of item `id`.
    pub(crate) fn account(&self, id: &str) -> Option<Account> {
        self.read().get(key(id))
    }

    /// Where item `id`'s last outcome is, with its key facts.
    pub(crate) fn get(&self, id: &str) -> Option<FinishedRef> {
        self.account(id)?.finished()
    }

    /// Note `outcome`, whose `item_finished` line starts at byte `offset`, as its item's last.
    ///
    /// Errors: the offset is past 1 TiB, which the entry cannot hold.
    pub(crate) fn finished(&mut self, outcome: &Outcome, offset: u64) -> Result<()> {
        if offset > OFFSET_MASK {
            return Err(Error::Environment(format!(
                "the journal is larger than 1 TiB (an outcome at byte {offset}); start a new team with --team"
            )));
        }
        let hash = RecordedHash::of(&outcome.content_hash);
        self.write().update(key(&outcome.id), |was| {
            let mut a = was.unwrap_or_default();
            a.word = (a.word & !(OFFSET_MASK | AWAITING_VERIFY | TEXT_HASH)) | offset;
            a.set_field(STATUS_SHIFT, 3, status_code(outcome.status));
            if outcome.awaiting_verify {
                a.word |= AWAITING_VERIFY;
            }
            a.content = match hash {
                RecordedHash::Packed(n) => n,
                RecordedHash::Text(n) => {
                    a.word |= TEXT_HASH;
                    n
                }
            };
            a
        });
        Ok(())
    }

    /// Note that attempt `attempt` of item `key` started (the highest number is kept).
    pub(crate) fn started(&mut self, key: u64, attempt: u32) {
        self.write().update(key, |was| {
            let mut a = was.unwrap_or_default();
            let n = a.attempts_started().max(attempt.min(ATTEMPTS_MAX));
            a.set_field(ATTEMPTS_SHIFT, 14, u64::from(n));
            a
        });
    }

    /// The highest attempt number of item `id` started in any run (0: none).
    pub(crate) fn attempts_started(&self, id: &str) -> u32 {
        self.account(id).map_or(0, |a| a.attempts_started())
    }

    /// Note item `id`'s status in this run: it finished in it, or was found completed.
    pub(crate) fn set_now(&mut self, id: &str, status: ItemStatus) {
        self.write().update(key(id), |was| {
            let mut a = was.unwrap_or_default();
            a.set_field(NOW_SHIFT, 3, status_code(status));
            a
        });
    }

    /// Whether `item` completed in an earlier run as it is now ([`FinishedRef::resumes`]);
    /// if so it counts as completed in this run too ([`Ledger::set_now`]). One look-up.
    pub(crate) fn resume(&mut self, item: &crate::item::WorkItem) -> bool {
        let mut done = false;
        self.write().update_existing(key(&item.id), |a| {
            done = a.finished().is_some_and(|f| f.resumes(item));
            if done {
                a.set_field(NOW_SHIFT, 3, status_code(ItemStatus::Completed));
            }
        });
        done
    }

    /// Item `id`'s status in this run ([`Ledger::set_now`]).
    pub(crate) fn now(&self, id: &str) -> Option<ItemStatus> {
        self.account(id)?.now()
    }

    /// The items whose last outcome is from an earlier run and that have none in this one
    /// (this run left them out, or has not reached them), counted by that outcome's status
    /// (`completed`, `blocked`, …; only those with items).
    pub(crate) fn earlier_only(&self) -> std::collections::BTreeMap<String, u64> {
        let mut counts = std::collections::BTreeMap::new();
        for (_, a) in self.read().iter() {
            if let (Some(f), None) = (a.finished(), a.now()) {
                *counts.entry(f.status.to_string()).or_default() += 1;
            }
        }
        counts
    }

    /// Where the journal holds the last outcomes of the items [`Ledger::earlier_only`] counts
    /// that did not complete (byte offsets of their lines), at most `max`.
    pub(crate) fn earlier_unfinished(&self, max: usize) -> Vec<u64> {
        self.read()
            .iter()
            .filter_map(|(_, a)| match (a.finished(), a.now()) {
                (Some(f), None) if f.status != ItemStatus::Completed => Some(f.offset),
                _ => None,
            })
            .take(max)
            .collect()
    }

    /// Whether any item's last outcome is `completed`.
    pub(crate) fn any_completed(&self) -> bool {
        self.read().iter().any(|(_, a)| {
            a.finished()
                .is_some_and(|f| f.status == ItemStatus::Completed)
        })
    }

    /// How many items have an outcome.
    #[cfg(test)]
    pub(crate) fn outcomes(&self) -> usize {
        self.read()
            .iter()
            .filter(|(_, a)| a.finished().is_some())
            .count()
    }

    /// Call `f` with every entry, in key order (for `ledger.bin`; the table is compacted
    /// first and held still meanwhile).
    pub(crate) fn with_entries<R>(
        &self,
        f: impl FnOnce(&mut dyn Iterator<Item = (u64, Account)>) -> R,
    ) -> R {
        let mut table = self.write();
        table.compact();
        f(&mut table.iter())
    }

    /// How many items it has an entry for.
    pub(crate) fn len(&self) -> usize {
        self.read().len()
    }

    /// Room for `more` items.
    pub(crate) fn reserve(&mut self, more: usize) {
        self.write().reserve(more);
    }

    /// Put back an entry [`Ledger::with_entries`] gave, in its order: each key greater than
    /// the one before; [`Ledger::compact`] when done.
    pub(crate) fn restore_sorted(&mut self, key: u64, account: Account) {
        self.write().push_sorted(key, account);
    }

    /// Merge and index the table.
    pub(crate) fn compact(&mut self) {
        self.write().compact();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_table_keeps_every_key_through_its_merges() {
        let mut t: IdTable<u64> = IdTable::default();
        let n = 120_000u64;
        // Keys in no order, each set and then updated once.
        for i in 0..n {
            t.update(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), |_| i);
        }
        for i in (0..n).step_by(3) {
            t.update(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), |v| {
                v.unwrap_or(0) + n
            });
        }
        assert_eq!(t.len(), n as usize);
        assert!(
            t.recent.len() < t.sorted.len(),
            "merged into the sorted run"
        );
        for i in 0..n {
            let want = if i % 3 == 0 { i + n } else { i };
            assert_eq!(
                t.get(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                Some(want),
                "key {i}"
            );
        }
        assert_eq!(t.get(7), None);
        assert!(t.sorted.windows(2).all(|w| w[0].0 < w[1].0));
        // A table read back in order finds every key too, once compacted.
        let mut back: IdTable<u64> = IdTable::default();
        t.compact();
        for (k, v) in t.iter() {
            back.push_sorted(k, v);
        }
        back.compact();
        assert!(!back.dir.is_empty());
        for (k, v) in t.iter() {
            assert_eq!(back.get(k), Some(v));
        }
    }

    fn outcome(id: &str, status: ItemStatus, hash: &str) -> Outcome {
        let mut o = Outcome::not_run(id, "t", "title", status, String::new());
        o.content_hash = hash.into();
        o
    }

    #[test]
    fn an_entry_packs_what_a_resume_needs() {
        let mut l = Ledger::default();
        l.started(key("a"), 3);
        l.started(key("a"), 2);
        assert_eq!(l.get("a"), None, "started, not finished");
        let mut o = outcome("a", ItemStatus::TimedOut, "07f8a907b4ba2fb9");
        o.awaiting_verify = true;
        l.finished(&o, (1 << 40) - 1).expect("fits");
        let f = l.get("a").expect("finished");
        assert_eq!(
            (f.offset, f.status, f.awaiting_verify),
            ((1 << 40) - 1, ItemStatus::TimedOut, true)
        );
        assert!(f.content_hash.is("07f8a907b4ba2fb9"));
        assert_eq!(l.attempts_started("a"), 3);
        assert_eq!(l.now("a"), None);
        l.set_now("a", ItemStatus::Completed);
        assert_eq!(l.now("a"), Some(ItemStatus::Completed));
        // A later outcome replaces the earlier one; the attempts and this run's status stay.
        l.finished(&outcome("a", ItemStatus::Completed, "00ff"), 17)
            .expect("fits");
        let f = l.get("a").expect("finished");
        assert_eq!(
            (f.offset, f.status, f.awaiting_verify),
            (17, ItemStatus::Completed, false)
        );
        assert!(f.content_hash.is("00ff") && !f.content_hash.is("00000000000000ff"));
        assert_eq!(
            (l.attempts_started("a"), l.now("a")),
            (3, Some(ItemStatus::Completed))
        );
        l.started(key("a"), u32::MAX);
        assert_eq!(l.attempts_started("a"), ATTEMPTS_MAX, "saturates");
        assert!(l.finished(&o, 1 << 40).is_err(), "past 1 TiB");
        // ledger.bin keeps everything but this run's status.
        let (k, a) = l.with_entries(|e| e.next()).expect("one");
        let back = Account::from_words(a.to_words());
        assert_eq!(
            (k, back.finished(), back.now()),
            (key("a"), a.finished(), None)
        );
        for s in ItemStatus::ALL {
            assert_eq!(status_of(status_code(s)), Some(s));
        }
    }
}
