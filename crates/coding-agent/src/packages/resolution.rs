//! Resolving the configured and temporary packages to their resources, installing missing
//! ones first.

use super::collect::Kind;
use super::source::{Scope, Source};
use super::{entries_of, offline, InstallFailure, PackageEntry, PackageManager, ResolvedPackages};
use crate::resources::SourceInfo;
use serde_json::{Map, Value};

impl PackageManager {
    // ---- resolution -----------------------------------------------------------------------

    /// The resources of the configured packages: `project` entries (pass them only for a
    /// trusted project) before `user` ones, one per identity (a project entry replaces the
    /// user entry, except one with `"autoload": false`: that one is a delta resolved over the
    /// user entry's install and goes first, the user entry after it; upstream 1.6
    /// `dedupePackages`, `findAutoloadDeltaBase`). Missing npm/git packages are installed
    /// first (not offline); one that fails is skipped and reported in
    /// [`ResolvedPackages::failures`].
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
                    if deduped[i].scope == Scope::Project && e.scope == Scope::User {
                        if deduped[i].filter.as_ref().is_some_and(|f| f.no_autoload) {
                            deduped.push(e);
                        }
                    } else if e.scope == Scope::Project && deduped[i].scope != Scope::Project {
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

    /// The user entry an `autoload: false` project entry is a delta over: the first user
    /// entry of `entries` with the same identity (upstream `findAutoloadDeltaBase`).
    fn delta_base<'a>(
        &self,
        e: &PackageEntry,
        entries: &'a [PackageEntry],
    ) -> Option<&'a PackageEntry> {
        if e.scope != Scope::Project || !e.filter.as_ref().is_some_and(|f| f.no_autoload) {
            return None;
        }
        let id = self.identity(&e.source, Some(e.scope));
        entries
            .iter()
            .find(|u| u.scope == Scope::User && self.identity(&u.source, Some(Scope::User)) == id)
    }

    pub(super) fn resolve_entries(&self, entries: &[PackageEntry]) -> ResolvedPackages {
        let mut out = ResolvedPackages::default();
        for e in entries {
            // Where the files are: a delta entry's base (its source and scope), else its own.
            let located = match self.delta_base(e, entries) {
                Some(base) => PackageEntry {
                    source: base.source.clone(),
                    filter: e.filter.clone(),
                    scope: base.scope,
                },
                None => e.clone(),
            };
            let mut info = SourceInfo {
                path: String::new(),
                source: e.source.clone(),
                scope: e.scope.as_str().into(),
                origin: "package".into(),
                base_dir: None,
                changelog_path: None,
            };
            let root = match super::source::parse(&located.source) {
                Source::Local(l) => {
                    let p = self.local_path(&l, located.scope);
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
                    let path = self.npm_path(&n, located.scope);
                    let needs_install = !path.exists() || !Self::npm_matches(&n, &path);
                    if needs_install && !self.install_missing(&located, &mut out) {
                        continue;
                    }
                    path
                }
                Source::Git(g) => {
                    let path = self.git_path(&g, located.scope);
                    if !path.exists() && !self.install_missing(&located, &mut out) {
                        continue;
                    }
                    path
                }
            };
            info.base_dir = Some(root.display().to_string());
            info.changelog_path =
                super::collect::changelog_path(&root).map(|p| p.display().to_string());
            if let Some(f) = e.filter.as_ref().filter(|f| f.no_autoload) {
                let files = super::collect::delta_resources(&root, f);
                for (i, kind) in Kind::ALL.iter().enumerate() {
                    for (path, on) in &files[i] {
                        if *on {
                            out.add(*kind, path.clone(), &info);
                        } else {
                            out.add_disabled(*kind, path);
                        }
                    }
                }
                continue;
            }
            let (files, any) = super::collect::package_resources(&root, e.filter.as_ref());
            for (i, kind) in Kind::ALL.iter().enumerate() {
                for f in &files[i] {
                    out.add(*kind, f.clone(), &info);
                }
            }
            if !any && matches!(super::source::parse(&e.source), Source::Local(_)) {
                for f in super::collect::extension_entries(&root).unwrap_or_default() {
                    out.add(Kind::Extensions, f, &info);
                }
            }
        }
        out
    }

    /// Installs a configured package that is missing; `false` (and a failure recorded) when
    /// that fails, `false` offline.
    pub(super) fn install_missing(&self, e: &PackageEntry, out: &mut ResolvedPackages) -> bool {
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
