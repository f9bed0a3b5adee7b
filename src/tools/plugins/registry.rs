//! Loaded plugins and their lifecycle: each manifest's tools are registered on the router as
//! one unit (all or none), and can be disabled, enabled and reloaded without a restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Map, Value};

use super::PluginError;
use super::exec::run_sandboxed;
use super::manifest::{PluginManifest, PluginToolSpec, load_dir_then, load_file};
use crate::tools::router::{Built, RegisterError, Registration, Router};
use crate::tools::{
    Exposure, Schema, Tool, ToolContext, ToolFuture, ToolMode, ToolResult, classify,
};

/// A plugin row as hosts see it (`plugin.list`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PluginRow {
    pub name: String,
    /// The manifest file.
    pub origin: String,
    pub tools: Vec<String>,
    pub enabled: bool,
    pub reloadable: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PluginOpError {
    #[error("unknown plugin '{name}'; loaded plugins: {}", if loaded.is_empty() { "none".to_string() } else { loaded.join(", ") })]
    Unknown { name: String, loaded: Vec<String> },
    #[error("plugin '{0}' is already enabled")]
    AlreadyEnabled(String),
    #[error("plugin '{0}' is already disabled")]
    AlreadyDisabled(String),
    #[error("{0}")]
    Load(#[from] PluginError),
    #[error("plugin '{plugin}' ({path}) cannot register tool '{tool}': {source}")]
    Conflict {
        plugin: String,
        path: String,
        tool: String,
        source: RegisterError,
    },
    #[error("plugin '{name}' is declared twice: by {first} and by {second}; rename one of them")]
    Duplicate {
        name: String,
        first: String,
        second: String,
    },
}

struct Loaded {
    manifest: PluginManifest,
    enabled: bool,
}

pub struct PluginRegistry {
    router: Arc<Router>,
    max_capture: usize,
    plugins: Mutex<BTreeMap<String, Loaded>>,
}

/// A manifest-declared tool: every call runs the executable once.
struct PluginTool {
    spec: Arc<PluginToolSpec>,
    max_capture: usize,
}

impl Tool for PluginTool {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn description(&self) -> &str {
        &self.spec.description
    }
    fn parameters(&self) -> Value {
        self.spec.parameters.value()
    }
    fn schema(&self) -> Schema {
        self.spec.parameters.clone()
    }
    fn mode(&self) -> ToolMode {
        self.spec
            .mode
            .as_deref()
            .and_then(ToolMode::parse)
            .unwrap_or_else(|| classify(&self.spec.name))
    }
    fn exposure(&self) -> Exposure {
        self.spec
            .exposure
            .as_deref()
            .and_then(Exposure::parse)
            .unwrap_or(Exposure::Direct)
    }
    fn call(self: Arc<Self>, ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move {
            let (outcome, sandbox) = run_sandboxed(
                &self.spec,
                &Value::Object(args),
                &ctx.workspace_root,
                &ctx.cancel,
                ctx.lifecycle.as_deref(),
                self.max_capture,
                ctx.exec_sandbox.as_ref(),
            )
            .await;
            let json = outcome.to_tool_result(&self.spec.name);
            let result: ToolResult = serde_json::from_value(json).unwrap_or_else(|e| {
                ToolResult::recoverable(format!("plugin result could not be read: {e}"))
            });
            // Every sandboxed result says what it ran under.
            match sandbox {
                Some(m) => result.with_data("_sandbox", serde_json::json!(m)),
                None => result,
            }
        })
    }
}

/// A manifest's tool that could not be registered.
fn conflict(m: &PluginManifest, source: RegisterError) -> PluginOpError {
    PluginOpError::Conflict {
        plugin: m.name.clone(),
        path: m.path.display().to_string(),
        tool: failing_tool(&source),
        source,
    }
}

fn failing_tool(e: &RegisterError) -> String {
    match e {
        RegisterError::Conflict { name, .. } | RegisterError::InvalidName(name) => name.clone(),
    }
}

