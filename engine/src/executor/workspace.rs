//! The executor's files under its root:
//! - `ROOT/<instance>/`: an instance's workspace (what its `exec` runs write);
//! - `ROOT/.runs/<instance>/<run>.started` and `<run>.json`: a run's marker and its answer;
//! - `ROOT/.cuts/<instance>/<cut>/`: a checkpoint's copy of the workspace.
//!
//! Instance ids never start with `.`, so they never name these. Every durable write is a
//! temporary file or directory, synced, then renamed into place and its directory synced;
//! leftovers of an interrupted write (`.tmp-…`, `.restore-…`, `.trash-…`) are removed when
//! the executor opens its root.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::protocol::{Refusal, WorkspaceDigest};
use crate::limits::{WORKSPACE_BYTES_MAX, WORKSPACE_DEPTH_MAX, WORKSPACE_FILES_MAX};

/// Prefixes of an interrupted write's leftovers.
const LEFTOVER_PREFIXES: [&str; 3] = [".tmp-", ".restore-", ".trash-"];

pub(crate) fn storage(e: io::Error) -> Refusal {
    Refusal::Storage(e.to_string())
}

/// A name no other write of this process uses.
fn unique(prefix: &str, name: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{name}-{}-{n}", std::process::id())
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Sync the whole file system `dir` is on (one call for a copied tree).
fn sync_fs(dir: &Path) -> io::Result<()> {
    let f = fs::File::open(dir)?;
    // SAFETY: syncfs(2) on a descriptor we hold open.
    let rc = unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Write `bytes` to `path` durably: a temporary file, synced, renamed, directory synced.
pub(crate) fn write_durable(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().expect("a file inside a directory");
    fs::create_dir_all(dir)?;
    let name = path.file_name().expect("a file name").to_string_lossy();
    let tmp = dir.join(unique(".tmp-", &name));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, path)?;
    sync_dir(dir)
}

/// Create the root's directories and remove what interrupted writes left.
pub(crate) fn open_root(root: &Path) -> io::Result<()> {
    for dir in [root.to_path_buf(), root.join(".runs"), root.join(".cuts")] {
        fs::create_dir_all(&dir)?;
    }
    let mut dirs = vec![root.to_path_buf()];
    for top in [root.join(".runs"), root.join(".cuts")] {
        for entry in fs::read_dir(&top)?.flatten() {
            dirs.push(entry.path());
        }
    }
    for dir in dirs {
        for entry in fs::read_dir(&dir)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if LEFTOVER_PREFIXES.iter().any(|p| name.starts_with(p)) {
                let path = entry.path();
                let _ = fs::remove_dir_all(&path).or_else(|_| fs::remove_file(&path));
            }
        }
    }
    Ok(())
}

/// Files and bytes copied so far, against the workspace bounds.
#[derive(Default)]
struct Budget {
    files: u64,
    bytes: u64,
}

impl Budget {
    fn take(&mut self, bytes: u64) -> Result<(), Refusal> {
        self.files += 1;
        self.bytes += bytes;
        if self.files > WORKSPACE_FILES_MAX || self.bytes > WORKSPACE_BYTES_MAX {
            return Err(Refusal::WorkspaceTooLarge);
        }
        Ok(())
    }
}

/// Copy the tree `from` into the existing directory `to`: directories, regular files and
/// symbolic links (as links, never followed); other kinds are left out.
fn copy_tree(from: &Path, to: &Path, depth: usize, budget: &mut Budget) -> Result<(), Refusal> {
    if depth > WORKSPACE_DEPTH_MAX {
        return Err(Refusal::WorkspaceTooLarge);
    }
    for entry in fs::read_dir(from).map_err(storage)? {
        let entry = entry.map_err(storage)?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = fs::symlink_metadata(&src).map_err(storage)?;
        if kind.is_dir() {
            fs::create_dir(&dst).map_err(storage)?;
            fs::set_permissions(&dst, kind.permissions()).map_err(storage)?;
            copy_tree(&src, &dst, depth + 1, budget)?;
        } else if kind.is_file() {
            budget.take(kind.len())?;
            fs::copy(&src, &dst).map_err(storage)?;
        } else if kind.file_type().is_symlink() {
            budget.take(0)?;
            let target = fs::read_link(&src).map_err(storage)?;
            std::os::unix::fs::symlink(target, &dst).map_err(storage)?;
        }
    }
    Ok(())
}

