//! `--runner anthropic` (the Messages API) against a scripted stand-in on 127.0.0.1 whose
//! answers are the documented shapes in `tests/fixtures/anthropic/` (never a real call):
//! every request the runner sends is held to the documented request shape
//! (`messages-request.schema.json`); the report as a forced tool call with an output schema
//! and an image; 429 and 529 waited out; 401 `auth` and billing `quota` stopping the team; an
//! invalid request failing with the API's words.

use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use crate::harness::{Run, Sandbox, by_id};
use crate::http::Api;

const KEY: &str = "sk-ant-test-0123456789abcdef";

fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/anthropic")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("JSON")
}

fn answer(status: u16, name: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(fixture(name))
}

async fn messages_api(
    script: impl Fn(usize, &Value) -> ResponseTemplate + Send + Sync + 'static,
) -> Api {
    Api::start_at("/v1/messages", script).await
}

/// `runner batch --runner anthropic` over in.csv / instr.md against `api`.
async fn run(sb: &Sandbox, api: &Api, flags: &[&str]) -> Run {
    let mut args = vec![
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
        "--format",
        "plain",
    ];
    args.extend_from_slice(flags);
    let mut cmd = sb.cmd(&args);
    cmd.env("ANTHROPIC_BASE_URL", api.server.uri())
        .env("ANTHROPIC_API_KEY", KEY);
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

/// Every request holds to the documented shape of a Messages API request.
fn assert_documented_shape(bodies: &[Value]) {
    let schema = fixture("messages-request.schema.json");
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
async fn the_report_comes_as_a_tool_call_held_to_the_schema_with_cache_tokens_and_cost() {
    let api = messages_api(|_, _| answer(200, "tool_use.json")).await;
    let sb = batch(&["a"]);
    sb.write("shot.png", b"\x89PNG\r\n\x1a\nrest-of-image");
    sb.write("in.csv", "id,path,shot\na,docs/a.md,shot.png\n");
    sb.write(
        "instr.md",
        "Count the headings of {path}:\n\n{file:path}\n\nScreenshot: {image:shot}\n",
    );
    sb.write(
        "schema.json",
        r#"{"type":"object","additionalProperties":false,"required":["headings"],"properties":{"headings":{"type":"integer"}}}"#,
    );
    let r = run(
        &sb,
        &api,
        &[
            "--output-schema",
            "schema.json",
            "--var",
            "input_usd_per_mtok=3",
            "--var",
            "output_usd_per_mtok=15",
            "--var",
            "max_tokens=2000",
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
    assert_eq!(row["session_id"], "msg_01XFDUDYJgAACzvnptvVoYEL");
    // Every input token counts, those read from the cache too: 120 + 1800.
    assert_eq!(row["input_tokens"], "1920");
    assert_eq!(row["output_tokens"], "60");
    // 120 × $3 + 1800 × $0.30 (a cache read is a tenth) + 60 × $15, per million.
    assert_eq!(row["cost_usd"].parse::<f64>().expect("cost"), 0.0018);
    let bodies = api.bodies();
    assert_eq!(bodies.len(), 1);
    assert_documented_shape(&bodies);
    let b = &bodies[0];
    assert_eq!(b["model"], "claude-test");
    assert_eq!(b["max_tokens"], 2000);
    assert_eq!(b["tool_choice"], json!({"type": "tool", "name": "report"}));
    assert_eq!(
        b["tools"][0]["input_schema"]["properties"]["output"]["required"],
        json!(["headings"])
    );
    // The part every item shares (the contract, the schema) is its own block, marked for
    // the prompt cache; the item's own part follows.
    let content = &b["messages"][0]["content"];
    let shared = content[0]["text"].as_str().unwrap_or("");
    assert!(shared.contains("\"headings\""), "{content}");
    assert!(!shared.contains("docs/a.md"), "{content}");
    assert_eq!(content[0]["cache_control"], json!({"type": "ephemeral"}));
    assert!(
        content[1]["text"]
            .as_str()
            .unwrap_or("")
            .contains("Count the headings of docs/a.md:\n\n# a\n"),
        "{content}"
    );
    assert_eq!(
        content[2],
        json!({"type": "text", "text": "Image `shot.png`:"})
    );
    assert_eq!(content[3]["type"], "image");
    assert_eq!(content[3]["source"]["media_type"], "image/png");
    assert_eq!(api.header(0, "x-api-key").as_deref(), Some(KEY));
    assert_eq!(
        api.header(0, "anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(api.header(0, "authorization"), None);
    let exchange = std::fs::read_to_string(row["log"].replace("stdout.log", "stderr.log"))
        .expect("exchange log");
    assert!(exchange.contains("POST http://127.0.0.1:"), "{exchange}");
    assert!(exchange.contains("/v1/messages"), "{exchange}");
    assert!(!exchange.contains(KEY), "the key is redacted: {exchange}");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(
        journal.contains("\"cached_input_tokens\":1800"),
        "{journal}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_and_a_529_are_waited_out_and_the_request_sent_again() {
    let api = messages_api(|n, _| match n {
        1 => answer(429, "rate_limit_error.json").insert_header("retry-after", "1"),
        2 => answer(529, "overloaded_error.json").insert_header("retry-after", "1"),
        _ => answer(200, "tool_use.json"),
    })
    .await;
    let sb = batch(&["a"]);
    let r = run(&sb, &api, &["--rate-limit-wait", "1m", "--retries", "0"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let row = &by_id(&sb.join("workers-output.csv"), "id")["a"];
    assert_eq!(row["status"], "completed", "{row:?}");
    assert_eq!(row["attempts"], "1", "refused requests are waits: {row:?}");
    let bodies = api.bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0], bodies[2], "sent again as it was");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(journal.contains("per-minute rate limit"), "{journal}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_529_that_never_clears_is_rate_limited_quoting_the_api() {
    let api = messages_api(|_, _| answer(529, "overloaded_error.json")).await;
    let sb = batch(&["a"]);
    let r = run(&sb, &api, &["--rate-limit-wait", "0s"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let row = &by_id(&sb.join("workers-output.csv"), "id")["a"];
    assert_eq!(row["failure_kind"], "rate_limited", "{row:?}");
    assert!(row["error"].contains("HTTP 529: Overloaded"), "{row:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_is_auth_and_billing_is_quota_each_stopping_the_team() {
    for (status, name, kind, words) in [
        (
            401,
            "authentication_error.json",
            "auth",
            "invalid x-api-key",
        ),
        (402, "billing_error.json", "quota", "billing issue"),
        (
            400,
            "credit_balance.json",
            "quota",
            "credit balance is too low",
        ),
    ] {
        let api = messages_api(move |_, _| answer(status, name)).await;
        let sb = batch(&["a", "b", "c", "d"]);
        let r = run(&sb, &api, &["--jobs", "1"]).await;
        assert_eq!(r.code, 1, "{name}: {r:?}");
        let rows = by_id(&sb.join("workers-output.csv"), "id");
        assert_eq!(rows["a"]["failure_kind"], kind, "{name}: {rows:?}");
        assert!(rows["a"]["error"].contains(words), "{name}: {rows:?}");
        // The team stopped: the other rows were never sent.
        assert_eq!(api.bodies().len(), 1, "{name}");
        assert_eq!(rows["d"]["status"], "skipped", "{name}: {rows:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_request_fails_the_item_with_the_apis_words() {
    let api = messages_api(|_, _| answer(400, "invalid_request_error.json")).await;
    let sb = batch(&["a"]);
    let r = run(&sb, &api, &[]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let row = &by_id(&sb.join("workers-output.csv"), "id")["a"];
    assert_eq!(row["status"], "failed", "{row:?}");
    // A prompt over the model's limit can never succeed as sent (issue 50).
    assert_eq!(row["failure_kind"], "input", "{row:?}");
    assert!(
        row["error"].contains("HTTP 400: prompt is too long: 210000 tokens"),
        "{row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_answer_is_read_as_today_and_a_cut_off_one_is_an_invalid_report() {
    let api = messages_api(|n, _| {
        let (text, stop) = match n {
            1 => (
                r#"{"status": "completed", "summary": "in text", "blocker": null, "output": {}}"#,
                "end_turn",
            ),
            _ => (r#"{"status": "comp"#, "max_tokens"),
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_text", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5}
        }))
    })
    .await;
    let sb = batch(&["a", "b"]);
    let r = run(&sb, &api, &["--jobs", "1"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed", "{rows:?}");
    assert_eq!(rows["a"]["summary"], "in text");
    assert_eq!(rows["b"]["failure_kind"], "invalid_report", "{rows:?}");
    assert!(rows["b"]["error"].contains("--var max_tokens"), "{rows:?}");
}
