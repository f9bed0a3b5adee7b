//! The model catalog: a compact table generated from models.dev (`scripts/gen_catalog.py`,
//! data in `data/catalog.json`, MIT, see `data/LICENSE-models-dev`), embedded in the binary
//! and parsed on first use. It answers window, max output, modalities, reasoning levels and
//! pricing per model. Live `models.list` results overlay it, so a gateway's advertised
//! windows win.

use crate::strict::Invalid;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

use serde::Deserialize;

static RAW: &str = include_str!("../../data/catalog.json");

/// Window assumed for a model nobody knows.
pub const FALLBACK_WINDOW: u64 = 60_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRow {
    pub id: String,
    pub name: String,
    pub api_base_url: Option<String>,
    #[serde(default)]
    pub env_vars: Vec<String>,
    pub wire_kind: String,
    pub models: Vec<ModelRow>,
}

fn text() -> &'static [String] {
    intern(vec!["text".to_string()])
}

/// A modality list, shared: the catalog's ~4,700 models use a few dozen distinct lists, and a
/// `Vec<String>` per model and direction held ~1 MiB for the life of the process.
fn interned<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static [String], D::Error> {
    Vec::<String>::deserialize(d).map(intern)
}

/// Leaks each distinct list once; only the embedded catalog is read through this, so the
/// lists are bounded by what it holds.
fn intern(v: Vec<String>) -> &'static [String] {
    static SEEN: std::sync::Mutex<Vec<&'static [String]>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = seen.iter().find(|s| ***s == v[..]) {
        return s;
    }
    let s: &'static [String] = Box::leak(v.into_boxed_slice());
    seen.push(s);
    s
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRow {
    pub id: String,
    pub window: Option<u64>,
    pub max_output: Option<u64>,
    #[serde(default = "text", deserialize_with = "interned")]
    pub input: &'static [String],
    #[serde(default = "text", deserialize_with = "interned")]
    pub output: &'static [String],
    #[serde(default)]
    pub reasoning: bool,
    #[serde(default = "yes")]
    pub tool_call: bool,
    #[serde(default = "yes")]
    pub temperature: bool,
    /// USD per million tokens: input, output, cache read.
    pub pricing: Option<[Option<f64>; 3]>,
    /// Where the model streams its reasoning, when the data names it.
    pub reasoning_field: Option<String>,
}

#[derive(Deserialize)]
struct RawCatalog {
    providers: Vec<ProviderRow>,
}

pub struct Catalog {
    pub providers: Vec<ProviderRow>,
    /// Lowercased model id → (provider index, model index), in provider order.
    by_id: HashMap<String, Vec<(usize, usize)>>,
}

/// The embedded catalog, parsed once. A parse failure (a broken generated file, which a test
/// guards against) leaves an empty catalog and every model on the fallback window.
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let providers = match serde_json::from_str::<RawCatalog>(RAW) {
            Ok(c) => c.providers,
            Err(e) => {
                tracing::error!("embedded model catalog is unreadable: {e}");
                Vec::new()
            }
        };
        let mut by_id: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
        for (pi, p) in providers.iter().enumerate() {
            for (mi, m) in p.models.iter().enumerate() {
                by_id
                    .entry(m.id.to_ascii_lowercase())
                    .or_default()
                    .push((pi, mi));
            }
        }
        Catalog { providers, by_id }
    })
}

/// What a live gateway listing said about a model (`models.list`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveInfo {
    pub window: Option<u64>,
    pub max_output: Option<u64>,
    pub pricing: Option<Pricing>,
}

fn live() -> &'static RwLock<HashMap<String, LiveInfo>> {
    static LIVE: OnceLock<RwLock<HashMap<String, LiveInfo>>> = OnceLock::new();
    LIVE.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Installs a gateway's listing so window sizing sees what the gateway advertises.
pub fn install_live(models: impl IntoIterator<Item = (String, LiveInfo)>) {
    let mut map = live().write().unwrap_or_else(|e| e.into_inner());
    for (id, info) in models {
        map.insert(id.to_ascii_lowercase(), info);
    }
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pricing {
    pub prompt_per_mtok: f64,
    pub completion_per_mtok: f64,
    pub cached_per_mtok: Option<f64>,
}

/// A model as the request path sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    pub id: String,
    pub window: u64,
    pub max_output: Option<u64>,
    pub input: Vec<String>,
    pub output: Vec<String>,
    pub reasoning: bool,
    /// `reasoningEffort` values the model accepts; empty means it has no such knob.
    pub reasoning_levels: Vec<&'static str>,
    pub pricing: Option<Pricing>,
    /// Found in the catalog (or a live listing).
    pub known: bool,
    /// The catalog provider the row came from.
    pub provider: Option<String>,
}