impl PluginRegistry {
    pub fn new(router: Arc<Router>, max_capture: usize) -> PluginRegistry {
        PluginRegistry {
            router,
            max_capture,
            plugins: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn router(&self) -> &Arc<Router> {
        &self.router
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Loaded>> {
        self.plugins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Loads every manifest of `dir` and registers its tools. `required`: a missing directory
    /// is an error (an explicitly configured one); otherwise it is skipped. `cache_root`: where
    /// checked manifests are kept between boots.
    pub fn load_dir(
        &self,
        dir: &Path,
        required: bool,
        cache_root: Option<&Path>,
    ) -> Result<(), PluginOpError> {
        if !required && !dir.exists() {
            return Ok(());
        }
        let build = |m: &PluginManifest| Router::build(self.registrations(m));
        for (manifest, built) in load_dir_then(dir, cache_root, &build)? {
            self.add(manifest, built)?;
        }
        Ok(())
    }

    /// Loads the configured plugin directories: `OUTRIGGER_PLUGIN_DIR` (must exist when set)
    /// and `<home>/plugins/` (optional). The same directory named both ways loads once.
    /// Checked manifests are kept in `<home>/cache/plugins/`.
    pub fn load_configured(&self, home: &Path) -> Result<(), PluginOpError> {
        let home_dir = home.join("plugins");
        let cache = home.join("cache").join("plugins");
        let cache = Some(cache.as_path());
        let explicit = std::env::var_os("OUTRIGGER_PLUGIN_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from);
        if let Some(dir) = &explicit {
            self.load_dir(dir, true, cache)?;
        }
        let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
            (Ok(x), Ok(y)) => x == y,
            _ => a == b,
        };
        if explicit.as_deref().is_some_and(|d| same(d, &home_dir)) {
            return Ok(());
        }
        self.load_dir(&home_dir, false, cache)
    }

    /// Registers a loaded manifest's tools (`built` from [`Router::build`]).
    fn add(
        &self,
        manifest: PluginManifest,
        built: Result<Built, RegisterError>,
    ) -> Result<(), PluginOpError> {
        let mut plugins = self.lock();
        if let Some(existing) = plugins.get(&manifest.name) {
            return Err(PluginOpError::Duplicate {
                name: manifest.name.clone(),
                first: existing.manifest.path.display().to_string(),
                second: manifest.path.display().to_string(),
            });
        }
        built
            .and_then(|b| self.router.swap_built(&[], b))
            .map_err(|source| conflict(&manifest, source))?;
        plugins.insert(
            manifest.name.clone(),
            Loaded {
                manifest,
                enabled: true,
            },
        );
        Ok(())
    }

    fn registrations(&self, manifest: &PluginManifest) -> Vec<Registration> {
        manifest
            .tools
            .iter()
            .map(|spec| {
                let mut reg = Registration::new(Arc::new(PluginTool {
                    spec: spec.clone(),
                    max_capture: self.max_capture,
                }));
                reg.plugin = Some(manifest.name.clone());
                reg
            })
            .collect()
    }

    /// Swaps `old`'s tools for `new`'s in one step (either may be absent): all or nothing.
    fn swap(
        &self,
        old: Option<&PluginManifest>,
        new: Option<&PluginManifest>,
    ) -> Result<(), PluginOpError> {
        let remove: Vec<String> = old
            .map(|m| m.tools.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default();
        let add = new.map(|m| self.registrations(m)).unwrap_or_default();
        self.router
            .swap(&remove, add)
            .map_err(|source| match new.or(old) {
                Some(m) => conflict(m, source),
                None => PluginOpError::Conflict {
                    plugin: String::new(),
                    path: String::new(),
                    tool: failing_tool(&source),
                    source,
                },
            })
    }

    fn row(loaded: &Loaded) -> PluginRow {
        PluginRow {
            name: loaded.manifest.name.clone(),
            origin: loaded.manifest.path.display().to_string(),
            tools: loaded
                .manifest
                .tools
                .iter()
                .map(|t| t.name.clone())
                .collect(),
            enabled: loaded.enabled,
            reloadable: true,
        }
    }

    /// No plugin is loaded.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub fn list(&self) -> Vec<PluginRow> {
        self.lock().values().map(Self::row).collect()
    }

    fn with_plugin<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut Loaded) -> Result<T, PluginOpError>,
    ) -> Result<T, PluginOpError> {
        let mut plugins = self.lock();
        let loaded_names: Vec<String> = plugins.keys().cloned().collect();
        match plugins.get_mut(name) {
            Some(p) => f(p),
            None => Err(PluginOpError::Unknown {
                name: name.to_string(),
                loaded: loaded_names,
            }),
        }
    }

    pub fn enable(&self, name: &str) -> Result<PluginRow, PluginOpError> {
        self.with_plugin(name, |p| {
            if p.enabled {
                return Err(PluginOpError::AlreadyEnabled(name.to_string()));
            }
            self.swap(None, Some(&p.manifest))?;
            p.enabled = true;
            Ok(Self::row(p))
        })
    }

    pub fn disable(&self, name: &str) -> Result<PluginRow, PluginOpError> {
        self.with_plugin(name, |p| {
            if !p.enabled {
                return Err(PluginOpError::AlreadyDisabled(name.to_string()));
            }
            self.swap(Some(&p.manifest), None)?;
            p.enabled = false;
            Ok(Self::row(p))
        })
    }

    /// Re-reads the manifest and swaps the registrations. On any failure the plugin keeps
    /// its previous tools.
    pub fn reload(&self, name: &str) -> Result<PluginRow, PluginOpError> {
        self.with_plugin(name, |p| {
            let path: PathBuf = p.manifest.path.clone();
            let mut fresh = load_file(&path)?;
            // The registry key stays the plugin's name even if the manifest renamed it.
            fresh.name = p.manifest.name.clone();
            if p.enabled {
                self.swap(Some(&p.manifest), Some(&fresh))?;
            }
            p.manifest = fresh;
            Ok(Self::row(p))
        })
    }
}
