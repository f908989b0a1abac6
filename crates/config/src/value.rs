//! Resolution of configuration values: `apiKey` and header values in `models.json`, `key` in
//! `auth.json` (spec config.md §5.2, 1.6 rules; upstream 1.6 `docs/models.md` "Value
//! resolution").
//!
//! * `!<command>` runs `<command>` with `sh -c` (10 s timeout, stdin closed, stderr discarded);
//!   the trimmed stdout is the value; empty output, a non-zero exit or a timeout give no value.
//!   [`resolve_config_value`] caches the outcome for the life of the process (auth.json);
//!   [`resolve_config_value_uncached`] runs the command every time (models.json, per request).
//! * Any other string is a template: `$NAME` and `${NAME}` (a name is `[A-Za-z_][A-Za-z0-9_]*`)
//!   are replaced by the environment variable's value, `$$` is a literal `$` and `$!` a literal
//!   `!`; a `$` that starts none of these, and `${…}` holding no valid name, stay as written.
//!   If a named variable is unset or empty the whole value is "no value".
//! * So a plain string is its own literal value: `"MYKEY"` is the key `MYKEY`.
//!
//! Variables are looked up in an optional override map first (an auth.json entry's `env`
//! object), then in the process environment.

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

/// Resolves one configuration value (see the module docs); `!command` results are cached.
/// `None` means "no value".
pub fn resolve_config_value(config: &str) -> Option<String> {
    resolve_config_value_with(config, None)
}

/// [`resolve_config_value`] with variables looked up in `env` before the process environment.
pub fn resolve_config_value_with(config: &str, env: Option<&Map<String, Value>>) -> Option<String> {
    match config.strip_prefix('!') {
        Some(command) => run_cached(config, command),
        None => expand_template(config, env),
    }
}

/// Like [`resolve_config_value`] but a `!command` runs every time (models.json values, which
/// upstream resolves at request time).
pub fn resolve_config_value_uncached(config: &str) -> Option<String> {
    match config.strip_prefix('!') {
        Some(command) => run_command(command),
        None => expand_template(config, None),
    }
}

fn env_value(name: &str, env: Option<&Map<String, Value>>) -> Option<String> {
    env.and_then(|m| m.get(name))
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .or_else(|| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands `$NAME`, `${NAME}`, `$$` and `$!` in `template`; `None` if a variable is missing.
pub fn expand_template(template: &str, env: Option<&Map<String, Value>>) -> Option<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let mut chars = after.chars();
        match chars.next() {
            Some(c @ ('$' | '!')) => {
                out.push(c);
                rest = &after[1..];
            }
            Some('{') => match after.find('}') {
                Some(end) => {
                    let name = &after[1..end];
                    let valid = name.chars().next().is_some_and(is_name_start)
                        && name.chars().all(is_name_char);
                    if valid {
                        out.push_str(&env_value(name, env)?);
                    } else {
                        out.push('$');
                        out.push_str(&after[..=end]);
                    }
                    rest = &after[end + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            },
            Some(c) if is_name_start(c) => {
                let len = after
                    .char_indices()
                    .find(|(_, c)| !is_name_char(*c))
                    .map_or(after.len(), |(i, _)| i);
                out.push_str(&env_value(&after[..len], env)?);
                rest = &after[len..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

/// Resolves every header value (uncached, as at request time); headers whose value resolves to
/// nothing are dropped.
pub fn resolve_headers(headers: &Map<String, Value>) -> Map<String, Value> {
    headers
        .iter()
        .filter_map(|(k, v)| {
            let raw = v.as_str()?;
            let resolved = resolve_config_value_uncached(raw).filter(|s| !s.is_empty())?;
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
    pi_platform::child_guard::die_with_parent(&mut cmd);
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
