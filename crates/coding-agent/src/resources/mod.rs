//! Resources the system prompt is built from: project context files (`AGENTS.md` /
//! `CLAUDE.md`), custom/append system prompt sources, and the skill and prompt-template types
//! (spec config.md §1, §6.1, §6.4, §8, §9; upstream `core/resource-loader.ts`).
//!
//! Skills and prompt templates are found by [`discover`], read by [`skills`] and
//! [`templates`] (frontmatter: [`frontmatter`]); [`commands`] lists them for `get_commands` and
//! expands `/skill:name` and `/template` input.

pub mod commands;
pub mod discover;
pub mod frontmatter;
pub mod skills;
pub mod templates;

use crate::config::settings::Settings;
use crate::config::warn;
use serde::Serialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Where a skill or prompt template was found, as `get_commands` reports it in `sourceInfo`
/// (upstream 1.6 `core/source-info.ts`): `{path, source, scope, origin, baseDir?}`.
/// `source` is `auto` (auto-discovered folder), `local` (settings entry or CLI path) or
/// `builtin`; `scope` is `user`, `project` or `temporary`; `origin` is `top-level`.
/// `baseDir` is the folder the discovery was rooted at (`<cwd>/.pi`, the agent dir, an
/// `.agents` folder; the skill's folder for a `--skill` path); settings entries have none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceInfo {
    /// Absolute path of the file (or `builtin:<name>`).
    pub path: String,
    /// `auto`, `local` or `builtin`.
    pub source: String,
    /// `user`, `project` or `temporary`.
    pub scope: String,
    /// `top-level`.
    pub origin: String,
    /// Discovery root, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_dir: Option<String>,
    /// For a package resource: the package's changelog file (`pi.changelogPath`, default
    /// `CHANGELOG.md`, when it is a file inside the package), as upstream reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changelog_path: Option<String>,
}

/// File names tried in each directory, first existing regular file wins
/// (upstream-1.6-notes.md item 20: `AGENTS.override.md` replaces `AGENTS.md`).
pub const CONTEXT_FILE_NAMES: [&str; 5] = [
    "AGENTS.override.md",
    "AGENTS.md",
    "AGENTS.MD",
    "CLAUDE.md",
    "CLAUDE.MD",
];

/// A loaded context file: absolute path and UTF-8 content (BOM removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// Its text.
    pub content: String,
}

/// A skill as listed in the system prompt (spec config.md §8.3–§8.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Frontmatter `name` (or the parent directory name).
    pub name: String,
    /// Frontmatter `description`.
    pub description: String,
    /// Absolute path of the skill file (`…/SKILL.md`).
    pub file_path: PathBuf,
    /// The directory relative references resolve against.
    pub base_dir: PathBuf,
    /// `disable-model-invocation: true` hides the skill from the system prompt.
    pub disable_model_invocation: bool,
    /// The scope it was found in: `user`, `project` or `temporary`.
    pub source: String,
    /// Where it was found (`get_commands`).
    pub source_info: SourceInfo,
}

/// A prompt template (spec config.md §9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplate {
    /// File name without `.md`.
    pub name: String,
    /// Frontmatter `description` or the first non-blank body line (60 characters at most,
    /// then `...`).
    pub description: String,
    /// Frontmatter `argument-hint` (e.g. `[focus]`).
    pub argument_hint: Option<String>,
    /// The body: without frontmatter and trimmed, or the whole file when it has none.
    pub content: String,
    /// Absolute path.
    pub file_path: PathBuf,
    /// The scope it was found in: `user`, `project` or `temporary`.
    pub source: String,
    /// Where it was found (`get_commands`).
    pub source_info: SourceInfo,
}

/// Everything discovered for one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// Context files in prompt order ([`load_context_files`]).
    pub context_files: Vec<ContextFile>,
    /// Skills, first of each name ([`load_skills`]).
    pub skills: Vec<Skill>,
    /// Prompt templates, first of each name ([`load_prompt_templates`]).
    pub prompt_templates: Vec<PromptTemplate>,
    /// Replacement for the default prompt body ([`load_custom_prompt`]).
    pub custom_prompt: Option<String>,
    /// Text appended to the prompt ([`load_append_prompt`]).
    pub append_prompt: Option<String>,
}

