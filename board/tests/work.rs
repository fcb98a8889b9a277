//! The work registry through `apply`: admission limits, the control plane through the
//! parent, signals in force, revoke, the audit ledger and quotas of the fabric ceiling.

use whip_board::access::Caller;
use whip_board::work::{
    LimitsUpdate, Quota, Signal, SignalReason, WorkKind, WorkLimit, WorkRefusal,
};
use whip_board::{Command, MemTxn, Outcome, Query, QueryResult, Request, Stamp, apply, query};

const ROOT: &str = "w0000000000000001";

struct Cell {
    txn: MemTxn,
    index: u64,
    now_ms: u64,
}

impl Cell {
    fn new() -> Self {
        Cell {
            txn: MemTxn::default(),
            index: 0,
            now_ms: 1_000_000,
        }
    }

    fn run(&mut self, caller: Caller, command: Command) -> Outcome {
        self.index += 1;
        let stamp = Stamp {
            index: self.index,
            position: 0,
            time_ms: self.now_ms,
        };
        apply(&mut self.txn, stamp, &Request::by(caller, None, command)).outcome
    }

    fn register(&mut self, agent: &str, root: &str, parent: Option<&str>) -> Outcome {
        let command = Command::WorkRegister {
            root: root.into(),
            parent: parent.map(str::to_string),
            kind: WorkKind::Run,
            class: "default".into(),
            ttl_ms: 30_000,
            owner: None,
            quota_retry: false,
        };
        self.run(agent_caller(agent), command)
    }

    fn limits(&mut self, update: LimitsUpdate) {
        let set = Command::WorkLimitsSet { update };
        assert!(matches!(
            self.run(Caller::Operator, set),
            Outcome::WorkLimitsSet { .. }
        ));
    }

    fn read(&self, q: Query) -> QueryResult {
        query(&self.txn, self.now_ms, &q)
    }

    fn tick(&mut self) {
        self.run(Caller::Server, Command::Tick);
    }
}

fn agent_caller(agent: &str) -> Caller {
    Caller::Agent(agent.into())
}

fn admitted_id(outcome: Outcome) -> String {
    match outcome {
        Outcome::WorkAdmitted { entry, .. } => entry.id,
        other => panic!("expected admitted, got {other:?}"),
    }
}

fn refused_limit(outcome: &Outcome) -> WorkLimit {
    match outcome {
        Outcome::WorkRefused {
            refusal: WorkRefusal::Limit { limit, .. },
        } => *limit,
        other => panic!("expected a limit refusal, got {other:?}"),
    }
}

fn small_limits() -> LimitsUpdate {
    LimitsUpdate {
        fabric_max: Some(5),
        depth_max: Some(2),
        children_max: Some(2),
        ..LimitsUpdate::default()
    }
}

#[test]
fn depth_children_and_the_ceiling_refuse_with_their_numbers() {
    let mut cell = Cell::new();
    cell.limits(small_limits());
    let root = admitted_id(cell.register("alice", ROOT, None));
    let child = admitted_id(cell.register("alice", ROOT, Some(&root)));
    assert_eq!(child, format!("{ROOT}.0"));
    let grandchild = admitted_id(cell.register("alice", ROOT, Some(&child)));
    let too_deep = cell.register("alice", ROOT, Some(&grandchild));
    assert_eq!(refused_limit(&too_deep), WorkLimit::Depth);
    admitted_id(cell.register("alice", ROOT, Some(&root)));
    let third = cell.register("alice", ROOT, Some(&root));
    assert_eq!(refused_limit(&third), WorkLimit::Children);
    // Four live; a fifth root fits, a sixth passes the ceiling of 5.
    admitted_id(cell.register("bob", "w0000000000000002", None));
    let over = cell.register("carol", "w0000000000000003", None);
    assert_eq!(refused_limit(&over), WorkLimit::Fabric);
    let Outcome::WorkRefused { refusal } = over else {
        unreachable!()
    };
    assert!(refusal.to_string().contains("ceiling is 5"), "{refusal}");
}

