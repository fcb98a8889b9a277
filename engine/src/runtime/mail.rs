//! Mail for workflow instances (`use std.messaging`): `send via CHANNEL …` effects and the
//! drain that turns an instance's inbound mail into facts before each step.
//!
//! An instance's mailbox is its registry entry's (`entry:{work id}`), on the entry's cell.
//! Before the stepper evaluates rules it reads the deliverable mail there (quarantined
//! mail never comes) and commits each message as a `message.received` fact, carrying its
//! sender, type, text, payload, trust and screen verdict; a message already admitted (same
//! id) is skipped, so a message becomes at most one fact. Only then is the mailbox
//! acknowledged, so a crash between the two admits the same mail again, once.
//!
//! A `reply` whose `in_reply_to` names the message an unsettled `ask` sent completes that
//! ask (`after q replied as r`) in the same commit: the reply wakes the instance, nothing
//! polls. An ask whose `within` passes first ends `timed_out` (one wake-up at its deadline).
//!
//! A drain failure (the mailbox's cell unreachable, a malformed answer) never fails the
//! step: it is recorded as a `mail.drain_failed` event and the mail stays for the next drain.

use serde_json::{Value, json};
use whip_fabric::mail::{Address, MailBody, MailType, MailView};
use whip_fabric::{FabricClient, MailAnswer};

use super::effect::{MailArgs, MailWord};
use super::state::{Args, Effect, EffectKind, EventKind, Fact, Header, State, Terminal};
use super::worker::Ran;
use super::{CONFLICT_RETRIES_MAX, Draft, Engine, Loaded, Result, now_ms};
use crate::check::model::Wf;
use crate::limits::{MAIL_DRAIN_MAX, MAIL_DRAIN_WAIT_MS};

/// The class of the facts inbound mail becomes.
pub(crate) const MESSAGE_FACT: &str = "message.received";

impl<F: FabricClient> Engine<F> {
    /// Drain the instance's mailbox into facts (see the module doc); 1 when it committed.
    pub(crate) async fn drain_mail(&self, wf: &Wf, loaded: &mut Loaded) -> Result<usize> {
        if wf.channels.is_empty() {
            return Ok(0);
        }
        let Some(work) = loaded.state.header.work.clone() else {
            return Ok(0);
        };
        let address = Address::Entry(work);
        // A mailbox cell that does not answer soon must not hold the step up.
        let bound = std::time::Duration::from_millis(MAIL_DRAIN_WAIT_MS);
        let read = self.fabric.mail_inbox(address.clone(), 0, MAIL_DRAIN_MAX);
        let mail = match tokio::time::timeout(bound, read).await {
            Ok(Ok(mail)) => mail,
            Ok(Err(e)) => return self.drain_failed(loaded, &address, e.to_string()).await,
            Err(_) => {
                let why = format!("the mailbox did not answer within {MAIL_DRAIN_WAIT_MS} ms");
                return self.drain_failed(loaded, &address, why).await;
            }
        };
        self.drain_failed
            .lock()
            .expect("drain lock")
            .remove(&loaded.state.header.id);
        let Some(last) = mail.last().map(|m| m.seq) else {
            return Ok(0);
        };
        let mut committed = None;
        for _ in 0..CONFLICT_RETRIES_MAX {
            let mut draft = Draft::new(&loaded.state, now_ms());
            admit(wf, &mut draft, &mail);
            if draft.events.is_empty() {
                committed = Some(0);
                break;
            }
            if self.commit(loaded, draft).await? {
                committed = Some(1);
                break;
            }
            *loaded = self.load(&loaded.state.header.id).await?;
        }
        let Some(committed) = committed else {
            return Ok(0);
        };
        let key = format!("{}/drain/{last}", loaded.state.header.id);
        if let Err(e) = self.fabric.mail_ack(address.clone(), last, key).await {
            // Admitted already: the next drain reads them again and admits none twice.
            tracing::warn!(mailbox = %address.code(), error = %e, "mail not acknowledged");
        }
        Ok(committed)
    }

