//! The ranking core of `tool_search`: Okapi BM25 over the deferred tool inventory
//! (reference-behaviour §3.3). Pure and synchronous: the index is built once per inventory
//! and queried many times, so all per-(term, document) arithmetic happens at build time and
//! a query only sums precomputed weights.
//!
//! Tokenizing: ASCII-lowercase, split on anything that is not `[a-z0-9]` (every non-ASCII
//! character is a separator), keep single letters, no stop words, no stemming. Tool *names*
//! additionally split camelCase before lowercasing (`getWeatherForecast` → `get weather
//! forecast`). Queries use the plain tokenizer only: mixed case in a query is usually a
//! proper noun (`GitHub`), and splitting it would stop it matching descriptions.

use std::collections::HashMap;

/// Matches returned when the caller gives no `max_results`.
pub const DEFAULT_MAX_RESULTS: usize = 8;
/// Upper bound on matches whatever the caller asks for.
pub const MAX_RESULTS_CEILING: usize = 20;

const K1: f64 = 1.2;
const B: f64 = 0.75;
/// The name token sequence appears this many times in the document, ahead of the description.
const NAME_WEIGHT: u32 = 2;

/// Plain tokens of `text`: lowercased runs of `[a-z0-9]`.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = String::new();
    each_plain_token(text, &mut buf, |t| out.push(t.to_owned()));
    out
}

/// Tokens of a tool name: camelCase words split apart, then as [`tokenize`].
///
/// A word boundary sits before an uppercase letter that follows a lowercase one (`getWeather`)
/// or that ends an uppercase run and starts a capitalised word (`HTTPServer` → `HTTP Server`).
/// Digits belong to the word they follow and carry its case, so `HTTPServer2Go` → `http
/// server2 go` and `ABC2DEF` stays one token. The cost: a brand written in camelCase is split
/// too (`createGitHubIssue` → `create git hub issue`), so it matches `git hub`, not `github`.
pub fn tokenize_name(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = String::new();
    each_name_token(name, &mut buf, |t| out.push(t.to_owned()));
    out
}

/// Clamps a caller's `max_results` to `1..=MAX_RESULTS_CEILING`; absent means the default.
pub fn clamp_max_results(requested: Option<i64>) -> usize {
    match requested {
        None => DEFAULT_MAX_RESULTS,
        // Clamped in i64 first so huge or negative requests cannot wrap in the cast.
        Some(n) => n.clamp(1, MAX_RESULTS_CEILING as i64) as usize,
    }
}

/// One ranked match. `index` is the document's position in the sequence given to
/// [`SearchIndex::build`], so callers can map back to their tool records.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit<'a> {
    pub index: usize,
    pub name: &'a str,
    pub score: f64,
}

/// An immutable BM25 index over (name, description) pairs.
#[derive(Debug, Clone, Default)]
pub struct SearchIndex {
    names: Vec<Box<str>>,
    term_ids: HashMap<Box<str>, u32>,
    /// Postings of term `t` are `post_docs[offsets[t]..offsets[t + 1]]` (doc ids ascending)
    /// with the matching `post_weights`. Kept as parallel arrays so the query loop streams
    /// through dense memory.
    offsets: Vec<usize>,
    post_docs: Vec<u32>,
    /// The term's full BM25 contribution to that document: idf, tf and the length norm are
    /// all fixed once the inventory is, so a query only has to add these up.
    post_weights: Vec<f64>,
}

impl SearchIndex {
    /// Indexes `(name, description)` pairs; hits refer to them by position.
    pub fn build<'a>(docs: impl IntoIterator<Item = (&'a str, &'a str)>) -> SearchIndex {
        let mut names: Vec<Box<str>> = Vec::new();
        let mut term_ids: HashMap<Box<str>, u32> = HashMap::new();
        let mut doc_freq: Vec<u32> = Vec::new();
        let mut doc_len: Vec<u64> = Vec::new();
        // (term, doc, tf) in doc order; bucketed by term below.
        let mut entries: Vec<(u32, u32, u32)> = Vec::new();
        let mut local: Vec<(u32, u32)> = Vec::new();
        let mut buf = String::new();

