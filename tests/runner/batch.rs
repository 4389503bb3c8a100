//! `runner batch`: the CSV pipeline end to end (issue: core batch).

use crate::harness::{Sandbox, agent, by_id, csv_rows};

const FAKE: &str = "fake_agent.py";

/// A sandbox with `in.csv` (columns id, mode) and `instr.md` using both.
fn batch(rows: &[(&str, &str)]) -> Sandbox {
    let sb = Sandbox::new();
    sb.write_rows(rows);
    sb
}

fn run_batch(sb: &Sandbox, extra: &[&str]) -> crate::harness::Run {
    sb.fake_batch(extra)
}

#[test]
fn success_writes_output_row_workspace_and_exit_0() {
    let sb = batch(&[("a", "success"), ("b", "success")]);
    let r = run_batch(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed");
    assert_eq!(rows["a"]["attempts"], "1");
    assert_eq!(rows["a"]["exit_code"], "0");
    assert_eq!(rows["a"]["summary"], "fake agent handled a");
    assert_eq!(rows["a"]["result"], r#"{"ok":true,"echo":"a"}"#);
    // The workspace holds the snapshot, the journal and one record of the completed items:
    // their folders were compacted into it, and the log column names it.
    let ws = sb.join("workers-output.runner");
    assert_eq!(
        rows["a"]["log"],
        ws.join("completed.jsonl").display().to_string()
    );
    let team: serde_json::Value =
        serde_json::from_str(&sb.read("workers-output.runner/team.json")).expect("team.json");
    assert_eq!(team["state"], "finished");
    assert_eq!(team["counts"]["completed"], 2);
    assert!(ws.join("journal.jsonl").is_file());
    assert_eq!(
        std::fs::read_dir(ws.join("teammates"))
            .expect("teammates")
            .count(),
        0,
        "completed items keep no folder"
    );
    let prompt = sb.prompt("workers-output.runner", "a");
    assert!(prompt.contains("Handle a. MODE=success"), "{prompt}");
    assert!(
        prompt.contains(
            &ws.join("teammates/1-a/work/report.json")
                .display()
                .to_string()
        )
    );
    let show = sb.run(&["show", "a", &ws.display().to_string()]);
    assert!(show.stdout.contains("kept in"), "{show:?}");
    assert!(show.stdout.contains("fake agent handled a"), "{show:?}");
    // The workspace is private: logs can hold secrets.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&ws).expect("ws").permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    assert!(
        r.stdout.contains("Summary: 2 item(s): 2 completed"),
        "{r:?}"
    );
}

#[test]
fn keep_logs_keeps_each_completed_items_folder_with_its_prompt_and_logs() {
    let sb = batch(&[("a", "success")]);
    let r = run_batch(&sb, &["--keep-logs"]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert!(
        rows["a"]["log"].ends_with("teammates/1-a/attempt-1.stdout.log"),
        "{:?}",
        rows["a"]["log"]
    );
    let ws = sb.join("workers-output.runner");
    assert!(!ws.join("completed.jsonl").exists());
    let prompt = sb.read("workers-output.runner/teammates/1-a/prompt.md");
    assert!(prompt.contains("Handle a. MODE=success"), "{prompt}");
    assert_eq!(sb.prompt("workers-output.runner", "a"), prompt);
    // The stdout log the output names always exists; a stderr log only when the agent wrote
    // to stderr (this one did not).
    assert!(ws.join("teammates/1-a/attempt-1.stdout.log").is_file());
    assert!(!ws.join("teammates/1-a/attempt-1.stderr.log").exists());
}

/// Issue 26: a quick agent's prompt goes to it from memory and its stdout is held there, so
/// a completed item writes neither; an item that does not complete still leaves both in its
/// folder, where a person looks, and `show` and `logs` read them there or from the record.
#[test]
fn prompts_and_logs_held_in_memory_reach_the_folder_of_an_item_that_did_not_complete() {
    let sb = batch(&[("ok", "success"), ("silent", "noreport")]);
    let r = run_batch(&sb, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let ws = sb.join("workers-output.runner");
    assert!(!ws.join("teammates/1-ok").exists(), "compacted");
    let folder = ws.join("teammates/2-silent");
    let prompt = std::fs::read_to_string(folder.join("prompt.md")).expect("prompt.md");
    assert!(prompt.contains("Handle silent. MODE=noreport"), "{prompt}");
    assert_eq!(
        std::fs::read_to_string(folder.join("attempt-1.stdout.log")).expect("stdout log"),
        "All done, trust me!\n"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert!(rows["silent"]["log"].ends_with("teammates/2-silent/attempt-1.stdout.log"));
    let logs = sb.run(&["logs", "silent", &ws.display().to_string()]);
    assert_eq!(logs.stdout, "All done, trust me!\n", "{logs:?}");
    // The completed one: its prompt and what it printed, from the record.
    assert!(
        sb.prompt("workers-output.runner", "ok")
            .contains("Handle ok. MODE=success")
    );
    let logs = sb.run(&["logs", "ok", &ws.display().to_string()]);
    assert_eq!(logs.stdout, "done\n", "{logs:?}");
}

#[test]
fn every_way_of_not_succeeding_is_caught() {
    let sb = batch(&[
        ("ok", "success"),
        ("fenced", "fenced"),
        ("last", "text_last"),
        ("crash", "nonzero"),
        ("silent", "noreport"),
        ("wrong", "wrongid"),
        ("stuck", "blocked"),
        ("gaveup", "failed"),
    ]);
    let r = run_batch(&sb, &["--jobs", "4"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    let status = |id: &str| rows[id]["status"].as_str();
    assert_eq!(status("ok"), "completed");
    assert_eq!(
        status("fenced"),
        "completed",
        "a report only in a fenced block on stdout counts"
    );
    assert_eq!(
        status("last"),
        "completed",
        "the last complete JSON object counts"
    );
    assert_eq!(status("crash"), "failed");
    assert!(
        rows["crash"]["error"].contains("exited with code 3")
            && rows["crash"]["error"].contains("crashing"),
        "{:?}",
        rows["crash"]
    );
    assert_eq!(rows["crash"]["exit_code"], "3");
    assert_eq!(status("silent"), "failed");
    assert!(rows["silent"]["error"].starts_with("no report"));
    assert_eq!(status("wrong"), "failed");
    assert!(rows["wrong"]["error"].contains("someone-else"));
    assert_eq!(status("stuck"), "blocked");
    assert_eq!(
        rows["stuck"]["error"],
        "blocked: needs an API key from a person"
    );
    assert_eq!(status("gaveup"), "failed");
    assert!(rows["gaveup"]["error"].contains("could not reproduce"));
    // The closing summary names each item that did not complete with the log that explains
    // it: the crashing agent printed only to stderr, so its stderr log.
    assert!(r.stdout.contains("4-crash/attempt-1.stderr.log"), "{r:?}");
    assert!(rows["crash"]["log"].ends_with("4-crash/attempt-1.stderr.log"));
    assert!(
        std::fs::read_to_string(&rows["crash"]["log"])
            .expect("the named log exists")
            .contains("crashing")
    );
    // The silent agent printed to stdout: its stdout log.
    assert!(rows["silent"]["log"].ends_with("attempt-1.stdout.log"));
}

#[test]
fn output_violating_the_schema_fails_and_schema_fields_become_columns() {
    let sb = batch(&[("good", "success"), ("bad", "schema_bad")]);
    sb.write(
        "schema.json",
        r#"{"type":"object","required":["ok"],"properties":{"ok":{"type":"boolean"},"echo":{"type":"string"}}}"#,
    );
    let r = run_batch(&sb, &["--output-schema", "schema.json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["good"]["status"], "completed");
    assert_eq!(rows["good"]["ok"], "true");
    assert_eq!(rows["good"]["echo"], "good");
    assert_eq!(rows["bad"]["status"], "failed");
    assert!(
        rows["bad"]["error"].contains("output_schema") && rows["bad"]["error"].contains("/ok"),
        "{:?}",
        rows["bad"]
    );
    let header = sb
        .read("workers-output.csv")
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(
        header.starts_with("id,mode,ok,echo,status,attempts,"),
        "{header}"
    );
}

#[test]
fn timeout_ends_the_whole_process_group() {
    let sb = batch(&[("slowpoke", "fork_sleep"), ("stubborn", "ignore_term")]);
    let r = run_batch(&sb, &["--timeout", "1s", "--grace", "1s"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["slowpoke"]["status"], "timed_out");
    assert_eq!(
        rows["stubborn"]["status"], "timed_out",
        "an agent ignoring SIGTERM is killed after the grace period"
    );
    assert!(rows["slowpoke"]["error"].contains("timed out after 1s"));
    // It printed nothing at all: the reason says so (issue 56).
    assert!(
        rows["slowpoke"]["error"].contains("it printed nothing after it started"),
        "{:?}",
        rows["slowpoke"]
    );
    let left = sb.survivors_after(2.0);
    assert!(left.is_empty(), "processes survived the timeout: {left:?}");
}

/// A relative `-o ../x/out.csv` above the working directory: no path handed to the agent
/// keeps a `..` — not `{workspace}` in its argv, not a `RUNNER_*` variable, not the prompt
/// (issue 56: OpenCode's permission rule for `{workspace}/*` did not match the path it
/// normalised, and its write of the report was rejected).
#[test]
fn a_relative_output_above_the_cwd_hands_the_agent_paths_without_dot_dot() {
    let sb = crate::harness::Sandbox::new();
    sb.write("proj/in.csv", "id\n1\n");
    sb.write("proj/instr.md", "Do item {id}.\n");
    sb.write(
        "proj/echo.toml",
        r#"name = "echo"
program = "sh"
args = ["-c", "d=$RUNNER_TEAMMATE_DIR; printf 'workspace=%s\n' \"$0\" > \"$d/seen.txt\"; env | grep '^RUNNER_' >> \"$d/seen.txt\"; cat >> \"$d/seen.txt\"; printf '{{\"status\":\"completed\",\"summary\":\"echoed\"}}' > \"$RUNNER_REPORT\"", "{workspace}"]
prompt = "stdin"
output = "text"
"#,
    );
    let mut cmd = sb.cmd(&[
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "-o",
        "../x/out.csv",
        "--runner-file",
        "echo.toml",
        "--format",
        "plain",
        "--keep-logs",
    ]);
    cmd.current_dir(sb.join("proj"));
    let r: crate::harness::Run = cmd.output().expect("spawn runner").into();
    assert_eq!(r.code, 0, "{r:?}");
    let real = sb.path().canonicalize().expect("sandbox");
    let ws = sb.workspace_of(&sb.join("x/out.runner"));
    let seen = std::fs::read_to_string(ws.join("teammates/1-1/work/seen.txt")).expect("seen.txt");
    let workspace = seen.lines().next().unwrap_or_default();
    assert!(
        workspace.starts_with(&format!("workspace={}", real.display()))
            && workspace.ends_with("/teammates/1-1/work"),
        "{seen}"
    );
    assert!(!seen.contains("/../") && !seen.contains("/./"), "{seen}");
    assert!(
        seen.contains(&format!("RUNNER_REPORT={}", real.display())),
        "{seen}"
    );
    assert!(!r.stdout.contains("/../"), "{r:?}");
}

#[test]
fn child_exiting_with_a_grandchild_holding_its_pipes_does_not_hang_and_counts() {
    let sb = batch(&[("a", "fork_exit")]);
    let started = std::time::Instant::now();
    let r = run_batch(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        started.elapsed().as_secs() < 30,
        "the runner waited for the grandchild"
    );
    assert!(
        sb.survivors_after(2.0).is_empty(),
        "the grandchild survived"
    );
}

/// Issue 32: a process an agent leaves holding its output costs the slot the pipe wait; the
/// run says so once (which item, which process, that it was ended), the item's duration
/// counts that time, and a runner definition that declares `leaves_processes` has them
/// ended at once, without the note.
#[test]
fn processes_left_holding_the_output_are_named_once_and_counted_in_the_duration() {
    let sb = batch(&[("a", "fork_exit"), ("b", "fork_exit")]);
    let r = run_batch(&sb, &["--jobs", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.stderr
            .matches("kept the agent's output open after it exited")
            .count(),
        1,
        "{r:?}"
    );
    assert!(
        r.stderr.contains("1-a attempt 1: sleep (pid ") && r.stderr.contains("ended after 2s"),
        "{r:?}"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b"] {
        let d: f64 = rows[id]["duration_s"].parse().expect("duration");
        assert!(
            d >= 2.0,
            "the held pipes count in the duration: {:?}",
            rows[id]
        );
    }
    assert!(sb.survivors_after(2.0).is_empty());

    let sb = batch(&[("a", "fork_exit")]);
    let fake = agent(FAKE);
    sb.write(
        "leaves.toml",
        format!(
            "name = \"leaves\"\nprogram = \"python3\"\nargs = [{fake:?}]\nprompt = \"stdin\"\noutput = \"text\"\nleaves_processes = true\n"
        ),
    );
    let r = sb.run(&[
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--id-column",
        "id",
        "--format",
        "plain",
        "--runner-file",
        "leaves.toml",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stderr.contains("kept the agent's output open"), "{r:?}");
    assert!(sb.survivors_after(2.0).is_empty());
}

#[test]
fn huge_stderr_is_capped_with_head_tail_and_marker() {
    let sb = batch(&[("loud", "flood_stderr")]);
    let r = sb
        .fake_batch_cmd(&["--log-cap", "1048576", "--keep-logs"])
        .env("FLOOD_BYTES", (50 * 1024 * 1024).to_string())
        .output()
        .expect("run");
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let log = sb.join("workers-output.runner/teammates/1-loud/attempt-1.stderr.log");
    let size = std::fs::metadata(&log).expect("log").len();
    assert!(size <= 1024 * 1024 + 200, "log not capped: {size} bytes");
    assert!(
        size >= 1024 * 1024,
        "log lost its head or tail: {size} bytes"
    );
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains("bytes cut here"), "no cut marker");
    assert!(
        !sb.join("workers-output.runner/teammates/1-loud/attempt-1.stderr.log.tail")
            .exists()
    );
}

#[test]
fn agents_that_read_stdin_to_eof_or_never_read_it_both_finish() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\n1\n2\n");
    // A large instruction so the prompt exceeds a pipe buffer.
    sb.write(
        "instr.md",
        format!("Item {{id}}.\n{}\n", "filler line\n".repeat(20_000)),
    );
    let cat_agent = sb.write(
        "cat_agent.sh",
        "#!/bin/sh\nwc -c > \"$RUNNER_TEAMMATE_DIR/stdin-bytes\"\nprintf '{\"status\":\"completed\",\"summary\":\"read it all\"}' > \"$RUNNER_REPORT\"\n",
    );
    let deaf_agent = sb.write(
        "deaf_agent.sh",
        "#!/bin/sh\nprintf '{\"status\":\"completed\",\"summary\":\"never read\"}' > \"$RUNNER_REPORT\"\n",
    );
    for script in [&cat_agent, &deaf_agent] {
        let out = sb.join("out.csv");
        let _ = std::fs::remove_file(&out);
        let r = sb.batch(
            &[
                "--output",
                "out.csv",
                "--format",
                "plain",
                "--timeout",
                "20s",
                "--keep-logs",
            ],
            &["sh", &script.display().to_string()],
        );
        assert_eq!(r.code, 0, "{r:?}");
    }
    let bytes: usize = sb
        .read("out.runner/teammates/1-1/work/stdin-bytes")
        .trim()
        .parse()
        .expect("count");
    let prompt = std::fs::metadata(sb.join("out.runner/teammates/1-1/prompt.md"))
        .expect("prompt")
        .len() as usize;
    assert_eq!(
        bytes, prompt,
        "the agent must receive the whole prompt on stdin, then EOF"
    );
}

/// `prompt = "pipe"`: a CLI that reads its prompt only from a pipe (`test -p /dev/stdin`,
/// like Cline) gets the whole prompt — larger than a pipe buffer — then end of input; with
/// `prompt = "stdin"` (a read-only file) the same agent refuses it.
#[test]
fn a_definition_with_prompt_pipe_hands_the_prompt_through_a_pipe() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\n1\n");
    sb.write(
        "instr.md",
        format!("Item {{id}}.\n{}\n", "filler line\n".repeat(20_000)),
    );
    let script = sb.write(
        "pipe_only.sh",
        "#!/bin/sh\ntest -p /dev/stdin || { echo 'error: stdin is not a pipe' >&2; exit 3; }\n\
         wc -c > \"$RUNNER_TEAMMATE_DIR/stdin-bytes\"\n\
         printf '{\"status\":\"completed\",\"summary\":\"read a pipe\"}' > \"$RUNNER_REPORT\"\n",
    );
    for (prompt, code) in [("stdin", 1), ("pipe", 0)] {
        sb.write(
            "piped.toml",
            format!(
                "name='piped'\nprogram='sh'\nargs=['{}']\nprompt='{prompt}'\noutput='text'\n",
                script.display()
            ),
        );
        let _ = std::fs::remove_dir_all(sb.join("out.runner"));
        let _ = std::fs::remove_file(sb.join("out.csv"));
        let r: crate::harness::Run = sb
            .cmd(&[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--output",
                "out.csv",
                "--format",
                "plain",
                "--timeout",
                "20s",
                "--keep-logs",
                "--runner-file",
                "piped.toml",
            ])
            .output()
            .expect("run")
            .into();
        assert_eq!(r.code, code, "prompt = {prompt}: {r:?}");
    }
    let bytes: usize = sb
        .read("out.runner/teammates/1-1/work/stdin-bytes")
        .trim()
        .parse()
        .expect("count");
    let prompt = std::fs::metadata(sb.join("out.runner/teammates/1-1/prompt.md"))
        .expect("prompt")
        .len() as usize;
    assert_eq!(bytes, prompt, "the whole prompt through the pipe, then EOF");
}

#[test]
fn the_runner_environment_reaches_the_agent() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\nx1\n");
    sb.write("instr.md", "Do {id}\n");
    let script = sb.write(
        "env_agent.sh",
        "#!/bin/sh\nenv | grep '^RUNNER_' | sort > \"$RUNNER_TEAMMATE_DIR/env.txt\"\n\
         printf '{\"status\":\"completed\",\"summary\":\"ok\"}' > \"$RUNNER_REPORT\"\n",
    );
    let r = sb.batch(
        &["--id-column", "id", "--keep-logs"],
        &["sh", &script.display().to_string()],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let env = sb.read("workers-output.runner/teammates/1-x1/work/env.txt");
    let ws = sb.join("workers-output.runner").display().to_string();
    for want in [
        format!("RUNNER_REPORT={ws}/teammates/1-x1/work/report.json"),
        "RUNNER_ITEM_ID=x1".to_string(),
        "RUNNER_TEAM=workers-output".to_string(),
        "RUNNER_TEAMMATE=1-x1".to_string(),
        format!("RUNNER_WORKSPACE={ws}"),
        "RUNNER_CHECKPOINT=".to_string(),
    ] {
        assert!(env.lines().any(|l| l == want), "missing {want} in\n{env}");
    }
}

#[test]
fn two_hundred_rows_at_jobs_8_all_complete_once() {
    let sb = Sandbox::new();
    let mut csv = String::from("n,text\n");
    for i in 0..200 {
        csv.push_str(&format!("{i},\"row {i}, with a comma\"\n"));
    }
    sb.write("in.csv", csv);
    sb.write("instr.md", "Echo {text}. MODE=success\n");
    let r = sb.batch(
        &["--id-column", "n", "--jobs", "8", "--format", "plain"],
        &["python3", &agent(FAKE)],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let rows = csv_rows(&sb.join("workers-output.csv"));
    assert_eq!(rows.len(), 200);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["n"], i.to_string(), "rows keep input order");
        assert_eq!(row["text"], format!("row {i}, with a comma"));
        assert_eq!(row["status"], "completed");
    }
}

#[test]
fn rerunning_resumes_without_redoing_completed_items() {
    let sb = batch(&[("a", "success"), ("b", "noreport")]);
    assert_eq!(run_batch(&sb, &[]).code, 1);
    let first = by_id(&sb.join("workers-output.csv"), "id");
    // Fix b's instruction mode by editing the CSV; a stays identical.
    sb.write("in.csv", "id,mode\na,success\nb,success\n");
    let r = run_batch(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("1 from an earlier run"), "{r:?}");
    let second = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        second["a"], first["a"],
        "a completed row is carried over, not rerun"
    );
    assert_eq!(second["b"]["status"], "completed");
    assert_eq!(second["b"]["attempts"], "2", "attempts count across runs");
    assert!(
        !sb.join("workers-output.runner/teammates/1-a/attempt-2.stdout.log")
            .exists()
    );
}

#[test]
fn retries_rerun_failed_attempts_with_the_previous_reason_in_the_prompt() {
    let sb = batch(&[("f", "flaky")]);
    let r = run_batch(&sb, &["--retries", "2", "--retry-delay", "10ms"]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["f"]["attempts"], "2");
    assert_eq!(rows["f"]["summary"], "worked on retry");
    let prompt = sb.prompt("workers-output.runner", "f");
    assert!(
        prompt.contains("This is attempt 2")
            && prompt.contains("exited with code 1: transient failure"),
        "{prompt}"
    );
}

#[test]
fn a_rate_limited_row_waits_for_the_team_s_pause_and_completes_without_a_retry() {
    let sb = batch(&[("a", "rate_limited_once"), ("b", "success")]);
    let r = run_batch(&sb, &["--format", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed", "{:?}", rows["a"]);
    assert_eq!(rows["a"]["attempts"], "2", "--retries 0, re-queued once");
    assert_eq!(rows["a"]["summary"], "worked after the pause");
    let paused: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.contains(r#""event":"team_paused""#))
        .collect();
    assert_eq!(paused.len(), 1, "{}", r.stdout);
    assert!(paused[0].contains(r#""wait_s":0.5"#), "{}", paused[0]);
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(journal.contains(r#""event":"team_paused""#), "journaled");
}

/// Issue 29: a provider that keeps answering "try again in 0.2s" is not retried almost
/// without end. `--rate-limit-wait` bounds the item's whole time on rate limits — the
/// waits and the rate-limited attempts themselves — and from the third rate limit in a row
/// the item's own back-off grows on top of the hint (2 s, 4 s, …). Within 6 s that is a
/// handful of attempts; obeying the hint to the letter it was about 20.
#[test]
fn a_hint_that_repeats_grows_and_the_wait_bound_counts_the_attempts_too() {
    let sb = batch(&[("a", "rate_limited_always")]);
    let r = run_batch(&sb, &["--rate-limit-wait", "6s", "--format", "plain"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    let a = &rows["a"];
    assert_eq!(
        (a["status"].as_str(), a["failure_kind"].as_str()),
        ("failed", "rate_limited"),
        "{a:?}"
    );
    let attempts: u32 = a["attempts"].parse().expect("attempts");
    assert!(
        (3..=6).contains(&attempts),
        "{attempts} attempts within a 6 s bound: {a:?}"
    );
    assert!(a["error"].contains("rate"), "{a:?}");
}

#[test]
fn a_bad_key_costs_one_wave_of_attempts_and_the_rest_are_skipped_saying_why() {
    let rows: Vec<(String, &str)> = (0..12).map(|n| (format!("r{n:02}"), "auth")).collect();
    let rows: Vec<(&str, &str)> = rows.iter().map(|(id, m)| (id.as_str(), *m)).collect();
    let sb = batch(&rows);
    let r = run_batch(&sb, &["--jobs", "2", "--retries", "3", "--format", "plain"]);
    assert_eq!(r.code, 1, "{r:?}");
    let out = csv_rows(&sb.join("workers-output.csv"));
    let started = out.iter().filter(|row| row["attempts"] != "0").count();
    assert!(started <= 2, "one wave, no retries: {started} started");
    for row in &out {
        if row["attempts"] == "0" {
            assert_eq!(row["status"], "skipped", "{row:?}");
            assert_eq!(row["failure_kind"], "skipped", "{row:?}");
            assert!(
                row["error"].starts_with("not started: authentication failed ("),
                "{row:?}"
            );
        } else {
            assert_eq!(
                (row["status"].as_str(), row["failure_kind"].as_str()),
                ("failed", "auth")
            );
        }
    }
    assert!(
        r.stdout
            .contains("STOPPED  starting no more items: authentication failed"),
        "{r:?}"
    );
}

#[test]
fn a_quota_with_a_reset_time_in_its_message_waits_for_it_and_one_without_stops_the_team() {
    let sb = batch(&[("a", "quota_reset")]);
    let r = run_batch(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        (rows["a"]["status"].as_str(), rows["a"]["summary"].as_str()),
        ("completed", "worked after the reset")
    );
    assert!(
        r.stdout
            .contains("PAUSED  rate limited: no attempt starts for 1s"),
        "{r:?}"
    );

    let sb = batch(&[("a", "quota"), ("b", "success"), ("c", "success")]);
    let r = run_batch(&sb, &["--jobs", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        (
            rows["a"]["status"].as_str(),
            rows["a"]["failure_kind"].as_str()
        ),
        ("failed", "quota")
    );
    for id in ["b", "c"] {
        assert_eq!(rows[id]["status"], "skipped", "{:?}", rows[id]);
        assert_eq!(
            rows[id]["error"],
            "not started: quota exhausted: the report says failed: daily quota exhausted"
        );
    }
    // Once the quota is back, --only failed runs what was skipped.
    sb.write_rows(&[("a", "success"), ("b", "success"), ("c", "success")]);
    let r = run_batch(&sb, &["--only", "failed"]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert!(
        rows.values().all(|r| r["status"] == "completed"),
        "{rows:?}"
    );
}

#[test]
fn max_fail_and_the_budget_stop_a_batch_early_saying_why() {
    let rows: Vec<(String, &str)> = (0..8).map(|n| (format!("r{n}"), "nonzero")).collect();
    let rows: Vec<(&str, &str)> = rows.iter().map(|(id, m)| (id.as_str(), *m)).collect();
    let sb = batch(&rows);
    let r = run_batch(&sb, &["--jobs", "1", "--max-fail", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    let out = csv_rows(&sb.join("workers-output.csv"));
    assert_eq!(out.iter().filter(|r| r["status"] == "failed").count(), 2);
    assert_eq!(out.iter().filter(|r| r["status"] == "skipped").count(), 6);
    assert!(
        out.iter()
            .filter(|r| r["status"] == "skipped")
            .all(|r| r["error"] == "not started: --max-fail 2 reached: 2 item(s) did not complete"),
        "{out:?}"
    );

    let rows: Vec<(String, &str)> = (0..6).map(|n| (format!("r{n}"), "costly")).collect();
    let rows: Vec<(&str, &str)> = rows.iter().map(|(id, m)| (id.as_str(), *m)).collect();
    let sb = batch(&rows);
    let r = run_batch(&sb, &["--jobs", "1", "--max-cost-usd", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let out = csv_rows(&sb.join("workers-output.csv"));
    let completed: Vec<_> = out.iter().filter(|r| r["status"] == "completed").collect();
    assert_eq!(
        completed.len(),
        2,
        "0.4 + 0.4, and no third: $0.8 spent + $0.4 expected would pass $1"
    );
    assert!(
        completed.iter().all(|r| r["cost_usd"] == "0.4"),
        "{completed:?}"
    );
    assert!(
        out.iter()
            .filter(|r| r["status"] == "skipped")
            .all(|r| r["error"] == "not started: budget of $1 reached: spent $0.8"),
        "{out:?}"
    );
    assert!(r.stdout.contains("budget of $1 reached"), "{r:?}");
    // `runner status` afterwards says what was spent, however short the run.
    let status = sb.run(&["status"]);
    assert!(
        status.stdout.contains("budget: spent $0.8 of $1"),
        "{status:?}"
    );
    // Resumed, the same budget holds: its mean cost is known from the first run, so no
    // attempt starts (one did, and spent $1.2).
    let again = run_batch(&sb, &["--jobs", "1", "--max-cost-usd", "1"]);
    assert_eq!(again.code, 1, "{again:?}");
    let out = csv_rows(&sb.join("workers-output.csv"));
    assert_eq!(
        out.iter().filter(|r| r["status"] == "completed").count(),
        2,
        "{again:?}"
    );
    assert!(
        again.stdout.contains("budget of $1 reached: spent $0.8"),
        "{again:?}"
    );
}

#[test]
fn batch_md_configures_the_run_and_flags_override_it() {
    let sb = Sandbox::new();
    sb.write("jobs/workers-input.csv", "path,owner\ndocs/a.md,ann\n");
    sb.write(
        "jobs/BATCH.md",
        format!(
            "---\nid_column: path\nmax_workers: 2\nmax_runtime_seconds: 30\n\
             output_schema:\n  type: object\n  properties:\n    ok: {{type: boolean}}\n\
             verify: test -n {{path}}\nkeep_formulas: true\n\
             command: [python3, {}]\n---\nCheck {{path}} for {{owner}}. MODE=success\n",
            agent(FAKE)
        ),
    );
    // The dry run shows what BATCH.md set, and what a flag overrides.
    let dry = sb.run(&["batch", "jobs/BATCH.md", "--dry-run", "--timeout", "5m"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    for line in [
        "Output: ",
        "jobs/workers-output.csv",
        "Verify (must exit 0): test -n '{path}'",
        "Output schema: each report's `output` is checked against it",
        "Formulas: agents' values written as they are",
        "Time limit per attempt: 5m;",
        "Isolation: none",
    ] {
        assert!(dry.stdout.contains(line), "{line}: {dry:?}");
    }
    let r = sb.run(&["batch", "jobs/BATCH.md", "--format", "plain"]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = csv_rows(&sb.join("jobs/workers-output.csv"));
    assert_eq!(rows[0]["path"], "docs/a.md");
    assert_eq!(rows[0]["ok"], "true");
    assert!(sb.join("jobs/workers-output.runner/team.json").is_file());
    // --output overrides BATCH.md's default.
    let r = sb.run(&[
        "batch",
        "jobs/BATCH.md",
        "--output",
        "elsewhere.csv",
        "--format",
        "plain",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(sb.join("elsewhere.csv").is_file());
}

#[test]
fn runner_columns_are_prefixed_when_an_input_column_collides() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,status\n1,open\n");
    sb.write("instr.md", "Do {id} ({status}). MODE=success\n");
    let r = sb.batch(&[], &["python3", &agent(FAKE)]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("runner_<name>"), "{r:?}");
    let rows = csv_rows(&sb.join("workers-output.csv"));
    assert_eq!(rows[0]["status"], "open");
    assert_eq!(rows[0]["runner_status"], "completed");
}

#[test]
fn a_missing_program_is_an_environment_error_before_anything_is_written() {
    let sb = batch(&[("a", "success")]);
    let before = sb.tree();
    let r = sb.batch(&[], &["no-such-agent-program"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr
            .contains("`no-such-agent-program` was not found on PATH"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before);
}

#[test]
fn a_second_run_of_the_same_batch_stops_at_once_naming_the_holder() {
    let sb = batch(&[("a", "hang")]);
    let mut first = sb
        .fake_batch_cmd(&[])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("first run");
    // Wait for the first run to hold its lock.
    let lock = sb.join("workers-output.runner/lock");
    for _ in 0..100 {
        if std::fs::read_to_string(&lock).is_ok_and(|s| !s.is_empty()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let r = run_batch(&sb, &[]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains(&format!("pid {}", first.id())), "{r:?}");
    let _ = std::process::Command::new("kill")
        .args(["-INT", &first.id().to_string()])
        .status();
    let status = first.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
}

#[test]
fn verify_decides_a_reported_success_and_its_failure_names_the_log_that_explains_it() {
    let sb = batch(&[("a", "success"), ("b", "success")]);
    sb.write("b.ok", "");
    let r = run_batch(
        &sb,
        &[
            "--verify",
            "sh -c 'test -e {id}.ok || {{ echo missing {id}.ok >&2; exit 1; }}'",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["b"]["status"], "completed", "{:?}", rows["b"]);
    assert_eq!(rows["a"]["status"], "failed");
    let error = &rows["a"]["error"];
    assert!(
        error.ends_with("exited with code 1: missing a.ok"),
        "{error}"
    );
    // The log column (and `show`) name the verify command's log, not the agent's, and the
    // reason is not cut through a path.
    assert!(
        rows["a"]["log"].ends_with("teammates/1-a/attempt-1.verify.stderr.log"),
        "{:?}",
        rows["a"]
    );
    let shown = sb.run(&["show", "a"]);
    assert!(
        shown
            .stdout
            .contains("attempt-1.verify.stderr.log (last 20 lines)")
            && shown.stdout.contains("missing a.ok"),
        "{shown:?}"
    );
}

/// Issue 50: with row-number ids, a row inserted at the top moves every id onto another row.
/// `--only failed` then paired the old results with the new rows (`alpha,completed` on the
/// row that is now `zulu`, `zulu` never run, `bravo` twice). A kept row whose input values
/// differ from the input's row of that id is run again, never copied.
#[test]
fn only_failed_never_copies_a_row_that_stood_for_other_input() {
    let sb = Sandbox::new();
    sb.write("instr.md", "Do {name}. MODE={mode}\n");
    sb.write("in.csv", "name,mode\nalpha,success\nbravo,failed\n");
    let fake = agent("fake_agent.py");
    let run = |extra: &[&str]| {
        let mut flags = vec!["--format", "plain"];
        flags.extend_from_slice(extra);
        sb.batch(&flags, &["python3", &fake])
    };
    let r = run(&[]);
    assert_eq!(r.code, 1, "{r:?}");
    // A row inserted at the top; bravo would now succeed.
    sb.write(
        "in.csv",
        "name,mode\nzulu,success\nalpha,success\nbravo,success\n",
    );
    let r = run(&["--only", "failed"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("2 row(s) are run again instead of copied"),
        "{r:?}"
    );
    let rows = csv_rows(&sb.join("workers-output.csv"));
    let got: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["name"].as_str(), r["status"].as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("zulu", "completed"),
            ("alpha", "completed"),
            ("bravo", "completed")
        ],
        "{rows:?}"
    );
}

/// With ids of their own, a completed row whose input values changed since the output was
/// written is the same item edited: `--only failed` runs it again (its attempts go on)
/// instead of copying a result about other input.
#[test]
fn only_failed_reruns_a_completed_row_whose_input_changed() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "noreport"), ("c", "success")]);
    assert_eq!(sb.fake_batch(&[]).code, 1);
    sb.write_rows(&[("a", "costly"), ("b", "success"), ("c", "success")]);
    let r = sb.fake_batch(&["--only", "failed"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("2 item(s)"), "a and b ran: {r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["mode"], "costly", "{rows:?}");
    assert_eq!(
        rows["a"]["cost_usd"], "0.4",
        "a's result is of its new input: {rows:?}"
    );
    assert_eq!(rows["a"]["attempts"], "2", "{rows:?}");
    assert_eq!(rows["c"]["attempts"], "1", "c was copied: {rows:?}");
}
