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
