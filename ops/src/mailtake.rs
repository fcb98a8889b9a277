//! `whip mail take`: acknowledge and take the next messages in one call, waiting for one
//! when asked. The board decides what a take returns and hides (`whip_board::mail_take`);
//! this only retries while nothing is waiting, woken by the mailbox cell's applies.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;
use whip_cell::{CellClient, Waiter};
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_proto::v1::wait_applied_request::Subject;

use crate::Global;
use crate::mailcmd::{message_json, print_messages, refused};
use crate::output;

/// Take once; while nothing is waiting and `wait_ms` has not passed, take again each time
/// the mailbox's cell applies something (or each wait call's bound, for windows that end).
/// The acknowledgement rides the first take only. SIGINT ends the wait with what was taken.
pub(crate) async fn take(
    global: &Global,
    c: &CellClient,
    request: pb::MailTakeRequest,
    wait_ms: u64,
) -> Result<ExitCode> {
    let started = Instant::now();
    let wait = Duration::from_millis(wait_ms);
    let mut waiter = match wait_ms {
        0 => None,
        _ => Some(Waiter::mark(c, Subject::Inbox(request.address.clone())).await?),
    };
    let first = c.mail_take(request.clone()).await?;
    if first.code() == Code::MailRefused {
        return Ok(refused(global, &first.reason, &first.message));
    }
    let removed = first.removed;
    let mut taken = first;
    let mut again = pb::MailTakeRequest {
        ack_through: None,
        ..request
    };
    while taken.messages.is_empty() {
        let left = wait.saturating_sub(started.elapsed());
        let Some(waiter) = waiter.as_mut().filter(|_| !left.is_zero()) else {
            break;
        };
        tokio::select! {
            waited = waiter.next(left) => { waited?; }
            () = crate::signals::stopped() => break,
        }
        again.idempotency_key.clear();
        taken = c.mail_take(again.clone()).await?;
        if taken.code() == Code::MailRefused {
            return Ok(refused(global, &taken.reason, &taken.message));
        }
    }
    print_taken(global, &again.address, removed, &taken);
    Ok(ExitCode::SUCCESS)
}

fn print_taken(global: &Global, address: &str, removed: u32, taken: &pb::MailTakeResponse) {
    if global.json {
        let messages: Vec<_> = taken.messages.iter().map(message_json).collect();
        output::json(&json!({
            "outcome": taken.outcome, "address": address, "removed": removed,
            "messages": messages, "visible_until_ms": taken.visible_until_ms,
            "visible_until": (taken.visible_until_ms > 0)
                .then(|| output::time_text(taken.visible_until_ms)),
        }));
        return;
    }
    output::line(&format!(
        "acknowledged {removed}, took {} from {address}",
        taken.messages.len()
    ));
    if !taken.messages.is_empty() {
        print_messages(global, &taken.messages);
        output::line(&format!(
            "hidden from other takes until {}",
            output::time_text(taken.visible_until_ms)
        ));
    }
}
