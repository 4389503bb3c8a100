//! What a person reads from best-of-N's commands and refusals (issue 52): whole lines, and a
//! refusal that names the file, line and column to fix.

use crate::best_of::batch;
use crate::harness::{Sandbox, agent, by_id};

#[test]
fn runner_pick_prints_whole_lines() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,task\na,C1=ok C2=ok\n");
    sb.write("instr.md", "Do this: {task}\n");
    let r = batch(&sb, &["--best-of", "2", "--judge", "person"]);
    assert_eq!(r.code, 1, "blocked until a person picks: {r:?}");
    let picked = sb.run(&["pick", "a", "c2"]);
    assert_eq!(picked.code, 0, "{picked:?}");
    assert!(
        picked.stdout.contains("is the winner") && picked.stdout.ends_with('\n'),
        "the shell's prompt starts on a line of its own: {picked:?}"
    );
}

#[test]
fn a_fan_out_cell_naming_an_unknown_runner_is_refused_at_its_line_and_column() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,task,fan\na,x,2\nb,y,\"exec,nosuch\"\n");
    sb.write("instr.md", "Do this: {task}\n");
    let before = sb.tree();
    let r = batch(&sb, &["--best-of-column", "fan"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("in.csv:3")
            && r.stderr.contains("column `fan`")
            && r.stderr.contains("unknown runner `nosuch`"),
        "names the file, line, column and the runner: {r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written");
}

#[test]
fn the_dry_runs_totals_count_each_rows_own_fan_out() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,task,fan\na,x,3\nb,y,1\nc,z,2\nd,w,\n");
    sb.write("instr.md", "Do this: {task}\n");
    let r = batch(
        &sb,
        &["--best-of", "3", "--best-of-column", "fan", "--dry-run"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !r.stdout.contains("12 candidate(s) in all"),
        "not every row goes to the batch's 3: {r:?}"
    );
    // 3 + 2 + the batch's 3 for the empty cell; b (1) fans out to none.
    assert!(
        r.stdout
            .contains("Best of N in all: 8 candidate(s), at most 8 attempt(s)"),
        "{r:?}"
    );
}

#[test]
fn runner_show_heads_a_best_of_item_with_its_winner_and_its_prompt() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,task\na,C1=fail C2=ok\n");
    sb.write("instr.md", "Do this: {task}\n");
    let r = batch(&sb, &["--best-of", "2", "--jobs", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let show = sb.run(&["show", "a"]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(
        show.stdout.contains("Item a (teammate 1-a.c2)"),
        "the winner, not the first candidate to start: {show:?}"
    );
    let prompt = show
        .stdout
        .lines()
        .find(|l| l.starts_with("Prompt:"))
        .unwrap_or_default();
    assert!(prompt.contains("1-a.c2"), "the winner's prompt: {show:?}");
}

#[test]
fn batch_md_naming_an_unknown_runner_in_best_of_is_refused_at_its_line() {
    let sb = Sandbox::new();
    let a = agent("candidate_agent.py");
    sb.write("in.csv", "id,task\na,x\n");
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\ncommand: [python3, {a}]\nbest_of: exec,nosuch\n---\nDo {{task}}\n"
        ),
    );
    let before = sb.tree();
    let r = sb.run(&["batch", "BATCH.md"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("BATCH.md:5") && r.stderr.contains("unknown runner `nosuch`"),
        "names the file, the line and the runner: {r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written");
    // A stage's own list, the same.
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\ncommand: [python3, {a}]\nstages:\n  - name: fix\n    instruction: Fix {{task}}\n    best_of: exec,nosuch\n---\n"
        ),
    );
    let before = sb.tree();
    let r = sb.run(&["batch", "BATCH.md"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("BATCH.md")
            && r.stderr.contains("stage `fix`")
            && r.stderr.contains("unknown runner `nosuch`"),
        "names the file, the stage and the runner: {r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written");
}

