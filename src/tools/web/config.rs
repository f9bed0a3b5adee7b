//! The web tools' settings, resolved from the config's `web_*` keys (which the config layer
//! accepts as given) and the environment. A bad value is an error here, and the caller serves
//! without the web pair rather than refusing to boot: an optional feature must not brick chat.

use std::time::Duration;

use serde_json::Value;

use super::policy::{Domains, PrivateHosts};
use super::resolve::{Overrides, Resolver};
use std::sync::Arc;

/// A bound: its key, default and ceiling (the spec's table).
struct Bound {
    key: &'static str,
    default: u64,
    min: u64,
    max: u64,
}

const FETCH_TIMEOUT: Bound = Bound {
    key: "web_fetch_timeout_ms",
    default: 30_000,
    min: 1,
    max: 600_000,
};
const FETCH_MAX_BYTES: Bound = Bound {
    key: "web_fetch_max_bytes",
    default: 1_000_000,
    min: 1,
    max: 100_000_000,
};
const FETCH_MAX_REDIRECTS: Bound = Bound {
    key: "web_fetch_max_redirects",
    default: 5,
    min: 0,
    max: 20,
};
const SEARCH_TIMEOUT: Bound = Bound {
    key: "web_search_timeout_ms",
    default: 30_000,
    min: 1,
    max: 600_000,
};
const SEARCH_MAX_RESULTS: Bound = Bound {
    key: "web_search_max_results",
    default: 8,
    min: 1,
    max: 20,
};
const SESSION_SEARCH_CAP: Bound = Bound {
    key: "web_session_search_cap",
    default: 200,
    min: 0,
    max: 1_000_000,
};
const SESSION_FETCH_CAP: Bound = Bound {
    key: "web_session_fetch_cap",
    default: 0,
    min: 0,
    max: 1_000_000,
};

/// Which `web_search` backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    Tavily {
        key: String,
    },
    Ddg,
    /// The host runs the search (reverse `tool.invoke`).
    Host,
}

#[derive(Debug)]
pub struct WebConfig {
    pub fetch_timeout: Duration,
    pub fetch_max_bytes: u64,
    pub fetch_max_redirects: u32,
    pub search_timeout: Duration,
    pub search_max_results: usize,
    /// 0 = no cap.
    pub session_search_cap: u64,
    pub session_fetch_cap: u64,
    pub domains: Domains,
    /// `web_private_hosts` and `web_dns_overrides`, as the pinned resolver applies them.
    pub resolver: Arc<Resolver>,
    /// `None`: `web_search` is not registered.
    pub backend: Option<Backend>,
    pub search_base_url: Option<String>,
    /// `OUTRIGGER_EGRESS_CONFINED=1`: every request goes through this proxy.
    pub proxy: Option<String>,
}

/// What the resolution reads besides the config values.
pub struct Env {
    pub search_key: Option<String>,
    pub egress_confined: bool,
    pub proxy: Option<String>,
}

impl Env {
    pub fn from_process() -> Env {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Env {
            // Never the model's key: search carries its own credential.
            search_key: var("OUTRIGGER_WEB_SEARCH_API_KEY").or_else(|| var("TAVILY_API_KEY")),
            egress_confined: var("OUTRIGGER_EGRESS_CONFINED")
                .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on")),
            proxy: ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
                .iter()
                .find_map(|k| var(k)),
        }
    }
}

/// Separators of a host-name list given as one string.
const NAME_SEPS: &[char] = &[',', ':'];

/// A count as a number or a numeric string (environment values arrive as strings).
fn bound(get: &dyn Fn(&str) -> Value, b: &Bound) -> Result<u64, String> {
    let v = get(b.key);
    let n = match &v {
        Value::Null => return Ok(b.default),
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if (b.min..=b.max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{} must be an integer from {} to {}, got {v}",
            b.key, b.min, b.max
        )),
    }
}

/// A list as a JSON array, a JSON array in a string, or a separated string: `,` or `:` for
/// host names, `,` only where IPv6 addresses may appear.
fn list(get: &dyn Fn(&str) -> Value, key: &str, seps: &[char]) -> Result<Vec<String>, String> {
    let v = get(key);
    let items: Vec<Value> = match &v {
        Value::Null => return Ok(Vec::new()),
        Value::Array(a) => a.clone(),
        Value::String(s) if s.trim_start().starts_with('[') => {
            serde_json::from_str(s).map_err(|e| format!("{key}: {s} is not a JSON list ({e})"))?
        }
        Value::String(s) => s
            .split(seps)
            .map(|x| Value::String(x.to_string()))
            .collect(),
        other => return Err(format!("{key} must be a list of host names, got {other}")),
    };
    items
        .iter()
        .map(|x| match x.as_str().map(str::trim) {
            Some(s) => Ok(s.trim_end_matches('.').to_ascii_lowercase()),
            None => Err(format!("{key}: {x} is not a string")),
        })
        .filter(|r| r.as_ref().map_or(true, |s| !s.is_empty()))
        .collect()
}

fn opt_text(get: &dyn Fn(&str) -> Value, key: &str) -> Result<Option<String>, String> {
    match get(key) {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.trim().to_string())),
        other => Err(format!("{key} must be a string, got {other}")),
    }
}

