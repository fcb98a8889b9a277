//! `whip trace ID --check`: an instance's event log checked against the lifecycle rules.
//!
//! The log is the source of truth, so these rules hold for every healthy instance:
//! - sequence numbers start at 1 with `external.started` and have no gaps;
//! - an effect is requested only inside a rule's commit (after its `rule.committed`, in the
//!   same commit);
//! - after a terminal (`workflow.completed`, `workflow.failed`, or a transition to
//!   `cancelled`) nothing fires, derives, requests or starts any more (effects may still be
//!   cancelled or settle);
//! - an effect never has two live runs: a run starts while an earlier one still holds its
//!   lease only if that one ended.
//!
//! The check is a pure function of the events; the first violation is reported.

use std::collections::BTreeMap;

use super::state::{EffectState, Event, EventKind};

/// The first event that breaks a rule, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The event's sequence number.
    pub seq: u64,
    /// What is wrong.
    pub detail: String,
}

/// Check `events` (in log order); `None` when they conform.
pub fn check(events: &[Event]) -> Option<Violation> {
    let mut walk = Walk::default();
    for (i, ev) in events.iter().enumerate() {
        if let Err(detail) = walk.step(i, ev) {
            return Some(Violation {
                seq: ev.seq,
                detail,
            });
        }
    }
    None
}

#[derive(Default)]
struct Walk {
    /// The commit (by its time) that fired a rule, if the current one did.
    firing_at: Option<u64>,
    terminal: bool,
    /// Effect → (run, lease deadline) of its live run.
    running: BTreeMap<String, (String, u64)>,
}

impl Walk {
    fn step(&mut self, i: usize, ev: &Event) -> Result<(), String> {
        let expected = i as u64 + 1;
        if ev.seq != expected {
            return Err(format!(
                "sequence gap: expected #{expected}, found #{}",
                ev.seq
            ));
        }
        if i == 0 && ev.kind != EventKind::ExternalStarted {
            return Err(format!(
                "the log starts with {} instead of external.started",
                ev.kind
            ));
        }
        if self.firing_at.is_some_and(|at| at != ev.at_ms) {
            self.firing_at = None;
        }
        let after_terminal = matches!(
            ev.kind,
            EventKind::RuleCommitted
                | EventKind::FactDerived
                | EventKind::EffectRequested
                | EventKind::EffectRunStarted
        );
        if self.terminal && after_terminal {
            return Err(format!("{} after the instance's terminal", ev.kind));
        }
        match ev.kind {
            EventKind::RuleCommitted => self.firing_at = Some(ev.at_ms),
            EventKind::EffectRequested if self.firing_at.is_none() => {
                return Err("an effect requested outside a rule's commit".into());
            }
            EventKind::WorkflowCompleted | EventKind::WorkflowFailed => self.terminal = true,
            EventKind::InstanceTransitioned if ev.data["to"] == "cancelled" => {
                self.terminal = true;
            }
            EventKind::EffectRunStarted => self.run_started(ev)?,
            EventKind::EffectTerminal
            | EventKind::EffectWaiting
            | EventKind::EffectCancelled
            | EventKind::EffectRetried => {
                let id = ev.data["id"].as_str().unwrap_or_default();
                self.running.remove(id);
            }
            _ => {}
        }
        Ok(())
    }

    fn run_started(&mut self, ev: &Event) -> Result<(), String> {
        let id = ev.data["id"].as_str().unwrap_or_default().to_string();
        let run = ev.data["run"].as_str().unwrap_or_default().to_string();
        let until = ev.data["lease_until_ms"].as_u64().unwrap_or(u64::MAX);
        if let Some((live, live_until)) = self.running.get(&id)
            && *live_until > ev.at_ms
        {
            return Err(format!(
                "effect {id} started run {run} while run {live} still held its lease"
            ));
        }
        self.running.insert(id, (run, until));
        Ok(())
    }
}

/// What an incident report needs of an instance, and never a secret: per effect its state,
/// attempts and runs (worker, times, how each ended), and the diagnostics its provider gave
/// (the outcome, an error and its stable reason, a timeout, a policy block, and what a
/// provider recorded as `provider`: an `exec`'s exit code, the tail of its stderr, its
/// timeout reason, its run as correlation id and its environment's names), with the
/// idempotency key the fabric saw as the correlation id. Arguments are left out (they may
/// carry a message's text or a credential).
pub fn evidence(st: &super::state::State) -> serde_json::Value {
    use serde_json::json;
    let effects: Vec<serde_json::Value> = st
        .effects
        .values()
        .map(|e| {
            let runs: Vec<serde_json::Value> = st
                .runs
                .values()
                .filter(|r| r.effect == e.id)
                .map(|r| {
                    json!({"run": r.id, "worker": r.worker, "state": r.state,
                        "started_ms": r.started_ms, "ended_ms": r.ended_ms})
                })
                .collect();
            let out = e.output.as_ref();
            let field = |k: &str| out.and_then(|o| o.get(k)).cloned();
            json!({
                "effect": e.id, "kind": e.kind(), "rule": e.rule, "state": e.state,
                "attempt": e.attempt, "runs": runs,
                "diagnostics": {
                    "outcome": field("outcome"), "error": field("error"),
                    "reason": field("reason"), "timed_out": e.state == EffectState::TimedOut,
                    "policy_block": e.policy_block, "provider": field("evidence"),
                },
                "correlation_id": format!("{}/{}/a{}", st.header.id, e.id, e.attempt),
            })
        })
        .collect();
    json!({
        "instance": st.header.id, "workflow": st.header.workflow, "status": st.header.status,
        "reason": st.header.reason, "events": st.header.last_seq, "effects": effects,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ev(seq: u64, at_ms: u64, kind: &str, data: serde_json::Value) -> Event {
        Event {
            seq,
            at_ms,
            kind: EventKind::from_code(kind).expect("a known event kind"),
            data,
        }
    }

    #[test]
    fn healthy_logs_conform_and_each_rule_catches_its_break() {
        let started = ev(1, 10, "external.started", json!({}));
        let fired = ev(2, 20, "rule.committed", json!({}));
        let effect = ev(3, 20, "effect.requested", json!({"effect": {}}));
        let run = |seq, at, r| {
            ev(
                seq,
                at,
                "effect.run_started",
                json!({"id": "x1", "run": r, "lease_until_ms": 100}),
            )
        };
        let done = ev(5, 40, "effect.terminal", json!({"id": "x1"}));
        let healthy = vec![
            started.clone(),
            fired.clone(),
            effect.clone(),
            run(4, 30, "r1"),
            done,
        ];
        assert_eq!(check(&healthy), None);

        let gap = vec![started.clone(), ev(3, 20, "rule.committed", json!({}))];
        assert!(check(&gap).unwrap().detail.contains("sequence gap"));
        let loose = vec![started.clone(), ev(2, 30, "effect.requested", json!({}))];
        assert_eq!(check(&loose).unwrap().seq, 2);
        let twice = vec![
            started.clone(),
            fired.clone(),
            effect,
            run(4, 30, "r1"),
            run(5, 31, "r2"),
        ];
        assert!(
            check(&twice)
                .unwrap()
                .detail
                .contains("still held its lease")
        );
        let ended = vec![
            started,
            fired,
            ev(3, 20, "workflow.completed", json!({})),
            ev(4, 50, "rule.committed", json!({})),
        ];
        assert!(
            check(&ended)
                .unwrap()
                .detail
                .contains("after the instance's terminal")
        );
    }
}
