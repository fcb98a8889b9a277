//! The sequential specifications the linearizability search judges: a CAS register with
//! versions, and a lease with slots, fences and deadlines.

use serde_json::Value;

use super::history::{Kind, Op};
use super::linear::{Entry, Model};

/// A register version as far as the history tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// Exactly this revision (0 = absent).
    Known(u64),
    /// Written by an operation whose result is unknown: some revision above this one.
    Above(u64),
}

impl Version {
    fn floor(self) -> u64 {
        match self {
            Version::Known(v) | Version::Above(v) => v,
        }
    }
    fn matches(self, v: u64) -> bool {
        match self {
            Version::Known(k) => k == v,
            Version::Above(a) => v > a,
        }
    }
}

/// The register's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Register {
    /// Nothing known yet (the loose start used when shrinking a violation).
    Any,
    /// A value (`None`: absent) at a version.
    Is(Option<String>, Version),
}

/// One register operation: arguments and, when known, the result.
#[derive(Clone, Debug)]
pub enum RegisterOp {
    /// A read saw `value` at `version`.
    Read {
        /// The value seen (`None`: absent).
        value: Option<String>,
        /// The version seen.
        version: u64,
    },
    /// An unconditional write; `version` is the new revision when known.
    Write {
        /// The value written.
        value: String,
        /// The revision it got.
        version: Option<u64>,
    },
    /// A write conditional on `expect` (0 = absent).
    Cas {
        /// The expected revision.
        expect: u64,
        /// The value written.
        value: String,
        /// The revision it got.
        version: Option<u64>,
    },
    /// A compare-and-set refused because the key was at `current` (0 = absent), not at
    /// `expect`: it wrote nothing, and at its linearization point the key held `current`.
    Refused {
        /// The expected revision.
        expect: u64,
        /// The revision the refusal reported.
        current: u64,
    },
}

/// The CAS register with versions (modification revisions, strictly increasing).
pub struct RegisterModel;

impl Model for RegisterModel {
    type State = Register;
    type Op = RegisterOp;

    fn init(&self) -> Register {
        Register::Is(None, Version::Known(0))
    }

    fn step(&self, state: &Register, op: &RegisterOp) -> Option<Register> {
        match (state, op) {
            (Register::Any, RegisterOp::Read { value, version }) => {
                Some(Register::Is(value.clone(), Version::Known(*version)))
            }
            (Register::Is(current, at), RegisterOp::Read { value, version }) => (current == value
                && at.matches(*version))
            .then(|| Register::Is(value.clone(), Version::Known(*version))),
            (Register::Any, RegisterOp::Refused { expect, current }) => {
                (expect != current).then_some(Register::Any)
            }
            (Register::Is(value, at), RegisterOp::Refused { expect, current }) => {
                (expect != current && at.matches(*current))
                    .then(|| Register::Is(value.clone(), Version::Known(*current)))
            }
            (_, RegisterOp::Write { value, version }) => {
                let floor = floor_of(state);
                written(value, *version, floor)
            }
            (
                _,
                RegisterOp::Cas {
                    expect,
                    value,
                    version,
                },
            ) => {
                if let Register::Is(_, at) = state
                    && !at.matches(*expect)
                {
                    return None;
                }
                written(value, *version, (*expect).max(floor_of(state)))
            }
        }
    }
}

fn floor_of(state: &Register) -> u64 {
    match state {
        Register::Any => 0,
        Register::Is(_, at) => at.floor(),
    }
}

fn written(value: &str, version: Option<u64>, floor: u64) -> Option<Register> {
    match version {
        Some(v) if v > floor => Some(Register::Is(Some(value.to_string()), Version::Known(v))),
        Some(_) => None,
        None => Some(Register::Is(Some(value.to_string()), Version::Above(floor))),
    }
}

/// The register operations of a history (one key), ready for the search. Failed operations
/// and reads with unknown results took no effect and are left out, except a compare-and-set
/// refused with the key's current version: it took no effect, but the version it reports
/// must be one the key held within its window.
pub fn register_entries(ops: &[&Op]) -> Result<Vec<(usize, Entry<RegisterOp>)>, String> {
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if let Some(refused) = refused_cas(op)? {
            out.push((i, refused));
            continue;
        }
        if op.kind == Kind::Fail || (op.kind == Kind::Info && op.f == "read") {
            continue;
        }
        let known = op.kind == Kind::Ok;
        let version = known.then(|| u64_at(&op.output, "version")).transpose()?;
        let register_op = match op.f.as_str() {
            "read" => RegisterOp::Read {
                value: op
                    .output
                    .get("value")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                version: version.unwrap_or(0),
            },
            "write" => RegisterOp::Write {
                value: str_at(&op.input, "value")?,
                version,
            },
            "cas" => RegisterOp::Cas {
                expect: u64_at(&op.input, "expect")?,
                value: str_at(&op.input, "value")?,
                version,
            },
            f => return Err(format!("register history has an unknown operation {f:?}")),
        };
        out.push((
            i,
            Entry {
                op: register_op,
                call: op.call,
                ret: known.then_some(op.ret),
            },
        ));
    }
    Ok(out)
}

