//! Credentials of a provider and the key and headers of one request (spec config.md §5.3).

use super::{env_api_key, is_keyless, is_virtual, ModelRegistry, RequestAuth};
use crate::auth::AuthStorage;
use crate::value::{resolve_config_value_uncached, resolve_headers};
use pi_ai::Model;
use serde_json::Value;

impl ModelRegistry {
    /// The credential store.
    pub fn auth(&self) -> &AuthStorage {
        &self.auth
    }

    /// Sets a runtime (`--api-key`) key for `provider`.
    pub fn set_runtime_api_key(&mut self, provider: &str, key: impl Into<String>) {
        self.auth.set_runtime_api_key(provider, key);
    }

    /// Whether `provider` has credentials configured: a runtime key, an `auth.json` entry, an
    /// environment key or a `models.json` `apiKey` — or it has models and all of them are
    /// local GGUF models, which need none. Nothing is executed or refreshed.
    pub fn has_auth(&self, provider: &str) -> bool {
        let all_local = || {
            let own = self.provider_models(provider);
            !own.is_empty() && own.into_iter().all(is_keyless)
        };
        let customised = self
            .provider_layers(provider)
            .any(|p| p.models.as_ref().is_some_and(|m| !m.is_empty()))
            || self.local.iter().any(|m| m.provider == provider);
        self.auth.has_entry(provider)
            || pi_ai::env_has_credentials(provider)
            || self.configured_key_counts(provider)
            || (customised && all_local())
    }

    /// The API key for `provider`, resolved now (spec config.md §5.3, 1.6 order): the runtime
    /// key, `auth.json` (`api_key`, then an unexpired OAuth token), the provider's
    /// `models.json` `apiKey` (resolved uncached, so a `!command` runs per request), then the
    /// environment variables of the provider.
    pub fn api_key(&self, provider: &str) -> Option<String> {
        self.auth
            .stored_api_key(provider)
            .or_else(|| {
                self.configured_api_key(provider)
                    .and_then(resolve_config_value_uncached)
                    .filter(|k| !k.is_empty())
            })
            .or_else(|| env_api_key(provider))
    }

    /// Key and headers for a request to `model`. Fails with `No API key found for "<provider>"`
    /// when the provider sets `authHeader` but no key resolves (never for a local GGUF model).
    pub fn request_auth(&self, model: &Model) -> Result<RequestAuth, String> {
        self.request_auth_with(model, true)
    }

    /// [`ModelRegistry::request_auth`]; with `refresh` false a stored OAuth entry is taken as
    /// it is (expired or not) and nothing is refreshed — enough to tell whether a prompt can be
    /// admitted. With `refresh`, an OAuth entry of a provider upstream refreshes is refreshed
    /// first when it is about to expire ([`AuthStorage::oauth_access`]); a failed refresh
    /// gives `Ok` with [`RequestAuth::error`] set.
    pub fn request_auth_with(&self, model: &Model, refresh: bool) -> Result<RequestAuth, String> {
        self.request_auth_given(model, refresh, None)
    }

    /// [`ModelRegistry::request_auth_with`], with `oauth_key` (when given) as the key an
    /// extension provider's OAuth login resolved (`getApiKey` of the refreshed credential),
    /// used in place of the stored entry's access token. A virtual model needs no
    /// credentials itself (its route's model does): it counts as keyless.
    pub fn request_auth_given(
        &self,
        model: &Model,
        refresh: bool,
        oauth_key: Option<String>,
    ) -> Result<RequestAuth, String> {
        let keyless = is_keyless(model) || is_virtual(model);
        let mut api_key = self.api_key(&model.provider);
        let mut base_url = None;
        if let Some(key) = oauth_key {
            api_key = Some(key);
        } else if self.auth.is_oauth(&model.provider) {
            match self.auth.oauth_access(&model.provider, None, refresh) {
                Ok(Some(a)) => {
                    api_key = Some(a.access);
                    base_url = a.base_url;
                }
                Ok(None) => {}
                Err(e) => {
                    return Ok(RequestAuth {
                        keyless,
                        error: Some(e.to_string()),
                        ..Default::default()
                    })
                }
            }
        }
        let mut headers = model.headers.clone().unwrap_or_default();
        // `ANTHROPIC_AUTH_TOKEN` (upstream 1.6 anthropic auth): beats the key variables of the
        // environment, not a stored or models.json key, and goes out as a bearer token.
        let configured = self.auth.stored_api_key(&model.provider).is_some()
            || self.auth.is_oauth(&model.provider)
            || self.configured_api_key(&model.provider).is_some();
        if let (false, Some(token)) = (
            configured,
            pi_ai::env_keys::env_bearer_token(&model.provider),
        ) {
            headers.insert(
                "Authorization".into(),
                Value::String(format!("Bearer {token}")),
            );
            api_key = None;
        }
        for h in self
            .provider_layers(&model.provider)
            .filter_map(|p| p.headers.as_ref())
        {
            headers.extend(resolve_headers(h));
        }
        let auth_header = self.provider_layers(&model.provider).any(|p| p.auth_header);
        if let Some(h) = self
            .model_headers
            .get(&(model.provider.clone(), model.id.clone()))
        {
            headers.extend(resolve_headers(h));
        }
        if auth_header {
            let Some(key) = &api_key else {
                if keyless {
                    return Ok(RequestAuth {
                        api_key,
                        headers,
                        keyless,
                        base_url,
                        error: None,
                    });
                }
                return Err(format!("No API key found for \"{}\"", model.provider));
            };
            headers.insert(
                "Authorization".into(),
                Value::String(format!("Bearer {key}")),
            );
        }
        Ok(RequestAuth {
            api_key,
            headers,
            keyless,
            base_url,
            error: None,
        })
    }
}
