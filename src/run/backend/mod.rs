//! How one attempt executes (DESIGN §1): the seam between preparing an attempt and judging
//! it.
//!
//! [`crate::schedule::unit`] prepares an attempt (teammate folder, prompt file, argv and
//! environment from the runner definition, state folders, worktree and its set-up), hands it
//! to a [`Backend`] as an [`Attempt`], and judges the [`Execution`] the backend gives back
//! with [`crate::report::judge`] (after the report lookup, the schema, verify and the
//! worktree commit). A backend decides nothing about success: it only says how the attempt
//! ended and what the agent answered.
//!
//! Backends: [`process::Process`] (an agent CLI subprocess in its own process group, see
//! [`crate::run::supervise::process`]), [`http::Http`] (one model API request per attempt,
//! in the wire format of the definition's `[http] api`: see [`http::wire`]) and, in tests,
//! `scripted::Scripted` (scripted results, no processes).
//!
//! # How to add a backend
//!
//! 1. Write `src/run/backend/<name>.rs` with a type implementing [`Backend`]. Its `execute`
//!    runs one [`Attempt`] to its end and returns an [`Execution`]:
//!    - call [`Attempt::started`] once the attempt is under way (with its process group, or
//!      0 when it starts no process), and [`Attempt::activity`] with lines worth showing;
//!    - write what the agent sent back to [`Attempt::stdout_log`] (the log the outputs name)
//!      and read the agent's answer into an [`AgentResult`] (e.g. with
//!      [`crate::agent::output::parse`] through [`Attempt::runner`]);
//!    - stop at [`Attempt::timeout`] with [`ProcessEnd::TimedOut`], and when `cancel` leaves
//!      [`Cancel::None`] with [`ProcessEnd::Cancelled`]; a request that could not be made at
//!      all is [`ProcessEnd::NotStarted`] with the reason.
//! 2. Give it a kind: a [`BackendDef`] variant carrying the configuration only it reads (its
//!    word in `KINDS` and `kind = "<name>"` of `runners/*.toml`, an arm in
//!    `BackendDef::from_written`; the compiler then names every other method of
//!    `BackendDef` that needs an arm — each matches every kind).
//!
//! A new model API for the HTTP backend is not a backend but a wire format: one file under
//! `http/` implementing [`http::wire::WireFormat`] and one arm in `http::wire::for_api`.
//! 3. Register it: `mod <name>;` below and one match arm in [`for_settings`]. Preparation,
//!    the success rule, retries, the journal and the sinks are the same for every backend.

pub(crate) mod http;
pub(crate) mod process;
#[cfg(test)]
pub(crate) mod scripted;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::events::Event;
use crate::agent::definition::{BackendDef, Invocation};
use crate::agent::{AgentResult, RunnerDef};
use crate::item::WorkItem;
use crate::report::ProcessEnd;
use crate::run::supervise::process::{ActivitySink, Cancel};
use crate::settings::Settings;

/// A boxed future a backend returns (`Send`, so units run on any worker thread).
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How one attempt executes. Implementations hold no run state; one value serves every
/// attempt of a run, from many tasks at once.
pub(crate) trait Backend: Send + Sync {
    /// Run `attempt` to its end; `cancel` says when the run is interrupted (graceful, then
    /// immediate). Never fails: whatever went wrong is in [`Execution::end`].
    fn execute<'a>(
        &'a self,
        attempt: &'a Attempt<'a>,
        cancel: watch::Receiver<Cancel>,
    ) -> BoxFuture<'a, Execution>;

    /// One line for `--dry-run` saying where each item's request goes and how it asks
    /// (`schema`: an `output_schema` is set), for a backend that sends requests; `None` for
    /// one whose attempts are the definition's program (the plan shows its argv).
    fn describe(&self, schema: bool) -> Option<String> {
        let _ = schema;
        None
    }
}

