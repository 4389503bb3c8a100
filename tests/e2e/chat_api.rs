//! A scripted stand-in for the OpenAI Chat Completions API (`POST /v1/chat/completions`), as
//! OpenCode (`@ai-sdk/openai-compatible`, streaming) and aider (litellm's OpenAI client,
//! `--no-stream`) call it, served by `wiremock` on 127.0.0.1. Each test gives a script: a
//! function from the call (its number, messages, tools, key) to a reply (text, a tool call,
//! an HTTP error with OpenAI's error body, or no answer at all). Streaming replies are the
//! real SSE chunk sequence (`chat.completion.chunk` deltas, `tool_calls` deltas with
//! `index`/`id`/`function.arguments` pieces, a `finish_reason` chunk, a usage chunk with empty
//! `choices`, `data: [DONE]`); non-streaming ones a `chat.completion` object.
//!
//! Also a dead-end HTTP(S) proxy: the tests point `HTTPS_PROXY`/`HTTP_PROXY` at it, so any
//! request a CLI makes to the internet (model catalogues, package installs, version checks)
//! is refused and logged as `(unexpected)` instead of leaving the machine.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::cases::{self, StandIn};
use crate::support::{self, Log};

/// The key the stand-in accepts (`Authorization: Bearer sk-test`); any other gets a 401.
pub(crate) const API_KEY: &str = "sk-test";

/// One chat-completions call, as the script sees it.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// 1 for the first call.
    pub n: usize,
    /// The request body.
    pub body: Value,
    /// `stream: true`.
    pub stream: bool,
    /// The `model` field.
    pub model: String,
    /// All system message text.
    pub system: String,
    /// All user message text.
    pub user: String,
    /// Names of the tools offered.
    pub tools: Vec<String>,
    /// `(tool_call_id, content)` of every `tool` message (results of earlier tool calls).
    pub tool_results: Vec<(String, String)>,
    /// The `Authorization` header.
    pub auth: Option<String>,
}

impl Call {
    /// The bearer token of its `Authorization` header (empty when there is none); the key is
    /// right when it is [`API_KEY`].
    pub(crate) fn key(&self) -> &str {
        self.auth
            .as_deref()
            .and_then(|a| a.strip_prefix("Bearer "))
            .unwrap_or("")
    }
}

/// What the scripted model answers.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// An assistant text; `finish_reason: stop`.
    Text { text: String, usage: (u64, u64) },
    /// A sentence, then one function call; `finish_reason: tool_calls`.
    ToolCall {
        text: String,
        id: String,
        name: String,
        arguments: String,
        usage: (u64, u64),
    },
    /// An HTTP error with OpenAI's error body `{"error": {message, type, param, code}}`.
    Error {
        status: u16,
        message: String,
        error_type: String,
        code: Option<String>,
        /// Extra response headers (e.g. `retry-after-ms`).
        headers: Vec<(String, String)>,
    },
    /// Accept the request and answer nothing for this long (a stalled API).
    Stall(Duration),
    /// An HTTP error whose body is a proxy's HTML page (`text/html`), not the API's JSON.
    Page { status: u16, html: String },
}

impl Reply {
    /// A plain text reply.
    pub(crate) fn text(text: impl Into<String>, usage: (u64, u64)) -> Reply {
        Reply::Text {
            text: text.into(),
            usage,
        }
    }

    /// OpenAI's 429 for a tokens-per-minute limit (`rate_limit_exceeded`), with
    /// `retry-after-ms` (which the OpenAI SDKs and OpenCode honour) so retries are quick.
    pub(crate) fn rate_limited() -> Reply {
        Reply::Error {
            status: 429,
            message: "Rate limit reached for gpt-4o in organization org-e2e on tokens per min \
                      (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in 20ms."
                .into(),
            error_type: "tokens".into(),
            code: Some("rate_limit_exceeded".into()),
            headers: vec![("retry-after-ms".into(), "20".into())],
        }
    }

    /// OpenAI's 401 for a wrong key (`invalid_api_key`).
    /// nginx's own 500 page, as a proxy in front of the API answers when the API is down.
    pub(crate) fn nginx_500_page() -> Reply {
        Reply::Page {
            status: 500,
            html: "<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n\
                   <center><h1>500 Internal Server Error</h1></center>\r\n\
                   <hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n"
                .into(),
        }
    }

    pub(crate) fn bad_key(key: &str) -> Reply {
        Reply::Error {
            status: 401,
            message: format!(
                "Incorrect API key provided: {key}. You can find your API key at \
                 https://platform.openai.com/account/api-keys."
            ),
            error_type: "invalid_request_error".into(),
            code: Some("invalid_api_key".into()),
            headers: vec![],
        }
    }
}

/// The script: call → reply.
pub(crate) type Script = Arc<dyn Fn(&Call) -> Reply + Send + Sync>;

