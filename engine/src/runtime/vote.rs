//! The `vote` effect: open a proposal in a team as the instance's agent, then wait for its
//! result. The first pass opens it (one idempotency key per attempt) and keeps its id in
//! the effect's output; later passes read it until it closed, then the effect completes
//! with the outcome (`passed`, `failed`, `no_quorum`), the winner and the counts. A
//! refusal (not a coordinator, an unknown team, malformed rules) fails the effect.

use serde_json::{Value, json};
use whip_fabric::tally::{Fraction, Method, Threshold};
use whip_fabric::vote::{ProposalView, Role, Rules};
use whip_fabric::{FabricClient, VoteAnswer};

use super::effect::VoteArgs;
use super::state::Effect;
use super::worker::Ran;
use super::{Engine, Result, now_ms};
use crate::limits::VOTE_POLL_MS;

/// The rules a vote effect's arguments name; `Err` says which is malformed.
fn rules(a: &VoteArgs) -> std::result::Result<Rules, String> {
    let method = Method::parse(&a.method)
        .ok_or_else(|| format!("method {:?} is not a tally method", a.method))?;
    let mut electorate = a
        .electorate
        .iter()
        .map(|r| Role::parse(r).ok_or_else(|| format!("role {r:?} is not coordinator or worker")))
        .collect::<std::result::Result<Vec<Role>, String>>()?;
    if electorate.is_empty() {
        // Rows written before the stepper applied the default electorate.
        electorate.push(Role::Coordinator);
    }
    Ok(Rules {
        title: a.title.clone(),
        options: a.options.clone(),
        method,
        electorate,
        quorum: Fraction::parse(&a.quorum).map_err(|e| format!("quorum: {e}"))?,
        threshold: Threshold::parse(&a.threshold).map_err(|e| format!("threshold: {e}"))?,
        duration_ms: a.duration_ms,
        until_all_voted: false,
    })
}

/// The effect's output once its proposal closed.
fn result_output(view: &ProposalView) -> Option<Value> {
    let result = view.result.as_ref()?;
    let leader = result
        .leader
        .and_then(|i| view.rules.options.get(usize::from(i)));
    Some(json!({
        "outcome": result.outcome.code(), "proposal": view.id, "winner": view.winner(),
        "leader": leader, "ballots": view.ballots, "voters": result.voters,
        "electorate": result.electorate, "support": result.support, "base": result.base,
    }))
}

fn failed(reason: &str, message: String) -> Ran {
    Ran::refused(reason, message)
}

impl<F: FabricClient> Engine<F> {
    /// Run a `vote` effect (see the module doc).
    pub(crate) async fn execute_vote(&self, e: &Effect, a: &VoteArgs, idem: &str) -> Result<Ran> {
        let opened = e.output.as_ref().and_then(|o| o["proposal"].as_str());
        let Some(proposal) = opened else {
            return self.open_vote(a, idem).await;
        };
        let Some(view) = self.fabric.vote_show(proposal.to_string()).await? else {
            return Ok(failed(
                "unknown_proposal",
                format!("proposal {proposal} is gone"),
            ));
        };
        if let Some(output) = result_output(&view) {
            return Ok(Ran::completed(output));
        }
        let now = now_ms();
        // Wake at the closing time (or the next poll); past it, the tick is due any moment.
        let wake = match view.closes_at_ms > now {
            true => view.closes_at_ms.min(now + VOTE_POLL_MS),
            false => now + VOTE_POLL_MS / 10,
        };
        Ok(Ran::Voting {
            proposal: proposal.to_string(),
            not_before_ms: wake,
        })
    }

    async fn open_vote(&self, a: &VoteArgs, idem: &str) -> Result<Ran> {
        let rules = match rules(a) {
            Ok(rules) => rules,
            Err(reason) => return Ok(failed("invalid_rules", reason)),
        };
        let team = a.team.clone();
        match self.fabric.vote_open(team, rules, idem.to_string()).await {
            Ok(VoteAnswer::Opened {
                proposal,
                closes_at_ms,
            }) => Ok(Ran::Voting {
                proposal,
                not_before_ms: closes_at_ms.min(now_ms() + VOTE_POLL_MS),
            }),
            Ok(VoteAnswer::Refused { reason, message }) => Ok(failed(&reason, message)),
            Err(whip_fabric::FabricError::Invalid(reason)) => Ok(failed("invalid_rules", reason)),
            Err(other) => Err(other.into()),
        }
    }
}
