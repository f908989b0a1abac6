//! Command-line flags (spec config.md §7).

use clap::Parser;
use std::path::PathBuf;

/// `pi`: a coding agent. Without `--mode rpc` or `-p`, answers the given messages and exits.
#[derive(Debug, Parser, Clone, Default)]
#[command(
    name = "pi",
    version,
    disable_version_flag = true,
    about = "pi coding agent (Rust): headless RPC, JSON and print modes",
    long_about = "pi coding agent (Rust).\n\n\
        `pi --mode rpc` reads JSON commands on stdin, one per line, and writes JSON responses \
        and events on stdout, one per line.\n\
        `pi -p \"question\"` answers once and prints the reply; `--mode json` prints every event.\n\
        `pi models pull <name>` downloads a GGUF model into <agent dir>/models/ for the local \
        provider; `pi models list` lists them (`pi models --help`).\n\n\
        Configuration lives in the agent directory ($PI_CODING_AGENT_DIR, default ~/.pi/agent): \
        settings.json, models.json, auth.json, sessions/."
)]
pub struct Cli {
    /// Print the version and exit.
    #[arg(short = 'v', long = "version")]
    pub version: bool,

    /// Output mode: text (default), json (every event as a JSON line) or rpc (JSONL protocol).
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,

    /// Non-interactive: answer the messages given as arguments, print the reply, exit.
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// Provider of the model (e.g. anthropic, openai, or a models.json provider).
    #[arg(long)]
    pub provider: Option<String>,

    /// Model id or pattern; accepts `provider/id` and a `:thinking` suffix.
    #[arg(long)]
    pub model: Option<String>,

    /// Comma-separated model patterns that `cycle_model` cycles through.
    #[arg(long)]
    pub models: Option<String>,

    /// API key for the selected model's provider (overrides every other source).
    #[arg(long = "api-key")]
    pub api_key: Option<String>,

    /// Thinking level: off, minimal, low, medium, high, xhigh, max.
    #[arg(long)]
    pub thinking: Option<String>,

    /// Session display name.
    #[arg(short = 'n', long = "name")]
    pub name: Option<String>,

    /// Keep the session in memory only.
    #[arg(long = "no-session")]
    pub no_session: bool,

    /// Directory for session files (default: <agent dir>/sessions/--<cwd>--).
    #[arg(long = "session-dir")]
    pub session_dir: Option<PathBuf>,

    /// Open a session by file path or by full or partial session id (resumed in its cwd).
    #[arg(long, value_name = "PATH|ID")]
    pub session: Option<String>,

    /// Continue the most recent session of the current directory.
    #[arg(short = 'c', long = "continue")]
    pub continue_recent: bool,

    /// Open the current directory's session with this id, or create it.
    #[arg(long = "session-id", value_name = "ID")]
    pub session_id: Option<String>,

    /// Fork a session (file path or full/partial id) into a new session here.
    #[arg(long, value_name = "PATH|ID")]
    pub fork: Option<String>,

    /// Replace the system prompt (text, or a path to a file holding it).
    #[arg(long = "system-prompt")]
    pub system_prompt: Option<String>,

    /// Append text (or a file's contents) to the system prompt; repeatable.
    #[arg(long = "append-system-prompt")]
    pub append_system_prompt: Vec<String>,

    /// Comma-separated built-in tools to enable (default: read,bash,edit,write).
    #[arg(short = 't', long)]
    pub tools: Option<String>,

    /// Enable no built-in tools.
    #[arg(long = "no-tools")]
    pub no_tools: bool,

    /// Skip AGENTS.md / CLAUDE.md context files.
    #[arg(long = "no-context-files")]
    pub no_context_files: bool,

    /// Same as PI_OFFLINE=1.
    #[arg(long)]
    pub offline: bool,

    /// Verbose startup diagnostics on stderr.
    #[arg(long)]
    pub verbose: bool,

    /// Extensions are not supported by this build; accepted and ignored with a warning.
    #[arg(short = 'e', long = "extension")]
    pub extension: Vec<String>,

    /// Messages to send (print/json modes).
    pub messages: Vec<String>,
}
