//! The HTTP backend (`--runner openai`) against a scripted OpenAI chat-completions API served
//! by `wiremock` on 127.0.0.1: what a user sees in `workers-output.csv`, the exit code, the
//! logs and the requests the API received, for an answer with a schema and each failure
//! shape (schema violation, 429 with and without Retry-After, quota, 401, 500, a stall past
//! the time limit, a body that is not JSON, a refusal, a cut-off answer, Ctrl-C).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::harness::{Run, Sandbox, by_id};

const KEY: &str = "sk-test-0123456789abcdef";

/// What the scripted API answers to call number `n` (1-based) with request body `body`.
type Script = Arc<dyn Fn(usize, &Value) -> ResponseTemplate + Send + Sync>;

/// Every request the API received: its body and headers, in order.
type Calls = Arc<Mutex<Vec<(Value, Vec<(String, String)>)>>>;

/// A scripted API on 127.0.0.1 and the requests it received (also used by the Anthropic
/// tests, at its path).
pub(crate) struct Api {
    pub server: MockServer,
    calls: Calls,
}

struct Responder {
    script: Script,
    calls: Calls,
}

impl Respond for Responder {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let headers = req
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        let n = {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            calls.push((body.clone(), headers));
            calls.len()
        };
        (self.script)(n, &body)
    }
}

impl Api {
    async fn start(
        script: impl Fn(usize, &Value) -> ResponseTemplate + Send + Sync + 'static,
    ) -> Api {
        Api::start_at("/v1/chat/completions", script).await
    }

    /// The API answering POST `at` by `script`.
    pub(crate) async fn start_at(
        at: &str,
        script: impl Fn(usize, &Value) -> ResponseTemplate + Send + Sync + 'static,
    ) -> Api {
        let server = MockServer::start().await;
        let calls = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .and(path(at))
            .respond_with(Responder {
                script: Arc::new(script),
                calls: calls.clone(),
            })
            .mount(&server)
            .await;
        Api { server, calls }
    }

    fn base(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    pub(crate) fn bodies(&self) -> Vec<Value> {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls.iter().map(|(b, _)| b.clone()).collect()
    }

    pub(crate) fn header(&self, n: usize, name: &str) -> Option<String> {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls[n]
            .1
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
}

/// A `chat.completion` whose message content is `content`.
fn completion(content: &str, finish: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-test1",
        "object": "chat.completion",
        "created": 1764590000,
        "model": "gpt-test",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": null},
            "finish_reason": finish
        }],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}
    }))
}

/// The report a model answers for a row: `output` as given.
fn report(output: Value) -> String {
    json!({"status": "completed", "summary": "checked the row", "blocker": null, "output": output})
        .to_string()
}

/// OpenAI's error body.
fn error(status: u16, message: &str, kind: &str, code: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "error": {"message": message, "type": kind, "param": null, "code": code}
    }))
}

/// A batch of `rows` ids with a one-line instruction, in a fresh sandbox.
fn sandbox(rows: &[&str]) -> Sandbox {
    let sb = Sandbox::new();
    let mut csv = String::from("id,text\n");
    for r in rows {
        csv.push_str(&format!("{r},text of {r}\n"));
    }
    sb.write("in.csv", csv);
    sb.write("instr.md", "Say whether {text} is a greeting.\n");
    sb
}

/// `runner batch --runner openai` over in.csv against `api`, with `flags`.
async fn run(sb: &Sandbox, api: &Api, flags: &[&str]) -> Run {
    let mut cmd = openai_cmd(sb, api, flags);
    tokio::task::spawn_blocking(move || cmd.output().expect("spawn runner").into())
        .await
        .expect("join")
}

fn openai_cmd(sb: &Sandbox, api: &Api, flags: &[&str]) -> std::process::Command {
    let mut args = vec![
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--runner",
        "openai",
        "--model",
        "gpt-test",
        "--format",
        "plain",
        "--rate-limit-wait",
        "0s",
    ];
    args.extend_from_slice(flags);
    let mut cmd = sb.cmd(&args);
    cmd.env("OPENAI_BASE_URL", api.base())
        .env("OPENAI_API_KEY", KEY);
    cmd
}

