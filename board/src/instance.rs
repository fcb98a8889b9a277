//! The engine's instance state: a space of rows no client key can name, and who may read or
//! operate each instance in it.
//!
//! The engine (`whip run`, `whip worker`, any process driving WhippleScript instances) is a
//! client of the fabric, but its rows are not client keys. They live in their own family
//! (`keys::ENGINE`), reached only by [`Command::EngineTxn`](crate::Command::EngineTxn),
//! [`Query::EngineGet`](crate::Query::EngineGet) and
//! [`Query::EngineRange`](crate::Query::EngineRange). `KvPut`, `KvTxn`, `KvGet` and `KvRange`
//! reach family `k` only, so no client key, however it is spelled, reads or writes an
//! instance. The engine's keys keep their shape inside the space:
//! - `e/{id}/…`, `i/{id}`, `w/{id}`: rows of instance `id` (log, projections, index, work
//!   marker);
//! - `p/<version>`: a program version; `g/<kind>/<owner>/<name>`: a declared resource. Both
//!   are written once: a later put must carry the same bytes, and only the operator deletes;
//! - `t/{tracker}/…`: the built-in tracker's shared sequence and index, written only by
//!   the operator's engine or a server (every agent's issues share it).
//!
//! **Owners.** The first commit that touches an instance records its caller as the
//! instance's owner (`keys::INSTANCE_OWNER`, beside the instance's rows on its cell). From
//! then on only that owner, the operator or a server may read or write the instance's rows:
//! another agent is refused `not_authorized` in the same apply or snapshot, and a listing
//! leaves the instance out. Owners are [`Caller`] values stored under explicit codes,
//! never names compared as strings: an agent called `operator` is not the operator.
//!
//! Must never: let a key outside the engine's shapes in, or let a write through before the
//! owner of every instance it touches was checked.

use crate::access::{AccessRefusal, Caller};
use crate::keys;
use crate::kv::{self, Space, TxnParts};
use crate::query::KvEntry;
use crate::txn::Txn;
use crate::types::{Outcome, Stamp};

/// What an engine row belongs to, read from its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineRow<'a> {
    /// A row of one instance (`e/{id}/…`, `i/{id}`, `w/{id}`).
    Instance(&'a str),
    /// A program version (`p/<version>`), written once.
    Program,
    /// A declared coordination resource (`g/…`), written once.
    Declared,
    /// The built-in tracker's rows (`t/…`), shared by every engine of the store.
    Tracker,
    /// The owner of instance `id` (`o/{id}`): read-only, kept by the board.
    Owner(&'a str),
}

impl EngineRow<'_> {
    fn written_once(self) -> bool {
        matches!(self, EngineRow::Program | EngineRow::Declared)
    }
}

/// The kind of `key` in the engine space, or `None` when the engine writes no such row.
pub fn classify(key: &[u8]) -> Option<EngineRow<'_>> {
    let text = std::str::from_utf8(key).ok()?;
    let (head, rest) = text.split_once('/')?;
    match head {
        "e" | "i" | "w" | "o" => {
            let (id, _) = rest.strip_prefix('{')?.split_once('}')?;
            let row = match head {
                "o" => EngineRow::Owner(id),
                _ => EngineRow::Instance(id),
            };
            (!id.is_empty()).then_some(row)
        }
        "p" => Some(EngineRow::Program),
        "g" => Some(EngineRow::Declared),
        "t" => Some(EngineRow::Tracker),
        _ => None,
    }
}

/// The encoding version of an owner record.
const OWNER_VERSION: u8 = 1;
/// Owner code of the operator (stable: stored).
const OWNER_OPERATOR: u8 = 1;
/// Owner code of an agent, followed by its name (stable: stored).
const OWNER_AGENT: u8 = 2;

/// The stored form of `owner`: version, code, then the agent's name. `None` for callers
/// that own nothing (a server, an anonymous caller).
pub(crate) fn encode_owner(owner: &Caller) -> Option<Vec<u8>> {
    match owner {
        Caller::Operator => Some(vec![OWNER_VERSION, OWNER_OPERATOR]),
        Caller::Agent(name) => {
            let mut out = vec![OWNER_VERSION, OWNER_AGENT];
            out.extend_from_slice(name.as_bytes());
            Some(out)
        }
        Caller::Server | Caller::Anonymous => None,
    }
}

