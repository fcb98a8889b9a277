//! Coercions over HTTP (LANGUAGE-AGENTS.md §4.3, §4.4): the `openai`, `openai-generic`
//! (also `xai`) and `anthropic` wire shapes, reached directly or through the model broker.
//!
//! The engine builds the whole request (URL, non-auth headers, body, the effect's
//! idempotency key); what it never holds is a provider key when a broker is configured:
//! then every auth header carries the sentinel [`BROKER_SENTINEL`], the worker strips it,
//! and the broker (`whip broker`) injects the key it keeps just before egress. Directly, an
//! `env:NAME` credential reference is read at the final fetch and kept nowhere.
//!
//! Binding problems never fail an effect: [`HttpProvider::admit`] blocks it first
//! (`provider_config` for a missing binding, model, backend or a URL this build cannot
//! reach; `credentials` for a missing reference; `provider_health` for a broker that does
//! not answer), and every worker pass asks again. An answer that does not fit the output
//! type fails with typed evidence (`schema_mismatch`, checked by `provider::coerce_ran`).
//!
//! Model endpoints are `https://` (verified against the system's roots, or
//! `SSL_CERT_FILE`) or `http://`; the broker is `https://`, or `http://` on loopback only
//! (its token travels in the request).

use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::agent::{CoerceArgs, TellArgs};
use super::effect::{BlockCategory, PolicyBlock};
use super::provider::{FixtureProvider, Provider, ProviderOutcome};
use crate::check::shape::Shape;
use crate::http1::{self, CallError, HttpUrl};
use crate::limits::{BROKER_HEALTH_WAIT_MS, COERCE_ANSWER_BYTES_MAX, COERCE_MAX_TOKENS_DEFAULT};
use owned::OWNED;

/// The egress protocol a worker and the broker speak.
pub const EGRESS_PROTOCOL: &str = "whipplescript.model-egress.v1";
/// What an auth header holds when the broker injects the key.
pub const BROKER_SENTINEL: &str = "whipplescript-model-broker";
/// The broker's egress path.
pub const BROKER_EGRESS_PATH: &str = "/v1/egress";
/// The broker's health path.
pub const BROKER_HEALTH_PATH: &str = "/healthz";

/// A provider binding (`--provider-config FILE`, `{"bindings": [...]}`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// The name a `coerce … { provider NAME }` uses.
    pub provider_id: String,
    /// The wire: `openai`, `openai-generic`, `xai` or `anthropic`.
    pub provider_kind: String,
    /// The model.
    #[serde(default)]
    pub model: Option<String>,
    /// The endpoint's base URL.
    #[serde(default)]
    pub base_url: Option<String>,
    /// `env:NAME` (read at the fetch) or `secret:NAME` (a broker secret).
    #[serde(default)]
    pub credentials_ref: Option<String>,
}

/// The `--provider-config` file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bindings {
    /// Every binding.
    pub bindings: Vec<Binding>,
}

/// `WHIPPLESCRIPT_COERCE_PROVIDER`, `_MODEL`, `_BASE_URL`, `_MAX_TOKENS`, `_TIMEOUT_SECS`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoerceEnv {
    /// The backend every coerce without its own `provider` uses.
    pub provider: Option<String>,
    /// Its model.
    pub model: Option<String>,
    /// Its base URL.
    pub base_url: Option<String>,
    /// The answer's token bound.
    pub max_tokens: u64,
    /// How long one call may take.
    pub timeout_secs: u64,
}

/// Where the broker is and the token it issued this worker (`WHIP_MODEL_BROKER_URL`,
/// `WHIP_MODEL_BROKER_TOKEN`).
#[derive(Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// `http://HOST:PORT`.
    pub url: String,
    /// The worker's token (never printed).
    pub token: String,
}

impl std::fmt::Debug for BrokerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerConfig")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// Everything the HTTP provider is configured with.
#[derive(Clone, Debug, Default)]
pub struct EgressConfig {
    /// The environment's backend.
    pub env: CoerceEnv,
    /// The bindings.
    pub bindings: Vec<Binding>,
    /// The broker, when one is configured.
    pub broker: Option<BrokerConfig>,
}

/// The wire shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    /// `/v1/responses`.
    OpenAi,
    /// `/chat/completions` with a `json_schema` response format.
    OpenAiGeneric,
    /// `/v1/messages` with one forced tool.
    Anthropic,
}

impl Wire {
    fn parse(kind: &str) -> Option<Wire> {
        match kind {
            "openai" => Some(Wire::OpenAi),
            "openai-generic" | "xai" => Some(Wire::OpenAiGeneric),
            "anthropic" => Some(Wire::Anthropic),
            _ => None,
        }
    }

