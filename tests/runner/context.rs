//! The working context (issue 18 item 6: the checkpoint seed's structure, a retry's carry,
//! the checkpoint age in `status`) and the inputs a fresh user trips on (item 7:
//! `--select 2-4,6`, `--input -`, `--delimiter` and TSV).

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::harness::{Run, Sandbox, agent, by_id};
use crate::todo::resolve;

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A shell agent: `body` runs with the prompt on stdin already drained.
fn sh_agent(sb: &Sandbox, body: &str) -> String {
    sb.write("agent.sh", format!("#!/bin/sh\ncat > /dev/null\n{body}"))
        .display()
        .to_string()
}

const REPORT_OK: &str =
    "printf '{\"status\":\"completed\",\"summary\":\"done\"}' > \"$RUNNER_REPORT\"\n";

#[test]
fn a_teammate_starts_with_the_working_context_skeleton_and_the_prompt_points_at_it() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\nw\n");
    sb.write("instr.md", "Do {id}\n");
    // The agent fails unless its working context has the nine sections and both parts.
    let script = sh_agent(
        &sb,
        &format!(
            "f=\"$RUNNER_TEAMMATE_DIR/working-context.md\"\n\
             for s in '## Part A' '### 1. Objective' '### 9. Notes' '## Part B'; do grep -qF \"$s\" \"$f\" || exit 7; done\n\
             {REPORT_OK}"
        ),
    );
    let r = sb.batch(
        &["--id-column", "id", "--format", "plain"],
        &["sh", &script],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let prompt = sb.prompt("workers-output.runner", "w");
    let path = sb.join("workers-output.runner/teammates/1-w/work/working-context.md");
    assert!(
        prompt.contains(&format!("- Your working context: `{}`", path.display()))
            && prompt.contains("rewrite Part A")
            && prompt.contains("append")
            && !prompt.contains("### 1. Objective"),
        "the prompt points at the file instead of carrying the skeleton: {prompt}"
    );
}

#[test]
fn a_retry_gets_part_a_and_the_last_journal_entry_and_an_untouched_skeleton_is_not_carried() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\nw\nq\nu\n");
    sb.write("instr.md", "Do {id}\n");
    sb.write(
        "ctx.md",
        "# Working Context — 1-w\n\n_Last updated: 2026-01-31T14:05:00Z_\n\n\
         ## Part A — Current State\n\n### 4. In Flight\nHALF-DONE auth.rs\n\n\
         ## Part B — Journal\n\n### 2026-01-31T13:00:00Z — first\n- Did: OLD-ENTRY\n\n\
         ### 2026-01-31T14:05:00Z — second\n- Did: NEW-ENTRY\n",
    );
    let ctx = sb.join("ctx.md").display().to_string();
    // On attempt 1 row w writes a structured context, row u a file of its own making, and
    // row q never touches its skeleton; every attempt 2 completes.
    let script = sh_agent(
        &sb,
        &format!(
            "f=\"$RUNNER_TEAMMATE_DIR/working-context.md\"\n\
             if [ \"$RUNNER_ATTEMPT\" = 1 ]; then\n\
               [ \"$RUNNER_ITEM_ID\" = w ] && cp '{ctx}' \"$f\"\n\
               [ \"$RUNNER_ITEM_ID\" = u ] && echo 'step 1 of 2 done; next: step 2' > \"$f\"\n\
               exit 1\nfi\n{REPORT_OK}"
        ),
    );
    let r = sb.batch(
        &[
            "--id-column",
            "id",
            "--retries",
            "1",
            "--retry-delay",
            "10ms",
            "--format",
            "plain",
        ],
        &["sh", &script],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let second = sb.prompt("workers-output.runner", "w");
    assert!(second.contains("This is attempt 2"), "{second}");
    assert!(
        second.contains("### 4. In Flight\nHALF-DONE auth.rs")
            && second.contains("### 2026-01-31T14:05:00Z — second\n- Did: NEW-ENTRY"),
        "Part A and the last entry are carried: {second}"
    );
    assert!(
        !second.contains("OLD-ENTRY") && second.contains("1 earlier entry left out"),
        "earlier entries stay in the file: {second}"
    );
    // A file without the two parts is carried whole, as it was.
    let u = sb.prompt("workers-output.runner", "u");
    assert!(u.contains("step 1 of 2 done; next: step 2"), "{u}");
    let q = sb.prompt("workers-output.runner", "q");
    assert!(
        q.contains("This is attempt 2") && !q.contains("Its working context ("),
        "the runner's own skeleton is no context to carry: {q}"
    );
}

