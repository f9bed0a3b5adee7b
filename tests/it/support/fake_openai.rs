//! A fake OpenAI-compatible server on loopback: HTTP/1.1, one reply per connection, taken
//! from a queue (the last reply repeats). Records every request it receives.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

pub fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sse")
        .join(format!("{name}.sse"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Written in pieces of this many bytes, each flushed (exercises split reads).
    pub piece: usize,
    /// Keep the connection open after the body (a stalled stream).
    pub hang: bool,
}

impl Reply {
    pub fn sse(body: Vec<u8>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
            body,
            piece: 7,
            hang: false,
        }
    }

    pub fn fixture(name: &str) -> Reply {
        Reply::sse(fixture(name))
    }

    pub fn status(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.as_bytes().to_vec(),
            piece: usize::MAX,
            hang: false,
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn hang(mut self) -> Reply {
        self.hang = true;
        self
    }
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct FakeServer {
    pub port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stop: Arc<AtomicBool>,
}

impl FakeServer {
    pub fn start(replies: Vec<Reply>) -> FakeServer {
        assert!(!replies.is_empty());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (reqs, stop2) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0usize;
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let reply = replies[n.min(replies.len() - 1)].clone();
                n += 1;
                let (reqs, stop3) = (reqs.clone(), stop2.clone());
                std::thread::spawn(move || serve(conn, reply, reqs, stop3));
            }
        });
        FakeServer {
            port,
            requests,
            stop,
        }
    }

    /// `http://127.0.0.1:PORT/v1`
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Reads one HTTP/1.1 request (request line, headers, `Content-Length` body); `None` when the
/// connection closes first.
pub fn read_request(conn: &TcpStream) -> Option<Recorded> {
    let mut r = BufReader::new(conn.try_clone().ok()?);
    let mut line = String::new();
    if r.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap_or(0) == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some(Recorded {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

fn serve(conn: TcpStream, reply: Reply, reqs: Arc<Mutex<Vec<Recorded>>>, stop: Arc<AtomicBool>) {
    let Some(req) = read_request(&conn) else {
        return;
    };
    reqs.lock().unwrap().push(req);
    let mut w = conn;
    let mut head = format!("HTTP/1.1 {} Fake\r\nConnection: close\r\n", reply.status);
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !reply.hang && reply.piece == usize::MAX {
        head.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
    }
    head.push_str("\r\n");
    if w.write_all(head.as_bytes()).is_err() {
        return;
    }
    for piece in reply.body.chunks(reply.piece.max(1)) {
        if w.write_all(piece).and_then(|_| w.flush()).is_err() {
            return;
        }
    }
    if reply.hang {
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
