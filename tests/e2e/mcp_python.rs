//! `runner mcp` against the official MCP Python SDK (`mcp`, pinned, installed by `.ci/run`
//! in `target/e2e-mcp-python/venv`), as a lead's code uses it: `stdio_client` and
//! `ClientSession` in `mcp_python_client.py` beside this file, one scenario per test (issue
//! 51). The SDK checks every structured result against the tool's output schema; a call it
//! abandons sends `notifications/cancelled`, which must interrupt the team as Ctrl-C does; a
//! client that vanishes mid-run must leave no process and no temporary file; progress after a
//! resume ends at the total; a served run's live page answers with its token and goes with
//! the run. Skipped with a notice when the SDK is not installed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The SDK's version `.ci/run` installs.
const MCP_VERSION: &str = "2.3.0";

/// The venv's python with the pinned `mcp`, or `None` (with a notice) when not installed.
fn python_or_skip(test: &str) -> Option<PathBuf> {
    let python =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e-mcp-python/venv/bin/python");
    let version = Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if version.as_deref() == Some(MCP_VERSION) {
        return Some(python);
    }
    crate::skip::skip(format!(
        "{test}: no mcp=={MCP_VERSION} in {} ({version:?}). Install it with `bash .ci/run` (it needs PyPI).",
        python.display()
    ));
    None
}

/// A folder for one scenario: `rows.csv` (rows a, b), `agent.sh` (this script), a HOME and
/// the TMPDIR the server gets.
fn folder(agent: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("runner-mcp-python-")
        .tempdir()
        .expect("tempdir");
    let d = dir.path();
    for sub in ["home", "tmp"] {
        std::fs::create_dir_all(d.join(sub)).expect("dir");
    }
    std::fs::write(d.join("rows.csv"), "id,topic\na,x\nb,y\n").expect("csv");
    std::fs::write(
        d.join("agent.sh"),
        agent.replace("DIR", &d.display().to_string()),
    )
    .expect("agent");
    dir
}

/// An agent that records its pid and sleeps: a team that only ends when it is ended.
const SLEEPER: &str = "cat > /dev/null\necho $$ > \"DIR/$RUNNER_ITEM_ID.pid\"\nexec sleep 300\n";

/// An agent that completes its item, unless `fail-ITEM` is there.
const WORKER: &str = "cat > /dev/null\nif [ -e \"DIR/fail-$RUNNER_ITEM_ID\" ]; then s=failed; else s=completed; fi\nprintf '{\"status\":\"%s\",\"summary\":\"did %s\",\"output\":{}}' \"$s\" \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n";

/// Play `scenario` in `dir`: the JSON the client printed last.
fn play(python: &Path, scenario: &str, dir: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/mcp_python_client.py");
    let out = Command::new(python)
        .arg(script)
        .args([scenario, env!("CARGO_BIN_EXE_runner")])
        .arg(dir)
        .output()
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{scenario}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{scenario}: {e}: {stdout}"))
}

