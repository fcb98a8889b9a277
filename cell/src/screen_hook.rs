//! The optional external validator of agent mail: an HTTP endpoint the operator names when
//! starting a server (`--mail-screen-url http://HOST:PORT/PATH`). Before a send is proposed,
//! the server that took it POSTs the message there and puts the answer into the command
//! as [`ExternalScreen`]; the state machine combines it with its own rule set (the stricter
//! verdict wins). A validator that does not answer within its timeout, or answers anything
//! but `200` with `{"verdict": "clean|flagged|quarantined", "findings": ["…"]}`, is
//! `Unavailable`: the rule set's verdict stands and the message says so. Never "clean" for
//! want of an answer.
//!
//! The request body is `{"rules_version", "to", "type", "text", "payload"}` (the sender is
//! not sent: the validator judges content). Plain HTTP only, for a validator beside the
//! server; its answer is read up to `SCREEN_HOOK_ANSWER_BYTES_MAX`.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use whip_board::mail::ExternalScreen;
use whip_board::screen::{SCREEN_RULES_VERSION, Verdict};

use crate::limits::{SCREEN_HOOK_ANSWER_BYTES_MAX, SCREEN_HOOK_FINDINGS_MAX};

/// What a send gets when the validator does not answer (`mail-screen-fail`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailMode {
    /// The rule set's verdict stands, marked `external_unavailable`.
    Open,
    /// The message is quarantined (the default): an attacker who keeps the validator busy
    /// gets nothing delivered as clean.
    #[default]
    Closed,
}

impl FailMode {
    /// `open` or `closed`.
    pub fn parse(text: &str) -> Result<FailMode, String> {
        match text {
            "open" => Ok(FailMode::Open),
            "closed" => Ok(FailMode::Closed),
            other => Err(format!("mail-screen-fail is open or closed, got {other:?}")),
        }
    }

    /// The setting's name.
    pub fn name(self) -> &'static str {
        match self {
            FailMode::Open => "open",
            FailMode::Closed => "closed",
        }
    }
}

/// Where the validator listens and how long it may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScreenHook {
    /// `host:port`.
    host: String,
    /// The request path.
    path: String,
    /// How long one call may take, connect to answer.
    timeout: Duration,
    /// What a send gets when the validator does not answer.
    fail: FailMode,
}

/// Calls to the validator in flight at once, per process: past it a send is screened as
/// if the validator did not answer.
static IN_FLIGHT: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(crate::limits::SCREEN_HOOK_CONCURRENCY_MAX);

static HOOK: OnceLock<ScreenHook> = OnceLock::new();

impl ScreenHook {
    /// Parse `http://HOST:PORT/PATH`.
    pub fn parse(url: &str, timeout_ms: u64) -> Result<ScreenHook, String> {
        Self::parse_with(url, timeout_ms, FailMode::default())
    }

    /// Parse `http://HOST:PORT/PATH` with what a send gets when it does not answer.
    pub fn parse_with(url: &str, timeout_ms: u64, fail: FailMode) -> Result<ScreenHook, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("mail screen url {url:?} must start with http://"))?;
        let (host, path) = rest
            .split_once('/')
            .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
        if !host.contains(':') || host.is_empty() {
            return Err(format!("mail screen url {url:?} must name host:port"));
        }
        Ok(ScreenHook {
            host: host.to_string(),
            path,
            timeout: Duration::from_millis(timeout_ms.max(1)),
            fail,
        })
    }

    /// Make this process's servers call `hook` (once per process; a second call is
    /// refused).
    pub fn install(self) -> Result<(), String> {
        HOOK.set(self)
            .map_err(|_| "the mail screen hook is already installed".to_string())
    }
}

