//! End to end: the built-in `gemini` runner definition against the REAL Gemini CLI, offline.
//! A `wiremock` server plays the Gemini API (`GOOGLE_GEMINI_BASE_URL`), with a scripted model:
//! the first turn answers with a `write_file` function call that writes the report to the
//! path the prompt names, the second (after the function response) with a short final text.
//! No real model is ever called.
//!
//! Gemini CLI is installed by `.ci/run` into `target/e2e-gemini/` (a pinned version, from the
//! npm registry); `RUNNER_E2E_GEMINI` may point at another `gemini` binary. Without one the
//! tests print a `skipped: ...` notice on stderr and pass.
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

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::support::{self, Cli, Log, Sandbox, Shared, find_report_path};

/// What the scripted model does.
#[derive(Clone, Debug)]
enum Script {
    /// Turn 1: write the report with `write_file`; turn 2: a short final text.
    WriteReport,
    /// Turn 1: the report as a ```json block in the final text, no tool call.
    ReportInText,
    /// Every main-model turn fails with this HTTP status and Google error body; the router's
    /// call too when `router_too`.
    Fail {
        status: u16,
        body: Value,
        router_too: bool,
    },
    /// Every request is accepted and never answered.
    Stall,
}

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
            Script::Fail { status, body, .. } => {
                self.log.push(format!("{what} -> {status}"));
                return ResponseTemplate::new(*status).set_body_json(body.clone());
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
            Script::Fail {
                status,
                body,
                router_too: true,
            } => {
                self.log.push(format!("{what} -> {status}"));
                ResponseTemplate::new(*status).set_body_json(body.clone())
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
fn google_error(code: u16, status: &str, message: &str, details: Value) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_json(google_error_body(code, status, message, details))
}

fn google_error_body(code: u16, status: &str, message: &str, details: Value) -> Value {
    json!({"error": {"code": code, "message": message, "status": status, "details": details}})
}

fn usage((prompt, candidates): (u64, u64)) -> Value {
    json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates
    })
}

