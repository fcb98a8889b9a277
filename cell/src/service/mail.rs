//! Agent mail's RPCs: translate between `whip.v1` and the board's mail commands. Who may
//! send, direct, read, grant and release is decided in `whip_board::mail`, in the apply or
//! the read snapshot; this file only refuses what cannot be decoded (a type number outside
//! the closed enum) and names the caller the transport proved. No request field names a
//! sender.

use tonic::{Request as GrpcRequest, Response, Status};
use whip_board::access::Caller;
use whip_board::mail::{self, Address, MailBody, MailItem, MailRefusal, MailType};
use whip_board::{Command, Outcome, Query, QueryResult};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use super::{CellApi, GrpcResult};
use crate::convert::answered;
use crate::limits::{MAIL_TAKE_DEFAULT, MAIL_VISIBILITY_MS_DEFAULT};

/// The board's type for a wire type number; anything outside the closed set (or unset) is
/// a decode failure, never passed through.
fn mail_type(number: i32) -> Result<MailType, Status> {
    crate::mail_wire::mail_type(number).ok_or_else(|| {
        Status::invalid_argument(format!(
            "mail type {number} is not one of inform (1), ask (2), reply (3), directive (4), \
             notice (5)"
        ))
    })
}

pub(super) fn address(text: &str) -> Result<Address, Status> {
    Address::parse(text).map_err(Status::invalid_argument)
}

/// A refusal's code, word, reason and message.
fn refused(refusal: &MailRefusal) -> (i32, String, String, String) {
    let (code, word) = answered(Code::MailRefused);
    (code, word, refusal.code().into(), refusal.to_string())
}

/// A mail outcome that is not a send's, on the wire.
fn mail_response(outcome: Outcome) -> Result<pb::MailResponse, Status> {
    let mut r = pb::MailResponse::default();
    match outcome {
        Outcome::MailAcked { removed, .. } => {
            (r.code, r.outcome) = answered(Code::MailAcked);
            r.removed = removed;
        }
        Outcome::MailGranted { allow, .. } => {
            let code = if allow {
                Code::MailGranted
            } else {
                Code::MailRevoked
            };
            (r.code, r.outcome) = answered(code);
        }
        Outcome::MailReleased { id, delivered } => {
            let code = if delivered {
                Code::MailReleased
            } else {
                Code::MailDropped
            };
            (r.code, r.outcome) = answered(code);
            r.id = id;
        }
        Outcome::MailRefused { refusal } => {
            (r.code, r.outcome, r.reason, r.message) = refused(&refusal);
        }
        other => return Err(Status::internal(format!("unexpected answer {other:?}"))),
    }
    Ok(r)
}

/// One message as the wire carries it (a send's or a batch item's fields).
struct Wire {
    r#type: i32,
    text: String,
    payload: Option<String>,
    in_reply_to: Option<String>,
    thread: Option<String>,
    reply_to: Option<String>,
}

