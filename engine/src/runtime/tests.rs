//! Runtime tests on the in-memory fabric: the seed programs end to end, a race of two
//! steppers on one instance, and projections rebuilt from the event log.

use std::sync::Arc;

use serde_json::{Value, json};
use whip_fabric::{FabricClient, MemFabric};

use super::state::EventKind;
use super::stepper::round;
use super::*;
use crate::runtime::state::Status;

fn seed(name: &str) -> Program {
    let path = format!(
        "{}/tests/check/valid/{name}.whip",
        env!("CARGO_MANIFEST_DIR")
    );
    Program::load(std::path::Path::new(&path), None).expect("seed checks")
}

fn engine(fabric: &Arc<MemFabric>) -> Engine<MemFabric> {
    Engine::new(Arc::clone(fabric))
}

fn note(r: &RunReport) -> Value {
    r.terminal
        .as_ref()
        .map_or(Value::Null, |t| t.1["note"].clone())
}

#[tokio::test]
async fn seeds_behave_as_the_book_says() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let ship = e.add_program(seed("seed_lease_ship"));
    let first = e.run(&ship, Value::Null, false).await.unwrap();
    assert_eq!(first.status, Status::Running);
    let second = e.run(&ship, Value::Null, false).await.unwrap();
    assert_eq!(
        (second.status.code(), note(&second)),
        ("completed", json!("skipped: deploy slot busy"))
    );
    let leases = fabric.lease_list(String::new()).await.unwrap();
    assert_eq!(leases[0].holders[0].holder, first.id);
    e.transition(&first.id, Status::Cancelled).await.unwrap();
    assert!(
        fabric.lease_list(String::new()).await.unwrap().is_empty(),
        "cancel frees the lease"
    );

    let budget = e.add_program(seed("seed_counter_budget"));
    let one = e.run(&budget, Value::Null, false).await.unwrap();
    assert_eq!(note(&one), json!("budget applied"));
    let two = e.run(&budget, Value::Null, false).await.unwrap();
    assert_eq!(note(&two), json!("nothing fit today's budget"));
    let counters = fabric.counter_list(String::new()).await.unwrap();
    assert_eq!(counters[0].consumed, 60);

    let decisions = e.add_program(seed("seed_ledger_decisions"));
    for _ in 0..2 {
        let r = e.run(&decisions, Value::Null, false).await.unwrap();
        assert_eq!(note(&r), json!("decision recorded"));
    }
    let entries = fabric
        .ledger_list(
            "local/Decisions".into(),
            "decisions".into(),
            Some("deploys".into()),
            0,
            0,
        )
        .await
        .unwrap();
    assert_eq!(
        entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let err = e.transition(&one.id, Status::Paused).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot transition instance from completed to paused"
    );
    assert_eq!(
        e.load("ins_nope").await.unwrap_err().to_string(),
        "unknown instance ins_nope"
    );
}

#[tokio::test]
async fn two_racing_steppers_cannot_both_commit() {
    let fabric = Arc::new(MemFabric::new());
    let (a, b) = (engine(&fabric), engine(&fabric));
    let program = a.add_program(seed("seed_counter_budget"));
    b.add_program(seed("seed_counter_budget"));
    let id = a
        .start(&program, None, Value::Null, None, None)
        .await
        .unwrap();
    let mut seen_a = a.load(&id).await.unwrap();
    let mut seen_b = b.load(&id).await.unwrap();
    let wf = program.root().unwrap();
    let draft_a = round(&program, wf, &seen_a.state).expect("a round is ready");
    let draft_b = round(&program, wf, &seen_b.state).expect("a round is ready");
    assert!(
        a.commit(&mut seen_a, draft_a).await.unwrap(),
        "the first commit wins"
    );
    assert!(
        !b.commit(&mut seen_b, draft_b).await.unwrap(),
        "the second is refused"
    );
    // The loser re-reads and finds the firing already committed.
    let events = a.events(&id).await.unwrap();
    let firings = events
        .iter()
        .filter(|e| e.kind == EventKind::RuleCommitted)
        .count();
    assert_eq!(firings, 1, "only the winner committed");
    // The loser's step goes on from the winner's commit: it fires the other job only.
    assert_eq!(b.step(&id).await.unwrap(), 1);
    let events = a.events(&id).await.unwrap();
    let keys: Vec<&Value> = events
        .iter()
        .filter(|e| e.kind == EventKind::RuleCommitted)
        .map(|e| &e.data["firing"]["key"])
        .collect();
    assert_eq!(keys, vec![&json!("0:f000001"), &json!("0:f000002")]);
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "the log has no gaps"
    );
}

