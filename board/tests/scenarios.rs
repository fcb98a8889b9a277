//! Goal: pin the user-visible behaviour of every command in readable scenario files.
//! Method: each `testdata/*.txt` holds blocks of command lines, a `----` line and the
//! expected output (one line per command; list queries print one line per row). All blocks
//! of a file run in order on one store; each command gets the next log index. `@T` before a
//! command sets the stamp time (ms, `+ms` relative, or RFC 3339 UTC). An argument value may
//! be double-quoted to hold spaces (`spec="0 9 * * 1-5"`). Outcomes print as `Debug`, except
//! that a claimed task prints as one task row (as `tasks` lists them). `REWRITE=1`
//! regenerates the expected output; review the diff.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use chrono::{DateTime, SecondsFormat};
use whip_board::query::{LeaseView, LedgerEntryView, ScheduleView};
use whip_board::{
    BoardSettings, BoardStatsView, Command, Completion, ElectionLeader, MailboxMessage, MemTxn,
    Outcome, Query, QueryResult, Request, Reset, ResourceId, Stamp, TaskState, TaskView, TeamView,
    apply, query,
};

struct Runner {
    txn: MemTxn,
    index: u64,
    time_ms: u64,
}

struct Line<'a> {
    verb: &'a str,
    args: HashMap<&'a str, &'a str>,
}

impl<'a> Line<'a> {
    fn text(&self, name: &str) -> String {
        self.args
            .get(name)
            .unwrap_or_else(|| panic!("missing {name}="))
            .to_string()
    }

    /// A decimal number, or hexadecimal with `0x` (ring points).
    fn number(&self, name: &str) -> u64 {
        let text = self.text(name);
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => text.parse().ok(),
        };
        parsed.unwrap_or_else(|| panic!("{name}= is not a number"))
    }

    fn number_or(&self, name: &str, default: u64) -> u64 {
        self.args.get(name).map_or(default, |_| self.number(name))
    }

    fn optional(&self, name: &str) -> Option<u64> {
        self.args.get(name).map(|_| self.number(name))
    }

    fn resource(&self) -> ResourceId {
        let text = self.text("res");
        let parts: Vec<&str> = text.split(',').collect();
        assert_eq!(parts.len(), 3, "res= is owner,name,key");
        ResourceId {
            owner: parts[0].into(),
            name: parts[1].into(),
            key: parts[2].into(),
        }
    }

    /// `endpoints=a:1,b:2` (absent or empty = none).
    fn list(&self, name: &str) -> Vec<String> {
        match self.args.get(name) {
            None | Some(&"") => Vec::new(),
            Some(text) => text.split(',').map(String::from).collect(),
        }
    }

    /// A time argument: ms or RFC 3339.
    fn time(&self, name: &str) -> u64 {
        parse_time(&self.text(name), 0)
    }

    /// `value=text`, or `value-bytes=N` for N bytes of `x`.
    fn bytes(&self, name: &str) -> Vec<u8> {
        let sized = format!("{name}-bytes");
        match self.args.get(sized.as_str()) {
            Some(n) => vec![b'x'; n.parse().expect("size is a number")],
            None => self.text(name).into_bytes(),
        }
    }
}

fn parse_time(text: &str, current: u64) -> u64 {
    if let Some(delta) = text.strip_prefix('+') {
        return current + delta.parse::<u64>().expect("relative time is a number");
    }
    if let Ok(ms) = text.parse() {
        return ms;
    }
    let at = DateTime::parse_from_rfc3339(text).expect("time is ms or RFC 3339");
    u64::try_from(at.timestamp_millis()).expect("time after 1970")
}

fn reset(text: &str) -> Reset {
    match text {
        "hourly" => Reset::Hourly,
        "daily" => Reset::Daily,
        "weekly" => Reset::Weekly,
        "monthly" => Reset::Monthly,
        other => panic!("unknown reset {other}"),
    }
}

fn task_state(text: &str) -> TaskState {
    match text {
        "ready" => TaskState::Ready,
        "claimed" => TaskState::Claimed,
        "done" => TaskState::Done,
        "dead" => TaskState::Dead,
        other => panic!("unknown task state {other}"),
    }
}

