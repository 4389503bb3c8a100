//! `runner report --html FILE`: one self-contained HTML page about a team (no network, no
//! external assets): the counts, total time and cost; a timeline with one lane per concurrent
//! slot and one bar per attempt, coloured by its verdict (retries labelled, a running attempt
//! striped; what the teammate said while it worked — its progress lines — as ticks on its bar,
//! a blocker in red); and a table of the items, sortable by any column, with each reason, summary,
//! a link to the log that explains it, and — for an item with a branch — its diff, folded and
//! bounded ([`crate::run::isolation::diff`]).
//!
//! The page is the minijinja template `templates/report.html` (its markup, style, script and
//! Content-Security-Policy); this file builds the values it shows, a [`Page`], from a team's
//! [`History`]. Every value is HTML-escaped by [`escape`] as the template prints it (the
//! environment's formatter), so text from agents stays text: the page runs only its own
//! script.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::isolation::diff::{Diffs, ItemDiff};
use crate::run::record::history::{self, History, Span};
use crate::run::record::outcome::{Outcome, usd_text};

mod axis;
use axis::Axis;
pub(crate) mod candidates;
use candidates::Candidates;

/// The page's template, compiled into the binary.
const TEMPLATE: &str = include_str!("../../templates/report.html");

/// Escape text for HTML element content and attribute values; invisible characters
/// ([`crate::ui::is_invisible`]) are shown as `<U+202E>`.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Shown, so that text cannot read otherwise than it is ("Trojan Source").
            c if crate::ui::is_invisible(c) => out.push_str(&format!("&lt;U+{:04X}&gt;", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The CSS class of a verdict (`s-completed`, `s-failed`, …; `s-running` with none).
fn class(status: Option<ItemStatus>) -> String {
    match status {
        Some(s) => format!("s-{}", s.as_str()),
        None => "s-running".into(),
    }
}

/// What the page shows, as the template prints it: text, with numbers already formatted
/// (percentages of the time axis to 3 decimals, seconds to 1).
#[derive(Serialize)]
struct Page {
    /// `Team NAME`: the title and the heading.
    title: String,
    /// The nonce the page's own script carries (32 hex digits, new for each page).
    nonce: String,
    /// Items by verdict, in [`ItemStatus`] order; verdicts no item has are left out.
    counts: Vec<Count>,
    /// Attempts still running.
    running: usize,
    /// Attempts recorded.
    attempts: usize,
    /// Seconds from the first attempt's start to the last one's end (`12.3`): the axis.
    seconds: String,
    /// Seconds the team ran: [`Page::seconds`] less the idle gaps between runs
    /// ([`History::running_ms`], the Markdown summary's time).
    worked: String,
    /// Total cost in dollars ([`usd_text`]), when any item cost something.
    cost: Option<String>,
    /// Why the last run stopped starting items (its budget reached), if it did.
    stopped: Option<String>,
    /// One swatch per verdict, for the timeline's legend.
    legend: Vec<Count>,
    /// Runs (starts and resumes) recorded; at least 1.
    runs: u32,
    /// Where each run after the first began on the time axis.
    run_marks: Vec<RunMark>,
    /// The team's rate-limit pauses, as bands over the lanes.
    pauses: Vec<Band>,
    /// The idle gaps between runs, drawn short, as bands across the lanes.
    gaps: Vec<Band>,
    /// The timeline's lanes, each its attempts' bars in start order.
    lanes: Vec<Vec<Bar>>,
    /// With stages: each row's chain.
    chains: Option<Chains>,
    /// Some item went to `--best-of` candidates: the table has a `candidates` column.
    best_of: bool,
    /// The headers of the output fields shown as columns.
    fields: Vec<String>,
    /// The table's rows, in item order.
    items: Vec<Row>,
    /// Some row has a diff: the table has a `diff` column.
    diffs: bool,
}

/// A verdict and how many items have it (`n` is 0 in the legend).
#[derive(Serialize)]
struct Count {
    class: String,
    status: String,
    n: u64,
}

/// A later run's start: `left` in % of the axis, `n` its number (2, 3, …).
#[derive(Serialize)]
struct RunMark {
    left: String,
    n: usize,
}

/// A span of the axis (a pause, a bar, a tick): `left` and `width` in %, `title` its tooltip.
#[derive(Serialize)]
struct Band {
    left: String,
    width: String,
    title: String,
}

/// One attempt's bar.
#[derive(Serialize)]
struct Bar {
    /// Its verdict's class, then `retry` or `refused` when it is one.
    class: String,
    left: String,
    width: String,
    /// What the attempt was: teammate, id, verdict, time, reason, its last word.
    title: String,
    /// The teammate, after `#N` for a retry.
    label: String,
    /// What the teammate said while it worked, where it was read.
    said: Vec<Tick>,
}

/// One progress line on its bar.
#[derive(Serialize)]
struct Tick {
    left: String,
    title: String,
    /// The teammate said it is blocked.
    blocked: bool,
}

/// With stages: how the rows went.
#[derive(Serialize)]
struct Chains {
    /// The stages, `audit → fix → verify`.
    stages: String,
    /// Rows that completed every stage.
    complete: usize,
    /// The other rows' chains ([`crate::source::stages::chain_line`]).
    open: Vec<String>,
}

/// A table cell that may be long (an output field's JSON: an array of findings): its whole
/// text, and when that is longer than [`CELL_SHOWN`] characters or lines, its start, which
/// the page shows with the whole text one click away (a `<details>`), so that one row does
/// not grow a thousand pixels tall.
#[derive(Serialize)]
struct Cell {
    full: String,
    short: Option<String>,
}

/// Most characters of a cell shown before it is folded (and most lines: a fifth of them).
const CELL_SHOWN: usize = 160;

impl Cell {
    fn of(full: String) -> Cell {
        let long = full.chars().count() > CELL_SHOWN || full.lines().count() > CELL_SHOWN / 40;
        let short = long.then(|| {
            let first: String = full
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(CELL_SHOWN / 2)
                .collect();
            format!("{first}…")
        });
        Cell { full, short }
    }
}

/// One item's row of the table.
#[derive(Serialize)]
struct Row {
    id: String,
    teammate: String,
    status: String,
    class: String,
    attempts: u32,
    /// Seconds, to 3 decimals.
    duration: String,
    /// Dollars to 6 decimals; empty when unknown.
    cost: String,
    /// The failure kind; empty when none.
    kind: String,
    reason: String,
    summary: String,
    /// With `--best-of`: its candidates, the winner and the rule that chose it.
    candidates: Option<Candidates>,
    /// The item's output fields, one per shown field (empty when it has none).
    found: Vec<Cell>,
    /// The files its report says it modified, comma-separated.
    modified: String,
    /// Its log's path with spaces as `%20`, for a `file://` link; none without a log.
    log: Option<String>,
    /// What its branch changes (merged, awaiting review, or kept after a failed merge),
    /// bounded; none for an item without a branch.
    diff: Option<ItemDiff>,
}

/// The page for `h`; `now_ms` (milliseconds since the epoch) ends attempts still running;
/// `diffs` (a team with worktrees) gives each item with a branch its diff.
///
/// Errors: the template cannot be rendered (a fault of the runner's, exit 3).
pub(crate) fn report(h: &History, now_ms: i64, diffs: Option<&Diffs>) -> Result<String> {
    // No script but the page's own: its nonce is new each time.
    let nonce = format!("{:032x}", rand::random::<u128>());
    let mut page = page(h, now_ms, nonce);
    if let Some(d) = diffs {
        let by_id: BTreeMap<&str, &Outcome> =
            h.outcomes.iter().map(|o| (o.id.as_str(), o)).collect();
        for row in &mut page.items {
            row.diff = by_id.get(row.id.as_str()).and_then(|o| d.of(o));
        }
        page.diffs = page.items.iter().any(|r| r.diff.is_some());
    }
    render(&page)
}

/// Render `page` with the template, every value escaped by [`escape`].
fn render(page: &Page) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    // The same escaping as everywhere else the runner writes HTML (minijinja's own would
    // let invisible characters through).
    env.set_formatter(|out, state, value| {
        if state.auto_escape() == minijinja::AutoEscape::Html && !value.is_safe() {
            out.write_str(&escape(&value.to_string()))?;
            Ok(())
        } else {
            minijinja::escape_formatter(out, state, value)
        }
    });
    let fail =
        |e: minijinja::Error| Error::Environment(format!("cannot build the HTML report: {e:#}"));
    env.add_template("report.html", TEMPLATE).map_err(fail)?;
    env.get_template("report.html")
        .and_then(|t| t.render(page))
        .map_err(fail)
}

/// The values of the page for `h` at `now_ms`.
fn page(h: &History, now_ms: i64, nonce: String) -> Page {
    let mut counts: BTreeMap<ItemStatus, u64> = BTreeMap::new();
    for out in &h.outcomes {
        *counts.entry(out.status).or_default() += 1;
    }
    let axis = Axis::of(h, now_ms);
    let cost: f64 = h.outcomes.iter().filter_map(|o| o.cost_usd).sum();
    let count = |status: ItemStatus, n: u64| Count {
        class: class(Some(status)),
        status: status.to_string(),
        n,
    };
    // Items in item order (the input's rows, the batch's items).
    let mut items: Vec<&Outcome> = h.outcomes.iter().collect();
    items.sort_by_key(|o| item_order(&o.teammate));
    let fields = output_fields(&items);
    Page {
        title: format!("Team {}", h.team),
        nonce,
        counts: counts.into_iter().map(|(s, n)| count(s, n)).collect(),
        running: h.spans.iter().filter(|s| s.end_ms.is_none()).count(),
        attempts: h.spans.len(),
        seconds: format!("{:.1}", axis.ms() / 1000.0),
        worked: format!("{:.1}", h.running_ms(now_ms).unwrap_or(0) as f64 / 1000.0),
        cost: (cost > 0.0).then(|| usd_text(cost)),
        stopped: h.stopped.clone(),
        legend: ItemStatus::ALL.iter().map(|s| count(*s, 0)).collect(),
        runs: h.runs.max(1),
        run_marks: run_marks(h, &axis),
        pauses: pauses(h, &axis),
        gaps: gaps(&axis),
        lanes: lanes(h, &axis, now_ms),
        chains: chains(h),
        best_of: items.iter().any(|o| o.best_of.is_some()),
        fields: fields.iter().map(|f| header(f)).collect(),
        items: items.into_iter().map(|o| row(o, &fields)).collect(),
        diffs: false,
    }
}

/// Where each later run began: a replay shares the axis with the run before it.
fn run_marks(h: &History, axis: &Axis) -> Vec<RunMark> {
    h.run_starts
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, at)| (axis.start..=axis.end).contains(*at))
        .map(|(n, at)| RunMark {
            left: axis.left(*at),
            n: n + 1,
        })
        .collect()
}

