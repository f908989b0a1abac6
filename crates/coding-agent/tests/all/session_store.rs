//! Session store tests with real files in temp dirs (spec `sessions.md`).

use std::fs;
use std::path::{Path, PathBuf};

use pi_ai::{AssistantMessage, Content, Message, StopReason, Usage};
use pi_coding_agent::session::{
    build_session_context, default_session_dir, encode_cwd, find_most_recent_session, EntryKind,
    NewSessionOptions, SessionEntry, SessionError, SessionManager,
};
use serde_json::{json, Value};

fn assistant(text: &str, stop: StopReason) -> Message {
    Message::Assistant(AssistantMessage {
        content: vec![Content::text(text)],
        api: "openai-completions".into(),
        provider: "fake-openai".into(),
        model: "fake-gpt-mini".into(),
        response_id: None,
        usage: Usage::default(),
        stop_reason: stop,
        error_message: None,
        raw_stop_reason: None,
        thinking_level: None,
        duration_ms: None,
        timestamp: 1,
        error: None,
        extra: Default::default(),
    })
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|r| r.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn lines(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "file must end with a newline");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("every line is complete JSON"))
        .collect()
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            Message::User(u) => format!("user:{}", u.content.joined_text()),
            Message::Assistant(a) => format!("assistant:{}", a.text()),
            Message::System(_) => "system".to_string(),
            other => other.role().to_string(),
        })
        .collect()
}

#[test]
fn lazy_creation_flushes_at_first_assistant_message() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let mut sm = SessionManager::create(&dir, tmp.path());
    let file = sm.session_file().unwrap().to_path_buf();
    sm.append_model_change("fake-openai", "fake-gpt-mini")
        .unwrap();
    sm.append_thinking_level_change("off").unwrap();
    sm.append_message(&Message::user_text("hi")).unwrap();
    sm.append_session_info("name").unwrap();
    assert!(
        !file.exists(),
        "nothing on disk before an assistant message"
    );
    assert!(!sm.is_flushed());
    assert!(files_in(&dir).is_empty());

    sm.append_message(&assistant("hello", StopReason::Stop))
        .unwrap();
    assert!(sm.is_flushed());
    let l = lines(&file);
    assert_eq!(l.len(), 6);
    assert_eq!(l[0]["type"], "session");
    assert_eq!(l[0]["version"], 3);
    assert_eq!(l[0]["id"], sm.session_id());
    assert_eq!(l[1]["parentId"], Value::Null);
    assert_eq!(l[2]["parentId"], l[1]["id"]);
    assert_eq!(l[5]["message"]["role"], "assistant");

    sm.append_message(&Message::user_text("again")).unwrap();
    assert_eq!(lines(&file).len(), 7);
}

#[test]
fn file_name_and_header_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let sm = SessionManager::create(tmp.path(), Path::new("/some/cwd"));
    let h = sm.header();
    let name = sm
        .session_file()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let ts = h.timestamp.replace([':', '.'], "-");
    assert_eq!(name, format!("{ts}_{}.jsonl", h.id));
    // ISO-8601 with ms and Z
    assert_eq!(h.timestamp.len(), 24);
    assert!(h.timestamp.ends_with('Z'));
    // UUID v7
    let id = uuid::Uuid::parse_str(&h.id).unwrap();
    assert_eq!(id.get_version_num(), 7);
    assert_eq!(h.cwd, "/some/cwd");
    let v = h.to_value();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["type", "version", "id", "timestamp", "cwd"]);
}

#[test]
fn default_dir_encoding() {
    assert_eq!(
        encode_cwd(Path::new("/home/u/my-proj")),
        "--home-u-my-proj--"
    );
    assert_eq!(
        default_session_dir(Path::new("/a/agent"), Path::new("/RUN_ROOT/cwd")),
        PathBuf::from("/a/agent/sessions/--RUN_ROOT-cwd--")
    );
    assert_eq!(
        default_session_dir(Path::new("/a/agent"), Path::new("/x/y/../z/.")),
        PathBuf::from("/a/agent/sessions/--x-z--")
    );
}

#[test]
fn in_memory_never_touches_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::in_memory(tmp.path());
    assert!(sm.session_file().is_none());
    sm.append_message(&Message::user_text("q")).unwrap();
    sm.append_message(&assistant("a", StopReason::Stop))
        .unwrap();
    assert_eq!(sm.entries().len(), 2);
    assert!(files_in(tmp.path()).is_empty());
    let second = sm.entries()[1].id.clone();
    let path = sm.create_branched_session(&second).unwrap();
    assert!(path.is_none());
    assert!(files_in(tmp.path()).is_empty());
    assert_eq!(sm.entries().len(), 2);
}

#[test]
fn reopen_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    sm.append_model_change("p", "m").unwrap();
    sm.append_message(&Message::user_text("q")).unwrap();
    sm.append_message(&assistant("a", StopReason::Stop))
        .unwrap();
    sm.append_custom_entry("ext", Some(json!({"k": 1})))
        .unwrap();
    sm.append_session_info("  my\r\n\nsession  ").unwrap();
    let file = sm.session_file().unwrap().to_path_buf();

    let re = SessionManager::open(&file).unwrap();
    assert_eq!(re.session_id(), sm.session_id());
    // Flushed message entries are `Stored` stubs in `sm` (issue 15): compare payloads.
    assert_eq!(re.loaded_entries(), sm.loaded_entries());
    assert!(sm
        .entries()
        .iter()
        .any(|e| matches!(e.kind, EntryKind::Stored(_))));
    assert_eq!(re.leaf_id(), sm.leaf_id());
    assert_eq!(re.build_context(), sm.build_context());
    assert_eq!(re.session_name().as_deref(), Some("my session"));
    assert_eq!(re.cwd(), sm.cwd());
    assert!(re.is_flushed());
    let ctx = re.build_session_context();
    assert_eq!(ctx.model.unwrap().model_id, "fake-gpt-mini");
    assert_eq!(ctx.thinking_level, "off");
}

