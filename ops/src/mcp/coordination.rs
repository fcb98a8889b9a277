//! Budgets (counters), leases, ledgers, votes and a team's documents. A lease's holder
//! and a ledger entry's appender are the proven agent; a resource is shared, or a team's
//! (owned by `team/{team}`, its members' alone, as the board decides).

use serde_json::{Value, json};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use super::Agent;
use super::answer::{Answer, Refusal, fits, seconds_ms, wait_ms};
use super::params::{
    BudgetConsume, DocGet, DocPut, LeaseAcquire, LeaseRelease, LedgerAppend, Method, Reset, Role,
    VoteCast, VoteOpen, VoteShow,
};
use crate::primitives::code_name;

/// Owner namespace of a resource: the team's, or the shared one the CLI uses too.
fn owner(team: Option<&str>) -> String {
    team.map_or_else(|| "shared".to_string(), |t| format!("team/{t}"))
}

/// How long a ledger entry is kept when the call does not say: 90 days, as the CLI.
const LEDGER_RETAIN_S_DEFAULT: u64 = 90 * 24 * 3_600;

impl Reset {
    fn wire(self) -> pb::Reset {
        match self {
            Reset::Hourly => pb::Reset::Hourly,
            Reset::Daily => pb::Reset::Daily,
            Reset::Weekly => pb::Reset::Weekly,
            Reset::Monthly => pb::Reset::Monthly,
        }
    }
}

impl Method {
    /// The board's method (its stable code is the board's, one place for it).
    fn code(self) -> &'static str {
        use whip_board::tally::Method as Board;
        let method = match self {
            Method::Plurality => Board::Plurality,
            Method::Approval => Board::Approval,
            Method::Borda => Board::Borda,
            Method::Irv => Board::Irv,
            Method::Schulze => Board::Schulze,
        };
        method.code()
    }
}

impl Role {
    /// The board's role (its stable code is the board's).
    fn code(self) -> &'static str {
        use whip_board::vote::Role as Board;
        let role = match self {
            Role::Coordinator => Board::Coordinator,
            Role::Worker => Board::Worker,
        };
        role.code()
    }
}

fn lease_json(r: &pb::LeaseResponse) -> Value {
    let mut value = json!({"outcome": code_name(r.code)});
    match Code::try_from(r.code) {
        Ok(Code::LeaseHeld | Code::LeaseRenewed) => {
            value["fence"] = json!(r.fence);
            value["expires_at_ms"] = json!(r.expires_at_ms);
            value["reentered"] = json!(r.reentered);
        }
        Ok(Code::LeaseHeldDegraded) => value["degraded_reason"] = json!(r.degraded_reason),
        Ok(Code::LeaseContended) => {
            let holders: Vec<Value> = (r.holders.iter())
                .map(|h| json!({"holder": h.holder, "expires_at_ms": h.expires_at_ms}))
                .collect();
            value["holders"] = json!(holders);
        }
        Ok(Code::LeaseWaiting) => {
            value["position"] = json!(r.position);
            value["wait_until_ms"] = json!(r.wait_until_ms);
        }
        _ => {}
    }
    value
}

fn voted(r: pb::VoteResponse) -> Answer {
    if r.code() == Code::VoteRefused {
        return Err(Refusal::answered(&r.reason, &r.message));
    }
    Ok(
        json!({"outcome": r.outcome, "proposal": r.proposal, "seq": r.seq,
        "closes_at_ms": r.closes_at_ms, "electorate": r.electorate, "closed": r.closed,
        "result": r.result, "winner": r.winner}),
    )
}

impl Agent {
    pub(super) async fn budget_consume(&self, p: BudgetConsume) -> Answer {
        let request = pb::CounterConsumeRequest {
            counter: Some(pb::ResourceId {
                owner: owner(p.team.as_deref()),
                name: p.counter,
                key: p.key,
            }),
            amount: p.amount,
            cap: p.cap,
            reset: p.reset.wire() as i32,
            timezone: p.timezone.unwrap_or_else(|| "UTC".into()),
            ..Default::default()
        };
        let r = self.client.counter_consume(request).await?;
        Ok(json!({"outcome": code_name(r.code), "consumed": r.consumed,
            "remaining": r.remaining, "period": r.period}))
    }

    fn lease_id(&self, name: String, key: String, team: Option<&str>) -> Option<pb::ResourceId> {
        Some(pb::ResourceId {
            owner: owner(team),
            name,
            key,
        })
    }

