//! A broken set-up stops early (issue 32): an agent command that cannot start its work (a
//! script that is not there, a command that is not found) or an endpoint that refuses
//! connections fails the first few attempts with failure kind `setup`, and the team starts
//! nothing more: 60 rows with `--retries 2` cost a handful of attempts, not 180.

use std::collections::BTreeMap;

use crate::harness::{Run, Sandbox, agent, by_id};

/// `n` rows `id,mode` (every row would succeed with a working agent).
fn rows(sb: &Sandbox, n: usize) {
    let rows: Vec<(String, &str)> = (1..=n).map(|i| (format!("r{i}"), "success")).collect();
    let rows: Vec<(&str, &str)> = rows.iter().map(|(i, m)| (i.as_str(), *m)).collect();
    sb.write_rows(&rows);
}

/// `runner batch` over the rows with `--jobs jobs --retries retries`, plain output, `extra`,
/// `agent`.
fn broken_batch_cmd(
    sb: &Sandbox,
    jobs: &str,
    retries: &str,
    extra: &[&str],
    agent: &[&str],
) -> std::process::Command {
    let mut flags = vec![
        "--id-column",
        "id",
        "--format",
        "plain",
        "--jobs",
        jobs,
        "--retries",
        retries,
    ];
    flags.extend_from_slice(extra);
    sb.batch_cmd(&flags, agent)
}

/// [`broken_batch_cmd`] run to its end.
fn broken_batch(sb: &Sandbox, jobs: &str, retries: &str, agent: &[&str]) -> Run {
    broken_batch_cmd(sb, jobs, retries, &[], agent)
        .output()
        .expect("spawn runner")
        .into()
}

/// Check the end state a user sees after a broken set-up: exit 1; the few attempts made
/// failed `setup` naming `cause`; every other row `skipped` with the set-up failure as its
/// reason; at most twice `jobs` and a few attempts in all.
fn assert_stopped_early(
    r: &Run,
    rows: &BTreeMap<String, BTreeMap<String, String>>,
    jobs: usize,
    cause: &str,
) {
    assert_eq!(r.code, 1, "{r:?}");
    let attempts: usize = rows
        .values()
        .map(|row| row["attempts"].parse::<usize>().unwrap_or(0))
        .sum();
    // The third such attempt (of two items or more) stops the team; what runs then finishes.
    assert!(
        attempts <= jobs + 3,
        "{attempts} attempts for a broken set-up: {r:?}"
    );
    assert!(attempts >= 3, "{attempts}: {r:?}");
    let failed: Vec<_> = rows.values().filter(|r| r["status"] == "failed").collect();
    assert!(!failed.is_empty(), "{r:?}");
    for row in &failed {
        assert_eq!(row["failure_kind"], "setup", "{row:?}");
        assert!(row["error"].contains(cause), "{row:?}");
    }
    let skipped: Vec<_> = rows.values().filter(|r| r["status"] == "skipped").collect();
    assert_eq!(failed.len() + skipped.len(), rows.len(), "{rows:?}");
    for row in &skipped {
        assert!(
            row["error"].starts_with("not started: set-up failure: the first ")
                && row["error"].contains("failed the same way before any attempt got further")
                && row["error"].contains(cause)
                && row["error"].contains("fix the agent command or the endpoint"),
            "{row:?}"
        );
    }
    assert!(
        r.stdout
            .contains("STOPPED  starting no more items: set-up failure"),
        "{r:?}"
    );
}

#[test]
fn a_script_that_is_not_there_stops_a_60_row_batch_after_a_few_attempts() {
    let sb = Sandbox::new();
    rows(&sb, 60);
    let r = broken_batch(&sb, "4", "2", &["python3", "agnt.py"]);
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_stopped_early(&r, &rows, 4, "can't open file");
    assert!(sb.survivors_after(5.0).is_empty());
}

