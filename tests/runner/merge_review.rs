//! Merging and reviewing as a person meets it (issue 57): a merge the person's own edits
//! block, the review listing and its order, `accept` and `reject` of items already decided,
//! an interrupt during a merged tree's check (in a run or an `accept`), and the log a failed
//! check names.

use crate::harness::{Sandbox, by_id, git};
use crate::worktree::{batch, repo};

/// A repository whose committed `check.sh` is `script` (a merged tree's check).
fn repo_with_check(script: &str) -> Sandbox {
    let sb = repo();
    commit_check(&sb, script);
    sb
}

/// Commit `script` as `check.sh` in `sb`.
fn commit_check(sb: &Sandbox, script: &str) {
    sb.write("check.sh", script);
    git(sb.path(), &["add", "check.sh"]);
    git(sb.path(), &["commit", "-q", "-m", "check"]);
}

/// A `--merge=review` run of `items` in `sb` (with `extra` flags) that succeeded: its
/// completed items await review in team `workers-output.runner`.
fn review_run(sb: &Sandbox, items: &[(&str, &str)], extra: &[&str]) {
    let r = batch(sb, items, &[&["--merge=review"][..], extra].concat());
    assert_eq!(r.code, 0, "{r:?}");
}

/// A check that signals it started (touches `check-started` in the sandbox) and then runs
/// for a minute: what an interrupt meets.
fn slow_check(sb: &Sandbox) -> std::path::PathBuf {
    let started = sb.join("check-started");
    commit_check(sb, &format!("touch '{}'\nsleep 60\n", started.display()));
    started
}

/// A merged tree's check that edits `shared.txt` in the main working tree, as a person
/// editing their checkout while the queue runs would: the target can then not move forward.
fn check_that_edits_the_main_tree(sb: &Sandbox) {
    let main = sb.join("shared.txt");
    commit_check(sb, &format!("echo 'my own edit' >> '{}'\n", main.display()));
}