/// Processes whose environment names `dir` (the server has HOME in it, and its teammates
/// inherit it), after waiting up to `secs` for them to end.
fn left_after(dir: &Path, secs: u64) -> Vec<String> {
    let needle = dir.display().to_string();
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let mut live = Vec::new();
        for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'));
            if !zombie && String::from_utf8_lossy(&env).contains(&needle) {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                live.push(format!(
                    "{pid}: {}",
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                ));
            }
        }
        if live.is_empty() || Instant::now() > until {
            return live;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `status` column of the output table, row by row.
fn statuses(dir: &Path) -> Vec<String> {
    let mut rdr = csv::Reader::from_path(dir.join("workers-output.csv")).expect("output");
    let at = rdr
        .headers()
        .expect("headers")
        .iter()
        .position(|h| h == "status")
        .expect("status column");
    rdr.records()
        .map(|r| r.expect("row").get(at).unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_python_sdk_lists_annotated_tools_and_their_results_follow_the_output_schemas() {
    let Some(python) = python_or_skip("mcp_python::the_python_sdk_lists_annotated_tools") else {
        return;
    };
    let dir = folder(WORKER);
    let out = play(&python, "tools", dir.path());
    assert_eq!(out["server"]["name"], "teammate-runner", "{out}");
    assert_eq!(out["server"]["version"], env!("CARGO_PKG_VERSION"), "{out}");
    let tools = out["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 7, "{out}");
    for t in tools {
        assert!(t["title"].is_string(), "{t}");
        assert_eq!(t["has_output_schema"], true, "{t}");
        let read_only =
            ["todo_list", "status", "show"].contains(&t["name"].as_str().unwrap_or_default());
        assert_eq!(t["annotations"]["readOnlyHint"], read_only, "{t}");
    }
    // The SDK validated both against their output schemas (it raises otherwise).
    let id = out["added"]["id"].as_str().expect("the item's id");
    assert_eq!(out["listing"]["items"][0]["id"], id, "{out}");
    assert_eq!(out["refused"]["isError"], true, "{out}");
    let refusal = out["refused"]["text"].as_str().unwrap_or_default();
    assert!(refusal.contains("did you mean `text`?"), "{refusal}");
}

#[test]
fn a_call_the_python_sdk_abandons_interrupts_the_team_as_ctrl_c_does() {
    let Some(python) = python_or_skip("mcp_python::a_call_the_python_sdk_abandons") else {
        return;
    };
    let dir = folder(SLEEPER);
    let out = play(&python, "cancel", dir.path());
    assert_eq!(out["status"]["state"], "interrupted", "{out}");
    assert_eq!(out["status"]["counts"]["cancelled"], 2, "{out}");
    assert_eq!(statuses(dir.path()), ["cancelled", "cancelled"]);
    assert_eq!(
        left_after(dir.path(), 30),
        Vec::<String>::new(),
        "processes left"
    );
    assert_eq!(
        temporary_files(dir.path()),
        Vec::<PathBuf>::new(),
        "temporary files left"
    );
}

#[test]
fn a_python_client_that_vanishes_mid_run_leaves_no_process_and_no_temporary_file() {
    let Some(python) = python_or_skip("mcp_python::a_python_client_that_vanishes") else {
        return;
    };
    let dir = folder(SLEEPER);
    let out = play(&python, "disconnect", dir.path());
    assert_eq!(out["disconnected"], true, "{out}");
    assert_eq!(
        left_after(dir.path(), 60),
        Vec::<String>::new(),
        "processes left"
    );
    assert_eq!(statuses(dir.path()), ["cancelled", "cancelled"]);
    assert_eq!(
        temporary_files(dir.path()),
        Vec::<PathBuf>::new(),
        "temporary files left"
    );
}

#[test]
fn progress_through_the_python_sdk_counts_to_the_total_after_a_resume() {
    let Some(python) = python_or_skip("mcp_python::progress_through_the_python_sdk") else {
        return;
    };
    let dir = folder(WORKER);
    std::fs::write(dir.path().join("fail-b"), "").expect("marker");
    let out = play(&python, "progress", dir.path());
    let ends = |run: &str| {
        let p = out[run]["progress"].as_array().cloned().unwrap_or_default();
        let last = p.last().cloned().unwrap_or(Value::Null);
        (p.len(), last["progress"].clone(), last["total"].clone())
    };
    assert_eq!(out["first"]["result"]["exit_code"], 1, "{out}");
    assert_eq!(ends("first"), (2, 2.0.into(), 2.0.into()), "{out}");
    assert_eq!(out["resumed"]["result"]["exit_code"], 0, "{out}");
    assert_eq!(
        ends("resumed"),
        (1, 2.0.into(), 2.0.into()),
        "after a resume, progress ends at the total: {out}"
    );
    assert_eq!(statuses(dir.path()), ["completed", "completed"]);
}

/// An agent that records its pid, then waits for the file `go` before it completes its item:
/// a team that runs until the test lets it end (an item without `go` after a minute fails,
/// so a broken test ends instead of hanging).
const GATED: &str = "cat > /dev/null\necho $$ > \"DIR/$RUNNER_ITEM_ID.pid\"\ni=0\nwhile [ ! -e \"DIR/go\" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\nif [ -e \"DIR/go\" ]; then s=completed; else s=failed; fi\nprintf '{\"status\":\"%s\",\"summary\":\"did %s\",\"output\":{}}' \"$s\" \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n";

/// The temporary files a run left: anything in the server's TMPDIR, and any `.tmp` file
/// under `dir`.
fn temporary_files(dir: &Path) -> Vec<PathBuf> {
    let mut left: Vec<PathBuf> = std::fs::read_dir(dir.join("tmp"))
        .expect("tmp")
        .flatten()
        .map(|e| e.path())
        .collect();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if e.file_name().to_string_lossy().contains(".tmp") {
                left.push(p);
            }
        }
    }
    left
}

/// The text of a refusal the client saw: a tool error's text, or a protocol error's message.
fn refusal(out: &Value) -> String {
    if let Some(e) = out["protocol_error"].as_str() {
        return e.to_owned();
    }
    assert_eq!(out["isError"], true, "refused: {out}");
    out["text"].as_str().unwrap_or_default().to_owned()
}

/// Issue 51's argument findings through the SDK: each error names its field, a misspelled
/// field is refused with the one meant (not ignored), a team named `--watch` is a path, an
/// unknown tool is named with the one meant, and a batch_run its checks refuse leaves
/// nothing on disk, so the corrected call (another instruction) runs.
#[test]
fn the_python_sdk_sees_each_refused_argument_named_and_a_refused_run_leaves_nothing() {
    let Some(python) = python_or_skip("mcp_python::the_python_sdk_sees_each_refused_argument")
    else {
        return;
    };
    let dir = folder(WORKER);
    let out = play(&python, "arguments", dir.path());
    let refused = &out["refused"];
    for (case, says) in [
        ("misspelled", "did you mean `max_concurrency`?"),
        ("wrong_type", "`max_concurrency`"),
        ("text_type", "`text`"),
        ("missing", "text"),
        ("show_misspelled", "did you mean `team`?"),
        ("watch", "--watch"),
        (
            "unknown_tool",
            "unknown tool `todo_lst`; did you mean `todo_list`?",
        ),
    ] {
        let text = refusal(&refused[case]);
        assert!(text.contains(says), "{case}: {text}");
    }
    // `--watch` was a folder that is not there, not a flag that streams.
    assert!(
        !refusal(&refused["watch"]).contains("unexpected argument"),
        "{out}"
    );
    let checks = refusal(&out["checks_refused"]);
    assert!(checks.contains("rows.csv"), "{checks}");
    assert_eq!(
        out["files_after_refusal"],
        serde_json::json!(["agent.sh", "rows.csv"]),
        "a refused batch_run writes nothing"
    );
    assert_eq!(out["corrected"]["isError"], false, "{out}");
    assert_eq!(out["corrected"]["structured"]["exit_code"], 0, "{out}");
    assert_eq!(statuses(dir.path()), ["completed", "completed"]);
}

/// `status` of a team whose item failed is its state, through the SDK (it was the error
/// `" (exit 1)"`, all a lead saw).
#[test]
fn the_python_sdk_gets_the_status_of_a_team_with_a_failed_item() {
    let Some(python) = python_or_skip("mcp_python::the_python_sdk_gets_the_status") else {
        return;
    };
    let dir = folder(WORKER);
    std::fs::write(dir.path().join("fail-b"), "").expect("marker");
    let out = play(&python, "failed", dir.path());
    assert_eq!(out["run"]["structured"]["exit_code"], 1, "{out}");
    let status = &out["status"];
    assert_eq!(status["isError"], false, "a status, not an error: {out}");
    let text = status["structured"]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("1 completed") && text.contains("b (failed)"),
        "{text}"
    );
    assert_eq!(status["structured"]["counts"]["failed"], 1, "{out}");
}

/// Stable ids through the SDK: the user confirmed items 1 and 3 (Alpha, Gamma); resolving
/// them by id in two calls runs Alpha then Gamma (never Delta, which numbers would have
/// reached), each answer names its item and what to follow, `status` of that still answers
/// once the team is archived, and an id already resolved is refused with nothing changed.
#[test]
fn the_python_sdk_resolves_the_confirmed_items_by_their_stable_ids() {
    let Some(python) = python_or_skip("mcp_python::the_python_sdk_resolves_by_stable_ids") else {
        return;
    };
    let dir = folder(WORKER);
    let out = play(&python, "ids", dir.path());
    let listed = out["listed"]["items"].as_array().expect("items");
    assert_eq!(listed.len(), 4, "{out}");
    assert!(listed.iter().all(|i| i["id"].is_string()), "{out}");
    let runs = out["runs"].as_array().expect("runs");
    let mut moved = Vec::new();
    for r in runs {
        assert_eq!(r["run"]["structured"]["exit_code"], 0, "{r}");
        assert_eq!(r["run"]["structured"]["items"][0]["id"], r["id"], "{r}");
        moved.push(r["run"]["structured"]["items"][0]["title"].clone());
        let follow = &r["run"]["structured"]["follow"];
        assert!(
            follow["command"]
                .as_str()
                .is_some_and(|c| c.starts_with("runner status --brief")),
            "{r}"
        );
        // The team is archived by now (every item completed): its status still answers.
        assert_eq!(r["status"]["isError"], false, "{r}");
        let text = r["status"]["structured"]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("1 completed"), "{text}");
    }
    assert_eq!(moved, ["Alpha", "Gamma"], "never Delta: {out}");
    let gone = refusal(&out["gone"]);
    assert!(gone.contains("no open item has the id"), "{gone}");
    assert_eq!(out["unchanged"], true, "a gone id changes nothing");
    let inbox = out["inbox"].as_str().unwrap_or_default();
    assert!(
        inbox.contains("Beta") && inbox.contains("Delta") && !inbox.contains("Alpha"),
        "{inbox}"
    );
}