fn rows(
    sb: &Sandbox,
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> {
    by_id(&sb.join("workers-output.csv"), "id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_with_a_schema_completes_with_tokens_cost_and_redacted_logs() {
    let api = Api::start(|_, body| {
        let greeting = body["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .contains("text of hi");
        completion(&report(json!({"greeting": greeting})), "stop")
    })
    .await;
    let sb = sandbox(&["hi", "bye"]);
    sb.write(
        "schema.json",
        r#"{"type":"object","additionalProperties":false,"required":["greeting"],"properties":{"greeting":{"type":"boolean"}}}"#,
    );
    let r = run(
        &sb,
        &api,
        &[
            "--output-schema",
            "schema.json",
            "--var",
            "input_usd_per_mtok=2",
            "--var",
            "output_usd_per_mtok=8",
            "--var",
            "body.temperature=0",
            "--var",
            "body.api_key=bodysecret-0123456789",
            "--var",
            "header.OpenAI-Organization=org-test",
            // The logs are read below.
            "--keep-logs",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let rows = rows(&sb);
    for id in ["hi", "bye"] {
        let row = &rows[id];
        assert_eq!(row["status"], "completed", "{row:?}");
        assert_eq!(row["input_tokens"], "1200");
        assert_eq!(row["output_tokens"], "300");
        // 1200 × $2/M + 300 × $8/M.
        assert_eq!(row["cost_usd"].parse::<f64>().expect("cost"), 0.0048);
        assert_eq!(row["session_id"], "chatcmpl-test1");
        assert_eq!(row["summary"], "checked the row");
    }
    // The schema's fields are columns.
    assert_eq!(rows["hi"]["greeting"], "true", "{:?}", rows["hi"]);
    assert_eq!(rows["bye"]["greeting"], "false", "{:?}", rows["bye"]);
    // The request: system message, the rendered prompt, strict structured output with the
    // report schema holding `output` to the user's schema, extra body field and header.
    let bodies = api.bodies();
    assert_eq!(bodies.len(), 2);
    let b = &bodies[0];
    assert_eq!(b["model"], "gpt-test");
    assert_eq!(b["messages"][0]["role"], "system");
    assert!(
        b["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .contains("is a greeting")
    );
    assert!(
        !b["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .contains("working-context"),
        "a model without tools is not asked to keep files"
    );
    assert_eq!(b["response_format"]["type"], "json_schema");
    assert_eq!(b["response_format"]["json_schema"]["strict"], true);
    assert_eq!(
        b["response_format"]["json_schema"]["schema"]["properties"]["output"]["required"],
        json!(["greeting"])
    );
    assert_eq!(b["temperature"], 0);
    assert_eq!(
        api.header(0, "openai-organization").as_deref(),
        Some("org-test")
    );
    assert_eq!(
        api.header(0, "authorization"),
        Some(format!("Bearer {KEY}"))
    );
    // The logs: the response body as received, the exchange with the key redacted.
    let log = &rows["hi"]["log"];
    let answer = std::fs::read_to_string(log).expect("stdout log");
    assert!(answer.contains("chatcmpl-test1"), "{answer}");
    let exchange = std::fs::read_to_string(log.replace("stdout.log", "stderr.log")).expect("log");
    assert!(exchange.contains("POST http://127.0.0.1:"), "{exchange}");
    assert!(exchange.contains("HTTP 200 OK"), "{exchange}");
    assert!(
        exchange.contains("authorization: Bearer sk-t…(redacted)"),
        "{exchange}"
    );
    // A body field named like a secret is sent as it is and logged redacted (issue 25).
    assert_eq!(
        api.bodies()[0]["api_key"].as_str(),
        Some("bodysecret-0123456789")
    );
    assert!(
        exchange.contains(r#""api_key":"body…(redacted)""#),
        "{exchange}"
    );
    let everything: String = walk(&sb.join("workers-output.runner"));
    assert!(
        !everything.contains("bodysecret-0123456789"),
        "a secret body field was written to the workspace"
    );
    assert!(
        !everything.contains(KEY),
        "the API key was written to the workspace"
    );
}

fn walk(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.push_str(&walk(&p));
        } else {
            out.push_str(&String::from_utf8_lossy(
                &std::fs::read(&p).unwrap_or_default(),
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_violating_the_schema_fails_naming_the_field() {
    let api = Api::start(|_, _| completion(&report(json!({"greeting": "yes"})), "stop")).await;
    let sb = sandbox(&["hi"]);
    sb.write(
        "schema.json",
        r#"{"type":"object","required":["greeting"],"properties":{"greeting":{"type":"boolean"}}}"#,
    );
    let r = run(&sb, &api, &["--output-schema", "schema.json"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let row = &rows(&sb)["hi"];
    assert_eq!(row["status"], "failed");
    assert_eq!(row["failure_kind"], "invalid_report");
    assert!(row["error"].contains("greeting"), "{row:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_with_retry_after_pauses_then_completes_without_using_a_retry() {
    let api = Api::start(|n, _| match n {
        1 => error(
            429,
            "Rate limit reached for gpt-test on requests per min (RPM): Limit 3.",
            "requests",
            "rate_limit_exceeded",
        )
        .insert_header("retry-after", "1"),
        _ => completion(&report(json!({})), "stop"),
    })
    .await;
    let sb = sandbox(&["hi"]);
    let r = run(&sb, &api, &["--rate-limit-wait", "1m", "--retries", "0"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let row = &rows(&sb)["hi"];
    assert_eq!(row["status"], "completed");
    assert_eq!(
        row["attempts"], "1",
        "a refused request is a wait, not an attempt"
    );
    assert_eq!(api.bodies().len(), 2);
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(
        journal.contains("\"team_paused\"") && journal.contains("Rate limit reached"),
        "{journal}"
    );
}

/// Issue 32: the model never saw a request refused with 429, so it is sent again as it was
/// — not as a "previous attempt failed" retry. A stand-in that answers only a request it
/// has seen before (as a provider's prompt cache favours) completes every row after one
/// 429 each; `attempts` counts executions (1), the wait is counted on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_is_sent_again_identical_and_counts_as_a_wait_not_an_attempt() {
    let seen = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let api = Api::start(move |_, body| {
        let first = seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(body.to_string());
        if first {
            error(
                429,
                "Rate limit reached for gpt-test.",
                "requests",
                "rate_limit_exceeded",
            )
            .insert_header("retry-after-ms", "200")
        } else {
            completion(&report(json!({})), "stop")
        }
    })
    .await;
    let sb = sandbox(&["hi", "bye"]);
    let r = run(&sb, &api, &["--rate-limit-wait", "10s", "--retries", "0"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let rows = rows(&sb);
    for id in ["hi", "bye"] {
        assert_eq!(rows[id]["status"], "completed", "{:?}", rows[id]);
        assert_eq!(rows[id]["attempts"], "1", "{:?}", rows[id]);
    }
    let bodies = api.bodies();
    assert_eq!(bodies.len(), 4, "one 429 and one answer per row");
    for id in ["hi", "bye"] {
        let sent: Vec<&Value> = bodies
            .iter()
            .filter(|b| b.to_string().contains(&format!("text of {id}")))
            .collect();
        assert_eq!(sent.len(), 2, "{id}");
        assert_eq!(sent[0], sent[1], "{id}: the same request again");
    }
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert_eq!(journal.matches("\"refused\":true").count(), 2, "{journal}");
    assert_eq!(
        journal.matches("\"rate_limit_waits\":1").count(),
        2,
        "{journal}"
    );
    let show = sb.run(&["show", "1"]);
    assert!(
        show.stdout
            .contains("completed after 1 attempt(s) and 1 rate-limit wait(s)")
            && show.stdout.contains("refused")
            && show
                .stdout
                .contains("(a rate-limit wait, sent again as it was)"),
        "{show:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_without_retry_after_is_rate_limited_quoting_the_api() {
    let api = Api::start(|_, _| {
        error(
            429,
            "Rate limit reached for gpt-test on tokens per min (TPM).",
            "tokens",
            "rate_limit_exceeded",
        )
    })
    .await;
    let sb = sandbox(&["hi"]);
    let r = run(&sb, &api, &[]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let row = &rows(&sb)["hi"];
    assert_eq!(row["status"], "failed");
    assert_eq!(row["failure_kind"], "rate_limited");
    assert!(
        row["error"].contains("HTTP 429: Rate limit reached for gpt-test"),
        "{row:?}"
    );
}

/// OpenRouter passes a provider's rate limit on as HTTP 200 carrying `{"error": {"code":
/// 429, …}}`: a rate limit (the team pauses, the request is sent again without using a
/// retry), not an invalid report (issue 56).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_429_inside_an_http_200_is_a_rate_limit() {
    let api = Api::start(|n, _| match n {
        1 => ResponseTemplate::new(200).set_body_json(json!({
            "error": {
                "code": 429,
                "message": "Rate limit exceeded: free-models-per-min.",
                "metadata": {"headers": {"X-RateLimit-Limit": "20"}, "provider_name": null}
            },
            "user_id": "user_e2e"
        })),
        _ => completion(&report(json!({})), "stop"),
    })
    .await;
    let sb = sandbox(&["hi"]);
    let r = run(&sb, &api, &["--rate-limit-wait", "1m", "--retries", "0"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let row = &rows(&sb)["hi"];
    assert_eq!(
        (row["status"].as_str(), row["attempts"].as_str()),
        ("completed", "1"),
        "{row:?}"
    );
    assert_eq!(api.bodies().len(), 2);
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(
        journal.contains("\"team_paused\"")
            && journal
                .contains("HTTP 200 carrying error 429: Rate limit exceeded: free-models-per-min")
            && journal.contains("\"rate_limited\""),
        "{journal}"
    );
}

/// Issue 50: OpenAI answers a request over the per-minute token limit with a 429 that no wait
/// can cure. That row fails at once as `input` (not retried); the team neither pauses nor
/// shrinks, and the other row completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_too_large_429_fails_that_row_as_input_without_pausing_the_team() {
    let api = Api::start(|_, body| {
        if body.to_string().contains("text of big") {
            error(
                429,
                "Request too large for gpt-test in organization org-test on tokens per min (TPM): Limit 30000, Requested 45000. The input or output tokens must be reduced in order to run successfully.",
                "tokens",
                "rate_limit_exceeded",
            )
            .insert_header("retry-after", "1")
        } else {
            completion(&report(json!({})), "stop")
        }
    })
    .await;
    let sb = sandbox(&["big", "ok"]);
    let flags = ["-j", "2", "--rate-limit-wait", "3s", "--retries", "2"];
    let r = run(&sb, &api, &flags).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = rows(&sb);
    assert_eq!(rows["big"]["status"], "failed", "{rows:?}");
    assert_eq!(rows["big"]["failure_kind"], "input", "{rows:?}");
    assert_eq!(rows["big"]["attempts"], "1", "{rows:?}");
    assert!(
        rows["big"]["error"].contains("HTTP 429: Request too large for gpt-test")
            && rows["big"]["error"].contains("shorten the item's input"),
        "{rows:?}"
    );
    assert_eq!(rows["ok"]["status"], "completed", "{rows:?}");
    let big = api
        .bodies()
        .iter()
        .filter(|b| b.to_string().contains("text of big"))
        .count();
    assert_eq!(big, 1, "sent once, never waited on");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(!journal.contains("\"team_paused\""), "{journal}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_with_retry_after_is_a_rate_limit_and_without_it_an_api_error() {
    let api = Api::start(|n, _| match n {
        1 => ResponseTemplate::new(503)
            .insert_header("retry-after", "1")
            .set_body_string("overloaded"),
        2 => completion(&report(json!({})), "stop"),
        _ => ResponseTemplate::new(503).set_body_string("Service Unavailable"),
    })
    .await;
    let sb = sandbox(&["a", "b"]);
    let r = run(&sb, &api, &["-j", "1", "--rate-limit-wait", "1m"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = rows(&sb);
    assert_eq!(rows["a"]["status"], "completed", "{rows:?}");
    assert_eq!(rows["b"]["failure_kind"], "api_error");
    assert!(
        rows["b"]["error"].contains("HTTP 503: Service Unavailable"),
        "{rows:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_quota_stops_the_team() {
    let api = Api::start(|_, _| {
        error(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        )
    })
    .await;
    let sb = sandbox(&["a", "b", "c"]);
    let r = run(&sb, &api, &["-j", "1"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = rows(&sb);
    assert_eq!(rows["a"]["failure_kind"], "quota");
    assert!(rows["a"]["error"].contains("exceeded your current quota"));
    for id in ["b", "c"] {
        assert_eq!(rows[id]["status"], "skipped", "{rows:?}");
    }
    assert_eq!(api.bodies().len(), 1, "no request after the quota ran out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_is_auth_and_stops_the_team_after_one_request() {
    let api = Api::start(|_, _| {
        error(
            401,
            &format!("Incorrect API key provided: {KEY}."),
            "invalid_request_error",
            "invalid_api_key",
        )
    })
    .await;
    let sb = sandbox(&["a", "b", "c"]);
    let r = run(&sb, &api, &["-j", "1"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = rows(&sb);
    assert_eq!(rows["a"]["failure_kind"], "auth");
    assert!(
        rows["a"]["error"].contains("HTTP 401: Incorrect API key provided: sk-t…(redacted)"),
        "{rows:?}"
    );
    // The API echoed the whole key; the runner wrote it nowhere.
    let everything = walk(sb.path());
    assert!(!everything.contains(KEY), "the echoed key reached a file");
    for id in ["b", "c"] {
        assert_eq!(rows[id]["status"], "skipped", "{rows:?}");
    }
    assert_eq!(api.bodies().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_is_an_api_error_and_is_retried() {
    let api = Api::start(|n, _| match n {
        1 => error(
            500,
            "The server had an error while processing your request.",
            "server_error",
            "server_error",
        ),
        _ => completion(&report(json!({})), "stop"),
    })
    .await;
    let sb = sandbox(&["a"]);
    let r = run(&sb, &api, &["--retries", "1", "--retry-delay", "10ms"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(rows(&sb)["a"]["attempts"], "2");
    let first = sb.read("workers-output.runner/journal.jsonl");
    assert!(
        first.contains("HTTP 500: The server had an error") && first.contains("\"api_error\""),
        "{first}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_api_times_out_and_the_request_is_dropped() {
    let api = Api::start(|_, _| {
        completion(&report(json!({})), "stop").set_delay(Duration::from_secs(120))
    })
    .await;
    let sb = sandbox(&["a"]);
    let r = run(&sb, &api, &["--timeout", "1s"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let row = &rows(&sb)["a"];
    assert_eq!(row["status"], "timed_out", "{row:?}");
    assert_eq!(row["failure_kind"], "timed_out");
    assert!(row["error"].contains("timed out after 1s"), "{row:?}");
    // No answer, so no stdout log: `runner logs` shows the exchange instead.
    let logs = sb.run(&["logs", "1"]);
    assert_eq!(logs.code, 0, "{logs:?}");
    assert!(
        logs.stdout.contains("POST http://127.0.0.1:")
            && logs.stdout.contains("(no answer: time limit reached"),
        "{logs:?}"
    );
    let beyond = sb.run(&["logs", "1", "--attempt", "9"]);
    assert_eq!(beyond.code, 2);
    assert!(
        beyond.stderr.contains("has 1 attempt; give --attempt 1"),
        "{beyond:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_json_and_an_answer_without_a_report_fail_by_name() {
    let api = Api::start(|_, body| {
        if body["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .contains("text of a")
        {
            ResponseTemplate::new(200).set_body_string("<html>gateway</html>")
        } else {
            completion("I think it is a greeting.", "stop")
        }
    })
    .await;
    let sb = sandbox(&["a", "b"]);
    let r = run(&sb, &api, &[]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = rows(&sb);
    assert_eq!(rows["a"]["failure_kind"], "api_error", "{rows:?}");
    assert!(rows["a"]["error"].contains("not JSON: gateway"), "{rows:?}");
    assert_eq!(rows["b"]["failure_kind"], "no_report", "{rows:?}");
    assert!(
        rows["b"]["error"].contains("the answer holds no JSON object: I think it is a greeting."),
        "{rows:?}"
    );
}

/// A proxy's error page (nginx's 502) instead of the API's JSON: the reason gives the page's
/// title, not its first tag (issue 56).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_error_page_gives_its_title_as_the_reason() {
    let api = Api::start(|_, _| {
        ResponseTemplate::new(502).set_body_raw(
            "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n\
             <center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n\
             </body>\r\n</html>\r\n",
            "text/html",
        )
    })
    .await;
    let sb = sandbox(&["a"]);
    let r = run(&sb, &api, &[]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let row = &rows(&sb)["a"];
    assert_eq!(row["failure_kind"], "api_error", "{row:?}");
    assert!(
        row["error"].starts_with("HTTP 502: 502 Bad Gateway") && !row["error"].contains('<'),
        "{row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_and_a_cut_off_answer_are_invalid_reports() {
    let api = Api::start(|_, body| {
        if body["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .contains("text of a")
        {
            ResponseTemplate::new(200).set_body_json(json!({
                "id": "chatcmpl-r",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                    "refusal": "I can't help with that request."}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5}
            }))
        } else {
            completion("{\"status\": \"completed\", \"summ", "length")
        }
    })
    .await;
    let sb = sandbox(&["a", "b"]);
    let r = run(&sb, &api, &[]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = rows(&sb);
    assert_eq!(rows["a"]["failure_kind"], "invalid_report");
    assert!(
        rows["a"]["error"].contains("the model refused: I can't help"),
        "{rows:?}"
    );
    assert_eq!(rows["b"]["failure_kind"], "invalid_report");
    assert!(
        rows["b"]["error"].contains("finish_reason: length"),
        "{rows:?}"
    );
    assert_eq!(
        rows["b"]["output_tokens"], "300",
        "tokens are kept on a failed answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_requests_cancels_them_and_writes_the_outputs() {
    let api = Api::start(|_, _| {
        completion(&report(json!({})), "stop").set_delay(Duration::from_secs(120))
    })
    .await;
    let sb = sandbox(&["a", "b", "c", "d"]);
    let mut cmd = openai_cmd(&sb, &api, &["-j", "2"]);
    let child = cmd.spawn().expect("spawn runner");
    let pid = child.id();
    // Both slots have a request in flight.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while api.bodies().len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(api.bodies().len(), 2, "two requests in flight");
    // `runner status` meanwhile: two running, and no checkpoint talk for a teammate that
    // only answers.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        let st = sb.run(&["status"]);
        if st.stdout.contains("2 running") || std::time::Instant::now() > deadline {
            break st;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.stdout.contains("2 running"), "{status:?}");
    assert!(!status.stdout.contains("checkpoint"), "{status:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let out: Run =
        tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait").into())
            .await
            .expect("join");
    assert_eq!(out.code, 130, "{out:?}");
    let rows = rows(&sb);
    assert_eq!(rows.len(), 4, "{rows:?}");
    for (id, row) in &rows {
        assert_eq!(row["status"], "cancelled", "{id}: {row:?}");
    }
    assert_eq!(
        api.bodies().len(),
        2,
        "nothing was sent after the interrupt"
    );
    assert!(sb.survivors_after(2.0).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_url_without_its_version_gets_a_hint_and_an_authorization_header_replaces_the_keys()
{
    let api = Api::start(|_, _| completion(&report(json!({})), "stop")).await;
    let sb = sandbox(&["a"]);
    let bare = api.server.uri();
    let r = run(&sb, &api, &["--var", &format!("base_url={bare}")]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let row = &rows(&sb)["a"];
    assert_eq!(row["failure_kind"], "api_error");
    assert!(
        row["error"].contains("HTTP 404")
            && row["error"].contains("must end with the API's version"),
        "{row:?}"
    );
    let sb = sandbox(&["a"]);
    let r = run(
        &sb,
        &api,
        &["--var", "header.Authorization=Bearer other-token-123456"],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let calls = api.calls.lock().unwrap_or_else(|e| e.into_inner());
    let auth: Vec<&String> = calls[0]
        .1
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        auth,
        vec!["Bearer other-token-123456"],
        "one Authorization header"
    );
}

/// `runner batch --runner openai EXTRA` over in.csv with no key, the base URL `base`
/// (`None`: the default, hosted one) — for what is decided before or without a server.
fn offline(sb: &Sandbox, base: Option<&str>, extra: &[&str]) -> Run {
    let mut args = vec![
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--runner",
        "openai",
        "--format",
        "plain",
    ];
    args.extend_from_slice(extra);
    let mut cmd = sb.cmd(&args);
    cmd.env_remove("OPENAI_API_KEY");
    match base {
        Some(b) => cmd.env("OPENAI_BASE_URL", b),
        None => cmd.env_remove("OPENAI_BASE_URL"),
    };
    cmd.output().expect("spawn").into()
}

/// A base URL where nothing listens.
const NOBODY: Option<&str> = Some("http://127.0.0.1:9/v1");

#[test]
fn dry_run_shows_where_requests_go_with_headers_body_fields_and_prices() {
    let sb = sandbox(&["a"]);
    let r = offline(
        &sb,
        NOBODY,
        &[
            "--model",
            "m",
            "--dry-run",
            "--var",
            "body.temperature=0",
            "--var",
            "body.client_secret=bodysecret-0123456789",
            "--var",
            "header.X-Api-Key=abcdefghijklmnopqrstuvwxyz",
            "--var",
            "input_usd_per_mtok=0.4",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    for want in [
        "Request (each item): POST http://127.0.0.1:9/v1/chat/completions",
        "body fields: {\"client_secret\":\"body…(redacted)\",\"temperature\":0}",
        "x-api-key: abcd…(redacted)",
        "prices: $0.4 / $0 per million",
    ] {
        assert!(r.stdout.contains(want), "{want}: {r:?}");
    }
    assert!(!r.stdout.contains("abcdefghijklmnop") && !r.stdout.contains("bodysecret"));

    // Nothing to confine: the HTTP backend starts no process, whatever --sandbox asks, and
    // the workspace beside the input is no reason to refuse.
    let r = offline(
        &sb,
        NOBODY,
        &["--model", "m", "--dry-run", "--sandbox", "landlock"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(
            "Sandbox: none (no process to confine: the HTTP backend sends the requests itself)"
        ),
        "{r:?}"
    );

    // Issue 25: a base URL's password and key stay hidden, and its query survives the join.
    let r = offline(
        &sb,
        Some("http://bob:hunter2@127.0.0.1:9/v1?api_key=sk-secret&x=1"),
        &["--model", "m", "--dry-run"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(
            "POST http://bob:REDACTED@127.0.0.1:9/v1/chat/completions?api_key=REDACTED&x=1"
        ),
        "{r:?}"
    );
    assert!(
        !r.stdout.contains("hunter2") && !r.stdout.contains("sk-secret"),
        "{r:?}"
    );
}

#[test]
fn a_missing_key_model_or_bad_var_is_refused_before_anything_is_written() {
    let sb = sandbox(&["a"]);
    let before = sb.tree();
    // The default (hosted) API and no key: exit 3, naming the variable.
    let r = offline(&sb, None, &["--model", "m"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("OPENAI_API_KEY is not set"), "{r:?}");
    for (extra, want) in [
        (&[][..], "--model"),
        (&["--var", "strcit=false"][..], "did you mean `strict`"),
        (
            &["--var", "temperature=0"][..],
            "write `--var body.temperature=…`",
        ),
        (&["--var", "base_url=localhost:8080"][..], "http://"),
        // Body fields the backend sets itself.
        (&["--var", "body.model=x"][..], "the model is --model"),
        (
            &["--var", "body.messages=1"][..],
            "the messages are the prompt",
        ),
        (&["--var", "body.=x"][..], "needs a name"),
    ] {
        let with_model: Vec<&str> = match extra.is_empty() {
            true => vec![],
            false => [&["--model", "m"][..], extra].concat(),
        };
        let r = offline(&sb, NOBODY, &with_model);
        assert_eq!(r.code, 2, "{extra:?}: {r:?}");
        assert!(r.stderr.contains(want), "{extra:?}: {r:?}");
    }
    assert_eq!(sb.tree(), before, "nothing on disk changed");
}

#[test]
fn an_unreachable_server_is_a_setup_failure_naming_the_url() {
    let sb = sandbox(&["a"]);
    let r = offline(&sb, NOBODY, &["--model", "m"]);
    assert_eq!(r.code, 1, "{r:?}");
    let row = &rows(&sb)["a"];
    assert_eq!(row["failure_kind"], "setup");
    assert!(
        row["error"].contains("no answer from http://127.0.0.1:9/v1/chat/completions")
            && row["error"].contains("Connection refused"),
        "{row:?}"
    );
    assert!(
        std::path::Path::new(&row["log"]).is_file(),
        "the log column names a file: {row:?}"
    );
}

#[test]
fn the_bundled_http_example_audits_every_file_through_the_standin() {
    let sb = Sandbox::new();
    let out = sb.join("out.csv");
    let root = env!("CARGO_MANIFEST_DIR");
    let mut cmd = std::process::Command::new("python3");
    cmd.current_dir(root)
        .env_remove("OPENAI_API_KEY")
        .env("HOME", sb.join("home"))
        .env("NO_COLOR", "1")
        .args([
            "examples/audit/model_standin.py",
            "--",
            env!("CARGO_BIN_EXE_runner"),
        ])
        .args([
            "batch",
            "examples/audit/BATCH-http.md",
            "--format",
            "plain",
            "-o",
        ])
        .arg(&out);
    let r: Run = cmd.output().expect("spawn python3").into();
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&out, "path");
    let input =
        std::fs::read_to_string(format!("{root}/examples/audit/workers-input.csv")).expect("input");
    assert_eq!(rows.len(), input.lines().count() - 1, "{rows:?}");
    for (path, row) in &rows {
        assert_eq!(row["status"], "completed", "{path}: {row:?}");
        assert!(
            row["session_id"].starts_with("chatcmpl-standin-"),
            "{row:?}"
        );
    }
    assert_eq!(rows["README.md"]["has_title"], "true");
    assert_eq!(rows["examples/audit/BATCH.md"]["frontmatter"], "valid");
    // The stand-in reads no file: what it tells comes from the text the runner put into
    // the prompt (`{file:path}`, relative to `file_root`).
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README");
    assert_eq!(
        rows["README.md"]["lines"],
        readme.lines().count().to_string()
    );
    assert!(
        rows["README.md"]["relative_links"].contains("\"docs/runners.md\""),
        "{:?}",
        rows["README.md"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_in_the_environment_is_not_used_for_a_server_on_this_machine() {
    let api = Api::start(|_, _| completion(&report(json!({})), "stop")).await;
    let sb = sandbox(&["a"]);
    let mut cmd = openai_cmd(&sb, &api, &[]);
    // A proxy that refuses every connection: requests to 127.0.0.1 must not go through it.
    cmd.env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("ALL_PROXY", "http://127.0.0.1:9");
    let r: Run = tokio::task::spawn_blocking(move || cmd.output().expect("spawn").into())
        .await
        .expect("join");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(api.bodies().len(), 1);
}

/// `{file:…}` and `{image:…}` with the HTTP backend: the file's text is in the user message,
/// the image goes as an `image_url` content part with a base64 data URL (named by a text
/// part), the exchange log does not hold the image's base64; a row whose file is binary
/// never reaches the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_and_images_go_into_the_request_and_a_binary_file_never_reaches_the_api() {
    let api = Api::start(|_, _| completion(&report(json!({})), "stop")).await;
    let sb = Sandbox::new();
    let png: Vec<u8> = b"\x89PNG\r\n\x1a\n"
        .iter()
        .copied()
        .chain(std::iter::repeat_n(7u8, 4000))
        .collect();
    sb.write("docs/a.md", "# A\ncaf\u{e9}\n");
    sb.write("docs/b.bin", b"\x00\x01");
    sb.write("shot.png", &png);
    sb.write(
        "in.csv",
        "id,path,shot\na,docs/a.md,shot.png\nb,docs/b.bin,shot.png\n",
    );
    sb.write(
        "instr.md",
        "Audit {path}:\n{file:path}\nScreenshot: {image:shot}\n",
    );
    let r = run(&sb, &api, &["--id-column", "id", "--keep-logs"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    let rows = rows(&sb);
    assert_eq!(rows["a"]["status"], "completed", "{:?}", rows["a"]);
    assert_eq!(rows["b"]["failure_kind"], "input", "{:?}", rows["b"]);
    let bodies = api.bodies();
    assert_eq!(bodies.len(), 1, "only row a was sent: {bodies:?}");
    let content = &bodies[0]["messages"][1]["content"];
    let text = content[0]["text"].as_str().unwrap_or("");
    assert_eq!(content[0]["type"], "text");
    assert!(text.contains("Audit docs/a.md:\n# A\ncafé\n"), "{text}");
    assert!(
        text.contains("Screenshot: `shot.png` (image attached)"),
        "{text}"
    );
    assert_eq!(
        content[1],
        json!({"type": "text", "text": "Image `shot.png`:"})
    );
    assert_eq!(content[2]["type"], "image_url");
    let url = content[2]["image_url"]["url"].as_str().unwrap_or("");
    let data = url
        .strip_prefix("data:image/png;base64,")
        .unwrap_or_else(|| panic!("a PNG data URL: {}", &url[..url.len().min(60)]));
    assert_eq!(
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, data).ok(),
        Some(png)
    );
    let exchange = std::fs::read_to_string(rows["a"]["log"].replace("stdout.log", "stderr.log"))
        .expect("exchange log");
    assert!(exchange.contains("bytes of base64)"), "{exchange}");
    assert!(
        !exchange.contains(&data[..200]),
        "the log holds no image data"
    );
}

/// Prompt caching: a provider caches a prompt's start, so every item's prompt begins with
/// what all items share — the report contract, then the instruction up to the row's first
/// value — and its own parts come last; the API's `prompt_tokens_details.cached_tokens` is
/// reported (the events, `runner show`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_share_their_start_for_the_prompt_cache_and_cached_tokens_are_reported() {
    let api = Api::start(|n, _| {
        ResponseTemplate::new(200).set_body_json(json!({
            "id": format!("chatcmpl-{n}"),
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": report(json!({}))}}],
            "usage": {"prompt_tokens": 1500, "completion_tokens": 20,
                      "prompt_tokens_details": {"cached_tokens": 1280}}
        }))
    })
    .await;
    let sb = sandbox(&["hi", "bye"]);
    let r = run(&sb, &api, &["--id-column", "id", "--jobs", "1"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let bodies = api.bodies();
    let user = |n: usize| {
        bodies[n]["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    let (a, b) = (user(0), user(1));
    let shared: String = a
        .chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect();
    assert!(
        shared.contains("## Answer with your report") && shared.ends_with("Say whether text of "),
        "the prompts share only: {shared:?}"
    );
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(
        journal.contains("\"cached_input_tokens\":1280"),
        "{journal}"
    );
    let show = sb.run(&["show", "hi", "workers-output.runner"]);
    assert!(
        show.stdout.contains("tokens in 1500 (1280 cached), out 20"),
        "{show:?}"
    );
}

/// Issue 33: a row chooses its own model (`model_column`); the request for that row names
/// it, and the output records the model that answered — the API's own word, which may not
/// be the one asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_chooses_its_model_and_the_output_records_the_model_that_answered() {
    let api = Api::start(|_, body| {
        let asked = body["model"].as_str().unwrap_or_default().to_owned();
        // The API resolves an alias to a dated model, as providers do.
        let answered = match asked.as_str() {
            "cheap" => "cheap-2026-10-01".to_string(),
            other => other.to_string(),
        };
        let mut r: Value = json!({
            "id": "chatcmpl-m", "object": "chat.completion", "created": 1, "model": answered,
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": report(json!({"ok": true}))}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}
        });
        r["system_fingerprint"] = Value::Null;
        ResponseTemplate::new(200).set_body_json(r)
    })
    .await;
    let sb = Sandbox::new();
    sb.write("in.csv", "id,text,tier\na,easy,cheap\nb,hard,\n");
    sb.write(
        "BATCH.md",
        "---\ninput: in.csv\nid_column: id\nmodel_column: tier\n---\nSay whether {text} is a greeting.\n",
    );
    let mut cmd = sb.cmd(&[
        "batch", "BATCH.md", "--runner", "openai", "--model", "gpt-test", "--format", "plain",
    ]);
    cmd.env("OPENAI_BASE_URL", api.base())
        .env("OPENAI_API_KEY", KEY);
    let r: Run = tokio::task::spawn_blocking(move || cmd.output().expect("runner").into())
        .await
        .expect("join");
    assert_eq!(r.code, 0, "{r:?}");
    let calls = api.calls.lock().map(|c| c.clone()).unwrap_or_default();
    let mut asked: Vec<String> = calls
        .iter()
        .map(|(b, _)| b["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        ["cheap", "gpt-test"],
        "an empty cell keeps the batch's model"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        rows["a"]["model"], "cheap-2026-10-01",
        "the model that answered"
    );
    assert_eq!(rows["b"]["model"], "gpt-test");
    // A row naming a runner that does not exist is refused before anything runs.
    sb.write("in.csv", "id,text,tier,agent\na,easy,cheap,nope-cli\n");
    sb.write(
        "BATCH.md",
        "---\ninput: in.csv\nid_column: id\nrunner_column: agent\n---\nSay whether {text} is a greeting.\n",
    );
    let r: Run = sb
        .cmd(&[
            "batch", "BATCH.md", "--runner", "openai", "--model", "m", "-o", "o2.csv",
        ])
        .env("OPENAI_BASE_URL", api.base())
        .env("OPENAI_API_KEY", KEY)
        .output()
        .expect("runner")
        .into();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("row a") && r.stderr.contains("nope-cli"),
        "{r:?}"
    );
    assert!(!sb.join("o2.csv").exists());
}
