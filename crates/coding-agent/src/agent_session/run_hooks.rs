//! The run's view for the agent loop ([`Hooks`], pi_agent's `RunHooks`): the model, tools,
//! credentials and system prompt of each LLM call, the extension hooks around it, and the
//! routing of virtual models (docs/virtual-models.md).

use super::queues::QueueKind;
use super::AgentSession;
use futures::future::BoxFuture;
use pi_agent::{RunHooks, TurnConfig};
use pi_ai::{AssistantMessage, Message, Model, Provider, StopReason};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub(super) struct Hooks {
    pub(super) session: AgentSession,
    pub(super) cancel: CancellationToken,
}

impl Hooks {
    /// [`RunHooks::turn_config`]: the session's model (a virtual one routed to a physical
    /// one), its credentials, the loadout's system prompt and tools, the settings' tuning.
    async fn build_turn_config(&self) -> TurnConfig {
        let inner = &self.session.inner;
        let (model, thinking_level) = {
            let st = inner.setup.lock();
            (
                st.model.clone().unwrap_or_else(Model::unknown),
                st.thinking_level,
            )
        };
        let mut model = model;
        let mut thinking_level = thinking_level;
        // A virtual model is routed to a physical one for this request (docs/virtual-models.md).
        let mut route_error = None;
        if crate::config::models::is_virtual(&model) {
            match self
                .session
                .route_virtual_model_off_worker(&model, thinking_level, false)
                .await
            {
                Ok((m, level)) => {
                    model = m;
                    thinking_level = level;
                }
                Err(e) => route_error = Some(e),
            }
        }
        // A lookup that fails reaches the run as the request's error, never as "no key".
        let (creds, lookup_error) = match self.session.request_credentials(&model).await {
            Ok(c) => (c, None),
            Err(e) => (super::RequestCredentials::default(), Some(e.to_string())),
        };
        if let Some(base) = &creds.base_url {
            model.base_url = base.clone();
        }
        let failed = route_error.or(lookup_error).or_else(|| creds.error.clone());
        let loadout = inner.setup.lock().loadout.clone();
        let (thinking_budgets, transport) = {
            let settings = inner.services.settings.lock();
            // Settings `transport` (default `auto`; unknown values read as the default).
            let transport = settings
                .transport()
                .and_then(pi_ai::Transport::from_setting)
                .unwrap_or_default();
            (settings.provider_thinking_budgets(), transport)
        };
        let provider = match failed {
            Some(message) => Arc::new(FailedAuth(message)),
            None => (inner.services.provider)(&model).unwrap_or_else(|| Arc::new(NoProvider)),
        };
        // One lock at a time (module docs' lock order): each value is taken in its own
        // statement, not as a temporary of the literal below.
        let forced = inner.run_state.lock().system_prompt.clone();
        let tools = with_mcp_tools(loadout.tools, inner.services.mcp.as_ref(), || {
            crate::codemode::search::loaded_names(&self.session.transcript())
        });
        let session_id = inner.store.lock().session_id().to_string();
        TurnConfig {
            provider,
            api_key: creds.api_key,
            headers: creds.headers,
            model,
            system_prompt: forced.unwrap_or(loadout.system_prompt),
            tools,
            thinking_level,
            session_id: Some(session_id),
            tuning: pi_ai::RequestTuning {
                thinking_budgets,
                transport,
                hooks: inner
                    .services
                    .extensions
                    .as_ref()
                    .and_then(super::super::extensions::Extensions::request_hooks),
                ..Default::default()
            },
        }
    }

    /// The request a `context_with_system` handler took over: its messages as they are, and,
    /// when it changed the system state (`before` = what it was shown), the prompt text and
    /// tool declarations replayed from its system messages (upstream 1.6
    /// `getCurrentSystemPrompt`/`getCurrentTools`). A prompt forced by `before_agent_start`
    /// still replaces the prompt text (docs/extensions.md: "a systemPrompt forced from
    /// before_agent_start is still projected onto the request afterwards"). With no system
    /// message left, the request has no prompt and no tools, as upstream's. An unchanged
    /// system state keeps the turn's prompt and tools (MCP and code-mode tools included).
    fn request_owned_by_extension(
        &self,
        before: &[Message],
        messages: Vec<Message>,
    ) -> pi_agent::RequestContext {
        let head = crate::session::current_system_message(&messages);
        let state = |h: &Option<pi_ai::SystemMessage>| {
            h.as_ref()
                .map(|h| (h.content.clone(), h.sections.clone(), h.tools_added.clone()))
        };
        if state(&head) == state(&crate::session::current_system_message(before)) {
            return pi_agent::RequestContext::messages(messages);
        }
        let forced = self.session.inner.run_state.lock().system_prompt.clone();
        let prompt = head
            .as_ref()
            .map(crate::system_prompt::system_message_text)
            .unwrap_or_default();
        let tools = head
            .and_then(|h| h.tools_added)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|t| serde_json::from_value::<pi_ai::ToolDefinition>(t).ok())
            .collect();
        pi_agent::RequestContext {
            messages,
            system_prompt: Some(forced.unwrap_or(prompt)),
            tools: Some(tools),
        }
    }
}

