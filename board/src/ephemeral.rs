//! Ephemeral client keys: a key with its own deadline (`KvPutAttached` with a TTL, renewed
//! by `KvKeepalive`), or a key attached to a lease holder's slot (`KvPutAttached` with a
//! lease), deleted in the apply that frees the slot.
//!
//! What a key is attached to is server state in its own family (`keys::KV_ATTACH`, keyed by
//! the client key, which no client key can name), indexed either by a deadline entry
//! ([`Item::KvExpiry`]) or by a `keys::KV_LEASED` entry under the lease and holder. Every
//! write and delete of a client key row goes through `kv::store_row` / `kv::erase_row`,
//! which let go of the old attachment and make the new one, so the index stays exact: a
//! plain put or a delete detaches the key.
//!
//! Invariants: a key whose deadline is at or before the stamp, or whose holder no longer
//! holds a live slot, is gone for every command and read, even before the `Tick` or the
//! lease settle that deletes it (commands settle the keys they touch first; client reads
//! leave it out). Freeing a slot (release, release-all, expiry, any settle, a team's
//! dissolve) deletes every key attached to it in the same apply. At most
//! `KV_LEASE_KEYS_MAX` keys are attached to one holder's slot of one lease. A put
//! attached to a slot its holder does not hold live changes nothing.

pub use crate::vocab::kv::{KvAttach, KvRefusal};
use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode, try_decode};
use crate::deadline::{self, Item};
use crate::keys;
use crate::kv::{self, Space};
use crate::limits::KV_LEASE_KEYS_MAX;
use crate::txn::Txn;
use crate::types::{Outcome, ResourceId, Stamp};

impl KvRefusal {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            KvRefusal::LeaseNotHeld { .. } => "lease_not_held",
            KvRefusal::KeyAbsent { .. } => "key_absent",
            KvRefusal::NoDeadline { .. } => "no_deadline",
            KvRefusal::LeaseKeysFull { .. } => "lease_keys_full",
        }
    }
}

impl std::fmt::Display for KvRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = self.code();
        match self {
            KvRefusal::LeaseNotHeld { lease, holder } => write!(
                f,
                "{code}: {holder:?} holds no live slot of lease {}::{}/{}; acquire it first",
                lease.owner, lease.name, lease.key
            ),
            KvRefusal::KeyAbsent { key } => write!(f, "{code}: key {key:?} does not exist"),
            KvRefusal::NoDeadline { key } => write!(
                f,
                "{code}: key {key:?} has no deadline of its own (put it with --ttl; a key \
                 attached to a lease lives as long as the lease slot)"
            ),
            KvRefusal::LeaseKeysFull { max } => write!(
                f,
                "{code}: the holder's slot already has {max} keys attached"
            ),
        }
    }
}

/// What a stored client key is attached to.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub(crate) enum Attachment {
    /// Deleted at `expires_at_ms` (the leader's stamp time).
    Deadline {
        /// The deadline.
        expires_at_ms: u64,
    },
    /// Deleted when `holder`'s slot of `lease` is freed.
    Lease {
        /// The lease.
        lease: ResourceId,
        /// The holder.
        holder: String,
    },
}

crate::codes::stable_codes! {
    Attachment {
        0 => Deadline,
        1 => Lease,
    }
}

/// Whether `value` is a stored attachment (a range import checks rows before it writes).
pub(crate) fn decodes(value: &[u8]) -> bool {
    try_decode::<Attachment>(value).is_some()
}

fn stored(txn: &impl Txn, key: &[u8]) -> Option<Attachment> {
    txn.get(&keys::kv_attach(key)).map(|bytes| decode(&bytes))
}

fn expiry(key: &[u8]) -> Item {
    Item::KvExpiry { key: key.to_vec() }
}

/// Attach client key `key` (called by `kv::store_row` only, after [`detach`]).
pub(crate) fn attach(txn: &mut impl Txn, key: &[u8], attachment: &Attachment) {
    match attachment {
        Attachment::Deadline { expires_at_ms } => {
            deadline::insert(txn, *expires_at_ms, &expiry(key));
        }
        Attachment::Lease { lease, holder } => {
            txn.put(&keys::kv_leased(lease, holder, key), &[]);
        }
    }
    txn.put(&keys::kv_attach(key), &encode(attachment));
}