/// Board settings from `reclaim= deliveries= spill= task-bytes=` (defaults otherwise).
fn settings(line: &Line<'_>) -> BoardSettings {
    let default = BoardSettings::default();
    let small = |name: &str, default: u32| {
        u32::try_from(line.number_or(name, u64::from(default))).expect("fits u32")
    };
    BoardSettings {
        reclaim_ms: line.number_or("reclaim", default.reclaim_ms),
        delivery_limit: small("deliveries", default.delivery_limit),
        spill_after_ms: line.number_or("spill", default.spill_after_ms),
        task_bytes_max: small("task-bytes", default.task_bytes_max),
    }
}

/// Team and board commands (split from `command` to keep each match short).
fn board_command(line: &Line<'_>) -> Option<Command> {
    let team = || line.text("team");
    let caller = || line.text("caller");
    Some(match line.verb {
        "team-create" => Command::TeamCreate {
            team: team(),
            caller: caller(),
            parent: line.args.get("parent").map(|p| p.to_string()),
            ancestors: line.list("ancestors"),
            settings: settings(line),
        },
        "team-join" => Command::TeamJoin {
            team: team(),
            caller: caller(),
            agent: line.text("agent"),
        },
        "team-dissolve" => Command::TeamDissolve {
            team: team(),
            caller: caller(),
        },
        "post" => Command::BoardPost {
            team: team(),
            caller: caller(),
            body: line.bytes("body"),
        },
        "claim" => Command::BoardClaim {
            team: team(),
            caller: caller(),
            worker: line.text("worker"),
        },
        "complete" => Command::BoardComplete {
            team: team(),
            caller: caller(),
            task_id: line.text("task"),
            fence: line.number("fence"),
            result: line.bytes("result"),
        },
        "claim-task" => Command::BoardClaimTask {
            team: team(),
            caller: caller(),
            worker: line.text("worker"),
            task_id: line.text("task"),
            claim_ms: line.number_or("for", 0),
        },
        "task-release" => Command::BoardRelease {
            team: team(),
            caller: caller(),
            task_id: line.text("task"),
            fence: line.number("fence"),
        },
        "fail" => Command::BoardFail {
            team: team(),
            caller: caller(),
            task_id: line.text("task"),
            fence: line.number("fence"),
            error: line.text("error"),
        },
        "extend" => Command::BoardExtend {
            team: team(),
            caller: caller(),
            task_id: line.text("task"),
            fence: line.number("fence"),
            extend_ms: line.number("by"),
        },
        "redrive" => Command::BoardRedrive {
            team: team(),
            caller: caller(),
            task_id: line.text("task"),
        },
        "post-many" => Command::BoardPostMany {
            team: team(),
            caller: caller(),
            bodies: line
                .text("bodies")
                .split(',')
                .map(|b| b.as_bytes().to_vec())
                .collect(),
        },
        "handoff-send" => Command::HandoffSend {
            to_cell: line.number("to"),
            seq: line.number("seq"),
            prev_hash: hash_arg(line, "prev"),
            hash: hash_arg(line, "hash"),
            envelope: line.text("hash").into_bytes(),
            task_id: line.text("task"),
            delivery_count: u32::try_from(line.number_or("deliveries", 0)).expect("fits"),
        },
        "handoff-ack" => Command::HandoffAck {
            to_cell: line.number("to"),
            seq: line.number("seq"),
        },
        "handoff-receive" => Command::HandoffReceive {
            from_cell: line.number("from"),
            seq: line.number("seq"),
            prev_hash: hash_arg(line, "prev"),
            hash: hash_arg(line, "hash"),
            queue: line.text("queue"),
            task: Box::new(handed_task(line)),
            settings: whip_board::types::BoardSettings::default(),
            admitted: line
                .text("admitted")
                .split(',')
                .map(str::to_string)
                .collect(),
        },
        "handoff-failed" => Command::HandoffFailed {
            task_id: line.text("task"),
            reason: line.text("reason"),
        },
        _ => return cycle_command(line),
    })
}

/// A worker's loop in one command: complete and claim.
fn cycle_command(line: &Line<'_>) -> Option<Command> {
    let team = || line.text("team");
    let caller = || line.text("caller");
    Some(match line.verb {
        "claim-many" => Command::BoardClaimMany {
            team: team(),
            caller: caller(),
            worker: line.text("worker"),
            completes: completions(line),
            max: u32::try_from(line.number_or("max", 0)).expect("fits"),
            claim_ms: line.number_or("window", 0),
        },
        "complete-claim" => Command::BoardCompleteAndClaim {
            team: team(),
            caller: caller(),
            task_id: line.text("task"),
            fence: line.number("fence"),
            result: line.bytes("result"),
            worker: line.text("worker"),
        },
        _ => return None,
    })
}

