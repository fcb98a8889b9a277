//! The `turns` workload: WhippleScript agent turns under a capacity bound while the workers
//! that run them die mid-turn (issue 36).
//!
//! One instance after another of [`PROGRAM`]: [`TURNS`] turns of agent `w`, capacity
//! [`CAPACITY`], on the fixture provider taking [`TURN_MS`] each. [`WORKERS`] engines, each
//! with its own client of the nodes, pass over the instance together; each pass is cut off
//! at a random moment ([`KILL_AFTER_MS`]) half of the time, as a worker killed mid-turn: what
//! it had claimed stays `running` under its run lease. Every [`RECOVER_EVERY_MS`] a
//! worker runs `recover`, which ends a cut-off turn whose lease lapsed as failed
//! (`runtime.recovery_uncertain`, never run again by surprise); the program treats any
//! terminal of a turn as done, so the instance completes.
//!
//! History, on the key `turns/{instance}`: `start`, and one `final` with the instance's
//! status and, in commit order, each turn's run starts (effect, attempt) and terminals
//! (with their state: a turn a killed worker left is `failed` by `recover`).
//! The checks ([`check_turns`]):
//!
//! 1. **No capacity overrun.** Walking the log in commit order (+1 at a turn's run start,
//!    −1 at its terminal), never more than [`CAPACITY`] turns run at once.
//! 2. **No turn run twice without a retry.** At most one run start per turn and attempt.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};
use whip_cell::CellClient;
use whip_engine::runtime::provider::FixtureProvider;
use whip_engine::runtime::state::EventKind;
use whip_engine::runtime::{Engine, EngineConfig, Program};

use super::history::Recorder;
use super::history::{Kind, Op, format_ops};
use super::invariants::Violation;
use super::workload::{Shared, Worker};

/// Turns per instance.
pub const TURNS: usize = 6;
/// The agent's capacity.
pub const CAPACITY: i64 = 2;
/// How long one fixture turn takes.
pub const TURN_MS: u64 = 150;
/// Engines passing over each instance.
pub const WORKERS: usize = 3;
/// A cut-off pass dies within this long of its start.
pub const KILL_AFTER_MS: (u64, u64) = (20, 400);
/// How often a worker recovers the runs of dead workers.
pub const RECOVER_EVERY_MS: u64 = 1_000;
/// A run lease: a cut-off turn is recoverable this long after its start.
pub const RUN_LEASE_MS: u64 = 1_500;
/// How long one instance may take before the workload records it unfinished.
pub const INSTANCE_DEADLINE_MS: u64 = 60_000;

/// The program every instance runs.
pub fn program() -> String {
    let mut text = String::from(
        "use std.agent\nworkflow Turns\noutput result Done\nclass Done { n int }\n\
         class Ended { id string }\nagent w { provider fixture capacity 2 }\n\
         rule go when started => {\n",
    );
    for i in 1..=TURNS {
        text.push_str(&format!("  tell w \"turn {i}\" as t{i}\n"));
        text.push_str(&format!(
            "  after t{i} completes {{ record Ended {{ id \"{i}\" }} }}\n"
        ));
    }
    text.push_str(&format!(
        "}}\nrule finish when Ended as x where count(Ended) == {TURNS} => {{\n  \
         complete result {{ n {TURNS} }}\n}}\n"
    ));
    text
}

type Eng = Engine<CellClient>;

/// The checked program.
fn checked() -> Result<Program, String> {
    let source = whip_engine::runtime::program::Source {
        path: "turns.whip".into(),
        text: program(),
        root: None,
    };
    Program::check(source)
}

fn engines(w: &Worker) -> Result<Vec<Eng>, String> {
    let config = EngineConfig {
        concurrency: CAPACITY as usize + 1,
        run_lease_ms: RUN_LEASE_MS,
    };
    let mut out = Vec::new();
    for _ in 0..WORKERS {
        let client = Arc::new(w.connect().ok_or("cannot connect")?);
        let fixture = FixtureProvider::default().with_turn_ms(TURN_MS);
        let engine = Engine::new(client)
            .with_config(config)
            .with_provider(Arc::new(fixture));
        engine.add_program(checked()?);
        out.push(engine);
    }
    Ok(out)
}

