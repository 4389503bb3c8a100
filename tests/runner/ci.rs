//! CI and scale: --only replays, shards and merge, JUnit, JSON events, plain output
//! (issue: CI and scale).

use std::collections::BTreeSet;

use crate::harness::{Sandbox, agent, by_id, csv_rows};

const TIMING: &[&str] = &["duration_s", "started_at", "finished_at", "log"];

fn setup(sb: &Sandbox, rows: &[(&str, &str)]) {
    sb.write_rows(rows);
}

fn batch(sb: &Sandbox, extra: &[&str]) -> crate::harness::Run {
    sb.fake_batch(extra)
}

/// `n` rows `item-0`… whose fake agent succeeds.
fn succeeding_rows(sb: &Sandbox, n: usize) {
    let rows: Vec<(String, &str)> = (0..n).map(|i| (format!("item-{i}"), "success")).collect();
    let refs: Vec<(&str, &str)> = rows.iter().map(|(a, b)| (a.as_str(), *b)).collect();
    setup(sb, &refs);
}

/// The ids a `--dry-run` plan lists (its `… (id ID)` lines), in order.
fn planned(r: &crate::harness::Run) -> Vec<String> {
    assert_eq!(r.code, 0, "{r:?}");
    r.stdout
        .lines()
        .filter_map(|l| {
            l.trim()
                .split_once("(id ")
                .map(|(_, rest)| rest.trim_end_matches(')').to_string())
        })
        .collect()
}

fn raw_line<'a>(text: &'a str, id: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(&format!("{id},")))
        .expect("row")
}

