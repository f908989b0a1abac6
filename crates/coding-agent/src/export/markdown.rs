//! Markdown of a session rendered to safe HTML at export time (issue 27; upstream 1.6's page
//! renders with marked + highlight.js in the browser, ours in Rust so the page runs no markdown
//! parser on session text).
//!
//! Pipeline: `pulldown-cmark` (CommonMark + GFM tables, task lists, strikethrough) → an event
//! filter that makes the output safe by construction → HTML → the `ammonia` allow-list as a
//! second, independent layer. The event filter:
//! - raw HTML in the markdown (blocks and inline) becomes text, shown escaped, never markup;
//! - links keep only `http:`, `https:` and `mailto:` destinations (others show their label
//!   as text); bare `http(s)://` URLs in text become links (GFM autolinks);
//! - images keep only `data:` URLs of raster types (`png`, `jpeg`, `gif`, `webp`, `bmp`,
//!   `avif`, base64); others show as `[image: alt]`;
//! - task list markers become the characters `☑` / `☐` (no form elements);
//! - fenced code blocks are highlighted with short CSS classes (`hl-k` keyword, `hl-s` string,
//!   `hl-c` comment, … from the token scopes syntect's parser gives), styled by the page's own
//!   hashed stylesheet, since the page's CSP forbids `style` attributes; unknown languages, blocks
//!   over [`MAX_BLOCK_HIGHLIGHT`] bytes or past the export's [`MAX_TOTAL_HIGHLIGHT`] budget
//!   stay plain (escaped) code;
//! - table column alignment becomes a class (`al-l`, `al-c`, `al-r`) instead of a `style`.
//!
//! The allow-list then keeps only the elements of that output (`p h1-h6 blockquote ul ol li
//! pre code span em strong del a img table thead tbody tr th td hr br`), drops `script`/`style`
//! with their content, every other attribute (events, `style`, `id`), classes other than
//! ours, links other than `http(s)`/`mailto` (each kept link gets `rel="noopener noreferrer
//! nofollow"` and `target="_blank"`) and image sources other than raster `data:` URLs.

use ammonia::{Builder, UrlRelative};
use pulldown_cmark::{CodeBlockKind, CowStr, Event, Options, Parser, Tag, TagEnd};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;
use syntect::easy::ScopeRangeIterator;
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxSet};
use syntect::util::LinesWithEndings;

/// Code blocks longer than this (bytes) are not highlighted.
pub const MAX_BLOCK_HIGHLIGHT: usize = 64 * 1024;
/// Code highlighted per [`Renderer`] (one export), bytes; later blocks stay plain.
pub const MAX_TOTAL_HIGHLIGHT: usize = 1024 * 1024;

/// Syntect's bundled syntaxes (Sublime Text's default packages), loaded on first use.
static SYNTAXES: LazyLock<SyntaxSet> = LazyLock::new(SyntaxSet::load_defaults_newlines);

const RASTER_TYPES: [&str; 7] = ["png", "jpeg", "jpg", "gif", "webp", "bmp", "avif"];

/// `http:`, `https:` or `mailto:` (case-insensitive, after leading whitespace).
fn safe_link(url: &str) -> bool {
    let u = url.trim_start().to_ascii_lowercase();
    u.starts_with("http:") || u.starts_with("https:") || u.starts_with("mailto:")
}

/// `data:image/<raster>;base64,<base64>` and nothing else.
fn safe_image(url: &str) -> bool {
    let Some(rest) = url
        .get(..11)
        .filter(|p| p.eq_ignore_ascii_case("data:image/"))
        .map(|_| &url[11..])
    else {
        return false;
    };
    let Some((mime, payload)) = rest.split_once(";base64,") else {
        return false;
    };
    RASTER_TYPES.iter().any(|t| mime.eq_ignore_ascii_case(t))
        && !payload.is_empty()
        && payload
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
}

