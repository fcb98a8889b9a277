//! Goal: the compute-plane sidecar cannot be used by anyone but the local runtime holding its
//! token, and a request cannot make it run anything outside an instance's workspace.
//! Method: a real `whip executor` process; each attack is a hand-written HTTP/1.1 request
//! over a plain socket: no token, a wrong one, the right one under another scheme, a prefix
//! or an extension of it (the comparison is of two 32-byte blake3 digests with `subtle`, so
//! it is constant-time by construction: no length or prefix to learn), a cwd that climbs
//! out, a link that leads out, malformed and oversized bodies, and (as root) a peer in
//! another network namespace reaching the executor on a bridge address. Each refusal must
//! carry its code and nothing must have run.

use std::path::Path;

use serde_json::json;
use whip_tests::executor::{ExecutorProcess, connect_from_namespace, http, http_on, raw};

fn exec_body(instance: &str, run: &str, script: &str, cwd: Option<&str>) -> String {
    json!({"instance": instance, "effect": "x000001", "run": run,
        "argv": ["sh", "-c", script], "cwd": cwd, "timeout_ms": 10_000})
    .to_string()
}

/// Start the executor on an explicit `127.0.0.1:P`, as the contract writes it (another
/// test may take the port first: then another one).
fn start_on_a_port(dir: &Path, token: &str) -> ExecutorProcess {
    let root = dir.join("executor");
    let mut said = Vec::new();
    for _ in 0..5 {
        let bind = whip_tests::free_addrs(1)[0].to_string();
        match ExecutorProcess::start_at(dir, &bind, &root, token) {
            Ok(executor) => return executor,
            Err(e) => said.push(e),
        }
    }
    panic!("the executor never started: {said:?}");
}

#[test]
fn the_executor_refuses_every_request_without_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = "T-0123456789abcdef";
    let executor = start_on_a_port(dir.path(), token);
    let addr = executor.addr.as_str();
    let (status, body) = http(addr, "GET", "/v1/health", None, None);
    assert_eq!((status, body), (401, json!({"error": "unauthorized"})));
    let wrong = [
        "Bearer wrong".to_string(),
        "Bearer ".to_string(),
        format!("Bearer {}", &token[..token.len() - 1]),
        format!("Bearer {token}x"),
        format!("Bearer  {token}"),
        format!("Basic {token}"),
        token.to_string(),
    ];
    let marker = executor.workspace("ins_attack").join("pwned");
    let script = format!("touch {}", marker.display());
    let body = exec_body("ins_attack", "r1", &script, None);
    for auth in &wrong {
        for (method, path, b) in [
            ("GET", "/v1/health", None),
            ("POST", "/v1/exec", Some(body.as_str())),
            ("GET", "/v1/runs/ins_attack/r1", None),
            (
                "POST",
                "/v1/checkpoint",
                Some(r#"{"instance":"ins_attack","cut":"c"}"#),
            ),
            ("GET", "/nowhere", None),
        ] {
            let (status, answer) = http(addr, method, path, Some(auth), b);
            assert_eq!(status, 401, "{auth:?} {method} {path}: {answer}");
            assert_eq!(answer, json!({"error": "unauthorized"}));
        }
        let (status, _) = http(addr, "POST", "/v1/exec", None, Some(&body));
        assert_eq!(status, 401);
    }
    assert!(!marker.exists(), "an unauthorized request ran");
    let (status, health) = executor.call("GET", "/v1/health", None);
    assert_eq!(
        (status, health),
        (200, json!({"protocol": "whip-executor/1"}))
    );
}

