//! The node's side of hibernating cells: it pings its peer nodes, and it drives every
//! hosted member's hibernation round (`whip_cell::hibernation`).
//!
//! A hibernating cell sends no heartbeats, so its followers cannot time a dead leader out.
//! The node does it for all of them at once: every [`limits::NODE_PING_MS`] it sends each
//! peer node of its map one empty `Raft/AppendBatch` (the call the heartbeats of many cells
//! already travel in; a peer answers it with its boot id). A peer whose last answered ping
//! was sent more than [`limits::NODE_DEAD_MS`] ago is dead, the same bound an awake
//! follower's election timeout gives.
//!
//! **A peer dies.** Every sleeping member here whose cell's leader is on that node wakes.
//! So that the survivors of a cell do not split their votes, and a node of a thousand
//! cells does not start a thousand elections at once, the wakes are planned: among a cell's
//! surviving voters, ordered by a hash of (cell, node) every survivor computes alike, the
//! first campaigns at once and the others only wake (and would campaign on their own
//! timers) [`limits::HIBERNATE_WAKE_BACKUP_MS`] later per place; and each round of
//! [`limits::HIBERNATE_LOOK_MS`] carries out at most [`limits::HIBERNATE_WAKE_ROUND_CELLS`]
//! wakes.
//!
//! **A peer comes back or restarts** (a new boot id). Every sleeping cell this node leads
//! with a voter there wakes, so the peer's member hears its leader's heartbeats before its
//! own election timer runs out.
//!
//! A cell whose nodes this node cannot all reach never sleeps, and a node without a map
//! (none read yet) reaches nobody. Time is the node's monotonic clock in ms, read once per
//! round and passed down.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use whip_cell::hibernation::Step;
use whip_proto::v1::BlobBatch;
use whip_proto::v1::raft_client::RaftClient;

use crate::limits;
use crate::node::{Inner, Node};

/// Whether hosted cells hibernate when idle (`whip node serve --hibernate on|off`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hibernate {
    /// Idle cells stop their heartbeats and election timers: the default.
    #[default]
    On,
    /// Every cell keeps heartbeating (for A/B runs).
    Off,
}

impl Hibernate {
    /// The name used on the command line and in config files.
    pub fn name(self) -> &'static str {
        match self {
            Hibernate::On => "on",
            Hibernate::Off => "off",
        }
    }
}

impl std::str::FromStr for Hibernate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "on" => Ok(Hibernate::On),
            "off" => Ok(Hibernate::Off),
            other => Err(format!("hibernate is `on` or `off`, not `{other}`")),
        }
    }
}

/// What this node knows of its peer nodes' liveness.
#[derive(Default)]
pub(crate) struct Liveness {
    peers: Mutex<BTreeMap<u64, Peer>>,
}

#[derive(Default)]
struct Peer {
    addr: String,
    /// When the newest answered ping was sent (node clock, ms).
    answered_ms: Option<u64>,
    /// The peer's boot id from its newest answer (0: not known, or an older build).
    boot: u64,
    /// A ping is in flight.
    pinging: bool,
    /// Alive at the last review, and the boot id seen then.
    was_alive: bool,
    reviewed_boot: u64,
}

/// How a peer changed since the last review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeerChange {
    Died(u64),
    /// Answers again, or restarted (answers with a new boot id).
    Back(u64),
}

impl Liveness {
    /// Whether `node` answered a ping sent within the last [`limits::NODE_DEAD_MS`].
    pub(crate) fn alive(&self, node: u64, now_ms: u64) -> bool {
        let peers = self.lock();
        peers.get(&node).is_some_and(|p| alive(p, now_ms))
    }

    /// Track exactly `nodes` (the map's, without this node); forget the others.
    fn track(&self, nodes: impl Iterator<Item = (u64, String)>) {
        let mut peers = self.lock();
        let mut kept = BTreeMap::new();
        for (id, addr) in nodes {
            let mut peer = peers.remove(&id).unwrap_or_default();
            peer.addr = addr;
            kept.insert(id, peer);
        }
        *peers = kept;
    }

    /// The peers to ping now (none already in flight), marked in flight.
    fn to_ping(&self) -> Vec<(u64, String)> {
        let mut peers = self.lock();
        (peers.iter_mut())
            .filter(|(_, p)| !p.pinging)
            .map(|(id, p)| {
                p.pinging = true;
                (*id, p.addr.clone())
            })
            .collect()
    }

