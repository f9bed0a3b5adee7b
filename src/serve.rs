//! Serve mode: boot, the ready handshake, signals, the parent watch and the shutdown ladder,
//! around the server core (`rpc::server`) reading stdin.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::config::{Config, SharedConfig};
use crate::lifecycle::{Cause, Lifecycle};
use crate::logging::LogControl;
use crate::protocol::{
    LifecycleReady, LifecycleShutdown, ListenInfo, PROTOCOL_VERSION, ShutdownReason, VERSION,
};
use crate::rpc::Out;
use crate::sandbox::Sandbox;
use crate::tools::Router;
use crate::tools::fs::FsEnv;
use crate::tools::plugins::PluginRegistry;

/// How often we look for a parent that went away without closing our stdin.
/// How long after ready the background warm-ups start.
const WARMUP_DELAY: Duration = Duration::from_millis(100);
const PARENT_POLL: Duration = Duration::from_millis(500);

/// The built-in tools every front end serves: the file tools and `bash`.
pub struct Builtins {
    pub router: Arc<Router>,
    pub fs_env: Arc<FsEnv>,
    /// The installed sandbox service `bash` runs commands through.
    pub sandbox: Arc<Sandbox>,
}

/// A router with the file tools (`read_file` … `grep`) and `bash`, and the sandbox service
/// installed, as the sidecar and `outrigger mcp` both serve them. Tools read settings per call
/// from `shared`; `config` names the credential paths the sandbox always hides.
pub fn builtin_tools(config: &Config, shared: &SharedConfig) -> Builtins {
    let router = Router::new();
    let fs_env = FsEnv::new(Arc::new({
        let shared = shared.clone();
        move || shared.settings()
    }));
    crate::tools::fs::register(&router, &fs_env);
    // The sandbox service (probed lazily) and `bash`.
    let sandbox = {
        let shared = shared.clone();
        let hidden = vec![
            config.home().join("secrets"),
            config.home().join("credentials"),
        ];
        crate::sandbox::install(Sandbox::new(
            // Our own image, even if the file on disk is replaced while we run.
            Some(std::path::PathBuf::from("/proc/self/exe")),
            hidden,
            Some(shared),
        ))
    };
    let bash = crate::tools::bash::BashTool::new(sandbox.clone());
    if let Err(e) = router.register(crate::tools::router::Registration::new(Arc::new(bash))) {
        tracing::error!("cannot register bash: {e}");
    }
    crate::tools::bash::session::register(&router, sandbox.clone());
    // web_fetch / web_search: a bad web setting leaves them out (logged), never stops boot.
    let merged = config.merged();
    crate::tools::web::register(&router, &|k: &str| {
        merged
            .get(k)
            .map(|r| r.value.clone())
            .unwrap_or(serde_json::Value::Null)
    });
    Builtins {
        router,
        fs_env,
        sandbox,
    }
}

/// `run_code` on `router`, reading its settings from the shared config per call.
pub fn run_code_tool(
    shared: &SharedConfig,
    router: &Arc<Router>,
) -> crate::tools::run_code::RunCode {
    let shared = shared.clone();
    crate::tools::run_code::RunCode::new(
        Arc::new(move || crate::tools::run_code::Settings::from_config(&shared.settings())),
        router,
    )
}

