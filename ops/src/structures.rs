//! The other blackboard structures of a team (seed 003, "The blackboard"), built on the
//! fabric's primitives so they inherit replication, routing and fencing:
//!
//! - `whip doc`: a JSON document (a manifest, a file tree) with versioned compare-and-set;
//! - `whip frame`: a columnar frame, one row per file with build/test status columns;
//! - `whip artifacts`: a shared hash of artifact name → reference;
//! - `whip signal`: team signals, published by members (the sender is the proven caller)
//!   to an append-only ledger; subscribers (members) get a server stream of each new one;
//! - `whip lock`: a per-path edit lock or the repository-level run lock: a one-slot lease
//!   whose grant carries a fence (present it to whatever the lock guards).
//!
//! Keys carry the team as their tag (`doc/{team}/…`) and locks are owned by `team/{team}`:
//! the board routes them with the team, so they live on the team's cell beside its
//! record, only its members read or write them (`not_member` otherwise, decided in the
//! same apply), and `whip team dissolve` collects them. Every call acts for `--agent`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Subcommand;
use serde_json::{Map, Value, json};
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use crate::Global;
use crate::connect::session;
use crate::output::{self, Table, parse_duration_ms};

#[derive(Subcommand, Debug)]
pub(crate) enum DocCommand {
    /// Print the document and its version.
    Get { team: String, name: String },
    /// Replace the document if its version is --expect (0 = create).
    Put {
        team: String,
        name: String,
        /// The new document (JSON).
        #[arg(long)]
        value: String,
        #[arg(long)]
        expect: u64,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum FrameCommand {
    /// Set columns of one row (`--col build=ok --col test=failed`), merged into the row.
    Set {
        team: String,
        frame: String,
        row: String,
        #[arg(long = "col", required = true)]
        cols: Vec<String>,
    },
    /// Every row of the frame.
    Show { team: String, frame: String },
}

#[derive(Subcommand, Debug)]
pub(crate) enum ArtifactsCommand {
    /// Record an artifact (name → reference, e.g. a content hash or URL).
    Set {
        team: String,
        name: String,
        reference: String,
    },
    /// Every artifact of the team.
    List { team: String },
}

#[derive(Subcommand, Debug)]
pub(crate) enum SignalCommand {
    /// Publish a signal (JSON body) on a topic.
    Publish {
        team: String,
        topic: String,
        #[arg(long, default_value = "{}")]
        body: String,
    },
    /// Print signals of a topic after --after, then follow new ones (until --for ends).
    Subscribe {
        team: String,
        topic: String,
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long = "for")]
        duration: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum LockCommand {
    /// Take the edit lock of PATH (or the run lock with --repo): held with a fence, or
    /// contended.
    Acquire {
        team: String,
        /// The path to lock (omit with --repo).
        path: Option<String>,
        /// The repository-level run lock instead of a path lock.
        #[arg(long, conflicts_with = "path")]
        repo: bool,
        #[arg(long)]
        holder: String,
        #[arg(long, default_value = "5m")]
        ttl: String,
    },
    /// Give the lock back.
    Release {
        team: String,
        path: Option<String>,
        #[arg(long, conflicts_with = "path")]
        repo: bool,
        #[arg(long)]
        holder: String,
    },
}

/// A session acting for the CLI's agent: a team's blackboard is its members' alone.
async fn member_session(global: &Global) -> Result<crate::connect::Session> {
    crate::agent::authenticate(global, session(global).await?).await
}

pub(crate) fn key(kind: &str, team: &str, rest: &str) -> Vec<u8> {
    format!("{kind}/{{{team}}}/{rest}").into_bytes()
}

pub(crate) async fn read(c: &CellClient, key: Vec<u8>) -> Result<Option<(Vec<u8>, u64)>> {
    let r = c
        .kv_get(pb::KvGetRequest {
            key,
            ..Default::default()
        })
        .await?;
    Ok(r.found.then_some((r.value, r.version)))
}

pub(crate) async fn cas(
    c: &CellClient,
    key: Vec<u8>,
    value: Vec<u8>,
    expect: u64,
) -> Result<pb::KvWriteResponse> {
    let req = pb::KvPutRequest {
        key,
        value,
        expect_version: Some(expect),
        ..Default::default()
    };
    Ok(c.kv_put(req).await?)
}

/// Every key under `prefix`, page by page (a page stops at the server's byte cap too).
async fn scan(c: &CellClient, prefix: Vec<u8>) -> Result<Vec<(String, Vec<u8>)>> {
    let strip = prefix.len();
    let mut rows = Vec::new();
    let mut after_key = Vec::new();
    loop {
        let page = c
            .kv_range(pb::KvRangeRequest {
                prefix: prefix.clone(),
                after_key,
                limit: 0,
                ..Default::default()
            })
            .await?;
        rows.extend(page.entries.into_iter().map(|e| {
            (
                String::from_utf8_lossy(&e.key[strip..]).to_string(),
                e.value,
            )
        }));
        if page.resume_after.is_empty() {
            return Ok(rows);
        }
        after_key = page.resume_after;
    }
}

fn parse_json(text: &str, what: &str) -> Result<Value> {
    serde_json::from_str(text).with_context(|| format!("{what} is not JSON"))
}

fn show(global: &Global, value: Value, text: String) -> ExitCode {
    if global.json {
        output::json(&value);
    } else {
        output::line(&text);
    }
    ExitCode::SUCCESS
}

pub(crate) async fn doc(global: &Global, cmd: DocCommand) -> Result<ExitCode> {
    let session = member_session(global).await?;
    let c = &session.client;
    let result = async {
        Ok(match cmd {
            DocCommand::Get { team, name } => match read(c, key("doc", &team, &name)).await? {
                Some((bytes, version)) => {
                    let doc = parse_json(&String::from_utf8_lossy(&bytes), "the stored document")?;
                    show(
                        global,
                        json!({"doc": doc, "version": version}),
                        format!("{doc} (version {version})"),
                    )
                }
                None => show(
                    global,
                    json!({"doc": null, "version": 0}),
                    "(absent)".into(),
                ),
            },
            DocCommand::Put {
                team,
                name,
                value,
                expect,
            } => {
                let doc = parse_json(&value, "--value")?;
                let r = cas(
                    c,
                    key("doc", &team, &name),
                    doc.to_string().into_bytes(),
                    expect,
                )
                .await?;
                // A version mismatch is an answer (exit 0), as for `kv cas`.
                if r.code != Code::KvWritten as i32 {
                    return Ok(show(
                        global,
                        json!({"outcome": "version_mismatch", "version": r.version,
                            "current_version": r.current_version}),
                        format!(
                            "version mismatch: the document is at version {}",
                            r.current_version
                        ),
                    ));
                }
                show(
                    global,
                    json!({"outcome": "written", "version": r.version}),
                    format!("written version {}", r.version),
                )
            }
        })
    }
    .await;
    session.close().await;
    result
}

/// Merge `cols` into one frame row by compare-and-set, retrying on a concurrent change.
async fn frame_set(c: &CellClient, key: Vec<u8>, cols: &[String]) -> Result<(Value, u64)> {
    let mut update = Map::new();
    for col in cols {
        let (name, value) = col
            .split_once('=')
            .ok_or_else(|| anyhow!("column {col:?} is not NAME=VALUE"))?;
        update.insert(name.to_string(), Value::String(value.to_string()));
    }
    for _ in 0..64 {
        let (mut row, version) = match read(c, key.clone()).await? {
            Some((bytes, version)) => (serde_json::from_slice::<Value>(&bytes)?, version),
            None => (json!({}), 0),
        };
        if let Some(map) = row.as_object_mut() {
            map.extend(update.clone());
        }
        let r = cas(c, key.clone(), row.to_string().into_bytes(), version).await?;
        if r.code == Code::KvWritten as i32 {
            return Ok((row, r.version));
        }
    }
    bail!("the row kept changing underneath; try again")
}

pub(crate) async fn frame(global: &Global, cmd: FrameCommand) -> Result<ExitCode> {
    let session = member_session(global).await?;
    let c = &session.client;
    let result = async {
        Ok(match cmd {
            FrameCommand::Set {
                team,
                frame,
                row,
                cols,
            } => {
                let (value, version) =
                    frame_set(c, key("frame", &team, &format!("{frame}/{row}")), &cols).await?;
                show(
                    global,
                    json!({"row": row, "columns": value, "version": version}),
                    format!("{row}: {value}"),
                )
            }
            FrameCommand::Show { team, frame } => {
                let rows = scan(c, key("frame", &team, &format!("{frame}/"))).await?;
                let mut out = Map::new();
                for (row, bytes) in rows {
                    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                    out.insert(row, value);
                }
                let text = frame_table(&out).lines_or("no rows").join("\n");
                show(global, json!({"frame": frame, "rows": out}), text)
            }
        })
    }
    .await;
    session.close().await;
    result
}

/// A frame as a table: one line per row, one column per column name any row has.
fn frame_table(rows: &Map<String, Value>) -> Table {
    let columns: std::collections::BTreeSet<&String> = rows
        .values()
        .filter_map(Value::as_object)
        .flat_map(|cols| cols.keys())
        .collect();
    let header: Vec<&str> = std::iter::once("row")
        .chain(columns.iter().map(|c| c.as_str()))
        .collect();
    let mut table = Table::new(&header);
    for (row, value) in rows {
        let cell = |column: &String| match value.get(column) {
            None | Some(Value::Null) => "-".to_string(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        };
        let cells = std::iter::once(row.clone()).chain(columns.iter().map(|c| cell(c)));
        table.row(cells.collect());
    }
    table
}

pub(crate) async fn artifacts(global: &Global, cmd: ArtifactsCommand) -> Result<ExitCode> {
    let session = member_session(global).await?;
    let c = &session.client;
    let result = async {
        Ok(match cmd {
            ArtifactsCommand::Set {
                team,
                name,
                reference,
            } => {
                let req = pb::KvPutRequest {
                    key: key("artifacts", &team, &name),
                    value: reference.clone().into_bytes(),
                    expect_version: None,
                    ..Default::default()
                };
                let r = c.kv_put(req).await?;
                show(
                    global,
                    json!({"name": name, "reference": reference, "version": r.version}),
                    format!("{name} = {reference}"),
                )
            }
            ArtifactsCommand::List { team } => {
                let rows = scan(c, key("artifacts", &team, "")).await?;
                let map: Map<String, Value> = rows
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(String::from_utf8_lossy(v).into())))
                    .collect();
                let mut table = Table::new(&["name", "reference"]);
                for (k, v) in &rows {
                    table.row(vec![k.clone(), String::from_utf8_lossy(v).into_owned()]);
                }
                let text = table.lines_or("no artifacts").join("\n");
                show(global, json!({"artifacts": map}), text)
            }
        })
    }
    .await;
    session.close().await;
    result
}

pub(crate) async fn signal(global: &Global, cmd: SignalCommand) -> Result<ExitCode> {
    let session = crate::agent::authenticate(global, session(global).await?).await?;
    let c = &session.client;
    let result = async {
        match cmd {
            SignalCommand::Publish { team, topic, body } => {
                let body = parse_json(&body, "--body")?;
                let req = pb::SignalPublishRequest {
                    team,
                    topic,
                    body: body.to_string().into_bytes(),
                    idempotency_key: String::new(),
                };
                let r = c.signal_publish(req).await?;
                Ok(show(
                    global,
                    json!({"seq": r.seq}),
                    format!("published #{}", r.seq),
                ))
            }
            SignalCommand::Subscribe {
                team,
                topic,
                after,
                duration,
            } => {
                let until = match duration {
                    Some(text) => Some(
                        tokio::time::Instant::now()
                            + Duration::from_millis(
                                parse_duration_ms(&text).map_err(anyhow::Error::msg)?,
                            ),
                    ),
                    None => None,
                };
                follow(global, c, &team, &topic, after, until).await
            }
        }
    }
    .await;
    session.close().await;
    result
}

async fn follow(
    global: &Global,
    c: &CellClient,
    team: &str,
    topic: &str,
    after: u64,
    until: Option<tokio::time::Instant>,
) -> Result<ExitCode> {
    use futures::StreamExt;
    let mut stream = c
        .signal_subscribe(team.to_string(), topic.to_string(), after)
        .await?;
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            _ = sleep_until(until) => return Ok(ExitCode::SUCCESS),
            _ = crate::signals::stopped() => return Ok(ExitCode::SUCCESS),
        };
        match next {
            Some(Ok(e)) => {
                let body: Value = serde_json::from_slice(&e.entry).unwrap_or(Value::Null);
                show(
                    global,
                    json!({"seq": e.seq, "from": e.appended_by, "body": body}),
                    format!("#{} {}: {body}", e.seq, e.appended_by),
                );
            }
            Some(Err(status)) => bail!("subscription ended: {}", status.message()),
            None => bail!("the cell closed the subscription"),
        }
    }
}

