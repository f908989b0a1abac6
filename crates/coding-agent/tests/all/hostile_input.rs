//! Hostile input through the real `pi` binary (issue 28, items 3, 5, 6 and the edit item):
//! `read` of a device, a FIFO and a 2 GB sparse file answers at once with bounded memory;
//! `edit`/`write` refuse a FIFO instead of blocking; `edit` of a file that is not valid UTF-8
//! changes only the edited span; an MCP `tools/call` result of the wrong shape is an error
//! result; a command line serde cannot parse but V8 can keeps its `id` in the `parse` error.

use crate::common::*;
use crate::mcp::{fake_mcp, prompt, text_of, tool_end, tool_end_of, write_mcp};
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::path::Path;

/// The `tool_execution_end` of the tool call with id `call_fake_1_<n>`.
fn end_of(events: &[Value], n: usize) -> Value {
    tool_end(events, n)
}

#[test]
fn read_of_a_symlink_to_dev_zero_is_refused_before_reading() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("read", json!({"path": "zero"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    std::os::unix::fs::symlink("/dev/zero", root.cwd.join("zero")).unwrap();
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    let end = end_of(&events, 0);
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(
        text_of(&end["result"]),
        "Cannot read zero: it is a character device, not a regular file"
    );
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

/// No writer ever opens the FIFO: a tool that opened it would block, and the prompt would not
/// settle within [`LIVENESS`] (`prompt` panics then).
#[test]
fn read_edit_write_and_grep_of_a_fifo_answer_without_opening_it() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("")
                .with_tool_call("read", json!({"path": "pipe"}))
                .with_tool_call(
                    "edit",
                    json!({"path": "pipe", "edits": [{"oldText": "a", "newText": "b"}]}),
                )
                .with_tool_call("write", json!({"path": "pipe", "content": "x"}))
                .with_tool_call("grep", json!({"pattern": "x", "path": "pipe"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    mkfifo(&root.cwd.join("pipe"));
    let mut agent = root.spawn_with(false, &["--tools", "read,edit,write,grep"]);
    let events = prompt(&mut agent, "go");
    let texts: Vec<(Value, String)> = (0..4)
        .map(|n| {
            let end = end_of(&events, n);
            (end["isError"].clone(), text_of(&end["result"]))
        })
        .collect();
    let fifo = "it is a FIFO (named pipe), not a regular file";
    assert_eq!(texts[0], (json!(true), format!("Cannot read pipe: {fifo}")));
    assert_eq!(
        texts[1],
        (
            json!(true),
            "Could not edit file: pipe. It is a FIFO (named pipe), not a regular file.".into()
        )
    );
    assert_eq!(
        texts[2],
        (json!(true), format!("Cannot write pipe: {fifo}"))
    );
    assert_eq!(
        texts[3],
        (
            json!(true),
            format!("Cannot search {}: {fifo}", root.cwd.join("pipe").display())
        )
    );
}

/// Peak resident set of process `pid` in KiB (`VmHWM` of /proc/<pid>/status).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

/// A 2 GiB file, sparse after six short lines (one 2 GiB line of NULs follows), read with
/// `limit: 5`: the answer is the five lines and the count of the rest, and pi's peak RSS stays
/// far below the file's size (a memory bound, not a timing).
#[test]
fn read_of_a_2gb_sparse_file_with_a_limit_keeps_memory_bounded() {
    const SIZE: u64 = 2 << 30;
    let (_fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("read", json!({"path": "huge.bin", "limit": 5})),
            Turn::text("").with_tool_call("read", json!({"path": "huge.bin", "offset": 7})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    let path = root.cwd.join("huge.bin");
    std::fs::write(&path, "l1\nl2\nl3\nl4\nl5\nl6\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(SIZE)
        .unwrap();
    let mut agent = root.spawn();
    // Each read streams the whole 2 GiB to count its lines: about 25 s for both on 2 idle
    // cores, more under load, so the run gets longer than the usual liveness bound.
    let from = agent.len();
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let (end, _) = agent.wait_from(from, std::time::Duration::from_secs(180), |v| {
        kind(v) == "agent_settled"
    });
    let events = agent.events()[..=end].to_vec();
    let peak = peak_rss_kib(agent.pid());
    let first = tool_end_of(&events, 1, 0);
    assert_eq!(first["isError"], false, "{first}");
    assert_eq!(
        text_of(&first["result"]),
        "l1\nl2\nl3\nl4\nl5\n\n[2 more lines in file. Use offset=6 to continue.]"
    );
    // Line 7 is the 2 GiB run of NULs: too long to show, its size counted while streaming.
    let second = tool_end_of(&events, 2, 0);
    let line = SIZE as usize - 18;
    assert_eq!(
        text_of(&second["result"]),
        format!(
            "[Line 7 is {:.1}MB, exceeds 50.0KB limit. Use bash: sed -n '7p' huge.bin | head -c 51200]",
            line as f64 / (1024.0 * 1024.0)
        )
    );
    assert_eq!(
        second["result"]["details"]["truncation"]["totalBytes"],
        json!(line)
    );
    eprintln!(
        "pi peak RSS {peak} KiB after reading the 2 GiB file (reads took {} ms and {} ms)",
        first["durationMs"], second["durationMs"]
    );
    assert!(
        peak < 200 * 1024,
        "pi's peak RSS grew to {peak} KiB reading a 2 GiB file"
    );
}

/// Invalid UTF-8 outside the edited span (and a CRLF file, which takes the splice path) keeps
/// its bytes: only the replaced text changes.
#[test]
fn edit_of_a_file_with_invalid_utf8_keeps_every_other_byte() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("")
                .with_tool_call(
                    "edit",
                    json!({"path": "lf.bin", "edits": [{"oldText": "change me", "newText": "changed"}]}),
                )
                .with_tool_call(
                    "edit",
                    json!({"path": "crlf.bin", "edits": [{"oldText": "change me", "newText": "changed\nnow"}]}),
                ),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    let lf: &[u8] = b"head \xff\xfe junk\nkeep \xc3 line\nchange me\ntail \xe2\x82\n\x80";
    let crlf: &[u8] = b"a\xff\r\nchange me\r\nz\xf0\x9f\r\n";
    std::fs::write(root.cwd.join("lf.bin"), lf).unwrap();
    std::fs::write(root.cwd.join("crlf.bin"), crlf).unwrap();
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    for n in 0..2 {
        let end = end_of(&events, n);
        assert_eq!(end["isError"], false, "{end}");
    }
    let lf_after = std::fs::read(root.cwd.join("lf.bin")).unwrap();
    let lf_expected: &[u8] = b"head \xff\xfe junk\nkeep \xc3 line\nchanged\ntail \xe2\x82\n\x80";
    assert_eq!(lf_after, lf_expected);
    let crlf_after = std::fs::read(root.cwd.join("crlf.bin")).unwrap();
    let crlf_expected: &[u8] = b"a\xff\r\nchanged\r\nnow\r\nz\xf0\x9f\r\n";
    assert_eq!(crlf_after, crlf_expected);
}

/// `fake-mcp --malformed` answers `tools/call` with a scalar, a string `content`, a null
/// `content` and an array: each is upstream's `Invalid MCP tools/call result` error result;
/// a well-formed answer from the same server still goes through.
#[test]
fn mcp_tools_call_results_of_the_wrong_shape_are_error_results() {
    let tools = ["scalar", "text_content", "null_content", "array", "ok"];
    let mut turn = Turn::text("");
    for t in tools {
        turn = turn.with_tool_call(format!("mcp__bad__{t}"), json!({}));
    }
    let (_fake, root) = setup(Script::new([turn, Turn::text("done")]), DEFAULT_MODEL);
    write_mcp(
        &root,
        json!({"bad": {"command": fake_mcp(), "args": ["--malformed"], "exposure": "direct"}}),
    );
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    for (n, t) in tools.iter().enumerate() {
        let end = end_of(&events, n);
        if *t == "ok" {
            assert_eq!(end["isError"], false, "{end}");
            assert_eq!(text_of(&end["result"]), "fine");
        } else {
            assert_eq!(end["isError"], true, "{t}: {end}");
            assert_eq!(
                text_of(&end["result"]),
                "MCP server \"bad\": Invalid MCP tools/call result",
                "{t}"
            );
        }
    }
}

/// Lines V8 parses but serde cannot: a number out of range, nesting past the limit. The
/// `parse` error carries the line's top-level `id` (wherever it stands); a line that is not
/// JSON at all still has none (golden `malformed_json`).
#[test]
fn parse_errors_keep_the_id_of_a_line_v8_would_parse() {
    let (_fake, root) = setup(Script::new(vec![]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    let deep = format!(
        "{{\"id\":\"deep\",\"type\":\"get_state\",\"x\":{}{}}}\n",
        "[".repeat(1500),
        "]".repeat(1500)
    );
    let lines = [
        (
            "big",
            "{\"id\":\"big\",\"type\":\"get_state\",\"n\":1e400}\n".to_string(),
        ),
        ("deep", deep),
        (
            "late",
            "{\"type\":\"get_state\",\"n\":-1e400,\"s\":\"}\\\"{\",\"id\":\"late\"}\n".to_string(),
        ),
    ];
    for (id, line) in &lines {
        let from = agent.len();
        agent.send_raw(line.as_bytes());
        let (_, resp) = agent.wait_from(from, LIVENESS, |v| kind(v) == "response");
        assert_eq!(resp["id"], *id, "{resp}");
        assert_eq!(resp["command"], "parse", "{resp}");
        assert_eq!(resp["success"], false, "{resp}");
        assert!(
            resp["error"]
                .as_str()
                .unwrap()
                .starts_with("Failed to parse command: "),
            "{resp}"
        );
    }
    let from = agent.len();
    agent.send_raw(b"{\"id\":\"syntax\",\"type\":\"get_state\",}\n");
    let (_, resp) = agent.wait_from(from, LIVENESS, |v| kind(v) == "response");
    assert!(resp.get("id").is_none(), "{resp}");
    // Still serving.
    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["success"], true, "{state}");
}

/// A session whose entries form one parent chain 100,000 deep (a long linear session): its
/// `get_tree` response is the whole chain, nested, and pi keeps serving. The tree used to be
/// serialized and dropped recursively, which overflowed the stack and aborted pi (SIGABRT, no
/// response; upstream 1.6 answers `Maximum call stack size exceeded`). The response is checked
/// on the raw line: it nests deeper than any recursive JSON decoder (the harness's included)
/// goes, so it is scanned with a bracket counter instead of being decoded.
#[test]
fn get_tree_of_a_100k_deep_chain_answers_and_pi_keeps_serving() {
    use std::io::{BufRead, Write};
    const DEPTH: usize = 100_000;
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let ts = "2026-03-14T09:05:12.345Z";
    let mut text = json!({"type": "session", "version": 3, "id": "deep-session", "timestamp": ts,
        "cwd": root.cwd.to_string_lossy()})
    .to_string()
        + "\n";
    for i in 0..DEPTH {
        let parent = if i == 0 {
            Value::Null
        } else {
            json!(format!("d{:07x}", i - 1))
        };
        let entry = json!({"type": "message", "id": format!("d{i:07x}"), "parentId": parent,
            "timestamp": ts, "message": {"role": "user", "content": [{"type": "text", "text": "m"}],
            "timestamp": 1}});
        text.push_str(&entry.to_string());
        text.push('\n');
    }
    let file = root.path().join("deep.jsonl");
    std::fs::write(&file, &text).unwrap();
    let bin = std::env::var_os("PI_TEST_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_pi")));
    let mut child = std::process::Command::new(bin)
        .args(["--mode", "rpc", "--session"])
        .arg(&file)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"id\":\"t\",\"type\":\"get_tree\"}\n{\"id\":\"s\",\"type\":\"get_state\"}\n")
        .unwrap();
    drop(stdin);
    let lines: Vec<String> = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(Result::unwrap)
        .collect();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status}; stderr: {stderr}");
    let tree = lines
        .iter()
        .find(|l| l.contains("\"command\":\"get_tree\""))
        .unwrap_or_else(|| panic!("no get_tree response; stderr: {stderr}"));
    assert!(
        tree.contains("\"success\":true"),
        "{}",
        &tree[..200.min(tree.len())]
    );
    // Every entry once, in chain order, each one level deeper than its parent.
    let (mut depth, mut max_depth, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in tree.bytes() {
        match (in_string, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_string = false,
            (false, _, b'"') => in_string = true,
            (false, _, b'[' | b'{') => {
                depth += 1;
                max_depth = max_depth.max(depth);
            }
            (false, _, b']' | b'}') => depth -= 1,
            _ => {}
        }
    }
    assert_eq!(depth, 0, "unbalanced");
    // response → data → tree [ → per node: { and its children [ (the entry's own objects nest
    // beside, not below, the next node).
    assert!(max_depth >= 2 * DEPTH, "max depth {max_depth}");
    let mut at = 0;
    for i in [0, 1, DEPTH / 2, DEPTH - 1] {
        let id = format!("\"id\":\"d{i:07x}\"");
        let found = tree[at..]
            .find(&id)
            .unwrap_or_else(|| panic!("{id} missing or out of order"));
        at += found;
    }
    // The chain, plus the `thinking_level_change` that resuming a session without one appends
    // (sessions.md §9.2) as the child of its last entry.
    assert_eq!(tree.matches("\"children\":[").count(), DEPTH + 1);
    let state: Value = serde_json::from_str(
        lines
            .iter()
            .find(|l| l.contains("\"command\":\"get_state\""))
            .expect("pi stopped serving after get_tree"),
    )
    .unwrap();
    assert_eq!(state["success"], true, "{state}");
}
