//! End to end: the REAL Codex CLI (pinned by `.ci/run` in `target/e2e-codex/`) as a lead,
//! with `runner mcp` as its MCP server (`[mcp_servers.runner]` in a `CODEX_HOME/config.toml`
//! of the test's own), driven by a scripted stand-in for the Responses API on 127.0.0.1
//! (issue 51: "Codex as a lead — it is strict about schemas and cancels at its tool
//! time-out"). No real model is ever called.
//!
//! What codex-cli 0.171.0 does with an MCP server (seen with this stand-in):
//! - the MCP tools are not in the request's `tools`: codex offers its own `tool_search`
//!   (`"type": "tool_search"`, `"execution": "client"`) instead, even with `[features]
//!   tool_search = false`. The model sends a `tool_search_call` item; the next request's input
//!   holds a `tool_search_output` whose `tools` are one `namespace` named `mcp__runner`
//!   (the server's instructions as its description) with each runner tool as a `function`
//!   (`defer_loading: true`, `strict: false`). Its `parameters` are the server's input
//!   schema as given, less bounds (`minimum`, `maximum`): a `["integer","null"]` type or an
//!   `anyOf` reached the model unchanged when the runner still sent them, and codex printed
//!   no warning either way — so the test checks the types the model got.
//! - the model calls a runner tool with a `function_call` item carrying `namespace:
//!   "mcp__runner"` and the tool's `name`; codex answers with a `function_call_output`
//!   ("Wall time: …\nOutput:" then the tool's text).
//! - `codex exec` runs with `approval_policy = never`: a tool without `readOnlyHint` is
//!   refused ("MCP tool call requires approval, but approval policy is never") unless the
//!   config approves it (`[mcp_servers.runner.tools.batch_run] approval_mode = "approve"`;
//!   `default_tools_approval_mode` for all of them). The tests approve `batch_run` only, so
//!   `todo_list` and `status` run on their `readOnlyHint` alone.
//! - at the server's `tool_timeout_sec` codex gives up on the call ("timed out awaiting
//!   tools/call after Ns") and sends `notifications/cancelled`; the session goes on.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::cases;
use crate::codex::{
    Codex, KEY_VAR, MODEL, api_error, response_completed, response_created, sse, text_response,
    write_codex_config,
};
use crate::support::{self, Log, Sandbox, Shared};

/// The tools `runner mcp` serves (codex puts them in the namespace `mcp__runner`).
const RUNNER_TOOLS: [&str; 7] = [
    "todo_list",
    "todo_add",
    "todo_resolve",
    "batch_run",
    "status",
    "show",
    "stop",
];

const SEARCH_ID: &str = "call_e2e_tool_search";
const LIST_ID: &str = "call_e2e_todo_list";
const BATCH_ID: &str = "call_e2e_batch_run";
const STATUS_ID: &str = "call_e2e_status";

/// What the scripted lead saw.
#[derive(Default, Debug)]
struct Seen {
    /// The `mcp__runner` namespace as `tool_search_output` (or the request's tools) gave it.
    namespace: Option<Value>,
    /// The `function_call_output` of each runner call, by call id.
    outputs: Vec<(String, String)>,
}

/// `POST /v1/responses` for a lead session: `tool_search` for the runner's tools, then
/// `todo_list` (store `S`), then `batch_run` (waiting for the end) over `rows.csv` with
/// `agent`; when the batch call came back as timed out, `status` of the team after a pause
/// (`status_after`, codex still connected); then a final text.
struct Lead {
    agent: String,
    status_after: Option<Duration>,
    log: Log,
    seen: Shared<Seen>,
}