#[test]
fn torn_trailing_line_is_kept_byte_for_byte_and_next_entry_starts_a_new_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    sm.append_message(&Message::user_text("q")).unwrap();
    sm.append_message(&assistant("a", StopReason::Stop))
        .unwrap();
    let file = sm.session_file().unwrap().to_path_buf();
    drop(sm);
    let mut bytes = fs::read(&file).unwrap();
    bytes.extend_from_slice(br#"{"type":"message","id":"deadbeef","parentId":nu"#);
    fs::write(&file, &bytes).unwrap();

    let mut re = SessionManager::open(&file).unwrap();
    assert_eq!(re.entries().len(), 2, "every complete entry is read");
    assert_eq!(fs::read(&file).unwrap(), bytes, "opening writes nothing");
    re.append_message(&Message::user_text("after crash"))
        .unwrap();
    let after = fs::read(&file).unwrap();
    assert!(after.starts_with(&bytes), "the torn bytes are kept");
    assert_eq!(
        after[bytes.len()],
        b'\n',
        "the new entry starts a line of its own"
    );
    let last: Value =
        serde_json::from_slice(after[bytes.len() + 1..].strip_suffix(b"\n").unwrap()).unwrap();
    assert_eq!(last["message"]["content"][0]["text"], "after crash");
    let re2 = SessionManager::open(&file).unwrap();
    assert_eq!(re2.entries().len(), 3);
    assert_eq!(re2.leaf_id(), Some(last["id"].as_str().unwrap()));
}

#[test]
fn entries_glued_behind_nul_runs_are_recovered() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    sm.append_message(&Message::user_text("q1")).unwrap();
    sm.append_message(&assistant("a1", StopReason::Stop))
        .unwrap();
    let file = sm.session_file().unwrap().to_path_buf();
    let before = fs::read(&file).unwrap();
    sm.append_message(&Message::user_text("q2")).unwrap();
    sm.append_message(&assistant("a2", StopReason::Stop))
        .unwrap();
    drop(sm);
    // A crash left zeroed blocks: one run right before an entry (glued to it), one inside a
    // torn line, and a NUL tail at the end.
    let full = fs::read(&file).unwrap();
    let tail = &full[before.len()..];
    let split = tail.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut bytes = before;
    bytes.extend_from_slice(&[0u8; 4096]);
    bytes.extend_from_slice(&tail[..split]);
    bytes.extend_from_slice(br#"{"type":"message","id":"torn"#);
    bytes.extend_from_slice(&[0u8; 512]);
    bytes.extend_from_slice(&tail[split..]);
    bytes.extend_from_slice(&[0u8; 100]);
    fs::write(&file, &bytes).unwrap();

    let mut re = SessionManager::open(&file).unwrap();
    assert_eq!(
        re.entries().len(),
        4,
        "both entries behind NUL runs are read"
    );
    assert_eq!(
        texts(&re.build_context()),
        ["user:q1", "assistant:a1", "user:q2", "assistant:a2"]
    );
    assert_eq!(fs::read(&file).unwrap(), bytes, "opening writes nothing");
    re.append_message(&Message::user_text("q3")).unwrap();
    let after = fs::read(&file).unwrap();
    assert!(after.starts_with(&bytes));
    let re2 = SessionManager::open(&file).unwrap();
    assert_eq!(
        texts(&re2.build_context()),
        [
            "user:q1",
            "assistant:a1",
            "user:q2",
            "assistant:a2",
            "user:q3"
        ]
    );
}

#[test]
fn a_deleted_session_file_is_written_again_whole() {
    for delete_dir in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("sessions");
        let mut sm = SessionManager::create(&dir, tmp.path());
        sm.append_message(&Message::user_text("q1")).unwrap();
        sm.append_message(&assistant("a1", StopReason::Stop))
            .unwrap();
        let file = sm.session_file().unwrap().to_path_buf();
        if delete_dir {
            fs::remove_dir_all(&dir).unwrap();
        } else {
            fs::remove_file(&file).unwrap();
        }
        sm.append_message(&Message::user_text("q2")).unwrap();
        let l = lines(&file);
        assert_eq!(
            l[0]["type"], "session",
            "header first (delete_dir={delete_dir})"
        );
        assert_eq!(l[0]["id"], sm.session_id());
        assert_eq!(l.len(), 4, "header + every entry (delete_dir={delete_dir})");
        sm.append_message(&assistant("a2", StopReason::Stop))
            .unwrap();
        let re = SessionManager::open(&file).unwrap();
        assert_eq!(
            texts(&re.build_context()),
            ["user:q1", "assistant:a1", "user:q2", "assistant:a2"]
        );
    }
}

#[test]
fn an_unrecoverable_write_is_an_error_and_keeps_memory_and_file_in_step() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let mut sm = SessionManager::create(&dir, tmp.path());
    sm.append_message(&assistant("a1", StopReason::Stop))
        .unwrap();
    // The folder is replaced by a plain file: the session file can be neither appended to
    // nor written again.
    fs::remove_dir_all(&dir).unwrap();
    fs::write(&dir, b"not a folder").unwrap();
    assert!(sm.append_message(&Message::user_text("q2")).is_err());
    assert_eq!(sm.entries().len(), 1);
    assert_eq!(fs::read(&dir).unwrap(), b"not a folder");
}

