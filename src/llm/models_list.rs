//! `models.list`: the gateway's live model listing (`GET {baseUrl}/models`), in either shape
//! seen in the wild, joined to the embedded catalog, cached per base URL, and installed into
//! model resolution so window sizing sees what the gateway advertises.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::catalog::{self, LiveInfo, Pricing};
use crate::clock;

/// How long a listing is served from the cache.
pub const CACHE_TTL: Duration = Duration::from_secs(60);
/// Longest a listing request may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(15);
/// Bytes of listing read at most (OpenRouter's is ~1 MB).
pub const MAX_LISTING_BYTES: usize = 16 << 20;

/// One listed model as the gateway described it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub id: String,
    pub name: Option<String>,
    pub live: LiveInfo,
}

fn first_u64(v: &Value, paths: &[&[&str]]) -> Option<u64> {
    paths.iter().find_map(|path| {
        let mut cur = v;
        for k in *path {
            cur = cur.get(k)?;
        }
        cur.as_u64()
            .or_else(|| cur.as_f64().filter(|f| *f > 0.0).map(|f| f as u64))
            .or_else(|| cur.as_str().and_then(|s| s.parse().ok()))
            .filter(|n| *n > 0)
    })
}

fn number(v: Option<&Value>) -> Option<f64> {
    let v = v?;
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn pricing(row: &Value) -> Option<Pricing> {
    // OpenAI/OpenRouter style: USD per token, often as strings.
    if let Some(p) = row.get("pricing") {
        let prompt = number(p.get("prompt"))?;
        let completion = number(p.get("completion"))?;
        return Some(Pricing {
            prompt_per_mtok: prompt * 1e6,
            completion_per_mtok: completion * 1e6,
            cached_per_mtok: number(p.get("input_cache_read")).map(|c| c * 1e6),
        });
    }
    // models.dev style: already per million tokens.
    let cost = row.get("cost")?;
    Some(Pricing {
        prompt_per_mtok: number(cost.get("input"))?,
        completion_per_mtok: number(cost.get("output"))?,
        cached_per_mtok: number(cost.get("cache_read")),
    })
}

fn listed(id: String, row: &Value) -> Listed {
    Listed {
        // Anthropic's `display_name`, Gemini's `displayName` (its `name` is the `models/…`
        // id), else the OpenAI-style `name`.
        name: ["display_name", "displayName", "name"]
            .iter()
            .find_map(|k| row.get(*k).and_then(Value::as_str))
            .map(str::to_string),
        live: LiveInfo {
            window: first_u64(
                row,
                &[
                    &["context_length"],
                    &["context_window"],
                    &["contextWindow"],
                    &["max_input_tokens"],
                    &["limit", "context"],
                    &["top_provider", "context_length"],
                    &["inputTokenLimit"],
                ],
            ),
            max_output: first_u64(
                row,
                &[
                    &["top_provider", "max_completion_tokens"],
                    &["max_output_tokens"],
                    &["maxOutputTokens"],
                    &["max_completion_tokens"],
                    &["limit", "output"],
                    &["outputTokenLimit"],
                ],
            ),
            pricing: pricing(row),
        },
        id,
    }
}

/// Parses `{"data": [...]}` (OpenAI) or `{"models": {id: row} | [rows]}` (models.dev style).
/// Arrays keep the gateway's order (never sorted); a `models` map comes out in key order,
/// since a JSON object carries none.
pub fn parse_listing(body: &Value) -> Result<Vec<Listed>, String> {
    let rows_of = |arr: &Vec<Value>| -> Vec<Listed> {
        arr.iter()
            .filter_map(|r| {
                let id = r
                    .get("id")
                    .or_else(|| r.get("name"))
                    .and_then(Value::as_str)?
                    .to_string();
                Some(listed(id, r))
            })
            .collect()
    };
    if let Some(arr) = body.get("data").and_then(Value::as_array) {
        return Ok(rows_of(arr));
    }
    match body.get("models") {
        Some(Value::Array(arr)) => Ok(rows_of(arr)),
        Some(Value::Object(map)) => Ok(map
            .iter()
            .map(|(k, r)| {
                let id = r.get("id").and_then(Value::as_str).unwrap_or(k).to_string();
                listed(id, r)
            })
            .collect()),
        _ => Err("the listing has neither a `data` array nor a `models` map or array".into()),
    }
}

/// A listed model joined to the catalog: a row of `models.list`.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinedModel {
    pub id: String,
    /// The gateway's name, else the id.
    pub name: String,
    /// The gateway's window, else the catalog's, else the fallback window the loop budgets
    /// with.
    pub window: u64,
    pub input: Vec<String>,
    pub output: Vec<String>,
    pub reasoning_levels: Vec<&'static str>,
    /// The gateway's pricing, else the catalog's.
    pub pricing: Option<Pricing>,
    /// The catalog provider the id was joined to; `None` when the catalog does not know it.
    pub joined_from: Option<String>,
}

