//! `view_image` over the pipes: the tool itself through `tool.invoke` (formats, region, scaling,
//! output format, failures, containment), the image reaching the model in the next request of
//! a chat (a fake OpenAI server records it; the data URL is decoded and checked), text-only
//! models, durable storage under `$OUTRIGGER_HOME/images/` with a resume in a new process, and
//! `read_file` on an image pointing at `view_image`. Every image is generated here.

use std::fs;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Duration;

use image::codecs::gif::GifEncoder;
use image::{DynamicImage, Frame, GenericImageView, ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
use serde_json::{Value, json};
use sha2::Digest;

use crate::common::{Opts, Sidecar};
use crate::support::chat_helpers::{Streamed, messages, run};
use crate::support::fake_openai::{FakeServer, Recorded, Reply};

const MIB: usize = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Images
// ---------------------------------------------------------------------------------------------

/// R = x, G = y (mod 256), B = 77: every pixel says where it came from.
fn gradient(w: u32, h: u32) -> RgbImage {
    RgbImage::from_fn(w, h, |x, y| Rgb([x as u8, y as u8, 77]))
}

fn encode(img: &DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

fn gradient_as(w: u32, h: u32, format: ImageFormat) -> Vec<u8> {
    encode(&DynamicImage::ImageRgb8(gradient(w, h)), format)
}

fn png(w: u32, h: u32) -> Vec<u8> {
    gradient_as(w, h, ImageFormat::Png)
}

fn jpeg(w: u32, h: u32) -> Vec<u8> {
    gradient_as(w, h, ImageFormat::Jpeg)
}

/// An animated GIF whose first frame is red and second blue.
fn gif_red_then_blue(w: u32, h: u32) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = GifEncoder::new(&mut out);
        let red = RgbaImage::from_pixel(w, h, Rgba([255, 0, 0, 255]));
        let blue = RgbaImage::from_pixel(w, h, Rgba([0, 0, 255, 255]));
        enc.encode_frames(vec![Frame::new(red), Frame::new(blue)])
            .unwrap();
    }
    out
}

/// One source file of each format, `(name, bytes)`, all `w`×`h`.
fn five_formats(w: u32, h: u32) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("pic.png", png(w, h)),
        ("photo.jpg", jpeg(w, h)),
        ("anim.gif", gif_red_then_blue(w, h)),
        ("pic.webp", gradient_as(w, h, ImageFormat::WebP)),
        ("pic.bmp", gradient_as(w, h, ImageFormat::Bmp)),
    ]
}

/// Pseudo-random bytes (xorshift), so a PNG of them does not compress.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A value for a failure message, cut short (request bodies carry base64 images).
fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(2000) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

fn base64_decode(text: &str) -> Vec<u8> {
    fn val(c: u8) -> u32 {
        u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not standard base64: byte {c}"),
        })
    }
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c) << (18 - 6 * i);
        }
        out.push((n >> 16) as u8);
        if chunk.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(n as u8);
        }
    }
    out
}

/// Each channel of `got` within `tol` of `want`.
fn near(got: [u8; 3], want: [u8; 3], tol: i32) -> bool {
    got.iter()
        .zip(want)
        .all(|(g, w)| (i32::from(*g) - i32::from(w)).abs() <= tol)
}

fn rgb_at(img: &DynamicImage, x: u32, y: u32) -> [u8; 3] {
    let p = img.get_pixel(x, y).0;
    [p[0], p[1], p[2]]
}

// ---------------------------------------------------------------------------------------------
// tool.invoke on a workspace
// ---------------------------------------------------------------------------------------------

struct Ws {
    s: Sidecar,
    dir: tempfile::TempDir,
}

