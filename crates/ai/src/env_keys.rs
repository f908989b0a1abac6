//! Provider credentials from the environment (upstream 1.6 `auth.apiKey.resolve` of each
//! built-in provider; the variable names come from the generated catalogue,
//! [`crate::models::BuiltinProvider::env_vars`]).
//!
//! Most providers read one or more API-key variables, first set wins. The exceptions, as
//! upstream resolves them:
//! - `anthropic`: `ANTHROPIC_AUTH_TOKEN` (sent as `Authorization: Bearer`, never as a key),
//!   then `ANTHROPIC_OAUTH_TOKEN`, then `ANTHROPIC_API_KEY`; else workload identity federation
//!   when `ANTHROPIC_FEDERATION_RULE_ID`, `ANTHROPIC_ORGANIZATION_ID` and
//!   `ANTHROPIC_IDENTITY_TOKEN_FILE` are all set.
//! - `amazon-bedrock`: `AWS_BEARER_TOKEN_BEDROCK`, `AWS_PROFILE`, `AWS_ACCESS_KEY_ID` with
//!   `AWS_SECRET_ACCESS_KEY`, or the ECS / IRSA variables (ambient credentials).
//! - `google-vertex`: `GOOGLE_CLOUD_API_KEY`, else application default credentials (the
//!   `GOOGLE_APPLICATION_CREDENTIALS` file or gcloud's default file) with a project
//!   (`GOOGLE_CLOUD_PROJECT` / `GCLOUD_PROJECT`) and `GOOGLE_CLOUD_LOCATION`.
//! - `cloudflare-workers-ai`: `CLOUDFLARE_API_KEY` with `CLOUDFLARE_ACCOUNT_ID`;
//!   `cloudflare-ai-gateway` also needs `CLOUDFLARE_GATEWAY_ID`.

use crate::models::builtin_provider;

/// `ANTHROPIC_AUTH_TOKEN`: counted by [`find_env_keys`] and [`env_has_credentials`] but never
/// returned by [`env_api_key`], because it must be sent as `Authorization: Bearer`.
pub const ANTHROPIC_AUTH_TOKEN_ENV: &str = "ANTHROPIC_AUTH_TOKEN";

/// The marker [`env_api_key`] returns for ambient credentials that are not a key
/// (`amazon-bedrock`, `google-vertex` application default credentials, Anthropic workload
/// identity federation).
pub const AUTHENTICATED_MARKER: &str = "<authenticated>";

const ANTHROPIC_KEYS: &[&str] = &[
    ANTHROPIC_AUTH_TOKEN_ENV,
    "ANTHROPIC_OAUTH_TOKEN",
    "ANTHROPIC_API_KEY",
];

/// The environment variables that can hold an API key (or token) for `provider`, in priority
/// order; empty for providers without one (custom providers, OAuth-only providers).
pub fn env_key_vars(provider: &str) -> Vec<&'static str> {
    match provider {
        "anthropic" => ANTHROPIC_KEYS.to_vec(),
        "amazon-bedrock" => vec!["AWS_BEARER_TOKEN_BEDROCK"],
        "google-vertex" => vec!["GOOGLE_CLOUD_API_KEY"],
        "cloudflare-workers-ai" | "cloudflare-ai-gateway" => vec!["CLOUDFLARE_API_KEY"],
        _ => builtin_provider(provider)
            .map(|p| p.env_vars.iter().map(String::as_str).collect())
            .unwrap_or_default(),
    }
}

fn non_empty_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn set(name: &str) -> bool {
    non_empty_var(name).is_some()
}

/// The variables from [`env_key_vars`] that are set (non-empty) in this process.
pub fn find_env_keys(provider: &str) -> Vec<&'static str> {
    env_key_vars(provider)
        .into_iter()
        .filter(|v| set(v))
        .collect()
}

/// Whether the extra variables a keyed provider needs besides its key are set
/// (`cloudflare-*`: account id, gateway id).
fn companions_set(provider: &str) -> bool {
    match provider {
        "cloudflare-workers-ai" => set("CLOUDFLARE_ACCOUNT_ID"),
        "cloudflare-ai-gateway" => set("CLOUDFLARE_ACCOUNT_ID") && set("CLOUDFLARE_GATEWAY_ID"),
        _ => true,
    }
}

/// Ambient (non-key) credentials of `provider` in the environment; see the module docs.
fn ambient_credentials(provider: &str) -> bool {
    match provider {
        "anthropic" => [
            "ANTHROPIC_FEDERATION_RULE_ID",
            "ANTHROPIC_ORGANIZATION_ID",
            "ANTHROPIC_IDENTITY_TOKEN_FILE",
        ]
        .iter()
        .all(|v| set(v)),
        "amazon-bedrock" => {
            set("AWS_PROFILE")
                || (set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY"))
                || [
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                    "AWS_WEB_IDENTITY_TOKEN_FILE",
                ]
                .iter()
                .any(|v| set(v))
        }
        "google-vertex" => {
            let creds = match non_empty_var("GOOGLE_APPLICATION_CREDENTIALS") {
                Some(p) => std::path::Path::new(&p).exists(),
                None => non_empty_var("HOME").is_some_and(|h| {
                    std::path::Path::new(&h)
                        .join(".config/gcloud/application_default_credentials.json")
                        .exists()
                }),
            };
            let project = set("GOOGLE_CLOUD_PROJECT") || set("GCLOUD_PROJECT");
            creds && project && set("GOOGLE_CLOUD_LOCATION")
        }
        _ => false,
    }
}

/// Whether the environment gives `provider` credentials of any kind (a key, a bearer token
/// such as `ANTHROPIC_AUTH_TOKEN`, or ambient credentials): what makes its models available.
pub fn env_has_credentials(provider: &str) -> bool {
    (!find_env_keys(provider).is_empty() && companions_set(provider))
        || ambient_credentials(provider)
}

/// The bearer token for `provider` from the environment, when that is how it authenticates:
/// `ANTHROPIC_AUTH_TOKEN` for `anthropic`; `None` otherwise.
pub fn env_bearer_token(provider: &str) -> Option<String> {
    match provider {
        "anthropic" => non_empty_var(ANTHROPIC_AUTH_TOKEN_ENV),
        _ => None,
    }
}

/// The API key for `provider` from the environment, e.g. `OPENAI_API_KEY` for `openai`;
/// for `anthropic`: `ANTHROPIC_OAUTH_TOKEN`, then `ANTHROPIC_API_KEY` (never
/// `ANTHROPIC_AUTH_TOKEN`: [`env_bearer_token`]). Ambient credentials yield
/// [`AUTHENTICATED_MARKER`] for `amazon-bedrock` and `google-vertex`.
pub fn env_api_key(provider: &str) -> Option<String> {
    if companions_set(provider) {
        let key = env_key_vars(provider)
            .into_iter()
            .filter(|v| *v != ANTHROPIC_AUTH_TOKEN_ENV)
            .find_map(non_empty_var);
        if key.is_some() {
            return key;
        }
    }
    match provider {
        "amazon-bedrock" | "google-vertex" if ambient_credentials(provider) => {
            Some(AUTHENTICATED_MARKER.to_owned())
        }
        _ => None,
    }
}
