//! Edit tool: exact and fuzzy matching, CRLF/BOM preservation, multiple edits, errors.

use crate::tools_common::*;
use serde_json::json;
use std::fs;

#[tokio::test]
async fn golden_single_edit() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let t = tool(dir.path(), "edit");
    let out = run(
        &*t,
        json!({"path":"a.txt","edits":[{"oldText":"beta","newText":"BETA"}]}),
    )
    .await
    .unwrap();
    let v = serde_json::to_value(&out).unwrap();
    assert_eq!(
        v,
        json!({"content":[{"type":"text","text":"Successfully replaced 1 block(s) in a.txt."}],
            "details":{"diff":" 1 alpha\n-2 beta\n+2 BETA\n 3 gamma","firstChangedLine":2,
            "patch":"--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n"}})
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "alpha\nBETA\ngamma\n"
    );
}

#[tokio::test]
async fn not_found_message() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let t = tool(dir.path(), "edit");
    let err = run(
        &*t,
        json!({"path":"a.txt","edits":[{"oldText":"zzz","newText":"y"}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, "Could not find the exact text in a.txt. The old text must match exactly including all whitespace and newlines.");
}

#[tokio::test]
async fn missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "edit");
    let err = run(
        &*t,
        json!({"path":"nope.txt","edits":[{"oldText":"a","newText":"b"}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, "Could not edit file: nope.txt. Error code: ENOENT.");
}

#[tokio::test]
async fn crlf_and_bom_preserved() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("w.txt");
    fs::write(&p, "\u{FEFF}one\r\ntwo\r\nthree\r\n").unwrap();
    let t = tool(dir.path(), "edit");
    run(
        &*t,
        json!({"path":"w.txt","edits":[{"oldText":"two\nthree","newText":"TWO\nTHREE"}]}),
    )
    .await
    .unwrap();
    assert_eq!(
        fs::read_to_string(&p).unwrap(),
        "\u{FEFF}one\r\nTWO\r\nTHREE\r\n"
    );
}

#[tokio::test]
async fn fuzzy_match_keeps_other_lines_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("q.txt");
    // Smart quotes and trailing spaces in the file; the model sends ASCII quotes.
    fs::write(
        &p,
        "keep \u{201C}this\u{201D}   \nsay \u{2018}hi\u{2019}  \nend \u{2014} done\n",
    )
    .unwrap();
    let t = tool(dir.path(), "edit");
    let out = run(
        &*t,
        json!({"path":"q.txt","edits":[{"oldText":"say 'hi'","newText":"say 'bye'"}]}),
    )
    .await
    .unwrap();
    assert_eq!(text(&out), "Successfully replaced 1 block(s) in q.txt.");
    assert_eq!(
        fs::read_to_string(&p).unwrap(),
        "keep \u{201C}this\u{201D}   \nsay 'bye'\nend \u{2014} done\n"
    );
}

#[tokio::test]
async fn fuzzy_dash_and_nbsp() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.txt");
    fs::write(&p, "a\u{00A0}b \u{2013} c\n").unwrap();
    let t = tool(dir.path(), "edit");
    run(
        &*t,
        json!({"path":"d.txt","edits":[{"oldText":"a b - c","newText":"x"}]}),
    )
    .await
    .unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "x\n");
}

#[tokio::test]
async fn multiple_edits_against_original() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.txt");
    fs::write(&p, "one\ntwo\nthree\nfour\n").unwrap();
    let t = tool(dir.path(), "edit");
    let out = run(
        &*t,
        json!({"path":"m.txt","edits":[
            {"oldText":"four","newText":"4"},
            {"oldText":"one","newText":"two"},
            {"oldText":"two\n","newText":"2\n"}]}),
    )
    .await
    .unwrap();
    assert_eq!(text(&out), "Successfully replaced 3 block(s) in m.txt.");
    assert_eq!(fs::read_to_string(&p).unwrap(), "two\n2\nthree\n4\n");
}

#[tokio::test]
async fn uniqueness_overlap_and_empty_errors() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("u.txt"), "x\nx\nabc\n").unwrap();
    let t = tool(dir.path(), "edit");
    let err = run(
        &*t,
        json!({"path":"u.txt","edits":[{"oldText":"x","newText":"y"}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, "Found 2 occurrences of the text in u.txt. The text must be unique. Please provide more context to make it unique.");
    let err = run(
        &*t,
        json!({"path":"u.txt","edits":[{"oldText":"ab","newText":"1"},{"oldText":"bc","newText":"2"}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, "edits[0] and edits[1] overlap in u.txt. Merge them into one edit or target disjoint regions.");
    let err = run(
        &*t,
        json!({"path":"u.txt","edits":[{"oldText":"","newText":"2"}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, "oldText must not be empty in u.txt.");
    let err = run(&*t, json!({"path":"u.txt","edits":[]}))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        "Edit tool input is invalid. edits must contain at least one replacement."
    );
    let err = run(
        &*t,
        json!({"path":"u.txt","edits":[{"oldText":"abc","newText":"abc"}]}),
    )
    .await
    .unwrap_err();
    assert!(err.starts_with("No changes made to u.txt."), "{err}");
}

#[tokio::test]
async fn legacy_arguments_are_prepared() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("l.txt");
    fs::write(&p, "hello\n").unwrap();
    let t = tool(dir.path(), "edit");
    let prepared = t.prepare_arguments(json!({"path":"l.txt","oldText":"hello","newText":"bye"}));
    assert_eq!(
        prepared,
        json!({"path":"l.txt","edits":[{"oldText":"hello","newText":"bye"}]})
    );
    let as_string = t.prepare_arguments(
        json!({"path":"l.txt","edits":"[{\"oldText\":\"hello\",\"newText\":\"bye\"}]"}),
    );
    assert!(as_string["edits"].is_array());
    let schema = t.definition().parameters;
    let args = pi_agent::validate::validate_tool_arguments("edit", &schema, &prepared).unwrap();
    run(&*t, args).await.unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "bye\n");
}
