//! `whip mcp`: the fabric as a Model Context Protocol server over stdio (rmcp, the
//! official Rust SDK), started by an agent's MCP client.
//!
//! **Identity is the transport's.** The server connects exactly as every other `whip`
//! command does (`--cell`, or the embedded store) and acts as the CLI's agent (`--agent`
//! or `WHIP_AGENT`, its token in the credentials file), proven to the cell by that token
//! on every call. No tool has an argument naming who acts: where a primitive needs a
//! holder, a worker or an appender, it is the proven agent, and a call that carries such
//! an argument anyway (`from`, `agent`, `holder`, `worker`, …) is refused `not_authorized`
//! before anything is sent. The only inbox the tools read is the caller's own.
//!
//! **Decisions stay below.** A tool translates its arguments into one typed
//! [`whip_cell::CellClient`] call (or a few: a wait, a listing); membership, fences,
//! directive authority, quotas and every other decision are the board's and the cell's.
//! A refusal is a tool error whose text starts with the fabric's stable code
//! (`not_member: …`, `stale_fence: …`); business outcomes (an empty board, a contended
//! lease, a budget over its cap) are results.
//!
//! **Bounded.** Every result is compact JSON, a listing is one page within
//! [`crate::limits::MCP_RESULT_BYTES_MAX`], and a wait is at most
//! [`crate::limits::MCP_WAIT_MS_MAX`], woken by the cell's applies rather than polling.
//! stdout carries only the protocol; logs go to stderr.
//!
//! **Over HTTP** ([`http`]), a server's `--mcp ADDR` serves the same tools at `POST /mcp`,
//! each request proving its agent with a bearer token (which names its agent).
//!
//! **Resources** ([`resources`]): read-only views (`whip://inbox`, `whip://leases`,
//! `whip://registry`, `whip://team/{team}/board`), each read as the proven agent.
//!
//! Must never: believe an identity from a tool argument, decide what the board decides,
//! or print anything but protocol messages on stdout.

mod answer;
mod board;
mod coordination;
pub(crate) mod http;
mod mail;
mod params;
mod paths;
mod resources;
mod session;
mod tools;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool_handler};
use whip_cell::CellClient;

use crate::Global;
use crate::limits::MCP_PROGRESS_EVERY_MS;
use answer::Refusal;

/// The proven agent and its connection: what every tool acts through.
pub(crate) struct Agent {
    name: String,
    client: Arc<CellClient>,
    global: Global,
    /// The work entry `start_session` registered, renewed while the server runs.
    session: tokio::sync::Mutex<Option<session::Registered>>,
}

/// The MCP server: the tools, acting for one agent (over stdio, the server's own; over
/// HTTP, each request's, proven before it reaches the tools).
#[derive(Clone)]
pub(crate) struct Server {
    agent: Option<Arc<Agent>>,
    tool_router: ToolRouter<Server>,
}

impl Agent {
    fn new(name: String, client: Arc<CellClient>, global: Global) -> Agent {
        Agent {
            name,
            client,
            global,
            session: tokio::sync::Mutex::new(None),
        }
    }
}

/// What the server tells a client when it connects.
const INSTRUCTIONS: &str = "whip fabric: shared state for a team of agents. You act as the \
    agent this server was started for; no tool takes a sender, holder or worker. Call \
    start_session first. Refusals are tool errors that start with a stable code.";

impl Server {
    fn new(agent: Arc<Agent>) -> Server {
        Server {
            agent: Some(agent),
            tool_router: Server::router(),
        }
    }

    /// The tools, their schemas made once per process.
    fn router() -> ToolRouter<Server> {
        static ROUTER: std::sync::OnceLock<ToolRouter<Server>> = std::sync::OnceLock::new();
        ROUTER.get_or_init(Server::tool_router).clone()
    }

    /// A server for one HTTP request: its agent comes with the request.
    fn per_request() -> Server {
        Server {
            agent: None,
            tool_router: Server::router(),
        }
    }

    /// The agent a tool acts for (`call_tool` resolves it before any tool runs).
    fn agent(&self) -> &Arc<Agent> {
        self.agent
            .as_ref()
            .expect("call_tool resolves the agent before a tool runs")
    }

    /// This server acting for the call's agent: its own, or the one the HTTP listener
    /// proved for this request.
    fn for_call(&self, context: &RequestContext<RoleServer>) -> Option<Server> {
        let agent = match &self.agent {
            Some(agent) => Arc::clone(agent),
            None => {
                let parts = context.extensions.get::<axum::http::request::Parts>()?;
                Arc::clone(parts.extensions.get::<Arc<Agent>>()?)
            }
        };
        Some(Server {
            agent: Some(agent),
            tool_router: self.tool_router.clone(),
        })
    }

