//! Unit tests of the manifest cache.

use super::super::parse_str;
use super::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;

struct Fixture {
    _dir: tempfile::TempDir,
    plugins: PathBuf,
    cache: Cache,
}

const BODY: &str = r#"
description = "Weather lookups"

[[tools]]
name = "get_forecast"
description = "Forecast for a city"
exec = "bin/forecast"
args = ["--json"]
timeout = "1500ms"
mode = "read"
exposure = "deferred"
env = { UNITS = "metric" }
parameters = '''{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}'''

[[tools]]
name = "get_alerts"
description = "Alerts, with \"quotes\" and é"
exec = "bin/forecast"
timeout = 2000
"#;

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    fs::create_dir_all(plugins.join("bin")).unwrap();
    let exec = plugins.join("bin/forecast");
    fs::write(&exec, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&exec, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(plugins.join("weather.toml"), BODY).unwrap();
    let cache = Cache::for_dir(&dir.path().join("cache"), &plugins).unwrap();
    Fixture {
        _dir: dir,
        plugins,
        cache,
    }
}

fn parsed(f: &Fixture) -> (PluginManifest, String) {
    let path = f.plugins.join("weather.toml");
    (parse_str(BODY, path).unwrap(), digest(BODY.as_bytes()))
}

#[test]
fn an_entry_gives_back_the_manifest_it_was_written_from() {
    let f = fixture();
    let (m, sha) = parsed(&f);
    assert!(f.cache.get(&m.path, &sha).is_none(), "nothing written yet");
    f.cache.put(&m, &sha);
    assert_eq!(f.cache.get(&m.path, &sha), Some(m));
}

#[test]
fn another_text_path_build_or_format_misses() {
    let f = fixture();
    let (m, sha) = parsed(&f);
    f.cache.put(&m, &sha);
    assert!(f.cache.get(&m.path, &digest(b"name = \"x\"")).is_none());
    // Another path with the same file name (another directory) is another manifest.
    let elsewhere = f.plugins.join("bin").join("weather.toml");
    assert!(f.cache.get(&elsewhere, &sha).is_none());
    let other_build = Cache {
        dir: f.cache.dir.clone(),
        build: "0.0.0:1:1",
    };
    assert!(other_build.get(&m.path, &sha).is_none());
    let entry = f.cache.entry_path(&m.path).unwrap();
    let text = fs::read_to_string(&entry).unwrap();
    fs::write(&entry, text.replacen("\"format\":1", "\"format\":99", 1)).unwrap();
    assert!(f.cache.get(&m.path, &sha).is_none());
}

#[test]
fn an_executable_gone_or_not_runnable_misses() {
    let f = fixture();
    let (m, sha) = parsed(&f);
    f.cache.put(&m, &sha);
    let exec = f.plugins.join("bin/forecast");
    fs::set_permissions(&exec, fs::Permissions::from_mode(0o644)).unwrap();
    assert!(f.cache.get(&m.path, &sha).is_none());
    fs::remove_file(&exec).unwrap();
    assert!(f.cache.get(&m.path, &sha).is_none());
}

#[test]
fn a_cut_or_doctored_entry_misses() {
    let f = fixture();
    let (m, sha) = parsed(&f);
    f.cache.put(&m, &sha);
    let entry = f.cache.entry_path(&m.path).unwrap();
    let text = fs::read_to_string(&entry).unwrap();
    fs::write(&entry, &text[..text.len() / 2]).unwrap();
    assert!(f.cache.get(&m.path, &sha).is_none());
    for (from, to) in [
        ("\"get_alerts\"", "\"get alerts!\""),
        ("\"get_alerts\"", "\"get_forecast\""),
        ("\"timeout_ms\":2000", "\"timeout_ms\":0"),
        ("\"timeout_ms\":2000", "\"timeout_ms\":600001"),
        ("\"mode\":\"read\"", "\"mode\":\"root\""),
        ("\"exposure\":\"deferred\"", "\"exposure\":\"secret\""),
        // Valid JSON, but a line break written into a reply would split its frame.
        ("{\"properties\"", "{\n\"properties\""),
    ] {
        assert!(text.contains(from), "{from} not in {text}");
        fs::write(&entry, text.replacen(from, to, 1)).unwrap();
        assert!(f.cache.get(&m.path, &sha).is_none(), "{to} was accepted");
    }
    fs::write(&entry, &text).unwrap();
    assert!(f.cache.get(&m.path, &sha).is_some());
}

#[test]
fn prune_keeps_only_the_manifests_loaded() {
    let f = fixture();
    let (m, sha) = parsed(&f);
    f.cache.put(&m, &sha);
    let gone = f.plugins.join("gone.toml");
    let mut other = m.clone();
    other.path = gone.clone();
    f.cache.put(&other, &sha);
    assert!(f.cache.entry_path(&gone).unwrap().exists());
    // A killed writer's temp file goes once it is old; a fresh one may be a live boot's.
    let old_temp = f.cache.dir.join(".gone.toml.json.1.tmp");
    let new_temp = f.cache.dir.join(".gone.toml.json.2.tmp");
    fs::write(&old_temp, "{").unwrap();
    fs::write(&new_temp, "{").unwrap();
    let long_ago = std::time::SystemTime::now() - 2 * STALE_TEMP;
    fs::File::options()
        .write(true)
        .open(&old_temp)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    f.cache.prune(&[m.path.as_path()]);
    assert!(!f.cache.entry_path(&gone).unwrap().exists());
    assert!(f.cache.get(&m.path, &sha).is_some());
    assert!(!old_temp.exists());
    assert!(new_temp.exists());
}

#[test]
fn an_unwritable_cache_is_no_cache() {
    let f = fixture();
    let (m, sha) = parsed(&f);
    // The cache's directory is a file: every write fails, quietly.
    let blocked = Cache {
        dir: f.plugins.join("weather.toml"),
        build: f.cache.build,
    };
    blocked.put(&m, &sha);
    assert!(blocked.get(&m.path, &sha).is_none());
    assert_eq!(fs::read_to_string(&m.path).unwrap(), BODY);
}
