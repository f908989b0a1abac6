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

/// Writes `before`, applies `edits`, returns the file's bytes afterwards.
async fn edit_bytes(before: &str, edits: serde_json::Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("e.txt");
    fs::write(&p, before).unwrap();
    let t = tool(dir.path(), "edit");
    run(&*t, json!({"path": "e.txt", "edits": edits}))
        .await
        .unwrap();
    fs::read_to_string(&p).unwrap()
}

/// An edit changes exactly the matched text: every byte outside it (line endings of untouched
/// lines, BOM, a missing final newline) stays, and inserted line breaks take the ending of the
/// line they land in (issue 7).
#[tokio::test]
async fn edits_keep_every_byte_outside_the_match() {
    let one = |old: &str, new: &str| json!([{"oldText": old, "newText": new}]);
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        // Mixed endings: only d1 changes.
        (
            "a1\r\nb1\nc1\r\nd1\n",
            one("d1", "D1"),
            "a1\r\nb1\nc1\r\nD1\n",
        ),
        // CR only (classic Mac): stays CR, inserted breaks are CR.
        ("x1\ry1\rz1\r", one("y1", "Y1\nY2"), "x1\rY1\rY2\rz1\r"),
        // A lone CR inside an LF file is a character of an untouched line.
        ("s1\rs1b\ns2\n", one("s2", "S2"), "s1\rs1b\nS2\n"),
        // Pure CRLF and pure LF, with a multi-line insertion.
        (
            "p\r\nq\r\nr\r\n",
            one("q", "Q1\nQ2"),
            "p\r\nQ1\r\nQ2\r\nr\r\n",
        ),
        ("p\nq\nr\n", one("q", "Q1\nQ2"), "p\nQ1\nQ2\nr\n"),
        // Inserted text takes the ending of the line it lands in (LF line in a CRLF file).
        (
            "c1\r\nl1\nc2\r\n",
            one("l1", "L1\nL2"),
            "c1\r\nL1\nL2\nc2\r\n",
        ),
        (
            "c1\r\nl1\nc2\r\n",
            one("c2", "C2\nC3"),
            "c1\r\nl1\nC2\r\nC3\r\n",
        ),
        // BOM kept, no final newline kept (last line takes the ending of the line before).
        (
            "\u{FEFF}h1\r\nh2",
            one("h2", "H2\nH3"),
            "\u{FEFF}h1\r\nH2\r\nH3",
        ),
        ("n1\nn2", one("n2", "N2"), "n1\nN2"),
        // A match spanning a CRLF replaces the whole CRLF.
        ("m1\r\nm2\r\nm3\r\n", one("m1\nm2", "M"), "M\r\nm3\r\n"),
        // The whole content replaced.
        (
            "w1\r\nw2\r\n",
            one("w1\nw2\n", "all\nnew\n"),
            "all\r\nnew\r\n",
        ),
        // Several edits in one call, each against the original.
        (
            "e1\r\ne2\ne3\r\ne4\n",
            json!([{"oldText": "e1", "newText": "E1"}, {"oldText": "e4", "newText": "E4\nE5"}]),
            "E1\r\ne2\ne3\r\nE4\nE5\n",
        ),
        // Fuzzy match (trailing spaces, smart quotes) in a mixed file: other lines untouched.
        (
            "k1  \r\nsay \u{2018}hi\u{2019}\nk3\r\n",
            one("say 'hi'", "say 'bye'"),
            "k1  \r\nsay 'bye'\nk3\r\n",
        ),
        // Deleting a line break between a kept CR and LF must not fuse them into one CRLF.
        // (an LF is added after the CR: the file still reads as the diff shows, r1 / empty / r2).
        ("r1\rX\nr2\n", one("X", ""), "r1\r\n\nr2\n"),
    ];
    for (before, edits, after) in cases {
        let got = edit_bytes(before, edits.clone()).await;
        assert_eq!(got, after, "{before:?} with {edits}");
    }
}

#[tokio::test]
async fn multi_edit_not_found_names_the_edit_as_upstream() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    let t = tool(dir.path(), "edit");
    let err = run(
        &*t,
        json!({"path":"a.txt","edits":[{"oldText":"alpha","newText":"A"},{"oldText":"zzz","newText":"y"}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, "Could not find edits[1] in a.txt. The oldText must match exactly including all whitespace and newlines.");
}
