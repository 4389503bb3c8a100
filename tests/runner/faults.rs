//! Faults: interrupts, crashes, resume, orphans (issue: faults and bad input).

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Run, Sandbox, agent, by_id, wait_for};

fn journal_count(sb: &Sandbox, ws: &str, event: &str) -> usize {
    std::fs::read_to_string(sb.join(ws).join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&format!("\"event\":\"{event}\"")))
        .count()
}

fn signal(child: &Child, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}

fn wait_exit(child: &mut Child, secs: u64) -> i32 {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            use std::os::unix::process::ExitStatusExt;
            return st.code().unwrap_or(128 + st.signal().unwrap_or(0));
        }
        assert!(Instant::now() < until, "runner did not exit within {secs}s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Start `runner batch` on rows (id, mode) in the background.
fn start(sb: &Sandbox, rows: &[(&str, &str)], extra: &[&str]) -> Child {
    sb.write_rows(rows);
    sb.fake_batch_cmd(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner")
}

fn interrupt_case(sig: &str, twice: bool, mode: &str, grace: &str) {
    let sb = Sandbox::new();
    let mut runner = start(
        &sb,
        &[("quick", "success"), ("a", mode), ("b", mode)],
        &["--jobs", "3", "--grace", grace],
    );
    wait_for(
        "the quick item to finish and both slow ones to start",
        30,
        || {
            journal_count(&sb, "workers-output.runner", "item_finished") == 1
                && journal_count(&sb, "workers-output.runner", "attempt_started") == 3
        },
    );
    // Let the agents fork their grandchildren.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!sb.live_processes().is_empty());
    let started = Instant::now();
    signal(&runner, sig);
    if twice {
        std::thread::sleep(Duration::from_millis(300));
        signal(&runner, sig);
    }
    let code = wait_exit(&mut runner, 40);
    assert_eq!(code, 130, "{sig} twice={twice}");
    if twice {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a second interrupt kills at once"
        );
    }
    let left = sb.survivors_after(2.0);
    assert!(left.is_empty(), "{sig}: processes survived: {left:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        rows["quick"]["status"], "completed",
        "what completed is written"
    );
    assert_eq!(rows["a"]["status"], "cancelled");
    assert_eq!(rows["b"]["status"], "cancelled");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(
        journal
            .lines()
            .last()
            .is_some_and(|l| l.contains("\"interrupted\":true")),
        "the journal is closed"
    );
}

#[test]
fn sigint_stops_every_teammate_and_its_grandchildren() {
    interrupt_case("-INT", false, "fork_sleep", "5s");
}

#[test]
fn sigterm_stops_every_teammate_and_its_grandchildren() {
    interrupt_case("-TERM", false, "fork_sleep", "5s");
}

#[test]
fn a_second_ctrl_c_kills_at_once_even_agents_ignoring_sigterm() {
    interrupt_case("-INT", true, "ignore_term", "60s");
}

#[test]
fn sighup_is_an_interrupt_too() {
    interrupt_case("-HUP", false, "fork_sleep", "5s");
}

#[test]
fn after_kill_9_the_same_command_resumes_and_ends_the_orphans() {
    let sb = Sandbox::new();
    let mut runner = start(
        &sb,
        &[
            ("a", "success"),
            ("b", "success"),
            ("c", "hang"),
            ("d", "fork_sleep"),
        ],
        &["--jobs", "4"],
    );
    wait_for("two finished, all started", 30, || {
        journal_count(&sb, "workers-output.runner", "item_finished") == 2
            && journal_count(&sb, "workers-output.runner", "attempt_started") == 4
    });
    std::thread::sleep(Duration::from_millis(300));
    signal(&runner, "-KILL");
    wait_exit(&mut runner, 10);
    assert!(
        !sb.live_processes().is_empty(),
        "the dead runner's agents are still running (orphans)"
    );
    // The same batch again, now with agents that succeed.
    sb.write(
        "in.csv",
        "id,mode\na,success\nb,success\nc,success\nd,success\n",
    );
    let r = sb.fake_batch(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("2 from an earlier run"), "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows.len(), 4, "no duplicate or lost rows");
    for (id, attempts) in [("a", "1"), ("b", "1"), ("c", "2"), ("d", "2")] {
        assert_eq!(rows[id]["status"], "completed", "{id}");
        assert_eq!(
            rows[id]["attempts"], attempts,
            "{id}: only what did not complete is rerun"
        );
    }
    let left = sb.survivors_after(2.0);
    assert!(
        left.is_empty(),
        "orphans of the dead run survived: {left:?}"
    );
}

#[test]
fn resume_is_judged_from_outcomes_not_from_report_files() {
    let sb = Sandbox::new();
    let r = {
        let mut c = start(&sb, &[("a", "noreport")], &[]);
        wait_exit(&mut c, 30)
    };
    assert_eq!(r, 1);
    // A report file appears later (e.g. written by a stray process): it must not count.
    sb.write(
        "workers-output.runner/teammates/1-a/work/report.json",
        r#"{"id":"a","status":"completed","summary":"forged"}"#,
    );
    sb.write("in.csv", "id,mode\na,noreport\n");
    let r = sb.fake_batch(&[]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "failed");
    assert_eq!(rows["a"]["attempts"], "2");
}

#[test]
fn interrupting_a_todo_run_ticks_what_completed_and_keeps_the_rest() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write("S/cp-1.md", "one");
    sb.write("S/cp-2.md", "two");
    sb.write("S/todo.md", "## Todo\n- [ ] quick MODE=success @context:cp-1.md\n- [ ] slow MODE=hang @context:cp-2.md\n");
    let f = agent("fake_agent.py");
    let mut runner = sb
        .cmd(&[
            "resolve", "--store", "S", "--yes", "--format", "plain", "--grace", "2s", "--",
            "python3", &f,
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for("quick done, slow running", 30, || {
        journal_count(&sb, "S/teams/todo-resolve-1", "item_finished") == 1
            && sb
                .read_opt("S/todo-1.md")
                .is_some_and(|t| t.contains("- [~] slow"))
    });
    signal(&runner, "-INT");
    assert_eq!(wait_exit(&mut runner, 30), 130);
    let batch = sb.read("S/todo-1.md");
    assert!(batch.contains("- [x] quick"), "{batch}");
    assert!(
        batch.contains("- [ ] slow MODE=hang @context:cp-2.md\n  > runner: cancelled: interrupted"),
        "{batch}"
    );
    assert!(!sb.join("S/cp-1.md").exists() && sb.join("S/cp-2.md").exists());
    assert!(sb.survivors_after(2.0).is_empty());
}

/// Issue 50: a todo run killed (`kill -9`) after some items were ticked: the resume plans
/// only the unticked items, and the ticked ones kept their checkpoints for good (through
/// `status: done`, the archive and `clean --completed`). The resume's ending deletes the
/// checkpoint of every item of the batch that completed, in this run or an earlier one.
#[test]
fn a_killed_todo_runs_ticked_items_lose_their_checkpoints_when_the_batch_is_resumed() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write("S/cp-1.md", "one");
    sb.write("S/cp-2.md", "two");
    sb.write("S/todo.md", "## Todo\n- [ ] quick MODE=success @context:cp-1.md\n- [ ] slow MODE=wait_file @context:cp-2.md\n");
    let release = sb.join("release");
    let f = agent("fake_agent.py");
    let mut runner = sb
        .cmd(&[
            "resolve", "--store", "S", "--yes", "--format", "plain", "--", "python3", &f,
        ])
        .env("RELEASE_FILE", &release)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for("quick ticked, slow running", 30, || {
        sb.read_opt("S/todo-1.md")
            .is_some_and(|t| t.contains("- [x] quick") && t.contains("- [~] slow"))
    });
    signal(&runner, "-KILL");
    let _ = wait_exit(&mut runner, 30);
    assert!(
        sb.join("S/cp-1.md").exists(),
        "the kill came before the ending"
    );
    sb.write("release", "go");
    let r: Run = sb
        .cmd(&[
            "run",
            "S/todo-1.md",
            "--format",
            "plain",
            "--",
            "python3",
            &f,
        ])
        .env("RELEASE_FILE", &release)
        .output()
        .expect("resume")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let batch = sb.read("S/todo-1.md");
    assert!(
        batch.contains("- [x] quick") && batch.contains("- [x] slow"),
        "{batch}"
    );
    assert!(
        !sb.join("S/cp-1.md").exists(),
        "the earlier run's ticked item lost its checkpoint: {r:?}"
    );
    assert!(!sb.join("S/cp-2.md").exists(), "{r:?}");
    assert!(sb.survivors_after(2.0).is_empty());
}

#[test]
fn an_interrupted_run_counts_the_items_it_never_reached() {
    let sb = Sandbox::new();
    sb.write_rows(&[
        ("a", "hang"),
        ("b", "hang"),
        ("c", "success"),
        ("d", "success"),
        ("e", "success"),
    ]);
    let runner = sb
        .fake_batch_cmd(&["--jobs", "2", "--grace", "5s", "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    wait_for("both slots to be busy", 30, || {
        journal_count(&sb, "workers-output.runner", "attempt_started") == 2
    });
    signal(&runner, "-INT");
    let out = runner.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The line before the final run_ended (which names the outputs and exit 130).
    let lines: Vec<&str> = stdout.lines().collect();
    let ended: serde_json::Value =
        serde_json::from_str(lines.last().copied().unwrap_or_default()).expect("json line");
    assert_eq!(ended["event"], "run_ended", "{stdout}");
    assert_eq!(ended["exit_code"], 130, "{stdout}");
    let last: serde_json::Value =
        serde_json::from_str(lines.len().checked_sub(2).map_or("", |i| lines[i]))
            .expect("json line");
    assert_eq!(last["event"], "run_finished", "{stdout}");
    // The three rows never started are in the output, so they are in the counts too.
    assert_eq!(last["counts"]["cancelled"], 5, "{stdout}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows.len(), 5);
    assert!(
        rows.values().all(|r| r["status"] == "cancelled"),
        "{rows:?}"
    );
    let team: serde_json::Value =
        serde_json::from_str(&sb.read("workers-output.runner/team.json")).expect("team.json");
    assert_eq!(team["counts"]["cancelled"], 5, "{team}");
}

/// Issue 24: a `kill -9` during an atomic replace leaves its hidden temporary file (up to
/// megabytes each). The next run of the batch removes those beside what it writes — but
/// never one a writer still holds (locked), one just made, or a link someone planted under
/// that name (nor what it points at).
#[test]
fn the_next_run_sweeps_temporaries_a_killed_replace_left_and_nothing_else() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    let left = |rel: &str| {
        let p = sb.write(rel, "half a file");
        std::fs::File::options()
            .write(true)
            .open(&p)
            .and_then(|f| f.set_modified(old))
            .expect("age it");
        p
    };
    let stale_out = left(".runner-tmp-Ab12Cd");
    let stale_ws = {
        std::fs::create_dir_all(sb.join("workers-output.runner")).expect("ws");
        left("workers-output.runner/.runner-tmp-Zz99Yy")
    };
    let held = left(".runner-tmp-Held00");
    let lock = std::fs::File::open(&held).expect("open held");
    lock.lock().expect("hold it, as a writer does");
    let young = sb.write(".runner-tmp-Young0", "being written");
    let victim = sb.write("victim.txt", "keep me");
    std::os::unix::fs::symlink(&victim, sb.join(".runner-tmp-Link00")).expect("link");
    let r = sb.fake_batch(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!stale_out.exists(), "beside the output");
    assert!(!stale_ws.exists(), "in the workspace");
    assert!(held.exists(), "a locked one is someone's write under way");
    assert!(young.exists(), "a young one may be about to be locked");
    assert!(
        sb.join(".runner-tmp-Link00").symlink_metadata().is_ok(),
        "a link is left alone"
    );
    assert_eq!(sb.read("victim.txt"), "keep me");
    drop(lock);
}

/// Issue 24: a failed attempt costs money too. A $0.50 failure then a $0.25 success is
/// $0.75 everywhere (the output's cost and tokens are sums, each attempt's own is in its
/// event), and a resumed run's budget counts every earlier attempt, not last attempts only.
#[test]
fn cost_and_tokens_are_summed_over_every_attempt_and_the_budget_counts_them_all() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "costly_retry"), ("b", "costly")]);
    let r = sb.fake_batch(&["--retries", "1", "--only", "a", "--format", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed");
    assert_eq!(rows["a"]["attempts"], "2");
    assert_eq!(rows["a"]["cost_usd"], "0.75");
    assert_eq!(rows["a"]["input_tokens"], "1500");
    assert_eq!(rows["a"]["output_tokens"], "150");
    let attempts: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "attempt_finished")
        .collect();
    let costs: Vec<_> = attempts.iter().map(|e| e["cost_usd"].clone()).collect();
    assert_eq!(
        costs,
        [serde_json::json!(0.5), serde_json::json!(0.25)],
        "{attempts:?}"
    );
    // Resumed under a $1 budget: $0.75 spent, and the next item is expected to cost as
    // much again, so it does not start (it did when only the last $0.25 counted).
    let r = sb.fake_batch(&["--max-cost-usd", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["cost_usd"], "0.75", "a was not run again");
    assert_eq!(rows["b"]["status"], "skipped", "{:?}", rows["b"]);
    assert!(
        rows["b"]["error"].starts_with("not started: budget of $1 reached: spent $0.75"),
        "{:?}",
        rows["b"]
    );
}

/// Issue 24: bytes in the journal the runner did not write — a line appended by someone
/// else, a half line — cost nothing: every item's outcome is written, the run ends 0 with a
/// warning naming the place, and a resume reads the journal and runs nothing again.
#[test]
fn foreign_bytes_in_the_journal_lose_no_output_and_a_resume_reads_past_them() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "journal_junk"), ("b", "success"), ("c", "success")]);
    let r = sb.fake_batch(&["--jobs", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("journal.jsonl: it changed under the runner"),
        "{r:?}"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b", "c"] {
        assert_eq!(rows[id]["status"], "completed", "{id}: {:?}", rows[id]);
    }
    // The runner's own lines each stand alone: nothing was glued to the half line.
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(journal.contains("{\"event\":\"item_fin\n"), "{journal}");
    let again = sb.fake_batch(&["--jobs", "1"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(
        again
            .stderr
            .contains("line(s) are no event of the runner's"),
        "{again:?}"
    );
    assert_eq!(
        journal_count(&sb, "workers-output.runner", "attempt_started"),
        3,
        "nothing ran again"
    );

    // A cut tail (the last event's end gone) is kept aside on open, never glued to the
    // next event.
    let path = sb.join("workers-output.runner/journal.jsonl");
    let bytes = std::fs::read(&path).expect("journal");
    std::fs::write(&path, &bytes[..bytes.len() - 5]).expect("cut");
    let third = sb.fake_batch(&["--jobs", "1"]);
    assert_eq!(third.code, 0, "{third:?}");
    assert!(third.stderr.contains("its last line was cut"), "{third:?}");
    assert!(
        sb.join("workers-output.runner/journal.jsonl.torn")
            .is_file()
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert!(
        rows.values().all(|r| r["status"] == "completed"),
        "{rows:?}"
    );
}

/// Issue 50: the same kill, but the agent is gone too by the time the run resumes (a
/// process-tree kill, or an agent that ended at once): no process is left to tell its
/// number, and the resumed attempt reused it. The number was taken in the teammate folder
/// before the agent started, so the resumed attempt is the second.
#[test]
fn an_attempt_killed_before_the_journal_knew_it_keeps_its_number_when_its_agent_is_gone_too() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "noreport")]);
    let crashed = sb
        .fake_batch_cmd(&[])
        .env("RUNNER_FAULT", "after_spawn")
        .output()
        .expect("runner");
    assert_ne!(crashed.status.code(), Some(0));
    assert!(
        sb.survivors_after(10.0).is_empty(),
        "the agent ended on its own"
    );
    assert_eq!(
        journal_count(&sb, "workers-output.runner", "attempt_started"),
        0,
        "killed before the journal knew"
    );
    sb.write_rows(&[("a", "success")]);
    let r = sb.fake_batch(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed", "{:?}", rows["a"]);
    assert_eq!(rows["a"]["attempts"], "2", "attempt 1 was the killed run's");
}

