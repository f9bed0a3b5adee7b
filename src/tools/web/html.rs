//! HTML → Markdown for `web_fetch`, and the DOM helpers the DuckDuckGo parser shares.
//!
//! The converter is `htmd` (html5ever underneath), chosen against `mdka` and `fast_html2md` on
//! saved pages (docs/decisions.md, "Web tools"). Around it:
//! - our handlers for what htmd gets wrong on real pages: code blocks are the element's text
//!   (htmd writes `[links](…)` into rustdoc's code), a bare `<pre>` is fenced too (Sphinx,
//!   GitHub), two `<code>` in one `<pre>` are two blocks (htmd glues the fences), links with
//!   no text (icon buttons), heading permalinks (`¶`, `§`), `javascript:` links and `data:`
//!   images are dropped;
//! - page chrome and non-content elements are skipped ([`SKIPPED`], and `role="navigation"`);
//! - a hostile page cannot stall or crash us: html5ever's tree builder is quadratic in the
//!   nesting depth (100 000 nested `<div>` take 50 s to parse) and htmd's walk recurses once
//!   per level (10 000 levels overflow a 2 MiB stack and abort the process), so the nesting the
//!   parser sees is bounded first ([`bound_nesting`]) and the tree is cut at [`MAX_DOM_DEPTH`]
//!   ([`prune`]) before htmd walks it;
//! - blank lines are collapsed outside code blocks.

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::LazyLock;

use htmd::element_handler::{HandlerResult, Handlers};
use htmd::options::{BulletListMarker, Options};
use htmd::{Element, HtmlToMarkdown};
use html5ever::tendril::StrTendril;
use markup5ever_rcdom::{Node, NodeData};

/// Elements whose content never reaches the model: code, styling, embedded documents,
/// controls and navigation chrome. (`head` is kept: its `<title>` is the first line.)
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "svg", "math", "iframe", "template", "nav", "footer", "button",
    "select", "canvas", "object", "embed", "dialog",
];

/// Elements the text of a code block ends a line at (some highlighters put lines in them).
const LINE_ELEMENTS: &[&str] = &[
    "div", "p", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "section",
];

/// Deepest element nesting handed to the parser, in [`bound_nesting`]'s model of it (elements
/// with optional end tags, like `li` and `td`, are not counted). The saved pages in
/// tests/fixtures/web/pages reach a tree depth of 18.
const MAX_NESTING: usize = 256;

/// Depth at which the parsed tree is cut ([`prune`]): htmd recurses once per level and
/// must fit a 2 MiB stack (tokio's worker and blocking threads) even in a debug build, where
/// 1024 levels overflow it.
const MAX_DOM_DEPTH: usize = 256;

/// Links whose whole text is one of these and whose target is on the page are permalinks.
const PERMALINK_TEXTS: &[&str] = &["¶", "§", "#", "🔗", "⚓"];

static CONVERTER: LazyLock<HtmlToMarkdown> = LazyLock::new(|| {
    let options = Options {
        bullet_list_marker: BulletListMarker::Dash,
        ul_bullet_spacing: 1,
        ol_number_spacing: 1,
        ..Options::default()
    };
    HtmlToMarkdown::builder()
        .options(options)
        .add_handler(vec!["pre"], pre_handler)
        .add_handler(vec!["code"], inline_code_handler)
        .add_handler(vec!["a"], anchor_handler)
        .add_handler(vec!["img"], img_handler)
        .build()
});

/// Converts an HTML page to Markdown for a model to read: headings, paragraphs, lists, links
/// as `[text](url)`, fenced code blocks and pipe tables; scripts, styles, embedded media,
/// navigation chrome and comments are dropped; no run of more than one blank line outside code.
pub fn to_markdown(html: &str) -> String {
    to_markdown_at(html, None)
}

/// [`to_markdown`], with relative links and image sources made absolute against the page's
/// URL (or its `<base href>`), so the model can fetch what a page links to as written.
pub fn to_markdown_at(html: &str, page: Option<&url::Url>) -> String {
    let html = bound_nesting(html);
    let Ok(tree) = CONVERTER.html_to_tree(&html) else {
        return String::new();
    };
    prune(&tree, MAX_DOM_DEPTH);
    if let Some(page) = page {
        absolutize(&tree, page);
    }
    tidy(&CONVERTER.tree_to_markdown(&tree))
}