/// Keeps the class tokens our renderer emits (`hl`, those of [`SCOPE_CLASSES`],
/// `language-*`, `al-l|c|r`).
fn filter_classes(value: &str) -> Option<Cow<'_, str>> {
    let kept: Vec<&str> = value
        .split_ascii_whitespace()
        .filter(|c| {
            *c == "hl"
                || SCOPE_CLASSES.iter().any(|(_, k)| k == c)
                || c.starts_with("language-")
                || matches!(*c, "al-l" | "al-c" | "al-r")
        })
        .collect();
    (!kept.is_empty()).then(|| Cow::Owned(kept.join(" ")))
}

/// The allow-list of the module docs.
static SANITIZER: LazyLock<Builder<'static>> = LazyLock::new(|| {
    let tags: HashSet<&str> = [
        "p",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "ul",
        "ol",
        "li",
        "pre",
        "code",
        "span",
        "em",
        "strong",
        "del",
        "a",
        "img",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "hr",
        "br",
    ]
    .into_iter()
    .collect();
    let attrs: HashMap<&str, HashSet<&str>> = [
        ("a", ["href", "title"].as_slice()),
        ("img", &["src", "alt", "title"]),
        ("ol", &["start"]),
        ("th", &["class"]),
        ("td", &["class"]),
        ("code", &["class"]),
        ("pre", &["class"]),
        ("span", &["class"]),
    ]
    .into_iter()
    .map(|(t, a)| (t, a.iter().copied().collect()))
    .collect();
    let mut b = Builder::empty();
    b.tags(tags)
        .clean_content_tags(["script", "style"].into_iter().collect())
        .tag_attributes(attrs)
        .url_schemes(["http", "https", "mailto", "data"].into_iter().collect())
        .url_relative(UrlRelative::Deny)
        .link_rel(Some("noopener noreferrer nofollow"))
        .set_tag_attribute_value("a", "target", "_blank")
        .strip_comments(true)
        .attribute_filter(|element, attribute, value| match (element, attribute) {
            ("a", "href") => safe_link(value).then_some(Cow::Borrowed(value)),
            ("img", "src") => safe_image(value).then_some(Cow::Borrowed(value)),
            (_, "class") => filter_classes(value),
            _ => Some(Cow::Borrowed(value)),
        });
    b
});

/// Renders the markdown of one export; holds its highlighting budget.
#[derive(Debug)]
pub struct Renderer {
    highlight_left: usize,
}

impl Default for Renderer {
    fn default() -> Self {
        Self::new()
    }
}

impl Renderer {
    /// A renderer with the full [`MAX_TOTAL_HIGHLIGHT`] budget.
    pub fn new() -> Self {
        Self {
            highlight_left: MAX_TOTAL_HIGHLIGHT,
        }
    }

    /// Safe HTML for the markdown `text` (see the module docs): a fragment of block elements,
    /// empty for empty text. Never fails: what cannot be rendered shows as text.
    pub fn render(&mut self, text: &str) -> String {
        let opts =
            Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS | Options::ENABLE_STRIKETHROUGH;
        let events = self.safe_events(Parser::new_ext(text, opts));
        let mut html = String::with_capacity(text.len() * 3 / 2 + 16);
        pulldown_cmark::html::push_html(&mut html, events.into_iter());
        // Only the renderer writes these (markdown's own `<` is escaped by now).
        for (from, to) in [
            (" style=\"text-align: left\">", " class=\"al-l\">"),
            (" style=\"text-align: center\">", " class=\"al-c\">"),
            (" style=\"text-align: right\">", " class=\"al-r\">"),
        ] {
            if html.contains(from) {
                html = html.replace(from, to);
            }
        }
        SANITIZER.clean(&html).to_string()
    }

