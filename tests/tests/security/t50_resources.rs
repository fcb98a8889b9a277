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

#[tokio::test]
async fn idle_connections_cannot_starve_the_server() {
    let dir = tempfile::tempdir().unwrap();
    whip_tests::install_client();
    // 256 descriptors: the server keeps its own and serves at most (256 - 64) / 2 clients.
    let dev = whip_tests::DevCell::start_with_descriptors(dir.path(), Some(256));
    let mut idle = Vec::new();
    for _ in 0..300 {
        if let Ok(stream) = tokio::net::TcpStream::connect(dev.member(0)).await {
            idle.push(stream);
        }
    }
    // Idle connections that never finish a TLS handshake are dropped after the handshake
    // timeout; connections past the limit are closed at once. A real client gets in.
    let client = whip_cell::CellClient::connect(&[dev.member(0)])
        .unwrap()
        .with_retry_for(std::time::Duration::from_secs(20));
    // A client gets through although 300 idle connections were opened.
    crate::write_canary(&client).await;
    still_serving(&client).await;
    drop(idle);
}
