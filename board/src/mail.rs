//! Agent mail: typed messages to an agent, a team or a work-registry entry, with the sender
//! the server proved and the right to direct decided in the same apply as the delivery.
//!
//! A mailbox lives on the cell that owns its address: an agent's beside its identity record
//! (`agents/{name}`), a team's beside the team record, an entry's with its lineage (by the
//! root). So everything a delivery decides on is in the apply's own state:
//!
//! - **The sender** is the request's caller, set by the server from the authenticated call;
//!   no command field names it. Only a server sends a `notice`.
//! - **Peers inform, never command.** `inform`, `ask` and `reply` from any proven caller
//!   arrive as `trust: untrusted`. A `directive` is delivered (`trust: authority`) only
//!   from the recipient's authority, else refused `not_authorized`:
//!   - an agent: the agent that enrolled it (its parent), or the operator;
//!   - a team: its supervisor, or the operator;
//!   - an entry: an owner of one of its ancestors (for a root, its owner), or the operator;
//!   - and whoever that authority granted the right to (`MailGrant`); a grantee cannot grant
//!     on, and the recipient cannot grant itself anything.
//!
//!   A team supervisor has no authority over a member's own mailbox: any member may add
//!   any registered agent to a team, so supervising a team proves nothing about a member.
//! - **Screened, never spliced.** Every message is screened ([`crate::screen`]) in the
//!   apply and stored with its verdict; a quarantined one is kept and listed apart, never
//!   delivered into a run, until the recipient's authority releases or drops it (the
//!   recipient may drop it too, never release it).
//! - **Bounded.** At most `MAIL_DEPTH_MAX` messages wait in one mailbox (quarantined ones
//!   too); past it a send is refused `mailbox_full`, never dropped. One sender has at most
//!   `MAIL_SENDER_PENDING_MAX` of them (`sender_quota`), so a peer cannot fill another's
//!   mailbox alone.
//!
//! Sequence numbers are gap-free per mailbox from 1 and never reused; a message's id is
//! `{address}#{seq}`. Draining is two steps, read then `MailAck` through a sequence, so a
//! reader that fails between them reads the same mail again (at least once, and the
//! reader admits each id once).

use serde::{Deserialize, Serialize};

use crate::access::{self, Caller};
use crate::codec::{decode, encode};
use crate::keys::{self, MBOX_HEAD, MBOX_MSG};
use crate::limits::{
    KV_TXN_BYTES_MAX, LIST_ROWS_MAX, MAIL_DEPTH_MAX, MAIL_GRANTS_MAX, MAIL_PAYLOAD_BYTES_MAX,
    MAIL_REF_BYTES_MAX, MAIL_SEND_BATCH_MAX, MAIL_SENDER_PENDING_MAX, MAIL_TEXT_BYTES_MAX,
};
use crate::screen::{self, Finding, FindingKind, Screen, Verdict};
use crate::txn::Txn;
use crate::types::{Command, Outcome, Stamp};
pub use crate::vocab::mail::{
    Address, ExternalScreen, MailBody, MailItem, MailRefusal, MailType, MailView, Trust,
};
use crate::work::WorkEntryView;
use crate::{kv, team, work};

impl MailType {
    /// Every type, in wire order.
    pub const ALL: [MailType; 5] = [
        MailType::Inform,
        MailType::Ask,
        MailType::Reply,
        MailType::Directive,
        MailType::Notice,
    ];

    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            MailType::Inform => "inform",
            MailType::Ask => "ask",
            MailType::Reply => "reply",
            MailType::Directive => "directive",
            MailType::Notice => "notice",
        }
    }

    /// The type a code names.
    pub fn parse(text: &str) -> Option<MailType> {
        MailType::ALL.into_iter().find(|kind| kind.code() == text)
    }
}

impl Address {
    /// Parse `agent:NAME`, `team:NAME`, `entry:ID`, or a bare agent name.
    pub fn parse(text: &str) -> Result<Address, String> {
        let address = match text.split_once(':') {
            Some(("team", name)) => Address::Team(name.to_string()),
            Some(("entry", id)) => Address::Entry(id.to_string()),
            Some(("agent", name)) => Address::Agent(name.to_string()),
            _ => Address::Agent(text.to_string()),
        };
        address.check()?;
        Ok(address)
    }