/// The owner a stored record names, `None` when the bytes are no owner record.
pub(crate) fn decode_owner(bytes: &[u8]) -> Option<Caller> {
    match bytes {
        [OWNER_VERSION, OWNER_OPERATOR] => Some(Caller::Operator),
        [OWNER_VERSION, OWNER_AGENT, name @ ..] if !name.is_empty() => {
            String::from_utf8(name.to_vec()).ok().map(Caller::Agent)
        }
        _ => None,
    }
}

/// The owner of instance `id`, if any commit recorded one.
pub fn owner(txn: &impl Txn, id: &str) -> Option<Caller> {
    txn.get(&keys::instance_owner(id))
        .map(|bytes| decode_owner(&bytes).expect("stored instance owner record does not decode"))
}

/// Whether `caller` may read and operate an instance owned by `owner`.
pub fn may_operate(caller: &Caller, owner: &Caller) -> bool {
    match caller {
        Caller::Server | Caller::Operator => true,
        Caller::Agent(_) => caller == owner,
        Caller::Anonymous => false,
    }
}

fn refuse(id: &str, owner: &Caller) -> AccessRefusal {
    AccessRefusal::NotAuthorized {
        what: format!("instance {id}"),
        owner: owner.name().to_string(),
    }
}

/// Whether `caller` may read the engine row `key` (rows of instances it may not operate
/// are left out of listings; rows the engine does not write are nobody's).
pub(crate) fn readable(txn: &impl Txn, caller: &Caller, key: &[u8]) -> bool {
    match classify(key) {
        Some(EngineRow::Instance(id) | EngineRow::Owner(id)) => {
            owner(txn, id).is_none_or(|o| may_operate(caller, &o))
        }
        Some(_) => true,
        None => false,
    }
}

/// Whether `caller` may read the single engine row `key`, or scan rows of one instance
/// (a prefix `e/{id}/…`): refused outright rather than answered empty, so the caller hears
/// why.
pub(crate) fn guard_get(txn: &impl Txn, caller: &Caller, key: &[u8]) -> Result<(), AccessRefusal> {
    if let Some(EngineRow::Instance(id) | EngineRow::Owner(id)) = classify(key)
        && let Some(owner) = owner(txn, id)
        && !may_operate(caller, &owner)
    {
        return Err(refuse(id, &owner));
    }
    Ok(())
}

/// Why an engine transaction may not run, decided before it runs.
fn check_txn<'a>(
    txn: &impl Txn,
    caller: &Caller,
    (compares, puts, deletes): TxnParts<'a>,
) -> Result<Vec<&'a str>, Outcome> {
    let forbidden = |refusal| Outcome::Forbidden { refusal };
    let mut fresh = Vec::new();
    let keys = compares.iter().map(|(k, _)| k);
    let keys = keys
        .chain(puts.iter().map(|(k, _)| k))
        .chain(deletes.iter());
    for key in keys {
        let Some(row) = classify(key) else {
            return Err(Outcome::Invalid {
                reason: format!(
                    "{:?} is no engine row (e/{{id}}/…, i/{{id}}, w/{{id}}, p/…, g/…, t/…)",
                    String::from_utf8_lossy(key)
                ),
            });
        };
        if let EngineRow::Owner(_) = row {
            return Err(Outcome::Invalid {
                reason: "an instance's owner row is the server's; no command writes it".into(),
            });
        }
        if let EngineRow::Instance(id) = row {
            match owner(txn, id) {
                Some(owner) if !may_operate(caller, &owner) => {
                    return Err(forbidden(refuse(id, &owner)));
                }
                Some(_) => {}
                None if !fresh.contains(&id) => fresh.push(id),
                None => {}
            }
        }
    }
    for (key, value) in puts {
        let once = classify(key).is_some_and(EngineRow::written_once);
        let stored = kv::get_in(txn, Space::Engine, key);
        if once && stored.is_some_and(|KvEntry { value: v, .. }| v != *value) {
            return Err(forbidden(written_once(key)));
        }
    }
    let operator = matches!(caller, Caller::Operator | Caller::Server);
    if let Some(key) = deletes
        .iter()
        .find(|k| !operator && classify(k).is_some_and(EngineRow::written_once))
    {
        return Err(forbidden(written_once(key)));
    }
    let written = puts.iter().map(|(k, _)| k).chain(deletes.iter());
    if let Some(key) = written
        .filter(|k| classify(k) == Some(EngineRow::Tracker))
        .find(|_| !operator)
    {
        return Err(forbidden(AccessRefusal::NotAuthorized {
            what: format!("tracker row {:?}", String::from_utf8_lossy(key)),
            owner: "the engine (the operator's)".into(),
        }));
    }
    Ok(fresh)
}

