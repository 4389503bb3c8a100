//! What the runner keeps on the Redis server, and each operation on it as one atomic
//! script (DESIGN §9b). Under the batch's key `runner:<input file name>`:
//!
//! - `…:meta` (hash): `fingerprint` (the batch's content hash, [`crate::run::record::team::BatchId`]),
//!   `total` (items), `input` (the input's name, for messages), `generation` (times
//!   `--only failed` reseeded the run), `spent_usd` and `failed` (the fleet's totals);
//! - `…:items` (stream, consumer group `workers`): one entry per unit — an item, or a
//!   staged row with all its stages —, fields `id` and, for a row, `check` (its first
//!   stage's item id), in the order they are handed out. Read by the group = claimed by that worker; acknowledged =
//!   it has its verdict; pending and idle longer than the lease = its worker is gone, and
//!   `XAUTOCLAIM` hands it to another;
//! - `…:results` (hash): item id → `{"worker": …, "outcome": {…}}`, set once (`HSETNX`): the
//!   first valid finish is the verdict;
//! - `…:duplicates` (list): every later finish of an item that had its verdict (its cost
//!   counts all the same);
//! - `…:attempts` (hash): item id → the highest attempt number any worker started of it, so
//!   a worker that takes an item over continues its numbering (and its `--retries`);
//! - `…:workers` (hash): worker name → when it last renewed its leases (ms since the epoch);
//! - `…:pause` (string, expiring with it): the end of the fleet's rate-limit pause (ms since
//!   the epoch): a worker that meets a 429 sets it, every worker's gate pauses until then;
//! - `…:slots`, `…:limit`, `…:jobs`: the fleet's rate limit ([`super::slots`]).

use std::collections::HashMap;
use std::time::Duration;

use redis::{Connection, Script};

use crate::error::{Error, Result};
use crate::options::queue::QueueUrl;

/// The consumer group every worker reads the items stream through.
pub(crate) const GROUP: &str = "workers";

/// The keys of one batch's queue.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    /// `runner:<name>`, the prefix of the others.
    pub base: String,
}

impl Keys {
    /// The keys of the batch read from the input file named `input_name`: its file name
    /// alone, so workers on machines with other paths agree; characters other than
    /// letters, digits, `.`, `_` and `-` become `_`.
    pub(crate) fn for_input(input_name: &str) -> Keys {
        let name: String = input_name
            .chars()
            .map(|c| match c.is_ascii_alphanumeric() || "._-".contains(c) {
                true => c,
                false => '_',
            })
            .collect();
        Keys {
            base: format!("runner:{name}"),
        }
    }

    fn key(&self, what: &str) -> String {
        format!("{}:{what}", self.base)
    }
    pub(crate) fn meta(&self) -> String {
        self.key("meta")
    }
    pub(crate) fn items(&self) -> String {
        self.key("items")
    }
    pub(crate) fn results(&self) -> String {
        self.key("results")
    }
    pub(crate) fn duplicates(&self) -> String {
        self.key("duplicates")
    }
    pub(crate) fn workers(&self) -> String {
        self.key("workers")
    }
    pub(crate) fn pause(&self) -> String {
        self.key("pause")
    }
    pub(crate) fn attempts(&self) -> String {
        self.key("attempts")
    }
    pub(crate) fn slots(&self) -> String {
        self.key("slots")
    }
    pub(crate) fn limit(&self) -> String {
        self.key("limit")
    }
    pub(crate) fn jobs(&self) -> String {
        self.key("jobs")
    }
}

/// A connection to the queue's server, with its URL for messages (password redacted).
///
/// Errors: the server cannot be reached or refuses the login (exit 3, the URL redacted).
pub(crate) fn connect(url: &QueueUrl) -> Result<Connection> {
    let failed = |e: redis::RedisError| {
        // What to do: a login the server wants or refused is no server to start.
        let fix = match (e.code(), e.kind()) {
            (Some("NOAUTH"), _) => {
                "the server asks for a password: give it in the URL, redis://:PASSWORD@HOST[:PORT][/DB]"
            }
            (Some("WRONGPASS"), _) | (_, redis::ErrorKind::AuthenticationFailed) => {
                "the server refused the URL's user name or password: fix them in --queue"
            }
            _ if url.tls() => {
                "start the Redis server or fix --queue (a server whose certificate a private CA signed: --queue-ca FILE)"
            }
            _ => "start the Redis server or fix --queue",
        };
        Error::Environment(format!(
            "cannot reach the queue at {url}: {}; {fix}",
            crate::redact::urls(&e.to_string()),
        ))
    };
    crate::queue::tls_provider();
    let client = match url.ca() {
        None => redis::Client::open(url.secret_url()).map_err(failed)?,
        Some(_) if !url.tls() => {
            return Err(Error::Usage(format!(
                "--queue-ca names the CA of a TLS queue, and {url} is not one: use rediss:// or drop --queue-ca"
            )));
        }
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| {
                Error::Usage(format!(
                    "--queue-ca {}: cannot read it ({e}); give the PEM file of the queue's CA certificates",
                    path.display()
                ))
            })?;
            let certs = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem),
            };
            redis::Client::build_with_tls(url.secret_url(), certs).map_err(failed)?
        }
    };
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(failed)?;
    con.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(failed)?;
    con.set_write_timeout(Some(Duration::from_secs(10)))
        .map_err(failed)?;
    // A server that wants a password says so to the first command: that is a PING, not
    // the run's first script, which such a server cuts off unread.
    redis::cmd("PING").query::<()>(&mut con).map_err(failed)?;
    Ok(con)
}

