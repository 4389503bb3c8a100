//! End to end: the built-in `copilot` runner definition against the REAL GitHub Copilot CLI,
//! offline. Copilot's BYOK mode (`COPILOT_PROVIDER_BASE_URL`, provider type `openai`, wire
//! API `completions`) points it at the shared OpenAI Chat Completions stand-in
//! (`chat_api`), with a scripted model: the first turn answers with a `create` tool call that writes
//! the report to the path the prompt names, the second (after the tool result) with a short
//! final text. `COPILOT_OFFLINE=true` turns off GitHub authentication, telemetry and
//! updates. No real model is ever called.
//!
//! The CLI is installed by `.ci/run` into `target/e2e-copilot/` (a pinned version of
//! `@github/copilot` from the npm registry, whose platform package holds a native binary);
//! `RUNNER_E2E_COPILOT` may point at another `copilot` binary. Without one the tests skip
//! (`crate::skip`). The cases it shares with every CLI are its row in `table.rs`; here are
//! its wiring ([`Copilot`]), its API errors and the test only Copilot CLI has.
//!
//! What Copilot CLI 1.0.102 sends with the environment below: only `POST
//! /v1/chat/completions` (streaming, `stream_options.include_usage`, `Authorization: Bearer
//! <COPILOT_PROVIDER_API_KEY>`), one per turn. Anything else is answered and logged as
//! unexpected (run with `--nocapture` to see the log). Without a provider or a GitHub token
//! it contacts api.github.com before refusing to start; that test gives it a local proxy
//! that refuses every CONNECT. On its first run in a HOME it unpacks its package (~235 MB)
//! into `~/.cache/copilot/pkg/` (about 3 s); the tests share one unpacked copy in
//! `target/e2e-copilot/cache` through `COPILOT_CACHE_HOME`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::cases::{self, Agent, Key, Setup, StandIn};
use crate::chat_api::{self, Call, ChatApi, Reply};
use crate::support::{self, Cli, Log, Run, Sandbox, Shared, find_report_path};

/// The key the stand-in accepts.
const KEY: &str = chat_api::API_KEY;
/// The model the runner is asked for (`--model`), forwarded as `--model` to Copilot.
const MODEL: &str = "gpt-4.1";
/// The tool-call id of the scripted `create` call.
const CALL_ID: &str = "call_e2eWriteReport0001";

/// Token usage the scripted model reports per turn (prompt, completion). Copilot 1.0.102
/// prints no token counts in its JSONL, so these only make the stream realistic.
const TURN1_USAGE: (u64, u64) = (14_873, 91);
const TURN2_USAGE: (u64, u64) = (15_020, 9);

/// OpenAI's 429 body for a per-minute rate limit.
pub(crate) const RATE_LIMIT_MESSAGE: &str = "Rate limit reached for gpt-4.1 in organization org-e2e on \
     requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.";
/// OpenAI's 429 body for a used-up quota.
const QUOTA_MESSAGE: &str = "You exceeded your current quota, please check your plan and \
     billing details. For more information on this error, read the docs: \
     https://platform.openai.com/docs/guides/error-codes/api-errors.";

/// An OpenAI API error, on every call: the HTTP status and the error body's `message`,
/// `type` and `code` (none when empty), with `retry-after: 0`, so Copilot's five retries of
/// a 429 or 5xx take about 5 s instead of about a minute.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fault {
    /// HTTP status.
    pub status: u16,
    /// `error.message`.
    pub message: &'static str,
    /// `error.type`.
    pub error_type: &'static str,
    /// `error.code`; empty for none.
    pub code: &'static str,
}

/// What the scripted model does on `POST /v1/chat/completions` (with the right key; a
/// missing or wrong key always gets OpenAI's 401): `WriteReport` is turn 1 a `create` call,
/// turn 2 a short final text; `RateLimitOnce` is a 429 (`retry-after: 0`), then as
/// `WriteReport`.
type Script = cases::Script<Fault>;

/// What the responder learned, for the assertions.
type Seen = Shared<SeenInner>;

#[derive(Default, Debug)]
struct SeenInner {
    calls: usize,
    models: Vec<String>,
    report_path: Option<String>,
    tool_result: Option<String>,
    authorization: Vec<Option<String>>,
}

