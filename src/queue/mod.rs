//! The shared work queue (`--queue redis://…`, DESIGN §9b): every `runner batch` started
//! with the same batch and queue is a worker of one run. The queue is a Redis (or Valkey)
//! stream read through a consumer group ([`server`]): the first worker seeds it with the
//! batch's item ids, each worker claims items as its `--jobs` slots free up ([`worker`]: a
//! [`crate::schedule::feed::SharedQueue`] the dispatcher reads through a feed), renews the
//! lease of what it runs, and records each verdict both in its own journal and in the
//! queue's results ([`results`], a sink). A worker that dies leaves its items pending; after
//! the lease another worker claims them. The first valid finish of an item is its verdict;
//! a later one is kept as a duplicate attempt.
//!
//! Nothing read from the server is trusted beyond what a row is: an id is looked up among
//! the worker's own items (read from its own batch files), an outcome is parsed and checked
//! like a journal line.
//!
//! The room sits above [`crate::schedule`] (it implements its feed) and below
//! [`crate::plans`] (the CSV adapter attaches it to a plan) and the commands.

pub(crate) mod results;
pub(crate) mod server;
pub(crate) mod slots;
pub(crate) mod view;
pub(crate) mod worker;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::run::record::outcome::Outcome;
use crate::schedule::plan::Plan;

/// How long a claimed item stays a worker's without its lease being renewed: 60 s (a
/// worker renews every third of it). `RUNNER_QUEUE_LEASE_MS` sets it in milliseconds, for
/// tests that kill a worker and should not wait a minute (not a user setting).
pub(crate) fn lease() -> Duration {
    std::env::var("RUNNER_QUEUE_LEASE_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms >= 100)
        .map_or(Duration::from_secs(60), Duration::from_millis)
}

/// One entry of the queue's results (and of its duplicates): which worker finished the
/// item, and the outcome it recorded in its own journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Verdict {
    /// The worker's name (`host:pid:nonce`).
    pub worker: String,
    /// The item's outcome, as the worker's journal has it.
    pub outcome: Outcome,
}

/// The TLS provider `rediss://` connections use (ring, as the rest of the runner's TLS).
pub(crate) fn tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `settings` without `--only failed` when they name a queue, and whether they had it: a
/// worker's selection is the queue's to make ([`attach`]'s `reseed`).
pub(crate) fn only_failed(
    mut settings: crate::settings::Settings,
) -> (crate::settings::Settings, bool) {
    let reseed = settings.queue.is_some()
        && matches!(settings.only, crate::options::selection::Only::Failed);
    if reseed {
        settings.only = crate::options::selection::Only::All;
    }
    (settings, reseed)
}

/// Make `plan` a worker of the queue its settings name (nothing when they name none):
/// its items come from the queue, its outcomes go there too. A staged batch's rows are
/// handed out whole: every stage of a row runs on the worker that claimed it. `reseed`
/// (`--only failed`): when the queue's run is over, its failed items are handed out again.
///
/// Errors (exit 2): `--queue` with `--shard`, `--only` (but `failed`), or `--batch-api`.
pub(crate) fn attach(mut plan: Plan, reseed: bool) -> Result<Plan> {
    let Some(url) = plan.spec.settings.queue.clone() else {
        return Ok(plan);
    };
    let settings = &plan.spec.settings;
    let clash = [
        (settings.shard.is_some(), "--shard"),
        (
            !matches!(settings.only, crate::options::selection::Only::All),
            "--only (but `failed`)",
        ),
        (settings.batch_api, "--batch-api"),
    ];
    if let Some((_, other)) = clash.iter().find(|(on, _)| *on) {
        return Err(Error::Conflict {
            flag: "--queue".into(),
            other: (*other).into(),
            why: "a shared queue hands out the whole batch, item by item, to independent workers; run the batch without one of them"
                .into(),
        });
    }
    let ids = plan
        .source
        .items()?
        .map(|i| i.map(|i| i.id))
        .collect::<Result<Vec<_>>>()?;
    // The queue is the run's record: an item this worker's journal completed earlier is
    // run again when the queue hands it out (its verdict never reached the queue).
    plan.spec.rerun.extend(ids.iter().cloned());
    let input = std::path::Path::new(&plan.batch.input)
        .file_name()
        .map_or_else(
            || plan.batch.input.clone(),
            |n| n.to_string_lossy().into_owned(),
        );
    let (worker, sink) = worker::Worker::new(url, &input, plan.batch.fingerprint.clone(), reseed);
    plan.sinks.push(Box::new(sink));
    plan.queue = Some(Box::new(worker));
    Ok(plan)
}
