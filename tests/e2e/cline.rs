//! End to end: the built-in `cline` runner definition against the REAL Cline CLI (npm
//! `cline`, `cline --json "Do the task below."` with the prompt piped on stdin), offline.
//! Cline talks to its `openai-compatible` provider as `cline auth -p openai-compatible -b URL
//! -k KEY -m MODEL` stores it in `~/.cline/data/settings/providers.json`, whose `baseUrl` is
//! the scripted Chat Completions stand-in of `chat_api.rs`.
//!
//! What Cline 3.0.65 does here, observed in these tests:
//! - per turn one streaming `POST /v1/chat/completions` with its tools (`read_files`,
//!   `run_commands`, `editor` — `{path, new_text}` creates a file —, `team_*`, ...), the key as
//!   `Authorization: Bearer`;
//! - the prompt argument, then the piped stdin after a blank line, as the one user message;
//!   with a regular file on stdin it sends the argument alone (its Bun runtime reads nothing
//!   from a file), hence `prompt = "pipe"`;
//! - `--json` prints `hook_event` and `agent_event` lines and last a `run_result` with
//!   `finishReason` (`completed`, `error`) and the final `text`; an API error is an
//!   `agent_event` of type `error` with the API's message and Cline's `errorClass`, and exit 1;
//! - with `CLINE_SESSION_BACKEND_MODE=local` (the definition sets it) no hub daemon is started.
//!
//! Cline is installed by `.ci/run` into `target/e2e-cline/`; `RUNNER_E2E_CLINE` may point at
//! another `cline` binary. Without one the tests skip (`crate::skip`). Its tests are its row
//! in `table.rs`; here is its wiring ([`Cline`]).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cases::{self, Agent, Key, Script, Setup};
use crate::chat_api::{self, API_KEY, Call, ChatApi, Reply};
use crate::support::{Cli, Run, Sandbox, find_report_path};

/// The model the tests configure (`--model e2e-model`).
const MODEL: &str = "e2e-model";

/// The model that writes the report with Cline's `editor` tool, then says it is done.
fn writes_report(c: &Call) -> Reply {
    chat_api::report_by_tool(
        c,
        "editor",
        |path, report| json!({"path": path, "new_text": report}),
        (8_900, 61),
        (9_100, 8),
    )
}

/// Cline's wiring for the shared cases (`table.rs`).
pub(crate) struct Cline;

impl Agent for Cline {
    const NAME: &'static str = "cline";
    const BIN: &'static str = "node_modules/.bin/cline";
    /// `cline --version` prints the bare version (`3.0.65`).
    const VERSION_HAS: &'static str = ".";
    const TIMEOUT: &'static str = "60s";
    /// The API's reply to every call (a 401 for a wrong key whatever the script).
    type Fault = Reply;
    type Api = ChatApi;

    async fn start(script: Script<Reply>) -> ChatApi {
        chat_api::play(script, writes_report, chat_api::report_in_text).await
    }

    /// `<home>/.cline/data/settings/providers.json`: the stand-in as the `openai-compatible`
    /// provider with the key (none for [`Key::Missing`]), its calls home off; the dead-end
    /// proxy for anything else.
    fn setup(_cli: &Cli, sb: &Sandbox, api: &ChatApi, key: Key) -> Setup {
        let dir = sb.home().join(".cline/data/settings");
        std::fs::create_dir_all(&dir).expect("mkdir .cline/data/settings");
        let mut settings = json!({
            "provider": "openai-compatible",
            "model": MODEL,
            "baseUrl": api.base_url(),
        });
        if let Some(key) = key.value() {
            settings["apiKey"] = json!(key);
        }
        let providers = json!({
            "version": 1,
            "lastUsedProvider": "openai-compatible",
            "modes": {},
            // Without `updatedAt` Cline drops the entry and falls back to its own `cline`
            // provider (an account at cline.bot).
            "providers": {"openai-compatible": {
                "settings": settings,
                "updatedAt": "2026-12-01T00:00:00.000Z",
                "tokenSource": "manual"
            }}
        });
        std::fs::write(dir.join("providers.json"), providers.to_string()).expect("providers");
        // Its OpenTelemetry export (otel.cline.bot) and update check (api.cline.bot) off.
        let global = json!({"telemetryOptOut": true, "autoUpdateEnabled": false});
        std::fs::write(dir.join("global-settings.json"), global.to_string()).expect("global");
        Setup {
            args: vec!["--model".into(), MODEL.into()],
            env: vec![
                // Its own test switch: no PostHog feature-flag client (data.cline.bot).
                ("E2E_TEST", "true".into()),
                ("HTTPS_PROXY", api.proxy.clone()),
                ("HTTP_PROXY", api.proxy.clone()),
                ("NO_PROXY", "127.0.0.1,localhost".into()),
            ],
        }
    }

    /// The prompt came through the pipe after the argument, Cline's `editor` tool wrote
    /// `$RUNNER_REPORT`, and the run's last line is a completed `run_result`.
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
            calls[0].user.starts_with("Do the task below.")
                && calls[0].user.contains("Write the report for item 1"),
            "the argument, then the piped prompt: {:?}",
            calls[0].user
        );
        let report = sb.assert_report_written(find_report_path(&calls[0].user));
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("JSON");
        assert_eq!(written["summary"], "wrote the report");
        assert_eq!(calls[1].tool_results[0].0, "call_e2e_write_1");
        let stdout =
            std::fs::read_to_string(sb.teammate().join("attempt-1.stdout.log")).unwrap_or_default();
        let last: Value =
            serde_json::from_str(stdout.lines().last().unwrap_or("{}")).expect("JSON");
        assert_eq!(last["type"], "run_result", "{stdout}");
        assert_eq!(last["finishReason"], "completed", "{stdout}");
        assert_eq!(row["status"], "completed", "{row:?}");
    }

    /// The report in the teammate folder, Cline's session in `~/.cline` (the definition's
    /// `[sandbox] writes`).
    fn check_sandboxed(sb: &Sandbox, r: &Run, api: &ChatApi) {
        cases::assert_report_file(sb);
        assert!(
            std::fs::read_dir(sb.home().join(".cline/data/sessions"))
                .map(|d| d.count() > 0)
                .unwrap_or(false),
            "Cline kept its session in ~/.cline: {}",
            sb.context(r, &api.log)
        );
    }
}

/// The reason of an HTML error page names the page (its title), with no tag of it.
pub(crate) fn no_html_in_the_reason(sb: &Sandbox, _api: &ChatApi) {
    let row = sb.row();
    assert!(!row["error"].contains('<'), "no tag of the page: {row:?}");
}
