//! Goal: the state machine agrees with a naive model on random command logs. Method:
//! proptest draws sequences of commands over a few keys, leases, holders, counters, ledger
//! partitions, election groups and schedules, with increasing stamps (batches share a time;
//! time sometimes jumps far ahead) and reused idempotency keys. Each outcome must equal the
//! model's; after each step the read views and the next deadline must match too, no lease
//! has more live holders than the most slots it was granted under, no counter passes its
//! cap and no ledger has a gap. Replaying the log on a fresh store must give byte-identical
//! state. proptest prints the shrunk failing log and saves its seed under
//! `proptest-regressions`.

use std::collections::{BTreeMap, VecDeque};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;
use whip_board::access::Caller;
use whip_board::query::{CounterView, LeaseView, LedgerEntryView, ScheduleView};
use whip_board::{
    Command, ElectionLeader, LeaseHolder, MemTxn, Outcome, Query, QueryResult, Request, Reset,
    ResourceId, Stamp, apply, limits::IDEMPOTENCY_WINDOW_MS, query,
};

fn rid(owner: &str, name: &str, key: &str) -> ResourceId {
    ResourceId {
        owner: owner.into(),
        name: name.into(),
        key: key.into(),
    }
}

// ----- the naive model -----

#[derive(Clone, Debug, Default)]
struct MLease {
    slots: u32,
    holders: Vec<LeaseHolder>,
    /// (holder, wait_until_ms, ttl_ms)
    waiters: Vec<(String, u64, u64)>,
}

impl MLease {
    /// Drop the dead and the expired, promote FIFO; returns (removed, expired waiters).
    fn settle(&mut self, now: u64, fence: u64) -> (u32, Vec<String>) {
        let before = self.holders.len();
        self.holders.retain(|h| h.expires_at_ms > now);
        let mut removed = (before - self.holders.len()) as u32;
        let expired: Vec<String> = self
            .waiters
            .iter()
            .filter(|w| w.1 <= now)
            .map(|w| w.0.clone())
            .collect();
        self.waiters.retain(|w| w.1 > now);
        removed += expired.len() as u32;
        while self.holders.len() < self.slots as usize && !self.waiters.is_empty() {
            let (holder, _, ttl) = self.waiters.remove(0);
            self.holders.push(LeaseHolder {
                holder,
                fence,
                expires_at_ms: now + ttl,
            });
        }
        (removed, expired)
    }

    fn release(&mut self, holder: &str, now: u64, fence: u64) -> bool {
        if let Some(at) = self.holders.iter().position(|h| h.holder == holder) {
            self.holders.remove(at);
            self.settle(now, fence);
            true
        } else if let Some(at) = self.waiters.iter().position(|w| w.0 == holder) {
            self.waiters.remove(at);
            true
        } else {
            false
        }
    }

    fn is_empty(&self) -> bool {
        self.holders.is_empty() && self.waiters.is_empty()
    }
}

#[derive(Clone, Debug)]
struct MEntry {
    seq: u64,
    entry: Vec<u8>,
    by: String,
    at: u64,
    retain: u64,
}

/// Who asked, and which command.
type Asked = (Caller, std::mem::Discriminant<Command>);

#[derive(Debug, Default)]
struct Model {
    kv: BTreeMap<Vec<u8>, (Vec<u8>, u64)>,
    leases: BTreeMap<ResourceId, MLease>,
    counters: BTreeMap<ResourceId, (u64, u64, String)>,
    ledgers: BTreeMap<ResourceId, (u64, VecDeque<MEntry>)>,
    /// Per key: the outcome, when it expires, and the request it answered (its caller and
    /// command variant): another caller or command under the key is told `KeyReused`.
    idempotency: BTreeMap<String, (Outcome, u64, Asked)>,
    /// Leaders by group, dead ones included until something settles or ticks them away.
    elections: BTreeMap<String, ElectionLeader>,
    schedules: BTreeMap<String, ScheduleView>,
}

/// The model's schedule specs, as due-time periods in UTC: one spec per generated name.
fn schedule_period_ms(spec: &str) -> u64 {
    match spec {
        "@every 60s" => 60_000,
        "*/2 * * * *" => 120_000,
        other => panic!("the model knows no spec {other}"),
    }
}

