//! Output for people and machines: a progress bar on a terminal, one plain line per finished
//! item otherwise, or JSON lines (`--format json`). The UI reads events; it changes no state.

pub(crate) mod html;
pub(crate) mod inbox;
pub(crate) mod markdown;
pub(crate) mod plan;
pub(crate) mod review;
pub(crate) mod show;
pub(crate) mod status;

pub(crate) use plan::print_plan;

pub(crate) use crate::shown::{is_invisible, terminal_safe, warn};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use std::collections::{BTreeMap, HashMap};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::options::Format;
use crate::report::ItemStatus;
use crate::run::events::{Event, Reporter, RunSummary};
use crate::run::isolation::IsolationEnd;
use crate::sink::{PlanFile, Sink};

/// What `runner clean` adds to "Removed team X." about what it kept of the workspace (a
/// line break and where its record is, and which output tables' `log` column names it), or
/// nothing.
pub(crate) fn kept_line(kept: Option<&crate::sink::before_removal::Kept>) -> String {
    let Some(k) = kept else {
        return String::new();
    };
    let tables: Vec<String> = k.tables.iter().map(|p| p.display().to_string()).collect();
    let named = match tables.is_empty() {
        true => String::new(),
        false => format!("; the log column of {} names it", tables.join(", ")),
    };
    format!(
        "\n  Its record (attempts and reports, no logs) is in {}{named}.",
        k.archive.display()
    )
}

/// Build the reporter for `format`. `Human` falls back to plain lines when stdout is not a
/// terminal.
pub(crate) fn reporter(format: Format) -> Box<dyn Sink> {
    match format {
        Format::Json => Box::new(JsonLines::new(Box::new(std::io::stdout()))),
        Format::Human if std::io::stdout().is_terminal() => Box::new(Human::new()),
        Format::Human | Format::Plain => Box::new(Plain::new(Box::new(std::io::stdout()))),
    }
}

/// ` [rate_limited]`: the failure kind as it follows a status in a list, or nothing when it
/// adds nothing to the status (`skipped [skipped]`) or there is none.
pub(crate) fn kind_tag(status: ItemStatus, kind: Option<crate::failure::FailureKind>) -> String {
    match kind {
        Some(k) if k.as_str() != status.as_str() => format!(" [{k}]"),
        _ => String::new(),
    }
}

/// The line a display prints when the team's gate pauses or stops the team.
fn gate_line(event: &Event) -> String {
    match event {
        Event::TeamPaused {
            until,
            wait_s,
            limit,
            ..
        } => {
            let until = until
                .parse::<jiff::Timestamp>()
                .map(|t| t.strftime("%H:%M:%S UTC").to_string())
                .unwrap_or_else(|_| until.clone());
            format!(
                "    PAUSED  rate limited: no attempt starts for {wait_s}s (until {until}); then at most {limit} at once"
            )
        }
        Event::TeamStopped { reason, .. } => {
            format!("   STOPPED  starting no more items: {reason}")
        }
        _ => String::new(),
    }
}

fn detail(o: &crate::run::record::outcome::Outcome) -> &str {
    if o.status == ItemStatus::Completed {
        &o.summary
    } else {
        without_status(&o.error, o.status)
    }
}

use crate::report::without_status;

/// The line of an attempt that failed and is retried: status, attempt, teammate, reason.
fn retrying_line(teammate: &str, attempt: u32, verdict: &crate::report::Verdict) -> String {
    format!(
        "{:>10} [attempt {attempt}] {teammate}  {}; retrying",
        verdict.status.as_str().to_uppercase(),
        verdict.reason
    )
}

