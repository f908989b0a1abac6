//! RPC test harness: a temp run root wired to a [`FakeLlm`], and the real `pi --mode rpc`
//! binary driven over stdin/stdout — the Rust twin of `shared/conformance/run_scenario.py`.
//!
//! Each test binary compiles this module; not every test uses every helper.
#![allow(dead_code)]

use pi_fakellm::FakeLlm;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The default model of the run root's settings.json (as in run_scenario.py).
pub const DEFAULT_MODEL: &str = "fake-openai/fake-gpt-mini";

/// A generous bound for "this should happen soon"; never a performance assertion.
pub const LIVENESS: Duration = Duration::from_secs(30);

/// `models.json` with the fake-openai and fake-anthropic providers pointing at `port`
/// (the same shape as `DEFAULT_MODELS` in run_scenario.py).
pub fn models_json(port: u16) -> Value {
    json!({"providers": {
        "fake-openai": {
            "api": "openai-completions",
            "apiKey": "fake-openai-key",
            "baseUrl": format!("http://127.0.0.1:{port}/v1"),
            "models": [
                {"id": "fake-gpt", "name": "Fake GPT", "reasoning": true, "input": ["text", "image"],
                 "contextWindow": 128000, "maxTokens": 16384,
                 "cost": {"input": 1.0, "output": 4.0, "cacheRead": 0.1, "cacheWrite": 1.25}},
                {"id": "fake-gpt-mini", "name": "Fake GPT Mini", "reasoning": false, "input": ["text"],
                 "contextWindow": 32000, "maxTokens": 4096,
                 "cost": {"input": 0.5, "output": 1.5, "cacheRead": 0.05, "cacheWrite": 0}}
            ]
        },
        "fake-anthropic": {
            "api": "anthropic-messages",
            "apiKey": "fake-anthropic-key",
            "baseUrl": format!("http://127.0.0.1:{port}"),
            "models": [
                {"id": "fake-claude", "name": "Fake Claude", "reasoning": true, "input": ["text", "image"],
                 "contextWindow": 200000, "maxTokens": 32000,
                 "cost": {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}},
                {"id": "fake-claude-haiku", "name": "Fake Claude Haiku", "reasoning": false, "input": ["text"],
                 "contextWindow": 200000, "maxTokens": 8192,
                 "cost": {"input": 1.0, "output": 5.0, "cacheRead": 0.1, "cacheWrite": 1.25}}
            ]
        }
    }})
}

/// A temporary run root: `cwd/`, `agent/` (PI_CODING_AGENT_DIR with models.json and
/// settings.json), `home/`, `tmp/`. Deleted on drop.
pub struct RunRoot {
    dir: tempfile::TempDir,
    /// The agent's working directory.
    pub cwd: PathBuf,
    /// The agent directory (`PI_CODING_AGENT_DIR`).
    pub agent_dir: PathBuf,
    /// `HOME` of the agent.
    pub home: PathBuf,
    /// `TMPDIR` of the agent.
    pub tmp: PathBuf,
}

impl RunRoot {
    /// A run root whose settings select [`DEFAULT_MODEL`] on the fake at `port`.
    pub fn new(port: u16) -> RunRoot {
        Self::with_model(port, DEFAULT_MODEL)
    }

    /// A run root whose settings select `model` (`provider/id`) on the fake at `port`.
    pub fn with_model(port: u16, model: &str) -> RunRoot {
        let parent = if Path::new("/tmp").is_dir() {
            PathBuf::from("/tmp")
        } else {
            std::env::temp_dir()
        };
        let dir = tempfile::Builder::new()
            .prefix("pi-rundir-")
            .tempdir_in(parent)
            .expect("temp run root");
        let root = dir.path().canonicalize().expect("canonical run root");
        let rr = RunRoot {
            cwd: root.join("cwd"),
            agent_dir: root.join("agent"),
            home: root.join("home"),
            tmp: root.join("tmp"),
            dir,
        };
        for d in [&rr.cwd, &rr.agent_dir, &rr.home, &rr.tmp] {
            std::fs::create_dir_all(d).expect("create run dir");
        }
        rr.write_agent_file("models.json", &models_json(port));
        let (provider, id) = model.split_once('/').expect("model is provider/id");
        rr.write_agent_file(
            "settings.json",
            &json!({"defaultProvider": provider, "defaultModel": id}),
        );
        rr
    }

