//! The `bash` tool (spec tools.md §4; result shape from the 1.6 recordings `tool_bash_echo`,
//! `tool_errors`).
//!
//! Success: `content: [text]`, `structuredContent: {exit_code, output, truncated,
//! wall_time_seconds}`, `details: {truncation, fullOutputPath}` only when truncated. A non-zero exit
//! is returned as a result with `isError: true` and the text `<output>\n\nCommand exited with code
//! <n>`. Abort and timeout are `Err` texts ending in `Command aborted` / `Command timed out after
//! <s> seconds`.

use super::schema;
use super::shell::{
    resolve_shell, run_shell, shell_env, validate_timeout, OutputAccumulator, OutputSink,
    OutputSnapshot, ShellCommand, ShellExit,
};
use super::truncate::{format_size, TruncatedBy, TruncationLimits, DEFAULT_MAX_BYTES};
use super::util::{arg_f64, js_number, json_number, require_str, tool_definition};
use async_trait::async_trait;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput, UpdateFn};
use pi_ai::{Content, ToolDefinition};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Minimum spacing of streamed partial results.
const UPDATE_THROTTLE: Duration = Duration::from_millis(100);

/// Settings that shape how the bash tool runs commands.
#[derive(Debug, Clone, Default)]
pub struct BashToolOptions {
    /// `shellCommandPrefix`: prepended to every command as `<prefix>\n<command>`.
    pub command_prefix: Option<String>,
    /// `shellPath`: explicit shell executable.
    pub shell_path: Option<PathBuf>,
    /// `<agentDir>/bin`, prepended to `PATH` when not already present.
    pub bin_dir: Option<PathBuf>,
    /// Extra variables set for model-run commands.
    pub extra_env: Vec<(String, String)>,
    /// The session's variables (`PI_SESSION_ID`, `PI_SESSION_FILE`, `PI_PROVIDER`, `PI_MODEL`,
    /// `PI_REASONING_LEVEL`; upstream-1.6-notes.md item 21), read when each command starts so
    /// that model and thinking-level changes show. Filled in once the session exists.
    pub session_env: Option<SessionEnvSlot>,
    /// The kernel sandbox of every command (default `full` = none; [`super::sandbox`]).
    pub sandbox: super::sandbox::SandboxPolicy,
}

/// Computes the session variables of the bash tool's commands, as `(name, value)` pairs.
pub type SessionEnvFn = Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>;

/// Where the session puts its [`SessionEnvFn`] once it exists (tools are built before the
/// session that owns them).
#[derive(Clone, Default)]
pub struct SessionEnvSlot(pub Arc<std::sync::OnceLock<SessionEnvFn>>);

impl std::fmt::Debug for SessionEnvSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "SessionEnvSlot(bound)"
        } else {
            "SessionEnvSlot(empty)"
        })
    }
}

impl SessionEnvSlot {
    /// Binds the slot to `f` (a second bind is ignored).
    pub fn bind(&self, f: SessionEnvFn) {
        let _ = self.0.set(f);
    }

    /// The variables now; empty while unbound.
    pub fn vars(&self) -> Vec<(String, String)> {
        self.0.get().map(|f| f()).unwrap_or_default()
    }
}

/// The model-facing bash tool.
pub struct BashTool {
    cwd: PathBuf,
    options: BashToolOptions,
}

impl BashTool {
    /// A bash tool running commands in `cwd`.
    pub fn new(cwd: PathBuf, options: BashToolOptions) -> Self {
        BashTool { cwd, options }
    }
}

/// JSON-Schema of the bash tool's parameters.
pub fn parameters() -> Value {
    schema::object(
        &["command"],
        vec![
            ("command", schema::string("The shell command line to run.")),
            (
                "timeout",
                schema::number(
                    "Optional limit in seconds after which the command is killed; no limit when omitted.",
                ),
            ),
        ],
    )
}

fn description() -> String {
    format!(
        "Run a command with bash in the working directory and return its combined stdout and stderr. \
         Only the last {} lines or {}KB of output are returned (whichever limit is reached first); \
         when output is cut, the complete output is written to a temporary file whose path is given. \
         A timeout in seconds can be set.",
        super::truncate::DEFAULT_MAX_LINES,
        DEFAULT_MAX_BYTES / 1024
    )
}

/// Streams throttled partial results while collecting output.
struct ToolSink<'a> {
    acc: &'a mut OutputAccumulator,
    on_update: UpdateFn,
    dirty: bool,
    last_emit: Option<Instant>,
}

impl ToolSink<'_> {
    fn emit(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        self.last_emit = Some(Instant::now());
        let snap = self.acc.snapshot(true);
        (self.on_update)(partial_output(&snap));
    }
}

impl OutputSink for ToolSink<'_> {
    fn on_data(&mut self, chunk: &[u8]) {
        self.acc.append(chunk);
        self.dirty = true;
        let due = match self.last_emit {
            None => true,
            Some(t) => Instant::now().duration_since(t) >= UPDATE_THROTTLE,
        };
        if due {
            self.emit();
        }
    }
    fn wakeup(&self) -> Option<Instant> {
        if self.dirty {
            self.last_emit.map(|t| t + UPDATE_THROTTLE)
        } else {
            None
        }
    }
    fn on_wakeup(&mut self) {
        self.emit();
    }
}

