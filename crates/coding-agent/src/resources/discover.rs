//! Where skills and prompt templates come from (spec config.md §8.1–§8.2, §9; upstream 1.6
//! `docs/skills.md`, `docs/prompt-templates.md`, `docs/settings.md#resources`).
//!
//! Order (first path, then first name, wins): project settings entries (relative to
//! `<cwd>/.pi`), global settings entries (relative to the agent dir), then the auto-discovered
//! folders — project `.pi/skills`, `.agents/skills` in the cwd and each ancestor up to the git
//! root, `.pi/prompts` — then the user's `<agent>/skills`, `~/.agents/skills`,
//! `<agent>/prompts`, and last the `--skill` / `--prompt-template` paths. Project locations
//! (project settings entries included) are read only in a trusted project
//! ([`super::ResourceOptions::project_trusted`], [`crate::trust`]).
//!
//! Settings entries: a plain path (file or folder) adds what it holds; `!glob` excludes,
//! `+path` forces in and `-path` forces out (exact paths), also for the auto-discovered files
//! of the same scope.

use super::SourceInfo;
use crate::config::settings::Settings;
use globset::GlobBuilder;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// One resolved candidate file (or `--skill` folder) with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Absolute path.
    pub path: PathBuf,
    /// Source info (`path` filled in later, per loaded item).
    pub info: SourceInfo,
    /// A `--skill` / `--prompt-template` path: folders are searched again by the loader.
    pub cli: bool,
}

/// What to gather.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Skills (`skills` settings key).
    Skills,
    /// Prompt templates (`prompts` settings key).
    Prompts,
}

/// Inputs of [`gather`].
pub struct GatherInput<'a> {
    /// Working directory.
    pub cwd: &'a Path,
    /// Agent directory.
    pub agent_dir: &'a Path,
    /// Home directory (`~/.agents/skills`, `~` in paths).
    pub home: Option<&'a Path>,
    /// Settings (both scopes).
    pub settings: &'a Settings,
    /// Whether the project is trusted ([`super::ResourceOptions::project_trusted`]).
    pub trusted: bool,
    /// `--no-skills` / `--no-prompt-templates`: only the CLI paths.
    pub no_defaults: bool,
    /// `--skill` / `--prompt-template` values, in order.
    pub cli_paths: &'a [String],
    /// Files of this kind the packages provide ([`crate::packages`]), each with its
    /// `sourceInfo`; ranked after the auto-discovered folders, before the CLI paths.
    pub packages: &'a [Candidate],
}

/// The scope-independent part of source infos.
fn meta(source: &str, scope: &str, base_dir: Option<&Path>) -> SourceInfo {
    SourceInfo {
        path: String::new(),
        source: source.into(),
        scope: scope.into(),
        origin: "top-level".into(),
        base_dir: base_dir.map(|b| b.display().to_string()),
        changelog_path: None,
    }
}