/// A 200 KiB item (a pasted log) through the SDK: added whole (over ~128 KiB it failed with
/// "Argument list too long" when the server ran `runner add`).
#[test]
fn the_python_sdk_adds_an_item_longer_than_any_command_line() {
    let Some(python) = python_or_skip("mcp_python::the_python_sdk_adds_a_long_item") else {
        return;
    };
    let dir = folder(WORKER);
    let out = play(&python, "long", dir.path());
    assert_eq!(out["added_error"], false, "{out}");
    assert_eq!(out["whole_text_in_inbox"], true, "{out}");
    assert_eq!(out["listed_items"], 1, "{out}");
}

/// Two waited run calls sent at once through the SDK (a lead retrying, two sub-agents): one
/// runs to its end, the other is refused naming it, and the refused one leaves the running
/// one's instruction in place (it used to write it, then remove it on its refusal, under
/// the running team). Four times, each in a fresh folder: the calls race.
#[test]
fn two_run_calls_the_python_sdk_sends_at_once_never_break_each_other() {
    let Some(python) = python_or_skip("mcp_python::two_run_calls_at_once") else {
        return;
    };
    for _ in 0..4 {
        let dir = folder(&format!("sleep 1\n{WORKER}"));
        let out = play(&python, "together", dir.path());
        let answers = out["answers"].as_array().expect("answers");
        let ran: Vec<&Value> = answers.iter().filter(|a| a["isError"] == false).collect();
        assert_eq!(ran.len(), 1, "one call runs: {out}");
        assert_eq!(ran[0]["structured"]["exit_code"], 0, "{out}");
        let refused = answers
            .iter()
            .find(|a| a["isError"] == true)
            .expect("one is refused");
        assert!(
            refused["text"]
                .as_str()
                .is_some_and(|t| t.contains("batch_run of rows.csv")),
            "{out}"
        );
        assert_eq!(out["instruction"], "Look at {topic}.", "{out}");
        assert_eq!(statuses(dir.path()), ["completed", "completed"]);
    }
}

