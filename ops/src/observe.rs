//! `--http ADDR` of `whip node serve`, `whip cell serve` and `whip cell dev`: the
//! observation listener (metrics, health, the dashboard) beside the gRPC port.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use whip_cell::http::Observed;

/// The observation listener's flag.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct HttpArgs {
    /// Serve metrics (`/metrics`, Prometheus text), health (`/healthz`, `/readyz`) and the
    /// dashboard (`/`) over plain HTTP on this address (`host:port`). Off unless given; it
    /// shows team, lease and mailbox names to whoever reaches it: keep it private.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<SocketAddr>,
}

/// A bound listener, not yet serving (bound before the servers start, so a taken port
/// fails the command at once).
pub(crate) struct Bound(Option<(SocketAddr, tokio::net::TcpListener)>);

/// A running HTTP listener (observation, or MCP's).
pub(crate) struct Serving {
    task: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl HttpArgs {
    /// Bind the listener when `--http` was given.
    pub(crate) async fn bind(&self) -> Result<Bound> {
        let Some(addr) = self.http else {
            return Ok(Bound(None));
        };
        let listener = whip_cell::http::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} (--http)"))?;
        Ok(Bound(Some((listener.local_addr()?, listener))))
    }
}

impl Bound {
    /// Serve `observed` on the bound listener, if any; prints where.
    pub(crate) fn serve(self, observed: Arc<dyn Observed>) -> Option<Serving> {
        let (addr, listener) = self.0?;
        let serving = Serving::spawn(|shutdown| async move {
            if let Err(e) = whip_cell::http::serve(listener, observed, shutdown).await {
                tracing::error!(error = %e, "observation listener stopped");
            }
        });
        eprintln!("metrics, health and dashboard on http://{addr}/");
        Some(serving)
    }
}

/// What a listener's task is given: it resolves when [`Serving::stop`] is called.
pub(crate) type Shutdown = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl Serving {
    /// Run `serve` on its own task until [`Serving::stop`] resolves its [`Shutdown`].
    pub(crate) fn spawn<Fut>(serve: impl FnOnce(Shutdown) -> Fut) -> Serving
    where
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown: Shutdown = Box::pin(async {
            let _ = stopped.await;
        });
        let task = tokio::spawn(serve(shutdown));
        Serving { task, stop }
    }

    /// Stop serving, giving open requests a moment.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        let mut task = self.task;
        if tokio::time::timeout(Duration::from_secs(1), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}