impl Respond for Lead {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Some(body) = support::json_body(req, &self.log) else {
            return api_error(400, "invalid_request_error", "invalid_json", "not JSON");
        };
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let namespace = input
            .iter()
            .filter(|i| i["type"] == "tool_search_output")
            .flat_map(|i| i["tools"].as_array().cloned().unwrap_or_default())
            .chain(body["tools"].as_array().cloned().unwrap_or_default())
            .find(|t| t["name"] == "mcp__runner");
        let output = |id: &str| {
            input
                .iter()
                .find(|i| i["type"] == "function_call_output" && i["call_id"] == id)
                .map(|i| support::text_of(&i["output"]))
        };
        let (listed, ran, status) = (output(LIST_ID), output(BATCH_ID), output(STATUS_ID));
        self.seen.with(|s| {
            if namespace.is_some() {
                s.namespace = namespace.clone();
            }
            s.outputs = [(LIST_ID, &listed), (BATCH_ID, &ran), (STATUS_ID, &status)]
                .into_iter()
                .filter_map(|(id, o)| Some((id.to_string(), o.clone()?)))
                .collect();
        });
        let turn = self.log.lines().len() + 1;
        let call = |id: &str, name: &str, args: Value| {
            self.log.push(format!("#{turn} -> {name} {args}"));
            sse(&function_call(turn, id, name, &args))
        };
        if namespace.is_none() {
            self.log.push(format!("#{turn} -> tool_search"));
            return sse(&tool_search_call(turn));
        }
        match (listed, ran, status) {
            (None, _, _) => call(LIST_ID, "todo_list", json!({"store": "S"})),
            (Some(_), None, _) => call(
                BATCH_ID,
                "batch_run",
                json!({
                    "csv_path": "rows.csv",
                    "instruction": "Look at {topic}.",
                    "id_column": "id",
                    "command": ["sh", self.agent],
                    "wait": true
                }),
            ),
            (Some(_), Some(ran), None)
                if ran.contains("timed out") && self.status_after.is_some() =>
            {
                let pause = self.status_after.unwrap_or_default();
                self.log
                    .push(format!("#{turn} -> status (after {pause:?})"));
                sse(&function_call(
                    turn,
                    STATUS_ID,
                    "status",
                    &json!({"team": "workers-output.csv"}),
                ))
                .set_delay(pause)
            }
            _ => {
                self.log.push(format!("#{turn} -> final text"));
                sse(&text_response(
                    turn,
                    "The inbox is listed and the rows ran.",
                    (900, 12),
                ))
            }
        }
    }
}

/// A response whose one item is `item` (as the Responses API streams a tool call).
fn one_item(turn: usize, item: Value) -> Vec<Value> {
    let id = format!("resp_e2e_lead_{turn:02}");
    vec![
        response_created(&id),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        response_completed(&id, (1_000, 20)),
    ]
}

/// The model asks codex's `tool_search` for the runner's tools.
fn tool_search_call(turn: usize) -> Vec<Value> {
    one_item(
        turn,
        json!({"type": "tool_search_call", "call_id": SEARCH_ID, "status": "completed",
               "execution": "client",
               "arguments": {"query": "runner todo inbox batch status stop show", "limit": 10}}),
    )
}

/// The model calls runner tool `name` (in codex's `mcp__runner` namespace) with `args`.
fn function_call(turn: usize, id: &str, name: &str, args: &Value) -> Vec<Value> {
    one_item(
        turn,
        json!({"type": "function_call", "id": format!("fc_e2e_{turn:02}"), "call_id": id,
               "status": "completed", "namespace": "mcp__runner", "name": name,
               "arguments": args.to_string()}),
    )
}

/// What one codex session as the lead left: its exit, stdout, stderr, the stand-in's log
/// and what the lead saw.
struct Session {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    log: Log,
    seen: Seen,
}

impl Session {
    fn context(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}\n--- stand-in log\n{}\n--- seen\n{:?}",
            self.code,
            self.stdout,
            self.stderr,
            self.log.dump(),
            self.seen
        )
    }

    /// The text codex sent back for the call `id`.
    fn output(&self, id: &str) -> String {
        self.seen
            .outputs
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, o)| o.clone())
            .unwrap_or_else(|| panic!("no output of {id}: {}", self.context()))
    }
}

/// `sb` prepared for a lead: store `S` with one item, `work/rows.csv` (rows a, b), `agent`
/// as `agent.sh`, and codex's config with `runner mcp` as server `runner` (`server_extra`:
/// more keys of its table).
fn prepare(sb: &Sandbox, api: &str, agent: &str, server_extra: &str) -> std::path::PathBuf {
    let work = sb.path().join("work");
    let add = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(["add", "--store", "S", "Audit the lexer"])
        .current_dir(&work)
        .env("HOME", sb.home())
        .output()
        .expect("runner add");
    assert!(add.status.success(), "{add:?}");
    std::fs::write(work.join("rows.csv"), "id,topic\na,x\nb,y\n").expect("csv");
    std::fs::write(sb.path().join("agent.sh"), agent).expect("agent");
    let codex_home = write_codex_config(sb, api);
    let config = codex_home.join("config.toml");
    let mut text = std::fs::read_to_string(&config).expect("config.toml");
    text.push_str(&format!(
        "\n[mcp_servers.runner]\ncommand = \"{}\"\nargs = [\"mcp\"]\n\
         {server_extra}\n\
         # codex exec never asks: a tool that is not read-only (`batch_run`) needs this.\n\
         [mcp_servers.runner.tools.batch_run]\napproval_mode = \"approve\"\n",
        env!("CARGO_BIN_EXE_runner")
    ));
    std::fs::write(&config, text).expect("config.toml");
    codex_home
}