impl Ws {
    fn start() -> Ws {
        Ws {
            s: Sidecar::start(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn p(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }

    fn put(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.p(name);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, bytes).unwrap();
        p
    }

    fn invoke_in(&mut self, cwd: &Path, name: &str, args: Value) -> Value {
        self.s.ok(
            "tool.invoke",
            json!({"name": name, "arguments": args, "context": {"cwd": cwd}}),
        )
    }

    fn invoke(&mut self, name: &str, args: Value) -> Value {
        let root = self.root().to_path_buf();
        self.invoke_in(&root, name, args)
    }

    /// The `data` of a successful `view_image`, its documented keys checked.
    fn view(&mut self, args: Value) -> Value {
        let r = self.invoke("view_image", args.clone());
        assert_eq!(r["success"], true, "view_image {args} failed: {r}");
        let d = r["data"].clone();
        let path = args["path"].as_str().unwrap();
        check_data(&d, path, &self.p(path));
        d
    }

    /// The whole result of a failed, recoverable call.
    fn fail(&mut self, name: &str, args: Value) -> Value {
        let r = self.invoke(name, args.clone());
        assert_eq!(r["success"], false, "{name} {args} succeeded: {r}");
        assert_eq!(r["needsFollowup"], true, "{name} {args}: {r}");
        r
    }

    /// `data.code` of a failed, recoverable `view_image`.
    fn code(&mut self, args: Value) -> String {
        let r = self.fail("view_image", args);
        r["data"]["code"].as_str().unwrap_or_default().to_string()
    }
}

/// The success `data` keys every `view_image` result carries (`imageSent` is checked by the
/// tests that know what it should be).
fn check_data(d: &Value, path: &str, file: &Path) {
    // A relative path comes back as given (an absolute one as the workspace shows it).
    if Path::new(path).is_relative() {
        assert_eq!(d["path"], path, "{d}");
    }
    let src = d["sourcePath"].as_str().unwrap_or_else(|| panic!("{d}"));
    assert!(Path::new(src).is_absolute(), "{d}");
    assert_eq!(
        fs::canonicalize(src).unwrap(),
        fs::canonicalize(file).unwrap(),
        "{d}"
    );
    for k in ["width", "height", "sourceWidth", "sourceHeight", "bytes"] {
        assert!(d[k].as_u64().is_some_and(|n| n > 0), "{k}: {d}");
    }
    assert!(
        ["image/png", "image/jpeg"].contains(&d["mediaType"].as_str().unwrap_or_default()),
        "{d}"
    );
    let sha = d["sha256"].as_str().unwrap_or_default();
    assert!(
        sha.len() == 64
            && sha
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
        "sha256: {d}"
    );
}

fn dims(d: &Value) -> (u64, u64) {
    (d["width"].as_u64().unwrap(), d["height"].as_u64().unwrap())
}

fn source_dims(d: &Value) -> (u64, u64) {
    (
        d["sourceWidth"].as_u64().unwrap(),
        d["sourceHeight"].as_u64().unwrap(),
    )
}

// ---------------------------------------------------------------------------------------------
// Chats against the fake OpenAI server
// ---------------------------------------------------------------------------------------------

/// An SSE reply whose assistant message calls `view_image` once per `(id, arguments)`.
fn view_calls_sse(calls: &[(&str, Value)]) -> Vec<u8> {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, args))| {
            json!({"index": i, "id": id, "type": "function",
                   "function": {"name": "view_image", "arguments": args.to_string()}})
        })
        .collect();
    let first = json!({"id": "chatcmpl-vi", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null,
        "tool_calls": tool_calls}, "finish_reason": null}]});
    let last = json!({"id": "chatcmpl-vi", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    format!("data: {first}\n\ndata: {last}\n\ndata: [DONE]\n\n").into_bytes()
}

fn view_reply(id: &str, args: Value) -> Reply {
    Reply::sse(view_calls_sse(&[(id, args)]))
}

fn turn_params(server: &FakeServer, model: &str, cwd: &Path, record: &str, user: &str) -> Value {
    json!({"provider": "openai_compat", "model": model, "baseUrl": server.base_url(),
           "apiKey": "k", "cwd": cwd, "recordId": record, "maxRounds": 6,
           "messages": [{"role": "user", "content": user}]})
}

/// An image as the model received it.
struct Sent {
    media: String,
    bytes: Vec<u8>,
    img: DynamicImage,
}

fn decode_data_url(url: &str) -> Sent {
    let rest = url
        .strip_prefix("data:")
        .unwrap_or_else(|| panic!("not a data URL: {}", &url[..url.len().min(80)]));
    let (media, b64) = rest
        .split_once(";base64,")
        .unwrap_or_else(|| panic!("not a base64 data URL: {}", &url[..url.len().min(80)]));
    let bytes = base64_decode(b64);
    let want = match media {
        "image/png" => ImageFormat::Png,
        "image/jpeg" => ImageFormat::Jpeg,
        other => panic!("data URL media type {other}"),
    };
    assert_eq!(
        image::guess_format(&bytes).unwrap(),
        want,
        "bytes are not {media}"
    );
    let img = image::load_from_memory_with_format(&bytes, want).unwrap();
    Sent {
        media: media.to_string(),
        bytes,
        img,
    }
}

/// Every `image_url` URL in a request's messages, in order.
fn image_urls(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        if let Some(parts) = m["content"].as_array() {
            for p in parts {
                if p["type"] == "image_url" {
                    out.push(p["image_url"]["url"].as_str().unwrap().to_string());
                }
            }
        }
    }
    out
}

/// The index of the message right after the tool messages of the round that answered `call_id`.
fn after_round(body: &Value, call_id: &str) -> usize {
    let msgs = body["messages"].as_array().unwrap();
    let i = msgs
        .iter()
        .position(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool message for {call_id}: {body}"));
    let mut j = i;
    while j + 1 < msgs.len() && msgs[j + 1]["role"] == "tool" {
        j += 1;
    }
    j + 1
}

/// The parsed tool result the request carried for `call_id`.
fn tool_result(body: &Value, call_id: &str) -> Value {
    let m = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool message for {call_id}: {body}"));
    let text = m["content"].as_str().unwrap_or_else(|| panic!("{m}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("tool content is not JSON ({e}): {text}"))
}

/// The user message after `call_id`'s round: a text part naming `path` and one image part,
/// decoded.
fn sent_after(body: &Value, call_id: &str, path: &str) -> Sent {
    let msgs = body["messages"].as_array().unwrap();
    let k = after_round(body, call_id);
    let m = msgs
        .get(k)
        .unwrap_or_else(|| panic!("no message after the round of {call_id}: {}", short(body)));
    assert_eq!(m["role"], "user", "{}", short(m));
    let parts = m["content"]
        .as_array()
        .unwrap_or_else(|| panic!("content is not a list of parts: {}", short(m)));
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "text" && p["text"].as_str().is_some_and(|t| t.contains(path))),
        "no text part naming {path}: {}",
        short(m)
    );
    let images: Vec<&Value> = parts.iter().filter(|p| p["type"] == "image_url").collect();
    assert_eq!(images.len(), 1, "{}", short(m));
    decode_data_url(images[0]["image_url"]["url"].as_str().unwrap())
}

/// A sidecar and a workspace for chat turns; each `view` runs a turn on a fresh fake server.
struct Chat {
    s: Sidecar,
    ws: tempfile::TempDir,
    turns: usize,
}

struct Turn {
    run: Streamed,
    reqs: Vec<Recorded>,
}

impl Turn {
    /// The second request's body: the one after the tool round.
    fn next_body(&self) -> &Value {
        &self.reqs[1].body
    }

    fn result(&self) -> Value {
        tool_result(self.next_body(), "v1")
    }

    fn data(&self) -> Value {
        self.result()["data"].clone()
    }

    fn sent(&self, path: &str) -> Sent {
        sent_after(self.next_body(), "v1", path)
    }
}

impl Chat {
    fn start() -> Chat {
        Chat {
            s: Sidecar::start(),
            ws: tempfile::tempdir().unwrap(),
            turns: 0,
        }
    }

    fn put(&self, name: &str, bytes: impl AsRef<[u8]>) {
        fs::write(self.ws.path().join(name), bytes).unwrap();
    }

    /// One turn: the model calls `view_image` with `args` (call id `v1`), then answers.
    fn view(&mut self, model: &str, args: Value) -> Turn {
        self.turns += 1;
        let server = FakeServer::start(vec![
            view_reply("v1", args.clone()),
            Reply::fixture("openai_reference"),
        ]);
        let record = format!("rec_view_{}", self.turns);
        let p = turn_params(&server, model, self.ws.path(), &record, "look at it");
        let r = run(&mut self.s, p);
        assert_eq!(r.done["status"], "completed", "{args}: {:?}", r.frames);
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2, "{args}");
        let t = Turn { run: r, reqs };
        let res = t.result();
        assert_eq!(res["success"], true, "{args}: {res}");
        t
    }
}

