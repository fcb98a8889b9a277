//! Schedules fire once: every node polls the same `@every 1s` schedule with two claimants
//! each; every due time in the window fires exactly once fabric-wide, none is skipped.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;
use whip_tests::fabric::Fabric;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_due_time_fires_exactly_once() {
    let fabric = Fabric::start(3, 4).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut pollers = Vec::new();
    for node in [1u64, 2, 3] {
        for n in 0..2 {
            let client = fabric.client_of(node);
            let stop = stop.clone();
            let claimant = format!("node{node}-{n}");
            pollers.push(tokio::spawn(async move {
                let mut fired = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let request = pb::ScheduleFireRequest {
                        name: "report".into(),
                        spec: "@every 1s".into(),
                        timezone: "UTC".into(),
                        due_ms: 0,
                        claimant: claimant.clone(),
                        idempotency_key: String::new(),
                    };
                    let r = client.schedule_fire(request).await.expect("fire");
                    if r.code == Code::ScheduleFired as i32 {
                        fired.push(r.due_ms);
                    } else {
                        assert!(
                            r.code == Code::ScheduleAlreadyFired as i32
                                || r.code == Code::ScheduleNotDue as i32,
                            "{r:?}"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
                (claimant, fired)
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut firings: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for poller in pollers {
        let (claimant, fired) = poller.await.expect("poller");
        for due in fired {
            firings.entry(due).or_default().push(claimant.clone());
        }
    }
    assert!(
        firings.len() >= 4,
        "about one firing per second: {firings:?}"
    );
    for (due, claimants) in &firings {
        assert_eq!(
            claimants.len(),
            1,
            "due time {due} fired once: {claimants:?}"
        );
        assert_eq!(due % 1_000, 0, "due times are whole seconds");
    }
    let dues: Vec<u64> = firings.keys().copied().collect();
    assert!(
        dues.windows(2).all(|w| w[1] - w[0] == 1_000),
        "no due time skipped: {dues:?}"
    );
    let winners: std::collections::BTreeSet<&String> = firings.values().flatten().collect();
    eprintln!(
        "{} firings won by {} claimants",
        firings.len(),
        winners.len()
    );
    fabric.shutdown().await;
}
