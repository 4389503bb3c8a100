//! `--runner openai --batch-api` against a scripted OpenAI Files + Batches API on 127.0.0.1
//! (the shapes of the API reference's "Batch" and "Files" pages; never a real call): one
//! upload and one job for the rows, each row's line judged as a direct answer (partial
//! failures in the output and error files), a `kill -9` while polling and the same command
//! picking up the same job (no second upload, no second job), Ctrl-C leaving the job
//! running and saying how to resume, `--only failed` sending only the failed rows, and a
//! two-stage BATCH.md as one job per stage.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::harness::{Run, Sandbox, by_id};

/// What the stand-in answers a row (by its `custom_id`): a status code, or an error line.
#[derive(Clone)]
enum RowAnswer {
    Report,
    Status(u16, &'static str),
    ErrorLine(&'static str),
}

#[derive(Default)]
struct Remote {
    /// Uploaded files: id → their JSONL lines.
    files: HashMap<String, Vec<Value>>,
    /// Jobs: id → input file id.
    jobs: HashMap<String, String>,
    uploads: usize,
    creates: usize,
    lists: usize,
    polls: usize,
    /// Jobs answer `completed` only when this is set.
    release: bool,
    answers: HashMap<String, RowAnswer>,
}

#[derive(Clone)]
struct StandIn(Arc<Mutex<Remote>>);

impl StandIn {
    fn with<T>(&self, f: impl FnOnce(&mut Remote) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn completion(summary: &str) -> Value {
    json!({
        "id": "chatcmpl-batch", "object": "chat.completion", "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": json!({"status": "completed", "summary": summary, "blocker": null,
                              "output": {}}).to_string()}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10}
    })
}

impl Respond for StandIn {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let path = req.url.path().to_owned();
        let post = req.method.as_str() == "POST";
        self.with(|r| {
            if post && path == "/v1/files" {
                // The multipart body: the JSONL lines are the ones that parse as JSON.
                let text = String::from_utf8_lossy(&req.body);
                let lines: Vec<Value> = text
                    .lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .filter(|v| v.get("custom_id").is_some())
                    .collect();
                assert!(text.contains("name=\"purpose\"") && text.contains("batch"));
                r.uploads += 1;
                let id = format!("file-in-{}", r.uploads);
                r.files.insert(id.clone(), lines);
                return ResponseTemplate::new(200).set_body_json(
                    json!({"id": id, "object": "file", "purpose": "batch", "bytes": req.body.len()}),
                );
            }
            if post && path == "/v1/batches" {
                let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                assert_eq!(body["endpoint"], "/v1/chat/completions");
                assert_eq!(body["completion_window"], "24h");
                r.creates += 1;
                let id = format!("batch_{}", r.creates);
                r.jobs
                    .insert(id.clone(), body["input_file_id"].as_str().unwrap_or("").into());
                return ResponseTemplate::new(200)
                    .set_body_json(json!({"id": id, "object": "batch", "status": "validating"}));
            }
            if !post && path == "/v1/batches" {
                // "List batch": newest first; one page here.
                r.lists += 1;
                let mut data: Vec<(&String, &String)> = r.jobs.iter().collect();
                data.sort_by(|a, b| b.0.cmp(a.0));
                let data: Vec<Value> = data
                    .into_iter()
                    .map(|(id, file)| {
                        json!({"id": id, "object": "batch", "input_file_id": file,
                               "status": "in_progress"})
                    })
                    .collect();
                return ResponseTemplate::new(200)
                    .set_body_json(json!({"object": "list", "data": data, "has_more": false}));
            }
            if let Some(id) = path.strip_prefix("/v1/batches/") {
                r.polls += 1;
                let Some(file) = r.jobs.get(id).cloned() else {
                    return ResponseTemplate::new(404)
                        .set_body_json(json!({"error": {"message": "no such batch"}}));
                };
                let total = r.files.get(&file).map_or(0, Vec::len);
                let done = r.release;
                return ResponseTemplate::new(200).set_body_json(json!({
                    "id": id, "object": "batch", "endpoint": "/v1/chat/completions",
                    "input_file_id": file,
                    "status": if done { "completed" } else { "in_progress" },
                    "output_file_id": if done { json!(format!("out-{id}")) } else { Value::Null },
                    "error_file_id": if done { json!(format!("err-{id}")) } else { Value::Null },
                    "request_counts": {"total": total, "completed": if done { total } else { 0 }, "failed": 0}
                }));
            }
            if let Some(rest) = path.strip_prefix("/v1/files/") {
                let (kind, job) = match rest.strip_suffix("/content") {
                    Some(f) if f.starts_with("out-") => ("out", &f[4..]),
                    Some(f) if f.starts_with("err-") => ("err", &f[4..]),
                    _ => return ResponseTemplate::new(404),
                };
                let file = r.jobs.get(job).cloned().unwrap_or_default();
                let mut out = String::new();
                for line in r.files.get(&file).cloned().unwrap_or_default() {
                    let id = line["custom_id"].as_str().unwrap_or("").to_owned();
                    let answer = r.answers.get(&id).cloned().unwrap_or(RowAnswer::Report);
                    let entry = match (kind, answer) {
                        ("out", RowAnswer::Report) => json!({"id": "batch_req_1", "custom_id": id,
                            "response": {"status_code": 200, "request_id": "req_1",
                                         "body": completion(&format!("answered {id}"))},
                            "error": null}),
                        ("out", RowAnswer::Status(code, message)) => json!({"id": "batch_req_2",
                            "custom_id": id, "response": {"status_code": code,
                            "body": {"error": {"message": message, "type": "server_error"}}},
                            "error": null}),
                        ("err", RowAnswer::ErrorLine(message)) => json!({"id": "batch_req_3",
                            "custom_id": id, "response": null,
                            "error": {"code": "invalid_request", "message": message}}),
                        _ => continue,
                    };
                    out.push_str(&entry.to_string());
                    out.push('\n');
                }
                return ResponseTemplate::new(200).set_body_string(out);
            }
            ResponseTemplate::new(404).set_body_json(json!({"error": {"message": path}}))
        })
    }
}

async fn stand_in(release: bool) -> (MockServer, StandIn) {
    let server = MockServer::start().await;
    let s = StandIn(Arc::new(Mutex::new(Remote {
        release,
        ..Remote::default()
    })));
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

fn cmd(sb: &Sandbox, server: &MockServer, extra: &[&str]) -> std::process::Command {
    let mut args = vec![
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--id-column",
        "id",
        "--runner",
        "openai",
        "--model",
        "gpt-test",
        "--batch-api",
        "--var",
        "poll_max_s=0.2",
        "--rate-limit-wait",
        "0s",
        "--format",
        "plain",
    ];
    args.extend_from_slice(extra);
    let mut c = sb.cmd(&args);
    c.env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-test-0123456789abcdef");
    c
}

async fn run(sb: &Sandbox, server: &MockServer, extra: &[&str]) -> Run {
    let mut c = cmd(sb, server, extra);
    tokio::task::spawn_blocking(move || c.output().expect("spawn").into())
        .await
        .expect("join")
}

async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_go_as_one_job_and_each_row_gets_its_own_answer_or_failure() {
    let (server, api) = stand_in(true).await;
    api.with(|r| {
        r.answers.insert(
            "3-c".into(),
            RowAnswer::Status(500, "The server had an error"),
        );
        r.answers.insert(
            "4-d".into(),
            RowAnswer::ErrorLine("the body is not valid JSON"),
        );
    });
    let sb = batch(&["a", "b", "c", "d"]);
    let r = run(&sb, &server, &[]).await;
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
    assert!(rows["c"]["error"].contains("HTTP 500: The server had an error"));
    assert_eq!(rows["d"]["failure_kind"], "api_error", "{:?}", rows["d"]);
    assert!(
        rows["d"]["error"].contains("invalid_request: the body is not valid JSON"),
        "{:?}",
        rows["d"]
    );
    let (uploads, creates, lines) = api.with(|r| {
        let lines = r.files.get("file-in-1").cloned().unwrap_or_default();
        (r.uploads, r.creates, lines)
    });
    assert_eq!(
        (uploads, creates),
        (1, 1),
        "one file, one job for the batch"
    );
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["method"], "POST");
    assert_eq!(lines[0]["url"], "/v1/chat/completions");
    assert!(
        lines.iter().any(|l| l["custom_id"] == "1-a"
            && l["body"]["messages"][1]["content"]
                .as_str()
                .unwrap_or("")
                .contains("text of a")),
        "{lines:?}"
    );
    // The job is recorded, its results taken; `runner status` shows it.
    let state: Value =
        serde_json::from_str(&sb.read("workers-output.runner/batch-api.json")).expect("state");
    assert_eq!(state["jobs"][0]["batch_id"], "batch_1");
    assert_eq!(state["jobs"][0]["delivered"], true);
    let status = sb.run(&["status", "workers-output.runner"]);
    assert!(
        status.stdout.contains("batch_1  completed  4/4 done"),
        "{status:?}"
    );
    // --only failed sends only the failed rows, in a new job.
    let again = run(&sb, &server, &["--only", "failed"]).await;
    assert_eq!(again.code, 1, "{again:?}");
    let (uploads, second) = api.with(|r| {
        let second = r.files.get("file-in-2").cloned().unwrap_or_default();
        (r.uploads, second)
    });
    assert_eq!(uploads, 2);
    let ids: Vec<&str> = second
        .iter()
        .filter_map(|l| l["custom_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&"3-c") && ids.contains(&"4-d"), "{ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_while_polling_and_the_same_command_picks_up_the_same_job() {
    let (server, api) = stand_in(false).await;
    let sb = batch(&["a", "b", "c"]);
    let mut c = cmd(&sb, &server, &[]);
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c.spawn().expect("spawn");
    wait_until("the runner to poll its job", || api.with(|r| r.polls >= 2)).await;
    child.kill().expect("kill -9");
    let _ = child.wait();
    // The job finishes while no runner waits for it.
    api.with(|r| r.release = true);
    let r = run(&sb, &server, &[]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b", "c"] {
        assert_eq!(rows[id]["status"], "completed", "{:?}", rows[id]);
    }
    let (uploads, creates) = api.with(|r| (r.uploads, r.creates));
    assert_eq!(
        (uploads, creates),
        (1, 1),
        "the resumed run waited for the same job: no second upload, no second bill"
    );
    assert!(sb.survivors_after(1.0).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_leaves_the_job_running_says_how_to_resume_and_the_resume_collects_it() {
    let (server, api) = stand_in(false).await;
    let sb = batch(&["a", "b"]);
    let mut c = cmd(&sb, &server, &[]);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = c.spawn().expect("spawn");
    let pid = child.id();
    wait_until("the runner to poll its job", || api.with(|r| r.polls >= 1)).await;
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
    assert!(
        out.stderr.contains("batch_1 keep running at the provider")
            && out.stderr.contains("Run the same command again")
            && out.stderr.contains("/batches/batch_1/cancel"),
        "{out:?}"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "cancelled", "{rows:?}");
    api.with(|r| r.release = true);
    let r = run(&sb, &server, &[]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(api.with(|r| (r.uploads, r.creates)), (1, 1));
}

/// Issue 50: a kill while `POST /batches` was in flight (here: right after the job was
/// created, before the runner recorded its id) made the resume create a second job from the
/// same upload — a second bill, and the first job never found. The resume finds the job by
/// its input file first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_while_the_job_is_created_and_the_resume_finds_that_job() {
    let (server, api) = stand_in(false).await;
    let sb = batch(&["a", "b"]);
    let mut c = cmd(&sb, &server, &[]);
    c.env("RUNNER_FAULT", "batch_created")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let killed = tokio::task::spawn_blocking(move || c.status().expect("spawn"))
        .await
        .expect("join");
    assert!(!killed.success(), "the fault point ended it");
    assert_eq!(api.with(|r| r.creates), 1, "the job was created");
    api.with(|r| r.release = true);
    let r = run(&sb, &server, &[]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b"] {
        assert_eq!(rows[id]["status"], "completed", "{:?}", rows[id]);
    }
    let (uploads, creates, lists) = api.with(|r| (r.uploads, r.creates, r.lists));
    assert_eq!(
        (uploads, creates),
        (1, 1),
        "the resume found the killed run's job: no second job, no second bill"
    );
    assert!(lists >= 1, "it looked");
    assert!(sb.survivors_after(1.0).is_empty());
}

/// Issue 56: with BATCH.md's `stages:`, each stage's wave is one Batch API job: the first
/// stage's rows in one, the second's (which wait for the first) in the next; both recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_stage_of_a_batch_is_one_job() {
    let (server, api) = stand_in(true).await;
    let sb = Sandbox::new();
    sb.write("in.csv", "id,text\na,hello\nb,bye\nc,hi\n");
    sb.write(
        "BATCH.md",
        "---\ninput: in.csv\nid_column: id\nrunner: openai\nmodel: gpt-test\nstages:\n  - name: audit\n    instruction: Audit {text}\n  - name: verdict\n    instruction: Judge {text}\n---\n",
    );
    let mut c = sb.cmd(&[
        "batch",
        "BATCH.md",
        "--batch-api",
        "--var",
        "poll_max_s=0.2",
        "--format",
        "plain",
    ]);
    c.env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", "sk-test-0123456789abcdef");
    let r: Run = tokio::task::spawn_blocking(move || c.output().expect("spawn").into())
        .await
        .expect("join");
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b", "c"] {
        assert_eq!(rows[id]["status"], "completed", "{:?}", rows[id]);
    }
    let (creates, first, second) = api.with(|r| {
        let ids = |f: &str| -> Vec<String> {
            let mut v: Vec<String> = r
                .files
                .get(f)
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter_map(|l| l["custom_id"].as_str().map(str::to_owned))
                .collect();
            v.sort();
            v
        };
        (r.creates, ids("file-in-1"), ids("file-in-2"))
    });
    assert_eq!(creates, 2, "one job per stage");
    assert_eq!(first, ["1-a.audit", "2-b.audit", "3-c.audit"]);
    assert_eq!(second, ["1-a.verdict", "2-b.verdict", "3-c.verdict"]);
    let state: Value =
        serde_json::from_str(&sb.read("workers-output.runner/batch-api.json")).expect("state");
    assert_eq!(
        state["jobs"].as_array().map(Vec::len),
        Some(2),
        "both jobs recorded: {state}"
    );
}