#[tokio::test]
async fn projections_rebuild_from_the_log() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    for name in [
        "seed_lease_ship",
        "seed_counter_budget",
        "seed_ledger_decisions",
    ] {
        let program = e.add_program(seed(name));
        let r = e.run(&program, Value::Null, false).await.unwrap();
        let stored = e.load(&r.id).await.unwrap().state;
        let rebuilt = State::rebuild(&e.events(&r.id).await.unwrap());
        assert_eq!(rebuilt.header, stored.header, "{name}");
        assert_eq!(rebuilt.facts, stored.facts, "{name}");
        assert_eq!(rebuilt.effects, stored.effects, "{name}");
        assert_eq!(rebuilt.firings, stored.firings, "{name}");
        assert_eq!(rebuilt.conts, stored.conts, "{name}");
        assert_eq!(rebuilt.runs, stored.runs, "{name}");
    }
}

#[tokio::test]
async fn a_reclaimed_run_does_not_append_twice() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let program = e.add_program(seed("seed_ledger_decisions"));
    let id = e
        .start(&program, None, Value::Null, None, None)
        .await
        .unwrap();
    e.step(&id).await.unwrap();
    let loaded = e.load(&id).await.unwrap();
    let effect = loaded.state.effects.values().next().unwrap().clone();
    // A worker applied the append (the very request the engine builds for the effect),
    // then died before recording the run's terminal.
    let state::Args::Append(args) = &effect.args else {
        panic!("not an append: {:?}", effect.args);
    };
    let request = whip_fabric::AppendRequest {
        ledger: whip_fabric::ResourceId {
            owner: "local/Decisions".into(),
            name: "decisions".into(),
            key: "deploys".into(),
        },
        entry: args.entry.to_string().into_bytes(),
        appended_by: id.clone(),
        retain_ms: args.retain_ms,
    };
    let key = format!("{id}/{}/a{}", effect.id, effect.attempt);
    fabric.ledger_append(request, key).await.unwrap();
    // Another worker runs the effect: same idempotency key, so the cell answers the
    // recorded outcome and nothing is appended again.
    let r = e.drive(&id, false).await.unwrap();
    assert_eq!(r.status, Status::Completed);
    let entries = fabric
        .ledger_list("local/Decisions".into(), "decisions".into(), None, 0, 0)
        .await
        .unwrap();
    assert_eq!(entries.len(), 1);
}

#[tokio::test]
async fn tracker_backlog_files_claims_and_finishes_on_the_fabric() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let backlog = e.add_program(seed("tracker_backlog"));
    let r = e.run(&backlog, Value::Null, false).await.unwrap();
    assert_eq!((r.status.code(), note(&r)), ("completed", json!("done")));
    let issues = e.issues(Some("backlog")).await.unwrap();
    assert_eq!(issues.len(), 1);
    let issue = &issues[0];
    assert_eq!(
        (
            issue.id.as_str(),
            issue.status.as_str(),
            issue.owner.as_str()
        ),
        ("WS-1", "closed", "local/Triage")
    );
    assert_eq!(issue.closed_by.as_deref(), Some(r.id.as_str()));
    assert_eq!(issue.summary["summary"], json!("rotated WS-1"));
}

