//! The vocabulary of each plane: the data its commands, outcomes, refusals and views
//! carry. A module here holds types only and imports no family module, only other
//! vocabulary and the leaf modules `codes`, `limits`, `refusal`, `screen` and `tally`, so
//! `crate::types` and `crate::query` compose them without depending on any plane's logic.
//! Each plane re-exports its own (`crate::mail::Address` is `vocab::mail::Address`), so
//! paths outside stay as they were; a plane's logic (`impl` blocks with behaviour) stays
//! in the plane's module.
//!
//! Must never: import a plane's module (`crate::mail`, `crate::work`, …), `crate::types` or
//! `crate::query`: that would close the cycle this split cut.

pub(crate) mod access;
pub(crate) mod agent;
pub(crate) mod gauges;
pub(crate) mod kv;
pub(crate) mod lease;
pub(crate) mod mail;
pub(crate) mod next;
pub(crate) mod paths;
pub(crate) mod range;
pub(crate) mod vote;
pub(crate) mod watch;
pub(crate) mod work;
