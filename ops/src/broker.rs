//! `whip broker`: the model broker of LANGUAGE-AGENTS.md §4.4, which keeps provider keys
//! out of every engine.
//!
//! - `whip broker --bind 127.0.0.1:PORT [--data DIR]` serves `POST /v1/egress` and
//!   `GET /healthz` (loopback by default).
//! - `whip broker secret set NAME [--provider ID] [--origin URL]… [--data DIR]` stores a
//!   key read from stdin; `whip broker token issue --worker W [--data DIR]` prints a
//!   worker's token.
//!
//! Only this process reads `secrets.json` (mode 0600 in the data directory). A request is
//! answered only for a token the broker issued (it keeps each token's BLAKE3 hash), and only
//! when its credential reference is `secret:NAME` of a stored secret whose provider (when
//! the secret names one) equals the request's exactly ([`decide`], a pure function).
//!
//! A key goes only where its secret allows: the worker writes the model URL, so without
//! this a worker holding a token could send any key to a server of its own. A secret names
//! its origins (`--origin https://api.openai.com`, scheme, host and port); one stored
//! without any is pinned to the origin of its first relay (kept in the store, logged), and
//! every later request to another origin is refused 403 `origin` before anything is sent.
//!
//! The broker then takes out every auth header the worker left, refuses cookies and proxy
//! credentials, injects the key (`x-api-key` for an Anthropic-shaped request, else
//! `authorization: Bearer`) and relays the model's status and body, over TLS for an
//! `https://` model (the system's roots, or `SSL_CERT_FILE`). It never builds a prompt,
//! picks a model, parses a reply or keeps evidence, and never logs a key or a body.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use whip_engine::http1::{self, HttpUrl};
use whip_engine::runtime::egress::{BROKER_EGRESS_PATH, BROKER_HEALTH_PATH, EGRESS_PROTOCOL};

use crate::Global;
use crate::limits::{BROKER_BODY_BYTES_MAX, BROKER_RELAY_TIMEOUT_MS};
use crate::output;

/// `whip broker …`.
#[derive(clap::Args, Debug)]
pub(crate) struct BrokerArgs {
    #[command(subcommand)]
    command: Option<BrokerCommand>,
    /// Address to serve on (serving only).
    #[arg(long, default_value = "127.0.0.1:7700")]
    bind: SocketAddr,
    /// The broker's directory (secrets and token hashes).
    #[arg(long, global = true, default_value = ".whipplescript/broker")]
    data: PathBuf,
}

#[derive(clap::Subcommand, Debug)]
enum BrokerCommand {
    /// Provider keys: `secret set NAME` (the value on stdin).
    #[command(subcommand)]
    Secret(SecretCommand),
    /// Worker tokens: `token issue --worker W`.
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(clap::Subcommand, Debug)]
enum SecretCommand {
    /// Store the key read from stdin as secret NAME (replacing one of that name).
    Set {
        name: String,
        /// The provider binding (its `provider_id`) the key may be used for; any when absent.
        #[arg(long)]
        provider: Option<String>,
        /// Where the key may be sent (`https://api.openai.com`; repeatable). Without one,
        /// the first relay's origin is pinned.
        #[arg(long = "origin")]
        origins: Vec<String>,
    },
}

#[derive(clap::Subcommand, Debug)]
enum TokenCommand {
    /// Issue a token for worker W and print it (only its hash is kept).
    Issue {
        #[arg(long)]
        worker: String,
    },
}

/// One stored key.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Secret {
    value: String,
    #[serde(default)]
    provider: Option<String>,
    /// The origins (`scheme://host:port`) the key may be sent to; empty until the first
    /// relay pins one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    origins: Vec<String>,
}

/// What a worker posts.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Envelope {
    protocol: String,
    credential_ref: Option<String>,
    provider: String,
    request: Relayed,
}

/// The model request inside an envelope.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Relayed {
    url: String,
    headers: Vec<[String; 2]>,
    body: String,
}

/// Why the broker refuses a request: the HTTP status and a reason without secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    status: u16,
    error: &'static str,
    detail: String,
}