    /// The event filter of the module docs.
    fn safe_events<'a>(&mut self, parser: Parser<'a>) -> Vec<Event<'a>> {
        let mut out: Vec<Event<'a>> = Vec::new();
        // Per open link / image: whether it was kept.
        let mut links: Vec<bool> = Vec::new();
        let mut images: Vec<bool> = Vec::new();
        let mut code: Option<(String, String)> = None;
        for ev in parser {
            if let Some((lang, body)) = code.as_mut() {
                match ev {
                    Event::End(TagEnd::CodeBlock) => {
                        let html = self.code_block(lang, body);
                        out.push(Event::Html(html.into()));
                        code = None;
                    }
                    Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => body.push_str(&t),
                    _ => {}
                }
                continue;
            }
            match ev {
                Event::Start(Tag::CodeBlock(kind)) => {
                    let lang = match kind {
                        CodeBlockKind::Fenced(info) => info
                            .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
                            .next()
                            .unwrap_or("")
                            .to_string(),
                        CodeBlockKind::Indented => String::new(),
                    };
                    code = Some((lang, String::new()));
                }
                Event::Start(Tag::HtmlBlock) => out.push(Event::Start(Tag::Paragraph)),
                Event::End(TagEnd::HtmlBlock) => out.push(Event::End(TagEnd::Paragraph)),
                Event::Html(t) | Event::InlineHtml(t) => out.push(Event::Text(t)),
                Event::TaskListMarker(done) => out.push(Event::Text(
                    if done { "\u{2611} " } else { "\u{2610} " }.into(),
                )),
                Event::Start(tag @ Tag::Link { .. }) => {
                    let keep = links.is_empty()
                        && matches!(&tag, Tag::Link { dest_url, .. } if safe_link(dest_url));
                    links.push(keep);
                    if keep {
                        out.push(Event::Start(tag));
                    }
                }
                Event::End(TagEnd::Link) => {
                    if links.pop().unwrap_or(false) {
                        out.push(Event::End(TagEnd::Link));
                    }
                }
                Event::Start(tag @ Tag::Image { .. }) => {
                    let keep = matches!(&tag, Tag::Image { dest_url, .. } if safe_image(dest_url));
                    images.push(keep);
                    out.push(if keep {
                        Event::Start(tag)
                    } else {
                        Event::Text("[image: ".into())
                    });
                }
                Event::End(TagEnd::Image) => {
                    if images.pop().unwrap_or(false) {
                        out.push(Event::End(TagEnd::Image));
                    } else {
                        out.push(Event::Text("]".into()));
                    }
                }
                Event::Text(t) if links.is_empty() && images.is_empty() => autolink(t, &mut out),
                other => out.push(other),
            }
        }
        // An unterminated code block (the parser always closes one; kept for safety).
        if let Some((lang, body)) = code {
            let html = self.code_block(&lang, &body);
            out.push(Event::Html(html.into()));
        }
        out
    }

    /// `<pre><code class="language-<lang> hl">…</code></pre>`, highlighted when the language
    /// is known and the budget allows, else plain escaped text.
    fn code_block(&mut self, lang: &str, body: &str) -> String {
        let lang: String = lang
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '#' | '.' | '-' | '_'))
            .take(32)
            .collect();
        let class = if lang.is_empty() {
            String::new()
        } else {
            format!(" class=\"language-{lang} hl\"")
        };
        let highlighted = (!lang.is_empty()
            && body.len() <= MAX_BLOCK_HIGHLIGHT
            && body.len() <= self.highlight_left)
            .then(|| highlight(&lang, body))
            .flatten();
        let inner = match highlighted {
            Some(h) => {
                self.highlight_left -= body.len();
                h
            }
            None => super::escape_html(body),
        };
        format!("<pre><code{class}>{inner}</code></pre>\n")
    }
}

