//! End to end: the built-in `gemini` runner definition against the REAL Gemini CLI, offline.
//! A `wiremock` server plays the Gemini API (`GOOGLE_GEMINI_BASE_URL`), with a scripted model:
//! the first turn answers with a `write_file` function call that writes the report to the
//! path the prompt names, the second (after the function response) with a short final text.
//! No real model is ever called.
//!
//! Gemini CLI is installed by `.ci/run` into `target/e2e-gemini/` (a pinned version, from the
//! npm registry); `RUNNER_E2E_GEMINI` may point at another `gemini` binary. Without one the
//! tests skip (`crate::skip`). The cases it shares with every CLI are its row in `table.rs`;
//! here are its wiring ([`Gemini`]), its API errors, and the tests only Gemini CLI has.
//!
//! What Gemini CLI 0.61.0 sends with the settings below (the default model `auto`): first
//! `POST /v1beta/models/gemini-3.5-flash-lite:generateContent`, its model router asking for
//! `{complexity_reasoning, complexity_score}`, then one `POST
//! /v1beta/models/<model>:streamGenerateContent?alt=sse` per turn (server-sent events, one
//! `GenerateContentResponse` per `data:` line), the key in `x-goog-api-key`. Anything else
//! is answered sensibly and logged (run with `--nocapture` to see the log).
//!
//! What 0.61.0 does on an API error, with `general.maxAttempts = 1` (bundle
//! `packages/core/src/utils/retry.ts`, `googleQuotaErrors.ts`, `packages/cli/src/utils/errors.ts`):
//! the main turn is not retried; it prints its error object
//! `{"session_id", "error": {"type", "message", "code"}}` pretty-printed to STDERR (stdout
//! stays empty) and exits with the HTTP status as its exit code, so 256 less: 429 → 173,
//! 400 → 144, 401 → 145, 500 → 244. A 429 whose QuotaFailure names a `PerDay` quota is a
//! `TerminalQuotaError` "You have exhausted your daily quota on this model." (never retried);
//! a per-minute one is a `RetryableQuotaError` ("… Suggested retry after 45s."). No key at
//! all exits 41 before any request. Its model router's own call (`generateJson`) keeps its
//! own retries (5 attempts with backoff, about a minute) for retryable errors, so the
//! per-minute test rate-limits the main model only. Each API error also leaves
//! `$TMPDIR/gemini-client-error-*.json` holding the conversation.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::cases::{self, Agent, Key, Setup, StandIn};
use crate::support::{self, Cli, Log, Run, Sandbox, Shared, find_report_path};

/// A Google API error: every main-model turn fails with this HTTP status and Google error
/// body; the model router's call too when `router_too`.
#[derive(Clone, Debug)]
pub(crate) struct Fault {
    /// HTTP status.
    pub status: u16,
    /// The `google.rpc.Status` body ([`google_error_body`]), or a string: an HTML page.
    pub body: Value,
    /// Whether the router's `generateContent` call fails too.
    pub router_too: bool,
}

/// What the scripted model does: `WriteReport` is turn 1 a `write_file` call, turn 2 a short
/// final text. `RateLimitOnce` is not scripted (no row of the table asks Gemini CLI for it).
type Script = cases::Script<Fault>;

/// Token usage the scripted model reports per turn (prompt, candidates).
const TURN1_USAGE: (u64, u64) = (8_123, 57);
const TURN2_USAGE: (u64, u64) = (8_301, 12);
/// The model version the scripted responses name (Gemini CLI keys its stats by it).
const MODEL_VERSION: &str = "gemini-e2e-mock-001";

/// What the responders learned, for the assertions.
type Seen = Shared<SeenInner>;

#[derive(Default, Debug)]
struct SeenInner {
    stream_calls: usize,
    router_calls: usize,
    report_path: Option<String>,
    function_response: Option<Value>,
    api_key_header: Option<String>,
    tools: Vec<String>,
}

/// The model named in `/v1beta/models/<model>:<method>`.
fn model_of(req: &Request) -> String {
    let p = req.url.path();
    p.rsplit('/')
        .next()
        .and_then(|s| s.split(':').next())
        .unwrap_or("?")
        .to_string()
}

/// `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` (the main turns).
struct Stream {
    script: Script,
    log: Log,
    seen: Seen,
}

