//! `runner mcp` (issue 28): every tool driven over stdio by a plain JSON-RPC client written
//! here from the MCP specification (newline-delimited JSON-RPC 2.0: `initialize`,
//! `notifications/initialized`, `tools/list`, `tools/call`) — independent of the SDK the
//! server is built on. Refusals leave nothing changed; a waited run sends progress.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use serde_json::{Value, json};

use crate::harness::{Sandbox, wait_for};

/// A client session with `runner mcp` started in the sandbox.
pub(crate) struct Client {
    pub(crate) child: Child,
    /// `None` once closed ([`Client::close_stdin`]).
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
    /// Notifications seen while waiting for responses.
    pub(crate) notes: Vec<Value>,
    /// The server's answer to `initialize`.
    pub(crate) init: Value,
}

impl Client {
    pub(crate) fn start(sb: &Sandbox) -> Client {
        let mut child = sb
            .cmd(&["mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn runner mcp");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut c = Client {
            child,
            stdin,
            stdout,
            next: 1,
            notes: Vec::new(),
            init: Value::Null,
        };
        let init = c.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "runner-tests", "version": "1"}
            }),
        );
        assert!(
            init["result"]["capabilities"]["tools"].is_object(),
            "{init}"
        );
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c.init = init;
        c
    }

    pub(crate) fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{msg}").expect("write");
        stdin.flush().expect("flush");
    }

    /// Close the server's stdin, as a client that goes away does.
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Read the server's stdout to its end (the server closes it once it has seen its stdin
    /// close and answered what it could); every line read must be JSON-RPC.
    pub(crate) fn read_to_end(&mut self) {
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).expect("read") == 0 {
                return;
            }
            let msg: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries only protocol: {e}: {line:?}"));
            self.notes.push(msg);
        }
    }

    /// Send a request without waiting for its answer; its id.
    pub(crate) fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Send a request and read until its response; every line read must be JSON-RPC.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(id)
    }

    /// The response to request `id` (sent with [`Client::send_request`]): one read already,
    /// or read until it comes; every line read must be JSON-RPC.
    pub(crate) fn response(&mut self, id: u64) -> Value {
        if let Some(i) = self.notes.iter().position(|m| m["id"] == id) {
            return self.notes.remove(i);
        }
        let method = format!("request {id}");
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read");
            assert!(n > 0, "the server closed stdout before answering {method}");
            let msg: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries only protocol: {e}: {line:?}"));
            assert_eq!(msg["jsonrpc"], "2.0", "{msg}");
            if msg["id"] == id {
                return msg;
            }
            self.notes.push(msg);
        }
    }

    /// `tools/call` → (is_error, text of the first content block).
    pub(crate) fn call(&mut self, tool: &str, args: Value) -> (bool, String) {
        self.call_with(tool, args, None)
    }

    pub(crate) fn call_with(
        &mut self,
        tool: &str,
        args: Value,
        progress: Option<&str>,
    ) -> (bool, String) {
        let mut params = json!({"name": tool, "arguments": args});
        if let Some(token) = progress {
            params["_meta"] = json!({"progressToken": token});
        }
        let r = self.request("tools/call", params);
        let result = &r["result"];
        assert!(result.is_object(), "{tool}: {r}");
        (
            result["isError"].as_bool().unwrap_or(false),
            result["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Rows `a`, `b`, `c` and an agent that reports each done.
pub(crate) fn csv_batch(sb: &Sandbox) -> String {
    sb.write("rows.csv", "id,topic\na,x\nb,y\nc,z\n");
    sb.write(
        "agent.sh",
        "cat > /dev/null\nprintf '{\"status\":\"completed\",\"summary\":\"did %s\",\"output\":{}}' \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n",
    )
    .display()
    .to_string()
}

#[test]
fn the_tools_are_listed_with_their_schemas() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb);
    let r = c.request("tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().expect("tools");
    let mut names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "batch_run",
            "show",
            "status",
            "stop",
            "todo_add",
            "todo_list",
            "todo_resolve"
        ]
    );
    for t in tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(
            t["description"].as_str().is_some_and(|d| d.len() > 20),
            "{t}"
        );
    }
    let batch = tools
        .iter()
        .find(|t| t["name"] == "batch_run")
        .expect("batch_run");
    for field in [
        "csv_path",
        "instruction",
        "instruction_path",
        "id_column",
        "output_schema",
        "output_csv_path",
        "max_concurrency",
        "max_runtime_seconds",
        "runner",
        "model",
        "command",
        "wait",
        "serve",
        "notify",
    ] {
        assert!(
            batch["inputSchema"]["properties"].get(field).is_some(),
            "batch_run has no `{field}`: {batch}"
        );
    }
    for name in ["batch_run", "todo_resolve"] {
        let t = tools.iter().find(|t| t["name"] == name).expect("run tool");
        assert_eq!(
            t["inputSchema"]["properties"]["serve"]["type"], "boolean",
            "{t}"
        );
        assert!(
            t["outputSchema"]["properties"].get("page_url").is_some()
                && t["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("page_url")),
            "{name} names its live page: {t}"
        );
    }
}

