//! Certificate rotation without downtime, as an operator runs it: `whip node serve` × 3 with
//! a whip config of their own (their CA and operator credential), `whip fabric init`, a
//! steady write load from clients connected before, then `whip fabric rotate-certs --json`
//! to a new CA. No write fails (beyond the client's own retries) and writes go on while it
//! runs. Afterwards every node presents a certificate of the new CA to a raw TLS handshake,
//! a client holding only the old CA is refused, and so is the old CA's operator
//! certificate; the CLI works with the operator credential the rotation left. A node
//! restarted from its kept credential rejoins, and with another node killed every cell
//! still elects and commits: the connections made after the rotation between nodes use
//! the installed credentials on both ends.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_rustls::rustls;
use whip_cell::CellClient;
use whip_cell::tls::{self, Authority, Credentials, Transport};
use whip_proto::v1 as pb;
use whip_tests::fabric::ProcessFabric;
use whip_tests::{wait_for, whip_json_in as whip_in};

/// A raw TLS handshake with `addr`, trusting only the CAs of `roots_pem` and presenting no
/// certificate: the DER of the certificate the server presented.
async fn handshake(addr: &str, roots_pem: &str) -> Result<Vec<u8>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in tls::certificates(roots_pem).unwrap() {
        roots.add(cert).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from(tls::NODE_NAME).unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (_, session) = stream.get_ref();
    let presented = session.peer_certificates().ok_or("no certificate")?;
    Ok(presented[0].to_vec())
}

/// Writes through one client per node until `stop`: counts of successes, failures.
struct Load {
    ok: Arc<AtomicU64>,
    errors: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    async fn start(addrs: &[String], transport: &Transport) -> Load {
        let clients: Vec<CellClient> = addrs
            .iter()
            .map(|a| CellClient::connect_with(std::slice::from_ref(a), transport).unwrap())
            .collect();
        // Each client's connection is made (and every cell has a leader) before the load.
        for (i, client) in clients.iter().enumerate() {
            wait_for("a first write", Duration::from_secs(20), || async move {
                client.kv_put(put(&format!("warm-{i}"))).await.is_ok()
            })
            .await;
        }
        let (ok, errors, stop) = (Arc::default(), Arc::default(), Arc::default());
        let task = tokio::spawn(load_loop(
            clients,
            Arc::clone(&ok),
            Arc::clone(&errors),
            Arc::clone(&stop),
        ));
        Load {
            ok,
            errors,
            stop,
            task,
        }
    }

    fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    async fn wait_past(&self, count: u64) {
        let ok = &self.ok;
        wait_for("writes to go on", Duration::from_secs(20), || async move {
            ok.load(Ordering::Relaxed) >= count
        })
        .await;
    }

    async fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        self.errors.lock().unwrap().clone()
    }
}

fn put(key: &str) -> pb::KvPutRequest {
    pb::KvPutRequest {
        key: key.as_bytes().to_vec(),
        value: b"v".to_vec(),
        ..Default::default()
    }
}

async fn load_loop(
    clients: Vec<CellClient>,
    ok: Arc<AtomicU64>,
    errors: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let client = &clients[(i % clients.len() as u64) as usize];
        match client.kv_put(put(&format!("load-{i}"))).await {
            Ok(_) => {
                ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => errors.lock().unwrap().push(format!("load-{i}: {e}")),
        }
        i += 1;
    }
}

/// The rotation's report: three phases, each installed on every node, ending on the new CA.
fn check_report(report: &serde_json::Value, old_ca: &str) {
    assert_eq!(report["outcome"], "rotated", "{report}");
    assert_eq!(report["old_ca"], old_ca, "{report}");
    let new_ca = report["new_ca"].as_str().expect("new_ca").to_string();
    assert_ne!(new_ca, old_ca);
    let phases = report["phases"].as_array().expect("phases");
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["trust", "leaf", "drop"], "{report}");
    for phase in phases {
        let nodes = phase["nodes"].as_array().expect("nodes");
        assert_eq!(nodes.len(), 3, "{phase}");
        for node in nodes {
            assert_eq!(node["result"], "installed", "{node}");
            let trusted = node["trusted"].as_array().unwrap();
            let (issuer, trusts) = match phase["phase"].as_str().unwrap() {
                "trust" => (old_ca, 2),
                "leaf" => (new_ca.as_str(), 2),
                _ => (new_ca.as_str(), 1),
            };
            assert_eq!(node["issuer"], issuer, "{node}");
            assert_eq!(trusted.len(), trusts, "{node}");
        }
    }
}

