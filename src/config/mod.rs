//! Layered configuration with per-key provenance.
//!
//! Layers, lowest first: default → `$OUTRIGGER_HOME/config.json` → the profile named by
//! `OUTRIGGER_PROFILE` → `OUTRIGGER_<KEY>` env → CLI flags → per-request overrides → the
//! managed file at `OUTRIGGER_MANAGED_CONFIG_PATH`, which is applied last so nothing below
//! can loosen what it pins.

pub mod keys;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

pub use keys::{KEYS, LOG_LEVELS};

/// Default of `trace_memory_bytes`: finished traces are in the store, so memory keeps only
/// the most recent few (a turn's trace is a few KiB).
pub const DEFAULT_TRACE_MEMORY_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Default,
    File,
    Profile,
    Env,
    Cli,
    Override,
    Managed,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File => "file",
            Source::Profile => "profile",
            Source::Env => "env",
            Source::Cli => "cli",
            Source::Override => "override",
            Source::Managed => "managed",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path} is not valid JSON at line {line}, column {column}: {msg}")]
    Malformed {
        path: PathBuf,
        line: usize,
        column: usize,
        msg: String,
    },
    #[error("cannot read config file {path}: {msg}")]
    Unreadable { path: PathBuf, msg: String },
    #[error("config file {path}: {what} must be a JSON object")]
    NotObject { path: PathBuf, what: String },
    #[error(
        "config key '{key}' from the {layer} layer ({origin}) must be {expected}, got {got}; fix or remove it"
    )]
    WrongType {
        key: String,
        layer: &'static str,
        origin: String,
        expected: String,
        got: String,
    },
    #[error(
        "unknown config key '{key}' in the {layer} layer ({origin}); known keys: {}",
        known.join(", ")
    )]
    UnknownKey {
        key: String,
        layer: &'static str,
        origin: String,
        known: Vec<&'static str>,
    },
    #[error(
        "unknown profile '{name}' (OUTRIGGER_PROFILE); available profiles in {path}: {}",
        if available.is_empty() { "none".to_string() } else { available.join(", ") }
    )]
    UnknownProfile {
        name: String,
        path: PathBuf,
        available: Vec<String>,
    },
    #[error("config key '{key}' is pinned by the managed config ({origin}) and cannot be changed")]
    Pinned { key: String, origin: String },
}

/// One layer's values, where they came from, and which source they count as.
#[derive(Debug, Clone)]
struct Layer {
    source: Source,
    origin: String,
    values: Map<String, Value>,
}

impl Layer {
    fn new(source: Source, origin: impl Into<String>) -> Self {
        Layer {
            source,
            origin: origin.into(),
            values: Map::new(),
        }
    }

    /// Validates every key against the defaults table; env layers coerce strings first.
    fn checked(mut self) -> Result<Self, ConfigError> {
        for (k, v) in self.values.iter_mut() {
            let spec = keys::spec(k).ok_or_else(|| ConfigError::UnknownKey {
                key: k.clone(),
                layer: self.source.as_str(),
                origin: self.origin.clone(),
                known: keys::names(),
            })?;
            if self.source == Source::Env
                && let Value::String(s) = v
            {
                *v = spec.kind.coerce_env(s);
            }
            if !spec.kind.check(v) {
                return Err(ConfigError::WrongType {
                    key: k.clone(),
                    layer: self.source.as_str(),
                    origin: self.origin.clone(),
                    expected: match spec.kind {
                        // The entry parser names the exact problem.
                        keys::Kind::McpServers => match crate::mcp::entry::parse_configured(v) {
                            Err(e) => format!("{} ({e})", spec.kind.describe()),
                            Ok(_) => spec.kind.describe(),
                        },
                        _ => spec.kind.describe(),
                    },
                    got: v.to_string(),
                });
            }
        }
        Ok(self)
    }
}

/// Where the layers come from: the process environment, captured once.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub home: PathBuf,
    pub profile: Option<String>,
    pub managed: Option<PathBuf>,
    /// `OUTRIGGER_<KEY>` values found in the environment.
    pub env: Vec<(String, String)>,
    /// Values given on the command line, as config keys.
    pub cli: Map<String, Value>,
}