/// Issue 24: a runner killed between starting an agent and journaling its attempt left an
/// agent no resume ended, and the resumed attempt reused its number. The next run ends every
/// process of the workspace whatever the journal says, and numbers its attempt after the
/// one that left a log.
#[test]
fn a_kill_between_spawn_and_journal_leaves_no_orphan_and_no_reused_attempt_number() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "wait_file")]);
    let release = sb.join("release");
    let crashed = sb
        .fake_batch_cmd(&[])
        .env("RELEASE_FILE", &release)
        .env("RUNNER_FAULT", "after_spawn")
        .output()
        .expect("runner");
    assert_ne!(crashed.status.code(), Some(0));
    wait_for("the orphaned agent to be left running", 10, || {
        !sb.live_processes().is_empty()
    });
    assert_eq!(
        journal_count(&sb, "workers-output.runner", "attempt_started"),
        0,
        "killed before the journal knew"
    );
    let orphans = sb.live_processes();
    let mut resumed = sb
        .fake_batch_cmd(&[])
        .env("RELEASE_FILE", &release)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner");
    wait_for("the resumed attempt to start", 30, || {
        journal_count(&sb, "workers-output.runner", "attempt_started") == 1
    });
    // Ended as the team opened, before the resumed attempt started (not by the release).
    let gone = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
    };
    // A SIGKILL takes effect once the process leaves the kernel (an exec reading its
    // program from disk can hold it a moment); it runs no more code of its own meanwhile.
    wait_for("the orphans to be ended", 10, || {
        orphans.iter().all(|(pid, _)| gone(pid))
    });
    std::fs::write(&release, "go").expect("release");
    assert_eq!(wait_exit(&mut resumed, 30), 0);
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed");
    assert_eq!(rows["a"]["attempts"], "2", "attempt 1 was the orphan's");
    // The completed item was compacted: its record is of attempt 2, its folder gone.
    assert!(!sb.join("workers-output.runner/teammates/1-a").exists());
    let record: serde_json::Value = sb
        .read("workers-output.runner/completed.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|r: &serde_json::Value| r["id"] == "a")
        .expect("a's record");
    assert_eq!(record["attempt"], 2);
    assert!(sb.survivors_after(1.0).is_empty());
}

