//! BATCH.md `raw_columns` (issue 56): an output field that legitimately starts like a
//! formula (a patch's `@@`, a diff's `-`) is written byte for byte, while every other agent
//! value keeps the formula guard's leading `'`; a name that is no output field is refused
//! before anything is written.

use crate::harness::{Run, Sandbox, by_id};

/// The patch every teammate reports: it starts with `@@` and has `-`/`+` lines.
const PATCH: &str = "@@ -1 +1 @@\n-old\n+new\n";

/// The agent: notes each start in `starts.log` beside it, and reports [`PATCH`] as `patch`
/// and `-x` as `note` (with stages, only the `fix` stage has them).
const AGENT: &str = r#"dir=$(dirname "$0")
printf '%s\n' "$RUNNER_ITEM_ID" >> "$dir/starts.log"
case "$RUNNER_STAGE" in
  audit) printf '{"status":"completed","summary":"audited"}' > "$RUNNER_REPORT";;
  *) printf '{"status":"completed","summary":"fixed","output":{"patch":"@@ -1 +1 @@\\n-old\\n+new\\n","note":"-x"}}' > "$RUNNER_REPORT";;
esac
"#;

const SCHEMA: &str = r#"{"type":"object","properties":{"patch":{"type":"string"},"note":{"type":"string"}},"required":["patch","note"]}"#;

/// A batch of rows `a` and `b` whose frontmatter has `extra` lines.
fn batch_file(sb: &Sandbox, extra: &str) {
    let agent = sb.write("agent.sh", AGENT);
    sb.write("workers-input.csv", "id\na\nb\n");
    sb.write(
        "BATCH.md",
        format!(
            "---\nid_column: id\nrunner: exec\ncommand: [sh, {}]\noutput_schema: {SCHEMA}\n{extra}---\nFix {{id}}.\n",
            agent.display()
        ),
    );
}

fn run(sb: &Sandbox, flags: &[&str]) -> Run {
    let mut args = vec!["batch", "BATCH.md", "--format", "plain"];
    args.extend_from_slice(flags);
    sb.run(&args)
}

fn starts(sb: &Sandbox) -> usize {
    sb.read_opt("starts.log")
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn a_raw_column_keeps_the_agents_patch_byte_for_byte_and_other_values_stay_guarded() {
    let sb = Sandbox::new();
    batch_file(&sb, "");
    let r = run(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        rows["a"]["patch"],
        format!("'{PATCH}"),
        "guarded without the key"
    );

    // The key added, the same command again: nothing runs, the output is written again
    // from the team's records, the patch as the agent gave it.
    batch_file(&sb, "raw_columns: [patch]\n");
    let r = run(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(starts(&sb), 2, "completed rows are not run again");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b"] {
        assert_eq!(rows[id]["patch"], PATCH, "row {id}: kept byte for byte");
        assert_eq!(
            rows[id]["note"], "'-x",
            "row {id}: a field not named stays guarded"
        );
    }

    // An `--only` replay writes the row it runs raw and copies the other as it was.
    let r = run(&sb, &["--only", "a"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(starts(&sb), 3, "row a ran again");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["patch"], PATCH);
    assert_eq!(rows["b"]["patch"], PATCH);
    assert_eq!(rows["a"]["note"], "'-x");

    // JSON Lines needs no guard: the value is the agent's, with or without the key.
    let r = run(&sb, &["-o", "out.jsonl"]);
    assert_eq!(r.code, 0, "{r:?}");
    let first: serde_json::Value =
        serde_json::from_str(sb.read("out.jsonl").lines().next().expect("a line")).expect("JSON");
    assert_eq!(first["patch"], PATCH);
    assert_eq!(first["note"], "-x");
}

#[test]
fn a_raw_column_that_is_no_output_field_is_refused_before_anything_is_written() {
    let sb = Sandbox::new();
    batch_file(&sb, "raw_columns: [pach]\n");
    let r = run(&sb, &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("BATCH.md:6"),
        "names the file and line: {r:?}"
    );
    assert!(
        r.stderr.contains("`pach`") && r.stderr.contains("did you mean `patch`?"),
        "{r:?}"
    );
    assert_eq!(starts(&sb), 0, "no teammate started");
    assert!(!sb.join("workers-output.csv").exists(), "no output written");
    assert!(
        !sb.join("workers-output.runner").exists(),
        "no team workspace"
    );

    // A runner column is not an agent's output field either.
    batch_file(&sb, "raw_columns: summary\n");
    let r = run(&sb, &["--dry-run"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("its output fields are: patch, note"),
        "{r:?}"
    );
}

#[test]
fn a_raw_column_named_twice_is_refused_before_anything_is_written() {
    let sb = Sandbox::new();
    batch_file(&sb, "raw_columns: [patch, note, patch]\n");
    let r = run(&sb, &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("BATCH.md:6") && r.stderr.contains("`patch` twice"),
        "names the file, the line and the name: {r:?}"
    );
    assert_eq!(starts(&sb), 0, "no teammate started");
    assert!(!sb.join("workers-output.csv").exists(), "no output written");
}

#[test]
fn a_fix_stages_patch_is_kept_raw_by_its_stage_column_name() {
    let sb = Sandbox::new();
    let agent = sb.write("agent.sh", AGENT);
    sb.write("workers-input.csv", "id\na\n");
    let staged = |raw: &str| {
        sb.write(
            "BATCH.md",
            format!(
                "---\nid_column: id\nrunner: exec\ncommand: [sh, {}]\nraw_columns: [{raw}]\nstages:\n  - name: audit\n    instruction: \"Audit {{id}}.\"\n  - name: fix\n    instruction: \"Fix {{id}}.\"\n    output_schema: {SCHEMA}\n---\n",
                agent.display()
            ),
        );
    };
    staged("patch");
    let r = run(&sb, &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("BATCH.md:5"), "{r:?}");
    assert!(r.stderr.contains("did you mean `fix.patch`?"), "{r:?}");
    assert_eq!(starts(&sb), 0, "{r:?}");

    staged("fix.patch");
    let r = run(&sb, &["--dry-run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("but for fix.patch (raw_columns)"),
        "the dry run says which field is written as given: {r:?}"
    );
    let r = run(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["fix.patch"], PATCH);
    assert_eq!(rows["a"]["fix.note"], "'-x");
}
