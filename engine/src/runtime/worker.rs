//! The worker: claims ready effects under a fenced run lease (a `running` row with a
//! deadline, written by a guarded commit), runs them concurrently with a bound, and
//! records their terminals. Coordination effects pass a stable idempotency key (instance,
//! effect, attempt) so a retried or reclaimed run never charges, appends or acquires twice.

use futures::StreamExt;
use serde_json::{Value, json};
use whip_fabric::{
    AppendRequest, ConsumeRequest, FabricClient, LeaseRequest, Outcome, Reset, ResourceId,
};

use super::program::fnv64;
use super::state::{self, Effect, Header};
use super::{CONFLICT_RETRIES_MAX, Draft, Engine, Loaded, Result, key, now_ms};
use crate::limits::{LEASE_WAIT_POLL_MS, RUN_LEASE_MS};

/// What running one effect produced.
#[derive(Debug, Clone)]
pub(crate) enum Ran {
    Terminal {
        state: String,
        output: Value,
    },
    Waiting {
        not_before_ms: u64,
    },
    /// An ask was delivered as message `sent`: it waits for its reply until `until_ms`.
    Asked {
        sent: String,
        until_ms: u64,
    },
    /// A vote's proposal `proposal` is open: look again at `not_before_ms`.
    Voting {
        proposal: String,
        not_before_ms: u64,
    },
    /// Still running elsewhere (a child instance).
    Pending,
}

/// What a worker pass did.
#[derive(Debug, Default, Clone)]
pub struct Pass {
    /// Effects whose terminal this pass recorded.
    pub settled: usize,
    /// Child instances started or still running.
    pub children: Vec<String>,
}

