//! `schemas/` must be exactly what `outrigger schemas` writes.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

fn read_dir(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn committed_schemas_match_generated() {
    let out = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let target = out.path().join("schemas");
    let (status, _, err) = common::run_once(
        home.path(),
        &["schemas", "--out", target.to_str().unwrap()],
        &[],
        b"",
    );
    assert!(status.success(), "{err}");
    let generated = read_dir(&target);
    let committed = read_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas"));
    assert_eq!(
        generated.keys().collect::<Vec<_>>(),
        committed.keys().collect::<Vec<_>>(),
        "schemas/ file set differs; run `cargo run -- schemas --out schemas`"
    );
    for (name, text) in &generated {
        assert_eq!(
            text, &committed[name],
            "schemas/{name} is stale; run `cargo run -- schemas --out schemas`"
        );
    }
    let tool_call: serde_json::Value = serde_json::from_str(&generated["ToolCall.json"]).unwrap();
    assert_eq!(tool_call["additionalProperties"], false);
    let tool_result: serde_json::Value =
        serde_json::from_str(&generated["ToolResult.json"]).unwrap();
    assert_ne!(tool_result["additionalProperties"], false);
}
