//! What a tool call answers: a compact JSON result, or a tool error whose text is the
//! fabric's stable refusal code and its detail, `code: detail`.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;
use whip_cell::CellError;

use crate::limits::{MCP_RESULT_BYTES_MAX, MCP_WAIT_MS_MAX};

/// A tool's answer: its JSON result, or why the fabric (or this server) refused.
pub(super) type Answer = Result<Value, Refusal>;

/// A refusal: the stable snake_case code first, then what happened and what to do.
#[derive(Debug)]
pub(super) struct Refusal {
    code: String,
    detail: String,
}

impl Refusal {
    /// A refusal with `code` and `detail`.
    pub(super) fn new(code: &str, detail: impl Into<String>) -> Refusal {
        Refusal {
            code: code.to_string(),
            detail: detail.into(),
        }
    }

    /// A refusal the fabric answered as data (`refusal` or `reason` and `message`); the
    /// message may already start with its code.
    pub(super) fn answered(code: &str, message: &str) -> Refusal {
        let detail = message
            .strip_prefix(code)
            .and_then(|rest| rest.strip_prefix(": "))
            .unwrap_or(message);
        let code = if code.is_empty() { "refused" } else { code };
        Refusal::new(code, detail)
    }

    /// The tool error's text.
    pub(super) fn text(&self) -> String {
        format!("{}: {}", self.code, self.detail)
    }
}

/// A message that starts with a stable code (`not_member: …`): the code and the rest.
fn split_code(message: &str) -> Option<(&str, &str)> {
    let (code, rest) = message.split_once(": ")?;
    let word = |c: char| c.is_ascii_lowercase() || c == '_';
    (!code.is_empty() && code.chars().all(word)).then_some((code, rest))
}

impl From<CellError> for Refusal {
    fn from(err: CellError) -> Refusal {
        let coded = |fallback: &str, message: &str| match split_code(message) {
            Some((code, rest)) => Refusal::new(code, rest),
            None => Refusal::new(fallback, message),
        };
        match &err {
            CellError::InvalidArgument(m) => coded("invalid_argument", m),
            CellError::PermissionDenied(m) => coded("permission_denied", m),
            CellError::Unauthenticated(m) => coded("not_authenticated", m),
            CellError::NotFound(m) => coded("not_found", m),
            CellError::Superseded(m) => Refusal::new("superseded", m.clone()),
            // Typed: the code travelled as a status detail, not in the text.
            CellError::Refused { code, message } => {
                let prefix = format!("{code}: ");
                Refusal::new(
                    code.as_str(),
                    message.strip_prefix(&prefix).unwrap_or(message),
                )
            }
            CellError::Fatal(m) => Refusal::new("fatal", m.clone()),
            CellError::WrongRange { .. } => Refusal::new("wrong_range", err.to_string()),
            CellError::NotLeader { .. } | CellError::Unavailable(_) => {
                Refusal::new("unavailable", err.to_string())
            }
        }
    }
}

impl From<anyhow::Error> for Refusal {
    fn from(err: anyhow::Error) -> Refusal {
        match err.downcast::<CellError>() {
            Ok(cell) => cell.into(),
            Err(other) => {
                let text = format!("{other:#}");
                match split_code(&text) {
                    Some((code, rest)) => Refusal::new(code, rest),
                    None => Refusal::new("failed", text),
                }
            }
        }
    }
}

/// The tool result of `answer`: the compact JSON as text and as structured content, or a
/// tool error.
pub(super) fn result(answer: Answer) -> CallToolResult {
    match answer {
        Ok(value) => CallToolResult::structured(value),
        Err(refusal) => CallToolResult::error(vec![ContentBlock::text(refusal.text())]),
    }
}

/// Bytes `value` takes as compact JSON.
pub(super) fn json_bytes(value: &Value) -> usize {
    value.to_string().len()
}

/// Refuse a result too large for one tool answer (`what` says which, and where else to
/// read it).
pub(super) fn fits(value: Value, what: &str) -> Answer {
    let bytes = json_bytes(&value);
    if bytes > MCP_RESULT_BYTES_MAX {
        return Err(Refusal::new(
            "too_large",
            format!(
                "{what} is {bytes} bytes of JSON, more than one tool result carries \
                 ({MCP_RESULT_BYTES_MAX})"
            ),
        ));
    }
    Ok(value)
}

/// `wait_s` in ms, refused past [`MCP_WAIT_MS_MAX`].
pub(super) fn wait_ms(wait_s: Option<u64>) -> Result<Option<u64>, Refusal> {
    let Some(seconds) = wait_s else {
        return Ok(None);
    };
    match seconds.checked_mul(1_000) {
        Some(ms) if ms <= MCP_WAIT_MS_MAX => Ok(Some(ms)),
        _ => Err(Refusal::new(
            "invalid_argument",
            format!(
                "wait_s is {seconds}, at most {} is allowed",
                MCP_WAIT_MS_MAX / 1_000
            ),
        )),
    }
}

/// A duration argument (`name`, in seconds) in ms.
pub(super) fn seconds_ms(name: &str, seconds: u64) -> Result<u64, Refusal> {
    seconds
        .checked_mul(1_000)
        .ok_or_else(|| Refusal::new("invalid_argument", format!("{name} {seconds} is too large")))
}

#[cfg(test)]
mod tests {
    use super::{Refusal, split_code};
    use whip_cell::CellError;

    #[test]
    fn a_refusal_keeps_the_code_the_fabric_gave_once() {
        let r = Refusal::answered("stale_fence", "stale_fence: fence 3 is stale, current is 4");
        assert_eq!(r.text(), "stale_fence: fence 3 is stale, current is 4");
        let r = Refusal::answered("not_member", "alice is not a member of t");
        assert_eq!(r.text(), "not_member: alice is not a member of t");
    }

    #[test]
    fn cell_errors_carry_their_code() {
        let denied = CellError::PermissionDenied("not_authorized: x is y's".into());
        assert_eq!(Refusal::from(denied).text(), "not_authorized: x is y's");
        let invalid = CellError::InvalidArgument("team name is empty".into());
        assert_eq!(
            Refusal::from(invalid).text(),
            "invalid_argument: team name is empty"
        );
        assert_eq!(split_code("Not a code: x"), None);
    }
}
