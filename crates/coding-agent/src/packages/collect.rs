//! The resources one installed package provides (upstream 1.6 `docs/packages.md` "Create a
//! package", "Select package resources"): the `pi` manifest in `package.json` (`extensions`,
//! `skills`, `prompts`, `themes`: paths and globs relative to the package root, `!`/`+`/`-`
//! overrides), else the conventional folders `extensions/`, `skills/`, `prompts/`, `themes/`;
//! then the settings entry's object-form filters narrow that set.

use crate::resources::discover::{self, apply_patterns, SkillMode};
use globset::GlobBuilder;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

/// A resource type a package can provide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Extension entry files (`*.ts`, `*.js`).
    Extensions,
    /// Skill files (`SKILL.md`, root `*.md`).
    Skills,
    /// Prompt templates (`*.md`).
    Prompts,
    /// Themes (`*.json`).
    Themes,
}

impl Kind {
    /// All four, in upstream's order.
    pub const ALL: [Kind; 4] = [Kind::Extensions, Kind::Skills, Kind::Prompts, Kind::Themes];

    /// The manifest / filter / folder name.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Extensions => "extensions",
            Kind::Skills => "skills",
            Kind::Prompts => "prompts",
            Kind::Themes => "themes",
        }
    }
}

/// The object form of a settings `packages` entry: per type `None` = everything the package
/// declares, `Some([])` = none, else patterns over the declared files.
///
/// With `"autoload": false` (upstream 1.6 `docs/packages.md` "Understand scope and identity")
/// nothing loads but what the patterns name: per type `None` or `Some([])` = none, else
/// [`discover::apply_autoload_disabled_patterns`] over the declared files; a project entry of
/// this form over a personal entry of the same package is a delta over that entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Per [`Kind::ALL`] index.
    pub patterns: [Option<Vec<String>>; 4],
    /// The entry has `"autoload": false`.
    pub no_autoload: bool,
}

impl Filter {
    /// The filter of an object entry (`None` for a plain string entry).
    pub fn of(entry: &Value) -> Option<Filter> {
        let obj = entry.as_object()?;
        let mut f = Filter::default();
        for (i, k) in Kind::ALL.iter().enumerate() {
            f.patterns[i] = obj.get(k.key()).and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            });
        }
        f.no_autoload = obj.get("autoload").and_then(Value::as_bool) == Some(false);
        Some(f)
    }
}

/// The `pi` manifest fields of `<root>/package.json` (each a list of strings when given).
fn manifest(root: &Path) -> Option<[Option<Vec<String>>; 4]> {
    let text = std::fs::read_to_string(root.join("package.json")).ok()?;
    let v: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).ok()?;
    let pi = v.get("pi")?.as_object()?;
    let mut out: [Option<Vec<String>>; 4] = Default::default();
    for (i, k) in Kind::ALL.iter().enumerate() {
        if let Some(a) = pi.get(k.key()).and_then(Value::as_array) {
            if a.iter().all(Value::is_string) {
                out[i] = Some(
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect(),
                );
            }
        }
    }
    Some(out)
}

fn is_override(s: &str) -> bool {
    s.starts_with('!') || s.starts_with('+') || s.starts_with('-')
}

fn has_glob(s: &str) -> bool {
    s.contains('*') || s.contains('?')
}

/// `root.join(p)` with `.` and `..` resolved lexically.
fn join_clean(root: &Path, p: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in root.join(p).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The entry files of an extension folder: its manifest's `pi.extensions` that exist, else
/// `index.ts`, else `index.js`; `None` when it has none.
pub fn extension_entries(dir: &Path) -> Option<Vec<PathBuf>> {
    if let Some(m) = manifest(dir) {
        if let Some(list) = &m[0] {
            let found: Vec<PathBuf> = list
                .iter()
                .map(|e| join_clean(dir, e))
                .filter(|p| p.exists())
                .collect();
            if !found.is_empty() {
                return Some(found);
            }
        }
    }
    ["index.ts", "index.js"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.exists())
        .map(|p| vec![p])
}

fn sorted_entries(dir: &Path) -> Vec<(PathBuf, String, bool, bool)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<_> = rd
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let md = std::fs::metadata(&path).ok()?;
            Some((path, name, md.is_dir(), md.is_file()))
        })
        .filter(|(_, n, _, _)| !n.starts_with('.') && n != "node_modules")
        .collect();
    v.sort_by(|a, b| a.1.cmp(&b.1));
    v
}