// ---------------------------------------------------------------------------------------------
// Registration, formats
// ---------------------------------------------------------------------------------------------

#[test]
fn view_image_is_a_read_tool() {
    let mut w = Ws::start();
    let list = w.s.ok("tool.list", Value::Null);
    let tool = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "view_image")
        .unwrap_or_else(|| panic!("view_image not listed"))
        .clone();
    assert_eq!(tool["mode"], "read", "{tool}");
    let props = &tool["function"]["parameters"]["properties"];
    for k in ["path", "region", "maxEdge", "format"] {
        assert!(props.get(k).is_some(), "{k} not in the schema: {tool}");
    }
}

#[test]
fn each_of_the_five_formats_decodes_with_its_default_output() {
    let mut w = Ws::start();
    for (name, bytes) in five_formats(64, 48) {
        w.put(name, &bytes);
        let d = w.view(json!({"path": name}));
        assert_eq!(dims(&d), (64, 48), "{name}: {d}");
        assert_eq!(source_dims(&d), (64, 48), "{name}: {d}");
        let want = if name.ends_with(".jpg") {
            "image/jpeg"
        } else {
            "image/png"
        };
        assert_eq!(d["mediaType"], want, "{name}: {d}");
    }
    // The encoding is deterministic: the same view gives the same bytes.
    let a = w.view(json!({"path": "pic.png"}));
    let b = w.view(json!({"path": "pic.png"}));
    assert_eq!(a["sha256"], b["sha256"]);
    assert_eq!(a["bytes"], b["bytes"]);
}

#[test]
fn the_model_sees_the_pixels_of_every_format_and_the_first_gif_frame() {
    let mut c = Chat::start();
    let src = gradient(64, 48);
    for (name, bytes) in five_formats(64, 48) {
        c.put(name, &bytes);
        let t = c.view("fake-model", json!({"path": name}));
        let sent = t.sent(name);
        let d = t.data();
        assert_eq!(sent.img.dimensions(), (64, 48), "{name}");
        assert_eq!(sent.media, d["mediaType"], "{name}");
        match name {
            "anim.gif" => {
                // The first frame (red), never the second (blue).
                for (x, y) in [(0, 0), (32, 24), (63, 47)] {
                    let p = rgb_at(&sent.img, x, y);
                    assert!(near(p, [255, 0, 0], 8), "{name} ({x},{y}) = {p:?}");
                }
            }
            "photo.jpg" => {
                assert_eq!(sent.media, "image/jpeg");
                for (x, y) in [(8, 8), (32, 24), (56, 40)] {
                    let p = rgb_at(&sent.img, x, y);
                    let want = src.get_pixel(x, y).0;
                    assert!(near(p, want, 24), "{name} ({x},{y}) = {p:?} want {want:?}");
                }
            }
            _ => {
                assert_eq!(sent.media, "image/png");
                assert_eq!(sent.img.to_rgb8(), src, "{name}: pixels differ");
            }
        }
    }
}

#[test]
fn a_direct_invoke_result_has_every_documented_key() {
    let mut w = Ws::start();
    w.put("pic.png", png(20, 10));
    let d = w.view(json!({"path": "pic.png"}));
    // No model saw it: `imageSent` is there, and false.
    assert_eq!(d["imageSent"], false, "{}", short(&d));
}

// ---------------------------------------------------------------------------------------------
// Region
// ---------------------------------------------------------------------------------------------

#[test]
fn region_in_pixels_or_fractions_is_cropped_and_clipped() {
    let mut w = Ws::start();
    w.put("g.png", png(200, 100));
    let cases = [
        // Pixels.
        (json!({"x": 10, "y": 20, "w": 30, "h": 40}), (30, 40)),
        // Fractions: all four ≤ 1.
        (json!({"x": 0.5, "y": 0.25, "w": 0.25, "h": 0.5}), (50, 50)),
        (json!({"x": 0, "y": 0, "w": 1, "h": 1}), (200, 100)),
        // One number over 1 makes all four pixels (x = y = 1 px here, not the far edge).
        (json!({"x": 1, "y": 1, "w": 20, "h": 10}), (20, 10)),
        // Clipped to the image, in pixels and in fractions.
        (json!({"x": 150, "y": 50, "w": 100, "h": 100}), (50, 50)),
        (json!({"x": 0.75, "y": 0.5, "w": 0.5, "h": 1}), (50, 50)),
    ];
    for (region, want) in cases {
        let d = w.view(json!({"path": "g.png", "region": region}));
        assert_eq!(dims(&d), want, "{region}: {d}");
        assert_eq!(source_dims(&d), (200, 100), "{region}: {d}");
    }
    // The region is cut first, then scaled to maxEdge.
    let d = w.view(
        json!({"path": "g.png", "region": {"x": 0, "y": 0, "w": 100, "h": 50}, "maxEdge": 20}),
    );
    assert_eq!(dims(&d), (20, 10), "{d}");
}

