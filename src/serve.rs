//! Serve mode: boot, the ready handshake, the stdin reader thread, and the shutdown ladder.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::config::Config;
use crate::lifecycle::{Cause, Lifecycle};
use crate::logging::LogControl;
use crate::protocol::{
    LifecycleReady, LifecycleShutdown, ListenInfo, PROTOCOL_VERSION, ShutdownReason, VERSION,
};
use crate::rpc::Out;
use crate::rpc::dispatch::{dispatch_line, refuse_too_long};
use crate::rpc::reader::{ReadEvent, read_lines};

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
    let (out, writer) = Out::start(std::io::stdout());
    let (lifecycle, mut stop_rx) = Lifecycle::new();
    let app = Arc::new(App::new(config, log, out, lifecycle));
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

    let reader_app = app.clone();
    let handle = runtime.handle().clone();
    let max_frame = settings.max_frame_bytes;
    let spawned = std::thread::Builder::new()
        .name("stdin-reader".into())
        .spawn(move || {
            let _enter = handle.enter();
            let stdin = std::io::stdin().lock();
            let result = read_lines(stdin, max_frame, |ev| match ev {
                ReadEvent::Line(line) => dispatch_line(&reader_app, line),
                ReadEvent::TooLong { len } => refuse_too_long(&reader_app, len, max_frame),
            });
            if let Err(e) = result {
                tracing::warn!("stdin read failed: {e}");
            }
            reader_app.lifecycle.request_stop(Cause::Eof);
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