/// Copilot's side of the Chat Completions stand-in (`chat_api`): what the scripted model
/// answers to call `c`, noting what it saw in `seen` and, in `log`, what Copilot should not
/// have sent.
fn reply(script: Script, c: &Call, log: &Log, seen: &Seen) -> Reply {
    seen.with(|s| {
        s.calls += 1;
        s.models.push(c.model.clone());
        s.authorization.push(c.auth.clone());
    });
    if c.key() != KEY {
        return if c.key().is_empty() {
            Reply::Error {
                status: 401,
                message: "You didn't provide an API key. You need to provide your API key in an \
                          Authorization header using Bearer auth (i.e. Authorization: Bearer \
                          YOUR_KEY)."
                    .into(),
                error_type: "invalid_request_error".into(),
                code: None,
                headers: vec![],
            }
        } else {
            Reply::bad_key(c.key())
        };
    }

    // `retry-after: 0`, so Copilot's five retries of a 429 or 5xx take about 5 s.
    let retry_now = || vec![("retry-after".to_string(), "0".to_string())];
    match script {
        Script::Fail(Fault {
            status,
            message,
            error_type,
            code,
        }) => {
            return Reply::Error {
                status,
                message: message.into(),
                error_type: error_type.into(),
                code: (!code.is_empty()).then(|| code.into()),
                headers: retry_now(),
            };
        }
        Script::RateLimitOnce if c.n == 1 => {
            return Reply::Error {
                status: 429,
                message: RATE_LIMIT_MESSAGE.into(),
                error_type: "requests".into(),
                code: Some("rate_limit_exceeded".into()),
                headers: retry_now(),
            };
        }
        Script::Stall => {
            log.push(format!("call #{} -> (stalling)", c.n));
            return Reply::Stall(Duration::from_secs(600));
        }
        _ => {}
    }

    if !c.stream {
        // Copilot streams its turns; a non-streaming call would be a side request
        // (a title, a summary). Answer it briefly.
        log.push(format!("call #{} -> (unexpected) non-streaming text", c.n));
        return Reply::text("Report writing", (120, 3));
    }

    if let Some((_, result)) = c.tool_results.iter().find(|(id, _)| id == CALL_ID) {
        seen.with(|s| s.tool_result = Some(result.clone()));
        return Reply::text("Done: the report is written.", TURN2_USAGE);
    }

    if let Script::ReportInText = script {
        let text = format!("Done.\n```json\n{}\n```\n", support::report_json("1"));
        return Reply::text(text, TURN2_USAGE);
    }

    match find_report_path(&support::user_text(&c.body["messages"])) {
        Some(report) if c.tools.iter().any(|t| t == "create") => {
            seen.with(|s| s.report_path = Some(report.clone()));
            // `create {path: report, file_text: <report JSON>}`.
            let arguments =
                json!({"path": report, "file_text": support::report_json("1")}).to_string();
            Reply::ToolCall {
                text: "I'll write the report now.".into(),
                id: CALL_ID.into(),
                name: "create".into(),
                arguments,
                usage: TURN1_USAGE,
            }
        }
        found => {
            log.push(format!(
                "call #{} -> (unexpected) no report path or no create tool (report path \
                 {found:?}, tools {:?}); answering with text",
                c.n, c.tools
            ));
            Reply::text("I cannot find the report path.", (400, 9))
        }
    }
}

/// The running stand-in: the Chat Completions stand-in and what Copilot's side of it saw.
pub(crate) struct Api {
    chat: ChatApi,
    seen: Seen,
}

impl StandIn for Api {
    fn log(&self) -> &Log {
        &self.chat.log
    }
    fn turns(&self) -> usize {
        self.seen.with(|s| s.calls)
    }
}

/// The Chat Completions stand-in with `script`.
async fn mock_api(script: Script) -> Api {
    let log = Log::default();
    let seen = Seen::default();
    let (script_log, script_seen) = (log.clone(), seen.clone());
    let chat = chat_api::start_with_log(log, move |c: &Call| {
        reply(script, c, &script_log, &script_seen)
    })
    .await;
    Api { chat, seen }
}

// ---------------------------------------------------------------------------------------
// Running `runner` with Copilot CLI

/// Copilot CLI's wiring for the shared cases (`table.rs`).
pub(crate) struct Copilot;

impl Agent for Copilot {
    const NAME: &'static str = "copilot";
    const BIN: &'static str = "node_modules/.bin/copilot";
    const VERSION_HAS: &'static str = "GitHub Copilot CLI";
    type Fault = Fault;
    type Api = Api;

