//! Best-of-N (issue 52): one item given to several candidates, the winner chosen by evidence
//! — the success rule and `--verify` first, then `--judge`, then the tie rules.

use serde_json::Value;

use crate::harness::{Sandbox, agent, by_id, git};

/// A repository with one commit; the runner's files and the test's inputs ignored.
pub(crate) fn repo() -> Sandbox {
    let sb = Sandbox::new();
    git(sb.path(), &["init", "-q", "-b", "main"]);
    sb.write("README.md", "a project\n");
    sb.write(
        ".gitignore",
        "*.runner/\nworkers-output*.csv\nin.csv\ninstr.md\nruns.log\nhang-*.pid\nstarted-*\nprompt-*.txt\nBATCH.md\n",
    );
    git(sb.path(), &["add", "-A"]);
    git(sb.path(), &["commit", "-q", "-m", "init"]);
    sb
}

/// One item `a` whose candidates do what `task` says (`C1=… C2=…`, `candidate_agent.py`);
/// every candidate run is logged to `runs.log`.
fn one_item(sb: &Sandbox, task: &str) {
    sb.write("in.csv", format!("id,task\na,\"{task}\"\n"));
    let log = sb.join("runs.log");
    sb.write(
        "instr.md",
        format!("Do this: {{task}} LOG={}\n", log.display()),
    );
}

/// `runner batch` over `in.csv` (ids in `id`; [`one_item`] writes one) with the candidate
/// agent and `flags`.
pub(crate) fn batch(sb: &Sandbox, flags: &[&str]) -> crate::harness::Run {
    let a = agent("candidate_agent.py");
    // The agents log their runs beside the repository (no sandbox to refuse it).
    let mut all = vec![
        "--id-column",
        "id",
        "--format",
        "plain",
        "--sandbox",
        "none",
    ];
    all.extend_from_slice(flags);
    sb.batch(&all, &["python3", &a])
}

/// The last `item_finished` outcome of item `id` in the team's journal.
pub(crate) fn outcome(sb: &Sandbox, id: &str) -> Value {
    let ws = sb.workspace_of(&sb.join("workers-output.runner"));
    let journal = std::fs::read_to_string(ws.join("journal.jsonl")).expect("journal");
    journal
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "item_finished" && e["outcome"]["id"] == id)
        .map(|e| e["outcome"].clone())
        .expect("an item_finished")
}

/// How many times each candidate ran, from `runs.log`.
pub(crate) fn runs(sb: &Sandbox, k: u32) -> usize {
    let log = sb.read_opt("runs.log").unwrap_or_default();
    log.lines().filter(|l| *l == format!("c{k}")).count()
}

