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
use super::*;

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
        (r.status.as_str(), payload(&r)),
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
    assert_eq!(r.status, "failed");
    assert_eq!(
        payload(&r),
        json!({"reason": "owned failed with exit code Some(42)"})
    );
    for forced in [Forced::Timeout, Forced::Cancel] {
        let (st, r) = run(WRITER, Some(forced)).await;
        assert_eq!(r.status, "running", "{forced:?}: idle, not failed");
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
