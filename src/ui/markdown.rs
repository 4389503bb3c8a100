//! `runner report --markdown`: a team's results as a short GitHub-flavoured Markdown summary,
//! for `$GITHUB_STEP_SUMMARY` or a pull-request comment — counts per status, wall time and
//! cost, then a table of every item that did not complete with its kind, reason and log.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::report::ItemStatus;
use crate::run::record::history::History;

/// Most items listed in the table of problems; the rest are counted.
pub(crate) const LISTED: usize = 50;

/// The summary of `h`: a heading with the team, a line of counts, then the problems table
/// (at most [`LISTED`] rows, in the order items first finished).
pub(crate) fn summary(h: &History) -> String {
    let mut out = String::new();
    let mut counts: BTreeMap<ItemStatus, u64> = BTreeMap::new();
    for o in &h.outcomes {
        *counts.entry(o.status).or_default() += 1;
    }
    let total = h.outcomes.len();
    let _ = writeln!(out, "### runner: team `{}`\n", h.team);
    let icon = match counts.get(&ItemStatus::Completed).copied().unwrap_or(0) as usize {
        n if n == total && total > 0 => "✅",
        _ => "❌",
    };
    let parts: Vec<String> = ItemStatus::ALL
        .iter()
        .filter_map(|s| counts.get(s).map(|n| format!("{n} {s}")))
        .collect();
    let cost: f64 = h.outcomes.iter().filter_map(|o| o.cost_usd).sum();
    let costed = h.outcomes.iter().any(|o| o.cost_usd.is_some());
    let wall = wall_seconds(h);
    let _ = write!(
        out,
        "{icon} **{total} item(s)**: {}",
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(", ")
        }
    );
    if let Some((ran, idle)) = wall {
        let _ = write!(out, " · {}", secs_text(ran));
        if idle > 0 {
            let _ = write!(
                out,
                " running (not counting {} idle between runs)",
                secs_text(idle)
            );
        }
    }
    if costed {
        let _ = write!(out, " · ${}", crate::run::record::outcome::usd_text(cost));
    }
    // An output read alone records no runs.
    match h.runs {
        0 => out.push('\n'),
        n => {
            let _ = writeln!(out, " · {n} run(s)");
        }
    }
    if let Some(why) = &h.stopped {
        let _ = writeln!(out, "\n⛔ stopped starting items: {}", cell(why));
    }
    let problems: Vec<_> = h
        .outcomes
        .iter()
        .filter(|o| o.status != ItemStatus::Completed)
        .collect();
    if problems.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\n| item | status | kind | attempts | reason | log |\n|---|---|---|---|---|---|"
    );
    for o in problems.iter().take(LISTED) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&o.id),
            o.status,
            o.failure_kind.map(|k| k.as_str()).unwrap_or(""),
            o.attempts,
            cell(&crate::report::one_line(
                crate::report::without_status(&o.error, o.status),
                300
            )),
            match o.log.is_empty() {
                true => String::new(),
                false => format!("`{}`", o.log.replace('`', "'")),
            }
        );
    }
    if problems.len() > LISTED {
        let _ = writeln!(
            out,
            "\n… and {} more; see the output file or `runner status`.",
            problems.len() - LISTED
        );
    }
    out
}

/// Whole seconds the team ran ([`History::running_ms`]: its wall time less the idle gaps
/// between runs, as the HTML page gives it) and of those gaps, when known.
fn wall_seconds(h: &History) -> Option<(u64, u64)> {
    let now = jiff::Timestamp::now().as_millisecond();
    let (first, last) = h.wall(now)?;
    let ran = h.running_ms(now)?;
    let secs = |ms: i64| u64::try_from(ms / 1000).unwrap_or(0);
    Some((secs(ran), secs(last - first - ran)))
}

fn secs_text(s: u64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(s)).to_string()
}

/// `text` safe inside a table cell: pipes escaped, line breaks as spaces, no HTML.
fn cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::record::outcome::Outcome;

    fn outcome(id: &str, status: ItemStatus, error: &str) -> Outcome {
        let mut o = Outcome::not_run(id, &format!("1-{id}"), id, status, error.into());
        o.attempts = 2;
        o.started_at = "2026-12-01T09:00:00.000Z".into();
        o.finished_at = "2026-12-01T09:01:05.000Z".into();
        o.cost_usd = Some(0.25);
        o.log = "/w/t/teammates/1-b/attempt-2.stdout.log".into();
        o
    }

    #[test]
    fn a_summary_counts_and_lists_what_did_not_complete_safely() {
        let h = History {
            team: "workers-output".into(),
            spans: Vec::new(),
            stages: Vec::new(),
            outcomes: vec![
                outcome("a", ItemStatus::Completed, ""),
                outcome(
                    "b|x",
                    ItemStatus::Failed,
                    "exited with code 1: <bad> | pipe\nsecond",
                ),
                outcome("c", ItemStatus::Blocked, "blocked: needs a key"),
            ],
            runs: 2,
            pauses: Vec::new(),
            run_starts: Vec::new(),
            stopped: Some("budget reached: spent $0.75 of $0.5".into()),
        };
        let text = summary(&h);
        assert!(
            text.contains("\n⛔ stopped starting items: budget reached: spent $0.75 of $0.5\n"),
            "the budget stop `runner status` reports: {text}"
        );
        assert!(
            text.starts_with("### runner: team `workers-output`\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "❌ **3 item(s)**: 1 completed, 1 failed, 1 blocked · 1m 5s · $0.75 · 2 run(s)"
            ),
            "{text}"
        );
        assert!(
            text.contains("| b\\|x | failed | agent_error | 2 | exited with code 1: &lt;bad&gt; \\| pipe | `/w/t/teammates/1-b/attempt-2.stdout.log` |"),
            "{text}"
        );
        assert!(
            text.contains("| c | blocked |  | 2 | needs a key |"),
            "{text}"
        );
        assert!(
            !text.contains("| a |"),
            "completed items are not listed: {text}"
        );
    }
}