impl Respond for Stream {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Some(body) = support::json_body(req, &self.log) else {
            return google_error(400, "INVALID_ARGUMENT", "body is not JSON", json!([]));
        };
        let tools: Vec<String> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["functionDeclarations"].as_array())
            .flatten()
            .filter_map(|f| f["name"].as_str().map(str::to_string))
            .collect();
        let turn = self.seen.with(|s| {
            s.stream_calls += 1;
            s.api_key_header = req
                .headers
                .get("x-goog-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            s.tools = tools.clone();
            s.stream_calls
        });
        let contents = body["contents"].as_array().cloned().unwrap_or_default();
        let what = format!(
            "POST {}?{} #{turn}: model {}, {} content(s), {} tool(s)",
            req.url.path(),
            req.url.query().unwrap_or(""),
            model_of(req),
            contents.len(),
            tools.len()
        );
        match &self.script {
            Script::Fail(Fault { status, body, .. }) => {
                self.log.push(format!("{what} -> {status}"));
                return fault_response(*status, body);
            }
            Script::Stall => {
                self.log.push(format!("{what} -> (stalling)"));
                return ResponseTemplate::new(200).set_delay(Duration::from_secs(600));
            }
            _ => {}
        }
        if req.url.query() != Some("alt=sse") {
            self.log.push(format!(
                "{what} -> (unexpected) not alt=sse; answering anyway"
            ));
        }
        if let Some(fr) = function_response(&contents, "write_file") {
            self.seen.with(|s| s.function_response = Some(fr.clone()));
            self.log
                .push(format!("{what} -> final text (function response: {fr})"));
            return sse(&[text_chunk(
                "Done: the report is written.",
                TURN2_USAGE,
                true,
            )]);
        }
        let text = user_text(&contents);
        let report = find_report_path(&text);
        match (&self.script, report) {
            (Script::WriteReport, Some(report)) if tools.iter().any(|t| t == "write_file") => {
                self.seen.with(|s| s.report_path = Some(report.clone()));
                self.log
                    .push(format!("{what} -> functionCall write_file {report}"));
                sse(&[
                    text_chunk("I'll write the report now.", (TURN1_USAGE.0, 7), false),
                    json!({
                        "candidates": [{
                            "content": {"role": "model", "parts": [{"functionCall": {
                                "name": "write_file",
                                "args": {"file_path": report, "content": support::report_json("1")}
                            }}]},
                            "finishReason": "STOP",
                            "index": 0
                        }],
                        "usageMetadata": usage(TURN1_USAGE),
                        "modelVersion": MODEL_VERSION,
                        "responseId": "e2e-resp-1"
                    }),
                ])
            }
            (Script::ReportInText, Some(report)) => {
                self.seen.with(|s| s.report_path = Some(report.clone()));
                self.log
                    .push(format!("{what} -> the report in the final text"));
                let answer = format!(
                    "Here is my report.\n\n```json\n{}\n```\n",
                    support::report_json("1")
                );
                sse(&[text_chunk(&answer, TURN1_USAGE, true)])
            }
            (_, found) => {
                self.log.push(format!(
                    "{what} -> (unexpected) no report path or no write_file tool \
                     (report path {found:?}, tools {tools:?}); answering with text"
                ));
                sse(&[text_chunk("I cannot find the report path.", (400, 9), true)])
            }
        }
    }
}

/// `POST /v1beta/models/<model>:generateContent`: Gemini CLI's model router (a JSON answer
/// to its classifier prompt), or a failure when the script fails everything.
struct Router {
    script: Script,
    log: Log,
    seen: Seen,
}

impl Respond for Router {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let n = self.seen.with(|s| {
            s.router_calls += 1;
            s.router_calls
        });
        let what = format!("POST {} #{n}: model {}", req.url.path(), model_of(req));
        match &self.script {
            Script::Fail(Fault {
                status,
                body,
                router_too: true,
            }) => {
                self.log.push(format!("{what} -> {status}"));
                fault_response(*status, body)
            }
            Script::Stall => {
                self.log.push(format!("{what} -> (stalling)"));
                ResponseTemplate::new(200).set_delay(Duration::from_secs(600))
            }
            _ => {
                self.log.push(format!("{what} -> router answer"));
                let answer = json!({
                    "complexity_reasoning": "A single short, well-specified task.",
                    "complexity_score": 12
                })
                .to_string();
                ResponseTemplate::new(200).set_body_json(json!({
                    "candidates": [{
                        "content": {"role": "model", "parts": [{"text": answer}]},
                        "finishReason": "STOP",
                        "index": 0
                    }],
                    "usageMetadata": usage((310, 21)),
                    "modelVersion": "gemini-e2e-router-001",
                    "responseId": format!("e2e-router-{n}")
                }))
            }
        }
    }
}

