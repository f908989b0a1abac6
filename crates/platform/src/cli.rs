//! Command-line flags (spec config.md §7.2, upstream-1.6-notes.md items 23–25; upstream 1.6
//! `docs/cli.md` and its `--help`).
//!
//! The parser is written by hand rather than with clap because upstream's command line cannot be
//! described to clap without changing its meaning:
//! * short forms are whole words (`-nt` is `--no-tools`, never `-n t`; `-xt`, `-nbt`, `-na`, …);
//! * `-p` takes the next argument as a message unless it starts with `-` or `@`;
//! * `--list-models` takes an optional search word; `--tui-mode`/`--use-theme` refuse a next
//!   argument that starts with `-`;
//! * `@path` arguments are file arguments wherever they appear, `--` ends option parsing;
//! * unknown `--flag`, `--flag value` and `--flag=value` are collected for extensions (an error
//!   once it is known that no extension registers them), unknown single-dash options are errors.
//!
//! Like upstream, a value flag at the end of the line without its value is ignored (except
//! `--name`, `--mode`, `--use-theme` and `--tui-mode`, which report an error), and
//! `--flag=value` is only understood for unknown (extension) flags.

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
    Some(match first? {
        "install" => Subcommand::Install,
        "remove" | "uninstall" => Subcommand::Remove,
        "update" => Subcommand::Update,
        "list" => Subcommand::List,
        "config" => Subcommand::Config,
        "auth" => Subcommand::Auth,
        "mcp" => Subcommand::Mcp,
        "models" => Subcommand::Models,
        _ => return None,
    })
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
        // The argument after `i`, if there is one.
        let next = |i: usize| args.get(i + 1).copied();
        while i < args.len() {
            let arg = args[i];
            // Value flags that silently do nothing when their value is missing (upstream).
            let has_value = i + 1 < args.len();
            match arg {
                "--" => {
                    for rest in &args[i + 1..] {
                        match rest.strip_prefix('@') {
                            Some(path) => cli.file_args.push(path.to_string()),
                            None => cli.messages.push(rest.to_string()),
                        }
                    }
                    break;
                }
                "--help" | "-h" => cli.help = true,
                "--version" | "-v" => cli.version = true,
                "--mode" => match next(i) {
                    Some(m) if !m.starts_with('-') => {
                        i += 1;
                        if matches!(m, "text" | "json" | "rpc" | "acp") {
                            cli.mode = Some(m.to_string());
                        } else {
                            cli.error(format!(
                                "Invalid mode \"{m}\". Valid values: text, json, rpc"
                            ));
                        }
                    }
                    _ => cli.error("--mode requires text, json, or rpc"),
                },
                "--permission-mode" => match next(i) {
                    Some(m) if !m.starts_with('-') => {
                        i += 1;
                        if matches!(m, "off" | "ask" | "deny") {
                            cli.permission_mode = Some(m.to_string());
                        } else {
                            cli.error(format!(
                                "Invalid permission mode \"{m}\". Valid values: off, ask, deny"
                            ));
                        }
                    }
                    _ => cli.error("--permission-mode requires off, ask, or deny"),
                },
                "--continue" | "-c" => cli.continue_session = true,
                "--resume" | "-r" => cli.resume = true,
                "--provider" if has_value => {
                    i += 1;
                    cli.provider = Some(args[i].to_string());
                }
                "--model" if has_value => {
                    i += 1;
                    cli.model = Some(args[i].to_string());
                }
                "--api-key" if has_value => {
                    i += 1;
                    cli.api_key = Some(args[i].to_string());
                }
                "--system-prompt" if has_value => {
                    i += 1;
                    cli.system_prompt = Some(args[i].to_string());
                }
                "--append-system-prompt" if has_value => {
                    i += 1;
                    cli.append_system_prompt.push(args[i].to_string());
                }
                "--name" | "-n" => {
                    if has_value {
                        i += 1;
                        cli.name = Some(args[i].to_string());
                    } else {
                        cli.error("--name requires a value");
                    }
                }
                "--no-session" => cli.no_session = true,
                "--session" if has_value => {
                    i += 1;
                    cli.session = Some(args[i].to_string());
                }
                "--session-id" if has_value => {
                    i += 1;
                    cli.session_id = Some(args[i].to_string());
                }
                "--fork" if has_value => {
                    i += 1;
                    cli.fork = Some(args[i].to_string());
                }
                "--sandbox" if has_value => {
                    i += 1;
                    cli.sandbox = Some(args[i].to_string());
                }
                "--session-dir" if has_value => {
                    i += 1;
                    cli.session_dir = Some(PathBuf::from(args[i]));
                }
                "--models" if has_value => {
                    i += 1;
                    cli.models = Some(split_list(args[i]));
                }
                "--no-tools" | "-nt" => cli.no_tools = true,
                "--no-builtin-tools" | "-nbt" => cli.no_builtin_tools = true,
                "--tools" | "-t" if has_value => {
                    i += 1;
                    let tools = split_list(args[i]);
                    match tool_list_error(&tools) {
                        Some(e) => cli.error(format!("{arg}: {e}")),
                        None => cli.tools = Some(tools),
                    }
                }
                "--exclude-tools" | "-xt" if has_value => {
                    i += 1;
                    cli.exclude_tools = Some(split_list(args[i]));
                }
                "--thinking" if has_value => {
                    i += 1;
                    let level = args[i];
                    match ThinkingLevel::parse(level) {
                        Some(l) => cli.thinking = Some(l),
                        None => cli.warning(format!(
                            "Invalid thinking level \"{level}\". Valid values: {}",
                            THINKING_LEVELS.join(", ")
                        )),
                    }
                }
                "--print" | "-p" => {
                    cli.print = true;
                    if let Some(m) = next(i) {
                        if !m.starts_with('@') && (!m.starts_with('-') || m.starts_with("---")) {
                            cli.messages.push(m.to_string());
                            i += 1;
                        }
                    }
                }
                "--export" if has_value => {
                    i += 1;
                    cli.export = Some(args[i].to_string());
                }
                "--extension" | "-e" if has_value => {
                    i += 1;
                    cli.extension.push(args[i].to_string());
                }
                "--no-extensions" | "-ne" => cli.no_extensions = true,
                "--no-mcp" => cli.no_mcp = true,
                "--skill" if has_value => {
                    i += 1;
                    cli.skill.push(args[i].to_string());
                }
                "--prompt-template" if has_value => {
                    i += 1;
                    cli.prompt_template.push(args[i].to_string());
                }
                "--theme" if has_value => {
                    i += 1;
                    cli.theme.push(args[i].to_string());
                }
                "--use-theme" => match next(i) {
                    Some(t) if !t.starts_with('-') => {
                        i += 1;
                        cli.use_theme = Some(t.to_string());
                    }
                    _ => cli.error("--use-theme requires a theme name"),
                },
                "--no-skills" | "-ns" => cli.no_skills = true,
                "--no-prompt-templates" | "-np" => cli.no_prompt_templates = true,
                "--no-themes" => cli.no_themes = true,
                "--no-context-files" | "-nc" => cli.no_context_files = true,
                "--list-models" => match next(i) {
                    Some(s) if !s.starts_with('-') && !s.starts_with('@') => {
                        i += 1;
                        cli.list_models = Some(ListModels::Search(s.to_string()));
                    }
                    _ => cli.list_models = Some(ListModels::All),
                },
                "--tui-mode" => match next(i) {
                    Some(m @ ("regular" | "fullscreen")) => {
                        i += 1;
                        cli.tui_mode = Some(m.to_string());
                    }
                    Some(m) if !m.starts_with('-') => {
                        i += 1;
                        cli.error(format!(
                            "Invalid TUI mode \"{m}\". Valid values: regular, fullscreen"
                        ));
                    }
                    _ => cli.error("--tui-mode requires regular or fullscreen"),
                },
                "--verbose" => cli.verbose = true,
                "--approve" | "-a" => cli.approve = Some(true),
                "--no-approve" | "-na" => cli.approve = Some(false),
                "--offline" => cli.offline = true,
                _ => {
                    if let Some(path) = arg.strip_prefix('@') {
                        cli.file_args.push(path.to_string());
                    } else if let Some(flag) = arg.strip_prefix("--") {
                        match flag.split_once('=') {
                            Some((name, value)) => {
                                cli.set_unknown(name, FlagValue::Text(value.to_string()))
                            }
                            None => match next(i) {
                                Some(v) if !v.starts_with('-') && !v.starts_with('@') => {
                                    i += 1;
                                    cli.set_unknown(flag, FlagValue::Text(v.to_string()));
                                }
                                _ => cli.set_unknown(flag, FlagValue::Bool),
                            },
                        }
                    } else if arg.starts_with('-') {
                        cli.error(format!("Unknown option: {arg}"));
                    } else {
                        cli.messages.push(arg.to_string());
                    }
                }
            }
            i += 1;
        }
        cli
    }
}

