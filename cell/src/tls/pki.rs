//! The cluster's certificate authority: made once, kept 0600, and the certificates it signs.
//!
//! Files (all 0600, in 0700 directories):
//! - the CA: `ca.json` (certificate and key; `ca.pem` beside it for other tools) in the
//!   operator's whip config;
//! - the operator's credential: `operator.json` (CA, certificate, key) beside it;
//! - a node's credential: `node.json` in the node's `DATA/tls/`.
//!
//! The CA's subject is derived from its public key, so the issuer of later certificates can
//! be rebuilt from the key alone.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use super::{Credentials, NODE_NAME, OPERATOR_NAME, Pem, Principal};
use crate::limits;

/// Errors making or reading credentials.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A file could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// rcgen refused.
    #[error("certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// Nothing to issue a node certificate from.
    #[error(
        "no node credential at {path} and no cluster CA in {config_dir}: copy a node's \
         credential there (`whip credential issue --role node --out FILE` where the CA is), \
         or run the node as the user who keeps the CA"
    )]
    NoAuthority {
        /// Where the node looked for its credential.
        path: PathBuf,
        /// Where it looked for the CA.
        config_dir: PathBuf,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PkiError + '_ {
    move |error| PkiError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Create `dir` (and parents) and make it 0700.
pub fn private_dir(dir: &Path) -> Result<(), PkiError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))
}

/// Write `bytes` to `path` as a 0600 file, atomically (temporary file, fsync, rename).
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), PkiError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
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

/// Write `bytes` to `path` unless it exists; the file that ends up there wins (two processes
/// racing to create the same credential agree on one).
fn write_new_private(path: &Path, bytes: &[u8]) -> Result<(), PkiError> {
    let tmp = path.with_extension(format!("new{}", std::process::id()));
    write_private(&tmp, bytes)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io(path)(e)),
    }
}

fn read(path: &Path) -> Result<Option<String>, PkiError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path)(e)),
    }
}

/// A cluster's certificate authority.
pub struct Authority {
    key: KeyPair,
    cert_pem: String,
}

/// The CA as kept on disk (`ca.json`, 0600).
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredAuthority {
    cert: String,
    key: String,
}

/// A credential as kept on disk (`node.json`, `operator.json`, 0600).
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredCredentials {
    ca: String,
    cert: String,
    key: String,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, PkiError> {
    let Some(text) = read(path)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| io(path)(std::io::Error::other(e)))
}

impl Authority {
    /// A new CA.
    pub fn generate() -> Result<Authority, PkiError> {
        let key = KeyPair::generate()?;
        let cert_pem = ca_params(&key).self_signed(&key)?.pem();
        Ok(Authority { key, cert_pem })
    }

    /// The CA kept in `dir` (`ca.json`, and `ca.pem` for other tools), made there on first
    /// use. Processes racing to make it agree on the one that landed first.
    pub fn load_or_create(dir: &Path) -> Result<Authority, PkiError> {
        if let Some(found) = Authority::load(dir)? {
            return Ok(found);
        }
        private_dir(dir)?;
        let made = Authority::generate()?;
        let stored = StoredAuthority {
            cert: made.cert_pem.clone(),
            key: made.key.serialize_pem(),
        };
        let bytes = serde_json::to_vec_pretty(&stored).expect("plain strings encode");
        write_new_private(&dir.join("ca.json"), &bytes)?;
        let landed = Authority::load(dir)?.ok_or_else(|| {
            io(dir)(std::io::Error::other(
                "ca.json vanished after it was written",
            ))
        })?;
        write_private(&dir.join("ca.pem"), landed.cert_pem.as_bytes())?;
        Ok(landed)
    }

    /// The CA kept in `dir`, if there is one.
    pub fn load(dir: &Path) -> Result<Option<Authority>, PkiError> {
        Authority::load_file(&dir.join("ca.json"))
    }

    /// The CA kept in the file `path` (the form of `ca.json`), if there is one.
    pub fn load_file(path: &Path) -> Result<Option<Authority>, PkiError> {
        let Some(stored) = read_json::<StoredAuthority>(path)? else {
            return Ok(None);
        };
        let key = KeyPair::from_pem(&stored.key)?;
        Ok(Some(Authority {
            key,
            cert_pem: stored.cert,
        }))
    }