fn period(time_ms: u64, reset: Reset, tz: &str) -> String {
    let tz: Tz = tz.parse().expect("model zones exist");
    let at = DateTime::<Utc>::from_timestamp_millis(time_ms as i64).expect("in range");
    let format = match reset {
        Reset::Hourly => "%Y-%m-%dT%H%:z",
        Reset::Daily => "%Y-%m-%d",
        Reset::Weekly => "%G-W%V",
        Reset::Monthly => "%Y-%m",
    };
    at.with_timezone(&tz).format(format).to_string()
}

impl Model {
    fn apply(&mut self, stamp: Stamp, request: &Request) -> Outcome {
        let now = stamp.time_ms;
        if let Command::ScheduleFire {
            spec,
            timezone,
            due_ms,
            ..
        } = &request.command
            && due_ms % schedule_period_ms(spec) != 0
        {
            let reason = format!("due_ms {due_ms} is not a due time of {spec:?} in {timezone}");
            return Outcome::Invalid { reason };
        }
        let key = request.idempotency_key.as_ref();
        let asked = (
            request.caller.clone(),
            std::mem::discriminant(&request.command),
        );
        if let Some((outcome, _, answered)) = key
            .and_then(|k| self.idempotency.get(k))
            .filter(|(_, expires, _)| *expires > now)
        {
            if *answered != asked {
                let key = key.cloned().unwrap_or_default();
                return Outcome::KeyReused { key };
            }
            return outcome.clone();
        }
        let outcome = self.command(stamp, &request.command);
        if let Some(key) = &request.idempotency_key {
            let record = (outcome.clone(), now + IDEMPOTENCY_WINDOW_MS, asked);
            self.idempotency.insert(key.clone(), record);
        }
        outcome
    }

