//! End to end: the built-in `codex` runner definition against the REAL OpenAI Codex CLI,
//! offline. A `wiremock` server plays the OpenAI Responses API (`POST /v1/responses`,
//! streamed as server-sent events) behind a custom model provider in a private
//! `CODEX_HOME/config.toml`, with a scripted model: the first request answers with an
//! `apply_patch` tool call that adds the report file at the path the prompt names, the second
//! (after the tool output) with a short final text. No real model is ever called.
//!
//! Codex is installed by `.ci/run` into `target/e2e-codex/` (a pinned version, from the npm
//! registry: a node wrapper that starts the native binary of `@openai/codex-linux-x64`);
//! `RUNNER_E2E_CODEX` may point at another `codex` binary. Without one the tests skip
//! (`crate::skip`). The cases it shares with every CLI are its row in `table.rs`; here are
//! its wiring ([`Codex`]) and the tests only codex has.
//!
//! What codex-cli 0.169.0 does with the configuration below (seen with this stand-in):
//! - only `POST /v1/responses` (`stream: true`, `Authorization: Bearer $MOCK_API_KEY`, a
//!   `session-id` header equal to the `thread_id` it prints), one per model turn; no
//!   `/v1/models` and no WebSocket for a custom provider. Anything else is answered and
//!   logged (run with `--nocapture` to see the log).
//! - for a known model slug (`gpt-5.5`) it offers `apply_patch` as a *custom* (freeform)
//!   tool: the model sends a `custom_tool_call` item whose `input` is the patch text, and
//!   codex answers with a `custom_tool_call_output` (`"Exit code: 0 ... Success. Updated the
//!   following files:\nA <path>"`). For an unknown slug it prints a "Model metadata ... not
//!   found" warning item and offers no `apply_patch` at all. The newer slugs (`gpt-5.6-*`,
//!   `gpt-6-*`) get no `tools` array but an `additional_tools` input item (a JavaScript
//!   `exec` "code mode" tool); the failure tests use one of them (they never reach a tool),
//!   the success test passes `--model gpt-5.5`.
//! - its Linux sandbox works in this container: `--sandbox workspace-write` lets
//!   `apply_patch` add the report under the `--add-dir` folder, a shell write outside the
//!   writable roots fails with "Read-only file system", and an `apply_patch` outside them is
//!   refused ("patch rejected: writing outside of the project; rejected by user approval
//!   settings").
//! - on an API error it prints `{"type":"error","message":M}` and
//!   `{"type":"turn.failed","error":{"message":M}}` on stdout and exits 1; stderr holds only
//!   start-up warnings. The texts M are asserted below.
//! - `turn.completed.usage` sums the turn's requests (input and output tokens).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::cases::{self, Agent, Key, Setup, StandIn};
use crate::support::{self, Cli, Log, Run, Sandbox, Shared, find_report_path};

/// The call id of the scripted `apply_patch` call.
const CALL_ID: &str = "call_e2e_apply_patch_0001";

/// The model the test's `config.toml` names, and the one the success test passes with
/// `--model` (slugs codex 0.169.0 knows; for `gpt-5.5` it offers `apply_patch` as a tool).
const CONFIG_MODEL: &str = "gpt-5.6-luna";
pub(crate) const MODEL: &str = "gpt-5.5";

/// OpenAI's message for a tokens-per-minute 429 (codex 0.169.0 does not print it).
pub(crate) const RATE_LIMIT_MESSAGE: &str = "Rate limit reached for gpt-5.5 in organization org-e2e on \
    tokens per min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in 2.4s. \
    Visit https://platform.openai.com/account/rate-limits to learn more.";

/// Token usage the scripted model reports per request (input, output).
const TURN1_USAGE: (u64, u64) = (11_234, 96);
const TURN2_USAGE: (u64, u64) = (11_402, 14);

/// An OpenAI API error: the HTTP status and the error body's `type`, `code` and `message`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fault {
    /// HTTP status.
    pub status: u16,
    /// `error.type`.
    pub error_type: &'static str,
    /// `error.code`, e.g. `rate_limit_exceeded`.
    pub code: &'static str,
    /// `error.message`.
    pub message: &'static str,
}