#[test]
fn unterminated_but_complete_last_line_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    sm.append_message(&assistant("a", StopReason::Stop))
        .unwrap();
    let file = sm.session_file().unwrap().to_path_buf();
    let text = fs::read_to_string(&file).unwrap();
    fs::write(&file, text.trim_end_matches('\n')).unwrap();
    let mut re = SessionManager::open(&file).unwrap();
    assert_eq!(re.entries().len(), 1);
    re.append_message(&Message::user_text("next")).unwrap();
    assert_eq!(lines(&file).len(), 3);
    assert_eq!(SessionManager::open(&file).unwrap().entries().len(), 2);
}

#[test]
fn garbage_lines_in_the_middle_are_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("s.jsonl");
    fs::write(
        &file,
        concat!(
            r#"{"type":"session","version":3,"id":"abc","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
            "\n",
            "not json\n\n",
            r#"{"type":"model_change","id":"00000001","parentId":null,"timestamp":"2026-01-01T00:00:00.001Z","provider":"p","modelId":"m"}"#,
            "\n"
        ),
    )
    .unwrap();
    let sm = SessionManager::open(&file).unwrap();
    assert_eq!(sm.entries().len(), 1);
    assert_eq!(sm.cwd(), Path::new("/w"));
    assert_eq!(sm.session_dir(), Some(tmp.path()));
}

#[test]
fn invalid_empty_and_missing_files() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.jsonl");
    fs::write(&bad, "{\"type\":\"message\",\"id\":\"x\"}\n").unwrap();
    let err = SessionManager::open(&bad).unwrap_err();
    assert!(matches!(err, SessionError::InvalidFile(_)));
    assert!(err
        .to_string()
        .starts_with("Session file is not a valid pi session: "));
    assert_eq!(
        fs::read_to_string(&bad).unwrap(),
        "{\"type\":\"message\",\"id\":\"x\"}\n",
        "left untouched"
    );

    let empty = tmp.path().join("empty.jsonl");
    fs::write(&empty, "").unwrap();
    let sm = SessionManager::open(&empty).unwrap();
    let l = lines(&empty);
    assert_eq!(l.len(), 1);
    assert_eq!(l[0]["id"], sm.session_id());

    let missing = tmp.path().join("no-such-session.jsonl");
    let mut sm = SessionManager::open(&missing).unwrap();
    assert_eq!(sm.session_file(), Some(missing.as_path()));
    assert!(sm.entries().is_empty());
    sm.append_message(&Message::user_text("q")).unwrap();
    assert!(!missing.exists());
    sm.append_message(&assistant("a", StopReason::Stop))
        .unwrap();
    assert_eq!(lines(&missing).len(), 3);
}

#[test]
fn entry_ids_are_unique_short_hex() {
    let mut sm = SessionManager::in_memory(Path::new("/"));
    for i in 0..3000 {
        sm.append_custom_entry("t", Some(json!(i))).unwrap();
    }
    let entries = sm.entries();
    let mut ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
    assert!(ids.iter().all(|id| id.len() == 8
        && id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())));
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3000);
}

