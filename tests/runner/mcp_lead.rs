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
        // The team's workspace is archived once every item completed: the batch file it
        // is followed by still answers.
        let team = answer["follow"]["team"].clone();
        let (err, text) = c.call("status", json!({ "team": team }));
        assert!(!err && text.contains("1 completed"), "{text}");
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

/// Two run calls sent together (a lead retrying, two sub-agents): one runs, the other is
/// refused, and the refused one never touches the files the running one reads (it used to
/// write the inline instruction, then remove it on its refusal, under the running team).
#[test]
fn two_run_calls_sent_together_never_break_each_other() {
    for _ in 0..4 {
        let sb = Sandbox::new();
        let agent = crate::mcp::csv_batch(&sb);
        // Slow enough that the second call always comes while the first one runs.
        let script = format!("sleep 1\n{}", sb.read("agent.sh"));
        sb.write("agent.sh", &script);
        let mut c = Client::start(&sb);
        let call = json!({"name": "batch_run", "arguments": {
            "csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
            "command": ["sh", &agent], "wait": true}});
        let first = c.send_request("tools/call", call.clone());
        let second = c.send_request("tools/call", call);
        let answers = [c.response(first), c.response(second)];
        let texts: Vec<(bool, String)> = answers
            .iter()
            .map(|r| {
                let result = &r["result"];
                (
                    result["isError"].as_bool().unwrap_or(false),
                    result["content"][0]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect();
        let ran: Vec<&(bool, String)> = texts.iter().filter(|(err, _)| !err).collect();
        assert_eq!(ran.len(), 1, "one call runs: {texts:?}");
        let refused = texts.iter().find(|(err, _)| *err).expect("one is refused");
        assert!(refused.1.contains("batch_run of rows.csv"), "{refused:?}");
        let answer: Value = serde_json::from_str(&ran[0].1).expect("JSON");
        assert_eq!(answer["exit_code"], 0, "{answer}");
        assert_eq!(
            sb.read("workers-output.instruction.md"),
            "Look at {topic}.",
            "the running call's instruction is still there"
        );
        let statuses: Vec<String> = csv_rows(&sb.join("workers-output.csv"))
            .into_iter()
            .map(|r| r["status"].clone())
            .collect();
        assert_eq!(statuses, ["completed"; 3]);
    }
}

/// A long item (a pasted log, 200 KiB) is added as any other: the server hands its text to
/// the library, not to a command line (issue 51: over ~128 KiB failed with "Argument list
/// too long" when each tool ran `runner add` as a subprocess).
#[test]
fn todo_add_takes_an_item_longer_than_any_command_line() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb);
    let long = format!("Read this log: {}", "x".repeat(200 * 1024));
    let (err, text) = c.call("todo_add", json!({"text": long, "store": "S"}));
    assert!(!err, "{}", &text[..text.len().min(500)]);
    let inbox = sb.read("S/todo.md");
    assert!(inbox.contains(&long), "the whole text is in the inbox");
    let (err, text) = c.call("todo_list", json!({"store": "S"}));
    assert!(!err, "{}", &text[..text.len().min(500)]);
    let listed: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(1),
        "one item"
    );
}

#[test]
fn arguments_are_checked_by_field_and_an_unknown_one_is_refused_with_the_one_meant() {
    let sb = Sandbox::new();
    let agent = crate::mcp::csv_batch(&sb);
    let mut c = Client::start(&sb);
    let (err, text) = c.call(
        "batch_run",
        json!({"csv_path": "rows.csv", "instruction": "Look at {topic}.", "id_column": "id",
               "command": ["sh", agent], "wait": true}),
    );
    assert!(!err, "{text}");
    let before = sb.tree();
    let refusals = [
        (
            "batch_run",
            json!({"csv_path": "rows.csv", "instruction": "Other {topic}.", "max_concurency": 2}),
            "did you mean `max_concurrency`?",
        ),
        (
            "batch_run",
            json!({"csv_path": "rows.csv", "instruction": "Other {topic}.", "max_concurrency": "two"}),
            "`max_concurrency`",
        ),
        (
            "batch_run",
            json!({"csv_path": "rows.csv", "instruction": "Other {topic}.", "max_runtime_seconds": 0}),
            "`max_runtime_seconds`",
        ),
        ("todo_add", json!({"text": 5, "store": "S"}), "`text`"),
        ("todo_add", json!({"store": "S"}), "\"text\""),
        ("todo_resolve", json!({"store": "S", "ids": "k-1"}), "`ids`"),
        (
            "show",
            json!({"item": "a", "tem": "x"}),
            "did you mean `team`?",
        ),
    ];
    for (tool, args, says) in refusals {
        let (err, text) = c.call(tool, args.clone());
        assert!(err && text.contains(says), "{tool} {args}: {text}");
    }
    assert_eq!(sb.tree(), before, "a refused call writes nothing");
    // A team is a path, never a flag: `--watch` names no team here.
    let (err, text) = c.call("status", json!({"team": "--watch"}));
    assert!(err && text.contains("--watch"), "{text}");
    // An unknown tool is named, with the one meant (it was "tool not found").
    let r = c.request("tools/call", json!({"name": "todo_lst", "arguments": {}}));
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("unknown tool `todo_lst`; did you mean `todo_list`?"),
        "{r}"
    );
}

#[test]
fn every_tool_has_a_title_annotations_and_an_output_schema_its_answers_follow() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb);
    let server = &c.init["result"]["serverInfo"];
    assert_eq!(server["name"], "teammate-runner", "{server}");
    assert_eq!(server["version"], env!("CARGO_PKG_VERSION"), "{server}");
    let r = c.request("tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().expect("tools").clone();
    for t in &tools {
        let name = t["name"].as_str().unwrap_or_default();
        assert!(t["title"].as_str().is_some_and(|s| !s.is_empty()), "{t}");
        let read_only = ["todo_list", "status", "show"].contains(&name);
        assert_eq!(t["annotations"]["readOnlyHint"], read_only, "{t}");
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        let input = t["inputSchema"].to_string();
        assert!(
            !input.contains("\"null\"") && !input.contains("uint"),
            "plain optional fields: {input}"
        );
    }
    let stop = tools.iter().find(|t| t["name"] == "stop").expect("stop");
    assert_eq!(stop["annotations"]["destructiveHint"], true, "{stop}");
    let schema_of = |name: &str| {
        let t = tools.iter().find(|t| t["name"] == name).expect("tool");
        jsonschema::validator_for(&t["outputSchema"]).expect("compiles")
    };
    let (err, _) = c.call("todo_add", json!({"text": "Audit the lexer", "store": "S"}));
    assert!(!err);
    for (tool, args) in [
        (
            "todo_add",
            json!({"text": "Audit the parser", "store": "S"}),
        ),
        ("todo_list", json!({"store": "S"})),
    ] {
        let r = c.request("tools/call", json!({"name": tool, "arguments": args}));
        let result = &r["result"];
        let structured = &result["structuredContent"];
        assert!(structured.is_object(), "{tool}: {r}");
        assert!(schema_of(tool).is_valid(structured), "{tool}: {structured}");
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap_or_default())
                .expect("the text is the same JSON");
        assert_eq!(&text, structured, "{tool}");
    }
}
