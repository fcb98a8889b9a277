//! The engine's client of `whip-executor/1`.
//!
//! One connection per call (an exec lasts from milliseconds to an hour; nothing is gained by
//! pooling on loopback). Every call carries the bearer token; every answer is read with a
//! bound and decoded into the protocol's types, so a malformed answer is an error, never a
//! default. Errors say whether the request may have reached the executor:
//! [`ExecutorError::Unreachable`] means it certainly did not (the connection failed), so a
//! caller may try again; [`ExecutorError::Interrupted`] means it may have, so an exec is not
//! repeated but asked about (`run_record`).

use std::time::Duration;

use hyper::Method;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::protocol::{
    CutRequest, ErrorBody, ExecAnswer, ExecRequest, Health, PROTOCOL, RefusalCode, RunRecord,
    WorkspaceDigest, check_id,
};
use crate::limits::{
    EXEC_ANSWER_MARGIN_MS, EXECUTOR_ANSWER_BYTES_MAX, EXECUTOR_CALL_TIMEOUT_MS,
    EXECUTOR_CONNECT_TIMEOUT_MS,
};

/// Where the executor is and the token it accepts: read once by the binary
/// (`WHIP_EXECUTOR_URL`, `WHIP_EXECUTOR_TOKEN`) and handed to the engine.
#[derive(Clone, PartialEq, Eq)]
pub struct ExecutorConfig {
    /// `http://HOST:PORT` (or `HOST:PORT`).
    pub url: String,
    /// The bearer token (never printed: `Debug` leaves it out).
    pub token: String,
}

impl std::fmt::Debug for ExecutorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorConfig")
            .field("url", &self.url)
            .field(
                "token",
                &if self.token.is_empty() {
                    ""
                } else {
                    "<redacted>"
                },
            )
            .finish()
    }
}

/// Why a call to the executor did not give an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecutorError {
    /// No executor is configured, or its URL is not `http://HOST:PORT` (the detail says).
    Unconfigured(String),
    /// An executor URL but no token: no request is sent without one.
    MissingToken,
    /// The executor could not be reached: nothing was sent.
    Unreachable(String),
    /// The connection failed or timed out after the request was sent: it may have arrived.
    Interrupted(String),
    /// The executor refused the token (HTTP 401).
    Unauthorized,
    /// The executor refused the request with a code of the protocol.
    Refused {
        /// Its stable code.
        code: RefusalCode,
        /// Its words, if any.
        detail: Option<String>,
    },
    /// The answer is not the protocol's (a wrong status, body or shape).
    Malformed(String),
}

impl std::fmt::Display for ExecutorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecutorError::Unconfigured(d) => write!(f, "{d}"),
            ExecutorError::MissingToken => write!(f, "executor token not configured"),
            ExecutorError::Unreachable(d) => write!(f, "executor unreachable: {d}"),
            ExecutorError::Interrupted(d) => write!(f, "executor call interrupted: {d}"),
            ExecutorError::Unauthorized => write!(f, "executor refused the token"),
            ExecutorError::Refused { code, detail } => match detail {
                Some(d) => write!(f, "executor refused ({}): {d}", code.code()),
                None => write!(f, "executor refused ({})", code.code()),
            },
            ExecutorError::Malformed(d) => write!(f, "malformed executor answer: {d}"),
        }
    }
}

impl std::error::Error for ExecutorError {}

/// The executor's address, checked once.
#[derive(Clone)]
struct Target {
    /// `host:port`
    authority: String,
    token: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("authority", &self.authority)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// A client of one executor (or of none: every call answers `Unconfigured`).
#[derive(Clone, Debug)]
pub struct ExecutorClient {
    target: Result<Target, ExecutorError>,
}

/// `host:port` of `http://host:port[/]` or `host:port`.
fn authority(url: &str) -> Result<String, String> {
    let bad = || format!("executor URL `{}` is not http://HOST:PORT", redacted(url));
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty()
        || rest.contains(['/', '?', '#', '@', ' '])
        || url.contains("://") && !url.starts_with("http://")
    {
        return Err(bad());
    }
    let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(rest.to_string())
}

/// `url` as an operator may see it: a user and password before an `@` (which this client
/// refuses anyway) are replaced by `***`, so a refusal's detail never shows a credential.
fn redacted(url: &str) -> String {
    let Some((before, after)) = url.rsplit_once('@') else {
        return url.to_string();
    };
    let scheme = before.find("://").map_or("", |at| &before[..at + 3]);
    format!("{scheme}***@{after}")
}

impl ExecutorClient {
    /// A client of the executor `config` names (`None`: not configured).
    pub fn new(config: Option<ExecutorConfig>) -> ExecutorClient {
        let target = match config {
            None => Err(ExecutorError::Unconfigured(
                "executor not configured".into(),
            )),
            Some(c) => match authority(&c.url) {
                Err(detail) => Err(ExecutorError::Unconfigured(detail)),
                Ok(_) if c.token.is_empty() => Err(ExecutorError::MissingToken),
                Ok(authority) => Ok(Target {
                    authority,
                    token: c.token,
                }),
            },
        };
        ExecutorClient { target }
    }