/// A compare-and-set refused with the key's current version (`{"current": v}`), as an
/// entry; `None` for any other operation. A refusal without a readable version is malformed.
fn refused_cas(op: &Op) -> Result<Option<Entry<RegisterOp>>, String> {
    if op.kind != Kind::Fail || op.f != "cas" {
        return Ok(None);
    }
    if op.output.get("current").is_none() {
        // Refused for a reason that names no version (an error known to have had no
        // effect): nothing to check.
        return Ok(None);
    }
    let refused = RegisterOp::Refused {
        expect: u64_at(&op.input, "expect")?,
        current: u64_at(&op.output, "current")?,
    };
    Ok(Some(Entry {
        op: refused,
        call: op.call,
        ret: Some(op.ret),
    }))
}

pub(crate) fn u64_at(v: &Value, field: &str) -> Result<u64, String> {
    v.get(field)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("missing number {field:?} in {v}"))
}

pub(crate) fn str_at(v: &Value, field: &str) -> Result<String, String> {
    v.get(field)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("missing string {field:?} in {v}"))
}

/// A holder in the lease model.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Holding {
    /// Holder name (fresh per acquire in our workload).
    pub holder: String,
    /// Fence and deadline, when known (an acquire with unknown result leaves them unknown,
    /// and such a holder is never counted against the slots: it may already be dead).
    pub grant: Option<(u64, u64)>,
}

/// The lease's state: live holders, a lower bound on the cell's stamp time, and the last
/// fence granted (fences strictly increase along the log).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    /// Holders not known to be dead or released.
    pub holders: Vec<Holding>,
    /// The stamp time cannot be below this.
    pub now_ms: u64,
    /// The highest fence granted so far.
    pub last_fence: u64,
}

/// One lease operation.
#[derive(Clone, Debug)]
pub enum LeaseOp {
    /// Acquire with `slots` and `ttl_ms`, never waiting.
    Acquire {
        /// Holder name.
        holder: String,
        /// Declared slots.
        slots: u32,
        /// Time to live of a grant.
        ttl_ms: u64,
        /// The result, when known.
        result: Option<Acquired>,
    },
    /// Release; `released` when known.
    Release {
        /// Holder name.
        holder: String,
        /// True: released; false: held nothing.
        released: Option<bool>,
    },
}

/// The result of an acquire.
#[derive(Clone, Debug)]
pub enum Acquired {
    /// A slot: fence and deadline.
    Held {
        /// Fence of the grant.
        fence: u64,
        /// Deadline.
        expires_at_ms: u64,
        /// The holder already held it.
        reentered: bool,
    },
    /// Full: the live holders (name, fence, deadline).
    Contended(Vec<(String, u64, u64)>),
}

/// A lease with slots; time is the cell's stamp time, seen only through deadlines.
pub struct LeaseModel;

impl Model for LeaseModel {
    type State = Lease;
    type Op = LeaseOp;

    fn init(&self) -> Lease {
        Lease {
            holders: Vec::new(),
            now_ms: 0,
            last_fence: 0,
        }
    }

