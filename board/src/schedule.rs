//! Schedules: cron specs read in an IANA time zone, and the record of which due time of
//! each named schedule fired, so that any number of claimants fire each due time once.
//!
//! A spec is five fields `minute hour day-of-month month day-of-week` (`*`, `5`, `1-5`,
//! `1,15`, `*/10`, `9-17/2`; day-of-week 0-7 with 0 and 7 both Sunday), a shorthand
//! (`@hourly`, `@daily`, `@weekly`, `@monthly`) or `@every <n>s|m|h`, a fixed interval
//! aligned to the Unix epoch. As in cron, when both day fields are restricted (neither
//! starts with `*`) a day matches when either field does.
//!
//! Due times are local wall-clock times of the zone: a local time that does not exist
//! (skipped when clocks spring forward) is not due at all; a local time that occurs twice
//! (when clocks fall back) is due once, at its first occurrence. Searches look at most
//! `limits::SCHEDULE_SCAN_YEARS_MAX` years away and give up with `None`, so a spec that
//! never falls due (`0 0 31 2 *`) costs a bounded scan of days, never of minutes.
//!
//! State per schedule name is one record: the latest due time fired, who fired it and the
//! fence of the firing. An older due time never fires after a later one did.

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::keys::{self, SCHEDULE};
use crate::limits::{DURATION_MS_MAX, SCHEDULE_SCAN_YEARS_MAX};
use crate::query::ScheduleView;
use crate::txn::Txn;
use crate::types::{Outcome, Stamp};

/// A parsed schedule spec: when a schedule falls due.
///
/// ```
/// use whip_board::ScheduleSpec;
/// let spec = ScheduleSpec::parse("30 9 * * 1-5").unwrap();
/// let ny: chrono_tz::Tz = "America/New_York".parse().unwrap();
/// // Wednesday 2026-07-22 15:00Z is 11:00 in New York: the latest due time is 09:30.
/// let now_ms = 1_784_732_400_000;
/// assert_eq!(spec.latest_due_at_or_before(now_ms, ny), Some(now_ms - 90 * 60_000));
/// assert_eq!(spec.next_due_after(now_ms, ny), Some(now_ms + 22 * 3_600_000 + 30 * 60_000));
/// assert!(ScheduleSpec::parse("0 0 31 2 *").unwrap().next_due_after(now_ms, ny).is_none());
/// assert_eq!(
///     ScheduleSpec::parse("60 * * * *"),
///     Err("minute value 60 is out of range 0-59".to_string())
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleSpec {
    rule: Rule,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    Cron(Cron),
    Every { interval_ms: u64 },
}

/// The allowed values of each field as bit sets (bit `n` set = value `n` allowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cron {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    /// Sunday is bit 0 (a `7` in the spec is folded onto it).
    weekdays: u64,
    /// Both day fields are restricted, so a day matches when either does.
    either_day: bool,
}

/// One of the five fields: its name in messages and its value range.
struct Field {
    name: &'static str,
    low: u32,
    high: u32,
}

const MINUTE: Field = Field {
    name: "minute",
    low: 0,
    high: 59,
};
const HOUR: Field = Field {
    name: "hour",
    low: 0,
    high: 23,
};
const DAY: Field = Field {
    name: "day-of-month",
    low: 1,
    high: 31,
};
const MONTH: Field = Field {
    name: "month",
    low: 1,
    high: 12,
};
const WEEKDAY: Field = Field {
    name: "day-of-week",
    low: 0,
    high: 7,
};

fn has(bits: u64, value: u32) -> bool {
    bits & (1 << value) != 0
}

impl Field {
    fn number(&self, text: &str) -> Result<u32, String> {
        let name = self.name;
        let value: u32 = text
            .parse()
            .map_err(|_| format!("{name} value {text:?} is not a number"))?;
        if value < self.low || value > self.high {
            let (low, high) = (self.low, self.high);
            return Err(format!("{name} value {value} is out of range {low}-{high}"));
        }
        Ok(value)
    }

