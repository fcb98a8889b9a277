//! Input checks shared by the cell (before proposing) and `apply` (before changing state).

use crate::counter;
use crate::limits::{
    DURATION_MS_MAX, KV_TXN_BYTES_MAX, KV_TXN_OPS_MAX, LEASE_SLOTS_MAX, NAME_BYTES_MAX,
    RANGE_ROWS_PER_COMMAND_MAX,
};
use crate::types::{Command, ResourceId};

fn name(what: &str, bytes: usize) -> Result<(), String> {
    if bytes == 0 {
        return Err(format!("{what} is empty"));
    }
    if bytes > NAME_BYTES_MAX {
        return Err(format!(
            "{what} is {bytes} bytes, limit is {NAME_BYTES_MAX}"
        ));
    }
    Ok(())
}

fn value(what: &str, bytes: usize, value_bytes_max: usize) -> Result<(), String> {
    if bytes > value_bytes_max {
        return Err(format!(
            "{what} is {bytes} bytes, limit is {value_bytes_max}"
        ));
    }
    Ok(())
}

fn duration(what: &str, ms: u64) -> Result<(), String> {
    if ms > DURATION_MS_MAX {
        return Err(format!("{what} is {ms}, limit is {DURATION_MS_MAX}"));
    }
    Ok(())
}

fn positive(what: &str, n: u64) -> Result<(), String> {
    if n == 0 {
        return Err(format!("{what} must be at least 1"));
    }
    Ok(())
}

/// Owner and name must be non-empty; the key may be empty (a resource with one pool).
fn resource(id: &ResourceId) -> Result<(), String> {
    name("owner", id.owner.len())?;
    name("name", id.name.len())?;
    if id.key.len() > NAME_BYTES_MAX {
        return Err(format!(
            "key is {} bytes, limit is {NAME_BYTES_MAX}",
            id.key.len()
        ));
    }
    Ok(())
}

/// An idempotency key must be non-empty and at most `NAME_BYTES_MAX` bytes.
pub(crate) fn idempotency_key(key: &str) -> Result<(), String> {
    name("idempotency key", key.len())
}

/// Check `command` against the limits; the error is the reason for `Outcome::Invalid`.
///
/// ```
/// use whip_board::{Command, validate};
/// let put = Command::KvPut { key: b"a".to_vec(), value: vec![0; 10], expect_version: None };
/// assert_eq!(validate(&put, 4), Err("value is 10 bytes, limit is 4".to_string()));
/// ```
pub fn validate(command: &Command, value_bytes_max: usize) -> Result<(), String> {
    match command {
        Command::KvPut {
            key, value: bytes, ..
        } => {
            name("key", key.len())?;
            value("value", bytes.len(), value_bytes_max)
        }
        Command::KvDelete { key, .. } => name("key", key.len()),
        Command::LeaseAcquire {
            lease,
            holder,
            slots,
            ttl_ms,
            wait_ms,
        } => {
            resource(lease)?;
            name("holder", holder.len())?;
            positive("slots", u64::from(*slots))?;
            if *slots > LEASE_SLOTS_MAX {
                return Err(format!("slots is {slots}, limit is {LEASE_SLOTS_MAX}"));
            }
            positive("ttl_ms", *ttl_ms)?;
            duration("ttl_ms", *ttl_ms)?;
            duration("wait_ms", *wait_ms)
        }
        Command::LeaseRenew {
            lease,
            holder,
            ttl_ms,
        } => {
            resource(lease)?;
            name("holder", holder.len())?;
            positive("ttl_ms", *ttl_ms)?;
            duration("ttl_ms", *ttl_ms)
        }
        Command::LeaseRelease { lease, holder } => {
            resource(lease)?;
            name("holder", holder.len())
        }
        Command::LeaseReleaseAll { holder } => name("holder", holder.len()),
        Command::CounterConsume {
            counter,
            cap,
            timezone,
            ..
        } => {
            resource(counter)?;
            positive("cap", *cap)?;
            match counter::zone(timezone) {
                Some(_) => Ok(()),
                None => Err(format!("unknown time zone {timezone:?}")),
            }
        }
        Command::LedgerAppend {
            ledger,
            entry,
            appended_by,
            retain_ms,
        } => {
            resource(ledger)?;
            value("entry", entry.len(), value_bytes_max)?;
            name("appended_by", appended_by.len())?;
            positive("retain_ms", *retain_ms)?;
            duration("retain_ms", *retain_ms)
        }
        Command::Tick => Ok(()),
        Command::KvTxn {
            compares,
            puts,
            deletes,
        } => kv_txn(compares, puts, deletes, value_bytes_max),
        Command::RangeImport { rows } if rows.len() > RANGE_ROWS_PER_COMMAND_MAX => Err(format!(
            "range import has {} rows, limit is {RANGE_ROWS_PER_COMMAND_MAX}",
            rows.len()
        )),
        Command::RangeAssign { .. }
        | Command::RangeFreeze { .. }
        | Command::RangeSplit { .. }
        | Command::RangeImport { .. }
        | Command::RangeDrop { .. } => Ok(()),
    }
}

