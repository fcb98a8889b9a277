//! # whip-cell: one Raft group
#![deny(missing_docs, unreachable_pub)]