    /// One list item: `*`, `n`, `a-b`, `*/s` or `a-b/s`.
    fn item(&self, item: &str) -> Result<u64, String> {
        let name = self.name;
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .map_err(|_| format!("{name} step {step:?} is not a number"))?;
                if step == 0 {
                    return Err(format!("{name} step must be at least 1"));
                }
                (range, Some(step))
            }
            None => (item, None),
        };
        let (low, high) = if range == "*" {
            (self.low, self.high)
        } else if let Some((low, high)) = range.split_once('-') {
            let (low, high) = (self.number(low)?, self.number(high)?);
            if low > high {
                return Err(format!("{name} range {low}-{high} is backward"));
            }
            (low, high)
        } else if step.is_some() {
            return Err(format!("{name} step needs a range or *, got {item:?}"));
        } else {
            let value = self.number(range)?;
            (value, value)
        };
        let step = usize::try_from(step.unwrap_or(1)).expect("u32 fits usize");
        Ok((low..=high).step_by(step).fold(0, |bits, v| bits | 1 << v))
    }

    /// A comma-separated list of items.
    fn parse(&self, text: &str) -> Result<u64, String> {
        let mut bits = 0;
        for item in text.split(',') {
            if item.is_empty() {
                return Err(format!("{} list {text:?} has an empty item", self.name));
            }
            bits |= self.item(item)?;
        }
        Ok(bits)
    }
}

