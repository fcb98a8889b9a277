//! The `exec` effect between the runtime and the executor: its typed arguments, the gate a
//! worker pass applies before it claims one, and what an answer (or an error) makes of it.
//!
//! - The gate ([`gate`]) runs before a claim, so a binding that is not there (no executor
//!   configured, no token, the executor down or refusing the token) blocks the effect
//!   (`blocked` with a [`PolicyBlock`]) instead of failing it; every pass looks again.
//! - After a claim, an error that proves nothing was sent puts the effect back in the queue;
//!   an error after which the run may have started leaves it `running` for `whip recover`
//!   (an `exec` is not idempotent, so it is never simply run again).
//! - Evidence (exit code, the tail of stderr, the timeout, the run as correlation id) goes
//!   into the effect's output; environment values never do, only their names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::client::{ExecutorClient, ExecutorError};
use super::protocol::{ExecAnswer, ExecRequest, RefusalCode};
use crate::check::shape::Shape;
use crate::limits::{EXEC_ANSWER_MARGIN_MS, EXEC_BUSY_RETRY_MS, EXEC_STDERR_EVIDENCE_BYTES_MAX};
use crate::runtime::effect::Terminal;
pub use crate::runtime::effect::{BlockCategory, PolicyBlock};
use crate::runtime::worker::Ran;

/// The version of [`ExecArgs`] this engine writes. Version 2 added `result`; a version 1
/// row (no typed result) still reads.
pub const EXEC_ARGS_VERSION: u8 = 2;

/// The oldest version of [`ExecArgs`] this engine reads.
pub const EXEC_ARGS_VERSION_MIN: u8 = 1;

/// The arguments of an `exec` effect, as the stepper evaluated them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    /// [`EXEC_ARGS_VERSION`].
    pub v: u8,
    /// The program and its arguments (empty when the program's value was not an array).
    pub argv: Vec<String>,
    /// A directory inside the workspace.
    pub cwd: Option<String>,
    /// Environment variables on top of the executor's base.
    pub env: BTreeMap<String, String>,
    /// The run's timeout.
    pub timeout_ms: u64,
    /// `exec … -> Type`: the shape the run's stdout (JSON) must have.
    #[serde(default)]
    pub result: Option<Shape>,
}

impl ExecArgs {
    /// The arguments of a stored effect; a row of another shape or version is an error.
    pub fn parse(args: &Value) -> Result<ExecArgs, String> {
        let parsed: ExecArgs = serde_json::from_value(args.clone())
            .map_err(|e| format!("malformed exec arguments: {e}"))?;
        if !(EXEC_ARGS_VERSION_MIN..=EXEC_ARGS_VERSION).contains(&parsed.v) {
            return Err(format!(
                "exec arguments of version {} are unknown",
                parsed.v
            ));
        }
        Ok(parsed)
    }

    /// How long a run of these arguments may hold its run lease: its timeout and the margin
    /// the worker waits for the answer.
    pub fn lease_ms(&self) -> u64 {
        self.timeout_ms + EXEC_ANSWER_MARGIN_MS
    }
}

impl PolicyBlock {
    /// The block an error of the executor's binding means.
    pub fn of(error: &ExecutorError) -> PolicyBlock {
        use BlockCategory as C;
        match error {
            ExecutorError::Unconfigured(d) => PolicyBlock::new(C::ProviderConfig, d.clone()),
            ExecutorError::MissingToken => PolicyBlock::new(
                C::Credentials,
                "executor token not configured (WHIP_EXECUTOR_TOKEN)",
            ),
            ExecutorError::Unauthorized => {
                PolicyBlock::new(C::Credentials, "executor refused the token")
            }
            ExecutorError::Refused {
                code: RefusalCode::NotLoopback,
                ..
            } => PolicyBlock::new(
                C::ProviderConfig,
                "executor refuses this worker: it is not on the executor's loopback interface",
            ),
            other => PolicyBlock::new(C::ProviderHealth, other.to_string()),
        }
    }
}

/// Before a pass claims `exec` effects: is the executor configured, reachable, speaking
/// `whip-executor/1` and accepting the token? `Err` is the block to record.
pub async fn gate(client: &ExecutorClient) -> Result<(), PolicyBlock> {
    client
        .health()
        .await
        .map(|_| ())
        .map_err(|e| PolicyBlock::of(&e))
}

