//! `whip fabric backup DIR` and `whip fabric restore DIR --node ID=ADDR …`.
//!
//! A backup directory holds one snapshot file per cell (`cell-<id>.snap`, as `whip cell
//! snapshot save` writes them, each from its cell's leader after a read barrier) and
//! `manifest.json`: the nodes, each cell's voters, the ranges, the map version, and each
//! file's revision, size and blake3. It is made under `DIR.partial` and renamed into place
//! only when every snapshot is saved and the range map did not change meanwhile.
//!
//! A restore checks every file against the manifest first, then streams each cell's file
//! to each of its voters on the new nodes (`Node/RestoreCell`), and ends with
//! `Node/FabricRestore` (meta learners) and a wait for every cell's leader.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use serde_json::json;
use whip_proto::v1 as pb;
use whip_proto::v1::node_client::NodeClient;

use crate::Global;
use crate::output;
use crate::progress::Progress;

/// The manifest's file name.
const MANIFEST: &str = "manifest.json";
/// The manifest format this version writes and reads.
const FORMAT: u32 = 1;

/// `manifest.json`.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    map_version: u64,
    nodes: BTreeMap<u64, String>,
    cells: Vec<CellEntry>,
    ranges: Vec<RangeEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct CellEntry {
    cell: u64,
    voters: Vec<u64>,
    file: String,
    revision: u64,
    bytes: u64,
    blake3: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct RangeEntry {
    start: u64,
    last: u64,
    epoch: u64,
    cell: u64,
}

/// Removes the staging directory unless the backup completed.
struct Staging {
    path: PathBuf,
    done: bool,
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

async fn fabric_status(
    client: &mut NodeClient<tonic::transport::Channel>,
) -> Result<pb::FabricStatusResponse> {
    Ok(client
        .fabric_status(pb::FabricStatusRequest {})
        .await
        .map_err(|s| anyhow!("fabric status: {}", s.message()))?
        .into_inner())
}

/// `whip fabric backup DIR`.
pub(crate) async fn backup(global: &Global, dir: &Path) -> Result<ExitCode> {
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        bail!("{} exists and is not empty", dir.display());
    }
    let mut client = crate::fabriccmd::node_client(global)?;
    let before = fabric_status(&mut client).await?;
    let nodes: BTreeMap<u64, String> = before
        .nodes
        .iter()
        .map(|n| (n.id, n.addr.clone()))
        .collect();
    let staging_path = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&staging_path);
    whip_cell::tls::private_dir(&staging_path)
        .map_err(|e| anyhow!("creating {}: {e}", staging_path.display()))?;
    let mut staging = Staging {
        path: staging_path.clone(),
        done: false,
    };
    let cells = save_cells(&before, &nodes, &staging_path).await?;
    let after = fabric_status(&mut client).await?;
    if after.map_version != before.map_version {
        bail!(
            "the range map changed during the backup (version {} to {}: a move or split ran); \
             run the backup again",
            before.map_version,
            after.map_version
        );
    }
    let ranges = before
        .cells
        .iter()
        .flat_map(|c| &c.ranges)
        .map(|r| RangeEntry {
            start: r.start,
            last: r.last,
            epoch: r.epoch,
            cell: r.cell,
        })
        .collect();
    let manifest = Manifest {
        format: FORMAT,
        map_version: before.map_version,
        nodes,
        cells,
        ranges,
    };
    let text = serde_json::to_vec_pretty(&manifest).expect("the manifest serializes");
    whip_cell::tls::write_private(&staging_path.join(MANIFEST), &text)
        .map_err(|e| anyhow!("writing the manifest: {e}"))?;
    std::fs::rename(&staging_path, dir)
        .with_context(|| format!("renaming {} to {}", staging_path.display(), dir.display()))?;
    staging.done = true;
    print_backup(global, dir, &manifest);
    Ok(ExitCode::SUCCESS)
}

/// Save every cell of `status` into `staging`, each from its leader (or a voter that
/// points at it).
async fn save_cells(
    status: &pb::FabricStatusResponse,
    nodes: &BTreeMap<u64, String>,
    staging: &Path,
) -> Result<Vec<CellEntry>> {
    let mut cells = Vec::new();
    for info in &status.cells {
        let mut addrs: Vec<String> = info
            .leader
            .iter()
            .chain(&info.voters)
            .filter_map(|id| nodes.get(id).cloned())
            .collect();
        addrs.dedup();
        let file = format!("cell-{}.snap", info.id);
        let saved = crate::snapshot::save(&addrs, info.id, &staging.join(&file)).await?;
        tracing::info!(cell = info.id, revision = saved.revision, "cell saved");
        cells.push(CellEntry {
            cell: info.id,
            voters: info.voters.clone(),
            file,
            revision: saved.revision,
            bytes: saved.bytes,
            blake3: saved.blake3,
        });
    }
    Ok(cells)
}

fn print_backup(global: &Global, dir: &Path, manifest: &Manifest) {
    if global.json {
        let cells: Vec<_> = manifest
            .cells
            .iter()
            .map(|c| {
                json!({"cell": c.cell, "file": c.file, "revision": c.revision,
                "bytes": c.bytes, "blake3": c.blake3})
            })
            .collect();
        output::json(&json!({"dir": dir.display().to_string(), "cells": cells,
            "map_version": manifest.map_version}));
        return;
    }
    output::line(&format!(
        "backed up {} cells into {}",
        manifest.cells.len(),
        dir.display()
    ));
    let mut table = output::Table::new(&["cell", "revision", "bytes", "blake3"]);
    for c in &manifest.cells {
        table.row(vec![
            c.cell.to_string(),
            c.revision.to_string(),
            c.bytes.to_string(),
            c.blake3.clone(),
        ]);
    }
    table.print_or("no cells");
}