/// The validator's answer for one message, or `None` when no validator is configured.
pub(crate) async fn external(
    to: &str,
    kind: &str,
    text: &str,
    payload: Option<&str>,
) -> Option<ExternalScreen> {
    let hook = HOOK.get()?;
    let body = json!({
        "rules_version": SCREEN_RULES_VERSION, "to": to, "type": kind, "text": text,
        "payload": payload,
    });
    let Ok(_permit) = IN_FLIGHT.try_acquire() else {
        let reason = format!(
            "{} calls to the validator in flight already",
            crate::limits::SCREEN_HOOK_CONCURRENCY_MAX
        );
        return Some(unavailable(hook, reason));
    };
    let answer = tokio::time::timeout(hook.timeout, post(hook, &body.to_string())).await;
    Some(match answer {
        Ok(Ok(answer)) => answer,
        Ok(Err(reason)) => unavailable(hook, reason),
        Err(_) => {
            let reason = format!("no answer within {} ms", hook.timeout.as_millis());
            unavailable(hook, reason)
        }
    })
}

/// No answer, as the server's setting says to take it (the board decides what it means).
fn unavailable(hook: &ScreenHook, reason: String) -> ExternalScreen {
    match hook.fail {
        FailMode::Open => ExternalScreen::Unavailable { reason },
        FailMode::Closed => ExternalScreen::UnavailableClosed { reason },
    }
}

async fn post(hook: &ScreenHook, body: &str) -> Result<ExternalScreen, String> {
    let mut stream = tokio::net::TcpStream::connect(&hook.host)
        .await
        .map_err(|e| format!("connect {}: {e}", hook.host))?;
    let request = format!(
        "POST {} HTTP/1.0\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        hook.path,
        hook.host,
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut answer = Vec::new();
    let limit = SCREEN_HOOK_ANSWER_BYTES_MAX as u64 + 1;
    (&mut stream)
        .take(limit)
        .read_to_end(&mut answer)
        .await
        .map_err(|e| format!("read: {e}"))?;
    if answer.len() > SCREEN_HOOK_ANSWER_BYTES_MAX {
        return Err(format!("answer over {SCREEN_HOOK_ANSWER_BYTES_MAX} bytes"));
    }
    decode(&answer)
}

/// `HTTP/1.x 200 …` with a JSON body naming a verdict.
fn decode(answer: &[u8]) -> Result<ExternalScreen, String> {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or("the answer has no body")?;
    let status = head.split_whitespace().nth(1).unwrap_or_default();
    if status != "200" {
        return Err(format!("the validator answered status {status:?}"));
    }
    let value: Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    let verdict = value["verdict"]
        .as_str()
        .and_then(Verdict::parse)
        .ok_or("the answer names no verdict (clean, flagged, quarantined)")?;
    let findings = value["findings"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .take(SCREEN_HOOK_FINDINGS_MAX)
                .map(|f| f.as_str().map_or_else(|| f.to_string(), str::to_string))
                .map(|f| f.chars().take(120).collect())
                .collect()
        })
        .unwrap_or_default();
    Ok(ExternalScreen::Verdict { verdict, findings })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_decode_or_say_why_not() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n\
                   {\"verdict\":\"quarantined\",\"findings\":[\"asks for a token\"]}";
        assert_eq!(
            decode(ok),
            Ok(ExternalScreen::Verdict {
                verdict: Verdict::Quarantined,
                findings: vec!["asks for a token".into()],
            })
        );
        for bad in [
            &b"HTTP/1.1 500 Oops\r\n\r\n{}"[..],
            b"HTTP/1.1 200 OK\r\n\r\nnot json",
            b"HTTP/1.1 200 OK\r\n\r\n{\"verdict\":\"fine\"}",
            b"garbage",
        ] {
            assert!(decode(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(ScreenHook::parse("https://x:1/", 10).is_err());
        assert!(ScreenHook::parse("http://nohostport/", 10).is_err());
        let hook = ScreenHook::parse("http://127.0.0.1:9/screen", 250).unwrap();
        assert_eq!(
            (hook.host.as_str(), hook.path.as_str()),
            ("127.0.0.1:9", "/screen")
        );
    }
}
