//! Resolution of configuration values: `apiKey` and header values in `models.json`, `key` in
//! `auth.json` (spec config.md §5.2; upstream `core/resolve-config-value.ts`).
//!
//! * `!<command>` runs `<command>` with `sh -c` (10 s timeout, stdin closed, stderr discarded);
//!   the trimmed stdout is the value; empty output, a non-zero exit or a timeout give no value.
//!   The outcome is cached for the life of the process, keyed by the whole config string.
//! * otherwise, if an environment variable with exactly that name is set and non-empty, its value;
//! * otherwise the string itself.

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a `!command` may run.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

fn command_cache() -> &'static Mutex<HashMap<String, Option<String>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<String>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Resolves one configuration value (see the module docs). `None` means "no value".
pub fn resolve_config_value(config: &str) -> Option<String> {
    if let Some(command) = config.strip_prefix('!') {
        return run_cached(config, command);
    }
    match std::env::var(config) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => Some(config.to_string()),
    }
}

/// Resolves every header value; headers whose value resolves to nothing are dropped.
pub fn resolve_headers(headers: &Map<String, Value>) -> Map<String, Value> {
    headers
        .iter()
        .filter_map(|(k, v)| {
            let raw = v.as_str()?;
            let resolved = resolve_config_value(raw).filter(|s| !s.is_empty())?;
            Some((k.clone(), Value::String(resolved)))
        })
        .collect()
}

/// Forgets cached `!command` results (tests; upstream `clearConfigValueCache`).
pub fn clear_command_cache() {
    if let Ok(mut cache) = command_cache().lock() {
        cache.clear();
    }
}

fn run_cached(key: &str, command: &str) -> Option<String> {
    if let Ok(cache) = command_cache().lock() {
        if let Some(hit) = cache.get(key) {
            return hit.clone();
        }
    }
    let value = run_command(command);
    if let Ok(mut cache) = command_cache().lock() {
        cache.insert(key.to_string(), value.clone());
    }
    value
}

fn run_command(command: &str) -> Option<String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // Killed if the agent dies; this thread waits for it, so the death signal stays armed.
    crate::child_guard::die_with_parent(&mut cmd);
    let mut child = cmd.spawn().ok()?;
    // Read stdout on a helper thread so a chatty command cannot block on a full pipe.
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    // On a timeout the reader thread is left behind: a background grandchild may still hold
    // the pipe open, and waiting for it would defeat the timeout.
    if !status?.success() {
        return None;
    }
    let output = reader.join().unwrap_or_default();
    let text = String::from_utf8_lossy(&output).trim().to_string();
    (!text.is_empty()).then_some(text)
}
