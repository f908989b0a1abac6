//! Calls that a running tool makes to other tools itself (a codemode script's calls; upstream
//! 1.6 docs/extensions.md "Calling Other Tools", `ctx.executeTool()`).
//!
//! The loop does not see them as tool calls: they add no transcript entries, and their results
//! only reach the calling tool. What the rest of pi sees:
//! * each gets the id `<calling tool call id>/<n>` (n from 1, per calling call);
//! * its `tool_execution_start` / `_update` / `_end` events carry `parentToolCallId`;
//! * a bounded record of them (name, arguments, status, duration, error; never results)
//!   becomes the calling call's result message's `nestedCalls` ([`NestedToolCalls`]).

use crate::agent_loop::EmitFn;
use crate::event::AgentEvent;
use crate::tool::{ToolOutput, UpdateFn};
use pi_ai::{Content, NestedToolCallRecord, NestedToolCalls};
use serde_json::Value;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// The nested calls of one model-issued tool call. Cloning shares the record.
#[derive(Clone)]
pub struct NestedCalls {
    parent: String,
    emit: Option<EmitFn>,
    record: Arc<Mutex<Recorder>>,
}

#[derive(Default)]
struct Recorder {
    calls: Vec<NestedToolCallRecord>,
    next: u64,
    complete: bool,
    argument_bytes: usize,
}

/// A nested call between [`NestedCalls::start`] and [`NestedCalls::finish`].
#[derive(Debug)]
pub struct NestedCall {
    /// `<parent>/<n>`: the id its events and its hooks' `toolCallId` carry.
    pub id: String,
    name: String,
    args: Value,
    /// Its index in the record; `None` when the record was full.
    slot: Option<usize>,
    started: Instant,
}

impl NestedCalls {
    /// The nested calls of the tool call `parent`, their events sent to `emit` (`None`: no
    /// events, e.g. a tool run outside the loop).
    pub fn new(parent: impl Into<String>, emit: Option<EmitFn>) -> Self {
        NestedCalls {
            parent: parent.into(),
            emit,
            record: Arc::new(Mutex::new(Recorder {
                complete: true,
                next: 1,
                ..Recorder::default()
            })),
        }
    }

    /// The calling tool call's id (`parentToolCallId` of the events).
    pub fn parent(&self) -> &str {
        &self.parent
    }

    fn lock(&self) -> MutexGuard<'_, Recorder> {
        self.record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Emits `event` and awaits what the sink returned ([`EmitFn`]).
    async fn send(&self, event: AgentEvent) {
        if let Some(emit) = &self.emit {
            crate::agent_loop::emit_event(emit, event).await;
        }
    }

    /// Starts a call of `name` with `args` (as the tool passed them, before validation):
    /// gives it its id, records it and emits its `tool_execution_start`, completing once the
    /// sink is done with it ([`EmitFn`]: e.g. once extension handlers answered).
    pub async fn start(&self, name: &str, args: &Value) -> NestedCall {
        let (id, slot) = {
            let mut r = self.lock();
            let id = format!("{}/{}", self.parent, r.next);
            r.next += 1;
            let slot = if r.calls.len() >= NestedToolCalls::MAX_CALLS {
                r.complete = false;
                None
            } else {
                let bytes = args.to_string().len();
                let fits = bytes <= NestedToolCalls::MAX_ARGUMENT_BYTES_PER_CALL
                    && r.argument_bytes + bytes <= NestedToolCalls::MAX_ARGUMENT_BYTES_TOTAL;
                let mut call = NestedToolCallRecord {
                    id: id.clone(),
                    name: name.to_string(),
                    status: "unfinished".into(),
                    ..NestedToolCallRecord::default()
                };
                if fits {
                    call.arguments = Some(args.clone());
                    r.argument_bytes += bytes;
                } else {
                    call.arguments_bytes = Some(bytes as u64);
                    r.complete = false;
                }
                r.calls.push(call);
                Some(r.calls.len() - 1)
            };
            (id, slot)
        };
        self.send(AgentEvent::ToolExecutionStart {
            tool_call_id: id.clone(),
            tool_name: name.to_string(),
            args: args.clone(),
            parent_tool_call_id: Some(self.parent.clone()),
        })
        .await;
        NestedCall {
            id,
            name: name.to_string(),
            args: args.clone(),
            slot,
            started: Instant::now(),
        }
    }

    /// The partial-result sink for `call`'s own [`crate::ToolContext`]: each output so far
    /// becomes a `tool_execution_update` of `call` (a synchronous callback: a future the sink
    /// returns is dropped, which still delivers the update, [`EmitFn`]).
    pub fn updater(&self, call: &NestedCall) -> UpdateFn {
        let this = self.clone();
        let (id, name, args) = (call.id.clone(), call.name.clone(), call.args.clone());
        Arc::new(move |partial: ToolOutput| {
            if let Some(emit) = &this.emit {
                drop(emit(AgentEvent::ToolExecutionUpdate {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    args: args.clone(),
                    partial_result: partial,
                    parent_tool_call_id: Some(this.parent.clone()),
                }));
            }
        })
    }

