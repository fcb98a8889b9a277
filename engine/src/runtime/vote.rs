//! The `vote` effect: open a proposal in a team as the instance's agent, then wait for its
//! result. The first pass opens it (one idempotency key per attempt) and keeps its id in
//! the effect's output; later passes read it until it closed, then the effect completes
//! with the outcome (`passed`, `failed`, `no_quorum`), the winner and the counts. A
//! refusal (not a coordinator, an unknown team, malformed rules) fails the effect.

use serde_json::{Value, json};
use whip_fabric::tally::{Fraction, Method, Threshold};
use whip_fabric::vote::{ProposalView, Role, Rules};
use whip_fabric::{FabricClient, VoteAnswer};

use super::state::Effect;
use super::worker::Ran;
use super::{Engine, Result, now_ms};
use crate::limits::VOTE_POLL_MS;

/// The rules an effect's arguments name; `Err` says which is malformed.
fn rules(a: &Value) -> std::result::Result<Rules, String> {
    let word = |field: &str| a[field].as_str().unwrap_or_default();
    let method = Method::parse(word("method"))
        .ok_or_else(|| format!("method {:?} is not a tally method", word("method")))?;
    let list = |field: &str| -> Vec<String> {
        a[field].as_array().map_or(Vec::new(), |v| {
            v.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
    };
    let mut electorate = list("electorate")
        .iter()
        .map(|r| Role::parse(r).ok_or_else(|| format!("role {r:?} is not coordinator or worker")))
        .collect::<std::result::Result<Vec<Role>, String>>()?;
    if electorate.is_empty() {
        electorate.push(Role::Coordinator);
    }
    Ok(Rules {
        title: word("title").to_string(),
        options: list("options"),
        method,
        electorate,
        quorum: Fraction::parse(word("quorum")).map_err(|e| format!("quorum: {e}"))?,
        threshold: Threshold::parse(word("threshold")).map_err(|e| format!("threshold: {e}"))?,
        duration_ms: a["duration_ms"].as_u64().unwrap_or(0),
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
    Ran::Terminal {
        state: "failed".into(),
        output: json!({"error": message, "reason": reason}),
    }
}

impl<F: FabricClient> Engine<F> {
    /// Run a `vote` effect (see the module doc).
    pub(crate) async fn execute_vote(&self, e: &Effect, idem: &str) -> Result<Ran> {
        let opened = e.output.as_ref().and_then(|o| o["proposal"].as_str());
        let Some(proposal) = opened else {
            return self.open_vote(e, idem).await;
        };
        let Some(view) = self.fabric.vote_show(proposal.to_string()).await? else {
            return Ok(failed(
                "unknown_proposal",
                format!("proposal {proposal} is gone"),
            ));
        };
        if let Some(output) = result_output(&view) {
            return Ok(Ran::Terminal {
                state: "completed".into(),
                output,
            });
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

    async fn open_vote(&self, e: &Effect, idem: &str) -> Result<Ran> {
        let rules = match rules(&e.args) {
            Ok(rules) => rules,
            Err(reason) => return Ok(failed("invalid_rules", reason)),
        };
        let team = e.args["team"].as_str().unwrap_or_default().to_string();
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
