//! TLS settings that change while a process runs: certificate rotation without a restart.
//!
//! A [`Tls`] holds the rustls server and client settings built from one [`Credentials`]
//! behind a lock. Every new connection reads the current settings when it starts (the
//! server's acceptor per accepted connection, a client's connector per dial), so
//! [`Tls::replace`] takes effect for new connections at once; connections already open
//! keep the settings they were made with until they close.
//!
//! A trust bundle may hold several CA certificates: during a rotation to a new CA both
//! the old and the new one are trusted, so nodes holding either kind of certificate keep
//! reaching each other.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls;
use tokio_rustls::rustls::client::danger::ServerCertVerifier;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};

use super::{Credentials, NODE_NAME, Principal, TransportError, role_of};

/// The HTTP/2 protocol name both sides agree on (gRPC is HTTP/2 only).
const ALPN_H2: &[u8] = b"h2";

/// What a certificate is known by: the first 16 hex digits of the blake3 hash of its DER.
pub fn fingerprint(der: &[u8]) -> String {
    blake3::hash(der).to_hex()[..16].to_string()
}

/// The certificates of a PEM text, in order (a trust bundle holds one or more).
pub fn certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, TransportError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TransportError::Pem {
            what: "certificate",
            error: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TransportError::Pem {
            what: "certificate",
            error: "no certificate in the PEM text".into(),
        });
    }
    Ok(certs)
}

/// The PEM text of a trust bundle holding every certificate of `bundles`, each once, in
/// order of first appearance.
pub fn bundle(bundles: &[&str]) -> Result<String, TransportError> {
    const END: &str = "-----END CERTIFICATE-----";
    let mut seen = Vec::new();
    let mut out = String::new();
    for pem in bundles {
        let mut rest = *pem;
        while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
            let end = rest[start..].find(END).ok_or_else(|| TransportError::Pem {
                what: "certificate",
                error: "a certificate block does not end".into(),
            })? + start
                + END.len();
            let block = &rest[start..end];
            let der = certificates(block)?.remove(0);
            if !seen.contains(&der) {
                out.push_str(block);
                out.push('\n');
                seen.push(der);
            }
            rest = &rest[end..];
        }
    }
    certificates(&out)?;
    Ok(out)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn rustls_error(e: impl std::fmt::Display) -> TransportError {
    TransportError::Config(e.to_string())
}

fn roots(ca: &str) -> Result<Arc<RootCertStore>, TransportError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca)? {
        roots.add(cert).map_err(rustls_error)?;
    }
    Ok(Arc::new(roots))
}

