//! The plugin manifest parser: any text, as `plugin.toml` next to an executable `bin/t`.
//! Errors name the file; what loads is fully valid. `parse_duration` on the same text.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use outrigger::tools::plugins::manifest::{MAX_TIMEOUT, parse_duration, parse_str};

fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("outrigger-fuzz-manifest")
            .tempdir()
            .unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let exe = dir.path().join("bin/t");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(d) = parse_duration(text) {
        let digits = text.trim_end_matches(|c: char| !c.is_ascii_digit());
        let unit = &text[digits.len()..];
        let n: u64 = digits.parse().expect("digits");
        let want = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            other => panic!("{text:?} parsed with unit {other:?}"),
        };
        assert_eq!(d, want);
    }
    let path = dir().path().join("plugin.toml");
    match parse_str(text, path.clone()) {
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(&path.display().to_string()), "{msg}");
        }
        Ok(m) => {
            assert!(outrigger::tools::valid_tool_name(&m.name));
            assert!(!m.tools.is_empty() && m.tools.len() <= 256);
            let mut names: Vec<&str> = m.tools.iter().map(|t| t.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), m.tools.len());
            for t in &m.tools {
                assert!(outrigger::tools::valid_tool_name(&t.name));
                assert!(!t.description.trim().is_empty());
                assert!(!t.timeout.is_zero() && t.timeout <= MAX_TIMEOUT);
                assert!(t.exec.is_absolute());
                let params = serde_json::to_value(&t.parameters).unwrap();
                assert_eq!(params["type"], "object");
            }
        }
    }
});
