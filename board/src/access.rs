//! What a client may touch at all, decided before any command runs.
//!
//! Two rules, both decided here and nowhere else:
//! - **Reserved state.** Agent identities (`agents/…`) and the fabric's own rows (`fabric/…`:
//!   the range map with the cells' public keys) are written only by servers on their own
//!   behalf; no client KV command (`KvPut`, `KvDelete`, `KvTxn`) writes them, and no client
//!   read (`KvGet`, `KvRange`) returns them. Client keys spelled like the engine's rows are
//!   refused too; the engine's rows themselves are another family (`crate::instance`).
//! - **Principal names.** [`check_new_agent_name`] refuses names that read as a principal
//!   or (by [`name_skeleton`]) as another agent; identities are keyed by the skeleton.
//! - **Server resources.** Counters, leases and ledgers whose owner starts with `~` (the
//!   enrollment budget of each agent, `~enroll`) and every team's signal ledger
//!   (`team/{team}`, `signals`) are reached only by servers, except that an agent appends
//!   a signal signed with its own name (membership decided in apply).
//! - **Server-only commands.** Ticks, range changes, handoffs, fabric-queue purges, quota
//!   grants and identity revocations are sent by a node, never through the client API (a
//!   server's claim on a fabric queue vouches for the member the team's cell found).
//!
//! - **No anonymous writes.** A request whose caller the server could not prove (no agent
//!   token, no operator or node certificate) changes nothing: `anonymous_refused`.
//!
//! A request's [`Caller`] is set by the server that built it from the authenticated call
//! (an agent's token, the operator's certificate), never from a request body; a forwarded
//! request keeps the caller its first server proved (forwarding is a peer service,
//! answered only to nodes of the cluster). Only a server on its own behalf is
//! [`Caller::Server`].

pub use crate::vocab::access::{AccessRefusal, Caller};

use crate::query::Query;
use crate::types::{Command, Family};

/// Key prefixes of reserved state: server rows kept as CAS keys (identities, the range
/// map), and the names of the engine's rows and of server-made idempotency keys. The
/// engine's rows are not client keys at all (their own family, `crate::instance`); a client
/// key spelled like one is refused rather than silently landing beside them.
pub const RESERVED_PREFIXES: [&[u8]; 10] = [
    b"agents/",
    b"fabric/",
    b"e/",
    b"i/",
    b"w/",
    b"p/",
    b"g/",
    b"t/",
    b"program/",
    b"engine/",
];

/// Principal names no agent may take, compared by their [`name_skeleton`].
pub const RESERVED_NAMES: [&str; 4] = ["operator", "server", "anonymous", "engine"];

/// The prefix of the CLI's default identity (`cli-<user>`): only the operator registers
/// such a name, so no agent can squat another user's default.
pub const CLI_NAME_PREFIX: &str = "cli-";

impl Caller {
    /// How the audit ledger and refusals name the caller.
    pub fn name(&self) -> &str {
        match self {
            Caller::Anonymous => "anonymous",
            Caller::Agent(agent) => agent,
            Caller::Operator => "operator",
            Caller::Server => "server",
        }
    }

    /// The agent, if the caller is one.
    pub fn agent(&self) -> Option<&str> {
        match self {
            Caller::Agent(agent) => Some(agent),
            _ => None,
        }
    }
}

