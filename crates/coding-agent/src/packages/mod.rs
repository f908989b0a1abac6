//! Pi packages (upstream 1.6 `docs/packages.md`, `docs/settings.md` `packages`): npm, git
//! and local sources declared in settings `packages` (agent dir, and `.pi/settings.json` of
//! a trusted project) or given to `-e` for one run; their install folders, installation with
//! npm and git, and the resources (extensions, skills, prompt templates, themes) they provide.
//!
//! Install folders, as upstream's `pi install` leaves them:
//! * npm, user scope: `<agent>/npm/` (a `package.json` named `pi-extensions`, a `.gitignore`),
//!   the package in `<agent>/npm/node_modules/<name>`; project scope: `<cwd>/.pi/npm/`.
//! * git: `<agent>/git/<host>/<path>` (project: `<cwd>/.pi/git/…`).
//! * `-e` sources: `<agent>/tmp/extensions/npm/<hash>/` and
//!   `<agent>/tmp/extensions/git-<host>/<hash>/<path>`, `<hash>` the first 8 hex digits of
//!   SHA-256 of `<prefix>-<suffix>[@ref]`.
//!
//! npm runs as `npm install <spec> --prefix <root> --legacy-peer-deps --no-audit --no-fund`
//! (`npmCommand` in settings replaces `npm`); a cloned git package with a `package.json` gets
//! `npm install --omit=dev --legacy-peer-deps --no-audit --no-fund` in its folder.

pub mod collect;
mod commands;
mod install;
mod resolution;
pub mod source;

use crate::resources::discover::{real_key, resolve_from};
use crate::resources::SourceInfo;
use collect::{Filter, Kind};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use source::{GitSource, NpmSource, Scope, Source};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Limit of one `npm view` / `git rev-parse` style query (upstream `NETWORK_TIMEOUT_MS`).
pub const NETWORK_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a package operation failed; the message is what `pi` prints after `Error: `.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// A command (npm, git) could not start or exited non-zero.
    #[error("{0}")]
    Command(String),
    /// A file system operation failed.
    #[error("{0}")]
    Io(String),
    /// Project scope was asked for in an untrusted project.
    #[error("Project is not trusted; refusing to access project package storage")]
    NotTrusted,
    /// `pi update <source>` matched no configured package (message with a suggestion).
    #[error("{0}")]
    NoMatch(String),
    /// A local source path does not exist.
    #[error("Path does not exist: {0}")]
    PathMissing(String),
}

/// Where the output of npm and git goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildOutput {
    /// Our stdout and stderr (the `pi install|remove|update` commands).
    Inherit,
    /// Both to our stderr (start-up installs: stdout carries the RPC / JSON protocol).
    Stderr,
}

pub use crate::resources::PackageResource;

/// A configured package that could not be installed at start-up (warned about, skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallFailure {
    /// The source string.
    pub source: String,
    /// Its scope.
    pub scope: Scope,
    /// What failed.
    pub message: String,
}

impl InstallFailure {
    /// The start-up warning text (after `Warning: `), as upstream words it.
    pub fn warning(&self) -> String {
        let hint = match self.scope {
            Scope::Temporary => "Check the source and try again.".to_string(),
            Scope::Project => format!(
                "Run \"pi remove {} --local\" to remove it from settings.json.",
                self.source
            ),
            Scope::User => format!(
                "Run \"pi remove {}\" to remove it from settings.json.",
                self.source
            ),
        };
        format!(
            "Extension package \"{}\": failed to install ({}). {hint}",
            self.source, self.message
        )
    }
}

/// What the configured (or `-e`) packages provide, in precedence order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedPackages {
    /// Extension entry files.
    pub extensions: Vec<PackageResource>,
    /// Skill files.
    pub skills: Vec<PackageResource>,
    /// Prompt template files.
    pub prompts: Vec<PackageResource>,
    /// Theme files.
    pub themes: Vec<PackageResource>,
    /// Packages that could not be installed.
    pub failures: Vec<InstallFailure>,
    /// Files an earlier entry turned off (a `!`/`-` pattern of an `autoload: false` entry),
    /// by type and real path: a later entry does not add them (upstream's accumulator keeps
    /// the first decision for a path).
    disabled: Vec<(Kind, PathBuf)>,
}

impl ResolvedPackages {
    fn list(&mut self, kind: Kind) -> &mut Vec<PackageResource> {
        match kind {
            Kind::Extensions => &mut self.extensions,
            Kind::Skills => &mut self.skills,
            Kind::Prompts => &mut self.prompts,
            Kind::Themes => &mut self.themes,
        }
    }