/// Issue 24: right after a `kill -9`, `runner status` showed team.json's picture, up to half
/// a second old: an item the journal recorded as finished was missing. It now catches up
/// from the journal.
#[test]
fn status_after_kill_9_shows_what_the_journal_recorded_since_team_json() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "hang")]);
    let r = sb
        .fake_batch_cmd(&["--jobs", "1"])
        .env("RUNNER_FAULT", "after_item_finished")
        .output()
        .expect("runner");
    assert_ne!(r.status.code(), Some(0));
    let snapshot = sb.read("workers-output.runner/team.json");
    assert!(
        !snapshot.contains("\"completed\""),
        "the picture predates a's end: {snapshot}"
    );
    let status = sb.run(&["status", "--brief"]);
    assert!(status.stdout.contains("1 completed"), "{status:?}");
    assert!(sb.survivors_after(1.0).is_empty());
}

/// Issue 24: `status --watch` on a todo run that completes followed it into its archive
/// (the workspace is removed) and ends 0, instead of exit 2 (`team.json: cannot read it`).
#[test]
fn status_watch_follows_a_completing_todo_run_into_its_archive() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write("S/todo-4.md", "## Todo\n- [ ] one MODE=wait_file\n");
    let release = sb.join("release");
    let f = agent("fake_agent.py");
    let mut run = sb
        .cmd(&["run", "S/todo-4.md", "--", "python3", &f])
        .env("RELEASE_FILE", &release)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner");
    wait_for("the todo team to run", 30, || {
        sb.join("S/teams/todo-resolve-4/team.json").is_file()
    });
    let watch = sb
        .cmd(&["status", "--watch", "S/todo-4.md"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("status --watch");
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&release, "go").expect("release");
    assert_eq!(wait_exit(&mut run, 30), 0);
    let out = watch.wait_with_output().expect("watch ends");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        !sb.join("S/teams/todo-resolve-4").exists(),
        "the workspace went"
    );
    let last = stdout.rsplit("---\n").next().unwrap_or_default();
    assert!(last.contains("1 completed"), "{stdout}");
}

