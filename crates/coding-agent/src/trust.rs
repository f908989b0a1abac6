//! Project trust (upstream-1.6-notes.md item 19; upstream 1.6 `docs/security.md` "Understand
//! project trust").
//!
//! A working directory may carry files that change what the agent does: `.pi/settings.json`,
//! `.pi/mcp.json`, `.pi/{extensions,skills,prompts,themes}`, `.pi/SYSTEM.md`,
//! `.pi/APPEND_SYSTEM.md`, and `.agents/skills` in the directory or an ancestor (the user's own
//! `~/.agents/skills` excepted). Headless modes cannot ask, so these are skipped unless the
//! project is trusted by, in order:
//! 1. `--approve`/`-a` (trusted) or `--no-approve`/`-na` (not trusted) for this run;
//! 2. the nearest saved decision for the directory or an ancestor in `<agent>/trust.json`
//!    (`{"/canonical/dir": true|false|null}`; `null` = no decision; keys are compared after
//!    lexical normalisation, [`resolve_key`]);
//! 3. `defaultProjectTrust` in the agent-dir `settings.json`: `"always"` trusts, `"ask"`
//!    (default) and `"never"` do not.
//!
//! A directory without any protected file is trusted unless a saved decision says otherwise (then
//! there is nothing to skip anyway). Context files (`AGENTS.md`, …) never need trust. Trust is
//! decided for the directory the resources are loaded from: a resumed session's cwd, not the
//! directory pi was started in (issue 28).

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Entries under `<cwd>/.pi/` that need trust (a bare `.pi` directory does not).
pub const PROTECTED_PI_ENTRIES: [&str; 8] = [
    "settings.json",
    "mcp.json",
    "extensions",
    "skills",
    "prompts",
    "themes",
    "SYSTEM.md",
    "APPEND_SYSTEM.md",
];

/// A problem with `<agent>/trust.json`.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The file exists but could not be read or is not JSON.
    #[error("Failed to read trust store {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The file is JSON but not an object of `true`/`false`/`null` values.
    #[error("Invalid trust store {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Writing the file failed.
    #[error("Failed to write trust store {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// `<agent>/trust.json`: saved trust decisions keyed by canonical directory path.
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

