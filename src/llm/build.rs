//! Building the provider a request names (§1.8): the provider names and aliases, each
//! vendor's default endpoint and key variables, keys checked before any request, and the
//! catalog's wire kinds choosing a provider when the host gives only a base URL.

use std::sync::Arc;

use serde_json::Value;

use super::catalog;
use super::native::{NativeConfig, NativeProvider, api_key};
use super::types::{LlmError, SamplingDefaults};
use super::{CompatOverrides, LlmSettings, Provider, ProviderParams, compat, openai, scripted};
use crate::strict::Invalid;

/// The wire names of the OpenAI-compatible provider.
pub const OPENAI_NAMES: &[&str] = &["openai_compat", "openai", "openai-compatible", "ollama"];
pub const ANTHROPIC_NAMES: &[&str] = &["anthropic", "claude"];
pub const RESPONSES_NAMES: &[&str] = &["responses", "openai-responses", "openai_responses", "xai"];
pub const GOOGLE_NAMES: &[&str] = &["google", "gemini", "google-genai", "google_genai"];

/// `openai` without a `baseUrl` (or `OUTRIGGER_BASE_URL`) goes here.
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_OLLAMA_BASE_URL: &str = "http://localhost:11434";
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_XAI_BASE_URL: &str = "https://api.x.ai/v1";
pub const DEFAULT_GOOGLE_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// The provider family a name or alias belongs to: `openai_compat`, `anthropic`,
/// `responses`, `google` or `scripted`.
pub fn family(name: &str) -> Option<&'static str> {
    if OPENAI_NAMES.contains(&name) {
        Some("openai_compat")
    } else if ANTHROPIC_NAMES.contains(&name) {
        Some("anthropic")
    } else if RESPONSES_NAMES.contains(&name) {
        Some("responses")
    } else if GOOGLE_NAMES.contains(&name) {
        Some("google")
    } else if name == "scripted" {
        Some("scripted")
    } else {
        None
    }
}

/// Every provider name a request may give, for error messages.
fn all_names() -> String {
    let mut v: Vec<&str> = Vec::new();
    v.extend(OPENAI_NAMES);
    v.extend(ANTHROPIC_NAMES);
    v.extend(RESPONSES_NAMES);
    v.extend(GOOGLE_NAMES);
    v.push("scripted");
    v.join(", ")
}

/// The provider a base URL's catalog row speaks (its wire kind), when the host named none:
/// `anthropic`, `google`, `openai` or `openai_compat`. `None` for an unknown host or a wire
/// we do not speak (Azure, Bedrock, Vertex).
pub fn provider_for(base_url: &str) -> Option<&'static str> {
    match row_for(base_url)?.wire_kind.as_str() {
        "anthropic" => Some("anthropic"),
        "google" => Some("google"),
        "openai" => Some("openai"),
        "openai_compat" => Some("openai_compat"),
        _ => None,
    }
}

/// The catalog row whose endpoint is on `base_url`'s host.
fn row_for(base_url: &str) -> Option<&'static catalog::ProviderRow> {
    let host = catalog::host_of(base_url)?;
    catalog::catalog().providers.iter().find(|p| {
        p.api_base_url
            .as_deref()
            .and_then(catalog::host_of)
            .is_some_and(|h| h == host)
    })
}

