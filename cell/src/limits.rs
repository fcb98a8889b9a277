//! Every bound and timing of a cell, in one place.

/// Client requests in one Raft entry.
pub const BATCH_REQUESTS_MAX: usize = 1024;
// Every request of an entry gets its fences from its position: the batch's requests, each
// with its fence positions, must fit the fence's position bits (`whip_board::Stamp`).
const _: () = assert!(
    BATCH_REQUESTS_MAX * whip_board::limits::FENCES_PER_COMMAND as usize
        <= whip_board::limits::BATCH_COMMANDS_MAX as usize
);
/// Bytes of client payload in one Raft entry (a single larger request still goes alone).
pub const BATCH_BYTES_MAX: usize = 128 * 1024;
/// Raft entries proposed concurrently by the leader of a replicated cell; more requests wait
/// and batch up. On two cores one bigger batch beats two smaller ones in flight once a
/// follower's round is in each (BENCHMARKS.md, issue 14 and issue 35).
pub const BATCHES_IN_FLIGHT_MAX: usize = 1;
/// Raft entries proposed concurrently by a cell's only voter (the embedded store): with no
/// round to a follower, the log's next fsync can start while the previous batch applies and
/// answers, which one batch in flight leaves idle (BENCHMARKS.md, issue 35: the engine's
/// instances/s at 8 runners +13 %).
pub const BATCHES_IN_FLIGHT_MAX_ONE_VOTER: usize = 2;
/// Requests queued for proposal before callers see back-pressure.
pub const PROPOSAL_QUEUE_MAX: usize = 16 * 1024;
/// Default byte limit of a CAS value or ledger entry (configurable per cell).
pub const VALUE_BYTES_MAX_DEFAULT: usize = 1 << 20;
/// Largest gRPC message between nodes (a batch forwarded between voters, a snapshot chunk).
pub const MESSAGE_BYTES_MAX: usize = 64 << 20;
/// Largest client request: the largest command payload (a `KvTxn`, a batch of posts) and
/// room for its framing. A larger one is refused `InvalidArgument` before it is decoded.
pub const CLIENT_MESSAGE_BYTES_MAX: usize = whip_board::limits::KV_TXN_BYTES_MAX + (1 << 20);
/// Open connections all listeners of one process accept together (gRPC, `--http`, the
/// executor: `crate::budget`); fewer when the descriptor limit is low. Past it a new
/// connection is closed at once.
pub const CONNECTIONS_MAX: usize = 1_024;
/// One remote address holds at most 1/N of the process's connection budget...
pub const CONNECTIONS_PER_ADDRESS_DIVISOR: usize = 4;
/// ...but never fewer than this many connections (a small budget still lets a client and a
/// few peers behind one address in).
pub const CONNECTIONS_PER_ADDRESS_MIN: usize = 16;
/// Connecting to a peer gives up after this long.
pub const CONNECT_TIMEOUT_MS: u64 = 1_000;
/// Pause between retries to an unreachable peer.
pub const PEER_BACKOFF_MS: u64 = 200;
/// A node pings each peer connection this often, even when idle...
pub const PEER_KEEPALIVE_INTERVAL_MS: u64 = 1_000;
/// ...and drops it (the next call dials again) when a ping is not answered within this
/// long: a connection the peer stopped reading must not carry Raft for tens of seconds.
pub const PEER_KEEPALIVE_TIMEOUT_MS: u64 = 2_000;
/// Raft heartbeat (also openraft's AppendEntries timeout: TRAPS.md 3).
pub const HEARTBEAT_MS: u64 = 100;
/// Raft election timeout: a follower campaigns after a random time in `[min, 2 × min)`.
pub const ELECTION_TIMEOUT_MIN_MS: u64 = 200;
/// The share of the election timeout, in thousandths, a leader's read lease leaves unused
/// for the clocks' rate drift (`lease_read.rs`): monotonic clocks slewed by NTP drift by
/// at most 0.05 %, so a tenth is a wide margin.
pub const LEASE_READ_DRIFT_PERMILLE: u64 = 100;
/// Entries per AppendEntries message.
pub const APPEND_ENTRIES_MAX: u64 = 4;
/// Default number of log entries after which a snapshot is built.
pub const SNAPSHOT_AFTER_ENTRIES_DEFAULT: u64 = 20_000;
/// How often the leader checks for due deadlines.
pub const TICK_INTERVAL_MS: u64 = 100;
/// Messages a mail take returns when the request names no maximum.
pub const MAIL_TAKE_DEFAULT: u32 = 10;
/// A mail take's visibility window when the request names none.
pub const MAIL_VISIBILITY_MS_DEFAULT: u64 = 30_000;
/// A member whose cell made no progress for this long hibernates (`hibernation.rs`): its
/// tick goes off, so it neither heartbeats nor times its leader out.
pub const HIBERNATE_QUIET_MS: u64 = 2_000;
/// A leader hibernates this long after its followers could have: they saw its last entry
/// and commit index no later than one heartbeat after it did, and check every round.
pub const HIBERNATE_LEADER_LAG_MS: u64 = 1_000;
/// How long a request waits for a leader to appear before it is refused as unavailable.
pub const LEADER_WAIT_MS: u64 = 3_000;
/// Ticks one round of the tick loop proposes before yielding to the next interval.
pub const TICKS_PER_ROUND_MAX: usize = 8;
/// Newest log entries kept in memory for replication reads.
pub const LOG_CACHE_ENTRIES_MAX: usize = 4096;
/// A log read below the cache of at most this many entries is made on the caller's task
/// when no writer holds the log (a few µs from the engine's pages); a longer one, or one
/// that would wait, goes to the blocking pool. openraft's
/// start reads one entry at a time to find each term's first entry, and the hop per read
/// made that cost ~0.1 ms an entry.
pub const LOG_READ_INLINE_ENTRIES_MAX: u64 = 16;
/// Size the first log segment file is preallocated to; each next one doubles.
pub const SEGMENT_BYTES_MIN: u64 = 1 << 20;
/// Largest preallocated log segment (a bigger record gets a segment of its own size).
pub const SEGMENT_BYTES_MAX: u64 = 16 << 20;
/// Size of each of the segment log's two metadata slots (`storage::meta_slots`): the vote
/// and the last purged id, with room to spare; a larger map is refused.
pub const LOG_META_SLOT_BYTES: u64 = 4096;
/// A storage file open (a new log segment, the log directory, a snapshot) that fails
/// because the process is out of descriptors is retried for up to this long before the
/// failure reaches openraft (which would stop the Raft core): `storage/descriptors.rs`.
pub const STORAGE_OPEN_RETRY_MS_MAX: u64 = 60_000;
/// First pause between those retries; each next one doubles...
pub const STORAGE_OPEN_BACKOFF_MIN_MS: u64 = 5;
/// ...up to this.
pub const STORAGE_OPEN_BACKOFF_MAX_MS: u64 = 1_000;
/// Appends already queued that the log writer commits together in one durable commit.
pub const LOG_GROUP_APPENDS_MAX: usize = 64;
/// Segments of a node's log above which the oldest one's live entries (an idle cell that
/// never purges pins it) are written again at the tail so the segment can go...
pub const NODE_LOG_SEGMENTS_SOFT_MAX: usize = 8;
/// ...when they are at most this many bytes (a commit never stalls on a bigger copy; a
/// busy cell's entries leave by its own purges).
pub const NODE_LOG_REWRITE_BYTES_MAX: u64 = 1 << 20;
/// How often applying makes the state machine's store durable (between, the log covers it).
pub const STATE_DURABLE_EVERY_MS: u64 = 1_000;
/// Applied writes kept in memory before they go to the storage engine in one commit
/// (`storage/write_back.rs`), in bytes of keys and values. Under heavy load this is reached
/// several times a second; much more would make that commit a stall of the apply pipeline
/// (8 MiB measured: CAS p99 at 128 clients 75 ms against 19 ms at 256 KiB).
pub const STATE_WRITE_BACK_BYTES_MAX: usize = 256 << 10;
/// The room an apply on the state machine's task must find below
/// `STATE_WRITE_BACK_BYTES_MAX`, so that a batch of up to this many bytes never hands the
/// pending writes to the engine there (with less room left it goes to the blocking pool).
pub const STATE_APPLY_INLINE_ROOM_BYTES: usize = 64 << 10;
/// Scan starts whose deleted prefix the write-back layer remembers (a queue head, a team's
/// ready tasks); past this many the records start over.
pub const STATE_SCAN_MEMO_MAX: usize = 4_096;
/// A request forwarded to the leader (writes or a read) gives up after this long, so a leader
/// that stopped answering (paused, cut off) does not hold the proposal slot until TCP
/// keepalive notices (found by `whip chaos`: SIGSTOP of the leader stalled writes ~25 s).
pub const FORWARD_TIMEOUT_MS: u64 = 1_000;
/// One attempt of a client call gives up after this long and moves to the next member (a
/// black-holed member otherwise holds the client until HTTP/2 keepalive notices).
pub const CLIENT_ATTEMPT_TIMEOUT_MS: u64 = 3_000;
/// Tries of a keyed write at the node a client's router picked (the router looks again
/// after each `NotLeader`, `WrongRange` or unreachable node) before the client sends it
/// through any member instead.
pub const CLIENT_DIRECT_ATTEMPTS_MAX: usize = 3;
/// Channels a client keeps to nodes its router picked; past it they are opened afresh.
pub const CLIENT_DIRECT_CHANNELS_MAX: usize = 256;
/// Bytes of one snapshot chunk sent to a lagging voter.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1 << 20;
/// How long one snapshot chunk RPC may take. The last chunk also covers installing the whole
/// snapshot on the receiver (decode, replace the state, fsync), which takes seconds for a
/// large state: openraft's 200 ms default made a voter that fell behind a purged log retry
/// its transfer forever (found by `whip chaos`, seed 5; see RELIABILITY.md).
pub const SNAPSHOT_CHUNK_TIMEOUT_MS: u64 = 60_000;
/// Bytes of one chunk of an operator's snapshot (`Admin/SnapshotSave`) on the wire.
pub const SNAPSHOT_SAVE_CHUNK_BYTES: usize = 1 << 20;
/// Chunks of an operator's snapshot buffered for a slow reader before the dump waits.
pub const SNAPSHOT_SAVE_QUEUE_CHUNKS: usize = 4;
/// Largest snapshot file `whip cell snapshot restore` (and a node's `RestoreCell`) reads: a
/// restore holds the whole state in memory once, as a Raft snapshot install does.
pub const SNAPSHOT_FILE_BYTES_MAX: u64 = 8 << 30;
/// A member receiving a snapshot does not campaign until this long after its last chunk
/// (`election_pause.rs`).
pub const SNAPSHOT_ELECTION_PAUSE_MS: u64 = 5_000;
/// How long a fail-open lease acquire waits for its cell before answering degraded.
pub const FAIL_OPEN_WAIT_MS: u64 = 2_000;
/// How often a server stream re-reads when this server hosts no member of its cell (a
/// fabric node outside that cell), and so cannot be woken by the cell's applies.
pub const OBSERVE_UNHOSTED_POLL_MS: u64 = 250;
/// Leader changes buffered for a slow observer.
pub const OBSERVE_QUEUE_MAX: usize = 16;
/// Teams above a team (its parent chain) that lineage checks read.
pub const TEAM_DEPTH_MAX: usize = 16;
/// How long team signals are kept.
pub const SIGNAL_RETAIN_MS: u64 = 86_400_000;
/// Commands one follow-up may take: a purge of a dissolved team's fabric queue takes one
/// bounded delete (`FabricPurge`, about 4,096 rows) per page, and this is enough for a queue
/// holding the most open tasks a board may.
pub const FOLLOW_UP_COMMANDS_MAX: usize = 256;
/// Follow-ups one drain of an outbox carries out (more wait for the next drain).
pub const FOLLOW_UPS_PER_DRAIN_MAX: u32 = 64;
/// How often a follow-up executor looks at the outboxes of the cells its node leads (a
/// look that finds nothing new applied costs no read).
pub const FOLLOW_UP_LOOK_MS: u64 = 200;
/// A TLS handshake that takes longer than this is dropped (a client that opens a connection
/// and sends nothing holds no slot).
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 5_000;
/// Certificates the cluster CA issues are valid until the first of January of this year.
pub const CERT_VALID_UNTIL_YEAR: i32 = 2100;
/// Servers ping an idle HTTP/2 connection this often (and set TCP keepalive to it)...
pub const KEEPALIVE_INTERVAL_MS: u64 = 10_000;
/// ...and close it when the ping is not answered within this long.
pub const KEEPALIVE_TIMEOUT_MS: u64 = 20_000;
/// Concurrent calls (HTTP/2 streams) on one connection.
pub const STREAMS_PER_CONNECTION_MAX: u32 = 1_024;
/// Streams a peer may open and reset before the server accepts them, on one connection,
/// before the server closes it (h2's rapid-reset guard; its default of 20 is reached by a
/// peer's own timed-out Raft calls when this server is short of CPU, and closing the
/// connection then cuts Raft between the two for as long as the peer takes to notice).
pub const PENDING_RESET_STREAMS_MAX: usize = 256;
/// A Raft message whose term is further than this ahead of the receiver's term is refused
/// before the core (a partitioned voter campaigning every election timeout needs days to get
/// here; openraft 0.9.25 panics on `u64::MAX`).
pub const RAFT_TERM_AHEAD_MAX: u64 = 1 << 20;
/// Failed token checks (unknown agent, wrong or revoked token) one remote address may make
/// per window; past it its checks are refused `unauthenticated` without reading the store,
/// so guessing tokens costs the cell no linearizable read each.
pub const TOKEN_FAILURES_PER_WINDOW_MAX: u32 = 10;
/// The window of [`TOKEN_FAILURES_PER_WINDOW_MAX`].
pub const TOKEN_FAILURE_WINDOW_MS: u64 = 1_000;
/// Addresses whose failed token checks a server counts one by one; when more failed
/// within one window, the others are counted together in one shared row.
pub const TOKEN_FAILURE_ADDRESSES_MAX: usize = 4_096;
/// Agents one agent may enroll (register) per hour.
pub const ENROLLMENTS_PER_HOUR_MAX: u64 = 100;
/// Server streams (election observers, signal subscriptions) open on one server...
pub const STREAMS_MAX: usize = 1_024;
/// ...and of one caller (an agent, or the address of an anonymous caller).
pub const STREAMS_PER_CALLER_MAX: usize = 32;
/// Descriptors kept for storage files, peers and the listeners before connections count
/// (`crate::budget::connections_max` gives connections half of the rest).
pub const DESCRIPTORS_RESERVED: usize = 64;
/// A failed accept (no descriptors left) waits this long before the next.
pub const ACCEPT_BACKOFF_MS: u64 = 50;
/// Bytes of an external mail validator's answer read at most (`crate::screen_hook`).
pub const SCREEN_HOOK_ANSWER_BYTES_MAX: usize = 64 << 10;
/// Findings of an external mail validator's answer kept.
pub const SCREEN_HOOK_FINDINGS_MAX: usize = 16;
/// How long an external mail validator may take unless the operator says otherwise.
pub const SCREEN_HOOK_TIMEOUT_MS_DEFAULT: u64 = 500;
/// Calls to the external mail validator one process makes at once.
pub const SCREEN_HOOK_CONCURRENCY_MAX: usize = 32;
/// gRPC methods a server's metrics name one by one; calls of any other path count as
/// `other` (a caller can send any path: labels must stay bounded).
pub const RPC_METHOD_LABELS_MAX: usize = 256;
/// Bytes of a method path named in the metrics.
pub const RPC_METHOD_BYTES_MAX: usize = 96;
/// Entries a member may have left to apply and still answer `/readyz` as caught up.
pub const READY_APPLY_LAG_MAX: u64 = 1_000;
/// Requests the observation listener (`--http`) answers at once; more are answered 503.
pub const HTTP_REQUESTS_MAX: usize = 16;
/// How long the observation listener gives one request before it answers 503.
pub const HTTP_REQUEST_TIMEOUT_MS: u64 = 5_000;
/// An observation connection must send a whole request head within this long, or it is
/// closed. The same timer runs while a kept-alive connection waits for its next request,
/// so this is also how long an idle connection is kept.
pub const HTTP_HEADER_READ_TIMEOUT_MS: u64 = 5_000;
/// Bytes of request head the observation listener reads at most.
pub const HTTP_HEADER_BYTES_MAX: usize = 16 << 10;

