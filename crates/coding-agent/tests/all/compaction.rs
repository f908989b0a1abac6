//! Compaction end to end (issue 9 part B): the real `pi` binary against the fake LLM. Manual
//! `compact`, "Nothing to compact", threshold compaction, overflow recovery with a retry, the
//! bounds (a second overflow, a summary that does not shrink the context), summary retries,
//! `abort` during a compaction and the summary call's cost in `get_session_stats`.

use crate::common::*;
use pi_fakellm::{Script, Turn, Usage};
use serde_json::{json, Value};
use std::time::Duration;

const SUMMARY_MATCH: &str = "<conversation>";

fn summary_turn(text: &str) -> Turn {
    Turn::text(text)
        .usage(Usage::new(800, 40))
        .matching(SUMMARY_MATCH)
}

fn overflow_turn() -> Turn {
    Turn::error(400).error_body(
        400,
        json!({"error": {"message": "This model's maximum context length is 32000 tokens. However, your messages resulted in 40000 tokens. exceeds the context window", "type": "invalid_request_error"}}),
    )
}

fn settled_count(agent: &RpcAgent) -> usize {
    agent
        .events()
        .iter()
        .filter(|v| kind(v) == "agent_settled")
        .count()
}

fn wait_settled_n(agent: &RpcAgent, n: usize) {
    let mut seen = 0;
    agent.wait_from(0, LIVENESS, |v| {
        if kind(v) == "agent_settled" {
            seen += 1;
        }
        seen >= n
    });
}

fn prompt(agent: &mut RpcAgent, id: &str, text: &str, settled_before: usize) {
    agent.send(json!({"id": id, "type": "prompt", "message": text}));
    agent.wait_response(id);
    wait_settled_n(agent, settled_before + 1);
}

fn of_kind(agent: &RpcAgent, k: &str) -> Vec<Value> {
    agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == k)
        .collect()
}

#[test]
fn manual_compact_summarizes_persists_and_feeds_the_next_request() {
    let script = Script::new([
        Turn::text("First answer, about apples.").usage(Usage::new(500, 20)),
        Turn::text("Second answer, about oranges.").usage(Usage::new(600, 25)),
        summary_turn("## Goal\nDiscuss fruit."),
        Turn::text("Answer after compaction.").usage(Usage::new(300, 10)),
    ]);
    let (fake, root) = setup(script, "fake-openai/fake-gpt-mini");
    root.merge_settings(json!({"compaction": {"keepRecentTokens": 10}}));
    let mut agent = root.spawn_with_session();
    prompt(&mut agent, "p1", "Tell me about apples", 0);
    prompt(&mut agent, "p2", "Tell me about oranges", 1);
    agent.send(json!({"id": "c", "type": "compact", "customInstructions": "Keep the fruit names"}));
    let r = agent.wait_response("c");
    assert_eq!(r["success"], true, "{r}");
    let data = &r["data"];
    assert_eq!(data["summary"], "## Goal\nDiscuss fruit.");
    assert_eq!(data["tokensBefore"], 625, "the last reply's usage");
    assert!(data["estimatedTokensAfter"].as_u64().unwrap() > 0);
    assert_eq!(data["usage"]["input"], 800);
    assert_eq!(
        data["details"],
        json!({"readFiles": [], "modifiedFiles": []})
    );
    let start = of_kind(&agent, "compaction_start");
    assert_eq!(
        start,
        vec![json!({"type": "compaction_start", "reason": "manual"})]
    );
    let end = of_kind(&agent, "compaction_end");
    assert_eq!(end[0]["result"], *data);
    assert_eq!(end[0]["aborted"], false);

    // The summary request: our system prompt, no tools, the serialized history and the focus.
    let reqs = fake.llm_requests();
    let sreq = &reqs[2].body;
    assert!(sreq.get("tools").is_none(), "{sreq}");
    let text = sreq["messages"][1]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("<conversation>\n[User]: Tell me about apples\n\n[Assistant]: First answer, about apples.\n</conversation>\n\n"),
        "{text}"
    );
    assert!(text.contains("Keep the fruit names"));
    assert_eq!(sreq["max_completion_tokens"], 4096, "the model's maxTokens");

    // Context after: system, summary, kept user + assistant.
    let m = agent.request(json!({"id": "m", "type": "get_messages"}));
    let roles: Vec<&str> = m["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "compactionSummary", "user", "assistant"]);
    let st = agent.request(json!({"id": "st", "type": "get_session_stats"}));
    assert_eq!(
        st["data"]["tokens"]["input"], 1900,
        "the summary call is counted"
    );
    assert_eq!(st["data"]["contextUsage"]["tokens"], Value::Null);

    prompt(&mut agent, "p3", "And bananas?", 2);
    let reqs = fake.llm_requests();
    let last = &reqs[3].body["messages"];
    let wrapped = last[1]["content"][0]["text"].as_str().unwrap();
    assert!(
        wrapped.contains("\n<summary>\n## Goal\nDiscuss fruit.\n</summary>"),
        "{wrapped}"
    );
    assert_eq!(last[2]["content"][0]["text"], "Tell me about oranges");

    // The entry as upstream writes it.
    agent.close_stdin();
    agent.wait_exit(LIVENESS);
    let lines = check_session_file(&root.session_files()[0]).unwrap();
    let c = lines.iter().find(|l| l["type"] == "compaction").unwrap();
    assert_eq!(c["fromHook"], false);
    assert_eq!(c["tokensBefore"], 625);
    assert_eq!(c["systemMessage"]["role"], "system");
    assert_eq!(c["usage"]["output"], 40);
    let kept = lines
        .iter()
        .find(|l| l["id"] == c["firstKeptEntryId"])
        .unwrap();
    assert_eq!(
        kept["message"]["content"][0]["text"],
        "Tell me about oranges"
    );
}

