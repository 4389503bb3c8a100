//! How `runner show` describes one item: its status and reason, each attempt with its verdict
//! and duration, cost and tokens, the prompt and report files, and the last lines of the log
//! that explains it (from its folder, or from the record a completed item was compacted into). Reads those files; changes nothing.

use std::fmt::Write;
use std::path::Path;

use crate::run::events::Event;
use crate::run::record::outcome::Outcome;

/// What `show` says of a teammate folder without `prompt.md`: the runner hands a prompt to
/// its agent from memory and writes the file only once the attempt has run a second or
/// ended without completing ([`crate::run::supervise::capped_log::HOLD_FOR`]).
pub(crate) const PROMPT_NOT_WRITTEN: &str = "not written (yet): an attempt's prompt is written once it has run a second, or when it ends without completing";

/// Lines of the telling log shown.
const LOG_LINES: usize = 20;

/// The time between two RFC 3339 times as an attempt's time is shown, when both parse:
/// hundredths under 10 s (`0.85s`: an HTTP attempt is often under a second), whole seconds
/// from there (`42s`).
fn took(from: &str, to: &str) -> Option<String> {
    let (a, b) = (
        from.parse::<jiff::Timestamp>().ok()?,
        to.parse::<jiff::Timestamp>().ok()?,
    );
    Some(seconds(b.duration_since(a).as_secs_f64()))
}

/// Seconds as an attempt's time is shown ([`took`]).
fn seconds(secs: f64) -> String {
    let secs = secs.max(0.0);
    match secs < 10.0 {
        true => format!("{secs:.2}s"),
        false => format!("{secs:.0}s"),
    }
}

/// The time of candidate `k`'s last attempt as the attempts list shows it (from its start to
/// its end, verify and commit included), when `events` have both.
fn candidate_took(events: &[Event], k: u32) -> Option<String> {
    let (mut started, mut last) = (None, None);
    for e in events {
        match e {
            Event::AttemptStarted {
                attempt,
                at,
                candidate: Some(c),
                ..
            } if *c == k => started = Some((*attempt, at)),
            Event::AttemptFinished {
                attempt,
                at,
                candidate: Some(c),
                ..
            } if *c == k => {
                last = started
                    .filter(|(n, _)| n == attempt)
                    .and_then(|(_, from)| took(from, at));
            }
            _ => {}
        }
    }
    last
}

/// The last `n` lines of the file at `path`, when it can be read.
fn tail(path: &Path, n: usize) -> Option<String> {
    let text = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    Some(lines[lines.len().saturating_sub(n)..].join("\n"))
}

/// Where an item's files are.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place<'a> {
    /// Its teammate folder in a live workspace (prompt, logs).
    Teammate(&'a Path),
    /// A completed item whose folder was compacted into the workspace's `completed.jsonl`
    /// ([`crate::run::record::compact`]).
    Compacted {
        /// The record file.
        file: &'a Path,
        /// The item's record in it; `None` when the file lost it (a damaged line).
        record: Option<&'a crate::run::record::compact::Record>,
    },
    /// A team archive: the workspace and its files are gone.
    Archive {
        /// The archive file.
        path: &'a Path,
        /// The teammate's name.
        teammate: &'a str,
    },
}

/// What `runner show` says of an item of team `dir` that no run has started (`p`): that it
/// is pending and why, what it is, and the run that starts it.
pub(crate) fn pending(dir: &Path, p: &crate::run::record::pending::Pending) -> String {
    use crate::run::record::pending::Wait;
    let why = match &p.wait {
        Wait::Prerequisites(after) => format!(
            "waiting for its prerequisites ({}) to complete",
            after.join(", ")
        ),
        Wait::NotReached => "the run was interrupted before it reached it".to_owned(),
        Wait::Queued => "no attempt has started yet".to_owned(),
    };
    let mut o = format!(
        "Item {} — pending: {why}
  {}
  team: {}
",
        p.id,
        p.title,
        dir.display()
    );
    match (p.live, &p.command) {
        (Some(pid), Some(cmd)) => {
            let _ = writeln!(
                o,
                "  runs in: the run going on (runner pid {pid}) when its turn comes: {cmd}"
            );
        }
        (Some(pid), None) => {
            let _ = writeln!(
                o,
                "  runs in: the run going on (runner pid {pid}) when its turn comes"
            );
        }
        (None, Some(cmd)) => {
            let _ = writeln!(o, "  runs with: {cmd}");
        }
        (None, None) => {}
    }
    o
}

