//! The live work registry: who is running, under whom, and whether they may start.
//!
//! Every session, run, sub-agent, shell and job may hold an **entry**: its kind, the agent
//! that owns it, its parent entry and lineage (ancestor ids, root first), its depth, a
//! resource class, the supervision signal its parent set (`run`, `pause`, `stop`) and a
//! time lease the owner renews. Ids nest: a root is `w` and 16 hex digits (chosen by the
//! server before routing), a child is its parent's id, a dot and the parent's child
//! sequence (`w0123456789abcdef.3.1`), so a lineage routes by its root and a subtree is one
//! key range of one cell.
//!
//! **Admission is the registration.** [`register`] refuses, with the limit and the
//! numbers, past the depth limit, past the parent's child limit, when the cell holds its
//! maximum (in all, or for the entry's class), or when the fabric would pass its ceiling.
//! A standalone cell is its own fabric and counts its entries against the ceiling. A cell
//! of a fabric admits only within the **quota** the meta cell lent it: the meta cell
//! ([`lend`]) never lends more than the ceiling minus what every other cell holds, a quota
//! is a lease (it lapses unless renewed), and a lowered quota keeps counting at its old
//! size at the meta cell until the cell confirms it installed the lower one ([`ack`]). A
//! cell whose quota lapsed admits nothing and renews nothing, and every entry it holds lapses
//! with the quota (an entry lives in the quota generation it was admitted in; a quota
//! installed after a lapse starts a new one), so once the meta cell stops counting a
//! lapsed quota no entry admitted under it is alive.
//!
//! **The control plane goes through the parent.** Only an owner of one of an entry's
//! ancestors (for a root: its own owner) or the operator may spawn under it, signal it or
//! revoke it. Revoking removes the entry and its subtree in one apply and names the agents
//! whose tokens the server then revokes ([`revoke_agent`]: only an agent the revoker
//! enrolled). Every spawn, signal, revoke and limit change, admitted or refused, is
//! appended to the cell's audit ledger.
//!
//! A renewal answers the signal in force: the strongest of the entry's own and its
//! ancestors' (`stop` over `pause` over `run`), and `stop` with reason `parent_lost` when an
//! ancestor is gone. A lapsed entry is removed by a tick; its children keep their own
//! leases and hear `stop`.

pub use crate::vocab::work::{
    AuditAction, AuditView, LimitsUpdate, Quota, QuotaView, Signal, SignalReason, WorkEntryView,
    WorkKind, WorkLimit, WorkLimits, WorkRefusal,
};
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::access::Caller;
use crate::codec::{decode, encode};
use crate::deadline::{self, Item};
use crate::keys::{self, WORK_AUDIT, WORK_CELL, WORK_ENTRY, WORK_GRANT, WORK_LIMITS};
use crate::limits::{
    WORK_AUDIT_KEPT_MAX, WORK_CELL_MAX_LIMIT, WORK_CHILDREN_MAX_LIMIT, WORK_CLASSES_MAX,
    WORK_DEPTH_MAX_LIMIT, WORK_QUOTA_SKEW_MS,
};
use crate::query::{Query, QueryResult};
use crate::txn::Txn;
use crate::types::{Outcome, Stamp};

impl WorkKind {
    /// The stable name.
    pub fn code(self) -> &'static str {
        match self {
            WorkKind::Session => "session",
            WorkKind::Run => "run",
            WorkKind::Subagent => "subagent",
            WorkKind::Shell => "shell",
            WorkKind::Job => "job",
        }
    }

    /// The kind of a stable name.
    pub fn parse(text: &str) -> Option<WorkKind> {
        [
            WorkKind::Session,
            WorkKind::Run,
            WorkKind::Subagent,
            WorkKind::Shell,
            WorkKind::Job,
        ]
        .into_iter()
        .find(|kind| kind.code() == text)
    }
}

impl Signal {
    /// The stable name.
    pub fn code(self) -> &'static str {
        match self {
            Signal::Run => "run",
            Signal::Pause => "pause",
            Signal::Stop => "stop",
        }
    }

    /// The signal of a stable name.
    pub fn parse(text: &str) -> Option<Signal> {
        [Signal::Run, Signal::Pause, Signal::Stop]
            .into_iter()
            .find(|signal| signal.code() == text)
    }
}

impl SignalReason {
    /// The stable name.
    pub fn code(self) -> &'static str {
        match self {
            SignalReason::Own => "own",
            SignalReason::Ancestor => "ancestor",
            SignalReason::ParentLost => "parent_lost",
            SignalReason::QuotaLapsed => "quota_lapsed",
        }
    }
}

impl WorkLimit {
    /// The stable name.
    pub fn code(self) -> &'static str {
        match self {
            WorkLimit::Fabric => "fabric",
            WorkLimit::Cell => "cell",
            WorkLimit::Depth => "depth",
            WorkLimit::Children => "children",
            WorkLimit::Owner => "owner",
        }
    }
}

impl WorkRefusal {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            WorkRefusal::Limit { .. } => "limit",
            WorkRefusal::UnknownEntry { .. } => "unknown_entry",
            WorkRefusal::NotAuthorized { .. } => "not_authorized",
            WorkRefusal::AnonymousRefused => "anonymous_refused",
            WorkRefusal::UnknownClass { .. } => "unknown_class",
        }
    }
}

/// The limits as stored before the per-owner share (encoding version 1).
#[derive(Deserialize)]
struct WorkLimitsV1 {
    fabric_max: u64,
    cell_max: u64,
    depth_max: u32,
    children_max: u32,
    classes: BTreeMap<String, u64>,
}

/// The encoding version of stored [`WorkLimits`].
const LIMITS_VERSION: u8 = 2;

/// The owner of entries the operator registers for no agent.
pub const OPERATOR_OWNER: &str = "operator";

/// The resource class every entry gets unless it names one.
pub const DEFAULT_CLASS: &str = "default";