/// Rewrites `a[href]` and `img[src]` that are relative (in-page `#` links stay as they are).
fn absolutize(root: &Rc<Node>, page: &url::Url) {
    let nodes = descendants(root);
    let base = nodes
        .iter()
        .find(|n| is_element(n, "base"))
        .and_then(|n| element_attr(n, "href"))
        .and_then(|h| page.join(&h).ok())
        .unwrap_or_else(|| page.clone());
    for node in &nodes {
        let key = match tag_name(node) {
            Some("a") => "href",
            Some("img") => "src",
            _ => continue,
        };
        let NodeData::Element { attrs, .. } = &node.data else {
            continue;
        };
        for a in attrs.borrow_mut().iter_mut() {
            if &*a.name.local != key {
                continue;
            }
            let v = a.value.trim();
            let absolute = url::Url::parse(v).is_ok();
            if absolute || v.is_empty() || v.starts_with('#') {
                continue;
            }
            if let Ok(joined) = base.join(v) {
                a.value = StrTendril::from(joined.as_str());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers

/// `<pre>`: a fenced block of its text. Several multi-line `<code>` children (Node's docs put
/// the ESM and CommonJS versions of an example in one `<pre>`) are one block each.
fn pre_handler(_: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let pre = element.node;
    let codes: Vec<Rc<Node>> = pre
        .children
        .borrow()
        .iter()
        .filter(|c| is_element(c, "code"))
        .cloned()
        .collect();
    let mut out = String::from("\n\n");
    if codes.len() > 1
        && codes
            .iter()
            .all(|c| text_content(c).trim_end().contains('\n'))
    {
        for code in &codes {
            push_fence(
                &mut out,
                &text_content(code),
                code_language(code, pre).as_deref(),
            );
            out.push_str("\n\n");
        }
    } else {
        let lang = codes.first().and_then(|c| code_language(c, pre));
        let lang = lang.or_else(|| code_language(pre, pre));
        push_fence(&mut out, &text_content(pre), lang.as_deref());
        out.push_str("\n\n");
    }
    Some(out.into())
}

/// Inline `<code>`: its text (links inside code are code, not Markdown links) in backticks.
fn inline_code_handler(_: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let text = text_content(element.node);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        return None;
    }
    let run = longest_run(&text, '`');
    let delimiter = "`".repeat(run + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    Some(format!("{delimiter}{pad}{text}{pad}{delimiter}").into())
}

/// `<a>`: htmd's link unless it has no text (icons), is a heading's permalink, or runs script.
fn anchor_handler(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let href = attr(element.attrs, "href").unwrap_or_default();
    let node = element.node;
    if href
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("javascript:")
    {
        return Some(handlers.walk_children(node));
    }
    if href.starts_with('#') && PERMALINK_TEXTS.contains(&text_content(node).trim()) {
        return None;
    }
    let result = handlers.fallback(element)?;
    if result.content.trim_start().starts_with("[](") {
        return None;
    }
    Some(result)
}

/// `<img>`: htmd's image, except inline `data:` images (kilobytes of base64), which keep their
/// alt text only.
fn img_handler(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let src = attr(element.attrs, "src").unwrap_or_default();
    if src.trim_start().to_ascii_lowercase().starts_with("data:") {
        let alt = attr(element.attrs, "alt").unwrap_or_default();
        let alt = alt.split_whitespace().collect::<Vec<_>>().join(" ");
        return (!alt.is_empty()).then(|| alt.into());
    }
    handlers.fallback(element)
}

fn push_fence(out: &mut String, code: &str, lang: Option<&str>) {
    let code = code.trim_start_matches('\n').trim_end();
    let fence = "`".repeat(3.max(longest_run(code, '`') + 1));
    out.push_str(&fence);
    out.push_str(lang.unwrap_or_default());
    out.push('\n');
    out.push_str(code);
    out.push('\n');
    out.push_str(&fence);
}

/// The language of a code block: `language-x`/`lang-x` on the `<code>` or the `<pre>`, or
/// Sphinx's `highlight-x` on the two elements around the `<pre>`.
fn code_language(code: &Rc<Node>, pre: &Rc<Node>) -> Option<String> {
    let from_class = |node: &Rc<Node>, prefixes: &[&str]| {
        let class = element_attr(node, "class")?;
        class.split_ascii_whitespace().find_map(|c| {
            prefixes
                .iter()
                .find_map(|p| c.strip_prefix(p))
                .filter(|l| !l.is_empty() && !matches!(*l, "none" | "default" | "text"))
                .map(str::to_string)
        })
    };
    let prefixes = &["language-", "lang-"];
    from_class(code, prefixes)
        .or_else(|| from_class(pre, prefixes))
        .or_else(|| {
            let parent = parent(pre)?;
            from_class(&parent, &["highlight-"])
                .or_else(|| from_class(&self::parent(&parent)?, &["highlight-"]))
        })
}

fn longest_run(text: &str, ch: char) -> usize {
    let (mut longest, mut current) = (0, 0);
    for c in text.chars() {
        current = if c == ch { current + 1 } else { 0 };
        longest = longest.max(current);
    }
    longest
}

// ---------------------------------------------------------------------------------------------
// DOM helpers (also used by the DuckDuckGo parser)

/// Parses a whole HTML document with html5ever into a reference-counted tree. Keep the
/// returned document alive while using nodes under it: dropping it empties the whole tree
/// (markup5ever_rcdom's iterative `Drop`), whoever else holds a node.
pub(super) fn parse_document(html: &str) -> Rc<Node> {
    use html5ever::tendril::TendrilSink;
    html5ever::parse_document(markup5ever_rcdom::RcDom::default(), Default::default())
        .one(html)
        .document
}

/// Whether `node` is the element `tag` (lower-case local name).
pub(super) fn is_element(node: &Node, tag: &str) -> bool {
    matches!(&node.data, NodeData::Element { name, .. } if &*name.local == tag)
}

/// The element's tag (local name), if `node` is an element.
pub(super) fn tag_name(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(&name.local),
        _ => None,
    }
}

/// The value of attribute `name` on element `node`.
pub(super) fn element_attr(node: &Node, name: &str) -> Option<String> {
    match &node.data {
        NodeData::Element { attrs, .. } => attr(&attrs.borrow(), name),
        _ => None,
    }
}

fn attr(attrs: &[html5ever::Attribute], name: &str) -> Option<String> {
    attrs
        .iter()
        .find(|a| &*a.name.local == name)
        .map(|a| a.value.to_string())
}

/// Whether the element's `class` attribute lists `class`.
pub(super) fn has_class(node: &Node, class: &str) -> bool {
    element_attr(node, "class").is_some_and(|c| c.split_ascii_whitespace().any(|c| c == class))
}

/// The parent of `node`, if it is attached.
pub(super) fn parent(node: &Node) -> Option<Rc<Node>> {
    let weak = node.parent.take();
    let parent = weak.as_ref().and_then(std::rc::Weak::upgrade);
    node.parent.set(weak);
    parent
}

/// Every element under `root` (document order, `root` included), without recursion.
pub(super) fn descendants(root: &Rc<Node>) -> Vec<Rc<Node>> {
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(node) = stack.pop() {
        stack.extend(node.children.borrow().iter().rev().cloned());
        if matches!(node.data, NodeData::Element { .. }) {
            out.push(node);
        }
    }
    out
}

/// The text under `node` as a browser would lay it out in a `<pre>`: text nodes verbatim,
/// `<br>` and line-level elements as line ends, skipped elements (scripts …) left out.
/// Iterative, so any depth is fine.
pub(super) fn text_content(node: &Rc<Node>) -> String {
    enum Step {
        Enter(Rc<Node>),
        EndLine,
    }
    let mut out = String::new();
    let mut stack = vec![Step::Enter(node.clone())];
    while let Some(step) = stack.pop() {
        let node = match step {
            Step::EndLine => {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                continue;
            }
            Step::Enter(node) => node,
        };
        match &node.data {
            NodeData::Text { contents } => out.push_str(&contents.borrow()),
            NodeData::Element { name, .. } => {
                let tag = &*name.local;
                if tag == "br" {
                    out.push('\n');
                    continue;
                }
                if is_skipped(&node) {
                    continue;
                }
                let line = LINE_ELEMENTS.contains(&tag);
                if line {
                    stack.push(Step::EndLine);
                }
                stack.extend(
                    node.children
                        .borrow()
                        .iter()
                        .rev()
                        .cloned()
                        .map(Step::Enter),
                );
                if line {
                    stack.push(Step::EndLine);
                }
            }
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Bounds against hostile nesting

/// Prepares the parsed tree for htmd: removes skipped elements ([`SKIPPED`], and anything
/// marked `role="navigation"`), and cuts the tree at `limit` levels (an element at that depth
/// keeps only its text, as one text node) so htmd's recursive walk stays shallow whatever the
/// page does. Iterative.
fn prune(root: &Rc<Node>, limit: usize) {
    let mut stack = vec![(root.clone(), 0usize)];
    while let Some((node, depth)) = stack.pop() {
        if depth >= limit {
            let text = text_content(&node);
            let leaf = Node::new(NodeData::Text {
                contents: RefCell::new(StrTendril::from_slice(&text)),
            });
            leaf.parent.set(Some(Rc::downgrade(&node)));
            *node.children.borrow_mut() = vec![leaf];
            continue;
        }
        node.children
            .borrow_mut()
            .retain(|child| !is_skipped(child));
        for child in node.children.borrow().iter() {
            if matches!(child.data, NodeData::Element { .. }) {
                stack.push((child.clone(), depth + 1));
            }
        }
    }
}

fn is_skipped(node: &Node) -> bool {
    tag_name(node).is_some_and(|t| SKIPPED.contains(&t))
        || element_attr(node, "role").is_some_and(|r| r.eq_ignore_ascii_case("navigation"))
}

/// Elements that never hold children (`<br>`) or close when a sibling starts (`<li>`, `<td>`,
/// `<p>`), which [`bound_nesting`] does not count as nesting.
const NOT_NESTING: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr", "param", "keygen", "frame", "basefont", "bgsound", "image", "p", "li", "dt", "dd",
    "option", "optgroup", "tr", "td", "th", "thead", "tbody", "tfoot", "colgroup", "caption", "rb",
    "rt", "rp", "rtc", "html", "head", "body",
];

/// Elements whose content is not markup: the scanner skips to their end tag.
const RAW_TEXT: &[&str] = &[
    "script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "noscript",
];

/// Keeps the element nesting the parser sees under [`MAX_NESTING`]: a linear scan models the
/// open elements (an end tag closes everything opened after its start tag, as html5ever does),
/// and a start tag that would go deeper is left out (its text stays). Pages within the bound —
/// every real one we have seen — come back borrowed, unchanged.
fn bound_nesting(html: &str) -> Cow<'_, str> {
    let bytes = html.as_bytes();
    let mut open: Vec<&str> = Vec::new();
    let mut foreign = 0usize; // open `svg`/`math`, where `<x/>` closes itself
    let mut out: Option<String> = None;
    let mut copied = 0usize;
    let mut i = 0usize;
    while let Some(off) = memchr::memchr(b'<', &bytes[i..]) {
        let start = i + off;
        let rest = &bytes[start..];
        if rest.starts_with(b"<!--") {
            i = find(bytes, start + 4, b"-->").map_or(bytes.len(), |e| e + 3);
            continue;
        }
        if rest.starts_with(b"<!") || rest.starts_with(b"<?") {
            i = find(bytes, start + 2, b">").map_or(bytes.len(), |e| e + 1);
            continue;
        }
        let closing = rest.get(1) == Some(&b'/');
        let name_at = start + 1 + usize::from(closing);
        if !bytes.get(name_at).is_some_and(u8::is_ascii_alphabetic) {
            i = start + 1;
            continue;
        }
        let name_end = bytes[name_at..]
            .iter()
            .position(|b| b.is_ascii_whitespace() || *b == b'/' || *b == b'>')
            .map_or(bytes.len(), |p| name_at + p);
        let name = &html[name_at..name_end];
        let (tag_end, self_closing) = tag_end(bytes, name_end);
        i = tag_end;
        let is = |list: &[&str]| list.iter().any(|t| t.eq_ignore_ascii_case(name));
        if closing {
            if let Some(pos) = open.iter().rposition(|t| t.eq_ignore_ascii_case(name)) {
                for t in open.drain(pos..) {
                    if t.eq_ignore_ascii_case("svg") || t.eq_ignore_ascii_case("math") {
                        foreign = foreign.saturating_sub(1);
                    }
                }
            }
            continue;
        }
        if is(RAW_TEXT) {
            i = find_end_tag(bytes, tag_end, name).unwrap_or(bytes.len());
            continue;
        }
        if is(NOT_NESTING) || (self_closing && foreign > 0) {
            continue;
        }
        if open.len() >= MAX_NESTING {
            let out = out.get_or_insert_with(|| String::with_capacity(html.len()));
            out.push_str(&html[copied..start]);
            copied = tag_end;
            continue;
        }
        if name.eq_ignore_ascii_case("svg") || name.eq_ignore_ascii_case("math") {
            foreign += 1;
        }
        open.push(name);
    }
    match out {
        None => Cow::Borrowed(html),
        Some(mut out) => {
            out.push_str(&html[copied..]);
            Cow::Owned(out)
        }
    }
}

/// The end of a tag whose name ends at `from` (just past its `>`), and whether it ends `/>`.
/// Quoted attribute values may hold `>`.
fn tag_end(bytes: &[u8], from: usize) -> (usize, bool) {
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'>' => return (i + 1, i > from && bytes[i - 1] == b'/'),
            b'=' => {
                i += 1;
                while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
                    i += 1;
                }
                if let Some(&q @ (b'"' | b'\'')) = bytes.get(i) {
                    i = memchr::memchr(q, &bytes[i + 1..]).map_or(bytes.len(), |p| i + 1 + p + 1);
                }
            }
            _ => i += 1,
        }
    }
    (bytes.len(), false)
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(bytes.get(from..)?, needle).map(|p| from + p)
}

/// Where the end tag `</name` (any case) starts, at or after `from`.
fn find_end_tag(bytes: &[u8], from: usize, name: &str) -> Option<usize> {
    let mut i = from;
    while let Some(p) = find(bytes, i, b"</") {
        let candidate = bytes.get(p + 2..p + 2 + name.len())?;
        if candidate.eq_ignore_ascii_case(name.as_bytes()) {
            return Some(p);
        }
        i = p + 2;
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Whitespace

/// Trims every line's trailing whitespace outside code blocks (but a Markdown hard break, two
/// spaces after text) and keeps at most one blank line in a row there; code is left as is.
fn tidy(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut fence: Option<String> = None;
    let mut blank_run = 0usize;
    for line in md.lines() {
        if let Some(open) = &fence {
            out.push_str(line);
            out.push('\n');
            let t = line.trim_start();
            if t.starts_with(open.as_str()) && t.trim_end().chars().all(|c| c == '`') {
                fence = None;
            }
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            let ticks = trimmed.chars().take_while(|c| *c == '`').count();
            fence = Some("`".repeat(ticks));
        }
        // An empty list item (its content was skipped) is a lone marker: dropped.
        if line.trim() == "-" {
            continue;
        }
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run == 1 && !out.is_empty() {
                out.push('\n');
            }
            continue;
        }
        blank_run = 0;
        let kept = if line.ends_with("  ") && !line.trim_end().is_empty() {
            line.trim_end().to_string() + "  "
        } else {
            line.trim_end().to_string()
        };
        out.push_str(&kept);
        out.push('\n');
    }
    let end = out.trim_end().len();
    out.truncate(end);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &str) -> String {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/web/");
        std::fs::read_to_string(format!("{dir}{path}")).unwrap()
    }

    fn page() -> String {
        to_markdown(&fixture("page.html"))
    }

    /// Every fence opened is closed, and no blank-line run is longer than one outside code.
    fn assert_well_formed(md: &str) {
        let mut open: Option<usize> = None;
        let mut blanks = 0;
        for line in md.lines() {
            let t = line.trim_start();
            let ticks = t.chars().take_while(|c| *c == '`').count();
            match open {
                Some(n) if ticks >= n && t.trim_end().len() == ticks => open = None,
                Some(_) => continue,
                None if ticks >= 3 => open = Some(ticks),
                None => {}
            }
            blanks = if line.trim().is_empty() {
                blanks + 1
            } else {
                0
            };
            assert!(blanks <= 1, "blank-line run in:\n{md}");
        }
        assert!(open.is_none(), "unclosed fence in:\n{md}");
        assert!(!md.contains("``````"), "glued fences");
    }

    #[test]
    fn the_title_heads_the_page_and_headings_lose_their_permalinks() {
        let md = page();
        assert!(md.starts_with("Fixture page: widgets\n\n"), "{md}");
        assert!(md.contains("\n# Widgets\n"), "{md}");
        assert!(!md.contains('¶'), "{md}");
        assert!(md.contains("\n## Kinds\n"), "{md}");
    }

    #[test]
    fn relative_links_are_made_absolute_against_the_page() {
        let page = url::Url::parse("https://docs.example/guide/intro.html").unwrap();
        let md = to_markdown_at(
            r##"<p><a href="setup.html">setup</a> <a href="/api">api</a> <a href="#top">top</a>
            <a href="https://other.example/x">other</a> <img src="img/a.png" alt="a"></p>"##,
            Some(&page),
        );
        assert!(
            md.contains("[setup](https://docs.example/guide/setup.html)"),
            "{md}"
        );
        assert!(md.contains("[api](https://docs.example/api)"), "{md}");
        assert!(md.contains("[top](#top)"), "{md}");
        assert!(md.contains("[other](https://other.example/x)"), "{md}");
        assert!(md.contains("https://docs.example/guide/img/a.png"), "{md}");
        let based = to_markdown_at(
            r#"<head><base href="/v2/"></head><a href="page">p</a>"#,
            Some(&page),
        );
        assert!(
            based.contains("[p](https://docs.example/v2/page)"),
            "{based}"
        );
    }

    #[test]
    fn a_link_is_written_once_as_text_and_url() {
        let md = page();
        assert!(
            md.contains(
                "A **widget** is described in the \
                 [widget specification](https://example.com/spec \"The spec\"), and *everyone* \
                 should read it."
            ),
            "{md}"
        );
        assert_eq!(md.matches("widget specification").count(), 1, "{md}");
        assert_eq!(md.matches("https://example.com/spec").count(), 1, "{md}");
    }

    #[test]
    fn scripts_styles_chrome_and_comments_are_dropped() {
        let md = page();
        for marker in [
            "SCRIPT_MARKER",
            "STYLE_MARKER",
            "font-family",
            "querySelectorAll",
            "NAV_MARKER",
            "Home",
            "COMMENT_MARKER",
            "NOSCRIPT_MARKER",
            "TEMPLATE_MARKER",
            "IFRAME_MARKER",
            "BUTTON_MARKER",
            "FOOTER_MARKER",
            "<svg",
            "M0 0",
        ] {
            assert!(!md.contains(marker), "{marker} in:\n{md}");
        }
    }

    #[test]
    fn code_blocks_are_kept_verbatim_and_fenced() {
        let md = page();
        assert!(
            md.contains(
                "```rust\nfn main() {\n    let w = Widget::new(\"a < b\");\n\n    w.spin();\n}\n```"
            ),
            "{md}"
        );
        // A bare <pre> (Sphinx) is a code block too, with the language of its wrapper.
        assert!(md.contains("```python3\nprint(\"spun\")\n```"), "{md}");
        // Inline code is text, even when a link sits inside it.
        assert!(md.contains("1. First, `unpack`."), "{md}");
        assert!(md.contains("2. Then call `widget.spin()`."), "{md}");
        assert_well_formed(&md);
    }

    #[test]
    fn lists_and_tables_stay_readable() {
        let md = page();
        assert!(
            md.contains("- Round widgets\n- Square widgets\n  - Small\n  - Large"),
            "{md}"
        );
        let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(table.len(), 4, "{md}");
        assert!(
            table[0].contains("Size") && table[0].contains("Weight (g)"),
            "{md}"
        );
        assert!(table[1].starts_with("| ---"), "{md}");
        assert!(
            table[3].contains("Large") && table[3].contains("140"),
            "{md}"
        );
    }

    #[test]
    fn inline_images_and_empty_links_are_dropped() {
        let md = page();
        assert!(!md.contains("base64"), "{md}");
        assert!(
            md.contains("A tiny dot and ![A widget](/img/widget.png)"),
            "{md}"
        );
        assert!(!md.contains("play.example.com"), "{md}");
        assert!(!md.contains("[]("), "{md}");
    }

    #[test]
    fn saved_pages_convert_cleanly() {
        let rustdoc = to_markdown(&fixture("pages/rustdoc-std-vec-Vec.html"));
        assert!(
            rustdoc.starts_with("Vec in std::vec - Rust\n"),
            "{}",
            &rustdoc[..200]
        );
        // rustdoc's signatures link every type; in a code block that is text.
        assert!(rustdoc.contains("```\npub struct Vec<T, A = Global>\nwhere\n    A: Allocator,"));
        assert!(!rustdoc.contains("Copy item path"));
        assert_well_formed(&rustdoc);

        let node = to_markdown(&fixture("pages/nodejs-api-dns.html"));
        // Node puts the ESM and CommonJS versions of an example in one <pre>: two blocks.
        assert!(node.contains("```js\nimport dns from 'node:dns';"));
        assert!(node.contains("```\n\n```js\nconst dns = require('node:dns');"));
        assert!(node.contains("| v20.13.0 |"));
        assert_well_formed(&node);

        let sphinx = to_markdown(&fixture("pages/sphinx-python-idle.html"));
        assert!(sphinx.contains("```\nidle.py [-c command] [-d] [-e]"));
        assert!(!sphinx.contains("@media"));
        assert_well_formed(&sphinx);

        for md in [&rustdoc, &node, &sphinx] {
            assert!(!md.contains("<script") && !md.contains("<style"));
        }
    }

    #[test]
    fn real_pages_pass_the_nesting_bound_unchanged() {
        for page in [
            "page.html",
            "pages/rustdoc-std-vec-Vec.html",
            "pages/nodejs-api-dns.html",
            "pages/sphinx-python-idle.html",
        ] {
            let html = fixture(page);
            assert!(matches!(bound_nesting(&html), Cow::Borrowed(_)), "{page}");
        }
    }

    #[test]
    fn the_nesting_scan_reads_tags_as_the_parser_does() {
        // MAX_NESTING - 1 open elements: one more fits, a second is dropped.
        let deep = |inner: &str| {
            let html = format!("{}{inner}", "<div>".repeat(MAX_NESTING - 1));
            matches!(bound_nesting(&html), Cow::Owned(_))
        };
        assert!(!deep("<div>x</div>"));
        assert!(deep("<div><div>x</div></div>"));
        // Text that only looks like tags is not counted.
        assert!(!deep("<!-- <div><div> -->"));
        assert!(!deep("<script>var s = '<div><div>';</script>"));
        assert!(!deep("<p title='a > <div><div>'>x"));
        assert!(!deep("<br><img src=x><li>a<li>b"));
        assert!(!deep("<svg><path d='M0'/><path/></svg>"));
        assert!(!deep("1 < 2 <"));
        // An end tag closes what was opened after its start tag, as html5ever does.
        let html = format!("{}<span></div>", "<div>".repeat(MAX_NESTING)).repeat(3);
        assert!(matches!(bound_nesting(&html), Cow::Owned(_)));
        let html = format!("<div>{}</div>", "<span>".repeat(MAX_NESTING - 1)).repeat(3);
        assert!(matches!(bound_nesting(&html), Cow::Borrowed(_)));
        // Dropping keeps the text.
        let html = format!("{}<div>kept</div>", "<div>".repeat(MAX_NESTING));
        let bounded = bound_nesting(&html);
        assert!(bounded.ends_with("<div>kept</div>") && bounded.len() == html.len() - 5);
    }

    /// A hostile page can neither overflow the stack (htmd recurses per level: unbounded, 10 000
    /// nested elements abort the process) nor keep the parser busy for long (html5ever is
    /// quadratic in depth). Run on a 2 MiB stack, tokio's default for its threads.
    #[test]
    fn hostile_nesting_is_bounded_on_a_small_stack() {
        let cases = [
            ("<div>", "</div>"),
            ("<b>", "</b>"),
            ("<ul><li>", "</li></ul>"),
            ("<table><tr><td>", "</td></tr></table>"),
            ("<blockquote>", "</blockquote>"),
            ("<div/>", ""),
            ("<svg><g>", "</g></svg>"),
        ];
        for (open, close) in cases {
            let html = format!("{}deep text{}", open.repeat(40_000), close.repeat(40_000));
            let md = std::thread::Builder::new()
                .stack_size(2 << 20)
                .spawn(move || to_markdown(&html))
                .unwrap()
                .join()
                .unwrap();
            assert!(
                md.contains("deep text") || open.starts_with("<svg"),
                "{open}: {md:.200}"
            );
        }
    }

    #[test]
    fn fragments_and_empty_input_convert() {
        assert_eq!(to_markdown(""), "");
        assert_eq!(to_markdown("plain <b>text</b>"), "plain **text**");
        assert_eq!(to_markdown("<p>unclosed <i>tags"), "unclosed *tags*");
    }

    #[test]
    fn blank_lines_collapse_outside_code_only() {
        let md = tidy("a  \n\n\n\nb \n   \n- \n-\n```\nx\n\n\n\ny\n```\n\n\n\nc");
        assert_eq!(md, "a  \n\nb\n\n```\nx\n\n\n\ny\n```\n\nc");
    }
}
