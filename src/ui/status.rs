//! How `runner status` shows a team's `team.json` snapshot: the full view for people and the
//! short deterministic `--brief` view for lead agents. Reads file times; changes nothing.

use crate::run::record::folder::TeammateFolder;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::report::ItemStatus;
pub(crate) use crate::run::record::team::alive;
use crate::run::record::team::{RunningEntry, Snapshot};

/// Most unfinished items `--brief` lists.
const BRIEF_ITEMS: usize = 15;

/// `running`, `finished`, `interrupted`, `stopped` when team.json says running but its
/// runner is gone (killed), or `paused` when its runner is stopped (SIGSTOP, Ctrl-Z, a
/// debugger): no deadline counts while it is, and teammates it did not stop go on.
fn state(s: &Snapshot) -> String {
    if runner_gone(s) {
        "stopped (its runner is gone)".into()
    } else if s.state == "running" && crate::run::record::team::stopped(s.pid) {
        format!(
            "paused (its runner, pid {}, is stopped; `kill -CONT {}` or `fg` continues it)",
            s.pid, s.pid
        )
    } else {
        s.state.clone()
    }
}

/// Whether team.json says running but its runner is gone: what it lists as running was
/// stopped with it (and a resume runs it again).
fn runner_gone(s: &Snapshot) -> bool {
    s.state == "running" && !alive(s.pid)
}

/// How the running entries are named: `running`, or `were running` once the runner is gone.
fn running_word(s: &Snapshot) -> &'static str {
    match runner_gone(s) {
        true => "were running",
        false => "running",
    }
}

/// The team's items and their states: this run's (`counts`, running, waiting, pending)
/// and, once it ended, those it did not cover with their earlier outcomes.
fn counts_line(s: &Snapshot) -> String {
    let team = s.team_counts();
    let earlier: u64 = s.earlier.values().sum();
    counts_of(s, &team, s.total.map(|t| t + earlier))
}

/// This run's own counts, when it did not cover every item of the team (`This run: 3
/// item(s): 1 completed, 2 failed`); `None` when it covered them all.
fn run_line(s: &Snapshot) -> Option<String> {
    (!s.earlier.is_empty()).then(|| format!("This run: {}", counts_of(s, &s.counts, s.total)))
}

/// `N item(s): 3 completed, 1 failed, 2 running, …` over `counts` of `s`, with `total` items.
fn counts_of(
    s: &Snapshot,
    counts: &std::collections::BTreeMap<String, u64>,
    total: Option<u64>,
) -> String {
    let finished: u64 = counts.values().sum();
    let running = s.running.len() as u64;
    let waiting = s.waiting.len() as u64;
    let mut parts: Vec<String> = ItemStatus::ALL
        .iter()
        .filter_map(|st| {
            counts
                .get(st.as_str())
                .filter(|n| **n > 0)
                .map(|n| format!("{n} {st}"))
        })
        .collect();
    if running > 0 {
        parts.push(format!("{running} {}", running_word(s)));
    }
    if waiting > 0 {
        parts.push(format!("{waiting} waiting"));
    }
    let total = total.unwrap_or(finished + running + waiting);
    let pending = total.saturating_sub(finished + running + waiting);
    if pending > 0 && s.state == "running" {
        parts.push(format!("{pending} pending"));
    } else if pending > 0 {
        parts.push(format!("{pending} never started"));
    }
    format!(
        "{total} item(s): {}",
        if parts.is_empty() {
            "none yet".into()
        } else {
            parts.join(", ")
        }
    )
}

/// One line for `status --list`: the workspace, the team, its state and counts.
pub(crate) fn one_line(dir: &Path, s: &Snapshot) -> String {
    format!(
        "{}  {} — {}; {}",
        s.team,
        dir.display(),
        state(s),
        counts_line(s)
    )
}

