//! Providers and virtual models registered by extensions (`pi.registerProvider`,
//! `pi.registerVirtualModel`; upstream docs/custom-provider.md), a layer above `models.json`.

use super::{builtin_defaults, is_virtual, ModelConfig, ModelRegistry, ProviderConfig};
use pi_ai::Model;

impl ModelRegistry {
    /// Registers (or replaces) the extension provider `name` (`pi.registerProvider(name,
    /// config)`, upstream docs/custom-provider.md, legacy `ProviderConfig` form): without
    /// `models` it redirects an existing provider (`baseUrl`, `headers`, `apiKey`, … apply to
    /// its models, which stay); with `models` those replace every model of the provider.
    /// Extension values win over `models.json` ones. `Err`: upstream's message for a config
    /// that cannot be composed (nothing configured, a model without `baseUrl`/`api`, a new
    /// provider without any authentication); the registry is then unchanged.
    pub fn register_extension_provider(
        &mut self,
        name: &str,
        config: ProviderConfig,
        streams: bool,
    ) -> Result<(), String> {
        self.check_extension_provider(name, &config, streams)?;
        match self.extension.iter_mut().find(|(n, _)| n == name) {
            Some((_, c)) => *c = config,
            None => self.extension.push((name.to_string(), config)),
        }
        self.extension_streams.retain(|n| n != name);
        if streams {
            self.extension_streams.push(name.to_string());
        }
        self.collect_model_headers();
        self.rebuild_slots();
        Ok(())
    }

    /// [`ModelRegistry::register_extension_provider`] with what the registration carries besides
    /// its data: `oauth` = `Some(login name)` when it has an `oauth` login (it then counts as an
    /// authentication method, upstream `composeOAuthAuth`), `refreshes` when it has
    /// `refreshModels`.
    pub fn register_extension_provider_full(
        &mut self,
        name: &str,
        config: ProviderConfig,
        streams: bool,
        oauth: Option<Option<String>>,
        refreshes: bool,
    ) -> Result<(), String> {
        let previous = self.extension_oauth.clone();
        self.extension_oauth.retain(|(n, _)| n != name);
        if let Some(login) = oauth {
            self.extension_oauth.push((name.to_string(), login));
        }
        if let Err(e) = self.register_extension_provider(name, config, streams) {
            self.extension_oauth = previous;
            return Err(e);
        }
        self.extension_refreshes.retain(|n| n != name);
        if refreshes {
            self.extension_refreshes.push(name.to_string());
        }
        Ok(())
    }