    /// Keep this CA in the file `path` (0600, replaced atomically), the form of `ca.json`.
    pub fn store(&self, path: &Path) -> Result<(), PkiError> {
        let stored = StoredAuthority {
            cert: self.cert_pem.clone(),
            key: self.key.serialize_pem(),
        };
        let bytes = serde_json::to_vec_pretty(&stored).expect("plain strings encode");
        write_private(path, &bytes)
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A new certificate for `role` (`Node` or `Operator`), signed by this CA.
    pub fn issue(&self, role: Principal) -> Result<Pem, PkiError> {
        let (name, usages) = match role {
            Principal::Node => (
                NODE_NAME,
                vec![
                    ExtendedKeyUsagePurpose::ServerAuth,
                    ExtendedKeyUsagePurpose::ClientAuth,
                ],
            ),
            _ => (OPERATOR_NAME, vec![ExtendedKeyUsagePurpose::ClientAuth]),
        };
        let mut params = CertificateParams::new(vec![name.to_string()])?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = usages;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = rcgen::date_time_ymd(2024, 1, 1);
        params.not_after = rcgen::date_time_ymd(limits::CERT_VALID_UNTIL_YEAR, 1, 1);
        let key = KeyPair::generate()?;
        let ca = ca_params(&self.key);
        let issuer = Issuer::from_params(&ca, &self.key);
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }

    /// Credentials for a new certificate of `role`.
    pub fn credentials(&self, role: Principal) -> Result<Credentials, PkiError> {
        Ok(Credentials {
            ca: self.cert_pem.clone(),
            identity: Some(self.issue(role)?),
        })
    }

    /// The credential of `role` kept in the file `path`, issued by this CA and saved there
    /// on first use (processes racing to make it agree on the one that landed first).
    pub fn credentials_in(&self, path: &Path, role: Principal) -> Result<Credentials, PkiError> {
        if let Some(found) = load_credentials(path)? {
            return Ok(found);
        }
        if let Some(dir) = path.parent() {
            private_dir(dir)?;
        }
        let issued = self.issue(role)?;
        let stored = StoredCredentials {
            ca: self.cert_pem.clone(),
            cert: issued.cert,
            key: issued.key,
        };
        let bytes = serde_json::to_vec_pretty(&stored).expect("plain strings encode");
        write_new_private(path, &bytes)?;
        load_credentials(path)?
            .ok_or_else(|| io(path)(std::io::Error::other("vanished after it was written")))
    }
}

/// The credential kept in the file `path`, if there is one.
pub fn load_credentials(path: &Path) -> Result<Option<Credentials>, PkiError> {
    Ok(
        read_json::<StoredCredentials>(path)?.map(|stored| Credentials {
            ca: stored.ca,
            identity: Some(Pem {
                cert: stored.cert,
                key: stored.key,
            }),
        }),
    )
}

/// Keep `credentials` (with a certificate) in the file `path` (0600, replaced atomically).
pub fn store_credentials(path: &Path, credentials: &Credentials) -> Result<(), PkiError> {
    let identity = credentials.identity.as_ref().ok_or_else(|| {
        io(path)(std::io::Error::other(
            "a kept credential needs a certificate",
        ))
    })?;
    if let Some(dir) = path.parent() {
        private_dir(dir)?;
    }
    let stored = StoredCredentials {
        ca: credentials.ca.clone(),
        cert: identity.cert.clone(),
        key: identity.key.clone(),
    };
    let bytes = serde_json::to_vec_pretty(&stored).expect("plain strings encode");
    write_private(path, &bytes)
}

/// The CA's own parameters, rebuilt from its key: the subject names the key.
fn ca_params(key: &KeyPair) -> CertificateParams {
    let id = blake3::hash(key.public_key_raw()).to_hex();
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, format!("whip cluster {}", &id[..16]));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = rcgen::date_time_ymd(2024, 1, 1);
    params.not_after = rcgen::date_time_ymd(limits::CERT_VALID_UNTIL_YEAR, 1, 1);
    params
}

/// The whip config directory of this user: `WHIP_CONFIG_DIR`, else `~/.config/whip`. It keeps
/// the cluster CA and the operator credential.
pub fn config_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WHIP_CONFIG_DIR") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".config/whip")
}

/// Where a node keeps its credential: `DATA/tls/node.json`.
pub fn node_credential_path(data_dir: &Path) -> PathBuf {
    data_dir.join("tls").join("node.json")
}

/// The node credential of the server whose data directory is `data_dir`: the one kept there,
/// or one issued now by the CA in `config` (the user who runs the cluster runs the node).
pub fn node_credentials(data_dir: &Path, config: &Path) -> Result<Credentials, PkiError> {
    let path = node_credential_path(data_dir);
    if let Some(found) = load_credentials(&path)? {
        return Ok(found);
    }
    let Some(authority) = Authority::load(config)? else {
        return Err(PkiError::NoAuthority {
            path,
            config_dir: config.to_path_buf(),
        });
    };
    authority.credentials_in(&path, Principal::Node)
}

/// The operator credential kept in `config` (`operator.json`), issued on first use by the CA
/// kept there, which is made on first use too: the user who first runs whip on a machine
/// is the operator of the clusters it starts.
pub fn operator_credentials(config: &Path) -> Result<Credentials, PkiError> {
    let path = config.join("operator.json");
    if let Some(found) = load_credentials(&path)? {
        return Ok(found);
    }
    Authority::load_or_create(config)?.credentials_in(&path, Principal::Operator)
}