/// The description of item `id` at `place`, from its recorded `events`.
pub(crate) fn item(id: &str, place: Place<'_>, events: &[Event]) -> String {
    let mut o = String::new();
    let outcome = events.iter().rev().find_map(|e| match e {
        Event::ItemFinished(o) => Some(o.as_ref()),
        _ => None,
    });
    heading(&mut o, id, &teammate(place, outcome), outcome);
    attempts(&mut o, events);
    said(&mut o, events);
    if let Some(out) = outcome {
        spend(&mut o, out);
        if let Some(b) = &out.best_of {
            candidates(&mut o, b, events);
        }
    }
    prompt(&mut o, id, place);
    if let Some(report) = outcome.and_then(|out| out.report.as_ref()) {
        let pretty = serde_json::to_string_pretty(report).unwrap_or_default();
        let _ = writeln!(o, "Report:");
        for l in pretty.lines() {
            let _ = writeln!(o, "  {l}");
        }
    }
    log(&mut o, place, outcome);
    o
}

/// The teammate's name: its folder's, the archive's, or the compacted record's (else its
/// outcome's).
fn teammate(place: Place<'_>, outcome: Option<&Outcome>) -> String {
    match place {
        Place::Teammate(dir) => dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        Place::Archive { teammate, .. } => teammate.to_owned(),
        Place::Compacted { record, .. } => record
            .map(|r| r.teammate.clone())
            .or_else(|| outcome.map(|o| o.teammate.clone()))
            .unwrap_or_default(),
    }
}

/// The first lines: the item's status after its attempts, title, reason, kind and summary
/// (or that it is still running).
fn heading(o: &mut String, id: &str, teammate: &str, outcome: Option<&Outcome>) {
    let Some(out) = outcome else {
        let _ = writeln!(
            o,
            "Item {id} (teammate {teammate}): running, no outcome yet"
        );
        return;
    };
    let waits = match out.rate_limit_waits {
        0 => String::new(),
        n => format!(" and {n} rate-limit wait(s)"),
    };
    let _ = writeln!(
        o,
        "Item {id} (teammate {teammate}): {} after {} attempt(s){waits}",
        out.status, out.attempts
    );
    let _ = writeln!(o, "Title:   {}", out.title);
    if !out.error.is_empty() {
        let _ = writeln!(o, "Reason:  {}", out.error);
    }
    if let Some(kind) = out.failure_kind {
        let _ = writeln!(o, "Kind:    {kind}");
    }
    if !out.summary.is_empty() {
        let _ = writeln!(o, "Summary: {}", out.summary);
    }
}

/// `Attempts:`, one line each: its number, verdict, time, start, cost and reason.
fn attempts(o: &mut String, events: &[Event]) {
    let _ = writeln!(o, "Attempts:");
    for e in events {
        let Event::AttemptStarted {
            attempt: number,
            at,
            candidate,
            ..
        } = e
        else {
            continue;
        };
        let end = events.iter().find_map(|f| match f {
            Event::AttemptFinished {
                attempt: a,
                verdict,
                spend,
                at: done,
                refused,
                candidate: c,
                ..
            } if a == number && c == candidate => Some((verdict, spend, done, *refused)),
            _ => None,
        });
        // A `--best-of` candidate's attempts are numbered on their own: `c2/1`.
        let attempt = match candidate {
            Some(k) => format!("c{k}/{number}"),
            None => number.to_string(),
        };
        let line = match end {
            Some((verdict, spend, done, refused)) => {
                let took = took(at, done).unwrap_or_else(|| "?".into());
                // What this attempt cost, when its agent said.
                let cost = spend
                    .cost_usd
                    .map(|c| format!("  ${}", crate::run::record::outcome::usd_text(c)))
                    .unwrap_or_default();
                // A request refused unprocessed is a wait, not an attempt.
                let status = match refused {
                    true => "refused".to_string(),
                    false => verdict.status.to_string(),
                };
                let wait = match refused {
                    true => " (a rate-limit wait, sent again as it was)",
                    false => "",
                };
                format!(
                    "  {attempt:>3}  {status:<10} {took:>6}  started {at}{cost}  {}{wait}",
                    verdict.reason
                )
            }
            None => format!("  {attempt:>3}  {:<10} {:>6}  started {at}", "running", ""),
        };
        let _ = writeln!(o, "{}", line.trim_end());
    }
}