/// `POST /v1beta/models/<model>:countTokens`.
struct CountTokens(Log);

impl Respond for CountTokens {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        self.0
            .push(format!("POST {} -> totalTokens 1000", req.url.path()));
        ResponseTemplate::new(200).set_body_json(json!({"totalTokens": 1000}))
    }
}

/// A Google API error response (`google.rpc.Status` under `error`).
pub(crate) fn google_error(
    code: u16,
    status: &str,
    message: &str,
    details: Value,
) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_json(google_error_body(code, status, message, details))
}

/// A fault's answer: its body as JSON, or a string body as an HTML page (a proxy's).
fn fault_response(status: u16, body: &Value) -> ResponseTemplate {
    match body {
        Value::String(page) => {
            ResponseTemplate::new(status).set_body_raw(page.clone(), "text/html")
        }
        _ => ResponseTemplate::new(status).set_body_json(body.clone()),
    }
}

/// nginx's own 500 page, as a proxy in front of the API answers when the API fails: on the
/// main model only (its model router's call answers, so its own retries do not count).
pub(crate) fn nginx_500_page() -> Fault {
    Fault {
        status: 500,
        body: Value::String(
            "<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n\
             <center><h1>500 Internal Server Error</h1></center>\r\n\
             <hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n"
                .into(),
        ),
        router_too: false,
    }
}

/// The reason of an HTML error page is its title, with no tag of the page in it.
pub(crate) fn no_html_in_the_reason(sb: &Sandbox, _api: &Api) {
    let row = sb.row();
    assert!(!row["error"].contains('<'), "no tag of the page: {row:?}");
}

fn google_error_body(code: u16, status: &str, message: &str, details: Value) -> Value {
    json!({"error": {"code": code, "message": message, "status": status, "details": details}})
}

pub(crate) fn usage((prompt, candidates): (u64, u64)) -> Value {
    json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates
    })
}

/// One streamed `GenerateContentResponse` with a text part; the last one carries
/// `finishReason` and the usage.
pub(crate) fn text_chunk(text: &str, u: (u64, u64), last: bool) -> Value {
    let mut candidate = json!({
        "content": {"role": "model", "parts": [{"text": text}]},
        "index": 0
    });
    if last {
        candidate["finishReason"] = json!("STOP");
    }
    json!({
        "candidates": [candidate],
        "usageMetadata": usage(u),
        "modelVersion": MODEL_VERSION,
        "responseId": "e2e-resp"
    })
}

/// A server-sent-events body as the Gemini API streams it (`alt=sse`).
pub(crate) fn sse(chunks: &[Value]) -> ResponseTemplate {
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\r\n\r\n"));
    }
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// All text parts of the user contents.
fn user_text(contents: &[Value]) -> String {
    contents
        .iter()
        .filter(|c| c["role"] == "user" && c["parts"].is_array())
        .map(|c| support::text_of(&c["parts"]))
        .collect()
}

/// The `functionResponse` part answering a call of `name` in the last user content.
fn function_response(contents: &[Value], name: &str) -> Option<Value> {
    contents
        .last()?
        .get("parts")?
        .as_array()?
        .iter()
        .find(|p| p["functionResponse"]["name"] == name)
        .map(|p| p["functionResponse"].clone())
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
    /// Main-model turns (`streamGenerateContent`), not the router's calls.
    fn turns(&self) -> usize {
        self.seen.with(|s| s.stream_calls)
    }
}

/// A mock Gemini API with `script`.
async fn mock_api(script: Script) -> Api {
    let server = MockServer::start().await;
    let log = Log::default();
    let seen = Seen::default();
    Mock::given(method("POST"))
        .and(path_regex(r"^/v1beta/models/[^/:]+:streamGenerateContent$"))
        .respond_with(Stream {
            script: script.clone(),
            log: log.clone(),
            seen: seen.clone(),
        })
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/v1beta/models/[^/:]+:generateContent$"))
        .respond_with(Router {
            script,
            log: log.clone(),
            seen: seen.clone(),
        })
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/v1beta/models/[^/:]+:countTokens$"))
        .respond_with(CountTokens(log.clone()))
        .with_priority(1)
        .mount(&server)
        .await;
    support::Other {
        log: log.clone(),
        not_found: google_error(404, "NOT_FOUND", "Not found (e2e mock)", json!([])),
    }
    .mount(&server)
    .await;
    Api { server, log, seen }
}

