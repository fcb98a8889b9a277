//! Reaching a cell: a cluster named by `--cell`, or the embedded single-voter store.
//!
//! Embedded: the first `whip` process takes the store's lock, starts a one-voter cell (the
//! same Raft and state-machine code as a cluster) and serves it on a local socket inside the
//! store. A second process that finds the lock taken talks to the holder over that socket
//! (waiting for it while the holder is still opening the cell). A holder whose own command
//! is done keeps serving while other processes keep connecting, so a burst of commands
//! started together all land; it stops once nobody connected for a moment.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use whip_cell::client::Target;
use whip_cell::{Cell, CellClient, CellConfig};

use crate::Global;

/// How long a client of another process's embedded store retries before giving up.
const SOCKET_RETRY_MS: u64 = 1_000;
/// How long a process waits for the store's holder to answer on its socket (the holder
/// may still be opening the cell).
const STORE_WAIT_MS: u64 = 10_000;
/// A holder done with its own command stops once no process connected for this long...
const LINGER_IDLE_MS: u64 = 300;
/// ...and at the latest this long after its command.
const LINGER_MAX_MS: u64 = 5_000;

/// A connection for one command; [`Session::close`] stops an embedded cell we started.
pub(crate) struct Session {
    pub(crate) client: std::sync::Arc<CellClient>,
    embedded: Option<Embedded>,
}

impl Session {
    /// Whether this session reached the embedded store through another process's socket:
    /// only such a session may find the store gone and take it over (the holder itself
    /// reconnecting would find its own lock).
    pub(crate) fn is_guest(&self, global: &crate::Global) -> bool {
        global.cell.is_none() && self.embedded.is_none()
    }
}

struct Embedded {
    cell: Cell,
    socket: PathBuf,
    server: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<()>,
    _lock: File,
    /// When another process last connected (ms since `opened`; 0 = never).
    last_connect_ms: Arc<AtomicU64>,
    opened: Instant,
}

impl Embedded {
    /// Keep serving while other processes keep connecting (see [`LINGER_IDLE_MS`]).
    async fn linger(&self) {
        let until = Instant::now() + Duration::from_millis(LINGER_MAX_MS);
        loop {
            let last = self.last_connect_ms.load(Ordering::Relaxed);
            let now = self.opened.elapsed().as_millis() as u64;
            let idle = now.saturating_sub(last);
            if last == 0 || idle >= LINGER_IDLE_MS || Instant::now() >= until {
                return;
            }
            tokio::time::sleep(Duration::from_millis(LINGER_IDLE_MS - idle)).await;
        }
    }
}

impl Session {
    /// The same session with its client rebuilt by `f` (e.g. to act for an agent).
    pub(crate) fn with_client(self, f: impl FnOnce(CellClient) -> CellClient) -> Session {
        let client = std::sync::Arc::try_unwrap(self.client)
            .unwrap_or_else(|_| panic!("the session's client is not shared yet"));
        Session {
            client: std::sync::Arc::new(f(client)),
            embedded: self.embedded,
        }
    }

    /// Stop the embedded cell (if this process holds it) after the command is done.
    pub(crate) async fn close(self) {
        if let Some(e) = self.embedded {
            e.linger().await;
            let _ = e.stop.send(());
            let _ = e.server.await;
            e.cell.shutdown().await;
            let _ = std::fs::remove_file(&e.socket);
        }
    }
}

/// The addresses named by `--cell` (comma-separated).
pub(crate) fn cell_addrs(spec: &str) -> Vec<String> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Connect as the global flags say. A client of `--cell` routes by the range map when
/// those addresses are fabric nodes (its keyed writes go straight to the owning cell's
/// leader); against a single cell the router steps aside on first use.
pub(crate) async fn session(global: &Global) -> Result<Session> {
    if let Some(spec) = &global.cell {
        let client = CellClient::connect(&cell_addrs(spec))?
            .with_router(Arc::new(whip_fabric::client::MapRouter::new()));
        return Ok(Session {
            client: client.into(),
            embedded: None,
        });
    }
    let store = global
        .store
        .clone()
        .unwrap_or_else(|| PathBuf::from(".whipplescript"));
    embedded(&store).await
}

