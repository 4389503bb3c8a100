//! Where the dispatcher takes its items from: the source, in input order ([`Items::Stream`]),
//! or a shared work queue that hands this process items as it has room for them
//! ([`Items::Feed`], `--queue`, [`crate::queue`]). A feed may have nothing *yet* — the other
//! workers hold every item left, and one may die — so the dispatcher asks it again when
//! [`Items::arrived`] says something came, instead of taking its silence for the end.

use std::sync::Arc;
use std::task::Poll;

use tokio::sync::mpsc;

use crate::error::{Error, Result};
use crate::item::WorkItem;
use crate::schedule::dispatcher::ItemStream;
use crate::schedule::gate::Gate;

/// One message from a queue to the dispatcher.
pub(crate) enum Claimed {
    /// An item this process now holds: run it; with the highest attempt number the
    /// fleet started of it before (0: none; its first worker died mid-attempt, say).
    Item(Box<WorkItem>, u32),
    /// The queue cannot be used any more (the run stops starting items and reports it).
    Failed(Error),
    /// Every item of the shared run has its verdict: nothing more will come.
    End,
}

/// A shared run this process takes part in: joined before anything is written, then read
/// item by item through a [`Feed`] (`crate::queue::Worker` is the one there is).
pub(crate) trait SharedQueue: Send {
    /// Join the shared run with the batch's `items` (the first process seeds them; a later
    /// one checks that the queue holds the same batch). Blocks until the server answered.
    ///
    /// Errors: the server cannot be reached (exit 3), or it holds another batch under this
    /// batch's key (exit 2).
    fn join(&mut self, items: ItemStream) -> Result<()>;

    /// The items this process claims, one at a time as the dispatcher has room for them.
    fn feed(&mut self) -> Feed;
}

/// The dispatcher's end of a queue: claimed items come on `claimed`; `want` asks the
/// queue for one more (called once per free slot; never twice before an item came).
pub(crate) struct Feed {
    claimed: mpsc::UnboundedReceiver<Claimed>,
    want: Box<dyn FnMut() + Send>,
    asked: bool,
    next: Option<Claimed>,
    /// Given the run's gate once it exists: a queue shares its rate-limit pauses through it.
    gate_to: Option<Box<dyn FnOnce(Arc<Gate>) + Send>>,
    /// Item id → the attempts other workers started of it, for those that had any.
    elsewhere: std::collections::HashMap<String, u32>,
}

impl Feed {
    /// A feed reading `claimed` and asking for more through `want`.
    pub(crate) fn new(
        claimed: mpsc::UnboundedReceiver<Claimed>,
        want: Box<dyn FnMut() + Send>,
    ) -> Feed {
        Feed {
            claimed,
            want,
            asked: false,
            next: None,
            gate_to: None,
            elsewhere: std::collections::HashMap::new(),
        }
    }

    /// Hand the run's gate to `to` once the dispatcher made it (a queue's shared pause).
    pub(crate) fn with_gate(mut self, to: Box<dyn FnOnce(Arc<Gate>) + Send>) -> Feed {
        self.gate_to = Some(to);
        self
    }
}

/// The items of a run as the dispatcher reads them.
pub(crate) enum Items {
    /// The source's items, in input order: always ready.
    Stream(ItemStream),
    /// A shared queue's: ready when one was claimed.
    Feed(Feed),
}

impl Items {
    /// The run's gate is made: a feed that asked for it gets it.
    pub(crate) fn hand_gate(&mut self, gate: &Arc<Gate>) {
        if let Items::Feed(f) = self
            && let Some(to) = f.gate_to.take()
        {
            to(gate.clone());
        }
    }

    /// The next item: `Ready(None)` when there are no more, `Pending` when a queue has none
    /// for now (it has been asked; [`Items::arrived`] resolves when it answers).
    pub(crate) fn poll_next(&mut self) -> Poll<Option<Result<WorkItem>>> {
        let feed = match self {
            Items::Stream(s) => return Poll::Ready(s.next()),
            Items::Feed(f) => f,
        };
        let got = feed.next.take().or_else(|| feed.claimed.try_recv().ok());
        match got {
            Some(Claimed::Item(item, before)) => {
                feed.asked = false;
                if before > 0 {
                    feed.elsewhere.insert(item.id.clone(), before);
                }
                Poll::Ready(Some(Ok(*item)))
            }
            Some(Claimed::Failed(e)) => Poll::Ready(Some(Err(e))),
            Some(Claimed::End) => Poll::Ready(None),
            None if feed.claimed.is_closed() && feed.claimed.is_empty() => Poll::Ready(None),
            None => {
                if !std::mem::replace(&mut feed.asked, true) {
                    (feed.want)();
                }
                Poll::Pending
            }
        }
    }

    /// Resolves when a queue sent something [`Items::poll_next`] has not seen; never for a
    /// stream (always ready) or a queue that is gone.
    pub(crate) async fn arrived(&mut self) {
        match self {
            Items::Feed(f) if f.next.is_none() => match f.claimed.recv().await {
                Some(c) => f.next = Some(c),
                None => std::future::pending().await,
            },
            _ => std::future::pending().await,
        }
    }

    /// The highest attempt number a shared queue's other workers started of item `id` (0:
    /// none, or the items are a stream).
    pub(crate) fn attempts_elsewhere(&self, id: &str) -> u32 {
        match self {
            Items::Feed(f) => f.elsewhere.get(id).copied().unwrap_or(0),
            Items::Stream(_) => 0,
        }
    }

    /// What an interrupted run never reached: the rest of a stream (a queue's items are
    /// other workers' to take).
    pub(crate) fn rest(&mut self) -> Box<dyn Iterator<Item = Result<WorkItem>> + '_> {
        match self {
            Items::Stream(s) => Box::new(s.by_ref()),
            Items::Feed(_) => Box::new(std::iter::empty()),
        }
    }
}

/// `items` longest first by `weights` (`--order longest-first`, [`crate::schedule::plan::Plan::weights`]):
/// highest first, items with none last in their order.
pub(crate) fn longest_first(
    items: ItemStream,
    weights: &std::collections::HashMap<String, f64>,
) -> Result<ItemStream> {
    let mut all = items.collect::<Result<Vec<_>>>()?;
    all.sort_by(|a, b| {
        let (wa, wb) = (weights.get(&a.id), weights.get(&b.id));
        match (wa, wb) {
            (Some(x), Some(y)) => y.total_cmp(x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        }
    });
    Ok(Box::new(all.into_iter().map(Ok)))
}
