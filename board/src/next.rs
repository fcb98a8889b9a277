//! What must happen after an apply, in other applies: the follow-ups board decides.
//!
//! Some commands oblige more work on other cells once they went through: a dissolved team's
//! fabric queue must be purged, the identities a work revoke named must be revoked on their
//! own cells, and a revoked agent must leave every team. Board decides *whether* (here, from
//! the request and its outcome, nowhere else); the shell only carries out *what*.
//!
//! A follow-up is durable: the apply that decides it writes it in the same entry, in this
//! cell's follow-up outbox (family `FOLLOW_UP`, by sequence number), and [`crate::apply`]
//! returns it in [`Applied::next`]. Whoever answers the request may carry it out at once;
//! the cell's follow-up executor carries out whatever is still in the outbox (after a crash,
//! a lost connection) and acknowledges it (`Command::FollowUpDone`). Both send the same
//! commands under the same idempotency keys ([`follow_up_key`]), so a follow-up takes effect
//! once however many times it is carried out; each is also harmless to repeat once the
//! idempotency window passed (a purge of an empty queue, a revoke of a revoked identity).
//!
//! Invariants: the outbox only grows in the apply that decides a follow-up; a sequence
//! number is never reused; no client request names the outbox.

pub use crate::vocab::next::{FollowUp, Next};
use serde::{Deserialize, Serialize};

use crate::access::{Caller, OPERATOR_REVOKER};
use crate::codec::{decode, encode, encode_versioned, versioned};
use crate::keys::{FOLLOW_HEAD, FOLLOW_UP};
use crate::txn::Txn;
use crate::types::{Command, Outcome, Request, Stamp};

/// The outcome of one apply and what must follow it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The command's outcome (what the caller is answered).
    pub outcome: Outcome,
    /// The follow-ups this apply decided, already in this cell's outbox.
    pub next: Vec<Next>,
}

impl Applied {
    /// An outcome that obliges nothing more.
    pub fn alone(outcome: Outcome) -> Applied {
        Applied {
            outcome,
            next: Vec::new(),
        }
    }
}

impl FollowUp {
    /// The commands that carry this follow-up out, first of all (a purge repeats its
    /// command until the outcome says done: [`FollowUp::done_after`]).
    pub fn command(&self) -> Command {
        match self {
            FollowUp::PurgeFabricQueue { team } => Command::FabricPurge {
                queue: team.clone(),
            },
            FollowUp::RevokeIdentity { agent, by } => Command::AgentRevoke {
                agent: agent.clone(),
                by: by.clone(),
            },
            FollowUp::LeaveAllTeams { agent } => Command::TeamLeaveAll {
                agent: agent.clone(),
            },
        }
    }

    /// Whether the follow-up is carried out once its command answered `outcome` (a purge
    /// of a large queue takes several commands; anything but a page left is the end).
    pub fn done_after(&self, outcome: &Outcome) -> bool {
        !matches!(
            (self, outcome),
            (
                FollowUp::PurgeFabricQueue { .. },
                Outcome::TeamDissolved { done: false, .. }
            )
        )
    }
}

/// The follow-ups `request` obliges once it answered `outcome`: board's whole rule.
pub fn follow_ups(request: &Request, outcome: &Outcome) -> Vec<FollowUp> {
    match (&request.command, outcome) {
        (Command::TeamDissolve { team, .. }, Outcome::TeamDissolved { done: true, .. })
            if crate::taskboard::has_fabric_queue(team) =>
        {
            vec![FollowUp::PurgeFabricQueue { team: team.clone() }]
        }
        (Command::WorkRevoke { .. }, Outcome::WorkRevoked { agents, .. }) => {
            let by = match &request.caller {
                Caller::Agent(by) => by.clone(),
                _ => OPERATOR_REVOKER.to_string(),
            };
            (agents.iter())
                .map(|agent| FollowUp::RevokeIdentity {
                    agent: agent.clone(),
                    by: by.clone(),
                })
                .collect()
        }
        (Command::AgentRevoke { agent, .. }, Outcome::AgentRevoked { revoked: true, .. }) => {
            vec![FollowUp::LeaveAllTeams {
                agent: agent.clone(),
            }]
        }
        _ => Vec::new(),
    }
}