/// What the broker sends on: the URL, the headers with the key in them, the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Forward {
    url: HttpUrl,
    headers: Vec<(String, String)>,
    body: String,
    /// `(secret, origin)`: a secret without origins, to be pinned to this one first.
    pin: Option<(String, String)>,
}

fn refuse(status: u16, error: &'static str, detail: impl Into<String>) -> Refusal {
    Refusal {
        status,
        error,
        detail: detail.into(),
    }
}

/// Decide one request: who sent it (`worker`, from its token), and what to send on.
pub(crate) fn decide(
    worker: Option<&str>,
    envelope: &Envelope,
    secrets: &BTreeMap<String, Secret>,
) -> Result<Forward, Refusal> {
    if worker.is_none() {
        return Err(refuse(
            401,
            "unauthenticated",
            "no token this broker issued",
        ));
    }
    if envelope.protocol != EGRESS_PROTOCOL {
        return Err(refuse(
            400,
            "protocol",
            format!("the protocol is {EGRESS_PROTOCOL}"),
        ));
    }
    let reference = envelope.credential_ref.as_deref().unwrap_or_default();
    let Some(name) = reference.strip_prefix("secret:") else {
        return Err(refuse(
            403,
            "credential_ref",
            "the credential reference is not `secret:NAME`",
        ));
    };
    let secret = secrets.get(name).ok_or_else(|| {
        refuse(
            403,
            "credential_ref",
            "the credential reference names no stored secret",
        )
    })?;
    if secret
        .provider
        .as_ref()
        .is_some_and(|p| *p != envelope.provider)
    {
        return Err(refuse(
            403,
            "provider",
            "the secret is bound to another provider",
        ));
    }
    let url = HttpUrl::parse(&envelope.request.url)
        .map_err(|e| refuse(400, "url", format!("the model URL: {e}")))?;
    let origin = url.origin();
    let pin = match secret.origins.as_slice() {
        [] => Some((name.to_string(), origin)),
        allowed if allowed.contains(&origin) => None,
        allowed => {
            let detail = format!(
                "secret `{name}` may be sent only to {}, not {origin}",
                allowed.join(", ")
            );
            return Err(refuse(403, "origin", detail));
        }
    };
    Ok(Forward {
        url,
        headers: with_key(&envelope.request.headers, &secret.value)?,
        body: envelope.request.body.clone(),
        pin,
    })
}

/// `scheme://host:port` of `--origin` `text` (a path is refused: an origin is no URL).
fn origin_of(text: &str) -> Result<String> {
    let url = HttpUrl::parse(text).map_err(|e| anyhow::anyhow!("--origin {text}: {e}"))?;
    if url.path != "/" {
        bail!("--origin {text}: an origin has no path (https://host[:port])");
    }
    Ok(url.origin())
}

/// The request's headers without any auth header the worker left, the key injected:
/// `x-api-key` for an Anthropic-shaped request, else `authorization: Bearer`. Cookies and
/// proxy credentials are refused.
fn with_key(headers: &[[String; 2]], key: &str) -> Result<Vec<(String, String)>, Refusal> {
    let mut kept = Vec::new();
    let mut anthropic = false;
    for [name, value] in headers {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "cookie" | "proxy-authorization" => {
                return Err(refuse(
                    400,
                    "header",
                    format!("header `{lower}` is refused"),
                ));
            }
            "authorization" | "x-api-key" | "chatgpt-account-id" | "host" | "content-length" => {}
            _ => {
                anthropic |= lower == "anthropic-version";
                kept.push((lower, value.clone()));
            }
        }
    }
    kept.push(match anthropic {
        true => ("x-api-key".to_string(), key.to_string()),
        false => ("authorization".to_string(), format!("Bearer {key}")),
    });
    Ok(kept)
}