/// What seeding found: this worker seeded the queue, or it held this batch already.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Seeded {
    /// This worker put the items in.
    Now,
    /// The queue held this batch already (seeding again changes nothing).
    Before,
    /// The queue holds another batch under the key: its fingerprint.
    Other(String),
}

const SEED: &str = r"
local have = redis.call('HGET', KEYS[1], 'fingerprint')
if have then
  if have == ARGV[1] then return {0, have} end
  return {2, have}
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
redis.call('XGROUP', 'CREATE', KEYS[2], ARGV[4], '0', 'MKSTREAM')
for i = 5, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('XADD', KEYS[2], '*', 'id', ARGV[i])
  else
    redis.call('XADD', KEYS[2], '*', 'id', ARGV[i], 'check', ARGV[i + 1])
  end
end
redis.call('HSET', KEYS[1], 'fingerprint', ARGV[1], 'total', ARGV[2], 'input', ARGV[3])
return {1, ARGV[1]}
";

/// One entry of the items stream: a unit handed out whole — an item, or a staged row with
/// every stage of it (`id` the row's id) — and `check`, the result whose presence says the
/// unit has its verdict (its first item's id; `None` when that is `id` itself).
#[derive(Debug, Clone)]
pub(crate) struct Unit {
    /// The item's or row's id.
    pub id: String,
    /// Its first item's id, when that differs from `id`.
    pub check: Option<String>,
}

impl Unit {
    /// Pass `units` to `script` as the seeding scripts read them: two arguments each, the id
    /// and the check (empty when it is the id).
    fn pass(script: &mut redis::ScriptInvocation<'_>, units: &[Unit]) {
        for u in units {
            script.arg(&u.id).arg(u.check.as_deref().unwrap_or(""));
        }
    }
}

/// Put `units` (in the order they are to be handed out) into the queue once, under
/// `fingerprint`, with `total` (the results the run will have: one per item, a staged row's
/// stages each count); atomic, so of workers arriving together exactly one seeds.
///
/// Errors: the server failed.
pub(crate) fn seed(
    con: &mut Connection,
    keys: &Keys,
    (fingerprint, input): (&str, &str),
    units: &[Unit],
    total: usize,
) -> redis::RedisResult<Seeded> {
    let seed = Script::new(SEED);
    let mut script = seed.prepare_invoke();
    script
        .key(keys.meta())
        .key(keys.items())
        .key(keys.results())
        .key(keys.duplicates())
        .key(keys.attempts())
        .key(keys.slots())
        .key(keys.limit())
        .key(keys.jobs())
        .arg(fingerprint)
        .arg(total)
        .arg(input)
        .arg(GROUP);
    Unit::pass(&mut script, units);
    let (code, have): (i64, String) = script.invoke(con)?;
    Ok(match code {
        1 => Seeded::Now,
        0 => Seeded::Before,
        _ => Seeded::Other(have),
    })
}

const RESEED: &str = r"
if (redis.call('HGET', KEYS[1], 'generation') or '0') ~= ARGV[1] then return 0 end
redis.call('HINCRBY', KEYS[1], 'generation', 1)
local k = tonumber(ARGV[3])
for i = 4, 3 + k do redis.call('HDEL', KEYS[3], ARGV[i]); redis.call('HDEL', KEYS[4], ARGV[i]) end
for i = 4 + k, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('XADD', KEYS[2], '*', 'id', ARGV[i])
  else
    redis.call('XADD', KEYS[2], '*', 'id', ARGV[i], 'check', ARGV[i + 1])
  end
end
if tonumber(ARGV[2]) > 0 then redis.call('HINCRBY', KEYS[1], 'failed', 0 - tonumber(ARGV[2])) end
return 1
";