/// What the scripted model does on `POST /v1/responses`: `WriteReport` is request 1 an
/// `apply_patch` call adding the report, request 2 a short final text; `RateLimitOnce` is a
/// 429 `rate_limit_exceeded`, then as `ReportInText`.
type Script = cases::Script<Fault>;

/// What the Responses responder learned, for the assertions.
type Seen = Shared<SeenInner>;

#[derive(Default, Debug)]
struct SeenInner {
    calls: usize,
    models: Vec<String>,
    report_path: Option<String>,
    tool_output: Option<Value>,
    session_header: Option<String>,
    authorization: Option<String>,
}

/// `POST /v1/responses`.
struct Responses {
    script: Script,
    log: Log,
    seen: Seen,
}

impl Respond for Responses {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Some(body) = support::json_body(req, &self.log) else {
            return api_error(400, "invalid_request_error", "invalid_json", "not JSON");
        };
        let model = body["model"].as_str().unwrap_or("?").to_string();
        let streaming = body["stream"] == json!(true);
        let tools: Vec<String> = body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| {
                        format!(
                            "{}:{}",
                            t["type"].as_str().unwrap_or("?"),
                            t["name"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let user_text = user_text(&body);
        let tool_output = tool_output(&body, CALL_ID);
        let turn = self.seen.with(|s| {
            s.calls += 1;
            s.models.push(model.clone());
            s.session_header = support::header(req, "session-id").or(s.session_header.take());
            s.authorization = support::header(req, "authorization");
            s.calls
        });
        let what = format!(
            "POST {} #{turn}: model {model}, stream {streaming}, {} input item(s), {} tool(s)",
            req.url.path(),
            body["input"].as_array().map_or(0, Vec::len),
            tools.len()
        );

        if let Script::Fail(Fault {
            status,
            error_type,
            code,
            message,
        }) = self.script
        {
            self.log.push(format!("{what} -> {status} {code}"));
            return api_error(status, error_type, code, message);
        }
        if let (Script::RateLimitOnce, 1) = (self.script, turn) {
            self.log
                .push(format!("{what} -> 429 rate_limit_exceeded (once)"));
            return api_error(429, "tokens", "rate_limit_exceeded", RATE_LIMIT_MESSAGE);
        }
        if let Script::Stall = self.script {
            self.log.push(format!("{what} -> (stalling)"));
            return ResponseTemplate::new(200).set_delay(Duration::from_secs(600));
        }
        if !streaming {
            self.log
                .push(format!("{what} -> (unexpected) a non-streaming request"));
            return api_error(400, "invalid_request_error", "e2e", "stream: true expected");
        }

        if let Some(output) = tool_output {
            self.seen.with(|s| s.tool_output = Some(output.clone()));
            self.log
                .push(format!("{what} -> final text (tool output: {output})"));
            return sse(&text_response(
                turn,
                "Done: the report is written.",
                TURN2_USAGE,
            ));
        }
        if let Script::ReportInText | Script::RateLimitOnce = self.script {
            self.log.push(format!("{what} -> the report as final text"));
            let text = format!("Done.\n```json\n{}\n```\n", support::report_json("1"));
            return sse(&text_response(turn, &text, TURN2_USAGE));
        }
        match find_report_path(&user_text) {
            Some(report) if tools.iter().any(|t| t == "custom:apply_patch") => {
                self.seen.with(|s| s.report_path = Some(report.clone()));
                self.log
                    .push(format!("{what} -> custom_tool_call apply_patch {report}"));
                sse(&apply_patch_response(turn, &report))
            }
            found => {
                self.log.push(format!(
                    "{what} -> (unexpected) no report path or no apply_patch tool \
                     (report path {found:?}, tools {tools:?}); answering with text"
                ));
                sse(&text_response(
                    turn,
                    "I cannot find the report path.",
                    (400, 9),
                ))
            }
        }
    }
}

/// An OpenAI API error response (`{"error": {message, type, param, code}}`).
pub(crate) fn api_error(
    status: u16,
    error_type: &str,
    code: &str,
    message: &str,
) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("x-request-id", "req_e2e_mock")
        .set_body_json(json!({
            "error": {"message": message, "type": error_type, "param": null, "code": code}
        }))
}

/// A server-sent-events body, as the Responses API streams it (`event:` = the `type`).
pub(crate) fn sse(events: &[Value]) -> ResponseTemplate {
    support::event_stream(support::named_events(events))
        .insert_header("x-request-id", "req_e2e_mock")
}

pub(crate) fn response_created(id: &str) -> Value {
    json!({"type": "response.created", "sequence_number": 0,
           "response": {"id": id, "object": "response", "status": "in_progress", "output": []}})
}

pub(crate) fn response_completed(id: &str, (input, output): (u64, u64)) -> Value {
    json!({
        "type": "response.completed",
        "response": {
            "id": id,
            "object": "response",
            "status": "completed",
            "usage": {
                "input_tokens": input,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input + output
            }
        }
    })
}

/// Request 1: an `apply_patch` custom tool call adding the report file.
fn apply_patch_response(turn: usize, report: &str) -> Vec<Value> {
    let id = format!("resp_e2e_{turn:02}");
    let mut patch = format!("*** Begin Patch\n*** Add File: {report}\n");
    for line in support::report_json("1").lines() {
        patch.push_str(&format!("+{line}\n"));
    }
    patch.push_str("*** End Patch\n");
    let item = |status: &str, input: &str| {
        json!({"type": "custom_tool_call", "id": "ctc_e2e_01", "status": status,
               "call_id": CALL_ID, "name": "apply_patch", "input": input})
    };
    let (a, b) = patch.split_at(patch.len() / 2);
    vec![
        response_created(&id),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": item("in_progress", "")}),
        json!({"type": "response.custom_tool_call_input.delta", "output_index": 0,
               "item_id": "ctc_e2e_01", "delta": a}),
        json!({"type": "response.custom_tool_call_input.delta", "output_index": 0,
               "item_id": "ctc_e2e_01", "delta": b}),
        json!({"type": "response.custom_tool_call_input.done", "output_index": 0,
               "item_id": "ctc_e2e_01", "input": patch}),
        json!({"type": "response.output_item.done", "output_index": 0,
               "item": item("completed", &patch)}),
        response_completed(&id, TURN1_USAGE),
    ]
}

/// An assistant message with `text`, streamed in two deltas.
pub(crate) fn text_response(turn: usize, text: &str, usage: (u64, u64)) -> Vec<Value> {
    let id = format!("resp_e2e_{turn:02}");
    let msg = format!("msg_e2e_{turn:02}");
    let cut = (text.len() / 2..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    let (a, b) = text.split_at(cut);
    vec![
        response_created(&id),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "message", "id": msg, "status": "in_progress",
                        "role": "assistant", "content": []}}),
        json!({"type": "response.content_part.added", "item_id": msg, "output_index": 0,
               "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        json!({"type": "response.output_text.delta", "item_id": msg, "output_index": 0,
               "content_index": 0, "delta": a}),
        json!({"type": "response.output_text.delta", "item_id": msg, "output_index": 0,
               "content_index": 0, "delta": b}),
        json!({"type": "response.output_text.done", "item_id": msg, "output_index": 0,
               "content_index": 0, "text": text}),
        json!({"type": "response.output_item.done", "output_index": 0,
               "item": {"type": "message", "id": msg, "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
        response_completed(&id, usage),
    ]
}

/// All `input_text` of the user messages in the request's `input` (content parts only).
fn user_text(body: &Value) -> String {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["type"] == "message" && m["role"] == "user" && m["content"].is_array())
        .map(|m| support::text_of(&m["content"]))
        .collect()
}

/// The `custom_tool_call_output` (or `function_call_output`) answering `call_id`.
fn tool_output(body: &Value, call_id: &str) -> Option<Value> {
    body["input"]
        .as_array()?
        .iter()
        .find(|i| {
            (i["type"] == "custom_tool_call_output" || i["type"] == "function_call_output")
                && i["call_id"] == call_id
        })
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
        self.seen.with(|s| s.calls)
    }
}

