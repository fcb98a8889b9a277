//! The client workers. Each worker is a loop of operations on one logical process at a
//! time; every operation is recorded as an invoke and a completion. A completion the
//! worker cannot be sure of (timeout, unavailable after retries) is `info`, and the worker
//! continues as a fresh process, since the old one may still have a request in flight.
//!
//! Keys rotate (`cas/k<n>`, `lease/k<n>`, `counter/k<n>`) after a bounded number of
//! operations so each key's history stays small enough for the linearizability search.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use super::history::{Kind, Recorder};

/// A workload the harness can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// A CAS register per key.
    Cas,
    /// A lease with slots per key.
    Lease,
    /// A counter with a cap per key.
    Counter,
    /// A partitioned append-only ledger.
    Ledger,
    /// A task board: post, claim, complete / release / let lapse.
    Board,
    /// The work registry under a small ceiling: register, renew, signal, revoke.
    Registry,
    /// Agent mail: numbered messages to a few mailboxes, drained by one reader each.
    Mail,
    /// The voting plane: short proposals of one team, ballots from its electorate and
    /// from agents who may not vote.
    Vote,
    /// Writers put numbered values under a prefix while one watcher follows it.
    Watch,
    /// Applies whose follow-ups run from the outbox: revokes of enrolled helpers' entries
    /// and team dissolves (see [`super::follow`]).
    Follow,
    /// WhippleScript agent turns under a capacity bound, their workers killed mid-turn
    /// (see [`super::turns`]).
    Turns,
}

impl Workload {
    /// Parse a workload name.
    pub fn parse(name: &str) -> Result<Workload, String> {
        match name {
            "cas" => Ok(Workload::Cas),
            "lease" => Ok(Workload::Lease),
            "counter" => Ok(Workload::Counter),
            "ledger" => Ok(Workload::Ledger),
            "board" => Ok(Workload::Board),
            "registry" => Ok(Workload::Registry),
            "mail" => Ok(Workload::Mail),
            "watch" => Ok(Workload::Watch),
            "vote" => Ok(Workload::Vote),
            "follow" => Ok(Workload::Follow),
            "turns" => Ok(Workload::Turns),
            other => Err(format!(
                "unknown workload {other:?} (cas, lease, counter, ledger, board, registry, mail, \
                 vote, watch, follow, turns)"
            )),
        }
    }

    /// The workload's name (also the prefix of its keys).
    pub fn name(self) -> &'static str {
        match self {
            Workload::Cas => "cas",
            Workload::Lease => "lease",
            Workload::Counter => "counter",
            Workload::Ledger => "ledger",
            Workload::Board => "board",
            Workload::Registry => "registry",
            Workload::Mail => "mail",
            Workload::Vote => "vote",
            Workload::Watch => "watch",
            Workload::Follow => "follow",
            Workload::Turns => "turns",
        }
    }

    /// Workers to start for `concurrency` workers per workload: mail, vote and watch run
    /// one fixed group each (see [`super::mail`], [`super::vote`], [`super::watch`]).
    pub fn workers(self, concurrency: usize) -> usize {
        match self {
            Workload::Mail
            | Workload::Vote
            | Workload::Watch
            | Workload::Follow
            | Workload::Turns => 1,
            _ => concurrency,
        }
    }
}

