//! End to end: the built-in `opencode` runner definition against the REAL OpenCode CLI
//! (`opencode run --format json`), offline. OpenCode talks to a custom provider
//! (`@ai-sdk/openai-compatible`, which 1.18.33 bundles: nothing is fetched from npm for it)
//! whose `baseURL` is the scripted Chat Completions stand-in of `chat_api.rs`.
//!
//! What OpenCode 1.18.33 does here, observed in these tests:
//! - per turn one streaming `POST /v1/chat/completions` with 10 tools (`bash`, `edit`,
//!   `glob`, `grep`, `read`, `skill`, `task`, `todowrite`, `webfetch`, `write`), plus one
//!   tool-less streaming call that asks for a session title ("You are a title generator");
//! - `--format json` prints `step_start`, `text`, `tool_use`, `step_finish` lines on stdout
//!   (`step_finish.part.tokens` per step), and on an API error
//!   `{"type":"error","error":{"name":"APIError","data":{"message":...,"statusCode":429,...}}}`,
//!   then exits 1;
//! - a 429 is retried 5 times by OpenCode itself (2 s doubling up to 30 s, or the
//!   `retry-after-ms`/`retry-after` header, which the stand-in sets to 20 ms); a 401 is not
//!   retried; no option or variable turns the retries off;
//! - with the team workspace outside its working directory, the `write` tool asks for the
//!   `external_directory` permission, which `opencode run` answers "reject" (stderr:
//!   "permission requested: external_directory (<dir>/*); auto-rejecting"), and the run ends
//!   with exit 0 and no final text. The definition's `OPENCODE_PERMISSION` allows exactly the
//!   teammate folder; the first test runs with the workspace outside the cwd to prove it;
//! - at every start OpenCode installs `@opencode-ai/plugin` from registry.npmjs.org into its
//!   config folder unless `node_modules` and a `package-lock.json` naming it are there; the
//!   tests seed those (as a previous install would leave them), point `HTTPS_PROXY` at a
//!   dead end that logs any outbound request, and set `OPENCODE_DISABLE_MODELS_FETCH`
//!   (models.dev) and `OPENCODE_DISABLE_AUTOUPDATE`.
//!
//! OpenCode is installed by `.ci/run` into `target/e2e-opencode/`; `RUNNER_E2E_OPENCODE` may
//! point at another `opencode` binary. Without one the tests print `skipped: ...` and pass.

use std::time::Duration;

use serde_json::{Value, json};

use crate::chat_api::{self, API_KEY, Call, ChatApi, Reply};
use crate::support::{self, Cli, Sandbox, find_report_path};

/// The custom provider and model the tests configure (`-m e2e/e2e-model`).
const MODEL: &str = "e2e/e2e-model";

/// Token usage the scripted model reports: the tool-call turn, the final-text turn.
const TURN1_USAGE: (u64, u64) = (9_876, 54);
const TURN2_USAGE: (u64, u64) = (10_012, 12);

fn opencode_or_skip(test: &str) -> Option<Cli> {
    support::cli_or_skip("opencode", "node_modules/.bin/opencode", ".", test)
}

/// The title request OpenCode makes on the side of every new session.
fn is_title_request(c: &Call) -> bool {
    c.system.contains("title generator")
}