/// Issue 24: the output CSV is kept current while the run goes on (about once a second), so
/// a `kill -9` leaves one holding every item finished up to a second before — the rest say
/// they had not finished — and the resume completes it.
#[test]
fn the_output_is_current_while_the_run_goes_on_and_survives_a_kill_9() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "success"), ("c", "wait_file")]);
    let release = sb.join("release");
    let mut runner = sb
        .fake_batch_cmd(&["--jobs", "3"])
        .env("RELEASE_FILE", &release)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner");
    let out = sb.join("workers-output.csv");
    let current = || {
        out.is_file() && {
            let rows = by_id(&out, "id");
            rows.len() == 3
                && rows["a"]["status"] == "completed"
                && rows["b"]["status"] == "completed"
        }
    };
    wait_for("the output to show a and b completed", 20, current);
    let rows = by_id(&out, "id");
    assert_eq!(rows["c"]["status"], "", "{:?}", rows["c"]);
    assert!(rows["c"]["error"].starts_with("not finished when this output was written"));
    signal(&runner, "-9");
    let _ = wait_exit(&mut runner, 10);
    assert!(current(), "the kill left the output as it was");
    std::fs::write(&release, "go").expect("release");
    let r = sb
        .fake_batch_cmd(&["--jobs", "3"])
        .env("RELEASE_FILE", &release)
        .output()
        .expect("runner");
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stdout)
    );
    let rows = by_id(&out, "id");
    assert!(
        rows.values().all(|r| r["status"] == "completed"),
        "{rows:?}"
    );
    assert!(sb.survivors_after(1.0).is_empty());
}