/// A team started in the background outlives the client that started it: the client goes
/// away without a goodbye while both teammates run; the server takes no more calls but lets
/// the team finish, then exits. Every item completes; no process and no temporary file is
/// left (it used to be interrupted when stdin closed).
#[test]
fn a_background_team_outlives_the_python_client_that_started_it() {
    let Some(python) = python_or_skip("mcp_python::a_background_team_outlives_the_client") else {
        return;
    };
    let dir = folder(GATED);
    let out = play(&python, "background", dir.path());
    assert_eq!(out["started"]["isError"], false, "{out}");
    let workspace = out["started"]["structured"]["workspace"]
        .as_str()
        .expect("workspace")
        .to_owned();
    // The client has gone (its process ended): the team goes on.
    std::fs::write(dir.path().join("go"), "").expect("go");
    assert_eq!(
        left_after(dir.path(), 60),
        Vec::<String>::new(),
        "processes left"
    );
    assert_eq!(statuses(dir.path()), ["completed", "completed"]);
    let journal =
        std::fs::read_to_string(Path::new(&workspace).join("journal.jsonl")).unwrap_or_default();
    assert!(!journal.contains("\"event\":\"interrupted\""), "{journal}");
    assert_eq!(
        temporary_files(dir.path()),
        Vec::<PathBuf>::new(),
        "temporary files left"
    );
}

/// What the run warned of reaches the lead in the run's answer (it was only in the server's
/// log and the journal): here, the empty records it skipped.
#[test]
fn the_python_sdk_sees_what_the_run_warned_of_in_its_answer() {
    let Some(python) = python_or_skip("mcp_python::the_python_sdk_sees_what_the_run_warned_of")
    else {
        return;
    };
    let dir = folder(WORKER);
    let out = play(&python, "warnings", dir.path());
    assert_eq!(out["structured"]["exit_code"], 0, "{out}");
    let warnings = out["structured"]["warnings"].as_array().expect("warnings");
    assert!(
        warnings.iter().any(|w| w
            .as_str()
            .is_some_and(|w| w.contains("skipped 2 empty records"))),
        "{out}"
    );
}

