//! What a client may touch at all, decided before any command runs.
//!
//! Two rules, both decided here and nowhere else:
//! - **Reserved state.** Agent identities (`agents/…`) and the fabric's own rows (`fabric/…`:
//!   the range map with the cells' public keys) are written only by servers on their own
//!   behalf; no client KV command (`KvPut`, `KvDelete`, `KvTxn`) writes them, and no client
//!   read (`KvGet`, `KvRange`) returns them. Client keys spelled like the engine's rows are
//!   refused too; the engine's rows themselves are another family (`crate::instance`).
//! - **Principal names.** [`check_new_agent_name`] refuses names that read as a principal
//!   or (by [`name_skeleton`]) as another agent; identities are keyed by the skeleton.
//! - **Server resources.** Counters, leases and ledgers whose owner starts with `~` (the
//!   enrollment budget of each agent, `~enroll`) and every team's signal ledger
//!   (`team/{team}`, `signals`) are reached only by servers, except that an agent appends
//!   a signal signed with its own name (membership decided in apply).
//! - **Server-only commands.** Ticks, range changes, handoffs, fabric-queue purges, quota
//!   grants and identity revocations are sent by a node, never through the client API (a
//!   server's claim on a fabric queue vouches for the member the team's cell found).
//!
//! - **No anonymous writes.** A request whose caller the server could not prove (no agent
//!   token, no operator or node certificate) changes nothing: `anonymous_refused`.
//!
//! A request's [`Caller`] is set by the server that built it from the authenticated call
//! (an agent's token, the operator's certificate), never from a request body; a forwarded
//! request keeps the caller its first server proved (forwarding is a peer service,
//! answered only to nodes of the cluster). Only a server on its own behalf is
//! [`Caller::Server`].

use crate::access::{
    AccessRefusal, Caller, SIGNAL_LEDGER, is_reserved, is_server_resource, team_of_owner,
};
use crate::query::Query;
use crate::types::{Command, Family};

fn server_resource(owner: &str, name: &str) -> Result<(), AccessRefusal> {
    if is_server_resource(owner, name) {
        return Err(AccessRefusal::Reserved {
            key: format!("{owner}/{name}"),
        });
    }
    Ok(())
}

/// A scan whose prefix lies inside reserved state (`e/{ins…`, `agents/`) is refused; a
/// wider scan runs and leaves the reserved rows out.
fn reserved_scan(prefix: &[u8]) -> Result<(), AccessRefusal> {
    match prefix.contains(&b'/') {
        true => reserved(prefix),
        false => Ok(()),
    }
}

fn reserved(key: &[u8]) -> Result<(), AccessRefusal> {
    if is_reserved(key) {
        return Err(AccessRefusal::Reserved {
            key: String::from_utf8_lossy(key).into_owned(),
        });
    }
    Ok(())
}

/// Whether a request of `caller` may run `command`.
pub fn admit(caller: &Caller, command: &Command) -> Result<(), AccessRefusal> {
    match caller {
        Caller::Server => return Ok(()),
        Caller::Anonymous => return Err(AccessRefusal::Anonymous),
        Caller::Agent(_) | Caller::Operator => {}
    }
    match command {
        command if command.is_kv() => kv_keys(command),
        // A member publishes a team signal as itself (membership is decided in apply,
        // `crate::blackboard`); nobody signs another's name, and only the server announces
        // a vote's result (topic `vote`).
        Command::LedgerAppend {
            ledger: id,
            appended_by,
            ..
        } if id.name == SIGNAL_LEDGER
            && team_of_owner(&id.owner).is_some()
            && id.key != crate::vote::VOTE_SIGNAL_TOPIC
            && caller.agent() == Some(appended_by.as_str()) =>
        {
            Ok(())
        }
        Command::LeaseAcquire { lease: id, .. }
        | Command::LeaseRenew { lease: id, .. }
        | Command::LeaseRelease { lease: id, .. }
        | Command::CounterConsume { counter: id, .. }
        | Command::LedgerAppend { ledger: id, .. } => server_resource(&id.owner, &id.name),
        Command::FabricPurge { .. }
        | Command::AgentRevoke { .. }
        | Command::TeamLeaveAll { .. } => server_only(command),
        quota if quota.is_quota_step() => server_only(command),
        // A notice is a server's word; nobody sends one in its name.
        Command::MailSend {
            kind: crate::mail::MailType::Notice,
            ..
        } => server_only(command),
        Command::MailSendMany { sends, .. }
            if sends
                .iter()
                .any(|m| m.kind == crate::mail::MailType::Notice) =>
        {
            server_only(command)
        }
        Command::WorkLimitsSet { .. } if *caller != Caller::Operator => {
            Err(AccessRefusal::OperatorOnly {
                command: command_name(command),
            })
        }
        _ => match command.family() {
            Family::Tick | Family::Range | Family::Handoff => server_only(command),
            Family::Primitive
            | Family::Coordination
            | Family::Board
            | Family::Work
            | Family::Mail
            | Family::Vote
            | Family::Engine
            | Family::Paths => Ok(()),
        },
    }
}

