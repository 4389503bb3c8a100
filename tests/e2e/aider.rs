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
//! point at another `aider`. Without one the tests skip (`crate::skip`). The cases it shares
//! with every CLI are its row in `table.rs`; here are its wiring ([`Aider`]) and the test
//! only aider has.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use crate::cases::{self, Agent, Key, Script, Setup, StandIn};
use crate::chat_api::{self, Call, ChatApi, Reply};
use crate::support::{self, Cli, Run, Sandbox};

/// The model the tests ask for.
const MODEL: &str = "openai/e2e-model";

const USAGE: (u64, u64) = (2_345, 67);

/// The summary of [`long_report`]: longer than a terminal line.
const LONG_SUMMARY: &str = "set the status in notes.txt to done, as asked, and checked that nothing else in the file needed to change";

/// A report whose summary is longer than a terminal line.
fn long_report() -> String {
    json!({
        "id": "1",
        "status": "completed",
        "summary": LONG_SUMMARY,
        "files_modified": ["notes.txt"],
        "files_created": [],
        "tests": "none",
        "blocker": null,
        "next_steps": [],
        "output": {"answer": 42}
    })
    .to_string()
}

/// The model's work: a SEARCH/REPLACE block for `notes.txt` (`--edit-format diff`) and the
/// report (with a line longer than a terminal) as a ```json block of its reply.
fn edits_notes(_: &Call) -> Reply {
    Reply::text(
        format!(
            "I'll mark the task done.\n\nnotes.txt\n```text\n<<<<<<< SEARCH\nstatus: todo\n\
             =======\nstatus: done\n>>>>>>> REPLACE\n```\n\nMy report:\n\n```json\n{}\n```\n",
            long_report()
        ),
        USAGE,
    )
}

/// No edit at all: the report is the ```json block of the reply.
fn reports_in_text(_: &Call) -> Reply {
    Reply::text(
        format!(
            "Nothing needs changing.\n\n```json\n{}\n```\n",
            support::report_json("1")
        ),
        USAGE,
    )
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

/// What aider must not leave in a folder that is not a git work tree.
fn assert_no_git_left(sb: &Sandbox) {
    for name in [".git", ".gitignore", ".aider.tags.cache.v4"] {
        assert!(
            !sb.path().join(name).exists(),
            "aider left {name} in the working directory"
        );
    }
}

/// aider's wiring for the shared cases (`table.rs`).
pub(crate) struct Aider;

impl Agent for Aider {
    const NAME: &'static str = "aider";
    const BIN: &'static str = "venv/bin/aider";
    const VERSION_HAS: &'static str = ".";
    const TIMEOUT: &'static str = "60s";
    /// aider has no tools: its work is an edit of `notes.txt`, its report in its reply.
    const SUMMARY: &'static str = LONG_SUMMARY;
    /// The API's reply to every call (a 401 for a wrong key whatever the script).
    type Fault = Reply;
    type Api = ChatApi;

    async fn start(script: Script<Reply>) -> ChatApi {
        chat_api::play(script, edits_notes, reports_in_text).await
    }

    /// The stand-in as its OpenAI API (`OPENAI_API_BASE`), `key`, the dead-end proxy, and
    /// the model's metadata.
    fn setup(_cli: &Cli, sb: &Sandbox, api: &ChatApi, key: Key) -> Setup {
        write_model_metadata(sb);
        let mut env = vec![
            ("OPENAI_API_BASE", api.base_url()),
            ("HTTPS_PROXY", api.proxy.clone()),
            ("HTTP_PROXY", api.proxy.clone()),
            ("NO_PROXY", "127.0.0.1,localhost".into()),
        ];
        if let Some(key) = key.value() {
            env.push(("OPENAI_API_KEY", key.to_string()));
        }
        Setup {
            args: vec!["--model".into(), MODEL.into()],
            env,
        }
    }

    /// The file aider edits.
    fn prepare(cwd: &Path) {
        std::fs::write(cwd.join("notes.txt"), "title: e2e\nstatus: todo\n").expect("notes");
    }

    /// aider really edited `notes.txt` with the SEARCH/REPLACE block (`--edit-format diff`),
    /// outside git (`--no-git`: nothing left), its history in the teammate folder; one
    /// non-streaming call with the model and key.
    fn check_completed(sb: &Sandbox, r: &Run, api: &ChatApi, _row: &BTreeMap<String, String>) {
        let ctx = || sb.context(r, &api.log);
        assert_eq!(
            std::fs::read_to_string(sb.path().join("notes.txt")).expect("notes"),
            "title: e2e\nstatus: done\n",
            "aider applied the SEARCH/REPLACE block: {}",
            ctx()
        );
        let stdout = std::fs::read_to_string(sb.teammate().join("attempt-1.stdout.log"))
            .expect("stdout log");
        assert!(stdout.contains("Applied edit to notes.txt"), "{stdout}");
        assert!(stdout.contains("with diff edit format"), "{stdout}");
        assert!(
            stdout.contains("Git repo: none"),
            "--no-git outside git: {stdout}"
        );
        assert_no_git_left(sb);
        assert!(
            sb.teammate().join("work/aider.chat.history.md").exists(),
            "the history is in the teammate folder"
        );

        let calls = api.calls();
        assert_eq!(calls.len(), 1, "{}", ctx());
        assert!(!calls[0].stream, "--no-stream");
        assert_eq!(calls[0].model, "e2e-model");
        assert_eq!(calls[0].auth.as_deref(), Some("Bearer sk-test"));
    }

    /// The edit landed in `work/` (no report file: aider reports in its reply).
    fn check_sandboxed(sb: &Sandbox, _r: &Run, _api: &ChatApi) {
        assert_eq!(
            std::fs::read_to_string(sb.path().join("work/notes.txt")).expect("notes"),
            "title: e2e\nstatus: done\n"
        );
    }

    fn check_text(sb: &Sandbox, _api: &ChatApi) {
        assert_no_git_left(sb);
    }

    /// aider exits 0 after an API error (#3918); nothing left of git, nothing unexpected.
    fn check_failed(sb: &Sandbox, api: &ChatApi, _row: &BTreeMap<String, String>) {
        assert_no_git_left(sb);
        api.log().assert_nothing_unexpected();
    }
}

// ---------------------------------------------------------------------------------------
// Tests only aider has

/// Two aider teammates at once in a folder that is not a git work tree: with `--no-git`
/// neither runs `git init` there (without it, both would, racing), and both complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_aider_parallel_teammates_outside_git_leave_no_repository() {
    let Some(aider) =
        cases::find::<Aider>("real_aider_parallel_teammates_outside_git_leave_no_repository")
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

    let r = cases::run::<Aider>(&aider, &sb, &api, Key::Right, "60s", &["--jobs", "2"]).await;
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
