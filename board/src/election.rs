//! Election leases: at most one leader per group, with a fence, a deadline and published
//! endpoints (the shape of etcd's election API, with deadlines in stamp time).
//!
//! A leader whose deadline is at or before the stamp is gone, even before the `Tick` that
//! removes it: every command that touches a group first settles it (drops a dead leader
//! with its deadline index entry), and reads hide it. A new term's fence is the fence of
//! the command that won it, so a later leader of a group always has a higher fence than an
//! earlier one; re-entry and renewal keep the term's fence.
//!
//! State per group is one record plus one deadline index entry at the leader's deadline.

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::deadline::{self, Item};
use crate::keys::{self, ELECTION};
use crate::limits::LIST_ROWS_MAX;
use crate::txn::Txn;
use crate::types::{ElectionLeader, Outcome, Stamp};

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Record {
    candidate: String,
    fence: u64,
    endpoints: Vec<String>,
    expires_at_ms: u64,
}

fn item(group: &str) -> Item {
    Item::Election {
        group: group.to_string(),
    }
}

fn load(txn: &impl Txn, group: &str) -> Option<Record> {
    txn.get(&keys::named(ELECTION, group))
        .map(|bytes| decode(&bytes))
}

fn store(txn: &mut impl Txn, group: &str, record: &Record) {
    txn.put(&keys::named(ELECTION, group), &encode(record));
}

/// Delete the group's record and its deadline index entry.
fn remove(txn: &mut impl Txn, group: &str, record: &Record) {
    txn.delete(&keys::named(ELECTION, group));
    deadline::remove(txn, record.expires_at_ms, &item(group));
}

fn view(group: &str, record: Record) -> ElectionLeader {
    ElectionLeader {
        group: group.to_string(),
        candidate: record.candidate,
        fence: record.fence,
        endpoints: record.endpoints,
        expires_at_ms: record.expires_at_ms,
    }
}

/// The group's live leader at `now_ms`, after dropping a dead one.
fn settle(txn: &mut impl Txn, group: &str, now_ms: u64) -> Option<Record> {
    let record = load(txn, group)?;
    if record.expires_at_ms > now_ms {
        return Some(record);
    }
    remove(txn, group, &record);
    None
}

/// Move the leader's deadline to `now_ms + ttl_ms` unless that is earlier.
fn extend(txn: &mut impl Txn, group: &str, record: &mut Record, now_ms: u64, ttl_ms: u64) {
    let expires_at_ms = record.expires_at_ms.max(now_ms.saturating_add(ttl_ms));
    deadline::reschedule(txn, record.expires_at_ms, expires_at_ms, &item(group));
    record.expires_at_ms = expires_at_ms;
}

/// The request of one campaign.
pub(crate) struct Campaign<'a> {
    /// The election group.
    pub(crate) group: &'a str,
    /// Who campaigns.
    pub(crate) candidate: &'a str,
    /// Endpoints to publish once leading.
    pub(crate) endpoints: &'a [String],
    /// Time to live of the leadership from the stamp.
    pub(crate) ttl_ms: u64,
}

/// Win a group without a live leader, re-enter as its leader, or lose to the leader.
pub(crate) fn campaign(txn: &mut impl Txn, stamp: Stamp, request: &Campaign<'_>) -> Outcome {
    let (group, now_ms) = (request.group, stamp.time_ms);
    let previous_fence = load(txn, group).map(|record| record.fence);
    match settle(txn, group, now_ms) {
        Some(mut record) if record.candidate == request.candidate => {
            extend(txn, group, &mut record, now_ms, request.ttl_ms);
            record.endpoints = request.endpoints.to_vec();
            store(txn, group, &record);
            Outcome::Elected {
                fence: record.fence,
                expires_at_ms: record.expires_at_ms,
            }
        }
        Some(record) => Outcome::ElectionLost {
            leader: view(group, record),
        },
        None => {
            let record = Record {
                candidate: request.candidate.to_string(),
                fence: stamp.fence(),
                endpoints: request.endpoints.to_vec(),
                expires_at_ms: now_ms.saturating_add(request.ttl_ms),
            };
            // Fences only grow: a stamp older than the last term would break every fence
            // check downstream.
            if let Some(previous) = previous_fence {
                assert!(
                    record.fence > previous,
                    "fence {} does not pass term {previous}",
                    record.fence
                );
            }
            deadline::insert(txn, record.expires_at_ms, &item(group));
            store(txn, group, &record);
            Outcome::Elected {
                fence: record.fence,
                expires_at_ms: record.expires_at_ms,
            }
        }
    }
}