/// The `--help` text (our own words; the flags and their meaning are upstream 1.6's).
/// The `--help` text with `extension_flags` (the `Extension CLI Flags:` section of the loaded
/// extensions, ending with a newline; empty for none) right after the options, where upstream
/// `printHelp` puts it.
pub fn help_with(extension_flags: &str) -> String {
    if extension_flags.is_empty() {
        return HELP.to_string();
    }
    match HELP.split_once(HELP_FOOTER) {
        Some((options, rest)) => format!("{options}{extension_flags}{HELP_FOOTER}{rest}"),
        None => format!("{HELP}{extension_flags}"),
    }
}

/// Where the options of [`HELP`] end.
const HELP_FOOTER: &str = "\nConfiguration lives";

pub const HELP: &str = "\
pi - coding agent with read, bash, edit and write tools (Rust build: print, json and rpc modes)

Usage:
  pi [options] [--] [@files...] [messages...]

Commands:
  pi install <source> [-l]     Install a package (npm:, git: or local path) and add it to settings
  pi remove <source> [-l]      Remove a package from settings
  pi uninstall <source> [-l]   Same as remove
  pi update [source|self|pi]   Update pi, packages or model catalogues
  pi list                      List the packages in settings
  pi config [-l]               Enable/disable package resources (needs the TUI)
  pi auth <command>            Log in or out, print credentials, check a provider
  pi mcp <command>             Manage MCP servers
  pi models pull|list          Download or list GGUF models for the local provider

