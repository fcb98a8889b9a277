//! The admin API (init, membership, status) and the Raft transport of hosted cells.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use tonic::{Request as GrpcRequest, Response, Status};
use whip_board::{Query, Request};
use whip_proto::v1 as pb;
use whip_proto::v1::{admin_server, raft_server};

use super::{Cells, GrpcResult, hosted};
use crate::limits;
use crate::runtime::Cell;
use crate::stages::{self, Stage};
use crate::types::{TypeConfig, decode, encode};

/// The `whip.v1.Admin` service: membership of hosted cells and the node's credential.
pub struct AdminApi {
    pub(super) cells: Arc<dyn Cells>,
}

#[tonic::async_trait]
impl admin_server::Admin for AdminApi {
    async fn init(&self, req: GrpcRequest<pb::InitRequest>) -> GrpcResult<pb::AdminResponse> {
        let req = req.into_inner();
        let cell = hosted(self.cells.as_ref(), req.cell)?;
        let members: BTreeMap<u64, String> =
            req.members.into_iter().map(|m| (m.id, m.addr)).collect();
        if members.is_empty() {
            return Err(Status::invalid_argument("init needs at least one member"));
        }
        let count = members.len();
        cell.initialize(members).await?;
        Ok(Response::new(pb::AdminResponse {
            message: format!("initialized with {count} voters"),
        }))
    }

    async fn add_learner(
        &self,
        req: GrpcRequest<pb::AddLearnerRequest>,
    ) -> GrpcResult<pb::AdminResponse> {
        let req = req.into_inner();
        let cell = hosted(self.cells.as_ref(), req.cell)?;
        let member = req
            .member
            .ok_or_else(|| Status::invalid_argument("member is required"))?;
        cell.add_learner(member.id, member.addr.clone()).await?;
        Ok(Response::new(pb::AdminResponse {
            message: format!("learner {} at {} caught up", member.id, member.addr),
        }))
    }

    async fn change_membership(
        &self,
        req: GrpcRequest<pb::ChangeMembershipRequest>,
    ) -> GrpcResult<pb::AdminResponse> {
        let req = req.into_inner();
        let cell = hosted(self.cells.as_ref(), req.cell)?;
        let voters: BTreeSet<u64> = req.voters.into_iter().collect();
        if voters.is_empty() {
            return Err(Status::invalid_argument("a cell needs at least one voter"));
        }
        cell.change_membership(voters.clone(), req.retain).await?;
        Ok(Response::new(pb::AdminResponse {
            message: format!("voters are now {voters:?}"),
        }))
    }

    async fn install_credential(
        &self,
        req: GrpcRequest<pb::InstallCredentialRequest>,
    ) -> GrpcResult<pb::InstallCredentialResponse> {
        let req = req.into_inner();
        let transport = self.cells.transport();
        let tls = transport.live().cloned().ok_or_else(|| {
            Status::failed_precondition("this server runs without TLS (--insecure)")
        })?;
        let identity = match (req.cert.is_empty(), req.key.is_empty()) {
            (true, true) => None,
            (false, false) => Some(crate::tls::Pem {
                cert: req.cert,
                key: req.key,
            }),
            _ => {
                return Err(Status::invalid_argument(
                    "cert and key come together (both empty: keep the current certificate)",
                ));
            }
        };
        // Checking and keeping the credential reads and writes a small file: off the
        // runtime's workers (TRAPS.md 13).
        let ca = req.ca;
        let installed = tokio::task::spawn_blocking(move || tls.install(ca, identity))
            .await
            .map_err(|e| Status::internal(format!("install task: {e}")))?;
        let presented = installed.map_err(|e| match e {
            crate::tls::TransportError::Keep(_) => Status::internal(e.to_string()),
            _ => Status::invalid_argument(e.to_string()),
        })?;
        Ok(Response::new(pb::InstallCredentialResponse {
            certificate: presented.certificate,
            issuer: presented.issuer,
            trusted: presented.trusted,
        }))
    }

    type SnapshotSaveStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<pb::SnapshotChunk, Status>> + Send + 'static>,
    >;