#[test]
fn a_merge_blocked_by_local_changes_names_the_file_and_what_to_do() {
    let sb = repo();
    check_that_edits_the_main_tree(&sb);
    let r = batch(
        &sb,
        &[("a", "EDIT shared.txt=alpha")],
        &["--merge", "--verify-merged", "sh check.sh"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(out["a"]["status"], "failed", "{r:?}");
    assert_eq!(out["a"]["merged"], "", "a never landed");
    let why = &out["a"]["error"];
    assert!(
        why.contains("shared.txt") && why.contains("commit or stash"),
        "the reason names the file in the way and what to do: {why}"
    );
    assert!(
        sb.read("shared.txt").contains("my own edit"),
        "the person's edit is kept"
    );
}

#[test]
fn status_names_the_items_awaiting_review_until_they_are_accepted() {
    let sb = repo();
    review_run(
        &sb,
        &[("a", "EDIT a.txt=one"), ("b", "EDIT b.txt=two")],
        &[],
    );
    let status = sb.run(&["status", "workers-output.runner"]);
    assert!(
        status
            .stdout
            .contains("Awaiting review, completed but not merged")
            && status.stdout.contains("1-a, 2-b"),
        "status says nothing of theirs landed: {status:?}"
    );
    let accepted = sb.run(&["accept", "a", "--team", "workers-output.runner"]);
    assert_eq!(accepted.code, 0, "{accepted:?}");
    let status = sb.run(&["status", "workers-output.runner"]);
    let line = status
        .stdout
        .lines()
        .find(|l| l.starts_with("Awaiting review"))
        .unwrap_or_default();
    assert!(line.ends_with(": 2-b"), "only b still waits: {status:?}");
}

#[test]
fn an_interrupt_during_a_merged_trees_check_leaves_no_check_running() {
    let sb = repo();
    let started = slow_check(&sb);
    crate::worktree::rows(&sb, &[("a", "EDIT a.txt=one")]);
    let agent = crate::harness::agent("edit_agent.py");
    let flags = [
        crate::worktree::ISOLATED,
        &["--merge", "--verify-merged", "sh check.sh"],
    ]
    .concat();
    let child = sb
        .batch_cmd(&flags, &["python3", &agent])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runner");
    crate::harness::wait_for("the merged tree's check to start", 60, || started.exists());
    let pid = child.id().to_string();
    let _ = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status();
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let left = sb.survivors_after(5.0);
    assert!(left.is_empty(), "the check was left running: {left:?}");
    assert_eq!(
        git(sb.path(), &["log", "--merges", "--format=%H", "main"]),
        "",
        "nothing landed"
    );
}

#[test]
fn an_interrupted_accept_leaves_no_check_running_and_the_item_awaiting_review() {
    let sb = repo();
    let started = slow_check(&sb);
    review_run(
        &sb,
        &[("a", "EDIT a.txt=one")],
        &["--verify-merged", "sh check.sh"],
    );
    let main_before = git(sb.path(), &["rev-parse", "main"]);
    let child = sb
        .cmd(&["accept", "a", "--team", "workers-output.runner"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runner accept");
    crate::harness::wait_for("the merged tree's check to start", 60, || started.exists());
    let _ = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let left = sb.survivors_after(5.0);
    assert!(left.is_empty(), "the check was left running: {left:?}");
    assert_eq!(git(sb.path(), &["rev-parse", "main"]), main_before);
    let review = sb.run(&["review", "workers-output.runner"]);
    assert!(
        review.stdout.contains("a (1-a)"),
        "a still awaits review: {review:?}"
    );
}

#[test]
fn accepting_an_item_already_decided_says_what_became_of_it() {
    let sb = repo();
    review_run(
        &sb,
        &[("a", "EDIT a.txt=one"), ("b", "EDIT b.txt=two")],
        &[],
    );
    let team = ["--team", "workers-output.runner"];
    assert_eq!(sb.run(&[&["accept", "a"][..], &team].concat()).code, 0);
    assert_eq!(sb.run(&[&["reject", "b"][..], &team].concat()).code, 0);
    let journal_before = sb.read("workers-output.runner/journal.jsonl");
    let again = sb.run(&[&["accept", "a"][..], &team].concat());
    assert_eq!(again.code, 2, "{again:?}");
    let merge = git(sb.path(), &["log", "--merges", "-1", "--format=%H", "main"]);
    assert!(
        again
            .stderr
            .contains(&format!("merged as {}", &merge.trim()[..10])),
        "a was merged: {again:?}"
    );
    let again = sb.run(&[&["accept", "b"][..], &team].concat());
    assert_eq!(again.code, 2, "{again:?}");
    assert!(
        again.stderr.contains("[rejected]"),
        "b was rejected: {again:?}"
    );
    assert_eq!(
        sb.read("workers-output.runner/journal.jsonl"),
        journal_before,
        "nothing recorded"
    );
}

#[test]
fn a_merged_tree_that_fails_its_check_names_the_queues_log_as_its_log() {
    let sb = repo_with_check("echo 'the merged tree is broken'; exit 1\n");
    let r = batch(
        &sb,
        &[("a", "EDIT a.txt=one")],
        &["--merge", "--verify-merged", "sh check.sh"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(out["a"]["failure_kind"], "merge_failed", "{r:?}");
    let log = &out["a"]["log"];
    assert!(
        log.ends_with("merge-queue.log")
            && std::fs::read_to_string(log)
                .unwrap_or_default()
                .contains("the merged tree is broken"),
        "the log column names the file with the check's output: {log}"
    );
}

#[test]
fn review_lists_the_items_in_item_order_whatever_order_they_finished_in() {
    let sb = repo();
    // a finishes last: it waits until b and c reported.
    let done = sb.join("done");
    sb.write(
        "agent.sh",
        format!(
            "if [ \"$RUNNER_ITEM_ID\" = a ]; then\n\
             \x20 i=0; while [ $(ls '{d}' 2>/dev/null | wc -l) -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n\
             fi\n\
             echo \"$RUNNER_ITEM_ID\" > \"$RUNNER_ITEM_ID.txt\"\n\
             printf '{{\"status\":\"completed\",\"summary\":\"edited\"}}' > \"$RUNNER_REPORT\"\n\
             mkdir -p '{d}'; touch \"{d}/$RUNNER_ITEM_ID\"\n",
            d = done.display()
        ),
    );
    let agent = sb.join("agent.sh").display().to_string();
    git(sb.path(), &["add", "agent.sh"]);
    git(sb.path(), &["commit", "-q", "-m", "agent"]);
    crate::worktree::rows(&sb, &[("a", "one"), ("b", "two"), ("c", "three")]);
    let flags = [
        crate::worktree::ISOLATED,
        &["--merge=review", "--jobs", "3", "--sandbox", "none"],
    ]
    .concat();
    let r = sb.batch(&flags, &["sh", &agent]);
    assert_eq!(r.code, 0, "{r:?}");
    let shown = sb.run(&["review", "workers-output.runner"]);
    let at = |s: &str| shown.stdout.find(s).unwrap_or(usize::MAX);
    assert!(
        at("a (1-a)") < at("b (2-b)") && at("b (2-b)") < at("c (3-c)"),
        "{shown:?}"
    );
}

#[test]
fn review_says_when_an_items_branch_changes_nothing() {
    let sb = repo();
    // b writes shared.txt as it already is.
    review_run(
        &sb,
        &[("a", "EDIT a.txt=one"), ("b", "EDIT shared.txt=original")],
        &[],
    );
    let shown = sb.run(&["review", "workers-output.runner"]);
    let b = &shown.stdout[shown.stdout.find("b (2-b)").unwrap_or(0)..];
    assert!(
        b.contains("no changes against main: accepting it merges nothing"),
        "{shown:?}"
    );
    let a = &shown.stdout[..shown.stdout.find("b (2-b)").unwrap_or(0)];
    assert!(!a.contains("no changes"), "{shown:?}");
}

/// `runner accept` and `runner reject` write their decision into the run's output at once:
/// the accepted item's `merged` commit, the rejected one `failed` / `rejected` — in a CSV
/// output whose rows are named by an id column, and in a JSON Lines one named by row number.
#[test]
fn accept_and_reject_update_the_runs_output_file_at_once() {
    let sb = repo();
    review_run(
        &sb,
        &[("a", "EDIT a.txt=one"), ("b", "EDIT b.txt=two")],
        &[],
    );
    let team = ["--team", "workers-output.runner"];
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(out["a"]["merged"], "", "nothing landed yet");
    assert_eq!(sb.run(&[&["accept", "a"][..], &team].concat()).code, 0);
    assert_eq!(sb.run(&[&["reject", "b"][..], &team].concat()).code, 0);
    let merge = git(sb.path(), &["log", "--merges", "-1", "--format=%H", "main"]);
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(out["a"]["status"], "completed");
    assert_eq!(
        out["a"]["merged"],
        merge.trim(),
        "a's merge is in the output"
    );
    assert_eq!(out["b"]["status"], "failed");
    assert_eq!(out["b"]["failure_kind"], "rejected");
    assert!(
        out["b"]["error"].contains("rejected in review"),
        "{:?}",
        out["b"]
    );
    assert_eq!(out["b"]["merged"], "");

    // JSON Lines, rows named by their number.
    let sb = repo();
    crate::worktree::rows(&sb, &[("a", "EDIT a.txt=one"), ("b", "EDIT b.txt=two")]);
    let agent = crate::harness::agent("edit_agent.py");
    let flags = [
        "--format",
        "plain",
        "--isolate",
        "worktree",
        "--merge=review",
        "--output",
        "decided.jsonl",
    ];
    let r = sb.batch(&flags, &["python3", &agent]);
    assert_eq!(r.code, 0, "{r:?}");
    let team = ["--team", "decided.runner"];
    assert_eq!(sb.run(&[&["accept", "1"][..], &team].concat()).code, 0);
    assert_eq!(sb.run(&[&["reject", "2"][..], &team].concat()).code, 0);
    let merge = git(sb.path(), &["log", "--merges", "-1", "--format=%H", "main"]);
    let lines: Vec<serde_json::Value> = sb
        .read("decided.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines[0]["merged"], merge.trim(), "{lines:?}");
    assert_eq!(lines[0]["status"], "completed");
    assert_eq!(lines[1]["status"], "failed");
    assert_eq!(lines[1]["failure_kind"], "rejected");
    assert_eq!(lines[1]["merged"], serde_json::Value::Null);
}

/// `runner clean` keeps a team whose items await review — their branches and the journal
/// that says they wait — naming them and what to do; `--force` drops them.
#[test]
fn clean_keeps_a_team_whose_items_await_review_unless_forced() {
    let sb = repo();
    review_run(
        &sb,
        &[("a", "EDIT a.txt=one"), ("b", "EDIT b.txt=two")],
        &[],
    );
    let r = sb.run(&["clean", "workers-output.runner", "--yes"]);
    assert_eq!(r.code, 1, "kept something: {r:?}");
    for said in [
        "item     1-a awaits review (kept, with its team's workspace)",
        "Kept team workers-output: its item(s) 1-a, 2-b await review",
        "runner accept ID…",
        "`--force` drops them",
    ] {
        assert!(r.stdout.contains(said), "{said}: {r:?}");
    }
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    assert!(
        branches.contains("runner/workers-output/1-a")
            && branches.contains("runner/workers-output/2-b"),
        "{branches}"
    );
    let review = sb.run(&["review", "workers-output.runner"]);
    assert!(
        review.stdout.contains("a (1-a)") && review.stdout.contains("b (2-b)"),
        "still reviewable: {review:?}"
    );
    // Once decided, clean removes the team; with --force it would have at once.
    let team = ["--team", "workers-output.runner"];
    assert_eq!(sb.run(&[&["accept", "a"][..], &team].concat()).code, 0);
    let r = sb.run(&["clean", "workers-output.runner", "--yes"]);
    assert_eq!(r.code, 1, "b still waits: {r:?}");
    assert!(r.stdout.contains("its item(s) 2-b await review"), "{r:?}");
    let r = sb.run(&["clean", "workers-output.runner", "--yes", "--force"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Removed team"), "{r:?}");
    let branches = git(sb.path(), &["branch", "--format=%(refname:short)"]);
    assert_eq!(branches.trim(), "main", "{branches}");
}

/// A `--merge=review` run whose item `a` writes markup that would run if shown as HTML
/// (`x.html`: a script and an image whose error handler sets `window.__pwned`) and is then
/// accepted (merged), and whose item `b` writes a file longer than a diff is shown
/// (`big.txt`) and still awaits review. Returns the markup.
pub(crate) fn review_run_with_markup(sb: &Sandbox) -> &'static str {
    const MARKUP: &str =
        "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">";
    let agent = sb.join(".git/agent.sh");
    std::fs::write(
        &agent,
        format!(
            "case $RUNNER_ITEM_ID in\n\
             a) cat > x.html <<'EOF'\n{MARKUP}\nEOF\n;;\n\
             b) i=0; while [ $i -lt 5000 ]; do echo \"line $i of a long file\"; i=$((i+1)); done > big.txt ;;\n\
             esac\n\
             printf '{{\"status\":\"completed\",\"summary\":\"done\"}}' > \"$RUNNER_REPORT\"\n"
        ),
    )
    .expect("agent");
    crate::worktree::rows(sb, &[("a", "markup"), ("b", "long")]);
    let flags = [
        crate::worktree::ISOLATED,
        &["--merge=review", "--jobs", "2"],
    ]
    .concat();
    let r = sb.batch(&flags, &["sh", &agent.display().to_string()]);
    assert_eq!(r.code, 0, "{r:?}");
    let accepted = sb.run(&["accept", "a", "--team", "workers-output.runner"]);
    assert_eq!(accepted.code, 0, "{accepted:?}");
    MARKUP
}

/// The HTML report shows each item's diff — the merged one's and the one awaiting review —
/// escaped, and a long one cut with a marker.
#[test]
fn the_html_report_shows_each_items_diff_escaped_and_bounded() {
    let sb = repo();
    let markup = review_run_with_markup(&sb);
    let r = sb.run(&["report", "workers-output.runner", "--html", "report.html"]);
    assert_eq!(r.code, 0, "{r:?}");
    let page = sb.read("report.html");
    assert!(page.contains("<th>diff</th>"), "a diff column");
    let escaped = markup
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    assert!(
        page.contains(&format!("+{escaped}")),
        "a's merged diff, escaped"
    );
    assert!(
        !page.contains("<script>window.__pwned"),
        "nothing of it is markup"
    );
    assert!(page.contains("+line 0 of a long file"), "b's diff");
    assert!(
        page.contains("the diff is cut here")
            && page.contains("git diff refs/heads/main...refs/heads/runner/workers-output/2-b"),
        "cut, saying how to see the rest"
    );
    assert!(!page.contains("line 4999 of a long file"));
    assert!(page.len() < 200_000, "bounded: {} bytes", page.len());
}
