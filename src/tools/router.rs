//! Registers tools, dispatches calls by name whatever the tier, validates arguments against
//! each tool's schema first, and suggests names for unknown tools.

use crate::strict::Invalid;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::search::SearchIndex;
use super::tool_search::ToolSearch;
use super::{Exposure, Schema, Tool, ToolContext, ToolMode, ToolResult};
use crate::catch_panic::CatchPanic;

/// Similarity a name needs to be suggested for an unknown tool (0..1).
const SUGGESTION_FLOOR: f64 = 0.4;
/// Most suggestions listed for an unknown tool.
const MAX_SUGGESTIONS: usize = 3;
/// Unknown-tool messages list at most this many available tools when nothing is similar.
const MAX_LISTED_TOOLS: usize = 20;

/// A registered tool with its resolved metadata.
pub struct Entry {
    pub tool: Arc<dyn Tool>,
    pub name: String,
    pub description: String,
    pub parameters: Schema,
    pub mode: ToolMode,
    pub exposure: Exposure,
    pub require_consent: bool,
    pub concurrency_safe: bool,
    /// The plugin that registered it, if any.
    pub plugin: Option<String>,
    /// Compiled on first use: schemas are not compiled at boot.
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

/// How to register a tool. `None` fields take the tool's own values.
pub struct Registration {
    pub tool: Arc<dyn Tool>,
    pub description: Option<String>,
    pub mode: Option<ToolMode>,
    pub exposure: Option<Exposure>,
    pub require_consent: Option<bool>,
    pub plugin: Option<String>,
}

impl Registration {
    pub fn new(tool: Arc<dyn Tool>) -> Registration {
        Registration {
            tool,
            description: None,
            mode: None,
            exposure: None,
            require_consent: None,
            plugin: None,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RegisterError {
    #[error("tool name '{name}' is already registered by {owner}; the first registrant keeps it")]
    Conflict { name: String, owner: String },
    #[error("tool name '{0}' is invalid: use 1-64 characters from [A-Za-z0-9_-]")]
    InvalidName(String),
}

/// The deferred inventory indexed for `tool_search`, rebuilt when the registry changes.
pub struct DeferredIndex {
    pub generation: u64,
    pub index: SearchIndex,
    pub names: Vec<String>,
}

pub struct Router {
    entries: RwLock<BTreeMap<String, Arc<Entry>>>,
    generation: AtomicU64,
    search_cache: Mutex<Option<Arc<DeferredIndex>>>,
    /// Called with a chat's key when a turn of it is cancelled (`on_chat_cancelled`).
    chat_cancelled: Mutex<Vec<ChatHook>>,
}

/// What tools that keep processes across calls run when a turn of a chat is cancelled.
pub type ChatHook = Arc<dyn Fn(&str) + Send + Sync>;

/// Entries resolved from registrations, not yet in a registry ([`Router::build`]).
pub struct Built(Vec<Entry>);

/// Resolves a registration's overrides into an entry (not yet in the registry).
fn build_entry(reg: Registration) -> Result<Entry, RegisterError> {
    let name = reg.tool.name().to_string();
    if !super::valid_tool_name(&name) {
        return Err(RegisterError::InvalidName(name));
    }
    let mode = reg.mode.unwrap_or_else(|| reg.tool.mode());
    // An overridden mode drives the defaults; otherwise the tool's own answers stand.
    let (consent, concurrent) = match reg.mode {
        Some(m) => (m == ToolMode::Local, m == ToolMode::Read),
        None => (reg.tool.require_consent(), reg.tool.concurrency_safe()),
    };
    Ok(Entry {
        description: reg
            .description
            .unwrap_or_else(|| reg.tool.description().to_string()),
        parameters: reg.tool.schema(),
        mode,
        exposure: reg.exposure.unwrap_or_else(|| reg.tool.exposure()),
        require_consent: reg.require_consent.unwrap_or(consent),
        concurrency_safe: concurrent,
        plugin: reg.plugin,
        name,
        tool: reg.tool,
        validator: OnceLock::new(),
    })
}

fn owner_label(plugin: &Option<String>) -> String {
    match plugin {
        Some(p) => format!("plugin '{p}'"),
        None => "a built-in tool".into(),
    }
}

impl Router {
    /// Runs `hook` with a chat's key whenever a turn of that chat is cancelled: tools that
    /// keep processes across calls (`bash_session`) end them.
    pub fn on_chat_cancelled(&self, hook: ChatHook) {
        self.chat_cancelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(hook);
    }

    /// A turn of chat `key` was cancelled.
    pub fn chat_cancelled(&self, key: &str) {
        let hooks = self
            .chat_cancelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for h in hooks {
            h(key);
        }
    }

    /// A router holding the built-in `tool_search`.
    pub fn new() -> Arc<Router> {
        Arc::new_cyclic(|weak: &Weak<Router>| {
            let router = Router {
                entries: RwLock::new(BTreeMap::new()),
                generation: AtomicU64::new(0),
                search_cache: Mutex::new(None),
                chat_cancelled: Mutex::new(Vec::new()),
            };
            let search = Registration::new(Arc::new(ToolSearch::new(weak.clone())));
            if let Err(e) = router.register(search) {
                tracing::error!("cannot register tool_search: {e}");
            }
            router
        })
    }

    /// A router of one turn's own: this one's tools as they are now (the entries are shared,
    /// not copied) and a `tool_search` of its own, so tools registered on it (a turn's MCP
    /// servers) stay out of every other turn.
    pub fn fork(&self) -> Arc<Router> {
        let entries: BTreeMap<String, Arc<Entry>> = self
            .read()
            .iter()
            .filter(|(name, _)| name.as_str() != ToolSearch::NAME)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let fork = Router::new();
        fork.write().extend(entries);
        // Past any generation the parent handed out, so a cached tool list never matches.
        fork.generation
            .store(self.generation() + 1, Ordering::SeqCst);
        fork
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Entry>>> {
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Entry>>> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn register(&self, reg: Registration) -> Result<(), RegisterError> {
        self.swap(&[], vec![reg])
    }

    pub fn unregister(&self, name: &str) -> bool {
        let removed = self.write().remove(name).is_some();
        if removed {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        removed
    }

    /// Removes `remove` and registers `add` in one step under the registry lock: a call
    /// racing a plugin reload sees the old tools or the new ones, never neither. Nothing
    /// changes when any new name is invalid or taken (by a tool not being removed).
    pub fn swap(&self, remove: &[String], add: Vec<Registration>) -> Result<(), RegisterError> {
        self.swap_built(remove, Router::build(add)?)
    }

    /// Resolves registrations into entries without touching the registry, so a caller with
    /// many (a plugin directory at boot) can build them on its worker threads.
    pub fn build(add: Vec<Registration>) -> Result<Built, RegisterError> {
        add.into_iter()
            .map(build_entry)
            .collect::<Result<Vec<Entry>, RegisterError>>()
            .map(Built)
    }

    /// [`Router::swap`] with entries already built.
    pub fn swap_built(&self, remove: &[String], built: Built) -> Result<(), RegisterError> {
        let built = built.0;
        let mut entries = self.write();
        // A set, not a scan: a 250-tool manifest compared each name with every earlier one.
        let mut claimed: HashSet<&str> = HashSet::with_capacity(built.len());
        for e in &built {
            let taken_by = entries
                .get(&e.name)
                .filter(|_| !remove.contains(&e.name))
                .map(|existing| owner_label(&existing.plugin))
                .or_else(|| {
                    claimed
                        .contains(e.name.as_str())
                        .then(|| owner_label(&e.plugin))
                });
            if let Some(owner) = taken_by {
                return Err(RegisterError::Conflict {
                    name: e.name.clone(),
                    owner,
                });
            }
            claimed.insert(&e.name);
        }
        drop(claimed);
        for name in remove {
            entries.remove(name);
        }
        for e in built {
            entries.insert(e.name.clone(), Arc::new(e));
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Changes whenever a tool is registered or removed.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Entry>> {
        self.read().get(name).cloned()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Every registered tool, by name (host introspection).
    pub fn describe(&self) -> Vec<Arc<Entry>> {
        self.read().values().cloned().collect()
    }

    /// What the model is offered: the direct tier, with `tool_search` only when there is a
    /// deferred tool for it to find.
    pub fn describe_model(&self) -> Vec<Arc<Entry>> {
        let entries = self.read();
        let any_deferred = entries.values().any(|e| e.exposure == Exposure::Deferred);
        entries
            .values()
            .filter(|e| e.exposure == Exposure::Direct)
            .filter(|e| any_deferred || e.name != ToolSearch::NAME)
            .cloned()
            .collect()
    }

    /// The BM25 index over the deferred tier, cached until the registry changes.
    pub fn deferred_index(&self) -> Arc<DeferredIndex> {
        let generation = self.generation.load(Ordering::SeqCst);
        let mut cache = self.search_cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cache.as_ref()
            && c.generation == generation
        {
            return c.clone();
        }
        let deferred: Vec<(String, String)> = self
            .read()
            .values()
            .filter(|e| e.exposure == Exposure::Deferred)
            .map(|e| (e.name.clone(), e.description.clone()))
            .collect();
        let index = SearchIndex::build(deferred.iter().map(|(n, d)| (n.as_str(), d.as_str())));
        let built = Arc::new(DeferredIndex {
            generation,
            index,
            names: deferred.into_iter().map(|(n, _)| n).collect(),
        });
        *cache = Some(built.clone());
        built
    }

    /// Names close to `name`, best first; hidden tools are never suggested.
    pub fn suggestions(&self, name: &str) -> Vec<String> {
        let lower = name.to_ascii_lowercase();
        let mut scored: Vec<(f64, String)> = self
            .read()
            .values()
            .filter(|e| e.exposure != Exposure::Hidden)
            .map(|e| {
                let score = strsim::normalized_levenshtein(&lower, &e.name.to_ascii_lowercase());
                (score, e.name.clone())
            })
            .filter(|(s, _)| *s >= SUGGESTION_FLOOR)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        scored
            .into_iter()
            .take(MAX_SUGGESTIONS)
            .map(|(_, n)| n)
            .collect()
    }

    pub fn unknown_tool(&self, name: &str) -> ToolResult {
        let suggestions = self.suggestions(name);
        let error = if suggestions.is_empty() {
            let available: Vec<String> = self
                .read()
                .values()
                .filter(|e| e.exposure != Exposure::Hidden)
                .take(MAX_LISTED_TOOLS)
                .map(|e| e.name.clone())
                .collect();
            format!(
                "Unknown tool: {name}. Available tools: {}",
                available.join(", ")
            )
        } else {
            format!(
                "Unknown tool: {name}. Did you mean: {}?",
                suggestions.join(", ")
            )
        };
        ToolResult::recoverable(error)
            .with_data("unknownTool", name)
            .with_data("suggestions", json!(suggestions))
    }

    /// Runs one call: look up, validate, call (panics become failures), add `durationMs`.
    pub async fn dispatch(&self, name: &str, args: Value, ctx: ToolContext) -> ToolResult {
        let Some(entry) = self.get(name) else {
            return self.unknown_tool(name);
        };
        let started = Instant::now();
        let args = match entry.checked_args(args) {
            Ok(a) => a,
            Err(e) => {
                return ToolResult::recoverable(e).with_data("durationMs", elapsed_ms(started));
            }
        };
        let fut = entry.tool.clone().call(ctx, args);
        let result = match CatchPanic(fut).await {
            Ok(r) => r,
            Err(panic) => ToolResult::recoverable(format!("tool '{name}' panicked: {panic}")),
        };
        result.with_data("durationMs", elapsed_ms(started))
    }
}

impl Entry {
    /// The call's arguments as an object that satisfies the schema, or the error the model
    /// gets (for callers that run the tool's work themselves, like a turn's run_code).
    pub fn checked_args(&self, args: Value) -> Result<Map<String, Value>, String> {
        let name = &self.name;
        let args = args_object(name, args).map_err(String::from)?;
        self.validate(&args)
            .map_err(|msg| format!("Invalid arguments for tool '{name}': {msg}"))?;
        Ok(args)
    }

    /// Checks arguments against the tool's schema; the error names each field and what it
    /// expected.
    pub fn validate(&self, args: &Map<String, Value>) -> Result<(), Invalid> {
        let validator = self.validator.get_or_init(|| {
            jsonschema::validator_for(&self.parameters.value())
                .map_err(|e| format!("the tool's own parameter schema is invalid: {e}"))
        });
        let validator = validator.as_ref().map_err(Clone::clone)?;
        schema_problems(validator, args)
    }
}

/// A call's arguments as an object (`null` reads as `{}`), or the error the model gets.
pub fn args_object(name: &str, args: Value) -> Result<Map<String, Value>, Invalid> {
    match args {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => Ok(m),
        other => Err(Invalid::from(format!(
            "Invalid arguments for tool '{name}': expected a JSON object, got {}",
            super::json_type_name(&other)
        ))),
    }
}

/// The most characters of one schema problem's message.
const PROBLEM_CHARS: usize = 300;

/// `s` cut to `max` characters, keeping its start and end around an ellipsis.
fn shorten(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let keep = max.saturating_sub(1) / 2;
    let head: String = s.chars().take(keep).collect();
    let tail: String = s.chars().skip(n - keep).collect();
    format!("{head}…{tail}")
}

/// Checks arguments against a compiled schema; the error names each field (at most five)
/// and what it expected.
pub fn schema_problems(
    validator: &jsonschema::Validator,
    args: &Map<String, Value>,
) -> Result<(), Invalid> {
    let instance = Value::Object(args.clone());
    let problems: Vec<String> = validator
        .iter_errors(&instance)
        .take(5)
        .map(|e| {
            let path = e.instance_path().to_string();
            // The validator's message quotes the offending value whole: bound it (a 70 KB
            // string argument must not come back as a 70 KB error).
            let msg = shorten(&e.to_string(), PROBLEM_CHARS);
            if path.is_empty() {
                msg
            } else {
                format!("at {path}: {msg}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Invalid::from(problems.join("; ")))
    }
}

pub fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolFuture;

    struct Fixed {
        name: &'static str,
        exposure: Exposure,
        panics: bool,
    }

    impl Tool for Fixed {
        fn name(&self) -> &str {
            self.name
        }
        fn description(&self) -> &str {
            "A fixed test tool"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}, "required": ["city"]})
        }
        fn exposure(&self) -> Exposure {
            self.exposure
        }
        fn call(self: Arc<Self>, _ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
            Box::pin(async move {
                if self.panics {
                    panic!("boom {}", args.len());
                }
                ToolResult::ok(args)
            })
        }
    }

    fn add(r: &Router, name: &'static str, exposure: Exposure) {
        r.register(Registration::new(Arc::new(Fixed {
            name,
            exposure,
            panics: false,
        })))
        .unwrap();
    }

    fn ctx() -> ToolContext {
        ToolContext::new(std::env::temp_dir())
    }

    #[tokio::test]
    async fn tiers_dispatch_and_offering() {
        let r = Router::new();
        add(&r, "get_forecast", Exposure::Direct);
        let offered: Vec<String> = r.describe_model().iter().map(|e| e.name.clone()).collect();
        assert_eq!(
            offered,
            vec!["get_forecast"],
            "tool_search only with deferred tools"
        );
        add(&r, "get_tides", Exposure::Deferred);
        add(&r, "get_secret", Exposure::Hidden);
        let offered: Vec<String> = r.describe_model().iter().map(|e| e.name.clone()).collect();
        assert_eq!(offered, vec!["get_forecast", "tool_search"]);
        assert_eq!(r.describe().len(), 4);
        for name in ["get_tides", "get_secret"] {
            let res = r.dispatch(name, json!({"city": "Oslo"}), ctx()).await;
            assert!(res.success, "{name}: {res:?}");
            assert!(res.data.unwrap().contains_key("durationMs"));
        }
    }

    #[tokio::test]
    async fn validation_names_the_field() {
        let r = Router::new();
        add(&r, "get_forecast", Exposure::Direct);
        let res = r.dispatch("get_forecast", json!({}), ctx()).await;
        assert!(!res.success && res.needs_followup == Some(true));
        assert!(res.error.as_deref().unwrap().contains("city"), "{res:?}");
        let res = r
            .dispatch("get_forecast", json!({"city": "x", "days": "two"}), ctx())
            .await;
        let e = res.error.unwrap();
        assert!(e.contains("/days") && e.contains("integer"), "{e}");
        let res = r.dispatch("get_forecast", json!([1]), ctx()).await;
        assert!(res.error.unwrap().contains("object"));
    }

    #[tokio::test]
    async fn unknown_tools_get_suggestions_but_never_hidden_ones() {
        let r = Router::new();
        add(&r, "get_forecast", Exposure::Direct);
        add(&r, "get_forecasts_hidden", Exposure::Hidden);
        add(&r, "get_forecast_deferred", Exposure::Deferred);
        let res = r.dispatch("get_forcast", json!({}), ctx()).await;
        assert!(!res.success && res.needs_followup == Some(true));
        let data = res.data.unwrap();
        let s: Vec<String> = serde_json::from_value(data["suggestions"].clone()).unwrap();
        assert_eq!(s.first().map(String::as_str), Some("get_forecast"));
        assert!(!s.iter().any(|n| n.contains("hidden")));
        assert!(s.len() <= 3);
        assert_eq!(data["unknownTool"], "get_forcast");
        assert!(
            res.error
                .unwrap()
                .starts_with("Unknown tool: get_forcast. Did you mean: get_forecast")
        );
        let res = r.dispatch("zzzzzzzzzzzzzzzz", json!({}), ctx()).await;
        assert!(res.error.unwrap().contains("Available tools"));
    }

    #[tokio::test]
    async fn panicking_tool_is_a_failed_result() {
        let r = Router::new();
        r.register(Registration::new(Arc::new(Fixed {
            name: "get_boom",
            exposure: Exposure::Direct,
            panics: true,
        })))
        .unwrap();
        let res = r.dispatch("get_boom", json!({"city": "x"}), ctx()).await;
        assert!(!res.success);
        assert!(res.error.unwrap().contains("panicked: boom"));
        // And the router still works.
        assert!(r.get("tool_search").is_some());
    }

    #[test]
    fn conflicts_and_names() {
        let r = Router::new();
        add(&r, "get_x", Exposure::Direct);
        let e = r
            .register(Registration::new(Arc::new(Fixed {
                name: "get_x",
                exposure: Exposure::Direct,
                panics: false,
            })))
            .unwrap_err();
        assert!(matches!(e, RegisterError::Conflict { .. }));
        let e = r
            .register(Registration::new(Arc::new(Fixed {
                name: "bad.name",
                exposure: Exposure::Direct,
                panics: false,
            })))
            .unwrap_err();
        assert!(matches!(e, RegisterError::InvalidName(_)));
        assert!(r.unregister("get_x"));
        assert!(!r.unregister("get_x"));
    }

    #[test]
    fn mode_override_sets_consent_and_concurrency() {
        let r = Router::new();
        let mut reg = Registration::new(Arc::new(Fixed {
            name: "get_y",
            exposure: Exposure::Direct,
            panics: false,
        }));
        reg.mode = Some(ToolMode::Local);
        r.register(reg).unwrap();
        let e = r.get("get_y").unwrap();
        assert!(e.require_consent && !e.concurrency_safe);
        let plain = r.get("tool_search").unwrap();
        assert!(!plain.require_consent && plain.concurrency_safe);
    }
}
