//! Inputs the runner must never lose or misread (issue 14): outputs that would overwrite
//! inputs, workspaces of another batch, folders whose names are not UTF-8, ids that are not
//! valid branch names, set-up output on branches, `--merge` resuming its own batch, and
//! reports that contradict themselves.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::harness::{Run, Sandbox, agent, by_id, git};

fn fake() -> String {
    agent("fake_agent.py")
}

/// A repository with one commit (`shared.txt`, `lock.txt`) that ignores nothing of the
/// runner's: its outputs show up in `git status` like any other file.
fn bare_repo() -> Sandbox {
    let sb = Sandbox::new();
    git(sb.path(), &["init", "-q", "-b", "main"]);
    sb.write("shared.txt", "original\n");
    sb.write("lock.txt", "v1\n");
    git(sb.path(), &["add", "-A"]);
    git(sb.path(), &["commit", "-q", "-m", "init"]);
    sb
}

/// Write `in.csv` (`id,task`) and `instr.md` for the edit agent, kept out of `git status`.
fn edit_rows(sb: &Sandbox, rows: &[(&str, &str)]) {
    let mut csv = String::from("id,task\n");
    for (id, task) in rows {
        csv.push_str(&format!("{id},{task}\n"));
    }
    sb.write("in.csv", csv);
    sb.write("instr.md", "Do this: {task}\n");
    std::fs::write(sb.join(".git/info/exclude"), "in.csv\ninstr.md\n").expect("exclude");
}

fn isolated(sb: &Sandbox, extra: &[&str]) -> Run {
    let a = agent("edit_agent.py");
    sb.batch(
        &[crate::worktree::ISOLATED, extra].concat(),
        &["python3", &a],
    )
}

#[test]
fn no_output_of_a_csv_batch_overwrites_what_it_reads_or_another_output() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    std::fs::create_dir(sb.join("sub")).expect("sub");
    std::os::unix::fs::symlink(sb.join("in.csv"), sb.join("link.csv")).expect("symlink");
    let before = sb.tree();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--junit", "in.csv"],
            "the JUnit report would overwrite the input",
        ),
        (
            &["--junit", "instr.md"],
            "the JUnit report would overwrite the instruction",
        ),
        (
            &["--junit", "sub/../in.csv"],
            "the JUnit report would overwrite the input",
        ),
        (
            &["--junit", "link.csv"],
            "the JUnit report would overwrite the input",
        ),
        (
            &["--output", "link.csv"],
            "the output would overwrite the input",
        ),
        (
            &["--output", "o.csv", "--junit", "sub/../o.csv"],
            "the JUnit report would overwrite the output",
        ),
    ];
    for (flags, want) in cases {
        let r = sb.fake_batch(flags);
        assert_eq!(r.code, 2, "{flags:?}: {r:?}");
        assert!(
            r.stderr.contains(want) && r.stderr.contains("choose another"),
            "{flags:?}: {r:?}"
        );
        assert_eq!(sb.tree(), before, "{flags:?} changed files");
    }
}

#[test]
fn no_output_of_a_todo_batch_overwrites_its_batch_file_or_a_checkpoint() {
    let sb = Sandbox::new();
    sb.write(
        "S/todo-1.md",
        "---\nstatus: pending\n---\n## Todo\n- [ ] one MODE=success @context:cp-1.md\n",
    );
    sb.write("S/cp-1.md", "---\ntype: checkpoint\n---\n# where I was\n");
    let before = sb.tree();
    let f = fake();
    for (junit, want) in [
        (
            "S/todo-1.md",
            "the JUnit report would overwrite the batch file",
        ),
        (
            "S/cp-1.md",
            "the JUnit report would overwrite the checkpoint",
        ),
        (
            "S/todo-1.workers-output.csv",
            "the JUnit report would overwrite the todo table",
        ),
    ] {
        let r = sb.run(&["run", "S/todo-1.md", "--junit", junit, "--", "python3", &f]);
        assert_eq!(r.code, 2, "{junit}: {r:?}");
        assert!(r.stderr.contains(want), "{junit}: {r:?}");
        assert_eq!(sb.tree(), before, "--junit {junit} changed files");
    }
}