#[test]
fn only_the_lineage_spawns_signals_and_revokes() {
    let mut cell = Cell::new();
    let root = admitted_id(cell.register("alice", ROOT, None));
    let stranger = cell.register("mallory", ROOT, Some(&root));
    assert!(matches!(
        stranger,
        Outcome::WorkRefused {
            refusal: WorkRefusal::NotAuthorized { .. }
        }
    ));
    let anonymous = Command::WorkRevoke { id: root.clone() };
    let refused = cell.run(Caller::Anonymous, anonymous);
    assert!(matches!(refused, Outcome::Forbidden { .. }), "{refused:?}");
    let child = admitted_id(cell.register("alice", ROOT, Some(&root)));
    let by_mallory = Command::WorkSignal {
        id: child.clone(),
        signal: Signal::Stop,
    };
    let refused = cell.run(agent_caller("mallory"), by_mallory);
    assert!(
        matches!(refused, Outcome::WorkRefused { .. }),
        "{refused:?}"
    );
    let audit = match cell.read(Query::WorkAudit {
        after_seq: 0,
        limit: 0,
    }) {
        QueryResult::WorkAudit(rows) => rows,
        other => panic!("{other:?}"),
    };
    let actions: Vec<_> = audit.iter().map(|row| row.outcome.as_str()).collect();
    assert_eq!(
        actions,
        ["admitted", "not_authorized", "admitted", "not_authorized"]
    );
}

#[test]
fn renewals_answer_the_strongest_signal_and_a_lost_parent_stops_children() {
    let mut cell = Cell::new();
    let root = admitted_id(cell.register("alice", ROOT, None));
    let child = admitted_id(cell.register("alice", ROOT, Some(&root)));
    let pause = Command::WorkSignal {
        id: root.clone(),
        signal: Signal::Pause,
    };
    cell.run(Caller::Operator, pause);
    let renew = |id: &str| Command::WorkRenew {
        id: id.to_string(),
        ttl_ms: 60_000,
    };
    match cell.run(agent_caller("alice"), renew(&child)) {
        Outcome::WorkRenewed { signal, reason, .. } => {
            assert_eq!((signal, reason), (Signal::Pause, SignalReason::Ancestor));
        }
        other => panic!("{other:?}"),
    }
    // The root lapses (30 s), the child (renewed to 60 s) stays and hears stop.
    cell.now_ms += 31_000;
    cell.tick();
    match cell.run(agent_caller("alice"), renew(&child)) {
        Outcome::WorkRenewed { signal, reason, .. } => {
            assert_eq!((signal, reason), (Signal::Stop, SignalReason::ParentLost));
        }
        other => panic!("{other:?}"),
    }
    let listed = match cell.read(Query::WorkList {
        parent: None,
        limit: 0,
    }) {
        QueryResult::WorkEntries(rows) => rows,
        other => panic!("{other:?}"),
    };
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, child);
}

#[test]
fn revoke_removes_the_subtree_and_names_the_agents_below() {
    let mut cell = Cell::new();
    let root = admitted_id(cell.register("alice", ROOT, None));
    let command = Command::WorkRegister {
        root: ROOT.into(),
        parent: Some(root.clone()),
        kind: WorkKind::Subagent,
        class: "default".into(),
        ttl_ms: 30_000,
        owner: Some("helper-1".into()),
        quota_retry: false,
    };
    let sub = admitted_id(cell.run(agent_caller("alice"), command));
    let below = admitted_id(cell.register("helper-1", ROOT, Some(&sub)));
    let revoke = Command::WorkRevoke { id: sub.clone() };
    match cell.run(agent_caller("alice"), revoke) {
        Outcome::WorkRevoked { removed, agents } => {
            assert_eq!(removed, 2);
            assert_eq!(agents, ["helper-1"]);
        }
        other => panic!("{other:?}"),
    }
    let gone = cell.read(Query::WorkEntry { id: below });
    assert_eq!(gone, QueryResult::WorkEntries(Vec::new()));
    // The root's child count is back to zero: two more children fit the default limit.
    admitted_id(cell.register("alice", ROOT, Some(&root)));
}

