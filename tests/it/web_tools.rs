//! `web_fetch` and `web_search` (issue 16) over the pipes, through `tool.invoke`, against
//! loopback HTTP servers written here: content handling, bounds, redirects, the SSRF policy
//! (address spellings, mixed and rebinding DNS answers played by `web_dns_overrides`), domain
//! lists, session caps, the Tavily / DuckDuckGo-lite / host search backends, the egress proxy,
//! and configuration errors that leave the web pair out while the sidecar keeps serving.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{Opts, Sidecar, WAIT, wait_until};
use crate::support::chat_helpers::{merge, messages, scripted, start};
use crate::support::host::{Reply, answer, drive, reverse, tool_body};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers: a loopback HTTP server, the sidecar, tool calls
// ---------------------------------------------------------------------------------------------

/// One request a fake server received.
#[derive(Clone, Debug)]
struct Req {
    method: String,
    /// The request target as sent (a path, or an absolute URL through a proxy).
    target: String,
    /// Lowercased names.
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Req {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.body))
    }

    /// The path without the query.
    fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }
}

type Handler = dyn Fn(&Req, &mut TcpStream) + Send + Sync;

/// A std-lib HTTP/1.1 server on loopback: one thread per connection, one request per
/// connection (`Connection: close`), counting accepted connections.
struct Server {
    host: String,
    port: u16,
    accepts: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Req>>>,
}

impl Server {
    fn start(handler: impl Fn(&Req, &mut TcpStream) + Send + Sync + 'static) -> Server {
        Server::start_on("127.0.0.1", handler)
    }

    /// `bind_host`: `127.0.0.1` or `::1`.
    fn start_on(
        bind_host: &str,
        handler: impl Fn(&Req, &mut TcpStream) + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind((bind_host, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepts = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let (a, r) = (accepts.clone(), requests.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut stream) = conn else { continue };
                a.fetch_add(1, Ordering::SeqCst);
                let (h, r) = (handler.clone(), r.clone());
                std::thread::spawn(move || {
                    if let Some(req) = read_request(&mut stream) {
                        r.lock().unwrap().push(req.clone());
                        h(&req, &mut stream);
                    }
                    let _ = stream.flush();
                });
            }
        });
        let host = if bind_host.contains(':') {
            format!("[{bind_host}]")
        } else {
            bind_host.to_string()
        };
        Server {
            host,
            port,
            accepts,
            requests,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}:{}{path}", self.host, self.port)
    }

    fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<Req> {
        self.requests.lock().unwrap().clone()
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Req> {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut r = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Req {
        method,
        target,
        headers,
        body,
    })
}

/// Writes a whole response and closes.
fn reply(s: &mut TcpStream, status: u16, content_type: &str, body: &[u8], extra: &[(&str, &str)]) {
    let _ = s.write_all(&head(status, content_type, Some(body.len()), extra));
    let _ = s.write_all(body);
}

/// A response head; `len: None` sends no Content-Length (the body ends at close).
fn head(status: u16, content_type: &str, len: Option<usize>, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut h = format!("HTTP/1.1 {status} Whatever\r\nConnection: close\r\n");
    if !content_type.is_empty() {
        h += &format!("Content-Type: {content_type}\r\n");
    }
    if let Some(n) = len {
        h += &format!("Content-Length: {n}\r\n");
    }
    for (k, v) in extra {
        h += &format!("{k}: {v}\r\n");
    }
    h += "\r\n";
    h.into_bytes()
}

fn redirect(s: &mut TcpStream, location: &str) {
    reply(s, 302, "text/plain", b"moved", &[("Location", location)]);
}

/// A server that answers every request with the same page (and a marker a test can look for).
fn page_server() -> Server {
    Server::start(|_, s| reply(s, 200, "text/plain", b"LOOPBACK-PAGE", &[]))
}

/// Lets a fetch reach servers on 127.0.0.1.
const LOCAL: (&str, &str) = ("OUTRIGGER_WEB_PRIVATE_HOSTS", "127.0.0.1");

fn sidecar(env: &[(&str, &str)]) -> Sidecar {
    sidecar_with(&[], env)
}