/// A mock API with `script`.
async fn mock_api(script: Script) -> Api {
    let server = MockServer::start().await;
    let log = Log::default();
    let seen = Seen::default();
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(Responses {
            script,
            log: log.clone(),
            seen: seen.clone(),
        })
        .with_priority(1)
        .mount(&server)
        .await;
    support::Other {
        log: log.clone(),
        not_found: api_error(
            404,
            "invalid_request_error",
            "unknown_url",
            "Unknown URL (e2e mock)",
        ),
    }
    .mount(&server)
    .await;
    Api { server, log, seen }
}

// ---------------------------------------------------------------------------------------
// Running `runner` with codex

/// The environment variable the test's model provider reads its key from.
pub(crate) const KEY_VAR: &str = "MOCK_API_KEY";

/// codex's wiring for the shared cases (`table.rs`).
pub(crate) struct Codex;

impl Agent for Codex {
    const NAME: &'static str = "codex";
    const BIN: &'static str = "node_modules/.bin/codex";
    const VERSION_HAS: &'static str = "codex-cli";
    /// A slug codex offers `apply_patch` for (the config's model is one it offers none).
    const WRITE_ARGS: &'static [&'static str] = &["--model", MODEL];
    type Fault = Fault;
    type Api = Api;

    async fn start(script: Script) -> Api {
        mock_api(script).await
    }

    fn setup(_cli: &Cli, sb: &Sandbox, api: &Api, key: Key) -> Setup {
        let codex_home = write_codex_config(sb, &api.server.uri());
        Setup {
            args: vec![],
            env: codex_env(&codex_home, key.value()),
        }
    }

    /// The report really came from codex's `apply_patch` (inside its own `workspace-write`
    /// sandbox), at the path the prompt named; `--model` reached the API; the session and
    /// token columns are as codex printed them (`turn.completed` sums the requests); the
    /// SQLite state went to the teammate's CODEX_SQLITE_HOME, not CODEX_HOME.
    fn check_completed(sb: &Sandbox, r: &Run, api: &Api, row: &BTreeMap<String, String>) {
        let context = || sb.context(r, &api.log);
        let s = api.seen.with(std::mem::take);
        assert_eq!(s.calls, 2, "one request per model turn: {}", context());
        assert_eq!(s.models, [MODEL, MODEL], "--model reaches the API as `-m`");
        assert_eq!(
            s.authorization.as_deref(),
            Some("Bearer sk-test"),
            "the provider's env_key is used"
        );
        let report = sb.assert_report_written(s.report_path.clone());
        let output = s
            .tool_output
            .clone()
            .expect("codex sent the tool output back");
        assert_eq!(output["type"], "custom_tool_call_output", "{output}");
        let text = output["output"].as_str().unwrap_or_default();
        assert!(
            text.contains("Success") && text.contains(&report),
            "apply_patch succeeded: {output}"
        );

        assert!(!row["session_id"].is_empty(), "{row:?}");
        assert_eq!(
            Some(&row["session_id"]),
            s.session_header.as_ref(),
            "the thread id is the session id the API saw"
        );
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
        assert_eq!(row["cost_usd"], "", "codex reports no cost: {row:?}");

        let state = sb.teammate().join("work/state/codex_sqlite_home");
        assert!(
            state.join("state_5.sqlite").is_file(),
            "codex's state database in {}: {:?}",
            state.display(),
            std::fs::read_dir(&state)
                .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
        );
        assert!(!sb.home().join(".codex/state_5.sqlite").exists());
    }

    /// No `--model`: the config's model; the usage of the one turn.
    fn check_text(sb: &Sandbox, api: &Api) {
        assert_eq!(
            api.seen.with(|s| s.models.clone()),
            [CONFIG_MODEL],
            "no --model: the config's model"
        );
        let row = sb.row();
        assert_eq!(row["input_tokens"], TURN2_USAGE.0.to_string(), "{row:?}");
    }

    /// Under Landlock codex's own sandbox does NOT nest: 0.169.0 runs commands and
    /// apply_patch through bubblewrap, which prints `bwrap: setting up uid map: Permission
    /// denied` (writing /proc/self/uid_map is a write Landlock denies, and a
    /// Landlock-restricted process may not change its mounts at all), so apply_patch would
    /// answer "Failed to write file …/report.json"; its `features.use_legacy_landlock =
    /// true` still goes through bubblewrap. So the definition hands over (`[sandbox] vars`:
    /// `sandbox = "danger-full-access"` under ours), and the case passes no `--var`: the
    /// report is written in the teammate folder, the state in CODEX_SQLITE_HOME.
    fn check_sandboxed(sb: &Sandbox, r: &Run, api: &Api) {
        cases::assert_report_file(sb);
        assert!(
            sb.teammate()
                .join("work/state/codex_sqlite_home/state_5.sqlite")
                .is_file(),
            "{}",
            sb.context(r, &api.log)
        );
    }

    /// The reason quotes codex's own message (from its `turn.failed` event; stderr has none).
    fn check_failed(_sb: &Sandbox, _api: &Api, row: &BTreeMap<String, String>) {
        assert!(
            row["error"].to_lowercase().contains("exited with code 1: "),
            "the reason quotes codex: {row:?}"
        );
    }
}