impl Default for WorkLimits {
    fn default() -> Self {
        WorkLimits {
            fabric_max: crate::limits::WORK_FABRIC_MAX_DEFAULT,
            cell_max: crate::limits::WORK_CELL_MAX_DEFAULT,
            depth_max: crate::limits::WORK_DEPTH_MAX_DEFAULT,
            children_max: crate::limits::WORK_CHILDREN_MAX_DEFAULT,
            classes: BTreeMap::from([(DEFAULT_CLASS.to_string(), WORK_CELL_MAX_LIMIT)]),
            owner_max: crate::limits::WORK_OWNER_MAX_DEFAULT,
        }
    }
}

impl WorkLimits {
    /// Limits inside the hard bounds of [`crate::limits`].
    pub fn check(&self) -> Result<(), String> {
        let bounded = self.cell_max <= WORK_CELL_MAX_LIMIT
            && self.owner_max <= WORK_CELL_MAX_LIMIT
            && self.depth_max <= WORK_DEPTH_MAX_LIMIT
            && self.children_max <= WORK_CHILDREN_MAX_LIMIT
            && self.classes.len() <= WORK_CLASSES_MAX;
        if !bounded {
            return Err(format!(
                "work limits are bounded: cell and owner at most {WORK_CELL_MAX_LIMIT}, \
                 depth at most {WORK_DEPTH_MAX_LIMIT}, children at most \
                 {WORK_CHILDREN_MAX_LIMIT}, at most {WORK_CLASSES_MAX} classes"
            ));
        }
        if !self.classes.contains_key(DEFAULT_CLASS) {
            return Err(format!("the class {DEFAULT_CLASS:?} must stay configured"));
        }
        self.classes.keys().try_for_each(|name| check_class(name))
    }
}

impl LimitsUpdate {
    /// `current` with this update applied.
    pub fn applied(&self, current: &WorkLimits) -> WorkLimits {
        let mut limits = current.clone();
        limits.fabric_max = self.fabric_max.unwrap_or(limits.fabric_max);
        limits.cell_max = self.cell_max.unwrap_or(limits.cell_max);
        limits.depth_max = self.depth_max.unwrap_or(limits.depth_max);
        limits.children_max = self.children_max.unwrap_or(limits.children_max);
        limits.classes.extend(self.classes.clone());
        limits.owner_max = self.owner_max.unwrap_or(limits.owner_max);
        limits
    }
}

/// Class names are 1 to 64 ASCII letters, digits, `-` and `_`.
pub fn check_class(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    match ok {
        true => Ok(()),
        false => Err(format!(
            "resource class {name:?} must be 1 to 64 ASCII letters, digits, - or _"
        )),
    }
}

impl AuditAction {
    /// The stable name.
    pub fn code(self) -> &'static str {
        match self {
            AuditAction::Register => "register",
            AuditAction::Signal => "signal",
            AuditAction::Revoke => "revoke",
            AuditAction::Scope => "scope",
            AuditAction::Budget => "budget",
            AuditAction::Limits => "limits",
        }
    }
}

/// Cell-local registry state: counts, the quota, the next root and audit sequences.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct CellWork {
    /// Bumped when a quota is installed after the previous one lapsed: entries of an
    /// older generation lapsed with that quota and never come back.
    generation: u64,
    live: u64,
    by_class: BTreeMap<String, u64>,
    quota: Option<Quota>,
    audit_seq: u64,
}

/// A quota the meta cell lent one cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Grant {
    version: u64,
    total: u64,
    /// What the grant counts for: its total, or more while a lowered total is not yet
    /// confirmed installed.
    held: u64,
    expires_ms: u64,
}

/// A registration as the server built it.
pub(crate) struct Register<'a> {
    pub(crate) root: &'a str,
    pub(crate) parent: Option<&'a str>,
    pub(crate) kind: WorkKind,
    pub(crate) class: &'a str,
    pub(crate) ttl_ms: u64,
    pub(crate) owner: Option<&'a str>,
    pub(crate) quota_retry: bool,
}

/// A root id derived from `seed` (the server derives it from the caller and the
/// idempotency key, so a retry lands on the same root): `w` and 16 hex digits.
pub fn derived_root(seed: &str) -> String {
    format!("w{}", &blake3::hash(seed.as_bytes()).to_hex()[..16])
}

/// The root of an entry id: the text before the first dot.
pub fn root_of(id: &str) -> &str {
    id.split('.').next().unwrap_or(id)
}

/// Whether `id` is a well-formed entry id (`w` + 16 hex digits, then `.n` parts).
pub fn check_id(id: &str) -> Result<(), String> {
    let mut parts = id.split('.');
    let root = parts.next().unwrap_or_default();
    let root_ok = root.len() == 17
        && root.starts_with('w')
        && root[1..].chars().all(|c| c.is_ascii_hexdigit());
    let rest_ok = parts.all(|p| !p.is_empty() && p.len() <= 10 && p.parse::<u64>().is_ok());
    let depth = id.matches('.').count();
    match root_ok && rest_ok && depth <= WORK_DEPTH_MAX_LIMIT as usize {
        true => Ok(()),
        false => Err(format!(
            "work entry id {id:?} is malformed (expected w + 16 hex digits, then .N parts)"
        )),
    }
}

fn entry_key(id: &str) -> Vec<u8> {
    let mut out = vec![WORK_ENTRY];
    keys::push_str(&mut out, root_of(id).as_bytes());
    keys::push_str(&mut out, id.as_bytes());
    out
}

/// The routing point of a stored entry row.
pub(crate) fn row_point(key: &[u8]) -> Option<u64> {
    let (parts, _) = keys::split_first(&key[1..], 1)?;
    let root = String::from_utf8(parts.into_iter().next()?).ok()?;
    Some(crate::route::work_point(&root))
}

fn load_entry(txn: &impl Txn, id: &str) -> Option<WorkEntryView> {
    txn.get(&entry_key(id)).map(|bytes| decode(&bytes))
}

