//! Looking models up in the registry: reload, the lists (all, available, by provider) and
//! finding one model.

use super::{is_keyless, is_virtual, ModelRegistry};
use pi_ai::Model;
use std::path::Path;

impl ModelRegistry {
    /// Re-reads `models.json` and `auth.json` (keeping runtime keys is the caller's job).
    pub fn reload(&mut self, agent_dir: &Path) {
        let extension = std::mem::take(&mut self.extension);
        let streams = std::mem::take(&mut self.extension_streams);
        let oauth = std::mem::take(&mut self.extension_oauth);
        let refreshes = std::mem::take(&mut self.extension_refreshes);
        let virtual_models = std::mem::take(&mut self.virtual_models);
        *self = Self::load(agent_dir);
        self.extension = extension;
        self.extension_streams = streams;
        self.extension_oauth = oauth;
        self.extension_refreshes = refreshes;
        self.virtual_models = virtual_models;
        self.collect_model_headers();
        self.rebuild_slots();
    }

    /// The agent directory this registry was loaded from (`None` for [`ModelRegistry::from_parts`]).
    pub fn agent_dir(&self) -> Option<&Path> {
        self.agent_dir.as_deref()
    }

    /// The `models.json` error of the last load, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The `models.json` path this registry was loaded from.
    pub fn models_json_path(&self) -> Option<&Path> {
        self.models_json.as_deref()
    }

    /// Every known model, in registry order (assembles every provider on first call).
    pub fn all(&self) -> &[Model] {
        self.all
            .get_or_init(|| self.collect(|_| true).into_iter().cloned().collect())
    }

    /// Models that can be used now ([`ModelRegistry::model_has_auth`]: their provider has
    /// credentials, or they run in-process), in registry order. Only the providers with
    /// credentials (and those of `models.json` and local models) are assembled.
    pub fn available(&self) -> Vec<Model> {
        self.collect(|s| !s.builtin || self.has_auth(&s.provider))
            .into_iter()
            .filter(|m| self.model_has_auth(m))
            .cloned()
            .collect()
    }

    /// Whether `model` can be used without asking for credentials: it is a local GGUF model
    /// ([`is_keyless`]) or its provider [`has_auth`](ModelRegistry::has_auth).
    pub fn model_has_auth(&self, model: &Model) -> bool {
        is_keyless(model)
            || self.has_auth(&model.provider)
            || (is_virtual(model) && self.virtual_only(&model.provider))
    }

    /// Whether every model of `provider` is virtual (a provider of only virtual models needs no
    /// credentials, upstream `withVirtualModels` without a provider).
    pub(super) fn virtual_only(&self, provider: &str) -> bool {
        let own = self.provider_models(provider);
        !own.is_empty() && own.into_iter().all(is_virtual)
    }

    /// The model `provider`/`id` (exact, case-sensitive); assembles that provider only.
    pub fn find(&self, provider: &str, id: &str) -> Option<&Model> {
        let slot = self.slots.iter().find(|s| s.provider == provider)?;
        self.slot_models(slot)
            .iter()
            .map(|(_, m)| m)
            .find(|m| m.id == id)
    }

    /// The models of `provider` in registry order; assembles that provider only.
    pub fn provider_models(&self, provider: &str) -> Vec<&Model> {
        self.collect(|s| s.provider == provider)
    }

    /// Provider ids in registry order, without duplicates (assembles every provider).
    pub fn providers(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for m in self.all() {
            if !out.contains(&m.provider) {
                out.push(m.provider.clone());
            }
        }
        out
    }
}
