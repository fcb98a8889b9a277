//! Agent registration: board decides who holds a name, in the apply that writes it.
//!
//! Owns: the identity record's v2 format (what [`record`] writes and [`proof_matches`]
//! checks), `Command::AgentRegister`, its outcome and its refusals ([`AgentRefusal`]).
//!
//! Invariants:
//! - the token never enters the log: a registration carries [`token_proof`] of it (a
//!   BLAKE3 hash of a 256-bit random secret, which reveals nothing of it) and a fresh salt,
//!   and the record keeps only a salted hash of the proof;
//! - one name, one record: names that look alike share a record ([`access::agent_key`]), so
//!   the second finds it held and is refused `ReservedName`, and another token on the same
//!   name is refused `NameTaken`; the same name and token again is `created: false`;
//! - an agent re-registering itself (proven by its own token, `Caller::Agent` of the same
//!   name) changes nothing; an agent that registers another enrolls it (`enrolled_by`);
//! - the decision and the write are one apply: there is no read in the shell before it.
//!
//! Never: store or compare the token itself, or decide from the shell's view of the record.

pub use crate::vocab::agent::AgentRefusal;

use crate::access;
use crate::access::Caller;
use crate::kv;
use crate::txn::Txn;
use crate::types::{Outcome, Stamp};

/// The record format this build writes.
const RECORD_V2: &str = "v2:";

/// The proof of `token` a registration carries: its BLAKE3 hash. Tokens are 256-bit random
/// secrets, so the hash reveals nothing of them, and presenting it proves nothing either:
/// the verifier hashes the token it is shown.
pub fn token_proof(token: &str) -> [u8; 32] {
    *blake3::hash(token.as_bytes()).as_bytes()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A v2 identity record of `agent` for `proof`, salted with `salt`:
/// `v2:SALT:HASH:name:NAME[:by:PARENT]` (hex salt, keyed hash and name).
pub fn record(
    agent: &str,
    proof: &[u8; 32],
    salt: &[u8; 32],
    enrolled_by: Option<&str>,
) -> Vec<u8> {
    let hash = blake3::keyed_hash(salt, proof);
    let by = enrolled_by
        .map(|by| format!("{}{by}", access::ENROLLED_BY_MARK))
        .unwrap_or_default();
    let name = hex(agent.as_bytes());
    let (salt, hash) = (hex(salt), hash.to_hex());
    format!("{RECORD_V2}{salt}:{hash}{}{name}{by}", access::NAME_MARK).into_bytes()
}

/// Whether the v2 `record` was written for `proof` (false for a v1, revoked or malformed
/// record). Compared in constant time.
pub fn proof_matches(record: &[u8], proof: &[u8; 32]) -> bool {
    salted_hash(record, RECORD_V2)
        .is_some_and(|(salt, stored)| blake3::keyed_hash(salt.as_bytes(), proof) == stored)
}

/// The salt and the stored hash of an identity `record` written in format `version`
/// (`"v1:"`, `"v2:"`); `None` for a record of another format, revoked or malformed.
pub fn salted_hash(record: &[u8], version: &str) -> Option<(blake3::Hash, blake3::Hash)> {
    let rest = std::str::from_utf8(record).ok()?.strip_prefix(version)?;
    let mut fields = rest.split(':');
    let (salt_hex, hash_hex) = (fields.next()?, fields.next()?);
    let salt = blake3::Hash::from_hex(salt_hex).ok()?;
    Some((salt, blake3::Hash::from_hex(hash_hex).ok()?))
}

impl AgentRefusal {
    /// The refusal's wire code.
    pub fn refusal_code(&self) -> crate::refusal::RefusalCode {
        use crate::refusal::RefusalCode;
        match self {
            AgentRefusal::NameTaken { .. } => RefusalCode::NameTaken,
            AgentRefusal::ReservedName { .. } => RefusalCode::ReservedName,
        }
    }
}

/// A registration, as `Command::AgentRegister` carries it.
pub(crate) struct Registration<'a> {
    pub agent: &'a str,
    pub proof: &'a [u8; 32],
    pub salt: &'a [u8; 32],
}