/// One streamed `GenerateContentResponse` with a text part; the last one carries
/// `finishReason` and the usage.
fn text_chunk(text: &str, u: (u64, u64), last: bool) -> Value {
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
fn sse(chunks: &[Value]) -> ResponseTemplate {
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

/// A mock Gemini API with `script`; returns it with its request log and what it saw.
async fn mock_api(script: Script) -> (MockServer, Log, Seen) {
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
    (server, log, seen)
}

// ---------------------------------------------------------------------------------------
// Running `runner` with Gemini CLI

/// The Gemini CLI binary, or `None` with a skip notice.
fn gemini_or_skip(test: &str) -> Option<Cli> {
    // `gemini --version` prints the bare version (`0.61.0`).
    support::cli_or_skip("gemini", "node_modules/.bin/gemini", ".", test)
}

/// The user settings a headless run with a Gemini API key needs
/// (`<home>/.gemini/settings.json`):
/// - `security.auth.selectedType = "gemini-api-key"`: without it, `GOOGLE_GEMINI_BASE_URL`
///   makes 0.61.0 pick the `gateway` auth type, which its non-interactive check rejects
///   (exit 41, "Invalid auth method selected.");
/// - no `general.maxAttempts`: the definition's system defaults set it (1: no retry of the
///   main model's requests; the CLI's default is 10);
/// - `privacy.usageStatisticsEnabled = false`: no telemetry posts to play.googleapis.com.
fn write_settings(sb: &Sandbox) {
    let dir = sb.home().join(".gemini");
    std::fs::create_dir_all(&dir).expect("mkdir .gemini");
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false}
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("settings.json");
}

/// `runner batch ... --runner gemini --timeout <timeout>` in `sb`, with Gemini CLI pointed at
/// `api`; `key` is `GEMINI_API_KEY` (none when `None`).
async fn run_gemini(sb: &Sandbox, api: &str, timeout: &str, key: Option<&str>) -> support::Run {
    write_settings(sb);
    sb.run(
        &["--runner", "gemini", "--timeout", timeout],
        &gemini_env(api, key),
    )
    .await
}

/// Gemini CLI's environment: the stand-in at `api`, `key` as `GEMINI_API_KEY`.
fn gemini_env(api: &str, key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut env = vec![("GOOGLE_GEMINI_BASE_URL", api.to_string())];
    if let Some(k) = key {
        env.push(("GEMINI_API_KEY", k.to_string()));
    }
    env
}

/// The whole loop under the default `--sandbox auto`, Landlock here (output and workspace
/// outside the working directory): Gemini CLI writes its report in its teammate folder and
/// its state in `~/.gemini` (the definition's `[sandbox] writes`), and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_completes_under_the_default_sandbox() {
    let Some(gemini) = gemini_or_skip("real_gemini_completes_under_the_default_sandbox") else {
        return;
    };
    let (api, log, _seen) = mock_api(Script::WriteReport).await;
    let sb = Sandbox::new_private(&gemini);
    write_settings(&sb);
    let env = gemini_env(&api.uri(), Some("sk-test"));
    let Some(r) = sb
        .run_sandboxed(&["--runner", "gemini", "--timeout", "90s"], &env)
        .await
    else {
        return;
    };
    sb.assert_completed(&r, &log);
    assert!(sb.teammate().join("work/report.json").is_file());
    sb.assert_no_survivors();
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
// Tests

/// The whole loop with the real CLI: prompt on stdin, a real `write_file` call writing
/// `$RUNNER_REPORT`, the pretty-printed JSON result parsed, report judged, session id read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_writes_the_report_and_the_item_completes() {
    let Some(gemini) = gemini_or_skip("real_gemini_writes_the_report_and_the_item_completes")
    else {
        return;
    };
    eprintln!("using {} ({})", gemini.bin.display(), gemini.version);
    let (api, log, seen) = mock_api(Script::WriteReport).await;
    let sb = Sandbox::new_private(&gemini);

    let r = run_gemini(&sb, &api.uri(), "90s", Some("sk-test")).await;
    let context = || sb.context(&r, &log);

    let row = sb.assert_completed(&r, &log);

    // The report really came from Gemini CLI's write_file tool, at the path the prompt named.
    let s = seen.with(std::mem::take);
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
    // --approval-mode auto_edit: the file tools are offered, the shell tool is not.
    assert!(
        !s.tools.iter().any(|t| t == "run_shell_command"),
        "{:?}",
        s.tools
    );

    // The session id Gemini CLI printed; token counts are in its output, keyed by the model
    // version, where no fixed JSON pointer reaches them (so the columns stay empty).
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

    log.assert_nothing_unexpected();
    sb.assert_no_survivors();
    eprintln!("completed in {:.1?}", r.took);
}

/// The report only in Gemini CLI's final text (no tool call): still `completed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_report_in_the_final_text_completes() {
    let Some(gemini) = gemini_or_skip("real_gemini_report_in_the_final_text_completes") else {
        return;
    };
    let (api, log, seen) = mock_api(Script::ReportInText).await;
    let sb = Sandbox::new_private(&gemini);
    let r = run_gemini(&sb, &api.uri(), "90s", Some("sk-test")).await;
    sb.assert_completed(&r, &log);
    // One turn, no function call: the report came from the final text.
    assert_eq!(
        seen.with(|s| (s.stream_calls, s.function_response.is_none())),
        (1, true),
        "{}",
        log.dump()
    );
    sb.assert_no_survivors();
}