    /// Whether the instance's workflow declares a channel: `whip run --wait` then looks at
    /// its mailbox every `MAIL_WAIT_LOOK_MS` while it waits (an arriving reply or message
    /// is admitted by the next step's drain).
    pub(crate) async fn listens_for_mail(&self, st: &State) -> bool {
        let Ok(program) = self.program(&st.header.program).await else {
            return false;
        };
        program
            .workflow(&st.header.workflow)
            .is_ok_and(|wf| !wf.channels.is_empty())
    }

    /// Send a message into instance `id`'s mailbox on its channel `channel` (the thread
    /// names the channel), as this engine's caller.
    pub async fn message(
        &self,
        id: &str,
        channel: &str,
        text: &str,
        directive: bool,
    ) -> Result<MailAnswer> {
        let st = self.load(id).await?.state;
        let program = self.program(&st.header.program).await?;
        let wf = program
            .workflow(&st.header.workflow)
            .map_err(super::RuntimeError::Invalid)?;
        if !wf.channels.contains_key(channel) {
            let known: Vec<&str> = wf.channels.keys().map(String::as_str).collect();
            return Err(super::RuntimeError::Invalid(format!(
                "workflow {} declares no channel `{channel}` (it has: {})",
                st.header.workflow,
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            )));
        }
        let Some(work) = st.header.work.clone() else {
            return Err(super::RuntimeError::Invalid(format!(
                "instance {id} has no registry entry, so no mailbox"
            )));
        };
        let body = MailBody {
            text: text.to_string(),
            conversation: Some(channel.to_string()),
            ..MailBody::default()
        };
        let kind = if directive {
            MailType::Directive
        } else {
            MailType::Inform
        };
        let key = format!("{id}/message/{}", super::now_ms());
        Ok(self
            .fabric
            .mail_send(Address::Entry(work), kind, body, key)
            .await?)
    }

    /// Record a failed drain (once in a row) and go on with the step.
    async fn drain_failed(
        &self,
        loaded: &mut Loaded,
        address: &Address,
        error: String,
    ) -> Result<usize> {
        tracing::warn!(mailbox = %address.code(), %error, "mail drain failed; the step goes on");
        let id = loaded.state.header.id.clone();
        let first = self.drain_failed.lock().expect("drain lock").insert(id);
        if !first {
            return Ok(0);
        }
        let mut draft = Draft::new(&loaded.state, now_ms());
        draft.emit(
            EventKind::MailDrainFailed,
            json!({"mailbox": address.code(), "error": error}),
        );
        Ok(usize::from(
            self.commit(loaded, draft).await.unwrap_or(false),
        ))
    }

    /// Run a `send via` effect: deliver it as the instance's owner, replies to the
    /// instance's mailbox. An ask waits for its reply until its deadline, then times out.
    pub(crate) async fn execute_mail(
        &self,
        header: &Header,
        e: &Effect,
        a: &MailArgs,
        idem: &str,
    ) -> Result<Ran> {
        if a.provider.is_some() {
            let local = self.local_messaging.as_deref();
            return Ok(super::messaging::send(
                a,
                (&header.id, &e.id),
                local,
                now_ms(),
            ));
        }
        let ask = e.kind() == EffectKind::MessageAsk;
        if ask && e.pass > 0 {
            let sent = e.output.as_ref().map_or(Value::Null, |o| o["sent"].clone());
            return Ok(Ran::Terminal {
                state: Terminal::TimedOut,
                output: json!({"outcome": "timed_out", "sent": sent}),
            });
        }
        let to = match a.to.as_deref().map(Address::parse) {
            Some(Ok(to)) => to,
            Some(Err(reason)) => return Ok(Ran::refused("bad_recipient", reason)),
            None => {
                return Ok(Ran::refused(
                    "bad_recipient",
                    "the channel has no recipient",
                ));
            }
        };
        let kind = match a.word {
            MailWord::Ask => MailType::Ask,
            MailWord::Directive => MailType::Directive,
            MailWord::Inform => MailType::Inform,
        };
        let body = MailBody {
            text: a.text.clone(),
            payload: (!a.payload.is_null()).then(|| a.payload.to_string()),
            in_reply_to: None,
            conversation: a.thread.clone(),
            reply_to: header.work.clone().map(Address::Entry),
        };
        Ok(
            match self
                .fabric
                .mail_send(to, kind, body, idem.to_string())
                .await?
            {
                MailAnswer::Delivered { id, .. } if ask => Ran::Asked {
                    sent: id,
                    until_ms: now_ms() + a.within_ms,
                },
                MailAnswer::Delivered { id, trust } => {
                    Ran::completed(json!({"outcome": "delivered", "id": id, "trust": trust.code()}))
                }
                MailAnswer::Refused { reason, message } => Ran::refused(&reason, message),
            },
        )
    }
}