impl Inputs {
    /// Reads `OUTRIGGER_HOME`, `OUTRIGGER_PROFILE`, `OUTRIGGER_MANAGED_CONFIG_PATH` and the
    /// `OUTRIGGER_<KEY>` variables of the known keys.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let home = var("OUTRIGGER_HOME").map(PathBuf::from).unwrap_or_else(|| {
            var("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."))
                .join(".outrigger")
        });
        let env = KEYS
            .iter()
            .filter_map(|k| {
                let name = format!("OUTRIGGER_{}", k.name.to_ascii_uppercase());
                std::env::var(&name).ok().map(|v| (k.name.to_string(), v))
            })
            .collect();
        Inputs {
            home,
            profile: var("OUTRIGGER_PROFILE"),
            managed: var("OUTRIGGER_MANAGED_CONFIG_PATH").map(PathBuf::from),
            env,
            cli: Map::new(),
        }
    }
}

/// The loaded layers. `merged()` folds them; overrides can be swapped without reloading files.
#[derive(Debug, Clone)]
pub struct Config {
    home: PathBuf,
    below_override: Vec<Layer>,
    overrides: Layer,
    managed: Option<Layer>,
}

/// One key's resolved value and the layer it came from.
#[derive(Debug, Clone, Serialize)]
pub struct Resolved {
    pub value: Value,
    pub source: Source,
}

impl Config {
    pub fn load(inputs: &Inputs) -> Result<Config, ConfigError> {
        let mut layers = Vec::new();
        let mut defaults = Layer::new(Source::Default, "built-in defaults");
        for k in KEYS {
            defaults.values.insert(k.name.to_string(), (k.default)());
        }
        layers.push(defaults);

        let file = inputs.home.join("config.json");
        let mut profiles = None;
        if let Some(mut obj) = read_json_object(&file, false)? {
            profiles = obj.remove("profiles");
            let mut l = Layer::new(Source::File, file.display().to_string());
            l.values = obj;
            layers.push(l.checked()?);
        }
        if let Some(name) = &inputs.profile {
            let available: Map<String, Value> = match profiles {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m,
                Some(_) => {
                    return Err(ConfigError::NotObject {
                        path: file,
                        what: "\"profiles\"".into(),
                    });
                }
            };
            let Some(p) = available.get(name) else {
                return Err(ConfigError::UnknownProfile {
                    name: name.clone(),
                    path: file,
                    available: available.keys().cloned().collect(),
                });
            };
            let Value::Object(values) = p else {
                return Err(ConfigError::NotObject {
                    path: file,
                    what: format!("profile \"{name}\""),
                });
            };
            let mut l = Layer::new(
                Source::Profile,
                format!("profile '{name}' in {}", file.display()),
            );
            l.values = values.clone();
            layers.push(l.checked()?);
        }
        let mut env = Layer::new(Source::Env, "OUTRIGGER_* environment");
        for (k, v) in &inputs.env {
            env.values.insert(k.clone(), Value::String(v.clone()));
        }
        layers.push(env.checked()?);
        let mut cli = Layer::new(Source::Cli, "command-line flags");
        cli.values = inputs.cli.clone();
        layers.push(cli.checked()?);

        let managed = match &inputs.managed {
            None => None,
            Some(path) => {
                let obj = read_json_object(path, true)?.unwrap_or_default();
                let mut l = Layer::new(Source::Managed, path.display().to_string());
                l.values = obj;
                Some(l.checked()?)
            }
        };
        Ok(Config {
            home: inputs.home.clone(),
            below_override: layers,
            overrides: Layer::new(Source::Override, "per-request override"),
            managed,
        })
    }

