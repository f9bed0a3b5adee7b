//! DuckDuckGo lite's results page (`https://lite.duckduckgo.com/lite/`) → search hits.
//!
//! The page is a table with three rows per result: the title link (`a.result-link`, its href
//! a `//duckduckgo.com/l/?uddg=<url>` redirect), the snippet (`td.result-snippet`) and the
//! displayed host (`span.link-text`). Ads are the same rows marked `result-sponsored`, linking
//! to `duckduckgo.com/y.js`. Parsed with html5ever, the parser htmd already brings
//! (docs/decisions.md, "Web tools"), walking the tree in document order.

use std::rc::Rc;

use markup5ever_rcdom::Node;

use super::html::{
    descendants, element_attr, has_class, is_element, parent, parse_document, text_content,
};

/// One organic result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub title: String,
    /// The destination (the `uddg` redirect decoded), always `http(s)://`.
    pub url: String,
    pub snippet: String,
}

/// The organic results of a DuckDuckGo lite page, in page order. Sponsored results and results
/// without a usable URL are left out; titles and snippets have their whitespace collapsed.
/// A page that is not a results page (no results, a captcha) gives none.
pub fn parse_lite(html: &str) -> Vec<Hit> {
    struct Pending {
        hit: Hit,
        keep: bool,
    }
    let document = parse_document(html);
    let mut out: Vec<Pending> = Vec::new();
    for node in descendants(&document) {
        if is_element(&node, "a") && has_class(&node, "result-link") {
            let href = element_attr(&node, "href").unwrap_or_default();
            let url = destination(&href);
            let keep = url.is_some() && !is_ad(&node, &href);
            out.push(Pending {
                hit: Hit {
                    title: collapse(&text_content(&node)),
                    url: url.unwrap_or_default(),
                    snippet: String::new(),
                },
                keep,
            });
        } else if has_class(&node, "result-snippet")
            && let Some(current) = out.last_mut()
            && current.hit.snippet.is_empty()
        {
            current.hit.snippet = collapse(&text_content(&node));
        }
    }
    out.into_iter().filter(|p| p.keep).map(|p| p.hit).collect()
}

/// A sponsored row (its `tr`, or any element around the link, has class `result-sponsored`),
/// or an ad-click link.
fn is_ad(link: &Rc<Node>, href: &str) -> bool {
    let mut current = parent(link);
    while let Some(node) = current {
        if has_class(&node, "result-sponsored") {
            return true;
        }
        current = parent(&node);
    }
    url::Url::parse(&absolute(href)).is_ok_and(|u| is_ddg(&u) && u.path() == "/y.js")
}

/// The result's real URL: the `uddg` parameter of a DuckDuckGo redirect, decoded, or the href
/// itself when it links out directly. Only `http(s)` URLs count; a DuckDuckGo link without a
/// `uddg` target is none.
fn destination(href: &str) -> Option<String> {
    let href = href.trim();
    if href.is_empty() {
        return None;
    }
    let parsed = url::Url::parse(&absolute(href)).ok()?;
    let target = if is_ddg(&parsed) {
        let (_, target) = parsed.query_pairs().find(|(k, _)| k == "uddg")?;
        url::Url::parse(&target).ok()?
    } else {
        parsed
    };
    matches!(target.scheme(), "http" | "https").then(|| target.to_string())
}

fn is_ddg(url: &url::Url) -> bool {
    url.host_str()
        .is_some_and(|h| h == "duckduckgo.com" || h.ends_with(".duckduckgo.com"))
}

/// `//host/…` (scheme-relative, as DuckDuckGo writes its redirects) as `https://host/…`.
fn absolute(href: &str) -> String {
    if href.starts_with("//") {
        format!("https:{href}")
    } else {
        href.to_string()
    }
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> String {
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/web/ddg_lite.html"
        ))
        .unwrap()
    }

    #[test]
    fn organic_results_in_page_order_with_decoded_urls() {
        let hits = parse_lite(&fixture());
        let urls: Vec<&str> = hits.iter().map(|h| h.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "https://www.rust-lang.org/",
                "https://doc.rust-lang.org/book/ch01-01-installation.html?lang=en&v=1.95#installing-rustup-on-linux",
                "https://en.wikipedia.org/wiki/Rust_(programming_language)",
                "https://github.com/rust-lang/rust",
            ]
        );
        assert_eq!(hits[0].title, "Rust Programming Language");
        assert_eq!(
            hits[1].title,
            "Installation - The Rust Programming Language"
        );
    }

    #[test]
    fn snippets_lose_markup_and_extra_whitespace() {
        let hits = parse_lite(&fixture());
        assert_eq!(
            hits[0].snippet,
            "A language empowering everyone to build reliable and efficient software. \
             Rust is blazingly fast and memory-efficient: with no runtime or garbage collector."
        );
        assert_eq!(
            hits[2].snippet,
            "Rust is a general-purpose programming language emphasizing performance, type safety, \
             and concurrency. It enforces memory safety—meaning that all references point to valid memory."
        );
        for h in &hits {
            assert!(
                !h.snippet.contains('<') && !h.snippet.contains("  "),
                "{h:?}"
            );
            assert!(!h.title.contains('\n'), "{h:?}");
        }
    }

    #[test]
    fn sponsored_results_are_skipped() {
        let hits = parse_lite(&fixture());
        assert_eq!(hits.len(), 4);
        assert!(hits.iter().all(|h| !h.title.contains("Learn Rust Fast")));
        assert!(
            hits.iter()
                .all(|h| !h.url.contains("y.js") && !h.url.contains("duckduckgo"))
        );
    }

    #[test]
    fn results_without_a_usable_url_are_skipped() {
        let html = r#"<table>
            <tr><td><a class="result-link" href="">No href</a></td></tr>
            <tr><td class="result-snippet">orphan</td></tr>
            <tr><td><a class="result-link">Missing href</a></td></tr>
            <tr><td><a class="result-link" href="//duckduckgo.com/l/?rut=abc">No uddg</a></td></tr>
            <tr><td><a class="result-link" href="javascript:alert(1)">Script</a></td></tr>
            <tr><td><a class="result-link" href="//duckduckgo.com/l/?uddg=ftp%3A%2F%2Fexample.org%2F">Ftp</a></td></tr>
            <tr><td><a class="result-link" href="http://example.org/a b">Direct</a></td></tr>
            <tr><td class="result-snippet">kept <b>snippet</b></td></tr>
        </table>"#;
        let hits = parse_lite(html);
        assert_eq!(
            hits,
            [Hit {
                title: "Direct".into(),
                url: "http://example.org/a%20b".into(),
                snippet: "kept snippet".into(),
            }]
        );
    }

    #[test]
    fn a_page_without_results_gives_none() {
        assert!(parse_lite("").is_empty());
        assert!(parse_lite("<html><body><p>No results.</p></body></html>").is_empty());
        assert!(parse_lite("<a class='result-link' href='//duckduckgo.com/l/?uddg=").is_empty());
    }
}
