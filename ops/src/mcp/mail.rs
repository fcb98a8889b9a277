//! The mail tools. The sender is the proven agent (the server stamps it), and the only
//! inbox these tools read, take or acknowledge is the caller's own: no argument names a
//! mailbox.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use whip_cell::Waiter;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_proto::v1::wait_applied_request::Subject;

use super::Agent;
use super::answer::{Answer, Refusal, json_bytes, wait_ms};
use super::params::{MailAck, MailInbox, MailKind, MailReply, MailSend, MailSendMany, MailTake};
use crate::limits::{MCP_PAGE_ITEMS_MAX, MCP_RESULT_BYTES_MAX};

impl MailKind {
    fn wire(self) -> pb::MailType {
        match self {
            MailKind::Inform => pb::MailType::Inform,
            MailKind::Ask => pb::MailType::Ask,
            MailKind::Reply => pb::MailType::Reply,
            MailKind::Directive => pb::MailType::Directive,
        }
    }
}

/// A message as the tools list it (`budget`: bytes left on the page, which a payload too
/// large for it is left out of, with its size said).
fn message_json(m: &pb::MailMessage, budget: usize) -> Value {
    let mut value = json!({
        "id": m.id, "seq": m.seq, "from": m.from, "type": crate::mailcmd::type_name(m.r#type),
        "text": m.text, "trust": m.trust, "at_ms": m.at_ms,
        "screen": m.screen.as_ref().map(|s| s.verdict.clone()),
    });
    if let Some(reply) = &m.in_reply_to {
        value["in_reply_to"] = json!(reply);
    }
    if let Some(thread) = &m.thread {
        value["thread"] = json!(thread);
    }
    if let Some(payload) = &m.payload {
        if json_bytes(&value) + payload.len() > budget {
            value["payload_omitted_bytes"] = json!(payload.len());
        } else {
            let parsed = serde_json::from_str(payload);
            value["payload"] = parsed.unwrap_or_else(|_| Value::String(payload.clone()));
        }
    }
    value
}

/// One page of messages within `budget` bytes: at least one message, then as many as fit.
/// True in the second place when the page stopped for its size.
pub(super) fn page(messages: &[pb::MailMessage], budget: usize) -> (Vec<Value>, bool) {
    let mut out = Vec::new();
    let mut used = 0;
    for m in messages {
        let value = message_json(m, budget.saturating_sub(used));
        let bytes = json_bytes(&value) + 1;
        if !out.is_empty() && used + bytes > budget {
            return (out, true);
        }
        used += bytes;
        out.push(value);
    }
    (out, false)
}

fn sent(r: pb::MailSendResponse) -> Answer {
    if r.code() == Code::MailRefused {
        return Err(Refusal::answered(&r.reason, &r.message));
    }
    Ok(json!({"outcome": r.outcome, "id": r.id, "trust": r.trust}))
}

impl Agent {
    /// The caller's own mail address.
    pub(super) fn address(&self) -> String {
        format!("agent:{}", self.name)
    }

    pub(super) async fn mail_send(&self, p: MailSend) -> Answer {
        let request = pb::MailSendRequest {
            to: p.to,
            r#type: p.kind.wire().into(),
            text: p.text,
            payload: p.payload.map(|v| v.to_string()),
            idempotency_key: p.idempotency_key.unwrap_or_default(),
            ..Default::default()
        };
        sent(self.client.mail_send(request).await?)
    }

    /// Several messages to one mailbox in one write, each delivered or refused on its own.
    pub(super) async fn mail_send_many(&self, p: MailSendMany) -> Answer {
        let kind = p.kind.wire();
        let messages = p
            .texts
            .into_iter()
            .map(|text| pb::MailSendItem {
                r#type: kind.into(),
                text,
                ..Default::default()
            })
            .collect();
        let request = pb::MailSendManyRequest {
            to: p.to,
            messages,
            idempotency_key: p.idempotency_key.unwrap_or_default(),
        };
        let answer = self.client.mail_send_many(request).await?;
        Ok(crate::mailcmd::sent_many_json(&answer))
    }

    /// Up to `limit` messages of the caller's inbox after `after`.
    pub(super) async fn inbox(
        &self,
        after: u64,
        limit: u32,
    ) -> Result<Vec<pb::MailMessage>, Refusal> {
        let request = pb::MailInboxRequest {
            address: self.address(),
            after_seq: after,
            limit,
            quarantined: false,
        };
        Ok(self.client.mail_inbox(request).await?.messages)
    }

    pub(super) async fn mail_inbox(&self, p: MailInbox) -> Answer {
        let after = p.after.unwrap_or(0);
        let limit = p
            .limit
            .unwrap_or(MCP_PAGE_ITEMS_MAX)
            .clamp(1, MCP_PAGE_ITEMS_MAX);
        let messages = match wait_ms(p.wait_s)? {
            Some(ms) => self.inbox_waiting(after, limit, ms).await?,
            None => self.inbox(after, limit).await?,
        };
        let (listed, cut) = page(&messages, MCP_RESULT_BYTES_MAX);
        let next_after = listed
            .last()
            .and_then(|m| m["seq"].as_u64())
            .unwrap_or(after);
        let more = cut || messages.len() as u32 >= limit;
        Ok(json!({"messages": listed, "next_after": next_after, "more": more}))
    }

    /// Read the inbox, and while nothing waits after `after`, wait up to `wait_ms` for the
    /// mailbox's cell to apply something, then read again (mark, read, wait: a message that
    /// lands between the read and the wait still wakes it).
    async fn inbox_waiting(
        &self,
        after: u64,
        limit: u32,
        wait_ms: u64,
    ) -> Result<Vec<pb::MailMessage>, Refusal> {
        let started = Instant::now();
        let wait = Duration::from_millis(wait_ms);
        let mut waiter = Waiter::mark(&self.client, Subject::Inbox(self.address())).await?;
        loop {
            let messages = self.inbox(after, limit).await?;
            let left = wait.saturating_sub(started.elapsed());
            if !messages.is_empty() || left.is_zero() {
                return Ok(messages);
            }
            tracing::debug!(left_ms = left.as_millis() as u64, "inbox empty; waiting");
            waiter.next(left).await?;
        }
    }

    pub(super) async fn mail_ack(&self, p: MailAck) -> Answer {
        let request = pb::MailAckRequest {
            address: self.address(),
            through_seq: p.through_seq,
            idempotency_key: String::new(),
        };
        let r = self.client.mail_ack(request).await?;
        if r.code() == Code::MailRefused {
            return Err(Refusal::answered(&r.reason, &r.message));
        }
        Ok(json!({"outcome": r.outcome, "removed": r.removed}))
    }

    /// Acknowledge and take from the caller's own inbox in one apply (no argument names a
    /// mailbox); while nothing waits, wait up to `wait_s`, the acknowledgement riding the
    /// first take only.
    pub(super) async fn mail_take(&self, p: MailTake) -> Answer {
        let wait = Duration::from_millis(wait_ms(p.wait_s)?.unwrap_or(0));
        let visibility_s = p.visibility_s.unwrap_or(30);
        let mut request = pb::MailTakeRequest {
            address: self.address(),
            ack_through: p.ack_through,
            max: p.max.unwrap_or(10),
            visibility_ms: visibility_s.saturating_mul(1_000),
            idempotency_key: String::new(),
        };
        let started = Instant::now();
        let mut waiter = match wait.is_zero() {
            true => None,
            false => Some(Waiter::mark(&self.client, Subject::Inbox(self.address())).await?),
        };
        let first = self.client.mail_take(request.clone()).await?;
        let removed = first.removed;
        let mut taken = first;
        loop {
            if taken.code() == Code::MailRefused {
                return Err(Refusal::answered(&taken.reason, &taken.message));
            }
            let left = wait.saturating_sub(started.elapsed());
            let Some(waiter) = waiter.as_mut().filter(|_| taken.messages.is_empty()) else {
                break;
            };
            if left.is_zero() {
                break;
            }
            waiter.next(left).await?;
            request.ack_through = None;
            taken = self.client.mail_take(request.clone()).await?;
        }
        let (listed, _) = page(&taken.messages, MCP_RESULT_BYTES_MAX);
        Ok(json!({
            "outcome": taken.outcome, "removed": removed, "messages": listed,
            "visible_until_ms": taken.visible_until_ms,
        }))
    }

    /// Answer a message of the caller's own inbox (any other mailbox is refused: these
    /// tools never read another agent's mail).
    pub(super) async fn mail_reply(&self, p: MailReply) -> Answer {
        let own = self.address();
        let in_own = whip_board::mail::parse_id(&p.id)
            .map_err(|e| Refusal::new("invalid_argument", e))?
            .0
            .code()
            == own;
        if !in_own {
            return Err(Refusal::new(
                "not_authorized",
                format!(
                    "message {:?} is not in your inbox ({own}); you reply only to your own mail",
                    p.id
                ),
            ));
        }
        let payload = p.payload.map(|v| v.to_string());
        let request = crate::mailcmd::reply_request(&self.client, p.id, p.text, payload).await?;
        sent(self.client.mail_send(request).await?)
    }
}