/// The backend that executes the attempts of a run with `settings`, by its runner
/// definition's [`BackendDef`], after the checks that backend makes before anything is
/// written. The registry: one match arm per backend. Built once per run, by the command
/// right after its settings resolve (before it changes any file): the value serves every
/// attempt (the HTTP backend's one client and its connections among them).
///
/// Errors: what the backend's checks refuse (a missing program or API key: exit 3; a bad
/// `--var`, a missing model, a placeholder the definition cannot expand: exit 2).
pub(crate) fn for_settings(settings: &Settings) -> crate::error::Result<Arc<dyn Backend>> {
    match &settings.runner.backend {
        BackendDef::Process if settings.batch_api => Err(crate::error::Error::Usage(format!(
            "--batch-api sends the rows as OpenAI Batch API jobs or Anthropic Message Batches; \
             runner `{}` is an agent CLI (use --runner openai or --runner anthropic)",
            settings.runner.name
        ))),
        BackendDef::Process => Ok(Arc::new(process::Process)),
        BackendDef::Http(spec) => http::backend(settings, spec),
    }
}

/// What a backend gets: one prepared attempt. Every path is absolute; the teammate folder
/// and the state folders exist (the prompt file when the invocation names it).
pub(crate) struct Attempt<'a> {
    /// The item.
    pub item: &'a WorkItem,
    /// The attempt number, 1-based, continuing the numbering of earlier runs.
    pub number: u32,
    /// The runner definition (how to read the agent's output).
    pub runner: &'a RunnerDef,
    /// The argv and environment changes the definition asks for, expanded for this attempt.
    pub invocation: &'a Invocation,
    /// The rendered prompt.
    pub prompt: &'a str,
    /// Where the teammate writes its report (`RUNNER_REPORT` in `env`, which is how a real
    /// agent learns it); read here by the scripted test backend, which writes the report
    /// itself.
    #[cfg_attr(not(test), allow(dead_code))]
    pub report_path: &'a Path,
    /// The working directory: the teammate's worktree, else the run's.
    pub cwd: &'a Path,
    /// The team's workspace (where a backend keeps what outlives one attempt: the Batch
    /// API's job ids).
    pub workspace: &'a Path,
    /// Variables to set: the `RUNNER_*` ones, the definition's `env.set`, the state folders;
    /// values are raw bytes (paths need not be UTF-8).
    pub env: &'a [(String, std::ffi::OsString)],
    /// `<teammate dir>/attempt-N.stdout.log`: what the agent answered (the log outputs name).
    pub stdout_log: PathBuf,
    /// `<teammate dir>/attempt-N.stderr.log`: its diagnostics, if any.
    pub stderr_log: PathBuf,
    /// The teammate folder was made for this attempt, so no file is at [`Attempt::stderr_log`]
    /// yet (else one an earlier run left is removed first).
    pub new_folder: bool,
    /// Cap of each log file, bytes.
    pub log_cap: u64,
    /// Time limit of the attempt; `None` for none.
    pub timeout: Option<Duration>,
    /// Time between asking a process to stop and killing it.
    pub grace: Duration,
    /// How long to wait for a process's pipes after it exits.
    pub pipe_wait: Duration,
    /// With `--sandbox landlock`: the paths the attempt may write (its working directory, its
    /// teammate folder, what its runner definition declares); `None`: not confined.
    pub sandbox: Option<&'a [PathBuf]>,
    /// The `output_schema` the report's `output` must satisfy, when one is set (the HTTP
    /// backend asks for structured output with it).
    pub output_schema: Option<&'a serde_json::Value>,
    /// The images the item's instruction sends (`{image:…}`), for a backend that sends
    /// requests (an agent CLI gets their paths in the prompt instead); mostly empty.
    pub images: &'a [crate::inline::Image],
    pub(crate) events: &'a mpsc::UnboundedSender<Event>,
}

impl Attempt<'_> {
    /// Tell the dispatcher the attempt is under way. `pgid` is its process group (journaled,
    /// so a resumed run can end what a crashed one left behind), 0 when no process runs.
    pub(crate) fn started(&self, pgid: u32) {
        let _ = self.events.send(Event::AttemptStarted {
            id: self.item.id.clone(),
            teammate: self.item.teammate.clone(),
            title: self.item.title.clone(),
            attempt: self.number,
            pgid,
            candidate: self.item.candidate,
            at: crate::run::now_rfc3339(),
        });
    }

    /// Pass a line the agent printed on to progress displays.
    pub(crate) fn activity(&self, line: String) {
        let _ = self.events.send(Event::Activity {
            id: self.item.id.clone(),
            teammate: self.item.teammate.clone(),
            line,
        });
    }

    /// An [`ActivitySink`] that calls [`Attempt::activity`], for code that outlives borrows.
    pub(crate) fn activity_sink(&self) -> ActivitySink {
        let tx = self.events.clone();
        let (id, teammate) = (self.item.id.clone(), self.item.teammate.clone());
        ActivitySink(Arc::new(move |line| {
            let _ = tx.send(Event::Activity {
                id: id.clone(),
                teammate: teammate.clone(),
                line,
            });
        }))
    }
}