// ---------------------------------------------------------------------------------------
// Running `runner` with Gemini CLI

/// Gemini CLI's wiring for the shared cases (`table.rs`).
pub(crate) struct Gemini;

impl Agent for Gemini {
    const NAME: &'static str = "gemini";
    const BIN: &'static str = "node_modules/.bin/gemini";
    /// `gemini --version` prints the bare version (`0.61.0`).
    const VERSION_HAS: &'static str = ".";
    type Fault = Fault;
    type Api = Api;

    async fn start(script: Script) -> Api {
        mock_api(script).await
    }

    /// Under cargo's `target/tmp`: Gemini CLI skips a settings file below a folder others
    /// may write (`/tmp`), the definition's system defaults among them.
    fn sandbox(cli: &Cli) -> Sandbox {
        Sandbox::new_private(cli)
    }

    fn setup(_cli: &Cli, sb: &Sandbox, api: &Api, key: Key) -> Setup {
        write_settings(sb);
        Setup {
            args: vec![],
            env: gemini_env(&api.server.uri(), key.value()),
        }
    }

    /// The report really came from Gemini CLI's `write_file` tool, at the path the prompt
    /// named, after one model-router call; `--approval-mode auto_edit` offers the file tools,
    /// not the shell; the session id is the one it printed, and its token counts are in its
    /// output, keyed by the model version, where no fixed JSON pointer reaches them (so the
    /// columns stay empty).
    fn check_completed(sb: &Sandbox, r: &Run, api: &Api, row: &BTreeMap<String, String>) {
        let context = || sb.context(r, &api.log);
        let s = api.seen.with(std::mem::take);
        assert_eq!(s.stream_calls, 2, "one call per turn: {}", context());
        assert_eq!(s.router_calls, 1, "one model-router call: {}", context());
        sb.assert_report_written(s.report_path.clone());
        let fr = s
            .function_response
            .clone()
            .expect("Gemini CLI sent the function response back");
        let output = fr["response"]["output"].as_str().unwrap_or_default();
        assert!(
            output.contains("Successfully created and wrote to new file"),
            "the write succeeded: {fr}"
        );
        assert_eq!(
            s.api_key_header.as_deref(),
            Some("sk-test"),
            "GEMINI_API_KEY is used"
        );
        assert!(
            !s.tools.iter().any(|t| t == "run_shell_command"),
            "{:?}",
            s.tools
        );

        let stdout = std::fs::read_to_string(sb.teammate().join("attempt-1.stdout.log"))
            .expect("attempt stdout");
        let out: Value = serde_json::from_str(&stdout).expect("one pretty-printed JSON object");
        assert_eq!(row["session_id"], out["session_id"].as_str().unwrap_or("?"));
        assert_eq!(row["session_id"].len(), 36, "a UUID: {row:?}");
        assert_eq!(
            out["stats"]["models"][MODEL_VERSION]["tokens"]["prompt"],
            json!(TURN1_USAGE.0 + TURN2_USAGE.0),
            "{stdout}"
        );
        assert_eq!(
            out["stats"]["models"][MODEL_VERSION]["tokens"]["candidates"],
            json!(TURN1_USAGE.1 + TURN2_USAGE.1),
            "{stdout}"
        );
        assert_eq!(row["input_tokens"], "", "not mapped: {row:?}");
    }

    /// No function call: the report came from the final text.
    fn check_text(_sb: &Sandbox, api: &Api) {
        assert!(api.seen.with(|s| s.function_response.is_none()));
    }

    /// The reason is the CLI's own message (from the JSON object ending its stderr): not a
    /// stderr warning, a lone brace or a raw JSON body; nothing unexpected was requested.
    fn check_failed(_sb: &Sandbox, api: &Api, row: &BTreeMap<String, String>) {
        let reason = row["error"].to_lowercase();
        assert!(
            !reason.contains("ripgrep") && !reason.ends_with('}') && !reason.contains("{\""),
            "not a stderr warning, a lone brace or a raw JSON body: {row:?}"
        );
        api.log.assert_nothing_unexpected();
    }
}

