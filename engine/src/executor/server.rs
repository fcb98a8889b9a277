//! The `whip executor` sidecar: an HTTP/1.1 server speaking `whip-executor/1`.
//!
//! Every request is judged in this order, before its body is read: the peer must be on the
//! loopback interface (else 403 `not_loopback`, whatever address the server is bound to),
//! then it must carry `Authorization: Bearer <token>` with the executor's token (else 401
//! `unauthorized`). The token is compared as blake3 digests of both sides with
//! [`subtle::ConstantTimeEq`]: 32 bytes against 32 bytes, so neither its length nor a
//! matching prefix changes the time taken.
//!
//! A run is executed at most once per (instance, run): its `.started` marker is durable
//! before the process starts and its answer durable before the reply, and the process runs
//! on a blocking task detached from the connection, so a client that goes away does not
//! stop it and can read its answer later (`GET /v1/runs/…`).

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use whip_cell::budget::Budget;

use super::process::{self, Launch};
use super::protocol::{
    CutRequest, ExecAnswer, ExecRequest, Health, PROTOCOL, Refusal, RunRecord, WorkspaceDigest,
    check_exec, check_id,
};
use super::workspace::{self, storage};
use crate::limits::{
    EXEC_RUNS_CONCURRENT_MAX, EXECUTOR_BODY_BYTES_MAX, EXECUTOR_HEADER_READ_TIMEOUT_MS,
};

/// The executor: its root directory, its token's digest, and what is in flight.
#[derive(Clone)]
pub struct ExecutorServer {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    token: [u8; 32],
    live: Mutex<Live>,
}

/// Runs in flight, and instances whose workspace is being checkpointed or restored.
#[derive(Default)]
struct Live {
    runs: BTreeSet<(String, String)>,
    copying: BTreeSet<String>,
}

/// Takes its entry out of [`Live`] when dropped (also when a run's task panics).
struct Slot {
    inner: Arc<Inner>,
    run: Option<(String, String)>,
    copying: Option<String>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut live = self.inner.live.lock().expect("live lock");
        if let Some(run) = &self.run {
            live.runs.remove(run);
        }
        if let Some(instance) = &self.copying {
            live.copying.remove(instance);
        }
    }
}

/// Whether `peer` is on the loopback interface (an IPv4-mapped IPv6 address counts as its
/// IPv4 form).
pub fn is_loopback(peer: &SocketAddr) -> bool {
    peer.ip().to_canonical().is_loopback()
}

type Answer = Result<Vec<u8>, Refusal>;

fn encode<T: Serialize>(value: &T) -> Answer {
    Ok(serde_json::to_vec(value).expect("protocol types encode"))
}

fn respond(status: u16, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let json = HeaderValue::from_static("application/json");
    response.headers_mut().insert(CONTENT_TYPE, json);
    response
}

async fn body<T: DeserializeOwned>(req: Request<Incoming>) -> Result<T, Refusal> {
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > EXECUTOR_BODY_BYTES_MAX as u64) {
        return Err(Refusal::BodyTooLarge);
    }
    let collected = Limited::new(req.into_body(), EXECUTOR_BODY_BYTES_MAX)
        .collect()
        .await
        .map_err(|e| match e.downcast_ref::<LengthLimitError>() {
            Some(_) => Refusal::BodyTooLarge,
            None => Refusal::BadJson(format!("cannot read the body: {e}")),
        })?;
    serde_json::from_slice(&collected.to_bytes()).map_err(|e| Refusal::BadJson(e.to_string()))
}

impl ExecutorServer {
    /// An executor over `root` (created; leftovers of interrupted writes removed) that
    /// accepts `token`. An empty token is refused: the executor never runs unauthenticated.
    pub fn open(root: &Path, token: &str) -> Result<ExecutorServer, String> {
        if token.is_empty() {
            return Err("the executor token is empty".into());
        }
        workspace::open_root(root)
            .map_err(|e| format!("cannot open executor root {}: {e}", root.display()))?;
        let root = std::fs::canonicalize(root)
            .map_err(|e| format!("cannot open executor root {}: {e}", root.display()))?;
        Ok(ExecutorServer {
            inner: Arc::new(Inner {
                root,
                token: *blake3::hash(token.as_bytes()).as_bytes(),
                live: Mutex::new(Live::default()),
            }),
        })
    }