/// After the rotation: every node presents the certificate the drop phase reported, of
/// the new CA; a handshake trusting only the old CA fails.
async fn check_presented(fabric: &ProcessFabric, old: &Credentials, report: &serde_json::Value) {
    let new_pem = Authority::load(fabric.config_dir.as_deref().unwrap())
        .unwrap()
        .expect("ca.json")
        .cert_pem()
        .to_string();
    let new_ca = tls::fingerprint(tls::certificates(&new_pem).unwrap()[0].as_ref());
    assert_eq!(report["new_ca"], new_ca.as_str());
    let dropped = &report["phases"][2]["nodes"];
    for (i, addr) in fabric.addrs.iter().enumerate() {
        let leaf = handshake(addr, &new_pem)
            .await
            .expect("the new CA verifies it");
        assert_eq!(dropped[i]["addr"], addr.as_str());
        assert_eq!(dropped[i]["certificate"], tls::fingerprint(&leaf).as_str());
        let refused = handshake(addr, &old.ca).await;
        assert!(refused.is_err(), "{addr}: not a certificate of the old CA");
    }
    // A client holding only the old CA is refused.
    let old_only = Transport::try_tls(Credentials {
        ca: old.ca.clone(),
        identity: None,
    })
    .unwrap();
    let client = CellClient::connect_with(&fabric.addrs[..1], &old_only).unwrap();
    let refused = client.kv_put(put("old-ca-only")).await;
    assert!(refused.is_err(), "a client of the old CA is refused");
    // The old CA's operator certificate, even trusting the new CA: the server refuses it.
    let stale = Transport::try_tls(Credentials {
        ca: tls::bundle(&[&old.ca, &new_pem]).unwrap(),
        identity: old.identity.clone(),
    })
    .unwrap();
    let endpoint = whip_cell::network::endpoint_with(&fabric.addrs[1], &stale);
    let mut node = pb::node_client::NodeClient::new(endpoint.connect_lazy());
    let refused = node.fabric_status(pb::FabricStatusRequest {}).await;
    assert!(refused.is_err(), "the old operator certificate is refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotate_certs_to_a_new_ca_under_load() {
    let config = tempfile::tempdir().unwrap();
    let old_ca = Authority::load_or_create(config.path()).unwrap();
    let old = tls::operator_credentials(config.path()).unwrap();
    let old_fingerprint =
        tls::fingerprint(tls::certificates(old_ca.cert_pem()).unwrap()[0].as_ref());
    let mut fabric = ProcessFabric::start_in(3, config.path()).await;
    let via = fabric.addrs[0].clone();
    let mut init = vec![
        "fabric",
        "init",
        "--cells",
        "2",
        "--cell",
        via.as_str(),
        "--json",
    ];
    let node_args = fabric.node_args();
    init.extend(node_args.iter().map(String::as_str));
    let (ok, _, out) = whip_in(config.path(), &init);
    assert!(ok, "fabric init: {out}");

    let load = Load::start(&fabric.addrs, &Transport::try_tls(old.clone()).unwrap()).await;
    load.wait_past(20).await;
    let before = load.ok();
    let rotate = ["fabric", "rotate-certs", "--cell", via.as_str(), "--json"];
    let (ok, report, out) = whip_in(config.path(), &rotate);
    assert!(ok, "rotate-certs: {out} {report}");
    let during = load.ok() - before;
    check_report(&report, &old_fingerprint);
    load.wait_past(load.ok() + 20).await;
    let errors = load.stop().await;
    assert!(errors.is_empty(), "no write failed: {errors:?}");
    assert!(during > 0, "writes went on during the rotation");
    assert!(!config.path().join("ca.next.json").exists());

    check_presented(&fabric, &old, &report).await;
    let (ok, status, out) = whip_in(
        config.path(),
        &["fabric", "status", "--cell", via.as_str(), "--json"],
    );
    assert!(ok, "the operator's new credential: {out}");
    assert_eq!(
        status["nodes"].as_array().map(Vec::len),
        Some(3),
        "{status}"
    );

    restart_and_lose_a_node(&mut fabric, config.path(), &old).await;
}

/// Node 3 restarts from its kept credential; then node 1 dies: nodes 2 and 3 elect and
/// commit every cell over connections made with the new certificates only.
async fn restart_and_lose_a_node(fabric: &mut ProcessFabric, config: &Path, old: &Credentials) {
    fabric.kill(3);
    fabric.spawn(3);
    let operator = tls::operator_credentials(config).unwrap();
    let (new_cert, old_cert) = (&operator.identity, &old.identity);
    assert_ne!(
        new_cert.as_ref().unwrap().cert,
        old_cert.as_ref().unwrap().cert
    );
    let transport = Transport::try_tls(operator.clone()).unwrap();
    let client = CellClient::connect_with(&fabric.addrs[1..], &transport).unwrap();
    let (restarted, ca) = (&fabric.addrs[2], &operator.ca);
    wait_for(
        "node 3 serves again",
        Duration::from_secs(20),
        || async move { handshake(restarted, ca).await.is_ok() },
    )
    .await;
    fabric.kill(1);
    for i in 0..20 {
        let (client, key) = (&client, format!("after-restart-{i}"));
        let key = &key;
        wait_for(
            "a write without node 1",
            Duration::from_secs(30),
            || async move { client.kv_put(put(key)).await.is_ok() },
        )
        .await;
    }
}
