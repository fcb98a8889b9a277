//! How a leader answers the requests of an entry it proposed: the cell's openraft
//! `Responder`.
//!
//! openraft's state machine worker hands an applied entry's result to the entry's
//! responder right after the apply (patch item 13, `vendor/openraft/PATCH.md`).
//! [`Answer::Requests`] carries each request's caller, so every caller is answered from
//! there, with no task in between; the proposing task only hears that its batch is done,
//! or gets the batch back to route elsewhere. [`Answer::Oneshot`] is openraft's own way,
//! kept for `Raft::client_write`.
//!
//! Invariant: every request of a proposed batch is answered exactly once, with its
//! outcome, or by the proposer after the batch is handed back (an error from Raft), or
//! with `Unavailable` when the responder is dropped unanswered (Raft stopped before it
//! applied the entry). This module decides nothing about a request: it carries outcomes.

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Instant;

use openraft::error::ClientWriteError;
use openraft::impls::OneshotResponder;
use openraft::raft::ClientWriteResult;
use openraft::raft::responder::Responder;
use tokio::sync::oneshot;

use crate::runtime::Pending;
use crate::stages::{Stage, Stages};
use crate::types::{Batch, NodeId, TypeConfig};

/// A batch Raft could not apply, handed back to its proposer with the reason.
pub(crate) type Handback = (Vec<Pending>, ClientWriteError<NodeId, openraft::BasicNode>);

/// Who waits on a proposed entry.
pub enum Answer {
    /// openraft's own: `Raft::client_write` and the membership calls wait on its receiver.
    Oneshot(OneshotResponder<TypeConfig>),
    /// The callers of each request of the entry's batch.
    Requests(Box<Proposed>),
}

/// A batch this member proposed, waiting for its entry to apply.
pub struct Proposed {
    batch: Vec<Pending>,
    stages: Arc<Stages>,
    /// When and on which thread the batch was handed to Raft (the `committed` stage).
    proposed: Instant,
    proposed_on: ThreadId,
    /// Told once the batch is answered (`None`) or handed back.
    done: Option<oneshot::Sender<Option<Handback>>>,
}

impl Proposed {
    /// A batch handed to Raft now; `done` hears how it ended.
    pub(crate) fn new(
        batch: Vec<Pending>,
        stages: Arc<Stages>,
        done: oneshot::Sender<Option<Handback>>,
    ) -> Self {
        Proposed {
            batch,
            stages,
            proposed: Instant::now(),
            proposed_on: crate::stages::here(),
            done: Some(done),
        }
    }

    fn answer(mut self, result: ClientWriteResult<TypeConfig>) {
        let batch = std::mem::take(&mut self.batch);
        let handback = match result {
            Ok(response) => {
                self.stages
                    .record(Stage::Committed, self.proposed.elapsed());
                let switches = crate::stages::switched(self.proposed_on);
                self.stages.hop(Stage::Committed, switches);
                let outcomes = response.data.outcomes;
                assert_eq!(outcomes.len(), batch.len(), "one outcome per request");
                for (p, outcome) in batch.into_iter().zip(outcomes) {
                    p.answer(Ok(outcome));
                }
                None
            }
            Err(e) => Some((batch, e)),
        };
        if let Some(done) = self.done.take() {
            // The proposer is gone only when its member is stopping: a batch it can no
            // longer route fails as stopping, and its callers retry elsewhere.
            if let Err(Some((batch, _))) = done.send(handback) {
                crate::runtime::fail_stopped(batch);
            }
        }
    }
}

impl Drop for Proposed {
    /// Raft dropped the entry's responder unanswered: it stopped before the apply.
    fn drop(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        crate::runtime::fail_stopped(batch);
    }
}

impl From<OneshotResponder<TypeConfig>> for Answer {
    fn from(tx: OneshotResponder<TypeConfig>) -> Self {
        Answer::Oneshot(tx)
    }
}

impl Responder<TypeConfig> for Answer {
    type Receiver = <OneshotResponder<TypeConfig> as Responder<TypeConfig>>::Receiver;

    fn from_app_data(app_data: Batch) -> (Batch, Self, Self::Receiver) {
        let (app_data, tx, rx) = OneshotResponder::from_app_data(app_data);
        (app_data, Answer::Oneshot(tx), rx)
    }

