//! `whip revise`: move a running instance to a new version of its program, append-only.
//!
//! The compatibility report comes first (`--dry-run`): schema changes against the instance's
//! live facts, rules removed and added, and every in-flight effect with what each cancel
//! policy would do to it. A revision is compatible when the candidate keeps the instance's
//! root workflow (v0 revises within the same root) and no live fact would stop fitting its
//! class: a class with live facts may not lose a field, change a field's type, gain a
//! required field, or disappear. Applying appends `workflow.revision_activated` with a new
//! epoch; work that exists keeps the version that made it (its `after` continuations are
//! pinned to it), and every later commit uses the new version.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::json;
use whip_fabric::FabricClient;

use super::program::Program;
use super::state::{Effect, EffectKind, EffectState, EventKind, State};
use super::{CONFLICT_RETRIES_MAX, Draft, Engine, Result, invalid};
use crate::check::model::Wf;
use crate::check::types::Ty;

/// What happens to the old version's work (`--cancel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelPolicy {
    /// The work stays claimable and runs.
    Keep,
    /// Queued, blocked and claimable effects are cancelled (terminal).
    Queued,
    /// As `queued`, and a cancel is requested of each running effect (a request: the run
    /// still records its outcome through the usual lifecycle).
    Running,
}

impl CancelPolicy {
    /// `keep`, `queued` or `running`.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelPolicy::Keep => "keep",
            CancelPolicy::Queued => "queued",
            CancelPolicy::Running => "running",
        }
    }

    /// Parse `keep|queued|running`.
    pub fn parse(text: &str) -> Option<CancelPolicy> {
        match text {
            "keep" => Some(CancelPolicy::Keep),
            "queued" => Some(CancelPolicy::Queued),
            "running" => Some(CancelPolicy::Running),
            _ => None,
        }
    }
}

/// One schema change between the versions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SchemaChange {
    /// The class.
    pub class: String,
    /// `class_added`, `class_removed`, `field_added`, `field_removed`, `field_type_changed`.
    pub change: &'static str,
    /// The field, for field changes.
    pub field: Option<String>,
    /// The field's type in each version, where it has one.
    pub from: Option<String>,
    /// The new type.
    pub to: Option<String>,
    /// Live facts of the class.
    pub live_facts: usize,
    /// True when a live fact would no longer fit.
    pub breaking: bool,
}

/// An effect of the old version that is not settled, and what each policy does to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InFlight {
    /// `x…`
    pub effect: String,
    /// Its kind.
    pub kind: EffectKind,
    /// The rule that requested it.
    pub rule: String,
    /// Its state now.
    pub state: EffectState,
    /// Under `keep`, `queued`, `running`: `runs`, `cancelled` or `cancel_requested`.
    pub keep: &'static str,
    /// Under `queued`.
    pub queued: &'static str,
    /// Under `running`.
    pub running: &'static str,
}

/// The compatibility report (and, when applied, what was done).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Revision {
    /// The instance.
    pub id: String,
    /// The root workflow of the instance.
    pub workflow: String,
    /// May it be applied?
    pub compatible: bool,
    /// Why not, when not.
    pub reasons: Vec<String>,
    /// The version it runs and the candidate.
    pub from_program: String,
    /// The candidate version.
    pub to_program: String,
    /// Epoch now and after applying.
    pub from_epoch: u64,
    /// The epoch the revision activates.
    pub epoch: u64,
    /// Schema changes.
    pub schema: Vec<SchemaChange>,
    /// Rules only the old version has (their pending continuations finish on it).
    pub rules_removed: Vec<String>,
    /// Rules only the candidate has.
    pub rules_added: Vec<String>,
    /// Unsettled effects of the old version.
    pub in_flight: Vec<InFlight>,
    /// The policy applied (`None` on a dry run).
    pub applied: Option<CancelPolicy>,
    /// The `workflow.revision_activated` event, when applied.
    pub event: Option<u64>,
}

fn required(ty: &Ty) -> bool {
    !matches!(ty, Ty::Optional(_) | Ty::Any | Ty::Null)
}

fn live_by_class(st: &State) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for f in st.facts.values().filter(|f| f.live) {
        *counts.entry(f.class.as_str()).or_default() += 1;
    }
    counts
}

