//! The worker: claims ready effects that pass the gates ([`super::gate`]: blocked ones are
//! recorded and left for a later pass) under a fenced run lease (a `running` row with a
//! deadline, written by a guarded commit), runs them concurrently with a bound, and
//! records their terminals. Coordination effects pass a stable idempotency key (instance,
//! effect, attempt) so a retried or reclaimed run never charges, appends or acquires twice.

use futures::StreamExt;
use serde_json::{Value, json};
use whip_fabric::{AppendRequest, ConsumeRequest, FabricClient, LeaseRequest, Outcome, ResourceId};

use super::effect::{AppendArgs, ConsumeArgs, InvokeArgs, LeaseArgs, Upstream};
use super::program::fnv64;
use super::state::{self, Args, Effect, EffectKind, EffectState, EventKind, Header, Terminal};
use super::{CONFLICT_RETRIES_MAX, Draft, Engine, Loaded, Result, key, now_ms};
use crate::limits::LEASE_WAIT_POLL_MS;

/// What running one effect produced.
#[derive(Debug, Clone)]
pub(crate) enum Ran {
    Terminal {
        state: Terminal,
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

impl Ran {
    /// Completed with `output`.
    pub(crate) fn completed(output: Value) -> Ran {
        Ran::Terminal {
            state: Terminal::Completed,
            output,
        }
    }

    /// Failed with `{"error": reason}`.
    pub(crate) fn failed(reason: impl Into<String>) -> Ran {
        Ran::Terminal {
            state: Terminal::Failed,
            output: json!({"error": reason.into()}),
        }
    }

    /// Failed with `{"error": message, "reason": reason}` (a stable reason code).
    pub(crate) fn refused(reason: &str, message: impl Into<String>) -> Ran {
        Ran::Terminal {
            state: Terminal::Failed,
            output: json!({"error": message.into(), "reason": reason}),
        }
    }
}

/// What a worker pass did.
#[derive(Debug, Default, Clone)]
pub struct Pass {
    /// Effects whose terminal this pass recorded.
    pub settled: usize,
    /// Child instances started or still running.
    pub children: Vec<String>,
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

/// The fabric resource of a lease.
pub(crate) fn lease_resource(a: &LeaseArgs) -> ResourceId {
    ResourceId {
        owner: a.owner.clone(),
        name: a.name.clone(),
        key: a.key.clone(),
    }
}

/// Kinds whose gates read only the instance's own state (no provider, executor, channel
/// or admission to ask): the ones the start may claim ahead ([`Engine::claim_ahead`]).
fn claimable_ahead(kind: EffectKind) -> bool {
    matches!(
        kind,
        EffectKind::Acquire
            | EffectKind::Release
            | EffectKind::Renew
            | EffectKind::Consume
            | EffectKind::Append
            | EffectKind::FileIssue
            | EffectKind::Claim
            | EffectKind::Finish
            | EffectKind::Vote
    )
}

fn ready(e: &Effect, now: u64) -> bool {
    match e.state {
        EffectState::Queued => e.not_before_ms <= now,
        // A block of any kind: every pass looks again (the gates decide).
        state if state.blocked() => true,
        // A run whose lease ran out (its worker died) may be reclaimed, but not an `exec`:
        // it is not idempotent, so it waits for `whip recover`.
        EffectState::Running => {
            !matches!(
                e.kind(),
                EffectKind::Invoke | EffectKind::Exec | EffectKind::AgentTell
            ) && e.run.as_ref().is_some_and(|(_, until)| *until <= now)
        }
        _ => false,
    }
}

/// The run lease of a claim at `now`: a child runs until its terminal, an `exec` for its
/// timeout and the answer's margin, anything else for the run lease.
fn lease_until(effect: &Effect, now: u64, run_lease_ms: u64) -> u64 {
    match &effect.args {
        Args::Invoke(_) => u64::MAX,
        Args::Exec(args) => now + args.lease_ms(),
        _ => now + run_lease_ms,
    }
}

#[cfg(feature = "test-hooks")]
/// Test hook (the `test-hooks` feature only): with `WHIP_TEST_CRASH_AFTER_APPLY=1`, the
/// process dies between the cells' apply of a pass's effects and their terminals.
fn crash_after_apply() {
    if std::env::var("WHIP_TEST_CRASH_AFTER_APPLY").is_ok_and(|v| v == "1") {
        std::process::exit(3);
    }
}

impl<F: FabricClient> Engine<F> {
    /// One worker pass over an instance, acting as its owner.
    pub async fn work(&self, id: &str) -> Result<Pass> {
        if let Some(owned) = self.for_owner(id).await? {
            return Box::pin(owned.work(id)).await;
        }
        let mut loaded = self.load(id).await?;
        self.work_loaded(&mut loaded).await
    }

    /// One worker pass over a loaded instance (the copy is kept current).
    pub async fn work_loaded(&self, loaded: &mut Loaded) -> Result<Pass> {
        self.work_pass(loaded, false).await
    }

    /// A worker pass whose record carries the round its results enable, where that is the
    /// round the next step would run first ([`Engine::ride_round`]): for callers that step
    /// right after the pass (`drive`, `work_all_once`).
    pub(crate) async fn work_then_round(&self, loaded: &mut Loaded) -> Result<Pass> {
        self.work_pass(loaded, true).await
    }

    async fn work_pass(&self, loaded: &mut Loaded, ride: bool) -> Result<Pass> {
        let mut pass = Pass::default();
        if loaded.state.header.status != state::Status::Running {
            return Ok(pass);
        }
        if let Some(steered) = self.steered(loaded).await? {
            return Ok(steered);
        }
        let gated = self.ready_now(loaded, now_ms()).await?;
        let (ready_ids, admitted) = (gated.ids, gated.admitted);
        let children: Vec<Effect> = loaded
            .state
            .effects
            .values()
            .filter(|e| e.kind() == EffectKind::Invoke && e.state == EffectState::Running)
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
        let ran = self.run_claimed(loaded, claimed, &admitted, children, ride);
        let ran = ran.await?;
        pass.settled += ran.settled;
        pass.children = ran.children;
        Ok(pass)
    }

    /// Run the effects the start's commit claimed ahead ([`Engine::claim_ahead`]) and
    /// record them, the round they enable riding the record: what a worker pass right after
    /// the start would have done, one commit (its claim) fewer. Effects settled.
    pub(crate) async fn run_ahead(
        &self,
        loaded: &mut Loaded,
        claimed: Vec<(Effect, String)>,
    ) -> Result<usize> {
        let admitted = std::collections::HashMap::new();
        let ran = self.run_claimed(loaded, claimed, &admitted, Vec::new(), true);
        Ok(ran.await?.settled)
    }

    /// Run the claimed effects (at most `concurrency` at once), collect the outcomes of the
    /// running children, and record every terminal.
    async fn run_claimed(
        &self,
        loaded: &mut Loaded,
        claimed: Vec<(Effect, String)>,
        admitted: &std::collections::HashMap<String, String>,
        children: Vec<Effect>,
        ride: bool,
    ) -> Result<Pass> {
        let mut pass = Pass::default();
        let header = loaded.state.header.clone();
        let mut results: Vec<(Effect, String, Ran)> = futures::stream::iter(claimed)
            .map(|(effect, run)| {
                let header = &header;
                let entry = admitted.get(&effect.id).cloned();
                async move {
                    let ran = self.execute(header, &effect, &run, entry).await;
                    (effect, run, ran)
                }
            })
            .buffer_unordered(self.config.concurrency.max(1))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .map(|(e, r, ran)| ran.map(|ran| (e, r, ran)))
            .collect::<Result<_>>()?;
        #[cfg(feature = "test-hooks")]
        if !results.is_empty() {
            crash_after_apply();
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
            if effect.kind() == EffectKind::Invoke && matches!(ran, Ran::Pending) {
                pass.children.push(child_id(&header.id, effect));
            }
        }
        pass.settled += self.record(loaded, results, ride).await?;
        Ok(pass)
    }

    /// Claim, in the start's draft, the effects its round made ready whose gates read only
    /// the instance's own state ([`claimable_ahead`]), so that the start's commit carries
    /// their claims; at most `concurrency`, as a pass would. The caller runs them
    /// ([`Engine::run_ahead`]) once that commit landed; a process that dies first leaves
    /// them to be reclaimed when their run lease lapses, as after any claim.
    pub(crate) fn claim_ahead(&self, draft: &mut Draft, now: u64) -> Vec<(Effect, String)> {
        let st = &draft.state;
        let ids: Vec<String> = st
            .effects
            .values()
            .filter(|e| claimable_ahead(e.kind()) && e.state == EffectState::Queued)
            .filter(|e| e.not_before_ms <= now)
            .filter(|e| super::gate::dependency_block(e, st).is_none())
            .map(|e| e.id.clone())
            .take(self.config.concurrency.max(1))
            .collect();
        let mut fired = 0;
        ids.iter()
            .filter_map(|id| self.claim_in(draft, id, now, &mut fired))
            .collect()
    }

    /// Claim effect `id` in `draft` if it is ready at `now`: its run (`Some`), or `None`
    /// for a due timer completed on the spot (counted in `fired`), a capacity block
    /// recorded, or an effect not ready.
    fn claim_in(
        &self,
        draft: &mut Draft,
        id: &str,
        now: u64,
        fired: &mut usize,
    ) -> Option<(Effect, String)> {
        let effect = draft.state.effects.get(id).cloned()?;
        if !ready(&effect, now) {
            return None;
        }
        // The capacity count and the start are one guarded commit (see `agent`).
        if let Some(block) = super::agent::capacity_block(&effect, &draft.state) {
            super::gate::block_in(draft, &effect, &block);
            return None;
        }
        let run = draft.next_id(3, "r");
        let until = lease_until(&effect, now, self.config.run_lease_ms);
        let mut started = json!({"id": id, "run": run, "worker": self.worker_id,
            "lease_until_ms": until, "attempt": effect.attempt});
        // An effect that waited for its dependency runs on what that one produced.
        if let Some(args) = super::gate::settled_args(&effect, &draft.state) {
            started["args"] = args.to_value();
        }
        draft.emit(EventKind::EffectRunStarted, started);
        let effect = draft.state.effects[id].clone();
        if effect.kind() == EffectKind::Timer {
            draft.emit(
                EventKind::EffectTerminal,
                json!({"id": id, "run": run, "state": "completed",
                    "output": {"outcome": "fired"}}),
            );
            *fired += 1;
            return None;
        }
        Some((effect, run))
    }

    /// The parent (or the operator) steers the instance through its registry entry: a
    /// pass ends here while it is paused, and a stop cancels it (`Some` then).
    async fn steered(&self, loaded: &mut Loaded) -> Result<Option<Pass>> {
        match self.supervision(&loaded.state.header).await? {
            whip_fabric::work::Signal::Run => Ok(None),
            whip_fabric::work::Signal::Pause => Ok(Some(Pass::default())),
            whip_fabric::work::Signal::Stop => {
                let id = loaded.state.header.id.clone();
                self.transition(&id, state::Status::Cancelled).await?;
                *loaded = self.load(&id).await?;
                let mut pass = Pass::default();
                pass.settled += 1;
                Ok(Some(pass))
            }
        }
    }

    /// The effects a pass may claim now, at most `concurrency` of them, once they passed
    /// the gates ([`super::gate`]): a block is recorded when first observed, and a blocked
    /// effect is left out of this pass.
    async fn ready_now(&self, loaded: &mut Loaded, now: u64) -> Result<super::gate::Gated> {
        let ids: Vec<String> = loaded
            .state
            .effects
            .values()
            .filter(|e| ready(e, now))
            .map(|e| e.id.clone())
            .collect();
        self.gate(loaded, ids).await
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
            let mut draft = Draft::new(&loaded.state, now_ms());
            let mut fired = 0;
            let claimed: Vec<(Effect, String)> = ids
                .iter()
                .filter_map(|id| self.claim_in(&mut draft, id, now, &mut fired))
                .collect();
            if self.commit(loaded, draft).await? {
                return Ok((claimed, fired));
            }
            *loaded = self.load(&loaded.state.header.id).await?;
        }
        Ok((Vec::new(), 0))
    }

    /// Record terminals of our runs; a run that lost its lease records nothing. With
    /// `ride`, the round the results enable rides the same commit.
    async fn record(
        &self,
        loaded: &mut Loaded,
        results: Vec<(Effect, String, Ran)>,
        ride: bool,
    ) -> Result<usize> {
        if results.is_empty() {
            return Ok(0);
        }
        for _ in 0..CONFLICT_RETRIES_MAX {
            let mut draft = Draft::new(&loaded.state, now_ms());
            let mut settled = 0;
            for (effect, run, ran) in &results {
                let current = draft.state.effects.get(&effect.id);
                let ours = current.is_some_and(|e| {
                    e.state == EffectState::Running && e.run.as_ref().map(|r| &r.0) == Some(run)
                });
                if !ours {
                    continue;
                }
                match ran {
                    Ran::Terminal { state, output } => {
                        settled += 1;
                        draft.emit(
                            EventKind::EffectTerminal,
                            json!({"id": effect.id, "run": run, "state": state, "output": output}),
                        );
                        super::agent::settled(&mut draft, &effect.id);
                    }
                    Ran::Waiting { not_before_ms } => draft.emit(
                        EventKind::EffectWaiting,
                        json!({"id": effect.id, "run": run, "pass": effect.pass + 1,
                            "not_before_ms": not_before_ms}),
                    ),
                    Ran::Asked { sent, until_ms } => draft.emit(
                        EventKind::EffectWaiting,
                        json!({"id": effect.id, "run": run, "pass": effect.pass + 1,
                            "not_before_ms": until_ms, "output": {"sent": sent}}),
                    ),
                    Ran::Voting {
                        proposal,
                        not_before_ms,
                    } => draft.emit(
                        EventKind::EffectWaiting,
                        json!({"id": effect.id, "run": run, "pass": effect.pass + 1,
                            "not_before_ms": not_before_ms, "output": {"proposal": proposal}}),
                    ),
                    Ran::Pending => {}
                }
            }
            let ended = ride && self.ride_round(&mut draft).await?;
            if self.commit(loaded, draft).await? {
                if ended {
                    self.after_terminal_of(&loaded.state).await?;
                }
                return Ok(settled);
            }
            *loaded = self.load(&loaded.state.header.id).await?;
        }
        Ok(0)
    }

    async fn child_outcome(&self, child: &str) -> Result<Option<Ran>> {
        let Some(entry) = self
            .fabric
            .engine_get(key(&["e/", &super::tag(child), "/s/h"]))
            .await?
        else {
            return Ok(None);
        };
        let h = serde_json::from_slice::<Header>(&entry.value).map_err(|e| {
            super::RuntimeError::Invalid(format!("child {child}: its header is unreadable: {e}"))
        })?;
        if !h.status.is_terminal() {
            return Ok(None);
        }
        let payload = h.terminal.map_or(Value::Null, |t| t.1);
        let state = if h.status == state::Status::Completed {
            Terminal::Completed
        } else {
            Terminal::Failed
        };
        Ok(Some(Ran::Terminal {
            state,
            output: payload,
        }))
    }

    /// A counter consume: `ok` or `over` with the period's numbers.
    async fn execute_consume(&self, a: &ConsumeArgs, idem: String) -> Result<Ran> {
        let request = ConsumeRequest {
            counter: ResourceId {
                owner: a.owner.clone(),
                name: a.name.clone(),
                key: a.key.clone(),
            },
            amount: a.amount,
            cap: a.cap,
            reset: a.reset.into(),
            timezone: a.timezone.clone(),
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
                    return Ok(Ran::failed(format!("unexpected counter outcome {other:?}")));
                }
            };
        Ok(Ran::completed(
            json!({"outcome": outcome, "consumed": consumed, "remaining": remaining,
                "period": period}),
        ))
    }

    /// A lease acquire: `held` or `contended`, or (with `wait`) another try on a later pass.
    async fn execute_acquire(
        &self,
        ins: String,
        e: &Effect,
        a: &LeaseArgs,
        idem: String,
    ) -> Result<Ran> {
        let now = now_ms();
        let wait_ms = if a.wait_ms > 0 && a.wait_until_ms > now {
            a.wait_until_ms - now
        } else {
            0
        };
        let request = LeaseRequest {
            lease: lease_resource(a),
            holder: ins,
            slots: a.slots,
            ttl_ms: a.ttl_ms,
            wait_ms,
        };
        let idem = format!("{idem}/p{}", e.pass);
        Ok(match self.fabric.lease_acquire(request, idem).await? {
            Outcome::LeaseHeld {
                fence,
                expires_at_ms,
                reentered,
            } => Ran::completed(json!({"outcome": "held", "fence": fence,
                "expires_at_ms": expires_at_ms, "reentered": reentered})),
            Outcome::LeaseWaiting { .. } => Ran::Waiting {
                not_before_ms: (now_ms() + LEASE_WAIT_POLL_MS).min(a.wait_until_ms.max(now)),
            },
            Outcome::LeaseContended { holders } => {
                let holders: Vec<&str> = holders.iter().map(|h| h.holder.as_str()).collect();
                Ran::completed(json!({"outcome": "contended", "holders": holders}))
            }
            other => Ran::failed(format!("unexpected lease outcome {other:?}")),
        })
    }

    /// A release or renew of a lease hold.
    async fn execute_lease_end(
        &self,
        kind: EffectKind,
        a: &LeaseArgs,
        ins: String,
        idem: String,
    ) -> Result<Ran> {
        let lease = lease_resource(a);
        let release = kind == EffectKind::Release;
        let outcome = if release {
            self.fabric.lease_release(lease, ins, idem).await?
        } else {
            self.fabric.lease_renew(lease, ins, a.ttl_ms, idem).await?
        };
        Ok(match outcome {
            Outcome::LeaseReleased => Ran::completed(json!({"outcome": "released"})),
            Outcome::LeaseRenewed {
                fence,
                expires_at_ms,
            } => Ran::completed(json!({
                "outcome": "renewed", "fence": fence, "expires_at_ms": expires_at_ms
            })),
            Outcome::LeaseNotHeld if release => Ran::completed(json!({"outcome": "not_held"})),
            other => Ran::failed(format!("lease {kind}: {other:?}")),
        })
    }

    /// A ledger append: `appended` with its sequence.
    async fn execute_append(&self, a: &AppendArgs, ins: String, idem: String) -> Result<Ran> {
        let request = AppendRequest {
            ledger: ResourceId {
                owner: a.owner.clone(),
                name: a.name.clone(),
                key: a.partition.clone(),
            },
            entry: a.entry.to_string().into_bytes(),
            appended_by: ins,
            retain_ms: a.retain_ms,
        };
        Ok(match self.fabric.ledger_append(request, idem).await? {
            Outcome::LedgerAppended { seq } => {
                Ran::completed(json!({"outcome": "appended", "seq": seq}))
            }
            other => Ran::failed(format!("unexpected ledger outcome {other:?}")),
        })
    }

    /// An invoke: start the child (a retried start finds it) under the registry entry the
    /// admission gate took for it; it runs until its terminal.
    async fn execute_invoke(
        &self,
        (header, e): (&Header, &Effect),
        a: &InvokeArgs,
        admitted: Option<String>,
    ) -> Result<Ran> {
        let child = child_id(&header.id, e);
        let program = self.program(&header.program).await?;
        let parent = (header, e.id.as_str());
        let workflow = (a.workflow.as_str(), a.input.clone());
        let started = self
            .start_child(&program, workflow, parent, child, admitted)
            .await;
        match started {
            Ok(_) => Ok(Ran::Pending),
            Err(super::RuntimeError::Invalid(m)) => Ok(Ran::failed(m)),
            Err(other) => Err(other),
        }
    }

    /// Run one effect (claimed as run `run`) against the fabric or the compute plane (an
    /// `invoke` under the registry entry `admitted`). A row whose arguments do not decode
    /// fails with the decoder's message, before anything runs.
    async fn execute(
        &self,
        header: &Header,
        e: &Effect,
        run: &str,
        admitted: Option<String>,
    ) -> Result<Ran> {
        let ins = header.id.clone();
        let idem = format!("{ins}/{}/a{}", e.id, e.attempt);
        Ok(match &e.args {
            Args::Acquire(a) => self.execute_acquire(ins, e, a, idem).await?,
            Args::Exec(a) => {
                let ids = (ins.as_str(), e.id.as_str(), run);
                crate::executor::effect::run(&self.executor, ids, a, now_ms()).await
            }
            Args::FileIssue(_) | Args::Claim(_) | Args::Finish(_) => {
                self.execute_tracker(&ins, e, &idem).await?
            }
            Args::Release(Upstream::Claim(_)) | Args::Renew(Upstream::Claim(_)) => {
                self.execute_tracker(&ins, e, &idem).await?
            }
            Args::Release(Upstream::Acquire(a)) | Args::Renew(Upstream::Acquire(a)) => {
                self.execute_lease_end(e.kind(), a, ins, idem).await?
            }
            Args::Consume(a) => self.execute_consume(a, idem).await?,
            Args::MessageSend(a) | Args::MessageAsk(a) => {
                self.execute_mail(header, e, a, &idem).await?
            }
            Args::Append(a) => self.execute_append(a, ins, idem).await?,
            Args::Vote(a) => self.execute_vote(e, a, &idem).await?,
            Args::Invoke(a) => self.execute_invoke((header, e), a, admitted).await?,
            Args::AgentTell(t) => {
                let ids = super::provider::RunIds { effect: &e.id, run };
                let outcome = within(t.timeout_ms, self.provider.tell(t, &idem)).await;
                super::provider::turn_ran(t, &ids, outcome)
            }
            Args::SchemaCoerce(c) => {
                let ids = super::provider::RunIds { effect: &e.id, run };
                let outcome = within(c.timeout_ms, self.provider.coerce(c, &idem)).await;
                super::provider::coerce_ran(c, &ids, outcome)
            }
            // A timer completes at its claim; one that reaches here was claimed elsewhere.
            Args::Timer(_) => Ran::completed(json!({"outcome": "fired"})),
            Args::Malformed(m) => Ran::refused("malformed_args", m.error.clone()),
        })
    }
}

impl<F: FabricClient> Engine<F> {
    /// Run a tracker effect: file, claim, finish, or release / renew of a claim. A refusal
    /// (stale fence, someone else's claim, an unknown issue) fails the effect.
    async fn execute_tracker(&self, ins: &str, e: &Effect, idem: &str) -> Result<Ran> {
        use super::tracker::IssueOp;
        let (held, op) = match &e.args {
            Args::FileIssue(a) => {
                let filed = self
                    .issue_file(&a.owner, &a.tracker, &a.issue, ins, idem)
                    .await;
                return tracker_ran(filed.map(|i| {
                    json!({"outcome": "filed", "id": i.id, "tracker": i.tracker,
                        "title": i.title, "body": i.body, "labels": i.labels})
                }));
            }
            Args::Claim(a) => return self.execute_claim(ins, a, idem).await,
            Args::Finish(a) => (
                &a.held,
                IssueOp::Finish {
                    summary: a.summary.clone(),
                },
            ),
            Args::Renew(Upstream::Claim(c)) => (&c.held, IssueOp::Renew { ttl_ms: c.ttl_ms }),
            Args::Release(Upstream::Claim(c)) => (&c.held, IssueOp::Release),
            other => {
                return Ok(Ran::failed(format!(
                    "{} is not a tracker effect",
                    other.kind()
                )));
            }
        };
        let kind = e.kind();
        let Some(held) = held else {
            let error =
                format!("{kind} of a claim that holds no issue (the claim did not succeed)");
            return Ok(Ran::refused("not_held", error));
        };
        let applied = self
            .issue_apply(&held.issue, ins, held.fence, op, idem)
            .await;
        tracker_ran(applied.map(|i| {
            json!({"outcome": kind.code(), "issue": i.id, "status": i.status, "fence": i.fence})
        }))
    }

