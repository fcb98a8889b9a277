//! Goal: the language corners of issue 36 (classes 1–6) behave at run time as LANGUAGE.md
//! and LANGUAGE-AGENTS.md say.
//!
//! Method: each test checks a small program from source, runs it on the in-memory fabric
//! with the real stepper and worker (no mocks), and reads the terminal payload or the
//! instance's effect rows.

use std::sync::Arc;

use serde_json::{Value, json};
use whip_fabric::MemFabric;

use super::effect::EffectState;
use super::state::EventKind;
use super::*;
use crate::runtime::state::Status;

fn program(text: &str) -> Program {
    Program::check(Source {
        path: "corner.whip".into(),
        text: text.into(),
        root: None,
    })
    .unwrap_or_else(|e| panic!("the program checks: {e:?}"))
}

async fn run(text: &str) -> (Engine<MemFabric>, RunReport) {
    let e = Engine::new(Arc::new(MemFabric::new()));
    let p = e.add_program(program(text));
    let report = e.run(&p, Value::Null, false).await.expect("the run");
    (e, report)
}

fn payload(r: &RunReport) -> Value {
    r.terminal.as_ref().map_or(Value::Null, |t| t.1.clone())
}

const DOTTED_KINDS: &str = r#"
workflow W
output result Done
class Done { held int timers int short int }
class Job { id string }
class Held { id string }
table jobs as Job [ { id "a" } ]
lease slot { key Job ttl 10m }

rule go when Job as j => {
  done j
  acquire slot for j.id as s
  after s held {
    release s
    record Held { id j.id }
  }
  after s contended { fail error { reason "busy" } }
}

rule fin when Held as h where count(effect kind lease.acquire where status == completed) == 1
=> {
  done h
  complete result {
    held count(effect kind lease.acquire where status == completed)
    timers count(effect kind timer.wait)
    short count(effect kind acquire)
  }
}
failure error { reason string }
"#;

#[tokio::test]
async fn dotted_effect_kinds_select_the_same_rows_as_short_ones() {
    let (_, r) = run(DOTTED_KINDS).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    assert_eq!(payload(&r), json!({"held": 1, "timers": 0, "short": 1}));
}

#[tokio::test]
async fn a_string_literal_left_of_in_is_an_ordinary_string() {
    let text = r#"
workflow W
output result Done
class Done { hit bool miss bool }
rule go when started => {
  complete result { hit "b" in ["a", "b"] miss "x" in ["a", "b"] }
}
"#;
    let (_, r) = run(text).await;
    assert_eq!(payload(&r), json!({"hit": true, "miss": false}));
}

const INVOKE: &str = r#"
class Order { id string amount int }
class Receipt { order string charged int }
class Tip { n int }

workflow Charge(order: Order, tip: Tip) -> Receipt {
  rule charge when Order as o when Tip as t => {
    done o
    complete result { order o.id charged o.amount + t.n }
  }
}

workflow Shop {
  output result Receipt
  rule buy when started => {
    invoke Charge { order { id "o1" amount 7 } tip { n 1 } } as c
    after c succeeds as r { record Receipt { order r.order charged r.charged } }
    after c fails { record Receipt { order "failed" charged 0 } }
  }
  rule wrapped when started => {
    invoke Charge { input { order { id "o2" amount 9 } tip { n 2 } } } as c
    after c succeeds as r { record Receipt { order r.order charged r.charged } }
    after c fails { record Receipt { order "failed" charged 0 } }
  }
  rule both when Receipt as a where a.order == "o1" when Receipt as b where b.order == "o2" => {
    complete result { order "{{ a.order }}+{{ b.order }}" charged a.charged + b.charged }
  }
}
"#;

