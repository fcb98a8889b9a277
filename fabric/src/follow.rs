//! The follow-up executor of a fabric node: carries out what board decided must follow an
//! apply (`whip_board::next`) for every data cell this node leads.
//!
//! Every `FOLLOW_UP_LOOK_MS` the node looks at the cells it leads; a cell whose applied
//! index has not moved since a look that found its outbox empty costs nothing (a follow-up
//! only appears through an apply). A cell with follow-ups has them carried out through this
//! node's router (each command routed to the cell it concerns: a fabric queue's, an agent's,
//! every data cell for a team leave) and acknowledged on the cell, by
//! `whip_cell::follow::drain`. A node killed mid-way loses nothing: the outbox is
//! replicated, the next leader's executor sends the same commands under the same keys, and
//! the cells that already ran them answer from their idempotency records.
//!
//! This module decides nothing: what follows, and whether, is board's.

use std::collections::HashMap;
use std::sync::Weak;
use std::time::Duration;

use whip_board::{Outcome, Query, QueryResult, Request};
use whip_cell::CellError;
use whip_cell::follow::Outbox;

use crate::node::{Inner, Node};

/// One data cell's outbox, read and acknowledged through its leader here.
struct CellOutbox<'a> {
    node: &'a Node,
    cell: u64,
}

#[tonic::async_trait]
impl Outbox for CellOutbox<'_> {
    async fn read_home(&self, query: Query) -> Result<QueryResult, CellError> {
        self.node.read_cell(None, self.cell, query).await
    }

    async fn submit_home(&self, request: Request) -> Result<Outcome, CellError> {
        self.node.submit_cell(None, self.cell, request).await
    }
}

pub(crate) async fn follow_loop(inner: Weak<Inner>) {
    let every = Duration::from_millis(whip_cell::limits::FOLLOW_UP_LOOK_MS);
    // Per cell: the applied index at which its outbox was last found empty.
    let mut empty_at: HashMap<u64, u64> = HashMap::new();
    // Per cell: when a failed round last warned (one warning per `FOLLOW_UP_WARN_MS`).
    let mut warned_at: HashMap<u64, tokio::time::Instant> = HashMap::new();
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = inner.upgrade() else { return };
        let node = Node { inner };
        for cell in node.hosted_ids() {
            let Some(applied) = node.applied_index(cell) else {
                continue;
            };
            if !node.leads(cell) || empty_at.get(&cell) == Some(&applied) {
                continue;
            }
            let outbox = CellOutbox { node: &node, cell };
            match whip_cell::follow::drain(&outbox, &node).await {
                Ok(0) => {
                    empty_at.insert(cell, applied);
                }
                Ok(done) => {
                    tracing::info!(cell, done, "follow-ups carried out");
                    empty_at.remove(&cell);
                }
                // A cell without a quorum or a leader is retried next round without a
                // warning per round (200 ms); anything else is worth one.
                Err(e @ (CellError::Unavailable(_) | CellError::NotLeader { .. })) => {
                    tracing::debug!(cell, error = %e, "carrying out follow-ups, retrying")
                }
                Err(e) => {
                    let now = tokio::time::Instant::now();
                    let quiet = Duration::from_millis(crate::limits::FOLLOW_UP_WARN_MS);
                    match warned_at.get(&cell) {
                        Some(at) if now.duration_since(*at) < quiet => {
                            tracing::debug!(cell, error = %e, "carrying out follow-ups")
                        }
                        _ => {
                            tracing::warn!(cell, error = %e, "carrying out follow-ups");
                            warned_at.insert(cell, now);
                        }
                    }
                }
            }
        }
    }
}