/// A running teammate's last checkpoint (the last time it wrote its `working-context.md`;
/// the runner's untouched skeleton is none) and whether it is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// How long ago the last checkpoint was; `None` when it made none.
    pub age: Option<Duration>,
    /// How long it has gone without one, when that is longer than the threshold: since its
    /// last checkpoint, or since its attempt started when that is later (a checkpoint of an
    /// earlier attempt does not make a fresh attempt stale).
    pub stale_for: Option<Duration>,
}

impl Checkpoint {
    /// Judge a teammate whose last checkpoint was at `last` and whose attempt started at
    /// `started` (`None` when team.json's time does not parse), at time `now`, against
    /// `stale_after`. Pure.
    pub(crate) fn judge(
        last: Option<SystemTime>,
        started: Option<SystemTime>,
        now: SystemTime,
        stale_after: Duration,
    ) -> Checkpoint {
        let since = |t: SystemTime| now.duration_since(t).unwrap_or_default();
        let quiet = match (last, started) {
            (Some(l), Some(s)) => Some(since(l.max(s))),
            (l, s) => l.or(s).map(since),
        };
        Checkpoint {
            age: last.map(since),
            stale_for: quiet.filter(|q| *q > stale_after),
        }
    }

    /// `last checkpoint 3m ago` / `no checkpoint yet`, then `; STALE: none for 16m` when
    /// stale.
    fn text(&self) -> String {
        let mut t = match self.age {
            Some(a) => format!("last checkpoint {}", ago_secs(a.as_secs())),
            None => "no checkpoint yet".to_owned(),
        };
        if let Some(q) = self.stale_for {
            t.push_str(&format!("; STALE: none for {}", span(q.as_secs())));
        }
        t
    }
}

/// The checkpoint of running teammate `r` of the team in `dir`; `None` when the run is not
/// going on (its runner gone), when nothing is judged.
fn checkpoint_of(
    dir: &Path,
    s: &Snapshot,
    r: &RunningEntry,
    stale_after: Duration,
) -> Option<Checkpoint> {
    if !s.is_live() {
        return None;
    }
    let work = TeammateFolder::new(dir, &r.teammate).work();
    // Every teammate that keeps a working context starts with one (the runner seeds it);
    // none at all is a teammate that only answers (the HTTP backend): nothing to judge.
    if !work.join(crate::working_context::FILE_NAME).exists() {
        return None;
    }
    let started = r
        .started_at
        .parse::<jiff::Timestamp>()
        .ok()
        .map(SystemTime::from);
    Some(Checkpoint::judge(
        crate::working_context::last_checkpoint(&work, &r.teammate),
        started,
        SystemTime::now(),
        stale_after,
    ))
}

