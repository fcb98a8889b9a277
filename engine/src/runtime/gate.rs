//! The gates a worker pass applies to the effects it may claim, before it claims any: what
//! blocks an effect (decided here, as data), and the one place a block is recorded.
//!
//! - **Dependency** (schedule time): an effect whose [`Effect::depends_on`] has not settled
//!   is `blocked_by_dependency`, category `dependency`. Once that effect settles, the claim
//!   hands the waiting one what it produced ([`settled_args`]).
//! - **The compute plane** (binding time, `exec`): [`crate::executor::effect::gate`]
//!   (`provider_config`, `credentials`, `provider_health`).
//! - **Admission** (binding time, `invoke`): the work registry admits the child instance
//!   before the claim. A population limit that refuses it (the parent's children, the
//!   cell's or the fabric's entries, the owner's share) is `capacity`
//!   (`blocked_by_capacity`): there is room again once other work ends. The depth limit is
//!   `enforcement` (`blocked`): the operator's policy on lineages, which only a change of the
//!   limits lifts.
//!
//! A block is recorded as one `effect.blocked` event when a pass first observes it (a new
//! state or a new reason), never again for the same one. Every pass evaluates the gates
//! again, so once the cause is gone a pass claims the effect and its `effect.run_started`
//! ends the block: nobody queues it again by hand. A refused admission is asked again when
//! the parent instance changed since, or after [`ADMISSION_RETRY_MS`], not on every pass, so
//! a long block does not flood the registry's audit ledger.
//!
//! - **Profile** (schedule time, `agent.tell`): a turn of an agent whose profile is not
//!   registered is `blocked_by_profile` ([`super::agent::profile_block`]).
//! - **Coercion providers** (binding time, `schema.coerce`): the provider's own
//!   [`super::provider::Provider::admit`] (`provider_config`, `credentials`,
//!   `provider_health`: the HTTP backends and the model broker, `runtime::egress`).
//! - **Messaging** (binding time, `send via` a channel of provider `desktop`, or `local`
//!   away from the embedded store): `provider_config` ([`super::messaging::send_block`]).
//! - **Capacity** (`agent.tell`): decided inside the claim's guarded commit, not here
//!   ([`super::agent::capacity_block`]), so the count and the start are one transaction.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::json;
use whip_fabric::{FabricClient, WorkAnswer};

use super::effect::{Args, BlockCategory, Held, PolicyBlock, Upstream};
use super::state::{Effect, EffectKind, EffectState, EventKind, State};
use super::worker::child_id;
use super::{CONFLICT_RETRIES_MAX, Draft, Engine, Loaded, Result, fresh_id};
use crate::limits::{ADMISSION_RETRY_MS, ADMISSION_TRIES_KEPT_MAX};

/// What the gates let through: the effects to claim, and the registry entries admitted for
/// the `invoke` effects among them.
#[derive(Debug, Default)]
pub(crate) struct Gated {
    /// The effects the pass claims.
    pub(crate) ids: Vec<String>,
    /// Effect → the child's registry entry.
    pub(crate) admitted: HashMap<String, String>,
}

/// What the admission gate made of one `invoke`.
enum Admit {
    /// Admitted: the child's entry.
    Entry(String),
    /// Refused.
    Blocked(PolicyBlock),
    /// Refused lately and nothing changed since: not asked this pass.
    NotDue,
    /// An answer the gate does not decide on: the start asks the registry itself.
    Undecided,
}

/// The dependency gate of `e` in `st`: a block while the effect it acts on has not settled.
pub fn dependency_block(e: &Effect, st: &State) -> Option<PolicyBlock> {
    let dep = st.effects.get(e.depends_on.as_deref()?)?;
    if dep.state.settled() {
        return None;
    }
    let binding = dep
        .binding
        .as_deref()
        .map_or(String::new(), |b| format!(" `{b}`"));
    let detail = format!("waits for {} {}{binding} to settle", dep.kind(), dep.id);
    Some(PolicyBlock::new(BlockCategory::Dependency, detail))
}