/// What a finished run's queue holds for `--only failed` to choose from: its generation
/// (how many times it was reseeded), its total and its verdicts (JSON text, checked by the
/// caller). The generation is read first: a reseed that happens after it makes the
/// [`reseed`] built on these a no-op.
///
/// Errors: the server failed.
pub(crate) fn generation(
    con: &mut Connection,
    keys: &Keys,
) -> redis::RedisResult<(String, u64, HashMap<String, String>)> {
    let (generation, total): (Option<String>, Option<String>) = redis::cmd("HMGET")
        .arg(keys.meta())
        .arg("generation")
        .arg("total")
        .query(con)?;
    let results: HashMap<String, String> = redis::cmd("HGETALL").arg(keys.results()).query(con)?;
    let total = total.and_then(|t| t.trim().parse().ok()).unwrap_or(0);
    Ok((generation.unwrap_or_else(|| "0".into()), total, results))
}

/// Start the run's next generation: forget the verdicts `forget` (and their attempts, so
/// each has its `--retries` again, as `--only failed` on one machine) and hand `units` out
/// again (new stream entries), the fleet's count of items that did not complete down by
/// `failed` — only while the run is still at `generation`: `false` when another worker
/// reseeded it first (nothing changed).
///
/// Errors: the server failed.
pub(crate) fn reseed(
    con: &mut Connection,
    keys: &Keys,
    (generation, failed): (&str, u64),
    forget: &[String],
    units: &[Unit],
) -> redis::RedisResult<bool> {
    let reseed = Script::new(RESEED);
    let mut script = reseed.prepare_invoke();
    script
        .key(keys.meta())
        .key(keys.items())
        .key(keys.results())
        .key(keys.attempts())
        .arg(generation)
        .arg(failed)
        .arg(forget.len())
        .arg(forget);
    Unit::pass(&mut script, units);
    script.invoke::<i64>(con).map(|done| done == 1)
}

const CLAIM: &str = r"
local function first(entries)
  for _, e in ipairs(entries) do
    if e and e[2] then return e end
  end
  return nil
end
for _ = 1, 50 do
  local e = nil
  local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
  if r then e = first(r[1][2]) end
  if not e then
    local cursor = '0-0'
    for _ = 1, 100 do
      local a = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], cursor, 'COUNT', 1)
      cursor = a[1]
      e = first(a[2])
      if e or cursor == '0-0' then break end
    end
  end
  if not e then break end
  local id, check = nil, nil
  for i = 1, #e[2], 2 do
    if e[2][i] == 'id' then id = e[2][i + 1] end
    if e[2][i] == 'check' then check = e[2][i + 1] end
  end
  if id and redis.call('HEXISTS', KEYS[2], check or id) == 0 then
    return {e[1], id, redis.call('HLEN', KEYS[2]), redis.call('HGET', KEYS[3], 'total') or '0'}
  end
  -- Its verdict is in already (or the entry is not one of ours): done with it.
  redis.call('XACK', KEYS[1], ARGV[1], e[1])
end
return {'', '', redis.call('HLEN', KEYS[2]), redis.call('HGET', KEYS[3], 'total') or '0'}
";

/// What a claim found.
#[derive(Debug)]
pub(crate) struct Claim {
    /// The stream entry and the item id it names; `None` when no item is free now.
    pub item: Option<(String, String)>,
    /// Items that have their verdict.
    pub done: u64,
    /// Items of the batch; `None` when `meta`'s `total` is not a number (read as input).
    pub total: Option<u64>,
}

/// Claim one item for `worker`: a new one, else one whose worker has not renewed its lease
/// for `lease`.
///
/// Errors: the server failed.
pub(crate) fn claim(
    con: &mut Connection,
    keys: &Keys,
    worker: &str,
    lease: Duration,
) -> redis::RedisResult<Claim> {
    let (entry, id, done, total): (String, String, u64, String) = Script::new(CLAIM)
        .key(keys.items())
        .key(keys.results())
        .key(keys.meta())
        .arg(GROUP)
        .arg(worker)
        .arg(lease.as_millis() as u64)
        .invoke(con)?;
    Ok(Claim {
        item: (!entry.is_empty()).then_some((entry, id)),
        done,
        total: total.trim().parse().ok(),
    })
}

const TOUCH: &str = r"
redis.call('HSET', KEYS[2], ARGV[2], ARGV[4])
for i = 5, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE', ARGV[3], 'JUSTID')
  end
end
return 1
";

