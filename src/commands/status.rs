//! `runner status [WORKSPACE]`: the live or last state of a team, read from its `team.json`
//! (written atomically by the running dispatcher, so this works from another terminal), or
//! from its archive once every item completed and the workspace was removed.
//! `--brief` prints a short deterministic summary meant for a lead agent (with the command
//! that resumes, when something is left to do); `--watch` refreshes until the run ends;
//! `--list` lists the teams it knows. Each running teammate shows its last checkpoint (its
//! `working-context.md` write) and is flagged stale past `--stale-after` (default
//! [`crate::working_context::STALE_AFTER`]). The exit code is 0 while
//! nothing has gone wrong (every item completed, or the run goes on without a failure yet),
//! else 1.

use std::io::IsTerminal;
use std::time::Duration;

use crate::cli::StatusArgs;
use crate::error::{Error, Result};
use crate::run::record::resume;
use crate::run::record::team::Snapshot;
use crate::run::record::workspace::Found;
use crate::ui::status::{brief, full};

/// The exit code for snapshot `s`: 1 when an item did not complete or the run ended with
/// items never started, else 0.
fn exit_code(s: &Snapshot) -> i32 {
    if s.incomplete() {
        crate::error::EXIT_INCOMPLETE
    } else {
        crate::error::EXIT_OK
    }
}

/// What `status` prints for `found`.
///
/// Errors: its team.json or archive cannot be read (exit 2).
fn view(found: &Found, brief_view: bool, stale_after: Duration) -> Result<(String, Snapshot)> {
    let s = found.snapshot()?;
    let dir = found.path();
    let mut text = match brief_view {
        true => brief(dir, &s, stale_after, resume::for_team(found, &s).as_deref()),
        false => full(dir, &s, stale_after),
    };
    if !brief_view {
        text.push_str(&awaiting_review(dir));
    }
    // A run served with `--serve`: its live page, while it is up.
    if let Some(url) = crate::serve::announced(dir) {
        text.push_str(&format!("Live page: {url}\n"));
    }
    // The team's OpenAI Batch API jobs (`--batch-api`), as last read.
    let jobs = crate::run::backend::http::batch_record::State::read(dir).lines();
    if !jobs.is_empty() && !brief_view {
        text.push_str("Batch API jobs:\n");
        for line in jobs {
            text.push_str(&format!("  {line}\n"));
        }
    }
    Ok((text, s))
}

/// The items of the team in `dir` a `--merge=review` run left awaiting review, on a line of
/// their own (empty when there are none): they count as completed, yet nothing of theirs is
/// merged until `runner accept` (issue 57).
fn awaiting_review(dir: &std::path::Path) -> String {
    let waiting = crate::run::isolation::review::awaiting(dir).unwrap_or_default();
    if waiting.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = waiting.iter().map(|o| o.teammate.as_str()).collect();
    format!(
        "Awaiting review, completed but not merged (runner review; runner accept ID…; runner \
         reject ID…): {}\n",
        names.join(", ")
    )
}

/// A team's state as `runner status` shows it once: the text (`--brief`'s or the full view)
/// and the snapshot it was read from, whose [`StatusView::exit_code`] is the command's.
pub(crate) struct StatusView {
    /// What `runner status` prints (with `--brief`, the lead agent's summary).
    pub text: String,
    /// The team's `team.json` (or its archive) as read.
    pub snapshot: Snapshot,
}

impl StatusView {
    /// 1 when an item did not complete or the run ended with items never started, else 0.
    pub(crate) fn exit_code(&self) -> i32 {
        exit_code(&self.snapshot)
    }
}

/// The `--stale-after` of `args`, else [`crate::working_context::STALE_AFTER`].
///
/// Errors: not a duration (exit 2).
fn stale_after(args: &StatusArgs) -> Result<Duration> {
    match &args.stale_after {
        Some(t) => crate::settings::parse_duration("--stale-after", t),
        None => Ok(crate::working_context::STALE_AFTER),
    }
}

