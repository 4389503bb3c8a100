//! Verdicts at the edges (issue 50): reports and errors as real agents and CLIs write them.

use crate::harness::{Sandbox, by_id};

#[test]
fn a_report_file_with_a_byte_order_mark_and_a_lone_surrogate_completes() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\na\n");
    sb.write("instr.md", "Do {id}\n");
    // PowerShell's / Python's utf-8-sig BOM, then a surrogateescape'd file name.
    let agent = [
        "sh",
        "-c",
        r#"printf '\357\273\277{"status":"completed","summary":"renamed caf\\udc80.txt"}' > "$RUNNER_REPORT""#,
    ];
    let r = sb.batch(&["--id-column", "id", "--format", "plain"], &agent);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed", "{:?}", rows["a"]);
    assert_eq!(rows["a"]["summary"], "renamed caf\u{FFFD}.txt");
}

#[test]
fn characters_xml_forbids_never_reach_the_junit_file_raw() {
    let sb = Sandbox::new();
    // An id with U+FFFF; a failed report whose summary holds U+FFFE; a log with a raw \x01.
    sb.write("in.csv", "id\nz\u{FFFF}\n");
    sb.write("instr.md", "Do {id}\n");
    let agent = [
        "sh",
        "-c",
        "printf 'bell \\001 here\\n'; printf '{\"status\":\"failed\",\"summary\":\"bad \\357\\277\\276 char\"}' > \"$RUNNER_REPORT\"; exit 1",
    ];
    let r = sb.batch(
        &["--id-column", "id", "--format", "plain", "--junit", "j.xml"],
        &agent,
    );
    assert_eq!(r.code, 1, "{r:?}");
    let xml = sb.read("j.xml");
    for c in ['\u{FFFE}', '\u{FFFF}', '\u{1}'] {
        assert!(!xml.contains(c), "{c:?} is in the file raw:\n{xml}");
    }
    let doc = roxmltree::Document::parse(&xml).expect("the JUnit file is XML");
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase"))
        .expect("a test case");
    assert!(
        case.attribute("name")
            .is_some_and(|n| n.contains("z\u{FFFD}")),
        "the id, replaced visibly: {xml}"
    );
    let failure = case
        .children()
        .find(|n| n.has_tag_name("failure"))
        .expect("a failure");
    assert!(
        failure
            .attribute("message")
            .is_some_and(|m| m.contains("bad \u{FFFD} char")),
        "{xml}"
    );
    let out = case
        .children()
        .find(|n| n.has_tag_name("system-out"))
        .and_then(|n| n.text())
        .unwrap_or_default();
    assert!(out.contains("bell \u{FFFD} here"), "the log tail: {xml}");
}

#[test]
fn a_spreadsheet_s_trailing_empty_records_are_skipped_with_one_warning() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id,note\r\na,x\r\nb,y\r\n,\r\n,\r\n,\r\n");
    sb.write("instr.md", "Do {id}\n");
    let agent = [
        "sh",
        "-c",
        r#"printf '{"status":"completed","summary":"ok"}' > "$RUNNER_REPORT""#,
    ];
    let r = sb.batch(&["--format", "plain"], &agent);
    assert_eq!(r.code, 0, "{r:?}");
    let said = "in.csv: skipped 3 empty records after the last row";
    assert_eq!(r.stderr.matches(said).count(), 1, "{r:?}");
    let rows = crate::harness::csv_rows(&sb.join("workers-output.csv"));
    assert_eq!(rows.len(), 2, "only the two rows ran: {rows:?}");
    assert!(rows.iter().all(|r| r["status"] == "completed"), "{rows:?}");
}

#[test]
fn a_nul_byte_in_a_cell_or_a_header_only_input_is_refused_before_anything_runs() {
    let sb = Sandbox::new();
    sb.write("instr.md", "Do {id}\n");
    sb.write("nul.csv", b"id,note\na,fine\nb,bro\0ken\n");
    sb.write("header.csv", "id,note\n");
    sb.write("empty.jsonl", "\n");
    let agent = [
        "sh",
        "-c",
        r#"touch ran; printf '{"status":"completed","summary":"ok"}' > "$RUNNER_REPORT""#,
    ];
    let before = sb.tree();
    for (input, said) in [
        ("nul.csv", "nul.csv:3: column 2 (`note`) holds a NUL byte"),
        (
            "header.csv",
            "header.csv: there are no rows, only the header",
        ),
        ("empty.jsonl", "empty.jsonl: there are no rows"),
    ] {
        let r = sb
            .cmd(&[
                "batch",
                "--input",
                input,
                "--instruction",
                "instr.md",
                "--format",
                "plain",
                "--",
                agent[0],
                agent[1],
                agent[2],
            ])
            .output()
            .expect("run");
        let r: crate::harness::Run = r.into();
        assert_eq!(r.code, 2, "{input}: {r:?}");
        assert!(r.stderr.contains(said), "{input}: {r:?}");
        assert_eq!(sb.tree(), before, "{input}: nothing on disk changed");
    }
}

#[test]
fn a_cli_saying_its_request_is_too_large_fails_that_item_at_once_as_input() {
    let sb = Sandbox::new();
    sb.write("in.csv", "id\nbig\nok\n");
    sb.write("instr.md", "Do {id}\n");
    // The agent CLI's words for OpenAI's 429 that no wait can cure (codex, aider, opencode
    // quote the API's message).
    let agent = [
        "sh",
        "-c",
        r#"echo x >> "tries-$RUNNER_ITEM_ID"; if [ "$RUNNER_ITEM_ID" = big ]; then echo "Error: 429 Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 45000." >&2; exit 1; fi; printf '{"status":"completed","summary":"ok"}' > "$RUNNER_REPORT""#,
    ];
    let r = sb.batch(
        &[
            "--id-column",
            "id",
            "--format",
            "plain",
            "--retries",
            "2",
            "--retry-delay",
            "10ms",
            "--rate-limit-wait",
            "2s",
        ],
        &agent,
    );
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["big"]["failure_kind"], "input", "{:?}", rows["big"]);
    assert!(
        rows["big"]["error"].contains("Request too large for gpt-4o"),
        "{:?}",
        rows["big"]
    );
    assert_eq!(sb.read("tries-big").lines().count(), 1, "never tried again");
    assert_eq!(rows["ok"]["status"], "completed");
    let journal = sb.read("workers-output.runner/journal.jsonl");
    assert!(!journal.contains("\"team_paused\""), "{journal}");
}
