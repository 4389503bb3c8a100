//! `--trace FILE`: the run as Chrome trace events (the "Trace Event Format" JSON that
//! Perfetto and `chrome://tracing` open, as nextest's `--message-format` traces do): one lane
//! per concurrent slot, one complete event (`"ph": "X"`) per attempt, named after its
//! teammate and coloured by its verdict, with the item's id, attempt and reason as arguments.
//! Times are microseconds since the run started, taken when the sink saw each event.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use super::{PlanFile, RunEnd, Sink};
use crate::error::{Error, Result};
use crate::report::ItemStatus;
use crate::run::events::{Event, Reporter};
use crate::run::record::team::OutcomesView;

/// The trace sink.
pub(crate) struct Trace {
    path: PathBuf,
    team: String,
    started: Instant,
    /// Running attempts by item id: (lane, start µs, attempt, teammate).
    running: HashMap<String, (usize, u64, u32, String)>,
    /// Whether each lane is taken now.
    lanes: Vec<bool>,
    events: Vec<Value>,
}

/// Whether `bytes` are a Chrome trace-event document as this sink writes it (an object
/// whose first key is `traceEvents`): the only kind of file `--trace` replaces.
pub(crate) fn is_trace(bytes: &[u8]) -> bool {
    bytes.trim_ascii_start().starts_with(b"{\"traceEvents\"")
}

impl Trace {
    /// A trace of team `team`, written to `path` when the run ends; its times count from
    /// when the run starts recording ([`Sink::follow`]), or from now if it never does.
    pub(crate) fn new(path: PathBuf, team: String) -> Trace {
        Trace {
            path,
            team,
            started: Instant::now(),
            running: HashMap::new(),
            lanes: Vec::new(),
            events: Vec::new(),
        }
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The lowest free lane, taken.
    fn take_lane(&mut self) -> usize {
        match self.lanes.iter().position(|taken| !taken) {
            Some(i) => {
                self.lanes[i] = true;
                i
            }
            None => {
                self.lanes.push(true);
                self.lanes.len() - 1
            }
        }
    }
}

/// The trace viewer's colour names (`cname`) for a verdict.
fn colour(status: ItemStatus) -> &'static str {
    match status {
        ItemStatus::Completed => "good",
        ItemStatus::Failed | ItemStatus::TimedOut => "terrible",
        ItemStatus::Blocked => "bad",
        ItemStatus::Cancelled | ItemStatus::Skipped => "grey",
    }
}

impl Reporter for Trace {
    fn event(&mut self, event: &Event) {
        match event {
            Event::AttemptStarted {
                id,
                teammate,
                attempt,
                ..
            } => {
                let lane = self.take_lane();
                let ts = self.now_us();
                self.running
                    .insert(id.clone(), (lane, ts, *attempt, teammate.clone()));
            }
            Event::AttemptFinished { id, verdict, .. } => {
                let Some((lane, ts, attempt, teammate)) = self.running.remove(id) else {
                    return;
                };
                if let Some(l) = self.lanes.get_mut(lane) {
                    *l = false;
                }
                let dur = self.now_us().saturating_sub(ts).max(1);
                self.events.push(json!({
                    "name": if attempt > 1 { format!("{teammate} (attempt {attempt})") } else { teammate },
                    "cat": verdict.status.as_str(),
                    "ph": "X",
                    "ts": ts,
                    "dur": dur,
                    "pid": 1,
                    "tid": lane + 1,
                    "cname": colour(verdict.status),
                    "args": {"id": id, "attempt": attempt, "status": verdict.status, "reason": verdict.reason},
                }));
            }
            Event::Interrupted { immediate } => {
                let ts = self.now_us();
                self.events.push(json!({
                    "name": if *immediate { "interrupted again" } else { "interrupted" },
                    "ph": "i", "s": "g", "ts": ts, "pid": 1, "tid": 0,
                }));
            }
            _ => {}
        }
    }
}

impl Sink for Trace {
    fn writes(&self) -> Vec<PlanFile> {
        vec![PlanFile::new("trace", &self.path, "--trace").replacing("a trace of a run", is_trace)]
    }

    /// The run starts: lanes' times count from here.
    fn follow(&mut self, _outcomes: &OutcomesView) {
        self.started = Instant::now();
    }

    fn finish(&mut self, _run: &mut RunEnd<'_>) -> Result<()> {
        let mut events = vec![json!({
            "name": "process_name", "ph": "M", "pid": 1,
            "args": {"name": format!("runner team {}", self.team)},
        })];
        events.extend((0..self.lanes.len()).map(|lane| {
            json!({
                "name": "thread_name", "ph": "M", "pid": 1, "tid": lane + 1,
                "args": {"name": format!("slot {}", lane + 1)},
            })
        }));
        events.append(&mut self.events);
        let doc = json!({"traceEvents": events, "displayTimeUnit": "ms"});
        let bytes = serde_json::to_vec(&doc)
            .map_err(|e| Error::Environment(format!("cannot encode the trace: {e}")))?;
        crate::fsutil::make_parent(&self.path)?;
        crate::fsutil::write_atomic(&self.path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Verdict;
    use crate::run::record::team::OutcomeIndex;

    fn started(id: &str, attempt: u32) -> Event {
        Event::AttemptStarted {
            candidate: None,
            id: id.into(),
            teammate: format!("t-{id}"),
            title: id.into(),
            attempt,
            pgid: 1,
            at: String::new(),
        }
    }

    fn finished(id: &str, attempt: u32, status: ItemStatus) -> Event {
        Event::AttemptFinished {
            candidate: None,
            id: id.into(),
            teammate: format!("t-{id}"),
            attempt,
            verdict: Verdict {
                status,
                reason: String::new(),
                kind: crate::report::kind_of_not_run(status),
                retry_after_s: None,
            },
            spend: Default::default(),
            retrying: false,
            refused: false,
            at: String::new(),
        }
    }

    #[test]
    fn concurrent_attempts_get_their_own_lanes_and_a_freed_lane_is_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("trace.json");
        let mut t = Trace::new(path.clone(), "team".into());
        for e in [
            started("a", 1),
            started("b", 1),
            finished("a", 1, ItemStatus::Failed),
            started("a", 2),
            finished("b", 1, ItemStatus::Completed),
            finished("a", 2, ItemStatus::Completed),
        ] {
            t.event(&e);
        }
        let mut outcomes = OutcomeIndex::empty();
        t.finish(&mut RunEnd {
            summary: &Default::default(),
            outcomes: &mut outcomes,
            unrecorded: Vec::new(),
            warnings: Vec::new(),
            archive: None,
            unchanged: None,
            stamps: Vec::new(),
        })
        .expect("written");
        let doc: Value =
            serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
        let bars: Vec<(String, u64, String)> = doc["traceEvents"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                (
                    e["name"].as_str().unwrap_or_default().to_owned(),
                    e["tid"].as_u64().unwrap_or_default(),
                    e["cname"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            bars,
            [
                ("t-a".to_string(), 1, "terrible".to_string()),
                ("t-b".to_string(), 2, "good".to_string()),
                ("t-a (attempt 2)".to_string(), 1, "good".to_string()),
            ]
        );
        let lanes = doc["traceEvents"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .count();
        assert_eq!(lanes, 2, "two slots were ever busy at once");
    }
}
