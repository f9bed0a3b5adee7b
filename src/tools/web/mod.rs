//! The network-read pair: `web_fetch` (a model-supplied URL, behind an SSRF policy whose
//! connections are pinned to the addresses it validated) and `web_search` (Tavily, DuckDuckGo
//! lite, or the host), with the spec's bounds, domain lists and per-process caps.

pub mod config;
pub mod ddg;
pub mod fetch;
pub mod html;
pub mod policy;
pub mod resolve;
pub mod search;

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::tools::Router;
use crate::tools::router::Registration;
use config::{Env, WebConfig};

/// Registers the web pair on `router` (`web_search` only with a backend). `get` reads a merged
/// config value. A bad setting is logged and the pair left out: boot goes on without it.
/// Returns the names registered.
pub fn register(router: &Router, get: &dyn Fn(&str) -> Value) -> Vec<&'static str> {
    if get("web_tools") == Value::Bool(false) {
        return Vec::new();
    }
    match build(get, &Env::from_process()) {
        Ok(regs) => {
            let mut names = Vec::new();
            for (name, reg) in regs {
                match router.register(reg) {
                    Ok(()) => names.push(name),
                    Err(e) => tracing::error!("cannot register {name}: {e}"),
                }
            }
            names
        }
        Err(e) => {
            tracing::error!("web tools are off: configuration error: {e}");
            Vec::new()
        }
    }
}

type BuildClient = Box<dyn Fn() -> Result<reqwest::Client, String> + Send + Sync>;

/// An HTTP client built on its first call: building one (TLS roots, the connector) costs
/// milliseconds and megabytes that boot must not pay for a tool that may never run.
pub struct LazyClient {
    cell: OnceLock<Result<reqwest::Client, String>>,
    build: BuildClient,
}

impl LazyClient {
    pub fn new(
        build: impl Fn() -> Result<reqwest::Client, String> + Send + Sync + 'static,
    ) -> Self {
        LazyClient {
            cell: OnceLock::new(),
            build: Box::new(build),
        }
    }

    pub fn get(&self) -> Result<&reqwest::Client, String> {
        self.cell
            .get_or_init(|| {
                crate::llm::install_crypto();
                (self.build)()
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// The egress proxy, parsed.
pub fn proxy_of(p: &str) -> Result<reqwest::Proxy, String> {
    reqwest::Proxy::all(p).map_err(|e| format!("the egress proxy {p}: {e}"))
}

fn build(
    get: &dyn Fn(&str) -> Value,
    env: &Env,
) -> Result<Vec<(&'static str, Registration)>, String> {
    let cfg = Arc::new(WebConfig::resolve(get, env)?);
    let mut out = vec![(
        fetch::NAME,
        Registration::new(Arc::new(fetch::WebFetch::new(cfg.clone())?)),
    )];
    if let Some(p) = search::provider(&cfg)? {
        out.push((
            search::NAME,
            Registration::new(Arc::new(search::WebSearch::new(cfg, p))),
        ));
    }
    Ok(out)
}
