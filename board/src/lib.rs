//! # whip-board: the coordination state machine
//!
//! Owns the meaning of every coordination command: CAS keys, leases, counters, ledgers,
//! election leases, schedule firings, agent, team and entry mail with its authority rules
//! and screen ([`mail`], [`screen`]), teams with their task boards and notices (also the
//! reserved boards of WhippleScript trackers, [`TRACKER_TEAM_PREFIX`]), the replicated
//! halves of cross-cell handoff channels (outboxes, chain heads, alarms) and the one
//! [`chain`] check of their envelopes (the receiving cell's apply and the fabric's envelope
//! check share it), and range ownership, and the live work registry with its admission
//! limits, quotas of the fabric ceiling and audit ledger ([`work`]), and the voting plane:
//! team roles, proposals, append-only ballots with eligibility decided in apply, and the
//! tally at the close ([`vote`], [`tally`]).
//! [`apply`] is a pure function of the current bytes, a [`Stamp`] and a [`Request`];
//! [`query`] reads.
//!
//! Layout, in layers (a tidy test holds that no import cycle is wider than three files):
//! - each plane's data (its refusals, views and the fields its commands carry) is in
//!   `vocab/`, which names no plane; [`types`] (`Command`, `Outcome`) and [`query`] compose
//!   that vocabulary;
//! - the names every plane asks: [`access`] (who acts, whose a key is), [`route`] (the
//!   point of each name), `range_row` (what this cell serves), `team` (records and
//!   membership), `deadline` (the due-time index);
//! - the planes' logic, one module each, re-exporting its vocabulary;
//! - what looks into every plane sits on top: [`admit`] (what a client may touch at all),
//!   [`point_of`] (where each command and read runs), `range` (moving rows of every
//!   family), `team_purge` (what goes with a team or an agent), and `apply` itself.
//!
//! Invariants: replaying the same log over the same starting bytes yields byte-identical
//! state; a lease grants a slot only while it has fewer live holders than its slots (a
//! lowered `slots` keeps the holders it has until they release or expire, and grants
//! nothing until they are below it); an election group never has
//! more than one live leader; a schedule fires each due time at most once, and never an
//! older one after a later one; a counter never passes its cap within a period; a ledger
//! partition has no gaps; a delivery of a task has exactly one claimant, and only the live
//! claim's fence completes it; a mailbox has no gaps; a proposal closes once and only
//! ballots of its electorate are appended; fences only grow. Every stored value starts with
//! a version byte, and every stored enum writes its variants' pinned codes, never their
//! places in the declaration (`codes`, checked against golden bytes).
//!
//! Must never: read a clock, draw randomness, spawn threads, touch files, sockets, Raft,
//! sled, redb or tokio. Everything it knows comes in through the stamp and the command.
//!
//! ```
//! use whip_board::{Command, MemTxn, Outcome, Request, Stamp, apply};
//! let mut txn = MemTxn::default();
//! let put = Command::KvPut { key: b"a".to_vec(), value: b"x".to_vec(), expect_version: Some(0) };
//! let request = Request::new(Some("client-1/1".into()), put);
//! let stamp = Stamp { index: 1, position: 0, time_ms: 1_000 };
//! let written = apply(&mut txn, stamp, &request);
//! assert_eq!(written, Outcome::KvWritten { version: stamp.fence(), fence: stamp.fence() });
//! // A retry with the same idempotency key returns the recorded outcome.
//! let later = Stamp { index: 2, position: 0, time_ms: 2_000 };
//! assert_eq!(apply(&mut txn, later, &request), written);
//! ```
#![deny(missing_docs, unreachable_pub)]

pub mod access;
pub mod admit;
mod blackboard;
pub mod chain;
mod codec;
mod codes;
mod counter;
mod deadline;
mod election;
pub mod ephemeral;
pub mod gauges;
#[cfg(test)]
mod golden;
mod handoff;
mod idempotency;
pub mod instance;
mod keys;
mod kv;
pub mod kv_txn;
mod lease;
mod ledger;
pub mod limits;
pub mod mail;
pub mod mail_take;
mod mailbox;
pub mod next;
pub mod path_glob;
pub mod point_of;
pub mod query;
mod range;
mod range_row;
mod range_track;
pub mod refusal;
pub mod register;
pub mod reservation;
pub mod route;
#[cfg(test)]
mod sample;
mod schedule;
pub mod screen;
pub mod tally;
mod taskboard;
mod team;
mod team_purge;
#[cfg(test)]
mod testkit;
mod time_text;
pub mod txn;
pub mod types;
mod validate;
mod vocab;
pub mod vote;
pub mod watch;
pub mod work;

pub use chain::HandoffRefusal;
pub use idempotency::reused_reason as key_reused_reason;
pub use kv::restore_rewrite;
pub use next::{Applied, FollowUp, Next, Then};
pub use query::{
    BoardStatsView, KvPage, MailboxMessage, MessageKind, Query, QueryResult, RangeView, TeamView,
};
pub use range::RangeRefusal;
pub use refusal::RefusalCode;
pub use register::AgentRefusal;
pub use schedule::{ScheduleSpec, latest_due};
pub use taskboard::{
    FABRIC_QUEUE_PREFIX, RESERVED_TEAM_PREFIX, TRACKER_TEAM_PREFIX, fabric_queue_team,
    has_fabric_queue, is_reserved_team, is_tracker_team,
};
pub use time_text::time_text;
pub use txn::{MemTxn, Txn};
pub use types::{
    BoardRefusal, BoardSettings, Claimed, Command, Completion, ElectionLeader, Failure,
    LeaseHolder, Outcome, Request, Reset, ResourceId, Stamp, TaskState, TaskView, Tier,
};
pub use validate::{handoff_bytes, validate};

use deadline::Item;
use limits::{KV_EXPIRIES_PER_TICK_MAX, LIST_ROWS_MAX, TICK_WORK_MAX, VALUE_BYTES_MAX};
use types::Family;

