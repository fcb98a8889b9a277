//! Election leases that publish endpoints: two candidate processes (`whip election run`)
//! on a 3-node fabric; the leader's process is SIGKILLed; an observer stream sees its
//! endpoints withdrawn and the other candidate lead within TTL + 1 s.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use whip_cell::CellClient;
use whip_tests::fabric::ProcessFabric;
use whip_tests::whip_binary;

const TTL_MS: u64 = 2_000;

fn candidate(name: &str, node: &str) -> Child {
    Command::new(whip_binary())
        .args([
            "election",
            "run",
            "svc",
            "--candidate",
            name,
            "--ttl",
            "2s",
            "--cell",
            node,
        ])
        .args(["--endpoint", &format!("{name}.internal:8080")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn candidate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn observers_see_the_withdrawal_and_the_next_leader() {
    let fabric = ProcessFabric::start(3).await;
    fabric.init(4);

    let observer = CellClient::connect(&fabric.addrs[2..3]).expect("client");
    let mut changes = observer.observe("svc".into()).await.expect("observe");
    let mut a = candidate("alpha", &fabric.addrs[0]);
    let mut b = candidate("beta", &fabric.addrs[1]);
    let first = loop {
        let change = tokio::time::timeout(Duration::from_secs(10), changes.next())
            .await
            .expect("a leader within 10 s")
            .expect("stream open")
            .expect("change");
        if let Some(leader) = change.leader {
            break leader;
        }
    };
    assert_eq!(
        first.endpoints,
        vec![format!("{}.internal:8080", first.candidate)]
    );
    let (dead, survivor) = if first.candidate == "alpha" {
        (&mut a, "beta")
    } else {
        (&mut b, "alpha")
    };
    // Let the survivor's campaign loop run against a live leader for a while.
    tokio::time::sleep(Duration::from_millis(500)).await;
    dead.kill().expect("kill leader process");
    let killed = Instant::now();
    let deadline = Duration::from_millis(TTL_MS + 1_000);
    let mut withdrawn = false;
    let next = loop {
        let left = deadline
            .checked_sub(killed.elapsed())
            .expect("new leader within TTL + 1 s");
        let change = tokio::time::timeout(left, changes.next())
            .await
            .expect("new leader within TTL + 1 s")
            .expect("stream open")
            .expect("change");
        match change.leader {
            None => withdrawn = true,
            Some(l) if l.candidate == first.candidate => {}
            Some(l) => break l,
        }
    };
    let took = killed.elapsed();
    assert_eq!(next.candidate, survivor);
    assert!(next.fence > first.fence, "the new term has a higher fence");
    assert_eq!(next.endpoints, vec![format!("{survivor}.internal:8080")]);
    eprintln!("withdrawal seen: {withdrawn}; new leader after {took:?}");
    let _ = a.kill();
    let _ = b.kill();
    let _ = a.wait();
    let _ = b.wait();
}
