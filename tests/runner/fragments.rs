//! Task fragments (issue 33): `runner fragments`, `runner apply NAME k=v` (steps appended to
//! the inbox linked by `@after`, each marked with its fragment, round and step), `runner
//! reset NAME [STEP]` (the latest round reopened in place, with what follows the step), and
//! `runner clean --completed` keeping the prerequisite closure of what is open.

use crate::harness::{Run, Sandbox, agent, git};
use crate::store::{start_paused, start_until_waiting};

/// The README's example, with the fake agent's `MODE=` in each subject.
const RELEASE: &str = r#"description = "Cut a release"
[[steps]]
key = "notes"
subject = "Write release notes for {version} MODE=success"
[[steps]]
key = "tag"
subject = "Tag {version} after checking {branch} MODE=success"
description = """
Check CI on {branch} first.
Then push the tag."""
after = ["notes"]
"#;

/// `runner ARGS --store S`.
fn run(sb: &Sandbox, args: &[&str]) -> Run {
    let mut a = args.to_vec();
    a.extend(["--store", "S"]);
    sb.run(&a)
}

/// `runner resolve --store S --format plain EXTRA -- python3 fake_agent.py`.
fn resolve(sb: &Sandbox, extra: &[&str]) -> Run {
    let fake = agent("fake_agent.py");
    let mut a = vec!["resolve", "--store", "S", "--format", "plain"];
    a.extend_from_slice(extra);
    a.extend(["--", "python3", &fake]);
    sb.run(&a)
}

/// The text of every todo file of store S, concatenated.
fn store_text(sb: &Sandbox) -> String {
    let mut names: Vec<String> = std::fs::read_dir(sb.join("S"))
        .expect("store")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("todo") && n.ends_with(".md"))
        .collect();
    names.sort();
    names.iter().map(|n| sb.read(&format!("S/{n}"))).collect()
}

