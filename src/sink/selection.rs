//! Which rows of a CSV batch a run covers (DESIGN §2, §8): the shard and `--only` (value
//! types in [`crate::options::selection`]) against the previous output.

use crate::options::selection::{Only, Shard};

/// Which rows of a CSV batch a run covers: its shard, and `--only` against the previous
/// output. One value shared by planning, the item stream and the output sinks; cheap to
/// clone.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    /// `--shard K/N`.
    pub shard: Option<Shard>,
    /// `--only`.
    pub only: Only,
    /// The previous output, when `--only` replays one.
    pub previous: Option<std::sync::Arc<crate::sink::previous::Previous>>,
}

impl Selection {
    /// Whether the row with `id` belongs to this run's output (its shard).
    pub(crate) fn in_shard(&self, id: &str) -> bool {
        self.shard.is_none_or(|s| s.contains(id))
    }

    /// Whether the previous output shows `id` completed.
    pub(crate) fn completed_before(&self, id: &str) -> bool {
        self.previous.as_ref().is_some_and(|p| p.completed(id))
    }

    /// Whether the previous output shows `id` blocked.
    pub(crate) fn blocked_before(&self, id: &str) -> bool {
        self.previous.as_ref().is_some_and(|p| p.blocked(id))
    }

    /// Whether the row with `id` is run (shard and `--only`).
    pub(crate) fn runs(&self, id: &str) -> bool {
        self.in_shard(id)
            && match &self.only {
                Only::All => true,
                Only::Failed => !self.completed_before(id) && !self.blocked_before(id),
                Only::Blocked => self.blocked_before(id),
                Only::Ids(ids) => ids.contains(id),
            }
    }
}
