//! Teammates talk back while they work (issue 28, DESIGN §3 `RUNNER_PROGRESS`): lines a
//! teammate appends to its progress file show in `runner status` while it still runs, are
//! journaled, `runner show` gives the last one and the HTML timeline marks each; a bad line
//! is skipped with a warning (also in the teammate's stderr log) and the item still completes — unconfined and under `--sandbox landlock`.

use std::process::Stdio;

use crate::harness::{Run, Sandbox, landlock_or_skip, wait_for};

/// The agent: says where it is (a good line, a bad one, a blocker), then waits for `go`.
const AGENT: &str = r#"cat > /dev/null
printf '%s\n' '{"status":"in_progress","progress":"50%","discoveries":["tabs are dropped"],"files":["a.rs"]}' >> "$RUNNER_PROGRESS"
printf 'half a thought\n' >> "$RUNNER_PROGRESS"
printf '%s\n' '{"status":"blocked","blocker":"needs the staging key","needs":"user"}' >> "$RUNNER_PROGRESS"
while [ ! -e "$GO" ]; do sleep 0.05; done
printf '{"status":"completed","summary":"done"}' > "$RUNNER_REPORT"
"#;

fn run_talking_teammate(mode: &str) {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\na\n");
    sb.write("instr.md", "Do {id}\n");
    let agent = sb.write("agent.sh", AGENT).display().to_string();
    std::fs::create_dir_all(sb.join("work")).expect("work");
    std::fs::create_dir_all(sb.join("out")).expect("out");
    let (input, instr, output) = (
        sb.join("in.csv").display().to_string(),
        sb.join("instr.md").display().to_string(),
        sb.join("out/workers-output.csv").display().to_string(),
    );
    // The workspace lies outside the teammates' working directory, so landlock can confine.
    let runner = sb
        .cmd(&[
            "batch",
            "--input",
            &input,
            "--instruction",
            &instr,
            "--output",
            &output,
            "--id-column",
            "id",
            "--format",
            "plain",
            "--sandbox",
            mode,
            "--",
            "sh",
            &agent,
        ])
        .current_dir(sb.join("work"))
        .env("GO", sb.join("go"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn runner");
    let mut seen = String::new();
    wait_for("the blocker in status", 30, || {
        seen = sb.run(&["status", &output]).stdout;
        seen.contains("says: blocked (needs user): needs the staging key")
    });
    assert!(
        seen.contains("1-a  attempt 1"),
        "{mode}: shown while it runs: {seen}"
    );
    let brief = sb.run(&["status", "--brief", &output]).stdout;
    assert!(
        brief.contains(
            "- a (running, attempt 1): Do a — says: blocked (needs user): needs the staging key"
        ),
        "{mode}: the brief a lead agent reads: {brief}"
    );
    let journal = sb.read("out/workers-output.runner/journal.jsonl");
    let said: Vec<&str> = journal
        .lines()
        .filter(|l| l.contains("\"event\":\"progress\""))
        .collect();
    assert_eq!(said.len(), 2, "{mode}: the two good lines: {journal}");
    assert!(
        said[0].contains("\"discoveries\":[\"tabs are dropped\"]")
            && said[0].contains("\"teammate\":\"1-a\"")
            && said[0].contains("\"attempt\":1"),
        "{}",
        said[0]
    );
    std::fs::write(sb.join("go"), "").expect("go");
    let r: Run = runner.wait_with_output().expect("wait").into();
    assert_eq!(r.code, 0, "{mode}: a bad line never fails the item: {r:?}");
    assert!(
        r.stderr
            .contains("1-a attempt 1: progress line 2 ignored: not a progress line"),
        "{mode}: {r:?}"
    );
    assert!(
        r.stdout.contains(&format!("sandbox {mode}")),
        "{mode}: run as asked: {r:?}"
    );
    let show = sb.run(&["show", "a", &output]);
    assert!(
        show.stdout
            .contains("Said:    blocked (needs user): needs the staging key (attempt 1)"),
        "{mode}: {show:?}"
    );
    let logs = sb.run(&["logs", "a", &output, "--stderr"]);
    assert!(
        logs.stdout
            .contains("runner: 1-a attempt 1: progress line 2 ignored: not a progress line"),
        "{mode}: the bad line is noted in the teammate's own log: {logs:?}"
    );
    let page = sb.join("report.html").display().to_string();
    let r = sb.run(&["report", &output, "--html", &page]);
    assert_eq!(r.code, 0, "{r:?}");
    let page = sb.read("report.html");
    assert!(
        page.contains("<div class=\"said blocked\"")
            && page.contains("1-a attempt 1 at ")
            && page.contains("blocked (needs user): needs the staging key"),
        "{mode}: the timeline marks what the teammate said: {page}"
    );
}

#[test]
fn a_teammates_progress_lines_show_while_it_works_and_are_journaled() {
    run_talking_teammate("none");
}

#[test]
fn under_the_sandbox_a_teammate_still_talks_back() {
    if landlock_or_skip("progress under landlock") {
        run_talking_teammate("landlock");
    }
}

/// A teammate of a todo batch proposes a follow-up: it lands in the inbox after the
/// teammate's own item, for a person to confirm; nothing runs it.
#[test]
fn a_proposed_subtask_lands_in_the_inbox_after_the_teammates_item() {
    let sb = Sandbox::new();
    let add = sb.run(&["add", "--store", "S", "--idea", "Audit the parser"]);
    assert_eq!(add.code, 0, "{add:?}");
    let add = sb.run(&["add", "--store", "S", "Audit the lexer"]);
    assert_eq!(add.code, 0, "{add:?}");
    let agent = sb
        .write(
            "agent.sh",
            r#"cat > /dev/null
printf '%s\n' '{"subtask":{"title":"Handle tabs in the lexer","details":"seen in lex.rs line 40"}}' >> "$RUNNER_PROGRESS"
printf '{"status":"completed","summary":"audited"}' > "$RUNNER_REPORT"
"#,
        )
        .display()
        .to_string();
    let r = sb.run(&[
        "resolve", "--store", "S", "--format", "plain", "--yes", "--", "sh", &agent,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("Proposed by teammates: inbox item(s) 1 in"),
        "{r:?}"
    );
    let inbox = sb.read("S/todo.md");
    assert!(
        inbox
            .contains("- [ ] Handle tabs in the lexer @after:todo-1#1\n  seen in lex.rs line 40\n"),
        "{inbox}"
    );
    assert!(
        inbox.contains("- [ ] Audit the parser"),
        "the idea stays where it was: {inbox}"
    );
    assert!(
        sb.read("S/todo-1.md").contains("- [x] Audit the lexer"),
        "the teammate's own item is ticked"
    );
    let list = sb.run(&["list", "--store", "S"]);
    assert!(
        list.stdout.contains("Handle tabs in the lexer"),
        "proposed, listed, not run: {list:?}"
    );
}
