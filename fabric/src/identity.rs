//! Cell identities: the ed25519 key each cell signs its envelopes with, and the registry of
//! public keys that receivers check signatures against.
//!
//! A cell's private key is made once, when the cell is created, and kept in
//! `identity.key` in the cell's data directory with mode 0600; a key file that group or
//! others may read is refused rather than used. The public key is registered in the meta
//! cell ([`KeyRegistry`]). A cell deployed without a key file has no identity
//! ([`CellIdentity::load`] answers `None`): it can still receive, but it refuses to hand off.
//!
//! Key file layout (33 bytes): one version byte ([`KEY_FILE_VERSION`]), then the 32-byte
//! ed25519 secret key.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use rand::TryRngCore;
use serde::{Deserialize, Serialize};

/// Name of the key file in a cell's data directory.
pub const KEY_FILE_NAME: &str = "identity.key";
/// First byte of the key file.
pub const KEY_FILE_VERSION: u8 = 1;
/// Length of the key file: the version byte and the secret key.
const KEY_FILE_BYTES: usize = 1 + 32;

/// A cell's signing key. It is never printed, and it is wiped from memory when dropped.
pub struct CellIdentity {
    key: SigningKey,
}

impl std::fmt::Debug for CellIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellIdentity")
            .field("public_key", &self.public_key_hex())
            .finish()
    }
}

impl CellIdentity {
    /// A new identity from the operating system's random source.
    pub fn generate() -> io::Result<Self> {
        let mut secret = [0u8; 32];
        rand::rngs::OsRng
            .try_fill_bytes(&mut secret)
            .map_err(io::Error::other)?;
        Ok(Self::from_secret(&secret))
    }

    /// The identity with this secret key (tests, restores).
    pub fn from_secret(secret: &[u8; 32]) -> Self {
        CellIdentity {
            key: SigningKey::from_bytes(secret),
        }
    }

    /// Load the identity in `dir`, or make one and write it there (mode 0600) when there is
    /// none yet. Call this when a cell is created, not when it starts: a cell that starts
    /// without its key file should stay without one ([`CellIdentity::load`]).
    pub fn load_or_create(dir: &Path) -> io::Result<Self> {
        if let Some(identity) = Self::load(dir)? {
            return Ok(identity);
        }
        Self::install(dir, Self::generate()?)
    }

    /// Load the identity in `dir`, or write the one with `secret` there (mode 0600): how the
    /// other members of a cell get the identity its creator generated. An existing key file
    /// with another key is an error.
    pub fn load_or_install(dir: &Path, secret: &[u8; 32]) -> io::Result<Self> {
        let wanted = Self::from_secret(secret);
        let identity = match Self::load(dir)? {
            Some(identity) => identity,
            None => Self::install(dir, wanted)?,
        };
        if identity.public_key() != Self::from_secret(secret).public_key() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} holds another cell identity", key_path(dir).display()),
            ));
        }
        Ok(identity)
    }

    /// The secret key bytes: only to install this identity on the cell's other members.
    pub fn secret(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// Write `identity` to `dir` unless a key file is there already (then load that one).
    fn install(dir: &Path, identity: Self) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let path = key_path(dir);
        // Write a private temporary file, make it durable, then link it into place: a crash
        // never leaves a half-written key file, and a concurrent creator's key is never
        // replaced (the link fails and we load theirs instead).
        let temporary = dir.join(format!("{KEY_FILE_NAME}.{}.tmp", std::process::id()));
        let _ = fs::remove_file(&temporary);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        let mut bytes = [0u8; KEY_FILE_BYTES];
        bytes[0] = KEY_FILE_VERSION;
        bytes[1..].copy_from_slice(identity.key.as_bytes());
        let written = file.write_all(&bytes).and_then(|()| file.sync_all());
        bytes.fill(0);
        drop(file);
        let linked = written.and_then(|()| fs::hard_link(&temporary, &path));
        let _ = fs::remove_file(&temporary);
        match linked {
            Ok(()) => {
                fs::File::open(dir)?.sync_all()?;
                Ok(identity)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Self::load(dir)?
                .ok_or_else(|| io::Error::other("identity key file vanished while created")),
            Err(e) => Err(e),
        }
    }

    /// Load the identity in `dir`; `None` when there is no key file (the cell was deployed
    /// without a signing key). A key file readable by group or others is an error.
    pub fn load(dir: &Path) -> io::Result<Option<Self>> {
        let path = key_path(dir);
        let file = match fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mode = file.metadata()?.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "identity key file {} has mode {:04o}, group and others must have no \
                     access (chmod 600 it)",
                    path.display(),
                    mode & 0o7777
                ),
            ));
        }
        let mut bytes = Vec::with_capacity(KEY_FILE_BYTES);
        file.take(KEY_FILE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)?;
        let identity = parse_key_file(&bytes).map_err(|m| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {m}", path.display()),
            )
        });
        bytes.fill(0);
        identity.map(Some)
    }

    /// The public key, as registered in the meta cell.
    pub fn public_key(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    /// The public key in lowercase hex (64 characters).
    pub fn public_key_hex(&self) -> String {
        public_key_to_hex(&self.public_key())
    }

    /// Sign `message`. Only envelopes are signed with a cell key, and their signed bytes
    /// start with a context string, so a signature over anything else cannot pass as one.
    pub(crate) fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }
}

