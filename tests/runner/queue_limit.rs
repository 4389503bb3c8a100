//! One rate limit for a fleet (issue 54): the workers of a `--queue` run share the AIMD
//! limit through the queue's server (`…:slots`, `…:limit`), so three workers against one
//! rate-limited API learn one limit instead of each its own; a killed worker's slots come
//! back after its lease. Against a real `redis-server` (see `queue.rs`) and a stand-in API
//! on 127.0.0.1 that serves one request at once, as the bench's does with two.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::harness::{Run, Sandbox, wait_for};
use crate::queue::{Redis, batch, collect, ran, rows, worker};

/// How long the stand-in takes to serve one request.
const SERVICE: Duration = Duration::from_millis(250);

/// A stand-in API that serves one request at once ([`SERVICE`] each) and answers every
/// request above that with 429 and `Retry-After: 1`, counting them.
struct Api {
    port: u16,
    limited: Arc<AtomicUsize>,
}

impl Api {
    fn start() -> Api {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("its address").port();
        let limited = Arc::new(AtomicUsize::new(0));
        let busy = Arc::new(AtomicBool::new(false));
        let counted = limited.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (busy, limited) = (busy.clone(), counted.clone());
                std::thread::spawn(move || answer(stream, &busy, &limited));
            }
        });
        Api { port, limited }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1/call", self.port)
    }

    /// Requests answered 429 so far.
    fn limited(&self) -> usize {
        self.limited.load(Ordering::SeqCst)
    }
}

/// Read one request (headers, then a body of its Content-Length) and answer it.
fn answer(mut s: TcpStream, busy: &AtomicBool, limited: &AtomicUsize) {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Ok(n) = s.read(&mut chunk) else { return };
        if n == 0 {
            return;
        }
        got.extend_from_slice(&chunk[..n]);
        let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
        let len = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if got.len() >= end + 4 + len {
            break;
        }
    }
    let reply = |s: &mut TcpStream, status: &str, extra: &str| {
        let body = "{}";
        let _ = write!(
            s,
            "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = s.flush();
    };
    if busy
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        std::thread::sleep(SERVICE);
        reply(&mut s, "200 OK", "");
        busy.store(false, Ordering::SeqCst);
    } else {
        limited.fetch_add(1, Ordering::SeqCst);
        reply(&mut s, "429 Too Many Requests", "Retry-After: 1\r\n");
    }
}

/// The exec agent: one POST to `$API` with curl; its report says completed, or failed
/// `rate_limited` with the answer's Retry-After (as the bench's agent does).
const CALLER: &str = r#"#!/bin/sh
cat > /dev/null 2>&1 || true
headers=$(mktemp)
code=$(curl -s -o /dev/null -D "$headers" -w '%{http_code}' -X POST -d '{}' "$API")
after=$(awk 'tolower($1) == "retry-after:" { gsub(/\r/, "", $2); print $2 }' "$headers")
rm -f "$headers"
if [ "$code" = 200 ]; then
    printf '{"status":"completed","summary":"answered"}' > "$RUNNER_REPORT"
    exit 0
fi
kind=api_error
[ "$code" = 429 ] && kind=rate_limited
printf '{"status":"failed","summary":"HTTP %s","failure_kind":"%s"%s}' "$code" "$kind" \
    "${after:+,\"retry_after_s\":$after}" > "$RUNNER_REPORT"
exit 1
"#;

/// Wait for `child` at most `secs`; a worker still running then is killed and the test
/// fails (a fleet that never gives its slots back would wait for ever).
fn finish_within(child: Child, secs: u64) -> Run {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(out) => out.expect("worker ends").into(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("worker {pid} still running after {secs} s");
        }
    }
}

/// Items, workers and each worker's `--jobs` of the fleet test.
const ITEMS: usize = 30;

