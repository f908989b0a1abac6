//! Command-line flags (spec config.md §7.2, upstream-1.6-notes.md items 23–25; upstream 1.6
//! `docs/cli.md` and its `--help`).
//!
//! The flags and subcommands are defined once, in the table of `cli/flags.rs`; [`Cli::parse`]
//! looks each argument up there and `--help` ([`help_with`], `cli/help.rs`) prints its rows, so
//! the two cannot drift apart. The parser is our own rather than clap because upstream's
//! command line cannot be described to clap without changing its meaning:
//! * short forms are whole words (`-nt` is `--no-tools`, never `-n t`; `-xt`, `-nbt`, `-na`, …);
//! * `-p` takes the next argument as a message unless it starts with `-` or `@`;
//! * `--list-models` takes an optional search word; `--tui-mode`/`--use-theme` refuse a next
//!   argument that starts with `-`;
//! * `@path` arguments are file arguments wherever they appear, `--` ends option parsing;
//! * unknown `--flag`, `--flag value` and `--flag=value` are collected for extensions (an error
//!   once it is known that no extension registers them), unknown single-dash options are errors.
//!
//! Like upstream, a value flag at the end of the line without its value is not taken as that
//! flag (it goes on to the unknown-flag rules above), except `--name`, `--mode`,
//! `--permission-mode`, `--use-theme` and `--tui-mode`, which report an error; and
//! `--flag=value` is only understood for unknown (extension) flags.

mod flags;
mod help;

use flags::Value;
use pi_ai::ThinkingLevel;
use std::path::PathBuf;

/// The thinking levels `--thinking` accepts, in the order the warnings list them.
pub const THINKING_LEVELS: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];

/// Whether a startup problem stops the program (`Error:`, exit 1) or is only reported
/// (`Warning:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Printed as `Error: <message>`; the program exits 1 after printing all diagnostics.
    Error,
    /// Printed as `Warning: <message>`.
    Warning,
}

/// One problem found while parsing the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The text after `Error: ` / `Warning: `.
    pub message: String,
}

/// The value of an unknown (extension) flag: `--flag` alone is `Bool`, `--flag value` and
/// `--flag=value` are `Text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlagValue {
    /// The flag was given without a value.
    Bool,
    /// The flag's value.
    Text(String),
}

/// `--list-models [search]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListModels {
    /// `--list-models` alone: list every model.
    All,
    /// `--list-models <search>`: fuzzy-filter by this text.
    Search(String),
}

