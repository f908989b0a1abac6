//! `ctx.navigateTree(targetId, options?)` (upstream 1.6 `AgentSession.navigateTree`,
//! docs/extensions.md "ctx.navigateTree", "session_before_tree / session_tree"): a real Node
//! extension's command moves the session leaf; the session file, `get_messages` and the
//! extension's events follow, and `summarize: true` writes a `branch_summary` entry whose text
//! the (fake) model wrote.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};

/// `/nav <id> [summarize]` calls `ctx.navigateTree` and reports the result; the tree events
/// are reported too. `/nav-block on|off` makes `session_before_tree` cancel. `/nav-bg <id>`
/// starts a summarizing navigation and returns before it ends.
const NAV_EXT: &str = r#"
export default function (pi) {
  const say = (ctx, text) => ctx.ui.notify(text, "info");
  pi.on("session_before_tree", (e, ctx) => {
    const p = e.preparation;
    say(ctx, "before " + JSON.stringify({
      target: p.targetId, old: p.oldLeafId, common: p.commonAncestorId,
      n: p.entriesToSummarize.length, wants: p.userWantsSummary, label: p.label ?? null,
      signal: typeof e.signal?.aborted,
    }));
    if (globalThis.blockTree) return { cancel: true };
  });
  pi.on("session_tree", (e, ctx) => say(ctx, "tree " + JSON.stringify({
    newLeaf: e.newLeafId, old: e.oldLeafId, summary: e.summaryEntry ? e.summaryEntry.type : null,
    fromExtension: e.fromExtension ?? null, leaf: ctx.sessionManager.getLeafId(),
  })));
  // Starts a summarizing navigation without awaiting it: the command returns while the
  // branch summary still runs (its result is reported later as "bg ...").
  pi.registerCommand("nav-bg", {
    handler: async (args, ctx) => {
      ctx.navigateTree(args, { summarize: true }).then(
        (r) => say(ctx, "bg " + JSON.stringify(r)),
        (e) => say(ctx, "bg error " + e.message),
      );
    },
  });
  pi.registerCommand("nav-block", { handler: async (args) => { globalThis.blockTree = args === "on"; } });
  pi.registerCommand("nav", {
    handler: async (args, ctx) => {
      const [id, mode] = args.split(" ");
      const opts = mode === "summarize" ? { summarize: true, label: "cp", customInstructions: "Focus on FOCUS-MARK" } : undefined;
      try {
        say(ctx, "nav " + JSON.stringify(await ctx.navigateTree(id, opts)));
      } catch (e) {
        say(ctx, "nav error " + e.message);
      }
    },
  });
}
"#;

fn notify_from(agent: &RpcAgent, from: usize, prefix: &str) -> String {
    let (_, v) = agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"].as_str().is_some_and(|m| m.starts_with(prefix))
    });
    v["message"].as_str().unwrap_or_default().to_string()
}

fn command(agent: &mut RpcAgent, id: &str, text: &str) -> usize {
    let from = agent.len();
    let r = agent.request(json!({"id": id, "type": "prompt", "message": text}));
    assert_eq!(r["data"]["disposition"], "handled", "{}", agent.dump());
    from
}

fn prompt(agent: &mut RpcAgent, id: &str, text: &str) {
    agent.prompt_settled(id, text);
}

/// The ids of the session file's message entries, in file order (`system` messages left out).
fn message_ids(root: &RunRoot) -> Vec<String> {
    file_entries(root)
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] != "system")
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect()
}

/// How many entries lie after `ancestor` on the path to `leaf` (`ancestor` = `None`: all).
fn after(entries: &[Value], leaf: &str, ancestor: Option<&str>) -> usize {
    let mut n = 0;
    let mut at = Some(leaf.to_string());
    while let Some(id) = at {
        if Some(id.as_str()) == ancestor {
            break;
        }
        n += 1;
        let e = entries.iter().find(|e| e["id"] == id.as_str()).unwrap();
        at = e["parentId"].as_str().map(str::to_string);
    }
    n
}

fn leaf(agent: &mut RpcAgent, id: &str) -> String {
    let r = agent.request(json!({"id": id, "type": "get_entries"}));
    r["data"]["leafId"].as_str().unwrap().to_string()
}

/// The session file's entries (header left out).
fn file_entries(root: &RunRoot) -> Vec<Value> {
    let files = root.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    check_session_file(&files[0]).unwrap()[1..].to_vec()
}

