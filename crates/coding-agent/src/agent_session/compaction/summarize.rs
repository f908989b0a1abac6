//! Summarization requests (spec agent-loop.md §8.6; upstream 1.6 docs/compaction.md
//! "Generate summary"): one plain request per summary with our system prompt, no tools, no
//! prompt-cache writes, the current thinking level, and an output cap of the model's
//! `maxTokens` (reduced when the request would not fit the context window). Transient failures
//! are retried with the `retry` settings and back-off of a run's automatic retry, reported as `summarization_retry_*` events.

use super::prompt;
use super::CompactionError;
use crate::agent_session::convert::estimate_tokens;
use crate::agent_session::retry::RetryPolicy;
use crate::agent_session::EventSink;
use crate::protocol::rpc::{CompactionReason, RpcEvent, SummarizationSource};
use pi_ai::{
    AssistantMessage, CacheRetention, Content, Context, Message, Model, Provider, RequestTuning,
    StopReason, StreamOptions, ThinkingLevel, Usage,
};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Smallest output cap a summary request is given even when the context is nearly full.
const MIN_SUMMARY_TOKENS: u64 = 256;

/// Everything a summarization request needs, captured when the compaction starts.
#[derive(Clone)]
pub struct Summarizer {
    /// The session's current model.
    pub model: Model,
    /// Its adapter.
    pub provider: Arc<dyn Provider>,
    /// Its API key (`None` = the provider's environment variable).
    pub api_key: Option<String>,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// The session's thinking level (`off` = no reasoning parameters).
    pub thinking_level: ThinkingLevel,
    /// The agent-level retry policy (settings `retry.*`, toggle `set_auto_retry`): transient
    /// failures are retried as a run's are ([`RetryPolicy::backoff_ms`], a server's
    /// `Retry-After` as the floor).
    pub retry: RetryPolicy,
    /// Fires on `abort`.
    pub cancel: CancellationToken,
    /// Where the retry events go.
    pub sink: EventSink,
    /// Why the compaction runs (`summarization_retry_attempt_start.reason`).
    pub reason: CompactionReason,
    /// What is summarized (`summarization_retry_attempt_start.source`); a branch summary's
    /// retry events carry no `reason`.
    pub source: SummarizationSource,
}

/// A summary text and the usage of the request that produced it.
pub struct Summary {
    /// The model's text blocks joined with `\n`.
    pub text: String,
    /// Usage (tokens and cost) of the successful request.
    pub usage: Usage,
}

/// Sums two usages field by field (upstream `combineUsage`).
pub fn combine_usage(a: &Usage, b: &Usage) -> Usage {
    let opt = |x: Option<u64>, y: Option<u64>| match (x, y) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
    };
    let mut u = a.clone();
    u.input += b.input;
    u.output += b.output;
    u.cache_read += b.cache_read;
    u.cache_write += b.cache_write;
    u.cache_write_1h = opt(a.cache_write_1h, b.cache_write_1h);
    u.reasoning = opt(a.reasoning, b.reasoning);
    u.total_tokens += b.total_tokens;
    u.cost.input += b.cost.input;
    u.cost.output += b.cost.output;
    u.cost.cache_read += b.cost.cache_read;
    u.cost.cache_write += b.cost.cache_write;
    u.cost.total += b.cost.total;
    u.cost.total_from_provider = match (a.cost.total_from_provider, b.cost.total_from_provider) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(false) && y.unwrap_or(false)),
    };
    u
}

impl Summarizer {
    fn output_cap(&self, context: &Context) -> u64 {
        let cap = self.model.max_tokens.max(1);
        let window = self.model.context_window;
        if window == 0 {
            return cap;
        }
        let input = estimate_tokens(&Message::user_text(context.system_prompt.clone()))
            + context.messages.iter().map(estimate_tokens).sum::<u64>();
        if input + cap <= window {
            cap
        } else {
            window
                .saturating_sub(input)
                .clamp(MIN_SUMMARY_TOKENS.min(cap), cap)
        }
    }