/// A client's CAS key command reaches no reserved key, and attaches to no server lease.
fn kv_keys(command: &Command) -> Result<(), AccessRefusal> {
    match command {
        Command::KvPut { key, .. } | Command::KvDelete { key, .. } => reserved(key),
        Command::KvTxn {
            compares,
            puts,
            deletes,
        } => crate::vocab::kv::plain_txn_keys(compares, puts, deletes).try_for_each(reserved),
        Command::KvKeepalive { key, .. } => reserved(key),
        // The key is the caller's to write, and the lease one a client may reach.
        Command::KvPutAttached { key, attach, .. } => {
            reserved(key)?;
            match attach {
                crate::ephemeral::KvAttach::Lease { lease, .. } => {
                    server_resource(&lease.owner, &lease.name)
                }
                crate::ephemeral::KvAttach::Ttl { .. } => Ok(()),
            }
        }
        Command::KvTxnIf {
            compares,
            success,
            failure,
        } => crate::kv_txn::keys(compares, success, failure).try_for_each(reserved),
        other => unreachable!("{other:?} is not a CAS key command"),
    }
}

fn command_name(command: &Command) -> String {
    let debug = format!("{command:?}");
    let name = debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default();
    name.to_string()
}

fn server_only(command: &Command) -> Result<(), AccessRefusal> {
    Err(AccessRefusal::ServerOnly {
        command: command_name(command),
    })
}

/// Whether `caller` may take a snapshot of a cell's whole state (`whip cell snapshot save`,
/// `whip fabric backup`): the operator only. A snapshot holds every agent's state and the
/// cell's signing key, so neither an agent nor an anonymous caller may, nor a server on its
/// own behalf.
pub fn admit_snapshot(caller: &Caller) -> Result<(), AccessRefusal> {
    match caller {
        Caller::Operator => Ok(()),
        Caller::Anonymous => Err(AccessRefusal::Anonymous),
        Caller::Agent(_) | Caller::Server => Err(AccessRefusal::OperatorOnly {
            command: "snapshot_save".to_string(),
        }),
    }
}

/// Whether `caller` may read a fabric's routes (its range map and where each cell's leader
/// is): any proven caller may, since every keyed request it sends names its cell and epoch
/// anyway; an anonymous caller learns nothing about the fabric's layout.
pub fn admit_routes(caller: &Caller) -> Result<(), AccessRefusal> {
    match caller {
        Caller::Anonymous => Err(AccessRefusal::Anonymous),
        _ => Ok(()),
    }
}

/// Whether `caller` may follow a cell's applies (a `Watch` stream, a `WaitApplied` wait):
/// any proven caller, since a wait learns an apply index and a watch's events are filtered
/// by [`admit_query`] like any read; an anonymous caller follows nothing.
pub fn admit_follow(caller: &Caller) -> Result<(), AccessRefusal> {
    match caller {
        Caller::Anonymous => Err(AccessRefusal::Anonymous),
        _ => Ok(()),
    }
}

