//! End to end: the built-in `qwen` runner definition against the REAL Qwen Code CLI, offline.
//! A `wiremock` server plays an OpenAI-compatible chat completions API (`OPENAI_BASE_URL`),
//! with a scripted model: the first turn answers with a streamed `write_file` tool call that
//! writes the report to the path the prompt names, the second (after the tool result) with a
//! short final text. No real model is ever called.
//!
//! Qwen Code is installed by `.ci/run` into `target/e2e-qwen/` (a pinned version, from the npm
//! registry); `RUNNER_E2E_QWEN` may point at another `qwen` binary. Without one the tests skip
//! (`crate::skip`). The cases it shares with every CLI are its row in `table.rs`; here are
//! its wiring ([`Qwen`]) and the tests only Qwen Code has.
//!
//! What Qwen Code 0.24.4 sends with `OPENAI_API_KEY`/`OPENAI_BASE_URL`/`OPENAI_MODEL` (the
//! `openai` auth type is taken from the key; no settings needed): one streaming `POST
//! /v1/chat/completions` per turn (`stream_options.include_usage`), `Authorization: Bearer`.
//! It prints stream-json lines ending with a Claude-style `{"type":"result", "is_error",
//! "result" | "error": {"message"}, "session_id", "num_turns", "usage"}` line and exits 1 on
//! any failure. Retries (bundle `packages/core/src/utils/retry.ts`, `geminiChat.ts`): the
//! OpenAI SDK's own retries and the rate-limit loop (10 retries a minute apart) follow
//! `model.generationConfig.maxRetries` (0 here), but the main turn's `retryWithBackoff` always
//! makes up to 7 attempts for a 429 or 5xx, waiting `retry-after-ms`/`retry-after` when the
//! response gives one (else 1.5 s doubling: about 75 s). 401 is not retried. A quota message
//! that names a reset time ("quota … exceeded … will reset …") fails at once.
//! Its stderr always carries "Ripgrep not available: … Falling back to built-in grep." (the
//! vendored rg is not executable when npm install scripts did not run).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::cases::{self, Agent, Key, Setup, StandIn};
use crate::support::{self, Cli, Log, Run, Sandbox, Shared, find_report_path};

/// The id of the scripted tool call.
const TOOL_CALL_ID: &str = "call_e2e_write_report_0001";
/// The model name the test configures (`OPENAI_MODEL`).
const MODEL: &str = "qwen3-coder-plus";

/// An OpenAI API error: every call fails with this HTTP status, error body and
/// `retry-after-ms` ([`fault`]).
#[derive(Clone, Debug)]
pub(crate) struct Fault {
    /// HTTP status.
    pub status: u16,
    /// OpenAI's error body.
    pub body: Value,
    /// The `retry-after-ms` header, when set.
    pub retry_after_ms: Option<u32>,
}

/// What the scripted model does on `POST /v1/chat/completions`: `WriteReport` is turn 1 a
/// `write_file` call, turn 2 a short final text. `RateLimitOnce` is not scripted (no row of
/// the table asks Qwen Code for it).
type Script = cases::Script<Fault>;

/// Token usage the scripted model reports per turn (prompt, completion).
const TURN1_USAGE: (u64, u64) = (14_210, 88);
const TURN2_USAGE: (u64, u64) = (14_402, 9);

/// What the responder learned, for the assertions.
type Seen = Shared<SeenInner>;

#[derive(Default, Debug)]
struct SeenInner {
    /// Main-agent turns (not the memory extraction).
    calls: usize,
    /// Calls of the managed auto-memory extraction subagent.
    memory_calls: usize,
    report_path: Option<String>,
    tool_result: Option<Value>,
    auth_header: Option<String>,
    tools: Vec<String>,
}

/// `POST /v1/chat/completions`.
struct Chat {
    script: Script,
    log: Log,
    seen: Seen,
}

