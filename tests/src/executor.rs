//! A `whip executor` process for tests, and a bare HTTP/1.1 client that speaks to it the way
//! an attacker would (a hand-written request over a plain socket, any header or none).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::whip_binary;

/// A `whip executor` child process, SIGKILLed when dropped.
pub struct ExecutorProcess {
    child: Child,
    /// The address it listens on (`host:port`).
    pub addr: String,
    /// Its `--root` (workspaces under `ROOT/<instance>/`).
    pub root: PathBuf,
    /// The token it accepts.
    pub token: String,
}

impl ExecutorProcess {
    /// Start `WHIP_EXECUTOR_TOKEN=token whip --json executor --bind BIND --root ROOT` in
    /// `dir` and wait for its `listening` line (`Err` with what it said if it stopped).
    pub fn start_at(dir: &Path, bind: &str, root: &Path, token: &str) -> Result<Self, String> {
        // Its log goes to a file: a pipe nobody reads could fill and stop it.
        let log_path = dir.join("executor.log");
        let log = std::fs::File::create(&log_path).map_err(|e| format!("executor.log: {e}"))?;
        let mut child = Command::new(whip_binary())
            .current_dir(dir)
            .args(["--json", "executor", "--bind", bind, "--root"])
            .arg(root)
            .env("WHIP_EXECUTOR_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawn whip executor: {e}"))?;
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        let _ = BufReader::new(stdout).read_line(&mut line);
        let listening = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v["listening"].as_str().map(str::to_string));
        let Some(addr) = listening else {
            let _ = child.kill();
            let _ = child.wait();
            let err = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(format!("the executor said {line:?} {err:?}"));
        };
        Ok(ExecutorProcess {
            child,
            addr,
            root: root.to_path_buf(),
            token: token.to_string(),
        })
    }

    /// Start one on a free loopback port with its root at `dir/executor`.
    pub fn start(dir: &Path, token: &str) -> Self {
        let root = dir.join("executor");
        Self::start_at(dir, "127.0.0.1:0", &root, token).expect("the executor starts")
    }

    /// `http://ADDR`, what `WHIP_EXECUTOR_URL` names.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The workspace of `instance`.
    pub fn workspace(&self, instance: &str) -> PathBuf {
        self.root.join(instance)
    }

    /// A request with this executor's token.
    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, serde_json::Value) {
        let auth = format!("Bearer {}", self.token);
        http(&self.addr, method, path, Some(&auth), body)
    }

    /// SIGKILL the executor (and reap it).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ExecutorProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Send one HTTP/1.1 request on `stream` (`authorization` is the whole header value) and
/// read the status and JSON body.
pub fn http_on(
    stream: TcpStream,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: Option<&str>,
) -> (u16, serde_json::Value) {
    let body = body.unwrap_or("");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: executor\r\nConnection: close\r\n");
    if let Some(auth) = authorization {
        head += &format!("Authorization: {auth}\r\n");
    }
    head += &format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    raw(stream, &head)
}

/// Send `request` exactly as written and read the status and JSON body (a body that is not
/// JSON comes back as a string).
pub fn raw(mut stream: TcpStream, request: &str) -> (u16, serde_json::Value) {
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("set a read timeout");
    stream
        .write_all(request.as_bytes())
        .expect("send the request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"));
    let json = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    let value = serde_json::from_str(&json).unwrap_or(serde_json::Value::String(json));
    (status, value)
}

/// [`http_on`] over a new connection to `addr`.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: Option<&str>,
) -> (u16, serde_json::Value) {
    let stream = TcpStream::connect(addr).expect("connect to the executor");
    http_on(stream, method, path, authorization, body)
}

/// Connect to `addr` from inside network namespace `namespace` (`ip netns` name): the
/// socket is made on a thread that joined the namespace, so its packets leave from there.
pub fn connect_from_namespace(namespace: &str, addr: &str) -> Result<TcpStream, String> {
    let path = format!("/var/run/netns/{namespace}");
    let addr = addr.to_string();
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: setns(2) on this thread only, with a descriptor we hold open.
        let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&ns), libc::CLONE_NEWNET) };
        if rc != 0 {
            return Err(format!("setns: {}", std::io::Error::last_os_error()));
        }
        TcpStream::connect(&addr).map_err(|e| format!("connect {addr}: {e}"))
    })
    .join()
    .map_err(|_| "the namespace thread panicked".to_string())?
}