fn kv_txn(
    compares: &[(Vec<u8>, u64)],
    puts: &[(Vec<u8>, Vec<u8>)],
    deletes: &[Vec<u8>],
    value_bytes_max: usize,
) -> Result<(), String> {
    let ops = compares.len() + puts.len() + deletes.len();
    if ops == 0 {
        return Err("kv txn is empty".into());
    }
    if ops > KV_TXN_OPS_MAX {
        return Err(format!(
            "kv txn has {ops} operations, limit is {KV_TXN_OPS_MAX}"
        ));
    }
    let mut bytes = 0usize;
    for (key, _) in compares {
        name("key", key.len())?;
        bytes += key.len();
    }
    for (key, bytes_of) in puts {
        name("key", key.len())?;
        value("value", bytes_of.len(), value_bytes_max)?;
        bytes += key.len() + bytes_of.len();
    }
    for key in deletes {
        name("key", key.len())?;
        bytes += key.len();
    }
    if bytes > KV_TXN_BYTES_MAX {
        return Err(format!(
            "kv txn is {bytes} bytes, limit is {KV_TXN_BYTES_MAX}"
        ));
    }
    let put_keys: std::collections::BTreeSet<&[u8]> =
        puts.iter().map(|(key, _)| key.as_slice()).collect();
    if put_keys.len() != puts.len() {
        return Err("kv txn puts one key twice".into());
    }
    if deletes.iter().any(|key| put_keys.contains(key.as_slice())) {
        return Err("kv txn puts and deletes the same key".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::VALUE_BYTES_MAX;
    use crate::types::Reset;

    fn id() -> ResourceId {
        ResourceId {
            owner: "o".into(),
            name: "n".into(),
            key: "k".into(),
        }
    }

    fn acquire(slots: u32, ttl_ms: u64, wait_ms: u64) -> Command {
        Command::LeaseAcquire {
            lease: id(),
            holder: "h".into(),
            slots,
            ttl_ms,
            wait_ms,
        }
    }

    fn check(command: &Command) -> Result<(), String> {
        validate(command, VALUE_BYTES_MAX)
    }

    #[test]
    fn lease_limits() {
        assert_eq!(check(&acquire(1, 1, 0)), Ok(()));
        assert_eq!(
            check(&acquire(0, 1, 0)),
            Err("slots must be at least 1".into())
        );
        assert_eq!(
            check(&acquire(10_001, 1, 0)),
            Err("slots is 10001, limit is 10000".into())
        );
        assert_eq!(
            check(&acquire(1, 0, 0)),
            Err("ttl_ms must be at least 1".into())
        );
        let too_long = DURATION_MS_MAX + 1;
        let reason = format!("wait_ms is {too_long}, limit is {DURATION_MS_MAX}");
        assert_eq!(check(&acquire(1, 1, too_long)), Err(reason));
    }

    #[test]
    fn names_and_values() {
        let put = Command::KvPut {
            key: vec![],
            value: vec![],
            expect_version: None,
        };
        assert_eq!(check(&put), Err("key is empty".into()));
        let put = Command::KvPut {
            key: vec![1],
            value: vec![0; 2_000_000],
            expect_version: None,
        };
        assert_eq!(
            check(&put),
            Err("value is 2000000 bytes, limit is 1048576".into())
        );
        let release = Command::LeaseReleaseAll {
            holder: "x".repeat(1025),
        };
        assert_eq!(
            check(&release),
            Err("holder is 1025 bytes, limit is 1024".into())
        );
        let mut lease = id();
        lease.owner.clear();
        let release = Command::LeaseRelease {
            lease,
            holder: "h".into(),
        };
        assert_eq!(check(&release), Err("owner is empty".into()));
    }

    #[test]
    fn counter_zone_and_cap() {
        let consume = |cap, timezone: &str| Command::CounterConsume {
            counter: id(),
            amount: 1,
            cap,
            reset: Reset::Daily,
            timezone: timezone.into(),
        };
        assert_eq!(check(&consume(1, "America/New_York")), Ok(()));
        assert_eq!(
            check(&consume(0, "UTC")),
            Err("cap must be at least 1".into())
        );
        let reason = Err("unknown time zone \"Mars/Olympus\"".into());
        assert_eq!(check(&consume(1, "Mars/Olympus")), reason);
    }
}
