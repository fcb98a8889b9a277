//! An idempotency key as an attacker reuses it: another caller's key to read the outcome
//! (and the fence) recorded for it, or to take the key first, and one caller's key on
//! another command. Keys are scoped by the proven caller: another caller's use of the same
//! text is its own key (its request runs, and shows nothing of the first caller's outcome);
//! the caller's own key on another command is refused `InvalidArgument` and changes
//! nothing.

use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use crate::{registered, still_serving, target};

fn put(key: &str, value: &str, idempotency_key: &str) -> pb::KvPutRequest {
    pb::KvPutRequest {
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        expect_version: None,
        idempotency_key: idempotency_key.into(),
        ..Default::default()
    }
}

fn reused(answer: &Result<impl std::fmt::Debug, CellError>) -> bool {
    matches!(answer, Err(CellError::InvalidArgument(m)) if m.contains("used by another request"))
}

#[tokio::test]
async fn a_key_answers_only_the_request_it_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, operator) = target(dir.path()).await;
    let (alice, _) = registered(&dev, &operator, "alice", false).await;
    let (bob, _) = registered(&dev, &operator, "bob", false).await;

    let first = alice
        .kv_put(put("doc/plan", "v1", "shared-1"))
        .await
        .unwrap();
    // Alice's retry is answered from the record: the same version, applied once.
    let retry = alice
        .kv_put(put("doc/plan", "v1", "shared-1"))
        .await
        .unwrap();
    assert_eq!((retry.version, retry.fence), (first.version, first.fence));

    // Bob sends the very same command under alice's key text: it is his own key, so his
    // write runs on its own and he does not learn her fence.
    let same = bob.kv_put(put("doc/plan", "v1", "shared-1")).await.unwrap();
    assert!(same.version > first.version, "{same:?} vs {first:?}");
    // His next write under that text is a retry of his own put: answered from his record.
    let other = bob.kv_put(put("doc/bob", "x", "shared-1")).await.unwrap();
    assert_eq!(other.version, same.version);
    absent(&operator, "doc/bob").await;

    // Alice's key on another command (the fuzzer's finding: a grant answered the put's
    // outcome, which the grant's answer cannot carry) is refused the same way.
    let grant = alice
        .mail_grant(pb::MailGrantRequest {
            address: "agent:alice".into(),
            sender: "bob".into(),
            allow: true,
            idempotency_key: "shared-1".into(),
        })
        .await;
    assert!(reused(&grant), "{grant:?}");
    // Her own put of another value under the key is a retry of her put: answered from
    // the record, applied once (bob's write is the stored one).
    let again = alice
        .kv_put(put("doc/plan", "v2", "shared-1"))
        .await
        .unwrap();
    assert_eq!(again.version, first.version);
    let stored = operator
        .kv_get(pb::KvGetRequest {
            key: b"doc/plan".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (stored.value.as_slice(), stored.version),
        (&b"v1"[..], same.version)
    );
    still_serving(&operator).await;
}

async fn absent(client: &CellClient, key: &str) {
    let got = client
        .kv_get(pb::KvGetRequest {
            key: key.as_bytes().to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!got.found, "{key} was written: {got:?}");
}