/// The stand-in: `lead` on `POST /v1/responses`; anything else is answered and logged.
async fn stand_in(lead: Lead) -> MockServer {
    let log = lead.log.clone();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(lead)
        .with_priority(1)
        .mount(&server)
        .await;
    support::Other {
        log,
        not_found: api_error(404, "invalid_request_error", "unknown_url", "e2e"),
    }
    .mount(&server)
    .await;
    server
}

/// The real codex as the lead: `codex exec` in `<sandbox>/work` with `runner mcp` as its
/// server (`server_extra`: more keys of the server's table), the stand-in as its model with
/// `agent.sh` = `agent`, until it ends (at most two minutes). `None` when codex is not
/// installed (with a notice).
async fn run_lead(
    test: &str,
    agent: &str,
    status_after: Option<Duration>,
    server_extra: &str,
) -> Option<(Sandbox, Session)> {
    let codex = cases::find::<Codex>(test)?;
    let sb = Sandbox::new(&codex);
    let (log, seen) = (Log::default(), Shared::<Seen>::default());
    let server = stand_in(Lead {
        agent: sb.path().join("agent.sh").display().to_string(),
        status_after,
        log: log.clone(),
        seen: seen.clone(),
    })
    .await;
    let codex_home = prepare(&sb, &server.uri(), agent, server_extra);
    let out = tokio::process::Command::new(&codex.bin)
        .args(["exec", "--json", "--skip-git-repo-check", "--model", MODEL])
        .arg("List the inbox, then run the rows.")
        .current_dir(sb.path().join("work"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sb.home())
        .env("TMPDIR", sb.path().join("tmp"))
        .env("CODEX_HOME", &codex_home)
        .env(KEY_VAR, "sk-test")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("codex within 2 minutes")
        .expect("run codex");
    let session = Session {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        log,
        seen: seen.with(std::mem::take),
    };
    Some((sb, session))
}

/// The output CSV's rows as `id -> status`.
fn statuses(sb: &Sandbox) -> Vec<(String, String)> {
    let path = sb.path().join("work/workers-output.csv");
    let mut rows = csv::Reader::from_path(&path).expect("the output CSV");
    let headers = rows.headers().expect("headers").clone();
    let col = |name: &str| headers.iter().position(|h| h == name).expect(name);
    let (id, status) = (col("id"), col("status"));
    rows.records()
        .map(|r| {
            let r = r.expect("row");
            (r[id].to_string(), r[status].to_string())
        })
        .collect()
}

/// Codex as the lead finds the runner's tools through its `tool_search`, with every schema
/// (none dropped, `batch_run`'s strict one as the server gave it: `csv_path` required, no
/// other field, each field one plain type), calls the read-only `todo_list` (on its
/// `readOnlyHint` alone) and then `batch_run` (waiting for the end), and both results come
/// back to the model; codex printed no warning about a schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_codex_as_the_lead_finds_and_calls_runner_mcp_tools() {
    let agent = "cat > /dev/null\nprintf '{\"status\":\"completed\",\"summary\":\"did %s\"}' \
                 \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n";
    let Some((sb, s)) = run_lead(
        "real_codex_as_the_lead_finds_and_calls_runner_mcp_tools",
        agent,
        None,
        "",
    )
    .await
    else {
        return;
    };
    assert_eq!(s.code, Some(0), "{}", s.context());
    let namespace = s.seen.namespace.clone().unwrap_or_default();
    let tools = namespace["tools"].as_array().cloned().unwrap_or_default();
    for name in RUNNER_TOOLS {
        let tool = tools.iter().find(|t| t["name"] == name);
        assert!(
            tool.is_some_and(|t| t["type"] == "function" && t["parameters"]["type"] == "object"),
            "{name} offered to the model with its schema: {namespace:#}\n{}",
            s.context()
        );
    }
    let batch = tools
        .iter()
        .find(|t| t["name"] == "batch_run")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        batch["parameters"]["required"],
        json!(["csv_path"]),
        "{batch:#}"
    );
    assert_eq!(
        batch["parameters"]["additionalProperties"],
        json!(false),
        "{batch:#}"
    );
    for field in [
        "csv_path",
        "instruction",
        "max_concurrency",
        "wait",
        "command",
    ] {
        assert!(
            batch["parameters"]["properties"].get(field).is_some(),
            "batch_run's {field} reached the model: {batch:#}"
        );
    }
    // What codex hands on is the server's schema as given: an optional field must be its
    // type alone (`["integer","null"]` reached the model as it was), an integer an integer.
    for tool in &tools {
        for (field, schema) in tool["parameters"]["properties"]
            .as_object()
            .into_iter()
            .flatten()
        {
            assert!(
                schema["type"].is_string(),
                "{}'s {field} reached the model with one plain type: {schema}",
                tool["name"]
            );
        }
    }
    for field in ["max_concurrency", "max_runtime_seconds"] {
        assert_eq!(
            batch["parameters"]["properties"][field]["type"], "integer",
            "{batch:#}"
        );
    }
    let listed = s.output(LIST_ID);
    assert!(
        listed.contains("Audit the lexer"),
        "todo_list's result: {listed}"
    );
    let ran = s.output(BATCH_ID);
    assert!(
        ran.contains("\"exit_code\":0") && ran.contains("\"completed\":2"),
        "batch_run's result: {ran}"
    );
    assert_eq!(
        statuses(&sb),
        [
            ("a".into(), "completed".into()),
            ("b".into(), "completed".into())
        ]
    );
    let warnings: Vec<&str> = s
        .stderr
        .lines()
        .chain(s.stdout.lines())
        .filter(|l| l.to_lowercase().contains("schema"))
        .filter(|l| !l.contains("\"type\":\"item."))
        .collect();
    assert!(
        warnings.is_empty(),
        "codex warned about a schema: {warnings:?}"
    );
    assert!(
        !s.stdout.contains("\"status\":\"failed\""),
        "no runner call failed: {}",
        s.context()
    );
    sb.assert_no_survivors();
}