/// `role:text` of each context message but the system prompt.
fn roles(agent: &mut RpcAgent, id: &str) -> Vec<String> {
    let r = agent.request(json!({"id": id, "type": "get_messages"}));
    r["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(b) => b.iter().filter_map(|b| b["text"].as_str()).collect(),
                _ => m["summary"].as_str().unwrap_or_default().to_string(),
            };
            format!("{}:{}", m["role"].as_str().unwrap_or_default(), text)
        })
        .collect()
}

#[test]
fn navigate_tree_moves_the_leaf_and_summarizes_the_branch_left() {
    let (fake, root) = setup(
        Script::new([
            Turn::text("one"),
            Turn::text("two"),
            Turn::text("three"),
            Turn::text("SUMMARY-OF-BRANCH"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("nav.js", NAV_EXT);
    let mut agent = root.spawn_with(true, &["-e", "nav.js"]);
    prompt(&mut agent, "p1", "first");
    prompt(&mut agent, "p2", "second");
    let entries = file_entries(&root);
    let ids = message_ids(&root);
    let (u1, a1) = (&ids[0], &ids[1]);
    let old = leaf(&mut agent, "e0");

    // Unknown entry: rejected with upstream's message.
    let from = command(&mut agent, "n0", "/nav nope");
    assert_eq!(
        notify_from(&agent, from, "nav "),
        "nav error Entry nope not found"
    );

    // A cancelling session_before_tree: nothing moves.
    command(&mut agent, "b1", "/nav-block on");
    let from = command(&mut agent, "n1", &format!("/nav {a1}"));
    assert_eq!(
        notify_from(&agent, from, "nav "),
        "nav {\"cancelled\":true}"
    );
    command(&mut agent, "b2", "/nav-block off");
    assert_eq!(leaf(&mut agent, "e1"), old, "{}", agent.dump());

    // To an assistant message, no summary: it becomes the leaf.
    let from = command(&mut agent, "n2", &format!("/nav {a1}"));
    let before: Value =
        serde_json::from_str(notify_from(&agent, from, "before ").trim_start_matches("before "))
            .unwrap();
    assert_eq!(
        before,
        json!({"target": a1, "old": old, "common": a1, "n": after(&entries, &old, Some(a1)), "wants": false, "label": null, "signal": "boolean"})
    );
    let tree: Value =
        serde_json::from_str(notify_from(&agent, from, "tree ").trim_start_matches("tree "))
            .unwrap();
    assert_eq!(
        tree,
        json!({"newLeaf": a1, "old": old, "summary": null, "fromExtension": null, "leaf": a1})
    );
    assert_eq!(
        notify_from(&agent, from, "nav "),
        "nav {\"cancelled\":false}"
    );
    assert_eq!(roles(&mut agent, "m1"), ["user:first", "assistant:one"]);

    // The next prompt branches from there: its entry's parent is the new leaf.
    prompt(&mut agent, "p3", "third");
    let entries = file_entries(&root);
    let third = entries
        .iter()
        .find(|e| e["type"] == "message" && e["message"]["content"][0]["text"] == "third")
        .unwrap_or_else(|| panic!("{entries:?}"));
    assert_eq!(third["parentId"], json!(a1));
    assert_eq!(
        roles(&mut agent, "m2"),
        [
            "user:first",
            "assistant:one",
            "user:third",
            "assistant:three"
        ]
    );
    let requests_before = fake.llm_requests().len();
    let old = leaf(&mut agent, "e3");
    let u1_parent = entries.iter().find(|e| e["id"] == u1.as_str()).unwrap()["parentId"].clone();

    // To the first user message with summarize: the leaf goes to its parent (the root), a
    // branch_summary of the branch left is written there, labelled, and is the context.
    let from = command(&mut agent, "n3", &format!("/nav {u1} summarize"));
    let before: Value =
        serde_json::from_str(notify_from(&agent, from, "before ").trim_start_matches("before "))
            .unwrap();
    assert_eq!(before["wants"], true);
    assert_eq!(before["label"], "cp");
    assert_eq!(before["common"], json!(u1), "{before}");
    assert_eq!(before["n"], after(&entries, &old, Some(u1)), "{before}");
    let tree: Value =
        serde_json::from_str(notify_from(&agent, from, "tree ").trim_start_matches("tree "))
            .unwrap();
    assert_eq!(tree["summary"], "branch_summary", "{tree}");
    assert_eq!(tree["fromExtension"], false, "{tree}");
    assert_eq!(
        notify_from(&agent, from, "nav "),
        "nav {\"cancelled\":false}"
    );

    // The summary request: one more model call, with the branch serialized and the focus.
    let requests = fake.llm_requests();
    assert_eq!(requests.len(), requests_before + 1);
    let body = requests.last().unwrap().body_text();
    assert!(body.contains("<conversation>"), "{body}");
    assert!(body.contains("third"), "{body}");
    assert!(
        body.contains("Additional focus: Focus on FOCUS-MARK"),
        "{body}"
    );

    let entries = file_entries(&root);
    let summary = entries
        .iter()
        .find(|e| e["type"] == "branch_summary")
        .unwrap_or_else(|| panic!("{entries:?}"));
    assert_eq!(summary["parentId"], u1_parent);
    assert_eq!(summary["fromId"], json!(old));
    assert_eq!(summary["fromHook"], false);
    let text = summary["summary"].as_str().unwrap();
    assert!(
        text.starts_with("The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\nSUMMARY-OF-BRANCH"),
        "{text}"
    );
    let label = entries.last().unwrap();
    assert_eq!(label["type"], "label");
    assert_eq!(label["targetId"], summary["id"]);
    assert_eq!(label["label"], "cp");
    let r = agent.request(json!({"id": "e2", "type": "get_entries"}));
    assert_eq!(r["data"]["leafId"], label["id"]);
    let msgs = roles(&mut agent, "m3");
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(
        msgs[0].starts_with("branchSummary:The user explored"),
        "{msgs:?}"
    );

    agent.close_stdin();
    assert!(agent.wait_exit(LIVENESS).is_some_and(|s| s.success()));
}

/// While a navigation's branch summary runs (upstream 1.6 keeps `_branchSummaryAbortController`
/// on the session; the fake model is slow to answer the summary request, and the command that
/// started the navigation has returned): `get_state.isCompacting` is true, a prompt is refused
/// with upstream's text, a second navigation is refused with upstream's text, and `abort`
/// cancels the summary (the navigation reports `cancelled`, the leaf stays, no summary is
/// written); afterwards prompts are admitted again.
#[test]
fn a_branch_summary_in_progress_refuses_prompts_and_navigations_and_abort_cancels_it() {
    let (fake, root) = setup(
        Script::new([
            Turn::text("one"),
            Turn::text("two"),
            Turn::text("SLOW-SUMMARY").delay_ms(5000),
            Turn::text("after"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("nav.js", NAV_EXT);
    let mut agent = root.spawn_with(true, &["-e", "nav.js"]);
    prompt(&mut agent, "p1", "first");
    prompt(&mut agent, "p2", "second");
    let ids = message_ids(&root);
    let (u1, a1) = (&ids[0], &ids[1]);
    let old = leaf(&mut agent, "e0");
    let requests_before = fake.llm_requests().len();

    let from = command(&mut agent, "n1", &format!("/nav-bg {u1}"));
    notify_from(&agent, from, "before ");
    // The summary request has reached the (slow) model.
    let deadline = std::time::Instant::now() + LIVENESS;
    while fake.llm_requests().len() == requests_before {
        assert!(std::time::Instant::now() < deadline, "{}", agent.dump());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    let r = agent.request(json!({"id": "s1", "type": "get_state"}));
    assert_eq!(r["data"]["isCompacting"], true, "{}", agent.dump());
    let r = agent.request(json!({"id": "p3", "type": "prompt", "message": "during"}));
    assert_eq!(r["success"], false, "{}", agent.dump());
    assert_eq!(
        r["error"],
        "Cannot submit a prompt while compaction is in progress. Wait for compaction to finish and retry.",
        "{}",
        agent.dump()
    );
    let from2 = command(&mut agent, "n2", &format!("/nav {a1}"));
    assert_eq!(
        notify_from(&agent, from2, "nav "),
        "nav error Wait for the current compaction or tree navigation to finish before navigating the session tree."
    );

    let r = agent.request(json!({"id": "a1", "type": "abort"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    assert_eq!(notify_from(&agent, from, "bg "), "bg {\"cancelled\":true}");
    assert_eq!(leaf(&mut agent, "e1"), old, "{}", agent.dump());
    assert!(
        file_entries(&root)
            .iter()
            .all(|e| e["type"] != "branch_summary"),
        "{}",
        agent.dump()
    );
    let r = agent.request(json!({"id": "s2", "type": "get_state"}));
    assert_eq!(r["data"]["isCompacting"], false, "{}", agent.dump());

    // Settled: prompts are admitted again.
    prompt(&mut agent, "p4", "later");
    assert_eq!(
        roles(&mut agent, "m1"),
        [
            "user:first",
            "assistant:one",
            "user:second",
            "assistant:two",
            "user:later",
            "assistant:after"
        ]
    );
    agent.close_stdin();
    assert!(agent.wait_exit(LIVENESS).is_some_and(|s| s.success()));
}