#[test]
fn a_request_cannot_leave_the_workspace_or_break_the_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let executor = ExecutorProcess::start(dir.path(), "tok-shape");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let ws = executor.workspace("ins_a");
    std::fs::create_dir_all(&ws).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
    for (cwd, code) in [
        ("../x", "bad_cwd"),
        ("/etc", "bad_cwd"),
        ("a/../../x", "bad_cwd"),
        ("link/sub", "bad_cwd"),
    ] {
        let body = exec_body("ins_a", "r1", "touch escaped", Some(cwd));
        let (status, answer) = executor.call("POST", "/v1/exec", Some(&body));
        assert_eq!(
            (status, answer["error"].clone()),
            (400, code.into()),
            "{cwd}"
        );
    }
    assert!(
        !outside.join("sub").exists(),
        "a directory was made outside the workspace"
    );
    let bad_id = exec_body("../ins", "r1", "true", None);
    let (status, answer) = executor.call("POST", "/v1/exec", Some(&bad_id));
    assert_eq!((status, answer["error"].clone()), (400, "bad_id".into()));
    let extra = r#"{"instance":"ins_a","effect":"x","run":"r2","argv":["true"],"shell":true}"#;
    let (status, answer) = executor.call("POST", "/v1/exec", Some(extra));
    assert_eq!((status, answer["error"].clone()), (400, "bad_json".into()));
    let empty = r#"{"instance":"ins_a","effect":"x","run":"r3","argv":[]}"#;
    let (status, answer) = executor.call("POST", "/v1/exec", Some(empty));
    assert_eq!((status, answer["error"].clone()), (400, "bad_argv".into()));
    // A body over the bound is refused on its declared length, before it is read.
    let huge = "POST /v1/exec HTTP/1.1\r\nHost: e\r\nAuthorization: Bearer tok-shape\r\n\
                Content-Length: 10000000\r\nConnection: close\r\n\r\n";
    let stream = std::net::TcpStream::connect(&executor.addr).unwrap();
    let (status, answer) = raw(stream, huge);
    assert_eq!(
        (status, answer["error"].clone()),
        (413, "body_too_large".into())
    );
    let (status, answer) = executor.call("GET", "/v1/runs/ins_a/r9", None);
    assert_eq!(
        (status, answer["error"].clone()),
        (404, "unknown_run".into())
    );
    let cut = r#"{"instance":"ins_a","cut":"nope"}"#;
    let (status, answer) = executor.call("POST", "/v1/restore", Some(cut));
    assert_eq!(
        (status, answer["error"].clone()),
        (404, "unknown_cut".into())
    );
    // A run with the same (instance, run) executes once; a second ask gets its record.
    let body = exec_body("ins_a", "r5", "echo x >> count.txt; echo ran", None);
    for _ in 0..2 {
        let (status, answer) = executor.call("POST", "/v1/exec", Some(&body));
        assert_eq!(
            (status, answer["stdout"].clone()),
            (200, "ran\n".into()),
            "{answer}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("count.txt")).unwrap(),
        "x\n"
    );
}

#[test]
fn a_peer_off_loopback_is_refused_even_with_the_token() {
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: a network namespace needs root");
        return;
    }
    let net = whip_tests::chaos::net::Net::create(1).expect("a network namespace");
    let host = format!("198.18.{}.254", net.subnet);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("executor");
    let executor = ExecutorProcess::start_at(dir.path(), &format!("{host}:0"), &root, "tok-ns")
        .expect("the executor binds the bridge address");
    let stream = connect_from_namespace(net.namespace(1), &executor.addr)
        .expect("the namespace reaches the bridge");
    let body = exec_body("ins_ns", "r1", "touch reached", None);
    let auth = "Bearer tok-ns";
    let (status, answer) = http_on(stream, "POST", "/v1/exec", Some(auth), Some(&body));
    assert_eq!((status, answer), (403, json!({"error": "not_loopback"})));
    let stream = connect_from_namespace(net.namespace(1), &executor.addr).unwrap();
    let (status, _) = http_on(stream, "GET", "/v1/health", None, None);
    assert_eq!(status, 403, "the peer is judged before the token");
    assert!(
        !executor.workspace("ins_ns").exists(),
        "an off-loopback request ran"
    );
}
