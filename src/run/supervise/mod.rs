//! Supervising the processes an attempt starts (DESIGN §6): each in its own process group
//! (and session, under a terminal: [`session`]), started (`start`) and held to a time limit
//! ([`process`]); its output drained (`drain`) into capped logs, stdout
//! held in memory while small and quick ([`capped_log`]), and watched for the lines that end
//! an attempt at once (`live_watch`); what it reads on stdin ([`stdin`]); the attempt's mark
//! and the subreaper that ends what left the group ([`descendants`]); what a crashed run left
//! behind ([`orphans`]); Ctrl-Z and `fg` ([`job_control`]); the open-file budget
//! ([`descriptors`]); a teammate's progress file ([`progress`]); a short command's output,
//! for the version probe ([`capture`]).
//!
//! A change belongs here when it is about signals, pipes, process groups or limits of the OS.
//!
//! # How to
//!
//! - *Change how an attempt is stopped* (time limit, interrupt, a live line): `until_exit`
//!   in [`process`]; what is killed after the leader exits: `close_pipes` there. Every path
//!   ends the group and every marked process ([`descendants::end_attempt`]).
//! - *Change what a log keeps*: [`capped_log`] (head, ring tail, the cut marker, holding).
//! - *Hand a child something new on stdin*: a [`stdin::Stdin`] variant and its arm in
//!   `Stdin::open`.
//! - *Run a short helper program and read its answer*: [`capture::capture`] (blocking; it
//!   kills the group before it returns).
//!
//! The tests of [`process`] start real `sh` children; keep them quick and leave nothing
//! running (`capture`'s tests check it with `/proc`).

pub(crate) mod capped_log;
pub(crate) mod capture;
pub(crate) mod descendants;
pub(crate) mod descriptors;
mod drain;
pub(crate) mod job_control;
mod leader;
mod live_watch;
pub(crate) mod orphans;
pub(crate) mod process;
pub(crate) mod progress;
pub(crate) mod session;
mod start;
pub(crate) mod stdin;