/// Joins a listed model to the catalog.
pub fn joined_row(l: &Listed) -> JoinedModel {
    let info = catalog::resolve(&l.id, None);
    let catalog_hit = info.provider;
    let window = l.live.window.unwrap_or(if catalog_hit.is_some() {
        info.window
    } else {
        catalog::FALLBACK_WINDOW
    });
    JoinedModel {
        id: l.id.clone(),
        name: l.name.clone().unwrap_or_else(|| l.id.clone()),
        window,
        input: info.input,
        output: info.output,
        reasoning_levels: info.reasoning_levels,
        pricing: l.live.pricing.or(info.pricing),
        joined_from: catalog_hit,
    }
}

/// Where a listing came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListingStatus {
    /// Fetched now, or from the cache within `CACHE_TTL`.
    Live,
    /// The fetch failed; the last cached listing.
    Stale,
    /// The fetch failed and nothing was cached.
    Offline,
}

/// The `models.list` answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    pub models: Vec<JoinedModel>,
    pub status: ListingStatus,
    /// When the listing was fetched (not for `Offline`).
    pub fetched_at: Option<String>,
    /// Why the fetch failed (`Stale`, `Offline`).
    pub error: Option<String>,
}

struct Cached {
    at: Instant,
    fetched_at: String,
    rows: Vec<JoinedModel>,
}

fn cache() -> &'static Mutex<HashMap<String, Cached>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Cached>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Which listing endpoint and auth headers a provider uses.
fn request(
    client: &reqwest::Client,
    base_url: &str,
    api_key: Option<&str>,
    provider: Option<&str>,
) -> reqwest::RequestBuilder {
    let base = base_url.trim_end_matches('/');
    match provider.and_then(super::build::family) {
        Some("anthropic") => {
            let base = base.trim_end_matches("/v1");
            let mut r = client
                .get(format!("{base}/v1/models"))
                .header("anthropic-version", "2023-06-01");
            if let Some(k) = api_key {
                r = r.header("x-api-key", k);
            }
            r
        }
        Some("google") => {
            let mut r = client.get(format!("{base}/models"));
            if let Some(k) = api_key {
                r = r.header("x-goog-api-key", k);
            }
            r
        }
        _ => {
            let mut r = client.get(format!("{base}/models"));
            if let Some(k) = api_key {
                r = r.bearer_auth(k);
            }
            r
        }
    }
}

async fn fetch(
    client: &reqwest::Client,
    base_url: &str,
    api_key: Option<&str>,
    provider: Option<&str>,
) -> Result<Vec<Listed>, String> {
    let resp = request(client, base_url, api_key, provider)
        .timeout(FETCH_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("GET {base_url}/models failed: {e}"))?;
    let status = resp.status();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| format!("reading the listing from {base_url} failed: {e}"))?;
    if bytes.len() > MAX_LISTING_BYTES {
        return Err(format!(
            "the listing from {base_url} is larger than {MAX_LISTING_BYTES} bytes"
        ));
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes);
        let snippet: String = text.chars().take(300).collect();
        return Err(format!(
            "GET {base_url}/models answered HTTP {status}: {snippet}"
        ));
    }
    let body: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the listing from {base_url} is not JSON: {e}"))?;
    parse_listing(&body)
}