/// Apply one request at `stamp`. Records the outcome under the request's idempotency key;
/// a repeat within the window returns the recorded outcome without applying again.
///
/// An invalid request (see [`validate`]) changes nothing and is not recorded: validation
/// depends only on the request, so a retry gets the same `Invalid` again.
///
/// In a fabric (the cell owns ranges) a keyed command runs only when its point lies in a
/// range this cell serves at the request's epoch; otherwise it answers `WrongRange` and
/// records nothing. Fences include the cell's offset (see [`range`]), so they keep growing
/// when a range arrives from another cell.
///
/// The follow-ups the command obliges ([`next`]) are written to this cell's outbox in the
/// same apply and returned beside the outcome; a replay returns none (they were decided
/// the first time).
///
/// While a move copies a range this cell serves, every write goes through
/// [`range_track::Tracked`], which records the keys of that range it changes.
pub fn apply(txn: &mut impl Txn, stamp: Stamp, request: &Request) -> Applied {
    apply_recorded(&mut range_track::Tracked::new(txn), stamp, request)
}

fn apply_recorded(txn: &mut impl Txn, stamp: Stamp, request: &Request) -> Applied {
    let valid = request
        .idempotency_key
        .as_deref()
        .map_or(Ok(()), validate::idempotency_key);
    // Keys are scoped by the proven caller: nobody can take another caller's key first.
    let scoped = request
        .idempotency_key
        .as_deref()
        .map(|key| idempotency::scoped(&request.caller, key));
    let key = scoped.as_deref();
    if let Err(reason) = valid.and_then(|()| validate(&request.command, VALUE_BYTES_MAX)) {
        return Applied::alone(Outcome::Invalid { reason });
    }
    if let Err(refusal) = admit::admit(&request.caller, &request.command) {
        return Applied::alone(Outcome::Forbidden { refusal });
    }
    if let Err(refusal) = range::admit_meta(txn, &request.caller, &request.command) {
        return Applied::alone(Outcome::Forbidden { refusal });
    }
    let point = match point_of::command(&request.command) {
        Ok(point) => point,
        // A standalone cell runs transactions over any keys.
        Err(_) if range::serving(txn).is_none() => None,
        Err(reason) => return Applied::alone(Outcome::Invalid { reason }),
    };
    let digest = key.map(|_| idempotency::digest(request));
    if let (Some(key), Some(digest)) = (key, &digest)
        && let Some(outcome) = idempotency::recorded(txn, stamp.time_ms, key, digest)
    {
        return Applied::alone(outcome);
    }
    if let Some(point) = point
        && let Err(refusal) = range::admit(txn, point, request.epoch)
    {
        return Applied::alone(refusal);
    }
    if let Err(refusal) = blackboard::guard(txn, &request.caller, &request.command) {
        return Applied::alone(refusal);
    }
    let stamp = range::shift(txn, stamp);
    let outcome = apply_command(txn, stamp, request);
    let next = next::decide(txn, stamp, request, &outcome);
    if let (Some(key), Some(digest)) = (key, digest) {
        idempotency::record(txn, stamp.time_ms, key, digest, &outcome, point);
    }
    Applied { outcome, next }
}

fn apply_command(txn: &mut impl Txn, stamp: Stamp, request: &Request) -> Outcome {
    let command = &request.command;
    match command.family() {
        Family::Work => apply_work(txn, stamp, &request.caller, command),
        Family::Primitive => apply_primitive(txn, stamp, &request.caller, command),
        Family::Tick => tick(txn, stamp),
        Family::Range => apply_range(txn, stamp, command),
        Family::Coordination => apply_coordination(txn, stamp, command),
        Family::Board => {
            admit_vouched(txn, request);
            apply_board(txn, stamp, command)
        }
        Family::Handoff => apply_handoff(txn, stamp.time_ms, command),
        Family::Mail => apply_mail(txn, stamp, &request.caller, command),
        Family::Vote => apply_vote(txn, stamp, &request.caller, command),
        Family::Paths => apply_paths(txn, stamp, &request.caller, command),
        Family::Engine => match command {
            Command::EngineTxn {
                compares,
                puts,
                deletes,
            } => instance::apply_txn(txn, stamp, &request.caller, (compares, puts, deletes)),
            other => unreachable!("{other:?} is not an engine command"),
        },
    }
}

/// Path reservations: the caller is the holder ([`reservation`]).
fn apply_paths(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &access::Caller,
    command: &Command,
) -> Outcome {
    match command {
        Command::PathsReserve {
            repo,
            paths,
            exclusive,
            ttl_ms,
            fence,
        } => {
            let request = reservation::Reserve {
                repo,
                paths,
                exclusive: *exclusive,
                ttl_ms: *ttl_ms,
                fence: *fence,
            };
            reservation::reserve(txn, stamp, caller, &request)
        }
        Command::PathsRelease { repo, paths, fence } => {
            reservation::release(txn, stamp, caller, (repo, paths, *fence))
        }
        other => unreachable!("{other:?} is not a reservation command"),
    }
}

/// Roles, proposals and ballots: the caller is the supervisor, opener or voter
/// ([`vote`]).
fn apply_vote(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &access::Caller,
    command: &Command,
) -> Outcome {
    match command {
        Command::TeamRole { team, member, role } => {
            vote::set_role(txn, caller, team, (member, *role))
        }
        Command::VoteOpen { team, rules } => vote::open(txn, stamp, caller, team, rules),
        Command::VoteCast { proposal, choice } => vote::cast(txn, stamp, caller, proposal, choice),
        Command::VoteClose { proposal } => vote::close(txn, stamp, caller, proposal),
        other => unreachable!("{other:?} is not a vote command"),
    }
}

