//! Print mode (`pi -p`) through the real `pi` binary against the fake provider: a final reply
//! cut at the output token limit prints its text on stdout, upstream 1.6's truncation line on
//! stderr and exits 1 (what upstream's `print-mode.js` is written to do; 1.6 itself prints
//! nothing and exits 0 because the cut reply is hidden from the context first); a normal reply
//! exits 0 with no such line; `--mode json` is unchanged.

use crate::common::*;
use pi_fakellm::{Script, Turn, Usage};
use serde_json::{json, Value};
use std::process::{Command, Stdio};

/// Upstream 1.6 `dist/modes/print-mode.js`, verbatim.
const TRUNCATED: &str = "Response was truncated: the model reached its output token limit.";

/// `pi <args>` with stdin closed: (exit code, stdout, stderr).
fn one_shot(root: &RunRoot, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(args)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A reply cut at the limit: `finish_reason: "length"` (OpenAI) or `stop_reason: "max_tokens"`
/// (Anthropic) with every output token of the model's `maxTokens` used, so it is no overflow
/// that compaction could recover.
fn cut(text: &str, max_tokens: u64) -> Turn {
    Turn::text(text)
        .stop_reason("length")
        .usage(Usage::new(100, max_tokens))
}

#[test]
fn a_reply_cut_at_the_output_limit_prints_its_text_the_truncation_line_and_exits_1() {
    // fake-gpt-mini: maxTokens 4096, OpenAI completions (`finish_reason: "length"`).
    let (fake, root) = setup(
        Script::new(vec![cut("the first half of the answer", 4096)]),
        DEFAULT_MODEL,
    );
    let (code, stdout, stderr) = one_shot(&root, &["--no-session", "-p", "tell me"]);
    assert_eq!(code, Some(1), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout, "the first half of the answer\n", "stderr: {stderr}");
    assert_eq!(
        stderr.lines().filter(|l| *l == TRUNCATED).count(),
        1,
        "stderr: {stderr}"
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1, "the cut reply is not retried");
}

#[test]
fn an_anthropic_max_tokens_stop_after_an_earlier_answer_prints_the_cut_reply_not_the_earlier_one() {
    // fake-claude-haiku: maxTokens 8192, Anthropic messages (`stop_reason: "max_tokens"`).
    let (_fake, root) = setup(
        Script::new(vec![
            Turn::text("first answer"),
            cut("cut second answer", 8192),
        ]),
        "fake-anthropic/fake-claude-haiku",
    );
    let (code, stdout, stderr) = one_shot(&root, &["--no-session", "-p", "one", "two"]);
    assert_eq!(code, Some(1), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout, "cut second answer\n", "stderr: {stderr}");
    assert!(stderr.lines().any(|l| l == TRUNCATED), "stderr: {stderr}");
}

#[test]
fn a_cut_reply_with_auto_compaction_off_is_answered_the_same() {
    // Below maxTokens, so with compaction on it would be recovered; off, it stays the answer.
    let (_fake, root) = setup(Script::new(vec![cut("short cut", 10)]), DEFAULT_MODEL);
    root.merge_settings(json!({"compaction": {"enabled": false}}));
    let (code, stdout, stderr) = one_shot(&root, &["--no-session", "-p", "q"]);
    assert_eq!(code, Some(1), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout, "short cut\n");
    assert!(stderr.lines().any(|l| l == TRUNCATED), "stderr: {stderr}");
}

#[test]
fn a_normal_reply_exits_0_without_the_truncation_line() {
    let (_fake, root) = setup(Script::new(vec![Turn::text("whole answer")]), DEFAULT_MODEL);
    let (code, stdout, stderr) = one_shot(&root, &["--no-session", "-p", "tell me"]);
    assert_eq!(code, Some(0), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout, "whole answer\n");
    assert!(!stderr.contains("truncated"), "stderr: {stderr}");
}

#[test]
fn json_mode_shows_the_cut_reply_in_its_events_and_exits_0_as_before() {
    let (_fake, root) = setup(Script::new(vec![cut("cut in json", 4096)]), DEFAULT_MODEL);
    let (code, stdout, stderr) = one_shot(&root, &["--no-session", "--mode", "json", "q"]);
    assert_eq!(code, Some(0), "stderr: {stderr}");
    assert!(!stderr.contains(TRUNCATED), "stderr: {stderr}");
    let ends: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
        .collect();
    assert_eq!(ends.len(), 1, "{stdout}");
    assert_eq!(ends[0]["message"]["stopReason"], "length");
    assert_eq!(ends[0]["message"]["content"][0]["text"], "cut in json");
}