/// The line of a finished item. With `--merge` (`merging`: `queue` or `review`) a completed
/// item with a branch is not yet what it will be: it shows `TO MERGE` until the queue's
/// [`merged_line`], or `TO REVIEW`.
fn finished_line(o: &crate::run::record::outcome::Outcome, merging: &str) -> String {
    // A best-of item's line names its winner: that candidate's own attempt, not the item's
    // `attempts`, which are every candidate's.
    let attempts = o
        .best_of
        .as_deref()
        .and_then(|b| b.winning())
        .filter(|c| c.attempts > 0)
        .map_or(o.attempts, |c| c.attempts);
    let retries = if attempts > 1 {
        format!(" (attempt {attempts})")
    } else {
        String::new()
    };
    let status = match o.status {
        ItemStatus::Completed if o.merged.is_some() => "MERGED".to_string(),
        ItemStatus::Completed if o.branch.is_some() && merging == "queue" => "TO MERGE".into(),
        ItemStatus::Completed if o.branch.is_some() && merging == "review" => "TO REVIEW".into(),
        s => s.as_str().to_uppercase(),
    };
    format!(
        "{status:>10} [{:>7.1}s] {}{retries}  {}",
        o.duration_s,
        o.teammate,
        detail(o)
    )
}

/// The line of the merge queue's step for one item ([`Event::ItemMerged`]): `MERGED` with
/// the target and the merge commit, `FAILED [merge_failed]` with why, or `UNCHANGED` for a
/// branch that adds nothing.
fn merged_line(event: &Event) -> String {
    let Event::ItemMerged {
        teammate,
        into,
        commit,
        error,
        failure_kind,
        unchanged,
        resolved_by,
        ..
    } = event
    else {
        return String::new();
    };
    let by = resolved_by
        .as_ref()
        .map(|r| format!(" (conflict resolved by {r})"))
        .unwrap_or_default();
    if *unchanged {
        return format!(
            "{:>10} {teammate}  nothing to merge: its branch adds nothing to {into}",
            "UNCHANGED"
        );
    }
    match commit {
        Some(c) => format!(
            "{:>10} {teammate}  into {into} as {}{by}",
            "MERGED",
            c.get(..10).unwrap_or(c)
        ),
        None => format!(
            "{:>10} {teammate}{}  {}",
            "FAILED",
            kind_tag(ItemStatus::Failed, *failure_kind),
            without_status(error, ItemStatus::Failed)
        ),
    }
}

/// The line of a conflict handed to a resolver (`RESOLVING`, with the files and the items
/// it meets) or of its attempt's result (`RESOLVED` with the merge commit taken, or
/// `REJECTED` with why).
fn conflict_line(event: &Event) -> String {
    match event {
        Event::ConflictHanded {
            teammate,
            attempt,
            resolver,
            files,
            met,
            ..
        } => {
            let meets = match met.is_empty() {
                true => String::new(),
                false => format!("; it meets {}", met.join(", ")),
            };
            format!(
                "{:>10} {teammate}  conflict in {} handed to {resolver} (attempt {attempt}){meets}",
                "RESOLVING",
                files.join(", ")
            )
        }
        Event::ConflictResolved {
            teammate,
            attempt,
            commit,
            error,
            ..
        } => match commit {
            Some(c) => format!(
                "{:>10} {teammate}  attempt {attempt} taken as {}",
                "RESOLVED",
                c.get(..10).unwrap_or(c)
            ),
            None => format!("{:>10} {teammate}  attempt {attempt}: {error}", "REJECTED"),
        },
        _ => String::new(),
    }
}

/// How many teammates run at once: `--jobs`, or fewer when the batch is smaller.
fn at_a_time(jobs: usize, total: Option<u64>) -> usize {
    total.map_or(jobs, |t| {
        jobs.min(usize::try_from(t).unwrap_or(usize::MAX)).max(1)
    })
}

/// Where a reporter writes: stdout in a run, a buffer in tests.
pub(crate) type Output = Box<dyn Write + Send>;

/// One line per finished item and per interrupt, for logs and CI.
pub(crate) struct Plain {
    out: Output,
    /// What becomes of completed branches (`run_started`'s `merge`).
    merging: String,
}

impl Plain {
    /// Plain lines on `out`.
    pub(crate) fn new(out: Output) -> Plain {
        Plain {
            out,
            merging: String::new(),
        }
    }
}