/// Agent mail: the caller is the sender, reader or authority ([`mail`]).
fn apply_mail(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &access::Caller,
    command: &Command,
) -> Outcome {
    let now_ms = stamp.time_ms;
    match command {
        Command::MailSend {
            to,
            kind,
            body,
            external,
        } => {
            let send = mail::Send {
                to,
                kind: *kind,
                body,
                external: external.as_ref(),
            };
            mail::send(txn, stamp, caller, &send)
        }
        Command::MailSendMany { to, sends } => mail::send_many(txn, stamp, caller, to, sends),
        Command::MailAck {
            address,
            through_seq,
        } => mail::ack(txn, now_ms, caller, address, *through_seq),
        Command::MailTake {
            address,
            ack_through,
            max,
            visibility_ms,
        } => {
            let take = mail_take::Take {
                ack_through: *ack_through,
                max: *max,
                visibility_ms: *visibility_ms,
            };
            mail_take::take(txn, now_ms, caller, address, &take)
        }
        Command::MailGrant {
            address,
            sender,
            allow,
        } => mail::grant(txn, now_ms, caller, address, (sender, *allow)),
        Command::MailRelease {
            address,
            seq,
            deliver,
        } => mail::release(txn, now_ms, caller, address, (*seq, *deliver)),
        other => unreachable!("{other:?} is not a mail command"),
    }
}

/// CAS keys, leases, counters and ledgers.
fn apply_primitive(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &access::Caller,
    command: &Command,
) -> Outcome {
    let now_ms = stamp.time_ms;
    match command {
        command if command.is_kv() => apply_kv(txn, stamp, command),
        Command::LeaseAcquire {
            lease,
            holder,
            slots,
            ttl_ms,
            wait_ms,
        } => {
            let request = lease::Acquire {
                lease,
                holder,
                slots: *slots,
                ttl_ms: *ttl_ms,
                wait_ms: *wait_ms,
            };
            lease::acquire(txn, stamp, &request)
        }
        Command::LeaseRenew {
            lease,
            holder,
            ttl_ms,
        } => lease::renew(txn, stamp, lease, holder, *ttl_ms),
        Command::LeaseRelease { lease, holder } => lease::release(txn, stamp, lease, holder),
        Command::LeaseReleaseAll { holder } => lease::release_all(txn, stamp, caller, holder),
        Command::CounterConsume {
            counter,
            amount,
            cap,
            reset,
            timezone,
        } => {
            let tz = counter::zone(timezone).expect("validated time zone");
            let request = counter::Consume {
                counter,
                amount: *amount,
                cap: *cap,
                reset: *reset,
                tz,
            };
            counter::consume(txn, now_ms, &request)
        }
        Command::LedgerAppend {
            ledger,
            entry,
            appended_by,
            retain_ms,
        } => {
            let request = ledger::Append {
                ledger,
                entry,
                appended_by,
                retain_ms: *retain_ms,
            };
            ledger::append(txn, now_ms, &request)
        }
        other => unreachable!("{other:?} is not a primitive"),
    }
}

/// CAS keys (split from `apply_primitive` to keep each match short).
fn apply_kv(txn: &mut impl Txn, stamp: Stamp, command: &Command) -> Outcome {
    match command {
        Command::KvPut {
            key,
            value,
            expect_version,
        } => kv::put(txn, stamp, key, value, *expect_version),
        Command::KvDelete {
            key,
            expect_version,
        } => kv::delete(txn, stamp, key, *expect_version),
        Command::KvTxn {
            compares,
            puts,
            deletes,
        } => kv::txn(txn, stamp, compares, puts, deletes),
        Command::KvPutAttached {
            key,
            value,
            expect_version,
            attach,
        } => {
            let put = ephemeral::AttachedPut {
                key,
                value,
                expect_version: *expect_version,
                attach,
            };
            ephemeral::put_attached(txn, stamp, &put)
        }
        Command::KvKeepalive { key, ttl_ms } => ephemeral::keepalive(txn, stamp, key, *ttl_ms),
        Command::KvTxnIf {
            compares,
            success,
            failure,
        } => kv_txn::apply(txn, stamp, (compares, success, failure)),
        other => unreachable!("{other:?} is not a CAS command"),
    }
}

/// Range ownership changes of a fabric.
/// A server's claim on a fabric queue vouches for its caller: the router sends one only
/// after the team's own cell found the caller a member and both its tiers empty (one apply
/// there), so the caller is admitted to the queue before the claim.
fn admit_vouched(txn: &mut impl Txn, request: &Request) {
    if let (
        access::Caller::Server,
        Command::BoardClaim { team, caller, .. } | Command::BoardClaimMany { team, caller, .. },
    ) = (&request.caller, &request.command)
        && team.starts_with(FABRIC_QUEUE_PREFIX)
    {
        team::admit(txn, team, caller);
    }
}

/// The work registry and the identities it revokes.
fn apply_work(
    txn: &mut impl Txn,
    stamp: Stamp,
    caller: &access::Caller,
    command: &Command,
) -> Outcome {
    let now_ms = stamp.time_ms;
    match command {
        Command::WorkRegister {
            root,
            parent,
            kind,
            class,
            ttl_ms,
            owner,
            quota_retry,
        } => {
            let request = work::Register {
                quota_retry: *quota_retry,
                root,
                parent: parent.as_deref(),
                kind: *kind,
                class,
                ttl_ms: *ttl_ms,
                owner: owner.as_deref(),
            };
            work::register(txn, stamp, caller, &request)
        }
        Command::WorkRenew { id, ttl_ms } => work::renew(txn, now_ms, caller, id, *ttl_ms),
        Command::WorkSignal { id, signal } => work::signal(txn, now_ms, caller, id, *signal),
        Command::WorkRevoke { id } => work::revoke(txn, now_ms, caller, id),
        Command::WorkScope { id, class, budget } => {
            let change = work::Scope {
                class: class.as_deref(),
                budget: *budget,
            };
            work::scope(txn, now_ms, caller, id, change)
        }
        Command::WorkLimitsSet { update } => work::set_limits(txn, now_ms, caller, update),
        Command::WorkQuotaLend { .. } | Command::WorkQuotaAsk { .. } => lend(txn, stamp, command),
        Command::WorkQuotaFloor { version } => work::floor(txn, *version),
        Command::WorkQuotaAck { cell, version } => work::ack(txn, *cell, *version),
        Command::WorkQuotaInstall { quota, ttl_ms } => work::install(txn, now_ms, *quota, *ttl_ms),
        Command::AgentRevoke { agent, by } => revoke_agent(txn, stamp, agent, by),
        Command::AgentRegister { agent, proof, salt } => {
            let asked = register::Registration { agent, proof, salt };
            register::register(txn, stamp, caller, &asked)
        }
        Command::TeamLeaveAll { agent } => team_purge::leave_all(txn, agent),
        other => unreachable!("{other:?} is not a registry command"),
    }
}

