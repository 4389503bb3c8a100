//! Regressions found by trying the runner as a new user would (each test names the finding).

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::harness::{Sandbox, agent, by_id};

#[test]
fn an_agent_that_only_echoes_its_prompt_does_not_complete() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\na\n");
    sb.write("instr.md", "Delete {id}\n");
    let r = sb.batch(&["--id-column", "id"], &["cat"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        rows["a"]["status"], "failed",
        "the prompt's example report must not count"
    );
}

#[test]
fn inserting_a_row_above_completed_rows_does_not_rerun_them() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "success")]);
    assert_eq!(sb.fake_batch(&[]).code, 0);
    sb.write_rows(&[("new", "success"), ("a", "success"), ("b", "success")]);
    let r = sb.fake_batch(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("2 from an earlier run"), "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        (
            rows["a"]["attempts"].as_str(),
            rows["b"]["attempts"].as_str()
        ),
        ("1", "1")
    );
    assert_eq!(rows["new"]["status"], "completed");
}

#[test]
fn outputs_never_overwrite_what_the_batch_reads() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    sb.write("blocker", b"a file where a folder must be\n");
    let before = sb.tree();
    for target in ["in.csv", "instr.md"] {
        let r = sb.fake_batch(&["--output", target]);
        assert_eq!(r.code, 2, "{target}: {r:?}");
        assert!(r.stderr.contains("would overwrite"), "{r:?}");
    }
    // (A folder that is not there yet is made; a file in its way is refused.)
    let r = sb.fake_batch(&["--junit", "blocker/dir/j.xml"]);
    assert_eq!(
        r.code, 2,
        "a bad --junit path is refused before the run: {r:?}"
    );
    assert_eq!(sb.tree(), before);
}

#[test]
fn unknown_only_ids_and_colliding_columns_are_refused() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let r = sb.fake_batch(&["--only", "zzz"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--only names ids that are not in") && r.stderr.contains("zzz"),
        "{r:?}"
    );
    let sb = Sandbox::new();
    sb.write_csv("id,mode,status,runner_status\na,success,open,done\n");
    let r = sb.fake_batch(&[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("column `runner_status` collides"),
        "{r:?}"
    );
}

#[test]
fn a_program_after_dashes_is_refused_for_a_cli_runner() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let r = sb.batch(&["--runner", "claude"], &["python3", "x.py"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("only for the exec runner"), "{r:?}");
}

#[test]
fn oversized_reports_fail_and_agent_text_is_cleaned() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\nbig\nesc\n");
    sb.write("instr.md", "Do {id}\n");
    let script = sb.write(
        "a.py",
        "import json, os, sys\nsys.stdin.read()\nid = os.environ['RUNNER_ITEM_ID']\n\
         if id == 'big':\n    rep = {'status': 'completed', 'summary': 'x', 'output': {'blob': 'y' * (2 << 20)}}\n\
         else:\n    rep = {'status': 'completed', 'summary': 'red \\x1b[31mtext\\r\\nsecond line'}\n\
         json.dump(rep, open(os.environ['RUNNER_REPORT'], 'w'))\n",
    );
    let r = sb.batch(
        &["--id-column", "id", "--format", "plain"],
        &["python3", &script.display().to_string()],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["big"]["status"], "failed");
    assert!(
        rows["big"]["error"].contains("over the 1048576 byte limit"),
        "{:?}",
        rows["big"]
    );
    assert_eq!(
        rows["esc"]["summary"], "red  [31mtext",
        "one line, control characters removed"
    );
    assert!(!r.stdout.contains('\u{1b}'), "{r:?}");
}