fn store_entry(txn: &mut impl Txn, entry: &WorkEntryView) {
    txn.put(&entry_key(&entry.id), &encode(entry));
}

pub(crate) fn live_entry(txn: &impl Txn, now_ms: u64, id: &str) -> Option<WorkEntryView> {
    let alive = Liveness::of(txn, now_ms);
    load_entry(txn, id).filter(|entry| alive.holds(entry))
}

/// Whether entries are alive at a time: their own lease, and in a fabric the cell's quota
/// (live, and the generation the entry was admitted or renewed in).
struct Liveness {
    now_ms: u64,
    /// `None` on a standalone cell; else the live quota's generation (`None` inside when
    /// the quota lapsed: nothing is alive).
    fabric: Option<Option<u64>>,
}

impl Liveness {
    fn of(txn: &impl Txn, now_ms: u64) -> Liveness {
        let fabric = crate::range_row::in_fabric(txn).then(|| {
            let work = cell_work(txn);
            let live = work.quota.is_some_and(|quota| quota.expires_ms > now_ms);
            live.then_some(work.generation)
        });
        Liveness { now_ms, fabric }
    }

    fn holds(&self, entry: &WorkEntryView) -> bool {
        entry.expires_ms > self.now_ms
            && match self.fabric {
                None => true,
                Some(generation) => generation == Some(entry.generation),
            }
    }
}

fn cell_work(txn: &impl Txn) -> CellWork {
    txn.get(&[WORK_CELL])
        .map(|bytes| decode(&bytes))
        .unwrap_or_default()
}

fn store_cell_work(txn: &mut impl Txn, work: &CellWork) {
    txn.put(&[WORK_CELL], &encode(work));
}

/// The limits in force on this cell (the defaults until the operator sets them).
pub(crate) fn limits(txn: &impl Txn) -> WorkLimits {
    let Some(bytes) = txn.get(&[WORK_LIMITS]) else {
        return WorkLimits::default();
    };
    match crate::codec::versioned(&bytes) {
        Some((LIMITS_VERSION, body)) => {
            postcard::from_bytes(body).expect("stored work limits do not decode")
        }
        _ => {
            let old: WorkLimitsV1 = decode(&bytes);
            WorkLimits {
                fabric_max: old.fabric_max,
                cell_max: old.cell_max,
                depth_max: old.depth_max,
                children_max: old.children_max,
                classes: old.classes,
                owner_max: crate::limits::WORK_OWNER_MAX_DEFAULT,
            }
        }
    }
}

/// Live entries `owner` holds on this cell.
fn owner_count(txn: &impl Txn, owner: &str) -> u64 {
    txn.get(&owner_key(owner)).map_or(0, |bytes| decode(&bytes))
}

fn owner_key(owner: &str) -> Vec<u8> {
    let mut key = vec![crate::keys::WORK_OWNER];
    crate::keys::push_str(&mut key, owner.as_bytes());
    key
}

/// Count one entry more (`up`) or less for `owner` on this cell.
fn count_owner(txn: &mut impl Txn, owner: &str, up: bool) {
    let now = owner_count(txn, owner);
    let next = if up { now + 1 } else { now.saturating_sub(1) };
    match next {
        0 => txn.delete(&owner_key(owner)),
        n => txn.put(&owner_key(owner), &encode(&n)),
    }
}

/// An agent's share of this cell: refused once it holds `owner_max` live entries here.
fn check_owner(txn: &impl Txn, limits: &WorkLimits, caller: &Caller) -> Result<(), WorkRefusal> {
    let Caller::Agent(agent) = caller else {
        return Ok(());
    };
    let held = owner_count(txn, agent);
    if held < limits.owner_max {
        return Ok(());
    }
    let detail = format!(
        "agent {agent:?} holds {held} live entries on this cell, its share is {}",
        limits.owner_max
    );
    Err(limit(WorkLimit::Owner, limits.owner_max, held, detail))
}

/// The acting agent's name for refusals and the audit ledger.
fn actor(caller: &Caller) -> String {
    caller.name().to_string()
}

/// Whether `caller` may steer `entry`: the operator, an owner of one of its ancestors,
/// or for a root its own owner.
pub(crate) fn steers(txn: &impl Txn, caller: &Caller, entry: &WorkEntryView) -> bool {
    let agent = match caller {
        Caller::Operator | Caller::Server => return true,
        Caller::Agent(agent) => agent,
        Caller::Anonymous => return false,
    };
    if entry.parent.is_none() {
        return &entry.owner == agent;
    }
    entry
        .lineage
        .iter()
        .filter_map(|id| load_entry(txn, id))
        .any(|ancestor| &ancestor.owner == agent)
}

fn unknown_class(limits: &WorkLimits, class: &str) -> WorkRefusal {
    let known = limits
        .classes
        .keys()
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    WorkRefusal::UnknownClass {
        class: class.to_string(),
        known,
    }
}

fn refused(refusal: WorkRefusal) -> Outcome {
    Outcome::WorkRefused { refusal }
}

fn limit(limit: WorkLimit, max: u64, current: u64, detail: String) -> WorkRefusal {
    WorkRefusal::Limit {
        limit,
        max,
        current,
        detail,
    }
}

/// Register an entry (see the module doc for the admission rules).
pub(crate) fn register(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &Caller,
    request: &Register<'_>,
) -> Outcome {
    let target = request.parent.unwrap_or(request.root).to_string();
    let outcome = admit(txn, stamp, caller, request);
    if request.quota_retry && fabric_refusal(&outcome) {
        return outcome;
    }
    let detail = match &outcome {
        Outcome::WorkAdmitted { entry, .. } => format!("{} {}", entry.kind.code(), entry.id),
        Outcome::WorkRefused { refusal } => refusal.to_string(),
        other => format!("{other:?}"),
    };
    audit(
        txn,
        stamp.time_ms,
        caller,
        AuditAction::Register,
        &target,
        &outcome,
        detail,
    );
    outcome
}

