//! Goal: the golden programs of LANGUAGE-AGENTS.md §7 end as the spec says with the fixture
//! provider, completing and forced (`--fail`, `--timeout`, `--cancel`).
//!
//! Method: each test checks a program from source and runs it on the in-memory fabric with
//! the real stepper, worker and fixture provider (no mocks), then reads the terminal, the
//! status and the effect rows.

use std::sync::Arc;

use serde_json::{Value, json};
use whip_fabric::MemFabric;

use super::effect::{Args, EffectKind, EffectState};
use super::provider::{FixtureProvider, Forced};
use super::state::EventKind;
use super::*;
use crate::runtime::state::Status;

fn program(text: &str, root: Option<&str>) -> Program {
    Program::check(Source {
        path: "agents.whip".into(),
        text: text.into(),
        root: root.map(str::to_string),
    })
    .unwrap_or_else(|e| panic!("the program checks: {e}"))
}

async fn run_as(text: &str, root: Option<&str>, forced: Option<Forced>) -> (State, RunReport) {
    let provider = Arc::new(FixtureProvider::new(forced));
    let e = Engine::new(Arc::new(MemFabric::new())).with_provider(provider);
    let p = e.add_program(program(text, root));
    let report = e.run(&p, Value::Null, true).await.expect("the run");
    let state = e.load(&report.id).await.expect("the instance").state;
    // Every run's lifecycle conforms, and its rows are the projection of its log.
    let events = e.events(&report.id).await.expect("the log");
    assert_eq!(trace::check(&events), None, "{events:#?}");
    assert_eq!(
        State::rebuild(&events),
        state,
        "rows are the log's projection"
    );
    (state, report)
}

async fn run(text: &str, forced: Option<Forced>) -> (State, RunReport) {
    run_as(text, None, forced).await
}

fn payload(r: &RunReport) -> Value {
    r.terminal.as_ref().map_or(Value::Null, |t| t.1.clone())
}

const CHAIN: &str = r#"
use std.coercion
workflow Chain
output result Done
class Done { note string }
class Decision { verdict "merge" | "revise" }
coerce review(text string) -> Decision "Review {{ text }}. {{ ctx.output_format }}"

rule go
  when started
=> {
  coerce review("patch") as rv
  after rv succeeds as d { timer 1s as pause }
  after pause succeeds {
    case d.verdict {
      "merge" => { complete result { note "merged" } }
      "revise" => { complete result { note "revised" } }
    }
  }
  after rv fails { complete result { note "failed" } }
}
"#;

#[tokio::test]
async fn chain_merges_and_a_failed_coercion_takes_the_fails_branch() {
    let (st, r) = run(CHAIN, None).await;
    assert_eq!(
        (r.status.code(), payload(&r)),
        ("completed", json!({"note": "merged"}))
    );
    let coerce = st
        .effects
        .values()
        .find(|e| e.kind() == EffectKind::SchemaCoerce)
        .expect("the coercion");
    let Args::SchemaCoerce(args) = &coerce.args else {
        panic!("coerce arguments: {:?}", coerce.args);
    };
    assert!(
        args.prompt
            .starts_with("Review patch. Respond with a single JSON value")
    );
    assert!(
        args.prompt.contains("\"enum\":[\"merge\",\"revise\"]") || args.prompt.contains("merge")
    );
    assert!(
        st.facts
            .values()
            .any(|f| f.class == "schema.coerce.succeeded")
    );
    let (_, r) = run(CHAIN, Some(Forced::Fail)).await;
    assert_eq!(payload(&r), json!({"note": "failed"}));
}

const WRITER: &str = r#"
use std.agent
workflow Write
output result Done
failure error Failed
class Done { summary string }
class Failed { reason string }
agent writer

rule go when started => {
  tell writer timeout 10m """markdown
    Write the release notes.
    """ as turn
  after turn succeeds as out { complete result { summary out.summary } }
  after turn fails as f { fail error { reason f.reason } }
}
"#;

