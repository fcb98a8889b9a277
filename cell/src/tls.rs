//! Who is on the other end of a connection, proven by the transport before any decoding.
//!
//! A cluster has one certificate authority (ECDSA P-256, made with rcgen). It signs two kinds
//! of certificate, told apart by their subject name:
//! - a **node** certificate ([`NODE_NAME`], server and client use): every server presents it,
//!   and nodes present it to each other. Raft, forwarding, reads, delivery, admin and node
//!   services answer only connections that presented one ([`Gate`]).
//! - an **operator** certificate ([`OPERATOR_NAME`], client use only): the credential made at
//!   init for the user who runs the cluster. Admin and node-management calls (membership,
//!   `fabric init|split|move|status`, cell creation) and agent registration accept it.
//!
//! Agents are proven above this layer, by their token (see [`crate::identity`]). A local
//! socket (the embedded store's `cell.sock`, 0600 in a 0700 directory) and an in-process
//! client are the local user, who is the operator of their own store. Plaintext
//! ([`Transport::Insecure`]) exists only behind an explicit `--insecure` and only on loopback.
//!
//! A credential is replaced while the process serves ([`Tls`]): new connections use the
//! new one, open connections keep theirs. Servers take a new one from the operator only
//! (`Admin/InstallCredential`, [`Needs::OperatorOnly`]), checked before it is used.
//!
//! Must never: accept a peer service call from a connection without a node certificate, or
//! trust anything a request body says about its sender.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use tokio_rustls::rustls::ServerConfig;
use tonic::Status;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo, UdsConnectInfo};

use crate::metrics::RpcStats;

mod live;
mod pki;
pub use live::{Presented, Tls, bundle, certificates, fingerprint};
pub use pki::{
    Authority, PkiError, config_dir, load_credentials, node_credential_path, node_credentials,
    operator_credentials, private_dir, store_credentials, write_private,
};

/// The subject name of every node certificate (and the name clients verify servers by).
pub const NODE_NAME: &str = "node.whip.internal";
/// The subject name of operator certificates.
pub const OPERATOR_NAME: &str = "operator.whip.internal";

/// A certificate and its private key, PEM.
#[derive(Clone)]
pub struct Pem {
    /// The certificate chain, PEM.
    pub cert: String,
    /// The private key, PEM.
    pub key: String,
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pem { .. }")
    }
}

/// What one principal connects with: the cluster's CA and, optionally, its own certificate.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// The cluster CA certificate, PEM: servers are verified against it, and a server verifies
    /// client certificates against it.
    pub ca: String,
    /// This principal's certificate and key (a node's, or the operator's).
    pub identity: Option<Pem>,
}

/// How connections are made and accepted.
#[derive(Clone, Debug)]
pub enum Transport {
    /// TLS verified against the cluster's trust bundle (mutual when the credential has a
    /// certificate); its settings can be replaced while the process runs ([`Tls`]).
    Tls(Arc<Tls>),
    /// Plaintext HTTP/2: only behind `--insecure`, only on loopback; every caller is trusted
    /// as the local user.
    Insecure,
}

/// Errors setting up a transport.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Plaintext was asked for on an address other programs could reach.
    #[error("--insecure serves plaintext and is refused on {addr}: use a loopback address")]
    InsecureNotLoopback {
        /// The refused address.
        addr: String,
    },
    /// A server needs its own certificate.
    #[error("a TLS server needs a node certificate")]
    NoIdentity,
    /// A PEM text did not parse.
    #[error("{what}: {error}")]
    Pem {
        /// What was being read (certificate, private key).
        what: &'static str,
        /// Why it did not parse.
        error: String,
    },
    /// The certificate is not a node certificate.
    #[error("the certificate is not a node certificate (subject {NODE_NAME})")]
    NotNode,
    /// The certificate does not chain to a CA of the trust bundle (or is not valid now).
    #[error("the certificate does not chain to a CA of the trust bundle, or is not valid now")]
    Untrusted,
    /// The new trust bundle shares no CA with the one trusted now.
    #[error(
        "the new trust bundle keeps none of the CAs trusted now: trust the old and the new CA \
         first (whip fabric rotate-certs does)"
    )]
    NoCommonCa,
    /// The credential could not be written to the file it is kept in.
    #[error("keeping the credential: {0}")]
    Keep(String),
    /// rustls refused the settings (a key that does not match its certificate).
    #[error("tls settings: {0}")]
    Config(String),
}

impl Transport {
    /// TLS with `credentials` just issued by an [`Authority`] (in memory, not kept in a
    /// file). Panics if they do not parse; use [`Transport::try_tls`] for credentials read
    /// from elsewhere.
    pub fn tls(credentials: Credentials) -> Transport {
        Transport::try_tls(credentials).expect("credentials issued by an authority parse")
    }

    /// TLS with `credentials`, held in memory.
    pub fn try_tls(credentials: Credentials) -> Result<Transport, TransportError> {
        Ok(Transport::Tls(Arc::new(Tls::new(credentials, None)?)))
    }

