//! End to end: the built-in `pi` runner definition against the REAL pi coding agent
//! (`pi --mode json`, prompt on stdin), offline. pi talks to a custom provider in its
//! `~/.pi/agent/models.json` (`api: "openai-completions"`, docs/models.md) whose `baseUrl` is
//! the scripted Chat Completions stand-in of `chat_api.rs`.
//!
//! What pi 0.73.1 does here, observed in these tests:
//! - per turn one streaming `POST /v1/chat/completions` with its four default tools (`read`,
//!   `bash`, `edit`, `write`; `write` takes `{path, content}`), the key as `Authorization:
//!   Bearer` (the provider's `apiKey` names the variable holding it);
//! - `--mode json` prints a `session` header `{type, version, id, timestamp, cwd}`, then
//!   `agent_start`, `turn_start`, `message_start`/`message_update`/`message_end`,
//!   `tool_execution_*`, `turn_end`, `agent_end`;
//! - an API error ends the assistant message with `stopReason: "error"` and `errorMessage:
//!   "<status> <the API's message>"`, and pi exits **0** (print-mode.js sets 1 only in text
//!   mode); a 401 is not retried; a 429 is retried by the OpenAI SDK and by pi's own
//!   `retry.maxRetries` (3, announced as `auto_retry_start` events);
//! - with `PI_OFFLINE=1` it makes no start-up network call (version check, tool downloads).
//!
//! pi is installed by `.ci/run` into `target/e2e-pi/`; `RUNNER_E2E_PI` may point at another
//! `pi` binary. Without one the tests print `skipped: ...` and pass.

use std::time::Duration;

use serde_json::{Value, json};

use crate::chat_api::{self, API_KEY, Call, ChatApi, Reply};
use crate::support::{self, Cli, Sandbox, find_report_path};

/// The custom provider and model the tests configure (`--model e2e/e2e-model`).
const MODEL: &str = "e2e/e2e-model";

fn pi_or_skip(test: &str) -> Option<Cli> {
    // `pi --version` prints the bare version (`0.73.1`).
    support::cli_or_skip("pi", "node_modules/.bin/pi", ".", test)
}

/// The model that writes the report with pi's `write` tool, then says it is done.
fn writes_report(c: &Call) -> Reply {
    if !c.tool_results.is_empty() {
        return Reply::text("Done: the report is written.", (9_100, 8));
    }
    match find_report_path(&c.user) {
        Some(report) if c.tools.iter().any(|t| t == "write") => Reply::ToolCall {
            text: "I'll write the report now.".into(),
            id: "call_e2e_write_1".into(),
            name: "write".into(),
            arguments: json!({"path": report, "content": support::report_json("1")}).to_string(),
            usage: (8_900, 61),
        },
        found => Reply::text(
            format!(
                "(unexpected) no report path or no write tool: {found:?} {:?}",
                c.tools
            ),
            (10, 10),
        ),
    }
}

/// `<home>/.pi/agent/models.json`: the stand-in as provider `e2e`, its key read from
/// `E2E_API_KEY`.
fn write_models(sb: &Sandbox, api: &ChatApi) {
    let dir = sb.home().join(".pi/agent");
    std::fs::create_dir_all(&dir).expect("mkdir .pi/agent");
    let models = json!({"providers": {"e2e": {
        "baseUrl": api.base_url(),
        "api": "openai-completions",
        "apiKey": "E2E_API_KEY",
        "models": [{"id": "e2e-model"}]
    }}});
    std::fs::write(dir.join("models.json"), models.to_string()).expect("models.json");
}

/// pi's environment: the key, offline, and the dead-end proxy for anything else.
fn pi_env(api: &ChatApi, key: &str) -> Vec<(&'static str, String)> {
    vec![
        ("E2E_API_KEY", key.to_string()),
        ("PI_OFFLINE", "1".into()),
        ("PI_TELEMETRY", "0".into()),
        ("HTTPS_PROXY", api.proxy.clone()),
        ("HTTP_PROXY", api.proxy.clone()),
        ("NO_PROXY", "127.0.0.1,localhost".into()),
    ]
}

/// `runner batch --runner pi --model e2e/e2e-model --timeout <limit> EXTRA...` in `sb`.
async fn run_pi(sb: &Sandbox, api: &ChatApi, key: &str, limit: &str) -> support::Run {
    write_models(sb, api);
    sb.run(
        &["--runner", "pi", "--model", MODEL, "--timeout", limit],
        &pi_env(api, key),
    )
    .await
}

/// The whole loop: the prompt on stdin, pi's own `write` tool writes `$RUNNER_REPORT`, the
/// JSON events are read (session id from the header), the report is judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_writes_the_report_and_the_item_completes() {
    let test = "real_pi_writes_the_report_and_the_item_completes";
    let Some(pi) = pi_or_skip(test) else {
        return;
    };
    eprintln!("using {} ({})", pi.bin.display(), pi.version);
    let api = chat_api::start(writes_report).await;
    let sb = Sandbox::new(&pi);
    let r = run_pi(&sb, &api, API_KEY, "60s").await;
    let row = sb.assert_completed(&r, &api.log);

    let calls = api.calls();
    assert_eq!(
        calls.len(),
        2,
        "one call per turn: {}",
        sb.context(&r, &api.log)
    );
    assert_eq!(calls[0].key(), API_KEY);
    assert!(
        calls[0].user.contains("Write the report for item 1"),
        "{:?}",
        calls[0].user
    );
    let report = sb.assert_report_written(find_report_path(&calls[0].user));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("JSON");
    assert_eq!(written["summary"], "wrote the report");
    let (id, result) = &calls[1].tool_results[0];
    assert_eq!(id, "call_e2e_write_1");
    assert!(
        result.to_lowercase().contains("wrote") || result.contains("bytes"),
        "{result}"
    );
    // The session header's id.
    let stdout =
        std::fs::read_to_string(sb.teammate().join("attempt-1.stdout.log")).unwrap_or_default();
    let header: Value = serde_json::from_str(stdout.lines().next().unwrap_or("{}")).expect("JSON");
    assert_eq!(header["type"], "session");
    assert_eq!(
        row["session_id"],
        header["id"].as_str().unwrap_or("?"),
        "{row:?}"
    );
    api.log.assert_nothing_unexpected();
    sb.assert_no_survivors();
}

