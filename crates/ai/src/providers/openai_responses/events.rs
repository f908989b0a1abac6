//! Reading Responses stream events into assistant-message events (the stream state of one
//! response and its output slots).

use super::request::Flavor;
use super::response::{js_text, replace_arguments, service_tier_multiplier};
use crate::providers::common::{compact, json_u64, parse_streaming_json, push_block, Emitter};
use crate::stream::AssistantMessageEvent;
use crate::types::{AssistantMessage, Content, Model, StopReason, ThinkingContent, ToolCall};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// What an output item streams into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SlotKind {
    Thinking,
    Text,
    ToolCall,
}

#[derive(Debug)]
pub(super) struct Slot {
    kind: SlotKind,
    pub(super) content_index: usize,
    /// Raw argument text of a function call.
    pub(super) arguments: String,
}

#[derive(Default)]
pub(super) struct StreamState {
    slots: HashMap<i64, Slot>,
    /// Content indices of tool calls whose `output_item.done` has not arrived.
    pub(super) unfinished: Vec<usize>,
    /// Content index of each reasoning item id (for the encrypted-content backfill).
    reasoning_by_id: HashMap<String, usize>,
    pub(super) terminal: bool,
}

pub(super) fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

impl StreamState {
    fn slot(&self, event: &Value, kind: SlotKind) -> Option<usize> {
        let oi = event.get("output_index").and_then(Value::as_i64)?;
        self.slots
            .get(&oi)
            .filter(|s| s.kind == kind)
            .map(|s| s.content_index)
    }

    fn create_slot(
        &mut self,
        oi: i64,
        item: &Value,
        out: &mut AssistantMessage,
        em: &Emitter,
    ) -> bool {
        let (kind, block) = match str_of(item, "type") {
            Some("reasoning") => (
                SlotKind::Thinking,
                Content::Thinking(ThinkingContent {
                    thinking: String::new(),
                    thinking_signature: None,
                    redacted: None,
                    extra: Default::default(),
                }),
            ),
            Some("message") => {
                if str_of(item, "phase") == Some("final_answer") {
                    out.stop_reason = StopReason::Stop;
                }
                (SlotKind::Text, Content::text(""))
            }
            Some("function_call") => {
                let id = format!(
                    "{}|{}",
                    str_of(item, "call_id").unwrap_or(""),
                    str_of(item, "id").unwrap_or("")
                );
                let args = str_of(item, "arguments").unwrap_or("");
                (
                    SlotKind::ToolCall,
                    Content::ToolCall(ToolCall {
                        id,
                        name: str_of(item, "name").unwrap_or("").to_owned(),
                        arguments: parse_streaming_json(args),
                        thought_signature: None,
                        extra: Default::default(),
                    }),
                )
            }
            _ => return false,
        };
        let content_index = push_block(out, em, block);
        if kind == SlotKind::ToolCall {
            self.unfinished.push(content_index);
        }
        let arguments = str_of(item, "arguments").unwrap_or("").to_owned();
        self.slots.insert(
            oi,
            Slot {
                kind,
                content_index,
                arguments,
            },
        );
        true
    }

    fn append_thinking(&self, out: &mut AssistantMessage, em: &Emitter, ci: usize, delta: &str) {
        if let Some(Content::Thinking(t)) = out.content.get_mut(ci) {
            t.thinking.push_str(delta);
            em.emit(AssistantMessageEvent::ThinkingDelta {
                content_index: ci,
                delta: delta.to_owned(),
            });
        }
    }

    fn append_text(&self, out: &mut AssistantMessage, em: &Emitter, ci: usize, delta: &str) {
        if let Some(Content::Text(t)) = out.content.get_mut(ci) {
            t.text.push_str(delta);
            em.emit(AssistantMessageEvent::TextDelta {
                content_index: ci,
                delta: delta.to_owned(),
            });
        }
    }

