//! `whip kv watch`: a key's or a prefix's changes, one line per event, until stopped.
//!
//! The client follows the watch across member failures and range moves
//! ([`CellClient::follow`]); this file only prints. A stop signal ends the command with
//! status 0 after the events already received are printed.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use whip_cell::CellClient;
use whip_cell::client::{WatchBatch, WatchEnd};
use whip_proto::v1 as pb;

use crate::Global;
use crate::output;

/// Follow `key` (a prefix with `prefix`) from revision `from` (0: from now) and print each
/// event until a stop signal.
pub(crate) async fn kv_watch(
    global: &Global,
    client: &CellClient,
    (key, prefix): (String, bool),
    from: u64,
) -> Result<ExitCode> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(crate::limits::WATCH_QUEUE_MAX);
    let follow = client.follow((key.into_bytes(), prefix), from, tx);
    tokio::pin!(follow);
    let mut ended = None;
    loop {
        tokio::select! {
            batch = rx.recv() => match batch {
                Some(batch) => print_batch(global, &batch),
                None => break,
            },
            end = &mut follow, if ended.is_none() => ended = Some(end),
            () = crate::signals::stopped() => return Ok(ExitCode::SUCCESS),
        }
    }
    match ended {
        Some(Err(WatchEnd::Compacted { cell, oldest })) => Err(anyhow::anyhow!(
            "compacted: events below revision {oldest} are gone (cell {cell}); read the keys \
             and watch again with --from the revision after that read"
        )),
        Some(Err(WatchEnd::Failed(err))) => Err(err.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn print_batch(global: &Global, batch: &WatchBatch) {
    for event in &batch.events {
        let kind = match pb::watch_event::Kind::try_from(event.kind) {
            Ok(pb::watch_event::Kind::Delete) => "delete",
            _ => "put",
        };
        let key = String::from_utf8_lossy(&event.key);
        let value = String::from_utf8_lossy(&event.value);
        if global.json {
            output::json(&json!({
                "type": kind,
                "key": key,
                "value": value,
                "revision": event.revision,
                "version": event.version,
            }));
            continue;
        }
        let text = match kind {
            "delete" => format!("delete {key} (revision {})", event.revision),
            _ => format!("put {key} = {value} (revision {})", event.revision),
        };
        output::line(&text);
    }
}