fn key_path(dir: &Path) -> PathBuf {
    dir.join(KEY_FILE_NAME)
}

fn parse_key_file(bytes: &[u8]) -> Result<CellIdentity, String> {
    if bytes.len() != KEY_FILE_BYTES {
        return Err(format!(
            "identity key file has {} bytes, expected {KEY_FILE_BYTES}",
            bytes.len()
        ));
    }
    if bytes[0] != KEY_FILE_VERSION {
        return Err(format!(
            "identity key file version {} is not supported, expected {KEY_FILE_VERSION}",
            bytes[0]
        ));
    }
    let mut secret = [0u8; 32];
    secret.copy_from_slice(&bytes[1..]);
    let identity = CellIdentity::from_secret(&secret);
    secret.fill(0);
    Ok(identity)
}

/// A public key in lowercase hex.
pub fn public_key_to_hex(key: &[u8; 32]) -> String {
    to_hex(key)
}

/// Bytes in lowercase hex.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

/// Parse a public key from 64 hex digits (either case).
pub fn public_key_from_hex(text: &str) -> Result<[u8; 32], String> {
    let digits = text.as_bytes();
    if digits.len() != 64 {
        return Err(format!(
            "public key has {} hex digits, expected 64",
            digits.len()
        ));
    }
    let mut key = [0u8; 32];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        let high = hex_value(pair[0]);
        let low = hex_value(pair[1]);
        match (high, low) {
            (Some(high), Some(low)) => key[i] = high << 4 | low,
            _ => {
                return Err(format!(
                    "public key has a non-hex digit near position {}",
                    2 * i
                ));
            }
        }
    }
    Ok(key)
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// Cell id → public key, as kept in the meta cell. Serialized as a map of cell id to hex, so
/// an operator can read it; only valid, non-weak ed25519 keys get in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "BTreeMap<u64, String>", try_from = "BTreeMap<u64, String>")]
pub struct KeyRegistry {
    keys: BTreeMap<u64, [u8; 32]>,
}

impl KeyRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The public key of `cell`, if registered.
    pub fn get(&self, cell: u64) -> Option<[u8; 32]> {
        self.keys.get(&cell).copied()
    }

    /// Register (or replace) the key of `cell`; answers the key it replaced. A key that is
    /// not a valid ed25519 point, or is of small order, is refused.
    pub fn insert(&mut self, cell: u64, key: [u8; 32]) -> Result<Option<[u8; 32]>, String> {
        check_public_key(&key).map_err(|m| format!("key of cell {cell}: {m}"))?;
        Ok(self.keys.insert(cell, key))
    }

    /// Forget the key of `cell`; answers it.
    pub fn remove(&mut self, cell: u64) -> Option<[u8; 32]> {
        self.keys.remove(&cell)
    }

    /// Registered cells and their keys, by cell id.
    pub fn iter(&self) -> impl Iterator<Item = (u64, [u8; 32])> + '_ {
        self.keys.iter().map(|(&cell, &key)| (cell, key))
    }

    /// How many cells have a key.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// No cell has a key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn check_public_key(key: &[u8; 32]) -> Result<(), String> {
    match VerifyingKey::from_bytes(key) {
        Ok(point) if point.is_weak() => Err("public key is of small order".into()),
        Ok(_) => Ok(()),
        Err(_) => Err("public key is not a valid ed25519 point".into()),
    }
}