/// The model's final path segment without an endpoint modifier (`:free`, `:batch`): those
/// change routing and price, never capabilities.
pub fn model_leaf(model: &str) -> &str {
    let leaf = model.rsplit('/').next().unwrap_or(model);
    leaf.split(':').next().unwrap_or(leaf)
}

pub(crate) fn host_of(url: &str) -> Option<String> {
    let rest = url.split("://").nth(1)?;
    let host = rest.split(['/', '?', '#']).next()?;
    let host = host.rsplit('@').next()?;
    Some(host.split(':').next()?.to_ascii_lowercase())
}

/// Vendors serving their own models: their rows describe a model best when no base URL says
/// which gateway is in use.
const FIRST_PARTY: &[&str] = &[
    "openai",
    "anthropic",
    "google",
    "deepseek",
    "mistral",
    "xai",
    "moonshotai",
    "zhipuai",
    "alibaba",
    "minimax",
    "cohere",
];

/// Reasoning-effort levels by model family. models.dev says whether a model reasons, not
/// which effort values its API takes, so this small table is ours; the levels are the
/// vendors' documented `reasoning_effort` values on the OpenAI-compatible wire.
const EFFORT_LEVELS: &[(&str, &[&str])] = &[
    ("gpt-5", &["minimal", "low", "medium", "high"]),
    ("o1", &["low", "medium", "high"]),
    ("o3", &["low", "medium", "high"]),
    ("o4", &["low", "medium", "high"]),
    ("gpt-oss", &["low", "medium", "high"]),
    ("grok-3-mini", &["low", "high"]),
    ("gemini-2.5", &["low", "medium", "high"]),
    ("gemini-3", &["low", "high"]),
];

fn effort_levels(leaf: &str, reasoning: bool) -> Vec<&'static str> {
    if !reasoning {
        return Vec::new();
    }
    let lower = leaf.to_ascii_lowercase();
    EFFORT_LEVELS
        .iter()
        .find(|(prefix, _)| lower.starts_with(prefix))
        .map(|(_, levels)| levels.to_vec())
        .unwrap_or_default()
}

fn pricing_of(row: &ModelRow) -> Option<Pricing> {
    let [input, output, cached] = row.pricing?;
    Some(Pricing {
        prompt_per_mtok: input?,
        completion_per_mtok: output?,
        cached_per_mtok: cached,
    })
}

/// Resolves a model id (optionally with the base URL it is served from) to what the request
/// path needs. Exact id first, then the leaf; a provider whose base URL host matches wins.
pub fn resolve(model: &str, base_url: Option<&str>) -> ModelInfo {
    let cat = catalog();
    let leaf = model_leaf(model);
    let want_host = base_url.and_then(host_of);
    let candidates = cat
        .by_id
        .get(&model.to_ascii_lowercase())
        .or_else(|| cat.by_id.get(&leaf.to_ascii_lowercase()));
    let pick = candidates.and_then(|c| {
        let by_host = want_host.as_ref().and_then(|h| {
            c.iter().find(|(pi, _)| {
                cat.providers[*pi]
                    .api_base_url
                    .as_deref()
                    .and_then(host_of)
                    .is_some_and(|ph| &ph == h)
            })
        });
        // Otherwise the model's own vendor, then the first row (by provider id) that knows a
        // window and a price.
        by_host
            .or_else(|| {
                c.iter()
                    .find(|(pi, _)| FIRST_PARTY.contains(&cat.providers[*pi].id.as_str()))
            })
            .or_else(|| {
                c.iter().find(|(pi, mi)| {
                    let m = &cat.providers[*pi].models[*mi];
                    m.window.is_some() && m.pricing.is_some()
                })
            })
            .or_else(|| c.first())
            .map(|hit| {
                // Gateways disagree on the reasoning flag; a model that reasons anywhere reasons.
                let reasons = c
                    .iter()
                    .any(|(pi, mi)| cat.providers[*pi].models[*mi].reasoning);
                (hit, reasons)
            })
    });
    let live_info = live().read().ok().and_then(|m| {
        m.get(&model.to_ascii_lowercase())
            .or_else(|| m.get(&leaf.to_ascii_lowercase()))
            .cloned()
    });
    let mut info = match pick {
        Some(((pi, mi), reasons)) => {
            let p = &cat.providers[*pi];
            let m = &p.models[*mi];
            ModelInfo {
                id: model.to_string(),
                window: m.window.unwrap_or(FALLBACK_WINDOW),
                max_output: m.max_output,
                input: m.input.to_vec(),
                output: m.output.to_vec(),
                reasoning: reasons,
                reasoning_levels: effort_levels(leaf, reasons),
                pricing: pricing_of(m),
                known: true,
                provider: Some(p.id.clone()),
            }
        }
        None => ModelInfo {
            id: model.to_string(),
            window: FALLBACK_WINDOW,
            max_output: None,
            input: vec!["text".to_string()],
            output: vec!["text".to_string()],
            reasoning: false,
            reasoning_levels: Vec::new(),
            pricing: None,
            known: false,
            provider: None,
        },
    };
    if let Some(l) = live_info {
        info.known = true;
        if let Some(w) = l.window {
            info.window = w;
        }
        if l.max_output.is_some() {
            info.max_output = l.max_output;
        }
        if l.pricing.is_some() {
            info.pricing = l.pricing;
        }
    }
    info
}