Options:
  --provider <name>              Provider to look up --model in (needs --model)
  --model <pattern>              Model id or pattern (\"provider/id\", optional \":<thinking>\")
  --api-key <key>                API key for the selected model's provider
  --system-prompt <text>         Replace the system prompt (text or a file)
  --append-system-prompt <text>  Append text or a file to the system prompt (repeatable)
  --mode <mode>                  Output: text (default), json, rpc or acp
  --print, -p                    Answer the messages and exit
  --continue, -c                 Continue the newest session of this directory
  --resume, -r                   Pick a session to resume
  --session <path|id>            Open a session by file path or full/partial id
  --session-id <id>              Open this directory's session with that id, or create it
  --fork <path|id>               Fork a session into this directory
  --session-dir <dir>            Where sessions are stored and looked up
  --no-session                   Keep the session in memory only
  --name, -n <name>              Session display name
  --models <patterns>            Comma-separated model patterns to cycle through (globs allowed)
  --no-tools, -nt                No tools by default (built-in and extension)
  --no-builtin-tools, -nbt       No built-in tools by default; extension tools stay
  --tools, -t <tools>            Comma-separated tool names or * patterns to enable;
                                 a list of only +name/-name entries edits the default set
  --exclude-tools, -xt <tools>   Comma-separated tool names or * patterns to disable
  --thinking <level>             off, minimal, low, medium, high, xhigh, max
  --extension, -e <path>         Load an extension (repeatable)
  --no-extensions, -ne           No extension discovery (explicit -e still loads)
  --no-mcp                       No built-in MCP support
  --permission-mode <mode>       Tool permission policy: off, ask, or deny
  --skill <path>                 Load a skill file or directory (repeatable)
  --no-skills, -ns               No skill discovery
  --prompt-template <path>       Load a prompt template file or directory (repeatable)
  --no-prompt-templates, -np     No prompt template discovery
  --theme <path>                 Load a theme (interactive only)
  --use-theme <name>             Initial theme (interactive only)
  --no-themes                    No theme discovery (interactive only)
  --no-context-files, -nc        Do not load AGENTS.md / CLAUDE.md files
  --export <file> [output]       Export a session file to HTML and exit
  --list-models [search]         List the available models (optional fuzzy search)
  --verbose                      Verbose startup (interactive only)
  --tui-mode <mode>              fullscreen or regular (interactive only)
  --approve, -a                  Trust this project's .pi files for this run
  --no-approve, -na              Ignore this project's .pi files for this run
  --offline                      No startup network operations (same as PI_OFFLINE=1)
  --sandbox <mode>               Kernel sandbox of the bash tool: full, workspace-write, read-only
  --                             Everything after is a message or @file
  --help, -h                     Show this help
  --version, -v                  Show the version

Configuration lives in the agent directory ($PI_CODING_AGENT_DIR, default ~/.pi/agent):
settings.json, models.json, auth.json, trust.json, sessions/.
";

#[cfg(test)]
mod tests;
