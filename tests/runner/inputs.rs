//! Inputs the runner must never lose or misread (issue 14): outputs that would overwrite
//! inputs, workspaces of another batch, folders whose names are not UTF-8, ids that are not
//! valid branch names, set-up output on branches, `--merge` resuming its own batch, and
//! reports that contradict themselves.

use std::path::Path;
use std::process::Command;

use crate::harness::{Run, Sandbox, agent, by_id};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
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
    let mut flags = vec![
        "--id-column",
        "id",
        "--format",
        "plain",
        "--isolate",
        "worktree",
    ];
    flags.extend_from_slice(extra);
    sb.batch(&flags, &["python3", &a])
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