#[test]
fn resolve_renumbers_the_prerequisites_left_in_the_inbox() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write("S/todo.md", "## Todo\n- [ ] zero MODE=success\n- [ ] first MODE=success\n- [ ] second MODE=success @after:2\n- [ ] third MODE=success @after:1\n");
    let f = agent("fake_agent.py");
    let r = sb.run(&[
        "resolve", "--store", "S", "--yes", "--select", "2", "--", "python3", &f,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let inbox = sb.read("S/todo.md");
    assert!(
        inbox.contains("- [ ] second MODE=success @after:todo-1#1\n"),
        "a prerequisite that moved is named in its batch: {inbox}"
    );
    assert!(
        inbox.contains("- [ ] third MODE=success @after:1\n"),
        "{inbox}"
    );
    let r = sb.run(&["list", "--store", "S"]);
    assert_eq!(r.code, 0, "the inbox stays valid: {r:?}");
}

#[test]
fn marks_land_on_the_right_item_when_the_batch_file_is_edited_during_the_run() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write(
        "S/todo-1.md",
        "---\nstatus: pending\n---\n## Todo\n- [ ] slow one MODE=slow\n",
    );
    let f = agent("fake_agent.py");
    let mut child = sb
        .cmd(&[
            "run",
            "S/todo-1.md",
            "--format",
            "plain",
            "--",
            "python3",
            &f,
        ])
        .env("SLOW_SECONDS", "1.5")
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    let until = Instant::now() + Duration::from_secs(20);
    while !sb.read("S/todo-1.md").contains("- [~] slow one") {
        assert!(Instant::now() < until, "never marked in progress");
        std::thread::sleep(Duration::from_millis(50));
    }
    let edited = sb
        .read("S/todo-1.md")
        .replace("## Todo\n", "## Todo\n- [ ] inserted by a person\n");
    sb.write("S/todo-1.md", edited);
    assert!(child.wait().expect("wait").success());
    let text = sb.read("S/todo-1.md");
    assert!(
        text.contains("- [ ] inserted by a person\n"),
        "the edit is kept: {text}"
    );
    assert!(
        text.contains("- [x] slow one MODE=slow\n  > runner: fake agent handled 1"),
        "{text}"
    );
}

#[test]
fn json_format_keeps_stdout_pure_for_resolve() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write("S/todo.md", "## Todo\n- [ ] one MODE=success\n");
    let f = agent("fake_agent.py");
    let r = sb.run(&[
        "resolve", "--store", "S", "--yes", "--format", "json", "--", "python3", &f,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    for line in r.stdout.lines() {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok(),
            "not JSON: {line}"
        );
    }
    assert!(r.stderr.contains("Moved 1 item(s)"), "{r:?}");
}

#[test]
fn the_inbox_and_empty_items_are_not_run() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write("S/todo.md", "## Todo\n- [ ] one\n");
    let f = agent("fake_agent.py");
    let r = sb.run(&["run", "S/todo.md", "--", "python3", &f]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("is the inbox"), "{r:?}");
    sb.write("S/todo-1.md", "## Todo\n- [ ] \n");
    let r = sb.run(&["run", "S/todo-1.md", "--", "python3", &f]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("has no text"), "{r:?}");
}

#[test]
fn a_closed_stdout_pipe_ends_list_and_runners_quietly_with_exit_0() {
    let sb = Sandbox::new();
    assert_eq!(sb.run(&["add", "--store", "s", "first item"]).code, 0);
    for args in [&["list", "--store", "s"][..], &["runners"][..]] {
        // The reader is gone before the runner writes a byte: every write gets EPIPE.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let out = sb
            .cmd(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn agent_values_that_look_like_formulas_are_written_as_text_unless_kept() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,note\na,=1+1\n");
    sb.write("instr.md", "Do {id}\n");
    let agent = [
        "sh",
        "-c",
        r#"printf '%s' '{"status":"completed","summary":"=HYPERLINK(\"http://x\")","output":{"cmd":"@SUM(1,1)"}}' > "$RUNNER_REPORT""#,
    ];
    sb.write(
        "schema.json",
        r#"{"type":"object","properties":{"cmd":{"type":"string"}}}"#,
    );
    let flags = ["--id-column", "id", "--output-schema", "schema.json"];
    let r = sb.batch(&flags, &agent);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["note"], "=1+1", "input columns stay as they are");
    assert_eq!(rows["a"]["cmd"], "'@SUM(1,1)");
    assert_eq!(rows["a"]["summary"], "'=HYPERLINK(\"http://x\")");
    let r = sb.batch(
        &[&flags[..], &["--keep-formulas", "--only", "a"]].concat(),
        &agent,
    );
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["cmd"], "@SUM(1,1)");
    assert_eq!(rows["a"]["summary"], "=HYPERLINK(\"http://x\")");
}

