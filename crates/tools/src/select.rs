//! Which built-in tools a session starts with (upstream-1.6-notes.md item 23; upstream 1.6
//! `docs/cli.md` "Tool options" and `docs/settings.md` `defaultTools`).
//!
//! * The default set is `defaultTools` from settings (resolved by [`resolve_default_tools`]),
//!   else [`super::DEFAULT_TOOLS`]; `--no-tools`/`--no-builtin-tools` make it empty.
//! * `--tools a,b*` is an allowlist of names and `*` patterns: exactly the matching tools are
//!   active, in the order named, then any further pattern matches in [`super::ALL_TOOLS`] order.
//! * `--tools +x,-y` (only edits) adds to / removes from the default set, in order.
//! * `--exclude-tools` names and patterns are removed from whatever the rest selects.

use super::ALL_TOOLS;
use pi_platform::cli::is_tool_modifier;

/// Whether `name` matches `pattern`, where `*` matches any run of characters (possibly empty)
/// and everything else matches itself.
pub fn tool_pattern_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || !name.ends_with(last) || name.len() < first.len() + last.len() {
        return false;
    }
    // Both ends are char boundaries: `first` is a prefix and `last` a suffix of `name`.
    let mut rest = name
        .get(first.len()..name.len() - last.len())
        .unwrap_or_default();
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `name` matches any entry (exact name or `*` pattern).
pub fn matches_any(entries: &[String], name: &str) -> bool {
    entries.iter().any(|e| tool_pattern_matches(e, name))
}

/// Applies `+name` / `-name` entries to `base`, in order; other entries are ignored.
pub fn apply_tool_modifiers(base: &[String], entries: &[String]) -> Vec<String> {
    let mut tools = base.to_vec();
    for entry in entries {
        if let Some(name) = entry.strip_prefix('+') {
            if !name.is_empty() && !tools.iter().any(|t| t == name) {
                tools.push(name.to_string());
            }
        } else if let Some(name) = entry.strip_prefix('-') {
            tools.retain(|t| t != name);
        }
    }
    tools
}

/// Resolves a merged `defaultTools` setting: plain names replace the built-in default set, then
/// `+name` adds and `-name` removes, in list order (an empty list selects nothing).
pub fn resolve_default_tools(entries: &[String]) -> Vec<String> {
    let plain: Vec<String> = entries
        .iter()
        .filter(|e| !is_tool_modifier(e))
        .cloned()
        .collect();
    let base = if plain.is_empty() && !entries.is_empty() {
        super::DEFAULT_TOOLS
            .iter()
            .map(std::string::ToString::to_string)
            .collect()
    } else {
        plain
    };
    apply_tool_modifiers(&base, entries)
}

/// The tool flags of the command line and the `defaultTools` setting.
#[derive(Debug, Clone, Default)]
pub struct ToolSelection {
    /// `--no-tools`.
    pub no_tools: bool,
    /// `--no-builtin-tools`.
    pub no_builtin_tools: bool,
    /// `--tools` entries (already validated by [`pi_platform::cli::tool_list_error`]).
    pub tools: Option<Vec<String>>,
    /// `--exclude-tools` entries.
    pub exclude_tools: Option<Vec<String>>,
    /// The resolved `defaultTools` setting, if any settings layer sets it.
    pub default_tools: Option<Vec<String>>,
}

impl ToolSelection {
    /// Whether the extension tool `name` (`pi.registerTool`) is active (upstream docs/cli.md
    /// "Tool options"): extension tools are part of the default selection, so `--no-tools`
    /// drops them and `--no-builtin-tools` keeps them; a `--tools` allowlist keeps only those
    /// it names or matches; `--tools +x,-y` edits leave them (checked against upstream 1.6);
    /// `--exclude-tools` applies last.
    pub fn keeps_extension_tool(&self, name: &str) -> bool {
        if self
            .exclude_tools
            .as_ref()
            .is_some_and(|ex| matches_any(ex, name))
        {
            return false;
        }
        let edits = self
            .tools
            .as_ref()
            .filter(|t| t.iter().any(|e| is_tool_modifier(e)));
        match (edits, &self.tools) {
            // `+name`/`-name` edit the built-in default set; extension tools stay (upstream
            // 1.6 keeps `count` for `--tools -count`).
            (Some(edits), _) => {
                !self.no_tools || edits.iter().any(|e| e.strip_prefix('+') == Some(name))
            }
            (None, Some(list)) => matches_any(list, name),
            (None, None) => !self.no_tools,
        }
    }

    /// The active built-in tool names, in order (no duplicates, only names of
    /// [`super::ALL_TOOLS`]).
    pub fn resolve(&self) -> Vec<String> {
        let defaults: Vec<String> = if self.no_tools || self.no_builtin_tools {
            Vec::new()
        } else {
            self.default_tools.clone().unwrap_or_else(|| {
                super::DEFAULT_TOOLS
                    .iter()
                    .map(std::string::ToString::to_string)
                    .collect()
            })
        };
        let edits = self
            .tools
            .as_ref()
            .filter(|t| t.iter().any(|e| is_tool_modifier(e)));
        let (selected, allowed): (Vec<String>, Option<Vec<String>>) = match (edits, &self.tools) {
            (Some(edits), _) => {
                let selected = apply_tool_modifiers(&defaults, edits);
                let allowed = self.no_tools.then(|| selected.clone());
                (selected, allowed)
            }
            (None, Some(list)) => (list.clone(), Some(list.clone())),
            (None, None) if self.no_tools => (defaults, Some(Vec::new())),
            (None, None) => (defaults, None),
        };
        let excluded = |name: &str| {
            self.exclude_tools
                .as_ref()
                .is_some_and(|ex| matches_any(ex, name))
        };
        let usable = |name: &str| {
            (ALL_TOOLS.contains(&name) || name == super::CODEMODE_TOOL)
                && !excluded(name)
                && allowed.as_ref().is_none_or(|a| matches_any(a, name))
        };
        let mut active: Vec<String> = Vec::new();
        let mut push = |name: &str| {
            if usable(name) && !active.iter().any(|a| a == name) {
                active.push(name.to_string());
            }
        };
        for name in &selected {
            push(name);
        }
        if let Some(allowed) = &allowed {
            for name in ALL_TOOLS {
                if matches_any(allowed, name) {
                    push(name);
                }
            }
        }
        active
    }
}