impl WebConfig {
    /// Resolves the settings; `get` reads a merged config value (`Null` when unset).
    pub fn resolve(get: &dyn Fn(&str) -> Value, env: &Env) -> Result<WebConfig, String> {
        let backend = match opt_text(get, "web_search_provider")?.as_deref() {
            None | Some("tavily") => env.search_key.clone().map(|key| Backend::Tavily { key }),
            Some("ddg") => Some(Backend::Ddg),
            Some("host") => Some(Backend::Host),
            Some(other) => {
                return Err(format!(
                    "web_search_provider '{other}' is unknown: use tavily (with OUTRIGGER_WEB_SEARCH_API_KEY), ddg or host"
                ));
            }
        };
        let proxy = match (env.egress_confined, &env.proxy) {
            (true, Some(p)) => Some(p.clone()),
            (true, None) => {
                return Err("OUTRIGGER_EGRESS_CONFINED=1 is set but no HTTPS_PROXY (or ALL_PROXY) names the egress proxy: set it, or unset the marker".into());
            }
            (false, _) => None,
        };
        if let Some(u) = &opt_text(get, "web_search_base_url")?
            && !(u.starts_with("http://") || u.starts_with("https://"))
        {
            return Err(format!(
                "web_search_base_url must be an http(s) URL, got {u}"
            ));
        }
        let to_ms = |n: u64| Duration::from_millis(n);
        Ok(WebConfig {
            fetch_timeout: to_ms(bound(get, &FETCH_TIMEOUT)?),
            fetch_max_bytes: bound(get, &FETCH_MAX_BYTES)?,
            fetch_max_redirects: u32::try_from(bound(get, &FETCH_MAX_REDIRECTS)?).unwrap_or(20),
            search_timeout: to_ms(bound(get, &SEARCH_TIMEOUT)?),
            search_max_results: usize::try_from(bound(get, &SEARCH_MAX_RESULTS)?).unwrap_or(20),
            session_search_cap: bound(get, &SESSION_SEARCH_CAP)?,
            session_fetch_cap: bound(get, &SESSION_FETCH_CAP)?,
            domains: Domains {
                allowed: list(get, "web_allowed_domains", NAME_SEPS)?,
                blocked: list(get, "web_blocked_domains", NAME_SEPS)?,
            },
            resolver: Arc::new(Resolver {
                private: PrivateHosts::parse(&list(get, "web_private_hosts", &[','])?)?,
                overrides: Overrides::parse(&match get("web_dns_overrides") {
                    Value::String(s) => serde_json::from_str(&s)
                        .map_err(|e| format!("web_dns_overrides is not JSON: {e}"))?,
                    v => v,
                })?,
            }),
            backend,
            search_base_url: opt_text(get, "web_search_base_url")?,
            proxy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env() -> Env {
        Env {
            search_key: None,
            egress_confined: false,
            proxy: None,
        }
    }

    fn with(pairs: Value) -> impl Fn(&str) -> Value {
        move |k: &str| pairs.get(k).cloned().unwrap_or(Value::Null)
    }

    #[test]
    fn defaults_match_the_spec() {
        let c = WebConfig::resolve(&with(json!({})), &env()).unwrap();
        assert_eq!(c.fetch_timeout, Duration::from_secs(30));
        assert_eq!(c.fetch_max_bytes, 1_000_000);
        assert_eq!(c.fetch_max_redirects, 5);
        assert_eq!(c.search_max_results, 8);
        assert_eq!(c.session_search_cap, 200);
        assert_eq!(c.session_fetch_cap, 0);
        assert_eq!(c.backend, None);
    }

    #[test]
    fn bad_values_name_the_key_and_range() {
        let e = WebConfig::resolve(&with(json!({"web_fetch_max_redirects": "50"})), &env())
            .unwrap_err();
        assert!(
            e.contains("web_fetch_max_redirects must be an integer from 0 to 20"),
            "{e}"
        );
        let e =
            WebConfig::resolve(&with(json!({"web_search_provider": "bing"})), &env()).unwrap_err();
        assert!(e.contains("'bing' is unknown"), "{e}");
        let confined = Env {
            egress_confined: true,
            ..env()
        };
        let e = WebConfig::resolve(&with(json!({})), &confined).unwrap_err();
        assert!(e.contains("no HTTPS_PROXY"), "{e}");
    }

    #[test]
    fn lists_take_every_form() {
        let c = WebConfig::resolve(
            &with(json!({"web_allowed_domains": "Example.com, docs.rs",
                         "web_blocked_domains": "[\"bad.org\"]"})),
            &env(),
        )
        .unwrap();
        assert_eq!(c.domains.allowed, ["example.com", "docs.rs"]);
        assert_eq!(c.domains.blocked, ["bad.org"]);
        let key = Env {
            search_key: Some("k".into()),
            ..env()
        };
        let c = WebConfig::resolve(&with(json!({})), &key).unwrap();
        assert_eq!(c.backend, Some(Backend::Tavily { key: "k".into() }));
    }
}
