//! A finished run's results outlive its workspace, and status/list always answer (issue 18,
//! items 1 and 5): the archive of a fully completed todo team, the output table's `log`
//! column, the resume command, never-started items, the waiting batches in `runner list`.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::harness::{Run, Sandbox, agent, by_id, wait_for};

fn fake() -> String {
    agent("fake_agent.py")
}

fn add(sb: &Sandbox, text: &str) {
    let r = sb.run(&["add", "--store", "S", text]);
    assert_eq!(r.code, 0, "{r:?}");
}

fn resolve(sb: &Sandbox, extra: &[&str]) -> Run {
    let f = fake();
    let mut a = vec!["resolve", "--store", "S", "--format", "plain", "--yes"];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--", "python3", &f]);
    sb.run(&a)
}

/// `runner run S/todo-1.md --format plain EXTRA -- <fake agent>`.
fn run_todo(sb: &Sandbox, extra: &[&str]) -> Run {
    let f = fake();
    let mut a = vec!["run", "S/todo-1.md", "--format", "plain"];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--", "python3", &f]);
    sb.run(&a)
}

/// Interrupt `runner` with SIGINT (as Ctrl-C does) and check that it ends with 130.
fn interrupt(mut runner: std::process::Child) {
    let ok = std::process::Command::new("kill")
        .args(["-INT", &runner.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    assert_eq!(runner.wait().expect("wait").code(), Some(130));
}

/// The `resume: …` line of `status --brief` for `target`.
pub(crate) fn resume_line(sb: &Sandbox, target: &str) -> String {
    let r = sb.run(&["status", "--brief", target]);
    assert_eq!(r.code, 1, "something is left to do: {r:?}");
    r.stdout
        .lines()
        .find_map(|l| l.strip_prefix("resume: "))
        .unwrap_or_else(|| panic!("no resume line: {r:?}"))
        .to_owned()
}

/// Run a resume command line in the sandbox with a shell, as a user pasting it would.
pub(crate) fn run_line(sb: &Sandbox, line: &str) -> Run {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_runner"));
    let path = format!(
        "{}:{}",
        bin.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let c = sb.cmd(&[]);
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", line])
        .current_dir(sb.path())
        .stdin(Stdio::null())
        .env("PATH", path);
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh.output().expect("sh").into()
}

/// Fail unless `r`'s stdout holds every one of `wants`.
fn assert_has(r: &Run, wants: &[&str]) {
    for want in wants {
        assert!(r.stdout.contains(want), "{want}: {r:?}");
    }
}

#[test]
fn a_fully_completed_todo_run_is_archived_and_status_show_report_answer_from_it() {
    let sb = Sandbox::new();
    add(&sb, "Write the parser MODE=handoff");
    add(&sb, "Tidy up MODE=success");
    let r = resolve(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !sb.join("S/teams/todo-resolve-1").exists(),
        "the workspace is removed"
    );
    let archive = sb.join("S/todo-1.archive.jsonl");
    assert!(r.stdout.contains("todo-1.archive.jsonl"), "{r:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&archive)
        .expect("archive")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "private, like the workspace it stands for"
    );
    // The log column names a file that exists: the archive, which has the item's record.
    let rows = by_id(&sb.join("S/todo-1.workers-output.csv"), "item");
    let text = std::fs::read_to_string(&archive).expect("archive");
    for n in ["1", "2"] {
        let log = Path::new(&rows[n]["log"]);
        assert!(log.exists(), "item {n}: log {} is gone", log.display());
        assert_eq!(
            log.canonicalize().expect("log"),
            archive.canonicalize().expect("archive")
        );
        assert!(
            text.lines()
                .any(|l| l.contains("\"item_finished\"") && l.contains(&format!("\"id\":\"{n}\""))),
            "{text}"
        );
    }
    assert!(
        text.contains(r#""files_created":["src/new.rs"]"#),
        "the report is kept: {text}"
    );

    let status = sb.run(&["status", "S/todo-1.md"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert_has(
        &status,
        &[
            "archived",
            "2 item(s): 2 completed",
            "fake agent handled 1",
            "fake agent handled 2",
            "1 attempt(s)",
        ],
    );
    // `runner status` in the batch's folder finds the archive by itself.
    let here: Run = sb
        .cmd(&["status", "--brief"])
        .current_dir(sb.join("S"))
        .output()
        .expect("status")
        .into();
    assert_eq!(here.code, 0, "{here:?}");
    assert!(
        here.stdout
            .starts_with("team todo-resolve-1: archived; 2 item(s): 2 completed\n"),
        "{here:?}"
    );
    assert!(
        !here.stdout.contains("resume:"),
        "nothing is left: {here:?}"
    );

    let show = sb.run(&["show", "1", "S/todo-1.md"]);
    assert_eq!(show.code, 0, "{show:?}");
    assert_has(
        &show,
        &[
            "Item 1 (teammate todo-task-1): completed after 1 attempt(s)",
            "Summary: fake agent handled 1",
            "\"next_steps\": [",
            "Archive: ",
        ],
    );
    let logs = sb.run(&["logs", "1", "S/todo-1.md"]);
    assert_eq!(logs.code, 2, "{logs:?}");
    assert!(
        logs.stderr.contains("todo-1.archive.jsonl") && logs.stderr.contains("runner show"),
        "{logs:?}"
    );

    let report = sb.run(&["report", "S/todo-1.md", "--html", "r.html"]);
    assert_eq!(report.code, 0, "{report:?}");
    let html = sb.read("r.html");
    assert!(
        html.contains("fake agent handled 1") && html.contains("fake agent handled 2"),
        "every item is in the report"
    );
}

#[test]
fn completed_md_lines_carry_the_reports_hand_off() {
    let sb = Sandbox::new();
    add(&sb, "Write the parser MODE=handoff");
    let r = resolve(&sb, &["--keep-team"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !sb.join("S/todo-1.archive.jsonl").exists(),
        "a kept team is not archived"
    );
    let done = sb.read("S/teams/todo-resolve-1/completed.md");
    assert!(
        done.ends_with(
            " | T1 | fake agent handled 1 | files: src/a.rs, src/new.rs | created: src/new.rs \
             | tests: passed | next: wire it in; document it\n"
        ),
        "{done}"
    );
    let rows = by_id(&sb.join("S/todo-1.workers-output.csv"), "item");
    assert!(
        Path::new(&rows["1"]["log"]).exists(),
        "a kept team's log stays"
    );
}

#[test]
fn a_corrupt_archive_line_is_named_and_nothing_changes() {
    let sb = Sandbox::new();
    add(&sb, "One MODE=success");
    assert_eq!(resolve(&sb, &[]).code, 0);
    let archive = sb.join("S/todo-1.archive.jsonl");
    let text = std::fs::read_to_string(&archive).expect("archive");
    let spoiled: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| match i {
            2 => l[..l.len() / 2].to_owned(),
            _ => l.to_owned(),
        })
        .collect();
    std::fs::write(&archive, spoiled.join("\n") + "\n").expect("spoil");
    let r = sb.run(&["status", "S/todo-1.md"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("todo-1.archive.jsonl:3: not an archived event"),
        "names the file and line: {r:?}"
    );
    // A new item in the batch does not run over a bad archive: refused before anything.
    let batch = sb.read("S/todo-1.md");
    sb.write(
        "S/todo-1.md",
        batch.replace("## 💡 Ideas", "- [ ] Two MODE=success\n\n## 💡 Ideas"),
    );
    let before = sb.tree();
    let f = fake();
    let r = sb.run(&["run", "S/todo-1.md", "--", "python3", &f]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("todo-1.archive.jsonl"), "{r:?}");
    assert_eq!(sb.tree(), before, "nothing on disk changed");
}

#[test]
fn status_brief_gives_the_command_that_resumes_a_todo_team_and_it_resumes() {
    let sb = Sandbox::new();
    add(&sb, "A MODE=success");
    add(&sb, "B MODE=noreport");
    assert_eq!(resolve(&sb, &[]).code, 1);
    let line = resume_line(&sb, "S/todo-1.md");
    assert_eq!(
        line,
        format!(
            "runner run S/todo-1.md --format plain -- python3 {}",
            fake()
        )
    );
    // Someone fixes B; the resume command runs what is left and the team completes.
    let batch = sb.read("S/todo-1.md");
    sb.write(
        "S/todo-1.md",
        batch.replace("MODE=noreport", "MODE=success"),
    );
    let r = run_line(&sb, &line);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("todo-task-2") && !r.stdout.contains("todo-task-1 "));
    assert!(sb.join("S/todo-1.archive.jsonl").is_file());
}

/// `resolve --id A --id B` picks items by stable id; the batch file then holds exactly them, so
/// the resume command (status, list, list's JSON) runs that file without `--id`, which `run`
/// does not take.
#[test]
fn the_resume_command_of_a_resolve_by_id_drops_the_ids_and_resumes() {
    let sb = Sandbox::new();
    add(&sb, "A MODE=success");
    add(&sb, "B MODE=noreport");
    add(&sb, "Later");
    let listed = sb.run(&["list", "--store", "S", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&listed.stdout).expect("JSON");
    let ids: Vec<String> = doc["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["title"] != "Later")
        .filter_map(|i| i["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 2, "{doc}");
    assert_eq!(resolve(&sb, &["--id", &ids[0], "--id", &ids[1]]).code, 1);
    let want = format!(
        "runner run S/todo-1.md --format plain -- python3 {}",
        fake()
    );
    assert_eq!(resume_line(&sb, "S/todo-1.md"), want);
    let text = sb.run(&["list", "--store", "S"]);
    assert!(
        text.stdout.contains(&format!("— resume: {want}\n")),
        "{text:?}"
    );
    let json = sb.run(&["list", "--store", "S", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(doc["batches"][0]["resume"], want.as_str(), "{doc}");
    let batch = sb.read("S/todo-1.md");
    sb.write(
        "S/todo-1.md",
        batch.replace("MODE=noreport", "MODE=success"),
    );
    let r = run_line(&sb, &want);
    assert_eq!(r.code, 0, "the printed command resumes: {r:?}");
    assert!(sb.read("S/todo.md").contains("Later"), "not handed out");
}

#[test]
fn status_brief_gives_the_command_that_resumes_a_csv_team_and_lists_never_started_items() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "noreport")]);
    assert_eq!(sb.fake_batch(&[]).code, 1);
    let line = resume_line(&sb, "workers-output.csv");
    assert!(
        line.starts_with("runner batch --input in.csv --instruction instr.md ")
            && line.ends_with(&format!("--format plain -- python3 {}", fake()))
            && !line.contains("--only"),
        "{line}"
    );
    let r = run_line(&sb, &line);
    assert_eq!(r.code, 1, "b fails again: {r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        (
            rows["a"]["attempts"].as_str(),
            rows["b"]["attempts"].as_str()
        ),
        ("1", "2"),
        "only the failed row ran again"
    );

    // An interrupted run: what it never reached is listed by id.
    let sb = Sandbox::new();
    sb.write_rows(&[("h", "hang"), ("x", "success"), ("y", "success")]);
    let runner = sb
        .fake_batch_cmd(&["--jobs", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for("the first item to start", 30, || {
        sb.read_opt("workers-output.runner/journal.jsonl")
            .is_some_and(|j| j.contains("\"attempt_started\""))
    });
    interrupt(runner);
    let brief = sb.run(&["status", "--brief"]);
    assert_eq!(brief.code, 1, "{brief:?}");
    assert_has(
        &brief,
        &[
            "- h (cancelled)",
            "- x (never started): Handle x. MODE=success\n",
            "- y (never started): Handle y. MODE=success\n",
            "resume: runner batch --input in.csv",
        ],
    );
}

/// A key given to an exec agent as an argument (`--api-key KEY`, `--password=KEY`) reaches
/// the agent but never `team.json`, nor the `resume:` line (issue 25).
#[test]
fn a_key_in_the_agents_arguments_is_not_recorded_nor_shown_in_the_resume_line() {
    let sb = Sandbox::new();
    sb.write_rows(&[("b", "noreport")]);
    let fake = fake();
    let r = sb.batch(
        &["--id-column", "id", "--format", "plain"],
        &[
            "python3",
            &fake,
            "--api-key",
            "sk-argsecret-1",
            "--password=pw-argsecret-2",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let line = resume_line(&sb, "workers-output.csv");
    assert!(
        line.ends_with(&format!(
            "-- python3 {fake} --api-key REDACTED --password=REDACTED  # put back each REDACTED value"
        )),
        "{line}"
    );
    let team = sb
        .read_opt("workers-output.runner/team.json")
        .expect("team.json");
    for secret in ["sk-argsecret-1", "pw-argsecret-2"] {
        assert!(
            !team.contains(secret) && !line.contains(secret),
            "{secret}: {team}"
        );
    }
}

#[test]
fn the_resume_command_works_after_the_runner_was_killed_before_writing_any_output() {
    let sb = Sandbox::new();
    sb.write_rows(&[("s", "slow"), ("x", "success")]);
    let mut runner = sb
        .fake_batch_cmd(&["--jobs", "1"])
        .env("SLOW_SECONDS", "60")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Until team.json (rewritten at most twice a second) lists it as running.
    wait_for("the first item to show as running", 30, || {
        sb.read_opt("workers-output.runner/team.json")
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|t| t["running"].as_array().is_some_and(|r| !r.is_empty()))
    });
    runner.kill().expect("kill -9");
    let _ = runner.wait();
    assert!(!sb.join("workers-output.csv").exists(), "no output yet");
    // Status does not call what died with its runner "running".
    let status = sb.run(&["status", "--brief", "workers-output.runner"]);
    assert!(
        status
            .stdout
            .contains("- s (was running when its runner died, attempt 1)")
            && status.stdout.contains("stopped (its runner is gone)"),
        "{status:?}"
    );
    let line = resume_line(&sb, "workers-output.runner");
    let r = run_line(&sb, &line);
    assert_eq!(r.code, 0, "the printed command resumes: {line}\n{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["s"]["status"], "completed");
    assert_eq!(rows["x"]["status"], "completed");
}

#[test]
fn list_shows_the_batches_waiting_with_their_resume_command_as_text_and_json() {
    let sb = Sandbox::new();
    add(&sb, "Done soon MODE=success");
    add(&sb, "Fix the flaky test MODE=noreport");
    add(&sb, "Later");
    assert_eq!(resolve(&sb, &["--select", "1,2"]).code, 1);
    let resume = format!(
        "runner run S/todo-1.md --format plain -- python3 {}",
        fake()
    );
    let text = sb.run(&["list", "--store", "S"]);
    assert_eq!(text.code, 0, "{text:?}");
    let out = &text.stdout;
    let inbox_at = out.find("1. [ ] Later").expect("the inbox item");
    let batches_at = out.find("Waiting in batches (1)\n").expect("the batches");
    assert!(inbox_at < batches_at, "inbox first: {out}");
    assert!(
        out.contains(&format!(
            "todo-1.md (1 unticked, partial) — resume: {resume}\n"
        )),
        "{out}"
    );
    assert!(
        out[batches_at..].contains("2. [ ] Fix the flaky test")
            && out[batches_at..].contains("> runner: failed: no report"),
        "{out}"
    );
    assert!(!out[batches_at..].contains("Done soon"), "ticked: {out}");

    let json = sb.run(&["list", "--store", "S", "--format", "json"]);
    assert_eq!(json.code, 0, "{json:?}");
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("one JSON document");
    assert_eq!(doc["v"], 1);
    assert!(
        doc["inbox"]
            .as_str()
            .is_some_and(|p| p.ends_with("S/todo.md"))
    );
    let items = doc["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{doc}");
    assert_eq!(items[0]["title"], "Later");
    assert_eq!(items[0]["section"], "todo");
    assert_eq!(items[0]["mark"], "open");
    assert!(
        items[0]["checkpoint"]
            .as_str()
            .is_some_and(|c| c.starts_with("cp-"))
    );
    let batches = doc["batches"].as_array().expect("batches");
    assert_eq!(batches.len(), 1, "{doc}");
    let b = &batches[0];
    assert!(
        b["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("S/todo-1.md"))
    );
    assert_eq!(b["team"], "todo-resolve-1");
    assert_eq!(b["status"], "partial");
    assert_eq!(b["resume"], resume.as_str());
    assert_eq!(b["running"], false);
    let waiting = b["items"].as_array().expect("batch items");
    assert_eq!(waiting.len(), 1, "{doc}");
    assert_eq!(waiting[0]["number"], 2);
    assert_eq!(waiting[0]["title"], "Fix the flaky test MODE=noreport");
    assert!(
        waiting[0]["note"]
            .as_str()
            .is_some_and(|n| n.starts_with("failed: no report"))
    );
    assert_eq!(waiting[0]["after"], serde_json::json!([]));

    // Once nothing is left, no batch is listed.
    let batch = sb.read("S/todo-1.md");
    sb.write(
        "S/todo-1.md",
        batch.replace("MODE=noreport", "MODE=success"),
    );
    assert_eq!(run_line(&sb, &resume).code, 0);
    let after = sb.run(&["list", "--store", "S", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&after.stdout).expect("json");
    assert_eq!(doc["batches"], serde_json::json!([]), "{doc}");
    // A new item in the finished batch: no run recorded how to run it, so the batch's own
    // command is given.
    let batch = sb.read("S/todo-1.md");
    sb.write(
        "S/todo-1.md",
        batch.replace("## 💡 Ideas", "- [ ] Three\n\n## 💡 Ideas"),
    );
    let text = sb.run(&["list", "--store", "S"]);
    assert!(
        text.stdout
            .contains("todo-1.md (1 unticked, done) — resume: runner run S/todo-1.md\n"),
        "{text:?}"
    );
}

#[test]
fn clean_archives_a_csv_team_and_its_log_column_never_dangles() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "noreport")]);
    assert_eq!(sb.fake_batch(&[]).code, 1);
    let before = by_id(&sb.join("workers-output.csv"), "id");
    assert!(Path::new(&before["b"]["log"]).exists());
    let r = sb.run(&["clean", "--yes", "workers-output.runner"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!sb.join("workers-output.runner").exists());
    let archive = sb.join("workers-output.archive.jsonl");
    assert!(r.stdout.contains("workers-output.archive.jsonl"), "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b"] {
        let log = Path::new(&rows[id]["log"]);
        assert!(log.exists(), "row {id}: {} is gone", log.display());
        assert_eq!(
            log.canonicalize().expect("log"),
            archive.canonicalize().expect("archive")
        );
        // Only the log cell changed.
        let mut was = before[id].clone();
        was.remove("log");
        let mut now = rows[id].clone();
        now.remove("log");
        assert_eq!(now, was, "row {id}");
    }
    let status = sb.run(&["status", "workers-output.csv"]);
    assert_eq!(status.code, 1, "b did not complete: {status:?}");
    assert!(
        status.stdout.contains("archived") && status.stdout.contains("1 failed"),
        "{status:?}"
    );
    let show = sb.run(&["show", "b", "workers-output.csv"]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(
        show.stdout.contains("failed after 1 attempt(s)"),
        "{show:?}"
    );
}

#[test]
fn show_and_logs_take_the_teammate_name_the_summary_prints_and_say_what_an_attempt_lacks() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let r = sb.fake_batch(&["-o", "out-f.csv"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("1-a"),
        "the summary names the teammate: {r:?}"
    );
    for name in ["a", "1-a"] {
        let show = sb.run(&["show", name, "out-f.csv"]);
        assert_eq!(show.code, 0, "{name}: {show:?}");
        assert!(
            show.stdout.contains("Item a (teammate 1-a): completed"),
            "{name}: {show:?}"
        );
        let logs = sb.run(&["logs", name, "out-f.csv"]);
        assert_eq!(logs.code, 0, "{name}: {logs:?}");
        assert_eq!(logs.stdout.trim(), "done", "{name}");
    }
    // The agent wrote nothing to stderr: said so, not an error.
    let logs = sb.run(&["logs", "1-a", "out-f.csv", "--stderr"]);
    assert_eq!(logs.code, 0, "{logs:?}");
    assert_eq!(logs.stdout, "", "{logs:?}");
    assert!(
        logs.stderr
            .contains("item `a`, attempt 1: wrote nothing to stderr"),
        "{logs:?}"
    );
    let logs = sb.run(&["logs", "a", "out-f.csv", "--attempt", "2"]);
    assert_eq!(logs.code, 2, "{logs:?}");
    assert!(
        logs.stderr
            .contains("item `a` has 1 attempt; give --attempt 1"),
        "{logs:?}"
    );
    let missing = sb.run(&["show", "2-a", "out-f.csv"]);
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(missing.stderr.contains("unknown item `2-a`"), "{missing:?}");

    // A todo team's teammate `todo-task-1`, from its archive.
    add(&sb, "Tidy up MODE=success");
    assert_eq!(resolve(&sb, &[]).code, 0);
    let show = sb.run(&["show", "todo-task-1", "S/todo-1.md"]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(
        show.stdout
            .contains("Item 1 (teammate todo-task-1): completed"),
        "{show:?}"
    );
}

/// Item `n`'s line of the todo table at `path`, exactly as written.
fn table_line(path: &Path, n: &str) -> String {
    std::fs::read_to_string(path)
        .expect("table")
        .lines()
        .find(|l| l.starts_with(&format!("{n},")))
        .unwrap_or_else(|| panic!("no row {n} in {}", path.display()))
        .to_owned()
}

/// The batch file with item `title` unticked again (without its checkpoint, which went when
/// it completed).
fn untick(sb: &Sandbox, title: &str) {
    let batch = sb.read("S/todo-1.md");
    let ticked = format!("- [x] {title}");
    assert!(batch.contains(&ticked), "{batch}");
    let lines: Vec<String> = batch
        .lines()
        .map(|l| match l.starts_with(&ticked) {
            true => format!("- [ ] {title}"),
            false => l.to_owned(),
        })
        .collect();
    sb.write("S/todo-1.md", lines.join("\n") + "\n");
}

#[test]
fn a_rerun_whose_workspace_is_gone_keeps_the_rows_of_the_items_it_does_not_run() {
    let sb = Sandbox::new();
    add(&sb, "task A MODE=handoff");
    let r = sb.run(&["add", "--store", "S", "--idea", "idea B MODE=success"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = resolve(&sb, &["--select", "1,2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!sb.join("S/teams/todo-resolve-1").exists(), "archived");
    let table = sb.join("S/todo-1.workers-output.csv");
    let row_a = table_line(&table, "1");
    let rerun = |sb: &Sandbox| {
        untick(sb, "idea B");
        let r = run_todo(sb, &["--include-ideas"]);
        assert_eq!(r.code, 0, "{r:?}");
        assert!(!r.stdout.contains("todo-task-1 "), "A is not run: {r:?}");
    };
    rerun(&sb);
    assert_eq!(table_line(&table, "1"), row_a, "kept byte for byte");
    let rows = by_id(&table, "item");
    assert_eq!(rows["2"]["status"], "completed");
    assert_eq!(rows["2"]["attempts"], "1");

    // Without the old table, task A's row is rebuilt from the archive.
    std::fs::remove_file(&table).expect("rm table");
    rerun(&sb);
    let rows = by_id(&table, "item");
    let a = &rows["1"];
    let archive = sb.join("S/todo-1.archive.jsonl");
    assert_eq!(
        (
            a["status"].as_str(),
            a["attempts"].as_str(),
            a["failure_kind"].as_str(),
            a["summary"].as_str(),
            a["files_created"].as_str(),
            a["next_steps"].as_str(),
        ),
        (
            "completed",
            "1",
            "",
            "fake agent handled 1",
            r#"["src/new.rs"]"#,
            r#"["wire it in","document it"]"#,
        ),
        "{a:?}"
    );
    assert!(
        !a["started_at"].is_empty() && !a["finished_at"].is_empty(),
        "{a:?}"
    );
    assert_eq!(
        Path::new(&a["log"]).canonicalize().expect("log"),
        archive.canonicalize().expect("archive")
    );
    assert_eq!(rows["2"]["status"], "completed");

    // A ticked item with no record at all: completed, never with failure kind `completed`.
    std::fs::remove_file(&table).expect("rm table");
    std::fs::remove_file(&archive).expect("rm archive");
    rerun(&sb);
    let rows = by_id(&table, "item");
    assert_eq!(
        (
            rows["1"]["status"].as_str(),
            rows["1"]["failure_kind"].as_str()
        ),
        ("completed", ""),
        "{rows:?}"
    );
}

#[test]
fn an_interrupted_resolve_cleaned_then_run_again_keeps_the_completed_row() {
    let sb = Sandbox::new();
    add(&sb, "task A MODE=success");
    add(&sb, "task C MODE=hang");
    let f = fake();
    let runner = sb
        .cmd(&[
            "resolve", "--store", "S", "--yes", "--format", "plain", "--", "python3", &f,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for("task A to finish", 30, || {
        sb.read_opt("S/teams/todo-resolve-1/journal.jsonl")
            .is_some_and(|j| j.contains("\"item_finished\""))
    });
    interrupt(runner);
    let r = sb.run(&["clean", "todo-resolve-1", "--store", "S", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!sb.join("S/teams/todo-resolve-1").exists(), "cleaned");
    let table = sb.join("S/todo-1.workers-output.csv");
    let row_a = table_line(&table, "1");
    assert!(row_a.contains(",completed,1,"), "{row_a}");
    let batch = sb.read("S/todo-1.md");
    sb.write("S/todo-1.md", batch.replace("MODE=hang", "MODE=success"));
    let r = run_todo(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(table_line(&table, "1"), row_a, "kept byte for byte");
    let rows = by_id(&table, "item");
    assert_eq!(rows["2"]["status"], "completed");
}

#[test]
fn status_from_an_archive_lists_the_completed_items_by_finish_time() {
    let sb = Sandbox::new();
    // Item 1 finishes first (item 2 waits for it); run again, it finishes last.
    add(&sb, "task B MODE=success");
    add(&sb, "task A MODE=success @after:1");
    let r = resolve(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    untick(&sb, "task B");
    let r = run_todo(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let status = sb.run(&["status", "S/todo-1.md"]);
    assert_eq!(status.code, 0, "{status:?}");
    let listed: Vec<&str> = status
        .stdout
        .split("Completed (most recent last):\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{status:?}"))
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(listed, ["todo-task-2", "todo-task-1"], "{status:?}");
}