#[test]
fn a_workspace_refuses_another_batch_and_an_edited_input_reports_the_rows_it_lost() {
    let sb = Sandbox::new();
    sb.write("instr.md", "Handle {id}. MODE={mode}\n");
    sb.write("a.csv", "id,mode\nx,success\ny,success\n");
    sb.write("b.csv", "id,mode\nx,failed\nz,success\n");
    let r = sb.fake_batch_of("a.csv", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let before = sb.tree();
    // b.csv in the same folder would share workers-output.csv and its workspace.
    let r = sb.fake_batch_of("b.csv", &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("belongs to")
            && r.stderr.contains("a.csv")
            && r.stderr.contains("--output"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "the refused batch changed files");
    // Its own output is fine.
    let r = sb.fake_batch_of("b.csv", &["--output", "b-out.csv"]);
    assert_eq!(r.code, 1, "{r:?}");
    // a.csv edited: y removed, w added, x unchanged. Still a.csv's batch.
    sb.write("a.csv", "id,mode\nx,success\nw,success\n");
    let r = sb.fake_batch_of("a.csv", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("warning: 1 row(s) of the last run are no longer in")
            && r.stderr.contains(": y"),
        "{r:?}"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows.keys().collect::<Vec<_>>(), ["w", "x"]);
    assert_eq!(
        rows["x"]["attempts"], "1",
        "x did not change, so it is not rerun"
    );
    assert_eq!(rows["w"]["status"], "completed");
}

/// `<sandbox>/caf\xe9`: a folder whose name is Latin-1, not UTF-8.
fn latin1_folder(sb: &Sandbox) -> PathBuf {
    let dir = sb.path().join(OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&dir).expect("mkdir caf\\xe9");
    std::fs::write(dir.join("in.csv"), "id,mode\na,success\nb,success\n").expect("csv");
    std::fs::write(dir.join("instr.md"), "Handle {id}. MODE={mode}\n").expect("instr");
    dir
}

#[test]
fn a_batch_in_a_folder_whose_name_is_not_utf8_gets_the_real_paths() {
    let sb = Sandbox::new();
    let dir = latin1_folder(&sb);
    let mut c = sb.fake_batch_of_cmd("in.csv", &[]);
    let r: Run = c.current_dir(&dir).output().expect("spawn runner").into();
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&dir.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed", "{:?}", rows["a"]);
    assert_eq!(rows["b"]["status"], "completed", "{:?}", rows["b"]);
    // The output lies in the working directory: the workspace is in the state folder.
    let ws = sb.workspace_of(&dir.join("workers-output.runner"));
    assert!(
        ws.join("completed.jsonl").is_file() && !ws.join("teammates/1-a").exists(),
        "{}",
        ws.display()
    );
}

#[test]
fn a_prompt_that_cannot_name_a_path_that_is_not_utf8_is_refused_at_start_up() {
    let sb = Sandbox::new();
    let dir = latin1_folder(&sb);
    let before = sb.tree();
    let f = fake();
    // Run from the sandbox: the workspace caf\xe9/workers-output.runner has no UTF-8 name
    // for a teammate working there.
    let mut c = sb.cmd(&["batch"]);
    c.arg("--input")
        .arg(dir.join("in.csv"))
        .arg("--instruction")
        .arg(dir.join("instr.md"))
        .args(["--id-column", "id", "--", "python3", &f]);
    let r: Run = c.output().expect("spawn runner").into();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("not UTF-8") && r.stderr.contains("--output"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before);
}

#[test]
fn worktrees_under_a_folder_whose_name_is_not_utf8_are_refused_at_start_up() {
    let sb = bare_repo();
    let dir = latin1_folder(&sb);
    let before = sb.tree();
    let f = fake();
    let mut c = sb.cmd(&[
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--id-column",
        "id",
        "--isolate",
        "worktree",
        "--",
        "python3",
        &f,
    ]);
    let r: Run = c.current_dir(&dir).output().expect("spawn runner").into();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("--isolate worktree needs a workspace whose path is UTF-8"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before);
}

#[test]
fn ids_that_are_file_names_get_valid_distinct_branches() {
    let sb = bare_repo();
    let ids = ["Cargo.lock", "notes..md", ".env", "x.", "a@{b}", "a.lock"];
    let rows: Vec<(&str, String)> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| (*id, format!("EDIT f{n}.txt=v{n}")))
        .collect();
    let rows: Vec<(&str, &str)> = rows.iter().map(|(i, t)| (*i, t.as_str())).collect();
    edit_rows(&sb, &rows);
    let r = isolated(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    let mut branches: Vec<&str> = out.values().map(|r| r["branch"].as_str()).collect();
    for (id, row) in &out {
        assert_eq!(row["status"], "completed", "{id}: {row:?}");
        git(
            sb.path(),
            &["check-ref-format", &format!("refs/heads/{}", row["branch"])],
        );
    }
    branches.sort();
    branches.dedup();
    assert_eq!(branches.len(), ids.len(), "{branches:?}");
}

#[test]
fn only_the_agents_changes_go_on_its_branch_not_the_setup_output() {
    let sb = bare_repo();
    edit_rows(&sb, &[("a", "EDIT agent.txt=mine")]);
    let r = isolated(
        &sb,
        &[
            "--merge",
            "--worktree-setup",
            "sh -c 'echo v2 > lock.txt; echo built > generated.txt'",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(sb.read("agent.txt"), "mine\n", "the agent's file is merged");
    assert_eq!(
        sb.read("lock.txt"),
        "v1\n",
        "the set-up's rewrite is not merged"
    );
    assert!(
        !sb.join("generated.txt").exists(),
        "the set-up's artifact is not merged"
    );
    let files = git(sb.path(), &["show", "--name-only", "--format=", "HEAD^2"]);
    assert_eq!(files.trim(), "agent.txt", "{files}");
}

#[test]
fn merge_runs_resume_and_rerun_their_own_batch() {
    let sb = bare_repo();
    edit_rows(&sb, &[("a", "EDIT a.txt=1"), ("b", "EDIT b.txt=2")]);
    let r = isolated(&sb, &["--merge", "--junit", "j.xml"]);
    assert_eq!(r.code, 0, "{r:?}");
    // Its output CSV, workspace and JUnit report are in the main tree now, untracked.
    let status = git(sb.path(), &["status", "--porcelain"]);
    assert!(status.contains("workers-output"), "{status}");
    let r = isolated(&sb, &["--merge", "--junit", "j.xml"]);
    assert_eq!(r.code, 0, "resume: {r:?}");
    let r = isolated(&sb, &["--merge", "--junit", "j.xml", "--only", "a"]);
    assert_eq!(r.code, 0, "rerun: {r:?}");
    // A change of the user's own is still refused.
    sb.write("shared.txt", "edited by hand\n");
    let r = isolated(&sb, &["--merge", "--junit", "j.xml"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("shared.txt") && !r.stderr.contains("workers-output"),
        "{r:?}"
    );
}

#[test]
fn a_completed_report_that_contradicts_itself_is_failed_with_the_reason() {
    let sb = Sandbox::new();
    sb.write(
        "agent.py",
        r#"import json, os, sys
sys.stdin.read()
i = os.environ["RUNNER_ITEM_ID"]
rep = {"id": i, "status": "completed", "summary": "did " + i, "tests": "passed"}
if i == "tests_failed":
    rep["tests"] = "failed"
if i == "blank":
    rep["summary"] = "  "
json.dump(rep, open(os.environ["RUNNER_REPORT"], "w"))
"#,
    );
    sb.write("in.csv", "id\ntests_failed\nblank\ngood\n");
    sb.write("instr.md", "Handle {id}\n");
    let r = sb.batch(
        &["--id-column", "id", "--format", "plain"],
        &["python3", "agent.py"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["tests_failed"]["status"], "failed");
    assert!(
        rows["tests_failed"]["error"].contains("tests failed"),
        "{:?}",
        rows["tests_failed"]
    );
    assert_eq!(rows["blank"]["status"], "failed");
    assert!(
        rows["blank"]["error"].contains("summary is blank"),
        "{:?}",
        rows["blank"]
    );
    assert_eq!(rows["good"]["status"], "completed");
}

#[test]
fn the_trace_file_never_overwrites_an_input() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let before = sb.read("in.csv");
    let r = sb.fake_batch(&["--trace", "in.csv"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--trace"), "{r:?}");
    assert_eq!(sb.read("in.csv"), before);
    assert!(!sb.join("workers-output.csv").exists());
}

/// Findings of a fresh-user trial: flags that named a file the runner keeps elsewhere.
#[test]
fn no_flag_can_land_a_file_on_the_inbox_a_workspace_the_agent_or_another_output() {
    let sb = Sandbox::new();
    let fake = agent("fake_agent.py");
    assert_eq!(sb.run(&["add", "--store", "S", "one"]).code, 0);
    assert_eq!(sb.run(&["add", "--store", "S", "two"]).code, 0);
    let inbox = sb.read("S/todo.md");
    // resolve checks its whole plan before it moves anything.
    let r = sb.run(&[
        "resolve",
        "--store",
        "S",
        "--yes",
        "--select",
        "1",
        "--junit",
        "S/todo.md",
        "--",
        "python3",
        &fake,
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(sb.read("S/todo.md"), inbox, "the inbox is untouched");
    assert!(!sb.join("S/todo-1.md").exists(), "no batch was made");

    // A team workspace's files (the journal resume reads) and the agent program.
    sb.write_rows(&[("a", "success")]);
    assert_eq!(sb.fake_batch(&[]).code, 0);
    let journal = sb.read("workers-output.runner/journal.jsonl");
    for flags in [
        &["--trace", "workers-output.runner/journal.jsonl"][..],
        &["--junit", "workers-output.runner/team.json"][..],
        &["--output", "workers-output.runner/x.csv"][..],
        &["--trace", &fake][..],
    ] {
        let r = sb.fake_batch(flags);
        assert_eq!(r.code, 2, "{flags:?}: {r:?}");
    }
    assert_eq!(sb.read("workers-output.runner/journal.jsonl"), journal);
    assert!(
        sb.read(&fake).contains("def main"),
        "the agent is untouched"
    );

    // `report --html` and `merge -o` replace only their own kind of file.
    let input = sb.read("in.csv");
    let r = sb.run(&["report", "workers-output.csv", "--html", "in.csv"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(sb.read("in.csv"), input);
    assert_eq!(
        sb.run(&["report", "workers-output.csv", "--html", "r.html"])
            .code,
        0
    );
    assert_eq!(
        sb.run(&["report", "workers-output.csv", "--html", "r.html"])
            .code,
        0,
        "an earlier report is replaced"
    );
}

#[test]
fn merge_never_replaces_a_file_that_is_not_an_output_of_the_batch() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "success"), ("c", "success")]);
    for k in 1..=2 {
        let shard = format!("{k}/2");
        assert_eq!(sb.fake_batch(&["--shard", &shard]).code, 0);
    }
    let input = sb.read("in.csv");
    let shards = [
        "workers-output.shard-1-of-2.csv",
        "workers-output.shard-2-of-2.csv",
    ];
    let r = sb.run(&["merge", shards[0], shards[1], "-o", "in.csv"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(sb.read("in.csv"), input);
    let r = sb.run(&[
        "merge",
        shards[0],
        shards[1],
        "-o",
        "workers-output.shard-1-of-2.csv.shard.json",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(
        sb.run(&["merge", shards[0], shards[1], "-o", "all.csv"])
            .code,
        0
    );
    assert_eq!(
        sb.run(&["merge", shards[0], shards[1], "-o", "all.csv"])
            .code,
        0,
        "a merge output is replaced"
    );
}