/// The short, deterministic summary for agents: state and counts, then the unfinished items
/// with their reasons (never-started ones last), at most [`BRIEF_ITEMS`] of them, then
/// `resume: COMMAND` when `resume` is given; a running teammate without a checkpoint for
/// longer than `stale_after` is marked stale.
pub(crate) fn brief(
    dir: &Path,
    s: &Snapshot,
    stale_after: Duration,
    resume: Option<&str>,
) -> String {
    let mut out = format!("team {}: {}; {}\n", s.team, state(s), counts_line(s));
    if let Some(g) = &s.gate {
        out.push_str(&gate_line(s, g));
    }
    // Each group in id order, whatever order the items started or finished in.
    let mut running: Vec<_> = s.running.iter().collect();
    running.sort_by(|a, b| id_order(&a.id, &b.id));
    let mut waiting: Vec<_> = s.waiting.iter().collect();
    waiting.sort_by(|a, b| id_order(&a.id, &b.id));
    // This run's and, not covered by it, those earlier runs left unfinished.
    let mut failed: Vec<_> = s
        .finished
        .iter()
        .filter(|f| f.status != ItemStatus::Completed)
        .chain(&s.earlier_unfinished)
        .collect();
    failed.sort_by(|a, b| id_order(&a.id, &b.id));
    let mut lines: Vec<String> = Vec::new();
    for r in running {
        let stale = checkpoint_of(dir, s, r, stale_after)
            .and_then(|c| c.stale_for)
            .map(|q| format!(", stale: no checkpoint for {}", span(q.as_secs())))
            .unwrap_or_default();
        // What it last said (its progress file) tells a lead more than its title.
        let said = r
            .progress
            .as_ref()
            .map(|p| format!(" — says: {}", crate::ui::terminal_safe(&p.brief())))
            .unwrap_or_default();
        lines.push(format!(
            "- {} ({}, attempt {}{stale}): {}{said}",
            r.id,
            match runner_gone(s) {
                true => "was running when its runner died",
                false => "running",
            },
            r.attempt,
            r.title
        ));
    }
    for w in waiting {
        lines.push(format!(
            "- {} (waiting): after {}",
            w.id,
            w.after.join(", ")
        ));
    }
    for f in failed {
        lines.push(format!("- {} ({}): {}", f.id, f.status, f.detail));
    }
    for n in &s.not_started {
        lines.push(format!("- {} (never started): {}", n.id, n.title));
    }
    if !lines.is_empty() {
        out.push_str("unfinished:\n");
        let more = lines.len().saturating_sub(BRIEF_ITEMS);
        for l in lines.into_iter().take(BRIEF_ITEMS) {
            out.push_str(&l);
            out.push('\n');
        }
        if more > 0 {
            out.push_str(&format!("- … and {more} more\n"));
        }
    }
    if let Some(cmd) = resume {
        // A secret of the command was recorded as REDACTED: say so, in a shell comment, so
        // that the line stays one a person can paste once they put it back.
        let note = match cmd.contains("REDACTED") {
            true => "  # put back each REDACTED value",
            false => "",
        };
        out.push_str(&format!("resume: {cmd}{note}\n"));
    }
    out
}

/// Item ids in the order a person counts them: runs of digits compare as numbers (`2` before
/// `10`, `row-9` before `row-10`), the rest as text.
fn id_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn runs(s: &str) -> impl Iterator<Item = (bool, &str)> {
        let mut rest = s;
        std::iter::from_fn(move || {
            let first = rest.chars().next()?;
            let digits = first.is_ascii_digit();
            let end = rest
                .find(|c: char| c.is_ascii_digit() != digits)
                .unwrap_or(rest.len());
            let (run, tail) = rest.split_at(end);
            rest = tail;
            Some((digits, run))
        })
    }
    let mut x = runs(a);
    let mut y = runs(b);
    loop {
        let ord = match (x.next(), y.next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some((true, m)), Some((true, n))) => {
                let (m, n) = (m.trim_start_matches('0'), n.trim_start_matches('0'));
                m.len().cmp(&n.len()).then_with(|| m.cmp(n))
            }
            (Some((_, m)), Some((_, n))) => m.cmp(n),
        };
        if ord.is_ne() {
            return ord;
        }
    }
}

fn ago(t: SystemTime) -> String {
    ago_secs(
        SystemTime::now()
            .duration_since(t)
            .unwrap_or_default()
            .as_secs(),
    )
}

/// `42s`, `16m`, `3h`: a span in its largest whole unit.
fn span(secs: u64) -> String {
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

fn ago_secs(secs: u64) -> String {
    format!("{} ago", span(secs))
}

/// The newest of a teammate's attempt files (`attempt-N.stdout.log`, `.stderr.log`, their
/// `.tail` files once a log passes half its cap, the verify and set-up logs) and its
/// working-context.md.
fn last_activity(dir: &Path, teammate: &str) -> Option<SystemTime> {
    let folder = TeammateFolder::new(dir, teammate);
    let tdir = folder.dir();
    let mut newest = std::fs::metadata(folder.working_context())
        .and_then(|m| m.modified())
        .ok();
    for e in std::fs::read_dir(tdir).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with("attempt-")
            && let Ok(m) = e.metadata().and_then(|m| m.modified())
        {
            newest = Some(newest.map_or(m, |n| n.max(m)));
        }
    }
    newest
}