/// The last `max` bytes of `s`, cut at a character boundary.
fn tail(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// The effect's terminal for an answer: its state (`completed`, `failed` or `timed_out`)
/// and its output, with the evidence. `whip recover` settles a run from its record the same
/// way the worker settles it from the answer.
pub fn settle(answer: ExecAnswer, args: &ExecArgs, correlation_id: &str) -> (Terminal, Value) {
    let mut evidence = json!({
        "provider": "executor", "correlation_id": correlation_id,
        "program": args.argv.first(), "cwd": args.cwd,
        "env_names": args.env.keys().collect::<Vec<_>>(),
    });
    let (state, mut output) = match &answer {
        ExecAnswer::Exited {
            exit_code, stderr, ..
        } => {
            evidence["exit_code"] = json!(exit_code);
            evidence["stderr_tail"] = json!(tail(stderr, EXEC_STDERR_EVIDENCE_BYTES_MAX));
            let state = if *exit_code == 0 {
                Terminal::Completed
            } else {
                Terminal::Failed
            };
            (
                state,
                serde_json::to_value(&answer).expect("answers encode"),
            )
        }
        ExecAnswer::TimedOut {
            timeout_ms, stderr, ..
        } => {
            let reason = format!("killed after its timeout of {timeout_ms} ms");
            evidence["timeout_reason"] = json!(reason);
            evidence["stderr_tail"] = json!(tail(stderr, EXEC_STDERR_EVIDENCE_BYTES_MAX));
            let mut output = serde_json::to_value(&answer).expect("answers encode");
            output["exit_code"] = Value::Null;
            output["error"] = json!(reason);
            output["reason"] = json!("timeout");
            (Terminal::TimedOut, output)
        }
        ExecAnswer::SpawnFailed { error } => {
            let output = json!({"outcome": "spawn_failed", "error": error,
                "reason": "spawn_failed", "exit_code": null});
            (Terminal::Failed, output)
        }
    };
    if let ExecAnswer::Exited { exit_code, .. } = &answer
        && *exit_code != 0
    {
        output["error"] = json!(format!("exited with code {exit_code}"));
        output["reason"] = json!("exit_nonzero");
    }
    output["evidence"] = evidence;
    typed_result(args.result.as_ref(), state, output)
}

/// `exec … -> Type`: a run that exited 0 completes only when its stdout is JSON of the
/// type; the value goes to `output.value` (what `after x succeeds as v` binds). Otherwise
/// the effect fails with the reason `result_type` and what did not fit, as evidence.
fn typed_result(shape: Option<&Shape>, state: Terminal, mut output: Value) -> (Terminal, Value) {
    let (Some(shape), Terminal::Completed) = (shape, state) else {
        return (state, output);
    };
    let parsed = output["stdout"]
        .as_str()
        .ok_or_else(|| "the run has no stdout".to_string())
        .and_then(|out| {
            serde_json::from_str::<Value>(out).map_err(|e| format!("stdout is not JSON: {e}"))
        })
        .and_then(|v| shape.fits(&v).map(|()| v));
    match parsed {
        Ok(value) => {
            output["value"] = value;
            (Terminal::Completed, output)
        }
        Err(why) => {
            output["error"] = json!(format!("the result does not fit its type: {why}"));
            output["reason"] = json!("result_type");
            (Terminal::Failed, output)
        }
    }
}

fn terminal(answer: ExecAnswer, args: &ExecArgs, correlation_id: String) -> Ran {
    let (state, output) = settle(answer, args, &correlation_id);
    Ran::Terminal { state, output }
}

/// The terminal a recovered run's durable answer gives (`whip recover`): the same state
/// and evidence as if its worker had lived to record it.
pub(crate) fn recovered(answer: ExecAnswer, args: &ExecArgs, correlation_id: String) -> Ran {
    terminal(answer, args, correlation_id)
}

fn failed(error: String, reason: &str) -> Ran {
    Ran::refused(reason, error)
}

/// Run the `exec` effect `effect` of `instance` as run `run` (already claimed).
pub(crate) async fn run(
    client: &ExecutorClient,
    (instance, effect, run): (&str, &str, &str),
    args: &ExecArgs,
    now_ms: u64,
) -> Ran {
    if args.argv.is_empty() {
        let error = "exec argv is empty or not an array of strings".to_string();
        return failed(error, "bad_argv");
    }
    let request = ExecRequest {
        instance: instance.into(),
        effect: effect.into(),
        run: run.into(),
        argv: args.argv.clone(),
        cwd: args.cwd.clone(),
        env: args.env.clone(),
        timeout_ms: Some(args.timeout_ms),
    };
    let error = match client.exec(&request).await {
        Ok(answer) => return terminal(answer, args, format!("{instance}/{run}")),
        Err(e) => e,
    };
    use RefusalCode as C;
    match &error {
        // Nothing was sent, or the executor refused before starting anything: queue the
        // effect again; the next pass's gate blocks it if the binding is still broken.
        ExecutorError::Unconfigured(_)
        | ExecutorError::MissingToken
        | ExecutorError::Unreachable(_)
        | ExecutorError::Unauthorized
        | ExecutorError::Refused {
            code: C::NotLoopback | C::NotFound | C::MethodNotAllowed,
            ..
        } => Ran::Waiting {
            not_before_ms: now_ms,
        },
        ExecutorError::Refused {
            code: C::Busy | C::InstanceBusy,
            ..
        } => Ran::Waiting {
            not_before_ms: now_ms + EXEC_BUSY_RETRY_MS,
        },
        ExecutorError::Refused {
            code:
                code @ (C::BadJson
                | C::BadId
                | C::BadArgv
                | C::BadCwd
                | C::BadEnv
                | C::BadTimeout
                | C::BodyTooLarge),
            ..
        } => failed(error.to_string(), code.code()),
        // The run may have started: never run it again by ourselves.
        _ => {
            tracing::warn!(instance, effect, run, error = %error,
                "exec outcome unknown; the run stays running for `whip recover`");
            Ran::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ExecArgs {
        ExecArgs {
            v: EXEC_ARGS_VERSION,
            argv: vec!["make".into()],
            cwd: None,
            env: BTreeMap::from([("TOKEN".to_string(), "s3cret".to_string())]),
            timeout_ms: 1_000,
            result: None,
        }
    }

    #[test]
    fn answers_become_terminals_with_evidence_and_no_env_values() {
        let exited = |code| ExecAnswer::Exited {
            exit_code: code,
            signal: None,
            stdout: "out".into(),
            stderr: "warning: x".into(),
            truncated: false,
            duration_ms: 5,
        };
        let Ran::Terminal { state, output } = terminal(exited(0), &args(), "i/r1".into()) else {
            panic!()
        };
        assert_eq!(state, Terminal::Completed);
        assert_eq!(
            (output["exit_code"].clone(), output["stdout"].clone()),
            (json!(0), json!("out"))
        );
        assert_eq!(output["evidence"]["env_names"], json!(["TOKEN"]));
        assert!(!output.to_string().contains("s3cret"));
        let Ran::Terminal { state, output } = terminal(exited(2), &args(), "i/r1".into()) else {
            panic!()
        };
        assert_eq!(
            (state, output["reason"].clone()),
            (Terminal::Failed, json!("exit_nonzero"))
        );
        let slow = ExecAnswer::TimedOut {
            timeout_ms: 1_000,
            stdout: String::new(),
            stderr: String::new(),
            truncated: false,
            duration_ms: 1_001,
        };
        let Ran::Terminal { state, output } = terminal(slow, &args(), "i/r1".into()) else {
            panic!()
        };
        assert_eq!(state, Terminal::TimedOut);
        assert!(output["evidence"]["timeout_reason"].is_string());
    }

    #[test]
    fn a_typed_result_completes_only_when_stdout_fits_its_type() {
        let shape = Shape::Object {
            name: "Report".into(),
            fields: vec![("n".into(), Shape::Int)],
        };
        let typed = ExecArgs {
            result: Some(shape),
            ..args()
        };
        let exited = |stdout: &str| ExecAnswer::Exited {
            exit_code: 0,
            signal: None,
            stdout: stdout.into(),
            stderr: String::new(),
            truncated: false,
            duration_ms: 5,
        };
        let (state, output) = settle(exited(r#"{"n": 3}"#), &typed, "i/r1");
        assert_eq!(
            (state, output["value"].clone()),
            (Terminal::Completed, json!({"n": 3}))
        );
        let (state, output) = settle(exited(r#"{"n": "three"}"#), &typed, "i/r1");
        assert_eq!(
            (state, output["reason"].clone()),
            (Terminal::Failed, json!("result_type"))
        );
        assert_eq!(
            output["error"],
            json!("the result does not fit its type: $.n is a string, not an int")
        );
        let (state, _) = settle(exited("not json"), &typed, "i/r1");
        assert_eq!(state, Terminal::Failed);
    }

    #[test]
    fn malformed_rows_are_errors_and_blocks_have_categories() {
        let mut bad = serde_json::to_value(args()).unwrap();
        bad["timeout_ms"] = json!("soon");
        assert!(ExecArgs::parse(&bad).is_err());
        let mut newer = serde_json::to_value(args()).unwrap();
        newer["v"] = json!(9);
        assert!(ExecArgs::parse(&newer).is_err());
        let block = PolicyBlock::of(&ExecutorError::Unconfigured(
            "executor not configured".into(),
        ));
        assert_eq!(
            serde_json::to_value(&block).unwrap(),
            json!({"category": "provider_config", "detail": "executor not configured"})
        );
        let refused = PolicyBlock::of(&ExecutorError::Unauthorized);
        assert_eq!(refused.category, BlockCategory::Credentials);
        assert_eq!(tail("héllo", 4), "llo");
    }
}