/// A data cell of a fabric: assigned a range, so it admits only within its quota.
fn fabric_cell() -> Cell {
    let mut cell = Cell::new();
    assign(&mut cell, 0, u64::MAX);
    cell
}

/// Give `cell` range `[start, last]` at epoch 1.
fn assign(cell: &mut Cell, start: u64, last: u64) {
    let assign = Command::RangeAssign {
        start,
        last,
        epoch: 1,
        fence_above: 0,
    };
    assert!(matches!(
        cell.run(Caller::Server, assign),
        Outcome::RangeAssigned { .. }
    ));
}

fn register_routed(cell: &mut Cell, agent: &str, root: &str) -> Outcome {
    let command = Command::WorkRegister {
        root: root.into(),
        parent: None,
        kind: WorkKind::Session,
        class: "default".into(),
        ttl_ms: 30_000,
        owner: None,
        quota_retry: false,
    };
    run_routed(cell, agent, command)
}

/// Run `command` for `agent` as a router sends it (at the range's epoch).
fn run_routed(cell: &mut Cell, agent: &str, command: Command) -> Outcome {
    cell.index += 1;
    let stamp = Stamp {
        index: cell.index,
        position: 0,
        time_ms: cell.now_ms,
    };
    let mut request = Request::by(agent_caller(agent), None, command);
    request.epoch = 1;
    apply(&mut cell.txn, stamp, &request).outcome
}

fn lend(meta: &mut Cell, cell: u64, want: u64) -> Quota {
    let lend = Command::WorkQuotaLend {
        cell,
        want,
        ttl_ms: 10_000,
    };
    match meta.run(Caller::Server, lend) {
        Outcome::WorkQuotaLent { quota } => quota,
        other => panic!("{other:?}"),
    }
}

#[test]
fn quotas_never_lend_past_the_ceiling_and_lapse_closed() {
    let mut meta = Cell::new();
    meta.limits(small_limits());
    let mut data = fabric_cell();
    let refused = register_routed(&mut data, "alice", ROOT);
    assert_eq!(refused_limit(&refused), WorkLimit::Fabric);
    let first = lend(&mut meta, 1, 4);
    assert_eq!(first.total, 4);
    let second = lend(&mut meta, 2, 4);
    assert_eq!(second.total, 1, "only 1 of the ceiling of 5 is left");
    let install = Command::WorkQuotaInstall {
        quota: first,
        ttl_ms: 10_000,
    };
    data.run(Caller::Server, install.clone());
    admitted_id(register_routed(&mut data, "alice", ROOT));
    // A lowered grant counts at its old size until the cell confirms it installed it.
    let lowered = lend(&mut meta, 1, 1);
    assert_eq!(lend(&mut meta, 2, 4).total, 1);
    meta.run(
        Caller::Server,
        Command::WorkQuotaAck {
            cell: 1,
            version: lowered.version,
        },
    );
    assert_eq!(lend(&mut meta, 2, 4).total, 4);
    // An older grant never replaces a newer one.
    let newer = Command::WorkQuotaInstall {
        quota: lowered,
        ttl_ms: 10_000,
    };
    data.run(Caller::Server, newer);
    match data.run(Caller::Server, install) {
        Outcome::WorkQuotaInstalled { installed, .. } => assert!(!installed),
        other => panic!("{other:?}"),
    }
    // Cell 2's grant lapses unrenewed: its share is lent again only after the skew bound.
    meta.now_ms += 10_500;
    assert_eq!(lend(&mut meta, 1, 5).total, 1);
    meta.now_ms += 1_000;
    assert_eq!(lend(&mut meta, 1, 5).total, 5);
    lapse_for_good(&mut meta, &mut data);
}

