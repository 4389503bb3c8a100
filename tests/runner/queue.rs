//! `--queue redis://…` (issue 54): workers of one batch sharing a Redis Streams work queue,
//! against a real `redis-server` (Debian's, installed by `.ci/run`) that each test starts
//! on a free 127.0.0.1 port in a temporary folder and stops at its end. Leases are cut to
//! a second (`RUNNER_QUEUE_LEASE_MS`) so a dead worker's item is taken over quickly.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::harness::{Run, Sandbox, by_id, wait_for};

/// A `redis-server` of this test's own (append-only file on, no snapshots, in the
/// foreground), killed when dropped.
pub(crate) struct Redis {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    /// TLS only: the `--tls-*` arguments (its port is then the TLS port, plain TCP off).
    tls: Vec<String>,
}

impl Redis {
    /// Start one; `None` (the test skips, or fails under RUNNER_TEST_REQUIRE_ALL) when
    /// `redis-server` is not installed.
    pub(crate) fn start() -> Option<Redis> {
        Redis::start_with(Vec::new())
    }

    /// Start one speaking TLS only, with `tls` its `--tls-*` arguments.
    fn start_with(tls: Vec<String>) -> Option<Redis> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            crate::skip::skip(
                "queue: no redis-server (Debian's redis-server package; .ci/run installs it)",
            );
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut r = Redis {
            child: None,
            port,
            dir: tempfile::tempdir().expect("tempdir"),
            tls,
        };
        r.spawn();
        Some(r)
    }

    fn spawn(&mut self) {
        let port = self.port.to_string();
        let ports = match self.tls.is_empty() {
            true => vec!["--port", &port],
            false => vec!["--port", "0", "--tls-port", &port],
        };
        let child = Command::new("redis-server")
            .args(ports)
            .args(&self.tls)
            .args(["--bind", "127.0.0.1"])
            .args(["--appendonly", "yes", "--save", "", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        if !self.tls.is_empty() {
            wait_for("redis-server to listen", 20, || {
                std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            });
            return;
        }
        wait_for("redis-server to answer", 20, || {
            self.cli(&["PING"]).trim() == "PONG"
        });
    }

    /// Stop the server as a restart does (SIGTERM: it writes its append-only file and
    /// exits) and start it again on the same port and folder.
    fn restart(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg(c.id().to_string()).status();
            let _ = c.wait();
        }
        self.spawn();
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `redis-cli -p PORT ARGS`' stdout.
    pub(crate) fn cli(&self, args: &[&str]) -> String {
        Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    pub(crate) fn number(&self, args: &[&str]) -> u64 {
        self.cli(args)
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Items claimed and not finished, by every worker.
    pub(crate) fn held(&self) -> u64 {
        self.number(&["XPENDING", "runner:in.csv:items", "workers"])
    }

    pub(crate) fn verdicts(&self) -> u64 {
        self.number(&["HLEN", "runner:in.csv:results"])
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The batch: `n` rows whose fake agent waits for `release` to exist (none does yet).
pub(crate) fn batch(sb: &Sandbox, n: usize) -> PathBuf {
    let mut csv = String::from("id,mode\n");
    for i in 1..=n {
        csv.push_str(&format!("r{i:02},wait_file\n"));
    }
    sb.write_csv(&csv);
    sb.join("release")
}

/// A worker: `runner batch … --queue URL -j JOBS -o OUT -- <fake agent>`, not waited for.
pub(crate) fn worker(sb: &Sandbox, redis: &Redis, jobs: &str, out: &str) -> Child {
    let mut c = sb.fake_batch_cmd(&["--queue", &redis.url(), "-j", jobs, "-o", out]);
    c.env("RELEASE_FILE", sb.join("release"))
        .env("RUNNER_QUEUE_LEASE_MS", "1000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().expect("spawn a worker")
}

pub(crate) fn finish(child: Child) -> Run {
    child.wait_with_output().expect("worker ends").into()
}

/// How many items a worker ran, from its closing summary (`Summary: N item(s)…`).
pub(crate) fn ran(run: &Run) -> u64 {
    run.stdout
        .lines()
        .chain(run.stderr.lines())
        .find_map(|l| l.strip_prefix("Summary: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary in {run:?}"))
}

/// `runner collect --queue URL` of the batch into `out`.
pub(crate) fn collect(sb: &Sandbox, redis: &Redis, out: &str) -> Run {
    sb.run(&[
        "collect",
        "--queue",
        &redis.url(),
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--id-column",
        "id",
        "--format",
        "plain",
        "-o",
        out,
    ])
}

/// Each row's id, status, attempts and result: what a user reads of an output.
pub(crate) fn rows(path: &Path) -> Vec<[String; 4]> {
    by_id(path, "id")
        .into_values()
        .map(|r| {
            [
                r["id"].clone(),
                r["status"].clone(),
                r["attempts"].clone(),
                r["result"].clone(),
            ]
        })
        .collect()
}

#[test]
fn four_workers_produce_the_output_of_one_process() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 16);
    std::fs::write(&release, "").expect("release");
    let workers: Vec<Child> = (1..=4)
        .map(|w| worker(&sb, &redis, "2", &format!("w{w}.csv")))
        .collect();
    let runs: Vec<Run> = workers.into_iter().map(finish).collect();
    for r in &runs {
        assert_eq!(r.code, 0, "{r:?}");
    }
    // Every item ran exactly once across the fleet.
    assert_eq!(runs.iter().map(ran).sum::<u64>(), 16, "{runs:?}");
    assert_eq!(redis.verdicts(), 16);
    assert_eq!(redis.number(&["LLEN", "runner:in.csv:duplicates"]), 0);
    let c = collect(&sb, &redis, "all.csv");
    assert_eq!(c.code, 0, "{c:?}");
    let one: Run = sb
        .fake_batch_cmd(&["-o", "one.csv"])
        .env("RELEASE_FILE", &release)
        .output()
        .expect("spawn")
        .into();
    assert_eq!(one.code, 0, "{one:?}");
    assert_eq!(rows(&sb.join("all.csv")), rows(&sb.join("one.csv")));
    // Same columns, same row order.
    let header = |f: &str| sb.read(f).lines().next().map(str::to_owned);
    assert_eq!(header("all.csv"), header("one.csv"));
    let ids = |f: &str| -> Vec<String> {
        crate::harness::csv_rows(&sb.join(f))
            .into_iter()
            .map(|r| r["id"].clone())
            .collect()
    };
    assert_eq!(ids("all.csv"), ids("one.csv"));
    let status = sb.run(&["status", "--queue", &redis.url(), "in.csv"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(status.stdout.contains("16 of 16 done"), "{status:?}");
}

#[test]
fn a_worker_killed_mid_item_loses_nothing() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 5);
    let mut first = worker(&sb, &redis, "1", "a.csv");
    wait_for("the first worker to claim an item", 30, || {
        redis.held() == 1
    });
    // kill -9: no chance to hand its item back or record anything.
    let _ = Command::new("kill")
        .args(["-9", &first.id().to_string()])
        .status();
    let _ = first.wait();
    // Its orphaned agent is gone with it, as a dead machine's would be.
    for (pid, _) in sb.live_processes() {
        let _ = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
    assert_eq!(redis.verdicts(), 0);
    // `runner status --queue` names it dead once its lease ran out, with its item.
    let status = || {
        let mut c = sb.cmd(&["status", "--queue", &redis.url(), "in.csv"]);
        c.env("RUNNER_QUEUE_LEASE_MS", "1000");
        let r: Run = c.output().expect("status").into();
        r
    };
    wait_for("status to show the dead worker", 30, || {
        status().stdout.contains("dead, 1 item(s) to be taken over")
    });
    let s = status();
    assert_eq!(s.code, 1, "{s:?}");
    assert!(s.stdout.contains("0 of 5 done"), "{s:?}");
    assert!(s.stdout.contains("4 pending"), "{s:?}");
    std::fs::write(&release, "").expect("release");
    let second = finish(worker(&sb, &redis, "2", "b.csv"));
    assert_eq!(second.code, 0, "{second:?}");
    // Every item, the dead worker's too (after its lease), ran here and has one verdict.
    assert_eq!(ran(&second), 5, "{second:?}");
    assert_eq!(redis.verdicts(), 5);
    assert_eq!(redis.number(&["LLEN", "runner:in.csv:duplicates"]), 0);
    assert_eq!(redis.held(), 0);
    let c = collect(&sb, &redis, "all.csv");
    assert_eq!(c.code, 0, "{c:?}");
    assert!(
        rows(&sb.join("all.csv"))
            .iter()
            .all(|r| r[1] == "completed")
    );
    assert!(sb.survivors_after(5.0).is_empty());
}

#[test]
fn a_late_worker_joins_the_run() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 6);
    let first = worker(&sb, &redis, "1", "a.csv");
    wait_for("the first worker to claim an item", 30, || {
        redis.held() == 1
    });
    let late = worker(&sb, &redis, "2", "b.csv");
    wait_for("the late worker to claim its items", 30, || {
        redis.held() == 3
    });
    std::fs::write(&release, "").expect("release");
    let (first, late) = (finish(first), finish(late));
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(late.code, 0, "{late:?}");
    assert!(ran(&late) >= 2, "{late:?}");
    assert_eq!(ran(&first) + ran(&late), 6);
    assert_eq!(redis.verdicts(), 6);
}

#[test]
fn seeding_twice_is_a_no_op() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 3);
    std::fs::write(&release, "").expect("release");
    let first = finish(worker(&sb, &redis, "2", "a.csv"));
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(ran(&first), 3);
    let stream = redis.cli(&["XRANGE", "runner:in.csv:items", "-", "+"]);
    let results = redis.cli(&["HGETALL", "runner:in.csv:results"]);
    // The same batch again: it joins a run that is over, adds no item and runs none.
    let again = finish(worker(&sb, &redis, "2", "b.csv"));
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(ran(&again), 0, "{again:?}");
    assert_eq!(
        redis.cli(&["XRANGE", "runner:in.csv:items", "-", "+"]),
        stream
    );
    assert_eq!(redis.cli(&["HGETALL", "runner:in.csv:results"]), results);
}

#[test]
fn another_batch_under_the_same_key_is_refused() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 2);
    std::fs::write(&release, "").expect("release");
    let first = finish(worker(&sb, &redis, "2", "a.csv"));
    assert_eq!(first.code, 0, "{first:?}");
    // The same input file name, another instruction: another batch.
    sb.write("instr.md", "Something else for {id}. MODE={mode}\n");
    let before = sb.tree();
    let url = redis.url().replace("redis://", "redis://:hunter2-secret@");
    let mut c = sb.fake_batch_cmd(&["--queue", &url, "-o", "other.csv"]);
    let other: Run = c.output().expect("spawn").into();
    // A password the server does not expect is refused by it, the URL redacted.
    assert_eq!(other.code, 3, "{other:?}");
    assert!(!other.stderr.contains("hunter2"), "{other:?}");
    let other = sb.fake_batch(&["--queue", &redis.url(), "-o", "other.csv"]);
    assert_eq!(other.code, 2, "{other:?}");
    assert!(other.stderr.contains("holds another batch"), "{other:?}");
    assert_eq!(sb.tree(), before, "nothing on disk changed");
    assert_eq!(redis.verdicts(), 2);
}