/// A resource a package provides, with the `sourceInfo` upstream reports for it
/// (`source` = the settings entry, `origin: "package"`, `baseDir` = package root). The
/// packages floor (`crate::packages`) finds them; this floor only consumes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageResource {
    /// The file (absolute).
    pub path: std::path::PathBuf,
    /// Where it came from.
    pub info: SourceInfo,
}

/// What [`Resources::load`] should do.
#[derive(Debug, Clone, Default)]
pub struct ResourceOptions {
    /// `--no-context-files`: skip context file discovery.
    pub no_context_files: bool,
    /// `--system-prompt` value (text or file path).
    pub system_prompt: Option<String>,
    /// `--append-system-prompt` values (text or file paths), in order.
    pub append_system_prompt: Vec<String>,
    /// `--no-skills` / `-ns`: only `--skill` paths are loaded.
    pub no_skills: bool,
    /// `--skill` paths (files or folders), relative to the cwd.
    pub skill_paths: Vec<String>,
    /// `--no-prompt-templates` / `-np`: only `--prompt-template` paths are loaded.
    pub no_prompt_templates: bool,
    /// `--prompt-template` paths (files or folders), relative to the cwd.
    pub prompt_template_paths: Vec<String>,
    /// Project trust ([`crate::trust`]: `--approve`/`--no-approve`, `trust.json`,
    /// `defaultProjectTrust`): `None` trusts every project; otherwise an untrusted cwd's
    /// `.pi/SYSTEM.md`, `.pi/APPEND_SYSTEM.md`, project settings entries, skills (`.pi/skills`,
    /// `.agents/skills` up to the git root) and prompt templates (`.pi/prompts`) are skipped.
    pub trust: Option<crate::trust::TrustPolicy>,
    /// Skills the configured and `-e` packages provide (found by `crate::packages`, the floor
    /// above).
    pub package_skills: Vec<PackageResource>,
    /// Prompt templates the configured and `-e` packages provide.
    pub package_prompts: Vec<PackageResource>,
}

impl ResourceOptions {
    /// Whether the protected project files of `cwd` may be loaded.
    pub fn project_trusted(&self, cwd: &Path) -> bool {
        self.trust.as_ref().is_none_or(|t| t.decide(cwd).trusted)
    }
}

impl Resources {
    /// Discovers the resources of a session in `cwd` with agent directory `agent_dir`;
    /// `settings` supplies the `skills`/`prompts` entries; [`ResourceOptions::trust`] decides
    /// whether the project's protected files are read.
    pub fn load(cwd: &Path, agent_dir: &Path, settings: &Settings, opts: &ResourceOptions) -> Self {
        let home = crate::config::home_dir();
        let trusted = opts.project_trusted(cwd);
        // An untrusted project contributes no `.pi/` prompt files: look in the agent dir only.
        let prompt_cwd = if trusted { Some(cwd) } else { None };
        let candidates = |list: &[PackageResource]| -> Vec<discover::Candidate> {
            list.iter()
                .map(|r| discover::Candidate {
                    path: r.path.clone(),
                    info: r.info.clone(),
                    cli: false,
                })
                .collect()
        };
        let package_skills = candidates(&opts.package_skills);
        let package_prompts = candidates(&opts.package_prompts);
        let input = |no_defaults, cli_paths, packages| discover::GatherInput {
            cwd,
            agent_dir,
            home: home.as_deref(),
            settings,
            trusted,
            no_defaults,
            cli_paths,
            packages,
        };
        let skill_cands = discover::gather(
            discover::Kind::Skills,
            &input(opts.no_skills, &opts.skill_paths, &package_skills),
        );
        let prompt_cands = discover::gather(
            discover::Kind::Prompts,
            &input(
                opts.no_prompt_templates,
                &opts.prompt_template_paths,
                &package_prompts,
            ),
        );
        Resources {
            skills: load_skills(&skill_cands, cwd, agent_dir),
            prompt_templates: load_prompt_templates(&prompt_cands, cwd, agent_dir),
            context_files: if opts.no_context_files {
                Vec::new()
            } else {
                load_context_files(cwd, agent_dir)
            },
            custom_prompt: custom_prompt_from(prompt_cwd, agent_dir, opts.system_prompt.as_deref()),
            append_prompt: append_prompt_from(prompt_cwd, agent_dir, &opts.append_system_prompt),
        }
    }
}

fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

fn read_text(path: &Path) -> std::io::Result<String> {
    let text = std::fs::read_to_string(path)?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(t) => t.to_string(),
        None => text,
    })
}

/// The context file of one directory: the first of [`CONTEXT_FILE_NAMES`] that is a readable
/// regular file. Unreadable candidates are warned about and skipped.
pub fn context_file_in_dir(dir: &Path) -> Option<ContextFile> {
    for name in CONTEXT_FILE_NAMES {
        let path = dir.join(name);
        if !path.is_file() {
            continue;
        }
        match read_text(&path) {
            Ok(content) => return Some(ContextFile { path, content }),
            Err(e) => warn(&format!("Could not read {}: {e}", path.display())),
        }
    }
    None
}

/// Context files in prompt order (spec config.md §6.4): the agent directory's own file first,
/// then one per directory from the filesystem root down to `cwd` (outermost first); a path
/// already included is not repeated.
pub fn load_context_files(cwd: &Path, agent_dir: &Path) -> Vec<ContextFile> {
    let mut files = Vec::new();
    if let Some(global) = context_file_in_dir(&absolute(agent_dir)) {
        files.push(global);
    }
    let cwd = absolute(cwd);
    let mut ancestors: Vec<ContextFile> = cwd.ancestors().filter_map(context_file_in_dir).collect();
    ancestors.reverse();
    for f in ancestors {
        if !files.iter().any(|g| g.path == f.path) {
            files.push(f);
        }
    }
    files
}

/// Text of a `--system-prompt` / `--append-system-prompt` value: an existing file's contents,
/// else the value itself (a file that exists but cannot be read is warned about and the value
/// is used as text).
pub fn resolve_prompt_input(value: &str) -> String {
    let path = Path::new(value);
    if !value.is_empty() && path.exists() {
        match read_text(path) {
            Ok(t) => return t,
            Err(e) => warn(&format!("Could not read system prompt file {value}: {e}")),
        }
    }
    value.to_string()
}

fn first_prompt_file(cwd: Option<&Path>, agent_dir: &Path, name: &str) -> Option<String> {
    cwd.map(|c| c.join(".pi").join(name))
        .into_iter()
        .chain([agent_dir.join(name)])
        .find(|p| p.exists())
        .and_then(|p| match read_text(&p) {
            Ok(t) => Some(t),
            Err(e) => {
                warn(&format!("Could not read {}: {e}", p.display()));
                None
            }
        })
}

/// The custom prompt that replaces the default body (spec config.md §6.1): `--system-prompt`,
/// else `<cwd>/.pi/SYSTEM.md`, else `<agent>/SYSTEM.md`. Empty text counts as none.
pub fn load_custom_prompt(cwd: &Path, agent_dir: &Path, cli: Option<&str>) -> Option<String> {
    custom_prompt_from(Some(cwd), agent_dir, cli)
}

fn custom_prompt_from(cwd: Option<&Path>, agent_dir: &Path, cli: Option<&str>) -> Option<String> {
    let text = match cli {
        Some(v) => Some(resolve_prompt_input(v)),
        None => first_prompt_file(cwd, agent_dir, "SYSTEM.md"),
    };
    text.filter(|t| !t.is_empty())
}

/// The appended prompt text (spec config.md §6.1): the `--append-system-prompt` values joined
/// with blank lines, else `<cwd>/.pi/APPEND_SYSTEM.md`, else `<agent>/APPEND_SYSTEM.md`.
pub fn load_append_prompt(cwd: &Path, agent_dir: &Path, cli: &[String]) -> Option<String> {
    append_prompt_from(Some(cwd), agent_dir, cli)
}

fn append_prompt_from(cwd: Option<&Path>, agent_dir: &Path, cli: &[String]) -> Option<String> {
    let text = if cli.is_empty() {
        first_prompt_file(cwd, agent_dir, "APPEND_SYSTEM.md")
    } else {
        Some(
            cli.iter()
                .map(|v| resolve_prompt_input(v))
                .collect::<Vec<_>>()
                .join("\n\n"),
        )
    };
    text.filter(|t| !t.trim().is_empty())
}

fn under(p: &Path, root: &Path) -> bool {
    p.starts_with(root)
}