/// The idempotency key of the `index`th follow-up of `request` (applied at `stamp`): from
/// the request's own key when it has one, so that whoever answers it can carry the
/// follow-up out under the same key the outbox holds; else from the stamp.
pub fn follow_up_key(request: &Request, stamp: Option<Stamp>, index: usize) -> String {
    let origin = match (&request.idempotency_key, stamp) {
        (Some(key), _) => crate::idempotency::scoped(&request.caller, key),
        (None, Some(stamp)) => {
            format!("stamp/{}/{}/{}", stamp.time_ms, stamp.index, stamp.position)
        }
        (None, None) => String::new(),
    };
    let digest = blake3::hash(origin.as_bytes()).to_hex();
    format!("follow/{}/{index}", &digest[..32])
}

/// A follow-up as the outbox stores it.
#[derive(Serialize, Deserialize)]
struct Row {
    key: String,
    follow_up: FollowUp,
}

/// The encoding version of [`Row`].
const ROW_VERSION: u8 = 1;

fn row_key(seq: u64) -> Vec<u8> {
    let mut key = vec![FOLLOW_UP];
    crate::keys::push_u64(&mut key, seq);
    key
}

/// The next sequence number of this cell's outbox (1 when empty).
fn head(txn: &impl Txn) -> u64 {
    txn.get(&[FOLLOW_HEAD]).map_or(1, |bytes| decode(&bytes))
}

/// Write the follow-ups `request` obliges after `outcome` to the outbox.
pub(crate) fn decide(
    txn: &mut impl Txn,
    stamp: Stamp,
    request: &Request,
    outcome: &Outcome,
) -> Vec<Next> {
    let decided = follow_ups(request, outcome);
    if decided.is_empty() {
        return Vec::new();
    }
    let mut seq = head(txn);
    let mut next = Vec::with_capacity(decided.len());
    for (index, follow_up) in decided.into_iter().enumerate() {
        let key = follow_up_key(request, Some(stamp), index);
        let row = Row {
            key: key.clone(),
            follow_up: follow_up.clone(),
        };
        txn.put(&row_key(seq), &encode_versioned(ROW_VERSION, &row));
        next.push(Next {
            seq,
            key,
            follow_up,
        });
        seq += 1;
    }
    txn.put(&[FOLLOW_HEAD], &encode(&seq));
    next
}

/// The outbox's follow-ups after `after_seq`, at most `limit` (`Query::FollowUps`).
pub(crate) fn pending(txn: &impl Txn, after_seq: u64, limit: usize) -> Vec<Next> {
    let start = row_key(after_seq.saturating_add(1));
    (txn.scan(&start, &[FOLLOW_UP + 1], limit).into_iter())
        .map(|(key, value)| {
            let seq = u64::from_be_bytes(key[1..9].try_into().expect("follow-up key holds a u64"));
            let row: Row = match versioned(&value) {
                Some((ROW_VERSION, body)) => postcard::from_bytes(body).expect("follow-up decodes"),
                other => panic!("follow-up row of unknown version {:?}", other.map(|v| v.0)),
            };
            Next {
                seq,
                key: row.key,
                follow_up: row.follow_up,
            }
        })
        .collect()
}

/// Acknowledge follow-up `seq`: it was carried out (`Command::FollowUpDone`; again: no-op).
pub(crate) fn done(txn: &mut impl Txn, seq: u64) -> Outcome {
    let key = row_key(seq);
    let was_pending = txn.get(&key).is_some();
    txn.delete(&key);
    Outcome::FollowUpDone { seq, was_pending }
}

/// What whoever answers a request must do before it answers, decided by board from the
/// request and the outcome its own cell gave: the in-request follow-ups.
///
/// Not durable, unlike [`FollowUp`]: the requester waits for the answer and retries the
/// whole request (under its own key) when the answerer stops, so nothing is left undone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Then {
    /// Claim from the team's fabric queue: `request` (the server vouching for the caller)
    /// on the owner of `point`. Before: the team's own cell answered `BoardEmpty` in one
    /// apply that found the caller a member and both of the team's tiers empty. A queue
    /// nobody ever spilled to reads as empty ([`Then::settle`]).
    ClaimFabricQueue {
        /// Where the queue lives (`route::fabric_queue_point`).
        point: u64,
        /// The claim on the queue.
        request: Request,
        /// What the team's own cell completed before (a prefetching claim's completions:
        /// the answer carries them beside the queue's claims).
        completed: Vec<String>,
    },
    /// Run one quota round for the cell that refused (it asks the meta cell to lend it
    /// more of the fabric ceiling), then submit `retry` on that cell once. Before: the cell
    /// refused the registration for lack of its share of the ceiling, and the request was
    /// a first try (`quota_retry`), so its refusal went unaudited.
    QuotaRound {
        /// The registration again, as a last try (audited whatever it answers).
        retry: Request,
    },
}

