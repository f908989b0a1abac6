//! A scripted fake LLM HTTP server for offline tests of the pi agent.
//!
//! It speaks the two streaming wire formats the agent uses, exactly as the shared conformance
//! harness's `fakellm.py` does:
//!
//! * OpenAI chat completions SSE: `POST /v1/chat/completions` (also `/chat/completions`);
//! * Anthropic Messages SSE: `POST /v1/messages` (a query such as `?beta=true` is accepted).
//! * Gemini SSE ([`wire_gemini`]): `POST …/models/<model>:streamGenerateContent?alt=sse`
//!   (Google Generative AI and Vertex AI paths alike), plus an OAuth token endpoint
//!   (`POST …/token`) for Vertex application-default credentials.
//! * Native Mistral SSE ([`wire_mistral`]): `POST /mistral/v1/chat/completions`.
//! * OpenAI Responses SSE: `POST …/responses` (also `?api-version=…` and `/codex/responses`;
//!   see [`wire_responses`]).
//! * The Codex Responses WebSocket (`src/ws.rs`): `GET …/responses` with
//!   `Upgrade: websocket`, accepted when the script says `"websocket": true`; each
//!   `response.create` text frame is answered with the Responses events as JSON text frames.
//!   `content-encoding: zstd` request bodies are decoded (any path).
//! * Amazon Bedrock ConverseStream in AWS event-stream framing ([`wire_bedrock`]):
//!   `POST …/model/<model id>/converse-stream`.
//! * The AWS credential endpoints (STS, SSO portal, container, instance metadata) that the
//!   Bedrock credential chain calls, as a separate server ([`wire_aws_creds`]).
//!
//! Replies come from a [`Script`]: a list of [`Turn`]s, each consumed once by the first request
//! it fits (optional `match` substring and `api` constraints); when none fits, the script's
//! "exhausted" turn is served. Generated ids are deterministic: `chatcmpl-fake-<seq>`,
//! `call_fake_<seq>_<i>`, `msg_fake_<seq>`, `toolu_fake_<seq>_<i>`, where `<seq>` is the
//! request's 1-based arrival number. Every request is recorded ([`FakeLlm::requests`]).
//!
//! ```no_run
//! use pi_fakellm::{FakeLlm, Script, Turn, Usage};
//! use serde_json::json;
//!
//! let fake = FakeLlm::spawn(Script::new([
//!     Turn::tool_call("bash", json!({"command": "echo hi"})),
//!     Turn::text("The command printed: hi").usage(Usage::new(120, 12)),
//! ]))?;
//! println!("openai base url: {}", fake.base_url_openai());
//! # Ok::<(), std::io::Error>(())
//! ```

mod script;
mod server;
pub mod wire;
pub mod wire_aws_creds;
pub mod wire_bedrock;
pub mod wire_gemini;
pub mod wire_mistral;
pub mod wire_responses;
mod ws;

pub use script::{
    Api, Block, ErrorSpec, ExceptionSpec, MatchSpec, Script, Turn, Usage, EXHAUSTED_TEXT,
};
pub use server::{FakeLlm, Options, RecordedRequest};
