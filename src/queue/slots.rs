//! The fleet's rate limit (DESIGN §8a, "One limit for the fleet"): §6a's AIMD limit kept
//! on the server for every worker of a run, so that N workers against one rate-limited API
//! learn one limit instead of each its own. Under the batch's key:
//!
//! - `…:slots` (sorted set): one token per running attempt of any worker, `V|WORKER|N`
//!   (`V` the limit's version when it was granted), scored by its lease's end (the server's
//!   clock, ms); renewed with the worker's item leases, so a killed worker's tokens are
//!   dropped once their lease ran out and its slots come back;
//! - `…:limit` (hash): `limit` (absent until the first rate limit: no limit), `version`
//!   (bumped by each halving, step up and step back: a rate limit of an attempt granted at
//!   the current version is the first of its burst), `credit`, `streak`, `rounds`, `probe`
//!   and `probing_from` (the step up being tried), `burst` and `served` (the version the
//!   last burst began at and how many of its attempts the server served), `tokens` (the
//!   tokens' counter);
//! - `…:jobs` (hash): worker → its `--jobs`; the limit never steps above the sum of the
//!   workers seen within a lease.
//!
//! Two scripts, each atomic: [`ACQUIRE`] drops expired tokens and grants tokens while fewer
//! than the limit are out (none during the fleet's pause); [`END`] takes an ended attempt's
//! token back and applies the rules to it — one halving per burst (the token's version
//! compared with the limit's and bumped in the same script), the burst's served count summed
//! over every worker's attempts, credit and step-ups from the fleet's successes. Every value
//! read is checked like input: a field that is no number in range, or a token that is none
//! of a runner's, is dropped and reported (the caller warns), never trusted.

use std::collections::{HashSet, VecDeque};
use std::sync::mpsc::Sender;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::{Connection, Script};
use tokio::sync::oneshot;

use super::server::Keys;
use super::worker::Cmd;
use crate::schedule::gate::Limited;
use crate::schedule::gate::shared::{Ending, SharedLimit, Slot, Word};

/// What both scripts start with: the keys, the clocks, and the helpers reading the limit.
const PRELUDE: &str = r"
local slots, lim, pause, jobs, workers = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local client_now, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local broken = 0
local function num(field, default)
  local v = redis.call('HGET', lim, field)
  if not v then return default end
  local n = tonumber(v)
  if not n or n ~= n or n < 0 or n > 1e9 or n ~= math.floor(n) then
    broken = 1
    redis.call('HDEL', lim, field)
    return default
  end
  return n
end
local function version_of(token)
  return tonumber(string.match(token, '^(%d+)|'))
end
local function cap()
  local total = 0
  local js = redis.call('HGETALL', jobs)
  for i = 1, #js, 2 do
    local seen = tonumber(redis.call('HGET', workers, js[i]) or '')
    local j = tonumber(js[i + 1])
    if seen and j and j >= 1 and j <= 100000 and client_now - seen <= lease then
      total = total + math.floor(j)
    end
  end
  return math.max(total, 1)
end
local function tidy()
  redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
  local out = redis.call('ZRANGE', slots, 0, -1, 'WITHSCORES')
  local n, burst, left = 0, num('burst', -1), 0
  for i = 1, #out, 2 do
    local v, ends = version_of(out[i]), tonumber(out[i + 1])
    if not v or not ends or ends > now + 2 * lease then
      redis.call('ZREM', slots, out[i])
      broken = 1
    else
      n = n + 1
      if v <= burst then left = left + 1 end
    end
  end
  if burst >= 0 and left == 0 then
    local served = num('served', 0)
    if served > 0 then redis.call('HSET', lim, 'limit', math.min(served, cap())) end
    redis.call('HDEL', lim, 'burst', 'served')
  end
  return n
end
";

/// Grant up to `ARGV[5]` tokens to worker `ARGV[3]` (whose `--jobs` is `ARGV[4]`): while
/// fewer than the limit are out and the fleet is not paused. Returns
/// `{broken, version, limit, {tokens…}}`.
const ACQUIRE: &str = r"
redis.call('HSET', jobs, ARGV[3], ARGV[4])
local out = tidy()
local version, limit = num('version', 0), num('limit', 0)
local granted = {}
local paused = (tonumber(redis.call('GET', pause) or '0') or 0) > client_now
if not paused then
  local counter = num('tokens', 0)
  for _ = 1, tonumber(ARGV[5]) or 0 do
    if limit >= 1 and out >= limit then break end
    counter = counter + 1
    local token = version .. '|' .. ARGV[3] .. '|' .. counter
    redis.call('ZADD', slots, now + lease, token)
    table.insert(granted, token)
    out = out + 1
  end
  redis.call('HSET', lim, 'tokens', counter)
