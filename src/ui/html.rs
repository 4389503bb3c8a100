//! `runner report --html FILE`: one self-contained HTML page about a team (no network, no
//! external assets): the counts, total time and cost; a timeline with one lane per concurrent
//! slot and one bar per attempt, coloured by its verdict (retries labelled, a running attempt
//! striped; what the teammate said while it worked — its progress lines — as ticks on its bar,
//! a blocker in red); and a table of the items, sortable by any column, with each reason, summary and
//! a link to the log that explains it. Every value from agents is HTML-escaped: the page runs
//! only its own script.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::report::ItemStatus;
use crate::run::record::history::{self, History};

/// Escape text for HTML element content and attribute values; invisible characters
/// ([`crate::ui::is_invisible`]) are shown as `<U+202E>`.
pub fn escape(text: &str) -> String {
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

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.3em}table{border-collapse:collapse;width:100%}\
th,td{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}\
th{cursor:pointer;background:#f4f4f4;user-select:none}td.num{text-align:right}\
.counts span{margin-right:1em}.lane{position:relative;height:18px;margin:2px 0;background:#fafafa}\
.bar{position:absolute;top:1px;height:16px;border-radius:2px;font-size:11px;overflow:hidden;\
white-space:nowrap;color:#fff;padding-left:2px;box-sizing:border-box}\
.s-completed{background:#2e8b57}.s-failed{background:#c0392b}.s-timed_out{background:#8e44ad}\
.s-blocked{background:#d68910}.s-cancelled,.s-skipped{background:#888}\
.s-running{background:repeating-linear-gradient(45deg,#3498db,#3498db 6px,#5dade2 6px,#5dade2 12px)}\
.retry{opacity:.75}.refused{opacity:.45;background-image:repeating-linear-gradient(45deg,transparent 0 4px,rgba(255,255,255,.5) 4px 8px)}td .s{display:inline-block;width:.8em;height:.8em;border-radius:50%;margin-right:4px}\
.axis{color:#666;font-size:11px}td:nth-child(3){white-space:nowrap}\
.pauses{height:8px;background:none}.pause{position:absolute;top:0;height:8px;background:#f5b041}\
#timeline{position:relative}.run{position:absolute;top:0;bottom:0;border-left:2px dashed #555;z-index:1}\
.run b{position:absolute;top:-1.3em;left:2px;font-size:11px;color:#555;white-space:nowrap;font-weight:normal}\
.legend{font-size:12px;color:#444}.legend span{margin-right:1.2em;white-space:nowrap}\
.legend i{display:inline-block;width:1.6em;height:.9em;vertical-align:middle;margin-right:4px;border-radius:2px}\
td.out{max-width:24em;overflow-wrap:anywhere}\
.said{position:absolute;top:0;width:3px;height:18px;background:#1b2631;z-index:2}.said.blocked{background:#ff1744;width:4px}";

/// Sorts the table by a clicked header (numbers by value), and marks the page ready.
const SCRIPT: &str = "document.querySelectorAll('th').forEach(function(th,col){\
th.addEventListener('click',function(){var tb=th.closest('table').tBodies[0];\
var rows=Array.prototype.slice.call(tb.rows);var asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';\
rows.sort(function(a,b){var x=a.cells[col].dataset.v||a.cells[col].textContent;\
var y=b.cells[col].dataset.v||b.cells[col].textContent;var nx=parseFloat(x),ny=parseFloat(y);\
var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?c:-c;});\
rows.forEach(function(r){tb.appendChild(r);});});});\
document.body.dataset.ready='1';";

/// The page's Content-Security-Policy: nothing is fetched (no network: an agent's text that
/// escaped escaping could not send anything anywhere), styles only inline, scripts only the
/// page's own, carrying `nonce`.
fn csp(nonce: &str) -> String {
    format!(
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; img-src data:; base-uri 'none'; form-action 'none'"
    )
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
fn output_fields(items: &[&crate::run::record::outcome::Outcome]) -> Vec<String> {
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

/// With stages: each row's chain (`r2: audit ✔ → fix ✘ → verify –`), rows not done first.
fn chains(o: &mut String, h: &History) {
    use crate::source::stages::{Place, chain_line, chains};
    if h.stages.is_empty() {
        return;
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
    let _ = write!(
        o,
        "<h2>Chains</h2><p>{}: {} row(s) completed every stage</p><ul id=\"chains\">",
        escape(&h.stages.join(" → ")),
        complete.len()
    );
    for (row, stages) in open {
        let _ = write!(o, "<li>{}</li>", escape(&chain_line(row, stages)));
    }
    let _ = write!(o, "</ul>");
}

/// The page for `h`; `now_ms` (milliseconds since the epoch) ends attempts still running.
pub fn report(h: &History, now_ms: i64) -> String {
    let mut o = String::new();
    let title = format!("Team {}", h.team);
    // No network at all, and no script but the page's own (its nonce is new each time).
    let nonce = format!("{:032x}", rand::random::<u128>());
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{}\"><title>{}</title>\
         <style>{STYLE}</style></head><body><h1>{}</h1>",
        csp(&nonce),
        escape(&title),
        escape(&title)
    );
    // Counts, time, cost.
    let mut counts: BTreeMap<ItemStatus, u64> = BTreeMap::new();
    for out in &h.outcomes {
        *counts.entry(out.status).or_default() += 1;
    }
    let running: Vec<_> = h.spans.iter().filter(|s| s.end_ms.is_none()).collect();
    let start = h.spans.iter().map(|s| s.start_ms).min().unwrap_or(now_ms);
    let end = h
        .spans
        .iter()
        .map(|s| s.end_ms.unwrap_or(now_ms))
        .max()
        .unwrap_or(start)
        .max(start + 1);
    let cost: f64 = h.outcomes.iter().filter_map(|o| o.cost_usd).sum();
    let _ = write!(o, "<p class=\"counts\">");
    for (status, n) in &counts {
        let _ = write!(
            o,
            "<span><i class=\"s {}\"></i>{n} {}</span>",
            class(Some(*status)),
            status
        );
    }
    if !running.is_empty() {
        let _ = write!(o, "<span>{} running</span>", running.len());
    }
    let _ = write!(
        o,
        "<span>{} attempt(s) in {:.1}s</span>",
        h.spans.len(),
        (end - start) as f64 / 1000.0
    );
    if cost > 0.0 {
        let _ = write!(
            o,
            "<span>${}</span>",
            crate::run::record::outcome::usd_text(cost)
        );
    }
    let _ = write!(o, "</p>");
    // Timeline.
    let lanes = history::lanes(&h.spans, now_ms);
    let n_lanes = lanes.iter().max().map_or(0, |l| l + 1);
    let span_ms = (end - start) as f64;
    let _ = write!(
        o,
        "<h2>Timeline</h2><p class=\"legend\">{}<span><i class=\"s-failed retry\"></i>a retry (#N)</span>\
         <span><i class=\"s-failed refused\"></i>refused unprocessed (a rate-limit wait)</span>\
         <span><i class=\"s-running\"></i>running</span><span><i class=\"said\" style=\"position:static;display:inline-block;width:3px\"></i>the teammate said how it goes (hover)</span>\
         <span><i class=\"said blocked\" style=\"position:static;display:inline-block;width:4px\"></i>it said it is blocked</span><span><i class=\"pause\" style=\"position:static;display:inline-block\"></i>the team paused (rate limited)</span>\
         <span><i style=\"border-left:2px dashed #555;border-radius:0;width:0\"></i>a run began (a resume or a replay)</span></p>\
         <div class=\"axis\">0 s — {:.1} s, {n_lanes} lane(s), {} run(s)</div><div id=\"timeline\">",
        ItemStatus::ALL
            .iter()
            .map(|st| format!("<span><i class=\"{}\"></i>{st}</span>", class(Some(*st))))
            .collect::<String>(),
        span_ms / 1000.0,
        h.runs.max(1)
    );
    // Where each later run began: a replay shares the axis with the run before it.
    for (n, at) in h.run_starts.iter().enumerate().skip(1) {
        if *at < start || *at > end {
            continue;
        }
        let left = (*at - start) as f64 / span_ms * 100.0;
        let _ = write!(
            o,
            "<div class=\"run\" style=\"left:{left:.3}%\" title=\"run {} began\"><b>run {}</b></div>",
            n + 1,
            n + 1
        );
    }
    if !h.pauses.is_empty() {
        // Rate-limit pauses of the whole team: no attempt started in these.
        let _ = write!(o, "<div class=\"lane pauses\">");
        for &(from, to) in &h.pauses {
            let (from, to) = (from.max(start), to.min(end));
            let left = (from - start) as f64 / span_ms * 100.0;
            let width = ((to - from) as f64 / span_ms * 100.0).max(0.2);
            let _ = write!(
                o,
                "<div class=\"pause\" style=\"left:{left:.3}%;width:{width:.3}%\" title=\"{}\"></div>",
                escape(&format!(
                    "rate limited: no attempt started for {:.1}s",
                    (to - from) as f64 / 1000.0
                ))
            );
        }
        let _ = write!(o, "</div>");
    }
    for lane in 0..n_lanes {
        let _ = write!(o, "<div class=\"lane\" data-lane=\"{}\">", lane + 1);
        for s in h
            .spans
            .iter()
            .zip(&lanes)
            .filter(|(_, l)| **l == lane)
            .map(|(s, _)| s)
        {
            let stop = s.end_ms.unwrap_or(now_ms).max(s.start_ms);
            let left = (s.start_ms - start) as f64 / span_ms * 100.0;
            let width = ((stop - s.start_ms) as f64 / span_ms * 100.0).max(0.2);
            let status = s.verdict.as_ref().map(|v| v.status);
            let reason = s.verdict.as_ref().map_or("running", |v| v.reason.as_str());
            // The retry number first: a narrow bar cuts its label's end.
            let label = if s.attempt > 1 {
                format!("#{} {}", s.attempt, s.teammate)
            } else {
                s.teammate.clone()
            };
            let tip = format!(
                "{} (id {}), attempt {}: {} in {:.1}s{}{}",
                s.teammate,
                s.id,
                s.attempt,
                match (s.refused, status) {
                    (true, _) =>
                        "refused unprocessed (a rate-limit wait, not an attempt)".to_string(),
                    (false, st) => st.map_or("running".to_string(), |st| st.to_string()),
                },
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
            let _ = write!(
                o,
                "<div class=\"bar {}{}\" style=\"left:{left:.3}%;width:{width:.3}%\" title=\"{}\">{}</div>",
                class(status),
                match (s.refused, s.attempt > 1) {
                    (true, _) => " refused",
                    (false, true) => " retry",
                    (false, false) => "",
                },
                escape(&tip),
                escape(&label)
            );
            // Each progress line where it was read.
            for said in &s.said {
                let at = said.at_ms.clamp(s.start_ms, stop);
                let left = (at - start) as f64 / span_ms * 100.0;
                let _ = write!(
                    o,
                    "<div class=\"said{}\" style=\"left:{left:.3}%\" title=\"{}\"></div>",
                    if said.blocked { " blocked" } else { "" },
                    escape(&format!(
                        "{} attempt {} at {:.1}s: {}",
                        s.teammate,
                        s.attempt,
                        (at - s.start_ms) as f64 / 1000.0,
                        said.text
                    ))
                );
            }
        }
        let _ = write!(o, "</div>");
    }
    let _ = write!(o, "</div>");
    chains(&mut o, h);
    // Items, in item order (the input's rows, the batch's items), with what each found: the
    // fields of its structured output (an audit's findings) and the files it changed.
    let mut items: Vec<&crate::run::record::outcome::Outcome> = h.outcomes.iter().collect();
    items.sort_by_key(|o| item_order(&o.teammate));
    let fields = output_fields(&items);
    let _ = write!(
        o,
        "<h2>Items</h2><table id=\"items\"><thead><tr><th>id</th><th>teammate</th><th>status</th>\
         <th>attempts</th><th>duration s</th><th>cost $</th><th>kind</th><th>reason</th><th>summary</th>{}\
         <th>files modified</th><th>log</th></tr></thead><tbody>",
        fields
            .iter()
            .map(|f| {
                // A field named like one of the table's own columns says whose it is.
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
                    "files modified",
                    "log",
                ];
                match OWN.contains(&f.as_str()) {
                    true => format!("<th>output.{}</th>", escape(f)),
                    false => format!("<th>{}</th>", escape(f)),
                }
            })
            .collect::<String>()
    );
    for out in items {
        let found: String = fields
            .iter()
            .map(|f| {
                let v = match out.output.get(f) {
                    None | Some(serde_json::Value::Null) => String::new(),
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                };
                format!("<td class=\"out\">{}</td>", escape(&v))
            })
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
        let log = if out.log.is_empty() {
            String::new()
        } else {
            format!(
                "<a href=\"file://{}\">log</a>",
                escape(&out.log.replace(' ', "%20"))
            )
        };
        let _ = write!(
            o,
            "<tr data-id=\"{}\"><td>{}</td><td>{}</td><td data-v=\"{}\"><i class=\"s {}\"></i>{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{:.3}</td><td class=\"num\">{}</td><td>{}</td>\
             <td>{}</td><td>{}</td>{found}<td class=\"out\">{}</td><td>{log}</td></tr>",
            escape(&out.id),
            escape(&out.id),
            escape(&out.teammate),
            out.status,
            class(Some(out.status)),
            out.status,
            out.attempts,
            out.duration_s,
            out.cost_usd.map(|c| format!("{c:.6}")).unwrap_or_default(),
            out.failure_kind.map(|k| k.as_str()).unwrap_or_default(),
            escape(&out.error),
            escape(&out.summary),
            escape(&modified)
        );
    }
    let _ = writeln!(
        o,
        "</tbody></table><script nonce=\"{nonce}\">{SCRIPT}</script></body></html>"
    );
    o
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
        };
        let page = report(&h, 2000);
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
}