/// Set how long `worker`'s `entries` have been idle to `idle` (zero: renew the lease;
/// the lease: hand them back at once), each only while it is still this worker's, and
/// note the worker as alive at `now_ms`.
///
/// Errors: the server failed.
pub(crate) fn touch(
    con: &mut Connection,
    keys: &Keys,
    worker: &str,
    idle: Duration,
    now_ms: u64,
    entries: &[&str],
) -> redis::RedisResult<()> {
    Script::new(TOUCH)
        .key(keys.items())
        .key(keys.workers())
        .arg(GROUP)
        .arg(worker)
        .arg(idle.as_millis() as u64)
        .arg(now_ms)
        .arg(entries)
        .invoke::<i64>(con)
        .map(|_| ())
}

const RECORD: &str = r"
local won = 1
for i = 5, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then won = 0 end
end
for i = 5, #ARGV, 2 do
  if won == 1 then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  else redis.call('RPUSH', KEYS[3], ARGV[i + 1]) end
end
if ARGV[1] ~= '' then redis.call('XACK', KEYS[2], ARGV[2], ARGV[1]) end
if tonumber(ARGV[3]) > 0 then redis.call('HINCRBYFLOAT', KEYS[4], 'spent_usd', ARGV[3]) end
if won == 1 and tonumber(ARGV[4]) > 0 then redis.call('HINCRBY', KEYS[4], 'failed', ARGV[4]) end
return won
";

/// Record `results` (item id → the JSON of its [`crate::queue::Verdict`]: one item's, or
/// every stage's of a row) as their verdicts unless one of them has one already, and
/// acknowledge the unit's stream `entry`: `true` when these were the verdicts, `false` when
/// they were a duplicate attempt (kept in the duplicates list). The fleet's spending grows
/// by `cost_usd` either way; its count of items that did not complete by `failed` when these
/// are the verdicts.
///
/// Errors: the server failed.
pub(crate) fn record(
    con: &mut Connection,
    keys: &Keys,
    entry: &str,
    results: &[(String, String)],
    (cost_usd, failed): (f64, u64),
) -> redis::RedisResult<bool> {
    let record = Script::new(RECORD);
    let mut script = record.prepare_invoke();
    script
        .key(keys.results())
        .key(keys.items())
        .key(keys.duplicates())
        .key(keys.meta())
        .arg(entry)
        .arg(GROUP)
        .arg(cost_usd)
        .arg(failed);
    for (id, json) in results {
        script.arg(id).arg(json);
    }
    script.invoke::<i64>(con).map(|won| won == 1)
}

/// The whole fleet's spending (USD) and count of items that did not complete.
///
/// Errors: the server failed.
pub(crate) fn fleet_totals(con: &mut Connection, keys: &Keys) -> redis::RedisResult<(f64, u64)> {
    let (spent, failed): (Option<String>, Option<String>) = redis::cmd("HMGET")
        .arg(keys.meta())
        .arg("spent_usd")
        .arg("failed")
        .query(con)?;
    let spent = spent
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite());
    let failed = failed.and_then(|f| f.parse::<u64>().ok());
    Ok((spent.unwrap_or(0.0).max(0.0), failed.unwrap_or(0)))
}

/// What the queue holds of a batch, as `runner collect` and `runner status --queue` read
/// it: the batch's meta (empty when it was never seeded), every verdict and duplicate as
/// stored (JSON text, checked by the reader), the items held by each worker (stream entry,
/// worker, ms idle), and when each worker last renewed its leases.
#[derive(Debug, Default)]
pub(crate) struct Holdings {
    /// `fingerprint`, `total`, `input`.
    pub meta: HashMap<String, String>,
    /// Item id → the verdict's JSON.
    pub results: HashMap<String, String>,
    /// Later finishes' JSON, in the order they came.
    pub duplicates: Vec<String>,
    /// (entry, worker, ms since its lease was last renewed) of each item claimed and not
    /// finished.
    pub pending: Vec<(String, String, u64)>,
    /// Worker → ms since the epoch of its last renewal.
    pub workers: HashMap<String, u64>,
    /// Items not handed out to any worker yet.
    pub unclaimed: u64,
    /// The fleet's rate limit as stored (text, checked by the reader; `None` until the
    /// first rate limit), and the slots of it out now.
    pub limit: (Option<String>, u64),
}

