//! Counters: consumption capped per period, the period computed from the stamp in an IANA
//! time zone (DST-aware).
//!
//! Period labels: hourly `2026-07-21T19-04:00` (the UTC offset is part of the label, so
//! the hour repeated when DST ends is two periods), daily `2026-07-21`, weekly ISO week
//! `2026-W30`, monthly `2026-07`. When the stamp's period differs from the stored one,
//! consumption starts again from 0.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::keys::{self, COUNTER};
use crate::limits::LIST_ROWS_MAX;
use crate::query::CounterView;
use crate::txn::Txn;
use crate::types::{Outcome, Reset, ResourceId};

#[derive(Serialize, Deserialize)]
struct Record {
    consumed: u64,
    cap: u64,
    period: String,
}

/// Parse an IANA zone name.
pub(crate) fn zone(name: &str) -> Option<Tz> {
    name.parse::<Tz>().ok()
}

/// The period label of `time_ms` under `reset` in `tz`.
pub(crate) fn period(time_ms: u64, reset: Reset, tz: Tz) -> String {
    // Stamps past chrono's range (year 262143) clamp to its last instant.
    let utc = i64::try_from(time_ms)
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_millis)
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    let local = utc.with_timezone(&tz);
    let format = match reset {
        Reset::Hourly => "%Y-%m-%dT%H%:z",
        Reset::Daily => "%Y-%m-%d",
        Reset::Weekly => "%G-W%V",
        Reset::Monthly => "%Y-%m",
    };
    local.format(format).to_string()
}

/// The request of one consume.
pub(crate) struct Consume<'a> {
    /// Which counter.
    pub(crate) counter: &'a ResourceId,
    /// How much to spend.
    pub(crate) amount: u64,
    /// Most that may be consumed in one period.
    pub(crate) cap: u64,
    /// When consumption resets.
    pub(crate) reset: Reset,
    /// The validated time zone.
    pub(crate) tz: Tz,
}

/// Charge `amount` if it fits under the cap in the stamp's period; otherwise charge nothing.
pub(crate) fn consume(txn: &mut impl Txn, time_ms: u64, request: &Consume<'_>) -> Outcome {
    let key = keys::listed(COUNTER, request.counter);
    let period = period(time_ms, request.reset, request.tz);
    let stored: Option<Record> = txn.get(&key).map(|bytes| decode(&bytes));
    let consumed = stored
        .filter(|r| r.period == period)
        .map_or(0, |r| r.consumed);
    let cap = request.cap;
    let after = consumed
        .checked_add(request.amount)
        .filter(|after| *after <= cap);
    // The record is written either way: a new period or a new cap is state, not a charge.
    let record = Record {
        consumed: after.unwrap_or(consumed),
        cap,
        period: period.clone(),
    };
    txn.put(&key, &encode(&record));
    let remaining = cap.saturating_sub(record.consumed);
    match after {
        Some(consumed) => Outcome::CounterOk {
            consumed,
            remaining,
            period,
        },
        None => Outcome::CounterOver {
            consumed,
            remaining,
            period,
        },
    }
}

/// Counters whose `owner/name` starts with `prefix`, as stored.
pub(crate) fn list(txn: &impl Txn, prefix: &str, limit: usize) -> Vec<CounterView> {
    let start = keys::listed_prefix(COUNTER, prefix);
    let end = keys::prefix_end(&start);
    txn.scan(&start, &end, limit.min(LIST_ROWS_MAX))
        .into_iter()
        .map(|(key, value)| {
            let record: Record = decode(&value);
            CounterView {
                counter: keys::parse_listed(&key),
                consumed: record.consumed,
                cap: record.cap,
                period: record.period,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::MemTxn;

    fn ms(rfc3339: &str) -> u64 {
        let at = DateTime::parse_from_rfc3339(rfc3339).expect("test time parses");
        u64::try_from(at.timestamp_millis()).expect("test time is after 1970")
    }

    fn ny() -> Tz {
        zone("America/New_York").expect("zone exists")
    }

    #[test]
    fn labels_per_reset() {
        let at = ms("2026-07-21T23:30:00Z");
        assert_eq!(period(at, Reset::Hourly, ny()), "2026-07-21T19-04:00");
        assert_eq!(period(at, Reset::Daily, ny()), "2026-07-21");
        assert_eq!(period(at, Reset::Weekly, ny()), "2026-W30");
        assert_eq!(period(at, Reset::Monthly, ny()), "2026-07");
        assert_eq!(period(at, Reset::Daily, Tz::UTC), "2026-07-21");
        assert_eq!(
            period(ms("2026-07-22T04:00:00Z"), Reset::Daily, ny()),
            "2026-07-22"
        );
    }

    #[test]
    fn repeated_dst_hour_is_two_periods() {
        let first = period(ms("2026-11-01T05:30:00Z"), Reset::Hourly, ny());
        let second = period(ms("2026-11-01T06:30:00Z"), Reset::Hourly, ny());
        assert_eq!(first, "2026-11-01T01-04:00");
        assert_eq!(second, "2026-11-01T01-05:00");
    }

    #[test]
    fn iso_week_crosses_years() {
        assert_eq!(
            period(ms("2027-01-01T12:00:00Z"), Reset::Weekly, Tz::UTC),
            "2026-W53"
        );
    }

    #[test]
    fn unknown_zone() {
        assert!(zone("Mars/Olympus").is_none());
    }

    #[test]
    fn over_charges_nothing_and_period_resets() {
        let mut txn = MemTxn::default();
        let id = ResourceId {
            owner: "o".into(),
            name: "n".into(),
            key: "k".into(),
        };
        let request = |amount| Consume {
            counter: &id,
            amount,
            cap: 100,
            reset: Reset::Daily,
            tz: ny(),
        };
        let day = ms("2026-07-21T15:00:00Z");
        let period = String::from("2026-07-21");
        assert_eq!(
            consume(&mut txn, day, &request(60)),
            Outcome::CounterOk {
                consumed: 60,
                remaining: 40,
                period: period.clone()
            }
        );
        assert_eq!(
            consume(&mut txn, day, &request(60)),
            Outcome::CounterOver {
                consumed: 60,
                remaining: 40,
                period
            }
        );
        assert_eq!(
            consume(&mut txn, day, &request(u64::MAX)),
            Outcome::CounterOver {
                consumed: 60,
                remaining: 40,
                period: "2026-07-21".into()
            }
        );
        let next = ms("2026-07-22T05:00:00Z");
        assert_eq!(
            consume(&mut txn, next, &request(60)),
            Outcome::CounterOk {
                consumed: 60,
                remaining: 40,
                period: "2026-07-22".into()
            }
        );
        assert_eq!(list(&txn, "o/", 10)[0].consumed, 60);
    }
}
