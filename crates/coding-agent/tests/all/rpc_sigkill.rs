//! Crash safety of session files: many short persisted sessions whose fake model streams large
//! replies and makes tool calls with lots of output are SIGKILLed at random moments (seeded,
//! so a failure reproduces). Every session file left behind must consist of complete JSON
//! lines: a v3 header first, then entries whose `parentId`s name earlier entries. And no
//! process of any tool outlives `pi`: every process whose working directory is the run's cwd
//! (the tools' shells, their children and a background `sleep` each command leaves) is gone
//! shortly after each kill.

use crate::common::*;
use pi_fakellm::{Block, FakeLlm, Script, Turn, Usage};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const SEED: u64 = 0x005E_ED0F_5E55;
const KILLS: usize = 30;
/// Upper bound for one run before it is killed anyway.
const MAX_RUN: Duration = Duration::from_millis(3000);

/// A reply with a large text and a bash call that prints a lot.
fn noisy_turn(rng: &mut StdRng, i: usize) -> Turn {
    let text: String = (0..rng.gen_range(200..600))
        .map(|j| format!("turn {i} sentence {j} with some filler text. "))
        .collect();
    let lines = rng.gen_range(500..4000);
    let command = format!(
        "sleep 6017 & for i in $(seq 1 {lines}); do echo \"output line $i of a noisy command {i}\"; done"
    );
    let mut turn = Turn::text(text)
        .chunk_size(rng.gen_range(32..256))
        .usage(Usage::new(1000, 500));
    if rng.gen_bool(0.3) {
        turn.blocks.insert(
            0,
            Block::thinking("thinking ".repeat(rng.gen_range(10..200)), "sig"),
        );
    }
    if rng.gen_bool(0.85) {
        turn = turn.with_tool_call("bash", json!({"command": command}));
    }
    if rng.gen_bool(0.5) {
        turn = turn.delay_ms(1);
    }
    turn
}

#[test]
fn sigkill_leaves_only_complete_session_lines() {
    let mut rng = StdRng::seed_from_u64(SEED);
    let turns: Vec<Turn> = (0..KILLS * 6).map(|i| noisy_turn(&mut rng, i)).collect();
    // Once the script runs out, keep the agent busy with tool calls until it is killed.
    let forever = Turn::text("more").with_tool_call("bash", json!({"command": "seq 1 2000"}));
    let fake = FakeLlm::spawn(Script::new(turns).exhausted(forever)).unwrap();
    let root = RunRoot::new(fake.port());

    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut failures: Vec<String> = Vec::new();
    let mut with_assistant = 0usize;
    let mut entries_checked = 0usize;
    for run in 0..KILLS {
        let by_records = rng.gen_bool(0.5);
        let records_goal = rng.gen_range(1..600usize);
        let kill_at = Duration::from_millis(rng.gen_range(30..MAX_RUN.as_millis() as u64));
        let mut agent = root.spawn_with_session();
        agent.send(json!({"id": format!("p{run}"), "type": "prompt", "message": format!("run {run}: make noise")}));
        let started = Instant::now();
        loop {
            let elapsed = started.elapsed();
            if elapsed >= MAX_RUN
                || (!by_records && elapsed >= kill_at)
                || (by_records && agent.len() >= records_goal)
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(rng.gen_range(1..10)));
        }
        let point = format!(
            "run {run}: killed after {:?} / {} records",
            started.elapsed(),
            agent.len()
        );
        agent.kill();
        if let Err(left) = wait_no_process_in(&root.cwd) {
            failures.push(format!("{point}: tool processes outlived pi: {left:?}"));
        }

        for file in root.session_files() {
            if !seen.insert(file.clone()) {
                continue;
            }
            match check_session_file(&file) {
                Ok(lines) => {
                    entries_checked += lines.len() - 1;
                    if lines
                        .iter()
                        .any(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
                    {
                        with_assistant += 1;
                    }
                }
                Err(e) => failures.push(format!("{point}: {}: {e}", file.display())),
            }
        }
    }
    eprintln!("checked {} session files, {with_assistant} with an assistant reply, {entries_checked} entries", seen.len());
    assert!(
        failures.is_empty(),
        "{} broken session file(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The test must have exercised real sessions, not just early kills.
    assert!(
        with_assistant >= KILLS / 3,
        "only {with_assistant} of {KILLS} runs left a session with an assistant message"
    );
    assert!(
        entries_checked >= KILLS * 3,
        "only {entries_checked} entries checked"
    );
}

/// How long the tool processes of a killed `pi` may take to go (a bound, not a measurement).
const GONE: Duration = Duration::from_secs(10);

/// Live (non-zombie) processes whose working directory is `dir`: `(pid, cmdline)`.
fn processes_in(dir: &std::path::Path) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if std::fs::read_link(e.path().join("cwd")).ok().as_deref() != Some(dir) {
            continue;
        }
        let zombie = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if !zombie {
            let raw = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            out.push((pid, String::from_utf8_lossy(&raw).replace('\0', " ")));
        }
    }
    out
}