fn command(line: &Line<'_>) -> Option<Command> {
    Some(match line.verb {
        "put" => Command::KvPut {
            key: line.bytes("key"),
            value: line.bytes("value"),
            expect_version: line.optional("expect"),
        },
        "delete" => Command::KvDelete {
            key: line.bytes("key"),
            expect_version: line.optional("expect"),
        },
        "acquire" => Command::LeaseAcquire {
            lease: line.resource(),
            holder: line.text("holder"),
            slots: u32::try_from(line.number("slots")).expect("slots fit u32"),
            ttl_ms: line.number("ttl"),
            wait_ms: line.number_or("wait", 0),
        },
        "renew" => Command::LeaseRenew {
            lease: line.resource(),
            holder: line.text("holder"),
            ttl_ms: line.number("ttl"),
        },
        "release" => Command::LeaseRelease {
            lease: line.resource(),
            holder: line.text("holder"),
        },
        "release-all" => Command::LeaseReleaseAll {
            holder: line.text("holder"),
        },
        "consume" => Command::CounterConsume {
            counter: line.resource(),
            amount: line.number("amount"),
            cap: line.number("cap"),
            reset: reset(&line.text("reset")),
            timezone: line.text("tz"),
        },
        "append" => Command::LedgerAppend {
            ledger: line.resource(),
            entry: line.bytes("entry"),
            appended_by: line.text("by"),
            retain_ms: line.number("retain"),
        },
        "tick" => Command::Tick,
        "assign" => Command::RangeAssign {
            start: line.number("start"),
            last: line.number("last"),
            epoch: line.number("epoch"),
            fence_above: line.number_or("above", 0),
        },
        "freeze" => Command::RangeFreeze {
            start: line.number("start"),
            last: line.number("last"),
            epoch: line.number("epoch"),
        },
        "split" => Command::RangeSplit {
            start: line.number("start"),
            last: line.number("last"),
            at: line.number("at"),
            epoch: line.number("epoch"),
        },
        "drop" => Command::RangeDrop {
            start: line.number("start"),
            last: line.number("last"),
        },
        "campaign" => Command::Campaign {
            group: line.text("group"),
            candidate: line.text("candidate"),
            endpoints: line.list("endpoints"),
            ttl_ms: line.number("ttl"),
        },
        "proclaim" => Command::Proclaim {
            group: line.text("group"),
            candidate: line.text("candidate"),
            fence: line.number("fence"),
            endpoints: line.list("endpoints"),
        },
        "resign" => Command::Resign {
            group: line.text("group"),
            candidate: line.text("candidate"),
            fence: line.number("fence"),
        },
        "renew-election" => Command::ElectionRenew {
            group: line.text("group"),
            candidate: line.text("candidate"),
            fence: line.number("fence"),
            ttl_ms: line.number("ttl"),
        },
        "fire" => Command::ScheduleFire {
            name: line.text("name"),
            spec: line.text("spec"),
            timezone: line.text("tz"),
            due_ms: line.time("due"),
            claimant: line.text("claimant"),
        },
        _ => return kv_command(line).or_else(|| board_command(line)),
    })
}

/// Ephemeral keys (`put-ttl`, `put-leased`, `keepalive`) and `txn-if`, whose compares are
/// `if=key:version` or `if=key=value` (comma-separated) and whose branches are
/// `then=`/`else=` lists of `put:key:value`, `delete:key`, `get:key`.
fn kv_command(line: &Line<'_>) -> Option<Command> {
    use whip_board::ephemeral::KvAttach;
    let attached = |attach| Command::KvPutAttached {
        key: line.bytes("key"),
        value: line.bytes("value"),
        expect_version: line.optional("expect"),
        attach,
    };
    Some(match line.verb {
        "put-ttl" => attached(KvAttach::Ttl {
            ttl_ms: line.number("ttl"),
        }),
        "put-leased" => attached(KvAttach::Lease {
            lease: line.resource(),
            holder: line.text("holder"),
        }),
        "keepalive" => Command::KvKeepalive {
            key: line.bytes("key"),
            ttl_ms: line.number("ttl"),
        },
        "txn-if" => Command::KvTxnIf {
            compares: line.list("if").iter().map(|c| txn_compare(c)).collect(),
            success: line.list("then").iter().map(|op| txn_op(op)).collect(),
            failure: line.list("else").iter().map(|op| txn_op(op)).collect(),
        },
        _ => return None,
    })
}