/// `p` (trimmed, `~` expanded) made absolute against `base`, with `.` and `..` resolved
/// lexically (as Node's `path.resolve`).
pub fn resolve_from(p: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    let p = p.trim();
    let e = crate::config::expand_home_with(p, home);
    let joined = if e.is_absolute() { e } else { base.join(e) };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Ordered, path-deduplicated accumulation of candidates with their enabled flag.
#[derive(Default)]
struct Acc {
    items: Vec<(Candidate, bool)>,
    seen: HashSet<PathBuf>,
}

impl Acc {
    fn add(&mut self, path: PathBuf, info: &SourceInfo, enabled: bool) {
        if self.seen.insert(path.clone()) {
            self.items.push((
                Candidate {
                    path,
                    info: info.clone(),
                    cli: false,
                },
                enabled,
            ));
        }
    }
}

/// Gathers the candidate files of one kind in precedence order, disabled ones left out.
pub fn gather(kind: Kind, input: &GatherInput<'_>) -> Vec<Candidate> {
    let key = match kind {
        Kind::Skills => "skills",
        Kind::Prompts => "prompts",
    };
    let strings = |m: &serde_json::Map<String, serde_json::Value>| -> Vec<String> {
        m.get(key)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let global_entries = strings(input.settings.global());
    let project_entries = if input.trusted {
        strings(input.settings.project())
    } else {
        Vec::new()
    };
    let project_base = input.cwd.join(".pi");
    let global_base = input.agent_dir.to_path_buf();
    let mut acc = Acc::default();
    if !input.no_defaults {
        settings_entries(
            kind,
            &project_entries,
            &project_base,
            &meta("local", "project", None),
            input.home,
            &mut acc,
        );
        settings_entries(
            kind,
            &global_entries,
            &global_base,
            &meta("local", "user", None),
            input.home,
            &mut acc,
        );
        let mut auto =
            |paths: Vec<PathBuf>, info: SourceInfo, overrides: &[String], base: &Path| {
                for p in paths {
                    let enabled = enabled_by_overrides(&p, overrides, base);
                    acc.add(p, &info, enabled);
                }
            };
        let user_agents = input.home.map(|h| h.join(".agents").join("skills"));
        match kind {
            Kind::Skills => {
                if input.trusted {
                    let dir = project_base.join("skills");
                    auto(
                        collect_skill_entries(&dir, SkillMode::Pi),
                        meta("auto", "project", Some(&project_base)),
                        &project_entries,
                        &project_base,
                    );
                    for dir in ancestor_agents_skill_dirs(input.cwd) {
                        if Some(&dir) == user_agents.as_ref() {
                            continue;
                        }
                        let base = dir.parent().map(Path::to_path_buf).unwrap_or_default();
                        auto(
                            collect_skill_entries(&dir, SkillMode::Agents),
                            meta("auto", "project", Some(&base)),
                            &project_entries,
                            &base,
                        );
                    }
                }
                auto(
                    collect_skill_entries(&global_base.join("skills"), SkillMode::Pi),
                    meta("auto", "user", Some(&global_base)),
                    &global_entries,
                    &global_base,
                );
                if let Some(dir) = &user_agents {
                    let base = dir.parent().map(Path::to_path_buf).unwrap_or_default();
                    auto(
                        collect_skill_entries(dir, SkillMode::Agents),
                        meta("auto", "user", Some(&base)),
                        &global_entries,
                        &base,
                    );
                }
            }
            Kind::Prompts => {
                if input.trusted {
                    auto(
                        collect_prompt_entries(&project_base.join("prompts")),
                        meta("auto", "project", Some(&project_base)),
                        &project_entries,
                        &project_base,
                    );
                }
                auto(
                    collect_prompt_entries(&global_base.join("prompts")),
                    meta("auto", "user", Some(&global_base)),
                    &global_entries,
                    &global_base,
                );
            }
        }
        for c in input.packages {
            acc.add(c.path.clone(), &c.info, true);
        }
    }
    let mut out: Vec<Candidate> = acc
        .items
        .into_iter()
        .filter(|(_, enabled)| *enabled)
        .map(|(c, _)| c)
        .collect();
    let mut keys: HashSet<PathBuf> = out.iter().map(|c| real_key(&c.path)).collect();
    for p in input.cli_paths {
        let path = resolve_from(p, input.cwd, input.home);
        if !path.exists() {
            let what = match kind {
                Kind::Skills => "Skill",
                Kind::Prompts => "Prompt template",
            };
            crate::config::warn(&format!("{what} path does not exist: {}", path.display()));
            continue;
        }
        if keys.insert(real_key(&path)) {
            out.push(Candidate {
                path,
                info: meta("local", "temporary", None),
                cli: true,
            });
        }
    }
    out
}

/// The key two paths to one file share (its canonical path, else the path itself).
pub fn real_key(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn settings_entries(
    kind: Kind,
    entries: &[String],
    base: &Path,
    info: &SourceInfo,
    home: Option<&Path>,
    acc: &mut Acc,
) {
    if entries.is_empty() {
        return;
    }
    let is_pattern = |s: &str| {
        s.starts_with('!')
            || s.starts_with('+')
            || s.starts_with('-')
            || s.contains('*')
            || s.contains('?')
    };
    let (patterns, plain): (Vec<&String>, Vec<&String>) =
        entries.iter().partition(|e| is_pattern(e));
    let mut all = Vec::new();
    for p in plain {
        let path = resolve_from(p, base, home);
        if path.is_file() {
            all.push(path);
        } else if path.is_dir() {
            all.extend(match kind {
                Kind::Skills => collect_skill_entries(&path, SkillMode::Pi),
                Kind::Prompts => collect_md_files(&path),
            });
        }
    }
    let patterns: Vec<String> = patterns.into_iter().cloned().collect();
    let enabled = apply_patterns(&all, &patterns, base);
    for f in all {
        let on = enabled.contains(&f);
        acc.add(f, info, on);
    }
}

/// `<dir>/.agents/skills` for the cwd and each ancestor, stopping at the git root (the first
/// ancestor holding `.git`) when there is one, else at `/`.
pub fn ancestor_agents_skill_dirs(cwd: &Path) -> Vec<PathBuf> {
    let git_root = cwd.ancestors().find(|d| d.join(".git").exists());
    let mut out = Vec::new();
    for d in cwd.ancestors() {
        out.push(d.join(".agents").join("skills"));
        if Some(d) == git_root {
            break;
        }
    }
    out
}

/// Ignore rules met on the way down (`.gitignore`, `.ignore`, `.fdignore`, each scoped to its
/// folder); the innermost matching rule decides.
#[derive(Clone, Default)]
struct Ignores(Vec<Gitignore>);

impl Ignores {
    fn with_dir(&self, dir: &Path) -> Ignores {
        let mut next = self.clone();
        let mut b = GitignoreBuilder::new(dir);
        let mut any = false;
        for name in [".gitignore", ".ignore", ".fdignore"] {
            let f = dir.join(name);
            if f.is_file() {
                any = true;
                if let Some(e) = b.add(&f) {
                    crate::config::warn(&format!("{}: {e}", f.display()));
                }
            }
        }
        if any {
            if let Ok(g) = b.build() {
                next.0.push(g);
            }
        }
        next
    }

    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        for g in self.0.iter().rev() {
            let m = g.matched(path, is_dir);
            if m.is_ignore() {
                return true;
            }
            if m.is_whitelist() {
                return false;
            }
        }
        false
    }
}

fn read_dir_sorted(dir: &Path) -> Vec<(PathBuf, String, bool, bool)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<(PathBuf, String, bool, bool)> = rd
        .filter_map(std::result::Result::ok)
        .filter_map(|e| {
            let path = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            // Symlinks are followed; broken ones are skipped.
            let md = std::fs::metadata(&path).ok()?;
            Some((path, name, md.is_dir(), md.is_file()))
        })
        .collect();
    v.sort_by(|a, b| a.1.cmp(&b.1));
    v
}

/// Which markdown files below the root count (upstream `collectSkillEntries`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillMode {
    /// `.pi/skills`, `<agent>/skills`, settings folders: `*.md` in the root, `SKILL.md` below.
    Pi,
    /// `.agents/skills`: `SKILL.md` anywhere, other `*.md` only below the root.
    Agents,
}