/// The team's rate-limit pauses: no attempt started in these.
fn pauses(h: &History, axis: &Axis) -> Vec<Band> {
    h.pauses
        .iter()
        .map(|&(from, to)| {
            let (from, to) = (from.max(axis.start), to.min(axis.end));
            Band {
                left: axis.left(from),
                width: axis.width(from, to),
                title: format!(
                    "rate limited: no attempt started for {:.1}s",
                    (to - from) as f64 / 1000.0
                ),
            }
        })
        .collect()
}

/// The idle gaps between runs the axis draws short ([`axis`]), each a band saying how long
/// the team was idle.
fn gaps(axis: &Axis) -> Vec<Band> {
    axis.gaps
        .iter()
        .map(|&(from, to)| Band {
            left: axis.left(from),
            width: axis.width(from, to),
            title: format!(
                "idle for {} between runs (drawn short)",
                humantime::format_duration(std::time::Duration::from_secs(
                    u64::try_from((to - from) / 1000).unwrap_or(0)
                ))
            ),
        })
        .collect()
}

/// The lanes of the timeline ([`history::lanes`]), each its attempts' bars.
fn lanes(h: &History, axis: &Axis, now_ms: i64) -> Vec<Vec<Bar>> {
    let lanes = history::lanes(&h.spans, now_ms);
    let n_lanes = lanes.iter().max().map_or(0, |l| l + 1);
    (0..n_lanes)
        .map(|lane| {
            h.spans
                .iter()
                .zip(&lanes)
                .filter(|(_, l)| **l == lane)
                .map(|(s, _)| bar(s, axis, now_ms))
                .collect()
        })
        .collect()
}

