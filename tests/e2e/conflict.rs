//! End to end: `--on-conflict claude` (issue 57) with the REAL Claude Code CLI as the resolver
//! of a conflicting merge, against its scripted local stand-in (`claude.rs`'s Messages API
//! server with a script of its own). Two items (a scripted exec agent) rewrite the same line;
//! the second's merge conflicts, and Claude Code, in the worktree holding the merge in
//! progress, reads the file and writes both sides back with its own tools (`Read`, then
//! `Write`); the runner commits the merge, checks it with `--verify-merged`, and the target
//! moves to it. Skips unless Claude Code is installed.

use std::path::Path;

use serde_json::{Value, json};
use wiremock::{Request, Respond, ResponseTemplate};

use crate::cases;
use crate::claude::{self, Claude};
use crate::support::{self, Log, Sandbox, Shared};

const READ_ID: &str = "toolu_01E2eReadConflict000000";
const WRITE_ID: &str = "toolu_01E2eWriteResolved00000";

/// The scripted resolver: turn 1 reads `body.txt` in the worktree the prompt names, turn 2
/// (after the read) writes both sides into it, turn 3 ends with a short text.
struct Resolver {
    log: Log,
    /// The prompt Claude Code was given (the first user message).
    prompt: Shared<String>,
}

impl Respond for Resolver {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Some(body) = support::json_body(req, &self.log) else {
            return ResponseTemplate::new(400);
        };
        let model = body["model"].as_str().unwrap_or("?").to_string();
        if body["stream"] != json!(true) {
            self.log.push("side request -> short text".into());
            return ResponseTemplate::new(200).set_body_json(json!({
                "id": "msg_e2e_side", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": "Merge conflict"}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 3}
            }));
        }
        let text = support::user_text(&body["messages"]);
        self.prompt.with(|p| {
            if p.is_empty() {
                p.clone_from(&text);
            }
        });
        let dir = text
            .split("This worktree (")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or_default()
            .to_owned();
        let file = format!("{dir}/body.txt");
        let (turn, events) = match (
            claude::tool_result(&body, READ_ID),
            claude::tool_result(&body, WRITE_ID),
        ) {
            (None, _) => {
                let input = json!({"file_path": file});
                (1, claude::mcp_turn(&model, 1, READ_ID, "Read", &input))
            }
            (Some(_), None) => {
                let input = json!({"file_path": file, "content": "alpha\nbeta\n"});
                (2, claude::mcp_turn(&model, 2, WRITE_ID, "Write", &input))
            }
            (Some(_), Some(result)) => {
                self.log.push(format!("write result: {result}"));
                let done = "Resolved: both changes kept.";
                (3, claude::text_turn(&model, 3, done, (18_000, 10)))
            }
        };
        self.log.push(format!("turn {turn} for {file}"));
        claude::sse(&events)
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_claude_resolves_a_conflicting_merge_that_then_lands() {
    let test = "conflict::real_claude_resolves_a_conflicting_merge_that_then_lands";
    let Some(cli) = cases::find::<Claude>(test) else {
        return;
    };
    let log = Log::default();
    let prompt = Shared::<String>::default();
    let resolver = Resolver {
        log: log.clone(),
        prompt: prompt.clone(),
    };
    let server = claude::messages_api(resolver, &log).await;
    let sb = Sandbox::new(&cli);
    let root = sb.path();
    std::fs::write(
        root.join(".gitignore"),
        "bin/\nhome/\ntmp/\nwork/\nin.csv\ninstr.md\n*.runner/\nworkers-output*.csv\n",
    )
    .expect(".gitignore");
    std::fs::write(root.join("body.txt"), "original\n").expect("body.txt");
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(
        root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    );
    std::fs::write(
        root.join("in.csv"),
        "id,task\na,EDIT body.txt=alpha\nb,EDIT body.txt=beta\n",
    )
    .expect("in.csv");
    std::fs::write(root.join("instr.md"), "Do this: {task}\n").expect("instr.md");
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/edit_agent.py");
    let agent = agent.display().to_string();
    let r = sb
        .run(
            &[
                "--id-column",
                "id",
                "--timeout",
                "90s",
                "--isolate",
                "worktree",
                "--merge",
                "--on-conflict",
                "claude",
                "--verify-merged",
                "grep -q alpha body.txt",
                "--",
                "python3",
                &agent,
            ],
            &claude::claude_env(&sb, &server.uri()),
        )
        .await;
    assert_eq!(r.code, 0, "{r:?}\n{}", log.dump());
    assert_eq!(
        std::fs::read_to_string(root.join("body.txt")).expect("body.txt"),
        "alpha\nbeta\n",
        "the resolved merge landed on main"
    );
    assert!(
        r.stdout.contains(
            "RESOLVING 2-b  conflict in body.txt handed to claude (attempt 1); it meets a"
        ),
        "{r:?}"
    );
    assert!(r.stdout.contains("(conflict resolved by claude)"), "{r:?}");
    let merges = git(root, &["rev-list", "--merges", "--count", "main"]);
    assert_eq!(merges.trim(), "2", "a's merge and the resolved one");
    let parents = git(root, &["log", "-1", "--format=%P", "main"]);
    assert_eq!(
        parents.split_whitespace().count(),
        2,
        "the resolution is a merge"
    );
    let said = prompt.with(|p| p.clone());
    assert!(
        said.contains("item a (Do this: EDIT body.txt=alpha): edited body.txt")
            && said.contains("- body.txt"),
        "the prompt names the conflict and the item it meets: {said}"
    );
    let resolved: Value = std::fs::read_to_string(root.join("workers-output.runner/journal.jsonl"))
        .expect("journal")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "conflict_resolved")
        .expect("conflict_resolved");
    assert!(resolved["commit"].is_string(), "{resolved}");
    assert!(
        resolved["cost_usd"].as_f64().is_some_and(|c| c > 0.0),
        "Claude Code's cost counts: {resolved}"
    );
    // The resolver's cost counts in the item's: b's own agent reports none.
    let mut rows = csv::Reader::from_path(root.join("workers-output.csv")).expect("output");
    let headers = rows.headers().expect("headers").clone();
    let cost = headers
        .iter()
        .position(|h| h == "cost_usd")
        .expect("cost_usd column");
    let b = rows
        .records()
        .map(|r| r.expect("record"))
        .find(|r| r.get(0) == Some("b"))
        .expect("row b");
    let b_cost: f64 = b.get(cost).unwrap_or_default().parse().expect("b's cost");
    assert_eq!(Some(b_cost), resolved["cost_usd"].as_f64(), "{b:?}");
    sb.assert_no_survivors();
}
