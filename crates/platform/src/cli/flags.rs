//! The table of `pi`'s flags and subcommands, from which both [`Cli::parse`] and `--help`
//! ([`super::help_with`]) come, so the two cannot drift apart (issue 23). The flags, their
//! short forms and their meaning are upstream 1.6's (`docs/cli.md`, its `--help`); the help
//! lines are our own words.
//!
//! Each [`Flag`] says how it takes its value ([`Value`]), which [`Cli`] field it sets (a fn
//! pointer inside the [`Value`]), and its `--help` row. The rows are printed in table order,
//! grouped by [`Section`]; the prose around them (the title, the usage line, the footer) is
//! fixed text in `help.rs`.

use super::{split_list, tool_list_error, Cli, ListModels, Subcommand, THINKING_LEVELS};
use pi_ai::ThinkingLevel;
use std::path::PathBuf;

/// How a flag takes its value, and the setter that stores it in [`Cli`].
#[derive(Clone, Copy)]
pub(super) enum Value {
    /// No value (`--no-tools`).
    None(fn(&mut Cli)),
    /// The next argument, whatever it starts with; the setter gets the flag as written and the
    /// value. Repeatable flags push, list flags split at commas. When the flag ends the line the
    /// table does not take it: it goes on to the rules for unknown options (as upstream's
    /// `i + 1 < args.length` guards do), so `--provider` alone is an unknown extension flag and
    /// `-t` alone an unknown option.
    One(fn(&mut Cli, &str, &str)),
    /// The next argument, whatever it starts with; without one, the error `missing`.
    Required {
        /// Stores the value.
        set: fn(&mut Cli, &str),
        /// The error when the flag ends the line.
        missing: &'static str,
    },
    /// The next argument unless it starts with `-`; without such a one, the error `missing`
    /// (and the next argument is left alone).
    Word {
        /// Checks and stores the value.
        set: fn(&mut Cli, &str),
        /// The error when no value follows.
        missing: &'static str,
    },
    /// An optional value: the next argument unless it starts with `-` or `@`.
    Optional(fn(&mut Cli, Option<&str>)),
    /// `-p`: sets the flag, and the next argument is taken as a message unless it starts with
    /// `@` or `-` (one starting with `---` is a message).
    Message(fn(&mut Cli)),
    /// `--`: every later argument is an `@file` or a message.
    EndOfOptions,
}

/// The `--help` section a flag is listed in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Section {
    /// `Options:`.
    Options,
}

impl Section {
    /// The heading line, without its newline.
    pub(super) fn heading(self) -> &'static str {
        match self {
            Section::Options => "Options:",
        }
    }
}

/// One flag of the table.
pub(super) struct Flag {
    /// The long form, `--provider` (`--` for the end of options).
    pub(super) long: &'static str,
    /// The short forms, whole words (`-nt` is one flag, never `-n t`).
    pub(super) short: &'static [&'static str],
    /// How the value is taken and stored.
    pub(super) value: Value,
    /// What `--help` shows after the names (`<name>`, `<file> [output]`); empty for none.
    pub(super) metavar: &'static str,
    /// The `--help` text, one line per `\n`: the first beside the names, the others under
    /// it, at the same column.
    pub(super) help: &'static str,
    /// The `--help` section.
    pub(super) section: Section,
}

impl Flag {
    /// Whether `arg` is this flag, long or short.
    pub(super) fn is(&self, arg: &str) -> bool {
        self.long == arg || self.short.contains(&arg)
    }

    /// The names as `--help` shows them: `--name, -n <name>`.
    pub(super) fn label(&self) -> String {
        let mut label = self.long.to_string();
        for short in self.short {
            label.push_str(", ");
            label.push_str(short);
        }
        if !self.metavar.is_empty() {
            label.push(' ');
            label.push_str(self.metavar);
        }
        label
    }
}

/// The flag that `arg` names exactly, if any.
pub(super) fn find(arg: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.is(arg))
}

