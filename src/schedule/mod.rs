//! Scheduling: what runs when (DESIGN §1). A source's [`plan::Plan`] goes through the one
//! [`pipeline`] (checks, dry run or open the team, execute, finish, sinks); the
//! [`dispatcher`] turns unit events, signals and timers into the state the user sees; a
//! [`unit`](mod@unit) per item prepares each attempt, has the backend execute it, judges it
//! and asks its retry policy what next; every attempt passes the team's [`gate`];
//! [`stage_values`] reads what earlier stages
//! reported for a later stage's instruction.
//!
//! A change belongs here when it is about order, concurrency, retries or which items run.
//!
//! # How to
//!
//! - *Change when an item is retried*: `unit/retry.rs` (`Retries::after`: the gate's word,
//!   `--retries`, `--retry-on`, `--rate-limit-wait`); prove it in `unit/tests.rs`, which runs
//!   one unit on the scripted backend with tokio's clock paused.
//! - *Change what a team does about rate limits, budgets or `--max-fail`*: [`gate`].
//! - *Change what an attempt is given or how it is judged*: `unit/prepare.rs`,
//!   `unit/judge.rs` (the verdict itself is [`crate::report::judge`]).
//! - *Change what the user sees while items run* (counts, the snapshot, the closing
//!   summary): [`dispatcher`]; its decisions are plain functions tested in
//!   `dispatcher/tests.rs`.
//! - *Test scheduling in-process*: `test_support` (a spec on the `exec` definition, items)
//!   and `crate::run::backend::scripted`.

mod candidates;
pub(crate) mod dispatcher;
pub(crate) mod feed;
pub(crate) mod gate;
pub(crate) mod layout;
pub(crate) mod pipeline;
pub(crate) mod plan;
pub(crate) mod stage_values;
#[cfg(test)]
pub(crate) mod test_support;
pub(crate) mod unit;
