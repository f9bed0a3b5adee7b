//! The `apply_patch` argument parser (`PatchArgs`, serde-derived with unknown members
//! refused): any text. What parses writes back (as the tool's JSON) to the same arguments,
//! and each file's edits go through `apply_edits` against the path text without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outrigger::tools::fs::edit::apply_edits;
use outrigger::tools::fs::patch::PatchArgs;
use serde_json::{Value, json};

fn to_json(args: &PatchArgs) -> Value {
    let patches: Vec<Value> = args
        .patches
        .iter()
        .map(|p| {
            let mut v = json!({"path": p.path, "edits": p.edits});
            if let Some(e) = &p.expected_version {
                v["expectedVersion"] = json!(e);
            }
            v
        })
        .collect();
    json!({ "patches": patches })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(args) = serde_json::from_str::<PatchArgs>(text) else {
        return;
    };
    let written = to_json(&args);
    let back: PatchArgs = serde_json::from_value(written.clone()).expect("written arguments parse");
    assert_eq!(to_json(&back), written);
    for p in &args.patches {
        let _ = apply_edits(&p.path, &p.edits, "file", false);
    }
});
