//! Every bound of the fabric layer, in one place.

/// Cells one node hosts.
pub const CELLS_PER_NODE_MAX: usize = 4096;
/// How long one call to another node may take before it counts as unavailable.
pub const REMOTE_CALL_TIMEOUT_MS: u64 = 2_000;
/// How long the router keeps retrying a request whose cell is unavailable or moving.
pub const ROUTE_RETRY_MS: u64 = 10_000;
/// First pause between router retries.
pub const ROUTE_BACKOFF_MIN_MS: u64 = 10;
/// Longest pause between router retries.
pub const ROUTE_BACKOFF_MAX_MS: u64 = 200;
/// How long `fabric init` waits for every cell to elect a leader and take its ranges.
pub const INIT_WAIT_MS: u64 = 30_000;
/// How long one try of a range change's step on a cell may take before the next try
/// (through another voter) begins.
pub const ADMIN_TRY_MS: u64 = 5_000;
/// How long a range change's step retries before each warning that it still does.
pub const ADMIN_RETRY_WARN_MS: u64 = 5_000;
/// A cell's follow-up rounds that keep failing (other than for want of a leader or a
/// quorum) warn once per this long; the rounds between say so at debug level.
pub const FOLLOW_UP_WARN_MS: u64 = 10_000;
/// Rows copied per page when a range moves.
pub const MOVE_PAGE_ROWS: u32 = 2_048;
/// Keys a move's source record may hold when the range freezes: catch-up rounds before the
/// freeze send the rest while the source still serves it, so the frozen send is one page.
pub const MOVE_FROZEN_KEYS_MAX: u32 = MOVE_PAGE_ROWS;
/// Catch-up rounds a move runs before its freeze; past them the freeze sends what is left,
/// however much (writes outran the rounds).
pub const MOVE_CATCH_UP_ROUNDS_MAX: u32 = 8;
/// Keys the record may hold during the copy before the freeze before a catch-up round runs
/// (half the record's bound, `whip_board::limits::RANGE_CHANGED_KEYS_MAX`), so a long copy
/// of a busy range does not outgrow it.
pub const MOVE_CATCH_UP_AT_KEYS: u32 = (whip_board::limits::RANGE_CHANGED_KEYS_MAX / 2) as u32;
/// Copies before the freeze a move tries when its record outgrew its bound anyway; past
/// them the frozen range is copied whole.
pub const MOVE_PRECOPY_ATTEMPTS_MAX: u32 = 3;
/// Time to live of the lease serializing range changes (renewed every third of it while a
/// change runs, with the freeze of a move). A driver that stalls loses it this long after
/// its last renewal, within the freeze's own hold (`whip_board::limits::RANGE_FREEZE_MS`),
/// so the next holder can take its move over.
pub const RANGE_ADMIN_LEASE_TTL_MS: u64 = 4_000;
/// How often a node looks for stalled moves on the data cells it leads (a frozen range
/// whose freeze's hold has passed), to take them over.
pub const STALLED_MOVE_LOOK_MS: u64 = 500;
/// Pause between a move's attempts to freeze a range a stalled move still holds.
pub const FREEZE_WAIT_STEP_MS: u64 = 200;
/// How long a node status probe waits for another node.
pub const STATUS_PROBE_MS: u64 = 1_000;
/// Raft heartbeat of cells hosted by a node. Since a node's heartbeats to one peer go as
/// one call, 150 ms keeps an idle replicated cell under 0.1 % of a core (BENCHMARKS.md,
/// "Speed (issue 14), 2026-12-02", idle cells).
pub const NODE_HEARTBEAT_MS: u64 = 150;
/// Election timeout (lower bound; the upper is twice it) of cells hosted by a node: a
/// follower campaigns after 0.45-0.9 s without its leader (three to six missed
/// heartbeats), so a node's loss leaves every cell writable again within about 1 s.
pub const NODE_ELECTION_TIMEOUT_MIN_MS: u64 = 450;
/// How often a node runs its cells' hibernation rounds (`hibernate.rs`).
pub const HIBERNATE_LOOK_MS: u64 = 100;
/// How often a node pings each peer node (one empty `Raft/AppendBatch`): the liveness a
/// hibernating cell's followers rely on instead of their leader's heartbeats.
pub const NODE_PING_MS: u64 = NODE_HEARTBEAT_MS;
/// A ping not answered within this long counts as not answered.
pub const NODE_PING_TIMEOUT_MS: u64 = 2 * NODE_PING_MS;
/// A peer node whose last answered ping was sent longer ago than this is dead: about an
/// awake follower's election timeout (three or four missed pings).
pub const NODE_DEAD_MS: u64 = NODE_ELECTION_TIMEOUT_MIN_MS + NODE_PING_MS;
/// Most hibernating cells one round wakes after a peer node died (a round is
/// `HIBERNATE_LOOK_MS`): a node of 1,000 cells elects a third of them in a few rounds
/// rather than all at once.
pub const HIBERNATE_WAKE_ROUND_CELLS: usize = 64;
/// A survivor that is not first in a cell's wake order wakes this much later per place
/// (the first one campaigns at once; this one is its fallback).
pub const HIBERNATE_WAKE_BACKUP_MS: u64 = 2 * NODE_ELECTION_TIMEOUT_MIN_MS;
/// How long a node keeps retrying a read of the range map while the meta cell elects.
pub const META_READ_RETRY_MS: u64 = 5_000;
/// Largest envelope payload a receiver accepts by default (1 MiB).
pub const ENVELOPE_PAYLOAD_BYTES_MAX: usize = 1 << 20;
/// Most cell-to-cell hops an envelope may have made, by default.
pub const ENVELOPE_HOPS_MAX: u32 = 8;
/// Largest distance between an envelope's send time and the receiver's clock, by default.
pub const ENVELOPE_CLOCK_SKEW_MS_MAX: u64 = 30_000;
/// How old an envelope may be when it arrives (a resend after an outage keeps its first
/// `sent_at`); older ones are refused as skewed.
pub const ENVELOPE_AGE_MS_MAX: u64 = 24 * 3_600_000;
/// How often a node's spill mover looks for due cell-tier tasks and queued envelopes.
pub const MOVER_INTERVAL_MS: u64 = 200;
/// Tasks handed off, or envelopes delivered, per cell and round.
pub const SPILL_BATCH_MAX: u32 = 256;
/// Bytes of envelopes one handoff write or delivery carries (half the board's batch cap, so
/// task bodies plus their envelopes' overhead always fit).
pub const HANDOFF_BATCH_BYTES: usize = whip_board::limits::HANDOFF_BATCH_BYTES_MAX / 2;
/// Time to live of a cell's quota of the fabric's work ceiling (renewed every sixth of it
/// by the node leading the cell). Past it without a renewal (the meta cell unreachable
/// that long) the cell admits nothing and its entries lapse; an unreachable cell's share
/// is lent again only after it.
pub const WORK_QUOTA_TTL_MS: u64 = 30_000;
/// Quota rounds a refused registration tries while a cell it needs is unavailable.
pub const QUOTA_ROUND_TRIES: u32 = 3;
/// How long a routing client sends nothing straight to a node that did not answer (its
/// keyed writes go through any node meanwhile).
pub const ROUTES_UNREACHABLE_MS: u64 = 1_000;
/// A routing client that finds no reachable leader for a cell in its routes learns them
/// again, at most once per this long.
pub const ROUTES_REFRESH_MS: u64 = 250;
/// Bytes of a snapshot file one `Node/RestoreCell` call takes at most (a restore holds the
/// whole file in memory once, as a Raft snapshot install does).
pub const RESTORE_BYTES_MAX: u64 = whip_cell::limits::SNAPSHOT_FILE_BYTES_MAX;
