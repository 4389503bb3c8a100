//! End to end: the built-in `aider` runner definition against the REAL aider, offline.
//! aider (litellm's OpenAI client, `--no-stream`) talks to the scripted Chat Completions
//! stand-in of `chat_api.rs` through `OPENAI_API_BASE` with `--model openai/e2e-model`.
//!
//! What aider 0.86.2 does here, observed in these tests:
//! - one non-streaming `POST /v1/chat/completions` per message, no tools: edits come back as
//!   text, SEARCH/REPLACE blocks with `--edit-format diff` (the definition's default). With
//!   the "whole" format aider picks for an unknown model, a reply with a ```json report block
//!   is taken as a whole-file edit (a file named after the line before the fence, or
//!   "No filename provided before ``` in file listing");
//! - it prints everything on stdout through rich, wrapped at the terminal width (80 without
//!   one): the definition sets `COLUMNS` so a long report line is not broken;
//! - in a folder that is not in a git work tree, `--yes-always` answers its "No git repo
//!   found, create one" question: it runs `git init` there and writes `.gitignore`. The
//!   definition passes `--no-git` there instead (`no_git_args`); the tests run outside git
//!   and check nothing is left;
//! - on an API error it prints litellm's exception (`litellm.RateLimitError: RateLimitError:
//!   OpenAIException - <the provider's message>`, `litellm.AuthenticationError: ...`) and its
//!   own advice on stdout, and exits 0 (Aider-AI/aider#3918). A rate limit is retried by
//!   aider for about 64 s (0.25 s doubling to 32 s; `RETRY_TIMEOUT = 60` in aider/models.py,
//!   no option or variable changes it), each try with litellm's own 2 retries; a 401 is not
//!   retried;
//! - network side trips: litellm fetches its model price map from GitHub at import (off:
//!   `LITELLM_LOCAL_MODEL_COST_MAP`, set by the definition) and aider fetches the same file
//!   for a model it has no metadata for (the tests give it `~/.aider.model.metadata.json`);
//!   `HTTPS_PROXY` points at a dead end that logs anything else.
//!
//! aider is installed by `.ci/run` into `target/e2e-aider/venv`; `RUNNER_E2E_AIDER` may
//! point at another `aider`. Without one the tests print `skipped: ...` and pass.

use std::time::Duration;

use serde_json::json;

use crate::chat_api::{self, API_KEY, Call, ChatApi, Reply};
use crate::support::{self, Cli, Sandbox};

/// The model the tests ask for.
const MODEL: &str = "openai/e2e-model";

const USAGE: (u64, u64) = (2_345, 67);

fn aider_or_skip(test: &str) -> Option<Cli> {
    support::cli_or_skip("aider", "venv/bin/aider", ".", test)
}

/// A report whose summary is longer than a terminal line.
fn long_report() -> String {
    json!({
        "id": "1",
        "status": "completed",
        "summary": "set the status in notes.txt to done, as asked, and checked that nothing else in the file needed to change",
        "files_modified": ["notes.txt"],
        "files_created": [],
        "tests": "none",
        "blocker": null,
        "next_steps": [],
        "output": {"answer": 42}
    })
    .to_string()
}

/// `~/.aider.model.metadata.json` for the model, so aider does not download litellm's price
/// list from GitHub.
fn write_model_metadata(sb: &Sandbox) {
    std::fs::write(
        sb.home().join(".aider.model.metadata.json"),
        json!({MODEL: {
            "max_input_tokens": 128000, "max_output_tokens": 16384, "max_tokens": 16384,
            "input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002,
            "litellm_provider": "openai", "mode": "chat"
        }})
        .to_string(),
    )
    .expect("model metadata");
}

/// aider's environment: the stand-in as its OpenAI API, `key`, the dead-end proxy.
fn aider_env(api: &ChatApi, key: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_API_BASE", api.base_url()),
        ("OPENAI_API_KEY", key.to_string()),
        ("HTTPS_PROXY", api.proxy.clone()),
        ("HTTP_PROXY", api.proxy.clone()),
        ("NO_PROXY", "127.0.0.1,localhost".into()),
    ]
}

