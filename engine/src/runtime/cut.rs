//! `whip checkpoint` and `whip restore`: coherent cuts of an instance, and rewinds to them
//! that only ever append.
//!
//! A cut names a position in the instance's event log (its `context.checkpoint` event) and,
//! when the instance has a workspace with the executor, a copy of its files taken at the
//! same moment. A restore first checkpoints the head (`auto-<seq>`), then rewinds both
//! planes as one operation and appends a `context.restored` marker; every later read folds
//! the marker as the cut's rows ([`State::rebuild`]), so no history is deleted.
//!
//! Coordination state outside the instance is not rewound. A lease or tracker claim the
//! instance took after the cut is released by the restore (the rewound instance never took
//! it); counter spends and ledger entries made after the cut stay spent and appended.
//!
//! Both refuse a terminal instance, and a restore refuses while an effect is running (its
//! outcome would land on rows the restore replaces): pause, let it settle, then restore.

use serde_json::json;
use whip_fabric::FabricClient;

use super::state::{Cut, Effect, EffectKind, EffectState, EventKind, State, WorkspaceDigest};
use super::{CONFLICT_RETRIES_MAX, Draft, Engine, Loaded, Result, invalid};
use crate::limits::EXECUTOR_ID_BYTES_MAX;

/// What `whip checkpoint` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpointed {
    /// The cut.
    pub cut: Cut,
}

/// What `whip restore` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The cut rewound to.
    pub cut: Cut,
    /// The checkpoint of the head taken first.
    pub auto_checkpoint: String,
    /// The sequence of the `context.restored` marker.
    pub seq: u64,
    /// Leases and tracker claims taken after the cut, now released.
    pub released: Vec<String>,
}

/// A cut id: the executor's id rule (it names a copy of the workspace there too).
fn check_cut_id(id: &str) -> Result<()> {
    if crate::executor::protocol::check_id("cut", id).is_err() {
        return invalid(format!(
            "cut id `{id}` must be 1 to {EXECUTOR_ID_BYTES_MAX} characters of A-Z a-z 0-9 _ - . \
             and not start with ."
        ));
    }
    Ok(())
}

fn refuse_terminal(st: &State, verb: &str) -> Result<()> {
    let h = &st.header;
    if h.status.is_terminal() {
        return invalid(format!(
            "instance {} is {}; a terminal instance cannot be {verb}",
            h.id, h.status
        ));
    }
    Ok(())
}

/// Emit the checkpoint of the draft's head as `cut`, with its files plane.
fn emit_checkpoint(
    draft: &mut Draft,
    cut: &str,
    auto: bool,
    files: Option<WorkspaceDigest>,
) -> Cut {
    let at_ms = draft.at_ms;
    let st = &draft.state;
    let facts = st.facts.values().filter(|f| f.live).count();
    let effects = st.effects.len();
    let cut = Cut {
        id: cut.to_string(),
        seq: 0,
        at_ms,
        files,
        auto,
    };
    draft.emit(
        EventKind::ContextCheckpoint,
        json!({"cut": cut, "facts": facts, "effects": effects, "by": "operator"}),
    );
    draft.state.cuts[&cut.id].clone()
}

/// Leases and tracker claims the head holds through effects the cut does not hold.
fn taken_after(head: &State, past: &State) -> Vec<Effect> {
    let holds = |e: &Effect| {
        let outcome = e.output.as_ref().and_then(|o| o.get("outcome"));
        e.state == EffectState::Completed
            && match e.kind() {
                EffectKind::Acquire => outcome.and_then(|o| o.as_str()) == Some("held"),
                EffectKind::Claim => e.output.as_ref().is_some_and(|o| o.get("issue").is_some()),
                _ => false,
            }
    };
    head.effects
        .values()
        .filter(|e| holds(e))
        .filter(|e| !past.effects.get(&e.id).is_some_and(holds))
        .cloned()
        .collect()
}

impl<F: FabricClient> Engine<F> {
    /// Capture a cut of the head as `cut_id` (a fresh `cut-<seq>` when `None`).
    pub async fn checkpoint(&self, id: &str, cut_id: Option<&str>) -> Result<Checkpointed> {
        if let Some(c) = cut_id {
            check_cut_id(c)?;
        }
        for _ in 0..CONFLICT_RETRIES_MAX {
            let mut loaded: Loaded = self.load(id).await?;
            refuse_terminal(&loaded.state, "checkpointed")?;
            let head = loaded.state.header.last_seq;
            let name = cut_id.map_or_else(|| format!("cut-{}", head + 1), str::to_string);
            if loaded.state.cuts.contains_key(&name) {
                return invalid(format!("instance {id} already has a cut {name}"));
            }
            let files = self.files_checkpoint(&loaded.state, &name).await?;
            let mut draft = Draft::new(&loaded.state, super::now_ms());
            let cut = emit_checkpoint(&mut draft, &name, false, files);
            if self.commit(&mut loaded, draft).await? {
                return Ok(Checkpointed { cut });
            }
        }
        invalid(format!(
            "instance {id} is too busy to checkpoint, try again"
        ))
    }