fn txn_compare(text: &str) -> whip_board::kv_txn::Compare {
    use whip_board::kv_txn::{Compare, CompareOp, CompareTarget};
    let (key, target) = match text.split_once('=') {
        Some((key, value)) => (key, CompareTarget::Value(value.as_bytes().to_vec())),
        None => {
            let (key, version) = text.split_once(':').expect("if=key:version or key=value");
            let version = version.parse().expect("a version is a number");
            (key, CompareTarget::Version(version))
        }
    };
    Compare {
        key: key.as_bytes().to_vec(),
        target,
        op: CompareOp::Equal,
    }
}

fn txn_op(text: &str) -> whip_board::kv_txn::TxnOp {
    use whip_board::kv_txn::TxnOp;
    let bytes = |s: &str| s.as_bytes().to_vec();
    match text.splitn(3, ':').collect::<Vec<_>>()[..] {
        ["put", key, value] => TxnOp::Put {
            key: bytes(key),
            value: bytes(value),
        },
        ["delete", key] => TxnOp::Delete { key: bytes(key) },
        ["get", key] => TxnOp::Get { key: bytes(key) },
        _ => panic!("an operation is put:key:value, delete:key or get:key, got {text}"),
    }
}

fn read(line: &Line<'_>) -> Query {
    let limit = u32::try_from(line.number_or("limit", 0)).expect("limit fits u32");
    let prefix = line
        .args
        .get("prefix")
        .map_or(String::new(), |p| p.to_string());
    match line.verb {
        "get" => Query::KvGet {
            key: line.bytes("key"),
        },
        "leases" => Query::LeaseList { prefix, limit },
        "counters" => Query::CounterList { prefix, limit },
        "ledger" => Query::LedgerList {
            owner: line.text("owner"),
            name: line.text("name"),
            partition: line.args.get("partition").map(|p| p.to_string()),
            after_seq: line.number_or("after", 0),
            limit,
        },
        "next-deadline" => Query::NextDeadline,
        "ranges" => Query::Ranges,
        "export" => Query::RangeExport {
            start: line.number("start"),
            last: line.number("last"),
            after_key: Vec::new(),
            limit,
        },
        "leader" => Query::ElectionLeader {
            group: line.text("group"),
        },
        "elections" => Query::ElectionList { prefix, limit },
        "schedules" => Query::ScheduleList { prefix, limit },
        "team" => Query::Team {
            team: line.text("team"),
        },
        "tasks" => Query::BoardList {
            team: line.text("team"),
            state: line.args.get("state").map(|s| task_state(s)),
            limit,
        },
        "task" => Query::BoardTask {
            team: line.text("team"),
            task_id: line.text("task"),
        },
        "stats" => Query::BoardStats {
            team: line.text("team"),
        },
        "dead-letters" => Query::BoardDeadLetters {
            team: line.text("team"),
            limit,
        },
        "cell-ready" => Query::BoardCellReady { limit },
        "mailbox" => Query::Mailbox {
            team: line.text("team"),
            agent: line.text("agent"),
            after_seq: line.number_or("after", 0),
            limit,
        },
        "outbox-head" => Query::OutboxHead {
            to_cell: line.number("to"),
        },
        "outbox" => Query::OutboxPending {
            to_cell: line.number("to"),
            from_seq: line.number_or("from", 0),
            limit,
        },
        "channels" => Query::OutboxChannels,
        "alarms" => Query::Alarms,
        other => panic!("unknown command {other}"),
    }
}

/// A read, wrapped as a router's read when the line names an `epoch=`.
fn routed_read(line: &Line<'_>) -> Query {
    let query = read(line);
    match line.optional("epoch") {
        Some(epoch) => Query::Routed {
            epoch,
            query: Box::new(query),
        },
        None => query,
    }
}