#[tokio::test]
async fn invoke_arguments_are_keyed_by_the_childs_inputs() {
    let text = format!("# root\n{INVOKE}");
    let p = Program::check(Source {
        path: "invoke.whip".into(),
        text,
        root: Some("Shop".into()),
    })
    .unwrap_or_else(|e| panic!("the program checks: {e:?}"));
    let e = Engine::new(Arc::new(MemFabric::new()));
    let p = e.add_program(p);
    let r = e.run(&p, Value::Null, false).await.expect("the run");
    assert_eq!(r.status, Status::Completed, "{r:?}");
    // o1 by the unwrapped form (7 + 1), o2 by the `input { … }` wrapper (9 + 2).
    assert_eq!(payload(&r), json!({"order": "o1+o2", "charged": 19}));
}

const AFTER_SCOPE: &str = r#"
workflow W
output result Done
class Done { note string seen string }
class Job { id string }
table jobs as Job [ { id "a" } ]
ledger audit { entry Job partition by id retain 1d }

rule go when Job as j => {
  done j
  append Job { id j.id } to audit as first
  after first completes as f {
    append Job { id "second" } to audit as second
  }
  // Rule level, on an effect started inside the block above: it reads `j` and `f`, the
  // values on `second`'s chain.
  after second completes {
    complete result { note "after {{ j.id }}" seen f.outcome }
  }
}
"#;

#[tokio::test]
async fn a_rule_level_after_waits_on_an_effect_started_in_another_after_block() {
    let (_, r) = run(AFTER_SCOPE).await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    assert_eq!(payload(&r)["note"], json!("after a"));
    assert_eq!(
        payload(&r)["seen"],
        json!("appended"),
        "`f` is on the chain"
    );
}

const CANCEL: &str = r#"
workflow W
output result Done
class Done { note string }
class Job { id string }
ledger audit { entry Job partition by id retain 1d }

rule go when started => {
  timer 1h as reminder
  append Job { id "x" } to audit as mark
  after mark completes {
    cancel reminder
    cancel mark
  }
  after reminder cancelled { complete result { note "reminder cancelled" } }
  after reminder succeeds { complete result { note "reminder fired" } }
}
"#;

#[tokio::test]
async fn cancel_cancels_a_queued_effect_and_leaves_a_settled_one_alone() {
    let (e, r) = run(CANCEL).await;
    assert_eq!(payload(&r), json!({"note": "reminder cancelled"}), "{r:?}");
    let events = e.events(&r.id).await.expect("events");
    let cancels: Vec<&Value> = events
        .iter()
        .filter(|ev| ev.kind == EventKind::EffectCancelled)
        .map(|ev| &ev.data)
        .collect();
    assert_eq!(cancels.len(), 1, "only the queued timer: {cancels:?}");
    assert_eq!(cancels[0]["reason"], json!("cancelled by rule"));
    let st = e.load(&r.id).await.expect("load").state;
    let states: Vec<(Option<String>, EffectState)> = st
        .effects
        .values()
        .map(|x| (x.binding.clone(), x.state))
        .collect();
    assert!(states.contains(&(Some("reminder".into()), EffectState::Cancelled)));
    assert!(states.contains(&(Some("mark".into()), EffectState::Completed)));
}

const RECORD_FROM: &str = r#"
workflow W
output result Done
failure error { reason string }
class Done { id string size int }
class Job { id string size int note string? }
class Copy { id string size int note string? }
table jobs as Job [ { id "a" size 3 } ]
ledger audit { entry Job partition by id retain 1d }

rule go when Job as j => {
  done j
  record Copy from j { size 4 }
}

rule fin when Copy as c => {
  complete result { id c.id size c.size }
}
"#;

#[tokio::test]
async fn record_from_copies_an_objects_fields_with_overrides() {
    let (_, r) = run(RECORD_FROM).await;
    assert_eq!(payload(&r), json!({"id": "a", "size": 4}), "{r:?}");
}

#[tokio::test]
async fn record_from_an_untyped_value_without_a_required_field_fails_the_instance() {
    let text = RECORD_FROM.replace(
        "record Copy from j { size 4 }",
        "append Job { id j.id size 1 } to audit as m\n  \
         after m completes as o { record Copy from o }",
    );
    let (_, r) = run(&text).await;
    assert_eq!(r.status, Status::Failed, "{r:?}");
    assert_eq!(
        payload(&r),
        json!("rule go records Copy from a value without required field `id`")
    );
}

