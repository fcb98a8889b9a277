//! Providers: what runs an agent turn (`agent.tell`) or a coercion (`schema.coerce`) for the
//! worker. Every provider sits behind the one [`Provider`] trait, so coercion backends over
//! HTTP and a model broker plug in beside the deterministic [`FixtureProvider`], the default
//! of `whip run` and `whip worker` (LANGUAGE-AGENTS.md §4.1).
//!
//! A provider answers with a [`ProviderOutcome`]: the worker turns it into the effect's
//! terminal and its recorded output (the value shapes of §3).

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::agent::{CoerceArgs, TellArgs};
use super::state::Terminal;
use super::worker::Ran;
use crate::check::shape::Shape;
use crate::limits::{FIXTURE_TURN_MS_MAX, FIXTURE_VALUE_DEPTH_MAX};

/// How a provider ended a turn or a coercion.
#[derive(Clone, Debug, PartialEq)]
pub enum ProviderOutcome {
    /// It answered: a turn's `{summary, exit_code, …}`, a coercion's value.
    Completed {
        /// What the turn reports (`summary` at least) or the coerced value.
        value: Value,
        /// One line for the operator.
        summary: String,
    },
    /// It failed.
    Failed {
        /// Why, for the operator and the program (`f.reason`).
        reason: String,
        /// A stable class of the failure (`nonzero_exit`, `provider_error`, …).
        error_class: &'static str,
        /// A turn's exit code, when it had one.
        exit_code: Option<i64>,
        /// A coercion's HTTP status, when it had one.
        http_status: Option<u16>,
    },
    /// Its time ran out.
    TimedOut {
        /// What happened.
        summary: String,
    },
    /// It was cancelled.
    Cancelled {
        /// What happened.
        summary: String,
    },
}

/// Runs agent turns and coercions. Implementations never read the engine's rows; they get
/// the effect's arguments and answer.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// Runs one agent turn under idempotency key `key` (the effect attempt's).
    fn tell<'a>(&'a self, turn: &'a TellArgs, key: &'a str) -> BoxFuture<'a, ProviderOutcome>;
    /// Runs one coercion under idempotency key `key` (the same on every run of the effect's
    /// attempt, so a cut-off call is sent again under it); the worker checks the answer
    /// against the output shape.
    fn coerce<'a>(&'a self, call: &'a CoerceArgs, key: &'a str) -> BoxFuture<'a, ProviderOutcome>;
    /// Why a coercion cannot run on this worker now (its binding, its credential, its
    /// broker's health), asked by the gate before any claim: a block, never a failure.
    fn admit<'a>(
        &'a self,
        call: &'a CoerceArgs,
    ) -> BoxFuture<'a, Option<super::effect::PolicyBlock>> {
        let _ = call;
        Box::pin(async { None })
    }
    /// Why a turn cannot run on this worker now (the binding of its agent's model, its
    /// credential, the broker's health): a block, never a failure.
    fn admit_turn<'a>(
        &'a self,
        turn: &'a TellArgs,
    ) -> BoxFuture<'a, Option<super::effect::PolicyBlock>> {
        let _ = turn;
        Box::pin(async { None })
    }
}

/// The terminal the fixture provider forces (`--fail`, `--timeout`, `--cancel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forced {
    /// Every provider effect fails.
    Fail,
    /// Every provider effect times out.
    Timeout,
    /// Every provider effect is cancelled.
    Cancel,
}

/// The deterministic fixture: in process, no subprocess, the same answer every time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FixtureProvider {
    /// A terminal forced on every provider effect, or `None` (they complete).
    pub forced: Option<Forced>,
    /// How long each agent turn takes before it answers (0: at once), so that a test or a
    /// demo can see turns overlap and capacity hold them back.
    pub turn_ms: u64,
}

/// The exit code of a forced failing fixture turn.
pub const FIXTURE_EXIT_CODE: i64 = 42;

impl FixtureProvider {
    /// A fixture that forces `forced` (or completes every effect).
    pub fn new(forced: Option<Forced>) -> FixtureProvider {
        FixtureProvider { forced, turn_ms: 0 }
    }

    /// The same fixture, each turn taking `turn_ms` (at most [`FIXTURE_TURN_MS_MAX`]).
    pub fn with_turn_ms(self, turn_ms: u64) -> FixtureProvider {
        FixtureProvider {
            turn_ms: turn_ms.min(FIXTURE_TURN_MS_MAX),
            ..self
        }
    }