#[test]
fn only_failed_replays_from_the_output_alone_and_keeps_completed_rows_byte_identical() {
    let sb = Sandbox::new();
    setup(
        &sb,
        &[("a", "success"), ("b", "noreport"), ("c", "success")],
    );
    assert_eq!(batch(&sb, &[]).code, 1);
    let before = sb.read("workers-output.csv");
    // A CI job has only the output artifact: no workspace, no journal.
    std::fs::remove_dir_all(sb.join("workers-output.runner")).expect("rm");
    setup(&sb, &[("a", "success"), ("b", "success"), ("c", "success")]);
    let r = batch(&sb, &["--only", "failed"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("1 item(s)"), "only b ran: {r:?}");
    let after = sb.read("workers-output.csv");
    assert_eq!(raw_line(&after, "a"), raw_line(&before, "a"));
    assert_eq!(raw_line(&after, "c"), raw_line(&before, "c"));
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["b"]["status"], "completed");
    assert_eq!(
        rows["b"]["attempts"], "2",
        "attempts count across runs, also from the output alone: {:?}",
        rows["b"]
    );
    assert_eq!(rows.len(), 3);
    // --only ID runs named items and keeps the rest as they were.
    let r = batch(&sb, &["--only", "c"]);
    assert_eq!(r.code, 0, "{r:?}");
    let again = sb.read("workers-output.csv");
    assert_eq!(raw_line(&again, "a"), raw_line(&after, "a"));
    assert_eq!(raw_line(&again, "b"), raw_line(&after, "b"));
    // (Its row may come out byte-identical within the same second, so ask the run.)
    assert!(
        r.stdout.contains("COMPLETED") && r.stdout.contains("3-c"),
        "c ran again: {r:?}"
    );
    // Named again, c is redone although this workspace's journal has it completed.
    let r = batch(&sb, &["--only", "c"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("from an earlier run"), "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    // Its third attempt across runs: the first run's (its output artifact), then two named.
    assert_eq!(
        rows["c"]["attempts"], "3",
        "a third attempt: {:?}",
        rows["c"]
    );
    // Replaying with no previous output is an input error.
    let sb2 = Sandbox::new();
    setup(&sb2, &[("a", "success")]);
    let r = batch(&sb2, &["--only", "failed"]);
    assert_eq!(r.code, 2, "{r:?}");
}

/// A blocked row waits for a person: `--only failed` leaves it (and its row) alone, `--only
/// blocked` runs exactly it, and naming it runs it too.
#[test]
fn only_failed_leaves_blocked_rows_for_a_person_and_only_blocked_runs_them() {
    let sb = Sandbox::new();
    setup(
        &sb,
        &[("a", "success"), ("b", "blocked"), ("c", "noreport")],
    );
    assert_eq!(batch(&sb, &[]).code, 1);
    let before = sb.read("workers-output.csv");
    setup(&sb, &[("a", "success"), ("b", "success"), ("c", "success")]);
    let r = batch(&sb, &["--only", "failed"]);
    assert_eq!(r.code, 0, "what ran completed: {r:?}");
    assert!(r.stdout.contains("1 item(s)"), "only c ran: {r:?}");
    let after = sb.read("workers-output.csv");
    assert_eq!(
        raw_line(&after, "b"),
        raw_line(&before, "b"),
        "b's row is kept"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        (rows["b"]["status"].as_str(), rows["c"]["status"].as_str()),
        ("blocked", "completed")
    );
    let r = batch(&sb, &["--only", "blocked"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("1 item(s)"), "only b ran: {r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert!(
        rows.values().all(|r| r["status"] == "completed"),
        "{rows:?}"
    );
    // Nothing is blocked any more: --only blocked runs nothing.
    let r = batch(&sb, &["--only", "blocked", "--dry-run"]);
    assert_eq!(planned(&r), Vec::<String>::new());
}

#[test]
fn shards_cover_every_item_exactly_once_for_n_1_to_7() {
    let sb = Sandbox::new();
    succeeding_rows(&sb, 40);
    for n in 1..=7 {
        let mut seen = Vec::new();
        for k in 1..=n {
            seen.extend(planned(&batch(
                &sb,
                &["--dry-run", "--shard", &format!("{k}/{n}")],
            )));
        }
        let unique: BTreeSet<&String> = seen.iter().collect();
        assert_eq!(seen.len(), 40, "N={n}: every item exactly once");
        assert_eq!(unique.len(), 40, "N={n}");
    }
    assert!(
        !sb.join("workers-output.shard-1-of-1.runner").exists(),
        "--dry-run writes nothing"
    );
}

/// `--shard auto` in a Kubernetes Indexed Job: K from JOB_COMPLETION_INDEX (0-based), N from
/// `--shard-count` or RUNNER_SHARD_COUNT; it picks the same items as `--shard K/N`. A
/// `--shard-count` without `--shard auto` would be ignored, so it is refused; the variable
/// alone (set for a whole CI job) asks for nothing.
#[test]
fn shard_auto_takes_its_slice_from_the_indexed_job() {
    let sb = Sandbox::new();
    succeeding_rows(&sb, 12);
    let with_env = |extra: &[&str], env: &[(&str, &str)]| -> crate::harness::Run {
        let mut cmd = sb.fake_batch_cmd(&[&["--dry-run"], extra].concat());
        cmd.envs(env.iter().copied());
        cmd.output().expect("spawn").into()
    };
    let explicit = planned(&with_env(&["--shard", "2/3"], &[]));
    assert!(!explicit.is_empty() && explicit.len() < 12, "{explicit:?}");
    let index = ("JOB_COMPLETION_INDEX", "1");
    let count = ("RUNNER_SHARD_COUNT", "3");
    let by_flag = with_env(&["--shard", "auto", "--shard-count", "3"], &[index]);
    assert_eq!(planned(&by_flag), explicit);
    assert_eq!(
        planned(&with_env(&["--shard", "auto"], &[index, count])),
        explicit
    );
    assert_eq!(planned(&with_env(&[], &[count])).len(), 12);
    let r = with_env(&["--shard-count", "3"], &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("add --shard auto"), "{r:?}");
    let r = with_env(&["--shard", "auto"], &[index]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("--shard-count N or set RUNNER_SHARD_COUNT"),
        "{r:?}"
    );
}

/// A trial ran `--shard K/3 -o sh.csv` for K = 1, 2, 3: each shard replaced the previous
/// one's rows in sh.csv (and four shard processes sharing one folder met one lock). A file
/// given with `--shard` carries the shard's number, as the default name does: each shard
/// writes its own output and workspace, and merge joins them.
#[test]
fn shards_given_one_output_file_each_write_their_own() {
    let sb = Sandbox::new();
    succeeding_rows(&sb, 6);
    for k in 1..=3 {
        let r = batch(
            &sb,
            &[
                "--shard",
                &format!("{k}/3"),
                "-o",
                "sh.csv",
                "--junit",
                "j.xml",
            ],
        );
        assert_eq!(r.code, 0, "{r:?}");
        assert!(
            sb.join(&format!("sh.shard-{k}-of-3.csv")).is_file(),
            "{r:?}"
        );
        // Its JUnit report too, so shards never overwrite each other's.
        assert!(sb.join(&format!("j.shard-{k}-of-3.xml")).is_file(), "{r:?}");
        assert!(
            sb.join(&format!("sh.shard-{k}-of-3.runner")).is_dir(),
            "{r:?}"
        );
    }
    assert!(!sb.join("sh.csv").exists());
    let r = sb.run(&[
        "merge",
        "sh.shard-1-of-3.csv",
        "sh.shard-2-of-3.csv",
        "sh.shard-3-of-3.csv",
        "-o",
        "sh.csv",
        "--junit",
        "reports/merged.xml",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(by_id(&sb.join("sh.csv"), "id").len(), 6);
    // One JUnit report for the batch: one suite named after it, one case per row.
    let xml = sb.read("reports/merged.xml");
    assert_eq!(xml.matches("<testsuite ").count(), 1, "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), 6, "{xml}");
    assert!(xml.contains("name=\"sh (batch "), "{xml}");
    for i in 0..6 {
        assert_eq!(xml.matches(&format!("(item-{i})")).count(), 1, "{xml}");
    }
    // The same shard again resumes into its own output.
    let r = batch(&sb, &["--shard", "1/3", "-o", "sh.csv"]);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn merging_three_shards_equals_the_one_machine_output_apart_from_timing() {
    let sb = Sandbox::new();
    let rows: Vec<(String, &str)> = (0..15)
        .map(|i| {
            (
                format!("r{i}"),
                if i % 4 == 0 { "noreport" } else { "success" },
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = rows.iter().map(|(a, b)| (a.as_str(), *b)).collect();
    setup(&sb, &refs);
    batch(&sb, &["--output", "whole.csv"]);
    for k in 1..=3 {
        batch(&sb, &["--shard", &format!("{k}/3")]);
    }
    let r = sb.run(&[
        "merge",
        "workers-output.shard-1-of-3.csv",
        "workers-output.shard-3-of-3.csv",
        "workers-output.shard-2-of-3.csv",
        "-o",
        "merged.csv",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let strip = |rows: Vec<std::collections::BTreeMap<String, String>>| {
        rows.into_iter()
            .map(|mut r| {
                for t in TIMING {
                    r.remove(*t);
                }
                r
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        strip(csv_rows(&sb.join("merged.csv"))),
        strip(csv_rows(&sb.join("whole.csv")))
    );
}

#[test]
fn merge_refuses_mixed_batches_missing_shards_conflicts_and_strangers() {
    let sb = Sandbox::new();
    setup(
        &sb,
        &[
            ("a", "success"),
            ("b", "success"),
            ("c", "success"),
            ("d", "success"),
        ],
    );
    for k in 1..=2 {
        batch(&sb, &["--shard", &format!("{k}/2")]);
    }
    // Another batch: a different instruction.
    sb.write("instr2.md", "Other {id}. MODE={mode}\n");
    let f = agent("fake_agent.py");
    sb.run(&[
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr2.md",
        "--id-column",
        "id",
        "--shard",
        "2/2",
        "--output",
        "other.shard-2-of-2.csv",
        "--",
        "python3",
        &f,
    ]);
    // The same shard run again gives different timings: a conflicting duplicate.
    std::fs::copy(
        sb.join("workers-output.shard-1-of-2.csv"),
        sb.join("again.csv"),
    )
    .expect("copy");
    std::fs::copy(
        sb.join("workers-output.shard-1-of-2.csv.shard.json"),
        sb.join("again.csv.shard.json"),
    )
    .expect("copy");
    let text = sb.read("again.csv").replacen("completed", "failed", 1);
    sb.write("again.csv", text);
    sb.write("stranger.csv", "id\nx\n");
    let cases: &[(&[&str], &str)] = &[
        (
            &["workers-output.shard-1-of-2.csv", "other.shard-2-of-2.csv"],
            "belongs to another batch",
        ),
        (
            &["workers-output.shard-1-of-2.csv"],
            "missing shard(s) 2 of 2",
        ),
        (
            &[
                "workers-output.shard-1-of-2.csv",
                "again.csv",
                "workers-output.shard-2-of-2.csv",
            ],
            "given twice with different results",
        ),
        (&["stranger.csv"], "stranger.csv.shard.json"),
    ];
    for (inputs, want) in cases {
        let mut args = vec!["merge"];
        args.extend_from_slice(inputs);
        args.extend_from_slice(&["-o", "merged.csv"]);
        let r = sb.run(&args);
        assert_eq!(r.code, 2, "{inputs:?}: {r:?}");
        assert!(r.stderr.contains(want), "{inputs:?}: want {want:?}: {r:?}");
        assert!(!sb.join("merged.csv").exists());
    }
}

#[test]
fn junit_report_parses_and_counts_each_item() {
    let sb = Sandbox::new();
    setup(
        &sb,
        &[("a", "success"), ("b", "noreport"), ("c", "blocked")],
    );
    let r = batch(&sb, &["--junit", "junit.xml"]);
    assert_eq!(r.code, 1, "{r:?}");
    let xml = sb.read("junit.xml");
    let doc = roxmltree::Document::parse(&xml).expect("valid XML");
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("suite");
    assert_eq!(suite.attribute("tests"), Some("3"));
    assert_eq!(suite.attribute("failures"), Some("2"));
    // Named after the team and its batch: two batches whose outputs share a name are two
    // suites in CI.
    assert_eq!(suite.attribute("name"), Some("workers-output (in.csv)"));
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 3);
    let b = cases
        .iter()
        .find(|c| c.attribute("name").is_some_and(|n| n.contains("(b)")))
        .expect("b");
    let failure = b
        .children()
        .find(|n| n.has_tag_name("failure"))
        .expect("failure");
    assert!(
        failure
            .attribute("message")
            .is_some_and(|m| m.starts_with("failed: no report")),
        "{failure:?}"
    );
}

/// The `--format json` lines of `r`, each checked against docs/events.schema.json.
fn json_events(r: &crate::harness::Run) -> Vec<serde_json::Value> {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/docs/events.schema.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("schema"),
    )
    .expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    r.stdout
        .lines()
        .map(|line| {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
            let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{line}: {errors:?}");
            v
        })
        .collect()
}

/// The events of `events` named `name`.
fn named<'a>(events: &'a [serde_json::Value], name: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

#[test]
fn json_events_follow_the_documented_schema() {
    let sb = Sandbox::new();
    setup(&sb, &[("a", "success"), ("b", "flaky")]);
    let r = batch(
        &sb,
        &[
            "--format",
            "json",
            "--retries",
            "1",
            "--retry-delay",
            "10ms",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let kinds: Vec<String> = json_events(&r)
        .iter()
        .map(|v| v["event"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"));
    // run_finished ends the run's events; run_ended, once the outputs are written, the stream.
    assert_eq!(
        kinds[kinds.len().saturating_sub(2)..],
        ["run_finished".to_string(), "run_ended".to_string()]
    );
    assert_eq!(kinds.iter().filter(|k| *k == "item_finished").count(), 2);
    assert_eq!(
        kinds.iter().filter(|k| *k == "attempt_finished").count(),
        3,
        "b took two attempts"
    );
}

#[test]
fn run_started_says_how_many_items_a_resumed_run_will_not_run_again() {
    let sb = Sandbox::new();
    setup(
        &sb,
        &[("a", "success"), ("b", "noreport"), ("c", "success")],
    );
    let r = batch(&sb, &["--format", "json"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(named(&json_events(&r), "run_started")[0]["resumed"], 0);
    // a and c completed; b (now fixed) runs again.
    setup(&sb, &[("a", "success"), ("b", "success"), ("c", "success")]);
    let r = batch(&sb, &["--format", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let events = json_events(&r);
    assert_eq!(named(&events, "run_started")[0]["resumed"], 2, "{r:?}");
    assert_eq!(named(&events, "run_finished")[0]["resumed"], 2, "{r:?}");
    // Everything completed now: a full resume runs nothing, and says so up front.
    let r = batch(&sb, &["--format", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let events = json_events(&r);
    assert_eq!(named(&events, "run_started")[0]["resumed"], 3, "{r:?}");
    assert_eq!(named(&events, "run_finished")[0]["resumed"], 3, "{r:?}");
    assert!(named(&events, "attempt_started").is_empty(), "{r:?}");
}

#[test]
fn team_stopped_comes_before_the_items_it_skips_and_they_never_started() {
    let sb = Sandbox::new();
    setup(&sb, &[("a", "nonzero"), ("b", "success"), ("c", "success")]);
    let r = batch(&sb, &["--format", "json", "--jobs", "1", "--max-fail", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let events = json_events(&r);
    let place = |pred: &dyn Fn(&serde_json::Value) -> bool| {
        events.iter().position(pred).expect("the event")
    };
    let stopped = place(&|e| e["event"] == "team_stopped");
    assert_eq!(named(&events, "team_stopped").len(), 1, "{r:?}");
    let skipped: Vec<&serde_json::Value> = named(&events, "item_finished")
        .into_iter()
        .filter(|e| e["outcome"]["status"] == "skipped")
        .collect();
    assert_eq!(skipped.len(), 2, "{r:?}");
    for id in ["b", "c"] {
        let finished = place(&|e| e["event"] == "item_finished" && e["outcome"]["id"] == id);
        assert!(
            stopped < finished,
            "team_stopped before {id}'s item_finished: {r:?}"
        );
    }
    for s in skipped {
        // Never started: documented as "" (the schema allows "" only here).
        assert_eq!(s["outcome"]["started_at"], "", "{s}");
        assert_eq!(s["outcome"]["attempts"], 0, "{s}");
    }
}

#[test]
fn item_finished_carries_the_reports_hand_off_fields() {
    let sb = Sandbox::new();
    setup(&sb, &[("a", "handoff"), ("b", "noreport")]);
    let r = batch(&sb, &["--format", "json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let events = json_events(&r);
    let outcome = |id: &str| {
        named(&events, "item_finished")
            .into_iter()
            .find(|e| e["outcome"]["id"] == id)
            .map(|e| e["outcome"].clone())
            .expect("item_finished")
    };
    let a = outcome("a");
    assert_eq!(a["files_modified"], serde_json::json!(["src/a.rs"]), "{a}");
    assert_eq!(a["files_created"], serde_json::json!(["src/new.rs"]), "{a}");
    assert_eq!(a["tests"], "passed", "{a}");
    assert_eq!(a["blocker"], serde_json::Value::Null, "{a}");
    assert_eq!(
        a["next_steps"],
        serde_json::json!(["wire it in", "document it"]),
        "{a}"
    );
    // Without a report: empty lists, null texts — the same fields, never missing.
    let b = outcome("b");
    assert_eq!(b["files_modified"], serde_json::json!([]), "{b}");
    assert_eq!(b["tests"], serde_json::Value::Null, "{b}");
}

#[test]
fn plain_output_has_no_escape_codes_or_carriage_returns() {
    for format in ["plain", "human"] {
        let sb = Sandbox::new();
        setup(&sb, &[("a", "success"), ("b", "noreport")]);
        let r = batch(&sb, &["--format", format]);
        assert!(
            !r.stdout.contains('\u{1b}') && !r.stdout.contains('\r'),
            "{format}: {r:?}"
        );
        assert!(
            r.stdout.contains("COMPLETED") && r.stdout.contains("FAILED"),
            "{format}: one line per item: {r:?}"
        );
    }
}

#[test]
fn junit_marks_items_that_passed_on_a_retry_as_flaky_and_never_doubles_the_status() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "flaky"), ("b", "blocked")]);
    let r = sb.fake_batch(&[
        "--retries",
        "1",
        "--retry-delay",
        "0s",
        "--retry-on",
        "failed",
        "--junit",
        "j.xml",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let xml = sb.read("j.xml");
    let doc = roxmltree::Document::parse(&xml).expect("JUnit XML");
    let case = |name: &str| {
        doc.descendants()
            .find(|n| {
                n.has_tag_name("testcase") && n.attribute("name").is_some_and(|a| a.contains(name))
            })
            .unwrap_or_else(|| panic!("no test case {name}: {xml}"))
    };
    let flaky: Vec<_> = case("(a)")
        .children()
        .filter(|n| n.has_tag_name("flakyFailure"))
        .collect();
    assert_eq!(flaky.len(), 1, "{xml}");
    assert!(
        flaky[0]
            .attribute("message")
            .is_some_and(|m| m.starts_with("failed: exited with code 1")),
        "{xml}"
    );
    assert!(
        !case("(a)").children().any(|n| n.has_tag_name("failure")),
        "{xml}"
    );
    let failure = case("(b)")
        .children()
        .find(|n| n.has_tag_name("failure"))
        .expect("b failed");
    let message = failure.attribute("message").unwrap_or_default();
    assert!(
        message.starts_with("blocked: ") && !message.contains("blocked: blocked"),
        "{message}"
    );
}

#[test]
fn the_last_json_line_names_every_output_file_and_the_exit_code() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success"), ("b", "failed")]);
    let r = sb.fake_batch(&["--format", "json", "--junit", "j.xml"]);
    assert_eq!(r.code, 1, "{r:?}");
    let last = r.stdout.lines().last().expect("a line");
    let v: serde_json::Value = serde_json::from_str(last).expect("JSON");
    assert_eq!(v["event"], "run_ended", "{last}");
    assert_eq!(v["exit_code"], 1, "{last}");
    let outputs: Vec<&str> = v["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .filter_map(|o| o.as_str())
        .collect();
    // Absolute, though --junit was given relative to the folder the runner ran in.
    let csv = sb.join("workers-output.csv");
    let junit = sb.join("j.xml");
    assert_eq!(
        outputs,
        [csv.to_str().expect("UTF-8"), junit.to_str().expect("UTF-8")],
        "{last}"
    );
    assert!(
        !sb.read("workers-output.runner/journal.jsonl")
            .contains("run_ended"),
        "the journal never records it"
    );
}

/// One rule for every source (issue 31): an item may not wait for one in another shard —
/// that shard's run decides it, so this one would wait for nothing (a todo run pruned such
/// a prerequisite silently, a CSV run refused it). A chain of six crosses shards somewhere.
#[test]
fn a_prerequisite_in_another_shard_is_refused_for_csv_and_todo_alike() {
    let sb = Sandbox::new();
    let mut csv = String::from("id,mode,depends_on\nr1,success,\n");
    for i in 2..=6 {
        csv.push_str(&format!("r{i},success,r{}\n", i - 1));
    }
    sb.write_csv(&csv);
    let before = sb.tree();
    let r = batch(&sb, &["--shard", "1/3"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("in.csv: column `depends_on`: item r")
            && r.stderr.contains("which is in another shard"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written");

    std::fs::create_dir_all(sb.join("S")).expect("store");
    let mut todo = String::from("## Todo\n- [ ] one MODE=success\n");
    for i in 2..=6 {
        todo.push_str(&format!("- [ ] item {i} MODE=success @after:{}\n", i - 1));
    }
    sb.write("S/todo-3.md", &todo);
    let before = sb.tree();
    let f = agent("fake_agent.py");
    let r = sb.run(&["run", "S/todo-3.md", "--shard", "1/3", "--", "python3", &f]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("todo-3.md: item ") && r.stderr.contains("which is in another shard"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing written");
    // Unsharded, the chain runs in order.
    let r = sb.run(&["run", "S/todo-3.md", "--", "python3", &f]);
    assert_eq!(r.code, 0, "{r:?}");
}

/// `runner report --markdown` for `$GITHUB_STEP_SUMMARY`: counts and a table of what did not
/// complete, appended to the file (a step summary gathers several), or printed with `-`; it
/// never lands on an output.
#[test]
fn report_markdown_appends_a_summary_of_what_did_not_complete() {
    let sb = Sandbox::new();
    setup(&sb, &[("a", "success"), ("b", "noreport")]);
    assert_eq!(batch(&sb, &[]).code, 1);
    for _ in 0..2 {
        let r = sb.run(&[
            "report",
            "workers-output.csv",
            "--markdown",
            "ci/summary.md",
        ]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let md = sb.read("ci/summary.md");
    assert_eq!(
        md.matches("### runner: team `workers-output`").count(),
        2,
        "{md}"
    );
    assert!(
        md.contains("❌ **2 item(s)**: 1 completed, 1 failed"),
        "{md}"
    );
    assert!(
        md.contains("| b | failed | no_report | 1 |") && !md.contains("| a |"),
        "{md}"
    );
    let r = sb.run(&["report", "workers-output.csv", "--markdown", "-"]);
    assert!(r.stdout.contains("| b | failed |"), "{r:?}");
    let before = sb.tree();
    // Never appended to an output, the batch's instruction, or any file not a summary.
    for target in ["workers-output.csv", "instr.md", "in.csv"] {
        let r = sb.run(&["report", "workers-output.csv", "--markdown", target]);
        assert_eq!(r.code, 2, "{target}: {r:?}");
    }
    assert_eq!(sb.tree(), before);
}

/// A team is found again by whatever names it: the BATCH.md (its `output:` in a subfolder),
/// the folder given as the output, or the output file; `status --list` and `clean` find the
/// teams that a BATCH.md here names.
#[test]
fn a_team_is_found_by_its_batch_file_its_output_folder_or_its_output() {
    let sb = Sandbox::new();
    setup(&sb, &[("a", "success"), ("b", "noreport")]);
    let fake = agent("fake_agent.py");
    sb.write(
        "BATCH.md",
        format!(
            "---\ninput: in.csv\nid_column: id\noutput: out-http/workers-output.csv\ncommand: [python3, {fake:?}]\n---\nDo {{id}}\n"
        ),
    );
    let r = sb.run(&["batch", "BATCH.md", "--format", "plain"]);
    assert_eq!(r.code, 0, "{r:?}");
    for named in [
        "BATCH.md",
        "out-http",
        "out-http/",
        "out-http/workers-output.csv",
    ] {
        let r = sb.run(&["status", named]);
        assert_eq!(r.code, 0, "{named}: {r:?}");
        assert!(
            r.stdout.contains("out-http/workers-output.runner"),
            "{named}: {r:?}"
        );
        let r = sb.run(&["show", "b", named]);
        assert!(r.stdout.contains("Item b"), "{named}: {r:?}");
    }
    let r = sb.run(&["status", "--list"]);
    assert!(r.stdout.contains("out-http/workers-output.runner"), "{r:?}");
    let r = sb.run(&["clean", "--yes"]);
    assert!(r.stdout.contains("Removed team workers-output"), "{r:?}");
    assert!(!sb.join("out-http/workers-output.runner").exists());
    // Cleaned, it is found again in its archive by the same names.
    for named in ["BATCH.md", "out-http"] {
        let r = sb.run(&["status", named]);
        assert!(r.stdout.contains("archived"), "{named}: {r:?}");
    }
}

/// The bundled CI examples stay valid against their public schemas: the GitHub workflow
/// schema (check-jsonschema's vendored copy) and the Kubernetes API (kubernetes-validate's
/// bundled schemas). The validators come from PyPI, installed by `.ci/run` into
/// `target/e2e-validators/`; without them this skips ([`crate::skip`]).
#[test]
fn the_ci_examples_validate_against_their_public_schemas() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = root.join("target/e2e-validators/venv/bin");
    if !bin.join("check-jsonschema").is_file() || !bin.join("kubernetes-validate").is_file() {
        crate::skip::skip(
            "the example validators are not installed (bash .ci/run installs them from PyPI into target/e2e-validators)",
        );
        return;
    }
    let run = |program: &str, args: &[&str]| {
        let out = std::process::Command::new(bin.join(program))
            .args(args)
            .current_dir(root)
            .output()
            .expect("run the validator");
        assert!(
            out.status.success(),
            "{program} {args:?}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    for workflow in [
        "examples/ci/github-actions.yml",
        "examples/ci/github-actions-queue.yml",
    ] {
        run(
            "check-jsonschema",
            &["--builtin-schema", "vendor.github-workflows", workflow],
        );
    }
    for manifest in [
        "examples/k8s/indexed-job.yaml",
        "examples/k8s/queue-job.yaml",
    ] {
        run("kubernetes-validate", &["--strict", manifest]);
    }
}

/// `runner status` with no argument finds the team of `-o newdir/` (one folder down).
#[test]
fn status_without_an_argument_finds_the_team_of_an_output_folder() {
    let sb = Sandbox::new();
    setup(&sb, &[("a", "success")]);
    assert_eq!(batch(&sb, &["-o", "newdir/"]).code, 0);
    let r = sb.run(&["status"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("newdir/workers-output.runner"), "{r:?}");
}