    fn add(&mut self, kind: Kind, path: PathBuf, info: &SourceInfo) {
        let key = real_key(&path);
        if self.disabled.iter().any(|(k, p)| *k == kind && *p == key) {
            return;
        }
        let list = self.list(kind);
        if list.iter().any(|r| real_key(&r.path) == key) {
            return;
        }
        let mut info = info.clone();
        info.path = path.display().to_string();
        list.push(PackageResource { path, info });
    }

    /// Records `path` as turned off unless an earlier entry already added it.
    fn add_disabled(&mut self, kind: Kind, path: &Path) {
        let key = real_key(path);
        if self.list(kind).iter().any(|r| real_key(&r.path) == key)
            || self.disabled.iter().any(|(k, p)| *k == kind && *p == key)
        {
            return;
        }
        self.disabled.push((kind, key));
    }
}

/// One `packages` entry: its source string and, for the object form, its filters.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageEntry {
    /// `source` (or the string itself).
    pub source: String,
    /// The object form's filters.
    pub filter: Option<Filter>,
    /// The settings scope it came from.
    pub scope: Scope,
}

/// The `packages` entries of one settings object (entries without a source are skipped).
pub fn entries_of(settings: &Map<String, Value>, scope: Scope) -> Vec<PackageEntry> {
    settings
        .get("packages")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| {
                    let source = match v {
                        Value::String(s) => s.clone(),
                        Value::Object(o) => o.get("source")?.as_str()?.to_string(),
                        _ => return None,
                    };
                    Some(PackageEntry {
                        source,
                        filter: Filter::of(v),
                        scope,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `PI_OFFLINE` is on (`1`, `true`, `yes`): no installs or updates at start-up and
/// no `pi update` checks.
pub fn offline() -> bool {
    std::env::var("PI_OFFLINE")
        .map(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
        .unwrap_or(false)
}

/// Installs, removes, updates and resolves packages for one cwd and agent directory.
#[derive(Debug, Clone)]
pub struct PackageManager {
    cwd: PathBuf,
    agent_dir: PathBuf,
    project_trusted: bool,
    /// `npmCommand` from settings, else `["npm"]`.
    npm: Vec<String>,
    out: ChildOutput,
    home: Option<PathBuf>,
}

/// A package's changed version (`pi update` result line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Updated {
    /// `<source>[ (project)] <from> -> <to>`.
    pub line: String,
}

/// The outcome of [`PackageManager::update`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateReport {
    /// Packages whose version or commit changed.
    pub updated: Vec<Updated>,
    /// Warnings printed while updating (counted for the final line).
    pub warnings: usize,
}

impl PackageManager {
    /// A manager for `cwd` and `agent_dir`; `npm_command` is settings `npmCommand` (empty =
    /// `npm`); project scope is refused unless `project_trusted`.
    pub fn new(
        cwd: &Path,
        agent_dir: &Path,
        project_trusted: bool,
        npm_command: Vec<String>,
        out: ChildOutput,
    ) -> Self {
        let npm = if npm_command.first().is_some_and(|c| !c.is_empty()) {
            npm_command
        } else {
            vec!["npm".to_string()]
        };
        PackageManager {
            cwd: cwd.to_path_buf(),
            agent_dir: agent_dir.to_path_buf(),
            project_trusted,
            npm,
            out,
            home: crate::config::home_dir(),
        }
    }

    fn trusted(&self, scope: Scope) -> Result<(), PackageError> {
        if scope == Scope::Project && !self.project_trusted {
            return Err(PackageError::NotTrusted);
        }
        Ok(())
    }

    /// The folder relative local sources of `scope` resolve against.
    pub fn base_dir(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => self.agent_dir.clone(),
            Scope::Project => self.cwd.join(".pi"),
            Scope::Temporary => self.cwd.clone(),
        }
    }

    fn temp_dir(&self, prefix: &str, suffix: Option<&str>, git_ref: Option<&str>) -> PathBuf {
        let root = self.agent_dir.join("tmp").join("extensions").join(prefix);
        let mut h = Sha256::new();
        h.update(format!(
            "{prefix}-{}{}",
            suffix.unwrap_or(""),
            git_ref.map(|r| format!("@{r}")).unwrap_or_default()
        ));
        let hash: String = h.finalize()[..4]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let dir = root.join(hash);
        match suffix {
            Some(s) if !s.is_empty() => dir.join(s),
            _ => dir,
        }
    }

    /// The npm install root of `scope` (the folder with `package.json` and `node_modules`).
    pub fn npm_root(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::Temporary => self.temp_dir("npm", None, None),
            Scope::Project => self.cwd.join(".pi").join("npm"),
            Scope::User => self.agent_dir.join("npm"),
        }
    }

    /// Where an npm package of `scope` is installed.
    pub fn npm_path(&self, s: &NpmSource, scope: Scope) -> PathBuf {
        self.npm_root(scope).join("node_modules").join(&s.name)
    }

    fn git_root(&self, scope: Scope) -> Option<PathBuf> {
        match scope {
            Scope::Temporary => None,
            Scope::Project => Some(self.cwd.join(".pi").join("git")),
            Scope::User => Some(self.agent_dir.join("git")),
        }
    }

    /// Where a git package of `scope` is checked out.
    pub fn git_path(&self, g: &GitSource, scope: Scope) -> PathBuf {
        match self.git_root(scope) {
            Some(root) => root.join(&g.host).join(&g.path),
            None => self.temp_dir(
                &format!("git-{}", g.host),
                Some(&g.path),
                g.git_ref.as_deref(),
            ),
        }
    }

    fn local_path(&self, p: &str, scope: Scope) -> PathBuf {
        resolve_from(p, &self.base_dir(scope), self.home.as_deref())
    }

    /// The installed folder (or local path) of a configured source, when it exists.
    pub fn installed_path(&self, source: &str, scope: Scope) -> Option<PathBuf> {
        let p = match source::parse(source) {
            Source::Npm(n) => self.npm_path(&n, scope),
            Source::Git(g) => self.git_path(&g, scope),
            Source::Local(l) => self.local_path(&l, scope),
        };
        p.exists().then_some(p)
    }

    /// The identity that makes two declarations one package: `npm:<name>`,
    /// `git:<host>/<path>`, `local:<resolved path>` (relative to `scope`'s base folder, or the
    /// cwd for command-line input when `scope` is `None`).
    pub fn identity(&self, source: &str, scope: Option<Scope>) -> String {
        match source::parse(source) {
            Source::Npm(n) => format!("npm:{}", n.name),
            Source::Git(g) => format!("git:{}/{}", g.host, g.path),
            Source::Local(l) => {
                let base = scope.map_or_else(|| self.cwd.clone(), |s| self.base_dir(s));
                let p = resolve_from(&l, &base, self.home.as_deref());
                format!("local:{}", real_key(&p).display())
            }
        }
    }

    /// How `source` is written into the settings of `scope`: local paths relative to the
    /// settings folder (`.` for the folder itself), other sources as given.
    pub fn settings_form(&self, source: &str, scope: Scope) -> String {
        let Source::Local(l) = source::parse(source) else {
            return source.to_string();
        };
        let abs = resolve_from(&l, &self.cwd, self.home.as_deref());
        let rel = relative_path(&self.base_dir(scope), &abs);
        if rel.as_os_str().is_empty() {
            ".".into()
        } else {
            rel.display().to_string()
        }
    }
}

fn scope_suffix(scope: Scope) -> &'static str {
    if scope == Scope::Project {
        " (project)"
    } else {
        ""
    }
}