#[test]
fn ctrl_c_while_candidates_run_counts_the_item_as_started() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,task\na,C1=hang C2=hang\nb,C1=ok C2=ok\n");
    let log = sb.join("runs.log");
    sb.write(
        "instr.md",
        format!("Do this: {{task}} LOG={}\n", log.display()),
    );
    let a = agent("candidate_agent.py");
    let run = sb
        .cmd(&[
            "batch",
            "--input",
            "in.csv",
            "--instruction",
            "instr.md",
            "--id-column",
            "id",
            "--format",
            "plain",
            "--sandbox",
            "none",
            "--best-of",
            "2",
            // One slot: a candidate of a holds it (input order), so b cannot start
            // before the interrupt (with two, b's first candidate could take the second).
            "--jobs",
            "1",
            "--",
            "python3",
            &a,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    crate::harness::wait_for("a candidate of a started", 60, || {
        sb.join("started-1").exists() || sb.join("started-2").exists()
    });
    let _ = std::process::Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status();
    let r: crate::harness::Run = run.wait_with_output().expect("wait").into();
    assert_eq!(r.code, 130, "{r:?}");
    assert!(
        r.stdout.contains("2 cancelled (1 never started)"),
        "a ran (its candidates were stopped), b never started: {r:?}"
    );
    assert!(sb.live_processes().is_empty(), "{:?}", sb.live_processes());
}

/// A score judge whose program is not there (`--judge 'score ./missing.sh'`, or BATCH.md's
/// `judge:`) is refused before any candidate runs, as a missing agent or verify program is
/// (exit 3), naming the program and where the judge was set; nothing is written. It used to
/// run every candidate and then put each out for its score.
#[test]
fn a_score_judge_whose_program_is_missing_is_refused_before_anything_runs() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,task\na,C1=ok C2=ok\n");
    let log = sb.join("runs.log");
    sb.write(
        "instr.md",
        format!("Do this: {{task}} LOG={}\n", log.display()),
    );
    let before = sb.tree();
    let r = batch(&sb, &["--best-of", "2", "--judge", "score ./missing.sh"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains("`./missing.sh` does not exist") && r.stderr.contains("--judge"),
        "names the program and the flag: {r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written, no candidate ran");
    sb.write("score.sh", "#!/bin/sh\necho \"$RUNNER_CANDIDATE\"\n");
    let before = sb.tree();
    let r = batch(&sb, &["--best-of", "2", "--judge", "score ./score.sh"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("is not executable"), "{r:?}");
    assert_eq!(sb.tree(), before, "nothing written, no candidate ran");
    // BATCH.md's `judge:`, named at its line.
    let a = agent("candidate_agent.py");
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\ncommand: [python3, {a}]\nbest_of: 2\njudge: score ./missing.sh\nsandbox: none\n---\nDo this: {{task}}\n"
        ),
    );
    let before = sb.tree();
    let r = sb.run(&["batch", "BATCH.md"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains("BATCH.md:6") && r.stderr.contains("`./missing.sh`"),
        "names the file's line and the program: {r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written, no candidate ran");
    // Made executable, the same script judges: candidate 2 scores the higher.
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(sb.join("score.sh"), mode).expect("chmod");
    let r = batch(&sb, &["--best-of", "2", "--judge", "score ./score.sh"]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert!(rows["a"]["winner"].starts_with("1-a.c2"), "{r:?}");
}

/// The terminal's line of a best-of item names its winner with that candidate's own
/// attempt: it said `(attempt 3)` — every candidate's attempts summed — for a winner that
/// ran once beside a candidate that failed twice.
#[test]
fn the_finished_line_of_a_best_of_item_carries_its_winners_own_attempt() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,task\na,C1=ok C2=fail\n");
    sb.write("instr.md", "Do this: {task}\n");
    let r = batch(&sb, &["--best-of", "2", "--jobs", "2", "--retries", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("COMPLETED"))
        .unwrap_or_default();
    assert!(
        line.contains("1-a.c1") && !line.contains("(attempt"),
        "c1 won on its first attempt: {r:?}"
    );
    let o = crate::best_of::outcome(&sb, "a");
    assert_eq!(
        o["attempts"], 3,
        "the item's attempts are every candidate's: {o}"
    );
    let own: Vec<&serde_json::Value> = o["best_of"]["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| &c["attempts"])
        .collect();
    assert_eq!(own, [1, 2], "each candidate's own: {o}");
}

/// `best_of: [exec, exec]`, a YAML list, means what the comma text `exec,exec` does, in the
/// frontmatter and in a stage (it was refused: "must be a number … or 2 to 8 runners").
#[test]
fn a_yaml_list_of_runners_in_best_of_is_the_comma_text() {
    let sb = Sandbox::new();
    let a = agent("candidate_agent.py");
    sb.write("in.csv", "id,task\na,C1=ok C2=ok\n");
    let md = |keys: &str| {
        format!(
            "---\ninput: in.csv\nid_column: id\ncommand: [python3, {a}]\nsandbox: none\n{keys}---\nDo this: {{task}}\n"
        )
    };
    sb.write("BATCH.md", md("best_of: [exec, exec]\n"));
    let r = sb.run(&["batch", "BATCH.md", "--format", "plain"]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["candidates"], "2/2 passed", "{r:?}");
    let stage = |best_of: &str| {
        md(&format!(
            "stages:\n  - name: fix\n    instruction: Fix {{task}}\n    best_of: {best_of}\n"
        ))
    };
    sb.write("BATCH.md", stage("exec,exec"));
    let text = sb.run(&["batch", "BATCH.md", "--dry-run"]);
    assert_eq!(text.code, 0, "{text:?}");
    sb.write("BATCH.md", stage("[exec, exec]"));
    let list = sb.run(&["batch", "BATCH.md", "--dry-run"]);
    assert_eq!(list.code, 0, "{list:?}");
    assert_eq!(list.stdout, text.stdout, "the same plan");
    // A list of one runner is no fan-out of runners, as the text `exec` is not.
    sb.write("BATCH.md", md("best_of: [exec]\n"));
    let one = sb.run(&["batch", "BATCH.md", "--dry-run"]);
    assert_eq!(one.code, 2, "{one:?}");
    assert!(one.stderr.contains("BATCH.md:6"), "{one:?}");
}

/// `runner show`'s candidate table gives each candidate the time of its last attempt as the
/// attempts list above it does (it said `0.0s` beside an attempt of 0.22 s: the agent's own
/// time, one decimal).
#[test]
fn runner_shows_each_candidates_time_as_its_attempt_took() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,task\na,C1=ok C2=ok\n");
    sb.write("instr.md", "Do this: {task}\n");
    let r = batch(&sb, &["--best-of", "2", "--jobs", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let show = sb.run(&["show", "a"]);
    assert_eq!(show.code, 0, "{show:?}");
    // A time as the attempts list writes it: `0.22s`.
    let time = |w: &str| {
        w.strip_suffix('s')
            .is_some_and(|n| n.contains('.') && n.parse::<f64>().is_ok())
    };
    for k in ["c1", "c2"] {
        let words = |prefix: String| -> Vec<&str> {
            show.stdout
                .lines()
                .find(|l| l.trim_start().starts_with(&prefix))
                .unwrap_or_default()
                .split_whitespace()
                .collect()
        };
        let attempt = words(format!("{k}/1 "));
        let row = words(format!("{k} "));
        let took = attempt
            .iter()
            .find(|w| time(w))
            .expect("the attempt's time");
        assert_eq!(
            row.iter().find(|w| time(w)),
            Some(took),
            "{k}: the table's time is its attempt's: {show:?}"
        );
    }
}
