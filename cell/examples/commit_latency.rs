//! Measures the latency of one durable log append on each backend (a calibration tool:
//! `cargo run --release -p whip-cell --example commit_latency`).

use std::time::Instant;

use whip_cell::storage::{StorageKind, open_backend};

fn main() {
    for kind in [StorageKind::Redb, StorageKind::Sled] {
        let dir = tempfile::tempdir().expect("temp dir");
        let backend = open_backend(kind, dir.path()).expect("open");
        let mut times = Vec::new();
        for i in 0..2000u64 {
            let t = Instant::now();
            backend.log_append(&[(i, vec![7u8; 200])]).expect("append");
            times.push(t.elapsed().as_micros());
        }
        times.sort_unstable();
        println!(
            "{}: durable append p50 {} us, p99 {} us",
            kind.name(),
            times[1000],
            times[1980]
        );
    }
}
