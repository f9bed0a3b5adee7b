//! Serve mode: boot, the ready handshake, the stdin reader thread, and the shutdown ladder.

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
use crate::rpc::dispatch::{dispatch_line, refuse_too_long};
use crate::rpc::reader::{ReadEvent, read_lines};
use crate::tools::Router;
use crate::tools::plugins::PluginRegistry;

/// What the stdin reader hands the dispatcher.
enum Inbound {
    Line(Vec<u8>),
    TooLong(usize),
    Eof,
}

/// How often we look for a parent that went away without closing our stdin.
const PARENT_POLL: Duration = Duration::from_millis(500);

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
    // Built-in file tools register before plugins so a plugin cannot take their names. They
    // read settings per call from the shared config (`config.set` changes it at runtime).
    let router = Router::new();
    let shared = SharedConfig::new(config.clone());
    let fs_env = crate::tools::fs::FsEnv::new(Arc::new({
        let shared = shared.clone();
        move || shared.settings()
    }));
    crate::tools::fs::register(&router, &fs_env);
    // The sandbox service (probed lazily) and `bash`, also before plugins.
    let sandbox = {
        let shared = shared.clone();
        let hidden = vec![
            config.home().join("secrets"),
            config.home().join("credentials"),
        ];
        crate::sandbox::install(crate::sandbox::Sandbox::new(
            // Our own image, even if the file on disk is replaced while we run.
            Some(std::path::PathBuf::from("/proc/self/exe")),
            hidden,
            move || Some(shared.get()),
        ))
    };
    let bash = crate::tools::bash::BashTool::new(sandbox.clone());
    if let Err(e) = router.register(crate::tools::router::Registration::new(Arc::new(bash))) {
        tracing::error!("cannot register bash: {e}");
    }
    let todo = crate::tools::router::Registration::new(Arc::new(crate::tools::todo::TodoWrite));
    if let Err(e) = router.register(todo) {
        tracing::error!("cannot register todo_write: {e}");
    }
    // Plugins load before ready: a broken one must stop boot, not vanish silently.
    let plugins = PluginRegistry::new(router, settings.plugin_max_output_bytes);
    if let Err(e) = plugins.load_configured(config.home()) {
        eprintln!("outrigger: plugin error: {e}");
        return 2;
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

    // The reader thread hands each read's worth of lines to one dispatcher task, in order:
    // one wake-up per read instead of one per frame, and frames start in the order sent.
    let (batches, mut batch_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<Inbound>>();
    let max_frame = settings.max_frame_bytes;
    let dispatcher = app.clone();
    runtime.spawn(async move {
        while let Some(batch) = batch_rx.recv().await {
            for item in batch {
                match item {
                    Inbound::Line(line) => dispatch_line(&dispatcher, &line).await,
                    Inbound::TooLong(len) => refuse_too_long(&dispatcher, len, max_frame),
                    Inbound::Eof => {
                        // Nobody is left to answer a reverse request.
                        dispatcher.reverse.close_all();
                        dispatcher.lifecycle.request_stop(Cause::Eof);
                    }
                }
            }
        }
    });
    let spawned = std::thread::Builder::new()
        .name("stdin-reader".into())
        .spawn(move || {
            let stdin = std::io::stdin().lock();
            let mut batch = Vec::new();
            let result = read_lines(stdin, max_frame, |ev| match ev {
                ReadEvent::Line(line) => batch.push(Inbound::Line(line.to_vec())),
                ReadEvent::TooLong { len } => batch.push(Inbound::TooLong(len)),
                ReadEvent::Drained if !batch.is_empty() => {
                    let _ = batches.send(std::mem::take(&mut batch));
                }
                ReadEvent::Drained => {}
            });
            if let Err(e) = result {
                tracing::warn!("stdin read failed: {e}");
            }
            batch.push(Inbound::Eof);
            let _ = batches.send(batch);
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the stdin reader thread: {e}");
        return 70;
    }

    let cause = runtime.block_on(async {
        // Warm the python probe in the background: ping answers from the cache.
        let warm = app.clone();
        tokio::spawn(async move {
            warm.python_version().await;
        });
        // After ready: probe the sandbox and prune the default workspace's saved bash output.
        tokio::spawn(async move {
            sandbox.caps().await;
        });
        tokio::task::spawn_blocking(|| {
            if let Ok(cwd) = std::env::current_dir() {
                crate::tools::bash::saved::prune(&cwd);
            }
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