/// Read the manifest in `dir` and check every file it names: size, blake3 and the file's
/// own checksum. Nothing is sent anywhere before all pass.
fn checked(dir: &Path) -> Result<(Manifest, BTreeMap<u64, Vec<u8>>)> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| anyhow!("{} is not a backup manifest: {e}", path.display()))?;
    if manifest.format != FORMAT {
        bail!(
            "{} has format {}, this whip reads {FORMAT}",
            path.display(),
            manifest.format
        );
    }
    let mut files = BTreeMap::new();
    for c in &manifest.cells {
        let file = dir.join(&c.file);
        let (body, bytes) =
            whip_cell::backup::read_file(&file).map_err(|e| anyhow!("{}: {e}", e.code()))?;
        let found = whip_cell::backup::hash_hex(&bytes);
        if found != c.blake3 || body.cell != c.cell {
            bail!(
                "checksum_mismatch: {} hashes to {found} (cell {}), the manifest says {} (cell {})",
                file.display(),
                body.cell,
                c.blake3,
                c.cell
            );
        }
        files.insert(c.cell, bytes);
    }
    Ok((manifest, files))
}

/// `whip fabric restore DIR --node ID=ADDR …`.
pub(crate) async fn restore(
    global: &Global,
    dir: &Path,
    nodes: Vec<pb::Member>,
) -> Result<ExitCode> {
    let (manifest, files) = checked(dir)?;
    let new: BTreeMap<u64, String> = nodes.iter().map(|m| (m.id, m.addr.clone())).collect();
    if new.len() != nodes.len() {
        bail!("a node is listed twice");
    }
    if new.keys().ne(manifest.nodes.keys()) {
        bail!(
            "the backup's fabric has nodes {:?}, --node names {:?}: a restore keeps the node ids",
            manifest.nodes.keys().collect::<Vec<_>>(),
            new.keys().collect::<Vec<_>>()
        );
    }
    let total: u64 = manifest
        .cells
        .iter()
        .map(|c| c.bytes * c.voters.len() as u64)
        .sum();
    let mut progress = Progress::new("fabric restore", total, "bytes");
    let mut sent = 0;
    for c in &manifest.cells {
        let voters: Vec<pb::Member> = c
            .voters
            .iter()
            .map(|id| pb::Member {
                id: *id,
                addr: new[id].clone(),
            })
            .collect();
        for voter in &voters {
            restore_on(&voter.addr, c.cell, &voters, &nodes, &files[&c.cell]).await?;
            sent += c.bytes;
            progress.set(sent);
        }
        if c.cell == whip_fabric::map::META_CELL {
            for m in nodes.iter().filter(|m| !c.voters.contains(&m.id)) {
                let mut node = node_at(&m.addr);
                let request = pb::CreateCellRequest {
                    cell: c.cell,
                    ..Default::default()
                };
                node.create_cell(request)
                    .await
                    .map_err(|s| anyhow!("node {} at {}: {}", m.id, m.addr, s.message()))?;
            }
        }
    }
    drop(progress);
    let first = &nodes[0].addr;
    let request = pb::FabricRestoreRequest {
        nodes: nodes.clone(),
    };
    let status = crate::progress::awaiting(
        "fabric restore: meta learners",
        node_at(first).fabric_restore(request),
    )
    .await
    .map_err(|s| anyhow!("finishing the restore on {first}: {}", s.message()))?
    .into_inner();
    let status = wait_leaders(first, status).await?;
    crate::fabriccmd::print_status(global, &status, "fabric restored");
    Ok(ExitCode::SUCCESS)
}

fn node_at(addr: &str) -> NodeClient<tonic::transport::Channel> {
    NodeClient::new(whip_cell::network::endpoint(addr).connect_lazy())
        .max_encoding_message_size(whip_cell::limits::MESSAGE_BYTES_MAX)
}

/// Stream one cell's snapshot file to the node at `addr`.
async fn restore_on(
    addr: &str,
    cell: u64,
    voters: &[pb::Member],
    nodes: &[pb::Member],
    file: &[u8],
) -> Result<()> {
    let mut chunks: Vec<pb::RestoreCellChunk> = file
        .chunks(whip_cell::limits::SNAPSHOT_SAVE_CHUNK_BYTES)
        .map(|data| pb::RestoreCellChunk {
            data: data.to_vec(),
            ..Default::default()
        })
        .collect();
    let first = match chunks.first_mut() {
        Some(first) => first,
        None => bail!("cell {cell}'s snapshot file is empty"),
    };
    first.cell = cell;
    first.voters = voters.to_vec();
    first.nodes = nodes.to_vec();
    node_at(addr)
        .restore_cell(futures::stream::iter(chunks))
        .await
        .map_err(|s| anyhow!("restoring cell {cell} on {addr}: {}", s.message()))?;
    Ok(())
}

/// The fabric's status once every cell has a leader (bounded by
/// [`crate::limits::RESTORE_LEADERS_WAIT_MS`]).
async fn wait_leaders(
    addr: &str,
    mut status: pb::FabricStatusResponse,
) -> Result<pb::FabricStatusResponse> {
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(crate::limits::RESTORE_LEADERS_WAIT_MS);
    let mut client = node_at(addr);
    while status.cells.iter().any(|c| c.leader.is_none()) {
        if tokio::time::Instant::now() >= deadline {
            bail!("restored, but some cells have no leader yet: see `whip fabric status`");
        }
        tokio::time::sleep(Duration::from_millis(crate::limits::PROGRESS_POLL_MS)).await;
        status = fabric_status(&mut client).await?;
    }
    Ok(status)
}