end
return {broken, version, limit, granted}
";

/// Take token `ARGV[3]` back, its attempt ended as `ARGV[4]` (`served`, `not_served`,
/// `limited`, `dropped`), and apply §6a's rules to the fleet's limit. Returns
/// `{broken, word, first, version, limit}`, `word` being `counted`, `alone` or `pause`.
const END: &str = r"
local token, ending = ARGV[3], ARGV[4]
local v = version_of(token) or 0
redis.call('ZREM', slots, token)
local version, limit, credit = num('version', 0), num('limit', 0), num('credit', 0)
local streak, rounds = num('streak', 0), math.max(num('rounds', 2), 1)
local probe, from, burst = num('probe', -1), num('probing_from', 0), num('burst', -1)
local word, first = 'counted', 0
local member = burst >= 0 and v <= burst and ending ~= 'dropped'
if member then
  if ending == 'served' then redis.call('HSET', lim, 'served', num('served', 0) + 1) end
  if ending == 'limited' then word = 'pause'; streak = 0 end
elseif ending == 'served' and limit >= 1 then
  if version > 0 then credit = math.min(credit + 1, limit) end
  streak = streak + 1
  if streak >= rounds * limit then
    from = 0
    if limit < cap() then
      from = limit; limit = limit + 1; version = version + 1; probe = version
    end
    streak = 0
  end
elseif ending == 'limited' then
  if credit > 0 then
    credit = credit - 1; streak = 0; word = 'alone'
  elseif probe >= 0 and (v == probe or v + 1 == probe) then
    if from >= 1 then
      limit = from; streak = 0; rounds = math.min(rounds * 2, 16); version = version + 1; from = 0
    end
    word = 'alone'
  else
    word = 'pause'; streak = 0
    if v == version then
      first = 1
      local current = limit
      if current < 1 then current = tidy() + 1 end
      redis.call('HSET', lim, 'burst', version, 'served', 0)
      limit = math.ceil(current / 2); credit = 0; version = version + 1; from = 0; probe = -1
    end
  end
end
redis.call('HSET', lim, 'version', version, 'credit', credit, 'streak', streak, 'rounds', rounds)
if limit >= 1 then redis.call('HSET', lim, 'limit', limit) end
if probe >= 0 then redis.call('HSET', lim, 'probe', probe) else redis.call('HDEL', lim, 'probe') end
if from >= 1 then redis.call('HSET', lim, 'probing_from', from) else redis.call('HDEL', lim, 'probing_from') end
tidy()
return {broken, word, first, version, num('limit', 0)}
";

/// Renew tokens `ARGV[2…]` (only those still out) for `ARGV[1]` ms from now.
const RENEW: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i]) end
return 1
";

/// [`ACQUIRE`] after the prelude, compiled once (the server caches it by its hash).
fn acquire_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| Script::new(&format!("{PRELUDE}{ACQUIRE}")))
}

/// [`END`] after the prelude.
fn end_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| Script::new(&format!("{PRELUDE}{END}")))
}

/// A call of `script` with the prelude's keys and arguments: this worker's clock (for the
/// fleet's pause and the workers' renewals, which it writes) and the lease.
fn invoke(
    script: &'static Script,
    keys: &Keys,
    (now_ms, lease): (u64, Duration),
) -> redis::ScriptInvocation<'static> {
    let mut call = script.prepare_invoke();
    call.key(keys.slots())
        .key(keys.limit())
        .key(keys.pause())
        .key(keys.jobs())
        .key(keys.workers())
        .arg(now_ms)
        .arg(lease.as_millis() as u64);
    call
}

/// This worker's side of the fleet's limit, kept by the queue's thread: the tokens its
/// running attempts hold and the requests for one not granted yet.
#[derive(Default)]
pub(super) struct Slots {
    /// This worker's `--jobs` (told the fleet with each request).
    pub jobs: usize,
    /// Tokens of running attempts, renewed with the item leases.
    held: HashSet<String>,
    /// Requests waiting for a slot, oldest first.
    waiting: VecDeque<oneshot::Sender<Slot>>,
}

/// What the fleet's script said of an ended attempt, and whether it met a broken value.
pub(super) struct Ended {
    /// The word for the gate.
    pub word: Word,
    /// A value under the limit's keys was no valid one (dropped).
    pub broken: bool,
}

impl Slots {
    /// A request for a slot, answered when one is granted.
    pub(super) fn ask(&mut self, answer: oneshot::Sender<Slot>) {
        self.waiting.push_back(answer);
    }