/// The `models.list` answer. An unreachable gateway is an answer with `error`, not an error.
pub async fn list(
    client: &reqwest::Client,
    base_url: &str,
    api_key: Option<&str>,
    provider: Option<&str>,
    refresh: bool,
) -> Listing {
    let key = base_url.trim_end_matches('/').to_string();
    if !refresh {
        let c = cache().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(hit) = c.get(&key).filter(|h| h.at.elapsed() < CACHE_TTL) {
            return Listing {
                models: hit.rows.clone(),
                status: ListingStatus::Live,
                fetched_at: Some(hit.fetched_at.clone()),
                error: None,
            };
        }
    }
    match fetch(client, base_url, api_key, provider).await {
        Ok(listing) => {
            catalog::install_live(listing.iter().map(|l| (l.id.clone(), l.live.clone())));
            let rows: Vec<JoinedModel> = listing.iter().map(joined_row).collect();
            let fetched_at = clock::now_iso8601();
            cache().lock().unwrap_or_else(|e| e.into_inner()).insert(
                key,
                Cached {
                    at: Instant::now(),
                    fetched_at: fetched_at.clone(),
                    rows: rows.clone(),
                },
            );
            Listing {
                models: rows,
                status: ListingStatus::Live,
                fetched_at: Some(fetched_at),
                error: None,
            }
        }
        Err(error) => {
            let c = cache().lock().unwrap_or_else(|e| e.into_inner());
            match c.get(&key) {
                Some(old) => Listing {
                    models: old.rows.clone(),
                    status: ListingStatus::Stale,
                    fetched_at: Some(old.fetched_at.clone()),
                    error: Some(error),
                },
                None => Listing {
                    models: Vec::new(),
                    status: ListingStatus::Offline,
                    fetched_at: None,
                    error: Some(error),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_shapes_and_field_variants() {
        let openai = json!({"data": [
            {"id": "gpt-4o", "context_length": 128000, "pricing": {"prompt": "0.0000025", "completion": "0.00001"}},
            {"id": "vendor/custom:free", "top_provider": {"context_length": 32000, "max_completion_tokens": 4096}},
            {"id": "plain"}
        ]});
        let l = parse_listing(&openai).unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!(l[0].live.window, Some(128_000));
        let p = l[0].live.pricing.unwrap();
        assert!(
            (p.prompt_per_mtok - 2.5).abs() < 1e-9 && (p.completion_per_mtok - 10.0).abs() < 1e-9
        );
        assert_eq!(l[1].live.window, Some(32_000));
        assert_eq!(l[1].live.max_output, Some(4096));
        assert_eq!(l[2].live, LiveInfo::default());

        let map = json!({"models": {"m1": {"limit": {"context": 64000, "output": 8000}, "cost": {"input": 1.0, "output": 2.0}}}});
        let l = parse_listing(&map).unwrap();
        assert_eq!(l[0].id, "m1");
        assert_eq!(l[0].live.window, Some(64_000));
        assert_eq!(l[0].live.pricing.unwrap().completion_per_mtok, 2.0);
        let arr = json!({"models": [{"id": "m2", "contextWindow": 1000, "maxOutputTokens": 10}]});
        assert_eq!(parse_listing(&arr).unwrap()[0].live.max_output, Some(10));
        assert!(parse_listing(&json!({"x": 1})).is_err());
    }

    #[test]
    fn listing_order_is_kept() {
        let body = json!({"data": [{"id": "zeta"}, {"id": "alpha"}, {"id": "mu"}, {"id": "beta"}]});
        let ids: Vec<String> = parse_listing(&body)
            .unwrap()
            .into_iter()
            .map(|l| l.id)
            .collect();
        assert_eq!(ids, ["zeta", "alpha", "mu", "beta"]);
    }

    #[test]
    fn join_strips_modifiers_and_marks_unknown() {
        let known = joined_row(&Listed {
            id: "openai/gpt-4o:free".into(),
            name: None,
            live: LiveInfo::default(),
        });
        assert!(known.joined_from.is_some());
        assert!(known.window > 0);
        let unknown = joined_row(&Listed {
            id: "totally-unknown-model-zz".into(),
            name: Some("Z".into()),
            live: LiveInfo::default(),
        });
        assert!(unknown.joined_from.is_none());
        assert_eq!(unknown.window, catalog::FALLBACK_WINDOW);
        assert_eq!(unknown.name, "Z");
    }
}
