//! `--mcp ADDR` of the servers (`whip node serve`, `whip cell serve`, `whip cell dev`): the
//! same tools over MCP's Streamable HTTP (rmcp's server, stateless, JSON answers) at
//! `POST /mcp`.
//!
//! Each request proves its agent the way a gRPC call does: `Authorization: Bearer TOKEN`,
//! the agent being the one the token names (`whip_cell::identity::agent_token`), or the
//! one `X-Whip-Agent` names for a plain token (made before tokens named agents). The pair is
//! checked by the cell with one read only that agent may make (its own inbox) before the
//! request reaches the tools; without both headers, or with a pair the cell refuses, the
//! answer is 401. The tools then act through a client carrying that agent's token, so the
//! cell proves every call again. The listener is loopback only (plain HTTP carries the
//! token), checks `Host` and `Origin` against loopback names (a web page elsewhere cannot
//! drive it through a browser) and answers at most [`MCP_HTTP_REQUESTS_MAX`] requests at
//! once.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use super::{Agent, Server};
use crate::Global;
use crate::limits::{MCP_HTTP_AGENTS_MAX, MCP_HTTP_REQUESTS_MAX};
use crate::observe::Serving;

/// The header naming the agent whose token the bearer is (as the gRPC metadata).
pub(crate) const AGENT_HEADER: &str = "x-whip-agent";

/// Origins a browser may send: pages served from this machine's loopback.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"];

/// The listener, bound before the servers start (a taken port fails the command at once).
pub(crate) struct Bound(Option<(SocketAddr, tokio::net::TcpListener)>);

/// Bind `--mcp ADDR` when given; an address off loopback is refused.
pub(crate) async fn bind(addr: Option<SocketAddr>) -> Result<Bound> {
    let Some(addr) = addr else {
        return Ok(Bound(None));
    };
    if !addr.ip().is_loopback() {
        bail!("--mcp {addr}: the MCP listener is plain HTTP carrying agent tokens: loopback only");
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (--mcp)"))?;
    Ok(Bound(Some((listener.local_addr()?, listener))))
}

/// What every request shares: how to reach the cell, and the agents proven lately.
struct Shared {
    cell: Vec<String>,
    global: Global,
    permits: tokio::sync::Semaphore,
    agents: tokio::sync::Mutex<HashMap<(String, String), Arc<Agent>>>,
}

impl Bound {
    /// Serve the tools on the bound listener, if any, reaching the cell at `cell` (this
    /// server's own members); prints where.
    pub(crate) fn serve(self, cell: Vec<String>, global: &Global) -> Option<Serving> {
        let (addr, listener) = self.0?;
        let shared = Arc::new(Shared {
            cell,
            global: global.clone(),
            permits: tokio::sync::Semaphore::new(MCP_HTTP_REQUESTS_MAX),
            agents: tokio::sync::Mutex::default(),
        });
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_allowed_origins(LOOPBACK_ORIGINS);
        let service = StreamableHttpService::new(
            || Ok(Server::per_request()),
            Arc::new(NeverSessionManager::default()),
            config,
        );
        let router = axum::Router::new()
            .route_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(shared, authenticate));
        let serving = Serving::spawn(|shutdown| async move {
            let served = axum::serve(listener, router).with_graceful_shutdown(shutdown);
            if let Err(e) = served.await {
                tracing::error!(error = %e, "MCP listener stopped");
            }
        });
        eprintln!("MCP (streamable HTTP) on http://{addr}/mcp");
        Some(serving)
    }
}

fn refuse(status: StatusCode, text: &str) -> Response {
    let mut response = (status, format!("{text}\n")).into_response();
    if status == StatusCode::UNAUTHORIZED {
        let challenge = HeaderValue::from_static("Bearer realm=\"whip\"");
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}

/// The agent and token a request brings: `Authorization: Bearer TOKEN`, the agent being the
/// one the token names (tokens the servers and the CLI make do), or `X-Whip-Agent` for a
/// plain token. A header naming another agent than the token does is no credential.
fn credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let token = text(header::AUTHORIZATION.as_str())?
        .strip_prefix("Bearer ")?
        .trim();
    let named = whip_cell::identity::token_agent(token);
    let agent = match (text(AGENT_HEADER).map(str::trim), named) {
        (Some(header), Some(named)) if header != named => return None,
        (Some(header), _) => header.to_string(),
        (None, named) => named?,
    };
    (!token.is_empty() && !agent.is_empty()).then(|| (agent, token.to_string()))
}

/// Admit a request: a POST within the request bound whose agent the cell proves; the
/// proven agent rides in its extensions to the tools.
async fn authenticate(
    State(shared): State<Arc<Shared>>,
    mut request: Request,
    next: Next,
) -> Response {
    let Ok(_permit) = shared.permits.try_acquire() else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy: too many MCP requests at once",
        );
    };
    if request.method() != Method::POST {
        let mut response = refuse(StatusCode::METHOD_NOT_ALLOWED, "POST /mcp only");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    let Some((name, token)) = credentials(request.headers()) else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "not_authenticated: send Authorization: Bearer TOKEN (and X-Whip-Agent: NAME when \
             the token does not name its agent)",
        );
    };
    match shared.agent(name, token).await {
        Ok(agent) => {
            request.extensions_mut().insert(agent);
            next.run(request).await
        }
        Err(CellError::Unavailable(e)) => refuse(StatusCode::SERVICE_UNAVAILABLE, &e),
        Err(e) => {
            tracing::info!(error = %e, "MCP request refused");
            refuse(
                StatusCode::UNAUTHORIZED,
                "not_authenticated: the cell refused this agent and token",
            )
        }
    }
}

impl Shared {
    /// The agent `name`, proven by `token` now: one read only it may make (its inbox).
    async fn agent(&self, name: String, token: String) -> Result<Arc<Agent>, CellError> {
        let key = (name, token);
        let known = self.agents.lock().await.get(&key).cloned();
        let agent = match known {
            Some(agent) => agent,
            None => Arc::new(self.client_for(&key.0, &key.1)?),
        };
        let probe = pb::MailInboxRequest {
            address: agent.address(),
            limit: 1,
            ..Default::default()
        };
        agent.client.mail_inbox(probe).await?;
        let mut agents = self.agents.lock().await;
        if agents.len() < MCP_HTTP_AGENTS_MAX || agents.contains_key(&key) {
            agents.entry(key).or_insert_with(|| Arc::clone(&agent));
        }
        Ok(agent)
    }

    fn client_for(&self, name: &str, token: &str) -> Result<Agent, CellError> {
        let router = Arc::new(whip_fabric::client::MapRouter::new());
        let client = CellClient::connect(&self.cell)?
            .with_router(router)
            .with_identity(name, token);
        Ok(Agent::new(
            name.to_string(),
            Arc::new(client),
            self.global.clone(),
        ))
    }
}