#[test]
fn clean_without_a_team_also_finds_the_csv_batch_teams_in_the_current_folder() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "failed")]);
    assert_eq!(sb.fake_batch(&[]).code, 1);
    assert!(sb.join("workers-output.runner").is_dir());
    let r = sb.run(&["clean", "--store", "s", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("workers-output"), "{r:?}");
    assert!(!sb.join("workers-output.runner").exists(), "{r:?}");
    assert!(sb.join("workers-output.csv").is_file(), "the output stays");
}

#[test]
fn shell_completions_and_the_man_page_come_from_the_command_line_definitions() {
    let sb = Sandbox::new();
    for shell in ["bash", "zsh", "fish"] {
        let r = sb.run(&["completions", shell]);
        assert_eq!(r.code, 0, "{shell}: {r:?}");
        for word in ["resolve", "batch", "keep-formulas"] {
            assert!(r.stdout.contains(word), "{shell} completions lack {word}");
        }
    }
    let man = sb.run(&["man"]);
    assert_eq!(man.code, 0, "{man:?}");
    assert!(
        man.stdout.starts_with(".ie") || man.stdout.contains(".TH runner"),
        "{}",
        &man.stdout[..200.min(man.stdout.len())]
    );
    assert!(man.stdout.contains("resolve"), "subcommands are listed");
}

#[test]
fn every_teammate_gets_a_private_tmpdir_of_its_own() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    sb.write("in.csv", "id\na\nb\n");
    sb.write("instr.md", "Do {id}\n");
    let agent = [
        "sh",
        "-c",
        r#"printf '%s' "$TMPDIR" > "$RUNNER_TEAMMATE_DIR/where" && printf '{"status":"completed","summary":"ok"}' > "$RUNNER_REPORT""#,
    ];
    // The folders are looked into after the run.
    let r = sb.batch(&["--id-column", "id", "--keep-logs"], &agent);
    assert_eq!(r.code, 0, "{r:?}");
    let mut seen = Vec::new();
    for t in ["1-a", "2-b"] {
        let dir = sb.join(&format!("workers-output.runner/teammates/{t}/work"));
        let tmp = std::fs::read_to_string(dir.join("where")).expect("the agent wrote it");
        assert_eq!(std::path::Path::new(&tmp), dir, "{t}: its own work/ folder");
        let mode = std::fs::metadata(&tmp).expect("tmp").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{t}");
        seen.push(tmp);
    }
    assert_ne!(seen[0], seen[1]);
}

