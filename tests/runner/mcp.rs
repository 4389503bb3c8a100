//! `runner mcp` (issue 28): every tool driven over stdio by a plain JSON-RPC client written
//! here from the MCP specification (newline-delimited JSON-RPC 2.0: `initialize`,
//! `notifications/initialized`, `tools/list`, `tools/call`) — independent of the SDK the
//! server is built on. Refusals leave nothing changed; a waited run sends progress.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use serde_json::{Value, json};

use crate::harness::{Sandbox, wait_for};

/// A client session with `runner mcp` started in the sandbox.
struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    /// Notifications seen while waiting for responses.
    notes: Vec<Value>,
}

impl Client {
    fn start(sb: &Sandbox) -> Client {
        let mut child = sb
            .cmd(&["mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn runner mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut c = Client {
            child,
            stdin,
            stdout,
            next: 1,
            notes: Vec::new(),
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
        c
    }

    fn send(&mut self, msg: &Value) {
        writeln!(self.stdin, "{msg}").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Send a request and read until its response; every line read must be JSON-RPC.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
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
    fn call(&mut self, tool: &str, args: Value) -> (bool, String) {
        self.call_with(tool, args, None)
    }

    fn call_with(&mut self, tool: &str, args: Value, progress: Option<&str>) -> (bool, String) {
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
fn csv_batch(sb: &Sandbox) -> String {
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
    ] {
        assert!(
            batch["inputSchema"]["properties"].get(field).is_some(),
            "batch_run has no `{field}`: {batch}"
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
    let log = started["stderr_log"]
        .as_str()
        .expect("stderr_log")
        .to_owned();
    let events = log.replace(".stderr.log", ".jsonl");
    assert!(events.ends_with(".events.jsonl"), "{events}");
    wait_for("the finished run's temporary files to go", 30, || {
        !std::path::Path::new(&log).exists() && !std::path::Path::new(&events).exists()
    });
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
