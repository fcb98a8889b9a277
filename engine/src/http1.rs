//! A minimal HTTP/1.1 client over plain TCP for the engine's outbound calls to loopback
//! services (the model broker, a model endpoint on loopback): one connection per call, a
//! bounded answer, a bounded wait, and errors that say whether the request may have been
//! received ([`CallError::Unreachable`]: certainly not).

use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// The request methods (`Method::GET`, `Method::POST`).
pub use hyper::Method;

/// An `http://HOST:PORT/PATH` URL, split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUrl {
    /// `HOST:PORT`.
    pub authority: String,
    /// `/PATH` (at least `/`).
    pub path: String,
}

impl HttpUrl {
    /// Parse `url`; only `http://` (TLS egress is not built in: see the broker's docs).
    pub fn parse(url: &str) -> Result<HttpUrl, String> {
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(format!("`{url}` is not an http:// URL"));
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(format!("`{url}` names no host"));
        }
        let authority = match authority.contains(':') {
            true => authority.to_string(),
            false => format!("{authority}:80"),
        };
        Ok(HttpUrl {
            authority,
            path: path.to_string(),
        })
    }

    /// Whether the host is a loopback name or address.
    pub fn is_loopback(&self) -> bool {
        let host = self.authority.rsplit_once(':').map_or("", |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
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
    let sender = connect(&url.authority, wait).await?;
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

/// Connect to `authority` within `wait` and hand the connection to a task; a failure here
/// means nothing was sent.
pub async fn connect(authority: &str, wait: Duration) -> Result<Sender, CallError> {
    let stream = match tokio::time::timeout(wait, tokio::net::TcpStream::connect(authority)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(CallError::Unreachable(format!("{authority}: {e}"))),
        Err(_) => {
            return Err(CallError::Unreachable(format!(
                "{authority}: no connection"
            )));
        }
    };
    let _ = stream.set_nodelay(true);
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| CallError::Unreachable(format!("{authority}: {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "an outbound connection ended");
        }
    });
    Ok(sender)
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
        assert!(HttpUrl::parse("https://api.example.com/v1").is_err());
        assert!(HttpUrl::parse("http:///x").is_err());
    }
}