    fn step(&self, state: &Lease, op: &LeaseOp) -> Option<Lease> {
        let mut s = state.clone();
        match op {
            LeaseOp::Acquire {
                holder,
                slots,
                ttl_ms,
                result,
            } => match result {
                None => {
                    // Took effect as a grant whose fence and deadline we never learned.
                    if !s.holders.iter().any(|h| &h.holder == holder) {
                        s.holders.push(Holding {
                            holder: holder.clone(),
                            grant: None,
                        });
                    }
                }
                Some(Acquired::Held {
                    fence,
                    expires_at_ms,
                    reentered,
                }) => {
                    let stamp = expires_at_ms.checked_sub(*ttl_ms)?;
                    if *reentered {
                        // A re-entry extends a live slot at some stamp we cannot see.
                        s.holders.iter().position(|h| &h.holder == holder)?;
                    } else {
                        s.advance(stamp)?;
                        let live = s.holders.iter().filter(|h| h.grant.is_some()).count();
                        let already = s.holders.iter().any(|h| &h.holder == holder);
                        if *fence <= s.last_fence || live >= *slots as usize || already {
                            return None;
                        }
                        s.last_fence = *fence;
                        s.holders.push(Holding {
                            holder: holder.clone(),
                            grant: Some((*fence, *expires_at_ms)),
                        });
                    }
                }
                Some(Acquired::Contended(listed)) => s.contended(listed, *slots)?,
            },
            LeaseOp::Release { holder, released } => {
                let at = s.holders.iter().position(|h| &h.holder == holder);
                match (released, at) {
                    (None, Some(at)) => {
                        s.holders.remove(at);
                    }
                    (None, None) => {}
                    (Some(true), None) => return None,
                    (Some(true), Some(at)) => {
                        s.holders.remove(at);
                    }
                    (Some(false), None) => {}
                    (Some(false), Some(at)) => {
                        // Held nothing: the slot must have expired by then.
                        if let Some((_, expires)) = s.holders[at].grant {
                            s.advance(expires.max(s.now_ms))?;
                        }
                        s.holders.retain(|h| &h.holder != holder);
                    }
                }
            }
        }
        s.holders.sort();
        Some(s)
    }
}

impl Lease {
    /// Move the stamp time to `t` (never backward) and drop holders dead by then.
    fn advance(&mut self, t: u64) -> Option<()> {
        if t < self.now_ms {
            return None;
        }
        self.now_ms = t;
        self.holders
            .retain(|h| h.grant.is_none_or(|(_, expires)| expires > t));
        Some(())
    }

    /// A contended answer: the listed holders are exactly the live ones at some time.
    fn contended(&mut self, listed: &[(String, u64, u64)], slots: u32) -> Option<()> {
        if listed.len() < slots as usize {
            return None;
        }
        for (name, fence, expires) in listed {
            let at = self.holders.iter().position(|h| &h.holder == name)?;
            match self.holders[at].grant {
                Some(grant) if grant != (*fence, *expires) => return None,
                Some(_) => {}
                None => self.holders[at].grant = Some((*fence, *expires)),
            }
        }
        let missing_latest = self
            .holders
            .iter()
            .filter(|h| !listed.iter().any(|(n, _, _)| n == &h.holder))
            .filter_map(|h| h.grant.map(|(_, expires)| expires))
            .max()
            .unwrap_or(0);
        let t = missing_latest.max(self.now_ms);
        if listed.iter().any(|(_, _, expires)| *expires <= t) {
            return None;
        }
        self.advance(t)?;
        self.holders
            .retain(|h| h.grant.is_some() || listed.iter().any(|(n, _, _)| n == &h.holder));
        Some(())
    }
}

/// The lease operations of a history (one key), ready for the search.
pub fn lease_entries(ops: &[&Op]) -> Result<Vec<(usize, Entry<LeaseOp>)>, String> {
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if op.kind == Kind::Fail {
            continue;
        }
        let known = op.kind == Kind::Ok;
        let holder = str_at(&op.input, "holder")?;
        let lease_op = match op.f.as_str() {
            "acquire" => LeaseOp::Acquire {
                holder,
                slots: u64_at(&op.input, "slots")? as u32,
                ttl_ms: u64_at(&op.input, "ttl_ms")?,
                result: known.then(|| acquired(&op.output)).transpose()?,
            },
            "release" => LeaseOp::Release {
                holder,
                released: known
                    .then(|| op.output.get("released").and_then(Value::as_bool))
                    .flatten(),
            },
            f => return Err(format!("lease history has an unknown operation {f:?}")),
        };
        out.push((
            i,
            Entry {
                op: lease_op,
                call: op.call,
                ret: known.then_some(op.ret),
            },
        ));
    }
    Ok(out)
}

fn acquired(v: &Value) -> Result<Acquired, String> {
    if v.get("held").and_then(Value::as_bool) == Some(true) {
        return Ok(Acquired::Held {
            fence: u64_at(v, "fence")?,
            expires_at_ms: u64_at(v, "expires_at_ms")?,
            reentered: v.get("reentered").and_then(Value::as_bool).unwrap_or(false),
        });
    }
    let holders = v
        .get("holders")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("contended answer without holders: {v}"))?;
    holders
        .iter()
        .map(|h| {
            Ok((
                str_at(h, "holder")?,
                u64_at(h, "fence")?,
                u64_at(h, "expires_at_ms")?,
            ))
        })
        .collect::<Result<Vec<_>, String>>()
        .map(Acquired::Contended)
}