/// The key variables the catalog lists for the row serving `base_url`.
fn catalog_vars(base_url: &str) -> Vec<String> {
    row_for(base_url)
        .map(|p| {
            p.env_vars
                .iter()
                .filter(|v| v.ends_with("_KEY"))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// `vendor` then the catalog's variables for `base`, without repeats.
fn key_vars(vendor: &[&str], base: &str) -> Vec<String> {
    let mut v: Vec<String> = vendor.iter().map(|s| s.to_string()).collect();
    for c in catalog_vars(base) {
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

/// The host's `baseUrl`, trimmed, checked for a scheme, without the trailing slash.
fn given_base(p: &ProviderParams) -> Result<Option<String>, LlmError> {
    let Some(b) = p
        .base_url
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    else {
        return Ok(None);
    };
    let b = b.trim_end_matches('/').to_string();
    if !(b.starts_with("http://") || b.starts_with("https://")) {
        return Err(LlmError::Config {
            message: format!(
                "baseUrl '{b}' must start with http:// or https:// (e.g. https://api.openai.com/v1)"
            ),
        });
    }
    Ok(Some(b))
}

/// Builds the provider named by `p.provider` (or, when none is named, the one the catalog's
/// wire kind gives `baseUrl`). `defaults` are preset values for unset request fields. Errors
/// are `LlmError::Config` naming the bad value and the fix; a missing key is one, before any
/// request.
pub fn build_provider(
    p: &ProviderParams,
    settings: LlmSettings,
    defaults: Option<SamplingDefaults>,
) -> Result<Arc<dyn Provider>, LlmError> {
    let config = |message: Invalid| LlmError::Config { message: message.0 };
    let overrides = match &p.compat {
        None | Some(Value::Null) => None,
        Some(v) => Some(CompatOverrides::from_value(v).map_err(config)?),
    };
    let inferred;
    let name = match p.provider.trim() {
        "" => {
            let base = p.base_url.as_deref().unwrap_or("");
            inferred = provider_for(base).ok_or_else(|| {
                config(Invalid(format!(
                    "provider is required: name one of {} (the catalog knows no provider at baseUrl '{base}')",
                    all_names()
                )))
            })?;
            inferred
        }
        n => n,
    };
    if name == "scripted" {
        let s = match (&p.script, &p.script_path) {
            (Some(v), None) => scripted::ScriptedProvider::from_value(v),
            (None, Some(path)) => scripted::ScriptedProvider::from_jsonl(path),
            (Some(_), Some(_)) => Err("give either script or scriptPath, not both".into()),
            (None, None) => Err(
                "provider \"scripted\" needs script (a list of turns) or scriptPath (a JSONL file)"
                    .into(),
            ),
        }
        .map_err(config)?;
        return Ok(Arc::new(s));
    }
    let known = OPENAI_NAMES.contains(&name)
        || ANTHROPIC_NAMES.contains(&name)
        || RESPONSES_NAMES.contains(&name)
        || GOOGLE_NAMES.contains(&name);
    if !known {
        return Err(config(Invalid(format!(
            "unknown provider '{name}'; use one of {}",
            all_names()
        ))));
    }
    if p.model.trim().is_empty() {
        return Err(config("model is required (e.g. \"gpt-4o-mini\")".into()));
    }
    let given = given_base(p)?;
    let native = |base: String, vars: &[&str]| -> Result<NativeConfig, LlmError> {
        let vars = key_vars(vars, &base);
        let vars: Vec<&str> = vars.iter().map(String::as_str).collect();
        Ok(NativeConfig {
            api_key: api_key(p.api_key.as_deref(), &vars, name)?,
            base_url: base,
            defaults: defaults.clone(),
        })
    };
    if ANTHROPIC_NAMES.contains(&name) {
        // The catalog (and some hosts) write the endpoint with `/v1`; the wire adds it.
        let base = given.unwrap_or_else(|| DEFAULT_ANTHROPIC_BASE_URL.into());
        let base = base.strip_suffix("/v1").unwrap_or(&base).to_string();
        let cfg = native(base, &["ANTHROPIC_API_KEY"])?;
        return Ok(Arc::new(NativeProvider::new(
            super::anthropic::AnthropicWire::new(cfg),
            settings,
        )));
    }
    if RESPONSES_NAMES.contains(&name) {
        let (default, vars): (&str, &[&str]) = if name == "xai" {
            (DEFAULT_XAI_BASE_URL, &["XAI_API_KEY"])
        } else {
            (DEFAULT_OPENAI_BASE_URL, &["OPENAI_API_KEY"])
        };
        let cfg = native(given.unwrap_or_else(|| default.into()), vars)?;
        return Ok(Arc::new(NativeProvider::new(
            super::responses::ResponsesWire::new(cfg),
            settings,
        )));
    }
    if GOOGLE_NAMES.contains(&name) {
        let base = given.unwrap_or_else(|| DEFAULT_GOOGLE_BASE_URL.into());
        let cfg = native(base, super::gemini::KEY_VARS)?;
        return Ok(Arc::new(NativeProvider::new(
            super::gemini::GeminiWire::new(cfg),
            settings,
        )));
    }
    openai_compat(
        p,
        name,
        given.or_else(|| env("OUTRIGGER_BASE_URL")),
        overrides,
        settings,
        defaults,
    )
}

/// The OpenAI-compatible provider. A compat server needs its `baseUrl`; `openai` defaults to
/// OpenAI's endpoint (and then needs a key), `ollama` to the local one (and needs none).
fn openai_compat(
    p: &ProviderParams,
    name: &str,
    given: Option<String>,
    overrides: Option<CompatOverrides>,
    settings: LlmSettings,
    defaults: Option<SamplingDefaults>,
) -> Result<Arc<dyn Provider>, LlmError> {
    let (mut base, defaulted) = match (given, name) {
        (Some(b), _) => (b.trim_end_matches('/').to_string(), false),
        (None, "ollama") => (DEFAULT_OLLAMA_BASE_URL.to_string(), true),
        (None, "openai") => (DEFAULT_OPENAI_BASE_URL.to_string(), true),
        (None, _) => {
            return Err(LlmError::Config {
                message: format!(
                    "provider \"{name}\" needs baseUrl: the server's OpenAI-compatible endpoint (e.g. http://localhost:8000/v1); set it in the request or OUTRIGGER_BASE_URL, or use provider \"openai\" for OpenAI itself"
                ),
            });
        }
    };
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(LlmError::Config {
            message: format!(
                "baseUrl '{base}' must start with http:// or https:// (e.g. https://api.openai.com/v1)"
            ),
        });
    }
    if name == "ollama" && !base.ends_with("/v1") {
        base.push_str("/v1");
    }
    let vars = if defaulted && name == "openai" {
        key_vars(&["OPENAI_API_KEY"], &base)
    } else {
        key_vars(&[], &base)
    };
    let vars: Vec<&str> = vars.iter().map(String::as_str).collect();
    let api_key = match api_key(p.api_key.as_deref(), &vars, name) {
        Ok(k) => Some(k),
        // OpenAI's own endpoint always wants a key; a local or private server may not.
        Err(e) if defaulted && name == "openai" => return Err(e),
        Err(_) => None,
    };
    let compat = compat::resolve(&base, overrides);
    Ok(Arc::new(openai::OpenAiProvider::new(
        openai::OpenAiConfig {
            base_url: base,
            api_key,
            compat,
            defaults,
            settings,
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: serde_json::Value) -> ProviderParams {
        serde_json::from_value(v).unwrap()
    }

    fn build(v: serde_json::Value) -> Result<Arc<dyn Provider>, LlmError> {
        build_provider(&params(v), LlmSettings::default(), None)
    }

    #[test]
    fn aliases_name_their_family() {
        for (names, family_name, provider) in [
            (ANTHROPIC_NAMES, "anthropic", "anthropic"),
            (RESPONSES_NAMES, "responses", "responses"),
            (GOOGLE_NAMES, "google", "google"),
        ] {
            for n in names {
                assert_eq!(family(n), Some(family_name));
                let p = build(json!({"provider": n, "model": "m", "apiKey": "k"})).unwrap();
                assert_eq!(p.name(), provider, "{n}");
            }
        }
        assert_eq!(family("ollama"), Some("openai_compat"));
        assert_eq!(family("scripted"), Some("scripted"));
        assert_eq!(family("bogus"), None);
        let e = build(json!({"provider": "bogus", "model": "m"}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("anthropic, claude"), "{e}");
    }

    #[test]
    fn a_missing_key_names_every_variable_tried() {
        // Nobody sets these in the test process.
        let e = build(json!({"provider": "xai", "model": "grok-4"}))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "no API key for provider \"xai\": set one of apiKey, OUTRIGGER_API_KEY, XAI_API_KEY (tried in that order)"
        );
        let e = build(json!({"provider": "openai_compat", "model": "m"}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("needs baseUrl"), "{e}");
        // A local compatible server needs no key.
        assert!(build(json!({"provider": "openai_compat", "model": "m", "baseUrl": "http://127.0.0.1:9/v1"})).is_ok());
        assert!(build(json!({"provider": "ollama", "model": "m"})).is_ok());
    }

    #[test]
    fn the_catalog_picks_a_provider_from_the_base_url() {
        assert_eq!(
            provider_for("https://api.anthropic.com/v1"),
            Some("anthropic")
        );
        assert_eq!(
            provider_for("https://generativelanguage.googleapis.com/v1beta"),
            Some("google")
        );
        assert_eq!(provider_for("https://api.openai.com/v1"), Some("openai"));
        assert_eq!(
            provider_for("https://api.deepseek.com"),
            Some("openai_compat")
        );
        // Local servers (LM Studio and the like) are catalog rows too: compatible.
        assert_eq!(
            provider_for("http://127.0.0.1:8080/v1"),
            Some("openai_compat")
        );
        assert_eq!(provider_for("https://llm.internal.example/v1"), None);
        let p = build(json!({"model": "claude-sonnet-4-5", "baseUrl": "https://api.anthropic.com/v1", "apiKey": "k"}))
            .unwrap();
        assert_eq!(p.name(), "anthropic");
        let e = build(json!({"model": "m", "baseUrl": "https://llm.internal.example/v1"}))
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("provider is required"), "{e}");
    }

    #[test]
    fn catalog_key_variables_follow_the_vendors_own() {
        assert_eq!(
            key_vars(
                &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
                DEFAULT_GOOGLE_BASE_URL
            ),
            vec![
                "GEMINI_API_KEY",
                "GOOGLE_API_KEY",
                "GOOGLE_GENERATIVE_AI_API_KEY"
            ]
        );
        assert_eq!(
            key_vars(&[], "https://openrouter.ai/api/v1"),
            vec!["OPENROUTER_API_KEY"]
        );
    }
}
