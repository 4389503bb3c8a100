//! `runner mcp` as a lead agent relies on it (issue 51), over the plain JSON-RPC client of
//! [`crate::mcp`]: a cancelled waited call and the `stop` tool interrupt the team as Ctrl-C
//! does (items `cancelled`, outputs written, nothing left running).

use serde_json::{Value, json};

use crate::harness::{Sandbox, csv_rows, wait_for};
use crate::mcp::{Client, sleeping_batch, start_sleeping_team};

/// The statuses of `workers-output.csv`, by id.
fn statuses(sb: &Sandbox) -> Vec<(String, String)> {
    csv_rows(&sb.join("workers-output.csv"))
        .into_iter()
        .map(|r| (r["id"].clone(), r["status"].clone()))
        .collect()
}

/// The processes of the sandbox but the server's own, after a grace of 5 s.
fn teammates_left(sb: &Sandbox, c: &Client) -> Vec<(u32, String)> {
    let server = c.child.id();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let live: Vec<(u32, String)> = sb
            .live_processes()
            .into_iter()
            .filter(|(pid, _)| *pid != server)
            .collect();
        if live.is_empty() || std::time::Instant::now() > until {
            return live;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn cancelled_both(sb: &Sandbox) {
    assert_eq!(
        statuses(sb),
        [
            ("a".into(), "cancelled".into()),
            ("b".into(), "cancelled".into())
        ],
        "{}",
        sb.read("workers-output.csv")
    );
}

#[test]
fn a_cancelled_waited_run_interrupts_its_team_as_ctrl_c_does() {
    let sb = Sandbox::new();
    let agent = sleeping_batch(&sb);
    let mut c = Client::start(&sb);
    let id = c.send_request(
        "tools/call",
        json!({"name": "batch_run", "arguments": {
            "csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
            "command": ["sh", agent], "wait": true}}),
    );
    wait_for("both teammates to run", 30, || {
        sb.read_opt("a.pid").is_some() && sb.read_opt("b.pid").is_some()
    });
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id, "reason": "the lead's time-out"}}),
    );
    // A lead's retry after its cancel waits for the interrupted run to end (instead of
    // being refused because a run is under way), then is its own call.
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "missing.csv", "instruction_path": "x.md", "command": ["sh", "-c", "true"]}),
    );
    assert!(err && !text.contains("one run at a time"), "{text}");
    cancelled_both(&sb);
    assert_eq!(
        teammates_left(&sb, &c),
        Vec::new(),
        "teammates outlived the cancel"
    );
    // The server goes on.
    let (err, text) = c.call("status", json!({"team": "workers-output.csv"}));
    assert!(!err && text.contains("cancelled"), "{text}");
    assert!(
        !c.notes.iter().any(|n| n["id"] == id),
        "no answer to a cancelled request: {:?}",
        c.notes
    );
}

#[test]
fn stop_interrupts_a_background_team_and_answers_with_its_status() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb);
    let (err, text) = c.call("stop", json!({}));
    assert!(err && text.contains("no team is running"), "{text}");
    start_sleeping_team(&sb, &mut c);
    let (err, text) = c.call("stop", json!({"team": "elsewhere.csv"}));
    assert!(err && text.contains("nothing was stopped"), "{text}");
    let (err, text) = c.call("stop", json!({"team": "workers-output.csv"}));
    assert!(!err, "{text}");
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    assert!(
        answer["status"]
            .as_str()
            .is_some_and(|s| s.contains("cancelled")),
        "{answer}"
    );
    cancelled_both(&sb);
    assert_eq!(
        teammates_left(&sb, &c),
        Vec::new(),
        "teammates outlived stop"
    );
    let (err, text) = c.call("stop", json!({}));
    assert!(err && text.contains("no team is running"), "{text}");
}

/// The `id` of the open inbox item titled `title` in `todo_list`'s answer.
fn id_of(listed: &Value, title: &str) -> String {
    listed["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["title"] == title))
        .and_then(|i| i["id"].as_str())
        .unwrap_or_else(|| panic!("no id for {title}: {listed}"))
        .to_owned()
}

#[test]
fn todo_resolve_takes_stable_ids_refuses_gone_ones_and_names_what_it_moved() {
    let sb = Sandbox::new();
    let agent = crate::mcp::csv_batch(&sb);
    let mut c = Client::start(&sb);
    for text in ["Alpha", "Beta", "Gamma", "Delta"] {
        let (err, text) = c.call("todo_add", json!({"text": text, "store": "S"}));
        assert!(!err, "{text}");
    }
    let (err, text) = c.call("todo_list", json!({"store": "S"}));
    assert!(!err, "{text}");
    let listed: Value = serde_json::from_str(&text).expect("JSON");
    // The user confirmed items 1 and 3: Alpha and Gamma.
    let (alpha, gamma) = (id_of(&listed, "Alpha"), id_of(&listed, "Gamma"));
    let mut moved = Vec::new();
    for id in [&alpha, &gamma] {
        let (err, text) = c.call(
            "todo_resolve",
            json!({"store": "S", "ids": [id], "command": ["sh", agent], "wait": true}),
        );
        assert!(!err, "{text}");
        let answer: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(answer["exit_code"], 0, "{answer}");
        assert_eq!(answer["items"][0]["id"], json!(id), "{answer}");
        assert!(
            answer["follow"]["team"]
                .as_str()
                .is_some_and(|t| t.ends_with(".md")),
            "followed by its batch file: {answer}"
        );
        moved.push(answer["items"][0]["title"].clone());
    }
    assert_eq!(moved, [json!("Alpha"), json!("Gamma")], "never Delta");
    let before = sb.tree();
    let (err, text) = c.call(
        "todo_resolve",
        json!({"store": "S", "ids": [alpha], "command": ["sh", agent], "wait": true}),
    );
    assert!(err && text.contains("no open item has the id"), "{text}");
    assert_eq!(
        sb.tree(),
        before,
        "a gone id runs nothing and changes nothing"
    );
    let inbox = sb.read("S/todo.md");
    assert!(inbox.contains("Beta") && inbox.contains("Delta"), "{inbox}");
}