/// A trial's agent reported `retry_after_s: 1e300`: the supervisor panicked converting it
/// ("cannot convert float seconds to Duration") and the item ended "internal error". Now
/// the wait is refused as past --rate-limit-wait, and the item ends rate_limited.
#[test]
fn a_huge_retry_hint_is_a_wait_refused_not_a_crash() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\na\n");
    sb.write("instr.md", "Do {id}\n");
    sb.write(
        "agent.sh",
        "printf '{\"status\":\"failed\",\"summary\":\"slow down\",\"failure_kind\":\"rate_limited\",\"retry_after_s\":1e300}' > \"$RUNNER_REPORT\"\n",
    );
    let r = sb.batch(&["--id-column", "id"], &["sh", "agent.sh"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(!r.stderr.contains("panicked"), "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "failed", "{:?}", rows["a"]);
    assert_eq!(rows["a"]["failure_kind"], "rate_limited", "{:?}", rows["a"]);
    assert!(
        rows["a"]["error"].contains("would pass --rate-limit-wait 1h"),
        "{:?}",
        rows["a"]
    );
}

/// A trial reran a batch without the `--id-column` it first had: every item was redone and
/// every row replaced, without a word. The workspace records how its items are named; a
/// run naming them otherwise is refused (exit 2, nothing changed) saying which flag resumes.
#[test]
fn a_rerun_that_names_items_otherwise_is_refused_not_redone() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "success")]);
    let fake = agent("fake_agent.py");
    let with = |flags: &[&str]| -> crate::harness::Run {
        sb.batch_cmd(flags, &["python3", &fake])
            .output()
            .expect("spawn")
            .into()
    };
    assert_eq!(with(&["--id-column", "id"]).code, 0);
    let output = sb.read("workers-output.csv");
    let before = sb.tree();
    let r = with(&[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("were named by column id, and this run names them by row number")
            && r.stderr.contains("give --id-column id to go on"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing on disk changes");
    let r = with(&["--id-column", "mode"]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = with(&["--id-column", "id"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("2 from an earlier run"), "{r:?}");
    assert_eq!(sb.read("workers-output.csv"), output);
}

/// A trial set `model: x` in BATCH.md for an exec batch: dropped without a word (the
/// `--model` flag is refused for exec). A file's model may serve other runners, so it is
/// said, not refused.
#[test]
fn a_files_model_that_the_runner_cannot_use_is_said() {
    let sb = Sandbox::new();
    sb.write("workers-input.csv", "id\na\n");
    sb.write(
        "BATCH.md",
        format!(
            "---\nid_column: id\nmodel: opus\ncommand: [python3, {}]\n---\nDo {{id}}. MODE=success\n",
            agent("fake_agent.py")
        ),
    );
    let r = sb.run(&["batch", "BATCH.md", "--dry-run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("warning: `model: opus` is not used: runner `exec` has no place for a model"),
        "{r:?}"
    );
}

/// Warnings are values (issue 55): what planning warned of reaches `--format json` as a
/// `warning` event after `run_started`, stays in the journal, and is still said on stderr.
#[test]
fn a_start_up_warning_is_an_event_in_the_stream_and_the_journal() {
    let sb = Sandbox::new();
    sb.write("workers-input.csv", "id\na\n");
    sb.write(
        "BATCH.md",
        format!(
            "---\nid_column: id\nmodel: opus\ncommand: [python3, {}]\n---\nDo {{id}}. MODE=success\n",
            agent("fake_agent.py")
        ),
    );
    let r = sb.run(&["batch", "BATCH.md", "--format", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let said =
        "`model: opus` is not used: runner `exec` has no place for a model (put it in the command)";
    assert!(r.stderr.contains(&format!("warning: {said}")), "{r:?}");
    let events: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(&names[..2], ["run_started", "warning"], "{names:?}");
    assert_eq!(events[1]["message"], said, "{events:?}");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    let warned: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
        .filter(|e| e["event"] == "warning")
        .collect();
    assert_eq!(warned.len(), 1, "{journal}");
    assert_eq!(warned[0]["message"], said);
}

/// A trial ran a header-only CSV (0 items, exit 0), and the default output's workspace then
/// refused the real CSV as "another batch". A header-only input is now refused before
/// anything is written (as an empty JSON Lines input is), so the real CSV runs; a workspace
/// that holds results still refuses another batch.
#[test]
fn a_workspace_without_results_is_taken_over_by_the_next_batch() {
    let sb = Sandbox::new();
    sb.write("instr.md", "Do {id}. MODE=success\n");
    sb.write("empty.csv", "id\n");
    sb.write("real.csv", "id\na\n");
    let on = |input: &str| sb.fake_batch_of(input, &[]);
    assert_eq!(on("empty.csv").code, 2);
    assert!(!sb.join("workers-output.runner").exists());
    let r = on("real.csv");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        by_id(&sb.join("workers-output.csv"), "id")["a"]["status"],
        "completed"
    );
    sb.write("other.csv", "id\nb\n");
    let r = on("other.csv");
    assert_eq!(
        r.code, 2,
        "a workspace with results is still refused: {r:?}"
    );
    assert!(r.stderr.contains("belongs to"), "{r:?}");
}