    /// A claim: `claimed` with its fence and deadline; someone else's claim fails it.
    async fn execute_claim(
        &self,
        ins: &str,
        a: &super::effect::ClaimArgs,
        idem: &str,
    ) -> Result<Ran> {
        use super::tracker::ClaimOutcome;
        let claimed = match self.issue_claim(a.issue.id(), ins, a.ttl_ms, idem).await {
            Ok(ClaimOutcome::Claimed { issue, reentered }) => {
                let c = issue.claim.expect("a claimed issue has a claim");
                Ok(
                    json!({"outcome": "claimed", "issue": issue.id, "id": issue.id,
                    "fence": c.fence, "deadline_ms": c.deadline_ms, "reentered": reentered}),
                )
            }
            Ok(ClaimOutcome::Contended { issue }) => {
                let by = issue.claim.map_or_else(|| "nobody".into(), |c| c.claimant);
                return Ok(Ran::Terminal {
                    state: Terminal::Failed,
                    output: json!({"outcome": "contended", "issue": issue.id,
                        "error": format!("issue {} is claimed by {by}", issue.id)}),
                });
            }
            Err(err) => Err(err),
        };
        tracker_ran(claimed)
    }
}

/// A provider's answer, or `timed_out` once `timeout_ms` (the program's `timeout D`) passed.
async fn within(
    timeout_ms: Option<u64>,
    call: futures::future::BoxFuture<'_, super::provider::ProviderOutcome>,
) -> super::provider::ProviderOutcome {
    let Some(ms) = timeout_ms else {
        return call.await;
    };
    match tokio::time::timeout(std::time::Duration::from_millis(ms), call).await {
        Ok(outcome) => outcome,
        Err(_) => super::provider::ProviderOutcome::TimedOut {
            summary: format!("timed out after {}", crate::ir::duration(ms / 1000)),
        },
    }
}

/// A tracker call's answer as a terminal: its output, or its refusal as a failure.
fn tracker_ran(result: Result<Value>) -> Result<Ran> {
    match result {
        Ok(output) => Ok(Ran::completed(output)),
        Err(super::RuntimeError::Invalid(reason)) => Ok(Ran::failed(reason)),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(kind: EffectKind, state: EffectState, lease_until_ms: u64) -> Effect {
        let args = Args::decode(kind, Value::Null);
        let mut e = Effect::queued("x000001".into(), "r/e1@0:started".into(), "r".into(), args);
        e.state = state;
        e.run = Some(("r000001".into(), lease_until_ms));
        e
    }

    #[test]
    fn a_lapsed_exec_run_is_never_reclaimed_and_a_blocked_one_is_looked_at_again() {
        use EffectKind::{Append, Exec, Invoke};
        use EffectState::{Blocked, Completed, Queued, Running};
        let now = 1_000;
        assert!(
            ready(&effect(Append, Running, 999), now),
            "an append is reclaimed"
        );
        assert!(
            !ready(&effect(Append, Running, 1_001), now),
            "its lease still holds"
        );
        assert!(
            !ready(&effect(Exec, Running, 999), now),
            "an exec waits for recover"
        );
        assert!(!ready(&effect(Invoke, Running, 999), now));
        assert!(
            ready(&effect(Exec, Blocked, 0), now),
            "a block is looked at again"
        );
        assert!(!ready(&effect(Exec, Completed, 0), now));
        let mut args = effect(Exec, Queued, 0);
        args.args = Args::decode(
            Exec,
            serde_json::json!({"v": 1, "argv": ["true"], "cwd": null, "env": {},
                "timeout_ms": 5_000}),
        );
        let lease = lease_until(&args, now, 30_000);
        assert_eq!(lease, now + 5_000 + crate::limits::EXEC_ANSWER_MARGIN_MS);
    }
}
