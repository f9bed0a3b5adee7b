//! Vendor-documented sampling optima for open-weight families, as data: a (host, model
//! prefix) table that fills request fields the caller left unset. Explicit request fields
//! always win, and compat flags still gate what may be sent at all.

use crate::strict::Invalid;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// A preset's fields; unset ones are left to the request. Read from a chat's
/// `presets.override`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Preset {
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    #[serde(default)]
    pub extra_body: Option<Map<String, Value>>,
}

impl Preset {
    fn keys_set(&self) -> usize {
        [
            self.temperature.is_some(),
            self.top_p.is_some(),
            self.max_tokens.is_some(),
            self.reasoning_effort.is_some(),
            self.extra_body.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count()
    }
}

struct Row {
    /// `*` matches every host.
    host: &'static str,
    model_prefix: &'static str,
    temperature: Option<f64>,
    top_p: Option<f64>,
    reasoning_effort: Option<&'static str>,
    /// `(key, integer)` pairs for the request body.
    extra: &'static [(&'static str, i64)],
}

const fn row(host: &'static str, model_prefix: &'static str) -> Row {
    Row {
        host,
        model_prefix,
        temperature: None,
        top_p: None,
        reasoning_effort: None,
        extra: &[],
    }
}

const fn sampled(host: &'static str, prefix: &'static str, t: f64, p: f64) -> Row {
    Row {
        temperature: Some(t),
        top_p: Some(p),
        ..row(host, prefix)
    }
}

/// The 14 rows, in order. Reasoner models carry empty rows on purpose: they match (so a
/// broader `deepseek` row never applies its temperature to them) and set nothing. Moonshot is
/// absent: its fixed-temperature models reject sampling fields.
const ROWS: &[Row] = &[
    row("api.deepseek.com", "deepseek-reasoner"),
    row("*", "deepseek-reasoner"),
    row("*", "deepseek-r1"),
    Row {
        temperature: Some(0.0),
        ..row("api.deepseek.com", "deepseek")
    },
    Row {
        temperature: Some(0.0),
        ..row("*", "deepseek")
    },
    Row {
        extra: &[("top_k", 20)],
        ..sampled("*", "qwen3", 0.6, 0.95)
    },
    sampled("api.z.ai", "glm", 1.0, 0.95),
    sampled("bigmodel.cn", "glm", 1.0, 0.95),
    sampled("*", "glm-", 1.0, 0.95),
    sampled("*", "llama3", 0.6, 0.9),
    sampled("*", "llama-3", 0.6, 0.9),
    sampled("*", "llama-4", 0.6, 0.9),
    Row {
        reasoning_effort: Some("medium"),
        ..sampled("*", "gpt-oss", 1.0, 1.0)
    },
    Row {
        extra: &[("top_k", 40)],
        ..sampled("*", "minimax", 1.0, 0.95)
    },
];

impl Row {
    fn preset(&self) -> Preset {
        Preset {
            temperature: self.temperature,
            top_p: self.top_p,
            max_tokens: None,
            reasoning_effort: self.reasoning_effort.map(str::to_string),
            extra_body: (!self.extra.is_empty()).then(|| {
                self.extra
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect()
            }),
        }
    }

    fn matches(&self, base_url: &str, leaf: &str) -> bool {
        (self.host == "*" || base_url.contains(self.host)) && leaf.starts_with(self.model_prefix)
    }

    /// The most specific row wins: the longer model prefix, then the longer host, then more
    /// keys set. (The reference scores keys first, which lets `deepseek`'s temperature row
    /// beat the empty `deepseek-reasoner` rows that exist to exclude the reasoner; see
    /// docs/decisions.md.)
    fn score(&self) -> (usize, usize, usize) {
        let host_len = if self.host == "*" { 0 } else { self.host.len() };
        (self.model_prefix.len(), host_len, self.preset().keys_set())
    }
}

/// The preset a `(baseUrl, model)` pair auto-matches, or `None`.
pub fn resolve(base_url: &str, model: &str) -> Option<Preset> {
    let url = base_url.to_ascii_lowercase();
    let model = model.to_ascii_lowercase();
    let leaf = model.rsplit('/').next().unwrap_or(&model);
    let mut best: Option<&Row> = None;
    for r in ROWS.iter().filter(|r| r.matches(&url, leaf)) {
        // Strictly greater: on a tie the earlier row wins.
        if best.is_none_or(|b| r.score() > b.score()) {
            best = Some(r);
        }
    }
    best.map(Row::preset)
}

/// Whether the preset layer is on for this process (`OUTRIGGER_PROVIDER_PRESETS=0` turns it off).
pub fn enabled_by_env() -> bool {
    std::env::var("OUTRIGGER_PROVIDER_PRESETS").map_or(true, |v| v.trim() != "0")
}

/// The `presets` chat param: omitted or `{enabled: true}` → auto, `{enabled: false}` → off,
/// `{override: {...}}` → pinned.
#[derive(Debug, Clone, PartialEq)]
pub enum PresetMode {
    Auto,
    Off,
    Override(Preset),
}

