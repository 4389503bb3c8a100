//! Stages per row (issue 33, BATCH.md `stages:`): each row runs as a chain of teammates; a
//! stage that does not complete stops its row and nothing else; later stages read the
//! earlier ones' values; each stage may have its own runner and schema; resume, `--only` and
//! shards work per stage and keep a row's chain together; the output keeps one row per input
//! row.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Sandbox, by_id, wait_for};

/// The agent: one shell script for every stage, by `RUNNER_STAGE`. It notes each start in
/// `starts.log`; `fix` fails while the row's note says FAIL and `healed` is not there, and
/// waits for `go` when the note says WAIT.
const AGENT: &str = r#"prompt=$(cat)
printf '%s %s\n' "$RUNNER_STAGE" "$RUNNER_ITEM_ID" >> "$LOG"
case "$RUNNER_STAGE" in
  audit)
    printf '{"status":"completed","summary":"audited","output":{"problems":["tabs in %s"]}}' "$RUNNER_ITEM_ID" > "$RUNNER_REPORT";;
  fix)
    case "$prompt" in *FAIL*) [ -e "$HEALED" ] || { echo "cannot fix" >&2; exit 3; };; esac
    case "$prompt" in *WAIT*) while [ ! -e "$GO" ]; do sleep 0.05; done;; esac
    given=$(printf '%s\n' "$prompt" | grep '^Fix ' | head -n 1 | sed 's/"/\\"/g')
    printf '{"status":"completed","summary":"%s","files_modified":["x.rs"]}' "$given" > "$RUNNER_REPORT";;
  verify)
    printf '{"status":"completed","summary":"verified after: %s"}' "$(printf '%s\n' "$prompt" | grep '^Verify ' | head -n 1)" > "$RUNNER_REPORT";;
esac
"#;

const BATCH: &str = r#"---
id_column: path
runner: exec
command: [sh, agent.sh]
stages:
  - name: audit
    instruction: "Audit {path}."
    output_schema: {"type":"object","properties":{"problems":{"type":"array"}},"required":["problems"]}
  - name: fix
    instruction: "Fix {path} ({note}) given {audit.output.problems} and {audit.summary}"
  - name: verify
    instruction: "Verify {path}: {fix.status}"
---
Every stage starts with this preamble.
"#;

fn staged(sb: &Sandbox, rows: &str) {
    sb.write("agent.sh", AGENT);
    sb.write("BATCH.md", BATCH);
    sb.write("workers-input.csv", rows);
}

/// `runner batch BATCH.md ARGS` with the agent's files named.
fn batch(sb: &Sandbox, args: &[&str]) -> std::process::Command {
    let mut all = vec!["batch", "BATCH.md", "--format", "plain"];
    all.extend_from_slice(args);
    let mut c = sb.cmd(&all);
    c.env("LOG", sb.join("starts.log"))
        .env("HEALED", sb.join("healed"))
        .env("GO", sb.join("go"));
    c
}

