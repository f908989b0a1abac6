//! `models.json` and the model registry (spec config.md §4–§5; messages-and-models.md §7;
//! upstream `core/model-config.ts`, `core/model-registry.ts`).
//!
//! ```json
//! {"providers": {"<name>": {
//!   "name"?, "baseUrl"?, "api"?, "apiKey"?, "headers"?: {"k": "v"}, "authHeader"?: bool,
//!   "compat"?: {…},
//!   "models"?: [{"id", "name"?, "api"?, "baseUrl"?, "reasoning"?, "thinkingLevelMap"?,
//!                "input"?, "cost"?, "contextWindow"?, "maxTokens"?, "headers"?, "compat"?,
//!                "path"?}],
//!   "modelOverrides"?: {"<built-in id>": {"name"?, "reasoning"?, "thinkingLevelMap"?, "input"?,
//!                "cost"? (partial), "contextWindow"?, "maxTokens"?, "headers"?, "compat"?}}}}}
//! ```
//!
//! Registry order = built-in catalogue order, then custom models in file order (a custom model
//! with the id of a built-in model of the same provider replaces it and moves to the end), then
//! the local GGUF models found in `<agent dir>/models/` (provider [`LOCAL_PROVIDER`], issue 3;
//! only with the `local` cargo feature), skipping any whose provider/id is already listed.
//!
//! Local GGUF models (api [`LOCAL_API`], `"local-gguf"`) run in-process and need no
//! credentials: they always count as available. In `models.json` such a model names its file by
//! `path` (or `baseUrl`, a plain path or `file://` URL; the model's value wins over the
//! provider's); `~` is expanded and a relative path is relative to the agent directory. Without
//! either, the file is `<agent dir>/models/<id>.gguf`. Defaults for such models: `contextWindow`
//! from the file's metadata (`<arch>.context_length`, at most 32768; 8192 when unknown),
//! `maxTokens` = min(contextWindow, 4096).
//! Any problem with the file leaves only the built-in catalogue, with the error kept in
//! [`ModelRegistry::error`] and warned about on stderr.
//!
//! Credentials for a provider, first hit wins (spec config.md §5.3): runtime key (`--api-key`),
//! `auth.json` (`api_key`, then an unexpired OAuth token), the provider's `models.json`
//! `apiKey`, environment variables ([`env_api_key`]). Keys and header values are resolved at
//! request time ([`ModelRegistry::request_auth`]); `!command` results of `auth.json` are cached
//! for the process lifetime, those of `models.json` are not.

use super::auth::AuthStorage;
use super::warn;
use pi_ai::Model;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

mod credentials;
mod custom;
mod extension;
#[cfg(test)]
mod extension_tests;
mod file;
mod lookup;
mod sources;

use custom::{apply_override, builtin_defaults, custom_model};
use file::{merge_maps, to_u64};
pub use file::{CostConfig, ModelConfig, ModelsConfig, ProviderConfig};
use sources::gguf_context_length;
pub use sources::{
    builtin_catalogue, discover_local_models, env_api_key, is_keyless, is_virtual, virtual_model,
    DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_TOKENS, LOCAL_API, LOCAL_DEFAULT_CONTEXT_WINDOW,
    LOCAL_MAX_CONTEXT_WINDOW, LOCAL_MAX_OUTPUT_TOKENS, LOCAL_PROVIDER, VIRTUAL_API,
};

/// Finds the adapter for a model's `api` (built by the composition root from `pi_ai`'s
/// adapters and the extension providers; `None`: no adapter for that API).
pub type ProviderResolver =
    std::sync::Arc<dyn Fn(&Model) -> Option<std::sync::Arc<dyn pi_ai::Provider>> + Send + Sync>;