    /// The answer to a turn of an agent of provider kind `kind`.
    pub fn turn(&self, kind: &str) -> ProviderOutcome {
        match self.forced {
            None => ProviderOutcome::Completed {
                value: json!({"exit_code": 0}),
                summary: format!("{kind} completed"),
            },
            Some(Forced::Fail) => ProviderOutcome::Failed {
                reason: format!("{kind} failed with exit code Some({FIXTURE_EXIT_CODE})"),
                error_class: "nonzero_exit",
                exit_code: Some(FIXTURE_EXIT_CODE),
                http_status: None,
            },
            Some(Forced::Timeout) => ProviderOutcome::TimedOut {
                summary: "timed_out native provider event from fixture.turn.timed_out".into(),
            },
            Some(Forced::Cancel) => ProviderOutcome::Cancelled {
                summary: "cancelled native provider event from fixture.turn.cancelled".into(),
            },
        }
    }

    /// The answer to a coercion whose output has `shape`.
    pub fn coercion(&self, shape: &Shape) -> ProviderOutcome {
        match self.forced {
            None => ProviderOutcome::Completed {
                value: fixture_value(shape, 0),
                summary: "coerce succeeded".into(),
            },
            Some(Forced::Fail) => ProviderOutcome::Failed {
                reason: "coerce failed".into(),
                error_class: "provider_error",
                exit_code: None,
                http_status: None,
            },
            Some(Forced::Timeout) => ProviderOutcome::TimedOut {
                summary: "coerce timed out".into(),
            },
            Some(Forced::Cancel) => ProviderOutcome::Cancelled {
                summary: "fixture coerce cancelled".into(),
            },
        }
    }
}

impl Provider for FixtureProvider {
    fn tell<'a>(&'a self, turn: &'a TellArgs, _key: &'a str) -> BoxFuture<'a, ProviderOutcome> {
        Box::pin(async move {
            if self.turn_ms > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(self.turn_ms)).await;
            }
            self.turn(&turn.provider)
        })
    }

    fn coerce<'a>(&'a self, call: &'a CoerceArgs, _key: &'a str) -> BoxFuture<'a, ProviderOutcome> {
        Box::pin(async move { self.coercion(&call.output) })
    }
}

/// The fixture's value of a shape: "fixture", 1, 0.5, true, a fixed instant, a literal as
/// itself, an enum's or a union's first member, `T?` as `T`, one item, `{"fixture": v}`,
/// every field of a class.
pub fn fixture_value(shape: &Shape, depth: usize) -> Value {
    if depth > FIXTURE_VALUE_DEPTH_MAX {
        return Value::Null;
    }
    let next = |s: &Shape| fixture_value(s, depth + 1);
    match shape {
        Shape::Any | Shape::String => json!("fixture"),
        Shape::Time => json!("2026-01-01T00:00:00Z"),
        Shape::Int => json!(1),
        Shape::Float => json!(0.5),
        Shape::Bool => json!(true),
        Shape::Null => Value::Null,
        Shape::Literal { value } => json!(value),
        Shape::Enum { variants, .. } => variants.first().map_or(Value::Null, |v| json!(v)),
        Shape::Union { members } => members.first().map_or(Value::Null, next),
        Shape::Optional { inner } => next(inner),
        Shape::Array { item } => json!([next(item)]),
        Shape::Map { value } => json!({ "fixture": next(value) }),
        Shape::Object { fields, .. } => {
            let fields: serde_json::Map<String, Value> =
                fields.iter().map(|(n, s)| (n.clone(), next(s))).collect();
            Value::Object(fields)
        }
    }
}

/// Who ran the effect, for its recorded output.
pub(crate) struct RunIds<'a> {
    /// The effect.
    pub(crate) effect: &'a str,
    /// The run.
    pub(crate) run: &'a str,
}

/// The terminal a turn's outcome records: `{summary, agent, provider, status, exit_code,
/// effect_id, run_id}`, or the failure binding `{reason, summary, effect_id, run_id, kind,
/// error_class}`, or `{summary, effect_id, run_id}`.
pub(crate) fn turn_ran(t: &TellArgs, ids: &RunIds<'_>, outcome: ProviderOutcome) -> Ran {
    let mut ran = outcome_ran("agent.tell", ids, outcome);
    if let Ran::Terminal { output, .. } = &mut ran {
        output["agent"] = json!(t.agent);
        output["provider"] = json!(t.provider);
    }
    ran
}