/// The model that writes the report with OpenCode's `write` tool, then says it is done.
fn writes_report(c: &Call) -> Reply {
    if is_title_request(c) {
        return Reply::text("Write the e2e report", (300, 5));
    }
    if !c.tool_results.is_empty() {
        return Reply::text("Done: the report is written.", TURN2_USAGE);
    }
    match find_report_path(&c.user) {
        Some(report) if c.tools.iter().any(|t| t == "write") => Reply::ToolCall {
            text: "I'll write the report now.".into(),
            id: "call_e2e_write_1".into(),
            name: "write".into(),
            arguments: json!({"filePath": report, "content": support::report_json("1")})
                .to_string(),
            usage: TURN1_USAGE,
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

/// `runner batch --runner opencode --model e2e/e2e-model --timeout <limit>` in `sb`
/// (working directory `cwd`), OpenCode configured for `api` with `key`.
async fn run_opencode(
    sb: &Sandbox,
    cwd: &std::path::Path,
    api: &ChatApi,
    key: &str,
    limit: &str,
) -> support::Run {
    let config = sb.home().join(".config/opencode");
    std::fs::create_dir_all(config.join("node_modules")).expect("mkdir config");
    std::fs::write(
        config.join("opencode.json"),
        json!({
            "$schema": "https://opencode.ai/config.json",
            "provider": {"e2e": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "E2E stand-in",
                "options": {"baseURL": api.base_url(), "apiKey": key},
                "models": {"e2e-model": {"name": "E2E model"}}
            }}
        })
        .to_string(),
    )
    .expect("opencode.json");
    // What an earlier `@opencode-ai/plugin` install leaves, so OpenCode does not run npm.
    std::fs::write(
        config.join("package.json"),
        r#"{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}"#,
    )
    .expect("package.json");
    std::fs::write(
        config.join("package-lock.json"),
        r#"{"lockfileVersion":3,"packages":{"":{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}}}"#,
    )
    .expect("package-lock.json");
    sb.run_in(
        cwd,
        &["--runner", "opencode", "--model", MODEL, "--timeout", limit],
        &[
            ("OPENCODE_DISABLE_MODELS_FETCH", "1".into()),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1".into()),
            ("HTTPS_PROXY", api.proxy.clone()),
            ("HTTP_PROXY", api.proxy.clone()),
            ("NO_PROXY", "127.0.0.1,localhost".into()),
        ],
    )
    .await
}

/// The whole loop with the team workspace OUTSIDE OpenCode's working directory (the runner
/// runs in `<sandbox>/work`, the teammate folder is `<sandbox>/workers-output.runner/...`):
/// the real `write` tool writes `$RUNNER_REPORT` (allowed by the definition's
/// `OPENCODE_PERMISSION`), the JSON events are parsed, the session id is read. With the
/// workspace outside the working directory the default `--sandbox auto` confines OpenCode
/// with Landlock where the kernel can (its XDG folders are the definition's `[sandbox]
/// writes`); the other tests here run from the sandbox folder itself, so auto leaves them
/// unconfined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_opencode_writes_the_report_outside_its_cwd_and_the_item_completes() {
    let test = "real_opencode_writes_the_report_outside_its_cwd_and_the_item_completes";
    let Some(opencode) = opencode_or_skip(test) else {
        return;
    };
    eprintln!("using {} ({})", opencode.bin.display(), opencode.version);
    let api = chat_api::start(writes_report).await;
    let sb = Sandbox::new(&opencode);
    let cwd = sb.path().join("work");

    let r = run_opencode(&sb, &cwd, &api, API_KEY, "60s").await;
    let ctx = || sb.context(&r, &api.log);
    assert!(
        r.stdout.contains("; sandbox landlock")
            || r.stdout.contains("sandbox none (auto: this kernel"),
        "{}",
        ctx()
    );

    assert_eq!(r.code, 0, "every item completed: {}", ctx());
    let row = sb.row();
    assert_eq!(row["status"], "completed", "{row:?}\n{}", ctx());
    assert_eq!(row["summary"], "wrote the report", "{row:?}");
    assert_eq!(row["error"], "", "{row:?}");
    assert_eq!(row["failure_kind"], "", "{row:?}");

    // The report came from OpenCode's own write tool, at the path the prompt named, outside
    // the working directory, and the tool did not fail.
    let calls = api.calls();
    let turns: Vec<&Call> = calls.iter().filter(|c| !is_title_request(c)).collect();
    assert_eq!(turns.len(), 2, "one call per turn: {}", ctx());
    let report = find_report_path(&turns[0].user).expect("the prompt names the report");
    assert!(
        report.starts_with(&sb.path().display().to_string())
            && !std::path::Path::new(&report).starts_with(&cwd),
        "the report is outside the cwd: {report}"
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("the report file"))
            .expect("report JSON");
    assert_eq!(written["summary"], "wrote the report");
    let (id, result) = &turns[1].tool_results[0];
    assert_eq!(id, "call_e2e_write_1");
    assert!(
        !result.to_lowercase().contains("rejected"),
        "the write was allowed: {result}"
    );
    let stderr =
        std::fs::read_to_string(sb.teammate().join("attempt-1.stderr.log")).unwrap_or_default();
    assert!(!stderr.contains("auto-rejecting"), "{stderr}");
    assert!(
        turns
            .iter()
            .all(|c| c.auth.as_deref() == Some("Bearer sk-test")),
        "the configured key is sent"
    );

    // The session id is the one OpenCode sent the API (x-session-id).
    assert!(row["session_id"].starts_with("ses_"), "{row:?}");
    let stdout =
        std::fs::read_to_string(sb.teammate().join("attempt-1.stdout.log")).expect("stdout log");
    assert!(stdout.contains(&row["session_id"]), "{stdout}");
    // step_finish carries each step's tokens; not mapped (the last line would undercount).
    assert!(
        stdout.contains(&format!(
            "\"input\":{},\"output\":{}",
            TURN1_USAGE.0, TURN1_USAGE.1
        )),
        "{stdout}"
    );

    api.log.assert_nothing_unexpected();
    sb.assert_no_survivors();
    eprintln!("completed in {:.1?}", r.took);
}

/// No tool call: the report is the ```json block of the final text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_opencode_report_in_the_final_text_completes() {
    let Some(opencode) = opencode_or_skip("real_opencode_report_in_the_final_text_completes")
    else {
        return;
    };
    let api = chat_api::start(|c: &Call| {
        if is_title_request(c) {
            return Reply::text("Report", (300, 5));
        }
        Reply::text(
            format!(
                "Nothing to change. My report:\n\n```json\n{}\n```\n",
                support::report_json("1")
            ),
            TURN1_USAGE,
        )
    })
    .await;
    let sb = Sandbox::new(&opencode);

    let r = run_opencode(&sb, sb.path(), &api, API_KEY, "60s").await;
    let ctx = || sb.context(&r, &api.log);

    assert_eq!(r.code, 0, "{}", ctx());
    let row = sb.row();
    assert_eq!(row["status"], "completed", "{row:?}\n{}", ctx());
    assert_eq!(row["summary"], "wrote the report", "{row:?}");
    let turns = api.calls().iter().filter(|c| !is_title_request(c)).count();
    assert_eq!(turns, 1, "one turn, no tool call: {}", ctx());
    assert!(api.log.unexpected().is_empty(), "{}", api.log.dump());
    sb.assert_no_survivors();
}