#[tokio::test]
async fn two_claimants_race_for_one_issue_and_exactly_one_wins() {
    use super::tracker::ClaimOutcome;
    let fabric = Arc::new(MemFabric::new());
    let e = Arc::new(engine(&fabric));
    let fields = json!({"title": "race"});
    let issue = e
        .issue_file("shared", "backlog", &fields, "test", "t/file")
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for who in ["alice", "bob", "carol", "dave"] {
        let (e, id) = (Arc::clone(&e), issue.id.clone());
        tasks.push(tokio::spawn(async move {
            e.issue_claim(&id, who, 60_000, &format!("claim/{who}"))
                .await
                .unwrap()
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        if let ClaimOutcome::Claimed { issue, .. } = t.await.unwrap() {
            winners.push(issue);
        }
    }
    assert_eq!(winners.len(), 1);
    let shown = e.issue_read(&issue.id).await.unwrap();
    assert_eq!(shown.fence, winners[0].fence);
    assert_eq!(shown.deliveries, 1, "one claim, no second delivery");
}

#[tokio::test]
async fn a_stale_fence_cannot_finish() {
    use super::tracker::{ClaimOutcome, IssueOp};
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let issue = e
        .issue_file("shared", "backlog", &json!({"title": "t"}), "test", "f")
        .await
        .unwrap();
    // alice's claim lapses at once; bob claims with a greater fence.
    let ClaimOutcome::Claimed { issue: first, .. } =
        e.issue_claim(&issue.id, "alice", 1, "c1").await.unwrap()
    else {
        panic!("alice claims the open issue");
    };
    let old = first.fence;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let ClaimOutcome::Claimed { issue: held, .. } =
        e.issue_claim(&issue.id, "bob", 60_000, "c2").await.unwrap()
    else {
        panic!("bob claims the lapsed issue");
    };
    let current = held.fence;
    assert!(current > old, "{current} > {old}");
    let finish = IssueOp::Finish {
        summary: Value::Null,
    };
    let err = e
        .issue_apply(&issue.id, "alice", Some(old), finish.clone(), "fin-a")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("fence {old} is stale, current is {current}")
    );
    let err = e
        .issue_apply(&issue.id, "alice", None, finish.clone(), "fin-a2")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("claimed by bob"), "{err}");
    let unchanged = e.issue_read(&issue.id).await.unwrap();
    assert_eq!(unchanged.status, "open");
    let done = e
        .issue_apply(&issue.id, "bob", Some(current), finish, "fin-b")
        .await
        .unwrap();
    assert_eq!(done.status, "closed");
}

#[tokio::test]
async fn a_cancelled_instance_gives_its_tracker_claims_back() {
    let text = r#"
use std.tracker

@service
workflow Hold

class Lost {
  id string
}

tracker backlog {
  provider builtin
}

rule grab
  when backlog has ready issue as item
=> {
  claim item ttl 10m as held

  after held fails {
    record Lost {
      id item.id
    }
  }
}
"#;
    let program = Program::check(program::Source {
        path: "hold.whip".into(),
        text: text.into(),
        root: None,
    })
    .expect("checks");
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let hold = e.add_program(program);
    let fields = json!({"title": "keep me"});
    let filed = e
        .issue_file("local/Hold", "backlog", &fields, "test", "file-1")
        .await
        .unwrap();
    let r = e.run(&hold, Value::Null, false).await.unwrap();
    let held = e.issue_read(&filed.id).await.unwrap();
    let now = now_ms();
    assert_eq!(
        held.live_claim(now).map(|c| c.claimant.as_str()),
        Some(r.id.as_str()),
        "the instance holds the issue"
    );
    e.transition(&r.id, state::Status::Cancelled).await.unwrap();
    let back = e.issue_read(&filed.id).await.unwrap();
    assert!(back.ready(now_ms()), "released on cancel: {back:?}");
    assert_eq!(back.deliveries, 1);
}

fn live_runs(fabric: &MemFabric) -> Vec<whip_fabric::work::WorkEntryView> {
    let list = whip_board_query(fabric);
    list.into_iter()
        .filter(|e| e.kind == whip_fabric::work::WorkKind::Run)
        .collect()
}

fn whip_board_query(fabric: &MemFabric) -> Vec<whip_fabric::work::WorkEntryView> {
    let query = whip_fabric::Query::WorkList {
        parent: None,
        limit: 0,
    };
    match fabric.read(query) {
        whip_fabric::QueryResult::WorkEntries(rows) => rows,
        other => panic!("{other:?}"),
    }
}

/// Each running instance is a `run` entry of the registry; a `stop` on the entry cancels
/// the instance at its next worker pass, and a finished instance leaves the registry.
#[tokio::test]
async fn instances_are_registered_and_a_stop_cancels_them() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let ship = e.add_program(seed("seed_lease_ship"));
    let first = e.run(&ship, Value::Null, false).await.unwrap();
    assert_eq!(first.status, Status::Running);
    let runs = live_runs(&fabric);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let header = e.load(&first.id).await.unwrap().state.header;
    assert_eq!(header.work.as_deref(), Some(runs[0].id.as_str()));
    // A second run completes at once (the slot is busy) and leaves no entry behind.
    let second = e.run(&ship, Value::Null, false).await.unwrap();
    assert_eq!(second.status, Status::Completed);
    e.settle_removals().await;
    assert_eq!(live_runs(&fabric).len(), 1);
    let stop = whip_fabric::Command::WorkSignal {
        id: runs[0].id.clone(),
        signal: whip_fabric::work::Signal::Stop,
    };
    fabric.apply(stop, String::new()).unwrap();
    // The next renewal hears the stop (this process renewed a moment ago and would hear it
    // within WORK_RENEW_MS; another worker process hears it at once).
    let other = engine(&fabric);
    other.work(&first.id).await.unwrap();
    other.settle_removals().await;
    let after = e.load(&first.id).await.unwrap().state.header;
    assert_eq!(after.status, Status::Cancelled);
    assert!(
        live_runs(&fabric).is_empty(),
        "a cancelled instance leaves the registry"
    );
}