impl Reporter for Plain {
    fn event(&mut self, event: &Event) {
        let line = match event {
            Event::RunStarted {
                team,
                workspace,
                total,
                jobs,
                merge,
                ..
            } => {
                self.merging.clone_from(merge);
                format!(
                    "Starting team {team}: {} item(s), {} at a time; workspace {}; {}",
                    total.map_or("?".to_string(), |t| t.to_string()),
                    at_a_time(*jobs, *total),
                    workspace.display(),
                    started_tail(event)
                )
            }
            Event::ItemFinished(o) => finished_line(o, &self.merging),
            Event::ItemMerged { .. } => merged_line(event),
            Event::ConflictHanded { .. } | Event::ConflictResolved { .. } => conflict_line(event),
            Event::AttemptFinished {
                teammate,
                attempt,
                verdict,
                retrying: true,
                ..
            } => retrying_line(teammate, *attempt, verdict),
            Event::Interrupted { immediate: false } => {
                "Interrupted: stopping running teammates (Ctrl-C again to kill at once)".into()
            }
            Event::Interrupted { immediate: true } => {
                "Interrupted again: killing running teammates".into()
            }
            Event::TeamPaused { .. } | Event::TeamStopped { .. } => gate_line(event),
            // A diagnostic: on stderr, as the runner's other warnings.
            Event::Warning { message, .. } => {
                warn(message);
                return;
            }
            _ => return,
        };
        // Titles, summaries and reasons are agent text: shown, never obeyed.
        let _ = writeln!(self.out, "{}", terminal_safe(&line));
        let _ = self.out.flush();
    }
}

impl Sink for Plain {
    /// The terminal, not a file.
    fn writes(&self) -> Vec<PlanFile> {
        Vec::new()
    }
}

/// The terminal display: one line per running teammate (name, elapsed, title, the last line
/// it printed) above an overall bar (done/total, counts per status, elapsed, ETA); finished
/// items and the runner's own messages print above them, so no line is torn.
pub(crate) struct Human {
    multi: MultiProgress,
    overall: ProgressBar,
    lines: HashMap<String, (ProgressBar, String)>,
    counts: BTreeMap<ItemStatus, u64>,
    width: usize,
    /// What becomes of completed branches (`run_started`'s `merge`).
    merging: String,
}

