//! The composed loops (`run`, `worker --all`), operator transitions and the read views the
//! CLI prints.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use whip_fabric::{FabricClient, FabricError, LeaseRequest, Outcome, ResourceId};

use super::state::{self, ContState, EffectKind, EffectState, EventKind, PolicyBlock, State};
use super::{Draft, Engine, Loaded, Result, invalid, key, now_ms};
use crate::limits::WAIT_SLEEP_MS_MAX;

/// What `whip run` reports.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The instance.
    pub id: String,
    /// Its workflow.
    pub workflow: String,
    /// Step and worker passes taken.
    pub iterations: usize,
    /// Final (or current) status.
    pub status: state::Status,
    /// Terminal name and payload, when terminal.
    pub terminal: Option<(String, Value)>,
    /// Why it failed, when no rule said so.
    pub reason: Option<String>,
    /// The effects it waits on that are blocked, when it stopped short of a terminal.
    pub blocked: Vec<BlockedEffect>,
}

/// A blocked effect an idle instance waits on (`whip run`'s idle line).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BlockedEffect {
    /// `x…`
    pub id: String,
    /// Its kind.
    pub kind: EffectKind,
    /// Which block.
    pub state: EffectState,
    /// The reason's category and detail, when the block recorded one.
    pub policy_block: Option<PolicyBlock>,
}

/// The blocked effects of `st`, in id order.
pub fn blocked_effects(st: &State) -> Vec<BlockedEffect> {
    st.effects
        .values()
        .filter(|e| e.state.blocked())
        .map(|e| BlockedEffect {
            id: e.id.clone(),
            kind: e.kind(),
            state: e.state,
            policy_block: e.policy_block.clone(),
        })
        .collect()
}

/// The instance index row of `whip instances`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct InstanceRow {
    /// `ins_…`
    pub id: String,
    /// Lifecycle status.
    pub status: state::Status,
    /// Workflow name.
    pub workflow: String,
    /// Program version.
    pub program: String,
    /// Revision epoch.
    pub epoch: u64,
    /// Last event time (ms).
    pub updated_ms: u64,
    /// The parent instance and its invoking effect, for a child.
    #[serde(default)]
    pub parent: Option<(String, String)>,
}

impl<F: FabricClient> Engine<F> {
    /// Start an instance and drive it (and its children) until idle; with `wait`, sleep
    /// until the next timer or lease-wait deadline and continue until terminal.
    pub async fn run(
        &self,
        program: &Arc<super::Program>,
        input: Value,
        wait: bool,
    ) -> Result<RunReport> {
        self.run_id(program, input, None, wait).await
    }

    /// [`Engine::run`] with the instance's id (`whip run` names it, so that a retry after
    /// a lost store finds the same instance: the start applies only while it is absent).
    /// The instance this call started is driven from the state its start committed, as
    /// this engine (its owner): no read of the owner or of the state it just wrote.
    pub async fn run_id(
        &self,
        program: &Arc<super::Program>,
        input: Value,
        id: Option<String>,
        wait: bool,
    ) -> Result<RunReport> {
        let id = id.unwrap_or_else(|| super::fresh_id("ins_"));
        // The mark a wait starts from is taken before the state is known (here: before the
        // start); a run that does not wait never sleeps on it.
        let mark = match wait {
            true => self.applied_mark(&id, 0, 0).await?,
            false => 0,
        };
        let Some(loaded) = self.start_kept(program, input, id.clone()).await? else {
            // It was there already (a retry): drive what is stored.
            return self.drive(&id, wait).await;
        };
        self.drive_loaded(loaded, mark, wait).await
    }

    /// Alternate step and worker passes on `id` (and the children it invokes), acting as
    /// the instance's owner.
    pub async fn drive(&self, id: &str, wait: bool) -> Result<RunReport> {
        if let Some(owned) = self.for_owner(id).await? {
            return Box::pin(owned.drive(id, wait)).await;
        }
        let mark = self.applied_mark(id, 0, 0).await?;
        let loaded = self.load(id).await?;
        self.drive_loaded(loaded, mark, wait).await
    }

    /// [`Engine::drive`] from `loaded`, read after `mark` (the applied index a wait
    /// starts from), as this engine.
    async fn drive_loaded(
        &self,
        mut loaded: Loaded,
        mut mark: u64,
        wait: bool,
    ) -> Result<RunReport> {
        let named = loaded.state.header.id.clone();
        let id = named.as_str();
        let mut children: Vec<String> = Vec::new();
        let mut iterations = 0;
        loop {
            iterations += 1;
            let mut progress = self.step_loaded(&mut loaded).await? > 0;
            let pass = self.work_then_round(&mut loaded).await?;
            progress |= pass.settled > 0;
            for child in pass.children {
                if !children.contains(&child) {
                    children.push(child);
                }
            }
            for child in children.clone() {
                if let Ok(mut c) = self.load(&child).await {
                    progress |= self.step_loaded(&mut c).await? > 0;
                    let p = self.work_loaded(&mut c).await?;
                    progress |= p.settled > 0;
                    for x in p.children {
                        if !children.contains(&x) {
                            children.push(x);
                        }
                    }
                }
            }
            if loaded.state.header.status != state::Status::Running {
                break;
            }
            if progress {
                continue;
            }
            // Children may have settled: look again before sleeping.
            if !children.is_empty() && self.work_loaded(&mut loaded).await?.settled > 0 {
                continue;
            }
            if !wait {
                break;
            }
            let next = self.next_deadline(&loaded.state, &children).await;
            let Some(next) = next else { break };
            let sleep = next.saturating_sub(now_ms()).clamp(5, WAIT_SLEEP_MS_MAX);
            mark = self.applied_mark(id, mark, sleep).await?;
            loaded = self.load(id).await?;
        }
        let h = &loaded.state.header;
        Ok(RunReport {
            id: h.id.clone(),
            workflow: h.workflow.clone(),
            iterations,
            status: h.status,
            terminal: h.terminal.clone(),
            reason: h.reason.clone(),
            blocked: blocked_effects(&loaded.state),
        })
    }