    fn default_base(self) -> Option<&'static str> {
        match self {
            Wire::OpenAi => Some("https://api.openai.com/v1"),
            Wire::Anthropic => Some("https://api.anthropic.com/v1"),
            Wire::OpenAiGeneric => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Wire::OpenAi => "openai",
            Wire::OpenAiGeneric => "openai-generic",
            Wire::Anthropic => "anthropic",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Wire::OpenAi => "/responses",
            Wire::OpenAiGeneric => "/chat/completions",
            Wire::Anthropic => "/messages",
        }
    }
}

/// Where one coercion or owned turn goes.
#[derive(Clone, Debug)]
struct Route {
    wire: Wire,
    provider_id: String,
    model: String,
    url: String,
    credentials_ref: Option<String>,
}

/// The provider of coercions and owned agents' turns over HTTP; fixture agents, and
/// coercions and owned agents no backend is configured for, stay on the fixture.
#[derive(Debug)]
pub struct HttpProvider {
    fixture: FixtureProvider,
    config: EgressConfig,
}

impl HttpProvider {
    /// Coercions over HTTP as `config` says, everything else on `fixture`.
    pub fn new(fixture: FixtureProvider, config: EgressConfig) -> HttpProvider {
        HttpProvider { fixture, config }
    }

    fn block(category: BlockCategory, detail: String) -> PolicyBlock {
        PolicyBlock { category, detail }
    }

    /// Where `call` goes: `None` for the fixture, or why it cannot be configured.
    fn route(&self, call: &CoerceArgs) -> Result<Option<Route>, PolicyBlock> {
        let config = |d: String| Self::block(BlockCategory::ProviderConfig, d);
        let env = &self.config.env;
        let (kind, binding) = match (&call.provider, &env.provider) {
            (Some(p), _) => match self.config.bindings.iter().find(|b| b.provider_id == *p) {
                Some(b) => (b.provider_kind.clone(), Some(b)),
                None if Wire::parse(p).is_some() => (p.clone(), self.by_kind(p)),
                None => {
                    let f = &call.function;
                    return Err(config(format!(
                        "coerce `{f}` names provider `{p}`, which no binding configures"
                    )));
                }
            },
            (None, Some(k)) => (k.clone(), self.by_kind(k)),
            (None, None) => return Ok(None),
        };
        route_of(&kind, binding, Some(env)).map(Some)
    }

    /// Where an owned agent's turn goes: the binding named after the agent, or `None` (the
    /// fixture) when there is none or the agent is not `owned`.
    fn turn_route(&self, turn: &TellArgs) -> Result<Option<Route>, PolicyBlock> {
        if turn.provider != OWNED {
            return Ok(None);
        }
        let mut bindings = self.config.bindings.iter();
        let Some(binding) = bindings.find(|b| b.provider_id == turn.agent) else {
            return Ok(None);
        };
        route_of(&binding.provider_kind, Some(binding), None).map(Some)
    }

    fn by_kind(&self, kind: &str) -> Option<&Binding> {
        self.config
            .bindings
            .iter()
            .find(|b| b.provider_kind == kind)
    }

    /// Why `call` cannot run on this worker now, if it cannot (the gate asks every pass).
    pub async fn admit_coerce(&self, call: &CoerceArgs) -> Option<PolicyBlock> {
        match self.route(call) {
            Ok(Some(route)) => self.admit_route(&route).await,
            Ok(None) => None,
            Err(block) => Some(block),
        }
    }

    /// Why an owned agent's turn cannot run on this worker now, if it cannot.
    pub async fn admit_turn(&self, turn: &TellArgs) -> Option<PolicyBlock> {
        match self.turn_route(turn) {
            Ok(Some(route)) => self.admit_route(&route).await,
            Ok(None) => None,
            Err(block) => Some(block),
        }
    }

    /// Why `route` cannot be taken now: its URL, its credential, the broker's health.
    async fn admit_route(&self, route: &Route) -> Option<PolicyBlock> {
        if let Err(why) = HttpUrl::parse(&route.url) {
            let detail = format!("the model endpoint cannot be reached by this build: {why}");
            return Some(Self::block(BlockCategory::ProviderConfig, detail));
        }
        if let Some(block) = self.credentials_block(route) {
            return Some(block);
        }
        let broker = self.config.broker.as_ref()?;
        let health = broker_url(broker, BROKER_HEALTH_PATH);
        let wait = Duration::from_millis(BROKER_HEALTH_WAIT_MS);
        let answer = match health {
            Ok(url) => http1::call(hyper::Method::GET, &url, &[], Vec::new(), (1024, wait)).await,
            Err(e) => return Some(Self::block(BlockCategory::ProviderConfig, e)),
        };
        match answer {
            Ok(a) if a.status == 200 => None,
            Ok(a) => Some(Self::block(
                BlockCategory::ProviderHealth,
                format!(
                    "the model broker answered its health check with HTTP {}",
                    a.status
                ),
            )),
            Err(e) => Some(Self::block(
                BlockCategory::ProviderHealth,
                format!("the model broker does not answer: {e}"),
            )),
        }
    }

