//! The default path under the sandbox (issue 49): the layouts a user meets first — the
//! README's example, a CSV batch whose output lies in its own folder, `runner resolve
//! --project` in a git repository — keep the team workspace out of the folder teammates write
//! (in the user's state folder), so `--sandbox auto` confines them; every command finds the
//! team from the same arguments as before; a workspace an earlier version left beside its
//! output is resumed there; an explicit workspace where teammates write is refused.
//!
//! Layout: `<sandbox>/proj` is the run's working directory, `<sandbox>/home` is HOME (so the
//! state folder `home/.local/state/teammate-runner` lies outside what teammates write).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::harness::{Run, Sandbox, agent, by_id, git, landlock_or_skip};

/// A sandbox with an empty `proj/` and `home/`.
fn layout() -> Sandbox {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("proj")).expect("mkdir proj");
    std::fs::create_dir_all(sb.join("home")).expect("mkdir home");
    sb
}

/// `runner ARGS` from `proj/`, HOME `home/`, no XDG_STATE_HOME.
fn cmd(sb: &Sandbox, args: &[&str]) -> Command {
    let mut c = sb.cmd(args);
    c.current_dir(sb.join("proj")).env_remove("XDG_STATE_HOME");
    c
}

fn run(sb: &Sandbox, args: &[&str]) -> Run {
    let r: Run = cmd(sb, args).output().expect("spawn runner").into();
    eprintln!("runner {args:?}: {r:?}");
    r
}

/// `runner batch --input in.csv --instruction instr.md -o OUTPUT --id-column id --format
/// plain EXTRA -- python3 <fake agent>` from `proj/`.
fn batch(sb: &Sandbox, output: &str, extra: &[&str]) -> Run {
    let fake = agent("fake_agent.py");
    let mut args = vec![
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "-o",
        output,
        "--id-column",
        "id",
        "--format",
        "plain",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "python3", &fake]);
    run(sb, &args)
}

/// The team workspaces in the state folder.
fn state_workspaces(sb: &Sandbox) -> Vec<PathBuf> {
    let teams = sb.join("home/.local/state/teammate-runner/teams");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&teams)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// The first line a run prints (the team's start).
fn first_line(r: &Run) -> &str {
    r.stdout
        .lines()
        .find(|l| l.starts_with("Starting team"))
        .unwrap_or("")
}

/// The bundled example (`examples/audit`) copied into `proj/`, with the five files it audits.
fn bundled_example(sb: &Sandbox) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in [
        "BATCH.md",
        "workers-input.csv",
        "audit_agent.py",
        "verdict_agent.py",
    ] {
        let text = std::fs::read(repo.join("examples/audit").join(f)).expect("example file");
        sb.write(&format!("proj/examples/audit/{f}"), text);
    }
    for f in [
        "README.md",
        "docs/runners.md",
        "templates/teammate.md",
        "tests/fixtures/cli/README.md",
    ] {
        sb.write(&format!("proj/{f}"), "# A title\n\nSome text.\n");
    }
}