#[test]
fn the_crop_takes_the_pixels_of_the_region() {
    let mut c = Chat::start();
    c.put("g.png", png(200, 100));
    let src = gradient(200, 100);
    // (region, size, origin in the source)
    let cases = [
        (
            json!({"x": 10, "y": 20, "w": 30, "h": 40}),
            (30, 40),
            (10, 20),
        ),
        (
            json!({"x": 0.5, "y": 0.25, "w": 0.25, "h": 0.5}),
            (50, 50),
            (100, 25),
        ),
        (json!({"x": 1, "y": 1, "w": 20, "h": 10}), (20, 10), (1, 1)),
        (
            json!({"x": 150, "y": 50, "w": 100, "h": 100}),
            (50, 50),
            (150, 50),
        ),
    ];
    for (region, (w, h), (ox, oy)) in cases {
        let t = c.view(
            "fake-model",
            json!({"path": "g.png", "region": region, "format": "png"}),
        );
        let sent = t.sent("g.png");
        assert_eq!(sent.img.dimensions(), (w, h), "{region}");
        let want = image::imageops::crop_imm(&src, ox, oy, w, h).to_image();
        assert_eq!(sent.img.to_rgb8(), want, "{region}: wrong pixels");
    }
}

#[test]
fn bad_regions_are_refused() {
    let mut w = Ws::start();
    w.put("g.png", png(200, 100));
    for region in [
        json!({"x": 0, "y": 0, "w": 0, "h": 10}),
        json!({"x": 0, "y": 0, "w": 10, "h": -5}),
        json!({"x": 0, "y": 0, "w": 0, "h": 0.5}),
        json!({"x": 0.5, "y": 0.5, "w": -0.25, "h": 0.25}),
        // Entirely outside: past the right edge, starting on the bottom edge, fractions past 1.
        json!({"x": 300, "y": 0, "w": 10, "h": 10}),
        json!({"x": 0, "y": 100, "w": 10, "h": 10}),
        json!({"x": 1, "y": 0, "w": 0.5, "h": 0.5}),
    ] {
        assert_eq!(
            w.code(json!({"path": "g.png", "region": region})),
            "bad_region",
            "{region}"
        );
    }
    // A region without all four numbers is a recoverable failure too.
    w.fail(
        "view_image",
        json!({"path": "g.png", "region": {"x": 0, "y": 0, "w": 10}}),
    );
}

// ---------------------------------------------------------------------------------------------
// maxEdge, format
// ---------------------------------------------------------------------------------------------

#[test]
fn max_edge_scales_down_never_up_keeping_the_aspect_ratio() {
    let mut w = Ws::start();
    let cases = [
        // (source, maxEdge, output)
        ((400, 200), json!(100), (100, 50)),
        ((300, 200), json!(100), (100, 67)),
        ((200, 300), json!(100), (67, 100)),
        ((1000, 3), json!(10), (10, 1)),
        ((3, 1000), json!(10), (1, 10)),
        ((200, 100), json!(1), (1, 1)),
        // Never up.
        ((50, 40), json!(1000), (50, 40)),
        ((50, 40), json!(4096), (50, 40)),
        ((50, 40), json!(50), (50, 40)),
        // Default 1568.
        ((3136, 20), Value::Null, (1568, 10)),
        ((20, 3000), Value::Null, (10, 1568)),
        ((1568, 20), Value::Null, (1568, 20)),
        ((1000, 700), Value::Null, (1000, 700)),
    ];
    for ((sw, sh), max_edge, want) in cases {
        let name = format!("s_{sw}x{sh}.png");
        if !w.p(&name).exists() {
            w.put(&name, png(sw, sh));
        }
        let mut args = json!({"path": name});
        if !max_edge.is_null() {
            args["maxEdge"] = max_edge.clone();
        }
        let d = w.view(args);
        assert_eq!(dims(&d), want, "{sw}x{sh} maxEdge {max_edge}: {d}");
        assert_eq!(source_dims(&d), (u64::from(sw), u64::from(sh)), "{d}");
    }
}

#[test]
fn max_edge_out_of_range_is_an_invalid_arguments_failure() {
    let mut w = Ws::start();
    w.put("g.png", png(40, 20));
    for bad in [
        json!(0),
        json!(4097),
        json!(-1),
        json!(100000),
        json!("big"),
    ] {
        let r = w.fail("view_image", json!({"path": "g.png", "maxEdge": bad}));
        assert!(
            r["error"].as_str().unwrap_or_default().contains("maxEdge"),
            "maxEdge {bad}: {r}"
        );
    }
    assert_eq!(
        dims(&w.view(json!({"path": "g.png", "maxEdge": 1}))),
        (1, 1)
    );
    assert_eq!(
        dims(&w.view(json!({"path": "g.png", "maxEdge": 4096}))),
        (40, 20)
    );
}