#[tokio::test]
async fn a_bare_agent_is_owned_and_each_forced_terminal_ends_as_the_spec_says() {
    let (st, r) = run(WRITER, None).await;
    assert_eq!(payload(&r), json!({"summary": "owned completed"}));
    let tell = st
        .effects
        .values()
        .find(|e| e.kind() == EffectKind::AgentTell);
    let Some(Args::AgentTell(t)) = tell.map(|e| &e.args) else {
        panic!("the turn");
    };
    assert_eq!(t.prompt_content_type.as_deref(), Some("markdown"));
    assert_eq!((t.profile.as_str(), t.capacity), ("no-repo", 1));
    let (_, r) = run(WRITER, Some(Forced::Fail)).await;
    assert_eq!(r.status, Status::Failed);
    assert_eq!(
        payload(&r),
        json!({"reason": "owned failed with exit code Some(42)"})
    );
    for forced in [Forced::Timeout, Forced::Cancel] {
        let (st, r) = run(WRITER, Some(forced)).await;
        assert_eq!(r.status, Status::Running, "{forced:?}: idle, not failed");
        let settled = st
            .effects
            .values()
            .find(|e| e.kind() == EffectKind::AgentTell);
        let want = match forced {
            Forced::Timeout => EffectState::TimedOut,
            _ => EffectState::Cancelled,
        };
        assert_eq!(settled.map(|e| e.state), Some(want));
    }
}

const OUTCOMES: &str = r#"
workflow Outcomes
output result Done
class Done { tag string summary string }
agent fixer { provider fixture }

rule go when started => {
  tell fixer "fix it" as turn
  after turn completes {
    case turn {
      Completed as ok => { complete result { tag "completed" summary ok.summary } }
      Failed as f => { complete result { tag "failed" summary f.reason } }
      TimedOut as late => { complete result { tag "timed_out" summary late.summary } }
      Cancelled as gone => { complete result { tag "cancelled" summary gone.summary } }
    }
  }
}
"#;

#[tokio::test]
async fn the_terminal_output_case_takes_the_arm_of_each_outcome() {
    let cases = [
        (None, "completed", "fixture completed"),
        (
            Some(Forced::Fail),
            "failed",
            "fixture failed with exit code Some(42)",
        ),
        (
            Some(Forced::Timeout),
            "timed_out",
            "timed_out native provider event from fixture.turn.timed_out",
        ),
        (
            Some(Forced::Cancel),
            "cancelled",
            "cancelled native provider event from fixture.turn.cancelled",
        ),
    ];
    for (forced, tag, summary) in cases {
        let (_, r) = run(OUTCOMES, forced).await;
        assert_eq!(
            payload(&r),
            json!({"tag": tag, "summary": summary}),
            "{forced:?}"
        );
    }
}

const JUDGE: &str = r#"
use std.coercion
workflow Judge
output result Done
class Done { note string }
class Verdict { priority "urgent" | "routine" reason string }
coerce judge(title string) -> Verdict "Judge {{ title }}: {{ ctx.output_format }}"

rule go when started => {
  coerce judge("disk full") as v
  after v succeeds as j {
    case j.priority {
      "urgent" => { complete result { note j.reason } }
      "routine" => { complete result { note "routine" } }
    }
  }
  after v fails as f { complete result { note f.reason } }
}
"#;