impl Human {
    fn new() -> Human {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let overall = multi.add(ProgressBar::new(0));
        overall.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] [{bar:30}] {pos}/{len} {msg} (ETA {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        overall.enable_steady_tick(Duration::from_millis(200));
        Human {
            multi,
            overall,
            lines: HashMap::new(),
            counts: BTreeMap::new(),
            width: 16,
            merging: String::new(),
        }
    }

    fn refresh_counts(&self, running: usize) {
        let mut parts: Vec<String> = ItemStatus::ALL
            .iter()
            .filter_map(|s| {
                self.counts
                    .get(s)
                    .filter(|n| **n > 0)
                    .map(|n| match (s, self.merging.as_str()) {
                        // Not merged yet: said as what they wait for.
                        (ItemStatus::Completed, "queue") => format!("{n} to merge"),
                        (ItemStatus::Completed, "review") => format!("{n} to review"),
                        _ => format!("{n} {s}"),
                    })
            })
            .collect();
        if running > 0 {
            parts.push(format!("{running} running"));
        }
        self.overall.set_message(parts.join(", "));
    }
}

impl Reporter for Human {
    fn event(&mut self, event: &Event) {
        match event {
            Event::RunStarted {
                team,
                total,
                jobs,
                workspace,
                merge,
                ..
            } => {
                self.merging.clone_from(merge);
                if let Some(t) = total {
                    self.overall.set_length(*t);
                }
                let _ = self.multi.println(terminal_safe(&format!(
                    "Starting team {team}, {} at a time; workspace {}; {}",
                    at_a_time(*jobs, *total),
                    workspace.display(),
                    started_tail(event)
                )));
            }
            Event::AttemptStarted {
                id,
                teammate,
                title,
                attempt,
                ..
            } => {
                self.width = self.width.max(teammate.chars().count()).min(40);
                let pb = self
                    .multi
                    .insert_before(&self.overall, ProgressBar::new_spinner());
                pb.set_style(
                    ProgressStyle::with_template(&format!(
                        "  {{prefix:<{}}} {{elapsed:>4}} {{wide_msg}}",
                        self.width
                    ))
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                let retry = if *attempt > 1 {
                    format!(" (attempt {attempt})")
                } else {
                    String::new()
                };
                // A title a teammate proposed or a user typed: shown, never obeyed.
                let shown = terminal_safe(&format!("{title}{retry}"));
                pb.set_prefix(terminal_safe(teammate));
                pb.set_message(shown.clone());
                pb.enable_steady_tick(Duration::from_millis(500));
                if let Some((old, _)) = self.lines.insert(id.clone(), (pb, shown)) {
                    old.finish_and_clear();
                }
                self.refresh_counts(self.lines.len());
            }
            Event::Activity { id, line, .. } => {
                if let Some((pb, title)) = self.lines.get(id) {
                    pb.set_message(format!("{title} — {}", terminal_safe(line)));
                }
            }
            Event::AttemptFinished {
                teammate,
                attempt,
                verdict,
                retrying: true,
                ..
            } => {
                let _ = self
                    .multi
                    .println(terminal_safe(&retrying_line(teammate, *attempt, verdict)));
            }
            Event::ItemFinished(o) => {
                if let Some((pb, _)) = self.lines.remove(&o.id) {
                    pb.finish_and_clear();
                }
                *self.counts.entry(o.status).or_default() += 1;
                self.overall.inc(1);
                self.refresh_counts(self.lines.len());
                let _ = self
                    .multi
                    .println(terminal_safe(&finished_line(o, &self.merging)));
            }
            // After the run: the bars are gone, so the line goes to stdout as it is.
            Event::ItemMerged { .. } => self.multi.suspend(|| {
                let _ = writeln!(std::io::stdout(), "{}", terminal_safe(&merged_line(event)));
            }),
            Event::ConflictHanded { .. } | Event::ConflictResolved { .. } => {
                self.multi.suspend(|| {
                    let line = conflict_line(event);
                    let _ = writeln!(std::io::stdout(), "{}", terminal_safe(&line));
                });
            }
            Event::Interrupted { immediate } => {
                let _ = self.multi.println(if *immediate {
                    "Interrupted again: killing running teammates"
                } else {
                    "Interrupted: stopping running teammates (Ctrl-C again to kill at once)"
                });
            }
            Event::TeamPaused { .. } | Event::TeamStopped { .. } => {
                let _ = self.multi.println(terminal_safe(&gate_line(event)));
            }
            Event::Warning { message, .. } => {
                // Above the bars, on stderr where the bars are drawn.
                let _ = self
                    .multi
                    .println(terminal_safe(&format!("warning: {message}")));
            }
            Event::RunFinished(_) => {
                for (_, (pb, _)) in self.lines.drain() {
                    pb.finish_and_clear();
                }
                self.overall.finish_and_clear();
                let _ = self.multi.clear();
            }
            _ => {}
        }
    }
}

impl Sink for Human {
    /// The terminal, not a file.
    fn writes(&self) -> Vec<PlanFile> {
        Vec::new()
    }
}

/// JSON lines: each recorded event as [`Event::to_line`] writes it (the same lines as the
/// journal; `docs/events.md`).
pub(crate) struct JsonLines {
    out: Output,
}

impl JsonLines {
    /// JSON lines on `out`.
    pub(crate) fn new(out: Output) -> JsonLines {
        JsonLines { out }
    }
}

impl Sink for JsonLines {
    /// The terminal, not a file.
    fn writes(&self) -> Vec<PlanFile> {
        Vec::new()
    }
}

impl Reporter for JsonLines {
    fn event(&mut self, event: &Event) {
        if let Event::Warning { message, .. } = event {
            // People reading stderr see it too; stdout stays JSON lines.
            warn(message);
        }
        match event.to_line() {
            Some(Ok(line)) => {
                let _ = writeln!(self.out, "{line}");
                let _ = self.out.flush();
            }
            Some(Err(e)) => tracing::warn!("cannot encode an event line: {e}"),
            None => {}
        }
    }
}

/// Print a line meant for people, shown, never obeyed ([`terminal_safe`]): on stdout, or on
/// stderr when stdout carries the JSON event stream (`--format json` keeps stdout pure JSON
/// lines). Write errors are ignored: a run goes on (and stops its teammates properly) even
/// when nobody reads its output any more.
pub(crate) fn say(format: Format, text: impl std::fmt::Display) {
    let text = terminal_safe(&text.to_string());
    if format == Format::Json {
        let _ = writeln!(std::io::stderr().lock(), "{text}");
    } else {
        let _ = writeln!(std::io::stdout().lock(), "{text}");
    }
}

/// The end of a run's first line from its `run_started` event: `sandbox landlock`, or `sandbox
/// none (WHAT IT MEANS)` ([`crate::settings::Settings::unconfined`]), then a built-in runner a repository's
/// definition replaced (`; runner claude from FILE, which replaces the built-in`). Empty for
/// any other event.
fn started_tail(event: &Event) -> String {
    let Event::RunStarted {
        sandbox,
        sandbox_why_none,
        replaced_runner,
        ..
    } = event
    else {
        return String::new();
    };
    let mut tail = match sandbox_why_none {
        Some(why) => format!("sandbox {sandbox} ({why})"),
        None => format!("sandbox {sandbox}"),
    };
    if let Some(r) = replaced_runner {
        tail.push_str(&format!("; {}", plan::replaced_text(&r.name, &r.file)));
    }
    tail
}

/// Print the result of a command that runs no teammate (`list`, `status`, `runners`, …) on
/// stdout, shown, never obeyed ([`terminal_safe`]: titles users typed and teammates
/// proposed, agents' summaries and reasons reach no terminal as escapes). When stdout is a
/// pipe whose reader is gone (`runner list | head -1`) the process ends at once with exit 0
/// and prints nothing more, as ripgrep does.
pub(crate) fn out(text: impl std::fmt::Display) {
    out_raw(terminal_safe(&text.to_string()));
}

/// [`out`] byte for byte: for JSON documents (their strings already escape control
/// characters, and a reader needs the text as it is), a log or prompt printed to a pipe,
/// the runner's own generated files (completion scripts, the man page) and escape sequences
/// (`status --watch` clearing the screen).
pub(crate) fn out_raw(text: impl std::fmt::Display) {
    if let Err(e) = write!(std::io::stdout().lock(), "{text}")
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(crate::error::EXIT_OK);
    }
}

/// Print a document an agent, a prompt or a run made (a log, a prompt, a Markdown summary):
/// shown, never obeyed ([`out`]) on a terminal; byte for byte ([`out_raw`]) to a pipe or a
/// file, where it is data.
pub(crate) fn out_document(text: &str) {
    if std::io::stdout().is_terminal() {
        out(text);
    } else {
        out_raw(text);
    }
}

/// [`out`] with a newline.
pub(crate) fn outln(text: impl std::fmt::Display) {
    out(format_args!("{text}\n"));
}

/// The closing summary: counts per status, total time and cost, the output path and the
/// workspace's (`None` once it was removed), and each item that did not complete with its
/// reason and log path.
pub(crate) fn print_summary(
    s: &RunSummary,
    output: Option<&Path>,
    workspace: Option<&Path>,
    format: Format,
) {
    if format == Format::Json {
        return;
    }
    let _ = write_summary(&mut std::io::stdout().lock(), s, output, workspace);
}

/// The closing summary of [`print_summary`], written to `out`.
///
/// Errors: `out` cannot be written.
pub(crate) fn write_summary(
    out: &mut dyn Write,
    s: &RunSummary,
    output: Option<&Path>,
    workspace: Option<&Path>,
) -> std::io::Result<()> {
    let mut text = Vec::new();
    summary_text(&mut text, s, output, workspace)?;
    // Teammate names, ids and reasons may be agent text: shown, never obeyed.
    out.write_all(terminal_safe(&String::from_utf8_lossy(&text)).as_bytes())
}

/// The closing summary of [`write_summary`] as it reads, before it is made terminal-safe.
///
/// Errors: `out` cannot be written.
fn summary_text(
    out: &mut dyn Write,
    s: &RunSummary,
    output: Option<&Path>,
    workspace: Option<&Path>,
) -> std::io::Result<()> {
    let counts: Vec<String> = s
        .counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(st, n)| match st {
            ItemStatus::Cancelled if s.never_started > 0 => {
                format!("{n} {st} ({} never started)", s.never_started.min(*n))
            }
            // Items resumed are completed ones: said beside that count, not the last one.
            ItemStatus::Completed if s.resumed > 0 => {
                format!("{n} {st} ({} from an earlier run)", s.resumed.min(*n))
            }
            _ => format!("{n} {st}"),
        })
        .collect();
    let cost = s
        .cost_usd
        .map(|c| format!(", ${}", crate::run::record::outcome::usd_text(c)))
        .unwrap_or_default();
    writeln!(
        out,
        "\nSummary: {} item(s): {} in {:.1}s{cost}{}",
        s.total(),
        if counts.is_empty() {
            "none".to_string()
        } else {
            counts.join(", ")
        },
        s.elapsed_s,
        if s.interrupted {
            " — interrupted"
        } else {
            ""
        }
    )?;
    for p in &s.problems {
        let kind = kind_tag(p.status, p.kind);
        writeln!(
            out,
            "  {:>10}  {} (id {}){kind}: {}",
            p.status,
            p.teammate,
            p.id,
            without_status(&p.reason, p.status)
        )?;
        if !p.log.is_empty() {
            writeln!(out, "              log: {}", p.log)?;
        }
    }
    if s.problems_hidden > 0 {
        writeln!(
            out,
            "  … and {} more; see the output file",
            s.problems_hidden
        )?;
    }
    if let Some(o) = output {
        writeln!(out, "Output:    {}", o.display())?;
    }
    match workspace {
        Some(w) => writeln!(out, "Workspace: {}", w.display()),
        None => Ok(()),
    }
}

