//! Conflicts handed back (`--on-conflict`, issue 57): an item whose branch conflicts with the
//! merge queue's target goes to a resolver in a worktree holding the merge in progress; its
//! result lands only when it leaves no marker and passes `--verify` and `--verify-merged`,
//! else the item fails with its branch kept and the target untouched; a kill mid-resolution
//! resumes without merging twice or skipping.

use crate::harness::{Run, Sandbox, agent, by_id, git, wait_for};
use crate::worktree::{ISOLATED, repo, rows};

/// The check the tests' merged trees (and, where asked, items) must pass: no `broken.txt`.
fn check(sb: &Sandbox) {
    sb.write(
        "check.sh",
        "if [ -e broken.txt ]; then echo 'broken.txt breaks the build'; exit 1; fi\necho fine\n",
    );
    git(sb.path(), &["add", "check.sh"]);
    git(sb.path(), &["commit", "-q", "-m", "check"]);
}

/// Three items that each rewrite the body of the same function (`body.txt`, one line in
/// the repository): each conflicts with the ones merged before it.
const THREE: &[(&str, &str)] = &[
    ("a", "EDIT body.txt=alpha"),
    ("b", "EDIT body.txt=beta"),
    ("c", "EDIT body.txt=gamma"),
];

fn setup(items: &[(&str, &str)]) -> Sandbox {
    let sb = repo();
    sb.write("body.txt", "original\n");
    git(sb.path(), &["add", "body.txt"]);
    git(sb.path(), &["commit", "-q", "-m", "body"]);
    check(&sb);
    rows(&sb, items);
    sb
}

fn run(sb: &Sandbox, resolve: &str, extra: &[&str]) -> Run {
    let a = agent("resolve_agent.py");
    let flags = [
        ISOLATED,
        &["--merge", "--jobs", "3", "--verify-merged", "sh check.sh"],
        extra,
    ]
    .concat();
    sb.batch_cmd(&flags, &["python3", &a])
        .env("RESOLVE", resolve)
        .output()
        .expect("runner")
        .into()
}

/// The merges on `main`'s first-parent line, oldest first, as (subject, parent count).
fn first_parent_line(sb: &Sandbox) -> Vec<String> {
    git(
        sb.path(),
        &[
            "log",
            "--first-parent",
            "--reverse",
            "--format=%s|%p",
            "main",
        ],
    )
    .lines()
    .map(|l| {
        let (subject, parents) = l.split_once('|').unwrap_or((l, ""));
        format!("{subject} ({} parents)", parents.split_whitespace().count())
    })
    .collect()
}

#[test]
fn three_items_editing_the_same_function_land_through_a_resolver_that_names_the_others() {
    let sb = setup(THREE);
    let r = run(
        &sb,
        "union",
        &["--on-conflict", "agent", "--verify", "sh check.sh"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        sb.read("body.txt"),
        "alpha\nbeta\ngamma\n",
        "each item's change is kept"
    );
    let line = first_parent_line(&sb);
    assert_eq!(line.len(), 6, "{line:?}");
    for (k, id) in ["a", "b", "c"].iter().enumerate() {
        assert!(
            line[3 + k].starts_with("runner: merge ") && line[3 + k].ends_with("(2 parents)"),
            "{id} landed as one merge, in item order: {line:?}"
        );
    }
    let out = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b", "c"] {
        assert_eq!(out[id]["status"], "completed", "{id}: {r:?}");
        // Each merge's second parent is the item's own commit: its work, not a copy.
        let parents = git(
            sb.path(),
            &["rev-list", "--parents", "-n", "1", &out[id]["merged"]],
        );
        assert!(
            parents.trim().ends_with(&out[id]["commit"]),
            "{id}: {parents}"
        );
    }
    assert!(
        r.stdout.contains(
            "RESOLVING 2-b  conflict in body.txt handed to agent (attempt 1); it meets a"
        ),
        "{r:?}"
    );
    assert!(
        r.stdout.contains(
            "RESOLVING 3-c  conflict in body.txt handed to agent (attempt 1); it meets a, b"
        ),
        "{r:?}"
    );
    assert!(
        r.stdout.contains("MERGED 3-c  into main as ")
            && r.stdout.contains("(conflict resolved by agent)"),
        "{r:?}"
    );
    let prompt = sb.read("workers-output.runner/teammates/3-c.resolve/prompt.md");
    for said in [
        "body.txt",
        "item a (Do this: EDIT body.txt=alpha): edited body.txt",
        "item b (Do this: EDIT body.txt=beta): edited body.txt",
        "What item c did: edited body.txt",
        "runner/workers-output/3-c",
    ] {
        assert!(prompt.contains(said), "{said}: {prompt}");
    }
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    assert_eq!(branches.trim(), "main", "{branches}");
    let worktrees = git(sb.path(), &["worktree", "list", "--porcelain"]);
    assert!(!worktrees.contains(".resolve"), "{worktrees}");
    assert_eq!(git(sb.path(), &["status", "--porcelain"]), "");
}

