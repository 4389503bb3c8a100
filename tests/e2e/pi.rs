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
//! `pi` binary. Without one the tests skip (`crate::skip`). Its tests are its row in
//! `table.rs`; here is its wiring ([`Pi`]).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cases::{self, Agent, Key, Script, Setup};
use crate::chat_api::{self, API_KEY, Call, ChatApi, Reply};
use crate::support::{Cli, Run, Sandbox, find_report_path};

/// The custom provider and model the tests configure (`--model e2e/e2e-model`).
const MODEL: &str = "e2e/e2e-model";

/// The model that writes the report with pi's `write` tool, then says it is done.
fn writes_report(c: &Call) -> Reply {
    chat_api::report_by_tool(
        c,
        "write",
        |path, report| json!({"path": path, "content": report}),
        (8_900, 61),
        (9_100, 8),
    )
}

/// pi's wiring for the shared cases (`table.rs`).
pub(crate) struct Pi;

impl Agent for Pi {
    const NAME: &'static str = "pi";
    const BIN: &'static str = "node_modules/.bin/pi";
    /// `pi --version` prints the bare version (`0.73.1`).
    const VERSION_HAS: &'static str = ".";
    const TIMEOUT: &'static str = "60s";
    /// The API's reply to every call (a 401 for a wrong key whatever the script).
    type Fault = Reply;
    type Api = ChatApi;

    async fn start(script: Script<Reply>) -> ChatApi {
        chat_api::play(script, writes_report, chat_api::report_in_text).await
    }

    /// `<home>/.pi/agent/models.json`: the stand-in as provider `e2e`, its key read from
    /// `E2E_API_KEY`; pi offline, the dead-end proxy for anything else.
    fn setup(_cli: &Cli, sb: &Sandbox, api: &ChatApi, key: Key) -> Setup {
        let dir = sb.home().join(".pi/agent");
        std::fs::create_dir_all(&dir).expect("mkdir .pi/agent");
        let models = json!({"providers": {"e2e": {
            "baseUrl": api.base_url(),
            "api": "openai-completions",
            "apiKey": "E2E_API_KEY",
            "models": [{"id": "e2e-model"}]
        }}});
        std::fs::write(dir.join("models.json"), models.to_string()).expect("models.json");
        let mut env = vec![
            ("PI_OFFLINE", "1".into()),
            ("PI_TELEMETRY", "0".into()),
            ("HTTPS_PROXY", api.proxy.clone()),
            ("HTTP_PROXY", api.proxy.clone()),
            ("NO_PROXY", "127.0.0.1,localhost".into()),
        ];
        if let Some(key) = key.value() {
            env.push(("E2E_API_KEY", key.to_string()));
        }
        Setup {
            args: vec!["--model".into(), MODEL.into()],
            env,
        }
    }

    /// The prompt came on stdin, pi's own `write` tool wrote `$RUNNER_REPORT`, and the
    /// session id is the one of its JSON `session` header.
    fn check_completed(sb: &Sandbox, r: &Run, api: &ChatApi, row: &BTreeMap<String, String>) {
        let calls = api.calls();
        assert_eq!(
            calls.len(),
            2,
            "one call per turn: {}",
            sb.context(r, &api.log)
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
        let stdout =
            std::fs::read_to_string(sb.teammate().join("attempt-1.stdout.log")).unwrap_or_default();
        let header: Value =
            serde_json::from_str(stdout.lines().next().unwrap_or("{}")).expect("JSON");
        assert_eq!(header["type"], "session");
        assert_eq!(
            row["session_id"],
            header["id"].as_str().unwrap_or("?"),
            "{row:?}"
        );
    }

    /// The report in the teammate folder, pi's sessions in `~/.pi/agent` (the definition's
    /// `[sandbox] writes`).
    fn check_sandboxed(sb: &Sandbox, r: &Run, api: &ChatApi) {
        cases::assert_report_file(sb);
        assert!(
            std::fs::read_dir(sb.home().join(".pi/agent/sessions"))
                .map(|d| d.count() > 0)
                .unwrap_or(false),
            "pi kept its session in ~/.pi/agent: {}",
            sb.context(r, &api.log)
        );
    }
}

/// A used-up quota (429 `insufficient_quota`, `retry-after-ms: 10`) on every call.
pub(crate) fn used_up_quota() -> Reply {
    Reply::Error {
        status: 429,
        message: "You exceeded your current quota, please check your plan and billing details."
            .into(),
        error_type: "insufficient_quota".into(),
        code: Some("insufficient_quota".into()),
        headers: vec![("retry-after-ms".into(), "10".into())],
    }
}