#[test]
fn a_restarted_server_loses_nothing() {
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let sb = Sandbox::new();
    let release = batch(&sb, 6);
    let w = worker(&sb, &redis, "2", "a.csv");
    wait_for("the worker to claim two items", 30, || redis.held() == 2);
    redis.restart();
    // The claims survived in the append-only file.
    assert_eq!(redis.held(), 2);
    std::fs::write(&release, "").expect("release");
    let w = finish(w);
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(ran(&w), 6, "{w:?}");
    assert_eq!(redis.verdicts(), 6);
    let c = collect(&sb, &redis, "all.csv");
    assert_eq!(c.code, 0, "{c:?}");
    assert_eq!(rows(&sb.join("all.csv")).len(), 6);
}

#[test]
fn a_rate_limit_met_by_one_worker_pauses_every_worker() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    // The first item meets a 429 that asks for 30 s; the others wait for a file never made.
    let mut csv = String::from("id,mode\nr01,rate_limited_long\n");
    for i in 2..=4 {
        csv.push_str(&format!("r{i:02},wait_file\n"));
    }
    sb.write_csv(&csv);
    let first = worker(&sb, &redis, "1", "a.csv");
    wait_for("the first worker to claim the first item", 30, || {
        redis.held() == 1
    });
    let second = worker(&sb, &redis, "1", "b.csv");
    let journal = || {
        std::fs::read_to_string(sb.workspace_of(&sb.join("b.runner")).join("journal.jsonl"))
            .unwrap_or_default()
    };
    wait_for(
        "the second worker to pause for the first one's 429",
        30,
        || journal().contains("\"team_paused\""),
    );
    let own = journal();
    // It met no rate limit of its own.
    assert!(!own.contains("rate_limited"), "{own}");
    for w in [&first, &second] {
        let _ = Command::new("kill").arg(w.id().to_string()).status();
    }
    let (first, second) = (finish(first), finish(second));
    assert_eq!(first.code, 130, "{first:?}");
    assert_eq!(second.code, 130, "{second:?}");
    assert!(sb.survivors_after(10.0).is_empty());
}