/// Run instances one after another until the stop flag (and the one in flight after it).
pub(super) async fn run(shared: Shared, seed: u64) -> Result<(), String> {
    let mut w = Worker::new(shared, seed)?;
    let engines = engines(&w)?;
    let program = engines[0].add_program(checked()?);
    let recorder = w.recorder();
    while !w.stopped() {
        let process = recorder.new_process();
        let id = whip_engine::runtime::fresh_id("ins_");
        let key = format!("turns/{id}");
        recorder.record(process, Kind::Invoke, "start", &key, Value::Null);
        let started = engines[0].start(&program, None, Value::Null, None, Some(id.clone()));
        if let Err(e) = started.await {
            recorder.record(
                process,
                Kind::Info,
                "start",
                &key,
                json!({ "error": e.to_string() }),
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        recorder.record(process, Kind::Ok, "start", &key, json!({ "id": id }));
        drive(&mut w, &engines, &id).await;
        final_read((&recorder, process), &engines[0], &id, &key).await;
    }
    Ok(())
}

/// Pass over instance `id` with every engine, cutting passes off at random, until it ends
/// or its deadline passes.
async fn drive(w: &mut Worker, engines: &[Eng], id: &str) {
    let deadline = Instant::now() + Duration::from_millis(INSTANCE_DEADLINE_MS);
    let mut recovered = Instant::now();
    while Instant::now() < deadline {
        let passes = engines.iter().map(|e| {
            let cut = w.rng.random_bool(0.5);
            let after = w.rng.random_range(KILL_AFTER_MS.0..=KILL_AFTER_MS.1);
            async move {
                let pass = async {
                    let _ = e.work(id).await;
                    let _ = e.step(id).await;
                };
                match cut {
                    true => drop(tokio::time::timeout(Duration::from_millis(after), pass).await),
                    false => pass.await,
                }
            }
        });
        futures::future::join_all(passes).await;
        if recovered.elapsed() >= Duration::from_millis(RECOVER_EVERY_MS) {
            let _ = engines[0].recover(id).await;
            recovered = Instant::now();
        }
        let done = engines[0]
            .load(id)
            .await
            .map(|l| l.state.header.status.is_terminal());
        if done.unwrap_or(false) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Record the instance's status and its turns' run starts and terminals in commit order.
async fn final_read((recorder, process): (&Recorder, u64), engine: &Eng, id: &str, key: &str) {
    recorder.record(process, Kind::Invoke, "final", key, Value::Null);
    let (Ok(loaded), Ok(events)) = (engine.load(id).await, engine.events(id).await) else {
        let error = json!({ "error": "unreadable" });
        recorder.record(process, Kind::Info, "final", key, error);
        return;
    };
    let tells: Vec<&String> = (loaded.state.effects.iter())
        .filter(|(_, e)| e.kind().code() == "agent.tell")
        .map(|(id, _)| id)
        .collect();
    let walk: Vec<Value> = (events.iter())
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::EffectRunStarted | EventKind::EffectTerminal
            )
        })
        .filter(|e| {
            e.data["id"]
                .as_str()
                .is_some_and(|x| tells.iter().any(|t| *t == x))
        })
        .map(|e| {
            json!({"seq": e.seq, "kind": e.kind.code(), "id": e.data["id"],
            "attempt": e.data["attempt"], "state": e.data["state"]})
        })
        .collect();
    let status = loaded.state.header.status.code();
    let value = json!({ "status": status, "turns": tells.len(), "walk": walk });
    recorder.record(process, Kind::Ok, "final", key, value);
}

/// Check the `turns` history (see the module docs).
pub fn check_turns(ops: &[Op]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for op in ops.iter().filter(|o| o.f == "final" && o.kind == Kind::Ok) {
        let walk = op.output["walk"].as_array().cloned().unwrap_or_default();
        let (mut running, mut most) = (0i64, 0i64);
        let mut starts: BTreeMap<(String, u64), usize> = BTreeMap::new();
        for step in &walk {
            let id = step["id"].as_str().unwrap_or_default().to_string();
            match step["kind"].as_str() {
                Some("effect.run_started") => {
                    running += 1;
                    most = most.max(running);
                    let attempt = step["attempt"].as_u64().unwrap_or_default();
                    *starts.entry((id, attempt)).or_default() += 1;
                }
                Some("effect.terminal") => running -= 1,
                _ => {}
            }
        }
        if most > CAPACITY {
            violations.push(violation(
                op,
                format!("{most} turns ran at once (capacity {CAPACITY})"),
            ));
        }
        for ((id, attempt), n) in starts.into_iter().filter(|(_, n)| *n > 1) {
            let what = format!("turn {id} attempt {attempt} started {n} times without a retry");
            violations.push(violation(op, what));
        }
    }
    violations
}

fn violation(op: &Op, what: String) -> Violation {
    Violation {
        workload: "turns".into(),
        key: op.key.clone(),
        message: what,
        history: format_ops(&[op]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn final_op(walk: Value) -> Op {
        Op {
            process: 1,
            kind: Kind::Ok,
            f: "final".into(),
            key: "turns/ins_1".into(),
            input: Value::Null,
            output: json!({"status": "completed", "walk": walk}),
            call: 1,
            ret: 2,
        }
    }

    fn step(kind: &str, id: &str, attempt: u64) -> Value {
        json!({"kind": kind, "id": id, "attempt": attempt})
    }

    #[test]
    fn an_overrun_and_a_double_start_are_found_and_a_clean_walk_passes() {
        let clean = [
            step("effect.run_started", "x1", 0),
            step("effect.run_started", "x2", 0),
            step("effect.terminal", "x1", 0),
            step("effect.run_started", "x3", 0),
        ];
        assert!(check_turns(&[final_op(json!(clean))]).is_empty());
        let over = [
            step("effect.run_started", "x1", 0),
            step("effect.run_started", "x2", 0),
            step("effect.run_started", "x3", 0),
        ];
        assert_eq!(check_turns(&[final_op(json!(over))]).len(), 1);
        let twice = [
            step("effect.run_started", "x1", 0),
            step("effect.terminal", "x1", 0),
            step("effect.run_started", "x1", 0),
        ];
        let found = check_turns(&[final_op(json!(twice))]);
        assert_eq!(found.len(), 1, "{found:?}");
        let retried = [
            step("effect.run_started", "x1", 0),
            step("effect.terminal", "x1", 0),
            step("effect.run_started", "x1", 1),
        ];
        assert!(check_turns(&[final_op(json!(retried))]).is_empty());
    }

    #[test]
    fn the_program_checks() {
        assert!(checked().is_ok(), "{:?}", checked().err());
    }
}