    /// Every key with its value and source, after all layers.
    pub fn merged(&self) -> BTreeMap<&'static str, Resolved> {
        let mut out = BTreeMap::new();
        let layers = self
            .below_override
            .iter()
            .chain(std::iter::once(&self.overrides))
            .chain(self.managed.iter());
        for layer in layers {
            for (k, v) in &layer.values {
                if let Some(spec) = keys::spec(k) {
                    out.insert(
                        spec.name,
                        Resolved {
                            value: v.clone(),
                            source: layer.source,
                        },
                    );
                }
            }
        }
        out
    }

    /// A copy with per-request overrides applied (validated; managed pins refuse).
    pub fn with_overrides(&self, values: &Map<String, Value>) -> Result<Config, ConfigError> {
        let mut layer = self.overrides.clone();
        for (k, v) in values {
            layer.values.insert(k.clone(), v.clone());
        }
        let layer = layer.checked()?;
        if let Some(m) = &self.managed
            && let Some(k) = values.keys().find(|k| m.values.contains_key(*k))
        {
            return Err(ConfigError::Pinned {
                key: k.clone(),
                origin: m.origin.clone(),
            });
        }
        let mut next = self.clone();
        next.overrides = layer;
        Ok(next)
    }

    /// `$OUTRIGGER_HOME` (plugins, the default store and config live here).
    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn settings(&self) -> Settings {
        let m = self.merged();
        let get = |k: &str| m.get(k).map(|r| r.value.clone()).unwrap_or(Value::Null);
        let storage_path = get("storage_path")
            .as_str()
            .map(PathBuf::from)
            .unwrap_or_else(|| self.home.join("outrigger.db"));
        Settings {
            log_level: get("log_level").as_str().unwrap_or("INFO").to_string(),
            grace_period: Duration::from_secs_f64(
                get("grace_period_seconds").as_f64().unwrap_or(5.0),
            ),
            grace_period_seconds: get("grace_period_seconds").as_f64().unwrap_or(5.0),
            storage_path,
            storage_sync: crate::store::SyncMode::parse(get("storage_sync").as_str().unwrap_or(""))
                .unwrap_or(crate::store::SyncMode::Normal),
            max_frame_bytes: get("max_frame_bytes")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(64 << 20),
            max_inflight_requests: get("max_inflight_requests")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(1024),
            max_queued_requests: get("max_queued_requests")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(1024),
            max_output_queue_bytes: get("max_output_queue_bytes")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(64 << 20),
            trace_retention_days: get("trace_retention_days").as_u64().unwrap_or(30),
            trace_max_stored: get("trace_max_stored")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(10_000),
            otlp_endpoint: get("otlp_endpoint").as_str().map(str::to_string),
            otlp_headers: get("otlp_headers").as_str().map(str::to_string),
            otlp_timeout: ms(&get("otlp_timeout_ms"), 10_000),
            otlp_auto_export: get("otlp_auto_export").as_bool().unwrap_or(false),
            otlp_privacy_mode: get("otlp_privacy_mode")
                .as_str()
                .unwrap_or("metadata")
                .to_string(),
            trace_memory_bytes: get("trace_memory_bytes")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(DEFAULT_TRACE_MEMORY_BYTES),
            transcript_cache_bytes: get("transcript_cache_bytes")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(32 << 20),
            max_inflight_control_requests: get("max_inflight_control_requests")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(1024),
            plugin_max_output_bytes: get("plugin_max_output_bytes")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(1 << 20),
            llm_connect_timeout: ms(&get("llm_connect_timeout_ms"), 10_000),
            llm_idle_timeout: ms(&get("llm_idle_timeout_ms"), 300_000),
            llm_retry_base: ms(&get("llm_retry_base_ms"), 200),
            llm_retry_max: ms(&get("llm_retry_max_ms"), 5_000),
            llm_max_attempts: get("llm_max_attempts")
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(3),
            workspace_root: expand_paths(&Value::Array(vec![get("workspace_root")]), &self.home)
                .pop(),
            readable_roots: expand_paths(&get("readable_roots"), &self.home),
            writable_roots: expand_paths(&get("writable_roots"), &self.home),
            blocked_paths: {
                let mut b =
                    expand_paths(&serde_json::json!(keys::BUILTIN_BLOCKED_PATHS), &self.home);
                for p in expand_paths(&get("blocked_paths"), &self.home) {
                    if !b.contains(&p) {
                        b.push(p);
                    }
                }
                b
            },
            max_output_chars: get("max_output_chars")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(100_000),
            max_read_bytes: get("max_read_bytes").as_u64().unwrap_or(10 << 20),
            require_read_before_write: get("require_read_before_write").as_bool().unwrap_or(true),
            max_walk_entries: get("max_walk_entries")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(500_000),
            sandbox_enabled: get("sandbox_enabled").as_bool().unwrap_or(true),
            sandbox_network: get("sandbox_network").as_bool().unwrap_or(false),
            approval_host: get("approval_mode").as_str() == Some("host"),
            approval_pinned: self.managed.as_ref().is_some_and(|l| {
                l.values.get("approval_mode").and_then(Value::as_str) == Some("host")
            }),
            approval_timeout_ms: get("approval_timeout_ms").as_u64().unwrap_or(300_000),
            sandbox_writable_roots: expand_paths(&get("sandbox_writable_roots"), &self.home),
            sandbox_max_processes: get("sandbox_max_processes")
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(256),
            sandbox_warm_idle_ms: get("sandbox_warm_idle_ms").as_u64().unwrap_or(300_000),
            sandbox_warm_spares: get("sandbox_warm_spares")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(2),
            run_code: get("run_code").as_bool().unwrap_or(false),
            run_code_python: get("run_code_python").as_str().map(PathBuf::from),
            run_code_timeout_ms: get("run_code_timeout_ms").as_u64().unwrap_or(60_000),
            mcp_servers: crate::mcp::entry::parse_configured(&get("mcp_servers"))
                .unwrap_or_default(),
            mcp_startup_timeout_ms: get("mcp_startup_timeout_ms").as_u64().unwrap_or(30_000),
            mcp_direct_tool_limit: get("mcp_direct_tool_limit")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(40),
            mcp_max_tools: get("mcp_max_tools")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(1000),
            bash_timeout_ms: get("bash_timeout_ms").as_u64().unwrap_or(120_000),
            bash_max_timeout_ms: get("bash_max_timeout_ms").as_u64().unwrap_or(600_000),
            bash_max_output_bytes: get("bash_max_output_bytes")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(12_288),
            bash_raw_output: get("bash_raw_output").as_bool().unwrap_or(false),
            bash_max_sessions: get("bash_max_sessions")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(8),
            bash_session_buffer_bytes: get("bash_session_buffer_bytes")
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(1_048_576),
            bash_env_deny: string_list(&get("bash_env_deny")),
            bash_env_inherit: get("bash_env_inherit")
                .as_str()
                .and_then(crate::sandbox::secrets::EnvInherit::parse)
                .unwrap_or_default(),
            bash_env_allow: string_list(&get("bash_env_allow")),
        }
    }
}