#[test]
fn the_todo_tools_add_list_and_refuse_to_resolve_what_the_user_did_not_confirm() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb);
    let (err, text) = c.call(
        "todo_add",
        json!({"text": "Audit the lexer\nstart with tabs", "store": "S", "checkpoint": "## Progress\nread lex.rs\n"}),
    );
    assert!(!err, "{text}");
    assert!(text.contains("Added item 1"), "{text}");
    let (err, text) = c.call("todo_list", json!({"store": "S"}));
    assert!(!err, "{text}");
    let listed: Value = serde_json::from_str(&text).expect("JSON, as list --format json");
    assert!(listed.to_string().contains("Audit the lexer"), "{listed}");
    let before = sb.tree();
    let (err, text) = c.call("todo_resolve", json!({"store": "S"}));
    assert!(err && text.contains("ask the user"), "{text}");
    let (err, text) = c.call(
        "todo_add",
        json!({"text": "x", "store": "S", "scope": "global"}),
    );
    assert!(err && text.contains("`scope` or `store`"), "{text}");
    let (err, text) = c.call("todo_resolve", json!({"store": "S", "select": "7"}));
    assert!(err && text.contains("exit 2"), "the CLI's refusal: {text}");
    assert_eq!(sb.tree(), before, "refusals change nothing");
}

#[test]
fn a_waited_batch_run_sends_progress_and_answers_with_its_summary() {
    let sb = Sandbox::new();
    let agent = csv_batch(&sb);
    let mut c = Client::start(&sb);
    let (err, text) = c.call_with(
        "batch_run",
        json!({
            "csv_path": "rows.csv",
            "instruction": "Look at {topic}.",
            "id_column": "id",
            "output_schema": {"type": "object"},
            "max_concurrency": 2,
            "max_runtime_seconds": 60,
            "command": ["sh", agent],
            "wait": true
        }),
        Some("tok-1"),
    );
    assert!(!err, "{text}");
    let summary: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(summary["exit_code"], 0, "{summary}");
    let progress: Vec<&Value> = c
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{:?}", c.notes);
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["params"]["progressToken"], "tok-1");
        assert_eq!(p["params"]["progress"], (i + 1) as f64);
        assert_eq!(p["params"]["total"], 3.0);
    }
    let out = sb.read("workers-output.csv");
    assert!(out.contains("did a") && out.contains("did c"), "{out}");
    assert!(
        sb.read("workers-output.instruction.md") == "Look at {topic}.",
        "the instruction is kept beside the output, for a resume"
    );
    // The same call again resumes: nothing runs twice.
    let (err, text) = c.call_with(
        "batch_run",
        json!({"csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
               "output_schema": {"type": "object"}, "command": ["sh", agent], "wait": true}),
        None,
    );
    assert!(!err, "{text}");
    assert!(text.contains("\"resumed\":3"), "{text}");
}