/// Key and headers for one request (spec config.md §4 headers, §5.3 key precedence).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestAuth {
    /// The resolved API key, if any source has one.
    pub api_key: Option<String>,
    /// Resolved extra headers: the model's catalogue headers, then the provider's `models.json`
    /// headers, then the model's (later wins), plus `Authorization` when `authHeader` is set.
    pub headers: Map<String, Value>,
    /// The model runs in-process ([`is_keyless`]) and needs neither key nor headers.
    pub keyless: bool,
    /// A base URL the credential implies for this request (GitHub Copilot OAuth tokens).
    pub base_url: Option<String>,
    /// Credentials are configured but could not be made usable for this request (an OAuth
    /// refresh failed): the request fails with this text, as upstream's assistant error.
    pub error: Option<String>,
}

/// Where a model sits in registry order: built-ins by provider rank then catalogue position,
/// then custom models in `models.json` order, then discovered local models.
type OrderKey = (u8, usize, usize);

/// One provider's models, assembled on first use.
#[derive(Debug, Clone, Default)]
struct Slot {
    provider: String,
    /// Whether the provider has built-in models (they are parsed only when the slot is).
    builtin: bool,
    models: std::sync::OnceLock<Vec<(OrderKey, Model)>>,
}

/// All known models with their credential sources.
///
/// Built-in models are assembled per provider on first use (the catalogue files are parsed
/// lazily, `pi_ai::models::provider_models`), so start-up pays only for the providers it
/// looks at: [`ModelRegistry::available`] assembles the providers with credentials,
/// [`ModelRegistry::find`] one provider, [`ModelRegistry::all`] everything.
#[derive(Debug, Clone, Default)]
pub struct ModelRegistry {
    /// Explicit built-in models ([`ModelRegistry::from_parts`]); `None` = the catalogue.
    explicit_builtin: Option<Vec<Model>>,
    slots: Vec<Slot>,
    all: std::sync::OnceLock<Vec<Model>>,
    local: Vec<Model>,
    agent_dir: Option<PathBuf>,
    config: ModelsConfig,
    /// Providers registered by extensions (`pi.registerProvider`, upstream
    /// docs/custom-provider.md), in registration order; a layer above `models.json`.
    extension: Vec<(String, ProviderConfig)>,
    /// The extension providers registered with `streamSimple` (their models of the
    /// provider's `api` stream from the extension).
    extension_streams: Vec<String>,
    /// The extension providers registered with an `oauth` login, with its display name.
    extension_oauth: Vec<(String, Option<String>)>,
    /// The extension providers registered with `refreshModels`.
    extension_refreshes: Vec<String>,
    /// Virtual models (`pi.registerVirtualModel`), in registration order.
    virtual_models: Vec<Model>,
    /// `models.json` and extension header configs of individual models, by (provider, id).
    model_headers: HashMap<(String, String), Map<String, Value>>,
    auth: AuthStorage,
    error: Option<String>,
    models_json: Option<PathBuf>,
}

impl ModelRegistry {
    /// Loads `<agent_dir>/models.json` and `<agent_dir>/auth.json` over the built-in catalogue,
    /// then appends the GGUF files of `<agent_dir>/models/` ([`discover_local_models`]).
    /// A `models.json` problem is warned about on stderr and leaves the built-ins (and the
    /// discovered local models) only.
    pub fn load(agent_dir: &Path) -> Self {
        let path = agent_dir.join("models.json");
        let (config, error) = match ModelsConfig::load(&path) {
            Ok(c) => (c.unwrap_or_default(), None),
            Err(e) => {
                warn(&e);
                (ModelsConfig::default(), Some(e))
            }
        };
        let mut reg = Self::build(None, config, AuthStorage::load(agent_dir), Some(agent_dir));
        reg.add_local_models(discover_local_models(&agent_dir.join("models")));
        reg.error = error;
        reg.models_json = Some(path);
        reg
    }

    /// A registry from explicit parts (tests, embedders). Relative local GGUF paths in `config`
    /// stay relative; no folder is searched for GGUF files (see [`ModelRegistry::add_local_models`]).
    pub fn from_parts(builtin: Vec<Model>, config: ModelsConfig, auth: AuthStorage) -> Self {
        Self::build(Some(builtin), config, auth, None)
    }

    /// Appends `local` (discovered GGUF models) after every other model, skipping those whose
    /// provider/id is already in the registry (a `models.json` entry wins).
    pub fn add_local_models(&mut self, local: Vec<Model>) {
        self.local.extend(local);
        self.rebuild_slots();
    }

