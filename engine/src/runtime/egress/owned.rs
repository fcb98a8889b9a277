//! The `owned` harness with a model (LANGUAGE-AGENTS.md §4.2): a turn of an `owned` agent
//! whose name a binding of `--provider-config` carries (`provider_id` = the agent) goes to
//! that binding's model over the same egress as a coercion (§4.4: directly, or through the
//! broker with the sentinel in place of the key). An owned agent without a binding stays on
//! the fixture; `fixture` and `command` agents never reach a model.
//!
//! One turn is one request: the rendered prompt as the user's message, the answer's text
//! as the turn's `summary`, with the model, the HTTP status and the response id recorded as
//! evidence. The request carries the effect attempt's idempotency key. There is no tool
//! loop (turns do not call `@tool`s: outside the subset). A status of 300 or more fails
//! the turn ("provider returned HTTP N"); an answer with no text fails it
//! (`malformed_answer`); the turn's `timeout` bounds the whole call.

use serde_json::{Value, json};

use super::{HttpProvider, Route, Wire, failed};
use crate::runtime::agent::TellArgs;
use crate::runtime::provider::ProviderOutcome;

/// The provider kind of our harness.
pub(super) const OWNED: &str = crate::limits::AGENT_PROVIDER_DEFAULT;

impl HttpProvider {
    /// Run one turn: on its agent's model when one is bound, else on the fixture.
    pub(super) async fn run_turn(&self, turn: &TellArgs, key: &str) -> ProviderOutcome {
        let route = match self.turn_route(turn) {
            Ok(Some(route)) => route,
            Ok(None) => {
                return crate::runtime::provider::Provider::tell(&self.fixture, turn, key).await;
            }
            Err(block) => return failed(block.detail, "provider_config", None),
        };
        let body = turn_body(&route, &turn.prompt, self.max_tokens());
        let (status, text) = match self.exchange(&route, body, key).await {
            Ok(answer) => answer,
            Err(outcome) => return outcome,
        };
        match reply_text(route.wire, &text) {
            Ok((said, response_id)) => ProviderOutcome::Completed {
                value: json!({"exit_code": 0, "model": route.model, "binding": route.provider_id,
                    "http_status": status, "response_id": response_id}),
                summary: said,
            },
            Err(why) => failed(
                format!("the provider's answer is malformed: {why}"),
                "malformed_answer",
                None,
            ),
        }
    }
}

/// The body of one turn on `route`'s wire: the prompt as the user's message.
fn turn_body(route: &Route, prompt: &str, max: u64) -> Value {
    let model = &route.model;
    match route.wire {
        Wire::OpenAiGeneric => json!({
            "model": model, "max_tokens": max,
            "messages": [{"role": "user", "content": prompt}],
        }),
        Wire::OpenAi => json!({"model": model, "max_output_tokens": max, "input": prompt}),
        Wire::Anthropic => json!({
            "model": model, "max_tokens": max,
            "messages": [{"role": "user", "content": prompt}],
        }),
    }
}

/// The text of a model's answer `body` on `wire`, and its response id when it has one.
fn reply_text(wire: Wire, body: &str) -> Result<(String, Option<String>), String> {
    let reply: Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    let id = reply["id"].as_str().map(str::to_string);
    let text: Option<String> = match wire {
        Wire::OpenAiGeneric => reply["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_string),
        Wire::OpenAi => joined(
            (reply["output"].as_array().into_iter().flatten())
                .flat_map(|o| o["content"].as_array().into_iter().flatten())
                .filter(|c| c["type"] == "output_text"),
        ),
        Wire::Anthropic => joined(
            (reply["content"].as_array().into_iter().flatten()).filter(|c| c["type"] == "text"),
        ),
    };
    match text {
        Some(text) => Ok((text, id)),
        None => Err(format!("no text in the {} answer", wire.name())),
    }
}

/// The `text` fields of `parts`, joined; `None` when there is none.
fn joined<'v>(parts: impl Iterator<Item = &'v Value>) -> Option<String> {
    let texts: Vec<&str> = parts.filter_map(|c| c["text"].as_str()).collect();
    (!texts.is_empty()).then(|| texts.concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wire_answers_its_text() {
        let generic = json!({"id": "c1", "choices": [{"message": {"content": "ship it"}}]});
        assert_eq!(
            reply_text(Wire::OpenAiGeneric, &generic.to_string()).unwrap(),
            ("ship it".to_string(), Some("c1".to_string()))
        );
        let responses = json!({"id": "r1", "output": [{"content": [
            {"type": "output_text", "text": "ship "}, {"type": "refusal", "text": "x"},
            {"type": "output_text", "text": "it"}]}]});
        assert_eq!(
            reply_text(Wire::OpenAi, &responses.to_string()).unwrap().0,
            "ship it"
        );
        let anthropic = json!({"content": [{"type": "text", "text": "ship it"}]});
        assert_eq!(
            reply_text(Wire::Anthropic, &anthropic.to_string()).unwrap(),
            ("ship it".to_string(), None)
        );
        let empty = json!({"content": [{"type": "tool_use", "input": {}}]});
        let why = reply_text(Wire::Anthropic, &empty.to_string()).unwrap_err();
        assert!(why.contains("no text"), "{why}");
        assert!(reply_text(Wire::OpenAi, "<html>").is_err());
    }
}