/// Replace `agent`'s identity record with a revoked one when `by` enrolled it.
fn revoke_agent(txn: &mut impl Txn, stamp: Stamp, agent: &str, by: &str) -> Outcome {
    let key = access::agent_key(agent);
    let revoked = match kv::get(txn, &key) {
        Some(entry) if access::is_revoked(&entry.value) => true,
        Some(entry)
            if by == access::OPERATOR_REVOKER || access::enrolled_by(&entry.value) == Some(by) =>
        {
            let record = format!("{}{by}", access::REVOKED_MARK);
            kv::put(txn, stamp, &key, record.as_bytes(), Some(entry.version));
            true
        }
        _ => false,
    };
    Outcome::AgentRevoked {
        agent: agent.to_string(),
        revoked,
    }
}

fn apply_range(txn: &mut impl Txn, stamp: Stamp, command: &Command) -> Outcome {
    match command {
        Command::RangeAssign {
            start,
            last,
            epoch,
            fence_above,
        } => {
            let range = range::assigned(*start, *last, *epoch);
            range::assign(txn, stamp, range, (*fence_above, 0))
        }
        Command::RangeAssignAt {
            start,
            last,
            epoch,
            fence_above,
            time_above_ms,
        } => {
            let range = range::assigned(*start, *last, *epoch);
            range::assign(txn, stamp, range, (*fence_above, *time_above_ms))
        }
        Command::RangeFreeze { start, last, epoch } => {
            range::freeze(txn, stamp, *start, *last, *epoch)
        }
        Command::RangeSplit {
            start,
            last,
            at,
            epoch,
        } => range::split(txn, *start, *last, *at, *epoch),
        Command::RangeImport { rows } => range::import(txn, rows),
        Command::MetaCellMark => range::mark_meta(txn),
        Command::RangeDrop { start, last } => range::drop_rows(txn, *start, *last),
        Command::RangeFreezeTo {
            start,
            last,
            epoch,
            to_cell,
        } => range::freeze_to(txn, stamp, (*start, *last), *epoch, *to_cell),
        Command::RangeTrack { .. }
        | Command::RangeCopied { .. }
        | Command::RangeDrained { .. }
        | Command::RangeClear { .. }
        | Command::RangePatch { .. } => range_track::apply(txn, command),
        Command::RangeFenced { fence, step } => match range::admit_fence(txn, *fence) {
            Err(refused) => refused,
            Ok(()) if is_fenced_step(step) => apply_range(txn, stamp, step),
            Ok(()) => Outcome::Invalid {
                reason: "a fenced range step is a freeze, track, copied, drained, clear, \
                         import, patch, assign, drop or split"
                    .into(),
            },
        },
        other => unreachable!("{other:?} is not a range change"),
    }
}

/// The steps a range change runs under the range-admin lease's fence.
fn is_fenced_step(step: &Command) -> bool {
    matches!(
        step,
        Command::RangeFreezeTo { .. }
            | Command::RangeImport { .. }
            | Command::RangeAssign { .. }
            | Command::RangeAssignAt { .. }
            | Command::RangeDrop { .. }
            | Command::RangeSplit { .. }
            | Command::RangeTrack { .. }
            | Command::RangeCopied { .. }
            | Command::RangeDrained { .. }
            | Command::RangeClear { .. }
            | Command::RangePatch { .. }
    )
}

/// The meta cell lends a cell a quota (`WorkQuotaLend`, or `WorkQuotaAsk` with the cell's
/// live entries).
fn lend(txn: &mut impl Txn, stamp: Stamp, command: &Command) -> Outcome {
    let (cell, ask) = match *command {
        Command::WorkQuotaLend { cell, want, ttl_ms } => {
            let live = 0;
            (cell, work::Ask { want, live, ttl_ms })
        }
        Command::WorkQuotaAsk {
            cell,
            want,
            live,
            ttl_ms,
        } => (cell, work::Ask { want, live, ttl_ms }),
        ref other => unreachable!("{other:?} is not a lend"),
    };
    work::lend(txn, stamp, cell, ask)
}

/// Handoff commands (split from `apply_command` to keep each match short).
/// Apply a batch's items in order, stopping after the first that did not go through.
fn apply_handoff_batch(txn: &mut impl Txn, now_ms: u64, commands: &[Command]) -> Outcome {
    let mut outcomes = Vec::with_capacity(commands.len());
    for item in commands {
        let outcome = apply_handoff(txn, now_ms, item);
        let go_on = matches!(
            outcome,
            Outcome::HandoffQueued { .. }
                | Outcome::HandoffSkipped { .. }
                | Outcome::HandoffAccepted { .. }
                | Outcome::HandoffDuplicate { .. }
        );
        outcomes.push(outcome);
        if !go_on {
            break;
        }
    }
    Outcome::HandoffBatch { outcomes }
}

fn apply_handoff(txn: &mut impl Txn, now_ms: u64, command: &Command) -> Outcome {
    match command {
        Command::HandoffSend {
            to_cell,
            seq,
            prev_hash,
            hash,
            envelope,
            task_id,
            delivery_count,
        } => {
            let send = handoff::Send {
                to_cell: *to_cell,
                seq: *seq,
                prev_hash,
                hash,
                envelope,
                task_id,
                delivery_count: *delivery_count,
            };
            handoff::send(txn, now_ms, &send)
        }
        Command::HandoffLocal {
            task_id,
            delivery_count,
        } => handoff::spill_local(txn, now_ms, task_id, *delivery_count),
        Command::HandoffAck { to_cell, seq } => handoff::ack(txn, *to_cell, *seq),
        Command::HandoffReceive {
            from_cell,
            seq,
            prev_hash,
            hash,
            queue,
            task,
            settings,
            admitted,
        } => {
            let receive = handoff::Receive {
                from_cell: *from_cell,
                seq: *seq,
                prev_hash,
                hash,
                queue,
                task,
                settings: *settings,
                admitted,
            };
            handoff::receive(txn, now_ms, &receive)
        }
        Command::HandoffFailed { task_id, reason } => handoff::failed(txn, now_ms, task_id, reason),
        Command::HandoffReset {
            from_cell,
            seq,
            hash,
        } => handoff::reset(txn, now_ms, *from_cell, *seq, hash),
        Command::HandoffBatch { commands } => apply_handoff_batch(txn, now_ms, commands),
        Command::FollowUpDone { seq } => next::done(txn, *seq),
        other => unreachable!("{other:?} is not a handoff command"),
    }
}