/// Most empty AppendEntries (heartbeats) one `Raft/AppendBatch` call carries; a server
/// refuses a larger batch.
pub const HEARTBEAT_BATCH_MAX: usize = 512;
/// How long a heartbeat batch may take before its senders treat the peer as unreachable
/// (heartbeats queued behind it wait at most this long).
pub const HEARTBEAT_BATCH_TIMEOUT_MS: u64 = 100;
/// How long a server gives one cell's heartbeat of a batch before it answers that one
/// `unavailable` (the others are not held up by it).
pub const HEARTBEAT_ITEM_TIMEOUT_MS: u64 = 80;

/// How often a member started with `--clock-offset-file` (a test-only fault) re-reads it.
pub const CLOCK_OFFSET_FILE_POLL_MS: u64 = 100;
/// Least time between a watch stream's progress answers (the cursor moved past other keys'
/// events): a resuming watcher rescans at most this much history. A quiet stream beats
/// this often too, after looking at its member (`push/fresh.rs`).
pub const WATCH_PROGRESS_MS: u64 = 1_000;
/// How long a watch-serving member may know no leader (or, leading, hear from no quorum)
/// before its streams end `unavailable` and reopen on another node.
pub const WATCH_STALE_MS: u64 = 2_000;
/// How long a followed watch waits for any answer (the server's heartbeat comes every
/// [`WATCH_PROGRESS_MS`]) before it drops the stream and reopens it on another node.
pub const WATCH_SILENCE_MS: u64 = 5_000;
/// How long a followed watch keeps reopening while no member answers it.
pub const WATCH_RECONNECT_FOR_MS: u64 = 30_000;
/// Longest pause between a followed watch's reopening tries.
pub const WATCH_BACKOFF_MAX_MS: u64 = 500;
/// How often a server started with `--disk-fault-file` (a test-only fault) re-reads it.
pub const DISK_FAULT_FILE_POLL_MS: u64 = 100;
/// Longest a `WaitApplied` call waits before it answers with the index unchanged (a client
/// waiting longer calls again).
pub const WAIT_APPLIED_MAX_MS: u64 = 10_000;
/// Longest one client `WaitApplied` call asks to wait (below [`CLIENT_ATTEMPT_TIMEOUT_MS`],
/// so a quiet cell is not mistaken for a dead member); a longer wait calls again.
pub const WAIT_APPLIED_CALL_MS: u64 = 2_000;
/// How long a client waits by time when the server it reached hosts no member of its
/// subject's cell (a fabric node outside that cell): the one wait that is a pause.
pub const WAIT_UNHOSTED_PAUSE_MS: u64 = 250;