#[test]
fn a_batch_run_in_the_background_answers_at_once_and_status_and_show_follow_it() {
    let sb = Sandbox::new();
    let agent = csv_batch(&sb);
    let mut c = Client::start(&sb);
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
               "command": ["sh", agent]}),
    );
    assert!(!err, "{text}");
    let started: Value = serde_json::from_str(&text).expect("JSON");
    let workspace = started["workspace"].as_str().expect("workspace").to_owned();
    assert_eq!(started["total"], 3, "{started}");
    let mut last = String::new();
    wait_for("the team to finish", 30, || {
        let (err, text) = c.call("status", json!({"team": workspace}));
        assert!(!err, "{text}");
        last = text;
        last.contains("3 completed")
    });
    let (err, text) = c.call("show", json!({"item": "b", "team": workspace}));
    assert!(!err && text.contains("did b"), "{text}");
    assert_eq!(
        started["pid"],
        c.child.id(),
        "the team runs in the server's own process: {started}"
    );
    assert!(
        started.get("stderr_log").is_none(),
        "no runner subprocess, no log of its own: {started}"
    );
    // One run at a time: the same call again is refused while the first one finishes its
    // outputs, then resumes (nothing runs twice).
    let mut again = String::new();
    wait_for("the first run to end", 30, || {
        let (err, text) = c.call_with(
            "batch_run",
            json!({"csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
                   "command": ["sh", agent], "wait": true}),
            None,
        );
        assert!(!err || text.contains("one run at a time"), "{text}");
        again = text;
        !err
    });
    assert!(again.contains("\"resumed\":3"), "{again}");
    let (err, text) = c.call("show", json!({"item": "nope", "team": workspace}));
    assert!(err, "an unknown item is the CLI's error: {text}");
    // Bad input: the CLI's words, naming what to fix.
    let (err, text) = c.call("batch_run", json!({"csv_path": "rows.csv"}));
    assert!(err && text.contains("`instruction`"), "{text}");
    sb.write("x.md", "Look at {topic}.\n");
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "missing.csv", "instruction_path": "x.md", "command": ["sh", agent],
               "wait": true}),
    );
    assert!(err && text.contains("missing.csv"), "{text}");
}

#[test]
fn the_status_of_a_team_with_a_failed_item_is_its_state_not_an_error() {
    let sb = Sandbox::new();
    sb.write("rows.csv", "id,topic\na,x\nb,y\nc,z\n");
    let agent = sb
        .write(
            "agent.sh",
            "cat > /dev/null\nif [ \"$RUNNER_ITEM_ID\" = b ]; then s=failed; else s=completed; fi\nprintf '{\"status\":\"%s\",\"summary\":\"did %s\"}' \"$s\" \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n",
        )
        .display()
        .to_string();
    let mut c = Client::start(&sb);
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
               "command": ["sh", agent], "wait": true}),
    );
    assert!(!err, "an item that failed is a result: {text}");
    let summary: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(summary["exit_code"], 1, "{summary}");
    let (err, text) = c.call("status", json!({"team": "workers-output.csv"}));
    assert!(
        !err,
        "the status of a team with a failed item is data: {text}"
    );
    assert!(text.contains("2 completed"), "{text}");
    assert!(text.contains("- b (failed)"), "{text}");
    let (err, text) = c.call("show", json!({"item": "b", "team": "workers-output.csv"}));
    assert!(!err && text.contains("did b"), "{text}");
}

#[test]
fn a_runs_bad_input_is_a_tool_error_naming_the_file_and_line() {
    let sb = Sandbox::new();
    let agent = csv_batch(&sb);
    sb.write("bad.csv", "id,topic\na,x\nb,y,extra\n");
    let mut c = Client::start(&sb);
    let before = sb.tree();
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "bad.csv", "instruction": "Look at {topic}.", "id_column": "id",
               "command": ["sh", agent], "wait": true}),
    );
    assert_eq!(
        sb.tree(),
        before,
        "a refused call writes nothing, not even its inline instruction (issue 51)"
    );
    let (input, instruction) = (
        sb.join("bad.csv").display().to_string(),
        sb.write("instr.md", "Look at {topic}.")
            .display()
            .to_string(),
    );
    let cli = sb.run(&[
        "batch",
        "--input",
        &input,
        "--instruction",
        &instruction,
        "--id-column",
        "id",
        "--",
        "sh",
        &agent,
    ]);
    assert!(err, "{text}");
    assert!(text.contains("bad.csv:3"), "the file and the line: {text}");
    assert!(
        text.contains(cli.stderr.trim()) && text.ends_with("(exit 2)"),
        "the CLI's message ({}) and exit code: {text}",
        cli.stderr.trim()
    );
    let mut after = sb.tree();
    after.remove(std::path::Path::new("instr.md"));
    assert_eq!(after, before, "bad input changes nothing");
}

/// Rows `a` and `b` and an agent that records its pid and sleeps: a team that only ends
/// when it is ended.
pub(crate) fn sleeping_batch(sb: &Sandbox) -> String {
    sb.write("rows.csv", "id,topic\na,x\nb,y\n");
    let pids = sb.path().display().to_string();
    sb.write(
        "agent.sh",
        format!("cat > /dev/null\necho $$ > \"{pids}/$RUNNER_ITEM_ID.pid\"\nexec sleep 300\n"),
    )
    .display()
    .to_string()
}