    /// Wait until the cell holding instance `id`'s rows applies past `mark` (an effect
    /// settled by a worker or executor, mail, a signal), or `sleep_ms` passes (a timer, a
    /// lease wait, work on another cell); the answer is the mark for the next wait, taken
    /// before the reads that follow it. A server that cannot wake the caller leaves a
    /// plain sleep.
    async fn applied_mark(&self, id: &str, mark: u64, sleep_ms: u64) -> Result<u64> {
        let key = super::key(&["o/", &super::tag(id)]);
        match self.fabric.wait_change(key, mark, sleep_ms).await {
            Ok(Some(index)) => Ok(index),
            // Nothing can wake this caller, or its waits are all taken (a server bounds
            // them per principal): the read after the sleep still sees every change.
            Ok(None) | Err(FabricError::Unavailable(_)) => {
                tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
                Ok(mark)
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn next_deadline(&self, st: &State, children: &[String]) -> Option<u64> {
        let mut next = st
            .effects
            .values()
            .filter(|e| e.state == EffectState::Queued)
            .map(|e| e.not_before_ms)
            .min();
        let running = st
            .effects
            .values()
            .filter(|e| e.state == EffectState::Running)
            .filter_map(|e| e.run.as_ref().map(|r| r.1))
            .min();
        next = match (next, running) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if self.listens_for_mail(st).await {
            let look = now_ms() + crate::limits::MAIL_WAIT_LOOK_MS;
            next = Some(next.map_or(look, |n| n.min(look)));
        }
        for child in children {
            if let Ok(c) = self.load(child).await
                && !c.state.header.status.is_terminal()
            {
                let poll = now_ms() + 50;
                next = Some(next.map_or(poll, |n| n.min(poll)));
            }
        }
        next
    }

    /// Who owns instance `id`, as the fabric's board keeps it (the principal whose first
    /// commit created it); `None` for an instance the store knows no owner of.
    pub async fn owner(&self, id: &str) -> Result<Option<Owner>> {
        let key = super::key(&["o/", &super::tag(id)]);
        let Some(entry) = self.fabric.engine_get(key).await? else {
            return Ok(None);
        };
        let row: Value = serde_json::from_slice(&entry.value).map_err(|e| {
            super::RuntimeError::Invalid(format!("owner of {id} is unreadable: {e}"))
        })?;
        match (row["kind"].as_str(), row["name"].as_str()) {
            (Some("operator"), _) => Ok(Some(Owner::Operator)),
            (Some("agent"), Some(name)) => Ok(Some(Owner::Agent(name.to_string()))),
            _ => Err(super::RuntimeError::Invalid(format!(
                "owner of {id} is unreadable: {row}"
            ))),
        }
    }

    /// Every instance, in id order.
    pub async fn instances(&self) -> Result<Vec<InstanceRow>> {
        let rows = super::scan_all(self.fabric.as_ref(), b"i/").await?;
        rows.into_iter()
            .map(|(k, e)| {
                serde_json::from_slice(&e.value).map_err(|err| {
                    let k = String::from_utf8_lossy(&k);
                    super::RuntimeError::Invalid(format!("index row {k} is unreadable: {err}"))
                })
            })
            .collect()
    }

    /// Instances that may have work (`w/` markers).
    pub async fn with_work(&self) -> Result<Vec<String>> {
        let rows = super::scan_all(self.fabric.as_ref(), b"w/").await?;
        Ok(rows
            .into_iter()
            .map(|(k, _)| super::untag(&String::from_utf8_lossy(&k[2..])).to_string())
            .collect())
    }

    /// One pass of `whip worker --all`: step and work every instance with work that no
    /// other daemon is stepping (a short stepper lease per instance). Returns progress.
    pub async fn work_all_once(&self) -> Result<usize> {
        let mut progress = 0;
        for id in self.with_work().await? {
            let lease = ResourceId {
                owner: "whip".into(),
                name: "stepper".into(),
                key: id.clone(),
            };
            let request = LeaseRequest {
                lease: lease.clone(),
                holder: self.worker_id.clone(),
                slots: 1,
                ttl_ms: 30_000,
                wait_ms: 0,
            };
            let idem = super::fresh_id("stp_");
            if !matches!(
                self.home.lease_acquire(request, idem).await?,
                Outcome::LeaseHeld { .. }
            ) {
                continue;
            }
            let result = async {
                let owned = self.for_owner(&id).await?;
                let engine = owned.as_ref().unwrap_or(self);
                let mut loaded = engine.load(&id).await?;
                let mut n = engine.step_loaded(&mut loaded).await?;
                // A step follows the pass: the round it would run first rides the record.
                n += engine.work_then_round(&mut loaded).await?.settled;
                n += engine.step_loaded(&mut loaded).await?;
                Result::Ok(n)
            }
            .await;
            let idem = super::fresh_id("stp_");
            self.home
                .lease_release(lease, self.worker_id.clone(), idem)
                .await?;
            match result {
                Ok(n) => progress += n,
                Err(super::RuntimeError::Invalid(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(progress)
    }

    /// `pause`, `resume` or `cancel`: returns the event sequence of the transition.
    pub async fn transition(&self, id: &str, to: state::Status) -> Result<u64> {
        for _ in 0..super::CONFLICT_RETRIES_MAX {
            let mut loaded = self.load(id).await?;
            let from = loaded.state.header.status;
            if !from.may_become(to) {
                return invalid(format!("cannot transition instance from {from} to {to}"));
            }
            let mut draft = Draft::new(&loaded.state, now_ms());
            draft.emit(
                EventKind::InstanceTransitioned,
                json!({"from": from, "to": to, "by": "operator"}),
            );
            if to == state::Status::Cancelled {
                let open: Vec<String> = draft
                    .state
                    .effects
                    .values()
                    .filter(|e| !e.state.settled())
                    .map(|e| e.id.clone())
                    .collect();
                for e in open {
                    draft.emit(
                        EventKind::EffectCancelled,
                        json!({"id": e, "reason": "instance cancelled"}),
                    );
                }
            }
            if self.commit(&mut loaded, draft).await? {
                if to == state::Status::Cancelled {
                    self.after_terminal_of(&loaded.state).await?;
                }
                return Ok(loaded.state.header.last_seq);
            }
        }
        invalid(format!(
            "instance {id} is too busy to transition, try again"
        ))
    }

    /// Move a failed or timed-out effect back to the queue with a new attempt.
    pub async fn retry(&self, id: &str, effect: &str) -> Result<u64> {
        for _ in 0..super::CONFLICT_RETRIES_MAX {
            let mut loaded: Loaded = self.load(id).await?;
            if loaded.state.header.status.is_terminal() {
                return invalid(format!(
                    "instance {id} is {}; its effects cannot be retried",
                    loaded.state.header.status
                ));
            }
            let Some(e) = loaded.state.effects.get(effect).cloned() else {
                return invalid(format!("instance {id} has no effect {effect}"));
            };
            if !e.state.unsuccessful() {
                return invalid(format!(
                    "effect {effect} is {}; only failed or timed_out effects can be retried",
                    e.state
                ));
            }
            let mut draft = Draft::new(&loaded.state, now_ms());
            draft.emit(
                EventKind::EffectRetried,
                json!({"id": effect, "attempt": e.attempt + 1, "by": "operator"}),
            );
            // The rule's continuations on the effect observe the new attempt's outcome:
            // the branch that was dropped when the effect failed can still run.
            let observers: Vec<String> = loaded
                .state
                .conts
                .values()
                .filter(|c| c.effect == effect && c.state != ContState::Pending)
                .map(|c| c.id.clone())
                .collect();
            for cont in observers {
                draft.emit(
                    EventKind::AfterRevived,
                    json!({"id": cont, "effect": effect}),
                );
            }
            if self.commit(&mut loaded, draft).await? {
                return Ok(loaded.state.header.last_seq);
            }
        }
        invalid(format!("instance {id} is too busy, try again"))
    }

    /// Registered ledgers as `(owner, name)`, from the programs that declared them.
    pub async fn ledgers(&self) -> Result<Vec<(String, String)>> {
        let rows = super::scan_all(self.fabric.as_ref(), b"g/ledger/").await?;
        let mut out = Vec::new();
        for (k, _) in rows {
            let text = String::from_utf8_lossy(&k["g/ledger/".len()..]).to_string();
            if let Some((owner, name)) = text.rsplit_once('/') {
                out.push((owner.to_string(), name.to_string()));
            }
        }
        Ok(out)
    }
}

/// The `i/` key of an instance (for tests).
pub fn index_key(id: &str) -> Vec<u8> {
    key(&["i/", &super::tag(id)])
}

/// The principal that owns an instance: it (and the operator) may read and operate it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The operator (or the local user of an embedded store).
    Operator,
    /// An agent, by name.
    Agent(String),
}

impl Owner {
    /// How status output names the owner: the agent's name, or `operator` (no agent may
    /// take that name).
    pub fn name(&self) -> &str {
        match self {
            Owner::Operator => "operator",
            Owner::Agent(name) => name,
        }
    }
}