#[tokio::test]
async fn a_coerced_union_is_matched_by_case_and_a_forced_failure_gives_its_reason() {
    let (st, r) = run(JUDGE, None).await;
    assert_eq!(payload(&r), json!({"note": "fixture"}));
    assert!(
        st.facts
            .values()
            .any(|f| f.class == "schema.coerce.succeeded" && f.value["function"] == "judge")
    );
    let (st, r) = run(JUDGE, Some(Forced::Fail)).await;
    assert_eq!(payload(&r), json!({"note": "coerce failed"}));
    let failed = st
        .facts
        .values()
        .find(|f| f.class == "schema.coerce.failed");
    let failed = failed.expect("the failure's fact").value.clone();
    assert_eq!(
        (
            &failed["error_class"],
            &failed["http_status"],
            &failed["kind"]
        ),
        (
            &json!("provider_error"),
            &Value::Null,
            &json!("schema.coerce")
        )
    );
    let text = JUDGE.replace(
        "      \"routine\" => { complete result { note \"routine\" } }\n",
        "",
    );
    let refused = Program::check(Source {
        path: "judge.whip".into(),
        text,
        root: None,
    });
    let error = refused.expect_err("a case without `routine` is refused");
    assert!(
        error.contains("rule `go` has non-exhaustive case; missing routine"),
        "{error}"
    );
}

const ROWS: &str = r#"
use std.agent
workflow Rows
output result Done
class Done { n int }
class Row { id string }
class Wrote { id string }
agent writer { capacity 1 }
table rows as Row [ { id "a" } { id "b" } { id "c" } ]

rule write when Row as r when writer is available => {
  done r
  tell writer "write row {{ r.id }}" as t
  after t succeeds { record Wrote { id r.id } }
  after t fails { record Wrote { id r.id } }
}

rule finish when Wrote as w where count(Wrote) == 3 => {
  complete result { n count(Wrote) }
}

assert count(effect kind agent.tell where status == completed) == 3
"#;