/// Schema changes of the classes either version declares.
fn schema_changes(old: &Program, new: &Program, st: &State) -> Vec<SchemaChange> {
    let live = live_by_class(st);
    let (a, b) = (&old.model.classes, &new.model.classes);
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out = Vec::new();
    for name in names {
        let live_facts = live.get(name.as_str()).copied().unwrap_or(0);
        let change = |change, field: Option<&str>, from: Option<&Ty>, to: Option<&Ty>| {
            let breaking = live_facts > 0
                && match change {
                    "class_added" => false,
                    "field_added" => to.is_some_and(required),
                    _ => true,
                };
            SchemaChange {
                class: name.clone(),
                change,
                field: field.map(str::to_string),
                from: from.map(Ty::to_string),
                to: to.map(Ty::to_string),
                live_facts,
                breaking,
            }
        };
        let (Some(before), Some(after)) = (a.get(name), b.get(name)) else {
            let kind = if a.contains_key(name) {
                "class_removed"
            } else {
                "class_added"
            };
            out.push(change(kind, None, None, None));
            continue;
        };
        let old_fields: BTreeMap<&str, &Ty> =
            before.fields.iter().map(|(f, t)| (f.as_str(), t)).collect();
        let new_fields: BTreeMap<&str, &Ty> =
            after.fields.iter().map(|(f, t)| (f.as_str(), t)).collect();
        for (field, ty) in &old_fields {
            match new_fields.get(field) {
                None => out.push(change("field_removed", Some(field), Some(ty), None)),
                Some(to) if to != ty => {
                    out.push(change(
                        "field_type_changed",
                        Some(field),
                        Some(ty),
                        Some(to),
                    ));
                }
                Some(_) => {}
            }
        }
        for (field, ty) in new_fields
            .iter()
            .filter(|(f, _)| !old_fields.contains_key(*f))
        {
            out.push(change("field_added", Some(field), None, Some(ty)));
        }
    }
    out
}

fn rule_names(wf: &Wf) -> BTreeSet<String> {
    wf.rules
        .iter()
        .map(|(_, r, _)| r.name.name.clone())
        .collect()
}

/// Unsettled effects; a running one whose run lease ran out is claimable, not running.
fn in_flight(st: &State, now_ms: u64) -> Vec<InFlight> {
    st.effects
        .values()
        .filter(|e| !e.state.settled())
        .map(|e: &Effect| {
            let running = e.state == EffectState::Running
                && e.run.as_ref().is_some_and(|(_, until)| *until > now_ms);
            InFlight {
                effect: e.id.clone(),
                kind: e.kind(),
                rule: e.rule.clone(),
                state: e.state,
                keep: "runs",
                queued: if running { "runs" } else { "cancelled" },
                running: if running {
                    "cancel_requested"
                } else {
                    "cancelled"
                },
            }
        })
        .collect()
}

/// The report of revising `st` (which runs `old`) to `new`, rooted at `root`.
fn report(st: &State, (old, new): (&Program, &Program), root: &Wf, now_ms: u64) -> Revision {
    let h = &st.header;
    let mut reasons = Vec::new();
    if root.name.name != h.workflow {
        reasons.push(format!(
            "the instance runs workflow `{}` and the candidate's root is `{}`: v0 revises \
             within the same root workflow",
            h.workflow, root.name.name
        ));
    }
    let schema = schema_changes(old, new, st);
    for c in schema.iter().filter(|c| c.breaking) {
        let field = c
            .field
            .as_deref()
            .map_or(String::new(), |f| format!(" field `{f}`"));
        reasons.push(format!(
            "{} of class `{}`{field} breaks {} live fact(s): a fact migration is not supported",
            c.change.replace('_', " "),
            c.class,
            c.live_facts
        ));
    }
    let (mut removed, mut added) = (BTreeSet::new(), BTreeSet::new());
    if let Ok(before) = old.workflow(&h.workflow) {
        let (a, b) = (rule_names(before), rule_names(root));
        removed = a.difference(&b).cloned().collect();
        added = b.difference(&a).cloned().collect();
    }
    Revision {
        id: h.id.clone(),
        workflow: h.workflow.clone(),
        compatible: reasons.is_empty(),
        reasons,
        from_program: old.version.clone(),
        to_program: new.version.clone(),
        from_epoch: h.epoch,
        epoch: h.epoch + 1,
        schema,
        rules_removed: removed.into_iter().collect(),
        rules_added: added.into_iter().collect(),
        in_flight: in_flight(st, now_ms),
        applied: None,
        event: None,
    }
}