    /// The root directory (canonical).
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Serve connections from `listener` until `shutdown` completes. Each connection takes
    /// a slot of the process's connection budget (`whip_cell::budget`, with a share per
    /// address; past it a new one is closed at once); a request head must arrive within
    /// [`EXECUTOR_HEADER_READ_TIMEOUT_MS`], also between the requests of a kept-alive
    /// connection, so an idle connection is closed after that long.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<()> {
        let budget = Budget::process();
        tokio::pin!(shutdown);
        loop {
            let (stream, peer, slot) = tokio::select! {
                accepted = budget.accept(&listener, "executor") => accepted,
                () = &mut shutdown => return Ok(()),
            };
            let inner = Arc::clone(&self.inner);
            tokio::spawn(async move {
                let _slot = slot;
                let service = hyper::service::service_fn(move |req| {
                    let inner = Arc::clone(&inner);
                    async move { Ok::<_, Infallible>(inner.handle(peer, req).await) }
                });
                let served = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_millis(EXECUTOR_HEADER_READ_TIMEOUT_MS))
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "executor connection ended");
                }
            });
        }
    }
}

impl Inner {
    async fn handle(
        self: Arc<Self>,
        peer: SocketAddr,
        req: Request<Incoming>,
    ) -> Response<Full<Bytes>> {
        let (method, path) = (req.method().clone(), req.uri().path().to_string());
        let answer = self.route(peer, req).await;
        match answer {
            Ok(body) => {
                tracing::debug!(%peer, %method, path, "executor answered");
                respond(200, body)
            }
            Err(refusal) => {
                tracing::info!(%peer, %method, path, code = refusal.code(), "executor refused");
                let body = serde_json::to_vec(&refusal.body()).expect("error body encodes");
                respond(refusal.status(), body)
            }
        }
    }

    /// The peer, then the token, then the route.
    async fn route(self: &Arc<Self>, peer: SocketAddr, req: Request<Incoming>) -> Answer {
        if !is_loopback(&peer) {
            return Err(Refusal::NotLoopback);
        }
        if !self.authorized(req.headers().get(AUTHORIZATION)) {
            return Err(Refusal::Unauthorized);
        }
        let path = req.uri().path().to_string();
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let method = req.method().clone();
        match (parts.as_slice(), method) {
            (["v1", "health"], Method::GET) => encode(&Health {
                protocol: PROTOCOL.into(),
            }),
            (["v1", "exec"], Method::POST) => encode(&self.exec(body(req).await?).await?),
            (["v1", "runs", instance, run], Method::GET) => encode(&self.record(instance, run)?),
            (["v1", "checkpoint"], Method::POST) => {
                encode(&self.copy(body(req).await?, false).await?)
            }
            (["v1", "restore"], Method::POST) => encode(&self.copy(body(req).await?, true).await?),
            (["v1", "health" | "exec" | "checkpoint" | "restore"] | ["v1", "runs", _, _], _) => {
                Err(Refusal::MethodNotAllowed)
            }
            _ => Err(Refusal::NotFound),
        }
    }

    /// `Bearer <token>` against the executor's token, in constant time (digests of both).
    fn authorized(&self, header: Option<&HeaderValue>) -> bool {
        let presented = header
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        let digest = blake3::hash(presented.as_bytes());
        let same: bool = digest.as_bytes().ct_eq(&self.token).into();
        same && !presented.is_empty()
    }

    fn marker(&self, instance: &str, run: &str) -> PathBuf {
        self.root
            .join(".runs")
            .join(instance)
            .join(format!("{run}.started"))
    }

    fn answer_path(&self, instance: &str, run: &str) -> PathBuf {
        self.root
            .join(".runs")
            .join(instance)
            .join(format!("{run}.json"))
    }