/// Election and schedule commands (split from `apply_command` to keep each match short).
fn apply_coordination(txn: &mut impl Txn, stamp: Stamp, command: &Command) -> Outcome {
    let now_ms = stamp.time_ms;
    match command {
        Command::Campaign {
            group,
            candidate,
            endpoints,
            ttl_ms,
        } => {
            let request = election::Campaign {
                group,
                candidate,
                endpoints,
                ttl_ms: *ttl_ms,
            };
            election::campaign(txn, stamp, &request)
        }
        Command::Proclaim {
            group,
            candidate,
            fence,
            endpoints,
        } => election::proclaim(txn, now_ms, &term(group, candidate, *fence), endpoints),
        Command::Resign {
            group,
            candidate,
            fence,
        } => election::resign(txn, now_ms, &term(group, candidate, *fence)),
        Command::ElectionRenew {
            group,
            candidate,
            fence,
            ttl_ms,
        } => election::renew(txn, now_ms, &term(group, candidate, *fence), *ttl_ms),
        Command::ScheduleFire {
            name,
            spec,
            timezone,
            due_ms,
            claimant,
        } => {
            let request = schedule::Fire {
                name,
                spec,
                timezone,
                due_ms: *due_ms,
                claimant,
            };
            schedule::fire(txn, stamp, &request)
        }
        other => unreachable!("{other:?} is not an election or schedule command"),
    }
}

/// Team and task board commands (split from `apply_command` to keep each match short).
fn apply_board(txn: &mut impl Txn, stamp: Stamp, command: &Command) -> Outcome {
    let now_ms = stamp.time_ms;
    match command {
        Command::TeamCreate {
            team,
            caller,
            parent,
            ancestors,
            settings,
        } => {
            let request = team::Create {
                team,
                caller,
                parent: parent.as_ref(),
                ancestors,
                settings: *settings,
            };
            team::create(txn, &request)
        }
        Command::TeamJoin {
            team,
            caller,
            agent,
        } => team::join(txn, team, caller, agent),
        Command::TeamDissolve { team, caller } => team_purge::dissolve(txn, stamp, team, caller),
        Command::BoardPost { team, caller, body } => {
            taskboard::post(txn, now_ms, team, caller, body)
        }
        Command::BoardClaim {
            team,
            caller,
            worker,
        } => taskboard::claim(txn, stamp, team, caller, worker),
        Command::BoardClaimTask {
            team,
            caller,
            worker,
            task_id,
            claim_ms,
        } => taskboard::claim_task(txn, stamp, team, (caller, worker), task_id, *claim_ms),
        Command::BoardRedrive {
            team,
            caller,
            task_id,
        } => taskboard::redrive(txn, now_ms, team, caller, task_id),
        Command::FabricPurge { queue } => {
            team_purge::purge_queue(txn, stamp, &taskboard::fabric_queue_team(queue))
        }
        Command::BoardPostMany {
            team,
            caller,
            bodies,
        } => taskboard::post_many(txn, now_ms, team, caller, bodies),
        Command::BoardClaimMany { .. } | Command::BoardCompleteAndClaim { .. } => {
            apply_cycle(txn, stamp, command)
        }
        _ => apply_presented(txn, now_ms, command),
    }
}

/// A worker's loop in one apply: complete what it holds and claim what comes next.
fn apply_cycle(txn: &mut impl Txn, stamp: Stamp, command: &Command) -> Outcome {
    match command {
        Command::BoardClaimMany {
            team,
            caller,
            worker,
            completes,
            max,
            claim_ms,
        } => {
            let many = taskboard::Many {
                completes,
                max: *max,
                claim_ms: *claim_ms,
            };
            taskboard::claim_many(txn, stamp, team, (caller, worker), &many)
        }
        Command::BoardCompleteAndClaim {
            team,
            caller,
            task_id,
            fence,
            result,
            worker,
        } => {
            let complete = Command::BoardComplete {
                team: team.clone(),
                caller: caller.clone(),
                task_id: task_id.clone(),
                fence: *fence,
                result: result.clone(),
            };
            match apply_board(txn, stamp, &complete) {
                Outcome::TaskCompleted { .. } => taskboard::claim(txn, stamp, team, caller, worker),
                refused => refused,
            }
        }
        other => unreachable!("{other:?} is not a worker's cycle"),
    }
}

/// Board commands that present a claim: complete, fail, release, extend.
fn apply_presented(txn: &mut impl Txn, now_ms: u64, command: &Command) -> Outcome {
    let (team, caller, task_id, fence) = match command {
        Command::BoardComplete {
            team,
            caller,
            task_id,
            fence,
            ..
        }
        | Command::BoardFail {
            team,
            caller,
            task_id,
            fence,
            ..
        }
        | Command::BoardExtend {
            team,
            caller,
            task_id,
            fence,
            ..
        }
        | Command::BoardRelease {
            team,
            caller,
            task_id,
            fence,
        } => (team, caller, task_id, *fence),
        other => unreachable!("{other:?} is not a board command"),
    };
    let presented = taskboard::Presented {
        team,
        caller,
        task_id,
        fence,
    };
    match command {
        Command::BoardComplete { result, .. } => {
            taskboard::complete(txn, now_ms, &presented, result)
        }
        Command::BoardFail { error, .. } => taskboard::fail(txn, now_ms, &presented, error),
        Command::BoardRelease { .. } => taskboard::release(txn, now_ms, &presented),
        Command::BoardExtend { extend_ms, .. } => {
            taskboard::extend(txn, now_ms, &presented, *extend_ms)
        }
        other => unreachable!("{other:?} does not present a claim"),
    }
}

