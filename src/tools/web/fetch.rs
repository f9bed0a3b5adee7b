//! `web_fetch {url}`: one page, every hop checked, the connection pinned to checked addresses,
//! same-origin redirects followed, the body capped, HTML turned into Markdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION, USER_AGENT};
use serde_json::{Map, Value, json};

use super::LazyClient;
use super::config::WebConfig;
use super::policy::{self, Refusal};
use super::resolve::{Pinned, Resolver, refusal_in};
use crate::tools::router::elapsed_ms;
use crate::tools::{Tool, ToolContext, ToolFuture, ToolMode, ToolResult};

pub const NAME: &str = "web_fetch";

pub struct WebFetch {
    cfg: Arc<WebConfig>,
    resolver: Arc<Resolver>,
    client: LazyClient,
    fetches: AtomicU64,
}

/// How a body is handed to the model.
enum Kind {
    Html,
    Text,
}

fn classify(content_type: &str) -> Option<Kind> {
    let ct = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if ct == "text/html" || ct == "application/xhtml+xml" {
        return Some(Kind::Html);
    }
    let texty = ct.is_empty()
        || ct.starts_with("text/")
        || ct.ends_with("+json")
        || ct.ends_with("+xml")
        || matches!(
            ct.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-javascript"
                | "application/ecmascript"
                | "application/x-ndjson"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
        );
    texty.then_some(Kind::Text)
}

/// The charset a body declares: the Content-Type's, else (HTML) a `<meta charset>` near the top.
fn charset_label(content_type: &str, body: &[u8], html: bool) -> Option<String> {
    let after = |s: &str| {
        let lower = s.to_ascii_lowercase();
        let i = lower.find("charset=")? + "charset=".len();
        let rest = &s[i..];
        let label: String = rest
            .trim_start_matches(['"', '\''])
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
            .collect();
        (!label.is_empty()).then_some(label)
    };
    after(content_type).or_else(|| {
        html.then(|| after(&String::from_utf8_lossy(&body[..body.len().min(2048)])))
            .flatten()
    })
}