/// Run `whip broker …`.
pub(crate) async fn run(global: &Global, args: BrokerArgs) -> Result<ExitCode> {
    let store = Store::open(&args.data)?;
    match args.command {
        Some(BrokerCommand::Secret(SecretCommand::Set {
            name,
            provider,
            origins,
        })) => {
            let origins = (origins.iter().map(|o| origin_of(o))).collect::<Result<Vec<_>>>()?;
            let mut value = String::new();
            std::io::stdin()
                .read_to_string(&mut value)
                .context("read the key from stdin")?;
            let value = value.trim_end_matches(['\r', '\n']).to_string();
            if value.is_empty() || name.is_empty() {
                bail!("a secret needs a name and a value on stdin");
            }
            let text = match origins.is_empty() {
                true => format!("secret {name} stored; its first relay pins where it may go"),
                false => format!("secret {name} stored for {}", origins.join(", ")),
            };
            let shown = json!({"secret": name, "stored": true, "origins": origins});
            let secret = Secret {
                value,
                provider,
                origins,
            };
            store.set_secret(&name, secret)?;
            print(global, shown, text);
            Ok(ExitCode::SUCCESS)
        }
        Some(BrokerCommand::Token(TokenCommand::Issue { worker })) => {
            let token = store.issue_token(&worker)?;
            print(global, json!({"worker": worker, "token": token}), token);
            Ok(ExitCode::SUCCESS)
        }
        None => serve(global, store, args.bind).await,
    }
}

fn print(global: &Global, value: Value, text: String) {
    match global.json {
        true => output::json(&value),
        false => output::line(&text),
    }
}

/// One writer of the store's files at a time within this process (a pin races a pin).
static STORE_WRITES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The broker's directory: `secrets.json` and `tokens.json`, each mode 0600.
#[derive(Clone, Debug)]
pub(crate) struct Store {
    dir: PathBuf,
}

impl Store {
    fn open(dir: &Path) -> Result<Store> {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        set_mode(dir, 0o700)?;
        Ok(Store {
            dir: dir.to_path_buf(),
        })
    }

    fn read<T: serde::de::DeserializeOwned + Default>(&self, file: &str) -> Result<T> {
        let path = self.dir.join(file);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is malformed", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
            Err(e) => Err(e).with_context(|| format!("read {}", path.display())),
        }
    }

    fn write<T: Serialize>(&self, file: &str, value: &T) -> Result<()> {
        let path = self.dir.join(file);
        let tmp = self.dir.join(format!("{file}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec_pretty(value)?)?;
        set_mode(&tmp, 0o600)?;
        std::fs::rename(&tmp, &path).with_context(|| format!("write {}", path.display()))
    }

    fn secrets(&self) -> Result<BTreeMap<String, Secret>> {
        self.read("secrets.json")
    }

    fn set_secret(&self, name: &str, secret: Secret) -> Result<()> {
        let _one = STORE_WRITES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut secrets = self.secrets()?;
        secrets.insert(name.to_string(), secret);
        self.write("secrets.json", &secrets)
    }

    /// Pin secret `name` to `origin` if it has no origin yet. False when another request
    /// pinned it elsewhere first (or the secret is gone).
    fn pin_origin(&self, name: &str, origin: &str) -> Result<bool> {
        let _one = STORE_WRITES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut secrets = self.secrets()?;
        let Some(secret) = secrets.get_mut(name) else {
            return Ok(false);
        };
        if !secret.origins.is_empty() {
            return Ok(secret.origins.iter().any(|o| o == origin));
        }
        secret.origins.push(origin.to_string());
        self.write("secrets.json", &secrets)?;
        tracing::warn!(secret = %name, %origin, "secret pinned to its first relay's origin");
        Ok(true)
    }

    fn issue_token(&self, worker: &str) -> Result<String> {
        let mut raw = [0u8; 32];
        rand::Rng::fill(&mut rand::rng(), &mut raw[..]);
        let token = format!("wbt_{}", blake3::Hash::from(raw).to_hex());
        let _one = STORE_WRITES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut tokens: BTreeMap<String, String> = self.read("tokens.json")?;
        tokens.insert(token_hash(&token), worker.to_string());
        self.write("tokens.json", &tokens)?;
        Ok(token)
    }

    /// The worker `token` was issued to, if any.
    fn worker_of(&self, token: &str) -> Result<Option<String>> {
        let tokens: BTreeMap<String, String> = self.read("tokens.json")?;
        Ok(tokens.get(&token_hash(token)).cloned())
    }
}

fn token_hash(token: &str) -> String {
    blake3::hash(token.as_bytes()).to_hex().to_string()
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))
}

