//! # whip-fabric: many cells as one fabric
//!
//! Will own the node runtime hosting many cells behind one gRPC server, the meta cell and
//! its range map, the router (`FabricClient`), cell identities, signed hash-chained
//! envelopes and handoff, singletons, elections and schedules (see ARCHITECTURE.md).
//!
//! Must never: decide the meaning of a command (that is `whip-board`) or talk Raft
//! internals of a single group (that is `whip-cell`). Empty until the fabric issue.
#![deny(missing_docs, unreachable_pub)]