impl Cron {
    fn parse(text: &str) -> Result<Cron, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(format!(
                "schedule spec has {} fields, expected 5 \
                 (minute hour day-of-month month day-of-week)",
                fields.len()
            ));
        };
        let mut weekdays = WEEKDAY.parse(weekday)?;
        if has(weekdays, 7) {
            weekdays = (weekdays & !(1 << 7)) | 1;
        }
        Ok(Cron {
            minutes: MINUTE.parse(minute)?,
            hours: HOUR.parse(hour)?,
            days: DAY.parse(day)?,
            months: MONTH.parse(month)?,
            weekdays,
            either_day: !day.starts_with('*') && !weekday.starts_with('*'),
        })
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        if !has(self.months, date.month()) {
            return false;
        }
        let day = has(self.days, date.day());
        let weekday = has(self.weekdays, date.weekday().num_days_from_sunday());
        if self.either_day {
            day || weekday
        } else {
            day && weekday
        }
    }

    fn hours(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        (0..24).filter(|hour| has(self.hours, *hour))
    }

    fn minutes(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        (0..60).filter(|minute| has(self.minutes, *minute))
    }

    /// The latest due time on local `date` at or before `now_ms`.
    fn latest_on(&self, date: NaiveDate, now_ms: u64, tz: Tz) -> Option<u64> {
        let first_minute = self.minutes.trailing_zeros();
        for hour in self.hours().rev() {
            // Due times grow with local time, so an hour whose first due minute is after
            // now has nothing at or before now.
            if instant(tz, date, hour, first_minute).is_some_and(|at| at > now_ms) {
                continue;
            }
            let found = self
                .minutes()
                .rev()
                .filter_map(|minute| instant(tz, date, hour, minute))
                .find(|at| *at <= now_ms);
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// The earliest due time on local `date` after `after_ms`.
    fn next_on(&self, date: NaiveDate, after_ms: u64, tz: Tz) -> Option<u64> {
        let last_minute = 63 - self.minutes.leading_zeros();
        for hour in self.hours() {
            if instant(tz, date, hour, last_minute).is_some_and(|at| at <= after_ms) {
                continue;
            }
            let found = self
                .minutes()
                .filter_map(|minute| instant(tz, date, hour, minute))
                .find(|at| *at > after_ms);
            if found.is_some() {
                return found;
            }
        }
        None
    }

    fn latest(&self, now_ms: u64, tz: Tz) -> Option<u64> {
        // Start one local date ahead: a zone that falls back across midnight shows the next
        // date before the current one ends, so a due time on it can lie before now.
        let mut date = local_date(now_ms, tz)?.succ_opt()?;
        for _ in 0..scan_days() {
            if self.day_matches(date)
                && let Some(due) = self.latest_on(date, now_ms, tz)
            {
                return Some(due);
            }
            date = date.pred_opt()?;
        }
        None
    }

    fn next(&self, after_ms: u64, tz: Tz) -> Option<u64> {
        // Start one local date back, for the same reason as `latest`.
        let mut date = local_date(after_ms, tz)?.pred_opt()?;
        for _ in 0..scan_days() {
            if self.day_matches(date)
                && let Some(due) = self.next_on(date, after_ms, tz)
            {
                return Some(due);
            }
            date = date.succ_opt()?;
        }
        None
    }
}

/// Days a search looks at: the scan limit in years plus the extra starting day.
fn scan_days() -> u32 {
    SCHEDULE_SCAN_YEARS_MAX * 366 + 1
}

/// The local date of `time_ms` in `tz` (`None` past chrono's range).
fn local_date(time_ms: u64, tz: Tz) -> Option<NaiveDate> {
    let utc = DateTime::<Utc>::from_timestamp_millis(i64::try_from(time_ms).ok()?)?;
    Some(utc.with_timezone(&tz).date_naive())
}

/// The first moment local `date hour:minute` occurs in `tz` (`None` when it is skipped by
/// a spring-forward or lies before the Unix epoch).
fn instant(tz: Tz, date: NaiveDate, hour: u32, minute: u32) -> Option<u64> {
    let local = date.and_hms_opt(hour, minute, 0)?;
    let first = tz.from_local_datetime(&local).earliest()?;
    u64::try_from(first.timestamp_millis()).ok()
}

/// `@every <n>s|m|h`.
fn every(text: &str) -> Result<Rule, String> {
    let unit_ms = match text.chars().last() {
        Some('s') => 1_000,
        Some('m') => 60_000,
        Some('h') => 3_600_000,
        _ => return Err(format!("@every {text:?} needs a unit s, m or h")),
    };
    let count = &text[..text.len() - 1];
    let count: u64 = count
        .parse()
        .map_err(|_| format!("@every count {count:?} is not a number"))?;
    if count == 0 {
        return Err("@every count must be at least 1".into());
    }
    match count.checked_mul(unit_ms) {
        Some(interval_ms) if interval_ms <= DURATION_MS_MAX => Ok(Rule::Every { interval_ms }),
        _ => Err(format!(
            "@every {text} is longer than the limit of {DURATION_MS_MAX} ms"
        )),
    }
}

impl ScheduleSpec {
    /// Parse a spec; the error says what is wrong, lowercase, with the numbers.
    pub fn parse(text: &str) -> Result<ScheduleSpec, String> {
        let text = text.trim();
        let cron = match text {
            "" => return Err("schedule spec is empty".into()),
            "@hourly" => "0 * * * *",
            "@daily" => "0 0 * * *",
            "@weekly" => "0 0 * * 0",
            "@monthly" => "0 0 1 * *",
            _ => text,
        };
        if let Some(rest) = cron.strip_prefix("@every")
            && rest.starts_with(char::is_whitespace)
        {
            return Ok(ScheduleSpec {
                rule: every(rest.trim())?,
            });
        }
        if cron.starts_with('@') {
            return Err(format!(
                "unknown schedule shorthand {cron:?}, expected @hourly, @daily, @weekly, \
                 @monthly or @every <n>s|m|h"
            ));
        }
        Ok(ScheduleSpec {
            rule: Rule::Cron(Cron::parse(cron)?),
        })
    }

    /// The most recent due time at or before `now_ms` (ms since the Unix epoch) in `tz`;
    /// `None` when there is none within `limits::SCHEDULE_SCAN_YEARS_MAX` years.
    pub fn latest_due_at_or_before(&self, now_ms: u64, tz: Tz) -> Option<u64> {
        match &self.rule {
            Rule::Every { interval_ms } => Some(now_ms - now_ms % interval_ms),
            Rule::Cron(cron) => cron.latest(now_ms, tz),
        }
    }

    /// The first due time after `after_ms` in `tz`; `None` when there is none within
    /// `limits::SCHEDULE_SCAN_YEARS_MAX` years.
    pub fn next_due_after(&self, after_ms: u64, tz: Tz) -> Option<u64> {
        match &self.rule {
            Rule::Every { interval_ms } => {
                (after_ms - after_ms % interval_ms).checked_add(*interval_ms)
            }
            Rule::Cron(cron) => cron.next(after_ms, tz),
        }
    }
}

/// The latest due time at or before `now_ms` of `spec` read in `timezone` (an IANA name),
/// for callers that claim "whatever is due now".
pub fn latest_due(spec: &str, timezone: &str, now_ms: u64) -> Result<Option<u64>, String> {
    let spec = ScheduleSpec::parse(spec)?;
    let tz =
        crate::counter::zone(timezone).ok_or_else(|| format!("unknown time zone {timezone:?}"))?;
    Ok(spec.latest_due_at_or_before(now_ms, tz))
}

#[derive(Serialize, Deserialize)]
struct Record {
    spec: String,
    timezone: String,
    last_due_ms: u64,
    claimant: String,
    fence: u64,
}

/// The request of one fire (validated: `due_ms` is a due time of `spec` in `timezone`).
pub(crate) struct Fire<'a> {
    /// The schedule's name.
    pub(crate) name: &'a str,
    /// The spec, as given.
    pub(crate) spec: &'a str,
    /// The zone name, as given.
    pub(crate) timezone: &'a str,
    /// The claimed due time.
    pub(crate) due_ms: u64,
    /// Who claims it.
    pub(crate) claimant: &'a str,
}

