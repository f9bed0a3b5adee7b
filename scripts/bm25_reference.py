#!/usr/bin/env python3
"""Independent reference for tool_search BM25 ranking (reference-behaviour section 3.3).

Generates tests/fixtures/tool_search.json, which the Rust implementation
(src/tools/search.rs) is checked against by tests/tool_search_fixture.rs. This is a
deliberately naive, document-at-a-time implementation written straight from the
formula, sharing no code or structure with the Rust postings index.

Usage: python3 scripts/bm25_reference.py [--check] [OUTPUT]
  --check  exit 1 if the fixture on disk differs from what would be generated.

Rules implemented:
  * plain tokenizer: fold ASCII A-Z to lowercase (nothing else), take runs of [a-z0-9];
    every other character, including all non-ASCII, separates tokens.
  * tool names additionally split camelCase inside each [A-Za-z0-9] run: a boundary
    before an uppercase letter whose word so far ends in a lowercase letter, or ends in an
    uppercase letter while the next character is lowercase (HTTPServer -> HTTP Server).
    Digits take the case of the letter before them (HTTPServer2Go -> http server2 go).
  * queries use the plain tokenizer (no camelCase split), then de-duplicate terms keeping
    first occurrences.
  * document = name tokens twice, then description tokens; dl = its length;
    avgdl = mean dl; idf = ln(1 + (N - n_t + 0.5)/(n_t + 0.5));
    score = sum over query terms of idf*tf*(k1+1)/(tf + k1*(1 - b + b*dl/avgdl)),
    k1 = 1.2, b = 0.75; keep score > 0; sort score desc then name asc;
    limit = 8 when absent, else clamp to 1..=20.
"""

import json
import math
import os
import re
import sys
from collections import Counter

K1 = 1.2
B = 0.75
NAME_WEIGHT = 2
DEFAULT_MAX_RESULTS = 8
MAX_RESULTS_CEILING = 20

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def tokenize(text):
    return re.findall(r"[a-z0-9]+", text.translate(_ASCII_LOWER))


def _camel_words(run):
    # Per-character case class: 'U' / 'L' for letters; digits inherit the previous class
    # (None when no letter precedes them in the run).
    classes = []
    current = None
    for ch in run:
        if "A" <= ch <= "Z":
            current = "U"
        elif "a" <= ch <= "z":
            current = "L"
        classes.append(current)
    cuts = [0]
    for i in range(1, len(run)):
        if not ("A" <= run[i] <= "Z"):
            continue
        before = classes[i - 1]
        nxt = run[i + 1] if i + 1 < len(run) else ""
        if before == "L" or (before == "U" and "a" <= nxt <= "z"):
            cuts.append(i)
    cuts.append(len(run))
    return [run[a:b] for a, b in zip(cuts, cuts[1:]) if a < b]


def tokenize_name(name):
    out = []
    for run in re.findall(r"[A-Za-z0-9]+", name):
        for word in _camel_words(run):
            out.extend(tokenize(word))
    return out


def clamp_max_results(requested):
    if requested is None:
        return DEFAULT_MAX_RESULTS
    return max(1, min(requested, MAX_RESULTS_CEILING))


def rank(inventory, query, max_results):
    docs = []
    for tool in inventory:
        tokens = tokenize_name(tool["name"]) * NAME_WEIGHT + tokenize(tool["description"])
        docs.append((tool["name"], Counter(tokens), len(tokens)))
    n = len(docs)
    if n == 0:
        return []
    avgdl = sum(dl for _, _, dl in docs) / n

    terms = []
    for t in tokenize(query):
        if t not in terms:
            terms.append(t)

    doc_freq = {t: sum(1 for _, tf, _ in docs if tf[t] > 0) for t in terms}
    scored = []
    for name, tf_counts, dl in docs:
        score = 0.0
        for t in terms:
            tf = tf_counts[t]
            if tf == 0:
                continue
            n_t = doc_freq[t]
            idf = math.log(1 + (n - n_t + 0.5) / (n_t + 0.5))
            score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))
        if score > 0:
            scored.append((name, score))
    scored.sort(key=lambda hit: (-hit[1], hit[0]))
    return scored[: clamp_max_results(max_results)]


def tool(name, description):
    return {"name": name, "description": description}


CONTRACT = [
    tool("mcp__github__create_issue", "Create a new issue in a GitHub repository"),
    tool("mcp__github__search_issues", "Search issues and pull requests in a repository"),
    tool("mcp__github__list_repos", "List repositories for the authenticated user"),
    tool("mcp__slack__post_message", "Post a message to a Slack channel"),
    tool("mcp__slack__search_messages", "Search messages across Slack channels"),
    tool("mcp__linear__create_issue", "Create an issue in a Linear workspace"),
    tool("local_read_file", "Read a file from the local workspace"),
    tool("issue", "A tool whose entire name is one query term"),
]

CAMEL = [
    tool("getWeatherForecast", "Return the multi-day outlook for a city"),
    tool("listOpenPullRequests", "Show pending code changes awaiting review"),
    tool("sendSlackMessage", "Post text to a team chat channel"),
    tool("HTTPServer2Go", "Start a tiny static file server"),
    tool("parseJSONPayload", "Decode a request body"),
    tool("createGitHubIssue", "Open a ticket in a code host"),
    tool("get_current_time", "Return the current time in a timezone"),
]

