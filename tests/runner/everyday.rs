//! Everyday use (issue 56): what a first run from the README tripped over — `show`/`logs`
//! of an item no run started, `status` after a replay, a summary from an output alone.

use crate::harness::{Run, Sandbox, agent};

/// Issue 56: `runner show` and `runner logs` of an item that no run has started say it is
/// pending and what starts it (exit 0), not "unknown item"; an id the batch does not have is
/// still unknown (exit 2).
#[test]
fn show_and_logs_of_a_pending_item_say_it_is_pending_and_what_runs_it() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "success")]);
    let r = sb.fake_batch(&["--only", "a"]);
    assert_eq!(r.code, 0, "{r:?}");
    let fake = agent("fake_agent.py");
    let r = sb.run(&["show", "b", "workers-output.csv"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("Item b — pending: no attempt has started yet")
            && r.stdout.contains("row 2 (line 3) of")
            && r.stdout.contains(&format!("runs with: runner batch --input in.csv --instruction instr.md --id-column id --format plain -- python3 {fake}")),
        "{r:?}"
    );
    let r = sb.run(&["logs", "b", "workers-output.csv"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("Item b — pending") && r.stderr.contains("(no log yet)"),
        "{r:?}"
    );
    let r = sb.run(&["show", "zz", "workers-output.csv"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("zz"), "{r:?}");
}

/// Issue 56: after an `--only failed` replay, `runner status` states the team — every item,
/// the blocked one the replay left alone included — as `report --markdown` and the HTML page
/// do, not the replay's subset (which it shows apart, as this run's).
#[test]
fn status_after_a_replay_states_the_team_as_the_reports_do() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "blocked"), ("c", "noreport")]);
    assert_eq!(sb.fake_batch(&[]).code, 1);
    sb.write_rows(&[("a", "success"), ("b", "blocked"), ("c", "success")]);
    let r = sb.fake_batch(&["--only", "failed"]);
    assert_eq!(r.code, 0, "only c ran, and completed: {r:?}");
    let r = sb.run(&["status", "workers-output.csv"]);
    assert_eq!(r.code, 1, "b is still blocked: {r:?}");
    assert!(
        r.stdout.contains("3 item(s): 2 completed, 1 blocked")
            && r.stdout.contains("This run: 1 item(s): 1 completed"),
        "{r:?}"
    );
    let r = sb.run(&["status", "--brief", "workers-output.csv"]);
    assert!(
        r.stdout.contains("3 item(s): 2 completed, 1 blocked"),
        "{r:?}"
    );
    let r = sb.run(&["report", "workers-output.csv", "--markdown", "-"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("**3 item(s)**: 2 completed, 1 blocked"),
        "{r:?}"
    );
    let r = sb.run(&["report", "workers-output.csv", "--html", "report.html"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("(3 item(s)"), "{r:?}");
}

/// After an `--only blocked` replay, `status --brief`'s `unfinished:` list and the MCP
/// `status` tool's `counts` are the team's, as its headline is: the item that failed in an
/// earlier run and that the replay left alone is listed and counted too.
#[test]
fn the_unfinished_list_and_the_mcp_counts_after_a_replay_are_the_teams() {
    let sb = Sandbox::new();
    sb.write_rows(&[
        ("a", "success"),
        ("b", "blocked"),
        ("c", "noreport"),
        ("d", "success"),
    ]);
    assert_eq!(sb.fake_batch(&[]).code, 1);
    let r = sb.fake_batch(&["--only", "blocked"]);
    assert_eq!(r.code, 1, "b is blocked again: {r:?}");
    let r = sb.run(&["status", "--brief", "workers-output.csv"]);
    assert_eq!(r.code, 1, "{r:?}");
    let out = &r.stdout;
    assert!(
        out.contains("4 item(s): 2 completed, 1 failed, 1 blocked"),
        "{r:?}"
    );
    let listed = out
        .split_once("unfinished:\n")
        .map(|(_, l)| l)
        .unwrap_or_else(|| panic!("no unfinished list: {r:?}"));
    assert!(
        listed.contains("- b (blocked)") && listed.contains("- c (failed): "),
        "{r:?}"
    );
    let mut c = crate::mcp::Client::start(&sb);
    let (err, text) = c.call("status", serde_json::json!({"team": "workers-output.csv"}));
    assert!(!err, "{text}");
    let status: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        status["counts"],
        serde_json::json!({"completed": 2, "failed": 1, "blocked": 1}),
        "{status}"
    );
    assert!(
        status["text"]
            .as_str()
            .is_some_and(|t| t.contains("- c (failed): ")),
        "{status}"
    );
}