fn admit(txn: &mut impl Txn, stamp: Stamp, caller: &Caller, request: &Register<'_>) -> Outcome {
    let now_ms = stamp.time_ms;
    // The operator (the engine on its store, an operator's tooling) registers as itself.
    let agent = match caller {
        Caller::Agent(agent) => agent.as_str(),
        Caller::Operator | Caller::Server => OPERATOR_OWNER,
        Caller::Anonymous => return refused(WorkRefusal::AnonymousRefused),
    };
    let operator = !matches!(caller, Caller::Agent(_));
    let limits = limits(txn);
    let Some(&class_max) = limits.classes.get(request.class) else {
        return refused(unknown_class(&limits, request.class));
    };
    let parent = match request.parent {
        None => None,
        Some(id) => match live_entry(txn, now_ms, id) {
            None => return refused(WorkRefusal::UnknownEntry { id: id.to_string() }),
            Some(parent) if !operator && !authorized_parent(txn, agent, &parent) => {
                let id = id.to_string();
                let caller = agent.to_string();
                return refused(WorkRefusal::NotAuthorized { caller, id });
            }
            Some(parent) => Some(parent),
        },
    };
    if let Err(refusal) =
        check_tree(&limits, parent.as_ref()).and_then(|()| check_owner(txn, &limits, caller))
    {
        return refused(refusal);
    }
    let mut work = cell_work(txn);
    if let Err(refusal) = check_cell(txn, now_ms, &limits, &work, (request.class, class_max)) {
        return refused(refusal);
    }
    let entry = new_entry(txn, stamp, agent, request, parent.as_ref(), &work);
    let Some(entry) = entry else {
        let id = request.root.to_string();
        return Outcome::Invalid {
            reason: format!("work entry id {id:?} is taken"),
        };
    };
    if let Some(mut parent) = parent {
        parent.children += 1;
        parent.next_child += 1;
        store_entry(txn, &parent);
    }
    work.live += 1;
    *work.by_class.entry(entry.class.clone()).or_default() += 1;
    store_cell_work(txn, &work);
    count_owner(txn, &entry.owner, true);
    store_entry(txn, &entry);
    deadline::insert(txn, entry.expires_ms, &item(&entry.id));
    let peers = siblings(txn, now_ms, &entry);
    Outcome::WorkAdmitted {
        entry: Box::new(entry),
        peers,
    }
}

fn fabric_refusal(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::WorkRefused { refusal } if short_of_quota(refusal))
}

/// Whether `refusal` is for lack of this cell's share of the fabric ceiling (a quota
/// round may lend it more).
pub(crate) fn short_of_quota(refusal: &WorkRefusal) -> bool {
    matches!(
        refusal,
        WorkRefusal::Limit {
            limit: WorkLimit::Fabric,
            ..
        }
    )
}

/// A spawn under `parent` needs the parent's owner or an owner of one of its ancestors.
fn authorized_parent(txn: &impl Txn, agent: &str, parent: &WorkEntryView) -> bool {
    parent.owner == agent
        || parent
            .lineage
            .iter()
            .filter_map(|id| load_entry(txn, id))
            .any(|ancestor| ancestor.owner == agent)
}

fn check_tree(limits: &WorkLimits, parent: Option<&WorkEntryView>) -> Result<(), WorkRefusal> {
    let Some(parent) = parent else { return Ok(()) };
    let depth = parent.depth + 1;
    if depth > limits.depth_max {
        let detail = format!(
            "a child of {} would be at depth {depth}, the limit is {}",
            parent.id, limits.depth_max
        );
        let max = u64::from(limits.depth_max);
        return Err(limit(WorkLimit::Depth, max, u64::from(depth), detail));
    }
    if parent.children >= limits.children_max {
        let detail = format!(
            "{} has {} live children, the limit is {}",
            parent.id, parent.children, limits.children_max
        );
        let (max, now) = (u64::from(limits.children_max), u64::from(parent.children));
        return Err(limit(WorkLimit::Children, max, now, detail));
    }
    Ok(())
}

fn check_cell(
    txn: &impl Txn,
    now_ms: u64,
    limits: &WorkLimits,
    work: &CellWork,
    (class, class_max): (&str, u64),
) -> Result<(), WorkRefusal> {
    if work.live >= limits.cell_max {
        let detail = format!(
            "this cell holds {} live entries, its limit is {}",
            work.live, limits.cell_max
        );
        return Err(limit(WorkLimit::Cell, limits.cell_max, work.live, detail));
    }
    let in_class = work.by_class.get(class).copied().unwrap_or(0);
    if in_class >= class_max {
        let detail = format!(
            "this cell holds {in_class} live entries of class {class:?}, its limit is {class_max}"
        );
        return Err(limit(WorkLimit::Cell, class_max, in_class, detail));
    }
    let ceiling = limits.fabric_max;
    if !crate::range_row::in_fabric(txn) {
        if work.live >= ceiling {
            let detail = format!("the ceiling is {ceiling} live entries and all are taken");
            return Err(limit(WorkLimit::Fabric, ceiling, work.live, detail));
        }
        return Ok(());
    }
    match work.quota {
        Some(quota) if quota.expires_ms > now_ms && work.live < quota.total => Ok(()),
        Some(quota) if quota.expires_ms > now_ms => {
            let detail = format!(
                "the fabric ceiling is {ceiling} live entries; this cell's quota of it is {} \
                 and all are taken",
                quota.total
            );
            Err(limit(WorkLimit::Fabric, ceiling, work.live, detail))
        }
        _ => {
            let detail = format!(
                "the fabric ceiling is {ceiling} live entries; this cell holds no live quota \
                 of it (the meta cell did not confirm one)"
            );
            Err(limit(WorkLimit::Fabric, ceiling, work.live, detail))
        }
    }
}