fn run_lease_ms() -> u64 {
    std::env::var("WHIPPLESCRIPT_RUN_LEASE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RUN_LEASE_MS)
}

/// The child instance id of an invoke effect (deterministic: a retried start finds it).
pub fn child_id(parent: &str, effect: &Effect) -> String {
    let hash = fnv64(&[
        parent.as_bytes(),
        effect.stable.as_bytes(),
        &effect.attempt.to_le_bytes(),
    ]);
    format!("ins_{hash:016x}")
}

pub(crate) fn resource(args: &Value, key_field: &str) -> ResourceId {
    ResourceId {
        owner: args["owner"].as_str().unwrap_or_default().into(),
        name: args["name"].as_str().unwrap_or_default().into(),
        key: args[key_field].as_str().unwrap_or_default().into(),
    }
}

fn reset(name: &str) -> Reset {
    match name {
        "hourly" => Reset::Hourly,
        "weekly" => Reset::Weekly,
        "monthly" => Reset::Monthly,
        _ => Reset::Daily,
    }
}

fn ready(e: &Effect, now: u64) -> bool {
    match e.state.as_str() {
        "queued" => e.not_before_ms <= now,
        // A binding that was unavailable: every pass looks again (the gate decides).
        "blocked" => true,
        // A run whose lease ran out (its worker died) may be reclaimed, but not an `exec`:
        // it is not idempotent, so it waits for `whip recover`.
        "running" => {
            !matches!(e.kind.as_str(), "invoke" | "exec")
                && e.run.as_ref().is_some_and(|(_, until)| *until <= now)
        }
        _ => false,
    }
}

/// The run lease of a claim at `now`: a child runs until its terminal, an `exec` for its
/// timeout and the answer's margin, anything else for the run lease.
fn lease_until(effect: &Effect, now: u64) -> u64 {
    match effect.kind.as_str() {
        "invoke" => u64::MAX,
        "exec" => match crate::executor::effect::ExecArgs::parse(&effect.args) {
            Ok(args) => now + args.lease_ms(),
            // It fails at once when it runs.
            Err(_) => now + run_lease_ms(),
        },
        _ => now + run_lease_ms(),
    }
}

impl<F: FabricClient> Engine<F> {
    /// One worker pass over an instance.
    pub async fn work(&self, id: &str) -> Result<Pass> {
        let mut loaded = self.load(id).await?;
        self.work_loaded(&mut loaded).await
    }

    /// One worker pass over a loaded instance (the copy is kept current).
    pub async fn work_loaded(&self, loaded: &mut Loaded) -> Result<Pass> {
        let mut pass = Pass::default();
        if loaded.state.header.status != state::RUNNING {
            return Ok(pass);
        }
        if let Some(steered) = self.steered(loaded).await? {
            return Ok(steered);
        }
        let ready_ids = self.ready_now(loaded, now_ms()).await?;
        let children: Vec<Effect> = loaded
            .state
            .effects
            .values()
            .filter(|e| e.kind == "invoke" && e.state == "running")
            .cloned()
            .collect();
        if ready_ids.is_empty() && children.is_empty() {
            return Ok(pass);
        }
        let mut claimed = Vec::new();
        if !ready_ids.is_empty() {
            let (runs, fired) = self.claim(loaded, &ready_ids).await?;
            claimed = runs;
            pass.settled += fired;
        }
        let header = loaded.state.header.clone();
        let mut results: Vec<(Effect, String, Ran)> = futures::stream::iter(claimed)
            .map(|(effect, run)| {
                let header = &header;
                async move {
                    let ran = self.execute(header, &effect, &run).await;
                    (effect, run, ran)
                }
            })
            .buffer_unordered(self.concurrency.max(1))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .map(|(e, r, ran)| ran.map(|ran| (e, r, ran)))
            .collect::<Result<_>>()?;
        if std::env::var("WHIP_TEST_CRASH_AFTER_APPLY").is_ok_and(|v| v == "1")
            && !results.is_empty()
        {
            // Test hook: die between the cell's apply and the run's terminal.
            std::process::exit(3);
        }
        for effect in children {
            let child = child_id(&header.id, &effect);
            pass.children.push(child.clone());
            if let Some(ran) = self.child_outcome(&child).await? {
                let run = effect.run.clone().map(|r| r.0).unwrap_or_default();
                results.push((effect, run, ran));
            }
        }
        for (effect, _, ran) in &results {
            if effect.kind == "invoke" && matches!(ran, Ran::Pending) {
                pass.children.push(child_id(&header.id, effect));
            }
        }
        pass.settled += self.record(loaded, results).await?;
        Ok(pass)
    }

    /// The parent (or the operator) steers the instance through its registry entry: a
    /// pass ends here while it is paused, and a stop cancels it (`Some` then).
    async fn steered(&self, loaded: &mut Loaded) -> Result<Option<Pass>> {
        match self.supervision(&loaded.state.header).await? {
            whip_fabric::work::Signal::Run => Ok(None),
            whip_fabric::work::Signal::Pause => Ok(Some(Pass::default())),
            whip_fabric::work::Signal::Stop => {
                let id = loaded.state.header.id.clone();
                self.transition(&id, state::CANCELLED).await?;
                *loaded = self.load(&id).await?;
                let mut pass = Pass::default();
                pass.settled += 1;
                Ok(Some(pass))
            }
        }
    }

    /// The effects a pass may claim now, at most `concurrency` of them. `exec` effects pass
    /// the compute plane's gate first: when the executor is not configured, not reachable
    /// or refuses the token, each is `blocked` with the reason (an `effect.blocked` event
    /// when the reason is new, not on every pass) and left out of this pass.
    async fn ready_now(&self, loaded: &mut Loaded, now: u64) -> Result<Vec<String>> {
        let mut ids: Vec<String> = loaded
            .state
            .effects
            .values()
            .filter(|e| ready(e, now))
            .map(|e| e.id.clone())
            .collect();
        ids.truncate(self.concurrency.max(1));
        let is_exec =
            |st: &state::State, id: &String| st.effects.get(id).is_some_and(|e| e.kind == "exec");
        if !ids.iter().any(|id| is_exec(&loaded.state, id)) {
            return Ok(ids);
        }
        let Err(block) = crate::executor::effect::gate(&self.executor).await else {
            return Ok(ids);
        };
        let block = serde_json::to_value(&block).expect("a policy block encodes");
        for _ in 0..CONFLICT_RETRIES_MAX {
            let mut draft = Draft::new(&loaded.state);
            for id in ids.iter().filter(|id| is_exec(&loaded.state, id)) {
                let e = &loaded.state.effects[id];
                let new = e.state != "blocked" || e.policy_block.as_ref() != Some(&block);
                if ready(e, now) && new {
                    draft.emit(
                        "effect.blocked",
                        json!({"id": id, "state": "blocked", "policy_block": block}),
                    );
                }
            }
            if self.commit(loaded, draft).await? {
                break;
            }
            *loaded = self.load(&loaded.state.header.id).await?;
        }
        ids.retain(|id| !is_exec(&loaded.state, id));
        Ok(ids)
    }

    /// Claim effects: one guarded commit moves each to `running` with a fresh run row.
    /// Timers that are due complete right here (they have nothing to execute).
    async fn claim(
        &self,
        loaded: &mut Loaded,
        ids: &[String],
    ) -> Result<(Vec<(Effect, String)>, usize)> {
        for _ in 0..CONFLICT_RETRIES_MAX {
            let now = now_ms();
            let mut draft = Draft::new(&loaded.state);
            let mut claimed = Vec::new();
            let mut fired = 0;
            for id in ids {
                let Some(effect) = draft.state.effects.get(id).cloned() else {
                    continue;
                };
                if !ready(&effect, now) {
                    continue;
                }
                let run = draft.next_id(3, "r");
                let until = lease_until(&effect, now);
                draft.emit(
                    "effect.run_started",
                    json!({"id": id, "run": run, "worker": self.worker_id,
                        "lease_until_ms": until, "attempt": effect.attempt}),
                );
                if effect.kind == "timer" {
                    draft.emit(
                        "effect.terminal",
                        json!({"id": id, "run": run, "state": "completed",
                            "output": {"outcome": "fired"}}),
                    );
                    fired += 1;
                    continue;
                }
                claimed.push((effect, run));
            }
            if self.commit(loaded, draft).await? {
                return Ok((claimed, fired));
            }
            *loaded = self.load(&loaded.state.header.id).await?;
        }
        Ok((Vec::new(), 0))
    }

    /// Record terminals of our runs; a run that lost its lease records nothing.
    async fn record(
        &self,
        loaded: &mut Loaded,
        results: Vec<(Effect, String, Ran)>,
    ) -> Result<usize> {
        if results.is_empty() {
            return Ok(0);
        }
        for _ in 0..CONFLICT_RETRIES_MAX {
            let mut draft = Draft::new(&loaded.state);
            let mut settled = 0;
            for (effect, run, ran) in &results {
                let current = draft.state.effects.get(&effect.id);
                let ours = current.is_some_and(|e| {
                    e.state == "running" && e.run.as_ref().map(|r| &r.0) == Some(run)
                });
                if !ours {
                    continue;
                }
                match ran {
                    Ran::Terminal { state, output } => {
                        settled += 1;
                        draft.emit(
                            "effect.terminal",
                            json!({"id": effect.id, "run": run, "state": state, "output": output}),
                        );
                    }
                    Ran::Waiting { not_before_ms } => draft.emit(
                        "effect.waiting",
                        json!({"id": effect.id, "run": run, "pass": effect.pass + 1,
                            "not_before_ms": not_before_ms}),
                    ),
                    Ran::Asked { sent, until_ms } => draft.emit(
                        "effect.waiting",
                        json!({"id": effect.id, "run": run, "pass": effect.pass + 1,
                            "not_before_ms": until_ms, "output": {"sent": sent}}),
                    ),
                    Ran::Voting {
                        proposal,
                        not_before_ms,
                    } => draft.emit(
                        "effect.waiting",
                        json!({"id": effect.id, "run": run, "pass": effect.pass + 1,
                            "not_before_ms": not_before_ms, "output": {"proposal": proposal}}),
                    ),
                    Ran::Pending => {}
                }
            }
            if self.commit(loaded, draft).await? {
                return Ok(settled);
            }
            *loaded = self.load(&loaded.state.header.id).await?;
        }
        Ok(0)
    }

    async fn child_outcome(&self, child: &str) -> Result<Option<Ran>> {
        let Some(entry) = self
            .fabric
            .kv_get(key(&["e/", &super::tag(child), "/s/h"]))
            .await?
        else {
            return Ok(None);
        };
        let Ok(h) = serde_json::from_slice::<Header>(&entry.value) else {
            return Ok(None);
        };
        if !state::is_terminal(&h.status) {
            return Ok(None);
        }
        let payload = h.terminal.map_or(Value::Null, |t| t.1);
        let state = if h.status == state::COMPLETED {
            "completed"
        } else {
            "failed"
        };
        Ok(Some(Ran::Terminal {
            state: state.into(),
            output: payload,
        }))
    }

    /// A counter consume: `ok` or `over` with the period's numbers.
    async fn execute_consume(&self, a: &Value, idem: String) -> Result<Ran> {
        let request = ConsumeRequest {
            counter: resource(a, "key"),
            amount: a["amount"].as_u64().unwrap_or(0),
            cap: a["cap"].as_u64().unwrap_or(0),
            reset: reset(a["reset"].as_str().unwrap_or("daily")),
            timezone: a["timezone"].as_str().unwrap_or("UTC").into(),
        };
        let (outcome, consumed, remaining, period) =
            match self.fabric.counter_consume(request, idem).await? {
                Outcome::CounterOk {
                    consumed,
                    remaining,
                    period,
                } => ("ok", consumed, remaining, period),
                Outcome::CounterOver {
                    consumed,
                    remaining,
                    period,
                } => ("over", consumed, remaining, period),
                other => {
                    return Ok(Ran::Terminal {
                        state: "failed".into(),
                        output: json!({"error": format!("unexpected counter outcome {other:?}")}),
                    });
                }
            };
        Ok(Ran::Terminal {
            state: "completed".into(),
            output: json!({"outcome": outcome, "consumed": consumed, "remaining": remaining,
                "period": period}),
        })
    }

    /// A lease acquire: `held` or `contended`, or (with `wait`) another try on a later pass.
    async fn execute_acquire(&self, ins: String, e: &Effect, idem: String) -> Result<Ran> {
        let a = &e.args;
        let ok = |output: Value| Ran::Terminal {
            state: "completed".into(),
            output,
        };
        let now = now_ms();
        let wait_until = a["wait_until_ms"].as_u64().unwrap_or(0);
        let wait_ms = if a["wait_ms"].as_u64().unwrap_or(0) > 0 && wait_until > now {
            wait_until - now
        } else {
            0
        };
        let request = LeaseRequest {
            lease: resource(a, "key"),
            holder: ins,
            slots: a["slots"].as_u64().unwrap_or(1) as u32,
            ttl_ms: a["ttl_ms"].as_u64().unwrap_or(60_000),
            wait_ms,
        };
        let idem = format!("{idem}/p{}", e.pass);
        Ok(match self.fabric.lease_acquire(request, idem).await? {
            Outcome::LeaseHeld {
                fence,
                expires_at_ms,
                reentered,
            } => ok(json!({"outcome": "held", "fence": fence,
                "expires_at_ms": expires_at_ms, "reentered": reentered})),
            Outcome::LeaseWaiting { .. } => Ran::Waiting {
                not_before_ms: (now_ms() + LEASE_WAIT_POLL_MS).min(wait_until.max(now)),
            },
            Outcome::LeaseContended { holders } => {
                let holders: Vec<&str> = holders.iter().map(|h| h.holder.as_str()).collect();
                ok(json!({"outcome": "contended", "holders": holders}))
            }
            other => Ran::Terminal {
                state: "failed".into(),
                output: json!({"error": format!("unexpected lease outcome {other:?}")}),
            },
        })
    }

    /// A ledger append: `appended` with its sequence.
    async fn execute_append(&self, a: &Value, ins: String, idem: String) -> Result<Ran> {
        let request = AppendRequest {
            ledger: resource(a, "partition"),
            entry: a["entry"].to_string().into_bytes(),
            appended_by: ins,
            retain_ms: a["retain_ms"].as_u64().unwrap_or(86_400_000),
        };
        Ok(match self.fabric.ledger_append(request, idem).await? {
            Outcome::LedgerAppended { seq } => Ran::Terminal {
                state: "completed".into(),
                output: json!({"outcome": "appended", "seq": seq}),
            },
            other => Ran::Terminal {
                state: "failed".into(),
                output: json!({"error": format!("unexpected ledger outcome {other:?}")}),
            },
        })
    }

    /// Run one effect (claimed as run `run`) against the fabric or the compute plane.
    async fn execute(&self, header: &Header, e: &Effect, run: &str) -> Result<Ran> {
        let ins = header.id.clone();
        let idem = format!("{ins}/{}/a{}", e.id, e.attempt);
        let a = &e.args;
        let ok = |output: Value| Ran::Terminal {
            state: "completed".into(),
            output,
        };
        let failed = |reason: String| Ran::Terminal {
            state: "failed".into(),
            output: json!({"error": reason}),
        };
        Ok(match e.kind.as_str() {
            "acquire" => self.execute_acquire(ins, e, idem).await?,
            "exec" => {
                let ids = (ins.as_str(), e.id.as_str(), run);
                crate::executor::effect::run(&self.executor, ids, a, now_ms()).await
            }
            "file_issue" | "claim" | "finish" => self.execute_tracker(&ins, e, &idem).await?,
            "release" | "renew" if a["upstream_kind"] == "claim" => {
                self.execute_tracker(&ins, e, &idem).await?
            }
            "release" | "renew" => {
                if a.is_null() || a["upstream_kind"] != "acquire" {
                    return Ok(failed(format!("{} of an unknown lease binding", e.kind)));
                }
                let lease = resource(a, "key");
                let outcome = if e.kind == "release" {
                    self.fabric.lease_release(lease, ins, idem).await?
                } else {
                    let ttl = a["ttl_ms"].as_u64().unwrap_or(60_000);
                    self.fabric.lease_renew(lease, ins, ttl, idem).await?
                };
                match outcome {
                    Outcome::LeaseReleased => ok(json!({"outcome": "released"})),
                    Outcome::LeaseRenewed {
                        fence,
                        expires_at_ms,
                    } => ok(json!({
                        "outcome": "renewed", "fence": fence, "expires_at_ms": expires_at_ms
                    })),
                    Outcome::LeaseNotHeld if e.kind == "release" => {
                        ok(json!({"outcome": "not_held"}))
                    }
                    other => failed(format!("lease {}: {other:?}", e.kind)),
                }
            }
            "consume" => self.execute_consume(a, idem).await?,
            "message.send" | "message.ask" => self.execute_mail(header, e, &idem).await?,
            "append" => self.execute_append(a, ins, idem).await?,
            "vote" => self.execute_vote(e, &idem).await?,
            "invoke" => {
                let child = child_id(&header.id, e);
                let program = self.program(&header.program).await?;
                let workflow = a["workflow"].as_str().unwrap_or_default();
                let input = a["input"].clone();
                let parent = (header, e.id.as_str());
                match self
                    .start_child(&program, workflow, input, parent, child)
                    .await
                {
                    Ok(_) => Ran::Pending,
                    Err(super::RuntimeError::Invalid(m)) => failed(m),
                    Err(other) => return Err(other),
                }
            }
            other => failed(format!(
                "effect kind `{other}` is not supported on this runtime yet"
            )),
        })
    }

    /// Run a tracker effect: file, claim, finish, or release / renew of a claim. A refusal
    /// (stale fence, someone else's claim, an unknown issue) fails the effect.
    async fn execute_tracker(&self, ins: &str, e: &Effect, idem: &str) -> Result<Ran> {
        use super::tracker::{ClaimOutcome, IssueOp};
        let a = &e.args;
        let held = &a["held"];
        let issue_id = match e.kind.as_str() {
            "claim" => a["issue"]["id"].as_str().unwrap_or_default(),
            _ => held["issue"].as_str().unwrap_or_default(),
        };
        let fence = held["fence"].as_u64();
        let result = match e.kind.as_str() {
            "file_issue" => {
                let owner = a["owner"].as_str().unwrap_or("shared");
                let tracker = a["tracker"].as_str().unwrap_or_default();
                self.issue_file(owner, tracker, &a["issue"], ins, idem)
                    .await
                    .map(|i| {
                        json!({"outcome": "filed", "id": i.id, "tracker": i.tracker,
                        "title": i.title, "body": i.body, "labels": i.labels})
                    })
            }
            "claim" => {
                let ttl_ms = a["ttl_ms"].as_u64().unwrap_or(600_000);
                match self.issue_claim(issue_id, ins, ttl_ms, idem).await {
                    Ok(ClaimOutcome::Claimed { issue, reentered }) => {
                        let c = issue.claim.expect("a claimed issue has a claim");
                        Ok(
                            json!({"outcome": "claimed", "issue": issue.id, "id": issue.id,
                            "fence": c.fence, "deadline_ms": c.deadline_ms,
                            "reentered": reentered}),
                        )
                    }
                    Ok(ClaimOutcome::Contended { issue }) => {
                        let by = issue.claim.map(|c| c.claimant).unwrap_or_default();
                        return Ok(Ran::Terminal {
                            state: "failed".into(),
                            output: json!({"outcome": "contended", "issue": issue.id,
                                "error": format!("issue {} is claimed by {by}", issue.id)}),
                        });
                    }
                    Err(err) => Err(err),
                }
            }
            kind => {
                let op = match kind {
                    "finish" => IssueOp::Finish {
                        summary: a["summary"].clone(),
                    },
                    "renew" => IssueOp::Renew {
                        ttl_ms: a["ttl_ms"].as_u64().unwrap_or(600_000),
                    },
                    _ => IssueOp::Release,
                };
                self.issue_apply(issue_id, ins, fence, op, idem)
                    .await
                    .map(|i| {
                        json!({"outcome": kind, "issue": i.id, "status": i.status,
                        "fence": i.fence})
                    })
            }
        };
        Ok(match result {
            Ok(output) => Ran::Terminal {
                state: "completed".into(),
                output,
            },
            Err(super::RuntimeError::Invalid(reason)) => Ran::Terminal {
                state: "failed".into(),
                output: json!({"error": reason}),
            },
            Err(other) => return Err(other),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(kind: &str, state: &str, lease_until_ms: u64) -> Effect {
        Effect {
            id: "x000001".into(),
            stable: "r/e1@0:started".into(),
            kind: kind.into(),
            rule: "r".into(),
            binding: None,
            args: Value::Null,
            state: state.into(),
            output: None,
            attempt: 0,
            pass: 0,
            not_before_ms: 0,
            run: Some(("r000001".into(), lease_until_ms)),
            policy_block: None,
            program: None,
            cancel_requested: false,
        }
    }

    #[test]
    fn a_lapsed_exec_run_is_never_reclaimed_and_a_blocked_one_is_looked_at_again() {
        let now = 1_000;
        assert!(
            ready(&effect("append", "running", 999), now),
            "an append is reclaimed"
        );
        assert!(
            !ready(&effect("append", "running", 1_001), now),
            "its lease still holds"
        );
        assert!(
            !ready(&effect("exec", "running", 999), now),
            "an exec waits for recover"
        );
        assert!(!ready(&effect("invoke", "running", 999), now));
        assert!(
            ready(&effect("exec", "blocked", 0), now),
            "a block is looked at again"
        );
        assert!(!ready(&effect("exec", "completed", 0), now));
        let mut args = effect("exec", "queued", 0);
        args.args = serde_json::json!({"v": 1, "argv": ["true"], "cwd": null, "env": {},
            "timeout_ms": 5_000});
        let lease = lease_until(&args, now);
        assert_eq!(lease, now + 5_000 + crate::limits::EXEC_ANSWER_MARGIN_MS);
    }
}
