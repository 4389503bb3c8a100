//! Notifications (`--notify`, issue 53) against a webhook receiver served by `wiremock` on
//! 127.0.0.1, a command that keeps what it is given, and the terminal: one message per kind
//! of news, not one per teammate; a receiver that fails is retried, then warned about, and
//! the run is what it would have been; the webhook's secret path is shown nowhere. And the
//! OSC 9;4 progress, sent only to a terminal that reads it.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::harness::{Run, Sandbox, agent, by_id};

/// The secret part of the receiver's path, as a Slack or Discord webhook carries one.
const SECRET: &str = "T000-B000-s3cr3tw3bh00k";

/// A webhook receiver on 127.0.0.1 answering every POST with `status`, and the bodies it
/// received, in order.
struct Receiver {
    server: MockServer,
    bodies: Arc<Mutex<Vec<Value>>>,
}

struct Keep {
    status: u16,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Respond for Keep {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        self.bodies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(body);
        ResponseTemplate::new(self.status)
    }
}

impl Receiver {
    async fn start(status: u16) -> Receiver {
        let server = MockServer::start().await;
        let bodies = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .respond_with(Keep {
                status,
                bodies: bodies.clone(),
            })
            .mount(&server)
            .await;
        Receiver { server, bodies }
    }

    fn url(&self) -> String {
        format!("{}/hooks/{SECRET}", self.server.uri())
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The bodies of kind `kind`.
    fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.bodies()
            .into_iter()
            .filter(|b| b["kind"] == kind)
            .collect()
    }
}

/// `rows` (id, fake agent mode) run with `flags`, off the test's runtime.
async fn run(rows: &[(&str, &str)], flags: &[&str]) -> (Sandbox, Run) {
    let sb = Sandbox::new();
    sb.write_rows(rows);
    let cmd = sb.fake_batch_cmd(flags);
    let r = run_blocking(cmd).await;
    (sb, r)
}

async fn run_blocking(mut cmd: std::process::Command) -> Run {
    tokio::task::spawn_blocking(move || cmd.output().expect("spawn runner").into())
        .await
        .expect("join")
}

/// Twenty items that all end blocked make one `blocked` message (naming how many of them
/// its wave gathered, the first listed with their blockers), and the end one more, with
/// the counts; no message per teammate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wave_of_twenty_blocked_items_is_one_message_and_the_end_another() {
    let hook = Receiver::start(200).await;
    let ids: Vec<String> = (0..20).map(|n| format!("b{n:02}")).collect();
    let rows: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "blocked")).collect();
    let (_sb, r) = run(&rows, &["--jobs", "20", "--notify", &hook.url()]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let bodies = hook.bodies();
    assert_eq!(bodies.len(), 2, "{bodies:#?}");
    let blocked = hook.of_kind("blocked");
    assert_eq!(blocked.len(), 1, "{bodies:#?}");
    let wave = &blocked[0];
    let gathered = wave["blocked"].as_u64().unwrap_or(0);
    assert!((1..=20).contains(&gathered), "{wave:#}");
    let text = wave["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("blocked and need") || text.contains("blocked and needs"),
        "{wave:#}"
    );
    assert!(text.contains("needs an API key from a person"), "{wave:#}");
    let end = hook.of_kind("run_finished");
    assert_eq!(end.len(), 1, "{bodies:#?}");
    assert_eq!(end[0]["counts"]["blocked"], 20, "{:#}", end[0]);
    assert!(
        end[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("20 blocked")),
        "{:#}",
        end[0]
    );
}

/// A run with nothing blocked tells only its end: one message whose `text` (what Slack,
/// Discord and Mattermost show) and `counts` give every status that occurred. Set by
/// BATCH.md's `notify:` (a list), as a batch keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_a_run_is_one_message_with_its_counts() {
    let hook = Receiver::start(200).await;
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "success"), ("c", "failed")]);
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\nnotify: [{}]\ncommand: [python3, {}]\n---\n{}",
            hook.url(),
            agent("fake_agent.py"),
            crate::harness::FAKE_INSTRUCTION
        ),
    );
    let r = run_blocking(sb.cmd(&["batch", "BATCH.md", "--format", "plain"])).await;
    assert_eq!(r.code, 1, "{r:?}");
    let bodies = hook.bodies();
    assert_eq!(bodies.len(), 1, "{bodies:#?}");
    let end = &bodies[0];
    assert_eq!(end["kind"], "run_finished", "{end:#}");
    assert_eq!(end["counts"]["completed"], 2, "{end:#}");
    assert_eq!(end["counts"]["failed"], 1, "{end:#}");
    let text = end["text"].as_str().unwrap_or_default();
    assert!(text.contains("finished: 2 completed, 1 failed"), "{end:#}");
}

