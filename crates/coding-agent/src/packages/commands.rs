//! Running npm and git for the package manager: child processes with timeouts and captured
//! output, npm projects and git checkouts, their dependencies and refs.

use super::source::{GitSource, NpmSource, Scope};
use super::{io_err, ChildOutput, PackageError, PackageManager, NETWORK_TIMEOUT};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

impl PackageManager {
    // ---- commands -------------------------------------------------------------------------

    pub(super) fn command(&self, program: &str, args: &[String], cwd: Option<&Path>) -> Command {
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

    pub(super) fn run(
        &self,
        program: &str,
        args: &[String],
        cwd: Option<&Path>,
    ) -> Result<(), PackageError> {
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

    pub(super) fn run_npm(&self, args: &[String], cwd: Option<&Path>) -> Result<(), PackageError> {
        let (program, pre) = self
            .npm
            .split_first()
            .map_or(("npm", &[][..]), |(p, r)| (p.as_str(), r));
        let all: Vec<String> = pre.iter().cloned().chain(args.iter().cloned()).collect();
        self.run(program, &all, cwd)
    }

    /// Runs a command with captured output and a time limit; its trimmed stdout.
    pub(super) fn capture(
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

    pub(super) fn npm_capture(&self, args: &[String]) -> Result<String, PackageError> {
        let (program, pre) = self
            .npm
            .split_first()
            .map_or(("npm", &[][..]), |(p, r)| (p.as_str(), r));
        let all: Vec<String> = pre.iter().cloned().chain(args.iter().cloned()).collect();
        self.capture(program, &all, &self.cwd, NETWORK_TIMEOUT)
    }

    pub(super) fn git(&self, args: &[&str], cwd: Option<&Path>) -> Result<(), PackageError> {
        let a: Vec<String> = args.iter().map(std::string::ToString::to_string).collect();
        self.run("git", &a, cwd)
    }

    pub(super) fn git_capture(&self, args: &[&str], cwd: &Path) -> Result<String, PackageError> {
        let a: Vec<String> = args.iter().map(std::string::ToString::to_string).collect();
        self.capture("git", &a, cwd, NETWORK_TIMEOUT)
    }

    /// The package manager `npmCommand` names (`npm`, `pnpm` or `bun`; a wrapper's last `--`
    /// argument or a known name among its arguments).
    pub(super) fn manager_name(&self) -> String {
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

    pub(super) fn npm_install_args(&self, specs: &[String], root: &Path) -> Vec<String> {
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
        a.extend(rest.iter().map(std::string::ToString::to_string));
        a
    }

    pub(super) fn git_dependency_args(&self) -> Vec<String> {
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
        a.iter().map(std::string::ToString::to_string).collect()
    }

    pub(super) fn ensure_git_ignore(dir: &Path) -> Result<(), PackageError> {
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        let f = dir.join(".gitignore");
        if !f.exists() {
            std::fs::write(&f, "*\n!.gitignore\n").map_err(|e| io_err(&f, e))?;
        }
        Ok(())
    }

    pub(super) fn ensure_npm_project(root: &Path) -> Result<(), PackageError> {
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

    pub(super) fn install_npm(&self, specs: &[String], scope: Scope) -> Result<(), PackageError> {
        self.trusted(scope)?;
        let root = self.npm_root(scope);
        Self::ensure_npm_project(&root)?;
        self.run_npm(&self.npm_install_args(specs, &root), None)
    }

    pub(super) fn uninstall_npm(&self, n: &NpmSource, scope: Scope) -> Result<(), PackageError> {
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

    pub(super) fn marker(target: &Path) -> PathBuf {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        target
            .parent()
            .unwrap_or(target)
            .join(format!(".{name}.pi-update-incomplete"))
    }

    pub(super) fn prune_empty_parents(target: &Path, root: Option<&Path>) {
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

    pub(super) fn install_git_deps(&self, target: &Path) -> Result<(), PackageError> {
        if target.join("package.json").exists() {
            self.run_npm(&self.git_dependency_args(), Some(target))?;
        }
        Ok(())
    }

    pub(super) fn missing_git_deps(target: &Path) -> bool {
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

    pub(super) fn clean_and_install(
        &self,
        target: &Path,
        marker: &Path,
    ) -> Result<(), PackageError> {
        let cleaned = self.git(&["clean", "-fdx"], Some(target)).is_ok();
        self.install_git_deps(target)?;
        if cleaned {
            let _ = std::fs::remove_file(marker);
        }
        Ok(())
    }

    pub(super) fn ensure_git_ref(
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
    pub(super) fn update_target(&self, target: &Path) -> (Vec<String>, String) {
        let fetch = |refspec: String| -> Vec<String> {
            ["fetch", "--prune", "--no-tags", "origin"]
                .iter()
                .map(std::string::ToString::to_string)
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

    pub(super) fn install_git(&self, g: &GitSource, scope: Scope) -> Result<(), PackageError> {
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

    pub(super) fn update_git(&self, g: &GitSource, scope: Scope) -> Result<(), PackageError> {
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
}