/// Register `agent` for `caller`: the operator (or a server) registers it, an agent
/// enrolls it, the agent itself re-registers as a no-op.
pub(crate) fn register(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &Caller,
    asked: &Registration<'_>,
) -> Outcome {
    let agent = asked.agent;
    let enrolled_by = match caller {
        Caller::Operator | Caller::Server => None,
        Caller::Agent(own) if own == agent => return registered(agent, false),
        Caller::Agent(parent) => Some(parent.as_str()),
        // `admit::admit` refuses an anonymous caller before the apply.
        Caller::Anonymous => unreachable!("an anonymous registration was admitted"),
    };
    if let Err(reason) = access::check_new_agent_name(agent, enrolled_by.is_none()) {
        return Outcome::Invalid { reason };
    }
    let key = access::agent_key(agent);
    if let Some(entry) = kv::get(txn, &key) {
        let existing = access::record_name(&entry.value);
        let refusal = match existing {
            Some(existing) if existing != agent => AgentRefusal::ReservedName {
                agent: agent.to_string(),
                existing,
            },
            _ if proof_matches(&entry.value, asked.proof) => return registered(agent, false),
            _ => AgentRefusal::NameTaken {
                agent: agent.to_string(),
            },
        };
        return Outcome::AgentRefused { refusal };
    }
    let value = record(agent, asked.proof, asked.salt, enrolled_by);
    match kv::put(txn, stamp, &key, &value, Some(0)) {
        Outcome::KvWritten { .. } => registered(agent, true),
        other => unreachable!("a put to an absent key answered {other:?}"),
    }
}

fn registered(agent: &str, created: bool) -> Outcome {
    Outcome::AgentRegistered {
        agent: agent.to_string(),
        created,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Store;
    use crate::types::Command;

    fn ask(agent: &str, token: &str) -> Command {
        Command::AgentRegister {
            agent: agent.to_string(),
            proof: token_proof(token),
            salt: [7; 32],
        }
    }

    fn refusal(outcome: Outcome) -> AgentRefusal {
        match outcome {
            Outcome::AgentRefused { refusal } => refusal,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn stored(store: &Store, agent: &str) -> Option<Vec<u8>> {
        kv::get(&store.txn, &access::agent_key(agent)).map(|e| e.value)
    }

    #[test]
    fn a_name_is_held_by_its_first_token_and_a_lookalike_is_refused() {
        let mut store = Store::new();
        assert_eq!(store.run(1, ask("alice", "a")), registered("alice", true));
        let record = stored(&store, "alice").expect("record");
        assert_eq!(store.run(2, ask("alice", "a")), registered("alice", false));
        let other = refusal(store.run(3, ask("alice", "m")));
        assert_eq!(other.refusal_code().as_str(), "name_taken");
        let look = refusal(store.run(4, ask("a1ice", "m")));
        assert_eq!(look.refusal_code().as_str(), "reserved_name");
        assert!(look.to_string().contains("\"alice\""), "{look}");
        assert_eq!(
            stored(&store, "alice"),
            Some(record),
            "refusals changed nothing"
        );
    }

    #[test]
    fn an_agent_enrolls_another_and_re_registers_itself_as_a_no_op() {
        let mut store = Store::new();
        let lead = Caller::Agent("lead".into());
        let out = store.by(lead.clone(), 1, ask("helper", "t"));
        assert_eq!(out, registered("helper", true));
        let record = stored(&store, "helper").expect("record");
        assert_eq!(access::enrolled_by(&record), Some("lead"));
        assert_eq!(
            store.by(lead.clone(), 2, ask("lead", "t")),
            registered("lead", false)
        );
        assert_eq!(stored(&store, "lead"), None, "a no-op writes nothing");
        let cli = store.by(lead, 3, ask("cli-bob", "t"));
        assert!(matches!(cli, Outcome::Invalid { .. }), "{cli:?}");
        let anonymous = store.by(Caller::Anonymous, 4, ask("eve", "t"));
        assert!(
            matches!(anonymous, Outcome::Forbidden { .. }),
            "{anonymous:?}"
        );
        assert_eq!(stored(&store, "eve"), None);
        assert_eq!(stored(&store, "cli-bob"), None);
    }

    #[test]
    fn the_record_keeps_no_token_and_matches_only_its_proof() {
        let proof = token_proof("secret-token");
        let written = record("alice", &proof, &[9; 32], None);
        let text = String::from_utf8(written.clone()).expect("text");
        assert!(!text.contains("secret-token"));
        assert!(
            !text.contains(&hex(&proof)),
            "the proof is salted and hashed"
        );
        assert!(proof_matches(&written, &proof));
        assert!(!proof_matches(&written, &token_proof("other")));
        assert_eq!(access::record_name(&written).as_deref(), Some("alice"));
        assert!(!proof_matches(b"v1:00:00:name:61", &proof), "v1 is not v2");
    }
}
