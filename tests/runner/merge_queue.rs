//! The merge queue (issue 57): completed branches land on the run's branch one at a time,
//! each merged tree checked by `--verify-merged` before the branch moves; a merge that fails
//! its check is undone and its item fails `merge_failed`; a kill mid-queue resumes without
//! merging twice or skipping.

use crate::harness::{Sandbox, by_id, git};
use crate::worktree::{ISOLATED, batch, repo, rows};

/// A check that passes while at most one of a.txt and b.txt exists: each item alone passes
/// it, both together break it (a semantic conflict git cannot see).
fn clash_check(sb: &Sandbox) {
    sb.write(
        "check.sh",
        "if [ -e a.txt ] && [ -e b.txt ]; then echo 'a and b clash'; exit 1; fi\necho fine\n",
    );
    git(sb.path(), &["add", "check.sh"]);
    git(sb.path(), &["commit", "-q", "-m", "check"]);
}

/// The files each merge commit on `main` brought in, oldest first (`a.txt` for the merge of
/// the item that wrote it).
fn merges(sb: &Sandbox) -> Vec<String> {
    git(
        sb.path(),
        &["log", "--merges", "--reverse", "--format=%H", "main"],
    )
    .lines()
    .map(|c| {
        git(sb.path(), &["diff", "--name-only", &format!("{c}^1"), c])
            .trim()
            .to_owned()
    })
    .collect()
}

