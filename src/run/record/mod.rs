//! The durable record of a team (DESIGN §1, §6): its workspace and lock ([`team`],
//! [`lock`]), `journal.jsonl` and its replay ([`journal`]) into the per-item [`ledger`] (cached in [`ledger_file`]), each item's [`outcome`] and the
//! read-only index sinks use, the journal as spans for reports ([`history`]), a removed
//! workspace's [`archive`], a completed item's [`compact`] record, a teammate's [`folder`] (what the runner keeps, what the teammate may write), the batch files a sandboxed run started from ([`definition`]), the command that resumes a team ([`resume`]), an item no run started yet ([`pending`]) and finding a team
//! from what a user names ([`workspace`]).
//!
//! A change belongs here when it is about what is written to disk and read back later.

pub(crate) mod archive;
pub(crate) mod compact;
pub(crate) mod definition;
pub(crate) mod folder;
pub(crate) mod history;
pub(crate) mod journal;
pub(crate) mod ledger;
pub(crate) mod ledger_file;
pub(crate) mod lock;
pub(crate) mod outcome;
pub(crate) mod pending;
pub(crate) mod resume;
pub(crate) mod team;
pub(crate) mod workspace;