    /// TLS with `credentials` kept in the file `home` (a node's `DATA/tls/node.json`), which
    /// an installed credential replaces ([`Tls::install`]).
    pub fn kept(credentials: Credentials, home: PathBuf) -> Result<Transport, TransportError> {
        Ok(Transport::Tls(Arc::new(Tls::new(credentials, Some(home))?)))
    }

    /// The replaceable TLS settings (None: plaintext).
    pub fn live(&self) -> Option<&Arc<Tls>> {
        match self {
            Transport::Tls(tls) => Some(tls),
            Transport::Insecure => None,
        }
    }

    /// The URI scheme of this transport.
    pub fn scheme(&self) -> &'static str {
        match self {
            Transport::Tls(_) => "https",
            Transport::Insecure => "http",
        }
    }

    /// The server settings new connections on `addr` are accepted with now (None:
    /// plaintext, which is refused unless `addr` is a loopback address).
    pub fn server_config(
        &self,
        addr: &std::net::SocketAddr,
    ) -> Result<Option<Arc<ServerConfig>>, TransportError> {
        match self {
            Transport::Insecure if addr.ip().is_loopback() => Ok(None),
            Transport::Insecure => Err(TransportError::InsecureNotLoopback {
                addr: addr.to_string(),
            }),
            Transport::Tls(tls) => tls
                .server_config()
                .ok_or(TransportError::NoIdentity)
                .map(Some),
        }
    }
}

static CLIENT_DEFAULT: RwLock<Option<Transport>> = RwLock::new(None);

/// Where the client transport comes from when none was set: asked once, on first dial.
type TransportSource = Box<dyn Fn() -> Transport + Send + Sync>;

static CLIENT_SOURCE: std::sync::OnceLock<TransportSource> = std::sync::OnceLock::new();

/// Set the transport clients of this process use when none is given (the CLI sets the
/// operator's credentials once at start).
pub fn set_client_default(transport: Transport) {
    *CLIENT_DEFAULT.write().expect("transport lock") = Some(transport);
}

/// Let clients of this process take their transport from `source`, asked the first time a
/// client dials a network address. A process that never dials (one on the embedded store:
/// in process or over its local socket) never asks, so it makes no credentials. Only the
/// first source set counts.
pub fn set_client_default_source(source: impl Fn() -> Transport + Send + Sync + 'static) {
    let _ = CLIENT_SOURCE.set(Box::new(source));
}

/// The transport clients use when none is given: what [`set_client_default`] set, else what
/// the [`set_client_default_source`] source gives (once), else plaintext (which a TLS
/// server never answers, so nothing is sent in the clear to one).
pub fn client_default() -> Transport {
    if let Some(transport) = CLIENT_DEFAULT.read().expect("transport lock").clone() {
        return transport;
    }
    let Some(source) = CLIENT_SOURCE.get() else {
        return Transport::Insecure;
    };
    let mut slot = CLIENT_DEFAULT.write().expect("transport lock");
    // Another thread may have asked the source while this one waited for the lock.
    slot.get_or_insert_with(source).clone()
}

/// Who a call comes from, as the transport proved it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Principal {
    /// A node of this cluster (a node certificate of its CA).
    Node,
    /// The cluster's operator (an operator certificate of its CA).
    Operator,
    /// The local user: the embedded store's socket, an in-process client, or a plaintext
    /// server on loopback started with `--insecure`.
    Local,
    /// Anybody else: a TLS client without a certificate (agents prove themselves with tokens).
    Anonymous,
}

impl Principal {
    /// Whether this principal may run the cluster (membership, ranges, cells, agents).
    pub fn is_operator(self) -> bool {
        matches!(
            self,
            Principal::Node | Principal::Operator | Principal::Local
        )
    }

    /// Whether this principal may speak for a node (Raft, forwarding, delivery).
    pub fn is_node(self) -> bool {
        matches!(self, Principal::Node | Principal::Local)
    }
}

/// The principal of a call, from the connection facts tonic put in its extensions.
pub fn principal(extensions: &http::Extensions) -> Principal {
    if let Some(local) = extensions.get::<Principal>() {
        // Set only by the in-process client: never read from the wire.
        return *local;
    }
    if let Some(tls) = extensions.get::<TlsConnectInfo<TcpConnectInfo>>() {
        let Some(certs) = tls.peer_certs() else {
            return Principal::Anonymous;
        };
        return certs
            .first()
            .map_or(Principal::Anonymous, |cert| role_of(cert.as_ref()));
    }
    if extensions.get::<UdsConnectInfo>().is_some() {
        return Principal::Local;
    }
    if extensions.get::<TcpConnectInfo>().is_some() {
        // Plaintext TCP: a server only accepts it on loopback behind --insecure.
        return Principal::Local;
    }
    Principal::Anonymous
}

