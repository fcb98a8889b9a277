//! `whip cell snapshot save|restore`: a checksummed snapshot of a running cell, and a new
//! data directory made from one (`whip_cell::backup` owns the file format).
//!
//! A save writes `FILE.partial` and renames it to `FILE` only once the body's blake3
//! matches the server's, so an interrupted or failed save leaves no `FILE` (and removes
//! the partial one).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::Subcommand;
use serde_json::json;
use whip_cell::CellClient;

use crate::Global;
use crate::connect::cell_addrs;
use crate::output;
use crate::progress::Progress;

#[derive(Subcommand, Debug)]
pub(crate) enum SnapshotCommand {
    /// Save a consistent, checksummed snapshot of a running cell (--cell ADDR) to FILE,
    /// without stopping its writes. Prints its revision (last applied log index), size and
    /// blake3 (of FILE as written, as `b3sum FILE` prints it).
    Save {
        /// Where to write the snapshot (must not exist).
        file: PathBuf,
    },
    /// Check FILE and make the new data directory DIR from it, for
    /// `whip cell serve --id 1 --listen ADDR --data DIR` (a new one-voter cell).
    Restore {
        /// The snapshot file.
        file: PathBuf,
        /// The data directory to make (must not exist, or be empty).
        #[arg(long)]
        data: PathBuf,
    },
}

pub(crate) async fn run(global: &Global, cmd: SnapshotCommand) -> Result<ExitCode> {
    match cmd {
        SnapshotCommand::Save { file } => {
            let spec = global
                .cell
                .as_deref()
                .ok_or_else(|| anyhow!("this command needs --cell ADDR"))?;
            let saved = save(&cell_addrs(spec), 0, &file).await?;
            if global.json {
                output::json(&saved.json());
            } else {
                output::line(&format!(
                    "saved {} at revision {} ({} bytes, blake3 {})",
                    file.display(),
                    saved.revision,
                    saved.bytes,
                    saved.blake3
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        SnapshotCommand::Restore { file, data } => restore(global, &file, &data),
    }
}

fn restore(global: &Global, file: &Path, data: &Path) -> Result<ExitCode> {
    let restored = whip_cell::backup::restore_data_dir(file, data)
        .map_err(|e| anyhow!("{}: {e}", e.code()))?;
    if global.json {
        output::json(&json!({
            "revision": restored.revision, "pairs": restored.pairs, "bytes": restored.bytes,
            "data": data.display().to_string(),
        }));
    } else {
        output::line(&format!(
            "restored revision {} ({} rows) into {}; serve it with \
             `whip cell serve --id 1 --listen ADDR --data {}`",
            restored.revision,
            restored.pairs,
            data.display(),
            data.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// What a save wrote.
pub(crate) struct Saved {
    /// The last applied log index the snapshot holds.
    pub(crate) revision: u64,
    /// Bytes of the file.
    pub(crate) bytes: u64,
    /// blake3 of the file, hex.
    pub(crate) blake3: String,
}

impl Saved {
    pub(crate) fn json(&self) -> serde_json::Value {
        json!({"revision": self.revision, "bytes": self.bytes, "blake3": self.blake3})
    }
}

/// Removes the partial file unless the save completed.
struct Partial {
    path: PathBuf,
    done: bool,
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Save a snapshot of hosted cell `cell` of the members at `addrs` to `file`: from the
/// cell's leader (following a member's hint), checked against the server's blake3.
pub(crate) async fn save(addrs: &[String], cell: u64, file: &Path) -> Result<Saved> {
    if file.exists() {
        bail!(
            "{} exists: a snapshot is never written over a file",
            file.display()
        );
    }
    let mut addrs = addrs.to_vec();
    let mut hops = 0;
    let mut stream = loop {
        match CellClient::connect(&addrs)?.snapshot_save(cell).await {
            Ok(stream) => break stream,
            Err(whip_cell::CellError::NotLeader { hint: Some(leader) })
                if hops < crate::limits::SNAPSHOT_HINTS_MAX =>
            {
                hops += 1;
                addrs = vec![leader];
            }
            Err(e) => return Err(anyhow!("snapshot of cell {cell}: {e}")),
        }
    };
    let partial_path = file.with_extension("partial");
    let mut partial = Partial {
        path: partial_path.clone(),
        done: false,
    };
    let mut body = Vec::new();
    let mut expected = None;
    let mut revision = 0;
    let mut progress: Option<Progress> = None;
    while let Some(chunk) = stream.message().await.map_err(whip_cell::CellError::from)? {
        revision = chunk.revision;
        let bar = progress.get_or_insert_with(|| {
            Progress::new(&format!("cell {cell}"), chunk.total_bytes, "bytes")
        });
        body.extend_from_slice(&chunk.data);
        bar.set(body.len() as u64);
        if !chunk.blake3.is_empty() {
            expected = Some(chunk.blake3);
        }
    }
    drop(progress);
    let expected = expected.ok_or_else(|| anyhow!("the snapshot stream ended early"))?;
    let found = whip_cell::backup::hash_hex(&body);
    if found != expected {
        bail!("checksum_mismatch: received body hashes to {found}, the server sent {expected}");
    }
    let bytes = whip_cell::backup::file_bytes(&body);
    write_new(&partial_path, &bytes)?;
    std::fs::rename(&partial_path, file)
        .with_context(|| format!("renaming {} into place", partial_path.display()))?;
    partial.done = true;
    Ok(Saved {
        revision,
        bytes: bytes.len() as u64,
        blake3: whip_cell::backup::hash_hex(&bytes),
    })
}

/// Write `bytes` to a new 0600 file at `path` and make it durable.
fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    out.write_all(bytes)
        .and_then(|()| out.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}