impl From<KeyRegistry> for BTreeMap<u64, String> {
    fn from(registry: KeyRegistry) -> Self {
        registry
            .keys
            .iter()
            .map(|(&cell, key)| (cell, public_key_to_hex(key)))
            .collect()
    }
}

impl TryFrom<BTreeMap<u64, String>> for KeyRegistry {
    type Error = String;

    fn try_from(hex: BTreeMap<u64, String>) -> Result<Self, String> {
        let mut registry = KeyRegistry::new();
        for (cell, text) in hex {
            let key = public_key_from_hex(&text).map_err(|m| format!("key of cell {cell}: {m}"))?;
            registry.insert(cell, key)?;
        }
        Ok(registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_created_key_file_is_private_and_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            CellIdentity::load(dir.path()).unwrap().is_none(),
            "no key yet"
        );
        let made = CellIdentity::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        assert_eq!(mode_of(&path), 0o600);
        assert_eq!(fs::metadata(&path).unwrap().len(), KEY_FILE_BYTES as u64);
        let loaded = CellIdentity::load(dir.path())
            .unwrap()
            .expect("key file exists");
        assert_eq!(loaded.public_key(), made.public_key());
        let again = CellIdentity::load_or_create(dir.path()).unwrap();
        assert_eq!(
            again.public_key(),
            made.public_key(),
            "an existing key is kept"
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn a_key_file_readable_by_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        CellIdentity::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let error = CellIdentity::load(dir.path()).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
        assert!(error.to_string().contains("mode 0644"), "{error}");
        let error = CellIdentity::load_or_create(dir.path()).unwrap_err();
        assert_eq!(
            error.kind(),
            io::ErrorKind::PermissionDenied,
            "never replaced"
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        assert!(
            CellIdentity::load(dir.path()).is_err(),
            "group read is refused too"
        );
    }

    #[test]
    fn a_damaged_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        let write = |bytes: &[u8]| {
            let _ = fs::remove_file(&path);
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .unwrap();
            file.write_all(bytes).unwrap();
        };
        write(&[KEY_FILE_VERSION; 10]);
        let error = CellIdentity::load(dir.path()).unwrap_err();
        assert!(error.to_string().contains("has 10 bytes"), "{error}");
        write(&[2; KEY_FILE_BYTES]);
        let error = CellIdentity::load(dir.path()).unwrap_err();
        assert!(error.to_string().contains("version 2"), "{error}");
    }

    #[test]
    fn public_keys_round_trip_through_hex() {
        let identity = CellIdentity::from_secret(&[7; 32]);
        let hex = identity.public_key_hex();
        assert_eq!(hex.len(), 64);
        assert_eq!(public_key_from_hex(&hex).unwrap(), identity.public_key());
        assert_eq!(
            public_key_from_hex(&hex.to_uppercase()).unwrap(),
            identity.public_key()
        );
        assert!(public_key_from_hex(&hex[..62]).is_err());
        assert!(public_key_from_hex(&format!("zz{}", &hex[2..])).is_err());
        assert!(!format!("{identity:?}").contains(&public_key_to_hex(&[7; 32])));
    }

    #[test]
    fn the_registry_keeps_valid_keys_and_serializes_as_hex() {
        let mut registry = KeyRegistry::new();
        let one = CellIdentity::from_secret(&[1; 32]).public_key();
        let two = CellIdentity::from_secret(&[2; 32]).public_key();
        assert_eq!(registry.insert(1, one), Ok(None));
        assert_eq!(registry.insert(2, two), Ok(None));
        assert_eq!(registry.get(1), Some(one));
        assert_eq!(registry.get(3), None);
        // The identity point is of small order: it would accept forged signatures.
        let mut identity_point = [0u8; 32];
        identity_point[0] = 1;
        assert!(registry.insert(3, identity_point).is_err());
        let json = serde_json::to_string(&registry).unwrap();
        assert!(json.contains(&public_key_to_hex(&one)), "{json}");
        let back: KeyRegistry = serde_json::from_str(&json).unwrap();
        assert_eq!(back, registry);
        let bad = format!("{{\"4\":\"{}\"}}", public_key_to_hex(&identity_point));
        assert!(serde_json::from_str::<KeyRegistry>(&bad).is_err());
        assert_eq!(registry.remove(1), Some(one));
        assert_eq!(registry.len(), 1);
    }
}
