//! `web_search {query, maxResults?}` behind [`WebSearchProvider`]: Tavily, DuckDuckGo lite, or
//! the host (reverse `tool.invoke`). Every backend's hits are filtered by the domain lists.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use reqwest::header::{AUTHORIZATION, USER_AGENT};
use serde_json::{Map, Value, json};

use super::LazyClient;
use super::config::{Backend, WebConfig};
use super::policy::{Domains, host_key};
use crate::tools::router::elapsed_ms;
use crate::tools::{Tool, ToolContext, ToolFuture, ToolMode, ToolResult};

pub const NAME: &str = "web_search";
const TAVILY_BASE: &str = "https://api.tavily.com";
const DDG_BASE: &str = "https://lite.duckduckgo.com";
/// Longest query accepted.
const MAX_QUERY_CHARS: usize = 400;

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
    pub published_at: Option<String>,
}

/// What a backend is asked.
pub struct Query<'a> {
    pub text: &'a str,
    pub max_results: usize,
    pub domains: &'a Domains,
}

pub type SearchFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<Hit>, String>> + Send + 'a>>;

/// A search backend.
pub trait WebSearchProvider: Send + Sync {
    fn name(&self) -> &'static str;
    fn search<'a>(&'a self, q: &'a Query<'a>, ctx: &'a ToolContext) -> SearchFuture<'a>;
}

/// Builds the configured backend.
pub fn provider(cfg: &WebConfig) -> Result<Option<Arc<dyn WebSearchProvider>>, String> {
    if let Some(p) = &cfg.proxy {
        super::proxy_of(p)?;
    }
    let (timeout, proxy) = (cfg.search_timeout, cfg.proxy.clone());
    let client = move || {
        let proxy = proxy.clone();
        LazyClient::new(move || {
            let mut b = reqwest::Client::builder().timeout(timeout);
            if let Some(p) = &proxy {
                b = b.proxy(super::proxy_of(p)?);
            }
            b.build()
                .map_err(|e| format!("cannot build the web_search client: {e}"))
        })
    };
    let base = |default: &str| {
        cfg.search_base_url
            .clone()
            .unwrap_or_else(|| default.to_string())
            .trim_end_matches('/')
            .to_string()
    };
    Ok(match &cfg.backend {
        None => None,
        Some(Backend::Tavily { key }) => Some(Arc::new(Tavily {
            client: client(),
            base: base(TAVILY_BASE),
            key: key.clone(),
        })),
        Some(Backend::Ddg) => Some(Arc::new(Ddg {
            client: client(),
            base: base(DDG_BASE),
        })),
        Some(Backend::Host) => Some(Arc::new(Host {
            timeout: cfg.search_timeout,
        })),
    })
}

fn text_of(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Hits from a JSON list of results, with the backend's names for the snippet and date.
fn hits(list: Option<&Value>, snippet: &str, published: &str) -> Vec<Hit> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|h| Hit {
            title: text_of(h, "title"),
            url: text_of(h, "url"),
            snippet: text_of(h, snippet),
            published_at: h.get(published).and_then(Value::as_str).map(str::to_string),
        })
        .collect()
}

async fn body_of(
    r: Result<reqwest::Response, reqwest::Error>,
    what: &str,
) -> Result<String, String> {
    let r = r.map_err(|e| format!("{what} did not answer: {e}"))?;
    let status = r.status();
    let body = r
        .text()
        .await
        .map_err(|e| format!("{what}: cannot read the answer: {e}"))?;
    if !status.is_success() {
        let head: String = body.chars().take(300).collect();
        return Err(format!("{what} answered HTTP {status}: {head}"));
    }
    Ok(body)
}

struct Tavily {
    client: LazyClient,
    base: String,
    key: String,
}

impl WebSearchProvider for Tavily {
    fn name(&self) -> &'static str {
        "tavily"
    }

    fn search<'a>(&'a self, q: &'a Query<'a>, _ctx: &'a ToolContext) -> SearchFuture<'a> {
        Box::pin(async move {
            let mut body = json!({"query": q.text, "max_results": q.max_results});
            // Ranking happens inside the policy where the backend supports it.
            if !q.domains.allowed.is_empty() {
                body["include_domains"] = json!(q.domains.allowed);
            }
            if !q.domains.blocked.is_empty() {
                body["exclude_domains"] = json!(q.domains.blocked);
            }
            let r = self
                .client
                .get()?
                .post(format!("{}/search", self.base))
                .header(AUTHORIZATION, format!("Bearer {}", self.key))
                .json(&body)
                .send()
                .await;
            let text = body_of(r, "Tavily").await?;
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| format!("Tavily answered something that is not JSON: {e}"))?;
            Ok(hits(v.get("results"), "content", "published_date"))
        })
    }
}

struct Ddg {
    client: LazyClient,
    base: String,
}

