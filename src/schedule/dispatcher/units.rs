//! The running units of a run: starting one per admitted item (on its backend) and passing
//! the dispatcher's cancels on to them all; the item of each task, for one that panics.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::Action;
use crate::item::WorkItem;
use crate::run::RunSpec;
use crate::run::backend::Backend;
use crate::run::events::Event;
use crate::run::record::team::GateSnapshot;
use crate::run::supervise::process::Cancel;
use crate::schedule::gate::Gate;
use crate::schedule::unit;

/// The running units of a run and what starting one takes.
pub(super) struct Units<'a> {
    pub(super) spec: &'a Arc<RunSpec>,
    /// The run's backend (a stage's or a row's own runner has its own).
    pub(super) backend: &'a Arc<dyn Backend>,
    pub(super) gate: &'a Arc<Gate>,
    /// Where units send their events.
    pub(super) events: &'a mpsc::UnboundedSender<Event>,
    /// Asks running units to stop.
    pub(super) cancel: &'a watch::Sender<Cancel>,
    /// What units watch for it.
    pub(super) cancelled: &'a watch::Receiver<Cancel>,
    pub(super) tasks: JoinSet<()>,
    /// The item of each running unit's task, for a unit that panics.
    pub(super) items: HashMap<tokio::task::Id, WorkItem>,
}

impl Units<'_> {
    /// Do what the dispatcher decided: start a unit, or pass a cancel on to them all.
    pub(super) fn act(&mut self, action: Action) {
        match action {
            Action::Start(item, earlier) => {
                // A stage's or a row's own runner has its own backend.
                let backend = self
                    .spec
                    .profile_of(&item)
                    .map_or_else(|| self.backend.clone(), |p| p.backend.clone());
                let handle = self.tasks.spawn(unit::run_item(
                    self.spec.clone(),
                    backend,
                    self.gate.clone(),
                    (*item).clone(),
                    earlier,
                    self.events.clone(),
                    self.cancelled.clone(),
                ));
                self.items.insert(handle.id(), *item);
            }
            Action::Cancel(how) => {
                let _ = self.cancel.send(how);
            }
        }
    }
}

/// What team.json shows of the gate: `None` when there is nothing to show (full
/// concurrency, no pause, no stop, no budget).
pub(super) fn gate_snapshot(gate: &Gate, jobs: usize) -> Option<GateSnapshot> {
    let view = gate.view();
    let g = GateSnapshot {
        limit: view.limit,
        jobs,
        waiting: view.waiting,
        paused: view.paused,
        stopped: view.stopped,
        spent_usd: view.spent_usd,
        max_cost_usd: gate.limits().max_cost_usd,
    };
    let shown =
        g.limit < jobs || g.paused.is_some() || g.stopped.is_some() || g.max_cost_usd.is_some();
    shown.then_some(g)
}