async fn serve(global: &Global, store: Store, bind: SocketAddr) -> Result<ExitCode> {
    use axum::routing::{get, post};
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("cannot listen on {bind}"))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the model broker serves beyond loopback");
    }
    let router = axum::Router::new()
        .route(BROKER_HEALTH_PATH, get(|| async { "ok" }))
        .route(BROKER_EGRESS_PATH, post(egress))
        .layer(axum::extract::DefaultBodyLimit::max(BROKER_BODY_BYTES_MAX))
        .with_state(store);
    print(
        global,
        json!({"listening": addr.to_string(), "protocol": EGRESS_PROTOCOL}),
        format!("model broker listening on {addr} ({EGRESS_PROTOCOL})"),
    );
    axum::serve(listener, router)
        .with_graceful_shutdown(crate::signals::stopped())
        .await?;
    Ok(ExitCode::SUCCESS)
}

type Reply = (
    axum::http::StatusCode,
    [(axum::http::HeaderName, &'static str); 1],
    String,
);

fn reply(status: u16, body: Value) -> Reply {
    let status = axum::http::StatusCode::from_u16(status)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    let json = [(axum::http::header::CONTENT_TYPE, "application/json")];
    (status, json, body.to_string())
}

async fn egress(
    axum::extract::State(store): axum::extract::State<Store>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Reply {
    let token = (headers.get("authorization").and_then(|v| v.to_str().ok()))
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let (worker, secrets) = match (store.worker_of(token), store.secrets()) {
        (Ok(worker), Ok(secrets)) => (worker, secrets),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "the broker's store cannot be read");
            return reply(500, json!({"error": "store"}));
        }
    };
    let envelope = match serde_json::from_slice::<Envelope>(&body) {
        Ok(envelope) if worker.is_some() => envelope,
        Ok(_) => return reply(401, json!({"error": "unauthenticated"})),
        Err(e) => return reply(400, json!({"error": "envelope", "detail": e.to_string()})),
    };
    let forward = match decide(worker.as_deref(), &envelope, &secrets) {
        Ok(forward) => forward,
        Err(r) => {
            let provider = &envelope.provider;
            tracing::info!(worker = ?worker, %provider, error = r.error, "refused");
            return reply(r.status, json!({"error": r.error, "detail": r.detail}));
        }
    };
    if let Some((name, origin)) = &forward.pin {
        match store.pin_origin(name, origin) {
            Ok(true) => {}
            Ok(false) => {
                let detail = format!("secret `{name}` is pinned to another origin than {origin}");
                return reply(403, json!({"error": "origin", "detail": detail}));
            }
            Err(e) => {
                tracing::error!(error = %e, "the broker's store cannot be written");
                return reply(500, json!({"error": "store"}));
            }
        }
    }
    let key = (headers.get("idempotency-key").and_then(|v| v.to_str().ok()))
        .map(|k| ("idempotency-key".to_string(), k.to_string()));
    relay(forward, key, worker.unwrap_or_default(), &envelope.provider).await
}

async fn relay(
    mut forward: Forward,
    key: Option<(String, String)>,
    worker: String,
    provider: &str,
) -> Reply {
    if let Some(key) = key.filter(|_| !forward.headers.iter().any(|(n, _)| n == "idempotency-key"))
    {
        forward.headers.push(key);
    }
    let wait = Duration::from_millis(BROKER_RELAY_TIMEOUT_MS);
    let limits = (BROKER_BODY_BYTES_MAX, wait);
    let body = forward.body.into_bytes();
    let answer = http1::call(
        http1::Method::POST,
        &forward.url,
        &forward.headers,
        body,
        limits,
    )
    .await;
    match answer {
        Ok(a) => {
            tracing::info!(%worker, %provider, status = a.status, "relayed");
            let body = String::from_utf8_lossy(&a.body).into_owned();
            reply(
                200,
                json!({"protocol": EGRESS_PROTOCOL, "status": a.status, "body": body}),
            )
        }
        Err(e) => {
            tracing::warn!(%worker, %provider, error = %e, "the model did not answer");
            reply(502, json!({"error": "upstream", "detail": e.to_string()}))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(reference: &str, provider: &str, headers: &[(&str, &str)]) -> Envelope {
        Envelope {
            protocol: EGRESS_PROTOCOL.into(),
            credential_ref: Some(reference.into()),
            provider: provider.into(),
            request: Relayed {
                url: "http://127.0.0.1:9/v1/chat/completions".into(),
                headers: headers
                    .iter()
                    .map(|(n, v)| [n.to_string(), v.to_string()])
                    .collect(),
                body: "{}".into(),
            },
        }
    }

    fn secrets() -> BTreeMap<String, Secret> {
        let bound = Secret {
            value: "sk-1".into(),
            provider: Some("gpt".into()),
            origins: Vec::new(),
        };
        let placed = Secret {
            value: "sk-2".into(),
            provider: None,
            origins: vec!["https://api.example.com:443".into()],
        };
        BTreeMap::from([
            ("openai".to_string(), bound),
            ("placed".to_string(), placed),
        ])
    }

    #[test]
    fn a_key_goes_only_to_its_origin_and_a_bare_one_is_pinned_first() {
        let mut e = envelope("secret:placed", "any", &[]);
        e.request.url = "https://API.example.com/v1/responses".into();
        let forward = decide(Some("w1"), &e, &secrets()).unwrap();
        assert_eq!((forward.pin, forward.url.tls), (None, true));
        e.request.url = "http://127.0.0.1:9/steal".into();
        let refused = decide(Some("w1"), &e, &secrets()).unwrap_err();
        assert_eq!((refused.status, refused.error), (403, "origin"));
        assert!(!refused.detail.contains("sk-2"), "{}", refused.detail);
        let bare = envelope("secret:openai", "gpt", &[]);
        let forward = decide(Some("w1"), &bare, &secrets()).unwrap();
        let pin = ("openai".to_string(), "http://127.0.0.1:9".to_string());
        assert_eq!(forward.pin, Some(pin));
        let mut creds = envelope("secret:openai", "gpt", &[]);
        creds.request.url = "https://user:pw@api.example.com/".into();
        assert_eq!(
            decide(Some("w1"), &creds, &secrets()).unwrap_err().error,
            "url"
        );
        assert_eq!(
            origin_of("https://api.openai.com").unwrap(),
            "https://api.openai.com:443"
        );
        assert!(origin_of("https://api.openai.com/v1").is_err());
    }

    #[test]
    fn only_an_issued_token_with_the_exact_reference_and_provider_is_relayed() {
        let ok = envelope("secret:openai", "gpt", &[("authorization", "Bearer x")]);
        assert_eq!(decide(None, &ok, &secrets()).unwrap_err().status, 401);
        let forward = decide(Some("w1"), &ok, &secrets()).unwrap();
        let auth: Vec<_> = forward
            .headers
            .iter()
            .filter(|(n, _)| n == "authorization")
            .collect();
        assert_eq!(
            auth,
            [&("authorization".to_string(), "Bearer sk-1".to_string())]
        );
        let other = envelope("secret:openai", "gpt-2", &[]);
        assert_eq!(
            decide(Some("w1"), &other, &secrets()).unwrap_err().error,
            "provider"
        );
        let missing = envelope("secret:anthropic", "gpt", &[]);
        assert_eq!(
            decide(Some("w1"), &missing, &secrets()).unwrap_err().status,
            403
        );
        let env_ref = envelope("env:OPENAI_API_KEY", "gpt", &[]);
        assert_eq!(
            decide(Some("w1"), &env_ref, &secrets()).unwrap_err().error,
            "credential_ref"
        );
        let cookie = envelope("secret:openai", "gpt", &[("Cookie", "a=b")]);
        assert_eq!(
            decide(Some("w1"), &cookie, &secrets()).unwrap_err().status,
            400
        );
    }

    #[test]
    fn an_anthropic_request_gets_its_key_in_x_api_key() {
        let e = envelope(
            "secret:openai",
            "gpt",
            &[("anthropic-version", "2023-06-01")],
        );
        let forward = decide(Some("w1"), &e, &secrets()).unwrap();
        assert!(
            forward
                .headers
                .contains(&("x-api-key".into(), "sk-1".into()))
        );
        assert!(!forward.headers.iter().any(|(n, _)| n == "authorization"));
    }
}
