//! read, write, grep, find and ls against real files.

use crate::tools_common::*;
use serde_json::json;
use std::fs;

#[tokio::test]
async fn read_golden_shapes() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("hello.txt"),
        "line one\nline two\nline three\n",
    )
    .unwrap();
    fs::create_dir(dir.path().join("notes")).unwrap();
    fs::write(dir.path().join("notes/todo.md"), "# TODO\n- a\n- b\n").unwrap();
    let t = tool(dir.path(), "read");
    let out = run(&*t, json!({"path":"hello.txt"})).await.unwrap();
    assert_eq!(
        serde_json::to_value(&out).unwrap(),
        json!({"content":[{"type":"text","text":"line one\nline two\nline three\n"}],
               "structuredContent":"line one\nline two\nline three\n"})
    );
    let out = run(&*t, json!({"path":"notes/todo.md","offset":2,"limit":1}))
        .await
        .unwrap();
    assert_eq!(
        text(&out),
        "- a\n\n[2 more lines in file. Use offset=3 to continue.]"
    );
}

#[tokio::test]
async fn read_errors() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "read");
    let err = run(&*t, json!({"path":"does-not-exist.txt"}))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        format!(
            "ENOENT: no such file or directory, access '{}/does-not-exist.txt'",
            dir.path().display()
        )
    );
    fs::write(dir.path().join("s.txt"), "a\nb").unwrap();
    let err = run(&*t, json!({"path":"s.txt","offset":5}))
        .await
        .unwrap_err();
    assert_eq!(err, "Offset 5 is beyond end of file (2 lines total)");
}

#[tokio::test]
async fn read_truncates_long_files() {
    let dir = tempfile::tempdir().unwrap();
    let body: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    fs::write(dir.path().join("big.txt"), body).unwrap();
    let t = tool(dir.path(), "read");
    let out = run(&*t, json!({"path":"big.txt"})).await.unwrap();
    let s = text(&out);
    assert!(s.ends_with("2000\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]"));
    assert_eq!(out.details.unwrap()["truncation"]["truncatedBy"], "lines");
    let out = run(&*t, json!({"path":"big.txt","offset":2001}))
        .await
        .unwrap();
    assert!(text(&out).starts_with("2001\n"));

    let long = "x".repeat(60 * 1024);
    fs::write(dir.path().join("long.txt"), format!("{long}\nshort\n")).unwrap();
    let out = run(&*t, json!({"path":"long.txt"})).await.unwrap();
    assert_eq!(
        text(&out),
        "[Line 1 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '1p' long.txt | head -c 51200]"
    );
}

#[tokio::test]
async fn read_image() {
    let dir = tempfile::tempdir().unwrap();
    use base64::Engine;
    let png = crate::rpc_images::png(3, 2);
    fs::write(dir.path().join("pic.bin"), &png).unwrap();
    let t = tool(dir.path(), "read");
    let out = run(&*t, json!({"path":"pic.bin"})).await.unwrap();
    let v = serde_json::to_value(&out).unwrap();
    assert_eq!(v["content"][0]["text"], "Read image file [image/png]");
    assert_eq!(v["content"][1]["type"], "image");
    assert_eq!(v["content"][1]["mimeType"], "image/png");
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    assert_eq!(
        v["content"][1]["data"], data,
        "within the limits: unchanged"
    );
    assert_eq!(
        v["structuredContent"],
        json!({"type": "image", "data": data, "mimeType": "image/png", "note": "Read image file [image/png]"})
    );
    // A truncated PNG is an error, never an image block.
    fs::write(dir.path().join("cut.png"), &png[..30]).unwrap();
    let err = run(&*t, json!({"path":"cut.png"})).await.unwrap_err();
    assert!(err.starts_with("Could not read image file "), "{err}");
}

