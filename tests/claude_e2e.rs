//! End to end: the built-in `claude` runner definition against the REAL Claude Code CLI,
//! offline. A `wiremock` server plays the Anthropic Messages API (`ANTHROPIC_BASE_URL`), with
//! a scripted model: the first turn answers with a `Write` tool call that writes the report
//! to the path the prompt names, the second (after the tool result) with a short final text.
//! No real model is ever called.
//!
//! Claude Code is installed by `.ci/run` into `target/e2e-claude/` (a pinned version, from the
//! npm registry); `RUNNER_E2E_CLAUDE` may point at another `claude` binary. Without one the
//! tests print a `skipped: ...` notice on stderr and pass.
//!
//! What Claude Code 2.1.332 sends with the environment below: only `POST
//! /v1/messages?beta=true` (streaming), one per turn. Anything else is answered sensibly and
//! logged (run with `--nocapture` to see the log).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{any, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Longest a whole `runner` invocation may take before the test fails. The runner's own
/// `--timeout 90s` (then `--grace 5s`) should end a hung CLI first; this is the backstop.
const RUN_LIMIT: Duration = Duration::from_secs(110);

/// The tool-use id of the scripted `Write` call.
const TOOL_USE_ID: &str = "toolu_01E2eWriteReport0000000";

/// The report the scripted model writes.
fn report_json() -> String {
    json!({
        "id": "1",
        "status": "completed",
        "summary": "wrote the report",
        "files_modified": [],
        "files_created": [],
        "tests": "none",
        "blocker": null,
        "next_steps": [],
        "output": {"answer": 42}
    })
    .to_string()
}

// ---------------------------------------------------------------------------------------
// Finding Claude Code

/// The `claude` binary to test, or `None` (with the skip notice printed) when there is none.
fn claude_or_skip(test: &str) -> Option<(PathBuf, String)> {
    let explicit = std::env::var_os("RUNNER_E2E_CLAUDE").filter(|v| !v.is_empty());
    let default =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e-claude/node_modules/.bin/claude");
    let bin = explicit.clone().map(PathBuf::from).unwrap_or(default);
    let why = if !bin.exists() {
        format!("no Claude Code at {}", bin.display())
    } else {
        match version_of(&bin) {
            Ok(v) => return Some((bin, v)),
            Err(e) => format!("{} does not run: {e}", bin.display()),
        }
    };
    if explicit.is_some() {
        panic!("RUNNER_E2E_CLAUDE is set but unusable: {why}");
    }
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e-claude/install.log");
    let hint = if log.exists() {
        format!(" (the last install attempt's log: {})", log.display())
    } else {
        String::new()
    };
    eprintln!(
        "skipped: {test}: {why}{hint}. Install it with `bash .ci/run` (needs npm), or \
         `npm install --prefix target/e2e-claude --no-audit --no-fund \
         @anthropic-ai/claude-code@<version pinned in .ci/run>`, or set RUNNER_E2E_CLAUDE \
         to a claude binary."
    );
    None
}