/// A caller that claims to lead a group.
pub(crate) struct Term<'a> {
    /// The election group.
    pub(crate) group: &'a str,
    /// The claimed leader.
    pub(crate) candidate: &'a str,
    /// The fence of the claimed term.
    pub(crate) fence: u64,
}

/// The live leader when it is the caller's term; otherwise the refusal naming the leader.
fn leading(txn: &mut impl Txn, term: &Term<'_>, now_ms: u64) -> Result<Record, Outcome> {
    match settle(txn, term.group, now_ms) {
        Some(record) if record.candidate == term.candidate && record.fence == term.fence => {
            Ok(record)
        }
        current => Err(Outcome::ElectionNotLeader {
            current: current.map(|record| view(term.group, record)),
        }),
    }
}

/// Replace the endpoints of the caller's term.
pub(crate) fn proclaim(
    txn: &mut impl Txn,
    now_ms: u64,
    term: &Term<'_>,
    endpoints: &[String],
) -> Outcome {
    match leading(txn, term, now_ms) {
        Ok(mut record) => {
            record.endpoints = endpoints.to_vec();
            store(txn, term.group, &record);
            Outcome::Proclaimed {
                fence: record.fence,
            }
        }
        Err(refused) => refused,
    }
}

/// End the caller's term and withdraw its endpoints.
pub(crate) fn resign(txn: &mut impl Txn, now_ms: u64, term: &Term<'_>) -> Outcome {
    match leading(txn, term, now_ms) {
        Ok(record) => {
            remove(txn, term.group, &record);
            Outcome::Resigned
        }
        Err(refused) => refused,
    }
}

/// Extend the caller's term (never backward).
pub(crate) fn renew(txn: &mut impl Txn, now_ms: u64, term: &Term<'_>, ttl_ms: u64) -> Outcome {
    match leading(txn, term, now_ms) {
        Ok(mut record) => {
            extend(txn, term.group, &mut record, now_ms, ttl_ms);
            store(txn, term.group, &record);
            Outcome::Elected {
                fence: record.fence,
                expires_at_ms: record.expires_at_ms,
            }
        }
        Err(refused) => refused,
    }
}

/// Drop the group's leader if its term ended at `now_ms`; returns how many were dropped.
pub(crate) fn expire(txn: &mut impl Txn, now_ms: u64, group: &str) -> u32 {
    match load(txn, group) {
        Some(record) if record.expires_at_ms <= now_ms => {
            remove(txn, group, &record);
            1
        }
        _ => 0,
    }
}

/// The live leader of `group` at `now_ms`.
pub(crate) fn get(txn: &impl Txn, now_ms: u64, group: &str) -> Option<ElectionLeader> {
    load(txn, group)
        .filter(|record| record.expires_at_ms > now_ms)
        .map(|record| view(group, record))
}

