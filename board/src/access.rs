//! What a client may touch at all, decided before any command runs.
//!
//! Two rules, both decided here and nowhere else:
//! - **Reserved state.** Agent identities (`agents/…`) and the fabric's own rows (`fabric/…`:
//!   the range map with the cells' public keys) are written only by servers on their own
//!   behalf; no client KV command (`KvPut`, `KvDelete`, `KvTxn`) writes them, and no client
//!   read (`KvGet`, `KvRange`) returns them.
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
                "reserved: key {key:?} is server state (agents/…, fabric/…) that no client \
                 command reads or writes"
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

/// Whether `key` is reserved state.
pub fn is_reserved(key: &[u8]) -> bool {
    RESERVED_PREFIXES
        .iter()
        .any(|prefix| key.starts_with(prefix))
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