/// Issue 24: Ctrl-C while `--verify` checks a finished agent's report marked the item
/// `cancelled` and threw the report away: the resume ran the agent again (a non-idempotent
/// agent then reports on work it already changed). The report is kept; the resume runs
/// only the verify.
#[test]
fn an_interrupt_during_verify_keeps_the_report_and_the_resume_runs_only_the_verify() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    sb.write(
        "verify.sh",
        "test -f pass && exit 0\ntouch verifying\nexec sleep 30\n",
    );
    let verify = "sh verify.sh";
    let mut runner = sb
        .fake_batch_cmd(&["--verify", verify])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner");
    wait_for("the verify to run", 30, || sb.join("verifying").is_file());
    signal(&runner, "-INT");
    assert_eq!(wait_exit(&mut runner, 30), 130);
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "cancelled");
    assert_eq!(rows["a"]["error"], "interrupted during verify");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(journal.contains("\"awaiting_verify\":true"), "{journal}");

    sb.write("pass", "");
    let r = sb.fake_batch(&["--verify", verify]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed", "{:?}", rows["a"]);
    assert_eq!(
        rows["a"]["summary"], "fake agent handled a",
        "the agent's own report"
    );
    assert_eq!(rows["a"]["attempts"], "1");
    assert_eq!(
        journal_count(&sb, "workers-output.runner", "attempt_started"),
        1,
        "the agent did not run again"
    );
    assert!(sb.survivors_after(1.0).is_empty());
}

