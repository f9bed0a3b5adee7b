//! The config's `mcp_servers`: started together on first use (the first turn, or `mcp.list
//! {start: true}`), kept for the life of the sidecar with their tools on the shared router,
//! restarted once after a crash, listed with their state by `mcp.list`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::protocol::tools::{McpServerInfo, McpToolInfo};
use tokio_util::sync::CancellationToken;

use super::McpSettings;
use super::client::{ConnectCtx, McpClient};
use super::entry::{ServerEntry, Transport};
use super::mount::{self, Failure, Mounted};
use crate::lifecycle::Lifecycle;
use crate::tools::Router;

/// Restarts a configured server gets after crashes, over the sidecar's life.
pub const MAX_RESTARTS: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not started yet (no turn has needed it).
    Idle,
    Starting,
    Running,
    /// Did not start, or crashed past its restart.
    Failed,
    /// The sidecar is shutting down.
    Closed,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Starting => "starting",
            State::Running => "running",
            State::Failed => "failed",
            State::Closed => "closed",
        }
    }
}

struct Slot {
    entry: ServerEntry,
    state: State,
    restarts: u32,
    error: Option<String>,
    mounted: Option<Mounted>,
}

/// Everything configured servers need to (re)start, fixed at boot.
pub struct Configured {
    slots: Mutex<Vec<Slot>>,
    /// Serialises first starts: two turns arriving together start the servers once.
    start_lock: tokio::sync::Mutex<()>,
    router: Arc<Router>,
    lifecycle: Arc<Lifecycle>,
    launcher: Option<PathBuf>,
    cwd: PathBuf,
    settings: Arc<dyn Fn() -> McpSettings + Send + Sync>,
}

