//! `--runner anthropic --batch-api` against a scripted Message Batches API on 127.0.0.1 (the
//! shapes of Anthropic's API reference: "Create a Message Batch", "Retrieve a Message
//! Batch", "List Message Batches", "Retrieve Message Batch results"; never a real call): one
//! batch for the rows, each row's result judged as a direct answer would be (`errored` by
//! its error type, `expired` saying so), a kill right after the batch was created and the
//! same command finding that batch (one batch, one bill), and a bad key.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::harness::{Run, Sandbox, by_id};

const KEY: &str = "sk-ant-test-0123456789abcdef";

/// What the stand-in answers a row (by its `custom_id`).
#[derive(Clone)]
enum RowResult {
    Succeeded,
    Errored(&'static str, &'static str),
    Expired,
}

struct Batch {
    id: String,
    created_at: String,
    requests: Vec<Value>,
}

#[derive(Default)]
struct Remote {
    batches: Vec<Batch>,
    creates: usize,
    lists: usize,
    polls: usize,
    /// Batches end only when this is set.
    release: bool,
    results: HashMap<String, RowResult>,
    /// The headers of every request: (x-api-key, anthropic-version).
    headers: Vec<(String, String)>,
}

#[derive(Clone)]
struct StandIn(Arc<Mutex<Remote>>, String);

