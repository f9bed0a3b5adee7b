//! `catalog.describe`, `presets.describe`, `presets.resolve` and `models.list` over pipes,
//! with a fake gateway on loopback for the live listing.

use crate::common::{Opts, Sidecar};
use crate::support::fake_openai::{FakeServer, Reply};
use serde_json::{Value, json};

fn find<'a>(rows: &'a Value, id: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no row {id} in {rows}"))
}

#[test]
fn catalog_describe_rows() {
    let mut s = Sidecar::start();
    let r = s.ok("catalog.describe", Value::Null);
    let providers = &r["providers"];
    assert!(providers.as_array().unwrap().len() > 50);
    let ds = find(providers, "deepseek");
    assert_eq!(ds["apiBaseUrl"], "https://api.deepseek.com");
    assert_eq!(ds["wireKind"], "openai_compat");
    assert!(
        ds["envVars"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "DEEPSEEK_API_KEY")
    );
    assert!(
        ds["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "deepseek-chat")
    );
    assert_eq!(find(providers, "anthropic")["wireKind"], "anthropic");
}

#[test]
fn presets_describe_and_resolve() {
    let mut s = Sidecar::start();
    let rows = s.ok("presets.describe", Value::Null)["presets"].clone();
    assert_eq!(rows.as_array().unwrap().len(), 14);
    assert_eq!(rows[5]["modelPrefix"], "qwen3");
    assert_eq!(rows[5]["extraBody"], json!({"top_k": 20}));
    let r = s.ok(
        "presets.resolve",
        json!({"baseUrl": "https://api.deepseek.com", "model": "deepseek-chat"}),
    );
    assert_eq!(r, json!({"preset": {"temperature": 0.0}}));
    let r = s.ok(
        "presets.resolve",
        json!({"baseUrl": "https://api.openai.com/v1", "model": "gpt-4o"}),
    );
    assert_eq!(r, json!({"preset": null}));
    let r = s.call("presets.resolve", json!({"model": "x"}));
    assert_eq!(r["error"]["code"], -32602);
}

const OPENAI_LISTING: &str = r#"{"object":"list","data":[
  {"id":"gpt-4o","object":"model"},
  {"id":"vendor/custom-model:free","context_length":32000,"top_provider":{"max_completion_tokens":4096},
   "pricing":{"prompt":"0.000001","completion":"0.000002"}},
  {"id":"never-heard-of-it"}
]}"#;

#[test]
fn models_list_live_cached_refresh_and_stale() {
    let gw = FakeServer::start(vec![
        Reply::status(200, OPENAI_LISTING),
        Reply::status(500, r#"{"error":{"message":"down"}}"#),
    ]);
    let mut s = Sidecar::start();
    let params = json!({"baseUrl": gw.base_url(), "apiKey": "sk-test"});
    let r = s.ok("models.list", params.clone());
    assert_eq!(r["catalogStatus"], "live", "{r}");
    assert!(r["fetchedAt"].as_str().unwrap().ends_with('Z'));
    let models = &r["models"];
    let gpt = find(models, "gpt-4o");
    assert_eq!(gpt["capabilities"], "known");
    assert!(gpt["joinedFrom"].is_string());
    let custom = find(models, "vendor/custom-model:free");
    assert_eq!(custom["window"], 32000);
    assert_eq!(custom["pricing"]["promptPerMtok"], 1.0);
    assert_eq!(find(models, "never-heard-of-it")["capabilities"], "unknown");
    // Unknown to the catalog and no window from the gateway: the loop's fallback window.
    assert_eq!(find(models, "never-heard-of-it")["window"], 60000, "{r}");
    let reqs = gw.requests();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].path.ends_with("/v1/models"), "{}", reqs[0].path);
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-test"));

    // Within the TTL the cache answers; no second request.
    let again = s.ok("models.list", params.clone());
    assert_eq!(again["catalogStatus"], "live");
    assert_eq!(gw.requests().len(), 1);

    // refresh bypasses the cache; the gateway now fails: the old listing is served stale.
    let mut refresh = params.clone();
    refresh["refresh"] = json!(true);
    let stale = s.ok("models.list", refresh);
    assert_eq!(stale["catalogStatus"], "stale", "{stale}");
    assert!(stale["error"].as_str().unwrap().contains("500"));
    assert_eq!(stale["models"].as_array().unwrap().len(), 3);
    assert_eq!(gw.requests().len(), 2);
}

#[test]
fn models_list_keeps_the_gateway_order_and_gives_unknown_models_the_fallback_window() {
    // Deliberately not alphabetical, known and unknown models interleaved.
    let listing = r#"{"object":"list","data":[
      {"id":"zz-unknown-model-one"},
      {"id":"gpt-4o"},
      {"id":"mm-unknown-model-two","context_length":12345},
      {"id":"deepseek-chat"},
      {"id":"aa-unknown-model-three"}
    ]}"#;
    let gw = FakeServer::start(vec![Reply::status(200, listing)]);
    let mut s = Sidecar::start();
    let r = s.ok("models.list", json!({"baseUrl": gw.base_url()}));
    assert_eq!(r["catalogStatus"], "live", "{r}");
    let ids: Vec<&str> = r["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "zz-unknown-model-one",
            "gpt-4o",
            "mm-unknown-model-two",
            "deepseek-chat",
            "aa-unknown-model-three"
        ]
    );
    for id in ["zz-unknown-model-one", "aa-unknown-model-three"] {
        let m = find(&r["models"], id);
        assert_eq!(m["capabilities"], "unknown", "{m}");
        assert_eq!(m["window"], 60000, "{m}");
    }
    // A window the gateway advertises wins, known or not.
    assert_eq!(find(&r["models"], "mm-unknown-model-two")["window"], 12345);
    // The cached answer keeps the order too.
    let again = s.ok("models.list", json!({"baseUrl": gw.base_url()}));
    assert_eq!(again["models"], r["models"]);
}

#[test]
fn models_list_offline_and_shapes() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut s = Sidecar::start();
    let r = s.ok(
        "models.list",
        json!({"baseUrl": format!("http://127.0.0.1:{port}/v1")}),
    );
    assert_eq!(r["catalogStatus"], "offline");
    assert_eq!(r["models"], json!([]));
    assert!(r["error"].is_string());

    let gw = FakeServer::start(vec![Reply::status(
        200,
        r#"{"models":{"m-one":{"name":"M One","limit":{"context":64000,"output":8000},"cost":{"input":1.5,"output":3}}}}"#,
    )]);
    let r = s.ok("models.list", json!({"baseUrl": gw.base_url()}));
    let m = find(&r["models"], "m-one");
    assert_eq!(m["name"], "M One");
    assert_eq!(m["window"], 64000);
    assert_eq!(m["pricing"]["completionPerMtok"], 3.0);

    let r = s.call("models.list", json!({}));
    assert_eq!(r["error"]["code"], -32602);
    assert!(r["error"]["message"].as_str().unwrap().contains("baseUrl"));
}

#[test]
fn models_list_env_fallback() {
    let gw = FakeServer::start(vec![Reply::status(200, OPENAI_LISTING)]);
    let mut s = Sidecar::start_with(Opts {
        env: vec![
            ("OUTRIGGER_BASE_URL".into(), gw.base_url()),
            ("OUTRIGGER_API_KEY".into(), "sk-env".into()),
        ],
        ..Default::default()
    });
    let r = s.ok("models.list", json!({}));
    assert_eq!(r["catalogStatus"], "live");
    assert_eq!(
        gw.requests()[0].header("authorization"),
        Some("Bearer sk-env")
    );
}