fn starts(sb: &Sandbox) -> Vec<String> {
    sb.read_opt("starts.log")
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn each_row_runs_its_chain_and_a_failed_stage_stops_only_its_row() {
    let sb = Sandbox::new();
    staged(&sb, "path,note\na.rs,fine\nb.rs,FAIL\nc.rs,ok\n");
    let junit = sb.join("junit.xml").display().to_string();
    let r: crate::harness::Run = batch(&sb, &["--junit", &junit])
        .output()
        .expect("runner")
        .into();
    assert_eq!(r.code, 1, "one row did not complete: {r:?}");
    let started = starts(&sb);
    // Every stage starts after the one before it of its own row.
    for row in ["a.rs", "c.rs"] {
        let at = |s: &str| {
            started
                .iter()
                .position(|l| l == &format!("{s} {row}/{s}"))
                .unwrap_or_else(|| panic!("{s} of {row} started: {started:?}"))
        };
        assert!(
            at("audit") < at("fix") && at("fix") < at("verify"),
            "{started:?}"
        );
    }
    assert!(
        !started.iter().any(|l| l == "verify b.rs/verify"),
        "the stage after a failed one never starts: {started:?}"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "path");
    assert_eq!(rows.len(), 3, "one output row per input row");
    let a = &rows["a.rs"];
    assert_eq!(a["status"], "completed");
    assert_eq!(a["attempts"], "3");
    assert_eq!(a["audit.status"], "completed");
    assert_eq!(a["audit.problems"], "[\"tabs in a.rs/audit\"]");
    assert_eq!(
        a["fix.summary"], "Fix a.rs (fine) given [\"tabs in a.rs/audit\"] and audited",
        "a later stage reads the earlier one's output and summary"
    );
    assert_eq!(a["fix.files_modified"], "[\"x.rs\"]");
    assert_eq!(
        a["verify.summary"],
        "verified after: Verify a.rs: completed"
    );
    assert!(
        !a.contains_key("result"),
        "no output column of the row's own"
    );
    let b = &rows["b.rs"];
    assert_eq!(b["status"], "failed");
    assert_eq!(b["error"], "stage fix: exited with code 3: cannot fix");
    assert_eq!(b["audit.status"], "completed");
    assert_eq!(b["fix.status"], "failed");
    assert_eq!(b["verify.status"], "skipped");
    assert!(b["verify.error"].contains("prerequisite b.rs/fix did not complete"));
    assert_eq!(rows["c.rs"]["status"], "completed");
    // JUnit: one case per stage.
    let xml = sb.read("junit.xml");
    assert_eq!(xml.matches("<testcase").count(), 9, "{xml}");
    // status and show draw the chains.
    let out = sb.join("workers-output.csv").display().to_string();
    let status = sb.run(&["status", &out]);
    assert!(
        status
            .stdout
            .contains("Chains (audit → fix → verify):\n  b.rs: audit ✔ → fix ✘ → verify –\n  2 row(s) completed every stage"),
        "{status:?}"
    );
    let show = sb.run(&["show", "b.rs", &out]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(
        show.stdout
            .starts_with("Row b.rs: audit ✔ → fix ✘ → verify –")
            && show
                .stdout
                .contains("Item b.rs/fix (teammate 2-b.rs.fix): failed")
            && show.stdout.contains(
                "Title:   fix: Fix b.rs (FAIL) given «audit.output.problems» and «audit.summary»"
            )
            && show.stdout.contains("Prompt:  none: it never started"),
        "{show:?}"
    );
    // The stage's prompt: the preamble, then its own instruction with the earlier values.
    let prompt = sb.prompt("workers-output.runner", "c.rs/fix");
    assert!(
        prompt.contains("Every stage starts with this preamble.\n\nFix c.rs (ok) given [\"tabs in c.rs/audit\"] and audited"),
        "{prompt}"
    );
}

#[test]
fn a_stage_may_run_another_program_and_check_its_own_schema() {
    let sb = Sandbox::new();
    staged(&sb, "path,note\na.rs,fine\n");
    // The fix stage runs another program, whose report misses what its schema requires.
    sb.write(
        "other.sh",
        "cat > /dev/null\nprintf '%s\\n' \"$RUNNER_STAGE\" > \"$LOG.other\"\nprintf '{\"status\":\"completed\",\"summary\":\"other\",\"output\":{}}' > \"$RUNNER_REPORT\"\n",
    );
    let with_other = BATCH.replace(
        "  - name: fix\n",
        "  - name: fix\n    command: [sh, other.sh]\n    output_schema: {\"type\":\"object\",\"required\":[\"patch\"],\"properties\":{\"patch\":{\"type\":\"string\"}}}\n",
    );
    sb.write("BATCH.md", &with_other);
    let r: crate::harness::Run = batch(&sb, &[]).output().expect("runner").into();
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        sb.read("starts.log.other"),
        "fix\n",
        "the stage's own program ran it"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "path");
    let a = &rows["a.rs"];
    assert_eq!(
        a["audit.status"], "completed",
        "audit kept the batch's program"
    );
    assert_eq!(a["fix.status"], "failed");
    assert!(
        a["fix.error"].contains("patch"),
        "its own schema judged it: {a:?}"
    );
    assert!(
        a.contains_key("fix.patch"),
        "its schema's field is a column"
    );
    assert_eq!(a["verify.status"], "skipped");
}

/// Wait for `child` to exit; its exit code.
fn wait_exit(child: &mut Child, secs: u64) -> i32 {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            return st.code().unwrap_or(-1);
        }
        assert!(Instant::now() < until, "runner did not exit within {secs}s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_kill_mid_chain_resumes_at_the_stage_it_stopped_in() {
    let sb = Sandbox::new();
    staged(&sb, "path,note\na.rs,WAIT\n");
    let mut runner = batch(&sb, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner");
    wait_for("the fix stage to run", 30, || {
        starts(&sb).iter().any(|l| l == "fix a.rs/fix")
    });
    runner.kill().expect("kill -9");
    let _ = runner.wait();
    std::fs::write(sb.join("go"), "").expect("go");
    let mut resumed = batch(&sb, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runner");
    assert_eq!(wait_exit(&mut resumed, 60), 0);
    assert_eq!(
        starts(&sb),
        [
            "audit a.rs/audit",
            "fix a.rs/fix",
            "fix a.rs/fix",
            "verify a.rs/verify"
        ],
        "the completed audit is not run again"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "path");
    assert_eq!(rows["a.rs"]["status"], "completed");
    assert_eq!(
        rows["a.rs"]["fix.summary"],
        "Fix a.rs (WAIT) given [\"tabs in a.rs/audit\"] and audited"
    );
    assert!(sb.survivors_after(1.0).is_empty(), "no agent left running");
}

#[test]
fn only_failed_reruns_the_failed_stage_and_the_ones_after_and_only_id_the_whole_chain() {
    let sb = Sandbox::new();
    staged(&sb, "path,note\na.rs,fine\nb.rs,FAIL\n");
    let r: crate::harness::Run = batch(&sb, &[]).output().expect("runner").into();
    assert_eq!(r.code, 1, "{r:?}");
    std::fs::write(sb.join("healed"), "").expect("healed");
    std::fs::remove_file(sb.join("starts.log")).expect("rm");
    let r: crate::harness::Run = batch(&sb, &["--only", "failed"])
        .output()
        .expect("runner")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(starts(&sb), ["fix b.rs/fix", "verify b.rs/verify"]);
    let rows = by_id(&sb.join("workers-output.csv"), "path");
    assert_eq!(rows["b.rs"]["status"], "completed");
    assert_eq!(
        rows["a.rs"]["status"], "completed",
        "kept from the last output"
    );
    // The chains are the whole batch's, not only what this run did.
    let out = sb.join("workers-output.csv").display().to_string();
    let status = sb.run(&["status", &out]);
    assert!(
        status.stdout.contains("  2 row(s) completed every stage") && !status.stdout.contains("…"),
        "{status:?}"
    );
    let r = sb.run(&["batch", "BATCH.md", "--only", "b.rs/fix"]);
    assert!(
        r.code == 2 && r.stderr.contains("--only takes a row's id"),
        "{r:?}"
    );
    std::fs::remove_file(sb.join("starts.log")).expect("rm");
    let r: crate::harness::Run = batch(&sb, &["--only", "a.rs"])
        .output()
        .expect("runner")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        starts(&sb),
        ["audit a.rs/audit", "fix a.rs/fix", "verify a.rs/verify"],
        "--only ID reruns that row's chain"
    );
}

#[test]
fn shards_keep_each_rows_chain_together() {
    let sb = Sandbox::new();
    let mut rows = String::from("path,note\n");
    for i in 0..8 {
        rows.push_str(&format!("f{i}.rs,ok\n"));
    }
    staged(&sb, &rows);
    let mut seen = Vec::new();
    for k in 1..=2 {
        let shard = format!("{k}/2");
        let r: crate::harness::Run = batch(&sb, &["--shard", &shard])
            .output()
            .expect("runner")
            .into();
        assert_eq!(r.code, 0, "{r:?}");
        let out = sb.join(&format!("workers-output.shard-{k}-of-2.csv"));
        for (path, row) in by_id(&out, "path") {
            assert_eq!(row["status"], "completed", "{path}: {row:?}");
            assert_eq!(row["verify.status"], "completed");
            seen.push(path);
        }
    }
    seen.sort();
    assert_eq!(seen.len(), 8, "every row in exactly one shard: {seen:?}");
    seen.dedup();
    assert_eq!(seen.len(), 8);
    // Each stage of a row ran in the shard its row belongs to.
    let started = starts(&sb);
    assert_eq!(started.len(), 24, "{started:?}");
}

#[test]
fn bad_stages_are_refused_before_anything_is_written() {
    let sb = Sandbox::new();
    staged(&sb, "path,note\na.rs,fine\n");
    let before = sb.tree();
    let cases = [
        (
            BATCH.replace("{audit.summary}", "{verify.summary}"),
            "stage `fix` uses {verify.summary}, but it does not come after stage `verify`",
        ),
        (
            BATCH.replace("{audit.output.problems}", "{audit.output.nope}"),
            "{audit.output.nope}",
        ),
        (
            BATCH.replace("  - name: audit\n", "  - name: audit\n    after: verify\n"),
            "the stages wait for each other in a circle",
        ),
        (
            BATCH.replace("  - name: fix\n", "  - name: fix\n    runer: claude\n"),
            "unknown key `runer`; did you mean `runner`?",
        ),
        (
            BATCH.replace(
                "  - name: fix\n",
                "  - name: fix\n    runner: no-such-agent\n",
            ),
            "stage `fix`",
        ),
        (
            BATCH.replace("name: verify", "name: fix"),
            "two stages have this name",
        ),
        (
            BATCH.replace("  - name: fix\n", "  - name: fix\n    model: sonnet\n"),
            "runner `exec` has no place for a model",
        ),
        (
            BATCH.replace("  - name: fix\n", "  - name: fix\n    timeout: 0s\n"),
            "`timeout` must be more than 0",
        ),
        (
            BATCH.replace("  - name: fix\n", "  - name: fix\n    retries: -1\n"),
            "0 or more",
        ),
        (
            BATCH.replace("stages:\n", "stages: []\nx:\n"),
            "at least one stage",
        ),
    ];
    for (text, want) in cases {
        sb.write("BATCH.md", &text);
        let r: crate::harness::Run = batch(&sb, &[]).output().expect("runner").into();
        assert_eq!(r.code, 2, "{want}: {r:?}");
        assert!(r.stderr.contains(want), "{want}: {r:?}");
        assert!(r.stderr.contains("BATCH.md"), "names the file: {r:?}");
    }
    sb.write("BATCH.md", BATCH);
    assert_eq!(sb.tree(), before, "nothing written");
}

/// The bundled example's two-stage variant runs with no agent CLI or key: each file is
/// audited, then judged from what the audit found.
#[test]
fn the_bundled_two_stage_example_audits_then_judges_every_file() {
    let sb = Sandbox::new();
    let out = sb.join("out.csv");
    let root = env!("CARGO_MANIFEST_DIR");
    let r: crate::harness::Run = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .current_dir(root)
        .env("HOME", sb.join("home"))
        .env("NO_COLOR", "1")
        .args([
            "batch",
            "examples/audit/BATCH-stages.md",
            "--format",
            "plain",
            "-o",
        ])
        .arg(&out)
        .output()
        .expect("runner")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&out, "path");
    let input =
        std::fs::read_to_string(format!("{root}/examples/audit/workers-input.csv")).expect("input");
    assert_eq!(rows.len(), input.lines().count() - 1, "{rows:?}");
    for (path, row) in &rows {
        assert_eq!(row["status"], "completed", "{path}: {row:?}");
        assert_eq!(row["attempts"], "2", "two stages: {row:?}");
    }
    assert_eq!(rows["README.md"]["verdict.verdict"], "ok");
    assert_eq!(
        rows["README.md"]["verdict.reasons"], "[]",
        "an output field's empty list is written as JSON"
    );
    assert_eq!(rows["templates/teammate.md"]["audit.has_title"], "false");
    assert_eq!(
        rows["templates/teammate.md"]["verdict.verdict"], "needs work",
        "the verdict comes from the audit's findings"
    );
    assert_eq!(
        rows["templates/teammate.md"]["verdict.reasons"],
        "[\"no title\"]"
    );
}
