//! Where a run's interrupts come from: signals, and a caller's own channel.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::error::{Error, Result};

/// Where interrupts come from: SIGINT, SIGTERM and SIGHUP (a closed terminal must not orphan
/// the teammates), and any sender of [`Interrupts::channel`]. The first interrupt stops the
/// run gracefully, the next one at once.
pub(crate) struct Interrupts {
    signals: Option<[tokio::signal::unix::Signal; 3]>,
    extra: Option<mpsc::UnboundedReceiver<()>>,
}

impl Interrupts {
    /// Listen for SIGINT, SIGTERM, SIGHUP and each message of `extra` (one Ctrl-C each).
    ///
    /// Errors: [`Error::Environment`] when a signal handler cannot be installed.
    pub(crate) fn signals(extra: Option<mpsc::UnboundedReceiver<()>>) -> Result<Interrupts> {
        let listen = |kind: SignalKind, what: &str| {
            signal(kind).map_err(|e| Error::Environment(format!("cannot listen for {what}: {e}")))
        };
        Ok(Interrupts {
            signals: Some([
                listen(SignalKind::interrupt(), "Ctrl-C")?,
                listen(SignalKind::terminate(), "SIGTERM")?,
                listen(SignalKind::hangup(), "SIGHUP")?,
            ]),
            extra,
        })
    }

    /// Interrupts sent through the returned sender only (no signal handler is installed):
    /// each `send(())` counts as one Ctrl-C.
    #[cfg(test)]
    pub(crate) fn channel() -> (mpsc::UnboundedSender<()>, Interrupts) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            tx,
            Interrupts {
                signals: None,
                extra: Some(rx),
            },
        )
    }

    /// The next interrupt; pending forever when no source is left.
    pub(super) async fn next(&mut self) {
        let signals = async {
            match &mut self.signals {
                Some([int, term, hup]) => {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                        _ = hup.recv() => {}
                    }
                }
                None => std::future::pending().await,
            }
        };
        let extra = async {
            match &mut self.extra {
                Some(rx) => {
                    if rx.recv().await.is_none() {
                        // Every sender is gone: no interrupt will come from here.
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = signals => {}
            _ = extra => {}
        }
    }
}
