//! The JSON-RPC frame parser: any line. Only text that is not JSON is a parse error
//! (-32700); valid JSON used as a request's params never costs the request its id.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outrigger::rpc::frame::{Incoming, Line, classify, parse_line};

fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

fuzz_target!(|data: &[u8]| {
    let line = parse_line(data);
    let text = std::str::from_utf8(data).ok();
    let json = text.is_some_and(is_json);
    assert_eq!(
        matches!(line, Line::ParseError(_)),
        !json,
        "{data:?} gave {line:?}"
    );
    let Some(text) = text else { return };
    // Documented for batch items (valid JSON), but must not panic on anything.
    let _ = classify(text);
    if json && matches!(text.trim_start().as_bytes().first(), Some(b'{' | b'[')) {
        let request = format!(r#"{{"jsonrpc":"2.0","id":"q","method":"m","params":{text}}}"#);
        // Nesting one level deeper can pass serde_json's recursion limit.
        if !is_json(&request) {
            return;
        }
        match parse_line(request.as_bytes()) {
            Line::Single(Incoming::Request { id, .. })
            | Line::Single(Incoming::BadParams { id: Some(id), .. }) => {
                assert_eq!(id.get(), "\"q\"")
            }
            other => panic!("{request:?} gave {other:?}"),
        }
        let response = format!(r#"{{"jsonrpc":"2.0","id":"srv_1","result":{text}}}"#);
        match parse_line(response.as_bytes()) {
            Line::Single(Incoming::Response { id, .. }) => assert_eq!(id, "srv_1"),
            other => panic!("{response:?} gave {other:?}"),
        }
    }
});
