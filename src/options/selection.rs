//! The values that say which items of a batch a run covers: `--only failed|blocked|ID,...`,
//! `--shard K/N` and the item numbers of `resolve --select 2-4,6` (DESIGN §2, §8). Pure:
//! flags and ids in, decisions out.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::hash::Fnv;

/// `--only`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Only {
    /// Every item (no `--only`).
    All,
    /// Items the previous output shows neither completed nor blocked (a blocked item waits
    /// for a person: it runs again when named, or with `--only blocked`).
    Failed,
    /// Items the previous output shows blocked.
    Blocked,
    /// These ids.
    Ids(HashSet<String>),
}

impl Only {
    /// Parse `--only`.
    ///
    /// Errors: an empty list.
    pub(crate) fn parse(flag: Option<&str>) -> Result<Only> {
        match flag.map(str::trim) {
            None => Ok(Only::All),
            Some("failed") => Ok(Only::Failed),
            Some("blocked") => Ok(Only::Blocked),
            Some(list) => {
                let ids: HashSet<String> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                if ids.is_empty() {
                    return Err(Error::bad_value(
                        "--only",
                        list,
                        "needs `failed`, `blocked` or a comma list of ids",
                    ));
                }
                Ok(Only::Ids(ids))
            }
        }
    }
}

/// `path` with shard `k` of `n` in its name, before the extension (an output or a JUnit
/// report given with `--shard`, so that shards sharing a folder never share a file) (`out.csv` →
/// `out.shard-2-of-4.csv`); unchanged when it already names that shard.
pub(crate) fn shard_file(path: &Path, k: u32, n: u32) -> PathBuf {
    let tag = format!("shard-{k}-of-{n}");
    let name = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.contains(&tag) {
        return path.to_owned();
    }
    let stem = path
        .file_stem()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = match path.extension() {
        Some(ext) => format!("{stem}.{tag}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{tag}"),
    };
    path.with_file_name(file)
}

/// Most numbers one range of [`parse_numbers`] may name (an inbox holds tens of items; a
/// typo like `1-40000000` must not allocate gigabytes).
const RANGE_MAX: u32 = 10_000;

