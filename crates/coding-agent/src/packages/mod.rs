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
pub mod source;

use crate::resources::discover::{real_key, resolve_from};
use crate::resources::SourceInfo;
use collect::{Filter, Kind};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use source::{GitSource, NpmSource, Scope, Source};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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
        let list = self.list(kind);
        if list.iter().any(|r| real_key(&r.path) == key) {
            return;
        }
        let mut info = info.clone();
        info.path = path.display().to_string();
        list.push(PackageResource { path, info });
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

    // ---- commands -------------------------------------------------------------------------

    fn command(&self, program: &str, args: &[String], cwd: Option<&Path>) -> Command {
        let mut c = Command::new(program);
        c.args(args).stdin(Stdio::null());
        if let Some(d) = cwd {
            c.current_dir(d);
        }
        if self.out == ChildOutput::Stderr {
            use std::os::fd::AsFd;
            match std::io::stderr().as_fd().try_clone_to_owned() {
                Ok(fd) => {
                    c.stdout(Stdio::from(fd));
                }
                Err(_) => {
                    c.stdout(Stdio::null());
                }
            }
            // Nobody can answer a git password prompt here.
            c.env("GIT_TERMINAL_PROMPT", "0");
        }
        c
    }

    fn run(&self, program: &str, args: &[String], cwd: Option<&Path>) -> Result<(), PackageError> {
        let status = self
            .command(program, args, cwd)
            .status()
            .map_err(|e| PackageError::Command(format!("{program} {}: {e}", args.join(" "))))?;
        if status.success() {
            return Ok(());
        }
        let code = status
            .code()
            .map_or_else(|| "a signal".to_string(), |c| c.to_string());
        Err(PackageError::Command(format!(
            "{program} {} failed with code {code}",
            args.join(" ")
        )))
    }

    fn run_npm(&self, args: &[String], cwd: Option<&Path>) -> Result<(), PackageError> {
        let (program, pre) = self
            .npm
            .split_first()
            .map_or(("npm", &[][..]), |(p, r)| (p.as_str(), r));
        let all: Vec<String> = pre.iter().cloned().chain(args.iter().cloned()).collect();
        self.run(program, &all, cwd)
    }

    /// Runs a command with captured output and a time limit; its trimmed stdout.
    fn capture(
        &self,
        program: &str,
        args: &[String],
        cwd: &Path,
        timeout: Duration,
    ) -> Result<String, PackageError> {
        let fail =
            |what: String| PackageError::Command(format!("{program} {} {what}", args.join(" ")));
        let mut child = Command::new(program)
            .args(args)
            .current_dir(cwd)
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("failed: {e}")))?;
        let start = std::time::Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if start.elapsed() > timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(fail(format!("timed out after {}ms", timeout.as_millis())));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(fail(format!("failed: {e}"))),
            }
        }
        let out = child
            .wait_with_output()
            .map_err(|e| fail(format!("failed: {e}")))?;
        let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() {
            Ok(stdout)
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            Err(fail(format!(
                "failed with code {}: {}",
                out.status.code().unwrap_or(-1),
                if stderr.is_empty() { stdout } else { stderr }
            )))
        }
    }

    fn npm_capture(&self, args: &[String]) -> Result<String, PackageError> {
        let (program, pre) = self
            .npm
            .split_first()
            .map_or(("npm", &[][..]), |(p, r)| (p.as_str(), r));
        let all: Vec<String> = pre.iter().cloned().chain(args.iter().cloned()).collect();
        self.capture(program, &all, &self.cwd, NETWORK_TIMEOUT)
    }

    fn git(&self, args: &[&str], cwd: Option<&Path>) -> Result<(), PackageError> {
        let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        self.run("git", &a, cwd)
    }

    fn git_capture(&self, args: &[&str], cwd: &Path) -> Result<String, PackageError> {
        let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        self.capture("git", &a, cwd, NETWORK_TIMEOUT)
    }

    /// The package manager `npmCommand` names (`npm`, `pnpm` or `bun`; a wrapper's last `--`
    /// argument or a known name among its arguments).
    fn manager_name(&self) -> String {
        let norm = |c: &str| {
            let b = Path::new(c)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            b.trim_end_matches(".cmd")
                .trim_end_matches(".exe")
                .to_string()
        };
        let Some((cmd, args)) = self.npm.split_first() else {
            return "npm".into();
        };
        if let Some(i) = args.iter().rposition(|a| a == "--") {
            return args.get(i + 1).map_or_else(|| norm(cmd), |w| norm(w));
        }
        let known = ["npm", "pnpm", "bun"];
        let direct = norm(cmd);
        if known.contains(&direct.as_str()) {
            return direct;
        }
        args.iter()
            .map(|a| norm(a))
            .find(|a| known.contains(&a.as_str()))
            .unwrap_or(direct)
    }

    fn npm_install_args(&self, specs: &[String], root: &Path) -> Vec<String> {
        let root = std::fs::canonicalize(root)
            .unwrap_or_else(|_| root.to_path_buf())
            .display()
            .to_string();
        let mut a = vec!["install".to_string()];
        a.extend(specs.iter().cloned());
        let rest: &[&str] = match self.manager_name().as_str() {
            "bun" => &["--cwd", &root, "--omit=peer"],
            "pnpm" => &[
                "--prefix",
                &root,
                "--config.auto-install-peers=false",
                "--config.strict-peer-dependencies=false",
                "--config.strict-dep-builds=false",
            ],
            _ => &[
                "--prefix",
                &root,
                "--legacy-peer-deps",
                "--no-audit",
                "--no-fund",
            ],
        };
        a.extend(rest.iter().map(|s| s.to_string()));
        a
    }

    fn git_dependency_args(&self) -> Vec<String> {
        let a: &[&str] = match self.manager_name().as_str() {
            "bun" => &["install", "--omit=dev", "--omit=peer"],
            "pnpm" => &[
                "install",
                "--prod",
                "--config.auto-install-peers=false",
                "--config.strict-peer-dependencies=false",
                "--config.strict-dep-builds=false",
            ],
            "npm" => &[
                "install",
                "--omit=dev",
                "--legacy-peer-deps",
                "--no-audit",
                "--no-fund",
            ],
            _ => &["install"],
        };
        a.iter().map(|s| s.to_string()).collect()
    }

    fn ensure_git_ignore(dir: &Path) -> Result<(), PackageError> {
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        let f = dir.join(".gitignore");
        if !f.exists() {
            std::fs::write(&f, "*\n!.gitignore\n").map_err(|e| io_err(&f, e))?;
        }
        Ok(())
    }

    fn ensure_npm_project(root: &Path) -> Result<(), PackageError> {
        Self::ensure_git_ignore(root)?;
        let pj = root.join("package.json");
        if !pj.exists() {
            std::fs::write(
                &pj,
                "{\n  \"name\": \"pi-extensions\",\n  \"private\": true\n}",
            )
            .map_err(|e| io_err(&pj, e))?;
        }
        Ok(())
    }

    fn install_npm(&self, specs: &[String], scope: Scope) -> Result<(), PackageError> {
        self.trusted(scope)?;
        let root = self.npm_root(scope);
        Self::ensure_npm_project(&root)?;
        self.run_npm(&self.npm_install_args(specs, &root), None)
    }

    fn uninstall_npm(&self, n: &NpmSource, scope: Scope) -> Result<(), PackageError> {
        let root = self.npm_root(scope);
        if !root.exists() {
            return Ok(());
        }
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        let r = root.display().to_string();
        let mut args: Vec<String> = if self.manager_name() == "bun" {
            vec!["uninstall".into(), n.name.clone(), "--cwd".into(), r]
        } else {
            vec!["uninstall".into(), n.name.clone(), "--prefix".into(), r]
        };
        if !matches!(self.manager_name().as_str(), "pnpm" | "bun") {
            args.extend(["--legacy-peer-deps", "--no-audit", "--no-fund"].map(String::from));
        }
        self.run_npm(&args, None)
    }

    fn marker(target: &Path) -> PathBuf {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        target
            .parent()
            .unwrap_or(target)
            .join(format!(".{name}.pi-update-incomplete"))
    }

    fn prune_empty_parents(target: &Path, root: Option<&Path>) {
        let Some(root) = root else { return };
        let mut cur = target.parent();
        while let Some(d) = cur {
            if !d.starts_with(root) || d == root {
                break;
            }
            if d.exists() {
                let empty = std::fs::read_dir(d).map(|mut r| r.next().is_none());
                if !matches!(empty, Ok(true)) || std::fs::remove_dir(d).is_err() {
                    break;
                }
            }
            cur = d.parent();
        }
    }

    fn install_git_deps(&self, target: &Path) -> Result<(), PackageError> {
        if target.join("package.json").exists() {
            self.run_npm(&self.git_dependency_args(), Some(target))?;
        }
        Ok(())
    }

    fn missing_git_deps(target: &Path) -> bool {
        let Ok(text) = std::fs::read_to_string(target.join("package.json")) else {
            return false;
        };
        let Ok(v) = serde_json::from_str::<Value>(text.trim_start_matches('\u{feff}')) else {
            return false;
        };
        let Some(deps) = v.get("dependencies").and_then(Value::as_object) else {
            return false;
        };
        let nm = target.join("node_modules");
        deps.keys()
            .any(|n| !n.contains("..") && !nm.join(n).exists())
    }

    fn clean_and_install(&self, target: &Path, marker: &Path) -> Result<(), PackageError> {
        let cleaned = self.git(&["clean", "-fdx"], Some(target)).is_ok();
        self.install_git_deps(target)?;
        if cleaned {
            let _ = std::fs::remove_file(marker);
        }
        Ok(())
    }

    fn ensure_git_ref(
        &self,
        target: &Path,
        fetch: &[String],
        git_ref: &str,
    ) -> Result<(), PackageError> {
        self.run("git", fetch, Some(target))?;
        let local = self.git_capture(&["rev-parse", "HEAD"], target)?;
        let commit = format!("{git_ref}^{{commit}}");
        let wanted = self.git_capture(&["rev-parse", &commit], target)?;
        let marker = Self::marker(target);
        if local == wanted {
            if marker.exists() {
                return self.clean_and_install(target, &marker);
            }
            if Self::missing_git_deps(target) {
                self.install_git_deps(target)?;
            }
            return Ok(());
        }
        std::fs::write(&marker, "").map_err(|e| io_err(&marker, e))?;
        self.git(&["reset", "--hard", &commit], Some(target))?;
        self.clean_and_install(target, &marker)
    }

    /// The fetch arguments and ref an unpinned checkout is reset to: its upstream branch,
    /// else `origin/HEAD`.
    fn update_target(&self, target: &Path) -> (Vec<String>, String) {
        let fetch = |refspec: String| -> Vec<String> {
            ["fetch", "--prune", "--no-tags", "origin"]
                .iter()
                .map(|s| s.to_string())
                .chain([refspec])
                .collect()
        };
        if let Ok(up) = self.git_capture(&["rev-parse", "--abbrev-ref", "@{upstream}"], target) {
            if let Some(branch) = up.strip_prefix("origin/").filter(|b| !b.is_empty()) {
                return (
                    fetch(format!("+refs/heads/{branch}:refs/remotes/origin/{branch}")),
                    "@{upstream}".into(),
                );
            }
        }
        let _ = self.git_capture(&["remote", "set-head", "origin", "-a"], target);
        let head = self
            .git_capture(&["symbolic-ref", "refs/remotes/origin/HEAD"], target)
            .unwrap_or_default();
        let branch = head.trim_start_matches("refs/remotes/origin/").to_string();
        if branch.is_empty() {
            (
                fetch("+HEAD:refs/remotes/origin/HEAD".into()),
                "origin/HEAD".into(),
            )
        } else {
            (
                fetch(format!("+refs/heads/{branch}:refs/remotes/origin/{branch}")),
                "origin/HEAD".into(),
            )
        }
    }

    fn install_git(&self, g: &GitSource, scope: Scope) -> Result<(), PackageError> {
        self.trusted(scope)?;
        let target = self.git_path(g, scope);
        if target.exists() {
            return self.update_git(g, scope);
        }
        let root = self.git_root(scope);
        if let Some(r) = &root {
            Self::ensure_git_ignore(r)?;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
        }
        let _ = std::fs::remove_file(Self::marker(&target));
        let t = target.display().to_string();
        let result = self
            .git(&["clone", &g.repo, &t], None)
            .and_then(|()| match &g.git_ref {
                Some(r) => self.git(&["checkout", r], Some(&target)),
                None => Ok(()),
            })
            .and_then(|()| self.install_git_deps(&target));
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&target);
            Self::prune_empty_parents(&target, root.as_deref());
        }
        result
    }

    fn update_git(&self, g: &GitSource, scope: Scope) -> Result<(), PackageError> {
        let target = self.git_path(g, scope);
        if !target.exists() {
            return self.install_git(g, scope);
        }
        match &g.git_ref {
            Some(r) => {
                let fetch: Vec<String> = vec!["fetch".into(), "origin".into(), r.clone()];
                self.ensure_git_ref(&target, &fetch, "FETCH_HEAD")
            }
            None => {
                let (fetch, r) = self.update_target(&target);
                self.ensure_git_ref(&target, &fetch, &r)
            }
        }
    }

    /// Installs `source` for `scope` (a local source must exist; nothing is copied).
    pub fn install(&self, source: &str, scope: Scope) -> Result<(), PackageError> {
        self.trusted(scope)?;
        match source::parse(source) {
            Source::Npm(n) => self.install_npm(&[n.spec], scope),
            Source::Git(g) => self.install_git(&g, scope),
            Source::Local(l) => {
                let p = resolve_from(&l, &self.cwd, self.home.as_deref());
                if p.exists() {
                    Ok(())
                } else {
                    Err(PackageError::PathMissing(p.display().to_string()))
                }
            }
        }
    }

    /// Removes the installed files of `source` for `scope` (`npm uninstall`, the git
    /// checkout; a local source is left alone).
    pub fn remove_files(&self, source: &str, scope: Scope) -> Result<(), PackageError> {
        self.trusted(scope)?;
        match source::parse(source) {
            Source::Npm(n) => self.uninstall_npm(&n, scope),
            Source::Git(g) => {
                let target = self.git_path(&g, scope);
                if target.exists() {
                    std::fs::remove_dir_all(&target).map_err(|e| io_err(&target, e))?;
                }
                let _ = std::fs::remove_file(Self::marker(&target));
                Self::prune_empty_parents(&target, self.git_root(scope).as_deref());
                Ok(())
            }
            Source::Local(_) => Ok(()),
        }
    }

    fn installed_version(path: &Path) -> Option<String> {
        let text = std::fs::read_to_string(path.join("package.json")).ok()?;
        let v: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).ok()?;
        v.get("version")?.as_str().map(str::to_string)
    }

    /// The newest registry version for `n` (`npm view <spec> version --json`, the highest
    /// one in its range when several come back).
    fn latest_version(&self, n: &NpmSource) -> Result<String, PackageError> {
        let spec = if n.version.is_some() {
            n.spec.clone()
        } else {
            n.name.clone()
        };
        let raw = self.npm_capture(&["view".into(), spec, "version".into(), "--json".into()])?;
        let bad = || PackageError::Command("Unexpected response from npm view".into());
        match serde_json::from_str::<Value>(&raw).map_err(|_| bad())? {
            Value::String(s) => Ok(s),
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .filter_map(|s| semver::Version::parse(s).ok())
                .max()
                .map(|v| v.to_string())
                .ok_or_else(bad),
            _ => Err(bad()),
        }
    }

    fn version_gt(a: &str, b: &str) -> bool {
        match (semver::Version::parse(a), semver::Version::parse(b)) {
            (Ok(a), Ok(b)) => a > b,
            _ => false,
        }
    }

    /// Whether an installed npm package satisfies its configured version (a range this build
    /// cannot read counts as satisfied).
    fn npm_matches(n: &NpmSource, path: &Path) -> bool {
        let Some(installed) = Self::installed_version(path) else {
            return false;
        };
        let Some(want) = &n.version else {
            return true;
        };
        if n.pinned {
            return installed == want.trim_start_matches('v');
        }
        match (
            semver::VersionReq::parse(want),
            semver::Version::parse(&installed),
        ) {
            (Ok(req), Ok(v)) => req.matches(&v),
            _ => true,
        }
    }

    /// Updates the configured packages (all, or those whose identity is `only`'s), printing
    /// `Updating <source>...` for each; pinned npm versions are skipped. Nothing happens
    /// offline. `Err(NoMatch)` when `only` matches no configured package.
    pub fn update(
        &self,
        configured: &[PackageEntry],
        only: Option<&str>,
    ) -> Result<UpdateReport, PackageError> {
        let wanted = only.map(|s| self.identity(s, None));
        let selected: Vec<&PackageEntry> = configured
            .iter()
            .filter(|e| {
                wanted
                    .as_ref()
                    .is_none_or(|w| *w == self.identity(&e.source, Some(e.scope)))
            })
            .collect();
        if let (Some(src), true) = (only, selected.is_empty()) {
            return Err(PackageError::NoMatch(no_match_message(src, configured)));
        }
        let mut report = UpdateReport::default();
        if offline() {
            return Ok(report);
        }
        for scope in [Scope::User, Scope::Project] {
            let mut batch: Vec<(&PackageEntry, NpmSource, Option<String>, Option<String>)> =
                Vec::new();
            for e in selected.iter().filter(|e| e.scope == scope) {
                let Source::Npm(n) = source::parse(&e.source) else {
                    continue;
                };
                if n.pinned {
                    continue;
                }
                let path = self.npm_path(&n, scope);
                let installed = Self::installed_version(&path);
                let (go, target) = match &installed {
                    None => (true, None),
                    Some(have) => match self.latest_version(&n) {
                        Ok(t) => (Self::version_gt(&t, have), Some(t)),
                        Err(_) => (true, None),
                    },
                };
                if go {
                    batch.push((e, n, installed, target));
                }
            }
            if batch.is_empty() {
                continue;
            }
            if batch.len() == 1 {
                println!("Updating {}...", batch[0].0.source);
            } else {
                println!("Updating {} npm packages...", scope.as_str());
            }
            let specs: Vec<String> = batch
                .iter()
                .map(|(_, n, _, _)| {
                    if n.version.is_some() {
                        n.spec.clone()
                    } else {
                        format!("{}@latest", n.name)
                    }
                })
                .collect();
            self.install_npm(&specs, scope)?;
            for (e, n, from, target) in &batch {
                let to = Self::installed_version(&self.npm_path(n, scope));
                if let (Some(f), Some(t)) = (from, target) {
                    if to.as_deref() == Some(f.as_str()) {
                        println!("{} is still {f} (registry reports {t}); npm registry metadata may be stale, try again in a few minutes", e.source);
                        report.warnings += 1;
                    }
                }
                if to != *from {
                    report.updated.push(Updated {
                        line: format!(
                            "{}{} {} -> {}",
                            e.source,
                            scope_suffix(scope),
                            from.as_deref().unwrap_or("(none)"),
                            to.as_deref().unwrap_or("(none)")
                        ),
                    });
                }
            }
        }
        for e in &selected {
            let Source::Git(g) = source::parse(&e.source) else {
                continue;
            };
            println!("Updating {}...", e.source);
            let target = self.git_path(&g, e.scope);
            let head = |t: &Path| -> Option<String> {
                if !t.exists() {
                    return None;
                }
                self.git_capture(&["rev-parse", "HEAD"], t)
                    .ok()
                    .filter(|h| !h.is_empty())
            };
            let from = head(&target);
            self.update_git(&g, e.scope)?;
            let to = head(&target);
            if from != to {
                let short = |h: &Option<String>| {
                    h.as_deref()
                        .map_or_else(|| "(none)".to_string(), |h| h.chars().take(7).collect())
                };
                report.updated.push(Updated {
                    line: format!(
                        "{}{} {} -> {}",
                        e.source,
                        scope_suffix(e.scope),
                        short(&from),
                        short(&to)
                    ),
                });
            }
        }
        Ok(report)
    }

    // ---- resolution -----------------------------------------------------------------------

    /// The resources of the configured packages: `project` entries (pass them only for a
    /// trusted project) before `user` ones, one per identity (a project entry replaces the
    /// user entry). Missing npm/git packages are installed first (not offline); one that
    /// fails is skipped and reported in [`ResolvedPackages::failures`].
    pub fn resolve_configured(
        &self,
        user: &Map<String, Value>,
        project: Option<&Map<String, Value>>,
    ) -> ResolvedPackages {
        let mut all = project
            .map(|p| entries_of(p, Scope::Project))
            .unwrap_or_default();
        all.extend(entries_of(user, Scope::User));
        let mut deduped: Vec<PackageEntry> = Vec::new();
        let mut ids: Vec<String> = Vec::new();
        for e in all {
            let id = self.identity(&e.source, Some(e.scope));
            match ids.iter().position(|i| *i == id) {
                None => {
                    ids.push(id);
                    deduped.push(e);
                }
                Some(i) => {
                    if e.scope == Scope::Project && deduped[i].scope != Scope::Project {
                        deduped[i] = e;
                    }
                }
            }
        }
        self.resolve_entries(&deduped)
    }

    /// The resources of `-e` package sources for this run (scope `temporary`, cached under
    /// `<agent>/tmp/extensions/`).
    pub fn resolve_temporary(&self, sources: &[String]) -> ResolvedPackages {
        let entries: Vec<PackageEntry> = sources
            .iter()
            .map(|s| PackageEntry {
                source: s.clone(),
                filter: None,
                scope: Scope::Temporary,
            })
            .collect();
        self.resolve_entries(&entries)
    }

    fn resolve_entries(&self, entries: &[PackageEntry]) -> ResolvedPackages {
        let mut out = ResolvedPackages::default();
        for e in entries {
            let mut info = SourceInfo {
                path: String::new(),
                source: e.source.clone(),
                scope: e.scope.as_str().into(),
                origin: "package".into(),
                base_dir: None,
                changelog_path: None,
            };
            let root = match source::parse(&e.source) {
                Source::Local(l) => {
                    let p = self.local_path(&l, e.scope);
                    if p.is_file() {
                        info.base_dir = p.parent().map(|d| d.display().to_string());
                        out.add(Kind::Extensions, p, &info);
                        continue;
                    }
                    if !p.is_dir() {
                        continue;
                    }
                    p
                }
                Source::Npm(n) => {
                    let path = self.npm_path(&n, e.scope);
                    let needs_install = !path.exists() || !Self::npm_matches(&n, &path);
                    if needs_install && !self.install_missing(e, &mut out) {
                        continue;
                    }
                    path
                }
                Source::Git(g) => {
                    let path = self.git_path(&g, e.scope);
                    if !path.exists() && !self.install_missing(e, &mut out) {
                        continue;
                    }
                    path
                }
            };
            info.base_dir = Some(root.display().to_string());
            info.changelog_path = collect::changelog_path(&root).map(|p| p.display().to_string());
            let (files, any) = collect::package_resources(&root, e.filter.as_ref());
            for (i, kind) in Kind::ALL.iter().enumerate() {
                for f in &files[i] {
                    out.add(*kind, f.clone(), &info);
                }
            }
            if !any && matches!(source::parse(&e.source), Source::Local(_)) {
                for f in collect::extension_entries(&root).unwrap_or_default() {
                    out.add(Kind::Extensions, f, &info);
                }
            }
        }
        out
    }

    /// Installs a configured package that is missing; `false` (and a failure recorded) when
    /// that fails, `false` offline.
    fn install_missing(&self, e: &PackageEntry, out: &mut ResolvedPackages) -> bool {
        if offline() {
            return false;
        }
        if e.scope == Scope::Project && !self.project_trusted {
            return false;
        }
        match self.install(&e.source, e.scope) {
            Ok(()) => true,
            Err(err) => {
                out.failures.push(InstallFailure {
                    source: e.source.clone(),
                    scope: e.scope,
                    message: err.to_string(),
                });
                false
            }
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