/// Live leaders of groups starting with `prefix`, in group order.
pub(crate) fn list(txn: &impl Txn, now_ms: u64, prefix: &str, limit: usize) -> Vec<ElectionLeader> {
    let mut start = keys::named_prefix(ELECTION, prefix);
    let end = keys::prefix_end(&start);
    let mut leaders = Vec::new();
    while leaders.len() < limit {
        let rows = txn.scan(&start, &end, LIST_ROWS_MAX);
        let Some((last, _)) = rows.last() else { break };
        start = last.clone();
        start.push(0);
        for (key, value) in rows {
            let record: Record = decode(&value);
            if record.expires_at_ms > now_ms {
                leaders.push(view(&keys::parse_named(&key), record));
                if leaders.len() == limit {
                    break;
                }
            }
        }
    }
    leaders
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    fn at(index: u64, time_ms: u64) -> Stamp {
        Stamp {
            index,
            position: 0,
            time_ms,
        }
    }

    fn run(txn: &mut MemTxn, stamp: Stamp, candidate: &str, ttl_ms: u64) -> Outcome {
        let endpoints = vec![format!("{candidate}:1")];
        let request = Campaign {
            group: "g",
            candidate,
            endpoints: &endpoints,
            ttl_ms,
        };
        campaign(txn, stamp, &request)
    }

    fn term(candidate: &str, fence: u64) -> Term<'_> {
        Term {
            group: "g",
            candidate,
            fence,
        }
    }

    #[test]
    fn one_leader_until_its_term_ends() {
        let mut txn = MemTxn::default();
        let first = at(1, 0).fence();
        let elected = |fence, expires_at_ms| Outcome::Elected {
            fence,
            expires_at_ms,
        };
        assert_eq!(run(&mut txn, at(1, 0), "a", 100), elected(first, 100));
        let Outcome::ElectionLost { leader } = run(&mut txn, at(2, 10), "b", 100) else {
            panic!("b must lose while a leads");
        };
        assert_eq!((leader.candidate.as_str(), leader.fence), ("a", first));
        // Re-entry keeps the fence and never moves the deadline back.
        assert_eq!(run(&mut txn, at(3, 20), "a", 10), elected(first, 100));
        assert_eq!(run(&mut txn, at(4, 50), "a", 100), elected(first, 150));
        assert_eq!(deadline::next(&txn), Some(150));
        // a is dead at 150 even before a tick: b wins with a higher fence.
        assert_eq!(
            run(&mut txn, at(5, 150), "b", 100),
            elected(at(5, 0).fence(), 250)
        );
        assert_eq!(deadline::next(&txn), Some(250));
        assert_eq!(get(&txn, 249, "g").map(|l| l.candidate), Some("b".into()));
        assert_eq!(get(&txn, 250, "g"), None);
    }

    #[test]
    fn only_the_current_term_proclaims_renews_and_resigns() {
        let mut txn = MemTxn::default();
        let fence = at(1, 0).fence();
        run(&mut txn, at(1, 0), "a", 100);
        let endpoints = vec!["a:2".to_string()];
        let Outcome::ElectionNotLeader { current: Some(_) } =
            proclaim(&mut txn, 10, &term("a", fence + 1), &endpoints)
        else {
            panic!("a stale fence must be refused");
        };
        assert_eq!(
            proclaim(&mut txn, 10, &term("a", fence), &endpoints),
            Outcome::Proclaimed { fence }
        );
        assert_eq!(get(&txn, 10, "g").map(|l| l.endpoints), Some(endpoints));
        assert_eq!(
            renew(&mut txn, 20, &term("a", fence), 500),
            Outcome::Elected {
                fence,
                expires_at_ms: 520
            }
        );
        assert_eq!(resign(&mut txn, 30, &term("a", fence)), Outcome::Resigned);
        assert_eq!(
            resign(&mut txn, 30, &term("a", fence)),
            Outcome::ElectionNotLeader { current: None }
        );
        assert!(txn.map.is_empty(), "left {:?}", txn.map);
    }

    #[test]
    fn expiry_drops_the_leader_and_list_hides_the_dead() {
        let mut txn = MemTxn::default();
        run(&mut txn, at(1, 0), "a", 100);
        assert_eq!(expire(&mut txn, 99, "g"), 0);
        assert_eq!(list(&txn, 99, "", 10).len(), 1);
        assert_eq!(list(&txn, 100, "", 10), vec![]);
        assert_eq!(expire(&mut txn, 100, "g"), 1);
        assert!(txn.map.is_empty(), "left {:?}", txn.map);
    }
}