/// Admit every message not admitted yet as a fact; a reply completes the ask it answers.
fn admit(wf: &Wf, draft: &mut Draft, mail: &[MailView]) {
    for m in mail {
        let seen = draft
            .state
            .facts
            .values()
            .any(|f| f.class == MESSAGE_FACT && f.value["id"] == json!(m.id));
        if seen {
            continue;
        }
        let asked = m
            .body
            .in_reply_to
            .as_deref()
            .and_then(|id| asking(&draft.state, id, &m.from))
            .cloned();
        let value = fact_value(m, channel_of(wf, asked.as_ref(), m));
        let fact = Fact {
            id: draft.next_id(0, "f"),
            class: MESSAGE_FACT.into(),
            value: value.clone(),
            live: true,
        };
        draft.emit(
            EventKind::FactDerived,
            json!({"fact": fact, "source": "mail"}),
        );
        if let Some(ask) = asked.filter(|a| !a.state.settled() && m.kind == MailType::Reply) {
            draft.emit(
                EventKind::EffectTerminal,
                json!({"id": ask.id, "run": Value::Null, "state": "completed",
                    "output": {"outcome": "replied", "reply": value}}),
            );
        }
    }
}

/// The ask effect that sent message `id`, when `from` may answer it: an ask to an agent
/// is answered only by that agent (anyone may name an ask's id in `in_reply_to`; the
/// proven sender is what counts). An ask to a team or an entry takes a reply from anyone,
/// whose name the reply carries.
fn asking<'s>(st: &'s State, id: &str, from: &str) -> Option<&'s Effect> {
    st.effects.values().find(|e| {
        let sent = e.output.as_ref().is_some_and(|o| o["sent"] == json!(id));
        let Args::MessageAsk(a) = &e.args else {
            return false;
        };
        let answerer = match a.to.as_deref().and_then(|to| to.strip_prefix("agent:")) {
            Some(agent) => agent == from,
            None => true,
        };
        sent && answerer
    })
}

/// The channel a message arrives on: the ask's it answers, else the channel its thread
/// names, else the channel to its sender, else the first receive-only channel, else none
/// (`""`).
fn channel_of(wf: &Wf, asked: Option<&Effect>, m: &MailView) -> String {
    if let Some(Args::MessageAsk(a)) = asked.map(|a| &a.args) {
        return a.channel.clone();
    }
    if let Some(named) = m
        .body
        .conversation
        .as_ref()
        .filter(|t| wf.channels.contains_key(*t))
    {
        return named.clone();
    }
    let sender = format!("agent:{}", m.from);
    let to_sender = wf.channels.iter().find(|(_, r)| {
        r.decl
            .to
            .as_ref()
            .is_some_and(|(kind, name)| format!("{}:{}", kind.name, name.value) == sender)
    });
    let inbox = || wf.channels.iter().find(|(_, r)| r.decl.to.is_none());
    to_sender
        .or_else(inbox)
        .map_or(String::new(), |(name, _)| name.clone())
}

fn fact_value(m: &MailView, channel: String) -> Value {
    let payload = m.body.payload.as_deref().map_or(Value::Null, |p| {
        serde_json::from_str(p).unwrap_or_else(|_| Value::String(p.to_string()))
    });
    let findings: Vec<&str> = m.screen.findings.iter().map(|f| f.kind.code()).collect();
    json!({
        "id": m.id, "channel": channel, "from": m.from, "type": m.kind.code(),
        "message_id": m.id, "sender": m.from, "provider": "fabric",
        "thread_id": m.body.conversation,
        "text": m.body.text, "payload": payload, "thread": m.body.conversation,
        "in_reply_to": m.body.in_reply_to, "trust": m.trust.code(),
        "verdict": m.screen.verdict.code(), "findings": findings, "at_ms": m.at_ms,
    })
}
