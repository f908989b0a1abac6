//! Tests of the command-line grammar's `--help` text.

use super::help_with;

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