/// What the work registry refusing a child's admission by `limit` (its code), with
/// `reason` (the limit and its numbers), means for the `invoke` effect that asked.
pub fn admission_block(limit: &str, reason: &str) -> PolicyBlock {
    use whip_fabric::work::WorkLimit as L;
    let population = [L::Children, L::Cell, L::Fabric, L::Owner]
        .iter()
        .any(|l| l.code() == limit);
    let category = match population {
        true => BlockCategory::Capacity,
        false => BlockCategory::Enforcement,
    };
    PolicyBlock::new(category, format!("work admission refused: {reason}"))
}

/// The arguments an effect that waited for its dependency runs with, once that one settled:
/// a `finish`, or a `release` / `renew` of a claim, carries what the claim held (nothing
/// when the claim did not succeed). `None`: the arguments stay as they are.
pub fn settled_args(e: &Effect, st: &State) -> Option<Args> {
    let dep = st.effects.get(e.depends_on.as_deref()?)?;
    if dep.state != EffectState::Completed {
        return None;
    }
    let held: Held = serde_json::from_value(dep.output.clone()?).ok()?;
    let mut args = e.args.clone();
    let slot = match &mut args {
        Args::Finish(f) => &mut f.held,
        Args::Release(Upstream::Claim(c)) | Args::Renew(Upstream::Claim(c)) => &mut c.held,
        _ => return None,
    };
    if slot.is_some() {
        return None;
    }
    *slot = Some(held);
    Some(args)
}

impl<F: FabricClient> Engine<F> {
    /// Apply the gates to `ids` (the effects ready now, in id order): record the blocks first
    /// observed, and let through at most `concurrency` effects.
    pub(crate) async fn gate(&self, loaded: &mut Loaded, ids: Vec<String>) -> Result<Gated> {
        let st = &loaded.state;
        let mut blocks = Vec::new();
        let mut open = Vec::new();
        for id in ids {
            let e = &st.effects[&id];
            let block = dependency_block(e, st)
                .or_else(|| super::agent::profile_block(e))
                .or_else(|| self.messaging_block(e));
            match block {
                Some(block) => blocks.push((id, block)),
                None => open.push(id),
            }
        }
        open.truncate(self.config.concurrency.max(1));
        blocks.extend(self.exec_blocks(st, &open).await);
        blocks.extend(self.provider_blocks(st, &open).await);
        let mut gated = Gated::default();
        let mut refused = Vec::new();
        for id in open {
            let e = &st.effects[&id];
            if blocks.iter().any(|(b, _)| *b == id) {
                continue;
            }
            if e.kind() != EffectKind::Invoke {
                gated.ids.push(id);
                continue;
            }
            match self.admit(st, e).await? {
                Admit::Entry(entry) => {
                    gated.admitted.insert(id.clone(), entry);
                    gated.ids.push(id);
                }
                Admit::Undecided => gated.ids.push(id),
                Admit::Blocked(block) => {
                    refused.push(try_key(st, &id));
                    blocks.push((id, block));
                }
                Admit::NotDue => {}
            }
        }
        self.record_blocks(loaded, &blocks).await?;
        let seq = loaded.state.header.last_seq;
        let mut tries = self.admission_tries.lock().expect("admission lock");
        if tries.len() + refused.len() > ADMISSION_TRIES_KEPT_MAX {
            tries.clear();
        }
        for key in refused {
            tries.insert(key, (Instant::now(), seq));
        }
        Ok(gated)
    }

    /// The coercions and turns among `ids` whose provider cannot run them now (binding,
    /// credential, the broker's health: [`super::provider::Provider::admit`],
    /// [`super::provider::Provider::admit_turn`]).
    async fn provider_blocks(&self, st: &State, ids: &[String]) -> Vec<(String, PolicyBlock)> {
        let mut blocks = Vec::new();
        for id in ids {
            let block = match &st.effects[id].args {
                Args::SchemaCoerce(c) => self.provider.admit(c).await,
                Args::AgentTell(t) => self.provider.admit_turn(t).await,
                _ => None,
            };
            if let Some(block) = block {
                blocks.push((id.clone(), block));
            }
        }
        blocks
    }