/// Issue 24: a `kill -9` as a todo run ends — its items ticked, the table, the checkpoints of
/// completed items, the archive and the workspace removal not done — left a batch that
/// `runner run` called "Nothing to run", with the checkpoints kept for good. The next run
/// finishes that ending.
#[test]
fn a_todo_run_killed_as_it_ends_is_finished_by_the_next_run() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write("S/cp-1.md", "# where I was\n");
    sb.write(
        "S/todo-6.md",
        "## Todo\n- [ ] one MODE=success @context:cp-1.md\n- [ ] two MODE=success\n",
    );
    let f = agent("fake_agent.py");
    let killed = sb
        .cmd(&["run", "S/todo-6.md", "--", "python3", &f])
        .env("RUNNER_FAULT", "after_ticks")
        .output()
        .expect("runner");
    assert_ne!(killed.status.code(), Some(0));
    let batch = sb.read("S/todo-6.md");
    assert!(
        batch.contains("- [x] one") && batch.contains("- [x] two"),
        "{batch}"
    );
    assert!(sb.join("S/cp-1.md").is_file(), "not removed yet");
    assert!(sb.join("S/teams/todo-resolve-6").is_dir());

    let r = sb.run(&["run", "S/todo-6.md", "--", "python3", &f]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("finishing the ending an earlier run left undone"),
        "{r:?}"
    );
    assert!(
        !sb.join("S/cp-1.md").exists(),
        "the completed item's checkpoint"
    );
    assert!(
        !sb.join("S/teams/todo-resolve-6").exists(),
        "the workspace went"
    );
    assert!(sb.join("S/todo-6.archive.jsonl").is_file());
    let table = sb.read("S/todo-6.workers-output.csv");
    assert_eq!(table.matches(",completed,").count(), 2, "{table}");
    assert_eq!(sb.read("S/todo-6.md"), batch, "the ticks stay as they were");
    let again = sb.run(&["run", "S/todo-6.md", "--", "python3", &f]);
    assert!(again.stdout.contains("Nothing to run"), "{again:?}");

    // `runner clean` finishes such an ending too, before it removes the workspace.
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write("S/cp-1.md", "# where I was\n");
    sb.write(
        "S/todo-6.md",
        "## Todo\n- [ ] one MODE=success @context:cp-1.md\n",
    );
    let killed = sb
        .cmd(&["run", "S/todo-6.md", "--", "python3", &f])
        .env("RUNNER_FAULT", "after_ticks")
        .output()
        .expect("runner");
    assert_ne!(killed.status.code(), Some(0));
    let r = sb.run(&["clean", "--store", "S", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("wrote its table and removed the checkpoints"),
        "{r:?}"
    );
    assert!(!sb.join("S/cp-1.md").exists(), "{r:?}");
    assert!(!sb.join("S/teams/todo-resolve-6").exists());
    assert_eq!(
        sb.read("S/todo-6.workers-output.csv")
            .matches(",completed,")
            .count(),
        1
    );
}