#[test]
fn max_fail_counts_the_whole_fleet() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let mut csv = String::from("id,mode\nr01,failed\n");
    for i in 2..=5 {
        csv.push_str(&format!("r{i:02},wait_file\n"));
    }
    sb.write_csv(&csv);
    let first = worker(&sb, &redis, "1", "a.csv");
    wait_for("the first worker's failed verdict", 30, || {
        redis.number(&["HGET", "runner:in.csv:meta", "failed"]) == 1 && redis.held() == 1
    });
    // A worker that failed nothing itself stops at once: the fleet is at --max-fail 1.
    let mut c = sb.fake_batch_cmd(&["--queue", &redis.url(), "-o", "b.csv", "--max-fail", "1"]);
    c.env("RUNNER_QUEUE_LEASE_MS", "1000");
    let mut second = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let ended = (0..600).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        second.try_wait().ok().flatten().is_some()
    });
    if !ended {
        let _ = second.kill();
    }
    let second = finish(second);
    assert!(ended, "the second worker went on: {second:?}");
    assert_eq!(ran(&second), 0, "{second:?}");
    let journal =
        std::fs::read_to_string(sb.workspace_of(&sb.join("b.runner")).join("journal.jsonl"))
            .expect("journal");
    assert!(journal.contains("across the fleet"), "{journal}");
    let _ = Command::new("kill").arg(first.id().to_string()).status();
    let first = finish(first);
    assert_eq!(first.code, 130, "{first:?}");
    assert!(sb.survivors_after(10.0).is_empty());
}