    async fn snapshot_save(
        &self,
        req: GrpcRequest<pb::SnapshotSaveRequest>,
    ) -> GrpcResult<Self::SnapshotSaveStream> {
        whip_board::admit::admit_snapshot(&snapshot_caller(&req)).map_err(
            |refusal| match refusal {
                whip_board::access::AccessRefusal::Anonymous => {
                    Status::unauthenticated(refusal.to_string())
                }
                _ => Status::permission_denied(refusal.to_string()),
            },
        )?;
        let id = req.into_inner().cell;
        let cell = hosted(self.cells.as_ref(), id)?;
        cell.backup_barrier().await?;
        let secret = self.cells.identity_secret(id)?.map(|s| s.to_vec());
        let (tx, rx) = tokio::sync::mpsc::channel(limits::SNAPSHOT_SAVE_QUEUE_CHUNKS);
        // The dump of a large state takes longer than a client's attempt: the stream is
        // answered at once and the dump's failure, if any, is its first item.
        tokio::spawn(async move {
            let dump = match cell.dump().await {
                Ok(dump) => dump,
                Err(e) => {
                    let _ = tx.send(Err(e.into())).await;
                    return;
                }
            };
            let body = crate::backup::Body {
                revision: dump.revision,
                cell: id,
                identity_secret: secret,
                pairs: dump.pairs,
            };
            let bytes = crate::backup::body_bytes(&body);
            tracing::info!(
                cell = id,
                revision = body.revision,
                bytes = bytes.len(),
                "snapshot taken for the operator"
            );
            send_chunks(bytes, body.revision, tx).await;
        });
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        Ok(Response::new(Box::pin(stream)))
    }
}

/// The caller of a snapshot as the board judges it: a call carrying an agent's token (or
/// naming an agent to act for) is that agent's, whatever its transport; else the principal
/// the transport proved.
fn snapshot_caller<T>(req: &GrpcRequest<T>) -> whip_board::access::Caller {
    use whip_board::access::Caller;
    let metadata = req.metadata();
    for header in [
        crate::identity::AGENT_HEADER,
        crate::identity::ACT_FOR_HEADER,
    ] {
        if let Some(agent) = metadata.get(header) {
            return Caller::Agent(agent.to_str().unwrap_or("?").to_string());
        }
    }
    match crate::tls::principal(req.extensions()) {
        crate::tls::Principal::Operator | crate::tls::Principal::Local => Caller::Operator,
        crate::tls::Principal::Node => Caller::Server,
        crate::tls::Principal::Anonymous => Caller::Anonymous,
    }
}

/// Stream `bytes` in chunks of at most [`limits::SNAPSHOT_SAVE_CHUNK_BYTES`]; the last one
/// carries the body's blake3. Stops when the client hangs up.
async fn send_chunks(
    bytes: Vec<u8>,
    revision: u64,
    tx: tokio::sync::mpsc::Sender<Result<pb::SnapshotChunk, Status>>,
) {
    let total_bytes = bytes.len() as u64;
    let hash = crate::backup::hash_hex(&bytes);
    let mut chunks = bytes.chunks(limits::SNAPSHOT_SAVE_CHUNK_BYTES).peekable();
    if chunks.peek().is_none() {
        let last = pb::SnapshotChunk {
            data: Vec::new(),
            revision,
            total_bytes,
            blake3: hash,
        };
        let _ = tx.send(Ok(last)).await;
        return;
    }
    while let Some(data) = chunks.next() {
        let blake3 = match chunks.peek() {
            Some(_) => String::new(),
            None => hash.clone(),
        };
        let chunk = pb::SnapshotChunk {
            data: data.to_vec(),
            revision,
            total_bytes,
            blake3,
        };
        if tx.send(Ok(chunk)).await.is_err() {
            return;
        }
    }
}

pub(super) struct RaftApi {
    pub(super) cells: Arc<dyn Cells>,
}

impl RaftApi {
    /// The hosted cell a blob is for and its decoded message.
    fn open<T: for<'de> serde::Deserialize<'de>>(
        &self,
        req: GrpcRequest<pb::Blob>,
    ) -> Result<(Cell, T), Status> {
        self.open_blob(req.into_inner())
    }

    fn open_blob<T: for<'de> serde::Deserialize<'de>>(
        &self,
        blob: pb::Blob,
    ) -> Result<(Cell, T), Status> {
        let cell = hosted(self.cells.as_ref(), blob.cell)?;
        let message = decode(&blob.data)
            .map_err(|e| Status::invalid_argument(format!("malformed message: {e}")))?;
        Ok((cell, message))
    }

    /// One AppendEntries, as the `AppendEntries` call and each item of a batch answer it.
    async fn append(&self, blob: pb::Blob) -> GrpcResult<pb::Blob> {
        let (cell, rpc): (Cell, openraft::raft::AppendEntriesRequest<TypeConfig>) =
            self.open_blob(blob)?;
        admit_raft(&cell, &rpc.vote)?;
        let (started, on, carries) = (Instant::now(), stages::here(), !rpc.entries.is_empty());
        let answer = cell.raft().append_entries(rpc).await;
        if carries {
            cell.stages()
                .record(Stage::FollowerAnswered, started.elapsed());
            cell.stages()
                .hop(Stage::FollowerAnswered, stages::switched(on));
        }
        blob_of(&answer)
    }

    /// One AppendEntries of a batch, given at most [`limits::HEARTBEAT_ITEM_TIMEOUT_MS`].
    async fn append_item(&self, blob: pb::Blob) -> pb::BlobAnswer {
        let wait = std::time::Duration::from_millis(limits::HEARTBEAT_ITEM_TIMEOUT_MS);
        let result = match tokio::time::timeout(wait, self.append(blob)).await {
            Ok(answer) => answer.map(Response::into_inner),
            Err(_) => Err(Status::unavailable("the cell did not answer in time")),
        };
        crate::heartbeats::to_answer(result)
    }
}

