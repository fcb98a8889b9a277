//! Direct invariant checks for the workloads that need no search: board (no lost or
//! phantom task, exactly-once fenced completion), ledger (no gap, no
//! duplicate, no loss of an acknowledged seq, real-time order), counter (never over the cap
//! in a period, no lost ok consume, no phantom consume) and lease (never more live holders
//! than slots, judged by fences and deadlines alone).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::history::{Kind, Op, format_ops};
use super::models::{str_at, u64_at};

/// One broken invariant with the operations that show it.
#[derive(Clone, Debug)]
pub struct Violation {
    /// The workload.
    pub workload: String,
    /// The key (partition, counter key, lease key, register key).
    pub key: String,
    /// What is wrong, with the numbers.
    pub message: String,
    /// The smallest sub-history that shows it, as JSON lines.
    pub history: String,
}

fn violation(workload: &str, key: &str, message: String, ops: &[&Op]) -> Violation {
    Violation {
        workload: workload.to_string(),
        key: key.to_string(),
        message,
        history: format_ops(ops),
    }
}

fn by_key<'a>(ops: &'a [Op], fs: &[&str]) -> BTreeMap<String, Vec<&'a Op>> {
    let mut out: BTreeMap<String, Vec<&Op>> = BTreeMap::new();
    for op in ops.iter().filter(|op| fs.contains(&op.f.as_str())) {
        out.entry(op.key.clone()).or_default().push(op);
    }
    out
}

/// Check ledger appends against the final listing of each partition (`f = "list"`).
pub fn check_ledger(ops: &[Op]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (key, ops) in by_key(ops, &["append", "list"]) {
        if let Err(v) = check_partition(&key, &ops) {
            out.push(v);
        }
    }
    out
}

fn check_partition(key: &str, ops: &[&Op]) -> Result<(), Violation> {
    let fail = |message: String, shown: &[&Op]| Err(violation("ledger", key, message, shown));
    let appends: Vec<&Op> = ops.iter().copied().filter(|o| o.f == "append").collect();
    let Some(list) = ops
        .iter()
        .copied()
        .find(|o| o.f == "list" && o.kind == Kind::Ok)
    else {
        return fail(
            "the final listing of the partition never succeeded".into(),
            &[],
        );
    };
    let listed = listed_entries(&list.output);
    let mut by_entry: BTreeMap<&str, u64> = BTreeMap::new();
    for (n, (seq, entry)) in listed.iter().enumerate() {
        if *seq != n as u64 + 1 {
            return fail(
                format!("seq {seq} at position {} (gap or duplicate)", n + 1),
                &[list],
            );
        }
        if by_entry.insert(entry.as_str(), *seq).is_some() {
            let dup: Vec<&Op> = appends
                .iter()
                .copied()
                .filter(|o| entry_of(o) == *entry)
                .collect();
            return fail(format!("entry {entry} appended twice (seq {seq})"), &dup);
        }
    }
    for op in &appends {
        let entry = entry_of(op);
        let at = by_entry.get(entry.as_str()).copied();
        match (op.kind, at) {
            (Kind::Ok, None) => {
                return fail(format!("acknowledged entry {entry} is lost"), &[op, list]);
            }
            (Kind::Ok, Some(seq)) if Some(seq) != u64_at(&op.output, "seq").ok() => {
                return fail(
                    format!("entry {entry} acknowledged at another seq than {seq}"),
                    &[op, list],
                );
            }
            (Kind::Fail, Some(seq)) => {
                return fail(
                    format!("failed append {entry} is present at seq {seq}"),
                    &[op],
                );
            }
            _ => {}
        }
    }
    let invoked: BTreeSet<String> = appends.iter().map(|o| entry_of(o)).collect();
    if let Some((seq, entry)) = listed.iter().find(|(_, e)| !invoked.contains(e)) {
        return fail(
            format!("entry {entry} at seq {seq} was never appended"),
            &[list],
        );
    }
    real_time_order("ledger", key, &appends, "seq")
}

