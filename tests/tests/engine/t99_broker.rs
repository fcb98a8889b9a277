//! Goal (issue 36, item 4): a coercion reaches a model through `whip broker`, and the
//! provider key never enters the engine. Method: an OpenAI-compatible stub on loopback
//! stands in for the model service; a `whip broker` process holds the key (`secret set`,
//! from stdin) and issues the worker's token; `whip run` drives a program whose coerce is
//! bound to the stub through the broker (`--provider-config`, `WHIP_MODEL_BROKER_URL`,
//! `WHIP_MODEL_BROKER_TOKEN`).
//!
//! Checks: the key arrives at the stub (and only the injected copy); the store's files, the
//! instance's log, effects and runs, and everything `whip run` printed (debug logs on) hold
//! no byte of it. With the broker stopped, a new instance's coerce is blocked
//! `provider_health` (not failed), and the next worker pass after the broker returns
//! completes it. As an attacker: a token the broker never issued is refused 401, and an
//! issued token naming another secret, or the right secret for another provider, 403;
//! none of those reached the stub.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use whip_tests::model_stub::ModelStub;

const KEY: &str = "sk-test-SECRET-4242-only-the-model-sees-me";

const PROGRAM: &str = r#"use std.coercion

workflow Review

output result Done

class Done { verdict string }
class Decision { verdict "merge" | "revise" }

coerce review(text string) -> Decision {
  provider gpt
  prompt "Review {{ text }}. {{ ctx.output_format }}"
}

rule go when started => {
  coerce review("the patch") as rv
  after rv succeeds as d { complete result { verdict d.verdict } }
  after rv fails as f { complete result { verdict f.reason } }
}
"#;

struct Broker {
    addr: String,
    data: std::path::PathBuf,
    child: Option<Child>,
    /// The CA file the broker trusts for `https://` models (`SSL_CERT_FILE`), if any.
    ca_file: Option<std::path::PathBuf>,
}