#[tokio::test]
async fn availability_gates_one_turn_at_a_time_and_all_three_rows_are_written() {
    let e = Engine::new(Arc::new(MemFabric::new()));
    let p = e.add_program(program(ROWS, None));
    let id = e.start(&p, None, Value::Null, None, None).await.unwrap();
    e.step(&id).await.unwrap();
    let st = e.load(&id).await.unwrap().state;
    let tells = |st: &State| {
        st.effects
            .values()
            .filter(|x| x.kind() == EffectKind::AgentTell)
            .count()
    };
    assert_eq!(tells(&st), 1, "the first step queues one tell");
    let r = e.drive(&id, true).await.unwrap();
    assert_eq!(
        (r.status.code(), payload(&r)),
        ("completed", json!({"n": 3}))
    );
    let st = e.load(&id).await.unwrap().state;
    let completed = st
        .effects
        .values()
        .filter(|x| x.kind() == EffectKind::AgentTell && x.state == EffectState::Completed);
    assert_eq!(completed.count(), 3);
    let prompts: Vec<String> = st
        .effects
        .values()
        .filter_map(|x| match &x.args {
            Args::AgentTell(t) => Some(t.prompt.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(prompts, ["write row a", "write row b", "write row c"]);
}

const DEADLINE: &str = r#"
workflow Deadline
output result Done
class Done { note string }
class Req { due time }
table reqs as Req [ { due "2020-01-01T00:00:00Z" } ]

rule go when Req as r => {
  done r
  timer until r.due as deadline
  timer 1h as reminder
  after deadline succeeds {
    cancel reminder
    complete result { note "deadline passed" }
  }
  after reminder succeeds { complete result { note "reminded" } }
}
"#;

#[tokio::test]
async fn a_past_deadline_fires_at_once_and_cancels_the_reminder() {
    let (st, r) = run(DEADLINE, None).await;
    assert_eq!(payload(&r), json!({"note": "deadline passed"}));
    let reminder = st
        .effects
        .values()
        .find(|x| x.binding.as_deref() == Some("reminder"));
    assert_eq!(reminder.map(|x| x.state), Some(EffectState::Cancelled));
}

const OWNERS: &str = r#"
# root
use std.agent
class Task { owner AgentRef<alice | bob> title string }
class Done { agent string summary string }
class Ask { q string }
class Answer { a string }

agent alice { provider fixture }
agent bob { provider fixture tools [It] }

@tool
workflow It(ask: Ask) -> Answer {
  rule go when Ask as x => {
    done x
    complete result { a x.q }
  }
}

workflow Assign {
  output result Done
  table tasks as Task [ { owner bob title "triage" } ]
  rule go when Task as t => {
    done t
    tell t.owner "{{ t.title }} for {{ t.owner }}" as turn
    after turn succeeds as out { complete result { agent out.agent summary out.summary } }
    after turn fails { complete result { agent "none" summary "failed" } }
  }
}
"#;

#[tokio::test]
async fn an_agent_ref_field_names_the_agent_told_and_a_tool_workflow_runs_as_root() {
    let (st, r) = run_as(OWNERS, Some("Assign"), None).await;
    assert_eq!(
        payload(&r),
        json!({"agent": "bob", "summary": "fixture completed"})
    );
    let Some(Args::AgentTell(t)) = st.effects.values().next().map(|x| &x.args) else {
        panic!("the turn");
    };
    assert_eq!(t.prompt, "triage for bob");
    let input = json!({"ask": {"q": "hi"}});
    let e = Engine::new(Arc::new(MemFabric::new()));
    let p = e.add_program(program(OWNERS, Some("It")));
    let r = e.run(&p, input, false).await.unwrap();
    assert_eq!(payload(&r), json!({"a": "hi"}));
}

/// A provider that stands for a slow model service: each turn waits for a permit, and the
/// most turns in progress at once is kept.
#[derive(Debug)]
struct Held {
    permits: tokio::sync::Semaphore,
    active: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

impl Held {
    fn new() -> Held {
        Held {
            permits: tokio::sync::Semaphore::new(0),
            active: Default::default(),
            most: Default::default(),
        }
    }
}

impl provider::Provider for Held {
    fn tell<'a>(
        &'a self,
        turn: &'a agent::TellArgs,
        _key: &'a str,
    ) -> futures::future::BoxFuture<'a, provider::ProviderOutcome> {
        use std::sync::atomic::Ordering::SeqCst;
        Box::pin(async move {
            let now = self.active.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            let permit = self.permits.acquire().await.expect("never closed");
            permit.forget();
            self.active.fetch_sub(1, SeqCst);
            FixtureProvider::default().turn(&turn.provider)
        })
    }

    fn coerce<'a>(
        &'a self,
        call: &'a agent::CoerceArgs,
        _key: &'a str,
    ) -> futures::future::BoxFuture<'a, provider::ProviderOutcome> {
        Box::pin(async move { FixtureProvider::default().coercion(&call.output) })
    }
}

const FOUR: &str = r#"
workflow Four
output result Done
class Done { n int }
class Wrote { id string }
agent w { provider fixture capacity 2 }

rule go when started => {
  tell w "1" as a
  tell w "2" as b
  tell w "3" as c
  tell w "4" as d
  after a completes { record Wrote { id "a" } }
  after b completes { record Wrote { id "b" } }
  after c completes { record Wrote { id "c" } }
  after d completes { record Wrote { id "d" } }
}

rule finish when Wrote as x where count(Wrote) == 4 => {
  complete result { n 4 }
}
"#;