/// The live configuration, shared by the App and by tools that read settings per call
/// (`config.set` replaces it; readers see the change on their next call).
#[derive(Clone)]
pub struct SharedConfig(std::sync::Arc<std::sync::RwLock<Live>>);

/// A configuration and its typed view, built once per change: tools read settings on every
/// call, and rebuilding them (a clone of every layer, a merge, path expansion) was ~3 % of a
/// model round's CPU.
struct Live {
    config: Config,
    settings: std::sync::Arc<Settings>,
}

impl Live {
    fn new(config: Config) -> Live {
        let settings = std::sync::Arc::new(config.settings());
        Live { config, settings }
    }
}

impl SharedConfig {
    pub fn new(config: Config) -> SharedConfig {
        SharedConfig(std::sync::Arc::new(std::sync::RwLock::new(Live::new(
            config,
        ))))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Live> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self) -> Config {
        self.read().config.clone()
    }

    pub fn settings(&self) -> std::sync::Arc<Settings> {
        self.read().settings.clone()
    }

    /// `f` on the current config, without cloning it.
    pub fn with<T>(&self, f: impl FnOnce(&Config) -> T) -> T {
        f(&self.read().config)
    }

    pub fn replace(&self, next: Config) {
        let next = Live::new(next);
        match self.0.write() {
            Ok(mut g) => *g = next,
            Err(e) => *e.into_inner() = next,
        }
    }
}