    fn build(
        explicit_builtin: Option<Vec<Model>>,
        config: ModelsConfig,
        auth: AuthStorage,
        agent_dir: Option<&Path>,
    ) -> Self {
        let mut reg = ModelRegistry {
            explicit_builtin,
            slots: Vec::new(),
            all: std::sync::OnceLock::new(),
            local: Vec::new(),
            agent_dir: agent_dir.map(Path::to_path_buf),
            config,
            extension: Vec::new(),
            extension_streams: Vec::new(),
            extension_oauth: Vec::new(),
            extension_refreshes: Vec::new(),
            virtual_models: Vec::new(),
            model_headers: HashMap::new(),
            auth,
            error: None,
            models_json: None,
        };
        reg.collect_model_headers();
        reg.rebuild_slots();
        reg
    }

    /// The model-level header configs of `models.json` then of the extension providers (a
    /// later layer's entry for the same model replaces an earlier one).
    fn collect_model_headers(&mut self) {
        let mut model_headers = HashMap::new();
        for (provider, p) in self.config.providers.iter().chain(&self.extension) {
            for (id, raw) in p.model_overrides.iter().flatten() {
                if let Ok(ModelConfig {
                    headers: Some(h), ..
                }) = serde_json::from_value::<ModelConfig>(raw.clone())
                {
                    model_headers.insert((provider.clone(), id.clone()), h);
                }
            }
            for mc in p.models.iter().flatten() {
                match &mc.headers {
                    Some(h) => {
                        model_headers.insert((provider.clone(), mc.id.clone()), h.clone());
                    }
                    None => {
                        model_headers.remove(&(provider.clone(), mc.id.clone()));
                    }
                }
            }
        }
        self.model_headers = model_headers;
    }