    async fn once(&self, context: &Context) -> AssistantMessage {
        let options = StreamOptions {
            api_key: self.api_key.clone(),
            reasoning: match self.thinking_level {
                ThinkingLevel::Off => None,
                l if self.model.reasoning => Some(l),
                _ => None,
            },
            max_tokens: Some(self.output_cap(context)),
            session_id: None,
            headers: self.headers.clone(),
            cancel: self.cancel.clone(),
        };
        let tuning = RequestTuning {
            cache_retention: CacheRetention::None,
            ..Default::default()
        };
        let stream = self
            .provider
            .stream_tuned(&self.model, context, options, tuning);
        if let Some(m) = pi_ai::final_message(stream).await {
            return m;
        }
        let mut m = AssistantMessage::empty(&self.model);
        if self.cancel.is_cancelled() {
            m.stop_reason = StopReason::Aborted;
        } else {
            m.stop_reason = StopReason::Error;
            m.error_message = Some("Stream ended without a final message".into());
        }
        m
    }

    fn emit(&self, event: RpcEvent) {
        (self.sink)(event)
    }

    /// One summary request, retried on transient errors. `label` names it in errors
    /// (`Summarization`, `Turn prefix summarization`).
    pub async fn summarize(
        &self,
        user_text: String,
        label: &str,
    ) -> Result<Summary, CompactionError> {
        let context = Context {
            system_prompt: prompt::SYSTEM_PROMPT.to_string(),
            messages: vec![Message::user_text(user_text)],
            tools: Vec::new(),
        };
        let mut attempt = 0u32;
        let mut retried = false;
        loop {
            let response = self.once(&context).await;
            if response.stop_reason == StopReason::Aborted || self.cancel.is_cancelled() {
                if retried {
                    self.emit(RpcEvent::SummarizationRetryFinished {});
                }
                return Err(CompactionError::Aborted);
            }
            if response.stop_reason != StopReason::Error {
                if retried {
                    self.emit(RpcEvent::SummarizationRetryFinished {});
                }
                return finish(response, label);
            }
            let error = response
                .error_message
                .clone()
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "Unknown error".into());
            let policy = &self.retry;
            let requested = response.error.as_ref().and_then(|e| e.retry_after_ms());
            let over_cap = requested.is_some_and(|ms| ms > policy.max_agent_delay_ms);
            if !policy.enabled
                || attempt >= policy.max_retries
                || over_cap
                || !pi_ai::is_retryable(&response)
            {
                if retried {
                    self.emit(RpcEvent::SummarizationRetryFinished {});
                }
                return Err(CompactionError::Summary(format!("{label} failed: {error}")));
            }
            attempt += 1;
            retried = true;
            let delay = policy.backoff_ms(attempt).max(requested.unwrap_or(0));
            self.emit(RpcEvent::SummarizationRetryScheduled {
                attempt,
                max_attempts: policy.max_retries,
                delay_ms: delay,
                error_message: error,
            });
            tokio::select! {
                _ = self.cancel.cancelled() => {
                    self.emit(RpcEvent::SummarizationRetryFinished {});
                    return Err(CompactionError::Aborted);
                }
                _ = tokio::time::sleep(std::time::Duration::from_millis(delay)) => {}
            }
            self.emit(RpcEvent::SummarizationRetryAttemptStart {
                source: self.source,
                reason: (self.source == SummarizationSource::Compaction).then_some(self.reason),
            });
        }
    }
}

fn finish(response: AssistantMessage, label: &str) -> Result<Summary, CompactionError> {
    if response.stop_reason == StopReason::Length {
        return Err(CompactionError::Summary(format!(
            "{label} failed: the summary reached the output token limit and is incomplete"
        )));
    }
    if response
        .content
        .iter()
        .any(|c| matches!(c, Content::ToolCall(_)))
    {
        return Err(CompactionError::Summary(format!(
            "{label} failed: the model called a tool instead of writing a summary"
        )));
    }
    let text = response
        .content
        .iter()
        .filter_map(Content::as_text)
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Summary {
        text,
        usage: response.usage,
    })
}