/// The report only in pi's final text (no tool call): still `completed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_report_in_the_final_text_completes() {
    let Some(pi) = pi_or_skip("real_pi_report_in_the_final_text_completes") else {
        return;
    };
    let api = chat_api::start(|_| {
        Reply::text(
            format!("Done.\n```json\n{}\n```", support::report_json("1")),
            (100, 20),
        )
    })
    .await;
    let sb = Sandbox::new(&pi);
    let r = run_pi(&sb, &api, API_KEY, "60s").await;
    sb.assert_completed(&r, &api.log);
    sb.assert_no_survivors();
}

/// A key the API rejects: pi exits 0 with the error in its last message; the item is
/// `failed`, `auth`, quoting pi's `errorMessage` — not `no_report`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_bad_key_fails_the_item_as_auth() {
    let Some(pi) = pi_or_skip("real_pi_bad_key_fails_the_item_as_auth") else {
        return;
    };
    let api = chat_api::start(|c| Reply::bad_key(c.key())).await;
    let sb = Sandbox::new(&pi);
    let r = run_pi(&sb, &api, "sk-bad", "60s").await;
    let row = sb.assert_outcome(&r, &api.log, 1, "failed", "auth");
    assert!(
        row["error"].contains("401 Incorrect API key provided: sk-bad"),
        "{row:?}"
    );
    assert_eq!(row["exit_code"], "0", "pi exits 0 on an API error: {row:?}");
    assert_eq!(api.calls().len(), 1, "a 401 is not retried");
    sb.assert_no_survivors();
}

/// A used-up quota (429 `insufficient_quota`) with pi at its own retry settings: its first
/// `auto_retry_start` event ends the attempt at once as `quota`, with its words, instead of
/// after its retries (13 requests, about 20 s) — issue 29.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_used_up_quota_is_ended_at_its_first_retry() {
    let Some(pi) = pi_or_skip("real_pi_used_up_quota_is_ended_at_its_first_retry") else {
        return;
    };
    let api = chat_api::start(|_| Reply::Error {
        status: 429,
        message: "You exceeded your current quota, please check your plan and billing details."
            .into(),
        error_type: "insufficient_quota".into(),
        code: Some("insufficient_quota".into()),
        headers: vec![("retry-after-ms".into(), "10".into())],
    })
    .await;
    let sb = Sandbox::new(&pi);
    let r = run_pi(&sb, &api, API_KEY, "2m").await;
    let row = sb.assert_outcome(&r, &api.log, 1, "failed", "quota");
    assert!(
        row["error"].contains("stopped at once")
            && row["error"].contains("429 You exceeded your current quota")
            && row["error"].contains("pi would retry it 3 times"),
        "{row:?}"
    );
    assert!(r.took < Duration::from_secs(15), "{:.1?}", r.took);
    sb.assert_no_survivors();
}

/// A stalled API and a short `--timeout`: `timed_out`, and no pi process is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_stalled_api_times_out_and_leaves_no_process() {
    let Some(pi) = pi_or_skip("real_pi_stalled_api_times_out_and_leaves_no_process") else {
        return;
    };
    let api = chat_api::start(|_| Reply::Stall(Duration::from_secs(120))).await;
    let sb = Sandbox::new(&pi);
    let r = run_pi(&sb, &api, API_KEY, "5s").await;
    sb.assert_outcome(&r, &api.log, 1, "timed_out", "timed_out");
    sb.assert_no_survivors();
}

/// The whole loop under the default `--sandbox auto`, Landlock here (the output and
/// workspace outside the working directory): pi writes its report in its teammate folder
/// and its sessions in `~/.pi/agent` (the definition's `[sandbox] writes`), and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_completes_under_the_landlock_sandbox() {
    let Some(pi) = pi_or_skip("real_pi_completes_under_the_landlock_sandbox") else {
        return;
    };
    let api = chat_api::start(writes_report).await;
    let sb = Sandbox::new(&pi);
    write_models(&sb, &api);
    let Some(r) = sb
        .run_sandboxed(
            &["--runner", "pi", "--model", MODEL, "--timeout", "60s"],
            &pi_env(&api, API_KEY),
        )
        .await
    else {
        return;
    };
    sb.assert_completed(&r, &api.log);
    assert!(
        std::fs::read_dir(sb.home().join(".pi/agent/sessions"))
            .map(|d| d.count() > 0)
            .unwrap_or(false),
        "pi kept its session in ~/.pi/agent: {}",
        sb.context(&r, &api.log)
    );
    sb.assert_no_survivors();
}