/// The bar of attempt `s`, with a tick for each progress line where it was read.
fn bar(s: &Span, axis: &Axis, now_ms: i64) -> Bar {
    let stop = s.end_ms.unwrap_or(now_ms).max(s.start_ms);
    let status = s.verdict.as_ref().map(|v| v.status);
    let reason = s.verdict.as_ref().map_or("running", |v| v.reason.as_str());
    let verdict = match (s.refused, status) {
        (true, _) => "refused unprocessed (a rate-limit wait, not an attempt)".to_string(),
        (false, st) => st.map_or("running".to_string(), |st| st.to_string()),
    };
    let title = format!(
        "{} (id {}), attempt {}: {verdict} in {:.1}s{}{}",
        s.teammate,
        s.id,
        s.attempt,
        (stop - s.start_ms) as f64 / 1000.0,
        if reason.is_empty() {
            String::new()
        } else {
            format!(" — {reason}")
        },
        s.said
            .last()
            .map(|said| format!(" — said: {}", said.text))
            .unwrap_or_default()
    );
    let said = s
        .said
        .iter()
        .map(|said| {
            let at = said.at_ms.clamp(s.start_ms, stop);
            Tick {
                left: axis.left(at),
                title: format!(
                    "{} attempt {} at {:.1}s: {}",
                    s.teammate,
                    s.attempt,
                    (at - s.start_ms) as f64 / 1000.0,
                    said.text
                ),
                blocked: said.blocked,
            }
        })
        .collect();
    Bar {
        class: match (s.refused, s.attempt > 1) {
            (true, _) => format!("{} refused", class(status)),
            (false, true) => format!("{} retry", class(status)),
            (false, false) => class(status),
        },
        left: axis.left(s.start_ms),
        width: axis.width(s.start_ms, stop),
        title,
        // The retry number first: a narrow bar cuts its label's end.
        label: match s.attempt > 1 {
            true => format!("#{} {}", s.attempt, s.teammate),
            false => s.teammate.clone(),
        },
        said,
    }
}

