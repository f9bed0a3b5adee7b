//! `catalog.describe`, `presets.describe`, `presets.resolve`, `models.list`.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use crate::app::App;
use crate::llm::{LlmSettings, catalog, http_client, models_list, presets};
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, RpcError, reply};
use crate::strict::NoParams;

pub async fn describe_catalog(_app: Arc<App>, call: Call) -> Outcome {
    let _: NoParams = call.params()?;
    reply(&catalog::describe())
}

pub async fn describe_presets(_app: Arc<App>, call: Call) -> Outcome {
    let _: NoParams = call.params()?;
    reply(&presets::describe())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResolveParams {
    base_url: String,
    model: String,
}

pub async fn resolve_preset(_app: Arc<App>, call: Call) -> Outcome {
    let p: ResolveParams = call.params()?;
    reply(&json!({ "preset": presets::resolve(&p.base_url, &p.model) }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListParams {
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    refresh: bool,
}

pub async fn list_models(app: Arc<App>, call: Call) -> Outcome {
    let p: ListParams = call.params()?;
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let base_url = p
        .base_url
        .or_else(|| env("OUTRIGGER_BASE_URL"))
        .ok_or_else(|| {
            RpcError::invalid_params(
                "models.list needs baseUrl (or the OUTRIGGER_BASE_URL environment variable)",
            )
        })?;
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(RpcError::invalid_params(format!(
            "baseUrl must be an http(s) URL, got '{base_url}'"
        )));
    }
    let api_key = p.api_key.or_else(|| env("OUTRIGGER_API_KEY"));
    let client = http_client(&LlmSettings::from_settings(&app.settings()))
        .map_err(|e| RpcError::internal(e.to_string()))?;
    let listing = models_list::list(
        &client,
        &base_url,
        api_key.as_deref(),
        p.provider.as_deref(),
        p.refresh,
    )
    .await;
    reply(&listing)
}
