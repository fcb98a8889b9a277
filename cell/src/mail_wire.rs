//! Agent mail between the board's types and the wire (`whip.v1`): one place for every
//! conversion, used by the service, the fabric's client and the CLI. An unknown type,
//! trust, verdict or finding is an error, never a default.

use whip_board::mail::{Address, MailBody, MailType, MailView, Trust};
use whip_board::screen::{Finding, FindingKind, Screen, Verdict};
use whip_proto::v1 as pb;

/// The board's type for a wire type number; `None` for a number outside the closed set
/// (or unset).
pub fn mail_type(number: i32) -> Option<MailType> {
    match pb::MailType::try_from(number) {
        Ok(pb::MailType::Inform) => Some(MailType::Inform),
        Ok(pb::MailType::Ask) => Some(MailType::Ask),
        Ok(pb::MailType::Reply) => Some(MailType::Reply),
        Ok(pb::MailType::Directive) => Some(MailType::Directive),
        Ok(pb::MailType::Notice) => Some(MailType::Notice),
        Ok(pb::MailType::Unspecified) | Err(_) => None,
    }
}

/// The wire's number for a board type.
pub fn mail_type_pb(kind: MailType) -> pb::MailType {
    match kind {
        MailType::Inform => pb::MailType::Inform,
        MailType::Ask => pb::MailType::Ask,
        MailType::Reply => pb::MailType::Reply,
        MailType::Directive => pb::MailType::Directive,
        MailType::Notice => pb::MailType::Notice,
    }
}

fn malformed(what: &str, value: &str) -> String {
    format!("the server answered an unknown {what} {value:?}")
}

/// One stored message on the wire.
pub fn message_pb(view: MailView) -> pb::MailMessage {
    pb::MailMessage {
        id: view.id,
        seq: view.seq,
        to: view.to,
        from: view.from,
        r#type: mail_type_pb(view.kind).into(),
        text: view.body.text,
        payload: view.body.payload,
        in_reply_to: view.body.in_reply_to,
        thread: view.body.conversation,
        reply_to: view.body.reply_to.map(|a| a.code()),
        trust: view.trust.code().into(),
        screen: Some(pb::MailScreen {
            verdict: view.screen.verdict.code().into(),
            findings: view
                .screen
                .findings
                .into_iter()
                .map(|f| pb::MailFinding {
                    kind: f.kind.code().into(),
                    detail: f.detail,
                })
                .collect(),
            rules_version: view.screen.rules_version,
        }),
        at_ms: view.at_ms,
        released_by: view.released_by.unwrap_or_default(),
    }
}

/// A message as the server answered it; an unknown type, trust, verdict or finding is an
/// error, never a default.
pub fn message_view(m: pb::MailMessage) -> Result<MailView, String> {
    let kind = mail_type(m.r#type).ok_or_else(|| malformed("mail type", &m.r#type.to_string()))?;
    let screen = m.screen.unwrap_or_default();
    let findings = screen
        .findings
        .into_iter()
        .map(|f| {
            let kind = FindingKind::parse(&f.kind).ok_or_else(|| malformed("finding", &f.kind))?;
            Ok(Finding {
                kind,
                detail: f.detail,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(MailView {
        id: m.id,
        seq: m.seq,
        to: m.to,
        from: m.from,
        kind,
        body: MailBody {
            text: m.text,
            payload: m.payload,
            in_reply_to: m.in_reply_to,
            conversation: m.thread,
            reply_to: m
                .reply_to
                .map(|a| Address::parse(&a))
                .transpose()
                .map_err(|e| format!("a reply address: {e}"))?,
        },
        trust: Trust::parse(&m.trust).ok_or_else(|| malformed("trust", &m.trust))?,
        screen: Screen {
            verdict: Verdict::parse(&screen.verdict)
                .ok_or_else(|| malformed("verdict", &screen.verdict))?,
            findings,
            rules_version: screen.rules_version,
        },
        at_ms: m.at_ms,
        released_by: (!m.released_by.is_empty()).then_some(m.released_by),
    })
}
