//! Reading a teammate's progress file while its attempt runs (`RUNNER_PROGRESS`,
//! [`crate::progress`]): each whole new line becomes an [`Event::Progress`], which the
//! dispatcher journals and `runner status` shows. The file is polled (every
//! [`POLL_EVERY`], and once more when the attempt ends), opened each time without following
//! a link and only as a plain file; at most [`MAX_FILE_BYTES`] of it are read per attempt.
//! A bad line is ignored with a warning naming the teammate and the line — on the runner's
//! stderr at once, and appended to the attempt's stderr log when the attempt ends (the
//! teammate's own log, where a person reading it looks); nothing here ends an attempt.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::progress::{MAX_FILE_BYTES, MAX_LINE_BYTES, Progress};
use crate::run::events::Event;

/// How often the file is looked at while the attempt runs.
pub(crate) const POLL_EVERY: Duration = Duration::from_millis(500);

/// Whom the lines are of.
pub(crate) struct Teammate {
    /// Item id.
    pub id: String,
    /// Teammate name.
    pub teammate: String,
    /// Attempt number.
    pub attempt: u32,
    /// The attempt's stderr log (in the runner's part of the teammate folder), where the
    /// warnings about bad lines are appended once the attempt ended.
    pub log: PathBuf,
    /// The progress file cannot be there yet (its folder was made for this attempt): it is
    /// read from its start, without a look before the attempt.
    pub new_file: bool,
}

/// Most warnings written into the teammate's log per attempt (the rest are counted).
const NOTES_KEPT: usize = 20;

/// A watch over one attempt's progress file; [`Watch::finish`] ends it.
pub(crate) struct Watch {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<bool>,
}

/// Start watching `path` for `who`, sending events on `tx`. Lines already in the file (an
/// earlier attempt's, journaled then) are not read again.
pub(crate) fn watch(path: PathBuf, who: Teammate, tx: mpsc::UnboundedSender<Event>) -> Watch {
    let (stop, mut stopped) = oneshot::channel();
    let mut reader = Reader::new(path, who, tx);
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(POLL_EVERY) => reader.read_new(),
            }
        }
        // What the teammate wrote just before it ended.
        reader.read_new();
        reader.note_in_log()
    });
    Watch { stop, task }
}

impl Watch {
    /// Read what is left and stop. Returns whether warnings were noted in the attempt's
    /// stderr log (which then exists even when the agent wrote nothing to stderr).
    pub(crate) async fn finish(self) -> bool {
        let _ = self.stop.send(());
        self.task.await.unwrap_or(true)
    }
}

/// The reading state: how far the file was read, and a line not yet ended.
struct Reader {
    path: PathBuf,
    who: Teammate,
    tx: mpsc::UnboundedSender<Event>,
    /// Offset of the first byte not yet read.
    offset: u64,
    /// Bytes of a line whose newline has not come yet.
    partial: Vec<u8>,
    /// Lines seen, for warnings (1-based line numbers of this attempt's lines).
    lines: u64,
    /// The bound was met (said once).
    capped: bool,
    /// The bytes the file held when the watch began.
    start: u64,
    /// The warnings said, for the teammate's log (at most [`NOTES_KEPT`]).
    notes: Vec<String>,
    /// Warnings past [`NOTES_KEPT`].
    notes_dropped: u64,
}

impl Reader {
    fn new(path: PathBuf, who: Teammate, tx: mpsc::UnboundedSender<Event>) -> Reader {
        let start = match who.new_file {
            true => 0,
            false => crate::fsutil::open_plain_file_with_meta(&path)
                .ok()
                .flatten()
                .map_or(0, |(_, m)| m.len()),
        };
        Reader {
            path,
            who,
            tx,
            offset: start,
            partial: Vec::new(),
            lines: 0,
            capped: false,
            start,
            notes: Vec::new(),
            notes_dropped: 0,
        }
    }