/// The terminal a coercion's outcome records; a value that does not fit the output shape
/// fails it (`schema_mismatch`), with where and why.
pub(crate) fn coerce_ran(c: &CoerceArgs, ids: &RunIds<'_>, outcome: ProviderOutcome) -> Ran {
    let outcome = match outcome {
        ProviderOutcome::Completed { value, summary } => match c.output.fits(&value) {
            Ok(()) => ProviderOutcome::Completed { value, summary },
            Err(why) => ProviderOutcome::Failed {
                reason: format!(
                    "coerce `{}` answered no `{}`: {why}",
                    c.function, c.output_type
                ),
                error_class: "schema_mismatch",
                exit_code: None,
                http_status: None,
            },
        },
        other => other,
    };
    let mut ran = outcome_ran("schema.coerce", ids, outcome);
    if let Ran::Terminal { state, output } = &mut ran
        && *state == Terminal::Failed
        && output.get("http_status").is_none()
    {
        output["http_status"] = Value::Null;
    }
    ran
}

fn outcome_ran(kind: &str, ids: &RunIds<'_>, outcome: ProviderOutcome) -> Ran {
    let (state, mut output) = match outcome {
        ProviderOutcome::Completed { value, summary } => {
            let mut output = match (kind, value) {
                ("agent.tell", Value::Object(o)) => Value::Object(o),
                (_, value) => json!({ "value": value }),
            };
            output["summary"] = json!(summary);
            (Terminal::Completed, output)
        }
        ProviderOutcome::Failed {
            reason,
            error_class,
            exit_code,
            http_status,
        } => {
            let mut output = json!({"reason": reason, "summary": reason, "error": reason,
                "kind": kind, "error_class": error_class});
            if let Some(code) = exit_code {
                output["exit_code"] = json!(code);
            }
            if let Some(status) = http_status {
                output["http_status"] = json!(status);
            }
            (Terminal::Failed, output)
        }
        ProviderOutcome::TimedOut { summary } => (Terminal::TimedOut, json!({"summary": summary})),
        ProviderOutcome::Cancelled { summary } => {
            (Terminal::Cancelled, json!({"summary": summary}))
        }
    };
    output["status"] = json!(super::effect::EffectState::from(state));
    output["effect_id"] = json!(ids.effect);
    output["run_id"] = json!(ids.run);
    Ran::Terminal { state, output }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_values_follow_the_shape() {
        let object = Shape::Object {
            name: "Decision".into(),
            fields: vec![
                (
                    "verdict".into(),
                    Shape::Union {
                        members: vec![
                            Shape::Literal {
                                value: "merge".into(),
                            },
                            Shape::Literal {
                                value: "revise".into(),
                            },
                        ],
                    },
                ),
                ("when".into(), Shape::Time),
                (
                    "notes".into(),
                    Shape::Optional {
                        inner: Box::new(Shape::Array {
                            item: Box::new(Shape::Float),
                        }),
                    },
                ),
                (
                    "tally".into(),
                    Shape::Map {
                        value: Box::new(Shape::Int),
                    },
                ),
                ("ok".into(), Shape::Bool),
            ],
        };
        assert_eq!(
            fixture_value(&object, 0),
            json!({"verdict": "merge", "when": "2026-01-01T00:00:00Z", "notes": [0.5],
                "tally": {"fixture": 1}, "ok": true})
        );
        assert!(object.fits(&fixture_value(&object, 0)).is_ok());
    }

    #[test]
    fn forced_fixture_texts_are_the_specs() {
        let fail = FixtureProvider::new(Some(Forced::Fail));
        let ProviderOutcome::Failed { reason, .. } = fail.turn("owned") else {
            panic!("a forced failure fails");
        };
        assert_eq!(reason, "owned failed with exit code Some(42)");
        assert_eq!(
            FixtureProvider::new(Some(Forced::Cancel)).coercion(&Shape::Int),
            ProviderOutcome::Cancelled {
                summary: "fixture coerce cancelled".into()
            }
        );
    }
}