#[test]
fn format_is_chosen_or_defaults_to_the_source_kind() {
    let mut w = Ws::start();
    w.put("pic.png", png(40, 30));
    w.put("photo.jpg", jpeg(40, 30));
    let alpha = RgbaImage::from_fn(40, 30, |x, y| Rgba([x as u8, y as u8, 9, (x * 6) as u8]));
    w.put(
        "alpha.png",
        encode(&DynamicImage::ImageRgba8(alpha), ImageFormat::Png),
    );
    let media = |w: &mut Ws, args: Value| w.view(args)["mediaType"].clone();
    assert_eq!(media(&mut w, json!({"path": "pic.png"})), "image/png");
    assert_eq!(media(&mut w, json!({"path": "photo.jpg"})), "image/jpeg");
    assert_eq!(
        media(&mut w, json!({"path": "pic.png", "format": "jpeg"})),
        "image/jpeg"
    );
    assert_eq!(
        media(&mut w, json!({"path": "photo.jpg", "format": "png"})),
        "image/png"
    );
    assert_eq!(
        media(&mut w, json!({"path": "photo.jpg", "format": "jpeg"})),
        "image/jpeg"
    );
    // A transparent source still makes a JPEG.
    assert_eq!(
        media(&mut w, json!({"path": "alpha.png", "format": "jpeg"})),
        "image/jpeg"
    );
    assert_eq!(media(&mut w, json!({"path": "alpha.png"})), "image/png");
    // Only png and jpeg.
    w.fail("view_image", json!({"path": "pic.png", "format": "webp"}));
    w.fail("view_image", json!({"path": "pic.png", "format": "gif"}));
}

#[test]
fn the_model_gets_the_format_it_asked_for() {
    let mut c = Chat::start();
    c.put("pic.png", png(40, 30));
    c.put("photo.jpg", jpeg(40, 30));
    let t = c.view("fake-model", json!({"path": "pic.png", "format": "jpeg"}));
    let sent = t.sent("pic.png");
    assert_eq!(sent.media, "image/jpeg");
    assert_eq!(&sent.bytes[..2], &[0xff, 0xd8]);
    assert_eq!(t.data()["mediaType"], "image/jpeg");
    let t = c.view("fake-model", json!({"path": "photo.jpg"}));
    assert_eq!(t.sent("photo.jpg").media, "image/jpeg");
    let t = c.view("fake-model", json!({"path": "photo.jpg", "format": "png"}));
    let sent = t.sent("photo.jpg");
    assert_eq!(sent.media, "image/png");
    assert_eq!(&sent.bytes[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn an_encoded_image_over_5_mib_is_made_to_fit() {
    let mut w = Ws::start();
    // 1200×1200 RGBA noise: a PNG of ~5.5 MiB source (under the 10 MiB source cap) whose PNG
    // re-encoding cannot fit 5 MiB.
    let img = RgbaImage::from_raw(1200, 1200, noise(1200 * 1200 * 4)).unwrap();
    let bytes = encode(&DynamicImage::ImageRgba8(img), ImageFormat::Png);
    assert!(
        bytes.len() > 5 * MIB && bytes.len() < 10 * MIB,
        "{}",
        bytes.len()
    );
    w.put("noise.png", &bytes);
    // The encode is slow in a debug build: wait longer than `call` does.
    let id = json!("big_view");
    w.s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tool.invoke",
        "params": {"name": "view_image", "arguments": {"path": "noise.png"},
                   "context": {"cwd": w.root()}}}));
    let resp = w.s.wait_for(Duration::from_secs(240), |v| {
        v["id"] == "big_view" && v.get("method").is_none()
    });
    let r = &resp["result"];
    assert_eq!(r["success"], true, "{}", short(&resp));
    let d = &r["data"];
    check_data(d, "noise.png", &w.p("noise.png"));
    assert_eq!(d["mediaType"], "image/jpeg", "{d}");
    assert!(d["bytes"].as_u64().unwrap() <= 5 * MIB as u64, "{d}");
    assert_eq!(source_dims(d), (1200, 1200));
    // Quality first, then size: either way the aspect ratio holds.
    let (ow, oh) = dims(d);
    assert_eq!(ow, oh, "{d}");
}

// ---------------------------------------------------------------------------------------------
// Failures, containment
// ---------------------------------------------------------------------------------------------

#[test]
fn too_large_not_image_and_decode_failed() {
    let mut w = Ws::start();
    // An uncompressed BMP over 10 MiB.
    let big = gradient_as(1900, 1900, ImageFormat::Bmp);
    assert!(big.len() > 10 * MIB, "{}", big.len());
    w.put("big.bmp", &big);
    assert_eq!(w.code(json!({"path": "big.bmp"})), "too_large");

    w.put("notes.txt", "just some text\n");
    assert_eq!(w.code(json!({"path": "notes.txt"})), "not_image");
    w.put("zeros.bin", vec![0u8; 4096]);
    assert_eq!(w.code(json!({"path": "zeros.bin"})), "not_image");
    // The content decides, not the name.
    w.put("fake.png", "not a picture at all\n");
    assert_eq!(w.code(json!({"path": "fake.png"})), "not_image");

    let mut corrupt = b"\x89PNG\r\n\x1a\n".to_vec();
    corrupt.extend(noise(2000));
    w.put("corrupt.png", &corrupt);
    assert_eq!(w.code(json!({"path": "corrupt.png"})), "decode_failed");
    let whole = png(64, 64);
    w.put("cut.png", &whole[..whole.len() / 2]);
    assert_eq!(w.code(json!({"path": "cut.png"})), "decode_failed");

    // A missing file and a directory fail, recoverably.
    w.fail("view_image", json!({"path": "missing.png"}));
    fs::create_dir(w.p("dir.png")).unwrap();
    w.fail("view_image", json!({"path": "dir.png"}));
}

