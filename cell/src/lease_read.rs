//! Leader-lease reads: whether a leader may confirm a linearizable read without a heartbeat
//! round, and for how long after a quorum acknowledged it.
//!
//! A follower refuses every candidate for `election_timeout_min` after it last accepted its
//! leader (openraft's vote lease, whip patch 4), and a restarted member refuses for as long
//! after its start (patch 11). So while a quorum acknowledged a message the leader *sent*
//! less than that long ago, no other leader can exist, and the leader's commit index is a
//! current read index. The leader answers reads under [`lease_read_ms`]: the election
//! timeout less [`limits::LEASE_READ_DRIFT_PERMILLE`] of it for the clocks' rate drift. A
//! lapsed lease (an idle or hibernating cell, a partition) falls back to the read-index
//! round. Wall-clock jumps do not matter: only each node's monotonic clock is read.

use crate::limits;

/// Whether members serve linearizable reads under the leader lease
/// (`whip cell serve|node serve --lease-reads on|off`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LeaseReads {
    /// Reads under a live lease take no round: the default.
    #[default]
    On,
    /// Every linearizable read takes a read-index round (for A/B runs).
    Off,
}

impl LeaseReads {
    /// The name used on the command line and in config files.
    pub fn name(self) -> &'static str {
        match self {
            LeaseReads::On => "on",
            LeaseReads::Off => "off",
        }
    }
}

impl std::str::FromStr for LeaseReads {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "on" => Ok(LeaseReads::On),
            "off" => Ok(LeaseReads::Off),
            other => Err(format!("lease-reads is `on` or `off`, not `{other}`")),
        }
    }
}

/// How long after a quorum acknowledged it a leader serves reads without a round (0: off).
pub fn lease_read_ms(mode: LeaseReads, election_timeout_min_ms: u64) -> u64 {
    match mode {
        LeaseReads::On => {
            let drift = election_timeout_min_ms * limits::LEASE_READ_DRIFT_PERMILLE / 1_000;
            election_timeout_min_ms - drift
        }
        LeaseReads::Off => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_stays_inside_the_election_timeout_by_the_drift_margin() {
        assert_eq!(lease_read_ms(LeaseReads::Off, 450), 0);
        let lease = lease_read_ms(LeaseReads::On, 450);
        assert!(lease > 0 && lease < 450, "{lease}");
        assert_eq!(450 - lease, 450 * limits::LEASE_READ_DRIFT_PERMILLE / 1_000);
        assert_eq!("off".parse::<LeaseReads>(), Ok(LeaseReads::Off));
        assert!("maybe".parse::<LeaseReads>().is_err());
        assert_eq!(
            LeaseReads::On.name().parse::<LeaseReads>(),
            Ok(LeaseReads::On)
        );
    }
}
