//! Sends through the messaging providers other than `fabric` (LANGUAGE-AGENTS.md §4.5):
//! `local` appends the message to the embedded store's `mailbox.jsonl`, `stdio` prints it
//! on the worker's stdout, `fixture` only answers; `desktop`, and `local` away from the
//! embedded store, are blocked `provider_config` before any run (the gate,
//! [`send_block`]). Each send answers the receipt of §3: message id, channel, provider,
//! `status "accepted"`, provider message id, thread id, destination, accepted-at.
//!
//! A `local` line is written before the run's commit, so a worker killed between the two
//! writes it again on the next run: delivery is at least once, each line carrying its
//! message id (the same on every run of the effect). The `local` inbound side is
//! `inbox.rs`.

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use super::effect::{BlockCategory, MailArgs, PolicyBlock};
use super::worker::Ran;
use crate::messaging::MessagingProvider;

/// The file a `local` channel appends to, in the embedded store's directory.
pub(crate) const LOCAL_MAILBOX_FILE: &str = "mailbox.jsonl";

/// Why a send through `a`'s provider cannot run here, if it cannot.
pub(crate) fn send_block(a: &MailArgs, local: Option<&Path>) -> Option<PolicyBlock> {
    let provider = MessagingProvider::from_code(a.provider.as_deref()?)?;
    let detail = match provider {
        MessagingProvider::Desktop => format!(
            "channel `{}`: provider `desktop` is outbound desktop notifications, which a \
             worker cannot show",
            a.channel
        ),
        MessagingProvider::Local if local.is_none() => format!(
            "channel `{}`: provider `local` writes to the embedded store's {LOCAL_MAILBOX_FILE}; \
             this worker runs against a cell",
            a.channel
        ),
        _ => return None,
    };
    Some(PolicyBlock {
        category: BlockCategory::ProviderConfig,
        detail,
    })
}

/// Send `a` through its provider for effect `effect` of instance `instance` at `now_ms`.
pub(crate) fn send(
    a: &MailArgs,
    (instance, effect): (&str, &str),
    local: Option<&Path>,
    now_ms: u64,
) -> Ran {
    let code = a.provider.as_deref().unwrap_or_default();
    let Some(provider) = MessagingProvider::from_code(code) else {
        return Ran::refused(
            "provider_config",
            format!("unknown messaging provider `{code}`"),
        );
    };
    let id = blake3::hash(format!("{instance}/{effect}").as_bytes()).to_hex();
    let message_id = format!("msg_{}", &id[..16]);
    let accepted_at = match provider {
        MessagingProvider::Fixture => String::new(),
        _ => whip_board::time_text(now_ms),
    };
    let delivered = match provider {
        MessagingProvider::Local => match local {
            Some(dir) => append_local(dir, a, &message_id, &accepted_at),
            None => Err("the local provider has no store here".to_string()),
        },
        MessagingProvider::Stdio => {
            println!("[messaging.stdio] channel={} text={}", a.channel, a.text);
            Ok(())
        }
        MessagingProvider::Fixture => Ok(()),
        MessagingProvider::Desktop | MessagingProvider::Fabric => {
            Err(format!("provider `{code}` does not send here"))
        }
    };
    match delivered {
        Ok(()) => Ran::completed(receipt(a, provider, &message_id, accepted_at)),
        Err(reason) => Ran::failed(reason),
    }
}

fn receipt(a: &MailArgs, provider: MessagingProvider, message_id: &str, at: String) -> Value {
    json!({
        "outcome": "accepted", "message_id": message_id, "channel": a.channel,
        "provider": provider.receipt(), "status": "accepted",
        "provider_message_id": message_id, "thread_id": a.thread,
        "destination": a.destination, "accepted_at": at,
    })
}

/// One line of `mailbox.jsonl` in `dir`.
fn append_local(dir: &Path, a: &MailArgs, message_id: &str, at: &str) -> Result<(), String> {
    let line = json!({
        "accepted_at": at, "channel": a.channel, "message_id": message_id,
        "provider": "local", "provider_message_id": message_id, "text": a.text,
    });
    let path = dir.join(LOCAL_MAILBOX_FILE);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    writeln!(file, "{line}").map_err(|e| format!("cannot write {}: {e}", path.display()))
}