impl Configured {
    pub fn new(
        entries: Vec<ServerEntry>,
        router: Arc<Router>,
        lifecycle: Arc<Lifecycle>,
        launcher: Option<PathBuf>,
        cwd: PathBuf,
        settings: Arc<dyn Fn() -> McpSettings + Send + Sync>,
    ) -> Arc<Configured> {
        let slots = entries
            .into_iter()
            .map(|entry| Slot {
                entry,
                state: State::Idle,
                restarts: 0,
                error: None,
                mounted: None,
            })
            .collect();
        Arc::new(Configured {
            slots: Mutex::new(slots),
            start_lock: tokio::sync::Mutex::new(()),
            router,
            lifecycle,
            launcher,
            cwd,
            settings,
        })
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_empty(&self) -> bool {
        self.slots().is_empty()
    }

    /// Starts the servers not started yet (in parallel); returns the ones that failed this
    /// time, for the turn's notices. Servers that failed before are not retried. The start
    /// belongs to the sidecar, not to the caller: when `cancel` fires (the turn was cancelled)
    /// the caller stops waiting and the servers go on starting.
    pub async fn ensure_started(self: &Arc<Self>, cancel: &CancellationToken) -> Vec<Failure> {
        // Servers another caller is starting are waited for (on the start lock) like idle ones.
        let pending = self
            .slots()
            .iter()
            .any(|s| matches!(s.state, State::Idle | State::Starting));
        if !pending {
            return Vec::new();
        }
        let me = self.clone();
        let start = tokio::spawn(async move {
            let life = me.lifecycle.token();
            me.start_idle(&life).await
        });
        tokio::select! {
            r = start => r.unwrap_or_default(),
            _ = cancel.cancelled() => Vec::new(),
        }
    }

    async fn start_idle(self: &Arc<Self>, cancel: &CancellationToken) -> Vec<Failure> {
        let _guard = self.start_lock.lock().await;
        let idle: Vec<ServerEntry> = {
            let mut slots = self.slots();
            slots
                .iter_mut()
                .filter(|s| s.state == State::Idle)
                .map(|s| {
                    s.state = State::Starting;
                    s.entry.clone()
                })
                .collect()
        };
        if idle.is_empty() {
            return Vec::new();
        }
        let settings = (self.settings)();
        let ctx = self.ctx(&settings, cancel);
        let (started, mut failures) = mount::start_all(&idle, &ctx, settings.max_tools).await;
        // The exposure counts every configured server's tools, running or starting now.
        let running: usize = self
            .slots()
            .iter()
            .filter_map(|s| s.mounted.as_ref().map(|m| m.tools.len()))
            .sum();
        let count = running + started.iter().map(|s| s.tools.len()).sum::<usize>();
        let exposure = mount::exposure_for(count, settings.direct_limit);
        let mounted = mount::register(&self.router, started, exposure, &mut failures).await;
        for m in mounted {
            self.watch(&m);
            let mut slots = self.slots();
            if let Some(s) = slots.iter_mut().find(|s| *s.entry.name == *m.name) {
                // `error` keeps how it last crashed (mcp.list reports it after a restart).
                s.state = State::Running;
                s.mounted = Some(m);
            }
        }
        let mut slots = self.slots();
        for f in &failures {
            if let Some(s) = slots.iter_mut().find(|s| s.entry.name == f.name) {
                s.state = State::Failed;
                s.error = Some(f.error.clone());
            }
        }
        failures
    }

    fn ctx<'a>(&'a self, settings: &McpSettings, cancel: &'a CancellationToken) -> ConnectCtx<'a> {
        ConnectCtx {
            cwd: &self.cwd,
            lifecycle: Some(self.lifecycle.clone()),
            launcher: self.launcher.clone(),
            startup_timeout: settings.startup_timeout,
            cancel,
        }
    }

    /// Restarts the server once when its connection ends on its own.
    fn watch(self: &Arc<Self>, m: &Mounted) {
        let me = Arc::downgrade(self);
        let client = m.client.clone();
        let name = m.name.clone();
        tokio::spawn(async move {
            let how = client.wait_exit().await;
            let Some(me) = me.upgrade() else { return };
            me.crashed(&name, &client, how).await;
        });
    }

    async fn crashed(self: &Arc<Self>, name: &str, client: &Arc<dyn McpClient>, how: String) {
        let restart = {
            let mut slots = self.slots();
            let Some(s) = slots.iter_mut().find(|s| *s.entry.name == *name) else {
                return;
            };
            // Only the connection this slot holds now: a stale watcher never acts.
            let current = s
                .mounted
                .as_ref()
                .is_some_and(|m| Arc::ptr_eq(&m.client, client));
            if !current || s.state != State::Running {
                return;
            }
            let m = s.mounted.take();
            if let Some(m) = &m {
                self.router.swap(&m.tools, Vec::new()).ok();
            }
            let stderr = client.stderr_tail();
            let mut error = format!("the server {how}");
            if !stderr.trim().is_empty() {
                error.push_str(&format!("; its stderr ends with: {}", stderr.trim_end()));
            }
            tracing::warn!("mcp {name}: {error}");
            if s.restarts < MAX_RESTARTS {
                s.restarts += 1;
                s.state = State::Idle;
                s.error = Some(error);
                true
            } else {
                s.state = State::Failed;
                s.error = Some(format!(
                    "{error} (already restarted {MAX_RESTARTS} time(s))"
                ));
                false
            }
        };
        if restart && !self.lifecycle.token().is_cancelled() {
            let cancel = self.lifecycle.token();
            for f in self.start_idle(&cancel).await {
                tracing::warn!("mcp {}: restart failed: {}", f.name, f.error);
            }
        }
    }

    /// Between rounds: running servers that announced a changed tool list are re-listed and
    /// their tools swapped on the shared router.
    pub async fn refresh(&self) {
        let changed: Vec<(Arc<str>, Arc<dyn McpClient>)> = self
            .slots()
            .iter()
            .filter_map(|s| s.mounted.as_ref())
            .filter(|m| m.client.take_tools_changed())
            .map(|m| (m.name.clone(), m.client.clone()))
            .collect();
        if changed.is_empty() {
            return;
        }
        let settings = (self.settings)();
        for (name, client) in changed {
            let tools = match client.list_tools(settings.max_tools).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("mcp {name}: tools/list after list_changed failed: {e}");
                    continue;
                }
            };
            let mut slots = self.slots();
            let Some(m) = slots
                .iter_mut()
                .filter_map(|s| s.mounted.as_mut())
                .find(|m| Arc::ptr_eq(&m.client, &client))
            else {
                continue;
            };
            let exposure = self
                .router
                .get(m.tools.first().map_or("", String::as_str))
                .map_or(crate::tools::Exposure::Direct, |e| e.exposure);
            let regs = mount::registrations(&name, &client, &tools, exposure);
            let names: Vec<String> = regs.iter().map(|r| r.tool.name().to_string()).collect();
            match self.router.swap(&m.tools, regs) {
                Ok(()) => m.tools = names,
                Err(e) => tracing::warn!("mcp {name}: refreshed tools not registered: {e}"),
            }
        }
    }

    /// `mcp.list`: each server with its transport, state, restarts, last error and tools.
    pub fn list(&self) -> Vec<McpServerInfo> {
        self.slots()
            .iter()
            .map(|s| {
                let (transport, target) = match &s.entry.transport {
                    Transport::Stdio { command, .. } => ("stdio", command.clone()),
                    Transport::Http { url, .. } => ("http", url.clone()),
                };
                let tools = s
                    .mounted
                    .as_ref()
                    .map(|m| {
                        m.tools
                            .iter()
                            .filter_map(|n| self.router.get(n))
                            .map(|e| McpToolInfo {
                                name: e.name.clone(),
                                description: e.description.clone(),
                                mode: e.mode,
                                exposure: e.exposure,
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                McpServerInfo {
                    name: s.entry.name.clone(),
                    transport: transport.into(),
                    target,
                    state: s.state.as_str().into(),
                    restarts: s.restarts,
                    error: s.error.clone(),
                    tools,
                }
            })
            .collect()
    }

    /// Closes every running server (shutdown).
    pub async fn close_all(&self) {
        let clients: Vec<Arc<dyn McpClient>> = {
            let mut slots = self.slots();
            slots
                .iter_mut()
                .filter_map(|s| {
                    s.state = State::Closed;
                    s.mounted.take().map(|m| m.client)
                })
                .collect()
        };
        futures_util::future::join_all(clients.iter().map(|c| c.close())).await;
    }
}
