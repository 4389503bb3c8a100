//! `runner mcp` against a real MCP client: the official MCP Inspector's connection CLI
//! (`mcpdo`, pinned, installed by `.ci/run` under `target/e2e-inspector/`), on a private
//! daemon (`mcpdo private`) with a private HOME. It connects to `runner mcp` over stdio,
//! lists the tools and calls each; a refusal comes back as a tool error, a team whose item
//! failed as its status; stopping the daemon ends the server. Skipped with a notice when the Inspector is not installed.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::cli_or_skip;

const TEST: &str = "mcp::the_inspector_calls_every_tool_of_runner_mcp";

/// `mcpdo ARGS` with the private daemon's environment; (exit code, stdout, stderr).
fn mcpdo(bin: &Path, env: &[(String, String)], dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .env("HOME", dir.join("home"))
        .env("MCP_CATALOG_PATH", dir.join("home/mcp.json"))
        .env("NO_COLOR", "1")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("run mcpdo");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The JSON a `--format json tools/call` printed first (the call's result).
fn result_of(stdout: &str) -> Value {
    let end = stdout.find("\n}\n").map_or(stdout.len(), |i| i + 2);
    serde_json::from_str(&stdout[..end]).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_inspector_calls_every_tool_of_runner_mcp() {
    let Some(cli) = cli_or_skip("inspector", "node_modules/.bin/mcpdo", "2.12.0", TEST) else {
        return;
    };
    let sb = tempfile::Builder::new()
        .prefix("runner-mcp-e2e-")
        .tempdir()
        .expect("tempdir");
    let dir = sb.path();
    std::fs::create_dir_all(dir.join("home")).expect("home");
    std::fs::write(dir.join("rows.csv"), "id,topic\na,x\nb,y\n").expect("csv");
    std::fs::write(
        dir.join("agent.sh"),
        "cat > /dev/null\nprintf '{\"status\":\"completed\",\"summary\":\"did %s\"}' \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n",
    )
    .expect("agent");
    // A private, token-gated daemon: nothing shared with a developer's own connections.
    let (code, exports, err) = mcpdo(&cli.bin, &[], dir, &["private"]);
    assert_eq!(code, 0, "{err}");
    let env: Vec<(String, String)> = exports
        .lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.trim_matches('\'').to_owned()))
        .collect();
    assert_eq!(env.len(), 2, "{exports}");
    let runner = env!("CARGO_BIN_EXE_runner");
    let cwd = dir.display().to_string();
    let call = |args: &[&str]| mcpdo(&cli.bin, &env, dir, args);
    let (code, out, err) = call(&["connect", "--cwd", &cwd, runner, "mcp"]);
    assert_eq!(code, 0, "{out}{err}");
    let on = |tail: &[&str]| {
        let mut a = vec!["--format", "json", "--connection", runner];
        a.extend_from_slice(tail);
        call(&a)
    };

    let (code, out, err) = on(&["tools/list"]);
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).expect("tools/list JSON");
    let mut names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "batch_run",
            "show",
            "status",
            "stop",
            "todo_add",
            "todo_list",
            "todo_resolve"
        ]
    );

    let (code, out, err) = on(&[
        "tools/call",
        "todo_add",
        r#"text:="Audit the lexer""#,
        r#"store:="S""#,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(text_of(&result_of(&out)).contains("Added item 1"), "{out}");
    let (code, out, _) = on(&["tools/call", "todo_list", r#"store:="S""#]);
    assert_eq!(code, 0, "{out}");
    assert!(
        text_of(&result_of(&out)).contains("Audit the lexer"),
        "{out}"
    );
    let (code, out, _) = on(&["tools/call", "todo_resolve", r#"store:="S""#]);
    assert_ne!(code, 0, "a refusal is a tool error: {out}");
    let refused = result_of(&out);
    assert_eq!(refused["isError"], true, "{out}");
    assert!(text_of(&refused).contains("ask the user"), "{out}");

    let args = serde_json::json!({
        "csv_path": "rows.csv",
        "instruction": "Look at {topic}.",
        "id_column": "id",
        "command": ["sh", dir.join("agent.sh")],
        "wait": true
    })
    .to_string();
    let (code, out, err) = on(&["tools/call", "batch_run", "--tool-args-json", &args]);
    assert_eq!(code, 0, "{out}{err}");
    let summary: Value = serde_json::from_str(&text_of(&result_of(&out))).expect("summary");
    assert_eq!(summary["exit_code"], 0, "{summary}");
    let output = std::fs::read_to_string(dir.join("workers-output.csv")).expect("output");
    assert!(
        output.contains("did a") && output.contains("did b"),
        "{output}"
    );
    let team = dir.join("workers-output.csv").display().to_string();
    let (code, out, _) = on(&[
        "tools/call",
        "status",
        &format!("team:={}", Value::from(team.clone())),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(text_of(&result_of(&out)).contains("2 completed"), "{out}");
    let (code, out, _) = on(&[
        "tools/call",
        "show",
        r#"item:="b""#,
        &format!("team:={}", Value::from(team)),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(text_of(&result_of(&out)).contains("did b"), "{out}");

    // A team whose item failed: its run is a result (exit 1), its status data, not an error.
    std::fs::write(dir.join("fail.csv"), "id,topic\nc,x\n").expect("csv");
    std::fs::write(
        dir.join("fail.sh"),
        "cat > /dev/null\nprintf '{\"status\":\"failed\",\"summary\":\"gave up on %s\"}' \"$RUNNER_ITEM_ID\" > \"$RUNNER_REPORT\"\n",
    )
    .expect("agent");
    let args = serde_json::json!({
        "csv_path": "fail.csv",
        "instruction": "Look at {topic}.",
        "id_column": "id",
        "output_csv_path": "failed-output.csv",
        "command": ["sh", dir.join("fail.sh")],
        "wait": true
    })
    .to_string();
    let (code, out, err) = on(&["tools/call", "batch_run", "--tool-args-json", &args]);
    assert_eq!(code, 0, "{out}{err}");
    let summary: Value = serde_json::from_str(&text_of(&result_of(&out))).expect("summary");
    assert_eq!(summary["exit_code"], 1, "{summary}");
    let failed = dir.join("failed-output.csv").display().to_string();
    let (code, out, err) = on(&[
        "tools/call",
        "status",
        &format!("team:={}", Value::from(failed)),
    ]);
    assert_eq!(
        code, 0,
        "the status of a failed team is no tool error: {out}{err}"
    );
    let status = result_of(&out);
    assert_ne!(status["isError"], true, "{out}");
    assert!(
        text_of(&status).contains("- c (failed)") && text_of(&status).contains("gave up on c"),
        "{out}"
    );

    let (code, _, err) = call(&["daemon", "stop"]);
    assert_eq!(code, 0, "{err}");
    // The server ends with its client.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left: Vec<String> = std::fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.trim_end() == format!("{runner} mcp"))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "runner mcp outlived its client: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