#[test]
fn a_command_that_is_not_found_stops_the_batch_by_its_exit_code_127() {
    let sb = Sandbox::new();
    rows(&sb, 30);
    let r = broken_batch(
        &sb,
        "2",
        "1",
        &["sh", "-c", "cat >/dev/null; no-such-agent-command"],
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_stopped_early(&r, &rows, 2, "not found");
}

#[test]
fn an_endpoint_that_refuses_connections_stops_an_http_batch_after_a_few_requests() {
    let sb = Sandbox::new();
    let mut csv = String::from("id,text\n");
    for i in 1..=60 {
        csv.push_str(&format!("r{i},text {i}\n"));
    }
    sb.write("in.csv", csv);
    sb.write("instr.md", "Say whether {text} is a greeting.\n");
    let mut cmd = sb.cmd(&[
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--id-column",
        "id",
        "--runner",
        "openai",
        "--model",
        "m",
        "--format",
        "plain",
        "--jobs",
        "4",
        "--retries",
        "2",
    ]);
    // Nothing listens on port 9 (discard) of 127.0.0.1.
    cmd.env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("OPENAI_API_KEY", "sk-test");
    let r: Run = cmd.output().expect("spawn").into();
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_stopped_early(&r, &rows, 4, "no answer from http://127.0.0.1:9/v1");
}

#[test]
fn a_broken_agent_command_stops_a_todo_resolve_early_and_ticks_nothing() {
    let sb = Sandbox::new();
    for i in 1..=12 {
        let r = sb.run(&["add", "--store", "S", &format!("Task {i} MODE=success")]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let r = sb.run(&[
        "resolve",
        "--store",
        "S",
        "--format",
        "plain",
        "--yes",
        "--jobs",
        "2",
        "--retries",
        "2",
        "--",
        "python3",
        "agnt.py",
    ]);
    let rows = by_id(&sb.join("S/todo-1.workers-output.csv"), "item");
    assert_stopped_early(&r, &rows, 2, "can't open file");
    let batch = std::fs::read_to_string(sb.join("S/todo-1.md")).expect("todo-1.md");
    assert!(!batch.contains("[x]"), "nothing is ticked: {batch}");
}

/// A row's own missing file is not a broken set-up: Python's `FileNotFoundError` for rows
/// 1–3 (each naming its own file) fails those rows, and the others complete (found by a new
/// user's review: "ENOTFOUND", Node's DNS error, matched inside "FileNotFoundError").
#[test]
fn rows_failing_on_their_own_missing_files_do_not_stop_the_team() {
    let sb = Sandbox::new();
    rows(&sb, 12);
    sb.write(
        "task.py",
        "import os, sys, json\nsys.stdin.read()\nrow = os.environ['RUNNER_ITEM_ID']\nif row in ('r1', 'r2', 'r3'):\n    open(f'data/{row}.txt')\njson.dump({'status': 'completed', 'summary': 'ok'}, open(os.environ['RUNNER_REPORT'], 'w'))\n",
    );
    let r = sb.batch(
        &["--id-column", "id", "--format", "plain", "--jobs", "4"],
        &["python3", "task.py"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    let completed = rows.values().filter(|r| r["status"] == "completed").count();
    assert_eq!(completed, 9, "{r:?}");
    assert!(!r.stdout.contains("STOPPED"), "{r:?}");
}

/// A genuine failure is not a set-up failure: an agent that works but fails its items is
/// judged item by item (`--max-fail` is for those), and the team does not stop.
#[test]
fn items_that_fail_on_their_own_do_not_stop_the_team() {
    let sb = Sandbox::new();
    let fail: Vec<(String, &str)> = (1..=8).map(|i| (format!("r{i}"), "failed")).collect();
    let fail: Vec<(&str, &str)> = fail.iter().map(|(i, m)| (i.as_str(), *m)).collect();
    sb.write_rows(&fail);
    let fake = agent("fake_agent.py");
    let r = sb.batch(
        &["--id-column", "id", "--format", "plain", "--jobs", "2"],
        &["python3", &fake],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert!(rows.values().all(|r| r["status"] == "failed"), "{rows:?}");
    assert!(!r.stdout.contains("STOPPED"), "{r:?}");
}

/// A stop ends the retries' back-off too: items of the first wave waiting out a long
/// `--retry-delay` end with the team instead of sleeping through it (the run took the
/// longest back-off of the wave before, up to 1.5 × the delay).
#[test]
fn a_set_up_stop_ends_the_retries_waiting_out_their_back_off() {
    let sb = Sandbox::new();
    rows(&sb, 12);
    let mut child = broken_batch_cmd(
        &sb,
        "4",
        "2",
        &["--retry-delay", "1h"],
        &["python3", "agnt.py"],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("spawn runner");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > until {
            let _ = child.kill();
            panic!("the run still waits out its retries' back-off after the team stopped");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let r: Run = child.wait_with_output().expect("output").into();
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_stopped_early(&r, &rows, 4, "can't open file");
    assert!(sb.survivors_after(1.0).is_empty());
}