/// With room for one live entry, instances run back to back are each admitted: a finished
/// instance's entry goes in the background, and a refusal met while it is still going is
/// asked again once it is out.
#[tokio::test]
async fn back_to_back_instances_fit_a_limit_of_one_entry() {
    let fabric = Arc::new(MemFabric::new());
    let one = whip_fabric::Command::WorkLimitsSet {
        update: whip_board::work::LimitsUpdate {
            cell_max: Some(1),
            ..Default::default()
        },
    };
    fabric.apply(one, String::new()).unwrap();
    let e = engine(&fabric);
    let decisions = e.add_program(seed("seed_ledger_decisions"));
    for _ in 0..5 {
        let run = e.run(&decisions, Value::Null, false).await.unwrap();
        assert_eq!(run.status, Status::Completed, "{run:?}");
    }
    e.settle_removals().await;
    assert!(
        live_runs(&fabric).is_empty(),
        "every finished instance left"
    );
}

/// A run folds into the commit before what the next commit would have carried: the start
/// carries the first round and the claims of the effects it made, and the record of a pass
/// carries the round its results enable (the workflow observes nothing between rounds).
/// The same events as a start, then steps and worker passes, in three writes fewer.
#[tokio::test]
async fn a_run_commits_rounds_and_claims_with_the_commit_before_them() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let decisions = e.add_program(seed("seed_ledger_decisions"));
    let applied = || async { fabric.wait_change(Vec::new(), 0, 0).await.unwrap().unwrap() };
    // The program's rows are stored once per process: the first run stores them.
    e.run(&decisions, Value::Null, false).await.unwrap();
    e.settle_removals().await;

    let before = applied().await;
    let driven = e.run(&decisions, Value::Null, false).await.unwrap();
    e.settle_removals().await;
    let by_run = applied().await - before;
    assert_eq!(driven.status, Status::Completed);

    let before = applied().await;
    let id = e
        .start(&decisions, None, Value::Null, None, None)
        .await
        .unwrap();
    for _ in 0..10 {
        e.step(&id).await.unwrap();
        e.work(&id).await.unwrap();
        e.step(&id).await.unwrap();
        if e.load(&id).await.unwrap().state.header.status.is_terminal() {
            break;
        }
    }
    e.settle_removals().await;
    let by_steps = applied().await - before;
    assert_eq!(
        e.load(&id).await.unwrap().state.header.status,
        Status::Completed
    );
    assert_eq!(
        by_run + 3,
        by_steps,
        "three writes fewer ({by_run} against {by_steps})"
    );
    let kinds = |events: Vec<state::Event>| -> Vec<EventKind> {
        events.into_iter().map(|event| event.kind).collect()
    };
    let stepped = kinds(e.events(&id).await.unwrap());
    assert_eq!(kinds(e.events(&driven.id).await.unwrap()), stepped);
}