fn canonical(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// A `trust.json` key as Node's `path.resolve(key)` gives it on POSIX, without touching the
/// file system: relative keys are joined to `base`; `//` and trailing `/` collapse, `.` is
/// dropped and `..` removes the previous segment (never above the root).
pub fn resolve_key(key: &str, base: &Path) -> PathBuf {
    let joined = base.join(key);
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

impl TrustStore {
    /// The store of an agent directory (`<agent_dir>/trust.json`).
    pub fn new(agent_dir: &Path) -> Self {
        TrustStore {
            path: agent_dir.join("trust.json"),
        }
    }

    /// The file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<Map<String, Value>, TrustError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
            Err(e) => {
                return Err(TrustError::Read {
                    path: self.path.clone(),
                    message: e.to_string(),
                })
            }
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let value: Value = serde_json::from_str(text).map_err(|e| TrustError::Read {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        let Value::Object(map) = value else {
            return Err(TrustError::Invalid {
                path: self.path.clone(),
                message: "expected an object".into(),
            });
        };
        if let Some((key, _)) = map
            .iter()
            .find(|(_, v)| !matches!(v, Value::Bool(_) | Value::Null))
        {
            return Err(TrustError::Invalid {
                path: self.path.clone(),
                message: format!("value for \"{key}\" must be true, false, or null"),
            });
        }
        Ok(map)
    }

    /// The nearest saved decision for `cwd` (canonical path) or one of its ancestors. Keys are
    /// compared as Node's `path.resolve` spells them (upstream 1.6 `pathsEqual`): lexically,
    /// without trailing or doubled `/`, `.` and `..` resolved, relative keys taken from the
    /// process's working directory; a key is not canonicalised on disk (nor is it upstream).
    /// Where several keys name the same directory with different decisions, `false` wins
    /// (upstream takes the first in file order).
    pub fn get(&self, cwd: &Path) -> Result<Option<bool>, TrustError> {
        let data = self.read()?;
        let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let keyed: Vec<(PathBuf, bool)> = data
            .iter()
            .filter_map(|(k, v)| v.as_bool().map(|b| (resolve_key(k, &base), b)))
            .collect();
        let dir = canonical(cwd);
        Ok(dir.ancestors().find_map(|d| {
            let mut found = keyed.iter().filter(|(k, _)| k == d).map(|(_, b)| *b);
            let first = found.next()?;
            Some(first && found.all(|b| b))
        }))
    }

    /// Saves `decision` for `cwd` (canonical path); `None` removes the decision. The file is
    /// written whole, keys sorted, pretty-printed with a trailing newline, through a temporary
    /// file renamed into place (never half written).
    pub fn set(&self, cwd: &Path, decision: Option<bool>) -> Result<(), TrustError> {
        let mut data = self.read()?;
        let key = canonical(cwd).to_string_lossy().into_owned();
        // Every spelling of the same directory gives way to the one canonical key.
        let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let dir = resolve_key(&key, &base);
        data.retain(|k, _| resolve_key(k, &base) != dir);
        match decision {
            Some(d) => data.insert(key, Value::Bool(d)),
            None => data.remove(&key),
        };
        let mut sorted: Vec<(String, Value)> = data.into_iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let map: Map<String, Value> = sorted.into_iter().collect();
        let text = serde_json::to_string_pretty(&Value::Object(map)).unwrap_or_default() + "\n";
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = self.path.with_extension("json.tmp");
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, &self.path)
        };
        write().map_err(|source| TrustError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

/// The protected project files that exist for `cwd`, as paths (see the module docs). `home` is
/// the user's home directory, whose `.agents/skills` is a user resource, not a project one.
pub fn protected_resources(cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let cwd = canonical(cwd);
    let mut found: Vec<PathBuf> = PROTECTED_PI_ENTRIES
        .iter()
        .map(|e| cwd.join(".pi").join(e))
        .filter(|p| p.exists())
        .collect();
    let user_skills = home.map(|h| canonical(h).join(".agents").join("skills"));
    for dir in cwd.ancestors() {
        let skills = dir.join(".agents").join("skills");
        if Some(&skills) != user_skills.as_ref() && skills.exists() {
            found.push(skills);
        }
    }
    found
}

/// Why a project is (not) trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustSource {
    /// `--approve` / `--no-approve`.
    CommandLine,
    /// A saved decision in `trust.json`.
    Saved,
    /// `defaultProjectTrust`.
    Default,
    /// Nothing to protect.
    NothingProtected,
}

/// The outcome for one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustDecision {
    /// Whether protected project files may be loaded.
    pub trusted: bool,
    /// What decided it.
    pub source: TrustSource,
    /// The protected files that exist (skipped when not trusted).
    pub protected: Vec<PathBuf>,
}

/// How this process decides trust: the command-line override, the agent-dir
/// `defaultProjectTrust`, and the store.
#[derive(Debug, Clone)]
pub struct TrustPolicy {
    /// `--approve` → `Some(true)`, `--no-approve` → `Some(false)`.
    pub cli_override: Option<bool>,
    /// `defaultProjectTrust` of the agent-dir settings (`ask`, `always`, `never`).
    pub default_trust: String,
    /// `<agent>/trust.json`.
    pub store: TrustStore,
    /// `$HOME` (its `.agents/skills` needs no trust).
    pub home: Option<PathBuf>,
}

impl TrustPolicy {
    /// A policy that trusts every project (in-process callers and tests that do not care).
    pub fn trust_all(agent_dir: &Path) -> Self {
        TrustPolicy {
            cli_override: Some(true),
            default_trust: "always".into(),
            store: TrustStore::new(agent_dir),
            home: None,
        }
    }

    /// Decides for `cwd`. A broken `trust.json` counts as "no saved decision" and is warned
    /// about on stderr.
    pub fn decide(&self, cwd: &Path) -> TrustDecision {
        let protected = protected_resources(cwd, self.home.as_deref());
        let saved = || match self.store.get(cwd) {
            Ok(d) => d,
            Err(e) => {
                crate::config::warn(&e.to_string());
                None
            }
        };
        let (trusted, source) = if let Some(t) = self.cli_override {
            (t, TrustSource::CommandLine)
        } else if protected.is_empty() {
            (saved().unwrap_or(true), TrustSource::NothingProtected)
        } else if let Some(t) = saved() {
            (t, TrustSource::Saved)
        } else {
            (self.default_trust == "always", TrustSource::Default)
        };
        TrustDecision {
            trusted,
            source,
            protected,
        }
    }

    /// The stderr notice for a decision that skips files (`None` when nothing is skipped or the
    /// user said `--no-approve`): what was skipped and how to trust the project.
    pub fn notice(&self, cwd: &Path, decision: &TrustDecision) -> Option<String> {
        if decision.trusted
            || decision.protected.is_empty()
            || decision.source == TrustSource::CommandLine
        {
            return None;
        }
        let base = canonical(cwd);
        let list: Vec<String> = decision
            .protected
            .iter()
            .map(|p| {
                p.strip_prefix(&base)
                    .map(|r| r.display().to_string())
                    .unwrap_or_else(|_| p.display().to_string())
            })
            .collect();
        Some(format!(
            "Project not trusted; skipped {}. To load them, pass --approve (-a) for this run, \
             save a decision with `\"{}\": true` in {}, or set \"defaultProjectTrust\": \"always\" \
             in the agent settings.json.",
            list.join(", "),
            base.display(),
            self.store.path().display()
        ))
    }
}
