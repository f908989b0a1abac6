//! Tests of the command-line grammar's `--help` text.

use super::flags::{Value, COMMANDS, FLAGS};
use super::{help_with, subcommand, Cli, Subcommand};

/// The `--help` text as it was written by hand before it came from the flag table
/// (`flags.rs`); the table must reproduce it byte for byte.
const PINNED_HELP: &str = "\
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

/// `--help` without extension flags is exactly the pinned text.
#[test]
fn help_is_the_pinned_text() {
    assert_eq!(help_with(""), PINNED_HELP);
}

/// The `Extension CLI Flags:` section goes right after the options, before the
/// configuration footer, and nothing else changes.
#[test]
fn help_with_extension_flags_inserts_them_after_the_options() {
    let section = "Extension CLI Flags:\n  --plan                      plan mode\n";
    let with = help_with(section);
    let (options, footer) = PINNED_HELP
        .split_once("\nConfiguration lives")
        .expect("the pinned help has a footer");
    assert_eq!(
        with,
        format!("{options}{section}\nConfiguration lives{footer}")
    );
    assert!(
        with.contains("  --version, -v                  Show the version\nExtension CLI Flags:\n")
    );
}

/// Every name of the table is a whole word used once: long forms start with `--`, short forms
/// with one `-`, and none repeats (the parser takes the first match).
#[test]
fn table_names_are_unique_whole_words() {
    let mut names: Vec<&str> = Vec::new();
    for flag in FLAGS {
        assert!(flag.long.starts_with("--"), "{}", flag.long);
        for short in flag.short {
            assert!(
                short.starts_with('-') && !short.starts_with("--"),
                "{short}"
            );
        }
        names.push(flag.long);
        names.extend(flag.short);
    }
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count, "a flag name repeats");
}

/// Every row of `--help` leaves at least two spaces before its help, so no label runs into
/// its text.
#[test]
fn help_labels_fit_their_column() {
    for flag in FLAGS {
        assert!(flag.label().len() <= 29, "{}", flag.label());
    }
    for command in COMMANDS {
        assert!(
            command.name.len() + command.args.len() + 4 <= 27,
            "{}",
            command.name
        );
    }
}

/// Each flag of the table parses: a value flag followed by a value, and a switch alone,
/// leave no unknown flag and no `Unknown option` error behind, and every flag is in `--help`.
#[test]
fn every_table_flag_parses_and_is_in_help() {
    let help = help_with("");
    for flag in FLAGS {
        assert!(
            help.contains(&format!("  {}", flag.label())),
            "{}",
            flag.long
        );
        for name in std::iter::once(&flag.long).chain(flag.short) {
            let args: &[&str] = match flag.value {
                Value::None(_) | Value::Message(_) | Value::Optional(_) => &[name],
                // `--` makes the next argument a message even when it looks like a flag.
                Value::EndOfOptions => &[name, "--text"],
                Value::One(_) | Value::Required { .. } | Value::Word { .. } => &[name, "text"],
            };
            let cli = Cli::parse(args);
            assert!(cli.unknown_flags.is_empty(), "{name}: {cli:?}");
            assert!(
                !cli.diagnostics
                    .iter()
                    .any(|d| d.message.starts_with("Unknown option")),
                "{name}: {cli:?}"
            );
            assert_ne!(cli, Cli::default(), "{name} set nothing");
        }
    }
}

/// The subcommand names, and that nothing else is one.
#[test]
fn subcommands_come_from_the_table() {
    let cases = [
        ("install", Subcommand::Install),
        ("remove", Subcommand::Remove),
        ("uninstall", Subcommand::Remove),
        ("update", Subcommand::Update),
        ("list", Subcommand::List),
        ("config", Subcommand::Config),
        ("auth", Subcommand::Auth),
        ("mcp", Subcommand::Mcp),
        ("models", Subcommand::Models),
    ];
    for (name, command) in cases {
        assert_eq!(subcommand(Some(name)), Some(command), "{name}");
    }
    for other in ["--help", "hello", "Install", ""] {
        assert_eq!(subcommand(Some(other)), None, "{other}");
    }
    assert_eq!(subcommand(None), None);
}
