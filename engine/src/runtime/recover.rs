//! `whip recover`: reconcile the runs whose worker stopped (killed mid-run, its run lease
//! lapsed) without ever running anything again by surprise.
//!
//! An `exec` run is looked at whatever its run lease says: the executor is the authority
//! on it, and a worker that is still alive and records later finds the effect settled and
//! records nothing. Every other run is looked at once its run lease lapsed. For each:
//! - an `exec` asks the executor what became of it (`GET /v1/runs/…`): a durable answer is
//!   the run's evidence and resolves it exactly as its worker would have (`from_evidence`);
//!   a run still alive there is left alone (`still_running`); a run the executor lost, or
//!   never started, has no evidence and no idempotent way to ask again, so it ends as an
//!   uncertain terminal: the effect `failed`, the run carrying `runtime.recovery_uncertain`,
//!   and the rule's `fails` branches react. Retrying it is the operator's decision
//!   (`whip retry`);
//! - a coordination effect is idempotent (the cell answers a repeated key with the recorded
//!   outcome), so it is queued again under the same key (`requeued`).
//!
//! An executor that cannot be asked is an error: nothing is concluded without it.

use serde::Serialize;
use serde_json::json;
use whip_fabric::FabricClient;

use super::state::{Args, Effect, EffectKind, EffectState, EventKind, Terminal};
use super::worker::Ran;
use super::{CONFLICT_RETRIES_MAX, Draft, Engine, Result, invalid, now_ms};
use crate::executor::protocol::RunRecord;

/// The diagnostic an uncertain terminal carries.
pub const RECOVERY_UNCERTAIN: &str = "runtime.recovery_uncertain";

/// What recovery did with one stopped run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Resolved from the provider's durable evidence.
    FromEvidence,
    /// No evidence and no idempotent query: failed, `runtime.recovery_uncertain`.
    Uncertain,
    /// An idempotent effect, queued again under the same idempotency key.
    Requeued,
    /// The provider still runs it: left alone.
    StillRunning,
}

/// One stopped run and its resolution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RecoveredRun {
    /// The effect.
    pub effect: String,
    /// The run.
    pub run: String,
    /// The effect's kind.
    pub kind: EffectKind,
    /// What recovery did.
    pub resolution: Resolution,
    /// The effect's state after recovery.
    pub state: EffectState,
}

/// What `whip recover` reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// The instance.
    pub id: String,
    /// Every stopped run found.
    pub runs: Vec<RecoveredRun>,
    /// The last event recovery appended, if it changed anything.
    pub event: Option<u64>,
}

/// Runs to look at: every running `exec` (the executor knows whether it still runs, so
/// its run lease does not matter), and the other runs whose run lease lapsed at `now` (a
/// child instance runs until its own terminal).
fn stopped(effects: &std::collections::BTreeMap<String, Effect>, now: u64) -> Vec<Effect> {
    effects
        .values()
        .filter(|e| e.state == EffectState::Running && e.kind() != EffectKind::Invoke)
        .filter(|e| {
            e.kind() == EffectKind::Exec || e.run.as_ref().is_some_and(|(_, until)| *until <= now)
        })
        .cloned()
        .collect()
}

fn uncertain() -> Ran {
    Ran::Terminal {
        state: Terminal::Failed,
        output: json!({
            "error": "the run stopped before it recorded an outcome and the provider has no \
                      evidence of it: whether its side effect happened is unknown",
            "reason": "recovery_uncertain", "diagnostic": RECOVERY_UNCERTAIN,
        }),
    }
}

impl<F: FabricClient> Engine<F> {
    /// Reconcile instance `id`'s stopped runs, then step it so its rules react.
    pub async fn recover(&self, id: &str) -> Result<Recovery> {
        for _ in 0..CONFLICT_RETRIES_MAX {
            let mut loaded = self.load(id).await?;
            let mut draft = Draft::new(&loaded.state, now_ms());
            let mut runs = Vec::new();
            for e in stopped(&loaded.state.effects, now_ms()) {
                let run = e.run.clone().map(|(r, _)| r).unwrap_or_default();
                let (resolution, ran) = self.resolve(id, &e, &run).await?;
                emit_resolution(&mut draft, &e, &run, resolution, ran);
                let state = draft.state.effects[&e.id].state;
                runs.push(RecoveredRun {
                    effect: e.id.clone(),
                    run,
                    kind: e.kind(),
                    resolution,
                    state,
                });
            }
            let changed = !draft.events.is_empty();
            if self.commit(&mut loaded, draft).await? {
                let event = changed.then_some(loaded.state.header.last_seq);
                if changed && loaded.state.header.status == super::state::Status::Running {
                    self.step_loaded(&mut loaded).await?;
                }
                return Ok(Recovery {
                    id: id.to_string(),
                    runs,
                    event,
                });
            }
        }
        invalid(format!("instance {id} is too busy to recover, try again"))
    }

    /// How to resolve stopped run `run` of effect `e`.
    async fn resolve(&self, id: &str, e: &Effect, run: &str) -> Result<(Resolution, Option<Ran>)> {
        let Args::Exec(args) = &e.args else {
            // A coordination effect (and a coercion) runs again under its own idempotency
            // key; a malformed exec row fails when it runs; an agent turn cut off may have
            // had its effect, and no provider can be asked (LANGUAGE-AGENTS.md §3).
            if matches!(e.kind(), EffectKind::Exec | EffectKind::AgentTell) {
                return Ok((Resolution::Uncertain, Some(uncertain())));
            }
            return Ok((Resolution::Requeued, None));
        };
        let record = self.executor.run_record(id, run).await.map_err(|err| {
            super::RuntimeError::Invalid(format!(
                "cannot ask the executor about run {run} of effect {}: {err}; nothing was \
                 concluded, recover again once it answers",
                e.id
            ))
        })?;
        Ok(match record {
            Some(RunRecord::Finished { answer }) => {
                let ran = crate::executor::effect::recovered(answer, args, format!("{id}/{run}"));
                (Resolution::FromEvidence, Some(ran))
            }
            Some(RunRecord::Running) => (Resolution::StillRunning, None),
            Some(RunRecord::Lost) | None => (Resolution::Uncertain, Some(uncertain())),
        })
    }
}

/// Append what recovery decided for one run.
fn emit_resolution(draft: &mut Draft, e: &Effect, run: &str, r: Resolution, ran: Option<Ran>) {
    let diagnostic = (r == Resolution::Uncertain).then_some(RECOVERY_UNCERTAIN);
    if r != Resolution::StillRunning {
        draft.emit(
            EventKind::EffectRecovered,
            json!({"id": e.id, "run": run, "resolution": r, "diagnostic": diagnostic,
                "by": "operator"}),
        );
    }
    if let Some(Ran::Terminal { state, output }) = ran {
        draft.emit(
            EventKind::EffectTerminal,
            json!({"id": e.id, "run": run, "state": state, "output": output}),
        );
        super::agent::settled(draft, &e.id);
    }
}
