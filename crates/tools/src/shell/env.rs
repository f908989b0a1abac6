//! Which shell runs a command, with what environment, for how long (spec tools.md §4.2).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest accepted timeout in seconds (JavaScript's maximum timer delay).
pub const MAX_TIMEOUT_SECONDS: f64 = 2_147_483.647;
/// Environment variables describing the session that are never inherited by commands.
pub const SESSION_ENV_VARS: [&str; 5] = [
    "PI_SESSION_ID",
    "PI_SESSION_FILE",
    "PI_PROVIDER",
    "PI_MODEL",
    "PI_REASONING_LEVEL",
];

/// Picks the shell (spec tools.md §4.2): the configured `shellPath` (must exist), else
/// `/bin/bash`, else the first `bash` on `PATH`, else `sh`.
pub fn resolve_shell(custom: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = custom {
        if p.exists() {
            return Ok(p.to_path_buf());
        }
        return Err(format!(
            "Custom shell path not found: {}\nPlease update shellPath in settings.json",
            p.display()
        ));
    }
    let bin_bash = Path::new("/bin/bash");
    if bin_bash.exists() {
        return Ok(bin_bash.to_path_buf());
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("bash");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Ok(PathBuf::from("sh"))
}

/// The environment for commands: the parent environment with `bin_dir` prepended to `PATH`
/// (unless already listed) and the session variables ([`SESSION_ENV_VARS`]) removed.
pub fn shell_env(bin_dir: Option<&Path>) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = std::env::vars().collect();
    for key in SESSION_ENV_VARS {
        env.remove(key);
    }
    if let Some(bin) = bin_dir {
        let bin_s = bin.to_string_lossy().into_owned();
        let key = env
            .keys()
            .find(|k| k.eq_ignore_ascii_case("PATH"))
            .cloned()
            .unwrap_or_else(|| "PATH".to_string());
        let current = env.get(&key).cloned().unwrap_or_default();
        if !current.split(':').any(|p| p == bin_s) {
            let joined = if current.is_empty() {
                bin_s
            } else {
                format!("{bin_s}:{current}")
            };
            env.insert(key, joined);
        }
    }
    env
}

/// Validates a model-supplied timeout in seconds (newer upstream rules).
pub fn validate_timeout(timeout: Option<f64>) -> Result<Option<Duration>, String> {
    match timeout {
        None => Ok(None),
        Some(t) if !t.is_finite() || t <= 0.0 => {
            Err("Invalid timeout: must be a finite number of seconds".into())
        }
        Some(t) if t > MAX_TIMEOUT_SECONDS => Err(format!(
            "Invalid timeout: maximum is {MAX_TIMEOUT_SECONDS} seconds"
        )),
        Some(t) => Ok(Some(Duration::from_secs_f64(t))),
    }
}