    /// Apply one stream event. `Err` ends the stream with that error text.
    pub(super) fn handle(
        &mut self,
        event: &Value,
        out: &mut AssistantMessage,
        em: &Emitter,
        model: &Model,
        flavor: &Flavor,
    ) -> Result<(), String> {
        let kind = str_of(event, "type").unwrap_or("");
        match kind {
            "response.created" => {
                if let Some(id) = event.pointer("/response/id").and_then(Value::as_str) {
                    out.response_id = Some(id.to_owned());
                }
            }
            "response.output_item.added" => {
                if let (Some(oi), Some(item)) = (
                    event.get("output_index").and_then(Value::as_i64),
                    event.get("item"),
                ) {
                    self.create_slot(oi, item, out, em);
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let (Some(ci), Some(d)) =
                    (self.slot(event, SlotKind::Thinking), str_of(event, "delta"))
                {
                    self.append_thinking(out, em, ci, d);
                }
            }
            "response.reasoning_summary_part.done" => {
                if let Some(ci) = self.slot(event, SlotKind::Thinking) {
                    self.append_thinking(out, em, ci, "\n\n");
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let (Some(ci), Some(d)) =
                    (self.slot(event, SlotKind::Text), str_of(event, "delta"))
                {
                    self.append_text(out, em, ci, d);
                }
            }
            "response.function_call_arguments.delta" => {
                let oi = event.get("output_index").and_then(Value::as_i64);
                let delta = str_of(event, "delta").unwrap_or("");
                if let Some(slot) = oi.and_then(|oi| self.slots.get_mut(&oi)) {
                    if slot.kind == SlotKind::ToolCall {
                        slot.arguments.push_str(delta);
                        if let Some(Content::ToolCall(tc)) = out.content.get_mut(slot.content_index)
                        {
                            tc.arguments = parse_streaming_json(&slot.arguments);
                        }
                        em.emit(AssistantMessageEvent::ToolCallDelta {
                            content_index: slot.content_index,
                            delta: delta.to_owned(),
                        });
                    }
                }
            }
            "response.function_call_arguments.done" => {
                let oi = event.get("output_index").and_then(Value::as_i64);
                if let (Some(slot), Some(full)) = (
                    oi.and_then(|oi| self.slots.get_mut(&oi)),
                    str_of(event, "arguments"),
                ) {
                    if slot.kind == SlotKind::ToolCall {
                        replace_arguments(slot, full, out, em);
                    }
                }
            }
            "response.output_item.done" => {
                let (Some(oi), Some(item)) = (
                    event.get("output_index").and_then(Value::as_i64),
                    event.get("item"),
                ) else {
                    return Ok(());
                };
                if str_of(item, "type") == Some("message")
                    && str_of(item, "phase") == Some("final_answer")
                {
                    out.stop_reason = StopReason::Stop;
                }
                if !self.slots.contains_key(&oi) && !self.create_slot(oi, item, out, em) {
                    return Ok(());
                }
                self.finish_item(oi, item, out, em);
            }
            "response.completed" | "response.incomplete" | "response.done" => {
                let response = event.get("response").cloned().unwrap_or(Value::Null);
                self.finalize(&response, out, model, flavor);
            }
            "error" => {
                return Err(match flavor {
                    Flavor::Codex => {
                        let nested = event.get("error");
                        let text = str_of(event, "message")
                            .or_else(|| nested.and_then(|n| str_of(n, "message")))
                            .or_else(|| str_of(event, "code"))
                            .or_else(|| nested.and_then(|n| str_of(n, "code")))
                            .map(str::to_owned)
                            .unwrap_or_else(|| compact(event));
                        format!("Codex error: {text}")
                    }
                    _ => format!(
                        "Error Code {}: {}",
                        js_text(event.get("code")),
                        js_text(event.get("message"))
                    ),
                });
            }
            "response.failed" => {
                self.terminal = true;
                out.raw_stop_reason = event
                    .pointer("/response/status")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let error = event.pointer("/response/error").filter(|e| !e.is_null());
                if let Flavor::Codex = flavor {
                    return Err(error
                        .and_then(|e| str_of(e, "message"))
                        .filter(|m| !m.is_empty())
                        .unwrap_or("Codex response failed")
                        .to_owned());
                }
                let reason = event
                    .pointer("/response/incomplete_details/reason")
                    .and_then(Value::as_str);
                return Err(match (error, reason) {
                    (Some(e), _) => format!(
                        "{}: {}",
                        str_of(e, "code")
                            .filter(|s| !s.is_empty())
                            .unwrap_or("unknown"),
                        str_of(e, "message")
                            .filter(|s| !s.is_empty())
                            .unwrap_or("no message")
                    ),
                    (None, Some(r)) => format!("incomplete: {r}"),
                    (None, None) => "Unknown error (no error details in response)".to_owned(),
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn finish_item(&mut self, oi: i64, item: &Value, out: &mut AssistantMessage, em: &Emitter) {
        let Some(slot) = self.slots.get_mut(&oi) else {
            return;
        };
        let ci = slot.content_index;
        match (slot.kind, str_of(item, "type")) {
            (SlotKind::Thinking, Some("reasoning")) => {
                let join = |key: &str| {
                    item.get(key)
                        .and_then(Value::as_array)
                        .map(|parts| {
                            parts
                                .iter()
                                .map(|p| str_of(p, "text").unwrap_or(""))
                                .collect::<Vec<_>>()
                                .join("\n\n")
                        })
                        .unwrap_or_default()
                };
                let summary = join("summary");
                let content = join("content");
                if let Some(Content::Thinking(t)) = out.content.get_mut(ci) {
                    if !summary.is_empty() {
                        t.thinking = summary;
                    } else if !content.is_empty() {
                        t.thinking = content;
                    }
                    t.thinking_signature = Some(compact(item));
                    em.emit(AssistantMessageEvent::ThinkingEnd {
                        content_index: ci,
                        content: t.thinking.clone(),
                    });
                }
                if let Some(id) = str_of(item, "id") {
                    self.reasoning_by_id.insert(id.to_owned(), ci);
                }
            }
            (SlotKind::Text, Some("message")) => {
                let text: String = item
                    .get("content")
                    .and_then(Value::as_array)
                    .map(|parts| {
                        parts
                            .iter()
                            .map(|p| {
                                if str_of(p, "type") == Some("output_text") {
                                    str_of(p, "text").unwrap_or("")
                                } else {
                                    str_of(p, "refusal").unwrap_or("")
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let mut sig = Map::new();
                sig.insert("v".into(), json!(1));
                sig.insert("id".into(), json!(str_of(item, "id").unwrap_or("")));
                if let Some(p) = str_of(item, "phase") {
                    sig.insert("phase".into(), json!(p));
                }
                if let Some(Content::Text(t)) = out.content.get_mut(ci) {
                    t.text = text;
                    t.text_signature = Some(compact(&Value::Object(sig)));
                    em.emit(AssistantMessageEvent::TextEnd {
                        content_index: ci,
                        content: t.text.clone(),
                    });
                }
            }
            (SlotKind::ToolCall, Some("function_call")) => {
                if let Some(full) = str_of(item, "arguments").filter(|a| !a.is_empty()) {
                    let full = full.to_owned();
                    // The complete text replaces the streamed one without a new delta here.
                    slot.arguments = full;
                }
                if let Some(Content::ToolCall(tc)) = out.content.get_mut(ci) {
                    tc.arguments = parse_streaming_json(&slot.arguments);
                    em.emit(AssistantMessageEvent::ToolCallEnd {
                        content_index: ci,
                        tool_call: tc.clone(),
                    });
                }
                self.unfinished.retain(|&i| i != ci);
            }
            _ => return,
        }
        self.slots.remove(&oi);
    }

    fn finalize(
        &mut self,
        response: &Value,
        out: &mut AssistantMessage,
        model: &Model,
        flavor: &Flavor,
    ) {
        self.terminal = true;
        // Encrypted reasoning only in the terminal response (Azure): backfill the signatures.
        if let Some(items) = response.get("output").and_then(Value::as_array) {
            for item in items {
                let (Some("reasoning"), Some(id), Some(enc)) = (
                    str_of(item, "type"),
                    str_of(item, "id"),
                    item.get("encrypted_content").filter(|e| !e.is_null()),
                ) else {
                    continue;
                };
                let Some(&ci) = self.reasoning_by_id.get(id) else {
                    continue;
                };
                if let Some(Content::Thinking(t)) = out.content.get_mut(ci) {
                    if let Some(Value::Object(mut stored)) = t
                        .thinking_signature
                        .as_deref()
                        .and_then(|s| serde_json::from_str::<Value>(s).ok())
                    {
                        if stored.get("encrypted_content").is_none_or(Value::is_null) {
                            stored.insert("encrypted_content".into(), enc.clone());
                            t.thinking_signature = Some(compact(&Value::Object(stored)));
                        }
                    }
                }
            }
        }
        if let Some(id) = str_of(response, "id") {
            out.response_id = Some(id.to_owned());
        }
        if let Some(u) = response.get("usage").filter(|u| u.is_object()) {
            let details = u.get("input_tokens_details");
            let cached = json_u64(details.and_then(|d| d.get("cached_tokens"))).unwrap_or(0);
            let write = json_u64(details.and_then(|d| d.get("cache_write_tokens"))).unwrap_or(0);
            let input = json_u64(u.get("input_tokens")).unwrap_or(0);
            out.usage.input = input.saturating_sub(cached).saturating_sub(write);
            out.usage.output = json_u64(u.get("output_tokens")).unwrap_or(0);
            out.usage.cache_read = cached;
            out.usage.cache_write = write;
            out.usage.reasoning =
                Some(json_u64(u.pointer("/output_tokens_details/reasoning_tokens")).unwrap_or(0));
            out.usage.total_tokens = json_u64(u.get("total_tokens")).unwrap_or(0);
        }
        out.usage.cost.total_from_provider.get_or_insert(false);
        out.usage.compute_cost(&model.cost);
        let tier = str_of(response, "service_tier").unwrap_or("");
        let factor = service_tier_multiplier(flavor, &model.id, tier);
        if factor != 1.0 {
            let c = &mut out.usage.cost;
            c.input *= factor;
            c.output *= factor;
            c.cache_read *= factor;
            c.cache_write *= factor;
            c.total = c.input + c.output + c.cache_read + c.cache_write;
        }
        let status = str_of(response, "status");
        let reason = response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str);
        out.raw_stop_reason = match (status, reason) {
            (Some(s), Some(r)) => Some(format!("{s}.{r}")),
            (Some(s), None) => Some(s.to_owned()),
            _ => None,
        };
        let (stop, error) = match status {
            None | Some("completed") | Some("in_progress") | Some("queued") => {
                (StopReason::Stop, None)
            }
            Some("incomplete") if reason == Some("max_output_tokens") => (StopReason::Length, None),
            Some("incomplete") => (
                StopReason::Error,
                Some(match reason {
                    Some(r) => format!("Response incomplete: {r}"),
                    None => "Response incomplete without a provider reason".to_owned(),
                }),
            ),
            Some(_) => (StopReason::Error, None),
        };
        out.stop_reason = stop;
        out.error_message = error;
        if stop == StopReason::Stop && out.tool_calls().next().is_some() {
            out.stop_reason = StopReason::ToolUse;
        }
    }
}