/// `<home>/.codex/config.toml`: the stand-in as a custom Responses-API provider with its
/// retries off, and nothing that would reach the network (no plugin sync, no analytics).
pub(crate) fn write_codex_config(sb: &Sandbox, api: &str) -> std::path::PathBuf {
    let codex_home = sb.home().join(".codex");
    std::fs::create_dir_all(&codex_home).expect("mkdir .codex");
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            r#"model_provider = "mock"
model = "{CONFIG_MODEL}"

[model_providers.mock]
name = "e2e stand-in"
base_url = "{api}/v1"
wire_api = "responses"
env_key = "{KEY_VAR}"
# Fail an API error at once: with the defaults 0.169.0 sends a 401 six times (~7 s) and
# a 500 thirty times (~25 s); a 429 is sent once either way.
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

# Otherwise codex starts a `git fetch` of its curated plugins from github.com at start-up.
[features]
plugins = false
remote_plugin = false
"#
        ),
    )
    .expect("config.toml");
    codex_home
}

/// codex's environment: `CODEX_HOME=codex_home`, `key` as the provider key's value (`None`:
/// the variable is not set).
fn codex_env(codex_home: &std::path::Path, key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut env = vec![("CODEX_HOME", codex_home.display().to_string())];
    if let Some(k) = key {
        env.push((KEY_VAR, k.to_string()));
    }
    env
}