/// Issue 56: the merge job of a sharded batch has the merged output and no team workspace;
/// `runner report merged.csv --markdown` summarises it from the output's runner columns (and
/// says why `--html` needs a workspace).
#[test]
fn report_markdown_summarises_a_merged_output_alone() {
    let sb = Sandbox::new();
    sb.write_rows(&[
        ("a", "success"),
        ("b", "noreport"),
        ("c", "success"),
        ("d", "blocked"),
    ]);
    for k in ["1/2", "2/2"] {
        let r = sb.fake_batch(&["--shard", k]);
        assert!(r.code <= 1, "{r:?}");
    }
    let r = sb.run(&[
        "merge",
        "workers-output.shard-1-of-2.csv",
        "workers-output.shard-2-of-2.csv",
        "-o",
        "merged.csv",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    for k in 1..=2 {
        std::fs::remove_dir_all(sb.join(&format!("workers-output.shard-{k}-of-2.runner")))
            .expect("rm workspace");
    }
    let r = sb.run(&["report", "merged.csv", "--markdown", "-"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("### runner: team `merged.csv`")
            && r.stdout
                .contains("**4 item(s)**: 2 completed, 1 failed, 1 blocked")
            && r.stdout.contains("| b | failed |")
            && r.stdout.contains("| d | blocked |"),
        "{r:?}"
    );
    let r = sb.run(&["report", "merged.csv", "--markdown", "summary.md"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(sb.read("summary.md").contains("**4 item(s)**"));
    let r = sb.run(&["report", "merged.csv", "--html", "r.html"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--markdown"), "{r:?}");
}

/// Issue 56: a dry run sends nothing, so it does not demand `OPENAI_API_KEY` (it says a real
/// run needs it); a real run without it is still refused.
#[test]
fn a_dry_run_of_the_hosted_api_needs_no_key() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let run = |extra: &[&str]| -> Run {
        let mut args = vec![
            "batch",
            "--input",
            "in.csv",
            "--instruction",
            "instr.md",
            "--runner",
            "openai",
            "--model",
            "m",
        ];
        args.extend_from_slice(extra);
        let mut cmd = sb.cmd(&args);
        cmd.env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL");
        cmd.output().expect("spawn").into()
    };
    let r = run(&["--dry-run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("key: OPENAI_API_KEY is not set; a real run needs it"),
        "{r:?}"
    );
    let r = run(&[]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("OPENAI_API_KEY is not set"), "{r:?}");
}

/// Issue 56: `runner logs ID` without a team reads the most recent one here and says which
/// (on stderr, the log on stdout).
#[test]
fn logs_without_a_team_names_the_team_it_read() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "noreport")]);
    assert_eq!(sb.fake_batch(&[]).code, 1);
    let r = sb.run(&["logs", "a"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("(team workers-output: ")
            && r.stderr
                .contains("name another as `runner logs a WORKSPACE`"),
        "{r:?}"
    );
    let r = sb.run(&["logs", "a", "workers-output.csv"]);
    assert!(!r.stderr.contains("(team "), "named, so not said: {r:?}");
}

/// Issue 56: `runner add --checkpoint FILE` puts FILE's text under the checkpoint's
/// frontmatter, or, when FILE has a frontmatter of its own, copies it as it is (never a
/// second frontmatter), as the README says.
#[test]
fn add_checkpoint_with_its_own_frontmatter_is_copied_as_it_is() {
    let sb = Sandbox::new();
    let own =
        "---\ntype: checkpoint\ncreated: \"2026-01-01T00:00:00\"\n---\n\n## Current task\nmine\n";
    sb.write("own.md", own);
    let r = sb.run(&["add", "--store", "S", "Carry on", "--checkpoint", "own.md"]);
    assert_eq!(r.code, 0, "{r:?}");
    let cp: Vec<String> = std::fs::read_dir(sb.join("S"))
        .expect("store")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cp-"))
        .collect();
    assert_eq!(cp.len(), 1, "{cp:?}");
    assert_eq!(sb.read(&format!("S/{}", cp[0])), own);
}

/// Issue 56: a dry run of a staged batch over the HTTP backend says the JSON mode its
/// requests really use (each stage has a schema: strict json_schema, not JSON mode), and
/// says which rows will not complete because a `{file:}` is not there — the stage that reads
/// it and the stages that wait for it.
#[test]
fn a_staged_dry_run_says_the_real_json_mode_and_the_rows_that_will_fail() {
    let sb = Sandbox::new();
    sb.write("in.csv", "path,purpose\na.md,x\nmissing.md,y\n");
    sb.write("a.md", "# A\n");
    sb.write(
        "BATCH.md",
        "---\ninput: in.csv\nid_column: path\nrunner: openai\nmodel: m\nstages:\n  - name: audit\n    instruction: |\n      Audit {path}:\n      {file:path}\n    output_schema:\n      type: object\n      properties:\n        ok: {type: boolean}\n  - name: verdict\n    instruction: |\n      Judge {path} from {audit.summary}\n    output_schema:\n      type: object\n      properties:\n        verdict: {type: string}\n---\n",
    );
    let mut cmd = sb.cmd(&["batch", "BATCH.md", "--dry-run"]);
    cmd.env_remove("OPENAI_API_KEY")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
    let r: Run = cmd.output().expect("spawn").into();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !r.stdout.contains("json_object")
            && r.stdout.contains("(model m, structured output (json_schema, strict))")
            && r.stdout.contains(
                "stage verdict: runner openai, model m, time limit 30m, retries 0, output schema, structured output (json_schema, strict)"
            ),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("skipped when run: missing.md/audit, which it waits for, fails")
            && r.stdout.contains(
                "Will not complete, as planned now: 2 item(s): missing.md/audit, missing.md/verdict"
            ),
        "{r:?}"
    );
}

/// Issue 56: `--batch-api` with a `runner_column` is refused before anything is written,
/// saying why (one job, one runner and model) and what to do instead. (`stages:` is taken:
/// one job per stage, `batch_api::each_stage_of_a_batch_is_one_job`.)
#[test]
fn batch_api_with_a_runner_column_is_refused_as_documented() {
    let sb = Sandbox::new();
    sb.write("in.csv", "path,r\na.md,openai\n");
    sb.write(
        "BATCH.md",
        "---\ninput: in.csv\nid_column: path\nrunner: openai\nmodel: m\nrunner_column: r\n---\nAudit {path}\n",
    );
    let before = sb.tree();
    let mut cmd = sb.cmd(&["batch", "BATCH.md", "--batch-api"]);
    cmd.env("OPENAI_API_KEY", "sk-test-0123456789abcdef")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
    let r: Run = cmd.output().expect("spawn").into();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--batch-api")
            && r.stderr.contains("`runner_column` or `model_column`")
            && r.stderr.contains("without --batch-api"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written");
}