#[test]
fn compact_on_a_tiny_session_is_refused() {
    let (fake, root) = setup(
        Script::new([Turn::text("Short answer.")]),
        "fake-openai/fake-gpt-mini",
    );
    let mut agent = root.spawn();
    let r = agent.request(json!({"id": "c0", "type": "compact"}));
    assert_eq!(r["error"], "Nothing to compact (session too small)");
    prompt(&mut agent, "p1", "Short question", 0);
    let r = agent.request(json!({"id": "c1", "type": "compact"}));
    assert_eq!(r["error"], "Nothing to compact (session too small)");
    let ends = of_kind(&agent, "compaction_end");
    assert_eq!(
        ends[1]["errorMessage"],
        "Compaction failed: Nothing to compact (session too small)"
    );
    assert_eq!(fake.llm_requests().len(), 1, "no summary request");
}

#[test]
fn threshold_compaction_after_a_big_reply_and_off_switch() {
    let script = Script::new([
        Turn::text("Small answer.").usage(Usage::new(1000, 10)),
        Turn::text("Big answer.").usage(Usage::new(20000, 100)),
        summary_turn("## Goal\nAuto-compacted summary."),
        Turn::text("Big again.").usage(Usage::new(20000, 100)),
    ]);
    let (fake, root) = setup(script, "fake-openai/fake-gpt-mini");
    root.merge_settings(json!({"compaction": {"keepRecentTokens": 10}}));
    let mut agent = root.spawn_with_session();
    prompt(&mut agent, "p1", "Small question", 0);
    prompt(&mut agent, "p2", "Big question", 1);
    let end = of_kind(&agent, "compaction_end");
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["reason"], "threshold");
    assert_eq!(end[0]["result"]["tokensBefore"], 20100);
    assert_eq!(end[0]["willRetry"], false);
    let s = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(s["data"]["isCompacting"], false);
    // Auto-compaction off: the next big reply is left alone.
    agent.request(json!({"id": "off", "type": "set_auto_compaction", "enabled": false}));
    prompt(&mut agent, "p3", "Another big one", 2);
    assert_eq!(of_kind(&agent, "compaction_end").len(), 1);
    assert_eq!(fake.llm_requests().len(), 4);
}