/// Sleep until `until`, or forever.
async fn sleep_until(until: Option<tokio::time::Instant>) {
    match until {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn lock_id(team: &str, path: Option<&str>, repo: bool) -> Result<pb::ResourceId> {
    let (name, key) = match (path, repo) {
        (_, true) => ("run-lock", String::new()),
        (Some(path), false) => ("edit-lock", path.to_string()),
        (None, false) => bail!("name a PATH to lock, or --repo for the run lock"),
    };
    Ok(pb::ResourceId {
        owner: format!("team/{team}"),
        name: name.into(),
        key,
    })
}

pub(crate) async fn lock(global: &Global, cmd: LockCommand) -> Result<ExitCode> {
    let session = member_session(global).await?;
    let c = &session.client;
    let result = async {
        Ok(match cmd {
            LockCommand::Acquire {
                team,
                path,
                repo,
                holder,
                ttl,
            } => {
                let req = pb::LeaseAcquireRequest {
                    lease: Some(lock_id(&team, path.as_deref(), repo)?),
                    holder,
                    slots: 1,
                    ttl_ms: parse_duration_ms(&ttl).map_err(anyhow::Error::msg)?,
                    ..Default::default()
                };
                let r = c.lease_acquire(req).await?;
                lock_answer(global, &r)
            }
            LockCommand::Release {
                team,
                path,
                repo,
                holder,
            } => {
                let req = pb::LeaseReleaseRequest {
                    lease: Some(lock_id(&team, path.as_deref(), repo)?),
                    holder,
                    ..Default::default()
                };
                let r = c.lease_release(req).await?;
                lock_answer(global, &r)
            }
        })
    }
    .await;
    session.close().await;
    result
}

fn lock_answer(global: &Global, r: &pb::LeaseResponse) -> ExitCode {
    let outcome = crate::primitives::code_name(r.code);
    let holders: Vec<&str> = r.holders.iter().map(|h| h.holder.as_str()).collect();
    let text = match Code::try_from(r.code) {
        Ok(Code::LeaseHeld) => format!("held fence={}", r.fence),
        Ok(Code::LeaseContended) => format!("contended: held by {}", holders.join(", ")),
        _ => outcome.clone(),
    };
    show(
        global,
        json!({"outcome": outcome, "fence": r.fence, "holders": holders}),
        text,
    )
}