    fn command(&mut self, stamp: Stamp, command: &Command) -> Outcome {
        let (now, fence) = (stamp.time_ms, stamp.fence());
        match command {
            Command::KvPut {
                key,
                value,
                expect_version,
            } => {
                let current = self.kv.get(key).map_or(0, |e| e.1);
                if expect_version.is_some_and(|v| v != current) {
                    return Outcome::KvVersionMismatch { current };
                }
                self.kv.insert(key.clone(), (value.clone(), fence));
                Outcome::KvWritten {
                    version: fence,
                    fence,
                }
            }
            Command::KvDelete {
                key,
                expect_version,
            } => {
                let current = self.kv.get(key).map_or(0, |e| e.1);
                if current == 0 || expect_version.is_some_and(|v| v != current) {
                    return Outcome::KvVersionMismatch { current };
                }
                self.kv.remove(key);
                Outcome::KvDeleted { version: current }
            }
            Command::LeaseAcquire {
                lease,
                holder,
                slots,
                ttl_ms,
                wait_ms,
            } => self.acquire(stamp, lease, holder, *slots, *ttl_ms, *wait_ms),
            Command::LeaseRenew {
                lease,
                holder,
                ttl_ms,
            } => {
                let Some(mut l) = self.leases.remove(lease) else {
                    return Outcome::LeaseNotHeld;
                };
                l.settle(now, fence);
                let outcome = match l.holders.iter_mut().find(|h| &h.holder == holder) {
                    Some(h) => {
                        h.expires_at_ms = h.expires_at_ms.max(now + ttl_ms);
                        Outcome::LeaseRenewed {
                            fence: h.fence,
                            expires_at_ms: h.expires_at_ms,
                        }
                    }
                    None => Outcome::LeaseNotHeld,
                };
                if !l.is_empty() {
                    self.leases.insert(lease.clone(), l);
                }
                outcome
            }
            Command::LeaseRelease { lease, holder } => {
                if self.release(lease, holder, now, fence) {
                    Outcome::LeaseReleased
                } else {
                    Outcome::LeaseNotHeld
                }
            }
            Command::LeaseReleaseAll { holder } => {
                let ids: Vec<ResourceId> = self
                    .leases
                    .iter()
                    .filter(|(_, l)| {
                        l.holders.iter().any(|h| &h.holder == holder)
                            || l.waiters.iter().any(|w| &w.0 == holder)
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
                let mut released = 0;
                for id in ids {
                    if self.release(&id, holder, now, fence) {
                        released += 1;
                    }
                }
                Outcome::LeaseReleasedAll { released }
            }
            Command::CounterConsume {
                counter,
                amount,
                cap,
                reset,
                timezone,
            } => {
                let period = period(now, *reset, timezone);
                let consumed = match self.counters.get(counter) {
                    Some((consumed, _, p)) if *p == period => *consumed,
                    _ => 0,
                };
                let after = consumed.checked_add(*amount).filter(|a| a <= cap);
                let stored = after.unwrap_or(consumed);
                self.counters
                    .insert(counter.clone(), (stored, *cap, period.clone()));
                let remaining = cap.saturating_sub(stored);
                match after {
                    Some(consumed) => Outcome::CounterOk {
                        consumed,
                        remaining,
                        period,
                    },
                    None => Outcome::CounterOver {
                        consumed,
                        remaining,
                        period,
                    },
                }
            }
            Command::LedgerAppend {
                ledger,
                entry,
                appended_by,
                retain_ms,
            } => {
                let (next, entries) = self
                    .ledgers
                    .entry(ledger.clone())
                    .or_insert((1, VecDeque::new()));
                let seq = *next;
                *next += 1;
                entries.push_back(MEntry {
                    seq,
                    entry: entry.clone(),
                    by: appended_by.clone(),
                    at: now,
                    retain: *retain_ms,
                });
                Outcome::LedgerAppended { seq }
            }
            Command::Tick => Outcome::Ticked {
                processed: self.tick(now, fence),
            },
            Command::KvTxn {
                compares,
                puts,
                deletes,
            } => {
                for (key, expected) in compares {
                    let current = self.kv.get(key).map_or(0, |e| e.1);
                    if current != *expected {
                        return Outcome::KvTxnFailed {
                            key: key.clone(),
                            current,
                        };
                    }
                }
                for (key, value) in puts {
                    self.kv.insert(key.clone(), (value.clone(), fence));
                }
                for key in deletes {
                    self.kv.remove(key);
                }
                Outcome::KvTxnCommitted { fence }
            }
            Command::Campaign { .. }
            | Command::Proclaim { .. }
            | Command::Resign { .. }
            | Command::ElectionRenew { .. } => self.election(stamp, command),
            Command::ScheduleFire {
                name,
                spec,
                timezone,
                due_ms,
                claimant,
            } => {
                if *due_ms > now {
                    return Outcome::ScheduleNotDue {
                        due_ms: *due_ms,
                        now_ms: now,
                    };
                }
                if let Some(last) = self
                    .schedules
                    .get(name)
                    .filter(|l| *due_ms <= l.last_due_ms)
                {
                    return Outcome::ScheduleAlreadyFired {
                        due_ms: last.last_due_ms,
                        claimant: last.claimant.clone(),
                        fence: last.fence,
                    };
                }
                let view = ScheduleView {
                    name: name.clone(),
                    spec: spec.clone(),
                    timezone: timezone.clone(),
                    last_due_ms: *due_ms,
                    claimant: claimant.clone(),
                    fence,
                };
                self.schedules.insert(name.clone(), view);
                Outcome::ScheduleFired {
                    due_ms: *due_ms,
                    fence,
                }
            }
            // Range ownership has its own scenario file; the model runs standalone.
            other => unreachable!("the model does not generate {other:?}"),
        }
    }

    /// The group's live leader, after dropping a dead one.
    fn live_leader(&mut self, group: &str, now: u64) -> Option<ElectionLeader> {
        if self
            .elections
            .get(group)
            .is_some_and(|l| l.expires_at_ms <= now)
        {
            self.elections.remove(group);
        }
        self.elections.get(group).cloned()
    }

    fn election(&mut self, stamp: Stamp, command: &Command) -> Outcome {
        let (now, fence) = (stamp.time_ms, stamp.fence());
        let (group, candidate, claimed) = match command {
            Command::Campaign {
                group, candidate, ..
            } => (group, candidate, None),
            Command::Proclaim {
                group,
                candidate,
                fence,
                ..
            }
            | Command::Resign {
                group,
                candidate,
                fence,
            }
            | Command::ElectionRenew {
                group,
                candidate,
                fence,
                ..
            } => (group, candidate, Some(*fence)),
            other => panic!("{other:?} is not an election command"),
        };
        let live = self.live_leader(group, now);
        let elected = |l: &ElectionLeader| Outcome::Elected {
            fence: l.fence,
            expires_at_ms: l.expires_at_ms,
        };
        if let Command::Campaign {
            endpoints, ttl_ms, ..
        } = command
        {
            let mut leader = match live {
                Some(l) if &l.candidate != candidate => {
                    return Outcome::ElectionLost { leader: l };
                }
                Some(mut l) => {
                    l.expires_at_ms = l.expires_at_ms.max(now + ttl_ms);
                    l
                }
                None => ElectionLeader {
                    group: group.clone(),
                    candidate: candidate.clone(),
                    fence,
                    endpoints: Vec::new(),
                    expires_at_ms: now + ttl_ms,
                },
            };
            leader.endpoints = endpoints.clone();
            self.elections.insert(group.clone(), leader.clone());
            return elected(&leader);
        }
        let Some(mut leader) =
            live.filter(|l| &l.candidate == candidate && Some(l.fence) == claimed)
        else {
            return Outcome::ElectionNotLeader {
                current: self.elections.get(group).cloned(),
            };
        };
        let outcome = match command {
            Command::Proclaim { endpoints, .. } => {
                leader.endpoints = endpoints.clone();
                Outcome::Proclaimed {
                    fence: leader.fence,
                }
            }
            Command::Resign { .. } => {
                self.elections.remove(group);
                return Outcome::Resigned;
            }
            Command::ElectionRenew { ttl_ms, .. } => {
                leader.expires_at_ms = leader.expires_at_ms.max(now + ttl_ms);
                elected(&leader)
            }
            other => panic!("{other:?} is not an election command"),
        };
        self.elections.insert(group.clone(), leader);
        outcome
    }

    fn acquire(
        &mut self,
        stamp: Stamp,
        lease: &ResourceId,
        holder: &String,
        slots: u32,
        ttl_ms: u64,
        wait_ms: u64,
    ) -> Outcome {
        let (now, fence) = (stamp.time_ms, stamp.fence());
        let mut l = self.leases.remove(lease).unwrap_or_default();
        l.slots = slots;
        let (_, expired) = l.settle(now, fence);
        let outcome = if let Some(h) = l.holders.iter_mut().find(|h| &h.holder == holder) {
            h.expires_at_ms = h.expires_at_ms.max(now + ttl_ms);
            Outcome::LeaseHeld {
                fence: h.fence,
                expires_at_ms: h.expires_at_ms,
                reentered: true,
            }
        } else if expired.contains(holder) {
            Outcome::LeaseContended {
                holders: l.holders.clone(),
            }
        } else if let Some(at) = l.waiters.iter().position(|w| &w.0 == holder) {
            Outcome::LeaseWaiting {
                position: at as u32,
                wait_until_ms: l.waiters[at].1,
            }
        } else if l.holders.len() < slots as usize {
            let expires_at_ms = now + ttl_ms;
            l.holders.push(LeaseHolder {
                holder: holder.clone(),
                fence,
                expires_at_ms,
            });
            Outcome::LeaseHeld {
                fence,
                expires_at_ms,
                reentered: false,
            }
        } else if wait_ms == 0 {
            Outcome::LeaseContended {
                holders: l.holders.clone(),
            }
        } else {
            l.waiters.push((holder.clone(), now + wait_ms, ttl_ms));
            let position = l.waiters.len() as u32 - 1;
            Outcome::LeaseWaiting {
                position,
                wait_until_ms: now + wait_ms,
            }
        };
        if !l.is_empty() {
            self.leases.insert(lease.clone(), l);
        }
        outcome
    }

    fn release(&mut self, lease: &ResourceId, holder: &str, now: u64, fence: u64) -> bool {
        let Some(mut l) = self.leases.remove(lease) else {
            return false;
        };
        l.settle(now, fence);
        let released = l.release(holder, now, fence);
        if !l.is_empty() {
            self.leases.insert(lease.clone(), l);
        }
        released
    }

    fn tick(&mut self, now: u64, fence: u64) -> u32 {
        let mut processed = 0;
        let ids: Vec<ResourceId> = self.leases.keys().cloned().collect();
        for id in ids {
            let mut l = self.leases.remove(&id).expect("listed");
            processed += l.settle(now, fence).0;
            if !l.is_empty() {
                self.leases.insert(id, l);
            }
        }
        for (_, entries) in self.ledgers.values_mut() {
            while entries.front().is_some_and(|e| e.at + e.retain <= now) {
                entries.pop_front();
                processed += 1;
            }
        }
        let before = self.idempotency.len();
        self.idempotency.retain(|_, (_, expires, _)| *expires > now);
        processed += (before - self.idempotency.len()) as u32;
        let before = self.elections.len();
        self.elections.retain(|_, l| l.expires_at_ms > now);
        processed + (before - self.elections.len()) as u32
    }

    fn next_deadline(&self) -> Option<u64> {
        let leases = self.leases.values().flat_map(|l| {
            l.holders
                .iter()
                .map(|h| h.expires_at_ms)
                .chain(l.waiters.iter().map(|w| w.1))
        });
        let ledgers = self
            .ledgers
            .values()
            .filter_map(|(_, e)| e.front().map(|e| e.at + e.retain));
        let idem = self.idempotency.values().map(|(_, expires, _)| *expires);
        let elections = self.elections.values().map(|l| l.expires_at_ms);
        leases.chain(ledgers).chain(idem).chain(elections).min()
    }

    fn lease_views(&self, now: u64) -> Vec<LeaseView> {
        // The board lists by `owner/name` first; the model's ids all share one owner/name
        // pair per family, so key order is the same.
        self.leases
            .iter()
            .filter_map(|(id, l)| {
                let mut holders: Vec<LeaseHolder> = l
                    .holders
                    .iter()
                    .filter(|h| h.expires_at_ms > now)
                    .cloned()
                    .collect();
                holders.sort_by_key(|h| h.fence);
                let waiters: Vec<(String, u64)> = l
                    .waiters
                    .iter()
                    .filter(|w| w.1 > now)
                    .map(|w| (w.0.clone(), w.1))
                    .collect();
                (!holders.is_empty() || !waiters.is_empty()).then(|| LeaseView {
                    lease: id.clone(),
                    slots: l.slots,
                    holders,
                    waiters,
                })
            })
            .collect()
    }

    fn live_leaders(&self, now: u64) -> Vec<ElectionLeader> {
        self.elections
            .values()
            .filter(|l| l.expires_at_ms > now)
            .cloned()
            .collect()
    }

    fn counter_views(&self) -> Vec<CounterView> {
        self.counters
            .iter()
            .map(|(id, (consumed, cap, period))| CounterView {
                counter: id.clone(),
                consumed: *consumed,
                cap: *cap,
                period: period.clone(),
            })
            .collect()
    }

    fn ledger_rows(&self) -> Vec<LedgerEntryView> {
        self.ledgers
            .iter()
            .flat_map(|(id, (_, entries))| {
                entries.iter().map(|e| LedgerEntryView {
                    ledger: id.clone(),
                    seq: e.seq,
                    entry: e.entry.clone(),
                    appended_by: e.by.clone(),
                    at_ms: e.at,
                })
            })
            .collect()
    }
}

// ----- generators -----

const HOLDERS: [&str; 3] = ["h1", "h2", "h3"];

fn lease_id(i: usize) -> ResourceId {
    rid("local/W", "slot", ["x", "y"][i])
}

fn command() -> impl Strategy<Value = Command> {
    let key = prop::sample::select(vec![b"a".to_vec(), b"b".to_vec()]);
    let holder = prop::sample::select(HOLDERS.to_vec()).prop_map(String::from);
    let lease = (0..2usize).prop_map(lease_id);
    let ttl = prop::sample::select(vec![1u64, 50, 500, 5_000]);
    let wait = prop::sample::select(vec![0u64, 0, 100, 1_000]);
    let version = prop::option::of(prop::sample::select(vec![0u64, 65_536, 131_072]));
    let reset = prop::sample::select(vec![
        Reset::Hourly,
        Reset::Daily,
        Reset::Weekly,
        Reset::Monthly,
    ]);
    let zone = prop::sample::select(vec!["UTC", "America/New_York"]).prop_map(String::from);
    let partition = prop::sample::select(vec!["p", "q"]);
    let retain = prop::sample::select(vec![1u64, 100, 1_000, 50_000]);
    let group = prop::sample::select(vec!["g1", "g2"]).prop_map(String::from);
    let endpoints = prop::sample::select(vec![vec![], vec!["a:1".to_string()], vec!["b:2".into()]]);
    // 0 stands for "the fence the model holds for the group" (see `resolve`).
    let fence = prop::sample::select(vec![0u64, 0, 0, 1]);
    let spec = prop::sample::select(vec!["@every 60s", "*/2 * * * *"]);
    prop_oneof![
        1 => (key.clone(), any::<u8>(), version.clone()).prop_map(|(key, v, expect_version)| {
            Command::KvPut { key, value: vec![v], expect_version }
        }),
        1 => (key.clone(), version.clone())
            .prop_map(|(key, expect_version)| Command::KvDelete { key, expect_version }),
        1 => (key.clone(), key, version, any::<u8>()).prop_map(|(put, delete, expect, v)| {
            let deletes = if put == delete { vec![] } else { vec![delete] };
            let compares = expect.map_or(vec![], |e| vec![(put.clone(), e)]);
            Command::KvTxn { compares, puts: vec![(put, vec![v])], deletes }
        }),
        4 => (lease.clone(), holder.clone(), 1..4u32, ttl.clone(), wait).prop_map(
            |(lease, holder, slots, ttl_ms, wait_ms)| Command::LeaseAcquire {
                lease, holder, slots, ttl_ms, wait_ms,
            }
        ),
        1 => (lease.clone(), holder.clone(), ttl.clone())
            .prop_map(|(lease, holder, ttl_ms)| Command::LeaseRenew { lease, holder, ttl_ms }),
        2 => (lease, holder.clone())
            .prop_map(|(lease, holder)| Command::LeaseRelease { lease, holder }),
        1 => holder.clone().prop_map(|holder| Command::LeaseReleaseAll { holder }),
        1 => (0..60u64, prop::sample::select(vec![50u64, 100]), reset, zone).prop_map(
            |(amount, cap, reset, timezone)| Command::CounterConsume {
                counter: rid("local/W", "tokens", "k"), amount, cap, reset, timezone,
            }
        ),
        1 => (partition, holder.clone(), retain).prop_map(|(p, appended_by, retain_ms)| {
            Command::LedgerAppend {
                ledger: rid("local/W", "log", p), entry: p.as_bytes().to_vec(), appended_by,
                retain_ms,
            }
        }),
        2 => Just(Command::Tick),
        2 => (group.clone(), holder.clone(), endpoints.clone(), ttl.clone()).prop_map(
            |(group, candidate, endpoints, ttl_ms)| Command::Campaign {
                group, candidate, endpoints, ttl_ms,
            }
        ),
        1 => (group.clone(), holder.clone(), fence.clone(), endpoints).prop_map(
            |(group, candidate, fence, endpoints)| Command::Proclaim {
                group, candidate, fence, endpoints,
            }
        ),
        1 => (group.clone(), holder.clone(), fence.clone()).prop_map(
            |(group, candidate, fence)| Command::Resign { group, candidate, fence }
        ),
        1 => (group, holder.clone(), fence, ttl).prop_map(
            |(group, candidate, fence, ttl_ms)| Command::ElectionRenew {
                group, candidate, fence, ttl_ms,
            }
        ),
        2 => (spec, holder).prop_map(|(spec, claimant)| Command::ScheduleFire {
            name: spec.replace(' ', "_"), spec: spec.into(), timezone: "UTC".into(), due_ms: 0,
            claimant,
        }),
    ]
}

#[derive(Clone, Debug)]
struct Step {
    same_entry: bool,
    advance_ms: u64,
    idempotency_key: Option<String>,
    command: Command,
    /// For a `ScheduleFire`: minutes back from the stamp's minute (-1 = a minute ahead).
    due_back_minutes: i64,
    /// For a `ScheduleFire`: added to the due time (non-zero = not a due time).
    due_offset_ms: u64,
}

/// The step's command at `stamp`: a generated fire claims a due time near the stamp, and a
/// generated election fence of 0 becomes the fence the model holds for the group (the live
/// term, a dead one, or none), so that fences match often enough to matter.
fn resolve(step: &Step, stamp: Stamp, model: &Model) -> Command {
    let mut command = step.command.clone();
    match &mut command {
        Command::ScheduleFire { due_ms, .. } => {
            let minute = (stamp.time_ms / 60_000) as i64 - step.due_back_minutes;
            *due_ms = minute as u64 * 60_000 + step.due_offset_ms;
        }
        Command::Proclaim { group, fence, .. }
        | Command::Resign { group, fence, .. }
        | Command::ElectionRenew { group, fence, .. }
            if *fence == 0 =>
        {
            *fence = model.elections.get(group.as_str()).map_or(7, |l| l.fence);
        }
        _ => {}
    }
    command
}

fn step() -> impl Strategy<Value = Step> {
    let advance = prop::sample::select(vec![
        0u64, 1, 10, 49, 50, 100, 700, 3_000, 100_000, 3_600_000,
    ]);
    let idem = prop::option::weighted(0.3, prop::sample::select(vec!["c1", "c2", "c3"]));
    let due_back = prop::sample::select(vec![-1i64, 0, 0, 1, 2, 3]);
    let due_offset = prop::sample::select(vec![0u64, 0, 0, 60_000, 30_000]);
    (
        prop::bool::weighted(0.2),
        advance,
        idem,
        command(),
        due_back,
        due_offset,
    )
        .prop_map(
            |(same_entry, advance_ms, idem, command, due_back_minutes, due_offset_ms)| Step {
                same_entry,
                advance_ms,
                idempotency_key: idem.map(String::from),
                command,
                due_back_minutes,
                due_offset_ms,
            },
        )
}

// ----- the property -----

fn check_views(txn: &MemTxn, model: &Model, now: u64) -> Result<(), TestCaseError> {
    let leases = query(
        txn,
        now,
        &Query::LeaseList {
            prefix: String::new(),
            limit: 0,
        },
    );
    prop_assert_eq!(leases, QueryResult::Leases(model.lease_views(now)));
    let counters = query(
        txn,
        now,
        &Query::CounterList {
            prefix: String::new(),
            limit: 0,
        },
    );
    prop_assert_eq!(counters, QueryResult::Counters(model.counter_views()));
    let ledger = Query::LedgerList {
        owner: "local/W".into(),
        name: "log".into(),
        partition: None,
        after_seq: 0,
        limit: 0,
    };
    prop_assert_eq!(
        query(txn, now, &ledger),
        QueryResult::LedgerEntries(model.ledger_rows())
    );
    let elections = Query::ElectionList {
        prefix: String::new(),
        limit: 0,
    };
    prop_assert_eq!(
        query(txn, now, &elections),
        QueryResult::Elections(model.live_leaders(now))
    );
    for group in ["g1", "g2"] {
        let leader = query(
            txn,
            now,
            &Query::ElectionLeader {
                group: group.into(),
            },
        );
        let live = model
            .elections
            .get(group)
            .filter(|l| l.expires_at_ms > now)
            .cloned();
        prop_assert_eq!(leader, QueryResult::ElectionLeader(live));
    }
    let schedules = Query::ScheduleList {
        prefix: String::new(),
        limit: 0,
    };
    let expected: Vec<ScheduleView> = model.schedules.values().cloned().collect();
    prop_assert_eq!(
        query(txn, now, &schedules),
        QueryResult::Schedules(expected)
    );
    let next = query(txn, now, &Query::NextDeadline);
    prop_assert_eq!(next, QueryResult::NextDeadline(model.next_deadline()));
    for key in [b"a".to_vec(), b"b".to_vec()] {
        let QueryResult::Kv(entry) = query(txn, now, &Query::KvGet { key: key.clone() }) else {
            panic!("kv get answers kv");
        };
        let expected = model
            .kv
            .get(&key)
            .map(|(value, version)| (value.clone(), *version));
        prop_assert_eq!(entry.map(|e| (e.value, e.version)), expected);
    }
    Ok(())
}

fn check_invariants(model: &Model, max_slots: &BTreeMap<ResourceId, u32>, now: u64) {
    for (id, lease) in &model.leases {
        let live = lease
            .holders
            .iter()
            .filter(|h| h.expires_at_ms > now)
            .count();
        assert!(
            live <= max_slots[id] as usize,
            "{id:?} has {live} live holders"
        );
    }
    for (next, entries) in model.ledgers.values() {
        let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
        let start = next - seqs.len() as u64;
        assert_eq!(seqs, (start..*next).collect::<Vec<_>>(), "ledger has a gap");
    }
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    let mut txn = MemTxn::default();
    let mut model = Model::default();
    let mut log = Vec::new();
    let mut max_slots = BTreeMap::new();
    let mut stamp = Stamp {
        index: 0,
        position: 0,
        time_ms: 1_784_000_000_000,
    };
    for step in steps {
        if step.same_entry && stamp.index > 0 {
            stamp.position += 1;
        } else {
            stamp = Stamp {
                index: stamp.index + 1,
                position: 0,
                time_ms: stamp.time_ms + step.advance_ms,
            };
        }
        let request = Request {
            idempotency_key: step.idempotency_key.clone(),
            command: resolve(step, stamp, &model),
            epoch: 0,
            caller: whip_board::access::Caller::Server,
        };
        if let Command::LeaseAcquire { lease, slots, .. } = &request.command {
            let seen = max_slots.entry(lease.clone()).or_insert(0);
            *seen = (*seen).max(*slots);
        }
        let outcome = apply(&mut txn, stamp, &request).outcome;
        let expected = model.apply(stamp, &request);
        prop_assert_eq!(&outcome, &expected, "at {:?} for {:?}", stamp, request);
        // A charge never passes the cap it was made under (a later, lower cap may leave
        // the stored consumption above it; such a counter is over until the period ends).
        // A keyed retry answers the outcome of the same command (another command under the
        // key is `KeyReused`; a consume under a consume's key answers the first charge,
        // which was under the cap of its own request only), so only unkeyed requests are
        // checked.
        if let (Outcome::CounterOk { consumed, .. }, Command::CounterConsume { cap, .. }, None) =
            (&outcome, &request.command, &request.idempotency_key)
        {
            prop_assert!(consumed <= cap, "charged to {} over cap {}", consumed, cap);
        }
        check_views(&txn, &model, stamp.time_ms)?;
        check_invariants(&model, &max_slots, stamp.time_ms);
        log.push((stamp, request));
    }
    let mut replay = MemTxn::default();
    for (stamp, request) in &log {
        apply(&mut replay, *stamp, request);
    }
    prop_assert_eq!(&replay.map, &txn.map, "replay diverged");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn board_agrees_with_the_model(steps in prop::collection::vec(step(), 1..120)) {
        run(&steps)?;
    }
}

/// The generator must reach the interesting outcomes, or the property proves little.
#[test]
fn generated_logs_cover_every_outcome_kind() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(step(), 100);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let steps = strategy.new_tree(&mut runner).expect("generates").current();
        let mut model = Model::default();
        let mut stamp = Stamp {
            index: 0,
            position: 0,
            time_ms: 1_784_000_000_000,
        };
        for step in &steps {
            stamp = Stamp {
                index: stamp.index + 1,
                position: 0,
                time_ms: stamp.time_ms + step.advance_ms,
            };
            let request = Request {
                idempotency_key: None,
                command: resolve(step, stamp, &model),
                epoch: 0,
                caller: whip_board::access::Caller::Server,
            };
            let outcome = model.apply(stamp, &request);
            let kind = match outcome {
                Outcome::LeaseHeld {
                    reentered: true, ..
                } => "reentered".to_string(),
                Outcome::LeaseReleasedAll { released } if released > 0 => "released all".into(),
                Outcome::Ticked { processed } if processed > 0 => "ticked".into(),
                other => format!("{other:?}")
                    .split([' ', '{'])
                    .next()
                    .unwrap_or("")
                    .to_string(),
            };
            seen.insert(kind);
        }
    }
    for kind in [
        "KvWritten",
        "KvDeleted",
        "KvVersionMismatch",
        "LeaseHeld",
        "reentered",
        "LeaseContended",
        "LeaseWaiting",
        "LeaseRenewed",
        "LeaseReleased",
        "LeaseNotHeld",
        "released all",
        "CounterOk",
        "CounterOver",
        "LedgerAppended",
        "ticked",
        "Elected",
        "ElectionLost",
        "ElectionNotLeader",
        "Proclaimed",
        "Resigned",
        "ScheduleFired",
        "ScheduleAlreadyFired",
        "ScheduleNotDue",
        "Invalid",
    ] {
        assert!(
            seen.contains(kind),
            "no {kind} in generated logs; saw {seen:?}"
        );
    }
}
