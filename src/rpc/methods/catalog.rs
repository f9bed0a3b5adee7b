//! `catalog.describe`, `presets.describe`, `presets.resolve`, `models.list`.

use std::sync::Arc;

use crate::app::App;
use crate::llm::catalog::{self, Pricing, ProviderRow};
use crate::llm::models_list::{self, JoinedModel, Listing, ListingStatus};
use crate::llm::presets::{self, Preset, PresetEntry};
use crate::llm::{LlmSettings, http_client};
use crate::protocol::NoParams;
use crate::protocol::catalog::{
    Capabilities, CatalogDescribeResult, CatalogProvider, CatalogStatus, ListedModel, Modalities,
    ModelPricing, ModelsListParams, ModelsListResult, PresetRow, PresetsDescribeResult,
    PresetsResolveParams, PresetsResolveResult, SamplingPreset,
};
use crate::rpc::error::RpcError;

impl From<&ProviderRow> for CatalogProvider {
    fn from(p: &ProviderRow) -> Self {
        let mut models: Vec<String> = p.models.iter().map(|m| m.id.clone()).collect();
        models.sort_unstable();
        CatalogProvider {
            id: p.id.clone(),
            api_base_url: p.api_base_url.clone(),
            env_vars: p.env_vars.clone(),
            wire_kind: p.wire_kind.clone(),
            models,
        }
    }
}

impl From<PresetEntry> for PresetRow {
    fn from(e: PresetEntry) -> Self {
        let p = e.preset;
        PresetRow {
            host: e.host.to_string(),
            model_prefix: e.model_prefix.to_string(),
            temperature: p.temperature,
            top_p: p.top_p,
            max_tokens: p.max_tokens,
            reasoning_effort: p.reasoning_effort,
            extra_body: p.extra_body,
        }
    }
}

impl From<Preset> for SamplingPreset {
    fn from(p: Preset) -> Self {
        SamplingPreset {
            temperature: p.temperature,
            top_p: p.top_p,
            max_tokens: p.max_tokens,
            reasoning_effort: p.reasoning_effort,
            extra_body: p.extra_body,
        }
    }
}

impl From<Pricing> for ModelPricing {
    fn from(p: Pricing) -> Self {
        ModelPricing {
            prompt_per_mtok: p.prompt_per_mtok,
            completion_per_mtok: p.completion_per_mtok,
            cached_per_mtok: p.cached_per_mtok,
        }
    }
}

impl From<JoinedModel> for ListedModel {
    fn from(m: JoinedModel) -> Self {
        let capabilities = if m.joined_from.is_some() {
            Capabilities::Known
        } else {
            Capabilities::Unknown
        };
        ListedModel {
            id: m.id,
            name: m.name,
            window: m.window,
            modalities: Modalities {
                input: m.input,
                output: m.output,
            },
            reasoning_levels: m.reasoning_levels.into_iter().map(String::from).collect(),
            pricing: m.pricing.map(ModelPricing::from),
            joined_from: m.joined_from,
            capabilities,
        }
    }
}

impl From<Listing> for ModelsListResult {
    fn from(l: Listing) -> Self {
        ModelsListResult {
            models: l.models.into_iter().map(ListedModel::from).collect(),
            catalog_status: match l.status {
                ListingStatus::Live => CatalogStatus::Live,
                ListingStatus::Stale => CatalogStatus::Stale,
                ListingStatus::Offline => CatalogStatus::Offline,
            },
            fetched_at: l.fetched_at,
            error: l.error,
        }
    }
}

pub async fn describe_catalog(_: Arc<App>, _: NoParams) -> Result<CatalogDescribeResult, RpcError> {
    Ok(CatalogDescribeResult {
        providers: catalog::catalog()
            .providers
            .iter()
            .map(CatalogProvider::from)
            .collect(),
    })
}

pub async fn describe_presets(_: Arc<App>, _: NoParams) -> Result<PresetsDescribeResult, RpcError> {
    Ok(PresetsDescribeResult {
        presets: presets::entries()
            .into_iter()
            .map(PresetRow::from)
            .collect(),
    })
}

pub async fn resolve_preset(
    _: Arc<App>,
    p: PresetsResolveParams,
) -> Result<PresetsResolveResult, RpcError> {
    Ok(PresetsResolveResult {
        preset: presets::resolve(&p.base_url, &p.model).map(SamplingPreset::from),
    })
}

pub async fn list_models(app: Arc<App>, p: ModelsListParams) -> Result<ModelsListResult, RpcError> {
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
    let client = http_client(&LlmSettings::from_settings(&app.settings()), &base_url)?;
    let listing = models_list::list(
        &client,
        &base_url,
        api_key.as_deref(),
        p.provider.as_deref(),
        p.refresh,
    )
    .await;
    Ok(ModelsListResult::from(listing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::catalog::LiveInfo;
    use crate::llm::models_list::Listed;
    use serde_json::json;

    #[test]
    fn catalog_rows() {
        let providers = catalog::catalog()
            .providers
            .iter()
            .map(CatalogProvider::from)
            .collect::<Vec<_>>();
        let ds = providers.iter().find(|r| r.id == "deepseek").unwrap();
        assert!(ds.api_base_url.as_deref().unwrap().contains("deepseek"));
        assert_eq!(ds.wire_kind, "openai_compat");
        let an = providers.iter().find(|r| r.id == "anthropic").unwrap();
        assert_eq!(an.wire_kind, "anthropic");
        let mut sorted = ds.models.clone();
        sorted.sort_unstable();
        assert_eq!(ds.models, sorted);
    }

    /// Unset preset fields are null in `presets.describe` rows and absent in a resolved preset.
    #[test]
    fn preset_nulls_and_absences() {
        let rows: Vec<PresetRow> = presets::entries()
            .into_iter()
            .map(PresetRow::from)
            .collect();
        let row = serde_json::to_value(&rows[0]).unwrap();
        assert_eq!(row["host"], "api.deepseek.com");
        assert!(row["temperature"].is_null() && row.get("extraBody").is_some());
        let resolved = PresetsResolveResult {
            preset: presets::resolve("https://api.deepseek.com", "deepseek-reasoner")
                .map(SamplingPreset::from),
        };
        assert_eq!(
            serde_json::to_value(&resolved).unwrap(),
            json!({"preset": {}})
        );
        let none = PresetsResolveResult { preset: None };
        assert_eq!(
            serde_json::to_value(&none).unwrap(),
            json!({"preset": null})
        );
    }

    #[test]
    fn listed_models_keep_their_nulls() {
        let unknown = ListedModel::from(models_list::joined_row(&Listed {
            id: "totally-unknown-model-zz".into(),
            name: None,
            live: LiveInfo::default(),
        }));
        let v = serde_json::to_value(&unknown).unwrap();
        assert_eq!(v["capabilities"], "unknown");
        assert!(v["joinedFrom"].is_null() && v["pricing"].is_null());
        assert_eq!(v["modalities"]["input"], json!(["text"]));
        let offline = ModelsListResult::from(Listing {
            models: Vec::new(),
            status: ListingStatus::Offline,
            fetched_at: None,
            error: Some("down".into()),
        });
        assert_eq!(
            serde_json::to_value(&offline).unwrap(),
            json!({"models": [], "catalogStatus": "offline", "error": "down"})
        );
    }
}