impl RunHooks for Hooks {
    fn turn_config(&self) -> BoxFuture<'_, TurnConfig> {
        Box::pin(self.build_turn_config())
    }

    fn convert_to_llm(&self, messages: &[Message]) -> Vec<Message> {
        self.session.llm_messages(messages)
    }

    fn drain_steering(&self) -> Vec<Message> {
        self.session
            .inner
            .pending
            .lock()
            .queues
            .drain(QueueKind::Steering)
    }

    fn tool_call_hooks(&self) -> Option<Arc<dyn pi_agent::ToolCallHooks>> {
        // With a permission policy the policy runs after the extensions' gates.
        if self.session.inner.services.permissions.is_some() {
            return Some(Arc::new(super::permission::PolicyHooks {
                session: self.session.clone(),
            }));
        }
        let ext = self.session.inner.services.extensions.clone()?;
        Some(ext)
    }

    fn transforms_context(&self) -> bool {
        self.session
            .inner
            .services
            .extensions
            .as_ref()
            .is_some_and(|e| e.transforms_context())
    }

    fn transform_context(
        &self,
        messages: Vec<Message>,
    ) -> futures::future::BoxFuture<'_, pi_agent::RequestContext> {
        Box::pin(async move {
            let Some(ext) = self.session.inner.services.extensions.clone() else {
                return pi_agent::RequestContext::messages(messages);
            };
            // An abort ends a round that has not answered; the request it was for is not
            // sent (providers check the fired token before sending), so the empty list in its
            // place goes nowhere.
            let transform = async {
                let messages = ext.context(messages).await;
                match ext.context_with_system(&messages).await {
                    Some(owned) => self.request_owned_by_extension(&messages, owned),
                    None => pi_agent::RequestContext::messages(messages),
                }
            };
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => pi_agent::RequestContext::default(),
                r = transform => r,
            }
        })
    }

    fn drain_follow_up(&self) -> Vec<Message> {
        self.session
            .inner
            .pending
            .lock()
            .queues
            .drain(QueueKind::FollowUp)
    }

    fn turn_boundary<'a>(
        &'a self,
        message: &'a Message,
        tool_results: &'a [pi_ai::ToolResultMessage],
    ) -> futures::future::BoxFuture<'a, bool> {
        Box::pin(
            self.session
                .turn_boundary(message, tool_results, &self.cancel),
        )
    }

    fn message_end(&self, message: Message) -> futures::future::BoxFuture<'_, Message> {
        Box::pin(async move {
            match self.session.extensions().cloned() {
                Some(ext) => ext.message_end(message, &self.cancel).await,
                None => message,
            }
        })
    }

    fn before_next_turn(&self) -> futures::future::BoxFuture<'_, bool> {
        Box::pin(self.session.compact_before_next_turn(&self.cancel))
    }
}

/// The loadout's tools followed by the MCP `direct` tools connected now, then the tools that
/// `tool_search` loaded on this branch (`loaded`, asked only when the loadout has
/// `tool_search`); a name already taken is skipped.
fn with_mcp_tools(
    mut tools: Vec<Arc<dyn pi_agent::AgentTool>>,
    mcp: Option<&Arc<crate::mcp::McpManager>>,
    loaded: impl FnOnce() -> Vec<String>,
) -> Vec<Arc<dyn pi_agent::AgentTool>> {
    if let Some(m) = mcp {
        let mut taken: std::collections::HashSet<String> =
            tools.iter().map(|t| t.definition().name).collect();
        let searching = taken.contains(crate::codemode::search::NAME);
        let mut extra = m.direct_tools();
        if searching {
            extra.extend(crate::codemode::search::loaded_tools(m, &loaded()));
        }
        for t in extra {
            if taken.insert(t.definition().name) {
                tools.push(t);
            }
        }
    }
    tools
}

/// Stand-in adapter when a model's `api` has no implementation: every call fails cleanly.
struct NoProvider;

/// Stands in for the adapter when the credentials could not be made usable (an OAuth refresh
/// failed): the turn ends at once with that text as the assistant's `errorMessage`, as
/// upstream's request-time auth failure does.
struct FailedAuth(String);

impl Provider for FailedAuth {
    fn api(&self) -> &'static str {
        "unknown"
    }
    fn stream(
        &self,
        model: &Model,
        _context: &pi_ai::Context,
        _options: pi_ai::StreamOptions,
    ) -> pi_ai::AssistantStream {
        let mut m = AssistantMessage::empty(model);
        m.stop_reason = StopReason::Error;
        m.error_message = Some(self.0.clone());
        Box::pin(futures::stream::iter(vec![
            pi_ai::AssistantMessageEvent::Error {
                reason: StopReason::Error,
                message: Box::new(m),
            },
        ]))
    }
}