#[test]
fn overflow_is_recovered_once_then_reported() {
    // The first overflow is compacted and retried; the retry overflows again and the run ends
    // with the recovery error instead of compacting again.
    let script = Script::new([
        Turn::text("First answer.").usage(Usage::new(1000, 10)),
        overflow_turn(),
        summary_turn("## Goal\nOverflow summary."),
        Turn::text("## Original Request\nPrefix.").matching("# Conversation"),
        overflow_turn(),
    ])
    .exhausted(Turn::text("(should not be reached)"));
    let (fake, root) = setup(script, "fake-openai/fake-gpt-mini");
    root.merge_settings(
        json!({"compaction": {"keepRecentTokens": 10}, "retry": {"enabled": false}}),
    );
    let mut agent = root.spawn_with_session();
    prompt(&mut agent, "p1", "First question", 0);
    agent.send(json!({"id": "p2", "type": "prompt", "message": "Second question, long enough to exceed keepRecentTokens"}));
    wait_settled_n(&agent, 2);
    agent.wait_quiet(Duration::from_millis(300), LIVENESS);
    let ends = of_kind(&agent, "compaction_end");
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!(ends[0]["reason"], "overflow");
    assert_eq!(ends[0]["willRetry"], true);
    assert_eq!(
        ends[0]["result"]["summary"],
        format!(
            "## Goal\nOverflow summary.{}## Original Request\nPrefix.",
            "\n\n---\n\n**Earlier part of the current turn:**\n\n"
        )
    );
    assert_eq!(
        ends[1]["errorMessage"],
        "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."
    );
    assert_eq!(
        of_kind(&agent, "entry_appended")[0]["entry"]["type"],
        "context_edit"
    );
    assert_eq!(
        settled_count(&agent),
        2,
        "one settle for the whole recovered run"
    );
    assert_eq!(fake.llm_requests().len(), 5);
    let s = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(s["data"]["isStreaming"], false);
}

#[test]
fn a_summary_that_does_not_shrink_the_context_ends_the_run() {
    // A tiny window: the summary alone is over the threshold, so recovery stops after one
    // compaction with an error instead of retrying into the same overflow.
    let huge = "x".repeat(30_000);
    let script = Script::new([
        Turn::text("First answer.").usage(Usage::new(100, 10)),
        overflow_turn(),
        summary_turn(&huge),
        Turn::text("prefix").matching("# Conversation"),
    ])
    .exhausted(Turn::text("(should not be reached)"));
    let (fake, root) = setup(script, "fake-openai/fake-gpt-mini");
    let mut models = models_json(fake.port());
    models["providers"]["fake-openai"]["models"][1]["contextWindow"] = json!(8000);
    root.write_agent_file("models.json", &models);
    root.merge_settings(json!({"compaction": {"keepRecentTokens": 10, "reserveTokens": 1000}, "retry": {"enabled": false}}));
    let mut agent = root.spawn_with_session();
    prompt(&mut agent, "p1", "First question", 0);
    agent.send(json!({"id": "p2", "type": "prompt", "message": "Second question, long enough to exceed keepRecentTokens"}));
    wait_settled_n(&agent, 2);
    agent.wait_quiet(Duration::from_millis(300), LIVENESS);
    let ends = of_kind(&agent, "compaction_end");
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["willRetry"], false);
    let err = ends[0]["errorMessage"].as_str().unwrap();
    assert!(
        err.starts_with("Compaction did not bring the context below"),
        "{err}"
    );
    assert_eq!(
        fake.llm_requests().len(),
        4,
        "no retry after the ineffective compaction"
    );
    let s = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(s["data"]["isStreaming"], false);
}

