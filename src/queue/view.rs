//! Reading a shared run back: its verdicts for `runner collect`, checked like input, and
//! what `runner status --queue` shows (done, running per worker, pending, dead workers).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::options::queue::QueueUrl;
use crate::run::record::outcome::Outcome;

use super::Verdict;
use super::server::{self, Holdings, Keys};

/// What the queue at `url` holds for the batch read from the input named `input`.
///
/// Errors: the server cannot be reached (exit 3).
pub(crate) fn read(url: &QueueUrl, input: &str) -> Result<(Keys, Holdings)> {
    let keys = Keys::for_input(input);
    let mut con = server::connect(url)?;
    let h = server::holdings(&mut con, &keys).map_err(|e| match e.code() {
        // Input, not environment: someone else wrote one of the run's keys.
        Some("WRONGTYPE") => Error::Usage(format!(
            "the queue at {url} holds a key under `{}:` of a kind no runner writes (changed by something else than a runner): clear the run's keys or use another database (`/DB` in the URL)",
            keys.base
        )),
        _ => Error::Environment(format!(
            "cannot read the queue at {url}: {}",
            crate::redact::urls(&e.to_string())
        )),
    })?;
    Ok((keys, h))
}

/// The verdicts the queue at `url` holds for the batch with `fingerprint`, in the order of
/// `ids` (the batch's items); items with none are left out.
///
/// Errors (exit 2): the queue holds no run of this batch, or another batch under its key;
/// a stored verdict is not an outcome of one of `ids` (checked as a journal line is).
pub(crate) fn verdicts(
    url: &QueueUrl,
    input: &str,
    fingerprint: &str,
    ids: &[String],
) -> Result<Vec<Outcome>> {
    let (keys, h) = read(url, input)?;
    match h.meta.get("fingerprint") {
        None => {
            return Err(Error::Usage(format!(
                "the queue at {url} holds no run of this batch (no `{}:meta`); start the workers with --queue first",
                keys.base
            )));
        }
        Some(f) if f != fingerprint => {
            return Err(Error::Usage(format!(
                "the queue at {url} holds another batch under `{}` (fingerprint {f}, this batch's is {fingerprint}); collect with the batch files the workers ran",
                keys.base
            )));
        }
        Some(_) => {}
    }
    let known: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let mut by_id: HashMap<String, Outcome> = HashMap::new();
    for (id, json) in &h.results {
        by_id.insert(id.clone(), checked(url, id, json, &known)?);
    }
    Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
}

/// The outcome a stored result `json` under item `id` holds, checked as a journal line is:
/// a verdict whose outcome is `id`'s, `id` one of the batch's (`known`).
///
/// Errors (exit 2): anything else, naming the item (made safe to show) and what is wrong.
pub(crate) fn checked(
    url: &QueueUrl,
    id: &str,
    json: &str,
    known: &HashSet<&str>,
) -> Result<Outcome> {
    let shown = crate::shown::terminal_safe(id);
    let bad = |why: String| {
        Error::Usage(format!(
            "the queue at {url} holds a result for item `{shown}` that is not valid ({why}); it was not written by a runner of this batch: delete it (`HDEL <key>:results <id>`) or clear the key"
        ))
    };
    let v: Verdict =
        serde_json::from_str(json).map_err(|e| bad(crate::shown::terminal_safe(&e.to_string())))?;
    if !known.contains(id) {
        return Err(bad("no item of this batch has that id".into()));
    }
    if v.outcome.id != id {
        return Err(bad(format!(
            "its outcome is item `{}`'s",
            crate::shown::terminal_safe(&v.outcome.id)
        )));
    }
    Ok(v.outcome)
}

