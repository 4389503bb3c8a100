//! `--notify` / `notify` (issue 53): a person is told once when the run ends, once when items
//! are blocked waiting for a person (a wave of them in one message), and once when the team
//! stops itself (auth, quota, budget, a broken set-up, `--max-fail`) — not once per teammate.
//!
//! This sink only notes what happened in a fixed-size [`Pending`] record and wakes the
//! delivery thread ([`super::notify_send`]); it never waits on a receiver while the run goes
//! on. At its `finish` it hands over the end and waits (at most [`END_WAIT`]) for what is
//! still being delivered; what could not be delivered becomes a warning of the run, never
//! its failure. The terminal's bell (`bell`) rings here, on stderr, when it is a terminal.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::notify_send::{self, Pending};
use super::{PlanFile, RunEnd, Sink};
use crate::options::notify::NotifyTarget;
use crate::report::ItemStatus;
use crate::run::events::{Event, Reporter, RunSummary};

/// How long the end of a run waits for its notifications to be delivered (retries
/// included) before it warns and goes on.
pub(crate) const END_WAIT: Duration = Duration::from_secs(30);

/// What a wave's notification lists of its blocked items; the rest are counted.
const LISTED: usize = 10;

/// The notification sink: what it tells, where, and the thread that delivers.
pub(crate) struct Notify {
    /// The webhooks and commands (`bell` is rung here).
    targets: Vec<NotifyTarget>,
    /// Ring the terminal's bell (`bell`, and stderr is a terminal).
    bell: bool,
    /// Team name.
    team: String,
    /// Team workspace, from `run_started`.
    workspace: String,
    /// The archive the workspace's record went to when the workspace is removed at the end
    /// ([`RunEnd::archive`]): what `runner status` follows after the run.
    archive: Option<String>,
    /// What waits to be delivered, shared with the delivery thread.
    shared: Arc<(Mutex<Pending>, Condvar)>,
    /// The delivery thread's warnings, once it is done; `None` before it starts and after
    /// they were taken.
    done: Option<Receiver<Vec<String>>>,
    /// The summary of `run_finished`, for an end told when `finish` never comes.
    summary: Option<RunSummary>,
    /// Whether the end was handed over.
    ended: bool,
    /// Which kinds rang the bell already.
    rung: Vec<&'static str>,
}

impl Notify {
    /// The sink for `targets` (as resolved: commands' programs found) of team `team`.
    pub(crate) fn new(targets: &[NotifyTarget], team: String) -> Notify {
        Notify {
            targets: targets
                .iter()
                .filter(|t| **t != NotifyTarget::Bell)
                .cloned()
                .collect(),
            bell: targets.contains(&NotifyTarget::Bell) && std::io::stderr().is_terminal(),
            team,
            workspace: String::new(),
            archive: None,
            shared: Arc::default(),
            done: None,
            summary: None,
            ended: false,
            rung: Vec::new(),
        }
    }

    /// Note something for the delivery thread and wake it.
    fn note(&self, what: impl FnOnce(&mut Pending)) {
        let (lock, wake) = &*self.shared;
        let mut pending = lock.lock().unwrap_or_else(|e| e.into_inner());
        what(&mut pending);
        wake.notify_one();
    }

    /// The terminal's bell, once per kind.
    fn ring(&mut self, kind: &'static str) {
        if self.bell && !self.rung.contains(&kind) {
            self.rung.push(kind);
            let _ = std::io::stderr().write_all(b"\x07");
        }
    }

    /// Hand over the end of the run (once) and wait at most [`END_WAIT`] for the delivery
    /// thread; its warnings, or one saying what was not delivered in time.
    fn end(&mut self, summary: Option<&RunSummary>) -> Vec<String> {
        // A dry run never started: it has nothing to tell.
        if !self.ended && !self.workspace.is_empty() {
            self.ended = true;
            self.ring("run_finished");
            let notice = summary.map(|s| self.end_notice(s));
            self.note(|p| {
                p.end = notice;
                p.closed = true;
            });
        }
        let Some(done) = self.done.take() else {
            return Vec::new();
        };
        done.recv_timeout(END_WAIT).unwrap_or_else(|_| {
            vec![format!(
                "notifications not delivered within {}s of the run's end were given up",
                END_WAIT.as_secs()
            )]
        })
    }

