//! `whip executor [--bind 127.0.0.1:8080] [--root DIR]`: the compute-plane sidecar that runs
//! `exec` effects (`whip-executor/1`, docs/EXECUTOR.md). This file only parses flags and
//! reads the token from `WHIP_EXECUTOR_TOKEN` (once, at start); the server is
//! `whip_engine::executor::ExecutorServer`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::json;
use whip_engine::executor::ExecutorServer;
use whip_engine::executor::protocol::PROTOCOL;

use crate::Global;
use crate::output;

/// `whip executor …`.
#[derive(clap::Args, Debug)]
pub(crate) struct ExecutorArgs {
    /// Address to listen on. Whatever it is, only peers on the loopback interface are
    /// answered (others get 403 `not_loopback`).
    #[arg(long, default_value = "127.0.0.1:8080")]
    bind: SocketAddr,
    /// Directory of the instances' workspaces (`ROOT/<instance>/`), run records and cuts.
    #[arg(long, default_value = "./whip-workspaces")]
    root: PathBuf,
}

/// Serve until SIGINT or SIGTERM. Without a token (`WHIP_EXECUTOR_TOKEN` unset or empty)
/// the executor does not start: exit 2.
pub(crate) async fn serve(global: &Global, args: ExecutorArgs) -> Result<ExitCode> {
    let token = std::env::var("WHIP_EXECUTOR_TOKEN").ok();
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        let message = "WHIP_EXECUTOR_TOKEN is not set: the executor does not run without a \
                       token (every request must carry `Authorization: Bearer <token>`)";
        if global.json {
            output::json(&json!({"error": message}));
        }
        eprintln!("error: {message}");
        return Ok(ExitCode::from(2));
    };
    let server = ExecutorServer::open(&args.root, &token).map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the executor answers only loopback peers; others get 403");
    }
    let root = server.root().display().to_string();
    if global.json {
        output::json(&json!({"listening": addr.to_string(), "root": root, "protocol": PROTOCOL}));
    } else {
        output::line(&format!(
            "executor listening on {addr} (root {root}, {PROTOCOL})"
        ));
    }
    server
        .serve(listener, crate::signals::stopped())
        .await
        .context("the executor stopped")?;
    Ok(ExitCode::SUCCESS)
}