/// Skill files of a skills folder (config.md §8.2): a folder holding `SKILL.md` is a skill
/// and is not descended further; names starting with `.` and `node_modules` are skipped, as
/// is whatever the ignore files along the way ignore.
pub fn collect_skill_entries(dir: &Path, mode: SkillMode) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if dir.is_dir() {
        skill_walk(dir, dir, mode, &Ignores::default(), &mut out, 0);
    }
    out
}

fn skill_walk(
    dir: &Path,
    root: &Path,
    mode: SkillMode,
    ig: &Ignores,
    out: &mut Vec<PathBuf>,
    depth: usize,
) {
    if depth > 32 {
        return;
    }
    let ig = ig.with_dir(dir);
    let entries = read_dir_sorted(dir);
    if let Some((p, _, _, _)) = entries
        .iter()
        .find(|(p, n, _, f)| n == "SKILL.md" && *f && !ig.ignored(p, false))
    {
        out.push(p.clone());
        return;
    }
    for (path, name, is_dir, is_file) in entries {
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        let md_here = match mode {
            SkillMode::Pi => dir == root,
            SkillMode::Agents => dir != root,
        };
        if is_file && name.ends_with(".md") && md_here && !ig.ignored(&path, false) {
            out.push(path);
            continue;
        }
        if is_dir && !ig.ignored(&path, true) {
            skill_walk(&path, root, mode, &ig, out, depth + 1);
        }
    }
}

/// `*.md` files directly in a prompts folder (dot files and ignored files skipped).
pub fn collect_prompt_entries(dir: &Path) -> Vec<PathBuf> {
    if !dir.is_dir() {
        return Vec::new();
    }
    let ig = Ignores::default().with_dir(dir);
    read_dir_sorted(dir)
        .into_iter()
        .filter(|(p, n, _, f)| {
            *f && !n.starts_with('.') && n.ends_with(".md") && !ig.ignored(p, false)
        })
        .map(|(p, ..)| p)
        .collect()
}

/// `*.md` files anywhere below `dir` (settings folders of prompts).
pub fn collect_md_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, ig: &Ignores, out: &mut Vec<PathBuf>, depth: usize) {
        if depth > 32 {
            return;
        }
        let ig = ig.with_dir(dir);
        for (path, name, is_dir, is_file) in read_dir_sorted(dir) {
            if name.starts_with('.') || name == "node_modules" || ig.ignored(&path, is_dir) {
                continue;
            }
            if is_dir {
                walk(&path, &ig, out, depth + 1);
            } else if is_file && name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &Ignores::default(), &mut out, 0);
    out
}

fn posix(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "/")
}

fn relative(base: &Path, p: &Path) -> String {
    match p.strip_prefix(base) {
        Ok(r) => posix(r),
        Err(_) => posix(p),
    }
}