    /// The run root folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `value` as pretty JSON to `agent/<rel>`.
    pub fn write_agent_file(&self, rel: &str, value: &Value) {
        let p = self.agent_dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, serde_json::to_string_pretty(value).unwrap()).unwrap();
    }

    /// Merges `extra` into the top level of settings.json.
    pub fn merge_settings(&self, extra: Value) {
        let p = self.agent_dir.join("settings.json");
        let mut cur: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        for (k, v) in extra.as_object().expect("settings object") {
            cur[k] = v.clone();
        }
        std::fs::write(p, serde_json::to_string_pretty(&cur).unwrap()).unwrap();
    }

    /// Writes a file under `cwd/`.
    pub fn write_cwd_file(&self, rel: &str, content: &str) {
        let p = self.cwd.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    /// The clean environment run_scenario.py gives the agent.
    pub fn env(&self) -> Vec<(String, String)> {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            (
                "PATH".into(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            ),
            ("HOME".into(), s(&self.home)),
            ("TMPDIR".into(), s(&self.tmp)),
            ("LANG".into(), "C.UTF-8".into()),
            ("LC_ALL".into(), "C.UTF-8".into()),
            ("TZ".into(), "UTC".into()),
            ("TERM".into(), "dumb".into()),
            ("NO_COLOR".into(), "1".into()),
            ("PI_CODING_AGENT_DIR".into(), s(&self.agent_dir)),
            ("PI_OFFLINE".into(), "1".into()),
            ("PI_SKIP_VERSION_CHECK".into(), "1".into()),
            ("PI_TELEMETRY".into(), "0".into()),
        ]
        .into_iter()
        // The extension SDK cache (scripts/fetch-upstream-sdk.sh; extensions/sdk.rs): with it
        // the extension host resolves SDK imports to upstream's real modules, else (HOME is
        // fresh and PI_OFFLINE is set) to its stand-ins.
        .chain(
            std::env::var("PI_SDK_DIR")
                .ok()
                .map(|d| ("PI_SDK_DIR".into(), d)),
        )
        .collect()
    }

    /// Spawns `pi --mode rpc --no-session` (plus `args`).
    pub fn spawn(&self) -> RpcAgent {
        self.spawn_with(false, &[])
    }

    /// Spawns `pi --mode rpc` with a persisted session (no `--no-session`).
    pub fn spawn_with_session(&self) -> RpcAgent {
        self.spawn_with(true, &[])
    }

    /// Spawns `pi --mode rpc [--no-session] <args>` in `cwd` with the clean environment, in its
    /// own process group.
    pub fn spawn_with(&self, session: bool, args: &[&str]) -> RpcAgent {
        self.spawn_with_env(session, args, &[])
    }

    /// [`RunRoot::spawn_with`] with `extra` variables added to the clean environment.
    pub fn spawn_with_env(&self, session: bool, args: &[&str], extra: &[(&str, &str)]) -> RpcAgent {
        self.spawn_in(&self.cwd, session, args, extra)
    }

    /// [`RunRoot::spawn_with_env`] in another working directory `cwd`.
    pub fn spawn_in(
        &self,
        cwd: &Path,
        session: bool,
        args: &[&str],
        extra: &[(&str, &str)],
    ) -> RpcAgent {
        // `PI_TEST_BIN` runs the tests against another build (e.g. to see a new test fail on
        // the old code); it is only read, never set.
        let bin = std::env::var_os("PI_TEST_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_pi")));
        let mut cmd = Command::new(bin);
        cmd.args(["--mode", "rpc"]);
        if !session {
            cmd.arg("--no-session");
        }
        cmd.args(args)
            .current_dir(cwd)
            .env_clear()
            .envs(self.env())
            .envs(extra.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        RpcAgent::start(cmd)
    }

    /// Every `*.jsonl` file under `agent/sessions/`, sorted.
    pub fn session_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        collect_jsonl(&self.agent_dir.join("sessions"), &mut out);
        out.sort();
        out
    }
}