        for (name, description) in docs {
            // Doc ids are u32 to keep postings small; 4 billion tools cannot fit in memory anyway.
            let doc = names.len() as u32;
            local.clear();
            let mut intern = |tok: &str, weight: u32| {
                let id = match term_ids.get(tok) {
                    Some(&id) => id,
                    None => {
                        let id = term_ids.len() as u32;
                        term_ids.insert(tok.into(), id);
                        doc_freq.push(0);
                        id
                    }
                };
                local.push((id, weight));
            };
            each_name_token(name, &mut buf, |t| intern(t, NAME_WEIGHT));
            each_plain_token(description, &mut buf, |t| intern(t, 1));

            let dl: u64 = local.iter().map(|&(_, w)| u64::from(w)).sum();
            local.sort_unstable_by_key(|&(id, _)| id);
            let mut i = 0;
            while i < local.len() {
                let id = local[i].0;
                let mut tf = 0;
                while i < local.len() && local[i].0 == id {
                    tf += local[i].1;
                    i += 1;
                }
                doc_freq[id as usize] += 1;
                entries.push((id, doc, tf));
            }
            doc_len.push(dl);
            names.push(name.into());
        }

        let n_docs = names.len() as f64;
        let total_len: u64 = doc_len.iter().sum();
        let avgdl = if names.is_empty() {
            0.0
        } else {
            total_len as f64 / n_docs
        };
        // The document-dependent half of the BM25 denominator, k1·(1 − b + b·dl/avgdl).
        // avgdl is 0 only when every document is empty, and then nothing is ever scored.
        let norm: Vec<f64> = doc_len
            .iter()
            .map(|&dl| {
                let scaled = if avgdl > 0.0 {
                    B * dl as f64 / avgdl
                } else {
                    0.0
                };
                K1 * (1.0 - B + scaled)
            })
            .collect();
        let idf: Vec<f64> = doc_freq
            .iter()
            .map(|&nt| {
                let nt = f64::from(nt);
                (1.0 + (n_docs - nt + 0.5) / (nt + 0.5)).ln()
            })
            .collect();

        let mut offsets = Vec::with_capacity(doc_freq.len() + 1);
        let mut acc = 0usize;
        offsets.push(0);
        for &df in &doc_freq {
            acc += df as usize;
            offsets.push(acc);
        }
        // Entries arrive in doc order, so filling each term's slot range front to back keeps
        // its postings sorted by doc id.
        let mut cursor: Vec<usize> = offsets[..doc_freq.len()].to_vec();
        let mut post_docs = vec![0u32; entries.len()];
        let mut post_weights = vec![0f64; entries.len()];
        for &(term, doc, tf) in &entries {
            let slot = &mut cursor[term as usize];
            let tf = f64::from(tf);
            post_docs[*slot] = doc;
            // Same operation order as the formula (and the Python reference), so scores agree
            // to the last bit rather than merely within tolerance.
            post_weights[*slot] = idf[term as usize] * tf * (K1 + 1.0) / (tf + norm[doc as usize]);
            *slot += 1;
        }

        SearchIndex {
            names,
            term_ids,
            offsets,
            post_docs,
            post_weights,
        }
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Number of distinct terms across the inventory.
    pub fn vocabulary_len(&self) -> usize {
        self.term_ids.len()
    }

    /// The name of document `index`, if it exists.
    pub fn name(&self, index: usize) -> Option<&str> {
        self.names.get(index).map(|n| &**n)
    }

    /// Ranks documents against `query`: score descending, then name ascending, at most
    /// `max_results` clamped to `1..=MAX_RESULTS_CEILING`. Documents scoring ≤ 0 are dropped,
    /// so a query sharing no term with the inventory yields nothing.
    pub fn search(&self, query: &str, max_results: usize) -> Vec<Hit<'_>> {
        let limit = max_results.clamp(1, MAX_RESULTS_CEILING);
        let terms = self.query_terms(query);