    async fn start(script: Script) -> Api {
        mock_api(script).await
    }

    /// `--model gpt-4.1`, forwarded as `--model` to Copilot, in BYOK mode.
    fn setup(cli: &Cli, _sb: &Sandbox, api: &Api, key: Key) -> Setup {
        Setup {
            args: vec!["--model".into(), MODEL.into()],
            env: copilot_env(cli, &api.chat.server.uri(), key.value()),
        }
    }

    /// The report really came from Copilot's `create` tool, at the path the prompt named;
    /// `--model` and the key reached the API; the session id is the one Copilot printed on
    /// its result line.
    fn check_completed(sb: &Sandbox, r: &Run, api: &Api, row: &BTreeMap<String, String>) {
        let context = || sb.context(r, &api.chat.log);
        let s = api.seen.with(std::mem::take);
        assert_eq!(s.calls, 2, "one call per turn: {}", context());
        assert!(
            s.models.iter().all(|m| m == MODEL),
            "--model reached the API: {:?}",
            s.models
        );
        assert!(
            s.authorization
                .iter()
                .all(|a| a.as_deref() == Some("Bearer sk-test")),
            "COPILOT_PROVIDER_API_KEY is sent as a bearer token: {:?}",
            s.authorization
        );
        let report = sb.assert_report_written(s.report_path.clone());
        let result = s
            .tool_result
            .clone()
            .expect("Copilot sent the tool result back");
        assert!(
            result.starts_with("Created file ") && result.contains(&report),
            "the create call succeeded: {result}"
        );

        let printed = session_id_printed(sb).expect("a result line with a sessionId");
        assert_eq!(row["session_id"], printed, "{row:?}");
        assert_eq!(printed.len(), 36, "a UUID: {printed}");
    }
}

/// A `COPILOT_CACHE_HOME` that already holds the unpacked package of `cli`, shared by the
/// tests: each fresh HOME would otherwise unpack ~235 MB first (about 3 s, more when the
/// tests run side by side). Filled once by the real binary (`--version` unpacks it) in a
/// private folder that is then renamed into place, so concurrent test runs never see half
/// of it.
fn shared_cache(cli: &Cli) -> String {
    static CACHE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CACHE
        .get_or_init(|| {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e-copilot");
            let cache = root.join("cache");
            if !cache.join("pkg").is_dir() {
                std::fs::create_dir_all(&root).expect("mkdir target/e2e-copilot");
                let fill = tempfile::Builder::new()
                    .prefix("cache.")
                    .tempdir_in(&root)
                    .expect("tempdir");
                let status = std::process::Command::new(&cli.bin)
                    .arg("--version")
                    .env_clear()
                    .env("PATH", std::env::var("PATH").unwrap_or_default())
                    .env("HOME", fill.path())
                    .env("COPILOT_CACHE_HOME", fill.path().join("copilot"))
                    .env("COPILOT_AUTO_UPDATE", "false")
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .status()
                    .expect("run copilot --version");
                assert!(status.success(), "copilot --version: {status}");
                // Another run may have won the race; then its cache is used.
                let _ = std::fs::rename(fill.path().join("copilot"), &cache);
            }
            cache.display().to_string()
        })
        .clone()
}

/// Copilot's environment: BYOK mode pointed at `api`, `key` as `COPILOT_PROVIDER_API_KEY`.
fn copilot_env(cli: &Cli, api: &str, key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("COPILOT_CACHE_HOME", shared_cache(cli)),
        // BYOK: an OpenAI-compatible Chat Completions endpoint instead of GitHub's models.
        ("COPILOT_PROVIDER_BASE_URL", format!("{api}/v1")),
        ("COPILOT_PROVIDER_TYPE", "openai".to_string()),
        ("COPILOT_PROVIDER_WIRE_API", "completions".to_string()),
        // No GitHub authentication, telemetry, web tools, GitHub MCP server or update check.
        ("COPILOT_OFFLINE", "true".to_string()),
        ("COPILOT_AUTO_UPDATE", "false".to_string()),
    ];
    if let Some(key) = key {
        env.push(("COPILOT_PROVIDER_API_KEY", key.to_string()));
    }
    env
}

