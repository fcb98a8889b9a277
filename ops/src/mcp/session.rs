//! `start_session`: an agent's first call. It registers the agent's work entry (kind
//! `session`, under a parent when given), which this server renews while it runs, and
//! answers what the agent needs to pick up where it was: its inbox (each message with its
//! trust), what it holds (leases, path reservations, claims on its team's board) and the
//! team's board.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use super::Agent;
use super::answer::{Answer, Refusal};
use super::params::StartSession;
use crate::limits::{
    MCP_RESULT_BYTES_MAX, MCP_SESSION_HOLDS_MAX, MCP_SESSION_INBOX_ITEMS_MAX, MCP_SESSION_TTL_MS,
};

/// The work entry a `start_session` registered, and the task renewing it.
pub(super) struct Registered {
    entry: Value,
    parent: Option<String>,
    renewal: tokio::task::JoinHandle<()>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

fn entry_json(r: &pb::WorkResponse) -> Value {
    let entry = r.entry.clone().unwrap_or_default();
    json!({"id": entry.id, "kind": entry.kind, "parent": entry.parent, "depth": entry.depth,
        "lineage": entry.lineage, "expires_ms": entry.expires_ms, "peers": r.peers})
}

impl Agent {
    pub(super) async fn start_session(self: &Arc<Self>, p: StartSession) -> Answer {
        let entry = self.session_entry(p.parent).await?;
        let messages = self.inbox(0, MCP_SESSION_INBOX_ITEMS_MAX).await?;
        // The inbox gets half of the result; the holds and the board are small.
        let (inbox, cut) = super::mail::page(&messages, MCP_RESULT_BYTES_MAX / 2);
        let more = cut || messages.len() as u32 >= MCP_SESSION_INBOX_ITEMS_MAX;
        let mut holds = self.leases_held(MCP_SESSION_HOLDS_MAX).await?;
        let left = MCP_SESSION_HOLDS_MAX.saturating_sub(holds.len());
        holds.extend(self.reservations_held(left).await?);
        let board = match &p.team {
            Some(team) => {
                let left = MCP_SESSION_HOLDS_MAX.saturating_sub(holds.len());
                holds.extend(self.claims(team, left).await?);
                self.board_stats(team).await?
            }
            None => Value::Null,
        };
        Ok(json!({
            "agent": self.name, "entry": entry, "holds": holds, "board": board,
            "inbox": {"messages": inbox, "more": more},
        }))
    }

    /// The session's work entry: registered on the first call (and renewed from then on),
    /// the same one on later calls with the same parent.
    async fn session_entry(self: &Arc<Self>, parent: Option<String>) -> Answer {
        let mut registered = self.session.lock().await;
        if let Some(r) = registered.as_ref().filter(|r| r.parent == parent) {
            return Ok(r.entry.clone());
        }
        let request = pb::WorkRegisterRequest {
            kind: "session".into(),
            parent: parent.clone().unwrap_or_default(),
            ttl_ms: MCP_SESSION_TTL_MS,
            ..Default::default()
        };
        let r = self.client.work_register(request).await?;
        if r.code() == Code::WorkRefused {
            return Err(Refusal::new("limit", r.reason));
        }
        let entry = entry_json(&r);
        let id = entry["id"].as_str().unwrap_or_default().to_string();
        *registered = Some(Registered {
            entry: entry.clone(),
            parent,
            renewal: tokio::spawn(renew(Arc::clone(self), id)),
        });
        Ok(entry)
    }
}

/// Renew the entry at a third of its lease while the server runs; stop once the registry
/// answers that it is gone (revoked, or lapsed while the cell was out of reach).
async fn renew(agent: Arc<Agent>, id: String) {
    let every = Duration::from_millis(MCP_SESSION_TTL_MS / 3);
    loop {
        tokio::time::sleep(every).await;
        let request = pb::WorkRenewRequest {
            id: id.clone(),
            ttl_ms: MCP_SESSION_TTL_MS,
            idempotency_key: String::new(),
        };
        match agent.client.work_renew(request).await {
            Ok(r) => tracing::debug!(entry = %id, signal = %r.signal, "session entry renewed"),
            Err(whip_cell::CellError::Unavailable(e)) => {
                tracing::warn!(entry = %id, error = %e, "cannot renew the session entry yet");
            }
            Err(e) => {
                tracing::warn!(entry = %id, error = %e, "the session entry is gone");
                return;
            }
        }
    }
}