/// The entry a registration creates; `None` when a root id is taken.
fn new_entry(
    txn: &impl Txn,
    stamp: Stamp,
    agent: &str,
    request: &Register<'_>,
    parent: Option<&WorkEntryView>,
    work: &CellWork,
) -> Option<WorkEntryView> {
    let (id, lineage, depth) = match parent {
        Some(parent) => {
            let mut lineage = parent.lineage.clone();
            lineage.push(parent.id.clone());
            let id = format!("{}.{}", parent.id, parent.next_child);
            (id, lineage, parent.depth + 1)
        }
        None => (request.root.to_string(), Vec::new(), 0),
    };
    if load_entry(txn, &id).is_some() {
        return None;
    }
    let expires_ms = stamp.time_ms.saturating_add(request.ttl_ms);
    Some(WorkEntryView {
        id,
        kind: request.kind,
        owner: request.owner.unwrap_or(agent).to_string(),
        parent: parent.map(|p| p.id.clone()),
        lineage,
        depth,
        class: request.class.to_string(),
        signal: Signal::Run,
        created_ms: stamp.time_ms,
        expires_ms,
        children: 0,
        next_child: 0,
        generation: work.generation,
        budget: None,
    })
}

fn item(id: &str) -> Item {
    Item::Work {
        root: root_of(id).to_string(),
        id: id.to_string(),
    }
}

/// Ids of the live entries under `parent` (one level), in id order.
fn children_of(txn: &impl Txn, now_ms: u64, parent: &str) -> Vec<WorkEntryView> {
    let mut start = vec![WORK_ENTRY];
    keys::push_str(&mut start, root_of(parent).as_bytes());
    let mut prefix = start.clone();
    keys::push_open(&mut prefix, format!("{parent}.").as_bytes());
    let end = keys::prefix_end(&prefix);
    let depth = parent.matches('.').count() + 1;
    let alive = Liveness::of(txn, now_ms);
    txn.scan(&prefix, &end, crate::limits::LIST_ROWS_MAX)
        .into_iter()
        .map(|(_, value)| decode::<WorkEntryView>(&value))
        .filter(|entry| entry.id.matches('.').count() == depth && alive.holds(entry))
        .collect()
}

fn siblings(txn: &impl Txn, now_ms: u64, entry: &WorkEntryView) -> Vec<String> {
    let Some(parent) = &entry.parent else {
        return Vec::new();
    };
    children_of(txn, now_ms, parent)
        .into_iter()
        .map(|sibling| sibling.id)
        .filter(|id| id != &entry.id)
        .collect()
}

/// Renew `id`'s lease and answer the signal in force.
pub(crate) fn renew(
    txn: &mut impl Txn,
    now_ms: u64,
    caller: &Caller,
    id: &str,
    ttl: u64,
) -> Outcome {
    let alive = Liveness::of(txn, now_ms);
    if alive.fabric == Some(None) {
        // The cell's quota lapsed: it cannot confirm anything, so nothing is extended.
        return Outcome::WorkRenewed {
            signal: Signal::Stop,
            reason: SignalReason::QuotaLapsed,
            expires_ms: load_entry(txn, id).map_or(0, |entry| entry.expires_ms),
            budget: None,
        };
    }
    let Some(mut entry) = load_entry(txn, id).filter(|entry| alive.holds(entry)) else {
        return refused(WorkRefusal::UnknownEntry { id: id.to_string() });
    };
    let own = matches!(caller, Caller::Agent(agent) if agent == &entry.owner);
    if !own && !steers(txn, caller, &entry) {
        let caller = actor(caller);
        return refused(WorkRefusal::NotAuthorized {
            caller,
            id: id.to_string(),
        });
    }
    let (signal, reason) = signal_in_force(txn, now_ms, &entry);
    let expires_ms = now_ms.saturating_add(ttl).max(entry.expires_ms);
    deadline::reschedule(txn, entry.expires_ms, expires_ms, &item(id));
    entry.expires_ms = expires_ms;
    store_entry(txn, &entry);
    Outcome::WorkRenewed {
        signal,
        reason,
        expires_ms,
        budget: entry.budget,
    }
}

fn signal_in_force(txn: &impl Txn, now_ms: u64, entry: &WorkEntryView) -> (Signal, SignalReason) {
    let mut strongest = (entry.signal, SignalReason::Own);
    for id in &entry.lineage {
        match live_entry(txn, now_ms, id) {
            None => return (Signal::Stop, SignalReason::ParentLost),
            Some(ancestor) if ancestor.signal > strongest.0 => {
                strongest = (ancestor.signal, SignalReason::Ancestor);
            }
            Some(_) => {}
        }
    }
    strongest
}

/// The live entry `id` when `caller` may steer it; the refusal otherwise.
fn steerable(
    txn: &impl Txn,
    now_ms: u64,
    caller: &Caller,
    id: &str,
) -> Result<WorkEntryView, Outcome> {
    match live_entry(txn, now_ms, id) {
        None => Err(refused(WorkRefusal::UnknownEntry { id: id.to_string() })),
        Some(entry) if !steers(txn, caller, &entry) => {
            let caller = actor(caller);
            Err(refused(WorkRefusal::NotAuthorized {
                caller,
                id: id.to_string(),
            }))
        }
        Some(entry) => Ok(entry),
    }
}

/// Set `id`'s signal.
pub(crate) fn signal(
    txn: &mut impl Txn,
    now_ms: u64,
    caller: &Caller,
    id: &str,
    signal: Signal,
) -> Outcome {
    let outcome = match steerable(txn, now_ms, caller, id) {
        Err(refusal) => refusal,
        Ok(mut entry) => {
            entry.signal = signal;
            store_entry(txn, &entry);
            Outcome::WorkSignalled {
                id: id.to_string(),
                signal,
            }
        }
    };
    let detail = signal.code().to_string();
    audit(
        txn,
        now_ms,
        caller,
        AuditAction::Signal,
        id,
        &outcome,
        detail,
    );
    outcome
}

/// A change of an entry's scope: its class, its budget.
pub(crate) struct Scope<'a> {
    pub(crate) class: Option<&'a str>,
    pub(crate) budget: Option<u64>,
}

