//! End to end: the built-in `claude` runner definition against the REAL Claude Code CLI,
//! offline. A `wiremock` server plays the Anthropic Messages API (`ANTHROPIC_BASE_URL`), with
//! a scripted model: the first turn answers with a `Write` tool call that writes the report
//! to the path the prompt names, the second (after the tool result) with a short final text.
//! No real model is ever called.
//!
//! Claude Code is installed by `.ci/run` into `target/e2e-claude/` (a pinned version, from the
//! npm registry); `RUNNER_E2E_CLAUDE` may point at another `claude` binary. Without one the
//! tests skip (`crate::skip`). The cases it shares with every CLI are its row in `table.rs`;
//! here are its wiring ([`Claude`]) and the tests only Claude Code has.
//!
//! What Claude Code 2.1.332 sends with the environment below: only `POST
//! /v1/messages?beta=true` (streaming), one per turn. Anything else is answered sensibly and
//! logged (run with `--nocapture` to see the log).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{any, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::cases::{self, Agent, Key, Setup, StandIn};
use crate::support::{self, Cli, Log, Run, Sandbox, Shared, find_report_path};

/// The tool-use id of the scripted `Write` call.
const TOOL_USE_ID: &str = "toolu_01E2eWriteReport0000000";

/// An Anthropic API error: the HTTP status and the error body's `type` and `message`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fault {
    /// HTTP status.
    pub status: u16,
    /// `error.type`, e.g. `overloaded_error`.
    pub error_type: &'static str,
    /// `error.message`.
    pub message: &'static str,
}

/// The Anthropic API's answer to a key it rejects.
pub(crate) const BAD_KEY: Fault = Fault {
    status: 401,
    error_type: "authentication_error",
    message: "invalid x-api-key",
};

/// What the scripted model does on `POST /v1/messages`: `WriteReport` is turn 1 a `Write`
/// tool call, turn 2 a short final text; `RateLimitOnce` is a 429, then as `WriteReport`.
type Script = cases::Script<Fault>;

/// Token usage the scripted model reports per turn (input, output). Realistic for Claude
/// Code: its system prompt and tool definitions are ~18k tokens.
const TURN1_USAGE: (u64, u64) = (18_234, 96);
const TURN2_USAGE: (u64, u64) = (18_412, 14);

/// What the Messages responder learned, for the assertions.
type Seen = Shared<SeenInner>;

#[derive(Default, Debug)]
struct SeenInner {
    message_calls: usize,
    /// The model the streamed answers named (the stand-in answers as the model asked).
    answered_model: Option<String>,
    report_path: Option<String>,
    tool_result: Option<Value>,
    session_header: Option<String>,
    api_key_header: Option<String>,
}

/// `POST /v1/messages`.
struct Messages {
    script: Script,
    log: Log,
    seen: Seen,
}

impl Respond for Messages {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Some(body) = support::json_body(req, &self.log) else {
            return api_error(400, "invalid_request_error", "body is not JSON");
        };
        let model = body["model"].as_str().unwrap_or("?").to_string();
        let streaming = body["stream"] == json!(true);
        if streaming {
            self.seen.with(|s| s.answered_model = Some(model.clone()));
        }
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        let user_text = support::user_text(&body["messages"]);
        let tool_result = tool_result(&body, TOOL_USE_ID);
        let turn = self.seen.with(|s| {
            s.message_calls += 1;
            s.session_header =
                support::header(req, "x-claude-code-session-id").or(s.session_header.take());
            s.api_key_header = support::header(req, "x-api-key");
            s.message_calls
        });
        let what = format!(
            "POST {} #{turn}: model {model}, stream {streaming}, {} message(s), {} tool(s)",
            req.url.path(),
            body["messages"].as_array().map_or(0, Vec::len),
            tools.len()
        );

        if let Script::Fail(Fault {
            status,
            error_type,
            message,
        }) = self.script
        {
            self.log.push(format!("{what} -> {status} {error_type}"));
            return api_error(status, error_type, message);
        }

        if let (Script::RateLimitOnce, 1) = (self.script, turn) {
            self.log
                .push(format!("{what} -> 429 rate_limit_error (once)"));
            return api_error(
                429,
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            );
        }