#[tokio::test]
async fn two_workers_racing_on_one_instance_run_at_most_capacity_turns() {
    let fabric = Arc::new(MemFabric::new());
    let held = Arc::new(Held::new());
    let a = Engine::new(fabric.clone()).with_provider(held.clone());
    let b = Engine::new(fabric.clone()).with_provider(held.clone());
    let p = a.add_program(program(FOUR, None));
    b.add_program(program(FOUR, None));
    let id = a.start(&p, None, Value::Null, None, None).await.unwrap();
    a.step(&id).await.unwrap();
    let observe = async {
        // Wait (bounded, yielding) until both passes claimed or blocked every turn.
        for _ in 0..100_000 {
            let st = a.load(&id).await.unwrap().state;
            let count = |s: EffectState| st.effects.values().filter(|x| x.state == s).count();
            if count(EffectState::Running) + count(EffectState::BlockedByCapacity) == 4 {
                held.permits.add_permits(4);
                return st;
            }
            tokio::task::yield_now().await;
        }
        panic!("the workers never claimed the turns");
    };
    let (ra, rb, seen) = tokio::join!(a.work(&id), b.work(&id), observe);
    ra.unwrap();
    rb.unwrap();
    let running = seen
        .effects
        .values()
        .filter(|x| x.state == EffectState::Running);
    assert_eq!(running.count(), 2, "capacity 2: two turns start");
    let blocked: Vec<_> = seen
        .effects
        .values()
        .filter(|x| x.state == EffectState::BlockedByCapacity)
        .collect();
    assert_eq!(blocked.len(), 2);
    let block = blocked[0]
        .policy_block
        .as_ref()
        .expect("the block's reason");
    assert_eq!(block.detail, "agent `w` capacity exhausted (2/2 running)");
    assert_eq!(block.category, effect::BlockCategory::Capacity);
    let r = a.drive(&id, true).await.unwrap();
    assert_eq!(payload(&r), json!({"n": 4}));
    let most = held.most.load(std::sync::atomic::Ordering::SeqCst);
    assert!(most <= 2, "{most} turns ran at once");
    let events = a.events(&id).await.unwrap();
    assert_eq!(trace::check(&events), None, "the lifecycle conforms");
    assert!(events.iter().any(|e| e.kind == EventKind::EffectBlocked));
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind == EventKind::AgentTurnCompleted)
            .count(),
        4
    );
}

#[tokio::test]
async fn an_unregistered_profile_blocks_the_turn_without_failing_it() {
    let text = WRITER.replace("agent writer", "agent writer { profile \"root-shell\" }");
    let (st, r) = run_as(&text, None, None).await;
    assert_eq!(r.status, Status::Running);
    let turn = st.effects.values().next().expect("the turn");
    assert_eq!(turn.state, EffectState::BlockedByProfile);
    let block = turn.policy_block.as_ref().expect("the reason");
    assert_eq!(block.detail, "profile `root-shell` is not registered");
}

#[tokio::test]
async fn a_turn_cut_off_mid_run_is_never_run_again_and_recovers_as_uncertain() {
    let fabric = Arc::new(MemFabric::new());
    let held = Arc::new(Held::new());
    let config = EngineConfig {
        concurrency: 1,
        run_lease_ms: 1,
    };
    let a = Engine::new(fabric.clone())
        .with_provider(held.clone())
        .with_config(config);
    let p = a.add_program(program(WRITER, None));
    let id = a.start(&p, None, Value::Null, None, None).await.unwrap();
    a.step(&id).await.unwrap();
    // The worker claims the turn and is cut off inside it (its pass never finishes).
    let cut = async {
        let _ = tokio::time::timeout(std::time::Duration::from_millis(50), a.work(&id)).await;
    };
    cut.await;
    let st = a.load(&id).await.unwrap().state;
    assert_eq!(
        st.effects.values().next().map(|x| x.state),
        Some(EffectState::Running)
    );
    // Its run lease lapsed: another worker does not run it again.
    let b = Engine::new(fabric.clone()).with_provider(Arc::new(FixtureProvider::default()));
    b.add_program(program(WRITER, None));
    b.work(&id).await.unwrap();
    let st = b.load(&id).await.unwrap().state;
    assert_eq!(st.runs.len(), 1, "one run only");
    let recovery = b.recover(&id).await.unwrap();
    assert_eq!(recovery.runs[0].resolution, recover::Resolution::Uncertain);
    let st = b.load(&id).await.unwrap().state;
    assert_eq!(
        st.header.status,
        Status::Failed,
        "the rule's `fails` branch ran"
    );
    assert!(st.facts.values().any(|f| f.class == "agent.turn.failed"));
    assert_eq!(trace::check(&b.events(&id).await.unwrap()), None);
}