/// A running stand-in.
pub(crate) struct ChatApi {
    /// Keeps the server up.
    pub server: MockServer,
    /// Its request log.
    pub log: Log,
    /// Every chat-completions call, in order.
    pub calls: Arc<Mutex<Vec<Call>>>,
    /// `http://127.0.0.1:<port>` of the dead-end proxy.
    pub proxy: String,
}

impl ChatApi {
    /// The base URL the CLIs take (`http://127.0.0.1:<port>/v1`).
    pub(crate) fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// Every call so far.
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl StandIn for ChatApi {
    fn log(&self) -> &Log {
        &self.log
    }
    fn turns(&self) -> usize {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The model's turns when it writes the report with the CLI's file tool `tool`: the first
/// call (offering `tool`) gets the tool call, its arguments made by `args` from the report's
/// path and JSON, with `usage` (input, output tokens); a call that carries the tool's result
/// gets "Done" with `done_usage`. A call without the report path or the tool is answered
/// with an `(unexpected)` text the test's assertions show.
pub(crate) fn report_by_tool(
    c: &Call,
    tool: &str,
    args: fn(&str, &str) -> Value,
    usage: (u64, u64),
    done_usage: (u64, u64),
) -> Reply {
    if !c.tool_results.is_empty() {
        return Reply::text("Done: the report is written.", done_usage);
    }
    match support::find_report_path(&c.user) {
        Some(report) if c.tools.iter().any(|t| t == tool) => Reply::ToolCall {
            text: "I'll write the report now.".into(),
            id: "call_e2e_write_1".into(),
            name: tool.into(),
            arguments: args(&report, &support::report_json("1")).to_string(),
            usage,
        },
        found => Reply::text(
            format!(
                "(unexpected) no report path or no {tool} tool: {found:?} {:?}",
                c.tools
            ),
            (10, 10),
        ),
    }
}

/// The model's turn when it reports only in its text: a ```json block, no tool call.
pub(crate) fn report_in_text(_: &Call) -> Reply {
    Reply::text(
        format!("Done.\n```json\n{}\n```", support::report_json("1")),
        (100, 20),
    )
}

/// Start the stand-in playing the shared cases' `script` for a CLI whose model does its work
/// as `work` answers and reports in its text as `text` answers: a call with a key other than
/// [`API_KEY`] always gets OpenAI's 401; `Stall` answers nothing for 300 s; `Fail(reply)`
/// is `reply` to every call; `RateLimitOnce` is [`Reply::rate_limited`], then as `work`.
pub(crate) async fn play(
    script: cases::Script<Reply>,
    work: fn(&Call) -> Reply,
    text: fn(&Call) -> Reply,
) -> ChatApi {
    start(move |c: &Call| {
        if c.key() != API_KEY {
            return Reply::bad_key(c.key());
        }
        match &script {
            cases::Script::WriteReport => work(c),
            cases::Script::ReportInText => text(c),
            cases::Script::Stall => Reply::Stall(Duration::from_secs(300)),
            cases::Script::RateLimitOnce if c.n == 1 => Reply::rate_limited(),
            cases::Script::RateLimitOnce => work(c),
            cases::Script::Fail(reply) => reply.clone(),
        }
    })
    .await
}

/// Start the stand-in with `script` (and the dead-end proxy).
pub(crate) async fn start(script: impl Fn(&Call) -> Reply + Send + Sync + 'static) -> ChatApi {
    start_with_log(Log::default(), script).await
}

/// [`start`] with `log` as its request log, so that the script can add its own lines (e.g.
/// mark a call it did not expect as `(unexpected)`).
pub(crate) async fn start_with_log(
    log: Log,
    script: impl Fn(&Call) -> Reply + Send + Sync + 'static,
) -> ChatApi {
    let server = MockServer::start().await;
    let calls = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Completions {
            script: Arc::new(script),
            log: log.clone(),
            calls: calls.clone(),
        })
        .with_priority(1)
        .mount(&server)
        .await;
    support::Other {
        log: log.clone(),
        not_found: error(
            404,
            "Not found (e2e mock)",
            "invalid_request_error",
            None,
            &[],
        ),
    }
    .mount(&server)
    .await;
    let proxy = dead_end_proxy(log.clone()).await;
    ChatApi {
        server,
        log,
        calls,
        proxy,
    }
}

/// A listener that logs the first line of each connection (`CONNECT host:443 ...`) as
/// unexpected and closes it.
async fn dead_end_proxy(log: Log) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind proxy");
    let addr = listener.local_addr().expect("proxy addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 2048];
                let n = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]);
                log.push(format!(
                    "(unexpected) outbound request through the proxy: {}",
                    head.lines().next().unwrap_or("")
                ));
            });
        }
    });
    format!("http://{addr}")
}