/// Scope prefixes (TextMate scope names) → the short class of their tokens, most specific
/// first; a token takes the class of the innermost scope of its stack that has one.
const SCOPE_CLASSES: [(&str, &str); 25] = [
    ("comment", "hl-c"),
    ("constant.character.escape", "hl-e"),
    ("string", "hl-s"),
    ("constant", "hl-n"),
    ("keyword.operator", "hl-o"),
    ("keyword", "hl-k"),
    ("storage", "hl-k"),
    ("entity.name.function", "hl-f"),
    ("support.function", "hl-f"),
    ("variable.function", "hl-f"),
    ("entity.name.type", "hl-t"),
    ("entity.name.class", "hl-t"),
    ("entity.name.struct", "hl-t"),
    ("entity.name.enum", "hl-t"),
    ("entity.name.trait", "hl-t"),
    ("entity.other.inherited-class", "hl-t"),
    ("support.type", "hl-t"),
    ("support.class", "hl-t"),
    ("entity.name.tag", "hl-g"),
    ("variable.language", "hl-g"),
    ("entity.other.attribute-name", "hl-a"),
    ("markup.inserted", "hl-ins"),
    ("markup.deleted", "hl-del"),
    ("markup.heading", "hl-h"),
    ("invalid", "hl-x"),
];

static SCOPE_RULES: LazyLock<Vec<(Scope, &'static str)>> = LazyLock::new(|| {
    SCOPE_CLASSES
        .iter()
        .filter_map(|(s, c)| Scope::new(s).ok().map(|s| (s, *c)))
        .collect()
});

/// The class of a token whose scope stack is `stack`, if any.
fn class_of(stack: &ScopeStack) -> Option<&'static str> {
    stack.as_slice().iter().rev().find_map(|scope| {
        SCOPE_RULES
            .iter()
            .find(|(rule, _)| rule.is_prefix_of(*scope))
            .map(|(_, c)| *c)
    })
}

/// `body` as escaped HTML with `<span class="hl-…">` runs (see [`SCOPE_CLASSES`]) in the
/// language named `lang` (a fence's info word: an extension such as `rs`/`js` or a name such
/// as `rust`), `None` when the language is unknown or the parser fails. Syntect's parser
/// (bundled Sublime Text syntaxes) gives the scopes; adjacent tokens of one class share a span.
fn highlight(lang: &str, body: &str) -> Option<String> {
    let ss = &*SYNTAXES;
    let syntax = ss.find_syntax_by_token(lang).or_else(|| {
        let alias = match lang.to_ascii_lowercase().as_str() {
            "javascript" | "jsx" | "node" | "ts" | "typescript" | "tsx" | "mjs" | "cjs" => "js",
            "shell" | "bash" | "zsh" | "console" | "shellscript" => "sh",
            "python3" | "py3" => "py",
            "yml" => "yaml",
            "c++" => "cpp",
            "golang" => "go",
            "jsonc" | "json5" => "json",
            _ => return None,
        };
        ss.find_syntax_by_token(alias)
    })?;
    let mut state = ParseState::new(syntax);
    let mut stack = ScopeStack::new();
    let mut out = String::with_capacity(body.len() * 2);
    let mut open: Option<&'static str> = None;
    for line in LinesWithEndings::from(body) {
        let ops = state.parse_line(line, ss).ok()?;
        for (range, op) in ScopeRangeIterator::new(&ops, line) {
            stack.apply(op).ok()?;
            let Some(text) = line.get(range).filter(|t| !t.is_empty()) else {
                continue;
            };
            let class = class_of(&stack);
            if class != open {
                if open.is_some() {
                    out.push_str("</span>");
                }
                if let Some(c) = class {
                    out.push_str("<span class=\"");
                    out.push_str(c);
                    out.push_str("\">");
                }
                open = class;
            }
            out.push_str(&super::escape_html(text));
        }
    }
    if open.is_some() {
        out.push_str("</span>");
    }
    Some(out)
}