    /// Whether the name is well formed.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Address::Agent(name) => access::check_agent_name(name),
            Address::Team(name) if name.is_empty() => Err("a team name is not empty".into()),
            Address::Team(name) if name.len() > crate::limits::NAME_BYTES_MAX => Err(format!(
                "a team name has at most {} bytes",
                crate::limits::NAME_BYTES_MAX
            )),
            Address::Team(_) => Ok(()),
            Address::Entry(id) => work::check_id(id),
        }
    }

    /// `agent:NAME`, `team:NAME` or `entry:ID`.
    pub fn code(&self) -> String {
        match self {
            Address::Agent(name) => format!("agent:{name}"),
            Address::Team(name) => format!("team:{name}"),
            Address::Entry(id) => format!("entry:{id}"),
        }
    }

    /// The ring point of the mailbox: the agent's identity record's, the team's, or the
    /// entry's lineage's.
    pub fn point(&self) -> u64 {
        match self {
            Address::Agent(name) => crate::route::kv_point(&access::agent_key(name)),
            Address::Team(name) => crate::route::team_point(name),
            Address::Entry(id) => crate::route::work_point(work::root_of(id)),
        }
    }
}

impl Trust {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            Trust::Untrusted => "untrusted",
            Trust::Authority => "authority",
            Trust::Server => "server",
        }
    }

    /// The trust a code names.
    pub fn parse(text: &str) -> Option<Trust> {
        [Trust::Untrusted, Trust::Authority, Trust::Server]
            .into_iter()
            .find(|trust| trust.code() == text)
    }
}

/// The rule set's screen combined with the external validator's answer: the stricter
/// verdict wins; an unavailable validator leaves the rule set's verdict and says so (on a
/// server that fails open), or quarantines the message (on one that fails closed).
pub fn combine(mut screen: Screen, external: Option<&ExternalScreen>) -> Screen {
    match external {
        None => {}
        Some(ExternalScreen::Verdict { verdict, findings }) => {
            screen.verdict = screen.verdict.max(*verdict);
            for detail in findings {
                screen.findings.push(Finding {
                    kind: FindingKind::External,
                    detail: detail.clone(),
                });
            }
        }
        Some(ExternalScreen::Unavailable { reason }) => screen.findings.push(Finding {
            kind: FindingKind::ExternalUnavailable,
            detail: reason.clone(),
        }),
        Some(ExternalScreen::UnavailableClosed { reason }) => {
            screen.verdict = screen.verdict.max(Verdict::Quarantined);
            screen.findings.push(Finding {
                kind: FindingKind::ExternalUnavailable,
                detail: reason.clone(),
            });
        }
    }
    screen
}

impl MailRefusal {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            MailRefusal::NotAuthorized { .. } => "not_authorized",
            MailRefusal::MailboxFull { .. } => "mailbox_full",
            MailRefusal::UnknownRecipient { .. } => "unknown_recipient",
            MailRefusal::NotReader { .. } => "not_reader",
            MailRefusal::UnknownMessage { .. } => "unknown_message",
            MailRefusal::SenderQuota { .. } => "sender_quota",
            MailRefusal::GrantsFull { .. } => "grants_full",
        }
    }
}

impl std::fmt::Display for MailRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MailRefusal::NotAuthorized {
                caller,
                address,
                action,
            } => write!(
                f,
                "{caller} is not an authority of {address} (its parent, supervisor, lineage \
                 owner, the operator or a grantee) and may not {action}"
            ),
            MailRefusal::MailboxFull {
                address,
                pending,
                max,
            } => write!(
                f,
                "mailbox {address} holds {pending} messages, the limit is {max}"
            ),
            MailRefusal::UnknownRecipient { address } => write!(
                f,
                "no mailbox {address}: no such agent (or it was revoked), team or live entry"
            ),
            MailRefusal::NotReader { caller, address } => {
                write!(f, "{caller} may not read mailbox {address}")
            }
            MailRefusal::UnknownMessage { id } => write!(f, "no message {id} waits there"),
            MailRefusal::SenderQuota {
                address,
                sender,
                max,
            } => write!(
                f,
                "{sender} already has {max} messages waiting in {address}, the limit per sender"
            ),
            MailRefusal::GrantsFull { address, max } => {
                write!(f, "mailbox {address} already grants {max} senders")
            }
        }
    }
}

