//! The `vote` workload: one team opens short proposals one after another, cycling through
//! the five tally methods, while its voters cast (and recast) ballots and two agents who
//! may not vote (a worker of the team and an outsider) try too; afterwards every proposal
//! is read in full once it closed.
//!
//! The team is fixed (`--concurrency` does not change it): the supervisor and
//! [`VOTE_COORDINATORS`] coordinators form the electorate, plus a worker and an outsider.
//! Every cast has its own idempotency key and is retried with it until it answers, so an
//! unknown outcome applies at most once.
//!
//! History, on the key `vote/{proposal}`: `open`, `cast` (ok: its sequence; fail: the
//! refusal), and one `final` per proposal with the proposal as the board shows it (rules,
//! electorate, result), every listed ballot and the `vote` signals naming it. The checks
//! ([`check_vote`]):
//!
//! 1. **No acknowledged ballot missing.** Every cast answered `accepted` with sequence s is
//!    listed at s, by that voter, with that choice.
//! 2. **No ineligible ballot.** No cast of the worker or the outsider is accepted, and
//!    every listed ballot's voter is in the electorate.
//! 3. **Exactly one result.** The proposal is closed with a result, and exactly one `vote`
//!    signal names it.
//! 4. **The result recomputes.** The outcome, rounds and support recomputed from the
//!    listed ballots (the last of each voter) equal the recorded ones.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::join_all;
use rand::Rng;
use serde_json::{Value, json};
use whip_board::vote::{ProposalView, decide};
use whip_cell::{CellClient, vote_wire};
use whip_proto::v1 as pb;

use super::history::{Kind, Op, Recorder, format_ops};
use super::invariants::Violation;
use super::workload::{Done, Shared, Worker, error_done};

/// Coordinators besides the supervisor.
pub const VOTE_COORDINATORS: usize = 3;
/// How long each proposal stays open.
pub const VOTE_OPEN_MS: u64 = 2_500;
/// Ballots one voter casts on one proposal, at most.
pub const VOTE_CASTS_MAX: u64 = 3;
/// How long the final read waits for a proposal to close.
pub const VOTE_CLOSE_WAIT_MS: u64 = 30_000;
/// How long the final read listens for `vote` signals after the last one.
pub const VOTE_SIGNAL_QUIET_MS: u64 = 2_000;

const TEAM: &str = "chaos-vote";
const OPTIONS: [&str; 3] = ["a", "b", "c"];
const METHODS: [&str; 5] = ["plurality", "approval", "borda", "irv", "schulze"];

fn lead_name() -> String {
    format!("{TEAM}-lead")
}

fn voter_names() -> Vec<String> {
    let coordinators = (0..VOTE_COORDINATORS).map(|i| format!("{TEAM}-c{i}"));
    std::iter::once(lead_name()).chain(coordinators).collect()
}

fn worker_name() -> String {
    format!("{TEAM}-worker")
}

fn outsider_name() -> String {
    format!("{TEAM}-outsider")
}

fn token_of(name: &str) -> String {
    format!("{name}-token-0123456789abcdefghijklmnop")
}