impl Then {
    /// The answer the requester gets once this step answered `outcome`.
    pub fn settle(&self, outcome: Outcome) -> Outcome {
        let Then::ClaimFabricQueue {
            request, completed, ..
        } = self
        else {
            return outcome;
        };
        let many = matches!(request.command, Command::BoardClaimMany { .. });
        match outcome {
            Outcome::BoardRefused {
                reason: crate::BoardRefusal::UnknownTeam { .. },
            } if many => Outcome::TasksClaimed {
                completed: completed.clone(),
                claims: Vec::new(),
            },
            Outcome::BoardRefused {
                reason: crate::BoardRefusal::UnknownTeam { .. },
            } => Outcome::BoardEmpty,
            Outcome::TasksClaimed { claims, .. } => Outcome::TasksClaimed {
                completed: completed.clone(),
                claims,
            },
            outcome => outcome,
        }
    }
}

/// Whether a request of `command` may oblige an in-request follow-up ([`then`]), so that
/// its answerer keeps a copy of it.
pub fn may_then(command: &Command) -> bool {
    matches!(
        command,
        Command::BoardClaim { .. } | Command::BoardClaimMany { .. } | Command::WorkRegister { .. }
    )
}

/// The in-request follow-up `request` obliges once its cell answered `outcome`, if any:
/// board's whole rule for steps across cells inside one request.
pub fn then(request: &Request, outcome: &Outcome) -> Option<Then> {
    match (&request.command, outcome) {
        (
            Command::BoardClaim {
                team,
                caller,
                worker,
            },
            Outcome::BoardEmpty,
        ) if crate::taskboard::has_fabric_queue(team) => {
            let command = Command::BoardClaim {
                team: crate::taskboard::fabric_queue_team(team),
                caller: caller.clone(),
                worker: worker.clone(),
            };
            Some(Then::ClaimFabricQueue {
                point: crate::route::fabric_queue_point(team),
                request: Request::server(suffixed(&request.idempotency_key, "fabric"), command),
                completed: Vec::new(),
            })
        }
        (
            Command::BoardClaimMany {
                team,
                caller,
                worker,
                max,
                claim_ms,
                ..
            },
            Outcome::TasksClaimed { completed, claims },
        ) if claims.is_empty() && *max > 0 && crate::taskboard::has_fabric_queue(team) => {
            let command = Command::BoardClaimMany {
                team: crate::taskboard::fabric_queue_team(team),
                caller: caller.clone(),
                worker: worker.clone(),
                completes: Vec::new(),
                max: *max,
                claim_ms: *claim_ms,
            };
            Some(Then::ClaimFabricQueue {
                point: crate::route::fabric_queue_point(team),
                request: Request::server(suffixed(&request.idempotency_key, "fabric"), command),
                completed: completed.clone(),
            })
        }
        (Command::WorkRegister { quota_retry, .. }, Outcome::WorkRefused { refusal })
            if *quota_retry && crate::work::short_of_quota(refusal) =>
        {
            let mut retry = request.clone();
            retry.idempotency_key = suffixed(&request.idempotency_key, "quota");
            if let Command::WorkRegister { quota_retry, .. } = &mut retry.command {
                *quota_retry = false;
            }
            Some(Then::QuotaRound { retry })
        }
        _ => None,
    }
}