fn identity_of(
    identity: &super::Pem,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TransportError> {
    let chain = certificates(&identity.cert)?;
    let key = PrivateKeyDer::from_pem_slice(identity.key.as_bytes()).map_err(|e| {
        TransportError::Pem {
            what: "private key",
            error: e.to_string(),
        }
    })?;
    Ok((chain, key))
}

/// The client settings of `credentials`: servers are verified against its trust bundle by
/// the node name; its certificate, if any, is presented.
fn client_config(credentials: &Credentials) -> Result<Arc<ClientConfig>, TransportError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(rustls_error)?
        .with_root_certificates(roots(&credentials.ca)?);
    let mut config = match &credentials.identity {
        Some(identity) => {
            let (chain, key) = identity_of(identity)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(rustls_error)?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

/// The server settings of `credentials`: its certificate is presented; a client certificate
/// is optional (agents bring tokens) and, when presented, must chain to the trust bundle.
fn server_config(credentials: &Credentials) -> Result<Option<Arc<ServerConfig>>, TransportError> {
    let Some(identity) = &credentials.identity else {
        return Ok(None);
    };
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(&credentials.ca)?, provider())
        .allow_unauthenticated()
        .build()
        .map_err(rustls_error)?;
    let (chain, key) = identity_of(identity)?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(rustls_error)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(rustls_error)?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Some(Arc::new(config)))
}

/// The settings built from one credential.
struct Live {
    credentials: Credentials,
    client: Arc<ClientConfig>,
    server: Option<Arc<ServerConfig>>,
}

impl Live {
    fn build(credentials: Credentials) -> Result<Live, TransportError> {
        Ok(Live {
            client: client_config(&credentials)?,
            server: server_config(&credentials)?,
            credentials,
        })
    }
}

/// A process's TLS credential and the settings built from it, replaceable while it serves.
pub struct Tls {
    current: RwLock<Arc<Live>>,
    /// The file the credential is kept in (a node's `DATA/tls/node.json`), rewritten by
    /// [`Tls::install`]; `None` for a credential held in memory only.
    home: Option<PathBuf>,
    /// One install at a time (check, write, swap).
    installing: Mutex<()>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

/// What a server presents and trusts after an install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Presented {
    /// The fingerprint of the certificate it presents.
    pub certificate: String,
    /// The fingerprint of the CA of the trust bundle that issued it.
    pub issuer: String,
    /// The fingerprints of the CA certificates it trusts, in bundle order.
    pub trusted: Vec<String>,
}

impl Tls {
    /// The settings of `credentials` (kept in the file `home`, if given).
    pub fn new(credentials: Credentials, home: Option<PathBuf>) -> Result<Tls, TransportError> {
        Ok(Tls {
            current: RwLock::new(Arc::new(Live::build(credentials)?)),
            home,
            installing: Mutex::new(()),
        })
    }

    fn live(&self) -> Arc<Live> {
        self.current.read().expect("tls settings lock").clone()
    }

    /// The current credential.
    pub fn credentials(&self) -> Credentials {
        self.live().credentials.clone()
    }

    /// The client settings new connections use now.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.live().client.clone()
    }

    /// The server settings new connections are accepted with now (None: no certificate).
    pub fn server_config(&self) -> Option<Arc<ServerConfig>> {
        self.live().server.clone()
    }

    /// The file the credential is kept in, if any.
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// Use `credentials` for every new connection from now on (this process only: the
    /// kept file is not touched).
    pub fn replace(&self, credentials: Credentials) -> Result<(), TransportError> {
        let built = Arc::new(Live::build(credentials)?);
        *self.current.write().expect("tls settings lock") = built;
        Ok(())
    }

    /// Install a node credential a server serves with: the trust bundle `ca`, and a new
    /// certificate and key (None: keep the current ones). It is checked first (it parses,
    /// the key matches, the certificate is a node certificate chaining to the bundle), then
    /// written to the kept file, then used for new connections. The new bundle must keep a
    /// CA trusted now, so one install never cuts a node off from all its peers (a rotation
    /// to a new CA trusts both first). A refused credential changes nothing.
    pub fn install(
        &self,
        ca: String,
        identity: Option<super::Pem>,
    ) -> Result<Presented, TransportError> {
        let _one = self.installing.lock().expect("tls install lock");
        let identity = match identity {
            Some(identity) => identity,
            None => self
                .credentials()
                .identity
                .ok_or(TransportError::NoIdentity)?,
        };
        let credentials = Credentials {
            ca,
            identity: Some(identity),
        };
        let presented = check_node(&credentials)?;
        let now = certificates(&self.credentials().ca)?;
        if !certificates(&credentials.ca)?
            .iter()
            .any(|ca| now.contains(ca))
        {
            return Err(TransportError::NoCommonCa);
        }
        let built = Arc::new(Live::build(credentials)?);
        if let Some(home) = &self.home {
            super::pki::store_credentials(home, &built.credentials)
                .map_err(|e| TransportError::Keep(e.to_string()))?;
        }
        *self.current.write().expect("tls settings lock") = built;
        tracing::info!(
            certificate = %presented.certificate,
            issuer = %presented.issuer,
            trusted = presented.trusted.len(),
            "tls credential installed"
        );
        Ok(presented)
    }

    /// What this server presents and trusts now.
    pub fn presented(&self) -> Result<Presented, TransportError> {
        check_node(&self.live().credentials)
    }
}

/// Whether `credentials` can serve a node: its certificate is a node certificate and
/// chains, valid now, to a CA of its trust bundle (the one reported as the issuer).
fn check_node(credentials: &Credentials) -> Result<Presented, TransportError> {
    let identity = credentials
        .identity
        .as_ref()
        .ok_or(TransportError::NoIdentity)?;
    let (chain, _) = identity_of(identity)?;
    let (leaf, intermediates) = chain.split_first().expect("certificates() is never empty");
    if role_of(leaf.as_ref()) != Principal::Node {
        return Err(TransportError::NotNode);
    }
    let trusted = certificates(&credentials.ca)?;
    let name = ServerName::try_from(NODE_NAME).expect("the node name is a DNS name");
    let issuer = trusted.iter().find(|ca| {
        let mut one = RootCertStore::empty();
        one.add((*ca).clone()).is_ok()
            && rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(one),
                provider(),
            )
            .build()
            .is_ok_and(|verifier| {
                verifier
                    .verify_server_cert(leaf, intermediates, &name, &[], UnixTime::now())
                    .is_ok()
            })
    });
    let issuer = issuer.ok_or(TransportError::Untrusted)?;
    Ok(Presented {
        certificate: fingerprint(leaf.as_ref()),
        issuer: fingerprint(issuer.as_ref()),
        trusted: trusted.iter().map(|ca| fingerprint(ca.as_ref())).collect(),
    })
}