fn details_json(snap: &OutputSnapshot, only_if_truncated: bool) -> Option<Value> {
    let mut map = Map::new();
    if snap.truncation.truncated {
        map.insert("truncation".into(), snap.truncation.to_json());
    }
    if let Some(p) = &snap.full_output_path {
        if snap.truncation.truncated || !only_if_truncated {
            map.insert("fullOutputPath".into(), json!(p.to_string_lossy()));
        }
    }
    if only_if_truncated && !snap.truncation.truncated {
        return None;
    }
    Some(Value::Object(map))
}

fn partial_output(snap: &OutputSnapshot) -> ToolOutput {
    ToolOutput {
        content: vec![Content::text(snap.content.clone())],
        details: details_json(snap, false),
        structured_content: None,
        is_error: None,
    }
}

/// The output text with the truncation notice (spec tools.md §4.5); `empty` replaces no output.
fn format_output(snap: &OutputSnapshot, empty: &str) -> String {
    let mut text = if snap.content.is_empty() {
        empty.to_string()
    } else {
        snap.content.clone()
    };
    let t = &snap.truncation;
    if t.truncated {
        let path = snap
            .full_output_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let end = t.total_lines;
        let start = end.saturating_sub(t.output_lines) + 1;
        if t.last_line_partial {
            text.push_str(&format!(
                "\n\n[Showing last {} of line {end} (line is {}). Full output: {path}]",
                format_size(t.output_bytes),
                format_size(snap.last_line_bytes)
            ));
        } else if t.truncated_by == Some(TruncatedBy::Lines) {
            text.push_str(&format!(
                "\n\n[Showing lines {start}-{end} of {end}. Full output: {path}]"
            ));
        } else {
            text.push_str(&format!(
                "\n\n[Showing lines {start}-{end} of {end} ({} limit). Full output: {path}]",
                format_size(DEFAULT_MAX_BYTES)
            ));
        }
    }
    text
}

fn append_status(text: &str, status: &str) -> String {
    if text.is_empty() {
        status.to_string()
    } else {
        format!("{text}\n\n{status}")
    }
}

#[async_trait]
impl AgentTool for BashTool {
    fn definition(&self) -> ToolDefinition {
        tool_definition("bash", description(), parameters())
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let command = require_str(&args, "command")?;
        let timeout_arg = arg_f64(&args, "timeout");
        let timeout = validate_timeout(timeout_arg)?;
        let full_command = match &self.options.command_prefix {
            Some(p) if !p.is_empty() => format!("{p}\n{command}"),
            _ => command.to_string(),
        };
        let mut env = shell_env(self.options.bin_dir.as_deref());
        env.extend(self.options.extra_env.iter().cloned());
        if let Some(slot) = &self.options.session_env {
            env.extend(slot.vars());
        }
        // Upstream 1.6 announces the run with an empty partial result before the command
        // starts (`{"content":[]}`; golden tool_bash_echo).
        (ctx.on_update)(ToolOutput::default());
        let cmd = ShellCommand {
            command: full_command,
            cwd: self.cwd.clone(),
            shell: Some(resolve_shell(self.options.shell_path.as_deref())?),
            env: Some(env),
            timeout,
            sandbox: self.options.sandbox,
        };

        let started = std::time::Instant::now();
        let mut acc = OutputAccumulator::new(TruncationLimits::default(), "pi-bash");
        let result = {
            let mut sink = ToolSink {
                acc: &mut acc,
                on_update: ctx.on_update.clone(),
                dirty: false,
                last_emit: None,
            };
            let r = run_shell(&cmd, &ctx.cancel, &mut sink).await;
            sink.acc.finish();
            sink.emit();
            r
        };
        let snap = acc.snapshot(true);
        let exit = result?;
        match exit {
            ShellExit::Aborted => Err(ToolError::Failed(append_status(
                &format_output(&snap, ""),
                "Command aborted",
            ))),
            ShellExit::TimedOut => Err(ToolError::Failed(append_status(
                &format_output(&snap, ""),
                &format!(
                    "Command timed out after {} seconds",
                    js_number(timeout_arg.unwrap_or_default())
                ),
            ))),
            ShellExit::Exited(code) => {
                let text = format_output(&snap, "(no output)");
                let wall = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
                // Key order as upstream writes it (golden parallel_tool_calls).
                let structured = json!({
                    "output": snap.content,
                    "truncated": snap.truncation.truncated,
                    "exit_code": code,
                    "wall_time_seconds": json_number(wall),
                });
                let failed = matches!(code, Some(c) if c != 0);
                let content_text = match code {
                    Some(c) if c != 0 => {
                        append_status(&text, &format!("Command exited with code {c}"))
                    }
                    _ => text,
                };
                Ok(ToolOutput {
                    content: vec![Content::text(content_text)],
                    details: details_json(&snap, true),
                    structured_content: Some(structured),
                    is_error: failed.then_some(true),
                })
            }
        }
    }
}