    /// Whether requests wait for a slot (the thread then asks the server more often).
    pub(super) fn waiting(&mut self) -> bool {
        self.waiting.retain(|w| !w.is_closed());
        !self.waiting.is_empty()
    }

    /// The server cannot be asked: every waiting request is left unanswered (its attempt
    /// goes by its own gate).
    pub(super) fn unanswered(&mut self) {
        self.waiting.clear();
    }

    /// Grant the waiting requests what the fleet has free, in one script; `true` when it
    /// met a broken value (dropped). A slot whose request was dropped meanwhile goes back.
    ///
    /// Errors: the server failed.
    pub(super) fn grant(
        &mut self,
        con: &mut Connection,
        keys: &Keys,
        worker: &str,
        (now_ms, lease): (u64, Duration),
    ) -> redis::RedisResult<bool> {
        let mut call = invoke(acquire_script(), keys, (now_ms, lease));
        call.arg(worker)
            .arg(self.jobs.max(1))
            .arg(self.waiting.len());
        let (broken, version, limit, tokens): (i64, i64, i64, Vec<String>) = call.invoke(con)?;
        let mut broken = broken != 0;
        for token in tokens {
            let slot = Slot {
                token: token.clone(),
                version: u64::try_from(version).unwrap_or(0),
                limit: usize::try_from(limit).unwrap_or(0),
            };
            match self.waiting.pop_front().map(|w| w.send(slot)) {
                Some(Ok(())) => {
                    self.held.insert(token);
                }
                Some(Err(slot)) => {
                    broken |= self
                        .end(con, keys, &slot, Ending::Dropped, (now_ms, lease))?
                        .broken;
                }
                None => {
                    let slot = Slot {
                        token,
                        version: 0,
                        limit: 0,
                    };
                    broken |= self
                        .end(con, keys, &slot, Ending::Dropped, (now_ms, lease))?
                        .broken;
                }
            }
        }
        Ok(broken)
    }

    /// Give `slot` back, its attempt ended as `ending`: the fleet's word on it.
    ///
    /// Errors: the server failed (the token is dropped after its lease).
    pub(super) fn end(
        &mut self,
        con: &mut Connection,
        keys: &Keys,
        slot: &Slot,
        ending: Ending,
        (now_ms, lease): (u64, Duration),
    ) -> redis::RedisResult<Ended> {
        self.held.remove(&slot.token);
        let mut call = invoke(end_script(), keys, (now_ms, lease));
        call.arg(&slot.token).arg(ending.as_str());
        let (broken, word, first, _version, limit): (i64, String, i64, i64, i64) =
            call.invoke(con)?;
        let limited = match word.as_str() {
            "alone" => Some(Limited::Alone),
            "pause" => Some(Limited::Pause { first: first != 0 }),
            _ => None,
        };
        Ok(Ended {
            word: Word {
                limited: limited.filter(|_| ending == Ending::Limited),
                limit: usize::try_from(limit).unwrap_or(0),
            },
            broken: broken != 0,
        })
    }

    /// Renew the tokens this worker's running attempts hold, for a lease from now.
    ///
    /// Errors: the server failed.
    pub(super) fn renew(
        &self,
        con: &mut Connection,
        keys: &Keys,
        lease: Duration,
    ) -> redis::RedisResult<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        Script::new(RENEW)
            .key(keys.slots())
            .arg(lease.as_millis() as u64)
            .arg(self.held.iter().collect::<Vec<_>>())
            .invoke::<i64>(con)
            .map(|_| ())
    }
}

/// The [`SharedLimit`] a worker's gate asks: requests go to the queue's thread, which owns
/// the connection.
#[derive(Debug)]
pub(crate) struct FleetLimit {
    to_thread: Sender<Cmd>,
}

impl FleetLimit {
    /// The fleet's limit as seen through the queue thread that `to_thread` reaches.
    pub(crate) fn new(to_thread: Sender<Cmd>) -> Arc<FleetLimit> {
        Arc::new(FleetLimit { to_thread })
    }
}

impl SharedLimit for FleetLimit {
    fn acquire(&self) -> oneshot::Receiver<Slot> {
        let (answer, asked) = oneshot::channel();
        // A thread gone (the run over) drops the answer: the attempt goes by its own gate.
        let _ = self.to_thread.send(Cmd::Acquire(answer));
        asked
    }

    fn end(&self, slot: Slot, ending: Ending) -> oneshot::Receiver<Word> {
        let (answer, asked) = oneshot::channel();
        let _ = self.to_thread.send(Cmd::Release {
            slot,
            ending,
            answer,
        });
        asked
    }
}