/// The team `args.workspace` names (default: the most recently updated team here, or in
/// `args.store`), found and read once as `runner status` shows it (`args.brief` picks the
/// view; `--watch` and `--list` are the command's). A team whose items failed is a view like
/// any other: its exit code says so, it is no error.
///
/// Errors: `--store` is no store, `--stale-after` no duration, no team there, or its
/// team.json or archive cannot be read (exit 2).
pub(crate) fn team_status(args: &StatusArgs) -> Result<StatusView> {
    let store = args.store.as_deref();
    if let Some(dir) = store {
        crate::store::check_given(dir)?;
    }
    let stale_after = stale_after(args)?;
    let found = crate::run::record::workspace::locate_in(args.workspace.as_deref(), store)?;
    let (text, snapshot) = view(&found, args.brief, stale_after)?;
    Ok(StatusView { text, snapshot })
}

/// `runner status --queue URL BATCH`: the shared run as its queue holds it; exit 1 while
/// items are left or any failed.
///
/// Errors: no BATCH.md or input named, BATCH.md unreadable (exit 2); the server cannot be
/// reached (exit 3).
fn queue_status(
    url: &crate::options::queue::QueueUrl,
    batch: Option<&std::path::Path>,
) -> Result<i32> {
    let Some(batch) = batch else {
        return Err(Error::needs(
            "runner status --queue",
            "the batch's BATCH.md or input file",
            "name the batch the workers run",
        ));
    };
    let input = match batch.extension().is_some_and(|e| e == "md") {
        true => {
            let text = std::fs::read_to_string(batch)
                .map_err(|e| Error::read_input("the batch definition", batch, e))?;
            let spec = crate::source::batch_spec::parse(batch, &text)?;
            spec.input.unwrap_or_else(|| "workers-input.csv".into())
        }
        false => batch.to_owned(),
    };
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (keys, held) = crate::queue::view::read(url, &name)?;
    let lease = crate::queue::lease();
    crate::ui::out(crate::queue::view::status_text(url, &keys, &held, lease));
    let total: usize = held
        .meta
        .get("total")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let all_done = held.results.len() >= total && !held.meta.is_empty();
    Ok(match all_done && crate::queue::view::all_completed(&held) {
        true => crate::error::EXIT_OK,
        false => crate::error::EXIT_INCOMPLETE,
    })
}

/// `runner status`.
pub(crate) fn status(args: StatusArgs) -> Result<i32> {
    if let Some(url) = &args.queue.clone().map(|q| q.with_ca(args.queue_ca.clone())) {
        return queue_status(url, args.workspace.as_deref());
    }
    if !args.list && !args.watch {
        let view = team_status(&args)?;
        crate::ui::out(&view.text);
        return Ok(view.exit_code());
    }
    let store = args.store.as_deref();
    if let Some(dir) = store {
        crate::store::check_given(dir)?;
    }
    if args.list {
        let teams = crate::run::record::workspace::known(store);
        if teams.is_empty() {
            return Err(Error::missing_file(
                &std::env::current_dir().unwrap_or_default(),
                "team workspace or archive",
                "no *.runner/ or .agent-tasks/teams/ here, and no archive in the store",
            ));
        }
        let mut code = crate::error::EXIT_OK;
        for found in &teams {
            let s = found.snapshot()?;
            code = code.max(exit_code(&s));
            crate::ui::outln(crate::ui::status::one_line(found.path(), &s));
        }
        return Ok(code);
    }
    let stale_after = stale_after(&args)?;
    let mut found = crate::run::record::workspace::locate_in(args.workspace.as_deref(), store)?;
    let tty = std::io::stdout().is_terminal();
    loop {
        // A todo run that completed removed its workspace for its archive: show that.
        if !found.path().exists()
            && let Some(archive) = found.archived()
        {
            found = archive;
        }
        let (text, s) = match view(&found, args.brief, stale_after) {
            Ok(v) => v,
            // Removed between the look and the read.
            Err(_) if let Some(archive) = found.archived() => {
                found = archive;
                view(&found, args.brief, stale_after)?
            }
            Err(e) => return Err(e),
        };
        let clear = if tty { "\x1b[2J\x1b[H" } else { "---\n" };
        crate::ui::out_raw(clear);
        crate::ui::out(text);
        if !s.is_live() {
            return Ok(exit_code(&s));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}
