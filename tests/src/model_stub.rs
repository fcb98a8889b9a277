//! A stand-in for a model service on loopback, OpenAI-compatible enough for the broker and
//! coercion tests: `POST …/chat/completions` answers one chat completion whose content is
//! the JSON the test chose, and every request is kept (path, headers, body) so a test can
//! check what reached the model, such as the key the broker injected.
//!
//! [`ModelStub::start_tls`] serves the same over TLS, with a certificate for `localhost`
//! issued by a CA of its own; a client trusts it only through that CA's PEM (the test
//! hands it over as `SSL_CERT_FILE`).

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_rustls::rustls;

/// One request the stub received.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The request path.
    pub path: String,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Seen {
    /// The value of header `name`, if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The stub: its address and what it received.
pub struct ModelStub {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ModelStub {
    /// Serve on a free loopback port; every completion's content is `content` (JSON text).
    pub async fn start(content: &str) -> ModelStub {
        ModelStub::serve(content, None).await
    }

    /// The same over TLS: the stub, and the PEM of the CA that issued its certificate for
    /// `localhost` (reach it as `https://localhost:PORT`).
    pub async fn start_tls(content: &str) -> (ModelStub, String) {
        let (acceptor, ca_pem) = tls_acceptor();
        (ModelStub::serve(content, Some(acceptor)).await, ca_pem)
    }

    async fn serve(content: &str, tls: Option<tokio_rustls::TlsAcceptor>) -> ModelStub {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answer = serde_json::json!({
            "id": "chatcmpl-stub", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": content}}],
        })
        .to_string();
        let kept = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (kept, answer, tls) = (kept.clone(), answer.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => serve_one(stream, kept, answer).await,
                        Some(tls) => {
                            // A client that does not trust the CA ends the handshake.
                            if let Ok(stream) = tls.accept(stream).await {
                                serve_one(stream, kept, answer).await;
                            }
                        }
                    }
                });
            }
        });
        ModelStub { addr, seen, task }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen lock").clone()
    }
}

impl Drop for ModelStub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A CA of its own and a server certificate for `localhost` it issued: the acceptor and
/// the CA's PEM.
fn tls_acceptor() -> (tokio_rustls::TlsAcceptor, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");
    let key = KeyPair::generate().expect("a server key");
    let leaf = CertificateParams::new(vec!["localhost".to_string()]).expect("leaf params");
    let issuer = Issuer::from_params(&ca, &ca_key);
    let cert = leaf
        .signed_by(&key, &issuer)
        .expect("the server certificate");
    let chain = vec![rustls::pki_types::CertificateDer::from(cert.der().to_vec())];
    let der = rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, der.into())
        .expect("the server's certificate");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    (acceptor, ca_cert.pem())
}

async fn serve_one<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    kept: Arc<Mutex<Vec<Seen>>>,
    answer: String,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let Ok(n) = stream.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..at]).to_ascii_lowercase();
            let length = (head.lines())
                .find_map(|l| {
                    l.strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0usize);
            break (at + 4, length);
        }
    };
    while buf.len() < head_end + length {
        let Ok(n) = stream.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..head_end - 4]).to_string();
    let mut lines = head.lines();
    let path = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("")
        .to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).to_string();
    kept.lock().expect("seen lock").push(Seen {
        path,
        headers,
        body,
    });
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{answer}",
        answer.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