/// Start a batch whose agents checkpoint (row `c`) or not (row `n`) and then wait for the
/// file `go`; return the runner once both are running.
fn running_team(sb: &Sandbox) -> std::process::Child {
    sb.write("in.csv", "id\nc\nn\n");
    sb.write("instr.md", "Do {id}\n");
    let go = sb.join("go").display().to_string();
    let script = sh_agent(
        sb,
        &format!(
            "[ \"$RUNNER_ITEM_ID\" = c ] && echo 'did step 1' > \"$RUNNER_TEAMMATE_DIR/working-context.md\"\n\
             touch \"$RUNNER_TEAMMATE_DIR/started\"\n\
             while [ ! -e '{go}' ]; do sleep 0.05; done\n{REPORT_OK}"
        ),
    );
    let runner = sb
        .batch_cmd(
            &["--id-column", "id", "--jobs", "2", "--format", "plain"],
            &["sh", &script],
        )
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for("both teammates running", || {
        ["1-c", "2-n"].iter().all(|t| {
            sb.join(&format!("workers-output.runner/teammates/{t}/work/started"))
                .exists()
        }) && sb
            .read_opt("workers-output.runner/team.json")
            .is_some_and(|t| t.contains("\"1-c\"") && t.contains("\"2-n\""))
    });
    runner
}

fn line_of<'a>(run: &'a Run, needle: &str) -> &'a str {
    run.stdout
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle}: {run:?}"))
}