#[test]
fn field_order_matches_upstream() {
    let mut sm = SessionManager::in_memory(Path::new("/"));
    let e = sm.append_model_change("p", "m").unwrap().to_line();
    assert!(e.starts_with(r#"{"type":"model_change","id":""#), "{e}");
    assert!(e.contains(r#","parentId":null,"timestamp":""#));
    assert!(
        e.ends_with("\"provider\":\"p\",\"modelId\":\"m\"}\n"),
        "{e}"
    );
    let e = sm
        .append_custom_entry("ext", Some(json!(1)))
        .unwrap()
        .to_value();
    let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["type", "customType", "data", "id", "parentId", "timestamp"]
    );
    let target = sm
        .append_message(&assistant("x", StopReason::Error))
        .unwrap();
    let e = sm.append_context_edit(&target, None).unwrap().to_value();
    let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "type",
            "id",
            "parentId",
            "timestamp",
            "targetId",
            "replacement"
        ]
    );
    assert_eq!(e["replacement"], Value::Null);
}

#[test]
fn branching_tree_and_context() {
    let mut sm = SessionManager::in_memory(Path::new("/"));
    sm.append_model_change("p", "m").unwrap();
    let u1 = sm.append_message(&Message::user_text("one")).unwrap();
    let a1 = sm
        .append_message(&assistant("A1", StopReason::Stop))
        .unwrap();
    let u2 = sm.append_message(&Message::user_text("two")).unwrap();
    sm.append_message(&assistant("A2", StopReason::Stop))
        .unwrap();
    assert_eq!(
        texts(&sm.build_context()),
        ["user:one", "assistant:A1", "user:two", "assistant:A2"]
    );

    sm.set_leaf(&a1).unwrap();
    let u2b = sm.append_message(&Message::user_text("two-b")).unwrap();
    assert_eq!(
        sm.entry(&u2b).unwrap().parent_id.as_deref(),
        Some(a1.as_str())
    );
    assert_eq!(
        texts(&sm.build_context()),
        ["user:one", "assistant:A1", "user:two-b"]
    );
    let branch: Vec<String> = sm.branch().iter().map(|e| e.id.clone()).collect();
    assert_eq!(branch.len(), 4);
    assert_eq!(branch[1], u1);

    let tree = sm.get_tree();
    assert_eq!(tree.len(), 1);
    let a1_node = &tree[0].children[0].children[0];
    assert_eq!(a1_node.entry.id, a1);
    let kids: Vec<&str> = a1_node
        .children
        .iter()
        .map(|n| n.entry.id.as_str())
        .collect();
    assert_eq!(kids, [u2.as_str(), u2b.as_str()]);
    assert!(matches!(
        sm.set_leaf("nope"),
        Err(SessionError::EntryNotFound(_))
    ));

    // labels show up in the tree and resolve last-wins
    sm.append_label_change(&u1, Some("start")).unwrap();
    let tree = serde_json::to_value(sm.get_tree()).unwrap();
    assert_eq!(tree[0]["children"][0]["label"], "start");
    assert!(tree[0]["children"][0]["labelTimestamp"].is_string());
    sm.append_label_change(&u1, None).unwrap();
    assert_eq!(sm.label(&u1), None);

    // reset leaf: a new root
    sm.reset_leaf();
    assert!(sm.build_context().is_empty());
    sm.append_message(&Message::user_text("root2")).unwrap();
    assert_eq!(sm.get_tree().len(), 2);

    // free function, unknown leaf falls back to the last entry
    let ctx = build_session_context(&sm.loaded_entries(), Some("unknown"));
    assert_eq!(texts(&ctx.messages), ["user:root2"]);
}

#[test]
fn context_edit_hides_or_replaces_target() {
    let mut sm = SessionManager::in_memory(Path::new("/"));
    sm.append_message(&Message::user_text("q")).unwrap();
    let failed = sm
        .append_message(&assistant("partial", StopReason::Error))
        .unwrap();
    let e = sm.append_context_edit(&failed, None).unwrap();
    assert_eq!(e.entry_type(), "context_edit");
    assert_eq!(texts(&sm.build_context()), ["user:q"]);
    // still in the entry list
    assert!(sm.entry(&failed).is_some());
    sm.append_message(&assistant("ok", StopReason::Stop))
        .unwrap();
    assert_eq!(texts(&sm.build_context()), ["user:q", "assistant:ok"]);

    let u = sm.append_message(&Message::user_text("secret")).unwrap();
    sm.append_context_edit(&u, Some(json!({"content": "redacted"})))
        .unwrap();
    let msgs = sm.build_context();
    assert_eq!(texts(&msgs).last().unwrap(), "user:redacted");

    let a = sm.entries()[3].id.clone();
    let e = sm
        .append_context_edit(&a, Some(json!({"content": "short"})))
        .unwrap();
    assert_eq!(
        e.to_value()["replacement"],
        json!({"content": [{"type": "text", "text": "short"}]})
    );
    assert_eq!(texts(&sm.build_context())[1], "assistant:short");

    // validation
    assert!(matches!(
        sm.append_context_edit("zzzzzzzz", None),
        Err(SessionError::EntryNotFound(_))
    ));
    assert!(matches!(
        sm.append_context_edit(&u, Some(json!({"x": 1}))),
        Err(SessionError::InvalidReplacement)
    ));
    let mc = sm.append_model_change("p", "m").unwrap().id.clone();
    assert!(matches!(
        sm.append_context_edit(&mc, None),
        Err(SessionError::NotEditable(_))
    ));
}

#[test]
fn context_edit_survives_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    sm.append_message(&Message::user_text("q")).unwrap();
    let failed = sm
        .append_message(&assistant("boom", StopReason::Error))
        .unwrap();
    sm.append_context_edit(&failed, None).unwrap();
    sm.append_message(&assistant("fine", StopReason::Stop))
        .unwrap();
    let re = SessionManager::open(sm.session_file().unwrap()).unwrap();
    assert_eq!(texts(&re.build_context()), ["user:q", "assistant:fine"]);
}

#[test]
fn compaction_keeps_system_snapshot_summary_and_kept_range() {
    let mut sm = SessionManager::in_memory(Path::new("/"));
    let sys: Message = serde_json::from_value(json!({
        "role": "system", "content": "", "sections": {"a": "A"}, "timestamp": 5,
        "toolsAdded": [{"name": "read", "description": "d", "parameters": {}}]
    }))
    .unwrap();
    sm.append_message(&sys).unwrap();
    sm.append_message(&Message::user_text("one")).unwrap();
    sm.append_message(&assistant("A1", StopReason::Stop))
        .unwrap();
    let u2 = sm.append_message(&Message::user_text("two")).unwrap();
    sm.append_message(&assistant("A2", StopReason::Stop))
        .unwrap();
    let c = sm
        .append_compaction(
            "sum",
            Some(&u2),
            1234,
            Some(json!({"readFiles": [], "modifiedFiles": []})),
            Some(false),
            None,
        )
        .unwrap()
        .to_value();
    let keys: Vec<&String> = c.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "type",
            "id",
            "parentId",
            "timestamp",
            "summary",
            "firstKeptEntryId",
            "tokensBefore",
            "details",
            "fromHook",
            "systemMessage"
        ]
    );
    assert_eq!(c["systemMessage"]["sections"]["a"], "A");
    sm.append_message(&Message::user_text("three")).unwrap();
    let msgs = sm.build_context();
    assert_eq!(
        texts(&msgs),
        [
            "system",
            "compactionSummary",
            "user:two",
            "assistant:A2",
            "user:three"
        ]
    );
    let summary = serde_json::to_value(&msgs[1]).unwrap();
    assert_eq!(summary["summary"], "sum");
    assert_eq!(summary["tokensBefore"], 1234);
    assert!(summary["timestamp"].is_i64());
}