/// The extensions of an `extensions/` folder: the folder's own entries when it has some, else
/// its `*.ts`/`*.js` files and the entries of its sub-folders.
fn auto_extension_entries(dir: &Path) -> Vec<PathBuf> {
    if !dir.is_dir() {
        return Vec::new();
    }
    if let Some(e) = extension_entries(dir) {
        return e;
    }
    let mut out = Vec::new();
    for (path, name, is_dir, is_file) in sorted_entries(dir) {
        if is_file && (name.ends_with(".ts") || name.ends_with(".js")) {
            out.push(path);
        } else if is_dir {
            out.extend(extension_entries(&path).unwrap_or_default());
        }
    }
    out
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 32 {
        return;
    }
    for (path, name, is_dir, is_file) in sorted_entries(dir) {
        if is_dir {
            json_files(&path, out, depth + 1);
        } else if is_file && name.ends_with(".json") {
            out.push(path);
        }
    }
}

/// The files of one type in a folder (upstream `collectResourceFiles`).
pub fn resource_files(dir: &Path, kind: Kind) -> Vec<PathBuf> {
    match kind {
        Kind::Skills => discover::collect_skill_entries(dir, SkillMode::Pi),
        Kind::Extensions => auto_extension_entries(dir),
        Kind::Prompts => discover::collect_md_files(dir),
        Kind::Themes => {
            let mut out = Vec::new();
            json_files(dir, &mut out, 0);
            out
        }
    }
}

/// Files and folders below `root` whose relative path matches `pattern` (no dot-prefixed
/// segments; `node_modules` only when the pattern names it), sorted.
fn expand_glob(pattern: &str, root: &Path) -> Vec<PathBuf> {
    let pat = pattern.strip_prefix("./").unwrap_or(pattern);
    let Ok(glob) = GlobBuilder::new(pat).literal_separator(true).build() else {
        return Vec::new();
    };
    let m = glob.compile_matcher();
    let into_modules = pat.contains("node_modules");
    let mut out = Vec::new();
    fn walk(
        dir: &Path,
        root: &Path,
        m: &globset::GlobMatcher,
        modules: bool,
        out: &mut Vec<PathBuf>,
        depth: usize,
    ) {
        if depth > 16 {
            return;
        }
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || (!modules && name == "node_modules") {
                continue;
            }
            let path = e.path();
            if let Ok(rel) = path.strip_prefix(root) {
                if m.is_match(rel.to_string_lossy().replace('\\', "/")) {
                    out.push(path.clone());
                }
            }
            if std::fs::metadata(&path).is_ok_and(|md| md.is_dir()) {
                walk(&path, root, m, modules, out, depth + 1);
            }
        }
    }
    walk(root, root, &m, into_modules, &mut out, 0);
    out.sort();
    out
}

/// Files (folders searched by type) of the manifest entries that are not overrides.
fn files_of_entries(entries: &[String], root: &Path, kind: Kind) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in entries.iter().filter(|e| !is_override(e)) {
        let paths = if has_glob(e) {
            expand_glob(e, root)
        } else {
            vec![join_clean(root, e)]
        };
        for p in paths {
            if p.is_file() {
                out.push(p);
            } else if p.is_dir() {
                out.extend(resource_files(&p, kind));
            }
        }
    }
    out
}

/// The files a manifest's entries of one type enable (their overrides applied), in order.
fn manifest_files(entries: &[String], root: &Path, kind: Kind) -> Vec<PathBuf> {
    let all = files_of_entries(entries, root, kind);
    let overrides: Vec<String> = entries.iter().filter(|e| is_override(e)).cloned().collect();
    let on = apply_patterns(&all, &overrides, root);
    all.into_iter().filter(|f| on.contains(f)).collect()
}

