//! Configuration: the agent directory, `settings.json`, `models.json`, `auth.json`, the model
//! registry and model/thinking-level resolution.
//!
//! Source: spec `config.md` §1–§5 and §7.3–§7.5, `messages-and-models.md` §7–§9, and
//! `upstream-1.6-notes.md` §8/§15 (upstream `config.ts`, `core/settings-manager.ts`,
//! `core/model-registry.ts`, `core/model-resolver.ts`, `core/auth-storage.ts`,
//! `core/resolve-config-value.ts`).
//!
//! Nothing here panics on bad input: unreadable or malformed files produce a warning on stderr
//! (see [`warn`]) and the defaults are used instead.

pub mod auth;
pub mod lock;
pub mod models;
pub mod oauth;
pub mod resolve;
pub mod settings;
pub mod value;

pub use auth::{
    read_auth_entries, update_auth_file, update_locked_json, AuthCredential, AuthFileError,
    AuthStorage, OAuthAccess, RefreshError,
};
pub use models::{
    discover_local_models, is_keyless, ModelRegistry, ModelsConfig, ProviderConfig, RequestAuth,
    LOCAL_API, LOCAL_PROVIDER,
};
pub use resolve::{
    clamp_thinking_level, cycle_thinking_level, find_initial_model, get_a_model_guidance,
    model_thinking_level, no_api_key_message, no_models_available_message, parse_model_pattern,
    resolve_cli_model, resolve_model_scope, thinking_level_for_model_change, CliModel,
    InitialModel, InitialModelOptions, ParsedModel, ScopedModel, DEFAULT_THINKING_LEVEL,
};
pub use settings::{CompactionSettings, QueueMode, RetrySettings, Settings};
pub use value::{
    expand_template, resolve_config_value, resolve_config_value_uncached,
    resolve_config_value_with, resolve_headers,
};

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Environment variable that overrides the agent directory (spec config.md §1).
pub const AGENT_DIR_ENV: &str = "PI_CODING_AGENT_DIR";

/// The user's home directory: `$HOME`, if set and non-empty.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Expands a leading `~` or `~/` against `$HOME` (other paths are returned unchanged).
pub fn expand_home(path: &str) -> PathBuf {
    expand_home_with(path, home_dir().as_deref())
}

/// [`expand_home`] against a given home directory (`None` = no expansion).
pub fn expand_home_with(path: &str, home: Option<&Path>) -> PathBuf {
    match (path, home) {
        ("~", Some(home)) => home.to_path_buf(),
        (p, Some(home)) if p.starts_with("~/") => home.join(&p[2..]),
        (p, _) => PathBuf::from(p),
    }
}

/// The agent directory: `$PI_CODING_AGENT_DIR` (with `~` expansion) else `~/.pi/agent`
/// (spec config.md §1). Falls back to `./.pi/agent` when `$HOME` is unset.
pub fn agent_dir() -> PathBuf {
    agent_dir_with(
        std::env::var(AGENT_DIR_ENV).ok().as_deref(),
        home_dir().as_deref(),
    )
}

/// [`agent_dir`] from given values of `$PI_CODING_AGENT_DIR` and `$HOME` (empty = unset).
pub fn agent_dir_with(env_dir: Option<&str>, home: Option<&Path>) -> PathBuf {
    match env_dir {
        Some(dir) if !dir.is_empty() => expand_home_with(dir, home),
        _ => home
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
            .join(".pi")
            .join("agent"),
    }
}

/// Creates the agent directory (mode 0700) and the files upstream 1.6 creates on startup when
/// they are missing: `auth.json` and `models-store.json`, each `{}` with mode 0600 from the
/// start (as upstream). The conformance snapshot of the agent dir shows both after every run.
/// Failures are ignored (a read-only agent dir must not stop the agent).
pub fn ensure_agent_files(agent_dir: &Path) {
    if !agent_dir.exists() {
        let _ = std::fs::create_dir_all(agent_dir);
        set_mode(agent_dir, 0o700);
    }
    for name in ["auth.json", "models-store.json"] {
        let path = agent_dir.join(name);
        if !path.exists() {
            create_private(&path, b"{}");
        }
    }
}

/// Writes `bytes` to a new file at `path` with mode 0600 (nothing if it exists or fails).
#[cfg(unix)]
fn create_private(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        let _ = f.write_all(bytes);
    }
}

#[cfg(not(unix))]
fn create_private(path: &Path, bytes: &[u8]) {
    if !path.exists() {
        let _ = std::fs::write(path, bytes);
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) {}

/// Prints `Warning: <message>` on stderr (the form upstream uses for configuration problems).
pub fn warn(message: &str) {
    eprintln!("Warning: {message}");
}

/// Outcome of reading a JSON configuration file.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonFile {
    /// The file does not exist.
    Missing,
    /// The parsed document.
    Parsed(Value),
    /// The file exists but could not be read or parsed; the message says why.
    Invalid(String),
}

/// Reads a JSON file that may carry a UTF-8 BOM and `//` / `/* */` comments (upstream strips
/// both before `JSON.parse`).
pub fn read_json_file(path: &Path) -> JsonFile {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return JsonFile::Missing,
        Err(e) => return JsonFile::Invalid(e.to_string()),
    };
    match parse_jsonc(&text) {
        Ok(v) => JsonFile::Parsed(v),
        Err(e) => JsonFile::Invalid(e),
    }
}

/// Parses JSON text after removing a BOM and comments outside strings.
pub fn parse_jsonc(text: &str) -> Result<Value, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str(&strip_json_comments(text)).map_err(|e| e.to_string())
}

/// Removes `//` line comments and `/* */` block comments that are not inside string literals.
/// Comment characters are replaced by spaces (newlines kept) so error positions stay stable.
pub fn strip_json_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut prev = '\0';
                for n in chars.by_ref() {
                    if prev == '*' && n == '/' {
                        break;
                    }
                    out.push(if n == '\n' { '\n' } else { ' ' });
                    prev = n;
                }
            }
            _ => out.push(c),
        }
    }
    out
}