/// `M:SS` from `from` (RFC 3339) to `until`, or to now when `until` is `None`; `?` when a
/// time does not parse.
fn elapsed_between(from: &str, until: Option<&str>) -> String {
    let end = match until.map(str::parse::<jiff::Timestamp>) {
        None => jiff::Timestamp::now(),
        Some(Ok(t)) => t,
        Some(Err(_)) => return "?".into(),
    };
    match from.parse::<jiff::Timestamp>() {
        Ok(t) => {
            let secs = end.duration_since(t).as_secs().max(0);
            format!("{}:{:02}", secs / 60, secs % 60)
        }
        Err(_) => "?".into(),
    }
}

/// `paused: rate limited until 14:03:10 UTC (5 waiting), running 3 of 8`, or the stop, or
/// the budget, one per line.
fn gate_line(s: &Snapshot, g: &crate::run::record::team::GateSnapshot) -> String {
    let mut o = String::new();
    if let Some(p) = &g.paused {
        o.push_str(&format!(
            "paused: {p} ({} waiting), running {} of {}\n",
            g.waiting,
            s.running.len(),
            g.jobs
        ));
    } else if g.limit < g.jobs {
        o.push_str(&format!(
            "adapting to rate limits: at most {} of {} at once\n",
            g.limit, g.jobs
        ));
    }
    if let Some(why) = &g.stopped {
        o.push_str(&format!("stopped starting items: {why}\n"));
    }
    if let Some(max) = g.max_cost_usd {
        o.push_str(&format!(
            "budget: spent ${} of ${}\n",
            crate::run::record::outcome::usd_text(g.spent_usd.unwrap_or(0.0)),
            crate::run::record::outcome::usd_text(max)
        ));
    }
    o
}

/// Most row chains `runner status` lists.
const CHAINS_SHOWN: usize = 20;

/// With stages: each row's chain (`r2: audit ✔ → fix ✘ → verify –`), rows not done first,
/// at most [`CHAINS_SHOWN`], and how many rows completed every stage. What finished comes
/// from the team's journal in `dir` (every run's, not only the last one's, which the
/// snapshot holds), else from the snapshot (an archive's holds every item).
fn chains(dir: &Path, s: &Snapshot) -> String {
    use crate::source::stages::{Place, chain_line, chains};
    if s.stages.is_empty() {
        return String::new();
    }
    let journal = dir.join("journal.jsonl");
    let replayed = journal
        .is_file()
        .then(|| crate::run::record::journal::last_statuses(&journal).ok())
        .flatten();
    let finished: Vec<(&str, Place)> = match &replayed {
        Some(r) => r
            .iter()
            .map(|(id, status)| (id.as_str(), Place::Finished(*status)))
            .collect(),
        None => s
            .finished
            .iter()
            .map(|f| (f.id.as_str(), Place::Finished(f.status)))
            .collect(),
    };
    // Input order where the snapshot knows it; the journal's map has none.
    let mut finished = finished;
    finished.sort_by(|a, b| id_order(a.0, b.0));
    let ids = finished
        .into_iter()
        .chain(s.running.iter().map(|r| (r.id.as_str(), Place::Running)))
        .chain(s.waiting.iter().map(|w| (w.id.as_str(), Place::Pending)));
    let rows = chains(&s.stages, ids);
    if rows.is_empty() {
        return String::new();
    }
    let done = |stages: &[(String, Place)]| {
        stages
            .iter()
            .all(|(_, p)| *p == Place::Finished(ItemStatus::Completed))
    };
    let (complete, open): (Vec<_>, Vec<_>) = rows.iter().partition(|(_, st)| done(st));
    let mut o = format!("Chains ({}):\n", s.stages.join(" → "));
    for (row, stages) in open.iter().take(CHAINS_SHOWN) {
        o.push_str(&format!("  {}\n", chain_line(row, stages)));
    }
    if open.len() > CHAINS_SHOWN {
        o.push_str(&format!(
            "  … and {} more row(s) not done\n",
            open.len() - CHAINS_SHOWN
        ));
    }
    if !complete.is_empty() {
        o.push_str(&format!(
            "  {} row(s) completed every stage\n",
            complete.len()
        ));
    }
    o
}

