//! End to end: the REAL Gemini CLI (pinned by `.ci/run` in `target/e2e-gemini/`) with
//! `runner mcp` as an MCP server (`mcpServers.runner` in its user `settings.json`), against
//! a scripted stand-in for the Gemini API on 127.0.0.1 (issue 51: "Gemini CLI warns about the
//! non-standard `format: uint32/uint64` at every start"). No real model is ever called.
//!
//! What Gemini CLI 0.61.0 does with it (seen with this stand-in): the runner's seven tools
//! come to the model as `functionDeclarations` named `mcp_runner_<tool>` (`-p` needs
//! `--skip-trust` in a folder it does not trust; `"trust": true` on the server runs its tools
//! without asking). It checks a call's arguments against the tool's schema with Ajv
//! (`strictSchema: false`), which logs a `format` it does not know on stderr at each call:
//! `unknown format "uint32" ignored in schema at path "#/properties/max_concurrency"` (Ajv's
//! `unknownFormat` in the bundle) — what the runner's schemas printed before they were made
//! plain (seen with `schema::plain` left out).

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::cases;
use crate::gemini::{Gemini, gemini_env, google_error, sse, text_chunk, usage, write_settings};
use crate::support::{self, Log, Sandbox, Shared};

/// What the scripted model was offered: each main turn's function declarations.
type Declared = Shared<Vec<Vec<Value>>>;

/// `POST …:streamGenerateContent`: keeps the request's function declarations; turn 1 calls
/// the runner's `batch_run` over `rows.csv` with `agent`, turn 2 (its result in hand) answers
/// with a short text. `POST …:generateContent` (the model router): a JSON answer.
struct Model {
    agent: String,
    log: Log,
    declared: Declared,
    /// The `functionResponse` to the model's `batch_run` call.
    answered: Shared<Option<Value>>,
}

impl Respond for Model {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Some(body) = support::json_body(req, &self.log) else {
            return google_error(400, "INVALID_ARGUMENT", "body is not JSON", json!([]));
        };
        if req.url.path().ends_with(":generateContent") {
            self.log
                .push(format!("POST {} -> router answer", req.url.path()));
            let answer = json!({"complexity_reasoning": "Short.", "complexity_score": 10});
            return ResponseTemplate::new(200).set_body_json(json!({
                "candidates": [{
                    "content": {"role": "model", "parts": [{"text": answer.to_string()}]},
                    "finishReason": "STOP", "index": 0
                }],
                "usageMetadata": usage((300, 20)),
                "modelVersion": "gemini-e2e-router-001",
                "responseId": "e2e-router"
            }));
        }
        let declarations: Vec<Value> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["functionDeclarations"].as_array())
            .flatten()
            .cloned()
            .collect();
        self.log.push(format!(
            "POST {} -> text ({} function declaration(s))",
            req.url.path(),
            declarations.len()
        ));
        let batch_run = declarations
            .iter()
            .filter_map(|d| d["name"].as_str())
            .find(|n| n.ends_with("batch_run"))
            .map(str::to_string);
        self.declared.with(|d| d.push(declarations));
        let answered = body["contents"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(|c| c["parts"].as_array())
            .and_then(|p| p.iter().find(|p| p.get("functionResponse").is_some()))
            .map(|p| p["functionResponse"].clone());
        match (answered, batch_run) {
            (Some(response), _) => {
                self.log
                    .push(format!("-> final text (function response: {response})"));
                self.answered.with(|a| *a = Some(response));
                sse(&[text_chunk("The rows ran.", (950, 4), true)])
            }
            (None, Some(name)) => {
                self.log.push(format!("-> functionCall {name}"));
                sse(&[json!({
                    "candidates": [{
                        "content": {"role": "model", "parts": [{"functionCall": {
                            "name": name,
                            "args": {
                                "csv_path": "rows.csv",
                                "instruction": "Look at {topic}.",
                                "id_column": "id",
                                "command": ["sh", self.agent],
                                "max_concurrency": 2,
                                "wait": true
                            }
                        }}]},
                        "finishReason": "STOP", "index": 0
                    }],
                    "usageMetadata": usage((900, 30)),
                    "modelVersion": "gemini-e2e-mock-001",
                    "responseId": "e2e-resp-1"
                })])
            }
            (None, None) => {
                self.log
                    .push("-> (unexpected) no batch_run declared; text".into());
                sse(&[text_chunk("No runner tools.", (900, 4), true)])
            }
        }
    }
}