    fn credentials_block(&self, route: &Route) -> Option<PolicyBlock> {
        let block = |d: String| Some(Self::block(BlockCategory::Credentials, d));
        let id = &route.provider_id;
        let Some(reference) = &route.credentials_ref else {
            return block(format!("binding `{id}` has no credential reference"));
        };
        if self.config.broker.is_some() {
            return None;
        }
        match reference.split_once(':') {
            Some(("env", name)) if std::env::var_os(name).is_some() => None,
            Some(("env", name)) => block(format!("the credential reference `env:{name}` is unset")),
            Some(("secret", _)) => block(format!(
                "binding `{id}` names a broker secret, and no model broker is configured \
                 (WHIP_MODEL_BROKER_URL)"
            )),
            _ => block(format!(
                "binding `{id}` has an unknown kind of credential reference"
            )),
        }
    }

    async fn run_coerce(&self, c: &CoerceArgs, key: &str) -> ProviderOutcome {
        let route = match self.route(c) {
            Ok(Some(route)) => route,
            Ok(None) => return self.fixture.coercion(&c.output),
            Err(block) => return failed(block.detail, "provider_config", None),
        };
        let (wrapped, schema) = answer_schema(&c.output);
        let body = request_body(route.wire, &route.model, c, (&schema, self.max_tokens()));
        let text = match self.exchange(&route, body, key).await {
            Ok((_, text)) => text,
            Err(outcome) => return outcome,
        };
        match reply_value(route.wire, &text, wrapped) {
            Ok(value) => ProviderOutcome::Completed {
                value,
                summary: "coerce succeeded".into(),
            },
            Err(why) => failed(
                format!("the provider's answer is malformed: {why}"),
                "malformed_answer",
                None,
            ),
        }
    }

    /// Send `body` on `route`: the status and the answer's text of a 2xx answer; any other
    /// status fails ("provider returned HTTP N").
    async fn exchange(
        &self,
        route: &Route,
        body: Value,
        key: &str,
    ) -> Result<(u16, String), ProviderOutcome> {
        let (status, text) = self.send(route, body, key).await?;
        if status >= 300 {
            let reason = format!("provider returned HTTP {status}");
            return Err(failed(reason, "http_status", Some(status)));
        }
        Ok((status, text))
    }

    /// Send `body` on `route` (through the broker when one is configured): the status and
    /// the answer's text.
    async fn send(
        &self,
        route: &Route,
        body: Value,
        key: &str,
    ) -> Result<(u16, String), ProviderOutcome> {
        match &self.config.broker {
            Some(broker) => self.via_broker(broker, route, body, key).await,
            None => self.direct(route, body, key).await,
        }
    }

    fn max_tokens(&self) -> u64 {
        match self.config.env.max_tokens {
            0 => COERCE_MAX_TOKENS_DEFAULT,
            n => n,
        }
    }

    fn wait(&self) -> Duration {
        Duration::from_secs(match self.config.env.timeout_secs {
            0 => crate::limits::COERCE_TIMEOUT_SECS_DEFAULT,
            n => n,
        })
    }

    /// Straight to the model, the key read from its `env:` reference now.
    async fn direct(
        &self,
        route: &Route,
        body: Value,
        key: &str,
    ) -> Result<(u16, String), ProviderOutcome> {
        let secret = match route
            .credentials_ref
            .as_deref()
            .and_then(|r| r.strip_prefix("env:"))
        {
            Some(name) => std::env::var(name).unwrap_or_default(),
            None => String::new(),
        };
        let headers = request_headers(route.wire, &secret, key);
        let url = HttpUrl::parse(&route.url).map_err(|e| failed(e, "provider_config", None))?;
        let bytes = serde_json::to_vec(&body).expect("a request encodes");
        let limits = (COERCE_ANSWER_BYTES_MAX, self.wait());
        let answer = http1::call(hyper::Method::POST, &url, &headers, bytes, limits).await;
        let answer =
            answer.map_err(|e| failed(format!("the model call failed: {e}"), "transport", None))?;
        Ok((
            answer.status,
            String::from_utf8_lossy(&answer.body).into_owned(),
        ))
    }