fn written_once(key: &[u8]) -> AccessRefusal {
    AccessRefusal::NotAuthorized {
        what: format!("engine row {:?}", String::from_utf8_lossy(key)),
        owner: "written once".into(),
    }
}

/// Apply an `EngineTxn` for `caller`: refused unless every key is an engine row and the
/// caller may operate every instance it touches; a committed transaction makes the caller
/// the owner of every instance that had none.
pub(crate) fn apply_txn(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &Caller,
    parts: TxnParts<'_>,
) -> Outcome {
    let fresh = match check_txn(txn, caller, parts) {
        Ok(fresh) => fresh,
        Err(refused) => return refused,
    };
    let outcome = kv::txn_in(txn, Space::Engine, stamp, parts);
    if let (Outcome::KvTxnCommitted { .. }, Some(record)) = (&outcome, encode_owner(caller)) {
        for id in fresh {
            txn.put(&keys::instance_owner(id), &record);
        }
    }
    outcome
}

/// One engine row (a server's read: no owner check). The owner row `o/{id}` reads the
/// board's owner record as JSON: `{"kind":"agent","name":…}` or `{"kind":"operator"}`.
pub(crate) fn get(txn: &impl Txn, key: &[u8]) -> Option<KvEntry> {
    if let Some(EngineRow::Owner(id)) = classify(key) {
        let value = match owner(txn, id)? {
            Caller::Agent(name) => serde_json::json!({"kind": "agent", "name": name}),
            _ => serde_json::json!({"kind": "operator"}),
        };
        return Some(KvEntry {
            value: value.to_string().into_bytes(),
            version: 1,
        });
    }
    kv::get_in(txn, Space::Engine, key)
}

/// Engine rows starting with `prefix` after `after_key` (a server's read: every row).
pub(crate) fn range(
    txn: &impl Txn,
    prefix: &[u8],
    after_key: &[u8],
    limit: usize,
) -> crate::query::KvPage {
    kv::range_in(txn, Space::Engine, (prefix, after_key), limit)
}