    /// The `models.json` entry of `provider`, then its extension entry (the later wins).
    fn provider_layers<'a>(
        &'a self,
        provider: &'a str,
    ) -> impl Iterator<Item = &'a ProviderConfig> {
        self.config.provider(provider).into_iter().chain(
            self.extension
                .iter()
                .filter(move |(n, _)| n == provider)
                .map(|(_, c)| c),
        )
    }

    /// Whether a configured `apiKey` gives `provider` credentials: an extension's counts when
    /// it is a `!command` or every variable it names is set (upstream `composeApiKeyAuth`
    /// `check`); a `models.json` one counts as soon as it is there (as before).
    fn configured_key_counts(&self, provider: &str) -> bool {
        let extension_key = self
            .extension
            .iter()
            .filter(|(n, _)| n == provider)
            .find_map(|(_, c)| c.api_key.as_deref());
        match extension_key {
            Some(raw) => raw.starts_with('!') || super::value::expand_template(raw, None).is_some(),
            None => self
                .config
                .provider(provider)
                .is_some_and(|p| p.api_key.is_some()),
        }
    }

    /// The configured `apiKey` of `provider` (the extension's over `models.json`'s).
    fn configured_api_key<'a>(&'a self, provider: &'a str) -> Option<&'a str> {
        self.provider_layers(provider)
            .filter_map(|p| p.api_key.as_deref())
            .last()
    }

    /// One slot per provider: built-in providers in catalogue order, then the other providers
    /// of `models.json`, then those of local models.
    fn rebuild_slots(&mut self) {
        let mut slots: Vec<Slot> = Vec::new();
        let add = |provider: &str, builtin: bool, slots: &mut Vec<Slot>| match slots
            .iter_mut()
            .find(|s| s.provider == provider)
        {
            Some(s) => s.builtin |= builtin,
            None => slots.push(Slot {
                provider: provider.to_string(),
                builtin,
                models: std::sync::OnceLock::new(),
            }),
        };
        match &self.explicit_builtin {
            Some(models) => models
                .iter()
                .for_each(|m| add(&m.provider, true, &mut slots)),
            None => pi_ai::models::builtin_providers()
                .iter()
                .filter(|p| p.models > 0)
                .for_each(|p| add(&p.id, true, &mut slots)),
        }
        for (provider, _) in self.config.providers.iter().chain(&self.extension) {
            add(provider, false, &mut slots);
        }
        for m in &self.local {
            add(&m.provider, false, &mut slots);
        }
        for m in &self.virtual_models {
            add(&m.provider, false, &mut slots);
        }
        self.slots = slots;
        self.all = std::sync::OnceLock::new();
    }

    /// The models of slot `slot`, assembled now if needed (see [`OrderKey`]).
    fn slot_models<'a>(&'a self, slot: &'a Slot) -> &'a [(OrderKey, Model)] {
        slot.models.get_or_init(|| self.assemble(&slot.provider))
    }

    /// Built-ins of `provider` with `models.json` applied, its custom models, then its local
    /// models (skipping provider/ids already present).
    fn assemble(&self, provider: &str) -> Vec<(OrderKey, Model)> {
        let rank = self
            .slots
            .iter()
            .position(|s| s.provider == provider)
            .unwrap_or(usize::MAX);
        let mut models: Vec<(OrderKey, Model)> = match &self.explicit_builtin {
            // Explicit built-ins keep their list order, whatever it is.
            Some(list) => list
                .iter()
                .enumerate()
                .filter(|(_, m)| m.provider == provider)
                .map(|(i, m)| ((0, i, 0), m.clone()))
                .collect(),
            None => pi_ai::models::provider_models(provider)
                .iter()
                .enumerate()
                .map(|(i, m)| ((0, rank, i), m.clone()))
                .collect(),
        };
        let mut custom_pos = 0usize;
        let layers = self
            .config
            .providers
            .iter()
            .map(|e| (e, false))
            .chain(self.extension.iter().map(|e| (e, true)));
        for ((name, p), from_extension) in layers {
            if name != provider {
                custom_pos += p.models.as_ref().map_or(0, Vec::len);
                continue;
            }
            // An extension's `models` replace the provider's models (upstream
            // `applyExtension`); model-level values still win over the provider's.
            if from_extension && p.models.is_some() {
                models.clear();
            }
            // Provider-level settings apply to the built-in models of that provider.
            for (_, m) in models.iter_mut() {
                if let Some(url) = &p.base_url {
                    m.base_url = url.clone();
                }
                if p.compat.is_some() {
                    m.compat = merge_maps(m.compat.as_ref(), p.compat.as_ref());
                }
            }
            for (id, raw) in p.model_overrides.iter().flatten() {
                let Ok(o) = serde_json::from_value::<ModelConfig>(raw.clone()) else {
                    continue;
                };
                if let Some((_, m)) = models.iter_mut().find(|(_, m)| &m.id == id) {
                    apply_override(m, &o);
                }
            }
            for mc in p.models.iter().flatten() {
                models.retain(|(_, m)| m.id != mc.id);
                models.push((
                    (1, custom_pos, 0),
                    custom_model(provider, p, mc, self.agent_dir.as_deref()),
                ));
                custom_pos += 1;
            }
        }
        for (i, m) in self.local.iter().enumerate() {
            if m.provider == provider && !models.iter().any(|(_, e)| e.id == m.id) {
                models.push(((2, i, 0), m.clone()));
            }
        }
        // Virtual models follow the provider's physical ones and hide one of the same id
        // (upstream `withVirtualModels`).
        for (i, v) in self.virtual_models.iter().enumerate() {
            if v.provider == provider {
                models.retain(|(_, m)| m.id != v.id);
                models.push(((3, i, 0), v.clone()));
            }
        }
        models
    }

    /// The models of the providers `keep` accepts, in registry order.
    fn collect(&self, keep: impl Fn(&Slot) -> bool) -> Vec<&Model> {
        let mut out: Vec<&(OrderKey, Model)> = self
            .slots
            .iter()
            .filter(|s| keep(s))
            .flat_map(|s| self.slot_models(s).iter())
            .collect();
        out.sort_by_key(|(k, _)| *k);
        out.into_iter().map(|(_, m)| m).collect()
    }
}
