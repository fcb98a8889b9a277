//! Who is calling: agents prove their identity with a token on every call that needs one.
//!
//! An agent is registered once (`AgentRegister`, by the operator or enrolled by an existing
//! agent): the cell stores a salted, keyed blake3 hash of its token under the reserved key
//! `agents/{<agent>}`, which no client command reads or writes (first registration wins;
//! the name is taken from then on). Calls
//! that act for an agent carry `x-whip-agent` and `x-whip-token` as gRPC metadata; the
//! server checks the token against the stored hash and passes the agent to the state
//! machine itself. The identity is never a field of a request body, so one agent cannot
//! act as another.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tonic::Status;
use tonic::metadata::MetadataMap;
use whip_board::{Query, QueryResult};

use crate::limits;
use crate::service::Dispatch;

/// Metadata naming the calling agent.
pub const AGENT_HEADER: &str = "x-whip-agent";
/// Metadata carrying the agent's token.
pub const TOKEN_HEADER: &str = "x-whip-token";
/// Metadata naming the agent a call acts for without its token: the operator's worker acting
/// as the owner of the instance it drives. Who may is decided in the board
/// (`whip_board::access::acting_for`): the operator or a node for any agent, an agent only
/// for itself.
pub const ACT_FOR_HEADER: &str = "x-whip-act-for";
/// Shortest token a client may bring (the CLI and the server make 64 hex digits, after the
/// agent's name for tokens that name it: [`agent_token`]).
pub const TOKEN_BYTES_MIN: usize = 32;
/// Longest token.
pub const TOKEN_BYTES_MAX: usize = 256;
/// Fewest distinct characters a client's token needs (a weak token is refused).
const TOKEN_DISTINCT_MIN: usize = 12;
/// Verified (agent, token hash) pairs remembered per server...
const VERIFIED_MAX: usize = 65_536;
/// ...for this long: a token replaced or revoked stops working on every server within it.
const VERIFIED_TTL_MS: u64 = 1_000;

/// The reserved key holding an agent's token record (tagged: it routes by agent name).
pub fn agent_key(agent: &str) -> Vec<u8> {
    whip_board::access::agent_key(agent)
}

/// A fresh token: 32 random bytes, hex.
pub fn new_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The mark that opens a token naming its agent ([`agent_token`]).
const NAMED_TOKEN_MARK: &str = "w1.";

/// A fresh token for `agent` that names it: `w1.` + the name's bytes in hex + `.` + a
/// [`new_token`]. A bearer with no other header (MCP over HTTP, `WHIP_TOKEN`) then says
/// whose record to check. The name is a lookup hint, never a proof: the whole token is
/// checked against that agent's stored hash like any other. A name too long to fit
/// [`TOKEN_BYTES_MAX`] gets a plain token.
pub fn agent_token(agent: &str) -> String {
    let secret = new_token();
    let named = format!("{NAMED_TOKEN_MARK}{}.{secret}", hex_of(agent.as_bytes()));
    match named.len() <= TOKEN_BYTES_MAX {
        true => named,
        false => secret,
    }
}