/// Parse a list of 1-based item numbers with ranges, as `--select 2-4,6` takes it: entries
/// separated by commas, each `N` or `N-M` (inclusive, N ≤ M; spaces around are ignored).
/// Returns the numbers sorted, without duplicates.
///
/// Errors (exit 2, naming `flag` and the value): an empty list or entry, a number that is
/// not a whole number above 0 (`0`, `a`, `a-`, `-3`), a range that runs backwards (`4-2`) or
/// names more than 10,000 numbers.
pub(crate) fn parse_numbers(flag: &str, text: &str) -> Result<Vec<u32>> {
    let bad = |why: String| {
        Error::bad_value(
            flag,
            text,
            format!(
                "is not a list of item numbers: {why}; give numbers and ranges, e.g. {flag} 2-4,6"
            ),
        )
    };
    let number = |n: &str| match n.trim().parse::<u32>() {
        Ok(v) if v > 0 => Ok(v),
        _ if n.trim().is_empty() => Err(bad("a range needs a number on each side".into())),
        _ => Err(bad(format!(
            "`{}` is not an item number (1, 2, ...)",
            n.trim()
        ))),
    };
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim) {
        if entry.is_empty() {
            return Err(bad("an entry is empty".into()));
        }
        let (lo, hi) = match entry.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(entry)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(bad(format!(
                "the range `{entry}` runs backwards; write {hi}-{lo}"
            )));
        }
        if hi - lo >= RANGE_MAX {
            return Err(bad(format!(
                "the range `{entry}` names more than {RANGE_MAX} items"
            )));
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `--shard K/N`: the K-th (1-based) of N slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shard {
    /// This slice, 1..=n.
    pub k: u32,
    /// Number of slices.
    pub n: u32,
}

impl Shard {
    /// Parse `--shard`: `K/N`, or `auto` with K = `JOB_COMPLETION_INDEX` + 1 (`index`) and N
    /// from `count`.
    ///
    /// Errors: malformed values, K outside 1..=N, `auto` without an index or a count.
    pub(crate) fn parse(
        flag: Option<&str>,
        count: Option<u32>,
        index: Option<&str>,
    ) -> Result<Option<Shard>> {
        let Some(text) = flag.map(str::trim) else {
            return Ok(None);
        };
        let (k, n) = if text == "auto" {
            let idx = index.ok_or_else(|| {
                Error::needs(
                    "--shard auto",
                    "JOB_COMPLETION_INDEX",
                    "a Kubernetes Indexed Job sets it; elsewhere give the slice as --shard K/N",
                )
            })?;
            let idx: u32 = idx.trim().parse().map_err(|_| {
                Error::bad_value("JOB_COMPLETION_INDEX", idx, "is not a whole number")
            })?;
            let n = count.ok_or_else(|| {
                Error::needs(
                    "--shard auto",
                    "the number of shards",
                    "give --shard-count N or set RUNNER_SHARD_COUNT",
                )
            })?;
            if idx >= n {
                return Err(Error::bad_value(
                    "JOB_COMPLETION_INDEX",
                    idx,
                    format!(
                        "(0-based) names shard {} of {n}; the job has more completions than --shard-count/RUNNER_SHARD_COUNT says",
                        idx + 1
                    ),
                ));
            }
            (idx + 1, n)
        } else {
            let parsed = text.split_once('/').and_then(|(k, n)| {
                Some((k.trim().parse::<u32>().ok()?, n.trim().parse::<u32>().ok()?))
            });
            parsed.ok_or_else(|| {
                Error::bad_value("--shard", text, "must be K/N, e.g. 2/4, or auto")
            })?
        };
        if n == 0 || k == 0 || k > n {
            return Err(Error::bad_value(
                "--shard",
                format!("{k}/{n}"),
                "must have K between 1 and N",
            ));
        }
        Ok(Some(Shard { k, n }))
    }

    /// Whether item `id` belongs to this shard: FNV-1a of the id, modulo N. The same id
    /// always lands in the same shard, whatever else is in the batch.
    pub(crate) fn contains(&self, id: &str) -> bool {
        shard_of(id, self.n) == self.k
    }
}

/// The 1-based shard of `id` among `n`.
pub(crate) fn shard_of(id: &str, n: u32) -> u32 {
    let mut h = Fnv::default();
    h.update(id.as_bytes());
    (h.value() % u64::from(n.max(1))) as u32 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_ids_for_every_n() {
        let ids: Vec<String> = (0..500).map(|i| format!("row-{i}")).collect();
        for n in 1..=7 {
            let mut seen = HashSet::new();
            for k in 1..=n {
                let s = Shard { k, n };
                for id in ids.iter().filter(|id| s.contains(id)) {
                    assert!(seen.insert(id.clone()), "{id} in two shards of {n}");
                }
            }
            assert_eq!(seen.len(), ids.len(), "every id in some shard of {n}");
        }
    }

    #[test]
    fn item_numbers_take_ranges_and_lists() {
        let p = |t: &str| parse_numbers("--select", t);
        assert_eq!(p("2-4,6").expect("ok"), vec![2, 3, 4, 6]);
        assert_eq!(p(" 6 , 1 - 2,2,3-3").expect("ok"), vec![1, 2, 3, 6]);
        for (bad, says) in [
            ("4-2", "runs backwards; write 2-4"),
            ("a-", "`a` is not an item number"),
            ("3-", "needs a number on each side"),
            ("-3", "needs a number on each side"),
            ("0", "`0` is not an item number"),
            ("1-b", "`b` is not an item number"),
            ("1,,2", "an entry is empty"),
            ("", "an entry is empty"),
            ("1-2-3", "`2-3` is not an item number"),
            ("1-99999", "more than 10000 items"),
        ] {
            let e = p(bad).expect_err(bad).to_string();
            assert!(
                e.contains(&format!("--select `{bad}`")) && e.contains(says),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn shard_flags() {
        assert_eq!(
            Shard::parse(Some("2/4"), None, None).expect("ok"),
            Some(Shard { k: 2, n: 4 })
        );
        assert_eq!(
            Shard::parse(Some("auto"), Some(3), Some("0")).expect("ok"),
            Some(Shard { k: 1, n: 3 })
        );
        assert!(Shard::parse(Some("5/4"), None, None).is_err());
        assert!(Shard::parse(Some("auto"), None, Some("1")).is_err());
        assert!(Shard::parse(Some("auto"), Some(2), None).is_err());
        let e = Shard::parse(Some("auto"), Some(2), Some("5")).expect_err("index 5 of 2");
        assert!(
            e.to_string()
                .contains("JOB_COMPLETION_INDEX `5` (0-based) names shard 6 of 2"),
            "{e}"
        );
        assert!(Shard::parse(Some("x"), None, None).is_err());
        assert_eq!(
            Only::parse(Some("a, b")).expect("ok"),
            Only::Ids(["a".to_string(), "b".to_string()].into())
        );
    }

    #[test]
    fn a_shards_output_file_carries_its_number() {
        let at = |p: &str| {
            shard_file(std::path::Path::new(p), 2, 4)
                .display()
                .to_string()
        };
        assert_eq!(at("out/res.csv"), "out/res.shard-2-of-4.csv");
        assert_eq!(at("res.jsonl"), "res.shard-2-of-4.jsonl");
        assert_eq!(at("res"), "res.shard-2-of-4");
        assert_eq!(at("res.shard-2-of-4.csv"), "res.shard-2-of-4.csv");
    }
}