#[test]
fn paths_outside_the_workspace_and_blocked_paths_are_refused() {
    let mut w = Ws::start();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.png");
    fs::write(&secret, png(10, 10)).unwrap();
    w.put("inside.png", png(10, 10));
    for path in [
        "../secret.png".to_string(),
        secret.display().to_string(),
        "a/../../secret.png".to_string(),
    ] {
        assert_eq!(w.code(json!({"path": path})), "path_escapes", "{path}");
    }
    std::os::unix::fs::symlink(&secret, w.p("link.png")).unwrap();
    assert_eq!(w.code(json!({"path": "link.png"})), "path_escapes");
    // Relative paths resolve against the workspace.
    w.view(json!({"path": "inside.png"}));
    let abs = w.p("inside.png").display().to_string();
    w.view(json!({"path": abs}));

    // Blocked paths inside the workspace (here OUTRIGGER_HOME, as in fs_tools).
    let home = w.s.home.path().to_path_buf();
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/key.png"), png(10, 10)).unwrap();
    fs::create_dir_all(home.join("secrets")).unwrap();
    fs::write(home.join("secrets/shot.png"), png(10, 10)).unwrap();
    for path in [".ssh/key.png", "secrets/shot.png"] {
        let r = w.invoke_in(&home, "view_image", json!({"path": path}));
        assert_eq!(r["success"], false, "{path}: {r}");
        assert_eq!(r["data"]["code"], "path_blocked", "{path}: {r}");
    }
}

// ---------------------------------------------------------------------------------------------
// The image in the next provider request
// ---------------------------------------------------------------------------------------------

#[test]
fn the_next_request_carries_the_image_after_the_tool_messages() {
    let mut c = Chat::start();
    c.put("pic.png", png(120, 80));
    let t = c.view("fake-model", json!({"path": "pic.png", "maxEdge": 60}));
    // Offered like read_file; the first request has no image.
    let first = &t.reqs[0].body;
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["function"]["name"] == "view_image"),
        "view_image not offered"
    );
    assert!(image_urls(first).is_empty());

    let d = t.data();
    check_data(&d, "pic.png", &c.ws.path().join("pic.png"));
    assert_eq!(d["imageSent"], true, "{d}");
    assert_eq!(dims(&d), (60, 40));
    assert_eq!(source_dims(&d), (120, 80));

    // One user message right after the round's tool messages, and it is the last message.
    let body = t.next_body();
    let k = after_round(body, "v1");
    assert_eq!(
        k + 1,
        body["messages"].as_array().unwrap().len(),
        "{}",
        short(body)
    );
    let sent = t.sent("pic.png");
    assert_eq!(sent.media, "image/png");
    assert_eq!(sent.img.dimensions(), (60, 40));
    assert_eq!(sent.bytes.len() as u64, d["bytes"].as_u64().unwrap());
    assert_eq!(sha256_hex(&sent.bytes), d["sha256"].as_str().unwrap());
    assert_eq!(image_urls(body).len(), 1);

    // The stream's toolResult chunk says what was attached.
    let results = t.run.with("toolResult");
    let chunk = results
        .iter()
        .find(|r| r["id"] == "v1")
        .unwrap_or_else(|| panic!("{results:?}"));
    assert_eq!(chunk["success"], true, "{chunk}");
    let image = &chunk["image"];
    assert_eq!(
        (&image["mediaType"], &image["width"], &image["height"]),
        (&json!("image/png"), &json!(60), &json!(40)),
        "{chunk}"
    );
    // The stored file's name, so a host can show it.
    let url = image["url"].as_str().unwrap_or_default();
    assert!(
        url.starts_with("outrigger-image:") && url.ends_with(".png"),
        "{chunk}"
    );
}

#[test]
fn text_only_models_get_no_image_and_a_message_saying_so() {
    let mut c = Chat::start();
    c.put("pic.png", png(32, 32));

    let t = c.view("deepseek-chat", json!({"path": "pic.png"}));
    let res = t.result();
    assert_eq!(res["data"]["imageSent"], false, "{res}");
    let message = res["message"]
        .as_str()
        .or_else(|| res["data"]["message"].as_str())
        .unwrap_or_else(|| panic!("no message: {res}"));
    assert!(
        message.to_lowercase().contains("image"),
        "message does not say the model cannot take images: {message}"
    );
    for r in &t.reqs {
        assert!(
            image_urls(&r.body).is_empty(),
            "an image went to deepseek-chat"
        );
    }

    // A model the catalog knows takes images, and an unknown one, get the part.
    for model in ["gpt-4.1", "some-unknown-model-7"] {
        let t = c.view(model, json!({"path": "pic.png"}));
        assert_eq!(t.data()["imageSent"], true, "{model}");
        assert_eq!(t.sent("pic.png").img.dimensions(), (32, 32), "{model}");
    }
}

