//! Elections stay off on a member while a snapshot arrives from its leader.
//!
//! A voter that fell behind the leader's purged log catches up by a snapshot sent in
//! chunks. Chunks do not refresh the time the member last heard from its leader (only
//! AppendEntries do, and the leader sends none to a member it is sending a snapshot), so
//! a transfer longer than the election timeout made the member campaign: it cannot win
//! (its log is behind), but its higher term turned the leader out and restarted the
//! transfer. While chunks keep arriving — the last one at most
//! `limits::SNAPSHOT_ELECTION_PAUSE_MS` ago — the member does not campaign. It still votes,
//! and the leader's loss is still noticed by the members that are not catching up.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::limits::SNAPSHOT_ELECTION_PAUSE_MS;
use crate::types::Raft;

/// One member's pause (see the module docs).
#[derive(Default)]
pub(crate) struct ElectionPause {
    /// Until when elections stay off; `None` while they are on.
    until: Mutex<Option<Instant>>,
}

impl ElectionPause {
    /// A chunk of a snapshot arrived: keep elections off for another pause window.
    pub(crate) fn chunk_arrived(self: &Arc<Self>, raft: &Raft) {
        let until = Instant::now() + Duration::from_millis(SNAPSHOT_ELECTION_PAUSE_MS);
        let was_on = self.lock().replace(until).is_none();
        if was_on {
            raft.runtime_config().elect(false);
            tracing::debug!("a snapshot is arriving: elections paused");
            tokio::spawn(resume_when_quiet(self.clone(), raft.clone()));
        }
    }

    /// The snapshot is installed (or refused): elections are on again.
    pub(crate) fn finished(&self, raft: &Raft) {
        if self.lock().take().is_some() {
            raft.runtime_config().elect(true);
            tracing::debug!("snapshot received: elections resumed");
        }
    }

    /// Whether elections are paused now.
    pub(crate) fn active(&self) -> bool {
        self.lock().is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.until.lock().expect("election pause lock")
    }
}

/// Turn elections back on once no chunk arrived for a whole pause window (the leader died
/// or gave up mid-transfer).
async fn resume_when_quiet(pause: Arc<ElectionPause>, raft: Raft) {
    loop {
        let wait = match *pause.lock() {
            None => return,
            Some(until) => until.saturating_duration_since(Instant::now()),
        };
        if wait.is_zero() {
            pause.finished(&raft);
            return;
        }
        tokio::time::sleep(wait).await;
    }
}
