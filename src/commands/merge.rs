//! `runner merge A.csv B.csv ... -o OUT`: join the outputs of `runner batch --shard K/N`
//! into one output in input order (DESIGN §8). Each shard's sidecar (`<output>.shard.json`)
//! says which batch and shard it is; mixed batches, missing or repeated shards, and rows
//! that two shards report differently are refused (exit 2) and nothing is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cli::MergeArgs;
use crate::error::{Error, Result};
use crate::sink::output_csv;
use crate::sink::shard_meta::ShardMeta;

struct ShardFile {
    path: PathBuf,
    meta: ShardMeta,
    bytes: Vec<u8>,
    header_end: usize,
    /// (start, end) of each record.
    records: Vec<(usize, usize)>,
}

fn load(path: &Path) -> Result<ShardFile> {
    let meta = ShardMeta::read(path)?;
    let bytes = std::fs::read(path).map_err(|e| Error::read_input("the shard output", path, e))?;
    let raw = output_csv::raw_records(&bytes)
        .map_err(|(line, e)| Error::input_at(path, line, format!("not a CSV output: {e}")))?;
    let header_end = raw.header_end;
    let records: Vec<(usize, usize)> = raw.records.iter().map(|(_, s, e)| (*s, *e)).collect();
    if records.len() != meta.rows.len() {
        return Err(Error::input_at(
            path,
            None,
            format!(
                "holds {} rows but its sidecar lists {}; was it edited after the run?",
                records.len(),
                meta.rows.len()
            ),
        ));
    }
    Ok(ShardFile {
        path: path.to_owned(),
        meta,
        bytes,
        header_end,
        records,
    })
}

/// `runner merge`.
pub(crate) fn merge(args: MergeArgs) -> Result<i32> {
    check_outputs(&args)?;
    let shards: Vec<ShardFile> = args.inputs.iter().map(|p| load(p)).collect::<Result<_>>()?;
    let Some(first) = shards.first() else {
        return Err(no_inputs());
    };
    let n = first.meta.n;
    let given = check_shards(&shards)?;
    let rows = rows(&shards)?;
    let header = &first.bytes[..first.header_end];
    // An existing file is replaced only when it is an output of this batch (an earlier merge):
    // a merge never lands on the batch's input or anything else by a slip of `-o`.
    crate::fsutil::check_replaceable(
        &args.output,
        "-o",
        "an output of this batch (its header differs)",
        |b| b.starts_with(header),
    )?;
    crate::fsutil::make_parent(&args.output)?;
    crate::fsutil::replace_with(&args.output, |w| {
        w.write_all(header)?;
        for (bytes, _) in rows.values() {
            w.write_all(bytes)?;
            if !bytes.ends_with(b"\n") {
                w.write_all(b"\n")?;
            }
        }
        Ok(())
    })?;
    crate::ui::outln(format_args!(
        "Merged {given} shard(s) of {n}: {} row(s) into {}",
        rows.len(),
        args.output.display()
    ));
    if let Some(path) = &args.junit {
        write_junit(path, &args.output, first, &rows)?;
    }
    Ok(0)
}

/// Merging without shards to merge is refused (exit 2).
fn no_inputs() -> Error {
    Error::needs(
        "runner merge",
        "the shard outputs to merge",
        "give them, e.g. `runner merge out/*.csv -o workers-output.csv`",
    )
}

/// Before any shard is read: there are shards, `-o` is none of them nor their sidecars,
/// and `--junit` is neither the merged output nor a shard and replaces only a JUnit report.
fn check_outputs(args: &MergeArgs) -> Result<()> {
    if args.inputs.is_empty() {
        return Err(no_inputs());
    }
    let sidecars: Vec<std::path::PathBuf> = args
        .inputs
        .iter()
        .map(|p| crate::sink::shard_meta::path_for(p))
        .collect();
    if let Some(p) = args
        .inputs
        .iter()
        .chain(&sidecars)
        .find(|p| crate::fsutil::same_file(p, &args.output))
    {
        return Err(Error::output_refused(
            Some("-o"),
            &args.output,
            format!(
                "the merged output would overwrite the shard {}; choose another file",
                p.display()
            ),
        ));
    }
    crate::fsutil::check_parents(&[
        (Some(&args.output), "-o"),
        (args.junit.as_deref(), "--junit"),
    ])?;
    if let Some(j) = &args.junit {
        if crate::fsutil::same_file(j, &args.output)
            || args.inputs.iter().any(|p| crate::fsutil::same_file(p, j))
        {
            return Err(Error::output_refused(
                Some("--junit"),
                j,
                "that is the merged output or a shard; choose another file",
            ));
        }
        crate::fsutil::check_replaceable(
            j,
            "--junit",
            "a JUnit report",
            crate::sink::junit::is_junit,
        )?;
    }
    Ok(())
}

