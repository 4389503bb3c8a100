//! Scheduling: what runs when (DESIGN §1). A source's [`plan::Plan`] goes through the one
//! [`pipeline`] (checks, dry run or open the team, execute, finish, sinks); the
//! [`dispatcher`] turns unit events, signals and timers into the state the user sees; a
//! [`unit`](mod@unit) per item prepares each attempt, has the backend execute it and judges it; every
//! attempt passes the team's [`gate`]; [`selection`] says which rows a run covers.
//!
//! A change belongs here when it is about order, concurrency, retries or which items run.

pub mod dispatcher;
pub mod gate;
pub mod pipeline;
pub mod plan;
pub mod selection;
pub mod unit;
