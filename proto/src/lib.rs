//! # whip-proto: the wire contract
//!
//! Owns the `.proto` files and the tonic/prost code generated from them: the typed client
//! API any gRPC client can drive (`whip.v1.Cell`), the admin API and the internal Raft
//! transport. Must never: hold logic beyond generated code and constants.
#![allow(missing_docs, unreachable_pub, clippy::all)]

pub mod codec;

/// Generated types and services of package `whip.v1`.
pub mod v1 {
    tonic::include_proto!("whip.v1");
}

/// The encoded file descriptor set, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("whip_descriptor");
