//! Installing, removing and updating packages, and comparing installed and latest versions.

use super::source::{NpmSource, Scope, Source};
use super::{
    io_err, no_match_message, offline, scope_suffix, PackageEntry, PackageError, PackageManager,
    UpdateReport, Updated,
};
use crate::resources::discover::resolve_from;
use serde_json::Value;
use std::path::Path;

impl PackageManager {
    /// Installs `source` for `scope` (a local source must exist; nothing is copied).
    pub fn install(&self, source: &str, scope: Scope) -> Result<(), PackageError> {
        self.trusted(scope)?;
        match super::source::parse(source) {
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
        match super::source::parse(source) {
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

    pub(super) fn installed_version(path: &Path) -> Option<String> {
        let text = std::fs::read_to_string(path.join("package.json")).ok()?;
        let v: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).ok()?;
        v.get("version")?.as_str().map(str::to_string)
    }

    /// The newest registry version for `n` (`npm view <spec> version --json`, the highest
    /// one in its range when several come back).
    pub(super) fn latest_version(&self, n: &NpmSource) -> Result<String, PackageError> {
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

    pub(super) fn version_gt(a: &str, b: &str) -> bool {
        match (semver::Version::parse(a), semver::Version::parse(b)) {
            (Ok(a), Ok(b)) => a > b,
            _ => false,
        }
    }

    /// Whether an installed npm package satisfies its configured version (a range this build
    /// cannot read counts as satisfied).
    pub(super) fn npm_matches(n: &NpmSource, path: &Path) -> bool {
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
                let Source::Npm(n) = super::source::parse(&e.source) else {
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
            let Source::Git(g) = super::source::parse(&e.source) else {
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
}