/// The user settings a headless run with a Gemini API key needs
/// (`<home>/.gemini/settings.json`):
/// - `security.auth.selectedType = "gemini-api-key"`: without it, `GOOGLE_GEMINI_BASE_URL`
///   makes 0.61.0 pick the `gateway` auth type, which its non-interactive check rejects
///   (exit 41, "Invalid auth method selected.");
/// - no `general.maxAttempts`: the definition's system defaults set it (1: no retry of the
///   main model's requests; the CLI's default is 10);
/// - `privacy.usageStatisticsEnabled = false`: no telemetry posts to play.googleapis.com.
pub(crate) fn write_settings(sb: &Sandbox) {
    let dir = sb.home().join(".gemini");
    std::fs::create_dir_all(&dir).expect("mkdir .gemini");
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false}
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("settings.json");
}

/// Gemini CLI's environment: the stand-in at `api`, `key` as `GEMINI_API_KEY`.
pub(crate) fn gemini_env(api: &str, key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut env = vec![("GOOGLE_GEMINI_BASE_URL", api.to_string())];
    if let Some(k) = key {
        env.push(("GEMINI_API_KEY", k.to_string()));
    }
    env
}

/// The `gemini-client-error-*.json` files in `dir`.
fn error_dumps(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("gemini-client-error-") && n.ends_with(".json"))
        .collect()
}

// ---------------------------------------------------------------------------------------
// The API errors of the table's rows, and their last checks

/// The Gemini API's daily free-tier quota: 429 RESOURCE_EXHAUSTED, a QuotaFailure with a
/// `PerDay` quota id (a `TerminalQuotaError` in Gemini CLI, never retried); the router's call
/// fails too.
pub(crate) fn daily_quota_429() -> Fault {
    let body = google_error_body(
        429,
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details. For more \
         information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n\
         * Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, \
         limit: 250, model: gemini-3.1-pro\nPlease retry in 7h12m3.5s.",
        json!([
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                "quotaDimensions": {"location": "global", "model": "gemini-3.1-pro"},
                "quotaValue": "250"
            }]},
            {"@type": "type.googleapis.com/google.rpc.Help", "links": [{
                "description": "Learn more about Gemini API quotas",
                "url": "https://ai.google.dev/gemini-api/docs/rate-limits"
            }]}
        ]),
    );
    Fault {
        status: 429,
        body,
        router_too: true,
    }
}

/// Gemini CLI wrote the conversation to `$TMPDIR/gemini-client-error-*.json`: the runner's
/// per-teammate TMPDIR, never the TMPDIR `runner` itself was given.
pub(crate) fn error_dumps_in_the_teammates_tmp(sb: &Sandbox, _api: &Api) {
    let private = error_dumps(&sb.teammate().join("work"));
    assert!(!private.is_empty(), "error dumps in the teammate's tmp");
    assert_eq!(error_dumps(&sb.path().join("tmp")), Vec::<String>::new());
}

/// A per-minute quota's 429 (a `PerMinute` QuotaFailure and a 45 s RetryInfo) on the main
/// model only: its model router's own call keeps its own retries (5 attempts with backoff,
/// about a minute) for retryable errors.
pub(crate) fn per_minute_429() -> Fault {
    let body = google_error_body(
        429,
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details. For more \
     information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n\
     * Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, \
     limit: 5, model: gemini-3.1-pro\nPlease retry in 45.69s.",
        json!([
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                "quotaDimensions": {"location": "global", "model": "gemini-3.1-pro"},
                "quotaValue": "5"
            }]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "45s"}
        ]),
    );
    Fault {
        status: 429,
        body,
        router_too: false,
    }
}

/// A key the Gemini API rejects: 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
pub(crate) fn bad_key_400() -> Fault {
    let body = google_error_body(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"}
        }]),
    );
    Fault {
        status: 400,
        body,
        router_too: true,
    }
}

/// Not even the model router was asked (no request without a key).
pub(crate) fn no_router_call(_sb: &Sandbox, api: &Api) {
    assert_eq!(
        api.seen.with(|s| s.router_calls),
        0,
        "no request without a key"
    );
}

// ---------------------------------------------------------------------------------------
// Tests only Gemini CLI has