/// Issue 24: the todo table, like the output CSV, is current while the run goes on.
#[test]
fn the_todo_table_is_current_while_the_run_goes_on() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write(
        "S/todo-7.md",
        "## Todo\n- [ ] one MODE=success\n- [ ] two MODE=wait_file\n",
    );
    let release = sb.join("release");
    let f = agent("fake_agent.py");
    let mut run = sb
        .cmd(&["run", "S/todo-7.md", "--", "python3", &f])
        .env("RELEASE_FILE", &release)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner");
    let table = sb.join("S/todo-7.workers-output.csv");
    wait_for("the table to show item 1 completed", 20, || {
        table.is_file()
            && by_id(&table, "item")
                .get("1")
                .is_some_and(|r| r["status"] == "completed")
    });
    let rows = by_id(&table, "item");
    assert_eq!(rows["2"]["status"], "", "{:?}", rows["2"]);
    assert!(rows["2"]["error"].starts_with("not finished when this output was written"));
    std::fs::write(&release, "go").expect("release");
    assert_eq!(wait_exit(&mut run, 30), 0);
    let rows = by_id(&table, "item");
    assert!(
        rows.values().all(|r| r["status"] == "completed"),
        "{rows:?}"
    );
}

/// The output a `kill -9` leaves of a sharded run is one the resume of that shard accepts:
/// its sidecar (which shard it holds) is written as the run starts, not only at its end.
#[test]
fn a_sharded_run_killed_mid_way_resumes_into_its_own_output() {
    let sb = Sandbox::new();
    let rows: Vec<(String, &str)> = (1..=6).map(|n| (format!("r{n}"), "slow")).collect();
    let rows: Vec<(&str, &str)> = rows.iter().map(|(id, m)| (id.as_str(), *m)).collect();
    sb.write_rows(&rows);
    // A file named for a shard's output gets the shard's number.
    let out = sb.join("sh.shard-1-of-2.csv");
    let mut runner = sb
        .fake_batch_cmd(&["--jobs", "1", "--shard", "1/2", "-o", "sh.csv"])
        .env("SLOW_SECONDS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner");
    wait_for("the live output to show a completed row", 30, || {
        out.is_file()
            && by_id(&out, "id")
                .values()
                .any(|r| r["status"] == "completed")
    });
    signal(&runner, "-9");
    let _ = wait_exit(&mut runner, 10);
    assert!(
        sb.join("sh.shard-1-of-2.csv.shard.json").is_file(),
        "the sidecar came first"
    );
    let r = sb
        .fake_batch_cmd(&["--jobs", "1", "--shard", "1/2", "-o", "sh.csv"])
        .env("SLOW_SECONDS", "0")
        .output()
        .expect("runner");
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let rows = by_id(&out, "id");
    assert!(
        rows.values().all(|r| r["status"] == "completed"),
        "{rows:?}"
    );
    assert!(sb.survivors_after(1.0).is_empty());
}

