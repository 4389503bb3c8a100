//! The run's progress in the terminal's own tab or taskbar: OSC 9;4 (ConEmu's sequence,
//! which Windows Terminal, WezTerm and Ghostty show as a progress bar), as cargo and nextest
//! send it (issue 53). Sent on stderr only when stderr is a terminal that is known to read
//! it (cargo's test: `WT_SESSION`, `ConEmuANSI=ON`, `TERM_PROGRAM` WezTerm or ghostty) —
//! another terminal could show the sequence as text.
//!
//! `ESC ] 9 ; 4 ; STATE ; PERCENT ESC \`: state 1 is a normal bar, 2 an error bar (an item
//! did not complete), 3 a bar without a percentage (the total is not known), 4 a paused
//! one (a rate limit paused the team); 0 removes it, as the run ends.

use std::io::{IsTerminal, Write};

use super::{PlanFile, Sink};
use crate::report::ItemStatus;
use crate::run::events::{Event, Reporter};

/// The OSC 9;4 progress of one run on one stream.
pub(crate) struct TerminalProgress {
    /// Where the sequences go (stderr).
    out: Box<dyn Write + Send>,
    /// Items of the run, when known.
    total: Option<u64>,
    /// Items finished.
    done: u64,
    /// An item did not complete: the bar turns to an error bar.
    failing: bool,
    /// The bar is shown (and must be removed).
    shown: bool,
}

/// Whether the terminal the environment names reads OSC 9;4 (cargo's list:
/// `term.progress.term-integration`).
fn terminal_reads_progress() -> bool {
    let var = |name: &str| std::env::var(name).ok();
    var("WT_SESSION").is_some()
        || var("ConEmuANSI").as_deref() == Some("ON")
        || matches!(var("TERM_PROGRAM").as_deref(), Some("WezTerm" | "ghostty"))
}

impl TerminalProgress {
    /// The progress on stderr, when stderr is a terminal that reads it; `None` otherwise.
    pub(crate) fn on_stderr() -> Option<TerminalProgress> {
        (std::io::stderr().is_terminal() && terminal_reads_progress()).then(|| TerminalProgress {
            out: Box::new(std::io::stderr()),
            total: None,
            done: 0,
            failing: false,
            shown: false,
        })
    }

    /// Send `state` with `percent`.
    fn send(&mut self, state: u8, percent: u64) {
        self.shown = state != 0;
        // One write: the progress display draws on the same terminal from another stream,
        // and a sequence cut in two would show as text.
        let sequence = format!("\x1b]9;4;{state};{percent}\x1b\\");
        let _ = self.out.write_all(sequence.as_bytes());
        let _ = self.out.flush();
    }

    /// Send the bar as the counts stand.
    fn update(&mut self) {
        match self.total {
            Some(total) if total > 0 => {
                let percent = (self.done.min(total) * 100) / total;
                self.send(if self.failing { 2 } else { 1 }, percent);
            }
            _ => self.send(3, 0),
        }
    }
}

impl Reporter for TerminalProgress {
    fn event(&mut self, event: &Event) {
        match event {
            Event::RunStarted { total, .. } => {
                self.total = *total;
                self.update();
            }
            Event::ItemFinished(o) => {
                self.done += 1;
                self.failing |= o.status != ItemStatus::Completed;
                self.update();
            }
            Event::TeamPaused { .. } => {
                let percent = match self.total {
                    Some(t) if t > 0 => (self.done.min(t) * 100) / t,
                    _ => 0,
                };
                self.send(4, percent);
            }
            Event::RunEnded { .. } => self.send(0, 0),
            _ => {}
        }
    }
}

impl Sink for TerminalProgress {
    fn writes(&self) -> Vec<PlanFile> {
        Vec::new()
    }
}

/// A run that ends without `run_ended` (an error) leaves no bar behind.
impl Drop for TerminalProgress {
    fn drop(&mut self) {
        if self.shown {
            self.send(0, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<u8>>>);

    impl Write for Seen {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_bar_goes_by_finished_items_turns_red_on_a_failure_and_is_removed_at_the_end() {
        let seen = Seen::default();
        let mut p = TerminalProgress {
            out: Box::new(seen.clone()),
            total: None,
            done: 0,
            failing: false,
            shown: false,
        };
        let started = Event::RunStarted {
            at: String::new(),
            pid: 1,
            team: "t".into(),
            workspace: "w".into(),
            total: Some(4),
            resumed: 0,
            jobs: 1,
            sandbox: "none".into(),
            sandbox_why_none: None,
            replaced_runner: None,
            stages: Vec::new(),
            merge: String::new(),
        };
        p.event(&started);
        let done = |status| {
            let o = crate::run::record::outcome::Outcome::not_run(
                "a",
                "1-a",
                "a",
                status,
                String::new(),
            );
            Event::ItemFinished(Box::new(o))
        };
        p.event(&done(ItemStatus::Completed));
        p.event(&done(ItemStatus::Failed));
        p.event(&Event::RunEnded {
            outputs: Vec::new(),
            exit_code: 1,
        });
        drop(p);
        let text = String::from_utf8_lossy(&seen.0.lock().expect("seen")).into_owned();
        assert_eq!(
            text,
            "\x1b]9;4;1;0\x1b\\\x1b]9;4;1;25\x1b\\\x1b]9;4;2;50\x1b\\\x1b]9;4;0;0\x1b\\"
        );
    }
}
