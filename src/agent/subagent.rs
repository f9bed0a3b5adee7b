//! The `subagent` chat param and the `delegate_subagent` tool it offers: on by default,
//! `false` removes it, an object configures it (reference §2.11). Children run in
//! `delegate.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::llm::Provider;
use crate::llm::catalog::Pricing;

/// The tool's name.
pub const NAME: &str = "delegate_subagent";
/// The profile of an untyped delegation.
pub const GENERAL: &str = "general-purpose";
/// `maxParallel` when unset, and its ceiling.
pub const DEFAULT_MAX_PARALLEL: u32 = 4;
pub const MAX_MAX_PARALLEL: u32 = 64;
/// Profiles a turn may define, and names a `toolFilter` may list.
const MAX_PROFILES: usize = 64;
const MAX_FILTER: usize = 1024;
/// Characters of a profile's description and system prompt.
const MAX_DESCRIPTION_CHARS: usize = 2_000;
const MAX_PROFILE_PROMPT_CHARS: usize = 16_384;

const DESCRIPTION: &str = "Delegate a bounded sub-task to a sub-agent: a child agent with its \
own context and your tools (except this one) that works on `task` alone and returns its final \
answer. Use it for self-contained work (a search through many files, a focused change, a \
review) whose details you do not need in your own context. The child sees nothing of this \
conversation: put everything it needs in `task`, including what to return.";

/// A child's model when its profile names one: the provider built for it at parse time.
#[derive(Clone)]
pub struct ProfileModel {
    pub model: String,
    pub provider: Arc<dyn Provider>,
    pub pricing: Option<Pricing>,
    /// The model takes image input.
    pub image_input: bool,
}

/// One `subagent.profiles` entry.
#[derive(Clone)]
pub struct Profile {
    pub name: String,
    pub tool_filter: Option<Vec<String>>,
    pub model: Option<ProfileModel>,
    pub max_rounds: Option<u64>,
    pub concurrent: bool,
    pub description: Option<String>,
    pub system_prompt: Option<String>,
}

/// The resolved `subagent` param.
#[derive(Clone)]
pub struct Subagent {
    pub tool_filter: Option<Vec<String>>,
    pub max_parallel: u32,
    pub max_rounds: Option<u64>,
    pub max_tool_errors: Option<u64>,
    /// By name; `general-purpose` is implicit.
    pub profiles: BTreeMap<String, Profile>,
    pub required: Vec<String>,
}