    fn send(self, result: ClientWriteResult<TypeConfig>) {
        match self {
            Answer::Oneshot(tx) => tx.send(result),
            Answer::Requests(proposed) => (*proposed).answer(result),
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::error::ForwardToLeader;
    use openraft::raft::ClientWriteResponse;
    use openraft::{CommittedLeaderId, LogId};
    use whip_board::{Command, Outcome, Request};

    use super::*;
    use crate::CellError;
    use crate::types::BatchOutcome;

    type Reply = oneshot::Receiver<Result<Outcome, CellError>>;

    /// `n` puts accepted now, their callers' receivers, and the proposer's `done` receiver.
    fn proposed(n: usize) -> (Proposed, Vec<Reply>, oneshot::Receiver<Option<Handback>>) {
        let (batch, replies): (Vec<_>, Vec<_>) = (0..n)
            .map(|i| {
                let command = Command::KvPut {
                    key: format!("k{i}").into_bytes(),
                    value: b"v".to_vec(),
                    expect_version: None,
                };
                Pending::accepted(Request::new(Some(format!("key-{i}")), command))
            })
            .unzip();
        let (done, heard) = oneshot::channel();
        let proposed = Proposed::new(batch, Arc::new(Stages::default()), done);
        (proposed, replies, heard)
    }

    fn written(version: u64) -> Outcome {
        Outcome::KvWritten {
            version,
            fence: version,
        }
    }

    #[test]
    fn each_caller_gets_its_own_outcome_and_the_proposer_hears_done() {
        let (proposed, replies, mut heard) = proposed(3);
        let response = ClientWriteResponse {
            log_id: LogId::new(CommittedLeaderId::new(2, 1), 7),
            data: BatchOutcome {
                outcomes: vec![written(10), written(11), written(12)],
            },
            membership: None,
        };
        Answer::Requests(Box::new(proposed)).send(Ok(response));
        for (i, mut reply) in replies.into_iter().enumerate() {
            let outcome = reply.try_recv().expect("answered").expect("an outcome");
            assert_eq!(outcome, written(10 + i as u64), "caller {i}");
        }
        assert!(
            matches!(heard.try_recv(), Ok(None)),
            "done, nothing handed back"
        );
    }

    #[test]
    fn a_batch_raft_refused_goes_back_to_its_proposer_unanswered() {
        let (proposed, mut replies, mut heard) = proposed(2);
        let refusal = ClientWriteError::ForwardToLeader(ForwardToLeader {
            leader_id: Some(3),
            leader_node: None,
        });
        Answer::Requests(Box::new(proposed)).send(Err(refusal));
        let Ok(Some((batch, error))) = heard.try_recv() else {
            panic!("the batch comes back to be routed");
        };
        assert_eq!(batch.len(), 2);
        assert!(matches!(error, ClientWriteError::ForwardToLeader(_)));
        for reply in &mut replies {
            assert!(reply.try_recv().is_err(), "nobody answered yet");
        }
        // The proposer answers them: here, by failing them as it would.
        crate::runtime::fail_stopped(batch);
        for mut reply in replies {
            assert!(matches!(
                reply.try_recv(),
                Ok(Err(CellError::Unavailable(_)))
            ));
        }
    }

    #[test]
    fn a_responder_dropped_unanswered_fails_every_caller_as_stopping() {
        let (proposed, replies, mut heard) = proposed(3);
        drop(Answer::Requests(Box::new(proposed)));
        for mut reply in replies {
            assert!(matches!(
                reply.try_recv(),
                Ok(Err(CellError::Unavailable(_)))
            ));
        }
        assert!(
            heard.try_recv().is_err(),
            "the proposer hears nothing: already failed"
        );
    }

    #[test]
    fn a_batch_handed_back_to_a_proposer_that_is_gone_fails_as_stopping() {
        let (proposed, replies, heard) = proposed(2);
        drop(heard);
        let refusal = ClientWriteError::ForwardToLeader(ForwardToLeader {
            leader_id: None,
            leader_node: None,
        });
        Answer::Requests(Box::new(proposed)).send(Err(refusal));
        for mut reply in replies {
            assert!(matches!(
                reply.try_recv(),
                Ok(Err(CellError::Unavailable(_)))
            ));
        }
    }
}
