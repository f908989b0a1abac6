//! The kernel sandbox of the bash tool (issue 26): real shells under Landlock and seccomp,
//! driven through the bash tool, the file tools' in-process boundary, and one end-to-end run
//! of the real binary. These tests fail (never skip) on a kernel without Landlock ABI 4.

use crate::common::*;
use crate::tools_common::*;
use pi_coding_agent::tools::sandbox::{landlock_abi, SandboxMode, SandboxPolicy};
use pi_coding_agent::tools::{create_tools_with, ToolOptions};
use pi_fakellm::{Script, Turn};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn policy(mode: SandboxMode, network: bool) -> SandboxPolicy {
    SandboxPolicy {
        mode,
        network,
        user_bash: false,
    }
}

fn sandboxed_tool(cwd: &Path, name: &str, p: SandboxPolicy) -> Arc<dyn pi_agent::AgentTool> {
    assert!(landlock_abi() >= 4, "this kernel has no Landlock ABI 4");
    let options = ToolOptions {
        sandbox: p,
        ..Default::default()
    };
    create_tools_with(cwd, &[name], &options)
        .pop()
        .expect("known tool")
}

/// A directory under neither the cwd nor a temp dir (the sandbox allows `/tmp`).
fn outside_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    assert!(!dir.path().starts_with("/tmp"));
    assert!(!dir.path().starts_with(std::env::temp_dir()));
    dir
}

/// Runs `command` in the bash tool; `(exit code, text)` (a non-zero exit is an error result).
async fn bash(cwd: &Path, p: SandboxPolicy, command: &str) -> (Option<i64>, String) {
    let t = sandboxed_tool(cwd, "bash", p);
    let (c, _) = ctx();
    let out = t
        .execute(c, json!({ "command": command }))
        .await
        .unwrap_or_else(|e| panic!("bash failed to run: {e}"));
    let code = out.structured_content.as_ref().unwrap()["exit_code"].as_i64();
    (code, text(&out))
}

fn cwd_dir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().canonicalize().unwrap();
    (d, p)
}

#[tokio::test]
async fn workspace_write_blocks_writes_outside_cwd_and_tmp() {
    let (_d, cwd) = cwd_dir();
    let out = outside_dir();
    let target = out.path().join("escaped.txt");
    let ww = policy(SandboxMode::WorkspaceWrite, false);
    let (code, text) = bash(&cwd, ww, &format!("echo no > '{}'", target.display())).await;
    assert_ne!(code, Some(0), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!target.exists());
    // Inside the cwd, /tmp and /dev/null: allowed; reads outside are allowed too.
    std::fs::write(out.path().join("readable.txt"), "visible").unwrap();
    let tmp_file = tempfile::NamedTempFile::new_in("/tmp").unwrap();
    let (code, text) = bash(
        &cwd,
        ww,
        &format!(
            "echo yes > inside.txt && mkdir -p sub && echo t > '{}' && echo n > /dev/null && cat '{}'",
            tmp_file.path().display(),
            out.path().join("readable.txt").display()
        ),
    )
    .await;
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(text, "visible");
    assert_eq!(
        std::fs::read_to_string(cwd.join("inside.txt")).unwrap(),
        "yes\n"
    );
    // The same command unsandboxed writes outside (the denial above is the sandbox's).
    let (code, text) = bash(
        &cwd,
        SandboxPolicy::default(),
        &format!("echo no > '{}'", target.display()),
    )
    .await;
    assert_eq!(code, Some(0), "{text}");
    assert!(target.exists());
}