/// `runner batch ... --runner codex --timeout <timeout>` in `sb` with `CODEX_HOME=codex_home`
/// as it is.
async fn run_with_codex_home(
    sb: &Sandbox,
    codex_home: &std::path::Path,
    timeout: &str,
    key: Option<&str>,
) -> Run {
    sb.run(
        &["--runner", "codex", "--timeout", timeout],
        &codex_env(codex_home, key),
    )
    .await
}

// ---------------------------------------------------------------------------------------
// Tests only codex has

/// A rejected key with codex at its own default retries (the provider's
/// `request_max_retries`/`stream_max_retries` left out): 0.169.0 sends the 401 several times
/// with a short back-off, then gives up on its own within seconds — `auth`, with its words,
/// long before the time limit (issue 29: codex needs no live line or retry setting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_codex_bad_key_at_its_default_retries_fails_within_seconds_as_auth() {
    let Some(codex) = cases::find::<Codex>(
        "real_codex_bad_key_at_its_default_retries_fails_within_seconds_as_auth",
    ) else {
        return;
    };
    let api = mock_api(Script::Fail(Fault {
        status: 401,
        error_type: "invalid_request_error",
        code: "invalid_api_key",
        message: "Incorrect API key provided: sk-test.",
    }))
    .await;
    let sb = Sandbox::new(&codex);
    let codex_home = write_codex_config(&sb, &api.server.uri());
    let config = codex_home.join("config.toml");
    let own_retries: String = std::fs::read_to_string(&config)
        .expect("config.toml")
        .lines()
        .filter(|l| !l.contains("_max_retries"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, own_retries).expect("config.toml");
    let r = run_with_codex_home(&sb, &codex_home, "2m", Some("sk-test")).await;
    let row = sb.assert_outcome(&r, &api.log, 1, "failed", "auth");
    assert!(
        row["error"]
            .to_lowercase()
            .contains("incorrect api key provided"),
        "{row:?}"
    );
    let calls = api.turns();
    assert!(calls > 1, "its own retries ran: {calls} call(s)");
    assert!(r.took < Duration::from_secs(30), "{:.1?}", r.took);
    eprintln!("{calls} call(s) in {:.1?}: {}", r.took, row["error"]);
    sb.assert_no_survivors();
}