/// Waits until no process runs in `dir`; `Err` lists those still there after [`GONE`].
fn wait_no_process_in(dir: &std::path::Path) -> Result<(), Vec<(i32, String)>> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let deadline = Instant::now() + GONE;
    loop {
        let left = processes_in(&dir);
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(left);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The checker itself must catch the damage a badly timed kill can do.
#[test]
fn session_checker_rejects_torn_and_dangling_files() {
    let dir = tempfile::tempdir().unwrap();
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"}"#;
    let e1 = r#"{"type":"model_change","id":"a1","parentId":null,"timestamp":"t","provider":"p","modelId":"m"}"#;
    let e2 = r#"{"type":"message","id":"b2","parentId":"a1","timestamp":"t","message":{"role":"user","content":[]}}"#;
    let cases = [
        (format!("{header}\n{e1}\n{e2}\n"), true),
        (String::new(), false),
        (format!("{header}\n{e1}\n{}", &e2[..30]), false),
        (format!("{header}\n{e1}\n{}\n", &e2[..30]), false),
        (format!("{e1}\n{header}\n"), false),
        (format!("{header}\n{e2}\n{e1}\n"), false),
        (
            format!("{header}\n{}\n", e1.replace("\"parentId\":null,", "")),
            false,
        ),
    ];
    for (i, (text, ok)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("{i}.jsonl"));
        std::fs::write(&p, text).unwrap();
        assert_eq!(
            check_session_file(&p).is_ok(),
            *ok,
            "case {i}: {:?}",
            check_session_file(&p)
        );
    }
}

/// SIGKILL while `fork`, `clone`, `new_session` and `switch_session` write their files (issue
/// 8): each run has a session on disk, then fires the four commands back to back (some while
/// a reply streams) and is killed a random few milliseconds later. Every file left behind must
/// be complete lines with a header first.
#[test]
fn sigkill_during_session_swaps_leaves_only_complete_files() {
    const RUNS: usize = 16;
    let mut rng = StdRng::seed_from_u64(SEED ^ 0x5A4B);
    let long: String = (0..400)
        .map(|j| format!("sentence {j} of a long reply. "))
        .collect();
    let turn = Turn::text(long).chunk_size(64).usage(Usage::new(1000, 500));
    let fake = FakeLlm::spawn(Script::new([]).exhausted(turn)).unwrap();
    let root = RunRoot::new(fake.port());
    let mut failures: Vec<String> = Vec::new();
    let mut files_checked = 0usize;
    for run in 0..RUNS {
        let mut agent = root.spawn_with_session();
        agent.send(json!({"id": "p0", "type": "prompt", "message": format!("run {run}")}));
        agent.wait_event("agent_settled");
        let st = agent.request(json!({"id": "s", "type": "get_state"}));
        let file = st["data"]["sessionFile"].clone();
        let forks = agent.request(json!({"id": "g", "type": "get_fork_messages"}));
        let entry = forks["data"]["messages"][0]["entryId"].clone();
        if rng.gen_bool(0.5) {
            agent.send(json!({"id": "p1", "type": "prompt", "message": "again"}));
        }
        let mut cmds = vec![
            json!({"id": "c", "type": "clone"}),
            json!({"id": "f", "type": "fork", "entryId": entry}),
            json!({"id": "n", "type": "new_session"}),
            json!({"id": "w", "type": "switch_session", "sessionPath": file}),
        ];
        // Shuffle the order a little.
        let k = rng.gen_range(0..cmds.len());
        cmds.rotate_left(k);
        for c in &cmds {
            agent.send(c.clone());
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..40)));
        agent.kill();
        for f in root.session_files() {
            files_checked += 1;
            if let Err(e) = check_session_file(&f) {
                failures.push(format!("run {run}: {}: {e}", f.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(files_checked >= RUNS, "only {files_checked} files checked");
}

/// The window between a shell command's end and the ending of what it left in its group: the
/// shell of an RPC `bash` command has exited, its background `sleep` (which ignores `SIGTERM`,
/// so that the group is still being ended when `pi` dies) still runs, and `pi` is `SIGKILL`ed
/// then. The command's supervisor must still be there to end the group. Repeated, as the
/// window is short without the `SIGTERM`-ignoring sleep.
#[test]
fn sigkill_after_the_shell_exited_leaves_no_background_process() {
    let fake = FakeLlm::spawn(Script::new(vec![])).unwrap();
    let root = RunRoot::new(fake.port());
    let cwd = root.cwd.canonicalize().unwrap();
    for round in 0..4 {
        let mut agent = root.spawn();
        let trap = round % 2 == 0;
        let command = if trap {
            format!("(trap '' TERM; exec sleep 603{round}) & echo started")
        } else {
            format!("sleep 603{round} & echo started")
        };
        agent.send(json!({"id": format!("b{round}"), "type": "bash", "command": command}));
        let sleep_cmd = format!("sleep 603{round}");
        // Until the shell is gone and only its background sleep (and the supervisor, a copy
        // of `pi`) run in the cwd.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let procs = processes_in(&cwd);
            let sleeping = procs.iter().any(|(_, c)| c.trim_end() == sleep_cmd);
            let shell = procs.iter().any(|(_, c)| c.contains(" -c "));
            if sleeping && !shell {
                break;
            }
            if agent.records().iter().any(|r| {
                r.value
                    .as_ref()
                    .is_some_and(|v| v["id"] == format!("b{round}"))
            }) {
                // Without the trap the response may come first (and a slow scan of /proc
                // may miss the trap's 500 ms window); kill right after it.
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: never saw the shell exit: {procs:?}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        agent.kill();
        if let Err(left) = wait_no_process_in(&cwd) {
            panic!("round {round} ({command}): processes outlived pi: {left:?}");
        }
    }
}