/// `run_id` again with the id of an instance that exists (a `whip run` retried after its
/// store went away) starts nothing and drives what is stored.
#[tokio::test]
async fn a_run_retried_with_its_id_drives_the_stored_instance() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let decisions = e.add_program(seed("seed_ledger_decisions"));
    let id = Some("ins_retried".to_string());
    let first = e
        .run_id(&decisions, Value::Null, id.clone(), false)
        .await
        .unwrap();
    let again = e.run_id(&decisions, Value::Null, id, false).await.unwrap();
    assert_eq!(
        (first.status, again.status),
        (Status::Completed, Status::Completed)
    );
    assert_eq!(again.id, "ins_retried");
    assert_eq!(again.terminal, first.terminal);
    let started = e.events(&again.id).await.unwrap();
    let starts = started
        .iter()
        .filter(|event| event.kind == EventKind::ExternalStarted)
        .count();
    assert_eq!(starts, 1, "one start: {started:?}");
}

/// A child workflow's entry sits under its parent's; a stop on the parent's entry reaches
/// the child through its lineage.
#[tokio::test]
async fn a_child_instance_is_registered_under_its_parent() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let path = format!(
        "{}/tests/check/valid/then_chain_child.whip",
        env!("CARGO_MANIFEST_DIR")
    );
    let program = Program::load(std::path::Path::new(&path), Some("Shop")).expect("checks");
    let shop = e.add_program(program);
    let input = json!({"order": {"id": "o-1", "amount": 5, "priority": "Normal"}});
    let run = e.run(&shop, input, false).await.unwrap();
    assert_eq!(run.status, Status::Running, "the child waits on its timer");
    let runs = live_runs(&fabric);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let parent = runs
        .iter()
        .find(|r| r.parent.is_none())
        .expect("the parent's entry");
    let child = runs
        .iter()
        .find(|r| r.parent.is_some())
        .expect("the child's entry");
    assert_eq!(child.lineage, std::slice::from_ref(&parent.id));
    let stop = whip_fabric::Command::WorkSignal {
        id: parent.id.clone(),
        signal: whip_fabric::work::Signal::Stop,
    };
    fabric.apply(stop, String::new()).unwrap();
    let other = engine(&fabric);
    let child_id = fabric_child_instance(&e, &run.id).await;
    other.work(&child_id).await.unwrap();
    let child_header = e.load(&child_id).await.unwrap().state.header;
    assert_eq!(child_header.status, Status::Cancelled);
}

/// The instance id of `parent`'s one child.
async fn fabric_child_instance(e: &Engine<MemFabric>, parent: &str) -> String {
    let loaded = e.load(parent).await.unwrap();
    let invoke = loaded
        .state
        .effects
        .values()
        .find(|effect| effect.kind() == state::EffectKind::Invoke)
        .expect("an invoke effect");
    super::worker::child_id(parent, invoke)
}

fn assert_projection(stored: &State, rebuilt: &State) {
    assert_eq!(rebuilt.header, stored.header);
    assert_eq!(rebuilt.facts, stored.facts);
    assert_eq!(rebuilt.effects, stored.effects);
    assert_eq!(rebuilt.firings, stored.firings);
    assert_eq!(rebuilt.conts, stored.conts);
    assert_eq!(rebuilt.runs, stored.runs);
    assert_eq!(rebuilt.cuts, stored.cuts);
}

