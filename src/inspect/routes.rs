//! The inspector's HTTP surface: the token and host checks, the embedded page, and the JSON
//! endpoints. The JSON is the protocol's own shapes (`agent.session.messages`,
//! `agent.session.tree`, `trace.fetch`) wherever one exists.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use percent_encoding::percent_decode_str;
use serde::Serialize;
use serde_json::{Value, json};

use super::State;
use crate::agent::persist::transcript;
use crate::agent::trace::{from_stored, mark_interrupted};
use crate::protocol::session::{SessionTreeResult, TraceHeader};
use crate::store::{Store, StoreError};

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The page's policy: its own scripts and styles only, no inline code, no other origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `/api/records` page size: default and ceiling.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 500;
/// Trace headers listed per record at most.
const MAX_TRACES: usize = 1000;
/// Characters of a search text.
const MAX_QUERY_CHARS: usize = 200;

type Reply = Response<Full<Bytes>>;

/// An error answer: `{"error": {"code", "message"}}` with the same HTTP status.
struct Failure(StatusCode, String);

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        match e {
            StoreError::RecordNotFound(_) => Failure(StatusCode::NOT_FOUND, e.to_string()),
            _ => Failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Reply {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

fn json_reply(status: StatusCode, v: &impl Serialize) -> Reply {
    let body = serde_json::to_vec(v).unwrap_or_else(|_| b"null".to_vec());
    reply(status, "application/json", body)
}

fn failure(f: Failure) -> Reply {
    let Failure(status, message) = f;
    let mut r = json_reply(
        status,
        &json!({"error": {"code": status.as_u16(), "message": message}}),
    );
    if status == StatusCode::METHOD_NOT_ALLOWED {
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    r
}

/// The query's parameters, percent-decoded (`+` as a space, as forms send it).
fn query_params(req: &Request<Incoming>) -> Vec<(String, String)> {
    let decode = |s: &str| {
        percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    req.uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(kv), String::new()),
        })
        .collect()
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Equal without an early exit, so the time taken does not tell how much of a guess matched.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The Host header must name this server: a page on another origin that rebinds its DNS
/// name to 127.0.0.1 sends its own name, and is refused.
fn host_ok(state: &State, req: &Request<Incoming>) -> bool {
    let Some(host) = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
    else {
        return false;
    };
    let port = state.port.to_string();
    ["127.0.0.1", "localhost"]
        .iter()
        .any(|name| host.strip_prefix(name).and_then(|r| r.strip_prefix(':')) == Some(&port))
}

fn check_access(
    state: &State,
    req: &Request<Incoming>,
    params: &[(String, String)],
) -> Result<(), Failure> {
    if !host_ok(state, req) {
        return Err(Failure(
            StatusCode::FORBIDDEN,
            format!(
                "this inspector answers only to http://127.0.0.1:{port}/ or \
                 http://localhost:{port}/ (the Host header named another server)",
                port = state.port
            ),
        ));
    }
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let given = bearer.or_else(|| param(params, "token"));
    match given {
        None => Err(Failure(
            StatusCode::UNAUTHORIZED,
            "a token is required: open the URL `outrigger inspect` printed (it ends in \
             ?token=…), or send Authorization: Bearer <token>"
                .into(),
        )),
        Some(t) if !same(t.trim(), &state.token) => Err(Failure(
            StatusCode::FORBIDDEN,
            "wrong token: use the one this `outrigger inspect` printed (a new one each run)".into(),
        )),
        Some(_) => Ok(()),
    }
}

/// Answers one request; never fails (errors are JSON answers).
pub async fn handle(state: Arc<State>, req: Request<Incoming>) -> Reply {
    let params = query_params(&req);
    if let Err(f) = check_access(&state, &req, &params) {
        return failure(f);
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return failure(Failure(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "{} is not served: the inspector is read-only (GET only)",
                req.method()
            ),
        ));
    }
    let raw: Vec<&str> = req.uri().path().split('/').skip(1).collect();
    let segments: Vec<String> = raw
        .iter()
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let seg: Vec<&str> = segments.iter().map(String::as_str).collect();
    let answer = match seg.as_slice() {
        [""] => Ok(reply(
            StatusCode::OK,
            "text/html; charset=utf-8",
            INDEX.replace("__TOKEN__", &state.token),
        )),
        ["app.js"] => Ok(reply(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            APP_JS,
        )),
        ["app.css"] => Ok(reply(StatusCode::OK, "text/css; charset=utf-8", APP_CSS)),
        ["api", rest @ ..] => api(&state, rest, &params).await,
        _ => Err(Failure(
            StatusCode::NOT_FOUND,
            format!("no such page: {}", req.uri().path()),
        )),
    };
    let mut r = answer.unwrap_or_else(failure);
    if r.headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/html"))
    {
        r.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    r
}

/// One session in the list (`GET /api/records`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RecordItem {
    record_id: String,
    title: String,
    label: Option<String>,
    source_record_id: Option<String>,
    source_until_seq: Option<i64>,
    created_at: String,
    updated_at: String,
    entry_count: u64,
    trace_count: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RecordPage {
    records: Vec<RecordItem>,
    limit: usize,
    offset: usize,
    truncated: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RecordTraces {
    record_id: String,
    traces: Vec<TraceHeader>,
}

/// Marks a stored `running` trace `interrupted` when no live process can still be running
/// it: nobody holds the store's lease, or the holder took it after the trace started (a
/// later sidecar on the same database). A trace a live sidecar is running stays `running`.
/// `lease_since` is `leased_since(state)`, read once per request.
fn settle(lease_since: Option<u64>, h: &mut TraceHeader) {
    if h.status == "running" && lease_since.is_none_or(|since| h.started_at_ms < since) {
        mark_interrupted(h);
    }
}

/// Since when (ms since the epoch) a live process holds the store's lease.
fn leased_since(state: &State) -> Option<u64> {
    crate::store::lease::held_since(state.store.path()).map(|t| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    })
}

/// A store call on the blocking pool (rusqlite blocks).
async fn read<T: Send + 'static>(
    state: &Arc<State>,
    f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, Failure> {
    let state = state.clone();
    match tokio::task::spawn_blocking(move || f(&state.store)).await {
        Ok(r) => r.map_err(Failure::from),
        Err(e) => Err(Failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the store read failed: {e}"),
        )),
    }
}

fn bounded_number(
    params: &[(String, String)],
    name: &str,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, Failure> {
    let Some(v) = param(params, name) else {
        return Ok(default);
    };
    match v.trim().parse::<usize>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(Failure(
            StatusCode::BAD_REQUEST,
            format!(
                "{name} must be a whole number from {} to {}, got {v:?}",
                range.start(),
                range.end()
            ),
        )),
    }
}

async fn api(
    state: &Arc<State>,
    seg: &[&str],
    params: &[(String, String)],
) -> Result<Reply, Failure> {
    match seg {
        ["info"] => {
            let version = read(state, Store::schema_version).await?;
            Ok(json_reply(
                StatusCode::OK,
                &json!({
                    "storagePath": state.store.path().display().to_string(),
                    "schemaVersion": version,
                    "readOnly": true,
                    "version": env!("CARGO_PKG_VERSION"),
                }),
            ))
        }
        ["records"] => {
            let limit = bounded_number(params, "limit", DEFAULT_LIMIT, 1..=MAX_LIMIT)?;
            let offset = bounded_number(params, "offset", 0, 0..=usize::MAX / 2)?;
            let q = param(params, "q").map(str::trim).filter(|q| !q.is_empty());
            if q.is_some_and(|q| q.chars().count() > MAX_QUERY_CHARS) {
                return Err(Failure(
                    StatusCode::BAD_REQUEST,
                    format!("q is longer than {MAX_QUERY_CHARS} characters"),
                ));
            }
            let q = q.map(str::to_string);
            let (rows, truncated) = read(state, move |s| {
                s.browse_records(q.as_deref(), limit, offset)
            })
            .await?;
            let records = rows
                .into_iter()
                .map(|r| RecordItem {
                    record_id: r.record_id,
                    title: r.title,
                    label: r.label,
                    source_record_id: r.source_record_id,
                    source_until_seq: r.source_until_seq,
                    created_at: r.created_at,
                    updated_at: r.updated_at,
                    entry_count: r.entry_count,
                    trace_count: r.trace_count,
                })
                .collect();
            Ok(json_reply(
                StatusCode::OK,
                &RecordPage {
                    records,
                    limit,
                    offset,
                    truncated,
                },
            ))
        }
        ["records", id, "messages"] => {
            let id = id.to_string();
            let projected = {
                let id = id.clone();
                read(state, move |s| s.projection(&id)).await?
            };
            Ok(json_reply(StatusCode::OK, &transcript(id, projected)))
        }
        ["records", id, "tree"] => {
            let id = id.to_string();
            let tree = read(state, move |s| s.tree(&id)).await?;
            Ok(json_reply(StatusCode::OK, &SessionTreeResult::from(tree)))
        }
        ["records", id, "traces"] => {
            let id = id.to_string();
            let headers = {
                let id = id.clone();
                read(state, move |s| {
                    if !s.record_exists(&id)? {
                        return Err(StoreError::RecordNotFound(id));
                    }
                    s.traces_for_record(&id, MAX_TRACES)
                })
                .await?
            };
            let since = leased_since(state);
            // Headers that no longer read as one are left out (tolerant reads).
            let traces = headers
                .into_iter()
                .filter_map(|v: Value| serde_json::from_value(v).ok())
                .map(|mut h| {
                    settle(since, &mut h);
                    h
                })
                .collect();
            Ok(json_reply(
                StatusCode::OK,
                &RecordTraces {
                    record_id: id,
                    traces,
                },
            ))
        }
        ["traces", id] => {
            let id = id.to_string();
            let body = {
                let id = id.clone();
                read(state, move |s| s.get_trace(&id)).await?
            };
            match body.map(from_stored) {
                Some(Ok(mut t)) => {
                    settle(leased_since(state), &mut t.trace);
                    Ok(json_reply(StatusCode::OK, &t))
                }
                Some(Err(e)) => Err(Failure(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("trace {id} is stored but cannot be read: {e}"),
                )),
                None => Err(Failure(
                    StatusCode::NOT_FOUND,
                    format!("trace not found: {id}"),
                )),
            }
        }
        _ => Err(Failure(
            StatusCode::NOT_FOUND,
            format!(
                "no such endpoint: /api/{} (see docs/observability.md for the list)",
                seg.join("/")
            ),
        )),
    }
}