fn collect_jsonl(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_jsonl(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
}

/// One stdout line of the agent.
#[derive(Clone, Debug)]
pub struct Record {
    /// The raw line (without its LF).
    pub raw: String,
    /// The line parsed as JSON (`None` when it is not JSON).
    pub value: Option<Value>,
}

#[derive(Default)]
struct OutState {
    records: Vec<Record>,
    stderr: String,
    stdout_closed: bool,
    /// A final fragment without LF, if stdout ended with one.
    trailing: Option<String>,
    /// Lines that did not decode into `RpcOutput`, or changed when re-encoded.
    protocol_errors: Vec<String>,
}

struct Shared {
    state: Mutex<OutState>,
    cond: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, OutState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running `pi --mode rpc` child. Killed (with its process group) on drop.
pub struct RpcAgent {
    child: Child,
    stdin: Option<ChildStdin>,
    shared: Arc<Shared>,
    /// Index of the first stdout record that arrived after the last send.
    last_send: usize,
    exit: Option<ExitStatus>,
}

impl RpcAgent {
    pub fn start(mut cmd: Command) -> RpcAgent {
        let mut child = cmd.spawn().expect("spawn pi");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let shared = Arc::new(Shared {
            state: Mutex::new(OutState::default()),
            cond: Condvar::new(),
        });
        let sh = shared.clone();
        std::thread::spawn(move || read_stdout(stdout, &sh));
        let sh = shared.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match stderr.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sh
                        .lock()
                        .stderr
                        .push_str(&String::from_utf8_lossy(&buf[..n])),
                }
            }
        });
        RpcAgent {
            child,
            stdin,
            shared,
            last_send: 0,
            exit: None,
        }
    }

    /// The child's pid (also its process-group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command as a compact JSON line.
    pub fn send(&mut self, cmd: Value) {
        let mut line = serde_json::to_string(&cmd).unwrap();
        line.push('\n');
        self.send_raw(line.as_bytes());
    }

    /// Writes raw bytes to stdin (no newline added). Panics if stdin is closed.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.last_send = self.shared.lock().records.len();
        let stdin = self.stdin.as_mut().expect("stdin already closed");
        stdin
            .write_all(bytes)
            .and_then(|_| stdin.flush())
            .unwrap_or_else(|e| {
                panic!("writing to pi's stdin failed: {e}\n{}", self.dump());
            });
    }

    /// Like [`RpcAgent::send_raw`] but tolerates a dead agent (for kill tests).
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> bool {
        match self.stdin.as_mut() {
            Some(s) => s.write_all(bytes).and_then(|_| s.flush()).is_ok(),
            None => false,
        }
    }

    /// Closes stdin (EOF for the agent).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// A snapshot of every stdout record so far.
    pub fn records(&self) -> Vec<Record> {
        self.shared.lock().records.clone()
    }

    /// Every stdout record parsed as JSON (non-JSON lines are skipped).
    pub fn events(&self) -> Vec<Value> {
        self.shared
            .lock()
            .records
            .iter()
            .filter_map(|r| r.value.clone())
            .collect()
    }

    /// Number of stdout records so far.
    pub fn len(&self) -> usize {
        self.shared.lock().records.len()
    }

    /// stderr so far.
    pub fn stderr(&self) -> String {
        self.shared.lock().stderr.clone()
    }

    /// stderr once it contains `needle` (polled every 10 ms), or as it is after `timeout`: a
    /// line written just after the event a test waited for has then arrived.
    pub fn stderr_with(&self, needle: &str, timeout: Duration) -> String {
        let until = Instant::now() + timeout;
        loop {
            let s = self.stderr();
            if s.contains(needle) || Instant::now() >= until {
                return s;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the first record at index ≥ `from` matching `pred`; returns its index and
    /// value. Panics (with a transcript dump) on timeout or when stdout closes first.
    pub fn wait_from(
        &self,
        from: usize,
        timeout: Duration,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> (usize, Value) {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        let mut checked = from;
        loop {
            while checked < st.records.len() {
                if let Some(v) = &st.records[checked].value {
                    if pred(v) {
                        return (checked, v.clone());
                    }
                }
                checked += 1;
            }
            if st.stdout_closed {
                drop(st);
                panic!("pi's stdout closed while waiting\n{}", self.dump());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                drop(st);
                panic!(
                    "timed out after {timeout:?} waiting for a record\n{}",
                    self.dump()
                );
            }
            st = self
                .shared
                .cond
                .wait_timeout(st, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Waits for a record after the last send matching `pred` (like run_scenario.py's default
    /// `since: send`).
    pub fn wait_for(&self, pred: impl FnMut(&Value) -> bool, timeout: Duration) -> Value {
        self.wait_from(self.last_send, timeout, pred).1
    }

    /// Waits for an event of `type` after the last send.
    pub fn wait_event(&self, kind: &str) -> Value {
        self.wait_for(|v| v["type"] == kind, LIVENESS)
    }

    /// Waits for the response whose `id` is `id` (searched from the start).
    pub fn wait_response(&self, id: &str) -> Value {
        self.wait_from(0, LIVENESS, |v| v["type"] == "response" && v["id"] == id)
            .1
    }

    /// Sends `{"id": id, "type": "prompt", "message": text}`, asserts that it is accepted
    /// (`success: true`) and waits for the `agent_settled` that follows; returns every stdout
    /// value from the send on (the response, the run's events, `agent_settled`).
    pub fn prompt_settled(&mut self, id: &str, text: &str) -> Vec<Value> {
        let from = self.len();
        let r = self.request(json!({"id": id, "type": "prompt", "message": text}));
        assert_eq!(
            r["success"],
            true,
            "prompt {id} refused: {r}\n{}",
            self.dump()
        );
        self.wait_from(from, LIVENESS, |v| v["type"] == "agent_settled");
        self.shared.lock().records[from..]
            .iter()
            .filter_map(|r| r.value.clone())
            .collect()
    }

    /// Sends `cmd` and waits for its response (the command must carry an `id`).
    pub fn request(&mut self, cmd: Value) -> Value {
        let id = cmd["id"].as_str().expect("command id").to_string();
        self.send(cmd);
        self.wait_response(&id)
    }

    /// Waits until no new stdout record has arrived for `quiet` (bounded by `timeout`).
    pub fn wait_quiet(&self, quiet: Duration, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut last_len = self.len();
        let mut last_change = Instant::now();
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            let n = self.len();
            if n != last_len {
                last_len = n;
                last_change = Instant::now();
            } else if last_change.elapsed() >= quiet {
                return;
            }
        }
    }

    /// Waits for the process to exit; `None` on timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.exit {
            return Some(s);
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                self.exit = Some(s);
                // Let the reader threads drain the pipes.
                let until = Instant::now() + Duration::from_secs(5);
                let mut st = self.shared.lock();
                while !st.stdout_closed && Instant::now() < until {
                    st = self
                        .shared
                        .cond
                        .wait_timeout(st, Duration::from_millis(50))
                        .unwrap()
                        .0;
                }
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends a signal to the agent's whole process group (its own group only).
    pub fn signal_group(&self, sig: i32) {
        // SAFETY: kill(2) with a negative pid targets exactly the process group we created
        // for this child (process_group(0) at spawn); no memory is involved.
        unsafe {
            libc::kill(-(self.child.id() as i32), sig);
        }
    }

    /// SIGKILLs the process group and reaps the child.
    pub fn kill(&mut self) -> ExitStatus {
        self.signal_group(libc::SIGKILL);
        let s = self.child.wait().expect("wait after kill");
        self.exit = Some(s);
        s
    }

    /// A human-readable transcript for failure messages (last 60 records and stderr).
    pub fn dump(&self) -> String {
        let st = self.shared.lock();
        let n = st.records.len();
        let mut s = format!("--- stdout ({n} records, last 60) ---\n");
        for (i, r) in st.records.iter().enumerate().skip(n.saturating_sub(60)) {
            let raw: String = r.raw.chars().take(400).collect();
            s.push_str(&format!("[{i}] {raw}\n"));
        }
        if let Some(t) = &st.trailing {
            s.push_str(&format!("(unterminated) {t}\n"));
        }
        let err: String = st
            .stderr
            .chars()
            .rev()
            .take(4000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        s.push_str(&format!("--- stderr (tail) ---\n{err}\n"));
        s
    }

    /// Whether stdout ended with a fragment that had no LF.
    pub fn trailing_fragment(&self) -> Option<String> {
        self.shared.lock().trailing.clone()
    }
}

impl Drop for RpcAgent {
    fn drop(&mut self) {
        if self.exit.is_none() {
            self.signal_group(libc::SIGKILL);
            let _ = self.child.wait();
        }
        let errors = std::mem::take(&mut self.shared.lock().protocol_errors);
        if !errors.is_empty() && !std::thread::panicking() {
            panic!(
                "stdout lines that are not protocol records:\n{}",
                errors.join("\n")
            );
        }
    }
}

/// Every stdout line must decode into the protocol module's `RpcOutput` and encode back to
/// the same JSON value; returns what is wrong with `raw`, if anything.
fn protocol_error(raw: &str, value: Option<&Value>) -> Option<String> {
    let Some(value) = value else {
        return Some(format!("not JSON: {raw}"));
    };
    match serde_json::from_value::<pi_coding_agent::protocol::rpc::RpcOutput>(value.clone()) {
        Err(e) => Some(format!("does not decode ({e}): {raw}")),
        Ok(decoded) => {
            let again = serde_json::to_value(&decoded).ok();
            (again.as_ref() != Some(value)).then(|| {
                format!(
                    "re-encodes differently: {raw}\n   as: {}",
                    again.map(|v| v.to_string()).unwrap_or_default()
                )
            })
        }
    }
}

/// Reads stdout, splitting records on LF only (U+2028, CR etc. are data).
fn read_stdout(mut stdout: impl Read, shared: &Shared) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = match stdout.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut new = Vec::new();
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let raw = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            // Deep nesting is legal output (upstream reads and writes it): no 128 limit.
            let value = pi_ai::json::parse_str(&raw).ok();
            if let Some(e) = protocol_error(&raw, value.as_ref()) {
                shared.lock().protocol_errors.push(e);
            }
            new.push(Record { raw, value });
        }
        if !new.is_empty() {
            shared.lock().records.extend(new);
            shared.cond.notify_all();
        }
    }
    let mut st = shared.lock();
    if !buf.is_empty() {
        st.trailing = Some(String::from_utf8_lossy(&buf).into_owned());
    }
    st.stdout_closed = true;
    drop(st);
    shared.cond.notify_all();
}

/// Convenience: starts a fake with `script` and a run root using `model`.
pub fn setup(script: pi_fakellm::Script, model: &str) -> (FakeLlm, RunRoot) {
    let fake = FakeLlm::spawn(script).expect("fakellm: cannot bind 127.0.0.1");
    let root = RunRoot::with_model(fake.port(), model);
    (fake, root)
}

/// The `type` of a record (or `""`).
pub fn kind(v: &Value) -> &str {
    v["type"].as_str().unwrap_or("")
}

/// Checks one session file: every line is a complete JSON object, line 1 is a v3 header,
/// every entry has `type`/`id`/`parentId`/`timestamp` and each `parentId` names an earlier
/// entry. Returns the parsed lines, or a description of the first violation.
pub fn check_session_file(path: &Path) -> Result<Vec<Value>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    if text.is_empty() {
        return Err("empty file (no header)".into());
    }
    if !text.ends_with('\n') {
        let tail: String = text
            .chars()
            .rev()
            .take(200)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(format!(
            "file does not end with a newline (torn last line): …{tail}"
        ));
    }
    let mut out = Vec::new();
    let mut ids: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (i, line) in text.split_terminator('\n').enumerate() {
        let v: Value = serde_json::from_str(line).map_err(|e| {
            format!(
                "line {}: not valid JSON ({e}): {}",
                i + 1,
                line.chars().take(200).collect::<String>()
            )
        })?;
        if !v.is_object() {
            return Err(format!("line {}: not an object", i + 1));
        }
        if i == 0 {
            if v["type"] != "session"
                || v["version"] != 3
                || !v["id"].is_string()
                || !v["timestamp"].is_string()
                || !v["cwd"].is_string()
            {
                return Err(format!("line 1 is not a v3 session header: {v}"));
            }
        } else {
            let id = v["id"]
                .as_str()
                .ok_or_else(|| format!("line {}: entry without string id: {v}", i + 1))?;
            if !v["type"].is_string() || !v["timestamp"].is_string() {
                return Err(format!("line {}: entry without type/timestamp: {v}", i + 1));
            }
            match v.get("parentId") {
                Some(Value::Null) => {}
                Some(Value::String(p)) if ids.contains(p) => {}
                Some(other) => {
                    return Err(format!(
                        "line {}: parentId {other} names no earlier entry",
                        i + 1
                    ))
                }
                None => return Err(format!("line {}: entry without parentId: {v}", i + 1)),
            }
            if !ids.insert(id.to_string()) {
                return Err(format!("line {}: duplicate id {id}", i + 1));
            }
        }
        out.push(v);
    }
    Ok(out)
}