/// Operations per CAS key before workers move to the next key.
pub const CAS_OPS_PER_KEY: u64 = 120;
/// Operations per lease key.
pub const LEASE_OPS_PER_KEY: u64 = 150;
/// Operations per counter key (a bit more than the cap, so caps are reached).
pub const COUNTER_OPS_PER_KEY: u64 = 40;
/// The counter cap.
pub const COUNTER_CAP: u64 = 25;
/// Ledger partitions.
pub const LEDGER_PARTITIONS: u64 = 3;
/// Lease slots.
pub const LEASE_SLOTS: u32 = 2;
/// Lease time to live.
pub const LEASE_TTL_MS: u64 = 1_000;
/// How long one operation may take before its outcome is unknown.
pub const OP_TIMEOUT_MS: u64 = 2_000;
/// How long the client retries an unavailable cell inside one operation.
pub const CLIENT_RETRY_MS: u64 = 1_500;
/// One attempt inside an operation; then the client moves to the next member.
pub const CLIENT_ATTEMPT_MS: u64 = 700;
/// Operations per board (team) before workers move to the next one.
pub const BOARD_OPS_PER_KEY: u64 = 200;
/// A board claim's window: short, so claims lapse and tasks are redelivered in a run.
pub const BOARD_RECLAIM_MS: u64 = 1_000;
/// Ledger entries are kept this long (longer than any run).
pub const LEDGER_RETAIN_MS: u64 = 6 * 3_600_000;

/// What a worker shares with the others of its workload.
#[derive(Clone)]
pub struct Shared {
    /// The history.
    pub recorder: Recorder,
    /// Node addresses.
    pub addrs: Vec<String>,
    /// Set when the run is over.
    pub stop: Arc<AtomicBool>,
    /// Which key the workload is on and how far along it is.
    pub rotation: Arc<Mutex<Rotation>>,
}

/// Key rotation: the current key index, operations started on it, unknown outcomes on it.
#[derive(Debug, Default)]
pub struct Rotation {
    key: u64,
    ops: u64,
    unknown: u64,
}

/// Unknown outcomes on one key before workers move on: each one stays concurrent with
/// everything after it, and the search's cost grows exponentially with them.
pub const UNKNOWN_PER_KEY_MAX: u64 = 3;

/// How one operation ended.
pub(super) enum Done {
    Ok(Value),
    Fail(Value),
    Info(Value),
}

pub(super) fn error_done(e: &CellError, read: bool) -> Done {
    let value = json!({ "error": e.to_string() });
    match e {
        CellError::InvalidArgument(_) => Done::Fail(value),
        _ if read => Done::Fail(value),
        _ => Done::Info(value),
    }
}

fn resource(key: &str) -> pb::ResourceId {
    let (name, key) = key.split_once('/').unwrap_or(("chaos", key));
    pb::ResourceId {
        owner: "chaos".into(),
        name: name.into(),
        key: key.into(),
    }
}

/// One worker: a logical process that becomes a new one after each unknown outcome.
pub(super) struct Worker {
    shared: Shared,
    pub(super) client: Arc<CellClient>,
    process: u64,
    pub(super) rng: StdRng,
    count: u64,
    /// The worker's seed (names its agent).
    pub(super) seed: u64,
    /// A client acting for the worker's agent (the registry workload).
    pub(super) agent: Option<Arc<CellClient>>,
    /// How the last operation [`Worker::run`] recorded ended.
    pub(super) last: Kind,
}

impl Worker {
    pub(super) fn new(shared: Shared, seed: u64) -> Result<Worker, String> {
        let process = shared.recorder.new_process();
        let mut worker = Worker {
            client: Arc::new(CellClient::connect(&shared.addrs).map_err(|e| e.to_string())?),
            shared,
            process,
            rng: StdRng::seed_from_u64(seed),
            count: 0,
            seed,
            agent: None,
            last: Kind::Invoke,
        };
        worker.client = Arc::new(worker.connect().ok_or("cannot connect")?);
        Ok(worker)
    }

    /// A client of the nodes with the workload's retry and attempt bounds.
    pub(super) fn connect(&self) -> Option<CellClient> {
        let client = CellClient::connect(&self.shared.addrs).ok()?;
        Some(
            client
                .with_retry_for(Duration::from_millis(CLIENT_RETRY_MS))
                .with_attempt_timeout(Duration::from_millis(CLIENT_ATTEMPT_MS)),
        )
    }

    fn unique(&mut self) -> String {
        self.count += 1;
        format!("{}-{}", self.process, self.count)
    }

