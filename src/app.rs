//! The composition root: everything a handler can reach, built once at boot.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use std::sync::Arc;

use tokio::sync::OnceCell;

use crate::config::{Config, Settings, SharedConfig};
use crate::lifecycle::Lifecycle;
use crate::logging::LogControl;
use crate::protocol::{HealthCheck, PROTOCOL_VERSION, SidecarHealth, VERSION};
use crate::rpc::{Out, Reverse};
use crate::store::Store;
use crate::tools::Router;
use crate::tools::plugins::PluginRegistry;

pub struct App {
    pub started: Instant,
    pub config: SharedConfig,
    pub log: LogControl,
    pub out: Out,
    pub reverse: Arc<Reverse>,
    pub lifecycle: Arc<Lifecycle>,
    pub router: Arc<Router>,
    pub plugins: PluginRegistry,
    /// The durable store (sessions, history records); opened, with its lease, before ready.
    pub store: Arc<Store>,
    /// The CoreLoop's handles, live streams and traces (`agent.chat.*`, `trace.fetch`).
    pub agent: Arc<crate::agent::Agent>,
    /// The file tools' shared state (resume re-seeds its read state).
    pub fs: Arc<crate::tools::fs::FsEnv>,
    /// Test and diagnostic methods (`debug.*`), on with `OUTRIGGER_DEBUG_METHODS=1`.
    pub debug_methods: bool,
    /// In-flight slots, the waiting queue and cancel-by-id of requests that are not control
    /// methods, and the control methods' own slots (`max_inflight_requests`,
    /// `max_queued_requests`, `max_inflight_control_requests`, `request.cancel`).
    pub requests: crate::rpc::dispatch::Requests,
    python: OnceCell<Option<String>>,
    pid: u32,
}

impl App {
    pub fn new(
        config: SharedConfig,
        log: LogControl,
        out: Out,
        lifecycle: Lifecycle,
        plugins: PluginRegistry,
        store: Arc<Store>,
        fs: Arc<crate::tools::fs::FsEnv>,
    ) -> App {
        let settings = config.settings();
        let requests = crate::rpc::dispatch::Requests::new(
            settings.max_inflight_requests,
            settings.max_queued_requests,
            settings.max_inflight_control_requests,
        );
        let reverse = Arc::new(Reverse::new(out.clone()));
        let lifecycle = Arc::new(lifecycle);
        let agent = Arc::new(crate::agent::Agent::new(
            store.clone(),
            plugins.router().clone(),
            lifecycle.clone(),
            config.clone(),
            fs.clone(),
            reverse.clone(),
            Arc::new(crate::rpc::events::FrameSink(out.clone())),
        ));
        App {
            router: plugins.router().clone(),
            plugins,
            store,
            agent,
            fs,
            requests,
            started: Instant::now(),
            config,
            log,
            reverse,
            out,
            lifecycle,
            debug_methods: std::env::var("OUTRIGGER_DEBUG_METHODS").is_ok_and(|v| v == "1"),
            python: OnceCell::new(),
            pid: std::process::id(),
        }
    }

    pub fn settings(&self) -> Arc<Settings> {
        self.config.settings()
    }

    pub fn config(&self) -> Config {
        self.config.get()
    }

    pub fn replace_config(&self, next: Config) {
        self.config.replace(next);
    }

    /// The Python that `run_code` will use, probed once (never before ready).
    pub async fn python_version(&self) -> Option<String> {
        let exe = self
            .settings()
            .run_code_python
            .clone()
            .unwrap_or_else(|| "python3".into());
        self.python.get_or_init(|| probe_python(exe)).await.clone()
    }

    /// The health snapshot. `python_version` is whatever is cached: the probe is never
    /// awaited here, so the ready marker costs nothing.
    pub fn health(&self) -> SidecarHealth {
        let mut checks = BTreeMap::new();
        checks.insert(
            "engine".into(),
            HealthCheck {
                status: "ok".into(),
                message: Some("rust".into()),
            },
        );
        SidecarHealth {
            status: "ok".into(),
            version: VERSION.into(),
            protocol_version: PROTOCOL_VERSION.into(),
            uptime_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            pid: self.pid,
            python_version: self.python.get().cloned().flatten(),
            runtime: "rust".into(),
            rust_version: env!("OUTRIGGER_RUSTC_VERSION").into(),
            platform: platform().into(),
            loaded_providers: Vec::new(),
            loaded_tools: self.router.len(),
            active_traces: self.agent.traces.active(),
            checks,
        }
    }
}

/// `linux-x86_64` style, as the reference reports it; computed once.
pub fn platform() -> &'static str {
    static PLATFORM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PLATFORM.get_or_init(|| {
        let os = match std::env::consts::OS {
            "macos" => "darwin",
            other => other,
        };
        let arch = match std::env::consts::ARCH {
            "aarch64" => "arm64",
            other => other,
        };
        format!("{os}-{arch}")
    })
}

/// Asks `exe` (`run_code_python`, default `python3`) for its version; `None` when absent or
/// silent.
async fn probe_python(exe: std::path::PathBuf) -> Option<String> {
    let child = tokio::process::Command::new(exe)
        .args(["-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(5), child).await {
        Ok(Ok(out)) if out.status.success() => {
            let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
            (!v.is_empty()).then_some(v)
        }
        _ => None,
    }
}