/// Most output fields shown as columns (the first ones, in the order items give them).
const FIELDS_SHOWN: usize = 8;

/// An item's place in its batch from its teammate's name: the row number that starts a CSV
/// teammate's (`12-a`), the item number that ends a todo one's (`todo-task-3`); then the name.
fn item_order(teammate: &str) -> (u64, String) {
    let lead: String = teammate.chars().take_while(char::is_ascii_digit).collect();
    let trail: String = teammate
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let n = lead.parse().or_else(|_| trail.parse()).unwrap_or(u64::MAX);
    (n, teammate.to_owned())
}

/// The fields of the items' structured outputs (`output_schema`), in first-seen order, at
/// most [`FIELDS_SHOWN`].
fn output_fields(items: &[&Outcome]) -> Vec<String> {
    let mut fields: Vec<String> = Vec::new();
    for o in items {
        if let Some(map) = o.output.as_object() {
            for k in map.keys() {
                if fields.len() < FIELDS_SHOWN && !fields.contains(k) {
                    fields.push(k.clone());
                }
            }
        }
    }
    fields
}

/// The column header of output field `f`: a field named like one of the table's own columns
/// says whose it is (`output.status`).
fn header(f: &str) -> String {
    const OWN: &[&str] = &[
        "id",
        "teammate",
        "status",
        "attempts",
        "duration s",
        "cost $",
        "kind",
        "reason",
        "summary",
        "candidates",
        "files modified",
        "log",
    ];
    match OWN.contains(&f) {
        true => format!("output.{f}"),
        false => f.to_owned(),
    }
}

