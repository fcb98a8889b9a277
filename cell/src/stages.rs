//! Per-stage write latencies of one cell runtime: where a write's time goes between the
//! moment the server accepts it and the moment it answers.
//!
//! Each stage is a lock-free histogram of durations in microseconds (logarithmic buckets,
//! `SUB_BUCKETS` per power of two, so a percentile is within about 19 % of the true value).
//! Recording is one atomic add; reading walks the buckets. The histograms are cumulative
//! since the runtime started; `whip cell status --json` reports them as `stages`.
//!
//! Beside each histogram, a stage counts its **hops**: for each sample, how many times the
//! write changed OS thread between the stage's start and its end (a channel to another
//! task that runs on another worker, a blocking-pool call, the log writer's thread). Each
//! record site knows where its stage began ([`here`]) and passes the switches it saw;
//! `whip cell status --json` reports them as `hops`. Task switches on the same thread are
//! not seen: the figure is a lower bound on a stage's handoffs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::ThreadId;
use std::time::Duration;

/// The OS thread running now: where a stage begins, for [`Stages::hop`].
pub fn here() -> ThreadId {
    std::thread::current().id()
}

/// 1 when the running thread is not `from`, else 0.
pub fn switched(from: ThreadId) -> u64 {
    u64::from(here() != from)
}

/// One stage's thread switches.
#[derive(Default)]
struct Hops {
    samples: AtomicU64,
    switches: AtomicU64,
}

/// Thread switches of one stage since the runtime started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageHops {
    /// Samples that counted their switches.
    pub samples: u64,
    /// Thread switches over those samples.
    pub switches: u64,
}

/// A stage of a write's life on this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Accepted by the runtime → its batch handed to Raft (time spent queued).
    Queue,
    /// Log append submitted → durable on this node (the log writer's fsync, grouped).
    LogFlushed,
    /// Append-entries sent to a follower → its answer (the follower's flush and the trip).
    FollowerAcked,
    /// Batch handed to Raft → committed and applied here (Raft's whole round).
    Committed,
    /// One batch of entries applied to the state machine.
    Applied,
    /// Accepted → answered (the whole write as its caller sees it on this node).
    Replied,
    /// On a follower: an AppendEntries carrying entries received → answered (its flush and
    /// the hops around it; the leader's `follower_acked` adds the trip).
    FollowerAnswered,
}

impl Stage {
    /// Every stage, in the order of a write's life.
    pub const ALL: [Stage; 7] = [
        Stage::Queue,
        Stage::LogFlushed,
        Stage::FollowerAcked,
        Stage::Committed,
        Stage::Applied,
        Stage::Replied,
        Stage::FollowerAnswered,
    ];

    /// The stable name used in status output.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Queue => "queue",
            Stage::LogFlushed => "log_flushed",
            Stage::FollowerAcked => "follower_acked",
            Stage::Committed => "committed",
            Stage::Applied => "applied",
            Stage::Replied => "replied",
            Stage::FollowerAnswered => "follower_answered",
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

/// Buckets per power of two.
const SUB_BUCKETS: usize = 4;
/// Powers of two covered (1 µs to about 2^40 µs, some twelve days).
const OCTAVES: usize = 40;
const BUCKETS: usize = SUB_BUCKETS * OCTAVES;
/// The smallest bound exported ([`Stages::export`]): 2^4 = 16 µs.
const EXPORT_OCTAVE_MIN: usize = 4;
/// The largest bound exported: 2^26 µs, about 67 s (longer samples count only in `count`).
const EXPORT_OCTAVE_MAX: usize = 26;

/// One stage's histogram.
struct Histogram {
    counts: Vec<AtomicU64>,
    max_us: AtomicU64,
    sum_us: AtomicU64,
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max_us: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
        }
    }

    fn record(&self, us: u64) {
        self.counts[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Cumulative counts at every power of two from 2^4 to 2^26 µs: a bucket
    /// `[lo, hi)` lies wholly below the bound `2^k` when `hi <= 2^k`, so each count is the
    /// samples of at most that many µs.
    fn export(&self) -> StageHistogram {
        let mut buckets = Vec::new();
        let mut seen = 0u64;
        // Read every count once; `count` is their sum, so the bounds never pass it.
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count.load(Ordering::Relaxed);
            let octave = bucket / SUB_BUCKETS + 1;
            let exported = (EXPORT_OCTAVE_MIN..=EXPORT_OCTAVE_MAX).contains(&octave);
            if bucket % SUB_BUCKETS == SUB_BUCKETS - 1 && exported {
                buckets.push((1u64 << octave, seen));
            }
        }
        StageHistogram {
            count: seen,
            sum_us: self.sum_us.load(Ordering::Relaxed),
            buckets,
        }
    }

    fn summary(&self) -> StageSummary {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let count: u64 = counts.iter().sum();
        let max_us = self.max_us.load(Ordering::Relaxed);
        // A bucket's upper bound can pass the largest sample: never report above it.
        let at = |q: f64| percentile(&counts, count, q).min(max_us);
        StageSummary {
            count,
            p50_us: at(0.50),
            p90_us: at(0.90),
            p99_us: at(0.99),
            max_us,
        }
    }
}