/// The forms of a path a pattern is compared with: relative to `base`, the file name, the
/// absolute path, and for a `SKILL.md` the same three of its folder.
fn forms(p: &Path, base: &Path) -> Vec<String> {
    let mut v = vec![
        relative(base, p),
        p.file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        posix(p),
    ];
    if p.file_name().is_some_and(|n| n == "SKILL.md") {
        if let Some(d) = p.parent() {
            v.push(relative(base, d));
            v.push(
                d.file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default(),
            );
            v.push(posix(d));
        }
    }
    v
}

fn matches_glob(p: &Path, patterns: &[&str], base: &Path) -> bool {
    let f = forms(p, base);
    patterns.iter().any(|pat| {
        let pat = pat.strip_prefix("./").unwrap_or(pat);
        match GlobBuilder::new(pat).literal_separator(true).build() {
            Ok(g) => {
                let m = g.compile_matcher();
                f.iter().any(|s| m.is_match(s))
            }
            Err(_) => false,
        }
    })
}

fn matches_exact(p: &Path, patterns: &[&str], base: &Path) -> bool {
    let rel = relative(base, p);
    let abs = posix(p);
    let skill_dir = p
        .file_name()
        .is_some_and(|n| n == "SKILL.md")
        .then(|| p.parent())
        .flatten();
    patterns.iter().any(|pat| {
        let n = pat.strip_prefix("./").unwrap_or(pat).trim_end_matches('/');
        n == rel || n == abs || skill_dir.is_some_and(|d| n == relative(base, d) || n == posix(d))
    })
}

fn split(patterns: &[String], prefix: char) -> Vec<&str> {
    patterns
        .iter()
        .filter_map(|p| p.strip_prefix(prefix))
        .collect()
}

/// The files of `all` that the patterns of an `autoload: false` package entry name, each with
/// whether it is turned on (upstream 1.6 `applyAutoloadDisabledPatterns`): a plain pattern
/// (glob) and `+path` (exact) turn matches on, `!pattern` (glob) and `-path` (exact) turn them
/// off; a later pattern overrides an earlier one. Files no pattern names are left out; the
/// order is that of each file's first match.
pub fn apply_autoload_disabled_patterns(
    all: &[PathBuf],
    patterns: &[String],
    base: &Path,
) -> Vec<(PathBuf, bool)> {
    let mut out: Vec<(PathBuf, bool)> = Vec::new();
    for pattern in patterns {
        let target = pattern
            .strip_prefix(['+', '-', '!'])
            .unwrap_or(pattern.as_str());
        let on = !pattern.starts_with(['-', '!']);
        let exact = pattern.starts_with(['+', '-']);
        for p in all {
            let hit = if exact {
                matches_exact(p, &[target], base)
            } else {
                matches_glob(p, &[target], base)
            };
            if !hit {
                continue;
            }
            match out.iter_mut().find(|(q, _)| q == p) {
                Some(slot) => slot.1 = on,
                None => out.push((p.clone(), on)),
            }
        }
    }
    out
}

/// Whether an auto-discovered file stays enabled under the `!`/`+`/`-` entries of its scope.
pub fn enabled_by_overrides(p: &Path, entries: &[String], base: &Path) -> bool {
    let mut on = true;
    let ex = split(entries, '!');
    if !ex.is_empty() && matches_glob(p, &ex, base) {
        on = false;
    }
    let inc = split(entries, '+');
    if !inc.is_empty() && matches_exact(p, &inc, base) {
        on = true;
    }
    let fex = split(entries, '-');
    if !fex.is_empty() && matches_exact(p, &fex, base) {
        on = false;
    }
    on
}

/// The enabled subset of the files a scope's plain settings entries yielded: plain glob
/// entries include (all when none), `!` excludes, `+` forces in, `-` forces out.
pub fn apply_patterns(all: &[PathBuf], patterns: &[String], base: &Path) -> HashSet<PathBuf> {
    let includes: Vec<&str> = patterns
        .iter()
        .filter(|p| !p.starts_with(['+', '-', '!']))
        .map(String::as_str)
        .collect();
    let ex = split(patterns, '!');
    let inc = split(patterns, '+');
    let fex = split(patterns, '-');
    let mut result: Vec<&PathBuf> = all
        .iter()
        .filter(|p| includes.is_empty() || matches_glob(p, &includes, base))
        .filter(|p| ex.is_empty() || !matches_glob(p, &ex, base))
        .collect();
    for p in all {
        if !inc.is_empty() && !result.contains(&p) && matches_exact(p, &inc, base) {
            result.push(p);
        }
    }
    result
        .into_iter()
        .filter(|p| fex.is_empty() || !matches_exact(p, &fex, base))
        .cloned()
        .collect()
}
