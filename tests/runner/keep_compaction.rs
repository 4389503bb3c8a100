//! Compaction (issue 26): a completed item leaves one line of `completed.jsonl` instead of a
//! folder, and everything a user does next — `show`, `logs` (also `--follow`), the HTML
//! report, reruns — still works on it; a damaged record never shows another item's lines.
//! Part of the results-outlive-the-workspace tests of `keep.rs`.

use std::path::Path;
use std::process::Stdio;

use crate::harness::{Sandbox, by_id, wait_for};

/// Issue 26: a completed item leaves one line of `completed.jsonl`, not a folder; a failed
/// one keeps its folder. Everything a user does next still works on the compacted items:
/// `show`, `logs` (any attempt's kept end), the HTML report, resume, `--only failed` and
/// `--only ID`.
#[test]
fn completed_items_are_compacted_and_show_logs_report_and_reruns_still_work() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "failed"), ("c", "flaky")]);
    let r = sb.fake_batch(&["--retries", "1", "--retry-delay", "10ms"]);
    assert_eq!(r.code, 1, "{r:?}");
    let ws = sb.join("workers-output.runner");
    let folders = |ws: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(ws.join("teammates"))
            .expect("teammates")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        folders(&ws),
        ["2-b"],
        "only the failed item keeps its folder"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    let record = ws.join("completed.jsonl").display().to_string();
    assert_eq!(rows["a"]["log"], record);
    assert_eq!(rows["c"]["log"], record);
    assert!(
        rows["b"]["log"].ends_with("teammates/2-b/attempt-2.stdout.log"),
        "{:?}",
        rows["b"]
    );

    // c's first attempt failed: its stderr is kept with the record.
    let logs = sb.run(&[
        "logs",
        "c",
        "workers-output.csv",
        "--attempt",
        "1",
        "--stderr",
    ]);
    assert_eq!(
        (logs.code, logs.stdout.trim()),
        (0, "transient failure"),
        "{logs:?}"
    );
    let show = sb.run(&["show", "c", "workers-output.csv"]);
    assert!(
        show.stdout.contains("completed after 2 attempt(s)")
            && show.stdout.contains("worked on retry")
            && show.stdout.contains("kept in"),
        "{show:?}"
    );
    let prompt = sb.run(&["show", "c", "workers-output.csv", "--prompt"]);
    assert!(prompt.stdout.contains("This is attempt 2"), "{prompt:?}");

    let html = sb.run(&["report", "--html", "r.html", "workers-output.csv"]);
    assert_eq!(html.code, 0, "{html:?}");
    let page = sb.read("r.html");
    assert!(page.contains("completed.jsonl") && page.contains("worked on retry"));

    // --only failed reruns b alone; a and c stay as they were.
    let again = sb.fake_batch(&["--only", "failed"]);
    assert_eq!(again.code, 1, "{again:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        (
            rows["a"]["attempts"].as_str(),
            rows["b"]["attempts"].as_str(),
            rows["c"]["attempts"].as_str()
        ),
        ("1", "3", "2")
    );
    assert_eq!(folders(&ws), ["2-b"]);

    // --only a redoes a: attempt 2, its record replaced, its folder gone again.
    let redo = sb.fake_batch(&["--only", "a"]);
    assert_eq!(redo.code, 0, "the item run completed: {redo:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["attempts"], "2");
    assert_eq!(folders(&ws), ["2-b"]);
    let show = sb.run(&["show", "a", "workers-output.csv"]);
    assert!(
        show.stdout.contains("completed after 2 attempt(s)"),
        "{show:?}"
    );
    let logs = sb.run(&["logs", "a", "workers-output.csv"]);
    assert_eq!((logs.code, logs.stdout.trim()), (0, "done"), "{logs:?}");
}

