//! A listing no caller can blow up (issue 28, class 8): an agent writes large values and
//! asks for every key at once, again and again. Each answer stops at the server's byte cap
//! and says where the next page starts; paging on it returns every key exactly once, and
//! the cell keeps serving. Streams are counted per principal, so one agent holding its
//! share does not lock out another agent on the same address.

use whip_proto::v1 as pb;

use crate::{registered, still_serving, target};

#[tokio::test]
async fn a_range_answer_is_capped_in_bytes_and_pages_on() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (mallory, _) = registered(&dev, &operator, "mallory", false).await;
    let value = vec![b'x'; 1_000_000];
    for i in 0..8 {
        let put = pb::KvPutRequest {
            key: format!("hoard/{i}").into_bytes(),
            value: value.clone(),
            ..Default::default()
        };
        mallory.kv_put(put).await.unwrap();
    }
    let cap = whip_board::limits::LIST_BYTES_MAX;
    let mut after_key = Vec::new();
    let mut keys = Vec::new();
    loop {
        let page = mallory
            .kv_range(pb::KvRangeRequest {
                prefix: b"hoard/".to_vec(),
                after_key,
                ..Default::default()
            })
            .await
            .unwrap();
        let bytes: usize = page
            .entries
            .iter()
            .map(|e| e.key.len() + e.value.len())
            .sum();
        assert!(
            bytes <= cap + value.len() + 64,
            "an answer of {bytes} bytes"
        );
        keys.extend(page.entries.into_iter().map(|e| e.key));
        if page.resume_after.is_empty() {
            break;
        }
        after_key = page.resume_after;
    }
    let expected: Vec<Vec<u8>> = (0..8).map(|i| format!("hoard/{i}").into_bytes()).collect();
    assert_eq!(keys, expected, "every key once, in order");
    still_serving(&operator).await;
}

/// Streams count per principal, not per address: mallory opens every stream one caller may
/// hold, the next is refused, and alice (on the same address) still opens hers.
#[tokio::test]
async fn streams_are_counted_per_principal() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (mallory, _) = registered(&dev, &operator, "mallory", false).await;
    // A refusal is answered at once: no retrying it as an outage.
    let mallory = mallory.with_retry_for(std::time::Duration::ZERO);
    let (alice, _) = registered(&dev, &operator, "alice", false).await;
    let mut held = Vec::new();
    for _ in 0..whip_cell::limits::STREAMS_PER_CALLER_MAX {
        held.push(mallory.observe("g".into()).await.unwrap());
    }
    let refused = mallory.observe("g".into()).await;
    assert!(
        matches!(&refused, Err(whip_cell::CellError::Unavailable(m)) if m.contains("mallory")),
        "{:?}",
        refused.err()
    );
    let hers = alice.observe("g".into()).await;
    assert!(hers.is_ok(), "{:?}", hers.err());
    drop(held);
    still_serving(&operator).await;
}