/// The body as text: a byte-order mark wins, then the declared charset, else UTF-8 (invalid
/// sequences replaced).
fn decode<'a>(body: &'a [u8], content_type: &str, html: bool) -> std::borrow::Cow<'a, str> {
    let declared = charset_label(content_type, body, html)
        .and_then(|l| encoding_rs::Encoding::for_label(l.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    declared.decode(body).0
}

fn failure(code: &str, error: String) -> ToolResult {
    ToolResult::recoverable(error).with_data("code", code)
}

fn refused(r: Refusal) -> ToolResult {
    failure(r.code, r.message)
}

impl WebFetch {
    pub fn new(cfg: Arc<WebConfig>) -> Result<WebFetch, String> {
        let resolver = cfg.resolver.clone();
        if let Some(p) = &cfg.proxy {
            super::proxy_of(p)?;
        }
        let (timeout, proxy, pinned) = (cfg.fetch_timeout, cfg.proxy.clone(), resolver.clone());
        let client = LazyClient::new(move || {
            let b = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(timeout);
            let b = match &proxy {
                // Confined: the proxy connects (and resolves); our pre-check still runs per hop.
                Some(p) => b.proxy(super::proxy_of(p)?),
                // Otherwise no proxy from the environment may bypass the pinned resolver.
                None => b.no_proxy().dns_resolver(Arc::new(Pinned(pinned.clone()))),
            };
            b.build()
                .map_err(|e| format!("cannot build the web_fetch client: {e}"))
        });
        Ok(WebFetch {
            cfg,
            resolver,
            client,
            fetches: AtomicU64::new(0),
        })
    }

    async fn run(&self, ctx: &ToolContext, args: &Map<String, Value>) -> ToolResult {
        let started = Instant::now();
        let raw = args.get("url").and_then(Value::as_str).unwrap_or_default();
        let first = match policy::parse_url(raw) {
            Ok(u) => u,
            Err(r) => return refused(r),
        };
        // The domain lists hold before any DNS; redirects stay on this origin.
        if let Err(r) = self.cfg.domains.check(&policy::host_key(&first)) {
            return refused(r);
        }
        // Counted once the URL passed the checks: a refused URL costs no fetch.
        let cap = self.cfg.session_fetch_cap;
        if cap > 0 && self.fetches.fetch_add(1, Ordering::Relaxed) >= cap {
            return failure(
                "session_cap",
                format!(
                    "web_fetch has reached its limit of {cap} fetches for this session (web_session_fetch_cap, OUTRIGGER_WEB_SESSION_FETCH_CAP); answer from what you have"
                ),
            );
        }
        let origin = first.origin();
        let deadline = started + self.cfg.fetch_timeout;
        let mut url = first.clone();
        let mut hops = 0u32;
        loop {
            if let Err(r) = self.precheck(&url).await {
                return refused(r);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let client = match self.client.get() {
                Ok(c) => c,
                Err(e) => return failure("network", e),
            };
            let send = client
                .get(url.clone())
                .header(USER_AGENT, concat!("outrigger/", env!("CARGO_PKG_VERSION")))
                .header(
                    ACCEPT,
                    "text/html, text/markdown, text/plain, application/json, application/xml;q=0.9, */*;q=0.5",
                )
                .timeout(left)
                .send();
            let resp = tokio::select! {
                r = send => r,
                _ = ctx.cancel.cancelled() => return failure("cancelled", "web_fetch was cancelled".into()),
            };
            let resp = match resp {
                Ok(r) => r,
                Err(e) => return self.send_error(&url, &e),
            };
            let status = resp.status();
            if status.is_redirection()
                && let Some(loc) = resp.headers().get(LOCATION)
            {
                let next = match loc.to_str().ok().and_then(|l| url.join(l).ok()) {
                    Some(n) => n,
                    None => {
                        return failure(
                            "bad_redirect",
                            format!("{url} answered {status} with an unreadable Location"),
                        );
                    }
                };
                if let Err(r) = policy::check_url(&next) {
                    return refused(r);
                }
                if next.origin() != origin {
                    return failure(
                        "cross_origin_redirect",
                        format!(
                            "{url} redirects to another origin: {next}. Fetch that URL if you want it (redirects are followed within one origin only)"
                        ),
                    )
                    .with_data("redirect_to", next.as_str())
                    .with_data("status", status.as_u16());
                }
                hops += 1;
                if hops > self.cfg.fetch_max_redirects {
                    return failure(
                        "too_many_redirects",
                        format!(
                            "{first} redirected more than {} times (web_fetch_max_redirects)",
                            self.cfg.fetch_max_redirects
                        ),
                    );
                }
                url = next;
                continue;
            }
            return self.read(ctx, &first, url, resp, started).await;
        }
    }

    /// Checks a hop's host: an address literal here (reqwest resolves only names); a name is
    /// checked by the pinned resolver as the connection is made, or here when a proxy connects.
    async fn precheck(&self, url: &Url) -> Result<(), Refusal> {
        let host = policy::host_key(url);
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.resolver.check_ip(&host, ip.into()),
            Some(url::Host::Ipv6(ip)) => self.resolver.check_ip(&host, ip.into()),
            Some(url::Host::Domain(_)) if self.cfg.proxy.is_some() => {
                self.resolver.resolve(&host).await.map(|_| ())
            }
            _ => Ok(()),
        }
    }

    fn send_error(&self, url: &Url, e: &reqwest::Error) -> ToolResult {
        if let Some(r) = refusal_in(e) {
            return refused(r);
        }
        if e.is_timeout() {
            return failure(
                "timeout",
                format!(
                    "{url} did not answer within web_fetch_timeout_ms={}",
                    self.cfg.fetch_timeout.as_millis()
                ),
            );
        }
        let mut chain = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(s) = src {
            chain.push_str(": ");
            chain.push_str(&s.to_string());
            src = s.source();
        }
        if self.cfg.proxy.is_some() && chain.contains("tunnel") {
            return failure(
                "proxy_refused",
                format!(
                    "the egress proxy refused {url}: it lets through only the hosts in web_allowed_domains (OUTRIGGER_WEB_ALLOWED_DOMAINS), listed exactly ({chain})"
                ),
            );
        }
        failure("network", format!("cannot fetch {url}: {chain}"))
    }

    async fn read(
        &self,
        ctx: &ToolContext,
        first: &Url,
        url: Url,
        mut resp: reqwest::Response,
        started: Instant,
    ) -> ToolResult {
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let Some(kind) = classify(&content_type) else {
            return failure(
                "unsupported_content_type",
                format!(
                    "{url} is {content_type}, not text: web_fetch reads HTML, text, JSON and XML. To download it, run bash with curl (curl -sSLo <file> '{url}') and inspect the file"
                ),
            )
            .with_data("contentType", content_type);
        };
        let cap = usize::try_from(self.cfg.fetch_max_bytes).unwrap_or(usize::MAX);
        let mut body: Vec<u8> = Vec::new();
        let mut truncated = false;
        let deadline = started + self.cfg.fetch_timeout;
        loop {
            let next = tokio::select! {
                c = resp.chunk() => c,
                _ = tokio::time::sleep_until(deadline.into()) => {
                    return failure("timeout", format!(
                        "{url} did not finish within web_fetch_timeout_ms={}",
                        self.cfg.fetch_timeout.as_millis()
                    ));
                }
                _ = ctx.cancel.cancelled() => return failure("cancelled", "web_fetch was cancelled".into()),
            };
            match next {
                Ok(Some(chunk)) => {
                    let room = cap - body.len();
                    if chunk.len() >= room {
                        body.extend_from_slice(&chunk[..room]);
                        // Stop reading: what is past the cap never enters the process.
                        truncated =
                            chunk.len() > room || resp.chunk().await.ok().flatten().is_some();
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return self.send_error(&url, &e),
            }
        }
        let bytes = body.len();
        let text = decode(&body, &content_type, matches!(kind, Kind::Html));
        let content = match kind {
            // Parsing a big page is CPU work: off the async workers, and bounded by the
            // fetch's deadline (a pathological page cannot hold the call past it).
            Kind::Html => {
                let html = text.into_owned();
                let page = url.clone();
                let convert = tokio::task::spawn_blocking(move || {
                    super::html::to_markdown_at(&html, Some(&page))
                });
                match tokio::time::timeout_at(deadline.into(), convert).await {
                    Ok(Ok(md)) => md,
                    Ok(Err(e)) => {
                        return failure(
                            "convert_failed",
                            format!("cannot convert {url} to Markdown: {e}"),
                        );
                    }
                    Err(_) => {
                        return failure(
                            "timeout",
                            format!(
                                "{url} could not be converted within web_fetch_timeout_ms={}",
                                self.cfg.fetch_timeout.as_millis()
                            ),
                        );
                    }
                }
            }
            Kind::Text => text.into_owned(),
        };
        let mut data = Map::new();
        data.insert("url".into(), json!(first.as_str()));
        data.insert("finalUrl".into(), json!(url.as_str()));
        data.insert("status".into(), json!(status.as_u16()));
        data.insert("contentType".into(), json!(content_type));
        data.insert("bytes".into(), json!(bytes));
        data.insert("truncated".into(), json!(truncated));
        data.insert("content".into(), json!(content));
        data.insert("durationMs".into(), json!(elapsed_ms(started)));
        if status.is_success() {
            return ToolResult::ok(data);
        }
        let mut r = failure(
            "http_status",
            format!("{url} answered HTTP {status}; its body is in data.content"),
        );
        r.data.get_or_insert_with(Map::new).extend(data);
        r
    }
}

impl Tool for WebFetch {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Fetch one web page by URL and read it: HTML comes back as Markdown, text, JSON and XML as they are. Public http(s) URLs only; redirects are followed within the same origin (a redirect to another origin is reported in data.redirect_to: fetch that URL if you want it). Large pages are cut at a byte limit (data.truncated). For binary files use bash with curl."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http(s) URL to fetch (at most 2048 bytes)."}
            },
            "required": ["url"],
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_charsets_are_decoded() {
        assert_eq!(
            decode(b"caf\xe9", "text/plain; charset=iso-8859-1", false),
            "café"
        );
        assert_eq!(
            decode(b"caf\xe9", "text/html; charset=\"windows-1252\"", true),
            "café"
        );
        let meta = b"<html><head><meta charset=\"iso-8859-1\"></head><body>cr\xe8me</body></html>";
        assert!(decode(meta, "text/html", true).contains("crème"));
        assert_eq!(decode("déjà".as_bytes(), "text/plain", false), "déjà");
        assert_eq!(decode(b"\xff", "text/plain", false), "\u{fffd}");
    }

    #[test]
    fn content_types_are_sorted() {
        assert!(matches!(
            classify("text/html; charset=utf-8"),
            Some(Kind::Html)
        ));
        assert!(matches!(classify("application/json"), Some(Kind::Text)));
        assert!(matches!(classify("application/ld+json"), Some(Kind::Text)));
        assert!(matches!(classify("text/plain"), Some(Kind::Text)));
        assert!(classify("application/pdf").is_none());
        assert!(classify("image/png").is_none());
        assert!(classify("application/octet-stream").is_none());
    }
}