/// Whether a client `caller` may run `query`. An anonymous caller reads nothing; reads of
/// single reserved keys are refused; a range read is allowed and its reserved rows are
/// left out ([`is_reserved`]).
pub fn admit_query(caller: &Caller, query: &Query) -> Result<(), AccessRefusal> {
    if *caller == Caller::Anonymous {
        return Err(AccessRefusal::Anonymous);
    }
    match query {
        Query::KvGet { key } => reserved(key),
        Query::KvRange { prefix, .. } => reserved_scan(prefix),
        Query::KvWatch { key, prefix, .. } => match prefix {
            true => reserved_scan(key),
            false => reserved(key),
        },
        Query::LedgerList { owner, name, .. } => server_resource(owner, name),
        own if is_cell_bookkeeping(own) && *caller != Caller::Server => {
            let debug = format!("{own:?}");
            let name = debug.split(|c: char| !c.is_alphanumeric()).next();
            Err(AccessRefusal::ServerOnly {
                command: name.unwrap_or_default().to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// A cell's own bookkeeping, which its servers read directly and no client reads: its
/// ranges and whole rows of a range (a move's export and record), its outbox and alarms,
/// its follow-ups. Refused inside a client's read whatever names it, so no request a
/// client can build exports another team's rows.
fn is_cell_bookkeeping(query: &Query) -> bool {
    matches!(
        query,
        Query::Ranges
            | Query::RangeExport { .. }
            | Query::RangeChanges { .. }
            | Query::RangeCopy { .. }
            | Query::RangePending { .. }
            | Query::FollowUps { .. }
            | Query::OutboxHead { .. }
            | Query::OutboxPending { .. }
            | Query::OutboxChannels
            | Query::Alarms
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_proven_caller_follows_applies() {
        assert_eq!(
            admit_follow(&Caller::Anonymous),
            Err(AccessRefusal::Anonymous)
        );
        for caller in [Caller::Operator, Caller::Server, Caller::Agent("a".into())] {
            assert_eq!(admit_follow(&caller), Ok(()), "{caller:?}");
        }
    }

    /// An agent or the operator who wraps a cell's bookkeeping in a read (a range's whole
    /// rows, a move's record, the outbox) is refused, named; the server reads it.
    #[test]
    fn a_clients_read_of_a_cells_bookkeeping_is_refused() {
        let export = Query::RangeExport {
            start: 0,
            last: u64::MAX,
            after_key: Vec::new(),
            limit: 0,
        };
        for caller in [Caller::Agent("mallory".into()), Caller::Operator] {
            for query in [export.clone(), Query::Ranges, Query::OutboxChannels] {
                let refused = admit_query(&caller, &query);
                assert!(
                    matches!(refused, Err(AccessRefusal::ServerOnly { .. })),
                    "{caller:?} {query:?}: {refused:?}"
                );
            }
        }
        assert_eq!(
            admit_query(&Caller::Server, &export),
            Ok(()),
            "the server reads it"
        );
        // Through the read itself: another team's row never comes back.
        let mut txn = crate::txn::MemTxn::default();
        let put = Command::KvPut {
            key: b"alice-secret".to_vec(),
            value: b"s3cret".to_vec(),
            expect_version: None,
        };
        let stamp = crate::types::Stamp {
            index: 1,
            position: 0,
            time_ms: 1,
        };
        crate::apply(&mut txn, stamp, &crate::types::Request::server(None, put));
        let wrapped = Query::By {
            caller: Caller::Agent("mallory".into()),
            query: Box::new(export),
        };
        let answer = crate::query(&txn, 1, &wrapped);
        assert!(
            matches!(answer, crate::query::QueryResult::Refused(_)),
            "{answer:?}"
        );
    }

    /// Every proven caller may read the routes; an anonymous one learns nothing.
    #[test]
    fn only_proven_callers_read_the_routes() {
        assert_eq!(
            admit_routes(&Caller::Anonymous),
            Err(AccessRefusal::Anonymous)
        );
        for proven in [
            Caller::Agent("alice".into()),
            Caller::Operator,
            Caller::Server,
        ] {
            assert_eq!(admit_routes(&proven), Ok(()), "{proven:?}");
        }
    }

    /// Only the operator takes a snapshot; an agent's refusal is `operator_only`.
    #[test]
    fn only_the_operator_takes_a_snapshot() {
        assert_eq!(admit_snapshot(&Caller::Operator), Ok(()));
        assert_eq!(
            admit_snapshot(&Caller::Anonymous),
            Err(AccessRefusal::Anonymous)
        );
        for refused in [Caller::Agent("alice".into()), Caller::Server] {
            let code = admit_snapshot(&refused).unwrap_err().code();
            assert_eq!(code, "operator_only", "{refused:?}");
        }
    }

    fn put(key: &[u8]) -> Command {
        Command::KvPut {
            key: key.to_vec(),
            value: b"x".to_vec(),
            expect_version: None,
        }
    }

    /// The steps of a move's catch-up and of the registry's quota rounds are the servers':
    /// an agent or the operator sending one (a forged floor, a drop of a move's record, an
    /// ask naming another cell) is refused and changes nothing.
    #[test]
    fn clients_cannot_send_catch_up_or_quota_steps() {
        let steps = [
            Command::RangeDrained {
                start: 0,
                last: u64::MAX,
                to_cell: 2,
                after_key: Vec::new(),
                through_key: vec![0xff],
                upto_seq: u64::MAX,
            },
            Command::WorkQuotaAsk {
                cell: 7,
                want: 1_000,
                live: 0,
                ttl_ms: 30_000,
            },
            Command::WorkQuotaFloor { version: u64::MAX },
        ];
        for caller in [Caller::Agent("mallory".into()), Caller::Operator] {
            for step in &steps {
                let mut txn = crate::txn::MemTxn::default();
                let stamp = crate::types::Stamp {
                    index: 1,
                    position: 0,
                    time_ms: 1,
                };
                let request = crate::types::Request::by(caller.clone(), None, step.clone());
                let outcome = crate::apply(&mut txn, stamp, &request).outcome;
                assert!(
                    matches!(
                        outcome,
                        crate::types::Outcome::Forbidden {
                            refusal: AccessRefusal::ServerOnly { .. }
                        }
                    ),
                    "{caller:?} {step:?}: {outcome:?}"
                );
                assert!(
                    txn.map.is_empty(),
                    "{caller:?} {step:?} wrote {:?}",
                    txn.map
                );
                assert!(admit(&Caller::Server, step).is_ok());
            }
        }
    }

    #[test]
    fn clients_cannot_touch_reserved_state_or_send_server_commands() {
        for key in [&b"agents/{alice}"[..], b"fabric/map", b"fabric/anything"] {
            let refusal = admit(&Caller::Operator, &put(key)).unwrap_err();
            assert_eq!(refusal.code(), "reserved");
            assert!(admit(&Caller::Server, &put(key)).is_ok());
            let read = admit_query(&Caller::Operator, &Query::KvGet { key: key.to_vec() });
            assert_eq!(read.unwrap_err().code(), "reserved");
        }
        let txn = Command::KvTxn {
            compares: Vec::new(),
            puts: vec![(b"ok".to_vec(), b"1".to_vec())],
            deletes: vec![b"agents/{bob}".to_vec()],
        };
        assert_eq!(
            admit(&Caller::Operator, &txn).unwrap_err().code(),
            "reserved"
        );
        assert!(admit(&Caller::Operator, &put(b"agentsx/ok")).is_ok());
        let purge = Command::FabricPurge { queue: "q".into() };
        for command in [Command::Tick, purge] {
            let refusal = admit(&Caller::Operator, &command).unwrap_err();
            assert_eq!(refusal.code(), "server_only", "{refusal}");
            assert!(admit(&Caller::Server, &command).is_ok());
        }
        let anonymous = admit(&Caller::Anonymous, &put(b"plain")).unwrap_err();
        assert_eq!(anonymous.code(), "anonymous_refused");
        assert!(admit(&Caller::Agent("a".into()), &put(b"plain")).is_ok());
        assert_eq!(
            admit(&Caller::Operator, &Command::Tick)
                .unwrap_err()
                .to_string(),
            "server_only: Tick is sent only by nodes of the cluster"
        );
    }
}