/// A receiver that answers 500 gets the message three times (the retries), then the run
/// warns once, naming the receiver without its secret path; its exit code and output are
/// what they would have been, and the secret is in nothing the run printed or wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_500_is_retried_then_warned_about_and_the_run_is_unchanged() {
    let hook = Receiver::start(500).await;
    let rows = [("a", "success"), ("b", "success")];
    let (sb, r) = run(&rows, &["--notify", &hook.url()]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let out = by_id(&sb.join("workers-output.csv"), "id");
    assert!(
        out.values().all(|row| row["status"] == "completed"),
        "{out:?}"
    );
    let bodies = hook.bodies();
    assert_eq!(bodies.len(), 3, "{bodies:#?}");
    assert!(
        bodies.iter().all(|b| b["kind"] == "run_finished"),
        "{bodies:#?}"
    );
    let warned: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("notification"))
        .collect();
    let host = hook.server.uri();
    assert_eq!(warned.len(), 1, "{r:?}");
    assert!(
        warned[0].starts_with("warning: the run_finished notification to ")
            && warned[0].contains(&format!("{host}/…(redacted)"))
            && warned[0].contains("500"),
        "{r:?}"
    );
    assert!(
        !r.stdout.contains(SECRET) && !r.stderr.contains(SECRET),
        "{r:?}"
    );
    for path in sb.tree().keys() {
        let bytes = std::fs::read(sb.path().join(path)).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(SECRET),
            "{} holds the secret",
            path.display()
        );
    }
}

/// `--max-fail` stopping the team is told once, with the reason, beside the end; a
/// command target gets the same messages as JSON lines on its stdin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_stopping_itself_is_told_once_also_to_a_command() {
    let hook = Receiver::start(200).await;
    let sb = Sandbox::new();
    let rows: Vec<(String, &str)> = (0..6).map(|n| (format!("r{n}"), "nonzero")).collect();
    let rows: Vec<(&str, &str)> = rows.iter().map(|(id, m)| (id.as_str(), *m)).collect();
    sb.write_rows(&rows);
    let keep = sb.write(
        "keep.py",
        "import sys\nopen(sys.argv[1], 'a').write(sys.stdin.read())\n",
    );
    let kept = sb.join("kept.jsonl").display().to_string();
    let command = format!("python3 {} {kept}", keep.display());
    let cmd = sb.fake_batch_cmd(&[
        "--jobs",
        "1",
        "--max-fail",
        "2",
        "--notify",
        &hook.url(),
        "--notify",
        &command,
    ]);
    let r = run_blocking(cmd).await;
    assert_eq!(r.code, 1, "{r:?}");
    let stopped = hook.of_kind("team_stopped");
    assert_eq!(stopped.len(), 1, "{:#?}", hook.bodies());
    assert!(
        stopped[0]["reason"]
            .as_str()
            .is_some_and(|t| t.contains("--max-fail 2")),
        "{:#}",
        stopped[0]
    );
    assert_eq!(hook.of_kind("run_finished").len(), 1);
    assert_eq!(hook.bodies().len(), 2, "{:#?}", hook.bodies());
    let lines: Vec<Value> = sb
        .read("kept.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|l| l["kind"].as_str()).collect();
    assert_eq!(kinds, ["team_stopped", "run_finished"], "{lines:#?}");
}

/// A `--notify` that is no URL and names no installed program is refused before anything
/// runs (exit 3), and a malformed URL (exit 2) without showing its path; the dry run names
/// the targets, a webhook by its host only.
#[test]
fn a_notify_target_that_cannot_work_is_refused_and_the_dry_run_names_them_redacted() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let r = sb.fake_batch(&["--notify", "no-such-notifier-program --x"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("no-such-notifier-program"), "{r:?}");
    let r = sb.fake_batch(&[
        "--notify",
        "https://hooks.example.com/hooks/s3cr3t",
        "--notify",
        "bell",
        "--dry-run",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(
            "Notify (the end, blocked items, the team's stop; once each): \
             https://hooks.example.com/…(redacted), bell"
        ) && !r.stdout.contains("s3cr3t"),
        "{r:?}"
    );
    let r = sb.fake_batch(&["--notify", "https://[::1/hooks/s3cr3t"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--notify") && !r.stderr.contains("s3cr3t"),
        "{r:?}"
    );
    let r = sb.fake_batch(&["--notify", "bell,https://hooks.example.com/hooks/s3cr3t"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("comma list") && !r.stderr.contains("s3cr3t"),
        "{r:?}"
    );
    assert!(!sb.join("workers-output.csv").exists());
}

/// On a terminal that reads it (WezTerm here), the run's progress goes to the terminal as
/// OSC 9;4 — a bar by finished items, red once one did not complete, removed at the end;
/// off a terminal, nothing of it is printed.
#[test]
fn osc_9_4_progress_goes_only_to_a_terminal_that_reads_it() {
    use crate::sandbox::{terminal_or_skip, under_terminal};
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "failed")]);
    let mut piped = sb.fake_batch_cmd(&["--jobs", "1"]);
    piped.env("TERM_PROGRAM", "WezTerm");
    let r: Run = piped.output().expect("spawn runner").into();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        !r.stdout.contains("\x1b]9;4") && !r.stderr.contains("\x1b]9;4"),
        "{r:?}"
    );
    if !terminal_or_skip("osc 9;4") {
        return;
    }
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "failed")]);
    let fake = agent("fake_agent.py");
    let mut cmd = sb.cmd(&[
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--id-column",
        "id",
        "--jobs",
        "1",
        "--",
        "python3",
        &fake,
    ]);
    cmd.env("TERM_PROGRAM", "WezTerm");
    let out = under_terminal(cmd, sb.path());
    let seen = String::from_utf8_lossy(&out.stdout).into_owned();
    let bars: Vec<&str> = seen
        .split("\x1b]9;4;")
        .skip(1)
        .filter_map(|s| s.split("\x1b\\").next())
        .collect();
    assert_eq!(bars.first(), Some(&"1;0"), "{}", seen.escape_debug());
    assert!(bars.contains(&"1;50") || bars.contains(&"2;50"), "{bars:?}");
    assert!(bars.contains(&"2;100"), "{bars:?}");
    assert_eq!(bars.last(), Some(&"0;0"), "{bars:?}");
}