    /// Whether an executor is configured (a URL and a token).
    pub fn is_configured(&self) -> bool {
        self.target.is_ok()
    }

    /// `GET /v1/health`: reachable, speaking `whip-executor/1`, and accepting our token.
    pub async fn health(&self) -> Result<Health, ExecutorError> {
        let health: Health = self
            .call(Method::GET, "/v1/health", None::<&()>, None)
            .await?;
        if health.protocol != PROTOCOL {
            return Err(ExecutorError::Malformed(format!(
                "the executor speaks {}, not {PROTOCOL}",
                health.protocol
            )));
        }
        Ok(health)
    }

    /// `POST /v1/exec`: run `request` (or get the answer of its run if it ran already). The
    /// call waits for the run's timeout and [`EXEC_ANSWER_MARGIN_MS`] more.
    pub async fn exec(&self, request: &ExecRequest) -> Result<ExecAnswer, ExecutorError> {
        let wait = Duration::from_millis(request.timeout_ms() + EXEC_ANSWER_MARGIN_MS);
        self.call(Method::POST, "/v1/exec", Some(request), Some(wait))
            .await
    }

    /// `GET /v1/runs/<instance>/<run>`: what became of a run (`None`: the executor never
    /// started it).
    pub async fn run_record(
        &self,
        instance: &str,
        run: &str,
    ) -> Result<Option<RunRecord>, ExecutorError> {
        // The ids go into the path: a name the executor would refuse is refused here.
        for (field, id) in [("instance", instance), ("run", run)] {
            check_id(field, id).map_err(|r| ExecutorError::Refused {
                code: r.kind(),
                detail: r.body().detail,
            })?;
        }
        let path = format!("/v1/runs/{instance}/{run}");
        match self.call(Method::GET, &path, None::<&()>, None).await {
            Ok(record) => Ok(Some(record)),
            Err(ExecutorError::Refused {
                code: RefusalCode::UnknownRun,
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /v1/checkpoint`: copy the instance's workspace as cut `cut`.
    pub async fn checkpoint(
        &self,
        instance: &str,
        cut: &str,
    ) -> Result<WorkspaceDigest, ExecutorError> {
        self.cut("/v1/checkpoint", instance, cut).await
    }

    /// `POST /v1/restore`: replace the instance's workspace with cut `cut`
    /// (`Refused { code: UnknownCut, .. }` when there is no such cut).
    pub async fn restore(
        &self,
        instance: &str,
        cut: &str,
    ) -> Result<WorkspaceDigest, ExecutorError> {
        self.cut("/v1/restore", instance, cut).await
    }

    async fn cut(
        &self,
        path: &str,
        instance: &str,
        cut: &str,
    ) -> Result<WorkspaceDigest, ExecutorError> {
        let body = CutRequest {
            instance: instance.into(),
            cut: cut.into(),
        };
        self.call(Method::POST, path, Some(&body), None).await
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        wait: Option<Duration>,
    ) -> Result<T, ExecutorError> {
        let target = self.target.as_ref().map_err(Clone::clone)?;
        let bytes = body.map_or_else(Vec::new, |b| {
            serde_json::to_vec(b).expect("requests encode")
        });
        let url = crate::http1::HttpUrl {
            authority: target.authority.clone(),
            path: path.to_string(),
            tls: false,
        };
        let headers = [
            (
                AUTHORIZATION.to_string(),
                format!("Bearer {}", target.token),
            ),
            (CONTENT_TYPE.to_string(), "application/json".to_string()),
        ];
        let sender = connect(&url).await?;
        let wait = wait.unwrap_or(Duration::from_millis(EXECUTOR_CALL_TIMEOUT_MS));
        let limits = (EXECUTOR_ANSWER_BYTES_MAX, wait);
        let answer = crate::http1::send(sender, method, &url, &headers, bytes, limits).await;
        let (status, body) = match answer {
            Ok(a) => (a.status, a.body),
            Err(crate::http1::CallError::Unreachable(e)) => {
                return Err(ExecutorError::Malformed(e));
            }
            Err(crate::http1::CallError::Interrupted(e)) => {
                return Err(ExecutorError::Interrupted(e));
            }
        };
        decode(status, &body)
    }
}

type Sender = crate::http1::Sender;

/// Connect and hand the connection to a task; a failure here means nothing was sent.
async fn connect(url: &crate::http1::HttpUrl) -> Result<Sender, ExecutorError> {
    let wait = Duration::from_millis(EXECUTOR_CONNECT_TIMEOUT_MS);
    crate::http1::connect(url, wait)
        .await
        .map_err(|e| ExecutorError::Unreachable(e.to_string()))
}

/// A 200 answer as `T`; any other status as the protocol's refusal.
fn decode<T: DeserializeOwned>(status: u16, body: &[u8]) -> Result<T, ExecutorError> {
    if status == 200 {
        return serde_json::from_slice(body)
            .map_err(|e| ExecutorError::Malformed(format!("status 200 with {e}")));
    }
    if status == 401 {
        return Err(ExecutorError::Unauthorized);
    }
    let refusal: ErrorBody = serde_json::from_slice(body)
        .map_err(|e| ExecutorError::Malformed(format!("status {status} with {e}")))?;
    match RefusalCode::parse(&refusal.error) {
        Some(code) if code.status() == status => Err(ExecutorError::Refused {
            code,
            detail: refusal.detail,
        }),
        _ => Err(ExecutorError::Malformed(format!(
            "status {status} with code `{}`",
            refusal.error
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_http_host_port_and_tokens_stay_out_of_debug() {
        assert_eq!(
            authority("http://127.0.0.1:8080").unwrap(),
            "127.0.0.1:8080"
        );
        assert_eq!(authority("http://localhost:9/").unwrap(), "localhost:9");
        assert_eq!(authority("127.0.0.1:1").unwrap(), "127.0.0.1:1");
        for bad in [
            "https://x:1",
            "http://x",
            "http://x:99999",
            "http://x:1/p",
            "",
            "ftp://a:1",
        ] {
            assert!(authority(bad).is_err(), "{bad}");
        }
        for with_password in ["http://bot:s3cret@127.0.0.1:1", "bot:s3cret@h:1@x"] {
            let detail = authority(with_password).unwrap_err();
            assert!(!detail.contains("s3cret"), "{detail}");
            assert!(detail.contains("***@"), "{detail}");
        }
        let config = ExecutorConfig {
            url: "http://127.0.0.1:1".into(),
            token: "s3cret".into(),
        };
        assert!(!format!("{config:?}").contains("s3cret"));
        let client = ExecutorClient::new(Some(config));
        assert!(!format!("{client:?}").contains("s3cret"), "{client:?}");
        let none = ExecutorClient::new(None);
        assert!(!none.is_configured());
        let no_token = ExecutorClient::new(Some(ExecutorConfig {
            url: "http://127.0.0.1:1".into(),
            token: String::new(),
        }));
        assert_eq!(no_token.target.unwrap_err(), ExecutorError::MissingToken);
    }

    #[test]
    fn answers_decode_into_types_or_errors() {
        let refused = decode::<Health>(400, br#"{"error":"bad_cwd"}"#);
        assert_eq!(
            refused,
            Err(ExecutorError::Refused {
                code: RefusalCode::BadCwd,
                detail: None
            })
        );
        assert_eq!(
            decode::<Health>(401, b"{}"),
            Err(ExecutorError::Unauthorized)
        );
        assert!(matches!(
            decode::<Health>(400, b"<html>"),
            Err(ExecutorError::Malformed(_))
        ));
        assert!(matches!(
            decode::<Health>(409, br#"{"error":"bad_cwd"}"#),
            Err(ExecutorError::Malformed(_))
        ));
        assert!(matches!(
            decode::<Health>(200, b"{}"),
            Err(ExecutorError::Malformed(_))
        ));
    }
}