/// One subcommand of the table: the first argument `name` makes the line this command.
pub(super) struct Command {
    /// The first argument (`install`).
    pub(super) name: &'static str,
    /// What follows it in `--help` (`<source> [-l]`); empty for nothing.
    pub(super) args: &'static str,
    /// The command it names.
    pub(super) command: Subcommand,
    /// The `--help` line.
    pub(super) help: &'static str,
}

/// The subcommands, in `--help` order.
pub(super) const COMMANDS: &[Command] = &[
    Command {
        name: "install",
        args: "<source> [-l]",
        command: Subcommand::Install,
        help: "Install a package (npm:, git: or local path) and add it to settings",
    },
    Command {
        name: "remove",
        args: "<source> [-l]",
        command: Subcommand::Remove,
        help: "Remove a package from settings",
    },
    Command {
        name: "uninstall",
        args: "<source> [-l]",
        command: Subcommand::Remove,
        help: "Same as remove",
    },
    Command {
        name: "update",
        args: "[source|self|pi]",
        command: Subcommand::Update,
        help: "Update pi, packages or model catalogues",
    },
    Command {
        name: "list",
        args: "",
        command: Subcommand::List,
        help: "List the packages in settings",
    },
    Command {
        name: "config",
        args: "[-l]",
        command: Subcommand::Config,
        help: "Enable/disable package resources (needs the TUI)",
    },
    Command {
        name: "auth",
        args: "<command>",
        command: Subcommand::Auth,
        help: "Log in or out, print credentials, check a provider",
    },
    Command {
        name: "mcp",
        args: "<command>",
        command: Subcommand::Mcp,
        help: "Manage MCP servers",
    },
    Command {
        name: "models",
        args: "pull|list",
        command: Subcommand::Models,
        help: "Download or list GGUF models for the local provider",
    },
];

/// A flag without a value, listed under `Options:`.
const fn switch(
    long: &'static str,
    short: &'static [&'static str],
    set: fn(&mut Cli),
    help: &'static str,
) -> Flag {
    Flag {
        long,
        short,
        value: Value::None(set),
        metavar: "",
        help,
        section: Section::Options,
    }
}

/// A flag that takes the next argument ([`Value::One`]), listed under `Options:`.
const fn one(
    long: &'static str,
    short: &'static [&'static str],
    metavar: &'static str,
    set: fn(&mut Cli, &str, &str),
    help: &'static str,
) -> Flag {
    Flag {
        long,
        short,
        value: Value::One(set),
        metavar,
        help,
        section: Section::Options,
    }
}

/// A flag whose value must not start with `-` ([`Value::Word`]), listed under `Options:`.
const fn word(
    long: &'static str,
    metavar: &'static str,
    set: fn(&mut Cli, &str),
    missing: &'static str,
    help: &'static str,
) -> Flag {
    Flag {
        long,
        short: &[],
        value: Value::Word { set, missing },
        metavar,
        help,
        section: Section::Options,
    }
}

