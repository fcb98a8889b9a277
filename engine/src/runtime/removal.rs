//! Taking a finished instance's registry entry out, off the path that finished it.
//!
//! An instance's terminal commit is what ends it; the `run` entry the work registry holds
//! for it only has to go before it would hold a slot someone else needs. So the revoke
//! runs as a task of its own, and the runner that committed the terminal goes on to its
//! next instance one write sooner (issue 35, item 5).
//!
//! Invariants:
//! - at most `REMOVALS_PENDING_MAX` revokes are in flight per engine (its views share
//!   them); a terminal past that waits for a slot, so a stalled registry slows the runners
//!   instead of growing a queue;
//! - [`Removals::settle`] returns once every revoke started before it has ended: `whip
//!   run` settles before it reports, and an admission refused while revokes are in flight
//!   is asked again after they settle ([`super::Engine`]'s `register_work`), so this
//!   process's own finished instances never cost a refusal;
//! - a revoke that fails is logged, never retried: the entry lapses with its lease
//!   (`WORK_TTL_MS`), since nobody renews a finished instance's entry.
//!
//! It must never hold anything the instance's state depends on: the terminal is committed
//! before a removal starts.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::limits::REMOVALS_PENDING_MAX;

/// The revokes in flight of one engine and its owner views.
#[derive(Debug, Clone)]
pub(crate) struct Removals {
    slots: Arc<Semaphore>,
}

impl Default for Removals {
    fn default() -> Self {
        Removals {
            slots: Arc::new(Semaphore::new(REMOVALS_PENDING_MAX)),
        }
    }
}

impl Removals {
    /// Run `removal` as its own task once a slot is free.
    pub(crate) async fn start<Fut>(&self, removal: Fut)
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let slot = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .expect("the removal slots are never closed");
        tokio::spawn(async move {
            removal.await;
            drop(slot);
        });
    }

    /// Whether a removal is in flight now.
    pub(crate) fn pending(&self) -> bool {
        self.slots.available_permits() < REMOVALS_PENDING_MAX
    }

    /// Wait until every removal started before this call has ended.
    pub(crate) async fn settle(&self) {
        let all = self
            .slots
            .acquire_many(REMOVALS_PENDING_MAX as u32)
            .await
            .expect("the removal slots are never closed");
        drop(all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn settle_waits_for_every_removal_started_before_it() {
        let removals = Removals::default();
        let done = Arc::new(AtomicUsize::new(0));
        let (go, gate) = tokio::sync::watch::channel(false);
        for _ in 0..3 {
            let (done, mut gate) = (Arc::clone(&done), gate.clone());
            removals
                .start(async move {
                    gate.wait_for(|open| *open).await.expect("the gate stays");
                    done.fetch_add(1, Ordering::SeqCst);
                })
                .await;
        }
        assert!(removals.pending());
        go.send(true).expect("the removals listen");
        removals.settle().await;
        assert_eq!(done.load(Ordering::SeqCst), 3);
        assert!(!removals.pending());
    }

    #[tokio::test]
    async fn a_start_past_the_bound_waits_for_a_slot() {
        let removals = Removals::default();
        let (go, gate) = tokio::sync::watch::channel(false);
        for _ in 0..REMOVALS_PENDING_MAX {
            let mut gate = gate.clone();
            removals
                .start(async move {
                    gate.wait_for(|open| *open).await.expect("the gate stays");
                })
                .await;
        }
        let one_more = removals.start(async {});
        tokio::pin!(one_more);
        let waited = tokio::select! {
            _ = &mut one_more => false,
            _ = tokio::task::yield_now() => true,
        };
        assert!(waited, "no slot is free while every removal is held");
        go.send(true).expect("the removals listen");
        one_more.await;
        removals.settle().await;
        assert!(!removals.pending());
    }
}
