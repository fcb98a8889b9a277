//! Backup and restore of one cell: the snapshot file `whip cell snapshot save` writes and
//! the data directory `whip cell snapshot restore` makes from it.
//!
//! A snapshot file is [`MAGIC`], the body's length (8 bytes, little-endian), the body (a
//! [`Body`] as [`crate::types::encode`] writes it) and the blake3 hash of the body (32
//! bytes). The body is one dump of the applied state at one applied point
//! ([`crate::storage::StateMachineView::dump`]); its `revision` is the last applied log
//! index the dump holds.
//!
//! Invariants:
//! - A file is read whole and checked (magic, length, hash, decoding) before anything is
//!   written: a corrupt or truncated file is a typed [`BackupError`] and creates nothing.
//! - A restored data directory appears whole or not at all (made under a temporary name
//!   beside it, synced, then renamed), and never over a directory that holds anything.
//! - A restored cell continues the old log's numbering: its snapshot sits at log index
//!   `revision`, so its next entries, and the fences and versions they stamp, are above
//!   every one in the snapshot.
//!
//! `whip cell snapshot restore` leaves [`PENDING_FILE`] (the checked snapshot file) in the
//! new directory, since the member's address is known only when it is served: the first
//! [`crate::Cell::start`] on the directory turns it into the cell's snapshot with that member
//! as the one voter ([`finish_pending`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::limits;
use crate::types::{NodeId, decode, encode};

/// The first bytes of every snapshot file.
pub const MAGIC: &[u8; 8] = b"WHIPSNP1";
/// Bytes of the length after [`MAGIC`].
const LENGTH_BYTES: usize = 8;
/// Bytes of the blake3 hash at the end.
const HASH_BYTES: usize = 32;
/// The snapshot file `whip cell snapshot restore` leaves for the first start to install.
pub const PENDING_FILE: &str = "restore.pending";

/// What a snapshot holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Body {
    /// The last applied log index the pairs hold.
    pub revision: u64,
    /// Which cell of a fabric it is (0 for a standalone cell or the meta cell).
    pub cell: u64,
    /// The cell's signing key (a fabric cell's), so handoffs it signed before the backup
    /// still verify after a restore.
    pub identity_secret: Option<Vec<u8>>,
    /// Every state-machine pair, in key order.
    pub pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Why a snapshot file or a restore was refused. Nothing was written when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The file does not start with [`MAGIC`].
    #[error("{path} is not a whip snapshot file")]
    NotASnapshot {
        /// The file.
        path: String,
    },
    /// The file is shorter (or longer) than its header says.
    #[error("{path} is truncated: {found} bytes, the header says {expected}")]
    Truncated {
        /// The file.
        path: String,
        /// Bytes the header promises.
        expected: u64,
        /// Bytes there are.
        found: u64,
    },
    /// The body does not hash to the checksum at the end.
    #[error("{path} is corrupt: its body hashes to {found}, the file says {expected}")]
    Checksum {
        /// The file.
        path: String,
        /// The checksum the file carries.
        expected: String,
        /// The body's hash.
        found: String,
    },
    /// The checksum matches but the body is not a snapshot this version reads.
    #[error("{path} cannot be read: {message}")]
    Undecodable {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// The file is larger than [`limits::SNAPSHOT_FILE_BYTES_MAX`].
    #[error("{path} is {bytes} bytes, more than the {max} a restore reads")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// The data directory exists and holds something.
    #[error("{path} exists and is not empty: restore makes a new data directory")]
    DataDirExists {
        /// The directory.
        path: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: String,
        /// The system's error.
        message: String,
    },
}

impl BackupError {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            BackupError::NotASnapshot { .. } => "not_a_snapshot",
            BackupError::Truncated { .. } => "truncated",
            BackupError::Checksum { .. } => "checksum_mismatch",
            BackupError::Undecodable { .. } => "undecodable",
            BackupError::TooLarge { .. } => "too_large",
            BackupError::DataDirExists { .. } => "data_dir_exists",
            BackupError::Io { .. } => "io",
        }
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> BackupError + '_ {
    move |e| BackupError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The body's bytes as the server streams them.
pub fn body_bytes(body: &Body) -> Vec<u8> {
    encode(body)
}

