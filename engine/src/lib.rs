//! # whip-engine: WhippleScript on the fabric
//!
//! Owns the WhippleScript language (syntax, checking, lowering) and, later, its runtime.
//! Must never: depend on cell or Raft internals; it talks to the fabric only through the
//! client trait of the layer below.
#![deny(missing_docs, unreachable_pub)]