impl MailView {
    /// Kept apart, not delivered into a run.
    pub fn quarantined(&self) -> bool {
        self.screen.verdict == Verdict::Quarantined && self.released_by.is_none()
    }
}

#[derive(Default, Serialize, Deserialize)]
struct Head {
    /// Sequence of the next message.
    next_seq: u64,
    /// Messages waiting (not acknowledged, not dropped).
    pending: u64,
    /// Senders the recipient's authority allowed to direct it.
    grants: Vec<String>,
    /// Messages waiting per sender, by name (none at zero).
    senders: Vec<(String, u64)>,
}

impl Head {
    fn waiting_from(&self, sender: &str) -> u64 {
        self.senders
            .iter()
            .find(|(name, _)| name == sender)
            .map_or(0, |(_, n)| *n)
    }

    /// One more (`up`) or one fewer message of `sender` waiting.
    fn count(&mut self, sender: &str, up: bool) {
        match self
            .senders
            .binary_search_by(|(name, _)| name.as_str().cmp(sender))
        {
            Ok(i) if up => self.senders[i].1 += 1,
            Ok(i) if self.senders[i].1 <= 1 => drop(self.senders.remove(i)),
            Ok(i) => self.senders[i].1 -= 1,
            Err(i) if up => self.senders.insert(i, (sender.to_string(), 1)),
            Err(_) => {}
        }
        match up {
            true => self.pending += 1,
            false => self.pending = self.pending.saturating_sub(1),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Stored {
    from: String,
    kind: MailType,
    body: MailBody,
    trust: Trust,
    screen: Screen,
    at_ms: u64,
    released_by: Option<String>,
}

fn head_key(address: &Address) -> Vec<u8> {
    keys::named(MBOX_HEAD, &address.code())
}

pub(crate) fn message_key(address: &Address, seq: u64) -> Vec<u8> {
    let mut key = keys::named(MBOX_MSG, &address.code());
    keys::push_u64(&mut key, seq);
    key
}

fn load_head(txn: &impl Txn, address: &Address) -> Head {
    txn.get(&head_key(address)).map_or_else(
        || Head {
            next_seq: 1,
            ..Head::default()
        },
        |bytes| decode(&bytes),
    )
}

/// The mailbox's owner as this cell knows it.
enum Recipient {
    Agent { parent: Option<String> },
    Team { supervisor: String },
    Entry(WorkEntryView),
}

fn recipient(txn: &impl Txn, now_ms: u64, address: &Address) -> Result<Recipient, MailRefusal> {
    let found = match address {
        Address::Agent(name) => kv::get(txn, &access::agent_key(name))
            .filter(|record| !access::is_revoked(&record.value))
            .map(|record| Recipient::Agent {
                parent: access::enrolled_by(&record.value).map(str::to_string),
            }),
        Address::Team(name) => team::load(txn, name)
            .filter(|record| !record.dissolving)
            .map(|record| Recipient::Team {
                supervisor: record.supervisor,
            }),
        Address::Entry(id) => work::live_entry(txn, now_ms, id).map(Recipient::Entry),
    };
    found.ok_or_else(|| MailRefusal::UnknownRecipient {
        address: address.code(),
    })
}

/// Whether `caller` is the recipient's own authority (not a grantee).
fn authority(txn: &impl Txn, caller: &Caller, recipient: &Recipient) -> bool {
    let agent = match caller {
        Caller::Operator | Caller::Server => return true,
        Caller::Anonymous => return false,
        Caller::Agent(agent) => agent,
    };
    match recipient {
        Recipient::Agent { parent } => parent.as_deref() == Some(agent.as_str()),
        Recipient::Team { supervisor } => supervisor == agent,
        Recipient::Entry(entry) => work::steers(txn, caller, entry),
    }
}

fn not_authorized(caller: &Caller, address: &Address, action: &str) -> Outcome {
    Outcome::MailRefused {
        refusal: MailRefusal::NotAuthorized {
            caller: caller.name().to_string(),
            address: address.code(),
            action: action.to_string(),
        },
    }
}

fn refused(refusal: MailRefusal) -> Outcome {
    Outcome::MailRefused { refusal }
}

/// One message to deliver.
pub(crate) struct Send<'a> {
    /// The mailbox.
    pub(crate) to: &'a Address,
    /// Its type.
    pub(crate) kind: MailType,
    /// What it says.
    pub(crate) body: &'a MailBody,
    /// The external validator's answer, when the server has one configured.
    pub(crate) external: Option<&'a ExternalScreen>,
}

/// Deliver a message from `caller` (see the module doc for who may send what).
pub(crate) fn send(txn: &mut impl Txn, stamp: Stamp, caller: &Caller, send: &Send<'_>) -> Outcome {
    let to = send.to;
    let owner = match recipient(txn, stamp.time_ms, to) {
        Ok(owner) => owner,
        Err(refusal) => return refused(refusal),
    };
    let mut head = load_head(txn, to);
    let trust = match send.kind {
        MailType::Directive => {
            let granted = caller
                .agent()
                .is_some_and(|agent| head.grants.iter().any(|g| g == agent));
            if !granted && !authority(txn, caller, &owner) {
                return not_authorized(caller, to, "send it a directive");
            }
            Trust::Authority
        }
        MailType::Notice => Trust::Server,
        MailType::Inform | MailType::Ask | MailType::Reply => Trust::Untrusted,
    };
    if head.pending >= MAIL_DEPTH_MAX {
        return refused(MailRefusal::MailboxFull {
            address: to.code(),
            pending: head.pending,
            max: MAIL_DEPTH_MAX,
        });
    }
    if *caller != Caller::Server && head.waiting_from(caller.name()) >= MAIL_SENDER_PENDING_MAX {
        return refused(MailRefusal::SenderQuota {
            address: to.code(),
            sender: caller.name().to_string(),
            max: MAIL_SENDER_PENDING_MAX,
        });
    }
    let seq = head.next_seq;
    let stored = Stored {
        from: caller.name().to_string(),
        kind: send.kind,
        body: send.body.clone(),
        trust,
        screen: combine(
            screen::screen(&send.body.text, send.body.payload.as_deref()),
            send.external,
        ),
        at_ms: stamp.time_ms,
        released_by: None,
    };
    txn.put(&message_key(to, seq), &encode(&stored));
    head.next_seq += 1;
    head.count(caller.name(), true);
    txn.put(&head_key(to), &encode(&head));
    Outcome::MailDelivered {
        id: message_id(to, seq),
        seq,
        trust,
    }
}

/// Send each of `sends` to `to` in order, each delivered or refused on its own.
pub(crate) fn send_many(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &Caller,
    to: &Address,
    sends: &[MailItem],
) -> Outcome {
    let outcomes = sends
        .iter()
        .map(|item| {
            let one = Send {
                to,
                kind: item.kind,
                body: &item.body,
                external: item.external.as_ref(),
            };
            send(txn, stamp, caller, &one)
        })
        .collect();
    Outcome::MailSentMany { outcomes }
}

/// Whether a mail command is well formed: names, sizes, a JSON payload, a reply's
/// `in_reply_to`.
pub(crate) fn check(command: &Command) -> Result<(), String> {
    match command {
        Command::MailSendMany { to, sends } => {
            to.check()?;
            if sends.is_empty() || sends.len() > MAIL_SEND_BATCH_MAX {
                let n = sends.len();
                return Err(format!(
                    "a batch sends 1 to {MAIL_SEND_BATCH_MAX} messages, got {n}"
                ));
            }
            for item in sends {
                if let Some(reply_to) = &item.body.reply_to {
                    reply_to.check()?;
                }
                check_body(item.kind, &item.body)?;
            }
            let bytes: usize = sends
                .iter()
                .map(|m| m.body.text.len() + m.body.payload.as_ref().map_or(0, String::len))
                .sum();
            match bytes > KV_TXN_BYTES_MAX {
                true => Err(format!(
                    "the batch has {bytes} bytes, the limit is {KV_TXN_BYTES_MAX}"
                )),
                false => Ok(()),
            }
        }
        Command::MailSend { to, kind, body, .. } => {
            to.check()?;
            if let Some(reply_to) = &body.reply_to {
                reply_to.check()?;
            }
            check_body(*kind, body)
        }
        Command::MailAck { address, .. } | Command::MailRelease { address, .. } => address.check(),
        Command::MailTake {
            address,
            max,
            visibility_ms,
            ..
        } => {
            address.check()?;
            crate::mail_take::check(*max, *visibility_ms)
        }
        Command::MailGrant {
            address, sender, ..
        } => {
            address.check()?;
            access::check_agent_name(sender)
        }
        other => unreachable!("{other:?} is not a mail command"),
    }
}

fn check_body(kind: MailType, body: &MailBody) -> Result<(), String> {
    let bounded = |what: &str, bytes: usize, max: usize| match bytes > max {
        true => Err(format!("{what} has {bytes} bytes, the limit is {max}")),
        false => Ok(()),
    };
    bounded("the text", body.text.len(), MAIL_TEXT_BYTES_MAX)?;
    if body.text.is_empty() && body.payload.is_none() {
        return Err("a message has a text or a payload".into());
    }
    if let Some(payload) = &body.payload {
        bounded("the payload", payload.len(), MAIL_PAYLOAD_BYTES_MAX)?;
        serde_json::from_str::<serde::de::IgnoredAny>(payload)
            .map_err(|e| format!("the payload is not JSON: {e}"))?;
    }
    for (what, reference) in [
        ("in_reply_to", &body.in_reply_to),
        ("conversation", &body.conversation),
    ] {
        match reference {
            Some(text) if text.is_empty() => return Err(format!("{what} is empty")),
            Some(text) => bounded(what, text.len(), MAIL_REF_BYTES_MAX)?,
            None => {}
        }
    }
    if let Some(id) = &body.in_reply_to {
        parse_id(id)?;
    }
    if kind == MailType::Reply && body.in_reply_to.is_none() {
        return Err("a reply names the message it answers (in_reply_to)".into());
    }
    Ok(())
}

/// The id of message `seq` of `address`.
pub fn message_id(address: &Address, seq: u64) -> String {
    format!("{}#{seq}", address.code())
}

/// Split a message id into its mailbox and sequence.
pub fn parse_id(id: &str) -> Result<(Address, u64), String> {
    let (address, seq) = id
        .rsplit_once('#')
        .ok_or_else(|| format!("message id {id:?} is not ADDRESS#SEQ"))?;
    let seq = seq
        .parse::<u64>()
        .map_err(|_| format!("message id {id:?} does not end in a sequence number"))?;
    Ok((Address::parse(address)?, seq))
}

/// Whether `caller` may read and drain `address`: the agent itself, a team's members, an
/// entry's owner and its ancestors' owners; the operator and servers.
pub(crate) fn guard_read(
    txn: &impl Txn,
    now_ms: u64,
    caller: &Caller,
    address: &Address,
) -> Result<(), MailRefusal> {
    let reads = match (caller, address) {
        (Caller::Operator | Caller::Server, _) => true,
        (Caller::Anonymous, _) => false,
        (Caller::Agent(agent), Address::Agent(name)) => agent == name,
        (Caller::Agent(agent), Address::Team(name)) => {
            team::load(txn, name).is_some_and(|record| record.admits(agent))
        }
        (Caller::Agent(agent), Address::Entry(id)) => work::live_entry(txn, now_ms, id)
            .is_some_and(|entry| &entry.owner == agent || work::steers(txn, caller, &entry)),
    };
    match reads {
        true => Ok(()),
        false => Err(MailRefusal::NotReader {
            caller: caller.name().to_string(),
            address: address.code(),
        }),
    }
}

/// The reader took everything through `through_seq`: remove those messages, except
/// quarantined ones (they wait for the recipient's authority).
pub(crate) fn ack(
    txn: &mut impl Txn,
    now_ms: u64,
    caller: &Caller,
    address: &Address,
    through_seq: u64,
) -> Outcome {
    if let Err(refusal) = guard_read(txn, now_ms, caller, address) {
        return refused(refusal);
    }
    Outcome::MailAcked {
        address: address.code(),
        removed: remove_through(txn, address, through_seq),
    }
}

/// Remove the messages of `address` through `through_seq`, except quarantined ones (they
/// wait for the recipient's authority); how many went.
pub(crate) fn remove_through(txn: &mut impl Txn, address: &Address, through_seq: u64) -> u32 {
    let start = message_key(address, 1);
    let end = message_key(address, through_seq.saturating_add(1));
    let mut removed = 0u32;
    let mut head = load_head(txn, address);
    for (key, value) in txn.scan(&start, &end, LIST_ROWS_MAX) {
        let stored: Stored = decode(&value);
        if stored.screen.verdict == Verdict::Quarantined && stored.released_by.is_none() {
            continue;
        }
        txn.delete(&key);
        head.count(&stored.from, false);
        removed += 1;
    }
    if removed > 0 {
        txn.put(&head_key(address), &encode(&head));
    }
    removed
}

/// The recipient's authority allows (or stops) `sender` directing it.
pub(crate) fn grant(
    txn: &mut impl Txn,
    now_ms: u64,
    caller: &Caller,
    address: &Address,
    (sender, allow): (&str, bool),
) -> Outcome {
    let owner = match recipient(txn, now_ms, address) {
        Ok(owner) => owner,
        Err(refusal) => return refused(refusal),
    };
    if !authority(txn, caller, &owner) {
        return not_authorized(caller, address, "grant directives");
    }
    let mut head = load_head(txn, address);
    let present = head.grants.iter().any(|g| g == sender);
    match (allow, present) {
        (true, false) if head.grants.len() >= MAIL_GRANTS_MAX => {
            return refused(MailRefusal::GrantsFull {
                address: address.code(),
                max: MAIL_GRANTS_MAX,
            });
        }
        (true, false) => head.grants.push(sender.to_string()),
        (false, true) => head.grants.retain(|g| g != sender),
        _ => {}
    }
    txn.put(&head_key(address), &encode(&head));
    Outcome::MailGranted {
        address: address.code(),
        sender: sender.to_string(),
        allow,
    }
}

/// The recipient's authority releases a quarantined message into the mailbox
/// (`deliver`), or drops it; the recipient itself (whoever reads the mailbox) may drop
/// one too, so quarantined mail never fills a mailbox its reader cannot empty.
pub(crate) fn release(
    txn: &mut impl Txn,
    now_ms: u64,
    caller: &Caller,
    address: &Address,
    (seq, deliver): (u64, bool),
) -> Outcome {
    let owner = match recipient(txn, now_ms, address) {
        Ok(owner) => owner,
        Err(refusal) => return refused(refusal),
    };
    let reader = guard_read(txn, now_ms, caller, address).is_ok();
    if !authority(txn, caller, &owner) && (deliver || !reader) {
        return not_authorized(caller, address, "release quarantined mail");
    }
    let key = message_key(address, seq);
    let id = message_id(address, seq);
    let Some(mut stored) = txn.get(&key).map(|bytes| decode::<Stored>(&bytes)) else {
        return refused(MailRefusal::UnknownMessage { id });
    };
    if stored.screen.verdict != Verdict::Quarantined || stored.released_by.is_some() {
        return refused(MailRefusal::UnknownMessage { id });
    }
    if deliver {
        stored.released_by = Some(caller.name().to_string());
        txn.put(&key, &encode(&stored));
    } else {
        txn.delete(&key);
        let mut head = load_head(txn, address);
        head.count(&stored.from, false);
        txn.put(&head_key(address), &encode(&head));
    }
    Outcome::MailReleased {
        id,
        delivered: deliver,
    }
}

/// Messages of `address` after `after_seq`, in order: the deliverable ones, or only the
/// quarantined ones.
pub(crate) fn list(
    txn: &impl Txn,
    address: &Address,
    after_seq: u64,
    limit: usize,
    quarantined: bool,
) -> Vec<MailView> {
    let start = message_key(address, after_seq.saturating_add(1));
    let end = keys::prefix_end(&keys::named(MBOX_MSG, &address.code()));
    let mut out = Vec::new();
    let mut from = start;
    while out.len() < limit {
        let rows = txn.scan(&from, &end, limit.min(LIST_ROWS_MAX));
        let Some((last, _)) = rows.last() else { break };
        from = after(last);
        let full = rows.len() == limit.min(LIST_ROWS_MAX);
        for (key, value) in rows {
            let view = view(address, &key, decode(&value));
            if view.quarantined() == quarantined && out.len() < limit {
                out.push(view);
            }
        }
        if !full {
            break;
        }
    }
    out
}

/// The message a stored row holds.
pub(crate) fn view_of(address: &Address, key: &[u8], value: &[u8]) -> MailView {
    view(address, key, decode(value))
}

fn view(address: &Address, key: &[u8], stored: Stored) -> MailView {
    let seq_bytes: [u8; 8] = key[key.len() - 8..].try_into().expect("seq is a u64");
    let seq = u64::from_be_bytes(seq_bytes);
    MailView {
        id: message_id(address, seq),
        seq,
        to: address.code(),
        from: stored.from,
        kind: stored.kind,
        body: stored.body,
        trust: stored.trust,
        screen: stored.screen,
        at_ms: stored.at_ms,
        released_by: stored.released_by,
    }
}

/// The ring point of a stored mail row (head or message).
pub(crate) fn row_point(key: &[u8]) -> Option<u64> {
    let name = keys::first_name(key)?;
    Address::parse(&name).ok().map(|address| address.point())
}

/// Delete up to `budget` rows of team `team`'s mailbox; returns the rows deleted and
/// whether none is left.
pub(crate) fn purge_team(txn: &mut impl Txn, team: &str, budget: usize) -> (u32, bool) {
    let address = Address::Team(team.to_string());
    let start = keys::named(MBOX_MSG, &address.code());
    let rows = txn.scan(&start, &keys::prefix_end(&start), budget);
    let mut removed = rows.len();
    for (key, _) in rows {
        txn.delete(&key);
    }
    let messages_left = !txn.scan(&start, &keys::prefix_end(&start), 1).is_empty();
    if !messages_left && removed < budget && txn.get(&head_key(&address)).is_some() {
        txn.delete(&head_key(&address));
        removed += 1;
    }
    crate::mail_take::forget(txn, &address);
    let done = !messages_left && txn.get(&head_key(&address)).is_none();
    (u32::try_from(removed).expect("budget fits u32"), done)
}

/// Delete entry `id`'s mailbox: the entry is gone (revoked or lapsed), so mail to it is
/// refused `unknown_recipient` from now on. Bounded: a mailbox never holds more than
/// `MAIL_DEPTH_MAX` messages.
pub(crate) fn purge_entry(txn: &mut impl Txn, id: &str) {
    let address = Address::Entry(id.to_string());
    let start = keys::named(MBOX_MSG, &address.code());
    let limit = usize::try_from(MAIL_DEPTH_MAX).expect("depth fits usize") + 1;
    for (key, _) in txn.scan(&start, &keys::prefix_end(&start), limit) {
        txn.delete(&key);
    }
    txn.delete(&head_key(&address));
    crate::mail_take::forget(txn, &address);
}

/// Mailboxes with messages waiting, in address order: (address, messages waiting), from
/// at most `limit` mailbox heads.
pub(crate) fn depths(txn: &impl Txn, limit: usize) -> Vec<(String, u64)> {
    let start = [MBOX_HEAD];
    txn.scan(&start, &keys::prefix_end(&start), limit)
        .into_iter()
        .filter_map(|(key, value)| {
            let head: Head = decode(&value);
            (head.pending > 0).then(|| (keys::parse_named(&key), head.pending))
        })
        .collect()
}

/// The first key after `key` in scan order.
pub(crate) fn after(key: &[u8]) -> Vec<u8> {
    let mut next = key.to_vec();
    next.push(0);
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mail rows move with their mailbox's range: the point a range move reads off a row
    /// is the point the mailbox routes by.
    #[test]
    fn mail_rows_sit_at_their_mailboxs_point() {
        let addresses = [
            Address::Agent("bob".into()),
            Address::Team("web".into()),
            Address::Entry("w0123456789abcdef.2.1".into()),
        ];
        for address in addresses {
            let point = Some(address.point());
            assert_eq!(row_point(&head_key(&address)), point, "{address:?}");
            assert_eq!(row_point(&message_key(&address, 7)), point, "{address:?}");
        }
        let agent = Address::Agent("bob".into()).point();
        assert_eq!(agent, crate::route::kv_point(&access::agent_key("bob")));
        let entry = Address::Entry("w0123456789abcdef.2.1".into()).point();
        assert_eq!(entry, crate::route::work_point("w0123456789abcdef"));
    }
}
