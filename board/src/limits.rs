//! Every bound of the state machine, in one place.

/// Fence positions in one Raft entry (fences pack the position into 16 bits).
pub const BATCH_COMMANDS_MAX: u32 = 1 << 16;
/// Fences one command may grant: each request of an entry owns this many positions
/// (`Stamp::of_request`), so a prefetching claim hands each task its own fence.
pub const FENCES_PER_COMMAND: u32 = 16;
/// Tasks one claim may take at once (`whip board claim --max`), and claims one command may
/// complete before it: a worker's prefetch.
pub const CLAIM_PREFETCH_MAX: u32 = FENCES_PER_COMMAND;
/// Bytes of a CAS value or a ledger entry (default; the cell may configure a lower one).
pub const VALUE_BYTES_MAX: usize = 1 << 20;
/// Bytes of a key, resource owner, name, key value, holder or idempotency key.
pub const NAME_BYTES_MAX: usize = 1024;
/// Slots of one lease.
pub const LEASE_SLOTS_MAX: u32 = 10_000;
/// Waiters queued on one lease.
pub const LEASE_WAITERS_MAX: u32 = 10_000;
/// Longest TTL, wait or retention accepted (10 years).
pub const DURATION_MS_MAX: u64 = 10 * 366 * 24 * 3_600_000;
/// How long an idempotency key's outcome is remembered after it was recorded.
pub const IDEMPOTENCY_WINDOW_MS: u64 = 15 * 60 * 1000;
/// Due items one `Tick` processes; the leader proposes another when more are due.
pub const TICK_WORK_MAX: usize = 1024;
/// Rows one list query returns.
pub const LIST_ROWS_MAX: usize = 10_000;
/// Bytes of keys and values one range read answers (one row more at most); the rest is the
/// next page (`KvPage::resume_after`), so no answer holds gigabytes in a server's memory.
pub const LIST_BYTES_MAX: usize = 4 << 20;
/// Compares, puts and deletes (together) in one `KvTxn`.
pub const KV_TXN_OPS_MAX: usize = 4096;
/// Bytes of all keys and values of one `KvTxn` together.
pub const KV_TXN_BYTES_MAX: usize = 4 << 20;
/// `get` operations in one `KvTxnIf` (its answer carries their values, and a retry reads
/// the recorded answer: at most this many values of `VALUE_BYTES_MAX`).
pub const KV_TXN_GETS_MAX: usize = 8;
/// Shortest time to live of a client key with its own deadline (`KvPutAttached`,
/// `KvKeepalive`): a deadline shorter than a tick round or a leader change is noise.
pub const KV_TTL_MS_MIN: u64 = 1_000;
/// Longest time to live of a client key with its own deadline (7 days): a key meant to
/// outlive that is a plain key.
pub const KV_TTL_MS_MAX: u64 = 7 * 24 * 3_600_000;
/// Client keys attached to one holder's slot of one lease: freeing the slot deletes them
/// all in that one apply, so the bound is the most one release, expiry or settle deletes.
pub const KV_LEASE_KEYS_MAX: usize = 1024;
/// Client keys one `Tick` deletes for their deadlines; the leader proposes another tick
/// when more are due.
pub const KV_EXPIRIES_PER_TICK_MAX: u32 = 512;
/// Ranges one cell owns.
pub const RANGES_PER_CELL_MAX: usize = 1024;
/// How long a move's freeze holds its range past the driver's last freeze or renewal
/// (stamp time). Past it the range-admin lease's next holder may take the move over, so a
/// driver that stalls keeps a range frozen about this long, not until it comes back.
pub const RANGE_FREEZE_MS: u64 = 4_000;
/// Rows one range export page or one range drop command carries.
pub const RANGE_ROWS_PER_COMMAND_MAX: usize = 4096;
/// Stored rows one export page examines (a page may come back short but never scans more).
pub const RANGE_SCAN_ROWS_MAX: usize = 65_536;
/// Bytes of keys and values one range export page carries (a page stops after the row
/// that passes it).
pub const RANGE_EXPORT_BYTES_MAX: usize = 4 << 20;
/// Keys a move's source records as changed while the range is copied before its freeze
/// (`crate::range_track`). Past it the record stops and the move copies the whole range
/// again once frozen; bounded so one command forgets the record.
pub const RANGE_CHANGED_KEYS_MAX: usize = RANGE_ROWS_PER_COMMAND_MAX;
/// Endpoints one election leader publishes.
pub const ELECTION_ENDPOINTS_MAX: usize = 16;
/// Bytes of one published endpoint (`host:port`, a URL).
pub const ELECTION_ENDPOINT_BYTES_MAX: usize = 256;
/// Bytes of a schedule spec (`*/5 9-17 * * 1-5`, `@every 30s`).
pub const SCHEDULE_SPEC_BYTES_MAX: usize = 256;
/// Years a schedule search looks forward or back before giving up (a spec like
/// `0 0 31 2 *` never falls due; `0 0 29 2 *` can wait 8 years, from 2096 to 2104).
pub const SCHEDULE_SCAN_YEARS_MAX: u32 = 10;
/// Members of one team.
pub const TEAM_MEMBERS_MAX: usize = 1024;
/// Ancestor members recorded with one team.
pub const TEAM_ANCESTORS_MAX: usize = 1024;
/// Highest delivery limit a board accepts.
pub const DELIVERY_LIMIT_MAX: u32 = 100;
/// Open tasks (ready, claimed or dead) on one team's local board.
pub const TEAM_TASKS_MAX: u64 = 100_000;
/// Open tasks (ready, claimed or dead) on one cell's cell-tier board; a spill into a full
/// cell tier waits another `spill_after_ms`.
pub const CELL_TASKS_MAX: u64 = 100_000;
/// Ready cell-tier tasks one claim looks through for the oldest in the claimant's lineage
/// (tasks of other lineages ahead of it are skipped; past this many the claim finds none).
pub const CELL_CLAIM_SCAN_MAX: usize = 1_024;
/// Failures kept per task (the latest ones).
pub const TASK_FAILURES_MAX: usize = 32;
/// Bytes of a failure's error text.
pub const TASK_ERROR_BYTES_MAX: usize = 4096;
/// How long a done task (with its result) is kept after completion.
pub const TASK_DONE_RETAIN_MS: u64 = 10 * 60 * 1000;
/// Stored rows one `TeamDissolve` deletes (a task's own rows may go past it).
pub const TEAM_DISSOLVE_ROWS_MAX: usize = 4096;
/// Messages kept per mailbox; a send beyond it drops the oldest.
pub const MAILBOX_MESSAGES_MAX: u64 = 1024;
/// Messages waiting in one agent, team or entry mailbox (quarantined ones too); a send
/// past it is refused `mailbox_full`.
pub const MAIL_DEPTH_MAX: u64 = 256;
/// Messages one sender may have waiting in one mailbox: one peer cannot fill another's
/// mailbox (a send past it is refused `sender_quota`).
pub const MAIL_SENDER_PENDING_MAX: u64 = 64;
/// Messages one batched send carries (`MailSendMany`, `whip mail send --text … --text …`):
/// one sender's quota in one mailbox.
pub const MAIL_SEND_BATCH_MAX: usize = MAIL_SENDER_PENDING_MAX as usize;
/// Bytes of a message's text.
pub const MAIL_TEXT_BYTES_MAX: usize = 16 << 10;
/// Bytes of a message's JSON payload.
pub const MAIL_PAYLOAD_BYTES_MAX: usize = 64 << 10;
/// Bytes of a message's `in_reply_to` or `thread`.
pub const MAIL_REF_BYTES_MAX: usize = 256;
/// Senders one mailbox's authority may grant the right to direct it.
pub const MAIL_GRANTS_MAX: usize = 64;
/// Most messages one take hands out.
pub const MAIL_TAKE_MAX: u32 = 100;
/// Longest visibility window of a take.
pub const MAIL_VISIBILITY_MS_MAX: u64 = 3_600_000;
/// Most take windows a mailbox keeps open; past it a take widens its newest one (its
/// messages stay hidden a little longer, never shorter).
pub const MAIL_TAKE_WINDOWS_MAX: usize = 64;
/// Options of one proposal, at least.
pub const VOTE_OPTIONS_MIN: usize = 2;
/// Options of one proposal, at most.
pub const VOTE_OPTIONS_MAX: usize = 64;
/// Bytes of one option's name.
pub const VOTE_OPTION_BYTES_MAX: usize = 256;
/// Bytes of a proposal's title.
pub const VOTE_TITLE_BYTES_MAX: usize = 1024;
/// Ballots one proposal holds (every cast, superseded ones too); past it a cast is refused
/// `ballots_full`. Also bounds the rows one close reads.
pub const VOTE_BALLOTS_MAX: u32 = 4096;
/// Ballots one voter casts on one proposal (`voter_ballots_full` past it).
pub const VOTE_VOTER_BALLOTS_MAX: u32 = 32;
/// Open proposals of one team (`proposals_full` past it).
pub const VOTE_OPEN_PER_TEAM_MAX: u32 = 256;
/// Longest time a proposal stays open (30 days).
pub const VOTE_DURATION_MS_MAX: u64 = 30 * 24 * 3_600_000;
/// Largest denominator of a quorum or threshold fraction.
pub const VOTE_FRACTION_DEN_MAX: u64 = 1_000_000;
/// How long a result stays in the team's `votes` ledger and signals (30 days).
pub const VOTE_RESULT_RETAIN_MS: u64 = 30 * 24 * 3_600_000;
/// Unacknowledged envelopes one handoff channel holds.
pub const OUTBOX_PENDING_MAX: usize = 256;
/// Alarms a cell keeps (the oldest go first).
pub const ALARMS_KEPT_MAX: usize = 256;
/// Tasks one batched post carries.
pub const BOARD_POST_BATCH_MAX: usize = 1024;
/// Items one handoff batch carries (an outbox's worth).
pub const HANDOFF_BATCH_MAX: usize = 256;
/// Bytes of envelopes (or task bodies) one handoff batch carries.
pub const HANDOFF_BATCH_BYTES_MAX: usize = 8 << 20;
/// The fabric's population ceiling until the operator sets one (`whip work limits`).
pub const WORK_FABRIC_MAX_DEFAULT: u64 = 10_000;
/// Live work entries one cell holds until the operator sets a limit.
pub const WORK_CELL_MAX_DEFAULT: u64 = 10_000;
/// Highest per-cell limit the operator may set (a revoke removes a subtree in one apply).
pub const WORK_CELL_MAX_LIMIT: u64 = 100_000;
/// Deepest lineage until the operator sets one (a root has depth 0).
pub const WORK_DEPTH_MAX_DEFAULT: u32 = 8;
/// Deepest lineage the operator may allow.
pub const WORK_DEPTH_MAX_LIMIT: u32 = 32;
/// Live children of one entry until the operator sets a limit.
pub const WORK_CHILDREN_MAX_DEFAULT: u32 = 64;
/// Default live entries one agent may hold on one cell (its share of the ceiling; the
/// operator's own entries are not limited by it).
pub const WORK_OWNER_MAX_DEFAULT: u64 = 2_500;
/// Most live children the operator may allow one entry.
pub const WORK_CHILDREN_MAX_LIMIT: u32 = 1024;
/// Resource classes configured at once.
pub const WORK_CLASSES_MAX: usize = 16;
/// Longest lease of a work entry.
pub const WORK_TTL_MS_MAX: u64 = 10 * 60 * 1000;
/// Audit rows a cell keeps (the oldest go first).
pub const WORK_AUDIT_KEPT_MAX: u64 = 10_000;
/// Quota a cell asks for beyond its live entries.
pub const WORK_QUOTA_CHUNK: u64 = 8;
/// The clock skew between cells a quota tolerates: a cell stops using its quota this long
/// before the meta cell's expiry, and the meta cell counts a lapsed grant this long after.
pub const WORK_QUOTA_SKEW_MS: u64 = 1_000;
/// Characters of one line of mail before the screen reports it as overlong (text that runs
/// far off to the right of a reader's view can hide what follows).
pub const SCREEN_LINE_CHARS_MAX: usize = 2000;
/// Findings one screen keeps; the first of every kind is always kept, later ones beyond
/// this are counted into the last kept finding's detail (the verdict still reflects them).
pub const SCREEN_FINDINGS_MAX: usize = 16;
/// Characters of one base64 token the screen reports as an encoded payload.
pub const SCREEN_ENCODED_RUN_MIN: usize = 64;
/// Hex digits in one run the screen reports as an encoded payload: longer than a 64-byte
/// signature in hex (128), so digests (SHA-256, BLAKE3: 64) and git SHAs (40) stay clean.
pub const SCREEN_HEX_RUN_MIN: usize = 129;
/// Percent-encoded ASCII bytes (`%69%67…`) in one run the screen reports as an encoded
/// payload (ordinary URLs escape a space or a non-ASCII word, not runs of plain letters).
pub const SCREEN_PERCENT_RUN_MIN: usize = 12;
/// Characters of one finding's detail.
pub const SCREEN_DETAIL_CHARS_MAX: usize = 120;
/// Characters of the input a finding's detail may quote (a special token's name).
pub const SCREEN_ECHO_CHARS_MAX: usize = 32;
/// Tag characters after U+1F3F4 that still form an emoji subdivision flag (🏴 + `gbsct` +
/// cancel tag is 6); a longer run of tag characters is hidden text.
pub const SCREEN_FLAG_TAGS_MAX: usize = 8;
/// Team boards, mailboxes and leases one [`crate::Query::Gauges`] read lists each (a scrape
/// of a cell reads at most this many rows of each; past it the answer says it was cut).
pub const GAUGE_ROWS_MAX: usize = 256;
/// Events the watch history keeps (the oldest go first; a watch from below them is told
/// `compacted`).
pub const WATCH_HISTORY_EVENTS_MAX: u64 = 100_000;
/// Bytes of keys and values the watch history keeps.
pub const WATCH_HISTORY_BYTES_MAX: u64 = 64 << 20;
/// Oldest events one write removes when the history is over its bounds (a big write may
/// leave it over until the next few writes).
pub const WATCH_COMPACT_PER_WRITE_MAX: usize = 64;
/// History rows one watch read examines: twice a transaction's most writes, so a page always
/// holds at least one whole revision.
pub const WATCH_SCAN_ROWS_MAX: usize = 2 * KV_TXN_OPS_MAX;
/// Bytes of keys and values one watch read answers (it stops on a revision boundary after
/// passing them).
pub const WATCH_PAGE_BYTES_MAX: usize = 4 << 20;
/// Paths (patterns) one `PathsReserve` or `PathsRelease` names.
pub const PATHS_PER_CALL_MAX: usize = 32;
/// Bytes of one path pattern of a reservation (`crate::path_glob`).
pub const PATH_PATTERN_BYTES_MAX: usize = 256;
/// Segments of one path pattern.
pub const PATH_PATTERN_SEGMENTS_MAX: usize = 32;
/// Wildcard characters (`*`, `?`; a `**` segment counts two) of one path pattern: with the
/// byte bound, this keeps one overlap check to a few thousand steps.
pub const PATH_PATTERN_WILDCARDS_MAX: usize = 8;
/// Bytes of a repository's name in reservations.
pub const REPO_NAME_BYTES_MAX: usize = 256;
/// Live reservations of one repository (every holder's together): one reserve compares
/// each of its paths with all of them, in one apply.
pub const PATH_RESERVATIONS_PER_REPO_MAX: usize = 256;
/// Shortest time to live of a reservation: shorter than a tick round or a leader change
/// is noise.
pub const PATH_RESERVATION_TTL_MS_MIN: u64 = 1_000;
/// Longest time to live of a reservation (one day): a holder renews for longer.
pub const PATH_RESERVATION_TTL_MS_MAX: u64 = 24 * 3_600_000;
