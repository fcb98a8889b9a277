//! The range map: which cell owns which part of the ring, where cells and nodes are.
//!
//! The map lives in the meta cell (cell 0) under [`MAP_KEY`] as JSON, so an operator can
//! read it with `whip kv get`; every change is a compare-and-swap on that key's version.
//! Epochs come from one counter in the map (`epoch_high`), so an epoch never repeats.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The meta cell's key holding the map.
pub const MAP_KEY: &[u8] = b"fabric/map";
/// The meta cell's id.
pub const META_CELL: u64 = 0;
/// Data cells one fabric may have.
pub const DATA_CELLS_MAX: u32 = 1024;
/// Voters of the meta cell (other nodes follow it as learners).
pub const META_VOTERS_MAX: usize = 5;

pub use whip_board::route::RangeEntry;

/// Nodes, cells and ranges of one fabric.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricMap {
    /// Node id → address.
    pub nodes: BTreeMap<u64, String>,
    /// Cell id → voter node ids (cell 0 is the meta cell).
    pub cells: BTreeMap<u64, Vec<u64>>,
    /// Ranges in ring order, covering the whole ring without gaps.
    pub ranges: Vec<RangeEntry>,
    /// The largest epoch ever handed out.
    pub epoch_high: u64,
    /// Each cell's public key: envelopes from a cell must be signed by it.
    #[serde(default)]
    pub keys: crate::identity::KeyRegistry,
}

impl FabricMap {
    /// Plan a new fabric: `cells` data cells with `replicas` voters each, placed round-robin
    /// on distinct nodes, the ring cut into `cells` equal ranges at epoch 1.
    pub fn plan(nodes: BTreeMap<u64, String>, cells: u32, replicas: u32) -> Result<Self, String> {
        if nodes.is_empty() {
            return Err("a fabric needs at least one node".into());
        }
        if nodes.contains_key(&0) {
            return Err("node ids start at 1".into());
        }
        if cells == 0 || cells > DATA_CELLS_MAX {
            return Err(format!("cells is {cells}, must be 1..={DATA_CELLS_MAX}"));
        }
        let ids: Vec<u64> = nodes.keys().copied().collect();
        let replicas = match replicas {
            0 => ids.len().min(3),
            r => r as usize,
        };
        if replicas > ids.len() {
            return Err(format!(
                "replicas is {replicas} but the fabric has {} nodes",
                ids.len()
            ));
        }
        let mut placement = BTreeMap::new();
        placement.insert(META_CELL, ids[..ids.len().min(META_VOTERS_MAX)].to_vec());
        for cell in 1..=u64::from(cells) {
            let first = (cell as usize - 1) % ids.len();
            let voters = (0..replicas)
                .map(|i| ids[(first + i) % ids.len()])
                .collect();
            placement.insert(cell, voters);
        }
        let width = (1u128 << 64) / u128::from(cells);
        let ranges = (0..u64::from(cells))
            .map(|i| {
                let start = (u128::from(i) * width) as u64;
                let last = if i + 1 == u64::from(cells) {
                    u64::MAX
                } else {
                    (u128::from(i + 1) * width - 1) as u64
                };
                RangeEntry {
                    start,
                    last,
                    epoch: 1,
                    cell: i + 1,
                }
            })
            .collect();
        let map = FabricMap {
            nodes,
            cells: placement,
            ranges,
            epoch_high: 1,
            keys: crate::identity::KeyRegistry::new(),
        };
        map.check()?;
        Ok(map)
    }

    /// The range holding `point`.
    pub fn locate(&self, point: u64) -> &RangeEntry {
        whip_board::route::locate(&self.ranges, point)
    }

    /// The range starting at `start`, if any.
    pub fn range_at(&self, start: u64) -> Option<&RangeEntry> {
        self.ranges.iter().find(|r| r.start == start)
    }

    /// Ids of the data cells.
    pub fn data_cells(&self) -> Vec<u64> {
        self.cells
            .keys()
            .copied()
            .filter(|&c| c != META_CELL)
            .collect()
    }

    /// The cells with a member on `node`.
    pub fn cells_on(&self, node: u64) -> Vec<u64> {
        self.cells
            .iter()
            .filter(|(_, voters)| voters.contains(&node))
            .map(|(&cell, _)| cell)
            .collect()
    }

    /// Address of `node`.
    pub fn addr(&self, node: u64) -> Option<&str> {
        self.nodes.get(&node).map(String::as_str)
    }

    /// A new epoch, above every epoch handed out so far.
    pub fn next_epoch(&mut self) -> u64 {
        self.epoch_high += 1;
        self.epoch_high
    }

    /// The ranges are sorted, cover the ring without gaps or overlaps, and name known cells.
    pub fn check(&self) -> Result<(), String> {
        whip_board::route::check_ranges(&self.ranges)?;
        for r in &self.ranges {
            if !self.cells.contains_key(&r.cell) || r.cell == META_CELL {
                return Err(format!(
                    "range {:#x} names unknown data cell {}",
                    r.start, r.cell
                ));
            }
        }
        Ok(())
    }

    /// JSON bytes for the meta cell.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("the map serializes")
    }

    /// Parse the meta cell's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let map: FabricMap =
            serde_json::from_slice(bytes).map_err(|e| format!("range map is unreadable: {e}"))?;
        map.check()?;
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: u64) -> BTreeMap<u64, String> {
        (1..=n)
            .map(|i| (i, format!("127.0.0.1:{}", 7000 + i)))
            .collect()
    }

    #[test]
    fn plan_covers_the_ring_and_spreads_voters() {
        let map = FabricMap::plan(nodes(3), 4, 3).unwrap();
        assert_eq!(map.ranges.len(), 4);
        assert_eq!(map.ranges[3].last, u64::MAX);
        for cell in map.data_cells() {
            let mut voters = map.cells[&cell].clone();
            voters.dedup();
            assert_eq!(voters.len(), 3, "distinct voters");
        }
        assert_eq!(map.locate(0).cell, 1);
        assert_eq!(map.locate(u64::MAX).cell, 4);
        let back = FabricMap::from_bytes(&map.to_bytes()).unwrap();
        assert_eq!(back, map);
        let five = FabricMap::plan(nodes(5), 7, 3).unwrap();
        assert_eq!(five.cells_on(4).len(), 5, "meta plus four data cells");
    }

    #[test]
    fn bad_plans_are_refused() {
        assert!(FabricMap::plan(BTreeMap::new(), 1, 0).is_err());
        assert!(FabricMap::plan(nodes(2), 0, 0).is_err());
        assert!(FabricMap::plan(nodes(2), 4, 3).is_err());
    }
}