/// The parsed command line of a run (everything except the subcommands, see [`subcommand`]).
/// Field names follow upstream's long flags.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cli {
    /// `-h`, `--help`.
    pub help: bool,
    /// `-v`, `--version`.
    pub version: bool,
    /// `--mode text|json|rpc|acp` (other values are an error diagnostic and leave this unset).
    pub mode: Option<String>,
    /// `-p`, `--print`.
    pub print: bool,
    /// `-c`, `--continue`.
    pub continue_session: bool,
    /// `-r`, `--resume`.
    pub resume: bool,
    /// `--provider <name>`.
    pub provider: Option<String>,
    /// `--model <pattern>`.
    pub model: Option<String>,
    /// `--api-key <key>`.
    pub api_key: Option<String>,
    /// `--system-prompt <text|file>`.
    pub system_prompt: Option<String>,
    /// `--append-system-prompt <text|file>`, repeatable, in order.
    pub append_system_prompt: Vec<String>,
    /// `-n`, `--name <name>` (the session display name, untrimmed).
    pub name: Option<String>,
    /// `--no-session`.
    pub no_session: bool,
    /// `--session <path|id>`: a session file path, or a full or partial session id (told apart
    /// when the session is opened, `session/resolve.rs`).
    pub session: Option<String>,
    /// `--session-id <id>`.
    pub session_id: Option<String>,
    /// `--fork <path|id>`.
    pub fork: Option<String>,
    /// `--session-dir <dir>`.
    pub session_dir: Option<PathBuf>,
    /// `--models <patterns>`: split at commas, trimmed, empty entries dropped.
    pub models: Option<Vec<String>>,
    /// `-nt`, `--no-tools`: no tools by default (built-in and extension).
    pub no_tools: bool,
    /// `-nbt`, `--no-builtin-tools`: no built-in tools by default.
    pub no_builtin_tools: bool,
    /// `-t`, `--tools <list>`: split at commas, trimmed; either names and `*` patterns (an
    /// allowlist) or only `+name`/`-name` edits of the default set.
    pub tools: Option<Vec<String>>,
    /// `-xt`, `--exclude-tools <list>`: names and `*` patterns to disable.
    pub exclude_tools: Option<Vec<String>>,
    /// `--thinking <level>` (an invalid level is a warning and leaves this unset).
    pub thinking: Option<ThinkingLevel>,
    /// `-e`, `--extension <path>`, repeatable.
    pub extension: Vec<String>,
    /// `-ne`, `--no-extensions`.
    pub no_extensions: bool,
    /// `--no-mcp`.
    pub no_mcp: bool,
    /// `--permission-mode off|ask|deny`: overrides the `permissions.mode` setting (other
    /// values are an error diagnostic and leave this unset).
    pub permission_mode: Option<String>,
    /// `--skill <path>`, repeatable.
    pub skill: Vec<String>,
    /// `-ns`, `--no-skills`.
    pub no_skills: bool,
    /// `--prompt-template <path>`, repeatable.
    pub prompt_template: Vec<String>,
    /// `-np`, `--no-prompt-templates`.
    pub no_prompt_templates: bool,
    /// `--theme <path>`, repeatable (interactive only; ignored headless).
    pub theme: Vec<String>,
    /// `--use-theme <name>` (interactive only).
    pub use_theme: Option<String>,
    /// `--no-themes` (interactive only).
    pub no_themes: bool,
    /// `-nc`, `--no-context-files`.
    pub no_context_files: bool,
    /// `--export <file>`; an output path is the first message.
    pub export: Option<String>,
    /// `--list-models [search]`.
    pub list_models: Option<ListModels>,
    /// `--verbose` (interactive startup output; ignored headless).
    pub verbose: bool,
    /// `--tui-mode fullscreen|regular` (interactive only).
    pub tui_mode: Option<String>,
    /// `-a`, `--approve` → `Some(true)`; `-na`, `--no-approve` → `Some(false)`; the last wins.
    pub approve: Option<bool>,
    /// `--offline` (same as `PI_OFFLINE=1`).
    pub offline: bool,
    /// `--sandbox <mode>`: the bash tool's kernel sandbox mode (`full`, `workspace-write`,
    /// `read-only`), as given; overrides the `sandbox.mode` setting. Checked at start-up
    /// (`pi_coding_agent::sandbox`), where an unknown mode is an error (exit 1).
    pub sandbox: Option<String>,
    /// `@path` arguments without the `@`, in order.
    pub file_args: Vec<String>,
    /// Positional messages, in order.
    pub messages: Vec<String>,
    /// Unknown `--flags` (for extensions), in order of first appearance.
    pub unknown_flags: Vec<(String, FlagValue)>,
    /// Problems found while parsing, in order.
    pub diagnostics: Vec<Diagnostic>,
}

/// A subcommand: the first argument names a command, so the line is never a prompt
/// (upstream-1.6-notes.md item 25).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subcommand {
    /// `pi install <source> [-l]`.
    Install,
    /// `pi remove|uninstall <source> [-l]`.
    Remove,
    /// `pi update [source|self|pi]`.
    Update,
    /// `pi list`.
    List,
    /// `pi config [-l]`.
    Config,
    /// `pi auth <command>`.
    Auth,
    /// `pi mcp <command>`.
    Mcp,
    /// `pi models pull|list` (this build's local-model command, `models_cmd`).
    Models,
}