/// The agent a token from [`agent_token`] names (`None`: a plain token).
pub fn token_agent(token: &str) -> Option<String> {
    let rest = token.strip_prefix(NAMED_TOKEN_MARK)?;
    let (name_hex, secret) = rest.split_once('.')?;
    if secret.is_empty() || name_hex.is_empty() || name_hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..name_hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(name_hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Refuse tokens too short or too plain to be secret.
pub fn check_token(token: &str) -> Result<(), Status> {
    let distinct = token.chars().collect::<HashSet<_>>().len();
    if token.len() < TOKEN_BYTES_MIN || token.len() > TOKEN_BYTES_MAX {
        return Err(Status::invalid_argument(format!(
            "an agent token is {TOKEN_BYTES_MIN} to {TOKEN_BYTES_MAX} bytes, got {} (leave it \
             empty and the server makes one)",
            token.len()
        )));
    }
    if distinct < TOKEN_DISTINCT_MIN {
        return Err(Status::invalid_argument(format!(
            "an agent token needs {TOKEN_DISTINCT_MIN} distinct characters, got {distinct}"
        )));
    }
    Ok(())
}

/// 32 random bytes for a record's salt.
pub fn fresh_salt() -> [u8; 32] {
    use rand::RngCore;
    let mut salt = [0u8; 32];
    rand::rng().fill_bytes(&mut salt);
    salt
}

/// Whether `token` matches the stored `record` (compared in constant time): a v2 record
/// (`whip_board::register`) holds a hash of the token's proof; a v1 record, written before
/// registration moved into the board, a hash of the token itself.
pub fn token_matches(record: &[u8], token: &str) -> bool {
    let proof = whip_board::register::token_proof(token);
    if whip_board::register::proof_matches(record, &proof) {
        return true;
    }
    whip_board::register::salted_hash(record, "v1:").is_some_and(|(salt, stored)| {
        blake3::keyed_hash(salt.as_bytes(), token.as_bytes()) == stored
    })
}

/// Refuse agent names outside the documented set ([`whip_board::access::check_agent_name`]).
pub fn check_agent_name(agent: &str) -> Result<(), Status> {
    whip_board::access::check_agent_name(agent).map_err(Status::invalid_argument)
}

impl Verifier {
    /// Forget what was verified for `agent` (its identity was just revoked here).
    pub(crate) fn forget(&self, agent: &str) {
        let mut verified = self.verified.lock().expect("verifier lock");
        verified.retain(|(name, _), _| name != agent);
    }
}

/// Checks call metadata against registered agents, remembering what it verified and
/// which addresses failed lately.
#[derive(Default)]
pub(crate) struct Verifier {
    /// (agent, blake3 of the token) → when it was verified.
    verified: Mutex<HashMap<(String, blake3::Hash), Instant>>,
    /// Failed token checks per remote address in the current window.
    failures: Mutex<HashMap<IpAddr, Failures>>,
}

/// Failed token checks of one address since `since`.
#[derive(Clone, Copy, Debug)]
struct Failures {
    since: Instant,
    count: u32,
}

/// Token checks that read the store since the process started.
static TOKEN_STORE_READS: AtomicU64 = AtomicU64::new(0);
/// Token checks refused without reading, because their address failed too often.
static TOKEN_CHECKS_THROTTLED: AtomicU64 = AtomicU64::new(0);

/// Token checks that read the store (`/metrics`: `whip_token_store_reads`).
pub fn token_store_reads() -> u64 {
    TOKEN_STORE_READS.load(Ordering::Relaxed)
}

/// Token checks refused unread because their address failed too often
/// (`/metrics`: `whip_token_checks_throttled`).
pub fn token_checks_throttled() -> u64 {
    TOKEN_CHECKS_THROTTLED.load(Ordering::Relaxed)
}

/// Where failures of `peer` are counted: its own row, or (when the table is full of live
/// rows) one row every such address shares, so many addresses are limited together.
fn failure_row(table: &mut HashMap<IpAddr, Failures>, peer: IpAddr, now: Instant) -> IpAddr {
    let window = Duration::from_millis(limits::TOKEN_FAILURE_WINDOW_MS);
    if table.contains_key(&peer) || table.len() < limits::TOKEN_FAILURE_ADDRESSES_MAX {
        return peer;
    }
    table.retain(|_, f| now.duration_since(f.since) < window);
    match table.len() < limits::TOKEN_FAILURE_ADDRESSES_MAX {
        true => peer,
        false => IpAddr::from([0, 0, 0, 0]),
    }
}

impl Verifier {
    /// Refuse `peer` if it failed [`limits::TOKEN_FAILURES_PER_WINDOW_MAX`] token checks in
    /// the current window (without reading anything).
    fn throttled(&self, peer: Option<IpAddr>) -> Result<(), Status> {
        let Some(peer) = peer else { return Ok(()) };
        let now = Instant::now();
        let window = Duration::from_millis(limits::TOKEN_FAILURE_WINDOW_MS);
        let mut table = self.failures.lock().expect("failures lock");
        let row = failure_row(&mut table, peer, now);
        let over = table.get(&row).is_some_and(|f| {
            now.duration_since(f.since) < window && f.count >= limits::TOKEN_FAILURES_PER_WINDOW_MAX
        });
        if !over {
            return Ok(());
        }
        TOKEN_CHECKS_THROTTLED.fetch_add(1, Ordering::Relaxed);
        Err(Status::unauthenticated(format!(
            "token_attempts_exhausted: {peer} failed {} token checks within {} ms; \
             try again later",
            limits::TOKEN_FAILURES_PER_WINDOW_MAX,
            limits::TOKEN_FAILURE_WINDOW_MS
        )))
    }

    /// Count a failed token check of `peer`.
    fn failed(&self, peer: Option<IpAddr>) {
        let Some(peer) = peer else { return };
        let now = Instant::now();
        let window = Duration::from_millis(limits::TOKEN_FAILURE_WINDOW_MS);
        let mut table = self.failures.lock().expect("failures lock");
        let row = failure_row(&mut table, peer, now);
        let entry = table.entry(row).or_insert(Failures {
            since: now,
            count: 0,
        });
        if now.duration_since(entry.since) >= window {
            *entry = Failures {
                since: now,
                count: 0,
            };
        }
        entry.count = entry.count.saturating_add(1);
    }

    /// The agent a call from `peer` (its remote address, when known) acts for, proven by
    /// its token. An address that failed too many checks lately is refused before the
    /// store is read.
    pub(crate) async fn caller(
        &self,
        dispatch: &dyn Dispatch,
        metadata: &MetadataMap,
        peer: Option<IpAddr>,
    ) -> Result<String, Status> {
        let peer = peer.map(|p| p.to_canonical());
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
        let pair = (agent.clone(), blake3::hash(token.as_bytes()));
        let fresh = Duration::from_millis(VERIFIED_TTL_MS);
        let seen = self
            .verified
            .lock()
            .expect("verifier lock")
            .get(&pair)
            .copied();
        if seen.is_some_and(|at| at.elapsed() < fresh) {
            return Ok(agent);
        }
        self.throttled(peer)?;
        TOKEN_STORE_READS.fetch_add(1, Ordering::Relaxed);
        let stored = dispatch
            .read(Query::KvGet {
                key: agent_key(&agent),
            })
            .await?;
        let checked = self.judge(&agent, &token, pair, stored);
        if checked.is_err() {
            self.failed(peer);
        }
        checked
    }

    /// Whether the `stored` record of `agent` admits `token`; remembers a success.
    fn judge(
        &self,
        agent: &str,
        token: &str,
        pair: (String, blake3::Hash),
        stored: QueryResult,
    ) -> Result<String, Status> {
        let fresh = Duration::from_millis(VERIFIED_TTL_MS);
        match stored {
            QueryResult::Kv(Some(entry))
                if token_matches(&entry.value, token)
                    && whip_board::access::record_name(&entry.value)
                        .is_none_or(|name| name == agent) =>
            {
                let mut verified = self.verified.lock().expect("verifier lock");
                if verified.len() >= VERIFIED_MAX {
                    verified.retain(|_, at| at.elapsed() < fresh);
                }
                if verified.len() < VERIFIED_MAX {
                    verified.insert(pair, Instant::now());
                }
                Ok(agent.to_string())
            }
            QueryResult::Kv(Some(entry)) if whip_board::access::is_revoked(&entry.value) => Err(
                Status::unauthenticated(format!("agent {agent:?} was revoked")),
            ),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_records_and_records_written_before_them_both_verify_their_token_only() {
        let token = agent_token("alice");
        let proof = whip_board::register::token_proof(&token);
        let v2 = whip_board::register::record("alice", &proof, &fresh_salt(), None);
        assert!(token_matches(&v2, &token));
        assert!(!token_matches(&v2, &agent_token("alice")));
        // A v1 record, as the build before board-decided registration wrote it.
        let salt = [3u8; 32];
        let hash = blake3::keyed_hash(&salt, token.as_bytes()).to_hex();
        let salt_hex: String = salt.iter().map(|b| format!("{b:02x}")).collect();
        let v1 = format!("v1:{salt_hex}:{hash}:name:616c696365").into_bytes();
        assert!(token_matches(&v1, &token));
        assert!(!token_matches(&v1, &agent_token("alice")));
        assert!(!token_matches(b"revoked:v1:00:00", &token));
    }

    #[test]
    fn a_named_token_names_its_agent_and_passes_the_token_rules() {
        for agent in ["worker-1", "ünïcode agent", "a.b.c"] {
            let token = agent_token(agent);
            assert_eq!(token_agent(&token).as_deref(), Some(agent), "{token}");
            check_token(&token).expect("a named token is a valid token");
            assert_ne!(agent_token(agent), token, "every token is fresh");
        }
    }

    #[test]
    fn a_plain_or_malformed_token_names_no_one() {
        assert_eq!(token_agent(&new_token()), None);
        for bad in [
            "w1.",
            "w1.zz.secret",
            "w1.616.secret",
            "w1.6162.",
            "w1.ff.secret",
        ] {
            assert_eq!(token_agent(bad), None, "{bad}");
        }
        let long = "n".repeat(200);
        let token = agent_token(&long);
        assert_eq!(
            token_agent(&token),
            None,
            "too long a name gets a plain token"
        );
        check_token(&token).expect("still a valid token");
    }
}