/// `serve: true` through the SDK (issue 53): a background run's first answer names its live
/// page (the SDK checks `page_url` against the output schema), which answers 200 with its
/// token and 403 without; once the run has ended nothing listens there, a waited run's page
/// is gone by its answer, and no process is left.
#[test]
fn the_python_sdk_gets_a_served_runs_live_page_which_goes_with_the_run() {
    let Some(python) = python_or_skip("mcp_python::the_python_sdk_gets_a_served_runs_live_page")
    else {
        return;
    };
    let dir = folder(GATED);
    let out = play(&python, "serve", dir.path());
    assert_eq!(out["started"]["isError"], false, "{out}");
    let url = out["started"]["structured"]["page_url"]
        .as_str()
        .unwrap_or_default();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/?token="),
        "the first answer names the page: {out}"
    );
    assert_eq!(out["with_token"], 200, "{out}");
    assert_eq!(out["without_token"], 403, "{out}");
    assert_eq!(
        out["listens_after_end"], false,
        "the page goes with its run: {out}"
    );
    assert_eq!(out["waited"]["isError"], false, "{out}");
    assert!(
        out["waited"]["structured"]["page_url"].is_string(),
        "a waited answer names its page too: {out}"
    );
    assert_eq!(out["waited_listens"], false, "gone by the answer: {out}");
    assert_eq!(statuses(dir.path()), ["completed", "completed"]);
    assert_eq!(
        left_after(dir.path(), 60),
        Vec::<String>::new(),
        "processes left"
    );
}

#[test]
fn batch_run_gives_each_row_to_candidates_and_answers_with_each_items_winner() {
    let Some(python) = python_or_skip("mcp_python::batch_run_gives_each_row_to_candidates") else {
        return;
    };
    let dir = folder(WORKER);
    let out = play(&python, "best_of", dir.path());
    // Each bad value is a tool error naming its argument, and nothing is written.
    for (name, says) in [
        (
            "too_many",
            "`best_of`: `9` must be a number of candidates per item, 1 to 8",
        ),
        ("one_runner", "`best_of`: `claude` must be"),
        // Declared a string (one plain type for the model), so a JSON number is refused by
        // the schema, naming the argument.
        ("a_number", "`best_of`: 2 is not of type \"string\""),
        (
            "unknown_judge",
            "`judge`: `fastest` must be passing, first, person",
        ),
        (
            "stage_judge",
            "`judge`: `stage pick` judges with a stage of a BATCH.md",
        ),
    ] {
        let r = &out["refused"][name];
        assert_eq!(r["isError"], true, "{name}: {r}");
        let text = r["text"].as_str().unwrap_or_default();
        assert!(text.contains(says), "{name}: {text}");
    }
    assert_eq!(
        out["files_after_refusals"],
        serde_json::json!(["agent.sh", "rows.csv"]),
        "{out}"
    );
    // The waited run: every row went to two candidates, the highest score won.
    let run = &out["run"];
    assert_eq!(run["isError"], false, "{run}");
    let s = &run["structured"];
    assert_eq!(s["exit_code"], 0, "{s}");
    let sorted = |v: &Value| {
        let mut winners: Vec<Value> = v["winners"].as_array().expect("winners").clone();
        winners.sort_by_key(|w| w["id"].as_str().unwrap_or_default().to_owned());
        Value::Array(winners)
    };
    let decided = serde_json::json!([
        {"id": "a", "status": "completed", "winner": "1-a.c2 (exec)", "rule": "score: score 2 against 1, the highest", "candidates": "2/2 passed"},
        {"id": "b", "status": "completed", "winner": "2-b.c2 (exec)", "rule": "score: score 2 against 1, the highest", "candidates": "2/2 passed"},
    ]);
    assert_eq!(sorted(s), decided, "{s}");
    // `status` afterwards names the same winners (through the SDK, which checks the answer
    // against the tool's output schema).
    let status = &out["status"];
    assert_eq!(status["isError"], false, "{status}");
    assert_eq!(sorted(&status["structured"]), decided, "{status}");
    assert_eq!(statuses(dir.path()), ["completed", "completed"]);
}