#[test]
fn a_resolution_that_breaks_the_merged_check_is_rejected_and_the_target_left_untouched() {
    let sb = setup(&THREE[..2]);
    let r = run(&sb, "break", &["--on-conflict", "agent"]);
    assert_eq!(r.code, 1, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(out["a"]["status"], "completed");
    assert_eq!(out["b"]["status"], "failed", "{r:?}");
    assert_eq!(out["b"]["failure_kind"], "merge_failed", "{r:?}");
    assert_eq!(out["b"]["merged"], "");
    assert!(
        out["b"]["error"].contains("broken.txt breaks the build"),
        "{r:?}"
    );
    assert_eq!(
        git(sb.path(), &["rev-parse", "main"]).trim(),
        out["a"]["merged"],
        "main stays at a's merge"
    );
    assert_eq!(sb.read("body.txt"), "alpha\n");
    assert!(!sb.join("broken.txt").exists());
    assert!(r.stdout.contains("REJECTED 2-b  attempt 1: "), "{r:?}");
    assert!(r.stdout.contains("FAILED 2-b [merge_failed]"), "{r:?}");
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    assert!(
        branches.contains("runner/workers-output/2-b"),
        "b's branch is kept: {branches}"
    );
    let worktrees = git(sb.path(), &["worktree", "list", "--porcelain"]);
    assert!(!worktrees.contains(".resolve"), "{worktrees}");
    assert_eq!(git(sb.path(), &["status", "--porcelain"]), "");
}

#[test]
fn a_resolution_that_leaves_markers_is_rejected_each_attempt() {
    let sb = setup(&THREE[..2]);
    let r = run(
        &sb,
        "markers",
        &["--on-conflict", "agent", "--conflict-attempts", "2"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(out["b"]["status"], "failed", "{r:?}");
    assert_eq!(out["b"]["failure_kind"], "merge_conflict", "{r:?}");
    assert!(
        out["b"]["error"].contains("conflict markers left in body.txt"),
        "{r:?}"
    );
    assert_eq!(
        git(sb.path(), &["rev-parse", "main"]).trim(),
        out["a"]["merged"]
    );
    assert_eq!(sb.read("body.txt"), "alpha\n");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert_eq!(
        journal.matches("\"conflict_handed\"").count(),
        2,
        "two attempts"
    );
    assert_eq!(journal.matches("\"conflict_resolved\"").count(), 2);
    assert!(git(sb.path(), &["branch"]).contains("2-b"));
}

/// Run the three items with a resolver that hangs, and `kill -9` the runner once b's
/// resolver has started; returns that resolver's pid.
fn kill_mid_resolution(sb: &Sandbox) -> i32 {
    kill_mid_resolution_with(sb, "hang", &[])
}

/// [`kill_mid_resolution`] with the resolver's modes `resolve` and `extra` flags.
fn kill_mid_resolution_with(sb: &Sandbox, resolve: &str, extra: &[&str]) -> i32 {
    let a = agent("resolve_agent.py");
    let flags = [
        ISOLATED,
        &["--merge", "--jobs", "3", "--verify-merged", "sh check.sh"],
        &["--on-conflict", "agent"],
        extra,
    ]
    .concat();
    let mut killed = sb
        .batch_cmd(&flags, &["python3", &a])
        .env("RESOLVE", resolve)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runner");
    let pid_file = sb.join("workers-output.runner/teammates/2-b.resolve/work/resolving.pid");
    wait_for("the resolver to start", 60, || pid_file.exists());
    killed.kill().expect("kill -9");
    let _ = killed.wait();
    let resolver: i32 = sb
        .read("workers-output.runner/teammates/2-b.resolve/work/resolving.pid")
        .trim()
        .parse()
        .expect("pid");
    assert_eq!(
        first_parent_line(sb).len(),
        4,
        "only a landed before the kill"
    );
    resolver
}

#[test]
fn a_kill_mid_resolution_then_a_resume_neither_merges_twice_nor_skips() {
    let sb = setup(THREE);
    let resolver = kill_mid_resolution(&sb);
    let r = run(&sb, "union", &["--on-conflict", "agent"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !std::path::Path::new(&format!("/proc/{resolver}")).exists()
            || std::fs::read_to_string(format!("/proc/{resolver}/stat")).is_ok_and(|s| s
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))),
        "the killed run's resolver is ended"
    );
    assert_eq!(sb.read("body.txt"), "alpha\nbeta\ngamma\n");
    let merges = git(sb.path(), &["rev-list", "--merges", "--count", "main"]);
    assert_eq!(merges.trim(), "3", "each item merged once");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert_eq!(
        journal.matches("\"attempt_started\"").count(),
        3,
        "no item ran again"
    );
    assert_eq!(journal.matches("\"item_merged\"").count(), 3, "{journal}");
    assert_eq!(
        journal.matches("\"conflict_resolved\"").count(),
        2,
        "b's and c's resolutions each finished once"
    );
    let out = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b", "c"] {
        assert_eq!(out[id]["status"], "completed", "{id}");
    }
    assert!(sb.survivors_after(5.0).is_empty(), "no process is left");
    let worktrees = git(sb.path(), &["worktree", "list", "--porcelain"]);
    assert!(
        !worktrees.contains(".resolve") && !worktrees.contains(".merge-queue"),
        "{worktrees}"
    );
}

/// What a killed resolver leaves (a worktree holding its half-made merge) is no one's work:
/// `runner clean` removes it without `--force`, and keeps the unmerged branches.
#[test]
fn clean_after_a_kill_mid_resolution_removes_the_resolvers_worktree_and_keeps_branches() {
    let sb = setup(THREE);
    kill_mid_resolution(&sb);
    let r = sb.run(&["clean", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let worktrees = git(sb.path(), &["worktree", "list", "--porcelain"]);
    assert!(!worktrees.contains(".resolve"), "{worktrees}");
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    for b in ["2-b", "3-c"] {
        assert!(
            branches.contains(&format!("runner/workers-output/{b}")),
            "{branches}"
        );
    }
}

/// The item's own `--verify` runs on the resolved merge too, before `--verify-merged`.
#[test]
fn a_resolution_that_fails_the_items_verify_is_rejected() {
    let sb = setup(&THREE[..2]);
    let r = run(
        &sb,
        "break",
        &["--on-conflict", "agent", "--verify", "sh check.sh"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(out["b"]["failure_kind"], "merge_conflict", "{r:?}");
    assert!(
        out["b"]["error"].contains("the resolved merge failed --verify"),
        "{r:?}"
    );
    assert_eq!(
        git(sb.path(), &["rev-parse", "main"]).trim(),
        out["a"]["merged"]
    );
    assert!(!sb.join("broken.txt").exists());
}

/// Ctrl-C while a resolver works ends it (and the run, 130) with nothing left running; the
/// same command then resumes the queue.
#[test]
fn an_interrupt_mid_resolution_ends_the_resolver_and_the_run_resumes() {
    let sb = setup(THREE);
    let a = agent("resolve_agent.py");
    let flags = [
        ISOLATED,
        &["--merge", "--jobs", "3", "--verify-merged", "sh check.sh"],
        &["--on-conflict", "agent"],
    ]
    .concat();
    let child = sb
        .batch_cmd(&flags, &["python3", &a])
        .env("RESOLVE", "hang")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runner");
    let pid_file = sb.join("workers-output.runner/teammates/2-b.resolve/work/resolving.pid");
    wait_for("the resolver to start", 60, || pid_file.exists());
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(interrupted.success());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    assert!(sb.survivors_after(5.0).is_empty(), "the resolver was ended");
    let r = run(&sb, "union", &["--on-conflict", "agent"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(sb.read("body.txt"), "alpha\nbeta\ngamma\n");
}

#[test]
fn on_conflict_is_checked_before_anything_runs_and_shown_by_the_plan() {
    let sb = setup(&THREE[..2]);
    let a = agent("resolve_agent.py");
    for (flags, says) in [
        (
            &["--on-conflict", "agent"][..],
            "--on-conflict needs --merge",
        ),
        (&["--merge", "--on-conflict", "a b"], "--on-conflict"),
        (
            &[
                "--merge",
                "--on-conflict",
                "agent",
                "--conflict-attempts",
                "9",
            ],
            "1 to 5",
        ),
    ] {
        let r = sb.batch(&[ISOLATED, flags].concat(), &["python3", &a]);
        assert_eq!(r.code, 2, "{flags:?}: {r:?}");
        assert!(r.stderr.contains(says), "{flags:?}: {r:?}");
        assert!(
            !sb.join("workers-output.runner").exists(),
            "nothing written"
        );
    }
    // The resolver's runner is checked like any: a `codex` on PATH.
    sb.write("bin/codex", "#!/bin/sh\necho codex-cli 0.1.0\n");
    std::fs::write(sb.join(".git/info/exclude"), "in.csv\ninstr.md\nbin/\n").expect("exclude");
    let exe = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(sb.join("bin/codex"), exe).expect("chmod");
    let path = format!(
        "{}:{}",
        sb.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let flags = [
        ISOLATED,
        &[
            "--merge",
            "--on-conflict",
            "codex:gpt-5",
            "--conflict-attempts",
            "2",
        ],
        &["--dry-run"],
    ]
    .concat();
    let dry: Run = sb
        .batch_cmd(&flags, &["python3", &a])
        .env("PATH", path)
        .output()
        .expect("runner")
        .into();
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout.contains(
            "a conflicting merge goes to a resolver (runner codex, model gpt-5; 2 attempt(s) per item)"
        ),
        "{dry:?}"
    );
}

/// A kill in the second resolution attempt: the resume counts the finished first attempt,
/// makes the second again, and never counts a resolver's attempt as one of the item's own.
#[test]
fn a_kill_in_a_later_resolution_attempt_resumes_that_attempt() {
    let sb = setup(THREE);
    let attempts = ["--conflict-attempts", "2"];
    kill_mid_resolution_with(&sb, "markers,hang", &attempts);
    let r = run(
        &sb,
        "union",
        &[&["--on-conflict", "agent"][..], &attempts].concat(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(sb.read("body.txt"), "alpha\nbeta\ngamma\n");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b", "c"] {
        assert_eq!(out[id]["status"], "completed", "{id}");
        assert_eq!(out[id]["attempts"], "1", "{id}: the item's own attempts");
    }
    let journal = sb.read("workers-output.runner/journal.jsonl");
    let b_handed = journal
        .lines()
        .filter(|l| l.contains("\"conflict_handed\"") && l.contains("\"id\":\"b\""))
        .count();
    assert_eq!(
        b_handed, 3,
        "b: attempt 1, attempt 2 killed, attempt 2 again"
    );
    assert!(
        r.stdout
            .contains("RESOLVING 2-b  conflict in body.txt handed to agent (attempt 2)"),
        "{r:?}"
    );
    assert!(sb.survivors_after(5.0).is_empty(), "no process is left");
}

/// BATCH.md's `on_conflict` and `conflict_attempts` are the flags' keys.
#[test]
fn batch_md_on_conflict_keys_hand_conflicts_to_a_resolver() {
    let sb = setup(&THREE[..2]);
    let a = agent("resolve_agent.py");
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\nisolate: worktree\non_conflict: agent\nconflict_attempts: 3\ncommand: [python3, {a:?}]\n---\nDo this: {{task}}\n"
        ),
    );
    std::fs::write(sb.join(".git/info/exclude"), "in.csv\ninstr.md\nBATCH.md\n").expect("exclude");
    let r: Run = sb
        .cmd(&["batch", "BATCH.md", "--merge", "--format", "plain"])
        .env("RESOLVE", "union")
        .output()
        .expect("runner")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("(conflict resolved by agent)"), "{r:?}");
    assert_eq!(sb.read("body.txt"), "alpha\nbeta\n");
}