/// The data cell's own quota lapsed: it admits and renews nothing, and its entry lapsed
/// with it, for good: a quota installed later does not bring it back.
fn lapse_for_good(meta: &mut Cell, data: &mut Cell) {
    data.now_ms += 11_000;
    let late = register_routed(data, "bob", "w0000000000000009");
    assert_eq!(refused_limit(&late), WorkLimit::Fabric);
    let renew = Command::WorkRenew {
        id: ROOT.into(),
        ttl_ms: 30_000,
    };
    match run_routed(data, "alice", renew.clone()) {
        Outcome::WorkRenewed { signal, reason, .. } => {
            assert_eq!((signal, reason), (Signal::Stop, SignalReason::QuotaLapsed));
        }
        other => panic!("{other:?}"),
    }
    meta.now_ms = data.now_ms;
    let fresh = lend(meta, 1, 5);
    let install = Command::WorkQuotaInstall {
        quota: fresh,
        ttl_ms: 10_000,
    };
    data.run(Caller::Server, install);
    let listed = data.read(Query::WorkList {
        parent: None,
        limit: 0,
    });
    assert_eq!(listed, QueryResult::WorkEntries(Vec::new()));
    assert!(matches!(
        run_routed(data, "alice", renew),
        Outcome::WorkRefused {
            refusal: WorkRefusal::UnknownEntry { .. }
        }
    ));
    admitted_id(register_routed(data, "bob", "w0000000000000009"));
}

#[test]
fn the_parent_scopes_and_budgets_its_children_within_the_class_room() {
    let mut cell = Cell::new();
    let classes = [("default".to_string(), 100), ("gpu".to_string(), 1)];
    cell.limits(LimitsUpdate {
        classes: classes.into_iter().collect(),
        ..LimitsUpdate::default()
    });
    let root = admitted_id(cell.register("alice", ROOT, None));
    let child = admitted_id(cell.register("alice", ROOT, Some(&root)));
    let other = admitted_id(cell.register("alice", ROOT, Some(&root)));
    let scope = |id: &str, class: Option<&str>, budget: Option<u64>| Command::WorkScope {
        id: id.into(),
        class: class.map(str::to_string),
        budget,
    };
    let stranger = cell.run(agent_caller("mallory"), scope(&child, None, Some(5)));
    assert!(matches!(
        stranger,
        Outcome::WorkRefused {
            refusal: WorkRefusal::NotAuthorized { .. }
        }
    ));
    let scoped = cell.run(agent_caller("alice"), scope(&child, Some("gpu"), Some(500)));
    assert_eq!(
        scoped,
        Outcome::WorkScoped {
            id: child.clone(),
            class: "gpu".into(),
            budget: Some(500),
        }
    );
    // The gpu class holds one entry per cell: the second is refused with the numbers.
    let full = cell.run(agent_caller("alice"), scope(&other, Some("gpu"), None));
    assert_eq!(refused_limit(&full), WorkLimit::Cell);
    let renew = Command::WorkRenew {
        id: child,
        ttl_ms: 30_000,
    };
    match cell.run(agent_caller("alice"), renew) {
        Outcome::WorkRenewed { budget, .. } => assert_eq!(budget, Some(500)),
        other => panic!("{other:?}"),
    }
    let audit = match cell.read(Query::WorkAudit {
        after_seq: 0,
        limit: 0,
    }) {
        QueryResult::WorkAudit(rows) => rows,
        other => panic!("{other:?}"),
    };
    let scopes: Vec<(&str, &str)> = audit
        .iter()
        .filter(|row| matches!(row.action.code(), "scope" | "budget"))
        .map(|row| (row.action.code(), row.outcome.as_str()))
        .collect();
    assert_eq!(
        scopes,
        [
            ("budget", "not_authorized"),
            ("scope", "scoped"),
            ("scope", "refused_cell")
        ]
    );
}

/// The first of `count` roots `w…` whose points fall in the upper half of the ring when
/// `upper`, else in the lower half.
fn roots_in(upper: bool, count: usize) -> Vec<String> {
    (1u64..)
        .map(|n| format!("w{n:016x}"))
        .filter(|root| (whip_board::route::work_point(root) >= MID) == upper)
        .take(count)
        .collect()
}

const MID: u64 = 1 << 63;

fn installed(cell: &mut Cell, quota: Quota) -> bool {
    let install = Command::WorkQuotaInstall {
        quota,
        ttl_ms: 10_000,
    };
    match cell.run(Caller::Server, install) {
        Outcome::WorkQuotaInstalled { installed, .. } => installed,
        other => panic!("{other:?}"),
    }
}