    /// Through the broker: the auth headers stripped (they hold only the sentinel), the
    /// request and the credential reference posted with this worker's token.
    async fn via_broker(
        &self,
        broker: &BrokerConfig,
        route: &Route,
        body: Value,
        key: &str,
    ) -> Result<(u16, String), ProviderOutcome> {
        let headers = request_headers(route.wire, BROKER_SENTINEL, key);
        let kept: Vec<[String; 2]> = (headers.iter())
            .filter(|(n, v)| !(is_auth_header(n) && v.contains(BROKER_SENTINEL)))
            .map(|(n, v)| [n.clone(), v.clone()])
            .collect();
        let envelope = json!({
            "protocol": EGRESS_PROTOCOL,
            "credential_ref": route.credentials_ref,
            "provider": route.provider_id,
            "request": {"url": route.url, "headers": kept, "body": body.to_string()},
        });
        let url = broker_url(broker, BROKER_EGRESS_PATH)
            .map_err(|e| failed(e, "provider_config", None))?;
        let outer = vec![
            ("content-type".to_string(), "application/json".to_string()),
            (
                "authorization".to_string(),
                format!("Bearer {}", broker.token),
            ),
            ("idempotency-key".to_string(), key.to_string()),
        ];
        let bytes = serde_json::to_vec(&envelope).expect("an envelope encodes");
        let limits = (COERCE_ANSWER_BYTES_MAX, self.wait());
        let answer = http1::call(hyper::Method::POST, &url, &outer, bytes, limits).await;
        let answer = answer.map_err(|e: CallError| {
            failed(
                format!("the model broker call failed: {e}"),
                "transport",
                None,
            )
        })?;
        if answer.status != 200 {
            let reason = format!("model broker returned HTTP {}", answer.status);
            return Err(failed(reason, "broker_refused", Some(answer.status)));
        }
        let relayed: Value = serde_json::from_slice(&answer.body).map_err(|e| {
            failed(
                format!("the broker's answer is malformed: {e}"),
                "malformed_answer",
                None,
            )
        })?;
        let status = relayed["status"]
            .as_u64()
            .filter(|s| (100..=599).contains(s));
        match (
            relayed["protocol"].as_str(),
            status,
            relayed["body"].as_str(),
        ) {
            (Some(EGRESS_PROTOCOL), Some(status), Some(body)) => {
                Ok((status as u16, body.to_string()))
            }
            _ => Err(failed(
                "the broker's answer is malformed".into(),
                "malformed_answer",
                None,
            )),
        }
    }
}

impl Provider for HttpProvider {
    fn tell<'a>(&'a self, turn: &'a TellArgs, key: &'a str) -> BoxFuture<'a, ProviderOutcome> {
        Box::pin(self.run_turn(turn, key))
    }

    fn coerce<'a>(&'a self, call: &'a CoerceArgs, key: &'a str) -> BoxFuture<'a, ProviderOutcome> {
        Box::pin(self.run_coerce(call, key))
    }

    fn admit<'a>(&'a self, call: &'a CoerceArgs) -> BoxFuture<'a, Option<PolicyBlock>> {
        Box::pin(self.admit_coerce(call))
    }

    fn admit_turn<'a>(&'a self, turn: &'a TellArgs) -> BoxFuture<'a, Option<PolicyBlock>> {
        Box::pin(HttpProvider::admit_turn(self, turn))
    }
}

/// Where a backend `kind` goes with `binding` (and, for a coercion, the environment's
/// model and base URL): a block says what is missing.
fn route_of(
    kind: &str,
    binding: Option<&Binding>,
    env: Option<&CoerceEnv>,
) -> Result<Route, PolicyBlock> {
    let config = |d: String| HttpProvider::block(BlockCategory::ProviderConfig, d);
    let Some(wire) = Wire::parse(kind) else {
        return Err(config(format!("unknown coercion backend `{kind}`")));
    };
    let model = (binding.and_then(|b| b.model.clone())).or_else(|| env?.model.clone());
    let Some(model) = model else {
        return Err(config(format!(
            "no model is configured for backend `{kind}`"
        )));
    };
    let base = (binding.and_then(|b| b.base_url.clone()))
        .or_else(|| env?.base_url.clone())
        .or_else(|| wire.default_base().map(str::to_string));
    let Some(base) = base else {
        return Err(config(format!(
            "no base URL is configured for backend `{kind}`"
        )));
    };
    Ok(Route {
        wire,
        provider_id: binding.map_or(kind.to_string(), |b| b.provider_id.clone()),
        model,
        url: format!("{}{}", base.trim_end_matches('/'), wire.path()),
        credentials_ref: binding.and_then(|b| b.credentials_ref.clone()),
    })
}