/// Every file and link under `dir` as (relative path, absolute path), sorted by path.
fn entries(
    dir: &Path,
    rel: &str,
    depth: usize,
    out: &mut Vec<(String, PathBuf)>,
) -> io::Result<()> {
    if depth > WORKSPACE_DEPTH_MAX {
        return Ok(());
    }
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let kind = fs::symlink_metadata(entry.path())?;
        if kind.is_dir() {
            entries(&entry.path(), &rel, depth + 1, out)?;
        } else if kind.is_file() || kind.file_type().is_symlink() {
            out.push((rel, entry.path()));
        }
    }
    Ok(())
}

/// The digest of the tree at `dir` (an absent directory has no files). Each file adds
/// `f`, its path, NUL, its length (8 bytes, little endian) and its bytes; each link adds
/// `l`, its path, NUL, its target and NUL; in the byte order of the paths.
pub(crate) fn digest(dir: &Path) -> Result<WorkspaceDigest, Refusal> {
    let mut found = Vec::new();
    if is_tree(dir)? {
        entries(dir, "", 0, &mut found).map_err(storage)?;
    }
    found.sort();
    let mut hasher = blake3::Hasher::new();
    let mut bytes = 0;
    for (rel, path) in &found {
        let kind = fs::symlink_metadata(path).map_err(storage)?;
        if kind.file_type().is_symlink() {
            let target = fs::read_link(path).map_err(storage)?;
            hasher.update(b"l");
            hasher.update(rel.as_bytes());
            hasher.update(b"\0");
            hasher.update(target.as_os_str().as_encoded_bytes());
            hasher.update(b"\0");
            continue;
        }
        hasher.update(b"f");
        hasher.update(rel.as_bytes());
        hasher.update(b"\0");
        hasher.update(&kind.len().to_le_bytes());
        let mut f = fs::File::open(path).map_err(storage)?;
        io::copy(&mut f, &mut hasher).map_err(storage)?;
        bytes += kind.len();
    }
    Ok(WorkspaceDigest {
        files: found.len() as u64,
        bytes,
        digest: hasher.finalize().to_hex().to_string(),
    })
}

