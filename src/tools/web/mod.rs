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

use std::sync::Arc;

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