/// `--notify bell` rings the terminal's bell once per kind of news — here a blocked item
/// and the end, however many items are blocked — and never off a terminal.
#[test]
fn the_bell_rings_once_per_kind_on_a_terminal() {
    use crate::sandbox::{terminal_or_skip, under_terminal};
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "blocked"), ("b", "blocked"), ("c", "success")]);
    let r = sb.fake_batch(&["--notify", "bell"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        !r.stdout.contains('\x07') && !r.stderr.contains('\x07'),
        "{r:?}"
    );
    if !terminal_or_skip("bell") {
        return;
    }
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "blocked"), ("b", "blocked"), ("c", "success")]);
    let out = under_terminal(sb.fake_batch_cmd(&["--notify", "bell"]), sb.path());
    let seen = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(seen.matches('\x07').count(), 2, "{}", seen.escape_debug());
}

/// A notify command that fails is a warning naming it; the run's exit code and output are
/// what they would have been.
#[test]
fn a_failing_notify_command_is_a_warning_not_the_runs_failure() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let r = sb.fake_batch(&["--notify", "false"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        by_id(&sb.join("workers-output.csv"), "id")["a"]["status"],
        "completed"
    );
    assert!(
        r.stderr.lines().any(
            |l| l.starts_with("warning: the run_finished notification to ")
                && l.contains("false")
                && l.contains("it ended with exit status: 1")
        ),
        "{r:?}"
    );
}

/// Ctrl-C ends the run with its notification too: one `run_finished` saying it was
/// interrupted, with the counts of what it left.
#[test]
fn an_interrupted_run_tells_its_end_once() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "hang"), ("b", "success")]);
    let keep = sb.write(
        "keep.py",
        "import sys\nopen(sys.argv[1], 'a').write(sys.stdin.read())\n",
    );
    let kept = sb.join("kept.jsonl").display().to_string();
    let command = format!("python3 {} {kept}", keep.display());
    let runner = sb
        .fake_batch_cmd(&["--jobs", "1", "--grace", "5s", "--notify", &command])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn runner");
    crate::harness::wait_for("the first attempt to start", 30, || {
        sb.read_opt("workers-output.runner/journal.jsonl")
            .is_some_and(|j| j.contains("\"attempt_started\""))
    });
    let sent = std::process::Command::new("kill")
        .args(["-INT", &runner.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let out = runner.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130));
    let lines: Vec<Value> = sb
        .read("kept.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["kind"], "run_finished", "{lines:#?}");
    assert_eq!(lines[0]["interrupted"], true, "{lines:#?}");
    assert_eq!(lines[0]["counts"]["cancelled"], 2, "{lines:#?}");
    assert!(
        lines[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("was interrupted: 2 cancelled")),
        "{lines:#?}"
    );
}

/// A todo team that completes has its workspace removed for its archive: the end's message
/// names what `runner status` follows after the run (the archive), never the removed
/// workspace — following its hint works.
#[test]
fn the_end_of_a_todo_team_that_completed_names_what_runner_status_follows() {
    let sb = Sandbox::new();
    sb.write("S/todo.md", "## Todo\n- [ ] a\n- [ ] b\n");
    let told = sb.join("told.jsonl").display().to_string();
    let command = format!("tee -a {told}");
    let fake = agent("fake_agent.py");
    let r = sb.run(&[
        "resolve", "--store", "S", "--yes", "--format", "plain", "--notify", &command, "--",
        "python3", &fake,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        sb.join("S/todo-1.archive.jsonl").is_file(),
        "the team completed and was archived: {r:?}"
    );
    let lines: Vec<Value> = sb
        .read("told.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let end = &lines[0];
    assert_eq!(end["kind"], "run_finished", "{end:#}");
    let text = end["text"].as_str().unwrap_or_default();
    let see = text
        .split_once("See: runner status ")
        .map(|(_, at)| at.trim())
        .unwrap_or_default();
    assert!(see.ends_with("todo-1.archive.jsonl"), "{end:#}");
    assert_eq!(end["archive"], see, "{end:#}");
    assert!(end["workspace"].is_null(), "the workspace is gone: {end:#}");
    let r = sb.run(&["status", see]);
    assert_eq!(r.code, 0, "the hint works: {r:?}");
}