#[test]
fn longest_first_seeds_the_queue_heaviest_first() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    sb.write_csv("id,mode,weight\na,success,1\nb,success,5\nc,success,\nd,success,3\n");
    let r = sb.fake_batch(&[
        "--queue",
        &redis.url(),
        "--order",
        "longest-first",
        "--weight-column",
        "weight",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let seeded: Vec<String> = redis
        .cli(&["XRANGE", "runner:in.csv:items", "-", "+"])
        .lines()
        .filter(|l| l.len() == 1)
        .map(str::to_owned)
        .collect();
    assert_eq!(seeded, ["b", "d", "a", "c"]);
}

#[test]
fn depends_on_holds_across_workers() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    // b waits for a (held by the first worker until the release), d for c, which fails.
    sb.write_csv(
        "id,mode,depends_on\na,wait_file,\nb,success,a\nc,failed,\nd,success,c\ne,success,\n",
    );
    let first = worker(&sb, &redis, "1", "a.csv");
    wait_for("the first worker to claim a", 30, || redis.held() == 1);
    let second = worker(&sb, &redis, "2", "b.csv");
    // Everything but a and b settles; b waits for a.
    wait_for("c, d and e to have their verdicts", 30, || {
        redis.verdicts() == 3
    });
    assert_eq!(
        redis.cli(&["HEXISTS", "runner:in.csv:results", "b"]).trim(),
        "0"
    );
    std::fs::write(sb.join("release"), "").expect("release");
    let (first, second) = (finish(first), finish(second));
    assert_eq!(first.code + second.code, 1, "{first:?}\n{second:?}");
    let c = collect(&sb, &redis, "all.csv");
    assert_eq!(c.code, 1, "{c:?}");
    let rows = by_id(&sb.join("all.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed");
    assert_eq!(rows["b"]["status"], "completed");
    // b started only once a had finished, on whichever worker.
    assert!(
        rows["b"]["started_at"] >= rows["a"]["finished_at"],
        "{rows:?}"
    );
    assert_eq!(rows["c"]["status"], "failed");
    assert_eq!(rows["d"]["status"], "skipped");
    assert!(rows["d"]["error"].contains("prerequisite c"), "{rows:?}");
    assert_eq!(rows["e"]["status"], "completed");
}

#[test]
fn a_verdict_that_is_no_outcome_of_the_batch_is_refused_by_collect() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 2);
    std::fs::write(&release, "").expect("release");
    let w = finish(worker(&sb, &redis, "2", "a.csv"));
    assert_eq!(w.code, 0, "{w:?}");
    // Someone else wrote the queue: a result that is no outcome, under an id of the batch.
    redis.cli(&[
        "HSET",
        "runner:in.csv:results",
        "r01",
        "{\"status\":\"completed\"}",
    ]);
    let c = collect(&sb, &redis, "all.csv");
    assert_eq!(c.code, 2, "{c:?}");
    assert!(c.stderr.contains("item `r01` that is not valid"), "{c:?}");
    assert!(!sb.join("all.csv").exists());
}

