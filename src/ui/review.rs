//! What `runner review`, `runner accept` and `runner reject` print: the items awaiting
//! review with their diffstats (and diffs), and what became of each item decided.

use std::path::Path;

use crate::report::ItemStatus;
use crate::run::isolation::review::Waiting;
use crate::run::record::outcome::Outcome;
use crate::ui::{kind_tag, outln};

/// The items of the team in `workspace` awaiting review into `target`: per item its id,
/// title, summary, the checks it passed (`verify`, the run's `--verify`; the report's
/// `tests`), its diffstat, and its whole diff when it was read.
pub(crate) fn print_waiting(
    workspace: &Path,
    target: &str,
    verify: Option<&[String]>,
    items: &[Waiting],
) {
    if items.is_empty() {
        outln(format_args!(
            "No item of team {} awaits review.",
            workspace.display()
        ));
        return;
    }
    outln(format_args!(
        "{} item(s) of team {} await review (into {target}):",
        items.len(),
        workspace.display()
    ));
    for w in items {
        let o = &w.outcome;
        outln(format_args!(
            "\n{} ({})  {}  [branch {}]",
            o.id,
            o.teammate,
            o.title,
            o.branch.as_deref().unwrap_or("")
        ));
        outln(format_args!("  summary: {}", o.summary));
        let checks = match verify {
            Some(argv) => format!("`{}` passed", argv.join(" ")),
            None => "no --verify".into(),
        };
        let tests = o.handoff().tests.unwrap_or_else(|| "not said".into());
        outln(format_args!("  verify:  {checks}; tests (report): {tests}"));
        for line in w.diffstat.lines() {
            outln(format_args!("  {line}"));
        }
        if w.diffstat.trim().is_empty() {
            outln(format_args!(
                "  no changes against {target}: accepting it merges nothing"
            ));
        }
        if let Some(diff) = &w.diff {
            crate::ui::out_document(&format!("{}\n", diff.trim_end()));
        }
    }
    outln(
        "\nrunner accept ID… merges them through the merge queue; runner reject ID… discards them; runner review --diff shows the diffs.",
    );
}

/// What became of each item `runner accept` or `runner reject` decided.
pub(crate) fn print_decided(decided: &[Outcome]) {
    for o in decided {
        match (&o.merged, o.status) {
            (Some(c), _) => outln(format_args!(
                "{:>10} {}  as {}",
                "MERGED",
                o.teammate,
                c.get(..10).unwrap_or(c)
            )),
            (None, ItemStatus::Failed) => outln(format_args!(
                "{:>10} {}{}  {}",
                "FAILED",
                o.teammate,
                kind_tag(o.status, o.failure_kind),
                o.error
            )),
            (None, s) => outln(format_args!(
                "{:>10} {}",
                s.as_str().to_uppercase(),
                o.teammate
            )),
        }
    }
}