/// Start a sleeping team in the background and wait until both teammates run.
pub(crate) fn start_sleeping_team(sb: &Sandbox, c: &mut Client) {
    let agent = sleeping_batch(sb);
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
               "command": ["sh", agent]}),
    );
    assert!(!err, "{text}");
    wait_for("both teammates to run", 30, || {
        sb.read_opt("a.pid").is_some() && sb.read_opt("b.pid").is_some()
    });
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "rows.csv", "instruction": "x"}),
    );
    assert!(err && text.contains("one run at a time"), "{text}");
}

/// A client that goes away under a waited call: its team is interrupted as Ctrl-C does and
/// the server ends with no teammate left.
#[test]
fn closing_stdin_interrupts_a_waited_team_and_ends_the_server() {
    let sb = Sandbox::new();
    let agent = sleeping_batch(&sb);
    let mut c = Client::start(&sb);
    c.send_request(
        "tools/call",
        json!({"name": "batch_run", "arguments": {
            "csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
            "command": ["sh", agent], "wait": true}}),
    );
    wait_for("both teammates to run", 30, || {
        sb.read_opt("a.pid").is_some() && sb.read_opt("b.pid").is_some()
    });
    c.close_stdin();
    let ended = wait_exit(&mut c.child, 60);
    assert!(ended.is_some(), "the server outlived its client's stdin");
    assert_eq!(
        sb.survivors_after(5.0),
        Vec::new(),
        "teammates outlived the server"
    );
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(
        journal.contains("\"event\":\"interrupted\""),
        "the team was interrupted as Ctrl-C does: {journal}"
    );
}

/// A team started in the background outlives its client's stdin, and a SIGTERM then still
/// interrupts it: the server exits 130 with no teammate left.
#[test]
fn a_background_team_whose_client_has_gone_is_still_interrupted_by_sigterm() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb);
    start_sleeping_team(&sb, &mut c);
    c.close_stdin();
    c.read_to_end();
    assert_eq!(
        c.child.try_wait().ok().flatten(),
        None,
        "the server waits for its team"
    );
    terminate_and_expect_no_survivors(&sb, &mut c, "TERM");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(journal.contains("\"event\":\"interrupted\""), "{journal}");
}

#[test]
fn a_terminated_server_ends_every_teammate_first() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb);
    start_sleeping_team(&sb, &mut c);
    terminate_and_expect_no_survivors(&sb, &mut c, "TERM");
}

/// Ctrl-C of the server (SIGINT) interrupts its team and the server exits 130, as `runner
/// batch` does (it exited 0).
#[test]
fn a_server_interrupted_under_its_run_exits_130() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb);
    start_sleeping_team(&sb, &mut c);
    terminate_and_expect_no_survivors(&sb, &mut c, "INT");
}

/// A server whose first run has ended still ends every teammate of its next run before it
/// exits when it is terminated (the first run's watch over its output writes ended with
/// that run).
#[test]
fn after_a_finished_run_a_terminated_server_still_ends_every_teammate_first() {
    let sb = Sandbox::new();
    let agent = csv_batch(&sb);
    sb.write("first/rows.csv", sb.read("rows.csv"));
    let mut c = Client::start(&sb);
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "first/rows.csv", "instruction": "Look at {topic}.",
               "id_column": "id", "command": ["sh", agent], "wait": true}),
    );
    assert!(!err, "{text}");
    start_sleeping_team(&sb, &mut c);
    terminate_and_expect_no_survivors(&sb, &mut c, "TERM");
}

/// Send the server SIG`signal` under its run; it must exit 130 within 60 s and leave no
/// teammate running.
fn terminate_and_expect_no_survivors(sb: &Sandbox, c: &mut Client, signal: &str) {
    let pid = c.child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let ended = wait_exit(&mut c.child, 60);
    assert!(ended.is_some(), "the server outlived SIG{signal}");
    assert_eq!(
        ended.and_then(|s| s.code()),
        Some(130),
        "a server whose run a signal interrupted exits 130"
    );
    assert_eq!(
        sb.survivors_after(5.0),
        Vec::new(),
        "teammates outlived the server"
    );
}

