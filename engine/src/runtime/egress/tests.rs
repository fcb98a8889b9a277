use super::*;

fn coerce(provider: Option<&str>, output: Shape) -> CoerceArgs {
    CoerceArgs {
        function: "review".into(),
        provider: provider.map(str::to_string),
        prompt: "Review it.".into(),
        args: Value::Null,
        output,
        output_type: "Decision".into(),
        timeout_ms: None,
    }
}

fn binding(id: &str, kind: &str, reference: Option<&str>) -> Binding {
    Binding {
        provider_id: id.into(),
        provider_kind: kind.into(),
        model: Some("m1".into()),
        base_url: Some("http://127.0.0.1:9/v1".into()),
        credentials_ref: reference.map(str::to_string),
    }
}

fn provider(bindings: Vec<Binding>, broker: bool) -> HttpProvider {
    let broker = broker.then(|| BrokerConfig {
        url: "http://127.0.0.1:9".into(),
        token: "t".into(),
    });
    let config = EgressConfig {
        bindings,
        broker,
        ..EgressConfig::default()
    };
    HttpProvider::new(FixtureProvider::default(), config)
}

#[test]
fn a_coerce_without_a_backend_stays_on_the_fixture_and_a_named_one_must_be_bound() {
    let p = provider(vec![], false);
    assert!(p.route(&coerce(None, Shape::String)).unwrap().is_none());
    let unbound = p.route(&coerce(Some("gpt"), Shape::String)).unwrap_err();
    assert_eq!(unbound.category, BlockCategory::ProviderConfig);
    assert_eq!(
        unbound.detail,
        "coerce `review` names provider `gpt`, which no binding configures"
    );
    let p = provider(vec![binding("gpt", "carrier", Some("env:K"))], false);
    let unknown = p.route(&coerce(Some("gpt"), Shape::String)).unwrap_err();
    assert_eq!(unknown.detail, "unknown coercion backend `carrier`");
}

#[test]
fn credentials_block_by_kind_of_reference_and_never_show_a_secret() {
    let route = |r: Option<&str>, broker: bool| {
        let p = provider(vec![binding("gpt", "openai-generic", r)], broker);
        let route = p
            .route(&coerce(Some("gpt"), Shape::String))
            .unwrap()
            .unwrap();
        p.credentials_block(&route)
    };
    let none = route(None, false).unwrap();
    assert_eq!(none.category, BlockCategory::Credentials);
    assert_eq!(none.detail, "binding `gpt` has no credential reference");
    let unset = route(Some("env:WHIP_TEST_SURELY_UNSET_KEY"), false).unwrap();
    assert_eq!(
        unset.detail,
        "the credential reference `env:WHIP_TEST_SURELY_UNSET_KEY` is unset"
    );
    let secret = route(Some("secret:openai"), false).unwrap();
    assert!(
        secret.detail.contains("no model broker is configured"),
        "{}",
        secret.detail
    );
    assert_eq!(
        route(Some("secret:openai"), true),
        None,
        "the broker resolves it"
    );
}

#[test]
fn each_wire_asks_for_the_schema_and_reads_its_answer() {
    let decision = Shape::Enum {
        name: "Verdict".into(),
        variants: vec!["merge".into(), "revise".into()],
    };
    let (wrapped, schema) = answer_schema(&decision);
    assert!(wrapped, "a non-object type travels as {{value: T}}");
    let c = coerce(None, decision);
    let body = request_body(Wire::OpenAiGeneric, "m1", &c, (&schema, 64));
    assert_eq!(body["response_format"]["json_schema"]["schema"], schema);
    assert_eq!(body["messages"][0]["content"], "Review it.");
    let chat = json!({"choices": [{"message": {"content": "{\"value\": \"merge\"}"}}]});
    assert_eq!(
        reply_value(Wire::OpenAiGeneric, &chat.to_string(), true),
        Ok(json!("merge"))
    );
    let body = request_body(Wire::Anthropic, "m1", &c, (&schema, 64));
    assert_eq!(body["tool_choice"]["name"], "emit_Decision");
    let msg =
        json!({"content": [{"type": "text"}, {"type": "tool_use", "input": {"value": "revise"}}]});
    assert_eq!(
        reply_value(Wire::Anthropic, &msg.to_string(), true),
        Ok(json!("revise"))
    );
    let body = request_body(Wire::OpenAi, "m1", &c, (&schema, 64));
    assert_eq!(body["text"]["format"]["type"], "json_schema");
    let text = json!({"type": "output_text", "text": "{\"value\": \"merge\"}"});
    let resp = json!({"output": [{"content": [text]}]});
    assert_eq!(
        reply_value(Wire::OpenAi, &resp.to_string(), true),
        Ok(json!("merge"))
    );
    assert!(reply_value(Wire::OpenAiGeneric, "{}", true).is_err());
    assert!(reply_value(Wire::OpenAiGeneric, "not json", true).is_err());
}

#[test]
fn the_broker_gets_the_sentinel_and_a_direct_call_the_key() {
    let headers = request_headers(Wire::OpenAiGeneric, BROKER_SENTINEL, "k1");
    let auth = headers.iter().find(|(n, _)| n == "authorization").unwrap();
    assert_eq!(auth.1, format!("Bearer {BROKER_SENTINEL}"));
    assert!(
        headers
            .iter()
            .any(|(n, v)| n == "idempotency-key" && v == "k1")
    );
    let anthropic = request_headers(Wire::Anthropic, "sk-1", "k1");
    assert!(
        anthropic
            .iter()
            .any(|(n, v)| n == "x-api-key" && v == "sk-1")
    );
    assert!(is_auth_header("Authorization") && is_auth_header("x-api-key"));
    let far = BrokerConfig {
        url: "http://10.1.2.3:80".into(),
        token: "t".into(),
    };
    assert!(
        broker_url(&far, BROKER_EGRESS_PATH).is_err(),
        "plain HTTP stays on loopback"
    );
    assert!(
        !format!("{far:?}").contains("\"t\""),
        "the token is not printed"
    );
}
