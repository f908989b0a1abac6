//! Account (OAuth) credentials of the built-in providers: refreshing the `{"type":"oauth"}`
//! entries of `auth.json` and the device-code and browser sign-ins of `pi auth login` (upstream 1.6
//! `@earendil-works/pi-ai` `auth/oauth/*.ts`, `auth/resolve.ts`).
//!
//! - [`oauth`] (in [`crate::config::oauth`], on the store's floor): which providers upstream
//!   refreshes and how (endpoint, client id, request and response fields, error texts), one
//!   [`oauth::OAuthProvider`] each.
//! - [`refresh`] (also there): a stored entry is refreshed when it has less than five minutes left, under the
//!   `auth.json.lock` directory lock upstream pi takes too ([`crate::config::lock`]), after re-reading `auth.json` (another process may have
//!   refreshed it already), and written back atomically with mode 0600.
//! - [`device`]: the RFC 8628 device-code polling loop (`interval`, `authorization_pending`,
//!   `slow_down`, `expired_token`) and the device-code sign-ins that use it.
//! - [`pkce`]: the browser (PKCE S256) sign-ins, run headless: the authorize URL is printed,
//!   a loopback callback or a pasted redirect URL/code completes it (OpenRouter, Anthropic with
//!   its copy-code variant, OpenAI Codex).
//!
//! Endpoints are upstream's production URLs. Kimi Code honours upstream's own
//! `KIMI_CODE_OAUTH_HOST` / `KIMI_OAUTH_HOST`. For the others upstream has no override, so
//! **`PI_TEST_OAUTH_ORIGIN`** (test-only; not a configuration surface, never set it in
//! production) replaces the scheme, host and port of every OAuth endpoint with the given origin
//! (e.g. `http://127.0.0.1:4567`), keeping the path, so tests can run the flows against a fake
//! server on 127.0.0.1.

pub mod device;
pub mod pkce;

// The token endpoints and the refresh of stored entries live with the `auth.json` store
// (the key resolver refreshes before a request); their paths stay `crate::auth::…`.
pub use crate::config::oauth;
pub use crate::config::oauth::{http, refresh};
