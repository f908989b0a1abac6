//! Bash tool and user shell executor: result shapes, streaming, truncation with the full-output
//! temp file, and killing the whole process group on abort and timeout.

use crate::tools_common::*;
use pi_coding_agent::tools::{execute_user_bash, UserBashOptions};
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Whether `pid` is a live (non-zombie) process.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or("");
            state != "Z" && state != "X"
        }
    }
}

fn read_pids(dir: &Path, names: &[&str]) -> Vec<i32> {
    names
        .iter()
        .map(|n| {
            std::fs::read_to_string(dir.join(n))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect()
}

async fn wait_for_files(dir: &Path, names: &[&str]) {
    for _ in 0..200 {
        if names.iter().all(|n| {
            std::fs::read_to_string(dir.join(n)).is_ok_and(|s| s.trim().parse::<i32>().is_ok())
        }) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("pid files never appeared");
}

async fn assert_all_dead(pids: &[i32]) {
    for _ in 0..100 {
        if pids.iter().all(|p| !alive(*p)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("processes still alive: {pids:?}");
}

/// Spawns a subshell and two `sleep` grandchildren, recording their pids.
const TREE: &str = "(sleep 300 & echo $! > g1.pid; sleep 300 & echo $! > g2.pid; wait) & \
                    echo $! > sub.pid; echo started; wait";

#[tokio::test]
async fn echo_matches_golden_shape() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    let (c, updates) = ctx();
    let out = t.execute(c, json!({"command":"echo hi"})).await.unwrap();
    let mut v = serde_json::to_value(&out).unwrap();
    assert!(v["structuredContent"]["wall_time_seconds"].is_number());
    v["structuredContent"]["wall_time_seconds"] = json!("<dur>");
    assert_eq!(
        v,
        json!({"content":[{"type":"text","text":"hi\n"}],
               "structuredContent":{"exit_code":0,"output":"hi\n","truncated":false,"wall_time_seconds":"<dur>"}})
    );
    let updates = updates.lock().unwrap();
    let last = serde_json::to_value(updates.last().unwrap()).unwrap();
    assert_eq!(
        last,
        json!({"content":[{"type":"text","text":"hi\n"}],"details":{}})
    );
}

#[tokio::test]
async fn nonzero_exit_is_error_result() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    let out = run(&*t, json!({"command":"echo out; echo oops >&2; exit 2"}))
        .await
        .unwrap();
    assert_eq!(text(&out), "out\noops\n\n\nCommand exited with code 2");
    assert_eq!(out.is_error, Some(true));
    let sc = out.structured_content.unwrap();
    assert_eq!(sc["exit_code"], 2);
    assert_eq!(sc["output"], "out\noops\n");
    assert!(out.details.is_none());
}

#[tokio::test]
async fn empty_output_and_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    let out = run(&*t, json!({"command":"true"})).await.unwrap();
    assert_eq!(text(&out), "(no output)");
    let out = run(&*t, json!({"command":"pwd"})).await.unwrap();
    assert_eq!(
        text(&out).trim_end(),
        dir.path().canonicalize().unwrap().to_string_lossy()
    );
}

#[tokio::test]
async fn truncation_writes_full_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    let out = run(&*t, json!({"command":"seq 1 3000"})).await.unwrap();
    let body = text(&out);
    assert!(body.starts_with("1001\n1002\n"), "{}", &body[..20]);
    let details = out.details.clone().unwrap();
    let path = details["fullOutputPath"].as_str().unwrap().to_string();
    assert!(body.ends_with(&format!(
        "3000\n\n[Showing lines 1001-3000 of 3000. Full output: {path}]"
    )));
    assert!(Path::new(&path)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("pi-bash-"));
    let full = std::fs::read_to_string(&path).unwrap();
    let expected: String = (1..=3000).map(|i| format!("{i}\n")).collect();
    assert_eq!(full, expected);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(details["truncation"]["truncatedBy"], "lines");
    assert_eq!(details["truncation"]["totalLines"], 3000);
    assert_eq!(out.structured_content.unwrap()["truncated"], true);
    std::fs::remove_file(&path).ok();
}

#[tokio::test]
async fn byte_truncation_notice() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    // 100 lines of 1000 bytes: over 50KB but under 2000 lines.
    let out = run(
        &*t,
        json!({"command":"for i in $(seq 1 100); do printf '%01000d\\n' $i; done"}),
    )
    .await
    .unwrap();
    let body = text(&out);
    let path = out.details.as_ref().unwrap()["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        body.ends_with(&format!(
            "\n\n[Showing lines 50-100 of 100 (50.0KB limit). Full output: {path}]"
        )),
        "{}",
        &body[body.len() - 120..]
    );
    std::fs::remove_file(&path).ok();
}

#[tokio::test]
async fn abort_kills_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    let cancel = CancellationToken::new();
    let (c, _) = ctx_with(cancel.clone());
    let handle = tokio::spawn(async move { t.execute(c, json!({"command": TREE})).await });
    wait_for_files(dir.path(), &["g1.pid", "g2.pid", "sub.pid"]).await;
    let pids = read_pids(dir.path(), &["g1.pid", "g2.pid", "sub.pid"]);
    assert!(pids.iter().all(|p| alive(*p)));
    cancel.cancel();
    let res = tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("tool returned promptly")
        .unwrap();
    assert_eq!(res.unwrap_err().to_string(), "started\n\n\nCommand aborted");
    assert_all_dead(&pids).await;
}

#[tokio::test]
async fn timeout_kills_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    let started = std::time::Instant::now();
    let err = run(&*t, json!({"command": TREE, "timeout": 1}))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err, "started\n\n\nCommand timed out after 1 seconds");
    let pids = read_pids(dir.path(), &["g1.pid", "g2.pid", "sub.pid"]);
    assert_all_dead(&pids).await;
}

