//! Exposure tiers, `tool_search`, unknown-tool suggestions, argument validation and
//! `harness.describe`, over the pipes. The inventory is plugin tools declared by manifests
//! written into a tempdir (direct / deferred / hidden via `exposure`).

use crate::support::plugins;

use std::collections::BTreeSet;

use crate::common::Sidecar;
use crate::support::plugins::Plugins;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// One `[[tools]]` table running `bin/<exec>`; `extra` adds keys (exposure, parameters, …).
fn tool(name: &str, description: &str, exec: &str, extra: &str) -> String {
    plugins::tool(name, description, exec, "10s", extra)
}

const DEFERRED: &str = "exposure = \"deferred\"";
const HIDDEN: &str = "exposure = \"hidden\"";
const FORECAST_PARAMS: &str = r#"parameters = '''
{"type": "object",
 "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
 "required": ["city"]}
'''"#;

/// The tiered inventory used by most tests: every tool echoes its own name as the result.
/// Direct: get_forecast, weather_station. Deferred: weather_alerts, weather_radar, stock_quote.
/// Hidden: secret_weather_probe, get_forecast_internal.
fn inventory(p: &Plugins) {
    p.script(
        "named",
        r#"cat >/dev/null; printf '{"ok": true, "result": "%s"}\n' "$TOOL""#,
    );
    let env = |n: &str| format!("env = {{ TOOL = \"{n}\" }}\n");
    let mut m = String::from("name = \"inv\"\n\n");
    m += &tool(
        "get_forecast",
        "Weather forecast for a city",
        "named",
        &(env("get_forecast") + FORECAST_PARAMS),
    );
    m += &tool(
        "weather_station",
        "Readings from a local weather station",
        "named",
        &env("weather_station"),
    );
    m += &tool(
        "weather_alerts",
        "Severe weather alerts and storm warnings for a region",
        "named",
        &(env("weather_alerts") + DEFERRED),
    );
    m += &tool(
        "weather_radar",
        "Radar images of precipitation",
        "named",
        &(env("weather_radar") + DEFERRED),
    );
    m += &tool(
        "stock_quote",
        "Latest stock price quote for a ticker symbol",
        "named",
        &(env("stock_quote") + DEFERRED),
    );
    m += &tool(
        "secret_weather_probe",
        "Hidden weather diagnostics probe for storm alerts",
        "named",
        &(env("secret_weather_probe") + HIDDEN),
    );
    m += &tool(
        "get_forecast_internal",
        "Internal forecast plumbing",
        "named",
        &(env("get_forecast_internal") + HIDDEN),
    );
    p.manifest("inv.toml", &m);
}

fn start_inventory() -> (Plugins, Sidecar) {
    let p = Plugins::new();
    inventory(&p);
    let s = p.start();
    (p, s)
}

fn invoke(s: &mut Sidecar, name: &str, args: Value) -> Value {
    s.ok("tool.invoke", json!({"name": name, "arguments": args}))
}

fn search(s: &mut Sidecar, args: Value) -> Value {
    invoke(s, "tool_search", args)
}

fn match_names(tr: &Value) -> Vec<String> {
    tr["data"]["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("data.matches is an array: {tr}"))
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .collect()
}

fn tool_list(s: &mut Sidecar) -> Vec<Value> {
    s.ok("tool.list", Value::Null).as_array().unwrap().clone()
}

/// Names in tool.list with the given exposure.
fn names_with_exposure(s: &mut Sidecar, exposure: &str) -> BTreeSet<String> {
    tool_list(s)
        .iter()
        .filter(|r| r["exposure"] == exposure)
        .map(|r| r["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn assert_duration(tr: &Value) {
    assert!(
        tr["data"]["durationMs"].is_u64() || tr["data"]["durationMs"].is_f64(),
        "every dispatched result carries data.durationMs: {tr}"
    );
}

fn assert_unknown(tr: &Value, name: &str) -> Vec<String> {
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["needsFollowup"], true, "{tr}");
    assert_eq!(tr["data"]["unknownTool"], name, "{tr}");
    let suggestions: Vec<String> = tr["data"]["suggestions"]
        .as_array()
        .unwrap_or_else(|| panic!("data.suggestions is an array: {tr}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert!(suggestions.len() <= 3, "at most 3 suggestions: {tr}");
    let err = tr["error"].as_str().unwrap();
    if suggestions.is_empty() {
        assert!(err.starts_with(&format!("Unknown tool: {name}")), "{tr}");
    } else {
        assert_eq!(
            err,
            format!(
                "Unknown tool: {name}. Did you mean: {}?",
                suggestions.join(", ")
            ),
            "{tr}"
        );
    }
    suggestions
}

// ---------------------------------------------------------------------------------------------
// Tiers
// ---------------------------------------------------------------------------------------------

#[test]
fn every_tier_is_listed_and_dispatchable() {
    let (_p, mut s) = start_inventory();
    let rows = tool_list(&mut s);
    let exposure = |n: &str| {
        rows.iter()
            .find(|r| r["function"]["name"] == n)
            .unwrap_or_else(|| panic!("{n} missing from tool.list"))["exposure"]
            .clone()
    };
    assert_eq!(exposure("get_forecast"), "direct");
    assert_eq!(exposure("weather_alerts"), "deferred");
    assert_eq!(exposure("secret_weather_probe"), "hidden");

    for name in [
        "weather_station",
        "weather_alerts",
        "stock_quote",
        "secret_weather_probe",
    ] {
        let tr = invoke(&mut s, name, json!({}));
        assert_eq!(
            tr["success"], true,
            "{name} runs by name whatever its tier: {tr}"
        );
        assert_eq!(tr["data"]["result"], name, "{tr}");
        assert_duration(&tr);
    }
}

#[test]
fn tool_list_includes_tool_search() {
    // Registered always, even with no plugins and no deferred tool.
    let mut s = Sidecar::start();
    let rows = tool_list(&mut s);
    let ts = rows
        .iter()
        .find(|r| r["function"]["name"] == "tool_search")
        .unwrap_or_else(|| panic!("tool_search missing: {rows:?}"));
    assert_eq!(ts["type"], "function", "{ts}");
    assert_eq!(ts["mode"], "read", "{ts}");
    assert_eq!(ts["exposure"], "direct", "{ts}");
    let props = &ts["function"]["parameters"]["properties"];
    for k in ["query", "names", "max_results"] {
        assert!(props.get(k).is_some(), "tool_search schema has {k}: {ts}");
    }
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["function"]["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "tool.list is sorted by name");
}

// ---------------------------------------------------------------------------------------------
// tool_search
// ---------------------------------------------------------------------------------------------

#[test]
fn query_finds_deferred_tools_only_ranked_with_scores() {
    let (_p, mut s) = start_inventory();
    let deferred = names_with_exposure(&mut s, "deferred");
    assert!(
        ["weather_alerts", "weather_radar", "stock_quote"]
            .iter()
            .all(|n| deferred.contains(*n)),
        "{deferred:?}"
    );

    let tr = search(&mut s, json!({"query": "weather storm alerts"}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_duration(&tr);
    let names = match_names(&tr);
    assert_eq!(
        names.first().map(String::as_str),
        Some("weather_alerts"),
        "the best match ranks first: {tr}"
    );
    assert!(names.contains(&"weather_radar".to_owned()), "{tr}");
    for n in &names {
        assert!(
            deferred.contains(n),
            "only deferred tools are searched, got {n}: {tr}"
        );
    }
    for n in [
        "get_forecast",
        "weather_station",
        "secret_weather_probe",
        "stock_quote",
    ] {
        assert!(!names.iter().any(|m| m == n), "{n} must not match: {tr}");
    }

    let matches = tr["data"]["matches"].as_array().unwrap();
    let mut prev = f64::INFINITY;
    let mut prev_name = String::new();
    for m in matches {
        let score = m["score"]
            .as_f64()
            .unwrap_or_else(|| panic!("query matches carry a score: {m}"));
        assert!(score > 0.0, "{m}");
        assert!(
            score < prev || (score == prev && m["name"].as_str().unwrap() > prev_name.as_str()),
            "ranked by score, ties by name: {tr}"
        );
        prev = score;
        prev_name = m["name"].as_str().unwrap().to_owned();
        assert!(m["description"].is_string(), "{m}");
        assert_eq!(m["parameters"]["type"], "object", "{m}");
    }
    let alerts = &matches[0];
    assert_eq!(
        alerts["description"],
        "Severe weather alerts and storm warnings for a region"
    );
    assert_eq!(
        tr["data"]["deferredCount"].as_u64(),
        Some(deferred.len() as u64),
        "deferredCount counts the deferred tier: {tr}"
    );
    assert!(tr["data"]["note"].is_string(), "{tr}");

    // Matches are callable at once.
    let tr = invoke(&mut s, "weather_alerts", json!({}));
    assert_eq!(tr["success"], true, "{tr}");
}

#[test]
fn hidden_tools_are_never_searchable() {
    let (_p, mut s) = start_inventory();
    // "diagnostics probe" only occurs in the hidden tool's text.
    let tr = search(&mut s, json!({"query": "diagnostics probe secret"}));
    assert_eq!(tr["success"], true, "{tr}");
    assert!(match_names(&tr).is_empty(), "{tr}");
    // "forecast" only occurs in direct and hidden tools.
    let tr = search(&mut s, json!({"query": "forecast"}));
    assert!(match_names(&tr).is_empty(), "{tr}");
}

#[test]
fn off_vocabulary_query_returns_no_matches_with_a_note() {
    let (_p, mut s) = start_inventory();
    let tr = search(&mut s, json!({"query": "xylophone quasar"}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["matches"], json!([]), "{tr}");
    let note = tr["data"]["note"]
        .as_str()
        .unwrap_or_else(|| panic!("{tr}"));
    assert!(
        note.to_lowercase().contains("no deferred tools matched"),
        "note explains the empty result: {tr}"
    );
    assert!(tr["data"]["deferredCount"].as_u64().unwrap() >= 3, "{tr}");
}

#[test]
fn names_load_exact_rows() {
    let (_p, mut s) = start_inventory();
    let list = tool_list(&mut s);
    let tr = search(&mut s, json!({"names": ["stock_quote", "get_forecast"]}));
    assert_eq!(tr["success"], true, "{tr}");
    let matches = tr["data"]["matches"].as_array().unwrap();
    let got: BTreeSet<String> = match_names(&tr).into_iter().collect();
    assert_eq!(
        got,
        BTreeSet::from(["stock_quote".to_owned(), "get_forecast".to_owned()]),
        "{tr}"
    );
    assert_eq!(matches.len(), 2, "{tr}");
    for m in matches {
        let row = list
            .iter()
            .find(|r| r["function"]["name"] == m["name"])
            .unwrap();
        assert_eq!(m["description"], row["function"]["description"], "{m}");
        assert_eq!(m["parameters"], row["function"]["parameters"], "{m}");
        assert!(
            m.get("score").is_none_or(Value::is_null),
            "no score for names: {m}"
        );
    }
    let forecast = matches
        .iter()
        .find(|m| m["name"] == "get_forecast")
        .unwrap();
    assert_eq!(
        forecast["parameters"]["required"],
        json!(["city"]),
        "{forecast}"
    );
    assert!(tr["data"]["deferredCount"].is_u64(), "{tr}");
}

#[test]
fn names_refuse_unknown_and_hidden_tools() {
    let (_p, mut s) = start_inventory();
    for bad in ["no_such_tool", "secret_weather_probe"] {
        let tr = search(&mut s, json!({"names": ["weather_alerts", bad]}));
        assert_eq!(tr["success"], false, "{bad}: {tr}");
        let err = tr["error"].as_str().unwrap_or_else(|| panic!("{tr}"));
        assert!(err.contains(bad), "the error names {bad}: {tr}");
    }
}

#[test]
fn neither_query_nor_names_fails() {
    let (_p, mut s) = start_inventory();
    let tr = search(&mut s, json!({}));
    assert_eq!(tr["success"], false, "{tr}");
    assert!(tr["error"].is_string(), "{tr}");
    let tr = search(&mut s, json!({"max_results": 3}));
    assert_eq!(tr["success"], false, "{tr}");
}

#[test]
fn max_results_is_clamped_to_twenty() {
    let p = Plugins::new();
    p.script("ok", r#"echo '{"ok": true, "result": null}'"#);
    let mut m = String::new();
    for i in 1..=25 {
        m += &tool(
            &format!("gadget_{i:02}"),
            &format!("Gadget helper number {i}"),
            "ok",
            DEFERRED,
        );
    }
    p.manifest("gadgets.toml", &m);
    let mut s = p.start();

    let tr = search(&mut s, json!({"query": "gadget helper", "max_results": 50}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(match_names(&tr).len(), 20, "clamped to the ceiling: {tr}");
    assert_eq!(tr["data"]["deferredCount"], 25, "{tr}");
    // Equal scores tie-break by name.
    let names = match_names(&tr);
    let expected: Vec<String> = (1..=20).map(|i| format!("gadget_{i:02}")).collect();
    assert_eq!(names, expected, "{tr}");

    let tr = search(&mut s, json!({"query": "gadget"}));
    assert_eq!(match_names(&tr).len(), 8, "default max_results is 8: {tr}");
    let tr = search(&mut s, json!({"query": "gadget", "max_results": 3}));
    assert_eq!(match_names(&tr).len(), 3, "{tr}");
    let tr = search(&mut s, json!({"query": "gadget", "max_results": 0}));
    assert_eq!(match_names(&tr).len(), 1, "clamped up to 1: {tr}");
}

// ---------------------------------------------------------------------------------------------
// Unknown tools
// ---------------------------------------------------------------------------------------------

#[test]
fn unknown_tool_suggests_close_names() {
    let (_p, mut s) = start_inventory();
    let tr = invoke(&mut s, "get_forcast", json!({"city": "Oslo"}));
    let suggestions = assert_unknown(&tr, "get_forcast");
    assert_eq!(
        suggestions.first().map(String::as_str),
        Some("get_forecast"),
        "{tr}"
    );
    assert!(
        !suggestions.iter().any(|n| n == "get_forecast_internal"),
        "hidden tools are never suggested: {tr}"
    );
}

#[test]
fn hidden_tools_are_never_suggested() {
    let (_p, mut s) = start_inventory();
    for typo in [
        "secret_weather_prob",
        "secret_weather_probes",
        "get_forecast_internl",
    ] {
        let tr = invoke(&mut s, typo, json!({}));
        let suggestions = assert_unknown(&tr, typo);
        for hidden in ["secret_weather_probe", "get_forecast_internal"] {
            assert!(
                !suggestions.iter().any(|n| n == hidden),
                "{hidden} suggested for {typo}: {tr}"
            );
            let err = tr["error"].as_str().unwrap();
            let offered = err.split_once("Did you mean:").map_or("", |(_, rest)| rest);
            assert!(!offered.contains(hidden), "{tr}");
        }
    }
}

#[test]
fn at_most_three_suggestions() {
    let p = Plugins::new();
    p.script("ok", r#"echo '{"ok": true, "result": null}'"#);
    let mut m = String::new();
    for i in 1..=9 {
        m += &tool(&format!("gadget_{i}"), "A gadget", "ok", "");
    }
    p.manifest("gadgets.toml", &m);
    let mut s = p.start();
    let tr = invoke(&mut s, "gadget_0", json!({}));
    let suggestions = assert_unknown(&tr, "gadget_0");
    assert!(!suggestions.is_empty(), "{tr}");
    assert!(suggestions.iter().all(|n| n.starts_with("gadget_")), "{tr}");
}

// ---------------------------------------------------------------------------------------------
// Argument validation
// ---------------------------------------------------------------------------------------------

#[test]
fn schema_violations_name_the_field_and_do_not_run_the_tool() {
    let p = Plugins::new();
    let marker = p.scratch("ran");
    p.script(
        "forecast",
        &format!(
            "echo ran >> '{}'\necho '{{\"ok\": true, \"result\": \"sunny\"}}'",
            marker.display()
        ),
    );
    p.manifest(
        "weather.toml",
        &tool(
            "get_forecast",
            "Weather forecast",
            "forecast",
            FORECAST_PARAMS,
        ),
    );
    let mut s = p.start();

    // Missing required `city`.
    let tr = invoke(&mut s, "get_forecast", json!({"days": 2}));
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["needsFollowup"], true, "{tr}");
    let err = tr["error"].as_str().unwrap();
    assert!(
        err.starts_with("Invalid arguments for tool 'get_forecast'"),
        "{tr}"
    );
    assert!(err.contains("city"), "names the missing field: {tr}");

    // Wrong type.
    let tr = invoke(&mut s, "get_forecast", json!({"city": 42}));
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["needsFollowup"], true, "{tr}");
    let err = tr["error"].as_str().unwrap();
    assert!(
        err.starts_with("Invalid arguments for tool 'get_forecast'") && err.contains("/city"),
        "names the field's path: {tr}"
    );

    // Nested path, constraint violation.
    let tr = invoke(&mut s, "get_forecast", json!({"city": "Oslo", "days": 0}));
    assert_eq!(tr["success"], false, "{tr}");
    assert!(tr["error"].as_str().unwrap().contains("/days"), "{tr}");

    assert!(
        !marker.exists(),
        "invalid arguments must not reach the executable"
    );

    let tr = invoke(&mut s, "get_forecast", json!({"city": "Oslo", "days": 2}));
    assert_eq!(tr["success"], true, "{tr}");
    assert!(marker.exists());
}

#[test]
fn tool_search_arguments_are_validated() {
    let (_p, mut s) = start_inventory();
    let tr = search(&mut s, json!({"query": 5}));
    assert_eq!(tr["success"], false, "{tr}");
    let err = tr["error"].as_str().unwrap();
    assert!(
        err.starts_with("Invalid arguments for tool 'tool_search'") && err.contains("query"),
        "{tr}"
    );
}

#[test]
fn invoke_params_are_checked() {
    let (_p, mut s) = start_inventory();
    let r = s.call("tool.invoke", json!({"arguments": {}}));
    assert_eq!(r["error"]["code"], -32602, "missing name: {r}");
    // Arguments that are not an object are refused without running the tool, either as
    // invalid params or (as the schema's `type: object` fails) as an invalid-arguments result.
    let r = s.call(
        "tool.invoke",
        json!({"name": "get_forecast", "arguments": [1]}),
    );
    if r.get("error").is_some() {
        assert_eq!(r["error"]["code"], -32602, "{r}");
    } else {
        let tr = &r["result"];
        assert_eq!(tr["success"], false, "{r}");
        assert_eq!(tr["needsFollowup"], true, "{r}");
        assert!(
            tr["error"]
                .as_str()
                .unwrap()
                .starts_with("Invalid arguments for tool 'get_forecast'"),
            "{r}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// harness.describe
// ---------------------------------------------------------------------------------------------

#[test]
fn harness_describe_shape() {
    let mut s = Sidecar::start();
    let h = s.ok("harness.describe", Value::Null);
    let default = &h["default"];
    let available = &h["available"];
    assert!(default.is_object() && available.is_object(), "{h}");

    // Every implementation of every dimension (reference §3.12), in order, with whether
    // this binary really does it.
    let rows = |dim: &str| -> Vec<(String, bool)> {
        available[dim]
            .as_array()
            .unwrap_or_else(|| panic!("available.{dim} is a list: {h}"))
            .iter()
            .map(|i| {
                let assumes = i["assumes"].as_str().unwrap_or_else(|| {
                    panic!("available rows are {{impl, assumes, implemented}}: {i}")
                });
                assert!(!assumes.is_empty(), "{i}");
                assert_eq!(i.as_object().unwrap().len(), 3, "{i}");
                (
                    i["impl"].as_str().unwrap().to_owned(),
                    i["implemented"]
                        .as_bool()
                        .unwrap_or_else(|| panic!("implemented is a boolean: {i}")),
                )
            })
            .collect()
    };
    let want: &[(&str, &[(&str, bool)])] = &[
        (
            "context",
            &[
                ("null", false),
                ("pressure_compaction", true),
                ("observation_aging", false),
                ("spill", true),
            ],
        ),
        (
            "retry",
            &[
                ("none", false),
                ("simple", true),
                ("informed_backtrack", false),
            ],
        ),
        ("validator", &[("null", true), ("self_critique", false)]),
        (
            "tools",
            &[("full", true), ("minimal", true), ("progressive", true)],
        ),
        ("memory", &[("stateless", true), ("filesystem", false)]),
        ("orchestration", &[("single", true), ("subagent", true)]),
    ];
    for (dim, list) in want {
        let expected: Vec<(String, bool)> =
            list.iter().map(|(n, b)| ((*n).to_owned(), *b)).collect();
        assert_eq!(rows(dim), expected, "available.{dim}: {h}");
    }
    assert_eq!(available.as_object().unwrap().len(), want.len(), "{h}");
    let implemented =
        |dim: &str, name: &str| rows(dim).iter().any(|(n, ok)| n.as_str() == name && *ok);

    // The default: the reference's bundled default restricted to what is implemented.
    let names = |dim: &str| -> Vec<String> {
        default[dim]
            .as_array()
            .unwrap_or_else(|| panic!("default.{dim} is a list: {h}"))
            .iter()
            .map(|i| {
                for k in ["impl", "params", "assumes"] {
                    assert!(i.get(k).is_some(), "default.{dim}[].{k}: {h}");
                }
                let name = i["impl"].as_str().unwrap().to_owned();
                assert!(implemented(dim, &name), "default.{dim} {name}: {h}");
                name
            })
            .collect()
    };
    assert_eq!(names("context"), ["pressure_compaction", "spill"], "{h}");
    assert_eq!(names("retry"), ["simple"], "{h}");
    assert_eq!(
        default["retry"][0]["params"],
        json!({"max_attempts": 3}),
        "{h}"
    );
    assert_eq!(names("validator"), ["null"], "{h}");
    for (dim, want) in [
        ("tools", "full"),
        ("memory", "stateless"),
        ("orchestration", "subagent"),
    ] {
        let d = &default[dim];
        assert!(d.is_object(), "default.{dim} is one implementation: {h}");
        for k in ["impl", "params", "assumes"] {
            assert!(d.get(k).is_some(), "default.{dim}.{k}: {h}");
        }
        assert_eq!(d["impl"], want, "{h}");
        assert!(implemented(dim, want), "{h}");
    }
}

#[test]
fn unknown_tool_without_similar_names_never_lists_hidden_tools() {
    let (_p, mut s) = start_inventory();
    let tr = invoke(&mut s, "zzzzqqqqxxxxvvvv", json!({}));
    let suggestions = assert_unknown(&tr, "zzzzqqqqxxxxvvvv");
    assert!(suggestions.is_empty(), "{tr}");
    let err = tr["error"].as_str().unwrap();
    for hidden in ["secret_weather_probe", "get_forecast_internal"] {
        assert!(!err.contains(hidden), "{hidden} leaked: {tr}");
    }
}

#[test]
fn search_follows_reload_and_disable() {
    let p = Plugins::new();
    inventory(&p);
    p.script("ok", r#"echo '{"ok": true, "result": null}'"#);
    p.manifest(
        "tides.toml",
        &tool("tide_table", "Tide times for a harbour", "ok", DEFERRED),
    );
    let mut s = p.start();
    let tr = search(&mut s, json!({"query": "harbour tide"}));
    assert_eq!(match_names(&tr), ["tide_table"], "{tr}");
    let before = tr["data"]["deferredCount"].as_u64().unwrap();

    // The reloaded description is what search ranks.
    p.manifest(
        "tides.toml",
        &tool(
            "tide_table",
            "Ocean tide predictions for a marina",
            "ok",
            DEFERRED,
        ),
    );
    s.ok("plugin.reload", json!({"name": "tides"}));
    let tr = search(&mut s, json!({"query": "harbour"}));
    assert!(
        match_names(&tr).is_empty(),
        "stale index after reload: {tr}"
    );
    let tr = search(&mut s, json!({"query": "marina"}));
    assert_eq!(match_names(&tr), ["tide_table"], "{tr}");
    assert_eq!(
        tr["data"]["matches"][0]["description"],
        "Ocean tide predictions for a marina"
    );

    // A disabled plugin's deferred tools are not found any more.
    s.ok("plugin.disable", json!({"name": "tides"}));
    let tr = search(&mut s, json!({"query": "marina tide"}));
    assert!(match_names(&tr).is_empty(), "{tr}");
    assert_eq!(
        tr["data"]["deferredCount"].as_u64(),
        Some(before - 1),
        "{tr}"
    );
    let tr = search(&mut s, json!({"names": ["tide_table"]}));
    assert_eq!(tr["success"], false, "{tr}");
}