/// The blake3 hash of `bytes`, in hex.
pub fn hash_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// A whole snapshot file around `body` (its encoded bytes).
pub fn file_bytes(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + LENGTH_BYTES + body.len() + HASH_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(blake3::hash(body).as_bytes());
    out
}

/// Check a whole snapshot file (`path` names it in errors) and decode its body.
pub fn read_bytes(path: &Path, bytes: &[u8]) -> Result<Body, BackupError> {
    let name = || path.display().to_string();
    let header = MAGIC.len() + LENGTH_BYTES;
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(BackupError::NotASnapshot { path: name() });
    }
    let found = bytes.len() as u64;
    let Some(length) = bytes.get(MAGIC.len()..header) else {
        let expected = (header + HASH_BYTES) as u64;
        return Err(BackupError::Truncated {
            path: name(),
            expected,
            found,
        });
    };
    let length = u64::from_le_bytes(length.try_into().expect("8 bytes"));
    let expected = length.saturating_add((header + HASH_BYTES) as u64);
    if found != expected {
        return Err(BackupError::Truncated {
            path: name(),
            expected,
            found,
        });
    }
    let (body, trailer) = bytes[header..].split_at(bytes.len() - header - HASH_BYTES);
    let hash = blake3::hash(body);
    if hash.as_bytes() != trailer {
        return Err(BackupError::Checksum {
            path: name(),
            expected: hex(trailer),
            found: hash.to_hex().to_string(),
        });
    }
    decode::<Body>(body).map_err(|message| BackupError::Undecodable {
        path: name(),
        message,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Read and check the snapshot file at `path` (at most [`limits::SNAPSHOT_FILE_BYTES_MAX`]).
pub fn read_file(path: &Path) -> Result<(Body, Vec<u8>), BackupError> {
    let size = std::fs::metadata(path).map_err(io(path))?.len();
    if size > limits::SNAPSHOT_FILE_BYTES_MAX {
        return Err(BackupError::TooLarge {
            path: path.display().to_string(),
            bytes: size,
            max: limits::SNAPSHOT_FILE_BYTES_MAX,
        });
    }
    let bytes = std::fs::read(path).map_err(io(path))?;
    let body = read_bytes(path, &bytes)?;
    Ok((body, bytes))
}

/// What a restore made.
#[derive(Clone, Debug)]
pub struct Restored {
    /// The snapshot's revision (last applied log index).
    pub revision: u64,
    /// State-machine pairs restored.
    pub pairs: usize,
    /// Bytes of the snapshot file.
    pub bytes: u64,
}

/// `whip cell snapshot restore`: check the snapshot file at `file` and make the data
/// directory `dir` from it, whole or not at all. The first member served on `dir` becomes
/// the new cell's one voter.
pub fn restore_data_dir(file: &Path, dir: &Path) -> Result<Restored, BackupError> {
    let (body, bytes) = read_file(file)?;
    let restored = Restored {
        revision: body.revision,
        pairs: body.pairs.len(),
        bytes: bytes.len() as u64,
    };
    make_dir_atomically(dir, |staging| {
        write_synced(&staging.join(PENDING_FILE), &bytes)
    })?;
    Ok(restored)
}

/// The snapshot of a fabric cell restored on a node: check `bytes` (the snapshot file),
/// let `adjust` change its body (the meta cell's map gets the new addresses), and make `dir`
/// from it with `voters` as the cell's membership. The cell starts from it with no further
/// step; its signing key (in the body) is the node's to install.
pub fn restore_member_dir(
    dir: &Path,
    bytes: &[u8],
    voters: &BTreeMap<NodeId, String>,
    adjust: impl FnOnce(&mut Body) -> Result<(), String>,
) -> Result<Body, BackupError> {
    let name = Path::new("the streamed snapshot");
    let mut body = read_bytes(name, bytes)?;
    let refused = |message: String| BackupError::Undecodable {
        path: name.display().to_string(),
        message,
    };
    if voters.is_empty() {
        return Err(refused("a restored cell needs at least one voter".into()));
    }
    adjust(&mut body).map_err(refused)?;
    let snapshot = crate::storage::restored_snapshot(body.pairs.clone(), body.revision, voters);
    make_dir_atomically(dir, |staging| {
        write_synced(&staging.join(crate::storage::SNAPSHOT_FILE), &snapshot)
    })?;
    Ok(body)
}

/// On a member's start: if `dir` holds a restore's [`PENDING_FILE`], make it the cell's
/// snapshot with member `id` at `advertise` as the one voter, then remove it. Run before the
/// storage opens (which installs that snapshot).
pub(crate) fn finish_pending(dir: &Path, id: NodeId, advertise: &str) -> Result<(), BackupError> {
    let pending = dir.join(PENDING_FILE);
    if !pending.exists() {
        return Ok(());
    }
    let (body, _) = read_file(&pending)?;
    let voters = BTreeMap::from([(id, advertise.to_string())]);
    let snapshot = crate::storage::restored_snapshot(body.pairs, body.revision, &voters);
    write_synced(&dir.join(crate::storage::SNAPSHOT_FILE), &snapshot)?;
    std::fs::remove_file(&pending).map_err(io(&pending))?;
    sync_dir(dir)?;
    tracing::info!(
        revision = body.revision,
        member = id,
        "restored snapshot installed; this member is the cell's one voter"
    );
    Ok(())
}

/// Make `dir` by filling a staging directory beside it with `fill`, then renaming it into
/// place. `dir` must not exist or be empty; on any failure the staging directory goes.
fn make_dir_atomically(
    dir: &Path,
    fill: impl FnOnce(&Path) -> Result<(), BackupError>,
) -> Result<(), BackupError> {
    if let Ok(mut entries) = std::fs::read_dir(dir)
        && entries.next().is_some()
    {
        return Err(BackupError::DataDirExists {
            path: dir.display().to_string(),
        });
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    let name = dir
        .file_name()
        .map_or("data".into(), |n| n.to_string_lossy());
    let staging = parent.join(format!(".{name}.restoring-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let made = crate::tls::private_dir(&staging)
        .map_err(|e| BackupError::Io {
            path: staging.display().to_string(),
            message: e.to_string(),
        })
        .and_then(|()| fill(&staging))
        .and_then(|()| sync_dir(&staging))
        .and_then(|()| std::fs::rename(&staging, dir).map_err(io(dir)))
        .and_then(|()| sync_dir(&parent));
    if made.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    made
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), BackupError> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(&tmp))?;
    file.write_all(bytes).map_err(io(&tmp))?;
    file.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

fn sync_dir(dir: &Path) -> Result<(), BackupError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> Body {
        Body {
            revision: 42,
            cell: 0,
            identity_secret: None,
            pairs: vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2".to_vec()),
            ],
        }
    }

    /// A file reads back as its body; every damage is its own typed refusal.
    #[test]
    fn damaged_files_are_refused_by_kind() {
        let path = Path::new("snap");
        let file = file_bytes(&body_bytes(&body()));
        assert_eq!(read_bytes(path, &file).unwrap(), body());
        let short = &file[..file.len() - 1];
        assert_eq!(read_bytes(path, short).unwrap_err().code(), "truncated");
        let mut flipped = file.clone();
        flipped[MAGIC.len() + LENGTH_BYTES + 2] ^= 1;
        assert_eq!(
            read_bytes(path, &flipped).unwrap_err().code(),
            "checksum_mismatch"
        );
        assert_eq!(
            read_bytes(path, b"hello").unwrap_err().code(),
            "not_a_snapshot"
        );
        assert_eq!(read_bytes(path, MAGIC).unwrap_err().code(), "truncated");
    }

    /// A refused restore leaves no directory, and a restore never writes into a full one.
    #[test]
    fn a_refused_restore_creates_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("snap");
        let mut bytes = file_bytes(&body_bytes(&body()));
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&file, &bytes).unwrap();
        let dir = tmp.path().join("data");
        assert!(restore_data_dir(&file, &dir).is_err());
        assert!(!dir.exists());
        let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the snapshot file is there");
        std::fs::write(&file, file_bytes(&body_bytes(&body()))).unwrap();
        let restored = restore_data_dir(&file, &dir).unwrap();
        assert_eq!(restored.revision, 42);
        assert!(dir.join(PENDING_FILE).exists());
        let again = restore_data_dir(&file, &dir).unwrap_err();
        assert_eq!(again.code(), "data_dir_exists");
    }
}