impl Provider for NoProvider {
    fn api(&self) -> &'static str {
        "unknown"
    }
    fn stream(
        &self,
        model: &Model,
        _context: &pi_ai::Context,
        _options: pi_ai::StreamOptions,
    ) -> pi_ai::AssistantStream {
        let mut m = AssistantMessage::empty(model);
        m.stop_reason = StopReason::Error;
        m.error_message = Some(format!("No API provider registered for api: {}", model.api));
        Box::pin(futures::stream::iter(vec![
            pi_ai::AssistantMessageEvent::Error {
                reason: StopReason::Error,
                message: Box::new(m),
            },
        ]))
    }
}

impl AgentSession {
    /// Routes one agent-loop request of virtual model `model` through its router in the
    /// extension host ([`crate::extensions::provider::route_virtual`]): reason `user` when a
    /// user message follows the latest assistant message, `retry` while a retry chain runs,
    /// else `continuation`; the branch's latest router state
    /// ([`crate::extensions::provider::VIRTUAL_STATE_ENTRY`]) goes along and a new one is
    /// stored (`entry_appended`) before the request is sent. `direct`: a request outside the
    /// agent loop (a compaction summary): reason `direct`, no state either way. `Err`: the
    /// text the request then fails with.
    pub(super) fn route_virtual_model(
        &self,
        model: &Model,
        level: pi_ai::ThinkingLevel,
        direct: bool,
    ) -> Result<(Model, pi_ai::ThinkingLevel), String> {
        use crate::extensions::provider::{self as xp, RouteReason};
        use crate::extensions::wire::VirtualModelState;
        let Some(ext) = self.inner.services.extensions.clone() else {
            return Err(format!(
                "Virtual model {}/{} is not registered.",
                model.provider, model.id
            ));
        };
        let transcript = self.transcript().clone();
        let messages = self.llm_messages(&transcript);
        let last_assistant = messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant(_)));
        let user_turn = messages[last_assistant.map_or(0, |i| i + 1)..]
            .iter()
            .any(|m| matches!(m, Message::User(_)));
        let reason = if direct {
            RouteReason::Direct
        } else if self.inner.retry().attempt > 0 && !user_turn {
            RouteReason::Retry
        } else if user_turn {
            RouteReason::User
        } else {
            RouteReason::Continuation
        };
        let state = {
            let store = self.inner.store.lock();
            store.branch().iter().rev().find_map(|e| match &e.kind {
                crate::session::EntryKind::Custom {
                    custom_type,
                    data: Some(d),
                } if custom_type == xp::VIRTUAL_STATE_ENTRY => VirtualModelState::from_value(d)
                    .filter(|s| s.provider == model.provider && s.model_id == model.id)
                    .map(|s| s.state),
                _ => None,
            })
        };
        let available = (self.inner.services.available_models)();
        let routed = xp::route_virtual(
            ext.host(),
            model,
            level,
            reason,
            state,
            &messages,
            available,
        )?;
        if let Some(state) = routed.new_state {
            let data = VirtualModelState {
                provider: model.provider.clone(),
                model_id: model.id.clone(),
                state,
            }
            .to_value();
            if let Err(e) = self.append_custom_entry(xp::VIRTUAL_STATE_ENTRY, Some(data)) {
                tracing::warn!("virtual model state: {e}");
            }
        }
        Ok((routed.model, routed.thinking_level))
    }
}

/// Why the credentials of a request could not be looked up
/// ([`AgentSession::request_credentials`]).
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The resolver found none usable (its text, e.g. `No API key found for "<provider>"`).
    #[error("{0}")]
    Unavailable(String),
    /// The lookup's blocking task did not finish (it panicked, or the runtime is shutting
    /// down).
    #[error("credential lookup failed: {0}")]
    Interrupted(String),
}

impl AgentSession {
    /// The credentials of a request to `model` ([`super::KeyUse::Request`]). The resolver is
    /// synchronous and may block (an OAuth refresh takes the `auth.json` lock and calls the
    /// token endpoint; an extension provider's OAuth asks its host), so it runs on the
    /// blocking pool while the worker goes on.
    ///
    /// # Errors
    /// [`CredentialError`]: the resolver's own failure, or its task's.
    pub(super) async fn request_credentials(
        &self,
        model: &Model,
    ) -> Result<super::RequestCredentials, CredentialError> {
        let resolver = self.inner.services.api_key.clone();
        let model = model.clone();
        tokio::task::spawn_blocking(move || resolver(&model, super::KeyUse::Request))
            .await
            .map_err(|e| CredentialError::Interrupted(e.to_string()))?
            .map_err(CredentialError::Unavailable)
    }

    /// [`AgentSession::route_virtual_model`] on the blocking pool (the router runs in the
    /// extension host and is waited for synchronously there).
    ///
    /// # Errors
    /// The text the request then fails with.
    pub(super) async fn route_virtual_model_off_worker(
        &self,
        model: &Model,
        level: pi_ai::ThinkingLevel,
        direct: bool,
    ) -> Result<(Model, pi_ai::ThinkingLevel), String> {
        let me = self.clone();
        let model = model.clone();
        tokio::task::spawn_blocking(move || me.route_virtual_model(&model, level, direct))
            .await
            .map_err(|e| format!("virtual model routing failed: {e}"))?
    }
}