/// What the teammate last said while it worked (its progress file), in its words.
fn said(o: &mut String, events: &[Event]) {
    let said = events.iter().rev().find_map(|e| match e {
        Event::Progress {
            attempt, progress, ..
        } => Some((attempt, progress)),
        _ => None,
    });
    if let Some((attempt, p)) = said {
        let one_line = |t: &str| t.replace(['\n', '\r'], " ");
        let _ = writeln!(o, "Said:    {} (attempt {attempt})", p.brief());
        for d in &p.discoveries {
            let _ = writeln!(o, "  found: {}", one_line(d));
        }
        if !p.files.is_empty() {
            let _ = writeln!(o, "  files: {}", one_line(&p.files.join(", ")));
        }
    }
}

/// `Cost:` (dollars, tokens, session) and `Branch:`, when the outcome has them.
fn spend(o: &mut String, out: &Outcome) {
    let mut costs = Vec::new();
    if let Some(c) = out.cost_usd {
        costs.push(format!("${}", crate::run::record::outcome::usd_text(c)));
    }
    if let (Some(i), Some(t)) = (out.input_tokens, out.output_tokens) {
        match out.cached_input_tokens {
            Some(c) if c > 0 => costs.push(format!("tokens in {i} ({c} cached), out {t}")),
            _ => costs.push(format!("tokens in {i}, out {t}")),
        }
    }
    if let Some(s) = &out.session_id {
        costs.push(format!("session {s}"));
    }
    if !costs.is_empty() {
        let _ = writeln!(o, "Cost:    {}", costs.join("; "));
    }
    if let Some(b) = &out.branch {
        let _ = writeln!(
            o,
            "Branch:  {b} {}",
            out.commit.as_deref().unwrap_or_default()
        );
    }
}

/// `Candidates:` of a `--best-of` item side by side — status, verify, score, cost, time,
/// diffstat, and why one is out — after the winner and the rule that chose it.
fn candidates(o: &mut String, b: &crate::report::best_of::BestOf, events: &[Event]) {
    let winner = match b.winner {
        Some(k) => format!("winner c{k}, {}", b.rule),
        None => b.rule.clone(),
    };
    let _ = writeln!(o, "Candidates: {} ({winner}):", b.candidates_text());
    let _ = writeln!(
        o,
        "  {:<4} {:<24} {:<10} {:<7} {:>8} {:>10} {:>8}  diff",
        "#", "teammate", "status", "verify", "score", "cost", "time"
    );
    for c in &b.candidates {
        let dash = || "-".to_owned();
        let score = c.score.map_or_else(dash, |s| s.to_string());
        let cost = c.cost_usd.map_or_else(dash, |v| {
            format!("${}", crate::run::record::outcome::usd_text(v))
        });
        let verify = if c.verify.is_empty() { "-" } else { &c.verify };
        // Its last attempt's time as the attempts list above says it (the outcome's
        // `duration_s` is the agent's alone, and showed `0.0s` beside a 0.22 s attempt).
        let time = candidate_took(events, c.candidate).unwrap_or_else(|| seconds(c.duration_s));
        let line = format!(
            "  {:<4} {:<24} {:<10} {verify:<7} {score:>8} {cost:>10} {time:>8}  {}",
            format!("c{}", c.candidate),
            c.teammate,
            c.status.to_string(),
            c.diffstat.as_deref().unwrap_or("-"),
        );
        let _ = writeln!(o, "{}", line.trim_end());
        if !c.error.is_empty() {
            let _ = writeln!(o, "         out: {}", c.error);
        }
    }
}

