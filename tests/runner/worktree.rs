//! Isolation: each teammate in its own git worktree, merged back only when it succeeded
//! (issue: isolation).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Sandbox, agent, by_id, git};

/// A repository with one commit: shared.txt, an ignored .env, and the runner's files ignored.
pub(crate) fn repo() -> Sandbox {
    let sb = Sandbox::new();
    git(sb.path(), &["init", "-q", "-b", "main"]);
    sb.write("shared.txt", "original\n");
    sb.write(
        ".gitignore",
        ".agent-tasks/\n*.runner/\nworkers-output*.csv\n.env\n",
    );
    sb.write(".env", "SECRET=1\n");
    git(sb.path(), &["add", "-A"]);
    git(sb.path(), &["commit", "-q", "-m", "init"]);
    sb
}

pub(crate) fn rows(sb: &Sandbox, rows: &[(&str, &str)]) {
    let mut csv = String::from("id,task\n");
    for (id, task) in rows {
        csv.push_str(&format!("{id},{task}\n"));
    }
    sb.write("in.csv", csv);
    sb.write("instr.md", "Do this: {task}\n");
    // in.csv and instr.md are untracked; keep the tree clean for --merge.
    if sb.join(".git/info").is_dir() {
        std::fs::write(sb.join(".git/info/exclude"), "in.csv\ninstr.md\n").expect("exclude");
    }
}

/// The flags of every batch here: ids from `id`, plain output, a worktree per teammate.
pub(crate) const ISOLATED: &[&str] = &[
    "--id-column",
    "id",
    "--format",
    "plain",
    "--isolate",
    "worktree",
];

pub(crate) fn batch(sb: &Sandbox, items: &[(&str, &str)], extra: &[&str]) -> crate::harness::Run {
    if !items.is_empty() {
        rows(sb, items);
    }
    let a = agent("edit_agent.py");
    let flags = [ISOLATED, extra].concat();
    sb.batch(&flags, &["python3", &a])
}

fn worktree_list(sb: &Sandbox) -> String {
    git(sb.path(), &["worktree", "list", "--porcelain"])
}