/// Let go of whatever `key` is attached to, with its index entry.
pub(crate) fn detach(txn: &mut impl Txn, key: &[u8]) {
    let Some(old) = stored(txn, key) else {
        return;
    };
    match old {
        Attachment::Deadline { expires_at_ms } => {
            deadline::remove(txn, expires_at_ms, &expiry(key));
        }
        Attachment::Lease { lease, holder } => txn.delete(&keys::kv_leased(&lease, &holder, key)),
    }
    txn.delete(&keys::kv_attach(key));
}

fn alive(txn: &impl Txn, now_ms: u64, attachment: &Attachment) -> bool {
    match attachment {
        Attachment::Deadline { expires_at_ms } => *expires_at_ms > now_ms,
        Attachment::Lease { lease, holder } => crate::lease::holds(txn, now_ms, lease, holder),
    }
}

/// Whether client key `key` is alive at `now_ms`: attached to nothing, or to a deadline
/// after it or a slot still held.
pub(crate) fn live(txn: &impl Txn, now_ms: u64, key: &[u8]) -> bool {
    stored(txn, key).is_none_or(|attachment| alive(txn, now_ms, &attachment))
}

/// Delete `key` if what it is attached to ran out at the stamp. A dead holder's slot is
/// freed through its lease's settle, which deletes every key attached to it.
pub(crate) fn settle(txn: &mut impl Txn, stamp: Stamp, key: &[u8]) {
    let Some(attachment) = stored(txn, key) else {
        return;
    };
    if alive(txn, stamp.time_ms, &attachment) {
        return;
    }
    if let Attachment::Lease { lease, .. } = &attachment {
        crate::lease::expire(txn, stamp, lease);
    }
    // Still attached: a deadline, or a slot the lease kept no record of.
    if stored(txn, key).as_ref() == Some(&attachment) {
        kv::erase_row(txn, stamp, Space::Client, key);
    }
}

/// A deadline entry of `key` fell due (`Tick`): delete the key if its own deadline passed.
/// Returns the keys deleted (0 for an entry whose key moved on).
pub(crate) fn expire(txn: &mut impl Txn, stamp: Stamp, key: &[u8]) -> u32 {
    match stored(txn, key) {
        Some(Attachment::Deadline { expires_at_ms }) if expires_at_ms <= stamp.time_ms => {
            kv::erase_row(txn, stamp, Space::Client, key);
            1
        }
        _ => 0,
    }
}

/// `holder`'s slot of `lease` was freed (called by the lease in the same apply): delete
/// every key attached to it. Returns how many.
pub(crate) fn release_holder(
    txn: &mut impl Txn,
    stamp: Stamp,
    lease: &ResourceId,
    holder: &str,
) -> u32 {
    let start = keys::kv_leased_prefix(lease, holder);
    let end = keys::prefix_end(&start);
    let rows = txn.scan(&start, &end, KV_LEASE_KEYS_MAX);
    for (index, _) in &rows {
        kv::erase_row(txn, stamp, Space::Client, &index[start.len()..]);
    }
    u32::try_from(rows.len()).expect("attached keys are capped")
}

/// One `KvPutAttached`.
pub(crate) struct AttachedPut<'a> {
    /// The key.
    pub(crate) key: &'a [u8],
    /// Its new value.
    pub(crate) value: &'a [u8],
    /// The revision it must have (`Some(0)` = absent, `None` = any).
    pub(crate) expect_version: Option<u64>,
    /// What it is attached to.
    pub(crate) attach: &'a KvAttach,
}

/// Write a key attached to its own deadline or to a lease holder's slot. A slot its
/// holder does not hold live, or one already full of keys, is refused and nothing changes.
pub(crate) fn put_attached(txn: &mut impl Txn, stamp: Stamp, put: &AttachedPut<'_>) -> Outcome {
    let attachment = match resolve(txn, stamp.time_ms, put.key, put.attach) {
        Ok(attachment) => attachment,
        Err(refusal) => return Outcome::KvRefused { refusal },
    };
    settle(txn, stamp, put.key);
    let current = kv::current(txn, put.key);
    if put
        .expect_version
        .is_some_and(|expected| expected != current)
    {
        return Outcome::KvVersionMismatch { current };
    }
    let row = (Space::Client, put.key);
    let version = kv::store_row(txn, stamp, row, put.value, Some(&attachment));
    Outcome::KvWritten {
        version,
        fence: version,
    }
}