#[test]
fn summary_request_is_retried_on_a_transient_error() {
    let script = Script::new([
        Turn::text("One.").usage(Usage::new(10, 5)),
        Turn::text("Two.").usage(Usage::new(10, 5)),
        Turn::error(529).matching(SUMMARY_MATCH),
        summary_turn("## Goal\nRetried summary."),
    ]);
    let (_fake, root) = setup(script, "fake-openai/fake-gpt-mini");
    root.merge_settings(
        json!({"compaction": {"keepRecentTokens": 5}, "retry": {"baseDelayMs": 10}}),
    );
    let mut agent = root.spawn();
    prompt(&mut agent, "p1", "q1", 0);
    prompt(&mut agent, "p2", "q2 is a longer question", 1);
    let r = agent.request(json!({"id": "c", "type": "compact"}));
    assert_eq!(r["data"]["summary"], "## Goal\nRetried summary.", "{r}");
    let kinds: Vec<String> = agent
        .events()
        .iter()
        .map(|v| kind(v).to_string())
        .filter(|k| k.starts_with("summarization_retry") || k.starts_with("compaction"))
        .collect();
    assert_eq!(
        kinds,
        [
            "compaction_start",
            "summarization_retry_scheduled",
            "summarization_retry_attempt_start",
            "summarization_retry_finished",
            "compaction_end"
        ]
    );
    let sched = &of_kind(&agent, "summarization_retry_scheduled")[0];
    assert_eq!(sched["attempt"], 1);
    assert_eq!(sched["delayMs"], 10);
}

#[test]
fn abort_during_a_manual_compaction_cancels_it() {
    let script = Script::new([
        Turn::text("One.").usage(Usage::new(10, 5)),
        Turn::text("Two.").usage(Usage::new(10, 5)),
        summary_turn("## Goal\nslow").stall_after(1, 20_000),
    ]);
    let (fake, root) = setup(script, "fake-openai/fake-gpt-mini");
    root.merge_settings(json!({"compaction": {"keepRecentTokens": 1}}));
    let mut agent = root.spawn();
    prompt(&mut agent, "p1", "q1", 0);
    prompt(&mut agent, "p2", "q2", 1);
    agent.send(json!({"id": "c", "type": "compact"}));
    assert!(fake.wait_requests(3, LIVENESS));
    let s = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(s["data"]["isCompacting"], true);
    assert_eq!(s["data"]["isStreaming"], false);
    let refused = agent.request(json!({"id": "px", "type": "prompt", "message": "now"}));
    assert_eq!(refused["success"], false);
    agent.send(json!({"id": "a", "type": "abort"}));
    let r = agent.wait_response("c");
    assert_eq!(r["error"], "Compaction cancelled");
    agent.wait_response("a");
    let end = &of_kind(&agent, "compaction_end")[0];
    assert_eq!(end["aborted"], true);
    assert!(end.get("errorMessage").is_none());
    let s = agent.request(json!({"id": "s2", "type": "get_state"}));
    assert_eq!(s["data"]["isCompacting"], false);
}

#[test]
fn threshold_is_checked_between_turns_of_one_run() {
    let script = Script::new([
        Turn::text("Small answer.").usage(Usage::new(1000, 10)),
        Turn::tool_call("bash", json!({"command": "echo hi"})).usage(Usage::new(20000, 100)),
        summary_turn("## Goal\nMid-run summary."),
        Turn::text("Done after compaction.").usage(Usage::new(500, 10)),
    ]);
    let (fake, root) = setup(script, "fake-openai/fake-gpt-mini");
    root.merge_settings(json!({"compaction": {"keepRecentTokens": 10}}));
    let mut agent = root.spawn_with_session();
    prompt(&mut agent, "p1", "Small question", 0);
    prompt(&mut agent, "p2", "Run a command", 1);
    let kinds: Vec<String> = agent
        .events()
        .iter()
        .map(|v| kind(v).to_string())
        .filter(|k| {
            matches!(
                k.as_str(),
                "tool_execution_end" | "compaction_start" | "compaction_end" | "turn_start"
            )
        })
        .collect();
    let tail: Vec<&str> = kinds
        .iter()
        .rev()
        .take(4)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        [
            "tool_execution_end",
            "compaction_start",
            "compaction_end",
            "turn_start"
        ],
        "{kinds:?}"
    );
    assert_eq!(of_kind(&agent, "compaction_end")[0]["reason"], "threshold");
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 4);
    let last = reqs[3].body_text();
    assert!(last.contains("Mid-run summary."), "{last}");
    assert!(last.contains("echo hi"), "the tool call is kept: {last}");
}
