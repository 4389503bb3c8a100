//! `--judge stage NAME` (issue 52): a stage of BATCH.md judges an item's candidates that
//! passed — it reads each one (report, verify, cost, diff) in its prompt and names the
//! winner in its report; a winner it does not name among them leaves the item to a person.

use crate::best_of::{outcome, repo, runs};
use crate::harness::{Sandbox, agent, by_id};

/// BATCH.md over in.csv (one item `a` whose candidates do what `task` says) with the
/// candidate agent, `extra` frontmatter keys and a judge stage `pick`.
fn batch_md(sb: &Sandbox, task: &str, extra: &str) {
    sb.write("in.csv", format!("id,task\na,\"{task}\"\n"));
    let a = agent("candidate_agent.py");
    let log = sb.join("runs.log");
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\n{extra}command: [python3, {a}]\nstages:\n  - name: pick\n    instruction: \"Pick the best candidate. {{candidates}}\"\n---\nDo this: {{task}} LOG={}\n",
            log.display()
        ),
    );
}

/// `runner batch BATCH.md` with four candidates in worktrees, a verify, and `flags`.
fn run(sb: &Sandbox, flags: &[&str]) -> crate::harness::Run {
    let mut all = vec![
        "batch",
        "BATCH.md",
        "--format",
        "plain",
        "--sandbox",
        "none",
        "--isolate",
        "worktree",
        "--best-of",
        "4",
        "--jobs",
        "4",
        "--verify",
        "test -s ok.txt",
    ];
    all.extend_from_slice(flags);
    sb.run(&all)
}

/// c1 fails its verify; c2 (2 lines), c3 (6 lines) and c4 (3 lines) pass; the judge (`C0`)
/// keeps its prompt and names `who`.
fn task(who: &str) -> String {
    format!(
        "C1=lines:1,cost:0.1 C2=lines:2,ok,cost:0.1 C3=lines:6,ok,cost:0.1 C4=lines:3,ok,cost:0.1 C0=save,winner:{who},cost:0.5"
    )
}