/// What a backend gives back: how the attempt ended and what the agent answered.
#[derive(Debug, Clone)]
pub(crate) struct Execution {
    /// How it ended: exited (code), signalled, timed out, cancelled, not started (why).
    pub end: ProcessEnd,
    /// The exit code, when a process exited (also after it handled SIGTERM).
    pub exit_code: Option<i32>,
    /// Wall time of the attempt.
    pub elapsed: Duration,
    /// What the runner definition read from the agent's answer.
    pub agent: AgentResult,
    /// The end of the agent's diagnostics (the last 4 KiB of stderr), for a failure's reason
    /// and kind.
    pub stderr_end: Option<String>,
    /// Whether [`Attempt::stderr_log`] may exist: `false` when the agent wrote nothing to
    /// stderr and the runner nothing into its log, so nobody looks for the file.
    pub stderr_logged: bool,
    /// The log that explains the attempt (usually [`Attempt::stdout_log`]); an empty path
    /// when none was written.
    pub log: PathBuf,
    /// The agent's whole stdout, when the backend held it in memory and did not create
    /// [`Attempt::stdout_log`] (a quick process: [`crate::run::supervise::capped_log::HOLD_MAX`],
    /// [`crate::run::supervise::capped_log::HOLD_FOR`]). The runner writes it there unless the
    /// item completes and is compacted, so a completed quick item costs no log file.
    pub stdout_held: Option<Vec<u8>>,
}

/// Most bytes of a log read back for parsing: logs up to this size are read whole; larger
/// ones contribute their first 256 KiB and last 2 MiB.
pub(crate) const FULL_READ: u64 = 4 * 1024 * 1024;
const HEAD_READ: u64 = 256 * 1024;
const TAIL_READ: u64 = 2 * 1024 * 1024;

/// The text of `path`, lossily decoded: whole when at most `max` bytes, else its head and
/// tail (at most 256 KiB and 2 MiB, each within `max`) joined by a newline. `None` when it
/// cannot be read, or is a link or not a plain file (links are never followed).
pub(crate) fn read_capped(path: &Path, max: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    // Logs and files in a teammate's folder: never through a link (issue 25).
    let (mut f, meta) = crate::fsutil::open_plain_file_with_meta(path).ok()??;
    let len = meta.len();
    if len <= max {
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).ok()?;
        return Some(
            String::from_utf8(buf)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        );
    }
    let mut head = vec![0u8; HEAD_READ.min(max) as usize];
    f.read_exact(&mut head).ok()?;
    let tail_len = TAIL_READ.min(max);
    f.seek(SeekFrom::Start(len - tail_len)).ok()?;
    let mut tail = vec![0u8; tail_len as usize];
    f.read_exact(&mut tail).ok()?;
    Some(head_and_tail(&head, &tail))
}

/// A head and a tail read from one text, lossily decoded and joined by a newline.
fn head_and_tail(head: &[u8], tail: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(head).into_owned();
    text.push('\n');
    text.push_str(&String::from_utf8_lossy(tail));
    text
}

/// [`read_capped`] of text already in memory (`runner runners --check`'s transcripts): the
/// same head and tail a run would read from a log of these bytes.
pub(crate) fn capped_text(bytes: &[u8], max: u64) -> String {
    let len = bytes.len() as u64;
    if len <= max {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let head = &bytes[..HEAD_READ.min(max) as usize];
    let tail = &bytes[(len - TAIL_READ.min(max)) as usize..];
    head_and_tail(head, tail)
}

/// The last 4 KiB of `path` (lossily decoded), when it holds more than whitespace; `None`
/// when it is empty or cannot be read.
pub(crate) fn end_of(path: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(4096))).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    (!text.trim().is_empty()).then(|| text.into_owned())
}

/// The last non-blank line (trimmed) in the last 4 KiB of `path`; `None` when there is none
/// or the file cannot be read.
pub(crate) fn last_line_of(path: &Path) -> Option<String> {
    end_of(path)?
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
}