/// The typed view the rest of the process reads.
#[derive(Debug, Clone)]
pub struct Settings {
    pub log_level: String,
    pub grace_period: Duration,
    pub grace_period_seconds: f64,
    pub storage_path: PathBuf,
    /// `storage_sync`: SQLite `synchronous` level for the store.
    pub storage_sync: crate::store::SyncMode,
    pub max_frame_bytes: usize,
    pub max_inflight_requests: usize,
    /// Requests waiting for an in-flight slot before stdin stops being read.
    pub max_queued_requests: usize,
    /// Frames waiting for the host to read stdout before stdin stops being read.
    pub max_output_queue_bytes: usize,
    /// Stored-trace retention: age in days and count.
    pub trace_retention_days: u64,
    pub trace_max_stored: usize,
    /// `trace.export`'s default collector, its headers (`name=value,…`) and wait.
    pub otlp_endpoint: Option<String>,
    pub otlp_headers: Option<String>,
    pub otlp_timeout: Duration,
    /// Export each finished turn's trace (`otlp_auto_export`) with `otlp_privacy_mode`.
    pub otlp_auto_export: bool,
    pub otlp_privacy_mode: String,
    /// Finished, stored traces kept in memory (`trace_memory_bytes`).
    pub trace_memory_bytes: usize,
    /// Recent transcripts kept in memory (`transcript_cache_bytes`).
    pub transcript_cache_bytes: usize,
    /// Control methods running at once (their own slots, apart from the others').
    pub max_inflight_control_requests: usize,
    pub plugin_max_output_bytes: usize,
    /// Model providers (`llm_*` keys).
    pub llm_connect_timeout: Duration,
    pub llm_idle_timeout: Duration,
    pub llm_retry_base: Duration,
    pub llm_retry_max: Duration,
    pub llm_max_attempts: u32,
    /// `workspace_root`: the workspace of a call that names none (`tools::fs::root`).
    pub workspace_root: Option<PathBuf>,
    /// File-tool roots beyond the workspace (`~/` and `$OUTRIGGER_HOME` expanded).
    pub readable_roots: Vec<PathBuf>,
    pub writable_roots: Vec<PathBuf>,
    pub blocked_paths: Vec<PathBuf>,
    pub max_output_chars: usize,
    pub max_read_bytes: u64,
    pub require_read_before_write: bool,
    /// Directory entries a `glob`/`grep` walk visits before stopping.
    pub max_walk_entries: usize,
    /// Sandbox launcher and bash (see `docs/configuration.md`).
    pub sandbox_enabled: bool,
    pub sandbox_network: bool,
    pub sandbox_writable_roots: Vec<PathBuf>,
    /// `approval_mode = host`.
    pub approval_host: bool,
    /// The managed config pins `approval_mode = host`: a turn cannot ask for `auto`.
    pub approval_pinned: bool,
    pub approval_timeout_ms: u64,
    /// Processes one command may have at once (cgroup `pids.max` or `RLIMIT_NPROC`).
    pub sandbox_max_processes: u32,
    /// `sandbox_warm_idle_ms`: 0 = no warm spare.
    pub sandbox_warm_idle_ms: u64,
    /// `sandbox_warm_spares`: how many spares wait at once; 0 = none.
    pub sandbox_warm_spares: usize,
    pub run_code: bool,
    pub run_code_python: Option<PathBuf>,
    pub run_code_timeout_ms: u64,
    /// `mcp_servers`, parsed (the config check already refused a malformed list).
    pub mcp_servers: Vec<crate::mcp::entry::ServerEntry>,
    pub mcp_startup_timeout_ms: u64,
    pub mcp_direct_tool_limit: usize,
    pub mcp_max_tools: usize,
    pub bash_timeout_ms: u64,
    /// The ceiling of a call's `timeoutMs` (and of the default).
    pub bash_max_timeout_ms: u64,
    pub bash_max_output_bytes: usize,
    pub bash_raw_output: bool,
    /// Live `bash_session` terminals per chat.
    pub bash_max_sessions: usize,
    /// Output a `bash_session` buffers between calls (the oldest is dropped past it).
    pub bash_session_buffer_bytes: usize,
    /// Patterns removed besides `sandbox::secrets::SECRET_ENV_PATTERNS`.
    pub bash_env_deny: Vec<String>,
    pub bash_env_allow: Vec<String>,
    pub bash_env_inherit: crate::sandbox::secrets::EnvInherit,
}