/// Ok operations that finished before another began must have a smaller `field`.
fn real_time_order(workload: &str, key: &str, ops: &[&Op], field: &str) -> Result<(), Violation> {
    let mut done: Vec<(&Op, u64)> = ops
        .iter()
        .filter(|o| o.kind == Kind::Ok)
        .filter_map(|o| u64_at(&o.output, field).ok().map(|v| (*o, v)))
        .collect();
    done.sort_by_key(|(o, _)| o.call);
    // Sweep by call time, keeping the largest value among operations already returned.
    let mut by_ret = done.clone();
    by_ret.sort_by_key(|(o, _)| o.ret);
    let mut j = 0;
    let mut best: Option<(&Op, u64)> = None;
    for (op, value) in &done {
        while j < by_ret.len() && by_ret[j].0.ret < op.call {
            if best.is_none_or(|(_, b)| by_ret[j].1 > b) {
                best = Some(by_ret[j]);
            }
            j += 1;
        }
        if let Some((earlier, b)) = best
            && b >= *value
        {
            let message = format!("{field} {value} after an operation that returned {field} {b}");
            return Err(violation(workload, key, message, &[earlier, op]));
        }
    }
    Ok(())
}

fn entry_of(op: &Op) -> String {
    str_at(&op.input, "entry").unwrap_or_default()
}

