//! Resources the system prompt is built from: project context files (`AGENTS.md` /
//! `CLAUDE.md`), custom/append system prompt sources, and the skill and prompt-template types
//! (spec config.md §1, §6.1, §6.4, §8, §9; upstream `core/resource-loader.ts`).
//!
//! Skill and prompt-template discovery are not implemented: [`Resources::load`] returns empty
//! lists for them.

use crate::config::warn;
use std::path::{Path, PathBuf};

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
    /// `user`, `project` or `path`.
    pub source: String,
}

/// A prompt template (spec config.md §9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplate {
    /// File name without `.md`.
    pub name: String,
    /// Frontmatter `description` or the first body line.
    pub description: String,
    /// Body without frontmatter, trimmed.
    pub content: String,
    /// Absolute path.
    pub file_path: PathBuf,
    /// `user`, `project` or `path`.
    pub source: String,
}

/// Everything discovered for one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// Context files in prompt order ([`load_context_files`]).
    pub context_files: Vec<ContextFile>,
    /// Skills (discovery not implemented: always empty).
    pub skills: Vec<Skill>,
    /// Prompt templates (discovery not implemented: always empty).
    pub prompt_templates: Vec<PromptTemplate>,
    /// Replacement for the default prompt body ([`load_custom_prompt`]).
    pub custom_prompt: Option<String>,
    /// Text appended to the prompt ([`load_append_prompt`]).
    pub append_prompt: Option<String>,
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
    /// Project trust ([`crate::trust`]): `None` trusts every project; otherwise an untrusted
    /// cwd's `.pi/SYSTEM.md` and `.pi/APPEND_SYSTEM.md` are skipped (and its skills and prompt
    /// templates, once discovered).
    pub trust: Option<crate::trust::TrustPolicy>,
}

impl ResourceOptions {
    /// Whether the protected project files of `cwd` may be loaded.
    pub fn project_trusted(&self, cwd: &Path) -> bool {
        self.trust.as_ref().is_none_or(|t| t.decide(cwd).trusted)
    }
}

impl Resources {
    /// Discovers the resources of a session in `cwd` with agent directory `agent_dir`.
    pub fn load(cwd: &Path, agent_dir: &Path, opts: &ResourceOptions) -> Self {
        let trusted = opts.project_trusted(cwd);
        // An untrusted project contributes no `.pi/` prompt files: look in the agent dir only.
        let prompt_cwd = if trusted { Some(cwd) } else { None };
        Resources {
            context_files: if opts.no_context_files {
                Vec::new()
            } else {
                load_context_files(cwd, agent_dir)
            },
            skills: Vec::new(),
            prompt_templates: Vec::new(),
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