/// The shards are of one batch, split the same way, with the same columns; a shard given
/// twice has the same results each time; none is missing. Returns how many shards were
/// given (each counted once).
fn check_shards(shards: &[ShardFile]) -> Result<usize> {
    let Some(first) = shards.first() else {
        return Err(no_inputs());
    };
    for s in &shards[1..] {
        if s.meta.fingerprint != first.meta.fingerprint {
            return Err(Error::input_at(
                &s.path,
                None,
                format!(
                    "belongs to another batch than {} (input, instruction or schema differ); merge only the shards of one batch",
                    first.path.display()
                ),
            ));
        }
        if s.meta.n != first.meta.n {
            return Err(Error::input_at(
                &s.path,
                None,
                format!(
                    "is shard {}/{} but {} is shard {}/{}; all shards must split the batch the same way",
                    s.meta.k,
                    s.meta.n,
                    first.path.display(),
                    first.meta.k,
                    first.meta.n
                ),
            ));
        }
        if s.bytes[..s.header_end] != first.bytes[..first.header_end] {
            return Err(Error::input_at(
                &s.path,
                None,
                format!("its columns differ from {}", first.path.display()),
            ));
        }
    }
    let n = first.meta.n;
    let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, s) in shards.iter().enumerate() {
        if let Some(&j) = seen.get(&s.meta.k) {
            if shards[j].bytes != s.bytes {
                return Err(Error::input_at(
                    &s.path,
                    None,
                    format!(
                        "shard {}/{n} is given twice with different results: here and in {}",
                        s.meta.k,
                        shards[j].path.display()
                    ),
                ));
            }
            continue;
        }
        seen.insert(s.meta.k, i);
    }
    let missing: Vec<String> = (1..=n)
        .filter(|k| !seen.contains_key(k))
        .map(|k| k.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(Error::needs(
            "runner merge",
            "the output of every shard",
            format!("missing shard(s) {} of {n}", missing.join(", ")),
        ));
    }
    Ok(seen.len())
}

/// The shards' rows by input row number, each with the shard it came from; a row reported
/// by two shards must be byte-identical.
fn rows(shards: &[ShardFile]) -> Result<BTreeMap<u64, (&[u8], &Path)>> {
    let mut rows: BTreeMap<u64, (&[u8], &Path)> = BTreeMap::new();
    for s in shards {
        for (number, (start, end)) in s.meta.rows.iter().zip(&s.records) {
            let bytes = &s.bytes[*start..*end];
            if let Some((prev, prev_path)) = rows.insert(*number, (bytes, &s.path))
                && prev != bytes
            {
                return Err(Error::input_at(
                    &s.path,
                    None,
                    format!(
                        "input row {number} is also in {}, with different results",
                        prev_path.display()
                    ),
                ));
            }
        }
    }
    Ok(rows)
}

/// `--junit`: the merged `rows` as one suite named after `output` and the batch.
fn write_junit(
    path: &Path,
    output: &Path,
    first: &ShardFile,
    rows: &BTreeMap<u64, (&[u8], &Path)>,
) -> Result<()> {
    let suite = format!(
        "{} (batch {})",
        output
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        first
            .meta
            .fingerprint
            .get(..8)
            .unwrap_or(&first.meta.fingerprint)
    );
    let header = &first.bytes[..first.header_end];
    let outcomes = row_outcomes(header, rows.iter().map(|(n, (b, _))| (*n, *b)));
    // The shards ran apart: the suite's time is the rows' own, summed.
    let time: f64 = outcomes.iter().map(|(o, _)| o.duration_s.max(0.0)).sum();
    crate::sink::junit::write(path, &suite, &outcomes, time)?;
    crate::ui::outln(format_args!(
        "Wrote {} ({} test case(s) in one suite, {suite})",
        path.display(),
        outcomes.len()
    ));
    Ok(())
}

/// The merged rows as outcomes for a JUnit report: each row's `status`, `error`,
/// `failure_kind`, `attempts`, `duration_s`, `cost_usd` and `log` (their `runner_` names when
/// the input had columns of those names), its id from the `id` column (else the first).
fn row_outcomes<'a>(
    header: &[u8],
    rows: impl Iterator<Item = (u64, &'a [u8])>,
) -> Vec<(
    crate::run::record::outcome::Outcome,
    Vec<crate::report::Verdict>,
)> {
    use crate::report::ItemStatus;
    let read = |bytes: &[u8]| -> Vec<String> {
        csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(bytes)
            .records()
            .next()
            .and_then(|r| r.ok())
            .map(|r| r.iter().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let names = read(header);
    let prefixed = names.iter().any(|h| h == "runner_status");
    let col = |name: &str| {
        let want = if prefixed {
            format!("runner_{name}")
        } else {
            name.to_owned()
        };
        names.iter().position(|h| *h == want)
    };
    let (status, error, kind, attempts, duration, cost, log) = (
        col("status"),
        col("error"),
        col("failure_kind"),
        col("attempts"),
        col("duration_s"),
        col("cost_usd"),
        col("log"),
    );
    let id_col = names.iter().position(|h| h == "id").unwrap_or(0);
    rows.map(|(number, bytes)| {
        let values = read(bytes);
        let get = |i: Option<usize>| i.and_then(|i| values.get(i)).cloned().unwrap_or_default();
        let id = values
            .get(id_col)
            .cloned()
            .unwrap_or_else(|| number.to_string());
        let state = ItemStatus::ALL
            .into_iter()
            .find(|s| s.as_str() == get(status))
            .unwrap_or(ItemStatus::Failed);
        let mut o = crate::run::record::outcome::Outcome::not_run(
            &id,
            &crate::item::teammate_name(number, &id),
            &id,
            state,
            get(error),
        );
        o.failure_kind = crate::failure::FailureKind::parse(&get(kind));
        o.attempts = get(attempts).parse().unwrap_or(0);
        o.duration_s = get(duration).parse().unwrap_or(0.0);
        o.cost_usd = get(cost).parse().ok();
        o.log = get(log);
        (o, Vec::new())
    })
    .collect()
}