/// A start-up failure (a broken `config.toml`): codex prints no JSON, only a TOML diagnostic
/// on stderr, and exits 1. The reason is the line that says what is wrong, not the source
/// excerpt under it (the definition's `[failure] ignore`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_codex_broken_config_fails_with_its_stderr_message() {
    let Some(codex) =
        cases::find::<Codex>("real_codex_broken_config_fails_with_its_stderr_message")
    else {
        return;
    };
    let api = mock_api(Script::WriteReport).await;
    let sb = Sandbox::new(&codex);
    let codex_home = write_codex_config(&sb, &api.server.uri());
    std::fs::write(codex_home.join("config.toml"), "model = [\n").expect("config.toml");
    let r = run_with_codex_home(&sb, &codex_home, "90s", Some("sk-test")).await;
    let row = sb.row();
    let context = || format!("{r:?}\n{row:?}\n{}\n{}", sb.agent_log(), api.log.dump());
    assert_eq!(
        (r.code, row["status"].as_str(), row["failure_kind"].as_str()),
        (1, "failed", "agent_error"),
        "{}",
        context()
    );
    assert!(
        row["error"].starts_with("exited with code 1: ")
            && row["error"].contains("config.toml:1:10: unclosed array, expected `]`"),
        "the reason is codex's diagnostic line: {}",
        context()
    );
    assert_eq!(api.turns(), 0, "{}", context());
    sb.assert_no_survivors();
}

/// A custom provider without its own retry keys: codex would send a 500 thirty times
/// (`request_max_retries` 4 + 1 times `stream_max_retries` 5 + 1); the two `-c` settings
/// docs/runners.md gives, passed with `--agent-arg`, make it one request (issue 56: the
/// definition cannot set them, since the built-in `openai` provider takes none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_codex_5xx_is_sent_once_with_the_documented_agent_args() {
    let Some(codex) =
        cases::find::<Codex>("real_codex_5xx_is_sent_once_with_the_documented_agent_args")
    else {
        return;
    };
    let api = mock_api(Script::Fail(Fault {
        status: 500,
        error_type: "server_error",
        code: "server_error",
        message: "The server had an error while processing your request.",
    }))
    .await;
    let sb = Sandbox::new(&codex);
    let codex_home = write_codex_config(&sb, &api.server.uri());
    let config = codex_home.join("config.toml");
    let own_retries: String = std::fs::read_to_string(&config)
        .expect("config.toml")
        .lines()
        .filter(|l| !l.contains("_max_retries"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, own_retries).expect("config.toml");
    let r = sb
        .run(
            &[
                "--runner",
                "codex",
                "--timeout",
                "2m",
                "--agent-arg=-c",
                "--agent-arg=model_providers.mock.request_max_retries=0",
                "--agent-arg=-c",
                "--agent-arg=model_providers.mock.stream_max_retries=0",
            ],
            &codex_env(&codex_home, Some("sk-test")),
        )
        .await;
    sb.assert_outcome(&r, &api.log, 1, "failed", "api_error");
    assert_eq!(api.turns(), 1, "{}", sb.context(&r, &api.log));
    sb.assert_no_survivors();
}
