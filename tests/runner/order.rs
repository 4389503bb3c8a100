//! `--order longest-first` on one machine (issue 54): items start by their expected
//! duration — the `--weight-column`'s number, else their `duration_s` in the previous output
//! — while the output keeps the input's order.

use crate::harness::{Sandbox, csv_rows};

/// The ids in the order their attempts started, from the team's journal.
fn started(sb: &Sandbox, workspace: &str) -> Vec<String> {
    let journal = sb.workspace_of(&sb.join(workspace)).join("journal.jsonl");
    std::fs::read_to_string(journal)
        .expect("journal")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "attempt_started")
        .map(|e| e["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn ids(sb: &Sandbox, output: &str) -> Vec<String> {
    csv_rows(&sb.join(output))
        .into_iter()
        .map(|r| r["id"].clone())
        .collect()
}

#[test]
fn longest_first_starts_the_heaviest_rows_first_and_keeps_the_output_in_input_order() {
    let sb = Sandbox::new();
    sb.write_csv("id,mode,weight\na,success,1\nb,success,5\nc,success,\nd,success,3\n");
    let flags = [
        "--order",
        "longest-first",
        "--weight-column",
        "weight",
        "-j",
        "1",
    ];
    let r = sb.fake_batch(&flags);
    assert_eq!(r.code, 0, "{r:?}");
    // The row with no weight goes last.
    assert_eq!(started(&sb, "workers-output.runner"), ["b", "d", "a", "c"]);
    assert_eq!(ids(&sb, "workers-output.csv"), ["a", "b", "c", "d"]);
}

#[test]
fn longest_first_without_a_weight_column_follows_the_previous_runs_durations() {
    let sb = Sandbox::new();
    sb.write_csv("id,mode\na,failed\nb,failed\nc,failed\n");
    let first = sb.fake_batch(&["-j", "1"]);
    assert_eq!(first.code, 1, "{first:?}");
    // The previous output says c took longest, then a.
    let mut rows = csv::Reader::from_path(sb.join("workers-output.csv")).expect("output");
    let header = rows.headers().expect("header").clone();
    let at = header
        .iter()
        .position(|h| h == "duration_s")
        .expect("duration_s");
    let mut out = csv::Writer::from_path(sb.join("edited.csv")).expect("write");
    out.write_record(&header).expect("write");
    for (row, d) in rows.records().zip(["2.0", "0.5", "9.0"]) {
        let mut row: Vec<String> = row.expect("row").iter().map(str::to_owned).collect();
        row[at] = d.to_owned();
        out.write_record(&row).expect("write");
    }
    out.flush().expect("write");
    drop(out);
    std::fs::rename(sb.join("edited.csv"), sb.join("workers-output.csv")).expect("rename");
    let again = sb.fake_batch(&["-j", "1", "--order", "longest-first"]);
    assert_eq!(again.code, 1, "{again:?}");
    let all = started(&sb, "workers-output.runner");
    assert_eq!(all[3..], ["c", "a", "b"], "{all:?}");
}

#[test]
fn a_weight_that_is_no_number_is_refused_naming_its_line() {
    let sb = Sandbox::new();
    sb.write_csv("id,mode,weight\na,success,1\nb,success,long\n");
    let r = sb.fake_batch(&["--order", "longest-first", "--weight-column", "weight"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("in.csv:3"), "{r:?}");
    assert!(r.stderr.contains("`long` is not a number"), "{r:?}");
    assert!(!sb.join("workers-output.csv").exists());
}