fn resolve(
    txn: &impl Txn,
    now_ms: u64,
    key: &[u8],
    attach: &KvAttach,
) -> Result<Attachment, KvRefusal> {
    let (lease, holder) = match attach {
        KvAttach::Ttl { ttl_ms } => {
            let expires_at_ms = now_ms.saturating_add(*ttl_ms);
            return Ok(Attachment::Deadline { expires_at_ms });
        }
        KvAttach::Lease { lease, holder } => (lease, holder),
    };
    if !crate::lease::holds(txn, now_ms, lease, holder) {
        return Err(KvRefusal::LeaseNotHeld {
            lease: lease.clone(),
            holder: holder.clone(),
        });
    }
    let start = keys::kv_leased_prefix(lease, holder);
    let attached = txn.get(&keys::kv_leased(lease, holder, key)).is_some();
    let count = txn
        .scan(&start, &keys::prefix_end(&start), KV_LEASE_KEYS_MAX)
        .len();
    if !attached && count >= KV_LEASE_KEYS_MAX {
        let max = u32::try_from(KV_LEASE_KEYS_MAX).expect("bound fits u32");
        return Err(KvRefusal::LeaseKeysFull { max });
    }
    Ok(Attachment::Lease {
        lease: lease.clone(),
        holder: holder.clone(),
    })
}

