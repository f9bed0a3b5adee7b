//! Checks the Rust BM25 ranking against `tests/fixtures/tool_search.json`, whose expected
//! scores come from the independent Python reference (`scripts/bm25_reference.py`).

use outrigger::tools::search::{
    DEFAULT_MAX_RESULTS, MAX_RESULTS_CEILING, SearchIndex, clamp_max_results,
};
use serde_json::Value;

const FIXTURE: &str = include_str!("../fixtures/tool_search.json");
/// The brief's tolerance. The implementations use the same operation order, so in practice
/// they agree to the last bit (up to JSON float parsing); see `scores_agree_to_a_few_ulps`.
const TOLERANCE: f64 = 1e-9;

struct Case {
    name: String,
    inventory: Vec<(String, String)>,
    query: String,
    max_results: Option<i64>,
    expected: Vec<(String, f64)>,
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("missing string {key:?} in {v}"))
}

fn load() -> (Value, Vec<Case>) {
    let root: Value = serde_json::from_str(FIXTURE).expect("fixture is valid JSON");
    let cases = root["cases"]
        .as_array()
        .expect("cases array")
        .iter()
        .map(|c| Case {
            name: str_field(c, "name").to_owned(),
            inventory: c["inventory"]
                .as_array()
                .expect("inventory array")
                .iter()
                .map(|t| {
                    (
                        str_field(t, "name").to_owned(),
                        str_field(t, "description").to_owned(),
                    )
                })
                .collect(),
            query: str_field(c, "query").to_owned(),
            max_results: match &c["maxResults"] {
                Value::Null => None,
                v => Some(v.as_i64().expect("maxResults is an integer or null")),
            },
            expected: c["expected"]
                .as_array()
                .expect("expected array")
                .iter()
                .map(|e| {
                    (
                        str_field(e, "name").to_owned(),
                        e["score"].as_f64().expect("score"),
                    )
                })
                .collect(),
        })
        .collect();
    (root, cases)
}

fn run(case: &Case) -> Vec<(String, f64)> {
    let index = SearchIndex::build(case.inventory.iter().map(|(n, d)| (n.as_str(), d.as_str())));
    assert_eq!(index.len(), case.inventory.len());
    index
        .search(&case.query, clamp_max_results(case.max_results))
        .into_iter()
        .map(|h| {
            // Hits point back at the caller's inventory position.
            assert_eq!(case.inventory[h.index].0, h.name);
            (h.name.to_owned(), h.score)
        })
        .collect()
}

#[test]
fn fixture_parameters_match_the_crate() {
    let (root, cases) = load();
    assert_eq!(root["bm25"]["k1"].as_f64(), Some(1.2));
    assert_eq!(root["bm25"]["b"].as_f64(), Some(0.75));
    assert_eq!(root["bm25"]["nameWeight"].as_u64(), Some(2));
    assert_eq!(
        root["defaultMaxResults"].as_u64(),
        Some(DEFAULT_MAX_RESULTS as u64)
    );
    assert_eq!(
        root["maxResultsCeiling"].as_u64(),
        Some(MAX_RESULTS_CEILING as u64)
    );
    assert!(cases.len() >= 20, "fixture lost its cases");
}

#[test]
fn rankings_match_reference() {
    let (_, cases) = load();
    let mut failures = Vec::new();
    for case in &cases {
        let got = run(case);
        let got_names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        let want_names: Vec<&str> = case.expected.iter().map(|(n, _)| n.as_str()).collect();
        if got_names != want_names {
            failures.push(format!(
                "{}: names\n  got  {got_names:?}\n  want {want_names:?}",
                case.name
            ));
            continue;
        }
        for ((name, got), (_, want)) in got.iter().zip(&case.expected) {
            if (got - want).abs() > TOLERANCE {
                failures.push(format!("{}: {name} score {got} want {want}", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn scores_agree_to_a_few_ulps() {
    // Stricter than the 1e-9 (contract file: 1e-12) tolerance: both sides evaluate the formula
    // in the same order, so any drift beyond float parsing and libm rounding means the
    // arithmetic diverged, and tie-breaking between near-equal scores could follow.
    let (_, cases) = load();
    for case in &cases {
        for ((name, got), (_, want)) in run(case).iter().zip(&case.expected) {
            let ulps = (got - want).abs() / (f64::EPSILON * want.abs());
            assert!(ulps <= 4.0, "{}: {name} off by {ulps} ulp", case.name);
        }
    }
}

#[test]
fn fixture_covers_the_required_behaviours() {
    let (_, cases) = load();
    let find = |name: &str| {
        cases
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("fixture case {name:?} missing"))
    };
    assert!(find("contract: off-vocabulary query").expected.is_empty());
    assert_eq!(
        find("ceiling: 25 matches, max_results 50 capped at 20")
            .expected
            .len(),
        MAX_RESULTS_CEILING
    );
    assert_eq!(
        find("ceiling: 25 matches, default limit").expected.len(),
        DEFAULT_MAX_RESULTS
    );
    assert_eq!(
        find("contract: max_results 0 clamps to 1").expected.len(),
        1
    );
    let ties = &find("ties: equal scores ordered by name").expected;
    assert_eq!(ties[0].1, ties[1].1);
    assert!(ties[0].0 < ties[1].0);
}
