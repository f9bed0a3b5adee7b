//! stderr logging (text by default, JSON with `OUTRIGGER_LOG_FORMAT=json`), level changeable live.

use std::sync::Mutex;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{Registry, fmt, reload};

pub struct LogControl {
    handle: reload::Handle<LevelFilter, Registry>,
    current: Mutex<String>,
}

fn filter_for(level: &str) -> LevelFilter {
    match level {
        "DEBUG" => LevelFilter::DEBUG,
        "WARNING" => LevelFilter::WARN,
        "ERROR" => LevelFilter::ERROR,
        _ => LevelFilter::INFO,
    }
}

/// Installs the global subscriber. Only stderr is ever written.
pub fn init(level: &str) -> LogControl {
    let (filter, handle) = reload::Layer::new(filter_for(level));
    let json = std::env::var("OUTRIGGER_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let base = fmt::layer().with_writer(std::io::stderr).with_target(true);
    let fmt_layer = if json {
        base.json().with_current_span(false).boxed()
    } else {
        base.boxed()
    };
    // A second init (tests in one process) is harmless: keep the first subscriber.
    // rmcp logs every handshake and cancelled task at INFO (whole peer descriptions): only its
    // warnings reach our log; `mcp` logs what a host needs to know itself.
    let quiet_deps = tracing_subscriber::filter::filter_fn(|m| {
        !(m.target().starts_with("rmcp") && *m.level() > tracing::Level::WARN)
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(quiet_deps)
        .with(fmt_layer)
        .try_init();
    LogControl {
        handle,
        current: Mutex::new(level.to_string()),
    }
}

impl LogControl {
    pub fn level(&self) -> String {
        self.current
            .lock()
            .map(|g| g.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Changes the level for every later log line. `level` is already validated.
    pub fn set_level(&self, level: &str) {
        if let Err(e) = self.handle.modify(|f| *f = filter_for(level)) {
            tracing::warn!("could not change log level: {e}");
        }
        match self.current.lock() {
            Ok(mut g) => *g = level.to_string(),
            Err(e) => *e.into_inner() = level.to_string(),
        }
    }
}
