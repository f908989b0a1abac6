//! `google-vertex`: Gemini on Vertex AI, streaming `…/models/{model}:streamGenerateContent?alt=sse`
//! with the same body as `google-generative-ai` (`google_shared.rs`).
//!
//! Source: upstream 1.6 `dist/api/google-vertex.js` (facts only), Google's public Vertex AI
//! REST reference, and the recordings in
//! `crates/coding-agent/tests/fixtures/providers/upstream/vertex_*.json`.
//!
//! Credentials, as upstream:
//! * an API key (the request's key, else `GOOGLE_CLOUD_API_KEY`), unless it is the marker
//!   `gcp-vertex-credentials` or a placeholder like `<authenticated>`: sent as
//!   `x-goog-api-key`, to `https://aiplatform.googleapis.com/v1/publishers/google/models/…`;
//! * otherwise application default credentials (`google_auth.rs`): the file named by
//!   `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's
//!   `~/.config/gcloud/application_default_credentials.json`, exchanged for an access token
//!   sent as `authorization: Bearer …`, to
//!   `https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/publishers/google/models/…`
//!   with the project from `GOOGLE_CLOUD_PROJECT` (or `GCLOUD_PROJECT`) and the location from
//!   `GOOGLE_CLOUD_LOCATION` (`global` uses the host without a region).
//!
//! A model `baseUrl` (without a `{location}` placeholder) replaces the scheme, host and the
//! `projects/…/locations/…` part (project and location are still required for credentials);
//! `/v1` is added unless the base URL already names an API version (`v1`, `v1beta1`, …).
//!
//! Unlike upstream (whose `google-auth-library` always posts to `oauth2.googleapis.com`), the
//! token exchange goes to the credentials file's `token_uri` (Google's default when absent).

use super::common::{self, resolve_api_key};
use super::google_auth;
use super::google_shared::{stream_gemini, Flavor, Target};
use super::HttpOptions;
use crate::error::ProviderError;
use crate::stream::{AssistantStream, Provider, RequestTuning, StreamOptions};
use crate::types::{Context, Model};

/// The `api` value of this adapter.
pub const API: &str = "google-vertex";

/// The API key value that means "use application default credentials".
pub const CREDENTIALS_MARKER: &str = "gcp-vertex-credentials";

/// The `google-vertex` adapter over the HTTP client it was built with.
#[derive(Debug, Clone)]
pub struct GoogleVertex {
    client: common::LazyClient,
}

impl Default for GoogleVertex {
    fn default() -> Self {
        GoogleVertex {
            client: common::LazyClient::Default,
        }
    }
}

impl GoogleVertex {
    /// The adapter over a new HTTP client with `http`'s timeouts and retries.
    pub fn with_http(http: &HttpOptions) -> Self {
        Self::with_lazy(common::LazyClient::configured(http))
    }

    /// The adapter over a lazily built client shared with other adapters.
    pub(crate) fn with_lazy(client: common::LazyClient) -> Self {
        GoogleVertex { client }
    }
}

impl Provider for GoogleVertex {
    fn api(&self) -> &'static str {
        API
    }

    fn stream(&self, model: &Model, context: &Context, options: StreamOptions) -> AssistantStream {
        self.stream_tuned(model, context, options, RequestTuning::default())
    }

    fn stream_tuned(
        &self,
        model: &Model,
        context: &Context,
        options: StreamOptions,
        tuning: RequestTuning,
    ) -> AssistantStream {
        let api_key = usable_api_key(resolve_api_key(model, &options));
        stream_gemini(
            self.client.clone(),
            model,
            context,
            options,
            &tuning,
            Flavor::Vertex,
            move |client, model, _options| async move { target(&client, &model, api_key).await },
        )
    }
}

/// The key unless it is empty, the ADC marker, or a `<placeholder>`.
fn usable_api_key(key: Option<String>) -> Option<String> {
    let key = key?.trim().to_owned();
    let placeholder = key.len() > 2 && key.starts_with('<') && key.ends_with('>');
    (!key.is_empty() && key != CREDENTIALS_MARKER && !placeholder).then_some(key)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A model base URL that replaces the default host, if any.
fn custom_base(model: &Model) -> Option<String> {
    let b = model.base_url.trim();
    (!b.is_empty() && !b.contains("{location}")).then(|| b.trim_end_matches('/').to_owned())
}

/// Whether one path segment of `base` is an API version (`v1`, `v1beta1`, `v2beta`).
fn names_api_version(base: &str) -> bool {
    let path = base.split_once("://").map_or(base, |(_, rest)| {
        rest.split_once('/').map_or("", |(_, p)| p)
    });
    path.split('/').any(|seg| {
        let Some(rest) = seg.strip_prefix('v') else {
            return false;
        };
        let digits = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        if digits.len() == rest.len() {
            return false;
        }
        match digits.strip_prefix("beta") {
            Some(n) => n.chars().all(|c| c.is_ascii_digit()),
            None => digits.is_empty(),
        }
    })
}

/// `<base>[/v1]` for a custom base URL, else the default Vertex host for `location`.
fn root(model: &Model, location: Option<&str>) -> String {
    match custom_base(model) {
        Some(base) if names_api_version(&base) => base,
        Some(base) => format!("{base}/v1"),
        None => match location {
            Some(l) if l != "global" => format!("https://{l}-aiplatform.googleapis.com/v1"),
            _ => "https://aiplatform.googleapis.com/v1".to_owned(),
        },
    }
}

async fn target(
    client: &reqwest::Client,
    model: &Model,
    api_key: Option<String>,
) -> Result<Target, ProviderError> {
    let method = format!("models/{}:streamGenerateContent?alt=sse", model.id);
    if let Some(key) = api_key {
        return Ok(Target {
            url: format!("{}/publishers/google/{method}", root(model, None)),
            auth: vec![("x-goog-api-key".to_owned(), key)],
        });
    }
    let project = env("GOOGLE_CLOUD_PROJECT")
        .or_else(|| env("GCLOUD_PROJECT"))
        .ok_or_else(|| ProviderError::Protocol {
            message: "Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT or pass project in options.".to_owned(),
        })?;
    let location = env("GOOGLE_CLOUD_LOCATION").ok_or_else(|| ProviderError::Protocol {
        message:
            "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options."
                .to_owned(),
    })?;
    let token = google_auth::access_token(client).await?;
    // A custom base URL names the collection itself (upstream's `ResourceScope.COLLECTION`).
    let scope = if custom_base(model).is_some() {
        String::new()
    } else {
        format!("projects/{project}/locations/{location}/")
    };
    Ok(Target {
        url: format!(
            "{}/{scope}publishers/google/{method}",
            root(model, Some(&location))
        ),
        auth: vec![("authorization".to_owned(), format!("Bearer {token}"))],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_versions() {
        assert_eq!(usable_api_key(Some("k".into())), Some("k".into()));
        assert_eq!(usable_api_key(Some(CREDENTIALS_MARKER.into())), None);
        assert_eq!(usable_api_key(Some("<authenticated>".into())), None);
        assert_eq!(usable_api_key(None), None);
        assert!(names_api_version("http://h:1/vertex/v1beta1"));
        assert!(names_api_version("http://h:1/v1"));
        assert!(!names_api_version("http://h:1/vertex"));
        assert!(!names_api_version("http://v1.example.com/x"));
    }
}