        let mut top = TopK::new(limit, &self.names);
        match terms.as_slice() {
            [] => return Vec::new(),
            // The common single-word query needs no accumulation at all.
            &[t] => {
                let r = self.postings(t);
                for (&d, &w) in self.post_docs[r.clone()].iter().zip(&self.post_weights[r]) {
                    top.offer(d, w);
                }
            }
            _ => {
                // A dense accumulator is O(N) to zero but branch-light; at 10k documents that
                // is a few microseconds, cheaper than hashing every posting.
                let mut acc = vec![0f64; self.names.len()];
                let mut touched: Vec<u32> = Vec::new();
                // Query order, so each score is summed in the same order as the reference.
                for &t in &terms {
                    let r = self.postings(t);
                    for (&d, &w) in self.post_docs[r.clone()].iter().zip(&self.post_weights[r]) {
                        let slot = &mut acc[d as usize];
                        // Weights are strictly positive, so 0.0 means "not seen yet".
                        if *slot == 0.0 {
                            touched.push(d);
                        }
                        *slot += w;
                    }
                }
                for &d in &touched {
                    top.offer(d, acc[d as usize]);
                }
            }
        }
        top.best
            .into_iter()
            .map(|(d, score)| Hit {
                index: d as usize,
                name: &self.names[d as usize],
                score,
            })
            .collect()
    }

    fn postings(&self, term: u32) -> std::ops::Range<usize> {
        let t = term as usize;
        self.offsets[t]..self.offsets[t + 1]
    }

    /// Known query terms, de-duplicated, in first-occurrence order. Unknown terms would
    /// score 0 everywhere, so they are dropped here.
    fn query_terms(&self, query: &str) -> Vec<u32> {
        let mut terms: Vec<u32> = Vec::new();
        // Linear de-duplication is fastest for real queries; a pathological query with many
        // distinct terms switches to a bitset so it stays linear.
        const LINEAR_LIMIT: usize = 32;
        let mut seen: Vec<u64> = Vec::new();
        let mut buf = String::new();
        each_plain_token(query, &mut buf, |tok| {
            let Some(&id) = self.term_ids.get(tok) else {
                return;
            };
            if terms.len() < LINEAR_LIMIT {
                if !terms.contains(&id) {
                    terms.push(id);
                }
                return;
            }
            if seen.is_empty() {
                seen = vec![0; self.term_ids.len().div_ceil(64)];
                for &t in &terms {
                    seen[t as usize / 64] |= 1 << (t % 64);
                }
            }
            let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
            if seen[word] & bit == 0 {
                seen[word] |= bit;
                terms.push(id);
            }
        });
        terms
    }
}

/// The best `limit` (doc, score) pairs offered so far, kept sorted best-first. Most candidates
/// lose to the current worst on score alone, so ranking is one float comparison per match
/// instead of a sort over all of them.
struct TopK<'a> {
    limit: usize,
    names: &'a [Box<str>],
    best: Vec<(u32, f64)>,
}

impl<'a> TopK<'a> {
    fn new(limit: usize, names: &'a [Box<str>]) -> Self {
        TopK {
            limit,
            names,
            best: Vec::with_capacity(limit + 1),
        }
    }

    /// Score descending, then name ascending; doc id last so duplicate names still order
    /// deterministically.
    fn ranks_before(&self, a: (u32, f64), b: (u32, f64)) -> bool {
        b.1.total_cmp(&a.1)
            .then_with(|| self.names[a.0 as usize].cmp(&self.names[b.0 as usize]))
            .then(a.0.cmp(&b.0))
            .is_lt()
    }

    fn offer(&mut self, doc: u32, score: f64) {
        // Relevance floor: a document sharing no weight with the query is noise, not a match.
        if score <= 0.0 {
            return;
        }
        let cand = (doc, score);
        if self.best.len() >= self.limit {
            match self.best.last() {
                Some(&worst) if self.ranks_before(cand, worst) => {
                    self.best.pop();
                }
                _ => return,
            }
        }
        let pos = self.best.partition_point(|&x| self.ranks_before(x, cand));
        self.best.insert(pos, cand);
    }
}

/// Calls `f` with each plain token of `text`. Tokens with uppercase letters are lowercased
/// into `buf`, which is reused so tokenizing does not allocate per token.
fn each_plain_token(text: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    for piece in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        if !piece.is_empty() {
            f(ascii_lower(piece, buf));
        }
    }
}

/// As [`each_plain_token`], but each alphanumeric run is first split at camelCase boundaries.
fn each_name_token(name: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    for piece in name.split(|c: char| !c.is_ascii_alphanumeric()) {
        if !piece.is_empty() {
            split_camel(piece, |word| f(ascii_lower(word, buf)));
        }
    }
}