fn failed(reason: String, class: &'static str, http_status: Option<u16>) -> ProviderOutcome {
    ProviderOutcome::Failed {
        reason,
        error_class: class,
        exit_code: None,
        http_status,
    }
}

fn broker_url(broker: &BrokerConfig, path: &str) -> Result<HttpUrl, String> {
    let base = HttpUrl::parse(&broker.url).map_err(|e| format!("the model broker: {e}"))?;
    if !base.tls && !base.is_loopback() {
        return Err(format!(
            "the model broker {} is plain HTTP off loopback: use https://",
            broker.url
        ));
    }
    Ok(HttpUrl {
        path: format!("{}{path}", base.path.trim_end_matches('/')),
        ..base
    })
}

fn is_auth_header(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "authorization" | "x-api-key" | "chatgpt-account-id"
    )
}

/// The headers of a model request, `secret` in its auth header.
fn request_headers(wire: Wire, secret: &str, key: &str) -> Vec<(String, String)> {
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("idempotency-key".to_string(), key.to_string()),
    ];
    match wire {
        Wire::Anthropic => {
            headers.push(("x-api-key".into(), secret.to_string()));
            headers.push(("anthropic-version".into(), "2023-06-01".into()));
        }
        Wire::OpenAi | Wire::OpenAiGeneric => {
            headers.push(("authorization".into(), format!("Bearer {secret}")));
        }
    }
    headers
}

/// The schema a model answers: an object type's own, any other type as `{value: T}`
/// (whether it was wrapped, and the schema).
fn answer_schema(output: &Shape) -> (bool, Value) {
    let schema = output.json_schema();
    match output {
        Shape::Object { .. } => (false, schema),
        _ => (
            true,
            json!({"type": "object", "properties": {"value": schema}, "required": ["value"],
                "additionalProperties": false}),
        ),
    }
}

/// The body of one coercion request on `wire`.
fn request_body(wire: Wire, model: &str, c: &CoerceArgs, (schema, max): (&Value, u64)) -> Value {
    let name = schema_name(&c.output_type);
    match wire {
        Wire::OpenAiGeneric => json!({
            "model": model, "max_tokens": max,
            "messages": [{"role": "user", "content": c.prompt}],
            "response_format": {"type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": true}},
        }),
        Wire::OpenAi => json!({
            "model": model, "max_output_tokens": max, "input": c.prompt,
            "text": {"format": {"type": "json_schema", "name": name, "schema": schema,
                "strict": true}},
        }),
        Wire::Anthropic => json!({
            "model": model, "max_tokens": max,
            "messages": [{"role": "user", "content": c.prompt}],
            "tools": [{"name": format!("emit_{name}"), "input_schema": schema,
                "description": format!("Emit the {} value.", c.output_type)}],
            "tool_choice": {"type": "tool", "name": format!("emit_{name}")},
        }),
    }
}

/// A type's name as a schema name: letters, digits and `_` only.
fn schema_name(output_type: &str) -> String {
    let name: String = (output_type.chars())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.is_empty() {
        "Value".into()
    } else {
        name
    }
}

/// The value in a model's answer `text` on `wire` (unwrapped from `{value: T}` when the
/// request wrapped it).
fn reply_value(wire: Wire, text: &str, wrapped: bool) -> Result<Value, String> {
    let reply: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let value = match wire {
        Wire::OpenAiGeneric => {
            let content = reply["choices"][0]["message"]["content"].as_str();
            let content = content.ok_or("no choices[0].message.content")?;
            serde_json::from_str(content).map_err(|e| format!("content is not JSON: {e}"))?
        }
        Wire::OpenAi => {
            let texts = (reply["output"].as_array().into_iter().flatten())
                .flat_map(|o| o["content"].as_array().into_iter().flatten())
                .find_map(|c| {
                    (c["type"] == "output_text")
                        .then(|| c["text"].as_str())
                        .flatten()
                });
            let text = texts.ok_or("no output_text in output")?;
            serde_json::from_str(text).map_err(|e| format!("output_text is not JSON: {e}"))?
        }
        Wire::Anthropic => (reply["content"].as_array().into_iter().flatten())
            .find(|c| c["type"] == "tool_use")
            .map(|c| c["input"].clone())
            .ok_or("no tool_use in content")?,
    };
    match wrapped {
        true => value
            .get("value")
            .cloned()
            .ok_or_else(|| "no `value` field".to_string()),
        false => Ok(value),
    }
}

mod owned;
#[cfg(test)]
mod tests;
