//! # whip-tests: integration and fault tests
//!
//! Owns the helpers that start real clusters (real gRPC on loopback, real storage in temp
//! dirs) and the tests under `tests/`. Must never: mock a component of our own.
#![deny(missing_docs, unreachable_pub)]