    /// A ping sent at `sent_ms` came back (`boot`: the peer's boot id), or failed.
    fn answered(&self, node: u64, sent_ms: u64, boot: Option<u64>) {
        let mut peers = self.lock();
        let Some(peer) = peers.get_mut(&node) else {
            return;
        };
        peer.pinging = false;
        if let Some(boot) = boot {
            peer.answered_ms = Some(peer.answered_ms.map_or(sent_ms, |t| t.max(sent_ms)));
            peer.boot = boot;
        }
    }

    /// What changed since the last review.
    fn review(&self, now_ms: u64) -> Vec<PeerChange> {
        let mut peers = self.lock();
        let mut changes = Vec::new();
        for (&id, peer) in peers.iter_mut() {
            let is_alive = alive(peer, now_ms);
            let restarted = peer.boot != 0 && peer.boot != peer.reviewed_boot;
            match (peer.was_alive, is_alive) {
                (true, false) => changes.push(PeerChange::Died(id)),
                (false, true) => changes.push(PeerChange::Back(id)),
                (true, true) if restarted && peer.reviewed_boot != 0 => {
                    changes.push(PeerChange::Back(id))
                }
                _ => {}
            }
            peer.was_alive = is_alive;
            if is_alive {
                peer.reviewed_boot = peer.boot;
            }
        }
        changes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Peer>> {
        self.peers.lock().expect("liveness lock")
    }
}

fn alive(peer: &Peer, now_ms: u64) -> bool {
    peer.answered_ms
        .is_some_and(|t| now_ms.saturating_sub(t) < limits::NODE_DEAD_MS)
}

/// Where survivor `me` of `cell` stands among `survivors` when its leader's node died:
/// every survivor computes the same order.
pub(crate) fn wake_place(cell: u64, me: u64, survivors: &[u64]) -> usize {
    let key = |node: u64| {
        let mix = (cell ^ node.rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (mix ^ (mix >> 29), node)
    };
    let mine = key(me);
    survivors.iter().filter(|n| key(**n) < mine).count()
}

/// A planned wake: at `due_ms`, `cell` wakes, campaigning when `campaign`.
struct Wake {
    due_ms: u64,
    cell: u64,
    campaign: bool,
}

/// Pings, reviews and the hibernation rounds of one node, until the node is gone.
pub(crate) async fn hibernate_loop(inner: Weak<Inner>) {
    let started = Instant::now();
    let mut interval = tokio::time::interval(Duration::from_millis(limits::HIBERNATE_LOOK_MS));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pinged_ms: Option<u64> = None;
    let mut planned: VecDeque<Wake> = VecDeque::new();
    loop {
        interval.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let node = Node { inner };
        let now_ms = started.elapsed().as_millis() as u64;
        if pinged_ms.is_none_or(|t| now_ms.saturating_sub(t) >= limits::NODE_PING_MS) {
            pinged_ms = Some(now_ms);
            ping_peers(&node, now_ms);
        }
        for change in node.inner.liveness.review(now_ms) {
            plan(&node, change, now_ms, &mut planned);
        }
        wake_due(&node, now_ms, &mut planned);
        let me = node.id();
        let liveness = &node.inner.liveness;
        let alive = |id: u64| id == me || liveness.alive(id, now_ms);
        let mut slept = 0;
        for cell in node.inner.members() {
            if cell.hibernation_round(now_ms, &alive) == Step::Sleep {
                slept += 1;
            }
        }
        if slept > 0 {
            tracing::debug!(slept, "cells hibernated");
        }
    }
}

/// Ping every peer node of the map not pinged already; answers land in the liveness.
fn ping_peers(node: &Node, now_ms: u64) {
    let me = node.id();
    if let Some(map) = node.cached_map() {
        let nodes = map.nodes.iter().filter(|(id, _)| **id != me);
        node.inner
            .liveness
            .track(nodes.map(|(id, addr)| (*id, addr.clone())));
    }
    for (id, addr) in node.inner.liveness.to_ping() {
        let channel = node.peers().channel(&addr);
        let weak = Arc::downgrade(&node.inner);
        tokio::spawn(async move {
            let mut client = RaftClient::new(channel);
            let call = client.append_batch(BlobBatch { blobs: Vec::new() });
            let timeout = Duration::from_millis(limits::NODE_PING_TIMEOUT_MS);
            let boot = match tokio::time::timeout(timeout, call).await {
                Ok(Ok(answer)) => Some(answer.into_inner().boot),
                _ => None,
            };
            if let Some(inner) = weak.upgrade() {
                inner.liveness.answered(id, now_ms, boot);
            }
        });
    }
}

/// Plan the wakes one peer's change calls for.
fn plan(node: &Node, change: PeerChange, now_ms: u64, planned: &mut VecDeque<Wake>) {
    let me = node.id();
    let mut woken = 0;
    for cell in node.inner.members() {
        if !cell.hibernating() {
            continue;
        }
        let (leader, voters) = cell.leader_and_voters();
        match change {
            PeerChange::Died(dead) if leader == Some(dead) => {
                let survivors: Vec<u64> = voters.into_iter().filter(|v| *v != dead).collect();
                let place = wake_place(cell.cell_id(), me, &survivors) as u64;
                planned.push_back(Wake {
                    due_ms: now_ms + place * limits::HIBERNATE_WAKE_BACKUP_MS,
                    cell: cell.cell_id(),
                    campaign: place == 0,
                });
            }
            PeerChange::Back(back) if leader == Some(me) && voters.contains(&back) => {
                woken += u64::from(cell.wake(now_ms, false));
            }
            _ => {}
        }
    }
    match change {
        PeerChange::Died(id) => {
            tracing::info!(
                node = id,
                planned = planned.len(),
                "a peer node stopped answering"
            )
        }
        PeerChange::Back(id) => tracing::info!(node = id, woken, "a peer node answers"),
    }
}

/// Carry out at most a round's worth of the planned wakes that are due.
fn wake_due(node: &Node, now_ms: u64, planned: &mut VecDeque<Wake>) {
    let mut by_due: Vec<Wake> = planned.drain(..).collect();
    by_due.sort_by_key(|w| w.due_ms);
    let (mut done, mut campaigned, mut woken) = (0, 0, 0);
    for wake in by_due {
        if wake.due_ms > now_ms || done >= limits::HIBERNATE_WAKE_ROUND_CELLS {
            planned.push_back(wake);
            continue;
        }
        done += 1;
        if let Some(cell) = node.hosted(wake.cell)
            && cell.wake(now_ms, wake.campaign)
        {
            if wake.campaign {
                campaigned += 1;
            } else {
                woken += 1;
            }
        }
    }
    if campaigned + woken > 0 {
        tracing::info!(
            campaigned,
            woken,
            left = planned.len(),
            "woke cells whose leader's node died"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survivors_agree_on_one_first_place() {
        for cell in 0..500 {
            let survivors = [2, 3, 5];
            let mut places: Vec<usize> = survivors
                .iter()
                .map(|me| wake_place(cell, *me, &survivors))
                .collect();
            places.sort_unstable();
            assert_eq!(places, vec![0, 1, 2], "cell {cell}");
        }
        let firsts = (0..300)
            .filter(|cell| wake_place(*cell, 2, &[2, 3]) == 0)
            .count();
        assert!(
            (100..200).contains(&firsts),
            "first place is spread: {firsts} of 300"
        );
    }

    #[test]
    fn a_peer_dies_comes_back_and_restarts() {
        let live = Liveness::default();
        live.track([(2, "a".to_string())].into_iter());
        assert_eq!(live.to_ping().len(), 1);
        assert!(live.to_ping().is_empty(), "one ping in flight at a time");
        live.answered(2, 100, Some(7));
        assert_eq!(live.review(150), vec![PeerChange::Back(2)]);
        assert!(live.alive(2, 150));
        assert_eq!(live.review(200), vec![]);
        let dead_at = 100 + limits::NODE_DEAD_MS;
        assert_eq!(live.review(dead_at), vec![PeerChange::Died(2)]);
        assert!(!live.alive(2, dead_at));
        live.to_ping();
        live.answered(2, dead_at, None);
        assert_eq!(live.review(dead_at + 50), vec![]);
        live.to_ping();
        live.answered(2, dead_at + 100, Some(7));
        assert_eq!(live.review(dead_at + 150), vec![PeerChange::Back(2)]);
        live.to_ping();
        live.answered(2, dead_at + 200, Some(9));
        assert_eq!(
            live.review(dead_at + 250),
            vec![PeerChange::Back(2)],
            "a new boot id"
        );
        assert_eq!(live.review(dead_at + 300), vec![]);
    }
}
