//! The process backend: the attempt is the runner definition's program, started and
//! supervised by [`crate::run::supervise::process::run`] (own process group, capped logs, time limit,
//! SIGTERM → grace → SIGKILL), its stdout read through the definition's `[result]` pointers.

use std::os::unix::fs::OpenOptionsExt;

use tokio::sync::watch;

use super::{Attempt, Backend, BoxFuture, Execution, FULL_READ, end_of, read_capped};
use crate::agent;
use crate::report::ProcessEnd;
use crate::run::supervise::process::{self, Cancel, Spawn};
use crate::run::supervise::stdin::Stdin;

/// Runs each attempt as a child process (argv, no shell). Its definition was checked when
/// the settings resolved ([`crate::settings::Settings::resolve`]: the argv expands, the
/// program is installed, every `--var` is used).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Process;

impl Backend for Process {
    fn execute<'a>(
        &'a self,
        attempt: &'a Attempt<'a>,
        cancel: watch::Receiver<Cancel>,
    ) -> BoxFuture<'a, Execution> {
        Box::pin(run(attempt, cancel))
    }
}

async fn run(attempt: &Attempt<'_>, cancel: watch::Receiver<Cancel>) -> Execution {
    let inv = attempt.invocation;
    let spawn = Spawn {
        program: inv.program.clone(),
        args: inv.args.clone(),
        cwd: attempt.cwd.to_owned(),
        env_unset: match attempt.sandbox {
            None => inv.env_unset.clone(),
            Some(_) => crate::sandbox::unset_under_sandbox(&inv.env_unset, attempt.env),
        },
        env_set: attempt.env.to_vec(),
        stdin: match (inv.prompt_on_stdin, inv.stdin_pipe) {
            (true, false) => Stdin::Text(attempt.prompt.into()),
            (true, true) => Stdin::Pipe(attempt.prompt.into()),
            (false, _) => Stdin::Null,
        },
        stdout_log: attempt.stdout_log.clone(),
        hold_stdout: true,
        stderr_log: attempt.stderr_log.clone(),
        stderr_log_new: attempt.new_folder,
        log_cap: attempt.log_cap,
        timeout: attempt.timeout,
        grace: attempt.grace,
        pipe_wait: attempt.pipe_wait,
        activity: Some(attempt.activity_sink()),
        // Under the sandbox the attempt's process is its keeper, which starts the agent
        // confined in a session of its own and ends whatever it leaves behind
        // (`crate::sandbox::shim`).
        sandbox: attempt.sandbox.map(<[_]>::to_vec),
        live: (!attempt.runner.failure.live().is_empty())
            .then(|| std::sync::Arc::new(attempt.runner.failure.clone())),
    };
    tracing::info!(
        "{} attempt {}: {} {} (cwd {})",
        attempt.item.teammate,
        attempt.number,
        spawn.program,
        spawn.args.join(" "),
        spawn.cwd.display()
    );
    let mut exit = process::run(&spawn, cancel, |pgid| attempt.started(pgid)).await;
    // A definition that declares `leaves_processes` waits no time for them: nothing to say.
    if !exit.held_pipes.ended.is_empty() && !attempt.pipe_wait.is_zero() {
        note_held_pipes(attempt, &exit.held_pipes.ended);
    }
    if !exit.held_pipes.left.is_empty() {
        note_left_running(attempt, &spawn, &exit.held_pipes.left);
    }
    let held = exit.stdout_held.take();
    let stdout = match &held {
        Some(bytes) => String::from_utf8_lossy(bytes),
        None => read_capped(&spawn.stdout_log, FULL_READ)
            .unwrap_or_default()
            .into(),
    };
    // The stderr log is made when its first byte arrives (and gets the note of a leftover
    // process): with neither, there is no file to read.
    let stderr_written = exit.stderr_bytes > 0 || !exit.held_pipes.left.is_empty();
    let stderr_end = match stderr_written {
        true => end_of(&spawn.stderr_log),
        false => None,
    };
    if stderr_written {
        warn_of_setup(attempt, &spawn.stderr_log);
    }
    if let ProcessEnd::TimedOut { silent, .. } = &mut exit.end {
        let rules = &attempt.runner.failure;
        *silent = stdout.trim().is_empty()
            && stderr_end.as_deref().is_none_or(|s| {
                s.lines()
                    .map(str::trim)
                    .all(|l| l.is_empty() || rules.ignored(l))
            });
    }
    Execution {
        agent: agent::output::parse(attempt.runner, &stdout),
        stdout_held: held,
        stderr_end,
        stderr_logged: stderr_written,
        log: exit.telling_log(&spawn),
        end: exit.end,
        exit_code: exit.exit_code,
        elapsed: exit.elapsed,
    }
}

/// Repeat, once per run each, the stderr lines the definition's `[failure] warn` says are
/// the CLI's set-up going wrong (Gemini CLI skipping a settings file it finds insecure): the
/// user would otherwise never see them, and every attempt pays for them.
fn warn_of_setup(attempt: &Attempt<'_>, stderr_log: &std::path::Path) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let rules = &attempt.runner.failure;
    let Some(head) = read_capped(stderr_log, 16 * 1024) else {
        return;
    };
    for line in rules.warnings_in(&head) {
        let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
        if said.iter().any(|s| s == line) {
            continue;
        }
        said.push(line.to_owned());
        tracing::warn!(
            "{} attempt {}: {} said: {line} (see its section in docs/runners.md)",
            attempt.item.teammate,
            attempt.number,
            attempt.runner.name
        );
    }
}

/// Say once per run that an agent left processes holding its output after it exited (a
/// language server, `npm run dev &`): each such attempt keeps its slot the pipe wait longer
/// (counted in its duration), and they were ended (`holders` names only those that were).
fn note_held_pipes(attempt: &Attempt<'_>, holders: &[String]) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    tracing::warn!(
        "{} attempt {}: {} kept the agent's output open after it exited; ended after {:?}, which counts in the attempt's duration and keeps its slot (items like it may cost the same; if the agent always leaves such processes, set `leaves_processes = true` in its runner definition to end them at once)",
        attempt.item.teammate,
        attempt.number,
        holders.join(", "),
        attempt.pipe_wait
    );
}

/// Say, for each attempt, which processes holding its output were still alive after the
/// runner killed them (another user's process, one stuck in the kernel), and record them at
/// the end of the item's stderr log, where `runner logs` shows them (issue 50: never claim
/// "ended" for what was not).
fn note_left_running(attempt: &Attempt<'_>, spawn: &Spawn, left: &[String]) {
    let line = format!(
        "{} attempt {}: {} kept the agent's output open and still ran after the runner killed it",
        attempt.item.teammate,
        attempt.number,
        left.join(", ")
    );
    tracing::warn!("{line}");
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&spawn.stderr_log)
        .and_then(|mut f| {
            std::io::Write::write_all(&mut f, format!("\nrunner: {line}\n").as_bytes())
        });
    if let Err(e) = appended {
        tracing::debug!(
            "cannot note the leftover in {}: {e}",
            spawn.stderr_log.display()
        );
    }
}