fn live(cell: &Cell) -> usize {
    match cell.read(Query::WorkList {
        parent: None,
        limit: 0,
    }) {
        QueryResult::WorkEntries(entries) => entries.len(),
        other => panic!("{other:?}"),
    }
}

/// Cell 1 owns both halves of the ring (epoch 1); cell 2 owns nothing yet.
fn two_halves() -> Cell {
    let mut cell = Cell::new();
    assign(&mut cell, 0, MID - 1);
    assign(&mut cell, MID, u64::MAX);
    cell
}

/// Move the upper half of the ring from `source` (cell 1) to `target` (cell 2) as a
/// move's driver does: freeze, copy, the target reports its entries, floor, drop.
fn move_upper_half(meta: &mut Cell, source: &mut Cell, target: &mut Cell) {
    let freeze = Command::RangeFreeze {
        start: MID,
        last: u64::MAX,
        epoch: 2,
    };
    assert!(matches!(
        source.run(Caller::Server, freeze),
        Outcome::RangeFrozenAt { .. }
    ));
    let export = Query::RangeExport {
        start: MID,
        last: u64::MAX,
        after_key: Vec::new(),
        limit: 0,
    };
    let QueryResult::RangeRows { rows, next: None } = source.read(export) else {
        panic!("one page");
    };
    target.run(Caller::Server, Command::RangeImport { rows });
    assert_eq!(live(target), 2, "the arrived entries live on the target");
    let ask = Command::WorkQuotaAsk {
        cell: 2,
        want: 10,
        live: 2,
        ttl_ms: 10_000,
    };
    let Outcome::WorkQuotaLent { quota: reported } = meta.run(Caller::Server, ask) else {
        panic!("the target's ask is lent");
    };
    assert_eq!(
        reported.total, 0,
        "the source still holds the whole ceiling"
    );
    let floor = Command::WorkQuotaFloor {
        version: reported.version,
    };
    let floored = source.run(Caller::Server, floor);
    assert_eq!(
        floored,
        Outcome::WorkQuotaFloored {
            version: reported.version
        }
    );
    let drop = Command::RangeDrop {
        start: MID,
        last: u64::MAX,
    };
    assert!(matches!(
        source.run(Caller::Server, drop),
        Outcome::RangeDropped { done: true, .. }
    ));
}

/// A move takes live work entries to another cell (found by `whip chaos`: 8 live under a
/// ceiling of 6). Their room leaves with them: the source's quota shrinks, a grant lent
/// before the target reported them is refused, and a grant lent after counts them, so the
/// fabric never holds more than its ceiling.
#[test]
fn a_move_takes_its_entries_room_along() {
    let mut meta = Cell::new();
    meta.limits(small_limits());
    let (mut source, mut target) = (two_halves(), Cell::new());
    assert!(installed(&mut source, lend(&mut meta, 1, 5)));
    assert!(
        installed(&mut target, lend(&mut meta, 2, 8)),
        "a grant of 0"
    );
    let (low, high) = (roots_in(false, 4), roots_in(true, 2));
    for root in low.iter().take(3).chain(&high) {
        admitted_id(register_routed(&mut source, "alice", root));
    }
    let stale = lend(&mut meta, 1, 5);
    move_upper_half(&mut meta, &mut source, &mut target);
    assert_eq!((live(&source), live(&target)), (3, 2));
    // The source admits nothing in the room the entries took along.
    assert_eq!(
        refused_limit(&register_routed(&mut source, "bob", &low[3])),
        WorkLimit::Fabric
    );
    assert!(
        !installed(&mut source, stale),
        "a grant lent before the report"
    );
    let fresh = lend(&mut meta, 1, 5);
    assert_eq!(
        fresh.total, 3,
        "the target's 2 live entries count at the meta cell"
    );
    assert!(installed(&mut source, fresh));
    assert_eq!(
        refused_limit(&register_routed(&mut source, "bob", &low[3])),
        WorkLimit::Fabric
    );
    assert_eq!(live(&source) + live(&target), 5);
}