/// `key` with `/suffix` (a step's own idempotency key, derived from its request's).
fn suffixed(key: &Option<String>, suffix: &str) -> Option<String> {
    key.as_ref().map(|key| format!("{key}/{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;
    use crate::types::BoardSettings;

    fn stamp(index: u64) -> Stamp {
        crate::testkit::stamp_at(index, 1_000 * index)
    }

    fn by_sup(key: Option<&str>, command: Command) -> Request {
        Request::by(
            Caller::Agent("sup".into()),
            key.map(str::to_string),
            command,
        )
    }

    /// A finished dissolve writes one purge to the outbox in its own apply; its replay
    /// writes nothing; the acknowledgement empties the outbox, and again is a no-op.
    #[test]
    fn a_dissolve_leaves_one_purge_and_its_replay_none() {
        let mut txn = MemTxn::default();
        let create = Command::TeamCreate {
            team: "t".into(),
            caller: "sup".into(),
            parent: None,
            ancestors: Vec::new(),
            settings: BoardSettings::default(),
        };
        crate::apply(&mut txn, stamp(1), &by_sup(None, create));
        let dissolve = by_sup(
            Some("k1"),
            Command::TeamDissolve {
                team: "t".into(),
                caller: "sup".into(),
            },
        );
        let first = crate::apply(&mut txn, stamp(2), &dissolve);
        let purge = Next {
            seq: 1,
            key: follow_up_key(&dissolve, None, 0),
            follow_up: FollowUp::PurgeFabricQueue { team: "t".into() },
        };
        assert!(matches!(
            first.outcome,
            Outcome::TeamDissolved { done: true, .. }
        ));
        assert_eq!(first.next, vec![purge.clone()]);
        let replay = crate::apply(&mut txn, stamp(3), &dissolve);
        assert_eq!((replay.outcome, replay.next), (first.outcome, Vec::new()));
        assert_eq!(pending(&txn, 0, 10), vec![purge]);
        let done = Command::FollowUpDone { seq: 1 };
        let acked = crate::apply(&mut txn, stamp(4), &Request::server(None, done.clone()));
        let expected = Outcome::FollowUpDone {
            seq: 1,
            was_pending: true,
        };
        assert_eq!(acked.outcome, expected);
        let again = crate::apply(&mut txn, stamp(5), &Request::server(None, done));
        assert!(matches!(
            again.outcome,
            Outcome::FollowUpDone {
                was_pending: false,
                ..
            }
        ));
        assert!(pending(&txn, 0, 10).is_empty());
        let forged = crate::apply(
            &mut txn,
            stamp(6),
            &by_sup(None, Command::FollowUpDone { seq: 1 }),
        );
        assert!(
            matches!(forged.outcome, Outcome::Forbidden { .. }),
            "{forged:?}"
        );
    }

    /// Board's rule, whole: a user team's dissolve purges its queue (a reserved team's does
    /// not, nor does a dissolve still under way); a work revoke revokes each named agent in
    /// its revoker's name (the operator's when not an agent); a revoked identity leaves
    /// every team, one not revoked does not.
    #[test]
    fn follow_ups_come_from_the_request_and_its_outcome() {
        let dissolve = |team: &str| {
            by_sup(
                None,
                Command::TeamDissolve {
                    team: team.into(),
                    caller: "sup".into(),
                },
            )
        };
        let done = |done| Outcome::TeamDissolved { removed: 3, done };
        let purge = FollowUp::PurgeFabricQueue { team: "t".into() };
        assert_eq!(follow_ups(&dissolve("t"), &done(true)), vec![purge]);
        assert!(follow_ups(&dissolve("t"), &done(false)).is_empty());
        assert!(follow_ups(&dissolve("~tracker/o/n"), &done(true)).is_empty());
        let revoked = Outcome::WorkRevoked {
            removed: 2,
            agents: vec!["a".into(), "b".into()],
        };
        let revoke = |caller| Request::by(caller, None, Command::WorkRevoke { id: "e".into() });
        let named = |by: &str| {
            ["a", "b"].map(|agent| FollowUp::RevokeIdentity {
                agent: agent.into(),
                by: by.into(),
            })
        };
        let by_agent = follow_ups(&revoke(Caller::Agent("sup".into())), &revoked);
        assert_eq!(by_agent, named("sup").to_vec());
        let by_operator = follow_ups(&revoke(Caller::Operator), &revoked);
        assert_eq!(by_operator, named(OPERATOR_REVOKER).to_vec());
        let agent_revoke = Request::server(
            None,
            Command::AgentRevoke {
                agent: "a".into(),
                by: "sup".into(),
            },
        );
        let answer = |revoked| Outcome::AgentRevoked {
            agent: "a".into(),
            revoked,
        };
        let leave = FollowUp::LeaveAllTeams { agent: "a".into() };
        assert_eq!(follow_ups(&agent_revoke, &answer(true)), vec![leave]);
        assert!(follow_ups(&agent_revoke, &answer(false)).is_empty());
    }

    /// An empty claim on a user team goes on to its fabric queue (as the server, under a key
    /// of its own), a queue nobody spilled to reads as empty; a claim on the queue itself,
    /// or a refused one, goes nowhere.
    #[test]
    fn an_empty_claim_goes_on_to_the_fabric_queue() {
        let claim = |team: &str| {
            let command = Command::BoardClaim {
                team: team.into(),
                caller: "sup".into(),
                worker: "w".into(),
            };
            by_sup(Some("k"), command)
        };
        let Some(step) = then(&claim("t"), &Outcome::BoardEmpty) else {
            panic!("an empty claim on a user team goes on to its queue");
        };
        let queue = Command::BoardClaim {
            team: crate::fabric_queue_team("t"),
            caller: "sup".into(),
            worker: "w".into(),
        };
        let expected = Then::ClaimFabricQueue {
            point: crate::route::fabric_queue_point("t"),
            request: Request::server(Some("k/fabric".into()), queue),
            completed: Vec::new(),
        };
        assert_eq!(step, expected);
        let unknown = Outcome::BoardRefused {
            reason: crate::BoardRefusal::UnknownTeam { team: "q".into() },
        };
        assert_eq!(step.settle(unknown), Outcome::BoardEmpty);
        assert_eq!(step.settle(Outcome::BoardEmpty), Outcome::BoardEmpty);
        assert_eq!(
            then(&claim(&crate::fabric_queue_team("t")), &Outcome::BoardEmpty),
            None
        );
        let member = crate::BoardRefusal::NotMember {
            agent: "sup".into(),
            team: "t".into(),
        };
        assert_eq!(
            then(&claim("t"), &Outcome::BoardRefused { reason: member }),
            None
        );
        assert!(may_then(&claim("t").command));
        assert!(!may_then(&Command::FollowUpDone { seq: 1 }));
    }

    /// A prefetch that claimed nothing on a user team goes on to its fabric queue for as
    /// many, keeping what it completed for the answer; one that claimed something, or a
    /// pure completion (max 0), goes nowhere.
    #[test]
    fn an_empty_prefetch_goes_on_to_the_fabric_queue_with_its_completions() {
        let many = |team: &str, max: u32| {
            let command = Command::BoardClaimMany {
                team: team.into(),
                caller: "sup".into(),
                worker: "w".into(),
                completes: Vec::new(),
                max,
                claim_ms: 0,
            };
            by_sup(Some("k"), command)
        };
        let answer = |claims: Vec<crate::types::Claimed>| Outcome::TasksClaimed {
            completed: vec!["t-1".into()],
            claims,
        };
        let Some(step) = then(&many("t", 4), &answer(Vec::new())) else {
            panic!("an empty prefetch on a user team goes on to its queue");
        };
        let Then::ClaimFabricQueue { request, .. } = &step else {
            panic!("{step:?}");
        };
        let Command::BoardClaimMany {
            team,
            max,
            completes,
            ..
        } = &request.command
        else {
            panic!("{request:?}");
        };
        assert_eq!(
            (team.as_str(), *max),
            (crate::fabric_queue_team("t").as_str(), 4)
        );
        assert!(
            completes.is_empty(),
            "the completions were made on the team's cell"
        );
        let unknown = Outcome::BoardRefused {
            reason: crate::BoardRefusal::UnknownTeam { team: "q".into() },
        };
        assert_eq!(step.settle(unknown), answer(Vec::new()));
        let queue_answer = Outcome::TasksClaimed {
            completed: Vec::new(),
            claims: Vec::new(),
        };
        assert_eq!(step.settle(queue_answer), answer(Vec::new()));
        assert_eq!(then(&many("t", 0), &answer(Vec::new())), None);
        assert!(may_then(&many("t", 1).command));
    }

    /// A first registration short of quota gets a round and one audited retry; a last try,
    /// or a refusal by another limit, gets none.
    #[test]
    fn a_registration_short_of_quota_gets_one_round() {
        let register = |quota_retry| {
            let command = Command::WorkRegister {
                root: "r".into(),
                parent: None,
                kind: crate::work::WorkKind::Run,
                class: "default".into(),
                ttl_ms: 1_000,
                owner: None,
                quota_retry,
            };
            by_sup(Some("k"), command)
        };
        let short = |limit| Outcome::WorkRefused {
            refusal: crate::work::WorkRefusal::Limit {
                limit,
                max: 6,
                current: 6,
                detail: String::new(),
            },
        };
        let fabric = short(crate::work::WorkLimit::Fabric);
        let mut retry = register(false);
        retry.idempotency_key = Some("k/quota".into());
        assert_eq!(
            then(&register(true), &fabric),
            Some(Then::QuotaRound { retry })
        );
        assert_eq!(then(&register(false), &fabric), None);
        assert_eq!(
            then(&register(true), &short(crate::work::WorkLimit::Cell)),
            None
        );
        assert!(may_then(&register(true).command));
    }
}
