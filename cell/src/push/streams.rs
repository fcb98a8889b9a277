//! Server streams: team signals and election observers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tonic::Status;
use whip_board::{Query, point_of};
use whip_proto::v1 as pb;

use crate::service::{Dispatch, signal_ledger};
use crate::{convert, limits};

/// Open server streams and waits, per server and per caller: each reads the state machine
/// after applies, so the number of them is the cost an outsider could run up.
#[derive(Default)]
pub(crate) struct StreamSlots {
    open: Mutex<(usize, HashMap<String, usize>)>,
}

/// One open stream's slot, given back when the stream ends.
pub(crate) struct StreamSlot {
    slots: Arc<StreamSlots>,
    caller: String,
}

impl StreamSlots {
    /// A slot for a stream of `caller` (an agent, or the peer address of an anonymous
    /// caller); refused past [`limits::STREAMS_MAX`] on this server or
    /// [`limits::STREAMS_PER_CALLER_MAX`] for the caller.
    pub(crate) fn take(self: &Arc<Self>, caller: String) -> Result<StreamSlot, Status> {
        let mut open = self.open.lock().expect("stream slots lock");
        let mine = open.1.get(&caller).copied().unwrap_or(0);
        if open.0 >= limits::STREAMS_MAX || mine >= limits::STREAMS_PER_CALLER_MAX {
            return Err(Status::resource_exhausted(format!(
                "{} open streams on this server (limit {}), {mine} of {caller:?} (limit {})",
                open.0,
                limits::STREAMS_MAX,
                limits::STREAMS_PER_CALLER_MAX
            )));
        }
        open.0 += 1;
        *open.1.entry(caller.clone()).or_default() += 1;
        Ok(StreamSlot {
            slots: self.clone(),
            caller,
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().expect("stream slots lock");
        open.0 = open.0.saturating_sub(1);
        if let Some(mine) = open.1.get_mut(&self.caller) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                open.1.remove(&self.caller);
            }
        }
    }
}

/// Who holds a stream: the proven agent, else the caller's address.
pub(crate) fn stream_caller<T>(agent: Option<&str>, req: &tonic::Request<T>) -> String {
    match (agent, req.remote_addr()) {
        (Some(agent), _) => format!("agent {agent}"),
        (None, Some(addr)) => format!("address {}", addr.ip()),
        (None, None) => "local".to_string(),
    }
}

/// Send every signal after `after_seq`, then each new one, until the subscriber hangs up.
pub(crate) async fn signal_loop(
    dispatch: Arc<dyn Dispatch>,
    req: pb::SignalSubscribeRequest,
    tx: tokio::sync::mpsc::Sender<Result<pb::LedgerEntry, Status>>,
    _slot: StreamSlot,
) {
    let (owner, name) = signal_ledger(&req.team);
    let mut after = req.after_seq;
    let mut applied = None;
    loop {
        let query = Query::LedgerList {
            owner: owner.clone(),
            name: name.clone(),
            partition: Some(req.topic.clone()),
            after_seq: after,
            limit: convert::limit(0),
        };
        if applied.is_none() {
            applied = applied_for(&dispatch, &query).await;
        }
        mark(&mut applied);
        let read = dispatch.read(query).await;
        match read
            .map_err(Status::from)
            .and_then(convert::ledger_list_response)
        {
            Ok(list) => {
                for entry in list.entries {
                    after = after.max(entry.seq);
                    if tx.send(Ok(entry)).await.is_err() {
                        return;
                    }
                }
            }
            Err(status) => tracing::debug!(error = %status.message(), "signal read"),
        }
        tokio::select! {
            () = next_apply(&mut applied, None) => {}
            _ = tx.closed() => return,
        }
    }
}

/// The apply signal of this server's member of the cell answering `query`, if hosted here.
async fn applied_for(dispatch: &Arc<dyn Dispatch>, query: &Query) -> Option<Applied> {
    dispatch.applied_signal(point_of::query(query)?).await
}

type Applied = tokio::sync::watch::Receiver<u64>;

/// Take the current apply as seen, before a read: the next wait ends on any later apply.
fn mark(applied: &mut Option<Applied>) {
    if let Some(applied) = applied {
        applied.borrow_and_update();
    }
}