impl Respond for Chat {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Some(body) = support::json_body(req, &self.log) else {
            return openai_error(400, "body is not JSON", "invalid_request_error", None);
        };
        let tools: Vec<String> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
            .collect();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let streaming = body["stream"] == json!(true);
        // After a run whose last turn is plain text, Qwen Code 0.24.4 starts its "managed
        // auto-memory" subagent in the background (`memory.enableManagedAutoMemory`, default
        // true): one more streaming call with the whole conversation. Answer it with text
        // (nothing to save) so it ends without tool calls.
        let system = messages
            .first()
            .filter(|m| m["role"] == "system")
            .map(|m| m["content"].to_string())
            .unwrap_or_default();
        if system.contains("managed memory extraction subagent")
            && !matches!(self.script, Script::Fail(_) | Script::Stall)
        {
            let n = self.seen.with(|s| {
                s.memory_calls += 1;
                s.memory_calls
            });
            self.log.push(format!(
                "POST {} (memory extraction #{n}): {} message(s) -> text",
                req.url.path(),
                messages.len()
            ));
            return sse(&text_turn(100 + n, "Nothing durable to save.", (900, 5)));
        }
        let turn = self.seen.with(|s| {
            s.calls += 1;
            s.auth_header = req
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            s.tools = tools.clone();
            s.calls
        });
        let what = format!(
            "POST {} #{turn}: model {}, stream {streaming}, {} message(s), {} tool(s)",
            req.url.path(),
            body["model"].as_str().unwrap_or("?"),
            messages.len(),
            tools.len()
        );
        match &self.script {
            Script::Fail(Fault {
                status,
                body,
                retry_after_ms,
            }) => {
                self.log.push(format!("{what} -> {status}"));
                let mut r = ResponseTemplate::new(*status).set_body_json(body.clone());
                if let Some(ms) = retry_after_ms {
                    r = r.insert_header("retry-after-ms", ms.to_string().as_str());
                }
                return r;
            }
            Script::Stall => {
                self.log.push(format!("{what} -> (stalling)"));
                return ResponseTemplate::new(200).set_delay(Duration::from_secs(600));
            }
            _ => {}
        }
        if !streaming {
            self.log
                .push(format!("{what} -> (unexpected) non-streaming text"));
            return ResponseTemplate::new(200).set_body_json(json!({
                "id": format!("chatcmpl-e2e-side-{turn}"),
                "object": "chat.completion",
                "created": 1_796_000_000,
                "model": MODEL,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "Report"},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 120, "completion_tokens": 2, "total_tokens": 122}
            }));
        }
        if let Some(result) = tool_result(&messages, TOOL_CALL_ID) {
            self.seen.with(|s| s.tool_result = Some(result.clone()));
            self.log
                .push(format!("{what} -> final text (tool result: {result})"));
            return sse(&text_turn(
                turn,
                "Done: the report is written.",
                TURN2_USAGE,
            ));
        }
        let report = find_report_path(&support::user_text(&body["messages"]));
        match (&self.script, report) {
            (Script::WriteReport, Some(report)) if tools.iter().any(|t| t == "write_file") => {
                self.seen.with(|s| s.report_path = Some(report.clone()));
                self.log
                    .push(format!("{what} -> tool_calls write_file {report}"));
                sse(&write_turn(turn, &report))
            }
            (Script::ReportInText, Some(report)) => {
                self.seen.with(|s| s.report_path = Some(report.clone()));
                self.log
                    .push(format!("{what} -> the report in the final text"));
                let answer = format!(
                    "Here is my report.\n\n```json\n{}\n```\n",
                    support::report_json("1")
                );
                sse(&text_turn(turn, &answer, TURN1_USAGE))
            }
            (_, found) => {
                self.log.push(format!(
                    "{what} -> (unexpected) no report path or no write_file tool \
                     (report path {found:?}, tools {tools:?}); answering with text"
                ));
                sse(&text_turn(turn, "I cannot find the report path.", (400, 9)))
            }
        }
    }
}

fn openai_error_body(message: &str, error_type: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": error_type, "param": null, "code": code}})
}

fn openai_error(
    status: u16,
    message: &str,
    error_type: &str,
    code: Option<&str>,
) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(openai_error_body(message, error_type, code))
}

/// A `chat.completion.chunk` with `delta` and `finish_reason`.
fn chunk(turn: usize, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": format!("chatcmpl-e2e-{turn:02}"),
        "object": "chat.completion.chunk",
        "created": 1_796_000_000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    })
}

/// The last chunk of a stream with `stream_options.include_usage`: no choices, the usage.
fn usage_chunk(turn: usize, (prompt, completion): (u64, u64)) -> Value {
    json!({
        "id": format!("chatcmpl-e2e-{turn:02}"),
        "object": "chat.completion.chunk",
        "created": 1_796_000_000,
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion}
    })
}