impl StandIn {
    fn with<T>(&self, f: impl FnOnce(&mut Remote) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn message(summary: &str) -> Value {
    json!({
        "id": "msg_batch", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "report",
            "input": {"status": "completed", "summary": summary, "blocker": null, "output": {}}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 100, "output_tokens": 10}
    })
}

fn batch_object(b: &Batch, ended: bool, origin: &str) -> Value {
    let n = b.requests.len();
    json!({
        "id": b.id, "type": "message_batch",
        "processing_status": if ended { "ended" } else { "in_progress" },
        "request_counts": {"processing": if ended { 0 } else { n }, "succeeded": if ended { n } else { 0 },
                           "errored": 0, "canceled": 0, "expired": 0},
        "created_at": b.created_at, "ended_at": null, "expires_at": b.created_at,
        "cancel_initiated_at": null, "archived_at": null,
        "results_url": if ended { json!(format!("{origin}/v1/messages/batches/{}/results", b.id)) } else { Value::Null },
    })
}

impl Respond for StandIn {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let path = req.url.path().to_owned();
        let post = req.method.as_str() == "POST";
        let header = |n: &str| {
            req.headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        let (key, version) = (header("x-api-key"), header("anthropic-version"));
        self.with(|r| {
            r.headers.push((key.clone(), version.clone()));
            if key != KEY {
                return ResponseTemplate::new(401).set_body_json(json!({"type": "error",
                    "error": {"type": "authentication_error", "message": "invalid x-api-key"}}));
            }
            if post && path == "/v1/messages/batches" {
                let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                r.creates += 1;
                let b = Batch {
                    id: format!("msgbatch_{:02}", r.creates),
                    created_at: jiff::Timestamp::now().to_string(),
                    requests: body["requests"].as_array().cloned().unwrap_or_default(),
                };
                let v = batch_object(&b, false, &self.1);
                r.batches.push(b);
                return ResponseTemplate::new(200).set_body_json(v);
            }
            if !post && path == "/v1/messages/batches" {
                r.lists += 1;
                let data: Vec<Value> = r
                    .batches
                    .iter()
                    .rev()
                    .map(|b| batch_object(b, r.release, &self.1))
                    .collect();
                return ResponseTemplate::new(200).set_body_json(json!({"data": data,
                    "has_more": false, "first_id": data.first().map(|b| b["id"].clone()),
                    "last_id": data.last().map(|b| b["id"].clone())}));
            }
            let rest = path.strip_prefix("/v1/messages/batches/").unwrap_or("");
            let (id, results) = match rest.strip_suffix("/results") {
                Some(id) => (id, true),
                None => (rest, false),
            };
            let Some(b) = r.batches.iter().find(|b| b.id == id) else {
                return ResponseTemplate::new(404).set_body_json(json!({"type": "error",
                    "error": {"type": "not_found_error", "message": path}}));
            };
            if !results {
                r.polls += 1;
                return ResponseTemplate::new(200)
                    .set_body_json(batch_object(b, r.release, &self.1));
            }
            let mut out = String::new();
            for request in &b.requests {
                let id = request["custom_id"].as_str().unwrap_or("").to_owned();
                let result = match r.results.get(&id).cloned().unwrap_or(RowResult::Succeeded) {
                    RowResult::Succeeded => {
                        json!({"type": "succeeded", "message": message(&format!("answered {id}"))})
                    }
                    RowResult::Errored(kind, words) => json!({"type": "errored", "error":
                        {"type": "error", "error": {"type": kind, "message": words}}}),
                    RowResult::Expired => json!({"type": "expired"}),
                };
                out.push_str(&json!({"custom_id": id, "result": result}).to_string());
                out.push('\n');
            }
            ResponseTemplate::new(200).set_body_string(out)
        })
    }
}

async fn stand_in(release: bool) -> (MockServer, StandIn) {
    let server = MockServer::start().await;
    let s = StandIn(
        Arc::new(Mutex::new(Remote {
            release,
            ..Remote::default()
        })),
        server.uri(),
    );
    Mock::given(any())
        .respond_with(s.clone())
        .mount(&server)
        .await;
    (server, s)
}

fn batch(ids: &[&str]) -> Sandbox {
    let sb = Sandbox::new();
    let mut csv = String::from("id,text\n");
    for id in ids {
        csv.push_str(&format!("{id},text of {id}\n"));
    }
    sb.write("in.csv", csv);
    sb.write("instr.md", "Say whether {text} is a greeting.\n");
    sb
}

fn cmd(sb: &Sandbox, server: &MockServer, key: &str) -> std::process::Command {
    let mut c = sb.cmd(&[
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--id-column",
        "id",
        "--runner",
        "anthropic",
        "--model",
        "claude-test",
        "--batch-api",
        "--var",
        "poll_max_s=0.2",
        "--rate-limit-wait",
        "0s",
        "--format",
        "plain",
    ]);
    c.env("ANTHROPIC_BASE_URL", server.uri())
        .env("ANTHROPIC_API_KEY", key);
    c
}

async fn run(sb: &Sandbox, server: &MockServer, key: &str) -> Run {
    let mut c = cmd(sb, server, key);
    tokio::task::spawn_blocking(move || c.output().expect("spawn").into())
        .await
        .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_message_batch_answers_each_row_and_errored_or_expired_rows_fail_with_their_kind() {
    let (server, api) = stand_in(true).await;
    api.with(|r| {
        r.results.insert(
            "3-c".into(),
            RowResult::Errored("invalid_request_error", "max_tokens: too large"),
        );
        r.results.insert("4-d".into(), RowResult::Expired);
    });
    let sb = batch(&["a", "b", "c", "d"]);
    let r = run(&sb, &server, KEY).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b"] {
        assert_eq!(rows[id]["status"], "completed", "{:?}", rows[id]);
        assert!(
            rows[id]["summary"].starts_with("answered"),
            "{:?}",
            rows[id]
        );
        assert_eq!(rows[id]["input_tokens"], "100");
    }
    assert_eq!(rows["c"]["failure_kind"], "api_error", "{:?}", rows["c"]);
    assert!(
        rows["c"]["error"].contains("max_tokens: too large"),
        "the API's words: {:?}",
        rows["c"]
    );
    assert_eq!(rows["d"]["failure_kind"], "api_error", "{:?}", rows["d"]);
    assert!(rows["d"]["error"].contains("expired"), "{:?}", rows["d"]);
    let (creates, requests, headers) = api.with(|r| {
        let requests = r
            .batches
            .first()
            .map(|b| b.requests.clone())
            .unwrap_or_default();
        (r.creates, requests, r.headers.clone())
    });
    assert_eq!(creates, 1, "one batch for the team");
    assert_eq!(requests.len(), 4);
    // Each request is a Messages request under the row's custom_id.
    let a = requests
        .iter()
        .find(|q| q["custom_id"] == "1-a")
        .expect("row a");
    assert_eq!(a["params"]["model"], "claude-test");
    assert_eq!(a["params"]["tool_choice"]["name"], "report");
    assert!(
        a["params"]["messages"].to_string().contains("text of a"),
        "{a}"
    );
    assert!(
        headers.iter().all(|(k, v)| k == KEY && v == "2023-06-01"),
        "every call carries x-api-key and anthropic-version: {headers:?}"
    );
    // The batch is recorded, its results taken; `runner status` shows it.
    let state: Value =
        serde_json::from_str(&sb.read("workers-output.runner/batch-api.json")).expect("state");
    assert_eq!(state["jobs"][0]["batch_id"], "msgbatch_01");
    assert_eq!(state["jobs"][0]["delivered"], true);
    let status = sb.run(&["status", "workers-output.runner"]);
    assert!(
        status.stdout.contains("msgbatch_01  ended  4/4 done"),
        "{status:?}"
    );
}

/// A kill right after `POST /v1/messages/batches` answered, before the runner recorded the
/// batch's id: the same command finds that batch in the list and waits for it — one batch,
/// one bill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_after_the_batch_is_created_and_the_resume_finds_that_batch() {
    let (server, api) = stand_in(false).await;
    let sb = batch(&["a", "b"]);
    let mut c = cmd(&sb, &server, KEY);
    c.env("RUNNER_FAULT", "batch_created")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let killed = tokio::task::spawn_blocking(move || c.status().expect("spawn"))
        .await
        .expect("join");
    assert!(!killed.success(), "the fault point ended it");
    assert_eq!(api.with(|r| r.creates), 1, "the batch was created");
    api.with(|r| r.release = true);
    let r = run(&sb, &server, KEY).await;
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b"] {
        assert_eq!(rows[id]["status"], "completed", "{:?}", rows[id]);
    }
    let (creates, lists) = api.with(|r| (r.creates, r.lists));
    assert_eq!(
        creates, 1,
        "the resume found the killed run's batch: no second bill"
    );
    assert!(lists >= 1, "it looked");
    assert!(sb.survivors_after(1.0).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_key_fails_the_rows_auth_and_creates_no_batch() {
    let (server, api) = stand_in(true).await;
    let sb = batch(&["a", "b"]);
    let r = run(&sb, &server, "sk-ant-wrong-0123456789abcdef").await;
    assert_ne!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b"] {
        assert_eq!(rows[id]["failure_kind"], "auth", "{:?}", rows[id]);
        assert!(
            rows[id]["error"].contains("invalid x-api-key"),
            "{:?}",
            rows[id]
        );
    }
    assert_eq!(api.with(|r| r.creates), 0);
    assert!(
        !r.stdout.contains("sk-ant-wrong-0123456789abcdef")
            && !r.stderr.contains("sk-ant-wrong-0123456789abcdef"),
        "the key is never shown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_names_the_batch_endpoint_and_sends_nothing() {
    let (server, api) = stand_in(true).await;
    let sb = batch(&["a"]);
    let mut c = cmd(&sb, &server, KEY);
    c.arg("--dry-run");
    let r: Run = tokio::task::spawn_blocking(move || c.output().expect("spawn").into())
        .await
        .expect("join");
    assert_eq!(r.code, 0, "{r:?}");
    let want = format!(
        "sent as Anthropic Message Batches: POST {}/v1/messages/batches,",
        server.uri()
    );
    assert!(r.stdout.contains(&want), "{r:?}");
    assert!(api.with(|r| r.headers.is_empty()), "nothing sent");
}

/// Found by a new user's trial (round 7): `--batch-api` with the anthropic runner and no
/// `--model` names an Anthropic model as the example, never an OpenAI one.
#[test]
fn the_anthropic_runner_without_a_model_names_a_model_of_its_own_api() {
    let sb = crate::harness::Sandbox::new();
    sb.write("in.csv", "id,text\na,hello\n");
    sb.write("instr.md", "Is {text} a greeting?\n");
    let before = sb.tree();
    let r: crate::harness::Run = sb
        .cmd(&[
            "batch",
            "--input",
            "in.csv",
            "--instruction",
            "instr.md",
            "--runner",
            "anthropic",
            "--batch-api",
        ])
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .output()
        .expect("spawn")
        .into();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--model") && r.stderr.contains("claude-") && !r.stderr.contains("gpt-"),
        "an Anthropic model is the example: {r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing on disk changed");
}
