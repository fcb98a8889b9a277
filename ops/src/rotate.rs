//! `whip fabric rotate-certs`: roll every node of a fabric onto new certificates while it
//! serves, no restart.
//!
//! To a new CA (the default) in three phases, each run on every node before the next:
//! 1. **trust**: every node trusts the old and the new CA (its certificate unchanged);
//! 2. **leaf**: every node gets a new node certificate of the new CA (still trusting both);
//! 3. **drop**: every node trusts only the new CA.
//!
//! Each node is told through the admin call `InstallCredential`, which only the operator's
//! credential may make: the node checks the credential, keeps it in `DATA/tls/node.json`
//! and accepts and makes new connections with it; open connections keep theirs. A call
//! rather than a file watch or SIGHUP because it works for nodes on other machines (the
//! CLI needs no access to their data directories), it is authenticated by the operator's
//! certificate, and it answers: the node says what it now presents, or why it refused,
//! before the next phase starts. The operator's own files move along: after **trust** the
//! operator credential and `ca.pem` hold both CAs, after **leaf** the operator has a
//! certificate of the new CA, after **drop** `ca.json` is the new CA. The new CA waits in
//! `ca.next.json` until then, so a run stopped by a failing node is finished by running the
//! command again (every phase can be repeated). `--keep-ca` runs only **leaf**, with the
//! current CA.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use serde::Serialize;
use whip_cell::tls::{self, Authority, Principal};
use whip_proto::v1 as pb;
use whip_proto::v1::admin_client::AdminClient;

use crate::Global;
use crate::output;

/// What `whip fabric rotate-certs` takes.
#[derive(clap::Args, Debug)]
pub(crate) struct RotateArgs {
    /// Keep the cluster CA: issue every node a new certificate of the current CA.
    #[arg(long)]
    keep_ca: bool,
    /// Stop before the old CA is dropped (every node trusts both, so machines that only
    /// have the old `ca.pem` can be given the new one); run again without it to finish.
    #[arg(long, conflicts_with = "keep_ca")]
    keep_old_ca: bool,
}

/// One step of a rotation, run on every node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    /// Trust the old and the new CA.
    Trust,
    /// Present a new certificate.
    Leaf,
    /// Trust only the new CA.
    Drop,
}

/// What one node answered in one phase.
#[derive(Debug, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
enum NodeResult {
    /// The node serves with the credential now.
    Installed {
        /// Fingerprint of the certificate it presents.
        certificate: String,
        /// Fingerprint of the CA that issued it.
        issuer: String,
        /// Fingerprints of the CAs it trusts.
        trusted: Vec<String>,
    },
    /// The node refused or could not be reached; the rotation stops after this phase.
    Failed {
        /// Why.
        error: String,
    },
}

#[derive(Debug, Serialize)]
struct NodeStep {
    node: u64,
    addr: String,
    #[serde(flatten)]
    result: NodeResult,
}

#[derive(Debug, Serialize)]
struct PhaseReport {
    phase: Phase,
    nodes: Vec<NodeStep>,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    /// Every node presents a certificate of the (new) CA and trusts only it.
    Rotated,
    /// Every node presents a certificate of the new CA and still trusts the old one.
    OldCaKept,
    /// A node failed a phase; nothing after it ran (run the command again).
    Stopped,
}

#[derive(Debug, Serialize)]
struct Report {
    outcome: Outcome,
    /// Fingerprint of the CA the fabric trusted before.
    old_ca: String,
    /// Fingerprint of the CA it moves to (the same with `--keep-ca`).
    new_ca: String,
    phases: Vec<PhaseReport>,
}

/// The CAs of a rotation.
struct Plan {
    old: Authority,
    next: Authority,
    keep_ca: bool,
}

impl Plan {
    /// The current CA and the next one: kept in `ca.next.json` from an earlier run, else
    /// made now and kept there.
    fn new(config: &Path, keep_ca: bool) -> Result<Plan> {
        let old = Authority::load(config)?.ok_or_else(|| {
            anyhow!(
                "no cluster CA in {}: run rotate-certs where the CA is kept",
                config.display()
            )
        })?;
        let next_file = config.join("ca.next.json");
        let next = if keep_ca {
            Authority::load(config)?.expect("loaded just above")
        } else if let Some(next) = Authority::load_file(&next_file)? {
            next
        } else {
            let made = Authority::generate()?;
            made.store(&next_file)?;
            made
        };
        Ok(Plan { old, next, keep_ca })
    }

    fn phases(&self, keep_old_ca: bool) -> Vec<Phase> {
        match (self.keep_ca, keep_old_ca) {
            (true, _) => vec![Phase::Leaf],
            (false, true) => vec![Phase::Trust, Phase::Leaf],
            (false, false) => vec![Phase::Trust, Phase::Leaf, Phase::Drop],
        }
    }

    /// Both CAs, old first.
    fn both(&self) -> Result<String> {
        Ok(tls::bundle(&[self.old.cert_pem(), self.next.cert_pem()])?)
    }

    /// What a node is sent in `phase` (a fresh certificate in **leaf**).
    fn request(&self, phase: Phase) -> Result<pb::InstallCredentialRequest> {
        Ok(match phase {
            Phase::Trust => pb::InstallCredentialRequest {
                ca: self.both()?,
                ..Default::default()
            },
            Phase::Leaf => {
                let issued = self.next.issue(Principal::Node)?;
                pb::InstallCredentialRequest {
                    ca: self.both()?,
                    cert: issued.cert,
                    key: issued.key,
                }
            }
            Phase::Drop => pb::InstallCredentialRequest {
                ca: self.next.cert_pem().to_string(),
                ..Default::default()
            },
        })
    }