/// Change `id`'s class (within the class's room on this cell) and/or budget.
pub(crate) fn scope(
    txn: &mut impl Txn,
    now_ms: u64,
    caller: &Caller,
    id: &str,
    change: Scope<'_>,
) -> Outcome {
    let outcome = match steerable(txn, now_ms, caller, id) {
        Err(refusal) => refusal,
        Ok(entry) => rescope(txn, entry, &change),
    };
    let action = match change.class {
        Some(_) => AuditAction::Scope,
        None => AuditAction::Budget,
    };
    let detail = format!("class {:?} budget {:?}", change.class, change.budget);
    audit(txn, now_ms, caller, action, id, &outcome, detail);
    outcome
}

fn rescope(txn: &mut impl Txn, mut entry: WorkEntryView, change: &Scope<'_>) -> Outcome {
    if let Some(class) = change.class.filter(|class| *class != entry.class) {
        let limits = limits(txn);
        let Some(&class_max) = limits.classes.get(class) else {
            return refused(unknown_class(&limits, class));
        };
        let mut work = cell_work(txn);
        let in_class = work.by_class.get(class).copied().unwrap_or(0);
        if in_class >= class_max {
            let detail = format!(
                "this cell holds {in_class} live entries of class {class:?}, its limit is \
                 {class_max}"
            );
            return refused(limit(WorkLimit::Cell, class_max, in_class, detail));
        }
        if let Some(n) = work.by_class.get_mut(&entry.class) {
            *n = n.saturating_sub(1);
        }
        *work.by_class.entry(class.to_string()).or_default() += 1;
        store_cell_work(txn, &work);
        entry.class = class.to_string();
    }
    if change.budget.is_some() {
        entry.budget = change.budget;
    }
    store_entry(txn, &entry);
    Outcome::WorkScoped {
        id: entry.id,
        class: entry.class,
        budget: entry.budget,
    }
}

/// Remove `id` and its subtree; name the agents the server should revoke: owners of
/// removed entries other than the revoker, the owners of the ancestors that stay and a
/// revoked root's own owner.
pub(crate) fn revoke(txn: &mut impl Txn, now_ms: u64, caller: &Caller, id: &str) -> Outcome {
    let outcome = match steerable(txn, now_ms, caller, id) {
        Err(refusal) => refusal,
        Ok(entry) => remove_subtree(txn, caller, &entry),
    };
    let detail = match &outcome {
        Outcome::WorkRevoked { removed, agents } => {
            format!("{removed} entries removed, agents revoked: {agents:?}")
        }
        _ => String::new(),
    };
    audit(
        txn,
        now_ms,
        caller,
        AuditAction::Revoke,
        id,
        &outcome,
        detail,
    );
    outcome
}

fn remove_subtree(txn: &mut impl Txn, caller: &Caller, entry: &WorkEntryView) -> Outcome {
    let mut prefix = vec![WORK_ENTRY];
    keys::push_str(&mut prefix, root_of(&entry.id).as_bytes());
    keys::push_open(&mut prefix, format!("{}.", entry.id).as_bytes());
    let end = keys::prefix_end(&prefix);
    let mut doomed = vec![entry.clone()];
    let below = txn.scan(&prefix, &end, WORK_CELL_MAX_LIMIT as usize);
    doomed.extend(
        below
            .iter()
            .map(|(_, value)| decode::<WorkEntryView>(value)),
    );
    // The owners that stay: the ancestors', the revoker, and a root's own owner (a
    // top-level agent is not a sub-agent of anyone; revoking its work leaves it be).
    let root_owner = entry.parent.is_none().then(|| entry.owner.clone());
    let keep: Vec<String> = entry
        .lineage
        .iter()
        .filter_map(|id| load_entry(txn, id))
        .map(|ancestor| ancestor.owner)
        .chain(std::iter::once(actor(caller)))
        .chain(root_owner)
        .collect();
    let mut agents: Vec<String> = doomed
        .iter()
        .map(|e| e.owner.clone())
        .filter(|owner| !keep.contains(owner))
        .collect();
    agents.sort();
    agents.dedup();
    for doomed in &doomed {
        forget(txn, doomed);
    }
    Outcome::WorkRevoked {
        removed: u32::try_from(doomed.len()).unwrap_or(u32::MAX),
        agents,
    }
}

/// Delete one entry with its deadline and counts (its parent counts one child less).
fn forget(txn: &mut impl Txn, entry: &WorkEntryView) {
    txn.delete(&entry_key(&entry.id));
    // Its mailbox goes with it (at most `MAIL_DEPTH_MAX` messages wait there).
    crate::mail::purge_entry(txn, &entry.id);
    deadline::remove(txn, entry.expires_ms, &item(&entry.id));
    uncount(txn, entry);
    if let Some(mut parent) = entry.parent.as_deref().and_then(|id| load_entry(txn, id)) {
        parent.children = parent.children.saturating_sub(1);
        store_entry(txn, &parent);
    }
}

fn uncount(txn: &mut impl Txn, entry: &WorkEntryView) {
    let mut work = cell_work(txn);
    work.live = work.live.saturating_sub(1);
    if let Some(n) = work.by_class.get_mut(&entry.class) {
        *n = n.saturating_sub(1);
    }
    store_cell_work(txn, &work);
    count_owner(txn, &entry.owner, false);
}

/// A tick: remove `id` if its lease lapsed (its children stay and hear `stop`).
pub(crate) fn expire(txn: &mut impl Txn, now_ms: u64, id: &str) -> u32 {
    match load_entry(txn, id) {
        Some(entry) if entry.expires_ms <= now_ms => {
            forget(txn, &entry);
            1
        }
        // Renewed meanwhile: the index entry moved with it.
        _ => 0,
    }
}