/// `runner batch --runner aider --model openai/e2e-model --timeout <limit>` in `sb`.
async fn run_aider(sb: &Sandbox, api: &ChatApi, key: &str, limit: &str) -> support::Run {
    write_model_metadata(sb);
    sb.run(
        &["--runner", "aider", "--model", MODEL, "--timeout", limit],
        &aider_env(api, key),
    )
    .await
}

/// aider edits a file and reports under the default `--sandbox auto`, Landlock here (output
/// and workspace outside the working directory `work/`): the edit lands, the history stays
/// in the teammate folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_aider_completes_under_the_default_sandbox() {
    let Some(aider) = aider_or_skip("real_aider_completes_under_the_default_sandbox") else {
        return;
    };
    let api = chat_api::start(|_: &Call| {
        Reply::text(
            format!(
                "notes.txt\n```text\n<<<<<<< SEARCH\nstatus: todo\n=======\nstatus: done\n\
                 >>>>>>> REPLACE\n```\n\n```json\n{}\n```\n",
                long_report()
            ),
            USAGE,
        )
    })
    .await;
    let sb = Sandbox::new(&aider);
    write_model_metadata(&sb);
    let notes = sb.path().join("work/notes.txt");
    std::fs::write(&notes, "title: e2e\nstatus: todo\n").expect("notes");
    let Some(r) = sb
        .run_sandboxed(
            &["--runner", "aider", "--model", MODEL, "--timeout", "60s"],
            &aider_env(&api, API_KEY),
        )
        .await
    else {
        return;
    };
    assert_eq!(r.code, 0, "{}", sb.context(&r, &api.log));
    assert_eq!(sb.row()["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(&notes).expect("notes"),
        "title: e2e\nstatus: done\n"
    );
    sb.assert_no_survivors();
}

/// Like [`run_aider`] with `--jobs <jobs>` and the sandbox's `in.csv` as it is.
async fn run_with_jobs(sb: &Sandbox, api: &ChatApi, jobs: &str) -> support::Run {
    write_model_metadata(sb);
    sb.run(
        &[
            "--runner",
            "aider",
            "--model",
            MODEL,
            "--timeout",
            "60s",
            "--jobs",
            jobs,
        ],
        &aider_env(api, API_KEY),
    )
    .await
}

/// What aider must not leave in a folder that is not a git work tree.
fn assert_no_git_left(sb: &Sandbox) {
    for name in [".git", ".gitignore", ".aider.tags.cache.v4"] {
        assert!(
            !sb.path().join(name).exists(),
            "aider left {name} in the working directory"
        );
    }
}

