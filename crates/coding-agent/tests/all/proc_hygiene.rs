//! No tool process outlives a `SIGKILL`ed agent: a shell command started by the `bash` tool or
//! by the RPC `bash` command, including the shell's own children (`sleep` under
//! `bash -c "sleep …; echo"`), is gone shortly after `pi` is killed (crate::child_guard).
//!
//! Real processes: the real `pi --mode rpc` binary, real shells, `/proc` scanned for a marker
//! that is unique to the test run. Linux only.
#![cfg(target_os = "linux")]

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::json;
use std::time::{Duration, Instant};

/// How long the killed agent's processes may take to disappear (a bound, not a measurement).
const GONE: Duration = Duration::from_secs(10);

/// A `sleep` duration unique to this test process and `case`, e.g. `612.004711`.
fn marker(case: u32) -> String {
    format!("{case}.{:06}", std::process::id() % 1_000_000)
}

/// Live (non-zombie) processes whose command line contains `needle`: `(pid, cmdline)` with
/// NULs shown as spaces.
fn processes_with(needle: &str) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline: String = String::from_utf8_lossy(&raw).replace('\0', " ");
        if !cmdline.contains(needle) {
            continue;
        }
        let zombie = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(false);
        if !zombie {
            out.push((pid, cmdline));
        }
    }
    out
}

/// Waits until a `sleep <marker>` process exists (the shell's child, not the shell).
fn wait_for_sleep(marker: &str, agent: &RpcAgent) {
    let deadline = Instant::now() + LIVENESS;
    let want = format!("sleep {marker}");
    loop {
        if processes_with(marker)
            .iter()
            .any(|(_, c)| c.trim_end() == want)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no `{want}` process appeared\n{}",
            agent.dump()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILLs the agent process alone (not its process group: a child left in the agent's group
/// must be killed by our own mechanism, not by the test), then waits until no process with
/// `marker` is left; kills and reports any survivor.
fn kill_agent_and_expect_no_survivors(mut agent: RpcAgent, marker: &str) {
    assert!(
        !processes_with(marker).is_empty(),
        "the command was not running before the kill"
    );
    let pid = libc::pid_t::try_from(agent.pid()).expect("pid fits pid_t");
    // SAFETY: kill(2) on our own child, which has not been reaped yet.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    assert!(agent.wait_exit(LIVENESS).is_some(), "pi did not die");
    let deadline = Instant::now() + GONE;
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for (pid, _) in &left {
                // SAFETY: kill(2) on a pid we just found running our unique marker.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                }
            }
            panic!("processes survived the agent's SIGKILL for {GONE:?}: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bash_tool_processes_die_with_the_agent() {
    let m = marker(612);
    let command = format!("sleep {m}; echo after");
    let (_fake, root) = setup(
        Script::new([Turn::tool_call("bash", json!({ "command": command }))]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "sleep for a long time"}));
    agent.wait_event("tool_execution_start");
    wait_for_sleep(&m, &agent);
    kill_agent_and_expect_no_survivors(agent, &m);
}

#[test]
fn rpc_bash_processes_die_with_the_agent() {
    let m = marker(613);
    let (_fake, root) = setup(Script::new([Turn::text("unused")]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    agent.send(json!({"id": "b1", "type": "bash", "command": format!("sleep {m}; echo after")}));
    wait_for_sleep(&m, &agent);
    kill_agent_and_expect_no_survivors(agent, &m);
}

/// The window between the shell's exit and the end of what it left in its group: the shell
/// has exited, the agent is stopped (it cannot end the group itself), the background child
/// ignores `SIGTERM` (so the group is not empty at once), and the agent is `SIGKILL`ed then.
/// The child must still go (the supervisor outlives the shell until the group is empty,
/// crate::child_guard); this once left `sleep &` children of the SIGKILL test running under
/// load. Should the supervisor's grace run out first, it has killed the child itself, which is
/// as good.
#[test]
fn background_child_dies_when_the_agent_is_killed_after_the_shell_exited() {
    let m = marker(614);
    let (_fake, root) = setup(Script::new([Turn::text("unused")]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    agent.send(json!({"id": "b1", "type": "bash",
        "command": format!("(trap '' TERM; exec sleep {m}) & sleep 0.3")}));
    wait_for_sleep(&m, &agent);
    let pid = libc::pid_t::try_from(agent.pid()).expect("pid fits pid_t");
    // SAFETY: kill(2) on our own child, which has not been reaped yet.
    unsafe {
        libc::kill(pid, libc::SIGSTOP);
    }
    // Until the shell (`bash -c "… & sleep 0.3"`) is gone and only its child is left.
    let want = format!("sleep {m}");
    let deadline = Instant::now() + LIVENESS;
    while processes_with(&m).iter().any(|(_, c)| c.trim_end() != want) {
        assert!(Instant::now() < deadline, "the shell did not exit");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill(2) on our own child, which has not been reaped yet.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    assert!(agent.wait_exit(LIVENESS).is_some(), "pi did not die");
    let deadline = Instant::now() + GONE;
    loop {
        let left = processes_with(&m);
        if left.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            for (pid, _) in &left {
                // SAFETY: kill(2) on a pid we just found running our unique marker.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                }
            }
            panic!("processes survived the agent's SIGKILL for {GONE:?}: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A command that finishes normally still reports its own exit code and output through the
/// supervisor.
#[test]
fn rpc_bash_exit_code_and_output_pass_through() {
    let (_fake, root) = setup(Script::new([Turn::text("unused")]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    let r = agent
        .request(json!({"id": "b1", "type": "bash", "command": "echo out; echo err >&2; exit 3"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["exitCode"], 3, "{r}");
    assert_eq!(r["data"]["output"], "out\nerr\n", "{r}");
    let r = agent.request(json!({"id": "b2", "type": "bash", "command": "kill -TERM $$"}));
    assert_eq!(r["success"], true, "{r}");
    assert!(r["data"]["exitCode"].is_null(), "{r}");
}

/// The `!command` of a config value (here the provider's `apiKey`) dies with the agent too
/// (`PR_SET_PDEATHSIG`; the command `exec`s, so the death signal reaches the `sleep`).
#[test]
fn api_key_command_dies_with_the_agent() {
    let m = marker(614);
    let (fake, root) = setup(Script::new([Turn::text("unused")]), DEFAULT_MODEL);
    let mut models = models_json(fake.port());
    models["providers"]["fake-openai"]["apiKey"] = json!(format!("!exec sleep {m}"));
    root.write_agent_file("models.json", &models);
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "hello"}));
    wait_for_sleep(&m, &agent);
    kill_agent_and_expect_no_survivors(agent, &m);
}