/// A range move brought an entry row here: count it, and let it live in this cell's
/// quota generation; returns the row to store.
pub(crate) fn arrived(txn: &mut impl Txn, value: &[u8]) -> Vec<u8> {
    let mut entry: WorkEntryView = decode(value);
    let mut work = cell_work(txn);
    work.live += 1;
    *work.by_class.entry(entry.class.clone()).or_default() += 1;
    entry.generation = work.generation;
    store_cell_work(txn, &work);
    count_owner(txn, &entry.owner, true);
    encode(&entry)
}

/// A row written again by a move replaces this entry: it stops counting (the new row is
/// counted by [`arrived`]).
pub(crate) fn replaced(txn: &mut impl Txn, value: &[u8]) {
    uncount(txn, &decode(value));
}

/// A range move takes an entry row away (or a move's target deletes a stale copy): it
/// stops counting, and its room leaves with it. The quota this cell holds shrinks by one,
/// so the room comes back only with a grant the meta cell lends after the cell that took
/// the entry reported it ([`floor`]).
pub(crate) fn departed(txn: &mut impl Txn, value: &[u8]) {
    uncount(txn, &decode(value));
    let mut work = cell_work(txn);
    if let Some(quota) = work.quota.as_mut() {
        quota.total = quota.total.saturating_sub(1);
        store_cell_work(txn, &work);
    }
}

/// Before a move drops this cell's copy of a range, its driver had the target report the
/// entries it took (`Command::WorkQuotaAsk`, lent at `version`): refuse every grant the
/// meta cell lent at or before `version`, which may count room those entries still take
/// (`Command::WorkQuotaFloor`). A cell without a quota keeps a lapsed one at `version`
/// (lapsed or none admit nothing and keep nothing live alike).
pub(crate) fn floor(txn: &mut impl Txn, version: u64) -> Outcome {
    let mut work = cell_work(txn);
    let quota = work.quota.get_or_insert(Quota {
        version,
        total: 0,
        expires_ms: 0,
    });
    quota.version = quota.version.max(version);
    let version = quota.version;
    store_cell_work(txn, &work);
    Outcome::WorkQuotaFloored { version }
}

/// Change the limits (the operator's); a change past the hard bounds changes nothing.
pub(crate) fn set_limits(
    txn: &mut impl Txn,
    now_ms: u64,
    caller: &Caller,
    update: &LimitsUpdate,
) -> Outcome {
    let new = &update.applied(&limits(txn));
    if let Err(reason) = new.check() {
        return Outcome::Invalid { reason };
    }
    txn.put(
        &[WORK_LIMITS],
        &crate::codec::encode_versioned(LIMITS_VERSION, new),
    );
    let outcome = Outcome::WorkLimitsSet {
        limits: new.clone(),
    };
    let detail = format!(
        "fabric {} cell {} depth {} children {} classes {:?}",
        new.fabric_max, new.cell_max, new.depth_max, new.children_max, new.classes
    );
    audit(
        txn,
        now_ms,
        caller,
        AuditAction::Limits,
        "limits",
        &outcome,
        detail,
    );
    outcome
}

fn outcome_code(outcome: &Outcome) -> String {
    match outcome {
        Outcome::WorkAdmitted { .. } => "admitted".into(),
        Outcome::WorkSignalled { .. } => "signalled".into(),
        Outcome::WorkScoped { .. } => "scoped".into(),
        Outcome::WorkRevoked { .. } => "revoked".into(),
        Outcome::WorkLimitsSet { .. } => "set".into(),
        Outcome::WorkRefused {
            refusal: WorkRefusal::Limit { limit, .. },
        } => format!("refused_{}", limit.code()),
        Outcome::WorkRefused { refusal } => refusal.code().into(),
        Outcome::Invalid { .. } => "invalid".into(),
        other => format!("{other:?}"),
    }
}

fn audit(
    txn: &mut impl Txn,
    now_ms: u64,
    caller: &Caller,
    action: AuditAction,
    target: &str,
    outcome: &Outcome,
    detail: String,
) {
    let mut work = cell_work(txn);
    work.audit_seq += 1;
    let seq = work.audit_seq;
    store_cell_work(txn, &work);
    let row = AuditView {
        seq,
        time_ms: now_ms,
        actor: actor(caller),
        action,
        target: target.to_string(),
        outcome: outcome_code(outcome),
        detail,
        cell: 0,
    };
    txn.put(&audit_key(seq), &encode(&row));
    if let Some(old) = seq.checked_sub(WORK_AUDIT_KEPT_MAX) {
        txn.delete(&audit_key(old));
    }
}

fn audit_key(seq: u64) -> Vec<u8> {
    let mut out = vec![WORK_AUDIT];
    keys::push_u64(&mut out, seq);
    out
}

/// What a cell asks the meta cell for (`Command::WorkQuotaAsk`).
pub(crate) struct Ask {
    /// The quota it would like.
    pub(crate) want: u64,
    /// The live entries it holds (0 from a `WorkQuotaLend`, which did not say).
    pub(crate) live: u64,
    /// The grant's lease.
    pub(crate) ttl_ms: u64,
}

/// The meta cell lends `cell` a quota of up to `want` entries for `ttl_ms`: never more
/// than the ceiling minus what every other live grant holds. A grant holds at least the
/// live entries its cell reported: a move can bring a cell entries no grant of its own
/// covers, and until a grant that fits them is confirmed they count here, so no other
/// cell is lent their room.
pub(crate) fn lend(txn: &mut impl Txn, stamp: Stamp, cell: u64, ask: Ask) -> Outcome {
    let Ask {
        want,
        live: reported,
        ttl_ms,
    } = ask;
    let now_ms = stamp.time_ms;
    let ceiling = limits(txn).fabric_max;
    let grants = txn.scan(
        &[WORK_GRANT],
        &[WORK_GRANT + 1],
        crate::limits::LIST_ROWS_MAX,
    );
    let mut others = 0u64;
    let mut mine = Grant::default();
    for (key, value) in grants {
        let grant: Grant = decode(&value);
        if grant_key(cell) == key {
            mine = grant;
        } else if grant.expires_ms.saturating_add(WORK_QUOTA_SKEW_MS) > now_ms {
            others = others.saturating_add(grant.held);
        }
    }
    let total = want.min(ceiling.saturating_sub(others));
    let live = mine.expires_ms.saturating_add(WORK_QUOTA_SKEW_MS) > now_ms;
    let held = if live { mine.held.max(total) } else { total }.max(reported);
    let grant = Grant {
        version: stamp.fence(),
        total,
        held,
        expires_ms: now_ms.saturating_add(ttl_ms),
    };
    txn.put(&grant_key(cell), &encode(&grant));
    Outcome::WorkQuotaLent {
        quota: Quota {
            version: grant.version,
            total,
            expires_ms: grant.expires_ms,
        },
    }
}