#[tokio::test]
async fn write_creates_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "write");
    let out = run(
        &*t,
        json!({"path":"sub/dir/new.txt","content":"hello from write\n"}),
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::to_value(&out).unwrap(),
        json!({"content":[{"type":"text","text":"Successfully wrote to sub/dir/new.txt"}]})
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("sub/dir/new.txt")).unwrap(),
        "hello from write\n"
    );
}

#[tokio::test]
async fn grep_respects_gitignore_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir(root.join(".git")).unwrap();
    fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
    fs::create_dir(root.join("ignored")).unwrap();
    fs::write(root.join("ignored/x.txt"), "needle\n").unwrap();
    fs::create_dir(root.join("src")).unwrap();
    fs::write(root.join("src/a.rs"), "one\nneedle here\nthree\n").unwrap();
    fs::write(root.join(".hidden.txt"), "NEEDLE\n").unwrap();
    let t = tool(root, "grep");
    let out = run(&*t, json!({"pattern":"needle"})).await.unwrap();
    assert_eq!(text(&out), "src/a.rs:2: needle here");
    let out = run(&*t, json!({"pattern":"needle","ignoreCase":true}))
        .await
        .unwrap();
    assert_eq!(text(&out), ".hidden.txt:1: NEEDLE\nsrc/a.rs:2: needle here");
    let out = run(&*t, json!({"pattern":"needle","context":1,"glob":"*.rs"}))
        .await
        .unwrap();
    assert_eq!(
        text(&out),
        "src/a.rs-1- one\nsrc/a.rs:2: needle here\nsrc/a.rs-3- three"
    );
    let out = run(&*t, json!({"pattern":"e","path":"src/a.rs","limit":1}))
        .await
        .unwrap();
    assert_eq!(
        text(&out),
        "a.rs:1: one\n\n[1 matches limit reached. Use limit=2 for more, or refine pattern]"
    );
    // Exactly `limit` matches: no notice (upstream 1.6 waits for one match past the limit).
    let out = run(&*t, json!({"pattern":"e","path":"src/a.rs","limit":3}))
        .await
        .unwrap();
    assert_eq!(
        text(&out),
        "a.rs:1: one\na.rs:2: needle here\na.rs:3: three"
    );
    assert!(
        !format!("{:?}", out.details).contains("LimitReached"),
        "{:?}",
        out.details
    );
    let out = run(&*t, json!({"pattern":"zzz"})).await.unwrap();
    assert_eq!(text(&out), "No matches found");
    let err = run(&*t, json!({"pattern":"x","path":"missing"}))
        .await
        .unwrap_err();
    assert_eq!(err, format!("Path not found: {}/missing", root.display()));
}