/// Codex gives up on a waited `batch_run` at the server's `tool_timeout_sec` and cancels
/// the call: the team is interrupted as by Ctrl-C while codex is still connected (the
/// model's `status` call, through the same server, shows both items `cancelled`), the
/// output CSV says so, and no teammate and no temporary file of the run is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_codex_tool_timeout_cancels_a_waited_run_and_leaves_no_process() {
    let agent = "cat > /dev/null\nsleep 120\n";
    let Some((sb, s)) = run_lead(
        "real_codex_tool_timeout_cancels_a_waited_run_and_leaves_no_process",
        agent,
        Some(Duration::from_secs(2)),
        "tool_timeout_sec = 3\n",
    )
    .await
    else {
        return;
    };
    assert_eq!(s.code, Some(0), "{}", s.context());
    let ran = s.output(BATCH_ID);
    assert!(
        ran.contains("timed out awaiting tools/call"),
        "codex gave up at its time-out: {ran}\n{}",
        s.context()
    );
    let status = s.output(STATUS_ID);
    assert!(
        status.contains("cancelled") && !status.contains("running"),
        "the team was interrupted while codex was connected: {status}\n{}",
        s.context()
    );
    assert_eq!(
        statuses(&sb),
        [
            ("a".into(), "cancelled".into()),
            ("b".into(), "cancelled".into())
        ],
        "{}",
        s.context()
    );
    sb.assert_no_survivors();
    let stray = temp_files(&[
        sb.path().join("work"),
        sb.home().join(".local/state/teammate-runner"),
    ]);
    assert!(stray.is_empty(), "temporary files left: {stray:?}");
}

/// Files named like temporary files (`.tmp` in the name) anywhere under `roots`.
fn temp_files(roots: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = roots.to_vec();
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if e.file_name().to_string_lossy().contains(".tmp") {
                found.push(path);
            }
        }
    }
    found
}
