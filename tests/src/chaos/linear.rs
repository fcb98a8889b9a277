//! A Wing–Gong linearizability search (the list-and-cache form of Lowe and Porcupine),
//! bounded in steps, cached states and time.
//!
//! Operations are call and return events in a doubly linked list sorted by time. The search
//! linearizes the first pending call it can (the model accepts it from the current state and
//! the pair (linearized set, state) is new), lifts it out of the list and starts over; when
//! it meets a return whose call is not linearized it backtracks. An operation with an
//! unknown outcome returns at infinity: it may take effect at any point after its call, or
//! never, so meeting the first such return means every completed operation was placed.

use std::collections::HashSet;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A sequential specification.
pub trait Model {
    /// The model state; hashed for the visited cache.
    type State: Clone + Eq + Hash + std::fmt::Debug;
    /// One operation with its arguments and (when known) its result.
    type Op: std::fmt::Debug;
    /// The state before the first operation.
    fn init(&self) -> Self::State;
    /// The state after `op`, or `None` when `op`'s result is impossible from `state`.
    fn step(&self, state: &Self::State, op: &Self::Op) -> Option<Self::State>;
}

/// One operation to place: its call time and its return time (`None`: unknown outcome).
#[derive(Clone, Debug)]
pub struct Entry<O> {
    /// The operation.
    pub op: O,
    /// Call time.
    pub call: u64,
    /// Return time; `None` when the outcome is unknown.
    pub ret: Option<u64>,
}

/// The search's bounds; past one of them the verdict is `Unknown`, never a violation.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Model steps tried.
    pub steps_max: u64,
    /// Distinct (linearized set, state) pairs remembered.
    pub cache_entries_max: usize,
    /// Wall time.
    pub time_max: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            steps_max: 5_000_000,
            cache_entries_max: 1_000_000,
            time_max: Duration::from_secs(10),
        }
    }
}

/// What the search concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A linearization exists.
    Linearizable,
    /// No linearization exists.
    Violation,
    /// The search hit a bound first.
    Unknown(String),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Call,
    Return,
}

#[derive(Clone, Copy)]
struct Node {
    side: Side,
    op: usize,
    partner: usize,
    prev: usize,
    next: usize,
}

const NIL: usize = usize::MAX;

#[derive(Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

struct List {
    nodes: Vec<Node>,
}

impl List {
    /// Node 0 is the head sentinel.
    fn build<O>(entries: &[Entry<O>]) -> List {
        let mut events: Vec<(u64, u8, usize, Side)> = Vec::with_capacity(entries.len() * 2);
        for (i, e) in entries.iter().enumerate() {
            events.push((e.call, 0, i, Side::Call));
            events.push((e.ret.unwrap_or(u64::MAX), 1, i, Side::Return));
        }
        // Calls sort before returns at equal times: touching operations count as concurrent.
        events.sort_by_key(|&(t, side, i, _)| (t, side, i));
        let mut nodes = vec![Node {
            side: Side::Call,
            op: usize::MAX,
            partner: NIL,
            prev: NIL,
            next: NIL,
        }];
        let mut call_node = vec![NIL; entries.len()];
        for (t, _, i, side) in events {
            let _ = t;
            let at = nodes.len();
            let prev = at - 1;
            nodes[prev].next = at;
            let partner = if side == Side::Return {
                call_node[i]
            } else {
                NIL
            };
            nodes.push(Node {
                side,
                op: i,
                partner,
                prev,
                next: NIL,
            });
            if side == Side::Call {
                call_node[i] = at;
            } else {
                nodes[call_node[i]].partner = at;
            }
        }
        List { nodes }
    }

    fn unlink(&mut self, at: usize) {
        let Node { prev, next, .. } = self.nodes[at];
        self.nodes[prev].next = next;
        if next != NIL {
            self.nodes[next].prev = prev;
        }
    }

    fn relink(&mut self, at: usize) {
        let Node { prev, next, .. } = self.nodes[at];
        self.nodes[prev].next = at;
        if next != NIL {
            self.nodes[next].prev = at;
        }
    }