/// Wait for the next apply of the member (at most `WAIT_APPLIED_MAX_MS`, and at most
/// until `until`, when something changes by time alone). A server hosting no member of
/// the cell cannot be woken and waits [`limits::OBSERVE_UNHOSTED_POLL_MS`].
async fn next_apply(applied: &mut Option<Applied>, until: Option<std::time::Duration>) {
    let longest = std::time::Duration::from_millis(limits::WAIT_APPLIED_MAX_MS);
    let longest = until.map_or(longest, |until| until.min(longest));
    match applied {
        Some(applied) => {
            if let Ok(Err(_)) = tokio::time::timeout(longest, applied.changed()).await {
                // The member stopped: wait by time from now on.
                tokio::time::sleep(longest).await;
            }
        }
        None => {
            let pause = std::time::Duration::from_millis(limits::OBSERVE_UNHOSTED_POLL_MS);
            tokio::time::sleep(pause.min(longest)).await;
        }
    }
}

/// The current answer for each observed election group, shared: one reader per group and
/// server reads the state machine after its applies, however many observers follow it.
#[derive(Default)]
pub(crate) struct Watches {
    groups: Mutex<HashMap<String, Arc<LeaderWatch>>>,
}

type LeaderWatch = tokio::sync::watch::Sender<Option<pb::LeaderResponse>>;

impl Watches {
    /// Follow `group`: its reader starts with the first observer and stops after the last.
    fn follow(
        self: &Arc<Self>,
        dispatch: &Arc<dyn Dispatch>,
        group: &str,
    ) -> tokio::sync::watch::Receiver<Option<pb::LeaderResponse>> {
        let mut groups = self.groups.lock().expect("watches lock");
        if let Some(watch) = groups.get(group) {
            return watch.subscribe();
        }
        let (watch, receiver) = tokio::sync::watch::channel(None);
        let watch = Arc::new(watch);
        groups.insert(group.to_string(), watch.clone());
        let reader = read_leader(self.clone(), dispatch.clone(), group.to_string(), watch);
        tokio::spawn(reader);
        receiver
    }
}

/// Read `group`'s leader after each apply of its cell while anyone follows it, and when
/// the leader's deadline passes; publish each change. Reads hide a leader whose deadline
/// passed, so a withdrawal shows as its deadline passes.
async fn read_leader(
    watches: Arc<Watches>,
    dispatch: Arc<dyn Dispatch>,
    group: String,
    watch: Arc<LeaderWatch>,
) {
    let mut applied = None;
    loop {
        {
            let mut groups = watches.groups.lock().expect("watches lock");
            if watch.receiver_count() == 0 {
                groups.remove(&group);
                return;
            }
        }
        let query = Query::ElectionLeader {
            group: group.clone(),
        };
        if applied.is_none() {
            applied = applied_for(&dispatch, &query).await;
        }
        mark(&mut applied);
        let mut until = None;
        match dispatch
            .read(query)
            .await
            .map_err(Status::from)
            .and_then(convert::leader_response)
        {
            Ok(answer) => {
                until = answer
                    .leader
                    .as_ref()
                    .map(|l| until_expiry(l.expires_at_ms));
                watch.send_if_modified(|current| {
                    let changed = current.as_ref().map(leader_key) != Some(leader_key(&answer));
                    if changed {
                        *current = Some(answer);
                    }
                    changed
                });
            }
            // The cell is electing or cut off: keep reading; observers see the next answer.
            Err(status) => tracing::debug!(error = %status.message(), "observe read"),
        }
        next_apply(&mut applied, until).await;
    }
}

/// How long until a leader's deadline passes (a withdrawal no apply announces), by this
/// server's clock, plus a millisecond so the read after it sees the deadline passed.
fn until_expiry(expires_at_ms: u64) -> std::time::Duration {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    std::time::Duration::from_millis(expires_at_ms.saturating_sub(now_ms) + 1)
}

/// What makes a leader change: who leads, at which fence, with which endpoints (a renew
/// that only moves the deadline is not a change).
fn leader_key(answer: &pb::LeaderResponse) -> Option<(&str, u64, &[String])> {
    answer
        .leader
        .as_ref()
        .map(|l| (l.candidate.as_str(), l.fence, l.endpoints.as_slice()))
}

/// Send the group's leader, then each change, until the observer hangs up.
pub(crate) async fn observe_loop(
    watches: Arc<Watches>,
    dispatch: Arc<dyn Dispatch>,
    group: String,
    tx: tokio::sync::mpsc::Sender<Result<pb::LeaderResponse, Status>>,
    _slot: StreamSlot,
) {
    let mut answers = watches.follow(&dispatch, &group);
    loop {
        let answer = answers.borrow_and_update().clone();
        if let Some(answer) = answer
            && tx.send(Ok(answer)).await.is_err()
        {
            return;
        }
        tokio::select! {
            changed = answers.changed() => if changed.is_err() { return },
            _ = tx.closed() => return,
        }
    }
}
