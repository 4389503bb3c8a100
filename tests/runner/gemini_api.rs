//! `--runner gemini-api` (Google's Gemini API, `generateContent`) against a scripted stand-in
//! on 127.0.0.1 whose answers are the documented shapes in `tests/fixtures/gemini-api/`
//! (never a real call): every request the runner sends is held to the documented request
//! shape (`generate-request.schema.json`); the report as structured output held to the
//! schema, with usage and cost; a 429 `RESOURCE_EXHAUSTED` waited out for its `RetryInfo`
//! `retryDelay`; a bad key (`API_KEY_INVALID`) `auth`, stopping the team; a 500 retried;
//! `--batch-api` refused.

use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use crate::harness::{Run, Sandbox, by_id};
use crate::http::Api;

const KEY: &str = "AIzaSy-test-0123456789abcdef";

/// Where the stand-in answers: the model `gemini-test`'s `generateContent`.
const AT: &str = "/v1beta/models/gemini-test:generateContent";

fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gemini-api")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("JSON")
}

fn answer(status: u16, name: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(fixture(name))
}

/// A 200 answer whose text is `text`.
fn text_answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
        "modelVersion": "gemini-test-001"
    }))
}

/// `runner batch --runner gemini-api` over in.csv / instr.md against `api`.
fn cmd(sb: &Sandbox, api: &Api, flags: &[&str]) -> std::process::Command {
    let mut args = vec![
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--id-column",
        "id",
        "--runner",
        "gemini-api",
        "--model",
        "gemini-test",
        "--format",
        "plain",
    ];
    args.extend_from_slice(flags);
    let mut cmd = sb.cmd(&args);
    cmd.env("GEMINI_BASE_URL", api.server.uri())
        .env("GEMINI_API_KEY", KEY);
    cmd
}

async fn run(sb: &Sandbox, api: &Api, flags: &[&str]) -> Run {
    let mut cmd = cmd(sb, api, flags);
    tokio::task::spawn_blocking(move || cmd.output().expect("spawn runner").into())
        .await
        .expect("join")
}

fn batch(rows: &[&str]) -> Sandbox {
    let sb = Sandbox::new();
    let mut csv = String::from("id,path\n");
    for r in rows {
        csv.push_str(&format!("{r},docs/{r}.md\n"));
        sb.write(&format!("docs/{r}.md"), format!("# {r}\n"));
    }
    sb.write("in.csv", csv);
    sb.write("instr.md", "Count the headings of {path}:\n\n{file:path}\n");
    sb
}

const SCHEMA: &str = r#"{"type":"object","additionalProperties":false,"required":["headings"],"properties":{"headings":{"type":"integer"}}}"#;