#[tokio::test]
async fn restore_rewinds_to_the_cut_releases_later_leases_and_folds_from_the_log() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let ship = e.add_program(seed("seed_lease_ship"));
    let id = e.start(&ship, None, Value::Null, None, None).await.unwrap();
    let cut = e.checkpoint(&id, Some("before")).await.unwrap().cut;
    let at_cut = e.load(&id).await.unwrap().state;
    // Past the cut: the rule fires, the lease is held, the deploy timer waits.
    e.drive(&id, false).await.unwrap();
    let head = e.load(&id).await.unwrap().state;
    assert!(head.effects.len() >= 2, "acquire and timer requested");
    assert_eq!(fabric.lease_list(String::new()).await.unwrap().len(), 1);
    let dup = e.checkpoint(&id, Some("before")).await.unwrap_err();
    assert!(
        dup.to_string().contains("already has a cut before"),
        "{dup}"
    );
    let unknown = e.restore(&id, "nope").await.unwrap_err();
    assert!(unknown.to_string().contains("has no cut nope"), "{unknown}");

    let restored = e.restore(&id, &cut.id).await.unwrap();
    assert_eq!(
        restored.auto_checkpoint,
        format!("auto-{}", head.header.last_seq)
    );
    assert_eq!(restored.released.len(), 1, "{:?}", restored.released);
    assert!(fabric.lease_list(String::new()).await.unwrap().is_empty());
    let now = e.load(&id).await.unwrap().state;
    assert_eq!(now.facts, at_cut.facts);
    assert_eq!(now.effects, at_cut.effects);
    assert_eq!(now.firings, at_cut.firings);
    assert!(now.cuts.contains_key("before") && now.cuts.contains_key(&restored.auto_checkpoint));
    let events = e.events(&id).await.unwrap();
    assert_projection(&now, &State::rebuild(&events));
    assert_eq!(super::trace::check(&events), None);

    // The rewound instance runs again from the cut: a fresh acquire holds the lease anew.
    e.drive(&id, false).await.unwrap();
    assert_eq!(fabric.lease_list(String::new()).await.unwrap().len(), 1);
    // And the head before the restore is itself a cut to go back to.
    e.restore(&id, &restored.auto_checkpoint).await.unwrap();
    let back = e.load(&id).await.unwrap().state;
    assert_eq!(back.facts, head.facts);
    assert_projection(&back, &State::rebuild(&e.events(&id).await.unwrap()));
    e.transition(&id, Status::Cancelled).await.unwrap();
    let refused = e.checkpoint(&id, None).await.unwrap_err();
    assert!(
        refused.to_string().contains("terminal instance"),
        "{refused}"
    );
}

const JOB_V1: &str = r#"
workflow Job

output result Done

class Task {
  name string
}

class Done {
  note string
}

table tasks as Task [
  {
    name "a"
  }
]

rule work
  when Task as t
=> {
  timer 1s as wait

  after wait completes {
    done t
    complete result {
      note "v1"
    }
  }
}
"#;

fn job(text: &str) -> Program {
    Program::check(Source {
        path: "job.whip".into(),
        text: text.into(),
        root: None,
    })
    .expect("job checks")
}

fn job_v2() -> Program {
    let text = JOB_V1
        .replace("  name string\n", "  name string\n  owner string?\n")
        .replace(
            "rule work",
            "class Audit {\n  name string\n}\n\nrule audit\n  when Task as t\n=> {\n  \
             record Audit {\n    name t.name\n  }\n}\n\nrule work",
        )
        .replace("note \"v1\"", "note \"v2\"");
    job(&text)
}

#[tokio::test]
async fn revise_keeps_old_work_on_its_version_and_new_commits_on_the_new() {
    use super::revise::CancelPolicy;
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let v1 = e.add_program(job(JOB_V1));
    let r = e.run(&v1, Value::Null, false).await.unwrap();
    assert_eq!(r.status, Status::Running, "the timer waits");

    let dry = e.revise(&r.id, job_v2(), None).await.unwrap();
    assert!(dry.compatible, "{:?}", dry.reasons);
    assert_eq!(
        (dry.applied, dry.rules_added.clone()),
        (None, vec!["audit".to_string()])
    );
    assert!(
        dry.schema
            .iter()
            .any(|c| c.change == "field_added" && !c.breaking)
    );
    assert_eq!(dry.in_flight.len(), 1, "the timer");
    assert_eq!(
        e.load(&r.id).await.unwrap().state.header.epoch,
        0,
        "a dry run changes nothing"
    );

    let broken = job(&JOB_V1
        .replace("  name string\n", "  title string\n")
        .replace("name \"a\"", "title \"a\""));
    let refused = e
        .revise(&r.id, broken, Some(CancelPolicy::Keep))
        .await
        .unwrap();
    assert!(!refused.compatible && refused.applied.is_none());
    assert!(
        refused.reasons.iter().any(|x| x.contains("field removed")),
        "{:?}",
        refused
    );

    let applied = e
        .revise(&r.id, job_v2(), Some(CancelPolicy::Keep))
        .await
        .unwrap();
    assert_eq!(
        (applied.applied, applied.epoch),
        (Some(CancelPolicy::Keep), 1)
    );
    let done = e.drive(&r.id, true).await.unwrap();
    assert_eq!(
        (done.status.code(), note(&done)),
        ("completed", json!("v1"))
    );
    let st = e.load(&r.id).await.unwrap().state;
    assert_eq!(st.live("Audit").count(), 1, "the new rule fired once");
    assert_eq!(st.header.epoch, 1);
    let events = e.events(&r.id).await.unwrap();
    assert_projection(&st, &State::rebuild(&events));
    assert_eq!(super::trace::check(&events), None);
    let fired: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::RuleCommitted)
        .collect();
    assert_eq!(
        fired.len(),
        3,
        "work, audit, work's after: no second work firing"
    );
}