#[test]
fn batch_md_names_the_queue_for_workers_and_collect() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 3);
    std::fs::write(&release, "").expect("release");
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\nqueue: {}\n---\nHandle {{id}}. MODE={{mode}}\n",
            redis.url()
        ),
    );
    let fake = crate::harness::agent("fake_agent.py");
    let w: Run = sb
        .cmd(&[
            "batch", "BATCH.md", "-o", "w.csv", "--format", "plain", "--", "python3", &fake,
        ])
        .env("RELEASE_FILE", &release)
        .output()
        .expect("spawn")
        .into();
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(redis.verdicts(), 3);
    let c = sb.run(&["collect", "BATCH.md", "-o", "all.csv", "--format", "plain"]);
    assert_eq!(c.code, 0, "{c:?}");
    assert_eq!(rows(&sb.join("all.csv")).len(), 3);
}

#[test]
fn a_queue_with_a_shard_or_only_is_refused_before_anything_is_written() {
    let sb = Sandbox::new();
    batch(&sb, 2);
    let before = sb.tree();
    // No server needed: the plan is refused first.
    let r = sb.fake_batch(&["--queue", "redis://127.0.0.1:9", "--shard", "1/2"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--queue") && r.stderr.contains("--shard"),
        "{r:?}"
    );
    let r = sb.fake_batch(&["--queue", "redis://127.0.0.1:9", "--only", "r01"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--queue") && r.stderr.contains("--only"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before);
}

/// A two-stage batch (BATCH.md `stages:`, input `in.csv`): `audit` reports a summary, `fix`
/// repeats the audit's summary it was given, and fails for a row whose note is FAIL.
fn two_stages(sb: &Sandbox, rows: usize) {
    sb.write(
        "agent.sh",
        r#"prompt=$(cat)
case "$RUNNER_STAGE" in
  audit) printf '{"status":"completed","summary":"audited %s"}' "$RUNNER_ITEM_ID" > "$RUNNER_REPORT";;
  fix)
    case "$prompt" in *FAIL*) echo "cannot fix" >&2; exit 3;; esac
    given=$(printf '%s\n' "$prompt" | grep '^Fix ' | head -n 1)
    printf '{"status":"completed","summary":"%s"}' "$given" > "$RUNNER_REPORT";;
esac
"#,
    );
    sb.write(
        "BATCH.md",
        "---\ninput: in.csv\nid_column: id\nrunner: exec\ncommand: [sh, agent.sh]\nstages:\n  - name: audit\n    instruction: \"Audit {id}.\"\n  - name: fix\n    instruction: \"Fix {id} ({note}) given {audit.summary}\"\n---\nEvery stage starts with this.\n",
    );
    let mut csv = String::from("id,note\n");
    for i in 1..=rows {
        let note = if i == 2 { "FAIL" } else { "fine" };
        csv.push_str(&format!("r{i:02},{note}\n"));
    }
    sb.write("in.csv", csv);
}