    fn key(&self, prefix: &str, per_key: u64) -> String {
        let mut r = self.shared.rotation.lock().expect("rotation lock");
        if r.ops >= per_key || r.unknown >= UNKNOWN_PER_KEY_MAX {
            *r = Rotation {
                key: r.key + 1,
                ..Rotation::default()
            };
        }
        r.ops += 1;
        format!("{prefix}/k{}", r.key)
    }

    /// Record `f` on `key`, run `op` with the timeout, record how it ended.
    pub(super) async fn run<Fut>(
        &mut self,
        f: &str,
        key: &str,
        input: Value,
        op: Fut,
    ) -> Option<Value>
    where
        Fut: std::future::Future<Output = Done>,
    {
        let recorder = self.shared.recorder.clone();
        recorder.record(self.process, Kind::Invoke, f, key, input);
        let done = tokio::time::timeout(Duration::from_millis(OP_TIMEOUT_MS), op)
            .await
            .unwrap_or_else(|_| Done::Info(json!({ "error": "timeout" })));
        self.last = match done {
            Done::Ok(_) => Kind::Ok,
            Done::Fail(_) => Kind::Fail,
            Done::Info(_) => Kind::Info,
        };
        match done {
            Done::Ok(v) => {
                recorder.record(self.process, Kind::Ok, f, key, v.clone());
                Some(v)
            }
            Done::Fail(v) => {
                recorder.record(self.process, Kind::Fail, f, key, v);
                None
            }
            Done::Info(v) => {
                recorder.record(self.process, Kind::Info, f, key, v);
                let mut r = self.shared.rotation.lock().expect("rotation lock");
                if key
                    .rsplit_once("/k")
                    .is_some_and(|(_, k)| k == r.key.to_string())
                {
                    r.unknown += 1;
                }
                drop(r);
                self.process = recorder.new_process();
                None
            }
        }
    }

    /// The run's history recorder.
    pub(super) fn recorder(&self) -> Recorder {
        self.shared.recorder.clone()
    }

    pub(super) fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }
}