#[tokio::test]
async fn revise_with_cancel_queued_cancels_the_old_versions_queued_work() {
    use super::revise::CancelPolicy;
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let v1 = e.add_program(job(JOB_V1));
    let other = e.run(&v1, Value::Null, false).await.unwrap();
    let cut = e
        .revise(&other.id, job_v2(), Some(CancelPolicy::Queued))
        .await
        .unwrap();
    assert_eq!(cut.in_flight[0].queued, "cancelled");
    let st = e.load(&other.id).await.unwrap().state;
    assert!(
        st.effects
            .values()
            .all(|x| x.state == state::EffectState::Cancelled)
    );
}
/// Team `council` on the in-memory fabric: `engine` (the fabric's caller) supervises and
/// `ann` is a coordinator; both registered.
fn council(fabric: &MemFabric) {
    use whip_fabric::Command;
    use whip_fabric::access::{Caller, agent_key};
    let as_agent = |name: &str, command: Command| {
        fabric
            .apply_as(Caller::Agent(name.into()), command, String::new())
            .unwrap()
    };
    for name in ["engine", "ann"] {
        let put = Command::KvPut {
            key: agent_key(name),
            value: b"salt$hash".to_vec(),
            expect_version: None,
        };
        fabric.apply_as(Caller::Server, put, String::new()).unwrap();
    }
    let create = Command::TeamCreate {
        team: "council".into(),
        caller: "engine".into(),
        parent: None,
        ancestors: Vec::new(),
        settings: Default::default(),
    };
    as_agent("engine", create);
    let join = Command::TeamJoin {
        team: "council".into(),
        caller: "engine".into(),
        agent: "ann".into(),
    };
    as_agent("engine", join);
    let role = Command::TeamRole {
        team: "council".into(),
        member: "ann".into(),
        role: whip_fabric::vote::Role::Coordinator,
    };
    as_agent("engine", role);
}

/// A `vote` effect opens its proposal, waits while it is open, and completes with the
/// result once a tick at the closing time counted it: `after v passed as r` fires.
#[tokio::test]
async fn a_vote_waits_for_its_result_and_passes() {
    use whip_fabric::access::Caller;
    let fabric = Arc::new(MemFabric::new());
    council(&fabric);
    let e = engine(&fabric);
    let program = e.add_program(seed("vote_council"));
    let first = e.run(&program, Value::Null, false).await.unwrap();
    assert_eq!(first.status, Status::Running, "the proposal is open");
    let loaded = e.load(&first.id).await.unwrap();
    let effect = loaded.state.effects.values().next().unwrap().clone();
    let proposal = effect.output.as_ref().unwrap()["proposal"]
        .as_str()
        .expect("the effect keeps its proposal")
        .to_string();
    for voter in ["ann", "engine"] {
        let cast = whip_fabric::Command::VoteCast {
            proposal: proposal.clone(),
            choice: vec!["ship".into()],
        };
        let voted = fabric.apply_as(Caller::Agent(voter.into()), cast, String::new());
        assert!(matches!(
            voted,
            Ok(whip_fabric::Outcome::BallotAccepted { .. })
        ));
    }
    // The closing time is 1 s away: tick until the proposal is counted, then drive.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let report = loop {
        let tick = whip_fabric::Command::Tick;
        fabric
            .apply_as(Caller::Server, tick, String::new())
            .unwrap();
        let report = e.drive(&first.id, false).await.unwrap();
        if report.status != Status::Running {
            break report;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the vote never settled"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        (report.status.code(), note(&report)),
        ("completed", json!("passed: ship"))
    );
}