    /// Move the operator's own files along after `phase` ran on every node, and connect
    /// with the result from now on.
    fn after(&self, phase: Phase, config: &Path) -> Result<()> {
        let path = config.join("operator.json");
        let mut operator = tls::load_credentials(&path)?
            .ok_or_else(|| anyhow!("no operator credential at {}", path.display()))?;
        if phase == Phase::Leaf {
            operator = self.next.credentials(Principal::Operator)?;
        }
        operator.ca = match phase {
            Phase::Trust | Phase::Leaf => self.both()?,
            Phase::Drop => self.next.cert_pem().to_string(),
        };
        tls::store_credentials(&path, &operator)?;
        tls::write_private(&config.join("ca.pem"), operator.ca.as_bytes())?;
        if phase == Phase::Drop {
            self.next.store(&config.join("ca.json"))?;
            let next_file = config.join("ca.next.json");
            std::fs::remove_file(&next_file)
                .with_context(|| format!("remove {}", next_file.display()))?;
        }
        if let Some(live) = tls::client_default().live() {
            live.replace(operator)?;
        }
        Ok(())
    }
}

/// The nodes of the fabric `--cell` names: (id, address).
async fn fabric_nodes(global: &Global) -> Result<Vec<(u64, String)>> {
    let mut client = crate::fabriccmd::node_client(global)?;
    let status = client
        .fabric_status(pb::FabricStatusRequest {})
        .await
        .map_err(|s| anyhow!("fabric status: {}", s.message()))?
        .into_inner();
    if status.nodes.is_empty() {
        anyhow::bail!("the fabric lists no nodes (is it initialized?)");
    }
    Ok(status.nodes.into_iter().map(|n| (n.id, n.addr)).collect())
}

/// Send `request` to the node at `addr`.
async fn install(addr: &str, request: pb::InstallCredentialRequest) -> NodeResult {
    let mut client = AdminClient::new(whip_cell::network::endpoint(addr).connect_lazy());
    let limit = Duration::from_millis(crate::limits::ROTATE_CALL_TIMEOUT_MS);
    match tokio::time::timeout(limit, client.install_credential(request)).await {
        Ok(Ok(answer)) => {
            let answer = answer.into_inner();
            NodeResult::Installed {
                certificate: answer.certificate,
                issuer: answer.issuer,
                trusted: answer.trusted,
            }
        }
        Ok(Err(status)) => NodeResult::Failed {
            error: status.message().to_string(),
        },
        Err(_) => NodeResult::Failed {
            error: format!("no answer within {} ms", limit.as_millis()),
        },
    }
}

fn progress(global: &Global, phase: Phase, step: &NodeStep) {
    if global.json {
        return;
    }
    let what = match &step.result {
        NodeResult::Installed {
            certificate,
            issuer,
            trusted,
        } => format!(
            "presents {certificate} of CA {issuer}, trusts {}",
            trusted.join(" ")
        ),
        NodeResult::Failed { error } => format!("FAILED: {error}"),
    };
    let phase = format!("{phase:?}").to_lowercase();
    output::line(&format!(
        "{phase:5} node {} {}: {what}",
        step.node, step.addr
    ));
}

/// Run `phase` on every node, one after another.
async fn run_phase(
    global: &Global,
    plan: &Plan,
    phase: Phase,
    nodes: &[(u64, String)],
) -> Result<PhaseReport> {
    let mut steps = Vec::new();
    for (node, addr) in nodes {
        let result = install(addr, plan.request(phase)?).await;
        let step = NodeStep {
            node: *node,
            addr: addr.clone(),
            result,
        };
        progress(global, phase, &step);
        steps.push(step);
    }
    Ok(PhaseReport {
        phase,
        nodes: steps,
    })
}

/// `whip fabric rotate-certs`.
pub(crate) async fn rotate(global: &Global, args: RotateArgs) -> Result<ExitCode> {
    let config = tls::config_dir();
    let nodes = fabric_nodes(global).await?;
    let plan = Plan::new(&config, args.keep_ca)?;
    let mut report = Report {
        outcome: Outcome::Rotated,
        old_ca: tls::fingerprint(tls::certificates(plan.old.cert_pem())?[0].as_ref()),
        new_ca: tls::fingerprint(tls::certificates(plan.next.cert_pem())?[0].as_ref()),
        phases: Vec::new(),
    };
    for phase in plan.phases(args.keep_old_ca) {
        let done = run_phase(global, &plan, phase, &nodes).await?;
        let failed = done
            .nodes
            .iter()
            .any(|step| matches!(step.result, NodeResult::Failed { .. }));
        report.phases.push(done);
        if failed {
            report.outcome = Outcome::Stopped;
            break;
        }
        plan.after(phase, &config)?;
    }
    if report.outcome == Outcome::Rotated && args.keep_old_ca {
        report.outcome = Outcome::OldCaKept;
    }
    print(global, &report);
    Ok(match report.outcome {
        Outcome::Stopped => ExitCode::from(1),
        Outcome::Rotated | Outcome::OldCaKept => ExitCode::SUCCESS,
    })
}

fn print(global: &Global, report: &Report) {
    if global.json {
        output::json(&serde_json::to_value(report).expect("the report encodes"));
        return;
    }
    output::line(&match report.outcome {
        Outcome::Rotated => format!(
            "rotated: every node presents a certificate of CA {} and trusts only it",
            report.new_ca
        ),
        Outcome::OldCaKept => format!(
            "every node presents a certificate of CA {} and still trusts CA {}: run again \
             without --keep-old-ca to drop it",
            report.new_ca, report.old_ca
        ),
        Outcome::Stopped => "stopped: a node failed (above); run the command again to \
                             finish once it is back"
            .to_string(),
    });
}