#[test]
fn a_failed_view_sends_no_image() {
    let mut c = Chat::start();
    c.put("notes.txt", "text\n");
    let server = FakeServer::start(vec![
        view_reply("v1", json!({"path": "notes.txt"})),
        Reply::fixture("openai_reference"),
    ]);
    let p = turn_params(&server, "gpt-4.1", c.ws.path(), "rec_fail", "look");
    let r = run(&mut c.s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let res = tool_result(&reqs[1].body, "v1");
    assert_eq!(res["success"], false, "{res}");
    assert_eq!(res["data"]["code"], "not_image", "{res}");
    assert!(image_urls(&reqs[1].body).is_empty());
    let chunk = r.with("toolResult")[0].clone();
    assert!(chunk.get("image").is_none(), "{chunk}");
}

// ---------------------------------------------------------------------------------------------
// Durability
// ---------------------------------------------------------------------------------------------

fn images_dir(home: &Path) -> Vec<String> {
    let dir = home.join("images");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The user messages of a record that carry parts.
fn part_messages(msgs: &[Value]) -> Vec<Value> {
    msgs.iter()
        .filter(|m| m["role"] == "user" && m.get("parts").is_some())
        .cloned()
        .collect()
}

/// A stored message's image part: a text part naming `path` and an `outrigger-image:` reference
/// without data.
fn stored_ref(m: &Value, path: &str) -> String {
    let parts = m["parts"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", short(m)));
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "text" && p["text"].as_str().is_some_and(|t| t.contains(path))),
        "no text part naming {path}: {}",
        short(m)
    );
    let images: Vec<&Value> = parts.iter().filter(|p| p["type"] == "image").collect();
    assert_eq!(images.len(), 1, "{}", short(m));
    assert!(
        images[0].get("data").is_none(),
        "the record holds the bytes: {}",
        short(m)
    );
    images[0]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", short(m)))
        .to_string()
}

#[test]
fn the_image_is_stored_once_and_the_record_keeps_a_reference() {
    let mut c = Chat::start();
    c.put("pic.png", png(48, 32));
    c.put("photo.jpg", jpeg(48, 32));
    let server = FakeServer::start(vec![
        view_reply("v1", json!({"path": "pic.png"})),
        view_reply("v2", json!({"path": "photo.jpg"})),
        view_reply("v3", json!({"path": "pic.png"})),
        Reply::fixture("openai_reference"),
    ]);
    let p = turn_params(&server, "fake-model", c.ws.path(), "rec_store", "look");
    let r = run(&mut c.s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    let d1 = tool_result(&reqs[1].body, "v1")["data"].clone();
    let d2 = tool_result(&reqs[2].body, "v2")["data"].clone();
    let d3 = tool_result(&reqs[3].body, "v3")["data"].clone();
    let (sha_png, sha_jpg) = (
        d1["sha256"].as_str().unwrap().to_string(),
        d2["sha256"].as_str().unwrap().to_string(),
    );
    assert_eq!(d3["sha256"], d1["sha256"]);

    // Each later request re-sends the earlier images as data URLs: 1, 2, then 3.
    for (i, n) in [(1, 1), (2, 2), (3, 3)] {
        assert_eq!(image_urls(&reqs[i].body).len(), n, "request {i}");
    }
    let sent = sent_after(&reqs[3].body, "v1", "pic.png");
    assert_eq!(sha256_hex(&sent.bytes), sha_png);

    // One file per distinct image, named by its hash, holding the bytes the model got.
    let home = c.s.home.path().to_path_buf();
    let png_name = format!("{sha_png}.png");
    let jpg_name = format!("{sha_jpg}.jpg");
    let mut want = vec![png_name.clone(), jpg_name.clone()];
    want.sort();
    assert_eq!(images_dir(&home), want);
    let stored = fs::read(home.join("images").join(&png_name)).unwrap();
    assert_eq!(stored, sent.bytes);
    let stored_jpg = fs::read(home.join("images").join(&jpg_name)).unwrap();
    assert_eq!(sha256_hex(&stored_jpg), sha_jpg);
    assert_eq!(
        image::load_from_memory(&stored_jpg).unwrap().dimensions(),
        (48, 32)
    );

    // The record: the user messages carry parts with references, not data.
    let msgs = messages(&mut c.s, "rec_store");
    let with_parts = part_messages(&msgs);
    assert_eq!(with_parts.len(), 3, "{msgs:?}");
    assert_eq!(
        stored_ref(&with_parts[0], "pic.png"),
        format!("outrigger-image:{png_name}")
    );
    assert_eq!(
        stored_ref(&with_parts[1], "photo.jpg"),
        format!("outrigger-image:{jpg_name}")
    );
    assert_eq!(
        stored_ref(&with_parts[2], "pic.png"),
        format!("outrigger-image:{png_name}")
    );
    // Each sits right after its round's tool message.
    for m in &with_parts {
        let i = msgs.iter().position(|x| x == m).unwrap();
        assert_eq!(msgs[i - 1]["role"], "tool", "{msgs:?}");
    }
    let text = serde_json::to_string(&msgs).unwrap();
    assert!(!text.contains("base64"), "the record holds image data");
}

#[test]
fn a_new_process_resumes_the_record_and_sends_the_image_again() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("pic.png"), png(64, 40)).unwrap();
    let server = FakeServer::start(vec![
        view_reply("v1", json!({"path": "pic.png", "maxEdge": 32})),
        Reply::fixture("openai_reference"),
        Reply::fixture("openai_reference"),
    ]);
    let mut s = Sidecar::start();
    let p = turn_params(&server, "fake-model", ws.path(), "rec_resume", "look");
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let d = tool_result(&reqs[1].body, "v1")["data"].clone();
    let sha = d["sha256"].as_str().unwrap().to_string();
    assert_eq!(dims(&d), (32, 20));

    // Stop it (the record is committed) and start another process on the same home.
    let home = std::mem::replace(&mut s.home, tempfile::tempdir().unwrap());
    drop(s);
    assert_eq!(images_dir(home.path()), [format!("{sha}.png")]);
    let mut s = Sidecar::start_with(Opts {
        home: Some(home),
        ..Opts::default()
    });
    let msgs = messages(&mut s, "rec_resume");
    let with_parts = part_messages(&msgs);
    assert_eq!(with_parts.len(), 1, "{msgs:?}");
    assert_eq!(
        stored_ref(&with_parts[0], "pic.png"),
        format!("outrigger-image:{sha}.png")
    );

    let mut p = turn_params(
        &server,
        "fake-model",
        ws.path(),
        "rec_resume",
        "what was it?",
    );
    p["fromRecord"] = json!(true);
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let body = &reqs[2].body;
    let sent = sent_after(body, "v1", "pic.png");
    assert_eq!(sent.media, "image/png");
    assert_eq!(sent.img.dimensions(), (32, 20));
    assert_eq!(sha256_hex(&sent.bytes), sha);
    assert_eq!(image_urls(body).len(), 1);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"], "what was it?");
}

