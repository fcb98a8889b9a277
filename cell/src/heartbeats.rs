//! Heartbeats of many cells to one node, sent together.
//!
//! A fabric node leads about a third of the cells it hosts, and each leader heartbeats
//! each follower every few hundred milliseconds, so an idle node sent one gRPC call per
//! cell per follower per heartbeat: most of an idle cell's cost was HTTP/2 and TLS framing
//! of those calls (BENCHMARKS.md, "Idle cells"). A node now triggers the heartbeats of all
//! the cells it leads at once (`whip_fabric::node`), and the empty AppendEntries they make
//! for one peer go out as one `Raft/AppendBatch` call.
//!
//! One [`Coalescer`] per peer address queues empty AppendEntries. The first to arrive
//! starts a flush, which yields once (the other leaders of the round queue theirs) and
//! sends what is queued; what arrives while a batch is in flight goes in the next batch.
//! Nothing waits on a timer, so a lone empty AppendEntries (a single cell's heartbeat, a
//! leader's read-index check) goes out at once, as one plain `AppendEntries` call. A batch
//! answers each cell on its own: one cell's refusal or slow core does not fail the others
//! (the server gives each [`limits::HEARTBEAT_ITEM_TIMEOUT_MS`]), and a batch the peer
//! does not answer within [`limits::HEARTBEAT_BATCH_TIMEOUT_MS`] fails its heartbeats as
//! unreachable, so queued ones wait no longer than that.
//!
//! A peer of an older build answers `AppendBatch` with `unimplemented`; the coalescer
//! then sends that peer's heartbeats one by one from then on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tonic::transport::Channel;
use tonic::{Code, Status};
use whip_proto::v1::raft_client::RaftClient;
use whip_proto::v1::{Blob, BlobAnswer, BlobBatch};

use crate::limits;

/// The empty AppendEntries waiting for one peer, sent in batches.
pub(crate) struct Coalescer {
    client: RaftClient<Channel>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    queue: Vec<Queued>,
    /// A flush is under way (it sends whatever is queued before it stops).
    flushing: bool,
    /// The peer does not know `AppendBatch`: one call per heartbeat.
    unbatched: bool,
}

struct Queued {
    blob: Blob,
    answer: oneshot::Sender<Result<Blob, Status>>,
}

impl Coalescer {
    /// A coalescer sending over `client` (the peer's shared channel).
    pub(crate) fn new(client: RaftClient<Channel>) -> Arc<Coalescer> {
        Arc::new(Coalescer {
            client,
            state: Mutex::default(),
        })
    }

    /// Send `blob`, an empty AppendEntries of cell `blob.cell`, with the others queued for
    /// this peer; its own answer.
    pub(crate) async fn send(self: &Arc<Self>, blob: Blob) -> Result<Blob, Status> {
        if self.state.lock().expect("heartbeat queue lock").unbatched {
            return self.one(blob).await;
        }
        let (answer, answered) = oneshot::channel();
        let start = {
            let mut state = self.state.lock().expect("heartbeat queue lock");
            state.queue.push(Queued { blob, answer });
            !std::mem::replace(&mut state.flushing, true)
        };
        if start {
            tokio::spawn(self.clone().flush());
        }
        answered
            .await
            .unwrap_or_else(|_| Err(Status::unavailable("the heartbeat batch was dropped")))
    }

    /// Send what is queued, batch after batch, until nothing is.
    async fn flush(self: Arc<Self>) {
        // The other leaders of this node's heartbeat round queue theirs meanwhile.
        tokio::task::yield_now().await;
        loop {
            let batch: Vec<Queued> = {
                let mut state = self.state.lock().expect("heartbeat queue lock");
                if state.queue.is_empty() {
                    state.flushing = false;
                    return;
                }
                let n = state.queue.len().min(limits::HEARTBEAT_BATCH_MAX);
                state.queue.drain(..n).collect()
            };
            self.send_batch(batch).await;
        }
    }

    async fn send_batch(&self, mut batch: Vec<Queued>) {
        if batch.len() == 1 {
            let Queued { blob, answer } = batch.remove(0);
            let _ = answer.send(self.one(blob).await);
            return;
        }
        let (blobs, answers): (Vec<Blob>, Vec<_>) =
            batch.into_iter().map(|q| (q.blob, q.answer)).unzip();
        let mut request = tonic::Request::new(BlobBatch { blobs });
        request.set_timeout(batch_timeout());
        let mut client = self.client.clone();
        let results: Vec<Result<Blob, Status>> = match client.append_batch(request).await {
            Ok(response) => {
                let got = response.into_inner().answers;
                if got.len() == answers.len() {
                    got.into_iter().map(answer_of).collect()
                } else {
                    let n = got.len();
                    let wrong = format!("a batch of {} answered {n} times", answers.len());
                    vec![Err(Status::unavailable(wrong)); answers.len()]
                }
            }
            Err(status) => {
                if status.code() == Code::Unimplemented {
                    tracing::info!("peer does not batch heartbeats: one call each from now on");
                    self.state.lock().expect("heartbeat queue lock").unbatched = true;
                }
                vec![Err(status); answers.len()]
            }
        };
        for (answer, result) in answers.into_iter().zip(results) {
            let _ = answer.send(result);
        }
    }

    /// One plain `AppendEntries` call.
    async fn one(&self, blob: Blob) -> Result<Blob, Status> {
        let mut request = tonic::Request::new(blob);
        request.set_timeout(batch_timeout());
        let mut client = self.client.clone();
        client
            .append_entries(request)
            .await
            .map(tonic::Response::into_inner)
    }
}

fn batch_timeout() -> Duration {
    Duration::from_millis(limits::HEARTBEAT_BATCH_TIMEOUT_MS)
}

/// One answer of a batch as the call alone would have answered.
fn answer_of(answer: BlobAnswer) -> Result<Blob, Status> {
    match answer.code {
        0 => Ok(Blob {
            data: answer.data,
            cell: 0,
        }),
        code => {
            let code = i32::try_from(code).map_or(Code::Unknown, Code::from);
            Err(Status::new(code, answer.message))
        }
    }
}

/// How a server answers one cell's AppendEntries of a batch.
pub(crate) fn to_answer(result: Result<Blob, Status>) -> BlobAnswer {
    match result {
        Ok(blob) => BlobAnswer {
            data: blob.data,
            code: 0,
            message: String::new(),
        },
        Err(status) => BlobAnswer {
            data: Vec::new(),
            code: status.code() as u32,
            message: status.message().to_string(),
        },
    }
}