/// The role a verified client certificate names (rustls already checked it chains to the
/// cluster CA).
fn role_of(der: &[u8]) -> Principal {
    let der = rustls_pki_types::CertificateDer::from(der);
    let Ok(cert) = webpki::EndEntityCert::try_from(&der) else {
        return Principal::Anonymous;
    };
    let named = |name: &'static str| {
        rustls_pki_types::ServerName::try_from(name)
            .is_ok_and(|server| cert.verify_is_valid_for_subject_name(&server).is_ok())
    };
    if named(NODE_NAME) {
        Principal::Node
    } else if named(OPERATOR_NAME) {
        Principal::Operator
    } else {
        Principal::Anonymous
    }
}

/// What a gRPC method needs of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Anyone may call (agents are checked by token inside).
    Anyone,
    /// A node or the operator.
    Operator,
    /// The operator itself (its certificate, or the local user), not a node: one node's
    /// credential must not replace another node's, nor take a snapshot of a whole cell.
    OperatorOnly,
    /// A node.
    Node,
}

/// What `path` (`/package.Service/Method`) needs of its caller.
pub fn needs(path: &str) -> Needs {
    if path == "/whip.v1.Admin/InstallCredential" || path == "/whip.v1.Admin/SnapshotSave" {
        Needs::OperatorOnly
    } else if path.starts_with("/whip.v1.Raft/") || path == "/whip.v1.Node/Deliver" {
        Needs::Node
    } else if path.starts_with("/whip.v1.Admin/")
        || path.starts_with("/whip.v1.Node/")
        || path == "/whip.v1.Cell/Status"
    {
        // Membership, addresses, terms and lag: the operator's business.
        Needs::Operator
    } else {
        Needs::Anyone
    }
}

/// Whether `principal` may call `path`; the refusal says what was missing.
pub fn admit(path: &str, principal: Principal) -> Result<(), Status> {
    let ok = match needs(path) {
        Needs::Anyone => true,
        Needs::Operator => principal.is_operator(),
        Needs::OperatorOnly => matches!(principal, Principal::Operator | Principal::Local),
        Needs::Node => principal.is_node(),
    };
    match (ok, principal) {
        (true, _) => Ok(()),
        (false, Principal::Anonymous) => Err(Status::unauthenticated(format!(
            "{path} needs a certificate of this cluster ({} certificate)",
            match needs(path) {
                Needs::Node => "a node",
                Needs::OperatorOnly => "the operator's",
                _ => "a node or operator",
            }
        ))),
        (false, other) if needs(path) == Needs::OperatorOnly => Err(Status::permission_denied(
            format!("{path} is the operator's, not the {other:?} credential's"),
        )),
        (false, other) => Err(Status::permission_denied(format!(
            "{path} is for nodes of this cluster, not the {other:?} credential"
        ))),
    }
}

/// tonic answers a message over the size limit `OUT_OF_RANGE`; our contract is
/// `INVALID_ARGUMENT` for every malformed or oversized request.
fn too_large_is_invalid(headers: &mut http::HeaderMap) {
    const OUT_OF_RANGE: &str = "11";
    if headers
        .get("grpc-status")
        .is_some_and(|s| s == OUT_OF_RANGE)
    {
        let invalid = http::HeaderValue::from_static("3");
        headers.insert("grpc-status", invalid);
    }
}

/// The tower layer every server puts in front of its services: it refuses a call whose
/// caller may not call its method before the body is read or decoded, and counts every
/// call in the server's [`RpcStats`] (its code is the one of a trailers-only answer, which
/// every refusal and error is, else `ok`; its time runs to the response head).
#[derive(Clone, Debug, Default)]
pub struct GateLayer {
    rpc: RpcStats,
}

impl GateLayer {
    /// The gate of a server counting its calls in `rpc`.
    pub fn new(rpc: RpcStats) -> Self {
        GateLayer { rpc }
    }
}

impl<S> tower::Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            rpc: self.rpc.clone(),
        }
    }
}

/// See [`GateLayer`].
#[derive(Clone, Debug)]
pub struct Gate<S> {
    inner: S,
    rpc: RpcStats,
}

type GateFuture<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send + 'static>>;

/// The gRPC code of a trailers-only answer's head; `ok` when the head has none.
fn head_code(headers: &http::HeaderMap) -> tonic::Code {
    headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map_or(tonic::Code::Ok, tonic::Code::from_i32)
}

impl<S, B, R> tower::Service<http::Request<B>> for Gate<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = GateFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let who = principal(request.extensions());
        let started = std::time::Instant::now();
        let path = request.uri().path().to_string();
        let rpc = self.rpc.clone();
        match admit(&path, who) {
            Ok(()) => {
                let answer = self.inner.call(request);
                Box::pin(async move {
                    let mut response = answer.await?;
                    too_large_is_invalid(response.headers_mut());
                    rpc.record(&path, head_code(response.headers()), started.elapsed());
                    Ok(response)
                })
            }
            Err(status) => {
                tracing::debug!(path, principal = ?who, "refused");
                rpc.record(&path, status.code(), started.elapsed());
                let response = status.into_http();
                Box::pin(async move { Ok(response) })
            }
        }
    }
}
