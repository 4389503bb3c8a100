//! The todo workflow: add, list, resolve, run todo-N.md (issue: todo inbox).

use crate::harness::{Sandbox, agent, by_id};

fn fake() -> String {
    agent("fake_agent.py")
}

/// `runner add --store S ...` in the sandbox.
fn add(sb: &Sandbox, args: &[&str]) -> crate::harness::Run {
    let mut a = vec!["add", "--store", "S"];
    a.extend_from_slice(args);
    sb.run(&a)
}

/// `runner resolve --store S --format plain EXTRA -- <fake agent>`.
pub(crate) fn resolve(sb: &Sandbox, extra: &[&str]) -> crate::harness::Run {
    let f = fake();
    let mut a = vec!["resolve", "--store", "S", "--format", "plain"];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--", "python3", &f]);
    sb.run(&a)
}

/// `runner run BATCH --format plain EXTRA -- <fake agent>`.
fn run_batch(sb: &Sandbox, batch: &str, extra: &[&str]) -> crate::harness::Run {
    let f = fake();
    let mut a = vec!["run", batch, "--format", "plain"];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--", "python3", &f]);
    sb.run(&a)
}

fn checkpoints(sb: &Sandbox) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(sb.join("S"))
        .expect("store")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cp-"))
        .collect();
    v.sort();
    v
}