#[test]
fn custom_message_and_branch_summary_become_messages() {
    let mut sm = SessionManager::in_memory(Path::new("/"));
    let u = sm.append_message(&Message::user_text("one")).unwrap();
    sm.append_message(&assistant("A1", StopReason::Stop))
        .unwrap();
    sm.append_custom_message_entry(
        "ext",
        pi_ai::UserContent::Text("injected".into()),
        true,
        None,
    )
    .unwrap();
    let msgs = sm.build_context();
    let v = serde_json::to_value(&msgs[2]).unwrap();
    assert_eq!(v["role"], "custom");
    assert_eq!(v["customType"], "ext");
    assert_eq!(v["content"], "injected");
    assert_eq!(v["display"], true);

    let leaf_before = sm.leaf_id().unwrap().to_string();
    let bs = sm
        .branch_with_summary(Some(&u), "went elsewhere", None, Some(false), None)
        .unwrap()
        .clone();
    assert_eq!(bs.parent_id.as_deref(), Some(u.as_str()));
    match &bs.kind {
        EntryKind::BranchSummary(b) => assert_eq!(b.from_id.as_deref(), Some(leaf_before.as_str())),
        other => panic!("unexpected {other:?}"),
    }
    let msgs = sm.build_context();
    assert_eq!(texts(&msgs), ["user:one", "branchSummary"]);
}

#[test]
fn unknown_entries_are_preserved() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("s.jsonl");
    let weird = r#"{"type":"future_thing","id":"0000000a","parentId":"00000001","timestamp":"2026-01-01T00:00:00.002Z","payload":{"x":[1,2]}}"#;
    let extra = r#"{"type":"model_change","id":"00000001","parentId":null,"timestamp":"2026-01-01T00:00:00.001Z","provider":"p","modelId":"m","source":"rpc"}"#;
    fs::write(
        &file,
        format!(
            "{}\n{extra}\n{weird}\n",
            r#"{"type":"session","version":3,"id":"abc","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#
        ),
    )
    .unwrap();
    let mut sm = SessionManager::open(&file).unwrap();
    assert_eq!(sm.entries().len(), 2);
    assert_eq!(sm.entries()[0].to_value().to_string(), extra);
    assert_eq!(sm.entries()[1].entry_type(), "future_thing");
    assert_eq!(sm.entries()[1].to_value().to_string(), weird);
    let back: SessionEntry = serde_json::from_str(weird).unwrap();
    assert_eq!(back, *sm.entries()[1]);
    sm.append_message(&Message::user_text("q")).unwrap();
    assert!(fs::read_to_string(&file).unwrap().contains(weird));
}

#[test]
fn clone_creates_branched_session_file() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    sm.append_model_change("p", "m").unwrap();
    let u = sm.append_message(&Message::user_text("q")).unwrap();
    sm.append_label_change(&u, Some("mark")).unwrap();
    sm.append_message(&assistant("a", StopReason::Stop))
        .unwrap();
    sm.append_session_info("named").unwrap();
    let old_file = sm.session_file().unwrap().to_path_buf();
    let old_id = sm.session_id().to_string();
    let old_ids: Vec<String> = sm
        .entries()
        .iter()
        .filter(|e| e.entry_type() != "label")
        .map(|e| e.id.clone())
        .collect();

    let leaf = sm.leaf_id().unwrap().to_string();
    let new_file = sm.create_branched_session(&leaf).unwrap().unwrap();
    assert_ne!(sm.session_id(), old_id);
    assert_ne!(new_file, old_file);
    let l = lines(&new_file);
    assert_eq!(l[0]["parentSession"], old_file.to_string_lossy().as_ref());
    let ids: Vec<String> = l[1..]
        .iter()
        .filter(|v| v["type"] != "label")
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, old_ids, "ids preserved, labels dropped from the path");
    for w in l[1..].windows(2) {
        assert_eq!(w[1]["parentId"], w[0]["id"], "linear chain");
    }
    let last = l.last().unwrap();
    assert_eq!(last["type"], "label");
    assert_eq!(last["targetId"], u.as_str());
    assert_eq!(sm.label(&u), Some("mark"));
    assert_eq!(sm.session_name().as_deref(), Some("named"));
    assert_eq!(
        find_most_recent_session(tmp.path(), None).map(|p| p.exists()),
        Some(true)
    );
}

#[test]
fn fork_before_first_message_is_lazy() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    sm.append_model_change("p", "m").unwrap();
    let mc = sm.leaf_id().unwrap().to_string();
    sm.append_message(&Message::user_text("q")).unwrap();
    sm.append_message(&assistant("a", StopReason::Stop))
        .unwrap();
    let f = sm.create_branched_session(&mc).unwrap().unwrap();
    assert!(!f.exists(), "no assistant message on the kept path");
    assert_eq!(sm.entries().len(), 1);
}

#[test]
fn new_session_with_options() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    sm.append_message(&Message::user_text("q")).unwrap();
    let f = sm
        .new_session(NewSessionOptions {
            id: Some("my.session-1".into()),
            parent_session: Some("/p.jsonl".into()),
        })
        .unwrap()
        .unwrap()
        .to_path_buf();
    assert!(f.to_string_lossy().ends_with("_my.session-1.jsonl"));
    assert!(sm.entries().is_empty());
    assert_eq!(sm.header().parent_session.as_deref(), Some("/p.jsonl"));
    assert!(matches!(
        sm.new_session(NewSessionOptions {
            id: Some("-bad".into()),
            parent_session: None
        }),
        Err(SessionError::InvalidSessionId)
    ));
}

#[test]
fn v1_files_are_migrated() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("old.jsonl");
    fs::write(
        &file,
        concat!(
            r#"{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:00.001Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:00.002Z","message":{"role":"hookMessage","customType":"x","content":"c","display":true,"timestamp":2}}"#,
            "\n",
            r#"{"type":"compaction","timestamp":"2025-01-01T00:00:00.003Z","summary":"s","firstKeptEntryIndex":2,"tokensBefore":10}"#,
            "\n"
        ),
    )
    .unwrap();
    let sm = SessionManager::open(&file).unwrap();
    assert_eq!(sm.entries().len(), 3);
    assert_eq!(sm.header().version, Some(3));
    let l = lines(&file);
    assert_eq!(l[0]["version"], 3);
    assert_eq!(l[2]["parentId"], l[1]["id"]);
    assert_eq!(l[2]["message"]["role"], "custom");
    assert_eq!(l[3]["firstKeptEntryId"], l[2]["id"]);
    assert!(l[3].get("firstKeptEntryIndex").is_none());
}

