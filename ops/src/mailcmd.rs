//! `whip mail …`: typed mail between agents, teams and work-registry entries. Every call
//! acts for the CLI's agent (`--agent`); the server stamps it as the sender, and the board
//! decides who may direct, read, grant and release.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Subcommand, ValueEnum};
use serde_json::{Value, json};
use whip_cell::limits::WAIT_APPLIED_CALL_MS;
use whip_cell::{CellClient, Waiter};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_proto::v1::wait_applied_request::Subject;

use crate::Global;
use crate::output::{self, Table, time_cell, time_text};

/// The types a client sends (a server's `notice` is not among them).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum SendType {
    /// Information (the default).
    Inform,
    /// A question: the recipient answers with `whip mail reply`.
    Ask,
    /// An answer to a message (`--in-reply-to`).
    Reply,
    /// Re-tasks the recipient: only its parent, supervisor, lineage or a grantee.
    Directive,
}

impl SendType {
    fn wire(self) -> pb::MailType {
        match self {
            SendType::Inform => pb::MailType::Inform,
            SendType::Ask => pb::MailType::Ask,
            SendType::Reply => pb::MailType::Reply,
            SendType::Directive => pb::MailType::Directive,
        }
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum MailCommand {
    /// Send a message to TO: an agent, `team:NAME` or `entry:ID`.
    Send {
        to: String,
        #[arg(long = "type", value_enum, default_value = "inform")]
        kind: SendType,
        /// What it says. Repeated, each is a message of its own, all sent in one write
        /// (at most 64; each delivered or refused on its own, in order).
        #[arg(long, default_value = "")]
        text: Vec<String>,
        /// A JSON document carried with the text (with each text, when repeated).
        #[arg(long)]
        payload: Option<String>,
        /// The id of the message this answers (`agent:bob#3`).
        #[arg(long)]
        in_reply_to: Option<String>,
        /// A conversation name.
        #[arg(long)]
        thread: Option<String>,
    },
    /// Messages waiting in a mailbox (default: your own), oldest first.
    Inbox {
        /// `agent:NAME`, `team:NAME` or `entry:ID` (default: `--agent`'s).
        address: Option<String>,
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// Keep printing new messages as they arrive (one line each; with `--json` one
        /// object per line) until interrupted.
        #[arg(long)]
        follow: bool,
    },
    /// Take the waiting messages out of a mailbox: print them, then acknowledge them.
    Drain {
        address: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Acknowledge every message through --ack-through and take up to --max next ones in
    /// one call (default mailbox: your own). Each taken message stays hidden from other
    /// takes for --visibility, then comes back unless acknowledged (at least once).
    Take {
        /// `agent:NAME`, `team:NAME` or `entry:ID` (default: `--agent`'s).
        address: Option<String>,
        /// Acknowledge (remove) every message up to this sequence first.
        #[arg(long, value_name = "SEQ")]
        ack_through: Option<u64>,
        /// At most this many messages.
        #[arg(long, default_value_t = whip_cell::limits::MAIL_TAKE_DEFAULT)]
        max: u32,
        /// When none is waiting, wait up to this long for one (e.g. `10s`), waking on the
        /// mailbox cell's applies.
        #[arg(long, value_name = "DURATION", value_parser = output::parse_duration_ms)]
        wait: Option<u64>,
        /// How long the taken messages stay hidden from other takes (e.g. `30s`).
        #[arg(long, value_name = "DURATION", default_value = "30s",
            value_parser = output::parse_duration_ms)]
        visibility: u64,
    },
    /// Answer message ID (its sender gets a `reply` naming it).
    Reply {
        id: String,
        #[arg(long, default_value = "")]
        text: String,
        #[arg(long)]
        payload: Option<String>,
    },
    /// Allow SENDER to send directives to ADDRESS (its parent, supervisor or lineage only).
    Grant {
        address: String,
        #[arg(long)]
        sender: String,
    },
    /// Stop SENDER sending directives to ADDRESS.
    Revoke {
        address: String,
        #[arg(long)]
        sender: String,
    },
    /// Quarantined messages of a mailbox; `--release ID` delivers one (the mailbox's parent,
    /// supervisor or lineage only), `--drop ID` drops it (they, or the mailbox's reader).
    Quarantine {
        address: Option<String>,
        #[arg(long, value_name = "ID", conflicts_with = "drop")]
        release: Option<String>,
        #[arg(long, value_name = "ID")]
        drop: Option<String>,
    },
}

pub(crate) async fn mail(global: &Global, cmd: MailCommand) -> Result<ExitCode> {
    let session = crate::connect::session(global).await?;
    let session = crate::agent::authenticate(global, session).await?;
    let result = mail_on(global, &session.client, cmd).await;
    session.close().await;
    result
}

/// `mail send`: one message, or with several `--text`s a batch in one write.
async fn send_texts(global: &Global, c: &CellClient, cmd: MailCommand) -> Result<ExitCode> {
    let MailCommand::Send {
        to,
        kind,
        text,
        payload,
        in_reply_to,
        thread,
    } = cmd
    else {
        unreachable!("a send")
    };
    let payload = payload.map(|p| checked_json(&p)).transpose()?;
    let mut items = text.into_iter().map(|text| pb::MailSendItem {
        r#type: kind.wire().into(),
        text,
        payload: payload.clone(),
        in_reply_to: in_reply_to.clone(),
        thread: thread.clone(),
        reply_to: None,
    });
    if items.len() > 1 {
        let messages = items.collect();
        let request = pb::MailSendManyRequest {
            to,
            messages,
            idempotency_key: String::new(),
        };
        return Ok(sent_many(global, &c.mail_send_many(request).await?));
    }
    let one = items.next().unwrap_or_default();
    let request = pb::MailSendRequest {
        to,
        r#type: one.r#type,
        text: one.text,
        payload: one.payload,
        in_reply_to: one.in_reply_to,
        thread: one.thread,
        idempotency_key: String::new(),
        reply_to: None,
    };
    Ok(sent(global, &c.mail_send(request).await?))
}

fn own(global: &Global, address: Option<String>) -> String {
    address.unwrap_or_else(|| format!("agent:{}", crate::agent::agent_name(global)))
}

async fn mail_on(global: &Global, c: &CellClient, cmd: MailCommand) -> Result<ExitCode> {
    match cmd {
        cmd @ MailCommand::Send { .. } => send_texts(global, c, cmd).await,
        MailCommand::Inbox {
            address,
            after,
            follow: true,
        } => follow_inbox(global, c, own(global, address), after).await,
        MailCommand::Inbox { address, after, .. } => {
            let messages = inbox(c, own(global, address), after, 0, false).await?;
            print_messages(global, &messages);
            Ok(ExitCode::SUCCESS)
        }
        MailCommand::Drain { address, limit } => {
            drain(global, c, own(global, address), limit).await
        }
        MailCommand::Take {
            address,
            ack_through,
            max,
            wait,
            visibility,
        } => {
            let request = pb::MailTakeRequest {
                address: own(global, address),
                ack_through,
                max,
                visibility_ms: visibility,
                idempotency_key: String::new(),
            };
            crate::mailtake::take(global, c, request, wait.unwrap_or(0)).await
        }
        MailCommand::Reply { id, text, payload } => reply(global, c, id, text, payload).await,
        MailCommand::Grant { address, sender } => grant(global, c, address, sender, true).await,
        MailCommand::Revoke { address, sender } => grant(global, c, address, sender, false).await,
        MailCommand::Quarantine {
            address,
            release,
            drop,
        } => match (release, drop) {
            (Some(id), _) => released(global, c, id, true).await,
            (None, Some(id)) => released(global, c, id, false).await,
            (None, None) => {
                let messages = inbox(c, own(global, address), 0, 0, true).await?;
                print_messages(global, &messages);
                Ok(ExitCode::SUCCESS)
            }
        },
    }
}

fn checked_json(text: &str) -> Result<String> {
    let value: Value = serde_json::from_str(text).context("--payload is not JSON")?;
    Ok(value.to_string())
}

async fn inbox(
    c: &CellClient,
    address: String,
    after_seq: u64,
    limit: u32,
    quarantined: bool,
) -> Result<Vec<pb::MailMessage>> {
    let request = pb::MailInboxRequest {
        address,
        after_seq,
        limit,
        quarantined,
    };
    Ok(c.mail_inbox(request).await?.messages)
}

/// Print the messages after `after` and then each new one, waking on the mailbox cell's
/// applies (never polling), until SIGINT or SIGTERM (exit 0).
async fn follow_inbox(
    global: &Global,
    c: &CellClient,
    address: String,
    mut after: u64,
) -> Result<ExitCode> {
    let subject = Subject::Inbox(address.clone());
    let mut waiter = Waiter::mark(c, subject).await?;
    loop {
        for m in inbox(c, address.clone(), after, 0, false).await? {
            after = after.max(m.seq);
            match global.json {
                true => println!("{}", message_json(&m)),
                false => println!(
                    "{}\t{}\t{}\t{}\t{}",
                    m.id,
                    type_name(m.r#type),
                    m.from,
                    time_cell(m.at_ms),
                    m.text
                ),
            }
        }
        let wait = Duration::from_millis(WAIT_APPLIED_CALL_MS);
        tokio::select! {
            waited = waiter.next(wait) => { waited?; }
            () = crate::signals::stopped() => return Ok(ExitCode::SUCCESS),
        }
    }
}

async fn drain(global: &Global, c: &CellClient, address: String, limit: u32) -> Result<ExitCode> {
    let messages = inbox(c, address.clone(), 0, limit.max(1), false).await?;
    if let Some(last) = messages.last() {
        let request = pb::MailAckRequest {
            address,
            through_seq: last.seq,
            idempotency_key: String::new(),
        };
        let r = c.mail_ack(request).await?;
        if r.code() == Code::MailRefused {
            return Ok(refused(global, &r.reason, &r.message));
        }
    }
    print_messages(global, &messages);
    Ok(ExitCode::SUCCESS)
}

async fn reply(
    global: &Global,
    c: &CellClient,
    id: String,
    text: String,
    payload: Option<String>,
) -> Result<ExitCode> {
    let request = reply_request(c, id, text, payload).await?;
    Ok(sent(global, &c.mail_send(request).await?))
}

/// The reply to message `id` (read from its mailbox): to its `reply_to`, else its sender,
/// in its thread.
pub(crate) async fn reply_request(
    c: &CellClient,
    id: String,
    text: String,
    payload: Option<String>,
) -> Result<pb::MailSendRequest> {
    let (address, seq) = whip_board::mail::parse_id(&id).map_err(anyhow::Error::msg)?;
    let found = inbox(c, address.code(), seq - 1, 1, false).await?;
    let Some(original) = found.into_iter().find(|m| m.seq == seq) else {
        bail!(
            "no message {id} waits in {} (drained already?)",
            address.code()
        );
    };
    if original.reply_to.is_none() && (original.from == "operator" || original.from == "server") {
        bail!(
            "message {id} came from the {}, which has no mailbox",
            original.from
        );
    }
    let to = original
        .reply_to
        .clone()
        .unwrap_or_else(|| format!("agent:{}", original.from));
    Ok(pb::MailSendRequest {
        to,
        r#type: pb::MailType::Reply.into(),
        text,
        payload: payload.map(|p| checked_json(&p)).transpose()?,
        in_reply_to: Some(id),
        thread: original.thread,
        idempotency_key: String::new(),
        reply_to: None,
    })
}

async fn grant(
    global: &Global,
    c: &CellClient,
    address: String,
    sender: String,
    allow: bool,
) -> Result<ExitCode> {
    let request = pb::MailGrantRequest {
        address,
        sender,
        allow,
        idempotency_key: String::new(),
    };
    Ok(answered(global, c.mail_grant(request).await?))
}

async fn released(global: &Global, c: &CellClient, id: String, deliver: bool) -> Result<ExitCode> {
    let request = pb::MailReleaseRequest {
        id,
        deliver,
        idempotency_key: String::new(),
    };
    Ok(answered(global, c.mail_release(request).await?))
}

fn answered(global: &Global, r: pb::MailResponse) -> ExitCode {
    if r.code() == Code::MailRefused {
        return refused(global, &r.reason, &r.message);
    }
    let value = json!({"outcome": r.outcome, "id": r.id, "removed": r.removed});
    print(
        global,
        value,
        format!("{} {}", r.outcome, r.id).trim().to_string(),
    );
    ExitCode::SUCCESS
}

fn sent(global: &Global, r: &pb::MailSendResponse) -> ExitCode {
    if r.code() == Code::MailRefused {
        return refused(global, &r.reason, &r.message);
    }
    let value = json!({"outcome": r.outcome, "id": r.id, "trust": r.trust});
    print(
        global,
        value,
        format!("{} {} ({})", r.outcome, r.id, r.trust),
    );
    ExitCode::SUCCESS
}

/// A batched send's answers, one per message in order: `{"results": [...]}` (each as a
/// single send prints it), one line each in text. Exit 1 when any was refused; the others
/// were delivered all the same.
fn sent_many(global: &Global, r: &pb::MailSendManyResponse) -> ExitCode {
    let refused_any = r.results.iter().any(|m| m.code() == Code::MailRefused);
    let lines: Vec<String> = r
        .results
        .iter()
        .map(|m| match m.code() == Code::MailRefused {
            true => format!("refused ({}): {}", m.reason, m.message),
            false => format!("{} {} ({})", m.outcome, m.id, m.trust),
        })
        .collect();
    print(global, sent_many_json(r), lines.join("\n"));
    match refused_any {
        true => ExitCode::from(1),
        false => ExitCode::SUCCESS,
    }
}

/// A batched send's answers as JSON: `{"results": [...]}`, each delivered message's
/// outcome, id and trust, or a refused one's reason and error (the CLI's and MCP's).
pub(crate) fn sent_many_json(r: &pb::MailSendManyResponse) -> serde_json::Value {
    let one = |m: &pb::MailSendResponse| match m.code() == Code::MailRefused {
        true => json!({"outcome": "refused", "reason": m.reason, "error": m.message}),
        false => json!({"outcome": m.outcome, "id": m.id, "trust": m.trust}),
    };
    json!({"results": r.results.iter().map(one).collect::<Vec<_>>()})
}

/// A refusal: its stable reason, exit code 1.
pub(crate) fn refused(global: &Global, reason: &str, message: &str) -> ExitCode {
    if global.json {
        output::json(&json!({"outcome": "refused", "reason": reason, "error": message}));
    }
    eprintln!("refused ({reason}): {message}");
    ExitCode::from(1)
}

fn print(global: &Global, value: Value, text: String) {
    match global.json {
        true => output::json(&value),
        false => output::line(&text),
    }
}

pub(crate) fn type_name(number: i32) -> &'static str {
    whip_cell::mail_wire::mail_type(number).map_or("unknown", |kind| kind.code())
}

pub(crate) fn message_json(m: &pb::MailMessage) -> Value {
    let screen = m.screen.clone().unwrap_or_default();
    let findings: Vec<Value> = screen
        .findings
        .iter()
        .map(|f| json!({"kind": f.kind, "detail": f.detail}))
        .collect();
    let payload = m
        .payload
        .as_deref()
        .map(|p| serde_json::from_str::<Value>(p).unwrap_or_else(|_| Value::String(p.to_string())));
    json!({
        "id": m.id, "seq": m.seq, "to": m.to, "from": m.from, "type": type_name(m.r#type),
        "text": m.text, "payload": payload, "in_reply_to": m.in_reply_to, "thread": m.thread,
        "trust": m.trust, "at": time_text(m.at_ms), "reply_to": m.reply_to,
        "released_by": (!m.released_by.is_empty()).then_some(&m.released_by),
        "screen": {"verdict": screen.verdict, "findings": findings,
            "rules_version": screen.rules_version},
    })
}

pub(crate) fn print_messages(global: &Global, messages: &[pb::MailMessage]) {
    if global.json {
        output::json(&Value::Array(messages.iter().map(message_json).collect()));
        return;
    }
    let mut table = Table::new(&["id", "type", "from", "trust", "screen", "at", "text"]);
    for m in messages {
        let verdict = m.screen.as_ref().map_or("-", |s| s.verdict.as_str());
        table.row(vec![
            m.id.clone(),
            type_name(m.r#type).to_string(),
            m.from.clone(),
            m.trust.clone(),
            verdict.to_string(),
            time_cell(m.at_ms),
            m.text.clone(),
        ]);
    }
    table.print_or("(no mail)");
}