/// The same per-minute limit with Gemini CLI at its own default attempts (10, each after the
/// 45 s the API names) and 40 s to go: its first "Suggested retry after 45s.. Retrying after
/// …ms" line ends the attempt at once as `rate_limited`, not at the time limit (issue 29).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_rate_limit_longer_than_the_time_left_is_ended_at_once() {
    const TEST: &str = "real_gemini_rate_limit_longer_than_the_time_left_is_ended_at_once";
    let Some(gemini) = cases::find::<Gemini>(TEST) else {
        return;
    };
    let api = mock_api(Script::Fail(per_minute_429())).await;
    let sb = Sandbox::new_private(&gemini);
    write_settings(&sb);
    let r = sb
        .run(
            &[
                "--runner",
                "gemini",
                "--timeout",
                "40s",
                "--var",
                "max_attempts=10",
            ],
            &gemini_env(&api.server.uri(), Some("sk-test")),
        )
        .await;
    let row = sb.row();
    assert_eq!(
        (row["status"].as_str(), row["failure_kind"].as_str()),
        ("failed", "rate_limited"),
        "{row:?}\n{}",
        sb.context(&r, &api.log)
    );
    assert!(
        row["error"].contains("stopped at once")
            && row["error"].contains("Suggested retry after 45s"),
        "{row:?}"
    );
    assert!(r.took < Duration::from_secs(20), "{:.1?}", r.took);
    assert_eq!(api.turns(), 1, "{}", sb.context(&r, &api.log));
    sb.assert_no_survivors();
}

/// A fresh `~/.gemini` without `security.auth.selectedType`: every row would fail with
/// "Invalid auth method selected."; the reason names the setting and its value (issue 29).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_without_an_auth_type_names_the_setting_to_add() {
    let Some(gemini) =
        cases::find::<Gemini>("real_gemini_without_an_auth_type_names_the_setting_to_add")
    else {
        return;
    };
    let api = mock_api(Script::WriteReport).await;
    let sb = Sandbox::new_private(&gemini);
    let env = gemini_env(&api.server.uri(), Some("sk-test"));
    let r = sb
        .run(&["--runner", "gemini", "--timeout", "60s"], &env)
        .await;
    assert_eq!(r.code, 1, "{}", sb.context(&r, &api.log));
    let row = sb.row();
    assert_eq!(row["failure_kind"], "auth", "{row:?}");
    assert!(
        row["error"].contains("Invalid auth method selected")
            && row["error"]
                .contains(r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}}"#)
            && row["error"].contains("~/.gemini/settings.json"),
        "{row:?}"
    );
    sb.assert_no_survivors();
}

/// The Gemini API overloaded: 503 UNAVAILABLE on the main model (its model router answers).
fn unavailable_503() -> Fault {
    Fault {
        status: 503,
        body: google_error_body(
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
            json!([]),
        ),
        router_too: false,
    }
}

/// Where Gemini CLI skips a system defaults file — for a normal user always (it must be
/// root's, and every folder above it), here because the sandbox lies under `/tmp`, which
/// others may write — the definition's `maxAttempts 1` still holds: it comes through the
/// attempt's own GEMINI_CLI_HOME, so a 503 costs one request, not ten (about five minutes of
/// back-off). A system defaults file of the user's that Gemini CLI skips is named once as a
/// set-up warning (issue 56).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_keeps_max_attempts_where_a_system_defaults_file_is_skipped() {
    const TEST: &str = "real_gemini_keeps_max_attempts_where_a_system_defaults_file_is_skipped";
    let Some(gemini) = cases::find::<Gemini>(TEST) else {
        return;
    };
    let api = mock_api(Script::Fail(unavailable_503())).await;
    let sb = Sandbox::new(&gemini);
    assert!(
        sb.path().starts_with(std::env::temp_dir()),
        "{:?}",
        sb.path()
    );
    write_settings(&sb);
    let defaults = sb.path().join("system-defaults.json");
    std::fs::write(&defaults, r#"{"ui": {"hideBanner": true}}"#).expect("defaults");
    let mut env = gemini_env(&api.server.uri(), Some("sk-test"));
    env.push((
        "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
        defaults.display().to_string(),
    ));
    let r = sb
        .run(&["--runner", "gemini", "--timeout", "60s"], &env)
        .await;
    let context = || sb.context(&r, &api.log);
    let row = sb.row();
    assert_eq!(
        (row["status"].as_str(), row["failure_kind"].as_str()),
        ("failed", "api_error"),
        "{row:?}\n{}",
        context()
    );
    assert_eq!(api.turns(), 1, "maxAttempts 1 honoured: {}", context());
    let said = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(
        said.matches("Security Warning: Skipping system defaults file")
            .count(),
        1,
        "named once as a set-up warning: {}",
        context()
    );
    assert!(!row["error"].contains("Skipping"), "{row:?}");
    sb.assert_no_survivors();
}