/// Numbers compared by value (upstream writes `0`, serde_json `0.0`).
fn norm(v: Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64()),
        Value::Array(a) => Value::Array(a.into_iter().map(norm).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, norm(v))).collect()),
        other => other,
    }
}

/// A resource the tests need is missing: with `PI_REQUIRE_TEST_RESOURCES=1` (as in `.ci/run`)
/// that is a failure; otherwise a notice on stderr and the test passes.
fn missing_resource(what: &str, how: &str) {
    if std::env::var_os("PI_REQUIRE_TEST_RESOURCES").is_some_and(|v| v == "1") {
        panic!("missing test resource: {what}; {how} (PI_REQUIRE_TEST_RESOURCES=1 is set)");
    }
    eprintln!("SKIP: {what}; {how}");
}

/// Every line of upstream 1.6's recorded session files parses and serializes back to the
/// same JSON object (same keys in the same order, same values).
#[test]
fn golden_session_files_round_trip() {
    // The shared conformance recordings sit beside the checkout (CI copies them there too).
    let root_buf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/golden");
    let root = root_buf.as_path();
    if !root.exists() {
        missing_resource(
            &format!("no shared conformance recordings at {}", root.display()),
            "check out the shared conformance recordings as `shared/` beside the workspace folder",
        );
        return;
    }
    let mut checked = 0;
    for scenario in files_in(root) {
        for dir in files_in(&scenario.join("sessions")) {
            for file in files_in(&dir) {
                let sm = SessionManager::open(&file).unwrap();
                let text = fs::read_to_string(&file).unwrap();
                let mut it = text.lines();
                let header: Value = serde_json::from_str(it.next().unwrap()).unwrap();
                assert_eq!(sm.header().to_value(), header);
                for (line, entry) in it.zip(sm.entries()) {
                    let orig: Value = serde_json::from_str(line).unwrap();
                    let ours = entry.to_value();
                    let ok: Vec<&String> = orig.as_object().unwrap().keys().collect();
                    let tk: Vec<&String> = ours.as_object().unwrap().keys().collect();
                    assert_eq!(tk, ok, "key order in {}", file.display());
                    if entry.entry_type() != "message" {
                        assert_eq!(norm(ours), norm(orig), "{}", file.display());
                    }
                    checked += 1;
                }
                assert!(!sm.build_context().is_empty());
            }
        }
    }
    assert!(checked > 0);
}

/// Costs read back from a session file equal, bit for bit, what was written (serde_json
/// `float_roundtrip`; without it e.g. $3/M × 7 tokens = 0.000021000000000000002 reads back
/// as 0.000021).
#[test]
fn costs_round_trip_exactly_through_a_session_file() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    let file = sm.session_file().unwrap().to_path_buf();
    let price = pi_ai::ModelCost {
        input: 3.0,
        output: 15.0,
        cache_read: 0.3,
        cache_write: 3.75,
        tiers: None,
    };
    let mut written = Vec::new();
    for (input, output, cache_read, cache_write) in [
        (7, 14, 33, 50),
        (66, 69, 79, 129),
        (1, 2, 3, 4),
        (132, 135, 0, 0),
    ] {
        let mut usage = Usage {
            input,
            output,
            cache_read,
            cache_write,
            ..Usage::default()
        };
        usage.compute_cost(&price);
        written.push(usage);
    }
    // Awkward sums as well.
    let mut awkward = Usage::default();
    awkward.cost.input = 0.1 + 0.2;
    awkward.cost.output = 1.0 / 3.0;
    awkward.cost.total = 0.1 + 0.2 + 1.0 / 3.0;
    written.push(awkward);

    sm.append_message(&Message::user_text("hi")).unwrap();
    for usage in &written {
        let Message::Assistant(mut a) = assistant("ok", StopReason::Stop) else {
            unreachable!()
        };
        a.usage = usage.clone();
        sm.append_message(&Message::Assistant(a)).unwrap();
    }
    drop(sm);

    let reopened = SessionManager::open(&file).unwrap();
    let read: Vec<Usage> = reopened
        .build_context()
        .into_iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a.usage),
            _ => None,
        })
        .collect();
    assert_eq!(read.len(), written.len());
    let bits = |u: &Usage| {
        let c = &u.cost;
        [c.input, c.output, c.cache_read, c.cache_write, c.total].map(f64::to_bits)
    };
    for (r, w) in read.iter().zip(&written) {
        assert_eq!(bits(r), bits(w), "read {:?}, wrote {:?}", r.cost, w.cost);
    }
}

