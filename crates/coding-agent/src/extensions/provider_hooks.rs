//! The provider hooks of extensions (upstream docs/extensions.md "Provider Events"), as the
//! [`pi_ai::ProviderRequestHooks`] of each agent LLM request:
//!
//! * `before_provider_headers {headers}`: the caller headers of the request (models.json
//!   provider headers, `authHeader`'s `Authorization`; not the adapter's defaults nor its
//!   API-key header, as upstream 1.6). Handlers mutate `event.headers` in place (a string
//!   sets or overrides, `null` deletes, a default header of the adapter too); the headers as
//!   they leave them are sent.
//! * `before_provider_request {payload}`: the provider-specific JSON body; a handler's return
//!   value other than `undefined` replaces it for later handlers and for the request.
//! * `after_provider_response {status, headers}`: the HTTP status and the response headers
//!   (lower-case names), before the body is read; errors included.
//!
//! A host that fails or times out leaves the request unchanged (after an `extension_error`):
//! these hooks observe or reshape a request, they gate nothing.

use super::wire::{Headers, HeadersReply, HostEvent, PayloadReply, ToHost};
use super::Extensions;
use futures::future::BoxFuture;
use pi_ai::{ProviderRequestHooks, RequestHooks};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// The event names these hooks fire.
const EVENTS: [&str; 3] = [
    "before_provider_headers",
    "before_provider_request",
    "after_provider_response",
];

/// [`ProviderRequestHooks`] that run the extensions' handlers.
struct ExtensionRequestHooks {
    ext: Arc<Extensions>,
}

impl Extensions {
    /// The request hooks for the next LLM request, or `None` when no loaded extension handles
    /// any provider event (or the host is gone).
    pub fn request_hooks(self: &Arc<Self>) -> Option<RequestHooks> {
        if self.host.is_dead() || !EVENTS.iter().any(|e| self.handles(e)) {
            return None;
        }
        Some(RequestHooks(Arc::new(ExtensionRequestHooks {
            ext: self.clone(),
        })))
    }

    /// Sends `event` (named `kind`) and waits for the reply; `None` after a failure (reported
    /// as `extension_error` for each extension that handles `kind`) or when nobody handles it.
    async fn provider_round(&self, kind: &str, event: HostEvent) -> Option<Value> {
        if !self.handles(kind) || self.host.is_dead() {
            return None;
        }
        let id = self.host.next_id();
        let msg = ToHost::HostEvent {
            id: Some(id),
            event,
        };
        match self.host.request(id, &msg, Some(self.hook_timeout)).await {
            Ok(v) => Some(v),
            Err(e) => {
                for p in self.handlers_of(kind) {
                    self.error(&p, kind, &e.to_string());
                }
                None
            }
        }
    }
}

impl ProviderRequestHooks for ExtensionRequestHooks {
    fn headers(
        &self,
        headers: Vec<(String, String)>,
    ) -> BoxFuture<'static, Vec<(String, Option<String>)>> {
        let ext = self.ext.clone();
        Box::pin(async move {
            const KIND: &str = "before_provider_headers";
            let event = HostEvent::BeforeProviderHeaders {
                headers: Headers(headers.clone()),
            };
            let Some(reply) = ext.provider_round(KIND, event).await else {
                return vec![];
            };
            let Some(out) = HeadersReply::deserialize(&reply)
                .ok()
                .and_then(|r| r.headers)
            else {
                return vec![];
            };
            let given = |k: &str| {
                headers
                    .iter()
                    .rev()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.as_str())
            };
            let mut changes: Vec<(String, Option<String>)> = vec![];
            // A header the handlers deleted from the object is removed as one set to null.
            for (k, _) in &headers {
                if !out.contains_key(k) {
                    changes.push((k.clone(), None));
                }
            }
            for (k, v) in out {
                match v {
                    // `null` suppresses the header, the adapter's default of that name too.
                    Value::Null => changes.push((k, None)),
                    Value::String(s) if Some(s.as_str()) != given(&k) => changes.push((k, Some(s))),
                    _ => {}
                }
            }
            changes
        })
    }

    fn payload(&self, payload: Value) -> BoxFuture<'static, Value> {
        let ext = self.ext.clone();
        Box::pin(async move {
            const KIND: &str = "before_provider_request";
            if !ext.handles(KIND) {
                return payload;
            }
            let event = HostEvent::BeforeProviderRequest {
                payload: payload.clone(),
            };
            match ext.provider_round(KIND, event).await {
                Some(r) if r.is_object() => PayloadReply::deserialize(&r)
                    .ok()
                    .and_then(|r| r.payload)
                    .unwrap_or(payload),
                _ => payload,
            }
        })
    }

    fn response(&self, status: u16, headers: Vec<(String, String)>) -> BoxFuture<'static, ()> {
        let ext = self.ext.clone();
        Box::pin(async move {
            const KIND: &str = "after_provider_response";
            let event = HostEvent::AfterProviderResponse {
                status,
                headers: Headers(headers),
            };
            let _ = ext.provider_round(KIND, event).await;
        })
    }
}