TIES = [
    tool("zeta_tool", "Shared widget helper"),
    tool("alpha_tool", "Shared widget helper"),
    tool("mid_tool", "Shared widget helper"),
    tool("beta_gadget", "Shared widget helper with extra words"),
]

# 25 tools that all mention "report", with varying lengths (so varying scores) and some
# identical documents (so ties inside the ceiling cut).
REPORTS = [
    tool(
        "report_%02d" % i,
        " ".join(["Generate", "the", "report"] + ["filler%d" % j for j in range(i % 7)]),
    )
    for i in range(1, 26)
] + [tool("unrelated_tool", "Does something else entirely")]

UBIQUITOUS = [
    tool("tool_one", "first tool"),
    tool("tool_two", "second tool with a longer description"),
    tool("tool_three", "third"),
]


def case(name, inventory, query, max_results=None):
    return {
        "name": name,
        "inventory": inventory,
        "query": query,
        "maxResults": max_results,
        "expected": [{"name": n, "score": s} for n, s in rank(inventory, query, max_results)],
    }


def cases():
    return [
        case("contract: create issue", CONTRACT, "create issue"),
        case("contract: github", CONTRACT, "github"),
        case("contract: search messages slack", CONTRACT, "search messages slack"),
        case("contract: issue", CONTRACT, "issue"),
        case("contract: read local file", CONTRACT, "read local file"),
        case("contract: repository", CONTRACT, "repository"),
        case("contract: mcp (name-only term)", CONTRACT, "mcp"),
        case("contract: single letter a", CONTRACT, "a"),
        case("contract: case and punctuation folded", CONTRACT, "  Create/ISSUE!! "),
        case("contract: repeated terms count once", CONTRACT, "issue Issue ISSUE create issue"),
        case("contract: search with limit 2", CONTRACT, "search", 2),
        case("contract: off-vocabulary query", CONTRACT, "kubernetes deploy"),
        case("contract: empty query", CONTRACT, ""),
        case("contract: punctuation-only query", CONTRACT, "!!! --- ..."),
        case("contract: non-ASCII query", CONTRACT, "中文 ιssue"),
        case("contract: mixed known and unknown terms", CONTRACT, "kubernetes slack"),
        case("contract: max_results 0 clamps to 1", CONTRACT, "issue", 0),
        case("contract: negative max_results clamps to 1", CONTRACT, "issue", -3),
        case("camel: weather forecast", CAMEL, "weather forecast"),
        case("camel: pull requests", CAMEL, "open pull requests"),
        case("camel: slack message", CAMEL, "slack message"),
        case("camel: acronym run split (http server)", CAMEL, "http server"),
        case("camel: digits stay attached (server2)", CAMEL, "server2 go"),
        case("camel: json", CAMEL, "json payload"),
        case("camel: GitHub splits in names", CAMEL, "git hub issue"),
        case("camel: get spans snake and camel names", CAMEL, "get"),
        case("camel: query is not camel-split", CAMEL, "getWeatherForecast"),
        case("ties: equal scores ordered by name", TIES, "widget"),
        case("ties: equal scores cut by limit", TIES, "shared helper", 2),
        case("ceiling: 25 matches, default limit", REPORTS, "report"),
        case("ceiling: 25 matches, max_results 50 capped at 20", REPORTS, "report", 50),
        case("ceiling: 25 matches, max_results 20", REPORTS, "report", 20),
        case("ceiling: max_results 0 clamps to 1", REPORTS, "report", 0),
        case("idf: term in every document still scores > 0", UBIQUITOUS, "tool"),
        case("empty inventory", [], "anything"),
    ]


def fixture():
    return {
        "_comment": "Generated by scripts/bm25_reference.py; do not edit by hand.",
        "bm25": {"k1": K1, "b": B, "nameWeight": NAME_WEIGHT},
        "defaultMaxResults": DEFAULT_MAX_RESULTS,
        "maxResultsCeiling": MAX_RESULTS_CEILING,
        "scoreTolerance": 1e-9,
        "cases": cases(),
    }


def _self_check():
    assert tokenize("mcp__github__create_issue") == ["mcp", "github", "create", "issue"]
    assert tokenize_name("getWeatherForecast") == ["get", "weather", "forecast"]
    assert tokenize_name("HTTPServer2Go") == ["http", "server2", "go"]
    assert tokenize_name("ABC2DEF") == ["abc2def"]
    assert tokenize("\u212aelvin caf\u00e9") == ["elvin", "caf"]
    # Hand-computed: one doc "alpha"/"beta", N = n_t = 1, dl = avgdl = 3.
    idf = math.log(1 + 0.5 / 1.5)
    (hit,) = rank([tool("alpha", "beta")], "alpha", None)
    assert abs(hit[1] - idf * 2 * 2.2 / (2 + 1.2)) < 1e-15


def main(argv):
    _self_check()
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = paths[0] if paths else os.path.join(root, "tests", "fixtures", "tool_search.json")
    text = json.dumps(fixture(), indent=2, ensure_ascii=False) + "\n"
    if check:
        with open(out, encoding="utf-8") as f:
            if f.read() != text:
                print("%s is stale; rerun scripts/bm25_reference.py" % out, file=sys.stderr)
                return 1
        return 0
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