    /// A refusal for an argument the tool does not take: `not_authorized` for one that
    /// would name who acts, `invalid_argument` for any other.
    fn foreign_argument(&self, request: &CallToolRequestParams) -> Option<Refusal> {
        let tool = self.tool_router.get(&request.name)?;
        let known = tool
            .input_schema
            .get("properties")
            .and_then(|p| p.as_object());
        let arguments = request.arguments.as_ref()?;
        let foreign = arguments
            .keys()
            .find(|k| !known.is_some_and(|known| known.contains_key(k.as_str())))?;
        if params::IDENTITY_ARGUMENTS.contains(&foreign.as_str()) {
            return Some(Refusal::new(
                "not_authorized",
                format!(
                    "{} takes no {foreign:?}: you act as {}, the agent this server proved, \
                     and no argument names another",
                    request.name,
                    self.agent().name
                ),
            ));
        }
        Some(Refusal::new(
            "invalid_argument",
            format!("{} takes no argument {foreign:?}", request.name),
        ))
    }
}

/// rmcp's own tool errors (arguments that do not deserialize) with the stable code first.
fn coded(response: CallToolResponse) -> CallToolResponse {
    let CallToolResponse::Complete(mut result) = response else {
        return response;
    };
    if result.is_error == Some(true) {
        for block in &mut result.content {
            if let ContentBlock::Text(text) = block
                && let Some(rest) = text.text.strip_prefix("failed to deserialize parameters: ")
            {
                text.text = format!("invalid_argument: {rest}");
            }
        }
    }
    CallToolResponse::Complete(result)
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// While a call that waits (`wait_s`) runs, tell a client that asked for progress how long
/// it has waited, every [`MCP_PROGRESS_EVERY_MS`]; dropping the guard stops it.
fn progress_while_waiting(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<AbortOnDrop> {
    let token = context.meta.get_progress_token()?;
    let wait_s = request.arguments.as_ref()?.get("wait_s")?.as_u64()?;
    let peer = context.peer.clone();
    let every = std::time::Duration::from_millis(MCP_PROGRESS_EVERY_MS);
    Some(AbortOnDrop(tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(every).await;
            let waited = started.elapsed().as_secs_f64();
            let note = ProgressNotificationParam::new(token.clone(), waited)
                .with_total(wait_s as f64)
                .with_message(format!("waited {waited:.0} s of up to {wait_s} s"));
            if peer.notify_progress(note).await.is_err() {
                return;
            }
        }
    })))
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("whip", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS.to_string())
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(resources::listed()))
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    /// A resource, read as the proven agent; a refusal is an error whose message starts
    /// with the fabric's stable code, as a tool error's text does.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some(server) = self.for_call(&context) else {
            return Err(ErrorData::internal_error(
                "no proven agent for this read",
                None,
            ));
        };
        let uri = request.uri;
        let Some(answer) = server.agent().read_resource(&uri).await else {
            let refusal = resources::unknown(&uri);
            return Err(ErrorData::resource_not_found(refusal.text(), None));
        };
        match answer {
            Ok(value) => {
                let text = ResourceContents::text(value.to_string(), uri)
                    .with_mime_type("application/json");
                Ok(ReadResourceResult::new(vec![text]).into())
            }
            Err(refusal) => Err(ErrorData::invalid_params(refusal.text(), None)),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(server) = self.for_call(&context) else {
            return Err(ErrorData::internal_error(
                "no proven agent for this call",
                None,
            ));
        };
        if let Some(refusal) = server.foreign_argument(&request) {
            tracing::info!(tool = %request.name, refusal = %refusal.text(), "refused");
            let text = ContentBlock::text(refusal.text());
            return Ok(CallToolResult::error(vec![text]).into());
        }
        tracing::debug!(tool = %request.name, "call");
        // rmcp only marks a request the client cancelled; dropping the tool's future is
        // ours, and it is what ends a wait (a claim caught mid-way gives its task back).
        let cancelled = context.ct.clone();
        let _progress = progress_while_waiting(&request, &context);
        let call = ToolCallContext::new(&server, request, context);
        tokio::select! {
            answer = server.tool_router.call(call) => Ok(coded(answer?)),
            () = cancelled.cancelled() => {
                tracing::info!("the client cancelled the call");
                Err(ErrorData::internal_error("cancelled by the client", None))
            }
        }
    }
}

/// `whip mcp`: serve the tools over stdio as the CLI's agent until the client closes the
/// stream or a stop signal arrives.
pub(crate) async fn run(global: &Global) -> Result<ExitCode> {
    let session = crate::connect::session(global).await?;
    let session = crate::agent::authenticate(global, session).await?;
    let name = crate::agent::agent_name(global);
    let agent = Arc::new(Agent::new(
        name,
        Arc::clone(&session.client),
        global.clone(),
    ));
    tracing::info!(agent = %agent.name, "serving MCP on stdio");
    let served = Server::new(Arc::clone(&agent))
        .serve(rmcp::transport::stdio())
        .await
        .context("the MCP client did not start a session");
    let result = match served {
        Ok(running) => {
            let cancel = running.cancellation_token();
            tokio::select! {
                ended = running.waiting() => ended.map(|_| ()).context("the MCP service failed"),
                () = crate::signals::stopped() => {
                    cancel.cancel();
                    Ok(())
                }
            }
        }
        Err(e) => Err(e),
    };
    // The session entry's renewal stops; the entry lapses within its lease.
    agent.session.lock().await.take();
    session.close().await;
    result.map(|()| ExitCode::SUCCESS)
}