/// Everything the package declares of one type: its manifest entries, else its folder.
/// `empty_means_folder`: an empty manifest list falls back to the folder (the filtered
/// form, upstream `collectManifestFiles`) rather than declaring nothing.
fn declared(
    root: &Path,
    man: Option<&[Option<Vec<String>>; 4]>,
    kind: Kind,
    empty_means_folder: bool,
) -> Vec<PathBuf> {
    let i = Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
    match man.and_then(|m| m[i].as_ref()) {
        Some(entries) if !entries.is_empty() => manifest_files(entries, root, kind),
        Some(_) if !empty_means_folder => Vec::new(),
        _ => {
            let dir = root.join(kind.key());
            if dir.exists() {
                resource_files(&dir, kind)
            } else {
                Vec::new()
            }
        }
    }
}

/// The enabled resources of the package at `root`, per [`Kind::ALL`] index, and whether it
/// declared any (a folder without a manifest or conventional folder declares none).
pub fn package_resources(root: &Path, filter: Option<&Filter>) -> ([Vec<PathBuf>; 4], bool) {
    let man = manifest(root);
    let has_manifest_fields = man.as_ref().is_some_and(|m| m.iter().any(Option::is_some));
    let mut out: [Vec<PathBuf>; 4] = Default::default();
    if let Some(filter) = filter {
        for (i, kind) in Kind::ALL.iter().enumerate() {
            out[i] = match &filter.patterns[i] {
                None => declared(root, man.as_ref(), *kind, false),
                Some(p) if p.is_empty() => Vec::new(),
                Some(p) => {
                    let all = declared(root, man.as_ref(), *kind, true);
                    let on = apply_patterns(&all, p, root);
                    all.into_iter().filter(|f| on.contains(f)).collect()
                }
            };
        }
        return (out, true);
    }
    if has_manifest_fields {
        for (i, kind) in Kind::ALL.iter().enumerate() {
            out[i] = match man.as_ref().and_then(|m| m[i].as_ref()) {
                Some(entries) => manifest_files(entries, root, *kind),
                None => Vec::new(),
            };
        }
        return (out, true);
    }
    let mut any = false;
    for (i, kind) in Kind::ALL.iter().enumerate() {
        let dir = root.join(kind.key());
        if dir.exists() {
            any = true;
            out[i] = resource_files(&dir, *kind);
        }
    }
    (out, any)
}

/// The resources an `autoload: false` entry names in the package at `root`, per
/// [`Kind::ALL`] index, each with whether it is turned on (upstream 1.6
/// `applyPackageDeltaFilter`): only files the package declares, only those a pattern names.
pub fn delta_resources(root: &Path, filter: &Filter) -> [Vec<(PathBuf, bool)>; 4] {
    let man = manifest(root);
    let mut out: [Vec<(PathBuf, bool)>; 4] = Default::default();
    for (i, kind) in Kind::ALL.iter().enumerate() {
        let Some(patterns) = filter.patterns[i].as_ref().filter(|p| !p.is_empty()) else {
            continue;
        };
        let all = declared(root, man.as_ref(), *kind, true);
        out[i] = discover::apply_autoload_disabled_patterns(&all, patterns, root);
    }
    out
}

/// The package's changelog: `pi.changelogPath` (`""` = none), else `CHANGELOG.md`, when it is
/// a file whose real path lies inside the package's real root (upstream
/// `resolvePackageChangelogPath`).
pub fn changelog_path(root: &Path) -> Option<PathBuf> {
    let configured = std::fs::read_to_string(root.join("package.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(t.trim_start_matches('\u{feff}')).ok())
        .and_then(|v| {
            v.get("pi")?
                .as_object()?
                .get("changelogPath")?
                .as_str()
                .map(str::to_string)
        });
    let rel = configured.unwrap_or_else(|| "CHANGELOG.md".to_string());
    if rel.is_empty() {
        return None;
    }
    let path = join_clean(root, &rel);
    let real_root = std::fs::canonicalize(root).ok()?;
    let real = std::fs::canonicalize(&path).ok()?;
    (real != real_root && real.starts_with(&real_root) && real.is_file()).then_some(path)
}