fn term<'a>(group: &'a str, candidate: &'a str, fence: u64) -> election::Term<'a> {
    election::Term {
        group,
        candidate,
        fence,
    }
}

/// Process due deadlines in deadline order. `processed` counts removed holders, waiters,
/// ledger entries, idempotency records and election leaders, lapsed claims, spilled tasks,
/// pruned task and claim rows and expired client keys, plus stale index entries; the
/// tick stops taking new index entries once it reaches `TICK_WORK_MAX` (settling one lease
/// may go past it), or at the next key expiry once `KV_EXPIRIES_PER_TICK_MAX` keys expired.
fn tick(txn: &mut impl Txn, stamp: Stamp) -> Outcome {
    let now_ms = stamp.time_ms;
    let budget = u32::try_from(TICK_WORK_MAX).expect("tick budget fits u32");
    let mut processed = 0u32;
    let mut kv_expired = 0u32;
    let changeable = range::changeable(txn);
    for (key, item) in deadline::due(txn, now_ms, TICK_WORK_MAX) {
        let kv_full = kv_expired >= KV_EXPIRIES_PER_TICK_MAX;
        if processed >= budget || (kv_full && matches!(item, Item::KvExpiry { .. })) {
            break;
        }
        // Settling an earlier item may already have removed this one.
        if txn.get(&key).is_none() {
            continue;
        }
        // A range frozen for a move (or no longer this cell's) changes nowhere but on its
        // next owner: its export may already hold the row, so a close or an expiry here
        // would be lost, or done twice once the new owner's tick runs it.
        if item
            .point()
            .is_some_and(|point| !range::serves(&changeable, point))
        {
            continue;
        }
        // Drop the entry first: processing a live item re-indexes whatever stays pending,
        // and a stale entry (its item moved or went away) must not stop later ticks.
        txn.delete(&key);
        let removed = match &item {
            Item::Holder { lease, .. } | Item::Waiter { lease, .. } => {
                lease::expire(txn, stamp, lease)
            }
            Item::Ledger { ledger } => ledger::prune(txn, now_ms, ledger, budget - processed),
            Item::Idempotency { key, .. } => idempotency::prune(txn, now_ms, key),
            Item::Election { group } => election::expire(txn, now_ms, group),
            Item::TaskClaim { team, seq, tier } => {
                taskboard::expire_claim(txn, now_ms, (team, *seq, *tier))
            }
            Item::TaskSpill { team, seq } => taskboard::spill(txn, now_ms, team, *seq),
            Item::TaskDone { team, seq, tier } => {
                taskboard::prune(txn, now_ms, (team, *seq, *tier))
            }
            Item::Work { id, .. } => work::expire(txn, now_ms, id),
            Item::VoteClose { team, fence } => vote::close_due(txn, now_ms, team, *fence),
            Item::Reservation { repo, path, holder } => {
                reservation::expire(txn, now_ms, (repo, path, holder))
            }
            Item::KvExpiry { key } => {
                let expired = ephemeral::expire(txn, stamp, key);
                kv_expired += expired;
                expired
            }
        };
        processed += removed.max(1);
    }
    Outcome::Ticked { processed }
}

/// Answer a read at `now_ms`. A list `limit` of 0 means `limits::LIST_ROWS_MAX`; larger
/// limits are capped to it.
pub fn query(txn: &impl Txn, now_ms: u64, query: &Query) -> QueryResult {
    match query {
        Query::KvGet { .. } | Query::KvRange { .. } => query_kv(txn, now_ms, query),
        Query::LeaseList { prefix, limit } => {
            QueryResult::Leases(lease::list(txn, now_ms, prefix, list_cap(*limit)))
        }
        Query::CounterList { prefix, limit } => {
            QueryResult::Counters(counter::list(txn, prefix, list_cap(*limit)))
        }
        Query::LedgerList { .. } => query_ledger(txn, query),
        Query::NextDeadline => QueryResult::NextDeadline(deadline::next(txn)),
        Query::ElectionLeader { .. } | Query::ElectionList { .. } | Query::ScheduleList { .. } => {
            query_coordination(txn, now_ms, query)
        }
        Query::Routed { epoch, query } => routed(txn, now_ms, *epoch, query),
        Query::Ranges
        | Query::RangeExport { .. }
        | Query::RangeChanges { .. }
        | Query::RangeCopy { .. }
        | Query::RangePending { .. }
        | Query::FollowUps { .. } => query_cell(txn, query),
        Query::Team { .. }
        | Query::BoardTask { .. }
        | Query::BoardList { .. }
        | Query::BoardStats { .. }
        | Query::BoardDeadLetters { .. }
        | Query::BoardCellReady { .. }
        | Query::Mailbox { .. }
        | Query::MailInbox { .. } => query_board(txn, query),
        Query::OutboxHead { .. }
        | Query::OutboxPending { .. }
        | Query::OutboxChannels
        | Query::Alarms => query_handoff(txn, query),
        Query::By { caller, query } => read_by(txn, now_ms, caller, query),
        Query::WorkList { .. }
        | Query::WorkEntry { .. }
        | Query::WorkAudit { .. }
        | Query::WorkQuota
        | Query::WorkLimits => work::answer(txn, now_ms, query),
        Query::Gauges => QueryResult::Gauges(gauges::read(txn, now_ms)),
        Query::VoteProposal { .. } | Query::VoteBallots { .. } | Query::VoteList { .. } => {
            vote::answer(txn, query, list_cap)
        }
        Query::EngineGet { .. } | Query::EngineRange { .. } | Query::KvWatch { .. } => {
            query_rows(txn, query)
        }
        Query::PathsList {
            repo,
            holder,
            limit,
        } => QueryResult::Reservations(reservation::list(
            txn,
            now_ms,
            (repo.as_deref(), holder.as_deref()),
            list_cap(*limit),
        )),
    }
}

