//! Who acts, and the names that say whose state is whose: the [`Caller`] a server proved,
//! agent names and their skeletons, the reserved key prefixes and server resources, and the
//! team a key or an owner belongs to. Pure functions of names, with no plane's logic: every
//! plane asks these, and what a client may touch at all is decided from them in
//! [`crate::admit`].
//!
//! Must never: import a plane's module or `crate::types` (`crate::admit` composes them);
//! every plane imports this one.

pub use crate::vocab::access::{AccessRefusal, Caller};

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
    let team_server = name == SIGNAL_LEDGER || name == crate::vocab::vote::VOTE_LEDGER;
    owner.starts_with(SERVER_OWNER_PREFIX) || (owner.starts_with("team/") && team_server)
}

/// The first character of every reserved team's name (fabric queues, trackers): no user
/// team starts with it.
pub const RESERVED_TEAM_PREFIX: char = '~';

/// Whether `team` is a reserved team (a fabric queue's or a tracker's), not a user's.
pub fn is_reserved_team(team: &str) -> bool {
    team.starts_with(RESERVED_TEAM_PREFIX)
}

/// Whether `team`'s work reaches a fabric queue of its name: a user team's spills there,
/// and once its board is empty a claim falls back to it; a dissolve purges it. A reserved
/// team has none (a fabric queue is the last tier; a tracker never spills).
pub fn has_fabric_queue(team: &str) -> bool {
    !is_reserved_team(team)
}

/// Names of the reserved teams holding the fabric tier: queue `Q`'s board is the team
/// `~fabric/Q`, on the cell owning that name's point, so queues spread over cells. Tasks
/// reach it only by a handoff from a cell tier; user teams cannot start with `~`.
pub const FABRIC_QUEUE_PREFIX: &str = "~fabric/";

/// Names of the reserved teams holding WhippleScript trackers (`~tracker/{owner}/{name}`).
/// A tracker belongs to the store, not to an agent team: every registered agent may file
/// into it and claim from it (the claimant is the instance or worker named in the
/// command), done tasks (closed issues) are kept, a lapsed claim never dead-letters, and
/// tasks never spill (claims name their task).
pub const TRACKER_TEAM_PREFIX: &str = "~tracker/";

/// Whether `team` is a tracker's reserved team.
pub fn is_tracker_team(team: &str) -> bool {
    team.starts_with(TRACKER_TEAM_PREFIX)
}

/// The reserved team of fabric queue `queue`.
pub fn fabric_queue_team(queue: &str) -> String {
    format!("{FABRIC_QUEUE_PREFIX}{queue}")
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
