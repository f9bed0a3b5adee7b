//! `outrigger inspect`: a read-only web page over the durable store, on loopback only. It
//! opens the database without the write lease (`Store::open_read_only`), so it runs beside
//! a live sidecar; every request carries the one-time token printed with the URL.
//! Routes and JSON shapes: `routes`; the page: `assets/` (embedded); docs/observability.md.

mod routes;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Semaphore;

use crate::store::Store;

#[derive(Debug, Clone, clap::Args)]
pub struct InspectArgs {
    /// Port on 127.0.0.1 to serve on; 0 (the default) picks a free one.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Directory holding the store (`DIR/outrigger.db`); default: `$OUTRIGGER_HOME`.
    /// `--storage-path` names the database file itself and wins.
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
}

/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 32;
/// A client must send its request head within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// What every request handler shares.
pub struct State {
    store: Store,
    token: String,
    port: u16,
}

/// Runs the inspector until SIGINT or SIGTERM. Exit codes: 0 stopped by a signal, 1 cannot
/// serve (the port), 2 no usable store.
pub fn run(args: InspectArgs, storage_path: Option<PathBuf>, default_path: PathBuf) -> i32 {
    let path = storage_path
        .or_else(|| args.home.as_ref().map(|h| h.join("outrigger.db")))
        .unwrap_or(default_path);
    let store = match Store::open_read_only(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "outrigger inspect: {e}. Pass --storage-path PATH (the database file) or \
                 --home DIR (the directory holding outrigger.db)."
            );
            return 2;
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    match runtime {
        Ok(rt) => rt.block_on(serve(store, args.port)),
        Err(e) => {
            eprintln!("outrigger inspect: cannot start the runtime: {e}");
            1
        }
    }
}

async fn serve(store: Store, port: u16) -> i32 {
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "outrigger inspect: cannot listen on 127.0.0.1:{port}: {e}; pass another \
                 --port, or --port 0 for any free one"
            );
            return 1;
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(port);
    let state = Arc::new(State {
        token: crate::store::ids::random_hex(16),
        store,
        port,
    });
    let url = format!("http://127.0.0.1:{port}/?token={}", state.token);
    eprintln!(
        "outrigger inspect: serving {} read-only at {url} (Ctrl-C stops it)",
        state.store.path().display()
    );
    {
        use std::io::Write;
        // The URL alone on stdout, for a script or test to pick up.
        let mut out = std::io::stdout().lock(); // stdout-ok: `inspect` speaks no JSON-RPC; its one stdout line is the URL
        let _ = writeln!(out, "{url}").and_then(|()| out.flush());
    }
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        eprintln!("outrigger inspect: cannot install signal handlers");
        return 1;
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return 1;
        };
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, std::convert::Infallible>(routes::handle(state, req).await) }
                    });
                    let conn = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .serve_connection(TokioIo::new(stream), svc);
                    if let Err(e) = conn.await {
                        tracing::debug!("inspect: connection ended: {e}");
                    }
                    drop(permit);
                });
            }
            _ = int.recv() => return 0,
            _ = term.recv() => return 0,
        }
    }
}
