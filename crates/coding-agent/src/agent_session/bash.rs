//! The RPC `bash` command (spec rpc-protocol.md §4.8): output streams as
//! `bash_execution_update {id?, delta}`; the `bashExecution` message is recorded at once when
//! idle, else when the run in flight settles. No message events are emitted for it.

use super::AgentSession;
use crate::extensions::events::UserBash;
use crate::protocol::rpc::RpcEvent;
use crate::tools::shell::{execute_user_bash, BashResult};
use pi_ai::{now_ms, BashExecutionMessage, Message};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

impl AgentSession {
    /// The token the next `abort_bash` cancels. The RPC reader takes it when a `bash` command
    /// arrives, so an `abort_bash` read after it cancels it even if the command's task has not
    /// started yet (commands take effect in arrival order).
    pub fn bash_cancel_token(&self) -> CancellationToken {
        self.inner.pending.lock().bash_cancel.clone()
    }

    /// Runs a user shell command in the session cwd. `id` is the command's id, echoed on every
    /// `bash_execution_update`; `cancel` is [`AgentSession::bash_cancel_token`] as it was when
    /// the command arrived. Every update is handed to the sink before this returns, so the
    /// response comes after the last delta. `Err` is the failure response text (spawn failures).
    pub async fn run_user_bash(
        &self,
        command: &str,
        exclude_from_context: bool,
        id: Option<Value>,
        cancel: CancellationToken,
    ) -> Result<BashResult, String> {
        let sink = self.inner.sink.clone();
        let mut on_chunk = |delta: &str| {
            if !delta.is_empty() {
                sink(RpcEvent::BashExecutionUpdate {
                    id: id.clone(),
                    delta: delta.to_string(),
                });
            }
        };
        let result = match self
            .user_bash_hook(command, exclude_from_context, &id, &cancel)
            .await?
        {
            UserBash::Local => {
                execute_user_bash(
                    command,
                    &self.inner.cwd,
                    &self.inner.bash_options,
                    &cancel,
                    &mut on_chunk,
                )
                .await?
            }
            UserBash::Result(r) => r,
            UserBash::Executed {
                output,
                exit_code,
                cancelled,
            } => finish_output(&output, exit_code, cancelled),
        };
        let message = Message::BashExecution(BashExecutionMessage {
            command: command.to_string(),
            output: result.output.clone(),
            exit_code: result.exit_code,
            cancelled: result.cancelled,
            truncated: result.truncated,
            full_output_path: result.full_output_path.clone(),
            exclude_from_context: exclude_from_context.then_some(true),
            timestamp: now_ms(),
            extra: Default::default(),
        });
        if self.is_streaming() {
            self.inner.pending.lock().bash_results.push(message);
        } else {
            self.record_message(message);
        }
        Ok(result)
    }

    /// Asks the extensions' `user_bash` handlers (upstream RPC mode does so for every `bash`
    /// command); without handlers the command runs locally. Output of a run through a
    /// handler's `operations` streams as `bash_execution_update` like a local one.
    async fn user_bash_hook(
        &self,
        command: &str,
        exclude: bool,
        id: &Option<Value>,
        cancel: &CancellationToken,
    ) -> Result<UserBash, String> {
        let Some(ext) = self
            .extensions()
            .filter(|e| e.handles("user_bash"))
            .cloned()
        else {
            return Ok(UserBash::Local);
        };
        let resolved = match &self.inner.bash_options.command_prefix {
            Some(p) if !p.is_empty() => format!("{p}\n{command}"),
            _ => command.to_string(),
        };
        let sink = self.inner.sink.clone();
        let id = id.clone();
        let on_delta = std::sync::Arc::new(move |delta: String| {
            if !delta.is_empty() {
                sink(RpcEvent::BashExecutionUpdate {
                    id: id.clone(),
                    delta,
                });
            }
        });
        ext.user_bash(
            command,
            exclude,
            &self.inner.cwd.to_string_lossy(),
            &resolved,
            on_delta,
            cancel.clone(),
        )
        .await
    }

    /// Cancels every running user shell command (`abort_bash`).
    pub fn abort_bash(&self) {
        let mut pending = self.inner.pending.lock();
        pending.bash_cancel.cancel();
        pending.bash_cancel = CancellationToken::new();
    }

    /// Appends a message to the session and the context without emitting events.
    fn record_message(&self, message: Message) {
        self.persist_message(&message);
        self.transcript().push(message);
    }

    /// Records the results of `bash` commands that finished during the run.
    pub(super) fn flush_deferred_bash(&self) {
        let deferred: Vec<Message> = std::mem::take(&mut self.inner.pending.lock().bash_results);
        for m in deferred {
            self.record_message(m);
        }
    }
}

/// The result of a command an extension ran: ANSI sequences removed, tail-truncated as a local
/// command's output (2000 lines / 50 KiB; no full-output file, as the text never touched disk).
fn finish_output(raw: &str, exit_code: Option<i32>, cancelled: bool) -> BashResult {
    let mut ansi = crate::tools::shell::AnsiStripper::default();
    let mut text = ansi.push(raw);
    text.push_str(&ansi.finish());
    let t = crate::tools::truncate::truncate_tail(&text, Default::default());
    BashResult {
        output: if t.truncated { t.content } else { text },
        exit_code: if cancelled { None } else { exit_code },
        cancelled,
        truncated: t.truncated,
        full_output_path: None,
    }
}