    /// The durable answer of a finished run.
    fn recorded(&self, instance: &str, run: &str) -> Result<Option<ExecAnswer>, Refusal> {
        match std::fs::read(self.answer_path(instance, run)) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Refusal::Storage(format!("the answer of run {run} is unreadable: {e}"))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(storage(e)),
        }
    }

    /// `GET /v1/runs/<instance>/<run>`.
    fn record(&self, instance: &str, run: &str) -> Result<RunRecord, Refusal> {
        check_id("instance", instance)?;
        check_id("run", run)?;
        let live = self.live.lock().expect("live lock");
        if let Some(answer) = self.recorded(instance, run)? {
            return Ok(RunRecord::Finished { answer });
        }
        if live.runs.contains(&(instance.to_string(), run.to_string())) {
            return Ok(RunRecord::Running);
        }
        if self.marker(instance, run).exists() {
            return Ok(RunRecord::Lost);
        }
        Err(Refusal::UnknownRun)
    }

    /// Admit a run: its recorded answer if it ran, a refusal if it is in flight, was lost
    /// or cannot start now, else a slot.
    fn admit(self: &Arc<Self>, r: &ExecRequest) -> Result<Result<Slot, ExecAnswer>, Refusal> {
        let mut live = self.live.lock().expect("live lock");
        if let Some(answer) = self.recorded(&r.instance, &r.run)? {
            return Ok(Err(answer));
        }
        let key = (r.instance.clone(), r.run.clone());
        if live.runs.contains(&key) {
            return Err(Refusal::Running);
        }
        if self.marker(&r.instance, &r.run).exists() {
            return Err(Refusal::Lost);
        }
        if live.copying.contains(&r.instance) {
            return Err(Refusal::InstanceBusy);
        }
        if live.runs.len() >= EXEC_RUNS_CONCURRENT_MAX {
            return Err(Refusal::Busy);
        }
        live.runs.insert(key.clone());
        Ok(Ok(Slot {
            inner: Arc::clone(self),
            run: Some(key),
            copying: None,
        }))
    }

    /// `POST /v1/exec`.
    async fn exec(self: &Arc<Self>, request: ExecRequest) -> Result<ExecAnswer, Refusal> {
        let cwd = check_exec(&request)?;
        let slot = match self.admit(&request)? {
            Ok(slot) => slot,
            Err(recorded) => return Ok(recorded),
        };
        let inner = Arc::clone(self);
        // Detached from the connection: the run ends and records its answer even if the
        // client goes away.
        let task = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            inner.run_and_record(request, &cwd)
        });
        task.await
            .map_err(|e| Refusal::Storage(format!("the run's task failed: {e}")))?
    }

    /// The run's directory: `cwd` inside the workspace, created one level at a time; a
    /// symbolic link or a file on the way is refused, so no run leaves its workspace.
    fn run_dir(&self, instance: &str, cwd: &Path) -> Result<(PathBuf, PathBuf), Refusal> {
        let workspace = self.root.join(instance);
        let mut dir = workspace.clone();
        for part in std::iter::once(None).chain(cwd.components().map(Some)) {
            if let Some(part) = part {
                dir.push(part);
            }
            match std::fs::symlink_metadata(&dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(Refusal::BadCwd),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    match std::fs::create_dir(&dir) {
                        Ok(()) => {}
                        // Another run of the instance made it between the look and the create
                        // (a fan-out of `exec` effects): the same folder, unless it is no folder.
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                            let made = std::fs::symlink_metadata(&dir).map_err(storage)?;
                            if !made.is_dir() {
                                return Err(Refusal::BadCwd);
                            }
                        }
                        Err(e) => return Err(storage(e)),
                    }
                }
                Err(e) => return Err(storage(e)),
            }
        }
        Ok((workspace, dir))
    }

    fn run_and_record(&self, r: ExecRequest, cwd: &Path) -> Result<ExecAnswer, Refusal> {
        let (home, dir) = self.run_dir(&r.instance, cwd)?;
        let started = serde_json::json!({
            "instance": r.instance, "effect": r.effect, "run": r.run,
            "program": r.argv[0], "started_ms": crate::runtime::now_ms(),
        });
        let marker = self.marker(&r.instance, &r.run);
        workspace::write_durable(&marker, started.to_string().as_bytes()).map_err(storage)?;
        tracing::info!(
            instance = r.instance,
            run = r.run,
            program = r.argv[0],
            "exec"
        );
        let timeout_ms = r.timeout_ms();
        let answer = process::run(Launch {
            argv: r.argv,
            dir,
            home,
            env: r.env,
            timeout_ms,
        });
        let bytes = serde_json::to_vec(&answer).expect("answers encode");
        workspace::write_durable(&self.answer_path(&r.instance, &r.run), &bytes)
            .map_err(storage)?;
        Ok(answer)
    }

    /// `POST /v1/checkpoint` (`restore` false) and `POST /v1/restore`: refused while a run
    /// of the instance is in flight, so a cut never catches a run half way.
    async fn copy(
        self: &Arc<Self>,
        r: CutRequest,
        restore: bool,
    ) -> Result<WorkspaceDigest, Refusal> {
        check_id("instance", &r.instance)?;
        check_id("cut", &r.cut)?;
        let slot = {
            let mut live = self.live.lock().expect("live lock");
            let running = live.runs.iter().any(|(i, _)| *i == r.instance);
            if running || !live.copying.insert(r.instance.clone()) {
                return Err(Refusal::InstanceBusy);
            }
            Slot {
                inner: Arc::clone(self),
                run: None,
                copying: Some(r.instance.clone()),
            }
        };
        let inner = Arc::clone(self);
        let task = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            if restore {
                workspace::restore(&inner.root, &r.instance, &r.cut)
            } else {
                workspace::checkpoint(&inner.root, &r.instance, &r.cut)
            }
        });
        task.await
            .map_err(|e| Refusal::Storage(format!("the copy's task failed: {e}")))?
    }
}
