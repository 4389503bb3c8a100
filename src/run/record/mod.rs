//! The durable record of a team (DESIGN §1, §6): its workspace and lock ([`team`],
//! [`lock`]), `journal.jsonl` and its replay ([`journal`]) into the per-item [`ledger`] (cached in [`ledger_file`]), each item's [`outcome`] and the
//! read-only index sinks use, the journal as spans for reports ([`history`]), a removed
//! workspace's [`archive`], a completed item's [`compact`] record, a teammate's [`folder`] (what the runner keeps, what the teammate may write), the batch files a sandboxed run started from ([`definition`]), the command that resumes a team ([`resume`]) and finding a team
//! from what a user names ([`workspace`]).
//!
//! A change belongs here when it is about what is written to disk and read back later.

pub mod archive;
pub mod compact;
pub mod definition;
pub mod folder;
pub mod history;
pub mod journal;
pub mod ledger;
pub mod ledger_file;
pub mod lock;
pub mod outcome;
pub mod resume;
pub mod team;
pub mod workspace;