    /// Replaces the models of extension provider `name` with `models` (what its
    /// `refreshModels` returned: upstream replaces that registration's live models). `Err`:
    /// upstream's message for a definition that cannot be composed (the registry is then
    /// unchanged), or no such registration.
    pub fn set_extension_models(
        &mut self,
        name: &str,
        models: Vec<ModelConfig>,
    ) -> Result<(), String> {
        let Some(config) = self
            .extension
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c.clone())
        else {
            return Err(format!("Provider {name} is not registered."));
        };
        let streams = self.extension_streams.iter().any(|n| n == name);
        let next = ProviderConfig {
            models: Some(models),
            ..config
        };
        self.register_extension_provider(name, next, streams)
    }

    /// Whether extension provider `provider` has an `oauth` login.
    pub fn extension_oauth(&self, provider: &str) -> bool {
        self.extension_oauth.iter().any(|(n, _)| n == provider)
    }

    /// The display name of extension provider `provider`'s login: `oauth.name`, else the
    /// provider's `name`, else its id (upstream `composeModelProvider` `name`, with the OAuth
    /// name first as `/login` shows it).
    pub fn extension_login_name(&self, provider: &str) -> Option<String> {
        let (_, login) = self.extension_oauth.iter().find(|(n, _)| n == provider)?;
        let config_name = self
            .extension
            .iter()
            .find(|(n, _)| n == provider)
            .and_then(|(_, c)| c.name.clone());
        Some(
            config_name
                .or_else(|| login.clone())
                .unwrap_or_else(|| provider.to_string()),
        )
    }

    /// The extension providers with `refreshModels`, in registration order.
    pub fn extension_refreshes(&self) -> Vec<String> {
        self.extension_refreshes.clone()
    }

    /// Registers (or replaces) a virtual model (`pi.registerVirtualModel`, upstream
    /// `ModelRuntime.registerVirtualModel`). `Err`: upstream's message when `provider`/`id` is
    /// a physical model.
    pub fn register_virtual_model(&mut self, model: Model) -> Result<(), String> {
        if model.provider.trim().is_empty() || model.id.trim().is_empty() {
            return Err("Virtual model provider and id must not be empty.".into());
        }
        let physical = self
            .find(&model.provider, &model.id)
            .is_some_and(|m| !is_virtual(m));
        if physical {
            return Err(format!(
                "Virtual model {}/{} conflicts with a physical model.",
                model.provider, model.id
            ));
        }
        self.virtual_models
            .retain(|m| !(m.provider == model.provider && m.id == model.id));
        self.virtual_models.push(model);
        self.rebuild_slots();
        Ok(())
    }

    /// Removes a virtual model; `false` when there was none.
    pub fn unregister_virtual_model(&mut self, provider: &str, id: &str) -> bool {
        let before = self.virtual_models.len();
        self.virtual_models
            .retain(|m| !(m.provider == provider && m.id == id));
        let removed = before != self.virtual_models.len();
        if removed {
            self.rebuild_slots();
        }
        removed
    }

    /// The physical (non-virtual) model `provider`/`id`.
    pub fn find_physical(&self, provider: &str, id: &str) -> Option<&Model> {
        self.find(provider, id).filter(|m| !is_virtual(m))
    }

    /// Removes the extension provider `name` (`pi.unregisterProvider`): what it replaced
    /// (built-in models, `models.json` values) is back. `false` when none was registered.
    pub fn unregister_extension_provider(&mut self, name: &str) -> bool {
        let before = self.extension.len();
        self.extension.retain(|(n, _)| n != name);
        self.extension_streams.retain(|n| n != name);
        self.extension_oauth.retain(|(n, _)| n != name);
        self.extension_refreshes.retain(|n| n != name);
        let removed = self.extension.len() != before;
        if removed {
            self.collect_model_headers();
            self.rebuild_slots();
        }
        removed
    }

    /// Removes every extension provider (before the extensions are loaded again).
    pub fn clear_extension_providers(&mut self) {
        self.extension_oauth.clear();
        self.extension_refreshes.clear();
        if !self.virtual_models.is_empty() {
            self.virtual_models.clear();
            self.rebuild_slots();
        }
        if !self.extension.is_empty() {
            self.extension.clear();
            self.extension_streams.clear();
            self.collect_model_headers();
            self.rebuild_slots();
        }
    }

    /// Whether `model` streams from its extension provider's `streamSimple` (upstream
    /// `composeModelProvider`: the provider registered one and the model's `api` is the
    /// provider's `api`).
    pub fn extension_streams(&self, model: &Model) -> bool {
        self.extension_streams.contains(&model.provider)
            && self
                .extension
                .iter()
                .any(|(n, c)| *n == model.provider && c.api.as_deref() == Some(model.api.as_str()))
    }

    /// The names of the registered extension providers, in registration order.
    pub fn extension_providers(&self) -> Vec<String> {
        self.extension.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Upstream `validateExtensionProvider` / `composeModelProvider` checks, phrased as
    /// upstream 1.6 `core/provider-composer.js` phrases them.
    pub(super) fn check_extension_provider(
        &self,
        name: &str,
        p: &ProviderConfig,
        streams: bool,
    ) -> Result<(), String> {
        if streams && p.api.is_none() {
            return Err(format!(
                "Provider {name}: \"api\" is required when registering streamSimple."
            ));
        }
        let configures_something = p.models.as_ref().is_some_and(|m| !m.is_empty())
            || p.base_url.is_some()
            || p.headers.is_some()
            || p.compat.is_some()
            || p.model_overrides.as_ref().is_some_and(|m| !m.is_empty())
            || p.api_key.is_some()
            || p.auth_header;
        if !configures_something {
            return Err(format!(
                "Provider {name}: must specify \"baseUrl\", \"headers\", \"compat\", \"modelOverrides\", or \"models\"."
            ));
        }
        let builtin = !pi_ai::models::provider_models(name).is_empty();
        for m in p.models.iter().flatten() {
            let api = m.api.as_deref().or(p.api.as_deref());
            let defaults = builtin_defaults(name, &m.id, api);
            if api.is_none() && defaults.is_none() {
                return Err(format!(
                    "Provider {name}, model {}: no \"api\" specified. Set it at model level or provider level.",
                    m.id
                ));
            }
            if m.base_url.is_none() && p.base_url.is_none() && defaults.is_none() {
                return Err(format!(
                    "Provider {name}: \"baseUrl\" is required when defining custom models."
                ));
            }
            for (field, v) in [
                ("contextWindow", m.context_window),
                ("maxTokens", m.max_tokens),
            ] {
                if v.is_some_and(|n| n.is_nan() || n <= 0.0) {
                    return Err(format!("Provider {name}, model {}: invalid {field}", m.id));
                }
            }
        }
        let keyed = p.api_key.is_some()
            || self
                .config
                .provider(name)
                .is_some_and(|c| c.api_key.is_some());
        let oauth = self.extension_oauth.iter().any(|(n, _)| n == name);
        if !builtin
            && !keyed
            && !oauth
            && !self.auth.has_entry(name)
            && !pi_ai::env_has_credentials(name)
        {
            return Err(format!(
                "Provider {name}: no authentication method configured."
            ));
        }
        Ok(())
    }
}
