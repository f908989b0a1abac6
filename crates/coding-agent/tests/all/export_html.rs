//! HTML export (spec config.md §11): `export_html` over RPC (errors, default and explicit
//! paths), `pi --export`, and the page itself in a real headless Chromium with hostile
//! sessions: it renders, and no script injected through session content runs.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A resource the test needs is missing: with `PI_REQUIRE_TEST_RESOURCES=1` (as in `.ci/run`)
/// that is a failure; otherwise a notice on stderr and the test passes.
fn missing_resource(what: &str, how: &str) {
    if std::env::var_os("PI_REQUIRE_TEST_RESOURCES").is_some_and(|v| v == "1") {
        panic!("missing test resource: {what}; {how} (PI_REQUIRE_TEST_RESOURCES=1 is set)");
    }
    eprintln!("SKIP: {what}; {how}");
}

/// `PI_TEST_CHROMIUM`, else `chromium` / `chromium-browser` on PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PI_TEST_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| [d.join("chromium"), d.join("chromium-browser")])
        .find(|p| p.is_file())
}

/// The DOM after the page's scripts ran (`--dump-dom`).
fn dump_dom(browser: &Path, page: &Path, profile: &Path) -> String {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `on*` attributes of every element in a `--dump-dom` serialisation (Chromium escapes
/// `<`, `>` and `"` inside attribute values and `<` in text, so each `<` starts a tag).
fn event_attributes(dom: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = dom;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').map_or(rest.len(), |e| start + e);
        let tag = &rest[start + 1..end];
        rest = &rest[end..];
        let mut in_value = false;
        let mut prev = ' ';
        for (i, c) in tag.char_indices() {
            if c == '"' {
                in_value = !in_value;
            } else if !in_value
                && prev.is_whitespace()
                && tag[i..].to_ascii_lowercase().starts_with("on")
            {
                let name: String = tag[i..]
                    .chars()
                    .take_while(|c| *c != '=' && !c.is_whitespace())
                    .collect();
                found.push(name);
            }
            prev = c;
        }
    }
    found
}

const PWN: &str = "document.body.setAttribute('data-pwned','1')";
const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

fn entry(id: &str, parent: Option<&str>, body: Value) -> Value {
    let mut e = json!({"id": id, "parentId": parent, "timestamp": "2026-01-02T03:04:05.678Z"});
    for (k, v) in body.as_object().unwrap() {
        e[k] = v.clone();
    }
    e
}

/// A session whose every string tries to inject markup or script.
fn hostile_session(dir: &Path) -> PathBuf {
    let evil_img = format!("<img src=x onerror=\"{PWN}\">");
    let evil_file = format!("{evil_img}.txt");
    let lines = vec![
        json!({"type": "session", "version": 3, "id": "0190f000-0000-7000-8000-000000000001",
               "timestamp": "2026-01-02T03:04:05.678Z", "cwd": format!("/tmp/<script>{PWN}</script>")}),
        entry(
            "e0000001",
            None,
            json!({"type": "model_change", "provider": "fake-openai", "modelId": "<b onmouseover=x>m</b>"}),
        ),
        entry(
            "e0000002",
            Some("e0000001"),
            json!({"type": "session_info", "name": format!("</title><script>{PWN}</script>")}),
        ),
        entry(
            "e0000003",
            Some("e0000002"),
            json!({"type": "message", "message": {"role": "user", "timestamp": 1,
            "content": format!("<script>{PWN}</script> hello\u{2028}line [click](javascript:{PWN}) {evil_img} [ok](https://example.com/a?b=<c>)")}}),
        ),
        entry(
            "e0000008",
            Some("e0000003"),
            json!({"type": "message", "message": {"role": "user", "timestamp": 6,
            "content": "the other branch"}}),
        ),
        entry(
            "e0000009",
            Some("e0000008"),
            json!({"type": "compaction", "summary": format!("summary {evil_img}"),
            "firstKeptEntryId": "e0000008", "tokensBefore": 1234}),
        ),
        entry(
            "e0000004",
            Some("e0000003"),
            json!({"type": "message", "message": {"role": "assistant", "timestamp": 2,
            "api": "openai-completions", "provider": "fake-openai", "model": "m", "stopReason": "toolUse",
            "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                      "cost": {"input": 0.001, "output": 0.002, "cacheRead": 0, "cacheWrite": 0, "total": 0.003}},
            "content": [
                {"type": "thinking", "thinking": format!("thinking <iframe src=javascript:{PWN}>")},
                {"type": "text", "text": format!("**Bold** and {evil_img} and `</script>` and ![x](javascript:{PWN}) ![svg](data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=)")},
                {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": format!("echo '</script><script>{PWN}</script>'")}},
                {"type": "toolCall", "id": "call_2", "name": "edit", "arguments": {"path": evil_file, "edits": [{"oldText": "a", "newText": "b"}]}}
            ]}}),
        ),
        entry(
            "e0000005",
            Some("e0000004"),
            json!({"type": "message", "message": {"role": "toolResult", "timestamp": 3,
            "toolCallId": "call_1", "toolName": "bash", "isError": false,
            "content": [{"type": "text", "text": format!("</script><script>{PWN}</script>\u{2028}\u{2029}")}]}}),
        ),
        entry(
            "e0000006",
            Some("e0000005"),
            json!({"type": "message", "message": {"role": "toolResult", "timestamp": 4,
            "toolCallId": "call_2", "toolName": "edit", "isError": false,
            "content": [{"type": "text", "text": format!("Edited {evil_file}")}],
            "details": {"diff": format!("-a\n+b {evil_img}")}}}),
        ),
        entry(
            "e0000007",
            Some("e0000006"),
            json!({"type": "message", "message": {"role": "user", "timestamp": 5,
            "content": [{"type": "text", "text": "an image:"},
                        {"type": "image", "mimeType": "image/png", "data": PNG_1X1},
                        {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIj48L3N2Zz4="},
                        {"type": "image", "mimeType": "image/png\" onerror=\"x", "data": PNG_1X1}]}}),
        ),
        entry(
            "e0000010",
            Some("e0000007"),
            json!({"type": "message", "message": {"role": "assistant", "timestamp": 7,
            "api": "openai-completions", "provider": "fake-openai", "model": "m", "stopReason": "stop",
            "content": [{"type": "text", "text": hostile_markdown()}]}}),
        ),
    ];
    let path = dir.join("hostile.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// GFM markdown whose table cells, code blocks and HTML blocks carry injection attempts.
fn hostile_markdown() -> String {
    let evil_img = format!("<img src=x onerror=\"{PWN}\">");
    [
        "| col | evil |".to_string(),
        "|---|:-:|".to_string(),
        format!("| <script>{PWN}</script> | {evil_img} |"),
        format!("| [cell link](javascript:{PWN}) | `</code></pre><script>{PWN}</script>` |"),
        String::new(),
        "- [x] done ~~struck~~".to_string(),
        String::new(),
        "```js".to_string(),
        format!("const s = \"</code></pre><script>{PWN}</script>\"; // {evil_img}"),
        format!("location.href = 'javascript:{PWN}';"),
        "```".to_string(),
        String::new(),
        "```rust".to_string(),
        format!("fn main() {{ let s = \"</code></pre><script>{PWN}</script>\"; }}"),
        "```".to_string(),
        String::new(),
        format!("<div onmouseover=\"{PWN}\"><script>{PWN}</script></div>"),
        String::new(),
        format!("<details open><summary>x</summary><img src=x onerror=\"{PWN}\"></details>"),
        String::new(),
        format!("[ok](https://example.com/a?b=<c>) and [click](javascript:{PWN}) and https://bare.example/x."),
    ]
    .join("\n")
}

fn export_cmd(cwd: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", cwd)
        .env("PI_CODING_AGENT_DIR", cwd.join("agent"))
        .output()
        .unwrap()
}

#[test]
fn export_flag_writes_the_page_and_reports_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let session = hostile_session(dir.path());
    let out = export_cmd(
        dir.path(),
        &["--export", session.to_str().unwrap(), "out.html"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Exported to: out.html\n"
    );
    let html = std::fs::read_to_string(dir.path().join("out.html")).unwrap();
    // The raw session strings never reach the markup: only the page's own three scripts
    // (session data, rendered markdown, viewer).
    assert_eq!(html.matches("<script").count(), 3, "{html}");
    assert!(!html.contains("onerror"));
    assert!(html.contains("Content-Security-Policy"));
    assert!(html.contains("<title>&lt;/title&gt;&lt;script&gt;"));
    // Default name; missing input.
    let out = export_cmd(dir.path(), &["--export", session.to_str().unwrap()]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Exported to: pi-session-hostile.html\n"
    );
    let out = export_cmd(dir.path(), &["--export", "nope.jsonl"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "Error: File not found: {}",
            dir.path().join("nope.jsonl").display()
        )
    );
}

#[test]
fn hostile_session_renders_in_chromium_and_runs_no_injected_script() {
    let Some(browser) = chromium() else {
        return missing_resource(
            "chromium (headless browser for the HTML export test)",
            "install it with scripts/install-test-browser.sh (apt-get install chromium) or set PI_TEST_CHROMIUM",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile");
    // The marker check can fail: a page whose script sets it shows it in the dump.
    let control = dir.path().join("control.html");
    std::fs::write(
        &control,
        format!("<!DOCTYPE html><body><script>{PWN}</script></body>"),
    )
    .unwrap();
    assert!(dump_dom(&browser, &control, &profile).contains("data-pwned=\"1\""));

    let session = hostile_session(dir.path());
    let out = export_cmd(
        dir.path(),
        &["--export", session.to_str().unwrap(), "page.html"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = dump_dom(&browser, &dir.path().join("page.html"), &profile);
    assert!(
        dom.contains("data-rendered=\"1\""),
        "page did not finish rendering:\n{dom}"
    );
    assert!(
        !dom.contains("data-pwned=\"1\""),
        "an injected script ran:\n{dom}"
    );
    // The hostile strings are shown as text.
    assert!(
        dom.contains("&lt;script&gt;document.body.setAttribute"),
        "{dom}"
    );
    assert!(dom.contains("&lt;/script&gt;&lt;script&gt;"), "{dom}");
    assert!(dom.contains("&lt;img src=x onerror="), "{dom}");
    assert!(dom.contains("hello\u{2028}line"), "{dom}");
    // No script-bearing links, no non-raster images, the real image inline, the safe link kept.
    assert!(!dom.contains("href=\"javascript:"), "{dom}");
    assert!(!dom.contains("<iframe"), "{dom}");
    assert!(!dom.contains("src=\"data:image/svg"), "{dom}");
    assert_eq!(dom.matches("<img ").count(), 1, "{dom}");
    assert!(
        dom.contains(&format!("src=\"data:image/png;base64,{PNG_1X1}\"")),
        "{dom}"
    );
    // The user message starting `<script>` is one raw HTML block in CommonMark: all text,
    // its markdown link too. In the markdown entry the safe link is kept, the destination
    // percent-encoded (as upstream's marked does), the `javascript:` one shows its label only,
    // and a bare URL becomes a link.
    assert!(
        dom.contains("[ok](https://example.com/a?b=&lt;c&gt;)"),
        "{dom}"
    );
    assert!(
        dom.contains("<a href=\"https://example.com/a?b=%3Cc%3E\" target=\"_blank\" rel=\"noopener noreferrer nofollow\">ok</a> and click and <a href=\"https://bare.example/x\""),
        "{dom}"
    );
    // Markdown rendered at export time: a GFM table (alignment as a class) whose hostile cells
    // are text, a task list, strikethrough, and code blocks highlighted with classes.
    assert!(
        dom.contains(
            "<table><thead><tr><th>col</th><th class=\"al-c\">evil</th></tr></thead><tbody>"
        ),
        "{dom}"
    );
    assert!(
        dom.contains(
            "<td>&lt;script&gt;document.body.setAttribute('data-pwned','1')&lt;/script&gt;</td>"
        ),
        "{dom}"
    );
    assert!(
        dom.contains("<td class=\"al-c\">&lt;img src=x onerror="),
        "{dom}"
    );
    assert!(dom.contains("<td>cell link</td>"), "{dom}");
    assert!(
        dom.contains("<code>&lt;/code&gt;&lt;/pre&gt;&lt;script&gt;"),
        "{dom}"
    );
    assert!(dom.contains("\u{2611} done <del>struck</del>"), "{dom}");
    assert!(
        dom.contains("<pre><code class=\"language-js hl\"><span class=\"hl-k\">const</span> s <span class=\"hl-o\">=</span> <span class=\"hl-s\">\"&lt;/code&gt;&lt;/pre&gt;&lt;script&gt;document.body"),
        "{dom}"
    );
    assert!(
        dom.contains("<span class=\"hl-c\">// &lt;img src=x onerror=\"document"),
        "{dom}"
    );
    assert!(
        dom.contains("<pre><code class=\"language-rust hl\"><span class=\"hl-k\">fn</span> <span class=\"hl-f\">main</span>"),
        "{dom}"
    );
    assert!(
        dom.contains("&lt;/code&gt;&lt;/pre&gt;&lt;script&gt;document.body"),
        "{dom}"
    );
    // HTML blocks inside markdown are text; no element carries an event attribute or style.
    assert!(dom.contains("&lt;div onmouseover="), "{dom}");
    assert!(dom.contains("&lt;details open&gt;"), "{dom}");
    assert_eq!(
        dom.matches("<script").count(),
        3,
        "only the page's own scripts:\n{dom}"
    );
    assert!(!dom.contains("<details open"), "{dom}");
    // (The scan finds an event attribute where there is one, not in values or text.)
    assert_eq!(
        event_attributes("<p title=\"a onclick=b\">x onload=y</p><img src=x onerror=\"a\">"),
        ["onerror"]
    );
    assert_eq!(event_attributes(&dom), Vec::<String>::new(), "{dom}");
    // The active branch (leaf = the last entry) and the tree with both branches.
    assert!(dom.contains("the other branch"), "{dom}");
    assert!(
        dom.contains("<span class=\"k\">compaction</span>summary &lt;img"),
        "{dom}"
    );
}

#[test]
fn export_html_over_rpc() {
    let (_fake, root) = setup(Script::new([Turn::text("Answer **md**.")]), DEFAULT_MODEL);
    let mut mem = root.spawn();
    let r = mem.request(json!({"id": "m", "type": "export_html"}));
    assert_eq!(r["error"], "Cannot export in-memory session to HTML");
    drop(mem);
    let mut agent = root.spawn_with_session();
    let r = agent.request(json!({"id": "e0", "type": "export_html"}));
    assert_eq!(
        r["error"],
        "Nothing to export yet - start a conversation first"
    );
    agent.send(json!({"id": "p", "type": "prompt", "message": "Something"}));
    agent.wait_event("agent_settled");
    let r = agent.request(json!({"id": "e1", "type": "export_html"}));
    let default = r["data"]["path"].as_str().unwrap().to_string();
    let file = root.session_files()[0].clone();
    let stem = file.file_stem().unwrap().to_string_lossy().to_string();
    assert_eq!(default, format!("pi-session-{stem}.html"));
    assert!(root.cwd.join(&default).is_file());
    let r = agent.request(json!({"id": "e2", "type": "export_html", "outputPath": "rel.html"}));
    assert_eq!(r["data"]["path"], "rel.html");
    let missing = root.cwd.join("nodir/x.html");
    let r = agent.request(json!({"id": "e3", "type": "export_html", "outputPath": missing}));
    assert_eq!(
        r["error"],
        format!(
            "ENOENT: no such file or directory, open '{}'",
            missing.display()
        )
    );
    // The embedded data: header, every entry, leaf, system prompt and tools, and no key
    // upstream's page lacks (the rendered markdown sits in an element of its own).
    let html = std::fs::read_to_string(root.cwd.join("rel.html")).unwrap();
    let embedded = |id: &str| -> Value {
        let start = html
            .find(&format!("<script id=\"{id}\" type=\"application/json\">"))
            .unwrap();
        let rest = &html[start..];
        let b64 = &rest[rest.find('>').unwrap() + 1..rest.find("</script>").unwrap()];
        use base64::Engine;
        serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap()
    };
    let data = embedded("session-data");
    let mut keys: Vec<&str> = data
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["entries", "header", "leafId", "systemPrompt", "tools"]
    );
    let rendered = embedded("rendered-markdown");
    let answer = data["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(
        rendered[format!("{}:0", answer["id"].as_str().unwrap())],
        "<p>Answer <strong>md</strong>.</p>\n"
    );
    let lines = check_session_file(&file).unwrap();
    assert_eq!(data["header"], lines[0]);
    assert_eq!(data["entries"].as_array().unwrap().len(), lines.len() - 1);
    assert_eq!(data["leafId"], lines.last().unwrap()["id"]);
    assert!(data["systemPrompt"].as_str().unwrap().contains("<cwd>"));
    let tools: Vec<&str> = data["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read", "bash", "edit", "write"]);
}
