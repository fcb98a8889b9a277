//! `whip kv txn BODY`: an etcd-like transaction, JSON in and JSON out. The cell decides it
//! in one apply (`whip_board::kv_txn`); this file only translates.
//!
//! BODY (or `-` to read it from stdin), every list optional:
//! `{"compare":[{"key":K,"version":N,"op":"="} | {"key":K,"value":V,"op":"!="}…],
//!   "success":[{"put":{"key":K,"value":V}} | {"delete":{"key":K}} | {"get":{"key":K}}…],
//!   "failure":[…]}`; `op` is `=` (the default), `!=`, `<` or `>`.
//! Answer: `{"succeeded":bool,"fence":N,"responses":[{"put":{"key","version"}} |
//! {"delete":{"key","deleted","version"}} | {"get":{"key","found","value","version"}}…]}`.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use whip_cell::CellClient;
use whip_proto::v1 as pb;

use crate::Global;
use crate::output;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    #[serde(default)]
    compare: Vec<CompareJson>,
    #[serde(default)]
    success: Vec<OpJson>,
    #[serde(default)]
    failure: Vec<OpJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompareJson {
    key: String,
    version: Option<u64>,
    value: Option<String>,
    op: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum OpJson {
    Put { key: String, value: String },
    Delete { key: String },
    Get { key: String },
}

impl OpJson {
    fn key(&self) -> &str {
        match self {
            OpJson::Put { key, .. } | OpJson::Delete { key } | OpJson::Get { key } => key,
        }
    }
}

fn compare_pb(c: CompareJson) -> Result<pb::KvTxnCompare> {
    use pb::kv_txn_compare::Target;
    let op = match c.op.as_deref().unwrap_or("=") {
        "=" | "==" => pb::KvCompareOp::KvCompareEqual,
        "!=" => pb::KvCompareOp::KvCompareNotEqual,
        "<" => pb::KvCompareOp::KvCompareLess,
        ">" => pb::KvCompareOp::KvCompareGreater,
        other => bail!("compare on {:?}: op {other:?} is not =, !=, < or >", c.key),
    };
    let target = match (c.version, c.value) {
        (Some(version), None) => Target::Version(version),
        (None, Some(value)) => Target::Value(value.into_bytes()),
        _ => bail!(
            "compare on {:?} needs exactly one of \"version\" or \"value\"",
            c.key
        ),
    };
    Ok(pb::KvTxnCompare {
        key: c.key.into_bytes(),
        op: op as i32,
        target: Some(target),
    })
}

fn op_pb(op: &OpJson) -> pb::KvTxnOp {
    use pb::kv_txn_op::Op;
    let op = match op {
        OpJson::Put { key, value } => Op::Put(pb::KvPair {
            key: key.clone().into_bytes(),
            value: value.clone().into_bytes(),
        }),
        OpJson::Delete { key } => Op::Delete(key.clone().into_bytes()),
        OpJson::Get { key } => Op::Get(key.clone().into_bytes()),
    };
    pb::KvTxnOp { op: Some(op) }
}

/// Read BODY (`-`: stdin) as a transaction; a malformed one is refused before any call.
fn parse(body: &str) -> Result<Body> {
    let text = match body {
        "-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("read the transaction from stdin")?;
            text
        }
        inline => inline.to_string(),
    };
    serde_json::from_str(&text).context(
        "the transaction is not valid: expected {\"compare\":[…],\"success\":[…],\
         \"failure\":[…]} (see `whip kv txn --help`)",
    )
}

/// One operation's answer as JSON and as a line of text.
fn answer(op: &OpJson, result: Option<&pb::KvTxnOpResult>) -> Result<(Value, String)> {
    use pb::kv_txn_op_result::Result as R;
    let key = op.key();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    Ok(match (op, result.and_then(|r| r.result.as_ref())) {
        (OpJson::Put { .. }, Some(R::PutVersion(version))) => (
            json!({"put": {"key": key, "version": version}}),
            format!("put {key} version={version}"),
        ),
        (OpJson::Delete { .. }, Some(R::DeleteVersion(version))) => (
            json!({"delete": {"key": key, "deleted": *version > 0, "version": version}}),
            match version {
                0 => format!("delete {key} (absent)"),
                v => format!("delete {key} version={v}"),
            },
        ),
        (OpJson::Get { .. }, Some(R::Get(got))) => (
            json!({"get": {"key": key, "found": got.found, "value": text(&got.value),
                "version": got.version}}),
            match got.found {
                true => format!("get {key} = {} (version {})", text(&got.value), got.version),
                false => format!("get {key} (absent)"),
            },
        ),
        (_, other) => bail!("the cell answered {other:?} to an operation on {key:?}"),
    })
}

/// `whip kv txn BODY`.
pub(crate) async fn run(global: &Global, c: &CellClient, body: &str) -> Result<ExitCode> {
    let body = parse(body)?;
    let compares = body.compare.into_iter().map(compare_pb);
    let request = pb::KvTxnIfRequest {
        compares: compares.collect::<Result<_>>()?,
        success: body.success.iter().map(op_pb).collect(),
        failure: body.failure.iter().map(op_pb).collect(),
        ..Default::default()
    };
    let r = c.kv_txn_if(request).await?;
    let ran = match r.succeeded {
        true => &body.success,
        false => &body.failure,
    };
    let mut responses = Vec::new();
    let mut lines = vec![match r.succeeded {
        true => format!("succeeded: the success branch ran (fence {})", r.fence),
        false => format!("failed: the failure branch ran (fence {})", r.fence),
    }];
    for (at, op) in ran.iter().enumerate() {
        let (value, line) = answer(op, r.responses.get(at))?;
        responses.push(value);
        lines.push(line);
    }
    let value = json!({"succeeded": r.succeeded, "fence": r.fence, "responses": responses});
    match global.json {
        true => output::json(&value),
        false => output::line(&lines.join("\n")),
    }
    Ok(ExitCode::SUCCESS)
}
