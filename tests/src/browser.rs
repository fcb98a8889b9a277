//! A real browser for tests: Debian's headless Chromium driven by `chromedriver` over W3C
//! WebDriver, spoken as plain HTTP/1.1 from this crate (no client library), and the small
//! HTTP client the observation tests also use to scrape `/metrics`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// Where Debian's `chromium` package puts the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Where Debian's `chromium-driver` package puts the driver.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The flags every test browser runs with (the list), before its profile dir.
pub const CHROMIUM_FLAGS: [&str; 7] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// How long one HTTP exchange may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);

/// One HTTP/1.1 exchange with `addr` (`host:port`): `(status, body)`. The body ends at
/// its `Content-Length`, at the last chunk, or where the stream does.
pub fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(EXCHANGE_TIMEOUT))
        .expect("timeout");
    let payload = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{payload}",
        payload.len()
    );
    stream.write_all(request.as_bytes()).expect("send request");
    let mut answer = Vec::new();
    let mut buffer = [0u8; 64 << 10];
    loop {
        if let Some(done) = complete(&answer) {
            return done.unwrap_or_else(|e| panic!("{method} {addr}{path}: {e}"));
        }
        let n = stream
            .read(&mut buffer)
            .unwrap_or_else(|e| panic!("{method} {addr}{path}: read: {e}"));
        if n == 0 {
            return parse_response(&answer, true)
                .unwrap_or_else(|e| panic!("{method} {addr}{path}: {e}"));
        }
        answer.extend_from_slice(&buffer[..n]);
    }
}

/// The response in `raw` once it is whole (`None`: read on).
fn complete(raw: &[u8]) -> Option<Result<(u16, Vec<u8>), String>> {
    match parse_response(raw, false) {
        Err(e) if e == INCOMPLETE => None,
        done => Some(done),
    }
}

const INCOMPLETE: &str = "incomplete";

/// `(status, body)` of an HTTP/1.1 response; [`INCOMPLETE`] until it is whole, unless
/// the stream `ended` (then a body without a length runs to the end).
fn parse_response(raw: &[u8], ended: bool) -> Result<(u16, Vec<u8>), String> {
    let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Err(if ended {
            "no end of headers".into()
        } else {
            INCOMPLETE.into()
        });
    };
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    let body = &raw[split + 4..];
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    match length {
        Some(n) if body.len() >= n => return Ok((status, body[..n].to_vec())),
        Some(_) if !ended => return Err(INCOMPLETE.into()),
        Some(_) => return Err("the body is shorter than its length".into()),
        None => {}
    }
    if head.contains("transfer-encoding: chunked") {
        return match dechunk(body) {
            Ok(Some(out)) => Ok((status, out)),
            Ok(None) if !ended => Err(INCOMPLETE.into()),
            Ok(None) => Err("the chunked body ends early".into()),
            Err(e) => Err(e),
        };
    }
    match ended {
        true => Ok((status, body.to_vec())),
        false => Err(INCOMPLETE.into()),
    }
}

/// The body of chunked `body`; `None` until its last chunk arrived.
fn dechunk(mut body: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut out = Vec::new();
    loop {
        let Some(line_end) = body.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_text = String::from_utf8_lossy(&body[..line_end]).to_string();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("chunk size {size_text:?}"))?;
        if size == 0 {
            return Ok(Some(out));
        }
        let start = line_end + 2;
        let Some(chunk) = body.get(start..start + size) else {
            return Ok(None);
        };
        out.extend_from_slice(chunk);
        body = body.get(start + size + 2..).unwrap_or_default();
    }
}

/// `GET http://addr/path` as text.
pub fn get(addr: &str, path: &str) -> (u16, String) {
    let (status, body) = http(addr, "GET", path, None);
    (status, String::from_utf8_lossy(&body).to_string())
}

/// A Chromium session behind its own chromedriver; both end when it drops.
pub struct Browser {
    driver: Child,
    addr: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Start chromedriver on a free port and open a headless Chromium session with a
    /// fresh profile directory.
    pub async fn start() -> Browser {
        let port = crate::free_addrs(1)[0].port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("start {CHROMEDRIVER} (apt-get install chromium-driver): {e}")
            });
        let addr = format!("127.0.0.1:{port}");
        let probe = addr.clone();
        crate::wait_for("chromedriver to listen", Duration::from_secs(20), || {
            let addr = probe.clone();
            async move { TcpStream::connect(&addr).is_ok() }
        })
        .await;
        let profile = tempfile::tempdir().expect("profile dir");
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|f| f.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push("--window-size=1200,1000".into());
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let mut browser = Browser {
            driver,
            addr,
            session: String::new(),
            _profile: profile,
        };
        let created = browser.command("POST", "/session", Some(&capabilities));
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session in {created}"))
            .to_string();
        browser
    }

    /// One WebDriver command; its `value`, or a panic with the driver's error.
    fn command(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, body) = http(&self.addr, method, path, body);
        let answer: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}: {}", String::from_utf8_lossy(&body)));
        assert_eq!(status, 200, "{method} {path}: {answer}");
        answer["value"].clone()
    }

    fn session_path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    /// Load `url`.
    pub fn open(&self, url: &str) {
        self.command(
            "POST",
            &self.session_path("/url"),
            Some(&json!({"url": url})),
        );
    }

    /// Run `script` (a function body) in the page; what it returns.
    pub fn execute(&self, script: &str) -> Value {
        let body = json!({"script": script, "args": []});
        self.command("POST", &self.session_path("/execute/sync"), Some(&body))
    }

    /// A PNG of the window, written to `path`.
    pub fn screenshot(&self, path: &std::path::Path) {
        use base64::Engine as _;
        let shot = self.command("GET", &self.session_path("/screenshot"), None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().expect("base64 screenshot"))
            .expect("screenshot decodes");
        assert!(png.starts_with(b"\x89PNG"), "the screenshot is a PNG");
        std::fs::write(path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = std::panic::catch_unwind(|| {
                http(&self.addr, "DELETE", &self.session_path(""), None);
            });
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `target/test-artifacts/` beside the test binaries (created), where tests leave files
/// for people to look at.
pub fn artifacts_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let target = exe
        .parent()
        .and_then(|deps| deps.parent())
        .and_then(|profile| profile.parent())
        .expect("target/<profile>/deps");
    let dir = target.join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}