fn listed_entries(v: &Value) -> Vec<(u64, String)> {
    v.get("entries")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|e| Some((e.get(0)?.as_u64()?, e.get(1)?.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Check counter consumes (`f = "consume"`) against each key's final view (`f = "final"`).
pub fn check_counter(ops: &[Op]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (key, ops) in by_key(ops, &["consume", "final"]) {
        if let Err(v) = check_counter_key(&key, &ops) {
            out.push(v);
        }
    }
    out
}

fn check_counter_key(key: &str, ops: &[&Op]) -> Result<(), Violation> {
    let fail = |message: String, shown: &[&Op]| Err(violation("counter", key, message, shown));
    let mut periods: BTreeMap<String, Vec<&Op>> = BTreeMap::new();
    for op in ops
        .iter()
        .copied()
        .filter(|o| o.f == "consume" && o.kind == Kind::Ok)
    {
        let cap = u64_at(&op.input, "cap").unwrap_or(0);
        let consumed = u64_at(&op.output, "consumed").unwrap_or(0);
        let remaining = u64_at(&op.output, "remaining").unwrap_or(0);
        if consumed > cap || consumed + remaining != cap {
            return fail(
                format!("consumed {consumed} remaining {remaining} cap {cap}"),
                &[op],
            );
        }
        let charged = op.output.get("ok").and_then(Value::as_bool) == Some(true);
        let amount = u64_at(&op.input, "amount").unwrap_or(1);
        if !charged && consumed + amount <= cap {
            return fail(
                format!("refused {amount} with {consumed} of {cap} consumed"),
                &[op],
            );
        }
        if charged {
            let period = str_at(&op.output, "period").unwrap_or_default();
            periods.entry(period).or_default().push(op);
        }
    }
    for (period, charged) in &periods {
        let mut seen: BTreeMap<u64, &Op> = BTreeMap::new();
        for op in charged {
            let consumed = u64_at(&op.output, "consumed").unwrap_or(0);
            if let Some(other) = seen.insert(consumed, op) {
                return fail(
                    format!("two charges both left consumed at {consumed}"),
                    &[other, op],
                );
            }
        }
        real_time_order("counter", key, charged, "consumed")?;
        let final_view = ops.iter().copied().find(|o| {
            o.f == "final"
                && o.kind == Kind::Ok
                && str_at(&o.output, "period").ok().as_ref() == Some(period)
        });
        if let Some(view) = final_view {
            let consumed = u64_at(&view.output, "consumed").unwrap_or(0);
            let highest = seen.keys().next_back().copied().unwrap_or(0);
            if consumed < highest.max(seen.len() as u64) {
                return fail(
                    format!("final consumed {consumed} below acknowledged {highest}"),
                    &[view],
                );
            }
            let unknown = ops
                .iter()
                .filter(|o| o.f == "consume" && o.kind == Kind::Info)
                .count();
            let charged_n = seen.len() as u64;
            if consumed > charged_n + unknown as u64 {
                let message = format!(
                    "final consumed {consumed} exceeds {charged_n} charges and {unknown} unknown"
                );
                return fail(message, &[view]);
            }
        }
    }
    Ok(())
}

/// Never more live holders than slots: for each new grant (in fence order, which is log
/// order), the earlier grants still live at its stamp whose release (if any) certainly came
/// after it (called after the grant returned). A lower bound, so never a false alarm.
pub fn check_lease_slots(ops: &[Op]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (key, ops) in by_key(ops, &["acquire", "release"]) {
        if let Err(v) = check_lease_key(&key, &ops) {
            out.push(v);
        }
    }
    out
}

struct Grant<'a> {
    op: &'a Op,
    holder: String,
    fence: u64,
    start_ms: u64,
    expires_at_ms: u64,
    slots: u64,
}

fn check_lease_key(key: &str, ops: &[&Op]) -> Result<(), Violation> {
    let mut grants: Vec<Grant> = ops
        .iter()
        .filter(|o| o.f == "acquire" && o.kind == Kind::Ok)
        .filter(|o| o.output.get("held").and_then(Value::as_bool) == Some(true))
        .filter(|o| o.output.get("reentered").and_then(Value::as_bool) != Some(true))
        .filter_map(|o| {
            let expires_at_ms = u64_at(&o.output, "expires_at_ms").ok()?;
            Some(Grant {
                op: o,
                holder: str_at(&o.input, "holder").ok()?,
                fence: u64_at(&o.output, "fence").ok()?,
                start_ms: expires_at_ms.saturating_sub(u64_at(&o.input, "ttl_ms").ok()?),
                expires_at_ms,
                slots: u64_at(&o.input, "slots").ok()?,
            })
        })
        .collect();
    grants.sort_by_key(|g| g.fence);
    // Calls of releases that may have taken effect (ok and released, or unknown), per holder.
    let released: BTreeMap<String, u64> = ops
        .iter()
        .filter(|o| o.f == "release" && o.kind != Kind::Fail)
        .filter(|o| o.output.get("released").and_then(Value::as_bool) != Some(false))
        .filter_map(|o| Some((str_at(&o.input, "holder").ok()?, o.call)))
        .collect();
    for (i, g) in grants.iter().enumerate() {
        if i > 0 && grants[i - 1].fence == g.fence {
            return Err(violation(
                "lease",
                key,
                format!("fence {} granted twice", g.fence),
                &[grants[i - 1].op, g.op],
            ));
        }
        if i > 0 && grants[i - 1].start_ms > g.start_ms {
            let message = format!(
                "stamp went backward: fence {} at {} ms, fence {} at {} ms",
                grants[i - 1].fence,
                grants[i - 1].start_ms,
                g.fence,
                g.start_ms
            );
            return Err(violation("lease", key, message, &[grants[i - 1].op, g.op]));
        }
        let live: Vec<&Grant> = grants[..i]
            .iter()
            .filter(|e| e.expires_at_ms > g.start_ms)
            .filter(|e| released.get(&e.holder).is_none_or(|call| *call > g.op.ret))
            .collect();
        if live.len() as u64 + 1 > g.slots {
            let mut shown: Vec<&Op> = live.iter().map(|e| e.op).collect();
            shown.push(g.op);
            let message = format!(
                "{} live holders with {} slots at fence {} ({} ms)",
                live.len() + 1,
                g.slots,
                g.fence,
                g.start_ms
            );
            return Err(violation("lease", key, message, &shown));
        }
    }
    Ok(())
}

/// Check board histories against each board's final listing (`f = "list"`): no
/// acknowledged post lost and no task that nobody posted; at most one acknowledged
/// completion per task, its token being the task's result; fences never handed out twice;
/// a completion acknowledged only with the fence of the latest claim (none of a later claim
/// had returned when it was sent); no result that no completion carried.
pub fn check_board(ops: &[Op]) -> Vec<Violation> {
    by_key(ops, &["post", "claim", "complete", "release", "list"])
        .into_iter()
        .filter_map(|(key, ops)| check_one_board(&key, &ops).err())
        .collect()
}

/// A task of a board's final listing.
struct Listed<'a> {
    state: &'a str,
    body: &'a str,
    result: &'a str,
}

fn check_one_board(key: &str, ops: &[&Op]) -> Result<(), Violation> {
    let fail = |message: String, shown: &[&Op]| Err(violation("board", key, message, shown));
    let Some(list) = ops
        .iter()
        .copied()
        .find(|o| o.f == "list" && o.kind == Kind::Ok)
    else {
        return fail("the final listing of the board never succeeded".into(), &[]);
    };
    let mut listed: BTreeMap<String, Listed<'_>> = BTreeMap::new();
    for t in list.output["tasks"].as_array().into_iter().flatten() {
        let text = |f: &str| t[f].as_str().unwrap_or_default();
        let entry = Listed {
            state: text("state"),
            body: text("body"),
            result: text("result"),
        };
        listed.insert(text("id").to_string(), entry);
    }
    let of = |f: &str| -> Vec<&Op> { ops.iter().copied().filter(|o| o.f == f).collect() };
    let (posts, claims, completes) = (of("post"), of("claim"), of("complete"));
    check_posts(&posts, &listed, list).or_else(|m| fail(m.0, &m.1))?;
    check_claims(&claims).or_else(|m| fail(m.0, &m.1))?;
    check_completes(&claims, &completes, &listed, list).or_else(|m| fail(m.0, &m.1))
}

type Broken<'a> = (String, Vec<&'a Op>);