#[test]
fn a_staged_batch_on_three_workers_gives_the_output_of_one_process() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    two_stages(&sb, 6);
    let staged_worker = |out: &str| {
        sb.cmd(&[
            "batch",
            "BATCH.md",
            "--queue",
            &redis.url(),
            "-j",
            "1",
            "-o",
            out,
            "--format",
            "plain",
        ])
        .env("RUNNER_QUEUE_LEASE_MS", "1000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a worker")
    };
    let workers: Vec<Child> = (1..=3)
        .map(|w| staged_worker(&format!("w{w}.csv")))
        .collect();
    let runs: Vec<Run> = workers.into_iter().map(finish).collect();
    // One row's fix stage failed: the run did not complete on whichever worker ran it.
    assert_eq!(runs.iter().filter(|r| r.code == 1).count(), 1, "{runs:?}");
    assert!(runs.iter().all(|r| r.code <= 1), "{runs:?}");
    // Every stage of every row has one verdict, each row's stages from the same worker.
    assert_eq!(redis.verdicts(), 12);
    assert_eq!(redis.number(&["LLEN", "runner:in.csv:duplicates"]), 0);
    let worker_of = |id: &str| -> String {
        let json = redis.cli(&["HGET", "runner:in.csv:results", id]);
        let v: serde_json::Value = serde_json::from_str(json.trim()).expect("a verdict");
        v["worker"].as_str().expect("its worker").to_owned()
    };
    for i in 1..=6 {
        assert_eq!(
            worker_of(&format!("r{i:02}/audit")),
            worker_of(&format!("r{i:02}/fix")),
            "row r{i:02}'s stages ran on one worker"
        );
    }
    let c = sb.run(&[
        "collect",
        "BATCH.md",
        "--queue",
        &redis.url(),
        "-o",
        "all.csv",
        "--format",
        "plain",
    ]);
    assert_eq!(c.code, 1, "{c:?}");
    let one = sb.run(&["batch", "BATCH.md", "-o", "one.csv", "--format", "plain"]);
    assert_eq!(one.code, 1, "{one:?}");
    let header = |f: &str| sb.read(f).lines().next().map(str::to_owned);
    assert_eq!(header("all.csv"), header("one.csv"));
    let cells = |f: &str| -> Vec<Vec<String>> {
        crate::harness::csv_rows(&sb.join(f))
            .into_iter()
            .map(|r| {
                [
                    "id",
                    "status",
                    "attempts",
                    "error",
                    "audit.status",
                    "audit.summary",
                    "fix.status",
                    "fix.summary",
                ]
                .iter()
                .map(|c| {
                    r.get(*c)
                        .cloned()
                        .unwrap_or_else(|| panic!("no {c} in {f}"))
                })
                .collect()
            })
            .collect()
    };
    assert_eq!(cells("all.csv"), cells("one.csv"));
    let rows = by_id(&sb.join("all.csv"), "id");
    assert_eq!(
        rows["r01"]["fix.summary"],
        "Fix r01 (fine) given audited r01/audit"
    );
    assert_eq!(rows["r02"]["fix.status"], "failed");
}

#[test]
fn only_failed_hands_out_again_exactly_what_failed_in_the_queue() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    // r02 fails on its first attempt only, r04 always.
    sb.write_csv("id,mode\nr01,success\nr02,flaky\nr03,success\nr04,failed\n");
    let first = finish(worker(&sb, &redis, "2", "a.csv"));
    assert_eq!(first.code, 1, "{first:?}");
    assert_eq!(redis.verdicts(), 4);
    let kept = |id: &str| redis.cli(&["HGET", "runner:in.csv:results", id]);
    let (r01, r03) = (kept("r01"), kept("r03"));
    let entries = || redis.number(&["XLEN", "runner:in.csv:items"]);
    assert_eq!(entries(), 4);
    // The rerun: the queue's two failed items, and only they, are handed out again.
    let mut c = sb.fake_batch_cmd(&["--queue", &redis.url(), "-o", "a.csv", "--only", "failed"]);
    c.env("RUNNER_QUEUE_LEASE_MS", "1000");
    let again: Run = c.output().expect("spawn").into();
    assert_eq!(again.code, 1, "r04 failed again: {again:?}");
    assert_eq!(ran(&again), 2, "{again:?}");
    assert_eq!(entries(), 6);
    assert_eq!(redis.verdicts(), 4);
    assert_eq!(
        (kept("r01"), kept("r03")),
        (r01, r03),
        "completed ones kept"
    );
    // Seeding once more without --only is still a no-op: the run is over.
    let plain = finish(worker(&sb, &redis, "2", "b.csv"));
    assert_eq!(plain.code, 0, "{plain:?}");
    assert_eq!(ran(&plain), 0, "{plain:?}");
    assert_eq!(entries(), 6);
    // collect shows the merged run.
    let c = collect(&sb, &redis, "all.csv");
    assert_eq!(c.code, 1, "{c:?}");
    let rows = by_id(&sb.join("all.csv"), "id");
    assert_eq!(rows["r01"]["status"], "completed");
    assert_eq!(rows["r02"]["status"], "completed");
    assert_eq!(rows["r02"]["attempts"], "2");
    assert_eq!(rows["r03"]["status"], "completed");
    assert_eq!(rows["r04"]["status"], "failed");
    // Another batch under the key is still refused with --only failed.
    sb.write("instr.md", "Something else for {id}. MODE={mode}\n");
    let other = sb.fake_batch(&["--queue", &redis.url(), "-o", "c.csv", "--only", "failed"]);
    assert_eq!(other.code, 2, "{other:?}");
    assert!(other.stderr.contains("holds another batch"), "{other:?}");
    assert_eq!(entries(), 6);
}