impl Default for Subagent {
    fn default() -> Self {
        Subagent {
            tool_filter: None,
            max_parallel: DEFAULT_MAX_PARALLEL,
            max_rounds: None,
            max_tool_errors: None,
            profiles: BTreeMap::new(),
            required: Vec::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSubagent {
    tool_filter: Option<Vec<String>>,
    max_parallel: Option<u32>,
    max_rounds: Option<u64>,
    max_tool_errors: Option<u64>,
    profiles: Option<BTreeMap<String, RawProfile>>,
    required_profiles: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawProfile {
    tool_filter: Option<Vec<String>>,
    model: Option<String>,
    max_rounds: Option<u64>,
    #[serde(default)]
    concurrent: bool,
    description: Option<String>,
    system_prompt: Option<String>,
}

/// Builds the provider for a profile's `model` (the turn's provider settings, that model).
pub type ModelFactory<'a> = dyn Fn(&str) -> Result<ProfileModel, String> + 'a;

/// `None`: delegation is off. `max_rounds_ceiling` bounds every `maxRounds`.
pub fn parse(
    v: Option<&Value>,
    max_rounds_ceiling: u64,
    max_errors_ceiling: u64,
    model: &ModelFactory<'_>,
) -> Result<Option<Subagent>, String> {
    let raw: RawSubagent = match v {
        None | Some(Value::Null) | Some(Value::Bool(true)) => return Ok(Some(Subagent::default())),
        Some(Value::Bool(false)) => return Ok(None),
        Some(v @ Value::Object(_)) => crate::strict::decode_at(v, "subagent")?,
        Some(other) => {
            return Err(format!(
                "subagent must be false, true or an object {{toolFilter?, maxParallel?, maxRounds?, maxToolErrors?, profiles?, requiredProfiles?}}, got {other}"
            ));
        }
    };
    let ranged = |name: &str, v: Option<u64>, max: u64| -> Result<Option<u64>, String> {
        match v {
            Some(n) if n == 0 || n > max => {
                Err(format!("{name} must be between 1 and {max}, got {n}"))
            }
            other => Ok(other),
        }
    };
    let max_parallel = raw.max_parallel.unwrap_or(DEFAULT_MAX_PARALLEL);
    if max_parallel == 0 || max_parallel > MAX_MAX_PARALLEL {
        return Err(format!(
            "subagent.maxParallel must be between 1 and {MAX_MAX_PARALLEL}, got {max_parallel}"
        ));
    }
    let mut profiles = BTreeMap::new();
    let raw_profiles = raw.profiles.unwrap_or_default();
    if raw_profiles.len() > MAX_PROFILES {
        return Err(format!(
            "subagent.profiles has {} entries (at most {MAX_PROFILES})",
            raw_profiles.len()
        ));
    }
    for (name, p) in raw_profiles {
        let at = format!("subagent.profiles.{name}");
        if name == GENERAL {
            return Err(format!(
                "{at}: '{GENERAL}' is the untyped default and cannot be redefined; pick another name"
            ));
        }
        if !crate::tools::valid_tool_name(&name) {
            return Err(format!(
                "{at}: a profile name must be 1-64 letters, digits, '_' or '-'"
            ));
        }
        let description = p.description.map(|d| d.trim().to_string());
        if description
            .as_ref()
            .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION_CHARS)
        {
            return Err(format!(
                "{at}.description is longer than {MAX_DESCRIPTION_CHARS} characters"
            ));
        }
        if p.system_prompt
            .as_ref()
            .is_some_and(|s| s.chars().count() > MAX_PROFILE_PROMPT_CHARS)
        {
            return Err(format!(
                "{at}.systemPrompt is longer than {MAX_PROFILE_PROMPT_CHARS} characters"
            ));
        }
        let model = match p.model.as_deref().map(str::trim) {
            None => None,
            Some("") => return Err(format!("{at}.model must not be empty; omit it")),
            Some(m) => Some(model(m).map_err(|e| format!("{at}.model '{m}': {e}"))?),
        };
        profiles.insert(
            name.clone(),
            Profile {
                tool_filter: filter(p.tool_filter, &format!("{at}.toolFilter"))?,
                model,
                max_rounds: ranged(&format!("{at}.maxRounds"), p.max_rounds, max_rounds_ceiling)?,
                concurrent: p.concurrent,
                description: description.filter(|d| !d.is_empty()),
                system_prompt: p.system_prompt.filter(|s| !s.trim().is_empty()),
                name,
            },
        );
    }
    let required = raw.required_profiles.unwrap_or_default();
    if let Some(r) = required
        .iter()
        .find(|r| r.as_str() != GENERAL && !profiles.contains_key(r.as_str()))
    {
        return Err(format!(
            "subagent.requiredProfiles names '{r}', which is not a profile; registered: {}",
            registered(&profiles)
        ));
    }
    Ok(Some(Subagent {
        tool_filter: filter(raw.tool_filter, "subagent.toolFilter")?,
        max_parallel,
        max_rounds: ranged("subagent.maxRounds", raw.max_rounds, max_rounds_ceiling)?,
        max_tool_errors: ranged(
            "subagent.maxToolErrors",
            raw.max_tool_errors,
            max_errors_ceiling,
        )?,
        profiles,
        required,
    }))
}

/// A `toolFilter`: at most `MAX_FILTER` valid tool names, never the delegation tool.
pub(super) fn filter(v: Option<Vec<String>>, at: &str) -> Result<Option<Vec<String>>, String> {
    let Some(v) = v else { return Ok(None) };
    if v.len() > MAX_FILTER {
        return Err(format!(
            "{at} lists {} names (at most {MAX_FILTER})",
            v.len()
        ));
    }
    if let Some(bad) = v.iter().find(|n| !crate::tools::valid_tool_name(n)) {
        return Err(format!("{at}: '{bad}' is not a tool name"));
    }
    if v.iter().any(|n| n == NAME) {
        return Err(format!(
            "{at}: children never get {NAME} (delegation is one level deep); remove it"
        ));
    }
    Ok(Some(v))
}

/// `general-purpose, a, b`.
pub fn registered(profiles: &BTreeMap<String, Profile>) -> String {
    std::iter::once(GENERAL)
        .chain(profiles.keys().map(String::as_str))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Subagent {
    /// The tool descriptor the model sees.
    pub fn descriptor(&self) -> Value {
        let mut description = DESCRIPTION.to_string();
        let mut properties = serde_json::Map::new();
        properties.insert(
            "task".into(),
            json!({"type": "string", "description": "The whole sub-task: what to do, what to return, and any context the child needs."}),
        );
        if !self.profiles.is_empty() {
            description.push_str("\n\nSub-agent types (subagent_type; default general-purpose):");
            for p in self.profiles.values() {
                description.push_str(&format!(
                    "\n{}: {}",
                    p.name,
                    p.description.as_deref().unwrap_or("(no description)")
                ));
            }
            let names: Vec<&str> = std::iter::once(GENERAL)
                .chain(self.profiles.keys().map(String::as_str))
                .collect();
            properties.insert(
                "subagent_type".into(),
                json!({"type": "string", "enum": names, "description": "Which kind of sub-agent runs the task."}),
            );
        }
        json!({"type": "function", "function": {
            "name": NAME,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": ["task"], "additionalProperties": false}
        }})
    }

    /// The profile a call names (`None`: `general-purpose`), or the error the model gets.
    pub fn profile(&self, subagent_type: Option<&str>) -> Result<Option<&Profile>, String> {
        match subagent_type {
            None | Some(GENERAL) => Ok(None),
            Some(name) => self.profiles.get(name).map(Some).ok_or_else(|| {
                format!(
                    "unknown subagent_type '{name}'; registered: {}",
                    registered(&self.profiles)
                )
            }),
        }
    }

    /// Whether calls naming this profile may run beside each other in one round.
    pub fn concurrent(&self, args: &Value) -> bool {
        let t = args.get("subagent_type").and_then(Value::as_str);
        matches!(self.profile(t), Ok(Some(p)) if p.concurrent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_model(_: &str) -> Result<ProfileModel, String> {
        Err("no provider in this test".into())
    }

    fn p(v: Value) -> Result<Option<Subagent>, String> {
        parse(Some(&v), 100, 100, &no_model)
    }

    #[test]
    fn on_by_default_off_with_false() {
        assert!(parse(None, 100, 100, &no_model).unwrap().is_some());
        assert!(p(json!(true)).unwrap().is_some());
        assert!(p(json!(false)).unwrap().is_none());
        assert!(p(json!(3)).err().unwrap().contains("subagent must be"));
    }

    #[test]
    fn configuration_is_strict() {
        let e = p(json!({"maxParalel": 2})).err().unwrap();
        assert!(e.contains("maxParalel"), "{e}");
        let e = p(json!({"profiles": {"r": {"concurent": true}}}))
            .err()
            .unwrap();
        assert!(e.contains("concurent"), "{e}");
        let e = p(json!({"maxParallel": 0})).err().unwrap();
        assert!(e.contains("maxParallel"), "{e}");
        let e = p(json!({"requiredProfiles": ["nope"]})).err().unwrap();
        assert!(e.contains("'nope'") && e.contains("general-purpose"), "{e}");
        let e = p(json!({"toolFilter": ["delegate_subagent"]}))
            .err()
            .unwrap();
        assert!(e.contains("one level"), "{e}");
        let e = p(json!({"profiles": {"general-purpose": {}}}))
            .err()
            .unwrap();
        assert!(e.contains("untyped default"), "{e}");
        let e = p(json!({"profiles": {"r": {"model": "m"}}})).err().unwrap();
        assert!(e.contains("subagent.profiles.r.model 'm'"), "{e}");
    }

    #[test]
    fn profiles_become_an_enum_and_description_lines() {
        let s = p(json!({"profiles": {
            "researcher": {"description": "Reads code and reports", "concurrent": true},
            "fixer": {}
        }}))
        .unwrap()
        .unwrap();
        let d = s.descriptor();
        let f = &d["function"];
        assert_eq!(
            f["parameters"]["properties"]["subagent_type"]["enum"],
            json!(["general-purpose", "fixer", "researcher"])
        );
        let text = f["description"].as_str().unwrap();
        assert!(
            text.contains("\nresearcher: Reads code and reports"),
            "{text}"
        );
        assert!(s.concurrent(&json!({"subagent_type": "researcher"})));
        assert!(!s.concurrent(&json!({"subagent_type": "fixer"})));
        assert!(!s.concurrent(&json!({})));
        let e = s.profile(Some("critic")).err().unwrap();
        assert_eq!(
            e,
            "unknown subagent_type 'critic'; registered: general-purpose, fixer, researcher"
        );
        // Without profiles there is no type to choose.
        let plain = Subagent::default().descriptor();
        assert!(
            plain["function"]["parameters"]["properties"]
                .get("subagent_type")
                .is_none()
        );
    }
}