/// Connect for a command that only reads: an embedded store that does not exist is an
/// error (a mistyped `--store` must not silently read an empty new store).
pub(crate) async fn read_session(global: &Global) -> Result<Session> {
    if global.cell.is_none() {
        let store = global
            .store
            .clone()
            .unwrap_or_else(|| PathBuf::from(".whipplescript"));
        if !store.join("cell").exists() {
            anyhow::bail!(
                "no store at {}: nothing was ever written there (check --store or \
                 WHIPPLESCRIPT_STORE)",
                store.display()
            );
        }
    }
    session(global).await
}

async fn embedded(store: &Path) -> Result<Session> {
    // The store's socket answers the whole API as the local user: only this user may reach
    // it, whatever the umask (the directory 0700, the socket 0600).
    whip_cell::tls::private_dir(store)
        .with_context(|| format!("cannot create store {}", store.display()))?;
    let socket = store.join("cell.sock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(store.join("whip.lock"))
        .context("cannot open the store lock")?;
    let deadline = Instant::now() + Duration::from_millis(STORE_WAIT_MS);
    loop {
        match lock.try_lock() {
            Ok(()) => return start_embedded(store, socket, lock).await,
            Err(std::fs::TryLockError::WouldBlock) => {
                // The holder answers once its cell is open; until then, wait (or take the
                // store over if the holder exits first).
                if tokio::net::UnixStream::connect(&socket).await.is_ok() {
                    return guest(socket);
                }
                if Instant::now() >= deadline {
                    bail!(
                        "the store {} is locked by another process that does not answer on {}",
                        store.display(),
                        socket.display()
                    );
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).context("cannot lock the store");
            }
        }
    }
}

/// A session through the store holder's socket.
fn guest(socket: PathBuf) -> Result<Session> {
    tracing::debug!(
        socket = %socket.display(),
        "store is held by another process; using its socket"
    );
    // The holder may exit at any time; callers that outlive it reconnect rather than wait
    // out the long retry meant for leader elections.
    let client = CellClient::new(Target::Unix(socket))?
        .with_retry_for(Duration::from_millis(SOCKET_RETRY_MS));
    Ok(Session {
        client: client.into(),
        embedded: None,
    })
}

async fn start_embedded(store: &Path, socket: PathBuf, lock: File) -> Result<Session> {
    let config = CellConfig::new(1, "embedded", store.join("cell"));
    let cell = Cell::start(config)
        .await
        .context("cannot open the embedded cell")?;
    if !cell
        .raft()
        .is_initialized()
        .await
        .context("embedded cell")?
    {
        cell.initialize(BTreeMap::from([(1, "embedded".to_string())]))
            .await?;
    }
    // One voter needs no election timeout: ask for the election now.
    let _ = cell.raft().trigger().elect().await;
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket)
        .with_context(|| format!("cannot listen on {}", socket.display()))?;
    std::fs::set_permissions(&socket, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .with_context(|| format!("cannot restrict {}", socket.display()))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let router = whip_cell::service::router(cell.clone());
    let (opened, last_connect_ms) = (Instant::now(), Arc::new(AtomicU64::new(0)));
    let seen = Arc::clone(&last_connect_ms);
    let server = tokio::spawn(async move {
        use tokio_stream::StreamExt;
        let incoming =
            tokio_stream::wrappers::UnixListenerStream::new(listener).map(move |connection| {
                seen.store(opened.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
                connection
            });
        let shutdown = async {
            let _ = stopped.await;
        };
        if let Err(e) = router
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await
        {
            tracing::warn!(error = %e, "embedded socket server");
        }
    });
    wait_leader(&cell).await?;
    let client = CellClient::local(cell.clone());
    let embedded = Embedded {
        cell,
        socket,
        server,
        stop,
        _lock: lock,
        last_connect_ms,
        opened,
    };
    Ok(Session {
        client: client.into(),
        embedded: Some(embedded),
    })
}

async fn wait_leader(cell: &Cell) -> Result<()> {
    let waited = cell
        .raft()
        .wait(Some(Duration::from_secs(5)))
        .metrics(|m| m.current_leader == Some(m.id), "embedded leader")
        .await;
    if waited.is_err() {
        bail!("the embedded cell did not elect itself within 5s");
    }
    Ok(())
}
