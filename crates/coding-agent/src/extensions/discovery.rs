//! Where extensions come from (issue 12; upstream docs/extensions.md "Extension Locations"):
//! [`discover`] finds the entry files of `-e`, the agent dir, settings, a trusted project's
//! `.pi/extensions/` and packages, each once, in load order.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where an extension was configured (`get_commands` `sourceInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionSource {
    /// The entry file (absolute).
    pub path: PathBuf,
    /// `cli` (from `-e`) or `local` (discovered / settings).
    pub source: &'static str,
    /// `temporary` (cli), `user` (agent dir, settings) or `project` (`.pi/extensions`).
    pub scope: &'static str,
    /// For an extension a package provides ([`crate::packages`]): the `sourceInfo` upstream
    /// reports (`source` = the package source, `origin: "package"`, `baseDir`), which
    /// replaces `source`/`scope` above in `get_commands`.
    pub package: Option<crate::resources::SourceInfo>,
}

impl ExtensionSource {
    /// The entry of a package resource ([`crate::packages::PackageResource`]).
    pub fn from_package(r: &crate::packages::PackageResource) -> Self {
        let scope = match r.info.scope.as_str() {
            "project" => "project",
            "temporary" => "temporary",
            _ => "user",
        };
        ExtensionSource {
            path: r.path.clone(),
            source: "package",
            scope,
            package: Some(r.info.clone()),
        }
    }
}

/// Inputs of [`discover`].
#[derive(Debug, Clone, Default)]
pub struct DiscoverOptions {
    /// `-e` values in order.
    pub cli: Vec<String>,
    /// `--no-extensions`: skip discovery (explicit `-e` still loads).
    pub no_extensions: bool,
    /// Settings `extensions` (paths, relative to the agent dir unless absolute).
    pub settings: Vec<String>,
    /// The agent directory.
    pub agent_dir: PathBuf,
    /// The working directory.
    pub cwd: PathBuf,
    /// Whether the project is trusted (`.pi/extensions` is read only then).
    pub project_trusted: bool,
    /// Extensions of `-e` package sources (npm, git; [`crate::packages`]), loaded right
    /// after the `-e` paths.
    pub cli_packages: Vec<ExtensionSource>,
    /// Extensions of the configured `packages` (loaded last, as upstream ranks package
    /// resources below the user's and project's own); skipped with `--no-extensions`.
    pub packages: Vec<ExtensionSource>,
}

/// The entry files of a path: a file is itself; a folder gives its `package.json`
/// `pi.extensions` entries, else `index.ts` / `index.js` / `index.mjs`.
fn entries_of(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    if !path.is_dir() {
        return vec![];
    }
    if let Ok(text) = std::fs::read_to_string(path.join("package.json")) {
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            if let Some(list) = v.pointer("/pi/extensions").and_then(Value::as_array) {
                return list
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|p| path.join(p))
                    .filter(|p| p.is_file())
                    .collect();
            }
        }
    }
    ["index.ts", "index.js", "index.mjs"]
        .iter()
        .map(|n| path.join(n))
        .find(|p| p.is_file())
        .into_iter()
        .collect()
}

/// The extensions of a discovery folder: its `*.ts`/`*.js`/`*.mjs` files and sub-folders with
/// an entry, sorted by name.
fn scan_dir(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut names: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    names.sort();
    names
        .into_iter()
        .flat_map(|p| {
            if p.is_dir() {
                entries_of(&p)
            } else if p
                .extension()
                .is_some_and(|x| x == "ts" || x == "js" || x == "mjs")
            {
                vec![p]
            } else {
                vec![]
            }
        })
        .collect()
}

fn absolute(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Finds the configured extension entry files, each once, in load order: `-e`, agent dir,
/// settings, trusted project. A `-e` path that does not exist is reported in `missing`.
pub fn discover(o: &DiscoverOptions) -> (Vec<ExtensionSource>, Vec<String>) {
    fn add(out: &mut Vec<ExtensionSource>, src: ExtensionSource) {
        if !out.iter().any(|s| s.path == src.path) {
            out.push(src);
        }
    }
    let mut out: Vec<ExtensionSource> = vec![];
    let mut missing = vec![];
    let local = |path: PathBuf, source, scope| ExtensionSource {
        path,
        source,
        scope,
        package: None,
    };
    for e in &o.cli {
        let p = absolute(&o.cwd, e);
        let found = entries_of(&p);
        if found.is_empty() {
            missing.push(e.clone());
        }
        for f in found {
            add(&mut out, local(f, "cli", "temporary"));
        }
    }
    for p in &o.cli_packages {
        add(&mut out, p.clone());
    }
    if !o.no_extensions {
        for f in scan_dir(&o.agent_dir.join("extensions")) {
            add(&mut out, local(f, "local", "user"));
        }
        for s in &o.settings {
            for f in entries_of(&absolute(&o.agent_dir, s)) {
                add(&mut out, local(f, "local", "user"));
            }
        }
        if o.project_trusted {
            for f in scan_dir(&o.cwd.join(".pi").join("extensions")) {
                add(&mut out, local(f, "local", "project"));
            }
        }
        for p in &o.packages {
            add(&mut out, p.clone());
        }
    }
    (out, missing)
}
