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

/// `whip revise ID FILE [--root W] [--dry-run] [--cancel keep|queued|running]`.
#[derive(clap::Args, Debug)]
pub(crate) struct ReviseArgs {
    /// The instance.
    id: String,
    /// The candidate program.
    file: std::path::PathBuf,
    /// The candidate's root workflow when the file declares several.
    #[arg(long)]
    root: Option<String>,
    /// Only print the compatibility report.
    #[arg(long)]
    dry_run: bool,
    /// Apply the revision; what happens to the old version's work.
    #[arg(long, value_parser = ["keep", "queued", "running"])]
    cancel: Option<String>,
}

pub(crate) async fn revise(global: &Global, engine: &Eng, args: ReviseArgs) -> Result<ExitCode> {
    use whip_engine::runtime::revise::CancelPolicy;
    let program = whip_engine::runtime::Program::load(&args.file, args.root.as_deref())
        .map_err(|e| anyhow::anyhow!("the candidate does not check: {e}"))?;
    let policy = match (&args.cancel, args.dry_run) {
        (Some(p), false) => CancelPolicy::parse(p),
        _ => None,
    };
    let r = engine
        .revise(&args.id, program, policy)
        .await
        .map_err(engine_error)?;
    let lines = revision_lines(&r, args.cancel.is_none() && !args.dry_run);
    if global.json {
        crate::output::json(&serde_json::to_value(&r)?);
    } else {
        lines.iter().for_each(|l| crate::output::line(l));
    }
    if policy.is_some() && !r.compatible {
        anyhow::bail!("revision refused: {}", r.reasons.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}

fn revision_lines(r: &whip_engine::runtime::revise::Revision, hint: bool) -> Vec<String> {
    let verdict = if r.compatible {
        "compatible"
    } else {
        "incompatible"
    };
    let mut lines = vec![format!(
        "revise {} {} -> {} epoch {} -> {}: {verdict}",
        r.id, r.from_program, r.to_program, r.from_epoch, r.epoch
    )];
    lines.extend(r.reasons.iter().map(|x| format!("  refused: {x}")));
    for c in &r.schema {
        let field = c
            .field
            .as_deref()
            .map_or(String::new(), |f| format!(".{f}"));
        let types = match (&c.from, &c.to) {
            (Some(a), Some(b)) => format!(" {a} -> {b}"),
            (None, Some(b)) => format!(" {b}"),
            _ => String::new(),
        };
        lines.push(format!(
            "  schema {} {}{field}{types} live_facts={}",
            c.change, c.class, c.live_facts
        ));
    }
    lines.extend(
        r.rules_removed
            .iter()
            .map(|n| format!("  rule removed {n}")),
    );
    lines.extend(r.rules_added.iter().map(|n| format!("  rule added {n}")));
    for f in &r.in_flight {
        lines.push(format!(
            "  in flight {} {} ({}) of rule {}: keep={} queued={} running={}",
            f.effect, f.kind, f.state, f.rule, f.keep, f.queued, f.running
        ));
    }
    match (r.applied, r.event) {
        (Some(p), Some(seq)) => {
            lines.push(format!(
                "applied with --cancel {} at event #{seq}",
                p.as_str()
            ));
        }
        _ if hint && r.compatible => {
            lines.push("apply it with --cancel keep|queued|running".to_string());
        }
        _ => {}
    }
    lines
}

/// `whip recover ID`: one line per stopped run and what became of it.
pub(crate) async fn recover(global: &Global, engine: &Eng, id: &str) -> Result<ExitCode> {
    let r = engine.recover(id).await.map_err(engine_error)?;
    let mut lines: Vec<String> = r
        .runs
        .iter()
        .map(|x| {
            let how = serde_json::to_value(x.resolution)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let note = match x.resolution {
                whip_engine::runtime::recover::Resolution::Uncertain => {
                    format!(" ({})", whip_engine::runtime::recover::RECOVERY_UNCERTAIN)
                }
                _ => String::new(),
            };
            format!(
                "{} {} run {}: {how} -> {}{note}",
                x.effect, x.kind, x.run, x.state
            )
        })
        .collect();
    if lines.is_empty() {
        lines.push(format!("{id}: no stopped runs to recover"));
    }
    print(global, serde_json::to_value(&r)?, lines)
}
