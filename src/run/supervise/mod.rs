//! Supervising the processes an attempt starts (DESIGN §6): each in its own process group
//! with capped logs and a time limit ([`process`]); the attempt's mark and the subreaper
//! that ends what left the group ([`descendants`]); what a crashed run left behind
//! ([`orphans`]); Ctrl-Z and `fg` ([`job_control`]); the open-file budget ([`descriptors`]).
//!
//! A change belongs here when it is about signals, pipes, process groups or limits of the OS.

pub mod descendants;
pub mod descriptors;
pub mod job_control;
pub mod orphans;
pub mod process;
pub mod progress;