    /// The notification of the run's end: its counts, as the summary shows them; when the
    /// workspace was removed for its archive, `workspace` is null and `archive` names it.
    fn end_notice(&self, s: &RunSummary) -> Value {
        let counts: BTreeMap<&str, u64> = s
            .counts
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(st, n)| (st.as_str(), *n))
            .collect();
        let said: Vec<String> = counts.iter().map(|(st, n)| format!("{n} {st}")).collect();
        let how = match s.interrupted {
            true => "was interrupted",
            false => "finished",
        };
        let cost = s.cost_usd.map(|c| format!(", ${c:.2}")).unwrap_or_default();
        let text = format!(
            "Team {} {how}: {} ({}{cost}). {}",
            self.team,
            match said.is_empty() {
                true => "no items".to_owned(),
                false => said.join(", "),
            },
            humantime::format_duration(Duration::from_secs(s.elapsed_s.max(0.0).round() as u64)),
            self.see()
        );
        let mut notice = json!({
            "text": text,
            "kind": "run_finished",
            "team": self.team,
            "workspace": self.workspace,
            "at": s.at,
            "counts": counts,
            "interrupted": s.interrupted,
            "elapsed_s": s.elapsed_s,
            "cost_usd": s.cost_usd,
        });
        if let Some(archive) = &self.archive {
            notice["workspace"] = Value::Null;
            notice["archive"] = json!(archive);
        }
        notice
    }

    /// Where a person looks next: the workspace, or its archive once it is removed.
    fn see(&self) -> String {
        let at = self.archive.as_deref().unwrap_or(&self.workspace);
        format!("See: runner status {at}")
    }

    /// The delivery thread, started with the run.
    fn start(&mut self) {
        if self.done.is_none() && !self.targets.is_empty() {
            let context = notify_send::Context {
                team: self.team.clone(),
                workspace: self.workspace.clone(),
                see: self.see(),
            };
            self.done = notify_send::spawn(self.targets.clone(), context, self.shared.clone());
        }
    }
}

impl Reporter for Notify {
    fn event(&mut self, event: &Event) {
        match event {
            Event::RunStarted { workspace, .. } => {
                self.workspace = workspace.display().to_string();
                self.start();
            }
            Event::ItemFinished(o) if o.status == ItemStatus::Blocked => {
                self.ring("blocked");
                let item = json!({
                    "id": o.id,
                    "title": o.title,
                    "blocker": o.handoff().blocker,
                });
                self.note(|p| p.block(item, LISTED));
            }
            Event::TeamStopped { reason, at } => {
                self.ring("team_stopped");
                let text = format!(
                    "Team {} stopped: {}. {}",
                    self.team,
                    notify_send::quoted(reason),
                    self.see()
                );
                let notice = json!({
                    "text": text,
                    "kind": "team_stopped",
                    "team": self.team,
                    "workspace": self.workspace,
                    "at": at,
                    "reason": reason,
                });
                self.note(|p| p.stop(notice));
            }
            Event::RunFinished(summary) => self.summary = Some(summary.clone()),
            _ => {}
        }
    }
}

impl Sink for Notify {
    fn writes(&self) -> Vec<PlanFile> {
        Vec::new()
    }

    fn finish(&mut self, run: &mut RunEnd<'_>) -> crate::error::Result<()> {
        // The workspace goes with the run: `runner status` follows its archive.
        self.archive = run
            .archive
            .map(|a| crate::fsutil::absolute(a).display().to_string());
        let warnings = self.end(Some(run.summary));
        run.warnings.extend(warnings);
        Ok(())
    }
}

/// A run that ended before its sinks finished (an output could not be written) still tells
/// its end, from `run_finished`'s summary when there was one, within [`END_WAIT`].
impl Drop for Notify {
    fn drop(&mut self) {
        let summary = self.summary.take();
        for w in self.end(summary.as_ref()) {
            tracing::warn!("{w}");
        }
    }
}