/// A ledger partition's entries.
fn query_ledger(txn: &impl Txn, query: &Query) -> QueryResult {
    let Query::LedgerList {
        owner,
        name,
        partition,
        after_seq,
        limit,
    } = query
    else {
        unreachable!("{query:?} is not a ledger read")
    };
    let request = ledger::List {
        owner,
        name,
        partition: partition.as_deref(),
        after_seq: *after_seq,
        limit: list_cap(*limit),
    };
    QueryResult::LedgerEntries(ledger::list(txn, &request))
}

/// A watch read ([`watch::page`]); a key watch learns whether its range is still served
/// here. Once a move froze it, the key's writes stopped, and its next cell grants fences
/// above every revision this cell gave before the freeze: the last page (read to the head)
/// resumes from the key's own last event, never from this cell's head, which other keys
/// may have moved past the next cell's fences.
fn watch_page(txn: &impl Txn, key: &[u8], prefix: bool, from: u64) -> QueryResult {
    let mut page = watch::page(txn, watch::Reading { key, prefix, from });
    page.serving = prefix || page.more || range::serves_unfrozen(txn, route::kv_point(key));
    if !page.serving {
        let after_events = page.events.last().map_or(from, |event| event.revision + 1);
        page.next_from = after_events.max(from);
    }
    QueryResult::KvEvents(page)
}

/// The cell's own reads for servers: its ranges, a move's rows and changes, its outbox of
/// follow-ups (split from [`query`] to keep each match short).
fn query_cell(txn: &impl Txn, query: &Query) -> QueryResult {
    match query {
        Query::Ranges => QueryResult::Ranges(range::rows(txn)),
        Query::RangeExport {
            start,
            last,
            after_key,
            limit,
        } => {
            let (rows, next) = range::export(txn, *start, *last, after_key, list_cap(*limit));
            QueryResult::RangeRows { rows, next }
        }
        Query::RangeChanges {
            start,
            last,
            after_key,
            limit,
        } => range_track::changes(txn, (*start, *last), after_key, list_cap(*limit)),
        Query::RangeCopy { start, last } => range_track::copy_state(txn, (*start, *last)),
        Query::RangePending {
            start,
            last,
            after_key,
            limit,
        } => range_track::pending(txn, (*start, *last), after_key, list_cap(*limit)),
        Query::FollowUps { after_seq, limit } => {
            QueryResult::FollowUps(next::pending(txn, *after_seq, list_cap(*limit)))
        }
        other => unreachable!("{other:?} is not a read of the cell's own state"),
    }
}

/// Client keys as they live at `now_ms` (split from `query` to keep each match short).
fn query_kv(txn: &impl Txn, now_ms: u64, query: &Query) -> QueryResult {
    match query {
        Query::KvGet { key } => QueryResult::Kv(kv::get_live(txn, now_ms, key)),
        Query::KvRange {
            prefix,
            after_key,
            limit,
        } => {
            let page = kv::range(txn, now_ms, (prefix, after_key), list_cap(*limit));
            QueryResult::KvRange(page)
        }
        other => unreachable!("{other:?} is not a client key read"),
    }
}

/// Engine rows, as a server reads them (a client's read goes through [`read_by`]), and the
/// watch history.
fn query_rows(txn: &impl Txn, query: &Query) -> QueryResult {
    match query {
        Query::KvWatch { key, prefix, from } => watch_page(txn, key, *prefix, *from),
        Query::EngineGet { key } => QueryResult::Kv(instance::get(txn, key)),
        Query::EngineRange {
            prefix,
            after_key,
            limit,
        } => QueryResult::KvRange(instance::range(txn, prefix, after_key, list_cap(*limit))),
        other => unreachable!("{other:?} is not an engine or watch read"),
    }
}

/// Rows a list returns for a query's `limit`: 0 means `LIST_ROWS_MAX`, and larger
/// limits are capped to it.
fn list_cap(limit: u32) -> usize {
    match limit as usize {
        0 => LIST_ROWS_MAX,
        limit => limit.min(LIST_ROWS_MAX),
    }
}

/// Election and schedule reads (split from `query` to keep each match short).
fn query_coordination(txn: &impl Txn, now_ms: u64, query: &Query) -> QueryResult {
    let cap = list_cap;
    match query {
        Query::ElectionLeader { group } => {
            QueryResult::ElectionLeader(election::get(txn, now_ms, group))
        }
        Query::ElectionList { prefix, limit } => {
            QueryResult::Elections(election::list(txn, now_ms, prefix, cap(*limit)))
        }
        Query::ScheduleList { prefix, limit } => {
            QueryResult::Schedules(schedule::list(txn, prefix, cap(*limit)))
        }
        other => unreachable!("{other:?} is not an election or schedule read"),
    }
}