/// The flags, in `--help` order.
pub(super) const FLAGS: &[Flag] = &[
    one(
        "--provider",
        &[],
        "<name>",
        |c, _, v| c.provider = Some(v.into()),
        "Provider to look up --model in (needs --model)",
    ),
    one(
        "--model",
        &[],
        "<pattern>",
        |c, _, v| c.model = Some(v.into()),
        "Model id or pattern (\"provider/id\", optional \":<thinking>\")",
    ),
    one(
        "--api-key",
        &[],
        "<key>",
        |c, _, v| c.api_key = Some(v.into()),
        "API key for the selected model's provider",
    ),
    one(
        "--system-prompt",
        &[],
        "<text>",
        |c, _, v| c.system_prompt = Some(v.into()),
        "Replace the system prompt (text or a file)",
    ),
    one(
        "--append-system-prompt",
        &[],
        "<text>",
        |c, _, v| c.append_system_prompt.push(v.into()),
        "Append text or a file to the system prompt (repeatable)",
    ),
    word(
        "--mode",
        "<mode>",
        set_mode,
        "--mode requires text, json, or rpc",
        "Output: text (default), json, rpc or acp",
    ),
    Flag {
        long: "--print",
        short: &["-p"],
        value: Value::Message(|c| c.print = true),
        metavar: "",
        help: "Answer the messages and exit",
        section: Section::Options,
    },
    switch(
        "--continue",
        &["-c"],
        |c| c.continue_session = true,
        "Continue the newest session of this directory",
    ),
    switch(
        "--resume",
        &["-r"],
        |c| c.resume = true,
        "Pick a session to resume",
    ),
    one(
        "--session",
        &[],
        "<path|id>",
        |c, _, v| c.session = Some(v.into()),
        "Open a session by file path or full/partial id",
    ),
    one(
        "--session-id",
        &[],
        "<id>",
        |c, _, v| c.session_id = Some(v.into()),
        "Open this directory's session with that id, or create it",
    ),
    one(
        "--fork",
        &[],
        "<path|id>",
        |c, _, v| c.fork = Some(v.into()),
        "Fork a session into this directory",
    ),
    one(
        "--session-dir",
        &[],
        "<dir>",
        |c, _, v| c.session_dir = Some(PathBuf::from(v)),
        "Where sessions are stored and looked up",
    ),
    switch(
        "--no-session",
        &[],
        |c| c.no_session = true,
        "Keep the session in memory only",
    ),
    Flag {
        long: "--name",
        short: &["-n"],
        value: Value::Required {
            set: |c, v| c.name = Some(v.into()),
            missing: "--name requires a value",
        },
        metavar: "<name>",
        help: "Session display name",
        section: Section::Options,
    },
    one(
        "--models",
        &[],
        "<patterns>",
        |c, _, v| c.models = Some(split_list(v)),
        "Comma-separated model patterns to cycle through (globs allowed)",
    ),
    switch(
        "--no-tools",
        &["-nt"],
        |c| c.no_tools = true,
        "No tools by default (built-in and extension)",
    ),
    switch(
        "--no-builtin-tools",
        &["-nbt"],
        |c| c.no_builtin_tools = true,
        "No built-in tools by default; extension tools stay",
    ),
    one(
        "--tools",
        &["-t"],
        "<tools>",
        set_tools,
        "Comma-separated tool names or * patterns to enable;\n\
         a list of only +name/-name entries edits the default set",
    ),
    one(
        "--exclude-tools",
        &["-xt"],
        "<tools>",
        |c, _, v| c.exclude_tools = Some(split_list(v)),
        "Comma-separated tool names or * patterns to disable",
    ),
    one(
        "--thinking",
        &[],
        "<level>",
        set_thinking,
        "off, minimal, low, medium, high, xhigh, max",
    ),
    one(
        "--extension",
        &["-e"],
        "<path>",
        |c, _, v| c.extension.push(v.into()),
        "Load an extension (repeatable)",
    ),
    switch(
        "--no-extensions",
        &["-ne"],
        |c| c.no_extensions = true,
        "No extension discovery (explicit -e still loads)",
    ),
    switch(
        "--no-mcp",
        &[],
        |c| c.no_mcp = true,
        "No built-in MCP support",
    ),
    word(
        "--permission-mode",
        "<mode>",
        set_permission_mode,
        "--permission-mode requires off, ask, or deny",
        "Tool permission policy: off, ask, or deny",
    ),
    one(
        "--skill",
        &[],
        "<path>",
        |c, _, v| c.skill.push(v.into()),
        "Load a skill file or directory (repeatable)",
    ),
    switch(
        "--no-skills",
        &["-ns"],
        |c| c.no_skills = true,
        "No skill discovery",
    ),
    one(
        "--prompt-template",
        &[],
        "<path>",
        |c, _, v| c.prompt_template.push(v.into()),
        "Load a prompt template file or directory (repeatable)",
    ),
    switch(
        "--no-prompt-templates",
        &["-np"],
        |c| c.no_prompt_templates = true,
        "No prompt template discovery",
    ),
    one(
        "--theme",
        &[],
        "<path>",
        |c, _, v| c.theme.push(v.into()),
        "Load a theme (interactive only)",
    ),
    word(
        "--use-theme",
        "<name>",
        |c, v| c.use_theme = Some(v.into()),
        "--use-theme requires a theme name",
        "Initial theme (interactive only)",
    ),
    switch(
        "--no-themes",
        &[],
        |c| c.no_themes = true,
        "No theme discovery (interactive only)",
    ),
    switch(
        "--no-context-files",
        &["-nc"],
        |c| c.no_context_files = true,
        "Do not load AGENTS.md / CLAUDE.md files",
    ),
    one(
        "--export",
        &[],
        "<file> [output]",
        |c, _, v| c.export = Some(v.into()),
        "Export a session file to HTML and exit",
    ),
    Flag {
        long: "--list-models",
        short: &[],
        value: Value::Optional(|c, search| {
            c.list_models = Some(match search {
                Some(s) => ListModels::Search(s.into()),
                None => ListModels::All,
            })
        }),
        metavar: "[search]",
        help: "List the available models (optional fuzzy search)",
        section: Section::Options,
    },
    switch(
        "--verbose",
        &[],
        |c| c.verbose = true,
        "Verbose startup (interactive only)",
    ),
    word(
        "--tui-mode",
        "<mode>",
        set_tui_mode,
        "--tui-mode requires regular or fullscreen",
        "fullscreen or regular (interactive only)",
    ),
    switch(
        "--approve",
        &["-a"],
        |c| c.approve = Some(true),
        "Trust this project's .pi files for this run",
    ),
    switch(
        "--no-approve",
        &["-na"],
        |c| c.approve = Some(false),
        "Ignore this project's .pi files for this run",
    ),
    switch(
        "--offline",
        &[],
        |c| c.offline = true,
        "No startup network operations (same as PI_OFFLINE=1)",
    ),
    one(
        "--sandbox",
        &[],
        "<mode>",
        |c, _, v| c.sandbox = Some(v.into()),
        "Kernel sandbox of the bash tool: full, workspace-write, read-only",
    ),
    Flag {
        long: "--",
        short: &[],
        value: Value::EndOfOptions,
        metavar: "",
        help: "Everything after is a message or @file",
        section: Section::Options,
    },
    switch("--help", &["-h"], |c| c.help = true, "Show this help"),
    switch(
        "--version",
        &["-v"],
        |c| c.version = true,
        "Show the version",
    ),
];