/// Splits `text` around bare `http://` / `https://` URLs (up to whitespace or `<`, without
/// trailing punctuation), emitting each as a link.
fn autolink<'a>(text: CowStr<'a>, out: &mut Vec<Event<'a>>) {
    let s: &str = &text;
    let mut rest_start = 0;
    let mut i = 0;
    let bytes = s.as_bytes();
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    while let Some(off) = s[i..].find("http") {
        let start = i + off;
        let tail = &s[start..];
        let scheme = if tail.starts_with("https://") {
            8
        } else if tail.starts_with("http://") {
            7
        } else {
            i = start + 4;
            continue;
        };
        // At a word start only.
        if start > 0 && bytes[start - 1].is_ascii_alphanumeric() {
            i = start + scheme;
            continue;
        }
        let mut end = tail
            .find(|c: char| c.is_whitespace() || c == '<')
            .map_or(s.len(), |e| start + e);
        while end > start + scheme
            && matches!(
                bytes[end - 1],
                b'.' | b',' | b';' | b':' | b'!' | b'?' | b')' | b']' | b'\'' | b'"'
            )
        {
            end -= 1;
        }
        if end > start + scheme {
            pieces.push((start, end));
        }
        i = end.max(start + scheme);
    }
    if pieces.is_empty() {
        out.push(Event::Text(text));
        return;
    }
    for (start, end) in pieces {
        if start > rest_start {
            out.push(Event::Text(s[rest_start..start].to_string().into()));
        }
        let url = s[start..end].to_string();
        out.push(Event::Start(Tag::Link {
            link_type: pulldown_cmark::LinkType::Autolink,
            dest_url: url.clone().into(),
            title: "".into(),
            id: "".into(),
        }));
        out.push(Event::Text(url.into()));
        out.push(Event::End(TagEnd::Link));
        rest_start = end;
    }
    if rest_start < s.len() {
        out.push(Event::Text(s[rest_start..].to_string().into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PWN: &str = "document.body.setAttribute('data-pwned','1')";

    fn render(md: &str) -> String {
        Renderer::new().render(md)
    }

    /// Every tag of `html` is on the allow-list with allowed attributes only; links are
    /// http(s)/mailto with rel/target, images raster `data:` URLs. (Text is escaped, so each
    /// `<` starts a tag.)
    fn assert_inert(html: &str) {
        let allowed: HashSet<&str> = [
            "p",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "blockquote",
            "ul",
            "ol",
            "li",
            "pre",
            "code",
            "span",
            "em",
            "strong",
            "del",
            "a",
            "img",
            "table",
            "thead",
            "tbody",
            "tr",
            "th",
            "td",
            "hr",
            "br",
        ]
        .into_iter()
        .collect();
        let mut rest = html;
        while let Some(start) = rest.find('<') {
            let end = rest[start..]
                .find('>')
                .map(|e| start + e)
                .expect("tag closed");
            let tag = &rest[start + 1..end];
            rest = &rest[end + 1..];
            let tag = tag.strip_prefix('/').unwrap_or(tag);
            let name: String = tag
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            assert!(allowed.contains(name.as_str()), "tag <{tag}> in {html}");
            // Attributes: name="value" pairs (values have no '"': the serialiser escapes it).
            let mut attrs = tag[name.len()..].trim();
            while !attrs.is_empty() {
                let (attr, after) = attrs.split_once("=\"").expect("quoted attribute");
                let (value, after) = after.split_once('"').expect("closed value");
                attrs = after.trim();
                let ok = match (name.as_str(), attr) {
                    ("a", "href") => safe_link(value),
                    ("a", "rel") => value == "noopener noreferrer nofollow",
                    ("a", "target") => value == "_blank",
                    ("a" | "img", "title") | ("img", "alt") => true,
                    ("img", "src") => safe_image(value),
                    ("ol", "start") => value.bytes().all(|b| b.is_ascii_digit()),
                    ("th" | "td" | "code" | "pre" | "span", "class") => {
                        filter_classes(value).as_deref() == Some(value)
                    }
                    _ => false,
                };
                assert!(ok, "attribute {attr}=\"{value}\" on <{name}> in {html}");
            }
        }
    }

    #[test]
    fn gfm_table_with_alignment_and_injections_in_cells() {
        let md = format!(
            "| a | b | c |\n|:--|:-:|--:|\n| <script>{PWN}</script> | <img src=x onerror=\"{PWN}\"> | [x](javascript:{PWN}) |\n"
        );
        let html = render(&md);
        assert!(html.starts_with("<table><thead><tr><th class=\"al-l\">a</th><th class=\"al-c\">b</th><th class=\"al-r\">c</th>"), "{html}");
        assert!(
            html.contains("<td class=\"al-l\">&lt;script&gt;document.body"),
            "{html}"
        );
        assert!(html.contains("&lt;img src=x onerror=\"document"), "{html}");
        // The link is dropped, its label kept.
        assert!(html.contains("<td class=\"al-r\">x</td>"), "{html}");
        assert_inert(&html);
    }

    #[test]
    fn task_lists_strikethrough_and_emphasis() {
        let html = render("- [x] done\n- [ ] todo ~~old~~ **b** _i_\n");
        assert_eq!(
            html,
            "<ul>\n<li>\u{2611} done</li>\n<li>\u{2610} todo <del>old</del> <strong>b</strong> <em>i</em></li>\n</ul>\n"
        );
    }

    #[test]
    fn code_blocks_are_highlighted_with_classes_and_escaped() {
        let html =
            render("```rust\nfn main() { let s = \"a\\n\"; } // c\n```\n```diff\n-a\n+b\n```\n");
        assert_eq!(
            html,
            "<pre><code class=\"language-rust hl\"><span class=\"hl-k\">fn</span> <span class=\"hl-f\">main</span>() { \
             <span class=\"hl-k\">let</span> s <span class=\"hl-o\">=</span> <span class=\"hl-s\">\"a</span>\
             <span class=\"hl-e\">\\n</span><span class=\"hl-s\">\"</span>; } <span class=\"hl-c\">// c\n</span></code></pre>\n\
             <pre><code class=\"language-diff hl\"><span class=\"hl-del\">-a\n</span><span class=\"hl-ins\">+b\n</span></code></pre>\n"
        );
        let html = render(&format!(
            "```rs\nlet s = \"</code></pre><script>{PWN}</script>\";\n```\n\n```javascript\nconst a = `<img src=x onerror=\"{PWN}\">`; // javascript:{PWN}\n```\n"
        ));
        assert!(
            html.contains(
                "<span class=\"hl-s\">\"&lt;/code&gt;&lt;/pre&gt;&lt;script&gt;document.body"
            ),
            "{html}"
        );
        assert!(
            html.contains(
                "<code class=\"language-javascript hl\"><span class=\"hl-k\">const</span>"
            ),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"hl-s\">`&lt;img src=x onerror=\"document"),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"hl-c\">// javascript:document"),
            "{html}"
        );
        assert_eq!(html.matches("<pre>").count(), 2, "{html}");
        assert_inert(&html);
    }

    #[test]
    fn unknown_language_and_indented_code_stay_plain() {
        let html = render("```nosuchlang\n<b>x</b>\n```\n\n    <i>y</i>\n");
        assert_eq!(
            html,
            "<pre><code class=\"language-nosuchlang hl\">&lt;b&gt;x&lt;/b&gt;\n</code></pre>\n<pre><code>&lt;i&gt;y&lt;/i&gt;\n</code></pre>\n"
        );
    }

    #[test]
    fn the_highlight_budget_is_bounded() {
        let mut r = Renderer::new();
        let big = format!(
            "```rust\n{}```\n",
            "let x = 1;\n".repeat(MAX_BLOCK_HIGHLIGHT / 11 + 1)
        );
        let html = r.render(&big);
        assert!(!html.contains("hl-k"), "over the block limit stays plain");
        assert_eq!(r.highlight_left, MAX_TOTAL_HIGHLIGHT);
        r.highlight_left = 3;
        assert!(!r.render("```rust\nlet x = 1;\n```\n").contains("hl-k"));
    }

    #[test]
    fn raw_html_blocks_and_inline_html_show_as_text() {
        let html = render(&format!(
            "<script>{PWN}</script>\n\n<div onclick=\"{PWN}\">x</div>\n\ntext <iframe src=\"javascript:{PWN}\"></iframe> <style>body{{}}</style> <!-- c -->\n"
        ));
        assert!(html.starts_with("<p>&lt;script&gt;document.body"), "{html}");
        assert!(html.contains("&lt;div onclick="), "{html}");
        assert!(html.contains("&lt;iframe src=\"javascript:"), "{html}");
        assert!(html.contains("&lt;!-- c --&gt;"), "{html}");
        assert_inert(&html);
    }

    #[test]
    fn links_keep_only_safe_schemes_with_rel_and_target() {
        let html = render(
            "[a](https://example.com/a?b=<c>) [m](mailto:x@y.z) [j](JavaScript:alert(1)) [v](vbscript:x) [d](data:text/html,x) [r](/rel) <javascript:alert(1)> <https://ok.example/> see https://bare.example/p?q=1."
        );
        assert!(html.contains("<a href=\"https://example.com/a?b=%3Cc%3E\" target=\"_blank\" rel=\"noopener noreferrer nofollow\">a</a>"), "{html}");
        assert!(html.contains("<a href=\"mailto:x@y.z\""), "{html}");
        assert!(html.contains("<a href=\"https://ok.example/\""), "{html}");
        assert!(html.contains("see <a href=\"https://bare.example/p?q=1\" target=\"_blank\" rel=\"noopener noreferrer nofollow\">https://bare.example/p?q=1</a>."), "{html}");
        assert_eq!(html.matches("<a ").count(), 4, "{html}");
        for label in [" j ", " v ", " d ", " r "] {
            assert!(html.contains(label), "{label} in {html}");
        }
        assert_inert(&html);
    }

    #[test]
    fn images_only_raster_data_urls() {
        let png = "iVBORw0KGgo=";
        let html = render(&format!(
            "![ok](data:image/png;base64,{png}) ![svg](data:image/svg+xml;base64,PHN2Zz4=) ![js](javascript:{PWN}) ![web](https://example.com/x.png)"
        ));
        assert!(
            html.contains(&format!(
                "<img src=\"data:image/png;base64,{png}\" alt=\"ok\">"
            )),
            "{html}"
        );
        assert_eq!(html.matches("<img").count(), 1, "{html}");
        assert!(
            html.contains("[image: svg]")
                && html.contains("[image: js]")
                && html.contains("[image: web]"),
            "{html}"
        );
        assert_inert(&html);
    }

    #[test]
    fn the_sanitiser_alone_strips_what_the_filter_would_have_caught() {
        // Second layer, fed directly: what a renderer bug could let through.
        let dirty = format!(
            "<p class=\"msg user hl-x\" style=\"color:red\" id=\"e-1\" onclick=\"{PWN}\">t</p><script>{PWN}</script><a href=\"javascript:{PWN}\">j</a><a href=\"data:text/html,x\">d</a><img src=\"x\" onerror=\"{PWN}\"><img src=\"data:image/svg+xml;base64,PHN2Zz4=\"><form><input type=\"checkbox\"></form><iframe srcdoc=\"x\"></iframe><style>*{{}}</style><svg onload=\"{PWN}\"></svg>"
        );
        let clean = SANITIZER.clean(&dirty).to_string();
        assert_eq!(clean, "<p>t</p><a target=\"_blank\" rel=\"noopener noreferrer nofollow\">j</a><a rel=\"noopener noreferrer nofollow\" target=\"_blank\">d</a><img><img>");
    }

    #[test]
    fn empty_and_odd_input_never_panics() {
        for md in [
            "",
            "\0",
            "```",
            "|",
            "[",
            "![",
            "<",
            "http://",
            "https://\u{2028}",
            "```rust\n\u{0}\u{feff}\n",
        ] {
            let html = render(md);
            assert_inert(&html);
        }
        assert_eq!(render(""), "");
        assert_eq!(render("hello\u{2028}line"), "<p>hello\u{2028}line</p>\n");
    }
}