/// The subcommand named by the first argument, if any (`install`, `remove`, `uninstall`,
/// `update`, `list`, `config`, `auth`, `mcp`, `models`).
pub fn subcommand(first: Option<&str>) -> Option<Subcommand> {
    let first = first?;
    flags::COMMANDS
        .iter()
        .find(|c| c.name == first)
        .map(|c| c.command)
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether a `--tools` / `defaultTools` entry is a `+name` or `-name` edit.
pub fn is_tool_modifier(entry: &str) -> bool {
    entry.starts_with('+') || entry.starts_with('-')
}

/// The problem with a `--tools` list, if any: edits (`+name`/`-name`) cannot be mixed with
/// names, and edits take exact names, not `*` patterns (upstream `getToolListError`).
pub fn tool_list_error(entries: &[String]) -> Option<String> {
    let edits: Vec<&String> = entries.iter().filter(|e| is_tool_modifier(e)).collect();
    if edits.is_empty() {
        return None;
    }
    if edits.len() < entries.len() {
        return Some("tool names cannot be mixed with +name or -name entries".into());
    }
    edits
        .iter()
        .find(|e| e.contains('*'))
        .map(|p| format!("+name and -name entries take exact tool names, not patterns: {p}"))
}

impl Cli {
    fn error(&mut self, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic {
            severity: Severity::Error,
            message: message.into(),
        });
    }

    fn warning(&mut self, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic {
            severity: Severity::Warning,
            message: message.into(),
        });
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }

    fn set_unknown(&mut self, name: &str, value: FlagValue) {
        match self.unknown_flags.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value,
            None => self.unknown_flags.push((name.to_string(), value)),
        }
    }

    /// Parses the arguments after the program name. Never fails: problems are recorded in
    /// [`Cli::diagnostics`].
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Cli {
        let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        let mut cli = Cli::default();
        let mut i = 0;
        while i < args.len() {
            let arg = args[i];
            let next = args.get(i + 1).copied();
            let taken = match flags::find(arg).map(|f| f.value) {
                Some(Value::EndOfOptions) => {
                    for rest in &args[i + 1..] {
                        match rest.strip_prefix('@') {
                            Some(path) => cli.file_args.push(path.to_string()),
                            None => cli.messages.push(rest.to_string()),
                        }
                    }
                    break;
                }
                Some(value) => cli.take(value, arg, next),
                None => None,
            };
            i += 1 + match taken {
                Some(n) => n,
                None => cli.take_other(arg, next),
            };
        }
        cli
    }

    /// Applies the table flag `arg` with its `value` kind; `next` is the argument after it.
    /// How many arguments after `arg` it used, or `None` when it falls through to
    /// [`Cli::take_other`] (a [`Value::One`] flag that ends the line).
    fn take(&mut self, value: Value, arg: &str, next: Option<&str>) -> Option<usize> {
        Some(match (value, next) {
            (Value::None(set), _) => {
                set(self);
                0
            }
            (Value::One(set), Some(v)) => {
                set(self, arg, v);
                1
            }
            (Value::One(_), None) => return None,
            (Value::Required { set, .. }, Some(v)) => {
                set(self, v);
                1
            }
            (Value::Word { set, .. }, Some(v)) if !v.starts_with('-') => {
                set(self, v);
                1
            }
            (Value::Required { missing, .. } | Value::Word { missing, .. }, _) => {
                self.error(missing);
                0
            }
            (Value::Optional(set), Some(v)) if !v.starts_with('-') && !v.starts_with('@') => {
                set(self, Some(v));
                1
            }
            (Value::Optional(set), _) => {
                set(self, None);
                0
            }
            (Value::Message(set), next) => {
                set(self);
                match next {
                    Some(m)
                        if !m.starts_with('@') && (!m.starts_with('-') || m.starts_with("---")) =>
                    {
                        self.messages.push(m.to_string());
                        1
                    }
                    _ => 0,
                }
            }
            // Handled by the caller: it ends the loop.
            (Value::EndOfOptions, _) => 0,
        })
    }

    /// An argument the table does not take: an `@file`, an unknown `--flag` (with `=value`, the
    /// next argument as its value unless that starts with `-` or `@`, or alone), an unknown
    /// single-dash option (an error) or a message. How many arguments after `arg` it used.
    fn take_other(&mut self, arg: &str, next: Option<&str>) -> usize {
        if let Some(path) = arg.strip_prefix('@') {
            self.file_args.push(path.to_string());
        } else if let Some(flag) = arg.strip_prefix("--") {
            match flag.split_once('=') {
                Some((name, value)) => self.set_unknown(name, FlagValue::Text(value.to_string())),
                None => match next {
                    Some(v) if !v.starts_with('-') && !v.starts_with('@') => {
                        self.set_unknown(flag, FlagValue::Text(v.to_string()));
                        return 1;
                    }
                    _ => self.set_unknown(flag, FlagValue::Bool),
                },
            }
        } else if arg.starts_with('-') {
            self.error(format!("Unknown option: {arg}"));
        } else {
            self.messages.push(arg.to_string());
        }
        0
    }
}

/// The `--help` text with `extension_flags` (the `Extension CLI Flags:` section of the loaded
/// extensions, ending with a newline; empty for none) right after the options, where upstream
/// `printHelp` puts it. Generated from the flag table (`cli/flags.rs`); our own words, the
/// flags and their meaning are upstream 1.6's.
pub fn help_with(extension_flags: &str) -> String {
    help::render(extension_flags)
}

#[cfg(test)]
mod tests;