/// The whole loop: aider really edits `notes.txt` in its working directory with a
/// SEARCH/REPLACE block (`--edit-format diff`), and the report (with a line longer than a
/// terminal) comes from the ```json block of its printed reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_aider_edits_a_file_and_the_report_completes_the_item() {
    let Some(aider) = aider_or_skip("real_aider_edits_a_file_and_the_report_completes_the_item")
    else {
        return;
    };
    eprintln!("using {} ({})", aider.bin.display(), aider.version);
    let api = chat_api::start(|_: &Call| {
        Reply::text(
            format!(
                "I'll mark the task done.\n\nnotes.txt\n```text\n<<<<<<< SEARCH\nstatus: todo\n\
                 =======\nstatus: done\n>>>>>>> REPLACE\n```\n\nMy report:\n\n```json\n{}\n```\n",
                long_report()
            ),
            USAGE,
        )
    })
    .await;
    let sb = Sandbox::new(&aider);
    std::fs::write(sb.path().join("notes.txt"), "title: e2e\nstatus: todo\n").expect("notes");

    let r = run_aider(&sb, &api, API_KEY, "60s").await;
    let ctx = || sb.context(&r, &api.log);

    assert_eq!(r.code, 0, "every item completed: {}", ctx());
    let row = sb.row();
    assert_eq!(row["status"], "completed", "{row:?}\n{}", ctx());
    assert!(row["summary"].starts_with("set the status"), "{row:?}");
    assert_eq!(row["failure_kind"], "", "{row:?}");
    assert_eq!(
        std::fs::read_to_string(sb.path().join("notes.txt")).expect("notes"),
        "title: e2e\nstatus: done\n",
        "aider applied the SEARCH/REPLACE block: {}",
        ctx()
    );
    let stdout =
        std::fs::read_to_string(sb.teammate().join("attempt-1.stdout.log")).expect("stdout log");
    assert!(stdout.contains("Applied edit to notes.txt"), "{stdout}");
    assert!(stdout.contains("with diff edit format"), "{stdout}");
    assert!(
        stdout.contains("Git repo: none"),
        "--no-git outside git: {stdout}"
    );
    assert_no_git_left(&sb);
    assert!(
        sb.teammate().join("work/aider.chat.history.md").exists(),
        "the history is in the teammate folder"
    );

    let calls = api.calls();
    assert_eq!(calls.len(), 1, "{}", ctx());
    assert!(!calls[0].stream, "--no-stream");
    assert_eq!(calls[0].model, "e2e-model");
    assert_eq!(calls[0].auth.as_deref(), Some("Bearer sk-test"));
    api.log.assert_nothing_unexpected();
    sb.assert_no_survivors();
    eprintln!("completed in {:.1?}", r.took);
}

/// No edit at all: the report is the ```json block of the reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_aider_report_in_the_final_text_completes() {
    let Some(aider) = aider_or_skip("real_aider_report_in_the_final_text_completes") else {
        return;
    };
    let api = chat_api::start(|_: &Call| {
        Reply::text(
            format!(
                "Nothing needs changing.\n\n```json\n{}\n```\n",
                support::report_json("1")
            ),
            USAGE,
        )
    })
    .await;
    let sb = Sandbox::new(&aider);

    let r = run_aider(&sb, &api, API_KEY, "60s").await;
    let ctx = || sb.context(&r, &api.log);

    assert_eq!(r.code, 0, "{}", ctx());
    let row = sb.row();
    assert_eq!(row["status"], "completed", "{row:?}\n{}", ctx());
    assert_eq!(row["summary"], "wrote the report", "{row:?}");
    assert_no_git_left(&sb);
    assert!(api.log.unexpected().is_empty(), "{}", api.log.dump());
    sb.assert_no_survivors();
}

/// Two aider teammates at once in a folder that is not a git work tree: with `--no-git`
/// neither runs `git init` there (without it, both would, racing), and both complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_aider_parallel_teammates_outside_git_leave_no_repository() {
    let Some(aider) =
        aider_or_skip("real_aider_parallel_teammates_outside_git_leave_no_repository")
    else {
        return;
    };
    let api = chat_api::start(|c: &Call| {
        let id = if c.user.contains("item 2") { "2" } else { "1" };
        Reply::text(
            format!("Done.\n\n```json\n{}\n```\n", support::report_json(id)),
            USAGE,
        )
    })
    .await;
    let sb = Sandbox::new(&aider);
    std::fs::write(sb.path().join("in.csv"), "id\n1\n2\n").expect("in.csv");

    let r = run_with_jobs(&sb, &api, "2").await;
    let ctx = || sb.context(&r, &api.log);

    assert_eq!(r.code, 0, "both completed: {}", ctx());
    let out = std::fs::read_to_string(sb.path().join("workers-output.csv")).expect("output");
    let mut rdr = csv::Reader::from_reader(out.as_bytes());
    let status = rdr
        .headers()
        .expect("headers")
        .iter()
        .position(|h| h == "status")
        .expect("status column");
    let statuses: Vec<String> = rdr
        .records()
        .map(|r| r.expect("record")[status].to_string())
        .collect();
    assert_eq!(statuses, ["completed", "completed"], "{out}\n{}", ctx());
    assert_no_git_left(&sb);
    assert_eq!(api.calls().len(), 2, "{}", ctx());
    assert!(api.log.unexpected().is_empty(), "{}", api.log.dump());
    sb.assert_no_survivors();
}