/// Checks an explicit `reasoningEffort` against what the model accepts; the error names the
/// accepted levels (or says the model has no such knob).
pub fn check_reasoning_effort(info: &ModelInfo, effort: &str) -> Result<(), Invalid> {
    if info.reasoning_levels.is_empty() {
        return Err(Invalid::from(format!(
            "model '{}' has no reasoningEffort setting{}; remove reasoningEffort",
            info.id,
            if info.known {
                ""
            } else {
                " (it is not in the model catalog)"
            }
        )));
    }
    if info.reasoning_levels.contains(&effort) {
        Ok(())
    } else {
        Err(Invalid::from(format!(
            "reasoningEffort '{effort}' is not supported by model '{}'; use one of: {}",
            info.id,
            info.reasoning_levels.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modality_lists_are_shared_not_copied_per_model() {
        let c = catalog();
        let models: Vec<&ModelRow> = c.providers.iter().flat_map(|p| &p.models).collect();
        let mut distinct: Vec<*const String> = models.iter().map(|m| m.input.as_ptr()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(
            models.len() > 1000 && distinct.len() < 100,
            "{}",
            distinct.len()
        );
        // Equal lists are one list; a model's info still carries its own copy.
        let with_image = models
            .iter()
            .find(|m| m.input.iter().any(|i| i == "image"))
            .unwrap();
        let again = intern(with_image.input.to_vec());
        assert!(std::ptr::eq(again, with_image.input));
        assert_eq!(
            resolve(&with_image.id, None).input,
            with_image.input.to_vec()
        );
    }

    #[test]
    fn embedded_catalog_parses_and_is_large() {
        let c = catalog();
        assert!(c.providers.len() > 50, "{}", c.providers.len());
        assert!(c.providers.iter().map(|p| p.models.len()).sum::<usize>() > 1000);
        assert!(c.providers.iter().any(|p| p.id == "deepseek"));
    }

    #[test]
    fn leaf_strips_paths_and_modifiers() {
        assert_eq!(model_leaf("openai/gpt-4o:free"), "gpt-4o");
        assert_eq!(model_leaf("gpt-4o"), "gpt-4o");
        assert_eq!(model_leaf("a/b/c:batch"), "c");
    }

    #[test]
    fn resolve_known_unknown_and_live() {
        let d = resolve("deepseek-chat", Some("https://api.deepseek.com/v1"));
        assert!(d.known);
        assert_eq!(d.provider.as_deref(), Some("deepseek"));
        assert!(d.window > 60_000);
        let u = resolve("no-such-model-xyz", None);
        assert!(!u.known);
        assert_eq!(u.window, FALLBACK_WINDOW);
        install_live([(
            "no-such-model-live".to_string(),
            LiveInfo {
                window: Some(12_345),
                ..Default::default()
            },
        )]);
        let l = resolve("vendor/no-such-model-live:free", None);
        assert!(l.known);
        assert_eq!(l.window, 12_345);
    }

    #[test]
    fn reasoning_effort_is_strict() {
        let o = resolve("gpt-oss-120b", None);
        assert!(o.reasoning, "{o:?}");
        assert!(check_reasoning_effort(&o, "high").is_ok());
        let e = check_reasoning_effort(&o, "hgih").unwrap_err();
        assert!(e.contains("low, medium, high"), "{e}");
        let plain = resolve("gpt-4o", None);
        assert!(
            check_reasoning_effort(&plain, "low")
                .unwrap_err()
                .contains("no reasoningEffort")
        );
    }
}
