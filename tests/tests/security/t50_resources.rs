//! Resource bounds: a request larger than any command may be is refused `InvalidArgument`
//! before it is decoded, and the server keeps serving.

use whip_cell::CellError;
use whip_proto::v1 as pb;

use crate::{still_serving, target};

#[tokio::test]
async fn an_oversized_request_is_invalid_and_costs_nothing_after() {
    let dir = tempfile::tempdir().unwrap();
    let (_dev, client) = target(dir.path()).await;
    let limit = whip_cell::limits::CLIENT_MESSAGE_BYTES_MAX;
    for _ in 0..4 {
        let refused = client
            .kv_put(pb::KvPutRequest {
                key: b"big".to_vec(),
                value: vec![7; limit + 1],
                ..Default::default()
            })
            .await;
        assert!(
            matches!(&refused, Err(CellError::InvalidArgument(m)) if m.contains("message")),
            "{refused:?}"
        );
    }
    still_serving(&client).await;
}