/// aider exits 0 after an API error: the item fails with the litellm error aider printed, and
/// the failure kind from the definition's patterns.
async fn api_error_fails_the_item(
    test: &str,
    reply: Reply,
    key: &str,
    kind: &str,
    expect_in_reason: &[&str],
    calls: usize,
    within: Duration,
) {
    let Some(aider) = aider_or_skip(test) else {
        return;
    };
    let api = chat_api::start(move |c: &Call| {
        if c.key() != API_KEY {
            return Reply::bad_key(c.key());
        }
        reply.clone()
    })
    .await;
    let sb = Sandbox::new(&aider);

    let r = run_aider(&sb, &api, key, "100s").await;
    let ctx = || sb.context(&r, &api.log);

    assert_eq!(r.code, 1, "an item did not complete: {}", ctx());
    let row = sb.row();
    assert_eq!(row["status"], "failed", "{row:?}\n{}", ctx());
    assert_eq!(row["exit_code"], "0", "aider exits 0 (#3918): {row:?}");
    assert_eq!(row["failure_kind"], kind, "{row:?}\n{}", ctx());
    for word in expect_in_reason {
        assert!(
            row["error"].contains(word),
            "the reason quotes aider's printed error ({word:?}): {row:?}\n{}",
            ctx()
        );
    }
    assert_eq!(api.calls().len(), calls, "{}", ctx());
    assert!(r.took < within, "gave up within {within:?}: {r:?}");
    assert_no_git_left(&sb);
    assert!(api.log.unexpected().is_empty(), "{}", api.log.dump());
    sb.assert_no_survivors();
    eprintln!("failed as expected in {:.1?}: {}", r.took, row["error"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_aider_429_rate_limit_fails_the_item() {
    // aider's own retry loop cannot be shortened: 9 tries over ~64 s, each with litellm's 2
    // retries (20 ms apart, from retry-after-ms): 27 calls.
    api_error_fails_the_item(
        "real_aider_429_rate_limit_fails_the_item",
        Reply::rate_limited(),
        API_KEY,
        "rate_limited",
        &[
            "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for gpt-4o",
            "(and no report)",
        ],
        27,
        Duration::from_secs(95),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_aider_bad_key_401_fails_the_item() {
    api_error_fails_the_item(
        "real_aider_bad_key_401_fails_the_item",
        Reply::text("(unreachable: the key is wrong)", (1, 1)),
        "sk-wrong",
        "auth",
        &["litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided: sk-wrong"],
        1,
        Duration::from_secs(40),
    )
    .await;
}

/// The API accepts the request and never answers: the runner's time limit ends aider, and
/// none of its processes is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_aider_stalled_api_times_out_and_leaves_no_process() {
    let Some(aider) = aider_or_skip("real_aider_stalled_api_times_out_and_leaves_no_process")
    else {
        return;
    };
    let api = chat_api::start(|_: &Call| Reply::Stall(Duration::from_secs(300))).await;
    let sb = Sandbox::new(&aider);

    let r = run_aider(&sb, &api, API_KEY, "15s").await;
    let ctx = || sb.context(&r, &api.log);

    assert_eq!(r.code, 1, "{}", ctx());
    let row = sb.row();
    assert_eq!(row["status"], "timed_out", "{row:?}\n{}", ctx());
    assert_eq!(row["failure_kind"], "timed_out", "{row:?}");
    assert!(!api.calls().is_empty(), "the API was called: {}", ctx());
    assert!(r.took < Duration::from_secs(60), "{r:?}");
    sb.assert_no_survivors();
}