const EXEC_TYPED: &str = r#"
use std.script
workflow W
output result Done
failure error { reason string }
class Done { n int words string }
class Got { n int }

rule typed when started => {
  exec "echo {{ 4 }}" -> int as r
  after r succeeds as n { record Got { n n } }
  after r fails as f { fail error { reason f.error } }
}

rule words when Got as g => {
  exec "printf '%s|%s' 'a b' c" as w
  after w succeeds as out { complete result { n g.n words out.stdout } }
  after w fails as f { fail error { reason f.error } }
}
"#;

/// A real `whip executor` on loopback, and an engine bound to it.
async fn with_executor() -> (Engine<MemFabric>, tempfile::TempDir) {
    use crate::executor::ExecutorConfig;
    use crate::executor::server::ExecutorServer;
    let root = tempfile::tempdir().expect("tempdir");
    let token = "lang-corners-token";
    let server = ExecutorServer::open(root.path(), token).expect("executor");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(server.serve(listener, std::future::pending()));
    let config = ExecutorConfig {
        url,
        token: token.into(),
    };
    let e = Engine::new(Arc::new(MemFabric::new())).with_executor(Some(config));
    (e, root)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_a_command_string_without_a_shell_and_types_its_result() {
    let (e, _root) = with_executor().await;
    let text = EXEC_TYPED.replace("{{ 4 }}", "4");
    let p = e.add_program(program(&text));
    let r = e.run(&p, Value::Null, false).await.expect("the run");
    assert_eq!(r.status, Status::Completed, "{r:?}");
    // `'a b'` is one argument and `|` inside quotes is text: no shell ran the command.
    assert_eq!(payload(&r), json!({"n": 4, "words": "a b|c"}));

    let text = EXEC_TYPED.replace("{{ 4 }}", "four");
    let p = e.add_program(program(&text));
    let r = e.run(&p, Value::Null, false).await.expect("the run");
    assert_eq!(r.status, Status::Failed, "{r:?}");
    let reason = payload(&r)["reason"].clone();
    assert!(
        reason
            .as_str()
            .is_some_and(|s| s.starts_with("the result does not fit its type")),
        "{reason}"
    );
}

#[tokio::test]
async fn timer_until_a_past_instant_fires_and_its_arm_cancels_the_reminder() {
    let path = format!(
        "{}/tests/check/valid/timer_until.whip",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).expect("the golden");
    let (e, r) = run(&text).await;
    assert_eq!(payload(&r), json!({"note": "deadline passed"}), "{r:?}");
    let st = e.load(&r.id).await.expect("load").state;
    let state_of = |b: &str| {
        st.effects
            .values()
            .find(|x| x.binding.as_deref() == Some(b))
            .map(|x| x.state)
    };
    assert_eq!(state_of("deadline"), Some(EffectState::Completed));
    assert_eq!(state_of("reminder"), Some(EffectState::Cancelled));
    assert_eq!(state_of("later"), Some(EffectState::Cancelled));
}

#[tokio::test]
async fn a_tool_workflow_runs_as_the_root() {
    let path = format!(
        "{}/tests/check/valid/tool_leaf.whip",
        env!("CARGO_MANIFEST_DIR")
    );
    let p = Program::check(Source {
        path: "tool_leaf.whip".into(),
        text: std::fs::read_to_string(path).expect("the golden"),
        root: Some("It".into()),
    })
    .unwrap_or_else(|e| panic!("the program checks: {e:?}"));
    let e = Engine::new(Arc::new(MemFabric::new()));
    let p = e.add_program(p);
    let r = e
        .run(&p, json!({"ask": {"q": "hi"}}), false)
        .await
        .expect("the run");
    assert_eq!(payload(&r), json!({"a": "answered hi"}), "{r:?}");
}