/// Fire the schedule at `due_ms` unless that due time (or a later one) already fired. A
/// `due_ms` of 0 claims the latest due time at or before the stamp: the time is the
/// apply's, never a server's clock.
pub(crate) fn fire(txn: &mut impl Txn, stamp: Stamp, request: &Fire<'_>) -> Outcome {
    let now_ms = stamp.time_ms;
    let due_ms = match request.due_ms {
        0 => match latest_due(request.spec, request.timezone, now_ms) {
            Ok(Some(due_ms)) => due_ms,
            Ok(None) => {
                let reason = format!("schedule {:?} never fell due", request.spec);
                return Outcome::Invalid { reason };
            }
            Err(reason) => return Outcome::Invalid { reason },
        },
        due_ms => due_ms,
    };
    if due_ms > now_ms {
        return Outcome::ScheduleNotDue { due_ms, now_ms };
    }
    let key = keys::named(SCHEDULE, request.name);
    if let Some(last) = txn.get(&key).map(|bytes| decode::<Record>(&bytes))
        && due_ms <= last.last_due_ms
    {
        return Outcome::ScheduleAlreadyFired {
            due_ms: last.last_due_ms,
            claimant: last.claimant,
            fence: last.fence,
        };
    }
    let record = Record {
        spec: request.spec.to_string(),
        timezone: request.timezone.to_string(),
        last_due_ms: due_ms,
        claimant: request.claimant.to_string(),
        fence: stamp.fence(),
    };
    txn.put(&key, &encode(&record));
    Outcome::ScheduleFired {
        due_ms,
        fence: record.fence,
    }
}

