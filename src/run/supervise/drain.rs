//! Draining a child's stdout or stderr while it runs: every byte into its [`CappedLog`], its
//! last line (throttled) to progress displays, each line to the `[failure] live` watch.
//! Memory use is one 16 KiB buffer (and a held log's bytes).

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::capped_log::{CappedLog, Drained, LogFile};
use super::live_watch::LineWatch;
use super::process::ActivitySink;

/// Longest activity line passed on, characters.
pub(super) const ACTIVITY_MAX_CHARS: usize = 160;
/// Least time between two activity lines of one stream.
const ACTIVITY_EVERY: Duration = Duration::from_millis(250);

/// Copy `pipe` into `log`, capped at `cap` bytes ([`CappedLog`]), passing its last line to
/// `activity` (at most one every [`ACTIVITY_EVERY`], the newest held back until then) and
/// every byte to `watch`. Returns the total bytes read, and a held log's bytes when it never
/// needed its file. A read error ends the draining like the end of the stream.
pub(super) async fn drain(
    mut pipe: impl AsyncRead + Unpin,
    log: LogFile,
    cap: u64,
    activity: Option<ActivitySink>,
    mut watch: Option<LineWatch>,
) -> Drained {
    let mut last_sent: Option<tokio::time::Instant> = None;
    let mut log = CappedLog::new(log, cap);
    let mut buf = vec![0u8; 16 * 1024];
    // The newest line not yet passed on (held back by the throttle).
    let mut pending: Option<String> = None;
    loop {
        let holding = log.holding();
        let spill_at = log.spill_at();
        let activity_due = pending
            .is_some()
            .then(|| tokio::time::Instant::now() + ACTIVITY_EVERY);
        let wake = match (activity_due, holding) {
            (Some(a), true) => Some(a.min(spill_at)),
            (Some(a), false) => Some(a),
            (None, true) => Some(spill_at),
            (None, false) => None,
        };
        let read = match wake {
            // Wake up in time to pass the held-back line on even if nothing else comes, and
            // to give a held log its file.
            Some(at) => match tokio::time::timeout_at(at, pipe.read(&mut buf)).await {
                Ok(r) => r,
                Err(_) => {
                    let now = tokio::time::Instant::now();
                    if holding && now >= spill_at {
                        log.spill();
                    }
                    if activity_due.is_some_and(|due| now >= due)
                        && let (Some(sink), Some(line)) = (&activity, pending.take())
                    {
                        last_sent = Some(now);
                        (sink.0)(line);
                    }
                    continue;
                }
            },
            None => pipe.read(&mut buf).await,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if let Some(w) = watch.as_mut() {
            w.feed(chunk);
        }
        if let Some(sink) = &activity
            && let Some(line) = last_line(chunk)
        {
            if last_sent.is_none_or(|t| t.elapsed() >= ACTIVITY_EVERY) {
                last_sent = Some(tokio::time::Instant::now());
                pending = None;
                (sink.0)(line);
            } else {
                pending = Some(line);
            }
        }
        log.write(chunk);
    }
    log.finish()
}

/// The last complete, non-blank line of `chunk`, cleaned for a terminal: control characters
/// (escape sequences included) become spaces, at most [`ACTIVITY_MAX_CHARS`] characters.
fn last_line(chunk: &[u8]) -> Option<String> {
    let end = chunk.iter().rposition(|b| *b == b'\n')?;
    let text = String::from_utf8_lossy(&chunk[..end]);
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    let clean: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(ACTIVITY_MAX_CHARS)
        .collect();
    Some(clean)
}