pub fn run(config: Config, log: LogControl, quiet_ready: bool) -> i32 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("outrigger-worker")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return 70;
        }
    };
    let settings = config.settings();
    // The store's lease is taken at boot so a second process on the same file refuses to
    // start (exit 2) instead of failing later; opening costs about a millisecond.
    let store = match crate::store::Store::open(&settings.storage_path, settings.storage_sync) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("outrigger: {e}");
            return 2;
        }
    };
    // Built-in file tools and bash register before plugins so a plugin cannot take their
    // names. They read settings per call from the shared config (`config.set` changes it at
    // runtime).
    let shared = SharedConfig::new(config.clone());
    let Builtins {
        router,
        fs_env,
        sandbox,
    } = builtin_tools(&config, &shared);
    let todo = crate::tools::router::Registration::new(Arc::new(crate::tools::todo::TodoWrite));
    if let Err(e) = router.register(todo) {
        tracing::error!("cannot register todo_write: {e}");
    }
    // run_code (opt-in): dropped again after ready if the interpreter probe finds no Python.
    let run_code_on = settings.run_code;
    if run_code_on {
        let reg =
            crate::tools::router::Registration::new(Arc::new(run_code_tool(&shared, &router)));
        if let Err(e) = router.register(reg) {
            tracing::error!("cannot register run_code: {e}");
        }
    }
    let shared_router = router.clone();
    // Plugins load before ready: a broken one must stop boot, not vanish silently.
    let plugins = PluginRegistry::new(router, settings.plugin_max_output_bytes);
    if let Err(e) = plugins.load_configured(config.home()) {
        eprintln!("outrigger: plugin error: {e}");
        return 2;
    }
    if !plugins.is_empty() {
        // The parser threads' TOML trees were freed in their arenas' midst; give those pages
        // back before serving (~0.8 MiB with 10,000 tools).
        crate::memory::trim();
    }
    let (out, writer) = Out::start(std::io::stdout()); // stdout-ok: the one frame writer
    let (lifecycle, mut stop_rx) = Lifecycle::new();
    let app = Arc::new(App::new(
        shared,
        log,
        out,
        lifecycle,
        plugins,
        store,
        fs_env.clone(),
    ));
    let parent = nix::unistd::getppid();

    // Signal handlers go in before ready so a SIGTERM right after it is never lost.
    let signals = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        )
    });
    let (mut sigterm, mut sigint) = match signals {
        (Ok(t), Ok(i)) => (t, i),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!("cannot install signal handlers: {e}");
            return 70;
        }
    };

    if !quiet_ready {
        let health = serde_json::to_string(&app.health()).unwrap_or_else(|_| "{}".into());
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "__SIDECAR_READY__:{health}");
        let _ = err.flush();
    }
    app.out.notify(
        "lifecycle.ready",
        &LifecycleReady {
            version: VERSION.into(),
            protocol_version: PROTOCOL_VERSION.into(),
            pid: std::process::id(),
            listen_info: ListenInfo {
                transport: "stdio".into(),
            },
        },
    );

    // The core reads stdin on its own thread and dispatches on the runtime; at EOF it asks
    // the lifecycle to stop, which the loop below picks up.
    match crate::rpc::server::serve(app.clone(), std::io::stdin()) {
        Ok(core) => {
            runtime.spawn(core);
        }
        Err(e) => {
            tracing::error!("cannot start the stdin reader thread: {e}");
            return 70;
        }
    }

    let cause = runtime.block_on(async {
        // Background warm-ups, after the host's first exchanges (a ping, a config call, the
        // first turn) have had both cores: the python probe (ping answers from its cache),
        // the sandbox probe, pruning saved bash output and dead sidecars' temp dirs. Whatever
        // needs one of them earlier runs it itself.
        let warm = app.clone();
        tokio::spawn(async move {
            tokio::time::sleep(WARMUP_DELAY).await;
            let (python, _) = tokio::join!(warm.python_version(), sandbox.caps());
            if run_code_on && python.is_none() {
                shared_router.unregister(crate::tools::run_code::NAME);
                tracing::error!(
                    "run_code is off: no Python 3 interpreter answered (run_code_python / OUTRIGGER_RUN_CODE_PYTHON names one; default python3 on PATH)"
                );
            }
        });
        tokio::spawn(async {
            tokio::time::sleep(WARMUP_DELAY).await;
            let _ = tokio::task::spawn_blocking(|| {
                if let Ok(cwd) = std::env::current_dir() {
                    crate::tools::bash::saved::prune(&cwd);
                }
                let n = crate::sandbox::spawn::sweep_stale_tmp();
                if n > 0 {
                    tracing::info!(
                        "removed {n} private temp dir(s) left by sidecars that are gone"
                    );
                }
            })
            .await;
        });
        let mut poll = tokio::time::interval(PARENT_POLL);
        loop {
            tokio::select! {
                c = stop_rx.recv() => break c.unwrap_or(Cause::Eof),
                _ = sigterm.recv() => break Cause::Signal,
                _ = sigint.recv() => break Cause::Signal,
                _ = poll.tick() => {
                    if nix::unistd::getppid() != parent || app.out.is_broken() {
                        tracing::info!("host went away; shutting down");
                        break Cause::Eof;
                    }
                }
            }
        }
    });
    tracing::debug!("stopping: {cause:?}");

    runtime.block_on(async {
        if cause.drains() {
            let grace = app.settings().grace_period;
            if !app.lifecycle.drain(grace).await {
                tracing::warn!(
                    "in-flight work did not finish within grace_period_seconds ({:.1} s)",
                    grace.as_secs_f64()
                );
            }
        }
        app.lifecycle.kill_children();
        crate::sandbox::spare::discard();
        crate::sandbox::spawn::remove_tmp_parent();
        crate::sandbox::cgroup::flush_removals(std::time::Duration::from_secs(1));
        app.reverse.close_all();
        let reason = match cause.reason() {
            "eof" => ShutdownReason::Eof,
            _ => ShutdownReason::Normal,
        };
        app.out
            .notify("lifecycle.shutdown", &LifecycleShutdown { reason });
        let _ = tokio::time::timeout(Duration::from_secs(2), app.out.flush()).await;
    });
    drop(writer);
    0
}