impl Broker {
    fn start(&mut self) {
        let mut command = Command::new(crate::bin());
        if let Some(ca) = &self.ca_file {
            command.env("SSL_CERT_FILE", ca);
        }
        let child = command
            .args(["broker", "--bind", &self.addr, "--data"])
            .arg(&self.data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the broker");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&self.addr).is_err() {
            assert!(Instant::now() < deadline, "the broker never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn admin(&self, args: &[&str], stdin: &str) -> String {
        let mut child = Command::new(crate::bin())
            .args(["broker", "--data"])
            .arg(&self.data)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run whip broker");
        use std::io::Write;
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(stdin.as_bytes()).expect("write stdin");
        drop(input);
        crate::ok(&child.wait_with_output().expect("whip broker"))
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `whip ARGS` in `dir` as the worker: the broker's address and token, debug logs on.
fn worker(dir: &Path, broker: &Broker, token: &str, args: &[&str]) -> Output {
    Command::new(crate::bin())
        .current_dir(dir)
        .args(args)
        .env("WHIP_MODEL_BROKER_URL", format!("http://{}", broker.addr))
        .env("WHIP_MODEL_BROKER_TOKEN", token)
        .env("RUST_LOG", "debug")
        .output()
        .expect("run whip")
}

/// Every file under `dir`, concatenated.
fn all_bytes(dir: &Path, out: &mut Vec<u8>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            all_bytes(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.extend(bytes);
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// `whip run review.whip --wait --json --provider-config CONFIG`.
fn run_args(config: &str) -> [&str; 6] {
    let run = ["run", "review.whip", "--wait", "--json"];
    [run[0], run[1], run[2], run[3], "--provider-config", config]
}

/// The last stdout line of a `--json` command.
fn json_of(out: &Output) -> Value {
    let text = crate::ok(out);
    serde_json::from_str(text.lines().last().expect("a line")).expect("json")
}

fn setup(dir: &Path, stub: &ModelStub) -> (Broker, String) {
    let mut broker = Broker {
        addr: whip_tests::free_addrs(1)[0].to_string(),
        data: dir.join("broker-data"),
        child: None,
        ca_file: None,
    };
    broker.admin(
        &["secret", "set", "openai", "--provider", "gpt"],
        &format!("{KEY}\n"),
    );
    let issued = broker.admin(&["--json", "token", "issue", "--worker", "w1"], "");
    let issued: Value = serde_json::from_str(issued.trim()).expect("token json");
    let token = issued["token"].as_str().expect("a token").to_string();
    broker.start();
    let config = json!({"bindings": [{"provider_id": "gpt", "provider_kind": "openai-generic",
        "model": "stub-model", "base_url": format!("http://{}/v1", stub.addr),
        "credentials_ref": "secret:openai"}]});
    std::fs::write(dir.join("providers.json"), config.to_string()).unwrap();
    std::fs::write(dir.join("review.whip"), PROGRAM).unwrap();
    (broker, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coercion_through_the_broker_never_lets_the_key_into_the_engine() {
    let stub = ModelStub::start(r#"{"verdict": "merge"}"#).await;
    let dir = tempfile::tempdir().unwrap();
    let (mut broker, token) = setup(dir.path(), &stub);
    let run = run_args("providers.json");
    let out = worker(dir.path(), &broker, &token, &run);
    let report = json_of(&out);
    assert_eq!(
        report["terminal"]["payload"],
        json!({"verdict": "merge"}),
        "{report}"
    );
    let id = report["id"].as_str().expect("an id").to_string();

    let seen = stub.seen();
    assert_eq!(seen.len(), 1, "one model call");
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(
        seen[0]
            .header("idempotency-key")
            .is_some_and(|k| k.contains(&id))
    );
    let body: Value = serde_json::from_str(&seen[0].body).expect("a JSON body");
    assert_eq!(body["model"], "stub-model");
    no_key_in_the_engine(dir.path(), (&broker, &token), &id, &out);
    blocked_while_the_broker_is_down(dir.path(), (&mut broker, &token), &stub);
}

/// With the broker stopped a new instance's coerce is blocked `provider_health`; once the
/// broker is back, one worker pass completes it.
fn blocked_while_the_broker_is_down(
    dir: &Path,
    (broker, token): (&mut Broker, &str),
    stub: &ModelStub,
) {
    broker.stop();
    let idle = [
        "run",
        "review.whip",
        "--json",
        "--provider-config",
        "providers.json",
    ];
    let report = json_of(&worker(dir, broker, token, &idle));
    assert_eq!(
        report["status"], "running",
        "a broker that is down is no failure: {report}"
    );
    let waiting = report["id"].as_str().expect("an id").to_string();
    let effects = json_of(&worker(
        dir,
        broker,
        token,
        &["effects", &waiting, "--json"],
    ));
    let coerce = &effects[0];
    assert_eq!(coerce["kind"], "schema.coerce");
    assert_eq!(coerce["state"], "blocked", "{coerce}");
    assert_eq!(
        coerce["policy_block"]["category"], "provider_health",
        "{coerce}"
    );
    let text = crate::ok(&worker(dir, broker, token, &["effects", &waiting]));
    let shown = "binding=rv policy_block: { category: provider_health, detail: \"the model broker";
    assert!(text.contains(shown), "{text}");
    broker.start();
    let pass = ["worker", &waiting, "--provider-config", "providers.json"];
    crate::ok(&worker(dir, broker, token, &pass));
    let status = json_of(&worker(dir, broker, token, &["status", &waiting, "--json"]));
    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(
        stub.seen().len(),
        2,
        "the recovered coerce called the model once"
    );
}

/// The store's files, the instance's log, effects and runs and what `whip run` printed
/// (`out`) hold no byte of the key.
fn no_key_in_the_engine(dir: &Path, (broker, token): (&Broker, &str), id: &str, out: &Output) {
    let mut engine_bytes = Vec::new();
    all_bytes(&dir.join(".whipplescript"), &mut engine_bytes);
    engine_bytes.extend(&out.stdout);
    engine_bytes.extend(&out.stderr);
    for view in ["log", "effects", "runs"] {
        let shown = worker(dir, broker, token, &[view, id, "--json"]);
        engine_bytes.extend(crate::ok(&shown).into_bytes());
    }
    assert!(
        !contains(&engine_bytes, KEY),
        "the key reached the engine's rows, output or logs"
    );
    assert!(
        contains(&engine_bytes, "Review the patch"),
        "the grep reads what the engine wrote"
    );
}

/// POST an envelope to the broker with `token`: the status.
async fn post(broker: &str, token: &str, envelope: &Value) -> u16 {
    let url = whip_engine::http1::HttpUrl::parse(&format!("http://{broker}/v1/egress")).unwrap();
    let headers = [
        ("authorization".to_string(), format!("Bearer {token}")),
        ("content-type".to_string(), "application/json".to_string()),
    ];
    let body = envelope.to_string().into_bytes();
    let limits = (1 << 20, Duration::from_secs(10));
    let method = whip_engine::http1::Method::POST;
    let answer = whip_engine::http1::call(method, &url, &headers, body, limits).await;
    answer.expect("the broker answers").status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_refuses_a_stranger_another_secret_and_another_provider() {
    let stub = ModelStub::start(r#"{"verdict": "merge"}"#).await;
    let dir = tempfile::tempdir().unwrap();
    let (broker, token) = setup(dir.path(), &stub);
    let envelope = |reference: &str, provider: &str| {
        json!({"protocol": "whipplescript.model-egress.v1", "credential_ref": reference,
            "provider": provider, "request": {"url": format!("http://{}/v1/chat/completions",
            stub.addr), "headers": [], "body": "{}"}})
    };
    let forged = "wbt_0000000000000000000000000000000000000000000000000000000000000000";
    assert_eq!(
        post(&broker.addr, forged, &envelope("secret:openai", "gpt")).await,
        401
    );
    assert_eq!(
        post(&broker.addr, &token, &envelope("secret:other", "gpt")).await,
        403
    );
    assert_eq!(
        post(&broker.addr, &token, &envelope("secret:openai", "mallory")).await,
        403
    );
    assert_eq!(
        post(&broker.addr, &token, &envelope("env:HOME", "gpt")).await,
        403
    );
    assert!(stub.seen().is_empty(), "nothing refused reached the model");
    assert_eq!(
        post(&broker.addr, &token, &envelope("secret:openai", "gpt")).await,
        200
    );
    assert_eq!(stub.seen().len(), 1);
    // The first relay pinned the secret to the stub's origin: a worker that writes its own
    // server into the model URL gets no key.
    let thief = ModelStub::start("{}").await;
    let mut stolen = envelope("secret:openai", "gpt");
    stolen["request"]["url"] = json!(format!("http://{}/v1/chat/completions", thief.addr));
    assert_eq!(post(&broker.addr, &token, &stolen).await, 403);
    assert!(
        thief.seen().is_empty(),
        "the key went nowhere but its origin"
    );
    let secrets = std::fs::read_to_string(broker.data.join("secrets.json")).unwrap();
    assert!(
        secrets.contains(&format!("http://{}", stub.addr)),
        "the pin is kept"
    );
}

/// `https://` models (issue 36: TLS egress): a coercion reaches a TLS stub directly (its
/// key read from `env:`) and through the broker (the secret placed on the stub's origin),
/// each trusting the stub's CA through `SSL_CERT_FILE`; without that CA the worker refuses
/// the stub's certificate and nothing reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coercion_reaches_an_https_model_directly_and_through_the_broker() {
    let (stub, ca_pem) = ModelStub::start_tls(r#"{"verdict": "merge"}"#).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    std::fs::write(dir.path().join("review.whip"), PROGRAM).unwrap();
    let port = stub.addr.rsplit_once(':').expect("a port").1.to_string();
    let base = format!("https://localhost:{port}/v1");
    let binding = |reference: &str| {
        json!({"bindings": [{"provider_id": "gpt", "provider_kind": "openai-generic",
            "model": "stub-model", "base_url": base, "credentials_ref": reference}]})
    };
    std::fs::write(
        dir.path().join("direct.json"),
        binding("env:STUB_KEY").to_string(),
    )
    .unwrap();
    let direct = |ca: Option<&Path>| {
        let mut command = Command::new(crate::bin());
        command.current_dir(dir.path()).env("STUB_KEY", KEY);
        command
            .env_remove("SSL_CERT_FILE")
            .env_remove("SSL_CERT_DIR");
        if let Some(ca) = ca {
            command.env("SSL_CERT_FILE", ca);
        }
        let run = run_args("direct.json");
        json_of(&command.args(run).output().expect("run whip"))
    };
    let untrusted = direct(None);
    let reason = untrusted["terminal"]["payload"]["verdict"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("certificate"), "{untrusted}");
    assert!(
        stub.seen().is_empty(),
        "nothing reached a server the worker does not trust"
    );
    let report = direct(Some(&ca));
    assert_eq!(
        report["terminal"]["payload"],
        json!({"verdict": "merge"}),
        "{report}"
    );
    let bearer = format!("Bearer {KEY}");
    assert_eq!(
        stub.seen()[0].header("authorization"),
        Some(bearer.as_str())
    );
    through_the_broker(dir.path(), &stub, (&ca, &base));
}

/// The same coercion through a broker that trusts the stub's CA, its secret placed on the
/// stub's origin.
fn through_the_broker(dir: &Path, stub: &ModelStub, (ca, base): (&Path, &str)) {
    let mut broker = Broker {
        addr: whip_tests::free_addrs(1)[0].to_string(),
        data: dir.join("broker-data"),
        child: None,
        ca_file: Some(ca.to_path_buf()),
    };
    let origin = base.trim_end_matches("/v1");
    let set = [
        "--json",
        "secret",
        "set",
        "openai",
        "--provider",
        "gpt",
        "--origin",
        origin,
    ];
    let stored: Value = serde_json::from_str(broker.admin(&set, KEY).trim()).expect("json");
    assert_eq!(stored["origins"], json!([origin]));
    let issued = broker.admin(&["--json", "token", "issue", "--worker", "w1"], "");
    let issued: Value = serde_json::from_str(issued.trim()).expect("token json");
    let token = issued["token"].as_str().expect("a token").to_string();
    broker.start();
    let config = json!({"bindings": [{"provider_id": "gpt", "provider_kind": "openai-generic",
        "model": "stub-model", "base_url": base, "credentials_ref": "secret:openai"}]});
    std::fs::write(dir.join("brokered.json"), config.to_string()).unwrap();
    let run = run_args("brokered.json");
    let report = json_of(&worker(dir, &broker, &token, &run));
    assert_eq!(
        report["terminal"]["payload"],
        json!({"verdict": "merge"}),
        "{report}"
    );
    let seen = stub.seen();
    assert_eq!(seen.len(), 2, "the direct call and the brokered one");
    assert_eq!(
        seen[1].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

const TURN_PROGRAM: &str = r#"use std.agent

workflow Ask

output result Said

class Said { said string }

agent reviewer
agent helper { provider fixture }

rule go when started => {
  tell reviewer "Review the patch please" as t
  tell helper "tidy up" as h
  after t succeeds as out {
    after h succeeds as done { complete result { said "{{ out.summary }} / {{ done.summary }}" } }
  }
  after t fails as f { complete result { said f.reason } }
  after h fails as f { complete result { said f.reason } }
}
"#;

/// The owned harness with a model (issue 36): a turn of the bare (`owned`) agent
/// `reviewer`, whose binding names it, goes through the broker to the stub model and its
/// answer is the turn's summary; the `fixture` agent beside it never reaches a model. The
/// key stays out of the engine. Without a credential reference the turn is blocked
/// `credentials`, not failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_agents_turn_is_answered_by_its_bound_model_through_the_broker() {
    let stub = ModelStub::start("Looks good: ship it.").await;
    let dir = tempfile::tempdir().unwrap();
    let (broker, token) = setup(dir.path(), &stub);
    std::fs::write(dir.path().join("ask.whip"), TURN_PROGRAM).unwrap();
    let binding = |reference: Value| {
        json!({"bindings": [{"provider_id": "reviewer", "provider_kind": "openai-generic",
            "model": "stub-model", "base_url": format!("http://{}/v1", stub.addr),
            "credentials_ref": reference}]})
        .to_string()
    };
    std::fs::write(
        dir.path().join("agents.json"),
        binding(json!("secret:openai")),
    )
    .unwrap();
    // The secret is bound to provider `gpt`; this binding is `reviewer`'s.
    broker.admin(&["secret", "set", "openai"], &format!("{KEY}\n"));
    let run = [
        "run",
        "ask.whip",
        "--wait",
        "--json",
        "--provider-config",
        "agents.json",
    ];
    let out = worker(dir.path(), &broker, &token, &run);
    let report = json_of(&out);
    let said = "Looks good: ship it. / fixture completed";
    assert_eq!(
        report["terminal"]["payload"],
        json!({"said": said}),
        "{report}"
    );
    let seen = stub.seen();
    assert_eq!(
        seen.len(),
        1,
        "one model call: the fixture agent's turn made none"
    );
    let body: Value = serde_json::from_str(&seen[0].body).expect("a JSON body");
    assert_eq!(body["messages"][0]["content"], "Review the patch please");
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let id = report["id"].as_str().expect("an id").to_string();
    assert!(
        seen[0]
            .header("idempotency-key")
            .is_some_and(|k| k.contains(&id))
    );
    no_key_in_the_engine(dir.path(), (&broker, &token), &id, &out);
    let trace = crate::ok(&worker(
        dir.path(),
        &broker,
        &token,
        &["trace", &id, "--check"],
    ));
    assert!(trace.contains("conformance=ok"), "{trace}");
    std::fs::write(dir.path().join("bare.json"), binding(Value::Null)).unwrap();
    a_turn_without_a_credential_is_blocked(dir.path(), (&broker, &token), &stub);
}

/// `bare.json` binds `reviewer` with no credential reference: its turn is blocked
/// `credentials` and reaches no model.
fn a_turn_without_a_credential_is_blocked(
    dir: &Path,
    (broker, token): (&Broker, &str),
    stub: &ModelStub,
) {
    let run = [
        "run",
        "ask.whip",
        "--json",
        "--provider-config",
        "bare.json",
    ];
    let report = json_of(&worker(dir, broker, token, &run));
    assert_eq!(
        report["status"], "running",
        "a block is no failure: {report}"
    );
    let waiting = report["id"].as_str().expect("an id");
    let effects = json_of(&worker(dir, broker, token, &["effects", waiting, "--json"]));
    let turn = (effects.as_array().unwrap().iter())
        .find(|e| e["args"]["agent"] == "reviewer")
        .expect("the reviewer's turn");
    assert_eq!(turn["state"], "blocked", "{turn}");
    assert_eq!(turn["policy_block"]["category"], "credentials", "{turn}");
    assert_eq!(stub.seen().len(), 1, "the blocked turn reached no model");
}