#[test]
fn an_item_taken_over_from_a_killed_worker_continues_its_attempts() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    // r01 fails once released, r02 completes; one retry each.
    sb.write_csv("id,mode\nr01,wait_then_fail\nr02,wait_file\n");
    let release = sb.join("release");
    let mut c = sb.fake_batch_cmd(&["--queue", &redis.url(), "-j", "1", "-o", "a.csv"]);
    c.args(["--retries", "1"])
        .env("RELEASE_FILE", &release)
        .env("RUNNER_QUEUE_LEASE_MS", "1000")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut first = c.spawn().expect("spawn");
    // Its first attempt of r01 started, and the queue knows it.
    wait_for("the first worker to start r01", 30, || {
        redis.cli(&["HGET", "runner:in.csv:attempts", "r01"]).trim() == "1"
    });
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
    let mut c = sb.fake_batch_cmd(&["--queue", &redis.url(), "-j", "2", "-o", "b.csv"]);
    c.args(["--retries", "1"])
        .env("RELEASE_FILE", &release)
        .env("RUNNER_QUEUE_LEASE_MS", "1000");
    let second: Run = c.output().expect("spawn").into();
    assert_eq!(second.code, 1, "{second:?}");
    // The taken-over r01 is its attempt 2 — the last --retries 1 allows — and not retried.
    let journal =
        std::fs::read_to_string(sb.workspace_of(&sb.join("b.runner")).join("journal.jsonl"))
            .expect("journal");
    let starts: Vec<u64> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "attempt_started" && v["id"] == "r01")
        .filter_map(|v| v["attempt"].as_u64())
        .collect();
    assert_eq!(starts, [2], "{journal}");
    let c = collect(&sb, &redis, "all.csv");
    assert_eq!(c.code, 1, "{c:?}");
    let rows = by_id(&sb.join("all.csv"), "id");
    assert_eq!(rows["r01"]["status"], "failed");
    assert_eq!(rows["r01"]["attempts"], "2");
    assert_eq!(rows["r02"]["status"], "completed");
    assert_eq!(rows["r02"]["attempts"], "1");
    assert!(sb.survivors_after(5.0).is_empty());
}

