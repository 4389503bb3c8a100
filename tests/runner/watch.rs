//! Watching a team: plain output, `status`, `status --brief`, `--dry-run` (snapshots), and
//! dependencies between items (issue: watching a team work).

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::harness::{Sandbox, agent, by_id};

fn csv_batch(sb: &Sandbox, rows: &str) {
    sb.write_csv(rows);
}

fn run(sb: &Sandbox, extra: &[&str]) -> crate::harness::Run {
    sb.fake_batch(extra)
}

fn finish_order(sb: &Sandbox) -> Vec<String> {
    sb.read("workers-output.runner/journal.jsonl")
        .lines()
        .filter(|l| l.contains("\"event\":\"item_finished\""))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["outcome"]["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn snapshots_of_plain_output_status_brief_and_dry_run() {
    let sb = Sandbox::new();
    csv_batch(
        &sb,
        "id,mode,depends_on\na,success,\nb,noreport,\nc,success,a\nd,success,b\n",
    );
    let settings = {
        let mut s = insta::Settings::clone_current();
        s.add_filter(&regex_escape(&sb.path().display().to_string()), "[SANDBOX]");
        s.add_filter(&regex_escape(&agent("fake_agent.py")), "[AGENT]");
        s.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TIME]");
        s.add_filter(r"\[ *\d+\.\ds\]", "[DUR]");
        s.add_filter(r"in \d+\.\ds", "in [DUR]");
        s.add_filter(r"  \d+\.\ds  ", "  [DUR]  ");
        s.add_filter(r"pid \d+", "pid [PID]");
        s
    };
    let _guard = settings.bind_to_scope();
    let dry = run(&sb, &["--dry-run", "--jobs", "1"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    insta::assert_snapshot!("dry_run", dry.stdout);
    let r = run(&sb, &["--jobs", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    insta::assert_snapshot!("plain_output", r.stdout);
    let status = sb.run(&["status"]);
    // The team has an item that did not complete: status says so by its exit code too.
    assert_eq!(status.code, 1, "{status:?}");
    insta::assert_snapshot!("status", status.stdout);
    let brief = sb.run(&["status", "--brief", "workers-output.csv"]);
    insta::assert_snapshot!("status_brief", brief.stdout);
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

#[test]
fn a_chain_runs_in_order_and_a_diamond_joins() {
    let sb = Sandbox::new();
    csv_batch(
        &sb,
        "id,mode,depends_on\nc,success,b\nb,success,a\na,success,\n",
    );
    let r = run(&sb, &["--jobs", "3"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(finish_order(&sb), vec!["a", "b", "c"]);
    let sb = Sandbox::new();
    csv_batch(
        &sb,
        "id,mode,depends_on\na,success,\nb,slow,a\nc,success,a\nd,success,b;c\n",
    );
    let r = run(&sb, &["--jobs", "4"]);
    assert_eq!(r.code, 0, "{r:?}");
    let order = finish_order(&sb);
    assert_eq!(order.first().map(String::as_str), Some("a"));
    assert_eq!(order.last().map(String::as_str), Some("d"), "{order:?}");
}

#[test]
fn dependents_of_a_failed_item_are_skipped_and_never_start() {
    let sb = Sandbox::new();
    csv_batch(
        &sb,
        "id,mode,depends_on\na,noreport,\nb,success,a\nc,success,b\nx,success,\n",
    );
    let r = run(&sb, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "failed");
    assert_eq!(rows["b"]["status"], "skipped");
    assert_eq!(
        rows["b"]["error"],
        "prerequisite a did not complete (failed)"
    );
    assert_eq!(rows["c"]["status"], "skipped");
    assert_eq!(rows["c"]["attempts"], "0");
    assert_eq!(rows["x"]["status"], "completed");
    assert!(
        !sb.join("workers-output.runner/teammates/2-b").exists(),
        "b never started"
    );
}

#[test]
fn cycles_and_unknown_prerequisites_are_input_errors() {
    for (rows, want) in [
        // The problem names the row's line in the CSV.
        (
            "id,mode,depends_on\nx,success,\na,success,b\nb,success,a\n",
            "line 3: a cycle of prerequisites: a → b → a",
        ),
        (
            "id,mode,depends_on\nx,success,\na,success,zz\n",
            "line 3: item a waits for zz, which is not in this batch",
        ),
    ] {
        let sb = Sandbox::new();
        csv_batch(&sb, rows);
        let before = sb.tree();
        let r = run(&sb, &[]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains(want), "want {want:?}: {r:?}");
        assert_eq!(sb.tree(), before);
    }
}

#[test]
fn status_works_from_another_process_while_the_run_goes_on() {
    let sb = Sandbox::new();
    csv_batch(
        &sb,
        "id,mode,depends_on\na,success,\nb,hang,\nc,success,b\n",
    );
    let f = agent("fake_agent.py");
    let mut runner = sb
        .batch_cmd(&["--id-column", "id", "--grace", "2s"], &["python3", &f])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let s = sb.run(&["status", "workers-output.runner"]);
        if s.stdout.contains("Running:") && s.stdout.contains("1 completed") {
            break s;
        }
        assert!(Instant::now() < until, "status never showed the run: {s:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.stdout.contains("— running (runner pid"),
        "{status:?}"
    );
    assert!(status.stdout.contains("2-b  attempt 1"), "{status:?}");
    // The running teammate's last activity comes from its attempt logs' times.
    assert!(
        status
            .stdout
            .lines()
            .any(|l| l.contains("2-b  attempt 1") && l.contains("(last activity ")),
        "{status:?}"
    );
    assert!(
        status
            .stdout
            .contains("Waiting for prerequisites:\n  3-c  after b"),
        "{status:?}"
    );
    let brief = sb.run(&["status", "--brief"]);
    assert!(
        brief.stdout.contains("- b (running, attempt 1)")
            && brief.stdout.contains("- c (waiting): after b"),
        "{brief:?}"
    );
    let _ = std::process::Command::new("kill")
        .args(["-INT", &runner.id().to_string()])
        .status();
    assert_eq!(runner.wait().expect("wait").code(), Some(130));
    let after = sb.run(&["status", "--brief"]);
    assert!(
        after
            .stdout
            .starts_with("team workers-output: interrupted;"),
        "{after:?}"
    );
}

#[test]
fn the_terminal_renderer_is_not_used_when_stdout_is_not_a_terminal() {
    let sb = Sandbox::new();
    csv_batch(&sb, "id,mode\na,success\n");
    let f = agent("fake_agent.py");
    // The default format is human: with stdout piped it must fall back to plain lines.
    let r = sb.batch(&["--id-column", "id"], &["python3", &f]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !r.stdout.contains('\u{1b}') && !r.stdout.contains('\r'),
        "{r:?}"
    );
    assert!(
        r.stdout.lines().any(|l| l.starts_with(" COMPLETED [")),
        "{r:?}"
    );
}

#[test]
fn trace_shows_one_bar_per_attempt_on_the_lanes_that_ran_at_once() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "flaky"), ("c", "failed")]);
    let r = sb.fake_batch(&[
        "--jobs",
        "2",
        "--retries",
        "1",
        "--retry-delay",
        "0s",
        "--trace",
        "t.json",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let doc: serde_json::Value = serde_json::from_str(&sb.read("t.json")).expect("trace JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let bars: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    // a: 1 attempt, b: fails then passes, c: fails twice.
    assert_eq!(bars.len(), 5, "{doc}");
    let lanes: std::collections::BTreeSet<u64> =
        bars.iter().filter_map(|e| e["tid"].as_u64()).collect();
    assert!(
        lanes.len() <= 2 && lanes.contains(&1),
        "--jobs 2 uses at most two lanes: {lanes:?}"
    );
    let completed = bars.iter().filter(|e| e["cat"] == "completed").count();
    assert_eq!(completed, 2, "a and b's second attempt");
    assert!(
        bars.iter()
            .all(|e| e["dur"].as_u64().is_some_and(|d| d > 0))
    );
}

#[test]
fn show_and_logs_tell_one_items_attempts_report_and_log() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "flaky"), ("c", "nonzero")]);
    let r = sb.fake_batch(&[
        "--retries",
        "1",
        "--retry-delay",
        "0s",
        "--retry-on",
        "failed",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    // The output CSV names the team, as for `runner status`.
    let show = sb.run(&["show", "b", "workers-output.csv"]);
    assert_eq!(show.code, 0, "{show:?}");
    let text = &show.stdout;
    assert!(
        text.contains("Item b (teammate 2-b): completed after 2 attempt(s)"),
        "{text}"
    );
    assert!(text.contains("worked on retry"), "the summary: {text}");
    let attempts: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "Attempts:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(attempts.len(), 2, "{text}");
    assert!(
        attempts[0].contains("failed") && attempts[0].contains("exited with code 1"),
        "{text}"
    );
    assert!(attempts[1].contains("completed"), "{text}");
    assert!(
        text.contains("\"status\": \"completed\""),
        "the report: {text}"
    );
    assert!(
        text.contains("Prompt:") && text.contains("completed.jsonl"),
        "a completed item's prompt is kept in the record: {text}"
    );

    let show = sb.run(&["show", "c", "workers-output.runner"]);
    assert!(
        show.stdout.contains("crashing"),
        "the telling log's last lines: {show:?}"
    );

    let logs = sb.run(&[
        "logs",
        "b",
        "workers-output.csv",
        "--attempt",
        "1",
        "--stderr",
    ]);
    assert_eq!(logs.code, 0, "{logs:?}");
    assert_eq!(logs.stdout.trim(), "transient failure");
    let logs = sb.run(&["logs", "a", "workers-output.csv"]);
    assert_eq!(logs.stdout.trim(), "done");

    let missing = sb.run(&["show", "zz", "workers-output.csv"]);
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(missing.stderr.contains("unknown item `zz`"), "{missing:?}");
}

/// Debian's Chromium, when it is installed (`.ci/run` installs it).
fn chromium() -> Option<std::path::PathBuf> {
    ["chromium", "chromium-browser"]
        .iter()
        .find_map(|name| which_program(name))
}

fn which_program(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// The DOM of the page `file` in the sandbox after Chromium loaded it and ran its script
/// (`--headless --dump-dom`); `None`, with a note that the browser check was skipped, when
/// Chromium is not installed.
pub(crate) fn dump_dom(sb: &Sandbox, file: &str) -> Option<String> {
    let Some(browser) = chromium() else {
        crate::skip::skip(
            "Chromium is not installed (apt-get install chromium); the page was written and checked as text only",
        );
        return None;
    };
    let profile = tempfile::tempdir().expect("profile dir");
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", sb.join(file).display()))
        .stderr(Stdio::null())
        .output()
        .expect("run chromium");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_html_report_renders_in_chromium_without_script_errors_and_lists_every_item() {
    let sb = Sandbox::new();
    sb.write_rows(&[
        ("a", "success"),
        ("b", "flaky"),
        ("c", "failed"),
        ("<script>alert(1)</script>", "success"),
    ]);
    let r = sb.fake_batch(&["--jobs", "2", "--retries", "1", "--retry-delay", "0s"]);
    assert_eq!(r.code, 1, "{r:?}");
    // A replay of c: a second run on the same time axis.
    let r = sb.fake_batch(&["--only", "c"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rep = sb.run(&["report", "workers-output.csv", "--html", "report.html"]);
    assert_eq!(rep.code, 0, "{rep:?}");
    let page = sb.read("report.html");
    assert!(!page.contains("<script>alert"), "agent text is escaped");
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "no external asset"
    );
    let Some(dom) = dump_dom(&sb, "report.html") else {
        return;
    };
    assert!(
        dom.contains("data-ready=\"1\""),
        "the page's script ran to its end: {dom}"
    );
    assert_eq!(
        dom.matches("<tr data-id=").count(),
        4,
        "every item is listed: {dom}"
    );
    assert!(
        dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{dom}"
    );
    // b failed once then passed: two bars, the second labelled as a retry (its number
    // first, so a narrow bar still shows it); c's replay is one more bar.
    assert_eq!(
        dom.matches("class=\"bar ").count(),
        7,
        "one bar per attempt: {dom}"
    );
    assert!(dom.contains(">#2 2-b<"), "{dom}");
    // The table lists items in input order, whatever order they finished in.
    let at = |id: &str| dom.find(&format!("<tr data-id=\"{id}\"")).expect("row");
    assert!(at("a") < at("b") && at("b") < at("c"), "{dom}");
    // A legend for the colours and bands, the replay's start on the shared axis, and what
    // each item found: its output's fields as columns, and the files it changed.
    assert!(
        dom.contains("class=\"legend\"") && dom.contains("the team paused"),
        "{dom}"
    );
    assert!(dom.contains("<b>run 2</b>"), "{dom}");
    assert!(
        dom.contains("<th>ok</th>") && dom.contains("<th>echo</th>"),
        "{dom}"
    );
    assert!(dom.contains("<th>files modified</th>"), "{dom}");
}

#[test]
fn dry_run_after_a_run_marks_what_completed_and_counts_only_what_will_run() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "failed"), ("c", "success")]);
    assert_eq!(sb.fake_batch(&[]).code, 1);
    let before = sb.tree();
    let r = sb.fake_batch(&["--dry-run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains(": 1 of 3 item(s) (2 completed earlier, not run again),"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("1-a  (id a)  completed earlier; not run again"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("2-b  (id b)\n"),
        "b runs again: {}",
        r.stdout
    );
    assert_eq!(sb.tree(), before, "a dry run writes nothing");
}

#[test]
fn jobs_zero_runs_every_item_at_once_and_a_share_of_the_cpus_is_accepted() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "success"), ("c", "success")]);
    let r = sb.fake_batch(&["--jobs", "0", "--dry-run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("3 of 3 item(s), 3 at a time"),
        "{}",
        r.stdout
    );
    let r = sb.fake_batch(&["--jobs", "50%"]);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn status_exits_1_when_items_did_not_complete_and_lists_the_teams_it_knows() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "failed")]);
    assert_eq!(sb.fake_batch(&[]).code, 1);
    sb.write_rows(&[("a", "success")]);
    assert_eq!(sb.fake_batch(&["--output", "good.csv"]).code, 0);
    let bad = sb.run(&["status", "workers-output.csv", "--brief"]);
    assert_eq!(bad.code, 1, "{bad:?}");
    let good = sb.run(&["status", "good.csv", "--brief"]);
    assert_eq!(good.code, 0, "{good:?}");
    let list = sb.run(&["status", "--list"]);
    assert_eq!(list.code, 1, "one team did not complete: {list:?}");
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{list:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("workers-output ") && l.contains("1 failed")),
        "{list:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("good ") && l.contains("1 completed")),
        "{list:?}"
    );
}