    /// Ends `call` with `result`: records its status, duration (ms) and, for an error, its
    /// text, and emits its `tool_execution_end` (`durationMs` only when `ran`: a call refused
    /// before it ran, by validation or a hook, has none, as in the loop), completing once the
    /// sink is done with it ([`EmitFn`]).
    pub async fn finish(&self, call: NestedCall, result: &ToolOutput, is_error: bool, ran: bool) {
        let elapsed = call.started.elapsed().as_millis() as u64;
        if let Some(slot) = call.slot {
            let mut r = self.lock();
            if let Some(rec) = r.calls.get_mut(slot) {
                rec.status = if is_error { "error" } else { "ok" }.into();
                rec.duration_ms = Some(elapsed);
                if is_error {
                    let text: String = result
                        .content
                        .iter()
                        .filter_map(Content::as_text)
                        .collect::<Vec<_>>()
                        .join("\n");
                    if !text.is_empty() {
                        rec.error = Some(
                            text.chars()
                                .take(NestedToolCalls::MAX_ERROR_CHARS)
                                .collect(),
                        );
                    }
                }
            }
        }
        self.send(AgentEvent::ToolExecutionEnd {
            tool_call_id: call.id,
            tool_name: call.name,
            result: result.clone(),
            is_error,
            duration_ms: ran.then_some(elapsed),
            parent_tool_call_id: Some(self.parent.clone()),
        })
        .await;
    }

    /// The record so far: `None` when no nested call was made. `complete` is false when the
    /// limits dropped anything or a call has not finished.
    pub fn record(&self) -> Option<NestedToolCalls> {
        let r = self.lock();
        if r.calls.is_empty() && r.complete {
            return None;
        }
        Some(NestedToolCalls {
            complete: r.complete && r.calls.iter().all(|c| c.status != "unfinished"),
            calls: r.calls.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use serde_json::json;

    fn events() -> (EmitFn, Arc<Mutex<Vec<AgentEvent>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        (
            Arc::new(move |e| {
                sink.lock().unwrap().push(e);
                None
            }),
            seen,
        )
    }

    #[test]
    fn calls_get_numbered_ids_events_with_the_parent_and_a_record() {
        let (emit, seen) = events();
        let nested = NestedCalls::new("call_1", Some(emit));
        assert_eq!(nested.record(), None);
        let a = block_on(nested.start("read", &json!({"path": "a.txt"})));
        let b = block_on(nested.start("bash", &json!({"command": "false"})));
        assert_eq!((a.id.as_str(), b.id.as_str()), ("call_1/1", "call_1/2"));
        block_on(nested.finish(a, &ToolOutput::text("x"), false, true));
        assert!(!nested.record().unwrap().complete, "b is unfinished");
        block_on(nested.finish(b, &ToolOutput::error("exit 1"), true, false));
        let record = nested.record().unwrap();
        assert!(record.complete);
        assert_eq!(record.calls[0].arguments, Some(json!({"path": "a.txt"})));
        assert_eq!(record.calls[1].status, "error");
        assert_eq!(record.calls[1].error.as_deref(), Some("exit 1"));
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 4);
        let parents: Vec<_> = seen
            .iter()
            .map(|e| match e {
                AgentEvent::ToolExecutionStart {
                    parent_tool_call_id,
                    ..
                }
                | AgentEvent::ToolExecutionEnd {
                    parent_tool_call_id,
                    ..
                } => parent_tool_call_id.clone(),
                _ => None,
            })
            .collect();
        assert_eq!(parents, vec![Some("call_1".to_string()); 4]);
        match &seen[3] {
            AgentEvent::ToolExecutionEnd { duration_ms, .. } => assert_eq!(*duration_ms, None),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn the_record_keeps_to_its_limits() {
        let nested = NestedCalls::new("p", None);
        let big = json!({"text": "x".repeat(NestedToolCalls::MAX_ARGUMENT_BYTES_PER_CALL)});
        let c = block_on(nested.start("echo", &big));
        block_on(nested.finish(c, &ToolOutput::text("ok"), false, true));
        let record = nested.record().unwrap();
        assert_eq!(record.calls[0].arguments, None);
        assert_eq!(
            record.calls[0].arguments_bytes,
            Some(big.to_string().len() as u64)
        );
        assert!(!record.complete);
        for _ in 0..NestedToolCalls::MAX_CALLS + 5 {
            let c = block_on(nested.start("echo", &json!({})));
            block_on(nested.finish(c, &ToolOutput::text("ok"), false, true));
        }
        let record = nested.record().unwrap();
        assert_eq!(record.calls.len(), NestedToolCalls::MAX_CALLS);
        assert_eq!(
            record.calls.last().unwrap().id,
            format!("p/{}", NestedToolCalls::MAX_CALLS)
        );
    }
}