/// Whether `dir` is a directory (`false`: absent); a link or a file where a workspace or
/// a cut belongs is refused, so a copy never follows a link out of the root.
fn is_tree(dir: &Path) -> Result<bool, Refusal> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(true),
        Ok(_) => Err(Refusal::Storage(format!(
            "{} is not a directory",
            dir.display()
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(storage(e)),
    }
}

/// Copy `from` (absent: nothing) into a fresh directory `staging`, synced.
fn stage(from: &Path, staging: &Path) -> Result<(), Refusal> {
    let present = is_tree(from)?;
    fs::create_dir_all(staging).map_err(storage)?;
    let copied = if present {
        copy_tree(from, staging, 0, &mut Budget::default())
    } else {
        Ok(())
    };
    if let Err(e) = copied.and_then(|()| sync_fs(staging).map_err(storage)) {
        let _ = fs::remove_dir_all(staging);
        return Err(e);
    }
    Ok(())
}

/// `POST /v1/checkpoint`: copy the workspace to `ROOT/.cuts/<instance>/<cut>/`. A cut that
/// exists already is answered as it is (a retried checkpoint changes nothing).
pub(crate) fn checkpoint(
    root: &Path,
    instance: &str,
    cut: &str,
) -> Result<WorkspaceDigest, Refusal> {
    let cuts = root.join(".cuts").join(instance);
    let target = cuts.join(cut);
    if !target.exists() {
        let staging = cuts.join(unique(".tmp-", cut));
        stage(&root.join(instance), &staging)?;
        fs::rename(&staging, &target).map_err(storage)?;
        sync_dir(&cuts).map_err(storage)?;
    }
    digest(&target)
}

/// Swap two directories in one step (`renameat2(RENAME_EXCHANGE)`).
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let a = std::ffi::CString::new(a.as_os_str().as_bytes())?;
    let b = std::ffi::CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: renameat2(2) with two NUL-terminated paths we own.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `POST /v1/restore`: replace the workspace with the cut's copy (the cut stays). The new
/// tree is staged beside the workspace and swapped in with one exchange of names where
/// the file system supports it, else with two renames.
pub(crate) fn restore(root: &Path, instance: &str, cut: &str) -> Result<WorkspaceDigest, Refusal> {
    let source = root.join(".cuts").join(instance).join(cut);
    if !is_tree(&source)? {
        return Err(Refusal::UnknownCut);
    }
    let workspace = root.join(instance);
    let staging = root.join(unique(".restore-", instance));
    stage(&source, &staging)?;
    let present = fs::symlink_metadata(&workspace).is_ok();
    let old = if present {
        if exchange(&staging, &workspace).is_ok() {
            Some(staging.clone())
        } else {
            let trash = root.join(unique(".trash-", instance));
            fs::rename(&workspace, &trash).map_err(storage)?;
            fs::rename(&staging, &workspace).map_err(storage)?;
            Some(trash)
        }
    } else {
        fs::rename(&staging, &workspace).map_err(storage)?;
        None
    };
    sync_dir(root).map_err(storage)?;
    if let Some(old) = old {
        let _ = fs::remove_dir_all(old);
    }
    digest(&workspace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::protocol::EMPTY_DIGEST;

    #[test]
    fn a_cut_restores_the_workspace_it_copied() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        open_root(root).unwrap();
        let empty = checkpoint(root, "ins_a", "c0").unwrap();
        assert_eq!((empty.files, empty.digest.as_str()), (0, EMPTY_DIGEST));
        let ws = root.join("ins_a");
        fs::create_dir_all(ws.join("sub")).unwrap();
        fs::write(ws.join("a.txt"), "one").unwrap();
        fs::write(ws.join("sub/b.txt"), "two").unwrap();
        std::os::unix::fs::symlink("a.txt", ws.join("link")).unwrap();
        let cut = checkpoint(root, "ins_a", "c1").unwrap();
        assert_eq!((cut.files, cut.bytes), (3, 6));
        assert_eq!(
            checkpoint(root, "ins_a", "c1").unwrap(),
            cut,
            "a retry changes nothing"
        );
        fs::write(ws.join("a.txt"), "changed").unwrap();
        fs::write(ws.join("later.txt"), "x").unwrap();
        assert_ne!(digest(&ws).unwrap(), cut);
        assert_eq!(restore(root, "ins_a", "c1").unwrap(), cut);
        assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "one");
        assert!(!ws.join("later.txt").exists());
        assert_eq!(restore(root, "ins_a", "c0").unwrap().digest, EMPTY_DIGEST);
        assert_eq!(restore(root, "ins_a", "nope"), Err(Refusal::UnknownCut));
        // A workspace a run replaced with a link is not followed out of the root.
        let elsewhere = tempfile::tempdir().unwrap();
        let elsewhere = elsewhere.path();
        fs::write(elsewhere.join("canary"), "alive").unwrap();
        fs::remove_dir_all(&ws).unwrap();
        std::os::unix::fs::symlink(elsewhere, &ws).unwrap();
        assert!(matches!(
            checkpoint(root, "ins_a", "c2"),
            Err(Refusal::Storage(_))
        ));
        assert_eq!(restore(root, "ins_a", "c1").unwrap(), cut);
        assert!(!fs::symlink_metadata(&ws).unwrap().file_type().is_symlink());
        assert_eq!(
            fs::read_to_string(elsewhere.join("canary")).unwrap(),
            "alive"
        );
    }
}
