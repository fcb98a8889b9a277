//! A minimal HTTP/1.1 client for the engine's outbound calls (the model broker, a model
//! endpoint, the broker's relay): one connection per call, a bounded answer, a bounded
//! wait, and errors that say whether the request may have been received
//! ([`CallError::Unreachable`]: certainly not).
//!
//! `https://` URLs speak TLS (rustls, the ring provider, TLS 1.2 and 1.3) and verify the
//! server against the system's root certificates, or those of `SSL_CERT_FILE` /
//! `SSL_CERT_DIR` when set (the usual OpenSSL variables, read once per process). A server
//! that fails verification is [`CallError::Unreachable`]: nothing was sent.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// The request methods (`Method::GET`, `Method::POST`).
pub use hyper::Method;

/// An `http://` or `https://` `HOST[:PORT]/PATH` URL, split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUrl {
    /// `HOST:PORT` (the scheme's port when the URL names none), the host in lower case.
    pub authority: String,
    /// `/PATH` (at least `/`, query included).
    pub path: String,
    /// Whether it is `https://`.
    pub tls: bool,
}

impl HttpUrl {
    /// Parse `url`: `http://` or `https://`, a host, an optional port and path. User
    /// information (`user:pass@`) is refused: a credential never travels in a URL.
    pub fn parse(url: &str) -> Result<HttpUrl, String> {
        let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => return Err(format!("`{url}` is not an http:// or https:// URL")),
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(at) if rest.as_bytes()[at] == b'?' => (&rest[..at], format!("/{}", &rest[at..])),
            Some(at) => (&rest[..at], rest[at..].to_string()),
            None => (rest, "/".to_string()),
        };
        if authority.contains('@') {
            return Err("a URL with user information is refused".into());
        }
        if authority.is_empty() || authority.starts_with(':') {
            return Err(format!("`{url}` names no host"));
        }
        let authority = authority.to_ascii_lowercase();
        let has_port = authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.contains(']'));
        let authority = match has_port {
            true => authority,
            false => format!("{authority}:{}", if tls { 443 } else { 80 }),
        };
        Ok(HttpUrl {
            authority,
            path,
            tls,
        })
    }

    /// `scheme://host:port`: where a request goes, as a broker secret's origin names it.
    pub fn origin(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.authority)
    }

    /// The host, without its port (and without an IPv6 address's brackets).
    pub fn host(&self) -> &str {
        let host = self.authority.rsplit_once(':').map_or("", |(h, _)| h);
        host.trim_start_matches('[').trim_end_matches(']')
    }

    /// Whether the host is a loopback name or address.
    pub fn is_loopback(&self) -> bool {
        let host = self.host();
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
}

/// Why a call did not answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The connection failed: nothing was sent.
    Unreachable(String),
    /// The request may have been received, but no whole answer came.
    Interrupted(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(m) => write!(f, "unreachable: {m}"),
            CallError::Interrupted(m) => write!(f, "interrupted: {m}"),
        }
    }
}

/// One call's answer: the status and the body.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body (at most the call's limit).
    pub body: Bytes,
}

/// Send `method` to `url` with `headers` and `body`; the answer within `wait`, its body at
/// most `limit` bytes (the connection too is made within `wait`).
pub async fn call(
    method: Method,
    url: &HttpUrl,
    headers: &[(String, String)],
    body: Vec<u8>,
    (limit, wait): (usize, Duration),
) -> Result<Answer, CallError> {
    let sender = connect(url, wait).await?;
    send(sender, method, url, headers, body, (limit, wait)).await
}

/// Send one request on `sender` (see [`call`]).
pub async fn send(
    mut sender: Sender,
    method: Method,
    url: &HttpUrl,
    headers: &[(String, String)],
    body: Vec<u8>,
    (limit, wait): (usize, Duration),
) -> Result<Answer, CallError> {
    let mut request = Request::builder()
        .method(method)
        .uri(url.path.as_str())
        .header(hyper::header::HOST, url.authority.as_str());
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| CallError::Unreachable(format!("cannot build the request: {e}")))?;
    let exchange = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), limit)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?;
        Ok::<_, String>(Answer {
            status,
            body: body.to_bytes(),
        })
    };
    match tokio::time::timeout(wait, exchange).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(CallError::Interrupted(e)),
        Err(_) => Err(CallError::Interrupted(format!(
            "no answer within {} ms",
            wait.as_millis()
        ))),
    }
}