/// A caller that is not a coordinator of the team cannot open a proposal: the effect fails
/// and `after v fails` takes over.
#[tokio::test]
async fn a_vote_the_caller_may_not_open_fails() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let program = e.add_program(seed("vote_council"));
    let report = e.run(&program, Value::Null, false).await.unwrap();
    assert_eq!(
        (report.status.code(), note(&report)),
        ("completed", json!("the vote could not be held"))
    );
}

/// Overwrite the stored row of effect `x000001` of `id` with `edit` applied to it.
async fn tamper(fabric: &MemFabric, id: &str, edit: impl FnOnce(&mut Value)) {
    let row = key(&["e/", &tag(id), "/s/x/x000001"]);
    let entry = fabric
        .engine_get(row.clone())
        .await
        .unwrap()
        .expect("the row");
    let mut value: Value = serde_json::from_slice(&entry.value).unwrap();
    edit(&mut value);
    let ops = whip_fabric::TxnOps {
        puts: vec![(row, serde_json::to_vec(&value).unwrap())],
        ..Default::default()
    };
    fabric.engine_txn(ops, fresh_id("tamper_")).await.unwrap();
}

#[tokio::test]
async fn a_stored_effect_row_with_malformed_arguments_fails_instead_of_running_on_defaults() {
    // (seed, the field taken out of its first effect's arguments, the kind)
    let cases = [
        ("seed_lease_ship", "ttl_ms", "acquire"),
        ("seed_counter_budget", "cap", "consume"),
        ("seed_ledger_decisions", "retain_ms", "append"),
    ];
    for (name, field, kind) in cases {
        let fabric = Arc::new(MemFabric::new());
        let e = engine(&fabric);
        let program = e.add_program(seed(name));
        let id = e
            .start(&program, None, Value::Null, None, None)
            .await
            .unwrap();
        e.step(&id).await.unwrap();
        tamper(&fabric, &id, |row| {
            assert_eq!(row["kind"], kind, "{name}");
            row["args"].as_object_mut().unwrap().remove(field);
        })
        .await;
        let loaded = e.load(&id).await.unwrap();
        let x = &loaded.state.effects["x000001"];
        assert!(
            matches!(x.args, state::Args::Malformed(_)),
            "{name}: {:?}",
            x.args
        );
        e.work(&id).await.unwrap();
        let x = e.load(&id).await.unwrap().state.effects["x000001"].clone();
        assert_eq!(x.state, state::EffectState::Failed, "{name}");
        let output = x.output.unwrap();
        assert_eq!(output["reason"], "malformed_args", "{name}");
        let error = output["error"].as_str().unwrap();
        let want = format!("malformed {kind} arguments: missing field `{field}`");
        assert!(error.starts_with(&want), "{name}: {error}");
        // Nothing reached the fabric on a default (the counter seed's other job consumes).
        assert!(fabric.lease_list(String::new()).await.unwrap().is_empty());
        if kind == "append" {
            let ledger =
                fabric.ledger_list("local/Decisions".into(), "decisions".into(), None, 0, 0);
            assert!(ledger.await.unwrap().is_empty(), "{name}");
        }
    }
}

#[tokio::test]
async fn an_unreadable_effect_row_refuses_the_load_instead_of_vanishing() {
    let fabric = Arc::new(MemFabric::new());
    let e = engine(&fabric);
    let program = e.add_program(seed("seed_lease_ship"));
    let id = e
        .start(&program, None, Value::Null, None, None)
        .await
        .unwrap();
    e.step(&id).await.unwrap();
    tamper(&fabric, &id, |row| row["kind"] = json!("teleport")).await;
    let err = e.load(&id).await.unwrap_err().to_string();
    assert!(
        err.contains("row x/x000001 is unreadable") && err.contains("teleport"),
        "{err}"
    );
}