    fn lift(&mut self, call: usize) {
        let ret = self.nodes[call].partner;
        self.unlink(call);
        self.unlink(ret);
    }

    fn unlift(&mut self, call: usize) {
        let ret = self.nodes[call].partner;
        self.relink(ret);
        self.relink(call);
    }
}

/// Search for a linearization of `entries` under `model`, starting from `init`.
pub fn check_from<M: Model>(
    model: &M,
    init: M::State,
    entries: &[Entry<M::Op>],
    bounds: Bounds,
) -> Verdict {
    let started = Instant::now();
    let mut list = List::build(entries);
    let mut state = init;
    let mut linearized = Bits::new(entries.len());
    let mut cache: HashSet<(Bits, M::State)> = HashSet::new();
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut steps: u64 = 0;
    let mut at = list.nodes[0].next;
    while at != NIL {
        steps += 1;
        if steps.is_multiple_of(4096) && started.elapsed() > bounds.time_max {
            return Verdict::Unknown(format!("search exceeded {:?}", bounds.time_max));
        }
        if steps > bounds.steps_max {
            return Verdict::Unknown(format!("search exceeded {} steps", bounds.steps_max));
        }
        if cache.len() > bounds.cache_entries_max {
            return Verdict::Unknown(format!(
                "search cached over {} states",
                bounds.cache_entries_max
            ));
        }
        let node = list.nodes[at];
        if node.side == Side::Call {
            if let Some(next_state) = model.step(&state, &entries[node.op].op) {
                let mut next_linearized = linearized.clone();
                next_linearized.set(node.op);
                if cache.insert((next_linearized.clone(), next_state.clone())) {
                    stack.push((at, std::mem::replace(&mut state, next_state)));
                    linearized = next_linearized;
                    list.lift(at);
                    at = list.nodes[0].next;
                    continue;
                }
            }
            at = node.next;
        } else {
            if entries[node.op].ret.is_none() {
                // Only unknown-outcome returns remain: each may be left out.
                return Verdict::Linearizable;
            }
            let Some((call, previous)) = stack.pop() else {
                return Verdict::Violation;
            };
            state = previous;
            linearized.clear(list.nodes[call].op);
            list.unlift(call);
            at = list.nodes[call].next;
        }
    }
    Verdict::Linearizable
}

/// Search from the model's initial state.
pub fn check<M: Model>(model: &M, entries: &[Entry<M::Op>], bounds: Bounds) -> Verdict {
    check_from(model, model.init(), entries, bounds)
}

/// The shortest failing prefix (by call order) of a violating history, then made
/// 1-minimal from `loose` (a start state that assumes nothing about earlier operations):
/// every remaining operation is needed for the violation. Returns indexes into `entries`.
pub fn shrink<M: Model>(
    model: &M,
    loose: Option<M::State>,
    entries: &[Entry<M::Op>],
    bounds: Bounds,
) -> Vec<usize>
where
    M::Op: Clone,
{
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| entries[i].call);
    let pick =
        |idx: &[usize]| -> Vec<Entry<M::Op>> { idx.iter().map(|&i| entries[i].clone()).collect() };
    let fails_from = |init: M::State, idx: &[usize]| {
        check_from(model, init, &pick(idx), bounds) == Verdict::Violation
    };
    // Binary search for the shortest failing prefix (failure is monotone in practice).
    let (mut lo, mut hi) = (1, order.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if fails_from(model.init(), &order[..mid]) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let mut kept: Vec<usize> = order[..hi].to_vec();
    let Some(loose) = loose else { return kept };
    if kept.len() > 64 || !fails_from(loose.clone(), &kept) {
        return kept;
    }
    let mut i = 0;
    while i < kept.len() {
        let mut without = kept.clone();
        without.remove(i);
        if !without.is_empty() && fails_from(loose.clone(), &without) {
            kept = without;
        } else {
            i += 1;
        }
    }
    kept
}