/// The environment starts empty (`common::base_command` clears it), so no TAVILY_API_KEY or
/// HTTPS_PROXY of the machine running the tests leaks in; `env` adds to it.
fn sidecar_with(args: &[&str], env: &[(&str, &str)]) -> Sidecar {
    Sidecar::start_with(Opts {
        args: args.iter().map(|a| a.to_string()).collect(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Opts::default()
    })
}

/// A tool call's result (`ToolResult`).
fn invoke(s: &mut Sidecar, name: &str, arguments: Value) -> Value {
    s.ok("tool.invoke", json!({"name": name, "arguments": arguments}))
}

fn fetch(s: &mut Sidecar, url: &str) -> Value {
    invoke(s, "web_fetch", json!({"url": url}))
}

fn search(s: &mut Sidecar, arguments: Value) -> Value {
    invoke(s, "web_search", arguments)
}

/// Asserts a successful result and returns its data.
fn ok_data(r: &Value) -> &Value {
    assert_eq!(r["success"], true, "expected success: {r}");
    &r["data"]
}

/// Asserts a failed result and returns its `data.code`.
fn fail_code(r: &Value) -> &str {
    assert_eq!(r["success"], false, "expected a failure: {r}");
    assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
    r["data"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no data.code: {r}"))
}

fn error_text(r: &Value) -> &str {
    r["error"].as_str().unwrap_or_default()
}

/// `(name, mode, exposure)` of the listed web tools, sorted by name.
fn web_tools(s: &mut Sidecar) -> Vec<(String, String, String)> {
    let list = s.ok("tool.list", json!({}));
    list.as_array()
        .unwrap()
        .iter()
        .filter_map(|t| {
            let name = t["function"]["name"].as_str()?;
            name.starts_with("web_").then(|| {
                (
                    name.to_string(),
                    t["mode"].as_str().unwrap_or_default().to_string(),
                    t["exposure"].as_str().unwrap_or_default().to_string(),
                )
            })
        })
        .collect()
}

fn web_names(s: &mut Sidecar) -> Vec<String> {
    web_tools(s).into_iter().map(|t| t.0).collect()
}

fn all_names(s: &mut Sidecar) -> Vec<String> {
    s.ok("tool.list", json!({}))
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// A Tavily-like backend answering `POST /search` with `hits`.
fn tavily(hits: Value) -> Server {
    Server::start(move |req, s| {
        if req.method == "POST" && req.path() == "/search" {
            let body = json!({"query": "x", "results": hits}).to_string();
            reply(s, 200, "application/json", body.as_bytes(), &[]);
        } else {
            reply(s, 404, "text/plain", b"no such route", &[]);
        }
    })
}

fn hit(title: &str, url: &str, content: &str) -> Value {
    json!({"title": title, "url": url, "content": content, "score": 0.5})
}

fn urls(results: &Value) -> Vec<&str> {
    results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["url"].as_str().unwrap())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------------------------

#[test]
fn both_tools_are_read_mode_and_direct() {
    let mut s = sidecar(&[("OUTRIGGER_WEB_SEARCH_PROVIDER", "ddg")]);
    assert_eq!(
        web_tools(&mut s),
        [
            ("web_fetch".into(), "read".into(), "direct".into()),
            ("web_search".into(), "read".into(), "direct".into())
        ]
    );
}

#[test]
fn without_a_search_backend_only_web_fetch_is_registered() {
    let mut s = sidecar(&[]);
    assert_eq!(web_names(&mut s), ["web_fetch"]);
    // An empty key is no key: no silent fallback to another backend.
    let mut s = sidecar(&[
        ("OUTRIGGER_WEB_SEARCH_API_KEY", ""),
        ("TAVILY_API_KEY", " "),
    ]);
    assert_eq!(web_names(&mut s), ["web_fetch"]);
    // tavily named without a key: still no web_search.
    let mut s = sidecar(&[("OUTRIGGER_WEB_SEARCH_PROVIDER", "tavily")]);
    assert_eq!(web_names(&mut s), ["web_fetch"]);
    // The model's key is never the search key.
    let mut s = sidecar(&[("OUTRIGGER_API_KEY", "model-key")]);
    assert_eq!(web_names(&mut s), ["web_fetch"]);
}

#[test]
fn no_web_tools_flag_and_env_remove_both() {
    let key = ("TAVILY_API_KEY", "tv");
    let mut s = sidecar(&[key]);
    assert_eq!(web_names(&mut s), ["web_fetch", "web_search"]);
    let mut s = sidecar_with(&["--no-web-tools"], &[key]);
    assert_eq!(web_names(&mut s), Vec::<String>::new());
    assert!(all_names(&mut s).contains(&"bash".to_string()));
    let mut s = sidecar(&[key, ("OUTRIGGER_WEB_TOOLS", "0")]);
    assert_eq!(web_names(&mut s), Vec::<String>::new());
    let r = s.call(
        "tool.invoke",
        json!({"name": "web_fetch", "arguments": {"url": "http://example.com/"}}),
    );
    assert_eq!(r["result"]["success"], false, "{r}");
}

/// Boots with a bad web setting: the error (naming `needle`) is on stderr, the sidecar serves,
/// and neither web tool is listed.
fn boots_without_web_tools(env: &[(&str, &str)], needle: &str) {
    let mut s = Sidecar::start_with(Opts {
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain([("TAVILY_API_KEY".to_string(), "tv".to_string())])
            .collect(),
        wait_ready: false,
        ..Opts::default()
    });
    let line = s.stderr_line_matching(needle, WAIT);
    assert!(
        line.to_ascii_lowercase().contains("error"),
        "{env:?}: {line}"
    );
    assert_eq!(s.ok("system.ping", json!({}))["status"], "ok", "{env:?}");
    assert_eq!(web_names(&mut s), Vec::<String>::new(), "{env:?}");
    assert!(all_names(&mut s).contains(&"read_file".to_string()));
}

#[test]
fn invalid_bounds_leave_the_web_pair_out_and_the_sidecar_serving() {
    boots_without_web_tools(
        &[("OUTRIGGER_WEB_FETCH_MAX_REDIRECTS", "50")],
        "web_fetch_max_redirects",
    );
    boots_without_web_tools(
        &[("OUTRIGGER_WEB_FETCH_TIMEOUT_MS", "0")],
        "web_fetch_timeout_ms",
    );
    boots_without_web_tools(
        &[("OUTRIGGER_WEB_FETCH_MAX_BYTES", "lots")],
        "web_fetch_max_bytes",
    );
    boots_without_web_tools(
        &[("OUTRIGGER_WEB_SEARCH_MAX_RESULTS", "21")],
        "web_search_max_results",
    );
}

#[test]
fn invalid_provider_overrides_and_private_hosts_leave_the_web_pair_out() {
    boots_without_web_tools(
        &[("OUTRIGGER_WEB_SEARCH_PROVIDER", "bing")],
        "web_search_provider",
    );
    boots_without_web_tools(
        &[(
            "OUTRIGGER_WEB_DNS_OVERRIDES",
            r#"{"a.test": ["not-an-ip"]}"#,
        )],
        "web_dns_overrides",
    );
    boots_without_web_tools(
        &[("OUTRIGGER_WEB_PRIVATE_HOSTS", "10.0.0.0/40")],
        "web_private_hosts",
    );
}

#[test]
fn egress_marker_without_a_proxy_is_a_loud_error_not_a_hang() {
    let started = Instant::now();
    boots_without_web_tools(&[("OUTRIGGER_EGRESS_CONFINED", "1")], "HTTPS_PROXY");
    assert!(started.elapsed() < Duration::from_secs(3));
}

// ---------------------------------------------------------------------------------------------
// web_fetch: content
// ---------------------------------------------------------------------------------------------

const HTML: &str = "<!doctype html><html><head><title>Doc</title>\
<script>var SECRET_SCRIPT_TEXT = 1;</script><style>.x{color:red}</style></head>\
<body><h1>Pinned Resolvers</h1><p>Read the <a href=\"/guide\">guide</a> first.</p>\
<ul><li>one</li><li>two</li></ul></body></html>";

#[test]
fn html_becomes_markdown_without_scripts() {
    let srv = Server::start(|_, s| reply(s, 200, "text/html; charset=utf-8", HTML.as_bytes(), &[]));
    let mut s = sidecar(&[LOCAL]);
    let url = srv.url("/doc");
    let r = fetch(&mut s, &url);
    let d = ok_data(&r);
    assert_eq!(d["url"], url.as_str());
    assert_eq!(d["finalUrl"], url.as_str());
    assert_eq!(d["status"], 200);
    assert_eq!(d["contentType"], "text/html; charset=utf-8");
    assert_eq!(d["bytes"], HTML.len());
    assert_eq!(d["truncated"], false);
    assert!(d["durationMs"].is_u64(), "{d}");
    let md = d["content"].as_str().unwrap();
    assert!(md.contains("Pinned Resolvers"), "{md}");
    assert!(
        !md.contains("SECRET_SCRIPT_TEXT"),
        "script text leaked: {md}"
    );
    assert!(
        !md.contains("<h1>") && !md.contains("<p>"),
        "not Markdown: {md}"
    );
    assert!(
        md.contains("# Pinned Resolvers"),
        "h1 is not a Markdown heading: {md}"
    );
    let req = &srv.requests()[0];
    assert_eq!(req.method, "GET");
    assert_eq!(req.target, "/doc");
}

#[test]
fn json_and_text_pass_through_and_a_pdf_is_refused_with_a_pointer_at_curl() {
    let json_body = r#"{"b": [1, 2], "a": "<h1>not html</h1>"}"#;
    let srv = Server::start(move |req, s| match req.path() {
        "/data.json" => reply(s, 200, "application/json", json_body.as_bytes(), &[]),
        "/notes.txt" => reply(
            s,
            200,
            "text/plain; charset=utf-8",
            b"plain <b>text</b>\n",
            &[],
        ),
        "/paper.pdf" => reply(
            s,
            200,
            "application/pdf",
            b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n",
            &[],
        ),
        _ => reply(s, 404, "text/plain", b"nope", &[]),
    });
    let mut s = sidecar(&[LOCAL]);
    let r = fetch(&mut s, &srv.url("/data.json"));
    let d = ok_data(&r);
    assert_eq!(d["content"], json_body);
    assert_eq!(d["contentType"], "application/json");
    let r = fetch(&mut s, &srv.url("/notes.txt"));
    assert_eq!(ok_data(&r)["content"], "plain <b>text</b>\n");
    let r = fetch(&mut s, &srv.url("/paper.pdf"));
    assert_eq!(fail_code(&r), "unsupported_content_type");
    assert!(error_text(&r).contains("curl"), "{r}");
    assert!(r["data"].get("content").is_none(), "{r}");
}

#[test]
fn a_declared_legacy_charset_is_decoded() {
    let srv = Server::start(|req, s| match req.path() {
        "/latin1.txt" => reply(
            s,
            200,
            "text/plain; charset=iso-8859-1",
            b"caf\xe9 cr\xe8me",
            &[],
        ),
        _ => reply(
            s,
            200,
            "text/html; charset=windows-1252",
            b"<html><body><h1>Caf\xe9 \x93quoted\x94</h1></body></html>",
            &[],
        ),
    });
    let mut s = sidecar(&[LOCAL]);
    let r = fetch(&mut s, &srv.url("/latin1.txt"));
    assert_eq!(ok_data(&r)["content"], "caf\u{e9} cr\u{e8}me", "{r}");
    let r = fetch(&mut s, &srv.url("/cp1252.html"));
    let md = ok_data(&r)["content"].as_str().unwrap().to_string();
    assert!(md.contains("Caf\u{e9} \u{201c}quoted\u{201d}"), "{md:?}");
}

#[test]
fn non_2xx_is_a_failure_with_the_status() {
    let srv = Server::start(|_, s| reply(s, 404, "text/plain", b"no such page", &[]));
    let mut s = sidecar(&[LOCAL]);
    let r = fetch(&mut s, &srv.url("/missing"));
    assert_eq!(fail_code(&r), "http_status");
    assert_eq!(r["data"]["status"], 404);
    assert!(error_text(&r).contains("404"), "{r}");
}

#[test]
fn body_over_the_byte_cap_is_truncated_at_the_cap() {
    let srv = Server::start(|req, s| match req.path() {
        "/big" => reply(s, 200, "text/plain", &[b'a'; 5000], &[]),
        // Exactly the cap: nothing was cut.
        "/exact" => reply(s, 200, "text/plain", &[b'b'; 1000], &[]),
        // No Content-Length, the body ends at close.
        _ => {
            let _ = s.write_all(&head(200, "text/plain", None, &[]));
            let _ = s.write_all(&[b'c'; 3000]);
        }
    });
    let mut s = sidecar(&[LOCAL, ("OUTRIGGER_WEB_FETCH_MAX_BYTES", "1000")]);
    let r = fetch(&mut s, &srv.url("/big"));
    let d = ok_data(&r);
    assert_eq!(d["truncated"], true, "{d}");
    assert_eq!(d["bytes"], 1000);
    assert_eq!(d["content"].as_str().unwrap().len(), 1000);
    let r = fetch(&mut s, &srv.url("/exact"));
    let d = ok_data(&r);
    assert_eq!(d["truncated"], false, "{d}");
    assert_eq!(d["bytes"], 1000);
    let r = fetch(&mut s, &srv.url("/close"));
    let d = ok_data(&r);
    assert_eq!(d["truncated"], true, "{d}");
    assert_eq!(d["bytes"], 1000);
}

#[test]
fn reading_stops_at_the_cap() {
    const TOTAL: usize = 64 << 20;
    let written = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let (w, d) = (written.clone(), done.clone());
    let srv = Server::start(move |_, s| {
        let _ = s.write_all(&head(200, "text/plain", Some(TOTAL), &[]));
        let chunk = vec![b'z'; 64 << 10];
        while w.load(Ordering::SeqCst) < TOTAL {
            if s.write_all(&chunk).is_err() {
                break;
            }
            w.fetch_add(chunk.len(), Ordering::SeqCst);
        }
        d.store(true, Ordering::SeqCst);
    });
    let mut s = sidecar(&[LOCAL, ("OUTRIGGER_WEB_FETCH_MAX_BYTES", "1000")]);
    let r = fetch(&mut s, &srv.url("/endless"));
    let d = ok_data(&r);
    assert_eq!(
        (d["bytes"].as_u64(), d["truncated"].as_bool()),
        (Some(1000), Some(true))
    );
    assert!(
        wait_until(Duration::from_secs(2), || done.load(Ordering::SeqCst)),
        "the server is still writing: the client kept reading past the cap"
    );
    let sent = written.load(Ordering::SeqCst);
    assert!(sent < TOTAL, "the whole {TOTAL}-byte body was read");
}

#[test]
fn a_slow_server_times_out() {
    let srv = Server::start(|req, s| {
        if req.path() == "/slow-head" {
            std::thread::sleep(Duration::from_millis(2000));
            reply(s, 200, "text/plain", b"late", &[]);
        } else {
            // Headers and part of the body at once, the rest late.
            let _ = s.write_all(&head(200, "text/plain", Some(20), &[]));
            let _ = s.write_all(b"0123456789");
            let _ = s.flush();
            std::thread::sleep(Duration::from_millis(2000));
            let _ = s.write_all(b"0123456789");
        }
    });
    let mut s = sidecar(&[LOCAL, ("OUTRIGGER_WEB_FETCH_TIMEOUT_MS", "300")]);
    for path in ["/slow-head", "/slow-body"] {
        let started = Instant::now();
        let r = fetch(&mut s, &srv.url(path));
        assert_eq!(fail_code(&r), "timeout", "{path}: {r}");
        assert!(
            started.elapsed() < Duration::from_millis(1700),
            "{path}: took {:?}",
            started.elapsed()
        );
        assert!(error_text(&r).contains("web_fetch_timeout_ms"), "{r}");
    }
}

// ---------------------------------------------------------------------------------------------
// web_fetch: redirects
// ---------------------------------------------------------------------------------------------

/// `/hop/N` redirects to `/hop/N-1` (relative), `/hop/0` is the page.
fn hop_server() -> Server {
    Server::start(|req, s| {
        let n: u32 = req
            .path()
            .strip_prefix("/hop/")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if n == 0 {
            reply(s, 200, "text/plain", b"arrived", &[]);
        } else {
            redirect(s, &format!("/hop/{}", n - 1));
        }
    })
}

#[test]
fn same_origin_redirect_chain_is_followed_up_to_the_limit() {
    let srv = hop_server();
    let mut s = sidecar(&[LOCAL, ("OUTRIGGER_WEB_FETCH_MAX_REDIRECTS", "3")]);
    let r = fetch(&mut s, &srv.url("/hop/3"));
    let d = ok_data(&r);
    assert_eq!(d["url"], srv.url("/hop/3"));
    assert_eq!(d["finalUrl"], srv.url("/hop/0"));
    assert_eq!(d["content"], "arrived");
    assert_eq!(srv.requests().len(), 4);
    let r = fetch(&mut s, &srv.url("/hop/4"));
    assert_eq!(fail_code(&r), "too_many_redirects");
    assert!(error_text(&r).contains("web_fetch_max_redirects"), "{r}");
    // Never a request past the limit: 4 hops fetched, the 5th refused.
    assert_eq!(srv.requests().len(), 4 + 4);
}

#[test]
fn zero_redirects_allowed_refuses_the_first() {
    let srv = hop_server();
    let mut s = sidecar(&[LOCAL, ("OUTRIGGER_WEB_FETCH_MAX_REDIRECTS", "0")]);
    assert_eq!(fetch(&mut s, &srv.url("/hop/0"))["success"], true);
    assert_eq!(
        fail_code(&fetch(&mut s, &srv.url("/hop/1"))),
        "too_many_redirects"
    );
}

#[test]
fn same_origin_redirect_on_a_host_name_is_followed() {
    let srv = hop_server();
    let port = srv.port;
    let mut s = sidecar(&[
        LOCAL,
        (
            "OUTRIGGER_WEB_DNS_OVERRIDES",
            r#"{"docs.test": ["127.0.0.1"]}"#,
        ),
    ]);
    let r = fetch(&mut s, &format!("http://docs.test:{port}/hop/2"));
    let d = ok_data(&r);
    assert_eq!(d["finalUrl"], format!("http://docs.test:{port}/hop/0"));
    let hosts: Vec<String> = srv
        .requests()
        .iter()
        .map(|r| r.header("host").unwrap_or_default().to_string())
        .collect();
    assert_eq!(hosts, vec![format!("docs.test:{port}"); 3]);
}

#[test]
fn cross_origin_redirect_is_reported_not_followed() {
    let other = page_server();
    let target = other.url("/elsewhere");
    let https_same_host = "https://127.0.0.1/secure".to_string();
    let (t1, t2) = (target.clone(), https_same_host.clone());
    let srv = Server::start(move |req, s| match req.path() {
        "/port" => redirect(s, &t1),
        _ => redirect(s, &t2),
    });
    let mut s = sidecar(&[LOCAL]);
    // Another port is another origin.
    let r = fetch(&mut s, &srv.url("/port"));
    assert_eq!(fail_code(&r), "cross_origin_redirect");
    assert_eq!(r["data"]["redirect_to"], target.as_str());
    assert!(error_text(&r).contains(&target), "{r}");
    assert_eq!(other.accepts(), 0, "the other origin was contacted");
    // Another scheme is another origin.
    let r = fetch(&mut s, &srv.url("/scheme"));
    assert_eq!(fail_code(&r), "cross_origin_redirect");
    assert_eq!(r["data"]["redirect_to"], https_same_host.as_str());
}

#[test]
fn redirects_to_internal_addresses_are_refused() {
    let targets = [
        ("http://127.0.0.1/", "http://127.0.0.1/"),
        ("http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/"),
        ("http://0x7f000001/", "http://127.0.0.1/"),
        ("http://2130706433/", "http://127.0.0.1/"),
        (
            "http://169.254.169.254/latest/meta-data/",
            "http://169.254.169.254/latest/meta-data/",
        ),
    ];
    let srv = Server::start(move |req, s| {
        let i: usize = req.path().trim_start_matches("/to/").parse().unwrap();
        redirect(s, targets[i].0);
    });
    let mut s = sidecar(&[LOCAL]);
    for (i, (raw, normal)) in targets.iter().enumerate() {
        let r = fetch(&mut s, &srv.url(&format!("/to/{i}")));
        assert_eq!(r["success"], false, "{raw}: {r}");
        assert_eq!(r["data"]["code"], "cross_origin_redirect", "{raw}: {r}");
        let to = r["data"]["redirect_to"].as_str().unwrap_or_default();
        assert!(to == *raw || to == *normal, "{raw}: redirect_to {to}");
    }
    assert_eq!(
        srv.requests().len(),
        targets.len(),
        "a refused target was fetched"
    );
}

#[test]
fn every_hop_is_checked_again() {
    // A same-origin hop whose name now resolves to the metadata address is refused.
    let srv = hop_server();
    let port = srv.port;
    let mut s = sidecar(&[
        LOCAL,
        (
            "OUTRIGGER_WEB_DNS_OVERRIDES",
            r#"{"hop.test": [["127.0.0.1"], ["169.254.169.254"]]}"#,
        ),
    ]);
    let r = fetch(&mut s, &format!("http://hop.test:{port}/hop/1"));
    assert_eq!(fail_code(&r), "ssrf_blocked", "{r}");
    assert_eq!(srv.requests().len(), 1);
    // Same origin with credentials: the userinfo is not part of the origin.
    let same = Server::start(|req, s| match req.path() {
        "/start" => {
            let host = req.header("host").unwrap_or_default().to_string();
            redirect(s, &format!("http://user:pw@{host}/inside"))
        }
        _ => reply(s, 200, "text/plain", b"inside", &[]),
    });
    let r = fetch(&mut s, &same.url("/start"));
    assert_eq!(fail_code(&r), "invalid_url", "{r}");
    assert_eq!(same.requests().len(), 1, "the credentialed hop was fetched");
    // A Location with another scheme is refused as a URL, whatever its origin.
    let schemes = Server::start(|req, s| match req.path() {
        "/file" => redirect(s, "file:///etc/passwd"),
        _ => redirect(s, "ftp://127.0.0.1/x"),
    });
    for path in ["/file", "/ftp"] {
        let r = fetch(&mut s, &schemes.url(path));
        assert_eq!(fail_code(&r), "invalid_url", "{path}: {r}");
    }
}

// ---------------------------------------------------------------------------------------------
// web_fetch: SSRF
// ---------------------------------------------------------------------------------------------

#[test]
fn internal_addresses_are_refused_in_every_spelling() {
    let v4 = page_server();
    let v6 = Server::start_on("::1", |_, s| reply(s, 200, "text/plain", b"V6", &[]));
    let (p, p6) = (v4.port, v6.port);
    let mut s = sidecar(&[]);
    for url in [
        format!("http://127.0.0.1:{p}/"),
        format!("http://[::ffff:127.0.0.1]:{p}/"),
        format!("http://0x7f000001:{p}/"),
        format!("http://2130706433:{p}/"),
        format!("http://0177.0.0.1:{p}/"),
        format!("http://127.1:{p}/"),
        format!("http://0.0.0.0:{p}/"),
        format!("http://[::1]:{p6}/"),
        format!("http://[64:ff9b::7f00:1]:{p}/"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[::ffff:169.254.169.254]/".to_string(),
        "http://10.0.0.1/".to_string(),
        "http://192.168.1.1/".to_string(),
        "http://100.64.0.1/".to_string(),
        "http://[fd00::1]/".to_string(),
    ] {
        let started = Instant::now();
        let r = fetch(&mut s, &url);
        assert_eq!(fail_code(&r), "ssrf_blocked", "{url}: {r}");
        assert!(started.elapsed() < Duration::from_secs(1), "{url}");
    }
    assert_eq!(v4.accepts(), 0, "the loopback server was reached");
    assert_eq!(v6.accepts(), 0, "the [::1] server was reached");
    // The same servers with 127.0.0.1 exempt: the v4 one is reached (the test can fail).
    let mut s = sidecar(&[LOCAL]);
    assert_eq!(
        ok_data(&fetch(&mut s, &v4.url("/")))["content"],
        "LOOPBACK-PAGE"
    );
}

#[test]
fn localhost_is_refused() {
    let srv = page_server();
    let mut s = sidecar(&[]);
    let r = fetch(&mut s, &format!("http://localhost:{}/", srv.port));
    assert_eq!(fail_code(&r), "ssrf_blocked", "{r}");
    let r = fetch(&mut s, &format!("http://LOCALHOST.:{}/", srv.port));
    assert_eq!(fail_code(&r), "ssrf_blocked", "{r}");
    assert_eq!(srv.accepts(), 0);
}

#[test]
fn a_name_with_a_public_and_a_private_answer_is_refused() {
    let srv = page_server();
    let mut s = sidecar(&[(
        "OUTRIGGER_WEB_DNS_OVERRIDES",
        r#"{"mixed.test": ["93.184.216.34", "127.0.0.1"], "meta.test": ["169.254.169.254"]}"#,
    )]);
    let r = fetch(&mut s, &format!("http://mixed.test:{}/", srv.port));
    assert_eq!(fail_code(&r), "ssrf_blocked", "{r}");
    assert!(error_text(&r).contains("127.0.0.1"), "{r}");
    let r = fetch(&mut s, "http://meta.test/latest/meta-data/");
    assert_eq!(fail_code(&r), "ssrf_blocked", "{r}");
    assert_eq!(srv.accepts(), 0);
}

#[test]
fn a_rebinding_name_stays_pinned_to_the_checked_answer() {
    let srv = page_server();
    let url = format!("http://rebind.test:{}/", srv.port);
    let overrides = r#"{"rebind.test": [["93.184.216.34"], ["127.0.0.1"]]}"#;
    // The first lookup answers public, the next loopback: the connection goes to the public
    // address it checked (refused here), never to loopback.
    let mut s = sidecar(&[("OUTRIGGER_WEB_DNS_OVERRIDES", overrides)]);
    let r = fetch(&mut s, &url);
    assert_eq!(r["success"], false, "{r}");
    assert_ne!(r["data"]["content"], "LOOPBACK-PAGE", "{r}");
    assert_eq!(srv.accepts(), 0, "the loopback server saw a connection");
    // Even with loopback exempt (a second lookup would pass the check), the first fetch uses
    // the first answer only.
    let mut s = sidecar(&[LOCAL, ("OUTRIGGER_WEB_DNS_OVERRIDES", overrides)]);
    let r = fetch(&mut s, &url);
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(srv.accepts(), 0, "the loopback server saw a connection");
    // The next fetch takes the next answer (loopback, exempt): the server is reachable, so
    // the assertions above could fail.
    let r = fetch(&mut s, &url);
    assert_eq!(ok_data(&r)["content"], "LOOPBACK-PAGE");
    assert_eq!(srv.accepts(), 1);
}

#[test]
fn malformed_urls_are_refused() {
    let mut s = sidecar(&[LOCAL]);
    for url in [
        "http://u:p@x.test/".to_string(),
        "https://user@x.test/".to_string(),
        "ftp://x.test/file".to_string(),
        "file:///etc/passwd".to_string(),
        "not a url".to_string(),
        "http://".to_string(),
        "http://[::1/".to_string(),
    ] {
        let r = fetch(&mut s, &url);
        assert_eq!(fail_code(&r), "invalid_url", "{url}: {r}");
    }
}

#[test]
fn urls_over_2048_bytes_are_refused_as_invalid_url() {
    let srv = page_server();
    let mut s = sidecar(&[LOCAL]);
    let base = srv.url("/");
    // 2048 bytes is still fine.
    let edge = format!("{base}{}", "a".repeat(2048 - base.len()));
    assert_eq!(ok_data(&fetch(&mut s, &edge))["content"], "LOOPBACK-PAGE");
    // Bytes, not characters: 1100 two-byte characters.
    let wide = format!("{base}{}", "\u{e9}".repeat(1100));
    let r = fetch(&mut s, &wide);
    assert_eq!(fail_code(&r), "invalid_url", "{r}");
    // 2049 ASCII bytes.
    let long = format!("{base}{}", "a".repeat(2049 - base.len()));
    assert_eq!(long.len(), 2049);
    let r = fetch(&mut s, &long);
    assert_eq!(r["success"], false);
    let shown: String = r.to_string().chars().take(300).collect();
    assert_eq!(r["data"]["code"], "invalid_url", "{shown}");
    assert_eq!(srv.accepts(), 1);
}

#[test]
fn private_hosts_take_names_and_ipv6_addresses_in_a_json_list() {
    let v6 = Server::start_on("::1", |_, s| reply(s, 200, "text/plain", b"V6", &[]));
    let v4 = page_server();
    // A host name exempt by name.
    let mut s = sidecar(&[
        ("OUTRIGGER_WEB_PRIVATE_HOSTS", "docs.internal"),
        (
            "OUTRIGGER_WEB_DNS_OVERRIDES",
            r#"{"docs.internal": ["127.0.0.1"]}"#,
        ),
    ]);
    let r = fetch(&mut s, &format!("http://docs.internal:{}/", v4.port));
    assert_eq!(ok_data(&r)["content"], "LOOPBACK-PAGE");
    // Another name on the same address is not exempt.
    let mut s = sidecar(&[
        ("OUTRIGGER_WEB_PRIVATE_HOSTS", "docs.internal"),
        (
            "OUTRIGGER_WEB_DNS_OVERRIDES",
            r#"{"other.internal": ["127.0.0.1"]}"#,
        ),
    ]);
    let r = fetch(&mut s, &format!("http://other.internal:{}/", v4.port));
    assert_eq!(fail_code(&r), "ssrf_blocked");
    // JSON list form with an IPv6 address.
    let mut s = sidecar(&[("OUTRIGGER_WEB_PRIVATE_HOSTS", r#"["::1"]"#)]);
    let r = fetch(&mut s, &v6.url("/"));
    assert_eq!(r["data"]["content"], "V6", "::1 in a JSON list: {r}");
    assert_eq!(v4.accepts() + v6.accepts(), 2);
}

#[test]
fn private_hosts_comma_list_takes_an_ipv6_address() {
    let v6 = Server::start_on("::1", |_, s| reply(s, 200, "text/plain", b"V6", &[]));
    let mut s = sidecar(&[("OUTRIGGER_WEB_PRIVATE_HOSTS", "127.0.0.1,::1")]);
    let r = fetch(&mut s, &v6.url("/"));
    assert_eq!(r["data"]["content"], "V6", "::1 in a comma list: {r}");
}

#[test]
fn private_hosts_comma_list_takes_an_ipv6_cidr() {
    let mut s = sidecar(&[("OUTRIGGER_WEB_PRIVATE_HOSTS", "127.0.0.0/8,fd00::/8")]);
    assert_eq!(
        web_names(&mut s),
        ["web_fetch"],
        "an IPv6 CIDR in a comma list turned the web tools off"
    );
}

// ---------------------------------------------------------------------------------------------
// web_fetch: domain lists and caps
// ---------------------------------------------------------------------------------------------

#[test]
fn allowed_domains_cover_subdomains_and_refuse_others_before_dns() {
    let srv = page_server();
    let p = srv.port;
    let mut s = sidecar(&[
        LOCAL,
        ("OUTRIGGER_WEB_ALLOWED_DOMAINS", "example.test,docs.test"),
        (
            "OUTRIGGER_WEB_DNS_OVERRIDES",
            r#"{"sub.example.test": ["127.0.0.1"], "example.test": ["127.0.0.1"]}"#,
        ),
    ]);
    assert_eq!(
        ok_data(&fetch(&mut s, &format!("http://sub.example.test:{p}/")))["content"],
        "LOOPBACK-PAGE"
    );
    assert_eq!(
        ok_data(&fetch(&mut s, &format!("http://example.test:{p}/")))["content"],
        "LOOPBACK-PAGE"
    );
    assert_eq!(srv.accepts(), 2);
    // No DNS answer exists for these names: the refusal comes before any lookup.
    for url in [
        format!("http://other.test:{p}/"),
        format!("http://badexample.test:{p}/"),
        format!("http://example.test.evil.test:{p}/"),
        format!("http://127.0.0.1:{p}/"),
    ] {
        let r = fetch(&mut s, &url);
        assert_eq!(fail_code(&r), "domain_not_allowed", "{url}: {r}");
        assert!(error_text(&r).contains("web_allowed_domains"), "{r}");
    }
    assert_eq!(srv.accepts(), 2);
}

#[test]
fn blocked_domains_win_over_allowed_in_any_spelling() {
    let srv = page_server();
    let p = srv.port;
    let mut s = sidecar(&[
        LOCAL,
        ("OUTRIGGER_WEB_ALLOWED_DOMAINS", "example.test"),
        ("OUTRIGGER_WEB_BLOCKED_DOMAINS", "secret.example.test"),
        (
            "OUTRIGGER_WEB_DNS_OVERRIDES",
            r#"{"secret.example.test": ["127.0.0.1"], "a.secret.example.test": ["127.0.0.1"]}"#,
        ),
    ]);
    for url in [
        format!("http://secret.example.test:{p}/"),
        format!("http://a.secret.example.test:{p}/"),
        format!("http://SECRET.Example.TEST:{p}/"),
        format!("http://secret.example.test.:{p}/"),
        format!("http://secret%2Eexample.test:{p}/"),
    ] {
        let r = fetch(&mut s, &url);
        assert_eq!(fail_code(&r), "domain_blocked", "{url}: {r}");
        assert!(error_text(&r).contains("web_blocked_domains"), "{r}");
    }
    assert_eq!(srv.accepts(), 0);
    // A blocked list alone refuses only what it names.
    let mut s = sidecar(&[("OUTRIGGER_WEB_BLOCKED_DOMAINS", "bad.test")]);
    assert_eq!(
        fail_code(&fetch(&mut s, "http://x.bad.test/")),
        "domain_blocked"
    );
}

#[test]
fn the_fetch_cap_counts_per_process() {
    let srv = page_server();
    let mut s = sidecar(&[LOCAL, ("OUTRIGGER_WEB_SESSION_FETCH_CAP", "2")]);
    for _ in 0..2 {
        assert_eq!(
            ok_data(&fetch(&mut s, &srv.url("/")))["content"],
            "LOOPBACK-PAGE"
        );
    }
    let r = fetch(&mut s, &srv.url("/"));
    assert_eq!(fail_code(&r), "session_cap");
    assert!(error_text(&r).contains("web_session_fetch_cap"), "{r}");
    assert_eq!(r["needsFollowup"], true, "{r}");
    assert_eq!(srv.accepts(), 2);
}

// ---------------------------------------------------------------------------------------------
// web_search: Tavily
// ---------------------------------------------------------------------------------------------

#[test]
fn tavily_gets_the_key_and_body_and_its_hits_are_mapped() {
    let srv = tavily(json!([
        {"title": "Rust", "url": "https://www.rust-lang.org/", "content": "A language.",
         "published_date": "2024-05-01"},
        hit("Tokio", "https://tokio.rs/", "Async runtime."),
        hit("Docs", "https://docs.rs/", "Crate docs."),
    ]));
    let base = srv.url("");
    let mut s = sidecar(&[
        ("OUTRIGGER_WEB_SEARCH_API_KEY", "tv-key"),
        ("TAVILY_API_KEY", "other-key"),
        ("OUTRIGGER_API_KEY", "model-key"),
        ("OUTRIGGER_WEB_SEARCH_BASE_URL", &base),
    ]);
    let r = search(&mut s, json!({"query": "rust async", "maxResults": 2}));
    let d = ok_data(&r);
    assert_eq!(d["query"], "rust async");
    assert_eq!(d["provider"], "tavily");
    assert_eq!(d["resultCount"], 2);
    assert_eq!(
        d["results"],
        json!([
            {"title": "Rust", "url": "https://www.rust-lang.org/", "snippet": "A language.",
             "publishedAt": "2024-05-01"},
            {"title": "Tokio", "url": "https://tokio.rs/", "snippet": "Async runtime."}
        ])
    );
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(
        (req.method.as_str(), req.target.as_str()),
        ("POST", "/search")
    );
    assert_eq!(req.header("authorization"), Some("Bearer tv-key"));
    assert!(
        req.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{req:?}"
    );
    assert_eq!(req.json(), json!({"query": "rust async", "max_results": 2}));
}

#[test]
fn tavily_key_from_tavily_api_key_and_default_max_results() {
    let srv = tavily(json!([]));
    let base = srv.url("/");
    let mut s = sidecar(&[
        ("TAVILY_API_KEY", "tk-2"),
        ("OUTRIGGER_WEB_SEARCH_PROVIDER", "tavily"),
        ("OUTRIGGER_WEB_SEARCH_BASE_URL", &base),
        ("OUTRIGGER_WEB_SEARCH_MAX_RESULTS", "3"),
    ]);
    let d = ok_data(&search(&mut s, json!({"query": "q"}))).clone();
    assert_eq!(
        (d["resultCount"].clone(), d["results"].clone()),
        (json!(0), json!([]))
    );
    let req = &srv.requests()[0];
    assert_eq!(req.target, "/search");
    assert_eq!(req.header("authorization"), Some("Bearer tk-2"));
    assert_eq!(req.json(), json!({"query": "q", "max_results": 3}));
}

#[test]
fn tavily_gets_the_domain_lists_and_hits_are_filtered_after() {
    let srv = tavily(json!([
        hit(
            "Blog",
            "https://blog.rust-lang.org/2024/",
            "blocked subdomain"
        ),
        hit("Main", "https://www.rust-lang.org/learn", "allowed"),
        hit("Evil", "https://evil.test/rust", "not allowed"),
        hit(
            "Shout",
            "https://BLOG.Rust-Lang.org./x",
            "blocked, other spelling"
        ),
        hit("Docs", "https://docs.rs/tokio", "allowed"),
        hit("Junk", "not a url", "dropped"),
        hit(
            "More",
            "https://rust-lang.org/more",
            "allowed, over maxResults"
        ),
    ]));
    let base = srv.url("");
    let mut s = sidecar(&[
        ("OUTRIGGER_WEB_SEARCH_API_KEY", "k"),
        ("OUTRIGGER_WEB_SEARCH_BASE_URL", &base),
        ("OUTRIGGER_WEB_ALLOWED_DOMAINS", "rust-lang.org,docs.rs"),
        ("OUTRIGGER_WEB_BLOCKED_DOMAINS", "blog.rust-lang.org"),
    ]);
    let r = search(&mut s, json!({"query": "rust", "maxResults": 2}));
    let d = ok_data(&r);
    assert_eq!(
        urls(&d["results"]),
        ["https://www.rust-lang.org/learn", "https://docs.rs/tokio"]
    );
    assert_eq!(d["resultCount"], 2);
    assert_eq!(
        srv.requests()[0].json(),
        json!({"query": "rust", "max_results": 2,
               "include_domains": ["rust-lang.org", "docs.rs"],
               "exclude_domains": ["blog.rust-lang.org"]})
    );
}

#[test]
fn tavily_errors_are_failed_results() {
    let srv =
        Server::start(|_, s| reply(s, 401, "application/json", br#"{"detail": "bad key"}"#, &[]));
    let base = srv.url("");
    let mut s = sidecar(&[
        ("OUTRIGGER_WEB_SEARCH_API_KEY", "k"),
        ("OUTRIGGER_WEB_SEARCH_BASE_URL", &base),
    ]);
    let r = search(&mut s, json!({"query": "rust"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(error_text(&r).contains("401"), "{r}");
    // An empty query never reaches the backend.
    let r = search(&mut s, json!({"query": "  "}));
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn the_search_cap_counts_per_process() {
    let srv = tavily(json!([hit("A", "https://a.test/", "a")]));
    let base = srv.url("");
    let mut s = sidecar(&[
        ("OUTRIGGER_WEB_SEARCH_API_KEY", "k"),
        ("OUTRIGGER_WEB_SEARCH_BASE_URL", &base),
        ("OUTRIGGER_WEB_SESSION_SEARCH_CAP", "2"),
    ]);
    for _ in 0..2 {
        assert_eq!(
            ok_data(&search(&mut s, json!({"query": "a"})))["resultCount"],
            1
        );
    }
    let r = search(&mut s, json!({"query": "a"}));
    assert_eq!(fail_code(&r), "session_cap");
    assert!(error_text(&r).contains("web_session_search_cap"), "{r}");
    assert_eq!(srv.requests().len(), 2);
}

// ---------------------------------------------------------------------------------------------
// web_search: DuckDuckGo lite
// ---------------------------------------------------------------------------------------------

/// A small DuckDuckGo-lite-like results page (the saved real one is
/// `tests/fixtures/web/ddg_lite.html`).
const DDG_PAGE: &str = r#"<!DOCTYPE html>
<html><head><title>rust lang at DuckDuckGo</title></head><body>
<form action="/lite/" method="post"><input name="q" value="rust lang"></form>
<table border="0">
  <tr><td valign="top">1.&nbsp;</td>
      <td><a rel="nofollow" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust-lang.org%2F&amp;rut=abc" class='result-link'>Rust Programming Language</a></td></tr>
  <tr><td>&nbsp;&nbsp;&nbsp;</td>
      <td class='result-snippet'>A language empowering everyone to build <b>reliable</b> and efficient software.</td></tr>
  <tr><td>&nbsp;&nbsp;&nbsp;</td><td><span class='link-text'>www.rust-lang.org</span></td></tr>
  <tr><td>&nbsp;</td><td>&nbsp;</td></tr>
  <tr><td valign="top">2.&nbsp;</td>
      <td><a rel="nofollow" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fdoc.rust%2Dlang.org%2Fstd%2F%3Fsearch%3Dvec%26x%3D1&amp;rut=def" class='result-link'>std - Rust &amp; friends</a></td></tr>
  <tr><td>&nbsp;&nbsp;&nbsp;</td>
      <td class='result-snippet'>The Rust Standard Library.</td></tr>
  <tr><td>&nbsp;&nbsp;&nbsp;</td><td><span class='link-text'>doc.rust-lang.org/std</span></td></tr>
  <tr><td>&nbsp;</td><td>&nbsp;</td></tr>
  <tr><td valign="top">3.&nbsp;</td>
      <td><a rel="nofollow" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fblocked.test%2Fpage&amp;rut=ghi" class='result-link'>Blocked Page</a></td></tr>
  <tr><td>&nbsp;&nbsp;&nbsp;</td>
      <td class='result-snippet'>Should be dropped.</td></tr>
  <tr><td>&nbsp;</td><td>&nbsp;</td></tr>
  <tr><td valign="top">4.&nbsp;</td>
      <td><a rel="nofollow" href="https://crates.io/crates/tokio" class='result-link'>tokio - crates.io</a></td></tr>
  <tr><td>&nbsp;&nbsp;&nbsp;</td>
      <td class='result-snippet'>An event-driven, non-blocking I/O platform.</td></tr>
</table>
</body></html>"#;

fn ddg_server(page: String) -> Server {
    Server::start(move |req, s| {
        if req.method == "GET" && req.path() == "/lite/" {
            reply(s, 200, "text/html; charset=utf-8", page.as_bytes(), &[]);
        } else {
            reply(s, 404, "text/plain", b"no", &[]);
        }
    })
}

/// The `q` parameter of a request target, decoded.
fn query_param(target: &str) -> String {
    let q = target.split_once('?').map(|x| x.1).unwrap_or_default();
    let raw = q
        .split('&')
        .find_map(|kv| kv.strip_prefix("q="))
        .unwrap_or_default()
        .replace('+', " ");
    let bytes = raw.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn ddg_lite_results_are_parsed() {
    let srv = ddg_server(DDG_PAGE.to_string());
    let base = srv.url("");
    let mut s = sidecar(&[
        ("OUTRIGGER_WEB_SEARCH_PROVIDER", "ddg"),
        ("OUTRIGGER_WEB_SEARCH_BASE_URL", &base),
        ("OUTRIGGER_WEB_BLOCKED_DOMAINS", "blocked.test"),
    ]);
    let r = search(&mut s, json!({"query": "rust lang & more"}));
    let d = ok_data(&r);
    assert_eq!(d["provider"], "ddg");
    let req = &srv.requests()[0];
    assert_eq!((req.method.as_str(), req.path()), ("GET", "/lite/"));
    assert_eq!(query_param(&req.target), "rust lang & more");
    assert_eq!(
        urls(&d["results"]),
        [
            "https://www.rust-lang.org/",
            "https://doc.rust-lang.org/std/?search=vec&x=1",
            "https://crates.io/crates/tokio"
        ],
        "{d}"
    );
    assert_eq!(d["resultCount"], 3);
    let first = &d["results"][0];
    assert_eq!(first["title"], "Rust Programming Language");
    let snip = first["snippet"].as_str().unwrap();
    assert!(
        snip.contains("build reliable and efficient software"),
        "snippet not as text: {snip:?}"
    );
    assert_eq!(d["results"][1]["title"], "std - Rust & friends");
    assert_eq!(d["results"][1]["snippet"], "The Rust Standard Library.");
    // maxResults caps what comes back.
    let r = search(&mut s, json!({"query": "rust", "maxResults": 1}));
    assert_eq!(
        urls(&ok_data(&r)["results"]),
        ["https://www.rust-lang.org/"]
    );
}

#[test]
fn ddg_saved_page_parses_without_the_ad() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/web/ddg_lite.html"
    );
    let page = std::fs::read_to_string(path).unwrap();
    let srv = ddg_server(page);
    let base = srv.url("");
    let mut s = sidecar(&[
        ("OUTRIGGER_WEB_SEARCH_PROVIDER", "ddg"),
        ("OUTRIGGER_WEB_SEARCH_BASE_URL", &base),
    ]);
    let r = search(&mut s, json!({"query": "rust programming language"}));
    let d = ok_data(&r);
    assert_eq!(
        urls(&d["results"]),
        [
            "https://www.rust-lang.org/",
            "https://doc.rust-lang.org/book/ch01-01-installation.html?lang=en&v=1.95#installing-rustup-on-linux",
            "https://en.wikipedia.org/wiki/Rust_(programming_language)",
            "https://github.com/rust-lang/rust"
        ],
        "{d}"
    );
    let titles: Vec<&str> = d["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles[1], "Installation - The Rust Programming Language");
    let wiki = d["results"][2]["snippet"].as_str().unwrap();
    assert!(
        wiki.starts_with("Rust is a general-purpose programming language emphasizing"),
        "{wiki:?}"
    );
    assert!(
        wiki.contains("memory safety\u{2014}meaning"),
        "entity not decoded: {wiki:?}"
    );
    let install = d["results"][1]["snippet"].as_str().unwrap();
    assert!(install.contains("We'll download Rust"), "{install:?}");
}

// ---------------------------------------------------------------------------------------------
// web_search: the host
// ---------------------------------------------------------------------------------------------

fn host_hits() -> Value {
    json!([
        {"title": "Tokio", "url": "https://tokio.rs/a", "snippet": "runtime", "publishedAt": "2025-01-02"},
        {"title": "Blog", "url": "https://blog.rust-lang.org/x", "snippet": "blocked"},
        {"title": "Evil", "url": "https://evil.test/", "snippet": "not allowed"},
        {"title": "Rust", "url": "https://www.rust-lang.org/", "snippet": "allowed"},
        {"title": "Tokio B", "url": "https://tokio.rs/b", "snippet": "over maxResults"}
    ])
}

const HOST_ENV: [(&str, &str); 3] = [
    ("OUTRIGGER_WEB_SEARCH_PROVIDER", "host"),
    ("OUTRIGGER_WEB_ALLOWED_DOMAINS", "rust-lang.org,tokio.rs"),
    ("OUTRIGGER_WEB_BLOCKED_DOMAINS", "blog.rust-lang.org"),
];

#[test]
fn host_backend_round_trip_over_tool_invoke() {
    let mut s = sidecar(&HOST_ENV);
    assert_eq!(web_names(&mut s), ["web_fetch", "web_search"]);
    s.send(
        &json!({"jsonrpc": "2.0", "id": "inv1", "method": "tool.invoke", "params": {
        "name": "web_search", "id": "call_ws", "arguments": {"query": "tokio", "maxResults": 2}}}),
    );
    let req = reverse(&mut s, "tool.invoke");
    let p = &req["params"];
    assert_eq!(p["name"], "web_search");
    assert_eq!(p["id"], "call_ws");
    assert_eq!(
        p["arguments"],
        json!({"query": "tokio", "maxResults": 2,
               "allowedDomains": ["rust-lang.org", "tokio.rs"],
               "blockedDomains": ["blog.rust-lang.org"]})
    );
    assert!(p["context"].is_object(), "{req}");
    answer(
        &mut s,
        &req,
        json!({"success": true, "data": {"results": host_hits()}}),
    );
    let resp = s.response(&json!("inv1"));
    let d = ok_data(&resp["result"]);
    assert_eq!(d["provider"], "host");
    assert_eq!(d["query"], "tokio");
    assert_eq!(
        d["results"],
        json!([
            {"title": "Tokio", "url": "https://tokio.rs/a", "snippet": "runtime", "publishedAt": "2025-01-02"},
            {"title": "Rust", "url": "https://www.rust-lang.org/", "snippet": "allowed"}
        ])
    );
    assert_eq!(d["resultCount"], 2);
}

#[test]
fn host_backend_failure_is_a_failed_result() {
    let mut s = sidecar(&[("OUTRIGGER_WEB_SEARCH_PROVIDER", "host")]);
    s.send(
        &json!({"jsonrpc": "2.0", "id": "inv2", "method": "tool.invoke", "params": {
        "name": "web_search", "arguments": {"query": "tokio"}}}),
    );
    let req = reverse(&mut s, "tool.invoke");
    assert_eq!(req["params"]["arguments"]["maxResults"], 8);
    assert_eq!(req["params"]["arguments"]["allowedDomains"], json!([]));
    answer(
        &mut s,
        &req,
        json!({"success": false, "error": "quota exceeded"}),
    );
    let resp = s.response(&json!("inv2"));
    let r = &resp["result"];
    assert_eq!(r["success"], false, "{resp}");
    assert!(error_text(r).contains("quota exceeded"), "{r}");
}

#[test]
fn host_backend_in_a_turn() {
    let mut s = sidecar(&HOST_ENV);
    let p = merge(
        scripted(
            json!([
                {"toolCalls": [{"id": "w1", "name": "web_search", "arguments": {"query": "tokio"}}]},
                {"text": "found it"}
            ]),
            "search tokio",
        ),
        json!({"recordId": "rec_web_host", "chatId": "chat_web"}),
    );
    let id = start(&mut s, p);
    let (st, reqs) = drive(&mut s, &id, |r| {
        if r["method"] == "tool.invoke" && r["params"]["name"] == "web_search" {
            Reply::Result(json!({"success": true, "data": {"results": host_hits()}}))
        } else {
            Reply::Error(-32601, "Method not found".into())
        }
    });
    assert_eq!(st.done["status"], "completed", "{:?}", st.done);
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    let p = &reqs[0]["params"];
    assert_eq!(p["id"], "w1");
    assert_eq!(p["arguments"]["query"], "tokio");
    assert_eq!(p["context"]["streamId"], id.as_str());
    assert_eq!(p["context"]["chatId"], "chat_web");
    let body = tool_body(&messages(&mut s, "rec_web_host"), "w1");
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(
        urls(&body["data"]["results"]),
        [
            "https://tokio.rs/a",
            "https://www.rust-lang.org/",
            "https://tokio.rs/b"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Egress proxy
// ---------------------------------------------------------------------------------------------

#[test]
fn egress_confined_sends_both_tools_through_the_proxy() {
    let direct = page_server();
    let search_target = format!("{}/search", direct.url(""));
    let st = search_target.clone();
    let proxy = Server::start(move |req, s| {
        if req.method == "CONNECT" {
            reply(s, 403, "text/plain", b"host not in the allow-list", &[]);
        } else if req.target == "http://docs.test/page" {
            reply(s, 200, "text/plain", b"VIA-PROXY", &[]);
        } else if req.target == st {
            let body = json!({"results": [hit("A", "https://a.test/", "a")]}).to_string();
            reply(s, 200, "application/json", body.as_bytes(), &[]);
        } else {
            reply(s, 502, "text/plain", b"unexpected", &[]);
        }
    });
    let proxy_url = proxy.url("");
    let base = direct.url("");
    let mut s = sidecar(&[
        ("OUTRIGGER_EGRESS_CONFINED", "1"),
        ("HTTPS_PROXY", &proxy_url),
        (
            "OUTRIGGER_WEB_DNS_OVERRIDES",
            r#"{"docs.test": ["93.184.216.34"]}"#,
        ),
        ("OUTRIGGER_WEB_SEARCH_API_KEY", "k"),
        ("OUTRIGGER_WEB_SEARCH_BASE_URL", &base),
    ]);
    assert_eq!(web_names(&mut s), ["web_fetch", "web_search"]);
    let r = fetch(&mut s, "http://docs.test/page");
    assert_eq!(ok_data(&r)["content"], "VIA-PROXY");
    let r = search(&mut s, json!({"query": "a"}));
    assert_eq!(ok_data(&r)["resultCount"], 1, "{r}");
    assert_eq!(direct.accepts(), 0, "a request bypassed the proxy");
    let seen: Vec<(String, String)> = proxy
        .requests()
        .iter()
        .map(|r| (r.method.clone(), r.target.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            ("GET".to_string(), "http://docs.test/page".to_string()),
            ("POST".to_string(), search_target.clone())
        ]
    );
    // The SSRF pre-check still runs: an internal address never reaches the proxy.
    let r = fetch(&mut s, "http://169.254.169.254/latest/meta-data/");
    assert_eq!(fail_code(&r), "ssrf_blocked", "{r}");
    let r = fetch(&mut s, "http://localhost/");
    assert_eq!(fail_code(&r), "ssrf_blocked", "{r}");
    assert_eq!(proxy.requests().len(), 2);
    // A proxy refusal (CONNECT 403) names the allow-list.
    let r = fetch(&mut s, "https://docs.test/secure");
    assert_eq!(fail_code(&r), "proxy_refused", "{r}");
    assert!(error_text(&r).contains("web_allowed_domains"), "{r}");
}