/// A file over `LAZY_MIN_BYTES` keeps message payloads in the file; every view must still be
/// what the writer had in memory (issue 8).
#[test]
fn large_files_open_lazily_with_the_same_views() {
    use pi_coding_agent::session::LAZY_MIN_BYTES;
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    sm.append_model_change("p", "m").unwrap();
    sm.append_thinking_level_change("high").unwrap();
    let filler = "x".repeat(4000);
    let mut kept = String::new();
    let mut i = 0;
    while std::fs::metadata(sm.session_file().unwrap())
        .map(|m| m.len())
        .unwrap_or(0)
        < LAZY_MIN_BYTES + 1000
    {
        let id = sm
            .append_message(&Message::user_text(format!("q{i} {filler}")))
            .unwrap();
        if i == 200 {
            kept = id;
        }
        sm.append_message(&assistant(&format!("a{i}"), StopReason::Stop))
            .unwrap();
        i += 1;
    }
    assert!(i > 200, "{i}");
    sm.append_compaction("summary", Some(&kept), 1000, None, None, None)
        .unwrap();
    let last = sm
        .append_message(&Message::user_text("after compaction"))
        .unwrap();
    sm.append_label_change(&kept, Some("kept")).unwrap();
    sm.append_message(&assistant("final", StopReason::Stop))
        .unwrap();
    let file = sm.session_file().unwrap().to_path_buf();
    let bytes = fs::read(&file).unwrap();

    let re = SessionManager::open(&file).unwrap();
    assert!(
        re.entries()
            .iter()
            .any(|e| matches!(e.kind, EntryKind::Stored(_))),
        "message payloads stay in the file"
    );
    assert_eq!(re.build_session_context(), sm.build_session_context());
    assert_eq!(re.loaded_entries(), sm.loaded_entries());
    assert_eq!(re.get_tree(), sm.get_tree());
    assert_eq!(
        re.entries_since(&last).unwrap(),
        sm.entries_since(&last).unwrap()
    );
    assert_eq!(
        re.entry(&kept).unwrap().into_owned(),
        sm.entry(&kept).unwrap().into_owned()
    );
    assert_eq!(fs::read(&file).unwrap(), bytes, "opening writes nothing");

    // Clone of the lazy session: the same entries as a clone of the eager one.
    let mut lazy = re.clone();
    let mut eager = sm.clone();
    let leaf = re.leaf_id().unwrap().to_string();
    let a = lazy.create_branched_session(&leaf).unwrap().unwrap();
    let b = eager.create_branched_session(&leaf).unwrap().unwrap();
    let strip = |p: &Path| -> Vec<Value> {
        lines(p)[1..]
            .iter()
            .filter(|v| v["type"] != "label")
            .cloned()
            .collect()
    };
    assert_eq!(strip(&a), strip(&b));

    // The file deleted under a lazy session: written again whole from the open handle.
    let mut re = re;
    fs::remove_file(&file).unwrap();
    re.append_message(&Message::user_text("after delete"))
        .unwrap();
    let again = fs::read(&file).unwrap();
    assert_eq!(lines(&file).len(), sm.entries().len() + 2);
    assert!(again.len() > bytes.len() / 2);
    let back = SessionManager::open(&file).unwrap();
    assert_eq!(
        back.loaded_entries()[..sm.entry_count()],
        *sm.loaded_entries()
    );
}

/// A system message inside a compaction's kept range is replaced by the compaction's snapshot,
/// also when the file is large enough to be opened lazily and the message's line stays on
/// disk (it used to come back twice: the stub did not look like a system message).
#[test]
fn lazy_context_drops_system_messages_in_the_kept_range() {
    use pi_coding_agent::session::LAZY_MIN_BYTES;
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    sm.append_model_change("p", "m").unwrap();
    let filler = "y".repeat(8000);
    let mut kept = String::new();
    let mut i = 0;
    let size = |sm: &SessionManager| {
        fs::metadata(sm.session_file().unwrap())
            .map(|m| m.len())
            .unwrap_or(0)
    };
    while size(&sm) < LAZY_MIN_BYTES + 1000 {
        let id = sm
            .append_message(&Message::user_text(format!("q{i} {filler}")))
            .unwrap();
        if i == 10 {
            kept = id;
            sm.append_message(&Message::System(pi_ai::SystemMessage {
                content: pi_ai::UserContent::Text("be brief".into()),
                sections: None,
                timestamp: 1,
                tools_added: None,
                tools_removed: None,
                replace: None,
                extra: Default::default(),
            }))
            .unwrap();
        }
        sm.append_message(&assistant(&format!("a{i}"), StopReason::Stop))
            .unwrap();
        i += 1;
    }
    sm.append_compaction("summary", Some(&kept), 1000, None, None, None)
        .unwrap();
    sm.append_message(&Message::user_text("after")).unwrap();
    let eager = sm.build_session_context();
    let systems = eager
        .messages
        .iter()
        .filter(|m| matches!(m, Message::System(_)))
        .count();
    assert_eq!(systems, 1, "only the compaction's snapshot");
    let re = SessionManager::open(sm.session_file().unwrap()).unwrap();
    assert!(re
        .entries()
        .iter()
        .any(|e| matches!(e.kind, EntryKind::Stored(_))));
    assert_eq!(re.build_session_context(), eager);
}