/// Firing keys (`<rule index>:<facts>`) under the new version's rule order: a rule keeps
/// its firings by name wherever it moved; a removed rule's move aside (`~<name>:<facts>`) so
/// a new rule at its index does not inherit them.
fn rekeyed(st: &State, root: &Wf) -> Vec<(String, String)> {
    let index: BTreeMap<&str, usize> = root
        .rules
        .iter()
        .enumerate()
        .map(|(i, (_, r, _))| (r.name.name.as_str(), i))
        .collect();
    st.firings
        .values()
        .filter_map(|f| {
            let (_, facts) = f.key.split_once(':')?;
            let to = match index.get(f.rule.as_str()) {
                Some(i) => format!("{i}:{facts}"),
                None => format!("~{}:{facts}", f.rule),
            };
            (to != f.key).then(|| (f.key.clone(), to))
        })
        .collect()
}

/// Append the activation and the policy's cancels to `draft`.
fn emit_activation(
    draft: &mut Draft,
    r: &Revision,
    rekey: &[(String, String)],
    policy: CancelPolicy,
) {
    let diagnostics: Vec<String> = r
        .schema
        .iter()
        .map(|c| format!("{} {}", c.change, c.class))
        .chain(r.rules_removed.iter().map(|n| format!("rule_removed {n}")))
        .chain(r.rules_added.iter().map(|n| format!("rule_added {n}")))
        .collect();
    draft.emit(
        EventKind::RevisionActivated,
        json!({"from_program": r.from_program, "to_program": r.to_program,
            "from_epoch": r.from_epoch, "epoch": r.epoch, "policy": policy,
            "diagnostics": diagnostics, "rekey": rekey, "by": "operator"}),
    );
    if policy == CancelPolicy::Keep {
        return;
    }
    for f in &r.in_flight {
        if f.queued == "runs" {
            if policy == CancelPolicy::Running {
                draft.emit(
                    EventKind::EffectCancelRequested,
                    json!({"id": f.effect, "reason": "revised (cancel running)"}),
                );
            }
            continue;
        }
        draft.emit(
            EventKind::EffectCancelled,
            json!({"id": f.effect, "reason": "revised (cancel queued)"}),
        );
    }
}

impl<F: FabricClient> Engine<F> {
    /// Report on revising instance `id` to `candidate` (its root workflow is the one
    /// revised); with `policy`, apply it when compatible.
    pub async fn revise(
        &self,
        id: &str,
        candidate: Program,
        policy: Option<CancelPolicy>,
    ) -> Result<Revision> {
        let candidate: Arc<Program> = self.add_program(candidate);
        let root = candidate.root().map_err(super::RuntimeError::Invalid)?;
        for _ in 0..CONFLICT_RETRIES_MAX {
            let mut loaded = self.load(id).await?;
            let st = &loaded.state;
            if st.header.status.is_terminal() {
                return invalid(format!(
                    "instance {id} is {}; a terminal instance cannot be revised",
                    st.header.status
                ));
            }
            let old = self.program(&st.header.program).await?;
            let mut revision = report(st, (&old, &candidate), root, super::now_ms());
            let Some(policy) = policy.filter(|_| revision.compatible) else {
                return Ok(revision);
            };
            self.store_program(&candidate).await?;
            let mut draft = Draft::new(st, super::now_ms());
            let rekey = rekeyed(st, root);
            emit_activation(&mut draft, &revision, &rekey, policy);
            if self.commit(&mut loaded, draft).await? {
                revision.applied = Some(policy);
                revision.event = Some(loaded.state.header.last_seq);
                return Ok(revision);
            }
        }
        invalid(format!("instance {id} is too busy to revise, try again"))
    }
}
