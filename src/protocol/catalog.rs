//! Model metadata for host settings UIs: `catalog.describe`, `presets.describe`,
//! `presets.resolve`, `models.list` and `compat.describe`. The `llm` module keeps its own
//! structs; the handlers in `rpc/methods/{catalog,llm}.rs` convert them into these.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::session::all_required;

/// `catalog.describe` result: the embedded model catalog (generated from models.dev).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CatalogDescribeResult {
    pub providers: Vec<CatalogProvider>,
}

/// One provider of the model catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = all_required)]
pub struct CatalogProvider {
    pub id: String,
    /// Always present; null when the catalog names no endpoint.
    pub api_base_url: Option<String>,
    /// Environment variables the provider's key is usually found in.
    pub env_vars: Vec<String>,
    /// `openai_compat`, `openai`, `anthropic`, `google`, …
    pub wire_kind: String,
    /// Sorted ids of its chat-capable models.
    pub models: Vec<String>,
}

/// `presets.describe` result: the sampling-optima rows, in match order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PresetsDescribeResult {
    pub presets: Vec<PresetRow>,
}

/// One row of the preset table. Every member is present; an unset field is null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = all_required)]
pub struct PresetRow {
    /// A base URL substring, or `*` for any base URL.
    pub host: String,
    /// Matched against the model id's final path segment, lowercased.
    pub model_prefix: String,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u64>,
    pub reasoning_effort: Option<String>,
    /// Extra request body members (e.g. `top_k`).
    pub extra_body: Option<Map<String, Value>>,
}

/// `presets.resolve` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PresetsResolveParams {
    pub base_url: String,
    pub model: String,
}

/// `presets.resolve` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = all_required)]
pub struct PresetsResolveResult {
    /// Always present: what a request with that pair would get for the fields it leaves
    /// unset (the most specific row wins), or null when no row matches. `{}` means a row
    /// matched that sets nothing (e.g. `deepseek-reasoner`).
    pub preset: Option<SamplingPreset>,
}

/// A preset's fields; only the ones it sets are present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SamplingPreset {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<Map<String, Value>>,
}

/// `models.list` params. An unreachable gateway is still a successful reply (with `error`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelsListParams {
    /// An http(s) URL; falls back to `OUTRIGGER_BASE_URL` (one of the two is required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Falls back to `OUTRIGGER_API_KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// `anthropic` (`/v1/models` with `x-api-key`) or `google` (`x-goog-api-key`); anything
    /// else lists `{baseUrl}/models` with a bearer key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Bypass the 60 s per-base-URL cache.
    #[serde(default)]
    pub refresh: bool,
}

/// `models.list` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelsListResult {
    /// In the gateway's listing order (a `{id: row}` map comes in id order).
    pub models: Vec<ListedModel>,
    pub catalog_status: CatalogStatus,
    /// When the listing served was fetched (absent when `offline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<String>,
    /// Why the fetch failed (`stale` and `offline` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where a `models.list` answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CatalogStatus {
    /// Fetched now, or from the cache within 60 s.
    Live,
    /// The fetch failed; the last cached listing is served.
    Stale,
    /// The fetch failed and nothing was cached: no models.
    Offline,
}

/// A listed model joined to the catalog (by id, then by final path segment without
/// `:free`-style suffixes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = all_required)]
pub struct ListedModel {
    pub id: String,
    /// The gateway's name, else the id.
    pub name: String,
    /// Tokens: the gateway's advertised window, else the catalog's, else 60000.
    pub window: u64,
    pub modalities: Modalities,
    /// `reasoningEffort` values the model accepts; empty when it has no such knob.
    pub reasoning_levels: Vec<String>,
    /// Always present: the gateway's pricing, else the catalog's, else null.
    pub pricing: Option<ModelPricing>,
    /// Always present: the catalog provider the row was joined to, or null.
    pub joined_from: Option<String>,
    pub capabilities: Capabilities,
}

/// Input and output modalities (`text`, `image`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Modalities {
    pub input: Vec<String>,
    pub output: Vec<String>,
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelPricing {
    pub prompt_per_mtok: f64,
    pub completion_per_mtok: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_per_mtok: Option<f64>,
}

/// Whether the catalog knows the model (`known`) or its capabilities are guessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Capabilities {
    Known,
    Unknown,
}

/// `compat.describe` result: the compat flags a chat's `compat` param may set, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompatDescribeResult {
    pub flags: Vec<CompatFlagDoc>,
}

/// One OpenAI-compatible compat flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompatFlagDoc {
    /// The key in `compat` (camelCase).
    pub key: String,
    /// The same flag in snake_case.
    pub field: String,
    /// `bool`, `string`, `string-list` or `enum:<value>,<value>…`.
    pub kind: String,
    /// The reference (OpenAI) value, of the type `kind` names.
    pub default: Value,
    pub description: String,
}