/// Turn 1: a `write_file {file_path, content}` tool call, its arguments streamed in pieces.
fn write_turn(turn: usize, report: &str) -> Vec<Value> {
    let args = json!({"file_path": report, "content": support::report_json("1")}).to_string();
    let (a, b) = args.split_at(args.len() / 2);
    vec![
        chunk(
            turn,
            json!({"role": "assistant", "content": null, "tool_calls": [{
            "index": 0, "id": TOOL_CALL_ID, "type": "function",
            "function": {"name": "write_file", "arguments": ""}}]}),
            None,
        ),
        chunk(
            turn,
            json!({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}),
            None,
        ),
        chunk(
            turn,
            json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
            None,
        ),
        chunk(turn, json!({}), Some("tool_calls")),
        usage_chunk(turn, TURN1_USAGE),
    ]
}

/// A plain text answer, in two deltas.
fn text_turn(turn: usize, text: &str, usage: (u64, u64)) -> Vec<Value> {
    let cut = (0..=text.len() / 2)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let (a, b) = text.split_at(cut);
    vec![
        chunk(turn, json!({"role": "assistant", "content": a}), None),
        chunk(turn, json!({"content": b}), None),
        chunk(turn, json!({}), Some("stop")),
        usage_chunk(turn, usage),
    ]
}

/// A server-sent-events body as chat completions stream it, ending with `[DONE]`.
fn sse(chunks: &[Value]) -> ResponseTemplate {
    support::event_stream(support::data_events(chunks))
}

/// The `tool` message answering call `id`, if the conversation has one.
fn tool_result(messages: &[Value], id: &str) -> Option<Value> {
    messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
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
    /// Main-agent turns, not the memory extraction.
    fn turns(&self) -> usize {
        self.seen.with(|s| s.calls)
    }
}

/// A mock chat completions API with `script`.
async fn mock_api(script: Script) -> Api {
    let server = MockServer::start().await;
    let log = Log::default();
    let seen = Seen::default();
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Chat {
            script,
            log: log.clone(),
            seen: seen.clone(),
        })
        .with_priority(1)
        .mount(&server)
        .await;
    support::Other {
        log: log.clone(),
        not_found: openai_error(404, "Not found (e2e mock)", "invalid_request_error", None),
    }
    .mount(&server)
    .await;
    Api { server, log, seen }
}

// ---------------------------------------------------------------------------------------
// Running `runner` with Qwen Code

/// Qwen Code's wiring for the shared cases (`table.rs`).
pub(crate) struct Qwen;

impl Agent for Qwen {
    const NAME: &'static str = "qwen";
    const BIN: &'static str = "node_modules/.bin/qwen";
    /// `qwen --version` prints the bare version (`0.24.4`).
    const VERSION_HAS: &'static str = ".";
    type Fault = Fault;
    type Api = Api;

    async fn start(script: Script) -> Api {
        mock_api(script).await
    }

    fn setup(_cli: &Cli, sb: &Sandbox, api: &Api, key: Key) -> Setup {
        write_settings(sb);
        Setup {
            args: vec![],
            env: qwen_env(&api.server.uri(), key.value()),
        }
    }

    /// The report really came from Qwen Code's `write_file` tool, at the path the prompt
    /// named; `--approval-mode auto-edit` offers the file tools, not the shell; the session,
    /// turns and usage columns are as Qwen Code summed them from the mock's usage.
    fn check_completed(sb: &Sandbox, r: &Run, api: &Api, row: &BTreeMap<String, String>) {
        let context = || sb.context(r, &api.log);
        let s = api.seen.with(std::mem::take);
        assert_eq!(s.calls, 2, "one call per turn: {}", context());
        sb.assert_report_written(s.report_path.clone());
        let result = s
            .tool_result
            .clone()
            .expect("Qwen Code sent the tool result back");
        assert!(
            result
                .to_string()
                .contains("Successfully created and wrote to new file"),
            "the write succeeded: {result}"
        );
        assert_eq!(
            s.auth_header.as_deref(),
            Some("Bearer sk-test"),
            "OPENAI_API_KEY is used"
        );
        assert!(
            !s.tools.iter().any(|t| t == "run_shell_command"),
            "{:?}",
            s.tools
        );

        assert_eq!(row["session_id"].len(), 36, "a UUID: {row:?}");
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
    }

