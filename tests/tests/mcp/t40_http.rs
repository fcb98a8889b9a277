//! MCP over Streamable HTTP on a server (`whip cell dev --mcp ADDR`): every request proves
//! its agent with `Authorization: Bearer TOKEN` alone (the token names its agent), or is
//! answered 401; a browser page from another origin is refused; the official Python client's HTTP
//! transport reaches the same tools, acting for the proven agent, with the same refusals.
//! Raw requests are written by hand on a TCP socket (the attacker's client).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use serde_json::{Value, json};

use super::{Bridge, code};

/// A dev cell serving MCP on a loopback port, its agents' tokens, and the CLI against it.
struct HttpFabric {
    fabric: super::Fabric,
    mcp: SocketAddr,
}

impl HttpFabric {
    fn start() -> HttpFabric {
        let dir = tempfile::tempdir().unwrap();
        let mcp = whip_tests::free_addrs(1)[0];
        let extra = format!("--mcp {mcp}");
        let dev = whip_tests::DevCell::start_with_args(dir.path(), None, &extra);
        HttpFabric {
            fabric: super::Fabric { dev, dir },
            mcp,
        }
    }

    /// The token the credentials file holds for `agent`.
    fn token(&self, agent: &str) -> String {
        let file = std::fs::read(self.fabric.credentials()).expect("credentials file");
        let tokens: Value = serde_json::from_slice(&file).unwrap();
        tokens[agent].as_str().expect("a token").to_string()
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.mcp)
    }

    /// The status code of a raw HTTP request with `headers` and `body`.
    fn status(&self, method: &str, headers: &[(&str, &str)], body: &str) -> u16 {
        let mut stream = TcpStream::connect(self.mcp).expect("connect to the MCP listener");
        let mut request = format!("{method} /mcp HTTP/1.1\r\nHost: {}\r\n", self.mcp);
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("Content-Type: application/json\r\n");
        request.push_str("Accept: application/json, text/event-stream\r\n");
        request.push_str(&format!(
            "Connection: close\r\nContent-Length: {}\r\n\r\n",
            body.len()
        ));
        stream.write_all(request.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok());
        status.unwrap_or_else(|| panic!("no status in {answer:?}"))
    }
}

const LIST_TOOLS: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

#[test]
fn every_http_request_proves_its_agent_or_is_answered_401() {
    let http = HttpFabric::start();
    for agent in ["alice", "bob"] {
        http.fabric.whip(&["agent", "register", "--agent", agent]);
    }
    let token = http.token("alice");
    let alice = format!("Bearer {token}");
    // A token that names alice but is not hers: the name is a hint, the hash decides.
    let forged_named = format!(
        "Bearer w1.{}.{}",
        hex("alice"),
        "0123456789abcdef".repeat(4)
    );
    let forged = format!("Bearer {}", "0123456789abcdef".repeat(4));
    // Alice's secret under bob's name in the token's own hint.
    let renamed = format!("Bearer {}", token.replace(&hex("alice"), &hex("bob")));
    let cases: [(&[(&str, &str)], u16); 8] = [
        (&[], 401),
        (&[("X-Whip-Agent", "alice")], 401),
        (&[("Authorization", &forged)], 401),
        (&[("Authorization", &forged_named)], 401),
        (&[("Authorization", &renamed)], 401),
        (
            &[("Authorization", &forged), ("X-Whip-Agent", "alice")],
            401,
        ),
        // Alice's token does not prove bob.
        (&[("Authorization", &alice), ("X-Whip-Agent", "bob")], 401),
        // The bearer alone: the token names its agent.
        (&[("Authorization", &alice)], 200),
    ];
    for (headers, expected) in cases {
        let status = http.status("POST", headers, LIST_TOOLS);
        assert_eq!(status, expected, "{headers:?}");
    }
    let both = [("Authorization", alice.as_str()), ("X-Whip-Agent", "alice")];
    assert_eq!(http.status("POST", &both, LIST_TOOLS), 200);
    let proven = [("Authorization", alice.as_str())];
    let from_elsewhere = [proven[0], ("Origin", "http://attacker.example")];
    assert_eq!(http.status("POST", &from_elsewhere, LIST_TOOLS), 403);
    assert_eq!(http.status("GET", &proven, ""), 405);
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_python_clients_http_transport_acts_for_the_proven_agent() {
    let http = HttpFabric::start();
    http.fabric.team("web", &["lead", "worker"]);
    let agent = |name: &str| {
        let headers = json!({"Authorization": format!("Bearer {}", http.token(name))});
        json!({"url": http.url(), "headers": headers})
    };
    let config = json!({"agents": {"lead": agent("lead"), "worker": agent("worker")}});
    let mut mcp = Bridge::start(&config);
    let names: Vec<String> = (mcp.tools("worker").iter())
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    assert!(names.iter().any(|n| n == "board_claim"), "{names:?}");

    mcp.call(
        "lead",
        "board_post",
        json!({"team": "web", "task": {"page": "/"}}),
    )
    .ok();
    let forged = mcp.call(
        "worker",
        "board_claim",
        json!({"team": "web", "worker": "lead"}),
    );
    assert_eq!(code(&forged.refused()), "not_authorized");
    let claimed = mcp
        .call("worker", "board_claim", json!({"team": "web"}))
        .ok();
    assert_eq!(claimed["task"]["body"], json!({"page": "/"}), "{claimed}");
    let listed = http
        .fabric
        .whip(&["board", "list", "web", "--agent", "lead"]);
    assert_eq!(listed[0]["worker"], "worker", "{listed}");

    // One session entry per agent across requests.
    let first = mcp
        .call("worker", "start_session", json!({"team": "web"}))
        .ok();
    let again = mcp
        .call("worker", "start_session", json!({"team": "web"}))
        .ok();
    assert_eq!(first["entry"]["id"], again["entry"]["id"]);
    assert_eq!(first["holds"][0]["task_id"], claimed["task"]["id"]);
}
