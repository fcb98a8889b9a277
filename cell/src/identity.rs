//! Who is calling: agents prove their identity with a token on every call that needs one.
//!
//! An agent registers once (`AgentRegister`): the cell stores the blake3 hash of its token
//! under `agents/{<agent>}` (first registration wins; the name is taken from then on). Calls
//! that act for an agent carry `x-whip-agent` and `x-whip-token` as gRPC metadata; the
//! server checks the token against the stored hash and passes the agent to the state
//! machine itself. The identity is never a field of a request body, so one agent cannot
//! act as another.

use std::collections::HashSet;
use std::sync::Mutex;

use tonic::Status;
use tonic::metadata::MetadataMap;
use whip_board::{Query, QueryResult};

use crate::service::Dispatch;

/// Metadata naming the calling agent.
pub const AGENT_HEADER: &str = "x-whip-agent";
/// Metadata carrying the agent's token.
pub const TOKEN_HEADER: &str = "x-whip-token";
/// Longest agent name.
pub const AGENT_BYTES_MAX: usize = 128;
/// Verified (agent, token hash) pairs remembered per server (registrations never change).
const VERIFIED_MAX: usize = 65_536;

/// The CAS key holding an agent's token hash (tagged: it routes by agent name).
pub fn agent_key(agent: &str) -> Vec<u8> {
    format!("agents/{{{agent}}}").into_bytes()
}

/// The stored form of a token: its blake3 hash, hex.
pub fn token_hash(token: &str) -> String {
    blake3::hash(token.as_bytes()).to_hex().to_string()
}

/// Refuse agent names that are empty, too long, or would break the key's routing tag.
pub fn check_agent_name(agent: &str) -> Result<(), Status> {
    if agent.is_empty() || agent.len() > AGENT_BYTES_MAX {
        return Err(Status::invalid_argument(format!(
            "agent name must be 1 to {AGENT_BYTES_MAX} bytes, got {}",
            agent.len()
        )));
    }
    if agent.contains(['{', '}']) || agent.chars().any(char::is_control) {
        return Err(Status::invalid_argument(format!(
            "agent name {agent:?} may not contain braces or control characters"
        )));
    }
    Ok(())
}

/// Checks call metadata against registered agents, remembering what it verified.
#[derive(Default)]
pub(crate) struct Verifier {
    verified: Mutex<HashSet<(String, String)>>,
}

impl Verifier {
    /// The agent a call acts for, proven by its token.
    pub(crate) async fn caller(
        &self,
        dispatch: &dyn Dispatch,
        metadata: &MetadataMap,
    ) -> Result<String, Status> {
        let text = |name: &str| {
            metadata
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let (Some(agent), Some(token)) = (text(AGENT_HEADER), text(TOKEN_HEADER)) else {
            return Err(Status::unauthenticated(format!(
                "this call acts for an agent: send {AGENT_HEADER} and {TOKEN_HEADER} \
                 (the CLI does: --agent, or WHIP_AGENT)"
            )));
        };
        check_agent_name(&agent)?;
        let hash = token_hash(&token);
        let pair = (agent.clone(), hash.clone());
        if self.verified.lock().expect("verifier lock").contains(&pair) {
            return Ok(agent);
        }
        let stored = dispatch
            .read(Query::KvGet {
                key: agent_key(&agent),
            })
            .await?;
        match stored {
            QueryResult::Kv(Some(entry)) if entry.value == hash.as_bytes() => {
                let mut verified = self.verified.lock().expect("verifier lock");
                if verified.len() >= VERIFIED_MAX {
                    verified.clear();
                }
                verified.insert(pair);
                Ok(agent)
            }
            QueryResult::Kv(Some(_)) => Err(Status::unauthenticated(format!(
                "the token does not match agent {agent:?}"
            ))),
            _ => Err(Status::unauthenticated(format!(
                "agent {agent:?} is not registered (whip agent register, or any CLI call \
                 registers the CLI's agent)"
            ))),
        }
    }
}