    /// Rewind instance `id` to `cut` (after checkpointing the head).
    pub async fn restore(&self, id: &str, cut: &str) -> Result<Restored> {
        let mut files: Option<(String, Option<WorkspaceDigest>)> = None;
        for _ in 0..CONFLICT_RETRIES_MAX {
            let mut loaded: Loaded = self.load(id).await?;
            let head = loaded.state.clone();
            refuse_terminal(&head, "restored")?;
            let Some(target) = head.cuts.get(cut).cloned() else {
                let known: Vec<&str> = head.cuts.keys().map(String::as_str).collect();
                let known = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return invalid(format!("instance {id} has no cut {cut} (cuts: {known})"));
            };
            if let Some(e) = head
                .effects
                .values()
                .find(|e| e.state == EffectState::Running)
            {
                return invalid(format!(
                    "effect {} is running; pause the instance and let it settle before \
                     restoring",
                    e.id
                ));
            }
            let events = self.events(id).await?;
            if events.len() as u64 != head.header.last_seq {
                continue;
            }
            let past = State::rebuild(&events[..target.seq as usize]);
            // The files move once: a retry after losing a commit race keeps that copy.
            let (auto_name, auto_files) = match files.take() {
                Some(done) => done,
                None => {
                    let name = format!("auto-{}", head.header.last_seq);
                    let saved = self.files_rewind(&head, &target, &name).await?;
                    (name, saved)
                }
            };
            files = Some((auto_name.clone(), auto_files.clone()));
            let mut draft = Draft::new(&head, super::now_ms());
            let auto = emit_checkpoint(&mut draft, &auto_name, true, auto_files);
            draft.emit(
                EventKind::ContextRestored,
                json!({"cut": cut, "cut_seq": target.seq, "auto_checkpoint": auto.id,
                    "files": target.files, "by": "operator"}),
            );
            let released = taken_after(&head, &past);
            draft.state.rewind(past);
            if self.commit(&mut loaded, draft).await? {
                let names = self.release_taken(id, &released).await?;
                return Ok(Restored {
                    cut: target,
                    auto_checkpoint: auto.id,
                    seq: loaded.state.header.last_seq,
                    released: names,
                });
            }
        }
        invalid(format!("instance {id} is too busy to restore, try again"))
    }

    /// The files plane of a new cut: the executor copies the instance's workspace. Without
    /// an executor, an instance that never ran `exec` has no files; one that did cannot be
    /// checkpointed coherently, and is refused.
    async fn files_checkpoint(&self, st: &State, cut: &str) -> Result<Option<WorkspaceDigest>> {
        if !self.executor.is_configured() {
            if st.effects.values().any(|e| e.kind() == EffectKind::Exec) {
                return invalid(format!(
                    "instance {} ran exec: its workspace lives with the executor; set \
                     WHIP_EXECUTOR_URL (and WHIP_EXECUTOR_TOKEN) to checkpoint its files",
                    st.header.id
                ));
            }
            return Ok(None);
        }
        match self.executor.checkpoint(&st.header.id, cut).await {
            Ok(digest) => Ok(Some(digest)),
            Err(e) => invalid(format!("the executor could not copy the workspace: {e}")),
        }
    }

    /// Rewind the files plane to `target`'s, after copying the head's as `auto`; the
    /// restored files must be the ones the cut recorded (the coherence check).
    async fn files_rewind(
        &self,
        head: &State,
        target: &Cut,
        auto: &str,
    ) -> Result<Option<WorkspaceDigest>> {
        let Some(want) = &target.files else {
            return self.files_checkpoint(head, auto).await;
        };
        let id = &head.header.id;
        let saved = self.files_checkpoint(head, auto).await?;
        if saved.is_none() {
            return invalid(format!(
                "cut {} holds workspace files: set WHIP_EXECUTOR_URL to restore them",
                target.id
            ));
        }
        let got = match self.executor.restore(id, &target.id).await {
            Ok(got) => got,
            Err(e) => return invalid(format!("the executor could not restore the files: {e}")),
        };
        if &got != want {
            return invalid(format!(
                "the restored workspace of cut {} does not match what it recorded ({} files, \
                 digest {}; found {} files, digest {}): the log was not rewound, and the \
                 executor keeps the head's files as cut {auto}",
                target.id, want.files, want.digest, got.files, got.digest
            ));
        }
        Ok(saved)
    }

    /// Release what the rewound instance never took: leases by their resource, tracker
    /// claims by their issue.
    async fn release_taken(&self, id: &str, taken: &[Effect]) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut issues = Vec::new();
        for e in taken {
            if e.kind() == EffectKind::Claim {
                if let Some(issue) = e.output.as_ref().and_then(|o| o["issue"].as_str()) {
                    issues.push(issue.to_string());
                    names.push(format!("claim {issue}"));
                }
                continue;
            }
            let Some(lease) = e.args.lease().map(super::worker::lease_resource) else {
                continue;
            };
            names.push(format!(
                "lease {}::{}/{}",
                lease.owner, lease.name, lease.key
            ));
            let idem = format!("{id}/restore/{}/a{}", e.id, e.attempt);
            self.fabric
                .lease_release(lease, id.to_string(), idem)
                .await?;
        }
        if !issues.is_empty() {
            self.issue_release_claims(id, &issues).await?;
        }
        Ok(names)
    }
}