/// The bucket of a duration: octave = bit length, sub-bucket = the next two bits.
fn bucket_of(us: u64) -> usize {
    let us = us.max(1);
    let octave = (63 - us.leading_zeros()) as usize;
    let sub = if octave >= 2 {
        ((us >> (octave - 2)) & 0b11) as usize
    } else {
        ((us << (2 - octave)) & 0b11) as usize
    };
    (octave * SUB_BUCKETS + sub).min(BUCKETS - 1)
}

/// The upper bound (µs) of a bucket.
fn bucket_upper(bucket: usize) -> u64 {
    let (octave, sub) = (bucket / SUB_BUCKETS, (bucket % SUB_BUCKETS) as u64);
    let base = 1u64 << octave;
    base + (base * (sub + 1)) / SUB_BUCKETS as u64
}

fn percentile(counts: &[u64], total: u64, q: f64) -> u64 {
    if total == 0 {
        return 0;
    }
    let rank = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (bucket, count) in counts.iter().enumerate() {
        seen += count;
        if seen >= rank {
            return bucket_upper(bucket);
        }
    }
    bucket_upper(BUCKETS - 1)
}

/// Percentiles of one stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageSummary {
    /// Samples recorded.
    pub count: u64,
    /// Median, µs.
    pub p50_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Largest sample, µs.
    pub max_us: u64,
}

/// One stage's histogram as Prometheus takes it: cumulative counts at upper bounds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageHistogram {
    /// Samples recorded.
    pub count: u64,
    /// Sum of every sample, µs.
    pub sum_us: u64,
    /// (upper bound in µs, samples at most that long), bounds rising by powers of two.
    pub buckets: Vec<(u64, u64)>,
}

/// The histograms of every stage of one runtime.
pub struct Stages {
    histograms: Vec<Histogram>,
    hops: Vec<Hops>,
}

impl Default for Stages {
    fn default() -> Self {
        Stages {
            histograms: Stage::ALL.iter().map(|_| Histogram::new()).collect(),
            hops: Stage::ALL.iter().map(|_| Hops::default()).collect(),
        }
    }
}

impl Stages {
    /// Record one sample of `stage`.
    pub fn record(&self, stage: Stage, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.histograms[stage.slot()].record(us);
    }

    /// Count one sample of `stage` that changed thread `switches` times.
    pub fn hop(&self, stage: Stage, switches: u64) {
        let hops = &self.hops[stage.slot()];
        hops.samples.fetch_add(1, Ordering::Relaxed);
        hops.switches.fetch_add(switches, Ordering::Relaxed);
    }

    /// Every stage's thread switches, in the order of [`Stage::ALL`].
    pub fn hops(&self) -> Vec<(Stage, StageHops)> {
        let read = |h: &Hops| StageHops {
            samples: h.samples.load(Ordering::Relaxed),
            switches: h.switches.load(Ordering::Relaxed),
        };
        Stage::ALL
            .iter()
            .map(|s| (*s, read(&self.hops[s.slot()])))
            .collect()
    }

    /// Every stage with its percentiles, in the order of [`Stage::ALL`].
    pub fn summaries(&self) -> Vec<(Stage, StageSummary)> {
        Stage::ALL
            .iter()
            .map(|s| (*s, self.histograms[s.slot()].summary()))
            .collect()
    }

    /// Every stage's histogram for export, in the order of [`Stage::ALL`].
    pub fn export(&self) -> Vec<(Stage, StageHistogram)> {
        Stage::ALL
            .iter()
            .map(|s| (*s, self.histograms[s.slot()].export()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_land_in_the_sample_s_bucket() {
        let stages = Stages::default();
        for us in 1..=1000u64 {
            stages.record(Stage::Queue, Duration::from_micros(us));
        }
        let (_, queue) = stages.summaries()[0];
        assert_eq!(queue.count, 1000);
        assert_eq!(queue.max_us, 1000);
        // The bucket bounds are within a quarter octave of the true percentile.
        assert!((500..=640).contains(&queue.p50_us), "{queue:?}");
        assert!((990..=1000).contains(&queue.p99_us), "{queue:?}");
        assert!(queue.p50_us <= queue.p99_us && queue.p99_us <= queue.max_us);
        let (_, idle) = stages.summaries()[1];
        assert_eq!(idle, StageSummary::default());
    }

    #[test]
    fn export_counts_samples_at_or_below_each_bound() {
        let stages = Stages::default();
        for us in [10u64, 16, 17, 100, 1_000] {
            stages.record(Stage::Applied, Duration::from_micros(us));
        }
        let (_, applied) = &stages.export()[4];
        assert_eq!((applied.count, applied.sum_us), (5, 1_143));
        let at = |bound: u64| applied.buckets.iter().find(|(b, _)| *b == bound).unwrap().1;
        // 16 µs itself lands in the bucket above the bound 16: the count never overstates.
        assert_eq!((at(16), at(32), at(128), at(1_024)), (1, 3, 4, 5));
        assert!(
            applied
                .buckets
                .windows(2)
                .all(|w| w[0].1 <= w[1].1 && w[0].0 < w[1].0)
        );
    }

    #[test]
    fn buckets_are_monotonic() {
        let mut last = 0;
        for us in [1u64, 2, 3, 5, 8, 100, 1_000, 65_536, 1 << 39, u64::MAX] {
            let b = bucket_of(us);
            assert!(b >= last, "{us}");
            assert!(bucket_upper(b) >= us.min(bucket_upper(BUCKETS - 1)), "{us}");
            last = b;
        }
    }
}