/// `claude --version`, e.g. `2.1.332 (Claude Code)`, with a 30 s limit.
fn version_of(bin: &Path) -> Result<String, String> {
    let home = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(bin)
        .arg("--version")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("CLAUDE_CONFIG_DIR", home.path().join(".claude"))
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(_) => break,
            None if Instant::now() > until => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("`--version` did not finish within 30 s".into());
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && stdout.contains("Claude Code") {
        Ok(stdout)
    } else {
        Err(format!(
            "`--version` exited {:?}: {stdout} {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

// ---------------------------------------------------------------------------------------
// The scripted Anthropic Messages API

/// What the scripted model does on `POST /v1/messages`.
#[derive(Clone, Copy, Debug)]
enum Script {
    /// Turn 1: write the report with the `Write` tool; turn 2: a short final text.
    WriteReport,
    /// Every call fails with this HTTP status and Anthropic error body.
    Fail {
        status: u16,
        error_type: &'static str,
        message: &'static str,
    },
}

/// Token usage the scripted model reports per turn (input, output). Realistic for Claude
/// Code: its system prompt and tool definitions are ~18k tokens.
const TURN1_USAGE: (u64, u64) = (18_234, 96);
const TURN2_USAGE: (u64, u64) = (18_412, 14);

/// One line per request the mock saw, for the test log and failure messages.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, line: String) {
        eprintln!("[mock api] {line}");
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    fn dump(&self) -> String {
        self.lines().join("\n")
    }
}

/// What the Messages responder learned, for the assertions.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<SeenInner>>);

#[derive(Default, Debug)]
struct SeenInner {
    message_calls: usize,
    report_path: Option<String>,
    tool_result: Option<Value>,
    session_header: Option<String>,
    api_key_header: Option<String>,
}

impl Seen {
    fn with<T>(&self, f: impl FnOnce(&mut SeenInner) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// `POST /v1/messages`.
struct Messages {
    script: Script,
    log: Log,
    seen: Seen,
}

impl Respond for Messages {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let header = |name: &str| {
            req.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let body: Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => {
                self.log.push(format!(
                    "POST {} with a body that is not JSON: {e}",
                    req.url
                ));
                return api_error(400, "invalid_request_error", "body is not JSON");
            }
        };
        let model = body["model"].as_str().unwrap_or("?").to_string();
        let streaming = body["stream"] == json!(true);
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        let user_text = user_text(&body);
        let tool_result = tool_result(&body, TOOL_USE_ID);
        let turn = self.seen.with(|s| {
            s.message_calls += 1;
            s.session_header = header("x-claude-code-session-id").or(s.session_header.take());
            s.api_key_header = header("x-api-key");
            s.message_calls
        });
        let what = format!(
            "POST {} #{turn}: model {model}, stream {streaming}, {} message(s), {} tool(s)",
            req.url.path(),
            body["messages"].as_array().map_or(0, Vec::len),
            tools.len()
        );

        if let Script::Fail {
            status,
            error_type,
            message,
        } = self.script
        {
            self.log.push(format!("{what} -> {status} {error_type}"));
            return api_error(status, error_type, message);
        }

        if !streaming {
            // Claude Code streams its turns; a non-streaming call would be a side request
            // (e.g. a title or a quota probe on the small model). Answer it briefly.
            self.log
                .push(format!("{what} -> (unexpected) non-streaming text"));
            return ResponseTemplate::new(200).set_body_json(json!({
                "id": format!("msg_e2e_side_{turn}"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": "Report writing"}],
                "stop_reason": "end_turn",
                "stop_sequence": null,
                "usage": {"input_tokens": 120, "output_tokens": 4}
            }));
        }

        if let Some(result) = tool_result {
            self.seen.with(|s| s.tool_result = Some(result.clone()));
            self.log
                .push(format!("{what} -> final text (tool result: {result})"));
            return sse(&text_turn(
                &model,
                turn,
                "Done: the report is written.",
                TURN2_USAGE,
            ));
        }

        match find_report_path(&user_text) {
            Some(report) if tools.contains(&"Write") => {
                self.seen.with(|s| s.report_path = Some(report.clone()));
                self.log.push(format!("{what} -> tool_use Write {report}"));
                sse(&write_turn(&model, turn, &report))
            }
            found => {
                self.log.push(format!(
                    "{what} -> (unexpected) no report path or no Write tool \
                     (report path {found:?}, tools {tools:?}); answering with text"
                ));
                sse(&text_turn(
                    &model,
                    turn,
                    "I cannot find the report path.",
                    (400, 9),
                ))
            }
        }
    }
}

/// `POST /v1/messages/count_tokens`.
struct CountTokens(Log);

impl Respond for CountTokens {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        self.0
            .push(format!("POST {} -> input_tokens 1000", req.url.path()));
        ResponseTemplate::new(200).set_body_json(json!({"input_tokens": 1000}))
    }
}

/// Every other request: probes get a 200, anything else an Anthropic-style 404. Logged.
struct Other(Log);

impl Respond for Other {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let m = req.method.to_string();
        let probe =
            m == "HEAD" || (m == "GET" && (req.url.path() == "/" || req.url.path() == "/v1"));
        self.0.push(format!(
            "(unexpected) {m} {} ({} body bytes) -> {}",
            req.url,
            req.body.len(),
            if probe { 200 } else { 404 }
        ));
        if probe {
            ResponseTemplate::new(200)
        } else {
            api_error(404, "not_found_error", "Not found (e2e mock)")
        }
    }
}

/// An Anthropic API error response.
fn api_error(status: u16, error_type: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("request-id", "req_e2e_mock")
        .set_body_json(json!({
            "type": "error",
            "error": {"type": error_type, "message": message},
            "request_id": "req_e2e_mock"
        }))
}

/// A server-sent-events body, as the Messages API streams it.
fn sse(events: &[Value]) -> ResponseTemplate {
    let mut body = String::new();
    for e in events {
        let name = e["type"].as_str().unwrap_or("message");
        body.push_str(&format!("event: {name}\ndata: {e}\n\n"));
    }
    ResponseTemplate::new(200)
        .insert_header("request-id", "req_e2e_mock")
        .insert_header("cache-control", "no-cache")
        .set_body_raw(body, "text/event-stream")
}

fn message_start(model: &str, turn: usize, input_tokens: u64) -> Value {
    json!({
        "type": "message_start",
        "message": {
            "id": format!("msg_e2e_{turn:02}"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 1,
                "service_tier": "standard"
            }
        }
    })
}

fn message_end(stop_reason: &str, (input, output): (u64, u64)) -> [Value; 2] {
    [
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {
                "input_tokens": input,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": output
            }
        }),
        json!({"type": "message_stop"}),
    ]
}

/// Turn 1: a sentence, then `Write {file_path: report, content: <report JSON>}`, its input
/// streamed in two `input_json_delta` pieces; stop_reason `tool_use`.
fn write_turn(model: &str, turn: usize, report: &str) -> Vec<Value> {
    let input = json!({"file_path": report, "content": report_json()}).to_string();
    let (a, b) = input.split_at(input.len() / 2);
    let mut events = vec![
        message_start(model, turn, TURN1_USAGE.0),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "I'll write the report "}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "now."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1,
               "content_block": {"type": "tool_use", "id": TOOL_USE_ID, "name": "Write", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1,
               "delta": {"type": "input_json_delta", "partial_json": ""}}),
        json!({"type": "content_block_delta", "index": 1,
               "delta": {"type": "input_json_delta", "partial_json": a}}),
        json!({"type": "content_block_delta", "index": 1,
               "delta": {"type": "input_json_delta", "partial_json": b}}),
        json!({"type": "content_block_stop", "index": 1}),
    ];
    events.extend(message_end("tool_use", TURN1_USAGE));
    events
}