    /// Append the warnings to the attempt's stderr log (created if the agent wrote nothing
    /// there; a link in its place is not followed). The attempt's pipes are closed by now,
    /// so nothing else writes the file. Returns whether anything was written.
    fn note_in_log(&self) -> bool {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        if self.notes.is_empty() {
            return false;
        }
        let mut text = String::new();
        for note in &self.notes {
            text.push_str("runner: ");
            text.push_str(note);
            text.push('\n');
        }
        if self.notes_dropped > 0 {
            text.push_str(&format!(
                "runner: and {} more progress warning(s)\n",
                self.notes_dropped
            ));
        }
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&self.who.log);
        match file {
            Ok(mut f) => {
                let _ = f.write_all(text.as_bytes());
                true
            }
            Err(e) => {
                tracing::debug!(
                    "cannot note progress warnings in {}: {e}",
                    self.who.log.display()
                );
                false
            }
        }
    }

    /// Read what was appended since the last look and pass each whole valid line on.
    fn read_new(&mut self) {
        let Ok(Some(mut file)) = crate::fsutil::open_plain_file(&self.path) else {
            return;
        };
        let Ok(size) = file.metadata().map(|m| m.len()) else {
            return;
        };
        if size < self.offset {
            // Replaced by a shorter file: read it from its start.
            self.offset = 0;
            self.start = 0;
            self.partial.clear();
        }
        let budget = (self.start + MAX_FILE_BYTES).saturating_sub(self.offset);
        let want = (size - self.offset).min(budget);
        if want == 0 {
            if size > self.offset && !self.capped {
                self.capped = true;
                self.note(format!(
                    "{} attempt {}: its progress file passed {} bytes; the rest is not read",
                    self.who.teammate, self.who.attempt, MAX_FILE_BYTES
                ));
            }
            return;
        }
        let mut bytes = Vec::with_capacity(want as usize);
        if file.seek(SeekFrom::Start(self.offset)).is_err()
            || file.take(want).read_to_end(&mut bytes).is_err()
        {
            return;
        }
        self.offset += bytes.len() as u64;
        let mut rest = bytes.as_slice();
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            let (line, after) = rest.split_at(nl);
            rest = &after[1..];
            if self.partial.len() + line.len() > MAX_LINE_BYTES {
                self.partial.clear();
                self.lines += 1;
                self.warn(&format!("is over {MAX_LINE_BYTES} bytes"));
                continue;
            }
            self.partial.extend_from_slice(line);
            let whole = std::mem::take(&mut self.partial);
            self.line(&whole);
        }
        // An unended line waits for its newline, within the line bound.
        if self.partial.len() + rest.len() <= MAX_LINE_BYTES {
            self.partial.extend_from_slice(rest);
        } else {
            self.partial.clear();
        }
    }

    /// One whole line: an event, or a warning.
    fn line(&mut self, line: &[u8]) {
        self.lines += 1;
        let Ok(text) = std::str::from_utf8(line) else {
            return self.warn("is not UTF-8");
        };
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        match Progress::parse(text) {
            Ok(progress) => {
                let _ = self.tx.send(Event::Progress {
                    id: self.who.id.clone(),
                    teammate: self.who.teammate.clone(),
                    attempt: self.who.attempt,
                    progress,
                    at: crate::run::now_rfc3339(),
                });
            }
            Err(why) => self.warn(&why),
        }
    }

    fn warn(&mut self, why: &str) {
        self.note(format!(
            "{} attempt {}: progress line {} ignored: {why}",
            self.who.teammate, self.who.attempt, self.lines
        ));
    }

    /// A warning: on the runner's stderr now, in the teammate's log at the end.
    fn note(&mut self, text: String) {
        tracing::warn!("{text}");
        match self.notes.len() < NOTES_KEPT {
            true => self.notes.push(text),
            false => self.notes_dropped += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn reader(dir: &std::path::Path) -> (Reader, mpsc::UnboundedReceiver<Event>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let who = Teammate {
            id: "a".into(),
            teammate: "1-a".into(),
            attempt: 2,
            log: dir.join("attempt-2.stderr.log"),
            new_file: false,
        };
        (Reader::new(dir.join("progress.jsonl"), who, tx), rx)
    }

    fn said(rx: &mut mpsc::UnboundedReceiver<Event>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(e) = rx.try_recv() {
            if let Event::Progress {
                progress, attempt, ..
            } = e
            {
                assert_eq!(attempt, 2);
                out.push(progress.brief());
            }
        }
        out
    }

    #[test]
    fn whole_new_lines_become_events_and_bad_ones_are_skipped() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("progress.jsonl");
        std::fs::write(&path, "{\"progress\":\"an earlier attempt's\"}\n").expect("old");
        let (mut r, mut rx) = reader(dir.path());
        assert!(!r.note_in_log(), "no warnings: the log is not touched");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        write!(f, "{{\"progress\":\"10%\"}}\nnot json\n{{\"progress\":\"2").expect("w");
        r.read_new();
        assert_eq!(said(&mut rx), ["10%"], "the cut line waits for its end");
        writeln!(f, "0%\",\"status\":\"blocked\",\"blocker\":\"key\"}}").expect("w");
        r.read_new();
        assert_eq!(said(&mut rx), ["blocked 20%: key"]);
        r.read_new();
        assert!(said(&mut rx).is_empty(), "nothing is read twice");
        // It says it wrote the log, which then exists whatever the agent wrote to stderr.
        assert!(r.note_in_log());
        let log = std::fs::read_to_string(dir.path().join("attempt-2.stderr.log")).expect("log");
        assert!(
            log.starts_with("runner: 1-a attempt 2: progress line 2 ignored: ")
                && log.lines().count() == 1,
            "the bad line is noted in the teammate's own log: {log}"
        );
    }

    #[test]
    fn a_link_is_not_followed_and_the_file_is_read_only_up_to_its_bound() {
        let dir = tempfile::tempdir().expect("tmp");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "{\"progress\":\"from a link\"}\n").expect("secret");
        let (mut r, mut rx) = reader(dir.path());
        std::os::unix::fs::symlink(&secret, dir.path().join("progress.jsonl")).expect("ln");
        r.read_new();
        assert!(said(&mut rx).is_empty());
        std::fs::remove_file(dir.path().join("progress.jsonl")).expect("rm");
        let line = "{\"progress\":\"x\"}\n";
        let many = line.repeat(MAX_FILE_BYTES as usize / line.len() + 100);
        std::fs::write(dir.path().join("progress.jsonl"), many).expect("big");
        r.read_new();
        r.read_new();
        let n = said(&mut rx).len() as u64;
        assert_eq!(n, MAX_FILE_BYTES / line.len() as u64);
    }
}