/// The table's row of `out`, with its values of the output `fields` (what it found: an
/// audit's findings) and the files it changed.
fn row(out: &Outcome, fields: &[String]) -> Row {
    let found = fields
        .iter()
        .map(|f| match out.output.get(f) {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        })
        .map(Cell::of)
        .collect();
    let modified = out
        .report
        .as_ref()
        .and_then(|r| r.get("files_modified"))
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    Row {
        id: out.id.clone(),
        teammate: out.teammate.clone(),
        status: out.status.to_string(),
        class: class(Some(out.status)),
        attempts: out.attempts,
        duration: format!("{:.3}", out.duration_s),
        cost: out.cost_usd.map(|c| format!("{c:.6}")).unwrap_or_default(),
        kind: out
            .failure_kind
            .map(|k| k.as_str().to_owned())
            .unwrap_or_default(),
        reason: out.error.clone(),
        summary: out.summary.clone(),
        candidates: out.best_of.as_deref().map(candidates::of),
        found,
        modified,
        log: (!out.log.is_empty()).then(|| out.log.replace(' ', "%20")),
        diff: None,
    }
}

/// With stages: each row's chain (`r2: audit ✔ → fix ✘ → verify –`), rows not done first.
fn chains(h: &History) -> Option<Chains> {
    use crate::source::stages::{Place, chain_line, chains};
    if h.stages.is_empty() {
        return None;
    }
    let ids = h
        .outcomes
        .iter()
        .map(|out| (out.id.as_str(), Place::Finished(out.status)))
        .chain(
            h.spans
                .iter()
                .filter(|s| s.end_ms.is_none())
                .map(|s| (s.id.as_str(), Place::Running)),
        );
    let rows = chains(&h.stages, ids);
    let done = |st: &[(String, Place)]| {
        st.iter()
            .all(|(_, p)| *p == Place::Finished(ItemStatus::Completed))
    };
    let (complete, open): (Vec<_>, Vec<_>) = rows.iter().partition(|(_, st)| done(st));
    Some(Chains {
        stages: h.stages.join(" → "),
        complete: complete.len(),
        open: open
            .into_iter()
            .map(|(row, stages)| chain_line(row, stages))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Verdict;
    use crate::run::record::history::Span;
    use crate::run::record::outcome::Outcome;

    #[test]
    fn agent_text_cannot_inject_markup_or_script() {
        let mut out = Outcome::not_run(
            "<b>1</b>",
            "t",
            "t",
            ItemStatus::Failed,
            "</td><script>alert(1)</script>".into(),
        );
        out.summary = "\"onload='x'".into();
        out.finished_at = "1970-01-01T00:00:01Z".into();
        let h = History {
            team: "<team>".into(),
            spans: vec![Span {
                id: "<b>1</b>".into(),
                teammate: "t<".into(),
                attempt: 1,
                start_ms: 0,
                end_ms: Some(1000),
                verdict: Some(Verdict {
                    status: ItemStatus::Failed,
                    reason: "<img src=x onerror=alert(1)>".into(),
                    kind: Some(crate::failure::FailureKind::AgentError),
                    retry_after_s: None,
                }),
                refused: false,
                said: vec![
                    crate::run::record::history::Said {
                        at_ms: 500,
                        text: "60%: <script>x</script>".into(),
                        blocked: false,
                    },
                    crate::run::record::history::Said {
                        at_ms: 900,
                        text: "blocked: needs the key".into(),
                        blocked: true,
                    },
                ],
            }],
            outcomes: vec![out],
            runs: 1,
            run_starts: Vec::new(),
            pauses: vec![(200, 700)],
            stages: Vec::new(),
            stopped: None,
        };
        let page = report(&h, 2000, None).expect("the page renders");
        assert_eq!(
            page.matches("<script").count(),
            1,
            "only the page's own script"
        );
        assert!(
            page.contains("Content-Security-Policy")
                && page.contains("default-src 'none'")
                && page.contains("<script nonce=\""),
            "no network, no script but its own: {page}"
        );
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains("<b>1</b>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("&quot;onload=&#39;x&#39;"));
        assert!(
            page.contains("class=\"pause\" style=\"left:20.000%;width:50.000%\""),
            "the rate-limit pause is a band over the lanes: {page}"
        );
        assert!(page.contains("<td>agent_error</td>"), "the kind column");
        assert!(
            page.contains(
                "<div class=\"said\" style=\"left:50.000%\" title=\"t&lt; attempt 1 at 0.5s: 60%: &lt;script&gt;x&lt;/script&gt;\">"
            ),
            "a progress line is a tick where it was read, its text escaped: {page}"
        );
        assert!(
            page.contains("<div class=\"said blocked\" style=\"left:90.000%\"")
                && page.contains("said: blocked: needs the key"),
            "a blocker is marked and is the bar's latest word: {page}"
        );
    }
    #[test]
    fn an_idle_gap_between_runs_is_a_band_saying_how_long() {
        const HOUR: i64 = 3_600_000;
        let span = |start_ms: i64| Span {
            id: "a".into(),
            teammate: "1-a".into(),
            attempt: 1,
            start_ms,
            end_ms: Some(start_ms + 10_000),
            verdict: None,
            refused: false,
            said: Vec::new(),
        };
        let h = History {
            team: "t".into(),
            spans: vec![span(0), span(10 * HOUR)],
            runs: 2,
            run_starts: vec![0, 10 * HOUR - 1_000],
            ..History::default()
        };
        let page = report(&h, 11 * HOUR, None).expect("the page renders");
        assert!(
            page.contains(
                "<div class=\"gap\" style=\"left:48.544%;width:2.913%\" title=\"idle for 9h 59m 50s between runs (drawn short)\">"
            ) && page.contains("1 idle gap(s) between runs drawn short"),
            "{page}"
        );
        // The team ran 20 s (two 10 s attempts), not the 10 hours between them: the page
        // and the Markdown summary say so (issue 56: the summary counted the night).
        assert!(
            page.contains("2 attempt(s) in 20.0s (not counting the idle time between runs)"),
            "{page}"
        );
        let md = crate::ui::markdown::summary(&h);
        assert!(
            md.contains(" · 20s running (not counting 9h 59m 50s idle between runs)"),
            "{md}"
        );
    }

    #[test]
    fn a_long_output_cell_is_folded_with_its_whole_value_one_click_away() {
        let mut out = Outcome::not_run("a", "1-a", "t", ItemStatus::Completed, String::new());
        let findings: Vec<String> = (0..100).map(|i| format!("finding {i}")).collect();
        out.output = serde_json::json!({"findings": findings, "ok": true});
        let h = History {
            team: "t".into(),
            outcomes: vec![out],
            ..History::default()
        };
        let page = report(&h, 0, None).expect("the page renders");
        assert!(
            page.contains(
                "<td class=\"out\"><details><summary>[&quot;finding 0&quot;,&quot;finding 1&quot;,"
            ) && page.contains("&quot;finding 99&quot;]</details></td>"),
            "{page}"
        );
        assert!(page.contains("<td class=\"out\">true</td>"), "{page}");
    }

    #[test]
    fn the_page_and_the_markdown_summary_give_one_duration() {
        // The attempt ended at 10 s; its item finished (verified, merged) at 15 s.
        let mut out = Outcome::not_run("a", "1-a", "t", ItemStatus::Completed, String::new());
        out.started_at = "1970-01-01T00:00:00Z".into();
        out.finished_at = "1970-01-01T00:00:15Z".into();
        let h = History {
            team: "t".into(),
            spans: vec![Span {
                id: "a".into(),
                teammate: "1-a".into(),
                attempt: 1,
                start_ms: 0,
                end_ms: Some(10_000),
                verdict: None,
                refused: false,
                said: Vec::new(),
            }],
            outcomes: vec![out],
            runs: 1,
            ..History::default()
        };
        let page = report(&h, 20_000, None).expect("the page renders");
        assert!(page.contains("1 attempt(s) in 15.0s"), "{page}");
        let md = crate::ui::markdown::summary(&h);
        assert!(md.contains(" · 15s · "), "{md}");
    }

    #[test]
    fn only_a_best_of_team_has_a_candidates_column_and_a_model_is_named() {
        use crate::report::best_of::{BestOf, Candidate};
        let plain = Outcome::not_run("a", "1-a", "t", ItemStatus::Completed, String::new());
        let h = History {
            team: "t".into(),
            outcomes: vec![plain.clone()],
            ..History::default()
        };
        let page = report(&h, 0, None).expect("the page renders");
        assert!(!page.contains("candidates"), "{page}");
        let mut fanned = Outcome::not_run("b", "2-b", "t", ItemStatus::Failed, "none".into());
        fanned.best_of = Some(Box::new(BestOf {
            winner: None,
            rule: "none passed".into(),
            passed: 0,
            total: 1,
            candidates: vec![Candidate {
                candidate: 1,
                teammate: "2-b.c1".into(),
                runner: "claude".into(),
                model: Some("sonnet".into()),
                status: ItemStatus::Failed,
                error: "verify failed".into(),
                verify: "failed".into(),
                score: None,
                cost_usd: Some(0.5),
                duration_s: 2.0,
                attempts: 1,
                finished_at: String::new(),
                diffstat: None,
                branch: None,
            }],
        }));
        let h = History {
            team: "t".into(),
            outcomes: vec![plain, fanned],
            ..History::default()
        };
        let page = report(&h, 0, None).expect("the page renders");
        assert!(page.contains("<th>candidates</th>"), "{page}");
        assert!(
            page.contains("<td class=\"cands\"></td>"),
            "an item without candidates has an empty cell: {page}"
        );
        assert!(
            page.contains(
                "<summary>0/1 passed, no winner</summary><p class=\"rule\">none passed</p>"
            ) && page.contains("<td>2-b.c1</td><td>claude sonnet</td>")
                && page.contains("<td class=\"num\">$0.5</td>")
                && !page.contains("class=\"win\""),
            "{page}"
        );
    }

    #[test]
    fn every_part_of_the_page_renders_from_the_template() {
        let mut done = Outcome::not_run("r1/audit", "1-r1", "t", ItemStatus::Completed, "".into());
        done.cost_usd = Some(0.25);
        done.log = "/tmp/a dir/1.log".into();
        done.output = serde_json::json!({"status": "fine", "n": 2});
        done.report = Some(serde_json::json!({"files_modified": ["a.rs", "b.rs"]}));
        done.finished_at = "1970-01-01T00:00:02Z".into();
        let mut failed = Outcome::not_run("r2/audit", "2-r2", "t", ItemStatus::Failed, "no".into());
        failed.finished_at = "1970-01-01T00:00:01.800Z".into();
        let span = |id: &str, attempt, start, end: Option<i64>| Span {
            id: id.into(),
            teammate: format!("{}-{id}", attempt),
            attempt,
            start_ms: start,
            end_ms: end,
            verdict: end.map(|_| Verdict {
                status: ItemStatus::Completed,
                reason: String::new(),
                kind: None,
                retry_after_s: None,
            }),
            refused: false,
            said: Vec::new(),
        };
        let h = History {
            team: "t".into(),
            spans: vec![
                span("r1/audit", 1, 1000, Some(2000)),
                span("r2/audit", 2, 1500, Some(1800)),
                span("r1/fix", 1, 2000, None),
            ],
            outcomes: vec![done, failed],
            runs: 2,
            run_starts: vec![1000, 1500],
            pauses: Vec::new(),
            stages: vec!["audit".into(), "fix".into()],
            stopped: Some("budget reached: spent $0.25 of $0.2".into()),
        };
        let page = report(&h, 3000, None).expect("the page renders");
        assert!(
            page.starts_with("<!DOCTYPE html>"),
            "what --html may replace: {page}"
        );
        assert!(page.contains("<span>1 running</span>") && page.contains("<span>$0.25</span>"));
        assert!(
            page.contains(
                "<p class=\"stopped\">Stopped starting items: budget reached: spent $0.25 of $0.2</p>"
            ),
            "the budget stop `runner status` reports: {page}"
        );
        assert!(
            page.contains("<b>run 2</b>") && page.contains(">#2 2-r2/audit<"),
            "{page}"
        );
        assert!(page.contains("class=\"bar s-running\""), "{page}");
        assert!(
            page.contains("<ul id=\"chains\">") && page.contains("0 row(s) completed every stage"),
            "{page}"
        );
        assert!(
            page.contains("<th>output.status</th>") && page.contains("<th>n</th>"),
            "an output field named like a column says whose it is: {page}"
        );
        assert!(
            page.contains("<a href=\"file:///tmp/a%20dir/1.log\">log</a>"),
            "{page}"
        );
        assert!(page.contains("<td class=\"out\">a.rs, b.rs</td>"), "{page}");
        assert!(page.contains("<td class=\"num\">0.250000</td>"), "{page}");
    }
}
