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
//! point at another `opencode` binary. Without one the tests skip (`crate::skip`). Its tests
//! are its row in `table.rs`; here is its wiring ([`Opencode`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cases::{Agent, Key, Script, Setup, StandIn};
use crate::chat_api::{self, Call, ChatApi, Reply};
use crate::support::{self, Cli, Log, Run, Sandbox, find_report_path};

/// The custom provider and model the tests configure (`-m e2e/e2e-model`).
const MODEL: &str = "e2e/e2e-model";

/// Token usage the scripted model reports: the tool-call turn, the final-text turn.
const TURN1_USAGE: (u64, u64) = (9_876, 54);
const TURN2_USAGE: (u64, u64) = (10_012, 12);

/// The title request OpenCode makes on the side of every new session.
fn is_title_request(c: &Call) -> bool {
    c.system.contains("title generator")
}

/// The model that writes the report with OpenCode's `write` tool, then says it is done.
fn writes_report(c: &Call) -> Reply {
    if is_title_request(c) {
        return Reply::text("Write the e2e report", (300, 5));
    }
    chat_api::report_by_tool(
        c,
        "write",
        |path, report| json!({"filePath": path, "content": report}),
        TURN1_USAGE,
        TURN2_USAGE,
    )
}

/// No tool call: the report is the ```json block of the final text.
fn reports_in_text(c: &Call) -> Reply {
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
}

/// The running stand-in (the Chat Completions one).
pub(crate) struct Api(ChatApi);

impl StandIn for Api {
    fn log(&self) -> &Log {
        &self.0.log
    }
    /// Calls that are not the side request for a session title.
    fn turns(&self) -> usize {
        self.0
            .calls()
            .iter()
            .filter(|c| !is_title_request(c))
            .count()
    }
}

/// OpenCode's wiring for the shared cases (`table.rs`).
pub(crate) struct Opencode;

impl Agent for Opencode {
    const NAME: &'static str = "opencode";
    const BIN: &'static str = "node_modules/.bin/opencode";
    const VERSION_HAS: &'static str = ".";
    const TIMEOUT: &'static str = "60s";
    /// The API's reply to every call (a 401 for a wrong key whatever the script).
    type Fault = Reply;
    type Api = Api;

    async fn start(script: Script<Reply>) -> Api {
        Api(chat_api::play(script, writes_report, reports_in_text).await)
    }

    /// `~/.config/opencode/opencode.json` naming the stand-in as provider `e2e` with `key`
    /// (the config holds it: a missing key is no case here), and what an earlier
    /// `@opencode-ai/plugin` install leaves, so OpenCode does not run npm.
    fn setup(_cli: &Cli, sb: &Sandbox, api: &Api, key: Key) -> Setup {
        let api = &api.0;
        let config = sb.home().join(".config/opencode");
        std::fs::create_dir_all(config.join("node_modules")).expect("mkdir config");
        std::fs::write(
            config.join("opencode.json"),
            json!({
                "$schema": "https://opencode.ai/config.json",
                "provider": {"e2e": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "E2E stand-in",
                    "options": {"baseURL": api.base_url(), "apiKey": key.value().unwrap_or("")},
                    "models": {"e2e-model": {"name": "E2E model"}}
                }}
            })
            .to_string(),
        )
        .expect("opencode.json");
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
        Setup {
            args: vec!["--model".into(), MODEL.into()],
            env: vec![
                ("OPENCODE_DISABLE_MODELS_FETCH", "1".into()),
                ("OPENCODE_DISABLE_AUTOUPDATE", "1".into()),
                ("HTTPS_PROXY", api.proxy.clone()),
                ("HTTP_PROXY", api.proxy.clone()),
                ("NO_PROXY", "127.0.0.1,localhost".into()),
            ],
        }
    }

    /// The whole loop runs from `work/`, with the team workspace OUTSIDE OpenCode's working
    /// directory (the teammate folder is `<sandbox>/workers-output.runner/...`): the `write`
    /// tool asks for `external_directory`, which the definition's `OPENCODE_PERMISSION`
    /// allows for exactly the teammate folder. With the workspace outside the working
    /// directory the default `--sandbox auto` confines OpenCode with Landlock where the
    /// kernel can (its XDG folders are the definition's `[sandbox] writes`).
    fn loop_cwd(sb: &Sandbox) -> PathBuf {
        sb.path().join("work")
    }

    /// Landlock or not as the kernel allows; the report came from OpenCode's own `write`
    /// tool, at the path the prompt named, outside the working directory, and the tool did
    /// not fail; the configured key was sent; the session id is the one OpenCode sent the
    /// API; `step_finish` carries each step's tokens (not mapped: the last line would
    /// undercount).
    fn check_completed(sb: &Sandbox, r: &Run, api: &Api, row: &BTreeMap<String, String>) {
        let ctx = || sb.context(r, &api.0.log);
        let cwd = Self::loop_cwd(sb);
        assert!(
            r.stdout.contains("; sandbox landlock")
                || r.stdout.contains("sandbox none (auto: this kernel"),
            "{}",
            ctx()
        );
        let calls = api.0.calls();
        let turns: Vec<&Call> = calls.iter().filter(|c| !is_title_request(c)).collect();
        assert_eq!(turns.len(), 2, "one call per turn: {}", ctx());
        let report = find_report_path(&turns[0].user).expect("the prompt names the report");
        assert!(
            report.starts_with(&sb.path().display().to_string())
                && !Path::new(&report).starts_with(&cwd),
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

        assert!(row["session_id"].starts_with("ses_"), "{row:?}");
        let stdout = std::fs::read_to_string(sb.teammate().join("attempt-1.stdout.log"))
            .expect("stdout log");
        assert!(stdout.contains(&row["session_id"]), "{stdout}");
        assert!(
            stdout.contains(&format!(
                "\"input\":{},\"output\":{}",
                TURN1_USAGE.0, TURN1_USAGE.1
            )),
            "{stdout}"
        );
    }

    /// Nothing unexpected was requested (the proxy saw nothing).
    fn check_failed(_sb: &Sandbox, api: &Api, _row: &BTreeMap<String, String>) {
        api.0.log.assert_nothing_unexpected();
    }
}