/// The review of issue 26's compaction: a record file that lost an item's line (cut by a
/// crash or a full disk) says so — `show` never prints another item's lines, `logs` and
/// `show --prompt` exit 2 — and the next record starts on a line of its own.
#[test]
fn a_damaged_record_file_never_shows_another_items_lines() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "success")]);
    let r = sb.fake_batch(&["--jobs", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let file = sb.join("workers-output.runner/completed.jsonl");
    let text = std::fs::read_to_string(&file).expect("record");
    // Cut b's line in the middle, as a full disk would.
    let b_at = text.find("{\"v\":1,\"id\":\"b\"").expect("b's line");
    std::fs::write(&file, &text[..b_at + 40]).expect("cut");
    let show = sb.run(&["show", "b", "workers-output.csv"]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(
        show.stdout
            .contains("holds no readable record of this item")
            && !show.stdout.contains("Handle a."),
        "{show:?}"
    );
    let logs = sb.run(&["logs", "b", "workers-output.csv"]);
    assert_eq!(logs.code, 2, "{logs:?}");
    assert!(logs.stderr.contains("no readable record"), "{logs:?}");
    let prompt = sb.run(&["show", "b", "workers-output.csv", "--prompt"]);
    assert_eq!(prompt.code, 2, "{prompt:?}");
    // a is intact; a rerun of b appends a whole line after the cut one.
    let a = sb.run(&["logs", "a", "workers-output.csv"]);
    assert_eq!((a.code, a.stdout.trim()), (0, "done"), "{a:?}");
    let again = sb.fake_batch(&["--only", "b"]);
    assert_eq!(again.code, 0, "{again:?}");
    let logs = sb.run(&["logs", "b", "workers-output.csv"]);
    assert_eq!((logs.code, logs.stdout.trim()), (0, "done"), "{logs:?}");
    assert!(logs.stderr.contains("skipped 1 damaged line"), "{logs:?}");
}

/// A batch of one row `a`, and the file whose creation lets its agent go on.
fn one_row_held() -> (Sandbox, std::path::PathBuf) {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\na\n");
    sb.write("instr.md", "Do {id}\n");
    let release = sb.join("release");
    (sb, release)
}

/// What `runner logs a --follow` prints when the agent waiting for file `release` is let go
/// while it follows.
fn follow_then_release(sb: &Sandbox, release: &Path) -> String {
    let follow = sb
        .cmd(&["logs", "a", "workers-output.csv", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn logs");
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(release, "go").expect("release");
    let out = follow.wait_with_output().expect("logs ends");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `runner logs --follow` of an item that completes prints its last line, though its
/// folder is compacted as it ends.
#[test]
fn logs_follow_prints_the_end_of_an_item_compacted_as_it_ends() {
    let (sb, release) = one_row_held();
    let agent = sb.write(
        "slow.sh",
        format!(
            "#!/bin/sh\ncat >/dev/null\necho 'line 1'\nwhile [ ! -e '{}' ]; do sleep 0.05; done\necho 'FINAL LINE'\nprintf '{{\"status\":\"completed\",\"summary\":\"ok\"}}' > \"$RUNNER_REPORT\"\n",
            release.display()
        ),
    );
    let runner = sb
        .batch_cmd(
            &["--id-column", "id", "--format", "plain"],
            &["sh", &agent.display().to_string()],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    let log = sb.join("workers-output.runner/teammates/1-a/attempt-1.stdout.log");
    wait_for("the agent's first line", 30, || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("line 1"))
    });
    let text = follow_then_release(&sb, &release);
    let _ = runner.wait_with_output();
    assert_eq!(text, "line 1\nFINAL LINE\n");
    assert!(!sb.join("workers-output.runner/teammates/1-a").exists());
}

/// A compacted item run again: while the rerun goes on, `logs --follow` and `show` follow
/// its folder, not the old record; after a rerun that failed (its folder kept), the first
/// completion's attempts are still found in the record.
#[test]
fn a_compacted_item_run_again_is_followed_live_and_keeps_its_earlier_attempts() {
    let (sb, release) = one_row_held();
    let agent = sb.write(
        "agent.sh",
        format!(
            "#!/bin/sh\ncat >/dev/null\necho \"attempt $RUNNER_ATTEMPT\"\n\
             case \"$RUNNER_ATTEMPT\" in\n\
             1) echo 'first failed' >&2; exit 1;;\n\
             2) ;;\n\
             3) while [ ! -e '{}' ]; do sleep 0.05; done; echo 'third done';;\n\
             *) exit 1;;\n\
             esac\n\
             printf '{{\"status\":\"completed\",\"summary\":\"ok\"}}' > \"$RUNNER_REPORT\"\n",
            release.display()
        ),
    );
    let run = |extra: &[&str]| {
        let mut flags = vec![
            "--id-column",
            "id",
            "--format",
            "plain",
            "--retry-delay",
            "10ms",
        ];
        flags.extend_from_slice(extra);
        let agent = agent.display().to_string();
        sb.batch_cmd(&flags, &["sh", &agent])
    };
    let first = run(&["--retries", "1"]).output().expect("run");
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let folder = sb.join("workers-output.runner/teammates/1-a");
    assert!(!folder.exists(), "compacted");
    // Attempt 3, held until released.
    let runner = run(&["--only", "a"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for("attempt 3 to print", 30, || {
        std::fs::read_to_string(folder.join("attempt-3.stdout.log"))
            .is_ok_and(|t| t.contains("attempt 3"))
    });
    let show = sb.run(&["show", "a", "workers-output.csv"]);
    assert!(
        show.stdout.contains("running") && !show.stdout.contains("kept in"),
        "the live folder, not the old record: {show:?}"
    );
    assert_eq!(
        follow_then_release(&sb, &release),
        "attempt 3\nthird done\n"
    );
    assert_eq!(
        runner.wait_with_output().expect("runner").status.code(),
        Some(0)
    );
    // A fourth run fails and keeps its folder; attempts 1 and 2 are still in the record.
    let failed = run(&["--only", "a"]).output().expect("run");
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    assert!(folder.exists());
    let logs = sb.run(&[
        "logs",
        "a",
        "workers-output.csv",
        "--attempt",
        "1",
        "--stderr",
    ]);
    assert_eq!(
        (logs.code, logs.stdout.trim()),
        (0, "first failed"),
        "{logs:?}"
    );
    let logs = sb.run(&["logs", "a", "workers-output.csv", "--attempt", "3"]);
    assert_eq!(
        (logs.code, logs.stdout.as_str()),
        (0, "attempt 3\nthird done\n"),
        "{logs:?}"
    );
}