#[test]
fn status_shows_each_running_teammates_last_checkpoint_and_flags_stale_ones() {
    let sb = Sandbox::new();
    let mut runner = running_team(&sb);
    let fresh = sb.run(&["status"]);
    let (c, n) = (
        line_of(&fresh, "1-c  attempt 1"),
        line_of(&fresh, "2-n  attempt 1"),
    );
    assert!(
        c.contains("last checkpoint ") && !c.contains("STALE"),
        "{fresh:?}"
    );
    assert!(
        n.contains("no checkpoint yet") && !n.contains("STALE"),
        "{fresh:?}"
    );
    let brief = sb.run(&["status", "--brief"]);
    assert!(!brief.stdout.contains("stale"), "{brief:?}");
    // Past the threshold both are stale: one since its checkpoint, one since it started.
    let stale = sb.run(&["status", "--stale-after", "0s"]);
    assert!(
        line_of(&stale, "1-c  attempt 1").contains("STALE: none for ")
            && line_of(&stale, "2-n  attempt 1").contains("no checkpoint yet; STALE: none for "),
        "{stale:?}"
    );
    let brief = sb.run(&["status", "--brief", "--stale-after", "0s"]);
    assert!(
        brief
            .stdout
            .contains("- c (running, attempt 1, stale: no checkpoint for ")
            && brief
                .stdout
                .contains("- n (running, attempt 1, stale: no checkpoint for "),
        "{brief:?}"
    );
    let bad = sb.run(&["status", "--stale-after", "soon"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr
            .contains("--stale-after `soon` is not a duration"),
        "{bad:?}"
    );
    sb.write("go", "");
    assert_eq!(runner.wait().expect("wait").code(), Some(0));
    // A finished team has nobody running: nothing is flagged.
    let done = sb.run(&["status", "--stale-after", "0s"]);
    assert!(!done.stdout.contains("STALE"), "{done:?}");
}

#[test]
fn select_takes_ranges_and_lists_and_refuses_bad_ones_changing_nothing() {
    let sb = Sandbox::new();
    sb.write(
        "S/todo.md",
        "## Todo\n- [ ] one MODE=success\n- [ ] two MODE=success\n- [ ] three MODE=success\n\
         - [ ] four MODE=success\n- [ ] five MODE=success\n- [ ] six MODE=success\n",
    );
    let before = sb.tree();
    for (bad, says) in [
        (
            "4-2",
            "--select `4-2` is not a list of item numbers: the range `4-2` runs backwards; write 2-4",
        ),
        (
            "a-",
            "--select `a-` is not a list of item numbers: `a` is not an item number",
        ),
        (
            "0",
            "--select `0` is not a list of item numbers: `0` is not an item number",
        ),
        (
            "2-",
            "--select `2-` is not a list of item numbers: a range needs a number on each side",
        ),
    ] {
        let r = resolve(&sb, &["--yes", "--select", bad]);
        assert_eq!(r.code, 2, "{bad}: {r:?}");
        assert!(r.stderr.contains(says), "{bad}: {r:?}");
        assert_eq!(sb.tree(), before, "{bad} changed files");
    }
    let r = resolve(&sb, &["--yes", "--select", "2-4,6"]);
    assert_eq!(r.code, 0, "{r:?}");
    let batch = sb.read("S/todo-1.md");
    for moved in ["two", "three", "four", "six"] {
        assert!(
            batch.contains(&format!("- [x] {moved} MODE")),
            "{moved}: {batch}"
        );
    }
    let inbox = sb.read("S/todo.md");
    assert!(
        inbox.contains("- [ ] one MODE") && inbox.contains("- [ ] five MODE"),
        "{inbox}"
    );
    assert!(!inbox.contains("two") && !inbox.contains("six"), "{inbox}");
}

/// `runner batch --input - ...` with `rows` on stdin.
fn stdin_batch(sb: &Sandbox, rows: &str, extra: &[&str]) -> Run {
    sb.write("instr.md", crate::harness::FAKE_INSTRUCTION);
    let mut child = sb
        .fake_batch_of_cmd("-", extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(rows.as_bytes())
        .expect("write rows");
    child.wait_with_output().expect("wait").into()
}

#[test]
fn rows_from_stdin_run_are_kept_in_the_workspace_and_resume() {
    let sb = Sandbox::new();
    let rows = "id,mode\na,success\nb,failed\n";
    let r = stdin_batch(&sb, rows, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(out["a"]["status"], "completed");
    assert_eq!(out["b"]["status"], "failed");
    // The rows outlive the pipe: the copy is the batch's input.
    assert_eq!(sb.read("workers-output.runner/stdin.csv"), rows);
    // The same rows again resume: a is not run again, b is, and a new row joins.
    let r = stdin_batch(&sb, "id,mode\na,success\nb,success\nc,success\n", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        (out["a"]["attempts"].as_str(), out["b"]["status"].as_str()),
        ("1", "completed")
    );
    assert_eq!(out["c"]["status"], "completed");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    let a_started = journal
        .lines()
        .filter(|l| l.contains("\"attempt_started\"") && l.contains("\"id\":\"a\""))
        .count();
    assert_eq!(a_started, 1, "a ran again: {journal}");
}

#[test]
fn bad_rows_on_stdin_name_stdin_and_the_line_and_write_nothing() {
    let sb = Sandbox::new();
    sb.write("instr.md", crate::harness::FAKE_INSTRUCTION);
    let before = sb.tree();
    let r = stdin_batch(&sb, "id,mode\na,success\nb\n", &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("<stdin>:3: this record has 1 fields"),
        "{r:?}"
    );
    let r = stdin_batch(&sb, "", &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("<stdin>:1: no header row"), "{r:?}");
    assert_eq!(sb.tree(), before);
}

#[test]
fn semicolon_tab_and_frontmatter_delimiters_and_the_output_is_comma_csv() {
    let sb = Sandbox::new();
    sb.write("instr.md", crate::harness::FAKE_INSTRUCTION);
    let f = agent("fake_agent.py");
    let base = |input: &str, extra: &[&str]| {
        let out = format!("{input}.out.csv");
        let mut flags = vec!["--output", &out];
        flags.extend_from_slice(extra);
        (sb.fake_batch_of(input, &flags), by_id(&sb.join(&out), "id"))
    };
    sb.write("semi.csv", "id;mode;note\na,1;success;x, y\n");
    let (r, out) = base("semi.csv", &["--delimiter", ";"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(out["a,1"]["note"], "x, y");
    assert_eq!(out["a,1"]["status"], "completed");
    // A .tsv input is read with tabs; the output, read as comma CSV, has the same columns.
    sb.write(
        "tabs.tsv",
        "id\tmode\tnote\nb\tsuccess\tsemi;colon, comma\n",
    );
    let (r, out) = base("tabs.tsv", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(out["b"]["note"], "semi;colon, comma");
    assert!(
        sb.read("tabs.tsv.out.csv")
            .starts_with("id,mode,note,result,status,"),
        "the output is comma CSV"
    );
    // BATCH.md's `delimiter`.
    sb.write("pipe.csv", "id|mode\nc|success\n");
    sb.write(
        "BATCH.md",
        "---\ninput: pipe.csv\nid_column: id\ndelimiter: \"|\"\n---\nHandle {id}. MODE={mode}\n",
    );
    let r = sb.run(&[
        "batch", "BATCH.md", "--format", "plain", "--", "python3", &f,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        by_id(&sb.join("workers-output.csv"), "id")["c"]["status"],
        "completed"
    );
}

#[test]
fn a_semicolon_header_without_delimiter_gets_a_hint_and_bad_delimiters_exit_2() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id;mode\na;success\n");
    sb.write("instr.md", crate::harness::FAKE_INSTRUCTION);
    sb.write(
        "BATCH.md",
        "---\ninput: in.csv\ndelimiter: \"\\\"\"\n---\nHandle {id}.\n",
    );
    let before = sb.tree();
    // The id column is not found, and the error says why that may be.
    let r = sb.fake_batch(&[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("in.csv:1: no id column `id`")
            && r.stderr
                .contains("Note: the header of in.csv is one column `id;mode`")
            && r.stderr.contains("pass --delimiter ';'"),
        "{r:?}"
    );
    // So is a placeholder of the instruction.
    let r = sb.batch(&[], &["true"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("unknown placeholders {id}, {mode}")
            && r.stderr.contains("pass --delimiter ';'"),
        "{r:?}"
    );
    let r = sb.fake_batch(&["--delimiter", ";;"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--delimiter `;;` must be one character"),
        "{r:?}"
    );
    let r = sb.run(&["batch", "BATCH.md", "--", "true"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("BATCH.md:3: `delimiter`") && r.stderr.contains("cannot separate fields"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "bad input changed files");
}