/// A throwaway CA's certificate (PEM) and a server certificate for 127.0.0.1 it signed, with
/// its key: (ca, cert, key).
fn certificates() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().expect("a CA key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key).expect("a CA");
    let key = rcgen::KeyPair::generate().expect("a server key");
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .expect("server params")
        .signed_by(&key, &ca)
        .expect("a server certificate");
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[test]
fn a_run_over_tls_completes_and_a_wrong_ca_is_refused() {
    let sb = Sandbox::new();
    let (ca, cert, key) = certificates();
    let (other_ca, _, _) = certificates();
    sb.write("ca.pem", &ca);
    sb.write("other-ca.pem", &other_ca);
    let certs = tempfile::tempdir().expect("tempdir");
    let at = |name: &str, text: &str| {
        let p = certs.path().join(name);
        std::fs::write(&p, text).expect("write a certificate");
        p.display().to_string()
    };
    let tls = vec![
        "--tls-cert-file".to_owned(),
        at("server.pem", &cert),
        "--tls-key-file".to_owned(),
        at("server.key", &key),
        "--tls-ca-cert-file".to_owned(),
        at("ca.pem", &ca),
        "--tls-auth-clients".to_owned(),
        "no".to_owned(),
        "--requirepass".to_owned(),
        "hunter2-secret".to_owned(),
    ];
    let Some(redis) = Redis::start_with(tls) else {
        return;
    };
    let url = format!("rediss://:hunter2-secret@127.0.0.1:{}", redis.port);
    let release = batch(&sb, 3);
    std::fs::write(&release, "").expect("release");
    let before = sb.tree();
    // A CA that did not sign the server's certificate: refused, the URL named, redacted.
    for ca_flag in [Some("other-ca.pem"), None] {
        let mut args = vec!["--queue", url.as_str(), "-o", "a.csv"];
        if let Some(f) = ca_flag {
            args.extend(["--queue-ca", f]);
        }
        let r: Run = sb
            .fake_batch_cmd(&args)
            .env("RELEASE_FILE", &release)
            .output()
            .expect("spawn")
            .into();
        assert_eq!(r.code, 3, "{r:?}");
        let named = format!("rediss://:REDACTED@127.0.0.1:{}", redis.port);
        assert!(r.stderr.contains(&named), "{r:?}");
        assert!(r.stderr.contains("--queue-ca"), "{r:?}");
        assert!(!r.stderr.contains("hunter2"), "{r:?}");
        assert_eq!(sb.tree(), before, "nothing on disk changed");
    }
    // Its own CA: the run completes over TLS, and collect reads it back.
    let w: Run = sb
        .fake_batch_cmd(&["--queue", &url, "--queue-ca", "ca.pem", "-o", "a.csv"])
        .env("RELEASE_FILE", &release)
        .output()
        .expect("spawn")
        .into();
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(ran(&w), 3, "{w:?}");
    let c = sb.run(&[
        "collect",
        "--queue",
        &url,
        "--queue-ca",
        "ca.pem",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--id-column",
        "id",
        "--format",
        "plain",
        "-o",
        "all.csv",
    ]);
    assert_eq!(c.code, 0, "{c:?}");
    assert_eq!(rows(&sb.join("all.csv")).len(), 3);
    let s = sb.run(&["status", "--queue", &url, "--queue-ca", "ca.pem", "in.csv"]);
    assert_eq!(s.code, 0, "{s:?}");
    assert!(s.stdout.contains("3 of 3 done"), "{s:?}");
}

#[test]
fn a_malformed_entry_in_the_queue_is_reported_not_trusted() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    sb.write_csv("id,mode\nr01,success\nr02,failed\nr03,success\n");
    let first = finish(worker(&sb, &redis, "2", "a.csv"));
    assert_eq!(first.code, 1, "{first:?}");
    let results = "runner:in.csv:results";
    let r01 = redis.cli(&["HGET", results, "r01"]).trim().to_owned();
    let only_failed = || -> Run {
        let mut c =
            sb.fake_batch_cmd(&["--queue", &redis.url(), "-o", "a.csv", "--only", "failed"]);
        c.env("RUNNER_QUEUE_LEASE_MS", "1000");
        c.output().expect("spawn").into()
    };
    // Someone else wrote the queue: r02's verdict has a status no runner writes.
    let forged = r01
        .replace("\"r01\"", "\"r02\"")
        .replace("\"completed\"", "\"exploded\"");
    assert_ne!(forged, r01);
    redis.cli(&["HSET", results, "r02", &forged]);
    let r = only_failed();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("item `r02` that is not valid"), "{r:?}");
    // Nothing was handed out again on its word.
    assert_eq!(redis.number(&["XLEN", "runner:in.csv:items"]), 3);
    let s = sb.run(&["status", "--queue", &redis.url(), "in.csv"]);
    assert_eq!(s.code, 1, "{s:?}");
    assert!(s.stdout.contains("Not valid: the result of r02"), "{s:?}");
    // r01's verdict under r03's id: an outcome of another item.
    redis.cli(&["HSET", results, "r02", &r01.replace("\"r01\"", "\"r02\"")]);
    redis.cli(&["HSET", results, "r03", &r01]);
    let r = only_failed();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("its outcome is item `r01`'s"), "{r:?}");
    assert_eq!(redis.number(&["XLEN", "runner:in.csv:items"]), 3);
    // A `total` that is no number: the worker says so instead of taking the run for over.
    redis.cli(&["HSET", results, "r03", &r01.replace("\"r01\"", "\"r03\"")]);
    redis.cli(&["HSET", "runner:in.csv:meta", "total", "many"]);
    let w = finish(worker(&sb, &redis, "2", "b.csv"));
    assert_eq!(w.code, 2, "{w:?}");
    assert!(w.stderr.contains("`total`"), "{w:?}");
}