#[test]
fn apply_appends_the_steps_linked_by_after_as_the_next_round() {
    let sb = Sandbox::new();
    sb.write("S/fragments/release.toml", RELEASE);
    assert_eq!(run(&sb, &["add", "mine"]).code, 0);
    assert_eq!(run(&sb, &["add", "--idea", "an idea @after:1"]).code, 0);

    let r = run(&sb, &["fragments"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(
            "release  Cut a release\n  steps: notes, tag (after notes)\n  variables: version, branch\n"
        ),
        "{r:?}"
    );

    let r = run(&sb, &["apply", "release", "version=1.2", "branch=main"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("Applied fragment release, round 1, to "),
        "{r:?}"
    );
    let inbox = sb.read("S/todo.md");
    assert!(
        inbox.contains(
            "\n- [ ] Write release notes for 1.2 MODE=success @fragment:release#1/notes\n\
             - [ ] Tag 1.2 after checking main MODE=success @after:2 @fragment:release#1/tag(notes)\n  \
             Check CI on main first.\n  Then push the tag.\n\n## 💡 Ideas\n- [ ] an idea @after:1\n"
        ),
        "{inbox}"
    );

    // A second application is round 2, linked among its own items.
    let r = run(&sb, &["apply", "release", "branch=dev", "version=2.0"]);
    assert_eq!(r.code, 0, "{r:?}");
    let inbox = sb.read("S/todo.md");
    assert!(
        inbox.contains(
            "- [ ] Write release notes for 2.0 MODE=success @fragment:release#2/notes\n\
             - [ ] Tag 2.0 after checking dev MODE=success @after:4 @fragment:release#2/tag(notes)\n"
        ),
        "{inbox}"
    );

    let r = run(&sb, &["list"]);
    assert!(
        r.stdout.contains(
            "  3. [ ] Tag 1.2 after checking main MODE=success  @after:2  @fragment:release#1/tag  (id k-"
        ),
        "the mark shows beside the title, not in it: {r:?}"
    );
    let r = run(&sb, &["list", "--format", "json"]);
    let listing: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(
        listing["items"][2]["title"],
        "Tag 1.2 after checking main MODE=success"
    );
    assert_eq!(
        listing["items"][2]["fragment"],
        serde_json::json!({"name": "release", "round": 1, "step": "tag", "after": ["notes"]})
    );
    assert_eq!(listing["items"][0]["fragment"], serde_json::Value::Null);

    let r = run(&sb, &["fragments", "release"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("Cut a release\nvariables: version, branch\nlatest round: 2\nsteps:\n  1. notes: Write release notes for {version} MODE=success\n  2. tag (after notes): Tag {version} after checking {branch} MODE=success\n       Check CI on {branch} first.\n"),
        "{r:?}"
    );
}

/// Bad input is exit 2 naming what is wrong, and writes nothing.
#[test]
fn apply_refuses_bad_variables_and_bad_fragments_and_writes_nothing() {
    let sb = Sandbox::new();
    sb.write("S/fragments/release.toml", RELEASE);
    let broken = [
        ("syntax", "[[steps]\nkey = 'a'\n", "syntax.toml:1:"),
        (
            "unknown",
            "[[steps]]\nkey = 'a'\nsubject = 's'\nafter = ['b']\n",
            "unknown.toml:4: step `a`: `after` names `b`, which is no step of this fragment",
        ),
        (
            "dup",
            "[[steps]]\nkey = 'a'\nsubject = 's'\n[[steps]]\nkey = 'a'\nsubject = 't'\n",
            "dup.toml:5: step key `a` is used twice (first on line 2)",
        ),
        (
            "cycle",
            "[[steps]]\nkey = 'a'\nsubject = 's'\nafter = ['b']\n[[steps]]\nkey = 'b'\nsubject = 't'\nafter = ['a']\n",
            "cycle.toml:2: the steps `a`, `b` wait for each other",
        ),
        (
            "sneaky",
            "[[steps]]\nkey = 'a'\nsubject = 's'\ndescription = '- [ ] a second item'\n",
            "sneaky.toml:2: step `a`: the appended item would not read back",
        ),
    ];
    for (name, text, _) in &broken {
        sb.write(&format!("S/fragments/{name}.toml"), text);
    }
    assert_eq!(run(&sb, &["add", "mine"]).code, 0);
    let before = sb.tree();
    let refused = |args: &[&str], expected: &str| {
        let r = run(&sb, args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(expected), "{args:?}: {r:?}");
        assert_eq!(sb.tree(), before, "{args:?} wrote something");
    };
    refused(
        &["apply", "release", "version=1.2"],
        "fragments/release.toml:6: `{branch}` has no value; give it: `runner apply release version=… branch=…`",
    );
    refused(
        &[
            "apply",
            "release",
            "version=1.2",
            "branch=main",
            "verison=1.3",
        ],
        "unknown variable `verison`; did you mean `version`?; fragment release (",
    );
    refused(
        &["apply", "release", "version"],
        "`version` must be NAME=VALUE",
    );
    refused(
        &["apply", "release", "version=1", "version=2", "branch=x"],
        "`version` is given twice",
    );
    refused(
        &["apply", "relase", "version=1"],
        "unknown fragment `relase`; did you mean `release`?",
    );
    refused(&["apply", "../x"], "fragment name `../x` must be");
    for (name, _, expected) in &broken {
        refused(&["apply", name], expected);
    }
    // The list names what is wrong with each, and still lists the good one.
    let r = run(&sb, &["fragments"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("release  Cut a release\n"), "{r:?}");
    assert!(
        r.stderr
            .contains("cycle.toml:2: the steps `a`, `b` wait for each other"),
        "{r:?}"
    );
}

/// The latest round's step and what follows it reopen where they are: unticked in their
/// batch files (and run again by `runner run`, even with the team's journal still there),
/// reopened in the inbox; nothing is copied and nothing else changes.
#[test]
fn reset_reopens_a_step_and_its_dependents_in_the_latest_round_where_they_are() {
    let sb = Sandbox::new();
    sb.write(
        "S/fragments/release.toml",
        r#"[[steps]]
key = "notes"
subject = "Notes {v} MODE=success"
[[steps]]
key = "tag"
subject = "Tag {v} MODE=success"
after = ["notes"]
[[steps]]
key = "announce"
subject = "Announce {v} MODE=success"
after = ["tag"]
[[steps]]
key = "site"
subject = "Site {v} MODE=success"
"#,
    );
    assert_eq!(run(&sb, &["apply", "release", "v=1"]).code, 0);
    // Notes and site first; then tag and announce, once notes is done (so `resolve` drops
    // tag's `@after`: only its mark says it follows notes), their team kept.
    assert_eq!(resolve(&sb, &["--yes", "--select", "1,4"]).code, 0);
    let r = resolve(&sb, &["--yes", "--keep-team"]);
    assert_eq!(r.code, 0, "{r:?}");
    let batch1 = sb.read("S/todo-1.md");
    let batch2 = sb.read("S/todo-2.md");
    assert!(
        batch2.contains("- [x] Tag 1 MODE=success @fragment:release#1/tag(notes)\n"),
        "{batch2}"
    );

    let r = run(&sb, &["reset", "release", "tag"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("Round 1 of fragment release: step tag and what follows it.\n")
            && r.stdout
                .contains("todo-2.md item 1 (release#1/tag): [x] → [ ] Tag 1 MODE=success\n")
            && r.stdout.contains(
                "todo-2.md item 2 (release#1/announce): [x] → [ ] Announce 1 MODE=success\n"
            )
            && r.stdout.contains(&format!(
                "Reopened 2 item(s); run them again, in this order: runner run S/todo-2.md --format plain --keep-team -- python3 {}.",
                agent("fake_agent.py")
            )),
        "{r:?}"
    );
    assert_eq!(sb.read("S/todo-1.md"), batch1, "notes and site stay done");
    let reopened = sb.read("S/todo-2.md");
    assert!(reopened.contains("status: partial\n"), "{reopened}");
    assert!(
        reopened.contains(
            "- [ ] Tag 1 MODE=success @fragment:release#1/tag(notes)\n  > runner: reopened by runner reset (release#1/tag); `runner run todo-2.md` runs it again\n\
             - [ ] Announce 1 MODE=success @after:1 @fragment:release#1/announce(tag)\n  > runner: reopened by runner reset (release#1/announce)"
        ),
        "{reopened}"
    );

    // `runner run` reruns them, though the kept journal has them completed.
    let fake = agent("fake_agent.py");
    let r = sb.run(&[
        "run",
        "S/todo-2.md",
        "--format",
        "plain",
        "--",
        "python3",
        &fake,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("todo-task-1 (attempt 2)")
            && r.stdout.contains("todo-task-2 (attempt 2)"),
        "{r:?}"
    );
    let rerun = sb.read("S/todo-2.md");
    assert_eq!(rerun.matches("- [x]").count(), 2, "{rerun}");
    assert!(!rerun.contains("reopened"), "{rerun}");
    assert_eq!(
        store_text(&sb).matches("@fragment:release#1/tag").count(),
        1,
        "never a second copy"
    );

    // Round 2, in the inbox: `reset release` reopens every step of it, and only of it.
    assert_eq!(run(&sb, &["apply", "release", "v=2"]).code, 0);
    let inbox = sb.read("S/todo.md");
    let ticked = inbox
        .replace("- [ ] Notes 2", "- [x] Notes 2")
        .replace("- [ ] Announce 2", "- [~] Announce 2");
    sb.write("S/todo.md", &ticked);
    let batches = (sb.read("S/todo-1.md"), sb.read("S/todo-2.md"));
    let r = run(&sb, &["reset", "release"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("Round 2 of fragment release: every step.\n")
            && r.stdout
                .contains("todo.md item 1 (release#2/notes): [x] → [ ] Notes 2")
            && r.stdout
                .contains("todo.md item 3 (release#2/announce): [~] → [ ] Announce 2")
            && r.stdout
                .contains("todo.md item 2 (release#2/tag): already open"),
        "{r:?}"
    );
    let after = sb.read("S/todo.md");
    let strip_date = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with("Last updated"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip_date(&after), strip_date(&inbox), "back as applied");
    assert_eq!((sb.read("S/todo-1.md"), sb.read("S/todo-2.md")), batches);

    // Refusals: exit 2, nothing written.
    sb.write(
        "S/fragments/other.toml",
        "[[steps]]\nkey = 'a'\nsubject = 'do {it}'\n",
    );
    let before = sb.tree();
    for (args, expected) in [
        (
            &["reset", "release", "tga"][..],
            "unknown step `tga`; round 2 of fragment release has the steps announce, notes, site, tag",
        ),
        (
            &["reset", "other"],
            "fragment other has no applied round in ",
        ),
        (&["reset", "nosuch"], "unknown fragment `nosuch`"),
    ] {
        let r = run(&sb, args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(expected), "{args:?}: {r:?}");
        assert_eq!(sb.tree(), before, "{args:?}");
    }
}

/// `clean --completed` keeps every finished batch an open item still depends on, through
/// batch items and fragment steps (whose `@after` resolve dropped), and says why.
/// Issue 56: inside a git repository `apply` and `reset` use the project's store, as
/// `runner fragments` and `list` do (the README's examples give no `--project`); after
/// `reset`, the command that runs the batch again keeps the agent command of the run that
/// resolved it, also once its team completed and was archived.
#[test]
fn apply_and_reset_in_a_repository_use_its_store_and_keep_the_agent_command() {
    let sb = Sandbox::new();
    git(sb.path(), &["init", "-q"]);
    sb.write(".agent-tasks/fragments/release.toml", RELEASE);
    let r = sb.run(&["apply", "release", "version=1.2", "branch=main"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains(".agent-tasks/todo.md"), "{r:?}");
    let fake = agent("fake_agent.py");
    let r = sb.run(&[
        "resolve",
        "--project",
        "--yes",
        "--format",
        "plain",
        "--",
        "python3",
        &fake,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        sb.join(".agent-tasks/todo-1.archive.jsonl").is_file(),
        "the team completed and was archived"
    );
    let r = sb.run(&["reset", "release", "notes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let again = format!("runner run .agent-tasks/todo-1.md --format plain -- python3 {fake}.");
    assert!(r.stdout.contains(&again), "wanted `{again}`: {r:?}");
    // Following the hint runs both items again with the fake agent.
    let r = sb.run(&[
        "run",
        ".agent-tasks/todo-1.md",
        "--format",
        "plain",
        "--",
        "python3",
        &fake,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        sb.read(".agent-tasks/todo-1.md").matches("- [x]").count(),
        2
    );
}

#[test]
fn clean_completed_keeps_the_prerequisite_closure_of_what_is_open() {
    let sb = Sandbox::new();
    sb.write(
        "S/fragments/chain.toml",
        "[[steps]]\nkey = 'build'\nsubject = 'Build {v} MODE=success'\n[[steps]]\nkey = 'ship'\nsubject = 'Ship {v} MODE={ship}'\nafter = ['build']\n",
    );
    // Round 1: build in todo-1, ship in todo-2, both done.
    assert_eq!(run(&sb, &["apply", "chain", "v=1", "ship=success"]).code, 0);
    assert_eq!(resolve(&sb, &["--yes", "--select", "1"]).code, 0);
    assert_eq!(resolve(&sb, &["--yes"]).code, 0);
    // Round 2: build done in todo-3, ship failed (open) in todo-4.
    assert_eq!(run(&sb, &["apply", "chain", "v=2", "ship=failed"]).code, 0);
    assert_eq!(resolve(&sb, &["--yes", "--select", "1"]).code, 0);
    assert_eq!(resolve(&sb, &["--yes"]).code, 1);
    // Unrelated and done: todo-5.
    assert_eq!(run(&sb, &["add", "lone MODE=success"]).code, 0);
    assert_eq!(resolve(&sb, &["--yes"]).code, 0);
    // An open inbox item waits on round 1's ship.
    assert_eq!(run(&sb, &["add", "announce @after:todo-2#1"]).code, 0);

    let r = run(&sb, &["clean", "--completed", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    for line in [
        "Kept todo-1.md: todo-2.md: item 1 comes after step chain#1/build (item 1 here)\n",
        "Kept todo-2.md: todo.md: item 1 waits on todo-2#1\n",
        "Kept todo-3.md: todo-4.md: item 1 comes after step chain#2/build (item 1 here)\n",
        "Finished batch todo-5.md: todo-5.md, todo-5.workers-output.csv, todo-5.archive.jsonl\n",
        "Removed 3 file(s).\n",
    ] {
        assert!(r.stdout.contains(line), "{line}: {r:?}");
    }
    for f in ["todo-1.md", "todo-2.md", "todo-3.md", "todo-4.md"] {
        assert!(sb.join(&format!("S/{f}")).is_file(), "{f}");
    }
    assert!(!sb.join("S/todo-5.md").exists());
    assert!(!sb.join("S/todo-5.archive.jsonl").exists());
}

/// Applying takes the store lock: an `add` and a second `apply` during its edit wait, and
/// every item lands once, the second application as round 2.
#[test]
fn applies_and_adds_at_the_same_time_keep_every_item_and_number_rounds_once() {
    let sb = Sandbox::new();
    sb.write("S/fragments/release.toml", RELEASE);
    assert_eq!(run(&sb, &["add", "mine"]).code, 0);
    let first = start_paused(
        sb.cmd(&["apply", "release", "version=1", "branch=a", "--store", "S"]),
        "apply-edit",
    );
    let (second, seen2) =
        start_until_waiting(sb.cmd(&["apply", "release", "version=2", "branch=b", "--store", "S"]));
    let (adding, seen3) = start_until_waiting(sb.cmd(&["add", "--store", "S", "new one"]));
    first.resume();
    for r in [
        first.finish(Vec::new()),
        second.finish(seen2),
        adding.finish(seen3),
    ] {
        assert_eq!(r.code, 0, "{r:?}");
    }
    let inbox = sb.read("S/todo.md");
    for line in [
        "- [ ] Write release notes for 1 MODE=success @fragment:release#1/notes\n",
        "- [ ] Write release notes for 2 MODE=success @fragment:release#2/notes\n",
        "- [ ] new one @context:",
    ] {
        assert_eq!(inbox.matches(line).count(), 1, "{line}: {inbox}");
    }
    assert_eq!(inbox.matches("@fragment:").count(), 4, "{inbox}");
}