fn io_err(p: &Path, e: std::io::Error) -> PackageError {
    PackageError::Io(format!("{}: {e}", p.display()))
}

/// `path` relative to `base` (both absolute), with `..` where they part.
pub fn relative_path(base: &Path, path: &Path) -> PathBuf {
    let b: Vec<_> = base.components().collect();
    let p: Vec<_> = path.components().collect();
    let common = b.iter().zip(&p).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &p[common..] {
        out.push(c.as_os_str());
    }
    out
}

/// `No matching package found for <source>[. Did you mean <configured>?]`: the suggestion is
/// a configured npm package whose name or spec is `source`, or a git package whose
/// `host/path[@ref]` is.
pub fn no_match_message(src: &str, configured: &[PackageEntry]) -> String {
    let t = src.trim();
    let suggestion = configured.iter().find(|e| match source::parse(&e.source) {
        Source::Npm(n) => t == n.name || t == n.spec,
        Source::Git(g) => {
            let short = format!("{}/{}", g.host, g.path);
            t == short
                || g.git_ref
                    .as_ref()
                    .is_some_and(|r| t == format!("{short}@{r}"))
        }
        Source::Local(_) => false,
    });
    match suggestion {
        Some(e) => format!(
            "No matching package found for {src}. Did you mean {}?",
            e.source
        ),
        None => format!("No matching package found for {src}"),
    }
}