fn lease_row(view: &LeaseView) -> String {
    let l = &view.lease;
    let mut row = format!("{}/{}/{} slots={}", l.owner, l.name, l.key, view.slots);
    for h in &view.holders {
        write!(row, " held:{}@{}..{}", h.holder, h.fence, h.expires_at_ms).expect("write");
    }
    for (holder, until) in &view.waiters {
        write!(row, " waiting:{holder}..{until}").expect("write");
    }
    row
}

fn ledger_row(row: &LedgerEntryView) -> String {
    let l = &row.ledger;
    let entry = String::from_utf8_lossy(&row.entry);
    format!(
        "{}/{}#{} [{}] by {} at {}: {entry}",
        l.owner, l.name, row.seq, l.key, row.appended_by, row.at_ms
    )
}

fn leader_row(leader: &ElectionLeader) -> String {
    format!(
        "{} leader={}@{}..{} endpoints=[{}]",
        leader.group,
        leader.candidate,
        leader.fence,
        leader.expires_at_ms,
        leader.endpoints.join(",")
    )
}

fn rfc3339(time_ms: u64) -> String {
    let at = DateTime::from_timestamp_millis(time_ms as i64).expect("time in range");
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn schedule_row(view: &ScheduleView) -> String {
    format!(
        "{} spec={:?} tz={} last_due={} claimant={} fence={}",
        view.name,
        view.spec,
        view.timezone,
        rfc3339(view.last_due_ms),
        view.claimant,
        view.fence
    )
}

/// One task on one line: id, where it is, its state, then what it has.
fn task_row(task: &TaskView) -> String {
    let mut row = format!(
        "{} team={} tier={} state={} deliveries={} posted={} body={}",
        task.id,
        task.team,
        task.tier,
        task.state,
        task.delivery_count,
        task.posted_ms,
        String::from_utf8_lossy(&task.body)
    );
    if task.fence > 0 {
        let worker = task.worker.as_deref().unwrap_or("-");
        write!(
            row,
            " worker={worker} fence={} deadline={}",
            task.fence, task.deadline_ms
        )
        .expect("write");
    }
    if !task.result.is_empty() {
        write!(row, " result={}", String::from_utf8_lossy(&task.result)).expect("write");
    }
    for f in &task.failures {
        write!(
            row,
            " failed:{}:{}@{}:{:?}",
            f.delivery, f.worker, f.at_ms, f.error
        )
        .expect("write");
    }
    row
}

fn team_row(view: &TeamView) -> String {
    let s = &view.settings;
    format!(
        "{} supervisor={} members=[{}] parent={} reclaim={} deliveries={} spill={} \
         task-bytes={}",
        view.team,
        view.supervisor,
        view.members.join(","),
        view.parent.as_deref().unwrap_or("-"),
        s.reclaim_ms,
        s.delivery_limit,
        s.spill_after_ms,
        s.task_bytes_max
    )
}

fn stats_row(view: &BoardStatsView) -> String {
    format!(
        "ready={} claimed={} done={} dead={} tier={} cell: ready={} claimed={} done={} dead={}",
        view.ready,
        view.claimed,
        view.done,
        view.dead,
        view.tier,
        view.cell_ready,
        view.cell_claimed,
        view.cell_done,
        view.cell_dead
    )
}

fn mail_row(message: &MailboxMessage) -> String {
    format!(
        "#{} from={} at={} {:?}: {}",
        message.seq,
        message.from,
        message.at_ms,
        message.kind,
        String::from_utf8_lossy(&message.body)
    )
}

/// `done=TASK:FENCE:RESULT,...` of a `claim-many` line (none without `done=`).
fn completions(line: &Line<'_>) -> Vec<Completion> {
    let Some(text) = line.args.get("done") else {
        return Vec::new();
    };
    text.split(',')
        .map(|item| {
            let mut parts = item.splitn(3, ':');
            let mut next = || parts.next().expect("done=TASK:FENCE:RESULT");
            let (task_id, fence, result) = (next(), next(), next());
            Completion {
                task_id: task_id.to_string(),
                fence: fence.parse().expect("a fence is a number"),
                result: result.as_bytes().to_vec(),
            }
        })
        .collect()
}

/// An outcome as `Debug`, except that a claimed task prints as a task row (a prefetching
/// claim's as one row per claim on the lines after it).
fn outcome_text(outcome: &Outcome) -> String {
    match outcome {
        Outcome::TasksClaimed { completed, claims } => {
            let mut text = format!("TasksClaimed {{ completed: {completed:?} }}");
            for c in claims {
                let (fence, deadline_ms, tier) = (c.fence, c.deadline_ms, c.tier);
                let row = task_row(&c.task);
                write!(
                    text,
                    "\n  claimed {{ fence: {fence}, deadline_ms: {deadline_ms}, "
                )
                .and_then(|()| write!(text, "tier: {tier:?} }} {row}"))
                .expect("write to a string");
            }
            text
        }
        Outcome::TaskClaimed {
            task,
            fence,
            deadline_ms,
            tier,
        } => format!(
            "TaskClaimed {{ fence: {fence}, deadline_ms: {deadline_ms}, tier: {tier:?} }} {}",
            task_row(task)
        ),
        other => format!("{other:?}"),
    }
}

/// A channel hash argument: `zero` is 32 zero bytes (the first envelope's previous hash),
/// any other text stands for its bytes.
fn hash_arg(line: &Line<'_>, name: &str) -> Vec<u8> {
    match line.text(name).as_str() {
        "zero" => vec![0; 32],
        text => text.as_bytes().to_vec(),
    }
}

/// The task an envelope carries (id and body from the line).
fn handed_task(line: &Line<'_>) -> whip_board::types::TaskView {
    whip_board::types::TaskView {
        id: line.text("task"),
        team: line.text("queue"),
        tier: whip_board::types::Tier::Cell,
        state: whip_board::types::TaskState::Ready,
        body: line.bytes("body"),
        delivery_count: 0,
        worker: None,
        fence: 0,
        deadline_ms: 0,
        posted_ms: 0,
        failures: Vec::new(),
        result: Vec::new(),
        spill_after_ms: 0,
    }
}

fn render(result: QueryResult) -> String {
    let rows: Vec<String> = match result {
        QueryResult::Kv(None) => vec!["absent".into()],
        QueryResult::Kv(Some(e)) => {
            vec![format!(
                "value={} version={}",
                String::from_utf8_lossy(&e.value),
                e.version
            )]
        }
        QueryResult::Leases(views) => views.iter().map(lease_row).collect(),
        QueryResult::Counters(views) => views
            .iter()
            .map(|c| {
                let id = &c.counter;
                let name = format!("{}/{}/{}", id.owner, id.name, id.key);
                format!(
                    "{name} consumed={} cap={} period={}",
                    c.consumed, c.cap, c.period
                )
            })
            .collect(),
        QueryResult::LedgerEntries(rows) => rows.iter().map(ledger_row).collect(),
        QueryResult::NextDeadline(next) => vec![format!("{next:?}")],
        QueryResult::WrongRange { epoch } => vec![format!("WrongRange {{ epoch: {epoch} }}")],
        QueryResult::Ranges(rows) => rows
            .iter()
            .map(|r| {
                let state = if r.frozen { " frozen" } else { "" };
                format!("{:#x}..={:#x} epoch={}{state}", r.start, r.last, r.epoch)
            })
            .collect(),
        QueryResult::RangeRows { rows, next } => {
            vec![format!("{} rows, next={:?}", rows.len(), next.is_some())]
        }
        QueryResult::KvRange(page) => kv_rows(&page),
        QueryResult::ElectionLeader(leader) => leader.iter().map(leader_row).collect(),
        QueryResult::Elections(leaders) => leaders.iter().map(leader_row).collect(),
        QueryResult::Schedules(views) => views.iter().map(schedule_row).collect(),
        QueryResult::Team(view) => view.iter().map(team_row).collect(),
        QueryResult::Tasks(tasks) => tasks.iter().map(task_row).collect(),
        QueryResult::BoardStats(view) => view.iter().map(stats_row).collect(),
        QueryResult::Mailbox(messages) => messages.iter().map(mail_row).collect(),
        QueryResult::OutboxHead { seq, prev_hash } => {
            vec![format!(
                "next={seq} prev={}",
                String::from_utf8_lossy(&prev_hash)
            )]
        }
        QueryResult::Envelopes(rows) => rows
            .iter()
            .map(|(seq, bytes)| format!("#{seq} {}", String::from_utf8_lossy(bytes)))
            .collect(),
        QueryResult::Cells(cells) => cells.iter().map(|c| format!("cell {c}")).collect(),
        QueryResult::Alarms(alarms) => alarms
            .iter()
            .map(|(at, text)| format!("@{at} {text}"))
            .collect(),
        other => vec![format!("{other:?}")],
    };
    match rows.is_empty() {
        true => "(none)".into(),
        false => rows.join("\n"),
    }
}

/// Split a command line at whitespace outside double quotes.
fn words(text: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = None;
    let mut quoted = false;
    for (at, c) in text.char_indices() {
        if c.is_whitespace() && !quoted {
            if let Some(from) = start.take() {
                words.push(&text[from..at]);
            }
            continue;
        }
        start.get_or_insert(at);
        if c == '"' {
            quoted = !quoted;
        }
    }
    assert!(!quoted, "unbalanced quote in {text}");
    if let Some(from) = start {
        words.push(&text[from..]);
    }
    words
}

impl Runner {
    fn run(&mut self, text: &str) -> String {
        let mut words = words(text).into_iter().peekable();
        if let Some(time) = words.peek().and_then(|w| w.strip_prefix('@')) {
            let time_ms = parse_time(time, self.time_ms);
            assert!(time_ms >= self.time_ms, "time goes backward at {text}");
            self.time_ms = time_ms;
            words.next();
        }
        let verb = words.next().expect("a command");
        let args = words
            .map(|w| {
                let (name, value) = w
                    .split_once('=')
                    .unwrap_or_else(|| panic!("argument {w} is not a=b"));
                let unquoted = value.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
                (name, unquoted.unwrap_or(value))
            })
            .collect();
        let line = Line { verb, args };
        match command(&line) {
            Some(command) => {
                self.index += 1;
                let stamp = Stamp {
                    index: self.index,
                    position: 0,
                    time_ms: self.time_ms,
                };
                let idempotency_key = line.args.get("idem").map(|k| k.to_string());
                // What a client may send goes as the operator; the rest as a server.
                let operator = whip_board::access::Caller::Operator;
                let caller = match whip_board::admit::admit(&operator, &command) {
                    Ok(()) => operator,
                    Err(_) => whip_board::access::Caller::Server,
                };
                let request = Request {
                    idempotency_key,
                    command,
                    epoch: line.number_or("epoch", 0),
                    caller,
                };
                outcome_text(&apply(&mut self.txn, stamp, &request).outcome)
            }
            None => render(query(&self.txn, self.time_ms, &routed_read(&line))),
        }
    }
}

/// A range read's rows, then where the next page starts if it stopped early.
fn kv_rows(page: &whip_board::KvPage) -> Vec<String> {
    let rows = page.rows.iter().map(|(k, e)| {
        format!(
            "{}={} version={}",
            String::from_utf8_lossy(k),
            String::from_utf8_lossy(&e.value),
            e.version
        )
    });
    let resume =
        (page.resume_after.iter()).map(|k| format!("resume_after={}", String::from_utf8_lossy(k)));
    rows.chain(resume).collect()
}

/// Run one file; returns the file rewritten with actual output.
fn run_file(text: &str) -> String {
    let mut runner = Runner {
        txn: MemTxn::default(),
        index: 0,
        time_ms: 0,
    };
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut outputs = vec![runner.run(trimmed)];
        for line in lines.by_ref() {
            out.push_str(line);
            out.push('\n');
            if line == "----" {
                break;
            }
            if !line.trim().is_empty() && !line.trim().starts_with('#') {
                outputs.push(runner.run(line.trim()));
            }
        }
        // Skip the old expected output up to the blank line ending the block.
        for line in lines.by_ref() {
            if line.is_empty() {
                break;
            }
        }
        for output in outputs {
            out.push_str(&output);
            out.push('\n');
        }
        if lines.peek().is_some() {
            out.push('\n');
        }
    }
    out
}

#[test]
fn scenarios() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let rewrite = std::env::var_os("REWRITE").is_some();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("board/testdata exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no scenario files in {}", dir.display());
    let mut failed = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("scenario is readable");
        let actual = run_file(&text);
        if rewrite {
            std::fs::write(&path, &actual).expect("scenario is writable");
        } else if actual != text {
            eprintln!(
                "--- {} expected\n{text}\n+++ actual\n{actual}",
                path.display()
            );
            failed.push(path.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "scenarios differ (REWRITE=1 regenerates): {failed:?}"
    );
}
