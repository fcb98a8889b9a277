//! # whip-engine: WhippleScript on the fabric
//!
//! Owns the WhippleScript language (syntax, checking, lowering) and its runtime
//! ([`runtime`]: starter, stepper, worker and projections, with every durable row — program
//! versions, instances, events, facts, effects, runs, tracker issues — stored through the
//! fabric's client trait, so the same code runs on the embedded cell and on a cluster), and
//! the compute plane `exec` effects run on ([`executor`]: the `whip-executor/1` protocol, the
//! worker's client and the `whip executor` sidecar's server, docs/EXECUTOR.md).
//!
//! An effect that cannot run yet is blocked, never failed: before a worker claims anything,
//! [`runtime::gate`] decides every block (the effect it depends on has not settled, the
//! compute plane's binding is broken, the work registry has no room for a child or its
//! policy refuses it, an agent's profile is not registered). Each block is recorded once as
//! an `effect.blocked` event with its state and `policy_block: {category, detail}`
//! ([`runtime::effect::BlockCategory`], stored by stable code), and a later pass lifts it by
//! itself once the cause is gone.
//!
//! Agent turns (`agent.tell`) and coercions (`schema.coerce`) run through one provider trait
//! ([`runtime::provider::Provider`]; the deterministic fixture is the default). Coercions,
//! and the turns of an `owned` agent a binding names, reach a model over HTTP or HTTPS
//! ([`runtime::egress`]), directly or through the model broker,
//! which alone holds provider keys: the engine builds every request, and with a broker its
//! auth headers carry only a sentinel. A provider's binding problems block through the
//! gate's `Provider::admit`. Channels name a messaging provider ([`messaging`]). An agent's
//! capacity is held where a turn starts: the worker's claim counts the instance's running
//! turns of the agent in the same guarded commit that starts one ([`runtime::agent`]), so
//! workers on any number of nodes run at most that many at once.
//!
//! The front end is a pipeline of pure functions over text:
//! [`syntax`] (lexer and parser to a typed AST with byte spans) → [`check`] (every static
//! check of LANGUAGE.md §4, diagnostics word for word) → [`ir`] (rules with join plans,
//! effects with stable ids, `then` desugared, resources with owners). [`cli::check`] is
//! `whip check`.
//!
//! Invariants: the front end never panics, never loops and never recurses without bound on
//! any input (binary files, megabyte lines, deep nesting): bad input yields diagnostics.
//! Every bound lives in [`limits`].
//!
//! Must never: depend on cell or Raft internals; it talks to the fabric only through the
//! client trait of the layer below. The front end reads no clock, does no I/O except
//! reading the source files it is given, and keeps no global state. The runtime never runs
//! an `exec` command itself (only the sidecar does, without a shell) and never reads the
//! executor's URL or token, nor a coercion backend or broker setting, from the environment
//! (the binary passes them in); the one variable it reads is an `env:NAME` credential
//! reference, at the final fetch of a direct call, and it never stores, logs or records a
//! provider key.
#![deny(missing_docs, unreachable_pub)]

pub mod check;
pub mod cli;
pub mod diag;
pub mod executor;
pub mod http1;
pub mod ir;
pub mod limits;
pub mod messaging;
pub mod runtime;
pub mod syntax;
