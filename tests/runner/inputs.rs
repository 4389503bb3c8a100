//! Inputs the runner must never lose or misread (issue 14): outputs that would overwrite
//! inputs, workspaces of another batch, folders whose names are not UTF-8, ids that are not
//! valid branch names, set-up output on branches, `--merge` resuming its own batch, and
//! reports that contradict themselves.

use crate::harness::{Sandbox, by_id};

#[test]
fn a_completed_report_that_contradicts_itself_is_failed_with_the_reason() {
    let sb = Sandbox::new();
    sb.write(
        "agent.py",
        r#"import json, os, sys
sys.stdin.read()
i = os.environ["RUNNER_ITEM_ID"]
rep = {"id": i, "status": "completed", "summary": "did " + i, "tests": "passed"}
if i == "tests_failed":
    rep["tests"] = "failed"
if i == "blank":
    rep["summary"] = "  "
json.dump(rep, open(os.environ["RUNNER_REPORT"], "w"))
"#,
    );
    sb.write("in.csv", "id\ntests_failed\nblank\ngood\n");
    sb.write("instr.md", "Handle {id}\n");
    let r = sb.batch(
        &["--id-column", "id", "--format", "plain"],
        &["python3", "agent.py"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["tests_failed"]["status"], "failed");
    assert!(
        rows["tests_failed"]["error"].contains("tests failed"),
        "{:?}",
        rows["tests_failed"]
    );
    assert_eq!(rows["blank"]["status"], "failed");
    assert!(
        rows["blank"]["error"].contains("summary is blank"),
        "{:?}",
        rows["blank"]
    );
    assert_eq!(rows["good"]["status"], "completed");
}