/// The full human view of the team in `dir`: state, counts, running teammates with their
/// last line, activity and last checkpoint (flagged stale past `stale_after`), waiting items,
/// each row's chain of stages, what did not complete (with logs), recent completions.
pub(crate) fn full(dir: &Path, s: &Snapshot, stale_after: Duration) -> String {
    let mut o = heading(dir, s);
    let cost = s
        .cost_usd
        .map(|c| format!(", ${}", crate::run::record::outcome::usd_text(c)))
        .unwrap_or_default();
    o.push_str(&format!("{}{cost}\n", counts_line(s)));
    if let Some(run) = run_line(s) {
        let earlier: u64 = s.earlier.values().sum();
        o.push_str(&format!(
            "{run} (the other {earlier} are as earlier runs left them; `runner report --markdown -` lists every item that did not complete)\n"
        ));
    }
    if let Some(g) = &s.gate {
        o.push_str(&gate_line(s, g));
    }
    o.push_str(&running(dir, s, stale_after));
    if !s.waiting.is_empty() {
        o.push_str("Waiting for prerequisites:\n");
        for w in &s.waiting {
            o.push_str(&format!(
                "  {}  after {}  {}\n",
                w.teammate,
                w.after.join(", "),
                w.title
            ));
        }
    }
    o.push_str(&chains(dir, s));
    o.push_str(&finished(s));
    o
}

/// The view's first lines: the team and its state (or that it is archived), where it is,
/// when it started and was last updated.
fn heading(dir: &Path, s: &Snapshot) -> String {
    if s.state == crate::run::record::archive::ARCHIVED {
        return format!(
            "Team {} — archived: its workspace was removed\n\
             Archive: {}\nStarted {}, archived {}\n",
            s.team,
            dir.display(),
            s.started_at,
            s.updated_at
        );
    }
    format!(
        "Team {} — {} (runner pid {})\nWorkspace: {}\nStarted {}, updated {}\n",
        s.team,
        state(s),
        s.pid,
        dir.display(),
        s.started_at,
        s.updated_at
    )
}

/// The running teammates: each one's attempt, time, title and last line, its activity and
/// last checkpoint, and what it last said.
fn running(dir: &Path, s: &Snapshot, stale_after: Duration) -> String {
    if s.running.is_empty() {
        return String::new();
    }
    let mut o = String::from(match runner_gone(s) {
        true => "Running when the runner died (a resume runs them again):\n",
        false => "Running:\n",
    });
    for r in &s.running {
        let mut notes: Vec<String> = last_activity(dir, &r.teammate)
            .map(|t| format!("last activity {}", ago(t)))
            .into_iter()
            .collect();
        notes.extend(checkpoint_of(dir, s, r, stale_after).map(|c| c.text()));
        let act = match notes.is_empty() {
            true => String::new(),
            false => format!("  ({})", notes.join("; ")),
        };
        let line = if r.last_line.is_empty() {
            String::new()
        } else {
            format!(" — {}", r.last_line)
        };
        o.push_str(&format!(
            "  {}  attempt {}  {}  {}{line}{act}\n",
            r.teammate,
            r.attempt,
            // Once the runner is gone the attempt stopped with it: its time ends at
            // the last snapshot, not now.
            elapsed_between(
                &r.started_at,
                runner_gone(s).then_some(s.updated_at.as_str())
            ),
            r.title
        ));
        if let Some(p) = &r.progress {
            // The teammate's own words: one line, nothing a terminal would obey.
            let said = crate::ui::terminal_safe(&p.brief());
            o.push_str(&format!("      says: {said}\n"));
        }
    }
    o
}