/// A connection's request side.
pub type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// Connect to `url`'s server within `wait` (TLS included for `https://`) and hand the
/// connection to a task; a failure here means nothing was sent.
pub async fn connect(url: &HttpUrl, wait: Duration) -> Result<Sender, CallError> {
    let authority = url.authority.as_str();
    let unreachable = |why: String| CallError::Unreachable(format!("{authority}: {why}"));
    let open = async {
        let stream = tokio::net::TcpStream::connect(authority)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        if !url.tls {
            return handshake(TokioIo::new(stream)).await.map_err(unreachable);
        }
        let config = tls_config().map_err(|e| unreachable(e.clone()))?;
        let name = rustls_pki_types::ServerName::try_from(url.host().to_string())
            .map_err(|e| unreachable(format!("not a TLS server name: {e}")))?;
        let stream = tokio_rustls::TlsConnector::from(config)
            .connect(name, stream)
            .await
            .map_err(|e| unreachable(format!("TLS: {e}")))?;
        handshake(TokioIo::new(stream)).await.map_err(unreachable)
    };
    match tokio::time::timeout(wait, open).await {
        Ok(result) => result,
        Err(_) => Err(unreachable("no connection".into())),
    }
}

async fn handshake<IO>(io: IO) -> Result<Sender, String>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "an outbound connection ended");
        }
    });
    Ok(sender)
}

/// The client TLS configuration: the system's roots (or `SSL_CERT_FILE`/`SSL_CERT_DIR`),
/// loaded once. An error says why no root could be loaded.
fn tls_config() -> Result<Arc<tokio_rustls::rustls::ClientConfig>, &'static String> {
    static CONFIG: OnceLock<Result<Arc<tokio_rustls::rustls::ClientConfig>, String>> =
        OnceLock::new();
    CONFIG
        .get_or_init(build_tls_config)
        .as_ref()
        .map(Arc::clone)
}

fn build_tls_config() -> Result<Arc<tokio_rustls::rustls::ClientConfig>, String> {
    use tokio_rustls::rustls;
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::warn!(error = %e, "a root certificate could not be loaded");
    }
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(
            "no trusted root certificate was found (SSL_CERT_FILE, SSL_CERT_DIR or \
             the system's store)"
                .into(),
        );
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_and_loopback_is_known() {
        let u = HttpUrl::parse("http://127.0.0.1:8080/v1/chat").unwrap();
        assert_eq!(
            (u.authority.as_str(), u.path.as_str()),
            ("127.0.0.1:8080", "/v1/chat")
        );
        assert!(u.is_loopback());
        let bare = HttpUrl::parse("http://localhost").unwrap();
        assert_eq!(
            (bare.authority.as_str(), bare.path.as_str()),
            ("localhost:80", "/")
        );
        assert!(bare.is_loopback());
        assert!(!HttpUrl::parse("http://10.0.0.1:80/").unwrap().is_loopback());
        let tls = HttpUrl::parse("https://API.example.com/v1").unwrap();
        assert_eq!(
            (tls.authority.as_str(), tls.path.as_str(), tls.tls),
            ("api.example.com:443", "/v1", true)
        );
        assert_eq!(tls.origin(), "https://api.example.com:443");
        assert_eq!(tls.host(), "api.example.com");
        let v6 = HttpUrl::parse("http://[::1]/x?q=1").unwrap();
        assert_eq!((v6.authority.as_str(), v6.host()), ("[::1]:80", "::1"));
        assert!(v6.is_loopback());
        let query = HttpUrl::parse("https://h.example?x=1").unwrap();
        assert_eq!(query.path, "/?x=1");
        assert!(HttpUrl::parse("http:///x").is_err());
        assert!(HttpUrl::parse("https://:443/x").is_err());
        assert!(HttpUrl::parse("ftp://h/x").is_err());
        let user = HttpUrl::parse("https://user:pw@h.example/x").unwrap_err();
        assert!(user.contains("user information"), "{user}");
    }
}
