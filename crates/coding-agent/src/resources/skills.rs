//! Skills (spec config.md §8; upstream 1.6 `docs/skills.md`): loading one skill file with its
//! validation warnings, discovery inside a skills folder given with `--skill`, and the
//! `/skill:name args` expansion.

use super::frontmatter;
use super::{Skill, SourceInfo};
use std::path::Path;

/// Longest valid skill name (Agent Skills specification).
pub const MAX_NAME_LENGTH: usize = 64;
/// Longest valid description.
pub const MAX_DESCRIPTION_LENGTH: usize = 1024;

/// The warnings for a skill name: over 64 characters, characters other than `a-z 0-9 -`,
/// a leading or trailing `-`, `--`. The skill is still loaded.
pub fn validate_name(name: &str) -> Vec<String> {
    let mut w = Vec::new();
    let len = name.chars().count();
    if len > MAX_NAME_LENGTH {
        w.push(format!(
            "name is longer than {MAX_NAME_LENGTH} characters ({len})"
        ));
    }
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        w.push("name may only hold lowercase letters a-z, digits 0-9 and hyphens".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        w.push("name must not begin or end with a hyphen".into());
    }
    if name.contains("--") {
        w.push("name must not hold two hyphens in a row".into());
    }
    w
}

/// Result of reading one candidate skill file.
#[derive(Debug, Default)]
pub struct LoadedSkill {
    /// The skill, when it has a description.
    pub skill: Option<Skill>,
    /// Warnings (`path: message` is how they are printed).
    pub warnings: Vec<String>,
}

/// Loads one skill file (config.md §8.3). `name` = frontmatter `name`, else the parent
/// directory's name; a missing or blank `description` drops the skill (warned for `SKILL.md`
/// files; other `*.md` files without one are not skills and are skipped silently); malformed
/// frontmatter drops it (warned for `SKILL.md`). `info` is its source info (`path` is set
/// here).
pub fn load_skill(path: &Path, mut info: SourceInfo) -> LoadedSkill {
    let declared = path.file_name().is_some_and(|n| n == "SKILL.md");
    let mut out = LoadedSkill::default();
    let raw = match std::fs::read_to_string(path) {
        Ok(r) => r,
        Err(e) => {
            out.warnings
                .push(format!("could not read the skill file: {e}"));
            return out;
        }
    };
    let parsed = match frontmatter::parse(&raw) {
        Ok(p) => p,
        Err(e) => {
            if declared {
                out.warnings.push(e.to_string());
            }
            return out;
        }
    };
    let description = parsed.str("description").unwrap_or_default().to_string();
    let has_description = !description.trim().is_empty();
    if !declared && !has_description {
        return out;
    }
    if !has_description {
        out.warnings
            .push("description is missing; the skill is not loaded".into());
    } else if description.chars().count() > MAX_DESCRIPTION_LENGTH {
        out.warnings.push(format!(
            "description is longer than {MAX_DESCRIPTION_LENGTH} characters ({})",
            description.chars().count()
        ));
    }
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let dir_name = base_dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let name = parsed
        .str("name")
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .unwrap_or(dir_name);
    out.warnings.extend(validate_name(&name));
    if !has_description {
        return out;
    }
    info.path = path.display().to_string();
    out.skill = Some(Skill {
        name,
        description,
        file_path: path.to_path_buf(),
        base_dir,
        disable_model_invocation: parsed.bool("disable-model-invocation") == Some(true),
        source: info.scope.clone(),
        source_info: info,
    });
    out
}

/// `/skill:name args` (config.md §8.5): for a known skill, its file is read again now and the
/// text becomes `<skill name="N" location="FILE">\nReferences are relative to DIR.\n\nBODY\n</skill>`
/// plus `\n\nARGS` when the (trimmed) arguments are not empty. The name runs to the first space.
/// `Ok(None)` = not a skill command or an unknown skill (the text goes on unchanged);
/// `Err` = the skill file could not be read (the caller reports it and sends the text as is).
pub fn expand(text: &str, skills: &[Skill]) -> Result<Option<String>, (String, std::io::Error)> {
    let Some(rest) = text.strip_prefix("/skill:") else {
        return Ok(None);
    };
    let (name, args) = match rest.find(' ') {
        Some(i) => (&rest[..i], rest[i + 1..].trim()),
        None => (rest, ""),
    };
    let Some(skill) = skills.iter().find(|s| s.name == name) else {
        return Ok(None);
    };
    let raw = std::fs::read_to_string(&skill.file_path)
        .map_err(|e| (skill.file_path.display().to_string(), e))?;
    let body = frontmatter::strip(&raw);
    let block = format!(
        "<skill name=\"{}\" location=\"{}\">\nReferences are relative to {}.\n\n{}\n</skill>",
        skill.name,
        skill.file_path.display(),
        skill.base_dir.display(),
        body.trim()
    );
    Ok(Some(if args.is_empty() {
        block
    } else {
        format!("{block}\n\n{args}")
    }))
}
