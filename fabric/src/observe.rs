//! What a node shows on its observation listener (`whip node serve --http`): its hosted
//! members for `/metrics` and `/readyz`, and the fabric overview the dashboard draws.
//!
//! The overview is built when asked, from what this node has at hand: the cached range map,
//! its members' Raft metrics and local gauges reads (no Raft round), a status probe of each
//! other node and, for a cell it does not host, one gauges read on that cell's leader. It
//! never loads the map through a quorum while the meta cell elects, so a dashboard keeps
//! drawing while a node is down.

use std::time::Duration;

use whip_board::{Query, QueryResult};
use whip_cell::Cell;
use whip_cell::http::{CellRow, NodeRow, Observed, Overview};
use whip_cell::metrics::RpcStats;

use crate::limits;
use crate::map::{FabricMap, META_CELL};
use crate::node::Node;

#[tonic::async_trait]
impl Observed for Node {
    fn members(&self) -> Vec<Cell> {
        self.hosted_ids()
            .into_iter()
            .filter_map(|id| self.hosted(id))
            .collect()
    }

    fn rpc_stats(&self) -> RpcStats {
        whip_cell::service::Cells::rpc_stats(self)
    }

    async fn overview(&self) -> Overview {
        let map = match self.cached_map() {
            Some(map) => Some(map),
            None => bounded(self.load_map())
                .await
                .and_then(Result::ok)
                .map(|(m, _)| m),
        };
        let mut overview = Overview {
            node: self.id(),
            ..Overview::default()
        };
        let cells: Vec<u64> = match &map {
            Some(map) => map.cells.keys().copied().collect(),
            None => self.hosted_ids(),
        };
        // Probe the other nodes while the cells are read: a dead node's probe runs to its
        // bound, and the leaders the page shows must not wait for it.
        let rows = futures::future::join_all(
            cells
                .iter()
                .map(|&cell| cell_row(self, map.as_deref(), cell)),
        );
        let probes = async {
            match &map {
                Some(map) => nodes(self, map).await,
                None => Vec::new(),
            }
        };
        let (rows, nodes) = tokio::join!(rows, probes);
        overview.nodes = nodes;
        for (row, gauges) in rows {
            if row.leader.is_none() {
                overview
                    .alarms
                    .push(format!("cell {} has no leader", row.id));
            }
            if let Some(g) = gauges {
                overview.add_gauges(row.id, &g);
            }
            overview.cells.push(row);
        }
        for n in overview.nodes.iter().filter(|n| n.reachable == Some(false)) {
            let alarm = format!("node {} at {} is unreachable", n.id, n.addr);
            overview.alarms.insert(0, alarm);
        }
        overview
    }
}

/// `call`, or `None` once [`limits::STATUS_PROBE_MS`] passed.
async fn bounded<T>(call: impl std::future::Future<Output = T>) -> Option<T> {
    let bound = Duration::from_millis(limits::STATUS_PROBE_MS);
    tokio::time::timeout(bound, call).await.ok()
}

/// Every node of the map, each other one probed (in parallel, bounded).
async fn nodes(node: &Node, map: &FabricMap) -> Vec<NodeRow> {
    let probes = map.nodes.iter().map(|(&id, addr)| async move {
        let reachable =
            id == node.id() || crate::admin::probe(node, addr, META_CELL).await.is_some();
        NodeRow {
            id,
            addr: addr.clone(),
            reachable: Some(reachable),
        }
    });
    futures::future::join_all(probes).await
}

/// The row of `cell` and its gauges: from the hosted member (locally), else from a voter's
/// status and a read on the cell's leader.
async fn cell_row(
    node: &Node,
    map: Option<&FabricMap>,
    cell: u64,
) -> (CellRow, Option<whip_board::gauges::GaugesView>) {
    let member = node.hosted(cell);
    let (mut row, gauges) = match &member {
        Some(member) => {
            let status = whip_cell::status::status(member);
            let gauges = whip_cell::metrics::read_gauges(member).await;
            (CellRow::from_status(cell, &status, true), gauges)
        }
        None => {
            let status = match map {
                Some(map) => crate::admin::cell_status(node, map, cell).await,
                None => None,
            };
            let row = status.map_or_else(
                || CellRow {
                    id: cell,
                    ..CellRow::default()
                },
                |s| CellRow::from_status(cell, &s, false),
            );
            let read = bounded(node.read_cell(map, cell, Query::Gauges)).await;
            let gauges = match read {
                Some(Ok(QueryResult::Gauges(g))) => Some(g),
                _ => None,
            };
            (row, gauges)
        }
    };
    if let Some(map) = map {
        if let Some(voters) = map.cells.get(&cell) {
            row.voters.clone_from(voters);
        }
        row.ranges = map
            .ranges
            .iter()
            .filter(|r| r.cell == cell)
            .map(|r| format!("{:#x}..={:#x}@{}", r.start, r.last, r.epoch))
            .collect();
    }
    (row, gauges)
}