        if let Script::Stall = self.script {
            self.log.push(format!("{what} -> (stalling)"));
            return ResponseTemplate::new(200).set_delay(Duration::from_secs(600));
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

        if let Script::ReportInText = self.script {
            self.log.push(format!("{what} -> the report as final text"));
            let text = format!("Done.\n```json\n{}\n```\n", support::report_json("1"));
            return sse(&text_turn(&model, turn, &text, TURN2_USAGE));
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
pub(crate) fn sse(events: &[Value]) -> ResponseTemplate {
    support::event_stream(support::named_events(events)).insert_header("request-id", "req_e2e_mock")
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
    let input = json!({"file_path": report, "content": support::report_json("1")}).to_string();
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
pub(crate) fn text_turn(model: &str, turn: usize, text: &str, usage: (u64, u64)) -> Vec<Value> {
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

/// The `tool_result` block answering `id`, if the conversation has one.
pub(crate) fn tool_result(body: &Value, id: &str) -> Option<Value> {
    body["messages"]
        .as_array()?
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .cloned()
}

/// The running stand-in: the server, its request log and what it saw.
pub(crate) struct Api {
    server: MockServer,
    log: Log,
    seen: Seen,
}

impl StandIn for Api {
    fn log(&self) -> &Log {
        &self.log
    }
    fn turns(&self) -> usize {
        self.seen.with(|s| s.message_calls)
    }
}

/// A mock API with `script`.
async fn mock_api(script: Script) -> Api {
    let log = Log::default();
    let seen = Seen::default();
    let messages = Messages {
        script,
        log: log.clone(),
        seen: seen.clone(),
    };
    let server = messages_api(messages, &log).await;
    Api { server, log, seen }
}

/// A mock API whose `POST /v1/messages` is `messages`; token counts and anything else are
/// answered as [`CountTokens`] and [`Other`] do, logged to `log`.
pub(crate) async fn messages_api(messages: impl Respond + 'static, log: &Log) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(messages)
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
    server
}

// ---------------------------------------------------------------------------------------
// Running `runner` with Claude Code

/// Claude Code's wiring for the shared cases (`table.rs`).
pub(crate) struct Claude;

impl Agent for Claude {
    const NAME: &'static str = "claude";
    const BIN: &'static str = "node_modules/.bin/claude";
    const VERSION_HAS: &'static str = "Claude Code";
    type Fault = Fault;
    type Api = Api;

    async fn start(script: Script) -> Api {
        mock_api(script).await
    }

    fn setup(_cli: &Cli, sb: &Sandbox, api: &Api, _key: Key) -> Setup {
        Setup {
            args: vec![],
            env: claude_env(sb, &api.server.uri()),
        }
    }

    /// The report really came from Claude Code's `Write` tool, at the path the prompt named;
    /// the session and usage columns are as Claude Code computed them from the mock's usage;
    /// the model is the one that answered, read from Claude Code's own output.
    fn check_completed(sb: &Sandbox, r: &Run, api: &Api, row: &BTreeMap<String, String>) {
        let context = || sb.context(r, &api.log);
        let s = api.seen.with(std::mem::take);
        assert_eq!(s.message_calls, 2, "one call per turn: {}", context());
        sb.assert_report_written(s.report_path.clone());
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

        let journal =
            std::fs::read_to_string(sb.path().join("workers-output.runner/journal.jsonl"))
                .expect("journal");
        let finished: Value = journal
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .rfind(|e| e["event"] == "item_finished")
            .expect("item_finished");
        assert_eq!(
            finished["outcome"]["model"].as_str(),
            s.answered_model.as_deref(),
            "{finished}"
        );
        eprintln!("cost ${cost}");
    }

    /// The report in the teammate folder, Claude Code's state in CLAUDE_CONFIG_DIR.
    fn check_sandboxed(sb: &Sandbox, _r: &Run, _api: &Api) {
        cases::assert_report_file(sb);
        assert!(
            std::fs::read_dir(sb.home().join(".claude"))
                .map(|d| d.count() > 0)
                .unwrap_or(false),
            "Claude Code kept its state in CLAUDE_CONFIG_DIR"
        );
    }
}

/// `runner batch ... --runner claude --timeout <timeout> EXTRA...` in `sb`, with Claude Code
/// pointed at `api`.
async fn run_claude_with(sb: &Sandbox, api: &str, timeout: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--runner", "claude", "--timeout", timeout];
    args.extend_from_slice(extra);
    sb.run(&args, &claude_env(sb, api)).await
}

/// The environment Claude Code runs with in these tests (its config dir created).
pub(crate) fn claude_env(sb: &Sandbox, api: &str) -> Vec<(&'static str, String)> {
    std::fs::create_dir_all(sb.home().join(".claude")).expect("mkdir .claude");
    vec![
        // Claude Code, offline and non-interactive.
        (
            "CLAUDE_CONFIG_DIR",
            sb.home().join(".claude").display().to_string(),
        ),
        ("ANTHROPIC_BASE_URL", api.to_string()),
        ("ANTHROPIC_API_KEY", "sk-test".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_ERROR_REPORTING", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        // Its retries are the definition's (`max_retries`, CLAUDE_CODE_MAX_RETRIES=2).
        // A stalled response fails after 30 s instead of 10 min.
        ("API_TIMEOUT_MS", "30000".into()),
        // Set, as it is whenever `runner` runs inside Claude Code: the runner must unset it.
        ("CLAUDECODE", "1".into()),
    ]
}

// ---------------------------------------------------------------------------------------
// Tests only Claude Code has

/// A rate limit that lasts, with Claude Code at its own default retries (10, back-off up to
/// minutes): its retries never end the attempt early (a short wait is the CLI's to make), but
/// the time-out's reason quotes the retry event it was on, not only "timed out".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_claude_retrying_a_rate_limit_until_the_time_limit_says_so() {
    let Some(claude) =
        cases::find::<Claude>("real_claude_retrying_a_rate_limit_until_the_time_limit_says_so")
    else {
        return;
    };
    let api = mock_api(Script::Fail(Fault {
        status: 429,
        error_type: "rate_limit_error",
        message: "Number of request tokens has exceeded your per-minute rate limit",
    }))
    .await;
    let sb = Sandbox::new(&claude);
    let r = run_claude_with(&sb, &api.server.uri(), "6s", &["--var", "max_retries=10"]).await;
    let row = sb.assert_outcome(&r, &api.log, 1, "timed_out", "timed_out");
    assert!(
        row["error"]
            .contains("the last error it printed: API error 429 (rate_limit), Claude Code's retry")
            && row["error"].ends_with("of 10 (rate_limited)"),
        "{row:?}"
    );
    sb.assert_no_survivors();
}
// ---------------------------------------------------------------------------------------
// Claude Code as the lead: `runner mcp` as its MCP server (issue 28)

const MCP_ADD_ID: &str = "toolu_01E2eMcpTodoAdd00000000";
const MCP_BATCH_ID: &str = "toolu_01E2eMcpBatchRun0000000";
const MCP_SEARCH_ID: &str = "toolu_01E2eMcpToolSearch000000";

/// `POST /v1/messages` for a lead session: turn 1 calls `mcp__runner__todo_add`, turn 2 (its
/// result in hand) `mcp__runner__batch_run`, turn 3 answers with text; when the MCP tools are
/// deferred (Claude Code's default), turn 0 first loads them with `ToolSearch`. What it saw
/// is kept.
struct McpLead {
    agent: String,
    log: Log,
    /// The results of the two runner tool calls.
    seen: Shared<Vec<Value>>,
    /// The runner tools the model was told of: in the request's tools, or named in its
    /// deferred-tools list.
    offered: Shared<Vec<String>>,
    /// What `ToolSearch` answered, when it was used.
    searched: Shared<Option<Value>>,
    /// `mcp__runner__batch_run` as a request defined it for the model (with its schema).
    loaded: Shared<Option<Value>>,
}

/// The tools `runner mcp` serves, as Claude Code names them (`mcp__<server>__<tool>`).
const RUNNER_TOOLS: [&str; 7] = [
    "mcp__runner__todo_list",
    "mcp__runner__todo_add",
    "mcp__runner__todo_resolve",
    "mcp__runner__batch_run",
    "mcp__runner__status",
    "mcp__runner__show",
    "mcp__runner__stop",
];

/// A turn that calls MCP tool `name` with `input`; stop_reason `tool_use`.
pub(crate) fn mcp_turn(
    model: &str,
    turn: usize,
    id: &str,
    name: &str,
    input: &Value,
) -> Vec<Value> {
    let mut events = vec![
        message_start(model, turn, TURN1_USAGE.0),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
        json!({"type": "content_block_stop", "index": 0}),
    ];
    events.extend(message_end("tool_use", TURN1_USAGE));
    events
}

impl Respond for McpLead {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Some(body) = support::json_body(req, &self.log) else {
            return api_error(400, "invalid_request_error", "body is not JSON");
        };
        let model = body["model"].as_str().unwrap_or("?").to_string();
        if body["stream"] != json!(true) {
            self.log.push("side request -> short text".into());
            return ResponseTemplate::new(200).set_body_json(json!({
                "id": "msg_e2e_side", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": "Runner tools"}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 50, "output_tokens": 2}
            }));
        }
        let tools: Vec<String> = body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let text = body.to_string();
        self.offered.with(|o| {
            for t in RUNNER_TOOLS {
                if text.contains(t) && !o.iter().any(|x| x == t) {
                    o.push(t.to_string());
                }
            }
        });
        let added = tool_result(&body, MCP_ADD_ID);
        let ran = tool_result(&body, MCP_BATCH_ID);
        let searched = tool_result(&body, MCP_SEARCH_ID);
        // Claude Code's default defers MCP tools: their names are listed to the model, and
        // its ToolSearch tool loads their schemas before the first call.
        let deferred = !tools.iter().any(|t| t == "mcp__runner__todo_add")
            && tools.iter().any(|t| t == "ToolSearch")
            && text.contains("mcp__runner__todo_add");
        if deferred && searched.is_none() {
            self.log.push("turn 0 -> tool_use ToolSearch".into());
            let input = json!({"query": "select:mcp__runner__todo_add,mcp__runner__batch_run"});
            return sse(&mcp_turn(&model, 1, MCP_SEARCH_ID, "ToolSearch", &input));
        }
        if let Some(def) = body["tools"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == "mcp__runner__batch_run"))
        {
            self.loaded.with(|l| *l = Some(def.clone()));
        }
        if let Some(found) = &searched {
            self.searched.with(|s| *s = Some(found.clone()));
        }
        match (added, ran) {
            (_, Some(result)) => {
                self.seen.with(|s| s.push(result));
                self.log.push("turn 3 -> final text".into());
                sse(&text_turn(
                    &model,
                    3,
                    "The lexer audit is in the inbox and the rows ran.",
                    TURN2_USAGE,
                ))
            }
            (Some(result), None) => {
                self.seen.with(|s| s.push(result));
                self.log
                    .push("turn 2 -> tool_use mcp__runner__batch_run".into());
                let input = json!({
                    "csv_path": "rows.csv",
                    "instruction": "Look at {topic}.",
                    "id_column": "id",
                    "command": ["sh", self.agent],
                    "wait": true
                });
                sse(&mcp_turn(
                    &model,
                    2,
                    MCP_BATCH_ID,
                    "mcp__runner__batch_run",
                    &input,
                ))
            }
            (None, None)
                if tools.iter().any(|t| t == "mcp__runner__todo_add") || searched.is_some() =>
            {
                self.log
                    .push("turn 1 -> tool_use mcp__runner__todo_add".into());
                let input = json!({"text": "Audit the lexer\nstart with tabs", "store": "S"});
                sse(&mcp_turn(
                    &model,
                    1,
                    MCP_ADD_ID,
                    "mcp__runner__todo_add",
                    &input,
                ))
            }
            (None, None) => {
                self.log
                    .push(format!("(unexpected) no runner tools offered: {tools:?}"));
                sse(&text_turn(&model, 1, "No runner tools.", (400, 4)))
            }
        }
    }
}

/// The real Claude Code, in print mode, with `runner mcp` named by `--mcp-config`, at its
/// default settings: the MCP tools are deferred, so the scripted model loads them with
/// `ToolSearch` (the runner's schemas must come back), then calls `todo_add` and `batch_run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_claude_as_the_lead_finds_and_calls_runner_mcp_tools() {
    lead_calls_runner_mcp_tools(
        "real_claude_as_the_lead_finds_and_calls_runner_mcp_tools",
        true,
    )
    .await;
}

/// The same with `ENABLE_TOOL_SEARCH=false` (the MCP tools in the request itself): the
/// scripted model calls `todo_add` and then `batch_run` (waiting for the end); the calls
/// reach the runner, their results come back to the model, and the files are there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_claude_as_the_lead_calls_runner_mcp_tools() {
    lead_calls_runner_mcp_tools("real_claude_as_the_lead_calls_runner_mcp_tools", false).await;
}

async fn lead_calls_runner_mcp_tools(test: &str, tool_search: bool) {
    let Some(claude) = cases::find::<Claude>(test) else {
        return;
    };
    let sb = Sandbox::new(&claude);
    let dir = sb.path();
    std::fs::write(dir.join("rows.csv"), "id,topic\na,x\nb,y\n").expect("csv");
    let agent = dir.join("agent.sh");
    std::fs::write(
        &agent,
        "cat > /dev/null\nprintf '{\"status\":\"completed\",\"summary\":\"did %s\"}' \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n",
    )
    .expect("agent");
    let config = json!({"mcpServers": {"runner": {
        "command": env!("CARGO_BIN_EXE_runner"), "args": ["mcp"]
    }}});
    std::fs::write(dir.join("mcp.json"), config.to_string()).expect("mcp.json");

    let (log, seen, offered, searched, loaded) = (
        Log::default(),
        Shared::<Vec<Value>>::default(),
        Shared::<Vec<String>>::default(),
        Shared::<Option<Value>>::default(),
        Shared::<Option<Value>>::default(),
    );
    let lead = McpLead {
        agent: agent.display().to_string(),
        log: log.clone(),
        seen: seen.clone(),
        offered: offered.clone(),
        searched: searched.clone(),
        loaded: loaded.clone(),
    };
    let server = messages_api(lead, &log).await;

    let mut cmd = tokio::process::Command::new(&claude.bin);
    cmd.args([
        "-p",
        "Add the lexer audit to the inbox, then run the rows.",
        "--mcp-config",
        "mcp.json",
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__runner__todo_add,mcp__runner__batch_run",
        "--output-format",
        "json",
    ])
    .current_dir(dir)
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .env("HOME", sb.home())
    .env("TMPDIR", dir.join("tmp"))
    .envs(
        claude_env(&sb, &server.uri())
            .into_iter()
            .filter(|(k, _)| *k != "CLAUDECODE"),
    )
    .stdin(std::process::Stdio::null())
    .kill_on_drop(true);
    if !tool_search {
        // MCP tools in the request itself, not deferred behind ToolSearch.
        cmd.env("ENABLE_TOOL_SEARCH", "false");
    }
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("claude within 2 minutes")
        .expect("run claude");
    let context = format!(
        "exit {:?}\nstdout {}\nstderr {}\nlog:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        log.dump()
    );
    assert!(out.status.success(), "{context}");
    let offered = offered.with(|o| o.clone());
    for tool in RUNNER_TOOLS {
        assert!(
            offered.iter().any(|t| t == tool),
            "{tool} offered to the model: {offered:?}"
        );
    }
    let searched = searched.with(|s| s.clone());
    match (tool_search, searched) {
        (true, Some(found)) => {
            let found = found.to_string();
            assert!(
                found.contains("\"tool_name\":\"mcp__runner__todo_add\"")
                    && found.contains("\"tool_name\":\"mcp__runner__batch_run\""),
                "ToolSearch found the runner's tools: {found}\n{context}"
            );
        }
        (true, None) => panic!("the tools were not deferred behind ToolSearch: {context}"),
        (false, found) => assert!(found.is_none(), "{context}"),
    }
    let loaded = loaded.with(|l| l.clone()).unwrap_or_default().to_string();
    assert!(
        loaded.contains("csv_path") && loaded.contains("instruction_path"),
        "batch_run's schema reached the model: {loaded}\n{context}"
    );
    let results = seen.with(|s| s.clone());
    assert_eq!(results.len(), 2, "{context}");
    let text = |v: &Value| v.to_string();
    assert!(text(&results[0]).contains("Added item 1"), "{}", results[0]);
    assert!(text(&results[1]).contains("exit_code"), "{}", results[1]);
    let inbox = std::fs::read_to_string(dir.join("S/todo.md")).expect("inbox");
    assert!(inbox.contains("Audit the lexer"), "{inbox}");
    let output = std::fs::read_to_string(dir.join("workers-output.csv")).expect("output");
    assert!(
        output.contains("did a") && output.contains("did b"),
        "{output}"
    );
}
