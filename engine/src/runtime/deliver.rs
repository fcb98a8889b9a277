//! `whip message ID --channel C --text T [--by S] [--program F]`: one message into an
//! instance on one of its channels, admitted at once (LANGUAGE-AGENTS.md §6: "delivered
//! message on `C` to ID at event #N").
//!
//! - A `local` channel: the line `{text, sender}` is appended to the embedded store's
//!   `inbox.<C>.jsonl` under an exclusive lock (so two senders never share a line number),
//!   then admitted as the inbox's pass admits any line (`inbox.rs`: screened, untrusted).
//!   `--by` is the line's `sender`, a label the file's writer chooses, trusted by no one.
//! - A `fabric` channel: typed mail from the caller to the instance's mailbox
//!   ([`Engine::message`]), then a drain. The sender is who the caller is; `--by` is refused
//!   there, so no argument can name another principal. A drain the caller may not make
//!   leaves the mail for the instance's next step (no event yet).
//!
//! `--program F` names the source the caller believes the instance runs: a different
//! source is refused before anything is sent.

use whip_fabric::{FabricClient, MailAnswer};

use super::state::EventKind;
use super::{Engine, Result, RuntimeError};
use crate::messaging::MessagingProvider;

/// One message to deliver.
#[derive(Clone, Debug, Default)]
pub struct Message {
    /// The channel.
    pub channel: String,
    /// The text.
    pub text: String,
    /// `--by`: the sender label of a local channel's line.
    pub by: Option<String>,
    /// A directive instead of an inform (fabric channels only).
    pub directive: bool,
    /// `--program F`'s source text, when given.
    pub program: Option<String>,
}

/// How a delivery ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Delivered: the message's id, its trust, and the event that admitted it (`None`
    /// when the caller could not drain the mailbox: the next step admits it).
    Delivered {
        /// The message id.
        id: String,
        /// Its trust (`untrusted`, `authority`, …).
        trust: String,
        /// The admitting event's sequence number.
        event: Option<u64>,
    },
    /// The mailbox refused the mail.
    Refused {
        /// The refusal's code.
        reason: String,
        /// Why.
        message: String,
    },
}

impl<F: FabricClient> Engine<F> {
    /// Deliver `m` to instance `id` (see the module doc).
    pub async fn deliver(&self, id: &str, m: &Message) -> Result<Delivery> {
        let invalid = |why: String| Err(RuntimeError::Invalid(why));
        let mut loaded = self.load(id).await?;
        let status = loaded.state.header.status;
        if status.is_terminal() {
            return invalid(format!("instance {id} is {status}: it takes no messages"));
        }
        let program = self.program(&loaded.state.header.program).await?;
        if m.program
            .as_ref()
            .is_some_and(|p| *p != program.source.text)
        {
            return invalid(format!("--program is not the source instance {id} runs"));
        }
        let wf =
            (program.workflow(&loaded.state.header.workflow)).map_err(RuntimeError::Invalid)?;
        let Some(channel) = wf.channels.get(&m.channel) else {
            return invalid(format!(
                "workflow {} declares no channel `{}`",
                loaded.state.header.workflow, m.channel
            ));
        };
        match MessagingProvider::from_code(channel.decl.provider_name()) {
            Some(MessagingProvider::Local) => {
                let Some(dir) = self.local_messaging.as_deref() else {
                    return invalid(format!(
                        "channel `{}` is local: its inbox is beside the embedded store, and \
                         this runs against a cell",
                        m.channel
                    ));
                };
                if m.directive {
                    return invalid("a local channel takes informs, not directives".into());
                }
                let line = super::inbox::append(dir, &m.channel, &m.text, m.by.as_deref())
                    .map_err(|e| RuntimeError::Invalid(format!("the inbox: {e}")))?;
                self.drain_local(wf, &mut loaded).await?;
                let message_id = super::inbox::message_id(&m.channel, line);
                if let Some(reason) = super::inbox::refusal(&loaded.state, &message_id) {
                    return Ok(Delivery::Refused {
                        reason: "inbox_line".into(),
                        message: reason,
                    });
                }
                let event = self.admitted_at(id, "message_id", &message_id).await?;
                let trust = "untrusted".to_string();
                Ok(Delivery::Delivered {
                    id: message_id,
                    trust,
                    event,
                })
            }
            Some(MessagingProvider::Fabric) => self.deliver_mail(id, m, (wf, &mut loaded)).await,
            _ => invalid(format!(
                "channel `{}`'s provider `{}` takes no inbound messages here",
                m.channel,
                channel.decl.provider_name()
            )),
        }
    }

    async fn deliver_mail(
        &self,
        id: &str,
        m: &Message,
        (wf, loaded): (&crate::check::model::Wf, &mut super::Loaded),
    ) -> Result<Delivery> {
        if m.by.is_some() {
            return Err(RuntimeError::Invalid(
                "--by labels a local channel's line; on a fabric channel the sender is who \
                 you are (--agent)"
                    .into(),
            ));
        }
        let (mail, trust) = match self.message(id, &m.channel, &m.text, m.directive).await? {
            MailAnswer::Delivered { id, trust } => (id, trust.code().to_string()),
            MailAnswer::Refused { reason, message } => {
                return Ok(Delivery::Refused { reason, message });
            }
        };
        if let Err(e) = self.drain_mail(wf, loaded).await {
            tracing::info!(instance = %id, error = %e, "delivered; the next step admits it");
        }
        let event = self.admitted_at(id, "id", &mail).await?;
        Ok(Delivery::Delivered {
            id: mail,
            trust,
            event,
        })
    }

    /// The event of `id`'s log that admitted the message whose fact has `field` = `value`.
    async fn admitted_at(&self, id: &str, field: &str, value: &str) -> Result<Option<u64>> {
        let events = self.events(id).await?;
        let admitted = events.iter().rev().find(|e| {
            e.kind == EventKind::FactDerived
                && e.data["fact"]["class"] == super::mail::MESSAGE_FACT
                && e.data["fact"]["value"][field] == value
        });
        Ok(admitted.map(|e| e.seq))
    }
}