/// Read what the queue holds under `keys`.
///
/// Errors: the server failed.
pub(crate) fn holdings(con: &mut Connection, keys: &Keys) -> redis::RedisResult<Holdings> {
    let meta: HashMap<String, String> = redis::cmd("HGETALL").arg(keys.meta()).query(con)?;
    if meta.is_empty() {
        return Ok(Holdings::default());
    }
    let results: HashMap<String, String> = redis::cmd("HGETALL").arg(keys.results()).query(con)?;
    let duplicates: Vec<String> = redis::cmd("LRANGE")
        .arg(keys.duplicates())
        .arg(0)
        .arg(-1)
        .query(con)?;
    // Read as text, like every value here: a time that is no number is someone else's.
    let workers: HashMap<String, String> = redis::cmd("HGETALL").arg(keys.workers()).query(con)?;
    let workers = workers
        .into_iter()
        .filter_map(|(w, t)| t.trim().parse().ok().map(|t| (w, t)))
        .collect();
    let raw: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
        .arg(keys.items())
        .arg(GROUP)
        .arg("-")
        .arg("+")
        .arg(100_000)
        .query(con)?;
    let pending = raw
        .into_iter()
        .map(|(e, w, idle, _)| (e, w, idle))
        .collect();
    // The group's lag: entries never delivered (Redis 7).
    let groups: Vec<HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(keys.items())
        .query(con)?;
    let unclaimed = groups
        .iter()
        .find(
            |g| matches!(g.get("name"), Some(redis::Value::BulkString(n)) if n == GROUP.as_bytes()),
        )
        .and_then(|g| match g.get("lag") {
            Some(redis::Value::Int(n)) => u64::try_from(*n).ok(),
            _ => None,
        })
        .unwrap_or(0);
    // The fleet's limit is shown, never needed: a key of another kind (`WRONGTYPE`) is a
    // limit not valid, not a queue that cannot be read.
    let wrong_type = |e: &redis::RedisError| e.code() == Some("WRONGTYPE");
    let limit: Option<String> = match redis::cmd("HGET").arg(keys.limit()).arg("limit").query(con) {
        Err(e) if wrong_type(&e) => Some(String::new()),
        other => other?,
    };
    let out: u64 = match redis::cmd("ZCARD").arg(keys.slots()).query(con) {
        Err(e) if wrong_type(&e) => 0,
        other => other?,
    };
    Ok(Holdings {
        meta,
        results,
        duplicates,
        pending,
        workers,
        unclaimed,
        limit: (limit, out),
    })
}

const PAUSE: &str = r"
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tonumber(ARGV[1]) > cur then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
return 1
";

/// Share a rate-limit pause: no worker starts an attempt before `until_ms` (ms since the
/// epoch), unless a later pause stands already; the key expires with the pause.
///
/// Errors: the server failed.
pub(crate) fn pause(
    con: &mut Connection,
    keys: &Keys,
    until_ms: u64,
    now_ms: u64,
) -> redis::RedisResult<()> {
    Script::new(PAUSE)
        .key(keys.pause())
        .arg(until_ms)
        .arg(until_ms.saturating_sub(now_ms).max(1))
        .invoke::<i64>(con)
        .map(|_| ())
}

/// The shared pause's end (ms since the epoch); 0 when none stands or the value is not a
/// number.
///
/// Errors: the server failed.
pub(crate) fn paused_until(con: &mut Connection, keys: &Keys) -> redis::RedisResult<u64> {
    let v: Option<String> = redis::cmd("GET").arg(keys.pause()).query(con)?;
    Ok(v.and_then(|t| t.trim().parse().ok()).unwrap_or(0))
}

/// The stored verdicts of `ids` (JSON text, checked by the caller), `None` for an item with
/// none yet.
///
/// Errors: the server failed.
pub(crate) fn verdicts_of(
    con: &mut Connection,
    keys: &Keys,
    ids: &[String],
) -> redis::RedisResult<Vec<Option<String>>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    redis::cmd("HMGET").arg(keys.results()).arg(ids).query(con)
}

const STARTED: &str = r"
local c = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') or 0
if tonumber(ARGV[2]) > c then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1
";

/// Note that a worker started attempt number `attempt` of item `id` (kept when higher than
/// the number noted).
///
/// Errors: the server failed.
pub(crate) fn started(
    con: &mut Connection,
    keys: &Keys,
    id: &str,
    attempt: u32,
) -> redis::RedisResult<()> {
    Script::new(STARTED)
        .key(keys.attempts())
        .arg(id)
        .arg(attempt)
        .invoke::<i64>(con)
        .map(|_| ())
}

/// The highest attempt number started of each of `ids` as stored (text, checked by the
/// caller), `None` for one with none.
///
/// Errors: the server failed.
pub(crate) fn attempts_of(
    con: &mut Connection,
    keys: &Keys,
    ids: &[String],
) -> redis::RedisResult<Vec<Option<String>>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    redis::cmd("HMGET").arg(keys.attempts()).arg(ids).query(con)
}