// ---------------------------------------------------------------------------------------------
// read_file on an image
// ---------------------------------------------------------------------------------------------

#[test]
fn read_file_on_an_image_points_to_view_image() {
    let mut w = Ws::start();
    let want_media = [
        ("pic.png", "image/png"),
        ("photo.jpg", "image/jpeg"),
        ("anim.gif", "image/gif"),
        ("pic.webp", "image/webp"),
        ("pic.bmp", "bmp"),
    ];
    for ((name, bytes), (_, media)) in five_formats(30, 20).into_iter().zip(want_media) {
        w.put(name, &bytes);
        let r = w.invoke("read_file", json!({"path": name}));
        assert_eq!(r["success"], true, "{name}: {r}");
        let d = &r["data"];
        assert_eq!(d["path"], name, "{d}");
        assert_eq!(d["width"], 30, "{name}: {d}");
        assert_eq!(d["height"], 20, "{name}: {d}");
        let got = d["mediaType"].as_str().unwrap_or_default();
        assert!(
            got.starts_with("image/") && got.contains(media.trim_start_matches("image/")),
            "{name}: mediaType {got}, want {media}"
        );
        assert!(
            d["hint"].as_str().is_some_and(|h| h.contains("view_image")),
            "{name}: {d}"
        );
        assert!(d.get("content").is_none(), "{name}: {d}");
    }
    // Text files still read as text.
    w.put("notes.txt", "hello\n");
    let r = w.invoke("read_file", json!({"path": "notes.txt"}));
    assert_eq!(r["data"]["content"], "hello\n", "{r}");
}

#[test]
fn images_are_stored_beside_a_moved_store() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("pic.png"), png(16, 16)).unwrap();
    let db_dir = tempfile::tempdir().unwrap();
    let db = db_dir.path().join("chat.db");
    let server = FakeServer::start(vec![
        view_reply("v1", json!({"path": "pic.png"})),
        Reply::fixture("openai_reference"),
    ]);
    let mut s = crate::common::on_db(&db);
    let p = turn_params(&server, "fake-model", ws.path(), "rec_moved", "look");
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let d = tool_result(&server.requests()[1].body, "v1")["data"].clone();
    let sha = d["sha256"].as_str().unwrap();
    assert_eq!(images_dir(db_dir.path()), [format!("{sha}.png")]);
    assert!(!s.home.path().join("images").exists());
}

/// Beyond the brief: a stored image whose file is gone must not reach the provider as an
/// `outrigger-image:` URL (no model can fetch it; a real API refuses the request).
#[test]
fn a_missing_stored_image_never_goes_out_as_a_reference() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("pic.png"), png(16, 16)).unwrap();
    let server = FakeServer::start(vec![
        view_reply("v1", json!({"path": "pic.png"})),
        Reply::fixture("openai_reference"),
    ]);
    let mut s = Sidecar::start();
    let p = turn_params(&server, "fake-model", ws.path(), "rec_gone", "look");
    assert_eq!(run(&mut s, p).done["status"], "completed");
    let home = std::mem::replace(&mut s.home, tempfile::tempdir().unwrap());
    drop(s);
    fs::remove_dir_all(home.path().join("images")).unwrap();
    let mut s = Sidecar::start_with(Opts {
        home: Some(home),
        ..Opts::default()
    });
    let mut p = turn_params(&server, "fake-model", ws.path(), "rec_gone", "again");
    p["fromRecord"] = json!(true);
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for url in image_urls(&reqs[2].body) {
        assert!(
            url.starts_with("data:"),
            "an image part the model cannot load: {url}"
        );
    }
}

/// Beyond the brief: `agent.session.messages` "can be sent back unchanged" as a new turn's
/// `messages` (docs/protocol.md); the stored reference must then go out as the image again.
#[test]
fn a_host_history_sent_back_unchanged_sends_the_image_again() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("pic.png"), png(16, 12)).unwrap();
    let server = FakeServer::start(vec![
        view_reply("v1", json!({"path": "pic.png"})),
        Reply::fixture("openai_reference"),
    ]);
    let mut s = Sidecar::start();
    let p = turn_params(&server, "fake-model", ws.path(), "rec_host", "look");
    assert_eq!(run(&mut s, p).done["status"], "completed");
    let sha = tool_result(&server.requests()[1].body, "v1")["data"]["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let mut history = messages(&mut s, "rec_host");
    history.push(json!({"role": "user", "content": "and now?"}));
    let mut p = turn_params(&server, "fake-model", ws.path(), "rec_host", "");
    p["messages"] = Value::Array(history);
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let urls = image_urls(&reqs[2].body);
    assert_eq!(urls.len(), 1, "{urls:?}");
    let sent = decode_data_url(&urls[0]);
    assert_eq!(sha256_hex(&sent.bytes), sha);
}

/// Beyond the brief: a record holding an image, continued on a model the catalog knows as
/// text-only, must not send that model the image either.
#[test]
fn a_text_only_model_continuing_a_record_gets_no_image() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("pic.png"), png(16, 12)).unwrap();
    let server = FakeServer::start(vec![
        view_reply("v1", json!({"path": "pic.png"})),
        Reply::fixture("openai_reference"),
    ]);
    let mut s = Sidecar::start();
    let p = turn_params(&server, "gpt-4.1", ws.path(), "rec_switch", "look");
    assert_eq!(run(&mut s, p).done["status"], "completed");
    assert_eq!(image_urls(&server.requests()[1].body).len(), 1);
    let mut p = turn_params(&server, "deepseek-chat", ws.path(), "rec_switch", "again");
    p["fromRecord"] = json!(true);
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    assert!(
        image_urls(&reqs[2].body).is_empty(),
        "deepseek-chat was sent an image"
    );
}