/// Wait up to `secs` for `child` to exit.
pub(crate) fn wait_exit(child: &mut Child, secs: u64) -> Option<std::process::ExitStatus> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if std::time::Instant::now() > until {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_waited_todo_resolve_runs_the_confirmed_items_in_the_server() {
    let sb = Sandbox::new();
    let agent = csv_batch(&sb);
    let mut c = Client::start(&sb);
    for text in ["Audit the lexer", "Audit the parser"] {
        let (err, text) = c.call("todo_add", json!({"text": text, "store": "S"}));
        assert!(!err, "{text}");
    }
    let (err, text) = c.call_with(
        "todo_resolve",
        json!({"store": "S", "select": "2", "command": ["sh", agent], "wait": true}),
        Some("tok-r"),
    );
    assert!(!err, "{text}");
    let summary: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(summary["exit_code"], 0, "{summary}");
    let progress: Vec<&Value> = c
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 1, "{:?}", c.notes);
    assert_eq!(progress[0]["params"]["total"], 1.0, "{:?}", progress[0]);
    let batch = sb.read("S/todo-1.md");
    assert!(
        batch.contains("[x] Audit the parser") && !batch.contains("lexer"),
        "only the confirmed item moved, and it is ticked: {batch}"
    );
    let (err, text) = c.call("todo_list", json!({"store": "S"}));
    assert!(!err && text.contains("Audit the lexer"), "{text}");
}

/// An agent that fails every item until the file `ok` is in the sandbox, then completes it.
fn failing_until_ok(sb: &Sandbox) -> String {
    let ok = sb.join("ok");
    sb.write(
        "agent.sh",
        format!(
            "cat > /dev/null\nif [ -e '{}' ]; then s=completed; else s=failed; fi\nprintf '{{\"status\":\"%s\",\"summary\":\"did %s\"}}' \"$s\" \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n",
            ok.display()
        ),
    )
    .display()
    .to_string()
}

/// A team the server started records the CLI command its call stands for, agent included:
/// `status --brief` (the CLI's and the `status` tool's) and `runner list` give a resume
/// command that, pasted, resumes the team with the same agent.
#[test]
fn a_team_the_server_started_resumes_with_its_agent_from_the_cli() {
    let sb = Sandbox::new();
    let agent = failing_until_ok(&sb);
    sb.write("rows.csv", "id,topic\na,x\n");
    let mut c = Client::start(&sb);
    let (err, text) = c.call(
        "todo_add",
        json!({"text": "Audit the parser", "store": "S"}),
    );
    assert!(!err, "{text}");
    let added: Value = serde_json::from_str(&text).expect("JSON");
    let (err, text) = c.call(
        "todo_resolve",
        json!({"store": "S", "ids": [added["id"]], "command": ["sh", agent], "wait": true}),
    );
    assert!(!err, "{text}");
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
               "command": ["sh", agent], "wait": true}),
    );
    assert!(!err, "{text}");
    let todo = crate::keep::resume_line(&sb, "S/todo-1.md");
    assert!(
        todo.starts_with("runner run ") && todo.contains("todo-1.md --format plain -- sh "),
        "{todo}"
    );
    let csv = crate::keep::resume_line(&sb, "workers-output.csv");
    assert!(
        csv.starts_with("runner batch --input ") && !csv.contains("mcp"),
        "{csv}"
    );
    for line in [&todo, &csv] {
        assert!(line.ends_with(&format!(" -- sh {agent}")), "{line}");
    }
    let (_, text) = c.call("status", json!({"team": "S/todo-1.md"}));
    let status: Value = serde_json::from_str(&text).expect("JSON");
    assert!(
        status["text"]
            .as_str()
            .is_some_and(|t| t.contains(&format!("resume: {todo}\n"))),
        "{status}"
    );
    let list = sb.run(&["list", "--store", "S"]);
    assert!(
        list.stdout.contains(&format!("— resume: {todo}\n")),
        "{list:?}"
    );
    drop(c);
    sb.write("ok", "");
    for line in [&todo, &csv] {
        let r = crate::keep::run_line(&sb, line);
        assert_eq!(r.code, 0, "the printed command resumes: {line}\n{r:?}");
    }
    assert!(sb.read("S/todo-1.md").contains("[x] Audit the parser"));
    assert!(sb.read("workers-output.csv").contains("did a"));
}

/// The answer's `page_url` as (port, token), after checking the page answers 200 with its
/// token and 403 without.
fn page_answers(answer: &Value) -> (u16, String) {
    let url = answer["page_url"].as_str().expect("page_url");
    let (port, token) = crate::serve::parts(url);
    let host = format!("127.0.0.1:{port}");
    let (code, body) = crate::serve::get(port, &format!("/?token={token}"), &host, "", "");
    assert_eq!(code, 200, "the page, with its token: {body}");
    let (code, _) = crate::serve::get(port, "/", &host, "", "");
    assert_eq!(code, 403, "no token, no page");
    (port, token)
}