/// The `sessionId` of the `result` line of the first attempt's stdout.
fn session_id_printed(sb: &Sandbox) -> Option<String> {
    let out = std::fs::read_to_string(sb.teammate().join("attempt-1.stdout.log")).ok()?;
    out.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "result")
        .find_map(|v| v["sessionId"].as_str().map(str::to_string))
}

// ---------------------------------------------------------------------------------------
// The API errors of the table's rows, and their last checks

/// A 429 on every call, for a per-minute rate limit.
pub(crate) const RATE_LIMITED: Fault = Fault {
    status: 429,
    message: RATE_LIMIT_MESSAGE,
    error_type: "requests",
    code: "rate_limit_exceeded",
};

/// OpenAI's used-up-quota 429 (`insufficient_quota`) on every call.
pub(crate) const INSUFFICIENT_QUOTA: Fault = Fault {
    status: 429,
    message: QUOTA_MESSAGE,
    error_type: "insufficient_quota",
    code: "insufficient_quota",
};

/// A 500 on every call.
pub(crate) const SERVER_ERROR: Fault = Fault {
    status: 500,
    message: "The server had an error while processing your request. Sorry about that!",
    error_type: "server_error",
    code: "",
};

/// Every call carried the wrong key `sk-wrong` as a bearer token.
pub(crate) fn sent_the_wrong_key(_sb: &Sandbox, api: &Api) {
    let s = api.seen.with(std::mem::take);
    assert!(
        s.authorization
            .iter()
            .all(|a| a.as_deref() == Some("Bearer sk-wrong")),
        "{:?}",
        s.authorization
    );
}

/// No key, no Authorization header (a key is optional for BYOK).
pub(crate) fn sent_no_key(_sb: &Sandbox, api: &Api) {
    let s = api.seen.with(std::mem::take);
    assert!(
        s.calls > 0 && s.authorization.iter().all(Option::is_none),
        "no key, no Authorization header: {:?}",
        s.authorization
    );
}

// ---------------------------------------------------------------------------------------
// Tests only Copilot CLI has

/// Every request that reaches the stand-in proxy: `CONNECT host:port` lines, refused.
struct Proxy(Log);

impl Respond for Proxy {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        self.0.push(format!("{} {} -> 403", req.method, req.url));
        ResponseTemplate::new(403)
    }
}

/// No BYOK provider and no GitHub login or token: Copilot refuses to start, on stderr, with
/// no JSON; `auth`. (Without a token it still contacts api.github.com first, so
/// HTTPS_PROXY points at a local stand-in that refuses every CONNECT.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_copilot_not_logged_in_fails_the_item_as_auth() {
    let Some(copilot) = cases::find::<Copilot>("real_copilot_not_logged_in_fails_the_item_as_auth")
    else {
        return;
    };
    let proxy = MockServer::start().await;
    let log = Log::default();
    Mock::given(any())
        .respond_with(Proxy(log.clone()))
        .mount(&proxy)
        .await;
    let sb = Sandbox::new(&copilot);
    let r = sb
        .run(
            &["--runner", "copilot", "--timeout", "60s"],
            &[
                ("HTTPS_PROXY", proxy.uri()),
                ("HTTP_PROXY", proxy.uri()),
                ("COPILOT_AUTO_UPDATE", "false".to_string()),
                ("COPILOT_CACHE_HOME", shared_cache(&copilot)),
            ],
        )
        .await;
    let context = || sb.context(&r, &log);
    assert_eq!(r.code, 1, "an item did not complete: {}", context());
    let row = sb.row();
    assert_eq!(row["status"], "failed", "{row:?}\n{}", context());
    assert_eq!(row["exit_code"], "1", "Copilot exits 1: {row:?}");
    assert!(
        row["error"]
            .to_lowercase()
            .contains("no authentication information found"),
        "the reason quotes Copilot's message: {row:?}\n{}",
        context()
    );
    assert_eq!(row["failure_kind"], "auth", "{row:?}\n{}", context());
    let start: String = row["error"].chars().take(40).collect();
    assert!(
        r.stdout.contains(&start),
        "the closing summary names the reason: {r:?}"
    );
    sb.assert_no_survivors();
    assert!(
        log.lines().iter().all(|l| l.starts_with("CONNECT ")),
        "only proxied connects: {}",
        log.dump()
    );
    let out =
        std::fs::read_to_string(sb.teammate().join("attempt-1.stdout.log")).unwrap_or_default();
    assert!(out.trim().is_empty(), "no JSON on stdout: {out}");
}