/// Splits an ASCII-alphanumeric run into camelCase words (boundary rules on [`tokenize_name`]).
fn split_camel(run: &str, mut emit: impl FnMut(&str)) {
    let bytes = run.as_bytes();
    let mut start = 0;
    // Case of the last letter in the current word (None before any letter); digits inherit it.
    let mut last_upper: Option<bool> = None;
    for (i, &c) in bytes.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let boundary = match last_upper {
                Some(false) => true,
                Some(true) => bytes.get(i + 1).is_some_and(u8::is_ascii_lowercase),
                None => false,
            };
            if boundary && i > start {
                emit(&run[start..i]);
                start = i;
            }
            last_upper = Some(true);
        } else if c.is_ascii_lowercase() {
            last_upper = Some(false);
        }
    }
    if start < run.len() {
        emit(&run[start..]);
    }
}

fn ascii_lower<'a>(piece: &'a str, buf: &'a mut String) -> &'a str {
    if piece.bytes().any(|b| b.is_ascii_uppercase()) {
        buf.clear();
        buf.push_str(piece);
        buf.make_ascii_lowercase();
        buf
    } else {
        piece
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plain_tokenizer_splits_on_non_alphanumerics() {
        assert_eq!(
            tokenize("mcp__github__create_issue"),
            toks(&["mcp", "github", "create", "issue"])
        );
        assert_eq!(
            tokenize("Create a new issue in a GitHub repository."),
            toks(&[
                "create",
                "a",
                "new",
                "issue",
                "in",
                "a",
                "github",
                "repository"
            ])
        );
        assert_eq!(
            tokenize("  --x--  HTTP/2 v1.2 "),
            toks(&["x", "http", "2", "v1", "2"])
        );
        assert!(tokenize("").is_empty());
        assert!(tokenize("!!! --- ...").is_empty());
    }

    #[test]
    fn plain_tokenizer_treats_non_ascii_as_separators() {
        assert_eq!(tokenize("café au lait"), toks(&["caf", "au", "lait"]));
        assert_eq!(tokenize("中文abc测试DEF"), toks(&["abc", "def"]));
        // Unicode case folding would turn the Kelvin sign into `k`; we only fold ASCII.
        assert_eq!(tokenize("\u{212A}elvin"), toks(&["elvin"]));
    }

    #[test]
    fn plain_tokenizer_does_not_split_camel_case() {
        assert_eq!(
            tokenize("getWeatherForecast"),
            toks(&["getweatherforecast"])
        );
    }

    #[test]
    fn name_tokenizer_splits_camel_case() {
        assert_eq!(
            tokenize_name("getWeatherForecast"),
            toks(&["get", "weather", "forecast"])
        );
        assert_eq!(
            tokenize_name("listOpenPullRequests"),
            toks(&["list", "open", "pull", "requests"])
        );
        assert_eq!(
            tokenize_name("HTTPServer2Go"),
            toks(&["http", "server2", "go"])
        );
        assert_eq!(
            tokenize_name("parseJSONPayload"),
            toks(&["parse", "json", "payload"])
        );
        assert_eq!(
            tokenize_name("XMLHttpRequest"),
            toks(&["xml", "http", "request"])
        );
        assert_eq!(tokenize_name("GitHub"), toks(&["git", "hub"]));
    }

    #[test]
    fn name_tokenizer_keeps_digits_with_preceding_letters() {
        assert_eq!(tokenize_name("HTTP2Server"), toks(&["http2", "server"]));
        assert_eq!(tokenize_name("ABC2DEF"), toks(&["abc2def"]));
        assert_eq!(tokenize_name("v2Api"), toks(&["v2", "api"]));
        assert_eq!(tokenize_name("2FA"), toks(&["2fa"]));
        assert_eq!(tokenize_name("base64Encode"), toks(&["base64", "encode"]));
    }

    #[test]
    fn name_tokenizer_matches_plain_on_snake_case() {
        for name in [
            "mcp__github__create_issue",
            "local_read_file",
            "issue",
            "a_b_c",
            "ALLCAPS",
            "lower",
            "",
        ] {
            assert_eq!(tokenize_name(name), tokenize(name), "{name}");
        }
        assert_eq!(
            tokenize_name("mcp__github__createIssue"),
            toks(&["mcp", "github", "create", "issue"])
        );
        assert_eq!(tokenize_name("A"), toks(&["a"]));
        assert_eq!(tokenize_name("aB"), toks(&["a", "b"]));
    }

    #[test]
    fn clamp_max_results_bounds() {
        assert_eq!(clamp_max_results(None), DEFAULT_MAX_RESULTS);
        assert_eq!(clamp_max_results(Some(0)), 1);
        assert_eq!(clamp_max_results(Some(-7)), 1);
        assert_eq!(clamp_max_results(Some(5)), 5);
        assert_eq!(clamp_max_results(Some(20)), 20);
        assert_eq!(clamp_max_results(Some(21)), MAX_RESULTS_CEILING);
        assert_eq!(clamp_max_results(Some(i64::MAX)), MAX_RESULTS_CEILING);
        assert_eq!(clamp_max_results(Some(i64::MIN)), 1);
    }

    #[test]
    fn empty_index_and_empty_queries_return_nothing() {
        let empty = SearchIndex::build(std::iter::empty());
        assert!(empty.is_empty());
        assert!(empty.search("anything", 8).is_empty());

        let idx = SearchIndex::build([("a_tool", "does things"), ("", "")]);
        assert_eq!(idx.len(), 2);
        assert!(idx.search("", 8).is_empty());
        assert!(idx.search("zzz", 8).is_empty());
        assert_eq!(idx.search("things", 0).len(), 1);
    }

    #[test]
    fn all_empty_documents_do_not_produce_nan() {
        let idx = SearchIndex::build([("", ""), ("!!", "??")]);
        assert_eq!(idx.vocabulary_len(), 0);
        assert!(idx.search("x", 8).is_empty());
    }

    #[test]
    fn repeated_query_terms_count_once() {
        let idx = SearchIndex::build([("issue_tool", "issue tracker"), ("other", "nothing")]);
        assert_eq!(idx.search("issue", 8), idx.search("Issue ISSUE issue", 8));
    }

    #[test]
    fn many_distinct_query_terms_are_deduplicated() {
        let words: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
        let desc = words.join(" ");
        let idx = SearchIndex::build([("t", desc.as_str()), ("u", "w1")]);
        let once = idx.search(&desc, 8);
        let twice = idx.search(&format!("{desc} {desc}"), 8);
        assert_eq!(once, twice);
        assert_eq!(once[0].name, "t");
    }

    #[test]
    fn ties_break_by_name_then_limit_applies() {
        let idx = SearchIndex::build([("zeta", "widget"), ("alpha", "widget"), ("mid", "widget")]);
        let names: Vec<&str> = idx.search("widget", 2).iter().map(|h| h.name).collect();
        assert_eq!(names, ["alpha", "mid"]);
        let hits = idx.search("widget", 8);
        assert_eq!(hits[0].index, 1);
        assert!(hits.iter().all(|h| h.score > 0.0));
    }

    #[test]
    fn smaller_limits_are_prefixes_of_larger_ones() {
        // Many ties and near-ties, so the bounded top-k has to get the cut right.
        let docs: Vec<(String, String)> = (0..300)
            .map(|i| {
                let filler = "pad ".repeat(i % 11);
                (
                    format!("tool_{:03}", (i * 37) % 300),
                    format!("widget {filler}"),
                )
            })
            .collect();
        let idx = SearchIndex::build(docs.iter().map(|(n, d)| (n.as_str(), d.as_str())));
        let full = idx.search("widget pad", MAX_RESULTS_CEILING);
        assert_eq!(full.len(), MAX_RESULTS_CEILING);
        for w in full.windows(2) {
            assert!(w[0].score > w[1].score || (w[0].score == w[1].score && w[0].name < w[1].name));
        }
        for k in 1..MAX_RESULTS_CEILING {
            assert_eq!(idx.search("widget pad", k), full[..k]);
        }
    }

    #[test]
    fn name_weight_counts_name_tokens_twice() {
        // One document: N = n_t = 1, dl = avgdl, so the norm is k1 and the score is
        // idf·tf·(k1+1)/(tf+k1) with tf = 2 for a name token.
        let idx = SearchIndex::build([("alpha", "beta")]);
        let idf = (1.0f64 + 0.5 / 1.5).ln();
        let name_score = idf * 2.0 * 2.2 / (2.0 + 1.2);
        let desc_score = idf * 2.2 / (1.0 + 1.2);
        assert_eq!(idx.search("alpha", 8)[0].score, name_score);
        assert_eq!(idx.search("beta", 8)[0].score, desc_score);
    }
}