/// Source info of a file given on the command line (`--skill`, `--prompt-template`): scope
/// `user`/`project` when it lies in the agent dir's or the project's folder of that kind,
/// else `temporary`; `baseDir` = `skill_base` when given, else that folder.
fn cli_info(
    file: &Path,
    kind_dir: &str,
    cwd: &Path,
    agent_dir: &Path,
    skill_base: Option<&Path>,
) -> SourceInfo {
    let user_root = agent_dir.join(kind_dir);
    let project_root = cwd.join(".pi").join(kind_dir);
    let (scope, root) = if under(file, &user_root) {
        ("user", Some(user_root))
    } else if under(file, &project_root) {
        ("project", Some(project_root))
    } else {
        ("temporary", None)
    };
    let base = match (skill_base, root) {
        (Some(b), _) => b.to_path_buf(),
        (None, Some(r)) => r,
        (None, None) => file.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    SourceInfo {
        path: file.display().to_string(),
        source: "local".into(),
        scope: scope.into(),
        origin: "top-level".into(),
        base_dir: Some(base.display().to_string()),
        changelog_path: None,
    }
}

/// Loads the skills of the gathered candidates (config.md §8): a `--skill` folder is searched
/// like a skills folder, other candidates are files. The same real file is loaded once; a
/// second skill with a used name is dropped with a collision warning. Validation problems are
/// warned about on stderr (`Warning: <file>: <problem>`).
pub fn load_skills(cands: &[discover::Candidate], cwd: &Path, agent_dir: &Path) -> Vec<Skill> {
    let mut out: Vec<Skill> = Vec::new();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut collisions = Vec::new();
    for c in cands {
        let files: Vec<PathBuf> = if c.path.is_dir() {
            discover::collect_skill_entries(&c.path, discover::SkillMode::Pi)
        } else if c.path.extension().is_some_and(|e| e == "md") {
            vec![c.path.clone()]
        } else {
            warn(&format!(
                "{}: skill path is not a markdown file",
                c.path.display()
            ));
            continue;
        };
        for f in files {
            let info = if c.cli {
                cli_info(&f, "skills", cwd, agent_dir, f.parent())
            } else {
                c.info.clone()
            };
            let loaded = skills::load_skill(&f, info);
            for w in &loaded.warnings {
                warn(&format!("{}: {w}", f.display()));
            }
            let Some(skill) = loaded.skill else { continue };
            let key = discover::real_key(&skill.file_path);
            if seen.contains(&key) {
                continue;
            }
            if let Some(winner) = out.iter().find(|s| s.name == skill.name) {
                collisions.push(format!(
                    "skill name \"{}\" collision: {} is not loaded, {} is",
                    skill.name,
                    skill.file_path.display(),
                    winner.file_path.display()
                ));
                continue;
            }
            seen.insert(key);
            out.push(skill);
        }
    }
    for c in collisions {
        warn(&c);
    }
    out
}

/// Loads the prompt templates of the gathered candidates (config.md §9): folders give their
/// direct `*.md` files, files must end in `.md`; the first template of a name wins, later ones
/// are warned about as collisions.
pub fn load_prompt_templates(
    cands: &[discover::Candidate],
    cwd: &Path,
    agent_dir: &Path,
) -> Vec<PromptTemplate> {
    let mut out: Vec<PromptTemplate> = Vec::new();
    for c in cands {
        let files: Vec<PathBuf> = if c.path.is_dir() {
            discover::collect_prompt_entries(&c.path)
        } else if c.path.extension().is_some_and(|e| e == "md") {
            vec![c.path.clone()]
        } else {
            continue;
        };
        for f in files {
            let mut info = if c.cli {
                let base = c.path.is_dir().then_some(c.path.as_path());
                cli_info(&f, "prompts", cwd, agent_dir, base)
            } else {
                c.info.clone()
            };
            info.path = f.display().to_string();
            match templates::load_template(&f, info) {
                Ok(t) => {
                    if let Some(winner) = out.iter().find(|x| x.name == t.name) {
                        warn(&format!(
                            "prompt template name \"/{}\" collision: {} is not loaded, {} is",
                            t.name,
                            t.file_path.display(),
                            winner.file_path.display()
                        ));
                    } else {
                        out.push(t);
                    }
                }
                Err(e) => warn(&format!("{}: {e}", f.display())),
            }
        }
    }
    out
}