impl AccessRefusal {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            AccessRefusal::Reserved { .. } => "reserved",
            AccessRefusal::ServerOnly { .. } => "server_only",
            AccessRefusal::OperatorOnly { .. } => "operator_only",
            AccessRefusal::Anonymous => "anonymous_refused",
            AccessRefusal::NotAuthorized { .. } => "not_authorized",
            AccessRefusal::MetaCell => "reserved",
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
            AccessRefusal::OperatorOnly { command } => {
                write!(
                    f,
                    "operator_only: {command} needs the operator's credential"
                )
            }
            AccessRefusal::Anonymous => write!(
                f,
                "anonymous_refused: this call needs a proven caller (an agent's token or the \
                 operator's certificate)"
            ),
            AccessRefusal::NotAuthorized { what, owner } => write!(
                f,
                "not_authorized: {what} is {owner}'s; only its owner or the operator may \
                 read or change it"
            ),
            AccessRefusal::MetaCell => write!(
                f,
                "reserved: the meta cell (0) keeps the fabric's map and serves no client \
                 request; send it without a route to cell 0"
            ),
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

/// The form two names share when they look alike: ASCII case folded, the digits and
/// letter pairs that read as one letter merged (`0`/`o`, `1`/`l`/`i`, `rn`/`m`, `vv`/`w`),
/// and `.`, `_` and `-` as one separator.
pub fn name_skeleton(name: &str) -> String {
    let folded = name
        .to_ascii_lowercase()
        .replace("rn", "m")
        .replace("vv", "w");
    folded
        .chars()
        .map(|c| match c {
            '0' => 'o',
            '1' | 'i' => 'l',
            '_' | '-' => '.',
            other => other,
        })
        .collect()
}

/// Why a name may not be taken by a new agent: it reads as a reserved principal, or (for
/// an agent enrolling another) it is a CLI default identity. `by_operator` is whether the
/// operator registers it.
pub fn check_new_agent_name(name: &str, by_operator: bool) -> Result<(), String> {
    check_agent_name(name)?;
    let skeleton = name_skeleton(name);
    if RESERVED_NAMES.iter().any(|r| name_skeleton(r) == skeleton) {
        return Err(format!(
            "reserved_name: {name:?} reads as a principal of the fabric \
             ({}), which no agent may be named",
            RESERVED_NAMES.join(", ")
        ));
    }
    if !by_operator && skeleton.starts_with(&name_skeleton(CLI_NAME_PREFIX)) {
        return Err(format!(
            "reserved_name: {name:?} is a CLI default identity ({CLI_NAME_PREFIX}<user>), \
             which only the operator registers"
        ));
    }
    Ok(())
}

/// Who a call acts as when it asks to act for `agent` (the `x-whip-act-for` metadata): the
/// operator or a server may act for any agent (a worker driving an instance acts as the
/// instance's owner, so its leases, mail and votes are the owner's); an agent only for
/// itself; nobody unproven. The named agent must have a well-formed, unreserved name: an
/// operator cannot act as a principal through it.
pub fn acting_for(proven: &Caller, agent: &str) -> Result<Caller, AccessRefusal> {
    let refused = || AccessRefusal::NotAuthorized {
        what: format!("acting for agent {agent:?}"),
        owner: agent.to_string(),
    };
    if check_new_agent_name(agent, true).is_err() {
        return Err(refused());
    }
    match proven {
        Caller::Operator | Caller::Server => Ok(Caller::Agent(agent.to_string())),
        Caller::Agent(own) if own == agent => Ok(proven.clone()),
        Caller::Agent(_) => Err(refused()),
        Caller::Anonymous => Err(AccessRefusal::Anonymous),
    }
}

/// The reserved key holding an agent's identity record (tagged: it routes by the name's
/// [`name_skeleton`], so two names that look alike share one record and the second
/// registration finds it taken).
pub fn agent_key(agent: &str) -> Vec<u8> {
    format!("agents/{{{}}}", name_skeleton(agent)).into_bytes()
}

/// Key prefixes of a team's blackboard rows: `doc/{team}/…`, `frame/{team}/…`,
/// `artifacts/{team}/…` ([`crate::blackboard`]).
pub const TEAM_ROW_PREFIXES: [&str; 3] = ["doc/", "frame/", "artifacts/"];
/// The owner prefix of a team's resources (its locks; its signal ledger).
pub const TEAM_OWNER_PREFIX: &str = "team/";

/// The team whose blackboard holds CAS key (or key prefix) `key`: a team row prefix
/// followed by a non-empty `{team}` tag.
pub fn team_of_key(key: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(key).ok()?;
    let prefix = TEAM_ROW_PREFIXES.iter().find(|p| text.starts_with(**p))?;
    let (team, _) = text[prefix.len()..].strip_prefix('{')?.split_once('}')?;
    (!team.is_empty()).then_some(team)
}

/// The team owning resources of `owner` (`team/{team}`).
pub fn team_of_owner(owner: &str) -> Option<&str> {
    owner
        .strip_prefix(TEAM_OWNER_PREFIX)
        .filter(|team| !team.is_empty())
}

/// How an `AgentRevoke` names the operator as the revoker (no agent name starts with `~`):
/// the operator revokes any agent.
pub const OPERATOR_REVOKER: &str = "~operator";

/// The prefix of an identity record that names the agent who enrolled it.
pub const ENROLLED_BY_MARK: &str = ":by:";
/// The prefix of a revoked identity record (no token matches it).
pub const REVOKED_MARK: &str = "revoked:";

/// The mark before the hex of the exact name an identity record was registered under.
pub const NAME_MARK: &str = ":name:";

/// The exact name an identity `record` was registered under (`None` for a record older
/// than names in records). Records are keyed by [`name_skeleton`], so a caller presenting
/// a look-alike name with the right token is still refused.
pub fn record_name(record: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(record).ok()?;
    let (_, rest) = text.split_once(NAME_MARK)?;
    let hex = rest.split(':').next()?;
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// The agent that enrolled the identity `record` (`None` for one the operator made).
pub fn enrolled_by(record: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(record).ok()?;
    text.split_once(ENROLLED_BY_MARK).map(|(_, by)| by)
}

/// Whether the identity `record` was revoked.
pub fn is_revoked(record: &[u8]) -> bool {
    record.starts_with(REVOKED_MARK.as_bytes())
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
    let team_server = name == SIGNAL_LEDGER || name == crate::vote::VOTE_LEDGER;
    owner.starts_with(SERVER_OWNER_PREFIX) || (owner.starts_with("team/") && team_server)
}

fn server_resource(owner: &str, name: &str) -> Result<(), AccessRefusal> {
    if is_server_resource(owner, name) {
        return Err(AccessRefusal::Reserved {
            key: format!("{owner}/{name}"),
        });
    }
    Ok(())
}

/// A scan whose prefix lies inside reserved state (`e/{ins…`, `agents/`) is refused; a
/// wider scan runs and leaves the reserved rows out.
fn reserved_scan(prefix: &[u8]) -> Result<(), AccessRefusal> {
    match prefix.contains(&b'/') {
        true => reserved(prefix),
        false => Ok(()),
    }
}

fn reserved(key: &[u8]) -> Result<(), AccessRefusal> {
    if is_reserved(key) {
        return Err(AccessRefusal::Reserved {
            key: String::from_utf8_lossy(key).into_owned(),
        });
    }
    Ok(())
}

/// Whether a request of `caller` may run `command`.
pub fn admit(caller: &Caller, command: &Command) -> Result<(), AccessRefusal> {
    match caller {
        Caller::Server => return Ok(()),
        Caller::Anonymous => return Err(AccessRefusal::Anonymous),
        Caller::Agent(_) | Caller::Operator => {}
    }
    match command {
        command if command.is_kv() => kv_keys(command),
        // A member publishes a team signal as itself (membership is decided in apply,
        // `crate::blackboard`); nobody signs another's name, and only the server announces
        // a vote's result (topic `vote`).
        Command::LedgerAppend {
            ledger: id,
            appended_by,
            ..
        } if id.name == SIGNAL_LEDGER
            && team_of_owner(&id.owner).is_some()
            && id.key != crate::vote::VOTE_SIGNAL_TOPIC
            && caller.agent() == Some(appended_by.as_str()) =>
        {
            Ok(())
        }
        Command::LeaseAcquire { lease: id, .. }
        | Command::LeaseRenew { lease: id, .. }
        | Command::LeaseRelease { lease: id, .. }
        | Command::CounterConsume { counter: id, .. }
        | Command::LedgerAppend { ledger: id, .. } => server_resource(&id.owner, &id.name),
        Command::FabricPurge { .. }
        | Command::WorkQuotaLend { .. }
        | Command::WorkQuotaAck { .. }
        | Command::WorkQuotaInstall { .. }
        | Command::AgentRevoke { .. }
        | Command::TeamLeaveAll { .. } => server_only(command),
        // A notice is a server's word; nobody sends one in its name.
        Command::MailSend {
            kind: crate::mail::MailType::Notice,
            ..
        } => server_only(command),
        Command::WorkLimitsSet { .. } if *caller != Caller::Operator => {
            Err(AccessRefusal::OperatorOnly {
                command: command_name(command),
            })
        }
        _ => match command.family() {
            Family::Tick | Family::Range | Family::Handoff => server_only(command),
            Family::Primitive
            | Family::Coordination
            | Family::Board
            | Family::Work
            | Family::Mail
            | Family::Vote
            | Family::Engine
            | Family::Paths => Ok(()),
        },
    }
}

/// A client's CAS key command reaches no reserved key, and attaches to no server lease.
fn kv_keys(command: &Command) -> Result<(), AccessRefusal> {
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
        Command::KvKeepalive { key, .. } => reserved(key),
        // The key is the caller's to write, and the lease one a client may reach.
        Command::KvPutAttached { key, attach, .. } => {
            reserved(key)?;
            match attach {
                crate::ephemeral::KvAttach::Lease { lease, .. } => {
                    server_resource(&lease.owner, &lease.name)
                }
                crate::ephemeral::KvAttach::Ttl { .. } => Ok(()),
            }
        }
        Command::KvTxnIf {
            compares,
            success,
            failure,
        } => crate::kv_txn::keys(compares, success, failure).try_for_each(reserved),
        other => unreachable!("{other:?} is not a CAS key command"),
    }
}

fn command_name(command: &Command) -> String {
    let debug = format!("{command:?}");
    let name = debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default();
    name.to_string()
}

fn server_only(command: &Command) -> Result<(), AccessRefusal> {
    Err(AccessRefusal::ServerOnly {
        command: command_name(command),
    })
}

/// Whether `caller` may take a snapshot of a cell's whole state (`whip cell snapshot save`,
/// `whip fabric backup`): the operator only. A snapshot holds every agent's state and the
/// cell's signing key, so neither an agent nor an anonymous caller may, nor a server on its
/// own behalf.
pub fn admit_snapshot(caller: &Caller) -> Result<(), AccessRefusal> {
    match caller {
        Caller::Operator => Ok(()),
        Caller::Anonymous => Err(AccessRefusal::Anonymous),
        Caller::Agent(_) | Caller::Server => Err(AccessRefusal::OperatorOnly {
            command: "snapshot_save".to_string(),
        }),
    }
}

/// Whether `caller` may read a fabric's routes (its range map and where each cell's leader
/// is): any proven caller may, since every keyed request it sends names its cell and epoch
/// anyway; an anonymous caller learns nothing about the fabric's layout.
pub fn admit_routes(caller: &Caller) -> Result<(), AccessRefusal> {
    match caller {
        Caller::Anonymous => Err(AccessRefusal::Anonymous),
        _ => Ok(()),
    }
}

/// Whether `caller` may follow a cell's applies (a `Watch` stream, a `WaitApplied` wait):
/// any proven caller, since a wait learns an apply index and a watch's events are filtered
/// by [`admit_query`] like any read; an anonymous caller follows nothing.
pub fn admit_follow(caller: &Caller) -> Result<(), AccessRefusal> {
    match caller {
        Caller::Anonymous => Err(AccessRefusal::Anonymous),
        _ => Ok(()),
    }
}

/// Whether a client `caller` may run `query`. An anonymous caller reads nothing; reads of
/// single reserved keys are refused; a range read is allowed and its reserved rows are
/// left out ([`is_reserved`]).
pub fn admit_query(caller: &Caller, query: &Query) -> Result<(), AccessRefusal> {
    if *caller == Caller::Anonymous {
        return Err(AccessRefusal::Anonymous);
    }
    match query {
        Query::KvGet { key } => reserved(key),
        Query::KvRange { prefix, .. } => reserved_scan(prefix),
        Query::KvWatch { key, prefix, .. } => match prefix {
            true => reserved_scan(key),
            false => reserved(key),
        },
        Query::LedgerList { owner, name, .. } => server_resource(owner, name),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_proven_caller_follows_applies() {
        assert_eq!(
            admit_follow(&Caller::Anonymous),
            Err(AccessRefusal::Anonymous)
        );
        for caller in [Caller::Operator, Caller::Server, Caller::Agent("a".into())] {
            assert_eq!(admit_follow(&caller), Ok(()), "{caller:?}");
        }
    }

    /// Every proven caller may read the routes; an anonymous one learns nothing.
    #[test]
    fn only_proven_callers_read_the_routes() {
        assert_eq!(
            admit_routes(&Caller::Anonymous),
            Err(AccessRefusal::Anonymous)
        );
        for proven in [
            Caller::Agent("alice".into()),
            Caller::Operator,
            Caller::Server,
        ] {
            assert_eq!(admit_routes(&proven), Ok(()), "{proven:?}");
        }
    }

    /// Only the operator takes a snapshot; an agent's refusal is `operator_only`.
    #[test]
    fn only_the_operator_takes_a_snapshot() {
        assert_eq!(admit_snapshot(&Caller::Operator), Ok(()));
        assert_eq!(
            admit_snapshot(&Caller::Anonymous),
            Err(AccessRefusal::Anonymous)
        );
        for refused in [Caller::Agent("alice".into()), Caller::Server] {
            let code = admit_snapshot(&refused).unwrap_err().code();
            assert_eq!(code, "operator_only", "{refused:?}");
        }
    }

    /// The operator acts for any agent; an agent only for itself; nobody for a principal.
    #[test]
    fn only_the_operator_or_a_server_acts_for_another_agent() {
        let ann = Caller::Agent("ann".into());
        for proven in [Caller::Operator, Caller::Server, ann.clone()] {
            assert_eq!(acting_for(&proven, "ann"), Ok(ann.clone()), "{proven:?}");
        }
        let mallory = Caller::Agent("mallory".into());
        assert_eq!(
            acting_for(&mallory, "ann").unwrap_err().code(),
            "not_authorized"
        );
        let anonymous = acting_for(&Caller::Anonymous, "ann").unwrap_err();
        assert_eq!(anonymous, AccessRefusal::Anonymous);
        for principal in ["operator", "0perator", "server", "engine", "", "a b"] {
            let refusal = acting_for(&Caller::Operator, principal).unwrap_err();
            assert_eq!(refusal.code(), "not_authorized", "{principal:?}");
        }
    }

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
            let refusal = admit(&Caller::Operator, &put(key)).unwrap_err();
            assert_eq!(refusal.code(), "reserved");
            assert!(admit(&Caller::Server, &put(key)).is_ok());
            let read = admit_query(&Caller::Operator, &Query::KvGet { key: key.to_vec() });
            assert_eq!(read.unwrap_err().code(), "reserved");
        }
        let txn = Command::KvTxn {
            compares: Vec::new(),
            puts: vec![(b"ok".to_vec(), b"1".to_vec())],
            deletes: vec![b"agents/{bob}".to_vec()],
        };
        assert_eq!(
            admit(&Caller::Operator, &txn).unwrap_err().code(),
            "reserved"
        );
        assert!(admit(&Caller::Operator, &put(b"agentsx/ok")).is_ok());
        let purge = Command::FabricPurge { queue: "q".into() };
        for command in [Command::Tick, purge] {
            let refusal = admit(&Caller::Operator, &command).unwrap_err();
            assert_eq!(refusal.code(), "server_only", "{refusal}");
            assert!(admit(&Caller::Server, &command).is_ok());
        }
        let anonymous = admit(&Caller::Anonymous, &put(b"plain")).unwrap_err();
        assert_eq!(anonymous.code(), "anonymous_refused");
        assert!(admit(&Caller::Agent("a".into()), &put(b"plain")).is_ok());
        assert_eq!(
            admit(&Caller::Operator, &Command::Tick)
                .unwrap_err()
                .to_string(),
            "server_only: Tick is sent only by nodes of the cluster"
        );
    }
}