/// A plain text answer; stop_reason `end_turn`.
fn text_turn(model: &str, turn: usize, text: &str, usage: (u64, u64)) -> Vec<Value> {
    let mut events = vec![
        message_start(model, turn, usage.0),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
    ];
    events.extend(message_end("end_turn", usage));
    events
}

/// All text of the user messages.
fn user_text(body: &Value) -> String {
    let mut out = String::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        if m["role"] != "user" {
            continue;
        }
        match &m["content"] {
            Value::String(s) => out.push_str(s),
            Value::Array(blocks) => {
                for b in blocks {
                    if let Some(t) = b["text"].as_str() {
                        out.push_str(t);
                        out.push('\n');
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The `tool_result` block answering `id`, if the conversation has one.
fn tool_result(body: &Value, id: &str) -> Option<Value> {
    body["messages"]
        .as_array()?
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .cloned()
}

/// The last absolute path ending in `report.json` in `text` (the prompt names
/// `$RUNNER_REPORT`, e.g. "Write your report as JSON to the file `/…/report.json`").
fn find_report_path(text: &str) -> Option<String> {
    const NAME: &str = "report.json";
    text.match_indices(NAME)
        .filter_map(|(i, _)| {
            let start = text[..i]
                .rfind(|c: char| c.is_whitespace() || "`\"'()<>[]=,;".contains(c))
                .map_or(0, |s| s + 1);
            let candidate = &text[start..i + NAME.len()];
            candidate.starts_with('/').then(|| candidate.to_string())
        })
        .last()
}

/// A mock API with `script`; returns it with its request log and what it saw.
async fn mock_api(script: Script) -> (MockServer, Log, Seen) {
    let server = MockServer::start().await;
    let log = Log::default();
    let seen = Seen::default();
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(Messages {
            script,
            log: log.clone(),
            seen: seen.clone(),
        })
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/messages/count_tokens"))
        .respond_with(CountTokens(log.clone()))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(any())
        .respond_with(Other(log.clone()))
        .with_priority(10)
        .mount(&server)
        .await;
    (server, log, seen)
}

// ---------------------------------------------------------------------------------------
// Running `runner` in a temp folder

/// A temp folder for one run; on drop, no process started in it survives.
struct Sandbox {
    dir: tempfile::TempDir,
}

/// What one `runner batch` did.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {} after {:.1?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.took, self.stdout, self.stderr
        )
    }
}

impl Sandbox {
    fn new(claude: &Path) -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix("runner-claude-e2e-")
            .tempdir()
            .expect("tempdir");
        for sub in ["bin", "home/.claude", "tmp"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        // `claude` on PATH, whatever the binary is called.
        std::os::unix::fs::symlink(claude, dir.path().join("bin/claude")).expect("symlink");
        std::fs::write(dir.path().join("in.csv"), "id\n1\n").expect("in.csv");
        std::fs::write(
            dir.path().join("instr.md"),
            "Write the report for item {id}; nothing else needs doing.\n",
        )
        .expect("instr.md");
        Sandbox { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `runner batch --input in.csv --instruction instr.md --runner claude --format plain
    /// --timeout 90s`, with a clean environment pointing Claude Code at `api`.
    async fn run(&self, api: &str) -> Run {
        let root = self.path();
        let path = format!(
            "{}:{}",
            root.join("bin").display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into())
        );
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_runner"));
        cmd.args([
            "batch",
            "--input",
            "in.csv",
            "--instruction",
            "instr.md",
            "--runner",
            "claude",
            "--format",
            "plain",
            "--timeout",
            "90s",
            "--grace",
            "5s",
        ])
        .current_dir(root)
        // Nothing from the developer's environment: no real key, login, proxy, model or
        // config dir may leak in.
        .env_clear()
        .env("PATH", path)
        .env("HOME", root.join("home"))
        .env("TMPDIR", root.join("tmp"))
        .env("LANG", "C.UTF-8")
        .env("NO_COLOR", "1")
        // Claude Code, offline and non-interactive.
        .env("CLAUDE_CONFIG_DIR", root.join("home/.claude"))
        .env("ANTHROPIC_BASE_URL", api)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        // Fail an API error at once instead of retrying it with backoff (default 10).
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        // A stalled response fails after 30 s instead of 10 min.
        .env("API_TIMEOUT_MS", "30000")
        // Set, as it is whenever `runner` runs inside Claude Code: the runner must unset it.
        .env("CLAUDECODE", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
        for keep in ["RUNNER_LOG", "RUST_BACKTRACE"] {
            if let Some(v) = std::env::var_os(keep) {
                cmd.env(keep, v);
            }
        }
        let started = Instant::now();
        let child = cmd.spawn().expect("spawn runner");
        let out = match tokio::time::timeout(RUN_LIMIT, child.wait_with_output()).await {
            Ok(out) => out.expect("wait for runner"),
            // Dropping the future kills `runner` (kill_on_drop); Sandbox::drop ends the rest.
            Err(_) => panic!(
                "runner did not finish within {RUN_LIMIT:?}; workspace: {}",
                root.display()
            ),
        };
        let run = Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took: started.elapsed(),
        };
        eprintln!("runner: {run:?}");
        run
    }

    /// The one row of workers-output.csv.
    fn row(&self) -> BTreeMap<String, String> {
        let file = self.path().join("workers-output.csv");
        let mut rdr = csv::Reader::from_path(&file)
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        let headers = rdr.headers().expect("headers").clone();
        let rows: Vec<BTreeMap<String, String>> = rdr
            .records()
            .map(|r| {
                let r = r.expect("record");
                headers
                    .iter()
                    .zip(r.iter())
                    .map(|(h, v)| (h.to_string(), v.to_string()))
                    .collect()
            })
            .collect();
        assert_eq!(rows.len(), 1, "one row: {rows:?}");
        rows.into_iter().next().unwrap_or_default()
    }

    /// The last attempt's stdout log (Claude Code's stream-json), for failure messages.
    fn agent_log(&self) -> String {
        let p = self.path().join("workers-output.runner/teammates/1-1");
        let read = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
        let tail = |s: String| {
            let cut = s.len().saturating_sub(6000);
            let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(0);
            s[cut..].to_string()
        };
        format!(
            "--- claude stdout (tail)\n{}\n--- claude stderr (tail)\n{}",
            tail(read("attempt-1.stdout.log")),
            tail(read("attempt-1.stderr.log"))
        )
    }

    /// Processes whose environment mentions this sandbox (the run's children).
    fn live_processes(&self) -> Vec<(u32, String)> {
        let needle = self.path().display().to_string();
        let mut found = Vec::new();
        let me = std::process::id();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                continue;
            };
            if !String::from_utf8_lossy(&env).contains(&needle) {
                continue;
            }
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
            {
                continue;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
        found
    }

    /// Wait up to `secs` for no process of this sandbox to be alive; return the survivors.
    fn survivors_after(&self, secs: f64) -> Vec<(u32, String)> {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        loop {
            let live = self.live_processes();
            if live.is_empty() || Instant::now() > until {
                return live;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Never leave a Claude Code process behind, even when a test fails.
        for (pid, _) in self.live_processes() {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Tests

/// The whole loop with the real CLI: prompt on stdin, a real `Write` tool call writing
/// `$RUNNER_REPORT`, stream-json parsed, report judged, usage columns filled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_claude_writes_the_report_and_the_item_completes() {
    let Some((claude, version)) =
        claude_or_skip("real_claude_writes_the_report_and_the_item_completes")
    else {
        return;
    };
    eprintln!("using {} ({version})", claude.display());
    let (api, log, seen) = mock_api(Script::WriteReport).await;
    let sb = Sandbox::new(&claude);

    let r = sb.run(&api.uri()).await;
    let context = || {
        format!(
            "{r:?}\n{}\n--- mock api log\n{}",
            sb.agent_log(),
            log.dump()
        )
    };

    assert_eq!(r.code, 0, "every item completed: {}", context());
    let row = sb.row();
    assert_eq!(row["status"], "completed", "{row:?}\n{}", context());
    assert_eq!(row["summary"], "wrote the report", "{row:?}");
    assert_eq!(row["exit_code"], "0", "{row:?}");
    assert_eq!(row["error"], "", "{row:?}");

    // The report really came from Claude Code's Write tool, at the path the prompt named.
    let s = seen.with(std::mem::take);
    assert_eq!(s.message_calls, 2, "one call per turn: {}", context());
    let report = s
        .report_path
        .clone()
        .expect("the prompt named the report path");
    assert!(
        report.starts_with(&sb.path().display().to_string()) && report.ends_with("/report.json"),
        "{report}"
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("the report file"))
            .expect("report JSON");
    assert_eq!(written["summary"], "wrote the report");
    let result = s
        .tool_result
        .clone()
        .expect("Claude Code sent the tool result back");
    assert_ne!(
        result["is_error"],
        json!(true),
        "the Write succeeded: {result}"
    );
    assert_eq!(
        s.api_key_header.as_deref(),
        Some("sk-test"),
        "ANTHROPIC_API_KEY is used"
    );

    // Session and usage columns, as Claude Code computed them from the mock's usage.
    assert!(!row["session_id"].is_empty(), "{row:?}");
    if let Some(h) = &s.session_header {
        assert_eq!(&row["session_id"], h, "the session id the API saw");
    }
    let cost: f64 = row["cost_usd"]
        .parse()
        .unwrap_or_else(|e| panic!("cost_usd {:?}: {e}", row["cost_usd"]));
    assert!(cost > 0.0, "cost from the usage returned: {row:?}");
    assert_eq!(row["turns"], "2", "{row:?}");
    assert_eq!(
        row["input_tokens"],
        (TURN1_USAGE.0 + TURN2_USAGE.0).to_string(),
        "{row:?}"
    );
    assert_eq!(
        row["output_tokens"],
        (TURN1_USAGE.1 + TURN2_USAGE.1).to_string(),
        "{row:?}"
    );

    // Nothing else was requested, and nothing is left running.
    let unexpected: Vec<String> = log
        .lines()
        .into_iter()
        .filter(|l| l.contains("(unexpected)"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "unexpected requests: {unexpected:#?}"
    );
    let survivors = sb.survivors_after(5.0);
    assert!(survivors.is_empty(), "left running: {survivors:?}");
    eprintln!("completed in {:.1?}, cost ${cost}", r.took);
}

/// An API error the CLI gives up on (retries off): the item is `failed` with the error.
async fn api_error_fails_the_item(
    test: &str,
    status: u16,
    error_type: &'static str,
    message: &'static str,
    expect_in_reason: &[&str],
) {
    let Some((claude, version)) = claude_or_skip(test) else {
        return;
    };
    eprintln!("using {} ({version})", claude.display());
    let (api, log, seen) = mock_api(Script::Fail {
        status,
        error_type,
        message,
    })
    .await;
    let sb = Sandbox::new(&claude);

    let r = sb.run(&api.uri()).await;
    let context = || {
        format!(
            "{r:?}\n{}\n--- mock api log\n{}",
            sb.agent_log(),
            log.dump()
        )
    };

    assert_eq!(r.code, 1, "an item did not complete: {}", context());
    let row = sb.row();
    assert_eq!(row["status"], "failed", "{row:?}\n{}", context());
    let reason = row["error"].to_lowercase();
    assert!(!reason.is_empty(), "a reason is given: {row:?}");
    for word in expect_in_reason {
        assert!(
            reason.contains(&word.to_lowercase()),
            "the reason names the API error ({word:?}): {row:?}\n{}",
            context()
        );
    }
    let start: String = row["error"].chars().take(40).collect();
    assert!(
        r.stdout.contains(&start),
        "the closing summary names the reason: {r:?}"
    );
    assert_eq!(
        seen.with(|s| s.message_calls),
        1,
        "CLAUDE_CODE_MAX_RETRIES=0: no retry: {}",
        context()
    );
    assert!(
        r.took < Duration::from_secs(60),
        "gave up quickly: {:.1?}",
        r.took
    );
    let survivors = sb.survivors_after(5.0);
    assert!(survivors.is_empty(), "left running: {survivors:?}");
    eprintln!("failed as expected in {:.1?}: {}", r.took, row["error"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_claude_overloaded_529_fails_the_item() {
    api_error_fails_the_item(
        "real_claude_overloaded_529_fails_the_item",
        529,
        "overloaded_error",
        "Overloaded",
        &["529", "overloaded"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_claude_rate_limit_429_fails_the_item() {
    api_error_fails_the_item(
        "real_claude_rate_limit_429_fails_the_item",
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit",
        &["429", "rate limit"],
    )
    .await;
}
