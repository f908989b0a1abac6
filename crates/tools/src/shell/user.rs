//! User shell executor: the RPC `bash` command (spec tools.md §9, rpc-protocol.md §4.8).

use super::{
    create_private_file, resolve_shell, run_shell, sanitize_output, shell_env, temp_log_path,
    AnsiStripper, OutputSink, ShellCommand, ShellExit, Utf8Stream,
};
use crate::truncate::{truncate_tail, TruncationLimits, DEFAULT_MAX_BYTES};
use serde::Serialize;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Result of [`execute_user_bash`]; the `data` of the RPC `bash` response (spec
/// messages-and-models.md §6.2): `{output, exitCode?, cancelled, truncated, fullOutputPath?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BashResult {
    /// Sanitised output, tail-truncated to 2000 lines / 50 KiB when it exceeds them.
    pub output: String,
    /// Exit code; `None` (omitted) when cancelled or killed by a signal.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exit_code: Option<i32>,
    /// The command was aborted.
    pub cancelled: bool,
    /// Output was cut; then `full_output_path` names the complete log.
    pub truncated: bool,
    /// Temp file with the complete sanitised output.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub full_output_path: Option<String>,
}

/// Options for [`execute_user_bash`].
#[derive(Debug, Clone, Default)]
pub struct UserBashOptions {
    /// `shellCommandPrefix` setting, prepended as `<prefix>\n<command>`.
    pub command_prefix: Option<String>,
    /// `shellPath` setting.
    pub shell_path: Option<PathBuf>,
    /// `<agentDir>/bin`, prepended to `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// The sandbox of the user's commands: `full` (none) unless the `sandbox` setting has
    /// `userBash: true` ([`crate::sandbox`]).
    pub sandbox: crate::sandbox::SandboxPolicy,
}

struct UserSink<'a> {
    decoder: Utf8Stream,
    ansi: AnsiStripper,
    chunks: std::collections::VecDeque<String>,
    window_bytes: usize,
    discarded: bool,
    total_raw: usize,
    temp_path: Option<PathBuf>,
    temp_file: Option<File>,
    on_chunk: &'a mut (dyn FnMut(&str) + Send),
}

impl UserSink<'_> {
    fn append_text(&mut self, raw: &str) {
        let text = sanitize_output(raw);
        if text.is_empty() {
            return;
        }
        if self.total_raw > DEFAULT_MAX_BYTES {
            self.ensure_temp_file();
        }
        if let Some(f) = self.temp_file.as_mut() {
            let _ = f.write_all(text.as_bytes());
        }
        self.window_bytes += text.len();
        self.chunks.push_back(text.clone());
        while self.window_bytes > DEFAULT_MAX_BYTES * 2 && self.chunks.len() > 1 {
            if let Some(removed) = self.chunks.pop_front() {
                self.window_bytes -= removed.len();
                self.discarded = true;
            }
        }
        (self.on_chunk)(&text);
    }

    fn ensure_temp_file(&mut self) {
        if self.temp_path.is_some() {
            return;
        }
        let path = temp_log_path("pi-bash");
        if let Ok(mut f) = create_private_file(&path) {
            for c in &self.chunks {
                let _ = f.write_all(c.as_bytes());
            }
            self.temp_file = Some(f);
        }
        self.temp_path = Some(path);
    }
}

impl OutputSink for UserSink<'_> {
    fn on_data(&mut self, chunk: &[u8]) {
        self.total_raw += chunk.len();
        let decoded = self.decoder.push(chunk);
        let stripped = self.ansi.push(&decoded);
        self.append_text(&stripped);
    }
}

/// Runs a user command for the RPC `bash` command / `!cmd` (spec tools.md §9): output is
/// sanitised (ANSI stripped, control characters and `\r` removed) and every sanitised chunk is
/// passed to `on_chunk` (the `bash_execution_update` deltas). Non-zero exits are not errors;
/// cancellation gives `cancelled: true` and no exit code.
pub async fn execute_user_bash(
    command: &str,
    cwd: &Path,
    options: &UserBashOptions,
    cancel: &CancellationToken,
    on_chunk: &mut (dyn FnMut(&str) + Send),
) -> Result<BashResult, String> {
    let full_command = match &options.command_prefix {
        Some(p) if !p.is_empty() => format!("{p}\n{command}"),
        _ => command.to_string(),
    };
    let cmd = ShellCommand {
        command: full_command,
        cwd: cwd.to_path_buf(),
        shell: Some(resolve_shell(options.shell_path.as_deref())?),
        env: Some(shell_env(options.bin_dir.as_deref())),
        timeout: None,
        // The user's own command (RPC `bash`): sandboxed only when `userBash` asks for it.
        sandbox: options.sandbox,
    };
    let mut sink = UserSink {
        decoder: Utf8Stream::default(),
        ansi: AnsiStripper::default(),
        chunks: Default::default(),
        window_bytes: 0,
        discarded: false,
        total_raw: 0,
        temp_path: None,
        temp_file: None,
        on_chunk,
    };
    let exit = run_shell(&cmd, cancel, &mut sink).await?;
    let rest = sink.decoder.finish();
    let mut tail = sink.ansi.push(&rest);
    tail.push_str(&sink.ansi.finish());
    sink.append_text(&tail);
    let full: String = sink.chunks.iter().map(String::as_str).collect();
    let t = truncate_tail(&full, TruncationLimits::default());
    if t.truncated {
        sink.ensure_temp_file();
    }
    if let Some(f) = sink.temp_file.as_mut() {
        let _ = f.flush();
    }
    let cancelled = matches!(exit, ShellExit::Aborted | ShellExit::TimedOut);
    let exit_code = match exit {
        ShellExit::Exited(code) => code,
        _ => None,
    };
    Ok(BashResult {
        output: if t.truncated { t.content } else { full },
        exit_code,
        cancelled,
        truncated: sink.discarded || t.truncated,
        full_output_path: sink
            .temp_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
    })
}
