//! What a client may touch at all, decided before any command runs.
//!
//! Two rules, both decided here and nowhere else:
//! - **Reserved state.** Agent identities (`agents/…`) and the fabric's own rows (`fabric/…`:
//!   the range map with the cells' public keys) are written only by servers on their own
//!   behalf; no client KV command (`KvPut`, `KvDelete`, `KvTxn`) writes them, and no client
//!   read (`KvGet`, `KvRange`) returns them.
//! - **Server resources.** Counters, leases and ledgers whose owner starts with `~` (the
//!   enrollment budget of each agent, `~enroll`) and every team's signal ledger
//!   (`team/{team}`, `signals`: published and followed through the signal calls, which
//!   prove the member) are reached only by servers.
//! - **Server-only commands.** Ticks, range changes, handoffs and fabric-queue admission and
//!   purge are sent by a node, never through the client API.
//!
//! A request's [`Origin`] is set by the server that built it: the client API always builds
//! [`Origin::Client`], and a forwarded request keeps the origin its first server gave it
//! (forwarding is a peer service, answered only to nodes of the cluster).

use serde::{Deserialize, Serialize};

use crate::query::Query;
use crate::types::{Command, Family};

/// Key prefixes of reserved state.
pub const RESERVED_PREFIXES: [&[u8]; 2] = [b"agents/", b"fabric/"];

/// Who built a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Origin {
    /// The client API, for a caller the server proved (or an anonymous one).
    #[default]
    Client,
    /// A server on its own behalf (its tick loop, fabric administration, handoffs, identity
    /// registration after it checked the caller's credential).
    Server,
}

/// Why a client request was refused before it ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AccessRefusal {
    /// The key is reserved state.
    Reserved {
        /// The key, lossily as text.
        key: String,
    },
    /// The command is sent only by nodes.
    ServerOnly {
        /// The command's name.
        command: String,
    },
}

impl AccessRefusal {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            AccessRefusal::Reserved { .. } => "reserved",
            AccessRefusal::ServerOnly { .. } => "server_only",
        }
    }
}

impl std::fmt::Display for AccessRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccessRefusal::Reserved { key } => write!(
                f,
                "reserved: {key:?} is server state (agents/…, fabric/…, ~… resources, team \
                 signals) that no client command reads or writes"
            ),
            AccessRefusal::ServerOnly { command } => {
                write!(
                    f,
                    "server_only: {command} is sent only by nodes of the cluster"
                )
            }
        }
    }
}

/// Longest agent name, in bytes.
pub const AGENT_NAME_BYTES_MAX: usize = 128;

