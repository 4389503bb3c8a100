//! JSON Lines in and out (issue 31): `--input rows.jsonl` (one object per line, nested
//! values as compact JSON in `{col}`), `-o out.jsonl` (one object per row with typed
//! fields), their bad lines, and an input edited while the run goes on.

use std::process::Stdio;

use serde_json::{Value, json};

use crate::harness::{Sandbox, by_id, wait_for};

/// The fake agent's instruction, with the nested `meta` shown.
const INSTRUCTION: &str = "Handle {id}. MODE={mode} meta={meta} n={n}\n";

fn write_jsonl(sb: &Sandbox, lines: &[Value]) {
    let mut text = String::new();
    for l in lines {
        text.push_str(&l.to_string());
        text.push('\n');
    }
    sb.write("rows.jsonl", text);
    sb.write("instr.md", INSTRUCTION);
}

fn lines_of(sb: &Sandbox, rel: &str) -> Vec<Value> {
    sb.read(rel)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn a_jsonl_batch_shows_nested_values_as_compact_json_and_writes_the_csv() {
    let sb = Sandbox::new();
    write_jsonl(
        &sb,
        &[
            json!({"id": "a", "mode": "success", "meta": {"k": [1, 2]}, "n": 1}),
            // Keys in another order, one missing, and a blank line after it.
            json!({"n": 2.5, "mode": "failed", "id": "b"}),
        ],
    );
    std::fs::write(sb.join("rows.jsonl"), sb.read("rows.jsonl") + "\n").expect("append");
    let r = sb.fake_batch_of("rows.jsonl", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let prompt = sb.prompt("workers-output.runner", "a");
    assert!(
        prompt.contains("Handle a. MODE=success meta={\"k\":[1,2]} n=1"),
        "{prompt}"
    );
    let prompt = sb.prompt("workers-output.runner", "b");
    assert!(
        prompt.contains("Handle b. MODE=failed meta= n=2.5"),
        "{prompt}"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed");
    assert_eq!(rows["a"]["meta"], "{\"k\":[1,2]}");
    assert_eq!(rows["b"]["status"], "failed");
    assert_eq!(rows["b"]["meta"], "");
}

#[test]
fn a_jsonl_output_has_typed_fields_and_only_copies_the_rows_it_does_not_run() {
    let sb = Sandbox::new();
    write_jsonl(
        &sb,
        &[
            json!({"id": "a", "mode": "handoff", "meta": [1], "n": 1}),
            json!({"id": 2, "mode": "failed", "meta": null, "n": 2}),
        ],
    );
    let r = sb.fake_batch_of("rows.jsonl", &["-o", "out.jsonl"]);
    assert_eq!(r.code, 1, "{r:?}");
    let lines = lines_of(&sb, "out.jsonl");
    assert_eq!(lines.len(), 2);
    let (a, b) = (&lines[0], &lines[1]);
    assert_eq!(a["id"], json!("a"));
    assert_eq!(a["meta"], json!([1]), "the input's own value, not its text");
    assert_eq!(a["n"], json!(1));
    assert_eq!(a["status"], json!("completed"));
    assert_eq!(a["attempts"], json!(1));
    assert_eq!(a["exit_code"], json!(0));
    assert!(a["duration_s"].is_f64(), "{a}");
    assert_eq!(a["files_modified"], json!(["src/a.rs"]));
    assert_eq!(a["next_steps"], json!(["wire it in", "document it"]));
    assert_eq!(a["error"], Value::Null);
    assert_eq!(b["id"], json!(2), "a number id stays a number");
    assert_eq!(b["status"], json!("failed"));
    assert_eq!(b["failure_kind"], json!("agent_error"));

    // `--only failed` runs b again and copies a's line as it was.
    let before = sb.read("out.jsonl");
    let a_line = before.lines().next().expect("a line").to_owned();
    let r = sb.fake_batch_of("rows.jsonl", &["-o", "out.jsonl", "--only", "failed"]);
    assert_eq!(r.code, 1, "{r:?}");
    let after = sb.read("out.jsonl");
    assert_eq!(after.lines().next(), Some(a_line.as_str()));
    assert_eq!(lines_of(&sb, "out.jsonl")[1]["attempts"], json!(2));

    // A .jsonl file that is not an output of the runner is never replaced.
    sb.write("notes.jsonl", "{\"mine\": true}\n");
    let r = sb.fake_batch_of("rows.jsonl", &["-o", "notes.jsonl"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("is not a JSON Lines output of the runner"),
        "{r:?}"
    );
    assert_eq!(sb.read("notes.jsonl"), "{\"mine\": true}\n");
}

#[test]
fn bad_jsonl_lines_exit_2_naming_the_line_and_nothing_is_written() {
    let sb = Sandbox::new();
    sb.write("instr.md", INSTRUCTION);
    let cases: &[(&str, &str)] = &[
        (
            "{\"id\":\"a\",\"mode\":\"success\"}\n{\"id\":\"b\",\n",
            "rows.jsonl:2: this line is not JSON",
        ),
        (
            "{\"id\":\"a\"}\n\"just text\"\n",
            "rows.jsonl:2: this line is a JSON string, not an object",
        ),
        (
            "{\"id\":\"a\"}\n{\"id\":\"a\"}\n",
            "rows.jsonl:2: duplicate id `a` (first on line 1)",
        ),
        (
            "{\"id\":\"a\"}\n{\"mode\":\"x\"}\n",
            "rows.jsonl:2: this row has no `id`",
        ),
        ("{\"ident\":\"a\"}\n", "no row has the id key `id`"),
        ("\n", "there are no rows"),
    ];
    for (input, says) in cases {
        sb.write("rows.jsonl", input);
        let before = sb.tree();
        let r = sb.fake_batch_of("rows.jsonl", &[]);
        assert_eq!(r.code, 2, "{input:?}: {r:?}");
        assert!(r.stderr.contains(says), "{input:?}: {r:?}");
        assert_eq!(sb.tree(), before, "{input:?}: nothing written");
    }
    sb.write("rows.jsonl", "{\"id\":\"a\",\"mode\":\"success\"}\n");
    let r = sb.fake_batch_of("rows.jsonl", &["--delimiter", ";"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--delimiter"), "{r:?}");
}

#[test]
fn an_input_edited_while_the_run_goes_on_changes_nothing_of_the_run() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "wait_file"), ("b", "wait_file")]);
    let release = sb.join("release");
    let runner = sb
        .fake_batch_cmd(&["--jobs", "1"])
        .env("RELEASE_FILE", &release)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn runner");
    wait_for("the first teammate to start", 30, || {
        sb.join("workers-output.runner/teammates/1-a/prompt.md")
            .is_file()
    });
    // Another header and other rows, while a runs and b has not been read yet.
    sb.write("in.csv", "key,what\nz,nothing\n");
    std::fs::write(&release, "go").expect("release");
    let out = runner.wait_with_output().expect("runner ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("in.csv changed while the run went on; the run and its outputs use the rows as they were"),
        "{stderr}"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows.len(), 2, "{rows:?}");
    for id in ["a", "b"] {
        assert_eq!(
            rows[id]["status"], "completed",
            "{id}: {}",
            rows[id]["error"]
        );
        assert_eq!(rows[id]["mode"], "wait_file");
    }
    assert!(sb.survivors_after(1.0).is_empty());
}