/// `--mode text|json|rpc|acp` (the error lists upstream's three).
fn set_mode(cli: &mut Cli, mode: &str) {
    if matches!(mode, "text" | "json" | "rpc" | "acp") {
        cli.mode = Some(mode.into());
    } else {
        cli.error(format!(
            "Invalid mode \"{mode}\". Valid values: text, json, rpc"
        ));
    }
}

/// `--permission-mode off|ask|deny`.
fn set_permission_mode(cli: &mut Cli, mode: &str) {
    if matches!(mode, "off" | "ask" | "deny") {
        cli.permission_mode = Some(mode.into());
    } else {
        cli.error(format!(
            "Invalid permission mode \"{mode}\". Valid values: off, ask, deny"
        ));
    }
}

/// `--tui-mode regular|fullscreen`.
fn set_tui_mode(cli: &mut Cli, mode: &str) {
    if matches!(mode, "regular" | "fullscreen") {
        cli.tui_mode = Some(mode.into());
    } else {
        cli.error(format!(
            "Invalid TUI mode \"{mode}\". Valid values: regular, fullscreen"
        ));
    }
}

/// `--tools`/`-t <list>`: an invalid list is an error naming the flag as written.
fn set_tools(cli: &mut Cli, flag: &str, list: &str) {
    let tools = split_list(list);
    match tool_list_error(&tools) {
        Some(e) => cli.error(format!("{flag}: {e}")),
        None => cli.tools = Some(tools),
    }
}

/// `--thinking <level>`: an invalid level is a warning.
fn set_thinking(cli: &mut Cli, _flag: &str, level: &str) {
    match ThinkingLevel::parse(level) {
        Some(l) => cli.thinking = Some(l),
        None => cli.warning(format!(
            "Invalid thinking level \"{level}\". Valid values: {}",
            THINKING_LEVELS.join(", ")
        )),
    }
}