/// The routing point of an owner record's key (the instance's own point).
pub(crate) fn owner_row_point(key: &[u8]) -> Option<u64> {
    let (parts, _) = keys::split_first(key.get(1..)?, 1)?;
    let id = std::str::from_utf8(parts.first()?).ok()?;
    Some(crate::route::kv_point(format!("i/{{{id}}}").as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    fn stamp(index: u64) -> Stamp {
        crate::testkit::stamp_at(index, 1)
    }

    fn put(key: &str, value: &str) -> (Vec<u8>, Vec<u8>) {
        (key.as_bytes().to_vec(), value.as_bytes().to_vec())
    }

    /// Stored owner codes are pinned: a change here must bump `OWNER_VERSION`.
    #[test]
    fn owner_records_are_pinned() {
        assert_eq!(encode_owner(&Caller::Operator), Some(vec![1, 1]));
        assert_eq!(
            encode_owner(&Caller::Agent("ann".into())),
            Some(vec![1, 2, b'a', b'n', b'n'])
        );
        assert_eq!(encode_owner(&Caller::Server), None);
        assert_eq!(decode_owner(&[1, 1]), Some(Caller::Operator));
        assert_eq!(decode_owner(&[1, 2]), None);
        assert_eq!(decode_owner(&[2, 1]), None);
    }

    #[test]
    fn keys_classify_by_their_engine_shape() {
        assert_eq!(
            classify(b"e/{ins_1}/s/q"),
            Some(EngineRow::Instance("ins_1"))
        );
        assert_eq!(classify(b"i/{ins_1}"), Some(EngineRow::Instance("ins_1")));
        assert_eq!(classify(b"w/{ins_1}"), Some(EngineRow::Instance("ins_1")));
        assert_eq!(classify(b"p/pv_1"), Some(EngineRow::Program));
        assert_eq!(classify(b"t/{tracker}/n"), Some(EngineRow::Tracker));
        for bad in [&b"e/{}/x"[..], b"e/ins", b"x/{a}", b"plain", b"\xff/{a}"] {
            assert_eq!(classify(bad), None, "{bad:?}");
        }
    }

    /// The first commit makes its caller the owner; another agent then reads and writes
    /// nothing of the instance, an agent named `operator` is not the operator, and the
    /// operator operates any instance.
    #[test]
    fn only_the_owner_or_the_operator_reaches_an_instance() {
        let mut txn = MemTxn::default();
        let ann = Caller::Agent("ann".into());
        let start = [put("e/{ins_1}/s/q", "1"), put("i/{ins_1}", "{}")];
        let done = apply_txn(&mut txn, stamp(1), &ann, (&[], &start, &[]));
        assert!(matches!(done, Outcome::KvTxnCommitted { .. }), "{done:?}");
        assert_eq!(owner(&txn, "ins_1"), Some(ann.clone()));
        let before = txn.clone();
        for intruder in [
            Caller::Agent("bob".into()),
            Caller::Agent("operator".into()),
        ] {
            let write = [put("e/{ins_1}/s/x/eff_1", "{\"argv\":[\"sh\"]}")];
            let refused = apply_txn(&mut txn, stamp(2), &intruder, (&[], &write, &[]));
            let Outcome::Forbidden { refusal } = refused else {
                panic!("{refused:?}")
            };
            assert_eq!(refusal.code(), "not_authorized");
            let deleted = apply_txn(
                &mut txn,
                stamp(3),
                &intruder,
                (&[], &[], &[start[0].0.clone()]),
            );
            assert!(matches!(deleted, Outcome::Forbidden { .. }));
            assert_eq!(txn, before, "nothing changed");
            assert!(guard_get(&txn, &intruder, b"e/{ins_1}/s/q").is_err());
            assert!(!readable(&txn, &intruder, b"i/{ins_1}"));
        }
        assert!(guard_get(&txn, &ann, b"e/{ins_1}/s/q").is_ok());
        let step = [put("w/{ins_1}", "")];
        let operator = apply_txn(&mut txn, stamp(4), &Caller::Operator, (&[], &step, &[]));
        assert!(matches!(operator, Outcome::KvTxnCommitted { .. }));
        assert_eq!(
            owner(&txn, "ins_1"),
            Some(ann),
            "the operator does not take it over"
        );
    }

    #[test]
    fn programs_are_written_once_and_keys_outside_the_engine_are_invalid() {
        let mut txn = MemTxn::default();
        let ann = Caller::Agent("ann".into());
        let program = [put("p/pv_1", "source")];
        let first = apply_txn(&mut txn, stamp(1), &ann, (&[], &program, &[]));
        assert!(matches!(first, Outcome::KvTxnCommitted { .. }));
        let same = apply_txn(
            &mut txn,
            stamp(2),
            &Caller::Agent("bob".into()),
            (&[], &program, &[]),
        );
        assert!(matches!(same, Outcome::KvTxnCommitted { .. }));
        let other = [put("p/pv_1", "evil")];
        let bob = Caller::Agent("bob".into());
        let refused = apply_txn(&mut txn, stamp(3), &bob, (&[], &other, &[]));
        assert!(matches!(refused, Outcome::Forbidden { .. }), "{refused:?}");
        let delete = [b"p/pv_1".to_vec()];
        let refused = apply_txn(&mut txn, stamp(4), &bob, (&[], &[], &delete));
        assert!(matches!(refused, Outcome::Forbidden { .. }), "{refused:?}");
        assert_eq!(
            get(&txn, b"p/pv_1").map(|e| e.value),
            Some(b"source".to_vec())
        );
        let stray = [put("agents/{x}", "")];
        let invalid = apply_txn(&mut txn, stamp(5), &ann, (&[], &stray, &[]));
        assert!(matches!(invalid, Outcome::Invalid { .. }), "{invalid:?}");
    }

    /// The built-in tracker is the engine's: an agent neither writes nor deletes its rows.
    #[test]
    fn only_the_operator_writes_tracker_rows() {
        let mut txn = MemTxn::default();
        let issue = [put("t/{tracker}/n", "1")];
        let done = apply_txn(&mut txn, stamp(1), &Caller::Operator, (&[], &issue, &[]));
        assert!(matches!(done, Outcome::KvTxnCommitted { .. }), "{done:?}");
        let before = txn.clone();
        let bob = Caller::Agent("bob".into());
        let forged = [put("t/{tracker}/n", "9")];
        let refused = apply_txn(&mut txn, stamp(2), &bob, (&[], &forged, &[]));
        let Outcome::Forbidden { refusal } = refused else {
            panic!("{refused:?}")
        };
        assert_eq!(refusal.code(), "not_authorized");
        let delete = [b"t/{tracker}/n".to_vec()];
        let refused = apply_txn(&mut txn, stamp(3), &bob, (&[], &[], &delete));
        assert!(matches!(refused, Outcome::Forbidden { .. }), "{refused:?}");
        assert_eq!(txn, before, "nothing changed");
    }
}