    /// A send through a messaging provider that cannot send from this worker.
    fn messaging_block(&self, e: &Effect) -> Option<PolicyBlock> {
        match &e.args {
            Args::MessageSend(a) | Args::MessageAsk(a) => {
                super::messaging::send_block(a, self.local_messaging.as_deref())
            }
            _ => None,
        }
    }

    /// The `exec` effects among `ids`, each with the compute plane's block when its binding
    /// is broken (one health call for the pass).
    async fn exec_blocks(&self, st: &State, ids: &[String]) -> Vec<(String, PolicyBlock)> {
        let execs: Vec<&String> = ids
            .iter()
            .filter(|id| st.effects[*id].kind() == EffectKind::Exec)
            .collect();
        if execs.is_empty() {
            return Vec::new();
        }
        match crate::executor::effect::gate(&self.executor).await {
            Ok(()) => Vec::new(),
            Err(block) => execs
                .into_iter()
                .map(|id| (id.clone(), block.clone()))
                .collect(),
        }
    }

    /// Ask the work registry to admit the child of `invoke` effect `e`. The first ask uses
    /// the child's own key (a retried start gets the same entry); a blocked effect asks
    /// again under a fresh key (the registry remembers its refusal under the old one), when
    /// its instance changed since the last refusal or that is [`ADMISSION_RETRY_MS`] ago.
    async fn admit(&self, st: &State, e: &Effect) -> Result<Admit> {
        let key = try_key(st, &e.id);
        let retry = e.state.blocked();
        if retry {
            let tries = self.admission_tries.lock().expect("admission lock");
            let wait = Duration::from_millis(ADMISSION_RETRY_MS);
            let recent = tries
                .get(&key)
                .is_some_and(|(at, seq)| *seq == st.header.last_seq && at.elapsed() < wait);
            if recent {
                return Ok(Admit::NotDue);
            }
        }
        let child = child_id(&st.header.id, e);
        let idem = match retry {
            true => format!("{child}/work/{}", fresh_id("t")),
            false => format!("{child}/work"),
        };
        let answer = self.admission(st.header.work.clone(), idem).await?;
        Ok(match answer {
            WorkAnswer::Admitted { id } => {
                self.admission_tries
                    .lock()
                    .expect("admission lock")
                    .remove(&key);
                Admit::Entry(id)
            }
            WorkAnswer::Refused { limit, reason } => {
                Admit::Blocked(admission_block(&limit, &reason))
            }
            _ => Admit::Undecided,
        })
    }

    /// Record each block that is new for its effect (a new state or reason) as an
    /// `effect.blocked` event; an effect that settled or started meanwhile is left alone.
    async fn record_blocks(
        &self,
        loaded: &mut Loaded,
        blocks: &[(String, PolicyBlock)],
    ) -> Result<()> {
        for _ in 0..CONFLICT_RETRIES_MAX {
            let mut draft = Draft::new(&loaded.state, super::now_ms());
            for (id, block) in blocks {
                let Some(e) = draft.state.effects.get(id) else {
                    continue;
                };
                let moved_on = e.state.settled() || e.state == EffectState::Running;
                let known = e.state == block.state() && e.policy_block.as_ref() == Some(block);
                if moved_on || known {
                    continue;
                }
                let e = e.clone();
                block_in(&mut draft, &e, block);
            }
            if draft.events.is_empty() || self.commit(loaded, draft).await? {
                return Ok(());
            }
            *loaded = self.load(&loaded.state.header.id).await?;
        }
        Ok(())
    }
}

/// Record `block` of effect `e` in `draft` as an `effect.blocked` event, unless `e` is
/// already blocked for that reason (a block is recorded once, when first observed).
pub(crate) fn block_in(draft: &mut Draft, e: &Effect, block: &PolicyBlock) {
    if e.state == block.state() && e.policy_block.as_ref() == Some(block) {
        return;
    }
    draft.emit(
        EventKind::EffectBlocked,
        json!({"id": e.id, "state": block.state(), "policy_block": block}),
    );
}