/// The cell confirmed it installed grant `version`: the grant counts for its total only.
pub(crate) fn ack(txn: &mut impl Txn, cell: u64, version: u64) -> Outcome {
    let Some(mut grant) = txn.get(&grant_key(cell)).map(|b| decode::<Grant>(&b)) else {
        return Outcome::WorkQuotaAcked { current: false };
    };
    let current = grant.version == version;
    if current {
        grant.held = grant.total;
        txn.put(&grant_key(cell), &encode(&grant));
    }
    Outcome::WorkQuotaAcked { current }
}

fn grant_key(cell: u64) -> Vec<u8> {
    let mut out = vec![WORK_GRANT];
    keys::push_u64(&mut out, cell);
    out
}

/// The cell installs a grant newer than the one it holds; its expiry is the meta cell's
/// less the skew bound, and no later than `now + ttl_ms`.
pub(crate) fn install(txn: &mut impl Txn, now_ms: u64, grant: Quota, ttl_ms: u64) -> Outcome {
    let mut work = cell_work(txn);
    if work.quota.is_some_and(|held| held.version >= grant.version) {
        return Outcome::WorkQuotaInstalled {
            installed: false,
            live: work.live,
        };
    }
    let expires_ms = grant
        .expires_ms
        .saturating_sub(WORK_QUOTA_SKEW_MS)
        .min(now_ms.saturating_add(ttl_ms));
    if work.quota.is_none_or(|held| held.expires_ms <= now_ms) {
        // The quota lapsed (or never was): what lived under it stays lapsed.
        work.generation += 1;
    }
    work.quota = Some(Quota {
        expires_ms,
        ..grant
    });
    let live = work.live;
    store_cell_work(txn, &work);
    Outcome::WorkQuotaInstalled {
        installed: true,
        live,
    }
}

/// What the quota loop needs.
pub(crate) fn quota_view(txn: &impl Txn) -> QuotaView {
    let work = cell_work(txn);
    let limits = limits(txn);
    let want = work
        .live
        .saturating_add(crate::limits::WORK_QUOTA_CHUNK)
        .min(limits.cell_max);
    QuotaView {
        live: work.live,
        quota: work.quota,
        want,
        in_fabric: crate::range_row::in_fabric(txn),
    }
}

/// Answer a registry read.
pub(crate) fn answer(txn: &impl Txn, now_ms: u64, query: &Query) -> QueryResult {
    let cap = |limit: u32| match limit as usize {
        0 => crate::limits::LIST_ROWS_MAX,
        limit => limit.min(crate::limits::LIST_ROWS_MAX),
    };
    match query {
        Query::WorkList { parent, limit } => {
            QueryResult::WorkEntries(list(txn, now_ms, parent.as_deref(), cap(*limit)))
        }
        Query::WorkEntry { id } => {
            QueryResult::WorkEntries(live_entry(txn, now_ms, id).into_iter().collect())
        }
        Query::WorkAudit { after_seq, limit } => {
            QueryResult::WorkAudit(audit_list(txn, *after_seq, cap(*limit)))
        }
        Query::WorkQuota => QueryResult::WorkQuota(quota_view(txn)),
        Query::WorkLimits => QueryResult::WorkLimits(limits(txn)),
        other => unreachable!("{other:?} is not a registry read"),
    }
}

/// Live entries (of one parent, or all), in id order.
fn list(txn: &impl Txn, now_ms: u64, parent: Option<&str>, limit: usize) -> Vec<WorkEntryView> {
    if let Some(parent) = parent {
        let mut children = children_of(txn, now_ms, parent);
        children.truncate(limit);
        return children;
    }
    let alive = Liveness::of(txn, now_ms);
    txn.scan(&[WORK_ENTRY], &[WORK_ENTRY + 1], limit)
        .into_iter()
        .map(|(_, value)| decode::<WorkEntryView>(&value))
        .filter(|entry| alive.holds(entry))
        .collect()
}

/// Audit rows after `after_seq`, oldest first.
fn audit_list(txn: &impl Txn, after_seq: u64, limit: usize) -> Vec<AuditView> {
    let start = audit_key(after_seq.saturating_add(1));
    txn.scan(&start, &[WORK_AUDIT + 1], limit)
        .into_iter()
        .map(|(_, value)| decode(&value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    /// Limits stored before the per-owner share still read, with the default share; the
    /// current shape is stored under version 2 and reads back whole.
    #[test]
    fn stored_limits_of_both_versions_read() {
        let mut txn = MemTxn::default();
        let old = (
            7u64,
            5u64,
            3u32,
            2u32,
            BTreeMap::from([("default".to_string(), 9u64)]),
        );
        txn.put(&[WORK_LIMITS], &encode(&old));
        let read = limits(&txn);
        assert_eq!((read.fabric_max, read.cell_max, read.depth_max), (7, 5, 3));
        assert_eq!(read.owner_max, crate::limits::WORK_OWNER_MAX_DEFAULT);
        let mut new = read.clone();
        new.owner_max = 4;
        let bytes = crate::codec::encode_versioned(LIMITS_VERSION, &new);
        assert_eq!(bytes[0], 2, "the version byte is pinned");
        txn.put(&[WORK_LIMITS], &bytes);
        assert_eq!(limits(&txn), new);
    }
}