/// A large file's `message` lines are indexed without being parsed; still, a torn one (cut
/// before a NUL run, or last without a newline) is never taken for an entry, ids that are not
/// 8 hex chars resolve, and a message line with its keys in another order is read whole.
#[test]
fn lazy_index_takes_only_whole_lines() {
    use pi_coding_agent::session::LAZY_MIN_BYTES;
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("big.jsonl");
    let filler = "z".repeat(4000);
    let mut text = json!({"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":tmp.path()}).to_string() + "\n";
    let mut parent = Value::Null;
    let mut ids = Vec::new();
    let mut n = 0;
    while text.len() < LAZY_MIN_BYTES as usize + 1000 {
        // 8 hex chars, a full UUID, and upper case hex (not packed: kept as text).
        let id = match n % 3 {
            0 => format!("{n:08x}"),
            1 => format!("0193a000-0000-7000-8000-{n:012x}"),
            _ => format!("{n:08X}"),
        };
        let message = if n % 2 == 0 {
            json!({"role":"user","content":format!("q{n} {filler}"),"timestamp":1})
        } else {
            serde_json::to_value(assistant(&format!("a{n}"), StopReason::Stop)).unwrap()
        };
        text += &json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:00:01.000Z","message":message}).to_string();
        text += "\n";
        parent = json!(id);
        ids.push(id);
        n += 1;
    }
    // Keys in another order: parsed whole.
    text += &json!({"message":{"role":"user","content":"reordered","timestamp":1},"parentId":parent,"id":"reord001","type":"message","timestamp":"2026-01-01T00:00:02.000Z"}).to_string();
    text += "\n";
    ids.push("reord001".into());
    // Torn before a NUL run, then a whole entry glued behind it.
    let torn = json!({"type":"message","id":"torn0001","parentId":"reord001","timestamp":"t","message":{"role":"user","content":"cut here and more"}}).to_string();
    text += &torn[..torn.len() - 12];
    text += "\0\0\0\0";
    text += &json!({"type":"message","id":"whole001","parentId":"reord001","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"glued","timestamp":1}}).to_string();
    text += "\n";
    ids.push("whole001".into());
    // A torn last line.
    let last = json!({"type":"message","id":"torn0002","parentId":"whole001","timestamp":"t","message":{"role":"user","content":"never ends"}}).to_string();
    text += &last[..last.len() - 3];
    fs::write(&file, &text).unwrap();

    let mut sm = SessionManager::open(&file).unwrap();
    assert!(sm
        .entries()
        .iter()
        .any(|e| matches!(e.kind, EntryKind::Stored(_))));
    let got: Vec<String> = sm.entries().iter().map(|e| e.id.clone()).collect();
    assert_eq!(got, ids, "every whole entry, no torn one");
    assert_eq!(sm.leaf_id(), Some("whole001"));
    assert!(sm.entry("torn0001").is_none() && sm.entry("torn0002").is_none());
    for id in &ids {
        assert_eq!(sm.entry(id).unwrap().id, *id);
    }
    let branch: Vec<String> = sm.branch().iter().map(|e| e.id.clone()).collect();
    assert_eq!(branch, ids, "one chain");
    let ctx = sm.build_session_context();
    let t = texts(&ctx.messages);
    assert_eq!(t.len(), branch.len());
    assert_eq!(t[0], format!("user:q0 {filler}"));
    assert_eq!(t[1], "assistant:a1");
    assert_eq!(t[t.len() - 2..], ["user:reordered", "user:glued"]);
    assert_eq!(
        ctx.model.map(|m| m.model_id).as_deref(),
        Some("fake-gpt-mini")
    );
    let children: Vec<String> = sm
        .children(Some("reord001"))
        .iter()
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(children, ["whole001"]);
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        text,
        "opening writes nothing"
    );

    // The torn bytes stay; the next entry starts on a line of its own.
    sm.append_message(&Message::user_text("next")).unwrap();
    let after = fs::read_to_string(&file).unwrap();
    assert!(after.starts_with(&text));
    let appended: Value = serde_json::from_str(after[text.len()..].trim()).unwrap();
    assert_eq!(appended["parentId"], "whole001");
    let re = SessionManager::open(&file).unwrap();
    assert_eq!(re.entry_count(), ids.len() + 1);
}

/// Issue 15: once flushed, message entries are released to the file; a file deleted under
/// the session is written again whole, and every payload (entries, context, tree, branch)
/// still reads back exactly as appended.
#[test]
fn released_messages_survive_file_rewrite_and_branching() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    let mut appended = Vec::new();
    for i in 0..3 {
        sm.append_message(&Message::user_text(format!("q{i}")))
            .unwrap();
        sm.append_message(&assistant(&format!("a{i}"), StopReason::Stop))
            .unwrap();
    }
    let file = sm.session_file().unwrap().to_path_buf();
    assert!(sm
        .entries()
        .iter()
        .all(|e| matches!(e.kind, EntryKind::Stored(_))));
    appended.extend(sm.loaded_entries());
    fs::remove_file(&file).unwrap();
    sm.append_message(&Message::user_text("after delete"))
        .unwrap();
    let all = sm.loaded_entries();
    assert_eq!(&all[..6], &appended[..]);
    let reopened = SessionManager::open(&file).unwrap();
    assert_eq!(reopened.loaded_entries(), all);
    assert_eq!(reopened.build_context(), sm.build_context());
    assert_eq!(sm.build_context().len(), 7);
    assert_eq!(sm.get_tree(), reopened.get_tree());
    let third = all[2].id.clone();
    sm.create_branched_session(&third).unwrap();
    assert_eq!(sm.loaded_entries(), all[..3].to_vec());
    assert_eq!(sm.build_context().len(), 3);
}

/// `append_entry_as` (an extension's `newSession` setup): the author's id is kept unless it
/// is empty or taken; the entry chains to the leaf; messages round-trip through the file.
#[test]
fn append_entry_as_keeps_the_given_id_unless_taken() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sm = SessionManager::create(tmp.path(), tmp.path());
    let first = sm
        .append_entry_as("abcd1234", EntryKind::Message(Message::user_text("q")))
        .unwrap();
    assert_eq!(first, "abcd1234");
    let taken = sm
        .append_entry_as(
            "abcd1234",
            EntryKind::Custom {
                custom_type: "c".into(),
                data: None,
            },
        )
        .unwrap();
    assert_ne!(taken, "abcd1234");
    let empty = sm
        .append_entry_as("", EntryKind::Message(assistant("a", StopReason::Stop)))
        .unwrap();
    assert_eq!(empty.len(), 8);
    let entries = sm.entries();
    assert_eq!(entries[1].parent_id.as_deref(), Some("abcd1234"));
    assert_eq!(entries[2].parent_id.as_deref(), Some(taken.as_str()));
    let file = sm.session_file().unwrap().to_path_buf();
    let reopened = SessionManager::open(&file).unwrap();
    let ids: Vec<String> = reopened.entries().iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids, ["abcd1234".to_string(), taken, empty]);
    let context = reopened.build_context();
    assert_eq!(context.len(), 2);
}