/// Move `key`'s own deadline to `stamp + ttl_ms` (never earlier). The value and revision
/// stay: a keepalive writes no client row.
pub(crate) fn keepalive(txn: &mut impl Txn, stamp: Stamp, key: &[u8], ttl_ms: u64) -> Outcome {
    settle(txn, stamp, key);
    let text = || String::from_utf8_lossy(key).into_owned();
    let Some(entry) = kv::get(txn, key) else {
        let refusal = KvRefusal::KeyAbsent { key: text() };
        return Outcome::KvRefused { refusal };
    };
    let Some(Attachment::Deadline { expires_at_ms }) = stored(txn, key) else {
        let refusal = KvRefusal::NoDeadline { key: text() };
        return Outcome::KvRefused { refusal };
    };
    let to = expires_at_ms.max(stamp.time_ms.saturating_add(ttl_ms));
    deadline::reschedule(txn, expires_at_ms, to, &expiry(key));
    let attachment = Attachment::Deadline { expires_at_ms: to };
    txn.put(&keys::kv_attach(key), &encode(&attachment));
    Outcome::KvKeptAlive {
        version: entry.version,
        expires_at_ms: to,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Caller;
    use crate::txn::MemTxn;
    use crate::types::Command;

    use crate::testkit::Store;

    /// This module's reads of a test board.
    trait Reads {
        fn stored(&self, key: &str) -> bool;
        fn read(&self, now_ms: u64, key: &str) -> bool;
    }

    impl Reads for Store {
        /// The key as a server's read sees it (expired keys stay until deleted).
        fn stored(&self, key: &str) -> bool {
            kv::get(&self.txn, key.as_bytes()).is_some()
        }

        fn read(&self, now_ms: u64, key: &str) -> bool {
            let query = crate::Query::KvGet {
                key: key.as_bytes().to_vec(),
            };
            matches!(
                crate::query(&self.txn, now_ms, &query),
                crate::QueryResult::Kv(Some(_))
            )
        }
    }

    fn lease() -> ResourceId {
        ResourceId {
            owner: "shared".into(),
            name: "deploy".into(),
            key: "prod".into(),
        }
    }

    fn ttl_put(key: &str, ttl_ms: u64) -> Command {
        Command::KvPutAttached {
            key: key.as_bytes().to_vec(),
            value: b"v".to_vec(),
            expect_version: None,
            attach: KvAttach::Ttl { ttl_ms },
        }
    }

    fn leased_put(key: &str, holder: &str) -> Command {
        Command::KvPutAttached {
            key: key.as_bytes().to_vec(),
            value: b"v".to_vec(),
            expect_version: None,
            attach: KvAttach::Lease {
                lease: lease(),
                holder: holder.into(),
            },
        }
    }

    fn acquire(holder: &str, ttl_ms: u64) -> Command {
        Command::LeaseAcquire {
            lease: lease(),
            holder: holder.into(),
            slots: 2,
            ttl_ms,
            wait_ms: 0,
        }
    }

    fn keepalive(key: &str, ttl_ms: u64) -> Command {
        Command::KvKeepalive {
            key: key.as_bytes().to_vec(),
            ttl_ms,
        }
    }

    /// Only the client key row and nothing else of an attachment is left.
    fn no_attachment_rows(txn: &MemTxn) -> bool {
        let families = [keys::KV_ATTACH, keys::KV_LEASED];
        let deadline = |k: &Vec<u8>| k[0] == keys::DEADLINE && k.get(9) == Some(&11);
        !txn.map
            .keys()
            .any(|k| families.contains(&k[0]) || deadline(k))
    }

    #[test]
    fn a_key_expires_at_its_deadline_not_before() {
        let mut s = Store::new();
        let written = s.run(1_000, ttl_put("presence/a", 5_000));
        assert!(matches!(written, Outcome::KvWritten { .. }), "{written:?}");
        assert_eq!(crate::deadline::next(&s.txn), Some(6_000));
        assert_eq!(s.tick(5_999), Outcome::Ticked { processed: 0 });
        assert!(s.read(5_999, "presence/a") && s.stored("presence/a"));
        // Reads leave it out from the deadline on, even before the tick deletes it.
        assert!(!s.read(6_000, "presence/a"));
        assert_eq!(s.tick(6_000), Outcome::Ticked { processed: 1 });
        assert!(!s.stored("presence/a"));
        assert!(no_attachment_rows(&s.txn), "{:?}", s.txn.map.keys());
        assert_eq!(crate::deadline::next(&s.txn), None);
    }

    #[test]
    fn a_write_after_the_deadline_finds_the_key_gone() {
        let mut s = Store::new();
        s.run(1_000, ttl_put("k", 1_000));
        let cas = Command::KvPut {
            key: b"k".to_vec(),
            value: b"new".to_vec(),
            expect_version: Some(0),
        };
        // No tick ran: the CAS still sees the key absent at its deadline.
        assert!(matches!(s.run(2_000, cas), Outcome::KvWritten { .. }));
        assert_eq!(s.tick(10_000), Outcome::Ticked { processed: 0 });
        assert!(s.stored("k"), "a plain put let go of the deadline");
        assert!(no_attachment_rows(&s.txn));
    }

    #[test]
    fn keepalive_moves_the_deadline_and_keeps_the_revision() {
        let mut s = Store::new();
        let Outcome::KvWritten { version, .. } = s.run(1_000, ttl_put("k", 2_000)) else {
            panic!("not written");
        };
        let kept = s.run(2_500, keepalive("k", 4_000));
        assert_eq!(
            kept,
            Outcome::KvKeptAlive {
                version,
                expires_at_ms: 6_500
            }
        );
        // Never earlier: a shorter TTL leaves the deadline where it is.
        let kept = s.run(2_600, keepalive("k", 1_000));
        assert!(matches!(
            kept,
            Outcome::KvKeptAlive {
                expires_at_ms: 6_500,
                ..
            }
        ));
        assert_eq!(s.tick(3_000), Outcome::Ticked { processed: 0 });
        assert!(s.stored("k"), "kept past its first deadline");
        assert_eq!(s.tick(6_500), Outcome::Ticked { processed: 1 });
        assert!(!s.stored("k"));
        let absent = s.run(7_000, keepalive("k", 4_000));
        assert!(matches!(
            absent,
            Outcome::KvRefused {
                refusal: KvRefusal::KeyAbsent { .. }
            }
        ));
    }

    #[test]
    fn keepalive_of_a_key_without_its_own_deadline_is_refused() {
        let mut s = Store::new();
        s.run(1_000, acquire("h", 60_000));
        s.run(1_000, leased_put("leased", "h"));
        let plain = Command::KvPut {
            key: b"plain".to_vec(),
            value: b"v".to_vec(),
            expect_version: None,
        };
        s.run(1_000, plain);
        for key in ["plain", "leased"] {
            let before = s.txn.clone();
            let refused = s.run(2_000, keepalive(key, 5_000));
            assert!(
                matches!(
                    &refused,
                    Outcome::KvRefused {
                        refusal: KvRefusal::NoDeadline { .. }
                    }
                ),
                "{refused:?}"
            );
            assert_eq!(s.txn, before, "a refused keepalive changed nothing");
        }
    }

    #[test]
    fn releasing_the_slot_deletes_its_keys_in_the_same_apply() {
        let mut s = Store::new();
        s.run(1_000, acquire("h", 60_000));
        s.run(1_000, acquire("other", 60_000));
        s.run(1_000, leased_put("a", "h"));
        s.run(1_000, leased_put("b", "h"));
        s.run(1_000, leased_put("c", "other"));
        let release = Command::LeaseRelease {
            lease: lease(),
            holder: "h".into(),
        };
        assert_eq!(s.run(2_000, release), Outcome::LeaseReleased);
        assert!(
            !s.stored("a") && !s.stored("b"),
            "h's keys went with its slot"
        );
        assert!(s.stored("c"), "another holder's key stays");
        let all = Command::LeaseReleaseAll {
            holder: "other".into(),
        };
        assert_eq!(s.run(2_000, all), Outcome::LeaseReleasedAll { released: 1 });
        assert!(!s.stored("c"));
        assert!(no_attachment_rows(&s.txn), "{:?}", s.txn.map.keys());
    }

    #[test]
    fn an_expired_slot_deletes_its_keys_in_the_tick_that_frees_it() {
        let mut s = Store::new();
        s.run(1_000, acquire("h", 5_000));
        s.run(1_000, leased_put("a", "h"));
        assert_eq!(s.tick(5_999), Outcome::Ticked { processed: 0 });
        assert!(s.read(5_999, "a"));
        assert!(!s.read(6_000, "a"), "a dead slot's key reads absent");
        let ticked = s.tick(6_000);
        assert_eq!(ticked, Outcome::Ticked { processed: 1 });
        assert!(!s.stored("a"));
        assert!(no_attachment_rows(&s.txn));
        // Renewed, the slot and its key live on.
        s.run(7_000, acquire("h", 5_000));
        s.run(7_000, leased_put("b", "h"));
        let renew = Command::LeaseRenew {
            lease: lease(),
            holder: "h".into(),
            ttl_ms: 60_000,
        };
        s.run(11_000, renew);
        s.tick(12_000);
        assert!(s.stored("b"));
    }

    #[test]
    fn a_put_on_a_slot_not_held_is_refused_and_writes_nothing() {
        let mut s = Store::new();
        s.run(1_000, acquire("h", 5_000));
        let before = s.txn.clone();
        for (time, holder) in [(2_000, "stranger"), (6_000, "h")] {
            let refused = s.run(time, leased_put("k", holder));
            assert!(
                matches!(
                    &refused,
                    Outcome::KvRefused {
                        refusal: KvRefusal::LeaseNotHeld { .. }
                    }
                ),
                "{refused:?}"
            );
            assert_eq!(s.txn, before, "nothing changed");
        }
    }

    #[test]
    fn a_slot_holds_at_most_its_bound_of_keys() {
        let mut s = Store::new();
        s.run(1_000, acquire("h", 60_000));
        for i in 0..KV_LEASE_KEYS_MAX {
            let put = s.run(1_000, leased_put(&format!("k{i}"), "h"));
            assert!(matches!(put, Outcome::KvWritten { .. }), "{put:?}");
        }
        let before = s.txn.clone();
        let full = s.run(1_000, leased_put("one-more", "h"));
        assert!(matches!(
            full,
            Outcome::KvRefused {
                refusal: KvRefusal::LeaseKeysFull { .. }
            }
        ));
        assert_eq!(s.txn, before);
        // Rewriting a key already attached is no new key.
        let again = s.run(1_000, leased_put("k0", "h"));
        assert!(matches!(again, Outcome::KvWritten { .. }), "{again:?}");
    }

    #[test]
    fn a_non_member_neither_keeps_alive_nor_attaches_to_a_teams_lock() {
        let mut s = Store::new();
        let create = Command::TeamCreate {
            team: "web".into(),
            caller: "alice".into(),
            parent: None,
            ancestors: Vec::new(),
            settings: crate::BoardSettings::default(),
        };
        let alice = || Caller::Agent("alice".into());
        let mallory = || Caller::Agent("mallory".into());
        s.by(alice(), 1_000, create);
        let lock = ResourceId {
            owner: "team/web".into(),
            name: "locks".into(),
            key: "deploy".into(),
        };
        let take = Command::LeaseAcquire {
            lease: lock.clone(),
            holder: "alice-h".into(),
            slots: 1,
            ttl_ms: 60_000,
            wait_ms: 0,
        };
        assert!(matches!(
            s.by(alice(), 1_000, take),
            Outcome::LeaseHeld { .. }
        ));
        s.by(alice(), 1_000, ttl_put("doc/{web}/presence", 5_000));
        let before = s.txn.clone();
        let attach = Command::KvPutAttached {
            key: b"mine".to_vec(),
            value: b"v".to_vec(),
            expect_version: None,
            attach: KvAttach::Lease {
                lease: lock,
                holder: "alice-h".into(),
            },
        };
        for command in [keepalive("doc/{web}/presence", 600_000), attach] {
            let refused = s.by(mallory(), 2_000, command);
            let code = match &refused {
                Outcome::BoardRefused { reason } => reason.code(),
                other => panic!("{other:?}"),
            };
            assert_eq!(code, "not_member");
            assert_eq!(s.txn, before, "nothing changed");
        }
    }
}