    pub(super) async fn lease_acquire(&self, p: LeaseAcquire) -> Answer {
        let request = pb::LeaseAcquireRequest {
            lease: self.lease_id(p.name, p.key, p.team.as_deref()),
            holder: self.name.clone(),
            slots: p.slots.unwrap_or(1),
            ttl_ms: seconds_ms("ttl_s", p.ttl_s)?,
            wait_ms: wait_ms(p.wait_s)?.unwrap_or(0),
            ..Default::default()
        };
        // `acquire_waiting` prints its queue position unless the output is JSON.
        let quiet = crate::Global {
            json: true,
            ..self.global.clone()
        };
        let r = crate::primitives::acquire_waiting(&quiet, &self.client, request).await?;
        Ok(lease_json(&r))
    }

    pub(super) async fn lease_release(&self, p: LeaseRelease) -> Answer {
        let request = pb::LeaseReleaseRequest {
            lease: self.lease_id(p.name, p.key, p.team.as_deref()),
            holder: self.name.clone(),
            ..Default::default()
        };
        Ok(lease_json(&self.client.lease_release(request).await?))
    }

    /// The leases the caller holds, at most `max` (of those it may list).
    pub(super) async fn leases_held(&self, max: usize) -> Result<Vec<Value>, Refusal> {
        let request = pb::LeaseListRequest {
            prefix: String::new(),
            limit: 0,
        };
        let leases = self.client.lease_list(request).await?.leases;
        let mut held = Vec::new();
        for view in &leases {
            let id = view.lease.clone().unwrap_or_default();
            for h in view.holders.iter().filter(|h| h.holder == self.name) {
                held.push(json!({"kind": "lease", "owner": id.owner, "name": id.name,
                    "key": id.key, "fence": h.fence, "expires_at_ms": h.expires_at_ms}));
            }
        }
        held.truncate(max);
        Ok(held)
    }

    pub(super) async fn ledger_append(&self, p: LedgerAppend) -> Answer {
        let retain_s = p.retain_s.unwrap_or(LEDGER_RETAIN_S_DEFAULT);
        let request = pb::LedgerAppendRequest {
            ledger: Some(pb::ResourceId {
                owner: owner(p.team.as_deref()),
                name: p.ledger,
                key: p.partition,
            }),
            entry: p.entry.to_string().into_bytes(),
            appended_by: self.name.clone(),
            retain_ms: seconds_ms("retain_s", retain_s)?,
            ..Default::default()
        };
        let r = self.client.ledger_append(request).await?;
        Ok(json!({"outcome": code_name(r.code), "seq": r.seq}))
    }

    pub(super) async fn vote_open(&self, p: VoteOpen) -> Answer {
        let electorate = p.electorate.unwrap_or_default();
        let request = pb::VoteOpenRequest {
            team: p.team,
            title: p.title,
            options: p.options,
            method: p.method.unwrap_or(Method::Plurality).code().into(),
            electorate: electorate.iter().map(|r| r.code().to_string()).collect(),
            quorum: p.quorum.unwrap_or_else(|| "0.5".into()),
            threshold: p.threshold.unwrap_or_else(|| "majority".into()),
            duration_ms: seconds_ms("closes_s", p.closes_s)?,
            until_all_voted: p.until_all_voted.unwrap_or(false),
            idempotency_key: String::new(),
        };
        voted(self.client.vote_open(request).await?)
    }

    pub(super) async fn vote_cast(&self, p: VoteCast) -> Answer {
        let request = pb::VoteCastRequest {
            proposal: p.proposal,
            choice: p.choice,
            idempotency_key: String::new(),
        };
        voted(self.client.vote_cast(request).await?)
    }

    pub(super) async fn vote_show(&self, p: VoteShow) -> Answer {
        let request = pb::VoteShowRequest {
            proposal: p.proposal.clone(),
        };
        let Some(found) = self.client.vote_show(request).await?.proposal else {
            return Err(Refusal::new(
                "unknown_proposal",
                format!("no proposal {:?}", p.proposal),
            ));
        };
        let view = crate::votecmd::view(found)?;
        fits(crate::votecmd::proposal_json(&view), "the proposal")
    }

    pub(super) async fn doc_get(&self, p: DocGet) -> Answer {
        let key = crate::structures::key("doc", &p.team, &p.name);
        match crate::structures::read(&self.client, key).await? {
            None => Ok(json!({"doc": null, "version": 0})),
            Some((bytes, version)) => {
                let doc = serde_json::from_slice::<Value>(&bytes)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
                fits(json!({"doc": doc, "version": version}), "the document")
            }
        }
    }

    pub(super) async fn doc_put(&self, p: DocPut) -> Answer {
        let key = crate::structures::key("doc", &p.team, &p.name);
        let value = p.doc.to_string().into_bytes();
        let r = crate::structures::cas(&self.client, key, value, p.expect_version).await?;
        if r.code == Code::KvRefused as i32 {
            return Err(Refusal::answered(&r.refusal, &r.message));
        }
        // A version mismatch is an answer, as for `whip doc put`.
        Ok(json!({"outcome": code_name(r.code), "version": r.version,
            "current_version": r.current_version}))
    }
}