    /// No tool call: the report came from the final text.
    fn check_text(_sb: &Sandbox, api: &Api) {
        assert!(api.seen.with(|s| s.tool_result.is_none()));
    }

    /// The reason is the CLI's own message (the result line's `/error/message`), never the
    /// Ripgrep warning on its stderr; nothing unexpected was requested.
    fn check_failed(_sb: &Sandbox, api: &Api, row: &BTreeMap<String, String>) {
        assert!(
            !row["error"].to_lowercase().contains("ripgrep"),
            "not the stderr warning: {row:?}"
        );
        api.log.assert_nothing_unexpected();
    }
}

/// `<home>/.qwen/settings.json`: `model.generationConfig.maxRetries = 0` (no OpenAI SDK
/// retries, no minute-long rate-limit loop) and no usage statistics.
fn write_settings(sb: &Sandbox) {
    write_settings_with(sb, json!({"generationConfig": {"maxRetries": 0}}));
}

/// `<home>/.qwen/settings.json` with this `model` object and no usage statistics.
fn write_settings_with(sb: &Sandbox, model: Value) {
    let dir = sb.home().join(".qwen");
    std::fs::create_dir_all(&dir).expect("mkdir .qwen");
    let settings = json!({
        "model": model,
        "privacy": {"usageStatisticsEnabled": false}
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("settings.json");
}

/// Qwen Code's environment: the stand-in at `api` as its OpenAI API, `key` as
/// `OPENAI_API_KEY`.
fn qwen_env(api: &str, key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("OPENAI_BASE_URL", format!("{api}/v1")),
        ("OPENAI_MODEL", MODEL.to_string()),
    ];
    if let Some(k) = key {
        env.push(("OPENAI_API_KEY", k.to_string()));
    }
    env
}

/// An OpenAI API error for the table's rows: `status`, the error body, `retry-after-ms`.
pub(crate) fn fault(
    status: u16,
    message: &str,
    error_type: &str,
    code: Option<&str>,
    retry_after_ms: Option<u32>,
) -> Fault {
    Fault {
        status,
        body: openai_error_body(message, error_type, code),
        retry_after_ms,
    }
}

// ---------------------------------------------------------------------------------------
// Tests only Qwen Code has

/// OpenAI's used-up quota with no retry setting of the user's own: the definition's system
/// defaults (`maxRetries` 0) leave only the main turn's fixed 7 attempts, not the 28
/// requests the CLI's own default makes (its SDK's retries of each); `quota` (issue 29).
/// `--var max_retries=3` (the SDK's default) brings the 28 back — the file is what cuts them —
/// and then the stream's rate-limit loop announces "Retrying in 60s (attempt 1/3): [API
/// Error: 429 You exceeded your current quota…]" on stderr, which ends the attempt at once
/// (`[failure] live`) instead of three minutes later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_qwen_quota_with_the_definitions_retry_default_makes_7_requests_not_28() {
    const TEST: &str = "real_qwen_quota_with_the_definitions_retry_default_makes_7_requests_not_28";
    let Some(qwen) = cases::find::<Qwen>(TEST) else {
        return;
    };
    for (extra, calls) in [(None, 7), (Some("max_retries=3"), 28)] {
        let api = mock_api(Script::Fail(fault(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            Some("insufficient_quota"),
            Some(10),
        )))
        .await;
        let sb = Sandbox::new(&qwen);
        write_settings_with(&sb, json!({}));
        let mut args = vec!["--runner", "qwen", "--timeout", "5m"];
        if let Some(var) = extra {
            args.extend(["--var", var]);
        }
        let r = sb
            .run(&args, &qwen_env(&api.server.uri(), Some("sk-test")))
            .await;
        let row = sb.row();
        assert_eq!(
            (row["status"].as_str(), row["failure_kind"].as_str()),
            ("failed", "quota"),
            "{row:?}\n{}",
            sb.context(&r, &api.log)
        );
        assert!(
            row["error"].contains("You exceeded your current quota"),
            "{row:?}"
        );
        assert_eq!(
            api.turns(),
            calls,
            "{extra:?}: {}",
            sb.context(&r, &api.log)
        );
        if extra.is_some() {
            assert!(
                row["error"].contains("stopped at once") && row["error"].contains("Retrying in"),
                "{row:?}"
            );
            assert!(r.took < Duration::from_secs(30), "{:.1?}", r.took);
        }
        sb.assert_no_survivors();
    }
}
