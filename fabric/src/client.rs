//! A client that routes by the range map: each plain keyed write goes straight to the node
//! hosting the leader of the cell owning its key, so no node forwards it.
//!
//! [`MapRouter`] is a [`whip_cell::client::Router`]. On first use it asks any node for the
//! routes (`Cell.Routes`: the map's ranges with their cells and epochs, and where each cell's
//! leader is). Then each request's point ([`whip_board::point_of::command`]) is looked up
//! in those ranges ([`whip_board::route::locate`], the map's own lookup) and sent to the
//! leader's node, naming the cell and the epoch it saw. The board refuses an epoch its cell
//! does not serve (`WrongRange`), so a stale map is caught where it matters; the router then
//! learns the map afresh. `NotLeader` names the new leader; a node that does not answer is
//! skipped for `ROUTES_UNREACHABLE_MS` and the routes are learned again. Whenever the router
//! has no reachable leader for a key the write goes through any node, as without it. A
//! server that answers no ranges is a single cell: the router steps aside for good.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::time::Instant;
use whip_board::Command;
use whip_board::point_of;
use whip_board::route::{self, RangeEntry};
use whip_cell::client::{Pick, Router};
use whip_cell::direct::Direct;
use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use crate::limits;

/// Routes keyed writes by a fabric's range map (see the module doc). Share one among the
/// clients of a process: they learn once.
#[derive(Default)]
pub struct MapRouter {
    table: RwLock<Option<Arc<Table>>>,
    /// One learner at a time; the others wait and take its table.
    learning: tokio::sync::Mutex<()>,
    /// A server answered no ranges: a single cell, so every write takes the client's path.
    single: AtomicBool,
    /// A cell answered `WrongRange`: the next table comes from the meta cell, not a node's
    /// cached map.
    reload: AtomicBool,
    /// No learning before this (the last try failed).
    quiet_until: Mutex<Option<Instant>>,
    /// Nodes that did not answer, skipped until the instant given.
    unreachable: Mutex<HashMap<String, Instant>>,
}

/// What a router learned from one routes answer.
struct Table {
    ranges: Vec<RangeEntry>,
    /// Cell → the address of the node hosting its leader.
    leaders: RwLock<HashMap<u64, String>>,
    learned: Instant,
}

/// The ranges a `Routes` answer names, checked to tile the ring without a gap or overlap.
pub fn ranges_of(routes: &pb::RoutesResponse) -> Result<Vec<RangeEntry>, String> {
    let ranges: Vec<RangeEntry> = (routes.ranges.iter())
        .map(|r| RangeEntry {
            start: r.start,
            last: r.last,
            epoch: r.epoch,
            cell: r.cell,
        })
        .collect();
    route::check_ranges(&ranges)?;
    Ok(ranges)
}

impl Table {
    fn of(routes: pb::RoutesResponse) -> Result<Table, String> {
        let ranges = ranges_of(&routes)?;
        let leaders = (routes.cells.into_iter())
            .filter(|c| !c.leader_addr.is_empty())
            .map(|c| (c.cell, c.leader_addr))
            .collect();
        Ok(Table {
            ranges,
            leaders: RwLock::new(leaders),
            learned: Instant::now(),
        })
    }
}

impl MapRouter {
    /// A router that knows nothing yet.
    pub fn new() -> Self {
        MapRouter::default()
    }

    /// Whether a server answered that it is a single cell, not a fabric node.
    pub fn is_single_cell(&self) -> bool {
        self.single.load(Ordering::Relaxed)
    }

    /// The current table, learning one through `client` when there is none.
    async fn table(&self, client: &CellClient) -> Option<Arc<Table>> {
        if self.single.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(table) = self.current() {
            return Some(table);
        }
        let _one_at_a_time = self.learning.lock().await;
        if let Some(table) = self.current() {
            return Some(table);
        }
        let now = Instant::now();
        if self
            .quiet_until
            .lock()
            .expect("quiet lock")
            .is_some_and(|t| now < t)
        {
            return None;
        }
        let reload = self.reload.swap(false, Ordering::Relaxed);
        let learned = client.routes(pb::RoutesRequest { reload }).await;
        let table = match learned.map_err(|e| e.to_string()).and_then(|r| {
            if r.ranges.is_empty() {
                return Ok(None);
            }
            Table::of(r).map(Some)
        }) {
            Ok(Some(table)) => Arc::new(table),
            Ok(None) => {
                tracing::debug!("the server is a single cell: no routing");
                self.single.store(true, Ordering::Relaxed);
                return None;
            }
            Err(e) => {
                tracing::debug!(error = %e, "could not learn the fabric's routes");
                let pause = Duration::from_millis(limits::ROUTES_REFRESH_MS);
                *self.quiet_until.lock().expect("quiet lock") = Some(now + pause);
                return None;
            }
        };
        *self.table.write().expect("table lock") = Some(table.clone());
        Some(table)
    }

    fn current(&self) -> Option<Arc<Table>> {
        self.table.read().expect("table lock").clone()
    }

    fn forget(&self) {
        *self.table.write().expect("table lock") = None;
    }

    fn reachable(&self, addr: &str) -> bool {
        let mut unreachable = self.unreachable.lock().expect("unreachable lock");
        match unreachable.get(addr) {
            Some(until) if Instant::now() < *until => false,
            Some(_) => {
                unreachable.remove(addr);
                true
            }
            None => true,
        }
    }
}

#[tonic::async_trait]
impl Router for MapRouter {
    async fn pick(&self, client: &CellClient, command: &Command) -> Option<Pick> {
        let point = point_of::command(command).ok()??;
        let table = self.table(client).await?;
        let range = *route::locate(&table.ranges, point);
        let leader = table
            .leaders
            .read()
            .expect("leaders lock")
            .get(&range.cell)
            .cloned();
        match leader {
            Some(addr) if self.reachable(&addr) => Some(Pick {
                addr,
                route: Direct {
                    cell: range.cell,
                    epoch: range.epoch,
                },
            }),
            // No leader we can reach: through any node for now, and learn again soon.
            _ => {
                let stale = Duration::from_millis(limits::ROUTES_REFRESH_MS);
                if table.learned.elapsed() >= stale {
                    self.forget();
                }
                None
            }
        }
    }

    fn failed(&self, pick: &Pick, err: &CellError) {
        tracing::debug!(addr = %pick.addr, cell = pick.route.cell, error = %err, "direct write");
        match err {
            CellError::NotLeader { hint: Some(addr) } => {
                if let Some(table) = self.current() {
                    let mut leaders = table.leaders.write().expect("leaders lock");
                    leaders.insert(pick.route.cell, addr.clone());
                }
            }
            CellError::WrongRange { .. } => {
                self.reload.store(true, Ordering::Relaxed);
                self.forget();
            }
            CellError::Unavailable(_) => {
                let until = Instant::now() + Duration::from_millis(limits::ROUTES_UNREACHABLE_MS);
                let mut unreachable = self.unreachable.lock().expect("unreachable lock");
                unreachable.insert(pick.addr.clone(), until);
                drop(unreachable);
                self.forget();
            }
            _ => self.forget(),
        }
    }
}