/// A client's read for `caller` (see [`Query::By`]).
fn read_by(txn: &impl Txn, now_ms: u64, caller: &access::Caller, inner: &Query) -> QueryResult {
    if let Err(refusal) = admit::admit_query(caller, inner)
        .and_then(|()| range::admit_meta_read(txn, caller, inner))
        .and_then(|()| match inner {
            Query::EngineGet { key } | Query::EngineRange { prefix: key, .. } => {
                instance::guard_get(txn, caller, key)
            }
            _ => Ok(()),
        })
    {
        return QueryResult::Refused(query::ReadRefusal::Access(refusal));
    }
    if let Query::EngineRange { .. } = inner {
        let QueryResult::KvRange(mut page) = query(txn, now_ms, inner) else {
            unreachable!("an engine range answers rows")
        };
        page.rows
            .retain(|(key, _)| instance::readable(txn, caller, key));
        return QueryResult::KvRange(page);
    }
    if let Err(refusal) = blackboard::guard_read(txn, caller, inner) {
        return QueryResult::Refused(query::ReadRefusal::Board { refusal });
    }
    if let Query::MailInbox { address, .. } = inner
        && let Err(refusal) = mail::guard_read(txn, now_ms, caller, address)
    {
        return QueryResult::Refused(query::ReadRefusal::Mail { refusal });
    }
    if let Some(team) = vote::read_team(inner)
        && let Err(refusal) = vote::guard_read(txn, caller, &team)
    {
        return QueryResult::Refused(query::ReadRefusal::Board { refusal });
    }
    match query(txn, now_ms, inner) {
        // A spilled task is its origin lineage's alone.
        QueryResult::Tasks(mut tasks) => {
            tasks.retain(|task| taskboard::visible(txn, caller, task));
            QueryResult::Tasks(tasks)
        }
        QueryResult::KvRange(mut page) => {
            let aimed = matches!(inner, Query::KvRange { prefix, .. }
                if access::team_of_key(prefix).is_some());
            page.rows
                .retain(|(key, _)| !access::is_reserved(key) && (aimed || blackboard::listed(key)));
            QueryResult::KvRange(page)
        }
        QueryResult::KvEvents(mut page) => {
            let aimed = matches!(inner, Query::KvWatch { key, prefix: true, .. }
                if access::team_of_key(key).is_some());
            page.events.retain(|event| {
                !access::is_reserved(&event.key) && (aimed || blackboard::listed(&event.key))
            });
            QueryResult::KvEvents(page)
        }
        // A team's resources are listed only by a listing aimed at the team (its members');
        // server resources (`~…`: enrollment budgets, the range-admin lease) by nobody.
        QueryResult::Leases(mut rows) => {
            rows.retain(|v| listed_resource(txn, caller, &v.lease));
            QueryResult::Leases(rows)
        }
        QueryResult::Counters(mut rows) => {
            rows.retain(|v| listed_resource(txn, caller, &v.counter));
            QueryResult::Counters(rows)
        }
        result => result,
    }
}

/// Whether a client's listing shows resource `id`: not a server resource, and a team's only
/// to the team's members.
fn listed_resource(txn: &impl Txn, caller: &access::Caller, id: &types::ResourceId) -> bool {
    !access::is_server_resource(&id.owner, &id.name) && blackboard::may_reach(txn, caller, id)
}

/// Handoff channel reads (split from `query` to keep each match short).
fn query_handoff(txn: &impl Txn, query: &Query) -> QueryResult {
    match query {
        Query::OutboxHead { to_cell } => {
            let (seq, prev_hash) = handoff::outbox_head(txn, *to_cell);
            QueryResult::OutboxHead { seq, prev_hash }
        }
        Query::OutboxPending {
            to_cell,
            from_seq,
            limit,
        } => {
            let limit = (*limit as usize).clamp(1, limits::OUTBOX_PENDING_MAX);
            QueryResult::Envelopes(handoff::pending(txn, *to_cell, *from_seq, limit))
        }
        Query::OutboxChannels => QueryResult::Cells(handoff::channels(txn)),
        Query::Alarms => QueryResult::Alarms(handoff::alarms(txn)),
        other => unreachable!("{other:?} is not a handoff read"),
    }
}

/// Team, board and mailbox reads (split from `query` to keep each match short).
fn query_board(txn: &impl Txn, query: &Query) -> QueryResult {
    let cap = list_cap;
    match query {
        Query::Team { team } => QueryResult::Team(team::view(txn, team)),
        Query::BoardList { team, state, limit } => {
            QueryResult::Tasks(taskboard::list(txn, team, *state, cap(*limit)))
        }
        Query::BoardStats { team } => QueryResult::BoardStats(taskboard::stats(txn, team)),
        Query::BoardTask { team, task_id } => {
            QueryResult::Tasks(taskboard::get(txn, team, task_id).into_iter().collect())
        }
        Query::BoardDeadLetters { team, limit } => {
            QueryResult::Tasks(taskboard::dead_letters(txn, team, cap(*limit)))
        }
        Query::BoardCellReady { limit } => {
            QueryResult::Tasks(taskboard::cell_ready(txn, cap(*limit)))
        }
        Query::Mailbox {
            team,
            agent,
            after_seq,
            limit,
        } => QueryResult::Mailbox(mailbox::list(txn, team, agent, *after_seq, cap(*limit))),
        Query::MailInbox {
            address,
            after_seq,
            limit,
            quarantined,
        } => QueryResult::Mail(mail::list(
            txn,
            address,
            *after_seq,
            cap(*limit),
            *quarantined,
        )),
        other => unreachable!("{other:?} is not a board read"),
    }
}

/// A router's read: refused unless this cell serves its point at `epoch`; list results keep
/// only rows of served ranges (a frozen range's rows are already on their way elsewhere).
fn routed(txn: &impl Txn, now_ms: u64, epoch: u64, inner: &Query) -> QueryResult {
    if let Some(point) = point_of::query(inner)
        && let Err(Outcome::WrongRange { epoch }) = range::admit(txn, point, epoch)
    {
        return QueryResult::WrongRange { epoch };
    }
    let serving = range::serving(txn);
    let serves = |p: u64| range::serves(&serving, p);
    match query(txn, now_ms, inner) {
        QueryResult::KvRange(mut page) => {
            page.rows.retain(|(key, _)| serves(route::kv_point(key)));
            QueryResult::KvRange(page)
        }
        QueryResult::Leases(mut rows) => {
            rows.retain(|v| serves(route::resource_point(&v.lease)));
            QueryResult::Leases(rows)
        }
        QueryResult::Counters(mut rows) => {
            rows.retain(|v| serves(route::resource_point(&v.counter)));
            QueryResult::Counters(rows)
        }
        QueryResult::LedgerEntries(mut rows) => {
            rows.retain(|v| serves(route::resource_point(&v.ledger)));
            QueryResult::LedgerEntries(rows)
        }
        QueryResult::Elections(mut rows) => {
            rows.retain(|v| serves(route::election_point(&v.group)));
            QueryResult::Elections(rows)
        }
        QueryResult::Schedules(mut rows) => {
            rows.retain(|v| serves(route::schedule_point(&v.name)));
            QueryResult::Schedules(rows)
        }
        QueryResult::Reservations(mut rows) => {
            rows.retain(|v| serves(route::repo_point(&v.repo)));
            QueryResult::Reservations(rows)
        }
        other => other,
    }
}
