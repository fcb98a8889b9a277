//! Which credentials this process connects and serves with.
//!
//! The cluster CA and the operator credential live in the user's whip config
//! (`WHIP_CONFIG_DIR`, default `~/.config/whip`; 0600 files in a 0700 directory) and are made
//! on first use: the user who starts a cluster is its operator, so the quickstarts need no
//! extra step. A server keeps its node credential in `DATA/tls/node.json`, issued by that CA
//! when it first starts; a node on another machine gets one copied there
//! (`whip credential issue --role node --out FILE`). `--insecure` (loopback only) turns TLS
//! off for servers and clients alike.

use std::path::Path;

use anyhow::{Context, Result};
use whip_cell::tls::{self, Principal, Transport};

use crate::Global;

/// `--insecure` sends tokens in plaintext metadata: the CLI dials only loopback with it, as
/// servers listen only on loopback with it. A `--cell` address elsewhere (or a host name
/// other than `localhost`) is refused before anything is sent.
pub(crate) fn check_insecure(global: &Global) -> Result<()> {
    let (true, Some(spec)) = (global.insecure, &global.cell) else {
        return Ok(());
    };
    for addr in crate::connect::cell_addrs(spec) {
        let loopback = match addr.parse::<std::net::SocketAddr>() {
            Ok(socket) => socket.ip().is_loopback(),
            Err(_) => addr
                .rsplit_once(':')
                .is_some_and(|(host, _)| host == "localhost"),
        };
        if !loopback {
            anyhow::bail!(
                "--insecure dials only loopback (tokens would cross the network in plaintext), \
                 got {addr}"
            );
        }
    }
    Ok(())
}

/// Install the transport every client of this process uses: the operator credential (or
/// plaintext with `--insecure`). The credential is looked up (and, for the user who runs
/// the cluster, made) only when a client first dials an address: a command on the
/// embedded store never does, so it leaves the whip config alone. A config directory that
/// cannot be written leaves clients without TLS, which TLS servers refuse; the error is
/// logged.
pub(crate) fn install_client_default(global: &Global) {
    if global.insecure {
        tls::set_client_default(Transport::Insecure);
        return;
    }
    tls::set_client_default_source(|| client_transport(&tls::config_dir()));
}

/// The operator's transport from the whip config `config`, or (an agent's machine: the
/// cluster's CA certificate copied there, no CA key and no operator credential) one that
/// verifies servers without a certificate of its own.
fn client_transport(config: &Path) -> Transport {
    let ca_only = !config.join("ca.json").exists() && !config.join("operator.json").exists();
    if ca_only && let Ok(ca) = std::fs::read_to_string(config.join("ca.pem")) {
        let credentials = tls::Credentials { ca, identity: None };
        return Transport::try_tls(credentials).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "ca.pem does not parse; clients connect without TLS");
            Transport::Insecure
        });
    }
    let transport = tls::operator_credentials(config)
        .map_err(anyhow::Error::from)
        .and_then(|credentials| Ok(Transport::try_tls(credentials)?));
    transport.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "no operator credential; clients connect without TLS");
        Transport::Insecure
    })
}

/// The transport a server whose data lives in `data_dir` serves and reaches peers with.
pub(crate) fn server_transport(global: &Global, data_dir: &Path) -> Result<Transport> {
    if global.insecure {
        return Ok(Transport::Insecure);
    }
    let config = tls::config_dir();
    if !tls::node_credential_path(data_dir).exists() {
        // The user who runs the first node of a cluster on this machine keeps its CA.
        tls::Authority::load_or_create(&config)
            .with_context(|| format!("cluster CA in {}", config.display()))?;
    }
    let credentials = tls::node_credentials(data_dir, &config)?;
    let home = tls::node_credential_path(data_dir);
    Transport::kept(credentials, home.clone())
        .with_context(|| format!("node credential {}", home.display()))
}

/// `whip credential issue --role node|operator --out FILE`: a credential of this user's
/// cluster CA for another machine (copy a node's to its `DATA/tls/node.json`, an operator's
/// to `~/.config/whip/operator.json`).
pub(crate) fn issue(global: &Global, role: &str, out: &Path) -> Result<std::process::ExitCode> {
    let role = match role {
        "node" => Principal::Node,
        "operator" => Principal::Operator,
        other => anyhow::bail!("--role {other:?} is not node or operator"),
    };
    let config = tls::config_dir();
    let authority = tls::Authority::load(&config)?.ok_or_else(|| {
        anyhow::anyhow!(
            "no cluster CA in {}: the first `whip cell dev|serve` or `whip node serve` makes it",
            config.display()
        )
    })?;
    if out.exists() {
        anyhow::bail!("{} exists; remove it first", out.display());
    }
    authority.credentials_in(out, role)?;
    if global.json {
        crate::output::json(
            &serde_json::json!({"role": format!("{role:?}").to_lowercase(), "out": out}),
        );
    } else {
        crate::output::line(&format!(
            "{role:?} credential written to {} (0600)",
            out.display()
        ));
    }
    Ok(std::process::ExitCode::SUCCESS)
}