impl WebSearchProvider for Ddg {
    fn name(&self) -> &'static str {
        "ddg"
    }

    fn search<'a>(&'a self, q: &'a Query<'a>, _ctx: &'a ToolContext) -> SearchFuture<'a> {
        Box::pin(async move {
            let mut url = reqwest::Url::parse(&format!("{}/lite/", self.base))
                .map_err(|e| format!("web_search_base_url: {e}"))?;
            url.query_pairs_mut().append_pair("q", q.text);
            let r = self
                .client
                .get()?
                .get(url)
                .header(USER_AGENT, concat!("outrigger/", env!("CARGO_PKG_VERSION")))
                .send()
                .await;
            let html = body_of(r, "DuckDuckGo").await?;
            Ok(super::ddg::parse_lite(&html)
                .into_iter()
                .map(|h| Hit {
                    title: h.title,
                    url: h.url,
                    snippet: h.snippet,
                    published_at: None,
                })
                .collect())
        })
    }
}

/// The host runs the search with its own credentials (`tool.invoke {name: "web_search"}`).
struct Host {
    timeout: std::time::Duration,
}

impl WebSearchProvider for Host {
    fn name(&self) -> &'static str {
        "host"
    }

    fn search<'a>(&'a self, q: &'a Query<'a>, ctx: &'a ToolContext) -> SearchFuture<'a> {
        Box::pin(async move {
            let host = ctx.host.clone().ok_or(
                "web_search runs on the host (web_search_provider = host) but no host is connected",
            )?;
            let params = json!({
                "id": ctx.call_id,
                "name": NAME,
                "arguments": {"query": q.text, "maxResults": q.max_results,
                              "allowedDomains": q.domains.allowed, "blockedDomains": q.domains.blocked},
                "context": ctx.host_context,
            });
            let v = host
                .call("tool.invoke", params, self.timeout, &ctx.cancel)
                .await
                .map_err(|e| format!("the host did not run web_search: {e}"))?;
            if v.get("success").and_then(Value::as_bool) != Some(true) {
                let why = v
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("no error given");
                return Err(format!("the host's web_search failed: {why}"));
            }
            Ok(hits(v.pointer("/data/results"), "snippet", "publishedAt"))
        })
    }
}

pub struct WebSearch {
    cfg: Arc<WebConfig>,
    provider: Arc<dyn WebSearchProvider>,
    searches: AtomicU64,
}

impl WebSearch {
    pub fn new(cfg: Arc<WebConfig>, provider: Arc<dyn WebSearchProvider>) -> WebSearch {
        WebSearch {
            cfg,
            provider,
            searches: AtomicU64::new(0),
        }
    }

    async fn run(&self, ctx: &ToolContext, args: &Map<String, Value>) -> ToolResult {
        let started = Instant::now();
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim();
        if query.is_empty() {
            return ToolResult::recoverable("web_search needs a non-empty query");
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return ToolResult::recoverable(format!(
                "the query is longer than {MAX_QUERY_CHARS} characters; shorten it"
            ));
        }
        let cap = self.cfg.session_search_cap;
        if cap > 0 && self.searches.fetch_add(1, Ordering::Relaxed) >= cap {
            return ToolResult::recoverable(format!(
                "web_search has reached its limit of {cap} searches for this session (web_session_search_cap, OUTRIGGER_WEB_SESSION_SEARCH_CAP); answer from what you have"
            ))
            .with_data("code", "session_cap");
        }
        let max = args
            .get("maxResults")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(self.cfg.search_max_results)
            .clamp(1, self.cfg.search_max_results);
        let q = Query {
            text: query,
            max_results: max,
            domains: &self.cfg.domains,
        };
        let found = tokio::select! {
            r = tokio::time::timeout(self.cfg.search_timeout, self.provider.search(&q, ctx)) => r,
            _ = ctx.cancel.cancelled() => return ToolResult::recoverable("web_search was cancelled"),
        };
        let hits = match found {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                return ToolResult::recoverable(e).with_data("provider", self.provider.name());
            }
            Err(_) => {
                return ToolResult::recoverable(format!(
                    "the {} search did not answer within web_search_timeout_ms={}",
                    self.provider.name(),
                    self.cfg.search_timeout.as_millis()
                ));
            }
        };
        // The policy holds for every backend, whatever it was told.
        let results: Vec<Value> = hits
            .into_iter()
            .filter(|h| {
                reqwest::Url::parse(&h.url)
                    .ok()
                    .is_some_and(|u| self.cfg.domains.allows(&host_key(&u)))
            })
            .take(max)
            .map(|h| {
                let mut m = json!({"title": h.title, "url": h.url, "snippet": h.snippet});
                if let Some(p) = h.published_at {
                    m["publishedAt"] = json!(p);
                }
                m
            })
            .collect();
        let mut data = Map::new();
        data.insert("query".into(), json!(query));
        data.insert("resultCount".into(), json!(results.len()));
        data.insert("results".into(), Value::Array(results));
        data.insert("provider".into(), json!(self.provider.name()));
        data.insert("durationMs".into(), json!(elapsed_ms(started)));
        ToolResult::ok(data)
    }
}

impl Tool for WebSearch {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Search the web. Returns titles, URLs and snippets of the top results; read a result with web_fetch."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for.", "maxLength": MAX_QUERY_CHARS},
                "maxResults": {"type": "integer", "minimum": 1, "maximum": self.cfg.search_max_results,
                               "description": "How many results (default and most: the configured maximum)."}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn mode(&self) -> ToolMode {
        ToolMode::Read
    }

    fn call(self: Arc<Self>, ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move { self.run(&ctx, &args).await })
    }
}