/// A milliseconds key as a `Duration`.
fn ms(v: &Value, default: u64) -> Duration {
    Duration::from_millis(v.as_u64().unwrap_or(default))
}

fn string_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// A path-list value with a leading `~/` (the user's `HOME`) and `$OUTRIGGER_HOME` expanded.
fn expand_paths(v: &Value, home: &Path) -> Vec<PathBuf> {
    let user = std::env::var_os("HOME").map(PathBuf::from);
    let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
    items
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|s| {
            if let Some(rest) = s.strip_prefix("$OUTRIGGER_HOME") {
                Some(home.join(rest.trim_start_matches('/')))
            } else if s == "~" || s.starts_with("~/") {
                // No HOME: a `~` entry cannot name anything, so it is dropped.
                user.as_ref()
                    .map(|h| h.join(s[1..].trim_start_matches('/')))
            } else {
                Some(PathBuf::from(s))
            }
        })
        .collect()
}

/// Reads a JSON object file. A missing optional file is `None`; a missing required one fails.
fn read_json_object(
    path: &Path,
    required: bool,
) -> Result<Option<Map<String, Value>>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => return Ok(None),
        Err(e) => {
            return Err(ConfigError::Unreadable {
                path: path.to_path_buf(),
                msg: e.to_string(),
            });
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err(ConfigError::NotObject {
            path: path.to_path_buf(),
            what: "the top level".into(),
        }),
        Err(e) => Err(ConfigError::Malformed {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            msg: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inputs(home: &Path) -> Inputs {
        Inputs {
            home: home.to_path_buf(),
            ..Default::default()
        }
    }

    #[test]
    fn env_strings_are_coerced_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let mut i = inputs(dir.path());
        i.env.push(("max_frame_bytes".into(), "4096".into()));
        i.env.push(("log_level".into(), "debug".into()));
        let c = Config::load(&i).unwrap();
        let m = c.merged();
        assert_eq!(m["max_frame_bytes"].value, json!(4096));
        assert_eq!(m["log_level"].value, json!("DEBUG"));
        assert_eq!(m["log_level"].source, Source::Env);

        i.env = vec![("max_frame_bytes".into(), "lots".into())];
        let e = Config::load(&i).unwrap_err().to_string();
        assert!(
            e.contains("max_frame_bytes") && e.contains("env") && e.contains("integer"),
            "{e}"
        );
    }

    #[test]
    fn ceiling_is_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let mut i = inputs(dir.path());
        i.env
            .push(("max_frame_bytes".into(), (2i64 << 30).to_string()));
        assert!(Config::load(&i).is_err());
    }

    #[test]
    fn overrides_refuse_managed_pins() {
        let dir = tempfile::tempdir().unwrap();
        let managed = dir.path().join("managed.json");
        std::fs::write(&managed, r#"{"log_level":"ERROR"}"#).unwrap();
        let mut i = inputs(dir.path());
        i.managed = Some(managed);
        let c = Config::load(&i).unwrap();
        let mut o = Map::new();
        o.insert("log_level".into(), json!("DEBUG"));
        assert!(matches!(
            c.with_overrides(&o),
            Err(ConfigError::Pinned { .. })
        ));
        o.clear();
        o.insert("grace_period_seconds".into(), json!(1.5));
        let c2 = c.with_overrides(&o).unwrap();
        assert_eq!(c2.merged()["grace_period_seconds"].source, Source::Override);
        assert_eq!(c2.settings().grace_period, Duration::from_millis(1500));
    }

    #[test]
    fn every_key_is_documented() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/configuration.md"
        ))
        .expect("docs/configuration.md exists");
        for k in KEYS {
            assert!(
                doc.contains(&format!("`{}`", k.name)),
                "docs/configuration.md does not document `{}`",
                k.name
            );
        }
    }
}