/// Item `a` in a repository, given to three candidates judged by `score cat score.txt`: c1
/// scores 3 with a 1-line diff, c2 10 with 9 lines, c3 prints `c3` with 1 line; the run
/// ends 0.
fn three_scored(c3: &str) -> Sandbox {
    let sb = repo();
    one_item(
        &sb,
        &format!("C1=score:3,lines:1 C2=score:10,lines:9 C3=score:{c3},lines:1"),
    );
    let r = batch(
        &sb,
        &[
            "--isolate",
            "worktree",
            "--best-of",
            "3",
            "--jobs",
            "3",
            "--judge",
            "score cat score.txt",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    sb
}

#[test]
fn a_verify_that_passes_for_only_some_candidates_picks_among_them_the_smaller_diff() {
    let sb = repo();
    one_item(&sb, "C1=lines:1 C2=lines:5,ok C3=lines:2,ok");
    let r = batch(
        &sb,
        &[
            "--isolate",
            "worktree",
            "--best-of",
            "3",
            "--jobs",
            "3",
            "--verify",
            "test -s ok.txt",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed");
    assert_eq!(rows["a"]["winner"], "1-a.c3 (exec)");
    assert_eq!(rows["a"]["candidates"], "2/3 passed");
    assert_eq!(rows["a"]["branch"], "runner/workers-output/1-a.c3");
    let o = outcome(&sb, "a");
    let b = &o["best_of"];
    assert_eq!(b["winner"], 3);
    // c3 changed answer.txt (2 lines) and ok.txt (1); c2 5 and 1; c1 failed its verify.
    assert_eq!(b["rule"], "passing: smaller diff: 3 lines against 6");
    assert_eq!(b["candidates"][0]["verify"], "failed");
    assert_eq!(b["candidates"][0]["status"], "failed");
    assert_eq!(b["candidates"][1]["verify"], "passed");
    assert_eq!(o["attempts"], 3, "one attempt of each candidate");
    // `runner show` lists the candidates side by side, and why one is out.
    let show = sb.run(&["show", "a"]);
    assert_eq!(show.code, 0, "{show:?}");
    for line in [
        "Candidates: 2/3 passed (winner c3, passing: smaller diff: 3 lines against 6):",
        "1-a.c1",
        "out: verify failed",
        "2 files changed, 6 insertions(+)",
    ] {
        assert!(show.stdout.contains(line), "{line}: {show:?}");
    }
    // Two candidates compared: one diff from c2's branch to c3's.
    let diff = sb.run(&["show", "a", "--diff", "c2", "c3"]);
    assert_eq!(diff.code, 0, "{diff:?}");
    assert!(diff.stdout.contains("-line 4 of candidate 2"), "{diff:?}");
    assert!(diff.stdout.contains("+line 0 of candidate 3"), "{diff:?}");
    let none = sb.run(&["show", "a", "--diff", "c2", "c9"]);
    assert_eq!(none.code, 2, "{none:?}");
    assert!(
        none.stderr.contains("its candidates are c1, c2, c3"),
        "{none:?}"
    );
}

#[test]
fn score_picks_the_highest_and_a_candidate_printing_no_number_is_out() {
    let sb = three_scored("99x");
    let o = outcome(&sb, "a");
    let b = &o["best_of"];
    assert_eq!(b["winner"], 2, "{b}");
    assert_eq!(b["rule"], "score: score 10 against 3, the highest");
    assert_eq!(b["passed"], 2);
    assert_eq!(b["candidates"][1]["score"], 10.0);
    let out = b["candidates"][2]["error"].as_str().expect("c3 is out");
    assert!(out.contains("printed `99x`, not a number"), "{out}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["candidates"], "2/3 passed");
}

#[test]
fn first_stops_the_others_at_once_and_counts_what_they_spent() {
    let sb = Sandbox::new();
    one_item(
        &sb,
        "C1=wait:hang-2.pid,wait:hang-3.pid,cost:0.1 C2=cost:0.2,hang C3=cost:0.3,hang",
    );
    let a = agent("candidate_agent.py");
    sb.write(
        "cand.toml",
        format!(
            "name = \"cand\"\nprogram = \"python3\"\nargs = [{a:?}]\nprompt = \"stdin\"\noutput = \"jsonl\"\n\n[result]\ncost_usd = \"/cost\"\n"
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
        "cand.toml",
        "--best-of",
        "3",
        "--jobs",
        "3",
        "--judge",
        "first",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let o = outcome(&sb, "a");
    let b = &o["best_of"];
    assert_eq!(b["winner"], 1, "{b}");
    assert_eq!(b["rule"], "first: first to pass");
    for k in [2, 3] {
        let c = &b["candidates"][k - 1];
        assert_eq!(c["status"], "cancelled", "{c}");
        assert_eq!(c["error"], "stopped: candidate 1 passed first");
        // What it said it spent before it was stopped.
        assert_eq!(c["cost_usd"], [0.0, 0.1, 0.2, 0.3][k], "{c}");
    }
    let total = o["cost_usd"].as_f64().expect("a cost");
    assert!(
        (total - 0.6).abs() < 1e-9,
        "every candidate's cost: {total}"
    );
    // The stopped candidates' processes are gone.
    for k in [2, 3] {
        let pid = sb.read(&format!("hang-{k}.pid"));
        let alive = std::path::Path::new(&format!("/proc/{}", pid.trim())).exists();
        assert!(!alive, "candidate {k} (pid {pid}) still runs");
    }
    assert!(sb.live_processes().is_empty(), "{:?}", sb.live_processes());
}

#[test]
fn a_kill_in_the_middle_of_a_fan_out_resumes_only_the_missing_candidates() {
    let sb = Sandbox::new();
    one_item(
        &sb,
        "C1=wait:started-2,wait:started-3,ok C2=release C3=release",
    );
    let a = agent("candidate_agent.py");
    let flags = [
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--id-column",
        "id",
        "--format",
        "plain",
        "--best-of",
        "3",
        "--jobs",
        "3",
        "--",
        "python3",
        &a,
    ];
    // Candidates 2 and 3 wait for this file; the runner dies as candidate 1 ends.
    let release = sb.join("release");
    let killed = sb
        .cmd(&flags)
        .env("RUNNER_FAULT", "after_candidate")
        .env("RELEASE_FILE", &release)
        .output()
        .expect("spawn");
    assert_ne!(killed.status.code(), Some(0), "the fault aborts the run");
    assert_eq!(runs(&sb, 1), 1);
    assert_eq!([runs(&sb, 2), runs(&sb, 3)], [1, 1], "2 and 3 were running");
    std::fs::write(&release, "go").expect("release");
    let r: crate::harness::Run = sb
        .cmd(&flags)
        .env("RELEASE_FILE", &release)
        .output()
        .expect("spawn")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(runs(&sb, 1), 1, "candidate 1 finished before the kill");
    assert_eq!(runs(&sb, 2), 2, "candidate 2 ran again");
    assert_eq!(runs(&sb, 3), 2, "candidate 3 ran again");
    let o = outcome(&sb, "a");
    assert_eq!(o["status"], "completed");
    assert_eq!(o["best_of"]["passed"], 3);
    assert!(sb.live_processes().is_empty(), "{:?}", sb.live_processes());
}

#[test]
fn merge_merges_the_winner_alone_and_keeps_the_other_branches() {
    let sb = repo();
    one_item(&sb, "C1=lines:4 C2=lines:1");
    let r = batch(
        &sb,
        &[
            "--isolate",
            "worktree",
            "--merge",
            "--best-of",
            "2",
            "--jobs",
            "2",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(sb.read("answer.txt"), "line 0 of candidate 2\n");
    let branches = git(sb.path(), &["branch", "--list", "runner/*"]);
    assert!(
        branches.contains("runner/workers-output/1-a.c1"),
        "the loser's branch is kept: {branches}"
    );
    assert!(
        !branches.contains("1-a.c2"),
        "the winner's is merged and deleted: {branches}"
    );
    assert!(r.stdout.contains("1-a.c1"), "the summary names it: {r:?}");
}

#[test]
fn best_of_in_a_repository_without_worktrees_is_refused_before_anything_runs() {
    let sb = repo();
    one_item(&sb, "C1=lines:1");
    let r = batch(&sb, &["--best-of", "2"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--isolate worktree"), "{r:?}");
    assert!(sb.read_opt("runs.log").is_none(), "no candidate ran");
}

/// A `.git` above the run's folder and beyond `GIT_CEILING_DIRECTORIES` is no repository to
/// the runner, as to git (a `.git` another process made in `/tmp` for a moment refused every
/// best-of test under `/tmp`); below the ceiling it is one.
#[test]
fn a_git_folder_beyond_the_ceiling_does_not_make_the_run_a_repositorys() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.join(".git")).expect(".git");
    sb.write("work/in.csv", "id,task\na,C1=ok\n");
    sb.write("work/instr.md", "Do this: {task}\n");
    let a = agent("candidate_agent.py");
    let run = |ceiling: &std::path::Path| -> crate::harness::Run {
        sb.batch_cmd(
            &["--format", "plain", "--sandbox", "none", "--best-of", "2"],
            &["python3", &a],
        )
        .current_dir(sb.join("work"))
        .env("GIT_CEILING_DIRECTORIES", ceiling)
        .output()
        .expect("spawn runner")
        .into()
    };
    // The ceiling above the sandbox: its `.git` is the run's repository.
    let seen = run(&sb.ceiling());
    assert_eq!(seen.code, 2, "{seen:?}");
    assert!(
        seen.stderr
            .contains("the teammates work in a git repository"),
        "{seen:?}"
    );
    // The sandbox itself the ceiling: git, and so the runner, do not look into it.
    let r = run(sb.path());
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("work/workers-output.csv"), "id");
    assert_eq!(rows["a"]["candidates"], "2/2 passed", "{r:?}");
}

#[test]
fn dry_run_shows_the_fan_out_and_its_worst_case_attempts() {
    let sb = Sandbox::new();
    one_item(&sb, "C1=ok");
    let r = batch(&sb, &["--best-of", "3", "--retries", "1", "--dry-run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("Best of 3: each item goes to 3 candidates"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("3 candidate(s) in all, at most 6 attempt(s)"),
        "{r:?}"
    );
}

#[test]
fn only_failed_reruns_every_candidate_of_an_item_none_of_whose_candidates_passed() {
    let sb = Sandbox::new();
    one_item(&sb, "C1=fail C2=fail");
    let r = batch(&sb, &["--best-of", "2", "--jobs", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "failed");
    assert_eq!(rows["a"]["candidates"], "0/2 passed");
    assert_eq!(rows["a"]["winner"], "");
    let again = batch(&sb, &["--best-of", "2", "--jobs", "2", "--only", "failed"]);
    assert_eq!(again.code, 1, "{again:?}");
    assert_eq!(
        [runs(&sb, 1), runs(&sb, 2)],
        [2, 2],
        "both candidates ran again"
    );
}

#[test]
fn batch_md_sets_best_of_and_the_judge_and_bad_values_are_refused() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,task\na,C1=ok\n");
    let a = agent("candidate_agent.py");
    let md = |extra: &str| {
        format!(
            "---\ninput: in.csv\nid_column: id\n{extra}command: [python3, {a}]\n---\nDo {{task}}\n"
        )
    };
    sb.write("BATCH.md", md("best_of: 2\njudge: score cat score.txt\n"));
    let dry = sb.run(&["batch", "BATCH.md", "--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout
            .contains("Best of 2: each item goes to 2 candidates")
            && dry.stdout.contains("judge score;"),
        "{dry:?}"
    );
    sb.write("BATCH.md", md("best_of: 12\n"));
    let bad = sb.run(&["batch", "BATCH.md", "--dry-run"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("best_of"), "{bad:?}");
    sb.write("BATCH.md", md(""));
    let bad = sb.run(&[
        "batch",
        "BATCH.md",
        "--dry-run",
        "--best-of",
        "2",
        "--judge",
        "fastest",
    ]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("--judge"), "{bad:?}");
}

#[test]
fn candidates_across_runners_each_run_their_own_cli_and_model() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("bin")).expect("bin");
    std::fs::create_dir_all(sb.join("record")).expect("record");
    for cli in ["claude", "codex"] {
        std::os::unix::fs::symlink(agent("fake_cli.py"), sb.join("bin").join(cli))
            .expect("symlink");
    }
    sb.write("in.csv", "id\n1\n");
    sb.write("instr.md", "Add a greet helper for item {id}.\n");
    let path = format!(
        "{}:{}",
        sb.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let args = [
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--format",
        "plain",
        "--best-of",
        "claude,codex:gpt-5",
        "--jobs",
        "2",
    ];
    let dry = sb
        .cmd(&[&args[..], &["--dry-run"]].concat())
        .env("PATH", &path)
        .output();
    let dry: crate::harness::Run = dry.expect("run").into();
    assert!(
        dry.stdout
            .contains("c1 runner claude, c2 runner codex, model gpt-5"),
        "{dry:?}"
    );
    let r: crate::harness::Run = sb
        .cmd(&args)
        .env("PATH", &path)
        .env("FAKE_CLI_RECORD", sb.join("record"))
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["1"]["candidates"], "2/2 passed");
    let b = &outcome(&sb, "1")["best_of"];
    assert_eq!(b["candidates"][0]["runner"], "claude", "{b}");
    assert_eq!(b["candidates"][1]["runner"], "codex", "{b}");
    let codex: Value =
        serde_json::from_str(&sb.read("record/codex-1.json")).expect("codex was run");
    assert!(codex["argv"].to_string().contains("gpt-5"), "{codex}");
    assert!(sb.join("record/claude-1.json").is_file(), "claude was run");
}

#[test]
fn a_person_judge_blocks_the_item_until_runner_pick_names_the_winner() {
    let sb = Sandbox::new();
    one_item(&sb, "C1=ok C2=fail C3=ok");
    let flags = ["--best-of", "3", "--jobs", "3", "--judge", "person"];
    let r = batch(&sb, &flags);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "blocked");
    assert_eq!(
        rows["a"]["error"],
        "a person picks the winner among c1, c3: runner pick a CANDIDATE"
    );
    // A candidate that did not pass cannot be picked; nothing changes.
    let bad = sb.run(&["pick", "a", "c2"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("pick one of c1, c3"), "{bad:?}");
    let picked = sb.run(&["pick", "a", "c3"]);
    assert_eq!(picked.code, 0, "{picked:?}");
    assert!(
        picked
            .stdout
            .contains("candidate c3 (1-a.c3) is the winner"),
        "{picked:?}"
    );
    let o = outcome(&sb, "a");
    assert_eq!(o["status"], "completed");
    assert_eq!(o["best_of"]["winner"], 3);
    assert_eq!(o["output"]["candidate"], "3");
    // The batch run again writes it, and runs no candidate again.
    let again = batch(&sb, &flags);
    assert_eq!(again.code, 0, "{again:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed");
    assert_eq!(rows["a"]["winner"], "1-a.c3 (exec)");
    assert_eq!([runs(&sb, 1), runs(&sb, 2), runs(&sb, 3)], [1, 1, 1]);
}

#[test]
fn every_candidate_counts_against_the_budget() {
    let sb = Sandbox::new();
    one_item(&sb, "C1=cost:0.1 C2=cost:0.1 C3=cost:0.1");
    // One attempt at a time: after the first candidate spent $0.10, the next would go over.
    let r = batch(
        &sb,
        &["--best-of", "3", "--jobs", "1", "--max-cost-usd", "0.15"],
    );
    let o = outcome(&sb, "a");
    let b = &o["best_of"];
    assert_eq!(b["passed"], 1, "{r:?}\n{b}");
    let skipped = b["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .filter(|c| c["status"] == "skipped")
        .count();
    assert_eq!(skipped, 2, "{b}");
    assert_eq!(o["status"], "completed");
    assert_eq!(
        runs(&sb, 1) + runs(&sb, 2) + runs(&sb, 3),
        1,
        "one candidate ran"
    );
}

#[test]
fn the_html_report_shows_each_candidate_the_winner_and_the_rule_in_chromium() {
    let sb = three_scored("<script>alert(1)</script>");
    let rep = sb.run(&["report", "workers-output.csv", "--html", "report.html"]);
    assert_eq!(rep.code, 0, "{rep:?}");
    let page = sb.read("report.html");
    assert!(!page.contains("<script>alert"), "agent text is escaped");
    let Some(dom) = crate::watch::dump_dom(&sb, "report.html") else {
        return;
    };
    assert!(dom.contains("data-ready=\"1\""), "the script ran: {dom}");
    assert_eq!(
        dom.matches("<script").count(),
        1,
        "only the page's own: {dom}"
    );
    assert!(dom.contains("<th>candidates</th>"), "{dom}");
    assert!(
        dom.contains("<summary>2/3 passed, winner c2 (1-a.c2)</summary>")
            && dom.contains("<p class=\"rule\">score: score 10 against 3, the highest</p>"),
        "how many passed, who won and why: {dom}"
    );
    assert_eq!(
        dom.matches("<tr data-candidate=").count(),
        3,
        "every candidate: {dom}"
    );
    assert!(
        dom.contains("<tr data-candidate=\"c2\" class=\"win\"><td>c2 <b>winner</b></td><td>1-a.c2</td><td>exec</td>")
            && dom.contains("<td class=\"num\">10</td>")
            && dom.contains("2 files changed, 10 insertions(+)"),
        "the winner marked, with its score and diff: {dom}"
    );
    assert!(
        dom.contains("printed `&lt;script&gt;alert(1)&lt;/script&gt;`, not a number"),
        "why c3 is out, as text: {dom}"
    );
}

#[test]
fn the_live_page_shows_an_items_candidates_the_winner_and_the_rule_in_chromium() {
    use crate::serve::{Killed, free_port, get, which};
    use std::process::{Command, Stdio};
    let sb = three_scored("<b>bold</b>");
    let crate::harness::Served {
        url,
        port,
        token,
        host,
        child: _serve,
    } = sb.serve(&["workers-output.csv"]);
    // The row says how many passed and who won.
    let (code, rows) = get(port, &format!("/api/rows?token={token}"), &host, "", "");
    assert_eq!(code, 200, "{rows}");
    let rows: Value = serde_json::from_str(&rows).expect("rows are JSON");
    assert_eq!(
        rows["rows"][0]["summary"], "2/3 passed, winner c2 — candidate 2 did it",
        "{rows}"
    );
    // The item's panel has every candidate, the winner and the rule.
    let (code, item) = get(
        port,
        &format!("/api/item?token={token}&id=a"),
        &host,
        "",
        "",
    );
    assert_eq!(code, 200, "{item}");
    let item: Value = serde_json::from_str(&item).expect("the item is JSON");
    let c = &item["candidates"];
    assert_eq!(c["passed"], "2/3 passed", "{item}");
    assert_eq!(c["winner"], "winner c2 (1-a.c2)", "{item}");
    assert_eq!(
        c["rule"], "score: score 10 against 3, the highest",
        "{item}"
    );
    let names: Vec<&str> = c["rows"]
        .as_array()
        .expect("candidate rows")
        .iter()
        .map(|r| r["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["c1", "c2", "c3"], "{item}");
    let c2 = &c["rows"][1];
    assert_eq!(
        (&c2["winner"], &c2["teammate"], &c2["runner"], &c2["score"]),
        (
            &Value::Bool(true),
            &Value::from("1-a.c2"),
            &Value::from("exec"),
            &Value::from("10")
        ),
        "{item}"
    );
    assert_eq!(
        c2["diffstat"], "2 files changed, 10 insertions(+)",
        "{item}"
    );
    assert!(
        c["rows"][2]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("printed `<b>bold</b>`, not a number"),
        "why c3 is out: {item}"
    );

    let Some(driver) = which("chromedriver") else {
        crate::skip::skip(
            "chromedriver is not installed (apt-get install chromium-driver); the live page's candidates were checked over HTTP only",
        );
        return;
    };
    let browser = which("chromium").expect("chromium beside chromedriver");
    let dport = free_port();
    let _driver = Killed(
        Command::new(driver)
            .arg(format!("--port={dport}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver"),
    );
    crate::harness::wait_for("chromedriver to listen", 20, || {
        std::net::TcpStream::connect(("127.0.0.1", dport)).is_ok()
    });
    let profile = tempfile::tempdir().expect("profile");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        use crate::serve::{js, session, until};
        let client = session(dport, &browser, profile.path()).await;
        let c = &client;
        c.goto(&url).await.expect("open the page");
        until(c, "the page to load", "return document.body.dataset.ready === '1';").await;
        let said = js(c, "return document.querySelector('tr[data-id=\"a\"] .said').textContent;").await;
        assert_eq!(said, "2/3 passed, winner c2 — candidate 2 did it");
        crate::serve::click_row(c, "a").await;
        until(
            c,
            "a's candidates",
            "return document.querySelectorAll('#candidates tr[data-candidate]').length === 3;",
        )
        .await;
        let got = js(
            c,
            "var b=document.getElementById('candidates');return [b.querySelector('.cand-sum').textContent, b.querySelector('.rule').textContent, b.querySelector('tr.win').getAttribute('data-candidate'), b.querySelector('tr.win').textContent, b.querySelectorAll('b').length, b.querySelector('tr[data-candidate=\"c3\"]').textContent];",
        )
        .await;
        assert_eq!(got[0], "2/3 passed, winner c2 (1-a.c2)", "{got}");
        assert_eq!(got[1], "score: score 10 against 3, the highest", "{got}");
        assert_eq!(got[2], "c2", "{got}");
        let win = got[3].as_str().unwrap_or_default();
        assert!(
            win.starts_with("c2 winner1-a.c2exec") && win.contains("2 files changed, 10 insertions(+)"),
            "the winner marked, with its runner and diff: {got}"
        );
        // The agent's `<b>` is text: the only bold element is the winner's mark.
        assert_eq!(got[4], 1, "{got}");
        assert!(
            got[5].as_str().unwrap_or_default().contains("<b>bold</b>"),
            "why c3 is out, as text: {got}"
        );
        client.close().await.expect("close the session");
    });
}
