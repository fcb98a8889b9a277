//! Goal: bad input gets a typed `InvalidArgument` with a clear message, the member keeps
//! serving, and nothing acknowledged is lost. Method: send each kind of bad request over
//! real gRPC (including bytes that are not a valid protobuf message), then read back.

use prost::Message;
use whip_cell::{CellError, StorageKind};
use whip_proto::v1 as pb;
use whip_tests::Cluster;

fn invalid(result: Result<impl std::fmt::Debug, CellError>, needle: &str) {
    match result {
        Err(CellError::InvalidArgument(message)) => {
            assert!(
                message.contains(needle),
                "message {message:?} does not mention {needle:?}"
            )
        }
        other => panic!("expected InvalidArgument mentioning {needle:?}, got {other:?}"),
    }
}

fn lease(holder: &str, slots: u32) -> pb::LeaseAcquireRequest {
    pb::LeaseAcquireRequest {
        lease: Some(pb::ResourceId {
            owner: "t".into(),
            name: "l".into(),
            key: "k".into(),
        }),
        holder: holder.into(),
        slots,
        ttl_ms: 1000,
        ..Default::default()
    }
}

fn consume(cap: u64, timezone: &str) -> pb::CounterConsumeRequest {
    pb::CounterConsumeRequest {
        counter: Some(pb::ResourceId {
            owner: "t".into(),
            name: "c".into(),
            key: "k".into(),
        }),
        amount: 1,
        cap,
        reset: pb::Reset::Daily as i32,
        timezone: timezone.into(),
        ..Default::default()
    }
}

/// A message whose field 2 is a varint where `KvPutRequest.value` is bytes.
#[derive(Clone, PartialEq, Message)]
struct Garbled {
    #[prost(uint64, tag = "2")]
    value: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_is_refused_and_the_cell_keeps_serving() {
    let cluster = Cluster::start_with(3, StorageKind::Redb, |c| c.value_bytes_max = 4096).await;
    let client = cluster.client();
    let kept = client.kv_put(crate::put("kept", "1")).await.unwrap();

    invalid(
        client.kv_put(crate::put("big", &"x".repeat(5000))).await,
        "4096",
    );
    invalid(client.kv_put(crate::put("", "x")).await, "key");
    invalid(client.lease_acquire(lease("h", 0)).await, "slots");
    invalid(client.lease_acquire(lease("", 1)).await, "holder");
    invalid(client.counter_consume(consume(0, "UTC")).await, "cap");
    invalid(
        client.counter_consume(consume(10, "Mars/Olympus")).await,
        "Mars/Olympus",
    );
    invalid(
        client
            .counter_consume(pb::CounterConsumeRequest {
                reset: 0,
                ..consume(10, "UTC")
            })
            .await,
        "reset",
    );

    // Raw bytes that do not decode as the request type.
    let channel = whip_cell::network::endpoint(&cluster.addrs[&1].to_string())
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/whip.v1.Cell/KvPut");
    let codec = tonic_prost::ProstCodec::<Garbled, pb::KvWriteResponse>::default();
    let status = grpc
        .unary(tonic::Request::new(Garbled { value: 7 }), path, codec)
        .await
        .expect_err("a garbled message must be refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");

    let got = client
        .kv_get(pb::KvGetRequest {
            key: b"kept".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (got.found, got.version),
        (true, kept.version),
        "acknowledged write lost"
    );
    let after = client.kv_put(crate::put("after", "1")).await.unwrap();
    assert_eq!(
        after.code,
        pb::OutcomeCode::KvWritten as i32,
        "cell stopped serving"
    );
    cluster.shutdown().await;
}
