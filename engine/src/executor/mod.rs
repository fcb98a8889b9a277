//! The compute plane: `whip-executor/1`, the protocol between the runtime and the
//! `whip executor` sidecar that runs `exec` effects (docs/EXECUTOR.md describes it).
//!
//! - [`protocol`]: the wire types and the pure checks of a request (ids, argv, cwd, env,
//!   timeout), each refusal a stable code;
//! - [`client`]: what the worker (and `whip recover`, `checkpoint`, `restore`) call:
//!   [`ExecutorClient::exec`], [`ExecutorClient::run_record`],
//!   [`ExecutorClient::checkpoint`], [`ExecutorClient::restore`],
//!   [`ExecutorClient::health`], each with a typed answer or an [`ExecutorError`];
//! - [`effect`]: the `exec` effect: typed arguments, the gate before a claim, terminals;
//! - [`server`]: the sidecar itself (`whip executor` only parses flags and calls it).
//!
//! Invariants: the executor answers only loopback peers that present its token (compared in
//! constant time); a (instance, run) pair executes at most once, and its answer is durable
//! before it is sent; no run leaves its instance's workspace through its `cwd`; every
//! size and time is bounded by [`crate::limits`].
//!
//! Must never: run a command through a shell, pass its own environment to a run, record an
//! environment value or the token anywhere, or read the environment itself (the binary
//! reads `WHIP_EXECUTOR_URL` and `WHIP_EXECUTOR_TOKEN` once and passes them in).

pub mod client;
pub mod command;
pub mod effect;
mod process;
pub mod protocol;
pub mod server;
mod workspace;

pub use client::{ExecutorClient, ExecutorConfig, ExecutorError};
pub use protocol::{ExecAnswer, ExecRequest, RefusalCode, RunRecord, WorkspaceDigest};
pub use server::ExecutorServer;