/// Every request holds to the documented shape of a `generateContent` request.
fn assert_documented_shape(bodies: &[Value]) {
    let schema = fixture("generate-request.schema.json");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    for body in bodies {
        let errors: Vec<String> = validator
            .iter_errors(body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:?}\n{body:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_comes_as_structured_output_with_usage_and_cost() {
    let api = Api::start_at(AT, |_, _| answer(200, "answer.json")).await;
    let sb = batch(&["a"]);
    sb.write("shot.png", b"\x89PNG\r\n\x1a\nrest-of-image");
    sb.write("in.csv", "id,path,shot\na,docs/a.md,shot.png\n");
    sb.write(
        "instr.md",
        "Count the headings of {path}:\n\n{file:path}\n\nScreenshot: {image:shot}\n",
    );
    sb.write("schema.json", SCHEMA);
    let r = run(
        &sb,
        &api,
        &[
            "--output-schema",
            "schema.json",
            "--var",
            "input_usd_per_mtok=0.3",
            "--var",
            "output_usd_per_mtok=2.5",
            "--var",
            "max_tokens=2000",
            "--var",
            "body.generationConfig={\"temperature\":0}",
            "--keep-logs",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    let row = &rows["a"];
    assert_eq!(row["status"], "completed", "{row:?}");
    assert_eq!(row["headings"], "1", "{row:?}");
    assert_eq!(row["summary"], "audited the file");
    assert_eq!(row["session_id"], "gemini-resp-01");
    assert_eq!(row["input_tokens"], "1500");
    // Thinking tokens are billed as output: 40 + 160.
    assert_eq!(row["output_tokens"], "200");
    // 1500 × $0.30 + 200 × $2.50, per million.
    assert_eq!(row["cost_usd"].parse::<f64>().expect("cost"), 0.00095);
    let bodies = api.bodies();
    assert_eq!(bodies.len(), 1);
    assert_documented_shape(&bodies);
    let b = &bodies[0];
    let config = &b["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(
        config["responseJsonSchema"]["properties"]["output"]["required"],
        json!(["headings"])
    );
    assert_eq!(config["maxOutputTokens"], 2000);
    assert_eq!(config["temperature"], 0, "body.generationConfig is merged");
    assert!(
        b["systemInstruction"]["parts"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("Answer with exactly one JSON object"),
        "{b}"
    );
    let parts = &b["contents"][0]["parts"];
    assert!(
        parts[0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("Count the headings of docs/a.md:\n\n# a\n"),
        "{parts}"
    );
    assert_eq!(parts[1], json!({"text": "Image `shot.png`:"}));
    assert_eq!(parts[2]["inlineData"]["mimeType"], "image/png");
    assert_eq!(api.header(0, "x-goog-api-key").as_deref(), Some(KEY));
    assert_eq!(api.header(0, "authorization"), None);
    let exchange = std::fs::read_to_string(row["log"].replace("stdout.log", "stderr.log"))
        .expect("exchange log");
    assert!(exchange.contains(AT), "{exchange}");
    assert!(!exchange.contains(KEY), "the key is redacted: {exchange}");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(
        journal.contains("\"cached_input_tokens\":1024"),
        "{journal}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_violating_the_schema_fails_naming_the_field() {
    let report = r#"{"status": "completed", "summary": "s", "blocker": null, "output": {"headings": "one"}}"#;
    let api = Api::start_at(AT, move |_, _| text_answer(report)).await;
    let sb = batch(&["a"]);
    sb.write("schema.json", SCHEMA);
    let r = run(&sb, &api, &["--output-schema", "schema.json"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let row = &by_id(&sb.join("workers-output.csv"), "id")["a"];
    assert_eq!(row["status"], "failed", "{row:?}");
    assert_eq!(row["failure_kind"], "invalid_report", "{row:?}");
    assert!(row["error"].contains("headings"), "{row:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_waited_out_for_its_retry_delay_and_sent_again() {
    let api = Api::start_at(AT, |n, _| match n {
        1 => answer(429, "resource_exhausted.json"),
        _ => answer(200, "answer.json"),
    })
    .await;
    let sb = batch(&["a"]);
    let started = std::time::Instant::now();
    let r = run(&sb, &api, &["--rate-limit-wait", "1m", "--retries", "0"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(1400),
        "waited the 1.5 s RetryInfo names"
    );
    let row = &by_id(&sb.join("workers-output.csv"), "id")["a"];
    assert_eq!(row["status"], "completed", "{row:?}");
    assert_eq!(row["attempts"], "1", "a refused request is a wait: {row:?}");
    let bodies = api.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0], bodies[1], "sent again as it was");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    let paused: Vec<Value> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "team_paused")
        .collect();
    assert_eq!(paused.len(), 1, "{journal}");
    let wait = paused[0]["wait_s"].as_f64().unwrap_or(0.0);
    assert!((1.4..10.0).contains(&wait), "the retryDelay's wait: {wait}");
    assert!(
        journal.contains("RESOURCE_EXHAUSTED") || journal.contains("exceeded your current quota"),
        "{journal}"
    );
}

/// Issue 50: an input over the model's limit can never succeed: that row fails at once as
/// `input` (not retried, not an api_error), and the others run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_over_the_model_s_limit_fails_that_row_at_once_as_input() {
    let api = Api::start_at(AT, |_, body| {
        if body.to_string().contains("docs/big.md") {
            answer(400, "input_too_long.json")
        } else {
            answer(200, "answer.json")
        }
    })
    .await;
    let sb = batch(&["big", "a"]);
    let r = run(&sb, &api, &["--retries", "2", "--retry-delay", "10ms"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["big"]["status"], "failed", "{rows:?}");
    assert_eq!(rows["big"]["failure_kind"], "input", "{rows:?}");
    assert_eq!(rows["big"]["attempts"], "1", "never tried again: {rows:?}");
    assert!(
        rows["big"]["error"].contains("The input token count (1234567) exceeds the maximum"),
        "{rows:?}"
    );
    assert_eq!(rows["a"]["status"], "completed", "{rows:?}");
    let big = api
        .bodies()
        .iter()
        .filter(|b| b.to_string().contains("docs/big.md"))
        .count();
    assert_eq!(big, 1, "one request for the row that cannot fit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_key_is_auth_and_stops_the_team_after_one_request() {
    let api = Api::start_at(AT, |_, _| answer(400, "api_key_invalid.json")).await;
    let sb = batch(&["a", "b", "c"]);
    let r = run(&sb, &api, &["--jobs", "1"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["failure_kind"], "auth", "{rows:?}");
    assert!(
        rows["a"]["error"].contains("HTTP 400: API key not valid"),
        "{rows:?}"
    );
    for id in ["b", "c"] {
        assert_eq!(rows[id]["status"], "skipped", "{rows:?}");
    }
    assert_eq!(api.bodies().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_is_an_api_error_and_is_retried() {
    let api = Api::start_at(AT, |n, _| match n {
        1 => answer(500, "internal.json"),
        _ => answer(200, "answer.json"),
    })
    .await;
    let sb = batch(&["a"]);
    let r = run(&sb, &api, &["--retries", "1", "--retry-delay", "10ms"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let row = &by_id(&sb.join("workers-output.csv"), "id")["a"];
    assert_eq!(row["attempts"], "2", "{row:?}");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(
        journal.contains("HTTP 500: An internal error has occurred")
            && journal.contains("\"api_error\""),
        "{journal}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_api_is_refused_naming_the_runner() {
    let api = Api::start_at(AT, |_, _| answer(200, "answer.json")).await;
    let sb = batch(&["a"]);
    let r = run(&sb, &api, &["--batch-api"]).await;
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("runner `gemini-api`") && r.stderr.contains("no batch mode"),
        "{r:?}"
    );
    assert!(api.bodies().is_empty());
    assert!(!sb.join("workers-output.csv").exists());
}