#[test]
fn verify_merged_undoes_a_merge_that_breaks_the_check_while_the_items_own_verify_passed() {
    let sb = repo();
    clash_check(&sb);
    let r = batch(
        &sb,
        &[
            ("a", "EDIT a.txt=one"),
            ("b", "EDIT b.txt=two"),
            ("c", "EDIT c.txt=three"),
        ],
        &[
            "--merge",
            "--jobs",
            "3",
            "--verify",
            "sh check.sh",
            "--verify-merged",
            "sh check.sh",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(out["a"]["status"], "completed");
    assert_eq!(out["c"]["status"], "completed");
    assert_eq!(out["b"]["status"], "failed", "{r:?}");
    assert_eq!(out["b"]["failure_kind"], "merge_failed");
    assert_eq!(out["b"]["merged"], "", "b never landed");
    let landed = git(sb.path(), &["log", "--merges", "-1", "--format=%H", "main"]);
    assert_eq!(
        out["c"]["merged"],
        landed.trim(),
        "the output names c's merge"
    );
    let why = &out["b"]["error"];
    assert!(
        why.contains("--verify-merged") && why.contains("a and b clash"),
        "{why}"
    );
    // The target only moved by merges that passed: a and c, not b.
    assert_eq!(merges(&sb), ["a.txt", "c.txt"]);
    assert!(sb.join("a.txt").is_file() && sb.join("c.txt").is_file());
    assert!(!sb.join("b.txt").exists(), "the failed merge is undone");
    assert_eq!(git(sb.path(), &["status", "--porcelain"]), "");
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    assert!(
        branches.contains("runner/workers-output/2-b") && !branches.contains("1-a"),
        "b's branch is kept, a's deleted: {branches}"
    );
    // The display: TO MERGE as items finish, then what the queue made of each; never
    // COMPLETED for b.
    assert!(r.stdout.contains("TO MERGE"), "{r:?}");
    assert!(r.stdout.contains("MERGED 1-a  into main as "), "{r:?}");
    assert!(
        r.stdout
            .contains("FAILED 2-b [merge_failed]  the merged tree failed --verify-merged"),
        "{r:?}"
    );
    assert!(!r.stdout.lines().any(|l| l.contains("COMPLETED")), "{r:?}");
    let status = sb.run(&["status", "workers-output.runner"]);
    assert!(
        status.stdout.contains("3 item(s): 2 completed, 1 failed"),
        "status says what the queue made of b: {status:?}"
    );
    assert!(
        sb.read("workers-output.runner/merge-queue.log")
            .contains("a and b clash"),
        "the check's output is kept"
    );
}

#[test]
fn a_kill_in_the_middle_of_the_queue_then_a_resume_neither_merges_twice_nor_skips() {
    // Killed after the first merge landed but before it was recorded, and killed after the
    // first merge passed its check but before the target moved.
    for point in ["merge_landed", "merge_checked"] {
        let sb = repo();
        rows(
            &sb,
            &[
                ("a", "EDIT a.txt=one"),
                ("b", "EDIT b.txt=two"),
                ("c", "EDIT c.txt=three"),
            ],
        );
        let agent = crate::harness::agent("edit_agent.py");
        let flags = [ISOLATED, &["--merge", "--verify-merged", "true"]].concat();
        let killed = sb
            .batch_cmd(&flags, &["python3", &agent])
            .env("RUNNER_FAULT", point)
            .output()
            .expect("runner");
        assert_ne!(killed.status.code(), Some(0), "{point}: {killed:?}");
        let landed = usize::from(point == "merge_landed");
        assert_eq!(
            merges(&sb).len(),
            landed,
            "{point}: the queue stopped there"
        );
        let r = sb.batch(&flags, &["python3", &agent]);
        assert_eq!(r.code, 0, "{point}: {r:?}");
        assert_eq!(
            merges(&sb),
            ["a.txt", "b.txt", "c.txt"],
            "{point}: each item merged once, in item order"
        );
        let journal = sb.read("workers-output.runner/journal.jsonl");
        assert_eq!(
            journal.matches("\"attempt_started\"").count(),
            3,
            "{point}: no agent ran twice"
        );
        assert_eq!(
            journal.matches("\"item_merged\"").count(),
            3,
            "{point}: one recorded merge step per item"
        );
        let out = by_id(&sb.join("workers-output.csv"), "id");
        for id in ["a", "b", "c"] {
            assert_eq!(out[id]["status"], "completed", "{point}: {id}");
        }
        assert_eq!(git(sb.path(), &["status", "--porcelain"]), "", "{point}");
        let worktrees = git(sb.path(), &["worktree", "list", "--porcelain"]);
        assert!(
            !worktrees.contains(".merge-queue"),
            "{point}: the queue's worktree is gone: {worktrees}"
        );
    }
}

/// What a killed queue leaves in its own worktree (a check's untracked output) is no one's
/// work: `runner clean` removes it without `--force`, and keeps the items' unmerged branches.
#[test]
fn clean_after_a_killed_queue_removes_its_worktree_and_keeps_unmerged_branches() {
    let sb = repo();
    rows(&sb, &[("a", "EDIT a.txt=one")]);
    let agent = crate::harness::agent("edit_agent.py");
    let flags = [ISOLATED, &["--merge", "--verify-merged", "touch built.out"]].concat();
    let killed = sb
        .batch_cmd(&flags, &["python3", &agent])
        .env("RUNNER_FAULT", "merge_checked")
        .output()
        .expect("runner");
    assert_ne!(killed.status.code(), Some(0), "{killed:?}");
    let r = sb.run(&["clean", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Removed team"), "{r:?}");
    let worktrees = git(sb.path(), &["worktree", "list", "--porcelain"]);
    assert!(!worktrees.contains(".merge-queue"), "{worktrees}");
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    assert!(
        branches.contains("runner/workers-output/1-a"),
        "a's work never landed: its branch stays: {branches}"
    );
}

#[test]
fn merge_review_leaves_items_awaiting_review_then_accept_merges_and_reject_discards() {
    let sb = repo();
    clash_check(&sb);
    let r = batch(
        &sb,
        &[
            ("a", "EDIT a.txt=one"),
            ("b", "EDIT b.txt=two"),
            ("c", "EDIT c.txt=three"),
        ],
        &[
            "--merge=review",
            "--verify-merged",
            "sh check.sh",
            "--dry-run",
        ],
    );
    assert!(
        r.stdout
            .contains("completed branches wait for review (runner review)"),
        "the plan says nothing will land: {r:?}"
    );
    let r = batch(
        &sb,
        &[],
        &["--merge=review", "--verify-merged", "sh check.sh"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let main_before = git(sb.path(), &["rev-parse", "main"]);
    assert!(!sb.join("a.txt").exists(), "nothing lands before review");
    assert!(r.stdout.contains("TO REVIEW"), "{r:?}");
    assert!(!r.stdout.lines().any(|l| l.contains("COMPLETED")), "{r:?}");
    assert!(
        r.stdout.contains(
            "Awaiting review (runner review; runner accept ID…; runner reject ID…): 1-a, 2-b, 3-c"
        ),
        "{r:?}"
    );
    let shown = sb.run(&["review", "workers-output.runner"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    for expected in [
        "3 item(s) of team",
        "a (1-a)",
        "summary: edited a.txt",
        "a.txt | 1 +",
        "1 file changed, 1 insertion(+)",
    ] {
        assert!(shown.stdout.contains(expected), "{expected}: {shown:?}");
    }
    assert!(!shown.stdout.contains("+one"), "no diff unless asked");
    let full = sb.run(&["review", "workers-output.runner", "--diff"]);
    assert!(full.stdout.contains("+one"), "{full:?}");
    // Accept a then b: a lands, b breaks the merged tree's check and fails, main untouched
    // by it.
    let acc = sb.run(&["accept", "a", "2-b", "--team", "workers-output.runner"]);
    assert_eq!(acc.code, 1, "{acc:?}");
    assert!(acc.stdout.contains("MERGED 1-a"), "{acc:?}");
    assert!(acc.stdout.contains("FAILED 2-b [merge_failed]"), "{acc:?}");
    assert!(sb.join("a.txt").is_file() && !sb.join("b.txt").exists());
    assert_ne!(git(sb.path(), &["rev-parse", "main"]), main_before);
    let rej = sb.run(&["reject", "c", "--team", "workers-output.runner"]);
    assert_eq!(rej.code, 0, "{rej:?}");
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    assert!(
        !branches.contains("3-c"),
        "a rejected branch is deleted: {branches}"
    );
    assert!(!branches.contains("1-a"), "an accepted one too: {branches}");
    assert!(
        branches.contains("2-b"),
        "a failed merge keeps its branch: {branches}"
    );
    let after = sb.run(&["review", "workers-output.runner"]);
    assert!(after.stdout.contains("No item of team"), "{after:?}");
    // Nothing left to decide: accepting again names what waits.
    let again = sb.run(&["accept", "c", "--team", "workers-output.runner"]);
    assert_eq!(again.code, 2, "{again:?}");
    let status = sb.run(&["show", "c", "workers-output.runner"]);
    assert!(status.stdout.contains("rejected"), "{status:?}");
    let status = sb.run(&["status", "workers-output.runner"]);
    assert!(
        status.stdout.contains("3 item(s): 1 completed, 2 failed"),
        "{status:?}"
    );
}

/// Overlap warned before it costs: rows naming the same files in `files_column` are named
/// by `--dry-run` and at the run's start; after a run, the files its rows modified count too.
#[test]
fn rows_that_will_touch_the_same_files_are_named_by_the_dry_run_and_the_start() {
    let sb = repo();
    let agent = crate::harness::agent("edit_agent.py");
    sb.write(
        "in.csv",
        "id,files,task\na,src/lib.rs,EDIT one.txt=1\nb,docs/x.md,EDIT shared.txt=2\nc,\"./src/lib.rs; docs/x.md\",EDIT two.txt=3\nd,,EDIT shared.txt=4\n",
    );
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\nfiles_column: files\nisolate: worktree\ncommand: [python3, {agent:?}]\n---\nDo this: {{task}}\n"
        ),
    );
    std::fs::write(sb.join(".git/info/exclude"), "in.csv\nBATCH.md\n").expect("exclude");
    let dry = sb.run(&["batch", "BATCH.md", "--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    let warned = "rows a, c will touch the same files (src/lib.rs)";
    assert!(dry.stderr.contains(warned), "{dry:?}");
    assert!(
        dry.stderr
            .contains("rows b, c will touch the same files (docs/x.md)"),
        "{dry:?}"
    );
    assert!(!dry.stderr.contains("rows b, d"), "{dry:?}");
    let run = sb.run(&["batch", "BATCH.md", "--format", "plain"]);
    assert!(run.stderr.contains(warned), "{run:?}");
    // b and d both modified shared.txt: the next plan names them too.
    let again = sb.run(&["batch", "BATCH.md", "--dry-run"]);
    assert!(
        again
            .stderr
            .contains("rows b, d will touch the same files (shared.txt)"),
        "{again:?}"
    );
}

#[test]
fn an_item_that_changed_nothing_is_never_said_merged_with_another_items_commit() {
    let sb = repo();
    let r = batch(
        &sb,
        &[("a", "EDIT a.txt=one"), ("n", "EDIT shared.txt=original")],
        &["--merge", "--jobs", "1"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(out["n"]["status"], "completed", "{r:?}");
    assert_eq!(out["n"]["merged"], "", "n landed nothing: {r:?}");
    assert_ne!(out["a"]["merged"], "", "{r:?}");
    assert!(
        r.stdout
            .contains("UNCHANGED 2-n  nothing to merge: its branch adds nothing to main"),
        "{r:?}"
    );
    assert!(!r.stdout.contains("MERGED 2-n"), "{r:?}");
    assert_eq!(merges(&sb), ["a.txt"]);
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    assert_eq!(branches.trim(), "main", "nothing is kept: {branches}");
    // Run again: nothing is merged or said again.
    let again = batch(&sb, &[], &["--merge", "--jobs", "1"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(!again.stdout.contains("2-n"), "{again:?}");
    assert_eq!(merges(&sb), ["a.txt"]);
}

/// `--serialize-overlaps`: rows a and b name the same file, c another. b starts only after
/// a merged, from a's merge (it sees a's files), and both land without a conflict; c runs
/// alongside a (each waits until the other started). Each agent notes what it saw in `seen`.
#[test]
fn serialize_overlaps_runs_overlapping_rows_one_after_another_from_the_merge_and_others_alongside()
{
    let sb = repo();
    let seen = tempfile::tempdir().expect("tempdir");
    let s = seen.path().display();
    let agent = seen.path().join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "meet() {{ i=0; while [ ! -e '{s}/'$1 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n\
             \x20 [ -e '{s}/'$1 ] || touch \"{s}/$RUNNER_ITEM_ID-alone\"; }}\n\
             touch \"{s}/$RUNNER_ITEM_ID-started\"\n\
             case $RUNNER_ITEM_ID in\n\
             a) meet c-started; echo alpha > shared.txt; echo one > a.txt ;;\n\
             c) meet a-started; echo three > c.txt ;;\n\
             b) cat shared.txt > '{s}/b-saw'; [ -e a.txt ] || exit 3; echo beta > shared.txt ;;\n\
             esac\n\
             printf '{{\"status\":\"completed\",\"summary\":\"done\"}}' > \"$RUNNER_REPORT\"\n"
        ),
    )
    .expect("agent");
    sb.write(
        "in.csv",
        "id,files,task\na,shared.txt,first\nb,shared.txt,second\nc,c.txt,other\n",
    );
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\nfiles_column: files\nisolate: worktree\n\
             serialize_overlaps: true\ncommand: [sh, {:?}]\n---\nDo this: {{task}}\n",
            agent.display().to_string()
        ),
    );
    std::fs::write(sb.join(".git/info/exclude"), "in.csv\nBATCH.md\n").expect("exclude");
    let before = sb.tree();
    let alone = sb.run(&["batch", "BATCH.md", "--format", "plain"]);
    assert_eq!(alone.code, 2, "{alone:?}");
    assert!(
        alone.stderr.contains("--serialize-overlaps") && alone.stderr.contains("needs --merge"),
        "{alone:?}"
    );
    assert_eq!(sb.tree(), before, "nothing on disk changed");
    let with_best_of = sb.run(&["batch", "BATCH.md", "--merge", "--best-of", "2"]);
    assert_eq!(with_best_of.code, 2, "{with_best_of:?}");
    assert!(
        with_best_of
            .stderr
            .contains("--serialize-overlaps does not go with --best-of"),
        "{with_best_of:?}"
    );
    assert_eq!(sb.tree(), before, "nothing on disk changed");
    let flags = ["--merge", "--jobs", "3", "--sandbox", "none"];
    let dry = sb.run(&[&["batch", "BATCH.md", "--dry-run"][..], &flags].concat());
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout.contains("Serialized (--serialize-overlaps)"),
        "{dry:?}"
    );
    assert!(
        dry.stdout.contains("  a → b\n"),
        "the chain is shown: {dry:?}"
    );
    let r = sb.run(&[&["batch", "BATCH.md", "--format", "plain"][..], &flags].concat());
    assert_eq!(r.code, 0, "{r:?}");
    let saw = std::fs::read_to_string(seen.path().join("b-saw")).unwrap_or_default();
    assert_eq!(saw, "alpha\n", "b started from a's merge");
    for id in ["a", "c"] {
        assert!(
            !seen.path().join(format!("{id}-alone")).exists(),
            "{id} ran alongside the other"
        );
    }
    let out = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b", "c"] {
        assert_eq!(out[id]["status"], "completed", "{id}: {r:?}");
        assert_ne!(out[id]["merged"], "", "{id} landed: {r:?}");
    }
    assert_eq!(sb.read("shared.txt"), "beta\n", "b's change on top of a's");
    assert!(sb.join("a.txt").is_file() && sb.join("c.txt").is_file());
    assert_eq!(merges(&sb).len(), 3, "{r:?}");
    assert!(!r.stdout.contains("FAILED"), "{r:?}");
}