impl PresetMode {
    pub fn parse(v: Option<&Value>) -> Result<PresetMode, Invalid> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(PresetMode::Auto);
        };
        let Some(obj) = v.as_object() else {
            return Err("presets must be an object: {enabled: bool} or {override: {...}}".into());
        };
        if let Some(k) = obj.keys().find(|k| *k != "enabled" && *k != "override") {
            return Err(Invalid::from(format!(
                "unknown presets key '{k}'; use enabled or override"
            )));
        }
        if let Some(o) = obj.get("override") {
            return serde_json::from_value::<Preset>(o.clone())
                .map(PresetMode::Override)
                .map_err(|e| {
                    format!(
                        "presets.override: {e}; keys are temperature, topP, maxTokens, reasoningEffort, extraBody"
                    )
                }).map_err(Invalid::from);
        }
        match obj.get("enabled") {
            None | Some(Value::Bool(true)) => Ok(PresetMode::Auto),
            Some(Value::Bool(false)) => Ok(PresetMode::Off),
            Some(other) => Err(Invalid::from(format!(
                "presets.enabled must be a boolean, got {other}"
            ))),
        }
    }

    /// The preset that applies to a request under this mode.
    pub fn preset_for(&self, base_url: &str, model: &str) -> Option<Preset> {
        match self {
            PresetMode::Off => None,
            PresetMode::Override(p) => Some(p.clone()),
            PresetMode::Auto if enabled_by_env() => resolve(base_url, model),
            PresetMode::Auto => None,
        }
    }
}

/// One row of the table: where it applies and what it sets.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetEntry {
    /// A base URL substring; `*` matches every host.
    pub host: &'static str,
    pub model_prefix: &'static str,
    pub preset: Preset,
}

/// Every row, in order (`presets.describe`).
pub fn entries() -> Vec<PresetEntry> {
    ROWS.iter()
        .map(|r| PresetEntry {
            host: r.host,
            model_prefix: r.model_prefix,
            preset: r.preset(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fourteen_rows_in_order() {
        let rows = entries();
        assert_eq!(rows.len(), 14);
        assert_eq!(rows[0].host, "api.deepseek.com");
        assert_eq!(rows[12].preset.reasoning_effort.as_deref(), Some("medium"));
        let extra = rows[13].preset.extra_body.as_ref().unwrap();
        assert_eq!(extra["top_k"], 40);
    }

    #[test]
    fn resolution_rows() {
        let r = |u: &str, m: &str| resolve(u, m);
        assert_eq!(
            r("https://api.deepseek.com/v1", "deepseek-chat"),
            Some(Preset {
                temperature: Some(0.0),
                ..Default::default()
            })
        );
        // The reasoner matches its own empty row: no sampling fields are filled in.
        assert_eq!(
            r("https://api.deepseek.com", "deepseek-reasoner"),
            Some(Preset::default())
        );
        assert_eq!(
            r("https://openrouter.ai/api/v1", "deepseek/deepseek-r1"),
            Some(Preset::default())
        );
        let q = r("http://localhost:11434/v1", "Qwen/Qwen3-32B").unwrap();
        assert_eq!((q.temperature, q.top_p), (Some(0.6), Some(0.95)));
        assert_eq!(q.extra_body.unwrap()["top_k"], 20);
        let g = r("https://openrouter.ai/api/v1", "openai/gpt-oss-120b").unwrap();
        assert_eq!(g.reasoning_effort.as_deref(), Some("medium"));
        assert_eq!(r("https://api.moonshot.ai/v1", "kimi-k2"), None);
        assert_eq!(r("https://api.openai.com/v1", "gpt-4o"), None);
        let z = r("https://api.z.ai/api/paas/v4", "glm-4.6").unwrap();
        assert_eq!((z.temperature, z.top_p), (Some(1.0), Some(0.95)));
    }

    #[test]
    fn param_states() {
        assert_eq!(PresetMode::parse(None), Ok(PresetMode::Auto));
        assert_eq!(
            PresetMode::parse(Some(&json!({"enabled": true}))),
            Ok(PresetMode::Auto)
        );
        assert_eq!(
            PresetMode::parse(Some(&json!({"enabled": false}))),
            Ok(PresetMode::Off)
        );
        let o = PresetMode::parse(Some(
            &json!({"override": {"temperature": 0.2, "topP": 0.5}}),
        ))
        .unwrap();
        assert_eq!(
            o.preset_for("x", "y"),
            Some(Preset {
                temperature: Some(0.2),
                top_p: Some(0.5),
                ..Default::default()
            })
        );
        let e = PresetMode::parse(Some(&json!({"override": {"temp": 1}}))).unwrap_err();
        assert!(e.contains("temp"), "{e}");
        assert!(PresetMode::parse(Some(&json!({"bogus": 1}))).is_err());
        assert!(PresetMode::parse(Some(&json!(5))).is_err());
    }
}