/// Whether nothing listens on 127.0.0.1:`port` any more.
fn nothing_listens(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
}

/// `serve: true` on a background `batch_run`: its first answer names the live page, which
/// answers with the token and refuses without; `notify` tells a command of the end; when
/// the run ends nothing listens and nothing is left running.
#[test]
fn a_served_background_batch_run_answers_with_its_live_page_until_it_ends() {
    let sb = Sandbox::new();
    sb.write("rows.csv", "id,topic\na,x\nb,y\n");
    let go = sb.join("go");
    let agent = sb
        .write(
            "agent.sh",
            format!(
                "cat > /dev/null\nwhile [ ! -e '{}' ]; do sleep 0.05; done\nprintf '{{\"status\":\"completed\",\"summary\":\"did %s\"}}' \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n",
                go.display()
            ),
        )
        .display()
        .to_string();
    let keep = sb.write(
        "keep.py",
        "import sys\nopen(sys.argv[1], 'a').write(sys.stdin.read() + '\\n')\n",
    );
    let kept = sb.join("kept.jsonl");
    let notify = format!("python3 {} {}", keep.display(), kept.display());
    let mut c = Client::start(&sb);
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
               "command": ["sh", agent], "serve": true, "notify": [notify]}),
    );
    assert!(!err, "{text}");
    let started: Value = serde_json::from_str(&text).expect("JSON");
    let (port, token) = page_answers(&started);
    let workspace = PathBuf::from(started["workspace"].as_str().expect("workspace"));
    let host = format!("127.0.0.1:{port}");
    let (code, body) = crate::serve::get(port, &format!("/api/teams?token={token}"), &host, "", "");
    let team = started["team"].as_str().expect("team");
    assert!(
        code == 200 && body.contains(&format!("\"team\":\"{team}\"")),
        "the page is this run's: {code} {body}"
    );
    sb.write("go", "");
    wait_for("the team to finish", 60, || {
        let (_, text) = c.call("status", json!({"team": workspace}));
        text.contains("2 completed")
    });
    wait_for("the page to stop with its run", 60, || {
        nothing_listens(port)
    });
    assert!(
        !workspace.join("live-page.json").exists(),
        "the page's announcement goes with it"
    );
    c.close_stdin();
    assert!(
        wait_exit(&mut c.child, 60).is_some(),
        "the server ends with its client"
    );
    assert_eq!(sb.survivors_after(5.0), Vec::new(), "nothing left running");
    let told = std::fs::read_to_string(&kept).unwrap_or_default();
    assert!(told.contains("run_finished"), "the end was told: {told}");
}

/// `serve: true` on a waited `todo_resolve`: the answer names the page, and by then the page
/// is gone with its run. A `notify` target that cannot work is the CLI's refusal (exit 2),
/// and nothing is changed.
#[test]
fn a_served_waited_todo_resolve_names_its_page_which_is_gone_with_the_run() {
    let sb = Sandbox::new();
    let agent = csv_batch(&sb);
    let mut c = Client::start(&sb);
    let (err, text) = c.call("todo_add", json!({"text": "Audit the lexer", "store": "S"}));
    assert!(!err, "{text}");
    let before = sb.tree();
    let (err, text) = c.call(
        "todo_resolve",
        json!({"store": "S", "select": "1", "command": ["sh", &agent], "wait": true,
               "notify": ["ftp://hooks.example.com/x"]}),
    );
    assert!(
        err && text.contains("--notify") && text.contains("exit 2"),
        "{text}"
    );
    let (err, text) = c.call(
        "todo_resolve",
        json!({"store": "S", "select": "1", "command": ["sh", &agent], "serve": "yes"}),
    );
    assert!(err && text.contains("`serve`"), "{text}");
    assert_eq!(sb.tree(), before, "refusals change nothing");
    let (err, text) = c.call(
        "todo_resolve",
        json!({"store": "S", "select": "1", "command": ["sh", &agent], "wait": true,
               "serve": true}),
    );
    assert!(!err, "{text}");
    let summary: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(summary["exit_code"], 0, "{summary}");
    let url = summary["page_url"].as_str().expect("page_url");
    assert!(url.contains("?token="), "{url}");
    let (port, _) = crate::serve::parts(url);
    assert!(nothing_listens(port), "the page stops when its run ends");
    c.close_stdin();
    assert!(
        wait_exit(&mut c.child, 60).is_some(),
        "the server ends with its client"
    );
    assert_eq!(sb.survivors_after(5.0), Vec::new(), "nothing left running");
}
