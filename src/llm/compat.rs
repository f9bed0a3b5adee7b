//! OpenAI-compatible vendor divergences as data (spec §3.13): nine flags, a host table that
//! picks them from the base URL, and the `compat` chat param that overrides them key by key.
//!
//! Flags gate only what the provider adds itself; a host's `providerOptions` always win.

use crate::strict::Invalid;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which body member carries the output-token cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    MaxTokens,
    MaxCompletionTokens,
}

impl MaxTokensField {
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }

    pub fn other(self) -> MaxTokensField {
        match self {
            MaxTokensField::MaxTokens => MaxTokensField::MaxCompletionTokens,
            MaxTokensField::MaxCompletionTokens => MaxTokensField::MaxTokens,
        }
    }
}

/// The resolved flags for one provider.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompatFlags {
    pub supports_usage_in_streaming: bool,
    pub max_tokens_field: MaxTokensField,
    pub supports_reasoning_effort: bool,
    pub supports_temperature: bool,
    pub reasoning_delta_fields: Vec<String>,
    pub reasoning_echo_field: String,
    pub supports_forced_tool_choice: bool,
    pub echo_empty_reasoning_for_tool_calls: bool,
    pub cached_tokens_fields: Vec<String>,
}

impl Default for CompatFlags {
    /// Reference OpenAI behaviour.
    fn default() -> Self {
        CompatFlags {
            supports_usage_in_streaming: true,
            max_tokens_field: MaxTokensField::MaxTokens,
            supports_reasoning_effort: true,
            supports_temperature: true,
            reasoning_delta_fields: strings(&["reasoning_content", "reasoning"]),
            reasoning_echo_field: "reasoning".into(),
            supports_forced_tool_choice: true,
            echo_empty_reasoning_for_tool_calls: false,
            cached_tokens_fields: strings(&[
                "prompt_tokens_details.cached_tokens",
                "prompt_cache_hit_tokens",
            ]),
        }
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The `compat` chat param: every key optional, unknown keys refused.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompatOverrides {
    pub supports_usage_in_streaming: Option<bool>,
    pub max_tokens_field: Option<MaxTokensField>,
    pub supports_reasoning_effort: Option<bool>,
    pub supports_temperature: Option<bool>,
    pub reasoning_delta_fields: Option<Vec<String>>,
    pub reasoning_echo_field: Option<String>,
    pub supports_forced_tool_choice: Option<bool>,
    pub echo_empty_reasoning_for_tool_calls: Option<bool>,
    pub cached_tokens_fields: Option<Vec<String>>,
}

impl CompatOverrides {
    /// Parses the `compat` param; the error names the offending key and the valid ones.
    pub fn from_value(v: &Value) -> Result<CompatOverrides, Invalid> {
        if !v.is_object() {
            return Err(Invalid::from(format!(
                "compat must be an object of flags, got {v}; see compat.describe"
            )));
        }
        CompatOverrides::deserialize(v)
            .map_err(|e| {
                format!("invalid compat flags: {e}; compat.describe lists the keys and their types")
            })
            .map_err(Invalid::from)
    }

    fn apply(self, f: &mut CompatFlags) {
        macro_rules! set {
            ($($k:ident),*) => { $( if let Some(v) = self.$k { f.$k = v; } )* };
        }
        set!(
            supports_usage_in_streaming,
            max_tokens_field,
            supports_reasoning_effort,
            supports_temperature,
            reasoning_delta_fields,
            reasoning_echo_field,
            supports_forced_tool_choice,
            echo_empty_reasoning_for_tool_calls,
            cached_tokens_fields
        );
    }
}

/// A host substring and what it changes in the reference flags.
pub type HostRule = (&'static str, fn(&mut CompatFlags));

/// `PROVIDER_COMPAT_HOSTS`: the first host substring found in the base URL wins.
pub const HOSTS: &[HostRule] = &[
    ("api.deepseek.com", |f| {
        f.reasoning_echo_field = "reasoning_content".into();
        f.supports_forced_tool_choice = false;
        f.echo_empty_reasoning_for_tool_calls = true;
        f.cached_tokens_fields = strings(&[
            "prompt_cache_hit_tokens",
            "prompt_tokens_details.cached_tokens",
        ]);
    }),
    ("api.moonshot.cn", moonshot),
    ("api.moonshot.ai", moonshot),
    ("openrouter.ai", |f| {
        f.reasoning_delta_fields = strings(&["reasoning", "reasoning_content"]);
    }),
    ("dashscope.aliyuncs.com", pin_defaults),
    ("dashscope-intl.aliyuncs.com", pin_defaults),
    // Ours, beyond the reference table: GLM rejects `stream_options` and always sends usage
    // on the finish chunk (reference/hosts-and-users.md §4.2 f).
    ("api.z.ai", glm),
    ("open.bigmodel.cn", glm),
];

fn moonshot(f: &mut CompatFlags) {
    f.supports_temperature = false;
    f.supports_reasoning_effort = false;
}

fn pin_defaults(f: &mut CompatFlags) {
    *f = CompatFlags::default();
}

fn glm(f: &mut CompatFlags) {
    f.supports_usage_in_streaming = false;
}

/// The host row that matches `base_url`, if any.
pub fn detect_host(base_url: &str) -> Option<&'static str> {
    let url = base_url.to_ascii_lowercase();
    HOSTS.iter().find(|(h, _)| url.contains(h)).map(|(h, _)| *h)
}

/// Host auto-detection, then the explicit `compat` keys on top (they always win).
pub fn resolve(base_url: &str, overrides: Option<CompatOverrides>) -> CompatFlags {
    let mut f = CompatFlags::default();
    if let Some(host) = detect_host(base_url)
        && let Some((_, apply)) = HOSTS.iter().find(|(h, _)| *h == host)
    {
        apply(&mut f);
    }
    if let Some(o) = overrides {
        o.apply(&mut f);
    }
    f
}

/// One flag as `compat.describe` documents it.
#[derive(Debug, Clone, PartialEq)]
pub struct FlagDoc {
    /// The key in the `compat` param (camelCase).
    pub key: &'static str,
    /// The `CompatFlags` field.
    pub field: &'static str,
    /// `bool`, `string`, `string-list` or `enum:<values>`.
    pub kind: &'static str,
    /// The reference (OpenAI) value.
    pub default: Value,
    pub description: &'static str,
}

/// `compat.describe`: the flag vocabulary for host settings UIs, in order.
pub fn describe() -> Vec<FlagDoc> {
    let d = serde_json::to_value(CompatFlags::default()).unwrap_or(Value::Null);
    let rows: &[(&str, &str, &str, &str)] = &[
        (
            "supportsUsageInStreaming",
            "supports_usage_in_streaming",
            "bool",
            "send stream_options.include_usage so the stream ends with token usage",
        ),
        (
            "maxTokensField",
            "max_tokens_field",
            "enum:max_tokens,max_completion_tokens",
            "body member carrying the output-token cap (o-series and GPT-5 need max_completion_tokens)",
        ),
        (
            "supportsReasoningEffort",
            "supports_reasoning_effort",
            "bool",
            "send reasoning_effort when the request sets one (false drops it silently)",
        ),
        (
            "supportsTemperature",
            "supports_temperature",
            "bool",
            "send temperature when the request sets one (false for fixed-temperature models)",
        ),
        (
            "reasoningDeltaFields",
            "reasoning_delta_fields",
            "string-list",
            "delta members read as reasoning text, first present wins (then reasoning_details)",
        ),
        (
            "reasoningEchoField",
            "reasoning_echo_field",
            "string",
            "assistant-message member that carries reasoning back on tool-call turns",
        ),
        (
            "supportsForcedToolChoice",
            "supports_forced_tool_choice",
            "bool",
            "false downgrades tool_choice required (or a named function) to auto",
        ),
        (
            "echoEmptyReasoningForToolCalls",
            "echo_empty_reasoning_for_tool_calls",
            "bool",
            "send an empty reasoning field on tool-call turns that had none (DeepSeek thinking mode)",
        ),
        (
            "cachedTokensFields",
            "cached_tokens_fields",
            "string-list",
            "dotted usage paths read as cached prompt tokens, first present wins",
        ),
    ];
    rows.iter()
        .map(|&(key, field, kind, description)| FlagDoc {
            key,
            field,
            kind,
            default: d.get(key).cloned().unwrap_or(Value::Null),
            description,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_host_runs_reference_defaults() {
        assert_eq!(
            resolve("https://api.openai.com/v1", None),
            CompatFlags::default()
        );
        assert_eq!(detect_host("http://127.0.0.1:9/v1"), None);
    }

    #[test]
    fn host_table() {
        let ds = resolve("https://api.deepseek.com/v1", None);
        assert_eq!(ds.reasoning_echo_field, "reasoning_content");
        assert!(!ds.supports_forced_tool_choice);
        assert!(ds.echo_empty_reasoning_for_tool_calls);
        assert_eq!(ds.cached_tokens_fields[0], "prompt_cache_hit_tokens");
        for m in ["https://api.moonshot.cn/v1", "https://API.MOONSHOT.AI/v1"] {
            let f = resolve(m, None);
            assert!(
                !f.supports_temperature && !f.supports_reasoning_effort,
                "{m}"
            );
            assert!(f.supports_forced_tool_choice);
        }
        let or = resolve("https://openrouter.ai/api/v1", None);
        assert_eq!(
            or.reasoning_delta_fields,
            vec!["reasoning", "reasoning_content"]
        );
        for d in [
            "https://dashscope.aliyuncs.com/compatible-mode/v1",
            "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
        ] {
            let f = resolve(d, None);
            assert_eq!(f, CompatFlags::default());
            assert_eq!(f.reasoning_delta_fields[0], "reasoning_content");
        }
        assert!(!resolve("https://api.z.ai/api/paas/v4", None).supports_usage_in_streaming);
    }

    #[test]
    fn explicit_keys_beat_the_host_row() {
        let o = CompatOverrides::from_value(&json!({
            "supportsForcedToolChoice": true,
            "maxTokensField": "max_completion_tokens"
        }))
        .unwrap();
        let f = resolve("https://api.deepseek.com", Some(o));
        assert!(f.supports_forced_tool_choice);
        assert_eq!(f.max_tokens_field, MaxTokensField::MaxCompletionTokens);
        assert!(
            f.echo_empty_reasoning_for_tool_calls,
            "other host keys stay"
        );
    }

    #[test]
    fn unknown_or_mistyped_keys_fail_naming_them() {
        let e = CompatOverrides::from_value(&json!({"supportsTemprature": false})).unwrap_err();
        assert!(e.contains("supportsTemprature"), "{e}");
        let e = CompatOverrides::from_value(&json!({"maxTokensField": "tokens"})).unwrap_err();
        assert!(e.contains("tokens"), "{e}");
        assert!(CompatOverrides::from_value(&json!([1])).is_err());
    }

    #[test]
    fn describe_lists_nine_flags_with_defaults() {
        let flags = describe();
        assert_eq!(flags.len(), 9);
        for f in &flags {
            assert!(!f.default.is_null(), "{f:?}");
        }
        assert_eq!(flags[1].default, "max_tokens");
        assert_eq!(flags[0].field, "supports_usage_in_streaming");
    }
}