fn check_posts<'a>(
    posts: &[&'a Op],
    listed: &BTreeMap<String, Listed<'_>>,
    list: &'a Op,
) -> Result<(), Broken<'a>> {
    for post in posts.iter().filter(|o| o.kind == Kind::Ok) {
        let id = str_at(&post.output, "task_id").unwrap_or_default();
        if !listed.contains_key(&id) {
            return Err((format!("acknowledged post {id} is lost"), vec![post, list]));
        }
    }
    let bodies: BTreeSet<String> = posts
        .iter()
        .filter_map(|o| str_at(&o.input, "body").ok())
        .collect();
    if let Some((id, _)) = listed.iter().find(|(_, t)| !bodies.contains(t.body)) {
        return Err((format!("task {id} was never posted"), vec![list]));
    }
    Ok(())
}

/// Every (task, fence) a claim returned: its first claim, then a prefetch's `more`.
fn claimed(op: &Op) -> Vec<(String, u64)> {
    let one = |v: &Value| Some((str_at(v, "task_id").ok()?, u64_at(v, "fence").ok()?));
    let more = op.output["more"].as_array().into_iter().flatten();
    one(&op.output)
        .into_iter()
        .chain(more.filter_map(one))
        .collect()
}

fn check_claims<'a>(claims: &[&'a Op]) -> Result<(), Broken<'a>> {
    let mut fences: BTreeMap<u64, &Op> = BTreeMap::new();
    for claim in claims.iter().filter(|o| o.kind == Kind::Ok) {
        for (_, fence) in claimed(claim) {
            if let Some(first) = fences.insert(fence, claim) {
                return Err((
                    format!("fence {fence} handed out twice"),
                    vec![first, claim],
                ));
            }
        }
    }
    Ok(())
}

fn check_completes<'a>(
    claims: &[&'a Op],
    completes: &[&'a Op],
    listed: &BTreeMap<String, Listed<'_>>,
    list: &'a Op,
) -> Result<(), Broken<'a>> {
    let mut done: BTreeMap<String, &Op> = BTreeMap::new();
    for complete in completes.iter().filter(|o| o.kind == Kind::Ok) {
        let id = str_at(&complete.input, "task_id").unwrap_or_default();
        let fence = u64_at(&complete.input, "fence").unwrap_or_default();
        if let Some(first) = done.insert(id.clone(), complete) {
            return Err((format!("task {id} completed twice"), vec![first, complete]));
        }
        let token = str_at(&complete.input, "token").unwrap_or_default();
        match listed.get(&id) {
            Some(t) if t.state == "done" && t.result == token => {}
            _ => {
                let message = format!("acknowledged completion {token} of {id} is not its result");
                return Err((message, vec![complete, list]));
            }
        }
        // A claim of the same task with a greater fence that returned before this
        // completion was sent had made this fence stale.
        let later = claims.iter().find(|c| {
            c.kind == Kind::Ok
                && c.ret < complete.call
                && claimed(c).iter().any(|(t, f)| *t == id && *f > fence)
        });
        if let Some(later) = later {
            let message = format!("completion with stale fence {fence} of {id} acknowledged");
            return Err((message, vec![later, complete]));
        }
    }
    let tokens: BTreeSet<String> = completes
        .iter()
        .filter_map(|o| str_at(&o.input, "token").ok())
        .collect();
    let phantom = listed
        .iter()
        .find(|(_, t)| t.state == "done" && !tokens.contains(t.result));
    if let Some((id, t)) = phantom {
        let message = format!("task {id} is done with result {:?} nobody sent", t.result);
        return Err((message, vec![list]));
    }
    Ok(())
}