#[test]
fn two_teammates_editing_the_same_file_both_complete_in_their_own_worktrees() {
    let sb = repo();
    let r = batch(
        &sb,
        &[
            ("a", "EDIT shared.txt=alpha"),
            ("b", "EDIT shared.txt=beta"),
        ],
        &["--jobs", "2"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["branch"], "runner/workers-output/1-a");
    assert_eq!(rows["b"]["branch"], "runner/workers-output/2-b");
    assert_eq!(
        sb.read("shared.txt"),
        "original\n",
        "the main working tree is untouched"
    );
    assert_eq!(
        git(sb.path(), &["show", "runner/workers-output/1-a:shared.txt"]),
        "alpha\n"
    );
    assert_eq!(
        git(sb.path(), &["show", "runner/workers-output/2-b:shared.txt"]),
        "beta\n"
    );
    assert_eq!(
        rows["a"]["commit"],
        git(sb.path(), &["rev-parse", "runner/workers-output/1-a"]).trim()
    );
    // Completed worktrees are removed; their branches are listed for the user to merge.
    assert_eq!(
        worktree_list(&sb).matches("worktree ").count(),
        1,
        "{}",
        worktree_list(&sb)
    );
    assert!(
        r.stdout.contains("Completed branches to merge")
            && r.stdout.contains("runner/workers-output/2-b"),
        "{r:?}"
    );
}

/// Without the sandbox an agent may commit on its branch itself. (Under it — the default
/// where the kernel has Landlock — a commit writes the repository's shared `.git`, which no
/// teammate may write, so the runner makes every commit: the next test.)
#[test]
fn uncommitted_changes_are_committed_and_the_agents_own_commits_kept() {
    let sb = repo();
    let r = batch(
        &sb,
        &[
            ("a", "EDIT src/new.rs=fn_main"),
            ("b", "EDIT b.txt=x COMMIT"),
        ],
        &["--sandbox", "none"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let log = git(
        sb.path(),
        &["log", "--format=%s", "runner/workers-output/1-a"],
    );
    // Titled with what the report says was done, not the instruction.
    assert!(log.starts_with("runner: edited src/new.rs"), "{log}");
    let log = git(
        sb.path(),
        &["log", "--format=%s", "runner/workers-output/2-b"],
    );
    assert!(
        log.starts_with("agent's own commit\n"),
        "nothing left to commit: {log}"
    );
}

/// Under the default sandbox (Landlock where the kernel has it) a teammate in its worktree
/// cannot write the repository's shared `.git`: its own `git commit` and an attempt to move
/// `main` fail and `main` stays where it was; the runner commits what it left, on its branch.
#[test]
fn under_the_sandbox_a_teammate_cannot_commit_or_move_a_branch_and_the_runner_commits_for_it() {
    let sb = repo();
    let main_before = git(sb.path(), &["rev-parse", "main"]);
    let r = batch(&sb, &[("a", "EDIT a.txt=one TRY-COMMIT")], &[]);
    if r.stdout.contains("sandbox none (auto: this kernel") {
        crate::skip::skip(format!(
            "this kernel cannot confine teammates: {}",
            r.stdout
        ));
        return;
    }
    assert!(r.stdout.contains("; sandbox landlock"), "{r:?}");
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    let result: serde_json::Value = serde_json::from_str(&rows["a"]["result"]).expect("json");
    let said = &result["git"];
    for step in ["add", "commit", "move_main"] {
        let text = said[step].as_str().unwrap_or_default();
        assert!(text.contains("Permission denied"), "{step}: {said}");
    }
    assert_eq!(git(sb.path(), &["rev-parse", "main"]), main_before);
    let log = git(
        sb.path(),
        &["log", "--format=%s", "runner/workers-output/1-a"],
    );
    assert!(log.starts_with("runner: edited a.txt"), "{log}");
}

#[test]
fn merge_merges_what_it_can_and_fails_the_conflicting_item_keeping_its_branch() {
    let sb = repo();
    let r = batch(
        &sb,
        &[
            ("a", "EDIT a.txt=one"),
            ("b", "EDIT shared.txt=beta"),
            ("c", "EDIT shared.txt=gamma"),
        ],
        &["--merge", "--jobs", "3"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed");
    assert_eq!(rows["b"]["status"], "completed");
    assert_eq!(rows["c"]["status"], "failed");
    assert_eq!(rows["c"]["error"], "merge conflict in shared.txt");
    // Issue 56/57: the live line says TO MERGE, never COMPLETED, and the queue's line and
    // the end say what it became.
    assert!(
        r.stdout
            .contains("Not merged into main: 3-c is failed: merge conflict in shared.txt"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("FAILED 3-c [merge_conflict]  merge conflict in shared.txt"),
        "{r:?}"
    );
    assert!(!r.stdout.lines().any(|l| l.contains("COMPLETED")), "{r:?}");
    assert_eq!(sb.read("shared.txt"), "beta\n");
    assert_eq!(sb.read("a.txt"), "one\n");
    assert_eq!(
        git(sb.path(), &["status", "--porcelain"]),
        "",
        "the working tree is clean"
    );
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    assert!(
        !branches.contains("1-a") && !branches.contains("2-b"),
        "merged branches are deleted: {branches}"
    );
    assert!(
        branches.contains("runner/workers-output/3-c"),
        "the conflicting branch is kept: {branches}"
    );
    assert!(
        worktree_list(&sb).contains("worktrees/3-c"),
        "its worktree stays for inspection"
    );
}

#[test]
fn merge_needs_a_clean_working_tree_and_a_repository() {
    let sb = repo();
    sb.write("shared.txt", "local edit\n");
    rows(&sb, &[("a", "EDIT a.txt=one")]);
    let before = sb.tree();
    let r = batch(&sb, &[], &["--merge"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("needs a clean working tree"), "{r:?}");
    assert_eq!(sb.tree(), before);
    let plain = Sandbox::new();
    rows(&plain, &[("a", "EDIT a.txt=one")]);
    let r = batch(&plain, &[], &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("not inside a git repository"), "{r:?}");
}

#[test]
fn setup_command_and_copied_ignored_files_reach_the_worktree() {
    let sb = repo();
    let r = batch(
        &sb,
        &[("a", "CHECK .env CHECK setup-ran.txt EDIT out.txt=ok")],
        &[
            "--worktree-copy",
            ".env",
            "--worktree-setup",
            "touch setup-ran.txt",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let r = batch(
        &sb,
        &[("b", "EDIT x.txt=1")],
        &["--worktree-setup", "false"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert!(
        rows["b"]["error"].starts_with("worktree setup `false` exited with code 1"),
        "{:?}",
        rows["b"]
    );
}

#[test]
fn clean_leaves_worktrees_and_branches_as_before_the_run() {
    let sb = repo();
    let paths = |list: String| {
        list.lines()
            .filter(|l| l.starts_with("worktree "))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let worktrees_before = paths(worktree_list(&sb));
    let branches_before = git(sb.path(), &["branch"]);
    let r = batch(
        &sb,
        &[
            ("a", "EDIT a.txt=1"),
            ("b", "EDIT shared.txt=2"),
            ("c", "EDIT shared.txt=3"),
        ],
        &["--merge"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    // The conflicting item's branch holds commits never merged: only --force drops it.
    let r = sb.run(&["clean", "workers-output.runner", "--yes", "--force"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(paths(worktree_list(&sb)), worktrees_before);
    assert_eq!(git(sb.path(), &["branch"]), branches_before);
    assert!(!sb.join("workers-output.runner").exists());
}

#[test]
fn ctrl_c_leaves_no_worktree_git_does_not_know_about() {
    let sb = repo();
    let mut csv = String::from("id,task\n");
    for i in 0..3 {
        csv.push_str(&format!("h{i},EDIT f{i}.txt=x HANG\n"));
    }
    sb.write("in.csv", csv);
    sb.write("instr.md", "Do this: {task}\n");
    let a = agent("edit_agent.py");
    let mut child = sb
        .batch_cmd(
            &[
                "--id-column",
                "id",
                "--isolate",
                "worktree",
                "--jobs",
                "3",
                "--grace",
                "2s",
            ],
            &["python3", &a],
        )
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    let until = Instant::now() + Duration::from_secs(30);
    // While the runner adds worktrees, `git worktree list` can meet one half-registered
    // ("failed to read .git/worktrees/…/commondir"): poll without asserting on git.
    let listed_now = || {
        Command::new("git")
            .args(["worktree", "list", "--porcelain"])
            .current_dir(sb.path())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    while listed_now().matches("worktree ").count() < 4 {
        assert!(Instant::now() < until, "worktrees never appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert_eq!(child.wait().expect("wait").code(), Some(130));
    let listed = worktree_list(&sb);
    for e in std::fs::read_dir(sb.join("workers-output.runner/worktrees"))
        .expect("worktrees")
        .flatten()
    {
        let p = e.path().canonicalize().expect("canon");
        assert!(
            listed.contains(&p.display().to_string()),
            "{} is not registered:\n{listed}",
            p.display()
        );
    }
    let prune = git(sb.path(), &["worktree", "prune", "--dry-run", "-v"]);
    assert_eq!(prune, "", "git has stale worktree entries");
    assert!(sb.survivors_after(2.0).is_empty());
}

/// The "done when": three code items, one conflicting, through `resolve`.
#[test]
fn resolve_with_worktrees_and_merge_on_three_code_items() {
    let sb = repo();
    std::fs::create_dir_all(sb.join(".agent-tasks")).expect("store");
    sb.write(
        ".agent-tasks/todo.md",
        "## Todo\n- [ ] Add a.txt EDIT a.txt=one\n- [ ] Change shared EDIT shared.txt=beta\n- [ ] Change shared too EDIT shared.txt=gamma\n",
    );
    let a = agent("edit_agent.py");
    let r = sb.run(&[
        "resolve",
        "--project",
        "--yes",
        "--isolate",
        "worktree",
        "--merge",
        "--format",
        "plain",
        "--",
        "python3",
        &a,
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("Isolation: worktree"), "{r:?}");
    let batch = sb.read(".agent-tasks/todo-1.md");
    assert!(
        batch.contains("- [x] Add a.txt") && batch.contains("- [x] Change shared EDIT"),
        "{batch}"
    );
    assert!(batch.contains("- [ ] Change shared too EDIT shared.txt=gamma\n  > runner: failed: merge conflict in shared.txt"), "{batch}");
    assert_eq!(
        git(sb.path(), &["status", "--porcelain"]),
        "",
        "the working tree is clean"
    );
    assert_eq!(sb.read("shared.txt"), "beta\n");
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    assert_eq!(
        branches
            .lines()
            .filter(|b| b.starts_with("runner/"))
            .collect::<Vec<_>>(),
        vec!["runner/todo-resolve-1/todo-task-3"]
    );
    // One worktree left (the failed item's), registered with git; nothing stray.
    let list = worktree_list(&sb);
    assert_eq!(list.matches("worktree ").count(), 2, "{list}");
    assert_eq!(
        git(sb.path(), &["worktree", "prune", "--dry-run", "-v"]),
        ""
    );
}

#[test]
fn a_branch_left_by_a_removed_workspace_is_never_silently_reused() {
    let sb = repo();
    let r = batch(&sb, &[("a", "EDIT shared.txt=alpha")], &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let old_tip = git(sb.path(), &["rev-parse", "runner/workers-output/1-a"]);
    // The user removes the workspace to start over, and the project moves on.
    std::fs::remove_dir_all(sb.join("workers-output.runner")).expect("rm workspace");
    std::fs::remove_file(sb.join("workers-output.csv")).expect("rm output");
    sb.write("other.txt", "new\n");
    git(sb.path(), &["add", "other.txt"]);
    git(sb.path(), &["commit", "-q", "-m", "moved on"]);
    let head = git(sb.path(), &["rev-parse", "HEAD"]);

    // The old branch holds the earlier run's commit: the item fails and names the branch,
    // which keeps its commit (a retry does not adopt it either).
    let r = batch(
        &sb,
        &[("a", "EDIT shared.txt=alpha")],
        &[
            "--retries",
            "1",
            "--retry-on",
            "failed",
            "--retry-delay",
            "10ms",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "failed");
    assert_eq!(rows["a"]["attempts"], "2", "{:?}", rows["a"]);
    assert!(
        rows["a"]["error"].contains("branch runner/workers-output/1-a holds commits"),
        "{:?}",
        rows["a"]
    );
    assert_eq!(rows["a"]["log"], "", "no log was written");
    assert_eq!(
        git(sb.path(), &["rev-parse", "runner/workers-output/1-a"]),
        old_tip
    );

    // A branch with no commits of its own restarts from the current HEAD.
    git(
        sb.path(),
        &["branch", "-f", "runner/workers-output/1-a", "HEAD~1"],
    );
    std::fs::remove_dir_all(sb.join("workers-output.runner")).expect("rm workspace");
    let r = batch(&sb, &[("a", "EDIT shared.txt=alpha")], &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let parent = git(sb.path(), &["rev-parse", "runner/workers-output/1-a~1"]);
    assert_eq!(parent, head, "the branch starts from the current HEAD");
}

/// Two batches in one repository whose outputs have the same name share the team, so its
/// branches: the second one's item fails on the first one's branch, and says to give it an
/// output of its own (not only to delete the branch, which would drop the other's work);
/// with one, it completes on its own branches and the first batch's branch is untouched.
#[test]
fn a_second_batch_with_the_same_output_name_is_told_to_take_its_own_output() {
    let sb = repo();
    let a = agent("edit_agent.py");
    for dir in ["one", "two"] {
        sb.write(
            &format!("{dir}/in.csv"),
            "id,task\na,EDIT shared.txt=alpha\n",
        );
        sb.write(&format!("{dir}/instr.md"), "Do this: {task}\n");
    }
    std::fs::write(
        sb.join(".git/info/exclude"),
        "in.csv\ninstr.md\nother.csv\n",
    )
    .expect("exclude");
    let run = |dir: &str, extra: &[&str]| -> crate::harness::Run {
        sb.batch_cmd(&[ISOLATED, extra].concat(), &["python3", &a])
            .current_dir(sb.join(dir))
            .output()
            .expect("spawn runner")
            .into()
    };
    let r = run("one", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let tip = git(sb.path(), &["rev-parse", "runner/workers-output/1-a"]);
    let r = run("two", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("two/workers-output.csv"), "id");
    assert!(
        rows["a"]["error"].contains("share the team `workers-output`")
            && rows["a"]["error"].contains("give this batch an output of its own"),
        "{:?}",
        rows["a"]
    );
    let r = run("two", &["-o", "other.csv"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(git(sb.path(), &["branch", "--list", "runner/other/1-a"]).contains("1-a"));
    assert_eq!(
        git(sb.path(), &["rev-parse", "runner/workers-output/1-a"]),
        tip,
        "the first batch's work is kept"
    );
}

/// A shell agent that records its working folder and arguments in `seen.txt` (in its
/// worktree, so on its branch) and reports completed; `version` tells the copies apart.
fn shell_agent(version: &str) -> String {
    format!(
        "#!/bin/sh\n{{ echo {version}; pwd; for a in \"$@\"; do echo \"$a\"; done; }} > seen.txt\n\
         printf '{{\"status\":\"completed\",\"summary\":\"ok\"}}' > \"$RUNNER_REPORT\"\n"
    )
}

fn make_executable(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn a_relative_agent_program_runs_the_users_current_copy_in_every_worktree() {
    let sb = repo();
    // ag.sh is tracked, then edited without committing: the edit is what must run.
    make_executable(&sb.write("ag.sh", shell_agent("committed")));
    git(sb.path(), &["add", "ag.sh"]);
    git(sb.path(), &["commit", "-q", "-m", "agent"]);
    make_executable(&sb.write("ag.sh", shell_agent("current")));
    // An untracked file named as an argument, folders inside the repository (which name
    // the teammate's own copy in its worktree), an argument that names nothing here.
    sb.write("notes/data.txt", "untracked\n");
    // An untracked --verify program runs too; its argument names the teammate's own file
    // (a stale seen.txt lies in the main tree: checking that one would fail).
    make_executable(&sb.write("check.sh", "#!/bin/sh\ngrep -q current \"$1\"\n"));
    sb.write("seen.txt", "stale\n");
    rows(&sb, &[("a", "x"), ("b", "y")]);
    let r = sb.batch(
        &[
            ISOLATED,
            &["--jobs", "4", "--verify", "./check.sh seen.txt"],
        ]
        .concat(),
        &[
            "./ag.sh",
            "notes/data.txt",
            "notes",
            ".",
            "no-such-file",
            "--flag",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let root = sb.path().canonicalize().expect("canon");
    for branch in ["runner/workers-output/1-a", "runner/workers-output/2-b"] {
        let seen = git(sb.path(), &["show", &format!("{branch}:seen.txt")]);
        let lines: Vec<&str> = seen.lines().collect();
        assert_eq!(lines[0], "current", "the user's own copy ran: {seen}");
        assert!(
            lines[1].ends_with(&format!("worktrees/{}", &branch[22..])),
            "it ran in its worktree: {seen}"
        );
        assert_eq!(
            lines[2..],
            [
                root.join("notes/data.txt").display().to_string().as_str(),
                "notes",
                ".",
                "no-such-file",
                "--flag"
            ],
            "{seen}"
        );
    }
}

/// A repository in the sandbox's `project/` (one commit; `in.csv` with these rows and
/// `instr.md` untracked) and an empty `outside/` beside it, for outputs outside it.
fn project_beside_outside(sb: &Sandbox, rows: &str) -> std::path::PathBuf {
    let project = sb.join("project");
    std::fs::create_dir_all(&project).expect("mkdir");
    std::fs::create_dir_all(sb.join("outside")).expect("mkdir");
    git(&project, &["init", "-q", "-b", "main"]);
    std::fs::write(project.join("README"), "x\n").expect("write");
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "init"]);
    std::fs::write(project.join("in.csv"), format!("id,task\n{rows}")).expect("csv");
    std::fs::write(project.join("instr.md"), "Do {task}\n").expect("instr");
    project
}

/// Run `runner ARGS` in `dir`.
fn run_in(sb: &Sandbox, dir: &std::path::Path, args: &[&str]) -> crate::harness::Run {
    sb.cmd(args)
        .current_dir(dir)
        .output()
        .expect("spawn")
        .into()
}

/// `runner batch` over `project`'s in.csv with worktrees, its output `../outside/o.csv`.
fn batch_outside(sb: &Sandbox, project: &std::path::Path, agent: &[&str]) -> crate::harness::Run {
    let mut cmd = sb.batch_cmd(&[ISOLATED, &["-o", "../outside/o.csv"]].concat(), agent);
    cmd.current_dir(project).output().expect("spawn").into()
}

#[test]
fn a_program_outside_the_repository_given_as_a_relative_path_runs_in_worktrees() {
    let sb = Sandbox::new();
    let project = project_beside_outside(&sb, "a,x\n");
    sb.write("agent.sh", shell_agent("outside"));
    let r = batch_outside(&sb, &project, &["sh", "../agent.sh"]);
    assert_eq!(r.code, 0, "{r:?}");
    let seen = git(&project, &["show", "runner/o/1-a:seen.txt"]);
    assert!(seen.starts_with("outside\n"), "{seen}");
}

fn branches(dir: &std::path::Path) -> Vec<String> {
    git(dir, &["branch", "--format=%(refname:short)"])
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn clean_removes_worktrees_and_branches_of_a_team_whose_workspace_is_outside_the_repo() {
    let sb = Sandbox::new();
    let project = project_beside_outside(&sb, "a,x\nb,y\n");
    let worktrees = || git(&project, &["worktree", "list", "--porcelain"]);
    // `runner clean` with no argument finds the team through the repository's worktrees;
    // given the workspace, it finds the repository the workspace records.
    for clean in [
        &["clean", "--yes"][..],
        &["clean", "../outside/o.runner", "--yes"][..],
    ] {
        let r = batch_outside(&sb, &project, &["sh", "-c", "exit 1"]);
        assert_eq!(r.code, 1, "{r:?}");
        assert_eq!(
            worktrees().matches("worktree ").count(),
            3,
            "{}",
            worktrees()
        );
        let r = run_in(&sb, &project, clean);
        assert_eq!(r.code, 0, "{clean:?}: {r:?}");
        assert!(r.stdout.contains("Removed team o."), "{r:?}");
        assert_eq!(
            worktrees().matches("worktree ").count(),
            1,
            "{}",
            worktrees()
        );
        assert_eq!(branches(&project), ["main"], "{clean:?}");
        assert!(!sb.join("outside/o.runner").exists());
    }
    let r = run_in(&sb, &project, &["clean", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with("Nothing to clean: no team in ")
            && r.stdout
                .contains("nor a worktree or branch of a team in the repository"),
        "it says where it looked: {r:?}"
    );
}

#[test]
fn clean_keeps_branches_with_commits_never_merged_unless_forced() {
    let sb = repo();
    let r = batch(
        &sb,
        &[
            ("a", "EDIT a.txt=1"),
            ("b", "EDIT b.txt=2"),
            // Edits, then fails: the runner commits what it left on its branch.
            ("c", "EDIT c.txt=3 CHECK missing.txt"),
        ],
        &["--jobs", "3"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    git(
        sb.path(),
        &[
            "merge",
            "-q",
            "--no-ff",
            "--no-edit",
            "runner/workers-output/1-a",
        ],
    );
    let r = sb.run(&["clean", "workers-output.runner", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        branches(sb.path()),
        [
            "main",
            "runner/workers-output/2-b",
            "runner/workers-output/3-c"
        ],
        "the merged branch is deleted, the unmerged ones kept"
    );
    assert!(
        r.stdout
            .contains("Kept branches with commits not merged into main")
            && r.stdout
                .contains("git branch -D runner/workers-output/2-b runner/workers-output/3-c"),
        "{r:?}"
    );
    assert_eq!(
        git(sb.path(), &["show", "runner/workers-output/3-c:c.txt"]),
        "3\n",
        "the failed item's uncommitted edit is on its branch"
    );
    assert_eq!(
        worktree_list(&sb).matches("worktree ").count(),
        1,
        "{}",
        worktree_list(&sb)
    );
    assert!(!sb.join("workers-output.runner").exists());

    // --force deletes unmerged branches with their team.
    let r = batch(&sb, &[("d", "EDIT d.txt=4")], &["-o", "second.csv"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = sb.run(&["clean", "second.runner", "--yes", "--force"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!branches(sb.path()).contains(&"runner/second/1-d".to_owned()));
    assert!(!r.stdout.contains("Kept branches"), "{r:?}");
}

#[test]
fn clean_takes_a_csv_teams_name_or_output_and_cleans_the_branches_of_a_removed_workspace() {
    let sb = repo();
    // Both items leave commits of their own on their branches (nothing is merged).
    let r = batch(
        &sb,
        &[("a", "EDIT a.txt=1"), ("b", "EDIT b.txt=2")],
        &["-o", "out-g.csv"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let listed = sb.run(&["clean", "--yes", "--store", "S", "nosuch"]);
    assert_eq!(listed.code, 2, "{listed:?}");
    assert!(
        listed.stderr.contains("unknown team `nosuch`")
            && listed.stderr.contains("no team workspace at that path")
            && listed.stderr.contains("nor branches runner/nosuch/*"),
        "it says where it looked: {listed:?}"
    );
    // The name `clean` lists the team by is what it takes.
    let r = sb.run(&["clean", "out-g", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Removed team out-g."), "{r:?}");
    assert!(!sb.join("out-g.runner").exists());
    assert!(
        r.stdout.contains("runner clean out-g --force deletes them"),
        "{r:?}"
    );
    let kept = ["main", "runner/out-g/1-a", "runner/out-g/2-b"];
    assert_eq!(branches(sb.path()), kept);

    // With no team named, the branches left with no workspace are named, with the fix.
    let r = sb.run(&["clean", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("Nothing to clean"), "{r:?}");
    assert!(
        r.stdout.contains("by team out-g, whose workspace is gone")
            && r.stdout.contains("runner/out-g/1-a runner/out-g/2-b")
            && r.stdout.contains("runner clean out-g --force"),
        "{r:?}"
    );
    assert_eq!(branches(sb.path()), kept, "only named, not deleted");

    // The old workspace path, without --force: listed as kept, and kept.
    let r = sb.run(&["clean", "out-g.runner", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("Team out-g: workspace gone")
            && r.stdout
                .contains("runner/out-g/1-a (commits not merged into main: kept)"),
        "{r:?}"
    );
    assert_eq!(branches(sb.path()), kept);
    // With --force they go.
    let r = sb.run(&["clean", "out-g.runner", "--yes", "--force"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("Deleted the branches of team out-g: runner/out-g/1-a runner/out-g/2-b."),
        "{r:?}"
    );
    assert_eq!(branches(sb.path()), ["main"]);
    let r = sb.run(&["clean", "--yes"]);
    assert!(r.stdout.starts_with("Nothing to clean"), "{r:?}");

    // The output CSV's path names its team too, and the team name cleans a gone one.
    let r = batch(&sb, &[("c", "EDIT c.txt=3")], &["-o", "out-h.csv"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = sb.run(&["clean", "out-h.csv", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Removed team out-h."), "{r:?}");
    assert!(!sb.join("out-h.runner").exists());
    let r = sb.run(&["clean", "out-h", "--yes", "--force"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(branches(sb.path()), ["main"]);
}

/// Issue 50: `runner clean --yes` removed the worktree of a failed item that the user was
/// inspecting, edits and all. A worktree holding changes no commit has is kept, with its
/// team's workspace, and named with its changed and new files; `--yes` only answers the
/// question; `--force` drops it.
#[test]
fn clean_never_removes_a_worktree_someone_edited_unless_forced() {
    let sb = repo();
    let r = batch(&sb, &[("a", "CHECK nope.txt")], &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let ws = sb.join("workers-output.runner");
    let tree = ws.join("worktrees/1-a");
    assert!(tree.is_dir(), "a failed item keeps its worktree: {r:?}");
    // Someone inspects the failure and starts fixing it there.
    std::fs::write(tree.join("shared.txt"), "my fix\n").expect("edit");
    std::fs::write(tree.join("notes.md"), "what I found\n").expect("new file");

    let r = sb.run(&["clean", "workers-output.runner", "--yes"]);
    assert_eq!(r.code, 1, "kept something: {r:?}");
    assert!(
        r.stdout.contains("holds changes no commit has")
            && r.stdout.contains(" M shared.txt")
            && r.stdout.contains("?? notes.md")
            && r.stdout.contains("Kept team workers-output"),
        "{r:?}"
    );
    assert_eq!(
        sb.read("workers-output.runner/worktrees/1-a/shared.txt"),
        "my fix\n"
    );
    assert!(tree.join("notes.md").is_file());
    assert!(worktree_list(&sb).contains("worktrees/1-a"));
    assert!(ws.join("journal.jsonl").is_file(), "the workspace stays");

    let r = sb.run(&["clean", "workers-output.runner", "--yes", "--force"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!ws.exists(), "{r:?}");
    assert!(!worktree_list(&sb).contains("worktrees/1-a"));
}
