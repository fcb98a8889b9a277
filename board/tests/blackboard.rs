//! A team's blackboard (document, frames, artifacts, locks) through `apply` and `query`:
//! members only, decided with the data; `team dissolve` collects it.

use whip_board::access::Caller;
use whip_board::query::ReadRefusal;
use whip_board::{
    BoardRefusal, BoardSettings, Command, MemTxn, Outcome, Query, QueryResult, Request, ResourceId,
    Stamp, apply, query,
};

struct Cell {
    txn: MemTxn,
    index: u64,
}

impl Cell {
    fn run(&mut self, caller: &str, command: Command) -> Outcome {
        self.index += 1;
        let stamp = Stamp {
            index: self.index,
            position: 0,
            time_ms: 1_000_000,
        };
        let caller = Caller::Agent(caller.into());
        apply(&mut self.txn, stamp, &Request::by(caller, None, command)).outcome
    }

    fn read(&self, caller: Caller, q: Query) -> QueryResult {
        let by = Query::By {
            caller,
            query: Box::new(q),
        };
        query(&self.txn, 1_000_000, &by)
    }
}

fn put(key: &str) -> Command {
    Command::KvPut {
        key: key.as_bytes().to_vec(),
        value: b"{}".to_vec(),
        expect_version: None,
    }
}

fn lock() -> Command {
    Command::LeaseAcquire {
        lease: ResourceId {
            owner: "team/crew".into(),
            name: "run-lock".into(),
            key: String::new(),
        },
        holder: "sup".into(),
        slots: 1,
        ttl_ms: 60_000,
        wait_ms: 0,
    }
}

fn not_member(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Outcome::BoardRefused {
            reason: BoardRefusal::NotMember { .. }
        }
    )
}

/// Reads of the blackboard: members only, nobody anonymous; scans not aimed at the team
/// pass over its rows.
fn reads_for_members_only(cell: &Cell, get: &Query) {
    let refused = cell.read(Caller::Agent("mallory".into()), get.clone());
    assert!(matches!(
        refused,
        QueryResult::Refused(ReadRefusal::Board { .. })
    ));
    let anonymous = cell.read(Caller::Anonymous, get.clone());
    assert!(matches!(
        anonymous,
        QueryResult::Refused(ReadRefusal::Access(_))
    ));
    assert!(matches!(
        cell.read(Caller::Agent("sup".into()), get.clone()),
        QueryResult::Kv(Some(_))
    ));
    // A scan not aimed at the team passes over its rows.
    let scan = Query::KvRange {
        prefix: Vec::new(),
        after_key: Vec::new(),
        limit: 0,
    };
    let rows = cell.read(Caller::Agent("sup".into()), scan);
    assert_eq!(rows, QueryResult::KvRange(whip_board::KvPage::default()));
}

#[test]
fn only_members_touch_the_blackboard_and_dissolve_collects_it() {
    let mut cell = Cell {
        txn: MemTxn::default(),
        index: 0,
    };
    let create = Command::TeamCreate {
        team: "crew".into(),
        caller: "sup".into(),
        parent: None,
        ancestors: Vec::new(),
        settings: BoardSettings::default(),
    };
    cell.run("sup", create);
    for key in [
        "doc/{crew}/manifest",
        "frame/{crew}/build/a.rs",
        "artifacts/{crew}/bin",
    ] {
        assert!(not_member(&cell.run("mallory", put(key))), "{key}");
        assert!(matches!(
            cell.run("sup", put(key)),
            Outcome::KvWritten { .. }
        ));
    }
    assert!(not_member(&cell.run("mallory", lock())));
    assert!(matches!(cell.run("sup", lock()), Outcome::LeaseHeld { .. }));
    let get = Query::KvGet {
        key: b"doc/{crew}/manifest".to_vec(),
    };
    reads_for_members_only(&cell, &get);
    let dissolve = Command::TeamDissolve {
        team: "crew".into(),
        caller: "sup".into(),
    };
    let Outcome::TeamDissolved { done: true, .. } = cell.run("sup", dissolve) else {
        panic!("dissolve did not finish in one round");
    };
    let server = |q: Query| query(&cell.txn, 1_000_000, &q);
    assert_eq!(server(get), QueryResult::Kv(None));
    let leases = server(Query::LeaseList {
        prefix: "team/crew".into(),
        limit: 0,
    });
    let QueryResult::Leases(leases) = leases else {
        panic!("{leases:?}")
    };
    assert!(
        leases.iter().all(|lease| lease.holders.is_empty()),
        "{leases:?}"
    );
}

/// Server resources (`~…`: each agent's enrollment budget, the range-admin lease) are
/// nobody's to list: a wide listing by an agent or the operator leaves them out, beside the
/// client's own resources, which it shows.
#[test]
fn listings_leave_server_resources_out() {
    let mut cell = Cell {
        txn: MemTxn::default(),
        index: 0,
    };
    let consume = |owner: &str| Command::CounterConsume {
        counter: ResourceId {
            owner: owner.into(),
            name: "budget".into(),
            key: "ann".into(),
        },
        amount: 1,
        cap: 100,
        reset: whip_board::Reset::Daily,
        timezone: "UTC".into(),
    };
    cell.index += 1;
    let stamp = Stamp {
        index: cell.index,
        position: 0,
        time_ms: 1_000_000,
    };
    let server = Request::by(Caller::Server, None, consume("~enroll"));
    assert!(matches!(
        apply(&mut cell.txn, stamp, &server).outcome,
        Outcome::CounterOk { .. }
    ));
    assert!(matches!(
        cell.run("ann", consume("ann")),
        Outcome::CounterOk { .. }
    ));
    for reader in [Caller::Agent("mallory".into()), Caller::Operator] {
        let listed = cell.read(
            reader.clone(),
            Query::CounterList {
                prefix: String::new(),
                limit: 0,
            },
        );
        let QueryResult::Counters(rows) = listed else {
            panic!("{listed:?}")
        };
        let owners: Vec<&str> = rows.iter().map(|r| r.counter.owner.as_str()).collect();
        assert_eq!(owners, ["ann"], "{reader:?}");
    }
}