/// Three workers, `-j 4` each, against an API that serves one request at once. Each
/// worker learning its own limit keeps at least one attempt going, so the API sees three at
/// once over and over and answers 429 to two of them; the fleet's one limit settles at one
/// or two. The first burst (twelve at once) costs eleven 429s either way; after it, the
/// fleet's probes cost a few each.
#[test]
fn three_workers_against_one_rate_limited_api_learn_one_limit() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let api = Api::start();
    let mut csv = String::from("id,mode\n");
    for i in 1..=ITEMS {
        csv.push_str(&format!("r{i:02},api\n"));
    }
    sb.write_csv(&csv);
    sb.write("caller.sh", CALLER);
    let caller = sb.join("caller.sh").display().to_string();
    let workers: Vec<Child> = (1..=3)
        .map(|w| {
            let out = format!("w{w}.csv");
            let flags = [
                "--id-column",
                "id",
                "--format",
                "plain",
                "--queue",
                &redis.url(),
                "-j",
                "4",
                "-o",
                &out,
            ];
            let mut c = sb.batch_cmd(&flags, &["sh", &caller]);
            c.env("API", api.url())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            c.spawn().expect("spawn a worker")
        })
        .collect();
    let runs: Vec<Run> = workers.into_iter().map(|w| finish_within(w, 300)).collect();
    for r in &runs {
        assert_eq!(r.code, 0, "{r:?}");
    }
    // Every item ran to its verdict once across the fleet, and completed.
    assert_eq!(runs.iter().map(ran).sum::<u64>(), ITEMS as u64, "{runs:?}");
    assert_eq!(redis.verdicts(), ITEMS as u64);
    assert_eq!(redis.number(&["LLEN", "runner:in.csv:duplicates"]), 0);
    let c = collect(&sb, &redis, "all.csv");
    assert_eq!(c.code, 0, "{c:?}");
    let all = rows(&sb.join("all.csv"));
    assert_eq!(all.len(), ITEMS);
    assert!(all.iter().all(|r| r[1] == "completed"), "{all:?}");
    // No slot is left out once the run is over.
    assert_eq!(redis.number(&["ZCARD", "runner:in.csv:slots"]), 0);
    // Each worker on its own limit: 77–86 × 429 here; one limit for the fleet: 17 (eleven of
    // them the first burst's).
    let limited = api.limited();
    assert!(
        limited <= 2 * ITEMS / 3 + 11,
        "{limited} × 429 for {ITEMS} items: the workers did not share one limit"
    );
    // The fleet learned the server's one at once (two while a probe is on), and says so.
    let limit = redis.number(&["HGET", "runner:in.csv:limit", "limit"]);
    assert!((1..=2).contains(&limit), "the fleet's limit: {limit}");
    let status = sb.run(&["status", "--queue", &redis.url(), "in.csv"]);
    assert!(
        status.stdout.contains(&format!(
            "Rate limit: {limit} attempt(s) at once across the workers"
        )),
        "{status:?}"
    );
}

/// A worker killed with `kill -9` while its attempts hold slots: they come back after its
/// lease, and the run completes on another worker. Values under the limit's keys that no
/// runner writes are warned of and ignored.
#[test]
fn a_killed_worker_s_slots_come_back_after_its_lease() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 6);
    let slots = "runner:in.csv:slots";
    let mut first = worker(&sb, &redis, "2", "a.csv");
    wait_for("the first worker's attempts to hold two slots", 30, || {
        redis.number(&["ZCARD", slots]) == 2
    });
    // The fleet has learned a limit of two (a burst would set it so): the first worker's
    // slots are all of it.
    redis.cli(&["HSET", "runner:in.csv:limit", "limit", "2"]);
    // Someone else wrote the keys: a credit that is no number, a member that is no token.
    redis.cli(&["HSET", "runner:in.csv:limit", "credit", "lots"]);
    redis.cli(&["ZADD", slots, "1e15", "not-a-token"]);
    let _ = Command::new("kill")
        .args(["-9", &first.id().to_string()])
        .status();
    let _ = first.wait();
    for (pid, _) in sb.live_processes() {
        let _ = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
    std::fs::write(&release, "").expect("release");
    let second = finish_within(worker(&sb, &redis, "2", "b.csv"), 120);
    assert_eq!(second.code, 0, "{second:?}");
    assert_eq!(ran(&second), 6, "{second:?}");
    assert_eq!(redis.verdicts(), 6);
    assert_eq!(redis.held(), 0);
    assert_eq!(redis.number(&["ZCARD", slots]), 0);
    assert!(
        second.stderr.contains("no part of a fleet's rate limit"),
        "{second:?}"
    );
    assert!(sb.survivors_after(5.0).is_empty());
}
