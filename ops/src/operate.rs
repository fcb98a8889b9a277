//! Operating a running instance: `whip checkpoint|restore` (and the other repairs of the
//! seed's operations surface). Each calls one engine operation and prints its report.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;

use crate::Global;
use crate::run::{Eng, engine_error, print};

/// `whip checkpoint ID [--cut-id C]` → `{"cut_id": …}`.
pub(crate) async fn checkpoint(
    global: &Global,
    engine: &Eng,
    id: &str,
    cut_id: Option<&str>,
) -> Result<ExitCode> {
    let done = engine.checkpoint(id, cut_id).await.map_err(engine_error)?;
    let cut = &done.cut;
    let files = cut.files.as_ref().map_or_else(
        || "files=none".to_string(),
        |f| format!("files={} bytes={}", f.files, f.bytes),
    );
    let text = format!("{id} checkpoint {} at event #{} {files}", cut.id, cut.seq);
    let value = json!({"id": id, "cut_id": cut.id, "seq": cut.seq, "files": cut.files});
    print(global, value, vec![text])
}

/// `whip restore ID CUT` → `{"restored": CUT, "auto_checkpoint": …}`.
pub(crate) async fn restore(
    global: &Global,
    engine: &Eng,
    id: &str,
    cut: &str,
) -> Result<ExitCode> {
    let done = engine.restore(id, cut).await.map_err(engine_error)?;
    let mut lines = vec![format!(
        "{id} restored to {} (event #{}) at event #{}; head saved as {}",
        done.cut.id, done.cut.seq, done.seq, done.auto_checkpoint
    )];
    lines.extend(done.released.iter().map(|r| format!("released {r}")));
    let value = json!({
        "id": id, "restored": done.cut.id, "cut_seq": done.cut.seq, "event": done.seq,
        "auto_checkpoint": done.auto_checkpoint, "released": done.released,
    });
    print(global, value, lines)
}