/// What did not complete (with its log), then the recent completions: every one, with its
/// attempts, for an archived team (it is over).
fn finished(s: &Snapshot) -> String {
    let mut o = String::new();
    let (done, problems): (Vec<_>, Vec<_>) = s
        .finished
        .iter()
        .partition(|f| f.status == ItemStatus::Completed);
    if !problems.is_empty() {
        o.push_str("Did not complete:\n");
        for f in problems {
            let kind = crate::ui::kind_tag(f.status, f.failure_kind);
            o.push_str(&format!(
                "  {:>10}  {} (id {}){kind}: {}\n",
                f.status, f.teammate, f.id, f.detail
            ));
            if !f.log.is_empty() {
                o.push_str(&format!("              log: {}\n", f.log));
            }
        }
    }
    if !done.is_empty() {
        let archived = s.state == crate::run::record::archive::ARCHIVED;
        let shown = if archived { done.len() } else { 10 };
        o.push_str("Completed (most recent last):\n");
        for f in done.iter().rev().take(shown).rev() {
            let attempts = match (archived, f.attempts) {
                (true, n) => format!("  {n} attempt(s)"),
                (false, _) => String::new(),
            };
            o.push_str(&format!(
                "  {}  {:.1}s{attempts}  {}\n",
                f.teammate, f.duration_s, f.detail
            ));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn a_teammate_is_stale_only_when_quiet_past_the_threshold() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let limit = 15 * MIN;
        // Checkpointed 5 minutes ago: fresh.
        let c = Checkpoint::judge(Some(t0), Some(t0 - MIN), t0 + 5 * MIN, limit);
        assert_eq!((c.age, c.stale_for), (Some(5 * MIN), None));
        assert_eq!(c.text(), "last checkpoint 5m ago");
        // Checkpointed 20 minutes ago: stale for 20 minutes.
        let c = Checkpoint::judge(Some(t0), Some(t0 - MIN), t0 + 20 * MIN, limit);
        assert_eq!(c.stale_for, Some(20 * MIN));
        assert_eq!(c.text(), "last checkpoint 20m ago; STALE: none for 20m");
        // An earlier attempt's checkpoint: quiet since this attempt started.
        let c = Checkpoint::judge(Some(t0), Some(t0 + 60 * MIN), t0 + 70 * MIN, limit);
        assert_eq!((c.age, c.stale_for), (Some(70 * MIN), None));
        // None yet: quiet since the start.
        let c = Checkpoint::judge(None, Some(t0), t0 + 16 * MIN, limit);
        assert_eq!(c.text(), "no checkpoint yet; STALE: none for 16m");
        let c = Checkpoint::judge(None, Some(t0), t0 + 14 * MIN, limit);
        assert_eq!(c.stale_for, None);
    }

    #[test]
    fn ids_are_listed_in_counting_order() {
        let mut ids = vec![
            "10", "9", "row-10", "row-9", "2", "1b", "1a", "b", "a", "007",
        ];
        ids.sort_by(|a, b| id_order(a, b));
        assert_eq!(
            ids,
            [
                "1a", "1b", "2", "007", "9", "10", "a", "b", "row-9", "row-10"
            ]
        );
    }

    #[test]
    fn an_attempt_stopped_with_its_runner_stops_counting_time() {
        let t = "2026-12-01T10:00:00Z";
        assert_eq!(elapsed_between(t, Some("2026-12-01T10:02:05Z")), "2:05");
        assert_eq!(elapsed_between(t, Some("not a time")), "?");
        assert_eq!(elapsed_between("bad", None), "?");
    }
}