struct Completions {
    script: Script,
    log: Log,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Respond for Completions {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Some(body) = support::json_body(req, &self.log) else {
            return error(400, "body is not JSON", "invalid_request_error", None, &[]);
        };
        let text_of = |role: &str| {
            let mut out = String::new();
            for m in body["messages"].as_array().into_iter().flatten() {
                if m["role"] != role {
                    continue;
                }
                match &m["content"] {
                    Value::String(s) => out.push_str(s),
                    Value::Array(parts) => {
                        for p in parts {
                            if let Some(t) = p["text"].as_str() {
                                out.push_str(t);
                            }
                        }
                    }
                    _ => {}
                }
                out.push('\n');
            }
            out
        };
        let tool_results = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap_or("").to_string(),
                    match &m["content"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    },
                )
            })
            .collect();
        let auth = support::header(req, "authorization");
        let call = {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            let call = Call {
                n: calls.len() + 1,
                stream: body["stream"] == json!(true),
                model: body["model"].as_str().unwrap_or("?").to_string(),
                system: text_of("system"),
                user: text_of("user"),
                tools: body["tools"]
                    .as_array()
                    .map(|t| {
                        t.iter()
                            .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
                tool_results,
                auth,
                body: body.clone(),
            };
            calls.push(call.clone());
            call
        };
        let reply = (self.script)(&call);
        self.log.push(format!(
            "POST {} #{}: model {}, stream {}, {} message(s), {} tool(s), {} tool result(s) -> {}",
            req.url.path(),
            call.n,
            call.model,
            call.stream,
            body["messages"].as_array().map_or(0, Vec::len),
            call.tools.len(),
            call.tool_results.len(),
            match &reply {
                Reply::Text { text, .. } => format!("text {:?}", short(text)),
                Reply::ToolCall { name, .. } => format!("tool call {name}"),
                Reply::Error { status, .. } => format!("HTTP {status}"),
                Reply::Stall(d) => format!("(stalling) no answer for {d:?}"),
                Reply::Page { status, .. } => format!("HTTP {status} (an HTML page)"),
            }
        ));
        respond(&call, reply)
    }
}

fn short(s: &str) -> String {
    let one: String = s.chars().take(60).collect::<String>().replace('\n', " ");
    if s.chars().count() > 60 {
        format!("{one}…")
    } else {
        one
    }
}

fn respond(call: &Call, reply: Reply) -> ResponseTemplate {
    let created = 1_796_000_000u64;
    let id = format!("chatcmpl-e2e{:03}", call.n);
    let usage = |(input, output): (u64, u64)| json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output});
    let (message, deltas, finish, used) = match reply {
        Reply::Error {
            status,
            message,
            error_type,
            code,
            headers,
        } => return error(status, &message, &error_type, code.as_deref(), &headers),
        Reply::Page { status, html } => {
            return ResponseTemplate::new(status).set_body_raw(html, "text/html");
        }
        Reply::Stall(d) => {
            return ResponseTemplate::new(200)
                .set_delay(d)
                .set_body_string("stalled");
        }
        Reply::Text { text, usage } => (
            json!({"role": "assistant", "content": text}),
            vec![
                json!({"role": "assistant", "content": ""}),
                json!({"content": text}),
            ],
            "stop",
            usage,
        ),
        Reply::ToolCall {
            text,
            id: call_id,
            name,
            arguments,
            usage,
        } => {
            let cut = arguments
                .char_indices()
                .nth(arguments.chars().count() / 2)
                .map_or(0, |(i, _)| i);
            let (a, b) = arguments.split_at(cut);
            (
                json!({"role": "assistant", "content": text, "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
                ]}),
                vec![
                    json!({"role": "assistant", "content": text}),
                    json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}),
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
                ],
                "tool_calls",
                usage,
            )
        }
    };
    if !call.stream {
        return ResponseTemplate::new(200).set_body_json(json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": call.model,
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": usage(used),
            "system_fingerprint": "fp_e2e"
        }));
    }
    let chunk = |choices: Value, extra: Option<Value>| {
        let mut c = json!({
            "id": id, "object": "chat.completion.chunk", "created": created,
            "model": call.model, "system_fingerprint": "fp_e2e", "choices": choices
        });
        if let Some(u) = extra {
            c["usage"] = u;
        }
        c
    };
    let mut chunks: Vec<Value> = deltas
        .into_iter()
        .map(|d| {
            chunk(
                json!([{"index": 0, "delta": d, "logprobs": null, "finish_reason": null}]),
                None,
            )
        })
        .collect();
    chunks.push(chunk(
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish}]),
        None,
    ));
    if call.body["stream_options"]["include_usage"] == json!(true) {
        chunks.push(chunk(json!([]), Some(usage(used))));
    }
    support::event_stream(support::data_events(&chunks))
}

fn error(
    status: u16,
    message: &str,
    error_type: &str,
    code: Option<&str>,
    headers: &[(String, String)],
) -> ResponseTemplate {
    let mut t = ResponseTemplate::new(status)
        .insert_header("x-request-id", "req_e2e_mock")
        .set_body_json(json!({
            "error": {"message": message, "type": error_type, "param": null, "code": code}
        }));
    for (k, v) in headers {
        t = t.insert_header(k.as_str(), v.as_str());
    }
    t
}