/// The line `resolve` shows before it asks: which isolation the run will use.
pub(crate) fn isolation_line(settings: &crate::settings::Settings) -> &'static str {
    match (settings.isolate, settings.merge) {
        (true, true) if settings.review => {
            "Isolation: worktree — each teammate in its own git worktree; completed branches wait for review (runner review)"
        }
        (true, true) if settings.verify_merged.is_some() => {
            "Isolation: worktree — each teammate in its own git worktree; completed branches are merged back through the merge queue, each merged tree checked by --verify-merged"
        }
        (true, true) => {
            "Isolation: worktree — each teammate in its own git worktree; completed branches are merged back"
        }
        (true, false) => "Isolation: worktree — each teammate in its own git worktree and branch",
        (false, _) => "Isolation: none — teammates share the working tree",
    }
}

/// What worktree isolation left after the run: merged branches, branches to merge, kept
/// worktrees. Nothing with `--format json` (the events carry the branches).
pub(crate) fn print_isolation(end: &IsolationEnd, format: Format) {
    if format == Format::Json {
        return;
    }
    // Shown TO MERGE as they finished, and FAILED by the queue: said again at the end.
    for (teammate, why) in &end.merge_failed {
        say(
            format,
            format!(
                "Not merged into {}: {teammate} is failed: {why}",
                end.target
            ),
        );
    }
    if !end.merged.is_empty() {
        say(
            format,
            format!("Merged into {}: {}", end.target, end.merged.join(", ")),
        );
    }
    if !end.awaiting_review.is_empty() {
        say(
            format,
            format!(
                "Awaiting review (runner review; runner accept ID…; runner reject ID…): {}",
                end.awaiting_review.join(", ")
            ),
        );
    }
    if !end.to_merge.is_empty() {
        say(
            format,
            "Completed branches to merge (git merge --no-ff BRANCH):",
        );
        for b in &end.to_merge {
            say(format, format!("  {b}"));
        }
    }
    if !end.kept.is_empty() {
        say(
            format,
            "Worktrees kept for inspection (remove them with `runner clean`):",
        );
        for (teammate, path, branch) in &end.kept {
            say(
                format,
                format!("  {teammate}: {} (branch {branch})", path.display()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn agent_text_reaches_a_terminal_shown_not_obeyed() {
        // OSC 52 (clipboard), a title, a cursor move, a bidi override, a zero-width space.
        let text = "ok\x1b]52;c;cm0gLXJm\x07 \x1b]0;pwned\x07\x1b[2Atests \u{202E}deliaf\u{202C} x\u{200B}y\n\tnext";
        let safe = terminal_safe(text);
        assert!(
            !safe
                .chars()
                .any(|c| c == '\x1b' || c == '\x07' || is_invisible(c)),
            "{safe}"
        );
        assert!(safe.contains("^[]52;c;cm0gLXJm^G"), "{safe}");
        assert!(safe.contains("<U+202E>deliaf<U+202C>"), "{safe}");
        assert!(
            safe.contains("x<U+200B>y\n\tnext"),
            "newlines and tabs stay: {safe}"
        );
        assert_eq!(
            crate::ui::html::escape("a\u{2066}b<"),
            "a&lt;U+2066&gt;b&lt;"
        );
    }
    use crate::run::events::tests::one_of_each;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().expect("lock").clone()).expect("utf-8")
        }
    }

    fn feed(reporter: &mut dyn Reporter) {
        for event in one_of_each() {
            reporter.event(&event);
        }
    }

    #[test]
    fn plain_lines_from_constructed_events() {
        let buf = Buffer::default();
        feed(&mut Plain::new(Box::new(buf.clone())));
        insta::assert_snapshot!(buf.text());
    }

    #[test]
    fn json_lines_are_the_recorded_events_one_per_line() {
        let buf = Buffer::default();
        feed(&mut JsonLines::new(Box::new(buf.clone())));
        let text = buf.text();
        // Activity is progress detail, not part of the versioned stream.
        let recorded = one_of_each()
            .iter()
            .filter(|e| e.to_line().is_some())
            .count();
        assert_eq!(text.lines().count(), recorded, "{text}");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn the_closing_summary_lists_counts_problems_and_places() {
        let summary = RunSummary {
            at: "2026-12-01T09:00:02Z".into(),
            counts: vec![
                (ItemStatus::Completed, 3),
                (ItemStatus::Failed, 1),
                (ItemStatus::TimedOut, 0),
                (ItemStatus::Cancelled, 48),
            ],
            resumed: 2,
            interrupted: true,
            elapsed_s: 12.34,
            cost_usd: Some(0.125),
            problems: vec![crate::run::events::Problem {
                id: "b".into(),
                teammate: "2-b".into(),
                status: ItemStatus::Failed,
                kind: Some(crate::failure::FailureKind::RateLimited),
                reason: "exited with code 1: boom".into(),
                log: "/w/t/teammates/2-b/attempt-1.stderr.log".into(),
            }],
            problems_hidden: 48,
            never_started: 46,
        };
        let mut out = Vec::new();
        write_summary(
            &mut out,
            &summary,
            Some(Path::new("/w/out.csv")),
            Some(Path::new("/w/t")),
        )
        .expect("write");
        insta::assert_snapshot!(String::from_utf8(out).expect("utf-8"));
    }
}