fn blob_of<T: serde::Serialize>(value: &T) -> GrpcResult<pb::Blob> {
    Ok(Response::new(pb::Blob {
        data: encode(value),
        cell: 0,
    }))
}

/// Why a Raft message from a certified peer was refused before it reached the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RaftRefusal {
    /// The sender is not a member (voter or learner) of this cell as this member knows it.
    NotMember {
        /// The claimed sender.
        sender: u64,
    },
    /// The message's term is implausibly far ahead of ours (openraft 0.9.25 panics on
    /// `u64::MAX` and persists the vote first, bricking the cell: TRAPS.md 0).
    TermAbsurd {
        /// The message's term.
        term: u64,
        /// Our current term.
        current: u64,
    },
}

impl RaftRefusal {
    fn status(&self) -> Status {
        match self {
            RaftRefusal::NotMember { sender } => Status::permission_denied(format!(
                "not_member: node {sender} is not a member of this cell"
            )),
            RaftRefusal::TermAbsurd { term, current } => Status::invalid_argument(format!(
                "term_absurd: term {term} is more than {} ahead of the current term {current}",
                limits::RAFT_TERM_AHEAD_MAX
            )),
        }
    }
}

/// Whether a message of `vote` (its sender and term) may reach `cell`'s Raft core. A member
/// that knows no membership yet (a new learner before its first entries) takes any sender.
fn admit_raft(cell: &Cell, vote: &openraft::Vote<u64>) -> Result<(), Status> {
    let refusal = {
        let metrics = cell.raft().metrics();
        let m = metrics.borrow();
        let (sender, term) = (vote.leader_id().node_id, vote.leader_id().term);
        let membership = m.membership_config.membership();
        let known = membership.nodes().next().is_some();
        if term > m.current_term.saturating_add(limits::RAFT_TERM_AHEAD_MAX) {
            Some(RaftRefusal::TermAbsurd {
                term,
                current: m.current_term,
            })
        } else if known && membership.get_node(&sender).is_none() {
            Some(RaftRefusal::NotMember { sender })
        } else {
            None
        }
    };
    match refusal {
        None => Ok(()),
        Some(refusal) => {
            let total = cell.count_raft_refusal();
            tracing::warn!(
                cell = cell.cell_id(),
                ?refusal,
                total,
                "raft message refused"
            );
            Err(refusal.status())
        }
    }
}

#[tonic::async_trait]
impl raft_server::Raft for RaftApi {
    async fn append_entries(&self, req: GrpcRequest<pb::Blob>) -> GrpcResult<pb::Blob> {
        self.append(req.into_inner()).await
    }

    async fn append_batch(&self, req: GrpcRequest<pb::BlobBatch>) -> GrpcResult<pb::BlobAnswers> {
        let blobs = req.into_inner().blobs;
        if blobs.len() > limits::HEARTBEAT_BATCH_MAX {
            return Err(Status::invalid_argument(format!(
                "a batch carries at most {} messages, not {}",
                limits::HEARTBEAT_BATCH_MAX,
                blobs.len()
            )));
        }
        let answers = blobs.into_iter().map(|blob| self.append_item(blob));
        let answers = futures::future::join_all(answers).await;
        let boot = self.cells.boot_id();
        Ok(Response::new(pb::BlobAnswers { answers, boot }))
    }

    async fn vote(&self, req: GrpcRequest<pb::Blob>) -> GrpcResult<pb::Blob> {
        let (cell, rpc): (Cell, openraft::raft::VoteRequest<u64>) = self.open(req)?;
        admit_raft(&cell, &rpc.vote)?;
        blob_of(&cell.raft().vote(rpc).await)
    }

    async fn install_snapshot(&self, req: GrpcRequest<pb::Blob>) -> GrpcResult<pb::Blob> {
        let (cell, rpc): (Cell, openraft::raft::InstallSnapshotRequest<TypeConfig>) =
            self.open(req)?;
        admit_raft(&cell, &rpc.vote)?;
        blob_of(&cell.install_snapshot(rpc).await)
    }

    async fn forward(&self, req: GrpcRequest<pb::Blob>) -> GrpcResult<pb::Blob> {
        let (cell, requests): (Cell, Vec<Request>) = self.open(req)?;
        let results =
            futures::future::join_all(requests.into_iter().map(|r| cell.submit_forwarded(r))).await;
        blob_of(&results)
    }

    async fn read(&self, req: GrpcRequest<pb::Blob>) -> GrpcResult<pb::Blob> {
        let (cell, query): (Cell, Query) = self.open(req)?;
        blob_of(&cell.read_forwarded(query).await)
    }
}