#[test]
fn the_readme_example_starts_confined_and_status_show_and_clean_find_its_team() {
    if !landlock_or_skip("the README example") {
        return;
    }
    let sb = layout();
    bundled_example(&sb);
    let r = run(
        &sb,
        &["batch", "examples/audit/BATCH.md", "--format", "plain"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(first_line(&r).ends_with("sandbox landlock"), "{r:?}");
    let rows = by_id(&sb.join("proj/examples/audit/workers-output.csv"), "path");
    assert_eq!(rows.len(), 5);
    assert!(
        rows.values().all(|r| r["status"] == "completed"),
        "{rows:?}"
    );
    // Nothing of the runner's where teammates write: only the output was added.
    assert!(
        !sb.join("proj/examples/audit/workers-output.runner")
            .exists()
    );
    let ws = state_workspaces(&sb);
    assert_eq!(ws.len(), 1, "{ws:?}");
    assert!(ws[0].join("journal.jsonl").is_file());

    // Found from the same arguments as before: the output, BATCH.md, nothing (here).
    for args in [
        &["status", "examples/audit/workers-output.csv"][..],
        &["status", "examples/audit/BATCH.md"],
        &["status"],
    ] {
        let s = run(&sb, args);
        assert_eq!(s.code, 0, "{args:?}: {s:?}");
        assert!(
            s.stdout.contains(&ws[0].display().to_string()) && s.stdout.contains("5 completed"),
            "{args:?}: {s:?}"
        );
    }
    let s = run(&sb, &["status", "--list"]);
    assert!(s.stdout.contains("workers-output"), "{s:?}");
    let s = run(&sb, &["show", "README.md", "examples/audit/BATCH.md"]);
    assert_eq!(s.code, 0, "{s:?}");
    assert!(s.stdout.contains("completed"), "{s:?}");

    // `clean` from the project finds it too, and archives it beside the output.
    let c = run(&sb, &["clean", "--yes"]);
    assert_eq!(c.code, 0, "{c:?}");
    assert!(state_workspaces(&sb).is_empty(), "{c:?}");
    assert!(
        sb.join("proj/examples/audit/workers-output.archive.jsonl")
            .is_file(),
        "{c:?}"
    );
    let s = run(&sb, &["status", "examples/audit/workers-output.csv"]);
    assert_eq!(s.code, 0, "the archive answers: {s:?}");
}

/// A teammate of a CSV batch whose output lies in the working directory cannot forge its
/// sibling's report or write the journal: before issue 49 `auto` ran this layout unconfined.
#[test]
fn a_csv_batch_with_its_output_in_the_working_directory_is_confined_and_a_forger_fails() {
    if !landlock_or_skip("output in the working directory") {
        return;
    }
    let sb = layout();
    sb.write("proj/in.csv", "id,mode\nvictim,wait_attack\nforger,forge\n");
    sb.write("proj/instr.md", "Do item {id}. MODE={mode}\n");
    let r = batch(&sb, "out.csv", &["--keep-logs"]);
    assert!(first_line(&r).ends_with("sandbox landlock"), "{r:?}");
    assert_eq!(r.code, 1, "the victim did not complete: {r:?}");
    let ws = state_workspaces(&sb);
    assert_eq!(ws.len(), 1, "{ws:?}");
    let attack: Value = serde_json::from_str(
        &std::fs::read_to_string(ws[0].join("teammates/2-forger/work/attack.json"))
            .expect("attack.json"),
    )
    .expect("json");
    assert_eq!(attack["report 1-victim"], "EACCES", "{attack}");
    let rows = by_id(&sb.join("proj/out.csv"), "id");
    assert_eq!(rows["victim"]["status"], "failed", "{rows:?}");
    assert_ne!(rows["victim"]["summary"], "FORGED");
    assert_eq!(rows["forger"]["status"], "completed", "{rows:?}");
    assert!(!sb.join("proj/out.runner").exists());
}

/// `runner resolve --project` in a git repository: the store lies in the project, the team
/// workspace in the state folder, and the run is confined.
#[test]
fn resolve_project_in_a_git_repository_starts_confined_and_ticks_its_items() {
    if !landlock_or_skip("resolve --project") {
        return;
    }
    let sb = layout();
    git(&sb.join("proj"), &["init", "-q"]);
    let a = run(&sb, &["add", "--project", "MODE=success first"]);
    assert_eq!(a.code, 0, "{a:?}");
    let fake = agent("fake_agent.py");
    let r = run(
        &sb,
        &[
            "resolve",
            "--project",
            "--yes",
            "--format",
            "plain",
            "--",
            "python3",
            &fake,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(first_line(&r).ends_with("sandbox landlock"), "{r:?}");
    let root =
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").expect("/proc/self"))
            == 0;
    if root {
        // Issue 56: resolve checks its plan twice; the warning is said once.
        assert_eq!(
            r.stderr.matches("running as root").count(),
            1,
            "the root warning once: {r:?}"
        );
    }
    let batch = sb.read("proj/.agent-tasks/todo-1.md");
    assert!(batch.contains("[x]"), "ticked: {batch}");
    assert!(
        !sb.join("proj/.agent-tasks/teams").exists(),
        "no workspace in the project"
    );
}

/// A workspace an earlier version left beside its output is found and resumed there (the
/// run says why it is not confined, and how to change that); no second workspace is made.
#[test]
fn a_workspace_left_beside_its_output_by_an_earlier_version_is_resumed_there() {
    let sb = layout();
    sb.write("proj/in.csv", "id,mode\na,success\nb,flaky\n");
    sb.write("proj/instr.md", "Do item {id}. MODE={mode}\n");
    let beside = sb.join("proj/out.runner");
    // Where an earlier version put it.
    let ws = beside.display().to_string();
    let r = batch(&sb, "out.csv", &["--workspace", &ws, "--sandbox", "none"]);
    assert_eq!(r.code, 1, "b fails its first attempt: {r:?}");
    assert!(beside.join("journal.jsonl").is_file());

    let r = batch(&sb, "out.csv", &["--only", "failed"]);
    assert_eq!(r.code, 0, "{r:?}");
    let line = first_line(&r);
    assert!(
        line.contains(&format!("workspace {}", beside.display()))
            && line.contains("sandbox none")
            && line.contains("an earlier run of this batch keeps it there"),
        "{r:?}"
    );
    assert!(state_workspaces(&sb).is_empty(), "no second workspace");
    let rows = by_id(&sb.join("proj/out.csv"), "id");
    assert_eq!(rows["b"]["status"], "completed", "{rows:?}");
    assert_eq!(rows["b"]["attempts"], "2", "attempts go on: {rows:?}");
}

/// `--workspace` where teammates write is refused under `--sandbox landlock` (exit 2, nothing
/// written), and so is a workspace under a device folder every teammate may write (the red
/// team's `/dev/shm`): the layout check counts those folders as teammates'.
#[test]
fn a_workspace_teammates_could_write_is_refused_under_landlock_device_folders_included() {
    if !landlock_or_skip("--workspace refused") {
        return;
    }
    let sb = layout();
    sb.write("proj/in.csv", "id\na\n");
    sb.write("proj/instr.md", "Do item {id}. MODE=success\n");
    let shm = tempfile::Builder::new()
        .prefix("runner-test-shm-")
        .tempdir_in("/dev/shm");
    let mut places = vec![sb.join("proj/ws").display().to_string()];
    if let Ok(d) = &shm {
        places.push(d.path().join("ws").display().to_string());
    }
    for place in places {
        let before = sb.tree();
        let r = batch(
            &sb,
            "out.csv",
            &["--sandbox", "landlock", "--workspace", &place],
        );
        assert_eq!(r.code, 2, "{place}: {r:?}");
        assert!(
            r.stderr.contains("--sandbox landlock") && r.stderr.contains("--workspace"),
            "{place}: {r:?}"
        );
        assert_eq!(sb.tree(), before, "nothing written");
        assert!(!Path::new(&place).exists(), "{place}");
    }
    // With an output under /dev/shm, the workspace goes to the state folder, confined.
    if let Ok(d) = &shm {
        let out = d.path().join("out.csv").display().to_string();
        let r = batch(&sb, &out, &[]);
        assert_eq!(r.code, 0, "{r:?}");
        assert!(first_line(&r).ends_with("sandbox landlock"), "{r:?}");
        assert!(!d.path().join("out.runner").exists());
        assert_eq!(state_workspaces(&sb).len(), 1);
    }
}

/// Found by a new user: `runner clean /some/folder --yes` removed any folder named by an
/// absolute path (a store team's name joined to the store is the path itself), and
/// `--workspace` took over a folder of the user's, which `clean` then removed whole. Neither
/// happens: clean names only team workspaces, and `--workspace` wants a new or empty
/// folder, or a team workspace.
#[test]
fn clean_and_workspace_never_take_a_folder_of_the_users() {
    let sb = layout();
    sb.write("proj/in.csv", "id,mode\na,success\n");
    sb.write("proj/instr.md", "Do item {id}. MODE={mode}\n");
    sb.write("mine/notes.txt", "precious\n");
    let mine = sb.join("mine").display().to_string();
    let r = run(&sb, &["clean", &mine, "--yes"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(sb.read("mine/notes.txt"), "precious\n");

    let before = sb.tree();
    let r = batch(&sb, "out.csv", &["--workspace", &mine]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("--workspace must name a new or empty folder"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written");

    // A new folder is fine, and `status` finds it from BATCH.md's `workspace:` key.
    let ws = sb.join("ws").display().to_string();
    sb.write(
        "proj/BATCH.md",
        format!(
            "---\ninput: in.csv\noutput: out.csv\nid_column: id\nworkspace: {ws}\nrunner: exec\ncommand: [python3, {}]\n---\nDo item {{id}}. MODE={{mode}}\n",
            agent("fake_agent.py")
        ),
    );
    let r = run(&sb, &["batch", "BATCH.md", "--format", "plain"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(sb.join("ws/journal.jsonl").is_file(), "{r:?}");
    let s = run(&sb, &["status", "BATCH.md"]);
    assert!(s.stdout.contains(&format!("Workspace: {ws}")), "{s:?}");
}

/// Issue 56 (from issue 49's trial): a batch run from `proj/` whose output lies outside it
/// keeps its workspace beside the output (DESIGN §6b: outside the teammates' tree), here two
/// folders below where the user then stands; bare `runner status` and `runner clean` from
/// there find it (they look three folders down).
#[test]
fn bare_status_and_clean_find_a_workspace_two_folders_down() {
    let sb = layout();
    sb.write("proj/in.csv", "id,mode\na,success\n");
    sb.write("proj/instr.md", "Do item {id}. MODE={mode}\n");
    let r = batch(&sb, "../results/2026/out.csv", &["--sandbox", "none"]);
    assert_eq!(r.code, 0, "{r:?}");
    let ws = sb.join("results/2026/out.runner");
    assert!(ws.join("team.json").is_file(), "beside its output");
    let above = |args: &[&str]| -> Run {
        let mut c = sb.cmd(args);
        c.current_dir(sb.path()).env_remove("XDG_STATE_HOME");
        c.output().expect("spawn runner").into()
    };
    let status = above(&["status"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(status.stdout.contains("1 completed"), "{status:?}");
    let clean = above(&["clean", "--yes"]);
    assert_eq!(clean.code, 0, "{clean:?}");
    assert!(!ws.exists(), "cleaned: {clean:?}");
}

/// `-o new/deeper/` (a folder not there yet) with the workspace in the state folder: the
/// folder is made when the output is written, not found missing once every item ran.
#[test]
fn an_output_folder_not_there_yet_is_made_when_the_workspace_is_elsewhere() {
    let sb = layout();
    sb.write("proj/in.csv", "id,mode\nr01,success\nr02,success\n");
    sb.write("proj/instr.md", "Do {id}. MODE={mode}\n");
    let r = batch(&sb, "new/deeper/", &["--sandbox", "none"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stderr.contains("cannot create"), "{r:?}");
    let out = sb.join("proj/new/deeper/workers-output.csv");
    assert_eq!(crate::harness::csv_rows(&out).len(), 2, "{r:?}");
    assert_eq!(state_workspaces(&sb).len(), 1, "{r:?}");
}