/// Agent names are 1 to [`AGENT_NAME_BYTES_MAX`] ASCII letters, digits and `. _ - @ : +`,
/// starting with a letter or digit: no control, zero-width, bidirectional or confusable
/// characters can make two names look alike (ASCII is its own NFC form).
pub fn check_agent_name(agent: &str) -> Result<(), String> {
    if agent.is_empty() || agent.len() > AGENT_NAME_BYTES_MAX {
        return Err(format!(
            "agent name must be 1 to {AGENT_NAME_BYTES_MAX} bytes, got {}",
            agent.len()
        ));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-@:+".contains(c);
    let first_ok = agent
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok || !agent.chars().all(allowed) {
        return Err(format!(
            "agent name {agent:?} must start with a letter or digit and use only ASCII \
             letters, digits and . _ - @ : +"
        ));
    }
    Ok(())
}

/// Whether `key` is reserved state.
pub fn is_reserved(key: &[u8]) -> bool {
    RESERVED_PREFIXES
        .iter()
        .any(|prefix| key.starts_with(prefix))
}

/// The owner prefix of resources only servers use.
pub const SERVER_OWNER_PREFIX: &str = "~";
/// The ledger name of team signals (owner `team/{team}`).
pub const SIGNAL_LEDGER: &str = "signals";

/// Whether the resource `owner`/`name` is a server resource.
pub fn is_server_resource(owner: &str, name: &str) -> bool {
    owner.starts_with(SERVER_OWNER_PREFIX) || (owner.starts_with("team/") && name == SIGNAL_LEDGER)
}

fn server_resource(owner: &str, name: &str) -> Result<(), AccessRefusal> {
    if is_server_resource(owner, name) {
        return Err(AccessRefusal::Reserved {
            key: format!("{owner}/{name}"),
        });
    }
    Ok(())
}

fn reserved(key: &[u8]) -> Result<(), AccessRefusal> {
    if is_reserved(key) {
        return Err(AccessRefusal::Reserved {
            key: String::from_utf8_lossy(key).into_owned(),
        });
    }
    Ok(())
}

/// Whether a request of `origin` may run `command`.
pub fn admit(origin: Origin, command: &Command) -> Result<(), AccessRefusal> {
    if origin == Origin::Server {
        return Ok(());
    }
    match command {
        Command::KvPut { key, .. } | Command::KvDelete { key, .. } => reserved(key),
        Command::KvTxn {
            compares,
            puts,
            deletes,
        } => {
            let keys = compares.iter().map(|(k, _)| k);
            let mut keys = keys
                .chain(puts.iter().map(|(k, _)| k))
                .chain(deletes.iter());
            keys.try_for_each(|k| reserved(k))
        }
        Command::LeaseAcquire { lease: id, .. }
        | Command::LeaseRenew { lease: id, .. }
        | Command::LeaseRelease { lease: id, .. }
        | Command::CounterConsume { counter: id, .. }
        | Command::LedgerAppend { ledger: id, .. } => server_resource(&id.owner, &id.name),
        Command::FabricAdmit { .. } | Command::FabricPurge { .. } => server_only(command),
        _ => match command.family() {
            Family::Tick | Family::Range | Family::Handoff => server_only(command),
            Family::Primitive | Family::Coordination | Family::Board => Ok(()),
        },
    }
}

fn server_only(command: &Command) -> Result<(), AccessRefusal> {
    let debug = format!("{command:?}");
    let name = debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default();
    Err(AccessRefusal::ServerOnly {
        command: name.to_string(),
    })
}

/// Whether a client may run `query`. Reads of single reserved keys are refused; a range
/// read is allowed and its reserved rows are left out ([`is_reserved`]).
pub fn admit_query(query: &Query) -> Result<(), AccessRefusal> {
    match query {
        Query::KvGet { key } => reserved(key),
        Query::LedgerList { owner, name, .. } => server_resource(owner, name),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &[u8]) -> Command {
        Command::KvPut {
            key: key.to_vec(),
            value: b"x".to_vec(),
            expect_version: None,
        }
    }

    #[test]
    fn clients_cannot_touch_reserved_state_or_send_server_commands() {
        for key in [&b"agents/{alice}"[..], b"fabric/map", b"fabric/anything"] {
            let refusal = admit(Origin::Client, &put(key)).unwrap_err();
            assert_eq!(refusal.code(), "reserved");
            assert!(admit(Origin::Server, &put(key)).is_ok());
            let read = admit_query(&Query::KvGet { key: key.to_vec() });
            assert_eq!(read.unwrap_err().code(), "reserved");
        }
        let txn = Command::KvTxn {
            compares: Vec::new(),
            puts: vec![(b"ok".to_vec(), b"1".to_vec())],
            deletes: vec![b"agents/{bob}".to_vec()],
        };
        assert_eq!(admit(Origin::Client, &txn).unwrap_err().code(), "reserved");
        assert!(admit(Origin::Client, &put(b"agentsx/ok")).is_ok());
        let purge = Command::FabricPurge { queue: "q".into() };
        for command in [Command::Tick, purge] {
            let refusal = admit(Origin::Client, &command).unwrap_err();
            assert_eq!(refusal.code(), "server_only", "{refusal}");
            assert!(admit(Origin::Server, &command).is_ok());
        }
        assert_eq!(
            admit(Origin::Client, &Command::Tick)
                .unwrap_err()
                .to_string(),
            "server_only: Tick is sent only by nodes of the cluster"
        );
    }
}
