//! Watching an agent's output for the lines its runner definition says end the attempt at
//! once (`[failure] live`, [`crate::failure::live`]), while it runs.

use tokio::sync::mpsc;

use crate::failure::FailureRules;
use crate::failure::live::{self, LiveHit, Stream};

/// Assembles one stream's lines and passes each that a `[failure] live` entry matches on
/// to the supervising loop. Holds at most [`live::LINE_MAX`] bytes of a line; a longer line
/// is skipped. After an `auth` or `quota` hit (which always ends the attempt) it stops.
pub(super) struct LineWatch {
    rules: std::sync::Arc<FailureRules>,
    stream: Stream,
    line: Vec<u8>,
    /// The current line has outgrown [`live::LINE_MAX`]: skipped up to its newline.
    overlong: bool,
    done: bool,
    hits: mpsc::UnboundedSender<LiveHit>,
}

impl LineWatch {
    /// A watch over `stream` by `rules`, sending its hits to `hits`.
    pub(super) fn new(
        rules: std::sync::Arc<FailureRules>,
        stream: Stream,
        hits: mpsc::UnboundedSender<LiveHit>,
    ) -> LineWatch {
        LineWatch {
            rules,
            stream,
            line: Vec::new(),
            overlong: false,
            done: false,
            hits,
        }
    }

    /// Take the next bytes of the stream.
    pub(super) fn feed(&mut self, chunk: &[u8]) {
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            if self.done {
                return;
            }
            if !self.overlong {
                if self.line.len() + piece.len() > live::LINE_MAX + 1 {
                    self.overlong = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(piece);
                }
            }
            if !piece.ends_with(b"\n") {
                continue;
            }
            if !self.overlong
                && let Some(hit) = live::first_hit(self.rules.live(), self.stream, &self.line)
            {
                self.done = hit.kind != crate::failure::FailureKind::RateLimited;
                let _ = self.hits.send(hit);
            }
            self.line.clear();
            self.overlong = false;
        }
    }
}