#[test]
fn add_writes_a_checkpoint_and_pins_it_on_the_item() {
    let sb = Sandbox::new();
    sb.write(
        "body.md",
        "## Current task\nauth module\n\n## Next steps\n1. error branch\n",
    );
    let r = add(
        &sb,
        &[
            "Finish the auth module\n3 cases written, error branch left",
            "--checkpoint",
            "body.md",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let r = add(&sb, &["--idea", "Rewrite in Zig"]);
    assert_eq!(r.code, 0, "{r:?}");
    let cps = checkpoints(&sb);
    assert_eq!(cps.len(), 1, "an idea gets no checkpoint");
    let cp = sb.read(&format!("S/{}", cps[0]));
    assert!(cp.starts_with("---\ntype: checkpoint\ncreated: \""), "{cp}");
    assert!(
        cp.contains("auth module") && cp.contains("1. error branch"),
        "{cp}"
    );
    let inbox = sb.read("S/todo.md");
    assert!(
        inbox.contains(&format!(
            "- [ ] Finish the auth module @context:{}\n  3 cases written, error branch left\n",
            cps[0]
        )),
        "{inbox}"
    );
    assert!(
        inbox.contains("## 💡 Ideas\n- [ ] Rewrite in Zig\n"),
        "{inbox}"
    );
    // Without a body the checkpoint still has the five sections.
    add(&sb, &["Second"]);
    let cps = checkpoints(&sb);
    assert_eq!(
        cps.len(),
        2,
        "two adds in the same second get distinct names"
    );
    let second = sb.read(&format!(
        "S/{}",
        cps.iter()
            .find(|c| !inbox.contains(c.as_str()))
            .expect("new")
    ));
    for section in [
        "## Current task",
        "## Progress",
        "## Key decisions",
        "## Next steps",
        "## Files being edited",
    ] {
        assert!(second.contains(section), "{section} missing in {second}");
    }
}

#[test]
fn list_writes_nothing_but_a_missing_template() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.join("S")).expect("mkdir S");
    let r = sb.run(&["list", "--store", "S"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(sb.join("S/todo.md").is_file());
    add(&sb, &["One thing"]);
    let before = sb.tree();
    let r = sb.run(&["list", "--store", "S"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("1. [ ] One thing  @context:cp-"), "{r:?}");
    assert_eq!(sb.tree(), before);
}

#[test]
fn a_store_given_to_list_or_status_that_does_not_exist_is_refused_and_not_created() {
    let sb = Sandbox::new();
    let before = sb.tree();
    for cmd in ["list", "status"] {
        let r = sb.run(&[cmd, "--store", "x/stt"]);
        assert_eq!(r.code, 2, "{cmd}: {r:?}");
        assert!(
            r.stderr.contains("x/stt: no such store folder (--store)")
                && r.stderr.contains("runner add --store x/stt"),
            "{cmd}: it names the store and how to make one: {r:?}"
        );
        assert_eq!(sb.tree(), before, "{cmd}: nothing was created");
    }
    // `add` makes the store, and `list` then reads it.
    let r = sb.run(&["add", "--store", "x/stt", "One thing"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = sb.run(&["list", "--store", "x/stt"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("1. [ ] One thing"), "{r:?}");
}

#[test]
fn inside_a_repository_add_needs_a_store_choice_without_a_terminal() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.join(".git")).expect("git");
    let before = sb.tree();
    let r = sb.run(&["add", "x"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--project") && r.stderr.contains("--global"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before);
    let r = sb.run(&["add", "--project", "x"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(sb.join(".agent-tasks/todo.md").is_file());
    // list defaults to the project store.
    let r = sb.run(&["list"]);
    assert!(r.stdout.contains("1. [ ] x"), "{r:?}");
}

/// The issue's "done when": one item completes, one fails, one stays in the inbox.
#[test]
fn resolve_ticks_what_completed_and_keeps_what_failed() {
    let sb = Sandbox::new();
    add(&sb, &["Finish auth MODE=success"]);
    add(&sb, &["Fix the flaky test MODE=noreport\nonly fails on CI"]);
    add(&sb, &["Not now MODE=success"]);
    let cps = checkpoints(&sb);
    assert_eq!(cps.len(), 3);
    let inbox = sb.read("S/todo.md");
    let cp_of = |title: &str| {
        cps.iter()
            .find(|c| {
                inbox
                    .lines()
                    .any(|l| l.contains(title) && l.contains(c.as_str()))
            })
            .cloned()
            .expect("cp")
    };
    let (cp_ok, cp_bad, cp_later) = (cp_of("Finish auth"), cp_of("flaky"), cp_of("Not now"));

    let r = resolve(&sb, &["--yes", "--select", "1,2"]);
    assert_eq!(r.code, 1, "{r:?}");
    let batch = sb.read("S/todo-1.md");
    assert!(
        batch.starts_with("---\nsource: todo.md\ncreated: \""),
        "{batch}"
    );
    assert!(batch.contains("status: partial\n"), "{batch}");
    assert!(
        batch.contains(&format!(
            "- [x] Finish auth MODE=success @context:{cp_ok}\n  > runner: fake agent handled 1\n"
        )),
        "{batch}"
    );
    // The note follows the item's own text.
    assert!(batch.contains(&format!("- [ ] Fix the flaky test MODE=noreport @context:{cp_bad}\n  only fails on CI\n  > runner: failed: no report")), "{batch}");
    assert!(
        batch.contains("todo-task-2/attempt-1.stdout.log)\n"),
        "{batch}"
    );
    // The inbox keeps only what was not selected.
    let inbox = sb.read("S/todo.md");
    assert!(
        inbox.contains("Not now") && !inbox.contains("Finish auth") && !inbox.contains("flaky"),
        "{inbox}"
    );
    // The completed item's checkpoint is gone; the others stay.
    let left = checkpoints(&sb);
    assert!(
        !left.contains(&cp_ok) && left.contains(&cp_bad) && left.contains(&cp_later),
        "{left:?}"
    );
    // The output table sits beside the batch.
    let rows = by_id(&sb.join("S/todo-1.workers-output.csv"), "item");
    assert_eq!(rows["1"]["status"], "completed");
    assert_eq!(rows["1"]["checkpoint"], cp_ok);
    assert_eq!(rows["2"]["status"], "failed");
    // The team stays (an item failed), with completed.md.
    let done = sb.read("S/teams/todo-resolve-1/completed.md");
    assert!(
        done.contains("| T1 | fake agent handled 1 | files: | tests: none\n"),
        "{done}"
    );
    assert!(r.stdout.contains("S/teams/todo-resolve-1"), "{r:?}");
}

#[test]
fn run_again_reruns_only_unticked_items_and_removes_the_finished_team() {
    let sb = Sandbox::new();
    add(&sb, &["A MODE=success"]);
    add(&sb, &["B MODE=blocked"]);
    let r = resolve(&sb, &["--yes"]);
    assert_eq!(r.code, 1, "{r:?}");
    let batch = sb.read("S/todo-1.md");
    assert!(
        batch.contains("- [ ] B MODE=blocked")
            && batch.contains("> runner: blocked: needs an API key"),
        "{batch}"
    );
    // Someone unblocks B.
    sb.write("S/todo-1.md", batch.replace("MODE=blocked", "MODE=success"));
    let r = run_batch(&sb, "S/todo-1.md", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("todo-task-2") && !r.stdout.contains("todo-task-1 "),
        "{r:?}"
    );
    let batch = sb.read("S/todo-1.md");
    assert!(batch.contains("status: done"), "{batch}");
    assert_eq!(batch.matches("- [x]").count(), 2, "{batch}");
    assert!(
        !sb.join("S/teams").exists(),
        "the team is removed when everything completed, and the store's teams/ with it"
    );
    assert!(
        r.stdout.contains("the team workspace was removed") && !r.stdout.contains("Workspace:"),
        "a removed workspace is not named as if it were there: {r:?}"
    );
    assert!(!r.stderr.contains("waiting for the store lock"), "{r:?}");
    assert!(checkpoints(&sb).is_empty());
}

/// Issue 56: a blocked item waits for a person, so `--only failed` leaves it alone (as a
/// CSV batch does) and `--only blocked` runs it alone; with only blocked items left,
/// `--only failed` says so and runs nothing.
#[test]
fn only_failed_leaves_blocked_items_alone() {
    let sb = Sandbox::new();
    add(&sb, &["A MODE=failed"]);
    add(&sb, &["B MODE=blocked"]);
    let r = resolve(&sb, &["--yes"]);
    assert_eq!(r.code, 1, "{r:?}");
    let r = run_batch(&sb, "S/todo-1.md", &["--only", "failed"]);
    assert!(
        r.stdout.contains("todo-task-1") && !r.stdout.contains("todo-task-2"),
        "the blocked item 2 must not run again: {r:?}"
    );
    let batch = sb.read("S/todo-1.md");
    assert!(
        batch.contains("> runner: blocked: needs an API key"),
        "{batch}"
    );
    let r = run_batch(&sb, "S/todo-1.md", &["--only", "blocked"]);
    assert!(
        r.stdout.contains("todo-task-2") && !r.stdout.contains("todo-task-1"),
        "--only blocked runs the blocked item alone: {r:?}"
    );
    // A person ends item 1 by hand: only the blocked one is left.
    let batch = sb
        .read("S/todo-1.md")
        .replace("- [ ] A MODE=failed", "- [x] A MODE=failed");
    sb.write("S/todo-1.md", &batch);
    let r = run_batch(&sb, "S/todo-1.md", &["--only", "failed"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("every unticked item is blocked") && !r.stdout.contains("todo-task-2"),
        "{r:?}"
    );
}

#[test]
fn a_checkpoint_shared_with_an_unfinished_item_is_kept() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write("S/cp-shared.md", "---\ntype: checkpoint\n---\n");
    sb.write(
        "S/todo.md",
        "# TODO\n\n## Todo\n- [ ] one MODE=success @context:cp-shared.md\n- [ ] two MODE=failed @context:cp-shared.md\n",
    );
    let r = resolve(&sb, &["--yes"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        sb.join("S/cp-shared.md").exists(),
        "item two still needs it"
    );
}

/// Issue 49: a teammate re-pointed its item's checkpoint reference in the batch file at the
/// store's inbox and reported success; the runner, which read the reference again at the
/// end, deleted `todo.md`. The checkpoint deleted is the one the item named when its batch
/// started, and only ever one of the store's own `cp-….md` files.
#[test]
fn a_teammate_cannot_make_the_runner_delete_another_file_as_its_checkpoint() {
    let sb = Sandbox::new();
    let r = add(&sb, &["Tidy up MODE=repoint_checkpoint"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = add(&sb, &["--idea", "Keep me"]);
    assert_eq!(r.code, 0, "{r:?}");
    let cps = checkpoints(&sb);
    assert_eq!(cps.len(), 1, "{cps:?}");
    let r = resolve(&sb, &["--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let batch = sb.read("S/todo-1.md");
    assert!(
        batch.contains("@context:todo.md") && batch.contains("- [x] Tidy up"),
        "the attack was made and the item ticked: {batch}"
    );
    let inbox = std::fs::read_to_string(sb.join("S/todo.md")).expect("the inbox is still there");
    assert!(inbox.contains("Keep me"), "{inbox}");
    assert!(
        checkpoints(&sb).is_empty(),
        "the item's own checkpoint {} was removed",
        cps[0]
    );
}

/// The same attack in a run that did not complete the item: the next run of the batch reads
/// the re-pointed reference from the batch file, yet deletes the checkpoint recorded when
/// the batch's first run started.
#[test]
fn a_checkpoint_re_pointed_during_an_earlier_run_of_the_batch_does_not_count() {
    let sb = Sandbox::new();
    let r = add(&sb, &["Tidy up MODE=repoint_checkpoint_blocked"]);
    assert_eq!(r.code, 0, "{r:?}");
    let cps = checkpoints(&sb);
    let r = resolve(&sb, &["--yes"]);
    assert_eq!(r.code, 1, "{r:?}");
    let batch = sb.read("S/todo-1.md");
    assert!(batch.contains("@context:todo.md"), "{batch}");
    // A person unblocks the item, as `run_again_reruns_only_unticked_items...` does.
    sb.write(
        "S/todo-1.md",
        batch.replace("MODE=repoint_checkpoint_blocked", "MODE=success"),
    );
    let r = run_batch(&sb, "S/todo-1.md", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        sb.join("S/todo.md").is_file(),
        "the inbox was deleted: {r:?}"
    );
    assert!(
        checkpoints(&sb).is_empty(),
        "the item's own checkpoint {cps:?} was removed"
    );
}

#[test]
fn resolve_without_confirmation_or_with_bad_input_changes_nothing() {
    let sb = Sandbox::new();
    add(&sb, &["A MODE=success"]);
    std::fs::write(sb.join("outside.md"), "secret").expect("write");
    /// (what, an extra inbox item, flags, exit code, message).
    type Case<'a> = (&'a str, Option<String>, Vec<&'a str>, i32, &'a str);
    let cases: Vec<Case> = vec![
        (
            "no --yes without a terminal",
            None,
            vec![],
            2,
            "needs confirmation",
        ),
        (
            "unknown selection",
            None,
            vec!["--yes", "--select", "7"],
            2,
            "there is no open item 7; the open items are 1",
        ),
        (
            "absolute checkpoint",
            Some("- [ ] B @context:/etc/passwd\n".into()),
            vec!["--yes"],
            2,
            "absolute path",
        ),
        (
            "checkpoint outside",
            Some("- [ ] B @context:../outside.md\n".into()),
            vec!["--yes"],
            2,
            "leaves the store",
        ),
        (
            "missing checkpoint",
            Some("- [ ] B @context:cp-nope.md\n".into()),
            vec!["--yes"],
            2,
            "cp-nope.md: no such checkpoint",
        ),
        (
            "unknown @after",
            Some("- [ ] B @after:9\n".into()),
            vec!["--yes", "--select", "2"],
            2,
            "9",
        ),
        (
            "missing program",
            None,
            vec!["--yes", "--runner", "exec"],
            2,
            "needs a command",
        ),
    ];
    for (what, extra_item, flags, code, want) in cases {
        let sb2 = Sandbox::new();
        std::fs::create_dir_all(sb2.join("S")).expect("store");
        for e in std::fs::read_dir(sb.join("S")).expect("ls").flatten() {
            std::fs::copy(e.path(), sb2.join("S").join(e.file_name())).expect("copy");
        }
        sb2.write("outside.md", "secret");
        if let Some(item) = extra_item {
            let inbox = sb2
                .read("S/todo.md")
                .replace("## 💡 Ideas", &format!("{item}\n## 💡 Ideas"));
            sb2.write("S/todo.md", inbox);
        }
        let before = sb2.tree();
        let r = if what == "missing program" {
            let mut a = vec!["resolve", "--store", "S"];
            a.extend(flags.iter().copied());
            sb2.run(&a)
        } else {
            resolve(&sb2, &flags)
        };
        assert_eq!(r.code, code, "{what}: {r:?}");
        assert!(r.stderr.contains(want), "{what}: want {want:?}: {r:?}");
        assert_eq!(sb2.tree(), before, "{what}: files changed");
        if what.contains("checkpoint") {
            // The problem names the inbox's line and item number, where the user looks.
            let inbox = sb2.read("S/todo.md");
            let line = inbox
                .lines()
                .position(|l| l.starts_with("- [ ] B"))
                .expect("item B")
                + 1;
            assert!(
                r.stderr.contains(&format!("todo.md: line {line}: item 2:")),
                "{what}: {r:?}"
            );
        }
    }
    // A symlink leading out of the store is refused too.
    let sb3 = Sandbox::new();
    std::fs::create_dir_all(sb3.join("S")).expect("store");
    sb3.write("secret.md", "x");
    std::os::unix::fs::symlink(sb3.join("secret.md"), sb3.join("S/cp-link.md")).expect("link");
    sb3.write("S/todo.md", "## Todo\n- [ ] B @context:cp-link.md\n");
    let before = sb3.tree();
    let r = resolve(&sb3, &["--yes"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("link leading out of the store"), "{r:?}");
    assert_eq!(sb3.tree(), before);
}

#[test]
fn a_crash_between_the_two_writes_loses_no_item() {
    let sb = Sandbox::new();
    add(&sb, &["A MODE=success"]);
    add(&sb, &["B MODE=success"]);
    let f = fake();
    let out = sb
        .cmd(&["resolve", "--store", "S", "--yes", "--", "python3", &f])
        .env("RUNNER_FAULT", "after-batch-write")
        .output()
        .expect("run");
    assert!(!out.status.success());
    let batch = sb.read("S/todo-1.md");
    let inbox = sb.read("S/todo.md");
    for title in ["A MODE=success", "B MODE=success"] {
        assert!(
            batch.contains(title) || inbox.contains(title),
            "{title} lost"
        );
    }
}

#[test]
fn crlf_bom_chinese_headings_and_fences_survive_resolve_byte_for_byte() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    let inbox = "\u{feff}# TODO\r\n\r\n最后更新: 2026-04-27\r\n\r\n## 📋 待办\r\n- [ ] 完成认证 MODE=success\r\n  续行\r\n```\r\n- [ ] not an item\r\n```\r\n- [ ] 留下 MODE=success\r\n\r\n## 💡 想法\r\n- [X] done idea\r\n";
    sb.write("S/todo.md", inbox);
    let r = resolve(&sb, &["--yes", "--select", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let after = sb.read("S/todo.md");
    let expected = inbox
        .replace("- [ ] 完成认证 MODE=success\r\n  续行\r\n", "")
        .replace(
            "2026-04-27",
            &after[after
                .find("最后更新: ")
                .map(|i| i + "最后更新: ".len())
                .unwrap_or(0)..][..10],
        );
    assert_eq!(after, expected);
    let batch = sb.read("S/todo-1.md");
    assert!(
        batch.contains(
            "- [x] 完成认证 MODE=success\r\n  续行\r\n  > runner: fake agent handled 1\r\n"
        ),
        "{batch:?}"
    );
}

#[test]
fn dry_run_resolve_shows_the_plan_and_writes_nothing() {
    let sb = Sandbox::new();
    add(&sb, &["A MODE=success"]);
    add(&sb, &["B MODE=success @after:1"]);
    let before = sb.tree();
    let r = resolve(&sb, &["--yes", "--dry-run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("todo-task-1  (id 1)")
            && r.stdout.contains("todo-task-2  (id 2)  after: 1"),
        "{r:?}"
    );
    assert!(r.stdout.contains("Command (first item): python3"), "{r:?}");
    assert_eq!(sb.tree(), before);
}

#[test]
fn run_only_named_items_with_a_junit_report() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write("S/todo-4.md", "---\nstatus: pending\n---\n## Todo\n- [ ] one MODE=success\n- [ ] two MODE=success\n- [ ] three MODE=success\n");
    let r = run_batch(&sb, "S/todo-4.md", &["--only", "2,3", "--junit", "j.xml"]);
    assert_eq!(r.code, 0, "{r:?}");
    let batch = sb.read("S/todo-4.md");
    assert!(
        batch.contains("- [ ] one") && batch.contains("- [x] two") && batch.contains("- [x] three"),
        "{batch}"
    );
    assert!(batch.contains("status: partial"), "{batch}");
    let xml = sb.read("j.xml");
    assert_eq!(xml.matches("<testcase").count(), 2, "{xml}");
    let r = run_batch(&sb, "S/todo-4.md", &["--only", "9"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no unticked item 9"), "{r:?}");
}

#[test]
fn only_naming_an_item_when_none_is_unticked_says_so() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write(
        "S/todo-9.md",
        "## Todo\n- [x] one\n- [x] two\n## Ideas\n- [ ] three\n",
    );
    let f = fake();
    let run = |only: &str, extra: &[&str]| {
        let mut a = vec!["run", "S/todo-9.md", "--only", only];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--", "python3", &f]);
        sb.run(&a)
    };
    let before = sb.tree();
    let r = run("2", &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("--only 2: no unticked item 2; there are none: every Todo item is ticked"),
        "{r:?}"
    );
    let r = run("3", &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("item 3 is an idea: add --include-ideas to run it"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing changed");
}

#[test]
fn add_counts_the_items_of_the_inbox_as_the_user_does() {
    let sb = Sandbox::new();
    for t in ["one", "two", "three", "four"] {
        assert_eq!(add(&sb, &[t]).code, 0);
    }
    let inbox = sb.read("S/todo.md");
    let r = add(&sb, &["bad dep @after:9"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("@after:9 names no item (the inbox has 4 items, numbered 1 to 4)"),
        "{r:?}"
    );
    assert_eq!(sb.read("S/todo.md"), inbox, "the inbox is unchanged");
    assert_eq!(checkpoints(&sb).len(), 4, "no checkpoint is left behind");
}

/// A Todo item added above the Ideas moves the ideas up a number: every `@after:` naming
/// them moves with them, and the new item's own (written with the numbers `runner list`
/// showed) names what the user meant. A helper found `add "A @after:1"` after an idea
/// refused as naming itself, and older references pointing at the wrong item.
#[test]
fn an_item_added_above_the_ideas_keeps_every_prerequisite_pointing_where_it_did() {
    let sb = Sandbox::new();
    assert_eq!(add(&sb, &["B idea", "--idea"]).code, 0); // B = 1
    assert_eq!(add(&sb, &["C task @after:1"]).code, 0); // C = 1 after B, B = 2
    assert_eq!(add(&sb, &["F idea @after:1", "--idea"]).code, 0); // F = 3 after C
    assert_eq!(add(&sb, &["D task"]).code, 0); // D = 2: B = 3, F = 4
    assert_eq!(add(&sb, &["E task @after:4"]).code, 0); // E = 3 after F: B = 4, F = 5
    let list = sb.run(&["list", "--store", "S"]);
    assert_eq!(list.code, 0, "{list:?}");
    let lines: Vec<&str> = list.stdout.lines().map(str::trim).collect();
    for want in [
        "1. [ ] C task",
        "2. [ ] D task",
        "3. [ ] E task",
        "4. [ ] B idea",
        "5. [ ] F idea",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(want)),
            "{want}: {list:?}"
        );
    }
    let after = |title: &str| {
        lines
            .iter()
            .find(|l| l.contains(title))
            .and_then(|l| l.split("@after:").nth(1))
            // The numbers, before the item's `(id k-…)`.
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned)
    };
    assert_eq!(
        after("C task").as_deref(),
        Some("4"),
        "C waits for B: {list:?}"
    );
    assert_eq!(
        after("E task").as_deref(),
        Some("5"),
        "E waits for F: {list:?}"
    );
    assert_eq!(
        after("F idea").as_deref(),
        Some("1"),
        "F waits for C: {list:?}"
    );
}

#[test]
fn add_keeps_the_checkpoint_files_bytes() {
    let sb = Sandbox::new();
    let body = "## Current task\nauth\n\n## Next steps\n1. error branch\n";
    sb.write("notes.md", body);
    let r = add(&sb, &["Finish auth", "--checkpoint", "notes.md"]);
    assert_eq!(r.code, 0, "{r:?}");
    let cps = checkpoints(&sb);
    let cp = sb.read(&format!("S/{}", cps[0]));
    assert!(cp.ends_with(&format!("---\n\n{body}")), "{cp:?}");
}

/// An item is ticked (or given its reason) in `todo-N.md` as soon as it finishes, not when
/// the whole run ends: a person watching the file sees `[x]` while a slow sibling still runs.
#[test]
fn an_item_is_ticked_when_it_finishes_not_when_the_run_ends() {
    let sb = Sandbox::new();
    add(&sb, &["Quick MODE=success"]);
    add(&sb, &["Slow MODE=wait_file"]);
    let release = sb.join("release");
    let f = fake();
    let mut runner = sb
        .cmd(&[
            "resolve", "--store", "S", "--yes", "--jobs", "2", "--format", "plain", "--",
            "python3", &f,
        ])
        .env("RELEASE_FILE", &release)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runner");
    crate::harness::wait_for("the quick item ticked while the slow one runs", 30, || {
        std::fs::read_to_string(sb.join("S/todo-1.md"))
            .is_ok_and(|b| b.contains("- [x] Quick") && b.contains("- [~] Slow"))
    });
    std::fs::write(&release, "").expect("release");
    let status = runner.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    let batch = sb.read("S/todo-1.md");
    assert_eq!(batch.matches("- [x]").count(), 2, "{batch}");
}

/// `runner clean --completed` removes finished batches with their tables and archives, but
/// keeps one an open item still waits on, and says why.
#[test]
fn clean_completed_removes_finished_batches_but_keeps_what_an_open_item_waits_on() {
    let sb = Sandbox::new();
    add(&sb, &["A MODE=success"]);
    assert_eq!(resolve(&sb, &["--yes"]).code, 0);
    add(&sb, &["B MODE=success"]);
    assert_eq!(resolve(&sb, &["--yes"]).code, 0);
    add(&sb, &["C after B @after:todo-2#1"]);
    for f in [
        "todo-1.md",
        "todo-1.workers-output.csv",
        "todo-1.archive.jsonl",
        "todo-2.md",
    ] {
        assert!(sb.join(&format!("S/{f}")).is_file(), "{f}");
    }
    let r = sb.run(&["clean", "--completed", "--store", "S"]);
    assert_eq!(r.code, 2, "asks first: {r:?}");
    let r = sb.run(&["clean", "--completed", "--yes", "--store", "S"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("Kept todo-2.md: todo.md: item 1 waits on todo-2#1"),
        "{r:?}"
    );
    for f in [
        "todo-1.md",
        "todo-1.workers-output.csv",
        "todo-1.archive.jsonl",
    ] {
        assert!(!sb.join(&format!("S/{f}")).exists(), "{f}: {r:?}");
    }
    assert!(sb.join("S/todo-2.md").is_file());
    assert!(sb.read("S/todo.md").contains("C after B"));
    // A mistyped store is refused, not found empty.
    let r = sb.run(&["clean", "--completed", "--yes", "--store", "Z"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(!sb.join("Z").exists());
}

/// A store made inside a git work tree that does not ignore it gets the `.gitignore` lines
/// suggested, once; an ignored store, or a second add, gets none.
#[test]
fn a_new_store_in_a_repository_suggests_the_gitignore_lines_once() {
    let sb = Sandbox::new();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(sb.path())
            .output()
            .expect("git")
    };
    git(&["init", "-q"]);
    let r = sb.run(&["add", "--project", "first"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("add to") && r.stderr.contains("  .agent-tasks/\n  *.runner/"),
        "{r:?}"
    );
    let r = sb.run(&["add", "--project", "second"]);
    assert!(!r.stderr.contains(".gitignore"), "said once: {r:?}");
    std::fs::remove_dir_all(sb.join(".agent-tasks")).expect("rm");
    sb.write(".gitignore", ".agent-tasks/\n");
    let r = sb.run(&["add", "--project", "third"]);
    assert!(!r.stderr.contains(".gitignore"), "already ignored: {r:?}");
}

/// Issue 50: `resolve` killed between writing `todo-N.md` and rewriting the inbox left every
/// moved item in both, and the next `resolve` handed them out again (work done twice). The
/// next command that reads the store finishes the move: the items are in the batch only.
#[test]
fn a_resolve_killed_between_its_two_writes_is_finished_by_the_next_command() {
    for next in ["list", "resolve"] {
        let sb = Sandbox::new();
        add(&sb, &["A MODE=success"]);
        add(&sb, &["B MODE=success"]);
        let f = fake();
        let out = sb
            .cmd(&[
                "resolve", "--store", "S", "--yes", "--select", "1", "--", "python3", &f,
            ])
            .env("RUNNER_FAULT", "after-batch-write")
            .output()
            .expect("run");
        assert!(!out.status.success());
        assert!(sb.read("S/todo.md").contains("A MODE=success"), "cut short");
        let r = match next {
            "list" => sb.run(&["list", "--store", "S"]),
            _ => resolve(&sb, &["--yes"]),
        };
        assert!(r.stderr.contains("finished the move"), "{next}: {r:?}");
        let inbox = sb.read("S/todo.md");
        assert!(!inbox.contains("A MODE=success"), "{next}: {inbox}");
        assert!(sb.read("S/todo-1.md").contains("A MODE=success"));
        assert!(!sb.join("S/.resolve-move.json").exists());
        if next == "resolve" {
            // B went to a batch of its own; A was not handed out again.
            assert_eq!(r.code, 0, "{r:?}");
            let second = sb.read("S/todo-2.md");
            assert!(
                second.contains("B MODE=success") && !second.contains("A MODE=success"),
                "{second}"
            );
        }
    }
}

#[test]
fn resolve_by_stable_id_moves_that_item_and_refuses_an_id_that_is_gone() {
    let sb = Sandbox::new();
    sb.write(
        "S/todo.md",
        "# TODO\n\n## Todo\n- [ ] Alpha\n- [ ] Beta\n- [ ] Gamma\n  with notes\n",
    );
    let listed = sb.run(&["list", "--store", "S", "--format", "json"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    let doc: serde_json::Value = serde_json::from_str(&listed.stdout).expect("JSON");
    let id_of = |title: &str| {
        doc["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["title"] == title))
            .and_then(|i| i["id"].as_str())
            .unwrap_or_else(|| panic!("{title}: {doc}"))
            .to_owned()
    };
    let (alpha, gamma) = (id_of("Alpha"), id_of("Gamma"));
    assert!(gamma.starts_with("k-") && gamma != alpha, "{gamma} {alpha}");
    // The human view shows the same id (issue 56: only the JSON had it).
    let human = sb.run(&["list", "--store", "S"]);
    assert!(
        human
            .stdout
            .contains(&format!("3. [ ] Gamma  (id {gamma})")),
        "{human:?}"
    );
    // Alpha first: Gamma's number shifts from 3 to 2, its id does not.
    for id in [&alpha, &gamma] {
        let r = resolve(&sb, &["--yes", "--id", id]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    assert!(sb.read("S/todo-1.md").contains("Alpha"));
    let second = sb.read("S/todo-2.md");
    assert!(
        second.contains("Gamma") && !second.contains("Beta"),
        "{second}"
    );
    let before = sb.tree();
    let r = resolve(&sb, &["--yes", "--id", &gamma]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no open item has the id"), "{r:?}");
    let r = resolve(&sb, &["--yes", "--id", &gamma, "--select", "1"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(sb.tree(), before, "a refused id changes nothing");
    assert!(sb.read("S/todo.md").contains("Beta"));
}