#[tokio::test]
async fn a_background_child_inherits_the_sandbox() {
    let (_d, cwd) = cwd_dir();
    let out = outside_dir();
    let target = out.path().join("late.txt");
    // The child leaves the process group (setsid) so that it outlives the command, then tries.
    // The command waits until the child is in its own session: the group is killed when the
    // command ends, and a child still in it then never ran (a race that failed under load).
    let cmd = format!(
        "setsid sh -c ': > started; (sleep 0.1; if echo x > {t}; then echo wrote; else echo denied; fi) > marker 2>/dev/null' & while [ ! -e started ]; do sleep 0.01; done",
        t = target.display()
    );
    let (code, text) = bash(&cwd, policy(SandboxMode::WorkspaceWrite, true), &cmd).await;
    assert_eq!(code, Some(0), "{text}");
    let marker = cwd.join("marker");
    for _ in 0..100 {
        if std::fs::read_to_string(&marker).is_ok_and(|s| !s.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "denied\n");
    assert!(!target.exists());
}

#[tokio::test]
async fn network_off_blocks_tcp_and_udp_network_on_allows() {
    let (_d, cwd) = cwd_dir();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let tcp = format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'");
    let (code, text) = bash(&cwd, policy(SandboxMode::WorkspaceWrite, false), &tcp).await;
    assert_ne!(code, Some(0), "{text}");
    assert!(listener.accept().is_err(), "a connection got through");
    let udp = "bash -c 'echo hi > /dev/udp/127.0.0.1/9'";
    let (code, text) = bash(&cwd, policy(SandboxMode::ReadOnly, false), udp).await;
    assert_ne!(code, Some(0), "{text}");
    // Unix-domain sockets keep working with the network off.
    let (code, text) = bash(
        &cwd,
        policy(SandboxMode::WorkspaceWrite, false),
        "python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"ok\"); print(b.recv(2).decode())' 2>&1 || echo no-python",
    )
    .await;
    assert_eq!(code, Some(0), "{text}");
    assert!(text == "ok\n" || text == "no-python\n", "{text}");
    let (code, text) = bash(&cwd, policy(SandboxMode::WorkspaceWrite, true), &tcp).await;
    assert_eq!(code, Some(0), "{text}");
    listener.set_nonblocking(false).unwrap();
    assert!(listener.accept().is_ok());
}

#[tokio::test]
async fn read_only_refuses_reads_outside_and_every_write() {
    let (_d, cwd) = cwd_dir();
    let out = outside_dir();
    let secret = out.path().join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    std::fs::write(cwd.join("mine.txt"), "mine").unwrap();
    let ro = policy(SandboxMode::ReadOnly, false);
    let (code, text) = bash(&cwd, ro, &format!("cat '{}'", secret.display())).await;
    assert_ne!(code, Some(0), "{text}");
    assert!(
        !text.contains("secret\n") && text.contains("Permission denied"),
        "{text}"
    );
    let (code, text) = bash(&cwd, ro, "cat mine.txt; ls /usr/bin >/dev/null").await;
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(text, "mine");
    let (code, text) = bash(&cwd, ro, "echo x > new.txt").await;
    assert_ne!(code, Some(0), "{text}");
    assert!(!cwd.join("new.txt").exists());
}

#[tokio::test]
async fn file_tools_honour_the_boundary() {
    let (_d, cwd) = cwd_dir();
    let out = outside_dir();
    let ww = policy(SandboxMode::WorkspaceWrite, false);
    let write = sandboxed_tool(&cwd, "write", ww);
    let outside = out.path().join("w.txt");
    let err = run(
        write.as_ref(),
        json!({"path": outside.to_string_lossy(), "content": "x"}),
    )
    .await
    .unwrap_err();
    assert!(
        err.starts_with("Sandbox (workspace-write): writing"),
        "{err}"
    );
    assert!(!outside.exists());
    run(write.as_ref(), json!({"path": "in.txt", "content": "x"}))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(cwd.join("in.txt")).unwrap(), "x");
    std::fs::write(&outside, "old").unwrap();
    let edit = sandboxed_tool(&cwd, "edit", ww);
    let err = run(
        edit.as_ref(),
        json!({"path": outside.to_string_lossy(), "edits": [{"oldText": "old", "newText": "new"}]}),
    )
    .await
    .unwrap_err();
    assert!(err.contains("not allowed"), "{err}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "old");
    // workspace-write reads everywhere; read-only does not.
    let read = sandboxed_tool(&cwd, "read", ww);
    assert!(
        run(read.as_ref(), json!({"path": outside.to_string_lossy()}))
            .await
            .is_ok()
    );
    let ro = policy(SandboxMode::ReadOnly, false);
    for (name, args) in [
        ("read", json!({"path": outside.to_string_lossy()})),
        ("ls", json!({"path": out.path().to_string_lossy()})),
        (
            "find",
            json!({"pattern": "*", "path": out.path().to_string_lossy()}),
        ),
        (
            "grep",
            json!({"pattern": "old", "path": out.path().to_string_lossy()}),
        ),
    ] {
        let t = sandboxed_tool(&cwd, name, ro);
        let err = run(t.as_ref(), args).await.unwrap_err();
        assert!(
            err.starts_with("Sandbox (read-only): reading"),
            "{name}: {err}"
        );
    }
    let read = sandboxed_tool(&cwd, "read", ro);
    assert!(run(read.as_ref(), json!({"path": "in.txt"})).await.is_ok());
    let write = sandboxed_tool(&cwd, "write", ro);
    assert!(
        run(write.as_ref(), json!({"path": "in2.txt", "content": "x"}))
            .await
            .is_err()
    );
}

/// The real binary: settings select workspace-write; a scripted bash call cannot write outside,
/// the system prompt names the boundary and `get_sandbox` answers.
#[test]
fn end_to_end_settings_sandbox_the_bash_tool() {
    assert!(landlock_abi() >= 4, "this kernel has no Landlock ABI 4");
    let out = outside_dir();
    let target = out.path().join("e2e.txt");
    let cmd = format!("echo x > '{}'; echo in > inside.txt", target.display());
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({ "command": cmd })),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    root.merge_settings(json!({"sandbox": {"mode": "workspace-write"}}));
    let mut agent = root.spawn();
    let r = agent.request(json!({"id": "s", "type": "get_sandbox"}));
    assert_eq!(
        r["data"],
        json!({"mode": "workspace-write", "network": false}),
        "{r}"
    );
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let (end, _) = agent.wait_from(0, LIVENESS, |v| kind(v) == "agent_settled");
    let recs = agent.events()[..=end].to_vec();
    let te = recs
        .iter()
        .find(|v| kind(v) == "tool_execution_end")
        .expect("tool ran");
    let text = te["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("Permission denied"), "{te}");
    assert!(!target.exists());
    assert_eq!(
        std::fs::read_to_string(root.cwd.join("inside.txt")).unwrap(),
        "in\n"
    );
    let body = fake.llm_requests()[0].body.to_string();
    assert!(body.contains("<sandbox>"), "{body}");
    assert!(body.contains("workspace-write"), "{body}");
    // --sandbox overrides the mode; an unknown mode is an error at start-up.
    let mut agent = root.spawn_with(false, &["--sandbox", "read-only"]);
    let r = agent.request(json!({"id": "s", "type": "get_sandbox"}));
    assert_eq!(
        r["data"],
        json!({"mode": "read-only", "network": false}),
        "{r}"
    );
    let mut agent = root.spawn_with(false, &["--sandbox", "bogus"]);
    let status = agent.wait_exit(Duration::from_secs(20)).expect("exits");
    assert_eq!(status.code(), Some(1));
    assert!(
        agent.stderr().contains("Invalid sandbox mode \"bogus\""),
        "{}",
        agent.stderr()
    );
}

/// No setting: `get_sandbox` says full, and the system prompt has no sandbox section.
#[test]
fn default_is_full() {
    let (fake, root) = setup(Script::new([Turn::text("hi")]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    let r = agent.request(json!({"id": "s", "type": "get_sandbox"}));
    assert_eq!(r["data"], json!({"mode": "full", "network": true}), "{r}");
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_from(0, LIVENESS, |v| kind(v) == "agent_settled");
    assert!(!fake.llm_requests()[0]
        .body
        .to_string()
        .contains("<sandbox>"));
}

/// Capability bits of a `/proc/<pid>/status` line (`CapBnd:\t000001fffeffffff`).
fn cap_bits(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no {key} in {status}"))
}

/// A sandboxed shell run by root cannot administer the network (`CAP_NET_ADMIN`, `CAP_NET_RAW`
/// with the network off) nor the system (`CAP_SYS_ADMIN`, `CAP_SYS_MODULE`): a tester changed
/// an interface address with `ip addr add` under `workspace-write`.
#[tokio::test]
async fn a_sandboxed_shell_lacks_admin_capabilities() {
    let (_d, cwd) = cwd_dir();
    let ours = std::fs::read_to_string("/proc/self/status").unwrap();
    let can_drop = cap_bits(&ours, "CapEff:") & (1 << 8) != 0; // CAP_SETPCAP
    let (code, text) = bash(
        &cwd,
        policy(SandboxMode::WorkspaceWrite, false),
        "cat /proc/self/status",
    )
    .await;
    assert_eq!(code, Some(0), "{text}");
    let net_admin_sys: u64 = (1 << 12) | (1 << 13) | (1 << 16) | (1 << 21);
    if can_drop {
        assert_eq!(cap_bits(&text, "CapBnd:") & net_admin_sys, 0, "{text}");
        assert_eq!(cap_bits(&text, "CapEff:") & net_admin_sys, 0, "{text}");
    } else {
        // Not root: the shell holds no capability in the first place.
        assert_eq!(cap_bits(&text, "CapEff:"), 0, "{text}");
    }
    let (code, text) = bash(
        &cwd,
        policy(SandboxMode::WorkspaceWrite, true),
        "cat /proc/self/status",
    )
    .await;
    assert_eq!(code, Some(0), "{text}");
    if can_drop {
        let eff = cap_bits(&text, "CapEff:");
        assert_eq!(eff & ((1 << 16) | (1 << 21)), 0, "{text}");
        // With the network on, the network capabilities stay as they were.
        assert_eq!(
            eff & (1 << 12),
            cap_bits(&ours, "CapEff:") & (1 << 12),
            "{text}"
        );
    }
}

/// The RPC `bash` command (the user's own command) runs unsandboxed unless the setting has
/// `userBash: true` (issue 26: "the RPC `bash` command only when asked").
#[test]
fn the_rpc_bash_command_is_sandboxed_only_when_asked() {
    assert!(landlock_abi() >= 4, "this kernel has no Landlock ABI 4");
    let out = outside_dir();
    for (user_bash, written) in [(false, true), (true, false)] {
        let target = out.path().join(format!("user-{user_bash}.txt"));
        let (_fake, root) = setup(Script::new(Vec::<Turn>::new()), DEFAULT_MODEL);
        root.merge_settings(json!({"sandbox": {"mode": "workspace-write", "userBash": user_bash}}));
        let mut agent = root.spawn();
        let cmd = format!("echo x > '{}'; echo in > inside.txt", target.display());
        let r = agent.request(json!({"id": "b", "type": "bash", "command": cmd}));
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(target.exists(), written, "userBash {user_bash}: {r}");
        assert_eq!(
            std::fs::read_to_string(root.cwd.join("inside.txt")).unwrap(),
            "in\n"
        );
        if !written {
            let output = r["data"]["output"].as_str().unwrap_or_default();
            assert!(output.contains("Permission denied"), "{r}");
        }
    }
    let (_fake, root) = setup(Script::new(Vec::<Turn>::new()), DEFAULT_MODEL);
    root.merge_settings(json!({"sandbox": {"mode": "read-only", "userBash": "yes"}}));
    let mut agent = root.spawn();
    let status = agent.wait_exit(Duration::from_secs(20)).expect("exits");
    assert_eq!(status.code(), Some(1), "{}", agent.stderr());
}
