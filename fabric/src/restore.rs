//! Restoring a fabric from `whip fabric backup` on new, empty nodes (`whip fabric restore`).
//!
//! The client streams each cell's snapshot file to every voter of that cell
//! (`Node/RestoreCell`); each voter checks it and makes the cell's data directory from it
//! with the cell's voters at their new addresses, installs the cell's signing key from the
//! snapshot, and hosts the cell. All voters of a cell start from the same snapshot at the
//! same log index, so they elect a leader without copying anything. The meta cell's map gets
//! the new nodes' addresses inside the snapshot, before the cell starts, so no node of the
//! new fabric ever reads the old addresses. Then `Node/FabricRestore` adds the nodes that are
//! not meta voters as meta learners, as `fabric init` does.
//!
//! Invariants: node ids, cell ids, ranges and epochs are the backup's; only addresses
//! change. A node that already hosts the cell refuses, so a restore never overwrites state.

use std::collections::BTreeMap;

use whip_cell::CellError;

use crate::map::{FabricMap, MAP_KEY, META_CELL};
use crate::node::Node;

fn invalid(message: impl Into<String>) -> CellError {
    CellError::InvalidArgument(message.into())
}

/// What one `RestoreCell` call brings: the cell, its voters (node id → new address), every
/// node of the new fabric (for the meta cell's map) and the snapshot file.
pub struct RestoreCell {
    /// The cell.
    pub cell: u64,
    /// Its voters at their new addresses.
    pub voters: BTreeMap<u64, String>,
    /// Every node of the new fabric (the meta cell's map gets these addresses).
    pub nodes: BTreeMap<u64, String>,
    /// The snapshot file's bytes.
    pub file: Vec<u8>,
}

/// Host a member of `req.cell` on `node`, made from the snapshot: see the module docs.
pub async fn restore_cell(node: &Node, req: RestoreCell) -> Result<String, CellError> {
    let cell = req.cell;
    if node.hosted(cell).is_some() {
        return Err(invalid(format!(
            "node {} already hosts cell {cell}: a restore makes a new fabric on empty nodes",
            node.id()
        )));
    }
    if !req.voters.contains_key(&node.id()) {
        return Err(invalid(format!(
            "node {} is not among cell {cell}'s voters",
            node.id()
        )));
    }
    let dir = node.cell_dir(cell);
    let RestoreCell {
        voters,
        nodes,
        file,
        ..
    } = req;
    let body = tokio::task::spawn_blocking(move || {
        whip_cell::backup::restore_member_dir(&dir, &file, &voters, |body| {
            if body.cell != cell {
                return Err(format!("the snapshot is of cell {}, not {cell}", body.cell));
            }
            if cell == META_CELL {
                whip_board::restore_rewrite(&mut body.pairs, MAP_KEY, |old| {
                    readdress(old, &nodes)
                })?;
            }
            Ok(())
        })
    })
    .await
    .map_err(|e| CellError::Fatal(format!("restore task: {e}")))?
    .map_err(|e| invalid(format!("{}: {e}", e.code())))?;
    let secret =
        match body.identity_secret.as_deref() {
            None => None,
            Some(secret) => Some(<[u8; 32]>::try_from(secret).map_err(|_| {
                invalid(format!("cell {cell}'s key in the snapshot is not 32 bytes"))
            })?),
        };
    node.create_cell(cell, secret).await?;
    node.invalidate_map();
    tracing::info!(
        cell,
        revision = body.revision,
        "cell restored from a snapshot"
    );
    Ok(format!(
        "node {} hosts cell {cell}, restored at revision {}",
        node.id(),
        body.revision
    ))
}

/// The map `old` (JSON) with every node at its address in `nodes`, which must name exactly
/// the map's node ids.
fn readdress(old: &[u8], nodes: &BTreeMap<u64, String>) -> Result<Vec<u8>, String> {
    let mut map = FabricMap::from_bytes(old)?;
    let had: Vec<u64> = map.nodes.keys().copied().collect();
    let given: Vec<u64> = nodes.keys().copied().collect();
    if had != given {
        return Err(format!(
            "the backup's fabric has nodes {had:?}, the restore names {given:?} \
             (a restore keeps the node ids)"
        ));
    }
    map.nodes = nodes.clone();
    Ok(map.to_bytes())
}

/// The last step of a restore, on any node: the meta cell answers with the new addresses
/// (`nodes`), and the nodes that are not meta voters follow it as learners.
pub async fn finish(node: &Node, nodes: &BTreeMap<u64, String>) -> Result<(), CellError> {
    let (map, _) = node.load_map().await?;
    if &map.nodes != nodes {
        return Err(invalid(format!(
            "the restored map names nodes {:?}, not {nodes:?}",
            map.nodes
        )));
    }
    crate::admin::add_meta_learners(node, &map).await
}
