//! Best-of-N per row and per stage (issue 52): a column gives each row its own fan-out (a
//! number, or a list of runners), a stage fans out on its own and the stages after it read
//! the winner's values; bad fan-outs are refused before anything is written.

use serde_json::Value;

use crate::best_of::{outcome, runs};
use crate::harness::{Sandbox, agent, by_id};

/// `bin/claude` and `bin/codex` (the fake CLI under their names) and a `record/` folder for
/// what they were given; the PATH that finds them first.
fn fake_clis(sb: &Sandbox) -> String {
    std::fs::create_dir_all(sb.join("bin")).expect("bin");
    std::fs::create_dir_all(sb.join("record")).expect("record");
    for cli in ["claude", "codex"] {
        std::os::unix::fs::symlink(agent("fake_cli.py"), sb.join("bin").join(cli))
            .expect("symlink");
    }
    format!(
        "{}:{}",
        sb.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Rows `a` (3 candidates, only c2 passes), `b` (1: no fan-out) and `1` (claude, and codex
/// with model gpt-5; the fake CLIs report for item 1) of a `fan` column; candidates of the exec runner log to `runs.log`.
fn rows_with_their_own_fan_out(sb: &Sandbox) {
    sb.write(
        "in.csv",
        "id,task,fan\na,C1=fail C3=fail,3\nb,,1\n1,,\"claude,codex:gpt-5\"\n",
    );
    let log = sb.join("runs.log");
    sb.write(
        "instr.md",
        format!("Do this: {{task}} LOG={}\n", log.display()),
    );
}

#[test]
fn a_column_gives_each_row_its_own_candidates_a_number_or_a_list_of_runners() {
    let sb = Sandbox::new();
    let path = fake_clis(&sb);
    rows_with_their_own_fan_out(&sb);
    let a = agent("candidate_agent.py");
    let flags = [
        "--id-column",
        "id",
        "--format",
        "plain",
        "--sandbox",
        "none",
        "--best-of-column",
        "fan",
        "--jobs",
        "3",
    ];
    let dry: crate::harness::Run = sb
        .batch_cmd(&[&flags[..], &["--dry-run"]].concat(), &["python3", &a])
        .env("PATH", &path)
        .output()
        .expect("run")
        .into();
    assert_eq!(dry.code, 0, "{dry:?}");
    // Per row: its fan-out and its worst case; a row of one candidate shows none.
    let plan: Vec<&str> = dry.stdout.lines().collect();
    let after = |id: &str| {
        let at = plan
            .iter()
            .position(|l| l.contains(&format!("(id {id})")))
            .unwrap_or_else(|| panic!("row {id} in the plan: {dry:?}"));
        plan.get(at + 1).copied().unwrap_or_default()
    };
    assert_eq!(
        after("a").trim(),
        "best of 3: at most 3 attempt(s), judge passing"
    );
    assert!(!after("b").contains("best of"), "{dry:?}");
    assert_eq!(
        after("1").trim(),
        "best of 2 (claude, codex:gpt-5): at most 2 attempt(s), judge passing"
    );

    let r: crate::harness::Run = sb
        .batch_cmd(&flags, &["python3", &a])
        .env("PATH", &path)
        .env("FAKE_CLI_RECORD", sb.join("record"))
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    // Row a: three candidates of the batch's runner; row b: one teammate (no candidate).
    assert_eq!([runs(&sb, 1), runs(&sb, 2), runs(&sb, 3)], [1, 1, 1]);
    assert_eq!(runs(&sb, 0), 1, "row b ran once, not as a candidate");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["winner"], "1-a.c2 (exec)");
    assert_eq!(rows["a"]["candidates"], "1/3 passed");
    assert_eq!(rows["b"]["winner"], "");
    assert_eq!(rows["b"]["candidates"], "");
    assert_eq!(rows["1"]["candidates"], "2/2 passed");
    assert!(rows["1"]["winner"].starts_with("3-1.c"), "{:?}", rows["1"]);
    // Row 1: each candidate ran its own CLI, codex with the model its cell gave.
    let b = &outcome(&sb, "1")["best_of"];
    assert_eq!(b["candidates"][0]["runner"], "claude", "{b}");
    assert_eq!(b["candidates"][1]["runner"], "codex", "{b}");
    assert_eq!(b["candidates"][1]["model"], "gpt-5", "{b}");
    let saw = |cli: &str| -> Value {
        serde_json::from_str(&sb.read(&format!("record/{cli}-1.json"))).expect("it was run")
    };
    assert!(saw("codex")["argv"].to_string().contains("gpt-5"));
    assert!(!saw("claude")["argv"].to_string().contains("gpt-5"));
    assert!(outcome(&sb, "b")["best_of"].is_null());
}

#[test]
fn a_bad_fan_out_is_refused_before_anything_is_written() {
    let sb = Sandbox::new();
    let a = agent("candidate_agent.py");
    sb.write("instr.md", "Do {task}\n");
    let flags = ["--id-column", "id", "--best-of-column", "fan"];
    for (csv, line, said) in [
        (
            "id,task,fan\na,x,2\nb,y,many\n",
            "in.csv:3",
            "`many` must be a number",
        ),
        ("id,task,fan\na,x,9\n", "in.csv:2", "1 to 8"),
    ] {
        sb.write("in.csv", csv);
        let before = sb.tree();
        let r = sb.batch(&flags, &["python3", &a]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(
            r.stderr.contains(line) && r.stderr.contains("column `fan`") && r.stderr.contains(said),
            "{r:?}"
        );
        assert!(
            r.stderr.contains("leave the cell empty"),
            "what to do: {r:?}"
        );
        assert_eq!(sb.tree(), before, "nothing written");
    }
    // A row that names its runner and gives its candidates runners of their own.
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\nrunner_column: who\nbest_of_column: fan\ncommand: [python3, {a}]\n---\nDo {{task}}\n"
        ),
    );
    sb.write(
        "in.csv",
        "id,task,who,fan\na,x,,2\nb,y,codex,\"claude,codex\"\n",
    );
    let before = sb.tree();
    let r = sb.run(&["batch", "BATCH.md"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("in.csv:3") && r.stderr.contains("give the row one of them"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written");
    // A stage whose fan-out is no number of candidates.
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\ncommand: [python3, {a}]\nstages:\n  - name: fix\n    instruction: Fix {{task}}\n    best_of: 12\n---\n"
        ),
    );
    let before = sb.tree();
    let r = sb.run(&["batch", "BATCH.md"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("stage `fix`: `best_of` must be a number"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written");
}

/// BATCH.md of two stages over row `a` doing `task`: `fix` fans out to three candidates of
/// the candidate agent, `check` (once) is told the fix's summary; both log to `runs.log`
/// (named first: a stage's title, in its prompt too, is cut at 80 characters).
fn fix_fans_out(sb: &Sandbox, task: &str) {
    let a = agent("candidate_agent.py");
    let log = sb.join("runs.log");
    let log = log.display();
    sb.write("in.csv", format!("id,task\na,\"{task}\"\n"));
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\ncommand: [python3, {a}]\nstages:\n  - name: fix\n    instruction: \"LOG={log} Fix: {{task}}\"\n    best_of: 3\n  - name: check\n    instruction: \"LOG={log} Check after: {{fix.summary}}\"\n---\n"
        ),
    );
}

#[test]
fn a_stage_fans_out_on_its_own_and_the_next_stage_reads_the_winners_values() {
    let sb = Sandbox::new();
    fix_fans_out(&sb, "C1=fail C3=fail");
    let dry = sb.run(&["batch", "BATCH.md", "--format", "plain", "--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout
            .contains("best of 3: at most 3 attempt(s), judge passing"),
        "{dry:?}"
    );
    let r = sb.run(&["batch", "BATCH.md", "--format", "plain", "--jobs", "3"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!([runs(&sb, 1), runs(&sb, 2), runs(&sb, 3)], [1, 1, 1]);
    assert_eq!(runs(&sb, 0), 1, "check ran once, not fanned out");
    let fix = outcome(&sb, "a/fix");
    assert_eq!(fix["best_of"]["winner"], 2, "{fix}");
    assert_eq!(fix["summary"], "candidate 2 did it");
    let check = outcome(&sb, "a/check");
    assert!(check["best_of"].is_null(), "{check}");
    // The output's row: the fix stage's winner and candidates; check has no such columns.
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        rows["a"]["fix.winner"], "1-a.fix.c2 (exec)",
        "{:?}",
        rows["a"]
    );
    assert_eq!(rows["a"]["fix.candidates"], "1/3 passed");
    assert!(!rows["a"].contains_key("check.winner"), "{:?}", rows["a"]);
    let prompt = sb.prompt("workers-output.csv", "a/check");
    assert!(
        prompt.contains("Check after: candidate 2 did it"),
        "the winner's summary: {prompt}"
    );
}

#[test]
fn a_kill_in_the_middle_of_a_stages_fan_out_resumes_only_its_missing_candidates() {
    let sb = Sandbox::new();
    fix_fans_out(
        &sb,
        "C1=wait:started-2,wait:started-3,ok C2=release C3=release",
    );
    let release = sb.join("release");
    let args = ["batch", "BATCH.md", "--format", "plain", "--jobs", "3"];
    let killed = sb
        .cmd(&args)
        .env("RUNNER_FAULT", "after_candidate")
        .env("RELEASE_FILE", &release)
        .output()
        .expect("spawn");
    assert_ne!(killed.status.code(), Some(0), "the fault aborts the run");
    let killed: crate::harness::Run = killed.into();
    assert_eq!(
        [runs(&sb, 1), runs(&sb, 2), runs(&sb, 3)],
        [1, 1, 1],
        "{killed:?}"
    );
    assert_eq!(runs(&sb, 0), 0, "check never started");
    std::fs::write(&release, "go").expect("release");
    let r: crate::harness::Run = sb
        .cmd(&args)
        .env("RELEASE_FILE", &release)
        .output()
        .expect("spawn")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(runs(&sb, 1), 1, "candidate 1 finished before the kill");
    assert_eq!([runs(&sb, 2), runs(&sb, 3)], [2, 2], "2 and 3 ran again");
    assert_eq!(runs(&sb, 0), 1, "check ran once, after the fix");
    let fix = outcome(&sb, "a/fix");
    assert_eq!(fix["status"], "completed");
    assert_eq!(fix["best_of"]["passed"], 3);
    assert_eq!(outcome(&sb, "a/check")["status"], "completed");
    assert!(sb.live_processes().is_empty(), "{:?}", sb.live_processes());
}

#[test]
fn only_failed_reruns_every_candidate_of_a_stage_none_of_whose_candidates_passed() {
    let sb = Sandbox::new();
    fix_fans_out(&sb, "C1=fail C2=fail C3=fail");
    let args = ["batch", "BATCH.md", "--format", "plain", "--jobs", "3"];
    let r = sb.run(&args);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(outcome(&sb, "a/fix")["best_of"]["passed"], 0);
    assert_eq!(runs(&sb, 0), 0, "check is skipped after a failed fix");
    let again = sb.run(&[&args[..], &["--only", "failed"]].concat());
    assert_eq!(again.code, 1, "{again:?}");
    assert_eq!(
        [runs(&sb, 1), runs(&sb, 2), runs(&sb, 3)],
        [2, 2, 2],
        "every candidate of the fix ran again"
    );
}