/// `runner status --queue`'s text for what `keys` holds, a worker dead once it has not
/// renewed its leases for `lease`.
pub(crate) fn status_text(url: &QueueUrl, keys: &Keys, h: &Holdings, lease: Duration) -> String {
    if h.meta.is_empty() {
        return format!(
            "The queue at {url} holds no run under `{}` yet.\n",
            keys.base
        );
    }
    let total: u64 = h
        .meta
        .get("total")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let lease_ms = lease.as_millis() as u64;
    let mut statuses: BTreeMap<String, u64> = BTreeMap::new();
    let mut cost = 0.0;
    let mut invalid: Vec<String> = Vec::new();
    for (id, json) in &h.results {
        match serde_json::from_str::<Verdict>(json) {
            Ok(v) if v.outcome.id == *id => {
                *statuses.entry(v.outcome.status.to_string()).or_default() += 1;
                cost += v.outcome.cost_usd.unwrap_or(0.0);
            }
            _ => invalid.push(crate::shown::terminal_safe(id)),
        }
    }
    invalid.sort();
    let mut dup_cost = 0.0;
    for json in &h.duplicates {
        if let Ok(v) = serde_json::from_str::<Verdict>(json) {
            dup_cost += v.outcome.cost_usd.unwrap_or(0.0);
        }
    }
    let mut running: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (_, worker, idle) in &h.pending {
        let e = running.entry(worker.as_str()).or_default();
        match *idle >= lease_ms {
            true => e.1 += 1,
            false => e.0 += 1,
        }
    }
    let done = h.results.len() as u64;
    let mut text = format!(
        "Queue {url} `{}` ({}): {done} of {total} done",
        keys.base,
        crate::shown::terminal_safe(h.meta.get("input").map_or("", String::as_str)),
    );
    let parts: Vec<String> = statuses.iter().map(|(s, n)| format!("{n} {s}")).collect();
    if !parts.is_empty() {
        text.push_str(&format!(" ({})", parts.join(", ")));
    }
    let held: u64 = running.values().map(|(a, b)| a + b).sum();
    text.push_str(&format!("; {held} running; {} pending\n", h.unclaimed));
    // The fleet's rate limit, once a rate limit taught it one; a value that is no count is
    // not believed.
    if let (Some(limit), out) = &h.limit {
        match limit
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|l| (1..=1_000_000_000).contains(l))
        {
            Some(l) => text.push_str(&format!(
                "Rate limit: {l} attempt(s) at once across the workers ({out} running now)\n"
            )),
            None => text
                .push_str("Not valid: the fleet's rate limit (not written by a runner; ignored)\n"),
        }
    }
    if cost > 0.0 || dup_cost > 0.0 {
        text.push_str(&format!("Cost: ${cost:.4}, duplicates ${dup_cost:.4}\n"));
    }
    if !invalid.is_empty() {
        text.push_str(&format!(
            "Not valid: the result of {} (not written by a runner; not counted)\n",
            invalid.join(", ")
        ));
    }
    if !h.duplicates.is_empty() {
        text.push_str(&format!(
            "Duplicate attempts: {} (an item finished again after its verdict)\n",
            h.duplicates.len()
        ));
    }
    let mut names: Vec<&str> = h.workers.keys().map(String::as_str).collect();
    names.extend(
        running
            .keys()
            .copied()
            .filter(|w| !h.workers.contains_key(*w)),
    );
    names.sort_unstable();
    for w in names {
        let seen = h.workers.get(w).map(|t| now.saturating_sub(*t));
        let (live, stale) = running.get(w).copied().unwrap_or_default();
        let dead = seen.is_none_or(|ms| ms >= lease_ms);
        let state = match (dead, live + stale) {
            (true, 0) => "finished or gone".to_owned(),
            (true, n) => format!("dead, {n} item(s) to be taken over after the lease"),
            (false, n) => format!("{n} running"),
        };
        text.push_str(&format!(
            "  worker {}: {state}\n",
            crate::shown::terminal_safe(w)
        ));
    }
    text
}

/// Whether every verdict `h` holds is a valid `completed` one.
pub(crate) fn all_completed(h: &Holdings) -> bool {
    h.results.iter().all(|(id, json)| {
        serde_json::from_str::<Verdict>(json).is_ok_and(|v| {
            v.outcome.id == *id && v.outcome.status == crate::report::ItemStatus::Completed
        })
    })
}