fn proposal_key(proposal: &str) -> String {
    format!("vote/{proposal}")
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Retry `call` until it answers or the run stops; `None` if it stopped first.
async fn until_answered<T, F, Fut>(w: &Worker, mut call: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, whip_cell::CellError>>,
{
    while !w.stopped() {
        if let Ok(answer) = call().await {
            return Some(answer);
        }
        sleep_ms(200).await;
    }
    None
}

/// Register the team's agents, make the team and its roles; the lead's client, or `None`
/// if the run stopped first.
async fn setup(w: &Worker) -> Option<CellClient> {
    let everyone = voter_names()
        .into_iter()
        .chain([worker_name(), outsider_name()]);
    for name in everyone {
        let request = pb::AgentRegisterRequest {
            agent: name.clone(),
            token: token_of(&name),
            enroll: false,
        };
        until_answered(w, || w.client.agent_register(request.clone())).await?;
    }
    let lead = w
        .connect()?
        .with_identity(lead_name(), token_of(&lead_name()));
    let create = pb::TeamCreateRequest {
        team: TEAM.into(),
        idempotency_key: lead.next_idempotency_key(),
        ..Default::default()
    };
    until_answered(w, || lead.team_create(create.clone())).await?;
    let members = voter_names().into_iter().skip(1).chain([worker_name()]);
    for member in members {
        let join = pb::TeamJoinRequest {
            team: TEAM.into(),
            agent: member.clone(),
            idempotency_key: lead.next_idempotency_key(),
        };
        until_answered(w, || lead.team_join(join.clone())).await?;
        let role = pb::TeamRoleRequest {
            team: TEAM.into(),
            member: member.clone(),
            role: if member == worker_name() {
                "worker"
            } else {
                "coordinator"
            }
            .into(),
            idempotency_key: lead.next_idempotency_key(),
        };
        until_answered(w, || lead.team_role(role.clone())).await?;
    }
    Some(lead)
}

/// Set the team up, then open proposals one after another until the stop flag.
pub(super) async fn run_team(shared: Shared, seed: u64) -> Result<(), String> {
    let lead_worker = Worker::new(shared.clone(), seed)?;
    let Some(lead) = setup(&lead_worker).await else {
        return Ok(());
    };
    let lead = Arc::new(lead);
    let casters: Vec<String> = voter_names()
        .into_iter()
        .chain([worker_name(), outsider_name()])
        .collect();
    let mut round = 0u64;
    let mut lead_worker = lead_worker;
    while !lead_worker.stopped() {
        let method = METHODS[(round % METHODS.len() as u64) as usize];
        round += 1;
        let Some(proposal) = open(&mut lead_worker, &lead, method).await else {
            sleep_ms(200).await;
            continue;
        };
        let until = Instant::now() + Duration::from_millis(VOTE_OPEN_MS);
        let mut voting = Vec::new();
        for (i, name) in casters.iter().enumerate() {
            let w = Worker::new(
                shared.clone(),
                seed ^ (round << 32) ^ ((i as u64 + 1) << 48),
            )?;
            let client = w.connect().ok_or("cannot connect")?;
            let client = Arc::new(client.with_identity(name, token_of(name)));
            voting.push(voter(
                w,
                client,
                (name.clone(), method),
                proposal.clone(),
                until,
            ));
        }
        join_all(voting).await;
        // Past the closing time: the tick closes it.
        while !lead_worker.stopped() && Instant::now() < until {
            sleep_ms(50).await;
        }
    }
    Ok(())
}

/// Open one proposal (one idempotency key, retried until it answers); its id.
async fn open(w: &mut Worker, lead: &Arc<CellClient>, method: &str) -> Option<String> {
    let request = pb::VoteOpenRequest {
        team: TEAM.into(),
        title: format!("chaos {method}"),
        options: OPTIONS.iter().map(|o| o.to_string()).collect(),
        method: method.into(),
        quorum: "1/2".into(),
        threshold: "majority".into(),
        duration_ms: VOTE_OPEN_MS,
        idempotency_key: lead.next_idempotency_key(),
        ..Default::default()
    };
    while !w.stopped() {
        let (client, request) = (lead.clone(), request.clone());
        let input = json!({ "method": method, "key": request.idempotency_key });
        let answer = w
            .run("open", "vote/open", input, async move {
                match client.vote_open(request).await {
                    Ok(r) if r.outcome == "opened" => Done::Ok(json!({ "proposal": r.proposal })),
                    Ok(r) => Done::Fail(json!({ "reason": r.reason, "message": r.message })),
                    Err(e) => error_done(&e, false),
                }
            })
            .await;
        match w.last {
            Kind::Ok => return answer.and_then(|a| a["proposal"].as_str().map(str::to_string)),
            Kind::Fail => return None,
            Kind::Info | Kind::Invoke => {}
        }
    }
    None
}

/// A random choice for `method`: one option, a set, or a ranking.
fn random_choice(w: &mut Worker, method: &str) -> Vec<String> {
    let mut options: Vec<&str> = OPTIONS.to_vec();
    for i in (1..options.len()).rev() {
        let j = w.rng.random_range(0..=i);
        options.swap(i, j);
    }
    let take = match method {
        "plurality" => 1,
        _ => w.rng.random_range(1..=options.len()),
    };
    options[..take].iter().map(|o| o.to_string()).collect()
}

/// Cast up to [`VOTE_CASTS_MAX`] ballots before `until`.
async fn voter(
    mut w: Worker,
    me: Arc<CellClient>,
    (name, method): (String, &str),
    proposal: String,
    until: Instant,
) {
    let casts = w.rng.random_range(1..=VOTE_CASTS_MAX);
    for _ in 0..casts {
        let pause = w.rng.random_range(0..VOTE_OPEN_MS / 2);
        sleep_ms(pause).await;
        if w.stopped() || Instant::now() >= until {
            return;
        }
        let choice = random_choice(&mut w, method);
        cast(&mut w, &me, &name, &proposal, choice).await;
    }
}

/// One ballot, retried with its key until it answers (or the run stops).
async fn cast(
    w: &mut Worker,
    me: &Arc<CellClient>,
    name: &str,
    proposal: &str,
    choice: Vec<String>,
) {
    let key = me.next_idempotency_key();
    while !w.stopped() {
        let request = pb::VoteCastRequest {
            proposal: proposal.into(),
            choice: choice.clone(),
            idempotency_key: key.clone(),
        };
        let input = json!({ "voter": name, "choice": choice, "key": key });
        let client = me.clone();
        w.run("cast", &proposal_key(proposal), input, async move {
            match client.vote_cast(request).await {
                Ok(r) if r.outcome == "accepted" => Done::Ok(json!({ "seq": r.seq })),
                Ok(r) if r.outcome == "refused" => {
                    Done::Fail(json!({ "reason": r.reason, "message": r.message }))
                }
                Ok(r) => Done::Info(json!({ "outcome": r.outcome })),
                Err(e) => error_done(&e, false),
            }
        })
        .await;
        if matches!(w.last, Kind::Ok | Kind::Fail) {
            return;
        }
    }
}

/// Every proposal the history opened, read in full once closed, as one `final` each.
pub(super) async fn final_votes(recorder: &Recorder, process: u64, addrs: &[String], ops: &[Op]) {
    let proposals: Vec<String> = ops
        .iter()
        .filter(|o| o.f == "open" && o.kind == Kind::Ok)
        .filter_map(|o| o.output["proposal"].as_str().map(str::to_string))
        .collect();
    if proposals.is_empty() {
        return;
    }
    let Ok(client) = CellClient::connect(addrs) else {
        return;
    };
    let lead = client
        .with_retry_for(Duration::from_secs(30))
        .with_identity(lead_name(), token_of(&lead_name()));
    let mut signals = read_signals(&lead).await;
    for proposal in proposals {
        let key = proposal_key(&proposal);
        recorder.record(process, Kind::Invoke, "final", &key, Value::Null);
        let announced = signals.remove(&proposal).unwrap_or(0);
        match read_proposal(&lead, &proposal).await {
            Ok((view, ballots)) => {
                let output = json!({ "proposal": view, "ballots": ballots, "signals": announced });
                recorder.record(process, Kind::Ok, "final", &key, output);
            }
            Err(e) => recorder.record(process, Kind::Fail, "final", &key, json!({ "error": e })),
        }
    }
}

/// `vote` signals per proposal, read until [`VOTE_SIGNAL_QUIET_MS`] pass without one.
async fn read_signals(lead: &CellClient) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    let Ok(mut stream) = lead.signal_subscribe(TEAM.into(), "vote".into(), 0).await else {
        return counts;
    };
    let quiet = Duration::from_millis(VOTE_SIGNAL_QUIET_MS);
    while let Ok(Some(Ok(entry))) = tokio::time::timeout(quiet, stream.next()).await {
        let record: Value = serde_json::from_slice(&entry.entry).unwrap_or(Value::Null);
        if let Some(proposal) = record["proposal"].as_str() {
            *counts.entry(proposal.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

/// The proposal once closed (waiting up to [`VOTE_CLOSE_WAIT_MS`]) and all its ballots.
async fn read_proposal(lead: &CellClient, proposal: &str) -> Result<(Value, Value), String> {
    let deadline = Instant::now() + Duration::from_millis(VOTE_CLOSE_WAIT_MS);
    let view = loop {
        let show = pb::VoteShowRequest {
            proposal: proposal.into(),
        };
        let found = lead.vote_show(show).await.map_err(|e| e.to_string())?;
        let found = found.proposal.ok_or("the proposal is gone")?;
        let view = vote_wire::proposal_view(found)?;
        if view.result.is_some() || Instant::now() >= deadline {
            break view;
        }
        sleep_ms(200).await;
    };
    let mut ballots = Vec::new();
    loop {
        let request = pb::VoteBallotsRequest {
            proposal: proposal.into(),
            after_seq: ballots.last().map_or(0, |b: &pb::VoteBallot| b.seq),
            limit: 0,
        };
        let page = lead
            .vote_ballots(request)
            .await
            .map_err(|e| e.to_string())?;
        if page.ballots.is_empty() {
            break;
        }
        ballots.extend(page.ballots);
    }
    let ballots: Vec<Value> = ballots
        .into_iter()
        .map(|b| json!({ "seq": b.seq, "voter": b.voter, "choice": b.choice }))
        .collect();
    let view = serde_json::to_value(&view).map_err(|e| e.to_string())?;
    Ok((view, Value::Array(ballots)))
}

fn violation(key: &str, message: String, ops: &[&Op]) -> Violation {
    Violation {
        workload: "vote".into(),
        key: key.to_string(),
        message,
        history: format_ops(ops),
    }
}

/// Check a vote history (see the module doc).
pub fn check_vote(ops: &[Op]) -> Vec<Violation> {
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops
        .iter()
        .filter(|o| o.key.starts_with("vote/") && o.key != "vote/open")
    {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    let mut found = Vec::new();
    for (key, ops) in by_key {
        let Some(last) = ops.iter().find(|o| o.f == "final" && o.kind == Kind::Ok) else {
            found.push(violation(
                key,
                "the final read never succeeded".into(),
                &ops,
            ));
            continue;
        };
        let Ok(view) = serde_json::from_value::<ProposalView>(last.output["proposal"].clone())
        else {
            found.push(violation(
                key,
                "the final read is not a proposal".into(),
                &[last],
            ));
            continue;
        };
        let listed: Vec<(u64, String, Vec<u16>)> = last.output["ballots"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| serde_json::from_value(json!([b["seq"], b["voter"], b["choice"]])).ok())
            .collect();
        found.extend(check_ballots(key, &ops, &view, &listed));
        found.extend(check_result(key, last, &view, &listed));
    }
    found
}

/// 1 and 2: every accepted cast is listed; nobody ineligible is accepted or listed.
fn check_ballots(
    key: &str,
    ops: &[&Op],
    view: &ProposalView,
    listed: &[(u64, String, Vec<u16>)],
) -> Vec<Violation> {
    let mut found = Vec::new();
    let eligible = voter_names();
    for cast in ops.iter().filter(|o| o.f == "cast" && o.kind == Kind::Ok) {
        let voter = cast.input["voter"].as_str().unwrap_or_default();
        let seq = cast.output["seq"].as_u64().unwrap_or_default();
        if !eligible.iter().any(|v| v == voter) {
            found.push(violation(
                key,
                format!("{voter} may not vote but was accepted"),
                &[cast],
            ));
        }
        let choice: Vec<u16> = cast.input["choice"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| OPTIONS.iter().position(|o| Some(*o) == c.as_str()))
            .map(|i| i as u16)
            .collect();
        let mut expected = choice;
        if view.rules.method == whip_board::tally::Method::Approval {
            expected.sort_unstable();
        }
        if !listed
            .iter()
            .any(|(s, v, c)| *s == seq && v == voter && *c == expected)
        {
            let message = format!("{voter}'s ballot {seq} was accepted but is not listed");
            found.push(violation(key, message, &[cast]));
        }
    }
    for (seq, voter, _) in listed {
        if !view.electorate.contains(voter) || !eligible.contains(voter) {
            found.push(violation(
                key,
                format!("ballot {seq} of {voter} is listed"),
                &[],
            ));
        }
    }
    found
}

/// 3 and 4: one result, announced once, equal to the one recomputed from the ballots.
fn check_result(
    key: &str,
    last: &Op,
    view: &ProposalView,
    listed: &[(u64, String, Vec<u16>)],
) -> Vec<Violation> {
    let Some(recorded) = &view.result else {
        return vec![violation(key, "the proposal never closed".into(), &[last])];
    };
    let mut found = Vec::new();
    let signals = last.output["signals"].as_u64().unwrap_or_default();
    if signals != 1 {
        let message = format!("{signals} vote signals name the proposal, not one");
        found.push(violation(key, message, &[last]));
    }
    let mut latest: BTreeMap<&str, Vec<u16>> = BTreeMap::new();
    for (_, voter, choice) in listed {
        latest.insert(voter, choice.clone());
    }
    let ballots: Vec<Vec<u16>> = latest.into_values().collect();
    let again = decide(
        &view.rules,
        view.electorate.len(),
        &ballots,
        (recorded.closed_at_ms, recorded.reason),
    );
    if &again != recorded {
        let message = format!("recorded {recorded:?}, recomputed from the ballots {again:?}");
        found.push(violation(key, message, &[last]));
    }
    found
}