/// Schedules whose name starts with `prefix`, in name order.
pub(crate) fn list(txn: &impl Txn, prefix: &str, limit: usize) -> Vec<ScheduleView> {
    let start = keys::named_prefix(SCHEDULE, prefix);
    let end = keys::prefix_end(&start);
    txn.scan(&start, &end, limit)
        .into_iter()
        .map(|(key, value)| {
            let record: Record = decode(&value);
            ScheduleView {
                name: keys::parse_named(&key),
                spec: record.spec,
                timezone: record.timezone,
                last_due_ms: record.last_due_ms,
                claimant: record.claimant,
                fence: record.fence,
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
        "America/New_York".parse().expect("zone exists")
    }

    fn cron(text: &str) -> Cron {
        match ScheduleSpec::parse(text).expect("spec parses").rule {
            Rule::Cron(cron) => cron,
            Rule::Every { .. } => panic!("{text} is not a cron spec"),
        }
    }

    fn bits(values: &[u32]) -> u64 {
        values.iter().fold(0, |bits, v| bits | 1 << v)
    }

    fn error(text: &str) -> String {
        ScheduleSpec::parse(text).expect_err("spec is refused")
    }

    fn latest(text: &str, now: &str, tz: Tz) -> Option<u64> {
        let spec = ScheduleSpec::parse(text).expect("spec parses");
        spec.latest_due_at_or_before(ms(now), tz)
    }

    fn next(text: &str, after: &str, tz: Tz) -> Option<u64> {
        let spec = ScheduleSpec::parse(text).expect("spec parses");
        spec.next_due_after(ms(after), tz)
    }

    #[test]
    fn every_field_form() {
        let all_minutes = (1u64 << 60) - 1;
        let c = cron("* 5 1-3 1,6,12 */2");
        assert_eq!(c.minutes, all_minutes);
        assert_eq!(c.hours, bits(&[5]));
        assert_eq!(c.days, bits(&[1, 2, 3]));
        assert_eq!(c.months, bits(&[1, 6, 12]));
        assert_eq!(c.weekdays, bits(&[0, 2, 4, 6]));
        let c = cron("*/15 9-17/4 1-10,20-31/5 * 5-7");
        assert_eq!(c.minutes, bits(&[0, 15, 30, 45]));
        assert_eq!(c.hours, bits(&[9, 13, 17]));
        assert_eq!(c.days, bits(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 25, 30]));
        assert_eq!(c.weekdays, bits(&[5, 6, 0]), "7 is Sunday");
        assert_eq!(cron("0 0 * * 7"), cron("0 0 * * 0"));
        assert_eq!(cron("  0  0 * *   0 "), cron("0 0 * * 0"));
    }

    #[test]
    fn shorthands_and_intervals() {
        assert_eq!(cron("@hourly"), cron("0 * * * *"));
        assert_eq!(cron("@daily"), cron("0 0 * * *"));
        assert_eq!(cron("@weekly"), cron("0 0 * * 0"));
        assert_eq!(cron("@monthly"), cron("0 0 1 * *"));
        let every = |text: &str| ScheduleSpec::parse(text).expect("parses").rule;
        assert_eq!(
            every("@every 30s"),
            Rule::Every {
                interval_ms: 30_000
            }
        );
        assert_eq!(
            every("@every 5m"),
            Rule::Every {
                interval_ms: 300_000
            }
        );
        assert_eq!(
            every("@every 2h"),
            Rule::Every {
                interval_ms: 7_200_000
            }
        );
        let spec = ScheduleSpec::parse("@every 30s").expect("parses");
        assert_eq!(spec.latest_due_at_or_before(89_999, Tz::UTC), Some(60_000));
        assert_eq!(spec.latest_due_at_or_before(90_000, ny()), Some(90_000));
        assert_eq!(spec.next_due_after(90_000, Tz::UTC), Some(120_000));
        assert_eq!(spec.next_due_after(u64::MAX - 1, Tz::UTC), None);
    }

    #[test]
    fn bad_specs_say_why() {
        assert_eq!(error(""), "schedule spec is empty");
        assert_eq!(
            error("* * * *"),
            "schedule spec has 4 fields, expected 5 (minute hour day-of-month month day-of-week)"
        );
        assert_eq!(error("60 * * * *"), "minute value 60 is out of range 0-59");
        assert_eq!(error("* 24 * * *"), "hour value 24 is out of range 0-23");
        assert_eq!(
            error("* * 0 * *"),
            "day-of-month value 0 is out of range 1-31"
        );
        assert_eq!(error("* * * 13 *"), "month value 13 is out of range 1-12");
        assert_eq!(
            error("* * * * 8"),
            "day-of-week value 8 is out of range 0-7"
        );
        assert_eq!(error("* * * JAN *"), "month value \"JAN\" is not a number");
        assert_eq!(error("* 5-3 * * *"), "hour range 5-3 is backward");
        assert_eq!(error("*/0 * * * *"), "minute step must be at least 1");
        assert_eq!(error("*/x * * * *"), "minute step \"x\" is not a number");
        assert_eq!(
            error("5/10 * * * *"),
            "minute step needs a range or *, got \"5/10\""
        );
        assert_eq!(
            error("1,,2 * * * *"),
            "minute list \"1,,2\" has an empty item"
        );
        assert_eq!(error("-1 * * * *"), "minute value \"\" is not a number");
        assert_eq!(
            error("@yearly"),
            "unknown schedule shorthand \"@yearly\", expected @hourly, @daily, @weekly, \
             @monthly or @every <n>s|m|h"
        );
        assert_eq!(
            error("@every"),
            error("@yearly").replace("@yearly", "@every")
        );
        assert_eq!(error("@every 10"), "@every \"10\" needs a unit s, m or h");
        assert_eq!(error("@every xs"), "@every count \"x\" is not a number");
        assert_eq!(error("@every 0m"), "@every count must be at least 1");
        assert_eq!(
            error("@every 99999999999h"),
            "@every 99999999999h is longer than the limit of 316224000000 ms"
        );
    }

    #[test]
    fn days_match_either_field_only_when_both_are_restricted() {
        let date = |text: &str| NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("date");
        // 2026-07-13 is a Monday, 2026-07-15 a Wednesday.
        let either = cron("0 0 15 * 1");
        assert!(either.either_day);
        assert!(either.day_matches(date("2026-07-13")));
        assert!(either.day_matches(date("2026-07-15")));
        assert!(!either.day_matches(date("2026-07-14")));
        // A day field starting with `*` is unrestricted: both must match.
        let both = cron("0 0 */2 * 1");
        assert!(!both.either_day);
        assert!(both.day_matches(date("2026-07-13")));
        assert!(!both.day_matches(date("2026-07-20")));
        assert!(!cron("0 0 15 * *").day_matches(date("2026-07-13")));
        assert!(
            !cron("0 0 15 8 1").day_matches(date("2026-07-13")),
            "month still applies"
        );
    }

    #[test]
    fn latest_and_next_in_plain_time() {
        let now = "2026-07-22T15:07:30Z";
        assert_eq!(
            latest("*/5 * * * *", now, Tz::UTC),
            Some(ms("2026-07-22T15:05:00Z"))
        );
        assert_eq!(
            next("*/5 * * * *", now, Tz::UTC),
            Some(ms("2026-07-22T15:10:00Z"))
        );
        assert_eq!(
            latest("@daily", now, ny()),
            Some(ms("2026-07-22T04:00:00Z"))
        );
        assert_eq!(
            next("@monthly", now, ny()),
            Some(ms("2026-08-01T04:00:00Z"))
        );
        assert_eq!(
            latest("@weekly", now, Tz::UTC),
            Some(ms("2026-07-19T00:00:00Z"))
        );
        // A due time is its own latest; the next is strictly after.
        let due = "2026-07-22T15:05:00Z";
        assert_eq!(latest("*/5 * * * *", due, Tz::UTC), Some(ms(due)));
        assert_eq!(
            next("*/5 * * * *", due, Tz::UTC),
            Some(ms("2026-07-22T15:10:00Z"))
        );
        assert_eq!(
            latest("0 0 29 2 *", now, Tz::UTC),
            Some(ms("2024-02-29T00:00:00Z"))
        );
        assert_eq!(
            next("0 0 29 2 *", now, Tz::UTC),
            Some(ms("2028-02-29T00:00:00Z"))
        );
        assert_eq!(
            latest("0 0 * * *", "1970-01-01T00:00:00Z", Tz::UTC),
            Some(0)
        );
        assert_eq!(latest("0 1 * * *", "1970-01-01T00:30:00Z", Tz::UTC), None);
    }

    #[test]
    fn a_spec_that_never_falls_due_gives_up() {
        let now = "2026-07-22T15:07:30Z";
        assert_eq!(latest("0 0 31 2 *", now, ny()), None);
        assert_eq!(next("0 0 31 2 *", now, ny()), None);
        assert_eq!(next("* * 30 2 *", now, Tz::UTC), None);
        // With the OR rule a February 31st spec is due on Mondays, in February only.
        let monday = Some(ms("2027-02-01T00:00:00Z"));
        assert_eq!(next("0 0 31 2 1", now, Tz::UTC), monday);
    }

    #[test]
    fn spring_forward_skips_the_missing_local_time() {
        // 2026-03-08 02:00 EST jumps to 03:00 EDT in New York: 02:30 does not exist.
        let spec = "30 2 * * *";
        let before = "2026-03-08T06:59:00Z";
        assert_eq!(latest(spec, before, ny()), Some(ms("2026-03-07T07:30:00Z")));
        assert_eq!(next(spec, before, ny()), Some(ms("2026-03-09T06:30:00Z")));
        assert_eq!(
            next("*/30 * * * *", before, ny()),
            Some(ms("2026-03-08T07:00:00Z"))
        );
        assert_eq!(
            latest("0 2 * * *", "2026-03-08T12:00:00Z", ny()),
            Some(ms("2026-03-07T07:00:00Z"))
        );
    }

    #[test]
    fn fall_back_fires_the_repeated_local_time_once() {
        // 2026-11-01 02:00 EDT falls back to 01:00 EST: 01:30 happens at 05:30Z and 06:30Z.
        let spec = "30 1 * * *";
        assert_eq!(
            latest(spec, "2026-11-01T06:45:00Z", ny()),
            Some(ms("2026-11-01T05:30:00Z"))
        );
        assert_eq!(
            next(spec, "2026-11-01T05:30:00Z", ny()),
            Some(ms("2026-11-02T06:30:00Z"))
        );
        // Every quarter hour: after 01:45 EDT the next is 02:00 EST, an hour later.
        let quarter = "*/15 * * * *";
        let after = "2026-11-01T05:45:00Z";
        assert_eq!(next(quarter, after, ny()), Some(ms("2026-11-01T07:00:00Z")));
        assert_eq!(
            latest(quarter, "2026-11-01T06:59:00Z", ny()),
            Some(ms(after))
        );
    }

    /// Every due time in `[from_ms, to_ms)`, minute by minute: the naive reading of the
    /// rules (a matching local minute is due at its first occurrence only).
    fn naive_due_times(spec: &Cron, from_ms: u64, to_ms: u64, tz: Tz) -> Vec<u64> {
        let mut due = Vec::new();
        for minute_ms in (from_ms..to_ms).step_by(60_000) {
            let at = DateTime::<Utc>::from_timestamp_millis(minute_ms as i64).expect("in range");
            let local = at.with_timezone(&tz).naive_local();
            let first = tz.from_local_datetime(&local).earliest().expect("exists");
            let matches = spec.day_matches(local.date())
                && has(spec.hours, local.hour())
                && has(spec.minutes, local.minute());
            if matches && first.timestamp_millis() as u64 == minute_ms {
                due.push(minute_ms);
            }
        }
        due
    }

    /// Compare both searches with the naive scan of a three-day window (an answer outside
    /// the window is unknown to the scan, so both sides read it as `None`).
    fn agree_in_window(text: &str, tz: Tz, from: &str) {
        let (from_ms, to_ms) = (ms(from), ms(from) + 3 * 86_400_000);
        let due = naive_due_times(&cron(text), from_ms, to_ms, tz);
        let spec = ScheduleSpec::parse(text).expect("parses");
        let inside = |at: Option<u64>| at.filter(|at| (from_ms..to_ms).contains(at));
        let probes = (from_ms..to_ms).step_by(7 * 60_000 + 13_001);
        for probe in probes.chain(due.iter().copied()) {
            let latest = due.iter().rev().find(|d| **d <= probe).copied();
            let found = inside(spec.latest_due_at_or_before(probe, tz));
            assert_eq!(found, latest, "{text} in {tz}: latest at {probe}");
            let next = due.iter().find(|d| **d > probe).copied();
            let found = inside(spec.next_due_after(probe, tz));
            assert_eq!(found, next, "{text} in {tz}: next after {probe}");
        }
    }

    use chrono::Timelike;

    #[test]
    fn searches_agree_with_a_minute_by_minute_scan_across_dst() {
        let specs = [
            "*/15 * * * *",
            "30 1 * * *",
            "0 0-3 * * *",
            "59 * 1 * 0",
            "7 2 * * *",
        ];
        // Lord Howe shifts by 30 minutes, so only half of an hour is skipped or repeated.
        let zones = [
            "America/New_York",
            "Europe/Paris",
            "Australia/Lord_Howe",
            "UTC",
        ];
        let windows = [
            "2026-03-07T00:00:00Z",
            "2026-03-28T00:00:00Z",
            "2026-04-04T00:00:00Z",
            "2026-10-03T00:00:00Z",
            "2026-10-24T00:00:00Z",
            "2026-10-31T00:00:00Z",
        ];
        for zone in zones {
            let tz: Tz = zone.parse().expect("zone exists");
            for text in specs {
                for from in windows {
                    agree_in_window(text, tz, from);
                }
            }
        }
    }

    #[test]
    fn fires_once_and_never_an_older_due_time() {
        let mut txn = MemTxn::default();
        let stamp = |index, time_ms| Stamp {
            index,
            position: 0,
            time_ms,
        };
        let request = |due_ms, claimant| Fire {
            name: "n",
            spec: "@every 60s",
            timezone: "UTC",
            due_ms,
            claimant,
        };
        let fired = fire(&mut txn, stamp(1, 60_000), &request(60_000, "a"));
        let fence = stamp(1, 0).fence();
        assert_eq!(
            fired,
            Outcome::ScheduleFired {
                due_ms: 60_000,
                fence
            }
        );
        let again = Outcome::ScheduleAlreadyFired {
            due_ms: 60_000,
            claimant: "a".into(),
            fence,
        };
        assert_eq!(
            fire(&mut txn, stamp(2, 61_000), &request(60_000, "b")),
            again
        );
        assert_eq!(fire(&mut txn, stamp(3, 61_000), &request(0, "b")), again);
        assert_eq!(
            fire(&mut txn, stamp(4, 61_000), &request(120_000, "b")),
            Outcome::ScheduleNotDue {
                due_ms: 120_000,
                now_ms: 61_000
            }
        );
        assert_eq!(list(&txn, "", 10)[0].claimant, "a");
        assert_eq!(txn.map.len(), 1);
        // 0 claims the latest due time at or before the apply's stamp, not a server clock.
        assert_eq!(
            fire(&mut txn, stamp(5, 125_000), &request(0, "c")),
            Outcome::ScheduleFired {
                due_ms: 120_000,
                fence: stamp(5, 0).fence()
            }
        );
        assert_eq!(list(&txn, "", 10)[0].claimant, "c");
        let never = Fire {
            spec: "0 0 31 2 *",
            ..request(0, "d")
        };
        let refused = fire(&mut txn, stamp(6, 125_000), &never);
        assert!(matches!(refused, Outcome::Invalid { .. }), "{refused:?}");
    }
}
