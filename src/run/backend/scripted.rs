//! The test backend: each attempt plays the next scripted [`Step`] of its item (an exit code,
//! stdout text, a report file, a delay), honouring the time limit and cancellation. No
//! process is started. It records every prompt it was given. Its times are tokio's (a
//! test on a paused clock sees its delays and time limits pass at once, and exactly).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Attempt, Backend, BoxFuture, Execution};
use crate::agent;
use crate::report::ProcessEnd;
use crate::run::supervise::process::Cancel;

/// One scripted attempt.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    /// Exit code the "agent" ends with.
    pub exit_code: i32,
    /// Text it prints (written to the stdout log and parsed by the runner definition).
    pub stdout: String,
    /// The report it writes to `RUNNER_REPORT`, if any.
    pub report: Option<Value>,
    /// How long it works before it ends.
    pub delay: Duration,
}

impl Step {
    /// Exit 0 with a valid `completed` report file.
    pub(crate) fn completed() -> Step {
        Step {
            exit_code: 0,
            stdout: "done\n".into(),
            report: Some(serde_json::json!({"status": "completed", "summary": "did it"})),
            delay: Duration::ZERO,
        }
    }

    /// Exit 1 with `message` on stdout and no report.
    pub(crate) fn failed(message: &str) -> Step {
        Step {
            exit_code: 1,
            stdout: format!("{message}\n"),
            report: None,
            delay: Duration::ZERO,
        }
    }

    /// This step after working for `delay`.
    pub(crate) fn after(self, delay: Duration) -> Step {
        Step { delay, ..self }
    }
}

/// What an attempt was given.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// Item id.
    pub id: String,
    /// Attempt number.
    pub attempt: u32,
    /// The prompt text.
    pub prompt: String,
}

/// Scripted attempts per item id; an item whose script ran out plays `fallback`.
#[derive(Debug)]
pub(crate) struct Scripted {
    script: Mutex<HashMap<String, VecDeque<Step>>>,
    fallback: Step,
    seen: Mutex<Vec<Seen>>,
}

impl Scripted {
    /// Every attempt plays `fallback` unless [`Scripted::script`] says otherwise.
    pub(crate) fn new(fallback: Step) -> Scripted {
        Scripted {
            script: Mutex::new(HashMap::new()),
            fallback,
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Item `id`'s attempts play `steps` in order.
    pub(crate) fn script(self, id: &str, steps: Vec<Step>) -> Scripted {
        self.script
            .lock()
            .expect("script lock")
            .insert(id.to_owned(), steps.into());
        self
    }

    /// Every attempt made so far, in start order.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen lock").clone()
    }
}

impl Backend for Scripted {
    fn execute<'a>(
        &'a self,
        attempt: &'a Attempt<'a>,
        cancel: watch::Receiver<Cancel>,
    ) -> BoxFuture<'a, Execution> {
        Box::pin(play(self, attempt, cancel))
    }
}

async fn play(
    backend: &Scripted,
    attempt: &Attempt<'_>,
    mut cancel: watch::Receiver<Cancel>,
) -> Execution {
    let step = backend
        .script
        .lock()
        .expect("script lock")
        .get_mut(&attempt.item.id)
        .and_then(VecDeque::pop_front)
        .unwrap_or_else(|| backend.fallback.clone());
    backend.seen.lock().expect("seen lock").push(Seen {
        id: attempt.item.id.clone(),
        attempt: attempt.number,
        prompt: attempt.prompt.to_owned(),
    });
    let started = Instant::now();
    attempt.started(0);
    let limit = attempt.timeout.unwrap_or(Duration::MAX);
    let ends = async {
        loop {
            if *cancel.borrow_and_update() != Cancel::None {
                return ProcessEnd::Cancelled;
            }
            if cancel.changed().await.is_err() {
                return ProcessEnd::Cancelled;
            }
        }
    };
    let end = tokio::select! {
        _ = tokio::time::sleep(step.delay), if step.delay < limit => None,
        _ = tokio::time::sleep(limit), if limit < Duration::MAX => {
            Some(ProcessEnd::TimedOut {
                limit,
                last_error: None,
                silent: false,
            })
        }
        end = ends => Some(end),
    };
    let end = end.unwrap_or(ProcessEnd::Exited(step.exit_code));
    let exited = matches!(end, ProcessEnd::Exited(_));
    let stdout = if exited { step.stdout.as_str() } else { "" };
    let _ = std::fs::write(&attempt.stdout_log, stdout);
    if let (true, Some(report)) = (exited, &step.report) {
        let _ = std::fs::write(attempt.report_path, report.to_string());
    }
    Execution {
        agent: agent::output::parse(attempt.runner, stdout),
        stderr_end: None,
        stderr_logged: true,
        log: attempt.stdout_log.clone(),
        stdout_held: None,
        exit_code: exited.then_some(step.exit_code),
        end,
        elapsed: started.elapsed(),
    }
}