#[tokio::test]
async fn find_and_ls() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::write(root.join(".gitignore"), "build/\n").unwrap();
    fs::create_dir_all(root.join("build")).unwrap();
    fs::write(root.join("build/out.rs"), "").unwrap();
    fs::create_dir_all(root.join("src/nested")).unwrap();
    fs::write(root.join("src/lib.rs"), "").unwrap();
    fs::write(root.join("src/nested/mod.rs"), "").unwrap();
    fs::write(root.join("README.md"), "").unwrap();
    let t = tool(root, "find");
    let out = run(&*t, json!({"pattern":"*.rs"})).await.unwrap();
    assert_eq!(text(&out), "src/lib.rs\nsrc/nested/mod.rs");
    let out = run(&*t, json!({"pattern":"src/**/*.rs"})).await.unwrap();
    assert_eq!(text(&out), "src/lib.rs\nsrc/nested/mod.rs");
    // 1.6: a pattern with a slash is relative to the search directory.
    fs::create_dir_all(root.join("pkg/src")).unwrap();
    fs::write(root.join("pkg/src/a.rs"), "").unwrap();
    let out = run(&*t, json!({"pattern":"src/*.rs"})).await.unwrap();
    assert_eq!(text(&out), "src/lib.rs");
    let out = run(&*t, json!({"pattern":"./src/*.rs"})).await.unwrap();
    assert_eq!(text(&out), "src/lib.rs");
    fs::remove_dir_all(root.join("pkg")).unwrap();
    let out = run(&*t, json!({"pattern":"nest*"})).await.unwrap();
    assert_eq!(text(&out), "src/nested/");
    let out = run(&*t, json!({"pattern":"*.rs","limit":1})).await.unwrap();
    assert_eq!(
        text(&out),
        "src/lib.rs\n\n[1 results limit reached. Use limit=2 for more, or refine pattern]"
    );
    // Exactly `limit` results: no notice (upstream 1.6 asks fd for one past the limit).
    let out = run(&*t, json!({"pattern":"*.rs","limit":2})).await.unwrap();
    assert_eq!(text(&out), "src/lib.rs\nsrc/nested/mod.rs");
    assert!(
        !format!("{:?}", out.details).contains("LimitReached"),
        "{:?}",
        out.details
    );
    let out = run(&*t, json!({"pattern":"*.zig"})).await.unwrap();
    assert_eq!(text(&out), "No files found matching pattern");

    let ls = tool(root, "ls");
    let out = run(&*ls, json!({})).await.unwrap();
    assert_eq!(text(&out), ".gitignore\nbuild/\nREADME.md\nsrc/");
    let out = run(&*ls, json!({"limit":2})).await.unwrap();
    assert_eq!(
        text(&out),
        ".gitignore\nbuild/\n\n[2 entries limit reached. Use limit=4 for more]"
    );
    let err = run(&*ls, json!({"path":"README.md"})).await.unwrap_err();
    assert_eq!(
        err,
        format!("Not a directory: {}/README.md", root.display())
    );
    fs::create_dir(root.join("empty")).unwrap();
    let out = run(&*ls, json!({"path":"empty"})).await.unwrap();
    assert_eq!(text(&out), "(empty directory)");
}

#[tokio::test]
async fn definitions_match_golden_schema_shape() {
    let dir = tempfile::tempdir().unwrap();
    let tools =
        pi_coding_agent::tools::create_tools(dir.path(), &pi_coding_agent::tools::DEFAULT_TOOLS);
    let names: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
    assert_eq!(names, ["read", "bash", "edit", "write"]);
    let strip = |mut v: serde_json::Value| {
        fn walk(v: &mut serde_json::Value) {
            if let Some(m) = v.as_object_mut() {
                if m.contains_key("description") {
                    m.insert("description".into(), json!("<PROSE>"));
                }
                for (_, c) in m.iter_mut() {
                    walk(c);
                }
            }
        }
        walk(&mut v);
        serde_json::to_string(&v).unwrap()
    };
    let got: Vec<String> = tools
        .iter()
        .map(|t| strip(t.definition().parameters))
        .collect();
    assert_eq!(
        got[0],
        r#"{"type":"object","required":["path"],"properties":{"path":{"type":"string","description":"<PROSE>"},"offset":{"type":"number","description":"<PROSE>"},"limit":{"type":"number","description":"<PROSE>"}}}"#
    );
    assert_eq!(
        got[1],
        r#"{"type":"object","required":["command"],"properties":{"command":{"type":"string","description":"<PROSE>"},"timeout":{"type":"number","description":"<PROSE>"}}}"#
    );
    assert_eq!(
        got[2],
        r#"{"type":"object","required":["path","edits"],"properties":{"path":{"type":"string","description":"<PROSE>"},"edits":{"type":"array","items":{"type":"object","required":["oldText","newText"],"properties":{"oldText":{"type":"string","description":"<PROSE>"},"newText":{"type":"string","description":"<PROSE>"}}},"description":"<PROSE>"}}}"#
    );
    assert_eq!(
        got[3],
        r#"{"type":"object","required":["path","content"],"properties":{"path":{"type":"string","description":"<PROSE>"},"content":{"type":"string","description":"<PROSE>"}}}"#
    );
}