/// The key of an effect's admission tries in this process.
fn try_key(st: &State, effect: &str) -> String {
    format!("{}/{effect}", st.header.id)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::runtime::effect::{FinishArgs, LeaseArgs};

    fn effect(id: &str, args: Args, state: EffectState) -> Effect {
        let mut e = Effect::queued(id.into(), format!("r/{id}"), "r".into(), args);
        e.state = state;
        e
    }

    fn claim(state: EffectState, output: Option<Value>) -> Effect {
        let args = Args::decode(
            EffectKind::Claim,
            json!({"issue": {"id": "WS-1"}, "ttl_ms": 5}),
        );
        let mut e = effect("x000001", args, state);
        e.binding = Some("held".into());
        e.output = output;
        e
    }

    fn finish() -> Effect {
        let args = Args::Finish(FinishArgs {
            claim: Some("x000001".into()),
            binding: "held".into(),
            summary: Value::Null,
            held: None,
        });
        let mut e = effect("x000002", args, EffectState::Queued);
        e.depends_on = Some("x000001".into());
        e
    }

    fn state(effects: Vec<Effect>) -> State {
        let mut st = State::default();
        for e in effects {
            st.effects.insert(e.id.clone(), e);
        }
        st
    }

    #[test]
    fn a_dependency_blocks_until_it_settles_then_hands_over_what_it_held() {
        let held = json!({"outcome": "claimed", "issue": "WS-1", "id": "WS-1", "fence": 7,
            "deadline_ms": 9, "reentered": false});
        let waiting = state(vec![claim(EffectState::Running, None), finish()]);
        let block = dependency_block(&waiting.effects["x000002"], &waiting).unwrap();
        assert_eq!(
            serde_json::to_value(&block).unwrap(),
            json!({"category": "dependency", "detail": "waits for claim x000001 `held` to settle"})
        );
        assert_eq!(block.state(), EffectState::BlockedByDependency);
        assert_eq!(settled_args(&waiting.effects["x000002"], &waiting), None);

        let done = state(vec![claim(EffectState::Completed, Some(held)), finish()]);
        assert_eq!(dependency_block(&done.effects["x000002"], &done), None);
        let Some(Args::Finish(f)) = settled_args(&done.effects["x000002"], &done) else {
            panic!("a finish after its claim carries what the claim held");
        };
        assert_eq!(f.held.unwrap().fence, Some(7));

        let lost = json!({"outcome": "contended", "issue": "WS-1", "error": "taken"});
        let failed = state(vec![claim(EffectState::Failed, Some(lost)), finish()]);
        assert_eq!(dependency_block(&failed.effects["x000002"], &failed), None);
        assert_eq!(settled_args(&failed.effects["x000002"], &failed), None);
    }

    #[test]
    fn an_effect_without_a_dependency_or_a_claim_is_never_gated_here() {
        let lease = LeaseArgs {
            owner: "o".into(),
            name: "n".into(),
            key: "k".into(),
            slots: 1,
            ttl_ms: 1,
            wait_ms: 0,
            wait_until_ms: 0,
            until_ttl: false,
        };
        let mut release = effect(
            "x000002",
            Args::Release(Upstream::Acquire(lease)),
            EffectState::Queued,
        );
        let st = state(vec![release.clone()]);
        assert_eq!(dependency_block(&release, &st), None);
        release.depends_on = Some("x000001".into());
        let acquired = effect(
            "x000001",
            Args::decode(EffectKind::Timer, json!({"seconds": 1})),
            EffectState::Completed,
        );
        let st = state(vec![acquired, release.clone()]);
        assert_eq!(settled_args(&release, &st), None, "a lease needs nothing");
    }

    #[test]
    fn population_limits_are_capacity_and_the_depth_limit_is_enforcement() {
        for limit in ["children", "cell", "fabric", "owner"] {
            let block = admission_block(limit, &format!("{limit} limit: full"));
            assert_eq!(block.category, BlockCategory::Capacity, "{limit}");
            assert_eq!(block.state(), EffectState::BlockedByCapacity);
            assert_eq!(
                block.detail,
                format!("work admission refused: {limit} limit: full")
            );
        }
        let deep = admission_block("depth", "depth limit: 1, the limit is 0");
        assert_eq!(
            (deep.category, deep.state()),
            (BlockCategory::Enforcement, EffectState::Blocked)
        );
    }
}