/// `Prompt:` (or `Archive:`): where the prompt is, or why there is none.
fn prompt(o: &mut String, id: &str, place: Place<'_>) {
    match place {
        Place::Teammate(dir) => {
            let prompt = dir.join("prompt.md");
            match (prompt.is_file(), dir.is_dir()) {
                (true, _) => {
                    let _ = writeln!(o, "Prompt:  {}", prompt.display());
                }
                // Handed to the agent from memory; on disk once it has run a second.
                (false, true) => {
                    let _ = writeln!(o, "Prompt:  {PROMPT_NOT_WRITTEN}");
                }
                // Skipped or cancelled before it started: no folder was made for it.
                (false, false) => {
                    let _ = writeln!(o, "Prompt:  none: it never started");
                }
            }
        }
        Place::Archive { path, .. } => {
            let _ = writeln!(
                o,
                "Archive: {} (the prompt and logs were removed with the workspace)",
                path.display()
            );
        }
        Place::Compacted {
            file,
            record: Some(r),
        } => {
            // The command that prints it, ready to paste.
            let ws = file.parent().unwrap_or(file).display().to_string();
            let again = shlex::try_join(["runner", "show", "--prompt", "--", id, ws.as_str()])
                .unwrap_or_default();
            let cut = match (r.prompt.len() as u64) < r.prompt_bytes {
                true => format!(" (the first {} kept)", r.prompt.len()),
                false => String::new(),
            };
            let _ = writeln!(
                o,
                "Prompt:  {} bytes{cut}, kept in {} (`{again}` prints it; the item's folder was removed when it completed: keep folders with --keep-logs)",
                r.prompt_bytes,
                file.display()
            );
        }
        Place::Compacted { file, record: None } => {
            let _ = writeln!(
                o,
                "Prompt:  not kept: {} holds no readable record of this item (a damaged or cut line)",
                file.display()
            );
        }
    }
}

/// The last lines of the log that explains the item: kept in its compacted record (after
/// the working context it left), or read from its log file.
fn log(o: &mut String, place: Place<'_>, outcome: Option<&Outcome>) {
    match place {
        Place::Compacted { record: None, .. } => {
            let _ = writeln!(o, "Log:     not kept (see the prompt's line)");
        }
        Place::Compacted {
            record: Some(record),
            ..
        } => kept_log(o, record),
        _ => {
            if let Some(log) = outcome
                .map(|out| out.log.as_str())
                .filter(|l| !l.is_empty())
            {
                match tail(Path::new(log), LOG_LINES) {
                    Some(t) if !t.trim().is_empty() => {
                        let _ = writeln!(o, "Log {log} (last {LOG_LINES} lines):");
                        for l in t.lines() {
                            let _ = writeln!(o, "  | {l}");
                        }
                    }
                    Some(_) => {
                        let _ = writeln!(o, "Log {log}: empty");
                    }
                    None => {
                        let _ = writeln!(o, "Log {log}: no longer there");
                    }
                }
            }
        }
    }
}

/// A compacted item's working context and log tail, as its record kept them.
fn kept_log(o: &mut String, record: &crate::run::record::compact::Record) {
    if let Some(wc) = &record.working_context {
        let lines: Vec<&str> = wc.lines().collect();
        let _ = writeln!(
            o,
            "Working context (as the agent left it; the first {LOG_LINES} of {} lines kept):",
            lines.len()
        );
        for l in lines.iter().take(LOG_LINES) {
            let _ = writeln!(o, "  | {l}");
        }
    }
    let text = record.tail(&record.log).map_or("", |t| t.text.as_str());
    let lines: Vec<&str> = text.lines().collect();
    match lines.is_empty() {
        true => {
            let _ = writeln!(
                o,
                "Log of attempt {} ({}): empty",
                record.attempt, record.log
            );
        }
        false => {
            let _ = writeln!(
                o,
                "Log of attempt {} ({}, last {LOG_LINES} lines, as kept):",
                record.attempt, record.log
            );
            for l in &lines[lines.len().saturating_sub(LOG_LINES)..] {
                let _ = writeln!(o, "  | {l}");
            }
        }
    }
}

#[cfg(test)]
mod took_tests {
    use super::took;

    #[test]
    fn an_attempt_under_a_second_shows_its_hundredths_not_0s() {
        let at = "2026-12-07T10:00:00.000Z";
        assert_eq!(
            took(at, "2026-12-07T10:00:00.850Z").as_deref(),
            Some("0.85s")
        );
        assert_eq!(took(at, "2026-12-07T10:00:42.400Z").as_deref(), Some("42s"));
        assert_eq!(took(at, "later"), None);
    }
}