/// An API error Gemini CLI gives up on at once: the item is `failed` with the CLI's own
/// message (from the JSON object ending its stderr), the kind, and its exit code.
async fn api_error_fails_the_item(
    test: &str,
    script: Script,
    key: Option<&str>,
    expect_in_reason: &[&str],
    kind: &str,
    exit_code: i32,
) -> (Sandbox, Seen) {
    let gemini = gemini_or_skip(test).expect("checked by the caller");
    eprintln!("using {} ({})", gemini.bin.display(), gemini.version);
    let (api, log, seen) = mock_api(script).await;
    let sb = Sandbox::new_private(&gemini);

    let r = run_gemini(&sb, &api.uri(), "90s", key).await;
    let context = || sb.context(&r, &log);

    assert_eq!(r.code, 1, "an item did not complete: {}", context());
    let row = sb.row();
    assert_eq!(row["status"], "failed", "{row:?}\n{}", context());
    let reason = row["error"].to_lowercase();
    for word in expect_in_reason {
        assert!(
            reason.contains(&word.to_lowercase()),
            "the reason quotes Gemini CLI ({word:?}): {row:?}\n{}",
            context()
        );
    }
    assert!(
        !reason.contains("ripgrep") && !reason.ends_with('}') && !reason.contains("{\""),
        "not a stderr warning, a lone brace or a raw JSON body: {row:?}"
    );
    assert_eq!(row["failure_kind"], kind, "{row:?}\n{}", context());
    assert_eq!(row["exit_code"], exit_code.to_string(), "{row:?}");
    let start: String = row["error"].chars().take(40).collect();
    assert!(
        r.stdout.contains(&start),
        "the closing summary names the reason: {r:?}"
    );
    assert!(
        seen.with(|s| s.stream_calls) <= 1,
        "the definition's maxAttempts 1: no retry: {}",
        context()
    );
    assert!(
        r.took < Duration::from_secs(30),
        "gave up quickly: {:.1?}",
        r.took
    );
    log.assert_nothing_unexpected();
    sb.assert_no_survivors();
    eprintln!("failed as expected in {:.1?}: {}", r.took, row["error"]);
    (sb, seen)
}

/// The Gemini API's daily free-tier quota (429 RESOURCE_EXHAUSTED, QuotaFailure with a
/// `PerDay` quota id): a `TerminalQuotaError`, not retried; `quota`, exit 173 (429 − 256).
/// Its error dumps land in the teammate's private TMPDIR, not in the caller's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_daily_quota_429_fails_the_item_as_quota() {
    const TEST: &str = "real_gemini_daily_quota_429_fails_the_item_as_quota";
    if gemini_or_skip(TEST).is_none() {
        return;
    }
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
    let (sb, seen) = api_error_fails_the_item(
        TEST,
        Script::Fail {
            status: 429,
            body,
            router_too: true,
        },
        Some("sk-test"),
        &["exited with code 173: You have exhausted your daily quota on this model."],
        "quota",
        173,
    )
    .await;
    assert_eq!(seen.with(|s| s.stream_calls), 1);
    // Gemini CLI wrote the conversation to $TMPDIR/gemini-client-error-*.json: the runner's
    // per-teammate TMPDIR, never the TMPDIR `runner` itself was given.
    let private = error_dumps(&sb.teammate().join("work"));
    assert!(!private.is_empty(), "error dumps in the teammate's tmp");
    assert_eq!(error_dumps(&sb.path().join("tmp")), Vec::<String>::new());
}

/// A per-minute quota's 429 (a `PerMinute` QuotaFailure and a 45 s RetryInfo).
fn per_minute_429() -> Value {
    google_error_body(
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
    )
}

/// A per-minute rate limit on the main model (429 with a `PerMinute` quota and a RetryInfo):
/// a `RetryableQuotaError`, given up on at once with `general.maxAttempts = 1`;
/// `rate_limited`, exit 173.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_rate_limit_429_fails_the_item_as_rate_limited() {
    const TEST: &str = "real_gemini_rate_limit_429_fails_the_item_as_rate_limited";
    if gemini_or_skip(TEST).is_none() {
        return;
    }
    let body = per_minute_429();
    api_error_fails_the_item(
        TEST,
        Script::Fail {
            status: 429,
            body,
            router_too: false,
        },
        Some("sk-test"),
        // The reason is the start of that message (the runner shortens it).
        &["exited with code 173: You exceeded your current quota"],
        "rate_limited",
        173,
    )
    .await;
}