#[tokio::test]
async fn invalid_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    let err = run(&*t, json!({"command":"true","timeout":0}))
        .await
        .unwrap_err();
    assert_eq!(err, "Invalid timeout: must be a finite number of seconds");
    let err = run(&*t, json!({"command":"true","timeout":3000000}))
        .await
        .unwrap_err();
    assert_eq!(err, "Invalid timeout: maximum is 2147483.647 seconds");
}

#[tokio::test]
async fn already_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    let cancel = CancellationToken::new();
    cancel.cancel();
    let (c, _) = ctx_with(cancel);
    let err = t
        .execute(c, json!({"command":"echo never"}))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Command aborted");
}

#[tokio::test]
async fn user_bash_streams_sanitized_deltas_and_truncates() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let mut deltas = String::new();
    let mut on_chunk = |d: &str| deltas.push_str(d);
    let res = execute_user_bash(
        "printf '\\033[31mred\\033[0m\\r\\n'; echo err >&2; exit 3",
        dir.path(),
        &UserBashOptions::default(),
        &cancel,
        &mut on_chunk,
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::to_value(&res).unwrap(),
        json!({"output":"red\nerr\n","exitCode":3,"cancelled":false,"truncated":false})
    );
    assert_eq!(deltas, "red\nerr\n");

    let mut deltas = String::new();
    let mut on_chunk = |d: &str| deltas.push_str(d);
    let res = execute_user_bash(
        "seq 1 3000",
        dir.path(),
        &UserBashOptions::default(),
        &cancel,
        &mut on_chunk,
    )
    .await
    .unwrap();
    assert!(res.truncated);
    assert!(res.output.starts_with("1001\n"));
    assert!(res.output.ends_with("\n3000"));
    let path = res.full_output_path.unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), deltas);
    std::fs::remove_file(&path).ok();
}

#[tokio::test]
async fn user_bash_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c2.cancel();
    });
    let mut on_chunk = |_: &str| {};
    let res = execute_user_bash(
        "echo start; sleep 5; echo never",
        dir.path(),
        &UserBashOptions::default(),
        &cancel,
        &mut on_chunk,
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::to_value(&res).unwrap(),
        json!({"output":"start\n","cancelled":true,"truncated":false})
    );
}

/// stdout and stderr share one pipe, so interleaved writes keep their order.
#[tokio::test]
async fn stdout_and_stderr_keep_their_interleaved_order() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut chunks = String::new();
    let mut on_chunk = |c: &str| chunks.push_str(c);
    let result = pi_coding_agent::tools::shell::execute_user_bash(
        "for i in 1 2 3 4 5; do echo o$i; echo e$i >&2; done",
        dir.path(),
        &Default::default(),
        &cancel,
        &mut on_chunk,
    )
    .await
    .unwrap();
    let expected = "o1\ne1\no2\ne2\no3\ne3\no4\ne4\no5\ne5\n";
    assert_eq!(result.output, expected);
    assert_eq!(chunks, expected);
}

/// Leaves a `nohup` child and one that ignores SIGTERM behind, and a `setsid` daemon (waited
/// for until it has left the group: one still on its way out is ended like any other).
const LEAVES_CHILDREN: &str = "nohup sleep 6011 >/dev/null 2>&1 & echo $! > bg.pid; \
     (trap '' TERM; exec sleep 6012) >/dev/null 2>&1 & echo $! > stubborn.pid; \
     setsid sleep 6013 >/dev/null 2>&1 & d=$!; echo $d > daemon.pid; \
     until [ \"$(cut -d' ' -f5 /proc/$d/stat)\" = \"$d\" ]; do sleep 0.01; done; echo started";

fn end_daemon(dir: &Path) {
    let daemon = read_pids(dir, &["daemon.pid"])[0];
    assert!(
        alive(daemon),
        "a setsid daemon leaves the group on purpose and lives on"
    );
    // SAFETY: kill(2) of the daemon this test started.
    unsafe { libc::kill(daemon, libc::SIGKILL) };
}

/// Background policy (README): when a command finishes, every process left in its group is
/// ended (SIGTERM, then SIGKILL after a grace period); `setsid` escapes it.
#[tokio::test]
async fn background_children_are_ended_when_the_bash_tool_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    let out = run(&*t, json!({"command": LEAVES_CHILDREN})).await.unwrap();
    assert_eq!(text(&out), "started\n");
    let pids = read_pids(dir.path(), &["bg.pid", "stubborn.pid"]);
    assert_all_dead(&pids).await;
    end_daemon(dir.path());
}

#[tokio::test]
async fn background_children_are_ended_when_a_user_bash_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let mut on_chunk = |_: &str| {};
    let res = execute_user_bash(
        LEAVES_CHILDREN,
        dir.path(),
        &UserBashOptions::default(),
        &cancel,
        &mut on_chunk,
    )
    .await
    .unwrap();
    assert_eq!(res.output, "started\n");
    let pids = read_pids(dir.path(), &["bg.pid", "stubborn.pid"]);
    assert_all_dead(&pids).await;
    end_daemon(dir.path());
}

/// A background child that keeps stdout open no longer holds the command's output hostage,
/// and what it wrote before the shell exited is kept.
#[tokio::test]
async fn a_background_child_holding_the_pipe_is_ended_and_its_output_kept() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), "bash");
    let started = std::time::Instant::now();
    let out = run(
        &*t,
        json!({"command": "(echo from-child; sleep 6014) & echo $! > bg.pid; sleep 0.2; echo done"}),
    )
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(text(&out), "from-child\ndone\n");
    assert_all_dead(&read_pids(dir.path(), &["bg.pid"])).await;
}