/// An API error OpenCode gives up on: `failed`, the reason quoting OpenCode's error event,
/// the failure kind from the definition's patterns.
async fn api_error_fails_the_item(
    test: &str,
    reply: Reply,
    key: &str,
    kind: &str,
    expect_in_reason: &[&str],
    calls: usize,
) {
    let Some(opencode) = opencode_or_skip(test) else {
        return;
    };
    let api = chat_api::start(move |c: &Call| {
        if c.key() != API_KEY {
            return Reply::bad_key(c.key());
        }
        reply.clone()
    })
    .await;
    let sb = Sandbox::new(&opencode);

    let r = run_opencode(&sb, sb.path(), &api, key, "60s").await;
    let ctx = || sb.context(&r, &api.log);

    assert_eq!(r.code, 1, "an item did not complete: {}", ctx());
    let row = sb.row();
    assert_eq!(row["status"], "failed", "{row:?}\n{}", ctx());
    assert_eq!(row["failure_kind"], kind, "{row:?}\n{}", ctx());
    assert_eq!(row["exit_code"], "1", "{row:?}");
    for word in expect_in_reason {
        assert!(
            row["error"].contains(word),
            "the reason quotes OpenCode's error ({word:?}): {row:?}\n{}",
            ctx()
        );
    }
    let main_calls = api.calls().iter().filter(|c| !is_title_request(c)).count();
    assert_eq!(main_calls, calls, "{}", ctx());
    assert!(r.took < Duration::from_secs(45), "gave up quickly: {r:?}");
    assert!(api.log.unexpected().is_empty(), "{}", api.log.dump());
    sb.assert_no_survivors();
    eprintln!("failed as expected in {:.1?}: {}", r.took, row["error"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_opencode_rate_limit_429_fails_the_item() {
    // OpenCode retries a 429 five times (here 20 ms apart, from retry-after-ms): 6 calls.
    api_error_fails_the_item(
        "real_opencode_rate_limit_429_fails_the_item",
        Reply::rate_limited(),
        API_KEY,
        "rate_limited",
        &["exited with code 1", "Rate limit reached for gpt-4o"],
        6,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_opencode_bad_key_401_fails_the_item() {
    api_error_fails_the_item(
        "real_opencode_bad_key_401_fails_the_item",
        Reply::text("(unreachable: the key is wrong)", (1, 1)),
        "sk-wrong",
        "auth",
        &["Incorrect API key provided: sk-wrong"],
        1,
    )
    .await;
}

/// The API accepts the request and never answers: the runner's time limit ends OpenCode,
/// and none of its processes is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_opencode_stalled_api_times_out_and_leaves_no_process() {
    let Some(opencode) =
        opencode_or_skip("real_opencode_stalled_api_times_out_and_leaves_no_process")
    else {
        return;
    };
    let api = chat_api::start(|_: &Call| Reply::Stall(Duration::from_secs(300))).await;
    let sb = Sandbox::new(&opencode);

    let r = run_opencode(&sb, sb.path(), &api, API_KEY, "20s").await;
    let ctx = || sb.context(&r, &api.log);

    assert_eq!(r.code, 1, "{}", ctx());
    let row = sb.row();
    assert_eq!(row["status"], "timed_out", "{row:?}\n{}", ctx());
    assert_eq!(row["failure_kind"], "timed_out", "{row:?}");
    assert!(!api.calls().is_empty(), "the API was called: {}", ctx());
    assert!(r.took < Duration::from_secs(60), "{r:?}");
    sb.assert_no_survivors();
}