/// Issue 26: `ledger.bin` caches the journal's replay for the next run, but never outvotes
/// it: a journal edited in place, cut or replaced since is replayed, and what it says now
/// decides what runs again.
#[test]
fn the_ledger_cache_never_outvotes_the_journal() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "success"), ("c", "success")]);
    let ws = "workers-output.runner";
    let journal = sb.join(ws).join("journal.jsonl");
    let ledger = sb.join(ws).join("ledger.bin");
    let run = || {
        let r = sb.fake_batch(&["--jobs", "1"]);
        assert_eq!(r.code, 0, "{r:?}");
    };
    let all_completed = || {
        let rows = by_id(&sb.join("workers-output.csv"), "id");
        assert!(
            rows.values().all(|r| r["status"] == "completed"),
            "{rows:?}"
        );
    };
    run();
    assert!(ledger.is_file(), "a run leaves its ledger");
    run();
    assert_eq!(
        journal_count(&sb, ws, "attempt_started"),
        3,
        "nothing ran again"
    );
    all_completed();

    // c's outcome edited in place (the same length: its content hash changed), as an
    // editor that writes in place would: c runs again, whatever the ledger says.
    std::thread::sleep(Duration::from_millis(50));
    let text = std::fs::read_to_string(&journal).expect("journal");
    let line = text
        .lines()
        .rfind(|l| l.contains("\"event\":\"item_finished\"") && l.contains("\"id\":\"c\""))
        .expect("c's outcome");
    let hash = line
        .split("\"content_hash\":\"")
        .nth(1)
        .and_then(|s| s.get(..16))
        .expect("a content hash");
    let flipped: String = hash
        .chars()
        .map(|c| if c == '0' { '1' } else { '0' })
        .collect();
    let edited = text.replacen(line, &line.replacen(hash, &flipped, 1), 1);
    assert_eq!(edited.len(), text.len());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&journal)
        .and_then(|mut f| std::io::Write::write_all(&mut f, edited.as_bytes()))
        .expect("edit in place");
    run();
    assert_eq!(journal_count(&sb, ws, "attempt_started"), 4, "c ran again");
    all_completed();

    // The journal cut before c's last outcome: c runs again.
    let text = std::fs::read_to_string(&journal).expect("journal");
    let cut = text
        .rfind("{\"v\":1,\"event\":\"item_finished\"")
        .expect("an outcome");
    assert!(text[cut..].contains("\"id\":\"c\""), "c finished last");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&journal)
        .and_then(|f| f.set_len(cut as u64))
        .expect("cut");
    run();
    assert_eq!(journal_count(&sb, ws, "attempt_started"), 5, "c ran again");
    all_completed();

    // A ledger that is not one, or none: the journal decides, and nothing runs again.
    std::fs::write(&ledger, b"not a ledger").expect("write");
    run();
    std::fs::remove_file(&ledger).expect("remove");
    run();
    assert_eq!(
        journal_count(&sb, ws, "attempt_started"),
        5,
        "nothing ran again"
    );
    all_completed();
    assert!(ledger.is_file(), "written again");
}

/// Issue 26: a resume that records nothing new leaves an output that is exactly as the last
/// run left it alone (a million-row output is not rewritten for nothing), and rewrites one
/// that was edited, removed, or is shaped otherwise now.
#[test]
fn a_resume_with_nothing_to_do_rewrites_only_an_output_that_changed() {
    use std::os::unix::fs::MetadataExt;
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "success")]);
    let out = sb.join("workers-output.csv");
    let run = |extra: &[&str]| {
        let r = sb.fake_batch(extra);
        assert_eq!(r.code, 0, "{r:?}");
    };
    let stamp = || {
        let m = std::fs::metadata(&out).expect("output");
        (m.ino(), m.mtime(), m.mtime_nsec(), m.len())
    };
    run(&[]);
    let first = stamp();
    let written = sb.read("workers-output.csv");
    std::thread::sleep(Duration::from_millis(50));
    run(&[]);
    assert_eq!(stamp(), first, "a current output is left alone");

    // Edited by hand: written again, as the journal has it.
    std::fs::write(&out, written.replace("completed", "COMPLETED")).expect("edit");
    run(&[]);
    assert_eq!(sb.read("workers-output.csv"), written);
    // Removed: written again.
    std::fs::remove_file(&out).expect("remove");
    run(&[]);
    assert_eq!(sb.read("workers-output.csv"), written);
    // Another shape (the rows --only names): written again.
    let before = stamp();
    std::thread::sleep(Duration::from_millis(50));
    run(&["--only", "a"]);
    assert_ne!(stamp(), before, "written again");
    assert_eq!(
        journal_count(&sb, "workers-output.runner", "attempt_started"),
        3,
        "only a ran again"
    );
    // A row that runs again: written again, whatever the file.
    let before = stamp();
    std::thread::sleep(Duration::from_millis(50));
    sb.write_rows(&[("a", "success"), ("b", "handoff")]);
    run(&[]);
    assert_ne!(stamp(), before);
    assert_eq!(
        journal_count(&sb, "workers-output.runner", "attempt_started"),
        4,
        "the changed row ran"
    );
}