/// The runner's tools (Gemini CLI names them `mcp_runner_<tool>` for the model).
const RUNNER_TOOLS: [&str; 7] = [
    "todo_list",
    "todo_add",
    "todo_resolve",
    "batch_run",
    "status",
    "show",
    "stop",
];

/// Gemini CLI, headless (`-p`), with `runner mcp` in its settings, hands the runner's seven
/// tools to the model with their schemas; the scripted model calls `batch_run` (with
/// `max_concurrency`, waiting for the end), its result comes back to the model, the rows
/// ran, and Gemini CLI printed no schema warning: the runner's schemas carry no format Ajv
/// does not know (before, each call printed `unknown format "uint32" ignored in schema`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gemini_takes_the_runner_mcp_tools_without_a_schema_warning() {
    let Some(gemini) =
        cases::find::<Gemini>("real_gemini_takes_the_runner_mcp_tools_without_a_schema_warning")
    else {
        return;
    };
    let sb = Sandbox::new_private(&gemini);
    let (log, declared, answered) = (
        Log::default(),
        Declared::default(),
        Shared::<Option<Value>>::default(),
    );
    std::fs::write(sb.path().join("work/rows.csv"), "id,topic\na,x\nb,y\n").expect("csv");
    std::fs::write(
        sb.path().join("agent.sh"),
        "cat > /dev/null\nprintf '{\"status\":\"completed\",\"summary\":\"did %s\"}' \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n",
    )
    .expect("agent");
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(
            r"^/v1beta/models/[^/:]+:(streamGenerateContent|generateContent)$",
        ))
        .respond_with(Model {
            agent: sb.path().join("agent.sh").display().to_string(),
            log: log.clone(),
            declared: declared.clone(),
            answered: answered.clone(),
        })
        .with_priority(1)
        .mount(&server)
        .await;
    support::Other {
        log: log.clone(),
        not_found: google_error(404, "NOT_FOUND", "Not found (e2e mock)", json!([])),
    }
    .mount(&server)
    .await;

    write_settings(&sb);
    let settings_path = sb.home().join(".gemini/settings.json");
    let mut settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings_path).expect("settings"))
            .expect("settings JSON");
    settings["mcpServers"] = json!({"runner": {
        "command": env!("CARGO_BIN_EXE_runner"), "args": ["mcp"], "trust": true
    }});
    settings["general"] = json!({"maxAttempts": 1});
    std::fs::write(&settings_path, settings.to_string()).expect("settings.json");

    let out = tokio::process::Command::new(&gemini.bin)
        .args([
            "-p",
            "What is in my todo inbox?",
            "--output-format",
            "json",
            "--skip-trust",
        ])
        .current_dir(sb.path().join("work"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sb.home())
        .env("TMPDIR", sb.path().join("tmp"))
        .envs(gemini_env(&server.uri(), Some("e2e-key")))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(90), out)
        .await
        .expect("gemini within 90 s")
        .expect("run gemini");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let context = format!(
        "exit {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- stand-in log\n{}",
        out.status.code(),
        log.dump()
    );
    assert_eq!(out.status.code(), Some(0), "{context}");
    let declared = declared.with(|d| d.first().cloned().unwrap_or_default());
    for tool in RUNNER_TOOLS {
        let found = declared
            .iter()
            .find(|d| d["name"].as_str() == Some(&format!("mcp_runner_{tool}")));
        assert!(
            found.is_some_and(|d| d
                .get("parametersJsonSchema")
                .or(d.get("parameters"))
                .is_some()),
            "{tool} declared to the model with its schema: {declared:#?}\n{context}"
        );
    }
    let warnings: Vec<&str> = stderr
        .lines()
        .chain(stdout.lines())
        .filter(|l| {
            let l = l.to_lowercase();
            l.contains("schema") || l.contains("unknown format")
        })
        .collect();
    assert!(
        warnings.is_empty(),
        "Gemini CLI warned: {warnings:?}\n{context}"
    );
    let answered = answered.with(|a| a.clone()).unwrap_or_default().to_string();
    assert!(
        answered.contains("exit_code") && answered.contains("run_finished"),
        "batch_run's result came back to the model: {answered}\n{context}"
    );
    let output =
        std::fs::read_to_string(sb.path().join("work/workers-output.csv")).expect("output");
    assert!(
        output.contains("did a") && output.contains("did b"),
        "{output}"
    );
    sb.assert_no_survivors();
}
