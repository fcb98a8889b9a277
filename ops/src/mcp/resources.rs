//! Read-only resources: cheap views an agent's client reads without a tool call, each the
//! caller's own view (the same calls the tools make, proven the same way), one page within
//! [`MCP_RESULT_BYTES_MAX`]. A listing that stopped early says `"more": true`; the tools
//! page further.

use rmcp::model::{Resource, ResourceTemplate};
use serde_json::{Value, json};
use whip_proto::v1 as pb;

use super::Agent;
use super::answer::{Answer, Refusal, json_bytes};
use crate::limits::{MCP_PAGE_ITEMS_MAX, MCP_RESULT_BYTES_MAX, MCP_SESSION_HOLDS_MAX};

/// The caller's inbox, oldest first (read, not acknowledged).
const INBOX: &str = "whip://inbox";
/// The leases the caller holds.
const LEASES: &str = "whip://leases";
/// The live work entries the caller may see.
const REGISTRY: &str = "whip://registry";
/// The path reservations the caller holds, in every repository.
const RESERVATIONS: &str = "whip://reservations";
/// A team's board: its counts and a page of ready tasks.
const BOARD_TEMPLATE: &str = "whip://team/{team}/board";

/// Every resource with a fixed address.
pub(super) fn listed() -> Vec<Resource> {
    let json = |uri: &str, name: &str, about: &str| {
        Resource::new(uri, name)
            .with_description(about)
            .with_mime_type("application/json")
    };
    vec![
        json(
            INBOX,
            "inbox",
            "Your inbox, oldest first; reading acknowledges nothing.",
        ),
        json(
            LEASES,
            "leases",
            "The leases you hold, with their fences and expiries.",
        ),
        json(REGISTRY, "registry", "The live work entries you may see."),
        json(
            RESERVATIONS,
            "reservations",
            "The path reservations you hold, with their fences and expiries.",
        ),
    ]
}

/// The resources addressed by a template.
pub(super) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(BOARD_TEMPLATE, "board")
            .with_description("A team's board: counts and a page of ready tasks (members only).")
            .with_mime_type("application/json"),
    ]
}

/// The team a board address names (`whip://team/{team}/board`).
fn board_team(uri: &str) -> Option<&str> {
    let team = uri.strip_prefix("whip://team/")?.strip_suffix("/board")?;
    (!team.is_empty() && !team.contains('/')).then_some(team)
}

/// At most `max` of `items` whose JSON fits `budget` bytes together, and whether any was
/// left out.
fn within(items: Vec<Value>, budget: usize, max: usize) -> (Vec<Value>, bool) {
    let total = items.len();
    let mut used = 0;
    let mut kept = Vec::new();
    for item in items.into_iter().take(max) {
        used += json_bytes(&item) + 1;
        if used > budget {
            break;
        }
        kept.push(item);
    }
    let more = kept.len() < total;
    (kept, more)
}

impl Agent {
    /// Read the resource at `uri` as the caller (`None`: no such resource).
    pub(super) async fn read_resource(&self, uri: &str) -> Option<Answer> {
        Some(match uri {
            INBOX => self.inbox_view().await,
            LEASES => self.leases_view().await,
            REGISTRY => self.registry_view().await,
            RESERVATIONS => self.reservations_view().await,
            _ => self.board_view(board_team(uri)?).await,
        })
    }

    async fn inbox_view(&self) -> Answer {
        let messages = self.inbox(0, MCP_PAGE_ITEMS_MAX).await?;
        let (listed, cut) = super::mail::page(&messages, MCP_RESULT_BYTES_MAX);
        let more = cut || messages.len() as u32 >= MCP_PAGE_ITEMS_MAX;
        Ok(json!({"agent": self.name, "messages": listed, "more": more}))
    }

    async fn leases_view(&self) -> Answer {
        let held = self.leases_held(MCP_SESSION_HOLDS_MAX + 1).await?;
        let (held, more) = within(held, MCP_RESULT_BYTES_MAX, MCP_SESSION_HOLDS_MAX);
        Ok(json!({"agent": self.name, "leases": held, "more": more}))
    }

    async fn reservations_view(&self) -> Answer {
        let held = self.reservations_held(MCP_SESSION_HOLDS_MAX + 1).await?;
        let (held, more) = within(held, MCP_RESULT_BYTES_MAX, MCP_SESSION_HOLDS_MAX);
        Ok(json!({"agent": self.name, "reservations": held, "more": more}))
    }

    async fn registry_view(&self) -> Answer {
        let request = pb::WorkListRequest {
            parent: String::new(),
            limit: MCP_PAGE_ITEMS_MAX + 1,
        };
        let entries = self.client.work_list(request).await?.entries;
        let entries: Vec<Value> = (entries.iter())
            .map(|e| {
                json!({"id": e.id, "kind": e.kind, "owner": e.owner, "parent": e.parent,
                    "depth": e.depth, "class": e.class, "signal": e.signal,
                    "expires_ms": e.expires_ms})
            })
            .collect();
        let max = MCP_PAGE_ITEMS_MAX as usize;
        let (entries, more) = within(entries, MCP_RESULT_BYTES_MAX, max);
        Ok(json!({"entries": entries, "more": more}))
    }

    async fn board_view(&self, team: &str) -> Answer {
        let stats = self.board_stats(team).await?;
        let request = pb::BoardListRequest {
            team: team.to_string(),
            state: "ready".into(),
            limit: MCP_PAGE_ITEMS_MAX + 1,
        };
        let tasks = self.client.board_list(request).await?.tasks;
        let ready: Vec<Value> = (tasks.iter())
            .map(|t| {
                let body = super::board::body_json(&t.body);
                json!({"id": t.id, "tier": t.tier, "body": body, "posted_ms": t.posted_ms,
                    "delivery_count": t.delivery_count})
            })
            .collect();
        let budget = MCP_RESULT_BYTES_MAX.saturating_sub(json_bytes(&stats));
        let (ready, more) = within(ready, budget, MCP_PAGE_ITEMS_MAX as usize);
        Ok(json!({"team": team, "counts": stats, "ready": ready, "more": more}))
    }
}

/// The refusal for an address no resource has.
pub(super) fn unknown(uri: &str) -> Refusal {
    Refusal::new(
        "not_found",
        format!("no resource {uri:?}: resources/list and resources/templates/list name them"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_address_names_one_team() {
        assert_eq!(board_team("whip://team/web/board"), Some("web"));
        for bad in [
            "whip://team//board",
            "whip://team/a/b/board",
            "whip://team/web",
        ] {
            assert_eq!(board_team(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_page_stops_at_its_budget_and_says_more() {
        let items: Vec<Value> = (0..10).map(|i| json!({"n": i})).collect();
        let (kept, more) = within(items.clone(), 30, 100);
        assert!(more && !kept.is_empty() && kept.len() < 10, "{kept:?}");
        assert_eq!(within(items.clone(), 10_000, 100), (items.clone(), false));
        assert_eq!(within(items.clone(), 10_000, 4).0.len(), 4);
    }
}
