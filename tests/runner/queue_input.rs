//! What a `--queue` user gets wrong or meets by accident (issue 54): a malformed URL holding
//! a password, a server that lost the run's keys mid-run, keys someone else wrote. Against a
//! real `redis-server` (see `queue.rs`).

use std::process::Child;

use crate::harness::{Run, Sandbox, wait_for};
use crate::queue::{Redis, batch, collect, finish, worker};

#[test]
fn a_malformed_queue_url_is_refused_without_showing_its_password() {
    let sb = Sandbox::new();
    sb.write_csv("id,mode\nr01,success\n");
    let before = sb.tree();
    for url in [
        "http://:hunter2-secret@127.0.0.1:1",
        "redis://user:hunter2-secret@127.0.0.1:1/x",
        "redis://:hunter2-secret@",
    ] {
        let runs: [Run; 3] = [
            sb.fake_batch(&["--queue", url]),
            sb.run(&["status", "--queue", url, "in.csv"]),
            sb.run(&[
                "collect",
                "--queue",
                url,
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
            ]),
        ];
        for r in runs {
            assert_eq!(r.code, 2, "{url}: {r:?}");
            assert!(r.stderr.contains("not a queue URL"), "{url}: {r:?}");
            assert!(r.stderr.contains("REDACTED@"), "{url}: {r:?}");
            assert!(!r.stderr.contains("hunter2"), "{url}: {r:?}");
        }
    }
    assert_eq!(sb.tree(), before, "nothing on disk changed");
}

#[test]
fn a_server_that_lost_the_run_ends_its_workers_saying_so() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 6);
    let mut w: Child = worker(&sb, &redis, "2", "a.csv");
    wait_for("the worker to claim two items", 30, || redis.held() == 2);
    // As a server restarted without its data (no append-only file) comes back: empty.
    redis.cli(&["FLUSHALL"]);
    std::fs::write(&release, "").expect("release");
    wait_for("the worker to end", 60, || {
        w.try_wait().expect("the worker's state").is_some()
    });
    let w = finish(w);
    assert_eq!(w.code, 3, "{w:?}");
    assert!(w.stderr.contains("no longer holds this run"), "{w:?}");
    assert!(w.stderr.contains("appendonly yes"), "{w:?}");
    // Said and done, not a warning per turn of the worker's loop for ever.
    assert!(w.stderr.matches("trying again").count() < 5, "{w:?}");
}

#[test]
fn status_and_collect_read_past_keys_no_runner_wrote() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 2);
    std::fs::write(&release, "").expect("release");
    let first = finish(worker(&sb, &redis, "2", "a.csv"));
    assert_eq!(first.code, 0, "{first:?}");
    // A worker's time that is no number, a limit and slots of another kind.
    redis.cli(&["HSET", "runner:in.csv:workers", "vm:1:x", "garbage"]);
    redis.cli(&["DEL", "runner:in.csv:limit", "runner:in.csv:slots"]);
    redis.cli(&["SET", "runner:in.csv:limit", "x"]);
    redis.cli(&["SET", "runner:in.csv:slots", "x"]);
    let status = || sb.run(&["status", "--queue", &redis.url(), "in.csv"]);
    let s = status();
    assert_eq!(s.code, 0, "{s:?}");
    assert!(s.stdout.contains("2 of 2 done"), "{s:?}");
    assert!(
        s.stdout.contains("Not valid: the fleet's rate limit"),
        "{s:?}"
    );
    let c = collect(&sb, &redis, "all.csv");
    assert_eq!(c.code, 0, "{c:?}");
    // A key the run needs, of another kind: bad input naming the key, not an outage.
    redis.cli(&["DEL", "runner:in.csv:results"]);
    redis.cli(&["SET", "runner:in.csv:results", "x"]);
    let s = status();
    assert_eq!(s.code, 2, "{s:?}");
    assert!(
        s.stderr
            .contains("`runner:in.csv:` of a kind no runner writes"),
        "{s:?}"
    );
}

#[test]
fn a_server_asking_for_a_password_says_what_to_give() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    sb.write_csv("id,mode\nr01,success\n");
    redis.cli(&["CONFIG", "SET", "requirepass", "hunter2-secret"]);
    let before = sb.tree();
    let none = sb.fake_batch(&["--queue", &redis.url()]);
    assert_eq!(none.code, 3, "{none:?}");
    assert!(
        none.stderr.contains("the server asks for a password"),
        "{none:?}"
    );
    let s = sb.run(&["status", "--queue", &redis.url(), "in.csv"]);
    assert_eq!(s.code, 3, "{s:?}");
    assert!(s.stderr.contains("the server asks for a password"), "{s:?}");
    let wrong = redis.url().replace("redis://", "redis://:not-it@");
    let w = sb.fake_batch(&["--queue", &wrong]);
    assert_eq!(w.code, 3, "{w:?}");
    assert!(
        w.stderr.contains("refused the URL's user name or password"),
        "{w:?}"
    );
    assert!(!w.stderr.contains("not-it"), "{w:?}");
    assert_eq!(sb.tree(), before, "nothing on disk changed");
}

#[test]
fn the_command_that_clears_another_batch_s_keys_reaches_the_queue_s_server() {
    let Some(redis) = Redis::start() else { return };
    let sb = Sandbox::new();
    let release = batch(&sb, 2);
    std::fs::write(&release, "").expect("release");
    // Database 3 of a server on a port of its own, not redis-cli's default 6379 / 0.
    let url = format!("{}/3", redis.url());
    let run = |out: &str| -> Run {
        let mut c = sb.fake_batch_cmd(&["--queue", &url, "-o", out]);
        c.env("RELEASE_FILE", &release);
        c.output().expect("spawn").into()
    };
    let first = run("a.csv");
    assert_eq!(first.code, 0, "{first:?}");
    sb.write("instr.md", "Something else for {id}. MODE={mode}\n");
    let other = run("b.csv");
    assert_eq!(other.code, 2, "{other:?}");
    let cmd = other
        .stderr
        .split("clear the key (`")
        .nth(1)
        .and_then(|rest| rest.split("`)").next())
        .unwrap_or_else(|| panic!("no command in {other:?}"));
    let cleared = std::process::Command::new("sh")
        .args(["-c", cmd])
        .output()
        .expect("sh");
    assert!(cleared.status.success(), "{cmd}: {cleared:?}");
    assert_eq!(redis.cli(&["-n", "3", "DBSIZE"]).trim(), "0", "{cmd}");
    let again = run("b.csv");
    assert_eq!(again.code, 0, "{again:?}");
}