/// A message for `to` from `caller`, decoded and screened by the external validator. The
/// validator judges the content; the state machine combines its answer. An anonymous send
/// is refused by the state machine whatever the content, so it never costs the validator a
/// call.
async fn item(caller: &Caller, to: &Address, wire: Wire) -> Result<MailItem, Status> {
    let kind = mail_type(wire.r#type)?;
    let body = MailBody {
        text: wire.text,
        payload: wire.payload,
        in_reply_to: wire.in_reply_to,
        conversation: wire.thread,
        reply_to: wire.reply_to.as_deref().map(address).transpose()?,
    };
    let external = match caller {
        Caller::Anonymous => None,
        _ => {
            let (to, text) = (to.code(), body.text.as_str());
            crate::screen_hook::external(&to, kind.code(), text, body.payload.as_deref()).await
        }
    };
    Ok(MailItem {
        kind,
        body,
        external,
    })
}

/// A send's outcome on the wire.
fn send_response(outcome: Outcome) -> Result<pb::MailSendResponse, Status> {
    let mut r = pb::MailSendResponse::default();
    match outcome {
        Outcome::MailDelivered { id, trust, .. } => {
            (r.code, r.outcome) = answered(Code::MailDelivered);
            (r.id, r.trust) = (id, trust.code().into());
        }
        Outcome::MailRefused { refusal } => {
            (r.code, r.outcome, r.reason, r.message) = refused(&refusal)
        }
        other => return Err(Status::internal(format!("unexpected answer {other:?}"))),
    }
    Ok(r)
}

impl CellApi {
    pub(super) async fn mail_send_rpc(
        &self,
        req: GrpcRequest<pb::MailSendRequest>,
    ) -> GrpcResult<pb::MailSendResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let to = address(&req.to)?;
        let wire = Wire {
            r#type: req.r#type,
            text: req.text,
            payload: req.payload,
            in_reply_to: req.in_reply_to,
            thread: req.thread,
            reply_to: req.reply_to,
        };
        let item = item(&caller, &to, wire).await?;
        let command = Command::MailSend {
            to,
            kind: item.kind,
            body: item.body,
            external: item.external,
        };
        let outcome = self.submit(&caller, req.idempotency_key, command).await?;
        Ok(Response::new(send_response(outcome)?))
    }

    pub(super) async fn mail_send_many_rpc(
        &self,
        req: GrpcRequest<pb::MailSendManyRequest>,
    ) -> GrpcResult<pb::MailSendManyResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let to = address(&req.to)?;
        let mut sends = Vec::with_capacity(req.messages.len());
        for m in req.messages {
            let wire = Wire {
                r#type: m.r#type,
                text: m.text,
                payload: m.payload,
                in_reply_to: m.in_reply_to,
                thread: m.thread,
                reply_to: m.reply_to,
            };
            sends.push(item(&caller, &to, wire).await?);
        }
        let command = Command::MailSendMany { to, sends };
        let results = match self.submit(&caller, req.idempotency_key, command).await? {
            Outcome::MailSentMany { outcomes } => outcomes
                .into_iter()
                .map(send_response)
                .collect::<Result<_, _>>()?,
            other => return Err(Status::internal(format!("unexpected answer {other:?}"))),
        };
        Ok(Response::new(pb::MailSendManyResponse { results }))
    }

    pub(super) async fn mail_inbox_rpc(
        &self,
        req: GrpcRequest<pb::MailInboxRequest>,
    ) -> GrpcResult<pb::MailInboxResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let query = Query::MailInbox {
            address: address(&req.address)?,
            after_seq: req.after_seq,
            limit: crate::convert::limit(req.limit),
            quarantined: req.quarantined,
        };
        match self.read(&caller, query).await? {
            QueryResult::Mail(messages) => Ok(Response::new(pb::MailInboxResponse {
                messages: messages
                    .into_iter()
                    .map(crate::mail_wire::message_pb)
                    .collect(),
            })),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }

    pub(super) async fn mail_ack_rpc(
        &self,
        req: GrpcRequest<pb::MailAckRequest>,
    ) -> GrpcResult<pb::MailResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let command = Command::MailAck {
            address: address(&req.address)?,
            through_seq: req.through_seq,
        };
        let outcome = self.submit(&caller, req.idempotency_key, command).await?;
        Ok(Response::new(mail_response(outcome)?))
    }

    pub(super) async fn mail_take_rpc(
        &self,
        req: GrpcRequest<pb::MailTakeRequest>,
    ) -> GrpcResult<pb::MailTakeResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let command = Command::MailTake {
            address: address(&req.address)?,
            ack_through: req.ack_through,
            max: if req.max == 0 {
                MAIL_TAKE_DEFAULT
            } else {
                req.max
            },
            visibility_ms: match req.visibility_ms {
                0 => MAIL_VISIBILITY_MS_DEFAULT,
                ms => ms,
            },
        };
        let mut r = pb::MailTakeResponse::default();
        match self.submit(&caller, req.idempotency_key, command).await? {
            Outcome::MailTaken {
                removed,
                messages,
                visible_until_ms,
                ..
            } => {
                (r.code, r.outcome) = answered(Code::MailTaken);
                r.removed = removed;
                r.messages = messages
                    .into_iter()
                    .map(crate::mail_wire::message_pb)
                    .collect();
                r.visible_until_ms = visible_until_ms;
            }
            Outcome::MailRefused { refusal } => {
                (r.code, r.outcome, r.reason, r.message) = refused(&refusal)
            }
            other => return Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
        Ok(Response::new(r))
    }

    pub(super) async fn mail_grant_rpc(
        &self,
        req: GrpcRequest<pb::MailGrantRequest>,
    ) -> GrpcResult<pb::MailResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let command = Command::MailGrant {
            address: address(&req.address)?,
            sender: req.sender,
            allow: req.allow,
        };
        let outcome = self.submit(&caller, req.idempotency_key, command).await?;
        Ok(Response::new(mail_response(outcome)?))
    }

    pub(super) async fn mail_release_rpc(
        &self,
        req: GrpcRequest<pb::MailReleaseRequest>,
    ) -> GrpcResult<pb::MailResponse> {
        let caller = self.caller_of(&req).await?;
        let req = req.into_inner();
        let (address, seq) = mail::parse_id(&req.id).map_err(Status::invalid_argument)?;
        let command = Command::MailRelease {
            address,
            seq,
            deliver: req.deliver,
        };
        let outcome = self.submit(&caller, req.idempotency_key, command).await?;
        Ok(Response::new(mail_response(outcome)?))
    }
}