/// Run one worker of `workload` until the stop flag is set.
pub async fn run_worker(workload: Workload, shared: Shared, seed: u64) -> Result<(), String> {
    match workload {
        Workload::Mail => return super::mail::run_team(shared, seed).await,
        Workload::Vote => return super::vote::run_team(shared, seed).await,
        Workload::Watch => return super::watch::run(shared, seed).await,
        Workload::Follow => return super::follow::run(shared, seed).await,
        Workload::Turns => return super::turns::run(shared, seed).await,
        _ => {}
    }
    let mut worker = Worker::new(shared, seed)?;
    while !worker.stopped() {
        match workload {
            Workload::Cas => cas_round(&mut worker).await,
            Workload::Lease => lease_round(&mut worker).await,
            Workload::Counter => counter_round(&mut worker).await,
            Workload::Ledger => ledger_round(&mut worker).await,
            Workload::Board => board_round(&mut worker).await,
            Workload::Registry => super::registry::registry_round(&mut worker).await,
            Workload::Mail
            | Workload::Vote
            | Workload::Watch
            | Workload::Follow
            | Workload::Turns => {
                unreachable!("a group workload runs on its own")
            }
        }
        let pause = worker.rng.random_range(0..20);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    Ok(())
}

/// Read, then write or compare-and-set against the version read.
async fn cas_round(w: &mut Worker) {
    let key = w.key("cas", CAS_OPS_PER_KEY);
    let client = w.client.clone();
    let read_key = key.clone();
    let read = w
        .run("read", &key, Value::Null, async move {
            match client
                .kv_get(pb::KvGetRequest {
                    key: read_key.into_bytes(),
                    ..Default::default()
                })
                .await
            {
                Ok(r) => Done::Ok(json!({
                    "value": r.found.then(|| String::from_utf8_lossy(&r.value).into_owned()),
                    "version": r.version,
                })),
                Err(e) => error_done(&e, true),
            }
        })
        .await;
    let expect = read
        .as_ref()
        .and_then(|v| v.get("version"))
        .and_then(Value::as_u64);
    let value = w.unique();
    let conditional = expect.is_some() && w.rng.random_bool(0.75);
    let (f, input) = if conditional {
        ("cas", json!({ "expect": expect, "value": value }))
    } else {
        ("write", json!({ "value": value }))
    };
    let request = pb::KvPutRequest {
        key: key.clone().into_bytes(),
        value: value.into_bytes(),
        expect_version: if conditional { expect } else { None },
        idempotency_key: w.client.next_idempotency_key(),
        ..Default::default()
    };
    let client = w.client.clone();
    w.run(f, &key, input, async move {
        match client.kv_put(request).await {
            Ok(r) if r.code == pb::OutcomeCode::KvWritten as i32 => {
                Done::Ok(json!({ "version": r.version }))
            }
            Ok(r) => Done::Fail(json!({ "current": r.current_version })),
            Err(e) => error_done(&e, false),
        }
    })
    .await;
}

/// Acquire a slot with a fresh holder name; sometimes release it, sometimes let it expire.
async fn lease_round(w: &mut Worker) {
    let key = w.key("lease", LEASE_OPS_PER_KEY);
    let holder = format!("h{}", w.unique());
    let input = json!({ "holder": holder, "slots": LEASE_SLOTS, "ttl_ms": LEASE_TTL_MS });
    let request = pb::LeaseAcquireRequest {
        lease: Some(resource(&key)),
        holder: holder.clone(),
        slots: LEASE_SLOTS,
        ttl_ms: LEASE_TTL_MS,
        wait_ms: 0,
        idempotency_key: w.client.next_idempotency_key(),
        fail_open: false,
    };
    let client = w.client.clone();
    let got = w
        .run("acquire", &key, input, async move {
            match client.lease_acquire(request).await {
                Ok(r) if r.code == pb::OutcomeCode::LeaseHeld as i32 => Done::Ok(json!({
                    "held": true, "fence": r.fence, "expires_at_ms": r.expires_at_ms,
                    "reentered": r.reentered,
                })),
                Ok(r) => Done::Ok(json!({
                    "held": false,
                    "code": r.code,
                    "holders": r.holders.iter().map(|h| json!({
                        "holder": h.holder, "fence": h.fence, "expires_at_ms": h.expires_at_ms,
                    })).collect::<Vec<_>>(),
                })),
                Err(e) => error_done(&e, false),
            }
        })
        .await;
    let held = got.and_then(|v| v.get("held").and_then(Value::as_bool)) == Some(true);
    if !held {
        return;
    }
    let hold = w.rng.random_range(0..LEASE_TTL_MS / 2);
    tokio::time::sleep(Duration::from_millis(hold)).await;
    if !w.rng.random_bool(0.6) {
        return;
    }
    let request = pb::LeaseReleaseRequest {
        lease: Some(resource(&key)),
        holder: holder.clone(),
        idempotency_key: w.client.next_idempotency_key(),
    };
    let client = w.client.clone();
    w.run("release", &key, json!({ "holder": holder }), async move {
        match client.lease_release(request).await {
            Ok(r) => Done::Ok(json!({
                "released": r.code == pb::OutcomeCode::LeaseReleased as i32,
            })),
            Err(e) => error_done(&e, false),
        }
    })
    .await;
}

/// Consume 1 against the cap.
async fn counter_round(w: &mut Worker) {
    let key = w.key("counter", COUNTER_OPS_PER_KEY);
    let request = pb::CounterConsumeRequest {
        counter: Some(resource(&key)),
        amount: 1,
        cap: COUNTER_CAP,
        reset: pb::Reset::Hourly as i32,
        timezone: "UTC".into(),
        idempotency_key: w.client.next_idempotency_key(),
    };
    let client = w.client.clone();
    let input = json!({ "amount": 1, "cap": COUNTER_CAP });
    w.run("consume", &key, input, async move {
        match client.counter_consume(request).await {
            Ok(r) => Done::Ok(json!({
                "ok": r.code == pb::OutcomeCode::CounterOk as i32,
                "consumed": r.consumed, "remaining": r.remaining, "period": r.period,
            })),
            Err(e) => error_done(&e, false),
        }
    })
    .await;
}

/// Append a unique entry to one of the partitions.
async fn ledger_round(w: &mut Worker) {
    let partition = w.rng.random_range(0..LEDGER_PARTITIONS);
    let key = format!("ledger/p{partition}");
    let entry = w.unique();
    let request = pb::LedgerAppendRequest {
        ledger: Some(resource(&key)),
        entry: entry.clone().into_bytes(),
        appended_by: format!("p{}", w.process),
        retain_ms: LEDGER_RETAIN_MS,
        idempotency_key: w.client.next_idempotency_key(),
    };
    let client = w.client.clone();
    w.run("append", &key, json!({ "entry": entry }), async move {
        match client.ledger_append(request).await {
            Ok(r) => Done::Ok(json!({ "seq": r.seq })),
            Err(e) => error_done(&e, false),
        }
    })
    .await;
}

/// The board of history key `board/k<n>`: a tracker-style team, open to every caller (no
/// agent identity needed), whose done tasks stay for the final listing.
fn board_team(key: &str) -> String {
    format!("~tracker/chaos/{}", key.replace('/', "-"))
}

/// Post a task, claim the oldest ready one, then mostly complete it; sometimes release it,
/// sometimes complete it only after its claim lapsed (redelivered after
/// `BOARD_RECLAIM_MS`; the late completion must be refused).
async fn board_round(w: &mut Worker) {
    let key = w.key("board", BOARD_OPS_PER_KEY);
    let team = board_team(&key);
    let create = pb::TeamCreateRequest {
        team: team.clone(),
        settings: Some(pb::BoardSettings {
            reclaim_ms: BOARD_RECLAIM_MS,
            ..Default::default()
        }),
        ..Default::default()
    };
    if w.client.team_create(create).await.is_err() {
        return;
    }
    let body = w.unique();
    let post = pb::BoardPostRequest {
        team: team.clone(),
        body: body.clone().into_bytes(),
        idempotency_key: w.client.next_idempotency_key(),
        ..Default::default()
    };
    let client = w.client.clone();
    w.run("post", &key, json!({ "body": body }), async move {
        match client.board_post(post).await {
            Ok(r) if r.code == pb::OutcomeCode::TaskPosted as i32 => {
                Done::Ok(json!({ "task_id": r.task_id }))
            }
            Ok(r) => Done::Fail(json!({ "refusal": r.refusal, "message": r.message })),
            Err(e) => error_done(&e, false),
        }
    })
    .await;
    let Some((task_id, fence)) = board_claim(w, &key, &team).await else {
        return;
    };
    let roll = w.rng.random_range(0..100);
    if roll >= 85 {
        // A slow worker: its claim lapses (the task is redelivered, maybe to another
        // worker) and its late completion must be refused.
        tokio::time::sleep(Duration::from_millis(BOARD_RECLAIM_MS + 200)).await;
    }
    let (f, token) = if !(70..85).contains(&roll) {
        ("complete", w.unique())
    } else {
        ("release", String::new())
    };
    let request = pb::BoardTaskRequest {
        team,
        task_id: task_id.clone(),
        fence,
        result: token.clone().into_bytes(),
        idempotency_key: w.client.next_idempotency_key(),
        ..Default::default()
    };
    let input = json!({ "task_id": task_id, "fence": fence, "token": token });
    let client = w.client.clone();
    w.run(f, &key, input, async move {
        let answer = match f {
            "complete" => client.board_complete(request).await,
            _ => client.board_release(request).await,
        };
        match answer {
            Ok(r) if r.code == pb::OutcomeCode::BoardRefused as i32 => {
                Done::Fail(json!({ "refusal": r.refusal, "message": r.message }))
            }
            Ok(_) => Done::Ok(Value::Null),
            Err(e) => error_done(&e, false),
        }
    })
    .await;
}

/// Claim the oldest ready task of `team` for this worker's process: its id and fence. One
/// claim in four is a prefetch of 2 or 3 (`BoardClaimMany`): the first claim is worked, the
/// others (`more` in the history) are left to lapse and be redelivered.
async fn board_claim(w: &mut Worker, key: &str, team: &str) -> Option<(String, u64)> {
    let worker = format!("p{}", w.process);
    let max = match w.rng.random_range(0..4) {
        0 => w.rng.random_range(2..=3),
        _ => 0,
    };
    let request = pb::BoardClaimRequest {
        team: team.to_string(),
        worker: worker.clone(),
        idempotency_key: w.client.next_idempotency_key(),
        max,
        ..Default::default()
    };
    let client = w.client.clone();
    let got = w
        .run(
            "claim",
            key,
            json!({ "worker": worker, "max": max }),
            async move {
                match client.board_claim(request).await {
                    Ok(r) if r.code == pb::OutcomeCode::TaskClaimed as i32 => Done::Ok(json!({
                        "task_id": r.task_id, "fence": r.fence, "deadline_ms": r.deadline_ms,
                    })),
                    Ok(r) if r.code == pb::OutcomeCode::TasksClaimed as i32 => prefetched(&r),
                    Ok(r) if r.code == pb::OutcomeCode::BoardEmpty as i32 => {
                        Done::Ok(json!({ "task_id": null }))
                    }
                    Ok(r) => Done::Fail(json!({ "refusal": r.refusal, "message": r.message })),
                    Err(e) => error_done(&e, false),
                }
            },
        )
        .await?;
    let task_id = got.get("task_id")?.as_str()?.to_string();
    Some((task_id, got.get("fence")?.as_u64()?))
}

/// A prefetch's answer in the history: the first claim as `task_id` and `fence` (a null
/// `task_id` when none), every other one under `more`.
fn prefetched(r: &pb::BoardResponse) -> Done {
    let claim = |t: &pb::Task| json!({ "task_id": t.id, "fence": t.fence });
    let Some(first) = r.claims.first() else {
        return Done::Ok(json!({ "task_id": null }));
    };
    let more: Vec<Value> = r.claims[1..].iter().map(claim).collect();
    Done::Ok(json!({
        "task_id": first.id, "fence": first.fence, "deadline_ms": first.deadline_ms,
        "more": more,
    }))
}

/// Every task of each board the history touched, as the final listing (`list`).
async fn final_boards(
    recorder: &Recorder,
    process: u64,
    client: &CellClient,
    ops: &[super::history::Op],
) {
    let mut boards: Vec<String> = ops
        .iter()
        .filter(|o| o.f == "post")
        .map(|o| o.key.clone())
        .collect();
    boards.sort();
    boards.dedup();
    for key in boards {
        recorder.record(process, Kind::Invoke, "list", &key, Value::Null);
        let request = pb::BoardListRequest {
            team: board_team(&key),
            state: String::new(),
            limit: 0,
        };
        match client.board_list(request).await {
            Ok(r) => {
                let tasks: Vec<Value> = r
                    .tasks
                    .iter()
                    .map(|t| {
                        json!({
                            "id": t.id, "state": t.state, "fence": t.fence,
                            "body": String::from_utf8_lossy(&t.body),
                            "result": String::from_utf8_lossy(&t.result),
                        })
                    })
                    .collect();
                recorder.record(process, Kind::Ok, "list", &key, json!({ "tasks": tasks }));
            }
            Err(e) => {
                let error = json!({ "error": e.to_string() });
                recorder.record(process, Kind::Fail, "list", &key, error);
            }
        }
    }
}

/// After the run, read every board, ledger partition and counter in full and record the
/// results (`list` and `final` operations) for the invariant checks.
pub async fn final_reads(
    recorder: &Recorder,
    addrs: &[String],
    ops: &[super::history::Op],
) -> Result<(), String> {
    let client = CellClient::connect(addrs)
        .map_err(|e| e.to_string())?
        .with_retry_for(Duration::from_secs(30));
    let process = recorder.new_process();
    final_boards(recorder, process, &client, ops).await;
    if ops.iter().any(|o| o.key == super::registry::REGISTRY_KEY) {
        super::registry::final_registry(recorder, process, &client).await;
    }
    super::mail::final_mail(recorder, process, &client, ops).await;
    super::watch::final_watch(recorder, process, ops).await;
    super::vote::final_votes(recorder, process, addrs, ops).await;
    if ops.iter().any(|o| o.key == super::follow::FOLLOW_KEY) {
        super::follow::final_follow(recorder, process, addrs, ops).await;
    }
    let mut partitions: Vec<String> = ops
        .iter()
        .filter(|o| o.f == "append")
        .map(|o| o.key.clone())
        .collect();
    partitions.sort();
    partitions.dedup();
    for key in partitions {
        recorder.record(process, Kind::Invoke, "list", &key, Value::Null);
        match list_partition(&client, &key).await {
            Ok(entries) => recorder.record(
                process,
                Kind::Ok,
                "list",
                &key,
                json!({ "entries": entries }),
            ),
            Err(e) => {
                recorder.record(process, Kind::Fail, "list", &key, json!({ "error": e }));
            }
        }
    }
    final_counters(recorder, process, &client, ops).await;
    Ok(())
}

/// Every counter the history touched, as one `final` read each.
async fn final_counters(
    recorder: &Recorder,
    process: u64,
    client: &CellClient,
    ops: &[super::history::Op],
) {
    let mut counters: Vec<String> = ops
        .iter()
        .filter(|o| o.f == "consume")
        .map(|o| o.key.clone())
        .collect();
    counters.sort();
    counters.dedup();
    if counters.is_empty() {
        return;
    }
    let views = client
        .counter_list(pb::CounterListRequest {
            prefix: "chaos/counter".into(),
            limit: 0,
        })
        .await;
    for key in counters {
        recorder.record(process, Kind::Invoke, "final", &key, Value::Null);
        let id = resource(&key);
        match &views {
            Ok(list) => {
                let view = list
                    .counters
                    .iter()
                    .find(|c| c.counter.as_ref().is_some_and(|r| r.key == id.key));
                let value = view.map_or(
                    json!({ "consumed": 0, "period": "" }),
                    |c| json!({ "consumed": c.consumed, "period": c.period, "cap": c.cap }),
                );
                recorder.record(process, Kind::Ok, "final", &key, value);
            }
            Err(e) => recorder.record(
                process,
                Kind::Fail,
                "final",
                &key,
                json!({ "error": e.to_string() }),
            ),
        }
    }
}

async fn list_partition(client: &CellClient, key: &str) -> Result<Vec<(u64, String)>, String> {
    let id = resource(key);
    let mut out = Vec::new();
    loop {
        let page = client
            .ledger_list(pb::LedgerListRequest {
                owner: id.owner.clone(),
                name: id.name.clone(),
                partition: Some(id.key.clone()),
                after_seq: out.last().map_or(0, |(s, _)| *s),
                limit: 1000,
            })
            .await
            .map_err(|e| e.to_string())?;
        if page.entries.is_empty() {
            return Ok(out);
        }
        out.extend(
            page.entries
                .into_iter()
                .map(|e| (e.seq, String::from_utf8_lossy(&e.entry).into_owned())),
        );
    }
}