#[test]
fn the_judge_stage_reads_every_survivor_and_its_choice_wins() {
    let sb = repo();
    batch_md(&sb, &task("c3"), "judge: stage pick\n");
    let dry = run(&sb, &["--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout
            .contains("judge stage pick (once per item whose candidates two or more passed"),
        "{dry:?}"
    );
    assert!(
        !dry.stdout.contains("Stages ("),
        "pick is no stage of a row: {dry:?}"
    );
    let r = run(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(runs(&sb, 0), 1, "the judge ran once");
    // Every candidate that passed is in its prompt, with its report, verify, cost and diff.
    let prompt = sb.read("prompt-0.txt");
    assert!(prompt.contains("Pick the best candidate."), "{prompt}");
    assert!(
        prompt.contains("3 candidates passed; name the best one in your report's `winner` field (one of: c2, c3, c4)"),
        "{prompt}"
    );
    for k in [2, 3, 4] {
        for part in [
            format!("## Candidate c{k} (1-a.c{k})"),
            format!("- summary: candidate {k} did it"),
            format!("+line 0 of candidate {k}"),
        ] {
            assert!(prompt.contains(&part), "{part}: {prompt}");
        }
    }
    assert!(prompt.contains("- verify: passed"), "{prompt}");
    assert!(prompt.contains("- cost: $0.1000"), "{prompt}");
    assert!(prompt.contains("- runner: exec"), "{prompt}");
    assert!(prompt.contains("+line 5 of candidate 3"), "{prompt}");
    assert!(
        !prompt.contains("## Candidate c1"),
        "c1 failed its verify: {prompt}"
    );
    // Its choice is applied: not the first that passed (c2), not the smallest diff (c2).
    let o = outcome(&sb, "a");
    let b = &o["best_of"];
    assert_eq!(b["winner"], 3, "{b}");
    assert_eq!(
        b["rule"], "stage pick: the judge stage chose c3: candidate 0 did it",
        "{b}"
    );
    assert_eq!(o["attempts"], 5, "four candidates and the judge");
    let cost = o["cost_usd"].as_f64().expect("a cost");
    assert!((cost - 0.9).abs() < 1e-9, "the judge's cost counts: {cost}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed");
    assert_eq!(rows["a"]["winner"], "1-a.c3 (exec)");
    assert_eq!(rows["a"]["candidates"], "3/4 passed");
    assert!(
        !rows["a"].contains_key("pick.status"),
        "no stage column: {:?}",
        rows["a"]
    );
    let show = sb.run(&["show", "a"]);
    assert!(
        show.stdout
            .contains("winner c3, stage pick: the judge stage chose c3"),
        "{show:?}"
    );
}

#[test]
fn a_judge_naming_a_loser_leaves_the_item_to_runner_pick() {
    let sb = repo();
    batch_md(&sb, &task("c1"), "");
    let r = run(&sb, &["--judge", "stage pick"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "blocked", "{:?}", rows["a"]);
    assert_eq!(rows["a"]["winner"], "", "no guessed winner");
    assert_eq!(
        rows["a"]["error"],
        "the judge stage `pick` decided nothing (it named `c1`, not a candidate that passed (one of c2, c3, c4)); a person picks the winner among c2, c3, c4: runner pick a CANDIDATE"
    );
    let o = outcome(&sb, "a");
    assert_eq!(
        o["best_of"]["rule"],
        "stage pick: decided nothing; waiting for `runner pick`"
    );
    let picked = sb.run(&["pick", "a", "c4"]);
    assert_eq!(picked.code, 0, "{picked:?}");
    let o = outcome(&sb, "a");
    assert_eq!(o["status"], "completed");
    assert_eq!(o["best_of"]["winner"], 4);
    // The batch again writes the pick and runs nothing again: not the judge either.
    let again = run(&sb, &["--judge", "stage pick"]);
    assert_eq!(again.code, 0, "{again:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["winner"], "1-a.c4 (exec)");
    assert_eq!(runs(&sb, 0), 1);
    assert_eq!([runs(&sb, 1), runs(&sb, 3)], [1, 1]);
}

#[test]
fn a_kill_after_the_judge_decided_never_runs_it_again() {
    let sb = repo();
    batch_md(&sb, &task("c4"), "judge: stage pick\n");
    let flags = [
        "batch",
        "BATCH.md",
        "--format",
        "plain",
        "--sandbox",
        "none",
        "--isolate",
        "worktree",
        "--best-of",
        "4",
        "--jobs",
        "4",
        "--verify",
        "test -s ok.txt",
    ];
    let killed = sb
        .cmd(&flags)
        .env("RUNNER_FAULT", "after_judge")
        .output()
        .expect("spawn");
    assert_ne!(killed.status.code(), Some(0), "the fault aborts the run");
    assert_eq!(runs(&sb, 0), 1, "the judge ran");
    let r = sb.run(&flags);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(runs(&sb, 0), 1, "the judge did not run again");
    assert_eq!(
        [runs(&sb, 1), runs(&sb, 2), runs(&sb, 3), runs(&sb, 4)],
        [1, 1, 1, 1],
        "no candidate ran again"
    );
    let o = outcome(&sb, "a");
    assert_eq!(o["status"], "completed");
    assert_eq!(o["best_of"]["winner"], 4);
    assert!(sb.live_processes().is_empty(), "{:?}", sb.live_processes());
}

#[test]
fn a_judge_stage_that_is_not_there_is_refused_before_anything_runs() {
    let sb = repo();
    batch_md(&sb, &task("c2"), "judge: stage pik\n");
    let r = run(&sb, &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("BATCH.md")
            && r.stderr
                .contains("no stage named `pik`; did you mean `pick`?"),
        "{r:?}"
    );
    // Without BATCH.md's stages: the flag is named.
    sb.write("instr.md", "Do {task}\n");
    let r = sb.run(&[
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--best-of",
        "2",
        "--isolate",
        "worktree",
        "--judge",
        "stage pick",
        "--",
        "true",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--judge") && r.stderr.contains("has no `stages:`"),
        "{r:?}"
    );
    assert!(sb.read_opt("runs.log").is_none(), "nothing ran");
    assert!(!sb.join("workers-output.csv").exists(), "nothing written");
    assert!(
        !sb.join("workers-output.runner").exists(),
        "nothing written"
    );
}