// ---------------------------------------------------------------------------------------
// Tests only OpenCode has

/// The report of the item the prompt names ("… for item 3 …", from `instr.md`), in the text.
fn reports_for_its_item(c: &Call) -> Reply {
    if is_title_request(c) {
        return Reply::text("Report", (300, 5));
    }
    let id = c
        .user
        .split("for item ")
        .nth(1)
        .and_then(|rest| rest.split(|ch: char| !ch.is_ascii_digit()).next())
        .unwrap_or("?")
        .to_owned();
    Reply::text(
        format!("Done.\n\n```json\n{}\n```\n", support::report_json(&id)),
        TURN1_USAGE,
    )
}

/// Four teammates at once on a fresh HOME (every CI job): each `opencode run` would apply
/// OpenCode's first-run database migrations, and those starting together raced on them
/// ("Error: Unexpected error … Failed query: CREATE TABLE … params:", issue 56). The
/// definition's `warm_up` starts it once first: every row completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_opencode_on_a_fresh_home_completes_every_row_at_four_jobs() {
    const TEST: &str = "real_opencode_on_a_fresh_home_completes_every_row_at_four_jobs";
    let Some(cli) = crate::cases::find::<Opencode>(TEST) else {
        return;
    };
    let api = Api(chat_api::start(|c: &Call| reports_for_its_item(c)).await);
    let sb = Sandbox::new(&cli);
    std::fs::write(sb.path().join("in.csv"), "id\n1\n2\n3\n4\n").expect("in.csv");
    assert!(
        !sb.home().join(".local/share/opencode").exists(),
        "a fresh HOME"
    );
    let setup = Opencode::setup(&cli, &sb, &api, Key::Right);
    let mut args = vec!["--runner", "opencode", "--timeout", "90s", "-j", "4"];
    args.extend(setup.args.iter().map(String::as_str));
    let r = sb.run(&args, &setup.env).await;
    let out = std::fs::read_to_string(sb.path().join("workers-output.csv")).expect("output");
    let mut rows = csv::Reader::from_reader(out.as_bytes());
    let headers = rows.headers().expect("headers").clone();
    let col = |name: &str| headers.iter().position(|h| h == name).expect(name);
    let (status, error) = (col("status"), col("error"));
    let rows: Vec<csv::StringRecord> = rows.records().map(|r| r.expect("row")).collect();
    assert_eq!(rows.len(), 4, "{out}");
    for row in &rows {
        assert_eq!(
            &row[status],
            "completed",
            "{}: {}\n{}",
            &row[0],
            &row[error],
            sb.context(&r, &api.0.log)
        );
    }
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        sb.home()
            .join(".local/share/opencode/opencode.db")
            .is_file()
    );
    api.0.log.assert_nothing_unexpected();
    sb.assert_no_survivors();
}