/// The same per-minute limit with Gemini CLI at its own default attempts (10, each after the
/// 45 s the API names) and 40 s to go: its first "Suggested retry after 45s.. Retrying after
/// …ms" line ends the attempt at once as `rate_limited`, not at the time limit (issue 29).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_rate_limit_longer_than_the_time_left_is_ended_at_once() {
    const TEST: &str = "real_gemini_rate_limit_longer_than_the_time_left_is_ended_at_once";
    let Some(gemini) = gemini_or_skip(TEST) else {
        return;
    };
    let (api, log, seen) = mock_api(Script::Fail {
        status: 429,
        body: per_minute_429(),
        router_too: false,
    })
    .await;
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
            &gemini_env(&api.uri(), Some("sk-test")),
        )
        .await;
    let row = sb.row();
    assert_eq!(
        (row["status"].as_str(), row["failure_kind"].as_str()),
        ("failed", "rate_limited"),
        "{row:?}\n{}",
        sb.context(&r, &log)
    );
    assert!(
        row["error"].contains("stopped at once")
            && row["error"].contains("Suggested retry after 45s"),
        "{row:?}"
    );
    assert!(r.took < Duration::from_secs(20), "{:.1?}", r.took);
    assert_eq!(seen.with(|s| s.stream_calls), 1, "{}", sb.context(&r, &log));
    sb.assert_no_survivors();
}

/// A key the Gemini API rejects (it answers 400 INVALID_ARGUMENT, reason API_KEY_INVALID):
/// `auth`, exit 144 (400 − 256).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_bad_key_fails_the_item_as_auth() {
    const TEST: &str = "real_gemini_bad_key_fails_the_item_as_auth";
    if gemini_or_skip(TEST).is_none() {
        return;
    }
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
    api_error_fails_the_item(
        TEST,
        Script::Fail {
            status: 400,
            body,
            router_too: true,
        },
        Some("sk-bad"),
        &["API key not valid"],
        "auth",
        144,
    )
    .await;
}

/// No `GEMINI_API_KEY` at all: Gemini CLI stops before any request, exit 41; `auth`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_missing_key_fails_the_item_as_auth() {
    const TEST: &str = "real_gemini_missing_key_fails_the_item_as_auth";
    if gemini_or_skip(TEST).is_none() {
        return;
    }
    let (_sb, seen) = api_error_fails_the_item(
        TEST,
        Script::WriteReport,
        None,
        &["you must specify the GEMINI_API_KEY environment variable"],
        "auth",
        41,
    )
    .await;
    assert_eq!(
        seen.with(|s| (s.stream_calls, s.router_calls)),
        (0, 0),
        "no request without a key"
    );
}

/// A fresh `~/.gemini` without `security.auth.selectedType`: every row would fail with
/// "Invalid auth method selected."; the reason names the setting and its value (issue 29).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_without_an_auth_type_names_the_setting_to_add() {
    let Some(gemini) = gemini_or_skip("real_gemini_without_an_auth_type_names_the_setting_to_add")
    else {
        return;
    };
    let (api, log, _seen) = mock_api(Script::WriteReport).await;
    let sb = Sandbox::new_private(&gemini);
    let env = gemini_env(&api.uri(), Some("sk-test"));
    let r = sb
        .run(&["--runner", "gemini", "--timeout", "60s"], &env)
        .await;
    assert_eq!(r.code, 1, "{}", sb.context(&r, &log));
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

/// A stalled API and a short `--timeout`: `timed_out`, and no Gemini CLI process is left
/// (its launcher ignores SIGTERM and waits for the relaunched child).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_stalled_api_times_out_and_leaves_no_process() {
    let Some(gemini) = gemini_or_skip("real_gemini_stalled_api_times_out_and_leaves_no_process")
    else {
        return;
    };
    let (api, log, _seen) = mock_api(Script::Stall).await;
    let sb = Sandbox::new_private(&gemini);
    let r = run_gemini(&sb, &api.uri(), "8s", Some("sk-test")).await;
    sb.assert_outcome(&r, &log, 1, "timed_out", "timed_out");
    assert!(
        log.lines().iter().any(|l| l.contains("(stalling)")),
        "the request reached the API: {}",
        log.dump()
    );
    sb.assert_no_survivors();
    eprintln!("timed out as expected in {:.1?}", r.took);
}
